/* box-libvirt-start.c: starting a sandbox VM's domain (worker threads).
 *
 * A boot starts the kernel on the VM's disk.  Anything else restores the
 * VM's saved state into a domain started paused with `-incoming defer`,
 * then resumes it.  The state is one of two kinds:
 *   cold.mig            a full migration stream, device state and RAM (a
 *                       cold pause, a memory checkpoint's `state`); loaded
 *                       into anonymous RAM: every page the guest had is read
 *   cold.dev + ram      a materialised memory checkpoint
 *                       (box-libvirt-materialise.c): `ram` is a hard link
 *                       of the checkpoint's RAM file, mapped privately
 *                       (share=off, copy-on-write) as a template fork maps
 *                       the template's, and cold.dev its device state, saved
 *                       with x-ignore-shared: only the devices are loaded
 * A fork or restore of a materialised checkpoint links both kinds (cold.mig
 * stays the VM's memory snapshot of record, what a lost QEMU goes back to);
 * the start takes cold.dev + ram when present and falls back to cold.mig
 * when that fails.  cold.dev is used once: it goes after any start, and
 * `ram` goes with it when the start did not map it (its QEMU's mapping
 * keeps the file otherwise; a later cold pause writes a full cold.mig).
 * A cold wake loads cold.mig into the domain started for it in advance
 * when there is one (box-libvirt-standby.c).
 */
#include "config.h"

#include <glib/gstdio.h>

#include "box-libvirt-op.h"

static char *
vm_xml (BoxLibvirtOp *op, gboolean boot, const char *ram_path)
{
  BoxLibvirtPlugin *self = op->self;
  BoxLibvirtDomainSpec spec = { 0 };
  BoxLibvirtOwner owner = { .role = "sandbox", .state_dir = self->state_dir,
                            .vm_dir = self->config.vm_dir, .sandbox = op->id };
  g_autofree char *disk = box_libvirt_op_file (op, "disk.qcow2");
  g_autofree char *socket = box_libvirt_op_file (op, "agent.sock");
  g_autofree char *console = box_libvirt_op_file (op, "console.log");
  g_autofree char *vm_dir = box_libvirt_op_file (op, NULL);
  g_autofree char *cmdline = box_libvirt_kernel_cmdline (op->vm->hostname, op->net);
  g_autofree char *cold = box_libvirt_op_file (op, "cold.mig");

  spec.name = op->domain;
  spec.owner = &owner;
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
  spec.ram_path = ram_path;
  spec.ram_shared = FALSE;
  /* the RAM block must be the size of the one in the snapshot it loads
   * (box-libvirt-ram.c); a boot gets today's */
  if (boot)
    spec.ram_kib = box_libvirt_ram_kib_for_boot (self->accel, spec.memory_mib);
  else if (ram_path != NULL)
    spec.ram_kib = box_libvirt_file_ram_kib (ram_path);
  else
    spec.ram_kib = box_libvirt_state_ram_kib (cold);
  if (op->net != NULL) {
    spec.nic = BOX_LIBVIRT_NIC_TAP;
    spec.tap = op->net->ifname;
    spec.mac = op->net->mac;
  }
  spec.uid = box_libvirt_vm_uid (self, vm_dir);
  spec.gid = self->config.qemu_gid;
  spec.tb_cache_mib = self->config.tb_cache_mib;
  spec.disk_cache = self->config.disk_cache;
  return box_libvirt_domain_xml (&spec);
}

/* The domain's XML for a boot (@boot) or a restore of cold.mig. */
char *
box_libvirt_vm_xml (BoxLibvirtOp *op, gboolean boot)
{
  return vm_xml (op, boot, NULL);
}

void
box_libvirt_vm_drop_ram_state (BoxLibvirtOp *op, gboolean keep_ram)
{
  g_autofree char *dev = box_libvirt_op_file (op, "cold.dev");
  g_autofree char *ram = box_libvirt_op_file (op, "ram");

  g_unlink (dev);
  if (!keep_ram)
    g_unlink (ram);
}

