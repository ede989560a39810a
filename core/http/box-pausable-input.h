/* box-pausable-input.h: a pollable input stream whose reading can be
 * paused, for a libsoup WebSocket that must stop reading its peer.
 *
 * libsoup 3.2's SoupWebsocketConnection reads its stream for as long as
 * bytes come and cannot be told to stop.  Over this stream it can: while
 * paused, reads answer G_IO_ERROR_WOULD_BLOCK and the pollable source
 * libsoup then waits on is a gate (a cancellable's source) that opens only
 * when reading resumes.  The peer's bytes stay in the kernel's socket
 * buffer and TCP stops the peer.  boxd's server WebSockets
 * (box-http-ws-io.c) and the `box` client's (tools/box-ws.c) run over it.
 *
 * Closing it does not close @base: the GIOStream around both does.
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define BOX_TYPE_PAUSABLE_INPUT (box_pausable_input_get_type ())
G_DECLARE_FINAL_TYPE (BoxPausableInput, box_pausable_input, BOX, PAUSABLE_INPUT, GInputStream)

/* @base must be pollable. */
GInputStream *box_pausable_input_new        (GInputStream *base);
void          box_pausable_input_set_paused (BoxPausableInput *self,
                                             gboolean          paused);

G_END_DECLS
