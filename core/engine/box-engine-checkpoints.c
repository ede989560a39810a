/* box-engine-checkpoints.c: checkpoints, restore and delete, and the
 * pending records that make them crash-safe.
 *
 * Every operation here runs under the sandbox's lock like pause or delete
 * (box-engine-sandboxes.c runs op->run), since the hypervisor's operations
 * on one sandbox never overlap; reading and listing are records only.
 *
 * Order of a checkpoint, chosen so that a crash (kill -9 of boxd at any
 * point) loses no acknowledged checkpoint and leaves no orphan:
 *   1. checks (state, capability, the project's disk quota): a refusal
 *      writes nothing;
 *   2. the number is taken: the sandbox record's counter moves on (so an ID
 *      is never handed out twice, even when the hypervisor made the
 *      checkpoint but boxd died before the record), and a "pending" record
 *      (kind checkpoint-pending, scope the sandbox) names the checkpoint;
 *   3. the presuspend hooks and the end of the streams (memory checkpoints
 *      of a running sandbox), then the hypervisor op;
 *   4. the checkpoint record is written, then the pending record deleted.
 * A failed op deletes what the hypervisor may have left (DELETE_CHECKPOINT
 * is idempotent).  Deleting a checkpoint marks it pending, deletes its
 * record, then asks the hypervisor, so a crash there too is finished at
 * the next start: what a crash left is found then by
 * box-engine-checkpoints-reconcile.c.
 */
#include "config.h"

#include "box-engine-ops-private.h"
#include "box-engine-presuspend.h"
#include "box-storage-records.h"

#define AUTO_KEPT    5

typedef struct {
  char                       *checkpoint;   /* the target (restore, delete) */
  char                       *comment;
  gboolean                    memory;
  BoxEngineCheckpointAccepted accepted;
  gpointer                    accepted_data;
  BoxCheckpoint              *made;         /* the checkpoint being taken */
  char                       *target_id;    /* restore: the checkpoint restored */
  GError                     *failure;      /* reported once the cleanup is done */
  gboolean                    restoring;
  guint64                     freed_mib;    /* restore: what the auto-N it prunes free */
  const char                 *why;          /* the interruption before the snapshot, or NULL */
} CheckpointOp;

static void
checkpoint_op_free (CheckpointOp *cp)
{
  g_free (cp->checkpoint);
  g_free (cp->comment);
  g_clear_pointer (&cp->made, box_checkpoint_free);
  g_free (cp->target_id);
  g_clear_error (&cp->failure);
  g_free (cp);
}

/* ---- pending records ---------------------------------------------------- */

static char *
pending_id (const char *sandbox_id, const char *checkpoint)
{
  return g_strdup_printf ("%s/%s", sandbox_id, checkpoint);
}

/* The pending record holds whether the checkpoint has memory: the quota
 * counts a checkpoint under way (box-engine-quota.c). */
static gboolean
pending_mark (BoxEngine *self, const char *sandbox_id, const char *checkpoint, gboolean memory,
              GError **error)
{
  g_autofree char *id = pending_id (sandbox_id, checkpoint);
  g_autoptr(BoxStorageRecord) record = box_storage_record_new (BOX_ENGINE_CHECKPOINT_PENDING_KIND,
                                                               sandbox_id, id,
                                                               memory ? "{\"memory\":true}" :
                                                               "{\"memory\":false}");

  record->created_at = box_engine_now (self);
  return box_storage_insert (self->storage, record, error);
}

