/* box-libvirt-plugin.c: the `libvirt` hypervisor, boxd's default.
 *
 * One libvirt domain (QEMU, q35, direct kernel boot) per awake sandbox;
 * creates are forks of a template snapshot taken from a warm pool; pause
 * is hot (vCPUs stopped) and turns cold (a snapshot file, QEMU ended) after
 * a while.  plugins/libvirt/README.md explains the design and its figures.
 *
 *   [plugin.libvirt]
 *   uri=qemu:///system     libvirt connection
 *   image_dir=             guest images (default $BOX_IMAGE_CACHE or /var/cache/box/images)
 *   vm_dir=/var/lib/libvirt/box   disks, RAM and snapshot files; QEMU's user must reach it
 *   accel=auto             auto (probe KVM), kvm or tcg
 *   qemu_user=libvirt-qemu / qemu_group=kvm    QEMU's group, and the user of VMs
 *                          made before uid_range
 *   uid_range=1879048192-1879113727   one uid per VM's QEMU (box-libvirt-uids.c)
 *   allow_tcg=true         false: without KVM no sandbox starts (TCG is no boundary)
 *   pool_size=2            warm (restored, paused) domains per template snapshot, at least
 *   pool_max_size=64       at most (the pool grows with the creates of the last minute)
 *   pool_memory_mib=0      every pool's domains together (0: max_memory_mib / 8)
 *   pool_idle_s=120        no create for this long: pools shrink, a domain at a time
 *   pool_fill_jobs=2       pool domains made at once, per template
 *   hot_pause_s=60         a pause turns into a cold snapshot after this (0: at once)
 *   max_memory_mib=0       0: the host's memory minus a reserve
 *   max_cpus=0             0: the host's CPUs times cpu_overcommit
 *   cpu_overcommit=128
 *   tb_cache_mib=128       TCG translation cache per VM
 *   boot_timeout_s=120     cold boot to agent-ready
 *   disk_reserve_mib=256   what a checkpoint, restore or fork leaves free on
 *                          vm_dir's file system (503 capacity otherwise)
 *   checkpoint_materialise=true   memory checkpoints made template-like in the
 *                          background (box-libvirt-materialise.c); false: never
 *   checkpoint_ready=true  forks of each sandbox's newest materialised memory
 *                          checkpoint made in advance (box-libvirt-ready.c)
 *   checkpoint_ready_max=10   at most so many per sandbox (they follow its forks)
 *   cold_standby=true      a cold VM's domain started in advance, waiting for
 *                          its state, for its wake (box-libvirt-standby.c)
 *   ram_fault_in=true      a restored VM's RAM mapping faulted in,
 *                          in the background, ahead of its next save
 *                          (box-libvirt-fault-in.c)
 *   disk_cache=writeback   QEMU's disk cache: writeback, none, or unsafe (guest
 *                          flushes dropped: faster pauses, unsafe at a host crash)
 */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>

#include "box-libvirt-private.h"

/* Memory left to the host: this much plus 5 % of the total. */
#define BOX_LIBVIRT_MEMORY_RESERVE_MIB 1024

static void box_libvirt_plugin_hypervisor_init (BoxHypervisorInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxLibvirtPlugin, box_libvirt_plugin, BOX_TYPE_PLUGIN,
                               G_IMPLEMENT_INTERFACE (BOX_TYPE_HYPERVISOR,
                                                      box_libvirt_plugin_hypervisor_init))

/* ---- shared helpers ---- */

/* How long a stop waits for the jobs under way (box_libvirt_plugin_stop()). */
#define BOX_LIBVIRT_STOP_WAIT_S 60

typedef struct {
  BoxLibvirtPlugin  *self;
  BoxLibvirtWorkFunc func;
  gpointer           data;
  GDestroyNotify     data_free;
} Work;

BoxLibvirtPlugin *
box_libvirt_hold (BoxLibvirtPlugin *self)
{
  g_atomic_int_inc (&self->works);
  return g_object_ref (self);
}

void
box_libvirt_release (BoxLibvirtPlugin *self)
{
  /* before the unref: this may be the last reference */
  g_atomic_int_add (&self->works, -1);
  g_object_unref (self);
}

