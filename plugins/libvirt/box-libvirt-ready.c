/* box-libvirt-ready.c: forks made ready in advance.
 *
 * A fork of a materialised memory checkpoint (box-libvirt-fork.c) costs a
 * libvirt domain start (300-500 ms on a quiet host, seconds on a busy one)
 * and the load of the device state before its guest runs.  As the warm
 * pool does for creates (box-libvirt-pool.c), the newest materialised
 * memory checkpoint of each sandbox gets forks made in advance: each a
 * fork's own steps up to its resume (a VM directory and uid of its own, its
 * disk an overlay on the checkpoint's, the RAM file linked and mapped
 * privately, the device state loaded), attached to the network under a
 * pool ID and recorded as a pool domain (a restart removes it).  Each is
 * left paused and never resumed: the guest is the user's, and its
 * processes must not run before somebody forks it.  So there is no warm-up
 * either: the fork's guest set-up runs its code for the first time (under
 * TCG, the translator's first pass).
 *
 * A fork of that checkpoint takes the oldest: the attachment is rebound to
 * the fork, the domain becomes the sandbox's, resumes, and its guest gets
 * its identity as any fork's.  How many are kept follows the forks of the
 * checkpoint as the warm pool follows creates (box-libvirt-pool-policy.h):
 * one at least, grown at once to the forks of the last minute and by one
 * for each fork that found none, up to [plugin.libvirt]
 * checkpoint_ready_max (10: an agent branching ten times from one state),
 * and back down one at a time once no fork came for pool_idle_s.  They are
 * made one at a time, only while no create, fork, wake, checkpoint or
 * restore is under way (box_libvirt_ready_kick() when they end) and no
 * fork came in the last BOX_LIBVIRT_READY_QUIET_MS (forks back to back
 * take the ones made; making more meanwhile, a domain start each, would
 * take the CPUs the next fork's resume and guest set-up need), within
 * pool_memory_mib together with the warm pools (each counted at a ready
 * fork's measured private memory).  Deleting the checkpoint or destroying
 * its sandbox ends its ready forks; a newer materialised checkpoint
 * replaces them (and keeps their number).  checkpoint_ready=false
 * makes none.  A start wants them for each of its sandboxes' newest
 * materialised checkpoints again.
 */
#include "config.h"

#include <string.h>

#include "box-libvirt-op.h"

/* before the first is measured: a pool domain's, roughly, under TCG */
#define BOX_LIBVIRT_READY_COST_MIB 96
/* no ready fork is made within this of a fork (as the warm pool's fills
 * wait for a burst of creates, box-libvirt-pool.c) */
#define BOX_LIBVIRT_READY_QUIET_MS 500

typedef struct _BoxLibvirtReady BoxLibvirtReady;

/* One fork made ready, or being made. */
struct _BoxLibvirtReady {
  BoxLibvirtReadySet *set;          /* NULL once its set is gone */
  GTask              *task;         /* the fork's (its op: the VM, attachment, domain) */
  gboolean            made;         /* loaded and paused: can be taken */
};

/* A sandbox's newest materialised memory checkpoint and its ready forks. */
struct _BoxLibvirtReadySet {
  BoxLibvirtPlugin     *self;       /* not a reference: the stop ends all */
  char                 *sandbox_id;
  char                 *checkpoint_id;
  gint64                created_at; /* the checkpoint's */
  GQueue                made;       /* BoxLibvirtReady, oldest (the next taken) first */
  BoxLibvirtReady      *making;     /* also self->ready_making */
  gboolean              failed;     /* the last one failed: none made until a fork of it */
  BoxLibvirtPoolDemand  demand;     /* the forks of the checkpoint */
  guint                 shrink_source;
};

static void
ready_free (BoxLibvirtReady *ready)
{
  if (ready->task != NULL) {
    BoxLibvirtOp *op = box_libvirt_task_op (ready->task);

    box_libvirt_vm_free (g_steal_pointer (&op->vm));
    g_object_unref (ready->task);
  }
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
  g_debug ("libvirt: ending the ready fork %s",
           box_libvirt_task_op (ready->task)->vm->vm_id);
  ready->set = NULL;
  box_libvirt_run_in_thread (self, discard_work, ready, (GDestroyNotify) ready_free, NULL,
                             discarded, NULL);
}

/* Out of the table: its made forks end (at once when @now: the stop), the
 * one being made ends when its fork returns. */
