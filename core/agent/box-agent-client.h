/* box-agent-client.h: the host side of the guest agent protocol.
 *
 * One BoxAgentClient speaks to the agent of one VM over a byte stream (the
 * VM's virtio-serial port, or a Unix socket in tests); the protocol is in
 * doc/AGENT-PROTOCOL.md.  It multiplexes requests on channel 0 (each with a
 * fresh id, answered by a reply) and channels 1 .. 2^31-1 that it opens,
 * plus channels the agent opens.
 *
 * It implements BoxAgent (box-agent.h), the part of it the plugin SDK
 * exports to hypervisor plugins.
 *
 * Everything happens on the thread-default main context of the thread that
 * created the client; there are no threads.  Writes go through one output
 * queue with an asynchronous writer, so no call ever blocks.
 *
 * Life cycle: box_agent_client_new() takes the stream;
 * box_agent_client_connect_async() starts reading, sends `hello` with a
 * fresh nonce and ignores whatever it reads until the reply carrying that
 * nonce (stale frames from before a restore, half frames, the `ready`
 * event).  hello goes again, with a new nonce, when a `ready` arrives first
 * (the agent may not have been listening yet), and after 1, 2, 4, 8, 8 ...
 * seconds without an answer, then behind a megabyte of zeros that completes
 * any half frame the agent may still be waiting for from an earlier
 * connection.  When the stream ends or breaks, ::closed is emitted once and every
 * pending call, open and channel fails with BOX_ERROR_SANDBOX_UNAVAILABLE
 * "the sandbox's agent went away".  Dropping the last reference stops the
 * reader and closes the channels.
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "box-agent.h"
#include "box-agent-channel.h"

G_BEGIN_DECLS

#define BOX_TYPE_AGENT_CLIENT (box_agent_client_get_type ())
G_DECLARE_FINAL_TYPE (BoxAgentClient, box_agent_client, BOX, AGENT_CLIENT, GObject)

/* Takes a reference on @stream; starts no I/O yet. */
BoxAgentClient *box_agent_client_new            (GIOStream *stream);

/* hello: completes when the agent answered our nonce.  A timeout is the
 * caller's, through @cancellable.  Fails with G_IO_ERROR_CANCELLED,
 * BOX_ERROR_SANDBOX_UNAVAILABLE (the stream ended), or BOX_ERROR_INTERNAL
 * (an agent speaking another protocol version; the client is then closed). */
void            box_agent_client_connect_async  (BoxAgentClient      *self,
                                                 GCancellable        *cancellable,
                                                 GAsyncReadyCallback  callback,
                                                 gpointer             user_data);
gboolean        box_agent_client_connect_finish (BoxAgentClient *self,
                                                 GAsyncResult   *result,
                                                 GError        **error);
/* The agent's hello reply (borrowed; NULL until connected): version,
 * agent, boot_id, uptime_ms, window. */
JsonObject     *box_agent_client_get_info       (BoxAgentClient *self);
gboolean        box_agent_client_is_closed      (BoxAgentClient *self);
/* End the connection now: stops reading, closes the stream, fails what is
 * pending and emits ::closed (with BOX_ERROR_SANDBOX_UNAVAILABLE).
 * Idempotent. */
void            box_agent_client_close          (BoxAgentClient *self);
/* Bytes in the output queue, not yet written to the stream. */
gsize           box_agent_client_get_queued_bytes (BoxAgentClient *self);

/* A request on channel 0: {"id": <fresh>, "op": @op, ...@args} (@args may
 * be NULL and is not consumed).  The reply's members (a new reference),
 * including id and ok.  An `ok: false` reply is a BOX_ERROR with the
 * agent's message: executable_not_found, unknown_user, bad_cwd and invalid
 * are BOX_ERROR_INVALID, permission_denied BOX_ERROR_PERMISSION_DENIED,
 * not_found BOX_ERROR_NOT_FOUND, already_exists, conflict and port_closed
 * their namesakes, anything else (start_failed, failed, unknown_op ...)
 * BOX_ERROR_INTERNAL "agent: <code>: <message>".  Cancelling completes with
 * G_IO_ERROR_CANCELLED; the late reply is then ignored.  Calls may be made
 * once connect_async() was called (before, BOX_ERROR_INTERNAL); until the
 * hello reply they wait, then go in order.  The agent is not trusted to
 * answer: after 120 s without a reply the call fails with
 * BOX_ERROR_SANDBOX_UNAVAILABLE (an open's channel is closed).  A reply
 * over 64 KiB is refused (BOX_ERROR_INTERNAL, too_large) except for the
 * listings `sessions`, `ports` and `service-list`; other control messages over 64 KiB
 * are dropped.  Everything the host holds for one connection (frames held
 * for channels not yet taken, data handed over and not consumed) stays
 * under 64 MiB: beyond, the connection is closed (::closed; the agent may
 * connect again). */
void            box_agent_client_call_async     (BoxAgentClient      *self,
                                                 const char          *op,
                                                 JsonObject          *args,
                                                 GCancellable        *cancellable,
                                                 GAsyncReadyCallback  callback,
                                                 gpointer             user_data);
JsonObject     *box_agent_client_call_finish    (BoxAgentClient *self,
                                                 GAsyncResult   *result,
                                                 GError        **error);

/* A `ping` that the agent reads after every frame queued before it (other
 * requests go ahead of the channels' frames): its reply means the agent
 * handled them all, e.g. the CLOSE of the channels just ended, whose
 * processes it sent SIGHUP then.  Errors as for call_async(). */
void            box_agent_client_barrier_async  (BoxAgentClient      *self,
                                                 GCancellable        *cancellable,
                                                 GAsyncReadyCallback  callback,
                                                 gpointer             user_data);
gboolean        box_agent_client_barrier_finish (BoxAgentClient *self,
                                                 GAsyncResult   *result,
                                                 GError        **error);

/* A request that opens a channel: like call_async() with a fresh "chan"
 * added to @args.  Completes with the channel once the reply arrived
 * (box_agent_channel_get_reply()); errors as for call_async().  Cancelling
 * after the agent opened it closes the channel. */
void             box_agent_client_open_channel_async  (BoxAgentClient      *self,
                                                       const char          *op,
                                                       JsonObject          *args,
                                                       GCancellable        *cancellable,
                                                       GAsyncReadyCallback  callback,
                                                       gpointer             user_data);
BoxAgentChannel *box_agent_client_open_channel_finish (BoxAgentClient *self,
                                                       GAsyncResult   *result,
                                                       GError        **error);

/* Signals:
 *   ::event (JsonObject *event)        a channel-0 event other than a reply (e.g. ready)
 *   ::closed (GError *error)           once, when the stream ended or broke (or
 *                                      box_agent_client_close()): BOX_ERROR_SANDBOX_UNAVAILABLE
 *                                      "the sandbox's agent went away (<why>)"
 *   ::channel-opened (BoxAgentChannel *channel, JsonObject *event)
 *                                      the agent opened a channel (id >= 2^31): an
 *                                      `accept` event on channel 0 with "chan" (or as the
 *                                      new channel's first CTRL); with no handler it is
 *                                      closed.  At most 1024 at once; more are refused.
 */

G_END_DECLS
