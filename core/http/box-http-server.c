/* box-http-server.c: the HTTP API's server, router and authentication.
 *
 * One early handler (headers read, body not yet) routes every request by
 * method and decoded path segments, authenticates it and parses its query;
 * a refusal answers there, so the body of a refused request is never kept.
 * The normal handler then runs the route's handler.  See box-http-util.h.
 */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-http-keepalive.h"
#include "box-http-limits.h"
#include "box-http-server.h"
#include "box-http-util.h"

#define REQUEST_KEY "box-http-request"

struct _BoxHttpServer {
  GObject     parent_instance;
  BoxEngine  *engine;
  SoupServer *soup;
  GHashTable *streams;      /* stream -> BoxHttpStreamClose */
  BoxHttpKeepalive *keepalive;
  BoxHttpLimits *limits;
  gboolean    shut_down;
};

G_DEFINE_FINAL_TYPE (BoxHttpServer, box_http_server, G_TYPE_OBJECT)

#define A BOX_HTTP_AUTH_ADMIN
#define K BOX_HTTP_AUTH_KEY
#define N BOX_HTTP_AUTH_NONE
#define S BOX_HTTP_ROUTE_IN_SANDBOX
#define WS BOX_HTTP_ROUTE_WEBSOCKET
#define SSE BOX_HTTP_ROUTE_SSE
#define SESSION BOX_HTTP_ROUTE_SESSION
#define SANDBOX_ONLY BOX_HTTP_ROUTE_SANDBOX_ONLY

