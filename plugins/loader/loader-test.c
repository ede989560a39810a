/* loader-test.c: the plugin loader's checks. */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "box-auth.h"
#include "box-hypervisor.h"
#include "box-plugin-context.h"
#include "box-plugin-loader.h"

/* A GType can be registered once per process, so every accepted load of
 * the good test module goes through one canonical copy (hard links to it
 * are the same file to the dynamic linker).  Refused copies may be new
 * files: the loader refuses them before any type is registered. */
static char *tmp_root;
static char *good_copy;

static char *
test_module_path (const char *variant)
{
  const char *dir = g_getenv ("LOADER_TEST_DIR");

  g_assert_nonnull (dir);
  return g_strdup_printf ("%s/loader-test-%s.so", dir, variant);
}

static char *
make_dir (void)
{
  static guint counter;
  char *dir = g_strdup_printf ("%s/d%u", tmp_root, counter++);

  g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);
  return dir;
}

static void
copy_file (const char *from, const char *to, int mode)
{
  g_autofree char *contents = NULL;
  gsize len = 0;
  g_autoptr(GError) error = NULL;

  g_assert_true (g_file_get_contents (from, &contents, &len, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_set_contents_full (to, contents, len, G_FILE_SET_CONTENTS_NONE, mode, &error));
  g_assert_no_error (error);
  /* the umask may have taken bits away */
  g_assert_cmpint (g_chmod (to, mode), ==, 0);
}

/* A file in @dir that is the good module (a hard link to its one copy). */
static char *
link_good (const char *dir, const char *basename)
{
  char *path = g_build_filename (dir, basename, NULL);

  g_assert_cmpint (link (good_copy, path), ==, 0);
  return path;
}

/* A new file in @dir with the contents of @variant's module. */
static char *
copy_variant (const char *dir, const char *variant, const char *basename, int mode)
{
  g_autofree char *from = test_module_path (variant);
  char *path = g_build_filename (dir, basename, NULL);

  copy_file (from, path, mode);
  return path;
}

static void
assert_refused (const char *path, gint code, const char *message_part)
{
  g_autoptr(BoxPluginLoader) loader = box_plugin_loader_new ();
  g_autoptr(GError) error = NULL;

  g_assert_null (box_plugin_loader_load_file (loader, path, &error));
  g_assert_error (error, BOX_ERROR, code);
  if (g_strstr_len (error->message, -1, message_part) == NULL)
    g_error ("refusal of %s says \"%s\", expected \"%s\"", path, error->message, message_part);
  g_assert_cmpuint (box_plugin_loader_get_modules (loader)->len, ==, 0);
}

static void
test_loader_good (void)
{
  g_autoptr(BoxPluginLoader) loader = box_plugin_loader_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = make_dir ();
  g_autofree char *path = link_good (dir, "good.so");
  g_autoptr(GObject) instance = NULL;
  const BoxPluginModule *module;

  g_assert_true (box_plugin_file_is_safe (path, &error));
  g_assert_no_error (error);

  module = box_plugin_loader_load_file (loader, path, &error);
  g_assert_no_error (error);
  g_assert_nonnull (module);
  g_assert_cmpstr (module->name, ==, "loadertest");
  g_assert_cmpstr (module->path, ==, path);
  g_assert_cmpuint (module->info->abi_version, ==, BOX_PLUGIN_ABI_VERSION);
  g_assert_true (g_type_is_a (module->type, BOX_TYPE_PLUGIN));
  g_assert_nonnull (module->interfaces);
  g_assert_cmpuint (g_strv_length (module->interfaces), ==, 2);
  g_assert_true (g_strv_contains ((const char *const *) module->interfaces, "auth"));
  g_assert_true (g_strv_contains ((const char *const *) module->interfaces, "network"));
  g_assert_true (box_plugin_loader_lookup (loader, "loadertest") == module);
  g_assert_null (box_plugin_loader_lookup (loader, "sqlite"));
  g_assert_cmpuint (box_plugin_loader_get_modules (loader)->len, ==, 1);

  instance = g_object_new (module->type, "name", module->name, NULL);
  g_assert_cmpstr (box_plugin_get_name (BOX_PLUGIN (instance)), ==, "loadertest");
  /* made without a context: an empty one (no configuration, no store) */
  g_assert_nonnull (box_plugin_get_context (BOX_PLUGIN (instance)));
  g_assert_null (box_plugin_context_get_storage (box_plugin_get_context (BOX_PLUGIN (instance))));
  g_assert_true (BOX_IS_AUTH (instance));
}

static void
test_loader_world_writable (void)
{
  g_autofree char *dir = make_dir ();
  g_autofree char *path = copy_variant (dir, "good", "good.so", 0757);
  g_autoptr(GError) error = NULL;

  g_assert_false (box_plugin_file_is_safe (path, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_PERMISSION_DENIED);
  assert_refused (path, BOX_ERROR_PERMISSION_DENIED, "writable by everyone");
}

static void
test_loader_group_writable (void)
{
  g_autofree char *dir = make_dir ();
  g_autofree char *path = copy_variant (dir, "good", "good.so", 0775);

  assert_refused (path, BOX_ERROR_PERMISSION_DENIED, "writable by its group");
}

static void
test_loader_symlink (void)
{
  g_autofree char *dir = make_dir ();
  g_autofree char *unsafe = copy_variant (dir, "good", "unsafe", 0666);
  g_autofree char *unsafe_link = g_build_filename (dir, "unsafe.so", NULL);
  g_autofree char *safe_link = g_build_filename (dir, "safe.so", NULL);
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (symlink (unsafe, unsafe_link), ==, 0);
  assert_refused (unsafe_link, BOX_ERROR_PERMISSION_DENIED, "writable by everyone");

  g_assert_cmpint (symlink (good_copy, safe_link), ==, 0);
  g_assert_true (box_plugin_file_is_safe (safe_link, &error));
  g_assert_no_error (error);
}

static void
test_loader_owner (void)
{
  g_autofree char *dir = NULL;
  g_autofree char *path = NULL;

  if (geteuid () != 0) {
    g_test_skip ("changing a file's owner needs root");
    return;
  }
  dir = make_dir ();
  path = copy_variant (dir, "good", "good.so", 0755);
  g_assert_cmpint (chown (path, 65534, 65534), ==, 0);
  assert_refused (path, BOX_ERROR_PERMISSION_DENIED, "owned by uid 65534");
}

static void
test_loader_bad_abi (void)
{
  g_autofree char *dir = make_dir ();
  g_autofree char *copy = copy_variant (dir, "badabi", "badabi.so", 0755);

  assert_refused (copy, BOX_ERROR_INVALID, "ABI version 999, boxd needs 1");
}

static void
test_loader_no_entry (void)
{
  g_autofree char *dir = make_dir ();
  g_autofree char *copy = copy_variant (dir, "noentry", "noentry.so", 0755);

  assert_refused (copy, BOX_ERROR_INVALID, "no entry point box_plugin_query()");
}

static void
test_loader_bad_name (void)
{
  g_autofree char *dir = make_dir ();
  g_autofree char *copy = copy_variant (dir, "badname", "badname.so", 0755);

  assert_refused (copy, BOX_ERROR_INVALID, "bad plugin name \"Bad Name\"");
}

static void
test_loader_not_a_plugin (void)
{
  g_autofree char *dir = make_dir ();
  g_autofree char *copy = copy_variant (dir, "notplugin", "notplugin.so", 0755);

  assert_refused (copy, BOX_ERROR_INVALID, "its type GObject is not a BoxPlugin");
}

static void
test_loader_not_elf (void)
{
  g_autofree char *dir = make_dir ();
  g_autofree char *path = g_build_filename (dir, "x.so", NULL);
  g_autofree char *subdir = g_build_filename (dir, "d.so", NULL);
  g_autofree char *missing = g_build_filename (dir, "missing.so", NULL);
  g_autoptr(GError) error = NULL;

  g_assert_true (g_file_set_contents_full (path, "#!/bin/sh\necho hello\n", -1,
                                           G_FILE_SET_CONTENTS_NONE, 0755, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_chmod (path, 0755), ==, 0);
  assert_refused (path, BOX_ERROR_INVALID, "not loadable");

  g_assert_cmpint (g_mkdir (subdir, 0755), ==, 0);
  assert_refused (subdir, BOX_ERROR_INVALID, "not a regular file");
  assert_refused (missing, BOX_ERROR_INVALID, "cannot stat");
}

static void
test_loader_duplicate (void)
{
  g_autoptr(BoxPluginLoader) loader = box_plugin_loader_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = make_dir ();
  g_autofree char *first = link_good (dir, "a.so");
  g_autofree char *second = copy_variant (dir, "good", "b.so", 0755);
  const BoxPluginModule *module;

  module = box_plugin_loader_load_file (loader, first, &error);
  g_assert_no_error (error);
  g_assert_nonnull (module);

  g_assert_null (box_plugin_loader_load_file (loader, second, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_nonnull (g_strstr_len (error->message, -1, "duplicate plugin name \"loadertest\""));
  g_assert_cmpuint (box_plugin_loader_get_modules (loader)->len, ==, 1);
  g_assert_true (box_plugin_loader_lookup (loader, "loadertest") == module);
}

static guint refused_count;

/* Counts (and swallows) the loader's "plugin ... refused: ..." warnings. */
static GLogWriterOutput
count_refusals (GLogLevelFlags log_level, const GLogField *fields, gsize n_fields,
                gpointer user_data)
{
  for (gsize i = 0; i < n_fields; i++) {
    if (g_strcmp0 (fields[i].key, "MESSAGE") == 0 && fields[i].length < 0 &&
        (log_level & G_LOG_LEVEL_WARNING) != 0 &&
        g_str_has_prefix (fields[i].value, "plugin ") &&
        g_strstr_len (fields[i].value, -1, " refused: ") != NULL) {
      refused_count++;
      return G_LOG_WRITER_HANDLED;
    }
  }
  return g_log_writer_default (log_level, fields, n_fields, user_data);
}

static void
test_loader_dir (void)
{
  g_autoptr(BoxPluginLoader) loader = box_plugin_loader_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = make_dir ();
  g_autofree char *good = link_good (dir, "20-good.so");
  g_autofree char *dup = copy_variant (dir, "good", "30-dup.so", 0755);
  g_autofree char *badabi = copy_variant (dir, "badabi", "10-badabi.so", 0755);
  g_autofree char *noentry = copy_variant (dir, "noentry", "40-noentry.so", 0755);
  g_autofree char *writable = copy_variant (dir, "good", "05-writable.so", 0777);
  g_autofree char *text = g_build_filename (dir, "50-x.so", NULL);
  g_autofree char *readme = g_build_filename (dir, "README", NULL);
  g_autofree char *missing = g_build_filename (dir, "missing", NULL);
  GPtrArray *modules;
  BoxPluginModule *module;
  GLogLevelFlags fatal_mask;

  g_assert_true (g_file_set_contents (text, "not a module", -1, &error));
  g_assert_true (g_file_set_contents (readme, "not a module either", -1, &error));
  g_assert_no_error (error);

  /* the refusals are warnings, which g_test_init() makes fatal */
  refused_count = 0;
  fatal_mask = g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  g_assert_true (box_plugin_loader_load_dir (loader, dir, &error));
  g_log_set_always_fatal (fatal_mask);
  g_assert_no_error (error);
  /* writable, badabi, dup (after good, by sorted order), noentry, text */
  g_assert_cmpuint (refused_count, ==, 5);

  modules = box_plugin_loader_get_modules (loader);
  g_assert_cmpuint (modules->len, ==, 1);
  module = g_ptr_array_index (modules, 0);
  g_assert_cmpstr (module->path, ==, good);

  g_assert_false (box_plugin_loader_load_dir (loader, missing, &error));
  g_assert_nonnull (error);
}

/* The plugins this build made, from the build tree's plugin directory. */
static void
test_loader_real_plugins (void)
{
  const char *plugin_dir = g_getenv ("BOX_PLUGIN_DIR");
  const struct {
    const char *name;
    const char *iface;
  } expected[] = {
    { "keys", "auth" },
    { "dummy", "hypervisor" },
    { "example", "auth" },
    { "sqlite", "storage" },
  };
  g_autoptr(BoxPluginLoader) loader = box_plugin_loader_new ();
  g_autofree char *dir = make_dir ();
  guint found = 0;

  if (plugin_dir == NULL) {
    g_test_skip ("BOX_PLUGIN_DIR is not set");
    return;
  }
  for (gsize i = 0; i < G_N_ELEMENTS (expected); i++) {
    g_autofree char *basename = g_strdup_printf ("box-plugin-%s.so", expected[i].name);
    g_autofree char *from = g_build_filename (plugin_dir, basename, NULL);
    g_autofree char *to = g_build_filename (dir, basename, NULL);
    g_autoptr(GError) error = NULL;
    const BoxPluginModule *module;

    if (!g_file_test (from, G_FILE_TEST_EXISTS))
      continue;
    /* the build tree's mode depends on the umask */
    copy_file (from, to, 0755);
    module = box_plugin_loader_load_file (loader, to, &error);
    g_assert_no_error (error);
    g_assert_nonnull (module);
    g_assert_cmpstr (module->name, ==, expected[i].name);
    g_assert_true (g_strv_contains ((const char *const *) module->interfaces, expected[i].iface));
    found++;
  }
  if (found == 0)
    g_test_skip ("no plugin was built");
}

static void
test_loader_interface_type (void)
{
  g_assert_true (box_plugin_interface_type ("auth") == BOX_TYPE_AUTH);
  g_assert_true (box_plugin_interface_type ("hypervisor") == BOX_TYPE_HYPERVISOR);
  g_assert_true (box_plugin_interface_type ("storage") != G_TYPE_INVALID);
  g_assert_true (box_plugin_interface_type ("network") != G_TYPE_INVALID);
  g_assert_true (box_plugin_interface_type ("broker") != G_TYPE_INVALID);
  g_assert_true (box_plugin_interface_type ("printer") == G_TYPE_INVALID);
}

static void
remove_tree (const char *path)
{
  g_autoptr(GDir) dir = NULL;
  const char *entry;

  if (!g_file_test (path, G_FILE_TEST_IS_DIR) || g_file_test (path, G_FILE_TEST_IS_SYMLINK)) {
    g_unlink (path);
    return;
  }
  dir = g_dir_open (path, 0, NULL);
  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *child = g_build_filename (path, entry, NULL);
    remove_tree (child);
  }
  g_rmdir (path);
}

/* ---- auto: priorities, probes, flags ---- */

static BoxPluginContext *
choose_context (const char *plugin_name, gpointer user_data)
{
  return g_object_new (BOX_TYPE_PLUGIN_CONTEXT, "name", plugin_name, "keyfile", user_data, NULL);
}

static void
load_choose_variant (BoxPluginLoader *loader, const char *variant)
{
  g_autofree char *path = g_strdup_printf ("%s/choose-test-%s.so", g_getenv ("LOADER_TEST_DIR"),
                                           variant);
  g_autoptr(GError) error = NULL;

  const BoxPluginModule *module = box_plugin_loader_load_file (loader, path, &error);

  g_assert_no_error (error);
  g_assert_nonnull (module);
}

static void
test_loader_choose (void)
{
  g_autoptr(BoxPluginLoader) loader = box_plugin_loader_new ();
  g_autoptr(BoxPluginLoader) few = box_plugin_loader_new ();
  g_autoptr(GKeyFile) works = g_key_file_new ();
  g_autoptr(GKeyFile) fails = g_key_file_new ();
  g_autoptr(GError) error = NULL;
  const BoxPluginModule *module;

  g_key_file_set_string (fails, "plugin.choosehigh", "fail", "true");
  load_choose_variant (loader, "low");
  load_choose_variant (loader, "never");
  load_choose_variant (loader, "high");
  load_choose_variant (loader, "novm");

  /* the highest priority wins, whatever the load order */
  module = box_plugin_loader_choose (loader, BOX_TYPE_AUTH, 0, choose_context, works, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (module->name, ==, "choosenovm");

  /* flags exclude: the next one, whose probe passes */
  module = box_plugin_loader_choose (loader, BOX_TYPE_AUTH, BOX_PLUGIN_FLAG_NO_VM, choose_context,
                                     works, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (module->name, ==, "choosehigh");

  /* a failing probe (it read its context's configuration) passes the turn */
  module = box_plugin_loader_choose (loader, BOX_TYPE_AUTH, BOX_PLUGIN_FLAG_NO_VM, choose_context,
                                     fails, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (module->name, ==, "chooselow");

  /* nothing implements the interface */
  module = box_plugin_loader_choose (loader, BOX_TYPE_HYPERVISOR, 0, choose_context, works, &error);
  g_assert_null (module);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, "is installed"));
  g_clear_error (&error);

  /* priority 0 is never chosen; the error says who refused and why */
  load_choose_variant (few, "never");
  load_choose_variant (few, "high");
  module = box_plugin_loader_choose (few, BOX_TYPE_AUTH, 0, choose_context, fails, &error);
  g_assert_null (module);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, "choosehigh: told to fail"));
  g_assert_null (strstr (error->message, "choosenever"));
  g_clear_error (&error);
  module = box_plugin_loader_choose (few, BOX_TYPE_AUTH, 0, choose_context, works, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (module->name, ==, "choosehigh");
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *good = NULL;
  int rc;

  g_log_set_writer_func (count_refusals, NULL, NULL);
  g_test_init (&argc, &argv, NULL);

  tmp_root = g_dir_make_tmp ("box-loader-test-XXXXXX", &error);
  g_assert_no_error (error);
  good = test_module_path ("good");
  good_copy = g_build_filename (tmp_root, "good-canonical.so", NULL);
  copy_file (good, good_copy, 0755);

  g_test_add_func ("/loader/good", test_loader_good);
  g_test_add_func ("/loader/world-writable", test_loader_world_writable);
  g_test_add_func ("/loader/group-writable", test_loader_group_writable);
  g_test_add_func ("/loader/symlink", test_loader_symlink);
  g_test_add_func ("/loader/owner", test_loader_owner);
  g_test_add_func ("/loader/bad-abi", test_loader_bad_abi);
  g_test_add_func ("/loader/no-entry", test_loader_no_entry);
  g_test_add_func ("/loader/bad-name", test_loader_bad_name);
  g_test_add_func ("/loader/not-a-plugin", test_loader_not_a_plugin);
  g_test_add_func ("/loader/not-elf", test_loader_not_elf);
  g_test_add_func ("/loader/duplicate", test_loader_duplicate);
  g_test_add_func ("/loader/dir", test_loader_dir);
  g_test_add_func ("/loader/real-plugins", test_loader_real_plugins);
  g_test_add_func ("/loader/interface-type", test_loader_interface_type);
  g_test_add_func ("/loader/choose", test_loader_choose);
  rc = g_test_run ();

  remove_tree (tmp_root);
  g_free (tmp_root);
  g_free (good_copy);
  return rc;
}
