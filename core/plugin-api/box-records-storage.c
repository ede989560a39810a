/* box-records-storage.c: the storage form of records: everything needed
 * to rebuild a record, internal fields included, as a JSON string that
 * storage plugins keep next to a few indexed columns.  A member missing
 * from an older record takes its default, so a new field needs no schema
 * migration. */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-records.h"
#include "box-records-private.h"

/* ---- Storage JSON: writing --------------------------------------------- */

/* Times are integer microseconds here so that they round-trip exactly.
 * Readers take a missing member as its default, so a new field needs no
 * migration of stored records. */

char *
box_project_to_storage_json (const BoxProject *project)
{
  JsonObject *obj = json_object_new ();

  g_return_val_if_fail (project != NULL, NULL);
  box_records_set_string (obj, "name", project->name);
  json_object_set_array_member (obj, "domains", box_records_strv_to_json (project->domains));
  json_object_set_int_member (obj, "created_at", project->created_at);
  return box_records_object_to_string (obj);
}

char *
box_key_to_storage_json (const BoxKey *key)
{
  JsonObject *obj = json_object_new ();

  g_return_val_if_fail (key != NULL, NULL);
  box_records_set_string (obj, "id", key->id);
  box_records_set_string (obj, "name", key->name);
  box_records_set_string (obj, "project", key->project);
  box_records_set_string (obj, "hash", key->hash);
  json_object_set_int_member (obj, "created_at", key->created_at);
  return box_records_object_to_string (obj);
}

char *
box_sandbox_to_storage_json (const BoxSandbox *sandbox)
{
  JsonObject *obj = json_object_new ();

  g_return_val_if_fail (sandbox != NULL, NULL);
  box_records_sandbox_common_to_json (obj, sandbox, FALSE);
  json_object_set_int_member (obj, "created_at", sandbox->created_at);
  json_object_set_int_member (obj, "updated_at", sandbox->updated_at);
  json_object_set_int_member (obj, "last_active_at", sandbox->last_active_at);
  box_records_set_nullable_string (obj, "node", sandbox->node);
  json_object_set_int_member (obj, "snapshot_at", sandbox->snapshot_at);
  json_object_set_int_member (obj, "next_checkpoint", sandbox->next_checkpoint);
  json_object_set_int_member (obj, "next_auto_checkpoint", sandbox->next_auto_checkpoint);
  box_records_set_nullable_string (obj, "fork_source", sandbox->fork_source);
  if (sandbox->port_access != NULL && g_hash_table_size (sandbox->port_access) > 0) {
    JsonObject *ports = json_object_new ();
    GHashTableIter iter;
    gpointer port, access;

    g_hash_table_iter_init (&iter, sandbox->port_access);
    while (g_hash_table_iter_next (&iter, &port, &access))
      json_object_set_string_member (ports, port, access);
    json_object_set_object_member (obj, "port_access", ports);
  }
  return box_records_object_to_string (obj);
}

char *
box_checkpoint_to_storage_json (const BoxCheckpoint *checkpoint)
{
  JsonObject *obj = json_object_new ();

  g_return_val_if_fail (checkpoint != NULL, NULL);
  box_records_set_string (obj, "id", checkpoint->id);
  box_records_set_string (obj, "sandbox", checkpoint->sandbox);
  box_records_set_string (obj, "project", checkpoint->project);
  box_records_set_nullable_string (obj, "comment", checkpoint->comment);
  json_object_set_boolean_member (obj, "memory", checkpoint->memory);
  json_object_set_boolean_member (obj, "auto", checkpoint->auto_);
  json_object_set_int_member (obj, "created_at", checkpoint->created_at);
  return box_records_object_to_string (obj);
}

