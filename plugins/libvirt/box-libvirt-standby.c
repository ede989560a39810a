/* box-libvirt-standby.c: a QEMU started in advance for a cold wake.
 *
 * A wake from a cold pause starts a libvirt domain (~300 ms of the ~480 ms
 * such a wake took on a quiet host under TCG, seconds on a busy one) and
 * only then loads the pause's migration stream (cold.mig).  So once a pause
 * turned cold, the plugin starts the VM's domain again in the background,
 * on its own files and network attachment, as far as QEMU waiting for its
 * state (`-incoming defer`, paused): the standby.  It has loaded nothing, so
 * the guest's RAM is not held (the cold pause's point); QEMU's own memory
 * is (measured, counted within pool_memory_mib with the warm pools and the
 * ready forks).  A wake that finds it loads cold.mig into it and resumes it
 * (box_libvirt_start_domain_work()); one that cannot (its QEMU gone or not
 * paused, a disk snapshot to settle) destroys it and starts a domain as
 * before.  A restore, stop or destroy of the VM ends it with the domain
 * (box_libvirt_vm_ended() forgets it); a checkpoint of the cold VM reads
 * its files and leaves it.
 *
 * Never for a VM whose next start maps a materialised RAM file (cold.dev:
 * its domain must map that file).  Made one at a time, only while no
 * create, fork, wake, checkpoint or restore runs (box_libvirt_standby_kick()
 * when they end; a job that finds one begun while it waited for the lock
 * goes back to the queue), under the VM's lock: a wake asked for meanwhile
 * waits for it and then uses it.  Standbys last as long as their pause, so
 * together they take at most a quarter of pool_memory_mib (the warm pools
 * and ready forks need the rest); the VMs beyond wait in the queue.  A
 * standby that ends on its own is forgotten (the LOST job) and its
 * attachment detached.  [plugin.libvirt] cold_standby=false makes none.  A
 * restart ends them (adopt destroys a paused domain of a cold VM, and
 * detaches it) and makes them again.
 */
#include "config.h"

#include <glib/gstdio.h>

#include "box-libvirt-op.h"

/* before the first is measured: QEMU with TCG, no guest RAM, roughly */
#define BOX_LIBVIRT_STANDBY_COST_MIB 64

static guint64
standby_cost_mib (BoxLibvirtPlugin *self)
{
  return self->standby_mib != 0 ? self->standby_mib : BOX_LIBVIRT_STANDBY_COST_MIB;
}

guint
box_libvirt_standbys_count (BoxLibvirtPlugin *self)
{
  GHashTableIter iter;
  gpointer value;
  guint n = self->standby_making ? 1 : 0;

  g_hash_table_iter_init (&iter, self->vms);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    n += ((BoxLibvirtVm *) value)->standby ? 1 : 0;
  return n;
}

guint64
box_libvirt_standbys_mib (BoxLibvirtPlugin *self)
{
  return box_libvirt_standbys_count (self) * standby_cost_mib (self);
}

/* Whether @vm's wake would load cold.mig into a domain without a RAM file. */
static gboolean
wants_standby (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  g_autofree char *cold = NULL;
  g_autofree char *dev = NULL;

  if (vm->gone || vm->standby || vm->state != BOX_VM_STATE_SUSPENDED || !vm->cold)
    return FALSE;
  cold = box_libvirt_vm_path (self->config.vm_dir, vm->vm_id, "cold.mig");
  dev = box_libvirt_vm_path (self->config.vm_dir, vm->vm_id, "cold.dev");
  return g_file_test (cold, G_FILE_TEST_IS_REGULAR) && !g_file_test (dev, G_FILE_TEST_EXISTS);
}

/* Worker: the domain started paused, waiting for its state. */
static gboolean
standby_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  virDomainPtr dom = NULL;

  if (conn == NULL)
    return FALSE;
  /* whatever is left of an earlier QEMU, and of a disk snapshot it did not
   * finish (the standby opens disk.qcow2) */
  box_libvirt_domain_destroy (conn, op->domain, NULL);
  if (box_libvirt_disk_snapshot_recover (self, op->vm, NULL, error))
    dom = box_libvirt_domain_start (conn, op->xml, TRUE, op->vm->resources.memory_mib,
                                    self->config.tb_cache_mib, error);
  if (dom != NULL)
    virDomainFree (dom);
  virConnectClose (conn);
  return dom != NULL;
}

static void
standby_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  BoxLibvirtPlugin *self = op->self;
  GError *error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    g_warning ("libvirt: sandbox %s: no standby domain for its cold wake: %s", op->id,
               error->message);
    box_libvirt_detach_network (self, op->id);
    box_libvirt_op_return (task, error);
    return;
  }
  op->vm->standby = TRUE;
  box_libvirt_qemu_rss_average (op->domain, &self->standby_mib);
  g_message ("libvirt: sandbox %s: standby domain for its cold wake in %.0f ms", op->id,
             (g_get_monotonic_time () - op->started) / 1e3);
  box_libvirt_op_return (task, NULL);
}

