/* box-http.c: configuration, HTTP requests and errors of `box`.
 *
 * One SoupSession for the whole run.  Every answer is read whole (JSON
 * answers are small); the streaming routes are in box-ws.c, box-cp.c and
 * box-events.c.  Every error goes through box_cli_fail(), which prints it
 * and picks the exit status in box_cli_exit_status().
 */
#include "config.h"

#include <string.h>
#include <unistd.h>
#include <glib/gi18n.h>

#include "box-cli.h"

#define BOX_CLI_DEFAULT_URL "http://127.0.0.1:7070"

G_DEFINE_QUARK (box-cli-error-quark, box_cli_error)

void
box_cli_clear (BoxCli *cli)
{
  g_clear_pointer (&cli->url, g_free);
  g_clear_pointer (&cli->key, g_free);
  g_clear_object (&cli->session);
}

/* ---- configuration ----------------------------------------------------- */

static char *
config_path (void)
{
  return g_build_filename (g_get_user_config_dir (), "box", "config", NULL);
}

/* An env variable when set and not empty, else the config file's value. */
static char *
setting (const char *env_name, GKeyFile *file, const char *key)
{
  const char *env = g_getenv (env_name);
  g_autofree char *value = NULL;

  if (env != NULL && env[0] != '\0')
    return g_strdup (env);
  if (file == NULL)
    return NULL;
  value = g_key_file_get_string (file, "box", key, NULL);
  if (value != NULL)
    g_strstrip (value);
  if (value == NULL || value[0] == '\0')
    return NULL;
  return g_steal_pointer (&value);
}

gboolean
box_cli_configure (BoxCli *cli, GError **error)
{
  g_autofree char *path = config_path ();
  g_autoptr(GKeyFile) file = g_key_file_new ();
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GUri) uri = NULL;
  g_autofree char *url = NULL;
  const char *scheme;

  /* the file is read only when the environment does not say everything */
  if (g_getenv ("BOX_URL") != NULL && g_getenv ("BOX_URL")[0] != '\0' &&
      g_getenv ("BOX_KEY") != NULL && g_getenv ("BOX_KEY")[0] != '\0') {
    g_clear_pointer (&file, g_key_file_unref);
  } else if (!g_key_file_load_from_file (file, path, G_KEY_FILE_NONE, &local_error)) {
    if (!g_error_matches (local_error, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL,
                   _("Cannot read the configuration file %s: %s"), path, local_error->message);
      return FALSE;
    }
    g_clear_pointer (&file, g_key_file_unref);
  }

  url = setting ("BOX_URL", file, "url");
  if (url == NULL)
    url = g_strdup (BOX_CLI_DEFAULT_URL);
  uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  scheme = uri != NULL ? g_uri_get_scheme (uri) : NULL;
  if (uri == NULL || (g_strcmp0 (scheme, "http") != 0 && g_strcmp0 (scheme, "https") != 0) ||
      g_uri_get_host (uri) == NULL || g_uri_get_host (uri)[0] == '\0') {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                 _("The API address “%s” is not an http:// or https:// URL (BOX_URL, or url= in %s)."),
                 url, path);
    return FALSE;
  }
  while (g_str_has_suffix (url, "/"))
    url[strlen (url) - 1] = '\0';
  cli->url = g_steal_pointer (&url);

  cli->key = setting ("BOX_KEY", file, "key");
  if (cli->key == NULL) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_UNREACHABLE,
                 _("No API key: set BOX_KEY, or key= in the [box] group of %s."), path);
    return FALSE;
  }

  /* no I/O timeout: creates and exec/run may take long, events never end */
  cli->session = soup_session_new_with_options ("timeout", 0, "idle-timeout", 0,
                                                "user-agent", "box/" PACKAGE_VERSION, NULL);
  return TRUE;
}

/* ---- URLs and requests ------------------------------------------------- */

char *
box_cli_url (BoxCli *cli, const char *path, const char *query)
{
  if (query == NULL || query[0] == '\0')
    return g_strconcat (cli->url, path, NULL);
  return g_strconcat (cli->url, path, "?", query, NULL);
}

