/* box-tasks.c: tasks, task-put, task-delete. */
#include "config.h"

#include <glib/gi18n.h>

#include "box-cli.h"

/* "/v1/sandboxes/<sandbox>/tasks/<escaped name>" */
static char *
task_path (const char *sandbox, const char *name)
{
  g_autofree char *escaped = g_uri_escape_string (name, NULL, FALSE);
  g_autofree char *suffix = g_strdup_printf ("/tasks/%s", escaped);

  return box_cli_sandbox_path (sandbox, suffix);
}

/* The time left until @rfc3339, as "5 minutes" style text. */
static char *
format_left (const char *rfc3339)
{
  g_autoptr(GDateTime) then = rfc3339 != NULL ? g_date_time_new_from_iso8601 (rfc3339, NULL) : NULL;
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  gint64 seconds;

  if (then == NULL)
    return g_strdup (rfc3339 != NULL ? rfc3339 : "");
  seconds = MAX (g_date_time_difference (then, now) / G_USEC_PER_SEC, 0);
  if (seconds < 60)
    return g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%d second", "%d seconds",
                                         (gulong) seconds), (int) seconds);
  return g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%d minute", "%d minutes",
                                       (gulong) (seconds / 60)), (int) (seconds / 60));
}

int
box_cmd_tasks (BoxCli *cli, int argc, char **argv)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the answer as JSON"), NULL },
    { NULL }
  };
  const char *const header[] = { _("NAME"), _("STARTED"), _("EXPIRES IN"), NULL };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(BoxTable) table = NULL;
  g_autofree char *path = NULL;
  JsonArray *array;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX"),
                      _("List a sandbox's live tasks (they keep it from idling); the sandbox is "
                        "not woken."), 1, 1, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  path = box_cli_sandbox_path (argv[1], "/tasks");
  array = box_cli_get_list (cli, path, NULL, "tasks", _("The API's answer has no tasks"),
                            &answer, &status);
  if (array == NULL)
    return status;
  table = box_table_new (header);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *task = json_array_get_object_element (array, i);
    const char *name = box_cli_json_string (task, "name");
    g_autofree char *age = box_cli_format_age (box_cli_json_string (task, "started_at"));
    g_autofree char *left = format_left (box_cli_json_string (task, "expires_at"));

    box_table_add (table, name != NULL ? name : "", age, left, NULL);
  }
  box_table_print (table);
  return BOX_CLI_EXIT_OK;
}

int
box_cmd_task_put (BoxCli *cli, int argc, char **argv)
{
  int expire_s = 0;
  const GOptionEntry entries[] = {
    { "expire", 'e', 0, G_OPTION_ARG_INT, &expire_s,
      N_("Seconds until it expires, 1 to 3600 (default 3600)"), N_("SECONDS") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the task as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX NAME"),
                      _("Declare a task that keeps a sandbox from idling until it expires or is "
                        "deleted; on a live task, move its expiry."), 2, 2, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  json_builder_begin_object (builder);
  if (expire_s != 0) {
    json_builder_set_member_name (builder, "expire_s");
    json_builder_add_int_value (builder, expire_s);
  }
  json_builder_end_object (builder);
  body = json_builder_get_root (builder);
  path = task_path (argv[1], argv[2]);
  answer = box_cli_call (cli, "PUT", path, NULL, body, &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  if (cli->json) {
    box_cli_print_json (answer);
  } else if (JSON_NODE_HOLDS_OBJECT (answer)) {
    const char *expires = box_cli_json_string (json_node_get_object (answer), "expires_at");

    /* TRANSLATORS: a task's name, then a time (RFC 3339) */
    g_print (_("%s expires at %s\n"), argv[2], expires != NULL ? expires : "?");
  }
  return BOX_CLI_EXIT_OK;
}

int
box_cmd_task_delete (BoxCli *cli, int argc, char **argv)
{
  g_autofree char *collection = NULL;
  int status = BOX_CLI_EXIT_OK;

  if (!box_cli_parse (cli, &argc, &argv, (const GOptionEntry[]) { { NULL } },
                      _("SANDBOX NAME…"), _("Delete tasks of a sandbox."), 2, G_MAXUINT,
                      &status) ||
      !box_cli_ready (cli, &status))
    return status;
  collection = box_cli_sandbox_path (argv[1], "/tasks");
  return box_cli_delete_each (cli, collection, argv + 2, argc - 2, NULL);
}
