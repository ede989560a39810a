/* box-sandboxes.c: create, list, get, delete, pause, stop, wake. */
#include "config.h"

#include <string.h>
#include <unistd.h>
#include <glib/gi18n.h>

#include "box-cli.h"

gboolean
box_cli_add_map (JsonBuilder *builder, const char *member, char **pairs, const char *option,
         GError **error)
{
  if (pairs == NULL)
    return TRUE;
  json_builder_set_member_name (builder, member);
  json_builder_begin_object (builder);
  for (guint i = 0; pairs[i] != NULL; i++) {
    const char *eq = strchr (pairs[i], '=');
    g_autofree char *key = NULL;

    if (eq == NULL || eq == pairs[i]) {
      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                   _("%s takes KEY=VALUE, not “%s”."), option, pairs[i]);
      return FALSE;
    }
    key = g_strndup (pairs[i], (gsize) (eq - pairs[i]));
    json_builder_set_member_name (builder, key);
    json_builder_add_string_value (builder, eq + 1);
  }
  json_builder_end_object (builder);
  return TRUE;
}

void
box_cli_add_strv (JsonBuilder *builder, const char *member, char **strv)
{
  if (strv == NULL)
    return;
  json_builder_set_member_name (builder, member);
  json_builder_begin_array (builder);
  for (guint i = 0; strv[i] != NULL; i++)
    json_builder_add_string_value (builder, strv[i]);
  json_builder_end_array (builder);
}

static char *
resources_text (JsonObject *sandbox)
{
  JsonObject *res = box_cli_json_object (sandbox, "resources");

  if (res == NULL)
    return g_strdup ("");
  return g_strdup_printf (_("%d CPU, %d MiB, %d GiB"),
                          (int) box_cli_json_int (res, "cpus", 0),
                          (int) box_cli_json_int (res, "memory_mib", 0),
                          (int) box_cli_json_int (res, "disk_gib", 0));
}

static const char *
or_empty (const char *text)
{
  return text != NULL ? text : "";
}

/* ---- create ------------------------------------------------------------ */

