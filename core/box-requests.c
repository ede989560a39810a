/* box-requests.c: strict decoding of request bodies.
 *
 * The messages follow Go's encoding/json with DisallowUnknownFields, as the
 * specification does:
 *   bad request body: json: unknown field <name>
 *   bad request body: json: cannot unmarshal <json type> into field <path> of type <type>
 *   bad request body: <parser message>
 * Paths are the dotted member names (no array indexes or map keys, as Go).
 * null for an optional member means absent, except the update's deadline,
 * where it means "clear".  After decoding every field is format-checked.
 */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-requests.h"
#include "box-validate.h"

#define BAD_BODY "bad request body: "
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

static const char *
json_type_name (JsonNode *node)
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

static gboolean
not_an_object (JsonNode *node, GError **error)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
               BAD_BODY "json: cannot unmarshal %s into a request object", json_type_name (node));
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
    not_an_object (root, error);
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

static gboolean
type_error (JsonNode *node, const char *path, const char *type, GError **error)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
               BAD_BODY "json: cannot unmarshal %s into field %s of type %s",
               json_type_name (node), path, type);
  return FALSE;
}

static gboolean
invalid (GError **error, const char *message)
{
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, message);
  return FALSE;
}

/* The member, or NULL when absent or null. */
static JsonNode *
member (JsonObject *obj, const char *name)
{
  JsonNode *node = json_object_get_member (obj, name);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return NULL;
  return node;
}

static gboolean
is_string (JsonNode *node)
{
  return JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING;
}

static gboolean
get_string (JsonObject *obj, const char *name, const char *path, char **out, GError **error)
{
  JsonNode *node = member (obj, name);

  if (node == NULL)
    return TRUE;
  if (!is_string (node))
    return type_error (node, path, "string", error);
  g_free (*out);
  *out = g_strdup (json_node_get_string (node));
  return TRUE;
}

static gboolean
get_int (JsonObject *obj, const char *name, const char *path, gboolean *present, gint64 *out,
         GError **error)
{
  JsonNode *node = member (obj, name);

  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return type_error (node, path, "integer", error);
  *out = json_node_get_int (node);
  if (present != NULL)
    *present = TRUE;
  return TRUE;
}

static gboolean
get_bool (JsonObject *obj, const char *name, const char *path, gboolean *present, gboolean *out,
          GError **error)
{
  JsonNode *node = member (obj, name);

  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    return type_error (node, path, "boolean", error);
  *out = json_node_get_boolean (node);
  if (present != NULL)
    *present = TRUE;
  return TRUE;
}

/* An object member checked against its allowed fields; *out NULL when absent. */
static gboolean
get_object (JsonObject *obj, const char *name, const char *path, const char *const *allowed,
            JsonObject **out, GError **error)
{
  JsonNode *node = member (obj, name);

  *out = NULL;
  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return type_error (node, path, "object", error);
  if (!box_json_check_fields (json_node_get_object (node), allowed, error))
    return FALSE;
  *out = json_node_get_object (node);
  return TRUE;
}

static gboolean
get_strv (JsonObject *obj, const char *name, const char *path, char ***out, GError **error)
{
  JsonNode *node = member (obj, name);
  g_autoptr(GPtrArray) strv = NULL;
  JsonArray *array;
  guint i;

  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    return type_error (node, path, "array", error);
  array = json_node_get_array (node);
  strv = g_ptr_array_new_with_free_func (g_free);
  for (i = 0; i < json_array_get_length (array); i++) {
    JsonNode *element = json_array_get_element (array, i);

    if (!is_string (element))
      return type_error (element, path, "string", error);
    g_ptr_array_add (strv, g_strdup (json_node_get_string (element)));
  }
  g_ptr_array_add (strv, NULL);
  g_strfreev (*out);
  *out = (char **) g_ptr_array_free (g_steal_pointer (&strv), FALSE);
  return TRUE;
}

static gboolean
get_string_map (JsonObject *obj, const char *name, const char *path, GHashTable **out,
                GError **error)
{
  JsonNode *node = member (obj, name);
  g_autoptr(GHashTable) map = NULL;
  JsonObjectIter iter;
  const char *key;
  JsonNode *value;

  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return type_error (node, path, "object", error);
  map = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  json_object_iter_init_ordered (&iter, json_node_get_object (node));
  while (json_object_iter_next_ordered (&iter, &key, &value)) {
    if (!is_string (value))
      return type_error (value, path, "string", error);
    g_hash_table_replace (map, g_strdup (key), g_strdup (json_node_get_string (value)));
  }
  *out = g_steal_pointer (&map);
  return TRUE;
}

