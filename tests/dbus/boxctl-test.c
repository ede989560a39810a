/* boxctl-test.c: the real boxctl against the real boxd on a private bus.
 *
 * A GTestDBus session bus; boxd runs as a subprocess with --session-bus,
 * the dummy hypervisor and the build tree's plugins; each test runs
 * `boxctl --session ...` and checks its output and exit status (0 ok,
 * 1 daemon error, 2 usage, 3 boxd unreachable).  The one sandbox is made
 * over boxd's HTTP API with a key boxctl created.
 */
#include "config.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

static GTestDBus   *test_bus;
static GSubprocess *boxd;
static char        *data_dir;
static char        *boxctl_path;
static guint16      http_port;

typedef struct {
  int   status;
  char *out;
  char *err;
} BoxctlRun;

static void
boxctl_run_clear (BoxctlRun *run)
{
  g_clear_pointer (&run->out, g_free);
  g_clear_pointer (&run->err, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (BoxctlRun, boxctl_run_clear)

static char *
build_path (const char *relative)
{
  const char *root = g_getenv ("BOX_BUILD_ROOT");

  g_assert_nonnull (root);
  return g_build_filename (root, relative, NULL);
}

/* Runs boxctl with the NULL-terminated arguments after argv[0]. */
static void
boxctl (BoxctlRun *run, const char *first, ...)
{
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;
  va_list ap;

  /* untranslated and UTF-8, whatever the caller's locale */
  g_subprocess_launcher_setenv (launcher, "LC_ALL", "C.UTF-8", TRUE);
  g_ptr_array_add (argv, boxctl_path);
  va_start (ap, first);
  for (const char *arg = first; arg != NULL; arg = va_arg (ap, const char *))
    g_ptr_array_add (argv, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (argv, NULL);

  process = g_subprocess_launcher_spawnv (launcher, (const char *const *) argv->pdata, &error);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (process, NULL, NULL, &run->out, &run->err, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (process));
  run->status = g_subprocess_get_exit_status (process);
  g_test_message ("boxctl %s -> %d\nstdout: %s\nstderr: %s", first, run->status, run->out,
                  run->err);
}

static JsonNode *
parse_json (const char *text)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_data (parser, text, -1, &error);
  g_assert_no_error (error);
  return json_node_copy (json_parser_get_root (parser));
}

static gboolean
name_has_owner (GDBusConnection *connection, const char *name)
{
  g_autoptr(GVariant) reply = NULL;
  g_autoptr(GError) error = NULL;
  gboolean owned = FALSE;

  reply = g_dbus_connection_call_sync (connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "NameHasOwner",
                                       g_variant_new ("(s)", name), G_VARIANT_TYPE ("(b)"),
                                       G_DBUS_CALL_FLAGS_NONE, -1, NULL, &error);
  g_assert_no_error (error);
  g_variant_get (reply, "(b)", &owned);
  return owned;
}

/* ---- without boxd ------------------------------------------------------ */

static void
test_usage (void)
{
  g_auto(BoxctlRun) help = { 0 };
  g_auto(BoxctlRun) none = { 0 };
  g_auto(BoxctlRun) unknown = { 0 };
  g_auto(BoxctlRun) missing = { 0 };
  g_auto(BoxctlRun) extra = { 0 };
  g_auto(BoxctlRun) bad_option = { 0 };
  g_auto(BoxctlRun) stray_domain = { 0 };

  boxctl (&help, "--help", NULL);
  g_assert_cmpint (help.status, ==, 0);
  g_assert_nonnull (strstr (help.out, "project-create"));
  g_assert_nonnull (strstr (help.out, "key-create"));
  g_assert_nonnull (strstr (help.out, "--json"));

  boxctl (&none, NULL);
  g_assert_cmpint (none.status, ==, 2);
  boxctl (&unknown, "--session", "frobnicate", NULL);
  g_assert_cmpint (unknown.status, ==, 2);
  g_assert_nonnull (strstr (unknown.err, "frobnicate"));
  boxctl (&missing, "--session", "keys", NULL);
  g_assert_cmpint (missing.status, ==, 2);
  g_assert_nonnull (strstr (help.out, "egress SANDBOX"));
  boxctl (&extra, "--session", "key-delete", "a", "b", "c", NULL);
  g_assert_cmpint (extra.status, ==, 2);
  boxctl (&bad_option, "--session", "--bogus", "status", NULL);
  g_assert_cmpint (bad_option.status, ==, 2);
  boxctl (&stray_domain, "--session", "projects", "--domain", "x.example", NULL);
  g_assert_cmpint (stray_domain.status, ==, 2);
}

static void
test_unreachable (void)
{
  g_auto(BoxctlRun) run = { 0 };
  g_auto(BoxctlRun) json = { 0 };

  g_assert_null (boxd);
  boxctl (&run, "--session", "status", NULL);
  g_assert_cmpint (run.status, ==, 3);
  g_assert_nonnull (strstr (run.err, "boxd is not running"));
  boxctl (&json, "--session", "--json", "projects", NULL);
  g_assert_cmpint (json.status, ==, 3);
}

/* ---- against boxd ------------------------------------------------------ */

/* A port nobody listens on right now, for boxd's HTTP API. */
static guint16
pick_free_port (void)
{
  g_autoptr(GSocket) socket = NULL;
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr(GSocketAddress) bound = NULL;
  g_autoptr(GError) error = NULL;

  socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &error);
  g_assert_no_error (error);
  g_socket_bind (socket, any, FALSE, &error);
  g_assert_no_error (error);
  bound = g_socket_get_local_address (socket, &error);
  g_assert_no_error (error);
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

/* A plain HTTP/1.1 POST to boxd; returns the status code. */
static guint
http_post (const char *path, const char *bearer, const char *body)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) connection = NULL;
  g_autoptr(GString) reply = g_string_new (NULL);
  g_autofree char *request = NULL;
  g_autoptr(GError) error = NULL;
  char buffer[4096];
  gssize n;
  guint status = 0;

  connection = g_socket_client_connect_to_host (client, "127.0.0.1", http_port, NULL, &error);
  g_assert_no_error (error);
  request = g_strdup_printf ("POST %s HTTP/1.1\r\n"
                             "Host: 127.0.0.1:%u\r\n"
                             "Authorization: Bearer %s\r\n"
                             "Content-Type: application/json\r\n"
                             "Content-Length: %" G_GSIZE_FORMAT "\r\n"
                             "Connection: close\r\n"
                             "\r\n"
                             "%s",
                             path, http_port, bearer, strlen (body), body);
  g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (connection)),
                             request, strlen (request), NULL, NULL, &error);
  g_assert_no_error (error);
  while ((n = g_input_stream_read (g_io_stream_get_input_stream (G_IO_STREAM (connection)),
                                   buffer, sizeof buffer, NULL, &error)) > 0)
    g_string_append_len (reply, buffer, n);
  g_assert_no_error (error);
  g_test_message ("POST %s -> %s", path, reply->str);
  g_assert_true (g_str_has_prefix (reply->str, "HTTP/1.1 "));
  status = (guint) g_ascii_strtoull (reply->str + strlen ("HTTP/1.1 "), NULL, 10);
  return status;
}

