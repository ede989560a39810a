/* box-services.c: service definitions checked before they reach the guest,
 * and the guest's Service records checked before they reach a client. */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-records.h"
#include "box-services.h"
#include "box-validate.h"

gboolean
box_service_name_check (const char *name, GError **error)
{
  gsize n = name != NULL ? strlen (name) : 0;
  gboolean ok = n > 0 && n <= 63 && name[0] != '.' && name[0] != '-';

  for (gsize i = 0; ok && i < n; i++)
    ok = g_ascii_isalnum (name[i]) || name[i] == '_' || name[i] == '.' || name[i] == '-';
  if (ok)
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
               "invalid service name \"%s\": 1 to 63 of A-Z a-z 0-9 _ . -, not starting with . or -",
               name != NULL ? name : "");
  return FALSE;
}

static gboolean G_GNUC_PRINTF (2, 3)
invalid (GError **error, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  g_propagate_error (error, g_error_new_valist (BOX_ERROR, BOX_ERROR_INVALID, fmt, ap));
  va_end (ap);
  return FALSE;
}

/* An array of strings without NUL; @names: each a service name, no twice. */
static gboolean
strings_check (JsonNode *node, const char *field, gboolean names, guint max, GError **error)
{
  JsonArray *array;
  g_autoptr(GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);

  if (!JSON_NODE_HOLDS_ARRAY (node))
    return invalid (error, "invalid %s: must be an array of strings", field);
  array = json_node_get_array (node);
  if (json_array_get_length (array) > max)
    return invalid (error, "invalid %s: too many entries", field);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonNode *e = json_array_get_element (array, i);
    const char *s;

    if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_STRING)
      return invalid (error, "invalid %s: must be an array of strings", field);
    s = json_node_get_string (e);
    if (names) {
      g_autoptr(GError) bad = NULL;
      if (!box_service_name_check (s, &bad))
        return invalid (error, "invalid needs: %s", bad->message);
      if (!g_hash_table_add (seen, (gpointer) s))
        return invalid (error, "invalid needs: \"%s\" given twice", s);
    }
  }
  return TRUE;
}

static gboolean
is_string (JsonNode *node)
{
  return JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING;
}

gboolean
box_service_definition_check (const char *name, JsonObject *def, GError **error)
{
  static const char *const fields[] = { "cmd", "cwd", "env", "user", "needs", "http_port", NULL };
  g_autoptr(GList) members = json_object_get_members (def);
  JsonNode *node;
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *text = NULL;

  for (GList *l = members; l != NULL; l = l->next)
    if (!g_strv_contains (fields, l->data))
      return invalid (error, "unknown field \"%s\" in the service definition", (char *) l->data);
  node = json_object_get_member (def, "cmd");
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return invalid (error, "%s", "invalid cmd: required (an array of strings)");
  if (!strings_check (node, "cmd", FALSE, 4096, error))
    return FALSE;
  if (json_array_get_length (json_node_get_array (node)) == 0 ||
      json_node_get_string (json_array_get_element (json_node_get_array (node), 0))[0] == '\0')
    return invalid (error, "%s", "invalid cmd: must not be empty");
  for (const char *const *f = (const char *const[]) { "cwd", "user", NULL }; *f != NULL; f++) {
    node = json_object_get_member (def, *f);
    if (node != NULL && (!is_string (node) || json_node_get_string (node)[0] == '\0'))
      return invalid (error, "invalid %s: must be a non-empty string", *f);
  }
  node = json_object_get_member (def, "env");
  if (node != NULL) {
    g_autoptr(GList) names = NULL;
    if (!JSON_NODE_HOLDS_OBJECT (node))
      return invalid (error, "%s", "invalid env: must map variable names to strings");
    names = json_object_get_members (json_node_get_object (node));
    for (GList *l = names; l != NULL; l = l->next) {
      if (!box_validate_env_name (l->data, error))
        return FALSE;
      if (!is_string (json_object_get_member (json_node_get_object (node), l->data)))
        return invalid (error, "invalid env.%s: must be a string", (char *) l->data);
    }
  }
  node = json_object_get_member (def, "needs");
  if (node != NULL && !strings_check (node, "needs", TRUE, BOX_SERVICES_MAX, error))
    return FALSE;
  if (node != NULL) {
    JsonArray *needs = json_node_get_array (node);
    for (guint i = 0; i < json_array_get_length (needs); i++)
      if (g_str_equal (json_array_get_string_element (needs, i), name))
        return invalid (error, "invalid needs: a cycle: %s -> %s", name, name);
  }
  node = json_object_get_member (def, "http_port");
  if (node != NULL &&
      (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64 ||
       json_node_get_int (node) < 1 || json_node_get_int (node) > 65535))
    return invalid (error, "%s", "invalid http_port: must be 1 to 65535");
  root = json_node_init_object (json_node_alloc (), def);
  text = json_to_string (root, FALSE);
  if (strlen (text) > BOX_SERVICE_DEF_MAX)
    return invalid (error, "%s", "invalid definition: over 12 KiB");
  return TRUE;
}

/* The needs of service @name: @def's for @name itself, else the listing's. */
static JsonArray *
needs_of (const char *name, const char *new_name, JsonObject *def, GHashTable *current)
{
  JsonObject *obj = g_str_equal (name, new_name) ? def : g_hash_table_lookup (current, name);
  JsonNode *node = obj != NULL ? json_object_get_member (obj, "needs") : NULL;

  return node != NULL && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
}