/* With the task: after its completion ran. */
static void
work_free (Work *work)
{
  if (work->data_free != NULL)
    work->data_free (work->data);
  box_libvirt_release (work->self);
  g_free (work);
}

/* One job on a worker of the plugin's pool; @data is a reference on the
 * task, whose completion GTask brings back to the main context. */
static void
work_thread (gpointer data, gpointer user_data)
{
  g_autoptr(GTask) task = data;
  Work *work = g_task_get_task_data (task);
  GError *error = NULL;

  if (work->func (BOX_LIBVIRT_PLUGIN (g_task_get_source_object (task)), work->data, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

void
box_libvirt_run_in_thread (BoxLibvirtPlugin *self, BoxLibvirtWorkFunc func, gpointer data,
                           GDestroyNotify data_free, GCancellable *cancellable,
                           GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  Work *work = g_new0 (Work, 1);

  work->self = box_libvirt_hold (self);
  work->func = func;
  work->data = data;
  work->data_free = data_free;
  g_task_set_source_tag (task, box_libvirt_run_in_thread);
  g_task_set_task_data (task, work, (GDestroyNotify) work_free);
  /* libvirt calls block (saving a VM's memory takes seconds): they go to
   * the plugin's own bounded pool, not GLib's, which everyone shares */
  g_thread_pool_push (self->workers, g_steal_pointer (&task), NULL);
}

gboolean
box_libvirt_run_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

BoxNetwork *
box_libvirt_get_network (BoxLibvirtPlugin *self)
{
  return box_plugin_context_get_network (box_plugin_get_context (BOX_PLUGIN (self)));
}

gboolean
box_libvirt_tcg_refused (BoxLibvirtPlugin *self)
{
  return !self->config.allow_tcg && g_strcmp0 (self->accel, "kvm") != 0;
}

BoxLibvirtVm *
box_libvirt_lookup_vm (BoxLibvirtPlugin *self, const char *id)
{
  return id != NULL ? g_hash_table_lookup (self->vms, id) : NULL;
}

BoxLibvirtVm *
box_libvirt_find_vm_by_domain (BoxLibvirtPlugin *self, const char *domain_name)
{
  GHashTableIter iter;
  gpointer value;

  if (!g_str_has_prefix (domain_name, BOX_LIBVIRT_NAME_PREFIX))
    return NULL;
  g_hash_table_iter_init (&iter, self->vms);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxLibvirtVm *vm = value;
    if (g_strcmp0 (vm->vm_id, domain_name + strlen (BOX_LIBVIRT_NAME_PREFIX)) == 0)
      return vm;
  }
  return NULL;
}

void
box_libvirt_save_vm (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  g_autoptr(GError) error = NULL;

  if (!box_libvirt_vm_save (vm, box_plugin_get_state_dir (BOX_PLUGIN (self)), &error))
    g_warning ("libvirt: %s", error->message);
}

static void
agent_closed_cb (BoxAgent *agent, GError *error, gpointer user_data)
{
  BoxLibvirtVm *vm = user_data;

  g_debug ("libvirt: the agent connection of %s closed: %s", vm->id,
           error != NULL ? error->message : "");
}

void
box_libvirt_set_agent (BoxLibvirtPlugin *self, BoxLibvirtVm *vm, BoxAgent *agent)
{
  if (vm->agent == agent)
    return;
  if (vm->agent != NULL) {
    g_signal_handler_disconnect (vm->agent, vm->agent_closed_id);
    box_agent_close (vm->agent);
    g_clear_object (&vm->agent);
    vm->agent_closed_id = 0;
  }
  if (agent != NULL) {
    vm->agent = g_object_ref (agent);
    vm->agent_closed_id = g_signal_connect (agent, "closed", G_CALLBACK (agent_closed_cb), vm);
  }
}

/* ---- per-VM lock ---- */

static gboolean
lock_granted_cb (gpointer user_data)
{
  GTask *task = G_TASK (user_data);

  g_task_return_boolean (task, TRUE);
  g_object_unref (task);
  return G_SOURCE_REMOVE;
}

void
box_libvirt_vm_lock_async (BoxLibvirtPlugin *self, BoxLibvirtVm *vm,
                           GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, NULL, callback, user_data);

  g_task_set_source_tag (task, box_libvirt_vm_lock_async);
  if (vm->busy) {
    g_queue_push_tail (&vm->waiting, task);
    return;
  }
  vm->busy = TRUE;
  g_idle_add (lock_granted_cb, task);
}

void
box_libvirt_vm_unlock (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  GTask *next = g_queue_pop_head (&vm->waiting);

  if (next != NULL) {
    g_idle_add (lock_granted_cb, next);
    return;
  }
  vm->busy = FALSE;
  if (vm->gone)
    box_libvirt_vm_free (vm);
}

/* ---- events ---- */

static void
domain_stopped_cb (const char *domain_name, int detail, gpointer user_data)
{
  BoxLibvirtPlugin *self = user_data;
  BoxLibvirtVm *vm = box_libvirt_find_vm_by_domain (self, domain_name);

  /* (a cold VM's standby ends unexpected too: box-libvirt-standby.c) */
  if (vm == NULL || (vm->expect_stop && !(vm->cold && vm->standby)) || !self->started)
    return;
  g_debug ("libvirt: domain %s stopped (detail %d)", domain_name, detail);
  box_libvirt_vm_stopped (self, vm);
}

/* ---- capacity ---- */

/* Memory (MiB) and CPUs that VMs hold now: a QEMU's private memory as the
 * kernel counts it (a fork shares the template's pages until it writes
 * them, so its declared size says little); vCPUs of running VMs. */
static void
count_usage (BoxLibvirtPlugin *self, guint64 *memory_mib, guint64 *hot_mib, guint64 *cpus)
{
  GHashTableIter iter;
  gpointer value;

  *memory_mib = 0;
  *hot_mib = 0;
  *cpus = 0;
  g_hash_table_iter_init (&iter, self->vms);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxLibvirtVm *vm = value;
    g_autofree char *domain = NULL;
    guint64 rss;

    if (vm->state != BOX_VM_STATE_RUNNING &&
        !(vm->state == BOX_VM_STATE_SUSPENDED && !vm->cold))
      continue;
    domain = box_libvirt_vm_domain_name (vm->vm_id);
    rss = box_libvirt_qemu_rss_mib (domain);
    if (rss == 0)
      rss = vm->resources.memory_mib;
    *memory_mib += rss;
    if (vm->state == BOX_VM_STATE_RUNNING)
      *cpus += vm->resources.cpus;
    else
      *hot_mib += rss;
  }
}

