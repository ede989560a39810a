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
 * comment every 15 s notices a client that went away; a client that reads
 * so slowly that the writer's cap is reached gets a last `dropped` event
 * (box-http-sse.h).
 *
 * The settings are records only: PUT and GET never wake the sandbox, and
 * a port need not be listening.
 */
#include "config.h"

#include <string.h>

#include "box-http-sse.h"
#include "box-http-util.h"
#include "box-http-ws-bridge.h"
#include "box-json-private.h"
#include "box-requests.h"

#define POLL_INTERVAL_MS    500

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

/* {port, address, pid, session?} */
static JsonNode *
listener_to_json (const BoxPortListener *listener)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "port");
  json_builder_add_int_value (builder, listener->port);
  json_builder_set_member_name (builder, "address");
  json_builder_add_string_value (builder, listener->address);
  json_builder_set_member_name (builder, "pid");
  json_builder_add_int_value (builder, listener->pid);
  if (listener->session != NULL) {
    json_builder_set_member_name (builder, "session");
    json_builder_add_string_value (builder, listener->session);
  }
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

/* {port, access, url} */
static JsonNode *
setting_to_json (const BoxPortSetting *setting)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "port");
  json_builder_add_int_value (builder, setting->port);
  json_builder_set_member_name (builder, "access");
  json_builder_add_string_value (builder, setting->access);
  json_builder_set_member_name (builder, "url");
  json_builder_add_string_value (builder, setting->url);
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

typedef JsonNode *(*ToJsonFunc) (gconstpointer record);

/* {<member>: [records as JSON]} */
static void
reply_records (BoxHttpRequest *req, const char *member, GPtrArray *records, ToJsonFunc to_json)
{
  g_autoptr(GPtrArray) nodes = box_http_node_array_new ();

  for (guint i = 0; i < records->len; i++)
    g_ptr_array_add (nodes, to_json (g_ptr_array_index (records, i)));
  box_http_reply_list (req->msg, member, nodes);
}

static void
ports_listed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) ports = box_engine_list_ports_finish (req->engine, result, &error);

  if (ports == NULL)
    box_http_reply_error (req->msg, error);
  else
    reply_records (req, "ports", ports, (ToJsonFunc) listener_to_json);
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
  BoxEngine      *engine;
  BoxHttpSse     *sse;
  char           *sandbox_id;
  GHashTable     *known;          /* "port address" -> BoxPortListener* */
  GCancellable   *cancellable;    /* the poll in flight */
  guint           poll_id;
  gulong          interrupt_id;
} PortWatch;

/* Stops polling and watching the engine. */
static void
watch_stop (PortWatch *watch)
{
  g_cancellable_cancel (watch->cancellable);
  g_clear_object (&watch->cancellable);
  g_clear_handle_id (&watch->poll_id, g_source_remove);
  g_clear_signal_handler (&watch->interrupt_id, watch->engine);
}

/* The answer is over (BoxHttpSseOverFunc): the sse is gone already. */
static void
watch_over (gpointer user_data)
{
  PortWatch *watch = user_data;

  watch_stop (watch);
  g_hash_table_unref (watch->known);
  g_free (watch->sandbox_id);
  g_object_unref (watch->engine);
  g_free (watch);
}

/* Completes the answer; watch_over() follows once it was written. */
static void
watch_end (PortWatch *watch)
{
  watch_stop (watch);
  box_http_sse_end (watch->sse);
}

static void
watch_event (PortWatch *watch, const char *type, const BoxPortListener *listener)
{
  g_autoptr(JsonNode) node = listener_to_json (listener);
  g_autofree char *data = json_to_string (node, FALSE);

  box_http_sse_send (watch->sse, type, data);
}

