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
#include "box-json-private.h"
#include "box-requests.h"
#include "box-validate.h"


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

  if (!box_json_get_string_map (obj, "env", "env", env, error) ||
      !box_json_get_string_map (obj, "labels", "labels", labels, error))
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

  if (!box_json_get_object (obj, "idle", "idle", fields, &idle, error))
    return FALSE;
  if (idle == NULL)
    return TRUE;
  if (!box_json_get_int (idle, "timeout_s", "idle.timeout_s", has_timeout, &v, error) ||
      !box_json_get_string (idle, "action", "idle.action", &action_str, error))
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
      return box_json_invalid (error, msg);
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
  if (!box_json_get_object (obj, "deadline", "deadline", fields, &deadline, error))
    return FALSE;
  if (deadline == NULL)
    return TRUE;
  if (!box_json_get_string (deadline, "at", "deadline.at", &at_str, error) ||
      !box_json_get_string (deadline, "action", "deadline.action", &action_str, error))
    return FALSE;
  if (at_str == NULL)
    return box_json_invalid (error, "invalid deadline: at is required (an RFC 3339 time)");
  if (!box_time_parse (at_str, at)) {
    g_autofree char *msg = g_strdup_printf (
      "invalid deadline.at \"%s\": must be an RFC 3339 time with a zone, e.g. 2030-01-02T15:04:05Z",
      at_str);
    return box_json_invalid (error, msg);
  }
  if (action_str == NULL)
    return box_json_invalid (error, "invalid deadline: action is required (delete, pause or stop)");
  if (!box_deadline_action_from_string (action_str, action)) {
    g_autofree char *msg = g_strdup_printf (
      "invalid deadline.action \"%s\": must be delete, pause or stop", action_str);
    return box_json_invalid (error, msg);
  }
  *set = TRUE;
  return TRUE;
}

static gboolean
decode_http_port (JsonObject *obj, gboolean *present, guint *port, GError **error)
{
  gint64 v = 0;

  if (!box_json_get_int (obj, "http_port", "http_port", present, &v, error))
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

  if (!box_json_get_object (obj, "network", "network", fields, &network, error))
    return FALSE;
  if (network == NULL)
    return TRUE;
  node = box_json_member (network, "egress");
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

  if (!box_json_get_strv (obj, "secrets", "secrets", secrets, error))
    return FALSE;
  for (i = 0; *secrets != NULL && (*secrets)[i] != NULL; i++) {
    const char *name = (*secrets)[i];

    if (!box_validate_secret_name (name, error))
      return FALSE;
    for (j = 0; j < i; j++) {
      if (strcmp ((*secrets)[j], name) == 0) {
        g_autofree char *msg = g_strdup_printf ("invalid secrets: \"%s\" is listed twice", name);
        return box_json_invalid (error, msg);
      }
    }
    if (env != NULL && g_hash_table_contains (env, name)) {
      g_autofree char *msg = g_strdup_printf (
        "invalid secrets: \"%s\" is also a key in env; a sandbox cannot have both", name);
      return box_json_invalid (error, msg);
    }
  }
  return TRUE;
}

static JsonObject *
body_object (JsonNode *body, GError **error)
{
  if (body == NULL || !JSON_NODE_HOLDS_OBJECT (body)) {
    box_json_not_an_object (body, error);
    return NULL;
  }
  return json_node_get_object (body);
}

/* ---- Sandboxes --------------------------------------------------------- */