void
box_engine_checkpoint_pending_clear (BoxEngine *self, const char *sandbox_id,
                                     const char *checkpoint)
{
  g_autofree char *id = pending_id (sandbox_id, checkpoint);
  g_autoptr(GError) error = NULL;

  if (!box_storage_delete (self->storage, BOX_ENGINE_CHECKPOINT_PENDING_KIND, sandbox_id, id, 0,
                           &error) &&
      !g_error_matches (error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
    g_warning ("sandbox %s: checkpoint %s: %s", sandbox_id, checkpoint, error->message);
}

/* The end of a DELETE_CHECKPOINT of @checkpoint: its pending record goes
 * with its files, or stays for the next start's reconciliation. */
gboolean
box_engine_checkpoint_files_deleted (BoxEngine *self, const char *sandbox_id,
                                     const char *checkpoint, GAsyncResult *result)
{
  g_autoptr(GError) error = NULL;

  if (!box_hypervisor_run_finish (self->hypervisor, result, &error)) {
    g_warning ("sandbox %s: checkpoint %s: %s; deleted at the next start", sandbox_id, checkpoint,
               error->message);
    return FALSE;
  }
  box_engine_checkpoint_pending_clear (self, sandbox_id, checkpoint);
  return TRUE;
}

/* ---- reading ------------------------------------------------------------ */

GPtrArray *
box_engine_list_checkpoints (BoxEngine *self, const char *project, const char *id_or_name,
                             GError **error)
{
  g_autoptr(BoxSandbox) sandbox = NULL;

  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (id_or_name != NULL, NULL);
  sandbox = box_storage_sandbox_get (self->storage, project, id_or_name, error);
  if (sandbox == NULL)
    return NULL;
  return box_storage_checkpoint_list (self->storage, sandbox->id, error);
}

BoxCheckpoint *
box_engine_get_checkpoint (BoxEngine *self, const char *project, const char *id_or_name,
                           const char *checkpoint, GError **error)
{
  g_autoptr(BoxSandbox) sandbox = NULL;

  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (id_or_name != NULL && checkpoint != NULL, NULL);
  sandbox = box_storage_sandbox_get (self->storage, project, id_or_name, error);
  if (sandbox == NULL)
    return NULL;
  return box_storage_checkpoint_get (self->storage, sandbox->id, checkpoint, error);
}

/* ---- common ------------------------------------------------------------- */

static void
emit_checkpoint (BoxEngine *self, const char *type, const BoxSandbox *sandbox,
                 const BoxCheckpoint *checkpoint, const char *auto_id)
{
  g_autoptr(JsonObject) detail = json_object_new ();

  json_object_set_string_member (detail, "checkpoint", checkpoint->id);
  if (g_str_equal (type, "checkpoint.created")) {
    json_object_set_boolean_member (detail, "memory", checkpoint->memory);
    json_object_set_boolean_member (detail, "auto", checkpoint->auto_);
  } else if (auto_id != NULL) {
    json_object_set_string_member (detail, "auto", auto_id);
  }
  box_engine_emit (self, type, sandbox, detail);
}

/* A failed op may have changed the VM: a restore ends the old QEMU before
 * it starts the checkpoint's, and a failure after that leaves a VM shut
 * off (or cold) under a record that says running.  A record the VM no
 * longer matches goes back to what the hypervisor has, as when a VM dies
 * on its own (reason vm_lost), so that a wake brings it back.  A paused
 * sandbox whose memory snapshot outlived its VM (LOST with snapshot_at)
 * is what that makes it already: left alone (the hypervisor's ::vm-lost,
 * when it emitted one, announces it once). */
static void
finish_error (BoxEngine *self, GTask *task, GError *error)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  BoxSandbox *sandbox = op->sandbox;
  gint64 snapshot_at = 0;
  BoxVmState vm_state;

  if (sandbox != NULL && sandbox->state != BOX_SANDBOX_STATE_CREATING) {
    vm_state = box_hypervisor_query (self->hypervisor, sandbox->id, &snapshot_at);
    if (!box_engine_vm_matches (sandbox->state, vm_state) &&
        !(sandbox->state == BOX_SANDBOX_STATE_PAUSED && vm_state == BOX_VM_STATE_LOST &&
          snapshot_at != 0)) {
      g_warning ("sandbox %s: its VM changed under the failed operation", sandbox->id);
      box_engine_mark_lost (self, sandbox, "vm_lost");
    }
  }
  box_engine_op_finish_error (self, task, error);
}

static void
run_vm_op (BoxEngine *self, GTask *task, BoxVmOp vm_op, const char *checkpoint, gboolean memory,
           GAsyncReadyCallback done)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  BoxVmRequest vm;

  box_engine_fill_vm_request (self, &vm, op);
  vm.checkpoint_id = checkpoint;
  vm.memory = memory;
  box_hypervisor_run_async (self->hypervisor, vm_op, &vm, NULL, done, task);
}

