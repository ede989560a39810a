/* box-libvirt-template.c: template snapshots and the warm pool.
 *
 * A template snapshot is a VM of the template booted once to agent-ready
 * and frozen: its RAM in a file of ours (a share=on memory backend, so the
 * snapshot skips it with x-ignore-shared), its device state in `state`, its
 * disk in a qcow2 overlay on the image.  It is made per (image, accel, QEMU
 * version, CPUs, memory, NIC or not) on first use and kept across restarts
 * in <vm_dir>/templates/<key>/.
 *
 * Every create is a fork of it: a domain whose RAM maps the template's RAM
 * file privately (share=off: copy-on-write, the template's pages are shared
 * by every fork until written), whose disk is a new overlay on the
 * template's, started paused with `-incoming defer` and given the device
 * state.  libvirt's domain start costs ~300-500 ms, most of a create, so a
 * warm pool keeps such domains per template started, restored and paused
 * (from pool_size up, as many as the recent creates ask for: see
 * box-libvirt-pool.c); a create takes one, resumes it and tells the guest who it is
 * (box-libvirt-ops.c).  Pool domains get a network attachment under a pool
 * ID, rebound to the sandbox when taken.
 *
 * Pool and build domains are recorded in <state dir>/pool/<vm id> while
 * they exist, so that a restart after a crash removes them.
 *
 * A template snapshot of other inputs (after an image rebuild, a QEMU
 * upgrade) is removed at start once no disk under <vm_dir>/vms backs onto
 * it; several boxds may share a vm_dir, so each holds a shared flock on the
 * manifest of every template it uses and the pruner needs the exclusive
 * one.  Two boxds may also build the same snapshot at once: each builds in
 * a directory of its own, and under an flock on <key>.lock the first to
 * finish installs its build and the later ones drop theirs.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box-libvirt-private.h"


/* ---- records of pool and build domains ---- */

static char *
pool_record_path (BoxLibvirtPlugin *self, const char *vm_id)
{
  const char *state_dir = box_plugin_get_state_dir (BOX_PLUGIN (self));

  if (state_dir == NULL)
    return NULL;
  return g_build_filename (state_dir, "pool", vm_id, NULL);
}

void
box_libvirt_pool_record_add (BoxLibvirtPlugin *self, const char *vm_id)
{
  g_autofree char *path = pool_record_path (self, vm_id);
  g_autofree char *dir = NULL;

  if (path == NULL)
    return;
  dir = g_path_get_dirname (path);
  g_mkdir_with_parents (dir, 0700);
  if (!g_file_set_contents (path, "", 0, NULL))
    g_warning ("libvirt: cannot record pool VM %s", vm_id);
}

void
box_libvirt_pool_record_remove (BoxLibvirtPlugin *self, const char *vm_id)
{
  g_autofree char *path = pool_record_path (self, vm_id);

  if (path != NULL && g_unlink (path) != 0 && errno != ENOENT)
    g_warning ("libvirt: cannot remove %s: %s", path, g_strerror (errno));
}

/* ---- templates ---- */

/* Takes the shared lock that keeps a pruning boxd off the snapshot; FALSE
 * when there is no snapshot (or one is being removed). */
