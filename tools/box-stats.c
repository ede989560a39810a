/* box-stats.c: `box stats SANDBOX [--days N]`: the usage stats of a
 * sandbox's URLs (GET /v1/sandboxes/{sandbox}/stats) as a table of the
 * days, a total, and a text sparkline of the requests per day. */
#include "config.h"

#include <glib/gi18n.h>

#include "box-cli.h"

static const char *const bars[] = { "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█" };

/* One bar per day, scaled to the busiest day; a quiet day is the lowest. */
static char *
sparkline (JsonArray *days)
{
  GString *line = g_string_new (NULL);
  gint64 max = 0;

  for (guint i = 0; i < json_array_get_length (days); i++)
    max = MAX (max, box_cli_json_int (json_array_get_object_element (days, i), "requests", 0));
  for (guint i = 0; i < json_array_get_length (days); i++) {
    gint64 n = box_cli_json_int (json_array_get_object_element (days, i), "requests", 0);
    guint level = n <= 0 || max <= 0 ? 0 : 1 + (guint) ((n - 1) * 7 / max);

    g_string_append (line, bars[MIN (level, 7u)]);
  }
  return g_string_free (line, FALSE);
}

static void
add_row (BoxTable *table, const char *label, JsonObject *o, const char *visitors)
{
  static const char *const fields[] = {
    "requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "websockets",
    "key_requests",
  };
  g_autofree char *sent = box_cli_format_size ((guint64) MAX (0, box_cli_json_int (o, "bytes_sent",
                                                                                   0)));
  char **row = g_new0 (char *, G_N_ELEMENTS (fields) + 4);   /* the table takes it */
  guint n = 0;

  row[n++] = g_strdup (label);
  for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
    row[n++] = g_strdup_printf ("%" G_GINT64_FORMAT, box_cli_json_int (o, fields[i], 0));
  row[n++] = g_strdup (sent);
  row[n++] = g_strdup (visitors);
  box_table_add_row (table, row);
}

int
box_cmd_stats (BoxCli *cli, int argc, char **argv)
{
  gint days = 7;
  const GOptionEntry entries[] = {
    { "days", 0, 0, G_OPTION_ARG_INT, &days, N_("The last N days, 1 to 90 (default 7)"), N_("N") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the answer as JSON"), NULL },
    { NULL }
  };
  const char *const header[] = {
    _("DAY"), _("REQUESTS"), "2XX", "3XX", "4XX", "5XX", _("WEBSOCKETS"), _("WITH KEY"),
    _("SENT"), _("VISITORS"), NULL,
  };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(BoxTable) table = NULL;
  g_autoptr(GString) query = g_string_new (NULL);
  g_autofree char *path = NULL;
  g_autofree char *line = NULL;
  g_autofree char *visitor_days = NULL;
  JsonArray *array;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX"),
                      _("Show the usage stats of a sandbox's URLs per UTC day, today last."), 1,
                      1, &status))
    return status;
  if (days < 1 || days > 90)
    return box_cli_usage_error (cli, "stats", _("--days takes 1 to 90"));
  if (!box_cli_ready (cli, &status))
    return status;
  g_string_append_printf (query, "days=%d", days);
  path = box_cli_sandbox_path (argv[1], "/stats");
  array = box_cli_get_list (cli, path, query->str, "days", _("The API's answer has no days"),
                            &answer, &status);
  if (array == NULL)
    return status;
  table = box_table_new (header);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *day = json_array_get_object_element (array, i);
    g_autofree char *visitors = g_strdup_printf ("%" G_GINT64_FORMAT,
                                                 box_cli_json_int (day, "visitors", 0));

    add_row (table, box_cli_json_string (day, "day") ?: "", day, visitors);
  }
  visitor_days = g_strdup_printf ("%" G_GINT64_FORMAT,
                                  box_cli_json_int (json_node_get_object (answer), "visitor_days",
                                                    0));
  add_row (table, _("total"), box_cli_json_object (json_node_get_object (answer), "total"),
           visitor_days);
  box_table_print (table);
  line = sparkline (array);
  g_print ("%s %s\n", _("Requests per day:"), line);
  return BOX_CLI_EXIT_OK;
}
