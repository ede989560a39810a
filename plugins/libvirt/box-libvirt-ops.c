/* box-libvirt-ops.c: the VM operations.
 *
 * Each operation is a short chain on the main thread: decide from the VM's
 * record, run the blocking libvirt part on a worker thread, talk to the
 * guest agent, write the record.  Operations on one VM are serialised by
 * its lock (box_libvirt_vm_lock_async), which also orders our own jobs
 * (turning a hot pause cold, handling a VM that died) with the engine's.
 *
 *   create   a fork of the template snapshot: a warm-pool domain (restored
 *            and paused) is taken, its disk grown, resumed; the guest gets
 *            the clock, fresh entropy, its hostname, network and env.
 *   suspend  the guest syncs its disks and forgets the env, then the vCPUs
 *            stop (hot: QEMU keeps the RAM).  After hot_pause_s (or when
 *            memory is needed) the VM turns cold: device state and RAM go
 *            to cold.mig through a migration to an fd, QEMU ends.
 *   resume   hot: the vCPUs run again; cold: a new domain restores cold.mig
 *            (box-libvirt-start.c).  Then the clock and the env (and the
 *            network after cold).
 *   shutdown the agent powers the guest off (a domain destroy when it does
 *            not); the disk stays.
 *   boot     a cold boot on the kept disk.
 *   destroy  domain, files and network attachment gone; idempotent.
 */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <libvirt/virterror.h>
#include <string.h>

#include "box-libvirt-op.h"

#define BOX_LIBVIRT_PAUSE_SYNC_S       5
#define BOX_LIBVIRT_POWEROFF_WAIT_MS   10000

void
box_libvirt_op_free (BoxLibvirtOp *op)
{
  /* (box_libvirt_op_return() uncounts it, on the main thread) */
  if (op->heavy)
    g_atomic_int_add (&op->self->heavy_ops, -1);
  if (op->counted)
    g_atomic_int_add (&op->self->engine_ops, -1);
  box_libvirt_release (op->self);
  g_free (op->id);
  g_free (op->hostname);
  g_clear_pointer (&op->env, g_hash_table_unref);
  g_clear_pointer (&op->slot, box_libvirt_slot_free);
  g_clear_pointer (&op->net, box_net_attachment_free);
  g_free (op->domain);
  g_free (op->xml);
  g_free (op->checkpoint_id);
  g_free (op->from_sandbox_id);
  g_free (op->from_checkpoint_id);
  g_free (op->ready_vm_id);
  g_free (op);
}

BoxLibvirtOp *
box_libvirt_task_op (GTask *task)
{
  return g_task_get_task_data (task);
}

/* Ends @task (taking @error, or success) and releases the VM's lock. */
void
box_libvirt_op_return (GTask *task, GError *error)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  if (error == NULL)
    g_debug ("libvirt: %s %s done in %.1f ms", box_vm_op_to_string (op->op), op->id,
             (g_get_monotonic_time () - op->started) / 1e3);
  /* a VM likely to be saved soon (a restore saves it first): its RAM
   * mapping faulted in ahead of that save, once nothing else runs
   * (box-libvirt-fault-in.c) */
  if (error == NULL && op->kind == BOX_LIBVIRT_JOB_ENGINE && op->vm != NULL &&
      (op->op == BOX_VM_OP_RESTORE || (op->op == BOX_VM_OP_CHECKPOINT && !op->memory)))
    box_libvirt_fault_in_want (op->self, op->vm);
  if (op->locked) {
    op->locked = FALSE;
    box_libvirt_vm_unlock (op->self, op->vm);
  }
  if (op->counted) {
    op->counted = FALSE;
    if (g_atomic_int_dec_and_test (&op->self->engine_ops))
      box_libvirt_fault_in_kick (op->self);
  }
  if (op->heavy) {
    op->heavy = FALSE;
    if (g_atomic_int_dec_and_test (&op->self->heavy_ops)) {
      box_libvirt_materialise_kick (op->self);
      box_libvirt_ready_kick (op->self);
      box_libvirt_standby_kick (op->self);
    }
  }
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

