/* box-libvirt-ready.c: forks made ready in advance.
 *
 * A fork of a materialised memory checkpoint (box-libvirt-fork.c) costs a
 * libvirt domain start (300-500 ms on a quiet host, seconds on a busy one)
 * and the load of the device state before its guest runs.  As the warm
 * pool does for creates (box-libvirt-pool.c), the newest materialised
 * memory checkpoint of each sandbox gets one fork made in advance: the
 * fork's own steps up to its resume (a VM directory and uid of its own, its
 * disk an overlay on the checkpoint's, the RAM file linked and mapped
 * privately, the device state loaded), attached to the network under a
 * pool ID and recorded as a pool domain (a restart removes it).  It is left
 * paused and never resumed: the guest is the user's, and its processes must
 * not run before somebody forks it.  So there is no warm-up either: the
 * fork's guest set-up runs its code for the first time (under TCG, the
 * translator's first pass).
 *
 * A fork of that checkpoint takes it: the attachment is rebound to the
 * fork, the domain becomes the sandbox's, resumes, and its guest gets its
 * identity as any fork's.  Another is made for the next fork of the same
 * checkpoint.  Ready forks are made one at a time, only while no create,
 * fork, wake, checkpoint or restore is under way (box_libvirt_ready_kick()
 * when they end), within pool_memory_mib together with the warm pools
 * (each counted at its QEMU's measured private memory).  Deleting the
 * checkpoint or destroying its sandbox ends its ready fork; a newer
 * materialised checkpoint replaces it.  [plugin.libvirt]
 * checkpoint_ready=false makes none.  A start wants one for each of its
 * sandboxes' newest materialised checkpoints again.
 */
#include "config.h"

#include <string.h>

#include "box-libvirt-op.h"

/* before the first is measured: a pool domain's, roughly, under TCG */
#define BOX_LIBVIRT_READY_COST_MIB 96

struct _BoxLibvirtReady {
  BoxLibvirtPlugin *self;           /* not a reference: the stop ends all */
  char             *sandbox_id;
  char             *checkpoint_id;
  gint64            created_at;     /* the checkpoint's */
  GTask            *task;           /* the fork's (its op: the VM, attachment, domain) */
  gboolean          made;           /* loaded and paused: can be taken */
  gboolean          dropped;        /* replaced or forgotten while it was made */
};

void
box_libvirt_ready_free (BoxLibvirtReady *ready)
{
  if (ready->task != NULL) {
    BoxLibvirtOp *op = box_libvirt_task_op (ready->task);

    box_libvirt_vm_free (g_steal_pointer (&op->vm));
    g_object_unref (ready->task);
  }
  g_free (ready->sandbox_id);
  g_free (ready->checkpoint_id);
  g_free (ready);
}

/* Any thread: the domain, its files, its attachment and its record go. */
static gboolean
discard_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtReady *ready = data;
  BoxLibvirtOp *op = box_libvirt_task_op (ready->task);
  BoxNetwork *network = box_libvirt_get_network (self);
  g_autoptr(GError) local = NULL;

  if (network != NULL && op->net != NULL && !box_network_detach (network, op->id, &local))
    g_warning ("libvirt: detaching %s: %s", op->id, local->message);
  g_clear_error (&local);
  /* its record stays when anything is left: the next start's sweep ends it */
  if (!box_libvirt_destroy_work (self, op, &local)) {
    g_warning ("libvirt: ending the ready fork %s: %s", op->vm->vm_id, local->message);
    return TRUE;
  }
  box_libvirt_pool_record_remove (self, op->vm->vm_id);
  return TRUE;
}

static void
discarded (GObject *source, GAsyncResult *result, gpointer user_data)
{
  box_libvirt_run_finish (result, NULL);
}

static void
discard (BoxLibvirtPlugin *self, BoxLibvirtReady *ready)
{
  g_debug ("libvirt: ending the ready fork of checkpoint %s of %s", ready->checkpoint_id,
           ready->sandbox_id);
  box_libvirt_run_in_thread (self, discard_work, ready,
                             (GDestroyNotify) box_libvirt_ready_free, NULL, discarded, NULL);
}

/* Out of the table: ended now when made, when its fork returns while it
 * is made, or freed when it was only wanted. */
static void
drop (BoxLibvirtPlugin *self, BoxLibvirtReady *ready)
{
  g_hash_table_steal (self->readies, ready->sandbox_id);
  if (ready->made)
    discard (self, ready);
  else if (self->ready_making == ready)
    ready->dropped = TRUE;
  else
    box_libvirt_ready_free (ready);
}

static guint64
ready_cost_mib (BoxLibvirtPlugin *self)
{
  return self->ready_mib != 0 ? self->ready_mib : BOX_LIBVIRT_READY_COST_MIB;
}

