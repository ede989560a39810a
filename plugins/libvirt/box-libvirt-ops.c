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
 *   resume   hot: the vCPUs run again; cold: a new domain restores cold.mig.
 *            Then the clock and the env (and the network after cold).
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

#include "box-libvirt-private.h"

#define BOX_LIBVIRT_AGENT_TIMEOUT_S    30
#define BOX_LIBVIRT_PAUSE_SYNC_S       5
#define BOX_LIBVIRT_POWEROFF_WAIT_MS   10000

typedef enum {
  JOB_ENGINE,                    /* an operation of the engine */
  JOB_COLD,                      /* a hot pause turns cold */
  JOB_LOST,                      /* the domain stopped on its own */
} JobKind;

typedef struct {
  BoxLibvirtPlugin *self;        /* a reference */
  JobKind           kind;
  BoxVmOp           op;
  char             *id;
  char             *hostname;
  BoxResources      resources;
  GHashTable       *env;
  BoxLibvirtVm     *vm;          /* borrowed: in self->vms, or new (create) */
  BoxLibvirtSlot   *slot;
  BoxNetAttachment *net;
  char             *domain;
  char             *xml;
  gboolean          resize;
  gboolean          locked;
  gint64            started;
} Op;

static void
op_free (Op *op)
{
  g_object_unref (op->self);
  g_free (op->id);
  g_free (op->hostname);
  g_clear_pointer (&op->env, g_hash_table_unref);
  g_clear_pointer (&op->slot, box_libvirt_slot_free);
  g_clear_pointer (&op->net, box_net_attachment_free);
  g_free (op->domain);
  g_free (op->xml);
  g_free (op);
}

static Op *
task_op (GTask *task)
{
  return g_task_get_task_data (task);
}