static const BoxHttpRoute routes[] = {
  /* identity and operator */
  { "GET",    "/v1/whoami",                          K, FALSE, box_http_whoami },
  { "GET",    "/v1/edge",                            K, FALSE, box_http_edge },
  { "POST",   "/v1/projects",                        A, TRUE,  box_http_project_create },
  { "GET",    "/v1/projects",                        A, FALSE, box_http_project_list },
  { "GET",    "/v1/projects/{project}",              A, FALSE, box_http_project_get },
  { "PATCH",  "/v1/projects/{project}",              A, TRUE,  box_http_project_update },
  { "DELETE", "/v1/projects/{project}",              A, FALSE, box_http_project_delete },
  { "POST",   "/v1/projects/{project}/keys",         A, TRUE,  box_http_key_create },
  { "GET",    "/v1/projects/{project}/keys",         A, FALSE, box_http_key_list },
  { "DELETE", "/v1/projects/{project}/keys/{key}",   A, FALSE, box_http_key_delete },
  /* sandboxes */
  { "POST",   "/v1/sandboxes",                       K, TRUE,  box_http_sandbox_create },
  { "GET",    "/v1/sandboxes",                       K, FALSE, box_http_sandbox_list },
  { "GET",    "/v1/sandboxes/{sandbox}",             K, FALSE, box_http_sandbox_get },
  { "PATCH",  "/v1/sandboxes/{sandbox}",             K, TRUE,  box_http_sandbox_update },
  { "DELETE", "/v1/sandboxes/{sandbox}",             K, FALSE, box_http_sandbox_delete },
  { "POST",   "/v1/sandboxes/{sandbox}/pause",       K, TRUE,  box_http_sandbox_pause },
  { "POST",   "/v1/sandboxes/{sandbox}/stop",        K, TRUE,  box_http_sandbox_stop },
  { "POST",   "/v1/sandboxes/{sandbox}/wake",        K, TRUE,  box_http_sandbox_wake },
  { "POST",   "/v1/sandboxes/{sandbox}/exec/run",    K, TRUE,  box_http_exec_run, S },
  /* streaming exec, sessions and ports (box-http-stream-exec.c, box-http-ports.c) */
  { "GET",    "/v1/sandboxes/{sandbox}/exec",        K, FALSE, box_http_exec_stream, S | WS | SESSION },
  { "GET",    "/v1/sandboxes/{sandbox}/exec/sessions", K, FALSE, box_http_session_list, S },
  { "GET",    "/v1/sandboxes/{sandbox}/exec/sessions/{session}", K, FALSE, box_http_session_attach,
    S | WS | SESSION },
  { "POST",   "/v1/sandboxes/{sandbox}/exec/sessions/{session}/signal", K, TRUE, box_http_session_signal, S },
  { "GET",    "/v1/sandboxes/{sandbox}/ports",       K, FALSE, box_http_port_list, S },
  { "GET",    "/v1/sandboxes/{sandbox}/ports/watch", K, FALSE, box_http_port_watch, S | SSE },
  { "GET",    "/v1/sandboxes/{sandbox}/ports/settings", K, FALSE, box_http_port_settings, S },
  { "GET",    "/v1/sandboxes/{sandbox}/ports/{port}/connect", K, FALSE, box_http_port_connect,
    S | WS },
  { "PUT",    "/v1/sandboxes/{sandbox}/ports/{port}", K, TRUE, box_http_port_set, S },
  { "GET",    "/v1/sandboxes/{sandbox}/stats",       K, FALSE, box_http_sandbox_stats },
  /* supervised services (box-http-services.c) */
  { "GET",    "/v1/sandboxes/{sandbox}/services",    K, FALSE, box_http_service_list, S },
  { "GET",    "/v1/sandboxes/{sandbox}/services/{name}", K, FALSE, box_http_service_get, S },
  { "PUT",    "/v1/sandboxes/{sandbox}/services/{name}", K, TRUE, box_http_service_put, S },
  { "DELETE", "/v1/sandboxes/{sandbox}/services/{name}", K, FALSE, box_http_service_delete, S },
  { "POST",   "/v1/sandboxes/{sandbox}/services/{name}/start", K, TRUE, box_http_service_start, S },
  { "POST",   "/v1/sandboxes/{sandbox}/services/{name}/stop", K, TRUE, box_http_service_stop, S },
  { "POST",   "/v1/sandboxes/{sandbox}/services/{name}/restart", K, TRUE, box_http_service_restart,
    S },
  { "GET",    "/v1/sandboxes/{sandbox}/services/{name}/logs", K, FALSE, box_http_service_logs, S },
  /* files (box-http-files.c, box-http-watch.c) */
  { "GET",    "/v1/sandboxes/{sandbox}/fs/file",     K, FALSE, box_http_fs_file_get, S },
  { "PUT",    "/v1/sandboxes/{sandbox}/fs/file",     K, FALSE, box_http_fs_file_put, S,
    box_http_fs_file_put_start },
  { "DELETE", "/v1/sandboxes/{sandbox}/fs/file",     K, FALSE, box_http_fs_file_delete, S },
  { "GET",    "/v1/sandboxes/{sandbox}/fs/stat",     K, FALSE, box_http_fs_stat, S },
  { "GET",    "/v1/sandboxes/{sandbox}/fs/list",     K, FALSE, box_http_fs_list, S },
  { "POST",   "/v1/sandboxes/{sandbox}/fs/mkdir",    K, TRUE,  box_http_fs_mkdir, S },
  { "POST",   "/v1/sandboxes/{sandbox}/fs/rename",   K, TRUE,  box_http_fs_rename, S },
  { "GET",    "/v1/sandboxes/{sandbox}/fs/tar",      K, FALSE, box_http_fs_tar_get, S },
  { "PUT",    "/v1/sandboxes/{sandbox}/fs/tar",      K, FALSE, box_http_fs_tar_put, S,
    box_http_fs_tar_put_start },
  { "GET",    "/v1/sandboxes/{sandbox}/fs/watch",    K, FALSE, box_http_fs_watch, S | WS },
  /* checkpoints (box-http-checkpoints.c); only POST in the sandbox */
  { "POST",   "/v1/sandboxes/{sandbox}/checkpoints", K, TRUE,  box_http_checkpoint_create, S },
  { "GET",    "/v1/sandboxes/{sandbox}/checkpoints", K, FALSE, box_http_checkpoint_list },
  { "GET",    "/v1/sandboxes/{sandbox}/checkpoints/{checkpoint}", K, FALSE,
    box_http_checkpoint_get },
  { "DELETE", "/v1/sandboxes/{sandbox}/checkpoints/{checkpoint}", K, FALSE,
    box_http_checkpoint_delete },
  { "POST",   "/v1/sandboxes/{sandbox}/checkpoints/{checkpoint}/restore", K, TRUE,
    box_http_checkpoint_restore },
  /* tasks (box-http-tasks.c): records, they do not wake the sandbox */
  { "GET",    "/v1/sandboxes/{sandbox}/tasks",       K, FALSE, box_http_task_list, S },
  { "PUT",    "/v1/sandboxes/{sandbox}/tasks/{name}", K, TRUE, box_http_task_put, S },
  { "GET",    "/v1/sandboxes/{sandbox}/tasks/{name}", K, FALSE, box_http_task_get, S },
  { "DELETE", "/v1/sandboxes/{sandbox}/tasks/{name}", K, FALSE, box_http_task_delete, S },
  { "PUT",    "/v1/sandboxes/{sandbox}/tasks/",      K, TRUE,  box_http_task_no_name, S },
  { "GET",    "/v1/sandboxes/{sandbox}/tasks/",      K, FALSE, box_http_task_no_name, S },
  { "DELETE", "/v1/sandboxes/{sandbox}/tasks/",      K, FALSE, box_http_task_no_name, S },
  /* secrets */
  { "GET",    "/v1/secrets",                         K, FALSE, box_http_secret_list },
  { "PUT",    "/v1/secrets/{name}",                  K, TRUE,  box_http_secret_put },
  { "GET",    "/v1/secrets/{name}",                  K, FALSE, box_http_secret_get },
  { "DELETE", "/v1/secrets/{name}",                  K, FALSE, box_http_secret_delete },
  /* catalogue and events */
  { "GET",    "/v1/templates",                       K, FALSE, box_http_template_list },
  { "GET",    "/v1/network/defaults",                K, FALSE, box_http_network_defaults },
  { "GET",    "/v1/events",                          K, FALSE, box_http_events, SSE },
  /* identity (box-http-identity.c): discovery with no key; tokens only
   * on the in-sandbox socket (/identity/token), never under /v1 */
  { "GET",    "/.well-known/openid-configuration",   N, FALSE, box_http_oidc_discovery },
  { "GET",    "/.well-known/jwks.json",              N, FALSE, box_http_oidc_jwks },
  { "GET",    "/v1/sandboxes/{sandbox}/identity/token", K, FALSE, box_http_identity_token,
    S | SANDBOX_ONLY },
};