static gboolean
template_hold (BoxLibvirtTemplate *tmpl)
{
  g_autofree char *manifest = g_build_filename (tmpl->dir, "manifest.json", NULL);
  int fd;

  if (tmpl->hold_fd >= 0) {
    close (tmpl->hold_fd);
    tmpl->hold_fd = -1;
  }
  fd = open (manifest, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return FALSE;
  if (flock (fd, LOCK_SH | LOCK_NB) != 0) {
    close (fd);
    return FALSE;
  }
  tmpl->hold_fd = fd;
  return TRUE;
}

void
box_libvirt_slot_free (BoxLibvirtSlot *slot)
{
  if (slot == NULL)
    return;
  g_free (slot->vm_id);
  g_free (slot->net_id);
  g_clear_pointer (&slot->net, box_net_attachment_free);
  g_clear_object (&slot->agent);
  g_free (slot);
}

void
box_libvirt_template_free (BoxLibvirtTemplate *tmpl)
{
  if (tmpl == NULL)
    return;
  g_assert (tmpl->waiters->len == 0);
  g_assert (tmpl->in_flight == NULL);
  g_ptr_array_unref (tmpl->waiters);
  g_queue_clear_full (&tmpl->slots, (GDestroyNotify) box_libvirt_slot_free);
  g_clear_handle_id (&tmpl->refill_source, g_source_remove);
  if (tmpl->hold_fd >= 0)
    close (tmpl->hold_fd);
  g_free (tmpl->key);
  g_free (tmpl->dir);
  g_free (tmpl);
}

const char *
box_libvirt_template_describe (BoxLibvirtTemplate *tmpl)
{
  if (tmpl->ready)
    return "ready";
  return tmpl->building ? "building" : "absent";
}

BoxLibvirtTemplate *
box_libvirt_template_get (BoxLibvirtPlugin *self, guint cpus, guint memory_mib)
{
  gboolean nic = box_libvirt_get_network (self) != NULL;
  g_autofree char *input = g_strdup_printf ("%s\n%s\n%s\n%s\n%u\n%u\n%d", BOX_LIBVIRT_RECIPE,
                                            self->image->key, self->accel, self->qemu_version,
                                            cpus, memory_mib, nic);
  g_autofree char *key = g_compute_checksum_for_string (G_CHECKSUM_SHA256, input, -1);
  BoxLibvirtTemplate *tmpl;

  key[16] = '\0';
  tmpl = g_hash_table_lookup (self->templates, key);
  if (tmpl != NULL)
    return tmpl;
  tmpl = g_new0 (BoxLibvirtTemplate, 1);
  tmpl->plugin = self;
  tmpl->key = g_strdup (key);
  tmpl->cpus = cpus;
  tmpl->memory_mib = memory_mib;
  tmpl->nic = nic;
  tmpl->dir = g_build_filename (self->config.vm_dir, "templates", key, NULL);
  tmpl->waiters = g_ptr_array_new ();
  tmpl->hold_fd = -1;
  g_queue_init (&tmpl->slots);
  box_libvirt_pool_demand_init (&tmpl->demand, self->config.pool_size);
  tmpl->ready = template_hold (tmpl);
  g_hash_table_insert (self->templates, tmpl->key, tmpl);
  return tmpl;
}

/* Fills in what every domain of @tmpl has in common. */
void
box_libvirt_template_spec (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl,
                           BoxLibvirtDomainSpec *spec)
{
  memset (spec, 0, sizeof *spec);
  spec->accel = self->accel;
  spec->cpus = tmpl->cpus;
  spec->memory_mib = tmpl->memory_mib;
  spec->kernel = self->image->kernel;
  spec->initrd = self->image->initrd;
  spec->gid = self->config.qemu_gid;
  spec->tb_cache_mib = self->config.tb_cache_mib;
  spec->disk_cache = self->config.disk_cache;
}

gboolean
box_libvirt_make_vm_dir (const char *path, GError **error)
{
  /* QEMU's user must be able to reach the files; nobody may list them */
  if (g_mkdir_with_parents (path, 0711) != 0 || g_chmod (path, 0711) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot create %s: %s", path,
                 g_strerror (saved_errno));
    return FALSE;
  }
  return TRUE;
}

gboolean
box_libvirt_claim_vm_dir (BoxLibvirtPlugin *self, const char *dir, guint *uid, GError **error)
{
  return box_libvirt_vm_dir_claim (self->config.vm_dir, dir, self->config.uid_first,
                                   self->config.uid_last, uid, error);
}

guint
box_libvirt_vm_uid (BoxLibvirtPlugin *self, const char *dir)
{
  guint uid = box_libvirt_vm_dir_uid (dir);

  return uid != 0 ? uid : self->config.qemu_uid;
}

gboolean
box_libvirt_give_to_qemu (BoxLibvirtPlugin *self, const char *path, guint uid, GError **error)
{
  if (chown (path, uid, self->config.qemu_gid) != 0 ||
      g_chmod (path, 0600) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot give %s to QEMU's user: %s",
                 path, g_strerror (saved_errno));
    return FALSE;
  }
  return TRUE;
}

/* ---- building a template snapshot ---- */

typedef struct {
  BoxLibvirtPlugin   *self;       /* a reference */
  BoxLibvirtTemplate *tmpl;       /* lives as long as the plugin */
  char               *build_id;
  char               *tmp_dir;
  char               *domain;
  char               *xml;
  BoxAgent     *agent;
  GError             *failure;
  gint64              started;
  guint               uid;        /* the build VM's QEMU */
} Build;

