/* box-http-ports.c: the ports of a sandbox.
 *
 *   GET /v1/sandboxes/{sandbox}/ports                 {ports: [{port, address, pid, session?}]}
 *   GET /v1/sandboxes/{sandbox}/ports/watch           Server-Sent Events: opened, closed
 *   GET /v1/sandboxes/{sandbox}/ports/{port}/connect  WebSocket: raw TCP to 127.0.0.1:{port}
 *   PUT /v1/sandboxes/{sandbox}/ports/{port}          {access} -> {port, access, url}
 *   GET /v1/sandboxes/{sandbox}/ports/settings        {ports: [{port, access, url}]}
 *
 * The watch wakes the sandbox when it starts (like every sub-API route),
 * then lets go of it: polling the agent every 0.5 s is neither a hold nor
 * activity, so an idle sandbox still pauses.  The stream ends (the chunked
 * answer completes) when the sandbox is interrupted (pause, stop, delete,
 * memory checkpoint, restore, lost) or a poll fails; a client that wants
 * to go on watches again, which wakes the sandbox.  A ": keep-alive"
 * comment every 15 s notices a client that went away.
 *
 * The settings are records only: PUT and GET never wake the sandbox, and
 * a port need not be listening.
 */
#include "config.h"

#include <string.h>

#include "box-http-util.h"
#include "box-http-ws.h"
#include "box-json-private.h"
#include "box-requests.h"

#define POLL_INTERVAL_MS    500
#define KEEPALIVE_INTERVAL_S 15

static gboolean
port_param (BoxHttpRequest *req, guint index, guint *port, GError **error)
{
  const char *value = box_http_request_param (req, index);
  guint64 n = 0;

  if (!g_ascii_string_to_unsigned (value, 10, 1, 65535, &n, NULL)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid port %s: must be 1 to 65535", value);
    return FALSE;
  }
  *port = (guint) n;
  return TRUE;
}

/* ---- GET .../ports ----------------------------------------------------- */

static void
ports_listed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) ports = box_engine_list_ports_finish (req->engine, result, &error);

  if (ports == NULL)
    box_http_reply_error (req->msg, error);
  else
    box_http_reply_list (req->msg, "ports", ports);
  box_http_request_resume (req);
}

void
box_http_port_list (BoxHttpRequest *req)
{
  box_engine_list_ports_async (req->engine, box_http_request_project (req),
                               box_http_request_param (req, 0), NULL, ports_listed,
                               box_http_request_pause (req));
}

/* ---- GET .../ports/watch ----------------------------------------------- */

typedef struct {
  BoxHttpRequest *req;
  char           *sandbox_id;
  GHashTable     *known;          /* "port address" -> JsonNode* listener */
  GCancellable   *cancellable;    /* the poll in flight */
  guint           poll_id;
  guint           keepalive_id;
  gulong          interrupt_id;
  gulong          finished_id;
  gulong          disconnected_id;
  gboolean        ended;
} PortWatch;

static void
watch_free (PortWatch *watch)
{
  box_http_server_remove_stream (watch->req->server, watch);
  g_cancellable_cancel (watch->cancellable);
  g_clear_object (&watch->cancellable);
  g_clear_handle_id (&watch->poll_id, g_source_remove);
  g_clear_handle_id (&watch->keepalive_id, g_source_remove);
  g_clear_signal_handler (&watch->interrupt_id, watch->req->engine);
  g_clear_signal_handler (&watch->finished_id, watch->req->msg);
  g_clear_signal_handler (&watch->disconnected_id, watch->req->msg);
  g_hash_table_unref (watch->known);
  g_free (watch->sandbox_id);
  box_http_request_unref (watch->req);
  g_free (watch);
}

static void
watch_write (PortWatch *watch, const char *text)
{
  soup_message_body_append (soup_server_message_get_response_body (watch->req->msg),
                            SOUP_MEMORY_COPY, text, strlen (text));
  /* the message pauses itself whenever it has written all it has */
  soup_server_message_unpause (watch->req->msg);
}

/* Completes the answer; the message's "finished" frees the watch. */
static void
watch_end (PortWatch *watch)
{
  if (watch->ended)
    return;
  watch->ended = TRUE;
  g_cancellable_cancel (watch->cancellable);
  g_clear_handle_id (&watch->poll_id, g_source_remove);
  g_clear_handle_id (&watch->keepalive_id, g_source_remove);
  g_clear_signal_handler (&watch->interrupt_id, watch->req->engine);
  soup_message_body_complete (soup_server_message_get_response_body (watch->req->msg));
  soup_server_message_unpause (watch->req->msg);
}