#undef A
#undef K
#undef N
#undef S
#undef WS
#undef SSE
#undef SESSION
#undef SANDBOX_ONLY

const BoxHttpRoute *
box_http_server_get_routes (guint *n_routes)
{
  *n_routes = G_N_ELEMENTS (routes);
  return routes;
}

/* ---- routing ----------------------------------------------------------- */

/* Splits "/a/b%2Fc/" into decoded segments {"a", "b/c", ""}; NULL when an
 * escape is malformed. */
GStrv
box_http_split_path (const char *path)
{
  g_auto(GStrv) raw = NULL;
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  if (path == NULL || path[0] != '/')
    return NULL;
  raw = g_strsplit (path + 1, "/", -1);
  for (guint i = 0; raw[i] != NULL; i++) {
    g_autofree char *segment = g_uri_unescape_string (raw[i], NULL);
    if (segment == NULL)
      return NULL;
    g_strv_builder_add (builder, segment);
  }
  return g_strv_builder_end (builder);
}

/* Matches @segments against @pattern; fills @params (may be NULL). */
gboolean
box_http_route_matches (const char *pattern, const char *const *segments, GPtrArray *params)
{
  g_auto(GStrv) parts = g_strsplit (pattern + 1, "/", -1);
  guint i;

  for (i = 0; parts[i] != NULL; i++) {
    if (segments[i] == NULL)
      return FALSE;
    if (parts[i][0] == '{') {
      if (segments[i][0] == '\0')
        return FALSE;
      if (params != NULL)
        g_ptr_array_add (params, g_strdup (segments[i]));
    } else if (strcmp (parts[i], segments[i]) != 0) {
      return FALSE;
    }
  }
  return segments[i] == NULL;
}

gboolean
box_http_method_matches (const char *route_method, const char *method)
{
  if (g_strcmp0 (route_method, method) == 0)
    return TRUE;
  /* HEAD is a GET without the body (libsoup drops it) */
  return g_strcmp0 (method, "HEAD") == 0 && g_strcmp0 (route_method, "GET") == 0;
}

/* The credential /v1 paths need, by prefix, for paths no route knows. */
static BoxHttpAuth
auth_for_path (const char *const *segments)
{
  if (g_strcmp0 (segments[0], "v1") != 0)
    return BOX_HTTP_AUTH_NONE;
  if (segments[1] != NULL && g_strcmp0 (segments[1], "projects") == 0)
    return BOX_HTTP_AUTH_ADMIN;
  return BOX_HTTP_AUTH_KEY;
}