char *
box_secret_to_storage_json (const BoxSecret *secret)
{
  JsonObject *obj = json_object_new ();

  g_return_val_if_fail (secret != NULL, NULL);
  box_records_secret_common_to_json (obj, secret);
  box_records_set_string (obj, "project", secret->project);
  json_object_set_int_member (obj, "created_at", secret->created_at);
  json_object_set_int_member (obj, "updated_at", secret->updated_at);
  if (secret->sealed_value != NULL) {
    g_autofree char *hex = box_records_hex_encode (secret->sealed_value);

    json_object_set_string_member (obj, "sealed", hex);
  }
  return box_records_object_to_string (obj);
}

/* ---- Storage JSON: reading --------------------------------------------- */

typedef struct {
  const char *what;   /* "sandbox", ... for messages */
  GError    **error;
  gboolean    failed;
} Reader;

static gboolean
reader_fail (Reader *r, const char *member, const char *expected)
{
  if (!r->failed)
    g_set_error (r->error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "stored %s record: member %s is not %s", r->what, member, expected);
  r->failed = TRUE;
  return FALSE;
}

static JsonNode *
reader_member (Reader *r, JsonObject *obj, const char *member)
{
  JsonNode *node;

  if (r->failed || obj == NULL)
    return NULL;
  node = json_object_get_member (obj, member);
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return NULL;
  return node;
}

/* NULL when absent or null */
static char *
read_string (Reader *r, JsonObject *obj, const char *member)
{
  JsonNode *node = reader_member (r, obj, member);

  if (node == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING) {
    reader_fail (r, member, "a string");
    return NULL;
  }
  return g_strdup (json_node_get_string (node));
}

static char *
read_string_or_empty (Reader *r, JsonObject *obj, const char *member)
{
  char *str = read_string (r, obj, member);

  return str != NULL ? str : g_strdup ("");
}

static gint64
read_int (Reader *r, JsonObject *obj, const char *member, gint64 min, gint64 max, gint64 def)
{
  JsonNode *node = reader_member (r, obj, member);
  gint64 v;

  if (node == NULL)
    return def;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64) {
    reader_fail (r, member, "an integer");
    return def;
  }
  v = json_node_get_int (node);
  if (v < min || v > max) {
    reader_fail (r, member, "in range");
    return def;
  }
  return v;
}

static gboolean
read_bool (Reader *r, JsonObject *obj, const char *member, gboolean def)
{
  JsonNode *node = reader_member (r, obj, member);

  if (node == NULL)
    return def;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    return reader_fail (r, member, "a boolean");
  return json_node_get_boolean (node);
}

static JsonObject *
read_object (Reader *r, JsonObject *obj, const char *member)
{
  JsonNode *node = reader_member (r, obj, member);

  if (node == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (node)) {
    reader_fail (r, member, "an object");
    return NULL;
  }
  return json_node_get_object (node);
}

static JsonArray *
read_array (Reader *r, JsonObject *obj, const char *member)
{
  JsonNode *node = reader_member (r, obj, member);

  if (node == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_ARRAY (node)) {
    reader_fail (r, member, "an array");
    return NULL;
  }
  return json_node_get_array (node);
}

static char **
read_strv (Reader *r, JsonObject *obj, const char *member)
{
  JsonArray *array = read_array (r, obj, member);
  g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func (g_free);
  guint i;

  for (i = 0; array != NULL && i < json_array_get_length (array); i++) {
    JsonNode *node = json_array_get_element (array, i);

    if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING) {
      reader_fail (r, member, "an array of strings");
      break;
    }
    g_ptr_array_add (out, g_strdup (json_node_get_string (node)));
  }
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&out), FALSE);
}

static GHashTable *
read_map (Reader *r, JsonObject *obj, const char *member)
{
  JsonObject *map = read_object (r, obj, member);
  GHashTable *out = box_records_string_map_new ();
  JsonObjectIter iter;
  const char *name;
  JsonNode *node;

  if (map == NULL)
    return out;
  json_object_iter_init (&iter, map);
  while (json_object_iter_next (&iter, &name, &node)) {
    if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING) {
      reader_fail (r, member, "a map of strings");
      break;
    }
    g_hash_table_replace (out, g_strdup (name), g_strdup (json_node_get_string (node)));
  }
  return out;
}

