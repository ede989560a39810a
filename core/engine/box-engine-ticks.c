/* box-engine-ticks.c: what happens to sandboxes without a request:
 * deadlines and the idle rule (a tick every second), VMs that died on
 * their own, the reconciliation at start, and the deletion of a whole
 * project's sandboxes.
 */
#include "config.h"

#include "box-engine-ops-private.h"
#include "box-storage-records.h"

#define TICK_INTERVAL_S 1

/* ---- internal transitions: deadlines, idle, project deletion ----------- */

static void
internal_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autofree char *what = user_data;
  g_autoptr(GError) error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error) &&
      !g_error_matches (error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
    g_warning ("%s failed: %s", what, error->message);
}

static void
internal_state_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autofree char *what = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = g_task_propagate_pointer (G_TASK (result), &error);

  if (sandbox == NULL && !g_error_matches (error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
    g_warning ("%s failed: %s", what, error->message);
}

/* Applies a deadline or the idle rule; @reason goes into the event. */
static void
internal_transition (BoxEngine *self, const char *id, gboolean delete, BoxStateRequest request,
                     const char *reason)
{
  GTask *task;
  BoxEngineOp *op;
  char *what = g_strdup_printf ("sandbox %s: %s (%s)", id,
                                delete ? "delete" : request == BOX_STATE_REQUEST_PAUSE ? "pause" : "stop",
                                reason);

  g_message ("%s", what);
  task = box_engine_op_task_new (self, delete ? BOX_ENGINE_OP_DELETE : BOX_ENGINE_OP_STATE, NULL, internal_transition, NULL,
                      delete ? internal_done : internal_state_done, what);
  op = g_task_get_task_data (task);
  op->reason = reason;
  op->request = request;
  op->force = TRUE;
  box_engine_op_start (self, task, id);
}

static gboolean
tick (gpointer user_data)
{
  BoxEngine *self = user_data;
  gint64 now = box_engine_now (self);
  g_autoptr(GPtrArray) due = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  gpointer value;
  guint i;

  BOX_ENGINE_ASSERT_OWNER (self);

  g_hash_table_iter_init (&iter, self->runtime);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxEngineRuntime *rt = value;

    if (rt->base.busy || rt->base.deleted)
      continue;
    if (rt->has_deadline && rt->deadline_at <= now) {
      rt->has_deadline = FALSE;   /* once; the record follows */
      g_ptr_array_add (due, g_strdup_printf ("d%d%s", rt->deadline_action, rt->base.id));
    } else if (rt->state == BOX_SANDBOX_STATE_RUNNING && rt->idle_action != BOX_IDLE_ACTION_NONE &&
               rt->base.holds == 0 &&
               now - rt->base.last_active >= (gint64) rt->idle_timeout_s * G_USEC_PER_SEC &&
               !box_engine_tasks_live (self, rt, now)) {
      rt->base.last_active = now;   /* not again before the next timeout */
      g_ptr_array_add (due, g_strdup_printf ("i%d%s", rt->idle_action, rt->base.id));
    }
  }
  /* Act outside the iteration: an operation may change the table. */
  for (i = 0; i < due->len; i++) {
    const char *entry = g_ptr_array_index (due, i);
    const char *id = entry + 2;
    int action = entry[1] - '0';

    if (entry[0] == 'd') {
      if (action == BOX_DEADLINE_ACTION_DELETE)
        internal_transition (self, id, TRUE, 0, "deadline");
      else
        internal_transition (self, id, FALSE,
                             action == BOX_DEADLINE_ACTION_PAUSE ? BOX_STATE_REQUEST_PAUSE
                                                                  : BOX_STATE_REQUEST_STOP,
                             "deadline");
    } else {
      internal_transition (self, id, FALSE,
                           action == BOX_IDLE_ACTION_PAUSE ? BOX_STATE_REQUEST_PAUSE
                                                            : BOX_STATE_REQUEST_STOP,
                           "idle");
    }
  }
  return G_SOURCE_CONTINUE;
}

/* ---- the VM died on its own -------------------------------------------- */

/* Records what happened to a sandbox whose VM is gone: back to its latest
 * snapshot.  A memory snapshot (SUSPENDED, or LOST with snapshot_at) makes
 * it paused; a disk the hypervisor kept (SHUTOFF) makes it stopped, its
 * next wake a boot on that disk; both with reason @lost_reason and
 * detail.snapshot_at (for a disk: when it was last written, as the
 * hypervisor says, or now when it does not say).  Nothing to go back to:
 * error, reason reconciled. */
