/* box-libvirt-pool.c: the warm pool, restored forks of a template snapshot.
 *
 * libvirt's domain start costs ~300-500 ms (most of it libvirt checking the
 * guest CPU over hundreds of monitor calls), too much for a create, so each
 * template snapshot keeps domains started, restored and paused
 * (box-libvirt-template.c has the snapshots).  A pool domain is attached to
 * the network under a pool ID, rebound to the sandbox when taken.
 *
 * How many: at least pool_size, more while creates come often, fewer again
 * once they stop (box-libvirt-pool-policy.h), within pool_memory_mib for
 * all pools (each domain counted at its QEMU's measured private memory) and
 * the node's memory capacity.  Fills run pool_fill_jobs (2) at a time:
 * each costs a libvirt domain start, a restore and a TCG warm-up, and
 * shares the host's CPUs with the creates being served (doc/PERFORMANCE.md).
 * So while creates come back to back (one in the last
 * BOX_LIBVIRT_POOL_FILL_QUIET_MS) and the pool still holds more than
 * pool_fill_jobs domains, fills wait: a burst the pool was grown for is
 * served from it alone, and the pool refills once the burst is over, or
 * once it is down to what the fills can replace at once (pool-bench: with
 * a quarter of the target as that mark, the last creates of a burst the
 * size of the pool ran beside fills, p95 328 ms; with pool_fill_jobs, 86).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "box-libvirt-private.h"

/* a create within this long: the burst goes on, fills wait */
#define BOX_LIBVIRT_POOL_FILL_QUIET_MS 500

/* ---- a pool slot: a restored, warmed up, paused fork ----
 *
 * Under TCG a restored guest runs every code path for the first time
 * through the translator: the first set-hostname or grow-fs after a restore
 * takes 60-100 ms, the second 1-6 ms.  And an agent whose host side was
 * away polls for it every 50 ms.  So a pool domain is not only restored: it
 * runs briefly with our agent connection open, goes through what a create
 * will ask of it (clock, entropy, hostname, network, growing the disk to
 * its size, env) and what a user does first (a command), takes the CA
 * every guest trusts (the engine's, box_hypervisor_set_guest_ca(): three
 * files written; the engine's part of a create was 143-184 ms p50 under
 * TCG in pool-bench without it, 38-41 ms with it), and is paused again,
 * its connection kept.  A create then costs a resume and one pipelined
 * round of requests on warm code.
 *
 * Pool disks have the template's default size: growing ext4 from the
 * image's 2 GiB to 20 GiB takes the guest ~200 ms under TCG, too much for a
 * create.  A create that asks for less gets a domain started for it (the
 * filesystem cannot shrink); one that asks for more grows it further.
 */

typedef struct {
  BoxLibvirtPlugin   *self;       /* a reference */
  BoxLibvirtTemplate *tmpl;
  BoxLibvirtSlot     *slot;
  char               *xml;
  char               *domain;
  GTask              *waiter;     /* NULL: for the pool */
  guint               uid;        /* its QEMU's */
  gint64              started;
  guint               pending;    /* resume and guest setup run together */
  GError             *error;
  gint                cancelled;  /* atomic: the plugin stopped */
} Fill;

static void
fill_free (Fill *fill)
{
  fill->tmpl->in_flight = g_list_remove (fill->tmpl->in_flight, fill);
  box_libvirt_release (fill->self);
  g_clear_pointer (&fill->slot, box_libvirt_slot_free);
  g_free (fill->xml);
  g_free (fill->domain);
  g_clear_error (&fill->error);
  g_free (fill);
}

