/* libvirt-ckpt-vm-test.c: checkpoints, restores and forks of the libvirt
 * hypervisor with real VMs (suite vm, under tests/e2e-vm/vm-run.sh like
 * libvirt-vm-test.c).  The tests run in order on a source sandbox A and
 * forks of it.
 *
 * Env: BOX_VM_TEST_DIR   the plugin's vm_dir (default /var/tmp/box-vm-test)
 */
#include "config.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "libvirt-vm-test-util.h"

#define SANDBOX_C "sb-vmtestcccccc"
#define SANDBOX_D "sb-vmtestdddddd"
#define SANDBOX_E "sb-vmtesteeeeee"
#define SANDBOX_F "sb-vmtestffffff"

/* process and file kept by the source's memory checkpoint v1 */
static char *source_pid;

static gboolean
ckpt_op (BoxVmOp op, const char *id, const char *checkpoint, gboolean memory, GError **error)
{
  g_autoptr(GHashTable) env = g_hash_table_new (g_str_hash, g_str_equal);
  BoxVmRequest request = {
    .sandbox_id = id,
    .hostname = "vm-test-a",
    .template_name = "base",
    .image = "",
    .resources = { 2, 2048, 20 },
    .env = env,
    .checkpoint_id = checkpoint,
    .memory = memory,
  };

  g_hash_table_insert (env, "BOX_TEST_VAR", "from-the-sandbox");
  return run_request (suite.hv, op, &request, error);
}

static gdouble
ckpt_ok (BoxVmOp op, const char *id, const char *checkpoint, gboolean memory)
{
  g_autoptr(GError) error = NULL;
  gint64 start = g_get_monotonic_time ();

  if (!ckpt_op (op, id, checkpoint, memory, &error))
    g_error ("%s %s %s: %s", box_vm_op_to_string (op), id, checkpoint, error->message);
  return (g_get_monotonic_time () - start) / 1e3;
}

static gboolean
fork_op (const char *id, const char *hostname, const char *from, const char *checkpoint,
         GError **error)
{
  g_autoptr(GHashTable) env = g_hash_table_new (g_str_hash, g_str_equal);
  BoxVmRequest request = {
    .sandbox_id = id,
    .hostname = hostname,
    .template_name = "base",
    .image = "",
    .env = env,
    .from_sandbox_id = from,
    .from_checkpoint_id = checkpoint,
  };

  g_hash_table_insert (env, "BOX_TEST_VAR", "from-the-fork");
  return run_request (suite.hv, BOX_VM_OP_CREATE, &request, error);
}

static char *
checkpoint_path (const char *id, const char *checkpoint)
{
  return box_libvirt_checkpoint_dir (BOX_LIBVIRT_PLUGIN (suite.hv), id, checkpoint);
}

/* Entries of <vm_dir>/checkpoints with ".tmp-" in their name. */
static guint
count_temporaries (void)
{
  g_autofree char *root = g_build_filename (suite.vm_dir, "checkpoints", NULL);
  g_autoptr(GDir) dir = g_dir_open (root, 0, NULL);
  const char *entry;
  guint n = 0;

  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL)
    n += strstr (entry, ".tmp-") != NULL;
  return n;
}

/* Bytes of the state files in <vm_dir>/checkpoints' temporaries. */
static guint64
temporary_state_bytes (void)
{
  g_autofree char *root = g_build_filename (suite.vm_dir, "checkpoints", NULL);
  g_autoptr(GDir) dir = g_dir_open (root, 0, NULL);
  const char *entry;
  guint64 bytes = 0;

  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *state = g_build_filename (root, entry, "state", NULL);
    GStatBuf st;

    if (strstr (entry, ".tmp-") != NULL && g_stat (state, &st) == 0)
      bytes += st.st_size;
  }
  return bytes;
}

static gboolean
timeout_cb (gpointer user_data)
{
  g_error ("timed out: %s", (const char *) user_data);
  return G_SOURCE_REMOVE;
}

/* Waits (main loop running) until checkpoint @checkpoint of @id is
 * materialised (box-libvirt-materialise.c); how long it took, in s. */
static gdouble
wait_materialised (const char *id, const char *checkpoint)
{
  gint64 start = g_get_monotonic_time ();
  guint timeout = g_timeout_add_seconds (300, timeout_cb, "materialisation");

  for (;;) {
    BoxLibvirtCheckpointInfo info = { 0 };
    gboolean ram = box_libvirt_checkpoint_info_load (BOX_LIBVIRT_PLUGIN (suite.hv), id,
                                                     checkpoint, &info, NULL) && info.ram;

    box_libvirt_checkpoint_info_clear (&info);
    if (ram)
      break;
    g_main_context_iteration (NULL, FALSE);
    g_usleep (20000);
  }
  g_source_remove (timeout);
  return (g_get_monotonic_time () - start) / 1e6;
}

/* libvirt's state of @domain (VIR_DOMAIN_PAUSED...), -1 when there is none. */
static int
domain_state (const char *domain)
{
  g_autoptr(GError) error = NULL;
  virConnectPtr conn = box_libvirt_conn_get (BOX_LIBVIRT_PLUGIN (suite.hv)->conn, &error);
  virDomainPtr dom;
  int state = -1, reason;

  g_assert_no_error (error);
  dom = box_libvirt_domain_lookup (conn, domain);
  if (dom != NULL && virDomainGetState (dom, &state, &reason, 0) < 0)
    state = -1;
  if (dom != NULL)
    virDomainFree (dom);
  virConnectClose (conn);
  return state;
}

/* Waits until a fork of @checkpoint of @id is ready in advance
 * (box-libvirt-ready.c), other than @not_vm; its VM's ID. */
static char *
wait_ready_fork (const char *id, const char *checkpoint, const char *not_vm)
{
  guint timeout = g_timeout_add_seconds (300, timeout_cb, "a ready fork");
  const char *vm_id;

  while ((vm_id = box_libvirt_ready_vm_id (BOX_LIBVIRT_PLUGIN (suite.hv), id,
                                           checkpoint, 0)) == NULL ||
         g_strcmp0 (vm_id, not_vm) == 0) {
    g_main_context_iteration (NULL, FALSE);
    g_usleep (20000);
  }
  g_source_remove (timeout);
  return g_strdup (vm_id);
}

/* Waits until @id has at least @made ready forks, and a target of @target
 * (0: any); how many it has. */
static guint
wait_ready_sizes (const char *id, guint made, guint target)
{
  guint timeout = g_timeout_add_seconds (300, timeout_cb, "the ready forks' sizes");
  guint m, t;

  for (;;) {
    box_libvirt_ready_sizes (BOX_LIBVIRT_PLUGIN (suite.hv), id, &m, &t);
    if (m >= made && (target == 0 || t == target))
      break;
    g_main_context_iteration (NULL, FALSE);
    g_usleep (20000);
  }
  g_source_remove (timeout);
  return m;
}

/* Whether @file of @id's VM is a link of @file2 in checkpoint @checkpoint of @from. */
static gboolean
same_file (const char *id, const char *file, const char *from, const char *checkpoint,
           const char *file2)
{
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (BOX_LIBVIRT_PLUGIN (suite.hv), id);
  g_autofree char *dir = checkpoint_path (from, checkpoint);
  g_autofree char *a = g_build_filename (dir, file2, NULL);
  g_autofree char *b = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, file);
  GStatBuf sa, sb;

  return g_stat (a, &sa) == 0 && g_stat (b, &sb) == 0 && sa.st_ino == sb.st_ino;
}