void
box_libvirt_op_fail (GTask *task, BoxErrorCode code, const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  box_libvirt_op_return (task, g_error_new_literal (BOX_ERROR, code, message));
}

char *
box_libvirt_op_file (BoxLibvirtOp *op, const char *file)
{
  return box_libvirt_vm_path (op->self->config.vm_dir, op->vm->vm_id, file);
}

gboolean
box_libvirt_op_attach_network (BoxLibvirtOp *op, GError **error)
{
  BoxNetwork *network = box_libvirt_get_network (op->self);
  g_autoptr(GError) local_error = NULL;

  if (network == NULL || !op->vm->nic)
    return TRUE;
  op->net = box_network_attach (network, op->id, &local_error);
  if (op->net == NULL) {
    *error = box_error_convert (local_error, "network");
    return FALSE;
  }
  return TRUE;
}

void
box_libvirt_detach_network (BoxLibvirtPlugin *self, const char *id)
{
  BoxNetwork *network = box_libvirt_get_network (self);
  g_autoptr(GError) error = NULL;

  if (network != NULL && !box_network_detach (network, id, &error))
    g_warning ("libvirt: detaching sandbox %s from the network: %s", id, error->message);
}

static void
save_vm (BoxLibvirtOp *op)
{
  box_libvirt_save_vm (op->self, op->vm);
}

/* The VM has no QEMU any more. */
static void
vm_ended (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  box_libvirt_set_agent (self, vm, NULL);
  vm->standby = FALSE;
  if (vm->cold_source != 0) {
    g_source_remove (vm->cold_source);
    vm->cold_source = 0;
  }
  box_libvirt_detach_network (self, vm->id);
}

void
box_libvirt_vm_ended (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  vm_ended (self, vm);
}

/* ---- blocking parts ---- */

gboolean
box_libvirt_resume_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  virDomainPtr dom;
  gboolean ok = TRUE;

  if (conn == NULL)
    return FALSE;
  dom = box_libvirt_domain_lookup (conn, op->domain);
  virConnectClose (conn);
  if (dom == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE, "the VM of %s is gone",
                 op->id);
    return FALSE;
  }
  if (op->set_owner) {
    /* a pool domain becomes the sandbox's, before its state file exists */
    BoxLibvirtOwner owner = { .role = "sandbox", .state_dir = self->state_dir,
                              .vm_dir = self->config.vm_dir, .sandbox = op->id };
    ok = box_libvirt_domain_set_owner (dom, &owner, error);
  }
  if (ok && op->resize &&
      virDomainBlockResize (dom, "vda", (unsigned long long) op->resources.disk_gib << 30,
                            VIR_DOMAIN_BLOCK_RESIZE_BYTES) < 0)
    ok = box_libvirt_set_error (error, "cannot grow the disk");
  if (ok && virDomainResume (dom) < 0)
    ok = box_libvirt_set_error (error, "cannot resume the VM");
  virDomainFree (dom);
  return ok;
}

static gboolean
suspend_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  virDomainPtr dom;
  gboolean ok;

  if (conn == NULL)
    return FALSE;
  dom = box_libvirt_domain_lookup (conn, op->domain);
  virConnectClose (conn);
  if (dom == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE, "the VM of %s is gone",
                 op->id);
    return FALSE;
  }
  ok = virDomainSuspend (dom) == 0 || box_libvirt_set_error (error, "cannot pause the VM");
  virDomainFree (dom);
  return ok;
}

static gboolean
pause_domain (virDomainPtr dom, GError **error)
{
  int state = VIR_DOMAIN_NOSTATE;

  if (virDomainGetState (dom, &state, NULL, 0) < 0)
    return box_libvirt_set_error (error, "cannot read the VM's state");
  if (state == VIR_DOMAIN_PAUSED)
    return TRUE;
  return virDomainSuspend (dom) == 0 || box_libvirt_set_error (error, "cannot pause the VM");
}

