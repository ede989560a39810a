/* box-libvirt-materialise.c: memory checkpoints made template-like, in the
 * background.
 *
 * A memory checkpoint's `state` is a full migration stream: a fork or
 * restore of it reads every page the guest had into a new QEMU (seconds
 * under TCG).  Once the checkpoint is acknowledged, a background job turns
 * it into what a template snapshot is (box-libvirt-template.c): a RAM file
 * and the device state alone, so that forks and restores map the RAM
 * privately (copy-on-write) and load only the devices
 * (box-libvirt-start.c).  The job:
 *   1. a helper domain, recorded like a pool or build domain
 *      (<state dir>/pool/<vm id>: a restart removes it), in a VM directory
 *      of its own: an overlay on the checkpoint's disk (never written:
 *      the guest never runs) and a sparse RAM file, mapped share=on;
 *   2. started paused with `-incoming defer`, it loads the checkpoint's
 *      state (the RAM pages land in the file), then migrates out with
 *      x-ignore-shared: only the device state, to `devstate`;
 *   3. the domain ends; the RAM file and devstate are moved into the
 *      checkpoint's directory as ram.tmp and devstate.tmp, synced, renamed
 *      to ram and devstate, and the manifest gains "ram": true (the
 *      commit: without it ram and devstate are not used, and the start's
 *      sweep removes them, with any *.tmp).
 * The `state` stays: a checkpoint of a checkpoint-restored VM, a lost QEMU
 * and a failed fast start still use it.  One job at a time, bounded by
 * BOX_LIBVIRT_MATERIALISE_TIMEOUT_S; a failure (a full disk, the checkpoint
 * deleted meanwhile, a timeout) leaves the checkpoint as it was, logged.
 * The RAM file is sparse: only pages the guest had (the room for them is
 * checked first).  The start queues again every memory checkpoint of its
 * own sandboxes that is not materialised.  [plugin.libvirt] checkpoint_materialise=false queues
 * none.
 *
 * The job yields to the sandboxes' own work: it starts only after
 * BOX_LIBVIRT_MATERIALISE_QUIET_S without a create, fork, wake, checkpoint
 * or restore (re-armed at each), never while one is under way
 * (self->heavy_ops, counted by box-libvirt-dispatch.c), its QEMU runs
 * SCHED_IDLE at nice 19 in the idle I/O class, and it waits (at most
 * BOX_LIBVIRT_MATERIALISE_YIELD_S) before its fsyncs while such an
 * operation runs.
 *
 * libvirt (not a bare QEMU) runs the helper: its domain start is the same
 * as a pool domain's, and the orphan sweep and the per-VM uids already
 * cover it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box-libvirt-op.h"

#define BOX_LIBVIRT_MATERIALISE_TIMEOUT_S 300
#define BOX_LIBVIRT_MATERIALISE_YIELD_S    30
/* A job starts after this long without a create, fork, wake, checkpoint or
 * restore: a restore or fork right after a checkpoint (what agents and
 * tests do) then loads its state alone, not beside the helper loading the
 * same checkpoint (on hosts where page faults are dear, 16 s alone against
 * 42-52 s beside it, and 2 s against 16-22 s for the automatic checkpoint
 * a restore takes first). */
#define BOX_LIBVIRT_MATERIALISE_QUIET_S     5

struct _BoxLibvirtMaterialise {
  BoxLibvirtPlugin *self;         /* a reference */
  char             *sandbox_id;
  char             *checkpoint_id;
  char             *helper_id;
  char             *domain;
  guint             timeout_source;
  gint              stopped;      /* atomic: timed out or the plugin stopped */
  gint64            started;
};

static void
job_free (BoxLibvirtMaterialise *job)
{
  if (job->timeout_source != 0)
    g_source_remove (job->timeout_source);
  box_libvirt_release (job->self);
  g_free (job->sandbox_id);
  g_free (job->checkpoint_id);
  g_free (job->helper_id);
  g_free (job->domain);
  g_free (job);
}

