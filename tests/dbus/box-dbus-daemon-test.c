/* box-dbus-daemon-test.c: org.box.Admin1 on a private bus.
 *
 * An in-process BoxEngine (sqlite storage, keys auth, dummy hypervisor,
 * from BOX_PLUGIN_DIR) behind a BoxDBusDaemon on a GTestDBus session bus
 * (dbus-fixture.h); every method is called through the generated proxy, as
 * boxctl does.  The egress methods are in box-dbus-egress-test.c.
 *
 * The gate is also tried from another uid: as root, this binary runs itself
 * as nobody (--peer-call) over a peer-to-peer connection and must get
 * AccessDenied.
 */
#include "config.h"

#include <glib/gstdio.h>
#include <grp.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box-dbus-daemon.h"
#include "box-requests.h"
#include "dbus-fixture.h"

/* ---- helpers ----------------------------------------------------------- */

static gboolean
matches (const char *pattern, const char *str)
{
  return g_regex_match_simple (pattern, str, 0, 0);
}

static GVariant *
call_list_projects (void)
{
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  GVariant *projects = NULL;

  box_dbus_admin1_call_list_projects (proxy, NULL, got_result_cb, &result);
  box_dbus_admin1_call_list_projects_finish (proxy, &projects, await_result (&result), &error);
  g_assert_no_error (error);
  return projects;
}

static gboolean
call_delete_project (const char *name, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;

  box_dbus_admin1_call_delete_project (proxy, name, NULL, got_result_cb, &result);
  return box_dbus_admin1_call_delete_project_finish (proxy, await_result (&result), error);
}

static GVariant *
call_set_domains (const char *name, const char *const *domains, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  GVariant *project = NULL;

  box_dbus_admin1_call_set_project_domains (proxy, name, domains, NULL, got_result_cb, &result);
  if (!box_dbus_admin1_call_set_project_domains_finish (proxy, &project, await_result (&result),
                                                        error))
    return NULL;
  return project;
}

static GVariant *
call_list_keys (const char *project, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  GVariant *keys = NULL;

  box_dbus_admin1_call_list_keys (proxy, project, NULL, got_result_cb, &result);
  if (!box_dbus_admin1_call_list_keys_finish (proxy, &keys, await_result (&result), error))
    return NULL;
  return keys;
}

static GVariant *
call_create_key (const char *project, const char *name, char **secret, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  GVariant *key = NULL;

  box_dbus_admin1_call_create_key (proxy, project, name, NULL, got_result_cb, &result);
  if (!box_dbus_admin1_call_create_key_finish (proxy, &key, secret, await_result (&result), error))
    return NULL;
  return key;
}

static gboolean
call_delete_key (const char *project, const char *key_id, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;

  box_dbus_admin1_call_delete_key (proxy, project, key_id, NULL, got_result_cb, &result);
  return box_dbus_admin1_call_delete_key_finish (proxy, await_result (&result), error);
}

static GVariant *
call_list_sandboxes (void)
{
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  GVariant *sandboxes = NULL;

  box_dbus_admin1_call_list_sandboxes (proxy, NULL, got_result_cb, &result);
  box_dbus_admin1_call_list_sandboxes_finish (proxy, &sandboxes, await_result (&result), &error);
  g_assert_no_error (error);
  return sandboxes;
}

static void
assert_time (GVariant *dict, const char *key)
{
  gint64 usec = 0;

  g_assert_true (box_time_parse (lookup_str (dict, key), &usec));
  g_assert_cmpint (usec, >, 0);
}

/* ---- GetStatus --------------------------------------------------------- */