static gboolean boxd_exited;

static void
boxd_exited_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  boxd_exited = TRUE;
}

static void
die_with_parent (gpointer user_data)
{
  /* no boxd outlives a test that aborted half-way */
  prctl (PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
}

static void
start_boxd (void)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr(GDBusConnection) connection = NULL;
  g_autofree char *boxd_path = build_path ("core/boxd");
  const char *plugin_dir = g_getenv ("BOX_PLUGIN_DIR");
  g_autoptr(GError) error = NULL;
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  g_autofree char *listen = NULL;
  g_autofree char *config = NULL;

  if (plugin_dir == NULL)
    plugin_dir = BOX_BUILD_PLUGINDIR;
  /* boxd's log goes to our stderr: stdout carries TAP */
  g_subprocess_launcher_take_stdout_fd (launcher, dup (STDERR_FILENO));
  g_subprocess_launcher_setenv (launcher, "BOX_ADMIN_TOKEN", "boxctl-test-admin-token-0123", TRUE);
  g_subprocess_launcher_set_child_setup (launcher, die_with_parent, NULL, NULL);
  http_port = pick_free_port ();
  listen = g_strdup_printf ("127.0.0.1:%u", http_port);
  /* the dummy hypervisor says it runs VMs under TCG: status warns */
  config = g_build_filename (data_dir, "boxd.conf", NULL);
  g_assert_true (g_file_set_contents (config, "[plugin.dummy]\naccel=tcg\n"
                                      "[quota.boxes]\nsandboxes=5\ndisk_gib=0\n", -1, NULL));
  boxd = g_subprocess_launcher_spawn (launcher, &error, boxd_path,
                                      "--config", config,
                                      "--data-dir", data_dir,
                                      "--listen", listen,
                                      "--session-bus",
                                      "--hypervisor", "dummy",
                                      "--plugin-dir", plugin_dir,
                                      NULL);
  g_assert_no_error (error);
  g_subprocess_wait_async (boxd, NULL, boxd_exited_cb, NULL);

  connection = g_bus_get_sync (G_BUS_TYPE_SESSION, NULL, &error);
  g_assert_no_error (error);
  while (!name_has_owner (connection, "org.box.Admin1")) {
    while (g_main_context_iteration (NULL, FALSE))
      ;
    if (boxd_exited)
      g_error ("boxd exited before owning org.box.Admin1");
    if (g_get_monotonic_time () > deadline)
      g_error ("boxd did not own org.box.Admin1 within 30 s");
    g_usleep (20 * 1000);
  }
}

