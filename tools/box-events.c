/* box-events.c: `box events`, following GET /v1/events (Server-Sent Events).
 *
 * One line per event: time, type, sandbox (its name when known, and ID),
 * then the detail as key=value; --json prints each event's data as it came,
 * one JSON object a line.  Runs until interrupted.
 *
 * Events are best effort (the spec's Events): when the stream ends (boxd
 * restarting, a dropped connection) box says so on stderr and connects
 * again, with a growing pause, for as long as the API cannot be reached or
 * answers 5xx; any other answer (a revoked key, a deleted --sandbox) ends
 * it with that error.  After a reconnection it reads the current state
 * (GET /v1/sandboxes) as the spec asks of a reconnecting client, and in text
 * mode prints a "(state)" line for every sandbox whose state changed
 * unseen.  The stream is opened before the state is read, so no change falls
 * between the two.  --no-reconnect ends instead (exit status 3).
 */
#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "box-cli.h"

#define RETRY_FIRST_MS 250
#define RETRY_MAX_MS   5000

typedef struct {
  BoxCli     *cli;
  const char *sandbox; /* --sandbox: an ID or a name, or NULL */
  const char *query;
  GHashTable *names;   /* sandbox id -> name */
  GHashTable *states;  /* sandbox id -> its state as last seen (text mode) */
} Events;

/* The state an event leaves its sandbox in, NULL when it does not say. */
static const char *
state_after (const char *type)
{
  static const struct { const char *type, *state; } map[] = {
    { "sandbox.running", "running" }, { "sandbox.paused", "paused" },
    { "sandbox.stopped", "stopped" }, { "sandbox.error", "error" },
    { "sandbox.deleted", "deleted" }, { "checkpoint.restored", "running" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (map); i++)
    if (g_strcmp0 (type, map[i].type) == 0)
      return map[i].state;
  return NULL;
}

static void
print_state (const char *id, const char *name, const char *state)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *at = g_date_time_format (now, "%Y-%m-%dT%H:%M:%SZ");

  if (name != NULL && name[0] != '\0')
    g_print ("%s  %-20s  %s (%s)  state=%s\n", at, "(state)", name, id, state);
  else
    g_print ("%s  %-20s  %s  state=%s\n", at, "(state)", id, state);
}

/* Reads the project's sandboxes: their names, and (text mode) their states;
 * with @report, a "(state)" line for each one followed whose state is not
 * the one last seen: changed, created or deleted while no stream was read. */
static gboolean
read_state (Events *events, gboolean report, GError **error)
{
  g_autoptr(JsonNode) list = box_cli_call (events->cli, "GET", "/v1/sandboxes", NULL, NULL, error);
  JsonObject *root = list != NULL && JSON_NODE_HOLDS_OBJECT (list) ? json_node_get_object (list) : NULL;
  JsonNode *sandboxes = root != NULL ? json_object_get_member (root, "sandboxes") : NULL;
  g_autoptr(GHashTable) listed = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter iter;
  gpointer id, state;
  JsonArray *array;

  if (list == NULL)
    return FALSE;
  if (sandboxes == NULL || !JSON_NODE_HOLDS_ARRAY (sandboxes))
    return TRUE;
  array = json_node_get_array (sandboxes);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *sb = json_array_get_object_element (array, i);
    const char *sid = sb != NULL ? box_cli_json_string (sb, "id") : NULL;
    const char *name = sb != NULL ? box_cli_json_string (sb, "name") : NULL;
    const char *now = sb != NULL ? box_cli_json_string (sb, "state") : NULL;
    const char *was;

    if (sid == NULL || name == NULL || now == NULL)
      continue;
    g_hash_table_insert (events->names, g_strdup (sid), g_strdup (name));
    if (events->sandbox != NULL && !g_str_equal (events->sandbox, sid) &&
        !g_str_equal (events->sandbox, name))
      continue;
    g_hash_table_add (listed, (gpointer) sid);
    was = g_hash_table_lookup (events->states, sid);
    if (report && g_strcmp0 (was, now) != 0)
      print_state (sid, name, now);
    g_hash_table_insert (events->states, g_strdup (sid), g_strdup (now));
  }
  g_hash_table_iter_init (&iter, events->states);
  while (g_hash_table_iter_next (&iter, &id, &state)) {
    if (g_hash_table_contains (listed, id))
      continue;
    if (report && !g_str_equal (state, "deleted"))
      print_state (id, g_hash_table_lookup (events->names, id), "deleted");
    g_hash_table_iter_remove (&iter);
  }
  return TRUE;
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
  const char *state;

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
  state = state_after (box_cli_json_string (event, "type"));
  if (id != NULL && state != NULL)
    g_hash_table_insert (events->states, g_strdup (id), g_strdup (state));
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