/* Whether the hypervisor can make this checkpoint at all (501 otherwise). */
static gboolean
check_caps (BoxEngine *self, gboolean memory, GError **error)
{
  if (!box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_CHECKPOINTS)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                         "this deployment's hypervisor cannot take checkpoints");
    return FALSE;
  }
  if (memory && !box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                         "this deployment's hypervisor cannot keep memory: take the checkpoint "
                         "with memory false");
    return FALSE;
  }
  return TRUE;
}

static gboolean
check_state (const BoxSandbox *sandbox, const char *what, GError **error)
{
  if (sandbox->state == BOX_SANDBOX_STATE_CREATING || sandbox->state == BOX_SANDBOX_STATE_ERROR) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT, "sandbox %s is in state %s; it cannot be %s",
                 sandbox->name, box_sandbox_state_to_string (sandbox->state), what);
    return FALSE;
  }
  return TRUE;
}

/* The project's disk quota for a new checkpoint of @sandbox, once
 * @freed_mib went (409). */
static gboolean
check_quota (BoxEngine *self, const BoxSandbox *sandbox, gboolean memory, guint64 freed_mib,
             GError **error)
{
  return box_engine_check_checkpoint_quota (self, sandbox->project,
                                            box_engine_checkpoint_disk_mib (&sandbox->resources,
                                                                            memory),
                                            freed_mib, error);
}

/* @sandbox_id's automatic checkpoints, oldest first (NULL on error). */
static GPtrArray *
list_autos (BoxEngine *self, const char *sandbox_id, GError **error)
{
  g_autoptr(GPtrArray) all = box_storage_checkpoint_list (self->storage, sandbox_id, error);
  GPtrArray *autos;

  if (all == NULL)
    return NULL;
  autos = g_ptr_array_new_with_free_func ((GDestroyNotify) box_checkpoint_free);
  for (guint i = 0; i < all->len; i++) {
    const BoxCheckpoint *checkpoint = g_ptr_array_index (all, i);

    if (checkpoint->auto_)
      g_ptr_array_add (autos, box_checkpoint_copy (checkpoint));
  }
  return autos;
}

/* Steps 1 and 2 of a checkpoint (see the top): the quota, then the number
 * (vN, or auto-N with @auto_), then the pending record.  cp->made is the
 * record to write once the hypervisor made it. */
static gboolean
take_number (BoxEngine *self, BoxEngineOp *op, CheckpointOp *cp, gboolean auto_, GError **error)
{
  BoxSandbox *sandbox = op->sandbox;
  g_autoptr(BoxCheckpoint) made = g_new0 (BoxCheckpoint, 1);

  if (!check_quota (self, sandbox, cp->memory, cp->freed_mib, error))
    return FALSE;
  if (auto_)
    made->id = g_strdup_printf ("auto-%u", sandbox->next_auto_checkpoint++);
  else
    made->id = g_strdup_printf ("v%u", sandbox->next_checkpoint++);
  if (!box_engine_save_sandbox (self, sandbox, error) ||
      !pending_mark (self, sandbox->id, made->id, cp->memory, error))
    return FALSE;
  made->sandbox = g_strdup (sandbox->id);
  made->project = g_strdup (sandbox->project);
  made->comment = g_strdup (auto_ || cp->comment == NULL ? "" : cp->comment);
  made->memory = cp->memory;
  made->auto_ = auto_;
  made->created_at = box_engine_now (self);
  cp->made = g_steal_pointer (&made);
  return TRUE;
}