/* Whether the pid file names a process that runs QEMU (set in @pid). */
static gboolean
is_qemu (const char *pid_path, pid_t *pid)
{
  g_autofree char *contents = NULL;
  g_autofree char *exe = NULL;
  g_autofree char *link = NULL;
  gint64 n;

  if (!g_file_get_contents (pid_path, &contents, NULL, NULL))
    return FALSE;
  n = g_ascii_strtoll (contents, NULL, 10);
  if (n <= 1)
    return FALSE;
  exe = g_strdup_printf ("/proc/%" G_GINT64_FORMAT "/exe", n);
  link = g_file_read_link (exe, NULL);
  if (link == NULL || strstr (link, "qemu-system") == NULL)
    return FALSE;
  *pid = (pid_t) n;
  return TRUE;
}

/* Size and Rss (KiB) of the QEMU of @id's mapping of its VM's RAM file
 * `ram` (smaps); FALSE when it maps none. */
static gboolean
ram_mapping_kib (const char *id, guint64 *size_kib, guint64 *rss_kib)
{
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (BOX_LIBVIRT_PLUGIN (suite.hv), id);
  g_autofree char *domain = box_libvirt_vm_domain_name (vm->vm_id);
  g_autofree char *ram = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, "ram");
  pid_t pid = box_libvirt_domain_qemu_pid (domain);
  g_autofree char *path = g_strdup_printf ("/proc/%d/smaps", (int) pid);
  g_autofree char *smaps = NULL;
  g_auto(GStrv) lines = NULL;
  gboolean in_ram = FALSE, found = FALSE;

  g_assert_cmpint (pid, >, 1);
  g_assert_true (g_file_get_contents (path, &smaps, NULL, NULL));
  lines = g_strsplit (smaps, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    const char *line = lines[i];

    /* a mapping's first line: "lo-hi perms offset dev inode path" */
    if (g_ascii_isxdigit (line[0]) && strchr (line, '-') != NULL && strchr (line, ' ') != NULL &&
        strchr (line, '-') < strchr (line, ' ')) {
      in_ram = g_str_has_suffix (line, ram);
      continue;
    }
    if (in_ram && g_str_has_prefix (line, "Size:")) {
      *size_kib = g_ascii_strtoull (line + 5, NULL, 10);
      found = TRUE;
    } else if (in_ram && g_str_has_prefix (line, "Rss:")) {
      *rss_kib = g_ascii_strtoull (line + 4, NULL, 10);
    }
  }
  return found;
}

/* Waits until no fault-in runs or waits (box-libvirt-fault-in.c), then
 * checks that @id's QEMU has its whole RAM mapping in its page tables
 * where an idle guest touches a fraction of it. */
static void
assert_faulted_in (const char *id)
{
  BoxLibvirtPlugin *plugin = BOX_LIBVIRT_PLUGIN (suite.hv);
  guint timeout = g_timeout_add_seconds (120, timeout_cb, "the RAM fault-in");
  guint64 size = 0, rss = 0;
  gboolean busy = TRUE;

  while (box_libvirt_fault_ins_done (plugin, &busy, NULL), busy) {
    g_main_context_iteration (NULL, FALSE);
    g_usleep (20000);
  }
  g_source_remove (timeout);
  g_assert_true (ram_mapping_kib (id, &size, &rss));
  g_test_message ("%s: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " MiB of its RAM mapping "
                  "in its QEMU's page tables", id, rss >> 10, size >> 10);
  g_assert_cmpuint (size, >=, (guint64) 2048 << 10);
  g_assert_cmpuint (rss, >=, size - (size >> 6));
  /* under TCG the dirty bitmap was settled too: QEMU's last migration is
   * the one cancelled after its set-up (an idle guest) */
  if (g_strcmp0 (plugin->accel, "tcg") == 0) {
    BoxLibvirtVm *vm = box_libvirt_lookup_vm (plugin, id);
    g_autofree char *domain = box_libvirt_vm_domain_name (vm->vm_id);
    g_autoptr(GError) error = NULL;
    virConnectPtr conn = box_libvirt_conn_get (plugin->conn, &error);
    virDomainPtr dom;
    g_autofree char *reply = NULL;

    g_assert_no_error (error);
    dom = box_libvirt_domain_lookup (conn, domain);
    g_assert_nonnull (dom);
    reply = box_libvirt_qmp (dom, "{\"execute\":\"query-migrate\"}", -1, &error);
    g_assert_no_error (error);
    g_test_message ("%s: query-migrate %s", id, reply);
    g_assert_nonnull (strstr (reply, "\"status\":\"cancelled\""));
    virDomainFree (dom);
    virConnectClose (conn);
  }
}

/* ---- tests ---- */

