/* box-agent-channel.h: one channel of a guest agent connection.
 *
 * A channel carries one stream of work in the sandbox (a process's stdio, a
 * file transfer, a TCP connection, a connection to the in-sandbox socket):
 * DATA on streams 0 (towards the agent), 1 and 2 (from it), EOF per stream,
 * control messages, and CLOSE.  Channels come from
 * box_agent_client_open_channel_async() (host-opened) or from the client's
 * ::channel-opened signal (agent-opened).
 *
 * Flow control, both ways, per channel:
 *
 * - Towards the agent, box_agent_channel_write_async() sends within the
 *   credit the agent gave (when the window is used up it waits for CREDIT)
 *   and completes once all its bytes were written to the connection's
 *   stream, not when they were queued: an agent that grants credit and does
 *   not read leaves the writer waiting, and the host holds no more than
 *   what the caller itself keeps.
 * - From the agent, ::data hands bytes over; the consumer calls
 *   box_agent_channel_consumed() once it delivered them onward, and only
 *   then does the agent get CREDIT back.  A consumer that does not drain
 *   pauses the producer in the sandbox: at most one window is buffered.
 *
 * Signals are emitted on the client's main context.  A channel's signals
 * start after box_agent_client_open_channel_finish() returned it (or after
 * ::channel-opened), from an idle: connect handlers before returning to the
 * main loop.  Frames that arrive earlier are held until then (at most one
 * window of data and 256 KiB of the rest, counted in bytes; beyond, the
 * channel is closed).  The window is the host's (BOX_AGENT_DEFAULT_WINDOW),
 * whatever the agent's hello reply says.
 *
 * When the connection to the agent is lost, pending writes fail with
 * BOX_ERROR_SANDBOX_UNAVAILABLE and ::closed is emitted.
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Whoever is to hear of the use of a stream over a channel (a
 * BoxExecSession, a BoxAgentStream): the engine counts it as the
 * sandbox's activity and ends its hold on the sandbox when the stream is
 * let go.  @touch runs whenever bytes or commands move either way;
 * @release runs once, when the consumer closes the stream or the stream
 * ended (or, at the latest, when it is finalized), and frees @data. */
typedef struct {
  void (*touch)   (gpointer data);
  void (*release) (gpointer data);
} BoxAgentKeeper;

#define BOX_TYPE_AGENT_CHANNEL (box_agent_channel_get_type ())
G_DECLARE_FINAL_TYPE (BoxAgentChannel, box_agent_channel, BOX, AGENT_CHANNEL, GObject)

/* The channel id on the wire (agent-opened ones are >= 2^31). */
guint32      box_agent_channel_get_id        (BoxAgentChannel *self);
/* The agent's reply to the opening request (borrowed; e.g. {chan, pid} for
 * exec), or for an agent-opened channel its `accept` event. */
JsonObject  *box_agent_channel_get_reply     (BoxAgentChannel *self);
/* TRUE once ::closed was emitted. */
gboolean     box_agent_channel_is_closed     (BoxAgentChannel *self);

/* Send @data (any size; split into DATA frames of at most 32 KiB) on
 * @stream.  Writes are queued in call order.  Completes once every byte
 * was sent within credit and written to the connection's stream.  Fails with
 * G_IO_ERROR_CANCELLED, G_IO_ERROR_CLOSED (the channel was closed: its
 * process exited, or box_agent_channel_close()) or
 * BOX_ERROR_SANDBOX_UNAVAILABLE (the connection went away). */
void         box_agent_channel_write_async   (BoxAgentChannel     *self,
                                              guint                stream,
                                              GBytes              *data,
                                              GCancellable        *cancellable,
                                              GAsyncReadyCallback  callback,
                                              gpointer             user_data);
gboolean     box_agent_channel_write_finish  (BoxAgentChannel *self,
                                              GAsyncResult    *result,
                                              GError         **error);
/* EOF on @stream, after the writes queued so far. */
void         box_agent_channel_send_eof      (BoxAgentChannel *self,
                                              guint            stream);
/* A control message on the channel, e.g. {"op": "resize", "cols", "rows"}
 * or {"op": "signal", "signal": "TERM"}.  Not consumed. */
void         box_agent_channel_send_ctrl     (BoxAgentChannel *self,
                                              JsonObject      *message);
/* Close the channel: pending writes fail with G_IO_ERROR_CLOSED, the agent
 * gets CLOSE (for exec: SIGHUP to the process group) and ::closed follows
 * its answer.  Idempotent. */
void         box_agent_channel_close         (BoxAgentChannel *self);

/* The consumer delivered @n bytes it got from ::data onward: the agent may
 * send that much more. */
void         box_agent_channel_consumed      (BoxAgentChannel *self,
                                              gsize            n);
/* Bytes handed over by ::data and not yet reported consumed. */
gsize        box_agent_channel_get_buffered  (BoxAgentChannel *self);
/* Bytes the agent may still send before it needs more CREDIT. */
gsize        box_agent_channel_get_receive_credit (BoxAgentChannel *self);

G_END_DECLS
