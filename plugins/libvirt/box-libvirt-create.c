/* box-libvirt-create.c: a create is a fork of a template snapshot.
 *
 * A warm-pool domain (restored from the template snapshot, warmed up and
 * paused: box-libvirt-pool.c) is taken, its network attachment rebound to
 * the sandbox, its disk grown when the sandbox asks for more than the
 * pool's, and resumed; then the guest gets the clock, fresh entropy, its
 * hostname, network and env in one pipelined round of requests on the
 * agent connection the pool kept open.  Only then is the VM recorded and
 * the create answered.  When anything fails, the domain and its files go.
 */
#include "config.h"

#include "box-libvirt-op.h"

void
box_libvirt_op_undo (GTask *task, GError *error, GAsyncReadyCallback done)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  g_object_set_data_full (G_OBJECT (task), "box-undo-error", error,
                          (GDestroyNotify) g_error_free);
  box_libvirt_run_in_thread (op->self, box_libvirt_destroy_work, op, NULL, NULL, done, task);
}

GError *
box_libvirt_op_undo_finish (GTask *task, GAsyncResult *result)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(GError) cleanup_error = NULL;

  if (!box_libvirt_run_finish (result, &cleanup_error))
    g_warning ("libvirt: cleaning up after a failed create of %s: %s", op->id,
               cleanup_error->message);
  box_libvirt_detach_network (op->self, op->id);
  return g_object_steal_data (G_OBJECT (task), "box-undo-error");
}

static void
create_cleaned (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  GError *error = box_libvirt_op_undo_finish (task, result);

  if (op->slot != NULL)
    box_libvirt_template_slot_claimed (op->self, op->slot);
  box_libvirt_vm_free (g_steal_pointer (&op->vm));
  box_libvirt_op_return (task, error);
}

/* After the slot was taken: remove its domain and files, then fail. */
static void
create_fail (GTask *task, GError *error)
{
  box_libvirt_op_undo (task, error, create_cleaned);
}

gboolean
box_libvirt_op_keep_new_vm (BoxLibvirtOp *op, BoxAgent *agent, GError **error)
{
  BoxLibvirtPlugin *self = op->self;

  if (!self->started || g_hash_table_contains (self->vms, op->id)) {
    g_set_error (error, BOX_ERROR, !self->started ? BOX_ERROR_SANDBOX_UNAVAILABLE :
                 BOX_ERROR_ALREADY_EXISTS, "no VM for sandbox %s: %s", op->id,
                 !self->started ? "the hypervisor is stopping" : "it has one");
    return FALSE;
  }
  op->vm->state = BOX_VM_STATE_RUNNING;
  op->vm->cold = FALSE;
  op->vm->snapshot_at = 0;
  if (!box_libvirt_vm_save (op->vm, box_plugin_get_state_dir (BOX_PLUGIN (self)), error))
    return FALSE;
  /* the state file covers the VM now (a pool domain's, or a fork's) */
  box_libvirt_pool_record_remove (self, op->vm->vm_id);
  g_hash_table_insert (self->vms, op->vm->id, op->vm);
  box_libvirt_set_agent (self, op->vm, agent);
  return TRUE;
}

typedef struct {
  BoxLibvirtOpFail  fail;
  char             *what;
} GuestStep;

static void
guest_step_free (GuestStep *step)
{
  g_free (step->what);
  g_free (step);
}

static void
guest_ready (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  GuestStep *step = g_object_get_data (G_OBJECT (task), "box-guest-step");
  g_autoptr(BoxAgent) agent = NULL;
  g_autoptr(GError) error = NULL;

  agent = box_libvirt_guest_setup_finish (result, &error);
  if (agent == NULL || !box_libvirt_op_keep_new_vm (op, agent, &error)) {
    step->fail (task, g_steal_pointer (&error));
    return;
  }
  g_message ("libvirt: sandbox %s running (VM %s, %s) in %.0f ms", op->id, op->vm->vm_id,
             step->what, (g_get_monotonic_time () - op->started) / 1e3);
  box_libvirt_op_return (task, NULL);
}

void
box_libvirt_op_guest_start (GTask *task, GAsyncResult *result, BoxLibvirtGuestSetup *setup,
                            char *what, BoxLibvirtOpFail fail)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  GuestStep *step = g_new0 (GuestStep, 1);
  GError *error = NULL;

  step->fail = fail;
  step->what = what;
  g_object_set_data_full (G_OBJECT (task), "box-guest-step", step,
                          (GDestroyNotify) guest_step_free);
  if (result != NULL && !box_libvirt_run_finish (result, &error)) {
    fail (task, error);
    return;
  }
  setup->context = box_plugin_get_context (BOX_PLUGIN (op->self));
  box_libvirt_guest_setup_async (setup, NULL, guest_ready, task);
}