static void
test_errors (void)
{
  g_autoptr(GError) error = NULL;
  BoxHypervisorCapabilities caps;

  box_hypervisor_get_capabilities (suite.hv, &caps);
  g_assert_true (caps.flags & BOX_HYPERVISOR_CAP_CHECKPOINTS);
  g_assert_true (caps.flags & BOX_HYPERVISOR_CAP_FORK);
  g_assert_true (caps.flags & BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS);

  run_ok (suite.hv, BOX_VM_OP_CREATE, SANDBOX_A);
  g_assert_false (ckpt_op (BOX_VM_OP_CHECKPOINT, SANDBOX_A, "../v1", TRUE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (ckpt_op (BOX_VM_OP_CHECKPOINT, SANDBOX_A, "", FALSE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (ckpt_op (BOX_VM_OP_RESTORE, SANDBOX_A, "v9", TRUE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (fork_op (SANDBOX_B, "vm-test-b", SANDBOX_A, "v9", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_B, NULL), ==, BOX_VM_STATE_ABSENT);
  /* deleting what does not exist is fine */
  ckpt_ok (BOX_VM_OP_DELETE_CHECKPOINT, SANDBOX_A, "v9", FALSE);
  /* none of it left anything, and the VM runs on */
  g_assert_cmpuint (count_temporaries (), ==, 0);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_RUNNING);
}

static void
test_memory_restore (void)
{
  g_autofree char *dir = checkpoint_path (SANDBOX_A, "v1");
  g_autofree char *state = g_build_filename (dir, "state", NULL);
  g_autofree char *script = NULL;
  g_autofree char *check = NULL;
  g_autofree char *gone = NULL;
  g_autoptr(GError) error = NULL;
  gdouble ckpt_ms, restore_ms;

  source_pid = sh (suite.hv, SANDBOX_A,
                   "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; "
                   "echo before > /tmp/ckpt-file");
  ckpt_ms = ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_A, "v1", TRUE);
  g_assert_true (g_file_test (state, G_FILE_TEST_IS_REGULAR));
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_RUNNING);
  g_assert_false (ckpt_op (BOX_VM_OP_CHECKPOINT, SANDBOX_A, "v1", FALSE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);

  /* the guest carries on after the checkpoint, with its env */
  script = g_strdup_printf ("kill -0 %s && echo $BOX_TEST_VAR && kill %s && "
                            "rm /tmp/ckpt-file && echo after > /tmp/after-file", source_pid,
                            source_pid);
  check = sh (suite.hv, SANDBOX_A, script);
  g_assert_cmpstr (check, ==, "from-the-sandbox");

  restore_ms = ckpt_ok (BOX_VM_OP_RESTORE, SANDBOX_A, "v1", FALSE);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_RUNNING);
  g_free (script);
  script = g_strdup_printf ("kill -0 %s && cat /tmp/ckpt-file && echo $BOX_TEST_VAR", source_pid);
  g_free (check);
  check = sh (suite.hv, SANDBOX_A, script);
  g_assert_cmpstr (check, ==, "before\nfrom-the-sandbox");
  gone = sh (suite.hv, SANDBOX_A, "test -e /tmp/after-file && echo present || echo absent");
  g_assert_cmpstr (gone, ==, "absent");
  g_test_message ("memory checkpoint %.0f ms, restore %.0f ms", ckpt_ms, restore_ms);
}

static void
test_disk_restore (void)
{
  g_autofree char *check = NULL;
  g_autofree char *dir = checkpoint_path (SANDBOX_A, "v2");
  g_autofree char *state = g_build_filename (dir, "state", NULL);
  gdouble ckpt_ms, restore_ms;

  g_free (sh (suite.hv, SANDBOX_A, "echo on-disk > /var/tmp/disk-file; echo in-tmp > /tmp/t"));
  ckpt_ms = ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_A, "v2", FALSE);
  g_assert_true (g_file_test (dir, G_FILE_TEST_IS_DIR));
  g_assert_false (g_file_test (state, G_FILE_TEST_EXISTS));
  g_free (sh (suite.hv, SANDBOX_A, "rm /var/tmp/disk-file; echo later > /var/tmp/later"));

  restore_ms = ckpt_ok (BOX_VM_OP_RESTORE, SANDBOX_A, "v2", FALSE);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_RUNNING);
  /* a fresh boot on the checkpoint's disk: files back, /tmp and processes gone */
  check = sh (suite.hv, SANDBOX_A, "cat /var/tmp/disk-file; test -e /var/tmp/later || "
              "echo no-later; test -e /tmp/t || echo no-tmp; hostname");
  g_assert_cmpstr (check, ==, "on-disk\nno-later\nno-tmp\nvm-test-a");
  g_test_message ("disk-only checkpoint %.0f ms, restore (boot) %.0f ms", ckpt_ms, restore_ms);
}

/* The inode of @path (0 when absent). */
static guint64
inode_of (const char *path)
{
  GStatBuf st;

  return g_lstat (path, &st) == 0 ? (guint64) st.st_ino : 0;
}

/* Whether the POSIX ACL of @path grants @uid read. */
static gboolean
acl_grants (const char *path, guint uid)
{
  guint8 buf[1024];
  ssize_t n = getxattr (path, "system.posix_acl_access", buf, sizeof buf);

  for (ssize_t i = 4; n > 0 && i + 8 <= n; i += 8) {
    guint tag = buf[i] | buf[i + 1] << 8;
    guint perm = buf[i + 2] | buf[i + 3] << 8;
    guint id = buf[i + 4] | buf[i + 5] << 8 | buf[i + 6] << 16 | (guint) buf[i + 7] << 24;

    if (tag == 0x02 && id == uid && (perm & 4) != 0)
      return TRUE;
  }
  return FALSE;
}

/* Whether every descriptor @vm's QEMU holds on the file at @path is
 * read-only (and it holds one). */
static gboolean
qemu_reads_only (BoxLibvirtVm *vm, const char *path)
{
  g_autofree char *pid_path = g_strdup_printf ("/run/libvirt/qemu/box-%s.pid", vm->vm_id);
  g_autofree char *pid = NULL;
  g_autofree char *fd_dir = NULL;
  g_autoptr(GDir) dir = NULL;
  guint64 inode = inode_of (path);
  dev_t dev = 0;
  const char *entry;
  guint held = 0;
  GStatBuf file_st;

  g_assert_cmpint (g_lstat (path, &file_st), ==, 0);
  dev = file_st.st_dev;

  g_assert_true (g_file_get_contents (pid_path, &pid, NULL, NULL));
  fd_dir = g_strdup_printf ("/proc/%s/fd", g_strstrip (pid));
  dir = g_dir_open (fd_dir, 0, NULL);
  g_assert_nonnull (dir);
  while ((entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *fd = g_build_filename (fd_dir, entry, NULL);
    g_autofree char *info_path = g_strdup_printf ("/proc/%s/fdinfo/%s", pid, entry);
    g_autofree char *info = NULL;
    const char *flags;
    GStatBuf st;

    if (g_stat (fd, &st) != 0 || (guint64) st.st_ino != inode || st.st_dev != dev ||
        !g_file_get_contents (info_path, &info, NULL, NULL) ||
        (flags = strstr (info, "flags:")) == NULL)
      continue;
    held++;
    if ((g_ascii_strtoull (flags + strlen ("flags:"), NULL, 8) & O_ACCMODE) != O_RDONLY)
      return FALSE;
  }
  return held > 0;
}

/* Disk-only checkpoints of a running VM are qcow2 external snapshots
 * (box-libvirt-snapshot.c): each freezes the VM's overlay as a new layer,
 * root's and read-only to the VM, which the checkpoint links; nothing is
 * copied.  Two in a row (the second reopens the first's overlay through
 * its fd set), then a memory checkpoint and a cold pause of that QEMU,
 * and a wake whose new QEMU opens the chain by its names; a fork of the
 * first sees the disk as it was then. */
static void
test_disk_snapshots (void)
{
  BoxLibvirtPlugin *plugin = BOX_LIBVIRT_PLUGIN (suite.hv);
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (plugin, SANDBOX_A);
  g_autofree char *vm_dir = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, NULL);
  g_autofree char *disk = g_build_filename (vm_dir, "disk.qcow2", NULL);
  g_autofree char *next = g_build_filename (vm_dir, "disk.qcow2.next", NULL);
  g_autofree char *s1_dir = NULL;
  g_autofree char *s2_dir = NULL;
  g_autofree char *s1_disk = NULL;
  g_autofree char *s2_disk = NULL;
  g_autofree char *check = NULL;
  g_autoptr(GError) error = NULL;
  guint height = box_libvirt_layer_height (disk);
  guint64 disk_inode = inode_of (disk);

  g_free (sh (suite.hv, SANDBOX_A, "echo one > /var/tmp/s1; sync"));
  ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_A, "s1", FALSE);
  g_free (sh (suite.hv, SANDBOX_A, "echo two > /var/tmp/s1; echo two > /var/tmp/s2; sync"));
  ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_A, "s2", FALSE);
  g_free (sh (suite.hv, SANDBOX_A, "echo three > /var/tmp/s3; sync"));

  /* the VM's chain is two layers higher; each checkpoint's disk is one */
  g_assert_cmpuint (box_libvirt_layer_height (disk), ==, height + 2);
  g_assert_cmpuint (inode_of (disk), !=, disk_inode);
  g_assert_false (g_file_test (next, G_FILE_TEST_EXISTS));
  s1_dir = checkpoint_path (SANDBOX_A, "s1");
  s2_dir = checkpoint_path (SANDBOX_A, "s2");
  s1_disk = g_build_filename (s1_dir, "disk.qcow2", NULL);
  s2_disk = g_build_filename (s2_dir, "disk.qcow2", NULL);
  for (guint i = 1; i <= 2; i++) {
    g_autofree char *name = g_strdup_printf ("layer-%u.qcow2", height + i);
    g_autofree char *layer = g_build_filename (vm_dir, name, NULL);
    GStatBuf st;

    g_assert_cmpuint (inode_of (layer), ==, inode_of (i == 1 ? s1_disk : s2_disk));
    g_assert_cmpint (g_lstat (layer, &st), ==, 0);
    /* root's, its VM's uid reads it through the ACL only (whose mask,
     * read, the group bits show), and its QEMU holds it read-only */
    g_assert_cmpuint (st.st_uid, ==, 0);
    g_assert_cmpuint (st.st_mode & 0777, ==, 0640);
    g_assert_true (acl_grants (layer, box_libvirt_vm_uid (plugin, vm_dir)));
    g_assert_true (qemu_reads_only (vm, layer));
  }
  g_assert_cmpuint (inode_of (s1_disk), ==, disk_inode);

  /* the same QEMU migrates out, goes cold, and a new one reads the chain */
  ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_A, "s3", TRUE);
  run_ok (suite.hv, BOX_VM_OP_SUSPEND, SANDBOX_A);
  box_libvirt_vm_make_cold (plugin, vm);
  while (!vm->cold)
    g_main_context_iteration (NULL, TRUE);
  while (vm->busy)
    g_main_context_iteration (NULL, TRUE);
  run_ok (suite.hv, BOX_VM_OP_RESUME, SANDBOX_A);
  check = sh (suite.hv, SANDBOX_A, "cat /var/tmp/s1 /var/tmp/s2 /var/tmp/s3");
  g_assert_cmpstr (check, ==, "two\ntwo\nthree");

  /* a fork of s1 has the disk as it was then */
  if (!fork_op (SANDBOX_F, "vm-test-f", SANDBOX_A, "s1", &error))
    g_error ("fork of s1: %s", error->message);
  g_free (check);
  check = sh (suite.hv, SANDBOX_F, "cat /var/tmp/s1; test -e /var/tmp/s2 || echo no-s2");
  g_assert_cmpstr (check, ==, "one\nno-s2");
  run_ok (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_F);
}

