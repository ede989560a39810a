/* box-libvirt-checkpoint.c: checkpoints and restores.
 *
 * A checkpoint is a directory of its own, <vm_dir>/checkpoints/<sandbox>.<id>/,
 * that outlives nothing but itself:
 *   disk.qcow2     the VM's overlay as it was: a disk-only checkpoint of a
 *                  running VM freezes it as a layer of the VM's
 *                  and links it (box-libvirt-snapshot.c); otherwise a
 *                  sparse copy, taken while the vCPUs are stopped and QEMU
 *                  has flushed it (it backs onto the template's disk like
 *                  the overlay, or onto layer-N.qcow2)
 *   layer-N.qcow2  hard links of the VM's layers, when it was a fork or a
 *                  restore of a checkpoint (box-libvirt-layers.c)
 *   state          memory checkpoints: device state and RAM (a migration
 *                  to an fd, as a cold pause writes cold.mig)
 *   ram, devstate  memory checkpoints, once materialised in the background
 *                  (box-libvirt-materialise.c): a sparse RAM file and the
 *                  device state alone, which forks and restores map and
 *                  load like a template's (box-libvirt-start.c)
 *   manifest.json  what it was taken of (memory, sizes, NIC, template,
 *                  "ram" once materialised)
 * Restores and forks copy nothing: their disk is a new overlay on the
 * checkpoint's, which they hard-link as a read-only layer with the layers
 * under it (box-libvirt-layers.c), and they hard-link the state as their
 * cold.mig (never written in place: a cold pause writes a new file and
 * renames it), and a materialised one's ram and devstate as ram and
 * cold.dev.  Deleting a checkpoint, or its sandbox, unlinks names only:
 * the files stay while a VM links them, so forks and restored VMs are
 * independent of the checkpoint from the moment they exist.
 *
 * Crash safety: a checkpoint is written into <dir>.tmp-<random>, under an
 * exclusive flock on <dir>.tmp-<random>.lock, and renamed when complete;
 * a temporary directory whose lock nobody holds is what a killed boxd
 * left, and the next start removes it (several boxds may share a vm_dir:
 * a held lock is another's checkpoint under way).  Restores write
 * disk.qcow2.tmp, layer-N.qcow2.tmp and cold.mig.tmp and rename them.
 *
 *   memory, running   the guest forgets its env; QEMU copies its RAM
 *                     while it runs (pre-copy: its dirty tracking sends
 *                     again what the guest writes) and stops the vCPUs
 *                     for the last pass; under TCG only for a RAM block
 *                     that is no multiple of 256 KiB, otherwise the vCPUs
 *                     stop for the whole copy (stop-copy: QEMU < 9.0 loses
 *                     writes during such a TCG pre-copy, see
 *                     box_libvirt_live_ram_copy()); the disk is copied,
 *                     the vCPUs run again; clock and env are pushed back
 *   memory, hot pause state and disk saved; the VM becomes cold on that
 *                     same state (a second migration out of one QEMU is
 *                     not safe in QEMU 7.2), so no wake
 *   memory, cold      the suspend snapshot is the state (a hard link): no wake
 *   disk only         running: the guest syncs; a disk snapshot, nothing
 *                     stops (box-libvirt-snapshot.c); past
 *                     BOX_LIBVIRT_SNAPSHOT_HEIGHT layers the vCPUs stop
 *                     for a copy of the overlay.  Hot paused: a copy (the
 *                     vCPUs are stopped).  Cold or stopped: a copy
 *   restore           (box-libvirt-restore.c) the overlay and links are
 *                     made first (a full disk changes nothing), then the
 *                     QEMU ends and the VM becomes the checkpoint:
 *                     a cold resume (memory) or a boot (disk only)
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box-libvirt-op.h"

#define CKPT_MANIFEST        "manifest.json"
#define CKPT_TMP             ".tmp-"
#define CKPT_LOCK_SUFFIX     ".lock"
/* what a disk snapshot writes: a new overlay's metadata and the manifest */
#define CKPT_SNAPSHOT_BYTES  (G_GUINT64_CONSTANT (1) << 20)

/* ---- names and files ---- */

