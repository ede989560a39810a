/* box-insandbox.c: the in-sandbox socket, host side (see box-insandbox.h).
 *
 * Routing mirrors box-http-server.c's early stage: "/fs/stat" from inside
 * sandbox sb-x is the route "/v1/sandboxes/{sandbox}/fs/stat" with the
 * parameter sb-x, provided the route table flags it
 * BOX_HTTP_ROUTE_IN_SANDBOX; the principal is BOX_PRINCIPAL_SANDBOX (no
 * key is asked for), then the route's own handler runs.  Each connection
 * comes from one sandbox: its remote address object carries the tag.
 *
 * Every answer closes its connection (Connection: close): a connection is
 * one agent channel, a stream with no socket of its own, which the API
 * server's idle-connection watch (box-http-keepalive.c) could not watch.
 *
 * Bounds (the guest is hostile): a connection whose request head is not
 * complete [boxd] http_header_timeout_s after it was accepted is broken
 * (its channel closes, nothing is answered), as on the API socket; and a
 * sandbox holds at most BOX_INSANDBOX_MAX_CONNECTIONS connections at once
 * (more are broken at once; the agent itself opens at most as many), of
 * which at most BOX_INSANDBOX_MAX_EXEC_RUNS exec/run calls (their answers
 * are built whole; more are 409 conflict).
 */
#include "config.h"

#include <string.h>

#include "box-http-limits.h"
#include "box-http-server.h"
#include "box-http-util.h"
#include "box-insandbox.h"
#include "box-sandbox-connections.h"

#define TAG_KEY     "box-insandbox-tag"
#define REQUEST_KEY "box-insandbox-request"

/* What one sandbox holds at once. */
typedef struct {
  guint conns;
  guint exec_runs;
} Held;

typedef struct {
  char       *sandbox_id;
  char       *project;
  GWeakRef    stream;      /* the connection's GIOStream */
  GHashTable *held;        /* the owner's: sandbox id -> Held* (a ref) */
  gboolean    exec_run;    /* holds one of the sandbox's exec/run places */
  GSource    *head_timeout; /* until the request head is complete */
  guint       header_timeout_s;
} ConnTag;

struct _BoxInsandbox {
  GObject        parent_instance;
  BoxEngine     *engine;
  BoxHttpServer *http;
  SoupServer    *soup;
  BoxSandboxConnections *connections;
  GHashTable    *held;          /* sandbox id -> Held* */
  gboolean       shut_down;
};

G_DEFINE_FINAL_TYPE (BoxInsandbox, box_insandbox, G_TYPE_OBJECT)

/* Breaks @stream: an agent stream's channel closes (libsoup then sees it
 * end); another stream (tests) is closed. */
static void
break_stream (GIOStream *stream)
{
  if (stream != NULL && !box_sandbox_connections_abort (stream))
    g_io_stream_close_async (stream, G_PRIORITY_DEFAULT, NULL, NULL, NULL);
}

static void
conn_tag_stop_head_timeout (ConnTag *tag)
{
  if (tag->head_timeout == NULL)
    return;
  g_source_destroy (tag->head_timeout);
  g_clear_pointer (&tag->head_timeout, g_source_unref);
}

static Held *
held_of (GHashTable *held, const char *sandbox_id)
{
  Held *h = g_hash_table_lookup (held, sandbox_id);

  if (h == NULL) {
    h = g_new0 (Held, 1);
    g_hash_table_insert (held, g_strdup (sandbox_id), h);
  }
  return h;
}

/* The connection goes away with its tag: its places are given back. */
static void
conn_tag_free (ConnTag *tag)
{
  Held *h = held_of (tag->held, tag->sandbox_id);

  h->conns--;
  if (tag->exec_run)
    h->exec_runs--;
  if (h->conns == 0)
    g_hash_table_remove (tag->held, tag->sandbox_id);
  g_hash_table_unref (tag->held);
  conn_tag_stop_head_timeout (tag);
  g_free (tag->sandbox_id);
  g_free (tag->project);
  g_weak_ref_clear (&tag->stream);
  g_free (tag);
}

/* ---- routing ------------------------------------------------------------ */

/* The route @method @path names on the socket of @sandbox_id; @mapped gets
 * the segments of the API path it stands for. */