guint64
box_libvirt_memory_held_mib (BoxLibvirtPlugin *self)
{
  guint64 memory, hot, cpus;

  count_usage (self, &memory, &hot, &cpus);
  return memory - hot;
}

static gint
compare_paused_at (gconstpointer a, gconstpointer b)
{
  const BoxLibvirtVm *vm_a = *(BoxLibvirtVm *const *) a;
  const BoxLibvirtVm *vm_b = *(BoxLibvirtVm *const *) b;

  return (vm_a->paused_at > vm_b->paused_at) - (vm_a->paused_at < vm_b->paused_at);
}

/* Hot pauses turn cold, oldest first, until @needed_mib are freed. */
static void
reclaim_hot (BoxLibvirtPlugin *self, guint64 needed_mib)
{
  g_autoptr(GPtrArray) candidates = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;
  guint64 freed = 0;

  g_hash_table_iter_init (&iter, self->vms);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxLibvirtVm *vm = value;
    if (vm->state == BOX_VM_STATE_SUSPENDED && !vm->cold && !vm->busy)
      g_ptr_array_add (candidates, vm);
  }
  g_ptr_array_sort (candidates, compare_paused_at);
  for (guint i = 0; i < candidates->len && freed < needed_mib; i++) {
    BoxLibvirtVm *vm = g_ptr_array_index (candidates, i);
    g_autofree char *domain = box_libvirt_vm_domain_name (vm->vm_id);
    guint64 rss = box_libvirt_qemu_rss_mib (domain);

    freed += rss != 0 ? rss : vm->resources.memory_mib;
    g_message ("libvirt: memory is short; the pause of sandbox %s turns cold", vm->id);
    if (vm->cold_source != 0) {
      g_source_remove (vm->cold_source);
      vm->cold_source = 0;
    }
    box_libvirt_vm_make_cold (self, vm);
  }
}

