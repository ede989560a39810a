/* box-exec.c: exec (one-shot, streaming, detached), attach, sessions, signal.
 *
 * `box exec SANDBOX -- CMD` runs CMD through POST exec/run and exits with
 * its status; -i, -t and --detachable use the streaming WebSocket (the
 * session itself runs in box-stream.c); -d starts a detachable session and
 * prints its ID.  box's own failures exit 125 here (box-cli.h), so that
 * scripts can tell them from the command's statuses.
 */
#include "config.h"

#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <glib/gi18n.h>
#include <glib-unix.h>

#include "box-cli.h"

#define DEFAULT_SHELL "exec \"${SHELL:-/bin/sh}\" -l"

int
box_cli_start_error_status (const GError *error)
{
  if (error->domain != BOX_ERROR)
    return BOX_CLI_EXIT_BOX_FAILED;
  if (error->code == BOX_ERROR_INVALID && g_str_has_prefix (error->message, "executable not found"))
    return BOX_CLI_EXIT_NOT_FOUND;
  if (error->code == BOX_ERROR_INVALID ||
      (error->code == BOX_ERROR_INTERNAL && strstr (error->message, "start_failed") != NULL))
    return BOX_CLI_EXIT_CANNOT_RUN;
  return BOX_CLI_EXIT_BOX_FAILED;
}

static void
write_decoded (int fd, const char *base64)
{
  gsize len = 0;
  g_autofree guchar *data = NULL;
  gsize done = 0;

  if (base64 == NULL || base64[0] == '\0')
    return;
  data = g_base64_decode (base64, &len);
  while (done < len) {
    ssize_t n = write (fd, data + done, len - done);

    if (n <= 0)
      return;
    done += (gsize) n;
  }
}

typedef struct {
  gboolean interactive;
  gboolean tty;
  gboolean detachable;
  gboolean detach;
  char    *user;
  char    *cwd;
  char   **env;
  int      timeout;
  char    *detach_keys;
} ExecOptions;

static void
exec_options_clear (ExecOptions *options)
{
  g_free (options->user);
  g_free (options->cwd);
  g_strfreev (options->env);
  g_free (options->detach_keys);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ExecOptions, exec_options_clear)

/* ---- one-shot ---------------------------------------------------------- */

static int
exec_run (BoxCli *cli, const char *sandbox, char **cmd, ExecOptions *options)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *path = box_cli_sandbox_path (sandbox, "/exec/run");
  JsonObject *result;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "cmd");
  json_builder_begin_array (builder);
  for (guint i = 0; cmd[i] != NULL; i++)
    json_builder_add_string_value (builder, cmd[i]);
  json_builder_end_array (builder);
  if (options->cwd != NULL) {
    json_builder_set_member_name (builder, "cwd");
    json_builder_add_string_value (builder, options->cwd);
  }
  if (options->user != NULL) {
    json_builder_set_member_name (builder, "user");
    json_builder_add_string_value (builder, options->user);
  }
  if (options->env != NULL) {
    json_builder_set_member_name (builder, "env");
    json_builder_begin_object (builder);
    for (guint i = 0; options->env[i] != NULL; i++) {
      const char *eq = strchr (options->env[i], '=');
      g_autofree char *name = g_strndup (options->env[i], (gsize) (eq - options->env[i]));

      json_builder_set_member_name (builder, name);
      json_builder_add_string_value (builder, eq + 1);
    }
    json_builder_end_object (builder);
  }
  if (options->timeout > 0) {
    json_builder_set_member_name (builder, "timeout_s");
    json_builder_add_int_value (builder, options->timeout);
  }
  json_builder_end_object (builder);
  body = json_builder_get_root (builder);

  answer = box_cli_call (cli, "POST", path, NULL, body, &error);
  if (answer == NULL) {
    int status = box_cli_start_error_status (error);

    box_cli_fail (cli, error);
    return status;
  }
  if (!JSON_NODE_HOLDS_OBJECT (answer)) {
    g_set_error (&error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL, _("The API's answer is not an exec result"));
    return box_cli_fail (cli, error);
  }
  result = json_node_get_object (answer);
  write_decoded (STDOUT_FILENO, box_cli_json_string (result, "stdout"));
  write_decoded (STDERR_FILENO, box_cli_json_string (result, "stderr"));
  if (box_cli_json_bool (result, "truncated"))
    g_printerr ("%s\n", _("box: the output was cut at 16 MiB per stream."));
  if (box_cli_json_bool (result, "timed_out")) {
    g_printerr (_("box: the command timed out and was killed (exit status %d).\n"),
                (int) box_cli_json_int (result, "exit_code", 0));
    return BOX_CLI_EXIT_TIMED_OUT;
  }
  return (int) CLAMP (box_cli_json_int (result, "exit_code", BOX_CLI_EXIT_BOX_FAILED), 0, 255);
}

