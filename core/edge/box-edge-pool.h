/* box-edge-pool.h: idle streams to sandbox ports, kept for the edge's next
 * request (internal to core/edge/).
 *
 * After an exchange whose end was clear (a response with a length or a
 * chunked one read to its last chunk, a server that did not say close) the
 * stream to the port (a BoxAgentStream: a channel through the guest agent
 * and a TCP connection in the guest) goes back here instead of being
 * closed, and a later GET or HEAD without a body to the same sandbox and
 * port, from any client connection, takes it: no new agent channel, no new
 * connection in the guest.  A stream holds its sandbox awake (the hold of
 * box_engine_port_connect_async() passes to it), so one idles here at most
 * BOX_EDGE_POOL_IDLE_S; at most BOX_EDGE_POOL_PER_PORT idle per port and
 * BOX_EDGE_POOL_MAX in all (more are closed).  ::sandbox-interrupted
 * (pause, stop, delete, ...) closes a sandbox's idle streams at once. */
#pragma once

#include <gio/gio.h>

#include "box-agent-stream.h"
#include "box-engine.h"

G_BEGIN_DECLS

#define BOX_EDGE_POOL_IDLE_S     2
#define BOX_EDGE_POOL_PER_PORT   32
#define BOX_EDGE_POOL_MAX        256

typedef struct _BoxEdgePool BoxEdgePool;

BoxEdgePool *box_edge_pool_new   (BoxEngine *engine);
/* Closes every idle stream. */
void         box_edge_pool_free  (BoxEdgePool *pool);
/* Closes every idle stream, and those put from now on. */
void         box_edge_pool_shutdown (BoxEdgePool *pool);
/* Takes (@up, @uin: owned) and keeps an idle stream to @port of
 * @sandbox_id, or closes it when the pool is full. */
void         box_edge_pool_put   (BoxEdgePool *pool, const char *sandbox_id, guint port,
                                  BoxAgentStream *up, GBufferedInputStream *uin);
/* The most recent idle stream to @port of @sandbox_id (both owned by the
 * caller now), or FALSE. */
gboolean     box_edge_pool_take  (BoxEdgePool *pool, const char *sandbox_id, guint port,
                                  BoxAgentStream **up, GBufferedInputStream **uin);
guint        box_edge_pool_size  (BoxEdgePool *pool);

G_END_DECLS