/* ---- Shared fields ----------------------------------------------------- */

static gboolean
check_uint_range (const char *path, gint64 v, gint64 min, gint64 max, const char *rule,
                  GError **error)
{
  if (v >= min && v <= max)
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid %s %" G_GINT64_FORMAT ": %s", path, v,
               rule);
  return FALSE;
}

static gboolean
decode_env_labels (JsonObject *obj, GHashTable **env, GHashTable **labels, GError **error)
{
  GHashTableIter iter;
  gpointer key, value;

  if (!get_string_map (obj, "env", "env", env, error) ||
      !get_string_map (obj, "labels", "labels", labels, error))
    return FALSE;
  if (*env != NULL) {
    g_hash_table_iter_init (&iter, *env);
    while (g_hash_table_iter_next (&iter, &key, NULL)) {
      if (!box_validate_env_name (key, error))
        return FALSE;
    }
  }
  if (*labels != NULL) {
    g_hash_table_iter_init (&iter, *labels);
    while (g_hash_table_iter_next (&iter, &key, &value)) {
      if (!box_validate_label (key, value, error))
        return FALSE;
    }
  }
  return TRUE;
}

static gboolean
decode_idle (JsonObject *obj, gboolean *has_timeout, guint *timeout, gboolean *has_action,
             BoxIdleAction *action, GError **error)
{
  static const char *const fields[] = { "timeout_s", "action", NULL };
  g_autofree char *action_str = NULL;
  JsonObject *idle = NULL;
  gint64 v = 0;

  if (!get_object (obj, "idle", "idle", fields, &idle, error))
    return FALSE;
  if (idle == NULL)
    return TRUE;
  if (!get_int (idle, "timeout_s", "idle.timeout_s", has_timeout, &v, error) ||
      !get_string (idle, "action", "idle.action", &action_str, error))
    return FALSE;
  if (*has_timeout) {
    if (!check_uint_range ("idle.timeout_s", v, BOX_IDLE_TIMEOUT_MIN, G_MAXUINT32,
                           "must be at least 30 seconds", error))
      return FALSE;
    *timeout = (guint) v;
  }
  if (action_str != NULL) {
    if (!box_idle_action_from_string (action_str, action)) {
      g_autofree char *msg = g_strdup_printf ("invalid idle.action \"%s\": must be pause, stop or none",
                                              action_str);
      return invalid (error, msg);
    }
    *has_action = TRUE;
  }
  return TRUE;
}

/* @present: the member was there (null included); @set: it was an object */
static gboolean
decode_deadline (JsonObject *obj, gboolean *present, gboolean *set, gint64 *at,
                 BoxDeadlineAction *action, GError **error)
{
  static const char *const fields[] = { "at", "action", NULL };
  g_autofree char *at_str = NULL;
  g_autofree char *action_str = NULL;
  JsonObject *deadline = NULL;

  if (present != NULL)
    *present = json_object_has_member (obj, "deadline");
  if (!get_object (obj, "deadline", "deadline", fields, &deadline, error))
    return FALSE;
  if (deadline == NULL)
    return TRUE;
  if (!get_string (deadline, "at", "deadline.at", &at_str, error) ||
      !get_string (deadline, "action", "deadline.action", &action_str, error))
    return FALSE;
  if (at_str == NULL)
    return invalid (error, "invalid deadline: at is required (an RFC 3339 time)");
  if (!box_time_parse (at_str, at)) {
    g_autofree char *msg = g_strdup_printf (
      "invalid deadline.at \"%s\": must be an RFC 3339 time with a zone, e.g. 2030-01-02T15:04:05Z",
      at_str);
    return invalid (error, msg);
  }
  if (action_str == NULL)
    return invalid (error, "invalid deadline: action is required (delete, pause or stop)");
  if (!box_deadline_action_from_string (action_str, action)) {
    g_autofree char *msg = g_strdup_printf (
      "invalid deadline.action \"%s\": must be delete, pause or stop", action_str);
    return invalid (error, msg);
  }
  *set = TRUE;
  return TRUE;
}