static void
test_fork_memory (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *pid = NULL;
  g_autofree char *script = NULL;
  g_autofree char *check = NULL;
  g_autofree char *a_sees = NULL;
  g_autofree char *b_sees = NULL;
  g_autofree char *rand_a = NULL;
  g_autofree char *rand_b = NULL;
  gint64 start;

  pid = sh (suite.hv, SANDBOX_A,
            "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; echo src > /tmp/src-file");
  ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_A, "v3", TRUE);
  start = g_get_monotonic_time ();
  if (!fork_op (SANDBOX_B, "vm-test-b", SANDBOX_A, "v3", &error))
    g_error ("fork: %s", error->message);
  g_test_message ("memory fork %.0f ms", (g_get_monotonic_time () - start) / 1e3);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_B, NULL), ==, BOX_VM_STATE_RUNNING);
  {
    /* nothing copied: the fork's disk backs onto the checkpoint's, linked */
    BoxLibvirtVm *vm = box_libvirt_lookup_vm (BOX_LIBVIRT_PLUGIN (suite.hv), SANDBOX_B);
    g_autofree char *dir = checkpoint_path (SANDBOX_A, "v3");
    g_autofree char *ckpt_disk = g_build_filename (dir, "disk.qcow2", NULL);
    g_autofree char *disk = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, "disk.qcow2");
    /* A was restored before: v3 is itself on A's layers */
    g_autofree char *name = g_strdup_printf ("layer-%u.qcow2",
                                             box_libvirt_layer_height (ckpt_disk) + 1);
    g_autofree char *layer = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, name);
    g_autofree char *backing = box_libvirt_qcow2_backing (disk);
    GStatBuf a, b;

    g_assert_cmpstr (backing, ==, name);
    g_assert_cmpint (g_stat (ckpt_disk, &a), ==, 0);
    g_assert_cmpint (g_stat (layer, &b), ==, 0);
    g_assert_cmpuint (a.st_ino, ==, b.st_ino);
    g_assert_cmpuint (box_libvirt_file_allocated (disk), <, 4 << 20);
  }

  /* the source's processes and files, the fork's own identity and env */
  script = g_strdup_printf ("kill -0 %s && cat /tmp/src-file && hostname && echo $BOX_TEST_VAR",
                            pid);
  check = sh (suite.hv, SANDBOX_B, script);
  g_assert_cmpstr (check, ==, "src\nvm-test-b\nfrom-the-fork");
  rand_a = sh (suite.hv, SANDBOX_A, "head -c 16 /dev/urandom | od -An -tx1");
  rand_b = sh (suite.hv, SANDBOX_B, "head -c 16 /dev/urandom | od -An -tx1");
  g_assert_cmpstr (rand_a, !=, rand_b);

  /* independent both ways */
  g_free (sh (suite.hv, SANDBOX_A, "echo a > /tmp/only-a; echo a > /var/tmp/only-a"));
  g_free (sh (suite.hv, SANDBOX_B, "echo b > /tmp/only-b; echo b > /var/tmp/only-b"));
  a_sees = sh (suite.hv, SANDBOX_A, "ls /tmp/only-b /var/tmp/only-b 2>/dev/null | wc -l");
  b_sees = sh (suite.hv, SANDBOX_B, "ls /tmp/only-a /var/tmp/only-a 2>/dev/null | wc -l");
  g_assert_cmpstr (a_sees, ==, "0");
  g_assert_cmpstr (b_sees, ==, "0");
}

static void
test_fork_disk (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *check = NULL;
  gint64 start = g_get_monotonic_time ();

  if (!fork_op (SANDBOX_C, "vm-test-c", SANDBOX_A, "v2", &error))
    g_error ("fork: %s", error->message);
  g_test_message ("disk-only fork (boot) %.0f ms", (g_get_monotonic_time () - start) / 1e3);
  check = sh (suite.hv, SANDBOX_C, "cat /var/tmp/disk-file; test -e /tmp/t || echo no-tmp; "
              "hostname; echo $BOX_TEST_VAR");
  g_assert_cmpstr (check, ==, "on-disk\nno-tmp\nvm-test-c\nfrom-the-fork");
}

/* A memory checkpoint materialised in the background: a fork of it maps
 * its RAM file and loads the devices only, a restore too; processes,
 * files, identity and independence as with the full state. */