static gboolean
decode_resources (JsonObject *obj, BoxResources *res, GError **error)
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

  if (!box_json_get_object (obj, "resources", "resources", fields, &resources, error))
    return FALSE;
  if (resources == NULL)
    return TRUE;
  for (i = 0; i < G_N_ELEMENTS (members); i++) {
    gint64 v = 0;

    if (!box_json_get_int (resources, members[i].name, members[i].path, NULL, &v, error))
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

  if (!box_json_get_object (obj, "from", "from", fields, &from, error))
    return FALSE;
  if (from == NULL)
    return TRUE;
  if (!box_json_get_string (from, "sandbox", "from.sandbox", &req->from_sandbox, error) ||
      !box_json_get_string (from, "checkpoint", "from.checkpoint", &req->from_checkpoint, error))
    return FALSE;
  if (req->from_sandbox == NULL || req->from_sandbox[0] == '\0' ||
      req->from_checkpoint == NULL || req->from_checkpoint[0] == '\0')
    return box_json_invalid (error, "invalid from: a fork needs both from.sandbox and from.checkpoint");
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

  if (obj == NULL || !box_json_check_fields (obj, fields, error))
    return NULL;
  req = g_new0 (BoxSandboxCreate, 1);
  if (!box_json_get_string (obj, "name", "name", &req->name, error) ||
      !box_json_get_string (obj, "template", "template", &req->template_name, error) ||
      !box_json_get_string (obj, "image", "image", &req->image, error) ||
      !decode_resources (obj, &req->resources, error) ||
      !decode_env_labels (obj, &req->env, &req->labels, error) ||
      !decode_idle (obj, &req->has_idle_timeout_s, &req->idle_timeout_s, &req->has_idle_action,
                    &req->idle_action, error) ||
      !decode_deadline (obj, NULL, &req->has_deadline, &req->deadline_at, &req->deadline_action,
                        error) ||
      !box_json_get_bool (obj, "protected", "protected", NULL, &req->protected_, error) ||
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
  /* a fork takes template, image and resources from its checkpoint: given
   * at all (null, "" or {} too), they are refused */
  if (req->from_sandbox != NULL &&
      (json_object_has_member (obj, "template") || json_object_has_member (obj, "image") ||
       json_object_has_member (obj, "resources"))) {
    box_json_invalid (error, "invalid request: template, image and resources come from the checkpoint "
                    "in a fork (from) and must not be given");
    return NULL;
  }
  if (req->template_name != NULL && req->image != NULL) {
    box_json_invalid (error, "invalid request: give template or image, not both");
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
      !box_json_get_bool (obj, "protected", "protected", &req->has_protected, &req->protected_, error) ||
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
    box_json_type_error (node, "network.egress", "object", error);
    return NULL;
  }
  obj = json_node_get_object (node);
  if (!box_json_check_fields (obj, fields, error) ||
      !box_json_get_string (obj, "include", "network.egress.include", &rule->include, error) ||
      !box_json_get_string (obj, "domain", "network.egress.domain", &rule->domain, error) ||
      !box_json_get_string (obj, "action", "network.egress.action", &action, error))
    return NULL;
  ports = box_json_member (obj, "ports");
  if (ports != NULL && !JSON_NODE_HOLDS_ARRAY (ports)) {
    box_json_type_error (ports, "network.egress.ports", "array", error);
    return NULL;
  }
  if (rule->include != NULL) {
    if (json_object_get_size (obj) != 1) {
      box_json_invalid (error, "invalid network rule: an include entry has no other field");
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
    box_json_invalid (error, msg);
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
        box_json_type_error (element, "network.egress.ports", "integer", error);
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
    box_json_type_error (egress, "network.egress", "array", error);
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

/* The list of a defaults document {comment?, egress: [Rule]}: allow and
 * deny rules of their own (no include), at least one (an include that
 * expanded to nothing would leave a rule list that restricts nothing), at
 * most BOX_EGRESS_RULES_MAX.  @what names the document in errors. */
static GPtrArray *
network_defaults_parse (const char *what, const char *data, gsize len, GError **error)
{
  static const char *const fields[] = { "comment", "egress", NULL };
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GPtrArray) rules = NULL;
  g_autoptr(GError) local_error = NULL;
  JsonNode *root;
  JsonObject *object;
  guint i;

  if (!json_parser_load_from_data (parser, data, (gssize) len, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s: not JSON: %s", what,
                 local_error->message);
    return NULL;
  }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root) ||
      !json_object_has_member ((object = json_node_get_object (root)), "egress")) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "%s: not an object with an egress list ({\"egress\": [Rule]})", what);
    return NULL;
  }
  if (!box_json_check_fields (object, fields, &local_error) ||
      (rules = box_rules_from_json (json_object_get_member (object, "egress"),
                                    &local_error)) == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s: %s", what, local_error->message);
    return NULL;
  }
  for (i = 0; i < rules->len; i++) {
    const BoxRule *rule = g_ptr_array_index (rules, i);

    if (rule->include != NULL) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                   "%s: rule %u is an include; the defaults cannot include themselves", what,
                   i + 1);
      return NULL;
    }
  }
  if (rules->len == 0 || rules->len > BOX_EGRESS_RULES_MAX) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "%s: %u rules; the defaults are 1 to %d rules", what, rules->len,
                 BOX_EGRESS_RULES_MAX);
    return NULL;
  }
  return g_steal_pointer (&rules);
}

