/* box-libvirt-dispatch.c: from the engine's run_async() to an operation.
 *
 * Engine operations and the plugin's own jobs (a hot pause turning cold, a
 * domain that stopped on its own) queue on the VM's lock and start once
 * nothing else runs on that VM; creates have no VM to lock yet.
 */
#include "config.h"

#include "box-libvirt-op.h"

static void
op_locked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  op->locked = TRUE;
  op->started = g_get_monotonic_time ();
  if (op->vm->gone) {
    if (op->op == BOX_VM_OP_DESTROY && op->kind == BOX_LIBVIRT_JOB_ENGINE)
      box_libvirt_op_return (task, NULL);
    else
      box_libvirt_op_fail (task, BOX_ERROR_NOT_FOUND, "no VM for sandbox %s", op->id);
    return;
  }
  switch (op->kind) {
  case BOX_LIBVIRT_JOB_COLD:
    box_libvirt_cold_start (task);
    return;
  case BOX_LIBVIRT_JOB_LOST:
    box_libvirt_lost_start (task);
    return;
  case BOX_LIBVIRT_JOB_STANDBY:
    box_libvirt_standby_start (task);
    return;
  case BOX_LIBVIRT_JOB_FAULT_IN:
    box_libvirt_fault_in_start (task);
    return;
  case BOX_LIBVIRT_JOB_ENGINE:
  default:
    break;
  }
  switch (op->op) {
  case BOX_VM_OP_SUSPEND:
    box_libvirt_suspend_start (task);
    break;
  case BOX_VM_OP_RESUME:
    box_libvirt_resume_start (task);
    break;
  case BOX_VM_OP_SHUTDOWN:
    box_libvirt_shutdown_start (task);
    break;
  case BOX_VM_OP_BOOT:
    box_libvirt_boot_start (task);
    break;
  case BOX_VM_OP_DESTROY:
    box_libvirt_destroy_start (task);
    break;
  case BOX_VM_OP_CHECKPOINT:
    box_libvirt_checkpoint_start (task);
    break;
  case BOX_VM_OP_RESTORE:
    box_libvirt_restore_start (task);
    break;
  default:
    box_libvirt_op_fail (task, BOX_ERROR_UNSUPPORTED, "the libvirt hypervisor cannot %s yet",
                         box_vm_op_to_string (op->op));
    break;
  }
}

BoxLibvirtOp *
box_libvirt_op_new (BoxLibvirtPlugin *self, BoxLibvirtJobKind kind, BoxVmOp vm_op, const char *id)
{
  BoxLibvirtOp *op = g_new0 (BoxLibvirtOp, 1);

  op->self = box_libvirt_hold (self);
  op->kind = kind;
  op->op = vm_op;
  op->id = g_strdup (id);
  op->started = g_get_monotonic_time ();
  return op;
}

/* An internal job on @vm; @callback (or NULL: nobody waits) gets its end. */
void
box_libvirt_run_job (BoxLibvirtPlugin *self, BoxLibvirtVm *vm, BoxLibvirtJobKind kind,
                     GAsyncReadyCallback callback, gpointer user_data)
{
  BoxLibvirtOp *op = box_libvirt_op_new (self, kind, BOX_VM_OP_LAST, vm->id);
  GTask *task = g_task_new (self, NULL, callback, user_data);

  g_task_set_source_tag (task, box_libvirt_run_job);
  g_task_set_task_data (task, op, (GDestroyNotify) box_libvirt_op_free);
  op->vm = vm;
  op->domain = box_libvirt_vm_domain_name (vm->vm_id);
  op->resources = vm->resources;
  box_libvirt_vm_lock_async (self, vm, op_locked, task);
}

void
box_libvirt_vm_make_cold (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  box_libvirt_run_job (self, vm, BOX_LIBVIRT_JOB_COLD, NULL, NULL);
}

void
box_libvirt_vm_stopped (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  box_libvirt_run_job (self, vm, BOX_LIBVIRT_JOB_LOST, NULL, NULL);
}

typedef struct {
  BoxLibvirtPlugin *self;
  char             *id;
} ColdTimer;

static void
cold_timer_free (ColdTimer *timer)
{
  g_free (timer->id);
  g_free (timer);
}

static gboolean
cold_timer_cb (gpointer user_data)
{
  ColdTimer *timer = user_data;
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (timer->self, timer->id);

  if (vm != NULL) {
    vm->cold_source = 0;
    if (timer->self->started)   /* (the stop removes these timers) */
      box_libvirt_vm_make_cold (timer->self, vm);
  }
  return G_SOURCE_REMOVE;
}

/* After hot_pause_s, a hot pause turns cold.  The timer goes with the VM
 * (box_libvirt_vm_free), so it may point at the plugin unreferenced. */
void
box_libvirt_schedule_cold (BoxLibvirtPlugin *self, BoxLibvirtVm *vm, guint seconds)
{
  ColdTimer *timer = g_new0 (ColdTimer, 1);

  timer->self = self;
  timer->id = g_strdup (vm->id);
  if (vm->cold_source != 0)
    g_source_remove (vm->cold_source);
  vm->cold_source = g_timeout_add_seconds_full (G_PRIORITY_DEFAULT, seconds,
                                                cold_timer_cb, timer,
                                                (GDestroyNotify) cold_timer_free);
}

