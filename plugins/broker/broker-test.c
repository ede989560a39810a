/* broker-test.c: the `broker` plugin's CA, its leaves and the secrets
 * table; whole connections are in broker-test-pump.c. */
#include "config.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <gnutls/x509.h>
#include <string.h>
#include <sys/stat.h>

#include "broker-test.h"

static BoxBrokerPlugin *
plugin_new (const char *dir, const char *bundle, guint max_connections)
{
  g_autoptr(GKeyFile) keyfile = g_key_file_new ();
  g_autoptr(BoxPluginContext) context = NULL;
  g_autoptr(GError) error = NULL;
  BoxBrokerPlugin *plugin;

  if (bundle != NULL)
    g_key_file_set_string (keyfile, "plugin.broker", "ca_bundle", bundle);
  if (max_connections > 0)
    g_key_file_set_uint64 (keyfile, "plugin.broker", "max_connections", max_connections);
  context = g_object_new (BOX_TYPE_PLUGIN_CONTEXT, "name", "broker", "keyfile", keyfile,
                          "data-dir", dir, NULL);
  plugin = g_object_new (BOX_TYPE_BROKER_PLUGIN, "name", "broker", "context", context, NULL);
  g_assert_true (box_plugin_start (BOX_PLUGIN (plugin), NULL, &error));
  g_assert_no_error (error);
  return plugin;
}

void
broker_test_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *key = NULL;

  f->dir = g_dir_make_tmp ("broker-test-XXXXXX", &error);
  g_assert_no_error (error);
  key = g_build_filename (f->dir, "upstream-ca.key", NULL);
  f->bundle = g_build_filename (f->dir, "upstream-ca.pem", NULL);
  f->upstream_ca = box_broker_ca_open (key, f->bundle, &error);
  g_assert_no_error (error);
  f->plugin = plugin_new (f->dir, f->bundle, GPOINTER_TO_UINT (data));
}

void
broker_test_tear_down (Fixture *f, gconstpointer data)
{
  box_plugin_stop (BOX_PLUGIN (f->plugin));
  g_object_unref (f->plugin);
  box_broker_ca_free (f->upstream_ca);
  {
    const char *argv[] = { "rm", "-rf", "--", f->dir, NULL };
    g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL,
                                 NULL, NULL));
  }
  g_free (f->dir);
  g_free (f->bundle);
}

static gnutls_x509_crt_t
crt_from_pem (GBytes *pem)
{
  gnutls_x509_crt_t crt;
  gnutls_datum_t datum = { (unsigned char *) g_bytes_get_data (pem, NULL), (unsigned) g_bytes_get_size (pem) };

  g_assert_cmpint (gnutls_x509_crt_init (&crt), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_import (crt, &datum, GNUTLS_X509_FMT_PEM), ==, 0);
  return crt;
}

/* ---- the CA and its leaves ------------------------------------------------ */

