/* box-output.c: what `box` prints -- JSON, tables, ages and sizes -- and
 * lenient lookups in the API's JSON answers. */
#include "config.h"

#include <glib/gi18n.h>

#include "box-cli.h"

void
box_cli_print_json (JsonNode *node)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autofree char *text = NULL;

  json_generator_set_pretty (generator, TRUE);
  json_generator_set_root (generator, node);
  text = json_generator_to_data (generator, NULL);
  g_print ("%s\n", text);
}

void
box_cli_print_fields (const BoxCliField *fields, guint n_fields)
{
  glong width = 0;

  for (guint i = 0; i < n_fields; i++)
    width = MAX (width, g_utf8_strlen (fields[i].label, -1));
  for (guint i = 0; i < n_fields; i++) {
    g_autoptr(GString) line = g_string_new (fields[i].label);

    g_string_append_c (line, ':');
    for (glong pad = g_utf8_strlen (fields[i].label, -1); pad < width + 2; pad++)
      g_string_append_c (line, ' ');
    g_string_append (line, fields[i].value);
    g_print ("%s\n", line->str);
  }
}

/* ---- ages and sizes ---------------------------------------------------- */

char *
box_cli_format_age (const char *rfc3339)
{
  g_autoptr(GDateTime) then = NULL;
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  GTimeSpan span;
  gint64 seconds;

  if (rfc3339 == NULL)
    return g_strdup ("");
  then = g_date_time_new_from_iso8601 (rfc3339, NULL);
  if (then == NULL)
    return g_strdup (rfc3339);
  span = g_date_time_difference (now, then);
  seconds = MAX (span / G_USEC_PER_SEC, 0);
  if (seconds < 60)
    return g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%d second ago", "%d seconds ago",
                                         (gulong) seconds), (int) seconds);
  if (seconds < 3600)
    return g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%d minute ago", "%d minutes ago",
                                         (gulong) (seconds / 60)), (int) (seconds / 60));
  if (seconds < 86400)
    return g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%d hour ago", "%d hours ago",
                                         (gulong) (seconds / 3600)), (int) (seconds / 3600));
  return g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%d day ago", "%d days ago",
                                       (gulong) (seconds / 86400)), (int) (seconds / 86400));
}

char *
box_cli_format_size (guint64 bytes)
{
  return g_format_size_full (bytes, G_FORMAT_SIZE_IEC_UNITS);
}

/* ---- JSON lookups ------------------------------------------------------ */

const char *
box_cli_json_string (JsonObject *object, const char *member)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, member) : NULL;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

gint64
box_cli_json_int (JsonObject *object, const char *member, gint64 fallback)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, member) : NULL;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node))
    return fallback;
  if (json_node_get_value_type (node) == G_TYPE_INT64)
    return json_node_get_int (node);
  if (json_node_get_value_type (node) == G_TYPE_DOUBLE)
    return (gint64) json_node_get_double (node);
  return fallback;
}

gboolean
box_cli_json_bool (JsonObject *object, const char *member)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, member) : NULL;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    return FALSE;
  return json_node_get_boolean (node);
}

char *
box_cli_json_strings (JsonObject *object, const char *member, const char *separator)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, member) : NULL;
  g_autoptr(GString) text = g_string_new (NULL);
  JsonArray *array;

  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
    return g_strdup ("");
  array = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonNode *e = json_array_get_element (array, i);

    if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_STRING)
      continue;
    if (text->len > 0)
      g_string_append (text, separator);
    g_string_append (text, json_node_get_string (e));
  }
  return g_string_free (g_steal_pointer (&text), FALSE);
}

JsonObject *
box_cli_json_object (JsonObject *object, const char *member)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, member) : NULL;

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return NULL;
  return json_node_get_object (node);
}