void
box_engine_mark_lost (BoxEngine *self, BoxSandbox *sandbox, const char *lost_reason)
{
  g_autoptr(GError) error = NULL;
  gint64 snapshot_at = 0;
  BoxVmState vm_state = box_hypervisor_query (self->hypervisor, sandbox->id, &snapshot_at);
  g_autoptr(JsonObject) detail = json_object_new ();
  const char *type;

  box_engine_emit_interrupted (self, sandbox->id, "lost");
  if (vm_state == BOX_VM_STATE_SUSPENDED || (vm_state == BOX_VM_STATE_LOST && snapshot_at != 0)) {
    sandbox->state = BOX_SANDBOX_STATE_PAUSED;
    sandbox->snapshot_at = snapshot_at;
    type = "sandbox.paused";
  } else if (vm_state == BOX_VM_STATE_SHUTOFF) {
    /* the VM died, its disk did not: activity after snapshot_at is lost */
    if (snapshot_at == 0)
      snapshot_at = box_engine_now (self);
    sandbox->state = BOX_SANDBOX_STATE_STOPPED;
    sandbox->snapshot_at = 0;
    type = "sandbox.stopped";
    box_engine_end_tasks (self, sandbox->id, "stopped");
  } else {
    /* No snapshot and no disk to go back to: the specification's "gone
     * with no snapshot". */
    sandbox->state = BOX_SANDBOX_STATE_ERROR;
    type = "sandbox.error";
  }
  if (sandbox->state == BOX_SANDBOX_STATE_ERROR) {
    json_object_set_string_member (detail, "reason", "reconciled");
  } else {
    g_autofree char *at = box_time_format (snapshot_at);

    json_object_set_string_member (detail, "reason", lost_reason);
    json_object_set_string_member (detail, "snapshot_at", at);
  }
  if (box_engine_save_sandbox (self, sandbox, &error))
    box_engine_emit (self, type, sandbox, detail);
  if (error != NULL)
    g_warning ("sandbox %s: cannot record the lost VM: %s", sandbox->id, error->message);
  else
    g_message ("sandbox %s: VM lost, now %s", sandbox->id,
               box_sandbox_state_to_string (sandbox->state));
}

static void
vm_lost_locked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  g_autofree char *id = user_data;
  g_autoptr(BoxSandbox) sandbox = box_storage_sandbox_get (self->storage, NULL, id, NULL);

  /* A running VM, or a paused one whose snapshot lived in its QEMU (a hot
   * pause), that died on its own: back to what the hypervisor still has. */
  if (sandbox != NULL && (sandbox->state == BOX_SANDBOX_STATE_RUNNING ||
                          sandbox->state == BOX_SANDBOX_STATE_PAUSED)) {
    BoxVmState vm_state = box_hypervisor_query (self->hypervisor, id, NULL);

    if (sandbox->state == BOX_SANDBOX_STATE_RUNNING || vm_state != BOX_VM_STATE_SUSPENDED)
      box_engine_mark_lost (self, sandbox, "vm_lost");
  }
  box_engine_unlock_sandbox (self, id);
}

static void
on_vm_lost (BoxHypervisor *hypervisor, const char *sandbox_id, gpointer user_data)
{
  BoxEngine *self = user_data;

  /* plugins emit ::vm-lost on the main thread (box-hypervisor.h) */
  BOX_ENGINE_ASSERT_OWNER (self);
  box_engine_lock_sandbox_async (self, sandbox_id, vm_lost_locked, g_strdup (sandbox_id));
}

void
box_engine_start_ticks (BoxEngine *self)
{
  self->tick_id = box_clock_timeout_add (self->clock, TICK_INTERVAL_S * 1000, tick, self);
  self->vm_lost_id = g_signal_connect (self->hypervisor, "vm-lost", G_CALLBACK (on_vm_lost), self);
}

/* ---- reconciliation ---------------------------------------------------- */