static void
test_fork_materialised (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = checkpoint_path (SANDBOX_A, "v3");
  g_autofree char *ram = g_build_filename (dir, "ram", NULL);
  g_autofree char *script = NULL;
  g_autofree char *check = NULL;
  g_autofree char *rand_a = NULL;
  g_autofree char *rand_d = NULL;
  g_autofree char *a_sees = NULL;
  g_autofree char *d_sees = NULL;
  g_autofree char *pid = sh (suite.hv, SANDBOX_B, "pgrep -o -x sleep");
  g_autofree char *ready_vm = NULL;
  g_autofree char *next_vm = NULL;
  g_autofree char *ready_dir = NULL;
  g_autofree char *ready_domain = NULL;
  BoxLibvirtVm *vm;
  gdouble waited;
  gint64 start;
  guint fault_ins;

  waited = wait_materialised (SANDBOX_A, "v3");
  /* sparse: the pages the guest had, not its 2 GiB */
  g_assert_cmpuint (box_libvirt_file_allocated (ram), >, 0);
  g_assert_cmpuint (box_libvirt_file_allocated (ram), <, (guint64) 2048 << 20);
  /* a fork of it made ready in advance: loaded, paused, never run */
  ready_vm = wait_ready_fork (SANDBOX_A, "v3", NULL);
  ready_domain = box_libvirt_vm_domain_name (ready_vm);
  g_assert_cmpint (domain_state (ready_domain), ==, VIR_DOMAIN_PAUSED);
  start = g_get_monotonic_time ();
  if (!fork_op (SANDBOX_D, "vm-test-d", SANDBOX_A, "v3", &error))
    g_error ("fork: %s", error->message);
  g_test_message ("materialised after %.1f s; fork of it %.0f ms, RAM file %" G_GUINT64_FORMAT
                  " MiB", waited, (g_get_monotonic_time () - start) / 1e3,
                  box_libvirt_file_allocated (ram) >> 20);
  vm = box_libvirt_lookup_vm (BOX_LIBVIRT_PLUGIN (suite.hv), SANDBOX_D);
  /* D is the ready fork */
  g_assert_cmpstr (vm->vm_id, ==, ready_vm);
  /* F right after finds none (the next is made once no fork runs): two
   * forks of v3 in the demand's window, so two are kept ready from now */
  if (!fork_op (SANDBOX_F, "vm-test-f", SANDBOX_A, "v3", &error))
    g_error ("fork: %s", error->message);
  {
    guint made, target;

    box_libvirt_ready_sizes (BOX_LIBVIRT_PLUGIN (suite.hv), SANDBOX_A, &made, &target);
    g_assert_cmpuint (target, ==, 2);
  }
  g_free (sh (suite.hv, SANDBOX_F, "test \"$(hostname)\" = vm-test-f"));
  run_ok (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_F);
  wait_ready_sizes (SANDBOX_A, 2, 0);
  next_vm = g_strdup (box_libvirt_ready_vm_id (BOX_LIBVIRT_PLUGIN (suite.hv), SANDBOX_A, "v3", 0));
  {
    const char *second = box_libvirt_ready_vm_id (BOX_LIBVIRT_PLUGIN (suite.hv), SANDBOX_A,
                                                  "v3", 1);
    g_autofree char *second_domain = box_libvirt_vm_domain_name (second);

    g_assert_cmpstr (second, !=, next_vm);
    g_assert_cmpint (domain_state (second_domain), ==, VIR_DOMAIN_PAUSED);
  }
  vm = box_libvirt_lookup_vm (BOX_LIBVIRT_PLUGIN (suite.hv), SANDBOX_D);
  /* the next fork of v3 takes the oldest */
  g_free (ready_domain);
  ready_domain = box_libvirt_vm_domain_name (next_vm);
  g_assert_cmpint (domain_state (ready_domain), ==, VIR_DOMAIN_PAUSED);

  /* a ready fork whose QEMU died while it waited: the fork is made anyway */
  {
    g_autofree char *pid_path = g_strdup_printf ("/run/libvirt/qemu/%s.pid", ready_domain);
    g_autofree char *e_check = NULL;
    GLogLevelFlags fatal;
    BoxLibvirtVm *e;
    pid_t qemu_pid = 0;

    ready_dir = box_libvirt_vm_path (suite.vm_dir, next_vm, NULL);
    g_assert_true (is_qemu (pid_path, &qemu_pid));
    g_assert_cmpint (kill (qemu_pid, SIGKILL), ==, 0);
    for (guint i = 0; i < 3000 && domain_state (ready_domain) == VIR_DOMAIN_PAUSED; i++)
      g_usleep (10000);
    g_assert_cmpint (domain_state (ready_domain), !=, VIR_DOMAIN_PAUSED);
    /* the plugin's warning that it made the fork instead is expected */
    fatal = g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
    if (!fork_op (SANDBOX_E, "vm-test-e", SANDBOX_A, "v3", &error))
      g_error ("fork with a dead ready fork: %s", error->message);
    g_log_set_always_fatal (fatal);
    e = box_libvirt_lookup_vm (BOX_LIBVIRT_PLUGIN (suite.hv), SANDBOX_E);
    g_assert_cmpstr (e->vm_id, !=, next_vm);
    g_assert_false (g_file_test (ready_dir, G_FILE_TEST_EXISTS));
    e_check = sh (suite.hv, SANDBOX_E, "cat /tmp/src-file && hostname");
    g_assert_cmpstr (e_check, ==, "src\nvm-test-e");
    run_ok (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_E);
  }
  /* the RAM file is the checkpoint's, mapped; its device state was used once */
  g_assert_true (same_file (SANDBOX_D, "ram", SANDBOX_A, "v3", "ram"));
  g_assert_true (same_file (SANDBOX_D, "cold.mig", SANDBOX_A, "v3", "state"));
  {
    g_autofree char *dev = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, "cold.dev");
    g_assert_false (g_file_test (dev, G_FILE_TEST_EXISTS));
  }

  /* the source's process (B's fork of v3 has it too) and files, D's own identity */
  script = g_strdup_printf ("kill -0 %s && cat /tmp/src-file && hostname && echo $BOX_TEST_VAR",
                            pid);
  check = sh (suite.hv, SANDBOX_D, script);
  g_assert_cmpstr (check, ==, "src\nvm-test-d\nfrom-the-fork");
  rand_a = sh (suite.hv, SANDBOX_A, "head -c 16 /dev/urandom | od -An -tx1");
  rand_d = sh (suite.hv, SANDBOX_D, "head -c 16 /dev/urandom | od -An -tx1");
  g_assert_cmpstr (rand_a, !=, rand_d);
  /* independent both ways: memory (a private mapping) and disk */
  g_free (sh (suite.hv, SANDBOX_D, "echo d > /tmp/only-d; echo d > /var/tmp/only-d; "
              "echo changed > /tmp/src-file"));
  a_sees = sh (suite.hv, SANDBOX_A, "ls /tmp/only-d /var/tmp/only-d 2>/dev/null | wc -l; "
               "cat /tmp/src-file");
  d_sees = sh (suite.hv, SANDBOX_D, "ls /tmp/only-a /var/tmp/only-a 2>/dev/null | wc -l");
  g_assert_cmpstr (a_sees, ==, "0\nsrc");
  g_assert_cmpstr (d_sees, ==, "0");

  /* a restore of it maps the same file */
  fault_ins = box_libvirt_fault_ins_done (BOX_LIBVIRT_PLUGIN (suite.hv), NULL, NULL);
  start = g_get_monotonic_time ();
  ckpt_ok (BOX_VM_OP_RESTORE, SANDBOX_A, "v3", FALSE);
  g_test_message ("restore of the materialised checkpoint %.0f ms",
                  (g_get_monotonic_time () - start) / 1e3);
  g_assert_true (same_file (SANDBOX_A, "ram", SANDBOX_A, "v3", "ram"));
  /* its RAM mapping is faulted in ahead of its next save (a restore's
   * first); nothing in the guest changed (the checks below).  The fork D
   * was not (forks are not), so an idle guest maps a fraction of it */
  {
    guint64 size = 0, rss = 0;

    assert_faulted_in (SANDBOX_A);
    g_assert_cmpuint (box_libvirt_fault_ins_done (BOX_LIBVIRT_PLUGIN (suite.hv), NULL, NULL), >,
                      fault_ins);
    g_assert_true (ram_mapping_kib (SANDBOX_D, &size, &rss));
    g_test_message ("%s: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " MiB mapped", SANDBOX_D,
                    rss >> 10, size >> 10);
    g_assert_cmpuint (rss, <, size / 2);
  }
  /* a disk-only checkpoint of a running VM wants one too; an operation
   * that comes while it runs (the next checkpoint, at once) makes it give
   * way, and it is done after that operation */
  {
    guint yields_before = 0, yields = 0, done_before;

    done_before = box_libvirt_fault_ins_done (BOX_LIBVIRT_PLUGIN (suite.hv), NULL,
                                              &yields_before);
    ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_A, "fi1", FALSE);
    ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_A, "fi2", FALSE);
    assert_faulted_in (SANDBOX_A);
    g_assert_cmpuint (box_libvirt_fault_ins_done (BOX_LIBVIRT_PLUGIN (suite.hv), NULL, &yields),
                      >=, done_before + 2);
    g_assert_cmpuint (yields, >, yields_before);
    ckpt_ok (BOX_VM_OP_DELETE_CHECKPOINT, SANDBOX_A, "fi1", FALSE);
    ckpt_ok (BOX_VM_OP_DELETE_CHECKPOINT, SANDBOX_A, "fi2", FALSE);
  }
  g_free (check);
  check = sh (suite.hv, SANDBOX_A, "pgrep -x sleep >/dev/null && cat /tmp/src-file && "
              "ls /tmp/only-a 2>/dev/null | wc -l && hostname && echo $BOX_TEST_VAR");
  g_assert_cmpstr (check, ==, "src\n0\nvm-test-a\nfrom-the-sandbox");
  g_free (d_sees);
  d_sees = sh (suite.hv, SANDBOX_D, "cat /tmp/src-file /tmp/only-d");
  g_assert_cmpstr (d_sees, ==, "changed\nd");
}