/* Ends @task (taking @error, or success) and releases the VM's lock. */
static void
op_return (GTask *task, GError *error)
{
  Op *op = task_op (task);

  if (error == NULL)
    g_debug ("libvirt: %s %s done in %.1f ms", box_vm_op_to_string (op->op), op->id,
             (g_get_monotonic_time () - op->started) / 1e3);
  if (op->locked) {
    op->locked = FALSE;
    box_libvirt_vm_unlock (op->self, op->vm);
  }
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

static char *
vm_file (Op *op, const char *file)
{
  return box_libvirt_vm_path (op->self->config.vm_dir, op->vm->vm_id, file);
}

/* The domain's XML for a boot (@boot) or a restore of cold.mig. */
static char *
vm_xml (Op *op, gboolean boot)
{
  BoxLibvirtPlugin *self = op->self;
  BoxLibvirtDomainSpec spec = { 0 };
  g_autofree char *disk = vm_file (op, "disk.qcow2");
  g_autofree char *socket = vm_file (op, "agent.sock");
  g_autofree char *console = vm_file (op, "console.log");
  g_autofree char *cmdline = box_libvirt_kernel_cmdline (op->vm->hostname, op->net);

  spec.name = op->domain;
  spec.accel = self->accel;
  spec.cpus = op->vm->resources.cpus;
  spec.memory_mib = op->vm->resources.memory_mib;
  spec.kernel = self->image->kernel;
  spec.initrd = self->image->initrd;
  /* a restore ignores it; the kernel in the snapshot had its own */
  spec.cmdline = boot ? cmdline : "console=ttyS0 panic=-1 quiet";
  spec.disk = disk;
  spec.agent_socket = socket;
  spec.console_log = console;
  spec.incoming = !boot;
  if (op->net != NULL) {
    spec.nic = BOX_LIBVIRT_NIC_TAP;
    spec.tap = op->net->ifname;
    spec.mac = op->net->mac;
  }
  spec.uid = self->config.qemu_uid;
  spec.gid = self->config.qemu_gid;
  spec.tb_cache_mib = self->config.tb_cache_mib;
  return box_libvirt_domain_xml (&spec);
}

static gboolean
attach_network (Op *op, GError **error)
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

static void
detach_network (BoxLibvirtPlugin *self, const char *id)
{
  BoxNetwork *network = box_libvirt_get_network (self);
  g_autoptr(GError) error = NULL;

  if (network != NULL && !box_network_detach (network, id, &error))
    g_warning ("libvirt: detaching sandbox %s from the network: %s", id, error->message);
}

static void
save_vm (Op *op)
{
  box_libvirt_save_vm (op->self, op->vm);
}

/* The VM has no QEMU any more. */
static void
vm_ended (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  box_libvirt_set_agent (self, vm, NULL);
  if (vm->cold_source != 0) {
    g_source_remove (vm->cold_source);
    vm->cold_source = 0;
  }
  detach_network (self, vm->id);
}

/* ---- blocking parts ---- */

static gboolean
resume_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Op *op = data;
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
  if (op->resize &&
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
  Op *op = data;
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
cold_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Op *op = data;
  g_autofree char *tmp = vm_file (op, "cold.mig.tmp");
  g_autofree char *path = vm_file (op, "cold.mig");
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
  ok = box_libvirt_migrate_save (dom, tmp, FALSE, error);
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

/* Starts the domain: a boot, or a restore of cold.mig (then resumed). */
static gboolean
start_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Op *op = data;
  g_autofree char *cold = vm_file (op, "cold.mig");
  gboolean boot = op->op == BOX_VM_OP_BOOT;
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  virDomainPtr dom;
  gboolean ok;

  if (conn == NULL)
    return FALSE;
  /* whatever is left of an earlier QEMU of this VM */
  box_libvirt_domain_destroy (conn, op->domain, NULL);
  dom = box_libvirt_domain_start (conn, op->xml, !boot, op->vm->resources.memory_mib,
                                  self->config.tb_cache_mib, error);
  ok = dom != NULL;
  if (ok && !boot) {
    ok = box_libvirt_migrate_load (dom, cold, FALSE, error) &&
         (virDomainResume (dom) == 0 || box_libvirt_set_error (error, "cannot resume the VM"));
  }
  if (dom != NULL)
    virDomainFree (dom);
  if (!ok)
    box_libvirt_domain_destroy (conn, op->domain, NULL);
  virConnectClose (conn);
  if (ok && boot)
    g_unlink (cold);
  return ok;
}

static gboolean
stop_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Op *op = data;
  g_autofree char *cold = vm_file (op, "cold.mig");
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  gboolean ok;

  if (conn == NULL)
    return FALSE;
  /* after the agent's poweroff the guest ends on its own */
  if (op->vm->state == BOX_VM_STATE_RUNNING &&
      box_libvirt_domain_wait_gone (conn, op->domain, BOX_LIBVIRT_POWEROFF_WAIT_MS))
    ok = TRUE;
  else
    ok = box_libvirt_domain_destroy (conn, op->domain, error);
  virConnectClose (conn);
  g_unlink (cold);
  return ok;
}

static gboolean
destroy_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Op *op = data;
  g_autofree char *dir = vm_file (op, NULL);
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  gboolean ok;

  if (conn == NULL)
    return FALSE;
  ok = box_libvirt_domain_destroy (conn, op->domain, error);
  virConnectClose (conn);
  return ok && box_libvirt_remove_tree (dir, error);
}

/* ---- create ---- */

static void
create_fail (GTask *task, GError *error);

static gboolean
create_cleanup_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  return destroy_work (self, data, error);
}

static void
create_cleaned (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  GError *error = g_object_steal_data (G_OBJECT (task), "box-create-error");
  g_autoptr(GError) cleanup_error = NULL;

  if (!box_libvirt_run_finish (result, &cleanup_error))
    g_warning ("libvirt: cleaning up after a failed create of %s: %s", op->id,
               cleanup_error->message);
  detach_network (op->self, op->id);
  if (op->slot != NULL)
    box_libvirt_template_slot_claimed (op->self, op->slot);
  box_libvirt_vm_free (g_steal_pointer (&op->vm));
  op_return (task, error);
}