/* ---- the manifest ---- */

gboolean
box_libvirt_checkpoint_manifest_set_ram (const char *dir, GError **error)
{
  g_autofree char *path = g_build_filename (dir, "manifest.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autofree char *contents = NULL;
  g_autoptr(GError) local_error = NULL;

  if (!json_parser_load_from_file (parser, path, &local_error) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "%s: %s", path,
                 local_error != NULL ? local_error->message : "not an object");
    return FALSE;
  }
  json_object_set_boolean_member (json_node_get_object (json_parser_get_root (parser)), "ram",
                                  TRUE);
  json_generator_set_root (generator, json_parser_get_root (parser));
  contents = json_generator_to_data (generator, NULL);
  return box_libvirt_write_file (path, contents, error);
}

/* ---- the job's blocking part ---- */

static gboolean
errno_error (GError **error, const char *what, const char *path)
{
  int saved_errno = errno;

  g_set_error (error, BOX_ERROR,
               saved_errno == ENOSPC || saved_errno == EDQUOT ? BOX_ERROR_CAPACITY :
               BOX_ERROR_INTERNAL, "%s %s: %s", what, path, g_strerror (saved_errno));
  return FALSE;
}

static gboolean
sync_file (const char *path, GError **error)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  gboolean ok;

  if (fd < 0)
    return errno_error (error, "cannot open", path);
  ok = fsync (fd) == 0 || errno_error (error, "cannot write to disk", path);
  close (fd);
  return ok;
}

/* The helper's files in @hdir, its domain's XML. */
static char *
helper_prepare (BoxLibvirtPlugin *self, BoxLibvirtMaterialise *job, const char *ckpt,
                const char *hdir, guint uid, const BoxLibvirtCheckpointInfo *info,
                GError **error)
{
  g_autofree char *ckpt_disk = g_build_filename (ckpt, "disk.qcow2", NULL);
  g_autofree char *disk = g_build_filename (hdir, "disk.qcow2", NULL);
  g_autofree char *ram = g_build_filename (hdir, "ram", NULL);
  g_autofree char *socket = g_build_filename (hdir, "agent.sock", NULL);
  g_autofree char *console = g_build_filename (hdir, "console.log", NULL);
  g_autofree char *state = g_build_filename (ckpt, "state", NULL);
  BoxLibvirtOwner owner = { .role = "build", .state_dir = self->state_dir,
                            .vm_dir = self->config.vm_dir };
  BoxLibvirtDomainSpec spec = { 0 };
  guint64 ram_kib;
  int fd;

  /* the guest never runs: the disk is only there for its device state */
  if (!box_libvirt_layers_overlay (ckpt_disk, hdir, disk, NULL, error) ||
      !box_libvirt_give_to_qemu (self, disk, uid, error) ||
      !box_libvirt_layers_sync (self->config.vm_dir, self->config.qemu_uid, error))
    return NULL;
  /* the RAM block of the checkpoint's stream (box-libvirt-ram.c) */
  ram_kib = box_libvirt_state_ram_kib (state);
  if (ram_kib == 0)
    ram_kib = (guint64) info->resources.memory_mib * 1024;
  fd = open (ram, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate (fd, (off_t) ram_kib * 1024) != 0) {
    errno_error (error, "cannot create", ram);
    if (fd >= 0)
      close (fd);
    return NULL;
  }
  close (fd);
  if (!box_libvirt_give_to_qemu (self, ram, uid, error))
    return NULL;
  spec.name = job->domain;
  spec.owner = &owner;
  spec.accel = self->accel;
  spec.cpus = info->resources.cpus;
  spec.memory_mib = info->resources.memory_mib;
  spec.kernel = self->image->kernel;
  spec.initrd = self->image->initrd;
  spec.cmdline = "console=ttyS0 panic=-1 quiet";
  spec.disk = disk;
  spec.agent_socket = socket;
  spec.console_log = console;
  spec.ram_path = ram;
  spec.ram_shared = TRUE;
  spec.ram_kib = ram_kib;
  spec.incoming = TRUE;
  spec.nic = info->nic ? BOX_LIBVIRT_NIC_LOOSE : BOX_LIBVIRT_NIC_NONE;
  spec.uid = uid;
  spec.gid = self->config.qemu_gid;
  spec.tb_cache_mib = self->config.tb_cache_mib;
  spec.disk_cache = self->config.disk_cache;
  return box_libvirt_domain_xml (&spec);
}