static gboolean
box_libvirt_plugin_check_room (BoxHypervisor *hypervisor, const BoxResources *resources,
                               GError **error)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (hypervisor);
  guint64 memory = 0, hot = 0, cpus = 0;
  guint64 want_memory;
  guint64 want_cpus;

  g_return_val_if_fail (resources != NULL, FALSE);
  want_memory = resources->memory_mib != 0 ? resources->memory_mib :
                (self->image != NULL ? self->image->resources.memory_mib : 0);
  want_cpus = resources->cpus != 0 ? resources->cpus :
              (self->image != NULL ? self->image->resources.cpus : 0);
  count_usage (self, &memory, &hot, &cpus);
  if (cpus + want_cpus > self->max_cpus ||
      want_memory > self->max_memory_mib ||
      memory - hot + want_memory > self->max_memory_mib) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CAPACITY,
                 "no node has room for %" G_GUINT64_FORMAT " CPUs and %" G_GUINT64_FORMAT
                 " MiB (in use: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " CPUs, %"
                 G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " MiB)", want_cpus, want_memory,
                 cpus, self->max_cpus, memory, self->max_memory_mib);
    return FALSE;
  }
  /* it fits once hot pauses let go of their memory */
  if (memory + want_memory > self->max_memory_mib)
    reclaim_hot (self, memory + want_memory - self->max_memory_mib);
  return TRUE;
}

/* ---- the rest of BoxHypervisor ---- */

static const char *
box_libvirt_plugin_get_accel (BoxHypervisor *hypervisor)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (hypervisor);

  return self->accel != NULL ? self->accel : "tcg";
}

/* Memory snapshots (pause and resume) with a guest agent; a pause stays hot
 * for hot_pause_s; checkpoints (memory and disk only), restores and forks.
 * No images yet (run_async answers UNSUPPORTED for them). */
static void
box_libvirt_plugin_get_capabilities (BoxHypervisor *hypervisor, BoxHypervisorCapabilities *caps)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (hypervisor);

  caps->accel = box_libvirt_plugin_get_accel (hypervisor);
  caps->flags = BOX_HYPERVISOR_CAP_GUEST_AGENT | BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS |
                BOX_HYPERVISOR_CAP_CHECKPOINTS | BOX_HYPERVISOR_CAP_FORK;
  if (self->config.hot_pause_s > 0)
    caps->flags |= BOX_HYPERVISOR_CAP_HOT_PAUSE;
}

static GPtrArray *
box_libvirt_plugin_list_templates (BoxHypervisor *hypervisor)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (hypervisor);
  GPtrArray *templates = g_ptr_array_new_with_free_func ((GDestroyNotify) box_template_free);
  g_autoptr(BoxLibvirtImage) image = NULL;
  BoxTemplate *tmpl;

  /* what is really built now, not what was there at start */
  image = box_libvirt_image_load (self->config.image_dir != NULL ? self->config.image_dir :
                                  "/var/cache/box/images", NULL);
  if (image == NULL)
    return templates;
  tmpl = g_new0 (BoxTemplate, 1);
  tmpl->name = g_strdup ("base");
  tmpl->image = g_strdup ("");
  tmpl->resources = image->resources;
  g_ptr_array_add (templates, tmpl);
  return templates;
}

static void
box_libvirt_plugin_run_async (BoxHypervisor *hypervisor, BoxVmOp op, const BoxVmRequest *request,
                              GCancellable *cancellable, GAsyncReadyCallback callback,
                              gpointer user_data)
{
  box_libvirt_op_async (BOX_LIBVIRT_PLUGIN (hypervisor), op, request, cancellable, callback,
                        user_data);
}