static GHashTable *
copy_env (GHashTable *env)
{
  GHashTable *copy = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  GHashTableIter iter;
  gpointer key, value;

  if (env != NULL) {
    g_hash_table_iter_init (&iter, env);
    while (g_hash_table_iter_next (&iter, &key, &value))
      g_hash_table_insert (copy, g_strdup (key), g_strdup (value));
  }
  return copy;
}

void
box_libvirt_op_async (BoxLibvirtPlugin *self, BoxVmOp vm_op, const BoxVmRequest *request,
                      GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  const BoxResources *defaults = &self->image->resources;
  BoxLibvirtVm *vm;
  BoxLibvirtOp *op;

  g_task_set_source_tag (task, box_libvirt_op_async);
  if (request == NULL || !box_sandbox_id_is_valid (request->sandbox_id)) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID, "bad sandbox ID \"%s\"",
                             request != NULL && request->sandbox_id != NULL ?
                             request->sandbox_id : "");
    g_object_unref (task);
    return;
  }
  /* the request is only valid during this call */
  op = box_libvirt_op_new (self, BOX_LIBVIRT_JOB_ENGINE, vm_op, request->sandbox_id);
  g_task_set_task_data (task, op, (GDestroyNotify) box_libvirt_op_free);
  op->hostname = g_strdup (request->hostname != NULL ? request->hostname : "");
  op->env = copy_env (request->env);
  op->resources.cpus = request->resources.cpus != 0 ? request->resources.cpus : defaults->cpus;
  op->resources.memory_mib = request->resources.memory_mib != 0 ?
                             request->resources.memory_mib : defaults->memory_mib;
  op->resources.disk_gib = request->resources.disk_gib != 0 ?
                           request->resources.disk_gib : defaults->disk_gib;
  op->checkpoint_id = g_strdup (request->checkpoint_id);
  op->memory = request->memory;
  op->from_sandbox_id = g_strdup (request->from_sandbox_id);
  op->from_checkpoint_id = g_strdup (request->from_checkpoint_id);
  /* a background materialisation yields to these (box-libvirt-materialise.c) */
  op->heavy = vm_op == BOX_VM_OP_CREATE || vm_op == BOX_VM_OP_RESUME ||
              vm_op == BOX_VM_OP_BOOT || vm_op == BOX_VM_OP_CHECKPOINT ||
              vm_op == BOX_VM_OP_RESTORE;
  if (op->heavy)
    g_atomic_int_inc (&self->heavy_ops);
  op->counted = TRUE;
  g_atomic_int_inc (&self->engine_ops);

  if (!self->started) {
    box_libvirt_op_fail (task, BOX_ERROR_SANDBOX_UNAVAILABLE,
                         "the libvirt hypervisor is not running");
    return;
  }
  if (box_libvirt_tcg_refused (self) &&
      (vm_op == BOX_VM_OP_CREATE || vm_op == BOX_VM_OP_RESUME || vm_op == BOX_VM_OP_BOOT)) {
    box_libvirt_op_fail (task, BOX_ERROR_UNSUPPORTED,
                         "this host has no KVM and [plugin.libvirt] allow_tcg is false: "
                         "TCG is not a security boundary, so no sandbox runs here");
    return;
  }
  vm = box_libvirt_lookup_vm (self, op->id);
  if (vm_op == BOX_VM_OP_DESTROY)
    box_libvirt_ready_forget (self, op->id, NULL);
  switch (vm_op) {
  case BOX_VM_OP_CREATE:
    if (vm != NULL) {
      box_libvirt_op_fail (task, BOX_ERROR_ALREADY_EXISTS, "a VM for sandbox %s exists", op->id);
    } else if (request->image != NULL && request->image[0] != '\0') {
      box_libvirt_op_fail (task, BOX_ERROR_UNSUPPORTED,
                           "the libvirt hypervisor cannot run images yet");
    } else if (request->from_sandbox_id != NULL) {
      box_libvirt_fork_start (task);
    } else if (request->template_name != NULL && request->template_name[0] != '\0' &&
               g_strcmp0 (request->template_name, "base") != 0) {
      box_libvirt_op_fail (task, BOX_ERROR_INVALID, "no template \"%s\"", request->template_name);
    } else {
      box_libvirt_create_start (task);
    }
    return;
  case BOX_VM_OP_DELETE_CHECKPOINT:
    /* no VM lock: a checkpoint may outlive its VM's record */
    if (box_libvirt_checkpoint_id_is_valid (op->checkpoint_id))
      box_libvirt_ready_forget (self, op->id, op->checkpoint_id);
    box_libvirt_delete_checkpoint_start (task);
    return;
  default:
    break;
  }
  if (vm == NULL) {
    if (vm_op == BOX_VM_OP_DESTROY) {
      g_autoptr(GError) error = NULL;

      box_libvirt_detach_network (self, op->id);
      /* checkpoints of a VM whose record is gone (a few small unlinks) */
      if (!box_libvirt_checkpoints_remove_all (self, op->id, &error))
        g_warning ("libvirt: %s", error->message);
      box_libvirt_op_return (task, NULL);
    } else {
      box_libvirt_op_fail (task, BOX_ERROR_NOT_FOUND, "no VM for sandbox %s", op->id);
    }
    return;
  }
  op->vm = vm;
  op->domain = box_libvirt_vm_domain_name (vm->vm_id);
  box_libvirt_vm_lock_async (self, vm, op_locked, task);
}

gboolean
box_libvirt_op_finish (BoxLibvirtPlugin *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  g_return_val_if_fail (g_task_get_source_tag (G_TASK (result)) == box_libvirt_op_async, FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