static gboolean
decode_http_port (JsonObject *obj, gboolean *present, guint *port, GError **error)
{
  gint64 v = 0;

  if (!get_int (obj, "http_port", "http_port", present, &v, error))
    return FALSE;
  if (!*present)
    return TRUE;
  if (!box_validate_http_port (v, error))
    return FALSE;
  *port = (guint) v;
  return TRUE;
}

static gboolean
decode_network (JsonObject *obj, GPtrArray **egress, GError **error)
{
  static const char *const fields[] = { "egress", NULL };
  JsonObject *network = NULL;
  JsonNode *node;

  if (!get_object (obj, "network", "network", fields, &network, error))
    return FALSE;
  if (network == NULL)
    return TRUE;
  node = member (network, "egress");
  if (node == NULL) {
    /* {} or {egress: null}: no rules, the whole internet */
    *egress = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
    return TRUE;
  }
  *egress = box_rules_from_json (node, error);
  return *egress != NULL;
}

static gboolean
decode_secrets (JsonObject *obj, char ***secrets, GHashTable *env, GError **error)
{
  guint i, j;

  if (!get_strv (obj, "secrets", "secrets", secrets, error))
    return FALSE;
  for (i = 0; *secrets != NULL && (*secrets)[i] != NULL; i++) {
    const char *name = (*secrets)[i];

    if (!box_validate_secret_name (name, error))
      return FALSE;
    for (j = 0; j < i; j++) {
      if (strcmp ((*secrets)[j], name) == 0) {
        g_autofree char *msg = g_strdup_printf ("invalid secrets: \"%s\" is listed twice", name);
        return invalid (error, msg);
      }
    }
    if (env != NULL && g_hash_table_contains (env, name)) {
      g_autofree char *msg = g_strdup_printf (
        "invalid secrets: \"%s\" is also a key in env; a sandbox cannot have both", name);
      return invalid (error, msg);
    }
  }
  return TRUE;
}

static JsonObject *
body_object (JsonNode *body, GError **error)
{
  if (body == NULL || !JSON_NODE_HOLDS_OBJECT (body)) {
    not_an_object (body, error);
    return NULL;
  }
  return json_node_get_object (body);
}

/* ---- Sandboxes --------------------------------------------------------- */

static gboolean
decode_resources (JsonObject *obj, gboolean *present, BoxResources *res, GError **error)
{
  static const char *const fields[] = { "cpus", "memory_mib", "disk_gib", NULL };
  static const struct {
    const char *name, *path;
    gint64 min, max;
    const char *unit;
  } members[] = {
    { "cpus", "resources.cpus", BOX_CPUS_MIN, BOX_CPUS_MAX, "" },
    { "memory_mib", "resources.memory_mib", BOX_MEMORY_MIB_MIN, BOX_MEMORY_MIB_MAX, " MiB" },
    { "disk_gib", "resources.disk_gib", BOX_DISK_GIB_MIN, BOX_DISK_GIB_MAX, " GiB" },
  };
  guint *values[G_N_ELEMENTS (members)] = { &res->cpus, &res->memory_mib, &res->disk_gib };
  JsonObject *resources = NULL;
  guint i;

  if (!get_object (obj, "resources", "resources", fields, &resources, error))
    return FALSE;
  *present = resources != NULL;
  if (resources == NULL)
    return TRUE;
  for (i = 0; i < G_N_ELEMENTS (members); i++) {
    gint64 v = 0;

    if (!get_int (resources, members[i].name, members[i].path, NULL, &v, error))
      return FALSE;
    if (v != 0 && (v < members[i].min || v > members[i].max)) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                   "invalid %s %" G_GINT64_FORMAT ": must be 0 (from the template) or %"
                   G_GINT64_FORMAT " to %" G_GINT64_FORMAT "%s",
                   members[i].path, v, members[i].min, members[i].max, members[i].unit);
      return FALSE;
    }
    *values[i] = (guint) v;
  }
  return box_validate_resources (res, error);
}