gboolean
box_libvirt_checkpoint_id_is_valid (const char *id)
{
  gsize len = id != NULL ? strlen (id) : 0;

  if (len < 1 || len > 64)
    return FALSE;
  for (gsize i = 0; i < len; i++) {
    if (!g_ascii_isalnum (id[i]) && id[i] != '-' && id[i] != '_')
      return FALSE;
  }
  return TRUE;
}

static char *
checkpoints_root (BoxLibvirtPlugin *self)
{
  return g_build_filename (self->config.vm_dir, "checkpoints", NULL);
}

char *
box_libvirt_checkpoint_dir (BoxLibvirtPlugin *self, const char *sandbox_id,
                            const char *checkpoint_id)
{
  g_autofree char *name = g_strconcat (sandbox_id, ".", checkpoint_id, NULL);

  return g_build_filename (self->config.vm_dir, "checkpoints", name, NULL);
}

void
box_libvirt_checkpoint_info_clear (BoxLibvirtCheckpointInfo *info)
{
  g_clear_pointer (&info->template_key, g_free);
}

gboolean
box_libvirt_checkpoint_info_load (BoxLibvirtPlugin *self, const char *sandbox_id,
                                  const char *checkpoint_id, BoxLibvirtCheckpointInfo *info,
                                  GError **error)
{
  g_autofree char *dir = NULL;
  g_autofree char *manifest = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *object;

  if (!box_sandbox_id_is_valid (sandbox_id) ||
      !box_libvirt_checkpoint_id_is_valid (checkpoint_id)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "bad checkpoint \"%s\" of sandbox \"%s\"",
                 checkpoint_id != NULL ? checkpoint_id : "",
                 sandbox_id != NULL ? sandbox_id : "");
    return FALSE;
  }
  dir = box_libvirt_checkpoint_dir (self, sandbox_id, checkpoint_id);
  manifest = g_build_filename (dir, CKPT_MANIFEST, NULL);
  if (!json_parser_load_from_file (parser, manifest, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no checkpoint %s of sandbox %s",
                 checkpoint_id, sandbox_id);
    return FALSE;
  }
  object = json_node_get_object (json_parser_get_root (parser));
  info->memory = json_object_get_boolean_member_with_default (object, "memory", FALSE);
  info->ram = info->memory && json_object_get_boolean_member_with_default (object, "ram", FALSE);
  info->resources.cpus = json_object_get_int_member_with_default (object, "cpus", 0);
  info->resources.memory_mib = json_object_get_int_member_with_default (object, "memory_mib", 0);
  info->resources.disk_gib = json_object_get_int_member_with_default (object, "disk_gib", 0);
  info->nic = json_object_get_boolean_member_with_default (object, "nic", FALSE);
  info->template_key = g_strdup (json_object_get_string_member_with_default (object, "template",
                                                                             ""));
  info->created_at = json_object_get_int_member_with_default (object, "created_at", 0);
  if (info->resources.cpus == 0 || info->resources.memory_mib == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s: no sizes", manifest);
    box_libvirt_checkpoint_info_clear (info);
    return FALSE;
  }
  return TRUE;
}

/* ---- sweeping ---- */

/* Removes @tmp (a temporary directory) unless its lock is held. */
static gboolean
sweep_tmp (const char *tmp)
{
  g_autofree char *lock = g_strconcat (tmp, CKPT_LOCK_SUFFIX, NULL);
  int fd = open (lock, O_RDWR | O_CLOEXEC);
  gboolean removed = FALSE;

  if (fd >= 0 && flock (fd, LOCK_EX | LOCK_NB) != 0) {
    close (fd);
    return FALSE;   /* a checkpoint under way (another boxd's) */
  }
  removed = box_libvirt_remove_tree (tmp, NULL);
  if (fd >= 0) {
    g_unlink (lock);
    close (fd);
  }
  return removed;
}

