/* box-edge-conn.c: one client connection of the edge; see box-edge-conn.h. */
#include "config.h"

#include "box-edge-conn.h"

#include <libsoup/soup.h>
#include <string.h>

#include "box-agent-stream.h"
#include "box-edge-access.h"
#include "box-edge-io.h"
#include "box-edge-pool.h"
#include "box-edge-route.h"
#include "box-error.h"

#define RETRY_MS      250

struct _BoxEdgeConn {
  gint                  refs;
  BoxEngine            *engine;
  BoxEdgePool          *pool;          /* the server's */
  GIOStream            *client;
  GBufferedInputStream *cin;
  GOutputStream        *cout;
  char                 *peer;
  guint                 idle_timeout_s;
  GCancellable         *cancel;        /* the connection's: its end, a timeout, shutdown */
  GCancellable         *shutdown;
  gulong                shutdown_id;
  guint                 timer;
  gboolean              closed;
  GDestroyNotify        ended;
  gpointer              ended_data;

  /* the request under way */
  SoupMessageHeaders   *headers;
  char                 *method;
  char                 *path;          /* without the query */
  char                 *query;         /* without box_token, or NULL */
  char                 *host;
  char                 *name;
  char                 *project;
  guint                 port;
  gint64                length;        /* request body bytes; -1: chunked */
  gboolean              keep_alive;
  gboolean              upgrade;
  gboolean              strip_authorization;
  gint64                wait_until;
  gboolean              service_tried;
  guint                 pending;       /* request body and response still to finish */
  gint64                resp_length;   /* response body bytes; -1: until the sandbox closes */
  char                 *sandbox_id;    /* once routed to a sandbox: its usage is counted */
  gboolean              key_request;   /* it carried the project's key */
  guint64               body_sent;     /* response body bytes sent (counted at its end) */
  gboolean              body_timed_out; /* the client sent no body bytes for idle_timeout_s */
  gboolean              reused;        /* the stream came from the pool */
  gboolean              up_reusable;   /* the stream may go back to the pool after */
  gboolean              resp_chunked;
  BoxEdgeChunks         chunks;

  /* the stream to the port */
  BoxAgentStream       *up;
  GBufferedInputStream *uin;
  GOutputStream        *uout;
};

static BoxEdgeConn *
conn_ref (BoxEdgeConn *c)
{
  c->refs++;
  return c;
}

static void
clear_request (BoxEdgeConn *c)
{
  g_clear_pointer (&c->headers, soup_message_headers_unref);
  g_clear_pointer (&c->method, g_free);
  g_clear_pointer (&c->path, g_free);
  g_clear_pointer (&c->query, g_free);
  g_clear_pointer (&c->host, g_free);
  g_clear_pointer (&c->name, g_free);
  g_clear_pointer (&c->project, g_free);
  g_clear_pointer (&c->sandbox_id, g_free);
  c->key_request = FALSE;
  c->body_sent = 0;
  c->body_timed_out = FALSE;
  c->port = 0;
  c->length = 0;
  c->keep_alive = FALSE;
  c->upgrade = FALSE;
  c->strip_authorization = FALSE;
  c->service_tried = FALSE;
  c->pending = 0;
  c->reused = FALSE;
  c->up_reusable = FALSE;
  c->resp_chunked = FALSE;
}

static void
conn_unref (BoxEdgeConn *c)
{
  if (--c->refs > 0)
    return;
  clear_request (c);
  if (c->shutdown_id != 0)
    g_cancellable_disconnect (c->shutdown, c->shutdown_id);
  g_clear_object (&c->shutdown);
  g_clear_object (&c->uin);
  g_clear_object (&c->up);
  g_clear_object (&c->cin);
  g_clear_object (&c->client);
  g_clear_object (&c->cancel);
  g_clear_object (&c->engine);
  g_free (c->peer);
  if (c->ended != NULL)
    c->ended (c->ended_data);
  g_free (c);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxEdgeConn, conn_unref)

static void
clear_timer (BoxEdgeConn *c)
{
  if (c->timer != 0)
    g_source_remove (c->timer);
  c->timer = 0;
}

