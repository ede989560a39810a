/* box-agent-stream.h: a GIOStream over one BoxAgentChannel.
 *
 * The bytes of a channel as a byte stream: what the agent sends as DATA on
 * stream 1 is read from the input stream, what is written to the output
 * stream goes as DATA on stream 0.  This is how an agent-opened channel of
 * the in-sandbox socket becomes an HTTP connection (soup_server_accept_iostream()),
 * and how anything that speaks GIO reads or writes a channel.
 *
 * Both halves are pollable and never block: everything runs on the
 * channel's main context.  A blocking read there is refused with
 * G_IO_ERROR_WOULD_BLOCK when it would have to wait (use the pollable or
 * async API), and a blocking read from another thread with
 * G_IO_ERROR_NOT_SUPPORTED.  A write from another thread is done on the
 * channel's context, the thread waiting for it (GIO's default close_async
 * runs a filter stream's close_fn in a worker thread: libsoup's chunked
 * body stream writes its last chunk from there).
 *
 * Flow control: bytes the agent sent are credited back to it
 * (box_agent_channel_consumed()) only once they were read from the input
 * stream, so a reader that stops reading pauses the sender in the sandbox
 * after one window.  Writes are accepted while less than
 * BOX_AGENT_STREAM_WRITE_LIMIT bytes are on their way to the agent
 * (queued in the channel waiting for its credit); beyond that the output
 * stream is not writable until the agent took some.  So the stream holds
 * at most one window in and BOX_AGENT_STREAM_WRITE_LIMIT out.
 *
 * EOF: the input ends at the agent's EOF on stream 1 or when the channel
 * closes; closing the output stream sends EOF on stream 0 once the writes
 * before it are out.  Closing the GIOStream half-closes gracefully: the
 * writes still queued go first, then EOF, then the channel is closed when
 * the agent closes it or at the latest after BOX_AGENT_STREAM_LINGER_S
 * seconds.  box_agent_stream_abort() closes the channel at once.
 */
#pragma once

#include <gio/gio.h>

#include "box-agent-channel.h"

G_BEGIN_DECLS

#define BOX_AGENT_STREAM_WRITE_LIMIT (256 * 1024)
#define BOX_AGENT_STREAM_LINGER_S    10

#define BOX_TYPE_AGENT_STREAM (box_agent_stream_get_type ())
G_DECLARE_FINAL_TYPE (BoxAgentStream, box_agent_stream, BOX, AGENT_STREAM, GIOStream)

/* Takes a reference on @channel and connects to its signals (do so before
 * the channel's first frames are released: right after it was opened or
 * announced). */
BoxAgentStream  *box_agent_stream_new         (BoxAgentChannel *channel);
BoxAgentChannel *box_agent_stream_get_channel (BoxAgentStream *self);
/* Closes the channel now (its work in the sandbox is abandoned); reads see
 * EOF and writes fail from now on. */
void             box_agent_stream_abort       (BoxAgentStream *self);
/* The user left: what was written still goes, then EOF, then the channel
 * is closed (without waiting for the agent's side, unlike a close of the
 * GIOStream); reads see EOF from now on. */
void             box_agent_stream_close_after_writes (BoxAgentStream *self);
/* For the engine (see BoxAgentKeeper): told of every read or write that
 * moved bytes; released when the stream is closed or aborted, at the
 * latest when nothing refers to it any more.  Set once. */
void             box_agent_stream_set_keeper  (BoxAgentStream       *self,
                                               const BoxAgentKeeper *keeper,
                                               gpointer              data);

G_END_DECLS
