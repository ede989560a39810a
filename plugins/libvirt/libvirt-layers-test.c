/* libvirt-layers-test.c: checkpoint disks shared as backing files
 * (box-libvirt-layers.c) on real qcow2 images, and materialised
 * checkpoints' RAM files shared with the VMs that map them, no VM. */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "box-libvirt-op.h"

static char *
path (const char *dir, const char *name)
{
  return g_build_filename (dir, name, NULL);
}

/* The uids an ACL grants @want (4: read, 6: read and write) to; NULL when
 * it has none. */
static GArray *
users_with (const char *file, guint want)
{
  guint8 buf[1024];
  ssize_t n = getxattr (file, "system.posix_acl_access", buf, sizeof buf);
  GArray *uids;

  if (n < 0)
    return NULL;
  g_assert_cmpint (n, >=, 4);
  g_assert_cmpuint (buf[0], ==, 2);
  uids = g_array_new (FALSE, FALSE, sizeof (guint));
  for (ssize_t i = 4; i + 8 <= n; i += 8) {
    guint tag = buf[i] | buf[i + 1] << 8;
    guint perm = buf[i + 2] | buf[i + 3] << 8;
    guint id = buf[i + 4] | buf[i + 5] << 8 | buf[i + 6] << 16 | (guint) buf[i + 7] << 24;
    if (tag == 0x02) {
      g_assert_cmpuint (perm, ==, want);
      g_array_append_val (uids, id);
    } else if (tag == 0x10) {
      g_assert_cmpuint (perm, ==, want);
    } else if (tag == 0x04 || tag == 0x20) {
      g_assert_cmpuint (perm, ==, 0);    /* nobody else */
    }
  }
  return uids;
}

static void
assert_users (const char *file, guint perm, guint a, guint b)
{
  g_autoptr(GArray) uids = users_with (file, perm);
  guint want[2] = { a, b };
  guint n = (a != 0) + (b != 0);

  if (n == 0) {
    GStatBuf st;
    g_assert_null (uids);
    g_assert_cmpint (g_stat (file, &st), ==, 0);
    g_assert_cmpuint (st.st_mode & 0777, ==, 0600);
    return;
  }
  g_assert_nonnull (uids);
  g_assert_cmpuint (uids->len, ==, n);
  for (guint i = 0; i < n; i++)
    g_assert_cmpuint (g_array_index (uids, guint, i), ==, want[i]);
}

/* layers: read, never write */
static void
assert_readers (const char *file, guint a, guint b)
{
  assert_users (file, 4, a, b);
}

/* The first ACL sync of a test; FALSE (the test skipped, @root removed)
 * on a file system without POSIX ACLs. */
static gboolean
first_sync (const char *root)
{
  g_autoptr(GError) error = NULL;

  if (box_libvirt_layers_sync (root, 0, &error))
    return TRUE;
  if (g_error_matches (error, BOX_ERROR, BOX_ERROR_INTERNAL) &&
      strstr (error->message, g_strerror (EOPNOTSUPP)) != NULL) {
    g_test_skip ("no POSIX ACLs on this file system");
    box_libvirt_remove_tree (root, NULL);
    return FALSE;
  }
  g_assert_no_error (error);
  return TRUE;
}

static guint64
inode (const char *file)
{
  GStatBuf st;

  g_assert_cmpint (g_stat (file, &st), ==, 0);
  return st.st_ino;
}

/* qemu-img follows the whole chain of @disk by its relative names */
static void
assert_chain_opens (const char *disk, guint images)
{
  const char *argv[] = { "qemu-img", "info", "--backing-chain", "-U", disk, NULL };
  g_autofree char *out = NULL;
  g_autoptr(GError) error = NULL;
  int status = 0;
  guint count = 0;

  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                               &out, NULL, &status, &error));
  g_assert_no_error (error);
  g_assert_cmpint (status, ==, 0);
  for (const char *p = out; (p = strstr (p, "image: ")) != NULL; p++)
    count++;
  g_assert_cmpuint (count, ==, images);
}