static void
test_status (void)
{
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GVariant) status = NULL;
  g_autoptr(GVariant) plugins = NULL;
  g_autoptr(GError) error = NULL;
  const char *accel;
  gboolean saw_sqlite = FALSE, saw_keys = FALSE, saw_dummy = FALSE;
  const char *name, *path, *ifaces;
  GVariantIter iter;
  const char *key;
  GVariant *value;

  box_dbus_admin1_call_get_status (proxy, NULL, got_result_cb, &result);
  box_dbus_admin1_call_get_status_finish (proxy, &status, await_result (&result), &error);
  g_assert_no_error (error);
  g_assert_true (g_variant_is_of_type (status, G_VARIANT_TYPE_VARDICT));

  g_assert_cmpstr (lookup_str (status, "version"), ==, PACKAGE_VERSION);
  g_assert_cmpstr (lookup_str (status, "hypervisor"), ==, "dummy");
  /* the dummy hypervisor says tcg here (setup): TCG is no security boundary */
  accel = lookup_str (status, "accel");
  g_assert_cmpstr (accel, ==, "tcg");
  g_assert_nonnull (strstr (lookup_str (status, "accel-warning"), "not a security boundary"));
  g_assert_cmpstr (lookup_str (status, "storage"), ==, "sqlite");
  g_assert_cmpstr (lookup_str (status, "auth"), ==, "keys");
  g_assert_cmpstr (lookup_str (status, "network"), ==, "");
  /* broker=auto: the broker plugin when it started, "" when not */
  g_assert_cmpstr (lookup_str (status, "broker"), ==,
                   box_engine_get_broker (engine) != NULL
                   ? box_plugin_get_name (BOX_PLUGIN (box_engine_get_broker (engine))) : "");
  g_assert_cmpstr (lookup_str (status, "listen"), ==, "127.0.0.1:0");
  g_assert_cmpstr (lookup_str (status, "sandbox_domain"), ==, "sandbox.test");
  g_assert_cmpstr (lookup_str (status, "data_dir"), ==, data_dir);

  plugins = g_variant_lookup_value (status, "plugins", G_VARIANT_TYPE ("a(sss)"));
  g_assert_nonnull (plugins);
  g_variant_iter_init (&iter, plugins);
  while (g_variant_iter_next (&iter, "(&s&s&s)", &name, &path, &ifaces)) {
    g_auto(GStrv) split = g_strsplit (ifaces, ",", -1);

    g_assert_true (g_path_is_absolute (path));
    g_assert_true (g_str_has_suffix (path, ".so"));
    if (g_str_equal (name, "sqlite")) {
      saw_sqlite = TRUE;
      g_assert_true (g_strv_contains ((const char *const *) split, "storage"));
    } else if (g_str_equal (name, "keys")) {
      saw_keys = TRUE;
      g_assert_true (g_strv_contains ((const char *const *) split, "auth"));
    } else if (g_str_equal (name, "dummy")) {
      saw_dummy = TRUE;
      g_assert_true (g_strv_contains ((const char *const *) split, "hypervisor"));
    }
  }
  g_assert_true (saw_sqlite);
  g_assert_true (saw_keys);
  g_assert_true (saw_dummy);

  /* every other key is a started plugin's, under plugin.<name>. (the
   * secrets broker: broker=auto with a secret key) */
  g_variant_iter_init (&iter, status);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value)) {
    const char *const known[] = {
      "version", "hypervisor", "accel", "accel-warning", "plugins", "storage", "auth", "network", "broker",
      "listen",
      "sandbox_domain", "data_dir", NULL
    };

    if (!g_strv_contains (known, key)) {
      g_assert_true (g_str_has_prefix (key, "plugin.sqlite.") ||
                     g_str_has_prefix (key, "plugin.keys.") ||
                     g_str_has_prefix (key, "plugin.dummy.") ||
                     g_str_has_prefix (key, "plugin.broker."));
    }
    g_variant_unref (value);
  }
}

/* ---- projects ---------------------------------------------------------- */