static void
test_ca (Fixture *f, gconstpointer data)
{
  g_autofree char *key = g_build_filename (f->dir, "broker", "ca.key", NULL);
  g_autofree char *cert = g_build_filename (f->dir, "broker", "ca.pem", NULL);
  g_autoptr(GBytes) pem = box_broker_get_ca_pem (BOX_BROKER (f->plugin), NULL);
  g_autoptr(GBytes) again = NULL, rotated = NULL, on_disk = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *contents = NULL;
  gsize len = 0;
  BoxBrokerPlugin *second;
  gnutls_x509_crt_t crt;
  struct stat st;

  g_assert_cmpint (g_stat (key, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  g_assert_true (g_file_get_contents (cert, &contents, &len, NULL));
  g_assert_cmpmem (contents, len, g_bytes_get_data (pem, NULL), g_bytes_get_size (pem));
  crt = crt_from_pem (pem);
  g_assert_cmpint (gnutls_x509_crt_get_ca_status (crt, NULL), >, 0);
  gnutls_x509_crt_deinit (crt);

  /* a second start loads the same CA */
  box_plugin_stop (BOX_PLUGIN (f->plugin));
  second = plugin_new (f->dir, f->bundle, 0);
  again = box_broker_get_ca_pem (BOX_BROKER (second), NULL);
  g_assert_true (g_bytes_equal (pem, again));

  /* rotation: a new CA, on disk too */
  g_assert_true (box_broker_rotate_ca (BOX_BROKER (second), &error));
  g_assert_no_error (error);
  rotated = box_broker_get_ca_pem (BOX_BROKER (second), NULL);
  g_assert_false (g_bytes_equal (pem, rotated));
  g_clear_pointer (&contents, g_free);
  g_assert_true (g_file_get_contents (cert, &contents, &len, NULL));
  on_disk = g_bytes_new (contents, len);
  g_assert_true (g_bytes_equal (on_disk, rotated));
  g_assert_cmpint (g_stat (key, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  box_plugin_stop (BOX_PLUGIN (second));
  g_object_unref (second);
  /* the fixture's plugin is stopped already; stopping twice is harmless */
}

/* Whether @leaf chains to @ca_pem and is for @name. */
static gboolean
leaf_verifies (BoxBrokerLeaf *leaf, GBytes *ca_pem, const char *name)
{
  g_autoptr(GBytes) leaf_pem = box_broker_leaf_get_pem (leaf);
  gnutls_x509_crt_t crt = crt_from_pem (leaf_pem), ca = crt_from_pem (ca_pem);
  unsigned int status = 1;
  gboolean ok;

  g_assert_cmpint (gnutls_x509_crt_list_verify (&crt, 1, &ca, 1, NULL, 0, 0, &status), ==, 0);
  ok = status == 0 && gnutls_x509_crt_check_hostname (crt, name) != 0 &&
       gnutls_x509_crt_check_key_purpose (crt, GNUTLS_KP_TLS_WWW_SERVER, 0) != 0;
  gnutls_x509_crt_deinit (crt);
  gnutls_x509_crt_deinit (ca);
  return ok;
}

static void
test_leaves (Fixture *f, gconstpointer data)
{
  BoxBrokerCa *ca = box_broker_plugin_get_ca (f->plugin);
  g_autoptr(GBytes) ca_pem = box_broker_ca_get_pem (ca);
  g_autoptr(GBytes) new_ca_pem = NULL;
  g_autoptr(BoxBrokerLeaf) leaf = box_broker_ca_leaf (ca, "api.example.com", NULL);
  g_autoptr(BoxBrokerLeaf) same = box_broker_ca_leaf (ca, "api.example.com", NULL);
  g_autoptr(BoxBrokerLeaf) ip = box_broker_ca_leaf (ca, "198.51.100.7", NULL);
  g_autoptr(BoxBrokerLeaf) after = NULL;

  g_assert_nonnull (leaf);
  g_assert_true (leaf_verifies (leaf, ca_pem, "api.example.com"));
  g_assert_false (leaf_verifies (leaf, ca_pem, "other.example.com"));
  g_assert_true (leaf == same);
  g_assert_true (leaf_verifies (ip, ca_pem, "198.51.100.7"));
  g_assert_cmpuint (box_broker_ca_cached (ca), ==, 2);

  /* after a rotation: the cache is empty and new leaves chain to the new CA */
  g_assert_true (box_broker_rotate_ca (BOX_BROKER (f->plugin), NULL));
  g_assert_cmpuint (box_broker_ca_cached (ca), ==, 0);
  new_ca_pem = box_broker_ca_get_pem (ca);
  after = box_broker_ca_leaf (ca, "api.example.com", NULL);
  g_assert_true (after != leaf);
  g_assert_true (leaf_verifies (after, new_ca_pem, "api.example.com"));
  g_assert_false (leaf_verifies (after, ca_pem, "api.example.com"));
}

/* ---- the secrets table ------------------------------------------------------ */

BoxSecret *
broker_test_secret (const char *const *hosts, const char *placeholder, const char *header, const char *format)
{
  BoxSecret *secret = g_new0 (BoxSecret, 1);

  secret->name = g_strdup ("api_key");
  secret->project = g_strdup ("default");
  secret->hosts = g_strdupv ((char **) hosts);
  secret->placeholder = g_strdup (placeholder);
  secret->inject_header = g_strdup (header);
  secret->inject_format = g_strdup (format);
  return secret;
}

void
broker_test_set_one (BoxBrokerPlugin *plugin, const BoxSecret *secret, const char *value)
{
  g_autoptr(GPtrArray) array = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GBytes) bytes = value != NULL ? g_bytes_new (value, strlen (value)) : NULL;
  g_autoptr(GError) error = NULL;

  if (secret != NULL) {
    BoxBrokeredSecret *one = g_new0 (BoxBrokeredSecret, 1);
    one->secret = secret;
    one->value = bytes;
    g_ptr_array_add (array, one);
  }
  g_assert_true (box_broker_set_secrets (BOX_BROKER (plugin), SANDBOX, array, &error));
  g_assert_no_error (error);
}

static void
test_wants (Fixture *f, gconstpointer data)
{
  const char *hosts[] = { "api.example.com", "*.svc.test", "git.example.org/repo", "198.51.100.9", NULL };
  g_autoptr(BoxSecret) secret = broker_test_secret (hosts, PLACEHOLDER, NULL, NULL);
  BoxBroker *broker = BOX_BROKER (f->plugin);
  g_autofree char *prefix = NULL;

  g_assert_false (box_broker_wants (broker, SANDBOX, "api.example.com"));
  broker_test_set_one (f->plugin, secret, VALUE);
  g_assert_true (box_broker_wants (broker, SANDBOX, "api.example.com"));
  g_assert_true (box_broker_wants (broker, SANDBOX, "API.Example.com"));
  g_assert_false (box_broker_wants (broker, SANDBOX, "example.com"));
  g_assert_false (box_broker_wants (broker, SANDBOX, "xapi.example.com"));
  g_assert_true (box_broker_wants (broker, SANDBOX, "a.svc.test"));
  g_assert_true (box_broker_wants (broker, SANDBOX, "a.b.svc.test"));
  g_assert_false (box_broker_wants (broker, SANDBOX, "svc.test"));
  g_assert_false (box_broker_wants (broker, SANDBOX, "xsvc.test"));
  g_assert_true (box_broker_wants (broker, SANDBOX, "git.example.org"));
  g_assert_true (box_broker_wants (broker, SANDBOX, "198.51.100.9"));
  g_assert_false (box_broker_wants (broker, SANDBOX, "198.51.100.90"));
  g_assert_false (box_broker_wants (broker, "sbx-other", "api.example.com"));
  g_assert_true (box_broker_host_matches ("git.example.org/repo", "git.example.org", &prefix));
  g_assert_cmpstr (prefix, ==, "/repo");
  g_assert_true (box_broker_host_matches ("2001:db8::1", "2001:DB8:0::1", NULL));
  broker_test_set_one (f->plugin, NULL, NULL);
  g_assert_false (box_broker_wants (broker, SANDBOX, "api.example.com"));
}

/* A setting out of range refuses the start, with the key named. */
static void
test_bad_settings (void)
{
  const char *bad[] = { "0", "65537", "-1", "many", NULL };
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("broker-test-XXXXXX", &error);

  g_assert_no_error (error);
  for (guint i = 0; bad[i] != NULL; i++) {
    g_autoptr(GKeyFile) keyfile = g_key_file_new ();
    g_autoptr(BoxPluginContext) context = NULL;
    g_autoptr(BoxBrokerPlugin) plugin = NULL;
    g_autofree char *ca = g_build_filename (dir, "broker", "ca.pem", NULL);

    g_key_file_set_string (keyfile, "plugin.broker", "max_connections", bad[i]);
    context = g_object_new (BOX_TYPE_PLUGIN_CONTEXT, "name", "broker", "keyfile", keyfile,
                            "data-dir", dir, NULL);
    plugin = g_object_new (BOX_TYPE_BROKER_PLUGIN, "name", "broker", "context", context, NULL);
    g_assert_false (box_plugin_start (BOX_PLUGIN (plugin), NULL, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    g_assert_nonnull (strstr (error->message, "max_connections"));
    g_clear_error (&error);
    /* refused before anything was made */
    g_assert_false (g_file_test (ca, G_FILE_TEST_EXISTS));
  }
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, fn, data) \
  g_test_add ("/broker/" path, Fixture, GUINT_TO_POINTER (data), broker_test_set_up, fn, broker_test_tear_down)
  ADD ("ca", test_ca, 0);
  ADD ("leaves", test_leaves, 0);
  ADD ("wants", test_wants, 0);
  g_test_add_func ("/broker/bad-settings", test_bad_settings);
  broker_test_add_pump ();
  return g_test_run ();
}