/* After the slot was taken: remove its domain and files, then fail. */
static void
create_fail (GTask *task, GError *error)
{
  Op *op = task_op (task);

  g_object_set_data_full (G_OBJECT (task), "box-create-error", error,
                          (GDestroyNotify) g_error_free);
  box_libvirt_run_in_thread (op->self, create_cleanup_work, op, NULL, NULL, create_cleaned, task);
}

static void
create_guest_ready (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  BoxLibvirtPlugin *self = op->self;
  g_autoptr(BoxAgentClient) agent = NULL;
  g_autoptr(GError) error = NULL;

  agent = box_libvirt_guest_setup_finish (result, &error);
  if (agent == NULL) {
    create_fail (task, g_steal_pointer (&error));
    return;
  }
  op->vm->state = BOX_VM_STATE_RUNNING;
  if (!box_libvirt_vm_save (op->vm, box_plugin_get_state_dir (BOX_PLUGIN (self)), &error)) {
    create_fail (task, g_steal_pointer (&error));
    return;
  }
  box_libvirt_template_slot_claimed (self, op->slot);
  g_hash_table_insert (self->vms, op->vm->id, op->vm);
  box_libvirt_set_agent (self, op->vm, agent);
  g_message ("libvirt: sandbox %s running (VM %s, fork of %s) in %.0f ms", op->id,
             op->vm->vm_id, op->vm->template_key,
             (g_get_monotonic_time () - op->started) / 1e3);
  op_return (task, NULL);
}

static void
create_resumed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  g_autofree char *socket = vm_file (op, "agent.sock");
  GError *error = NULL;
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

  if (!box_libvirt_run_finish (result, &error)) {
    create_fail (task, error);
    return;
  }
  g_debug ("libvirt: create %s: resumed after %.1f ms", op->id,
           (g_get_monotonic_time () - op->started) / 1e3);
  if (op->net != NULL)
    setup.steps |= BOX_LIBVIRT_GUEST_NETWORK;
  if (op->resize)
    setup.steps |= BOX_LIBVIRT_GUEST_GROW_FS;
  box_libvirt_guest_setup_async (&setup, NULL, create_guest_ready, task);
}

static void
create_slot_taken (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  BoxLibvirtPlugin *self = op->self;
  BoxNetwork *network = box_libvirt_get_network (self);
  g_autoptr(GError) error = NULL;

  op->slot = box_libvirt_template_take_slot_finish (result, &error);
  g_debug ("libvirt: create %s: slot after %.1f ms", op->id,
           (g_get_monotonic_time () - op->started) / 1e3);
  if (op->slot == NULL) {
    box_libvirt_vm_free (g_steal_pointer (&op->vm));
    op_return (task, g_steal_pointer (&error));
    return;
  }
  if (!self->started || g_hash_table_contains (self->vms, op->id)) {
    box_libvirt_template_slot_discard (self, op->slot);
    box_libvirt_vm_free (g_steal_pointer (&op->vm));
    op_return (task, g_error_new (BOX_ERROR, !self->started ? BOX_ERROR_SANDBOX_UNAVAILABLE :
                                  BOX_ERROR_ALREADY_EXISTS,
                                  !self->started ? "the hypervisor is stopping" :
                                  "a VM for sandbox %s exists", op->id));
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
      op_return (task, converted);
      return;
    }
    op->net = g_steal_pointer (&op->slot->net);
    g_clear_pointer (&op->slot->net_id, g_free);
  }
  op->resize = (guint64) op->resources.disk_gib << 30 > op->slot->disk_bytes;
  box_libvirt_run_in_thread (self, resume_work, op, NULL, NULL, create_resumed, task);
}

