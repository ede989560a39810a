/* box-http-ws.c: server WebSockets of the HTTP API (see box-http-ws.h). */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-http-limits.h"
#include "box-http-util.h"
#include "box-http-ws.h"

/* A message sent and not yet written. */
typedef struct {
  guint    type;      /* SOUP_WEBSOCKET_DATA_* */
  GBytes  *data;      /* only while queued before the connection exists */
  gsize    size;
  gsize    credit;
} Sent;

struct _BoxHttpWs {
  GObject                  parent_instance;
  BoxHttpRequest          *req;          /* until the connection is taken */
  gulong                   wrote_id;
  gulong                   gone_id[2];
  SoupWebsocketConnection *conn;
  GIOStream               *io;           /* the metering stream */
  GQueue                   early;        /* Sent*, before the connection exists */
  GQueue                   inflight;     /* Sent* (no data), given to libsoup */
  gsize                    unwritten;
  gboolean                 input_paused;
  GSocket                 *socket;       /* the connection's, when known */
  GSource                 *hup_source;   /* while input is paused */
  gboolean                 close_pending;
  gushort                  close_code;
  char                    *close_reason;
  gboolean                 closed;       /* ::closed emitted */
  gboolean                 self_ref;     /* held until the connection is over */
  guint                    frames_written; /* data frames written, not yet reported */
  guint                    written_idle;
  BoxHttpServer           *server;       /* registered for shutdown */
  BoxHttpSlot             *slot;         /* the caller's stream slot (box-http-limits.h) */
  BoxEngine               *engine;       /* ::sandbox-interrupted */
  char                    *sandbox_id;
  gulong                   interrupt_id;
};

enum { SIGNAL_MESSAGE, SIGNAL_WRITTEN, SIGNAL_CLOSED, N_SIGNALS };
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (BoxHttpWs, box_http_ws, G_TYPE_OBJECT)

static void
sent_free (Sent *sent)
{
  g_clear_pointer (&sent->data, g_bytes_unref);
  g_free (sent);
}

/* ---- the handshake ----------------------------------------------------- */

gboolean
box_http_ws_check_upgrade (BoxHttpRequest *req, GError **error)
{
  g_autoptr(GError) local_error = NULL;

  if (soup_websocket_server_check_handshake (req->msg, NULL, NULL, NULL, &local_error))
    return TRUE;
  if (g_error_matches (local_error, SOUP_WEBSOCKET_ERROR, SOUP_WEBSOCKET_ERROR_NOT_WEBSOCKET))
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "%s needs a WebSocket upgrade (Upgrade: websocket)",
                 g_uri_get_path (soup_server_message_get_uri (req->msg)));
  else
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "bad WebSocket handshake: %s",
                 local_error->message);
  return FALSE;
}

/* ---- sending ----------------------------------------------------------- */

static void watch_hup (BoxHttpWs *self, gboolean on);

static void
emit_closed (BoxHttpWs *self)
{
  g_autoptr(BoxHttpWs) keep G_GNUC_UNUSED = g_object_ref (self);

  if (self->closed)
    return;
  self->closed = TRUE;
  g_clear_pointer (&self->slot, box_http_slot_release);
  if (self->server != NULL) {
    box_http_server_remove_stream (self->server, self);
    self->server = NULL;
  }
  g_clear_signal_handler (&self->interrupt_id, self->engine);
  /* nothing is delivered any more; reading on lets libsoup see the peer's
   * close frame (or its end) instead of waiting for its timeout */
  if (self->input_paused) {
    self->input_paused = FALSE;
    if (self->io != NULL)
      box_http_ws_io_set_input_paused (self->io, FALSE);
  }
  watch_hup (self, FALSE);
  g_signal_emit (self, signals[SIGNAL_CLOSED], 0);
}

/* While libsoup does not read, a client that went away is seen only as an
 * error or hang-up on the socket (after a keep-alive ping drew a reset). */
static gboolean
on_socket_hup (GSocket *socket, GIOCondition condition, gpointer user_data)
{
  BoxHttpWs *self = user_data;

  g_clear_pointer (&self->hup_source, g_source_unref);
  emit_closed (self);
  return G_SOURCE_REMOVE;
}

static void
watch_hup (BoxHttpWs *self, gboolean on)
{
  if (self->hup_source != NULL) {
    g_source_destroy (self->hup_source);
    g_clear_pointer (&self->hup_source, g_source_unref);
  }
  if (!on || self->socket == NULL)
    return;
  self->hup_source = g_socket_create_source (self->socket, G_IO_ERR | G_IO_HUP, NULL);
  g_source_set_callback (self->hup_source, G_SOURCE_FUNC (on_socket_hup), self, NULL);
  g_source_attach (self->hup_source, g_main_context_get_thread_default ());
}