/* Starts the domain from cold.dev + ram; FALSE (logged) leaves no domain. */
static gboolean
start_from_ram (BoxLibvirtPlugin *self, virConnectPtr conn, BoxLibvirtOp *op)
{
  g_autofree char *dev = box_libvirt_op_file (op, "cold.dev");
  g_autofree char *ram = box_libvirt_op_file (op, "ram");
  g_autofree char *xml = NULL;
  g_autoptr(GError) error = NULL;
  virDomainPtr dom;
  gint64 t0 = g_get_monotonic_time (), t1;
  gboolean ok;

  if (!g_file_test (dev, G_FILE_TEST_IS_REGULAR) || !g_file_test (ram, G_FILE_TEST_IS_REGULAR))
    return FALSE;
  xml = vm_xml (op, FALSE, ram);
  dom = box_libvirt_domain_start (conn, xml, TRUE, op->vm->resources.memory_mib,
                                  self->config.tb_cache_mib, &error);
  t1 = g_get_monotonic_time ();
  ok = dom != NULL && box_libvirt_migrate_load (dom, dev, TRUE, &error) &&
       (op->ready_vm_id != NULL || virDomainResume (dom) == 0 ||
        box_libvirt_set_error (&error, "cannot resume the VM"));
  if (dom != NULL)
    virDomainFree (dom);
  if (!ok) {
    g_warning ("libvirt: sandbox %s: a start from the materialised checkpoint failed, "
               "loading its full state instead: %s", op->id, error->message);
    box_libvirt_domain_destroy (conn, op->domain, NULL);
    return FALSE;
  }
  g_debug ("libvirt: sandbox %s: domain started in %.1f ms, device state loaded in %.1f ms "
           "(RAM mapped from the checkpoint)", op->id, (t1 - t0) / 1e3,
           (g_get_monotonic_time () - t1) / 1e3);
  return TRUE;
}

/* Starts the domain: a boot, or a restore of cold.dev + ram or cold.mig
 * (then resumed, but for a fork made ready in advance: op->ready_vm_id). */
gboolean
box_libvirt_start_domain_work (BoxLibvirtPlugin *self, BoxLibvirtOp *op, gboolean boot,
                               GError **error)
{
  g_autofree char *cold = box_libvirt_op_file (op, "cold.mig");
  g_autofree char *restore_xml = NULL;
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  virDomainPtr dom;
  gboolean ok;

  if (conn == NULL)
    return FALSE;
  /* a cold wake into the domain started for it (box-libvirt-standby.c) */
  if (!boot && op->vm != NULL && box_libvirt_standby_load (self, conn, op)) {
    virConnectClose (conn);
    box_libvirt_vm_drop_ram_state (op, FALSE);
    return TRUE;
  }
  /* whatever is left of an earlier QEMU of this VM, and of a disk
   * snapshot it did not finish (the new QEMU opens disk.qcow2) */
  box_libvirt_domain_destroy (conn, op->domain, NULL);
  if (op->vm != NULL && !box_libvirt_disk_snapshot_recover (self, op->vm, NULL, error)) {
    virConnectClose (conn);
    return FALSE;
  }
  if (!boot && start_from_ram (self, conn, op)) {
    virConnectClose (conn);
    box_libvirt_vm_drop_ram_state (op, TRUE);
    return TRUE;
  }
  /* a restore's XML once cold.mig is in place: its RAM block's size */
  if (!boot)
    restore_xml = box_libvirt_vm_xml (op, FALSE);
  dom = box_libvirt_domain_start (conn, boot ? op->xml : restore_xml, !boot,
                                  op->vm->resources.memory_mib,
                                  self->config.tb_cache_mib, error);
  ok = dom != NULL;
  if (ok && !boot) {
    ok = box_libvirt_migrate_load (dom, cold, FALSE, error) &&
         (op->ready_vm_id != NULL || virDomainResume (dom) == 0 ||
          box_libvirt_set_error (error, "cannot resume the VM"));
  }
  if (dom != NULL)
    virDomainFree (dom);
  if (!ok)
    box_libvirt_domain_destroy (conn, op->domain, NULL);
  virConnectClose (conn);
  if (ok) {
    box_libvirt_vm_drop_ram_state (op, FALSE);
    if (boot)
      g_unlink (cold);
  }
  return ok;
}