static void
test_projects (void)
{
  const char *const domains[] = { "alpha.example.com", NULL };
  const char *const two[] = { "a.example.org", "b.example.org", NULL };
  const char *const none[] = { NULL };
  g_autoptr(GVariant) project = NULL;
  g_autoptr(GVariant) updated = NULL;
  g_autoptr(GVariant) cleared = NULL;
  g_autoptr(GVariant) list = NULL;
  g_autoptr(GVariant) listed = NULL;
  g_autoptr(GVariant) after = NULL;
  g_autoptr(GVariant) dup = NULL;
  g_autoptr(GVariant) bad = NULL;
  g_autoptr(GVariant) missing = NULL;
  g_autofree const char **got = NULL;
  g_autoptr(GError) error = NULL;

  project = call_create_project ("alpha", domains, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (lookup_str (project, "name"), ==, "alpha");
  g_assert_true (g_variant_lookup (project, "domains", "^a&s", &got));
  g_assert_cmpstrv (got, domains);
  assert_time (project, "created_at");

  list = call_list_projects ();
  listed = find_in_list (list, "name", "alpha");
  g_assert_nonnull (listed);
  g_assert_cmpstr (lookup_str (listed, "created_at"), ==, lookup_str (project, "created_at"));

  /* a taken name, a bad name */
  dup = call_create_project ("alpha", none, &error);
  g_assert_null (dup);
  assert_remote_error (error, "org.box.Error.AlreadyExists");
  g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);
  g_clear_error (&error);
  bad = call_create_project ("Not_A_Label", none, &error);
  g_assert_null (bad);
  assert_remote_error (error, "org.box.Error.Invalid");
  g_clear_error (&error);

  /* domains replaced, then removed */
  updated = call_set_domains ("alpha", two, &error);
  g_assert_no_error (error);
  g_clear_pointer (&got, g_free);
  g_assert_true (g_variant_lookup (updated, "domains", "^a&s", &got));
  g_assert_cmpstrv (got, two);
  cleared = call_set_domains ("alpha", none, &error);
  g_assert_no_error (error);
  g_clear_pointer (&got, g_free);
  g_assert_true (g_variant_lookup (cleared, "domains", "^a&s", &got));
  g_assert_cmpuint (g_strv_length ((char **) got), ==, 0);
  missing = call_set_domains ("nosuch", two, &error);
  g_assert_null (missing);
  assert_remote_error (error, "org.box.Error.NotFound");
  g_clear_error (&error);

  /* deleted, and gone */
  g_assert_true (call_delete_project ("alpha", &error));
  g_assert_no_error (error);
  after = call_list_projects ();
  g_assert_null (find_in_list (after, "name", "alpha"));
  g_assert_false (call_delete_project ("alpha", &error));
  assert_remote_error (error, "org.box.Error.NotFound");
}

/* ---- keys -------------------------------------------------------------- */