static void
set_free (BoxLibvirtReadySet *set, gboolean now)
{
  BoxLibvirtReady *ready;

  g_clear_handle_id (&set->shrink_source, g_source_remove);
  while ((ready = g_queue_pop_head (&set->made)) != NULL) {
    if (now) {
      discard_work (set->self, ready, NULL);
      ready_free (ready);
    } else {
      discard (set->self, ready);
    }
  }
  if (set->making != NULL)
    set->making->set = NULL;
  g_free (set->sandbox_id);
  g_free (set->checkpoint_id);
  g_free (set);
}

void
box_libvirt_ready_set_free (BoxLibvirtReadySet *set)
{
  set_free (set, FALSE);
}

static void
drop (BoxLibvirtPlugin *self, BoxLibvirtReadySet *set)
{
  g_debug ("libvirt: ending the ready forks of checkpoint %s of %s", set->checkpoint_id,
           set->sandbox_id);
  g_hash_table_steal (self->readies, set->sandbox_id);
  set_free (set, FALSE);
}

static guint64
ready_cost_mib (BoxLibvirtPlugin *self)
{
  return self->ready_mib != 0 ? self->ready_mib : BOX_LIBVIRT_READY_COST_MIB;
}

static guint
set_count (BoxLibvirtReadySet *set)
{
  return g_queue_get_length (&set->made) + (set->making != NULL ? 1 : 0);
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
  BoxLibvirtReadySet *set = ready->set;
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (source);
  GTask *task = G_TASK (result);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  g_autoptr(GError) error = NULL;

  self->ready_making = NULL;
  if (set != NULL)
    set->making = NULL;
  if (!g_task_propagate_boolean (task, &error)) {
    /* the fork's own undo removed what it made; a checkpoint deleted (or a
     * stop) meanwhile is expected */
    if (set == NULL || !self->started) {
      g_message ("libvirt: no ready fork of checkpoint %s of %s: %s", op->from_checkpoint_id,
                 op->from_sandbox_id, error->message);
    } else {
      g_warning ("libvirt: no ready fork of checkpoint %s of %s: %s", op->from_checkpoint_id,
                 op->from_sandbox_id, error->message);
      set->failed = TRUE;
    }
    ready_free (ready);
    ready_next (self);
    return;
  }
  ready->task = g_object_ref (task);
  ready->made = TRUE;
  if (set == NULL || !self->started) {
    if (self->started) {
      discard (self, ready);
      ready_next (self);
    } else {
      discard_work (self, ready, NULL);
      ready_free (ready);
    }
    return;
  }
  g_queue_push_tail (&set->made, ready);
  {
    g_autofree char *domain = box_libvirt_vm_domain_name (op->vm->vm_id);

    box_libvirt_qemu_rss_average (domain, &self->ready_mib);
  }
  g_message ("libvirt: sandbox %s: a fork of checkpoint %s is ready (VM %s, %u of %u) in %.0f ms",
             set->sandbox_id, set->checkpoint_id, op->vm->vm_id,
             g_queue_get_length (&set->made), set->demand.target,
             (g_get_monotonic_time () - op->started) / 1e3);
  ready_next (self);
}

/* The limits of @set's size: the pools' budget and the node's room less
 * what the pools and the other ready forks hold, a ready fork's cost. */
static void
set_limits (BoxLibvirtPlugin *self, BoxLibvirtReadySet *set, BoxLibvirtPoolLimits *limits)
{
  box_libvirt_pools_limits (self, set_count (set) * ready_cost_mib (self), 1,
                            MAX (self->config.checkpoint_ready_max, 1), ready_cost_mib (self),
                            limits);
}

static gboolean
shrink_step (gpointer data)
{
  BoxLibvirtReadySet *set = data;

  set->shrink_source = 0;
  ready_next (set->self);
  return G_SOURCE_REMOVE;
}

/* @set's target now; the forks beyond it end (idle, or memory short), the
 * newest first, and the next shrink step is timed.  Returns how many more
 * it wants. */
static guint
set_trim (BoxLibvirtPlugin *self, BoxLibvirtReadySet *set)
{
  BoxLibvirtPoolLimits limits;
  gint64 now = g_get_monotonic_time (), next;
  guint target, before = set->demand.target;

  set_limits (self, set, &limits);
  target = box_libvirt_pool_target (&set->demand, &limits, now);
  if (target != before)
    g_debug ("libvirt: ready forks of checkpoint %s of %s: target %u (was %u; %u ready)",
             set->checkpoint_id, set->sandbox_id, target, before,
             g_queue_get_length (&set->made));
  /* (one being made is trimmed once made, if it is still too many) */
  while (g_queue_get_length (&set->made) > target)
    discard (self, g_queue_pop_tail (&set->made));
  g_clear_handle_id (&set->shrink_source, g_source_remove);
  next = box_libvirt_pool_next_shrink (&set->demand, &limits);
  if (next != 0)
    set->shrink_source = g_timeout_add_full (G_PRIORITY_DEFAULT,
                                             (guint) ((MAX (next - now, 0) + 999) / 1000),
                                             shrink_step, set, NULL);
  return target > set_count (set) ? target - set_count (set) : 0;
}

