/* box-edge-conn.h: one client connection of the edge (internal to
 * core/edge/).
 *
 * Reads a request head (at most BOX_EDGE_HEAD_MAX bytes, within the idle
 * timeout), routes it by Host (box-edge-route.h), checks access, holds
 * (wakes) the sandbox and opens a stream to the port through the agent
 * (box_engine_port_connect_async()), or for a GET or HEAD without a body
 * takes an idle one from the pool (box-edge-pool.h; one found closed
 * before it answered is replaced by a new one): nothing listening is
 * retried every 250 ms for BOX_EDGE_PORT_WAIT_S, the first time after
 * starting the service whose http_port it is, then 502 port_closed.  The
 * request goes to the sandbox with the forwarded headers (and Connection:
 * close when it has a body), the
 * bodies are copied both ways a buffer at a time (so each side waits for
 * the other: back-pressure; a request body that brings no bytes for the
 * idle timeout cuts the connection), a 101 turns the connection into a two-way
 * byte relay (WebSockets) until either side ends.  The client's
 * connection is kept alive after a response whose end is known (a
 * length, or a chunked body's last chunk), and so is the stream to the
 * port (back to the pool) when its server did not say close. */
#pragma once

#include <gio/gio.h>

#include "box-edge-pool.h"
#include "box-engine.h"

G_BEGIN_DECLS

#define BOX_EDGE_HEAD_MAX     (64 * 1024)
#define BOX_EDGE_PORT_WAIT_S  10

typedef struct _BoxEdgeConn BoxEdgeConn;

/* Serves @stream (a handshaken TLS connection) until it ends or
 * @shutdown is cancelled, with @pool's idle streams to the ports (it must
 * outlive the connection: @ended runs first); @peer is the client's address for
 * X-Forwarded-For; @idle_timeout_s bounds the wait for a request head;
 * @ended (may be NULL) runs with @data once the connection is gone. */
void box_edge_conn_serve (BoxEngine *engine, BoxEdgePool *pool, GIOStream *stream, const char *peer,
                          guint idle_timeout_s, GCancellable *shutdown, GDestroyNotify ended,
                          gpointer data);

G_END_DECLS