static gboolean
decode_from (JsonObject *obj, BoxSandboxCreate *req, GError **error)
{
  static const char *const fields[] = { "sandbox", "checkpoint", NULL };
  JsonObject *from = NULL;

  if (!get_object (obj, "from", "from", fields, &from, error))
    return FALSE;
  if (from == NULL)
    return TRUE;
  if (!get_string (from, "sandbox", "from.sandbox", &req->from_sandbox, error) ||
      !get_string (from, "checkpoint", "from.checkpoint", &req->from_checkpoint, error))
    return FALSE;
  if (req->from_sandbox == NULL || req->from_sandbox[0] == '\0' ||
      req->from_checkpoint == NULL || req->from_checkpoint[0] == '\0')
    return invalid (error, "invalid from: a fork needs both from.sandbox and from.checkpoint");
  return TRUE;
}

BoxSandboxCreate *
box_sandbox_create_from_json (JsonNode *body, GError **error)
{
  static const char *const fields[] = {
    "name", "template", "image", "resources", "env", "labels", "idle", "deadline",
    "protected", "http_port", "network", "secrets", "from", NULL,
  };
  JsonObject *obj = body_object (body, error);
  g_autoptr(BoxSandboxCreate) req = NULL;
  gboolean has_resources = FALSE;

  if (obj == NULL || !box_json_check_fields (obj, fields, error))
    return NULL;
  req = g_new0 (BoxSandboxCreate, 1);
  if (!get_string (obj, "name", "name", &req->name, error) ||
      !get_string (obj, "template", "template", &req->template_name, error) ||
      !get_string (obj, "image", "image", &req->image, error) ||
      !decode_resources (obj, &has_resources, &req->resources, error) ||
      !decode_env_labels (obj, &req->env, &req->labels, error) ||
      !decode_idle (obj, &req->has_idle_timeout_s, &req->idle_timeout_s, &req->has_idle_action,
                    &req->idle_action, error) ||
      !decode_deadline (obj, NULL, &req->has_deadline, &req->deadline_at, &req->deadline_action,
                        error) ||
      !get_bool (obj, "protected", "protected", NULL, &req->protected_, error) ||
      !decode_http_port (obj, &req->has_http_port, &req->http_port, error) ||
      !decode_network (obj, &req->egress, error) ||
      !decode_secrets (obj, &req->secrets, req->env, error) ||
      !decode_from (obj, req, error))
    return NULL;
  /* "" is what a sandbox record shows for "none": take it as absent */
  if (req->template_name != NULL && req->template_name[0] == '\0')
    g_clear_pointer (&req->template_name, g_free);
  if (req->image != NULL && req->image[0] == '\0')
    g_clear_pointer (&req->image, g_free);
  if (req->name != NULL && !box_validate_sandbox_name (req->name, NULL, error))
    return NULL;
  if (req->image != NULL && !box_validate_image_ref (req->image, error))
    return NULL;
  if (req->from_sandbox != NULL && (req->template_name != NULL || req->image != NULL || has_resources)) {
    invalid (error, "invalid request: template, image and resources come from the checkpoint "
                    "in a fork (from) and must not be given");
    return NULL;
  }
  if (req->template_name != NULL && req->image != NULL) {
    invalid (error, "invalid request: give template or image, not both");
    return NULL;
  }
  return g_steal_pointer (&req);
}

BoxSandboxUpdate *
box_sandbox_update_from_json (JsonNode *body, GError **error)
{
  static const char *const fields[] = {
    "env", "labels", "idle", "deadline", "protected", "http_port", "network", "secrets", NULL,
  };
  JsonObject *obj = body_object (body, error);
  g_autoptr(BoxSandboxUpdate) req = NULL;

  if (obj == NULL || !box_json_check_fields (obj, fields, error))
    return NULL;
  req = g_new0 (BoxSandboxUpdate, 1);
  if (!decode_env_labels (obj, &req->env, &req->labels, error) ||
      !decode_idle (obj, &req->has_idle_timeout_s, &req->idle_timeout_s, &req->has_idle_action,
                    &req->idle_action, error) ||
      !decode_deadline (obj, &req->deadline_set, &req->has_deadline, &req->deadline_at,
                        &req->deadline_action, error) ||
      !get_bool (obj, "protected", "protected", &req->has_protected, &req->protected_, error) ||
      !decode_http_port (obj, &req->has_http_port, &req->http_port, error) ||
      !decode_network (obj, &req->egress, error) ||
      !decode_secrets (obj, &req->secrets, req->env, error))
    return NULL;
  return g_steal_pointer (&req);
}

/* ---- Rules ------------------------------------------------------------- */