/* ---- streaming --------------------------------------------------------- */

static char *
stream_query (char **cmd, ExecOptions *options)
{
  g_autoptr(GString) query = g_string_new (NULL);

  for (guint i = 0; cmd[i] != NULL; i++)
    box_cli_query_add (query, "cmd", cmd[i]);
  if (options->tty) {
    struct winsize size = { 0 };
    const char *term = g_getenv ("TERM");

    box_cli_query_add (query, "tty", "true");
    if (ioctl (STDIN_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 && size.ws_row > 0) {
      g_autofree char *cols = g_strdup_printf ("%u", size.ws_col);
      g_autofree char *rows = g_strdup_printf ("%u", size.ws_row);

      box_cli_query_add (query, "cols", cols);
      box_cli_query_add (query, "rows", rows);
    }
    if (term != NULL && term[0] != '\0') {
      g_autofree char *pair = g_strconcat ("TERM=", term, NULL);

      box_cli_query_add (query, "env", pair);
    }
  }
  if (options->cwd != NULL)
    box_cli_query_add (query, "cwd", options->cwd);
  for (guint i = 0; options->env != NULL && options->env[i] != NULL; i++)
    box_cli_query_add (query, "env", options->env[i]);
  if (options->user != NULL)
    box_cli_query_add (query, "user", options->user);
  if (options->detachable || options->detach)
    box_cli_query_add (query, "detachable", "true");
  return g_string_free (g_steal_pointer (&query), FALSE);
}

typedef struct {
  GMainLoop *loop;
  char      *session;
  GError    *error;
  gboolean   closed;
} Detach;

static void
detach_on_message (SoupWebsocketConnection *conn, SoupWebsocketDataType type, GBytes *message,
                   gpointer user_data)
{
  Detach *detach = user_data;
  g_autoptr(JsonParser) parser = json_parser_new ();
  gsize len = 0;
  const char *data = g_bytes_get_data (message, &len);
  JsonObject *object;
  const char *kind;

  if (type != SOUP_WEBSOCKET_DATA_TEXT || detach->session != NULL || detach->error != NULL ||
      !json_parser_load_from_data (parser, data, (gssize) len, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return;
  object = json_node_get_object (json_parser_get_root (parser));
  kind = box_cli_json_string (object, "type");
  if (g_strcmp0 (kind, "started") == 0)
    detach->session = g_strdup (box_cli_json_string (object, "session"));
  else if (g_strcmp0 (kind, "error") == 0)
    detach->error = box_cli_error_from_answer (500, NULL, message);
  else
    return;
  g_main_loop_quit (detach->loop);
}

static void
detach_on_closed (SoupWebsocketConnection *conn, gpointer user_data)
{
  Detach *detach = user_data;

  detach->closed = TRUE;
  g_main_loop_quit (detach->loop);
}

/* -d: start a detachable session, print its ID, leave it running. */
static int
exec_detached (BoxCli *cli, BoxCliWs *ws)
{
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  SoupWebsocketConnection *conn = box_cli_ws_connection (ws);
  Detach detach = { .loop = loop };
  gulong message_id = g_signal_connect (conn, "message", G_CALLBACK (detach_on_message), &detach);
  gulong closed_id = g_signal_connect (conn, "closed", G_CALLBACK (detach_on_closed), &detach);
  int status;

  g_main_loop_run (loop);
  if (detach.session != NULL) {
    /* the command reads EOF: nobody will type into it */
    box_cli_ws_send (ws, 4, NULL, 0);
    g_print ("%s\n", detach.session);
    soup_websocket_connection_close (conn, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
    while (!detach.closed &&
           soup_websocket_connection_get_state (conn) != SOUP_WEBSOCKET_STATE_CLOSED)
      g_main_context_iteration (NULL, TRUE);
    status = BOX_CLI_EXIT_OK;
  } else if (detach.error != NULL) {
    status = box_cli_start_error_status (detach.error);
    box_cli_fail (cli, detach.error);
  } else {
    g_autoptr(GError) error = g_error_new (BOX_CLI_ERROR, BOX_CLI_ERROR_LOST,
                                           _("The connection closed before the command started"));

    status = box_cli_fail (cli, error);
  }
  g_signal_handler_disconnect (conn, message_id);
  g_signal_handler_disconnect (conn, closed_id);
  g_free (detach.session);
  g_clear_error (&detach.error);
  return status;
}

/* --detach-keys is checked before anything starts (a detachable session
 * must not be left running for a typo); a usage error's status, or -1. */
static int
check_detach_keys (BoxCli *cli, const char *command, const char *keys)
{
  g_autoptr(GByteArray) bytes = g_byte_array_new ();
  g_autoptr(GError) error = NULL;

  if (keys == NULL || box_cli_parse_detach_keys (keys, bytes, &error))
    return -1;
  return box_cli_usage_error (cli, command, error->message);
}

int
box_cmd_exec (BoxCli *cli, int argc, char **argv)
{
  g_auto(ExecOptions) options = { .timeout = 0 };
  const GOptionEntry entries[] = {
    { "interactive", 'i', 0, G_OPTION_ARG_NONE, &options.interactive,
      N_("Pass standard input to the command (a streaming session)"), NULL },
    { "tty", 't', 0, G_OPTION_ARG_NONE, &options.tty,
      N_("Run the command on a terminal (with -i the local one in raw mode)"), NULL },
    { "detachable", 0, 0, G_OPTION_ARG_NONE, &options.detachable,
      N_("Keep the session when the connection ends; the detach keys leave it running"), NULL },
    { "detach", 'd', 0, G_OPTION_ARG_NONE, &options.detach,
      N_("Start a detachable session, print its ID and return"), NULL },
    { "detach-keys", 0, 0, G_OPTION_ARG_STRING, &options.detach_keys,
      N_("Keys that detach (default ctrl-p,ctrl-q)"), N_("KEYS") },
    { "user", 'u', 0, G_OPTION_ARG_STRING, &options.user, N_("Run as this user (default box)"),
      N_("USER") },
    { "cwd", 'w', 0, G_OPTION_ARG_STRING, &options.cwd,
      N_("Working directory (default the user's home)"), N_("DIR") },
    { "env", 'e', 0, G_OPTION_ARG_STRING_ARRAY, &options.env,
      N_("An environment variable (repeatable)"), N_("KEY=VALUE") },
    { "timeout", 0, 0, G_OPTION_ARG_INT, &options.timeout,
      N_("Kill the command after SECONDS (1 to 3600, default 60; not with -i, -t, -d)"),
      N_("SECONDS") },
    { NULL }
  };
  g_autofree char **opt_argv = NULL;
  g_auto(GStrv) cmd = NULL;
  g_autoptr(BoxCliWs) ws = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *query = NULL;
  g_autofree char *path = NULL;
  g_autofree char *sandbox = NULL;
  gboolean streaming;
  int first;
  int opt_argc;
  int status;

  cli->exec = TRUE;
  /* box's options end at the sandbox's name (or a "--" before it); a "--"
   * right after the name is dropped, any later one is the command's */
  opt_argc = argc;
  opt_argv = g_new0 (char *, opt_argc + 1);
  memcpy (opt_argv, argv, sizeof (char *) * (gsize) opt_argc);
  if (!box_cli_parse_full (cli, &opt_argc, &opt_argv, entries,
                           _("SANDBOX [--] [COMMAND [ARGUMENT…]]"),
                           _("Run a command in a sandbox. Without -i, -t or -d it runs to its end "
                             "(exec/run) and box exits with its status."),
                           1, G_MAXUINT, TRUE, &status))
    return status;
  first = strcmp (opt_argv[1], "--") == 0 ? 2 : 1;
  if (first >= opt_argc) {
    g_autofree char *message = g_strdup_printf (_("Missing arguments: %s"), "SANDBOX");

    return box_cli_usage_error (cli, "exec", message);
  }
  sandbox = g_strdup (opt_argv[first]);
  cmd = g_strdupv (opt_argv + first + 1 + (first + 1 < opt_argc && strcmp (opt_argv[first + 1], "--") == 0));

  for (guint i = 0; options.env != NULL && options.env[i] != NULL; i++) {
    const char *eq = strchr (options.env[i], '=');

    if (eq == NULL || eq == options.env[i]) {
      g_autofree char *message = g_strdup_printf (_("%s takes KEY=VALUE, not “%s”."), "--env",
                                                  options.env[i]);

      return box_cli_usage_error (cli, "exec", message);
    }
  }
  streaming = options.interactive || options.tty || options.detachable || options.detach;
  if (options.timeout != 0 && (streaming || options.timeout < 1 || options.timeout > 3600))
    return box_cli_usage_error (cli, "exec",
                                _("--timeout takes 1 to 3600 seconds and only goes with a "
                                  "one-shot command (not -i, -t or -d)."));
  if (options.detach && (options.interactive || options.tty))
    return box_cli_usage_error (cli, "exec", _("-d does not go with -i or -t."));
  if (options.tty && !isatty (STDIN_FILENO))
    return box_cli_usage_error (cli, "exec", _("-t needs a terminal on standard input."));
  if ((status = check_detach_keys (cli, "exec", options.detach_keys)) >= 0)
    return status;
  if (cmd[0] == NULL) {
    if (!options.tty)
      return box_cli_usage_error (cli, "exec", _("No command given (only -t starts a shell)."));
    g_strfreev (cmd);
    cmd = g_new0 (char *, 4);
    cmd[0] = g_strdup ("/bin/sh");
    cmd[1] = g_strdup ("-c");
    cmd[2] = g_strdup (DEFAULT_SHELL);
  }

  if (!box_cli_ready (cli, &status))
    return status;
  if (!streaming)
    return exec_run (cli, sandbox, cmd, &options);

  query = stream_query (cmd, &options);
  path = box_cli_sandbox_path (sandbox, "/exec");
  ws = box_cli_ws_connect (cli, path, query, &error);
  if (ws == NULL)
    return box_cli_fail (cli, error);
  if (options.detach)
    return exec_detached (cli, ws);
  {
    BoxCliStreamOptions stream_options = {
      .tty = options.tty,
      .stdin_open = options.interactive,
      .detachable = options.detachable,
      .forward_signals = TRUE,
      .sandbox = sandbox,
      .detach_keys = options.detach_keys,
    };

    if (!options.interactive && !options.tty)
      box_cli_ws_send (ws, 4, NULL, 0);   /* no stdin: EOF at once */
    return box_cli_stream_run (cli, ws, &stream_options);
  }
}

/* ---- attach ------------------------------------------------------------ */

/* The session's object from the list, or NULL (not an error: attach says). */
static JsonObject *
find_session (JsonNode *list, const char *id)
{
  JsonObject *root = JSON_NODE_HOLDS_OBJECT (list) ? json_node_get_object (list) : NULL;
  JsonNode *sessions = root != NULL ? json_object_get_member (root, "sessions") : NULL;
  JsonArray *array;

  if (sessions == NULL || !JSON_NODE_HOLDS_ARRAY (sessions))
    return NULL;
  array = json_node_get_array (sessions);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *session = json_array_get_object_element (array, i);

    if (g_strcmp0 (box_cli_json_string (session, "id"), id) == 0)
      return session;
  }
  return NULL;
}

int
box_cmd_attach (BoxCli *cli, int argc, char **argv)
{
  gint64 offset = -1;
  gboolean no_stdin = FALSE;
  g_autofree char *detach_keys = NULL;
  const GOptionEntry entries[] = {
    { "offset", 0, 0, G_OPTION_ARG_INT64, &offset,
      N_("Replay the output from byte N (default: all that is kept)"), N_("N") },
    { "no-stdin", 0, 0, G_OPTION_ARG_NONE, &no_stdin, N_("Do not pass standard input"), NULL },
    { "detach-keys", 0, 0, G_OPTION_ARG_STRING, &detach_keys,
      N_("Keys that detach (default ctrl-p,ctrl-q)"), N_("KEYS") },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) list = NULL;
  g_autoptr(BoxCliWs) ws = NULL;
  g_autoptr(GString) query = g_string_new (NULL);
  g_autofree char *path = NULL;
  g_autofree char *list_path = NULL;
  g_autofree char *escaped = NULL;
  g_autofree char *suffix = NULL;
  JsonObject *session;
  BoxCliStreamOptions stream_options = { 0 };
  int status;

  cli->exec = TRUE;
  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX SESSION"),
                      _("Attach to an exec session: its kept output, then live output; box exits "
                        "with the command's status."), 2, 2, &status))
    return status;
  if ((status = check_detach_keys (cli, "attach", detach_keys)) >= 0 ||
      !box_cli_ready (cli, &status))
    return status;

  /* the list says whether the session has a terminal */
  list_path = box_cli_sandbox_path (argv[1], "/exec/sessions");
  list = box_cli_call (cli, "GET", list_path, NULL, NULL, &error);
  if (list == NULL)
    return box_cli_fail (cli, error);
  session = find_session (list, argv[2]);

  if (offset >= 0) {
    g_autofree char *text = g_strdup_printf ("%" G_GINT64_FORMAT, offset);

    box_cli_query_add (query, "offset", text);
  }
  escaped = g_uri_escape_string (argv[2], NULL, FALSE);
  suffix = g_strconcat ("/exec/sessions/", escaped, NULL);
  path = box_cli_sandbox_path (argv[1], suffix);
  ws = box_cli_ws_connect (cli, path, query->str, &error);
  if (ws == NULL)
    return box_cli_fail (cli, error);

  stream_options.tty = session != NULL && box_cli_json_bool (session, "tty") &&
                       isatty (STDIN_FILENO);
  stream_options.stdin_open = !no_stdin && isatty (STDIN_FILENO);
  stream_options.detachable = TRUE;
  stream_options.sandbox = argv[1];
  stream_options.detach_keys = detach_keys;
  return box_cli_stream_run (cli, ws, &stream_options);
}

/* ---- sessions and signal ----------------------------------------------- */

int
box_cmd_sessions (BoxCli *cli, int argc, char **argv)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the answer as JSON"), NULL },
    { NULL }
  };
  const char *const header[] = { _("SESSION"), _("COMMAND"), _("TTY"), _("PID"), _("STARTED"),
                                 _("STATUS"), _("ATTACHED"), NULL };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(BoxTable) table = NULL;
  g_autofree char *path = NULL;
  JsonArray *array = NULL;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX"),
                      _("List a sandbox's exec sessions (exited ones stay 10 minutes)."), 1, 1,
                      &status) ||
      !box_cli_ready (cli, &status))
    return status;
  path = box_cli_sandbox_path (argv[1], "/exec/sessions");
  array = box_cli_get_list (cli, path, NULL, "sessions", _("The API's answer has no sessions"), &answer, &status);
  if (array == NULL)
    return status;
  table = box_table_new (header);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *session = json_array_get_object_element (array, i);
    JsonNode *cmd_node = json_object_get_member (session, "cmd");
    g_autoptr(GString) cmd = g_string_new (NULL);
    g_autofree char *pid = g_strdup_printf ("%d", (int) box_cli_json_int (session, "pid", 0));
    g_autofree char *age = box_cli_format_age (box_cli_json_string (session, "started_at"));
    g_autofree char *state = box_cli_json_bool (session, "exited")
      ? g_strdup_printf (_("exited %d"), (int) box_cli_json_int (session, "exit_code", -1))
      : g_strdup (_("running"));

    if (cmd_node != NULL && JSON_NODE_HOLDS_ARRAY (cmd_node)) {
      JsonArray *args = json_node_get_array (cmd_node);

      for (guint j = 0; j < json_array_get_length (args); j++) {
        const char *arg = json_array_get_string_element (args, j);

        if (cmd->len > 0)
          g_string_append_c (cmd, ' ');
        g_string_append (cmd, arg != NULL ? arg : "");
      }
    }
    if (g_utf8_strlen (cmd->str, -1) > 40) {
      g_string_truncate (cmd, (gsize) (g_utf8_offset_to_pointer (cmd->str, 39) - cmd->str));
      g_string_append (cmd, "…");
    }
    box_table_add (table, box_cli_json_string (session, "id") ?: "", cmd->str,
                       box_cli_json_bool (session, "tty") ? _("yes") : _("no"), pid, age, state,
                       box_cli_json_bool (session, "attached") ? _("yes") : _("no"), NULL);
  }
  box_table_print (table);
  return BOX_CLI_EXIT_OK;
}

int
box_cmd_signal (BoxCli *cli, int argc, char **argv)
{
  const GOptionEntry entries[] = { { NULL } };
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *escaped = NULL;
  g_autofree char *path = NULL;
  g_autofree char *name = NULL;
  g_autofree char *suffix = NULL;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX SESSION SIGNAL"),
                      _("Send a signal (TERM, INT, KILL, HUP… as in “kill -l”) to a session's "
                        "process group."), 3, 3, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  name = g_ascii_strup (argv[3], -1);
  if (g_str_has_prefix (name, "SIG"))
    memmove (name, name + 3, strlen (name + 3) + 1);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "signal");
  json_builder_add_string_value (builder, name);
  json_builder_end_object (builder);
  body = json_builder_get_root (builder);
  escaped = g_uri_escape_string (argv[2], NULL, FALSE);
  suffix = g_strconcat ("/exec/sessions/", escaped, "/signal", NULL);
  path = box_cli_sandbox_path (argv[1], suffix);
  answer = box_cli_call (cli, "POST", path, NULL, body, &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  return BOX_CLI_EXIT_OK;
}