guint
box_libvirt_checkpoints_sweep (BoxLibvirtPlugin *self)
{
  g_autofree char *root = checkpoints_root (self);
  g_autoptr(GDir) dir = g_dir_open (root, 0, NULL);
  g_autoptr(GError) error = NULL;
  const char *entry;
  guint removed = 0;

  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *path = g_build_filename (root, entry, NULL);
    g_autofree char *tmp = NULL;

    if (strstr (entry, CKPT_TMP) == NULL) {
      g_autofree char *sandbox_id = g_strdup (entry);
      char *dot = strchr (sandbox_id, '.');

      if (dot != NULL && !g_str_has_suffix (entry, CKPT_LOCK_SUFFIX)) {
        *dot = '\0';
        box_libvirt_materialise_sweep (self, path, sandbox_id, dot + 1);
      }
      continue;
    }
    if (g_str_has_suffix (entry, CKPT_LOCK_SUFFIX)) {
      /* a lock whose directory is gone */
      tmp = g_strndup (path, strlen (path) - strlen (CKPT_LOCK_SUFFIX));
      if (g_file_test (tmp, G_FILE_TEST_EXISTS))
        continue;
      removed += sweep_tmp (tmp);
      continue;
    }
    if (sweep_tmp (path)) {
      g_message ("libvirt: removed %s, left by a checkpoint or delete that did not finish", path);
      removed++;
    }
  }
  if (!box_libvirt_layers_sync (self->config.vm_dir, self->config.qemu_uid, &error))
    g_warning ("libvirt: %s", error->message);
  return removed;
}

void
box_libvirt_vm_sweep_temps (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  static const char *const temps[] = { "disk.qcow2.tmp", "disk.qcow2.new", "cold.mig.tmp",
                                       "cold.dev.tmp", "ram.tmp" };

  for (guint i = 0; i < G_N_ELEMENTS (temps); i++) {
    g_autofree char *path = box_libvirt_vm_path (self->config.vm_dir, vm->vm_id, temps[i]);
    if (g_unlink (path) == 0)
      g_message ("libvirt: removed %s, left by an operation that did not finish", path);
  }
  {
    g_autofree char *dir = box_libvirt_vm_path (self->config.vm_dir, vm->vm_id, NULL);
    box_libvirt_layers_trim (dir, BOX_LIBVIRT_LAYERS_MAX);
  }
}

/* Removes a checkpoint directory: renamed away first, so that a crash
 * leaves either the whole checkpoint or a temporary the sweep removes. */
static gboolean
remove_checkpoint_dir (const char *path, GError **error)
{
  g_autofree char *suffix = box_libvirt_new_vm_id ();
  g_autofree char *tmp = g_strconcat (path, CKPT_TMP, suffix, NULL);

  if (g_rename (path, tmp) != 0) {
    if (errno == ENOENT)
      return TRUE;
    return box_libvirt_errno_error (error, errno, "cannot remove", path);
  }
  return box_libvirt_remove_tree (tmp, error);
}

gboolean
box_libvirt_checkpoints_remove_all (BoxLibvirtPlugin *self, const char *sandbox_id,
                                    GError **error)
{
  g_autofree char *root = checkpoints_root (self);
  g_autofree char *prefix = g_strconcat (sandbox_id, ".", NULL);
  g_autoptr(GDir) dir = g_dir_open (root, 0, NULL);
  const char *entry;

  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *path = NULL;

    if (!g_str_has_prefix (entry, prefix) || strstr (entry, CKPT_TMP) != NULL)
      continue;
    path = g_build_filename (root, entry, NULL);
    if (!remove_checkpoint_dir (path, error))
      return FALSE;
  }
  /* the sandbox's VM directory is gone: its uid reads no layer any more */
  return box_libvirt_layers_sync (self->config.vm_dir, self->config.qemu_uid, error);
}

/* ---- taking a checkpoint ---- */

static gboolean
write_manifest (BoxLibvirtOp *op, const char *dir, GError **error)
{
  g_autofree char *path = g_build_filename (dir, CKPT_MANIFEST, NULL);
  g_autofree char *contents =
    g_strdup_printf ("{\"sandbox\": \"%s\", \"checkpoint\": \"%s\", \"memory\": %s, "
                     "\"cpus\": %u, \"memory_mib\": %u, \"disk_gib\": %u, \"nic\": %s, "
                     "\"template\": \"%s\", \"created_at\": %" G_GINT64_FORMAT "}\n",
                     op->id, op->checkpoint_id, op->memory ? "true" : "false",
                     op->vm->resources.cpus, op->vm->resources.memory_mib,
                     op->vm->resources.disk_gib, op->vm->nic ? "true" : "false",
                     op->vm->template_key, g_get_real_time ());

  return box_libvirt_write_file (path, contents, error);
}

/* The vCPUs run again after a checkpoint.  A migration QEMU ended stopped
 * them without libvirt (which may still take the domain for running):
 * then QEMU is asked directly. */
