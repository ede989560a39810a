/* box-urls.c: `box url`, `box open` and `box port-access`: the edge's URLs
 * of a sandbox and of its ports (spec "Ports and URLs", Authentication 5).
 *
 * A sandbox's URL is the record's `url` (https://<name>--<project>.<domain>,
 * its http_port); a port's is the same with "<port>--" before the name.
 * With --all, `box url` also prints the record's `urls` (https://<name>.<own
 * domain>, with "<port>--" for a port).  Each is printed with the edge's
 * port (GET /v1/edge) when that is not 443, so that it can be opened.  A
 * private URL needs the key: `box open` hands the browser the URL with
 * ?box_token=<key> (the edge sets its cookie and answers 302 to the URL
 * without it); `box url` prints the key only when asked with --token.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <glib/gi18n.h>

#include "box-cli.h"

/* "PORT" -> 1..65535; FALSE for anything else. */
static gboolean
parse_port (const char *text, guint *port)
{
  guint64 value = 0;

  if (!g_ascii_string_to_unsigned (text, 10, 1, 65535, &value, NULL))
    return FALSE;
  *port = (guint) value;
  return TRUE;
}

JsonNode *
box_cli_port_settings (BoxCli *cli, const char *sandbox, GError **error)
{
  g_autofree char *path = box_cli_sandbox_path (sandbox, "/ports/settings");
  g_autoptr(JsonNode) answer = box_cli_call (cli, "GET", path, NULL, NULL, error);

  if (answer == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (answer) ||
      !json_object_has_member (json_node_get_object (answer), "ports") ||
      !JSON_NODE_HOLDS_ARRAY (json_object_get_member (json_node_get_object (answer), "ports"))) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                 _("The API's answer has no ports"));
    return NULL;
  }
  return g_steal_pointer (&answer);
}

const char *
box_cli_port_access (JsonNode *settings, guint port)
{
  JsonArray *ports = json_object_get_array_member (json_node_get_object (settings), "ports");

  for (guint i = 0; i < json_array_get_length (ports); i++) {
    JsonNode *node = json_array_get_element (ports, i);
    JsonObject *setting = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;

    if (setting != NULL && box_cli_json_int (setting, "port", 0) == (gint64) port &&
        g_strcmp0 (box_cli_json_string (setting, "access"), "public") == 0)
      return "public";
  }
  return "private";
}

/* The edge's TCP port from GET /v1/edge: 0 when it is 443 (the URL needs
 * none) or boxd serves no edge (null), and also from a boxd that has no
 * such route (404). */
static gboolean
edge_port (BoxCli *cli, guint *port, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(JsonNode) answer = box_cli_call (cli, "GET", "/v1/edge", NULL, NULL, &local_error);
  gint64 value;

  *port = 0;
  if (answer == NULL) {
    if (g_error_matches (local_error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
      return TRUE;
    g_propagate_error (error, g_steal_pointer (&local_error));
    return FALSE;
  }
  value = JSON_NODE_HOLDS_OBJECT (answer)
          ? box_cli_json_int (json_node_get_object (answer), "port", 0) : 0;
  if (value < 0 || value > 65535) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                 _("The API's answer has no port for the edge"));
    return FALSE;
  }
  *port = value == 443 ? 0 : (guint) value;
  return TRUE;
}

/* @url (https://HOST as the API gives it) as the user reaches it: the host
 * with "<port>--" before it when @port is not 0, and the edge's
 * @edge_port (0: none) after it.  NULL for a URL that is no https://HOST. */
static char *
reachable_url (const char *url, guint port, guint edge_port)
{
  const char *host = g_str_has_prefix (url, "https://") ? url + strlen ("https://") : NULL;
  GString *out;

  if (host == NULL || *host == '\0' || strpbrk (host, "/:?#@") != NULL)
    return NULL;
  out = g_string_new ("https://");
  if (port != 0)
    g_string_append_printf (out, "%u--", port);
  g_string_append (out, host);
  if (edge_port != 0)
    g_string_append_printf (out, ":%u", edge_port);
  return g_string_free (out, FALSE);
}

typedef struct {
  GPtrArray *urls;     /* without the key: the sandbox domain's, then own domains' */
  gboolean   private;
} Target;

static void
target_clear (Target *target)
{
  g_clear_pointer (&target->urls, g_ptr_array_unref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Target, target_clear)

/* Adds the URL @url of the record as the user reaches it. */
static gboolean
add_url (Target *target, const char *url, guint port, guint edge, GError **error)
{
  char *shown = url != NULL ? reachable_url (url, port, edge) : NULL;

  if (shown == NULL) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                 _("The API's answer has no URL for the sandbox"));
    return FALSE;
  }
  g_ptr_array_add (target->urls, shown);
  return TRUE;
}

