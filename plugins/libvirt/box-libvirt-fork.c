/* box-libvirt-fork.c: a create from a checkpoint (from_sandbox_id,
 * from_checkpoint_id).
 *
 * The fork is a new VM with a directory, uid and network attachment of its
 * own; its disk is a new qcow2 overlay on the checkpoint's, which is
 * hard-linked into its directory as a read-only layer (box-libvirt-layers.c),
 * and a memory checkpoint's state is hard-linked as its cold.mig: both
 * outlive the checkpoint and its sandbox (box-libvirt-checkpoint.c).  A
 * materialised checkpoint's RAM file and device state are linked as its
 * ram and cold.dev, and its first start maps the RAM privately and loads
 * only the devices, like a create from the template (box-libvirt-start.c).
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

static gboolean
fork_disk_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;

  return box_libvirt_check_guest_disk (self, op->domain, error);
}

static void
fork_disk_checked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  GError *error = g_object_steal_data (G_OBJECT (task), "box-fork-error");
  g_autoptr(GError) full = NULL;

  if (!box_libvirt_run_finish (result, &full)) {
    GError *capacity = g_error_new (BOX_ERROR, BOX_ERROR_CAPACITY, "%s (%s)", full->message,
                                    error->message);
    g_error_free (error);
    error = capacity;
  }
  fork_fail (task, error);
}

/* A fork whose files fitted, but whose guest then met a full disk (QEMU
 * stops it on the write: it answers nothing until the set-up times out),
 * is 503 capacity too, and leaves nothing either. */
static void
fork_guest_fail (GTask *task, GError *error)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  if (g_error_matches (error, BOX_ERROR, BOX_ERROR_CAPACITY)) {
    fork_fail (task, error);
    return;
  }
  g_object_set_data_full (G_OBJECT (task), "box-fork-error", error,
                          (GDestroyNotify) g_error_free);
  box_libvirt_run_in_thread (op->self, fork_disk_work, op, NULL, NULL, fork_disk_checked, task);
}

static void
fork_started (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autofree char *socket = box_libvirt_op_file (op, "agent.sock");
  BoxLibvirtGuestSetup setup = {
    .socket_path = socket,
    .steps = BOX_LIBVIRT_GUEST_TIME | BOX_LIBVIRT_GUEST_ENV,
    .hostname = op->hostname,
    .net = op->net,
    .env = op->env,
    .timeout_s = op->memory ? BOX_LIBVIRT_AGENT_TIMEOUT_S : op->self->config.boot_timeout_s,
  };
  GError *error = NULL;

  /* made ready in advance: loaded and paused, its guest set up when taken */
  if (op->ready_vm_id != NULL) {
    if (!box_libvirt_run_finish (result, &error))
      fork_fail (task, error);
    else
      box_libvirt_op_return (task, NULL);
    return;
  }

  /* a boot took its hostname and address from the kernel command line and
   * its entropy is its own; a restored guest is still the source */
  if (op->memory) {
    setup.steps |= BOX_LIBVIRT_GUEST_RANDOM | BOX_LIBVIRT_GUEST_HOSTNAME;
    if (op->net != NULL)
      setup.steps |= BOX_LIBVIRT_GUEST_NETWORK;
  }
  box_libvirt_op_guest_start (task, result, &setup,
                              g_strdup_printf ("fork of checkpoint %s of %s, %s",
                                               op->from_checkpoint_id, op->from_sandbox_id,
                                               !op->memory ? "disk only" : op->set_owner ?
                                               "memory, made ready in advance" : "memory"),
                              fork_guest_fail);
}

gboolean
box_libvirt_link_ram_state (const char *ckpt_dir, const char *vm_dir, const char *suffix)
{
  g_autofree char *ram = g_build_filename (ckpt_dir, "ram", NULL);
  g_autofree char *dev = g_build_filename (ckpt_dir, "devstate", NULL);
  g_autofree char *ram_name = g_strconcat ("ram", suffix, NULL);
  g_autofree char *dev_name = g_strconcat ("cold.dev", suffix, NULL);
  g_autofree char *vm_ram = g_build_filename (vm_dir, ram_name, NULL);
  g_autofree char *vm_dev = g_build_filename (vm_dir, dev_name, NULL);

  if (box_libvirt_link_file (ram, vm_ram, NULL) && box_libvirt_link_file (dev, vm_dev, NULL))
    return TRUE;
  g_unlink (vm_ram);
  g_unlink (vm_dev);
  return FALSE;
}

