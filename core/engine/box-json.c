/* box-json.c: the strict JSON reader under every request body.
 *
 * json-glib alone accepts comments, single quotes, hex numbers and
 * trailing data, and turns overflowing integers into -1; a strict RFC 8259
 * syntax check runs first, with Go-style messages.  The typed getters give
 * the specification's Go-style type errors:
 *   bad request body: json: cannot unmarshal <json type> into field <path> of type <type>
 */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-json-private.h"
#include "box-requests.h"

#define MAX_NESTING 64

/* ---- Parsing ----------------------------------------------------------- */

static gboolean
is_json_space (char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* ---- A strict syntax check ----------------------------------------------
 *
 * json-glib 1.6 takes comments, single quotes, hex numbers and trailing
 * data, wraps integers that overflow, recurses without a limit, and cuts
 * strings at "\u0000".  Bodies are first checked against RFC 8259 here,
 * with Go's messages, and with a nesting limit.
 */

typedef struct {
  const char *p;
  const char *end;
  guint       depth;
  GError    **error;
} Scan;

static gboolean
scan_fail (Scan *s, const char *what)
{
  char quoted[16];

  if (s->p >= s->end) {
    g_set_error_literal (s->error, BOX_ERROR, BOX_ERROR_INVALID,
                         BAD_BODY "unexpected end of JSON input");
    return FALSE;
  }
  switch (*s->p) {
  case '\'':
    g_strlcpy (quoted, "'\\''", sizeof quoted);
    break;
  case '\n':
    g_strlcpy (quoted, "'\\n'", sizeof quoted);
    break;
  case '\r':
    g_strlcpy (quoted, "'\\r'", sizeof quoted);
    break;
  case '\t':
    g_strlcpy (quoted, "'\\t'", sizeof quoted);
    break;
  default:
    if ((guchar) *s->p >= 0x20 && (guchar) *s->p < 0x7f) {
      g_snprintf (quoted, sizeof quoted, "'%c'", *s->p);
    } else if ((guchar) *s->p >= 0x80) {
      /* the body is valid UTF-8: quote the whole character */
      gsize n = (gsize) (g_utf8_next_char (s->p) - s->p);

      g_snprintf (quoted, sizeof quoted, "'%.*s'", (int) MIN (n, 4), s->p);
    } else {
      g_snprintf (quoted, sizeof quoted, "'\\x%02x'", (guint) (guchar) *s->p);
    }
    break;
  }
  g_set_error (s->error, BOX_ERROR, BOX_ERROR_INVALID, BAD_BODY "invalid character %s %s",
               quoted, what);
  return FALSE;
}

static void
scan_space (Scan *s)
{
  while (s->p < s->end && is_json_space (*s->p))
    s->p++;
}

static int
scan_hex4 (Scan *s)
{
  int v = 0;
  guint i;

  for (i = 0; i < 4; i++) {
    int d = s->p < s->end ? g_ascii_xdigit_value (*s->p) : -1;

    if (d < 0) {
      scan_fail (s, "in \\u hexadecimal character escape");
      return -1;
    }
    v = v * 16 + d;
    s->p++;
  }
  return v;
}

static gboolean
scan_string (Scan *s)
{
  s->p++; /* the opening quote */
  while (s->p < s->end) {
    guchar c = (guchar) *s->p;

    if (c == '"') {
      s->p++;
      return TRUE;
    }
    if (c < 0x20)
      return scan_fail (s, "in string literal");
    if (c != '\\') {
      s->p++;
      continue;
    }
    s->p++;
    if (s->p >= s->end)
      break;
    if (strchr ("\"\\/bfnrt", *s->p) != NULL && *s->p != '\0') {
      s->p++;
    } else if (*s->p == 'u') {
      int v;

      s->p++;
      v = scan_hex4 (s);
      if (v < 0)
        return FALSE;
      if (v == 0) {
        g_set_error_literal (s->error, BOX_ERROR, BOX_ERROR_INVALID,
                             BAD_BODY "\\u0000 (NUL) is not allowed in a string");
        return FALSE;
      }
      if (v >= 0xdc00 && v <= 0xdfff) {
        g_set_error_literal (s->error, BOX_ERROR, BOX_ERROR_INVALID,
                             BAD_BODY "lone surrogate in a \\u escape");
        return FALSE;
      }
      if (v >= 0xd800 && v <= 0xdbff) {
        int lo;

        if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u') {
          g_set_error_literal (s->error, BOX_ERROR, BOX_ERROR_INVALID,
                               BAD_BODY "lone surrogate in a \\u escape");
          return FALSE;
        }
        s->p += 2;
        lo = scan_hex4 (s);
        if (lo < 0)
          return FALSE;
        if (lo < 0xdc00 || lo > 0xdfff) {
          g_set_error_literal (s->error, BOX_ERROR, BOX_ERROR_INVALID,
                               BAD_BODY "lone surrogate in a \\u escape");
          return FALSE;
        }
      }
    } else {
      return scan_fail (s, "in string escape code");
    }
  }
  return scan_fail (s, "in string literal");
}