static void
make_one (BoxLibvirtPlugin *self, BoxLibvirtReadySet *set)
{
  BoxLibvirtReady *ready = g_new0 (BoxLibvirtReady, 1);
  g_autofree char *vm_id = box_libvirt_new_vm_id ();
  g_autofree char *pool_id = g_strconcat (BOX_LIBVIRT_POOL_NET_PREFIX, vm_id, NULL);
  BoxLibvirtOp *op = box_libvirt_op_new (self, BOX_LIBVIRT_JOB_ENGINE, BOX_VM_OP_CREATE, pool_id);
  GTask *task;

  op->ready_vm_id = g_steal_pointer (&vm_id);
  op->hostname = g_strdup ("box");
  op->from_sandbox_id = g_strdup (set->sandbox_id);
  op->from_checkpoint_id = g_strdup (set->checkpoint_id);
  ready->set = set;
  task = g_task_new (self, NULL, made, ready);
  g_task_set_task_data (task, op, (GDestroyNotify) box_libvirt_op_free);
  set->making = ready;
  self->ready_making = ready;
  g_debug ("libvirt: making a fork of checkpoint %s of %s ready", set->checkpoint_id,
           set->sandbox_id);
  box_libvirt_fork_start (task);
}

static gboolean
quiet_cb (gpointer data)
{
  BoxLibvirtPlugin *self = data;

  self->ready_quiet_source = 0;
  ready_next (self);
  return G_SOURCE_REMOVE;
}

/* Trims every set to its target, then makes the next wanted ready fork
 * when nothing else runs. */
static void
ready_next (BoxLibvirtPlugin *self)
{
  BoxLibvirtReadySet *next = NULL;
  GHashTableIter iter;
  gpointer value;
  gint64 now = g_get_monotonic_time (), quiet_at;

  if (!self->started)
    return;
  g_hash_table_iter_init (&iter, self->readies);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxLibvirtReadySet *set = value;

    /* of the sets short of their target, the one with the fewest made first */
    if (set_trim (self, set) > 0 && !set->failed &&
        (next == NULL || g_queue_get_length (&set->made) < g_queue_get_length (&next->made)))
      next = set;
  }
  if (next == NULL || self->ready_making != NULL || box_libvirt_tcg_refused (self) ||
      g_atomic_int_get (&self->heavy_ops) > 0)
    return;
  /* forks coming back to back: the next make waits until they stop */
  quiet_at = self->ready_last_fork + BOX_LIBVIRT_READY_QUIET_MS * 1000;
  if (self->ready_last_fork != 0 && now < quiet_at) {
    if (self->ready_quiet_source == 0)
      self->ready_quiet_source = g_timeout_add_full (G_PRIORITY_DEFAULT,
                                                     (guint) ((quiet_at - now + 999) / 1000),
                                                     quiet_cb, self, NULL);
    return;
  }
  /* no room: it stays wanted, tried again when operations end */
  if (!box_libvirt_pools_room_for (self, ready_cost_mib (self))) {
    g_debug ("libvirt: no room in the pools' %" G_GUINT64_FORMAT " MiB for a ready fork of "
             "checkpoint %s of %s", self->pool_budget_mib, next->checkpoint_id,
             next->sandbox_id);
    return;
  }
  make_one (self, next);
}