static void checkpoint_done (GObject *source, GAsyncResult *result, gpointer user_data);

static void
snapshot_go (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;

  run_vm_op (self, task, BOX_VM_OP_CHECKPOINT, cp->made->id, cp->memory, checkpoint_done);
}

static void
streams_ended (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = BOX_ENGINE (source);

  box_engine_end_streams_finish (self, result);
  snapshot_go (self, task);
}

/* Step 3 then the snapshot: what ends before the hypervisor snapshots a
 * running sandbox's memory: exec sockets, port streams, file watches
 * (1011) and other calls in flight; a non-detachable session ends with its
 * socket (SIGHUP).  A restore ends them whatever it keeps (@why
 * "restore").  As for a pause, the guest's presuspend hooks run first
 * (box-engine-presuspend.h, 5 s for all, never failing the snapshot)
 * while everything still runs, for every memory snapshot of a running
 * sandbox; then the streams end, and the snapshot of a running sandbox
 * waits (2 s at most) for the agent to have handled their channels'
 * CLOSE, so that the SIGHUP of a non-detachable session is sent before the
 * guest stops (the hypervisor's own requests to the agent go ahead of
 * those frames); then CHECKPOINT of cp->made. */
static void
snapshot_now (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;

  if (cp->why != NULL && op->sandbox->state == BOX_SANDBOX_STATE_RUNNING) {
    box_engine_end_streams_async (self, op->id, cp->why, streams_ended, task);
    return;
  }
  /* a paused or stopped guest answers nothing: no wait */
  if (cp->why != NULL)
    box_engine_emit_interrupted (self, op->id, cp->why);
  snapshot_go (self, task);
}

static void
hooks_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = BOX_ENGINE (source);

  box_engine_run_presuspend_hooks_finish (self, result);
  snapshot_now (self, task);
}

static void
snapshot (BoxEngine *self, GTask *task, const char *why)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;

  cp->why = why;
  if (cp->memory && op->sandbox->state == BOX_SANDBOX_STATE_RUNNING) {
    box_engine_run_presuspend_hooks_async (self, op->id, hooks_done, task);
    return;
  }
  snapshot_now (self, task);
}

/* ---- checkpoint --------------------------------------------------------- */

static void restore_after_auto (BoxEngine *self, GTask *task);

static void
cleanup_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;

  box_engine_checkpoint_files_deleted (self, op->id, cp->made->id, result);
  finish_error (self, task, g_steal_pointer (&cp->failure));
}

/* The hypervisor op or the record failed: whatever the hypervisor may have
 * kept goes, then @error is the answer. */
static void
checkpoint_failed (BoxEngine *self, GTask *task, GError *error)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;

  g_warning ("sandbox %s: checkpoint %s failed: %s", op->id, cp->made->id, error->message);
  cp->failure = error;
  run_vm_op (self, task, BOX_VM_OP_DELETE_CHECKPOINT, cp->made->id, FALSE, cleanup_done);
}

static void
checkpoint_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;
  GError *error = NULL;

  if (!box_hypervisor_run_finish (self->hypervisor, result, &error) ||
      !box_storage_checkpoint_insert (self->storage, cp->made, &error)) {
    checkpoint_failed (self, task, error);
    return;
  }
  box_engine_checkpoint_pending_clear (self, op->id, cp->made->id);
  emit_checkpoint (self, "checkpoint.created", op->sandbox, cp->made, NULL);
  if (cp->restoring) {
    restore_after_auto (self, task);
    return;
  }
  box_engine_unlock_sandbox (self, op->id);
  g_task_return_pointer (task, box_checkpoint_copy (cp->made), (GDestroyNotify) box_checkpoint_free);
  g_object_unref (task);
}

/* Step 3: the streams end (a memory checkpoint of a running sandbox), then the snapshot. */
static void
checkpoint_take (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;

  snapshot (self, task, cp->memory && op->sandbox->state == BOX_SANDBOX_STATE_RUNNING
                        ? "checkpoint" : NULL);
}