/* Lets the sandbox's stream go: gracefully (the hold ends once it closed)
 * or at once. */
static void
drop_upstream (BoxEdgeConn *c, gboolean abort)
{
  if (c->up == NULL)
    return;
  if (abort)
    box_agent_stream_abort (c->up);
  else
    g_io_stream_close_async (G_IO_STREAM (c->up), G_PRIORITY_DEFAULT, NULL, NULL, NULL);
  g_clear_object (&c->uin);
  g_clear_object (&c->up);
  c->uout = NULL;
}

static void
client_closed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxEdgeConn) c = user_data;

  g_io_stream_close_finish (G_IO_STREAM (source), result, NULL);
}

static void
conn_close (BoxEdgeConn *c)
{
  if (c->closed)
    return;
  c->closed = TRUE;
  clear_timer (c);
  g_cancellable_cancel (c->cancel);
  drop_upstream (c, TRUE);
  g_io_stream_close_async (c->client, G_PRIORITY_DEFAULT, NULL, client_closed, c);
  /* the reference of serve() goes with the close */
}

static void
shutdown_cb (GCancellable *shutdown, gpointer user_data)
{
  BoxEdgeConn *c = user_data;

  /* from the cancel, on the main thread: leave the rest to an idle */
  g_cancellable_cancel (c->cancel);
}

static gboolean
timeout_cb (gpointer user_data)
{
  BoxEdgeConn *c = user_data;

  c->timer = 0;
  conn_close (c);
  return G_SOURCE_REMOVE;
}

/* ---- the plumbing (box-edge-io.h), with the connection kept alive ------ */

typedef void (*ConnFunc) (BoxEdgeConn *c, gboolean ok);
typedef void (*HeadFunc) (BoxEdgeConn *c, GBytes *head, gboolean too_big);

typedef struct {
  BoxEdgeConn *c;
  ConnFunc     func;
  HeadFunc     head_func;
} Then;

static Then *
then_new (BoxEdgeConn *c, ConnFunc func, HeadFunc head_func)
{
  Then *then = g_new0 (Then, 1);

  then->c = conn_ref (c);
  then->func = func;
  then->head_func = head_func;
  return then;
}

static void
then_done (gboolean ok, gpointer user_data)
{
  Then *then = user_data;
  g_autoptr(BoxEdgeConn) c = then->c;
  ConnFunc func = then->func;

  g_free (then);
  if (!c->closed)
    func (c, ok);
}

static void
then_head (GBytes *head, gboolean too_big, gpointer user_data)
{
  Then *then = user_data;
  g_autoptr(BoxEdgeConn) c = then->c;
  HeadFunc func = then->head_func;

  g_free (then);
  if (!c->closed)
    func (c, head, too_big);
}

static void
write_string (BoxEdgeConn *c, GOutputStream *out, GString *text, ConnFunc func)
{
  box_edge_write (out, text, c->cancel, then_done, then_new (c, func, NULL));
}

static void
read_head (BoxEdgeConn *c, GBufferedInputStream *in, HeadFunc func)
{
  box_edge_read_head (in, BOX_EDGE_HEAD_MAX, c->cancel, then_head, then_new (c, NULL, func));
}

/* ---- usage stats (box-stats.h): memory only, on this thread ------------ */

/* The request got its answer's head with @status (101: a WebSocket). */
static void
count_answer (BoxEdgeConn *c, guint status)
{
  BoxStats *stats = box_engine_get_stats (c->engine);

  if (c->sandbox_id == NULL || stats == NULL)
    return;
  box_stats_count (stats, c->sandbox_id, status, c->key_request, c->peer,
                   soup_message_headers_get_one (c->headers, "User-Agent"));
}

static void
count_body (BoxEdgeConn *c, guint64 bytes)
{
  BoxStats *stats = box_engine_get_stats (c->engine);

  if (c->sandbox_id != NULL && stats != NULL)
    box_stats_add_bytes (stats, c->sandbox_id, bytes);
}

/* ---- answers of the edge itself ---------------------------------------- */

static void next_request (BoxEdgeConn *c);