static void
stop_boxd (void)
{
  g_autoptr(GError) error = NULL;

  if (boxd == NULL)
    return;
  g_subprocess_send_signal (boxd, SIGTERM);
  g_subprocess_wait (boxd, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (boxd));
  g_assert_cmpint (g_subprocess_get_exit_status (boxd), ==, 0);
  g_clear_object (&boxd);
}

static void
test_status (void)
{
  g_auto(BoxctlRun) run = { 0 };
  g_auto(BoxctlRun) json = { 0 };
  g_autoptr(JsonNode) root = NULL;
  JsonObject *status;
  JsonArray *plugins;
  gboolean saw_dummy = FALSE;

  boxctl (&run, "--session", "status", NULL);
  g_assert_cmpint (run.status, ==, 0);
  g_assert_nonnull (strstr (run.out, PACKAGE_VERSION));
  g_assert_nonnull (strstr (run.out, "dummy"));
  g_assert_nonnull (strstr (run.out, "sqlite"));
  g_assert_nonnull (strstr (run.out, data_dir));
  /* TCG is no security boundary: said where an operator looks */
  g_assert_nonnull (strstr (run.out, "(acceleration: tcg)"));
  g_assert_nonnull (strstr (run.out, "Warning: TCG is not a security boundary"));

  boxctl (&json, "--session", "--json", "status", NULL);
  g_assert_cmpint (json.status, ==, 0);
  root = parse_json (json.out);
  status = json_node_get_object (root);
  g_assert_cmpstr (json_object_get_string_member (status, "version"), ==, PACKAGE_VERSION);
  g_assert_cmpstr (json_object_get_string_member (status, "hypervisor"), ==, "dummy");
  g_assert_cmpstr (json_object_get_string_member (status, "storage"), ==, "sqlite");
  g_assert_nonnull (strstr (json_object_get_string_member (status, "accel-warning"),
                            "not a security boundary"));
  g_assert_cmpstr (json_object_get_string_member (status, "auth"), ==, "keys");
  g_assert_cmpstr (json_object_get_string_member (status, "data_dir"), ==, data_dir);
  plugins = json_object_get_array_member (status, "plugins");
  for (guint i = 0; i < json_array_get_length (plugins); i++) {
    JsonObject *plugin = json_array_get_object_element (plugins, i);

    g_assert_true (json_object_has_member (plugin, "path"));
    g_assert_true (json_object_has_member (plugin, "interfaces"));
    if (g_strcmp0 (json_object_get_string_member (plugin, "name"), "dummy") == 0)
      saw_dummy = TRUE;
  }
  g_assert_true (saw_dummy);
}

static JsonObject *
find_project (JsonNode *root, const char *name)
{
  JsonArray *projects = json_object_get_array_member (json_node_get_object (root), "projects");

  for (guint i = 0; i < json_array_get_length (projects); i++) {
    JsonObject *project = json_array_get_object_element (projects, i);

    if (g_strcmp0 (json_object_get_string_member (project, "name"), name) == 0)
      return project;
  }
  return NULL;
}