static void
create_resumed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autofree char *socket = box_libvirt_op_file (op, "agent.sock");
  BoxLibvirtGuestSetup setup = {
    .socket_path = socket,
    .agent = op->slot->agent,
    .steps = BOX_LIBVIRT_GUEST_TIME | BOX_LIBVIRT_GUEST_RANDOM | BOX_LIBVIRT_GUEST_HOSTNAME |
             BOX_LIBVIRT_GUEST_ENV,
    .hostname = op->hostname,
    .net = op->net,
    .env = op->env,
    .timeout_s = BOX_LIBVIRT_AGENT_TIMEOUT_S,
  };

  g_debug ("libvirt: create %s: resumed after %.1f ms", op->id,
           (g_get_monotonic_time () - op->started) / 1e3);
  if (op->net != NULL)
    setup.steps |= BOX_LIBVIRT_GUEST_NETWORK;
  if (op->resize) {
    setup.steps |= BOX_LIBVIRT_GUEST_GROW_FS;
    setup.disk_bytes = (guint64) op->resources.disk_gib << 30;
  }
  box_libvirt_op_guest_start (task, result, &setup,
                              g_strdup_printf ("fork of %s", op->vm->template_key), create_fail);
}

static void
create_slot_taken (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  BoxLibvirtPlugin *self = op->self;
  BoxNetwork *network = box_libvirt_get_network (self);
  g_autoptr(GError) error = NULL;

  op->slot = box_libvirt_template_take_slot_finish (result, &error);
  g_debug ("libvirt: create %s: slot after %.1f ms", op->id,
           (g_get_monotonic_time () - op->started) / 1e3);
  if (op->slot == NULL) {
    box_libvirt_vm_free (g_steal_pointer (&op->vm));
    box_libvirt_op_return (task, g_steal_pointer (&error));
    return;
  }
  if (!self->started || g_hash_table_contains (self->vms, op->id)) {
    box_libvirt_template_slot_discard (self, op->slot);
    box_libvirt_vm_free (g_steal_pointer (&op->vm));
    if (!self->started)
      box_libvirt_op_fail (task, BOX_ERROR_SANDBOX_UNAVAILABLE, "the hypervisor is stopping");
    else
      box_libvirt_op_fail (task, BOX_ERROR_ALREADY_EXISTS, "a VM for sandbox %s exists", op->id);
    return;
  }
  op->vm->vm_id = g_strdup (op->slot->vm_id);
  op->vm->template_key = (g_free (op->vm->template_key), g_strdup (op->slot->tmpl->key));
  op->vm->nic = op->slot->net != NULL;
  op->domain = box_libvirt_vm_domain_name (op->vm->vm_id);
  if (op->slot->net != NULL) {
    if (!box_network_rebind (network, op->slot->net_id, op->id, &error)) {
      GError *converted = box_error_convert (error, "network");
      box_libvirt_template_slot_discard (self, op->slot);
      box_libvirt_vm_free (g_steal_pointer (&op->vm));
      box_libvirt_op_return (task, converted);
      return;
    }
    op->net = g_steal_pointer (&op->slot->net);
    g_clear_pointer (&op->slot->net_id, g_free);
  }
  op->resize = (guint64) op->resources.disk_gib << 30 > op->slot->disk_bytes;
  op->set_owner = TRUE;
  box_libvirt_run_in_thread (self, box_libvirt_resume_work, op, NULL, NULL, create_resumed, task);
}

void
box_libvirt_create_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  BoxLibvirtPlugin *self = op->self;
  BoxLibvirtTemplate *tmpl;

  if ((guint64) op->resources.disk_gib << 30 < self->image->rootfs_bytes) {
    box_libvirt_op_fail (task, BOX_ERROR_INVALID,
                         "the base template needs a disk of at least %" G_GUINT64_FORMAT " GiB",
                         (self->image->rootfs_bytes + (1 << 30) - 1) >> 30);
    return;
  }
  op->vm = box_libvirt_vm_new (op->id);
  op->vm->resources = op->resources;
  g_free (op->vm->hostname);
  op->vm->hostname = g_strdup (op->hostname);
  tmpl = box_libvirt_template_get (self, op->resources.cpus, op->resources.memory_mib);
  box_libvirt_template_take_slot_async (self, tmpl, (guint64) op->resources.disk_gib << 30, NULL,
                                        create_slot_taken, task);
}