static gboolean
fork_files_and_start (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;
  g_autofree char *dir = box_libvirt_checkpoint_dir (self, op->from_sandbox_id,
                                                     op->from_checkpoint_id);
  g_autofree char *ckpt_disk = g_build_filename (dir, "disk.qcow2", NULL);
  g_autofree char *ckpt_state = g_build_filename (dir, "state", NULL);
  g_autofree char *vm_dir = box_libvirt_op_file (op, NULL);
  g_autofree char *disk = box_libvirt_op_file (op, "disk.qcow2");
  g_autofree char *cold = box_libvirt_op_file (op, "cold.mig");
  gint64 start = g_get_monotonic_time (), files_done;
  gboolean ok;

  /* the checkpoint's disk becomes a read-only layer under a new overlay
   * (box-libvirt-layers.c): nothing is copied.  Materialised, its RAM
   * file (mapped privately) and device state are linked too; a link that
   * fails (the checkpoint deleted meanwhile) leaves the full state, which
   * the start falls back to (box-libvirt-start.c) */
  if (!box_libvirt_check_disk_room (self, 0, error))
    return FALSE;
  box_libvirt_test_delay ("fork-files", op);
  if (!box_libvirt_layers_overlay (ckpt_disk, vm_dir, disk, NULL, error) ||
      !box_libvirt_give_to_qemu (self, disk, box_libvirt_vm_uid (self, vm_dir), error))
    return FALSE;
  if (op->memory && link (ckpt_state, cold) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot link %s: %s", cold,
                 g_strerror (saved_errno));
    return FALSE;
  }
  if (op->memory && op->ram && !box_libvirt_link_ram_state (dir, vm_dir, ""))
    g_message ("libvirt: fork %s: the RAM file of checkpoint %s of %s is gone: loading its "
               "full state", op->id, op->from_checkpoint_id, op->from_sandbox_id);
  if (!box_libvirt_layers_sync (self->config.vm_dir, self->config.qemu_uid, error))
    return FALSE;
  files_done = g_get_monotonic_time ();
  ok = box_libvirt_start_domain_work (self, op, !op->memory, error);
  g_debug ("libvirt: fork %s: files in %.1f ms, domain %s in %.1f ms", op->id,
           (files_done - start) / 1e3,
           !op->memory ? "started" : op->ram ? "started from the RAM file" :
           "started and state loaded", (g_get_monotonic_time () - files_done) / 1e3);
  if (ok)
    box_libvirt_test_delay ("fork", op);
  return ok;
}

/* A fork that filled the disk midway (the overlay, a link, its QEMU's
 * files) is 503 capacity, as if it had not fitted; fork_fail() removes
 * what it wrote. */
static gboolean
fork_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  if (fork_files_and_start (self, data, error))
    return TRUE;
  box_libvirt_note_disk_full (self, error);
  return FALSE;
}

/* The fork's VM made here: directory, uid, attachment, disk, start. */
static void
fork_make (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  BoxLibvirtPlugin *self = op->self;
  BoxNetwork *network = box_libvirt_get_network (self);
  Fork *fork = g_object_get_data (G_OBJECT (task), "box-fork");
  BoxLibvirtVm *vm = op->vm;
  g_autofree char *dir = NULL;
  GError *error = NULL;

  vm->vm_id = op->ready_vm_id != NULL ? g_strdup (op->ready_vm_id) : box_libvirt_new_vm_id ();
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

static void
ready_undone (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(GError) error = box_libvirt_op_undo_finish (task, result);

  box_libvirt_pool_record_remove (op->self, op->vm->vm_id);
  g_clear_pointer (&op->vm->vm_id, g_free);
  g_clear_pointer (&op->domain, g_free);
  g_clear_pointer (&op->net, box_net_attachment_free);
  op->set_owner = FALSE;
  if (!op->self->started) {
    box_libvirt_op_fail (task, BOX_ERROR_SANDBOX_UNAVAILABLE, "the hypervisor is stopping");
    return;
  }
  fork_make (task);
}

/* A ready fork that does not resume (its QEMU died while it waited): it
 * goes, and the fork is made as if there had been none. */
static void
ready_resumed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  GError *error = NULL;

  if (box_libvirt_run_finish (result, &error)) {
    fork_started (source, NULL, task);
    return;
  }
  g_warning ("libvirt: fork %s: the ready fork %s did not resume (%s): making the fork",
             op->id, op->vm->vm_id, error->message);
  box_libvirt_op_undo (task, error, ready_undone);
}

void
box_libvirt_fork_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  BoxLibvirtPlugin *self = op->self;
  BoxNetwork *network = box_libvirt_get_network (self);
  Fork *fork = g_new0 (Fork, 1);
  GError *error = NULL;
  BoxLibvirtVm *vm;

  g_object_set_data_full (G_OBJECT (task), "box-fork", fork, (GDestroyNotify) fork_free);
  if (!box_libvirt_checkpoint_info_load (self, op->from_sandbox_id, op->from_checkpoint_id,
                                         &fork->info, &error)) {
    box_libvirt_op_return (task, error);
    return;
  }
  op->memory = fork->info.memory;
  op->ram = fork->info.ram;
  /* a restored guest needs the devices it was saved with */
  if (op->memory && fork->info.nic != (network != NULL)) {
    box_libvirt_op_fail (task, BOX_ERROR_UNSUPPORTED,
                         "checkpoint %s of %s was taken %s a network, this host runs %s",
                         op->from_checkpoint_id, op->from_sandbox_id,
                         fork->info.nic ? "with" : "without", fork->info.nic ? "none" : "one");
    return;
  }
  if (op->ready_vm_id != NULL && !(op->memory && op->ram)) {
    box_libvirt_op_fail (task, BOX_ERROR_INVALID, "checkpoint %s of %s is not materialised",
                         op->from_checkpoint_id, op->from_sandbox_id);
    return;
  }
  op->resources = fork->info.resources;
  vm = box_libvirt_vm_new (op->id);
  vm->resources = fork->info.resources;
  vm->nic = network != NULL;
  g_free (vm->hostname);
  vm->hostname = g_strdup (op->hostname);
  g_free (vm->template_key);
  vm->template_key = g_strdup (fork->info.template_key);
  op->vm = vm;
  /* a fork made ready in advance: it only runs now (box-libvirt-ready.c) */
  if (op->memory && op->ready_vm_id == NULL && box_libvirt_ready_take (self, op)) {
    op->domain = box_libvirt_vm_domain_name (vm->vm_id);
    box_libvirt_run_in_thread (self, box_libvirt_resume_work, op, NULL, NULL, ready_resumed,
                               task);
    return;
  }
  fork_make (task);
}
