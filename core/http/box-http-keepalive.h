/* box-http-keepalive.h: closes idle keep-alive connections of a SoupServer.
 *
 * libsoup before 3.3 never notices that a client closed an idle keep-alive
 * connection: between the end of one answer and the first byte of the next
 * request nothing on its side waits for the end of the stream, so the
 * socket would stay in CLOSE_WAIT until the server is freed.  This watches
 * every connection in that window (from SoupServer::request-finished to
 * SoupServer::request-started or the message's "disconnected") and closes
 * it when the client hangs up, when it stayed idle for @idle_timeout_s, or,
 * oldest first, when more than @max_idle connections are idle.
 *
 * It also bounds a slow client's request head (box_http_keepalive_set_
 * header_timeout()): from the moment libsoup starts a message (when the
 * connection is accepted, or at the first byte of a later request) to
 * its "got-headers", before any authentication.  A client that sends
 * half a request line and waits, or connects and sends nothing, is
 * disconnected when that time is up.
 *
 * Main thread only, like the SoupServer it watches.
 */
#pragma once

#include <libsoup/soup.h>

G_BEGIN_DECLS

typedef struct _BoxHttpKeepalive BoxHttpKeepalive;

BoxHttpKeepalive *box_http_keepalive_new        (SoupServer *soup, guint idle_timeout_s,
                                                 guint max_idle);
/* Closes a connection whose request head is not complete @timeout_s
 * after its message started (0: never; the default). */
void              box_http_keepalive_set_header_timeout (BoxHttpKeepalive *self,
                                                         guint timeout_s);
/* Stops watching; closes nothing (the server's own shutdown does). */
void              box_http_keepalive_free       (BoxHttpKeepalive *self);
/* Connections idle between two requests right now. */
guint             box_http_keepalive_get_n_idle (BoxHttpKeepalive *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxHttpKeepalive, box_http_keepalive_free)

G_END_DECLS