/* The principal for @auth, or FALSE with the error to answer. */
static gboolean
authenticate (BoxHttpServer *self, SoupServerMessage *msg, BoxHttpAuth auth,
              BoxPrincipal **principal_out, GError **error)
{
  g_autofree char *token = NULL;
  g_autoptr(BoxPrincipal) principal = NULL;
  g_autoptr(GError) local_error = NULL;
  BoxPrincipalKind wanted;

  if (auth == BOX_HTTP_AUTH_NONE)
    return TRUE;
  wanted = auth == BOX_HTTP_AUTH_ADMIN ? BOX_PRINCIPAL_ADMIN : BOX_PRINCIPAL_KEY;
  token = box_http_bearer_token (soup_server_message_get_request_headers (msg));
  if (token != NULL)
    principal = box_engine_authenticate (self->engine, token, &local_error);
  if (principal == NULL && local_error != NULL &&
      !g_error_matches (local_error, BOX_ERROR, BOX_ERROR_UNAUTHORIZED)) {
    /* not a refusal: the lookup itself failed */
    g_propagate_error (error, g_steal_pointer (&local_error));
    return FALSE;
  }
  if (principal == NULL || principal->kind != wanted) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNAUTHORIZED,
                         "a valid API key is required");
    return FALSE;
  }
  *principal_out = g_steal_pointer (&principal);
  return TRUE;
}

static void
reply_method_not_allowed (SoupServerMessage *msg, const char *method, const char *path,
                          const char *const *segments)
{
  g_autoptr(GString) allow = g_string_new (NULL);
  g_autofree char *message = g_strdup_printf ("method %s not allowed on %s", method, path);

  for (guint i = 0; i < G_N_ELEMENTS (routes); i++) {
    if ((routes[i].flags & BOX_HTTP_ROUTE_SANDBOX_ONLY) != 0 ||
        !box_http_route_matches (routes[i].pattern, segments, NULL))
      continue;
    if (allow->len > 0)
      g_string_append (allow, ", ");
    g_string_append (allow, routes[i].method);
    if (strcmp (routes[i].method, "GET") == 0)
      g_string_append (allow, ", HEAD");
  }
  box_http_reply_error_literal (msg, BOX_ERROR_INVALID, message);
  soup_server_message_set_status (msg, SOUP_STATUS_METHOD_NOT_ALLOWED, NULL);
  soup_message_headers_replace (soup_server_message_get_response_headers (msg),
                                "Allow", allow->str);
}

/* Counts a chunked body as it arrives and stops keeping it past the limit. */
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

