/* engine-broker-default-test.c: which secrets broker boxd loads, and what
 * a node without one answers.
 *
 * The engine in process on the dummy hypervisor with the build tree's
 * plugins (the real `broker` among them): `[boxd] broker=auto` (the
 * default) loads it when the deployment has a secret key and none
 * without; `none` (or empty) loads none, and then a create, fork or PATCH
 * naming secrets is 501 unsupported and changes nothing while the secret
 * routes keep working; an auto choice that cannot start is left out (the
 * same 501); a name that is not installed, or cannot start, stops the start.
 */
#include "config.h"

#include "box-engine-private.h"
#include "engine-fixture.h"

static const char *broker_wanted;   /* [boxd] broker= for the next set_up, NULL: the default */

static void
configure (BoxConfig *config)
{
  config->secret_key = TRUE;
  g_free (config->secret_key_file);
  config->secret_key_file = g_build_filename (config->data_dir, "secret.key", NULL);
  if (broker_wanted != NULL) {
    g_free (config->broker);
    config->broker = g_strdup (broker_wanted);
  }
}

static void
set_up_with_key (Ef *ef, gconstpointer user_data)
{
  ef->configure = configure;
  ef_set_up (ef, user_data);
}

static void
put_token (Ef *ef)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (ef_put_secret (ef, "TOKEN", "{\"value\": \"v-1\", \"hosts\": [\"api.test\"]}",
                                &error));
  g_assert_no_error (error);
}

static guint
sandbox_count (Ef *ef)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) all = box_engine_list_sandboxes (ef->engine, ef->project, NULL, NULL, &error);

  g_assert_no_error (error);
  return all->len;
}

/* The default is auto; with a secret key it loads the `broker` plugin,
 * whose CA is made in the data directory, and a sandbox may use secrets
 * (the dummy hypervisor has no network: nothing to mark brokered). */
static void
test_auto_with_key (Ef *ef, gconstpointer user_data)
{
  BoxBroker *broker = box_engine_get_broker (ef->engine);
  g_autofree char *ca = g_build_filename (ef->data_dir, "broker", "ca.pem", NULL);
  g_autoptr(BoxConfig) defaults = box_config_new ();
  g_autoptr(BoxSandbox) sb = NULL;

  g_assert_cmpstr (defaults->broker, ==, "auto");
  g_assert_nonnull (broker);
  g_assert_cmpstr (box_plugin_get_name (BOX_PLUGIN (broker)), ==, "broker");
  g_assert_true (g_file_test (ca, G_FILE_TEST_IS_REGULAR));
  put_token (ef);
  sb = ef_create_ok (ef, "{\"secrets\": [\"TOKEN\"]}");
  g_assert_cmpstrv (sb->secrets, ((const char *const[]) { "TOKEN", NULL }));
}

/* Without a secret key auto loads no broker (no CA is made). */
static void
test_auto_without_key (Ef *ef, gconstpointer user_data)
{
  g_autofree char *dir = g_build_filename (ef->data_dir, "broker", NULL);

  g_assert_null (box_engine_get_broker (ef->engine));
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
}

static void
assert_unsupported (const GError *error)
{
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, "this node brokers no secrets: [boxd] broker=none"));
}

/* broker=none (and empty): no broker; the secret routes work, but a
 * create, fork or PATCH naming secrets is 501 and changes nothing. */