static void
reply_sent (BoxEdgeConn *c, gboolean ok)
{
  if (ok && c->keep_alive)
    next_request (c);
  else
    conn_close (c);
}

/* An answer with @body (may be NULL) and the extra header lines @extra. */
static void
reply (BoxEdgeConn *c, guint status, const char *extra, const char *body)
{
  GString *text = g_string_new (NULL);
  gsize len = body != NULL ? strlen (body) : 0;

  /* a body not read yet would be taken for the next request */
  if (c->length != 0)
    c->keep_alive = FALSE;
  g_string_append_printf (text, "HTTP/1.1 %u %s\r\n", status, soup_status_get_phrase (status));
  if (body != NULL)
    g_string_append (text, "Content-Type: application/json\r\n");
  g_string_append_printf (text, "Content-Length: %" G_GSIZE_FORMAT "\r\n%s%s\r\n", len,
                          extra != NULL ? extra : "", c->keep_alive ? "" : "Connection: close\r\n");
  if (body != NULL)
    g_string_append (text, body);
  count_answer (c, status);
  count_body (c, len);
  write_string (c, c->cout, text, reply_sent);
}

static void
reply_error (BoxEdgeConn *c, const GError *error)
{
  g_autoptr(GError) converted = box_error_convert (error, NULL);
  g_autoptr(JsonNode) node = box_error_to_json (converted);
  g_autofree char *body = json_to_string (node, FALSE);

  if (converted->code == BOX_ERROR_INTERNAL)
    g_warning ("edge %s %s: %s", c->host != NULL ? c->host : "", c->path != NULL ? c->path : "",
               converted->message);
  drop_upstream (c, TRUE);
  reply (c, box_error_http_status (converted->code), NULL, body);
}

static void
reply_error_literal (BoxEdgeConn *c, BoxErrorCode code, const char *message)
{
  g_autoptr(GError) error = g_error_new_literal (BOX_ERROR, code, message);

  reply_error (c, error);
}

/* ---- the exchange with the port ---------------------------------------- */

static void
exchange_end (BoxEdgeConn *c)
{
  if (c->up != NULL && c->up_reusable && !c->chunks.extra &&
      g_buffered_input_stream_get_available (c->uin) == 0) {
    box_edge_buffered_shrink (c->uin);
    box_edge_pool_put (c->pool, c->sandbox_id, c->port, g_steal_pointer (&c->up),
                       g_steal_pointer (&c->uin));
    c->uout = NULL;
  }
  drop_upstream (c, FALSE);
  if (c->keep_alive)
    next_request (c);
  else
    conn_close (c);
}

static void
part_done (BoxEdgeConn *c)
{
  if (--c->pending == 0)
    exchange_end (c);
}

static void
response_body_done (BoxEdgeConn *c, gboolean ok)
{
  count_body (c, c->body_sent);
  /* (pending > 1: the sandbox answered before it took the whole body, so
   * nothing can follow on this connection) */
  if (!ok || c->pending > 1)
    conn_close (c);
  else
    part_done (c);
}

static void
request_body_done (BoxEdgeConn *c, gboolean ok)
{
  /* a client that stopped sending its body: cut, unanswered, as a head */
  if (c->body_timed_out) {
    conn_close (c);
    return;
  }
  /* a failed write to the sandbox still lets its answer through */
  if (!ok)
    c->keep_alive = FALSE;
  part_done (c);
}

static void
relay_done (BoxEdgeConn *c, gboolean ok)
{
  conn_close (c);
}

static void
relay_head_sent (BoxEdgeConn *c, gboolean ok)
{
  if (!ok) {
    conn_close (c);
    return;
  }
  box_edge_relay (G_INPUT_STREAM (c->cin), c->uout, c->cancel, then_done,
                  then_new (c, relay_done, NULL));
  box_edge_relay (G_INPUT_STREAM (c->uin), c->cout, c->cancel, then_done,
                  then_new (c, relay_done, NULL));
}

static void response_head (BoxEdgeConn *c, GBytes *head, gboolean too_big);

static void
interim_sent (BoxEdgeConn *c, gboolean ok)
{
  if (!ok)
    conn_close (c);
  else
    read_head (c, c->uin, response_head);
}