/* What the ready forks made, and the one being made, hold. */
guint64
box_libvirt_readies_mib (BoxLibvirtPlugin *self)
{
  guint ready, making;

  box_libvirt_readies_count (self, &ready, &making);
  return (guint64) (ready + making) * ready_cost_mib (self);
}

static void ready_next (BoxLibvirtPlugin *self);

static void
made (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxLibvirtReady *ready = user_data;
  BoxLibvirtPlugin *self = ready->self;
  GTask *task = G_TASK (result);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(GError) error = NULL;

  self->ready_making = NULL;
  if (!g_task_propagate_boolean (task, &error)) {
    /* the fork's own undo removed what it made; a checkpoint deleted (or a
     * stop) meanwhile is expected */
    if (ready->dropped || !self->started)
      g_message ("libvirt: no ready fork of checkpoint %s of %s: %s", ready->checkpoint_id,
                 ready->sandbox_id, error->message);
    else
      g_warning ("libvirt: no ready fork of checkpoint %s of %s: %s", ready->checkpoint_id,
                 ready->sandbox_id, error->message);
    if (!ready->dropped)
      g_hash_table_steal (self->readies, ready->sandbox_id);
    box_libvirt_ready_free (ready);
    ready_next (self);
    return;
  }
  ready->task = g_object_ref (task);
  ready->made = TRUE;
  if (ready->dropped || !self->started) {
    if (!ready->dropped)
      g_hash_table_steal (self->readies, ready->sandbox_id);
    if (self->started) {
      discard (self, ready);
      ready_next (self);
    } else {
      discard_work (self, ready, NULL);
      box_libvirt_ready_free (ready);
    }
    return;
  }
  {
    g_autofree char *domain = box_libvirt_vm_domain_name (op->vm->vm_id);
    guint64 rss = box_libvirt_qemu_rss_mib (domain);

    if (rss != 0)
      self->ready_mib = self->ready_mib == 0 ? rss : (3 * self->ready_mib + rss) / 4;
  }
  g_message ("libvirt: sandbox %s: a fork of checkpoint %s is ready (VM %s) in %.0f ms",
             ready->sandbox_id, ready->checkpoint_id, op->vm->vm_id,
             (g_get_monotonic_time () - op->started) / 1e3);
  ready_next (self);
}

/* Whether the pools' memory budget has room for one more. */
static gboolean
room_for_one (BoxLibvirtPlugin *self)
{
  guint target, ready, filling;
  guint64 pools_mib;

  /* (pools_mib counts the ready forks made) */
  box_libvirt_templates_count (self, &target, &ready, &filling, &pools_mib);
  pools_mib += ready_cost_mib (self);
  return pools_mib <= self->pool_budget_mib &&
         box_libvirt_memory_held_mib (self) + pools_mib <= self->max_memory_mib;
}

/* Makes the next wanted ready fork, when nothing else runs. */
static void
ready_next (BoxLibvirtPlugin *self)
{
  GHashTableIter iter;
  gpointer value;

  if (!self->started || self->ready_making != NULL || box_libvirt_tcg_refused (self) ||
      g_atomic_int_get (&self->heavy_ops) > 0)
    return;
  g_hash_table_iter_init (&iter, self->readies);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxLibvirtReady *ready = value;
    g_autofree char *vm_id = NULL;
    g_autofree char *pool_id = NULL;
    BoxLibvirtOp *op;
    GTask *task;

    if (ready->made)
      continue;
    /* no room: it stays wanted, tried again when operations end */
    if (!room_for_one (self)) {
      g_debug ("libvirt: no room in the pools' %" G_GUINT64_FORMAT " MiB for a ready fork of "
               "checkpoint %s of %s", self->pool_budget_mib, ready->checkpoint_id,
               ready->sandbox_id);
      return;
    }
    vm_id = box_libvirt_new_vm_id ();
    pool_id = g_strconcat (BOX_LIBVIRT_POOL_NET_PREFIX, vm_id, NULL);
    op = box_libvirt_op_new (self, BOX_LIBVIRT_JOB_ENGINE, BOX_VM_OP_CREATE, pool_id);
    op->ready_vm_id = g_steal_pointer (&vm_id);
    op->hostname = g_strdup ("box");
    op->from_sandbox_id = g_strdup (ready->sandbox_id);
    op->from_checkpoint_id = g_strdup (ready->checkpoint_id);
    task = g_task_new (self, NULL, made, ready);
    g_task_set_task_data (task, op, (GDestroyNotify) box_libvirt_op_free);
    self->ready_making = ready;
    g_debug ("libvirt: making a fork of checkpoint %s of %s ready", ready->checkpoint_id,
             ready->sandbox_id);
    box_libvirt_fork_start (task);
    return;
  }
}

