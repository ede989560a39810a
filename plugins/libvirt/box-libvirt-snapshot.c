/* box-libvirt-snapshot.c: a disk-only checkpoint of a running VM without
 * a pause: a qcow2 external snapshot.
 *
 * The VM's overlay (disk.qcow2, height H: it backs onto layer-H.qcow2 or
 * the template's disk) is frozen as its layer H+1, and QEMU goes on
 * writing to a new, empty overlay that backs onto it:
 *
 *   1. disk.qcow2 is hard-linked as layer-<H+1>.qcow2;
 *   2. the new overlay is made as disk.qcow2.new (qemu-img, the backing
 *      name "layer-<H+1>.qcow2" relative as every layer's), given to the
 *      VM's uid, synced and renamed disk.qcow2.next: a file under that name
 *      is always whole;
 *   3. QEMU gets two descriptors of it (read-write and read-only) in an
 *      fd set (QMP add-fd, so that no path of ours needs to be open to
 *      QEMU's uid or its AppArmor profile), opens it as a new node with no
 *      backing (blockdev-add "/dev/fdset/N", the disk's cache mode; a node
 *      name of its own each time) and the read-write descriptor leaves the
 *      set (the node has its duplicate; QEMU's image locks are OFD locks,
 *      which a descriptor left in the set would hold after the node let go
 *      of them); blockdev-snapshot then puts it on top of the disk's
 *      current node.  That drains the disk's requests, flushes the old
 *      node (no vCPU stops) and reopens it read-only by the path it was
 *      opened with: disk.qcow2 (libvirt's) must still name it then, or
 *      /dev/fdset/M (an earlier snapshot's read-only descriptor).  QEMU
 *      ignores a reopen that fails: the old node must say "ro" after, or
 *      the checkpoint fails (its QEMU could still write what forks read);
 *   4. the frozen layer is synced (a cache=unsafe QEMU's flush is none),
 *      becomes root's, 0600 (box-libvirt-layers.c grants the VM's uid
 *      read), and disk.qcow2.next is renamed disk.qcow2.
 *
 * The checkpoint's disk.qcow2 is then a hard link of the frozen layer, as
 * a fork's or a restore's own layers are: nothing is copied, and the guest
 * never stops.  libvirt does not know of the new node (its domain is
 * transient; ours is the state file): the next start of the VM opens
 * disk.qcow2 and its chain by their names.  Only a running VM takes this
 * path: QEMU 7.2 closes a descriptor removed from an fd set only while the
 * vCPUs run, and a paused VM's vCPUs are stopped anyway (it is copied).
 * Each snapshot adds a layer to the VM's chain until a restore starts it
 * again; past BOX_LIBVIRT_SNAPSHOT_HEIGHT layers the overlay is copied
 * instead (the vCPUs stopped for the copy), so that a chain stays short
 * and every checkpoint of it can be restored and forked
 * (BOX_LIBVIRT_LAYERS_MAX).
 *
 * A snapshot whose outcome QEMU did not tell, or a boxd killed between 2
 * and 4, leaves disk.qcow2.next: box_libvirt_disk_snapshot_recover() (at
 * start, before every checkpoint of a VM with a QEMU, and before every
 * start of a QEMU for it) asks QEMU, when one runs, whether one of its new
 * nodes is on top (then 4 is finished) or the old node still is (undone;
 * with no answer nothing is touched: renaming the wrong way would have
 * QEMU reopen the other file by its path).  Without a QEMU it finishes 4:
 * the new overlay over the frozen layer is the newest disk either way
 * (empty, or holding what QEMU wrote since).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box-libvirt-op.h"

#define NEW_NAME   "disk.qcow2.new"
#define NEXT_NAME  "disk.qcow2.next"
/* QEMU's node names of the overlay on layer N ("-<random>" follows: a
 * node a killed boxd left in QEMU never clashes), and of its file */
#define NODE_PREFIX  "box-top-%u-"
#define FILE_SUFFIX  "-file"

static char *
layer_name (guint n)
{
  return g_strdup_printf ("layer-%u.qcow2", n);
}