static void
drop_self_ref (BoxHttpWs *self)
{
  if (self->self_ref) {
    self->self_ref = FALSE;
    g_object_unref (self);
  }
}

static gboolean
report_written (gpointer user_data)
{
  BoxHttpWs *self = user_data;
  g_autoptr(BoxHttpWs) keep G_GNUC_UNUSED = g_object_ref (self);

  self->written_idle = 0;
  while (self->frames_written > 0) {
    Sent *sent = g_queue_pop_head (&self->inflight);

    self->frames_written--;
    if (sent == NULL)
      continue;   /* not ours (cannot happen: every data frame is queued here) */
    self->unwritten -= MIN (self->unwritten, sent->size);
    if (sent->credit > 0)
      g_signal_emit (self, signals[SIGNAL_WRITTEN], 0, (guint64) sent->credit);
    sent_free (sent);
  }
  return G_SOURCE_REMOVE;
}

/* The metering stream wrote one more data frame.  This runs inside
 * libsoup's write (before it counted the bytes itself), where nothing may
 * be sent: the report goes out from an idle. */
static void
on_frame_written (gpointer user_data)
{
  BoxHttpWs *self = user_data;

  self->frames_written++;
  if (self->written_idle == 0)
    self->written_idle = g_idle_add_full (G_PRIORITY_DEFAULT, report_written, self, NULL);
}

/* Hands @sent to libsoup (which writes at once what the socket takes). */
static void
conn_send (BoxHttpWs *self, Sent *sent, GBytes *data)
{
  if (soup_websocket_connection_get_state (self->conn) != SOUP_WEBSOCKET_STATE_OPEN) {
    self->unwritten -= MIN (self->unwritten, sent->size);
    sent_free (sent);
    return;
  }
  g_queue_push_tail (&self->inflight, sent);
  soup_websocket_connection_send_message (self->conn, sent->type, data);
}

static void
send_message (BoxHttpWs *self, guint type, GBytes *data, gsize credit)
{
  Sent *sent;

  if (self->closed || self->close_pending)
    return;
  sent = g_new0 (Sent, 1);
  sent->type = type;
  sent->size = g_bytes_get_size (data);
  sent->credit = credit;
  self->unwritten += sent->size;
  if (self->conn == NULL) {
    sent->data = g_bytes_ref (data);
    g_queue_push_tail (&self->early, sent);
    return;
  }
  conn_send (self, sent, data);
}

gboolean
box_http_ws_is_open (BoxHttpWs *self)
{
  g_return_val_if_fail (BOX_IS_HTTP_WS (self), FALSE);
  return !self->closed && !self->close_pending;
}

void
box_http_ws_send_text (BoxHttpWs *self, const char *text)
{
  g_autoptr(GBytes) data = NULL;

  g_return_if_fail (BOX_IS_HTTP_WS (self));
  data = g_bytes_new (text, strlen (text));
  send_message (self, SOUP_WEBSOCKET_DATA_TEXT, data, 0);
}

void
box_http_ws_send_json (BoxHttpWs *self, JsonNode *node)
{
  g_autofree char *text = json_to_string (node, FALSE);

  box_http_ws_send_text (self, text);
}

void
box_http_ws_send_error (BoxHttpWs *self, const GError *error)
{
  g_autoptr(GError) converted = box_error_convert (error, NULL);
  g_autoptr(JsonNode) node = box_error_to_json (converted);

  json_object_set_string_member (json_node_get_object (node), "type", "error");
  box_http_ws_send_json (self, node);
}

void
box_http_ws_send_binary (BoxHttpWs *self, int tag, const void *data, gsize len, gsize credit)
{
  g_autoptr(GBytes) bytes = NULL;

  g_return_if_fail (BOX_IS_HTTP_WS (self));
  if (tag >= 0) {
    guint8 *buf = g_malloc (len + 1);

    buf[0] = (guint8) tag;
    if (len > 0)
      memcpy (buf + 1, data, len);
    bytes = g_bytes_new_take (buf, len + 1);
  } else {
    bytes = g_bytes_new (data, len);
  }
  send_message (self, SOUP_WEBSOCKET_DATA_BINARY, bytes, credit);
}

void
box_http_ws_close (BoxHttpWs *self, gushort code, const char *reason)
{
  g_return_if_fail (BOX_IS_HTTP_WS (self));
  if (self->closed || self->close_pending)
    return;
  if (self->conn == NULL && self->req != NULL) {
    /* the upgrade is still being written: close right after it */
    self->close_pending = TRUE;
    self->close_code = code;
    self->close_reason = g_strdup (reason);
    emit_closed (self);
    return;
  }
  if (self->conn != NULL &&
      soup_websocket_connection_get_state (self->conn) == SOUP_WEBSOCKET_STATE_OPEN)
    soup_websocket_connection_close (self->conn, code, reason);
  emit_closed (self);
}

