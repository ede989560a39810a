/* box-services.c: `box services` and `box service put|start|stop|restart|delete`. */
#include "config.h"

#include <string.h>
#include <stdio.h>

#include <glib/gi18n.h>

#include "box-cli.h"

static char *
service_path (const char *sandbox, const char *name, const char *suffix)
{
  g_autofree char *escaped = g_uri_escape_string (name, NULL, FALSE);
  g_autofree char *tail = g_strdup_printf ("/services/%s%s", escaped, suffix);

  return box_cli_sandbox_path (sandbox, tail);
}

/* NAME STATE PID RESTARTS PORT NEEDS COMMAND */
static void
add_row (BoxTable *table, JsonObject *s)
{
  g_autofree char *pid = json_object_has_member (s, "pid") ?
    g_strdup_printf ("%d", (int) box_cli_json_int (s, "pid", 0)) : g_strdup ("");
  g_autofree char *restarts = g_strdup_printf ("%d", (int) box_cli_json_int (s, "restarts", 0));
  g_autofree char *port = json_object_has_member (s, "http_port") ?
    g_strdup_printf ("%d", (int) box_cli_json_int (s, "http_port", 0)) : g_strdup ("");
  g_autofree char *needs = box_cli_json_strings (s, "needs", " ");
  g_autofree char *cmd = box_cli_json_strings (s, "cmd", " ");
  const char *state = box_cli_json_string (s, "state");

  box_table_add (table, box_cli_json_string (s, "name") ?: "", state ?: "", pid,
                 restarts, port, needs, cmd, NULL);
}

static const char *const *
header (void)
{
  static const char *h[8];

  h[0] = _("NAME");
  h[1] = _("STATE");
  h[2] = _("PID");
  h[3] = _("RESTARTS");
  h[4] = _("PORT");
  h[5] = _("NEEDS");
  h[6] = _("COMMAND");
  h[7] = NULL;
  return h;
}

int
box_cmd_services (BoxCli *cli, int argc, char **argv)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the answer as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(BoxTable) table = NULL;
  g_autofree char *path = NULL;
  JsonArray *array;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX"),
                      _("List a sandbox's supervised services."), 1, 1, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  path = box_cli_sandbox_path (argv[1], "/services");
  array = box_cli_get_list (cli, path, NULL, "services", _("The API's answer has no services"),
                            &answer, &status);
  if (array == NULL)
    return status;
  table = box_table_new (header ());
  for (guint i = 0; i < json_array_get_length (array); i++)
    add_row (table, json_array_get_object_element (array, i));
  box_table_print (table);
  return BOX_CLI_EXIT_OK;
}

/* Prints the Service of @answer as a one-row table (or JSON). */
static int
print_service (BoxCli *cli, JsonNode *answer)
{
  g_autoptr(BoxTable) table = NULL;

  if (answer == NULL || !JSON_NODE_HOLDS_OBJECT (answer)) {
    g_autoptr(GError) error = g_error_new (BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                                           _("The API's answer is not %s"), _("a service"));
    return box_cli_fail (cli, error);
  }
  if (cli->json) {
    box_cli_print_json (answer);
    return BOX_CLI_EXIT_OK;
  }
  table = box_table_new (header ());
  add_row (table, json_node_get_object (answer));
  box_table_print (table);
  return BOX_CLI_EXIT_OK;
}

