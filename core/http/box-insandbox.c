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
 * which at most BOX_INSANDBOX_MAX_EXEC_RUNS exec/run calls and
 * BOX_INSANDBOX_MAX_DOWNLOADS downloads (GET fs/file, fs/tar: each holds
 * its buffers until the guest reads); more are 409 conflict.
 *
 * An exec/run answer holds the command's raw output until the guest read
 * it (box-http-exec.c streams the base64), up to 2 x 16 MiB: so the
 * bytes a sandbox's exec/run calls hold are booked on its account
 * (box-http-charge.h), each call at BOX_INSANDBOX_EXEC_RUN_RESERVE from
 * when its body was read until its command ended, then at what its answer
 * still holds; a call that would take the account past
 * BOX_INSANDBOX_EXEC_RUN_BYTES is 409 conflict too (a call whose body
 * never comes holds its place, and no bytes).
 */
#include "config.h"

#include <string.h>

#include "box-http-charge.h"
#include "box-http-limits.h"
#include "box-http-server.h"
#include "box-http-util.h"
#include "box-insandbox.h"
#include "box-sandbox-connections.h"

#define TAG_KEY     "box-insandbox-tag"
#define REQUEST_KEY "box-insandbox-request"

/* Answers that stay in boxd until the guest reads them, so that one
 * sandbox may have only so many at once (each until its connection ends). */
typedef enum {
  PLACE_NONE,
  PLACE_EXEC_RUN,   /* its raw output until read: up to 2 x 16 MiB (and the account) */
  PLACE_DOWNLOAD,   /* fs/file, fs/tar: ~1.4 MiB each (channel window, read-ahead, write queue) */
  PLACE_LAST
} Place;

static const struct {
  guint       max;
  const char *what;
} places[PLACE_LAST] = {
  [PLACE_EXEC_RUN] = { BOX_INSANDBOX_MAX_EXEC_RUNS, "exec/run calls" },
  [PLACE_DOWNLOAD] = { BOX_INSANDBOX_MAX_DOWNLOADS, "downloads (GET fs/file, fs/tar)" },
};

/* What one sandbox holds at once. */
typedef struct {
  guint           conns;
  guint           places[PLACE_LAST];
  BoxHttpAccount *answers;   /* what its exec/run answers hold */
} Held;

typedef struct {
  char       *sandbox_id;
  char       *project;
  GWeakRef    stream;      /* the connection's GIOStream */
  GHashTable *held;        /* the owner's: sandbox id -> Held* (a ref) */
  Place       place;       /* holds one of the sandbox's places of that kind */
  BoxHttpCharge *charge;   /* an exec/run's part of the sandbox's account */
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

static void
held_free (Held *h)
{
  box_http_account_unref (h->answers);
  g_free (h);
}

static Held *
held_of (GHashTable *held, const char *sandbox_id)
{
  Held *h = g_hash_table_lookup (held, sandbox_id);

  if (h == NULL) {
    h = g_new0 (Held, 1);
    h->answers = box_http_account_new ();
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
  h->places[tag->place]--;
  if (h->conns == 0)
    g_hash_table_remove (tag->held, tag->sandbox_id);
  g_hash_table_unref (tag->held);
  g_clear_pointer (&tag->charge, box_http_charge_unref);
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

static Place
place_of (const BoxHttpRoute *route)
{
  if (route->handler == box_http_exec_run)
    return PLACE_EXEC_RUN;
  if (route->handler == box_http_fs_file_get || route->handler == box_http_fs_tar_get)
    return PLACE_DOWNLOAD;
  return PLACE_NONE;
}

/* An exec/run whose body was read is booked on the sandbox's account at
 * its most until its command ended; past BOX_INSANDBOX_EXEC_RUN_BYTES it
 * is 409 conflict (and nothing runs). */
static gboolean
reserve_exec_run (BoxInsandbox *self, ConnTag *tag, SoupServerMessage *msg, GError **error)
{
  Held *h;
  gsize bytes;

  if (tag->place != PLACE_EXEC_RUN || tag->charge != NULL)
    return TRUE;
  h = held_of (self->held, tag->sandbox_id);
  bytes = box_http_account_get_bytes (h->answers);
  if (bytes + BOX_INSANDBOX_EXEC_RUN_RESERVE > BOX_INSANDBOX_EXEC_RUN_BYTES) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT,
                 "too many exec/run answers held for the sandbox: they hold %" G_GSIZE_FORMAT
                 " bytes of at most %u (a call counts %u bytes until its command ended, then "
                 "what of its output is not yet read); read or close one first",
                 bytes, BOX_INSANDBOX_EXEC_RUN_BYTES, BOX_INSANDBOX_EXEC_RUN_RESERVE);
    return FALSE;
  }
  tag->charge = box_http_charge_new (h->answers, BOX_INSANDBOX_EXEC_RUN_RESERVE);
  box_http_charge_attach (msg, tag->charge);
  return TRUE;
}

/* An answer that waits in boxd until the guest reads it (an exec/run's
 * output, a download's buffers) takes one of the sandbox's places of its
 * kind until its connection ends; with none free it is 409 conflict. */
static gboolean
take_place (BoxInsandbox *self, ConnTag *tag, const BoxHttpRoute *route, GError **error)
{
  Place place = place_of (route);
  Held *h;

  if (place == PLACE_NONE || tag->place != PLACE_NONE)
    return TRUE;
  h = held_of (self->held, tag->sandbox_id);
  if (h->places[place] >= places[place].max) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT,
                 "too many %s from inside the sandbox: it may have at most %u at once "
                 "(one counts until its connection ends); read or close one first",
                 places[place].what, places[place].max);
    return FALSE;
  }
  h->places[place]++;
  tag->place = place;
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
      !take_place (self, tag, route, &error)) {
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
  BoxInsandbox *self = BOX_INSANDBOX (user_data);
  g_autoptr(BoxHttpRequest) req = g_object_steal_data (G_OBJECT (msg), REQUEST_KEY);
  g_autoptr(GError) error = NULL;
  ConnTag *tag = conn_tag_of (msg);

  /* again: a "100 Continue" in between clears the response headers */
  close_connection (msg);
  if (req == NULL || tag == NULL) {
    box_http_reply_error_literal (msg, BOX_ERROR_INTERNAL, "request was not routed");
    return;
  }
  if (!reserve_exec_run (self, tag, msg, &error)) {
    box_http_reply_error (msg, error);
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
    /* milliseconds: a seconds source may fire up to a second early */
    tag->head_timeout = g_timeout_source_new (tag->header_timeout_s * 1000);
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

gsize
box_insandbox_get_answer_bytes (BoxInsandbox *self, const char *sandbox_id)
{
  Held *h;

  g_return_val_if_fail (BOX_IS_INSANDBOX (self), 0);
  h = g_hash_table_lookup (self->held, sandbox_id);
  return h != NULL ? box_http_account_get_bytes (h->answers) : 0;
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
  /* raw-paths: the path comes encoded, so that box_http_split_path()
   * decodes each segment once and %2F stays inside its segment */
  self->soup = soup_server_new ("server-header", "boxd/" PACKAGE_VERSION " ", "raw-paths", TRUE,
                                NULL);
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
  self->held = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) held_free);
}
