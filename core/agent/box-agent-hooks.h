/* box-agent-hooks.h: the guest agent's presuspend hooks, typed.
 *
 * `presuspend` (doc/AGENT-PROTOCOL.md, "Presuspend hooks") runs every
 * executable in the guest's /var/lib/box/hooks/presuspend.d/ as root, one
 * after another, within one deadline for all; the engine asks for it
 * before every pause and memory checkpoint (box-engine-presuspend.c).
 */
#pragma once

#include "box-agent-client.h"

G_BEGIN_DECLS

/* What the agent says it did: counts, each at most
 * BOX_PRESUSPEND_COUNT_MAX. */
typedef struct {
  guint ran;         /* hooks started */
  guint failed;      /* exited non-zero or killed by a signal before the deadline */
  guint timed_out;   /* 1 when the deadline killed the running hook */
  guint skipped;     /* not started: the deadline came first */
} BoxPresuspendResult;

/* a guest's count beyond this is a malformed reply */
#define BOX_PRESUSPEND_COUNT_MAX 1000000

/* the agent's own bounds of timeout_ms */
#define BOX_PRESUSPEND_TIMEOUT_MIN_MS 1
#define BOX_PRESUSPEND_TIMEOUT_MAX_MS 60000

/* Runs the hooks within @timeout_ms for all (clamped to the agent's
 * bounds).  The reply (a control message, bounded at 64 KiB and parsed by
 * box_agent_json_parse()) must carry the four counts as integers in
 * 0..BOX_PRESUSPEND_COUNT_MAX; anything else is BOX_ERROR_INTERNAL.  The
 * agent is not trusted to answer in time: the caller bounds the wait with
 * @cancellable (completes with G_IO_ERROR_CANCELLED). */
void            box_agent_client_presuspend_async  (BoxAgentClient      *self,
                                                    guint                timeout_ms,
                                                    GCancellable        *cancellable,
                                                    GAsyncReadyCallback  callback,
                                                    gpointer             user_data);
gboolean        box_agent_client_presuspend_finish (BoxAgentClient       *self,
                                                    GAsyncResult         *result,
                                                    BoxPresuspendResult  *out,
                                                    GError              **error);

G_END_DECLS