/* No fork of v3 for pool_idle_s (BOX_VM_TEST_POOL_IDLE_S): its ready forks
 * shrink back to one, the newest ending first (domain and directory). */
static void
test_ready_shrink (void)
{
  BoxLibvirtPlugin *plugin = BOX_LIBVIRT_PLUGIN (suite.hv);
  g_autofree char *oldest = NULL;
  g_autofree char *newest = NULL;
  g_autofree char *newest_domain = NULL;
  g_autofree char *newest_dir = NULL;
  guint made, timeout;

  /* three forks of v3 in the window: D, F and E (test_fork_materialised) */
  made = wait_ready_sizes (SANDBOX_A, 2, 0);
  oldest = g_strdup (box_libvirt_ready_vm_id (plugin, SANDBOX_A, "v3", 0));
  newest = g_strdup (box_libvirt_ready_vm_id (plugin, SANDBOX_A, "v3", made - 1));
  newest_domain = box_libvirt_vm_domain_name (newest);
  newest_dir = box_libvirt_vm_path (suite.vm_dir, newest, NULL);
  wait_ready_sizes (SANDBOX_A, 1, 1);
  g_assert_cmpstr (box_libvirt_ready_vm_id (plugin, SANDBOX_A, "v3", 0), ==, oldest);
  timeout = g_timeout_add_seconds (120, timeout_cb, "the ready fork's end");
  while (g_file_test (newest_dir, G_FILE_TEST_EXISTS))
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
  g_assert_cmpint (domain_state (newest_domain), ==, -1);
}

/* A pause of @id turned cold (its QEMU gone, its RAM in cold.mig), then a wake. */
static void
cold_pause_and_wake (const char *id)
{
  BoxLibvirtPlugin *plugin = BOX_LIBVIRT_PLUGIN (suite.hv);
  BoxLibvirtVm *vm;

  run_ok (suite.hv, BOX_VM_OP_SUSPEND, id);
  vm = box_libvirt_lookup_vm (plugin, id);
  box_libvirt_vm_make_cold (plugin, vm);
  while (!vm->cold)
    g_main_context_iteration (NULL, TRUE);
  while (vm->busy)
    g_main_context_iteration (NULL, TRUE);
  run_ok (suite.hv, BOX_VM_OP_RESUME, id);
}

/* Deleting the checkpoints and the source leaves the forks whole, also
 * across a cold pause and a stop and boot (which read their files again). */
static void
test_delete_source (void)
{
  BoxLibvirtPlugin *plugin = BOX_LIBVIRT_PLUGIN (suite.hv);
  g_autofree char *v3 = checkpoint_path (SANDBOX_A, "v3");
  g_autofree char *v1 = checkpoint_path (SANDBOX_A, "v1");
  g_autofree char *check = NULL;
  g_autofree char *check_c = NULL;
  g_autofree char *layer = NULL;
  g_autofree char *disk = NULL;
  g_autofree char *backing = NULL;
  BoxLibvirtVm *vm;

  g_autofree char *ready_vm = wait_ready_fork (SANDBOX_A, "v3", NULL);
  g_autofree char *ready_dir = box_libvirt_vm_path (suite.vm_dir, ready_vm, NULL);
  g_autofree char *ready_record = g_build_filename (plugin->state_dir, "pool", ready_vm, NULL);
  guint timeout;

  ckpt_ok (BOX_VM_OP_DELETE_CHECKPOINT, SANDBOX_A, "v3", FALSE);
  ckpt_ok (BOX_VM_OP_DELETE_CHECKPOINT, SANDBOX_A, "v3", FALSE);   /* idempotent */
  g_assert_false (g_file_test (v3, G_FILE_TEST_EXISTS));
  /* its ready fork ends with it: domain, directory, record */
  g_assert_null (box_libvirt_ready_vm_id (plugin, SANDBOX_A, "v3", 0));
  timeout = g_timeout_add_seconds (120, timeout_cb, "the ready fork's end");
  while (g_file_test (ready_dir, G_FILE_TEST_EXISTS) ||
         g_file_test (ready_record, G_FILE_TEST_EXISTS))
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
  {
    g_autofree char *ready_domain = box_libvirt_vm_domain_name (ready_vm);
    g_assert_cmpint (domain_state (ready_domain), ==, -1);
  }
  run_ok (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_A);
  g_assert_false (g_file_test (v1, G_FILE_TEST_EXISTS));
  /* the fork B of v3 keeps v3's disk as its top layer (restarted below) */
  vm = box_libvirt_lookup_vm (plugin, SANDBOX_B);
  disk = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, "disk.qcow2");
  backing = box_libvirt_qcow2_backing (disk);
  g_assert_true (g_str_has_prefix (backing, "layer-"));
  layer = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, backing);
  g_assert_true (g_file_test (layer, G_FILE_TEST_IS_REGULAR));

  cold_pause_and_wake (SANDBOX_B);
  check = sh (suite.hv, SANDBOX_B, "cat /tmp/src-file /var/tmp/only-b");
  g_assert_cmpstr (check, ==, "src\nb");

  /* D maps v3's RAM file: gone by name, whole in D, which goes cold
   * (its RAM into its cold.mig) and wakes without it */
  {
    g_autofree char *d_check = sh (suite.hv, SANDBOX_D, "cat /tmp/src-file /tmp/only-d");
    g_autofree char *d_again = NULL;
    BoxLibvirtVm *d = box_libvirt_lookup_vm (plugin, SANDBOX_D);
    g_autofree char *d_ram = box_libvirt_vm_path (suite.vm_dir, d->vm_id, "ram");

    g_assert_cmpstr (d_check, ==, "changed\nd");
    g_assert_true (g_file_test (d_ram, G_FILE_TEST_IS_REGULAR));
    cold_pause_and_wake (SANDBOX_D);
    d_again = sh (suite.hv, SANDBOX_D, "cat /tmp/src-file /tmp/only-d; hostname");
    g_assert_cmpstr (d_again, ==, "changed\nd\nvm-test-d");
    g_assert_false (g_file_test (d_ram, G_FILE_TEST_EXISTS));
    run_ok (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_D);
  }

  run_ok (suite.hv, BOX_VM_OP_SHUTDOWN, SANDBOX_C);
  run_ok (suite.hv, BOX_VM_OP_BOOT, SANDBOX_C);
  check_c = sh (suite.hv, SANDBOX_C, "cat /var/tmp/disk-file");
  g_assert_cmpstr (check_c, ==, "on-disk");
  run_ok (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_C);
}

/* A memory checkpoint of a paused sandbox needs no wake: a hot pause goes
 * cold on the state saved, a cold one's snapshot is linked. */