static void
read_resources (Reader *r, JsonObject *obj, const char *member, BoxResources *res)
{
  JsonObject *o = read_object (r, obj, member);

  res->cpus = read_int (r, o, "cpus", 0, G_MAXUINT, 0);
  res->memory_mib = read_int (r, o, "memory_mib", 0, G_MAXUINT, 0);
  res->disk_gib = read_int (r, o, "disk_gib", 0, G_MAXUINT, 0);
}

static BoxRule *
read_rule (Reader *r, JsonObject *obj)
{
  g_autoptr(BoxRule) rule = g_new0 (BoxRule, 1);
  g_autofree char *action = NULL;
  JsonArray *ports;
  guint i;

  rule->include = read_string (r, obj, "include");
  if (rule->include != NULL)
    return g_steal_pointer (&rule);
  rule->domain = read_string_or_empty (r, obj, "domain");
  action = read_string (r, obj, "action");
  rule->allow = g_strcmp0 (action, "deny") != 0;
  ports = read_array (r, obj, "ports");
  if (ports != NULL && json_array_get_length (ports) > 0) {
    rule->n_ports = json_array_get_length (ports);
    rule->ports = g_new0 (guint16, rule->n_ports);
    for (i = 0; i < rule->n_ports; i++) {
      JsonNode *node = json_array_get_element (ports, i);

      if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64 ||
          json_node_get_int (node) < 0 || json_node_get_int (node) > G_MAXUINT16) {
        reader_fail (r, "ports", "an array of ports");
        break;
      }
      rule->ports[i] = (guint16) json_node_get_int (node);
    }
  }
  return g_steal_pointer (&rule);
}

static JsonObject *
parse_storage (const char *json, const char *what, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) local_error = NULL;
  JsonNode *root;

  if (json == NULL || !json_parser_load_from_data (parser, json, -1, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "stored %s record is not JSON: %s", what,
                 local_error != NULL ? local_error->message : "none");
    return NULL;
  }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "stored %s record is not an object", what);
    return NULL;
  }
  return json_object_ref (json_node_get_object (root));
}

BoxProject *
box_project_from_storage_json (const char *json, GError **error)
{
  g_autoptr(JsonObject) obj = parse_storage (json, "project", error);
  g_autoptr(BoxProject) project = NULL;
  Reader r = { "project", error, FALSE };

  if (obj == NULL)
    return NULL;
  project = g_new0 (BoxProject, 1);
  project->name = read_string_or_empty (&r, obj, "name");
  project->domains = read_strv (&r, obj, "domains");
  project->created_at = read_int (&r, obj, "created_at", G_MININT64, G_MAXINT64, 0);
  if (r.failed)
    return NULL;
  return g_steal_pointer (&project);
}

static gboolean
read_enum (Reader *r, JsonObject *obj, const char *member, const char *const *names,
           guint n_names, guint *out)
{
  g_autofree char *str = read_string (r, obj, member);

  if (str == NULL)
    return TRUE;
  if (!box_records_enum_from_string (names, n_names, str, out))
    return reader_fail (r, member, "a known value");
  return TRUE;
}

static void
read_sandbox_network (Reader *r, JsonObject *obj, BoxSandbox *sandbox)
{
  JsonObject *network = read_object (r, obj, "network");
  JsonArray *egress = read_array (r, network, "egress");
  guint i;

  for (i = 0; egress != NULL && i < json_array_get_length (egress) && !r->failed; i++) {
    JsonNode *node = json_array_get_element (egress, i);

    if (!JSON_NODE_HOLDS_OBJECT (node)) {
      reader_fail (r, "network.egress", "an array of rules");
      break;
    }
    g_ptr_array_add (sandbox->egress, read_rule (r, json_node_get_object (node)));
  }
}

