/* box-libvirt-uids.c: the pool of uids QEMU processes run under.
 *
 * Every VM (a sandbox's, a warm-pool fork, a template build) runs its QEMU
 * under a uid of its own from [plugin.libvirt] uid_range, so a QEMU that a
 * guest escaped into cannot open another VM's disk (each overlay is 0600,
 * owned by its VM's uid).  The gid is qemu_group for all of them (/dev/kvm).
 *
 * The pool keeps no state of its own: a uid is taken while a VM directory
 * (<vm_dir>/vms/<vm id> or <vm_dir>/templates/<key>.tmp-<build id>) holds a
 * file named `uid` with it.  The file is written, root-owned, when the
 * directory is claimed, and box_libvirt_remove_tree() removes it after
 * every other file of the directory: a uid is free again only once none of
 * its VM's files exist, and a restarted boxd finds the same uids taken.
 * A mutex serialises claims (worker threads and the main thread claim).
 * Two boxds on one host need distinct uid ranges.
 */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "box-libvirt-private.h"

static GMutex uids_lock;

gboolean
box_libvirt_uid_range_parse (const char *text, guint *first, guint *last, GError **error)
{
  g_auto(GStrv) parts = NULL;
  guint64 a = 0, b = 0;

  if (text != NULL)
    parts = g_strsplit (text, "-", 3);
  if (parts == NULL || g_strv_length (parts) != 2 ||
      !g_ascii_string_to_unsigned (parts[0], 10, 1, G_MAXINT32 - 1, &a, NULL) ||
      !g_ascii_string_to_unsigned (parts[1], 10, 1, G_MAXINT32 - 1, &b, NULL) || b < a) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "uid_range: \"%s\" is not FIRST-LAST (two uids, 0 < FIRST <= LAST < 2^31-1)",
                 text != NULL ? text : "");
    return FALSE;
  }
  *first = a;
  *last = b;
  return TRUE;
}

/* The uid recorded in @dir, or 0 when there is none. */
guint
box_libvirt_vm_dir_uid (const char *dir)
{
  g_autofree char *path = g_build_filename (dir, BOX_LIBVIRT_UID_FILE, NULL);
  g_autofree char *contents = NULL;
  guint64 uid = 0;

  if (!g_file_get_contents (path, &contents, NULL, NULL) ||
      !g_ascii_string_to_unsigned (g_strstrip (contents), 10, 1, G_MAXINT32 - 1, &uid, NULL))
    return 0;
  return uid;
}

/* Adds the uids recorded in @parent's subdirectories to @taken. */
static void
collect_taken (const char *parent, GHashTable *taken)
{
  g_autoptr(GDir) dir = g_dir_open (parent, 0, NULL);
  const char *entry;

  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *path = g_build_filename (parent, entry, NULL);
    guint uid = box_libvirt_vm_dir_uid (path);

    if (uid != 0)
      g_hash_table_add (taken, GUINT_TO_POINTER (uid));
  }
}

guint
box_libvirt_uids_taken (const char *vm_dir, guint first, guint last)
{
  g_autoptr(GHashTable) taken = g_hash_table_new (NULL, NULL);
  g_autofree char *vms = g_build_filename (vm_dir, "vms", NULL);
  g_autofree char *templates = g_build_filename (vm_dir, "templates", NULL);
  GHashTableIter iter;
  gpointer key;
  guint count = 0;

  g_mutex_lock (&uids_lock);
  collect_taken (vms, taken);
  collect_taken (templates, taken);
  g_mutex_unlock (&uids_lock);
  g_hash_table_iter_init (&iter, taken);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    count += GPOINTER_TO_UINT (key) >= first && GPOINTER_TO_UINT (key) <= last;
  return count;
}

gboolean
box_libvirt_vm_dir_claim (const char *vm_dir, const char *dir, guint first, guint last,
                          guint *uid, GError **error)
{
  g_autoptr(GHashTable) taken = g_hash_table_new (NULL, NULL);
  g_autofree char *vms = g_build_filename (vm_dir, "vms", NULL);
  g_autofree char *templates = g_build_filename (vm_dir, "templates", NULL);
  g_autofree char *marker = g_build_filename (dir, BOX_LIBVIRT_UID_FILE, NULL);
  g_autofree char *text = NULL;
  g_autoptr(GError) local_error = NULL;
  guint chosen = 0;
  gboolean ok;

  g_mutex_lock (&uids_lock);
  collect_taken (vms, taken);
  collect_taken (templates, taken);
  for (guint64 candidate = first; candidate <= last; candidate++) {
    if (!g_hash_table_contains (taken, GUINT_TO_POINTER ((guint) candidate))) {
      chosen = candidate;
      break;
    }
  }
  if (chosen == 0) {
    g_mutex_unlock (&uids_lock);
    g_set_error (error, BOX_ERROR, BOX_ERROR_CAPACITY,
                 "every QEMU uid of uid_range %u-%u is taken by a VM's files", first, last);
    return FALSE;
  }
  text = g_strdup_printf ("%u\n", chosen);
  ok = box_libvirt_make_vm_dir (dir, error);
  if (ok && !g_file_set_contents_full (marker, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0644,
                                       &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot record the uid of %s: %s", dir,
                 local_error->message);
    ok = FALSE;
  }
  g_mutex_unlock (&uids_lock);
  if (!ok)
    return FALSE;
  *uid = chosen;
  return TRUE;
}