/* The URLs of @sandbox (@port 0: its own, which follow its http_port's
 * access): its `url`, then (with @all) each of its `urls` under the
 * project's own domains; and whether they are private. */
static gboolean
resolve_target (BoxCli *cli, const char *sandbox, guint port, gboolean all, Target *target,
                GError **error)
{
  g_autofree char *path = box_cli_sandbox_path (sandbox, NULL);
  g_autoptr(JsonNode) record = NULL;
  g_autoptr(JsonNode) settings = NULL;
  JsonObject *object;
  JsonArray *urls = NULL;
  guint edge = 0;

  record = box_cli_call (cli, "GET", path, NULL, NULL, error);
  if (record == NULL || !edge_port (cli, &edge, error))
    return FALSE;
  object = JSON_NODE_HOLDS_OBJECT (record) ? json_node_get_object (record) : NULL;
  target->urls = g_ptr_array_new_with_free_func (g_free);
  if (!add_url (target, object != NULL ? box_cli_json_string (object, "url") : NULL, port, edge,
                error))
    return FALSE;
  if (all && object != NULL && json_object_has_member (object, "urls") &&
      JSON_NODE_HOLDS_ARRAY (json_object_get_member (object, "urls")))
    urls = json_object_get_array_member (object, "urls");
  for (guint i = 0; urls != NULL && i < json_array_get_length (urls); i++) {
    JsonNode *element = json_array_get_element (urls, i);
    const char *url = JSON_NODE_HOLDS_VALUE (element) &&
                      json_node_get_value_type (element) == G_TYPE_STRING
                      ? json_node_get_string (element) : NULL;

    if (!add_url (target, url, port, edge, error))
      return FALSE;
  }
  settings = box_cli_port_settings (cli, sandbox, error);
  if (settings == NULL)
    return FALSE;
  if (port == 0)
    port = (guint) box_cli_json_int (object, "http_port", 8080);
  target->private = g_strcmp0 (box_cli_port_access (settings, port), "private") == 0;
  return TRUE;
}

/* @url as it signs a browser in: ?box_token=<key> on a private one. */
static char *
token_url (BoxCli *cli, const Target *target, const char *url)
{
  g_autofree char *escaped = NULL;

  if (!target->private)
    return g_strdup (url);
  escaped = g_uri_escape_string (cli->key, NULL, FALSE);
  return g_strdup_printf ("%s/?box_token=%s", url, escaped);
}

/* SANDBOX [PORT]: parses the port; a usage error sets *status. */
static gboolean
parse_target_args (BoxCli *cli, const char *command, int argc, char **argv, guint *port,
                   int *status)
{
  *port = 0;
  if (argc > 2 && !parse_port (argv[2], port)) {
    g_autofree char *message = g_strdup_printf (_("“%s” is not a port (1 to 65535)."), argv[2]);

    *status = box_cli_usage_error (cli, command, message);
    return FALSE;
  }
  return box_cli_ready (cli, status);
}

int
box_cmd_url (BoxCli *cli, int argc, char **argv)
{
  gboolean with_token = FALSE;
  gboolean all = FALSE;
  const GOptionEntry entries[] = {
    { "token", 0, 0, G_OPTION_ARG_NONE, &with_token,
      N_("For a private URL, print it with ?box_token= and the key (it signs a browser in)"),
      NULL },
    { "all", 0, 0, G_OPTION_ARG_NONE, &all,
      N_("Also print the URLs under the project's own domains, one a line after the first"),
      NULL },
    { NULL }
  };
  g_auto(Target) target = { 0 };
  g_autoptr(GError) error = NULL;
  guint port = 0;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX [PORT]"),
                      _("Print the URL of a sandbox (its http_port), or of one of its ports, "
                        "with the edge's port when it is not 443.  The key is printed only "
                        "with --token."), 1, 2, &status) ||
      !parse_target_args (cli, "url", argc, argv, &port, &status))
    return status;
  if (!resolve_target (cli, argv[1], port, all, &target, &error))
    return box_cli_fail (cli, error);
  for (guint i = 0; i < target.urls->len; i++) {
    const char *url = g_ptr_array_index (target.urls, i);
    g_autofree char *shown = with_token ? token_url (cli, &target, url) : g_strdup (url);

    g_print ("%s\n", shown);
  }
  return BOX_CLI_EXIT_OK;
}

/* Runs @browser (a command; "%s" in it is the URL, else the URL is its last
 * argument) without waiting for it. */
static gboolean
spawn_browser (const char *browser, const char *url, GError **error)
{
  g_auto(GStrv) words = NULL;
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  gboolean substituted = FALSE;

  if (!g_shell_parse_argv (browser, NULL, &words, error))
    return FALSE;
  for (guint i = 0; words[i] != NULL; i++) {
    if (strstr (words[i], "%s") != NULL) {
      g_auto(GStrv) parts = g_strsplit (words[i], "%s", -1);

      g_ptr_array_add (args, g_strjoinv (url, parts));
      substituted = TRUE;
    } else {
      g_ptr_array_add (args, g_strdup (words[i]));
    }
  }
  if (!substituted)
    g_ptr_array_add (args, g_strdup (url));
  g_ptr_array_add (args, NULL);
  return g_spawn_async (NULL, (char **) args->pdata, NULL,
                        G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                        error);
}

