/* box-engine-presuspend.h (private to the engine): the guest's presuspend
 * hooks, run before every pause and memory checkpoint.
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

G_END_DECLS
