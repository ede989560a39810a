/* box-http-ws-bridge.c: a WebSocket bridged to a stream in a sandbox; see
 * box-http-ws-bridge.h. */
#include "config.h"

#include "box-http-ws-bridge.h"

struct _BoxHttpWsBridge {
  BoxHttpWs                  *ws;
  const BoxHttpWsBridgeFuncs *funcs;
  gpointer                    peer;
  gboolean                    ws_closed;
  gboolean                    peer_done;
  guint                       depth;          /* bridge calls under way (closes, peer callbacks) */
  gsize                       input;          /* from the client, not yet taken by the peer */
  gboolean                    input_paused;
};

/* ---- hold, accept ------------------------------------------------------ */

typedef struct {
  BoxHttpRequest  *req;
  BoxHttpHeldFunc  open;
} Hold;

static void
hold_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Hold *hold = user_data;
  BoxHttpRequest *req = hold->req;
  BoxHttpHeldFunc open = hold->open;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = box_engine_hold_finish (req->engine, result, &error);

  g_free (hold);
  if (sandbox == NULL) {
    box_http_reply_error (req->msg, error);
    box_http_request_resume (req);
    box_http_request_unref (req);
    return;
  }
  open (req, sandbox->id);
}

void
box_http_ws_hold (BoxHttpRequest *req, BoxHttpHeldFunc open)
{
  Hold *hold = g_new (Hold, 1);

  hold->req = box_http_request_pause (req);
  hold->open = open;
  box_engine_hold_async (req->engine, box_http_request_project (req), box_http_request_param (req, 0),
                         NULL, hold_done, hold);
}

BoxHttpWs *
box_http_ws_accept (BoxHttpRequest *req, gboolean opened, const GError *error)
{
  if (!opened) {
    box_http_reply_error (req->msg, error);
    box_http_request_resume (req);
    return NULL;
  }
  return box_http_ws_new (req);
}

/* ---- the bridge -------------------------------------------------------- */

void
box_http_ws_bridge_maybe_free (BoxHttpWsBridge *self)
{
  if (!self->ws_closed || !self->peer_done || self->input > 0 || self->depth > 0 ||
      (self->funcs->busy != NULL && self->funcs->busy (self->peer)))
    return;
  g_signal_handlers_disconnect_by_data (self->ws, self);
  g_clear_object (&self->ws);
  self->funcs->free (self->peer);
  g_free (self);
}

static void
update_input (BoxHttpWsBridge *self)
{
  gboolean pause = self->input >= BOX_HTTP_WS_BRIDGE_INPUT_HIGH;

  if (pause != self->input_paused && !self->ws_closed) {
    self->input_paused = pause;
    box_http_ws_set_input_paused (self->ws, pause);
  }
}

void
box_http_ws_bridge_input_add (BoxHttpWsBridge *self, gsize len)
{
  self->input += len;
  update_input (self);
}

void
box_http_ws_bridge_input_taken (BoxHttpWsBridge *self, gsize len)
{
  self->input -= MIN (self->input, len);
  update_input (self);
}

gsize
box_http_ws_bridge_get_input (BoxHttpWsBridge *self)
{
  return self->input;
}

BoxHttpWs *
box_http_ws_bridge_get_ws (BoxHttpWsBridge *self)
{
  return self->ws;
}

gboolean
box_http_ws_bridge_is_ws_closed (BoxHttpWsBridge *self)
{
  return self->ws_closed;
}

void
box_http_ws_bridge_peer_done (BoxHttpWsBridge *self)
{
  self->peer_done = TRUE;
}

gboolean
box_http_ws_bridge_is_peer_done (BoxHttpWsBridge *self)
{
  return self->peer_done;
}

void
box_http_ws_bridge_close (BoxHttpWsBridge *self, gushort code, const char *reason)
{
  /* ::closed is emitted from within: the bridge stays until we return */
  self->depth++;
  box_http_ws_close (self->ws, code, reason);
  self->depth--;
}

static void
on_message (BoxHttpWs *ws, guint type, GBytes *message, gpointer user_data)
{
  BoxHttpWsBridge *self = user_data;

  self->depth++;
  self->funcs->message (self, self->peer, type, message);
  self->depth--;
  box_http_ws_bridge_maybe_free (self);
}

static void
on_written (BoxHttpWs *ws, guint64 credit, gpointer user_data)
{
  BoxHttpWsBridge *self = user_data;

  self->depth++;
  self->funcs->written (self, self->peer, credit);
  self->depth--;
  box_http_ws_bridge_maybe_free (self);
}

static void
on_closed (BoxHttpWs *ws, gpointer user_data)
{
  BoxHttpWsBridge *self = user_data;

  if (self->ws_closed)
    return;
  self->ws_closed = TRUE;
  /* letting the peer go may complete its pending writes in place, and
   * their callbacks ask whether the bridge may go: not before we return */
  self->depth++;
  self->funcs->ws_closed (self, self->peer);
  self->depth--;
  box_http_ws_bridge_maybe_free (self);
}

BoxHttpWsBridge *
box_http_ws_bridge_new (BoxHttpWs *ws, BoxEngine *engine, const char *sandbox_id,
                        const BoxHttpWsBridgeFuncs *funcs, gpointer peer)
{
  BoxHttpWsBridge *self = g_new0 (BoxHttpWsBridge, 1);

  self->ws = g_object_ref (ws);
  self->funcs = funcs;
  self->peer = peer;
  g_signal_connect (ws, "message", G_CALLBACK (on_message), self);
  g_signal_connect (ws, "written", G_CALLBACK (on_written), self);
  g_signal_connect (ws, "closed", G_CALLBACK (on_closed), self);
  box_http_ws_end_on_interrupt (ws, engine, sandbox_id);
  return self;
}

void
box_http_ws_bridge_start (BoxHttpWsBridge *self)
{
  if (!self->ws_closed && !box_http_ws_is_open (self->ws))
    on_closed (self->ws, self);
}
