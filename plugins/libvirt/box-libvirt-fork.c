/* box-libvirt-fork.c: a create from a checkpoint (from_sandbox_id,
 * from_checkpoint_id).
 *
 * The fork is a new VM with a directory, uid and network attachment of its
 * own; its disk is a sparse copy of the checkpoint's and a memory
 * checkpoint's state is hard-linked as its cold.mig (box-libvirt-checkpoint.c
 * says why both make it independent of the checkpoint and its sandbox).
 * Then it is a cold resume (memory: processes carry on) or a boot (disk
 * only), and the guest gets its own identity: the clock, fresh entropy,
 * its hostname, its address and MAC, its env.  Its sizes, NIC and template
 * are the checkpoint's.  A pool record covers the VM until its state file
 * exists, so a boxd killed midway leaves nothing after the next start.
 */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <unistd.h>

#include "box-libvirt-op.h"

typedef struct {
  BoxLibvirtCheckpointInfo info;
  guint                    uid;
} Fork;

static void
fork_free (Fork *fork)
{
  box_libvirt_checkpoint_info_clear (&fork->info);
  g_free (fork);
}

static void
fork_cleaned (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  GError *error = box_libvirt_op_undo_finish (task, result);

  box_libvirt_pool_record_remove (op->self, op->vm->vm_id);
  box_libvirt_vm_free (g_steal_pointer (&op->vm));
  box_libvirt_op_return (task, error);
}

/* The VM's domain and files go, then the create fails with @error. */
static void
fork_fail (GTask *task, GError *error)
{
  box_libvirt_op_undo (task, error, fork_cleaned);
}

static void
fork_guest_ready (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(BoxAgent) agent = NULL;
  g_autoptr(GError) error = NULL;

  agent = box_libvirt_guest_setup_finish (result, &error);
  if (agent == NULL || !box_libvirt_op_keep_new_vm (op, agent, &error)) {
    fork_fail (task, g_steal_pointer (&error));
    return;
  }
  g_message ("libvirt: sandbox %s running (VM %s, fork of checkpoint %s of %s, %s) in %.0f ms",
             op->id, op->vm->vm_id, op->from_checkpoint_id, op->from_sandbox_id,
             op->memory ? "memory" : "disk only",
             (g_get_monotonic_time () - op->started) / 1e3);
  box_libvirt_op_return (task, NULL);
}

static void
fork_started (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autofree char *socket = box_libvirt_op_file (op, "agent.sock");
  GError *error = NULL;
  BoxLibvirtGuestSetup setup = {
    .socket_path = socket,
    .steps = BOX_LIBVIRT_GUEST_TIME | BOX_LIBVIRT_GUEST_ENV,
    .hostname = op->hostname,
    .net = op->net,
    .env = op->env,
    .timeout_s = op->memory ? BOX_LIBVIRT_AGENT_TIMEOUT_S : op->self->config.boot_timeout_s,
  };

  if (!box_libvirt_run_finish (result, &error)) {
    fork_fail (task, error);
    return;
  }
  /* a boot took its hostname and address from the kernel command line and
   * its entropy is its own; a restored guest is still the source */
  if (op->memory) {
    setup.steps |= BOX_LIBVIRT_GUEST_RANDOM | BOX_LIBVIRT_GUEST_HOSTNAME;
    if (op->net != NULL)
      setup.steps |= BOX_LIBVIRT_GUEST_NETWORK;
  }
  setup.context = box_plugin_get_context (BOX_PLUGIN (op->self));
  box_libvirt_guest_setup_async (&setup, NULL, fork_guest_ready, task);
}

static gboolean
fork_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;
  g_autofree char *dir = box_libvirt_checkpoint_dir (self, op->from_sandbox_id,
                                                     op->from_checkpoint_id);
  g_autofree char *ckpt_disk = g_build_filename (dir, "disk.qcow2", NULL);
  g_autofree char *ckpt_state = g_build_filename (dir, "state", NULL);
  g_autofree char *vm_dir = box_libvirt_op_file (op, NULL);
  g_autofree char *disk = box_libvirt_op_file (op, "disk.qcow2");
  g_autofree char *cold = box_libvirt_op_file (op, "cold.mig");

  if (!box_libvirt_check_disk_room (self, box_libvirt_file_allocated (ckpt_disk), error) ||
      !box_libvirt_copy_sparse (ckpt_disk, disk, error) ||
      !box_libvirt_give_to_qemu (self, disk, box_libvirt_vm_uid (self, vm_dir), error))
    return FALSE;
  if (op->memory && link (ckpt_state, cold) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot link %s: %s", cold,
                 g_strerror (saved_errno));
    return FALSE;
  }
  if (!box_libvirt_start_domain_work (self, op, !op->memory, error))
    return FALSE;
  box_libvirt_test_delay ("fork", op);
  return TRUE;
}

void
box_libvirt_fork_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  BoxLibvirtPlugin *self = op->self;
  BoxNetwork *network = box_libvirt_get_network (self);
  Fork *fork = g_new0 (Fork, 1);
  g_autofree char *dir = NULL;
  GError *error = NULL;
  BoxLibvirtVm *vm;

  g_object_set_data_full (G_OBJECT (task), "box-fork", fork, (GDestroyNotify) fork_free);
  if (!box_libvirt_checkpoint_info_load (self, op->from_sandbox_id, op->from_checkpoint_id,
                                         &fork->info, &error)) {
    box_libvirt_op_return (task, error);
    return;
  }
  op->memory = fork->info.memory;
  /* a restored guest needs the devices it was saved with */
  if (op->memory && fork->info.nic != (network != NULL)) {
    box_libvirt_op_fail (task, BOX_ERROR_UNSUPPORTED,
                         "checkpoint %s of %s was taken %s a network, this host runs %s",
                         op->from_checkpoint_id, op->from_sandbox_id,
                         fork->info.nic ? "with" : "without", fork->info.nic ? "none" : "one");
    return;
  }
  op->resources = fork->info.resources;
  vm = box_libvirt_vm_new (op->id);
  vm->vm_id = box_libvirt_new_vm_id ();
  vm->resources = fork->info.resources;
  vm->nic = network != NULL;
  g_free (vm->hostname);
  vm->hostname = g_strdup (op->hostname);
  g_free (vm->template_key);
  vm->template_key = g_strdup (fork->info.template_key);
  op->vm = vm;
  op->domain = box_libvirt_vm_domain_name (vm->vm_id);
  box_libvirt_pool_record_add (self, vm->vm_id);
  dir = box_libvirt_op_file (op, NULL);
  if (!box_libvirt_claim_vm_dir (self, dir, &fork->uid, &error)) {
    fork_fail (task, error);
    return;
  }
  if (network != NULL) {
    g_autoptr(GError) net_error = NULL;

    op->net = box_network_attach (network, op->id, &net_error);
    if (op->net == NULL) {
      fork_fail (task, box_error_convert (net_error, "network"));
      return;
    }
  }
  op->xml = box_libvirt_vm_xml (op, !op->memory);
  box_libvirt_run_in_thread (self, fork_work, op, NULL, NULL, fork_started, task);
}