static char *
listener_key (const BoxPortListener *listener)
{
  return g_strdup_printf ("%u %s", listener->port, listener->address != NULL ? listener->address : "");
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
  now = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) box_port_listener_free);
  for (guint i = 0; i < ports->len; i++) {
    BoxPortListener *listener = g_ptr_array_index (ports, i);

    g_hash_table_replace (now, listener_key (listener), box_port_listener_copy (listener));
  }
  /* closed first, then opened, each in port order as the agent lists them */
  g_hash_table_iter_init (&iter, watch->known);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    if (!g_hash_table_contains (now, key))
      watch_event (watch, "closed", value);
  }
  for (guint i = 0; i < ports->len; i++) {
    BoxPortListener *listener = g_ptr_array_index (ports, i);
    g_autofree char *k = listener_key (listener);

    if (!g_hash_table_contains (watch->known, k))
      watch_event (watch, "opened", listener);
  }
  g_hash_table_unref (watch->known);
  watch->known = g_steal_pointer (&now);
  if (box_http_sse_is_dropped (watch->sse)) {
    /* the reader is too far behind: no more polls */
    watch_stop (watch);
    return;
  }
  watch->poll_id = g_timeout_add (POLL_INTERVAL_MS, watch_poll, watch);
}

static gboolean
watch_poll (gpointer user_data)
{
  PortWatch *watch = user_data;

  watch->poll_id = 0;
  watch->cancellable = g_cancellable_new ();
  box_engine_poll_ports_async (watch->engine, watch->sandbox_id, watch->cancellable,
                               watch_polled, watch);
  return G_SOURCE_REMOVE;
}

static void
watch_interrupted (BoxEngine *engine, const char *sandbox_id, const char *why, gpointer user_data)
{
  PortWatch *watch = user_data;

  if (g_strcmp0 (sandbox_id, watch->sandbox_id) == 0)
    watch_end (watch);
}

static void
watch_held (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = box_engine_hold_finish (req->engine, result, &error);
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
  watch = g_new0 (PortWatch, 1);
  watch->sse = box_http_sse_start (req, watch_over, watch);
  if (watch->sse == NULL) {
    /* a HEAD: the headers only */
    g_free (watch);
    box_http_request_resume (req);
    return;
  }
  watch->engine = g_object_ref (req->engine);
  watch->sandbox_id = g_strdup (sandbox->id);
  watch->known = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) box_port_listener_free);
  watch->interrupt_id = g_signal_connect (req->engine, "sandbox-interrupted",
                                          G_CALLBACK (watch_interrupted), watch);
  /* from here on the writer unpauses the message whenever it writes */
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

/* The bridge between the socket and the connection's byte stream.  From the
 * sandbox: read while less than CONNECT_WINDOW bytes wait to be written to
 * the client (the stream credits the agent as it is read, so a slow client
 * slows the peer in the sandbox); to it: binary frames are written as the
 * stream takes them, the socket not read while more than
 * BOX_HTTP_WS_BRIDGE_INPUT_HIGH wait (box-http-ws-bridge.h).
 * A text frame {"type": "eof"} half-closes (the stream's output is closed
 * after what came before); the peer's end of file closes the socket with
 * 1000, after what came before. */

#define CONNECT_WINDOW (1024 * 1024)
#define CONNECT_READ   (64 * 1024)

typedef struct {
  BoxHttpWsBridge *bridge;
  BoxAgentStream  *stream;
  GCancellable    *cancellable;    /* the read in flight */
  gboolean         reading;
  gboolean         input_done;     /* the stream's input ended */
  gsize            unwritten;      /* sent to the socket, not yet written */
  GQueue           pending;        /* GBytes for the stream (the bridge counts them) */
  gsize            pending_off;    /* of the head, written already */
  GSource         *out_source;     /* waiting for the stream to take more */
  gboolean         eof_requested;  /* the client's half-close */
} Connect;

static void connect_read (Connect *c);
static void connect_pump (Connect *c);

static gboolean
connect_busy (gpointer peer)
{
  Connect *c = peer;

  return c->reading || c->out_source != NULL;
}

static void
connect_free (gpointer peer)
{
  Connect *c = peer;

  g_clear_object (&c->stream);
  g_clear_object (&c->cancellable);
  g_queue_clear_full (&c->pending, (GDestroyNotify) g_bytes_unref);
  g_free (c);
}

/* The client left and what it sent went to the stream: let the stream go
 * (what it still queues goes out, then EOF, then the channel closes). */
static void
connect_let_go (Connect *c)
{
  if (box_http_ws_bridge_is_peer_done (c->bridge) || box_http_ws_bridge_get_input (c->bridge) > 0)
    return;
  box_http_ws_bridge_peer_done (c->bridge);
  box_agent_stream_close_after_writes (c->stream);
}