static void
accepted_go (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;

  checkpoint_take (g_task_get_source_object (task), task);
}

/* Steps 2 and on, once the sandbox is in a state to be checkpointed. */
static void
checkpoint_numbered (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;
  GError *error = NULL;
  GTask *go;

  if (!take_number (self, op, cp, FALSE, &error)) {
    finish_error (self, task, error);
    return;
  }
  if (cp->accepted == NULL) {
    checkpoint_take (self, task);
    return;
  }
  go = g_task_new (self, NULL, accepted_go, task);
  cp->accepted (self, cp->made, go, cp->accepted_data);
}

static void
ca_sent (BoxEngine *self, gpointer data)
{
  checkpoint_numbered (self, data);
}

/* A stopped sandbox booted for a memory checkpoint runs on after it: its
 * guest trusts the broker CA before the checkpoint, as at any boot. */
static void
woken (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  BoxEngineOp *op = g_task_get_task_data (task);
  GError *error = NULL;

  if (!box_engine_woken_finish (self, op, result, &error)) {
    finish_error (self, task, error);
    return;
  }
  if (op->trust_ca) {
    op->trust_ca = FALSE;
    if (box_engine_send_ca (self, op->id, ca_sent, task))
      return;
  }
  checkpoint_numbered (self, task);
}

static void
run_checkpoint (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;
  GError *error = NULL;

  if (!check_state (op->sandbox, "checkpointed", &error)) {
    finish_error (self, task, error);
    return;
  }
  /* A route under the sandbox wakes it, but a paused sandbox's state is a
   * snapshot already (the hypervisor checkpoints it as it is), and a disk
   * is all a disk-only checkpoint needs: only a memory checkpoint of a
   * stopped sandbox boots it first, once the quota allows the checkpoint. */
  if (cp->memory && op->sandbox->state == BOX_SANDBOX_STATE_STOPPED) {
    BoxVmRequest vm;

    if (!check_quota (self, op->sandbox, TRUE, 0, &error) ||
        !box_hypervisor_check_room (self->hypervisor, &op->sandbox->resources, &error) ||
        !box_engine_push_egress (self, op, &error)) {
      finish_error (self, task, error);
      return;
    }
    op->from = BOX_SANDBOX_STATE_STOPPED;
    box_engine_fill_vm_request (self, &vm, op);
    box_hypervisor_run_async (self->hypervisor, BOX_VM_OP_BOOT, &vm, NULL, woken, task);
    return;
  }
  checkpoint_numbered (self, task);
}

