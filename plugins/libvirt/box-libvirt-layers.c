/* box-libvirt-layers.c: checkpoint disks shared as qcow2 backing files.
 *
 * A fork (or a restore) of a checkpoint does not copy its disk: its own
 * disk is a new, empty qcow2 overlay whose backing file is the checkpoint's
 * disk, which QEMU opens read-only.  The checkpoint's disk is hard-linked
 * into the VM's directory, so the file system counts its users: deleting
 * the checkpoint (or its sandbox) unlinks its name and leaves the file
 * while any VM links it; the last VM's removal frees it.  Nothing is
 * counted by us, so no crash can leave a count wrong.
 *
 * A disk-only checkpoint of a running VM goes the other way
 * (box-libvirt-snapshot.c): the VM's overlay is frozen as its next layer,
 * which the checkpoint links as its disk, and the VM gets a new overlay on
 * it.
 *
 * Backing names are relative and numbered by height: a checkpoint disk
 * whose own backing file is the template's is layer 1, one that backs onto
 * layer N is layer N+1 (a checkpoint of a fork).  A VM directory (and a
 * checkpoint directory) holds layer-1.qcow2 .. layer-H.qcow2 as links,
 * and each layer's qcow2 header names "layer-<N-1>.qcow2" (layer 1: the
 * template's disk, by absolute path), which QEMU and libvirt resolve in
 * the directory the layer was opened from: every directory sees the whole
 * chain under the same names.  BOX_LIBVIRT_LAYERS_MAX bounds a chain.
 *
 * Confinement: each VM's QEMU runs under a uid of its own and a layer is
 * root's, 0600, with a POSIX ACL (the system.posix_acl_access xattr, no
 * libacl) granting read to the uids of exactly the VM directories that
 * link it.  box_libvirt_layers_sync() rewrites those ACLs from what the
 * directories hold, under an flock on <vm_dir>/layers.lock (threads and
 * boxds sharing a vm_dir): after a fork's or restore's links are made and
 * before its QEMU starts, after a disk snapshot froze a VM's overlay as
 * a layer, after a VM's directory is removed (its uid's
 * grants go before the uid can be reused by a VM that starts), and at
 * start (a crash between the two).
 *
 * A materialised memory checkpoint's RAM file (`ram`, box-libvirt-
 * materialise.c) is shared the same way: hard-linked as `ram` into the
 * directories of the forks and restored VMs whose QEMU maps it, root's,
 * 0600, with an ACL granting read and write (QEMU 7.2 opens the file
 * read-write even for a private mapping) to exactly those VMs' uids.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "box-libvirt-private.h"

#define LAYER_PREFIX  "layer-"
#define LAYER_SUFFIX  ".qcow2"
#define RAM_NAME      "ram"        /* a materialised checkpoint's RAM file */
#define ACL_XATTR     "system.posix_acl_access"
/* linux/posix_acl_xattr.h */
#define ACL_VERSION   0x0002
#define ACL_USER_OBJ  0x01
#define ACL_USER      0x02
#define ACL_GROUP_OBJ 0x04
#define ACL_MASK      0x10
#define ACL_OTHER     0x20
#define ACL_NO_ID     0xffffffffu

/* ---- qcow2 headers ---- */

static gboolean
read_header (const char *path, guint8 header[32])
{
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  gboolean ok;

  if (fd < 0)
    return FALSE;
  ok = pread (fd, header, 32, 0) == 32 && memcmp (header, "QFI\xfb", 4) == 0;
  close (fd);
  return ok;
}

static guint64
be (const guint8 *p, guint n)
{
  guint64 v = 0;

  for (guint i = 0; i < n; i++)
    v = v << 8 | p[i];
  return v;
}

char *
box_libvirt_qcow2_backing (const char *path)
{
  guint8 header[32];
  guint64 offset;
  guint32 size;
  char *name = NULL;
  int fd;

  if (!read_header (path, header))
    return NULL;
  offset = be (header + 8, 8);
  size = (guint32) be (header + 16, 4);
  if (offset == 0 || size == 0 || size > 4096)
    return NULL;
  fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return NULL;
  name = g_malloc0 (size + 1);
  if (pread (fd, name, size, (off_t) offset) != (ssize_t) size || memchr (name, 0, size) != NULL)
    g_clear_pointer (&name, g_free);
  close (fd);
  return name;
}

guint64
box_libvirt_qcow2_size (const char *path)
{
  guint8 header[32];

  return read_header (path, header) ? be (header + 24, 8) : 0;
}

/* N of "layer-N.qcow2", 0 for any other name. */
static guint
layer_number (const char *name)
{
  guint64 n = 0;
  g_autofree char *digits = NULL;

  if (name == NULL || !g_str_has_prefix (name, LAYER_PREFIX) ||
      !g_str_has_suffix (name, LAYER_SUFFIX))
    return 0;
  digits = g_strndup (name + strlen (LAYER_PREFIX),
                      strlen (name) - strlen (LAYER_PREFIX) - strlen (LAYER_SUFFIX));
  if (!g_ascii_string_to_unsigned (digits, 10, 1, BOX_LIBVIRT_LAYERS_MAX, &n, NULL))
    return 0;
  return (guint) n;
}