/* Routing, authentication and the query, before the body is read. */
static void
early_handler (SoupServer *server, SoupServerMessage *msg, const char *path,
               GHashTable *query, gpointer user_data)
{
  BoxHttpServer *self = BOX_HTTP_SERVER (user_data);
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  SoupMessageBody *body = soup_server_message_get_request_body (msg);
  const char *method = soup_server_message_get_method (msg);
  g_autoptr(BoxHttpRequest) req = box_http_request_new (self, self->engine, msg);
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) segments = box_http_split_path (path);
  const BoxHttpRoute *path_match = NULL;
  GPtrArray *query_params;
  BoxHttpAuth auth;

  if (segments == NULL) {
    soup_message_body_set_accumulate (body, FALSE);
    box_http_reply_error_literal (msg, BOX_ERROR_INVALID, "malformed escape in the path");
    return;
  }
  for (guint i = 0; i < G_N_ELEMENTS (routes); i++) {
    if ((routes[i].flags & BOX_HTTP_ROUTE_SANDBOX_ONLY) != 0 ||
        !box_http_route_matches (routes[i].pattern, (const char *const *) segments, NULL))
      continue;
    if (path_match == NULL)
      path_match = &routes[i];
    if (box_http_method_matches (routes[i].method, method)) {
      req->route = &routes[i];
      break;
    }
  }

  /* Authenticate first, so that a caller without a key learns nothing. */
  auth = path_match != NULL ? path_match->auth : auth_for_path ((const char *const *) segments);
  if (!authenticate (self, msg, auth, &req->principal, &error)) {
    soup_message_body_set_accumulate (body, FALSE);
    box_http_reply_error (msg, error);
    return;
  }
  if (path_match == NULL) {
    g_autofree char *message = g_strdup_printf ("no route %s %s", method, path);
    soup_message_body_set_accumulate (body, FALSE);
    box_http_reply_error_literal (msg, BOX_ERROR_NOT_FOUND, message);
    return;
  }
  if (req->route == NULL) {
    soup_message_body_set_accumulate (body, FALSE);
    reply_method_not_allowed (msg, method, path, (const char *const *) segments);
    return;
  }
  /* a read-only key reads: GET routes that are no WebSocket (doc/API.md) */
  if (req->principal != NULL && req->principal->kind == BOX_PRINCIPAL_KEY &&
      req->principal->key != NULL && box_engine_key_is_read_only (self->engine, req->principal->key->id) &&
      (strcmp (req->route->method, "GET") != 0 || (req->route->flags & BOX_HTTP_ROUTE_WEBSOCKET))) {
    soup_message_body_set_accumulate (body, FALSE);
    box_http_reply_error_literal (msg, BOX_ERROR_PERMISSION_DENIED,
                                  "this key is read-only: it may only read (GET routes, "
                                  "no WebSockets)");
    return;
  }
  box_http_route_matches (req->route->pattern, (const char *const *) segments, req->path_params);

  query_params = box_http_parse_query (g_uri_get_query (soup_server_message_get_uri (msg)), &error);
  if (query_params == NULL) {
    soup_message_body_set_accumulate (body, FALSE);
    box_http_reply_error (msg, error);
    return;
  }
  g_ptr_array_unref (req->query);
  req->query = query_params;

  /* the key's request rate and open streams (box-http-limits.h) */
  if (!box_http_limits_admit (self->limits, req, &error)) {
    soup_message_body_set_accumulate (body, FALSE);
    box_http_reply_error (msg, error);
    return;
  }

  /* Bodies: at most BOX_HTTP_BODY_MAX, and none kept for routes without one. */
  if (!req->route->json_body) {
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
  /* a route that takes its body as it arrives starts now */
  if (req->route->start != NULL)
    req->route->start (req);
}

static void
handler (SoupServer *server, SoupServerMessage *msg, const char *path,
         GHashTable *query, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = g_object_steal_data (G_OBJECT (msg), REQUEST_KEY);

  if (req == NULL) {
    /* the early handler always leaves one when it does not answer */
    box_http_reply_error_literal (msg, BOX_ERROR_INTERNAL, "request was not routed");
    return;
  }
  box_http_request_attach (req);
  req->route->handler (req);
}

/* ---- streams ----------------------------------------------------------- */

void
box_http_server_add_stream (BoxHttpServer *self, gpointer stream, BoxHttpStreamClose close_fn)
{
  g_hash_table_insert (self->streams, stream, close_fn);
}

void
box_http_server_remove_stream (BoxHttpServer *self, gpointer stream)
{
  g_hash_table_remove (self->streams, stream);
}

/* ---- object ------------------------------------------------------------ */

BoxHttpServer *
box_http_server_new (BoxEngine *engine)
{
  BoxHttpServer *self;

  g_return_val_if_fail (BOX_IS_ENGINE (engine), NULL);

  self = g_object_new (BOX_TYPE_HTTP_SERVER, NULL);
  self->engine = g_object_ref (engine);
  self->limits = box_http_limits_new (engine);
  /* raw-paths: the path comes encoded, so that box_http_split_path()
   * decodes each segment once and %2F stays inside its segment */
  self->soup = soup_server_new ("server-header", "boxd/" PACKAGE_VERSION " ", "raw-paths", TRUE,
                                NULL);
  /* connections stay open between requests; idle ones are closed there */
  self->keepalive = box_http_keepalive_new (self->soup,
                                            box_engine_get_config (engine)->http_idle_timeout_s,
                                            box_engine_get_config (engine)->http_max_idle);
  box_http_keepalive_set_header_timeout (self->keepalive,
                                         box_engine_get_config (engine)->http_header_timeout_s);
  soup_server_add_early_handler (self->soup, NULL, early_handler, self, NULL);
  soup_server_add_handler (self->soup, NULL, handler, self, NULL);
  return self;
}