static void
test_keys (void)
{
  const char *const none[] = { NULL };
  g_autoptr(GVariant) project = NULL;
  g_autoptr(GVariant) key = NULL;
  g_autoptr(GVariant) keys = NULL;
  g_autoptr(GVariant) listed = NULL;
  g_autoptr(GVariant) empty = NULL;
  g_autoptr(GVariant) orphan = NULL;
  g_autoptr(GVariant) nokeys = NULL;
  g_autoptr(BoxPrincipal) principal = NULL;
  g_autoptr(BoxPrincipal) revoked = NULL;
  g_autofree char *secret = NULL;
  g_autofree char *orphan_secret = NULL;
  g_autoptr(GError) error = NULL;
  const char *key_id;
  GVariantIter iter;
  const char *field;
  GVariant *value;
  guint n_fields = 0;

  project = call_create_project ("beta", none, &error);
  g_assert_no_error (error);

  key = call_create_key ("beta", "ci runner", &secret, &error);
  g_assert_no_error (error);
  key_id = lookup_str (key, "id");
  g_assert_true (matches ("^key-[a-z2-7]{12}$", key_id));
  g_assert_cmpstr (lookup_str (key, "name"), ==, "ci runner");
  g_assert_cmpstr (lookup_str (key, "project"), ==, "beta");
  assert_time (key, "created_at");
  g_assert_true (matches ("^box_[a-z2-7]{32}$", secret));

  /* the secret works as the project's key */
  principal = box_engine_authenticate (engine, secret, &error);
  g_assert_no_error (error);
  g_assert_cmpint (principal->kind, ==, BOX_PRINCIPAL_KEY);
  g_assert_cmpstr (principal->project, ==, "beta");

  /* listed without its secret: exactly id, name, project, created_at */
  keys = call_list_keys ("beta", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (keys), ==, 1);
  listed = g_variant_get_child_value (keys, 0);
  g_variant_iter_init (&iter, listed);
  while (g_variant_iter_next (&iter, "{&sv}", &field, &value)) {
    const char *const allowed[] = { "id", "name", "project", "created_at", NULL };

    g_assert_true (g_strv_contains (allowed, field));
    g_assert_true (g_variant_is_of_type (value, G_VARIANT_TYPE_STRING));
    g_assert_null (strstr (g_variant_get_string (value, NULL), secret));
    n_fields++;
    g_variant_unref (value);
  }
  g_assert_cmpuint (n_fields, ==, 4);
  g_assert_cmpstr (lookup_str (listed, "id"), ==, key_id);

  /* unknown projects */
  nokeys = call_list_keys ("nosuch", &error);
  g_assert_null (nokeys);
  assert_remote_error (error, "org.box.Error.NotFound");
  g_clear_error (&error);
  orphan = call_create_key ("nosuch", "x", &orphan_secret, &error);
  g_assert_null (orphan);
  assert_remote_error (error, "org.box.Error.NotFound");
  g_clear_error (&error);

  /* revoked: gone from the list, refused at once, and gone for good */
  g_assert_true (call_delete_key ("beta", key_id, &error));
  g_assert_no_error (error);
  empty = call_list_keys ("beta", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (empty), ==, 0);
  revoked = box_engine_authenticate (engine, secret, &error);
  g_assert_null (revoked);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNAUTHORIZED);
  g_clear_error (&error);
  g_assert_false (call_delete_key ("beta", key_id, &error));
  assert_remote_error (error, "org.box.Error.NotFound");
  g_clear_error (&error);

  g_assert_true (call_delete_project ("beta", &error));
  g_assert_no_error (error);
}

/* ---- sandboxes --------------------------------------------------------- */

static void
test_sandboxes (void)
{
  const char *const none[] = { NULL };
  g_autoptr(GVariant) p1 = NULL;
  g_autoptr(GVariant) p2 = NULL;
  g_autoptr(GVariant) before = NULL;
  g_autoptr(GVariant) list = NULL;
  g_autoptr(GVariant) web = NULL;
  g_autoptr(GVariant) db = NULL;
  g_autoptr(GVariant) after = NULL;
  g_autoptr(GError) error = NULL;
  guint32 cpus = 0, memory = 0, disk = 0;
  const char *state;

  before = call_list_sandboxes ();
  g_assert_cmpuint (g_variant_n_children (before), ==, 0);

  p1 = call_create_project ("gamma", none, &error);
  g_assert_no_error (error);
  p2 = call_create_project ("delta", none, &error);
  g_assert_no_error (error);
  create_sandbox ("gamma", "{\"name\": \"web\"}");
  create_sandbox ("delta", "{\"name\": \"db\"}");

  /* both projects, one list */
  list = call_list_sandboxes ();
  g_assert_cmpuint (g_variant_n_children (list), ==, 2);
  web = find_in_list (list, "name", "web");
  g_assert_nonnull (web);
  g_assert_true (matches ("^sb-[a-z2-7]{12}$", lookup_str (web, "id")));
  g_assert_cmpstr (lookup_str (web, "project"), ==, "gamma");
  state = lookup_str (web, "state");
  g_assert_true (g_str_equal (state, "running") || g_str_equal (state, "creating"));
  g_assert_cmpstr (lookup_str (web, "template"), ==, "base");
  g_assert_cmpstr (lookup_str (web, "image"), ==, "");
  g_assert_true (g_variant_lookup (web, "cpus", "u", &cpus));
  g_assert_true (g_variant_lookup (web, "memory_mib", "u", &memory));
  g_assert_true (g_variant_lookup (web, "disk_gib", "u", &disk));
  g_assert_cmpuint (cpus, >, 0);
  g_assert_cmpuint (memory, >, 0);
  g_assert_cmpuint (disk, >, 0);
  assert_time (web, "created_at");
  db = find_in_list (list, "name", "db");
  g_assert_nonnull (db);
  g_assert_cmpstr (lookup_str (db, "project"), ==, "delta");

  /* deleting a project over D-Bus takes its sandboxes along */
  g_assert_true (call_delete_project ("gamma", &error));
  g_assert_no_error (error);
  after = call_list_sandboxes ();
  g_assert_cmpuint (g_variant_n_children (after), ==, 1);
  g_assert_null (find_in_list (after, "project", "gamma"));
  g_assert_true (call_delete_project ("delta", &error));
  g_assert_no_error (error);
}