static void
response_head_sent (BoxEdgeConn *c, gboolean ok)
{
  if (!ok) {
    conn_close (c);
    return;
  }
  if (c->resp_length == 0 && !c->resp_chunked) {
    response_body_done (c, TRUE);
    return;
  }
  if (c->resp_chunked) {
    memset (&c->chunks, 0, sizeof c->chunks);
    box_edge_pump_chunked (G_INPUT_STREAM (c->uin), c->cout, &c->chunks, &c->body_sent, c->cancel,
                           then_done, then_new (c, response_body_done, NULL));
    return;
  }
  box_edge_pump_counted (G_INPUT_STREAM (c->uin), c->cout, c->resp_length, &c->body_sent, c->cancel,
                         then_done, then_new (c, response_body_done, NULL));
}

static void connect_try (BoxEdgeConn *c);

/* A stream from the pool failed before any answer came (the server closed
 * it meanwhile): the request goes again on a new one. */
static gboolean
retry_fresh (BoxEdgeConn *c)
{
  if (!c->reused)
    return FALSE;
  drop_upstream (c, TRUE);
  c->reused = FALSE;
  connect_try (c);
  return TRUE;
}

static void
response_head (BoxEdgeConn *c, GBytes *head, gboolean too_big)
{
  g_autoptr(SoupMessageHeaders) headers = soup_message_headers_new (SOUP_MESSAGE_HEADERS_RESPONSE);
  g_autofree char *phrase = NULL;
  SoupMessageHeadersIter iter;
  const char *name, *value;
  SoupHTTPVersion version;
  GString *text;
  guint status = 0;
  gsize len = 0;
  const char *data = head != NULL ? g_bytes_get_data (head, &len) : NULL;
  const char *length_value;
  guint64 length = 0;

  if (head == NULL && !too_big && retry_fresh (c))
    return;
  c->reused = FALSE;   /* it answered: what comes now is this request's */
  if (head == NULL ||
      !soup_headers_parse_response (data, (int) len, headers, &version, &status, &phrase)) {
    c->keep_alive = FALSE;
    reply_error_literal (c, BOX_ERROR_PORT_CLOSED,
                         "the server in the sandbox gave no valid HTTP answer");
    return;
  }
  text = g_string_new (NULL);
  g_string_append_printf (text, "HTTP/1.1 %u %s\r\n", status, phrase);
  soup_message_headers_iter_init (&iter, headers);
  while (soup_message_headers_iter_next (&iter, &name, &value))
    if (!box_edge_hop_by_hop (headers, name))
      g_string_append_printf (text, "%s: %s\r\n", name, value);

  if (status == SOUP_STATUS_SWITCHING_PROTOCOLS && c->upgrade) {
    g_string_append_printf (text, "Connection: Upgrade\r\nUpgrade: %s\r\n\r\n",
                            soup_message_headers_get_one (headers, "Upgrade") != NULL
                            ? soup_message_headers_get_one (headers, "Upgrade") : "websocket");
    count_answer (c, status);
    write_string (c, c->cout, text, relay_head_sent);
    return;
  }
  if (status >= 100 && status < 200) {
    g_string_append (text, "\r\n");
    write_string (c, c->cout, text, interim_sent);
    return;
  }

  length_value = soup_message_headers_get_one (headers, "Content-Length");
  if (strcmp (c->method, "HEAD") == 0 || status == 204 || status == 304)
    c->resp_length = 0;
  else if (length_value != NULL &&
           soup_message_headers_get_one (headers, "Transfer-Encoding") == NULL &&
           g_ascii_string_to_unsigned (length_value, 10, 0, G_MAXINT64, &length, NULL))
    c->resp_length = (gint64) length;
  else
    c->resp_length = -1;   /* chunked, or until the sandbox closes */
  c->resp_chunked = c->resp_length < 0 &&
                    soup_message_headers_header_contains (headers, "Transfer-Encoding", "chunked");
  if (c->resp_length < 0 && !c->resp_chunked) {
    c->keep_alive = FALSE;
    c->up_reusable = FALSE;
  }
  if (version != SOUP_HTTP_1_1 || soup_message_headers_header_contains (headers, "Connection",
                                                                        "close"))
    c->up_reusable = FALSE;
  g_string_append_printf (text, "%s\r\n", c->keep_alive ? "" : "Connection: close\r\n");
  /* a small body that came with the head goes in the same write: one TLS record */
  if (!c->resp_chunked && c->resp_length > 0 && c->resp_length <= BOX_EDGE_HEAD_START &&
      box_edge_take_buffered (c->uin, (gsize) c->resp_length, text)) {
    c->body_sent = (guint64) c->resp_length;
    c->resp_length = 0;
  }
  count_answer (c, status);
  write_string (c, c->cout, text, response_head_sent);
}

