/* dbus-fixture.c: the in-process D-Bus tests' engine, daemon, bus and
 * helpers; see dbus-fixture.h. */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "box-requests.h"
#include "dbus-fixture.h"

GTestDBus     *test_bus;
BoxEngine     *engine;
BoxDBusDaemon *daemon_;
BoxDBusAdmin1 *proxy;
char          *data_dir;

void
got_result_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GAsyncResult **out = user_data;

  *out = g_object_ref (result);
  g_main_context_wakeup (NULL);
}

GAsyncResult *
await_result (GAsyncResult **slot)
{
  while (*slot == NULL)
    g_main_context_iteration (NULL, TRUE);
  return *slot;
}

void
assert_remote_error (const GError *error, const char *dbus_name)
{
  g_autofree char *remote = NULL;

  g_assert_nonnull (error);
  remote = g_dbus_error_get_remote_error (error);
  g_assert_cmpstr (remote, ==, dbus_name);
}

GVariant *
call_create_project (const char *name, const char *const *domains, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  GVariant *project = NULL;

  box_dbus_admin1_call_create_project (proxy, name, domains, NULL, got_result_cb, &result);
  if (!box_dbus_admin1_call_create_project_finish (proxy, &project, await_result (&result), error))
    return NULL;
  return project;
}

const char *
lookup_str (GVariant *dict, const char *key)
{
  const char *value = NULL;

  g_assert_true (g_variant_lookup (dict, key, "&s", &value));
  return value;
}

/* The dict in @list whose @key is @value, or NULL; new reference. */
GVariant *
find_in_list (GVariant *list, const char *key, const char *value)
{
  for (gsize i = 0; i < g_variant_n_children (list); i++) {
    g_autoptr(GVariant) item = g_variant_get_child_value (list, i);
    const char *str = NULL;

    if (g_variant_lookup (item, key, "&s", &str) && g_strcmp0 (str, value) == 0)
      return g_steal_pointer (&item);
  }
  return NULL;
}

void
create_sandbox (const char *project, const char *json)
{
  g_autoptr(JsonNode) body = box_json_parse_body (json, strlen (json), FALSE, NULL);
  g_autoptr(BoxSandboxCreate) request = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_nonnull (body);
  request = box_sandbox_create_from_json (body, &error);
  g_assert_no_error (error);
  box_engine_create_sandbox_async (engine, project, request, NULL, got_result_cb, &result);
  sandbox = box_engine_create_sandbox_finish (engine, await_result (&result), &error);
  g_assert_no_error (error);
  g_assert_nonnull (sandbox);
}

static void
rm_rf (const char *path)
{
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GFileEnumerator) children = NULL;

  children = g_file_enumerate_children (file, G_FILE_ATTRIBUTE_STANDARD_NAME,
                                        G_FILE_QUERY_INFO_NOFOLLOW_SYMLINKS, NULL, NULL);
  if (children != NULL) {
    GFileInfo *info;

    while ((info = g_file_enumerator_next_file (children, NULL, NULL)) != NULL) {
      g_autoptr(GFileInfo) owned = info;
      g_autofree char *child = g_build_filename (path, g_file_info_get_name (info), NULL);

      rm_rf (child);
    }
  }
  g_file_delete (file, NULL, NULL);
}

void
fixture_setup (void)
{
  g_autoptr(BoxConfig) config = box_config_new ();
  g_autoptr(GDBusConnection) connection = NULL;
  g_autoptr(GError) error = NULL;
  const char *plugin_dir = g_getenv ("BOX_PLUGIN_DIR");

  test_bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  g_test_dbus_up (test_bus);

  data_dir = g_dir_make_tmp ("box-dbus-test-XXXXXX", &error);
  g_assert_no_error (error);
  g_free (config->data_dir);
  config->data_dir = g_strdup (data_dir);
  g_free (config->plugin_dir);
  config->plugin_dir = g_strdup (plugin_dir != NULL ? plugin_dir : BOX_BUILD_PLUGINDIR);
  g_free (config->hypervisor);
  config->hypervisor = g_strdup ("dummy");
  g_free (config->storage);
  config->storage = g_strdup ("sqlite");
  g_free (config->auth);
  config->auth = g_strdup ("keys");
  g_free (config->listen);
  config->listen = g_strdup ("127.0.0.1:0");
  g_free (config->sandbox_domain);
  config->sandbox_domain = g_strdup ("sandbox.test");
  config->dbus = BOX_DBUS_SESSION;
  g_key_file_set_string (config->keyfile, "plugin.dummy", "accel", "tcg");
  /* test_quota(): [quota] with only cpus, [quota.epsilon] */
  config->quota = (BoxQuota) { .cpus = 16 };
  g_key_file_set_uint64 (config->keyfile, "quota.epsilon", "sandboxes", 2);
  g_key_file_set_uint64 (config->keyfile, "quota.epsilon", "memory_mib", 4096);
  g_setenv ("BOX_ADMIN_TOKEN", "test-admin-token-0123456789", TRUE);
  g_assert_true (box_config_resolve (config, &error));
  g_assert_no_error (error);

  engine = box_engine_new (g_steal_pointer (&config));
  g_assert_true (box_engine_start (engine, NULL, &error));
  g_assert_no_error (error);

  daemon_ = box_dbus_daemon_new (engine);
  g_assert_true (box_dbus_daemon_start (daemon_, G_BUS_TYPE_SESSION, NULL, &error));
  g_assert_no_error (error);

  connection = g_bus_get_sync (G_BUS_TYPE_SESSION, NULL, &error);
  g_assert_no_error (error);
  /* wait until the daemon owns its name, then talk to it by that name */
  for (gboolean owned = FALSE; !owned;) {
    g_autoptr(GVariant) reply = NULL;

    while (g_main_context_iteration (NULL, FALSE))
      ;
    reply = g_dbus_connection_call_sync (connection, "org.freedesktop.DBus",
                                         "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                         "NameHasOwner", g_variant_new ("(s)", BOX_DBUS_NAME),
                                         G_VARIANT_TYPE ("(b)"), G_DBUS_CALL_FLAGS_NONE, -1,
                                         NULL, &error);
    g_assert_no_error (error);
    g_variant_get (reply, "(b)", &owned);
    if (!owned)
      g_usleep (10 * 1000);
  }
  proxy = box_dbus_admin1_proxy_new_sync (connection,
                                          G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES |
                                          G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START,
                                          BOX_DBUS_NAME, BOX_DBUS_PATH, NULL, &error);
  g_assert_no_error (error);
}

void
fixture_teardown (void)
{
  g_clear_object (&proxy);
  box_dbus_daemon_stop (daemon_);
  g_clear_object (&daemon_);
  box_engine_stop (engine);
  g_clear_object (&engine);
  g_test_dbus_down (test_bus);
  g_clear_object (&test_bus);
  rm_rf (data_dir);
  g_clear_pointer (&data_dir, g_free);
}