/* ---- quotas ------------------------------------------------------------ */

static void
call_get_quota (const char *name, GVariant **quota, GVariant **usage, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;

  box_dbus_admin1_call_get_project_quota (proxy, name, NULL, got_result_cb, &result);
  box_dbus_admin1_call_get_project_quota_finish (proxy, quota, usage, await_result (&result), error);
}

static guint64
lookup_u64 (GVariant *dict, const char *key)
{
  guint64 value = G_MAXUINT64;

  g_assert_true (g_variant_lookup (dict, key, "t", &value));
  return value;
}

static guint32
lookup_u32 (GVariant *dict, const char *key)
{
  guint32 value = G_MAXUINT32;

  g_assert_true (g_variant_lookup (dict, key, "u", &value));
  return value;
}

/* setup() configures [quota] cpus=16 and [quota.epsilon] sandboxes=2,
 * memory_mib=4096 */
static void
test_quota (void)
{
  const char *const none[] = { NULL };
  g_autoptr(GVariant) p1 = NULL;
  g_autoptr(GVariant) p2 = NULL;
  g_autoptr(GVariant) quota = NULL;
  g_autoptr(GVariant) usage = NULL;
  g_autoptr(GVariant) other_quota = NULL;
  g_autoptr(GVariant) other_usage = NULL;
  g_autoptr(GVariant) missing_quota = NULL;
  g_autoptr(GVariant) missing_usage = NULL;
  g_autoptr(GError) error = NULL;

  p1 = call_create_project ("epsilon", none, &error);
  g_assert_no_error (error);
  p2 = call_create_project ("zeta", none, &error);
  g_assert_no_error (error);

  /* nothing held yet; the project's group over [quota] */
  call_get_quota ("epsilon", &quota, &usage, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (lookup_u32 (quota, "sandboxes"), ==, 2);
  g_assert_cmpuint (lookup_u64 (quota, "cpus"), ==, 16);
  g_assert_cmpuint (lookup_u64 (quota, "memory_mib"), ==, 4096);
  g_assert_cmpuint (lookup_u64 (quota, "disk_gib"), ==, 0);
  g_assert_cmpuint (lookup_u32 (usage, "sandboxes"), ==, 0);
  g_assert_cmpuint (lookup_u64 (usage, "cpus"), ==, 0);
  g_assert_cmpuint (lookup_u64 (usage, "memory_mib"), ==, 0);
  g_assert_cmpuint (lookup_u64 (usage, "disk_mib"), ==, 0);
  g_clear_pointer (&quota, g_variant_unref);
  g_clear_pointer (&usage, g_variant_unref);

  /* two sandboxes counted as create counts them: disk at full size plus
   * memory (the snapshot a pause writes) */
  create_sandbox ("epsilon", "{\"name\": \"a\", \"resources\": {\"cpus\": 2, "
                  "\"memory_mib\": 1024, \"disk_gib\": 4}}");
  create_sandbox ("epsilon", "{\"name\": \"b\", \"resources\": {\"cpus\": 1, "
                  "\"memory_mib\": 512, \"disk_gib\": 2}}");
  call_get_quota ("epsilon", &quota, &usage, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (lookup_u32 (usage, "sandboxes"), ==, 2);
  g_assert_cmpuint (lookup_u64 (usage, "cpus"), ==, 3);
  g_assert_cmpuint (lookup_u64 (usage, "memory_mib"), ==, 1536);
  g_assert_cmpuint (lookup_u64 (usage, "disk_mib"), ==, 6 * 1024 + 1536);

  /* another project: [quota] only, and nothing of epsilon's */
  call_get_quota ("zeta", &other_quota, &other_usage, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (lookup_u32 (other_quota, "sandboxes"), ==, 0);
  g_assert_cmpuint (lookup_u64 (other_quota, "cpus"), ==, 16);
  g_assert_cmpuint (lookup_u64 (other_quota, "memory_mib"), ==, 0);
  g_assert_cmpuint (lookup_u32 (other_usage, "sandboxes"), ==, 0);
  g_assert_cmpuint (lookup_u64 (other_usage, "cpus"), ==, 0);

  /* no such project */
  call_get_quota ("nosuch", &missing_quota, &missing_usage, &error);
  assert_remote_error (error, "org.box.Error.NotFound");
  g_assert_null (missing_quota);
  g_clear_error (&error);

  g_assert_true (call_delete_project ("epsilon", &error));
  g_assert_no_error (error);
  g_assert_true (call_delete_project ("zeta", &error));
  g_assert_no_error (error);
}

/* ---- the gate ---------------------------------------------------------- */

static gboolean
new_peer_cb (GDBusServer *server, GDBusConnection *connection, gpointer user_data)
{
  GPtrArray *peers = user_data;
  g_autoptr(BoxDBusDaemon) peer_daemon = box_dbus_daemon_new (engine);
  g_autoptr(GError) error = NULL;

  g_assert_true (box_dbus_daemon_start (peer_daemon, G_BUS_TYPE_SESSION, connection, &error));
  g_assert_no_error (error);
  g_ptr_array_add (peers, g_steal_pointer (&peer_daemon));
  return TRUE;
}

static void
become_nobody (gpointer user_data)
{
  /* after fork, before exec: only async-signal-safe calls */
  if (setgroups (0, NULL) != 0 || setgid (65534) != 0 || setuid (65534) != 0)
    _exit (127);
}

/* The client half of the gate test, run as a subprocess (maybe as nobody):
 * calls GetStatus over a peer-to-peer connection to @address; prints the
 * D-Bus error name and message on failure. */
static int
peer_call_main (const char *address)
{
  g_autoptr(GDBusConnection) connection = NULL;
  g_autoptr(GVariant) reply = NULL;
  g_autoptr(GError) error = NULL;

  connection = g_dbus_connection_new_for_address_sync (address,
                                                       G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT,
                                                       NULL, NULL, &error);
  if (connection != NULL)
    reply = g_dbus_connection_call_sync (connection, NULL, BOX_DBUS_PATH, BOX_DBUS_NAME,
                                         "GetStatus", NULL, G_VARIANT_TYPE ("(a{sv})"),
                                         G_DBUS_CALL_FLAGS_NONE, -1, NULL, &error);
  if (reply == NULL) {
    g_autofree char *remote = g_dbus_error_get_remote_error (error);

    g_printerr ("%s\n%s\n", remote != NULL ? remote : "(local)", error->message);
    return 1;
  }
  return 0;
}

/* Runs this binary's peer_call_main() at @address, as nobody when @as_nobody. */
static void
peer_get_status (const char *address, gboolean as_nobody, int *exit_status, char **err_out)
{
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *self_exe = g_file_read_link ("/proc/self/exe", &error);

  g_assert_no_error (error);
  if (as_nobody)
    g_subprocess_launcher_set_child_setup (launcher, become_nobody, NULL, NULL);
  process = g_subprocess_launcher_spawn (launcher, &error, self_exe, "--peer-call", address, NULL);
  g_assert_no_error (error);
  /* the daemon answers on this thread: keep the context running meanwhile */
  g_subprocess_communicate_utf8_async (process, NULL, NULL, got_result_cb, &result);
  g_subprocess_communicate_utf8_finish (process, await_result (&result), NULL, err_out, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (process));
  *exit_status = g_subprocess_get_exit_status (process);
  g_test_message ("GetStatus over a peer connection%s: exit %d %s",
                  as_nobody ? " as nobody" : "", *exit_status, *err_out);
}

static void
test_gate_refuses_other_users (void)
{
  g_autoptr(GPtrArray) peers = g_ptr_array_new_with_free_func (g_object_unref);
  g_autofree char *dir = NULL;
  g_autofree char *socket_path = NULL;
  g_autofree char *address = NULL;
  g_autofree char *guid = g_dbus_generate_guid ();
  g_autofree char *own_err = NULL;
  g_autofree char *nobody_err = NULL;
  g_autoptr(GDBusServer) server = NULL;
  g_autoptr(GError) error = NULL;
  int status = -1;

  if (getuid () != 0) {
    g_test_skip ("needs root to call as another user");
    return;
  }

  dir = g_dir_make_tmp ("box-dbus-gate-XXXXXX", &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_chmod (dir, 0755), ==, 0);
  socket_path = g_build_filename (dir, "admin", NULL);
  address = g_strdup_printf ("unix:path=%s", socket_path);
  server = g_dbus_server_new_sync (address, G_DBUS_SERVER_FLAGS_NONE, guid, NULL, NULL, &error);
  g_assert_no_error (error);
  g_signal_connect (server, "new-connection", G_CALLBACK (new_peer_cb), peers);
  g_dbus_server_start (server);
  g_assert_cmpint (g_chmod (socket_path, 0777), ==, 0);

  /* root (this process's user) passes the gate ... */
  peer_get_status (address, FALSE, &status, &own_err);
  g_assert_cmpint (status, ==, 0);

  /* ... nobody does not, whatever the method */
  peer_get_status (address, TRUE, &status, &nobody_err);
  g_assert_cmpint (status, !=, 0);
  g_assert_nonnull (strstr (nobody_err, "org.freedesktop.DBus.Error.AccessDenied"));
  g_assert_nonnull (strstr (nobody_err, "only root or the boxd user may administer box"));

  g_dbus_server_stop (server);
  for (guint i = 0; i < peers->len; i++)
    box_dbus_daemon_stop (g_ptr_array_index (peers, i));
  g_unlink (socket_path);
  g_rmdir (dir);
}

/* ---- set-up ------------------------------------------------------------ */

int
main (int argc, char **argv)
{
  int status;

  if (argc == 3 && g_str_equal (argv[1], "--peer-call"))
    return peer_call_main (argv[2]);

  g_test_init (&argc, &argv, NULL);

  fixture_setup ();
  g_test_add_func ("/dbus/status", test_status);
  g_test_add_func ("/dbus/projects", test_projects);
  g_test_add_func ("/dbus/keys", test_keys);
  g_test_add_func ("/dbus/sandboxes", test_sandboxes);
  g_test_add_func ("/dbus/quota", test_quota);
  g_test_add_func ("/dbus/gate/refuses-other-users", test_gate_refuses_other_users);
  status = g_test_run ();
  fixture_teardown ();
  return status;
}
