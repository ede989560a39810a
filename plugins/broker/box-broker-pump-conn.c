/* box-broker-pump-conn.c: one brokered connection, on the pump's thread;
 * the loop, the hand-over and the caps are box-broker-pump.c's.
 *
 * A connection has two sides, the client (the sandbox) and the upstream
 * (the real host), each a nonblocking socket with a GnuTLS session over
 * it.  The sessions read their socket themselves (a pull function; the
 * client's first gets the bytes the network already read) and write into
 * a buffer of ours (a push function that never blocks), which the step
 * sends when the socket takes it.  So GnuTLS never sees EAGAIN on a write,
 * and backpressure is ours: a side is not read while the other side's
 * buffer is over BOX_BROKER_PUMP_BUFFER.
 *
 * A connection goes: upstream handshake (verified against the trust
 * store; a failure closes the client before its handshake even starts),
 * then the client's handshake with a leaf for the host, then the pump
 * through box-broker-http, then closing (buffers drained, a few seconds at
 * most).  The client's half-close (close_notify, or a bare FIN) is passed
 * upstream as the same and the answers still flow back; the upstream's end
 * closes both.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "box-error.h"
#include "box-broker-pump-private.h"

#define CLOSING_MS 5000
#define READ_CHUNK (16 * 1024)

/* ---- transport ---------------------------------------------------------- */

static ssize_t
push (gnutls_transport_ptr_t ptr, const void *data, size_t len)
{
  Side *side = ptr;

  if (!side->broken)
    g_byte_array_append (side->out, data, (guint) len);
  return (ssize_t) len;
}

static ssize_t
pull (gnutls_transport_ptr_t ptr, void *data, size_t len)
{
  Side *side = ptr;
  Conn *conn = side->conn;
  ssize_t n;

  if (side == &conn->side[CLIENT] && conn->head != NULL) {
    gsize head_len = g_bytes_get_size (conn->head);
    if (conn->head_off < head_len) {
      gsize take = MIN (len, head_len - conn->head_off);
      memcpy (data, (const guint8 *) g_bytes_get_data (conn->head, NULL) + conn->head_off, take);
      conn->head_off += take;
      return (ssize_t) take;
    }
  }
  n = recv (side->fd, data, len, 0);
  if (n == 0 && side == &conn->side[CLIENT] && conn->state == PUMPING) {
    /* a bare FIN is fatal to a GnuTLS session, which could then send no
     * more: the pump sees it as the client's half-close instead */
    side->fin = TRUE;
    gnutls_transport_set_errno (side->tls, EAGAIN);
    return -1;
  }
  if (n < 0)
    gnutls_transport_set_errno (side->tls, errno);
  return n;
}

/* Sends what the side's buffer holds, as far as the socket takes it. */
static void
flush_side (Side *side)
{
  while (side->out->len > 0 && !side->broken) {
    ssize_t n = send (side->fd, side->out->data, side->out->len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    if (n <= 0) {
      side->broken = TRUE;
      break;
    }
    g_byte_array_remove_range (side->out, 0, (guint) n);
  }
  if (side->broken)
    g_byte_array_set_size (side->out, 0);
  else if (side->shut_wr && side->out->len == 0) {
    (void) shutdown (side->fd, SHUT_WR);
    side->shut_wr = FALSE;
  }
}

static gboolean
new_session (Side *side, unsigned flags, GError **error)
{
  static const gnutls_datum_t http11 = { (unsigned char *) "http/1.1", 8 };
  int rc;

  rc = gnutls_init (&side->tls, flags | GNUTLS_NONBLOCK);
  if (rc >= 0)
    rc = gnutls_set_default_priority (side->tls);
  if (rc >= 0)
    rc = gnutls_alpn_set_protocols (side->tls, &http11, 1, 0);
  if (rc < 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "broker: TLS session: %s", gnutls_strerror (rc));
    return FALSE;
  }
  gnutls_transport_set_ptr (side->tls, side);
  gnutls_transport_set_push_function (side->tls, push);
  gnutls_transport_set_pull_function (side->tls, pull);
  return TRUE;
}