static gboolean
box_libvirt_plugin_run_finish (BoxHypervisor *hypervisor, GAsyncResult *result, GError **error)
{
  return box_libvirt_op_finish (BOX_LIBVIRT_PLUGIN (hypervisor), result, error);
}

static BoxAgentClient *
box_libvirt_plugin_get_agent (BoxHypervisor *hypervisor, const char *sandbox_id, GError **error)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (hypervisor);
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (self, sandbox_id);

  if (vm == NULL || vm->state != BOX_VM_STATE_RUNNING) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                 "sandbox %s has no running VM", sandbox_id);
    return NULL;
  }
  if (vm->agent == NULL || box_agent_is_closed (vm->agent)) {
    /* reconnect: hello goes out now, calls may follow at once */
    g_autofree char *socket = box_libvirt_vm_path (self->config.vm_dir, vm->vm_id, "agent.sock");
    BoxPluginContext *context = box_plugin_get_context (BOX_PLUGIN (self));
    g_autoptr(BoxAgent) agent = box_libvirt_guest_connect_now (context, socket, error);

    if (agent == NULL)
      return NULL;
    box_libvirt_set_agent (self, vm, agent);
  }
  /* the agent the context made: boxd's BoxAgentClient */
  return (BoxAgentClient *) g_object_ref (vm->agent);
}

static BoxVmState
box_libvirt_plugin_query (BoxHypervisor *hypervisor, const char *sandbox_id,
                          gint64 *snapshot_at)
{
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (BOX_LIBVIRT_PLUGIN (hypervisor), sandbox_id);

  if (snapshot_at != NULL)
    *snapshot_at = vm != NULL && (vm->state == BOX_VM_STATE_SUSPENDED ||
                                  vm->state == BOX_VM_STATE_SHUTOFF) ? vm->snapshot_at : 0;
  return vm != NULL ? vm->state : BOX_VM_STATE_ABSENT;
}

static char **
box_libvirt_plugin_list_checkpoints (BoxHypervisor *hypervisor, const char *sandbox_id,
                                     GError **error)
{
  return box_libvirt_checkpoints_list (BOX_LIBVIRT_PLUGIN (hypervisor), sandbox_id, error);
}

static void
box_libvirt_plugin_set_guest_ca (BoxHypervisor *hypervisor, GBytes *pem)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (hypervisor);

  /* pool domains warmed up from now on take it; those warmed up before
   * with another CA get this one from the engine at their create */
  g_clear_pointer (&self->guest_ca, g_bytes_unref);
  self->guest_ca = pem != NULL ? g_bytes_ref (pem) : NULL;
}

static void
box_libvirt_plugin_hypervisor_init (BoxHypervisorInterface *iface)
{
  iface->get_accel = box_libvirt_plugin_get_accel;
  iface->get_capabilities = box_libvirt_plugin_get_capabilities;
  iface->list_templates = box_libvirt_plugin_list_templates;
  iface->check_room = box_libvirt_plugin_check_room;
  iface->run_async = box_libvirt_plugin_run_async;
  iface->run_finish = box_libvirt_plugin_run_finish;
  iface->get_agent = box_libvirt_plugin_get_agent;
  iface->query = box_libvirt_plugin_query;
  iface->list_checkpoints = box_libvirt_plugin_list_checkpoints;
  iface->set_guest_ca = box_libvirt_plugin_set_guest_ca;
}

/* ---- BoxPlugin ---- */