guint
box_libvirt_layer_height (const char *disk)
{
  g_autofree char *backing = box_libvirt_qcow2_backing (disk);

  return layer_number (backing);
}

static char *
layer_path (const char *dir, guint n, const char *suffix)
{
  g_autofree char *name = g_strdup_printf (LAYER_PREFIX "%u" LAYER_SUFFIX "%s", n,
                                           suffix != NULL ? suffix : "");

  return g_build_filename (dir, name, NULL);
}

gboolean
box_libvirt_layers_link (const char *from_dir, const char *to_dir, guint height,
                         const char *suffix, GError **error)
{
  for (guint n = 1; n <= height; n++) {
    g_autofree char *from = layer_path (from_dir, n, NULL);
    g_autofree char *to = layer_path (to_dir, n, suffix);

    if (!box_libvirt_link_file (from, to, error))
      return FALSE;
  }
  return TRUE;
}

gboolean
box_libvirt_layers_new_overlay (const char *overlay, guint n, guint64 size, GError **error)
{
  g_autofree char *backing = g_strdup_printf (LAYER_PREFIX "%u" LAYER_SUFFIX, n);
  g_autofree char *bytes = g_strdup_printf ("%" G_GUINT64_FORMAT, size);
  /* -u: the backing name is resolved where the overlay will be (a
   * restore's layers still have their temporary names) */
  const char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-u", "-F", "qcow2",
                         "-b", backing, overlay, bytes, NULL };

  g_unlink (overlay);
  return box_libvirt_run_command (argv, error);
}

gboolean
box_libvirt_layers_overlay (const char *disk, const char *dir, const char *overlay,
                            const char *suffix, GError **error)
{
  g_autofree char *from_dir = g_path_get_dirname (disk);
  guint height = box_libvirt_layer_height (disk);
  guint64 size = box_libvirt_qcow2_size (disk);
  g_autofree char *top = layer_path (dir, height + 1, suffix);

  if (size == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s is no qcow2 image", disk);
    return FALSE;
  }
  if (height + 1 > BOX_LIBVIRT_LAYERS_MAX) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s is a checkpoint of a fork %u deep: at most %u", disk, height,
                 BOX_LIBVIRT_LAYERS_MAX - 1);
    return FALSE;
  }
  return box_libvirt_layers_link (from_dir, dir, height, suffix, error) &&
         box_libvirt_link_file (disk, top, error) &&
         box_libvirt_layers_new_overlay (overlay, height + 1, size, error);
}

void
box_libvirt_layers_trim (const char *dir, guint height)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const char *entry;

  while (d != NULL && (entry = g_dir_read_name (d)) != NULL) {
    guint n = layer_number (entry);
    if (n > height || (n == 0 && g_str_has_prefix (entry, LAYER_PREFIX))) {
      g_autofree char *path = g_build_filename (dir, entry, NULL);
      g_unlink (path);
    }
  }
}

/* ---- ACLs ---- */

typedef struct {
  dev_t   dev;
  ino_t   ino;
} Inode;

static guint
inode_hash (gconstpointer p)
{
  const Inode *i = p;

  return g_int64_hash (&(gint64) { (gint64) i->ino }) ^ (guint) i->dev;
}

static gboolean
inode_equal (gconstpointer a, gconstpointer b)
{
  const Inode *x = a, *y = b;

  return x->dev == y->dev && x->ino == y->ino;
}

static void
put_entry (GByteArray *acl, guint16 tag, guint16 perm, guint32 id)
{
  guint8 e[8] = {
    tag & 0xff, tag >> 8, perm & 0xff, perm >> 8,
    id & 0xff, (id >> 8) & 0xff, (id >> 16) & 0xff, id >> 24,
  };

  g_byte_array_append (acl, e, sizeof e);
}

static gint
cmp_uid (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;

  return x < y ? -1 : x > y;
}

/* The ACL of @path: its owner rw, each of @uids @perm (4: read, 6: read
 * and write), nobody else. */