static int
service_put (BoxCli *cli, int argc, char **argv)
{
  g_auto(GStrv) needs = NULL;
  g_auto(GStrv) env = NULL;
  g_autofree char *cwd = NULL;
  g_autofree char *user = NULL;
  int port = 0;
  const GOptionEntry entries[] = {
    { "needs", 'n', 0, G_OPTION_ARG_STRING_ARRAY, &needs,
      N_("A service to start first (repeatable)"), N_("SERVICE") },
    { "port", 'p', 0, G_OPTION_ARG_INT, &port, N_("The HTTP port the service serves"), N_("PORT") },
    { "env", 'e', 0, G_OPTION_ARG_STRING_ARRAY, &env,
      N_("An environment variable (repeatable)"), N_("KEY=VALUE") },
    { "cwd", 0, 0, G_OPTION_ARG_STRING, &cwd, N_("The working directory"), N_("DIR") },
    { "user", 'u', 0, G_OPTION_ARG_STRING, &user, N_("The user (default box)"), N_("USER") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the service as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  g_autofree char **opt_argv = NULL;
  int opt_argc = 0, first = argc;
  int status;

  /* the command is everything after the first "--" */
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--") == 0) {
      first = i + 1;
      break;
    }
  opt_argc = first < argc ? first - 1 : argc;
  opt_argv = g_new0 (char *, opt_argc + 1);
  memcpy (opt_argv, argv, sizeof (char *) * (gsize) opt_argc);
  if (!box_cli_parse (cli, &opt_argc, &opt_argv, entries, _("put SANDBOX NAME [OPTION…] -- COMMAND…"),
                      _("Define a service (or replace its definition) and start it."), 3, 3,
                      &status))
    return status;
  if (first >= argc)
    return box_cli_usage_error (cli, "service", _("Missing arguments: -- COMMAND"));
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "cmd");
  json_builder_begin_array (builder);
  for (int i = first; i < argc; i++)
    json_builder_add_string_value (builder, argv[i]);
  json_builder_end_array (builder);
  box_cli_add_strv (builder, "needs", needs);
  if (port != 0) {
    json_builder_set_member_name (builder, "http_port");
    json_builder_add_int_value (builder, port);
  }
  if (cwd != NULL) {
    json_builder_set_member_name (builder, "cwd");
    json_builder_add_string_value (builder, cwd);
  }
  if (user != NULL) {
    json_builder_set_member_name (builder, "user");
    json_builder_add_string_value (builder, user);
  }
  if (!box_cli_add_map (builder, "env", env, "--env", &error))
    return box_cli_usage_error (cli, "service", error->message);
  json_builder_end_object (builder);
  body = json_builder_get_root (builder);
  if (!box_cli_ready (cli, &status))
    return status;
  path = service_path (opt_argv[2], opt_argv[3], "");
  answer = box_cli_call (cli, "PUT", path, NULL, body, &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  return print_service (cli, answer);
}

int
box_cmd_service (BoxCli *cli, int argc, char **argv)
{
  static const char *const actions[] = { "start", "stop", "restart", "delete", NULL };
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the service as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  g_autofree char *suffix = NULL;
  const char *action = argc > 1 ? argv[1] : "";
  gboolean delete;
  int status;

  if (g_str_equal (action, "put"))
    return service_put (cli, argc, argv);
  if (!g_strv_contains (actions, action) && !g_str_has_prefix (action, "-"))
    return box_cli_usage_error (cli, "service",
                                _("The first argument is put, start, stop, restart or delete."));
  if (!box_cli_parse (cli, &argc, &argv, entries, _("put|start|stop|restart|delete SANDBOX NAME"),
                      _("Define, start, stop, restart or delete a supervised service."), 3, 3,
                      &status) ||
      !box_cli_ready (cli, &status))
    return status;
  if (!g_strv_contains (actions, argv[1]))
    return box_cli_usage_error (cli, "service",
                                _("The first argument is put, start, stop, restart or delete."));
  delete = g_str_equal (argv[1], "delete");
  suffix = delete ? g_strdup ("") : g_strconcat ("/", argv[1], NULL);
  path = service_path (argv[2], argv[3], suffix);
  answer = box_cli_call (cli, delete ? "DELETE" : "POST", path, NULL, NULL, &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  return delete ? BOX_CLI_EXIT_OK : print_service (cli, answer);
}

int
box_cmd_logs (BoxCli *cli, int argc, char **argv)
{
  gboolean follow = FALSE;
  gint tail = -1;
  const GOptionEntry entries[] = {
    { "follow", 'f', 0, G_OPTION_ARG_NONE, &follow,
      N_("Keep printing what the service writes (until the sandbox pauses or stops)"), NULL },
    { "tail", 0, 0, G_OPTION_ARG_INT, &tail, N_("Print the last N lines (default 100)"), N_("N") },
    { NULL }
  };
  g_autofree char *escaped = NULL;
  g_autofree char *suffix = NULL;
  g_autofree char *path = NULL;
  g_autoptr(GString) query = g_string_new (NULL);
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) body = NULL;
  g_autoptr(GError) error = NULL;
  char buffer[16 * 1024];
  gssize n;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX SERVICE"),
                      _("Print a service's output (stdout and stderr, in write order); the "
                        "sandbox is woken when it sleeps."), 2, 2, &status))
    return status;
  if (tail < -1 || tail > 10000)
    return box_cli_usage_error (cli, "logs", _("--tail takes 0 to 10000 lines"));
  if (!box_cli_ready (cli, &status))
    return status;
  escaped = g_uri_escape_string (argv[2], NULL, FALSE);
  suffix = g_strdup_printf ("/services/%s/logs", escaped);
  path = box_cli_sandbox_path (argv[1], suffix);
  if (tail >= 0) {
    g_autofree char *text = g_strdup_printf ("%d", tail);

    box_cli_query_add (query, "tail", text);
  }
  if (follow)
    box_cli_query_add (query, "follow", "true");
  msg = box_cli_message_new (cli, "GET", path, query->len > 0 ? query->str : NULL);
  body = box_cli_send_stream (cli, msg, &error);
  if (body == NULL)
    return box_cli_fail (cli, error);
  while ((n = g_input_stream_read (body, buffer, sizeof buffer, NULL, &error)) > 0) {
    if (fwrite (buffer, 1, (size_t) n, stdout) != (size_t) n)
      break;
    fflush (stdout);
  }
  if (n < 0)
    return box_cli_fail (cli, error);
  return 0;
}