gboolean
box_libvirt_disk_snapshot_fits (const char *vm_dir)
{
  g_autofree char *disk = g_build_filename (vm_dir, "disk.qcow2", NULL);

  G_STATIC_ASSERT (BOX_LIBVIRT_SNAPSHOT_HEIGHT + 1 <= BOX_LIBVIRT_LAYERS_MAX);
  return box_libvirt_layer_height (disk) + 1 <= BOX_LIBVIRT_SNAPSHOT_HEIGHT;
}

/* The node QEMU's disk device reads: its top node, or NULL. */
static char *
top_node (virDomainPtr dom, GError **error)
{
  g_autofree char *reply = box_libvirt_qmp (dom, "{\"execute\":\"query-block\"}", -1, error);
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonArray *devices;
  char *name = NULL;

  if (reply == NULL)
    return NULL;
  if (!json_parser_load_from_data (parser, reply, -1, NULL) ||
      !JSON_NODE_HOLDS_ARRAY (json_parser_get_root (parser))) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "QEMU answered query-block with %s",
                 reply);
    return NULL;
  }
  devices = json_node_get_array (json_parser_get_root (parser));
  /* the VM has one block device, its disk */
  for (guint i = 0; i < json_array_get_length (devices) && name == NULL; i++) {
    JsonNode *node = json_array_get_element (devices, i);
    JsonObject *inserted;

    if (!JSON_NODE_HOLDS_OBJECT (node) ||
        !json_object_has_member (json_node_get_object (node), "inserted"))
      continue;
    inserted = json_object_get_object_member (json_node_get_object (node), "inserted");
    if (inserted != NULL)
      name = g_strdup (json_object_get_string_member_with_default (inserted, "node-name", NULL));
  }
  if (name == NULL)
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "QEMU shows no disk: %s", reply);
  return name;
}

/* Hands @fd to QEMU in fd set @fdset (-1: a new one); the set's ID, or -1.
 * *@qemu_fd: QEMU's number of it. */
static gint64
add_fd (virDomainPtr dom, int fd, gint64 fdset, gint64 *qemu_fd, GError **error)
{
  g_autofree char *command = fdset < 0 ?
    g_strdup ("{\"execute\":\"add-fd\",\"arguments\":{\"opaque\":\"box disk snapshot\"}}") :
    g_strdup_printf ("{\"execute\":\"add-fd\",\"arguments\":{\"fdset-id\":%" G_GINT64_FORMAT
                     "}}", fdset);
  g_autofree char *reply = box_libvirt_qmp (dom, command, fd, error);
  g_autoptr(JsonParser) parser = json_parser_new ();
  gint64 id = -1;

  if (reply != NULL && json_parser_load_from_data (parser, reply, -1, NULL) &&
      JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    JsonObject *object = json_node_get_object (json_parser_get_root (parser));

    id = json_object_get_int_member_with_default (object, "fdset-id", -1);
    *qemu_fd = json_object_get_int_member_with_default (object, "fd", -1);
    if (*qemu_fd < 0)
      id = -1;
  }
  if (reply != NULL && id < 0)
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "QEMU answered add-fd with %s", reply);
  return id;
}

static void
qmp_quiet (virDomainPtr dom, const char *command)
{
  g_autofree char *reply = box_libvirt_qmp (dom, command, -1, NULL);
}