/* Depth-first from @at; @path holds the names on the way. */
static gboolean
find_cycle (const char *at, const char *new_name, JsonObject *def, GHashTable *current,
            GPtrArray *path, GHashTable *done)
{
  JsonArray *needs;

  for (guint i = 0; i < path->len; i++)
    if (g_str_equal (g_ptr_array_index (path, i), at)) {
      g_ptr_array_add (path, (gpointer) at);
      g_ptr_array_remove_range (path, 0, i);
      return TRUE;
    }
  if (g_hash_table_contains (done, at))
    return FALSE;
  g_ptr_array_add (path, (gpointer) at);
  needs = needs_of (at, new_name, def, current);
  for (guint i = 0; needs != NULL && i < json_array_get_length (needs); i++)
    if (find_cycle (json_array_get_string_element (needs, i), new_name, def, current, path, done))
      return TRUE;
  g_ptr_array_remove_index (path, path->len - 1);
  g_hash_table_add (done, (gpointer) at);
  return FALSE;
}

gboolean
box_service_needs_check (const char *name, JsonObject *def, JsonArray *current, GError **error)
{
  g_autoptr(GHashTable) by_name = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GHashTable) done = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GPtrArray) path = g_ptr_array_new ();
  JsonArray *needs = needs_of (name, name, def, by_name);

  for (guint i = 0; i < json_array_get_length (current); i++) {
    JsonObject *s = json_array_get_object_element (current, i);
    g_hash_table_insert (by_name, (gpointer) json_object_get_string_member (s, "name"), s);
  }
  for (guint i = 0; needs != NULL && i < json_array_get_length (needs); i++) {
    const char *need = json_array_get_string_element (needs, i);
    if (!g_str_equal (need, name) && !g_hash_table_contains (by_name, need))
      return invalid (error, "invalid needs: no service named \"%s\"", need);
  }
  if (find_cycle (name, name, def, by_name, path, done)) {
    g_autoptr(GString) text = g_string_new (NULL);
    for (guint i = 0; i < path->len; i++)
      g_string_append_printf (text, "%s%s", i > 0 ? " -> " : "", (char *) g_ptr_array_index (path, i));
    return invalid (error, "invalid needs: a cycle: %s", text->str);
  }
  return TRUE;
}

/* ---- records from the guest --------------------------------------------- */

static JsonObject *
guest_bad (GError **error, const char *what)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "agent: bad service record: %s", what);
  return NULL;
}

static void
copy_member (JsonObject *from, JsonObject *to, const char *field)
{
  JsonNode *node = json_object_get_member (from, field);

  if (node != NULL)
    json_object_set_member (to, field, json_node_copy (node));
}

JsonObject *
box_service_record_from_agent (JsonObject *raw, GError **error)
{
  static const char *const states[] = { "running", "starting", "stopped", "crashed", NULL };
  g_autoptr(JsonObject) out = json_object_new ();
  g_autoptr(JsonObject) def = json_object_new ();
  const char *name, *state;
  JsonNode *node;
  gint64 n;

  if (raw == NULL)
    return guest_bad (error, "not an object");
  node = json_object_get_member (raw, "name");
  name = node != NULL && is_string (node) ? json_node_get_string (node) : NULL;
  if (name == NULL || !box_service_name_check (name, NULL))
    return guest_bad (error, "name");
  /* the definition's members are checked as a client's would be */
  for (const char *const *f = (const char *const[]) { "cmd", "cwd", "env", "user", "needs",
                                                       "http_port", NULL }; *f != NULL; f++)
    copy_member (raw, def, *f);
  if (!box_service_definition_check (name, def, NULL))
    return guest_bad (error, "definition");
  node = json_object_get_member (raw, "state");
  state = node != NULL && is_string (node) ? json_node_get_string (node) : NULL;
  if (state == NULL || !g_strv_contains (states, state))
    return guest_bad (error, "state");

  json_object_set_string_member (out, "name", name);
  for (const char *const *f = (const char *const[]) { "cmd", "cwd", "env", "user", "needs",
                                                       "http_port", NULL }; *f != NULL; f++)
    copy_member (def, out, *f);
  if (!json_object_has_member (out, "user"))
    json_object_set_string_member (out, "user", "box");
  if (!json_object_has_member (out, "needs"))
    json_object_set_array_member (out, "needs", json_array_new ());
  json_object_set_string_member (out, "state", state);
  node = json_object_get_member (raw, "restarts");
  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64 ||
      (n = json_node_get_int (node)) < 0)
    return guest_bad (error, "restarts");
  json_object_set_int_member (out, "restarts", n);
  if (g_str_equal (state, "running")) {
    gint64 ms;
    g_autofree char *at = NULL;

    node = json_object_get_member (raw, "pid");
    if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64 ||
        (n = json_node_get_int (node)) <= 0 || n > G_MAXINT32)
      return guest_bad (error, "pid");
    json_object_set_int_member (out, "pid", n);
    node = json_object_get_member (raw, "started_at");
    if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64 ||
        (ms = json_node_get_int (node)) <= 0 || ms > G_MAXINT64 / 1000)
      return guest_bad (error, "started_at");
    at = box_time_format (ms * 1000);
    json_object_set_string_member (out, "started_at", at);
  }
  return g_steal_pointer (&out);
}