static void
build_free (Build *build)
{
  box_libvirt_release (build->self);
  g_free (build->build_id);
  g_free (build->tmp_dir);
  g_free (build->domain);
  g_free (build->xml);
  if (build->agent != NULL)
    box_agent_close (build->agent);
  g_clear_object (&build->agent);
  g_clear_error (&build->failure);
  g_free (build);
}

static gboolean
build_boot_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Build *build = data;
  g_autofree char *disk = g_build_filename (build->tmp_dir, "disk.qcow2", NULL);
  g_autofree char *ram = g_build_filename (build->tmp_dir, "ram", NULL);
  virConnectPtr conn;
  virDomainPtr dom;
  guint64 ram_kib = box_libvirt_ram_kib_for_boot (self->accel, build->tmpl->memory_mib);
  int fd;

  /* tmp_dir is new: box_libvirt_template_build claimed it */
  if (!box_libvirt_create_overlay (disk, self->image->rootfs, "raw", self->image->rootfs_bytes,
                                   error) ||
      !box_libvirt_give_to_qemu (self, disk, build->uid, error))
    return FALSE;
  /* the RAM file: sparse, QEMU's, kept after the VM ends */
  fd = open (ram, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate (fd, (off_t) ram_kib * 1024) != 0) {
    int saved_errno = errno;
    if (fd >= 0)
      close (fd);
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot create %s: %s", ram,
                 g_strerror (saved_errno));
    return FALSE;
  }
  close (fd);
  if (!box_libvirt_give_to_qemu (self, ram, build->uid, error))
    return FALSE;
  conn = box_libvirt_conn_get (self->conn, error);
  if (conn == NULL)
    return FALSE;
  dom = box_libvirt_domain_start (conn, build->xml, FALSE, build->tmpl->memory_mib,
                                  self->config.tb_cache_mib, error);
  virConnectClose (conn);
  if (dom == NULL)
    return FALSE;
  virDomainFree (dom);
  return TRUE;
}

static gboolean
build_snapshot_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Build *build = data;
  g_autofree char *state = g_build_filename (build->tmp_dir, "state", NULL);
  g_autofree char *disk = g_build_filename (build->tmp_dir, "disk.qcow2", NULL);
  g_autofree char *manifest = g_build_filename (build->tmp_dir, "manifest.json", NULL);
  g_autofree char *socket = g_build_filename (build->tmp_dir, "agent.sock", NULL);
  g_autofree char *ram = g_build_filename (build->tmp_dir, "ram", NULL);
  g_autofree char *marker = g_build_filename (build->tmp_dir, BOX_LIBVIRT_UID_FILE, NULL);
  g_autofree char *contents = NULL;
  virConnectPtr conn;
  virDomainPtr dom;
  gboolean ok;

  conn = box_libvirt_conn_get (self->conn, error);
  if (conn == NULL)
    return FALSE;
  dom = box_libvirt_domain_lookup (conn, build->domain);
  if (dom == NULL) {
    virConnectClose (conn);
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the template VM %s went away",
                 build->domain);
    return FALSE;
  }
  ok = virDomainSuspend (dom) == 0 || box_libvirt_set_error (error, "cannot pause the template VM");
  ok = ok && box_libvirt_migrate_save (dom, state, TRUE, error);
  virDomainFree (dom);
  ok = ok && box_libvirt_domain_destroy (conn, build->domain, error);
  virConnectClose (conn);
  if (!ok)
    return FALSE;
  /* the disk becomes a read-only backing file of every fork.  Forks map
   * the RAM file privately (copy on write), but QEMU 7.2 opens a
   * memory-backend-file read-write unless its mapping is read-only too
   * (`rom=off` came in 8.2): the file stays writable by QEMU's group. */
  if (chown (disk, 0, 0) != 0 || g_chmod (disk, 0644) != 0 ||
      chown (ram, 0, self->config.qemu_gid) != 0 || g_chmod (ram, 0660) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot seal %s: %s", disk,
                 g_strerror (saved_errno));
    return FALSE;
  }
  g_unlink (socket);
  /* the build VM is gone: its uid is free (a template holds none) */
  g_unlink (marker);
  contents = g_strdup_printf ("{\"key\": \"%s\", \"image\": \"%s\", \"accel\": \"%s\", "
                              "\"qemu\": \"%s\", \"cpus\": %u, \"memory_mib\": %u, "
                              "\"nic\": %s, \"recipe\": \"%s\"}\n",
                              build->tmpl->key, self->image->key, self->accel,
                              self->qemu_version, build->tmpl->cpus, build->tmpl->memory_mib,
                              build->tmpl->nic ? "true" : "false", BOX_LIBVIRT_RECIPE);
  if (!g_file_set_contents_full (manifest, contents, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0644,
                                 NULL)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot write %s", manifest);
    return FALSE;
  }
  return box_libvirt_template_install (build->tmp_dir, build->tmpl->dir, error);
}