static void
create_start (GTask *task)
{
  Op *op = task_op (task);
  BoxLibvirtPlugin *self = op->self;
  BoxLibvirtTemplate *tmpl;

  if ((guint64) op->resources.disk_gib << 30 < self->image->rootfs_bytes) {
    op_return (task, g_error_new (BOX_ERROR, BOX_ERROR_INVALID,
                                  "the base template needs a disk of at least %" G_GUINT64_FORMAT
                                  " GiB", (self->image->rootfs_bytes + (1 << 30) - 1) >> 30));
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

/* ---- suspend and the cold tier ---- */

static void cold_start (GTask *task);
static void schedule_cold (BoxLibvirtPlugin *self, BoxLibvirtVm *vm);

static void
suspend_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  GError *error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    op_return (task, error);
    return;
  }
  op->vm->state = BOX_VM_STATE_SUSPENDED;
  op->vm->cold = FALSE;
  op->vm->snapshot_at = g_get_real_time ();
  op->vm->paused_at = g_get_monotonic_time ();
  save_vm (op);
  if (op->self->config.hot_pause_s == 0) {
    cold_start (task);
    return;
  }
  schedule_cold (op->self, op->vm);
  op_return (task, NULL);
}

static void
suspend_synced (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  g_autoptr(BoxAgentClient) agent = NULL;
  g_autoptr(GError) error = NULL;

  agent = box_libvirt_guest_setup_finish (result, &error);
  if (agent == NULL)
    g_message ("libvirt: pausing %s without the guest's sync: %s", op->id, error->message);
  box_libvirt_run_in_thread (op->self, suspend_work, op, NULL, NULL, suspend_done, task);
}

static void
suspend_start (GTask *task)
{
  Op *op = task_op (task);
  BoxLibvirtGuestSetup setup = {
    .agent = op->vm->agent,
    /* disks consistent at the snapshot; the env never in one */
    .steps = BOX_LIBVIRT_GUEST_SYNC | BOX_LIBVIRT_GUEST_ENV,
    .env = NULL,
    .timeout_s = BOX_LIBVIRT_PAUSE_SYNC_S,
  };

  if (op->vm->state == BOX_VM_STATE_SUSPENDED) {
    op_return (task, NULL);
    return;
  }
  if (op->vm->state != BOX_VM_STATE_RUNNING) {
    op_return (task, g_error_new (BOX_ERROR, BOX_ERROR_CONFLICT,
                                  "the VM of sandbox %s is not running", op->id));
    return;
  }
  if (op->vm->agent == NULL || box_agent_client_is_closed (op->vm->agent)) {
    box_libvirt_run_in_thread (op->self, suspend_work, op, NULL, NULL, suspend_done, task);
    return;
  }
  box_libvirt_guest_setup_async (&setup, NULL, suspend_synced, task);
}

static void
cold_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  GError *error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    op->vm->expect_stop = FALSE;
    g_warning ("libvirt: cannot turn the pause of %s into a cold snapshot: %s", op->id,
               error->message);
    op_return (task, error);
    return;
  }
  op->vm->cold = TRUE;
  vm_ended (op->self, op->vm);
  save_vm (op);
  g_message ("libvirt: sandbox %s: cold snapshot in %.0f ms, QEMU ended", op->id,
             (g_get_monotonic_time () - op->started) / 1e3);
  op_return (task, NULL);
}

static void
cold_start (GTask *task)
{
  Op *op = task_op (task);

  if (op->vm->state != BOX_VM_STATE_SUSPENDED || op->vm->cold) {
    op_return (task, NULL);
    return;
  }
  op->vm->expect_stop = TRUE;
  box_libvirt_run_in_thread (op->self, cold_work, op, NULL, NULL, cold_done, task);
}

/* ---- resume ---- */

static void
resume_guest_ready (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  g_autoptr(BoxAgentClient) agent = NULL;
  g_autoptr(GError) error = NULL;

  agent = box_libvirt_guest_setup_finish (result, &error);
  if (agent == NULL) {
    op_return (task, g_steal_pointer (&error));
    return;
  }
  box_libvirt_set_agent (op->self, op->vm, agent);
  op->vm->state = BOX_VM_STATE_RUNNING;
  op->vm->cold = FALSE;
  op->vm->snapshot_at = 0;
  save_vm (op);
  op_return (task, NULL);
}