gboolean
box_http_server_listen (BoxHttpServer *self, const char *listen, GError **error)
{
  g_autoptr(GSocketConnectable) connectable = NULL;
  g_autoptr(GInetAddress) address = NULL;
  g_autoptr(GSocketAddress) socket_address = NULL;
  g_autoptr(GError) local_error = NULL;
  const char *host;
  guint16 port;

  g_return_val_if_fail (BOX_IS_HTTP_SERVER (self), FALSE);
  g_return_val_if_fail (listen != NULL, FALSE);

  connectable = g_network_address_parse (listen, 0, &local_error);
  if (connectable == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "bad listen address %s (want host:port): %s", listen, local_error->message);
    return FALSE;
  }
  host = g_network_address_get_hostname (G_NETWORK_ADDRESS (connectable));
  port = g_network_address_get_port (G_NETWORK_ADDRESS (connectable));

  if (g_ascii_strcasecmp (host, "localhost") == 0) {
    if (!soup_server_listen_local (self->soup, port, 0, &local_error)) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                   "cannot listen on %s: %s", listen, local_error->message);
      return FALSE;
    }
    return TRUE;
  }
  address = g_inet_address_new_from_string (host);
  if (address == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "bad listen address %s: the host must be an IP address or localhost", listen);
    return FALSE;
  }
  socket_address = g_inet_socket_address_new (address, port);
  if (!soup_server_listen (self->soup, socket_address, 0, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "cannot listen on %s: %s", listen, local_error->message);
    return FALSE;
  }
  return TRUE;
}

guint
box_http_server_get_port (BoxHttpServer *self)
{
  GSList *listeners;

  g_return_val_if_fail (BOX_IS_HTTP_SERVER (self), 0);

  listeners = soup_server_get_listeners (self->soup);
  for (GSList *l = listeners; l != NULL; l = l->next) {
    g_autoptr(GSocketAddress) address = g_socket_get_local_address (l->data, NULL);
    if (address != NULL && G_IS_INET_SOCKET_ADDRESS (address)) {
      guint port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (address));
      g_slist_free (listeners);
      return port;
    }
  }
  g_slist_free (listeners);
  return 0;
}

BoxHttpLimits *
box_http_server_get_limits (BoxHttpServer *self)
{
  g_return_val_if_fail (BOX_IS_HTTP_SERVER (self), NULL);
  return self->limits;
}

SoupServer *
box_http_server_get_soup (BoxHttpServer *self)
{
  g_return_val_if_fail (BOX_IS_HTTP_SERVER (self), NULL);
  return self->soup;
}

void
box_http_server_shutdown (BoxHttpServer *self)
{
  g_autoptr(GList) streams = NULL;

  g_return_if_fail (BOX_IS_HTTP_SERVER (self));

  if (self->shut_down)
    return;
  self->shut_down = TRUE;
  g_clear_pointer (&self->keepalive, box_http_keepalive_free);
  /* Each close removes its stream from the table. */
  streams = g_hash_table_get_keys (self->streams);
  for (GList *l = streams; l != NULL; l = l->next) {
    BoxHttpStreamClose close_fn = g_hash_table_lookup (self->streams, l->data);
    if (close_fn != NULL)
      close_fn (l->data);
  }
  if (self->soup != NULL)
    soup_server_disconnect (self->soup);
}

static void
box_http_server_dispose (GObject *object)
{
  BoxHttpServer *self = BOX_HTTP_SERVER (object);

  if (self->soup != NULL)
    box_http_server_shutdown (self);
  g_clear_pointer (&self->keepalive, box_http_keepalive_free);
  g_clear_object (&self->soup);
  g_clear_object (&self->engine);
  G_OBJECT_CLASS (box_http_server_parent_class)->dispose (object);
}

static void
box_http_server_finalize (GObject *object)
{
  BoxHttpServer *self = BOX_HTTP_SERVER (object);

  g_hash_table_unref (self->streams);
  box_http_limits_free (self->limits);
  G_OBJECT_CLASS (box_http_server_parent_class)->finalize (object);
}

static void
box_http_server_class_init (BoxHttpServerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = box_http_server_dispose;
  object_class->finalize = box_http_server_finalize;
}

static void
box_http_server_init (BoxHttpServer *self)
{
  self->streams = g_hash_table_new (NULL, NULL);
}