void
box_http_ws_set_input_paused (BoxHttpWs *self, gboolean paused)
{
  g_return_if_fail (BOX_IS_HTTP_WS (self));
  if (self->closed || self->input_paused == paused)
    return;
  self->input_paused = paused;
  if (self->io != NULL) {
    box_http_ws_io_set_input_paused (self->io, paused);
    watch_hup (self, paused);
  }
}

gsize
box_http_ws_get_unwritten (BoxHttpWs *self)
{
  g_return_val_if_fail (BOX_IS_HTTP_WS (self), 0);
  return self->unwritten;
}

/* ---- the connection ---------------------------------------------------- */

static void
on_conn_message (SoupWebsocketConnection *conn, gint type, GBytes *message, gpointer user_data)
{
  BoxHttpWs *self = user_data;

  if (!self->closed)
    g_signal_emit (self, signals[SIGNAL_MESSAGE], 0, (guint) type, message);
}

static void
on_conn_closing (SoupWebsocketConnection *conn, gpointer user_data)
{
  emit_closed (user_data);
}

static void
on_conn_error (SoupWebsocketConnection *conn, GError *error, gpointer user_data)
{
  g_debug ("WebSocket: %s", error->message);
}

static void
on_conn_closed (SoupWebsocketConnection *conn, gpointer user_data)
{
  BoxHttpWs *self = user_data;

  emit_closed (self);
  drop_self_ref (self);
}

static void
disconnect_request (BoxHttpWs *self)
{
  if (self->req == NULL)
    return;
  g_clear_signal_handler (&self->wrote_id, self->req->msg);
  g_clear_signal_handler (&self->gone_id[0], self->req->msg);
  g_clear_signal_handler (&self->gone_id[1], self->req->msg);
}

/* The 101 went out: take the connection from libsoup. */
static void
on_wrote_informational (SoupServerMessage *msg, gpointer user_data)
{
  BoxHttpWs *self = user_data;
  g_autoptr(GIOStream) stream = NULL;
  Sent *sent;

  if (soup_server_message_get_status (msg) != SOUP_STATUS_SWITCHING_PROTOCOLS)
    return;
  disconnect_request (self);
  stream = soup_server_message_steal_connection (msg);
  g_clear_pointer (&self->req, box_http_request_unref);
  if (stream == NULL) {
    emit_closed (self);
    drop_self_ref (self);
    return;
  }
  self->io = box_http_ws_io_new (stream, on_frame_written, self);
  /* libsoup 3.2 leaves the socket on the stolen stream */
  self->socket = g_object_get_data (G_OBJECT (stream), "GSocket");
  if (self->socket == NULL && G_IS_SOCKET_CONNECTION (stream))
    self->socket = g_socket_connection_get_socket (G_SOCKET_CONNECTION (stream));
  if (self->socket != NULL)
    g_object_ref (self->socket);
  box_http_ws_io_set_input_paused (self->io, self->input_paused);
  watch_hup (self, self->input_paused);
  self->conn = soup_websocket_connection_new (self->io, soup_server_message_get_uri (msg),
                                              SOUP_WEBSOCKET_CONNECTION_SERVER, NULL, NULL, NULL);
  soup_websocket_connection_set_max_incoming_payload_size (self->conn, BOX_HTTP_WS_MAX_MESSAGE);
  /* pings find clients that went away while nothing else was written */
  soup_websocket_connection_set_keepalive_interval (self->conn, BOX_HTTP_WS_KEEPALIVE_S);
  g_signal_connect (self->conn, "message", G_CALLBACK (on_conn_message), self);
  g_signal_connect (self->conn, "closing", G_CALLBACK (on_conn_closing), self);
  g_signal_connect (self->conn, "error", G_CALLBACK (on_conn_error), self);
  g_signal_connect (self->conn, "closed", G_CALLBACK (on_conn_closed), self);
  while ((sent = g_queue_pop_head (&self->early)) != NULL) {
    g_autoptr(GBytes) data = g_steal_pointer (&sent->data);
    conn_send (self, sent, data);
  }
  if (self->close_pending)
    soup_websocket_connection_close (self->conn, self->close_code, self->close_reason);
}

/* The client went away before the upgrade was written. */
static void
on_request_gone (SoupServerMessage *msg, gpointer user_data)
{
  BoxHttpWs *self = user_data;

  disconnect_request (self);
  g_clear_pointer (&self->req, box_http_request_unref);
  emit_closed (self);
  drop_self_ref (self);
}

static void
shutdown_close (gpointer stream)
{
  box_http_ws_close (BOX_HTTP_WS (stream), SOUP_WEBSOCKET_CLOSE_GOING_AWAY, "the service is stopping");
}

