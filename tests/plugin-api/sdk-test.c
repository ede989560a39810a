/* sdk-test.c: the plugin SDK's helpers, linked against libbox-plugin-1
 * alone, as a plugin is: the context's typed configuration getters, the
 * sandbox-ID check and the per-ID state store. */
#include "config.h"

#include <glib/gstdio.h>

#include "box.h"

static BoxPluginContext *
context_with (const char *data_dir, const char *config)
{
  g_autoptr(GKeyFile) keyfile = g_key_file_new ();
  g_autoptr(GError) error = NULL;

  g_assert_true (g_key_file_load_from_data (keyfile, config, -1, G_KEY_FILE_NONE, &error));
  g_assert_no_error (error);
  return g_object_new (BOX_TYPE_PLUGIN_CONTEXT, "name", "demo", "keyfile", keyfile,
                       "data-dir", data_dir, NULL);
}

static void
test_config_string (void)
{
  g_autoptr(BoxPluginContext) context =
    context_with (NULL, "[plugin.demo]\nuri =  qemu:///x  \n[plugin.other]\nkey=no\n");
  g_autofree char *uri = box_plugin_context_get_string (context, "uri", "fallback");
  g_autofree char *unset = box_plugin_context_get_string (context, "key", "fallback");
  g_autofree char *none = box_plugin_context_get_string (context, "key", NULL);

  g_assert_cmpstr (box_plugin_context_get_name (context), ==, "demo");
  g_assert_cmpstr (uri, ==, "qemu:///x");           /* stripped */
  g_assert_cmpstr (unset, ==, "fallback");          /* another plugin's key is not ours */
  g_assert_null (none);
}

