/* box-http-ws-bridge.h: a WebSocket bridged to a stream in a sandbox: an
 * exec session (box-http-stream-exec.c) or a port connection
 * (box-http-ports.c).  What the two share:
 *
 *   1. box_http_ws_hold(): after the route's checks, pause the request and
 *      hold the sandbox (a refusal is the plain HTTP answer).
 *   2. Open the stream (the route's own engine call), then
 *      box_http_ws_accept(): the upgrade, or the plain HTTP refusal when
 *      the stream did not open.
 *   3. box_http_ws_bridge_new() with the route's BoxHttpWsBridgeFuncs and
 *      its own state (the "peer"), then box_http_ws_bridge_start().
 *
 * The bridge gives the peer the client's frames (::message), the socket's
 * ::written credits, and the socket's end (once).  What the client sent and
 * the peer has not handed on yet is counted (box_http_ws_bridge_input_add()
 * and _input_taken()): while BOX_HTTP_WS_BRIDGE_INPUT_HIGH bytes or more
 * wait, the socket is not read, so a fast client waits in its own socket.
 * The socket ends with box_http_ws_bridge_close() (or on an interruption of
 * the sandbox, 1011).
 *
 * Lifetime: the bridge and the peer (its free func) are freed once the
 * socket is closed, the peer let go (box_http_ws_bridge_peer_done()),
 * nothing the client sent waits, the peer is not busy (its optional busy
 * func: a read or a write of its own in flight), and no call of the
 * bridge's is under way.  That last one is a depth, not a flag: a close
 * can complete the peer's pending writes in place (GTask runs their
 * callbacks within it), and those callbacks check whether the bridge may
 * go; it must not be freed under the close's caller (commit 253bc17).
 * Every peer callback runs inside such a depth, and the bridge checks
 * whether it may go after each.
 */
#pragma once

#include "box-http-util.h"
#include "box-http-ws.h"

G_BEGIN_DECLS

#define BOX_HTTP_WS_BRIDGE_INPUT_HIGH (256 * 1024)

typedef struct _BoxHttpWsBridge BoxHttpWsBridge;

/* The first step of a WebSocket route over a sandbox stream, after its
 * checks: pauses @req and holds the sandbox of its path (a refusal, 404
 * or 503 ..., is the plain HTTP answer), then calls @open with the
 * sandbox's id; @open takes over the paused request's reference. */
typedef void (*BoxHttpHeldFunc) (BoxHttpRequest *req, const char *sandbox_id);
void             box_http_ws_hold            (BoxHttpRequest *req, BoxHttpHeldFunc open);

typedef struct {
  /* a frame from the client (SOUP_WEBSOCKET_DATA_TEXT or _BINARY) */
  void     (*message)   (BoxHttpWsBridge *bridge, gpointer peer, guint type, GBytes *message);
  /* box_http_ws_send_binary()'s @credit, once written */
  void     (*written)   (BoxHttpWsBridge *bridge, gpointer peer, guint64 credit);
  /* the socket is over (once): let the peer's stream go */
  void     (*ws_closed) (BoxHttpWsBridge *bridge, gpointer peer);
  /* optional: TRUE while the peer must stay (a call of its own in flight) */
  gboolean (*busy)      (gpointer peer);
  void     (*free)      (gpointer peer);
} BoxHttpWsBridgeFuncs;

/* Accepts the upgrade of the paused @req when @opened; else answers the
 * plain HTTP @error and resumes it, and returns NULL. */
BoxHttpWs       *box_http_ws_accept          (BoxHttpRequest *req, gboolean opened,
                                              const GError *error);

BoxHttpWsBridge *box_http_ws_bridge_new      (BoxHttpWs *ws, BoxEngine *engine,
                                              const char *sandbox_id,
                                              const BoxHttpWsBridgeFuncs *funcs, gpointer peer);
/* The socket's end when it was over before the bridge began. */
void             box_http_ws_bridge_start    (BoxHttpWsBridge *self);
BoxHttpWs       *box_http_ws_bridge_get_ws   (BoxHttpWsBridge *self);
gboolean         box_http_ws_bridge_is_ws_closed (BoxHttpWsBridge *self);
void             box_http_ws_bridge_close    (BoxHttpWsBridge *self, gushort code, const char *reason);
void             box_http_ws_bridge_peer_done (BoxHttpWsBridge *self);
gboolean         box_http_ws_bridge_is_peer_done (BoxHttpWsBridge *self);
void             box_http_ws_bridge_input_add   (BoxHttpWsBridge *self, gsize len);
void             box_http_ws_bridge_input_taken (BoxHttpWsBridge *self, gsize len);
gsize            box_http_ws_bridge_get_input   (BoxHttpWsBridge *self);
/* Frees the bridge and the peer when nothing keeps them (see above);
 * neither may be used after it unless something does. */
void             box_http_ws_bridge_maybe_free (BoxHttpWsBridge *self);

G_END_DECLS