static gboolean
make_vm_dirs (BoxLibvirtPlugin *self, GError **error)
{
  const char *subdirs[] = { "", "vms", "templates" };

  for (guint i = 0; i < G_N_ELEMENTS (subdirs); i++) {
    g_autofree char *path = g_build_filename (self->config.vm_dir, subdirs[i], NULL);

    if (g_mkdir_with_parents (path, 0711) != 0 || g_chmod (path, 0711) != 0) {
      int saved_errno = errno;
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot create %s: %s", path,
                   g_strerror (saved_errno));
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
box_libvirt_plugin_start (BoxPlugin *plugin, GCancellable *cancellable, GError **error)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (plugin);
  const char *state_dir = box_plugin_get_state_dir (plugin);
  g_autofree char *how = NULL;
  virConnectPtr conn;
  unsigned long version = 0;
  guint64 host_memory;
  guint orphans;
  BoxLibvirtTemplate *tmpl;

  if (!box_libvirt_config_load (plugin, &self->config, error))
    return FALSE;
  self->state_dir = g_strdup (state_dir);
  self->image = box_libvirt_image_load (self->config.image_dir, error);
  if (self->image == NULL || !make_vm_dirs (self, error))
    return FALSE;
  self->conn = box_libvirt_conn_new (self->config.uri, domain_stopped_cb, self);
  conn = box_libvirt_conn_get (self->conn, error);
  if (conn == NULL)
    return FALSE;
  if (virConnectGetVersion (conn, &version) < 0) {
    virConnectClose (conn);
    return box_libvirt_set_error (error, "cannot read QEMU's version");
  }
  virConnectClose (conn);
  self->qemu_version = g_strdup_printf ("%lu.%lu.%lu", version / 1000000,
                                        (version / 1000) % 1000, version % 1000);
  self->accel = box_libvirt_choose_accel (self->config.accel, self->image, state_dir,
                                          self->qemu_version, &how);

  if (g_strcmp0 (self->accel, "kvm") != 0) {
    if (self->config.allow_tcg)
      g_warning ("libvirt: VMs run under TCG, without KVM (%s): TCG is not a security "
                 "boundary; a guest that escapes QEMU's emulator runs code as its QEMU's uid "
                 "on this host (set [plugin.libvirt] allow_tcg=false to refuse)", how);
    else
      g_warning ("libvirt: this host has no KVM (%s) and allow_tcg is false: no sandbox "
                 "will start", how);
  }

  host_memory = box_libvirt_host_memory_mib ();
  self->max_memory_mib = self->config.max_memory_mib;
  if (self->max_memory_mib == 0 && host_memory > BOX_LIBVIRT_MEMORY_RESERVE_MIB)
    self->max_memory_mib = host_memory - BOX_LIBVIRT_MEMORY_RESERVE_MIB - host_memory / 20;
  self->pool_budget_mib = self->config.pool_memory_mib != 0 ? self->config.pool_memory_mib :
                          self->max_memory_mib / 8;
  self->max_cpus = self->config.max_cpus;
  if (self->max_cpus == 0)
    self->max_cpus = (guint64) box_libvirt_host_cpus () * self->config.cpu_overcommit;

  conn = box_libvirt_conn_get (self->conn, error);
  if (conn == NULL)
    return FALSE;
  orphans = box_libvirt_sweep_orphans (conn);
  virConnectClose (conn);
  if (orphans > 0)
    g_message ("libvirt: ended %u VMs whose boxd is gone", orphans);
  box_libvirt_templates_sweep (self);
  box_libvirt_checkpoints_sweep (self);
  box_libvirt_templates_prune (self);
  box_libvirt_adopt (self);
  self->started = TRUE;
  box_libvirt_materialise_kick (self);
  box_libvirt_ready_kick (self);
  box_libvirt_standby_kick (self);

  tmpl = box_libvirt_template_get (self, self->image->resources.cpus,
                                   self->image->resources.memory_mib);
  g_message ("libvirt: %s (%s), QEMU %s, %s; template base (%u CPUs, %u MiB) snapshot %s; "
             "warm pool %u-%u per template within %" G_GUINT64_FORMAT " MiB, idle %u s; "
             "hot pause %u s; room for %" G_GUINT64_FORMAT
             " MiB and %" G_GUINT64_FORMAT " vCPUs; %u sandbox VMs known",
             self->accel, how, self->qemu_version, self->config.uri,
             self->image->resources.cpus, self->image->resources.memory_mib,
             box_libvirt_template_describe (tmpl), self->config.pool_size,
             self->config.pool_max_size, self->pool_budget_mib, self->config.pool_idle_s,
             self->config.hot_pause_s, self->max_memory_mib, self->max_cpus,
             g_hash_table_size (self->vms));
  /* make the default template's snapshot and pool now, in the background */
  if (box_libvirt_tcg_refused (self))
    return TRUE;
  if (tmpl->ready)
    box_libvirt_template_refill (self, tmpl);
  else if (self->config.pool_size > 0)
    box_libvirt_template_prepare (self, tmpl);
  return TRUE;
}

typedef struct {
  gint64   deadline;
  gboolean over;
} StopWait;

/* Every 100 ms: the last job may end on a worker thread, which wakes no one. */
static gboolean
stop_wait_tick (gpointer user_data)
{
  StopWait *wait = user_data;

  wait->over = g_get_monotonic_time () >= wait->deadline;
  return G_SOURCE_CONTINUE;
}

/* boxd exits after the stop: what is under way (a sandbox's operation, a
 * pool VM being filled, a template build, a materialisation, each job on
 * the workers) runs to its end, with the steps it waits for between jobs
 * (a guest's set-up, its agent's answer: their connections close at the
 * stop, so those end at once), so that none leaves a domain or a VM
 * directory behind.  The engine's API is down by now; what runs here is
 * the plugins' own work.  No new work starts: the pool, refills,
 * materialisations and cold timers check `started`. */
static void
wait_for_works (BoxLibvirtPlugin *self)
{
  g_autoptr(GMainContext) context = g_main_context_ref_thread_default ();
  g_autoptr(GSource) tick = NULL;
  StopWait wait = { g_get_monotonic_time () + BOX_LIBVIRT_STOP_WAIT_S * G_USEC_PER_SEC, FALSE };

  if (g_atomic_int_get (&self->works) == 0)
    return;
  tick = g_timeout_source_new (100);
  g_source_set_callback (tick, stop_wait_tick, &wait, NULL);
  g_source_attach (tick, context);
  while (g_atomic_int_get (&self->works) > 0 && !wait.over)
    g_main_context_iteration (context, TRUE);
  g_source_destroy (tick);
  if (wait.over)
    g_warning ("libvirt: %d jobs still under way %d s after the stop: what they leave, the "
               "next start removes", g_atomic_int_get (&self->works), BOX_LIBVIRT_STOP_WAIT_S);
}

static void
box_libvirt_plugin_stop (BoxPlugin *plugin)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (plugin);
  GHashTableIter iter;
  gpointer value;

  if (!self->started)
    return;
  self->started = FALSE;
  g_cancellable_cancel (self->cancellable);
  /* pool domains are cheap to make again; sandboxes' VMs keep running and
   * are adopted at the next start */
  box_libvirt_templates_drain (self);
  box_libvirt_readies_drain (self);
  box_libvirt_standbys_drain (self);
  box_libvirt_fault_ins_drain (self);
  box_libvirt_materialise_stop (self);
  g_hash_table_iter_init (&iter, self->vms);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxLibvirtVm *vm = value;

    g_clear_handle_id (&vm->cold_source, g_source_remove);
    box_libvirt_set_agent (self, vm, NULL);
  }
  wait_for_works (self);
}