gboolean
box_libvirt_template_install (const char *tmp_dir, const char *dir, GError **error)
{
  g_autofree char *lock_path = g_strconcat (dir, ".lock", NULL);
  g_autofree char *manifest = g_build_filename (dir, "manifest.json", NULL);
  int fd = open (lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  gboolean ok;

  /* several boxds may build the same snapshot at once into directories of
   * their own: the first to finish keeps it, and the others drop theirs,
   * since forks of the first may already back onto its files.  A directory
   * without a manifest is a half-removed one. */
  if (fd < 0 || flock (fd, LOCK_EX) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot lock %s: %s", lock_path,
                 g_strerror (saved_errno));
    if (fd >= 0)
      close (fd);
    return FALSE;
  }
  if (g_file_test (manifest, G_FILE_TEST_IS_REGULAR)) {
    g_message ("libvirt: template snapshot %s was built by another boxd meanwhile; keeping it",
               dir);
    ok = box_libvirt_remove_tree (tmp_dir, error);
  } else {
    ok = box_libvirt_remove_tree (dir, error);
    if (ok && g_rename (tmp_dir, dir) != 0) {
      int saved_errno = errno;
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot keep the template in %s: %s",
                   dir, g_strerror (saved_errno));
      ok = FALSE;
    }
  }
  close (fd);
  return ok;
}

static gboolean
build_cleanup_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  Build *build = data;
  virConnectPtr conn = box_libvirt_conn_get (self->conn, NULL);

  if (conn != NULL) {
    box_libvirt_domain_destroy (conn, build->domain, NULL);
    virConnectClose (conn);
  }
  return box_libvirt_remove_tree (build->tmp_dir, error);
}


static void
build_finish (Build *build)
{
  BoxLibvirtPlugin *self = build->self;
  BoxLibvirtTemplate *tmpl = build->tmpl;
  g_autoptr(GPtrArray) waiters = g_steal_pointer (&tmpl->waiters);

  tmpl->waiters = g_ptr_array_new ();
  tmpl->building = FALSE;
  box_libvirt_pool_record_remove (self, build->build_id);
  if (build->failure == NULL) {
    tmpl->ready = TRUE;
    if (!template_hold (tmpl))
      g_warning ("libvirt: cannot hold the template snapshot %s: %s", tmpl->key, g_strerror (errno));
    g_message ("libvirt: template snapshot %s (%u CPUs, %u MiB) made in %.1f s", tmpl->key,
               tmpl->cpus, tmpl->memory_mib, (g_get_monotonic_time () - build->started) / 1e6);
  } else {
    g_warning ("libvirt: cannot make the template snapshot %s: %s", tmpl->key,
               build->failure->message);
  }
  for (guint i = 0; i < waiters->len; i++) {
    GTask *task = g_ptr_array_index (waiters, i);
    if (build->failure != NULL) {
      g_task_return_error (task, g_error_copy (build->failure));
      g_object_unref (task);
    } else {
      guint64 disk_bytes = GPOINTER_TO_SIZE (g_object_get_data (G_OBJECT (task),
                                                                "box-disk-bytes"));
      box_libvirt_pool_fill (self, tmpl, task, disk_bytes);
    }
  }
  if (build->failure == NULL)
    box_libvirt_template_refill (self, tmpl);
  build_free (build);
}

static void
build_cleaned (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Build *build = user_data;
  g_autoptr(GError) error = NULL;

  if (!box_libvirt_run_finish (result, &error))
    g_warning ("libvirt: %s", error->message);
  build_finish (build);
}

/* Takes @error; removes the half-made snapshot, then reports. */
static void
build_fail (Build *build, GError *error)
{
  build->failure = error;
  if (build->agent != NULL)
    box_agent_close (build->agent);
  box_libvirt_run_in_thread (build->self, build_cleanup_work, build, NULL, NULL, build_cleaned,
                             build);
}