gboolean
box_broker_conn_start (Conn *conn, GError **error)
{
  Side *upstream = &conn->side[UPSTREAM];
  g_autoptr(GInetAddress) ip = NULL;

  if (!new_session (upstream, GNUTLS_CLIENT, error))
    return FALSE;
  if (gnutls_credentials_set (upstream->tls, GNUTLS_CRD_CERTIFICATE, conn->pump->trust) < 0) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "no TLS credentials");
    return FALSE;
  }
  ip = g_inet_address_new_from_string (conn->host);
  /* no server name for an address (RFC 6066), but verified all the same */
  if (ip == NULL)
    gnutls_server_name_set (upstream->tls, GNUTLS_NAME_DNS, conn->host, strlen (conn->host));
  gnutls_session_set_verify_cert (upstream->tls, conn->host, 0);
  return TRUE;
}

/* ---- one connection's steps ---------------------------------------------- */

/* From now on nothing more is read; what is buffered still goes out, with
 * a TLS close where a session is up. */
static void
side_bye (Side *side)
{
  if (!side->bye)
    gnutls_bye (side->tls, GNUTLS_SHUT_WR);
  side->bye = TRUE;
}

void
box_broker_conn_close (Conn *conn)
{
  if (conn->state == CLOSING)
    return;
  if (conn->state == PUMPING) {
    side_bye (&conn->side[CLIENT]);
    side_bye (&conn->side[UPSTREAM]);
  } else if (conn->state == CLIENT_HANDSHAKE) {
    side_bye (&conn->side[UPSTREAM]);
  }
  conn->state = CLOSING;
  conn->deadline = deadline_in (CLOSING_MS);
}

/* Sends all of @data as records of @side's session (they land in its
 * buffer: the push function never blocks). */
static gboolean
send_plain (Side *side, const guint8 *data, gsize len)
{
  while (len > 0) {
    ssize_t n = gnutls_record_send (side->tls, data, len);
    if (n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_AGAIN)
      continue;
    if (n < 0)
      return FALSE;
    data += n;
    len -= (gsize) n;
  }
  return TRUE;
}

static void
answer_and_close (Conn *conn, guint status, const char *code, const char *message)
{
  g_autoptr(GBytes) answer = box_broker_http_error_response (status, code, message);

  send_plain (&conn->side[CLIENT], g_bytes_get_data (answer, NULL), g_bytes_get_size (answer));
  box_broker_conn_close (conn);
}

static gboolean
handshake (Conn *conn, int which)
{
  Side *side = &conn->side[which];
  int rc = gnutls_handshake (side->tls);

  if (rc == GNUTLS_E_SUCCESS)
    return TRUE;
  if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED || !gnutls_error_is_fatal (rc))
    return FALSE;
  if (which == UPSTREAM) {
    /* never a secret here: the host and GnuTLS's reason */
    g_message ("broker: %s: upstream TLS refused (%s); the sandbox's connection is closed",
               conn->host, gnutls_strerror (rc));
  } else {
    g_debug ("broker: %s: the sandbox's TLS handshake failed: %s", conn->host, gnutls_strerror (rc));
  }
  conn->state = CLOSING;   /* no session to close: just drop the sockets */
  conn->deadline = 0;
  return FALSE;
}

static gboolean
start_client (Conn *conn)
{
  g_autoptr(GError) error = NULL;
  Side *client = &conn->side[CLIENT];

  conn->leaf = box_broker_ca_leaf (conn->pump->ca, conn->host, &error);
  if (conn->leaf == NULL || !new_session (client, GNUTLS_SERVER, &error) ||
      gnutls_credentials_set (client->tls, GNUTLS_CRD_CERTIFICATE,
                              box_broker_leaf_get_credentials (conn->leaf)) < 0) {
    g_message ("broker: %s: %s", conn->host, error != NULL ? error->message : "no TLS credentials");
    box_broker_conn_close (conn);
    return FALSE;
  }
  conn->state = CLIENT_HANDSHAKE;
  return TRUE;
}

static void
start_pumping (Conn *conn)
{
  g_autoptr(GPtrArray) rules = box_broker_secrets_rules (conn->pump->secrets, conn->sandbox, conn->host);

  if (rules->len == 0) {
    box_broker_conn_close (conn);
    return;
  }
  conn->http = box_broker_http_new (rules, conn->host);
  conn->state = PUMPING;
  conn->deadline = deadline_in (g_atomic_int_get (&conn->pump->idle_ms));
}