static void
request_head_sent (BoxEdgeConn *c, gboolean ok)
{
  if (!ok && retry_fresh (c))
    return;
  if (!ok) {
    c->keep_alive = FALSE;
    reply_error_literal (c, BOX_ERROR_PORT_CLOSED, "the server in the sandbox closed the connection");
    return;
  }
  c->pending = c->length != 0 && !c->upgrade ? 2 : 1;
  if (c->pending == 2)
    box_edge_pump_timed (G_INPUT_STREAM (c->cin), c->uout, c->length, c->idle_timeout_s,
                         &c->body_timed_out, c->cancel, then_done,
                         then_new (c, request_body_done, NULL));
  read_head (c, c->uin, response_head);
}

/* The request goes to the sandbox on c->up. */
static void
exchange_start (BoxEdgeConn *c)
{
  BoxEdgeUpstream up = {
    .method = c->method, .path = c->path, .query = c->query, .headers = c->headers,
    .peer = c->peer, .host = c->host, .strip_authorization = c->strip_authorization,
    .upgrade = c->upgrade, .close = c->length != 0,
  };

  /* a request with a body is not retried: its stream is not kept either */
  c->up_reusable = c->length == 0 && !c->upgrade;
  c->uout = g_io_stream_get_output_stream (G_IO_STREAM (c->up));
  write_string (c, c->uout, box_edge_upstream_head (&up), request_head_sent);
}

static gboolean
retry_cb (gpointer user_data)
{
  BoxEdgeConn *c = user_data;

  c->timer = 0;
  connect_try (c);
  return G_SOURCE_REMOVE;
}

static void
service_ensured (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxEdgeConn) c = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) service = box_engine_ensure_port_service_finish (c->engine, result, &error);

  if (c->closed)
    return;
  /* no service serves the port, or it did not start: wait for a listener all the same */
  if (service == NULL && !g_error_matches (error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
    g_debug ("edge: the service of port %u of %s did not start: %s", c->port, c->name,
             error->message);
  connect_try (c);
}

static void
port_connected (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxEdgeConn) c = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxAgentStream) stream = box_engine_port_connect_finish (c->engine, result, &error);

  if (c->closed) {
    if (stream != NULL)
      box_agent_stream_abort (stream);
    return;
  }
  if (stream == NULL) {
    if (!g_error_matches (error, BOX_ERROR, BOX_ERROR_PORT_CLOSED)) {
      reply_error (c, error);
    } else if (!c->service_tried) {
      c->service_tried = TRUE;
      box_engine_ensure_port_service_async (c->engine, c->project, c->name, c->port, c->cancel,
                                            service_ensured, conn_ref (c));
    } else if (g_get_monotonic_time () + RETRY_MS * 1000 <= c->wait_until) {
      c->timer = g_timeout_add (RETRY_MS, retry_cb, c);
    } else {
      g_autofree char *message = g_strdup_printf ("nothing listens on port %u in the sandbox",
                                                  c->port);
      reply_error_literal (c, BOX_ERROR_PORT_CLOSED, message);
    }
    return;
  }
  c->up = g_steal_pointer (&stream);
  c->uin = box_edge_buffered_new (g_io_stream_get_input_stream (G_IO_STREAM (c->up)));
  exchange_start (c);
}