/* GET /v1/events: the answer's body, or an error (a BOX_ERROR for an
 * error answer, BOX_CLI_ERROR_UNREACHABLE when no answer came). */
static GInputStream *
open_stream (Events *events, GError **error)
{
  BoxCli *cli = events->cli;
  g_autoptr(SoupMessage) msg = box_cli_message_new (cli, "GET", "/v1/events", events->query);

  soup_message_headers_replace (soup_message_get_request_headers (msg), "Accept",
                                "text/event-stream");
  return box_cli_send_stream (cli, msg, error);
}

/* Prints the events of @body until it ends; returns why it ended. */
static GError *
follow (Events *events, GInputStream *body)
{
  g_autoptr(GDataInputStream) lines = g_data_input_stream_new (body);
  g_autoptr(GString) data = g_string_new (NULL);
  g_autofree char *type = NULL;
  g_autoptr(GError) error = NULL;

  g_data_input_stream_set_newline_type (lines, G_DATA_STREAM_NEWLINE_TYPE_ANY);
  for (;;) {
    gsize len = 0;
    g_autofree char *line = g_data_input_stream_read_line_utf8 (lines, &len, NULL, &error);

    if (line == NULL)
      break;
    if (line[0] == '\0') {
      /* a blank line ends an event */
      if (data->len > 0)
        print_event (events, type, data->str);
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
    return g_error_new (BOX_CLI_ERROR, BOX_CLI_ERROR_UNREACHABLE, _("The API ended the event stream"));
  return box_cli_error_network (events->cli->url, error);
}

/* Worth another try: no answer, or the API's own trouble (5xx). */
static gboolean
transient (const GError *error)
{
  if (error->domain == BOX_CLI_ERROR)
    return error->code == BOX_CLI_ERROR_UNREACHABLE;
  return error->domain == BOX_ERROR && box_error_http_status (error->code) >= 500;
}

/* Opens the stream again (then reads the state, see the top), pausing
 * longer between tries; NULL with the error that is not worth a retry. */
static GInputStream *
reconnect (Events *events, GError **error)
{
  guint pause_ms = RETRY_FIRST_MS;

  for (;;) {
    g_autoptr(GInputStream) body = NULL;
    g_autoptr(GError) local = NULL;

    g_usleep ((gulong) pause_ms * 1000);
    pause_ms = MIN (pause_ms * 2, RETRY_MAX_MS);
    body = open_stream (events, &local);
    if (body != NULL && read_state (events, !events->cli->json, &local))
      return g_steal_pointer (&body);
    if (!transient (local)) {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  }
}

int
box_cmd_events (BoxCli *cli, int argc, char **argv)
{
  g_autofree char *sandbox = NULL;
  gboolean no_reconnect = FALSE;
  const GOptionEntry entries[] = {
    { "sandbox", 's', 0, G_OPTION_ARG_STRING, &sandbox, N_("Only this sandbox's events"),
      N_("SANDBOX") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print each event's data as JSON, one a line"),
      NULL },
    { "no-reconnect", 0, 0, G_OPTION_ARG_NONE, &no_reconnect,
      N_("End when the stream ends instead of connecting again"), NULL },
    { NULL }
  };
  g_autoptr(GString) query = g_string_new (NULL);
  g_autoptr(GInputStream) body = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr(GHashTable) states = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  Events events = { .cli = cli, .names = names, .states = states };
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, "",
                      _("Follow the project's events until interrupted."), 0, 0, &status))
    return status;
  if (sandbox != NULL)
    box_cli_query_add (query, "sandbox", sandbox);
  events.sandbox = sandbox;
  events.query = query->str;
  if (!box_cli_ready (cli, &status))
    return status;
  body = open_stream (&events, &error);
  if (body == NULL || !read_state (&events, FALSE, &error))
    return box_cli_fail (cli, error);
  for (;;) {
    g_autoptr(GError) ended = follow (&events, body);

    g_clear_object (&body);
    if (no_reconnect)
      return box_cli_fail (cli, ended);
    g_printerr (_("box: %s; connecting again\n"), ended->message);
    body = reconnect (&events, &error);
    if (body == NULL)
      return box_cli_fail (cli, error);
    g_printerr (_("box: following the events again (any in between were missed)\n"));
  }
}