static gboolean
fill_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Fill *fill = data;
  const char *vm_dir = self->config.vm_dir;
  const char *vm_id = fill->slot->vm_id;
  g_autofree char *dir = box_libvirt_vm_path (vm_dir, vm_id, NULL);
  g_autofree char *disk = box_libvirt_vm_path (vm_dir, vm_id, "disk.qcow2");
  g_autofree char *backing = g_build_filename (fill->tmpl->dir, "disk.qcow2", NULL);
  g_autofree char *state = g_build_filename (fill->tmpl->dir, "state", NULL);
  virConnectPtr conn;
  virDomainPtr dom;
  gboolean ok;
  gint64 t0 = g_get_monotonic_time (), t1, t2;

  if (g_atomic_int_get (&fill->cancelled)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                         "the hypervisor is stopping");
    return FALSE;
  }
  if (!box_libvirt_make_vm_dir (dir, error) ||
      !box_libvirt_create_overlay (disk, backing, "qcow2", self->image->rootfs_bytes, error) ||
      !box_libvirt_give_to_qemu (self, disk, fill->uid, error))
    return FALSE;
  conn = box_libvirt_conn_get (self->conn, error);
  if (conn == NULL)
    return FALSE;
  t1 = g_get_monotonic_time ();
  dom = box_libvirt_domain_start (conn, fill->xml, TRUE, fill->tmpl->memory_mib,
                                  self->config.tb_cache_mib, error);
  t2 = g_get_monotonic_time ();
  ok = dom != NULL && box_libvirt_migrate_load (dom, state, TRUE, error);
  g_debug ("libvirt: pool VM %s: disk %.1f ms, QEMU started %.1f ms, state loaded %.1f ms",
           vm_id, (t1 - t0) / 1e3, (t2 - t1) / 1e3, (g_get_monotonic_time () - t2) / 1e3);
  if (ok && g_atomic_int_get (&fill->cancelled)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                         "the hypervisor is stopping");
    ok = FALSE;
  }
  if (ok && fill->slot->disk_bytes > self->image->rootfs_bytes &&
      virDomainBlockResize (dom, "vda", fill->slot->disk_bytes,
                            VIR_DOMAIN_BLOCK_RESIZE_BYTES) < 0)
    ok = box_libvirt_set_error (error, "cannot grow the disk");
  if (dom != NULL)
    virDomainFree (dom);
  if (!ok)
    box_libvirt_domain_destroy (conn, fill->domain, NULL);
  virConnectClose (conn);
  /* the plugin stopped while this ran: its stop already discarded the
   * slot, so what this thread made after that (the directory, the
   * overlay) goes here, or it would outlive boxd */
  if (g_atomic_int_get (&fill->cancelled))
    box_libvirt_remove_tree (dir, NULL);
  return ok;
}

/* Resumes or pauses the slot's domain (@data: the Fill, slot->paused says which). */
static gboolean
fill_run_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Fill *fill = data;
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  virDomainPtr dom;
  gboolean ok;

  if (conn == NULL)
    return FALSE;
  dom = box_libvirt_domain_lookup (conn, fill->domain);
  virConnectClose (conn);
  if (dom == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the pool VM %s went away",
                 fill->domain);
    return FALSE;
  }
  if (fill->slot->paused)
    ok = virDomainResume (dom) == 0 || box_libvirt_set_error (error, "cannot resume a pool VM");
  else
    ok = virDomainSuspend (dom) == 0 || box_libvirt_set_error (error, "cannot pause a pool VM");
  virDomainFree (dom);
  return ok;
}

/* Ends a slot's domain and removes its files (blocking, briefly). */
static void
slot_discard (BoxLibvirtPlugin *self, BoxLibvirtSlot *slot)
{
  g_autofree char *domain = box_libvirt_vm_domain_name (slot->vm_id);
  g_autofree char *dir = box_libvirt_vm_path (self->config.vm_dir, slot->vm_id, NULL);
  g_autoptr(GError) error = NULL;
  virConnectPtr conn = box_libvirt_conn_get (self->conn, NULL);
  BoxNetwork *network = box_libvirt_get_network (self);

  if (slot->agent != NULL)
    box_agent_close (slot->agent);
  if (conn != NULL) {
    box_libvirt_domain_destroy (conn, domain, NULL);
    virConnectClose (conn);
  }
  if (!box_libvirt_remove_tree (dir, &error))
    g_warning ("libvirt: %s", error->message);
  if (network != NULL && slot->net_id != NULL) {
    g_clear_error (&error);
    if (!box_network_detach (network, slot->net_id, &error))
      g_warning ("libvirt: detaching %s: %s", slot->net_id, error->message);
  }
  box_libvirt_pool_record_remove (self, slot->vm_id);
}