static BoxRule *
rule_from_json (JsonNode *node, GError **error)
{
  static const char *const fields[] = { "domain", "action", "ports", "include", NULL };
  g_autoptr(BoxRule) rule = g_new0 (BoxRule, 1);
  g_autofree char *action = NULL;
  JsonObject *obj;
  JsonNode *ports;

  if (!JSON_NODE_HOLDS_OBJECT (node)) {
    type_error (node, "network.egress", "object", error);
    return NULL;
  }
  obj = json_node_get_object (node);
  if (!box_json_check_fields (obj, fields, error) ||
      !get_string (obj, "include", "network.egress.include", &rule->include, error) ||
      !get_string (obj, "domain", "network.egress.domain", &rule->domain, error) ||
      !get_string (obj, "action", "network.egress.action", &action, error))
    return NULL;
  ports = member (obj, "ports");
  if (ports != NULL && !JSON_NODE_HOLDS_ARRAY (ports)) {
    type_error (ports, "network.egress.ports", "array", error);
    return NULL;
  }
  if (rule->include != NULL) {
    if (json_object_get_size (obj) != 1) {
      invalid (error, "invalid network rule: an include entry has no other field");
      return NULL;
    }
    return box_validate_rule (rule, error) ? g_steal_pointer (&rule) : NULL;
  }
  if (action == NULL || (strcmp (action, "allow") != 0 && strcmp (action, "deny") != 0)) {
    g_autofree char *msg = NULL;

    if (rule->domain == NULL)
      msg = g_strdup ("invalid network rule: domain and action are required (or include: \"defaults\")");
    else if (action == NULL)
      msg = g_strdup_printf ("invalid network rule for \"%s\": action is required (allow or deny)",
                             rule->domain);
    else
      msg = g_strdup_printf ("invalid network rule action \"%s\": must be allow or deny", action);
    invalid (error, msg);
    return NULL;
  }
  rule->allow = strcmp (action, "allow") == 0;
  if (ports != NULL) {
    JsonArray *array = json_node_get_array (ports);
    guint i;

    rule->n_ports = json_array_get_length (array);
    rule->ports = g_new0 (guint16, MAX (rule->n_ports, 1));
    for (i = 0; i < rule->n_ports; i++) {
      JsonNode *element = json_array_get_element (array, i);
      gint64 port;

      if (!JSON_NODE_HOLDS_VALUE (element) || json_node_get_value_type (element) != G_TYPE_INT64) {
        type_error (element, "network.egress.ports", "integer", error);
        return NULL;
      }
      port = json_node_get_int (element);
      if (port < 1 || port > 65535) {
        g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                     "invalid network rule port %" G_GINT64_FORMAT ": must be 1 to 65535", port);
        return NULL;
      }
      rule->ports[i] = (guint16) port;
    }
  }
  if (!box_validate_rule (rule, error))
    return NULL;
  return g_steal_pointer (&rule);
}

GPtrArray *
box_rules_from_json (JsonNode *egress, GError **error)
{
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  JsonArray *array;
  guint i;

  if (egress == NULL || JSON_NODE_HOLDS_NULL (egress))
    return g_steal_pointer (&rules);
  if (!JSON_NODE_HOLDS_ARRAY (egress)) {
    type_error (egress, "network.egress", "array", error);
    return NULL;
  }
  array = json_node_get_array (egress);
  for (i = 0; i < json_array_get_length (array); i++) {
    BoxRule *rule = rule_from_json (json_array_get_element (array, i), error);

    if (rule == NULL)
      return NULL;
    g_ptr_array_add (rules, rule);
  }
  return g_steal_pointer (&rules);
}

/* ---- Secrets ----------------------------------------------------------- */

static gboolean
decode_inject (JsonObject *obj, BoxSecretPut *req, GError **error)
{
  static const char *const fields[] = { "header", "format", NULL };
  JsonObject *inject = NULL;

  if (!get_object (obj, "inject", "inject", fields, &inject, error))
    return FALSE;
  if (inject == NULL)
    return TRUE;
  if (!get_string (inject, "header", "inject.header", &req->inject_header, error) ||
      !get_string (inject, "format", "inject.format", &req->inject_format, error))
    return FALSE;
  if (req->inject_header == NULL || req->inject_format == NULL)
    return invalid (error, "invalid inject: header and format are both required");
  if (!box_validate_inject_header (req->inject_header, error))
    return FALSE;
  if (strstr (req->inject_format, "{value}") == NULL)
    return invalid (error, "invalid inject.format: must contain {value}");
  if (strpbrk (req->inject_format, "\r\n") != NULL)
    return invalid (error, "invalid inject.format: must not contain CR or LF");
  if (strlen (req->inject_format) > BOX_SECRET_VALUE_MAX)
    return invalid (error, "invalid inject.format: must be at most 8192 bytes");
  return TRUE;
}