/* The job, under the VM's lock (box-libvirt-dispatch.c). */
void
box_libvirt_standby_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  GError *error = NULL;

  if (!op->self->started || !wants_standby (op->self, op->vm)) {
    box_libvirt_op_return (task, NULL);
    return;
  }
  /* a foreground operation began while this job waited for the lock: it
   * goes first, the standby is made when it ends */
  if (g_atomic_int_get (&op->self->heavy_ops) > 0) {
    if (g_queue_find_custom (&op->self->standby_queue, op->id, (GCompareFunc) g_strcmp0) == NULL)
      g_queue_push_head (&op->self->standby_queue, g_strdup (op->id));
    box_libvirt_op_return (task, NULL);
    return;
  }
  if (!box_libvirt_op_attach_network (op, &error)) {
    box_libvirt_op_return (task, error);
    return;
  }
  op->xml = box_libvirt_vm_xml (op, FALSE);
  box_libvirt_run_in_thread (op->self, standby_work, op, NULL, NULL, standby_done, task);
}

static void
gone_checked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  if (box_libvirt_run_finish (result, NULL) && op->vm->standby) {
    g_message ("libvirt: sandbox %s: its standby domain ended; its wake starts one", op->id);
    op->vm->standby = FALSE;
    box_libvirt_detach_network (op->self, op->id);
  }
  box_libvirt_op_return (task, NULL);
}

void
box_libvirt_standby_lost_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  box_libvirt_run_in_thread (op->self, box_libvirt_domain_gone_work, op, NULL, NULL,
                             gone_checked, task);
}

static void standby_next (BoxLibvirtPlugin *self);

static void
standby_made (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (source);

  g_autoptr(GError) error = NULL;

  self->standby_making = FALSE;
  if (!g_task_propagate_boolean (G_TASK (result), &error))
    g_debug ("libvirt: no standby domain: %s", error->message);
  standby_next (self);
}

static void
standby_next (BoxLibvirtPlugin *self)
{
  char *id;

  if (!self->started || self->standby_making || box_libvirt_tcg_refused (self) ||
      g_atomic_int_get (&self->heavy_ops) > 0)
    return;
  while ((id = g_queue_pop_head (&self->standby_queue)) != NULL) {
    BoxLibvirtVm *vm = box_libvirt_lookup_vm (self, id);

    if (vm == NULL || !wants_standby (self, vm)) {
      g_free (id);
      continue;
    }
    /* no room: it stays wanted, tried again when operations end; standbys
     * take at most a quarter of the pools' budget (they last as long as
     * their pause: the warm pools and ready forks need the rest) */
    if (!box_libvirt_pools_room_for (self, standby_cost_mib (self)) ||
        (box_libvirt_standbys_count (self) + 1) * standby_cost_mib (self) >
        self->pool_budget_mib / 4) {
      g_debug ("libvirt: no room in the pools' %" G_GUINT64_FORMAT " MiB for a standby "
               "domain of %s", self->pool_budget_mib, id);
      g_queue_push_head (&self->standby_queue, id);
      return;
    }
    g_free (id);
    self->standby_making = TRUE;
    box_libvirt_run_job (self, vm, BOX_LIBVIRT_JOB_STANDBY, standby_made, NULL);
    return;
  }
}

void
box_libvirt_standby_want (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  if (!self->config.cold_standby ||
      g_queue_find_custom (&self->standby_queue, vm->id, (GCompareFunc) g_strcmp0) != NULL)
    return;
  g_queue_push_tail (&self->standby_queue, g_strdup (vm->id));
  standby_next (self);
}

void
box_libvirt_standby_kick (BoxLibvirtPlugin *self)
{
  standby_next (self);
}

void
box_libvirt_standbys_drain (BoxLibvirtPlugin *self)
{
  g_queue_clear_full (&self->standby_queue, g_free);
}

/* Worker, under the VM's lock: a wake into the standby.  FALSE (logged
 * when it was there) leaves no domain: the caller starts one. */
gboolean
box_libvirt_standby_load (BoxLibvirtPlugin *self, virConnectPtr conn, BoxLibvirtOp *op)
{
  g_autofree char *cold = box_libvirt_op_file (op, "cold.mig");
  g_autofree char *next = box_libvirt_op_file (op, "disk.qcow2.next");
  g_autofree char *dev = box_libvirt_op_file (op, "cold.dev");
  g_autoptr(GError) error = NULL;
  virDomainPtr dom;
  int state = VIR_DOMAIN_NOSTATE;
  gint64 t0 = g_get_monotonic_time ();
  gboolean ok;

  if (!op->standby)
    return FALSE;
  op->standby = FALSE;
  dom = box_libvirt_domain_lookup (conn, op->domain);
  /* paused and waiting, on the files it was started on */
  ok = dom != NULL && virDomainGetState (dom, &state, NULL, 0) == 0 &&
       state == VIR_DOMAIN_PAUSED && !g_file_test (next, G_FILE_TEST_EXISTS) &&
       !g_file_test (dev, G_FILE_TEST_EXISTS);
  if (!ok)
    g_set_error_literal (&error, BOX_ERROR, BOX_ERROR_CONFLICT, "it is gone or not waiting");
  ok = ok && box_libvirt_migrate_load (dom, cold, FALSE, &error) &&
       (virDomainResume (dom) == 0 || box_libvirt_set_error (&error, "cannot resume the VM"));
  if (dom != NULL)
    virDomainFree (dom);
  if (!ok) {
    g_message ("libvirt: sandbox %s: its standby domain was not used (%s); starting one",
               op->id, error->message);
    box_libvirt_domain_destroy (conn, op->domain, NULL);
    return FALSE;
  }
  g_debug ("libvirt: sandbox %s: cold state loaded into the standby domain in %.1f ms", op->id,
           (g_get_monotonic_time () - t0) / 1e3);
  return TRUE;
}