static const BoxHttpRoute *
find_route (const char *method, const char *const *segments, const char *sandbox_id,
            GStrv *mapped)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  gboolean self_alias = g_strcmp0 (segments[0], "self") == 0 && segments[1] == NULL;
  const BoxHttpRoute *routes;
  guint n_routes = 0;

  /* nothing under /v1 (the prefixed paths included) */
  if (segments[0] == NULL || g_str_equal (segments[0], "v1") || g_str_equal (segments[0], ""))
    return NULL;
  g_strv_builder_add_many (builder, "v1", "sandboxes", sandbox_id, NULL);
  if (!self_alias)
    g_strv_builder_addv (builder, (const char **) segments);
  *mapped = g_strv_builder_end (builder);

  routes = box_http_server_get_routes (&n_routes);
  for (guint i = 0; i < n_routes; i++) {
    const BoxHttpRoute *route = &routes[i];

    if (self_alias) {
      /* GET /self is the sandbox's record: GET /v1/sandboxes/{sandbox} */
      if (g_str_equal (route->pattern, "/v1/sandboxes/{sandbox}") &&
          g_str_equal (route->method, "GET") && box_http_method_matches (route->method, method))
        return route;
      continue;
    }
    if ((route->flags & BOX_HTTP_ROUTE_IN_SANDBOX) != 0 &&
        box_http_method_matches (route->method, method) &&
        box_http_route_matches (route->pattern, (const char *const *) *mapped, NULL))
      return route;
  }
  return NULL;
}

static ConnTag *
conn_tag_of (SoupServerMessage *msg)
{
  GSocketAddress *remote = soup_server_message_get_remote_address (msg);

  return remote != NULL ? g_object_get_data (G_OBJECT (remote), TAG_KEY) : NULL;
}

/* A JSON body too large is not kept (see box-http-server.c). */
static void
on_request_chunk (SoupServerMessage *msg, GBytes *chunk, gpointer user_data)
{
  SoupMessageBody *body = soup_server_message_get_request_body (msg);
  BoxHttpRequest *req = g_object_get_data (G_OBJECT (msg), REQUEST_KEY);

  if (body->length <= BOX_HTTP_BODY_MAX)
    return;
  soup_message_body_set_accumulate (body, FALSE);
  soup_message_body_truncate (body);
  if (req != NULL)
    req->body_too_large = TRUE;
}

static void
close_connection (SoupServerMessage *msg)
{
  soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection",
                                "close");
}

/* exec/run answers whole (up to 16 MiB per stream, base64): a sandbox
 * may have BOX_INSANDBOX_MAX_EXEC_RUNS of them at once, each counted until
 * its connection ends (an answer never read stays held until then). */
static gboolean
take_exec_run_place (BoxInsandbox *self, ConnTag *tag, const BoxHttpRoute *route, GError **error)
{
  Held *h;

  if (route->handler != box_http_exec_run || tag->exec_run)
    return TRUE;
  h = held_of (self->held, tag->sandbox_id);
  if (h->exec_runs >= BOX_INSANDBOX_MAX_EXEC_RUNS) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT,
                 "too many exec/run calls from inside the sandbox: it may have at most %u at once "
                 "(one counts until its connection ends); read or close one first",
                 BOX_INSANDBOX_MAX_EXEC_RUNS);
    return FALSE;
  }
  h->exec_runs++;
  tag->exec_run = TRUE;
  return TRUE;
}