static gboolean
scan_digits (Scan *s)
{
  if (s->p >= s->end || !g_ascii_isdigit (*s->p))
    return scan_fail (s, "in numeric literal");
  while (s->p < s->end && g_ascii_isdigit (*s->p))
    s->p++;
  return TRUE;
}

static gboolean
scan_number (Scan *s)
{
  const char *start = s->p;
  gboolean is_int = TRUE;

  if (*s->p == '-')
    s->p++;
  if (s->p < s->end && *s->p == '0')
    s->p++;
  else if (!scan_digits (s))
    return FALSE;
  if (s->p < s->end && *s->p == '.') {
    s->p++;
    is_int = FALSE;
    if (!scan_digits (s))
      return FALSE;
  }
  if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
    s->p++;
    is_int = FALSE;
    if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
      s->p++;
    if (!scan_digits (s))
      return FALSE;
  }
  if (is_int) {
    g_autofree char *lit = g_strndup (start, (gsize) (s->p - start));
    gint64 v;

    if (!g_ascii_string_to_signed (lit, 10, G_MININT64, G_MAXINT64, &v, NULL)) {
      g_set_error (s->error, BOX_ERROR, BOX_ERROR_INVALID,
                   BAD_BODY "json: number %.40s is out of range", lit);
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean scan_value (Scan *s);

static gboolean
scan_literal (Scan *s, const char *word)
{
  gsize i;

  for (i = 0; word[i] != '\0'; i++, s->p++) {
    if (s->p >= s->end || *s->p != word[i]) {
      g_autofree char *what = g_strdup_printf ("in literal %s (expecting '%c')", word, word[i]);

      return scan_fail (s, what);
    }
  }
  return TRUE;
}

static gboolean
scan_container (Scan *s, char close)
{
  gboolean object = close == '}';

  if (++s->depth > MAX_NESTING) {
    g_set_error (s->error, BOX_ERROR, BOX_ERROR_INVALID,
                 BAD_BODY "nesting deeper than %d levels", MAX_NESTING);
    return FALSE;
  }
  s->p++;
  scan_space (s);
  if (s->p < s->end && *s->p == close) {
    s->p++;
    s->depth--;
    return TRUE;
  }
  while (TRUE) {
    if (object) {
      if (s->p >= s->end || *s->p != '"')
        return scan_fail (s, "looking for beginning of object key string");
      if (!scan_string (s))
        return FALSE;
      scan_space (s);
      if (s->p >= s->end || *s->p != ':')
        return scan_fail (s, "after object key");
      s->p++;
    }
    if (!scan_value (s))
      return FALSE;
    scan_space (s);
    if (s->p < s->end && *s->p == ',') {
      s->p++;
      scan_space (s);
      continue;
    }
    if (s->p < s->end && *s->p == close) {
      s->p++;
      s->depth--;
      return TRUE;
    }
    return scan_fail (s, object ? "after object key:value pair" : "after array element");
  }
}

static gboolean
scan_value (Scan *s)
{
  scan_space (s);
  if (s->p >= s->end)
    return scan_fail (s, "");
  switch (*s->p) {
  case '{':
    return scan_container (s, '}');
  case '[':
    return scan_container (s, ']');
  case '"':
    return scan_string (s);
  case 't':
    return scan_literal (s, "true");
  case 'f':
    return scan_literal (s, "false");
  case 'n':
    return scan_literal (s, "null");
  default:
    if (*s->p == '-' || g_ascii_isdigit (*s->p))
      return scan_number (s);
    return scan_fail (s, "looking for beginning of value");
  }
}

static gboolean
check_syntax (const char *data, gsize len, GError **error)
{
  Scan s = { data, data + len, 0, error };

  if (!scan_value (&s))
    return FALSE;
  scan_space (&s);
  if (s.p < s.end)
    return scan_fail (&s, "after top-level value");
  return TRUE;
}

const char *
box_json_node_type_name (JsonNode *node)
{
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return "null";
  if (JSON_NODE_HOLDS_OBJECT (node))
    return "object";
  if (JSON_NODE_HOLDS_ARRAY (node))
    return "array";
  switch (json_node_get_value_type (node)) {
  case G_TYPE_STRING:
    return "string";
  case G_TYPE_BOOLEAN:
    return "bool";
  default:
    return "number";
  }
}

gboolean
box_json_not_an_object (JsonNode *node, GError **error)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
               BAD_BODY "json: cannot unmarshal %s into a request object", box_json_node_type_name (node));
  return FALSE;
}

JsonNode *
box_json_parse_body (const char *data, gsize len, gboolean empty_ok, GError **error)
{
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GError) local_error = NULL;
  JsonNode *root;
  gsize i = 0;

  if (data == NULL)
    len = 0;
  while (i < len && is_json_space (data[i]))
    i++;
  if (i == len) {
    JsonNode *node;

    if (!empty_ok) {
      g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                           BAD_BODY "EOF: a JSON object is required");
      return NULL;
    }
    node = json_node_new (JSON_NODE_OBJECT);
    json_node_take_object (node, json_object_new ());
    return node;
  }
  if (!g_utf8_validate_len (data, len, NULL)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         BAD_BODY "invalid UTF-8 (or a NUL byte) in the body");
    return NULL;
  }
  if (!check_syntax (data, len, error))
    return NULL;
  parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, data, (gssize) len, &local_error)) {
    const char *msg = local_error->message;

    /* json-glib prefixes "<data>:" to positions */
    if (g_str_has_prefix (msg, "<data>:"))
      msg += strlen ("<data>:");
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, BAD_BODY "%s", msg);
    return NULL;
  }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    box_json_not_an_object (root, error);
    return NULL;
  }
  return json_node_ref (root);
}