static gboolean
resume_domain (virDomainPtr dom, GError **error)
{
  int state = VIR_DOMAIN_NOSTATE;
  g_autofree char *reply = NULL;

  if (virDomainGetState (dom, &state, NULL, 0) == 0 && state == VIR_DOMAIN_PAUSED &&
      virDomainResume (dom) == 0)
    return TRUE;
  reply = box_libvirt_qmp (dom, "{\"execute\":\"cont\"}", -1, error);
  return reply != NULL;
}

/* Whether a memory checkpoint of a running guest may copy its RAM while it
 * runs (pre-copy, QEMU's dirty tracking sending again what the guest
 * writes meanwhile).  Under KVM, whose dirty log is the kernel's, always.
 * Under TCG only when the RAM block takes QEMU's page-by-page dirty sync,
 * which resets the vCPUs' TLB entries: QEMU before 9.0 loses writes on its
 * other path (box-libvirt-ram.c).  Otherwise the vCPUs stop for the whole
 * copy (stop-copy). */
gboolean
box_libvirt_live_ram_copy (BoxLibvirtPlugin *self, virDomainPtr dom)
{
  if (g_strcmp0 (self->accel, "kvm") == 0)
    return TRUE;
  return box_libvirt_live_ram_copy_for (self->accel, box_libvirt_domain_ram_bytes (dom));
}

/* How long the last pass of a memory checkpoint kept the guest stopped
 * (QEMU's figure), for the log; -1 when unknown. */
