/* box-broker-http-private.h: the parts of box-broker-http.c that read and
 * write one head (box-broker-http-head.c) and frame a body
 * (box-broker-http-framer.c); for the rewriter and its tests only. */
#pragma once

#include "box-broker-http.h"

G_BEGIN_DECLS

/* The longest chunk-size or trailer line accepted in a chunked body. */
#define BOX_BROKER_HTTP_MAX_LINE 4096

typedef struct {
  char *name;
  char *value;   /* without the surrounding whitespace */
} BoxBrokerHttpField;

/* One parsed head.  A request has method, target and version; an answer
 * has version and status.  The framing fields are checked for anything
 * two readers could see differently. */
typedef struct {
  char      *method;
  char      *target;
  char      *version;
  guint      status;
  GPtrArray *fields;       /* BoxBrokerHttpField*, in order */
  gboolean   has_length;
  guint64    length;
  gboolean   chunked;      /* Transfer-Encoding ends with chunked */
  gboolean   has_coding;   /* any Transfer-Encoding */
  gboolean   upgrade;      /* an Upgrade header */
  gboolean   websocket;    /* Upgrade: websocket + Connection: upgrade */
} BoxBrokerHttpHead;

void box_broker_http_head_free (BoxBrokerHttpHead *head);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxBrokerHttpHead, box_broker_http_head_free)

/* Where the head in @buf[0..@len) ends (the index after its empty line),
 * or 0 when it does not yet; @from: bytes before it were searched
 * already. */
gsize box_broker_http_head_end (const guint8 *buf, gsize len, gsize from);

/* @data: a whole head including its empty line.  BOX_ERROR_INVALID on
 * anything the broker refuses to read. */
BoxBrokerHttpHead *box_broker_http_head_parse (const guint8 *data, gsize len,
                                               gboolean request, GError **error);

/* Whether the rule with path prefix @prefix applies to request target
 * @target; see box-broker-http.h. */
gboolean box_broker_http_path_matches (const char *prefix, const char *target);

/* Whether every Host of @head and an absolute-form target's authority
 * name @host (any case, optionally :443), so that the server the
 * connection's TLS reached serves it. */
gboolean box_broker_http_host_matches (const BoxBrokerHttpHead *head, const char *host);

/* The request @head with @rules applied, as bytes, appended to @out. */
gboolean box_broker_http_write_request (BoxBrokerHttpHead *head, GPtrArray *rules,
                                        GByteArray *out, GError **error);

/* Sets BOX_ERROR_INVALID with @why; FALSE. */
gboolean box_broker_http_fail_invalid (GError **error, const char *why);

/* A body's framing: where it ends, read one byte of framing at a time. */
typedef enum {
  BODY_DONE,
  BODY_LENGTH,
  BODY_CLOSE,
  BODY_CHUNK_SIZE,
  BODY_CHUNK_EXT,
  BODY_CHUNK_SIZE_LF,
  BODY_CHUNK_DATA,
  BODY_CHUNK_DATA_CR,
  BODY_CHUNK_DATA_LF,
  BODY_TRAILER_START,
  BODY_TRAILER_LINE,
  BODY_TRAILER_LINE_LF,
  BODY_TRAILER_END_LF,
} BodyState;

typedef struct {
  BodyState state;
  guint64   remain;
  guint     digits;
  gsize     line;      /* of a chunk-size line, or of all trailers */
} BoxBrokerHttpFramer;

/* Begins the body of @head (none when @no_body); a request without length
 * or chunking has none, an answer's runs until the connection closes. */
void     box_broker_http_framer_start (BoxBrokerHttpFramer *framer, const BoxBrokerHttpHead *head,
                                       gboolean no_body, gboolean request);
/* One byte of chunked framing (a chunk-size line, a chunk's CRLF, the
 * trailers), not of data; BOX_ERROR_INVALID on what is malformed or too
 * long. */
gboolean box_broker_http_framer_byte  (BoxBrokerHttpFramer *framer, guint8 c, GError **error);
/* How many of the @len bytes at @data belong to the body (*@taken); the
 * framer is BODY_DONE when it ended there. */
gboolean box_broker_http_framer_take  (BoxBrokerHttpFramer *framer, const guint8 *data, gsize len,
                                       gsize *taken, GError **error);

/* Whether a WebSocket upgrade made both directions pass through. */
gboolean box_broker_http_is_tunnel (BoxBrokerHttp *http);

G_END_DECLS