/* Reads from side @from as long as there is something and the other side's
 * buffer has room; TRUE when the connection goes on. */
static gboolean
pump_from (Conn *conn, int from)
{
  Side *src = &conn->side[from], *dst = &conn->side[1 - from];
  guint8 buf[READ_CHUNK];
  g_autoptr(GByteArray) plain = g_byte_array_new ();
  guint warnings = 0;

  while (conn->state == PUMPING && !src->eof && dst->out->len < BOX_BROKER_PUMP_BUFFER) {
    g_autoptr(GError) error = NULL;
    ssize_t n = gnutls_record_recv (src->tls, buf, sizeof buf);
    /* what a failing call wrote to @plain is dropped, so whether an answer
     * can still be sent is what it was before the call */
    gboolean can_answer = box_broker_http_can_answer (conn->http);
    gboolean ok;

    if ((n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) && !src->fin)
      break;
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
      n = 0;   /* the client's bare FIN (pull) */
    if (n < 0 && !gnutls_error_is_fatal ((int) n) && ++warnings <= 16)
      continue;   /* a warning alert, a renegotiation asked: ignored, a few */
    g_byte_array_set_size (plain, 0);
    if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
      src->eof = TRUE;
      /* the client's half-close (a close_notify or a bare FIN: the
       * sandbox is the only one on its path) goes upstream as one, a
       * close_notify and a FIN; its session can still send the answers */
      if (from == CLIENT) {
        side_bye (dst);
        dst->shut_wr = TRUE;
      }
      ok = from == CLIENT || box_broker_http_upstream_eof (conn->http, plain, &error);
    } else if (n < 0) {
      g_debug ("broker: %s: %s", conn->host, gnutls_strerror ((int) n));
      box_broker_conn_close (conn);
      return FALSE;
    } else if (from == CLIENT) {
      ok = box_broker_http_from_client (conn->http, buf, (gsize) n, plain, &error);
    } else {
      ok = box_broker_http_from_upstream (conn->http, buf, (gsize) n, plain, &error);
    }
    conn->deadline = deadline_in (g_atomic_int_get (&conn->pump->idle_ms));
    if (!ok) {
      if (from == CLIENT && g_error_matches (error, BOX_ERROR, BOX_ERROR_INVALID))
        answer_and_close (conn, 400, "invalid", error->message);
      else if (from == UPSTREAM && can_answer)
        answer_and_close (conn, 502, "broker_failed", error->message);
      else
        box_broker_conn_close (conn);
      return FALSE;
    }
    if (plain->len > 0 && !send_plain (dst, plain->data, plain->len)) {
      box_broker_conn_close (conn);
      return FALSE;
    }
    if (src->eof && from == UPSTREAM) {
      /* the answers are done: what the client has is sent, then both
       * close (the client's end alone only half-closes: the answers to
       * what it sent still come, until the upstream ends or idles) */
      box_broker_conn_close (conn);
      return FALSE;
    }
  }
  return TRUE;
}

/* Whether a session holds plaintext already read from its socket (epoll
 * would not tell) that may be read now, the other side having room. */
static gboolean
readable_inside (Conn *conn)
{
  if (conn->state != PUMPING)
    return FALSE;
  for (int i = 0; i < 2; i++) {
    if (!conn->side[i].eof && conn->side[1 - i].out->len < BOX_BROKER_PUMP_BUFFER &&
        gnutls_record_check_pending (conn->side[i].tls) > 0)
      return TRUE;
  }
  return FALSE;
}

void
box_broker_conn_step (Conn *conn)
{
  for (;;) {
    State before = conn->state;

    switch (conn->state) {
    case UPSTREAM_HANDSHAKE:
      if (handshake (conn, UPSTREAM))
        start_client (conn);
      break;
    case CLIENT_HANDSHAKE:
      if (handshake (conn, CLIENT))
        start_pumping (conn);
      break;
    case PUMPING:
      if (pump_from (conn, CLIENT))
        pump_from (conn, UPSTREAM);
      break;
    case CLOSING:
      break;
    }
    flush_side (&conn->side[CLIENT]);
    flush_side (&conn->side[UPSTREAM]);
    if (conn->state == before && !readable_inside (conn))
      return;
  }
}