static void
test_layers (void)
{
  g_autofree char *root = g_dir_make_tmp ("box-libvirt-layers-XXXXXX", NULL);
  g_autofree char *vms = path (root, "vms");
  g_autofree char *ckpts = path (root, "checkpoints");
  g_autofree char *base = path (root, "base.raw");
  g_autofree char *tmpl = path (root, "template.qcow2");
  g_autofree char *a = g_build_filename (vms, "aaa", NULL);
  g_autofree char *f1 = g_build_filename (vms, "fff1", NULL);
  g_autofree char *f2 = g_build_filename (vms, "fff2", NULL);
  g_autofree char *c1 = g_build_filename (ckpts, "sb-a.v1", NULL);
  g_autofree char *c2 = g_build_filename (ckpts, "sb-f.v1", NULL);
  g_autofree char *a_disk = path (a, "disk.qcow2");
  g_autofree char *c1_disk = path (c1, "disk.qcow2");
  g_autofree char *c2_disk = path (c2, "disk.qcow2");
  g_autofree char *f1_disk = path (f1, "disk.qcow2");
  g_autofree char *f2_disk = path (f2, "disk.qcow2");
  g_autofree char *f1_layer1 = path (f1, "layer-1.qcow2");
  g_autofree char *f2_layer1 = path (f2, "layer-1.qcow2");
  g_autofree char *f2_layer2 = path (f2, "layer-2.qcow2");
  g_autofree char *c2_layer1 = path (c2, "layer-1.qcow2");
  g_autofree char *backing = NULL;
  g_autoptr(GError) error = NULL;
  guint uid = 0;

  g_assert_nonnull (root);
  g_assert_cmpint (g_mkdir (vms, 0711), ==, 0);
  g_assert_cmpint (g_mkdir (ckpts, 0711), ==, 0);
  g_assert_cmpint (g_mkdir (c1, 0700), ==, 0);
  g_assert_cmpint (g_mkdir (c2, 0700), ==, 0);
  g_assert_true (g_file_set_contents (base, "", 0, NULL));
  g_assert_cmpint (truncate (base, 64 << 20), ==, 0);
  g_assert_true (box_libvirt_create_overlay (tmpl, base, "raw", 64 << 20, &error));
  g_assert_true (box_libvirt_vm_dir_claim (root, a, 500, 510, &uid, &error));
  g_assert_true (box_libvirt_create_overlay (a_disk, tmpl, "qcow2", 64 << 20, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_chmod (a_disk, 0600), ==, 0);   /* as box_libvirt_give_to_qemu() */

  /* a checkpoint of a VM of the template is layer 1 of its forks */
  g_assert_true (box_libvirt_copy_sparse (a_disk, c1_disk, &error));
  g_assert_cmpuint (box_libvirt_layer_height (c1_disk), ==, 0);
  g_assert_true (box_libvirt_vm_dir_claim (root, f1, 500, 510, &uid, &error));
  g_assert_cmpuint (uid, ==, 501);
  g_assert_true (box_libvirt_layers_overlay (c1_disk, f1, f1_disk, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (inode (f1_layer1), ==, inode (c1_disk));
  backing = box_libvirt_qcow2_backing (f1_disk);
  g_assert_cmpstr (backing, ==, "layer-1.qcow2");
  g_assert_cmpuint (box_libvirt_layer_height (f1_disk), ==, 1);
  assert_chain_opens (f1_disk, 4);
  if (!first_sync (root))
    return;
  /* the fork's QEMU reads the checkpoint's disk; nobody else does */
  assert_readers (c1_disk, 501, 0);
  assert_readers (a_disk, 0, 0);

  /* a checkpoint of the fork keeps its layer; a fork of that has both */
  g_assert_true (box_libvirt_copy_sparse (f1_disk, c2_disk, &error));
  g_assert_true (box_libvirt_layers_link (f1, c2, box_libvirt_layer_height (c2_disk), NULL,
                                          &error));
  g_assert_cmpuint (inode (c2_layer1), ==, inode (c1_disk));
  g_assert_true (box_libvirt_vm_dir_claim (root, f2, 500, 510, &uid, &error));
  g_assert_cmpuint (uid, ==, 502);
  g_assert_true (box_libvirt_layers_overlay (c2_disk, f2, f2_disk, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (box_libvirt_layer_height (f2_disk), ==, 2);
  g_assert_cmpuint (inode (f2_layer1), ==, inode (c1_disk));
  g_assert_cmpuint (inode (f2_layer2), ==, inode (c2_disk));
  assert_chain_opens (f2_disk, 5);
  g_assert_true (box_libvirt_layers_sync (root, 0, &error));
  assert_readers (c1_disk, 501, 502);
  assert_readers (c2_disk, 502, 0);

  /* deleting the checkpoints leaves what the forks link */
  g_assert_true (box_libvirt_remove_tree (c1, &error));
  g_assert_true (box_libvirt_remove_tree (c2, &error));
  assert_chain_opens (f1_disk, 4);
  assert_chain_opens (f2_disk, 5);
  /* a fork gone: its uid reads nothing any more */
  g_assert_true (box_libvirt_remove_tree (f1, &error));
  g_assert_true (box_libvirt_layers_sync (root, 0, &error));
  assert_readers (f2_layer1, 502, 0);
  assert_chain_opens (f2_disk, 5);

  /* a restore of the VM links under temporary names, trimmed when given up */
  {
    g_autofree char *t1 = path (a, "layer-1.qcow2.tmp");
    g_autofree char *t2 = path (a, "layer-2.qcow2.tmp");
    g_autofree char *a_tmp = path (a, "disk.qcow2.tmp");
    g_assert_true (box_libvirt_layers_overlay (f2_layer2, a, a_tmp, ".tmp", &error));
    g_assert_no_error (error);
    g_assert_cmpuint (inode (t1), ==, inode (f2_layer1));
    g_assert_cmpuint (inode (t2), ==, inode (f2_layer2));
    g_assert_cmpuint (box_libvirt_layer_height (a_tmp), ==, 2);
    box_libvirt_layers_trim (a, BOX_LIBVIRT_LAYERS_MAX);
    g_assert_false (g_file_test (t1, G_FILE_TEST_EXISTS));
    g_assert_false (g_file_test (t2, G_FILE_TEST_EXISTS));
    g_unlink (a_tmp);
  }

  /* not a qcow2 image: nothing linked, no overlay */
  {
    g_autofree char *junk = path (root, "junk");
    g_autofree char *g = g_build_filename (vms, "ggg", NULL);
    g_autofree char *g_disk = path (g, "disk.qcow2");
    g_assert_true (g_file_set_contents (junk, "not qcow2", -1, NULL));
    g_assert_cmpint (g_mkdir (g, 0711), ==, 0);
    g_assert_false (box_libvirt_layers_overlay (junk, g, g_disk, NULL, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
    g_clear_error (&error);
    g_assert_false (g_file_test (g_disk, G_FILE_TEST_EXISTS));
  }

  /* the last fork gone: the layer is nobody's to read */
  {
    g_autofree char *keep = path (root, "kept.qcow2");
    g_assert_cmpint (link (f2_layer1, keep), ==, 0);
    g_assert_true (box_libvirt_remove_tree (f2, &error));
    /* (a link outside vms/ and checkpoints/ is not looked at: sync by
     * a checkpoint directory that still holds it) */
    g_assert_cmpint (g_mkdir (c1, 0700), ==, 0);
    g_assert_cmpint (link (keep, c1_disk), ==, 0);
    g_assert_true (box_libvirt_layers_sync (root, 0, &error));
    g_assert_no_error (error);
    assert_readers (c1_disk, 0, 0);
  }
  g_assert_true (box_libvirt_remove_tree (root, &error));
}

/* A materialised checkpoint's RAM file: linked into the VMs that map it,
 * read and write for exactly their uids (QEMU 7.2 opens it read-write). */
static void
test_ram (void)
{
  g_autofree char *root = g_dir_make_tmp ("box-ram-XXXXXX", NULL);
  g_autofree char *vms = path (root, "vms");
  g_autofree char *ckpts = path (root, "checkpoints");
  g_autofree char *c = g_build_filename (ckpts, "sbx.v1", NULL);
  g_autofree char *c_ram = path (c, "ram");
  g_autofree char *c_dev = path (c, "devstate");
  g_autofree char *f1 = g_build_filename (vms, "f1", NULL);
  g_autofree char *f2 = g_build_filename (vms, "f2", NULL);
  g_autofree char *f1_ram = path (f1, "ram");
  g_autofree char *f1_dev = path (f1, "cold.dev");
  g_autofree char *f2_ram = path (f2, "ram.tmp");
  g_autofree char *f2_dev = path (f2, "cold.dev.tmp");
  g_autofree char *f2_ram_final = path (f2, "ram");
  g_autoptr(GError) error = NULL;
  guint uid = 0;

  g_assert_cmpint (g_mkdir (vms, 0711), ==, 0);
  g_assert_cmpint (g_mkdir (ckpts, 0711), ==, 0);
  g_assert_cmpint (g_mkdir (c, 0700), ==, 0);
  g_assert_true (box_libvirt_vm_dir_claim (root, f1, 500, 510, &uid, &error));
  g_assert_true (box_libvirt_vm_dir_claim (root, f2, 500, 510, &uid, &error));
  g_assert_cmpuint (uid, ==, 501);

  /* not materialised (no ram, or no devstate): nothing linked */
  g_assert_false (box_libvirt_link_ram_state (c, f1, ""));
  g_assert_true (g_file_set_contents (c_ram, "pages", -1, NULL));
  g_assert_cmpint (g_chmod (c_ram, 0600), ==, 0);
  g_assert_false (box_libvirt_link_ram_state (c, f1, ""));
  g_assert_false (g_file_test (f1_ram, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_set_contents (c_dev, "devices", -1, NULL));

  g_assert_true (box_libvirt_link_ram_state (c, f1, ""));
  g_assert_cmpuint (inode (f1_ram), ==, inode (c_ram));
  g_assert_cmpuint (inode (f1_dev), ==, inode (c_dev));
  if (!first_sync (root))
    return;
  assert_users (c_ram, 6, 500, 0);
  /* a restore's temporary names are not granted until renamed */
  g_assert_true (box_libvirt_link_ram_state (c, f2, ".tmp"));
  g_assert_cmpuint (inode (f2_dev), ==, inode (c_dev));
  g_assert_true (box_libvirt_layers_sync (root, 0, &error));
  assert_users (c_ram, 6, 500, 0);
  g_assert_true (box_libvirt_rename_file (f2_ram, f2_ram_final, &error));
  g_assert_true (box_libvirt_layers_sync (root, 0, &error));
  assert_users (c_ram, 6, 500, 501);

  /* the checkpoint deleted: the VMs keep the file, a VM gone loses it */
  g_assert_true (box_libvirt_remove_tree (c, &error));
  g_assert_true (box_libvirt_remove_tree (f1, &error));
  g_assert_true (box_libvirt_layers_sync (root, 0, &error));
  assert_users (f2_ram_final, 6, 501, 0);
  {
    /* the last VM's link gone (a later cold pause): nobody's any more */
    g_assert_cmpint (g_mkdir (c, 0700), ==, 0);
    g_assert_cmpint (link (f2_ram_final, c_ram), ==, 0);
    g_assert_cmpint (g_unlink (f2_ram_final), ==, 0);
    g_assert_true (box_libvirt_layers_sync (root, 0, &error));
    g_assert_no_error (error);
    assert_users (c_ram, 6, 0, 0);
  }
  g_assert_true (box_libvirt_remove_tree (root, &error));
}

/* A qcow2 image at @file backing onto @backing, not opened. */
static void
make_overlay (const char *file, const char *backing)
{
  g_autoptr(GError) error = NULL;
  const char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-u", "-F", "qcow2",
                         "-b", backing, file, "64M", NULL };

  g_assert_true (box_libvirt_run_command (argv, &error));
  g_assert_no_error (error);
}

/* disk.qcow2.next on layer-@n, as a disk snapshot makes it. */
static void
make_next (const char *next, guint n)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (box_libvirt_layers_new_overlay (next, n, 64 << 20, &error));
  g_assert_no_error (error);
}

/* What a boxd killed in the middle of a disk snapshot leaves
 * (box-libvirt-snapshot.c), with no QEMU running: disk.qcow2.next over
 * the frozen layer (a link of disk.qcow2) becomes disk.qcow2, the layer
 * root's; a disk.qcow2.next over anything else is removed. */
static void
test_snapshot_recover (void)
{
  g_autoptr(BoxLibvirtPlugin) plugin = g_object_new (BOX_TYPE_LIBVIRT_PLUGIN, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *root = g_dir_make_tmp ("box-libvirt-snap-XXXXXX", NULL);
  BoxLibvirtVm *vm = box_libvirt_vm_new ("sb-aaaaaaaaaaaa");
  g_autofree char *dir = NULL;
  g_autofree char *disk = NULL;
  g_autofree char *next = NULL;
  g_autofree char *layer1 = NULL;
  g_autofree char *layer2 = NULL;
  guint64 old_disk, new_disk;
  GStatBuf st;

  if (geteuid () != 0) {
    g_test_skip ("the recovery gives files to root: run as root");
    box_libvirt_vm_free (vm);
    box_libvirt_remove_tree (root, NULL);
    return;
  }
  if (!first_sync (root)) {
    box_libvirt_vm_free (vm);
    return;
  }
  plugin->config.vm_dir = g_strdup (root);
  vm->vm_id = g_strdup ("bbbbbbbbbbbb");
  dir = box_libvirt_vm_path (root, vm->vm_id, NULL);
  disk = path (dir, "disk.qcow2");
  next = path (dir, "disk.qcow2.next");
  layer1 = path (dir, "layer-1.qcow2");
  layer2 = path (dir, "layer-2.qcow2");
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  make_overlay (disk, "/nonexistent/template.qcow2");

  /* nothing to do */
  g_assert_true (box_libvirt_disk_snapshot_recover (plugin, vm, NULL, &error));
  g_assert_no_error (error);
  /* a layer linked by a snapshot cut before its new overlay: removed */
  g_assert_cmpint (link (disk, layer1), ==, 0);
  g_assert_true (box_libvirt_disk_snapshot_recover (plugin, vm, NULL, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (layer1, G_FILE_TEST_EXISTS));

  /* the snapshot was taken (or not: the new overlay is empty): finished,
   * the frozen layer (the VM's, as QEMU's overlay was) becomes root's */
  g_assert_cmpint (link (disk, layer1), ==, 0);
  g_assert_cmpint (chown (disk, 4321, 4321), ==, 0);
  g_assert_cmpint (g_chmod (disk, 0644), ==, 0);
  make_next (next, 1);
  old_disk = inode (disk);
  new_disk = inode (next);
  g_assert_true (box_libvirt_disk_snapshot_recover (plugin, vm, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (inode (disk), ==, new_disk);
  g_assert_cmpuint (inode (layer1), ==, old_disk);
  g_assert_false (g_file_test (next, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (box_libvirt_layer_height (disk), ==, 1);
  g_assert_cmpint (g_lstat (layer1, &st), ==, 0);
  g_assert_cmpuint (st.st_uid, ==, 0);
  g_assert_cmpuint (st.st_mode & 0007, ==, 0);

  /* a new overlay over a layer that is not the VM's disk: removed; that
   * layer is no link of the disk, so it is not the snapshot's and stays */
  g_assert_true (box_libvirt_copy_sparse (disk, layer2, &error));
  make_next (next, 2);
  g_assert_true (box_libvirt_disk_snapshot_recover (plugin, vm, NULL, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (next, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (layer2, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (inode (disk), ==, new_disk);
  g_assert_cmpuint (inode (layer1), ==, old_disk);
  g_assert_cmpint (g_unlink (layer2), ==, 0);

  /* with no new overlay, the chain's own layers stay: only a link of the
   * disk above its height goes */
  g_assert_true (box_libvirt_disk_snapshot_recover (plugin, vm, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (inode (layer1), ==, old_disk);
  g_assert_cmpint (link (disk, layer2), ==, 0);
  g_assert_true (box_libvirt_disk_snapshot_recover (plugin, vm, NULL, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (layer2, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (inode (layer1), ==, old_disk);
  g_assert_cmpuint (inode (disk), ==, new_disk);

  /* an unreadable disk says nothing of its height: nothing goes */
  g_assert_cmpint (g_rename (disk, next), ==, 0);
  g_assert_cmpint (g_rename (next, layer2), ==, 0);
  g_assert_true (box_libvirt_disk_snapshot_recover (plugin, vm, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (inode (layer1), ==, old_disk);
  g_assert_cmpuint (inode (layer2), ==, new_disk);

  box_libvirt_vm_free (vm);
  g_assert_true (box_libvirt_remove_tree (root, &error));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/libvirt/layers", test_layers);
  g_test_add_func ("/libvirt/layers/ram", test_ram);
  g_test_add_func ("/libvirt/layers/snapshot-recover", test_snapshot_recover);
  return g_test_run ();
}