static gint64
log_downtime (virDomainPtr dom, BoxLibvirtOp *op)
{
  g_autofree char *reply = box_libvirt_qmp (dom, "{\"execute\":\"query-migrate\"}", -1, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *object;

  gint64 downtime;

  if (reply == NULL || !json_parser_load_from_data (parser, reply, -1, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return -1;
  object = json_node_get_object (json_parser_get_root (parser));
  downtime = json_object_get_int_member_with_default (object, "downtime", -1);
  g_message ("libvirt: sandbox %s: checkpoint %s: RAM saved in %" G_GINT64_FORMAT
             " ms, the guest stopped for %" G_GINT64_FORMAT " ms of it", op->id,
             op->checkpoint_id, json_object_get_int_member_with_default (object, "total-time", -1),
             downtime);
  return downtime;
}

/* The VM's files into @tmp: a disk snapshot (disk only, running), or
 * copies with its QEMU (when it has one) stopped meanwhile. */
static gboolean
checkpoint_files (BoxLibvirtPlugin *self, BoxLibvirtOp *op, const char *tmp, GError **error)
{
  g_autofree char *disk = box_libvirt_op_file (op, "disk.qcow2");
  g_autofree char *cold = box_libvirt_op_file (op, "cold.mig");
  g_autofree char *cold_tmp = box_libvirt_op_file (op, "cold.mig.tmp");
  g_autofree char *tmp_disk = g_build_filename (tmp, "disk.qcow2", NULL);
  g_autofree char *tmp_state = g_build_filename (tmp, "state", NULL);
  g_autofree char *vm_dir = box_libvirt_op_file (op, NULL);
  virConnectPtr conn;
  virDomainPtr dom;
  int state = VIR_DOMAIN_NOSTATE;
  gboolean ok, was_running, live;
  gint64 stopped_at = 0, downtime = 0;

  if (op->vm->state == BOX_VM_STATE_SHUTOFF || op->vm->cold) {
    /* no QEMU: the files are at rest */
    return (!op->memory || box_libvirt_link_file (cold, tmp_state, error)) &&
           box_libvirt_copy_sparse (disk, tmp_disk, error);
  }
  conn = box_libvirt_conn_get (self->conn, error);
  if (conn == NULL)
    return FALSE;
  dom = box_libvirt_domain_lookup (conn, op->domain);
  if (dom == NULL || virDomainGetState (dom, &state, NULL, 0) < 0) {
    if (dom != NULL)
      virDomainFree (dom);
    virConnectClose (conn);
    g_set_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE, "the VM of %s is gone",
                 op->id);
    return FALSE;
  }
  was_running = state == VIR_DOMAIN_RUNNING;
  /* a disk snapshot that could not finish: disk.qcow2 is what QEMU writes
   * to before anything is taken of it */
  if (!box_libvirt_disk_snapshot_recover (self, op->vm, dom, error)) {
    virDomainFree (dom);
    virConnectClose (conn);
    return FALSE;
  }
  if (!op->memory && was_running && box_libvirt_disk_snapshot_fits (vm_dir)) {
    /* the overlay frozen as a layer, QEMU on a new one: no pause */
    g_autofree char *frozen = NULL;
    gint64 start = g_get_monotonic_time ();

    ok = box_libvirt_disk_snapshot (self, op, dom, &frozen, error) &&
         box_libvirt_link_file (frozen, tmp_disk, error);
    if (ok)
      g_message ("libvirt: sandbox %s: disk-only checkpoint %s: disk snapshot in %.0f ms, "
                 "the guest never stopped", op->id, op->checkpoint_id,
                 (g_get_monotonic_time () - start) / 1e3);
    virDomainFree (dom);
    virConnectClose (conn);
    return ok;
  }
  live = was_running && box_libvirt_live_ram_copy (self, dom);
  if (op->memory) {
    /* live: the guest carries on while QEMU copies its RAM (its dirty
     * tracking sends again what the guest writes meanwhile) and stops for
     * the last pass only.  Otherwise (TCG, an aligned RAM block) the
     * vCPUs stop for the whole copy (box_libvirt_live_ram_copy()).  The
     * migration ends with the vCPUs stopped either way */
    if (was_running && !live) {
      stopped_at = g_get_monotonic_time ();
      ok = virDomainSuspend (dom) == 0 || box_libvirt_set_error (error, "cannot pause the VM");
    } else {
      ok = TRUE;
    }
    ok = ok && box_libvirt_migrate_save (dom, tmp_state, FALSE, error);
    if (live) {
      stopped_at = g_get_monotonic_time ();
      if (ok)
        downtime = log_downtime (dom, op);
    }
    if (ok && was_running)
      box_libvirt_test_delay ("checkpoint-stopped", op);
  } else {
    stopped_at = g_get_monotonic_time ();
    ok = !was_running || virDomainSuspend (dom) == 0 ||
         box_libvirt_set_error (error, "cannot pause the VM");
  }
  /* stopped vCPUs: QEMU has drained and flushed the overlay */
  ok = ok && box_libvirt_copy_sparse (disk, tmp_disk, error);
  if (op->memory && !was_running) {
    /* a hot pause: the VM goes cold on the state just saved */
    ok = ok && box_libvirt_link_file (tmp_state, cold_tmp, error) &&
         box_libvirt_rename_file (cold_tmp, cold, error) &&
         box_libvirt_domain_destroy (conn, op->domain, error);
    op->ended = ok;
    if (!ok)
      g_unlink (cold_tmp);
  } else if (was_running && !resume_domain (dom, ok ? error : NULL)) {
    /* (after a failure the VM runs on if it can; the first error counts) */
    ok = FALSE;
  } else if (was_running && ok) {
    /* QEMU's last pass (live), or its whole copy (stop-copy), then the
     * disk copy and the resume */
    gdouble since = (g_get_monotonic_time () - stopped_at) / 1e3;

    if (live || !op->memory)
      g_message ("libvirt: sandbox %s: %s checkpoint %s: the guest was stopped for %.0f ms "
                 "(%" G_GINT64_FORMAT " ms of QEMU's last pass, %.0f ms disk copy and resume)",
                 op->id, op->memory ? "memory" : "disk-only", op->checkpoint_id,
                 MAX (downtime, 0) + since, downtime, since);
    else
      g_message ("libvirt: sandbox %s: memory checkpoint %s: the guest was stopped for %.0f ms "
                 "(stop-copy: its whole RAM, the disk copy and the resume)", op->id,
                 op->checkpoint_id, since);
  }
  virDomainFree (dom);
  virConnectClose (conn);
  return ok;
}

static gboolean
checkpoint_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;
  g_autofree char *root = checkpoints_root (self);
  g_autofree char *final = box_libvirt_checkpoint_dir (self, op->id, op->checkpoint_id);
  g_autofree char *suffix = box_libvirt_new_vm_id ();
  g_autofree char *tmp = g_strconcat (final, CKPT_TMP, suffix, NULL);
  g_autofree char *lock = g_strconcat (tmp, CKPT_LOCK_SUFFIX, NULL);
  g_autofree char *disk = box_libvirt_op_file (op, "disk.qcow2");
  g_autofree char *vm_dir = box_libvirt_op_file (op, NULL);
  g_autofree char *tmp_disk = g_build_filename (tmp, "disk.qcow2", NULL);
  guint64 need = box_libvirt_file_allocated (disk);
  gboolean ok;
  int lock_fd;

  if (g_file_test (final, G_FILE_TEST_EXISTS)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS, "checkpoint %s of sandbox %s exists",
                 op->checkpoint_id, op->id);
    return FALSE;
  }
  /* a running VM's RAM may all go to the state file; a cold one's is
   * linked; a disk snapshot writes a new overlay only */
  if (op->memory && !op->vm->cold)
    need += (guint64) op->vm->resources.memory_mib << 20;
  else if (!op->memory && op->vm->state == BOX_VM_STATE_RUNNING &&
           box_libvirt_disk_snapshot_fits (vm_dir))
    need = CKPT_SNAPSHOT_BYTES;
  if (!box_libvirt_check_disk_room (self, need, error))
    return FALSE;
  if (g_mkdir_with_parents (root, 0711) != 0)
    return box_libvirt_errno_error (error, errno, "cannot create", root);
  lock_fd = open (lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (lock_fd < 0)
    return box_libvirt_errno_error (error, errno, "cannot create", lock);
  if (flock (lock_fd, LOCK_EX) != 0 || g_mkdir (tmp, 0700) != 0) {
    int saved_errno = errno;
    g_unlink (lock);
    close (lock_fd);
    return box_libvirt_errno_error (error, saved_errno, "cannot create", tmp);
  }
  box_libvirt_test_delay ("checkpoint", op);
  ok = checkpoint_files (self, op, tmp, error) &&
       box_libvirt_layers_link (vm_dir, tmp, box_libvirt_layer_height (tmp_disk), NULL,
                                error) &&
       write_manifest (op, tmp, error) &&
       (box_libvirt_fsync_dir (tmp), box_libvirt_rename_file (tmp, final, error));
  if (ok) {
    box_libvirt_fsync_dir (root);
  } else {
    box_libvirt_note_disk_full (self, error);
    box_libvirt_remove_tree (tmp, NULL);
  }
  g_unlink (lock);
  close (lock_fd);
  return ok;
}

/* The end of a guest setup that may fail without failing the checkpoint. */
static void
guest_setup_logged (BoxLibvirtOp *op, GAsyncResult *result, const char *when)
{
  g_autoptr(BoxAgent) agent = NULL;
  g_autoptr(GError) error = NULL;

  agent = box_libvirt_guest_setup_finish (result, &error);
  if (agent == NULL)
    g_message ("libvirt: sandbox %s: %s checkpoint %s its agent did not answer: %s", op->id,
               when, op->checkpoint_id, error->message);
}

static void
checkpoint_guest_back (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);

  guest_setup_logged (box_libvirt_task_op (task), result, "after");
  box_libvirt_op_return (task, NULL);
}