GPtrArray *
box_network_defaults_load (GError **error)
{
  g_autoptr(GBytes) bytes = NULL;
  gsize len;
  const char *data;

  bytes = g_resources_lookup_data ("/org/box/network-defaults.json",
                                   G_RESOURCE_LOOKUP_FLAGS_NONE, error);
  if (bytes == NULL)
    return NULL;
  data = g_bytes_get_data (bytes, &len);
  return network_defaults_parse ("network-defaults.json", data, len, error);
}

GPtrArray *
box_network_defaults_load_file (const char *path, GError **error)
{
  g_autoptr(GMappedFile) file = NULL;
  g_autoptr(GError) local_error = NULL;
  gsize len;

  file = g_mapped_file_new (path, FALSE, &local_error);
  if (file == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "network_defaults_file: %s",
                 local_error->message);
    return NULL;
  }
  len = g_mapped_file_get_length (file);
  if (len > BOX_NETWORK_DEFAULTS_FILE_MAX) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "network_defaults_file %s: %" G_GSIZE_FORMAT " bytes, at most %d", path, len,
                 BOX_NETWORK_DEFAULTS_FILE_MAX);
    return NULL;
  }
  {
    g_autofree char *what = g_strdup_printf ("network_defaults_file %s", path);

    return network_defaults_parse (what, g_mapped_file_get_contents (file), len, error);
  }
}

/* ---- Secrets ----------------------------------------------------------- */