int
box_cmd_create (BoxCli *cli, int argc, char **argv)
{
  g_autofree char *name = NULL;
  g_autofree char *template_name = NULL;
  g_autofree char *image = NULL;
  g_autofree char *idle_action = NULL;
  g_auto(GStrv) env = NULL;
  g_auto(GStrv) labels = NULL;
  g_auto(GStrv) secrets = NULL;
  int cpus = 0, memory_mib = 0, disk_gib = 0, idle_timeout = -1, http_port = 0;
  gboolean protected = FALSE;
  const GOptionEntry entries[] = {
    { "name", 0, 0, G_OPTION_ARG_STRING, &name, N_("The sandbox's name (generated when omitted)"),
      N_("NAME") },
    { "template", 0, 0, G_OPTION_ARG_STRING, &template_name, N_("Template (default base)"),
      N_("TEMPLATE") },
    { "image", 0, 0, G_OPTION_ARG_STRING, &image,
      N_("Image REPOSITORY@sha256:DIGEST instead of a template"), N_("IMAGE") },
    { "cpus", 0, 0, G_OPTION_ARG_INT, &cpus, N_("Number of CPUs"), N_("N") },
    { "memory-mib", 0, 0, G_OPTION_ARG_INT, &memory_mib, N_("Memory in MiB"), N_("MIB") },
    { "disk-gib", 0, 0, G_OPTION_ARG_INT, &disk_gib, N_("Disk size in GiB"), N_("GIB") },
    { "env", 'e', 0, G_OPTION_ARG_STRING_ARRAY, &env,
      N_("An environment variable of every process (repeatable)"), N_("KEY=VALUE") },
    { "label", 'l', 0, G_OPTION_ARG_STRING_ARRAY, &labels, N_("A label (repeatable)"),
      N_("KEY=VALUE") },
    { "secret", 's', 0, G_OPTION_ARG_STRING_ARRAY, &secrets,
      N_("A project secret the sandbox uses: its placeholder is in the variable of that name "
         "(repeatable; see box secrets)"), N_("NAME") },
    { "idle-timeout", 0, 0, G_OPTION_ARG_INT, &idle_timeout,
      N_("Seconds without activity before the idle action (default 300)"), N_("SECONDS") },
    { "idle-action", 0, 0, G_OPTION_ARG_STRING, &idle_action,
      N_("What happens when idle: pause (default), stop or none"), N_("ACTION") },
    { "http-port", 0, 0, G_OPTION_ARG_INT, &http_port,
      N_("The port the sandbox's URL goes to (default 8080)"), N_("PORT") },
    { "protected", 0, 0, G_OPTION_ARG_NONE, &protected, N_("Refuse deletes until unprotected"),
      NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the sandbox as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  JsonObject *sandbox;
  gint64 started;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, "", _("Create a sandbox and wait until it runs."),
                      0, 0, &status))
    return status;

  json_builder_begin_object (builder);
  if (name != NULL) {
    json_builder_set_member_name (builder, "name");
    json_builder_add_string_value (builder, name);
  }
  if (template_name != NULL) {
    json_builder_set_member_name (builder, "template");
    json_builder_add_string_value (builder, template_name);
  }
  if (image != NULL) {
    json_builder_set_member_name (builder, "image");
    json_builder_add_string_value (builder, image);
  }
  if (cpus != 0 || memory_mib != 0 || disk_gib != 0) {
    json_builder_set_member_name (builder, "resources");
    json_builder_begin_object (builder);
    json_builder_set_member_name (builder, "cpus");
    json_builder_add_int_value (builder, cpus);
    json_builder_set_member_name (builder, "memory_mib");
    json_builder_add_int_value (builder, memory_mib);
    json_builder_set_member_name (builder, "disk_gib");
    json_builder_add_int_value (builder, disk_gib);
    json_builder_end_object (builder);
  }
  if (!box_cli_add_map (builder, "env", env, "--env", &error) ||
      !box_cli_add_map (builder, "labels", labels, "--label", &error))
    return box_cli_usage_error (cli, "create", error->message);
  box_cli_add_strv (builder, "secrets", secrets);
  if (idle_timeout >= 0 || idle_action != NULL) {
    json_builder_set_member_name (builder, "idle");
    json_builder_begin_object (builder);
    if (idle_timeout >= 0) {
      json_builder_set_member_name (builder, "timeout_s");
      json_builder_add_int_value (builder, idle_timeout);
    }
    if (idle_action != NULL) {
      json_builder_set_member_name (builder, "action");
      json_builder_add_string_value (builder, idle_action);
    }
    json_builder_end_object (builder);
  }
  if (http_port != 0) {
    json_builder_set_member_name (builder, "http_port");
    json_builder_add_int_value (builder, http_port);
  }
  if (protected) {
    json_builder_set_member_name (builder, "protected");
    json_builder_add_boolean_value (builder, TRUE);
  }
  json_builder_end_object (builder);
  body = json_builder_get_root (builder);
  if (!box_cli_ready (cli, &status))
    return status;

  started = g_get_monotonic_time ();
  answer = box_cli_call_progress (cli, "POST", "/v1/sandboxes", NULL, body,
                                  _("Creating the sandbox…"), &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  if (!JSON_NODE_HOLDS_OBJECT (answer)) {
    g_set_error (&error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL, _("The API's answer is not a sandbox"));
    return box_cli_fail (cli, error);
  }
  sandbox = json_node_get_object (answer);
  if (cli->json) {
    box_cli_print_json (answer);
  } else {
    g_print ("%s\n", or_empty (box_cli_json_string (sandbox, "name")));
    if (isatty (STDERR_FILENO))
      g_printerr (_("Sandbox %s (%s) is %s after %.1f s.\n"),
                  or_empty (box_cli_json_string (sandbox, "name")),
                  or_empty (box_cli_json_string (sandbox, "id")),
                  or_empty (box_cli_json_string (sandbox, "state")),
                  (double) (g_get_monotonic_time () - started) / G_USEC_PER_SEC);
  }
  return BOX_CLI_EXIT_OK;
}

/* ---- list and get ------------------------------------------------------ */

int
box_cmd_list (BoxCli *cli, int argc, char **argv)
{
  g_auto(GStrv) labels = NULL;
  g_autofree char *state = NULL;
  const GOptionEntry entries[] = {
    { "label", 'l', 0, G_OPTION_ARG_STRING_ARRAY, &labels,
      N_("Only sandboxes with this label (repeatable: all must match)"), N_("KEY=VALUE") },
    { "state", 0, 0, G_OPTION_ARG_STRING, &state,
      N_("Only sandboxes in this state (creating, running, paused, stopped, error)"),
      N_("STATE") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the answer as JSON"), NULL },
    { NULL }
  };
  const char *const header[] = { _("NAME"), _("ID"), _("STATE"), _("TEMPLATE"), _("RESOURCES"),
                                 _("CREATED"), NULL };
  g_autoptr(GString) query = g_string_new (NULL);
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(BoxTable) table = NULL;
  JsonArray *array = NULL;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, "", _("List the project's sandboxes."), 0, 0,
                      &status))
    return status;
  for (guint i = 0; labels != NULL && labels[i] != NULL; i++) {
    if (strchr (labels[i], '=') == NULL) {
      g_autofree char *message = g_strdup_printf (_("%s takes KEY=VALUE, not “%s”."), "--label",
                                                  labels[i]);

      return box_cli_usage_error (cli, "list", message);
    }
    box_cli_query_add (query, "label", labels[i]);
  }
  if (state != NULL)
    box_cli_query_add (query, "state", state);
  if (!box_cli_ready (cli, &status))
    return status;

  array = box_cli_get_list (cli, "/v1/sandboxes", query->str, "sandboxes", _("The API's answer has no sandboxes"), &answer, &status);
  if (array == NULL)
    return status;
  table = box_table_new (header);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *sb = json_array_get_object_element (array, i);
    g_autofree char *resources = resources_text (sb);
    g_autofree char *age = box_cli_format_age (box_cli_json_string (sb, "created_at"));
    const char *from = or_empty (box_cli_json_string (sb, "template"));

    if (from[0] == '\0')
      from = or_empty (box_cli_json_string (sb, "image"));
    box_table_add (table, or_empty (box_cli_json_string (sb, "name")),
                       or_empty (box_cli_json_string (sb, "id")),
                       or_empty (box_cli_json_string (sb, "state")), from, resources, age, NULL);
  }
  box_table_print (table);
  return BOX_CLI_EXIT_OK;
}