static void
fill_done (Fill *fill)
{
  BoxLibvirtPlugin *self = fill->self;
  BoxLibvirtTemplate *tmpl = fill->tmpl;

  if (fill->waiter == NULL)
    tmpl->filling--;
  if (fill->error != NULL) {
    slot_discard (self, fill->slot);
    if (fill->waiter != NULL) {
      g_task_return_error (fill->waiter, g_steal_pointer (&fill->error));
      g_object_unref (fill->waiter);
    } else {
      g_warning ("libvirt: cannot fill the warm pool of template %s: %s", tmpl->key,
                 fill->error->message);
    }
    fill_free (fill);
    return;
  }
  g_debug ("libvirt: pool VM %s ready in %.0f ms", fill->slot->vm_id,
           (g_get_monotonic_time () - fill->started) / 1e3);
  if (fill->waiter != NULL) {
    g_task_return_pointer (fill->waiter, g_steal_pointer (&fill->slot),
                           (GDestroyNotify) box_libvirt_slot_free);
    g_object_unref (fill->waiter);
  } else if (!self->started) {
    slot_discard (self, fill->slot);
  } else {
    g_autofree char *domain = box_libvirt_vm_domain_name (fill->slot->vm_id);

    /* what the budget counts a pool domain at: its QEMU's private memory */
    box_libvirt_qemu_rss_average (domain, &tmpl->slot_mib);
    g_queue_push_tail (&tmpl->slots, g_steal_pointer (&fill->slot));
    box_libvirt_template_refill (self, tmpl);
  }
  fill_free (fill);
}

static void
fill_paused (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Fill *fill = user_data;

  if (!box_libvirt_run_finish (result, &fill->error))
    g_prefix_error (&fill->error, "warming up a pool VM: ");
  else
    fill->slot->paused = TRUE;
  fill_done (fill);
}

/* Both the resume and the guest's warm-up are done. */
static void
fill_warm_step_done (Fill *fill)
{
  if (--fill->pending > 0)
    return;
  if (fill->error != NULL) {
    fill_done (fill);
    return;
  }
  box_libvirt_run_in_thread (fill->self, fill_run_work, fill, NULL, NULL, fill_paused, fill);
}

static void
fill_resumed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Fill *fill = user_data;
  GError *error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    if (fill->error == NULL)
      fill->error = error;
    else
      g_error_free (error);
  } else {
    fill->slot->paused = FALSE;
  }
  fill_warm_step_done (fill);
}

static void
fill_warmed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Fill *fill = user_data;
  GError *error = NULL;

  fill->slot->agent = box_libvirt_guest_setup_finish (result, &error);
  if (fill->slot->agent == NULL) {
    if (fill->error == NULL)
      fill->error = error;
    else
      g_error_free (error);
  }
  fill_warm_step_done (fill);
}

