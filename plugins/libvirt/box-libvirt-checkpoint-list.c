/* box-libvirt-checkpoint-list.c: which checkpoints the plugin keeps for a
 * sandbox (for the engine's reconciliation at start), and the test
 * facility that holds a checkpoint, restore or fork midway.
 *
 * A whole checkpoint is a directory <vm_dir>/checkpoints/<sandbox>.<id>
 * (renamed there once complete, box-libvirt-checkpoint.c) with its
 * manifest and disk; temporaries (".tmp-" in the name) are never listed:
 * the start's sweep removes those nobody holds.
 *
 * BOX_LIBVIRT_TEST_DELAY_MS (tests only, documented in
 * plugins/libvirt/README.md): when set to a number of milliseconds, the
 * worker thread of every checkpoint (its temporary directory made, before
 * the files), restore (the copy made, before the QEMU ends), fork (its
 * domain started, before the guest is set up) and materialisation (the
 * helper domain started, before the state is loaded: "materialise of
 * checkpoint <id>") logs "test delay: <what> of sandbox <id> (domain
 * <name>)" and waits that long, so that a test can kill boxd or the QEMU
 * while the operation runs without racing it.
 * BOX_LIBVIRT_TEST_DELAY_AT, a comma-separated list, picks other points
 * than those four (the point is <what> up to its first space):
 * "checkpoint-stopped" is a memory checkpoint of a running guest with its
 * vCPUs stopped (QEMU's last pass done, before the disk copy and the
 * resume); "fork-files" a fork whose room check passed, before its files;
 * "restore-ended" a restore whose old QEMU ended, before the checkpoint's
 * files are renamed into place.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "box-libvirt-op.h"

#define TEST_DELAY_ENV    "BOX_LIBVIRT_TEST_DELAY_MS"
#define TEST_DELAY_AT_ENV "BOX_LIBVIRT_TEST_DELAY_AT"
#define TEST_DELAY_POINTS "checkpoint,restore,fork,materialise"
#define TEST_DELAY_MAX_MS 600000

static gboolean
is_whole (const char *dir)
{
  g_autofree char *manifest = g_build_filename (dir, "manifest.json", NULL);
  g_autofree char *disk = g_build_filename (dir, "disk.qcow2", NULL);

  return g_file_test (manifest, G_FILE_TEST_IS_REGULAR) &&
         g_file_test (disk, G_FILE_TEST_IS_REGULAR);
}

char **
box_libvirt_checkpoints_list (BoxLibvirtPlugin *self, const char *sandbox_id, GError **error)
{
  g_autofree char *root = g_build_filename (self->config.vm_dir, "checkpoints", NULL);
  g_autofree char *prefix = g_strconcat (sandbox_id, ".", NULL);
  g_autoptr(GStrvBuilder) ids = g_strv_builder_new ();
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GDir) dir = NULL;
  const char *entry;

  if (!box_sandbox_id_is_valid (sandbox_id)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "bad sandbox ID \"%s\"", sandbox_id);
    return NULL;
  }
  dir = g_dir_open (root, 0, &local_error);
  if (dir == NULL && !g_error_matches (local_error, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s", local_error->message);
    return NULL;
  }
  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    const char *id = entry + strlen (prefix);
    g_autofree char *path = NULL;

    if (!g_str_has_prefix (entry, prefix) || strstr (entry, ".tmp-") != NULL ||
        !box_libvirt_checkpoint_id_is_valid (id))
      continue;
    path = g_build_filename (root, entry, NULL);
    if (is_whole (path))
      g_strv_builder_add (ids, id);
  }
  return g_strv_builder_end (ids);
}

void
box_libvirt_test_delay (const char *what, const BoxLibvirtOp *op)
{
  box_libvirt_test_delay_named (what, op->id, op->domain);
}

void
box_libvirt_test_delay_named (const char *what, const char *id, const char *domain)
{
  static gsize once = 0;
  static guint delay_ms = 0;
  static char **points = NULL;

  if (g_once_init_enter (&once)) {
    const char *value = g_getenv (TEST_DELAY_ENV);
    const char *at = g_getenv (TEST_DELAY_AT_ENV);
    guint64 ms = 0;

    if (value != NULL && !g_ascii_string_to_unsigned (value, 10, 0, TEST_DELAY_MAX_MS, &ms, NULL))
      g_warning ("libvirt: %s=%s is not a number of milliseconds up to %u; ignored",
                 TEST_DELAY_ENV, value, TEST_DELAY_MAX_MS);
    delay_ms = (guint) ms;
    points = g_strsplit (at != NULL ? at : TEST_DELAY_POINTS, ",", -1);
    g_once_init_leave (&once, 1);
  }
  if (delay_ms == 0)
    return;
  {
    /* the point: "materialise of checkpoint v4" is "materialise" */
    g_autofree char *point = g_strndup (what, strcspn (what, " "));
    if (!g_strv_contains ((const char * const *) points, point))
      return;
  }
  g_message ("libvirt: test delay: %s of sandbox %s (domain %s) waits %u ms", what, id,
             domain != NULL ? domain : "-", delay_ms);
  g_usleep ((gulong) delay_ms * 1000);
}