BoxHttpWs *
box_http_ws_new (BoxHttpRequest *req)
{
  BoxHttpWs *self;
  SoupMessageHeaders *headers;

  g_return_val_if_fail (req != NULL && req->paused, NULL);

  self = g_object_new (BOX_TYPE_HTTP_WS, NULL);
  self->req = box_http_request_ref (req);
  self->slot = g_steal_pointer (&req->slot);
  self->server = req->server;
  box_http_server_add_stream (self->server, self, shutdown_close);
  if (req->finished) {
    box_http_request_resume (req);
    g_clear_pointer (&self->req, box_http_request_unref);
    emit_closed (self);
    return self;
  }
  headers = soup_server_message_get_response_headers (req->msg);
  /* "Connection: close" (see box-http-server.c) would contradict "Upgrade" */
  soup_message_headers_remove (headers, "Connection");
  if (!soup_websocket_server_process_handshake (req->msg, NULL, NULL, NULL, NULL)) {
    /* checked by box_http_ws_check_upgrade() before; libsoup answered 400 */
    box_http_request_resume (req);
    g_clear_pointer (&self->req, box_http_request_unref);
    emit_closed (self);
    return self;
  }
  /* alive until the connection is over, whoever else lets go */
  self->self_ref = TRUE;
  g_object_ref (self);
  self->wrote_id = g_signal_connect (req->msg, "wrote-informational",
                                     G_CALLBACK (on_wrote_informational), self);
  self->gone_id[0] = g_signal_connect (req->msg, "finished", G_CALLBACK (on_request_gone), self);
  self->gone_id[1] = g_signal_connect (req->msg, "disconnected", G_CALLBACK (on_request_gone), self);
  box_http_request_resume (req);
  return self;
}

/* ---- interruption ------------------------------------------------------ */

static void
on_sandbox_interrupted (BoxEngine *engine, const char *sandbox_id, const char *why,
                        gpointer user_data)
{
  BoxHttpWs *self = user_data;
  g_autofree char *reason = NULL;

  if (g_strcmp0 (sandbox_id, self->sandbox_id) != 0)
    return;
  reason = g_strdup_printf ("the sandbox went away (%s)", why != NULL ? why : "interrupted");
  box_http_ws_close (self, SOUP_WEBSOCKET_CLOSE_SERVER_ERROR, reason);
}

void
box_http_ws_end_on_interrupt (BoxHttpWs *self, BoxEngine *engine, const char *sandbox_id)
{
  g_return_if_fail (BOX_IS_HTTP_WS (self));
  g_return_if_fail (self->engine == NULL);
  if (self->closed)
    return;
  self->engine = g_object_ref (engine);
  self->sandbox_id = g_strdup (sandbox_id);
  self->interrupt_id = g_signal_connect (engine, "sandbox-interrupted",
                                         G_CALLBACK (on_sandbox_interrupted), self);
}

/* ---- object ------------------------------------------------------------ */

static void
box_http_ws_dispose (GObject *object)
{
  BoxHttpWs *self = BOX_HTTP_WS (object);

  disconnect_request (self);
  g_clear_pointer (&self->req, box_http_request_unref);
  g_clear_pointer (&self->slot, box_http_slot_release);
  g_clear_handle_id (&self->written_idle, g_source_remove);
  watch_hup (self, FALSE);
  g_clear_object (&self->socket);
  if (self->server != NULL) {
    box_http_server_remove_stream (self->server, self);
    self->server = NULL;
  }
  g_clear_signal_handler (&self->interrupt_id, self->engine);
  g_clear_object (&self->engine);
  if (self->io != NULL)
    box_http_ws_io_detach (self->io);
  if (self->conn != NULL) {
    g_signal_handlers_disconnect_by_data (self->conn, self);
    g_clear_object (&self->conn);
  }
  g_clear_object (&self->io);
  G_OBJECT_CLASS (box_http_ws_parent_class)->dispose (object);
}

static void
box_http_ws_finalize (GObject *object)
{
  BoxHttpWs *self = BOX_HTTP_WS (object);

  g_queue_clear_full (&self->early, (GDestroyNotify) sent_free);
  g_queue_clear_full (&self->inflight, (GDestroyNotify) sent_free);
  g_free (self->close_reason);
  g_free (self->sandbox_id);
  G_OBJECT_CLASS (box_http_ws_parent_class)->finalize (object);
}

static void
box_http_ws_class_init (BoxHttpWsClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = box_http_ws_dispose;
  object_class->finalize = box_http_ws_finalize;
  signals[SIGNAL_MESSAGE] =
    g_signal_new ("message", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_BYTES);
  signals[SIGNAL_WRITTEN] =
    g_signal_new ("written", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_UINT64);
  signals[SIGNAL_CLOSED] =
    g_signal_new ("closed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);
}

static void
box_http_ws_init (BoxHttpWs *self)
{
  g_queue_init (&self->early);
  g_queue_init (&self->inflight);
}