static void
fill_restored (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Fill *fill = user_data;
  g_autofree char *socket = box_libvirt_vm_path (fill->self->config.vm_dir, fill->slot->vm_id,
                                                 "agent.sock");
  BoxLibvirtGuestSetup setup = {
    .socket_path = socket,
    .steps = BOX_LIBVIRT_POOL_WARM_STEPS,
    .hostname = "box",
    .net = fill->slot->net,
    .ca_pem = fill->self->guest_ca,
    .timeout_s = 60,
  };

  if (!box_libvirt_run_finish (result, &fill->error)) {
    fill_done (fill);
    return;
  }
  fill->slot->paused = TRUE;
  if (fill->slot->net != NULL)
    setup.steps |= BOX_LIBVIRT_GUEST_NETWORK;
  if (fill->slot->disk_bytes > fill->self->image->rootfs_bytes) {
    setup.steps |= BOX_LIBVIRT_GUEST_GROW_FS;
    setup.disk_bytes = fill->slot->disk_bytes;
  }
  /* connect first: the agent then sees its host the moment it runs */
  fill->pending = 2;
  setup.context = box_plugin_get_context (BOX_PLUGIN (fill->self));
  box_libvirt_guest_setup_async (&setup, NULL, fill_warmed, fill);
  box_libvirt_run_in_thread (fill->self, fill_run_work, fill, NULL, NULL, fill_resumed, fill);
}

/* Starts a fork of @tmpl: for @waiter (a take_slot task, taken) or the
 * pool.  Its disk starts at @disk_bytes (0: the pool's size). */
void
box_libvirt_pool_fill (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl, GTask *waiter,
                       guint64 disk_bytes)
{
  Fill *fill = g_new0 (Fill, 1);
  BoxNetwork *network = box_libvirt_get_network (self);
  BoxLibvirtDomainSpec spec;
  BoxLibvirtOwner owner = { .role = "pool", .state_dir = self->state_dir,
                            .vm_dir = self->config.vm_dir };
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *disk = NULL;
  g_autofree char *socket = NULL;
  g_autofree char *console = NULL;
  g_autofree char *ram = NULL;
  g_autofree char *cmdline = box_libvirt_kernel_cmdline ("box", NULL);

  fill->self = box_libvirt_hold (self);
  fill->tmpl = tmpl;
  fill->waiter = waiter;
  fill->started = g_get_monotonic_time ();
  fill->slot = g_new0 (BoxLibvirtSlot, 1);
  fill->slot->vm_id = box_libvirt_new_vm_id ();
  fill->slot->tmpl = tmpl;
  fill->slot->disk_bytes = disk_bytes != 0 ? disk_bytes :
                           (guint64) self->image->resources.disk_gib << 30;
  fill->slot->disk_bytes = MAX (fill->slot->disk_bytes, self->image->rootfs_bytes);
  fill->domain = box_libvirt_vm_domain_name (fill->slot->vm_id);
  if (network != NULL) {
    fill->slot->net_id = g_strconcat (BOX_LIBVIRT_POOL_NET_PREFIX, fill->slot->vm_id, NULL);
    fill->slot->net = box_network_attach (network, fill->slot->net_id, &error);
    if (fill->slot->net == NULL) {
      g_clear_pointer (&fill->slot->net_id, g_free);
      if (waiter != NULL) {
        g_task_return_error (waiter, box_error_convert (error, "network"));
        g_object_unref (waiter);
      } else {
        g_warning ("libvirt: cannot attach a pool VM to the network: %s", error->message);
      }
      fill_free (fill);
      return;
    }
  }
  if (waiter == NULL)
    tmpl->filling++;
  tmpl->in_flight = g_list_prepend (tmpl->in_flight, fill);
  box_libvirt_pool_record_add (self, fill->slot->vm_id);
  dir = box_libvirt_vm_path (self->config.vm_dir, fill->slot->vm_id, NULL);
  if (!box_libvirt_claim_vm_dir (self, dir, &fill->uid, &fill->error)) {
    fill_done (fill);
    return;
  }
  disk = box_libvirt_vm_path (self->config.vm_dir, fill->slot->vm_id, "disk.qcow2");
  socket = box_libvirt_vm_path (self->config.vm_dir, fill->slot->vm_id, "agent.sock");
  console = box_libvirt_vm_path (self->config.vm_dir, fill->slot->vm_id, "console.log");
  ram = g_build_filename (tmpl->dir, "ram", NULL);
  box_libvirt_template_spec (self, tmpl, &spec);
  spec.uid = fill->uid;
  spec.owner = &owner;
  spec.name = fill->domain;
  spec.cmdline = cmdline;
  spec.disk = disk;
  spec.agent_socket = socket;
  spec.console_log = console;
  spec.ram_path = ram;
  spec.ram_shared = FALSE;
  spec.ram_kib = box_libvirt_file_ram_kib (ram);
  spec.incoming = TRUE;
  if (fill->slot->net != NULL) {
    spec.nic = BOX_LIBVIRT_NIC_TAP;
    spec.tap = fill->slot->net->ifname;
    spec.mac = fill->slot->net->mac;
  }
  fill->xml = box_libvirt_domain_xml (&spec);
  box_libvirt_run_in_thread (self, fill_work, fill, NULL, NULL, fill_restored, fill);
}