static void
test_projects (void)
{
  g_auto(BoxctlRun) create = { 0 };
  g_auto(BoxctlRun) list = { 0 };
  g_auto(BoxctlRun) table = { 0 };
  g_auto(BoxctlRun) dup = { 0 };
  g_auto(BoxctlRun) bad = { 0 };
  g_auto(BoxctlRun) domains = { 0 };
  g_auto(BoxctlRun) del = { 0 };
  g_auto(BoxctlRun) again = { 0 };
  g_auto(BoxctlRun) after = { 0 };
  g_autoptr(JsonNode) listed = NULL;
  g_autoptr(JsonNode) dup_json = NULL;
  g_autoptr(JsonNode) bad_json = NULL;
  g_autoptr(JsonNode) domains_json = NULL;
  g_autoptr(JsonNode) after_json = NULL;
  JsonObject *demo;
  JsonArray *array;

  boxctl (&create, "--session", "project-create", "demo", "--domain", "demo.example.com",
          "--domain", "demo.example.org", NULL);
  g_assert_cmpint (create.status, ==, 0);
  g_assert_nonnull (strstr (create.out, "demo"));

  boxctl (&list, "--session", "--json", "projects", NULL);
  g_assert_cmpint (list.status, ==, 0);
  listed = parse_json (list.out);
  demo = find_project (listed, "demo");
  g_assert_nonnull (demo);
  array = json_object_get_array_member (demo, "domains");
  g_assert_cmpuint (json_array_get_length (array), ==, 2);
  g_assert_cmpstr (json_array_get_string_element (array, 0), ==, "demo.example.com");
  g_assert_true (json_object_has_member (demo, "created_at"));

  boxctl (&table, "--session", "projects", NULL);
  g_assert_cmpint (table.status, ==, 0);
  g_assert_nonnull (strstr (table.out, "NAME"));
  g_assert_nonnull (strstr (table.out, "demo.example.com, demo.example.org"));

  /* errors from boxd: exit 1, a message, and the code with --json */
  boxctl (&dup, "--session", "--json", "project-create", "demo", NULL);
  g_assert_cmpint (dup.status, ==, 1);
  g_assert_cmpstr (dup.err, !=, "");
  dup_json = parse_json (dup.out);
  g_assert_cmpstr (json_object_get_string_member (
                     json_object_get_object_member (json_node_get_object (dup_json), "error"),
                     "code"), ==, "already_exists");
  boxctl (&bad, "--session", "--json", "project-create", "Bad_Name", NULL);
  g_assert_cmpint (bad.status, ==, 1);
  bad_json = parse_json (bad.out);
  g_assert_cmpstr (json_object_get_string_member (
                     json_object_get_object_member (json_node_get_object (bad_json), "error"),
                     "code"), ==, "invalid");

  boxctl (&domains, "--session", "--json", "project-domains", "demo", "only.example.net", NULL);
  g_assert_cmpint (domains.status, ==, 0);
  domains_json = parse_json (domains.out);
  array = json_object_get_array_member (json_node_get_object (domains_json), "domains");
  g_assert_cmpuint (json_array_get_length (array), ==, 1);
  g_assert_cmpstr (json_array_get_string_element (array, 0), ==, "only.example.net");

  boxctl (&del, "--session", "project-delete", "demo", NULL);
  g_assert_cmpint (del.status, ==, 0);
  boxctl (&again, "--session", "project-delete", "demo", NULL);
  g_assert_cmpint (again.status, ==, 1);
  g_assert_cmpstr (again.err, !=, "");
  boxctl (&after, "--session", "--json", "projects", NULL);
  g_assert_cmpint (after.status, ==, 0);
  after_json = parse_json (after.out);
  g_assert_null (find_project (after_json, "demo"));
}