static gboolean
cold_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;
  g_autofree char *tmp = box_libvirt_op_file (op, "cold.mig.tmp");
  g_autofree char *path = box_libvirt_op_file (op, "cold.mig");
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  virDomainPtr dom;
  gboolean ok;

  if (conn == NULL)
    return FALSE;
  dom = box_libvirt_domain_lookup (conn, op->domain);
  if (dom == NULL) {
    virConnectClose (conn);
    g_set_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE, "the VM of %s is gone",
                 op->id);
    return FALSE;
  }
  /* it ran for a moment to sync its disks */
  ok = pause_domain (dom, error) && box_libvirt_migrate_save (dom, tmp, FALSE, error);
  virDomainFree (dom);
  if (ok && g_rename (tmp, path) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot keep %s: %s", path,
                 g_strerror (saved_errno));
    ok = FALSE;
  }
  ok = ok && box_libvirt_domain_destroy (conn, op->domain, error);
  virConnectClose (conn);
  if (!ok)
    g_unlink (tmp);
  return ok;
}

static gboolean
start_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;

  return box_libvirt_start_domain_work (self, op, op->op == BOX_VM_OP_BOOT, error);
}

static gboolean
stop_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;
  g_autofree char *cold = box_libvirt_op_file (op, "cold.mig");
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  gboolean ok;

  if (conn == NULL)
    return FALSE;
  /* after the agent's poweroff the guest ends on its own */
  if (op->graceful &&
      box_libvirt_domain_wait_gone (conn, op->domain, BOX_LIBVIRT_POWEROFF_WAIT_MS))
    ok = TRUE;
  else
    ok = box_libvirt_domain_destroy (conn, op->domain, error);
  virConnectClose (conn);
  g_unlink (cold);
  box_libvirt_vm_drop_ram_state (op, FALSE);
  return ok;
}

gboolean
box_libvirt_destroy_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;
  g_autofree char *dir = box_libvirt_op_file (op, NULL);
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  gboolean ok;

  if (conn == NULL)
    return FALSE;
  ok = box_libvirt_domain_destroy (conn, op->domain, error);
  virConnectClose (conn);
  return ok && box_libvirt_remove_tree (dir, error) &&
         box_libvirt_checkpoints_remove_all (self, op->id, error);
}

/* ---- suspend and the cold tier ---- */


static void
suspend_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  GError *error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    box_libvirt_op_return (task, error);
    return;
  }
  op->vm->state = BOX_VM_STATE_SUSPENDED;
  op->vm->cold = FALSE;
  op->vm->snapshot_at = g_get_real_time ();
  op->vm->paused_at = g_get_monotonic_time ();
  save_vm (op);
  if (op->self->config.hot_pause_s == 0) {
    box_libvirt_cold_start (task);
    return;
  }
  box_libvirt_schedule_cold (op->self, op->vm, op->self->config.hot_pause_s);
  box_libvirt_op_return (task, NULL);
}

static void
suspend_synced (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(BoxAgent) agent = NULL;
  g_autoptr(GError) error = NULL;

  agent = box_libvirt_guest_setup_finish (result, &error);
  if (agent == NULL)
    g_message ("libvirt: pausing %s while its agent does not answer: %s", op->id,
               error->message);
  box_libvirt_run_in_thread (op->self, suspend_work, op, NULL, NULL, suspend_done, task);
}

void
box_libvirt_suspend_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  BoxLibvirtGuestSetup setup = {
    .agent = op->vm->agent,
    /* the env is never in a snapshot.  No sync: a guest flush costs a host
     * fsync (100+ ms on a busy disk); the disk is synced when the pause
     * turns cold or the VM is stopped, both of which let the guest run for
     * a moment first. */
    .steps = BOX_LIBVIRT_GUEST_ENV_HOLD,
    .timeout_s = BOX_LIBVIRT_PAUSE_SYNC_S,
  };

  if (op->vm->state == BOX_VM_STATE_SUSPENDED) {
    box_libvirt_op_return (task, NULL);
    return;
  }
  if (op->vm->state != BOX_VM_STATE_RUNNING) {
    box_libvirt_op_fail (task, BOX_ERROR_CONFLICT, "the VM of sandbox %s is not running", op->id);
    return;
  }
  if (op->vm->agent == NULL || box_agent_is_closed (op->vm->agent)) {
    box_libvirt_run_in_thread (op->self, suspend_work, op, NULL, NULL, suspend_done, task);
    return;
  }
  setup.context = box_plugin_get_context (BOX_PLUGIN (op->self));
  box_libvirt_guest_setup_async (&setup, NULL, suspend_synced, task);
}

