/* box-insandbox.h: the in-sandbox socket, host side.
 *
 * The guest agent serves /run/box/api.sock inside each VM; the engine's
 * BoxSandboxConnections hands over every connection to it as a GIOStream
 * (box-sandbox-connections.h), and BoxInsandbox serves HTTP over each (a
 * SoupServer of its own), tagged with the sandbox it came from.
 *
 * What it serves: the sandbox sub-API of that sandbox only, at the paths of
 * /v1/sandboxes/{sandbox}/... without that prefix, through the same route
 * handlers as the HTTP API (the routes flagged BOX_HTTP_ROUTE_IN_SANDBOX in
 * the route table), with a BOX_PRINCIPAL_SANDBOX principal and no key; plus
 * GET /self, the sandbox's record.  The host name is ignored.  Anything
 * else is 404 not_found "no route <METHOD> <path> on the in-sandbox socket".
 *
 * Which sandboxes: see box-sandbox-connections.h.
 *
 * Bounds: a connection's request head must be complete [boxd]
 * http_header_timeout_s after it was accepted (else it is broken with no
 * answer), and a sandbox holds at most BOX_INSANDBOX_MAX_CONNECTIONS
 * connections at once (box_insandbox_accept() refuses one more with
 * BOX_ERROR_CONFLICT and the connection is broken).  Of those, at most
 * BOX_INSANDBOX_MAX_EXEC_RUNS may be exec/run calls and
 * BOX_INSANDBOX_MAX_DOWNLOADS downloads; one more is answered 409 conflict.
 * And a sandbox's exec/run calls hold at most BOX_INSANDBOX_EXEC_RUN_BYTES
 * (see box_insandbox_get_answer_bytes()); one more past it is 409 too.
 */
#pragma once

#include "box-engine.h"
#include "box-http-server.h"

G_BEGIN_DECLS

/* connections one sandbox may hold at once (the agent's own bound too) */
#define BOX_INSANDBOX_MAX_CONNECTIONS 256
/* exec/run calls one sandbox may have at once, each until its connection
 * ends (its answer holds the raw output until read: up to 2 x 16 MiB) */
#define BOX_INSANDBOX_MAX_EXEC_RUNS 4
/* what an exec/run call is counted at from when its body was read until
 * its command ended: its most (both streams at BOX_EXEC_OUTPUT_LIMIT, plus the
 * base64 its answer may have made and not yet written) */
#define BOX_INSANDBOX_EXEC_RUN_RESERVE (2 * BOX_EXEC_OUTPUT_LIMIT + (256u << 10))
/* the bytes one sandbox's exec/run calls may hold at once: two at their
 * most; a call that would go past it is 409 conflict */
#define BOX_INSANDBOX_EXEC_RUN_BYTES (2 * BOX_INSANDBOX_EXEC_RUN_RESERVE)
/* downloads (GET fs/file, fs/tar) one sandbox may have at once, each until
 * its connection ends (each holds ~1.4 MiB until the guest reads it) */
#define BOX_INSANDBOX_MAX_DOWNLOADS 16

#define BOX_TYPE_INSANDBOX (box_insandbox_get_type ())
G_DECLARE_FINAL_TYPE (BoxInsandbox, box_insandbox, BOX, INSANDBOX, GObject)

/* Starts watching the engine's sandboxes at once.  @http is the API server
 * whose route table and stream registry the socket shares. */
BoxInsandbox *box_insandbox_new      (BoxEngine *engine, BoxHttpServer *http);
/* Serves @stream as one connection from inside @sandbox_id (what an
 * agent-opened channel becomes; tests hand in a socket directly).  FALSE
 * (and @stream left to the caller) when the sandbox is gone, the service
 * stops, or the sandbox already holds BOX_INSANDBOX_MAX_CONNECTIONS. */
gboolean      box_insandbox_accept   (BoxInsandbox *self, const char *sandbox_id,
                                      GIOStream *stream, GError **error);
/* Breaks the connection of @msg if it came through the socket (its
 * channel to the agent closes; nothing more is written, not even what libsoup
 * writes when it lets go of the message): FALSE when it did not. */
gboolean      box_insandbox_abort_connection (SoupServerMessage *msg);
/* What @sandbox_id's exec/run calls hold now (their reservations while the
 * commands run, then the output their answers have not yet written). */
gsize         box_insandbox_get_answer_bytes (BoxInsandbox *self, const char *sandbox_id);
/* Stops taking connections and closes those open.  Idempotent. */
void          box_insandbox_shutdown (BoxInsandbox *self);

G_END_DECLS
