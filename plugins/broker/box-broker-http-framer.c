/* box-broker-http-framer.c: where a message's body ends, for the broker's
 * HTTP/1.1 rewriter (box-broker-http.c), one byte of framing at a time:
 * Content-Length, chunked (sizes, extensions, CRLFs and trailers checked
 * and bounded), or until the connection closes.  No buffering: the caller
 * keeps or passes the bytes; see box-broker-http-private.h.
 */
#include "config.h"

#include "box-broker-http-private.h"

#include <string.h>

#include "box-error.h"

gboolean
box_broker_http_fail_invalid (GError **error, const char *why)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s", why);
  return FALSE;
}

void
box_broker_http_framer_start (BoxBrokerHttpFramer *framer, const BoxBrokerHttpHead *head, gboolean no_body,
                              gboolean request)
{
  memset (framer, 0, sizeof *framer);
  if (no_body)
    framer->state = BODY_DONE;
  else if (head->chunked)
    framer->state = BODY_CHUNK_SIZE;
  else if (head->has_coding)   /* an answer's other coding: until close */
    framer->state = BODY_CLOSE;
  else if (head->has_length) {
    framer->state = head->length > 0 ? BODY_LENGTH : BODY_DONE;
    framer->remain = head->length;
  } else
    framer->state = request ? BODY_DONE : BODY_CLOSE;
}

gboolean
box_broker_http_framer_byte (BoxBrokerHttpFramer *framer, guint8 c, GError **error)
{
  switch (framer->state) {
  case BODY_CHUNK_SIZE:
    if (g_ascii_isxdigit (c)) {
      if (++framer->digits > 15)
        return box_broker_http_fail_invalid (error, "a chunk size is too large");
      framer->remain = framer->remain * 16 + (guint64) g_ascii_xdigit_value (c);
    } else if (framer->digits > 0 && (c == ';' || c == ' ' || c == '\t'))
      framer->state = BODY_CHUNK_EXT;
    else if (framer->digits > 0 && c == '\r')
      framer->state = BODY_CHUNK_SIZE_LF;
    else
      return box_broker_http_fail_invalid (error, "a chunk size is not a hex number");
    return TRUE;
  case BODY_CHUNK_EXT:
    if (c == '\r')
      framer->state = BODY_CHUNK_SIZE_LF;
    else if ((c < 0x20 && c != '\t') || c == 0x7f || ++framer->line > BOX_BROKER_HTTP_MAX_LINE)
      return box_broker_http_fail_invalid (error, "a chunk extension is malformed or too long");
    return TRUE;
  case BODY_CHUNK_SIZE_LF:
    if (c != '\n')
      return box_broker_http_fail_invalid (error, "a chunk size line does not end with CRLF");
    framer->state = framer->remain > 0 ? BODY_CHUNK_DATA : BODY_TRAILER_START;
    framer->line = 0;
    return TRUE;
  case BODY_CHUNK_DATA_CR:
  case BODY_TRAILER_END_LF:
  case BODY_TRAILER_LINE_LF:
  case BODY_CHUNK_DATA_LF:
    if (c != (framer->state == BODY_CHUNK_DATA_CR ? '\r' : '\n'))
      return box_broker_http_fail_invalid (error, "a chunk does not end with CRLF");
    if (framer->state == BODY_CHUNK_DATA_CR)
      framer->state = BODY_CHUNK_DATA_LF;
    else if (framer->state == BODY_CHUNK_DATA_LF) {
      framer->state = BODY_CHUNK_SIZE;
      framer->digits = 0;
      framer->remain = 0;
    } else
      framer->state = framer->state == BODY_TRAILER_LINE_LF ? BODY_TRAILER_START : BODY_DONE;
    return TRUE;
  case BODY_TRAILER_START:
  case BODY_TRAILER_LINE:
    if (c == '\r')
      framer->state = framer->state == BODY_TRAILER_START ? BODY_TRAILER_END_LF : BODY_TRAILER_LINE_LF;
    else if (c == '\n' || c == '\0' || ++framer->line > BOX_BROKER_HTTP_MAX_HEAD)
      return box_broker_http_fail_invalid (error, "the trailers are malformed or too long");
    else
      framer->state = BODY_TRAILER_LINE;
    return TRUE;
  case BODY_DONE:
  case BODY_LENGTH:
  case BODY_CLOSE:
  case BODY_CHUNK_DATA:
  default:
    g_assert_not_reached ();
  }
}

gboolean
box_broker_http_framer_take (BoxBrokerHttpFramer *framer, const guint8 *data, gsize len, gsize *taken,
                             GError **error)
{
  gsize at = 0;

  while (at < len && framer->state != BODY_DONE) {
    if (framer->state == BODY_CLOSE) {
      at = len;
    } else if (framer->state == BODY_LENGTH || framer->state == BODY_CHUNK_DATA) {
      gsize n = (gsize) MIN ((guint64) (len - at), framer->remain);

      at += n;
      framer->remain -= n;
      if (framer->remain == 0)
        framer->state = framer->state == BODY_LENGTH ? BODY_DONE : BODY_CHUNK_DATA_CR;
    } else if (!box_broker_http_framer_byte (framer, data[at++], error))
      return FALSE;
  }
  *taken = at;
  return TRUE;
}