static void
held (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxEdgeConn) c = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = box_engine_hold_finish (c->engine, result, &error);

  if (sandbox != NULL && c->closed) {
    box_engine_release (c->engine, sandbox->id);
    return;
  }
  if (c->closed)
    return;
  if (sandbox == NULL) {
    reply_error (c, error);
    return;
  }
  /* the hold passes to the stream (released already on an error) */
  box_engine_port_connect_async (c->engine, sandbox->id, c->port, c->cancel, port_connected,
                                 conn_ref (c));
}

static void
connect_try (BoxEdgeConn *c)
{
  box_engine_hold_async (c->engine, c->project, c->name, c->cancel, held, conn_ref (c));
}

/* ---- the request: route, access ---------------------------------------- */

/* The request is for this edge: access, then the port. */
static void
route (BoxEdgeConn *c, const char *query_token)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxProject) project = NULL;
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autofree char *port_key = NULL;
  g_autofree char *cookie = NULL;
  const char *authorization;
  const char *access;
  gboolean allowed;
  gboolean read_only_bearer = FALSE;

  project = box_engine_get_project (c->engine, c->project, NULL);
  if (project != NULL)
    sandbox = box_engine_get_sandbox (c->engine, c->project, c->name, NULL);
  if (sandbox == NULL || g_strcmp0 (sandbox->name, c->name) != 0) {
    reply_error_literal (c, BOX_ERROR_NOT_FOUND, "no sandbox at this address");
    return;
  }
  c->sandbox_id = g_strdup (sandbox->id);
  if (c->port == 0)
    c->port = sandbox->http_port;
  port_key = g_strdup_printf ("%u", c->port);
  access = g_hash_table_lookup (sandbox->port_access, port_key);

  /* ?box_token=KEY: the cookie for this host, and the same URL without it */
  if (query_token != NULL && box_edge_project_key (c->engine, c->project, query_token)) {
    c->key_request = TRUE;
    g_autofree char *extra = g_strdup_printf (
      "Location: https://%s%s%s%s\r\n"
      "Set-Cookie: " BOX_EDGE_TOKEN "=%s; HttpOnly; Secure; SameSite=Lax; Path=/\r\n",
      c->host, c->path, c->query != NULL ? "?" : "", c->query != NULL ? c->query : "",
      query_token);
    reply (c, SOUP_STATUS_FOUND, extra, NULL);
    return;
  }
  authorization = soup_message_headers_get_one (c->headers, "Authorization");
  /* any key of the project stays out of the sandbox; only a full one opens */
  if (authorization != NULL && g_ascii_strncasecmp (authorization, "Bearer ", 7) == 0 &&
      box_edge_project_credential (c->engine, c->project, authorization + 7, &read_only_bearer))
    c->strip_authorization = TRUE;
  cookie = box_edge_cookie_token (c->headers);
  c->key_request = (c->strip_authorization && !read_only_bearer) ||
                   box_edge_project_key (c->engine, c->project, cookie);
  allowed = c->key_request || g_strcmp0 (access, "public") == 0;
  if (!allowed) {
    reply_error_literal (c, BOX_ERROR_UNAUTHORIZED, "a valid API key is required");
    return;
  }
  c->wait_until = g_get_monotonic_time () + BOX_EDGE_PORT_WAIT_S * G_USEC_PER_SEC;
  /* a GET or HEAD without a body may go again if a kept stream turns out closed */
  if (c->length == 0 && !c->upgrade &&
      (strcmp (c->method, "GET") == 0 || strcmp (c->method, "HEAD") == 0) &&
      box_edge_pool_take (c->pool, c->sandbox_id, c->port, &c->up, &c->uin)) {
    c->reused = TRUE;
    exchange_start (c);
    return;
  }
  connect_try (c);
}

static char *
project_for_host (gpointer engine, const char *host, char **prefix)
{
  return box_engine_project_for_host (engine, host, prefix);
}

