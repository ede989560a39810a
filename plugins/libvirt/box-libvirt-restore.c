/* box-libvirt-restore.c: a restore of one of a sandbox's own checkpoints.
 *
 * Everything that can fail for want of room comes first, while the VM is
 * untouched: a new qcow2 overlay on the checkpoint's disk with the
 * checkpoint's layers linked under temporary names (box-libvirt-layers.c)
 * and, for memory, its state linked as cold.mig.tmp (and, materialised,
 * its RAM file and device state as ram.tmp and cold.dev.tmp: the cold
 * resume maps the RAM, box-libvirt-start.c).  Then the QEMU ends,
 * the temporaries are renamed into place and the VM becomes the
 * checkpoint: a cold pause of it (memory: resumed like a cold wake, clock,
 * env and network pushed) or a stopped disk (booted).  The checkpoint's
 * directory layout and crash safety are box-libvirt-checkpoint.c's.
 */
#include "config.h"

#include <glib/gstdio.h>

#include "box-libvirt-op.h"

typedef struct {
  BoxLibvirtOp             *op;
  BoxLibvirtCheckpointInfo  info;
  gboolean                  disk_swapped;   /* the VM's disk is the checkpoint's */
} Restore;

static gboolean
restore_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Restore *restore = data;
  BoxLibvirtOp *op = restore->op;
  g_autofree char *dir = box_libvirt_checkpoint_dir (self, op->id, op->checkpoint_id);
  g_autofree char *ckpt_disk = g_build_filename (dir, "disk.qcow2", NULL);
  g_autofree char *ckpt_state = g_build_filename (dir, "state", NULL);
  g_autofree char *vm_dir = box_libvirt_op_file (op, NULL);
  g_autofree char *disk = box_libvirt_op_file (op, "disk.qcow2");
  g_autofree char *disk_tmp = box_libvirt_op_file (op, "disk.qcow2.tmp");
  g_autofree char *cold = box_libvirt_op_file (op, "cold.mig");
  g_autofree char *cold_tmp = box_libvirt_op_file (op, "cold.mig.tmp");
  g_autofree char *ram_tmp = box_libvirt_op_file (op, "ram.tmp");
  g_autofree char *dev_tmp = box_libvirt_op_file (op, "cold.dev.tmp");
  guint height = box_libvirt_layer_height (ckpt_disk) + 1;
  virConnectPtr conn;
  gboolean ok, fast = FALSE;
  gint64 t0 = g_get_monotonic_time (), t1 = 0, t2 = 0;

  g_unlink (disk_tmp);
  g_unlink (cold_tmp);
  g_unlink (ram_tmp);
  g_unlink (dev_tmp);
  box_libvirt_layers_trim (vm_dir, BOX_LIBVIRT_LAYERS_MAX);
  /* everything that can fail for want of room first: the VM is untouched;
   * the checkpoint's disk and layers are linked under temporary names */
  ok = box_libvirt_check_disk_room (self, 0, error) &&
       box_libvirt_layers_overlay (ckpt_disk, vm_dir, disk_tmp, ".tmp", error) &&
       box_libvirt_give_to_qemu (self, disk_tmp, box_libvirt_vm_uid (self, vm_dir), error) &&
       (!op->memory || box_libvirt_link_file (ckpt_state, cold_tmp, error));
  /* materialised: its RAM file and device state too (without them, the
   * full state is loaded) */
  fast = ok && op->memory && op->ram && box_libvirt_link_ram_state (dir, vm_dir, ".tmp");
  if (ok) {
    box_libvirt_test_delay ("restore", op);
    t1 = g_get_monotonic_time ();
    conn = box_libvirt_conn_get (self->conn, error);
    ok = conn != NULL && box_libvirt_domain_destroy (conn, op->domain, error);
    if (conn != NULL)
      virConnectClose (conn);
  }
  if (!ok) {
    box_libvirt_note_disk_full (self, error);
    g_unlink (disk_tmp);
    g_unlink (cold_tmp);
    g_unlink (ram_tmp);
    g_unlink (dev_tmp);
    box_libvirt_layers_trim (vm_dir, BOX_LIBVIRT_LAYERS_MAX);
    return FALSE;
  }
  op->ended = TRUE;
  t2 = g_get_monotonic_time ();
  box_libvirt_test_delay ("restore-ended", op);
  /* the old QEMU is gone: the new layers replace the old ones, then the
   * disk; the grants follow what the directory links now */
  for (guint n = 1; n <= height; n++) {
    g_autofree char *name = g_strdup_printf ("layer-%u.qcow2", n);
    g_autofree char *layer = box_libvirt_op_file (op, name);
    g_autofree char *layer_tmp = g_strconcat (layer, ".tmp", NULL);

    if (!box_libvirt_rename_file (layer_tmp, layer, error))
      return FALSE;
  }
  box_libvirt_layers_trim (vm_dir, height);
  /* the old QEMU's RAM file and unused device state go; the new ones come */
  box_libvirt_vm_drop_ram_state (op, FALSE);
  if (fast) {
    g_autofree char *ram = box_libvirt_op_file (op, "ram");
    g_autofree char *dev = box_libvirt_op_file (op, "cold.dev");

    if (!box_libvirt_rename_file (ram_tmp, ram, error) ||
        !box_libvirt_rename_file (dev_tmp, dev, error))
      return FALSE;
  }
  if (!box_libvirt_rename_file (disk_tmp, disk, error))
    return FALSE;
  restore->disk_swapped = TRUE;
  if (!box_libvirt_layers_sync (self->config.vm_dir, self->config.qemu_uid, error))
    return FALSE;
  g_debug ("libvirt: sandbox %s: restore: files made in %.1f ms, QEMU ended in %.1f ms, files "
           "in place in %.1f ms", op->id, (t1 - t0) / 1e3, (t2 - t1) / 1e3,
           (g_get_monotonic_time () - t2) / 1e3);
  if (op->memory)
    return box_libvirt_rename_file (cold_tmp, cold, error);
  g_unlink (cold);
  return TRUE;
}