void
box_libvirt_ready_want (BoxLibvirtPlugin *self, const char *sandbox_id,
                        const char *checkpoint_id)
{
  BoxLibvirtCheckpointInfo info = { 0 };
  BoxLibvirtReadySet *set, *old;
  gint64 created_at;

  if (!self->config.checkpoint_ready ||
      !box_libvirt_checkpoint_info_load (self, sandbox_id, checkpoint_id, &info, NULL))
    return;
  created_at = info.created_at;
  box_libvirt_checkpoint_info_clear (&info);
  old = g_hash_table_lookup (self->readies, sandbox_id);
  /* the sandbox's newest materialised checkpoint (a start finds them in
   * any order) */
  if (old != NULL && (strcmp (old->checkpoint_id, checkpoint_id) == 0 ||
                      old->created_at > created_at))
    return;
  set = g_new0 (BoxLibvirtReadySet, 1);
  set->self = self;
  set->sandbox_id = g_strdup (sandbox_id);
  set->checkpoint_id = g_strdup (checkpoint_id);
  set->created_at = created_at;
  box_libvirt_pool_demand_init (&set->demand, 1);
  /* the sandbox forks its newest checkpoint as it forked the one before:
   * the size goes on (shrinking when idle), the forks of the old one do
   * not count as the new one's */
  if (old != NULL) {
    set->demand.target = old->demand.target;
    set->demand.last_create = old->demand.last_create;
    set->demand.last_shrink = old->demand.last_shrink;
    drop (self, old);
  }
  g_hash_table_insert (self->readies, set->sandbox_id, set);
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
  BoxLibvirtReadySet *set = g_hash_table_lookup (self->readies, sandbox_id);

  if (set != NULL && (checkpoint_id == NULL || strcmp (set->checkpoint_id, checkpoint_id) == 0))
    drop (self, set);
}

gboolean
box_libvirt_ready_take (BoxLibvirtPlugin *self, BoxLibvirtOp *op)
{
  BoxLibvirtReadySet *set = g_hash_table_lookup (self->readies, op->from_sandbox_id);
  BoxNetwork *network = box_libvirt_get_network (self);
  BoxLibvirtReady *ready;
  BoxLibvirtOp *made_op;
  g_autoptr(GError) error = NULL;

  self->ready_last_fork = g_get_monotonic_time ();
  if (set == NULL || strcmp (set->checkpoint_id, op->from_checkpoint_id) != 0)
    return FALSE;
  /* the demand the set's size follows: a fork that finds none says it is
   * too small; the next is made once this fork is done (ready_kick) */
  box_libvirt_pool_demand_note (&set->demand, g_get_monotonic_time (),
                                g_queue_is_empty (&set->made));
  set->failed = FALSE;
  ready = g_queue_pop_head (&set->made);
  if (ready == NULL)
    return FALSE;
  made_op = box_libvirt_task_op (ready->task);
  if (made_op->net != NULL && !box_network_rebind (network, made_op->id, op->id, &error)) {
    g_warning ("libvirt: fork %s: cannot take the ready fork %s: %s", op->id,
               made_op->vm->vm_id, error->message);
    discard (self, ready);
    return FALSE;
  }
  op->vm->vm_id = g_strdup (made_op->vm->vm_id);
  op->net = g_steal_pointer (&made_op->net);
  op->set_owner = TRUE;
  g_debug ("libvirt: fork %s: takes the ready fork %s of checkpoint %s of %s (%u left)", op->id,
           op->vm->vm_id, set->checkpoint_id, set->sandbox_id, g_queue_get_length (&set->made));
  ready_free (ready);
  return TRUE;
}

void
box_libvirt_readies_drain (BoxLibvirtPlugin *self)
{
  GHashTableIter iter;
  gpointer value;

  g_clear_handle_id (&self->ready_quiet_source, g_source_remove);
  g_hash_table_iter_init (&iter, self->readies);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    g_hash_table_iter_steal (&iter);
    /* a fork under way: made() ends it (the stop waits for it) */
    set_free (value, TRUE);
  }
}

void
box_libvirt_readies_count (BoxLibvirtPlugin *self, guint *ready, guint *making)
{
  GHashTableIter iter;
  gpointer value;

  *ready = 0;
  *making = self->ready_making != NULL ? 1 : 0;
  g_hash_table_iter_init (&iter, self->readies);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    *ready += g_queue_get_length (&((BoxLibvirtReadySet *) value)->made);
}

const char *
box_libvirt_ready_vm_id (BoxLibvirtPlugin *self, const char *sandbox_id,
                         const char *checkpoint_id, guint nth)
{
  BoxLibvirtReadySet *set = g_hash_table_lookup (self->readies, sandbox_id);
  BoxLibvirtReady *ready;

  if (set == NULL || strcmp (set->checkpoint_id, checkpoint_id) != 0)
    return NULL;
  ready = g_queue_peek_nth (&set->made, nth);
  return ready != NULL ? box_libvirt_task_op (ready->task)->vm->vm_id : NULL;
}

void
box_libvirt_ready_sizes (BoxLibvirtPlugin *self, const char *sandbox_id, guint *made,
                         guint *target)
{
  BoxLibvirtReadySet *set = g_hash_table_lookup (self->readies, sandbox_id);

  *made = set != NULL ? g_queue_get_length (&set->made) : 0;
  *target = set != NULL ? set->demand.target : 0;
}