/* Whether QEMU's node @name is read-only: 1, 0, or -1 when unknown. */
static int
node_read_only (virDomainPtr dom, const char *name)
{
  g_autofree char *reply = box_libvirt_qmp (dom, "{\"execute\":\"query-named-block-nodes\","
                                            "\"arguments\":{\"flat\":true}}", -1, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonArray *nodes;

  if (reply == NULL || !json_parser_load_from_data (parser, reply, -1, NULL) ||
      !JSON_NODE_HOLDS_ARRAY (json_parser_get_root (parser)))
    return -1;
  nodes = json_node_get_array (json_parser_get_root (parser));
  for (guint i = 0; i < json_array_get_length (nodes); i++) {
    JsonNode *node = json_array_get_element (nodes, i);
    JsonObject *object = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;

    if (object != NULL &&
        g_strcmp0 (json_object_get_string_member_with_default (object, "node-name", NULL),
                   name) == 0)
      return json_object_get_boolean_member_with_default (object, "ro", FALSE) ? 1 : 0;
  }
  return -1;
}

typedef enum {
  SWAP_UNDONE,    /* QEMU is as it was */
  SWAP_DONE,      /* QEMU writes to the new overlay */
  SWAP_UNKNOWN,   /* QEMU did not say which (gone, or no answer) */
} Swap;

/* The cache options of the disk's nodes, as libvirt gives them for
 * [plugin.libvirt] disk_cache. */
static const char *
cache_options (const char *disk_cache)
{
  if (g_strcmp0 (disk_cache, "none") == 0)
    return "{\"direct\":true,\"no-flush\":false}";
  if (g_strcmp0 (disk_cache, "unsafe") == 0)
    return "{\"direct\":false,\"no-flush\":true}";
  return "{\"direct\":false,\"no-flush\":false}";
}

/* Step 3: QEMU writes to @next from now on; *@old_top: the node it wrote
 * to before. */
static Swap
swap_in (virDomainPtr dom, const char *next, guint n, const char *disk_cache, char **old_top,
         GError **error)
{
  g_autofree char *top = top_node (dom, error);
  g_autofree char *suffix = box_libvirt_new_vm_id ();
  g_autofree char *node = NULL;
  g_autofree char *command = NULL;
  g_autofree char *now_top = NULL;
  int rw = -1, ro = -1;
  gint64 fdset = -1, qemu_rw = -1, qemu_ro = -1;
  gboolean added = FALSE, ok;

  if (top == NULL)
    return SWAP_UNDONE;
  node = g_strdup_printf (NODE_PREFIX "%.6s", n, suffix);
  rw = open (next, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  ro = open (next, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (rw < 0 || ro < 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot open %s: %s", next,
                 g_strerror (errno));
    ok = FALSE;
  } else {
    /* a reopen read-only (the next snapshot's) takes the read-only one */
    fdset = add_fd (dom, rw, -1, &qemu_rw, error);
    ok = fdset >= 0 && add_fd (dom, ro, fdset, &qemu_ro, error) >= 0;
  }
  if (rw >= 0)
    close (rw);
  if (ro >= 0)
    close (ro);
  if (ok) {
    command = g_strdup_printf ("{\"execute\":\"blockdev-add\",\"arguments\":{"
                               "\"driver\":\"qcow2\",\"node-name\":\"%s\",\"read-only\":false,"
                               "\"discard\":\"unmap\",\"cache\":%s,\"backing\":null,\"file\":{"
                               "\"driver\":\"file\",\"node-name\":\"%s" FILE_SUFFIX "\","
                               "\"filename\":\"/dev/fdset/%" G_GINT64_FORMAT "\","
                               "\"discard\":\"unmap\"}}}", node, cache_options (disk_cache),
                               node, fdset);
    ok = added = box_libvirt_qmp_ok (dom, command, -1, error);
  }
  if (ok) {
    g_free (command);
    command = g_strdup_printf ("{\"execute\":\"remove-fd\",\"arguments\":"
                               "{\"fdset-id\":%" G_GINT64_FORMAT ",\"fd\":%" G_GINT64_FORMAT
                               "}}", fdset, qemu_rw);
    ok = box_libvirt_qmp_ok (dom, command, -1, error);
  }
  if (ok) {
    g_free (command);
    command = g_strdup_printf ("{\"execute\":\"blockdev-snapshot\",\"arguments\":"
                               "{\"node\":\"%s\",\"overlay\":\"%s\"}}", top, node);
    if (box_libvirt_qmp_ok (dom, command, -1, error)) {
      *old_top = g_steal_pointer (&top);
      return SWAP_DONE;
    }
    /* an error from libvirt may come after QEMU did it: QEMU says */
    now_top = top_node (dom, NULL);
    if (g_strcmp0 (now_top, node) == 0) {
      g_clear_error (error);
      *old_top = g_steal_pointer (&top);
      return SWAP_DONE;
    }
    if (now_top == NULL)
      return SWAP_UNKNOWN;
  }
  if (added) {
    g_free (command);
    command = g_strdup_printf ("{\"execute\":\"blockdev-del\",\"arguments\":"
                               "{\"node-name\":\"%s\"}}", node);
    qmp_quiet (dom, command);
  }
  if (fdset >= 0) {
    g_free (command);
    command = g_strdup_printf ("{\"execute\":\"remove-fd\",\"arguments\":"
                               "{\"fdset-id\":%" G_GINT64_FORMAT "}}", fdset);
    qmp_quiet (dom, command);
  }
  return SWAP_UNDONE;
}

/* Step 4, also for a cut snapshot that happened: the new overlay gets its
 * name whatever else fails (QEMU writes to it), then the first error. */
static gboolean
finish (const char *vm_dir, const char *frozen, const char *next, GError **error)
{
  g_autofree char *disk = g_build_filename (vm_dir, "disk.qcow2", NULL);
  g_autoptr(GError) first = NULL;

  box_libvirt_fsync_file (frozen, &first);
  if ((chown (frozen, 0, 0) != 0 || g_chmod (frozen, 0600) != 0) && first == NULL)
    g_set_error (&first, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot take %s from QEMU's user: %s",
                 frozen, g_strerror (errno));
  if (g_rename (next, disk) != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot rename %s: %s", next,
                 g_strerror (errno));
    return FALSE;
  }
  box_libvirt_fsync_dir (vm_dir);
  if (first != NULL) {
    g_propagate_error (error, g_steal_pointer (&first));
    return FALSE;
  }
  return TRUE;
}

/* Whether @a and @b are links of one file. */
static gboolean
same_file (const char *a, const char *b)
{
  GStatBuf a_st, b_st;

  return g_lstat (a, &a_st) == 0 && g_lstat (b, &b_st) == 0 && a_st.st_ino == b_st.st_ino &&
         a_st.st_dev == b_st.st_dev;
}

/* Removes layer-@n.qcow2 of @vm_dir when it is a link of its disk.qcow2:
 * step 1 of a snapshot that did not happen. */
static void
unlink_frozen_link (const char *vm_dir, guint n)
{
  g_autofree char *disk = g_build_filename (vm_dir, "disk.qcow2", NULL);
  g_autofree char *name = layer_name (n);
  g_autofree char *frozen = g_build_filename (vm_dir, name, NULL);

  if (n > 0 && same_file (disk, frozen))
    g_unlink (frozen);
}

gboolean
box_libvirt_disk_snapshot (BoxLibvirtPlugin *self, BoxLibvirtOp *op, virDomainPtr dom,
                           char **frozen_out, GError **error)
{
  g_autofree char *vm_dir = box_libvirt_op_file (op, NULL);
  g_autofree char *disk = g_build_filename (vm_dir, "disk.qcow2", NULL);
  g_autofree char *new_path = g_build_filename (vm_dir, NEW_NAME, NULL);
  g_autofree char *next = g_build_filename (vm_dir, NEXT_NAME, NULL);
  g_autofree char *backing = NULL;
  g_autofree char *frozen = NULL;
  g_autofree char *old_top = NULL;
  guint64 bytes;
  guint n;
  gboolean ok;
  Swap swap = SWAP_UNDONE;

  /* (what a snapshot that could not finish left was settled by the
   * caller: box_libvirt_disk_snapshot_recover()) */
  n = box_libvirt_layer_height (disk) + 1;
  backing = layer_name (n);
  frozen = g_build_filename (vm_dir, backing, NULL);
  bytes = box_libvirt_qcow2_size (disk);
  if (bytes == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s is no qcow2 image", disk);
    return FALSE;
  }
  ok = box_libvirt_link_file (disk, frozen, error) &&
       box_libvirt_layers_new_overlay (new_path, n, bytes, error) &&
       box_libvirt_give_to_qemu (self, new_path, box_libvirt_vm_uid (self, vm_dir), error) &&
       box_libvirt_fsync_file (new_path, error) &&
       box_libvirt_rename_file (new_path, next, error);
  if (ok) {
    box_libvirt_fsync_dir (vm_dir);
    box_libvirt_test_delay ("disk-snapshot-made", op);
    swap = swap_in (dom, next, n, self->config.disk_cache, &old_top, error);
  }
  if (swap == SWAP_UNDONE) {
    g_unlink (new_path);
    g_unlink (next);
    g_unlink (frozen);
    return FALSE;
  }
  if (swap == SWAP_UNKNOWN) {
    /* left as it is until QEMU says, or is gone
     * (box_libvirt_disk_snapshot_recover()) */
    g_prefix_error (error, "the disk snapshot's outcome is unknown until QEMU answers: ");
    return FALSE;
  }
  box_libvirt_test_delay ("disk-snapshot", op);
  /* QEMU writes to the new overlay: it is the VM's disk from now on */
  if (!finish (vm_dir, frozen, next, error) ||
      !box_libvirt_layers_sync (self->config.vm_dir, self->config.qemu_uid, error))
    return FALSE;
  if (node_read_only (dom, old_top) != 1) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "QEMU did not reopen %s read-only after the disk snapshot: the VM's disk is "
                 "%s on it, but it is no checkpoint", old_top, disk);
    return FALSE;
  }
  if (frozen_out != NULL)
    *frozen_out = g_steal_pointer (&frozen);
  return TRUE;
}