static void
connect_read_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Connect *c = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = g_input_stream_read_bytes_finish (G_INPUT_STREAM (source), result, &error);
  gsize len = 0;
  const guint8 *data;

  c->reading = FALSE;
  if (box_http_ws_bridge_is_ws_closed (c->bridge)) {
    box_http_ws_bridge_maybe_free (c->bridge);
    return;
  }
  if (bytes == NULL || g_bytes_get_size (bytes) == 0) {
    /* the peer in the sandbox shut its side (or the connection ended): a
     * WebSocket cannot half-close, so the socket ends here, after what came
     * before */
    if (bytes == NULL)
      g_debug ("port connect: %s", error->message);
    c->input_done = TRUE;
    box_http_ws_bridge_close (c->bridge, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
    box_http_ws_bridge_maybe_free (c->bridge);
    return;
  }
  data = g_bytes_get_data (bytes, &len);
  c->unwritten += len;
  box_http_ws_send_binary (box_http_ws_bridge_get_ws (c->bridge), -1, data, len, len);
  connect_read (c);
}

static void
connect_read (Connect *c)
{
  if (c->reading || c->input_done || box_http_ws_bridge_is_ws_closed (c->bridge) ||
      c->unwritten >= CONNECT_WINDOW)
    return;
  c->reading = TRUE;
  g_input_stream_read_bytes_async (g_io_stream_get_input_stream (G_IO_STREAM (c->stream)),
                                   CONNECT_READ, G_PRIORITY_DEFAULT, c->cancellable,
                                   connect_read_done, c);
}

static void
on_connect_written (BoxHttpWsBridge *bridge, gpointer peer, guint64 credit)
{
  Connect *c = peer;

  c->unwritten -= MIN (c->unwritten, (gsize) credit);
  connect_read (c);
}

static gboolean
connect_writable (GObject *stream, gpointer user_data)
{
  Connect *c = user_data;

  g_clear_pointer (&c->out_source, g_source_unref);
  connect_pump (c);
  box_http_ws_bridge_maybe_free (c->bridge);
  return G_SOURCE_REMOVE;
}

/* What the client sent, to the stream as it takes it. */
static void
connect_pump (Connect *c)
{
  GPollableOutputStream *out = G_POLLABLE_OUTPUT_STREAM (g_io_stream_get_output_stream (G_IO_STREAM (c->stream)));
  GBytes *head;

  while (c->out_source == NULL && (head = g_queue_peek_head (&c->pending)) != NULL) {
    g_autoptr(GError) error = NULL;
    gsize len = 0;
    const guint8 *data = g_bytes_get_data (head, &len);
    gssize n = g_pollable_output_stream_write_nonblocking (out, data + c->pending_off,
                                                           len - c->pending_off, NULL, &error);

    if (n < 0 && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK)) {
      c->out_source = g_pollable_output_stream_create_source (out, NULL);
      g_source_set_callback (c->out_source, (GSourceFunc) (GCallback) connect_writable, c, NULL);
      g_source_attach (c->out_source, NULL);
      break;
    }
    if (n < 0) {
      /* the connection is over: what is left goes nowhere */
      g_debug ("port connect: %s", error->message);
      g_queue_clear_full (&c->pending, (GDestroyNotify) g_bytes_unref);
      c->pending_off = 0;
      box_http_ws_bridge_input_taken (c->bridge, box_http_ws_bridge_get_input (c->bridge));
      break;
    }
    c->pending_off += (gsize) n;
    box_http_ws_bridge_input_taken (c->bridge, (gsize) n);
    if (c->pending_off == len) {
      g_bytes_unref (g_queue_pop_head (&c->pending));
      c->pending_off = 0;
    }
  }
  if (box_http_ws_bridge_get_input (c->bridge) == 0 && c->eof_requested &&
      !box_http_ws_bridge_is_peer_done (c->bridge))
    /* the client's half-close, after what it sent before */
    g_output_stream_close (G_OUTPUT_STREAM (out), NULL, NULL);
  if (box_http_ws_bridge_is_ws_closed (c->bridge))
    connect_let_go (c);
}