static void
build_snapshotted (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Build *build = user_data;
  GError *error = NULL;

  if (!box_libvirt_run_finish (result, &error)) {
    build_fail (build, error);
    return;
  }
  build_finish (build);
}

static void
build_agent_ready (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Build *build = user_data;
  GError *error = NULL;

  build->agent = box_libvirt_guest_setup_finish (result, &error);
  if (build->agent == NULL) {
    build_fail (build, error);
    return;
  }
  box_libvirt_run_in_thread (build->self, build_snapshot_work, build, NULL, NULL,
                             build_snapshotted, build);
}

static void
build_booted (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Build *build = user_data;
  g_autofree char *socket = g_build_filename (build->tmp_dir, "agent.sock", NULL);
  GError *error = NULL;
  BoxLibvirtGuestSetup setup = {
    .socket_path = socket,
    /* the guest's page cache on disk before the snapshot */
    .steps = BOX_LIBVIRT_GUEST_SYNC,
    .timeout_s = build->self->config.boot_timeout_s,
  };

  if (!box_libvirt_run_finish (result, &error)) {
    build_fail (build, error);
    return;
  }
  setup.context = box_plugin_get_context (BOX_PLUGIN (build->self));
  box_libvirt_guest_setup_async (&setup, NULL, build_agent_ready, build);
}

void
box_libvirt_template_build (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl)
{
  Build *build;
  BoxLibvirtDomainSpec spec;
  BoxLibvirtOwner owner = { .role = "build" };
  g_autofree char *tmp_name = NULL;
  g_autofree char *disk = NULL;
  g_autofree char *ram = NULL;
  g_autofree char *socket = NULL;
  g_autofree char *console = NULL;
  g_autofree char *cmdline = NULL;
  GError *error = NULL;

  if (tmpl->building)
    return;
  tmpl->building = TRUE;
  build = g_new0 (Build, 1);
  build->self = box_libvirt_hold (self);
  build->tmpl = tmpl;
  build->build_id = box_libvirt_new_vm_id ();
  build->domain = box_libvirt_vm_domain_name (build->build_id);
  build->started = g_get_monotonic_time ();
  tmp_name = g_strconcat (tmpl->key, ".tmp-", build->build_id, NULL);
  build->tmp_dir = g_build_filename (self->config.vm_dir, "templates", tmp_name, NULL);
  disk = g_build_filename (build->tmp_dir, "disk.qcow2", NULL);
  ram = g_build_filename (build->tmp_dir, "ram", NULL);
  socket = g_build_filename (build->tmp_dir, "agent.sock", NULL);
  console = g_build_filename (build->tmp_dir, "console.log", NULL);
  cmdline = box_libvirt_kernel_cmdline ("box", NULL);

  box_libvirt_pool_record_add (self, build->build_id);
  if (!box_libvirt_claim_vm_dir (self, build->tmp_dir, &build->uid, &error)) {
    build_fail (build, error);
    return;
  }
  box_libvirt_template_spec (self, tmpl, &spec);
  spec.uid = build->uid;
  owner.state_dir = self->state_dir;
  owner.vm_dir = self->config.vm_dir;
  spec.owner = &owner;
  spec.name = build->domain;
  spec.cmdline = cmdline;
  spec.disk = disk;
  spec.agent_socket = socket;
  spec.console_log = console;
  spec.ram_path = ram;
  spec.ram_shared = TRUE;
  spec.ram_kib = box_libvirt_ram_kib_for_boot (self->accel, tmpl->memory_mib);
  spec.nic = tmpl->nic ? BOX_LIBVIRT_NIC_LOOSE : BOX_LIBVIRT_NIC_NONE;
  build->xml = box_libvirt_domain_xml (&spec);

  g_message ("libvirt: making the template snapshot %s (%u CPUs, %u MiB, %s): one cold boot",
             tmpl->key, tmpl->cpus, tmpl->memory_mib, self->accel);
  box_libvirt_run_in_thread (self, build_boot_work, build, NULL, NULL, build_booted, build);
}


/* ---- pruning the snapshots of earlier inputs ---- */

