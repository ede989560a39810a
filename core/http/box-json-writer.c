/* box-json-writer.c: see box-json-writer.h. */
#include "config.h"

#include <string.h>

#include "box-json-writer.h"

/* A comma unless the value opens its container or follows its name. */
static void
separate (GString *out)
{
  char last;

  if (out->len == 0)
    return;
  last = out->str[out->len - 1];
  if (last != '{' && last != '[' && last != ':')
    g_string_append_c (out, ',');
}

/* As json-glib 1.6's generator escapes: '"' and '\\', the five named
 * controls, the other bytes 0x01..0x1e and 0x7f as \u00xx (0x1f is left
 * as it is there, and so here); everything else, UTF-8 included, as is. */
static void
append_escaped (GString *out, const char *str)
{
  const char *run = str;
  const char *p;

  for (p = str; *p != '\0'; p++) {
    char c = *p;
    const char *named = NULL;

    if (c != '"' && c != '\\' && !((c > 0 && c < 0x1f) || c == 0x7f))
      continue;
    g_string_append_len (out, run, p - run);
    run = p + 1;
    switch (c) {
    case '"': named = "\\\""; break;
    case '\\': named = "\\\\"; break;
    case '\b': named = "\\b"; break;
    case '\f': named = "\\f"; break;
    case '\n': named = "\\n"; break;
    case '\r': named = "\\r"; break;
    case '\t': named = "\\t"; break;
    default: break;
    }
    if (named != NULL)
      g_string_append (out, named);
    else
      g_string_append_printf (out, "\\u00%.2x", (guint) c);
  }
  g_string_append_len (out, run, p - run);
}

void
box_json_begin_object (GString *out)
{
  separate (out);
  g_string_append_c (out, '{');
}

void
box_json_end_object (GString *out)
{
  g_string_append_c (out, '}');
}

void
box_json_begin_array (GString *out)
{
  separate (out);
  g_string_append_c (out, '[');
}

void
box_json_end_array (GString *out)
{
  g_string_append_c (out, ']');
}

void
box_json_key (GString *out, const char *name)
{
  separate (out);
  g_string_append_c (out, '"');
  append_escaped (out, name);
  g_string_append (out, "\":");
}

void
box_json_string (GString *out, const char *value)
{
  separate (out);
  if (value == NULL) {
    g_string_append (out, "null");
    return;
  }
  g_string_append_c (out, '"');
  append_escaped (out, value);
  g_string_append_c (out, '"');
}

void
box_json_int (GString *out, gint64 value)
{
  char buf[24];

  separate (out);
  g_snprintf (buf, sizeof buf, "%" G_GINT64_FORMAT, value);
  g_string_append (out, buf);
}

void
box_json_bool (GString *out, gboolean value)
{
  separate (out);
  g_string_append (out, value ? "true" : "false");
}

void
box_json_null (GString *out)
{
  separate (out);
  g_string_append (out, "null");
}

void
box_json_member_string (GString *out, const char *name, const char *value)
{
  box_json_key (out, name);
  box_json_string (out, value);
}

void
box_json_member_int (GString *out, const char *name, gint64 value)
{
  box_json_key (out, name);
  box_json_int (out, value);
}

void
box_json_member_bool (GString *out, const char *name, gboolean value)
{
  box_json_key (out, name);
  box_json_bool (out, value);
}