static void
watch_event (PortWatch *watch, const char *type, JsonNode *listener)
{
  g_autofree char *data = json_to_string (listener, FALSE);
  g_autofree char *text = g_strdup_printf ("event: %s\ndata: %s\n\n", type, data);

  watch_write (watch, text);
}

static char *
listener_key (JsonNode *node)
{
  JsonObject *obj = json_node_get_object (node);
  JsonNode *address = json_object_get_member (obj, "address");

  return g_strdup_printf ("%" G_GINT64_FORMAT " %s", json_object_get_int_member_with_default (obj, "port", 0),
                          address != NULL && JSON_NODE_HOLDS_VALUE (address) ? json_node_get_string (address) : "");
}

static gboolean watch_poll (gpointer user_data);

static void
watch_polled (GObject *source, GAsyncResult *result, gpointer user_data)
{
  PortWatch *watch = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) ports = box_engine_poll_ports_finish (BOX_ENGINE (source), result, &error);
  g_autoptr(GHashTable) now = NULL;
  GHashTableIter iter;
  gpointer key, value;

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;   /* the watch is over and freed */
  g_clear_object (&watch->cancellable);
  if (ports == NULL) {
    g_debug ("ports/watch %s: %s", watch->sandbox_id, error->message);
    watch_end (watch);
    return;
  }
  now = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) json_node_unref);
  for (guint i = 0; i < ports->len; i++) {
    JsonNode *node = g_ptr_array_index (ports, i);

    g_hash_table_replace (now, listener_key (node), json_node_ref (node));
  }
  /* closed first, then opened, each in port order as the agent lists them */
  g_hash_table_iter_init (&iter, watch->known);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    if (!g_hash_table_contains (now, key))
      watch_event (watch, "closed", value);
  }
  for (guint i = 0; i < ports->len; i++) {
    JsonNode *node = g_ptr_array_index (ports, i);
    g_autofree char *k = listener_key (node);

    if (!g_hash_table_contains (watch->known, k))
      watch_event (watch, "opened", node);
  }
  g_hash_table_unref (watch->known);
  watch->known = g_steal_pointer (&now);
  watch->poll_id = g_timeout_add (POLL_INTERVAL_MS, watch_poll, watch);
}

static gboolean
watch_poll (gpointer user_data)
{
  PortWatch *watch = user_data;

  watch->poll_id = 0;
  watch->cancellable = g_cancellable_new ();
  box_engine_poll_ports_async (watch->req->engine, watch->sandbox_id, watch->cancellable,
                               watch_polled, watch);
  return G_SOURCE_REMOVE;
}

static gboolean
watch_keepalive (gpointer user_data)
{
  watch_write (user_data, ": keep-alive\n\n");
  return G_SOURCE_CONTINUE;
}

static void
watch_interrupted (BoxEngine *engine, const char *sandbox_id, const char *why, gpointer user_data)
{
  PortWatch *watch = user_data;

  if (g_strcmp0 (sandbox_id, watch->sandbox_id) == 0)
    watch_end (watch);
}

static void
watch_finished (SoupServerMessage *msg, gpointer user_data)
{
  watch_free (user_data);
}

static void
watch_shutdown (gpointer stream)
{
  PortWatch *watch = stream;

  watch_end (watch);
  watch_free (watch);
}

