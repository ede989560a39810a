/* box-http-ws.h: the WebSocket routes' plumbing in the HTTP transport.
 *
 * A WebSocket route (exec, exec/sessions/{session}, ports/{port}/connect,
 * fs/watch) goes like this:
 *
 *   1. In the handler: box_http_ws_check_upgrade().  A request that is no
 *      WebSocket upgrade (a plain GET, a bad key or version) answers 400
 *      invalid, like any refused upgrade, as an ordinary HTTP error in the
 *      {error: {code, message}} shape.  (No key was answered 401 before the
 *      handler ran.)
 *   2. Validate the query, box_http_request_pause(), do what may refuse
 *      (box_engine_hold_async(): 404 for no such sandbox; open the agent
 *      channel: 502 port_closed ...).  A refusal is box_http_reply_error() +
 *      box_http_request_resume(): still plain HTTP.
 *   3. box_http_ws_new (req) on the paused request: answers 101 and, once
 *      that is written, takes the connection.  The object is usable at once:
 *      what is sent before the connection is taken is queued, in order.
 *   4. box_http_ws_end_on_interrupt(): the socket closes with 1011 when the
 *      sandbox pauses, stops, is deleted, checkpointed with memory,
 *      restored or lost (BoxEngine::sandbox-interrupted).
 *
 * Flow control.  libsoup 3.2's SoupWebsocketConnection has no buffered
 * amount and no way to stop reading, so the connection runs over a
 * metering stream (box-http-ws-io.c) that (a) counts the server's frames
 * as the socket accepts them: a message sent with a @credit gets
 * ::written (credit) once its last byte went to the kernel (for a session:
 * acknowledge the output there, box_exec_session_output_done(), so a slow
 * reader slows the producer in the sandbox, and boxd holds at most one
 * channel window);
 * and (b) can stop reading the client's frames
 * (box_http_ws_set_input_paused()), so a fast client waits in its own
 * socket instead of in boxd (pings every BOX_HTTP_WS_KEEPALIVE_S still find
 * a client that left meanwhile).  Incoming messages are limited to
 * BOX_HTTP_WS_MAX_MESSAGE bytes (a bigger one closes with 1009).
 *
 * Signals (main context):
 *   ::message (guint type, GBytes *data)   SOUP_WEBSOCKET_DATA_TEXT or _BINARY
 *   ::written (guint64 credit)             see above; only for credit > 0
 *   ::closed ()                            once, when the socket is over for
 *       us: the peer closed or went away (also before the upgrade was
 *       written), or box_http_ws_close() was called (emitted from within
 *       it).  Nothing is sent after it; libsoup finishes the close
 *       handshake on its own (the object stays alive until then).
 */
#pragma once

#include <libsoup/soup.h>

#include "box-engine.h"

G_BEGIN_DECLS

typedef struct _BoxHttpRequest BoxHttpRequest;

#define BOX_HTTP_WS_MAX_MESSAGE (1024 * 1024)
/* The close code of a reader dropped for reading too slowly (fs/watch;
 * reason "slow_reader"): RFC 6455's policy violation. */
#define BOX_HTTP_WS_CLOSE_SLOW_READER 1008
/* A ping every so often: a client that went away is noticed even while
 * nothing else is written and its input is paused (then by the reset the
 * ping draws: an error or hang-up on the socket). */
#define BOX_HTTP_WS_KEEPALIVE_S 10

#define BOX_TYPE_HTTP_WS (box_http_ws_get_type ())
G_DECLARE_FINAL_TYPE (BoxHttpWs, box_http_ws, BOX, HTTP_WS, GObject)

/* FALSE with BOX_ERROR_INVALID unless @req is a valid WebSocket upgrade. */
gboolean    box_http_ws_check_upgrade   (BoxHttpRequest *req, GError **error);
/* Accepts the upgrade of the paused @req (resumes it). */
BoxHttpWs  *box_http_ws_new             (BoxHttpRequest *req);

gboolean    box_http_ws_is_open         (BoxHttpWs *self);
void        box_http_ws_send_text       (BoxHttpWs *self, const char *text);
/* @node is not consumed. */
void        box_http_ws_send_json       (BoxHttpWs *self, JsonNode *node);
/* {"type": "error", "error": {"code", "message"}} in the API's error shape. */
void        box_http_ws_send_error      (BoxHttpWs *self, const GError *error);
/* A binary message: the byte @tag (when >= 0), then @data.  ::written
 * (@credit) follows once it was written (when @credit > 0). */
void        box_http_ws_send_binary     (BoxHttpWs *self, int tag, const void *data, gsize len,
                                         gsize credit);
/* Sends the close frame after what is queued; ::closed is emitted. */
void        box_http_ws_close           (BoxHttpWs *self, gushort code, const char *reason);
void        box_http_ws_set_input_paused (BoxHttpWs *self, gboolean paused);
/* Payload bytes sent and not yet written to the socket. */
gsize       box_http_ws_get_unwritten   (BoxHttpWs *self);
/* Close with 1011 when @engine interrupts @sandbox_id. */
void        box_http_ws_end_on_interrupt (BoxHttpWs *self, BoxEngine *engine, const char *sandbox_id);

/* Metering stream (box-http-ws-io.c): @written is called for each complete
 * data frame (text, binary or a final continuation) the server wrote. */
typedef void (*BoxHttpWsWrittenFunc) (gpointer user_data);
GIOStream  *box_http_ws_io_new          (GIOStream *base, BoxHttpWsWrittenFunc written,
                                         gpointer user_data);
void        box_http_ws_io_set_input_paused (GIOStream *io, gboolean paused);
/* Stop calling @written (its user_data is going away). */
void        box_http_ws_io_detach       (GIOStream *io);

G_END_DECLS