static void
test_keys (void)
{
  g_auto(BoxctlRun) project = { 0 };
  g_auto(BoxctlRun) create = { 0 };
  g_auto(BoxctlRun) table = { 0 };
  g_auto(BoxctlRun) list = { 0 };
  g_auto(BoxctlRun) del = { 0 };
  g_auto(BoxctlRun) empty = { 0 };
  g_auto(BoxctlRun) again = { 0 };
  g_auto(BoxctlRun) cleanup = { 0 };
  g_autoptr(JsonNode) list_json = NULL;
  g_autoptr(JsonNode) empty_json = NULL;
  g_auto(GStrv) lines = NULL;
  g_autofree char *secret = NULL;
  g_autofree char *key_id = NULL;
  g_autoptr(GMatchInfo) match = NULL;
  g_autoptr(GRegex) id_regex = g_regex_new ("key-[a-z2-7]{12}", 0, 0, NULL);
  JsonArray *keys;
  JsonObject *key;

  boxctl (&project, "--session", "project-create", "keyed", NULL);
  g_assert_cmpint (project.status, ==, 0);

  boxctl (&create, "--session", "key-create", "keyed", "ci", NULL);
  g_assert_cmpint (create.status, ==, 0);
  /* the secret on a line of its own, and the warning that it is shown once */
  lines = g_strsplit (create.out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    if (g_regex_match_simple ("^box_[a-z2-7]{32}$", lines[i], 0, 0))
      secret = g_strdup (lines[i]);
  }
  g_assert_nonnull (secret);
  g_assert_nonnull (strstr (create.out, "only"));
  g_assert_true (g_regex_match (id_regex, create.out, 0, &match));
  key_id = g_match_info_fetch (match, 0);

  boxctl (&table, "--session", "keys", "keyed", NULL);
  g_assert_cmpint (table.status, ==, 0);
  g_assert_nonnull (strstr (table.out, key_id));
  g_assert_null (strstr (table.out, secret));

  boxctl (&list, "--session", "--json", "keys", "keyed", NULL);
  g_assert_cmpint (list.status, ==, 0);
  g_assert_null (strstr (list.out, secret));
  list_json = parse_json (list.out);
  keys = json_object_get_array_member (json_node_get_object (list_json), "keys");
  g_assert_cmpuint (json_array_get_length (keys), ==, 1);
  key = json_array_get_object_element (keys, 0);
  g_assert_cmpstr (json_object_get_string_member (key, "id"), ==, key_id);
  g_assert_cmpstr (json_object_get_string_member (key, "name"), ==, "ci");
  g_assert_cmpstr (json_object_get_string_member (key, "project"), ==, "keyed");
  g_assert_false (json_object_has_member (key, "secret"));

  boxctl (&del, "--session", "key-delete", "keyed", key_id, NULL);
  g_assert_cmpint (del.status, ==, 0);
  boxctl (&empty, "--session", "--json", "keys", "keyed", NULL);
  g_assert_cmpint (empty.status, ==, 0);
  empty_json = parse_json (empty.out);
  keys = json_object_get_array_member (json_node_get_object (empty_json), "keys");
  g_assert_cmpuint (json_array_get_length (keys), ==, 0);
  boxctl (&again, "--session", "key-delete", "keyed", key_id, NULL);
  g_assert_cmpint (again.status, ==, 1);

  boxctl (&cleanup, "--session", "project-delete", "keyed", NULL);
  g_assert_cmpint (cleanup.status, ==, 0);
}

static JsonObject *
find_sandbox (JsonNode *root, const char *name)
{
  JsonArray *sandboxes = json_object_get_array_member (json_node_get_object (root), "sandboxes");

  for (guint i = 0; i < json_array_get_length (sandboxes); i++) {
    JsonObject *sandbox = json_array_get_object_element (sandboxes, i);

    if (g_strcmp0 (json_object_get_string_member (sandbox, "name"), name) == 0)
      return sandbox;
  }
  return NULL;
}