static void
box_libvirt_plugin_add_status (BoxPlugin *plugin, GVariantBuilder *dict)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (plugin);
  GHashTableIter iter;
  gpointer value;
  guint pooled = 0, target = 0, filling = 0, ready = 0, ready_making = 0;
  guint64 pool_mib = 0;
  guint running = 0;
  guint hot = 0;

  box_libvirt_templates_count (self, &target, &pooled, &filling, &pool_mib);
  box_libvirt_readies_count (self, &ready, &ready_making);
  g_hash_table_iter_init (&iter, self->vms);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    BoxLibvirtVm *vm = value;
    running += vm->state == BOX_VM_STATE_RUNNING;
    hot += vm->state == BOX_VM_STATE_SUSPENDED && !vm->cold;
  }
  g_variant_builder_add (dict, "{sv}", "accel",
                         g_variant_new_string (self->accel != NULL ? self->accel : "tcg"));
  g_variant_builder_add (dict, "{sv}", "allow-tcg", g_variant_new_boolean (self->config.allow_tcg));
  g_variant_builder_add (dict, "{sv}", "uids-taken",
                         g_variant_new_uint32 (self->config.vm_dir == NULL ? 0 :
                                               box_libvirt_uids_taken (self->config.vm_dir,
                                                                       self->config.uid_first,
                                                                       self->config.uid_last)));
  g_variant_builder_add (dict, "{sv}", "qemu",
                         g_variant_new_string (self->qemu_version != NULL ?
                                               self->qemu_version : ""));
  g_variant_builder_add (dict, "{sv}", "uri",
                         g_variant_new_string (self->config.uri != NULL ? self->config.uri : ""));
  g_variant_builder_add (dict, "{sv}", "vms-running", g_variant_new_uint32 (running));
  g_variant_builder_add (dict, "{sv}", "vms-hot-paused", g_variant_new_uint32 (hot));
  g_variant_builder_add (dict, "{sv}", "pool-ready", g_variant_new_uint32 (pooled));
  g_variant_builder_add (dict, "{sv}", "pool-filling", g_variant_new_uint32 (filling));
  g_variant_builder_add (dict, "{sv}", "pool-target", g_variant_new_uint32 (target));
  g_variant_builder_add (dict, "{sv}", "pool-memory-mib", g_variant_new_uint64 (pool_mib));
  g_variant_builder_add (dict, "{sv}", "forks-ready", g_variant_new_uint32 (ready));
  g_variant_builder_add (dict, "{sv}", "forks-making-ready", g_variant_new_uint32 (ready_making));
  g_variant_builder_add (dict, "{sv}", "cold-standbys",
                         g_variant_new_uint32 (box_libvirt_standbys_count (self)));
  g_variant_builder_add (dict, "{sv}", "pool-budget-mib",
                         g_variant_new_uint64 (self->pool_budget_mib));
}