/* $BROWSER (a list separated by ":", the first that starts wins), else
 * xdg-open; FALSE when none could be started. */
static gboolean
open_in_browser (const char *url)
{
  const char *env = g_getenv ("BROWSER");

  if (env != NULL && *env != '\0') {
    g_auto(GStrv) browsers = g_strsplit (env, ":", -1);

    for (guint i = 0; browsers[i] != NULL; i++) {
      g_autoptr(GError) error = NULL;

      if (*g_strstrip (browsers[i]) == '\0')
        continue;
      if (spawn_browser (browsers[i], url, &error))
        return TRUE;
      g_debug ("cannot start %s: %s", browsers[i], error->message);
    }
    return FALSE;
  }
  {
    g_autofree char *xdg_open = g_find_program_in_path ("xdg-open");
    g_autoptr(GError) error = NULL;

    return xdg_open != NULL && spawn_browser (xdg_open, url, &error);
  }
}

int
box_cmd_open (BoxCli *cli, int argc, char **argv)
{
  g_auto(Target) target = { 0 };
  g_autoptr(GError) error = NULL;
  g_autofree char *url = NULL;
  const char *shown;
  guint port = 0;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, (const GOptionEntry[]) { { NULL } },
                      _("SANDBOX [PORT]"),
                      _("Open the URL of a sandbox, or of one of its ports, in the browser "
                        "($BROWSER, else xdg-open).  A private URL is opened with "
                        "?box_token= and the key, which the edge turns into a cookie for that "
                        "host.  Without a browser the URL is printed, without the key."),
                      1, 2, &status) ||
      !parse_target_args (cli, "open", argc, argv, &port, &status))
    return status;
  if (!resolve_target (cli, argv[1], port, FALSE, &target, &error))
    return box_cli_fail (cli, error);
  shown = g_ptr_array_index (target.urls, 0);
  url = token_url (cli, &target, shown);
  if (open_in_browser (url)) {
    /* TRANSLATORS: the URL, without the key */
    g_print (_("Opened %s\n"), shown);
    return BOX_CLI_EXIT_OK;
  }
  g_print ("%s\n", shown);
  if (target.private)
    g_printerr (_("box: no browser found (set BROWSER); the URL is private: "
                  "“box url --token” prints it with the key.\n"));
  else
    g_printerr (_("box: no browser found (set BROWSER).\n"));
  return BOX_CLI_EXIT_OK;
}

int
box_cmd_port_access (BoxCli *cli, int argc, char **argv)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the answer as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *suffix = NULL;
  g_autofree char *path = NULL;
  guint port = 0, edge = 0;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX PORT private|public"),
                      _("Make a port's URL private (it needs the key; the default) or public "
                        "(anyone may open it).  The sandbox's own URL follows its http_port."),
                      3, 3, &status))
    return status;
  if (!parse_port (argv[2], &port)) {
    g_autofree char *message = g_strdup_printf (_("“%s” is not a port (1 to 65535)."), argv[2]);

    return box_cli_usage_error (cli, "port-access", message);
  }
  if (g_strcmp0 (argv[3], "private") != 0 && g_strcmp0 (argv[3], "public") != 0) {
    g_autofree char *message = g_strdup_printf (_("“%s” is not private or public."), argv[3]);

    return box_cli_usage_error (cli, "port-access", message);
  }
  if (!box_cli_ready (cli, &status))
    return status;
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "access");
  json_builder_add_string_value (builder, argv[3]);
  json_builder_end_object (builder);
  body = json_builder_get_root (builder);
  /* (before the change: a failure here changes nothing) */
  if (!cli->json && !edge_port (cli, &edge, &error))
    return box_cli_fail (cli, error);
  suffix = g_strdup_printf ("/ports/%u", port);
  path = box_cli_sandbox_path (argv[1], suffix);
  answer = box_cli_call (cli, "PUT", path, NULL, body, &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  if (cli->json) {
    box_cli_print_json (answer);
  } else if (JSON_NODE_HOLDS_OBJECT (answer)) {
    JsonObject *object = json_node_get_object (answer);
    const char *access = box_cli_json_string (object, "access");
    const char *url = box_cli_json_string (object, "url");
    g_autofree char *shown = url != NULL ? reachable_url (url, 0, edge) : NULL;

    g_print ("%u %s %s\n", port, access != NULL ? access : argv[3], shown != NULL ? shown : "");
  }
  return BOX_CLI_EXIT_OK;
}