/* Loads the checkpoint's state into the helper, saves its devices. */
static gboolean
helper_run (BoxLibvirtPlugin *self, BoxLibvirtMaterialise *job, const char *xml,
            const char *state, const char *devstate, guint memory_mib, GError **error)
{
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);
  virDomainPtr dom;
  gboolean ok;

  if (conn == NULL)
    return FALSE;
  dom = box_libvirt_domain_start (conn, xml, TRUE, memory_mib, self->config.tb_cache_mib, error);
  ok = dom != NULL;
  if (ok)
    box_libvirt_domain_background (job->domain);
  {
    g_autofree char *what = g_strconcat ("materialise of checkpoint ", job->checkpoint_id, NULL);
    box_libvirt_test_delay_named (what, job->sandbox_id, job->domain);
  }
  ok = ok && box_libvirt_migrate_load (dom, state, FALSE, error) &&
       box_libvirt_migrate_save (dom, devstate, TRUE, error);
  if (dom != NULL)
    virDomainFree (dom);
  /* the RAM file is complete once its QEMU is gone */
  ok = box_libvirt_domain_destroy (conn, job->domain, ok ? error : NULL) && ok;
  virConnectClose (conn);
  if (!ok && g_atomic_int_get (&job->stopped)) {
    g_clear_error (error);
    g_set_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                 "stopped after %d s at most (or the hypervisor stopped)",
                 BOX_LIBVIRT_MATERIALISE_TIMEOUT_S);
  }
  return ok;
}

/* Worker thread: until no create, fork, wake, checkpoint or restore runs
 * (BOX_LIBVIRT_MATERIALISE_YIELD_S at most), so that the fsyncs of the RAM
 * file do not hold up their disk writes. */
static gboolean
yield_to_operations (BoxLibvirtPlugin *self, BoxLibvirtMaterialise *job)
{
  gint64 end = g_get_monotonic_time () + BOX_LIBVIRT_MATERIALISE_YIELD_S * G_USEC_PER_SEC;

  while (g_atomic_int_get (&self->heavy_ops) > 0 && !g_atomic_int_get (&job->stopped) &&
         g_get_monotonic_time () < end)
    g_usleep (50 * 1000);
  return TRUE;
}

/* The helper's RAM file and devstate into @ckpt, then the manifest. */
static gboolean
move_in (const char *hdir, const char *ckpt, GError **error)
{
  static const char *const names[] = { "ram", "devstate" };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++) {
    g_autofree char *from = g_build_filename (hdir, names[i], NULL);
    g_autofree char *tmp_name = g_strconcat (names[i], ".tmp", NULL);
    g_autofree char *tmp = g_build_filename (ckpt, tmp_name, NULL);

    /* root's, 0600: box_libvirt_layers_sync() grants it to the forks */
    if (chown (from, 0, 0) != 0 || g_chmod (from, 0600) != 0)
      return errno_error (error, "cannot seal", from);
    if (!sync_file (from, error))
      return FALSE;
    if (g_rename (from, tmp) != 0)
      return errno_error (error, "cannot move into the checkpoint", tmp);
  }
  for (guint i = 0; i < G_N_ELEMENTS (names); i++) {
    g_autofree char *tmp_name = g_strconcat (names[i], ".tmp", NULL);
    g_autofree char *tmp = g_build_filename (ckpt, tmp_name, NULL);
    g_autofree char *final = g_build_filename (ckpt, names[i], NULL);

    if (g_rename (tmp, final) != 0)
      return errno_error (error, "cannot rename", tmp);
  }
  return sync_file (ckpt, error) && box_libvirt_checkpoint_manifest_set_ram (ckpt, error) &&
         sync_file (ckpt, error);
}