void
box_libvirt_ready_want (BoxLibvirtPlugin *self, const char *sandbox_id,
                        const char *checkpoint_id)
{
  BoxLibvirtCheckpointInfo info = { 0 };
  BoxLibvirtReady *ready;
  gint64 created_at;

  if (!self->config.checkpoint_ready ||
      !box_libvirt_checkpoint_info_load (self, sandbox_id, checkpoint_id, &info, NULL))
    return;
  created_at = info.created_at;
  box_libvirt_checkpoint_info_clear (&info);
  ready = g_hash_table_lookup (self->readies, sandbox_id);
  /* the sandbox's newest materialised checkpoint (a start finds them in
   * any order) */
  if (ready != NULL && (strcmp (ready->checkpoint_id, checkpoint_id) == 0 ||
                        ready->created_at > created_at))
    return;
  if (ready != NULL)
    drop (self, ready);
  ready = g_new0 (BoxLibvirtReady, 1);
  ready->self = self;
  ready->sandbox_id = g_strdup (sandbox_id);
  ready->checkpoint_id = g_strdup (checkpoint_id);
  ready->created_at = created_at;
  g_hash_table_insert (self->readies, ready->sandbox_id, ready);
  ready_next (self);
}

void
box_libvirt_ready_kick (BoxLibvirtPlugin *self)
{
  ready_next (self);
}

void
box_libvirt_ready_forget (BoxLibvirtPlugin *self, const char *sandbox_id,
                          const char *checkpoint_id)
{
  BoxLibvirtReady *ready = g_hash_table_lookup (self->readies, sandbox_id);

  if (ready != NULL && (checkpoint_id == NULL || strcmp (ready->checkpoint_id, checkpoint_id) == 0))
    drop (self, ready);
}

gboolean
box_libvirt_ready_take (BoxLibvirtPlugin *self, BoxLibvirtOp *op)
{
  BoxLibvirtReady *ready = g_hash_table_lookup (self->readies, op->from_sandbox_id);
  BoxNetwork *network = box_libvirt_get_network (self);
  BoxLibvirtOp *made_op;
  g_autoptr(GError) error = NULL;

  if (ready == NULL || !ready->made ||
      strcmp (ready->checkpoint_id, op->from_checkpoint_id) != 0)
    return FALSE;
  g_hash_table_steal (self->readies, ready->sandbox_id);
  made_op = box_libvirt_task_op (ready->task);
  if (made_op->net != NULL && !box_network_rebind (network, made_op->id, op->id, &error)) {
    g_warning ("libvirt: fork %s: cannot take the ready fork %s: %s", op->id,
               made_op->vm->vm_id, error->message);
    box_libvirt_ready_want (self, ready->sandbox_id, ready->checkpoint_id);
    discard (self, ready);
    return FALSE;
  }
  op->vm->vm_id = g_strdup (made_op->vm->vm_id);
  op->net = g_steal_pointer (&made_op->net);
  op->set_owner = TRUE;
  g_debug ("libvirt: fork %s: takes the ready fork %s of checkpoint %s of %s", op->id,
           op->vm->vm_id, ready->checkpoint_id, ready->sandbox_id);
  /* the next fork of it gets one too, once this one is done */
  box_libvirt_ready_want (self, ready->sandbox_id, ready->checkpoint_id);
  box_libvirt_ready_free (ready);
  return TRUE;
}

void
box_libvirt_readies_drain (BoxLibvirtPlugin *self)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->readies);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxLibvirtReady *ready = value;

    g_hash_table_iter_steal (&iter);
    if (ready->made) {
      discard_work (self, ready, NULL);
      box_libvirt_ready_free (ready);
    } else if (self->ready_making == ready) {
      /* its fork is under way: made() ends it (the stop waits for it) */
      ready->dropped = TRUE;
    } else {
      box_libvirt_ready_free (ready);
    }
  }
}

void
box_libvirt_readies_count (BoxLibvirtPlugin *self, guint *ready, guint *making)
{
  GHashTableIter iter;
  gpointer value;

  *ready = *making = 0;
  g_hash_table_iter_init (&iter, self->readies);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxLibvirtReady *r = value;

    if (r->made)
      (*ready)++;
    else if (self->ready_making == r)
      (*making)++;
  }
}

const char *
box_libvirt_ready_vm_id (BoxLibvirtPlugin *self, const char *sandbox_id,
                         const char *checkpoint_id)
{
  BoxLibvirtReady *ready = g_hash_table_lookup (self->readies, sandbox_id);

  if (ready == NULL || !ready->made || strcmp (ready->checkpoint_id, checkpoint_id) != 0)
    return NULL;
  return box_libvirt_task_op (ready->task)->vm->vm_id;
}