GPtrArray *
box_rules_from_storage_json (JsonNode *egress, GError **error)
{
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  Reader r = { "rule", error, FALSE };
  JsonArray *array;
  guint i;

  if (egress == NULL || JSON_NODE_HOLDS_NULL (egress))
    return g_steal_pointer (&rules);
  if (!JSON_NODE_HOLDS_ARRAY (egress)) {
    reader_fail (&r, "egress", "an array of rules");
    return NULL;
  }
  array = json_node_get_array (egress);
  for (i = 0; i < json_array_get_length (array) && !r.failed; i++) {
    JsonNode *node = json_array_get_element (array, i);

    if (!JSON_NODE_HOLDS_OBJECT (node)) {
      reader_fail (&r, "egress", "an array of rules");
      break;
    }
    g_ptr_array_add (rules, read_rule (&r, json_node_get_object (node)));
  }
  if (r.failed)
    return NULL;
  return g_steal_pointer (&rules);
}

BoxSandbox *
box_sandbox_from_storage_json (const char *json, GError **error)
{
  g_autoptr(JsonObject) obj = parse_storage (json, "sandbox", error);
  g_autoptr(BoxSandbox) sandbox = NULL;
  Reader r = { "sandbox", error, FALSE };
  JsonObject *idle, *deadline;
  guint v;

  if (obj == NULL)
    return NULL;
  sandbox = box_sandbox_new ();
  sandbox->id = read_string_or_empty (&r, obj, "id");
  sandbox->name = read_string_or_empty (&r, obj, "name");
  sandbox->project = read_string_or_empty (&r, obj, "project");
  g_free (sandbox->template_name);
  sandbox->template_name = read_string_or_empty (&r, obj, "template");
  g_free (sandbox->image);
  sandbox->image = read_string_or_empty (&r, obj, "image");
  v = sandbox->state;
  read_enum (&r, obj, "state", box_records_sandbox_states, G_N_ELEMENTS (box_records_sandbox_states), &v);
  sandbox->state = v;
  read_resources (&r, obj, "resources", &sandbox->resources);
  g_hash_table_unref (sandbox->env);
  sandbox->env = read_map (&r, obj, "env");
  g_hash_table_unref (sandbox->labels);
  sandbox->labels = read_map (&r, obj, "labels");
  idle = read_object (&r, obj, "idle");
  sandbox->idle_timeout_s = read_int (&r, idle, "timeout_s", 0, G_MAXUINT, sandbox->idle_timeout_s);
  v = sandbox->idle_action;
  read_enum (&r, idle, "action", box_records_idle_actions, G_N_ELEMENTS (box_records_idle_actions), &v);
  sandbox->idle_action = v;
  deadline = read_object (&r, obj, "deadline");
  if (deadline != NULL) {
    sandbox->has_deadline = TRUE;
    sandbox->deadline_at = read_int (&r, deadline, "at", G_MININT64, G_MAXINT64, 0);
    v = sandbox->deadline_action;
    read_enum (&r, deadline, "action", box_records_deadline_actions, G_N_ELEMENTS (box_records_deadline_actions), &v);
    sandbox->deadline_action = v;
  }
  sandbox->protected_ = read_bool (&r, obj, "protected", FALSE);
  sandbox->http_port = read_int (&r, obj, "http_port", 0, G_MAXUINT16, sandbox->http_port);
  read_sandbox_network (&r, obj, sandbox);
  g_strfreev (sandbox->secrets);
  sandbox->secrets = read_strv (&r, obj, "secrets");
  sandbox->created_at = read_int (&r, obj, "created_at", G_MININT64, G_MAXINT64, 0);
  sandbox->updated_at = read_int (&r, obj, "updated_at", G_MININT64, G_MAXINT64, 0);
  sandbox->last_active_at = read_int (&r, obj, "last_active_at", G_MININT64, G_MAXINT64, 0);
  sandbox->node = read_string (&r, obj, "node");
  sandbox->snapshot_at = read_int (&r, obj, "snapshot_at", G_MININT64, G_MAXINT64, 0);
  sandbox->next_checkpoint = read_int (&r, obj, "next_checkpoint", 0, G_MAXUINT, 1);
  sandbox->next_auto_checkpoint = read_int (&r, obj, "next_auto_checkpoint", 0, G_MAXUINT, 1);
  sandbox->fork_source = read_string (&r, obj, "fork_source");
  g_hash_table_unref (sandbox->port_access);
  sandbox->port_access = read_map (&r, obj, "port_access");
  if (r.failed)
    return NULL;
  return g_steal_pointer (&sandbox);
}