BoxSecretPut *
box_secret_put_from_json (JsonNode *body, GError **error)
{
  static const char *const fields[] = { "value", "hosts", "inject", "placeholder_prefix", NULL };
  JsonObject *obj = body_object (body, error);
  g_autoptr(BoxSecretPut) req = NULL;
  guint i;

  if (obj == NULL || !box_json_check_fields (obj, fields, error))
    return NULL;
  req = g_new0 (BoxSecretPut, 1);
  if (!get_string (obj, "value", "value", &req->value, error) ||
      !get_strv (obj, "hosts", "hosts", &req->hosts, error) ||
      !decode_inject (obj, req, error) ||
      !get_string (obj, "placeholder_prefix", "placeholder_prefix", &req->placeholder_prefix, error))
    return NULL;
  if (req->value == NULL) {
    invalid (error, "invalid secret: value is required");
    return NULL;
  }
  if (!box_validate_secret_value (req->value, strlen (req->value), error))
    return NULL;
  if (req->hosts == NULL || req->hosts[0] == NULL) {
    invalid (error, "invalid secret: hosts must name at least one host");
    return NULL;
  }
  for (i = 0; req->hosts[i] != NULL; i++) {
    if (!box_validate_secret_host (req->hosts[i], error))
      return NULL;
  }
  if (!box_validate_placeholder_prefix (req->placeholder_prefix, error))
    return NULL;
  return g_steal_pointer (&req);
}

/* ---- Operator bodies --------------------------------------------------- */

/* With @name NULL the body takes only "domains" (PATCH of a project). */
gboolean
box_project_create_from_json (JsonNode *body, char **name, char ***domains, GError **error)
{
  static const char *const create_fields[] = { "name", "domains", NULL };
  static const char *const patch_fields[] = { "domains", NULL };
  JsonObject *obj = body_object (body, error);
  g_autofree char *name_value = NULL;
  g_auto(GStrv) domains_value = NULL;
  guint i, j;

  if (obj == NULL ||
      !box_json_check_fields (obj, name != NULL ? create_fields : patch_fields, error))
    return FALSE;
  if ((name != NULL && !get_string (obj, "name", "name", &name_value, error)) ||
      !get_strv (obj, "domains", "domains", &domains_value, error))
    return FALSE;
  if (name != NULL) {
    if (name_value == NULL)
      return invalid (error, "invalid project: name is required");
    if (!box_validate_project_name (name_value, error))
      return FALSE;
  }
  if (domains_value == NULL)
    domains_value = g_new0 (char *, 1);
  for (i = 0; domains_value[i] != NULL; i++) {
    if (!box_validate_project_domain (domains_value[i], error))
      return FALSE;
    for (j = 0; j < i; j++) {
      if (strcmp (domains_value[i], domains_value[j]) == 0) {
        g_autofree char *msg = g_strdup_printf ("invalid domains: \"%s\" is listed twice",
                                                domains_value[i]);
        return invalid (error, msg);
      }
    }
  }
  if (name != NULL)
    *name = g_steal_pointer (&name_value);
  if (domains != NULL)
    *domains = g_steal_pointer (&domains_value);
  return TRUE;
}

gboolean
box_key_create_from_json (JsonNode *body, char **name, GError **error)
{
  static const char *const fields[] = { "name", NULL };
  JsonObject *obj = body_object (body, error);
  g_autofree char *name_value = NULL;

  if (obj == NULL || !box_json_check_fields (obj, fields, error) ||
      !get_string (obj, "name", "name", &name_value, error))
    return FALSE;
  if (name_value == NULL)
    return invalid (error, "invalid key: name is required");
  if (!box_validate_key_name (name_value, error))
    return FALSE;
  if (name != NULL)
    *name = g_steal_pointer (&name_value);
  return TRUE;
}