void
box_engine_create_checkpoint_async (BoxEngine *self, const char *project, const char *id_or_name,
                                    const char *comment, gboolean memory,
                                    BoxEngineCheckpointAccepted accepted, gpointer accepted_data,
                                    GCancellable *cancellable, GAsyncReadyCallback callback,
                                    gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (id_or_name != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  GTask *task = box_engine_op_task_new (self, BOX_ENGINE_OP_STATE, project,
                                        box_engine_create_checkpoint_async, cancellable, callback,
                                        user_data);
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = g_new0 (CheckpointOp, 1);
  g_autoptr(BoxSandbox) sandbox = NULL;
  GError *error = NULL;

  cp->comment = g_strdup (comment);
  cp->memory = memory;
  cp->accepted = accepted;
  cp->accepted_data = accepted_data;
  op->run = run_checkpoint;
  op->extra = cp;
  op->extra_free = (GDestroyNotify) checkpoint_op_free;
  /* 404 before 501: another project's sandbox is not found whatever the deployment */
  sandbox = box_storage_sandbox_get (self->storage, project, id_or_name, &error);
  if (sandbox == NULL || !check_caps (self, memory, &error)) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  box_engine_op_start (self, task, id_or_name);
}

BoxCheckpoint *
box_engine_create_checkpoint_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- delete ------------------------------------------------------------- */

static void
delete_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;

  /* the record is gone: a failure here is finished at the next start */
  box_engine_checkpoint_files_deleted (self, op->id, cp->checkpoint, result);
  box_engine_unlock_sandbox (self, op->id);
  g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

/* Record, then files: see the top. */
gboolean
box_engine_checkpoint_delete_record (BoxEngine *self, const BoxSandbox *sandbox,
                                     const char *checkpoint, GError **error)
{
  g_autoptr(BoxCheckpoint) found = box_storage_checkpoint_get (self->storage, sandbox->id,
                                                               checkpoint, error);

  if (found == NULL || !pending_mark (self, sandbox->id, checkpoint, found->memory, error))
    return FALSE;
  if (!box_storage_checkpoint_delete (self->storage, sandbox->id, checkpoint, error)) {
    box_engine_checkpoint_pending_clear (self, sandbox->id, checkpoint);
    return FALSE;
  }
  emit_checkpoint (self, "checkpoint.deleted", sandbox, found, NULL);
  return TRUE;
}

static void
run_delete (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;
  GError *error = NULL;

  if (!box_engine_checkpoint_delete_record (self, op->sandbox, cp->checkpoint, &error)) {
    finish_error (self, task, error);
    return;
  }
  run_vm_op (self, task, BOX_VM_OP_DELETE_CHECKPOINT, cp->checkpoint, FALSE, delete_done);
}

/* A checkpoint op of @run on @checkpoint, after the lookups (404). */
static void
start_on_checkpoint (BoxEngine *self, const char *project, const char *id_or_name,
                     const char *checkpoint, void (*run) (BoxEngine *, GTask *), gpointer tag,
                     GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = box_engine_op_task_new (self, BOX_ENGINE_OP_STATE, project, tag, cancellable,
                                        callback, user_data);
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = g_new0 (CheckpointOp, 1);
  g_autoptr(BoxCheckpoint) found = NULL;
  GError *error = NULL;

  cp->checkpoint = g_strdup (checkpoint);
  op->run = run;
  op->extra = cp;
  op->extra_free = (GDestroyNotify) checkpoint_op_free;
  found = box_engine_get_checkpoint (self, project, id_or_name, checkpoint, &error);
  if (found == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  box_engine_op_start (self, task, id_or_name);
}

void
box_engine_delete_checkpoint_async (BoxEngine *self, const char *project, const char *id_or_name,
                                    const char *checkpoint, GCancellable *cancellable,
                                    GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (id_or_name != NULL && checkpoint != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  start_on_checkpoint (self, project, id_or_name, checkpoint, run_delete,
                       box_engine_delete_checkpoint_async, cancellable, callback, user_data);
}

gboolean
box_engine_delete_checkpoint_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* ---- restore ------------------------------------------------------------ */

static void
prune_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;

  box_engine_checkpoint_files_deleted (self, op->id, cp->checkpoint, result);
  restore_after_auto (self, task);
}

/* After the restore: the automatic checkpoints beyond the newest AUTO_KEPT
 * go, one at a time, then the answer. */
static void
prune_next (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) autos = list_autos (self, op->id, &error);

  if (autos == NULL)
    g_warning ("sandbox %s: automatic checkpoints not pruned: %s", op->id, error->message);
  if (autos != NULL && autos->len > AUTO_KEPT) {
    const BoxCheckpoint *oldest = g_ptr_array_index (autos, 0);

    g_free (cp->checkpoint);
    cp->checkpoint = g_strdup (oldest->id);
    if (box_engine_checkpoint_delete_record (self, op->sandbox, cp->checkpoint, &error)) {
      run_vm_op (self, task, BOX_VM_OP_DELETE_CHECKPOINT, cp->checkpoint, FALSE, prune_done);
      return;
    }
    g_warning ("sandbox %s: automatic checkpoint %s not pruned: %s", op->id, cp->checkpoint,
               error->message);
  }
  box_engine_op_finish_ok (self, task);
}

static void
restore_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;
  BoxSandbox *sandbox = op->sandbox;
  g_autoptr(BoxCheckpoint) target = NULL;
  GError *error = NULL;

  if (!box_hypervisor_run_finish (self->hypervisor, result, &error)) {
    g_warning ("sandbox %s: restore of %s failed: %s", op->id, cp->target_id, error->message);
    finish_error (self, task, error);
    return;
  }
  op->from = sandbox->state;
  sandbox->state = BOX_SANDBOX_STATE_RUNNING;
  sandbox->snapshot_at = 0;
  sandbox->last_active_at = box_engine_now (self);
  box_engine_runtime_get (self, op->id)->base.last_active = sandbox->last_active_at;
  if (!box_engine_save_sandbox (self, sandbox, &error)) {
    finish_error (self, task, error);
    return;
  }
  box_engine_end_tasks (self, sandbox->id, "restored");
  target = g_new0 (BoxCheckpoint, 1);
  target->id = g_strdup (cp->target_id);
  emit_checkpoint (self, "checkpoint.restored", sandbox, target, cp->made->id);
  if (op->from != BOX_SANDBOX_STATE_RUNNING)
    box_engine_emit_detail (self, "sandbox.running", sandbox, "from",
                            box_sandbox_state_to_string (op->from));
  cp->restoring = FALSE;
  prune_next (self, task);
}