static void
resume_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  g_autofree char *socket = vm_file (op, "agent.sock");
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
      detach_network (op->self, op->id);
    }
    op_return (task, error);
    return;
  }
  if (was_cold || boot) {
    op->vm->expect_stop = FALSE;
    if (op->net != NULL && !boot)
      setup.steps |= BOX_LIBVIRT_GUEST_NETWORK;
  } else if (op->vm->agent != NULL && !box_agent_client_is_closed (op->vm->agent)) {
    setup.agent = op->vm->agent;
  }
  if (op->vm->cold_source != 0) {
    g_source_remove (op->vm->cold_source);
    op->vm->cold_source = 0;
  }
  box_libvirt_guest_setup_async (&setup, NULL, resume_guest_ready, task);
}

static void
start_domain (GTask *task)
{
  Op *op = task_op (task);
  GError *error = NULL;

  if (!attach_network (op, &error)) {
    op_return (task, error);
    return;
  }
  op->xml = vm_xml (op, op->op == BOX_VM_OP_BOOT);
  box_libvirt_run_in_thread (op->self, start_work, op, NULL, NULL, resume_done, task);
}

static void
boot_start (GTask *task)
{
  Op *op = task_op (task);

  if (op->vm->state == BOX_VM_STATE_RUNNING) {
    op_return (task, NULL);
    return;
  }
  if (op->vm->state != BOX_VM_STATE_SHUTOFF) {
    op_return (task, g_error_new (BOX_ERROR, BOX_ERROR_CONFLICT,
                                  "the VM of sandbox %s is paused, not stopped", op->id));
    return;
  }
  op->op = BOX_VM_OP_BOOT;
  op->vm->nic = box_libvirt_get_network (op->self) != NULL;
  op->vm->resources.cpus = op->resources.cpus;
  op->vm->resources.memory_mib = op->resources.memory_mib;
  start_domain (task);
}

static void
resume_start (GTask *task)
{
  Op *op = task_op (task);

  switch (op->vm->state) {
  case BOX_VM_STATE_RUNNING:
    op_return (task, NULL);
    return;
  case BOX_VM_STATE_SHUTOFF:
    /* the snapshot died with its QEMU (killed while hot): the disk is all
     * that is left */
    g_message ("libvirt: sandbox %s lost its memory snapshot; booting its disk", op->id);
    boot_start (task);
    return;
  default:
    break;
  }
  if (op->vm->cold) {
    start_domain (task);
    return;
  }
  box_libvirt_run_in_thread (op->self, resume_work, op, NULL, NULL, resume_done, task);
}

/* ---- shutdown ---- */

static void
shutdown_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  GError *error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    op_return (task, error);
    return;
  }
  op->vm->state = BOX_VM_STATE_SHUTOFF;
  op->vm->cold = FALSE;
  op->vm->snapshot_at = 0;
  vm_ended (op->self, op->vm);
  save_vm (op);
  op_return (task, NULL);
}

static void
shutdown_poweroff_sent (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  g_autoptr(GError) error = NULL;

  /* the agent may power off before its answer gets out */
  if (!box_libvirt_guest_call_finish (result, &error))
    g_debug ("libvirt: poweroff of %s: %s", op->id, error->message);
  box_libvirt_run_in_thread (op->self, stop_work, op, NULL, NULL, shutdown_done, task);
}

static void
shutdown_start (GTask *task)
{
  Op *op = task_op (task);

  if (op->vm->state == BOX_VM_STATE_SHUTOFF) {
    op_return (task, NULL);
    return;
  }
  op->vm->expect_stop = TRUE;
  if (op->vm->state == BOX_VM_STATE_RUNNING && op->vm->agent != NULL &&
      !box_agent_client_is_closed (op->vm->agent)) {
    box_libvirt_guest_call_async (op->vm->agent, "poweroff", BOX_LIBVIRT_PAUSE_SYNC_S,
                                  shutdown_poweroff_sent, task);
    return;
  }
  /* paused: the guest synced its disks when it was paused */
  box_libvirt_run_in_thread (op->self, stop_work, op, NULL, NULL, shutdown_done, task);
}

/* ---- destroy ---- */