static void
early_handler (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
               gpointer user_data)
{
  BoxInsandbox *self = BOX_INSANDBOX (user_data);
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  SoupMessageBody *body = soup_server_message_get_request_body (msg);
  const char *method = soup_server_message_get_method (msg);
  ConnTag *tag = conn_tag_of (msg);
  g_autoptr(BoxHttpRequest) req = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) segments = box_http_split_path (path);
  g_auto(GStrv) mapped = NULL;
  const BoxHttpRoute *route;
  GPtrArray *query_params;

  close_connection (msg);
  if (tag != NULL)
    conn_tag_stop_head_timeout (tag);   /* the head is complete */
  if (tag == NULL) {
    soup_message_body_set_accumulate (body, FALSE);
    box_http_reply_error_literal (msg, BOX_ERROR_INTERNAL, "connection of no sandbox");
    return;
  }
  if (segments == NULL) {
    soup_message_body_set_accumulate (body, FALSE);
    box_http_reply_error_literal (msg, BOX_ERROR_INVALID, "malformed escape in the path");
    return;
  }
  route = find_route (method, (const char *const *) segments, tag->sandbox_id, &mapped);
  if (route == NULL) {
    g_autofree char *message = g_strdup_printf ("no route %s %s on the in-sandbox socket",
                                                method, path);

    soup_message_body_set_accumulate (body, FALSE);
    box_http_reply_error_literal (msg, BOX_ERROR_NOT_FOUND, message);
    return;
  }

  req = box_http_request_new (self->http, self->engine, msg);
  req->route = route;
  req->principal = g_new0 (BoxPrincipal, 1);
  req->principal->kind = BOX_PRINCIPAL_SANDBOX;
  req->principal->project = g_strdup (tag->project);
  req->principal->sandbox_id = g_strdup (tag->sandbox_id);
  box_http_route_matches (route->pattern, (const char *const *) mapped, req->path_params);

  query_params = box_http_parse_query (g_uri_get_query (soup_server_message_get_uri (msg)), &error);
  if (query_params == NULL) {
    soup_message_body_set_accumulate (body, FALSE);
    box_http_reply_error (msg, error);
    return;
  }
  g_ptr_array_unref (req->query);
  req->query = query_params;

  /* the sandbox's request rate and open streams, as a key's */
  if (!box_http_limits_admit (box_http_server_get_limits (self->http), req, &error) ||
      !take_exec_run_place (self, tag, route, &error)) {
    soup_message_body_set_accumulate (body, FALSE);
    box_http_reply_error (msg, error);
    return;
  }

  if (!route->json_body) {
    soup_message_body_set_accumulate (body, FALSE);
  } else if (soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CONTENT_LENGTH &&
             soup_message_headers_get_content_length (headers) > BOX_HTTP_BODY_MAX) {
    soup_message_body_set_accumulate (body, FALSE);
    req->body_too_large = TRUE;
  } else {
    g_signal_connect (msg, "got-chunk", G_CALLBACK (on_request_chunk), NULL);
  }

  g_object_set_data_full (G_OBJECT (msg), REQUEST_KEY, box_http_request_ref (req),
                          (GDestroyNotify) box_http_request_unref);
  if (route->start != NULL)
    route->start (req);
}

static void
handler (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
         gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = g_object_steal_data (G_OBJECT (msg), REQUEST_KEY);

  /* again: a "100 Continue" in between clears the response headers */
  close_connection (msg);
  if (req == NULL) {
    box_http_reply_error_literal (msg, BOX_ERROR_INTERNAL, "request was not routed");
    return;
  }
  box_http_request_attach (req);
  req->route->handler (req);
}

/* ---- connections -------------------------------------------------------- */

static gboolean
on_head_timeout (gpointer user_data)
{
  ConnTag *tag = user_data;
  g_autoptr(GIOStream) stream = g_weak_ref_get (&tag->stream);

  g_debug ("in-sandbox socket of %s: a request head took more than %u s; closing its connection",
           tag->sandbox_id, tag->header_timeout_s);
  g_clear_pointer (&tag->head_timeout, g_source_unref);
  break_stream (stream);
  return G_SOURCE_REMOVE;
}

