/* box-sandbox-connections.h: connections made from inside the sandboxes to
 * their in-sandbox socket (/run/box/api.sock), as GIOStreams.
 *
 * The guest agent announces every connection to the socket as a channel
 * it opens (doc/AGENT-PROTOCOL.md "In-sandbox socket").  A
 * BoxSandboxConnections takes those from the agent of each sandbox that
 * is running when it is made, and after every event of a sandbox
 * (created, woken, restored ...) from the agent the hypervisor then hands
 * out; when an agent connection ends while its sandbox runs (not for a
 * pause, stop or delete: those are announced by ::sandbox-interrupted
 * first), from the new one a second later.
 *
 * ::connection (const char *sandbox_id, GIOStream *stream) per connection,
 * a pollable stream with the channel's flow control (BoxAgentStream); a
 * handler that does not take it calls box_sandbox_connections_abort().
 * Not installed.
 */
#pragma once

#include "box-engine.h"

G_BEGIN_DECLS

#define BOX_TYPE_SANDBOX_CONNECTIONS (box_sandbox_connections_get_type ())
G_DECLARE_FINAL_TYPE (BoxSandboxConnections, box_sandbox_connections, BOX, SANDBOX_CONNECTIONS,
                      GObject)

BoxSandboxConnections *box_sandbox_connections_new      (BoxEngine *engine);
/* Stops taking connections (those taken stay the handler's).  Idempotent. */
void                   box_sandbox_connections_shutdown (BoxSandboxConnections *self);
/* Ends @stream at once, if it is one of ours (its channel closes: nothing
 * more is written, not even what a writer flushes when it lets go);
 * FALSE when it is not. */
gboolean               box_sandbox_connections_abort    (GIOStream *stream);

G_END_DECLS