static void
destroy_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);
  BoxLibvirtPlugin *self = op->self;
  GError *error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    op_return (task, error);
    return;
  }
  vm_ended (self, op->vm);
  box_libvirt_vm_forget (op->id, box_plugin_get_state_dir (BOX_PLUGIN (self)));
  op->vm->gone = TRUE;
  g_hash_table_steal (self->vms, op->id);
  op_return (task, NULL);
}

static void
destroy_start (GTask *task)
{
  Op *op = task_op (task);

  op->vm->expect_stop = TRUE;
  box_libvirt_run_in_thread (op->self, destroy_work, op, NULL, NULL, destroy_done, task);
}

/* ---- a VM that died on its own ---- */

static gboolean
lost_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Op *op = data;
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
  Op *op = task_op (task);
  g_autoptr(GError) error = NULL;

  if (!box_libvirt_run_finish (result, &error) || op->vm->expect_stop) {
    op_return (task, NULL);   /* a new QEMU runs already, or we ended it */
    return;
  }
  g_message ("libvirt: the VM of sandbox %s (%s) died; its disk is kept", op->id, op->domain);
  op->vm->state = BOX_VM_STATE_SHUTOFF;
  op->vm->cold = FALSE;
  op->vm->snapshot_at = 0;
  vm_ended (op->self, op->vm);
  save_vm (op);
  box_hypervisor_emit_vm_lost (BOX_HYPERVISOR (op->self), op->id);
  op_return (task, NULL);
}

static void
lost_start (GTask *task)
{
  Op *op = task_op (task);
  gboolean has_qemu = op->vm->state == BOX_VM_STATE_RUNNING ||
                      (op->vm->state == BOX_VM_STATE_SUSPENDED && !op->vm->cold);

  if (!has_qemu || op->vm->expect_stop) {
    op_return (task, NULL);
    return;
  }
  box_libvirt_run_in_thread (op->self, lost_work, op, NULL, NULL, lost_checked, task);
}

/* ---- dispatch ---- */

static void
op_locked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = task_op (task);

  op->locked = TRUE;
  op->started = g_get_monotonic_time ();
  if (op->vm->gone) {
    op_return (task, op->op == BOX_VM_OP_DESTROY && op->kind == JOB_ENGINE ? NULL :
               g_error_new (BOX_ERROR, BOX_ERROR_NOT_FOUND, "no VM for sandbox %s", op->id));
    return;
  }
  switch (op->kind) {
  case JOB_COLD:
    cold_start (task);
    return;
  case JOB_LOST:
    lost_start (task);
    return;
  case JOB_ENGINE:
  default:
    break;
  }
  switch (op->op) {
  case BOX_VM_OP_SUSPEND:
    suspend_start (task);
    break;
  case BOX_VM_OP_RESUME:
    resume_start (task);
    break;
  case BOX_VM_OP_SHUTDOWN:
    shutdown_start (task);
    break;
  case BOX_VM_OP_BOOT:
    boot_start (task);
    break;
  case BOX_VM_OP_DESTROY:
    destroy_start (task);
    break;
  default:
    op_return (task, g_error_new (BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                                  "the libvirt hypervisor cannot %s yet",
                                  box_vm_op_to_string (op->op)));
    break;
  }
}

static Op *
op_new (BoxLibvirtPlugin *self, JobKind kind, BoxVmOp vm_op, const char *id)
{
  Op *op = g_new0 (Op, 1);

  op->self = g_object_ref (self);
  op->kind = kind;
  op->op = vm_op;
  op->id = g_strdup (id);
  op->started = g_get_monotonic_time ();
  return op;
}

/* An internal job on @vm, with nobody waiting for its result. */
static void
run_job (BoxLibvirtPlugin *self, BoxLibvirtVm *vm, JobKind kind)
{
  Op *op = op_new (self, kind, BOX_VM_OP_LAST, vm->id);
  GTask *task = g_task_new (self, NULL, NULL, NULL);

  g_task_set_source_tag (task, run_job);
  g_task_set_task_data (task, op, (GDestroyNotify) op_free);
  op->vm = vm;
  op->domain = box_libvirt_vm_domain_name (vm->vm_id);
  op->resources = vm->resources;
  box_libvirt_vm_lock_async (self, vm, op_locked, task);
}