gboolean
box_insandbox_accept (BoxInsandbox *self, const char *sandbox_id, GIOStream *stream,
                      GError **error)
{
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(GSocketAddress) local = NULL;
  g_autoptr(GSocketAddress) remote = NULL;
  ConnTag *tag;
  Held *held;

  g_return_val_if_fail (BOX_IS_INSANDBOX (self), FALSE);
  g_return_val_if_fail (G_IS_IO_STREAM (stream), FALSE);

  if (self->shut_down) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE, "the service is stopping");
    return FALSE;
  }
  sandbox = box_engine_get_sandbox (self->engine, NULL, sandbox_id, error);
  if (sandbox == NULL)
    return FALSE;
  held = held_of (self->held, sandbox->id);
  if (held->conns >= BOX_INSANDBOX_MAX_CONNECTIONS) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT,
                 "the sandbox holds %u in-sandbox connections, the most it may", held->conns);
    return FALSE;
  }
  held->conns++;
  tag = g_new0 (ConnTag, 1);
  tag->sandbox_id = g_strdup (sandbox->id);
  tag->project = g_strdup (sandbox->project);
  tag->held = g_hash_table_ref (self->held);
  g_weak_ref_init (&tag->stream, stream);
  tag->header_timeout_s = box_engine_get_config (self->engine)->http_header_timeout_s;
  if (tag->header_timeout_s > 0) {
    tag->head_timeout = g_timeout_source_new_seconds (tag->header_timeout_s);
    g_source_set_callback (tag->head_timeout, on_head_timeout, tag, NULL);
    g_source_attach (tag->head_timeout, g_main_context_get_thread_default ());
  }
  /* libsoup wants inet addresses (an HTTP/1.0 request without Host is
   * given the local one); the remote one carries the sandbox */
  local = g_inet_socket_address_new_from_string ("127.0.0.1", 80);
  remote = g_inet_socket_address_new_from_string ("127.0.0.1", 0);
  g_object_set_data_full (G_OBJECT (remote), TAG_KEY, tag, (GDestroyNotify) conn_tag_free);
  return soup_server_accept_iostream (self->soup, stream, local, remote, error);
}

static void
on_connection (BoxSandboxConnections *connections, const char *sandbox_id, GIOStream *stream,
               gpointer user_data)
{
  g_autoptr(GError) error = NULL;

  if (!box_insandbox_accept (BOX_INSANDBOX (user_data), sandbox_id, stream, &error)) {
    g_debug ("in-sandbox connection of %s refused: %s", sandbox_id, error->message);
    break_stream (stream);
  }
}

gboolean
box_insandbox_abort_connection (SoupServerMessage *msg)
{
  ConnTag *tag = conn_tag_of (msg);
  g_autoptr(GIOStream) stream = tag != NULL ? g_weak_ref_get (&tag->stream) : NULL;

  return box_sandbox_connections_abort (stream);
}

/* ---- object ------------------------------------------------------------- */

BoxInsandbox *
box_insandbox_new (BoxEngine *engine, BoxHttpServer *http)
{
  BoxInsandbox *self;

  g_return_val_if_fail (BOX_IS_ENGINE (engine), NULL);
  g_return_val_if_fail (BOX_IS_HTTP_SERVER (http), NULL);

  self = g_object_new (BOX_TYPE_INSANDBOX, NULL);
  self->engine = g_object_ref (engine);
  self->http = g_object_ref (http);
  self->soup = soup_server_new ("server-header", "boxd/" PACKAGE_VERSION " ", NULL);
  soup_server_add_early_handler (self->soup, NULL, early_handler, self, NULL);
  soup_server_add_handler (self->soup, NULL, handler, self, NULL);
  self->connections = box_sandbox_connections_new (engine);
  g_signal_connect (self->connections, "connection", G_CALLBACK (on_connection), self);
  return self;
}

void
box_insandbox_shutdown (BoxInsandbox *self)
{
  g_return_if_fail (BOX_IS_INSANDBOX (self));
  if (self->shut_down)
    return;
  self->shut_down = TRUE;
  g_signal_handlers_disconnect_by_data (self->connections, self);
  box_sandbox_connections_shutdown (self->connections);
  soup_server_disconnect (self->soup);
}

static void
box_insandbox_dispose (GObject *object)
{
  BoxInsandbox *self = BOX_INSANDBOX (object);

  if (self->engine != NULL)
    box_insandbox_shutdown (self);
  g_clear_object (&self->connections);
  g_clear_object (&self->soup);
  g_clear_object (&self->http);
  g_clear_object (&self->engine);
  G_OBJECT_CLASS (box_insandbox_parent_class)->dispose (object);
}

static void
box_insandbox_finalize (GObject *object)
{
  BoxInsandbox *self = BOX_INSANDBOX (object);

  g_hash_table_unref (self->held);
  G_OBJECT_CLASS (box_insandbox_parent_class)->finalize (object);
}

static void
box_insandbox_class_init (BoxInsandboxClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = box_insandbox_dispose;
  object_class->finalize = box_insandbox_finalize;
}

static void
box_insandbox_init (BoxInsandbox *self)
{
  self->held = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}