static void
test_sandboxes (void)
{
  g_auto(BoxctlRun) none = { 0 };
  g_auto(BoxctlRun) none_json = { 0 };
  g_auto(BoxctlRun) project = { 0 };
  g_auto(BoxctlRun) key = { 0 };
  g_auto(BoxctlRun) table = { 0 };
  g_auto(BoxctlRun) json = { 0 };
  g_auto(BoxctlRun) del = { 0 };
  g_auto(BoxctlRun) after = { 0 };
  g_auto(BoxctlRun) quota = { 0 };
  g_auto(BoxctlRun) quota_json = { 0 };
  g_auto(BoxctlRun) quota_missing = { 0 };
  g_autoptr(JsonNode) quota_root = NULL;
  JsonObject *quota_obj;
  g_autoptr(JsonNode) none_root = NULL;
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(JsonNode) after_root = NULL;
  g_autoptr(JsonNode) key_root = NULL;
  JsonObject *sandbox;
  const char *secret;

  boxctl (&none, "--session", "sandboxes", NULL);
  g_assert_cmpint (none.status, ==, 0);
  g_assert_nonnull (strstr (none.out, "No sandboxes"));
  boxctl (&none_json, "--session", "--json", "sandboxes", NULL);
  g_assert_cmpint (none_json.status, ==, 0);
  none_root = parse_json (none_json.out);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (
                      json_node_get_object (none_root), "sandboxes")), ==, 0);

  /* a sandbox made the way a user makes one: a key from boxctl, then the API */
  boxctl (&project, "--session", "project-create", "boxes", NULL);
  g_assert_cmpint (project.status, ==, 0);
  boxctl (&key, "--session", "--json", "key-create", "boxes", "maker", NULL);
  g_assert_cmpint (key.status, ==, 0);
  key_root = parse_json (key.out);
  secret = json_object_get_string_member (json_node_get_object (key_root), "secret");
  g_assert_true (g_regex_match_simple ("^box_[a-z2-7]{32}$", secret, 0, 0));
  g_assert_cmpuint (http_post ("/v1/sandboxes", secret, "{\"name\": \"web\"}"), ==, 201);

  boxctl (&table, "--session", "sandboxes", NULL);
  g_assert_cmpint (table.status, ==, 0);
  g_assert_nonnull (strstr (table.out, "STATE"));
  g_assert_nonnull (strstr (table.out, "web"));
  g_assert_nonnull (strstr (table.out, "boxes"));
  g_assert_nonnull (strstr (table.out, "sb-"));

  /* its quota ([quota.boxes] in the test's boxd.conf) and what it holds */
  boxctl (&quota, "--session", "quota", "boxes", NULL);
  g_assert_cmpint (quota.status, ==, 0);
  g_assert_true (g_regex_match_simple ("^sandboxes +1 +5$", quota.out, G_REGEX_MULTILINE, 0));
  g_assert_true (g_regex_match_simple ("^CPUs +[1-9][0-9]* +128$", quota.out, G_REGEX_MULTILINE, 0));
  g_assert_true (g_regex_match_simple ("^disk +[1-9][0-9]* MiB +no bound$", quota.out,
                                      G_REGEX_MULTILINE, 0));
  boxctl (&quota_json, "--session", "--json", "quota", "boxes", NULL);
  g_assert_cmpint (quota_json.status, ==, 0);
  quota_root = parse_json (quota_json.out);
  quota_obj = json_node_get_object (quota_root);
  g_assert_cmpstr (json_object_get_string_member (quota_obj, "project"), ==, "boxes");
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (quota_obj, "quota"),
                                               "sandboxes"), ==, 5);
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (quota_obj, "usage"),
                                               "sandboxes"), ==, 1);
  boxctl (&quota_missing, "--session", "quota", "nosuch", NULL);
  g_assert_cmpint (quota_missing.status, ==, 1);

  boxctl (&json, "--session", "--json", "sandboxes", NULL);
  g_assert_cmpint (json.status, ==, 0);
  root = parse_json (json.out);
  sandbox = find_sandbox (root, "web");
  g_assert_nonnull (sandbox);
  g_assert_cmpstr (json_object_get_string_member (sandbox, "project"), ==, "boxes");
  g_assert_cmpstr (json_object_get_string_member (sandbox, "template"), ==, "base");
  g_assert_true (g_str_has_prefix (json_object_get_string_member (sandbox, "id"), "sb-"));
  g_assert_cmpint (json_object_get_int_member (sandbox, "cpus"), >, 0);
  g_assert_cmpint (json_object_get_int_member (sandbox, "memory_mib"), >, 0);
  g_assert_true (json_object_has_member (sandbox, "state"));

  /* the project goes, and its sandbox with it */
  boxctl (&del, "--session", "project-delete", "boxes", NULL);
  g_assert_cmpint (del.status, ==, 0);
  boxctl (&after, "--session", "--json", "sandboxes", NULL);
  g_assert_cmpint (after.status, ==, 0);
  after_root = parse_json (after.out);
  g_assert_null (find_sandbox (after_root, "web"));
}

/* egress: through GetSandboxEgress and ListSandboxAllowed; a sandbox the
 * API made has no rules here (boxd answers 501 for rules until the egress
 * engine enforces them), so it is unrestricted.  The expansion of rules is
 * in box-dbus-egress-test.c. */