/* A memory checkpoint that failed on a running VM: the env withheld for it
 * (and with it the starts of services) is given back, then the error. */
static void
checkpoint_failed_guest_back (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  GError *error = g_object_steal_data (G_OBJECT (task), "box-checkpoint-error");

  guest_setup_logged (box_libvirt_task_op (task), result, "after the failed");
  box_libvirt_op_return (task, error);
}

static void
checkpoint_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  BoxLibvirtVm *vm = op->vm;
  GError *error = NULL;
  gboolean ok = box_libvirt_run_finish (result, &error);
  BoxLibvirtGuestSetup setup = {
    .agent = vm->agent,
    .steps = BOX_LIBVIRT_GUEST_TIME | BOX_LIBVIRT_GUEST_ENV,
    .env = op->env,
    .timeout_s = BOX_LIBVIRT_AGENT_TIMEOUT_S,
  };

  if (op->ended) {
    vm->cold = TRUE;
    box_libvirt_vm_ended (op->self, vm);
    box_libvirt_save_vm (op->self, vm);
    box_libvirt_standby_want (op->self, vm);
  } else {
    vm->expect_stop = FALSE;
  }
  if (!ok) {
    if (op->memory && vm->state == BOX_VM_STATE_RUNNING && vm->agent != NULL &&
        !box_agent_is_closed (vm->agent)) {
      g_object_set_data_full (G_OBJECT (task), "box-checkpoint-error", error,
                              (GDestroyNotify) g_error_free);
      setup.context = box_plugin_get_context (BOX_PLUGIN (op->self));
      box_libvirt_guest_setup_async (&setup, NULL, checkpoint_failed_guest_back, task);
      return;
    }
    box_libvirt_op_return (task, error);
    return;
  }
  g_message ("libvirt: sandbox %s: %s checkpoint %s in %.0f ms", op->id,
             op->memory ? "memory" : "disk-only", op->checkpoint_id,
             (g_get_monotonic_time () - op->started) / 1e3);
  /* in the background, after the answer: forks and restores of it then
   * map its RAM instead of loading it */
  if (op->memory)
    box_libvirt_materialise_queue (op->self, op->id, op->checkpoint_id);
  if (vm->state != BOX_VM_STATE_RUNNING || !op->memory || vm->agent == NULL ||
      box_agent_is_closed (vm->agent)) {
    box_libvirt_op_return (task, NULL);
    return;
  }
  /* the guest was stopped: its clock is behind; its env was cleared */
  setup.context = box_plugin_get_context (BOX_PLUGIN (op->self));
  box_libvirt_guest_setup_async (&setup, NULL, checkpoint_guest_back, task);
}