static gboolean
materialise_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtMaterialise *job = data;
  g_autofree char *ckpt = box_libvirt_checkpoint_dir (self, job->sandbox_id,
                                                      job->checkpoint_id);
  g_autofree char *state = g_build_filename (ckpt, "state", NULL);
  g_autofree char *hdir = box_libvirt_vm_path (self->config.vm_dir, job->helper_id, NULL);
  g_autofree char *devstate = g_build_filename (hdir, "devstate", NULL);
  g_autofree char *xml = NULL;
  BoxLibvirtCheckpointInfo info = { 0 };
  guint uid = 0;
  gboolean ok;

  if (!box_libvirt_checkpoint_info_load (self, job->sandbox_id, job->checkpoint_id, &info,
                                         error))
    return FALSE;
  if (!info.memory || info.ram) {
    box_libvirt_checkpoint_info_clear (&info);
    return TRUE;
  }
  /* the RAM file takes about what the state's pages take */
  ok = box_libvirt_check_disk_room (self, box_libvirt_file_allocated (state) + (1 << 20),
                                    error) &&
       box_libvirt_claim_vm_dir (self, hdir, &uid, error) &&
       (xml = helper_prepare (self, job, ckpt, hdir, uid, &info, error)) != NULL &&
       helper_run (self, job, xml, state, devstate, info.resources.memory_mib, error) &&
       !g_atomic_int_get (&job->stopped) &&
       yield_to_operations (self, job) && move_in (hdir, ckpt, error);
  box_libvirt_checkpoint_info_clear (&info);
  return ok;
}

static gboolean
cleanup_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtMaterialise *job = data;
  g_autofree char *hdir = box_libvirt_vm_path (self->config.vm_dir, job->helper_id, NULL);
  virConnectPtr conn = box_libvirt_conn_get (self->conn, NULL);

  if (conn != NULL) {
    box_libvirt_domain_destroy (conn, job->domain, NULL);
    virConnectClose (conn);
  }
  /* the helper's uid reads no layer any more */
  return box_libvirt_remove_tree (hdir, error) &&
         box_libvirt_layers_sync (self->config.vm_dir, self->config.qemu_uid, error);
}

/* ---- the queue (main thread) ---- */

static void job_next (BoxLibvirtPlugin *self);

static void
job_cleaned (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxLibvirtMaterialise *job = user_data;
  BoxLibvirtPlugin *self = job->self;
  g_autoptr(GError) error = NULL;

  if (!box_libvirt_run_finish (result, &error))
    g_warning ("libvirt: materialising checkpoint %s of %s: %s", job->checkpoint_id,
               job->sandbox_id, error->message);
  box_libvirt_pool_record_remove (self, job->helper_id);
  g_assert (self->materialising == job);
  self->materialising = NULL;
  job_next (self);
  job_free (job);
}

