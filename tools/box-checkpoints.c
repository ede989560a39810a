/* box-checkpoints.c: checkpoint, checkpoints, restore, fork,
 * checkpoint-delete. */
#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "box-cli.h"

static const char *
or_empty (const char *text)
{
  return text != NULL ? text : "";
}

/* An answer that must be an object, or a protocol error naming @what. */
static JsonObject *
answer_object (JsonNode *answer, const char *what, GError **error)
{
  if (answer == NULL || !JSON_NODE_HOLDS_OBJECT (answer)) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL, _("The API's answer is not %s"), what);
    return NULL;
  }
  return json_node_get_object (answer);
}

/* Prints @member of @answer (or the whole answer with --json). */
static int
print_answer (BoxCli *cli, JsonNode *answer, const char *member, const char *what)
{
  g_autoptr(GError) error = NULL;
  JsonObject *object = answer_object (answer, what, &error);

  if (object == NULL)
    return box_cli_fail (cli, error);
  if (cli->json)
    box_cli_print_json (answer);
  else
    g_print ("%s\n", or_empty (box_cli_json_string (object, member)));
  return BOX_CLI_EXIT_OK;
}

/* POST .../checkpoints: the new checkpoint's answer, or NULL. */
static JsonNode *
take_checkpoint (BoxCli *cli, const char *sandbox, const char *comment, gboolean disk_only,
                 GError **error)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) body = NULL;
  g_autofree char *path = box_cli_sandbox_path (sandbox, "/checkpoints");

  json_builder_begin_object (builder);
  if (comment != NULL) {
    json_builder_set_member_name (builder, "comment");
    json_builder_add_string_value (builder, comment);
  }
  json_builder_set_member_name (builder, "memory");
  json_builder_add_boolean_value (builder, !disk_only);
  json_builder_end_object (builder);
  body = json_builder_get_root (builder);
  return box_cli_call_progress (cli, "POST", path, NULL, body, _("Taking the checkpoint…"), error);
}

int
box_cmd_checkpoint (BoxCli *cli, int argc, char **argv)
{
  g_autofree char *comment = NULL;
  gboolean disk_only = FALSE;
  const GOptionEntry entries[] = {
    { "comment", 'm', 0, G_OPTION_ARG_STRING, &comment, N_("A comment (at most 256 bytes)"),
      N_("TEXT") },
    { "disk-only", 0, 0, G_OPTION_ARG_NONE, &disk_only,
      N_("Keep the disk only: nothing pauses, a restore boots fresh"), NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the checkpoint as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX"),
                      _("Take a checkpoint of a sandbox (memory and disk, or --disk-only) and "
                        "print its ID."), 1, 1, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  answer = take_checkpoint (cli, argv[1], comment, disk_only, &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  return print_answer (cli, answer, "id", _("a checkpoint"));
}

int
box_cmd_checkpoints (BoxCli *cli, int argc, char **argv)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the answer as JSON"), NULL },
    { NULL }
  };
  const char *const header[] = { _("ID"), _("MEMORY"), _("AUTO"), _("CREATED"), _("COMMENT"),
                                 NULL };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(BoxTable) table = NULL;
  g_autofree char *path = NULL;
  JsonArray *array;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX"),
                      _("List a sandbox's checkpoints, oldest first."), 1, 1, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  path = box_cli_sandbox_path (argv[1], "/checkpoints");
  array = box_cli_get_list (cli, path, NULL, "checkpoints",
                            _("The API's answer has no checkpoints"), &answer, &status);
  if (array == NULL)
    return status;
  table = box_table_new (header);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *cp = json_array_get_object_element (array, i);
    g_autofree char *age = box_cli_format_age (box_cli_json_string (cp, "created_at"));

    box_table_add (table, or_empty (box_cli_json_string (cp, "id")),
                   box_cli_json_bool (cp, "memory") ? _("yes") : _("no"),
                   box_cli_json_bool (cp, "auto") ? _("yes") : _("no"), age,
                   or_empty (box_cli_json_string (cp, "comment")), NULL);
  }
  box_table_print (table);
  return BOX_CLI_EXIT_OK;
}

int
box_cmd_restore (BoxCli *cli, int argc, char **argv)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the sandbox as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *escaped = NULL;
  g_autofree char *suffix = NULL;
  g_autofree char *path = NULL;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX CHECKPOINT"),
                      _("Restore a checkpoint; the state it replaces is kept first as an "
                        "automatic checkpoint auto-N."), 2, 2, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  escaped = g_uri_escape_string (argv[2], NULL, FALSE);
  suffix = g_strdup_printf ("/checkpoints/%s/restore", escaped);
  path = box_cli_sandbox_path (argv[1], suffix);
  answer = box_cli_call_progress (cli, "POST", path, NULL, NULL, _("Restoring…"), &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  return print_answer (cli, answer, "name", _("a sandbox"));
}