static void
restore_files_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  Restore *restore = g_object_get_data (G_OBJECT (task), "box-restore");
  BoxLibvirtVm *vm = op->vm;
  GError *error = NULL;
  gboolean ok = box_libvirt_run_finish (result, &error);

  if (!op->ended) {
    vm->expect_stop = FALSE;    /* nothing changed */
    box_libvirt_op_return (task, error);
    return;
  }
  box_libvirt_vm_ended (op->self, vm);
  if (!ok) {
    /* the QEMU is gone and the disk may be the checkpoint's: a boot is
     * what is left, on a disk as of the checkpoint once it was swapped
     * (snapshot_at: what the engine reports), else as of now */
    vm->state = BOX_VM_STATE_SHUTOFF;
    vm->cold = FALSE;
    vm->snapshot_at = restore->disk_swapped ? restore->info.created_at : 0;
    box_libvirt_save_vm (op->self, vm);
    box_libvirt_op_return (task, error);
    return;
  }
  vm->resources.cpus = restore->info.resources.cpus;
  vm->resources.memory_mib = restore->info.resources.memory_mib;
  vm->nic = restore->info.nic;
  g_message ("libvirt: sandbox %s: restoring %s checkpoint %s", op->id,
             op->memory ? "memory" : "disk-only", op->checkpoint_id);
  if (op->memory) {
    /* the VM is now a cold pause of the checkpoint: the resume of a cold
     * pause brings it back (clock, env and network pushed) */
    vm->state = BOX_VM_STATE_SUSPENDED;
    vm->cold = TRUE;
    vm->snapshot_at = restore->info.created_at;
    box_libvirt_save_vm (op->self, vm);
    box_libvirt_resume_start (task);
    return;
  }
  /* a stopped disk of the checkpoint's time, until the boot runs it */
  vm->state = BOX_VM_STATE_SHUTOFF;
  vm->cold = FALSE;
  vm->snapshot_at = restore->info.created_at;
  box_libvirt_save_vm (op->self, vm);
  box_libvirt_boot_start (task);
}

static void
restore_free (Restore *restore)
{
  box_libvirt_checkpoint_info_clear (&restore->info);
  g_free (restore);
}

void
box_libvirt_restore_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  Restore *restore = g_new0 (Restore, 1);
  GError *error = NULL;

  restore->op = op;
  g_object_set_data_full (G_OBJECT (task), "box-restore", restore, (GDestroyNotify) restore_free);
  if (!box_libvirt_checkpoint_info_load (op->self, op->id, op->checkpoint_id, &restore->info,
                                         &error)) {
    box_libvirt_op_return (task, error);
    return;
  }
  op->memory = restore->info.memory;
  op->ram = restore->info.ram;
  op->vm->expect_stop = TRUE;
  box_libvirt_run_in_thread (op->self, restore_work, restore, NULL, NULL, restore_files_done, task);
}