void
box_libvirt_template_prepare (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl)
{
  if (!tmpl->ready)
    box_libvirt_template_build (self, tmpl);
}

/* ---- the pool's size ---- */

/* A pool domain's cost: measured, else (before the first fill) its RAM. */
static guint64
slot_cost_mib (BoxLibvirtTemplate *tmpl)
{
  return tmpl->slot_mib != 0 ? tmpl->slot_mib : tmpl->memory_mib;
}

static guint64
pool_mib (BoxLibvirtTemplate *tmpl)
{
  return (g_queue_get_length (&tmpl->slots) + tmpl->filling) * slot_cost_mib (tmpl);
}

void
box_libvirt_templates_count (BoxLibvirtPlugin *self, guint *target, guint *ready,
                             guint *filling, guint64 *memory_mib)
{
  GHashTableIter iter;
  gpointer value;

  *target = *ready = *filling = 0;
  *memory_mib = 0;
  g_hash_table_iter_init (&iter, self->templates);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxLibvirtTemplate *tmpl = value;

    if (!tmpl->ready)
      continue;
    *target += tmpl->demand.target;
    *ready += g_queue_get_length (&tmpl->slots);
    *filling += tmpl->filling;
    *memory_mib += pool_mib (tmpl);
  }
  /* forks made ready in advance and standby domains share the pools' budget */
  *memory_mib += box_libvirt_readies_mib (self) + box_libvirt_standbys_mib (self);
}

void
box_libvirt_pools_limits (BoxLibvirtPlugin *self, guint64 own_mib, guint floor, guint ceiling,
                          guint64 slot_mib, BoxLibvirtPoolLimits *limits)
{
  guint target, ready, filling;
  guint64 all_mib, others_mib, held_mib;

  box_libvirt_templates_count (self, &target, &ready, &filling, &all_mib);
  others_mib = all_mib - MIN (all_mib, own_mib);
  held_mib = box_libvirt_memory_held_mib (self) + others_mib;
  *limits = (BoxLibvirtPoolLimits) {
    .floor = floor,
    .ceiling = ceiling,
    .budget_mib = self->pool_budget_mib > others_mib ? self->pool_budget_mib - others_mib : 0,
    .room_mib = self->max_memory_mib > held_mib ? self->max_memory_mib - held_mib : 0,
    .slot_mib = slot_mib,
    .idle_us = (gint64) self->config.pool_idle_s * G_USEC_PER_SEC,
  };
}

gboolean
box_libvirt_pools_room_for (BoxLibvirtPlugin *self, guint64 mib)
{
  BoxLibvirtPoolLimits limits;

  box_libvirt_pools_limits (self, 0, 0, 0, 0, &limits);
  return mib <= limits.budget_mib && mib <= limits.room_mib;
}

static void
pool_limits (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl, BoxLibvirtPoolLimits *limits)
{
  box_libvirt_pools_limits (self, tmpl->ready ? pool_mib (tmpl) : 0, self->config.pool_size,
                            self->config.pool_max_size, slot_cost_mib (tmpl), limits);
}

static gboolean
slot_discard_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  slot_discard (self, data);
  return TRUE;
}

static void
slot_discarded (GObject *source, GAsyncResult *result, gpointer user_data)
{
  box_libvirt_run_finish (result, NULL);
}