gboolean
box_json_check_fields (JsonObject *object, const char *const *allowed, GError **error)
{
  JsonObjectIter iter;
  const char *name;
  JsonNode *member;

  g_return_val_if_fail (object != NULL, FALSE);
  json_object_iter_init_ordered (&iter, object);
  while (json_object_iter_next_ordered (&iter, &name, &member)) {
    if (allowed == NULL || !g_strv_contains (allowed, name)) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, BAD_BODY "json: unknown field %s", name);
      return FALSE;
    }
  }
  return TRUE;
}

/* ---- Typed members ----------------------------------------------------- */

gboolean
box_json_type_error (JsonNode *node, const char *path, const char *type, GError **error)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
               BAD_BODY "json: cannot unmarshal %s into field %s of type %s",
               box_json_node_type_name (node), path, type);
  return FALSE;
}

gboolean
box_json_invalid (GError **error, const char *message)
{
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, message);
  return FALSE;
}

/* The member, or NULL when absent or null. */
JsonNode *
box_json_member (JsonObject *obj, const char *name)
{
  JsonNode *node = json_object_get_member (obj, name);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return NULL;
  return node;
}

gboolean
box_json_is_string (JsonNode *node)
{
  return JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING;
}

gboolean
box_json_get_string (JsonObject *obj, const char *name, const char *path, char **out,
                     GError **error)
{
  JsonNode *node = box_json_member (obj, name);

  if (node == NULL)
    return TRUE;
  if (!box_json_is_string (node))
    return box_json_type_error (node, path, "string", error);
  g_free (*out);
  *out = g_strdup (json_node_get_string (node));
  return TRUE;
}

gboolean
box_json_get_int (JsonObject *obj, const char *name, const char *path, gboolean *present,
                  gint64 *out, GError **error)
{
  JsonNode *node = box_json_member (obj, name);

  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return box_json_type_error (node, path, "integer", error);
  *out = json_node_get_int (node);
  if (present != NULL)
    *present = TRUE;
  return TRUE;
}

gboolean
box_json_get_bool (JsonObject *obj, const char *name, const char *path, gboolean *present,
                   gboolean *out, GError **error)
{
  JsonNode *node = box_json_member (obj, name);

  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    return box_json_type_error (node, path, "boolean", error);
  *out = json_node_get_boolean (node);
  if (present != NULL)
    *present = TRUE;
  return TRUE;
}

/* An object member checked against its allowed fields; *out NULL when absent. */
gboolean
box_json_get_object (JsonObject *obj, const char *name, const char *path,
                     const char *const *allowed, JsonObject **out, GError **error)
{
  JsonNode *node = box_json_member (obj, name);

  *out = NULL;
  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return box_json_type_error (node, path, "object", error);
  if (!box_json_check_fields (json_node_get_object (node), allowed, error))
    return FALSE;
  *out = json_node_get_object (node);
  return TRUE;
}

gboolean
box_json_get_strv (JsonObject *obj, const char *name, const char *path, char ***out,
                   GError **error)
{
  JsonNode *node = box_json_member (obj, name);
  g_autoptr(GPtrArray) strv = NULL;
  JsonArray *array;
  guint i;

  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    return box_json_type_error (node, path, "array", error);
  array = json_node_get_array (node);
  strv = g_ptr_array_new_with_free_func (g_free);
  for (i = 0; i < json_array_get_length (array); i++) {
    JsonNode *element = json_array_get_element (array, i);

    if (!box_json_is_string (element))
      return box_json_type_error (element, path, "string", error);
    g_ptr_array_add (strv, g_strdup (json_node_get_string (element)));
  }
  g_ptr_array_add (strv, NULL);
  g_strfreev (*out);
  *out = (char **) g_ptr_array_free (g_steal_pointer (&strv), FALSE);
  return TRUE;
}

gboolean
box_json_get_string_map (JsonObject *obj, const char *name, const char *path,
                         GHashTable **out, GError **error)
{
  JsonNode *node = box_json_member (obj, name);
  g_autoptr(GHashTable) map = NULL;
  JsonObjectIter iter;
  const char *key;
  JsonNode *value;

  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return box_json_type_error (node, path, "object", error);
  map = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  json_object_iter_init_ordered (&iter, json_node_get_object (node));
  while (json_object_iter_next_ordered (&iter, &key, &value)) {
    if (!box_json_is_string (value))
      return box_json_type_error (value, path, "string", error);
    g_hash_table_replace (map, g_strdup (key), g_strdup (json_node_get_string (value)));
  }
  *out = g_steal_pointer (&map);
  return TRUE;
}