char *
box_cli_sandbox_path (const char *sandbox, const char *suffix)
{
  g_autofree char *escaped = g_uri_escape_string (sandbox, NULL, FALSE);

  return g_strconcat ("/v1/sandboxes/", escaped, suffix, NULL);
}

int
box_cli_delete_each (BoxCli *cli, const char *collection, char **names, int n_names,
                     const char *conflict_hint)
{
  int status = BOX_CLI_EXIT_OK;

  for (int i = 0; i < n_names; i++) {
    g_autofree char *escaped = g_uri_escape_string (names[i], NULL, FALSE);
    g_autofree char *path = g_strdup_printf ("%s/%s", collection, escaped);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) answer = box_cli_call (cli, "DELETE", path, NULL, NULL, &error);

    if (answer == NULL) {
      int failed = box_cli_fail (cli, error);

      if (conflict_hint != NULL && g_error_matches (error, BOX_ERROR, BOX_ERROR_CONFLICT))
        g_printerr ("box: %s\n", conflict_hint);
      if (status == BOX_CLI_EXIT_OK)
        status = failed;
      continue;
    }
    g_print ("%s\n", names[i]);
  }
  return status;
}

void
box_cli_query_add (GString *query, const char *name, const char *value)
{
  g_autofree char *escaped = g_uri_escape_string (value, NULL, FALSE);

  if (query->len > 0)
    g_string_append_c (query, '&');
  g_string_append_printf (query, "%s=%s", name, escaped);
}

SoupMessage *
box_cli_message_new (BoxCli *cli, const char *method, const char *path, const char *query)
{
  g_autofree char *url = box_cli_url (cli, path, query);
  g_autofree char *auth = g_strconcat ("Bearer ", cli->key, NULL);
  SoupMessage *msg = soup_message_new (method, url);

  g_assert (msg != NULL);
  soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", auth);
  return msg;
}

/* ---- errors ------------------------------------------------------------ */

static BoxErrorCode
code_from_name (const char *name)
{
  for (guint i = 0; i < BOX_ERROR_LAST; i++) {
    if (g_strcmp0 (box_error_code_name (i), name) == 0)
      return i;
  }
  return BOX_ERROR_INTERNAL;
}

static BoxErrorCode
code_from_status (guint status)
{
  switch (status) {
  case 400: return BOX_ERROR_INVALID;
  case 401: return BOX_ERROR_UNAUTHORIZED;
  case 403: return BOX_ERROR_PERMISSION_DENIED;
  case 404: return BOX_ERROR_NOT_FOUND;
  case 409: return BOX_ERROR_CONFLICT;
  case 501: return BOX_ERROR_UNSUPPORTED;
  default: return BOX_ERROR_INTERNAL;
  }
}

GError *
box_cli_error_from_answer (guint status, const char *reason, GBytes *body)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonNode *root = NULL;
  JsonObject *error_object = NULL;
  gsize len = 0;
  const char *data = body != NULL ? g_bytes_get_data (body, &len) : NULL;

  if (data != NULL && len > 0 && json_parser_load_from_data (parser, data, (gssize) len, NULL))
    root = json_parser_get_root (parser);
  if (root != NULL && JSON_NODE_HOLDS_OBJECT (root))
    error_object = box_cli_json_object (json_node_get_object (root), "error");
  if (error_object != NULL) {
    const char *code = box_cli_json_string (error_object, "code");
    const char *message = box_cli_json_string (error_object, "message");

    if (code != NULL && message != NULL)
      return g_error_new_literal (BOX_ERROR, code_from_name (code), message);
  }
  /* not the API's answer (a proxy, another server) */
  if (status == 401 || status == 403 || status == 404 || status == 400)
    return g_error_new (BOX_ERROR, code_from_status (status), "%u %s", status,
                        reason != NULL ? reason : "");
  return g_error_new (BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                      _("The server answered %u %s, not an API answer (is BOX_URL right?)"),
                      status, reason != NULL ? reason : "");
}