static void
job_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxLibvirtMaterialise *job = user_data;
  g_autoptr(GError) error = NULL;

  g_autofree char *dir = box_libvirt_checkpoint_dir (job->self, job->sandbox_id,
                                                     job->checkpoint_id);

  if (box_libvirt_run_finish (result, &error)) {
    g_message ("libvirt: sandbox %s: memory checkpoint %s materialised (RAM file and device "
               "state) in %.0f ms", job->sandbox_id, job->checkpoint_id,
               (g_get_monotonic_time () - job->started) / 1e3);
    /* its forks from now on: one made ready in advance (box-libvirt-ready.c) */
    box_libvirt_ready_want (job->self, job->sandbox_id, job->checkpoint_id);
  } else if (!job->self->started)
    g_message ("libvirt: sandbox %s: materialising memory checkpoint %s stopped with the "
               "hypervisor (the next start queues it again)", job->sandbox_id,
               job->checkpoint_id);
  else if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    g_message ("libvirt: sandbox %s: memory checkpoint %s deleted while it was materialised",
               job->sandbox_id, job->checkpoint_id);
  else
    g_warning ("libvirt: sandbox %s: memory checkpoint %s not materialised (forks and restores "
               "of it load its whole state): %s", job->sandbox_id, job->checkpoint_id,
               error->message);
  box_libvirt_run_in_thread (job->self, cleanup_work, job, NULL, NULL, job_cleaned, job);
}

static gboolean
destroy_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  const char *domain = data;
  virConnectPtr conn = box_libvirt_conn_get (self->conn, error);

  if (conn == NULL)
    return FALSE;
  box_libvirt_domain_destroy (conn, domain, NULL);
  virConnectClose (conn);
  return TRUE;
}

static void
destroyed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  box_libvirt_run_finish (result, NULL);
}

/* Ends the helper's QEMU: its migration fails, the job cleans up. */
static void
job_stop (BoxLibvirtMaterialise *job)
{
  g_atomic_int_set (&job->stopped, 1);
  box_libvirt_run_in_thread (job->self, destroy_work, g_strdup (job->domain), g_free, NULL,
                             destroyed, NULL);
}

static gboolean
job_timeout (gpointer user_data)
{
  BoxLibvirtMaterialise *job = user_data;

  job->timeout_source = 0;
  g_warning ("libvirt: sandbox %s: materialising checkpoint %s takes over %d s: stopped",
             job->sandbox_id, job->checkpoint_id, BOX_LIBVIRT_MATERIALISE_TIMEOUT_S);
  job_stop (job);
  return G_SOURCE_REMOVE;
}

static void
job_next (BoxLibvirtPlugin *self)
{
  BoxLibvirtMaterialise *job;
  char *entry;

  /* box_libvirt_materialise_kick() again once the operations ended */
  if (self->materialising != NULL || !self->started || box_libvirt_tcg_refused (self) ||
      g_atomic_int_get (&self->heavy_ops) > 0)
    return;
  entry = g_queue_pop_head (&self->materialise_queue);
  if (entry == NULL)
    return;
  job = g_new0 (BoxLibvirtMaterialise, 1);
  job->self = box_libvirt_hold (self);
  /* "<sandbox>\n<checkpoint>" */
  job->sandbox_id = entry;
  job->checkpoint_id = g_strdup (strchr (entry, '\n') + 1);
  *strchr (entry, '\n') = '\0';
  job->helper_id = box_libvirt_new_vm_id ();
  job->domain = box_libvirt_vm_domain_name (job->helper_id);
  job->started = g_get_monotonic_time ();
  job->timeout_source = g_timeout_add_seconds (BOX_LIBVIRT_MATERIALISE_TIMEOUT_S, job_timeout,
                                               job);
  self->materialising = job;
  box_libvirt_pool_record_add (self, job->helper_id);
  box_libvirt_run_in_thread (self, materialise_work, job, NULL, NULL, job_done, job);
}

static gboolean
quiet_over (gpointer user_data)
{
  BoxLibvirtPlugin *self = user_data;

  self->materialise_source = 0;
  job_next (self);
  return G_SOURCE_REMOVE;
}

/* job_next() once BOX_LIBVIRT_MATERIALISE_QUIET_S passed without a new kick. */
static void
job_next_when_quiet (BoxLibvirtPlugin *self)
{
  g_clear_handle_id (&self->materialise_source, g_source_remove);
  if (!self->started)
    return;
  self->materialise_source = g_timeout_add_seconds (BOX_LIBVIRT_MATERIALISE_QUIET_S, quiet_over,
                                                    self);
}