static void
cold_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  GError *error = NULL;

  op->self->cold_running--;
  if (!box_libvirt_run_finish (result, &error)) {
    op->vm->expect_stop = FALSE;
    g_warning ("libvirt: cannot turn the pause of %s into a cold snapshot: %s", op->id,
               error->message);
    box_libvirt_op_return (task, error);
    return;
  }
  op->vm->cold = TRUE;
  /* the guest ran a moment longer to sync: the snapshot is from now */
  op->vm->snapshot_at = g_get_real_time ();
  vm_ended (op->self, op->vm);
  save_vm (op);
  g_message ("libvirt: sandbox %s: cold snapshot in %.0f ms, QEMU ended", op->id,
             (g_get_monotonic_time () - op->started) / 1e3);
  /* its wake's domain, started in advance (it waits for this lock) */
  box_libvirt_standby_want (op->self, op->vm);
  box_libvirt_op_return (task, NULL);
}

static void
cold_synced (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(GError) error = NULL;

  if (!box_libvirt_guest_call_finish (result, &error))
    g_message ("libvirt: sandbox %s goes cold without the guest's sync: %s", op->id,
               error->message);
  box_libvirt_run_in_thread (op->self, cold_work, op, NULL, NULL, cold_done, task);
}

static void
cold_resumed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(GError) error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    box_libvirt_run_in_thread (op->self, cold_work, op, NULL, NULL, cold_done, task);
    return;
  }
  box_libvirt_guest_call_async (op->vm->agent, "sync", BOX_LIBVIRT_PAUSE_SYNC_S, cold_synced,
                                task);
}

void
box_libvirt_cold_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  if (op->vm->state != BOX_VM_STATE_SUSPENDED || op->vm->cold) {
    box_libvirt_op_return (task, NULL);
    return;
  }
  /* A cold snapshot of a fork reads all its RAM (seconds of CPU under
   * TCG): one at a time in the background; a pause that waits for it
   * (hot_pause_s=0) goes ahead. */
  if (op->kind == BOX_LIBVIRT_JOB_COLD && op->self->cold_running > 0) {
    box_libvirt_schedule_cold (op->self, op->vm, 2);
    box_libvirt_op_return (task, NULL);
    return;
  }
  op->self->cold_running++;
  op->vm->expect_stop = TRUE;
  if (op->vm->agent == NULL || box_agent_is_closed (op->vm->agent)) {
    box_libvirt_run_in_thread (op->self, cold_work, op, NULL, NULL, cold_done, task);
    return;
  }
  /* the guest syncs its disks first, so that the disk alone (a stop of
   * the paused sandbox) has everything written before the pause */
  box_libvirt_run_in_thread (op->self, box_libvirt_resume_work, op, NULL, NULL, cold_resumed,
                             task);
}

/* ---- resume ---- */

static void
resume_guest_ready (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(BoxAgent) agent = NULL;
  g_autoptr(GError) error = NULL;

  agent = box_libvirt_guest_setup_finish (result, &error);
  if (agent == NULL) {
    box_libvirt_op_return (task, g_steal_pointer (&error));
    return;
  }
  box_libvirt_set_agent (op->self, op->vm, agent);
  op->vm->state = BOX_VM_STATE_RUNNING;
  op->vm->cold = FALSE;
  op->vm->snapshot_at = 0;
  save_vm (op);
  box_libvirt_op_return (task, NULL);
}