static void
box_libvirt_plugin_finalize (GObject *object)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (object);

  g_hash_table_unref (self->vms);
  g_hash_table_unref (self->templates);
  g_hash_table_unref (self->readies);
  g_clear_pointer (&self->guest_ca, g_bytes_unref);
  g_queue_clear_full (&self->materialise_queue, g_free);
  g_queue_clear_full (&self->standby_queue, g_free);
  g_queue_clear_full (&self->fault_in_queue, g_free);
  box_libvirt_conn_free (self->conn);
  box_libvirt_image_free (self->image);
  box_libvirt_config_clear (&self->config);
  g_free (self->accel);
  g_free (self->qemu_version);
  g_free (self->state_dir);
  g_object_unref (self->cancellable);
  /* every job holds a reference on the plugin: none is left here */
  g_thread_pool_free (self->workers, FALSE, TRUE);
  G_OBJECT_CLASS (box_libvirt_plugin_parent_class)->finalize (object);
}

static void
box_libvirt_plugin_class_init (BoxLibvirtPluginClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  BoxPluginClass *plugin_class = BOX_PLUGIN_CLASS (klass);

  object_class->finalize = box_libvirt_plugin_finalize;
  plugin_class->start = box_libvirt_plugin_start;
  plugin_class->stop = box_libvirt_plugin_stop;
  plugin_class->add_status = box_libvirt_plugin_add_status;
}

static void
box_libvirt_plugin_init (BoxLibvirtPlugin *self)
{
  self->vms = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                     (GDestroyNotify) box_libvirt_vm_free);
  self->templates = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                           (GDestroyNotify) box_libvirt_template_free);
  /* (entries are stolen when taken; what is left at finalize was only wanted) */
  self->readies = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                         (GDestroyNotify) box_libvirt_ready_set_free);
  self->cancellable = g_cancellable_new ();
  self->workers = g_thread_pool_new (work_thread, NULL, BOX_LIBVIRT_WORKERS, FALSE, NULL);
}

/* The usual hypervisor: `auto` takes it wherever it is installed (a host
 * without KVM runs it under TCG; a libvirtd that is down is an error at
 * start, as before, not a reason to fall back to a VM-less hypervisor). */
BOX_PLUGIN_DEFINE_FULL ("libvirt", "QEMU virtual machines through libvirt (the default hypervisor)",
                        box_libvirt_plugin_get_type, 100, BOX_PLUGIN_FLAG_NONE, NULL)