static gboolean
decode_inject (JsonObject *obj, BoxSecretPut *req, GError **error)
{
  static const char *const fields[] = { "header", "format", NULL };
  JsonObject *inject = NULL;

  if (!box_json_get_object (obj, "inject", "inject", fields, &inject, error))
    return FALSE;
  if (inject == NULL)
    return TRUE;
  if (!box_json_get_string (inject, "header", "inject.header", &req->inject_header, error) ||
      !box_json_get_string (inject, "format", "inject.format", &req->inject_format, error))
    return FALSE;
  if (req->inject_header == NULL || req->inject_format == NULL)
    return box_json_invalid (error, "invalid inject: header and format are both required");
  if (!box_validate_inject_header (req->inject_header, error))
    return FALSE;
  if (strstr (req->inject_format, "{value}") == NULL)
    return box_json_invalid (error, "invalid inject.format: must contain {value}");
  if (strpbrk (req->inject_format, "\r\n") != NULL)
    return box_json_invalid (error, "invalid inject.format: must not contain CR or LF");
  if (strlen (req->inject_format) > BOX_SECRET_VALUE_MAX)
    return box_json_invalid (error, "invalid inject.format: must be at most 8192 bytes");
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
  if (!box_json_get_string (obj, "value", "value", &req->value, error) ||
      !box_json_get_strv (obj, "hosts", "hosts", &req->hosts, error) ||
      !decode_inject (obj, req, error) ||
      !box_json_get_string (obj, "placeholder_prefix", "placeholder_prefix", &req->placeholder_prefix, error))
    return NULL;
  if (req->value == NULL) {
    box_json_invalid (error, "invalid secret: value is required");
    return NULL;
  }
  if (!box_validate_secret_value (req->value, strlen (req->value), error))
    return NULL;
  if (req->hosts == NULL || req->hosts[0] == NULL) {
    box_json_invalid (error, "invalid secret: hosts must name at least one host");
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
  if ((name != NULL && !box_json_get_string (obj, "name", "name", &name_value, error)) ||
      !box_json_get_strv (obj, "domains", "domains", &domains_value, error))
    return FALSE;
  if (name != NULL) {
    if (name_value == NULL)
      return box_json_invalid (error, "invalid project: name is required");
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
        return box_json_invalid (error, msg);
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
box_key_create_from_json (JsonNode *body, char **name, gboolean *read_only, GError **error)
{
  static const char *const fields[] = { "name", "read_only", NULL };
  JsonObject *obj = body_object (body, error);
  g_autofree char *name_value = NULL;
  gboolean read_only_value = FALSE;

  if (obj == NULL || !box_json_check_fields (obj, fields, error) ||
      !box_json_get_string (obj, "name", "name", &name_value, error) ||
      !box_json_get_bool (obj, "read_only", "read_only", NULL, &read_only_value, error))
    return FALSE;
  if (read_only != NULL)
    *read_only = read_only_value;
  if (name_value == NULL)
    return box_json_invalid (error, "invalid key: name is required");
  if (!box_validate_key_name (name_value, error))
    return FALSE;
  if (name != NULL)
    *name = g_steal_pointer (&name_value);
  return TRUE;
}

/* ---- checkpoints -------------------------------------------------------- */

/* {comment?, memory?}: the comment at most BOX_CHECKPOINT_COMMENT_MAX bytes
 * of UTF-8 without control characters (doc/API.md); memory default true. */
gboolean
box_checkpoint_create_from_json (JsonNode *body, char **comment, gboolean *memory, GError **error)
{
  static const char *const fields[] = { "comment", "memory", NULL };
  JsonObject *obj = body_object (body, error);
  g_autofree char *text = NULL;
  gboolean with_memory = TRUE;

  if (obj == NULL || !box_json_check_fields (obj, fields, error) ||
      !box_json_get_string (obj, "comment", "comment", &text, error) ||
      !box_json_get_bool (obj, "memory", "memory", NULL, &with_memory, error))
    return FALSE;
  if (text != NULL) {
    if (strlen (text) > BOX_CHECKPOINT_COMMENT_MAX)
      return box_json_invalid (error, "invalid comment: at most 256 bytes");
    for (const char *c = text; *c != '\0'; c++) {
      if ((guchar) *c < 0x20 || *c == 0x7f)
        return box_json_invalid (error, "invalid comment: no control characters");
    }
  }
  *comment = text != NULL ? g_steal_pointer (&text) : g_strdup ("");
  *memory = with_memory;
  return TRUE;
}

/* ---- exec/run ---------------------------------------------------------- */

static gboolean
is_base64 (const char *text)
{
  gsize len = strlen (text);
  gsize i;

  if (len % 4 != 0)
    return FALSE;
  for (i = 0; i < len; i++) {
    char c = text[i];
    if (g_ascii_isalnum (c) || c == '+' || c == '/')
      continue;
    /* padding only at the end, at most two */
    if (c == '=' && i >= len - 2 && (i == len - 1 || text[len - 1] == '='))
      continue;
    return FALSE;
  }
  return TRUE;
}

static BoxExecRequest *
exec_invalid (GError **error, const char *message)
{
  box_json_invalid (error, message);
  return NULL;
}

BoxExecRequest *
box_exec_request_from_json (JsonNode *body, GError **error)
{
  static const char *const allowed[] = { "cmd", "stdin", "cwd", "env", "user", "timeout_s", NULL };
  g_autoptr(BoxExecRequest) req = g_new0 (BoxExecRequest, 1);
  g_autofree char *stdin_text = NULL;
  JsonObject *obj = body_object (body, error);
  gint64 timeout = 60;
  GHashTableIter iter;
  gpointer key;

  if (obj == NULL || !box_json_check_fields (obj, allowed, error) ||
      !box_json_get_strv (obj, "cmd", "cmd", &req->argv, error) ||
      !box_json_get_string (obj, "stdin", "stdin", &stdin_text, error) ||
      !box_json_get_string (obj, "cwd", "cwd", &req->cwd, error) ||
      !box_json_get_string_map (obj, "env", "env", &req->env, error) ||
      !box_json_get_string (obj, "user", "user", &req->user, error) ||
      !box_json_get_int (obj, "timeout_s", "timeout_s", NULL, &timeout, error))
    return NULL;

  if (req->argv == NULL || req->argv[0] == NULL || req->argv[0][0] == '\0')
    return exec_invalid (error, "invalid cmd: a non-empty array of strings (argv) is required");
  if (timeout < 1 || timeout > 3600) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "invalid timeout_s %" G_GINT64_FORMAT ": must be 1 to 3600", timeout);
    return NULL;
  }
  req->timeout_s = (guint) timeout;
  if (stdin_text != NULL) {
    guchar *data;
    gsize len;

    if (!is_base64 (stdin_text))
      return exec_invalid (error, "invalid stdin: must be base64");
    data = g_base64_decode (stdin_text, &len);
    req->stdin_data = g_bytes_new_take (data, len);
  }
  if (req->cwd != NULL && req->cwd[0] != '/')
    return exec_invalid (error, "invalid cwd: must be an absolute path");
  if (req->user != NULL && req->user[0] == '\0')
    return exec_invalid (error, "invalid user: must not be empty");
  if (req->env != NULL) {
    g_hash_table_iter_init (&iter, req->env);
    while (g_hash_table_iter_next (&iter, &key, NULL)) {
      if (!box_validate_env_name (key, error))
        return NULL;
    }
  }
  return g_steal_pointer (&req);
}