static void
checkpoint_run (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  /* a hot pause becomes cold: its QEMU ends on purpose */
  if (op->memory && op->vm->state == BOX_VM_STATE_SUSPENDED && !op->vm->cold)
    op->vm->expect_stop = TRUE;
  box_libvirt_run_in_thread (op->self, checkpoint_work, op, NULL, NULL, checkpoint_done, task);
}

static void
checkpoint_guest_ready (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);

  guest_setup_logged (box_libvirt_task_op (task), result, "before");
  checkpoint_run (task);
}

void
box_libvirt_checkpoint_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  BoxLibvirtVm *vm = op->vm;
  BoxLibvirtGuestSetup setup = {
    .agent = vm->agent,
    .timeout_s = BOX_LIBVIRT_AGENT_TIMEOUT_S,
  };

  if (!box_libvirt_checkpoint_id_is_valid (op->checkpoint_id)) {
    box_libvirt_op_fail (task, BOX_ERROR_INVALID, "bad checkpoint ID \"%s\"",
                         op->checkpoint_id != NULL ? op->checkpoint_id : "");
    return;
  }
  if (op->memory && vm->state != BOX_VM_STATE_RUNNING && vm->state != BOX_VM_STATE_SUSPENDED) {
    box_libvirt_op_fail (task, BOX_ERROR_CONFLICT,
                         "the VM of sandbox %s is stopped: no memory to checkpoint", op->id);
    return;
  }
  if (vm->state != BOX_VM_STATE_RUNNING || vm->agent == NULL || box_agent_is_closed (vm->agent)) {
    checkpoint_run (task);
    return;
  }
  /* memory: the env is never in a snapshot; disk only: the guest's
   * file systems are consistent on the disk once it synced */
  setup.steps = op->memory ? BOX_LIBVIRT_GUEST_ENV_HOLD : BOX_LIBVIRT_GUEST_SYNC;
  setup.context = box_plugin_get_context (BOX_PLUGIN (op->self));
  box_libvirt_guest_setup_async (&setup, NULL, checkpoint_guest_ready, task);
}

/* ---- delete ---- */

static gboolean
delete_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  BoxLibvirtOp *op = data;
  g_autofree char *dir = box_libvirt_checkpoint_dir (self, op->id, op->checkpoint_id);

  return remove_checkpoint_dir (dir, error);
}

static void
delete_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  GError *error = NULL;

  box_libvirt_run_finish (result, &error);
  box_libvirt_op_return (task, error);
}

void
box_libvirt_delete_checkpoint_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);

  if (!box_libvirt_checkpoint_id_is_valid (op->checkpoint_id)) {
    box_libvirt_op_fail (task, BOX_ERROR_INVALID, "bad checkpoint ID \"%s\"",
                         op->checkpoint_id != NULL ? op->checkpoint_id : "");
    return;
  }
  box_libvirt_run_in_thread (op->self, delete_work, op, NULL, NULL, delete_done, task);
}