static void
test_none (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(BoxSandbox) refused = NULL;
  g_autoptr(BoxCheckpoint) cp = NULL;
  g_autoptr(BoxSecret) secret = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *fork = NULL;

  g_assert_null (box_engine_get_broker (ef->engine));
  put_token (ef);
  secret = box_engine_get_secret (ef->engine, ef->project, "TOKEN", &error);
  g_assert_no_error (error);
  g_assert_nonnull (secret);

  refused = ef_create (ef, "{\"name\": \"user\", \"secrets\": [\"TOKEN\"]}", &error);
  g_assert_null (refused);
  assert_unsupported (error);
  g_clear_error (&error);
  g_assert_cmpuint (sandbox_count (ef), ==, 0);

  sb = ef_create_ok (ef, "{\"name\": \"plain\", \"env\": {\"A\": \"1\"}}");
  refused = ef_update (ef, sb->id, "{\"secrets\": [\"TOKEN\"], \"env\": {\"A\": \"2\"}}", &error);
  g_assert_null (refused);
  assert_unsupported (error);
  g_clear_error (&error);
  after = box_engine_get_sandbox (ef->engine, ef->project, sb->id, &error);
  g_assert_no_error (error);
  g_assert_true (after->secrets == NULL || after->secrets[0] == NULL);
  g_assert_cmpstr (g_hash_table_lookup (after->env, "A"), ==, "1");
  /* emptying them names none */
  g_clear_pointer (&after, box_sandbox_free);
  after = ef_update (ef, sb->id, "{\"secrets\": []}", &error);
  g_assert_no_error (error);

  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_STOP);
  cp = ef_checkpoint (ef, sb->id, FALSE, &error);
  g_assert_no_error (error);
  fork = g_strdup_printf ("{\"from\": {\"sandbox\": \"%s\", \"checkpoint\": \"%s\"}, "
                          "\"secrets\": [\"TOKEN\"]}", sb->id, cp->id);
  refused = ef_create (ef, fork, &error);
  g_assert_null (refused);
  assert_unsupported (error);
  g_clear_error (&error);
  g_assert_cmpuint (sandbox_count (ef), ==, 1);
}

/* A broker named but not installed stops the start, as for other roles. */
static void
test_named_missing (Ef *ef, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxEngine) engine = NULL;
  BoxConfig *config;

  ef_stop (ef);
  config = ef_config (ef);
  g_free (config->broker);
  config->broker = g_strdup ("nosuchbroker");
  engine = box_engine_new (config);
  g_assert_false (box_engine_start (engine, NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "broker plugin \"nosuchbroker\" is not installed"));
}

/* The `broker` plugin cannot start (its CA key cannot be written): auto leaves it
 * out, said loudly, and secrets are 501; named, boxd does not start. */
static void
test_cannot_start (Ef *ef, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxEngine) engine = NULL;
  g_autoptr(BoxSandbox) refused = NULL;
  BoxConfig *config;

  ef_stop (ef);
  config = ef_config (ef);
  g_key_file_set_string (config->keyfile, "plugin.broker", "ca_key", "/proc/box-none/ca.key");
  ef->engine = box_engine_new (config);
  box_engine_set_clock (ef->engine, ef->clock);
  g_assert_true (box_engine_start (ef->engine, NULL, &error));
  g_assert_no_error (error);
  g_assert_null (box_engine_get_broker (ef->engine));
  put_token (ef);
  refused = ef_create (ef, "{\"secrets\": [\"TOKEN\"]}", &error);
  g_assert_null (refused);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, "broker=auto found no broker plugin that starts"));
  g_clear_error (&error);
  g_assert_cmpuint (sandbox_count (ef), ==, 0);
  ef_stop (ef);

  config = ef_config (ef);
  g_key_file_set_string (config->keyfile, "plugin.broker", "ca_key", "/proc/box-none/ca.key");
  g_free (config->broker);
  config->broker = g_strdup ("broker");
  engine = box_engine_new (config);
  g_assert_false (box_engine_start (engine, NULL, &error));
  g_assert_nonnull (strstr (error->message, "plugin broker failed to start"));
}

static void
set_up_none (Ef *ef, gconstpointer user_data)
{
  broker_wanted = "none";
  set_up_with_key (ef, user_data);
  broker_wanted = NULL;
}

static void
set_up_empty (Ef *ef, gconstpointer user_data)
{
  broker_wanted = "";
  set_up_with_key (ef, user_data);
  broker_wanted = NULL;
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);
  g_test_add ("/engine-broker-default/auto-with-key", Ef, NULL, set_up_with_key,
              test_auto_with_key, ef_tear_down);
  g_test_add ("/engine-broker-default/auto-without-key", Ef, NULL, ef_set_up,
              test_auto_without_key, ef_tear_down);
  g_test_add ("/engine-broker-default/none", Ef, "checkpoints,fork", set_up_none, test_none,
              ef_tear_down);
  g_test_add ("/engine-broker-default/empty", Ef, "checkpoints,fork", set_up_empty, test_none,
              ef_tear_down);
  g_test_add ("/engine-broker-default/cannot-start", Ef, NULL, set_up_with_key,
              test_cannot_start, ef_tear_down);
  g_test_add ("/engine-broker-default/named-missing", Ef, NULL, set_up_with_key,
              test_named_missing, ef_tear_down);
  return g_test_run ();
}
