/* box-exec-session.h: one stream of a session in a sandbox.
 *
 * A BoxExecSession is what a streaming exec (a new session) or an attach
 * (to a session that runs, or exited and is still kept) gives: the
 * process's output as signals, its end as a typed signal, and stdin,
 * resize and signal as methods.  The engine hands it out
 * (box_engine_exec_stream_finish(), box_engine_attach_session_finish()),
 * made by the agent layer over one channel of the sandbox's agent
 * (doc/AGENT-PROTOCOL.md, "Sessions"); transports map their frames onto
 * it and never see the agent's messages.
 *
 * Flow control: ::output hands over bytes; the consumer calls
 * box_exec_session_output_done() once it delivered them onward (to a
 * socket that took them), and only then may the sandbox send that much
 * more.  A consumer that does not acknowledge pauses the process in its
 * pipe after one channel window (1 MiB).  Towards the process,
 * box_exec_session_write_stdin_async() completes once the bytes went out
 * within the agent's credit: a caller that waits for it before reading
 * more of its own input holds at most what it wrote.
 *
 * Signals (on the main context; connect before returning to the main loop
 * after the object was handed out: nothing is emitted before):
 *   ::output (guint stream, GBytes *data)  1 stdout (or the TTY), 2 stderr
 *   ::exited (int code, int signal, gboolean timed_out)
 *       the process ended and all of its output went out: @code is the
 *       exit status (128 + signal when killed), @signal the killing signal
 *       or 0.  ::closed follows.
 *   ::closed ()   once: the stream is over, after ::exited, or without it
 *       when the sandbox or its agent went away under the session (or the
 *       agent detached it).  Not emitted after box_exec_session_close().
 */
#pragma once

#include <gio/gio.h>

#include "box-agent-channel.h"

G_BEGIN_DECLS

#define BOX_TYPE_EXEC_SESSION (box_exec_session_get_type ())
G_DECLARE_FINAL_TYPE (BoxExecSession, box_exec_session, BOX, EXEC_SESSION, GObject)

/* The session's id ("s-" + 10 of [0-9a-z]). */
const char *box_exec_session_get_id       (BoxExecSession *self);
/* The process's pid in the sandbox (0 when unknown). */
gint64      box_exec_session_get_pid      (BoxExecSession *self);
/* Attach: the offset of the first byte of output this stream gives (where
 * the replay really starts); 0 for the stream of a new exec. */
gint64      box_exec_session_get_offset   (BoxExecSession *self);
/* TRUE once ::closed was emitted or box_exec_session_close() was called. */
gboolean    box_exec_session_is_closed    (BoxExecSession *self);

/* The consumer delivered @n bytes of ::output onward. */
void        box_exec_session_output_done  (BoxExecSession *self,
                                           gsize           n);
/* Bytes to the process's stdin, in call order.  Fails with G_IO_ERROR_CLOSED
 * once the stream is over (the process exited, or closed) or
 * BOX_ERROR_SANDBOX_UNAVAILABLE when the agent went away. */
void        box_exec_session_write_stdin_async  (BoxExecSession      *self,
                                                 GBytes              *data,
                                                 GCancellable        *cancellable,
                                                 GAsyncReadyCallback  callback,
                                                 gpointer             user_data);
gboolean    box_exec_session_write_stdin_finish (BoxExecSession  *self,
                                                 GAsyncResult    *result,
                                                 GError         **error);
/* End of stdin, after the writes so far.  Idempotent. */
void        box_exec_session_close_stdin  (BoxExecSession *self);
/* The TTY's size; @cols and @rows 1 .. 65535 (others are ignored). */
void        box_exec_session_resize       (BoxExecSession *self,
                                           guint           cols,
                                           guint           rows);
/* A signal to the session's process group, by name as in `kill -l`. */
void        box_exec_session_send_signal  (BoxExecSession *self,
                                           const char     *name);
/* Let go of the stream: the stream of a non-detachable session's exec
 * hangs it up (SIGHUP to its process group); any other detaches, the
 * session runs on.  Idempotent. */
void        box_exec_session_close        (BoxExecSession *self);

/* For the engine: see BoxAgentKeeper.  Set once, right after the session
 * was handed out; @data is released at the latest when the session is
 * finalized. */
void        box_exec_session_set_keeper   (BoxExecSession       *self,
                                           const BoxAgentKeeper *keeper,
                                           gpointer              data);

G_END_DECLS