BoxCheckpoint *
box_checkpoint_from_storage_json (const char *json, GError **error)
{
  g_autoptr(JsonObject) obj = parse_storage (json, "checkpoint", error);
  g_autoptr(BoxCheckpoint) checkpoint = NULL;
  Reader r = { "checkpoint", error, FALSE };

  if (obj == NULL)
    return NULL;
  checkpoint = g_new0 (BoxCheckpoint, 1);
  checkpoint->id = read_string_or_empty (&r, obj, "id");
  checkpoint->sandbox = read_string_or_empty (&r, obj, "sandbox");
  checkpoint->project = read_string_or_empty (&r, obj, "project");
  checkpoint->comment = read_string (&r, obj, "comment");
  checkpoint->memory = read_bool (&r, obj, "memory", FALSE);
  checkpoint->auto_ = read_bool (&r, obj, "auto", FALSE);
  checkpoint->created_at = read_int (&r, obj, "created_at", G_MININT64, G_MAXINT64, 0);
  if (r.failed)
    return NULL;
  return g_steal_pointer (&checkpoint);
}

/* Hex (either case) -> bytes */
static GBytes *
read_hex (Reader *r, JsonObject *obj, const char *member)
{
  g_autofree char *hex = read_string (r, obj, member);
  GBytes *bytes;

  if (hex == NULL)
    return NULL;
  bytes = box_records_hex_decode (hex);
  if (bytes == NULL)
    reader_fail (r, member, "hex digits");
  return bytes;
}

BoxKey *
box_key_from_storage_json (const char *json, GError **error)
{
  g_autoptr(JsonObject) obj = parse_storage (json, "key", error);
  g_autoptr(BoxKey) key = NULL;
  Reader r = { "key", error, FALSE };

  if (obj == NULL)
    return NULL;
  key = g_new0 (BoxKey, 1);
  key->id = read_string_or_empty (&r, obj, "id");
  key->name = read_string_or_empty (&r, obj, "name");
  key->project = read_string_or_empty (&r, obj, "project");
  key->hash = read_string_or_empty (&r, obj, "hash");
  key->created_at = read_int (&r, obj, "created_at", G_MININT64, G_MAXINT64, 0);
  if (r.failed)
    return NULL;
  return g_steal_pointer (&key);
}

BoxSecret *
box_secret_from_storage_json (const char *json, GError **error)
{
  g_autoptr(JsonObject) obj = parse_storage (json, "secret", error);
  g_autoptr(BoxSecret) secret = NULL;
  Reader r = { "secret", error, FALSE };
  JsonObject *inject;

  if (obj == NULL)
    return NULL;
  secret = g_new0 (BoxSecret, 1);
  secret->name = read_string_or_empty (&r, obj, "name");
  secret->project = read_string_or_empty (&r, obj, "project");
  secret->hosts = read_strv (&r, obj, "hosts");
  secret->placeholder = read_string_or_empty (&r, obj, "placeholder");
  inject = read_object (&r, obj, "inject");
  if (inject != NULL) {
    secret->inject_header = read_string_or_empty (&r, inject, "header");
    secret->inject_format = read_string_or_empty (&r, inject, "format");
  }
  secret->created_at = read_int (&r, obj, "created_at", G_MININT64, G_MAXINT64, 0);
  secret->updated_at = read_int (&r, obj, "updated_at", G_MININT64, G_MAXINT64, 0);
  if (r.failed)
    return NULL;
  if (json_object_has_member (obj, "sealed"))
    secret->sealed_value = read_hex (&r, obj, "sealed");
  if (r.failed)
    return NULL;
  return g_steal_pointer (&secret);
}