gboolean
box_engine_vm_matches (BoxSandboxState state, BoxVmState vm_state)
{
  switch (state) {
  case BOX_SANDBOX_STATE_RUNNING:
    return vm_state == BOX_VM_STATE_RUNNING;
  case BOX_SANDBOX_STATE_PAUSED:
    return vm_state == BOX_VM_STATE_SUSPENDED;
  case BOX_SANDBOX_STATE_STOPPED:
    return vm_state == BOX_VM_STATE_SHUTOFF || vm_state == BOX_VM_STATE_SUSPENDED;
  case BOX_SANDBOX_STATE_ERROR:
    return TRUE;
  case BOX_SANDBOX_STATE_CREATING:
  default:
    return FALSE;
  }
}

gboolean
box_engine_reconcile (BoxEngine *self, GError **error)
{
  g_autoptr(GPtrArray) sandboxes = box_storage_sandbox_list (self->storage, NULL, error);
  guint i;

  if (sandboxes == NULL)
    return FALSE;
  for (i = 0; i < sandboxes->len; i++) {
    BoxSandbox *sandbox = g_ptr_array_index (sandboxes, i);
    BoxVmState vm_state = box_hypervisor_query (self->hypervisor, sandbox->id, NULL);

    /* creating: boxd died during the first boot */
    if (sandbox->state == BOX_SANDBOX_STATE_CREATING)
      vm_state = BOX_VM_STATE_ABSENT;
    if (!box_engine_vm_matches (sandbox->state, vm_state)) {
      g_message ("sandbox %s: recorded %s, hypervisor has %d; reconciling", sandbox->id,
                 box_sandbox_state_to_string (sandbox->state), vm_state);
      if (sandbox->state == BOX_SANDBOX_STATE_CREATING) {
        sandbox->state = BOX_SANDBOX_STATE_ERROR;
        if (!box_engine_save_sandbox (self, sandbox, error))
          return FALSE;
        box_engine_emit_detail (self, "sandbox.error", sandbox, "reason", "reconciled");
      } else {
        box_engine_mark_lost (self, sandbox, "vm_lost");
      }
    }
    box_engine_runtime_sync (self, sandbox);
  }
  box_engine_reconcile_checkpoints (self);
  return TRUE;
}

/* ---- project deletion -------------------------------------------------- */

typedef struct {
  GPtrArray *ids;
  guint      next;
} DestroyAll;

static void
destroy_all_free (DestroyAll *all)
{
  g_ptr_array_unref (all->ids);
  g_free (all);
}

static void destroy_next (GTask *task);

static void
destroy_one_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  g_autoptr(GError) error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error) &&
      !g_error_matches (error, BOX_ERROR, BOX_ERROR_NOT_FOUND)) {
    g_task_return_error (task, g_steal_pointer (&error));
    g_object_unref (task);
    return;
  }
  destroy_next (task);
}

static void
destroy_next (GTask *task)
{
  BoxEngine *self = g_task_get_source_object (task);
  DestroyAll *all = g_task_get_task_data (task);
  GTask *one;
  BoxEngineOp *op;

  if (all->next >= all->ids->len) {
    g_task_return_boolean (task, TRUE);
    g_object_unref (task);
    return;
  }
  one = box_engine_op_task_new (self, BOX_ENGINE_OP_DELETE, NULL, destroy_next, NULL, destroy_one_done, task);
  op = g_task_get_task_data (one);
  op->force = TRUE;
  box_engine_op_start (self, one, g_ptr_array_index (all->ids, all->next++));
}

void
box_engine_destroy_project_sandboxes_async (BoxEngine *self, const char *project,
                                            GCancellable *cancellable,
                                            GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(GPtrArray) sandboxes = NULL;
  DestroyAll *all = g_new0 (DestroyAll, 1);
  GError *error = NULL;
  guint i;

  g_task_set_source_tag (task, box_engine_destroy_project_sandboxes_async);
  all->ids = g_ptr_array_new_with_free_func (g_free);
  g_task_set_task_data (task, all, (GDestroyNotify) destroy_all_free);
  sandboxes = box_storage_sandbox_list (self->storage, project, &error);
  if (sandboxes == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  for (i = 0; i < sandboxes->len; i++)
    g_ptr_array_add (all->ids, g_strdup (((BoxSandbox *) g_ptr_array_index (sandboxes, i))->id));
  destroy_next (task);
}

gboolean
box_engine_destroy_project_sandboxes_finish (BoxEngine *self, GAsyncResult *result,
                                             GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

