/* box-engine-presuspend.h (private to the engine): the guest's presuspend
 * hooks, run before every pause and memory checkpoint, and the end of the
 * sandbox's streams before a memory checkpoint's snapshot.
 *
 * The specification: executables in the guest's
 * /var/lib/box/hooks/presuspend.d/ run as root before every pause or memory
 * checkpoint, 5 seconds for all together.  The pause (box-engine-sandboxes.c:
 * API pause, idle and deadline pauses) calls this under the sandbox's lock
 * before it interrupts anything; a memory checkpoint must do the same
 * before its snapshot.
 */
#pragma once

#include "box-engine-private.h"

G_BEGIN_DECLS

/* what the guest's hooks get, all of them together */
#define BOX_ENGINE_PRESUSPEND_TIMEOUT_MS 5000
/* how long the host waits for the agent's answer: a guest that does not
 * answer by then does not hold the pause */
#define BOX_ENGINE_PRESUSPEND_WAIT_MS    5750

/* Runs the presuspend hooks of sandbox @sandbox_id's guest and completes
 * when they are done, failed, or BOX_ENGINE_PRESUSPEND_WAIT_MS passed.  It
 * never fails: a failed or silent hook, an agent that cannot be reached or
 * a malformed answer is logged (bounded) and the caller goes on with its
 * snapshot.  A hypervisor without a guest agent completes at once.  The
 * caller holds the sandbox's lock.  The wait is in real time (GLib's
 * clock), since it bounds the guest, not the engine's schedule. */
void     box_engine_run_presuspend_hooks_async  (BoxEngine           *self,
                                                 const char          *sandbox_id,
                                                 GAsyncReadyCallback  callback,
                                                 gpointer             user_data);
/* TRUE when the hooks ran and answered (even when some failed); FALSE
 * when they were skipped or the answer did not come. */
gboolean box_engine_run_presuspend_hooks_finish (BoxEngine    *self,
                                                 GAsyncResult *result);

/* how long the host waits for the agent to have ended the streams'
 * channels (box_engine_end_streams_async()) */
#define BOX_ENGINE_END_STREAMS_WAIT_MS   2000

/* Ends what runs through sandbox @sandbox_id's streams before a snapshot of
 * its memory: emits ::sandbox-interrupted (@why), on which exec sockets,
 * port streams and file watches close with 1011 and send the guest agent
 * the CLOSE of their channels (the agent sends a non-detachable session's
 * process group SIGHUP when it reads it), then completes once the agent
 * answered a request queued after those frames: the SIGHUPs were sent
 * before the guest is stopped, whatever the load, not after it runs again
 * (or in the snapshot never).  Like the hooks it never fails and is
 * bounded: an agent that cannot be reached or does not answer within
 * BOX_ENGINE_END_STREAMS_WAIT_MS (real time) is logged and the snapshot
 * goes on; a hypervisor without a guest agent completes at once. */
void     box_engine_end_streams_async           (BoxEngine           *self,
                                                 const char          *sandbox_id,
                                                 const char          *why,
                                                 GAsyncReadyCallback  callback,
                                                 gpointer             user_data);
/* TRUE when the agent answered in time. */
gboolean box_engine_end_streams_finish          (BoxEngine    *self,
                                                 GAsyncResult *result);

G_END_DECLS