void
box_libvirt_materialise_queue (BoxLibvirtPlugin *self, const char *sandbox_id,
                               const char *checkpoint_id)
{
  char *entry;

  if (!self->config.checkpoint_materialise)
    return;
  entry = g_strconcat (sandbox_id, "\n", checkpoint_id, NULL);
  for (GList *l = self->materialise_queue.head; l != NULL; l = l->next) {
    if (g_str_equal (l->data, entry)) {
      g_free (entry);
      return;
    }
  }
  g_queue_push_tail (&self->materialise_queue, entry);
  g_debug ("libvirt: sandbox %s: memory checkpoint %s queued to materialise", sandbox_id,
           checkpoint_id);
  job_next_when_quiet (self);
}

void
box_libvirt_materialise_kick (BoxLibvirtPlugin *self)
{
  job_next_when_quiet (self);
}

void
box_libvirt_materialise_stop (BoxLibvirtPlugin *self)
{
  g_clear_handle_id (&self->materialise_source, g_source_remove);
  g_queue_clear_full (&self->materialise_queue, g_free);
  if (self->materialising != NULL)
    job_stop (self->materialising);
}

const char *
box_libvirt_materialise_helper (BoxLibvirtPlugin *self, const char *sandbox_id,
                                const char *checkpoint_id)
{
  BoxLibvirtMaterialise *job = self->materialising;

  if (job == NULL || g_strcmp0 (job->sandbox_id, sandbox_id) != 0 ||
      g_strcmp0 (job->checkpoint_id, checkpoint_id) != 0)
    return NULL;
  return job->helper_id;
}

/* ---- at start ---- */

/* Whether @sandbox_id's VM is this boxd's (its state file exists; always
 * without a data directory).  vm_dir may be shared with other boxds (the
 * VM tests share one, and a test cut short leaves checkpoints there):
 * their checkpoints are not ours to touch or materialise. */
static gboolean
sandbox_is_ours (BoxLibvirtPlugin *self, const char *sandbox_id)
{
  g_autofree char *name = NULL;
  g_autofree char *path = NULL;

  if (self->state_dir == NULL)
    return TRUE;
  name = g_strconcat (sandbox_id, ".json", NULL);
  path = g_build_filename (self->state_dir, name, NULL);
  return g_file_test (path, G_FILE_TEST_IS_REGULAR);
}

void
box_libvirt_materialise_sweep (BoxLibvirtPlugin *self, const char *ckpt, const char *sandbox_id,
                               const char *checkpoint_id)
{
  static const char *const temps[] = { "ram.tmp", "devstate.tmp" };
  static const char *const uncommitted[] = { "ram", "devstate" };
  BoxLibvirtCheckpointInfo info = { 0 };

  if (!sandbox_is_ours (self, sandbox_id))
    return;
  for (guint i = 0; i < G_N_ELEMENTS (temps); i++) {
    g_autofree char *path = g_build_filename (ckpt, temps[i], NULL);
    if (g_unlink (path) == 0)
      g_message ("libvirt: removed %s, left by a materialisation that did not finish", path);
  }
  if (!box_libvirt_checkpoint_info_load (self, sandbox_id, checkpoint_id, &info, NULL))
    return;
  if (!info.ram) {
    for (guint i = 0; i < G_N_ELEMENTS (uncommitted); i++) {
      g_autofree char *path = g_build_filename (ckpt, uncommitted[i], NULL);
      if (g_unlink (path) == 0)
        g_message ("libvirt: removed %s, left by a materialisation that did not finish", path);
    }
    if (info.memory)
      box_libvirt_materialise_queue (self, sandbox_id, checkpoint_id);
  } else {
    box_libvirt_ready_want (self, sandbox_id, checkpoint_id);
  }
  box_libvirt_checkpoint_info_clear (&info);
}