static void
test_paused (void)
{
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (BOX_LIBVIRT_PLUGIN (suite.hv), SANDBOX_B);
  g_autofree char *domain = box_libvirt_vm_domain_name (vm->vm_id);
  g_autofree char *cold_tmp = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, "cold.mig.tmp");
  g_autofree char *pid_path = g_strdup_printf ("/run/libvirt/qemu/%s.pid", domain);
  g_autofree char *check = NULL;
  g_autoptr(GError) error = NULL;
  pid_t hot_qemu = 0;

  g_free (sh (suite.hv, SANDBOX_B, "echo paused > /tmp/paused-file"));
  run_ok (suite.hv, BOX_VM_OP_SUSPEND, SANDBOX_B);
  {
    g_autofree char *vm_dir = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, NULL);
    g_autofree char *disk = g_build_filename (vm_dir, "disk.qcow2", NULL);
    g_autofree char *p0_dir = checkpoint_path (SANDBOX_B, "p0");
    g_autofree char *p0_disk = g_build_filename (p0_dir, "disk.qcow2", NULL);
    guint height = box_libvirt_layer_height (disk);
    guint64 inode = inode_of (disk);

    /* disk only, hot paused: a copy (the vCPUs are stopped; QEMU 7.2
     * keeps a descriptor removed from an fd set while they are), and the
     * VM stays hot */
    ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_B, "p0", FALSE);
    g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_B, NULL), ==,
                     BOX_VM_STATE_SUSPENDED);
    g_assert_false (vm->cold);
    g_assert_cmpuint (box_libvirt_layer_height (disk), ==, height);
    g_assert_cmpuint (inode_of (disk), ==, inode);
    g_assert_cmpuint (inode_of (p0_disk), !=, inode);
  }
  g_assert_true (is_qemu (pid_path, &hot_qemu));
  ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_B, "p1", TRUE);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_B, NULL), ==, BOX_VM_STATE_SUSPENDED);
  g_assert_true (vm->cold);
  /* the hot pause's QEMU ended (a standby for the wake may follow: it
   * holds no guest RAM, box-libvirt-standby.c) */
  g_assert_cmpint (kill (hot_qemu, 0), ==, -1);
  ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_B, "p2", TRUE);
  ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_B, "p3", FALSE);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_B, NULL), ==, BOX_VM_STATE_SUSPENDED);
  g_assert_true (vm->cold);
  g_assert_cmpuint (box_libvirt_qemu_rss_mib (domain), <, 100);

  run_ok (suite.hv, BOX_VM_OP_RESUME, SANDBOX_B);
  g_free (sh (suite.hv, SANDBOX_B, "rm /tmp/paused-file"));
  ckpt_ok (BOX_VM_OP_RESTORE, SANDBOX_B, "p2", FALSE);
  check = sh (suite.hv, SANDBOX_B, "cat /tmp/paused-file");
  g_assert_cmpstr (check, ==, "paused");
  /* p2's state was linked from the cold.mig it now replaces: no leftover */
  g_assert_false (g_file_test (cold_tmp, G_FILE_TEST_EXISTS));

  /* a stopped sandbox has only its disk */
  run_ok (suite.hv, BOX_VM_OP_SHUTDOWN, SANDBOX_B);
  g_assert_false (ckpt_op (BOX_VM_OP_CHECKPOINT, SANDBOX_B, "p4", TRUE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_B, "p4", FALSE);
  run_ok (suite.hv, BOX_VM_OP_BOOT, SANDBOX_B);
}

static void
vm_lost_cb (BoxHypervisor *hv, const char *sandbox_id, gpointer user_data)
{
  gboolean *lost = user_data;

  *lost = TRUE;
}

/* QEMU killed during a memory checkpoint: no checkpoint, no temporary;
 * and what a killed boxd leaves (a temporary nobody holds) is swept at
 * the next start, while another's checkpoint under way (held) is not. */