static void
request_head (BoxEdgeConn *c, GBytes *head, gboolean too_big)
{
  g_autofree char *target = NULL;
  g_autofree char *token = NULL;
  SoupHTTPVersion version = SOUP_HTTP_1_1;
  const char *data;
  const char *te, *length, *host;
  const char *question;
  guint64 value = 0;
  gsize len = 0;
  guint status;

  clear_timer (c);
  if (head == NULL) {
    if (!too_big) {
      conn_close (c);
    } else {
      c->keep_alive = FALSE;
      reply_error_literal (c, BOX_ERROR_INVALID, "the request head is too large");
    }
    return;
  }
  data = g_bytes_get_data (head, &len);
  c->headers = soup_message_headers_new (SOUP_MESSAGE_HEADERS_REQUEST);
  status = soup_headers_parse_request (data, (int) len, c->headers, &c->method, &target, &version);
  if (status != SOUP_STATUS_OK || target[0] != '/') {
    c->keep_alive = FALSE;
    reply_error_literal (c, BOX_ERROR_INVALID, "bad request");
    return;
  }
  c->keep_alive = version == SOUP_HTTP_1_1 &&
                  !soup_message_headers_header_contains (c->headers, "Connection", "close");
  question = strchr (target, '?');
  c->path = g_strndup (target, question != NULL ? (gsize) (question - target) : strlen (target));
  c->query = box_edge_strip_query (question != NULL ? question + 1 : NULL, &token);

  /* the body's framing: Content-Length, or chunked (then the connection ends after) */
  te = soup_message_headers_get_one (c->headers, "Transfer-Encoding");
  length = soup_message_headers_get_one (c->headers, "Content-Length");
  if (te != NULL) {
    c->length = -1;
    c->keep_alive = FALSE;
    if (g_ascii_strcasecmp (te, "chunked") != 0 || length != NULL) {
      reply_error_literal (c, BOX_ERROR_INVALID, "unsupported Transfer-Encoding");
      return;
    }
  } else if (length != NULL) {
    if (!g_ascii_string_to_unsigned (length, 10, 0, G_MAXINT64, &value, NULL)) {
      c->length = -1;
      c->keep_alive = FALSE;
      reply_error_literal (c, BOX_ERROR_INVALID, "bad Content-Length");
      return;
    }
    c->length = (gint64) value;
  }
  c->upgrade = soup_message_headers_get_one (c->headers, "Upgrade") != NULL &&
               soup_message_headers_header_contains (c->headers, "Connection", "upgrade");
  if (c->upgrade && c->length != 0) {
    c->keep_alive = FALSE;
    reply_error_literal (c, BOX_ERROR_INVALID, "an upgrade request has no body");
    return;
  }

  host = soup_message_headers_get_one (c->headers, "Host");
  c->host = g_strdup (host != NULL ? host : "");
  if (!box_edge_resolve_host (c->host, box_engine_get_config (c->engine)->sandbox_domain,
                              project_for_host, c->engine, &c->name, &c->project, &c->port)) {
    reply_error_literal (c, BOX_ERROR_NOT_FOUND, "no sandbox at this address");
    return;
  }
  route (c, token);
}

static void
next_request (BoxEdgeConn *c)
{
  clear_request (c);
  /* a large head grew it: an idle connection keeps the small one */
  box_edge_buffered_shrink (c->cin);
  if (c->idle_timeout_s > 0)
    c->timer = g_timeout_add_seconds (c->idle_timeout_s, timeout_cb, c);
  read_head (c, c->cin, request_head);
}

void
box_edge_conn_serve (BoxEngine *engine, BoxEdgePool *pool, GIOStream *stream, const char *peer,
                     guint idle_timeout_s, GCancellable *shutdown, GDestroyNotify ended,
                     gpointer data)
{
  BoxEdgeConn *c = g_new0 (BoxEdgeConn, 1);

  c->refs = 1;   /* until conn_close() */
  c->engine = g_object_ref (engine);
  c->pool = pool;
  c->client = g_object_ref (stream);
  c->cin = box_edge_buffered_new (g_io_stream_get_input_stream (stream));
  c->cout = g_io_stream_get_output_stream (stream);
  c->peer = g_strdup (peer);
  c->idle_timeout_s = idle_timeout_s;
  c->ended = ended;
  c->ended_data = data;
  c->cancel = g_cancellable_new ();
  c->shutdown = g_object_ref (shutdown);
  c->shutdown_id = g_cancellable_connect (shutdown, G_CALLBACK (shutdown_cb), c, NULL);
  next_request (c);
}