int
box_cmd_checkpoint_delete (BoxCli *cli, int argc, char **argv)
{
  g_autofree char *collection = NULL;
  int status = BOX_CLI_EXIT_OK;

  if (!box_cli_parse (cli, &argc, &argv, (const GOptionEntry[]) { { NULL } },
                      _("SANDBOX CHECKPOINT…"), _("Delete checkpoints of a sandbox."), 2,
                      G_MAXUINT, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  collection = box_cli_sandbox_path (argv[1], "/checkpoints");
  return box_cli_delete_each (cli, collection, argv + 2, argc - 2, NULL);
}

/* The newest checkpoint of @sandbox (NULL with no error when it has none). */
static char *
newest_checkpoint (BoxCli *cli, const char *sandbox, GError **error)
{
  g_autofree char *path = box_cli_sandbox_path (sandbox, "/checkpoints");
  g_autoptr(JsonNode) answer = box_cli_call (cli, "GET", path, NULL, NULL, error);
  JsonObject *object;
  JsonArray *array;
  guint n;

  if (answer == NULL)
    return NULL;
  object = answer_object (answer, _("a list of checkpoints"), error);
  if (object == NULL)
    return NULL;
  if (!json_object_has_member (object, "checkpoints") ||
      !JSON_NODE_HOLDS_ARRAY (json_object_get_member (object, "checkpoints"))) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                 _("The API's answer has no checkpoints"));
    return NULL;
  }
  array = json_object_get_array_member (object, "checkpoints");
  n = json_array_get_length (array);
  if (n == 0)
    return NULL;
  return g_strdup (box_cli_json_string (json_array_get_object_element (array, n - 1), "id"));
}

int
box_cmd_fork (BoxCli *cli, int argc, char **argv)
{
  g_autofree char *name = NULL;
  g_auto(GStrv) secrets = NULL;
  gboolean fresh = FALSE;
  gboolean no_secrets = FALSE;
  const GOptionEntry entries[] = {
    { "name", 0, 0, G_OPTION_ARG_STRING, &name, N_("The fork's name (generated when omitted)"),
      N_("NAME") },
    { "secret", 's', 0, G_OPTION_ARG_STRING_ARRAY, &secrets,
      N_("A project secret the fork uses instead of the source's (repeatable)"), N_("NAME") },
    { "no-secrets", 0, 0, G_OPTION_ARG_NONE, &no_secrets,
      N_("The fork uses no secrets (by default it uses the source's)"), NULL },
    { "fresh", 0, 0, G_OPTION_ARG_NONE, &fresh,
      N_("Take a new checkpoint and fork it, even when the sandbox has one"), NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the fork as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *sandbox = NULL;
  g_autofree char *checkpoint = NULL;
  const char *colon;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX[:CHECKPOINT]"),
                      _("Create a sandbox from a checkpoint: the one named, else the newest, "
                        "else (or with --fresh) a new one."), 1, 1, &status))
    return status;
  colon = strchr (argv[1], ':');
  sandbox = colon != NULL ? g_strndup (argv[1], (gsize) (colon - argv[1])) : g_strdup (argv[1]);
  if (colon != NULL)
    checkpoint = g_strdup (colon + 1);
  if (sandbox[0] == '\0' || (checkpoint != NULL && checkpoint[0] == '\0'))
    return box_cli_usage_error (cli, "fork", _("Name a sandbox, and a checkpoint after “:”."));
  if (checkpoint != NULL && fresh)
    return box_cli_usage_error (cli, "fork", _("--fresh takes no checkpoint."));
  if (secrets != NULL && no_secrets)
    return box_cli_usage_error (cli, "fork", _("--secret and --no-secrets contradict each other."));
  if (!box_cli_ready (cli, &status))
    return status;

  if (checkpoint == NULL && !fresh) {
    checkpoint = newest_checkpoint (cli, sandbox, &error);
    if (checkpoint == NULL && error != NULL)
      return box_cli_fail (cli, error);
  }
  if (checkpoint == NULL) {
    g_autoptr(JsonNode) taken = take_checkpoint (cli, sandbox, NULL, FALSE, &error);
    JsonObject *object = taken != NULL ? answer_object (taken, _("a checkpoint"), &error) : NULL;

    if (object == NULL)
      return box_cli_fail (cli, error);
    checkpoint = g_strdup (or_empty (box_cli_json_string (object, "id")));
  }

  json_builder_begin_object (builder);
  if (name != NULL) {
    json_builder_set_member_name (builder, "name");
    json_builder_add_string_value (builder, name);
  }
  json_builder_set_member_name (builder, "from");
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "sandbox");
  json_builder_add_string_value (builder, sandbox);
  json_builder_set_member_name (builder, "checkpoint");
  json_builder_add_string_value (builder, checkpoint);
  json_builder_end_object (builder);
  if (no_secrets) {
    json_builder_set_member_name (builder, "secrets");
    json_builder_begin_array (builder);
    json_builder_end_array (builder);
  }
  box_cli_add_strv (builder, "secrets", secrets);
  json_builder_end_object (builder);
  body = json_builder_get_root (builder);
  answer = box_cli_call_progress (cli, "POST", "/v1/sandboxes", NULL, body, _("Forking…"), &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  return print_answer (cli, answer, "name", _("a sandbox"));
}