static void
on_connect_message (BoxHttpWsBridge *bridge, gpointer peer, guint type, GBytes *message)
{
  Connect *c = peer;

  if (type == SOUP_WEBSOCKET_DATA_TEXT) {
    g_autoptr(JsonNode) node = NULL;
    gsize len = 0;
    const char *text = g_bytes_get_data (message, &len);
    JsonNode *kind;

    /* {"type": "eof"}: a raw stream has no other control frame */
    node = box_json_parse_body (text, len, FALSE, NULL);
    kind = node != NULL && JSON_NODE_HOLDS_OBJECT (node) ?
           box_json_member (json_node_get_object (node), "type") : NULL;
    if (kind != NULL && box_json_is_string (kind) && g_strcmp0 (json_node_get_string (kind), "eof") == 0)
      c->eof_requested = TRUE;
  } else if (g_bytes_get_size (message) > 0 && !c->eof_requested) {
    g_queue_push_tail (&c->pending, g_bytes_ref (message));
    box_http_ws_bridge_input_add (bridge, g_bytes_get_size (message));
  }
  connect_pump (c);
}

static void
on_connect_closed (BoxHttpWsBridge *bridge, gpointer peer)
{
  Connect *c = peer;

  g_cancellable_cancel (c->cancellable);
  /* what the client sent last goes first, then EOF, then close */
  connect_let_go (c);
}

static const BoxHttpWsBridgeFuncs connect_bridge = {
  .message = on_connect_message,
  .written = on_connect_written,
  .ws_closed = on_connect_closed,
  .busy = connect_busy,
  .free = connect_free,
};

static void
bridge_connect (BoxHttpWs *ws, BoxAgentStream *stream, BoxEngine *engine, const char *sandbox_id)
{
  Connect *c = g_new0 (Connect, 1);

  c->stream = g_object_ref (stream);
  c->cancellable = g_cancellable_new ();
  g_queue_init (&c->pending);
  c->bridge = box_http_ws_bridge_new (ws, engine, sandbox_id, &connect_bridge, c);
  if (box_http_ws_is_open (ws))
    connect_read (c);
  else
    /* may free c */
    box_http_ws_bridge_start (c->bridge);
}

typedef struct {
  guint  port;
  char  *sandbox_id;
} ConnectRequest;

static void
connect_request_free (ConnectRequest *connect)
{
  g_free (connect->sandbox_id);
  g_free (connect);
}

static void
connect_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  ConnectRequest *connect = req->kept;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxAgentStream) stream = NULL;
  g_autoptr(BoxHttpWs) ws = NULL;

  /* the hold is the stream's now (released already on an error) */
  stream = box_engine_port_connect_finish (req->engine, result, &error);
  /* 502 port_closed when nothing listens: before the upgrade */
  ws = box_http_ws_accept (req, stream != NULL, error);
  if (ws == NULL)
    return;
  bridge_connect (ws, stream, req->engine, connect->sandbox_id);
}

static void
connect_open (BoxHttpRequest *req, const char *sandbox_id)
{
  ConnectRequest *connect = req->kept;

  connect->sandbox_id = g_strdup (sandbox_id);
  box_engine_port_connect_async (req->engine, sandbox_id, connect->port, NULL, connect_opened, req);
}

void
box_http_port_connect (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  ConnectRequest *connect;
  guint port = 0;

  if (!box_http_ws_check_upgrade (req, &error) || !port_param (req, 1, &port, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  connect = g_new0 (ConnectRequest, 1);
  connect->port = port;
  box_http_request_keep (req, connect, (GDestroyNotify) connect_request_free);
  box_http_ws_hold (req, connect_open);
}

/* ---- PUT .../ports/{port}, GET .../ports/settings ---------------------- */

static void
port_access_set (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxPortSetting) setting = box_engine_set_port_access_finish (req->engine, result, &error);

  if (setting == NULL)
    box_http_reply_error (req->msg, error);
  else
    box_http_reply_json (req->msg, SOUP_STATUS_OK, setting_to_json (setting));
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
  reply_records (req, "ports", settings, (ToJsonFunc) setting_to_json);
}