static void
resume_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autofree char *socket = box_libvirt_op_file (op, "agent.sock");
  GError *error = NULL;
  gboolean was_cold = op->vm->cold;
  gboolean boot = op->op == BOX_VM_OP_BOOT;
  BoxLibvirtGuestSetup setup = {
    .socket_path = socket,
    .steps = BOX_LIBVIRT_GUEST_TIME | BOX_LIBVIRT_GUEST_ENV,
    .hostname = op->vm->hostname,
    .net = op->net,
    .env = op->env,
    .timeout_s = boot ? op->self->config.boot_timeout_s : BOX_LIBVIRT_AGENT_TIMEOUT_S,
  };

  if (!box_libvirt_run_finish (result, &error)) {
    if (was_cold || boot) {
      op->vm->expect_stop = TRUE;   /* start_work removed what it started */
      box_libvirt_detach_network (op->self, op->id);
    }
    box_libvirt_op_return (task, error);
    return;
  }
  if (was_cold || boot) {
    op->vm->expect_stop = FALSE;
    if (op->net != NULL && !boot)
      setup.steps |= BOX_LIBVIRT_GUEST_NETWORK;
  } else if (op->vm->agent != NULL && !box_agent_is_closed (op->vm->agent)) {
    setup.agent = op->vm->agent;
  }
  if (op->vm->cold_source != 0) {
    g_source_remove (op->vm->cold_source);
    op->vm->cold_source = 0;
  }
  setup.context = box_plugin_get_context (BOX_PLUGIN (op->self));
  box_libvirt_guest_setup_async (&setup, NULL, resume_guest_ready, task);
}

static void
start_domain (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  GError *error = NULL;

  if (!box_libvirt_op_attach_network (op, &error)) {
    box_libvirt_op_return (task, error);
    return;
  }
  op->xml = box_libvirt_vm_xml (op, op->op == BOX_VM_OP_BOOT);
  /* the start uses it or ends it (box-libvirt-standby.c) */
  op->standby = op->vm->standby;
  op->vm->standby = FALSE;
  box_libvirt_run_in_thread (op->self, start_work, op, NULL, NULL, resume_done, task);
}

void
box_libvirt_boot_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  if (op->vm->state == BOX_VM_STATE_RUNNING) {
    box_libvirt_op_return (task, NULL);
    return;
  }
  if (op->vm->state != BOX_VM_STATE_SHUTOFF) {
    box_libvirt_op_fail (task, BOX_ERROR_CONFLICT, "the VM of sandbox %s is paused, not stopped",
                         op->id);
    return;
  }
  op->op = BOX_VM_OP_BOOT;
  op->vm->nic = box_libvirt_get_network (op->self) != NULL;
  op->vm->resources.cpus = op->resources.cpus;
  op->vm->resources.memory_mib = op->resources.memory_mib;
  start_domain (task);
}

void
box_libvirt_resume_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  switch (op->vm->state) {
  case BOX_VM_STATE_RUNNING:
    box_libvirt_op_return (task, NULL);
    return;
  case BOX_VM_STATE_SHUTOFF:
    /* the snapshot died with its QEMU (killed while hot): the disk is all
     * that is left */
    g_message ("libvirt: sandbox %s lost its memory snapshot; booting its disk", op->id);
    box_libvirt_boot_start (task);
    return;
  default:
    break;
  }
  if (op->vm->cold) {
    start_domain (task);
    return;
  }
  box_libvirt_run_in_thread (op->self, box_libvirt_resume_work, op, NULL, NULL, resume_done, task);
}

/* ---- shutdown ---- */

static void
shutdown_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  GError *error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    box_libvirt_op_return (task, error);
    return;
  }
  op->vm->state = BOX_VM_STATE_SHUTOFF;
  op->vm->cold = FALSE;
  op->vm->snapshot_at = 0;
  vm_ended (op->self, op->vm);
  save_vm (op);
  box_libvirt_op_return (task, NULL);
}

static void
shutdown_poweroff_sent (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(GError) error = NULL;

  /* the agent may power off before its answer gets out */
  if (!box_libvirt_guest_call_finish (result, &error))
    g_debug ("libvirt: poweroff of %s: %s", op->id, error->message);
  box_libvirt_run_in_thread (op->self, stop_work, op, NULL, NULL, shutdown_done, task);
}