static void
watch_held (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = box_engine_hold_finish (req->engine, result, &error);
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (req->msg);
  SoupMessageBody *body = soup_server_message_get_response_body (req->msg);
  PortWatch *watch;

  if (sandbox == NULL) {
    box_http_reply_error (req->msg, error);
    box_http_request_resume (req);
    return;
  }
  /* woken; watching itself is not activity */
  box_engine_release (req->engine, sandbox->id);
  if (req->finished) {
    box_http_request_resume (req);
    return;
  }
  soup_server_message_set_status (req->msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_replace (headers, "Content-Type", "text/event-stream");
  soup_message_headers_replace (headers, "Cache-Control", "no-cache");
  soup_message_headers_set_encoding (headers, SOUP_ENCODING_CHUNKED);
  soup_message_body_set_accumulate (body, FALSE);
  if (g_strcmp0 (soup_server_message_get_method (req->msg), "HEAD") == 0) {
    box_http_request_resume (req);
    return;
  }
  soup_message_body_append (body, SOUP_MEMORY_STATIC, ": connected\n\n", strlen (": connected\n\n"));

  watch = g_new0 (PortWatch, 1);
  watch->req = box_http_request_ref (req);
  watch->sandbox_id = g_strdup (sandbox->id);
  watch->known = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) json_node_unref);
  watch->interrupt_id = g_signal_connect (req->engine, "sandbox-interrupted",
                                          G_CALLBACK (watch_interrupted), watch);
  watch->finished_id = g_signal_connect (req->msg, "finished", G_CALLBACK (watch_finished), watch);
  watch->disconnected_id = g_signal_connect (req->msg, "disconnected", G_CALLBACK (watch_finished), watch);
  watch->keepalive_id = g_timeout_add_seconds (KEEPALIVE_INTERVAL_S, watch_keepalive, watch);
  box_http_server_add_stream (req->server, watch, watch_shutdown);
  /* from here on the watch unpauses the message whenever it writes */
  box_http_request_resume (req);
  watch_poll (watch);
}

void
box_http_port_watch (BoxHttpRequest *req)
{
  box_engine_hold_async (req->engine, box_http_request_project (req), box_http_request_param (req, 0),
                         NULL, watch_held, box_http_request_pause (req));
}

/* ---- GET .../ports/{port}/connect -------------------------------------- */

typedef struct {
  guint  port;
  char  *sandbox_id;
} Connect;

static void
connect_free (Connect *connect)
{
  g_free (connect->sandbox_id);
  g_free (connect);
}

static void
connect_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  Connect *connect = req->kept;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxAgentChannel) channel = NULL;
  g_autoptr(BoxHttpWs) ws = NULL;

  channel = box_engine_port_connect_finish (req->engine, result, &error);
  if (channel == NULL) {
    /* 502 port_closed when nothing listens: before the upgrade */
    box_engine_release (req->engine, connect->sandbox_id);
    box_http_reply_error (req->msg, error);
    box_http_request_resume (req);
    return;
  }
  ws = box_http_ws_new (req);
  box_http_ws_bridge (ws, channel, req->engine, connect->sandbox_id, FALSE);
}

static void
connect_open (BoxHttpRequest *req, const char *sandbox_id)
{
  Connect *connect = req->kept;

  connect->sandbox_id = g_strdup (sandbox_id);
  box_engine_port_connect_async (req->engine, sandbox_id, connect->port, NULL, connect_opened, req);
}

void
box_http_port_connect (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  Connect *connect;
  guint port = 0;

  if (!box_http_ws_check_upgrade (req, &error) || !port_param (req, 1, &port, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  connect = g_new0 (Connect, 1);
  connect->port = port;
  box_http_request_keep (req, connect, (GDestroyNotify) connect_free);
  box_http_ws_hold (req, connect_open);
}

/* ---- PUT .../ports/{port}, GET .../ports/settings ---------------------- */

static void
port_access_set (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  JsonNode *node = box_engine_set_port_access_finish (req->engine, result, &error);

  if (node == NULL)
    box_http_reply_error (req->msg, error);
  else
    box_http_reply_json (req->msg, SOUP_STATUS_OK, node);
  box_http_request_resume (req);
}

void
box_http_port_set (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "access", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = NULL;
  g_autofree char *access = NULL;
  guint port = 0;
  JsonObject *obj;

  if (!port_param (req, 1, &port, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  body = box_http_request_body (req, FALSE, &error);
  if (body == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  obj = json_node_get_object (body);
  if (!box_json_check_fields (obj, allowed, &error) ||
      !box_json_get_string (obj, "access", "access", &access, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  if (g_strcmp0 (access, "private") != 0 && g_strcmp0 (access, "public") != 0) {
    box_http_reply_error_literal (req->msg, BOX_ERROR_INVALID,
                                  "invalid access: must be private or public");
    return;
  }
  box_engine_set_port_access_async (req->engine, box_http_request_project (req),
                                    box_http_request_param (req, 0), port, access, NULL,
                                    port_access_set, box_http_request_pause (req));
}

void
box_http_port_settings (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) settings = box_engine_list_port_settings (req->engine,
                                                                 box_http_request_project (req),
                                                                 box_http_request_param (req, 0),
                                                                 &error);

  if (settings == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_reply_list (req->msg, "ports", settings);
}