static char *
map_text (JsonObject *sandbox, const char *member)
{
  JsonObject *map = box_cli_json_object (sandbox, member);
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(GList) names = map != NULL ? json_object_get_members (map) : NULL;

  names = g_list_sort (names, (GCompareFunc) g_strcmp0);
  for (GList *l = names; l != NULL; l = l->next) {
    if (text->len > 0)
      g_string_append (text, ", ");
    g_string_append_printf (text, "%s=%s", (const char *) l->data,
                            or_empty (box_cli_json_string (map, l->data)));
  }
  return g_string_free (g_steal_pointer (&text), FALSE);
}

static void
print_sandbox (JsonObject *sb)
{
  JsonObject *idle = box_cli_json_object (sb, "idle");
  JsonObject *deadline = box_cli_json_object (sb, "deadline");
  g_autofree char *resources = resources_text (sb);
  g_autofree char *env = map_text (sb, "env");
  g_autofree char *labels = map_text (sb, "labels");
  g_autofree char *idle_text = NULL;
  g_autofree char *deadline_text = NULL;
  g_autofree char *http_port = g_strdup_printf ("%d", (int) box_cli_json_int (sb, "http_port", 0));
  const char *from = or_empty (box_cli_json_string (sb, "template"));
  g_autofree char *secrets = box_cli_json_strings (sb, "secrets", ", ");
  BoxCliField fields[16];
  guint n = 0;

  idle_text = g_strdup_printf (_("%s after %d s"), or_empty (box_cli_json_string (idle, "action")),
                               (int) box_cli_json_int (idle, "timeout_s", 0));
  deadline_text = deadline != NULL
    ? g_strdup_printf ("%s %s", or_empty (box_cli_json_string (deadline, "action")),
                       or_empty (box_cli_json_string (deadline, "at")))
    : g_strdup (_("none"));
  if (from[0] == '\0')
    from = or_empty (box_cli_json_string (sb, "image"));

#define FIELD(l, v) (fields[n].label = (l), fields[n].value = (v), n++)
  FIELD (_("Name"), or_empty (box_cli_json_string (sb, "name")));
  FIELD (_("ID"), or_empty (box_cli_json_string (sb, "id")));
  FIELD (_("State"), or_empty (box_cli_json_string (sb, "state")));
  FIELD (box_cli_json_string (sb, "image") != NULL &&
         box_cli_json_string (sb, "image")[0] != '\0' ? _("Image") : _("Template"), from);
  FIELD (_("Resources"), resources);
  FIELD (_("URL"), or_empty (box_cli_json_string (sb, "url")));
  FIELD (_("HTTP port"), http_port);
  FIELD (_("Labels"), labels);
  FIELD (_("Environment"), env);
  FIELD (_("Secrets"), secrets);
  FIELD (_("Idle"), idle_text);
  FIELD (_("Deadline"), deadline_text);
  FIELD (_("Protected"), box_cli_json_bool (sb, "protected") ? _("yes") : _("no"));
  FIELD (_("Created"), or_empty (box_cli_json_string (sb, "created_at")));
  FIELD (_("Last active"), or_empty (box_cli_json_string (sb, "last_active_at")));
#undef FIELD

  g_assert (n <= G_N_ELEMENTS (fields));
  box_cli_print_fields (fields, n);
}