/* the next shrink step, or the end of a burst that fills waited for */
static gboolean
refill_step (gpointer data)
{
  BoxLibvirtTemplate *tmpl = data;

  tmpl->refill_source = 0;
  box_libvirt_template_refill (tmpl->plugin, tmpl);
  return G_SOURCE_REMOVE;
}

/* How long fills still wait for the creates of a burst (µs), 0: not. */
static gint64
fill_wait_us (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl, gint64 now)
{
  gint64 quiet_at = tmpl->demand.last_create + BOX_LIBVIRT_POOL_FILL_QUIET_MS * 1000;
  guint low = self->config.pool_fill_jobs;

  if (tmpl->demand.last_create == 0 || now >= quiet_at ||
      g_queue_get_length (&tmpl->slots) <= low)
    return 0;
  return quiet_at - now;
}

void
box_libvirt_template_refill (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl)
{
  BoxLibvirtPoolLimits limits;
  guint target, before = tmpl->demand.target;
  gint64 now = g_get_monotonic_time (), next, wait_us;

  if (!self->started || !tmpl->ready)
    return;
  pool_limits (self, tmpl, &limits);
  target = box_libvirt_pool_target (&tmpl->demand, &limits, now);
  if (target != before)
    g_debug ("libvirt: pool of template %s: target %u (was %u; %u ready, %u filling, "
             "%" G_GUINT64_FORMAT " MiB a domain)", tmpl->key, target, before,
             g_queue_get_length (&tmpl->slots), tmpl->filling, limits.slot_mib);
  /* beyond the target (idle, or memory short): paused domains end, the
   * most recently filled first (blocking libvirt calls: in a worker) */
  while (g_queue_get_length (&tmpl->slots) + tmpl->filling > target &&
         !g_queue_is_empty (&tmpl->slots)) {
    BoxLibvirtSlot *slot = g_queue_pop_tail (&tmpl->slots);

    g_debug ("libvirt: pool of template %s: ending pool VM %s (target %u)", tmpl->key,
             slot->vm_id, target);
    if (slot->agent != NULL) {
      box_agent_close (slot->agent);
      g_clear_object (&slot->agent);
    }
    box_libvirt_run_in_thread (self, slot_discard_work, slot,
                               (GDestroyNotify) box_libvirt_slot_free, NULL, slot_discarded,
                               NULL);
  }
  /* fills wait while a burst is served from a pool that holds enough */
  wait_us = fill_wait_us (self, tmpl, now);
  while (wait_us == 0 && tmpl->filling < self->config.pool_fill_jobs &&
         g_queue_get_length (&tmpl->slots) + tmpl->filling < target)
    box_libvirt_pool_fill (self, tmpl, NULL, 0);
  /* the next shrink step, or the end of the burst */
  g_clear_handle_id (&tmpl->refill_source, g_source_remove);
  next = box_libvirt_pool_next_shrink (&tmpl->demand, &limits);
  if (wait_us > 0 && g_queue_get_length (&tmpl->slots) + tmpl->filling < target)
    next = next == 0 ? now + wait_us : MIN (next, now + wait_us);
  if (next != 0)
    tmpl->refill_source = g_timeout_add_full (G_PRIORITY_DEFAULT,
                                              (guint) ((MAX (next - now, 0) + 999) / 1000),
                                              refill_step, tmpl, NULL);
}