gboolean
box_libvirt_disk_snapshot_recover (BoxLibvirtPlugin *self, BoxLibvirtVm *vm, virDomainPtr dom,
                                   GError **error)
{
  g_autofree char *vm_dir = box_libvirt_vm_path (self->config.vm_dir, vm->vm_id, NULL);
  g_autofree char *disk = g_build_filename (vm_dir, "disk.qcow2", NULL);
  g_autofree char *next = g_build_filename (vm_dir, NEXT_NAME, NULL);
  g_autofree char *frozen = NULL;
  g_autofree char *top = NULL;
  guint n = box_libvirt_layer_height (next);
  gboolean keep;

  if (!g_file_test (next, G_FILE_TEST_EXISTS)) {
    /* a layer linked before a cut that left no new overlay (the disk's
     * header read: else nothing is known of its height) */
    if (box_libvirt_qcow2_size (disk) > 0)
      unlink_frozen_link (vm_dir, box_libvirt_layer_height (disk) + 1);
    return TRUE;
  }
  if (n > 0) {
    g_autofree char *name = layer_name (n);
    frozen = g_build_filename (vm_dir, name, NULL);
  }
  /* the snapshot's layer is still the VM's disk (step 4 never began) */
  keep = frozen != NULL && same_file (frozen, disk);
  if (keep && dom != NULL) {
    g_autoptr(GError) local_error = NULL;
    g_autofree char *prefix = g_strdup_printf (NODE_PREFIX, n);

    top = top_node (dom, &local_error);
    if (top == NULL) {
      /* QEMU runs but does not say: nothing is touched until it does
       * (a wrong guess would have it reopen the other file by its path) */
      g_set_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                   "a disk snapshot of sandbox %s is unsettled until its QEMU answers: %s",
                   vm->id, local_error->message);
      return FALSE;
    }
    keep = g_str_has_prefix (top, prefix);
  }
  if (!keep) {
    g_message ("libvirt: sandbox %s: removed %s, left by a disk-only checkpoint cut before "
               "its snapshot", vm->id, next);
    g_unlink (next);
    unlink_frozen_link (vm_dir, n);
    return TRUE;
  }
  g_message ("libvirt: sandbox %s: finished the disk snapshot of a disk-only checkpoint cut "
             "midway (%s)", vm->id, dom != NULL ? "its QEMU writes to it" : "no QEMU runs");
  return finish (vm_dir, frozen, next, error) &&
         box_libvirt_layers_sync (self->config.vm_dir, self->config.qemu_uid, error);
}