/* Adds to @keys the templates that the disks under <vm_dir>/@what back onto. */
static void
templates_in_use_under (BoxLibvirtPlugin *self, const char *what, const char *templates_dir,
                        GHashTable *keys)
{
  g_autofree char *vms_dir = g_build_filename (self->config.vm_dir, what, NULL);
  g_autoptr(GDir) vms = g_dir_open (vms_dir, 0, NULL);
  const char *vm;

  while (vms != NULL && (vm = g_dir_read_name (vms)) != NULL) {
    g_autofree char *vm_path = g_build_filename (vms_dir, vm, NULL);
    g_autoptr(GDir) files = g_dir_open (vm_path, 0, NULL);
    const char *file;

    while (files != NULL && (file = g_dir_read_name (files)) != NULL) {
      g_autofree char *path = NULL;
      g_autofree char *backing = NULL;
      g_autofree char *dir = NULL;
      g_autofree char *parent = NULL;

      if (!g_str_has_suffix (file, ".qcow2"))
        continue;
      path = g_build_filename (vm_path, file, NULL);
      backing = box_libvirt_qcow2_backing (path);
      if (backing == NULL)
        continue;
      dir = g_path_get_dirname (backing);
      parent = g_path_get_dirname (dir);
      if (g_str_equal (parent, templates_dir))
        g_hash_table_add (keys, g_path_get_basename (dir));
    }
  }
}

/* The keys of the templates that disks under <vm_dir>/vms and
 * <vm_dir>/checkpoints back onto (a fork's disk is an overlay on its
 * template's, whatever the VM's state; a checkpoint's disk is a copy of
 * one or a frozen one; a chain's layer-1 backs onto the template's). */
static GHashTable *
templates_in_use (BoxLibvirtPlugin *self, const char *templates_dir)
{
  GHashTable *keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  templates_in_use_under (self, "vms", templates_dir, keys);
  templates_in_use_under (self, "checkpoints", templates_dir, keys);
  return keys;
}

/* Whether the manifest in @dir describes a snapshot of this boxd's image,
 * accelerator, QEMU and recipe (any CPUs and memory). */
static gboolean
template_current (BoxLibvirtPlugin *self, const char *dir, char **image_out)
{
  g_autofree char *manifest = g_build_filename (dir, "manifest.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *object;

  if (!json_parser_load_from_file (parser, manifest, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return TRUE;   /* not ours to judge */
  object = json_node_get_object (json_parser_get_root (parser));
  *image_out = g_strdup (json_object_get_string_member_with_default (object, "image", "?"));
  return g_strcmp0 (*image_out, self->image->key) == 0 &&
         g_strcmp0 (json_object_get_string_member_with_default (object, "accel", ""), self->accel) == 0 &&
         g_strcmp0 (json_object_get_string_member_with_default (object, "qemu", ""),
                    self->qemu_version) == 0 &&
         g_strcmp0 (json_object_get_string_member_with_default (object, "recipe", ""),
                    BOX_LIBVIRT_RECIPE) == 0;
}

guint
box_libvirt_templates_prune (BoxLibvirtPlugin *self)
{
  g_autofree char *templates_dir = g_build_filename (self->config.vm_dir, "templates", NULL);
  g_autoptr(GHashTable) in_use = templates_in_use (self, templates_dir);
  g_autoptr(GDir) dir = g_dir_open (templates_dir, 0, NULL);
  const char *key;
  guint removed = 0;

  while (dir != NULL && (key = g_dir_read_name (dir)) != NULL) {
    g_autofree char *path = g_build_filename (templates_dir, key, NULL);
    g_autofree char *manifest = g_build_filename (path, "manifest.json", NULL);
    g_autofree char *image = NULL;
    g_autoptr(GError) error = NULL;
    int fd;

    /* "<key>.tmp-<vm id>": a build under way, or the pool sweep's */
    if (strchr (key, '.') != NULL || g_hash_table_contains (in_use, key) ||
        template_current (self, path, &image))
      continue;
    fd = open (manifest, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    if (flock (fd, LOCK_EX | LOCK_NB) != 0) {
      g_debug ("libvirt: template snapshot %s is held by another boxd", key);
    } else if (box_libvirt_remove_tree (path, &error)) {
      g_autofree char *lock = g_strconcat (path, ".lock", NULL);

      g_unlink (lock);
      g_message ("libvirt: removed the template snapshot %s of image %s: no VM's disk backs onto it",
                 key, image);
      removed++;
    } else {
      g_warning ("libvirt: %s", error->message);
    }
    close (fd);
  }
  return removed;
}