void
box_libvirt_template_take_slot_async (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl,
                                      guint64 disk_bytes, GCancellable *cancellable,
                                      GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  BoxLibvirtSlot *slot = g_queue_peek_head (&tmpl->slots);

  g_task_set_source_tag (task, box_libvirt_template_take_slot_async);
  g_object_set_data (G_OBJECT (task), "box-disk-bytes", GSIZE_TO_POINTER (disk_bytes));
  /* the demand the pool's size follows: a create that finds the pool
   * empty says it is too small for the rate it refills at */
  box_libvirt_pool_demand_note (&tmpl->demand, g_get_monotonic_time (), slot == NULL);
  /* a pool disk has the default size: a smaller disk needs its own domain */
  if (slot != NULL && slot->disk_bytes <= disk_bytes) {
    g_queue_pop_head (&tmpl->slots);
    g_task_return_pointer (task, slot, (GDestroyNotify) box_libvirt_slot_free);
    g_object_unref (task);
    box_libvirt_template_refill (self, tmpl);
    return;
  }
  if (!tmpl->ready) {
    g_ptr_array_add (tmpl->waiters, task);
    box_libvirt_template_build (self, tmpl);
    return;
  }
  box_libvirt_pool_fill (self, tmpl, task, disk_bytes);
  box_libvirt_template_refill (self, tmpl);
}

BoxLibvirtSlot *
box_libvirt_template_take_slot_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_libvirt_template_slot_claimed (BoxLibvirtPlugin *self, BoxLibvirtSlot *slot)
{
  box_libvirt_pool_record_remove (self, slot->vm_id);
}

void
box_libvirt_template_slot_discard (BoxLibvirtPlugin *self, BoxLibvirtSlot *slot)
{
  slot_discard (self, slot);
}

void
box_libvirt_templates_drain (BoxLibvirtPlugin *self)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->templates);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxLibvirtTemplate *tmpl = value;
    BoxLibvirtSlot *slot;

    g_clear_handle_id (&tmpl->refill_source, g_source_remove);
    while ((slot = g_queue_pop_head (&tmpl->slots)) != NULL) {
      slot_discard (self, slot);
      box_libvirt_slot_free (slot);
    }
    /* fills under way: their domains, files and taps go now (boxd may
     * exit before their completions run); their threads notice.  What a
     * crash leaves, the pool records tell the next start. */
    for (GList *l = tmpl->in_flight; l != NULL; l = l->next) {
      Fill *fill = l->data;
      virConnectPtr conn = box_libvirt_conn_get (self->conn, NULL);

      g_atomic_int_set (&fill->cancelled, 1);
      if (conn != NULL) {
        box_libvirt_domain_destroy (conn, fill->domain, NULL);
        virConnectClose (conn);
      }
      if (fill->slot != NULL)
        slot_discard (self, fill->slot);   /* idempotent */
    }
  }
}

void
box_libvirt_templates_sweep (BoxLibvirtPlugin *self)
{
  const char *state_dir = box_plugin_get_state_dir (BOX_PLUGIN (self));
  g_autofree char *pool_dir = NULL;
  g_autofree char *templates_dir = g_build_filename (self->config.vm_dir, "templates", NULL);
  g_autoptr(GDir) dir = NULL;
  const char *entry;

  if (state_dir == NULL)
    return;
  pool_dir = g_build_filename (state_dir, "pool", NULL);
  dir = g_dir_open (pool_dir, 0, NULL);
  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autoptr(BoxLibvirtSlot) slot = g_new0 (BoxLibvirtSlot, 1);
    g_autoptr(GDir) tdir = NULL;
    g_autofree char *suffix = NULL;
    const char *tentry;

    if (!box_sandbox_id_is_valid (entry))
      continue;
    slot->vm_id = g_strdup (entry);
    slot->net_id = g_strconcat (BOX_LIBVIRT_POOL_NET_PREFIX, entry, NULL);
    g_message ("libvirt: removing pool VM %s left by a previous run", entry);
    slot_discard (self, slot);
    /* a template build it was */
    suffix = g_strconcat (".tmp-", entry, NULL);
    tdir = g_dir_open (templates_dir, 0, NULL);
    while (tdir != NULL && (tentry = g_dir_read_name (tdir)) != NULL) {
      if (g_str_has_suffix (tentry, suffix)) {
        g_autofree char *path = g_build_filename (templates_dir, tentry, NULL);
        box_libvirt_remove_tree (path, NULL);
      }
    }
  }
}