static void
shutdown_resumed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(GError) error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    box_libvirt_run_in_thread (op->self, stop_work, op, NULL, NULL, shutdown_done, task);
    return;
  }
  op->graceful = TRUE;
  box_libvirt_guest_call_async (op->vm->agent, "poweroff", BOX_LIBVIRT_PAUSE_SYNC_S,
                                shutdown_poweroff_sent, task);
}

void
box_libvirt_shutdown_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  if (op->vm->state == BOX_VM_STATE_SHUTOFF) {
    box_libvirt_op_return (task, NULL);
    return;
  }
  op->vm->expect_stop = TRUE;
  if (op->vm->agent == NULL || box_agent_is_closed (op->vm->agent) ||
      (op->vm->state == BOX_VM_STATE_SUSPENDED && op->vm->cold)) {
    /* no guest to ask (a cold pause synced its disks before it went) */
    box_libvirt_run_in_thread (op->self, stop_work, op, NULL, NULL, shutdown_done, task);
    return;
  }
  if (op->vm->state == BOX_VM_STATE_SUSPENDED) {
    /* hot: it runs for a moment to power off cleanly */
    box_libvirt_run_in_thread (op->self, box_libvirt_resume_work, op, NULL, NULL,
                               shutdown_resumed, task);
    return;
  }
  op->graceful = TRUE;
  box_libvirt_guest_call_async (op->vm->agent, "poweroff", BOX_LIBVIRT_PAUSE_SYNC_S,
                                shutdown_poweroff_sent, task);
}

/* ---- destroy ---- */

static void
destroy_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  BoxLibvirtPlugin *self = op->self;
  GError *error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    box_libvirt_op_return (task, error);
    return;
  }
  vm_ended (self, op->vm);
  box_libvirt_vm_forget (op->id, box_plugin_get_state_dir (BOX_PLUGIN (self)));
  op->vm->gone = TRUE;
  g_hash_table_steal (self->vms, op->id);
  box_libvirt_op_return (task, NULL);
}

void
box_libvirt_destroy_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  op->vm->expect_stop = TRUE;
  box_libvirt_run_in_thread (op->self, box_libvirt_destroy_work, op, NULL, NULL, destroy_done,
                             task);
}

/* ---- a VM that died on its own ---- */

gboolean
box_libvirt_domain_gone_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  virDomainPtr dom;
  gboolean alive = FALSE;

  if (conn == NULL)
    return FALSE;
  dom = box_libvirt_domain_lookup (conn, op->domain);
  if (dom != NULL) {
    alive = virDomainIsActive (dom) == 1;
    virDomainFree (dom);
  }
  virConnectClose (conn);
  if (alive) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_CONFLICT, "the domain runs");
    return FALSE;
  }
  return TRUE;
}

static void
lost_checked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(GError) error = NULL;

  if (!box_libvirt_run_finish (result, &error) || op->vm->expect_stop) {
    box_libvirt_op_return (task, NULL);   /* a new QEMU runs already, or we ended it */
    return;
  }
  g_message ("libvirt: the VM of sandbox %s (%s) died; its disk is kept", op->id, op->domain);
  op->vm->snapshot_at = box_libvirt_vm_disk_time (op->vm, op->self->config.vm_dir);
  op->vm->state = BOX_VM_STATE_SHUTOFF;
  op->vm->cold = FALSE;
  vm_ended (op->self, op->vm);
  save_vm (op);
  box_hypervisor_emit_vm_lost (BOX_HYPERVISOR (op->self), op->id);
  box_libvirt_op_return (task, NULL);
}

void
box_libvirt_lost_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  gboolean has_qemu = op->vm->state == BOX_VM_STATE_RUNNING ||
                      (op->vm->state == BOX_VM_STATE_SUSPENDED && !op->vm->cold);

  if (op->vm->state == BOX_VM_STATE_SUSPENDED && op->vm->cold && op->vm->standby) {
    box_libvirt_standby_lost_start (task);   /* its standby, perhaps */
    return;
  }
  if (!has_qemu || op->vm->expect_stop) {
    box_libvirt_op_return (task, NULL);
    return;
  }
  box_libvirt_run_in_thread (op->self, box_libvirt_domain_gone_work, op, NULL, NULL,
                             lost_checked, task);
}