void
box_libvirt_vm_make_cold (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  run_job (self, vm, JOB_COLD);
}

void
box_libvirt_vm_stopped (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  run_job (self, vm, JOB_LOST);
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
    box_libvirt_vm_make_cold (timer->self, vm);
  }
  return G_SOURCE_REMOVE;
}

/* After hot_pause_s, a hot pause turns cold.  The timer goes with the VM
 * (box_libvirt_vm_free), so it may point at the plugin unreferenced. */
static void
schedule_cold (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  ColdTimer *timer = g_new0 (ColdTimer, 1);

  timer->self = self;
  timer->id = g_strdup (vm->id);
  if (vm->cold_source != 0)
    g_source_remove (vm->cold_source);
  vm->cold_source = g_timeout_add_seconds_full (G_PRIORITY_DEFAULT, self->config.hot_pause_s,
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
  Op *op;

  g_task_set_source_tag (task, box_libvirt_op_async);
  if (request == NULL || !box_libvirt_id_is_valid (request->sandbox_id)) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID, "bad sandbox ID \"%s\"",
                             request != NULL && request->sandbox_id != NULL ?
                             request->sandbox_id : "");
    g_object_unref (task);
    return;
  }
  /* the request is only valid during this call */
  op = op_new (self, JOB_ENGINE, vm_op, request->sandbox_id);
  g_task_set_task_data (task, op, (GDestroyNotify) op_free);
  op->hostname = g_strdup (request->hostname != NULL ? request->hostname : "");
  op->env = copy_env (request->env);
  op->resources.cpus = request->resources.cpus != 0 ? request->resources.cpus : defaults->cpus;
  op->resources.memory_mib = request->resources.memory_mib != 0 ?
                             request->resources.memory_mib : defaults->memory_mib;
  op->resources.disk_gib = request->resources.disk_gib != 0 ?
                           request->resources.disk_gib : defaults->disk_gib;

  if (!self->started) {
    op_return (task, g_error_new (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                                  "the libvirt hypervisor is not running"));
    return;
  }
  vm = box_libvirt_lookup_vm (self, op->id);
  switch (vm_op) {
  case BOX_VM_OP_CREATE:
    if (vm != NULL) {
      op_return (task, g_error_new (BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                                    "a VM for sandbox %s exists", op->id));
    } else if (request->image != NULL && request->image[0] != '\0') {
      op_return (task, g_error_new_literal (BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                                            "the libvirt hypervisor cannot run images yet"));
    } else if (request->from_sandbox_id != NULL) {
      op_return (task, g_error_new_literal (BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                                            "the libvirt hypervisor cannot fork from "
                                            "checkpoints yet"));
    } else if (request->template_name != NULL && request->template_name[0] != '\0' &&
               g_strcmp0 (request->template_name, "base") != 0) {
      op_return (task, g_error_new (BOX_ERROR, BOX_ERROR_INVALID, "no template \"%s\"",
                                    request->template_name));
    } else {
      create_start (task);
    }
    return;
  case BOX_VM_OP_CHECKPOINT:
  case BOX_VM_OP_RESTORE:
    op_return (task, g_error_new (BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                                  "the libvirt hypervisor cannot %s yet",
                                  box_vm_op_to_string (vm_op)));
    return;
  case BOX_VM_OP_DELETE_CHECKPOINT:
    op_return (task, NULL);   /* it keeps none */
    return;
  default:
    break;
  }
  if (vm == NULL) {
    if (vm_op == BOX_VM_OP_DESTROY) {
      detach_network (self, op->id);
      op_return (task, NULL);
    } else {
      op_return (task, g_error_new (BOX_ERROR, BOX_ERROR_NOT_FOUND, "no VM for sandbox %s",
                                    op->id));
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

/* ---- after a restart ---- */

void
box_libvirt_adopt (BoxLibvirtPlugin *self)
{
  const char *state_dir = box_plugin_get_state_dir (BOX_PLUGIN (self));
  g_autoptr(GDir) dir = NULL;
  g_autoptr(GError) error = NULL;
  virConnectPtr conn;
  const char *entry;

  if (state_dir == NULL)
    return;
  conn = box_libvirt_conn_get (self->conn, &error);
  if (conn == NULL) {
    g_warning ("libvirt: %s", error->message);
    return;
  }
  dir = g_dir_open (state_dir, 0, NULL);
  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *id = NULL;
    g_autofree char *path = NULL;
    g_autofree char *domain = NULL;
    g_autofree char *cold = NULL;
    g_autoptr(GError) vm_error = NULL;
    BoxLibvirtVm *vm;
    virDomainPtr dom;
    int state = VIR_DOMAIN_NOSTATE;
    int reason = 0;

    if (!g_str_has_suffix (entry, ".json"))
      continue;
    id = g_strndup (entry, strlen (entry) - strlen (".json"));
    if (!box_libvirt_id_is_valid (id))
      continue;
    path = g_build_filename (state_dir, entry, NULL);
    vm = box_libvirt_vm_load (id, path, &vm_error);
    if (vm == NULL) {
      g_warning ("libvirt: ignoring %s: %s", path, vm_error->message);
      continue;
    }
    g_hash_table_replace (self->vms, vm->id, vm);
    domain = box_libvirt_vm_domain_name (vm->vm_id);
    dom = box_libvirt_domain_lookup (conn, domain);
    if (dom != NULL && (virDomainIsActive (dom) != 1 ||
                        virDomainGetState (dom, &state, &reason, 0) < 0))
      state = VIR_DOMAIN_NOSTATE;
    if (dom != NULL)
      virDomainFree (dom);
    virResetLastError ();

    if (vm->state == BOX_VM_STATE_SUSPENDED && vm->cold) {
      cold = box_libvirt_vm_path (self->config.vm_dir, vm->vm_id, "cold.mig");
      if (!g_file_test (cold, G_FILE_TEST_IS_REGULAR)) {
        g_message ("libvirt: sandbox %s: its cold snapshot is gone; its disk is kept", id);
        vm->state = BOX_VM_STATE_SHUTOFF;
        vm->cold = FALSE;
        vm->snapshot_at = 0;
        box_libvirt_save_vm (self, vm);
      }
      continue;
    }
    if (vm->state == BOX_VM_STATE_SHUTOFF)
      continue;
    if (state == VIR_DOMAIN_RUNNING) {
      g_autofree char *socket = box_libvirt_vm_path (self->config.vm_dir, vm->vm_id,
                                                     "agent.sock");
      g_autoptr(BoxAgentClient) agent = box_libvirt_guest_connect_now (socket, &vm_error);

      if (vm->state != BOX_VM_STATE_RUNNING) {
        vm->state = BOX_VM_STATE_RUNNING;
        vm->snapshot_at = 0;
        box_libvirt_save_vm (self, vm);
      }
      if (agent == NULL)
        g_warning ("libvirt: sandbox %s: %s", id, vm_error->message);
      box_libvirt_set_agent (self, vm, agent);
      g_message ("libvirt: adopted the running VM %s of sandbox %s", domain, id);
    } else if (state == VIR_DOMAIN_PAUSED) {
      if (vm->state != BOX_VM_STATE_SUSPENDED) {
        /* boxd died between the pause and its record */
        vm->state = BOX_VM_STATE_SUSPENDED;
        vm->snapshot_at = g_get_real_time ();
        box_libvirt_save_vm (self, vm);
      }
      vm->paused_at = g_get_monotonic_time ();
      schedule_cold (self, vm);
      g_message ("libvirt: adopted the paused VM %s of sandbox %s", domain, id);
    } else {
      g_message ("libvirt: the VM %s of sandbox %s is gone; its disk is kept", domain, id);
      vm->state = BOX_VM_STATE_SHUTOFF;
      vm->snapshot_at = 0;
      box_libvirt_save_vm (self, vm);
      detach_network (self, id);
    }
  }
  virConnectClose (conn);
}