/* The automatic checkpoint is kept (or, once restored, one more was pruned). */
static void
restore_after_auto (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;
  GError *error = NULL;

  if (!cp->restoring) {
    prune_next (self, task);
    return;
  }
  if (!box_engine_push_egress (self, op, &error)) {
    finish_error (self, task, error);
    return;
  }
  run_vm_op (self, task, BOX_VM_OP_RESTORE, cp->target_id, FALSE, restore_done);
}

static void
run_restore (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  CheckpointOp *cp = op->extra;
  BoxSandbox *sandbox = op->sandbox;
  g_autoptr(BoxCheckpoint) target = NULL;
  g_autoptr(GPtrArray) autos = NULL;
  GError *error = NULL;

  target = box_storage_checkpoint_get (self->storage, sandbox->id, cp->checkpoint, &error);
  if (target == NULL || !check_state (sandbox, "restored", &error) ||
      (sandbox->state != BOX_SANDBOX_STATE_RUNNING &&
       !box_hypervisor_check_room (self->hypervisor, &sandbox->resources, &error))) {
    finish_error (self, task, error);
    return;
  }
  cp->target_id = g_strdup (target->id);
  /* the current state as auto-N: memory unless stopped (nothing in memory)
   * or the hypervisor keeps none */
  cp->memory = sandbox->state != BOX_SANDBOX_STATE_STOPPED &&
               box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS);
  cp->restoring = TRUE;
  /* the newest AUTO_KEPT stay: with as many already (more, after a
   * restore that failed before its prune), the oldest go once the restore
   * is done, so a project at its quota can still restore */
  autos = list_autos (self, sandbox->id, &error);
  if (autos == NULL) {
    finish_error (self, task, error);
    return;
  }
  for (guint i = 0; i + AUTO_KEPT <= autos->len; i++) {
    const BoxCheckpoint *pruned = g_ptr_array_index (autos, i);

    cp->freed_mib += box_engine_checkpoint_disk_mib (&sandbox->resources, pruned->memory);
  }
  if (!take_number (self, op, cp, TRUE, &error)) {
    finish_error (self, task, error);
    return;
  }
  /* every session and port stream ends, whatever the kind of restore */
  snapshot (self, task, "restore");
}

void
box_engine_restore_checkpoint_async (BoxEngine *self, const char *project, const char *id_or_name,
                                     const char *checkpoint, GCancellable *cancellable,
                                     GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (id_or_name != NULL && checkpoint != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  start_on_checkpoint (self, project, id_or_name, checkpoint, run_restore,
                       box_engine_restore_checkpoint_async, cancellable, callback, user_data);
}

BoxSandbox *
box_engine_restore_checkpoint_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