GError *
box_cli_error_network (const char *url, const GError *error)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  g_autofree char *where = uri != NULL
    ? g_strdup_printf ("%s://%s:%d", g_uri_get_scheme (uri), g_uri_get_host (uri),
                       g_uri_get_port (uri) > 0 ? g_uri_get_port (uri)
                       : g_strcmp0 (g_uri_get_scheme (uri), "https") == 0 ? 443 : 80)
    : g_strdup (url);

  if (error->domain == BOX_CLI_ERROR || error->domain == BOX_ERROR)
    return g_error_copy (error);
  return g_error_new (BOX_CLI_ERROR, BOX_CLI_ERROR_UNREACHABLE,
                      _("Cannot reach the API at %s: %s"), where, error->message);
}

int
box_cli_exit_status (BoxCli *cli, const GError *error)
{
  if (cli->exec)
    return BOX_CLI_EXIT_BOX_FAILED;
  if (error->domain == BOX_ERROR)
    return error->code == BOX_ERROR_UNAUTHORIZED ? BOX_CLI_EXIT_UNREACHABLE : BOX_CLI_EXIT_FAILED;
  if (error->domain == BOX_CLI_ERROR && error->code == BOX_CLI_ERROR_USAGE)
    return BOX_CLI_EXIT_USAGE;
  if (error->domain == BOX_CLI_ERROR && error->code == BOX_CLI_ERROR_UNREACHABLE)
    return BOX_CLI_EXIT_UNREACHABLE;
  if (error->domain == G_OPTION_ERROR)
    return BOX_CLI_EXIT_USAGE;
  return BOX_CLI_EXIT_FAILED;
}

int
box_cli_fail (BoxCli *cli, const GError *error)
{
  if (error->domain == BOX_ERROR)
    g_printerr ("box: %s (%s)\n", error->message, box_error_code_name (error->code));
  else
    g_printerr ("box: %s\n", error->message);

  if (cli->json && error->domain == BOX_ERROR) {
    g_autoptr(JsonNode) node = box_error_to_json (error);

    box_cli_print_json (node);
  }
  return box_cli_exit_status (cli, error);
}

/* ---- sending ----------------------------------------------------------- */

static gboolean
finish_answer (SoupMessage *msg, GBytes *body, JsonNode **root_out, GError **error)
{
  guint status = soup_message_get_status (msg);
  gsize len = 0;
  const char *data;
  g_autoptr(JsonParser) parser = NULL;

  if (status >= 300) {
    g_propagate_error (error, box_cli_error_from_answer (status, soup_message_get_reason_phrase (msg),
                                                         body));
    return FALSE;
  }
  if (root_out == NULL)
    return TRUE;
  data = g_bytes_get_data (body, &len);
  if (len == 0) {
    *root_out = json_node_new (JSON_NODE_NULL);
    return TRUE;
  }
  parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, data, (gssize) len, NULL)) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                 _("The API's answer is not JSON (%u %s)"), status,
                 soup_message_get_reason_phrase (msg));
    return FALSE;
  }
  *root_out = json_parser_steal_root (parser);
  return TRUE;
}

gboolean
box_cli_send (BoxCli *cli, SoupMessage *msg, JsonNode **root_out, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GBytes) body = soup_session_send_and_read (cli->session, msg, NULL, &local_error);

  if (body == NULL) {
    g_propagate_error (error, box_cli_error_network (cli->url, local_error));
    return FALSE;
  }
  return finish_answer (msg, body, root_out, error);
}

GInputStream *
box_cli_send_stream (BoxCli *cli, SoupMessage *msg, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GInputStream) body = soup_session_send (cli->session, msg, NULL, &local_error);
  guint status;

  if (body == NULL) {
    g_propagate_error (error, box_cli_error_network (cli->url, local_error));
    return NULL;
  }
  status = soup_message_get_status (msg);
  if (status >= 300) {
    g_autoptr(GBytes) bytes = g_input_stream_read_bytes (body, BOX_CLI_ERROR_BODY_MAX, NULL, NULL);

    g_propagate_error (error, box_cli_error_from_answer (status, soup_message_get_reason_phrase (msg),
                                                         bytes));
    return NULL;
  }
  return g_steal_pointer (&body);
}

