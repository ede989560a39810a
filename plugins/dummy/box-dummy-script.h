/* box-dummy-script.h: what the `dummy` hypervisor is scripted to do wrong.
 *
 * A script is a list of rules, one per line or separated by ';':
 *
 *   <op> <action> [sandbox=<id>] [times=<n>] [code=<error>] [ms=<n>]
 *
 *   op      create, suspend, resume, shutdown, boot, destroy, checkpoint,
 *           restore, delete-checkpoint, or * for every operation
 *   action  fail    the operation fails with BOX_ERROR code (default
 *                   internal, message "injected failure"), changing nothing
 *           delay   the operation completes after ms milliseconds (real time)
 *           lose    the VM dies in the middle of the operation: it is left
 *                   LOST (its snapshot kept), ::vm-lost is emitted, and the
 *                   operation fails with internal
 *           end     the operation ends the VM itself, then fails (internal),
 *                   without ::vm-lost, as a restore that ended the old QEMU
 *                   and could not start the checkpoint's: a running VM is
 *                   left shut off on its disk, a suspended one lost with
 *                   its snapshot kept
 *   sandbox only this sandbox's operations (default: every sandbox)
 *   times   the rule applies this many times, then is spent (default: always)
 *
 * Rules are checked in order; every matching rule is used once per
 * operation (the longest delay counts, the first fail or lose decides).
 */
#pragma once

#include "box-hypervisor.h"

G_BEGIN_DECLS

typedef struct _BoxDummyScript BoxDummyScript;

typedef struct {
  guint     delay_ms;
  gboolean  fail;
  gboolean  lose;
  gboolean  end;
  gint      code;       /* BoxErrorCode of a failure */
} BoxDummyOutcome;

BoxDummyScript *box_dummy_script_new   (void);
void            box_dummy_script_free  (BoxDummyScript *script);
/* Appends the rules of @text; on a syntax error nothing is added. */
gboolean        box_dummy_script_add   (BoxDummyScript *script, const char *text, GError **error);
void            box_dummy_script_clear (BoxDummyScript *script);
guint           box_dummy_script_count (BoxDummyScript *script);
/* What happens to @op on @sandbox_id; counts the use of every rule that matches. */
void            box_dummy_script_match (BoxDummyScript *script, BoxVmOp op, const char *sandbox_id,
                                        BoxDummyOutcome *outcome);

/* "guest-agent,memory-snapshots,checkpoints,fork,hot-pause,images" (any
 * subset, "" for none) into flags. */
gboolean        box_dummy_caps_parse   (const char *text, BoxHypervisorCaps *caps, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxDummyScript, box_dummy_script_free)

G_END_DECLS