static void
test_egress (void)
{
  g_auto(BoxctlRun) project = { 0 };
  g_auto(BoxctlRun) key = { 0 };
  g_auto(BoxctlRun) table = { 0 };
  g_auto(BoxctlRun) json = { 0 };
  g_auto(BoxctlRun) missing = { 0 };
  g_auto(BoxctlRun) missing_json = { 0 };
  g_auto(BoxctlRun) del = { 0 };
  g_autoptr(JsonNode) key_root = NULL;
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(JsonNode) error_root = NULL;
  JsonObject *object;

  boxctl (&project, "--session", "project-create", "walls", NULL);
  g_assert_cmpint (project.status, ==, 0);
  boxctl (&key, "--session", "--json", "key-create", "walls", "maker", NULL);
  g_assert_cmpint (key.status, ==, 0);
  key_root = parse_json (key.out);
  g_assert_cmpuint (http_post ("/v1/sandboxes",
                               json_object_get_string_member (json_node_get_object (key_root),
                                                              "secret"),
                               "{\"name\": \"fort\"}"), ==, 201);

  boxctl (&table, "--session", "egress", "walls/fort", NULL);
  g_assert_cmpint (table.status, ==, 0);
  g_assert_cmpstr (table.out, ==, "Unrestricted: no egress rules, the whole internet.\n");
  boxctl (&json, "--session", "--json", "egress", "fort", NULL);
  g_assert_cmpint (json.status, ==, 0);
  root = parse_json (json.out);
  object = json_node_get_object (root);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (object, "rules")), ==, 0);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (object, "allowed")), ==,
                    0);

  boxctl (&missing, "--session", "egress", "walls/nosuch", NULL);
  g_assert_cmpint (missing.status, ==, 1);
  g_assert_cmpstr (missing.out, ==, "");
  g_assert_nonnull (strstr (missing.err, "nosuch"));
  boxctl (&missing_json, "--session", "--json", "egress", "/fort", NULL);
  g_assert_cmpint (missing_json.status, ==, 1);
  error_root = parse_json (missing_json.out);
  g_assert_cmpstr (json_object_get_string_member (
                     json_object_get_object_member (json_node_get_object (error_root), "error"),
                     "code"), ==, "invalid");

  boxctl (&del, "--session", "project-delete", "walls", NULL);
  g_assert_cmpint (del.status, ==, 0);
}

/* ---- set-up ------------------------------------------------------------ */

static void
test_start_boxd (void)
{
  start_boxd ();
  g_assert_nonnull (boxd);
}

static void
test_stop_boxd (void)
{
  stop_boxd ();
  g_assert_null (boxd);
}

static void
rm_rf (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL) {
    g_autofree char *child = g_build_filename (path, name, NULL);

    if (g_file_test (child, G_FILE_TEST_IS_DIR) && !g_file_test (child, G_FILE_TEST_IS_SYMLINK))
      rm_rf (child);
    else
      g_unlink (child);
  }
  g_rmdir (path);
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);

  test_bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  g_test_dbus_up (test_bus);
  data_dir = g_dir_make_tmp ("boxctl-test-XXXXXX", &error);
  g_assert_no_error (error);
  boxctl_path = build_path ("tools/boxctl");

  /* in order: the first two need boxd absent */
  g_test_add_func ("/boxctl/usage", test_usage);
  g_test_add_func ("/boxctl/unreachable", test_unreachable);
  g_test_add_func ("/boxctl/boxd/start", test_start_boxd);
  g_test_add_func ("/boxctl/boxd/status", test_status);
  g_test_add_func ("/boxctl/boxd/projects", test_projects);
  g_test_add_func ("/boxctl/boxd/keys", test_keys);
  g_test_add_func ("/boxctl/boxd/sandboxes", test_sandboxes);
  g_test_add_func ("/boxctl/boxd/egress", test_egress);
  g_test_add_func ("/boxctl/boxd/stop", test_stop_boxd);
  status = g_test_run ();

  if (boxd != NULL) {
    g_subprocess_force_exit (boxd);
    g_subprocess_wait (boxd, NULL, NULL);
    g_clear_object (&boxd);
  }
  g_test_dbus_down (test_bus);
  g_clear_object (&test_bus);
  rm_rf (data_dir);
  g_free (data_dir);
  g_free (boxctl_path);
  return status;
}