static void
test_config_uint (void)
{
  g_autoptr(BoxPluginContext) context =
    context_with (NULL, "[plugin.demo]\nsize=42\nbig=70000\nneg=-1\nword=many\n");
  g_autoptr(GError) error = NULL;
  guint64 value = 0;

  g_assert_true (box_plugin_context_get_uint (context, "size", 7, 100, &value, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (value, ==, 42);
  g_assert_true (box_plugin_context_get_uint (context, "unset", 7, 100, &value, &error));
  g_assert_cmpuint (value, ==, 7);

  g_assert_false (box_plugin_context_get_uint (context, "big", 7, 65535, &value, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_true (g_str_has_prefix (error->message, "[plugin.demo] big: "));
  g_clear_error (&error);
  g_assert_false (box_plugin_context_get_uint (context, "neg", 7, 100, &value, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (box_plugin_context_get_uint (context, "word", 7, 100, &value, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
}

static void
test_config_bool (void)
{
  g_autoptr(BoxPluginContext) context =
    context_with (NULL, "[plugin.demo]\na=true\nb=No\nc=1\nd=OFF\ne=yes\nf=maybe\n");
  g_autoptr(GError) error = NULL;
  gboolean value = FALSE;

  g_assert_true (box_plugin_context_get_bool (context, "a", FALSE, &value, &error) && value);
  g_assert_true (box_plugin_context_get_bool (context, "b", TRUE, &value, &error) && !value);
  g_assert_true (box_plugin_context_get_bool (context, "c", FALSE, &value, &error) && value);
  g_assert_true (box_plugin_context_get_bool (context, "d", TRUE, &value, &error) && !value);
  g_assert_true (box_plugin_context_get_bool (context, "e", FALSE, &value, &error) && value);
  g_assert_true (box_plugin_context_get_bool (context, "unset", TRUE, &value, &error) && value);
  g_assert_no_error (error);
  g_assert_false (box_plugin_context_get_bool (context, "f", FALSE, &value, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_cmpstr (error->message, ==, "[plugin.demo] f: \"maybe\" is not true or false");
}

static void
test_config_strv (void)
{
  g_autoptr(BoxPluginContext) context =
    context_with (NULL, "[plugin.demo]\nlist= a, b;c ,, \nempty=\n");
  const char *const fallback[] = { "x", "y", NULL };
  g_auto(GStrv) list = box_plugin_context_get_strv (context, "list", NULL);
  g_auto(GStrv) empty = box_plugin_context_get_strv (context, "empty", fallback);
  g_auto(GStrv) unset = box_plugin_context_get_strv (context, "unset", fallback);
  g_auto(GStrv) unset_null = box_plugin_context_get_strv (context, "unset", NULL);
  const char *const want[] = { "a", "b", "c", NULL };

  g_assert_true (g_strv_equal ((const char *const *) list, want));
  g_assert_cmpuint (g_strv_length (empty), ==, 0);    /* set, but to nothing */
  g_assert_true (g_strv_equal ((const char *const *) unset, fallback));
  g_assert_nonnull (unset_null);
  g_assert_cmpuint (g_strv_length (unset_null), ==, 0);
}

static void
test_config_size (void)
{
  g_autoptr(BoxPluginContext) context =
    context_with (NULL, "[plugin.demo]\nplain=4096\nk=8K\nm=512M\ng=2 GiB\nt=1tb\n"
                        "bad=12X\nneg=-5\nhuge=99999999999T\nunit=M\n");
  g_autoptr(GError) error = NULL;
  guint64 value = 0;
  static const struct {
    const char *key;
    guint64     bytes;
  } good[] = {
    { "plain", 4096 },
    { "k", 8 << 10 },
    { "m", 512u << 20 },
    { "g", G_GUINT64_CONSTANT (2) << 30 },
    { "t", G_GUINT64_CONSTANT (1) << 40 },
  };
  static const char *const bad[] = { "bad", "neg", "huge", "unit" };

  for (guint i = 0; i < G_N_ELEMENTS (good); i++) {
    g_assert_true (box_plugin_context_get_size (context, good[i].key, 0, &value, &error));
    g_assert_no_error (error);
    g_assert_cmpuint (value, ==, good[i].bytes);
  }
  g_assert_true (box_plugin_context_get_size (context, "unset", 123, &value, &error));
  g_assert_cmpuint (value, ==, 123);
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_assert_false (box_plugin_context_get_size (context, bad[i], 0, &value, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    g_clear_error (&error);
  }
}

static void
test_context_state_dir (void)
{
  g_autofree char *root = g_dir_make_tmp ("box-sdk-XXXXXX", NULL);
  g_autoptr(BoxPluginContext) context = context_with (root, "");
  g_autoptr(BoxPluginContext) empty = g_object_new (BOX_TYPE_PLUGIN_CONTEXT, "name", "x", NULL);
  g_autofree char *want = g_build_filename (root, "demo", NULL);
  g_autoptr(GError) error = NULL;
  GStatBuf st;

  g_assert_cmpstr (box_plugin_context_get_state_dir (context), ==, want);
  g_assert_cmpint (g_stat (want, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);
  g_assert_null (box_plugin_context_get_storage (context));
  g_assert_null (box_plugin_context_get_network (context));

  /* a context without an agent factory cannot make agents */
  {
    g_autoptr(GInputStream) in = g_memory_input_stream_new ();
    g_autoptr(GOutputStream) out = g_memory_output_stream_new_resizable ();
    g_autoptr(GIOStream) stream = g_simple_io_stream_new (in, out);

    g_assert_null (box_plugin_context_new_agent (empty, stream, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  }
  g_assert_cmpint (g_rmdir (want), ==, 0);
  g_assert_cmpint (g_rmdir (root), ==, 0);
}

static void
test_sandbox_id (void)
{
  static const char *const good[] = { "sb-abcdefgh2345", "pool-1", "a", "0-9" };
  static const char *const bad[] = { "", "-x", "../etc", "SB-1", "a/b", "a.json", "a b", "é" };
  g_autofree char *longest = g_strnfill (64, 'a');
  g_autofree char *too_long = g_strnfill (65, 'a');

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    g_assert_true (box_sandbox_id_is_valid (good[i]));
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    g_assert_false (box_sandbox_id_is_valid (bad[i]));
  g_assert_false (box_sandbox_id_is_valid (NULL));
  g_assert_true (box_sandbox_id_is_valid (longest));
  g_assert_false (box_sandbox_id_is_valid (too_long));
}

static JsonNode *
json (const char *text)
{
  g_autoptr(GError) error = NULL;
  JsonNode *node = json_from_string (text, &error);

  g_assert_no_error (error);
  return node;
}

static void
test_state_store (void)
{
  g_autofree char *root = g_dir_make_tmp ("box-sdk-XXXXXX", NULL);
  g_autofree char *dir = g_build_filename (root, "state", NULL);   /* made at the first save */
  g_autoptr(BoxStateStore) store = box_state_store_new (dir);
  g_autoptr(JsonNode) one = json ("{\"vm\": \"abc\", \"n\": 1}");
  g_autoptr(JsonNode) two = json ("{\"vm\": \"def\", \"n\": 2}");
  g_autoptr(JsonNode) loaded = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *path = g_build_filename (dir, "sb-one.json", NULL);
  g_autofree char *stray = g_build_filename (dir, "README", NULL);
  g_autofree char *temp = g_build_filename (dir, "sb-one.json.ABC123", NULL);
  g_auto(GStrv) ids = NULL;
  GStatBuf st;

  g_assert_cmpstr (box_state_store_get_dir (store), ==, dir);
  loaded = box_state_store_load (store, "sb-one", &error);
  g_assert_null (loaded);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  g_assert_true (box_state_store_save (store, "sb-one", one, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  g_assert_true (box_state_store_save (store, "sb-two", two, &error));
  g_assert_true (box_state_store_save (store, "sb-one", two, &error));   /* replaced */
  g_assert_no_error (error);
  loaded = box_state_store_load (store, "sb-one", &error);
  g_assert_no_error (error);
  g_assert_true (json_node_equal (loaded, two));
  g_clear_pointer (&loaded, json_node_unref);

  /* other names, temporaries of an interrupted write and bad IDs are not states */
  g_assert_true (g_file_set_contents (stray, "x", -1, NULL));
  g_assert_true (g_file_set_contents (temp, "{", -1, NULL));
  ids = box_state_store_list (store);
  g_assert_cmpuint (g_strv_length (ids), ==, 2);
  g_assert_cmpstr (ids[0], ==, "sb-one");
  g_assert_cmpstr (ids[1], ==, "sb-two");
  g_clear_pointer (&ids, g_strfreev);

  g_assert_false (box_state_store_save (store, "../escape", one, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);

  /* a broken file is an internal error, not a missing one */
  g_assert_true (g_file_set_contents (path, "{\"vm\":", -1, NULL));
  loaded = box_state_store_load (store, "sb-one", &error);
  g_assert_null (loaded);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);

  /* move: exactly one owner */
  g_assert_true (box_state_store_move (store, "sb-two", "sb-three", &error));
  g_assert_no_error (error);
  loaded = box_state_store_load (store, "sb-three", &error);
  g_assert_no_error (error);
  g_assert_true (json_node_equal (loaded, two));
  g_clear_pointer (&loaded, json_node_unref);
  g_assert_false (box_state_store_move (store, "sb-two", "sb-four", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  /* remove is idempotent */
  g_assert_true (box_state_store_remove (store, "sb-one", &error));
  g_assert_true (box_state_store_remove (store, "sb-one", &error));
  g_assert_true (box_state_store_remove (store, "sb-three", &error));
  g_assert_no_error (error);
  ids = box_state_store_list (store);
  g_assert_cmpuint (g_strv_length (ids), ==, 0);

  g_assert_cmpint (g_unlink (stray), ==, 0);
  g_assert_cmpint (g_unlink (temp), ==, 0);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
  g_assert_cmpint (g_rmdir (root), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/sdk/config/string", test_config_string);
  g_test_add_func ("/sdk/config/uint", test_config_uint);
  g_test_add_func ("/sdk/config/bool", test_config_bool);
  g_test_add_func ("/sdk/config/strv", test_config_strv);
  g_test_add_func ("/sdk/config/size", test_config_size);
  g_test_add_func ("/sdk/context/state-dir", test_context_state_dir);
  g_test_add_func ("/sdk/sandbox-id", test_sandbox_id);
  g_test_add_func ("/sdk/state-store", test_state_store);
  return g_test_run ();
}