int
box_cmd_get (BoxCli *cli, int argc, char **argv)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the sandbox as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX"), _("Show a sandbox."), 1, 1,
                      &status) ||
      !box_cli_ready (cli, &status))
    return status;
  path = box_cli_sandbox_path (argv[1], "");
  answer = box_cli_call (cli, "GET", path, NULL, NULL, &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  if (cli->json || !JSON_NODE_HOLDS_OBJECT (answer))
    box_cli_print_json (answer);
  else
    print_sandbox (json_node_get_object (answer));
  return BOX_CLI_EXIT_OK;
}

/* ---- delete, pause, stop, wake ----------------------------------------- */

/* One call per sandbox named; goes on after a failure and exits with the
 * first failure's status. */
static int
for_each_sandbox (BoxCli *cli, int argc, char **argv, const char *method, const char *suffix,
                  const char *summary, gboolean has_json)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print each sandbox as JSON"), NULL },
    { NULL }
  };
  int status = BOX_CLI_EXIT_OK;

  if (!box_cli_parse (cli, &argc, &argv, has_json ? entries : entries + 1, _("SANDBOX…"), summary,
                      1, G_MAXUINT, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  for (int i = 1; i < argc; i++) {
    g_autofree char *path = box_cli_sandbox_path (argv[i], suffix);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) answer = box_cli_call (cli, method, path, NULL, NULL, &error);

    if (answer == NULL) {
      int failed = box_cli_fail (cli, error);

      if (status == BOX_CLI_EXIT_OK)
        status = failed;
      continue;
    }
    if (cli->json)
      box_cli_print_json (answer);
    else
      g_print ("%s\n", argv[i]);
  }
  return status;
}

int
box_cmd_delete (BoxCli *cli, int argc, char **argv)
{
  return for_each_sandbox (cli, argc, argv, "DELETE", "",
                           _("Delete sandboxes with their disks, snapshots and checkpoints."), FALSE);
}

int
box_cmd_pause (BoxCli *cli, int argc, char **argv)
{
  return for_each_sandbox (cli, argc, argv, "POST", "/pause",
                           _("Pause sandboxes: memory and disk are kept, processes resume on wake."),
                           TRUE);
}

int
box_cmd_stop (BoxCli *cli, int argc, char **argv)
{
  return for_each_sandbox (cli, argc, argv, "POST", "/stop",
                           _("Stop sandboxes: the disk is kept, processes end."), TRUE);
}

int
box_cmd_wake (BoxCli *cli, int argc, char **argv)
{
  return for_each_sandbox (cli, argc, argv, "POST", "/wake", _("Wake sandboxes."), TRUE);
}