static gboolean
set_readers (const char *path, GArray *uids, guint16 perm, GError **error)
{
  g_autoptr(GByteArray) acl = g_byte_array_new ();
  guint8 version[4] = { ACL_VERSION, 0, 0, 0 };
  int rc;

  if (uids == NULL || uids->len == 0) {
    rc = removexattr (path, ACL_XATTR);
    if (rc == 0 || errno == ENODATA)
      return g_chmod (path, 0600) == 0 || errno == ENOENT;
  } else {
    g_array_sort (uids, cmp_uid);
    g_byte_array_append (acl, version, sizeof version);
    put_entry (acl, ACL_USER_OBJ, 6, ACL_NO_ID);
    for (guint i = 0; i < uids->len; i++) {
      if (i > 0 && g_array_index (uids, guint, i) == g_array_index (uids, guint, i - 1))
        continue;
      put_entry (acl, ACL_USER, perm, g_array_index (uids, guint, i));
    }
    put_entry (acl, ACL_GROUP_OBJ, 0, ACL_NO_ID);
    put_entry (acl, ACL_MASK, perm, ACL_NO_ID);
    put_entry (acl, ACL_OTHER, 0, ACL_NO_ID);
    rc = setxattr (path, ACL_XATTR, acl->data, acl->len, 0);
    if (rc == 0)
      return TRUE;
  }
  if (errno == ENOENT)
    return TRUE;   /* a VM removed meanwhile */
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot set who reads %s: %s", path,
               g_strerror (errno));
  return FALSE;
}

/* Layers of the directories under @root: @users maps each linked file to
 * the uids reading it (VM directories), @files to one of its paths. */
static void
scan (const char *root, gboolean vms, guint fallback_uid, GHashTable *users, GHashTable *files)
{
  g_autoptr(GDir) dirs = g_dir_open (root, 0, NULL);
  const char *entry;

  while (dirs != NULL && (entry = g_dir_read_name (dirs)) != NULL) {
    g_autofree char *dir = g_build_filename (root, entry, NULL);
    g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
    guint uid = vms ? box_libvirt_vm_dir_uid (dir) : 0;
    const char *name;

    while (d != NULL && (name = g_dir_read_name (d)) != NULL) {
      g_autofree char *path = NULL;
      GStatBuf st;
      Inode key;
      GArray *uids;

      if (!g_str_has_prefix (name, LAYER_PREFIX) && !g_str_equal (name, "disk.qcow2") &&
          !g_str_equal (name, RAM_NAME))
        continue;
      path = g_build_filename (dir, name, NULL);
      if (uid == 0)
        uid = fallback_uid;   /* a VM from before uid_range */
      if (g_lstat (path, &st) != 0 || !S_ISREG (st.st_mode))
        continue;
      key.dev = st.st_dev;
      key.ino = st.st_ino;
      if (!g_hash_table_contains (files, &key))
        g_hash_table_insert (files, g_memdup2 (&key, sizeof key), g_strdup (path));
      /* a VM's own disk.qcow2 is its QEMU's already (box_libvirt_give_to_qemu) */
      if (!vms || uid == 0 || g_str_equal (name, "disk.qcow2"))
        continue;
      uids = g_hash_table_lookup (users, &key);
      if (uids == NULL) {
        uids = g_array_new (FALSE, FALSE, sizeof (guint));
        g_hash_table_insert (users, g_memdup2 (&key, sizeof key), uids);
      }
      g_array_append_val (uids, uid);
    }
  }
}

gboolean
box_libvirt_layers_sync (const char *vm_dir, guint fallback_uid, GError **error)
{
  g_autofree char *lock = g_build_filename (vm_dir, "layers.lock", NULL);
  g_autofree char *vms = g_build_filename (vm_dir, "vms", NULL);
  g_autofree char *ckpts = g_build_filename (vm_dir, "checkpoints", NULL);
  g_autoptr(GHashTable) users = g_hash_table_new_full (inode_hash, inode_equal, g_free,
                                                       (GDestroyNotify) g_array_unref);
  g_autoptr(GHashTable) files = g_hash_table_new_full (inode_hash, inode_equal, g_free, g_free);
  GHashTableIter iter;
  gpointer key, path;
  gboolean ok = TRUE;
  int fd;

  fd = open (lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 || flock (fd, LOCK_EX) != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot lock %s: %s", lock,
                 g_strerror (errno));
    if (fd >= 0)
      close (fd);
    return FALSE;
  }
  scan (vms, TRUE, fallback_uid, users, files);
  scan (ckpts, FALSE, 0, users, files);
  g_hash_table_iter_init (&iter, files);
  while (g_hash_table_iter_next (&iter, &key, &path)) {
    const char *name = strrchr (path, '/') + 1;
    GStatBuf st;

    /* a VM's own overlay (not linked anywhere) is left as it is */
    if (g_str_has_prefix (path, vms) && g_str_equal (name, "disk.qcow2"))
      continue;
    if (g_lstat (path, &st) == 0 && st.st_nlink == 1 && !g_hash_table_contains (users, key) &&
        getxattr (path, ACL_XATTR, NULL, 0) < 0)
      continue;   /* never shared: nothing to take back */
    /* QEMU 7.2 opens a memory-backend-file read-write even when it maps
     * it privately (doc/ARCHITECTURE.md) */
    if (!set_readers (path, g_hash_table_lookup (users, key), g_str_equal (name, RAM_NAME) ? 6 : 4,
                      ok ? error : NULL))
      ok = FALSE;
  }
  close (fd);
  return ok;
}