static SoupMessage *
json_message_new (BoxCli *cli, const char *method, const char *path, const char *query,
                  JsonNode *body)
{
  SoupMessage *msg = box_cli_message_new (cli, method, path, query);

  if (body != NULL) {
    g_autoptr(JsonGenerator) generator = json_generator_new ();
    gsize len = 0;
    g_autofree char *text = NULL;
    g_autoptr(GBytes) bytes = NULL;

    json_generator_set_root (generator, body);
    text = json_generator_to_data (generator, &len);
    bytes = g_bytes_new_take (g_steal_pointer (&text), len);
    soup_message_set_request_body_from_bytes (msg, "application/json", bytes);
  }
  return msg;
}

JsonNode *
box_cli_call (BoxCli *cli, const char *method, const char *path, const char *query,
              JsonNode *body, GError **error)
{
  g_autoptr(SoupMessage) msg = json_message_new (cli, method, path, query, body);
  JsonNode *root = NULL;

  if (!box_cli_send (cli, msg, &root, error))
    return NULL;
  return root;
}

JsonArray *
box_cli_get_list (BoxCli *cli, const char *path, const char *query, const char *member,
                  const char *missing, JsonNode **answer, int *status)
{
  g_autoptr(GError) error = NULL;
  JsonObject *root;

  *answer = box_cli_call (cli, "GET", path, query, NULL, &error);
  if (*answer == NULL) {
    *status = box_cli_fail (cli, error);
    return NULL;
  }
  if (cli->json) {
    box_cli_print_json (*answer);
    *status = BOX_CLI_EXIT_OK;
    return NULL;
  }
  root = JSON_NODE_HOLDS_OBJECT (*answer) ? json_node_get_object (*answer) : NULL;
  if (root != NULL && json_object_has_member (root, member) &&
      JSON_NODE_HOLDS_ARRAY (json_object_get_member (root, member)))
    return json_object_get_array_member (root, member);
  g_set_error_literal (&error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL, missing);
  *status = box_cli_fail (cli, error);
  return NULL;
}

typedef struct {
  GMainLoop *loop;
  GBytes    *body;
  GError    *error;
  gint64     started;
  const char *what;
  guint      frame;
  gboolean   drawn;
} ProgressCall;

static void
progress_call_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  ProgressCall *call = user_data;

  call->body = soup_session_send_and_read_finish (SOUP_SESSION (source), result, &call->error);
  g_main_loop_quit (call->loop);
}

static gboolean
progress_tick (gpointer user_data)
{
  static const char *const frames[] = { "|", "/", "-", "\\" };
  ProgressCall *call = user_data;
  double seconds = (double) (g_get_monotonic_time () - call->started) / G_USEC_PER_SEC;

  g_printerr ("\r%s %s %.1f s\033[K", frames[call->frame++ % G_N_ELEMENTS (frames)], call->what,
              seconds);
  call->drawn = TRUE;
  return G_SOURCE_CONTINUE;
}

JsonNode *
box_cli_call_progress (BoxCli *cli, const char *method, const char *path, const char *query,
                       JsonNode *body, const char *what, GError **error)
{
  g_autoptr(SoupMessage) msg = json_message_new (cli, method, path, query, body);
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr(GBytes) answer = NULL;
  ProgressCall call = { .loop = loop, .started = g_get_monotonic_time (), .what = what };
  guint tick = 0;
  JsonNode *root = NULL;

  soup_session_send_and_read_async (cli->session, msg, G_PRIORITY_DEFAULT, NULL,
                                    progress_call_done, &call);
  if (isatty (STDERR_FILENO))
    tick = g_timeout_add (100, progress_tick, &call);
  g_main_loop_run (loop);
  if (tick != 0)
    g_source_remove (tick);
  if (call.drawn)
    g_printerr ("\r\033[K");

  answer = call.body;
  if (answer == NULL) {
    g_propagate_error (error, box_cli_error_network (cli->url, call.error));
    g_error_free (call.error);
    return NULL;
  }
  if (!finish_answer (msg, answer, &root, error))
    return NULL;
  return root;
}
