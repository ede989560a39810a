/* box-events.c: `box events`, following GET /v1/events (Server-Sent Events).
 *
 * One line per event: time, type, sandbox (its name when known, and ID),
 * then the detail as key=value; --json prints each event's data as it came,
 * one JSON object a line.  Runs until interrupted or until the API ends the
 * stream (exit status 3: events can be missed, see the spec's Events).
 */
#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "box-cli.h"

#define ERROR_BODY_MAX (1024 * 1024)

typedef struct {
  BoxCli     *cli;
  GHashTable *names;   /* sandbox id -> name */
} Events;

static void
remember_names (Events *events, JsonNode *list)
{
  JsonObject *root = JSON_NODE_HOLDS_OBJECT (list) ? json_node_get_object (list) : NULL;
  JsonNode *sandboxes = root != NULL ? json_object_get_member (root, "sandboxes") : NULL;
  JsonArray *array;

  if (sandboxes == NULL || !JSON_NODE_HOLDS_ARRAY (sandboxes))
    return;
  array = json_node_get_array (sandboxes);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *sb = json_array_get_object_element (array, i);
    const char *id = box_cli_json_string (sb, "id");
    const char *name = box_cli_json_string (sb, "name");

    if (id != NULL && name != NULL)
      g_hash_table_insert (events->names, g_strdup (id), g_strdup (name));
  }
}

/* The sandbox's name: from the list read at the start, or asked once (a
 * GET of a sandbox does not wake it); "" when it is gone. */
static const char *
name_of (Events *events, const char *id)
{
  const char *name = g_hash_table_lookup (events->names, id);
  g_autofree char *path = NULL;
  g_autoptr(JsonNode) answer = NULL;

  if (name != NULL)
    return name;
  path = box_cli_sandbox_path (id, "");
  answer = box_cli_call (events->cli, "GET", path, NULL, NULL, NULL);
  if (answer != NULL && JSON_NODE_HOLDS_OBJECT (answer))
    name = box_cli_json_string (json_node_get_object (answer), "name");
  g_hash_table_insert (events->names, g_strdup (id), g_strdup (name != NULL ? name : ""));
  return g_hash_table_lookup (events->names, id);
}

static void
append_value (GString *line, JsonNode *node)
{
  if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING) {
    g_string_append (line, json_node_get_string (node));
  } else {
    g_autofree char *text = json_to_string (node, FALSE);

    g_string_append (line, text);
  }
}

static void
print_event (Events *events, const char *type, const char *data)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GString) line = g_string_new (NULL);
  JsonObject *event = NULL;
  JsonObject *detail;
  const char *id;
  const char *name;

  if (events->cli->json) {
    g_print ("%s\n", data);
    return;
  }
  if (json_parser_load_from_data (parser, data, -1, NULL) &&
      JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    event = json_node_get_object (json_parser_get_root (parser));
  if (event == NULL) {
    g_print ("%s %s\n", type != NULL ? type : "message", data);
    return;
  }
  id = box_cli_json_string (event, "sandbox");
  name = id != NULL ? name_of (events, id) : "";
  g_string_append_printf (line, "%s  %-20s  ", box_cli_json_string (event, "at") ?: "",
                          box_cli_json_string (event, "type") ?: (type != NULL ? type : ""));
  if (name[0] != '\0')
    g_string_append_printf (line, "%s (%s)", name, id);
  else if (id != NULL)
    g_string_append (line, id);
  detail = box_cli_json_object (event, "detail");
  if (detail != NULL) {
    g_autoptr(GList) members = json_object_get_members (detail);

    members = g_list_sort (members, (GCompareFunc) g_strcmp0);
    for (GList *l = members; l != NULL; l = l->next) {
      g_string_append_printf (line, "  %s=", (const char *) l->data);
      append_value (line, json_object_get_member (detail, l->data));
    }
  }
  g_print ("%s\n", line->str);
}

int
box_cmd_events (BoxCli *cli, int argc, char **argv)
{
  g_autofree char *sandbox = NULL;
  const GOptionEntry entries[] = {
    { "sandbox", 's', 0, G_OPTION_ARG_STRING, &sandbox, N_("Only this sandbox's events"),
      N_("SANDBOX") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print each event's data as JSON, one a line"),
      NULL },
    { NULL }
  };
  g_autoptr(GString) query = g_string_new (NULL);
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) body = NULL;
  g_autoptr(GDataInputStream) lines = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) data = g_string_new (NULL);
  g_autofree char *type = NULL;
  g_autoptr(GHashTable) names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  Events events = { .cli = cli, .names = names };
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, "",
                      _("Follow the project's events until interrupted."), 0, 0, &status))
    return status;
  if (sandbox != NULL)
    box_cli_query_add (query, "sandbox", sandbox);
  if (!box_cli_ready (cli, &status))
    return status;
  if (!cli->json) {
    g_autoptr(JsonNode) list = box_cli_call (cli, "GET", "/v1/sandboxes", NULL, NULL, &error);

    if (list == NULL)
      return box_cli_fail (cli, error);
    remember_names (&events, list);
  }

  msg = box_cli_message_new (cli, "GET", "/v1/events", query->str);
  soup_message_headers_replace (soup_message_get_request_headers (msg), "Accept",
                                "text/event-stream");
  body = soup_session_send (cli->session, msg, NULL, &error);
  if (body == NULL) {
    g_autoptr(GError) network = box_cli_error_network (cli->url, error);

    return box_cli_fail (cli, network);
  }
  if (soup_message_get_status (msg) != SOUP_STATUS_OK) {
    g_autoptr(GBytes) bytes = g_input_stream_read_bytes (body, ERROR_BODY_MAX, NULL, NULL);
    g_autoptr(GError) answer = box_cli_error_from_answer (soup_message_get_status (msg),
                                                          soup_message_get_reason_phrase (msg),
                                                          bytes);

    return box_cli_fail (cli, answer);
  }

  lines = g_data_input_stream_new (body);
  g_data_input_stream_set_newline_type (lines, G_DATA_STREAM_NEWLINE_TYPE_ANY);
  for (;;) {
    gsize len = 0;
    g_autofree char *line = g_data_input_stream_read_line_utf8 (lines, &len, NULL, &error);

    if (line == NULL)
      break;
    if (line[0] == '\0') {
      /* a blank line ends an event */
      if (data->len > 0)
        print_event (&events, type, data->str);
      g_string_truncate (data, 0);
      g_clear_pointer (&type, g_free);
      continue;
    }
    if (line[0] == ':')
      continue;   /* a comment: keep-alive */
    if (g_str_has_prefix (line, "event:")) {
      g_free (type);
      type = g_strdup (g_strchug (line + strlen ("event:")));
    } else if (g_str_has_prefix (line, "data:")) {
      const char *value = line + strlen ("data:");

      if (value[0] == ' ')
        value++;
      if (data->len > 0)
        g_string_append_c (data, '\n');
      g_string_append (data, value);
    }
  }
  if (error == NULL)
    error = g_error_new (BOX_CLI_ERROR, BOX_CLI_ERROR_UNREACHABLE, _("The API ended the event stream"));
  else {
    g_autoptr(GError) network = box_cli_error_network (cli->url, error);

    g_clear_error (&error);
    error = g_steal_pointer (&network);
  }
  return box_cli_fail (cli, error);
}