static void
test_kill_during_checkpoint (void)
{
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (BOX_LIBVIRT_PLUGIN (suite.hv), SANDBOX_B);
  g_autofree char *pid_path = g_strdup_printf ("/run/libvirt/qemu/box-%s.pid", vm->vm_id);
  g_autofree char *pid = NULL;
  g_autofree char *k1 = checkpoint_path (SANDBOX_B, "k1");
  g_autofree char *orphan = g_strconcat (k1, ".tmp-orphan", NULL);
  g_autofree char *orphan_lock = g_strconcat (orphan, ".lock", NULL);
  g_autofree char *held = g_strconcat (k1, ".tmp-held", NULL);
  g_autofree char *held_lock = g_strconcat (held, ".lock", NULL);
  g_autofree char *filler = NULL;
  g_autoptr(GHashTable) env = g_hash_table_new (g_str_hash, g_str_equal);
  BoxVmRequest request = {
    .sandbox_id = SANDBOX_B, .hostname = "vm-test-b", .template_name = "base", .image = "",
    .resources = { 2, 2048, 20 }, .env = env, .checkpoint_id = "k1", .memory = TRUE,
  };
  g_autoptr(GError) error = NULL;
  Wait wait = { FALSE, NULL };
  gboolean lost = FALSE;
  gulong handler;
  guint timeout;
  int held_fd;

  /* guest RAM worth saving, so that the kill lands in the migration */
  filler = sh (suite.hv, SANDBOX_B, "head -c 200000000 /dev/urandom > /tmp/fill; echo ok");
  g_assert_cmpstr (filler, ==, "ok");
  g_assert_true (g_file_get_contents (pid_path, &pid, NULL, NULL));
  handler = g_signal_connect (suite.hv, "vm-lost", G_CALLBACK (vm_lost_cb), &lost);
  timeout = g_timeout_add_seconds (120, timeout_cb, "checkpoint with QEMU killed");
  box_hypervisor_run_async (suite.hv, BOX_VM_OP_CHECKPOINT, &request, NULL, wait_cb, &wait);
  /* once the state file is being written */
  while (temporary_state_bytes () < (8 << 20) && !wait.done) {
    g_main_context_iteration (NULL, FALSE);
    g_usleep (1000);
  }
  g_assert_cmpint (kill ((pid_t) g_ascii_strtoll (pid, NULL, 10), SIGKILL), ==, 0);
  wait_for (&wait);
  g_assert_false (box_hypervisor_run_finish (suite.hv, wait.result, &error));
  g_object_unref (wait.result);
  g_test_message ("checkpoint with QEMU killed: %s", error->message);
  while (!lost)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
  g_signal_handler_disconnect (suite.hv, handler);
  g_assert_false (g_file_test (k1, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (count_temporaries (), ==, 0);

  /* a killed boxd's temporary, and one held by a checkpoint under way */
  g_assert_cmpint (g_mkdir (orphan, 0700), ==, 0);
  g_assert_true (g_file_set_contents (orphan_lock, "", 0, NULL));
  g_assert_cmpint (g_mkdir (held, 0700), ==, 0);
  held_fd = open (held_lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  g_assert_cmpint (held_fd, >=, 0);
  g_assert_cmpint (flock (held_fd, LOCK_EX), ==, 0);
  stop_plugin (&suite.hv);
  suite.hv = new_plugin (suite.engine);
  g_assert_false (g_file_test (orphan, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (orphan_lock, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (held, G_FILE_TEST_IS_DIR));
  close (held_fd);
  box_libvirt_remove_tree (held, NULL);
  g_unlink (held_lock);
  /* the sandbox kept its disk and its checkpoints */
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_B, NULL), ==, BOX_VM_STATE_SHUTOFF);
  ckpt_ok (BOX_VM_OP_RESTORE, SANDBOX_B, "p2", FALSE);
  g_free (filler);
  filler = sh (suite.hv, SANDBOX_B, "cat /tmp/paused-file");
  g_assert_cmpstr (filler, ==, "paused");
}

/* The helper QEMU killed midway: the checkpoint stays as it was (and
 * restores); what a boxd killed midway leaves (the helper's record and
 * directory, *.tmp, uncommitted files) goes at the next start, which
 * materialises the checkpoint again. */
static void
test_kill_during_materialise (void)
{
  BoxLibvirtPlugin *plugin = BOX_LIBVIRT_PLUGIN (suite.hv);
  g_autofree char *dir = checkpoint_path (SANDBOX_B, "m1");
  g_autofree char *ram = g_build_filename (dir, "ram", NULL);
  g_autofree char *ram_tmp = g_build_filename (dir, "ram.tmp", NULL);
  g_autofree char *dev = g_build_filename (dir, "devstate", NULL);
  g_autofree char *helper = NULL;
  g_autofree char *pid_path = NULL;
  g_autofree char *helper_dir = NULL;
  GLogLevelFlags fatal;
  pid_t qemu_pid = 0;
  g_autofree char *record = NULL;
  g_autofree char *fake_dir = box_libvirt_vm_path (suite.vm_dir, "fakehelper0", NULL);
  g_autofree char *fake_record = g_build_filename (plugin->state_dir, "pool", "fakehelper0",
                                                   NULL);
  g_autofree char *check = NULL;
  BoxLibvirtCheckpointInfo info = { 0 };
  guint timeout;

  g_free (sh (suite.hv, SANDBOX_B, "echo m1 > /tmp/m1-file"));
  ckpt_ok (BOX_VM_OP_CHECKPOINT, SANDBOX_B, "m1", TRUE);
  timeout = g_timeout_add_seconds (300, timeout_cb, "the helper domain");
  while (box_libvirt_materialise_helper (plugin, SANDBOX_B, "m1") == NULL) {
    g_main_context_iteration (NULL, FALSE);
    g_usleep (2000);
  }
  helper = g_strdup (box_libvirt_materialise_helper (plugin, SANDBOX_B, "m1"));
  pid_path = g_strdup_printf ("/run/libvirt/qemu/box-%s.pid", helper);
  helper_dir = box_libvirt_vm_path (suite.vm_dir, helper, NULL);
  record = g_build_filename (plugin->state_dir, "pool", helper, NULL);
  /* its QEMU, once exec'd (libvirt writes the pid file before) */
  while (box_libvirt_materialise_helper (plugin, SANDBOX_B, "m1") != NULL &&
         !is_qemu (pid_path, &qemu_pid)) {
    g_main_context_iteration (NULL, FALSE);
    g_usleep (1000);
  }
  g_test_message ("killing the helper's QEMU, pid %d", (int) qemu_pid);
  g_assert_cmpint (qemu_pid, >, 1);
  /* the job's failure is a warning: expected here */
  fatal = g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  g_assert_cmpint (kill (qemu_pid, SIGKILL), ==, 0);
  /* m1's job: earlier checkpoints' jobs may be queued after it */
  while (box_libvirt_materialise_helper (plugin, SANDBOX_B, "m1") != NULL)
    g_main_context_iteration (NULL, TRUE);
  g_log_set_always_fatal (fatal);
  g_source_remove (timeout);
  g_test_message ("the job ended");
  g_assert_true (box_libvirt_checkpoint_info_load (plugin, SANDBOX_B, "m1", &info, NULL));
  g_assert_false (info.ram);
  box_libvirt_checkpoint_info_clear (&info);
  g_assert_false (g_file_test (ram, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (ram_tmp, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (helper_dir, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (record, G_FILE_TEST_EXISTS));

  /* what a killed boxd leaves */
  g_assert_true (g_file_set_contents (ram_tmp, "x", -1, NULL));
  g_assert_true (g_file_set_contents (ram, "x", -1, NULL));
  g_assert_true (g_file_set_contents (dev, "x", -1, NULL));
  g_assert_cmpint (g_mkdir (fake_dir, 0711), ==, 0);
  g_assert_true (g_file_set_contents (fake_record, "", 0, NULL));
  stop_plugin (&suite.hv);
  suite.hv = new_plugin (suite.engine);
  plugin = BOX_LIBVIRT_PLUGIN (suite.hv);
  g_test_message ("restarted");
  g_assert_false (g_file_test (ram_tmp, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (fake_dir, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (fake_record, G_FILE_TEST_EXISTS));
  /* queued again at start: materialised for real this time */
  wait_materialised (SANDBOX_B, "m1");
  g_assert_cmpuint (box_libvirt_file_allocated (ram), >, 4096);
  g_free (sh (suite.hv, SANDBOX_B, "rm /tmp/m1-file"));
  ckpt_ok (BOX_VM_OP_RESTORE, SANDBOX_B, "m1", FALSE);
  g_assert_true (same_file (SANDBOX_B, "ram", SANDBOX_B, "m1", "ram"));
  check = sh (suite.hv, SANDBOX_B, "cat /tmp/m1-file");
  g_assert_cmpstr (check, ==, "m1");
}

static void
test_destroy (void)
{
  g_autofree char *p1 = checkpoint_path (SANDBOX_B, "p1");

  g_assert_true (g_file_test (p1, G_FILE_TEST_IS_DIR));
  run_ok (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_B);
  g_assert_false (g_file_test (p1, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (count_temporaries (), ==, 0);
}

int
main (int argc, char **argv)
{
  const char *const ids[] = { SANDBOX_A, SANDBOX_B, SANDBOX_C, SANDBOX_D, SANDBOX_E,
                              SANDBOX_F };
  int status;

  g_test_init (&argc, &argv, NULL);
  /* ready forks shrink after this long without a fork (test_ready_shrink) */
  g_setenv ("BOX_VM_TEST_POOL_IDLE_S", "45", TRUE);
  suite_init ("test-ckpt-data-");
  for (guint i = 0; i < G_N_ELEMENTS (ids); i++)
    run_op (suite.hv, BOX_VM_OP_DESTROY, ids[i], 20, NULL);

  g_test_add_func ("/libvirt-ckpt-vm/errors", test_errors);
  g_test_add_func ("/libvirt-ckpt-vm/memory-restore", test_memory_restore);
  g_test_add_func ("/libvirt-ckpt-vm/disk-restore", test_disk_restore);
  g_test_add_func ("/libvirt-ckpt-vm/disk-snapshots", test_disk_snapshots);
  g_test_add_func ("/libvirt-ckpt-vm/fork-memory", test_fork_memory);
  g_test_add_func ("/libvirt-ckpt-vm/fork-disk", test_fork_disk);
  g_test_add_func ("/libvirt-ckpt-vm/fork-materialised", test_fork_materialised);
  g_test_add_func ("/libvirt-ckpt-vm/ready-shrink", test_ready_shrink);
  g_test_add_func ("/libvirt-ckpt-vm/delete-source", test_delete_source);
  g_test_add_func ("/libvirt-ckpt-vm/paused", test_paused);
  g_test_add_func ("/libvirt-ckpt-vm/kill-during-checkpoint", test_kill_during_checkpoint);
  g_test_add_func ("/libvirt-ckpt-vm/kill-during-materialise", test_kill_during_materialise);
  g_test_add_func ("/libvirt-ckpt-vm/destroy", test_destroy);
  status = g_test_run ();

  if (suite.hv != NULL) {
    for (guint i = 0; i < G_N_ELEMENTS (ids); i++)
      run_op (suite.hv, BOX_VM_OP_DESTROY, ids[i], 20, NULL);
    stop_plugin (&suite.hv);
  }
  g_clear_object (&suite.engine);
  g_free (source_pid);
  g_free (suite.data_dir);
  g_free (suite.vm_dir);
  return status;
}
