/* box-records.c: the service's records: enum names, times and the API JSON
 * form (lifetimes and boxed types: box-records-boxed.c; the storage form:
 * box-records-storage.c). */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-records.h"
#include "box-records-private.h"

/* ---- Enums <-> strings ------------------------------------------------- */

const char *const box_records_sandbox_states[5] = {
  [BOX_SANDBOX_STATE_CREATING] = "creating",
  [BOX_SANDBOX_STATE_RUNNING] = "running",
  [BOX_SANDBOX_STATE_PAUSED] = "paused",
  [BOX_SANDBOX_STATE_STOPPED] = "stopped",
  [BOX_SANDBOX_STATE_ERROR] = "error",
};

const char *const box_records_idle_actions[3] = {
  [BOX_IDLE_ACTION_PAUSE] = "pause",
  [BOX_IDLE_ACTION_STOP] = "stop",
  [BOX_IDLE_ACTION_NONE] = "none",
};

const char *const box_records_deadline_actions[3] = {
  [BOX_DEADLINE_ACTION_DELETE] = "delete",
  [BOX_DEADLINE_ACTION_PAUSE] = "pause",
  [BOX_DEADLINE_ACTION_STOP] = "stop",
};

gboolean
box_records_enum_from_string (const char *const *names, guint n_names, const char *str, guint *out)
{
  guint i;

  if (str == NULL)
    return FALSE;
  for (i = 0; i < n_names; i++) {
    if (g_strcmp0 (names[i], str) == 0) {
      if (out != NULL)
        *out = i;
      return TRUE;
    }
  }
  return FALSE;
}

const char *
box_sandbox_state_to_string (BoxSandboxState state)
{
  if ((guint) state >= G_N_ELEMENTS (box_records_sandbox_states))
    return "error";
  return box_records_sandbox_states[state];
}

gboolean
box_sandbox_state_from_string (const char *str, BoxSandboxState *out)
{
  guint v = 0;

  if (!box_records_enum_from_string (box_records_sandbox_states, G_N_ELEMENTS (box_records_sandbox_states), str, &v))
    return FALSE;
  if (out != NULL)
    *out = (BoxSandboxState) v;
  return TRUE;
}

const char *
box_idle_action_to_string (BoxIdleAction action)
{
  if ((guint) action >= G_N_ELEMENTS (box_records_idle_actions))
    return "pause";
  return box_records_idle_actions[action];
}

gboolean
box_idle_action_from_string (const char *str, BoxIdleAction *out)
{
  guint v = 0;

  if (!box_records_enum_from_string (box_records_idle_actions, G_N_ELEMENTS (box_records_idle_actions), str, &v))
    return FALSE;
  if (out != NULL)
    *out = (BoxIdleAction) v;
  return TRUE;
}

const char *
box_deadline_action_to_string (BoxDeadlineAction action)
{
  if ((guint) action >= G_N_ELEMENTS (box_records_deadline_actions))
    return "delete";
  return box_records_deadline_actions[action];
}

gboolean
box_deadline_action_from_string (const char *str, BoxDeadlineAction *out)
{
  guint v = 0;

  if (!box_records_enum_from_string (box_records_deadline_actions, G_N_ELEMENTS (box_records_deadline_actions), str, &v))
    return FALSE;
  if (out != NULL)
    *out = (BoxDeadlineAction) v;
  return TRUE;
}

/* ---- Time -------------------------------------------------------------- */

/* Whole seconds, always UTC with 'Z': the API never needs more, and the
 * storage form keeps the exact microseconds as integers. */
char *
box_time_format (gint64 usec)
{
  gint64 secs = usec / G_USEC_PER_SEC;
  g_autoptr(GDateTime) dt = NULL;

  if (usec < 0 && usec % G_USEC_PER_SEC != 0)
    secs--;
  int year, month, day;

  dt = g_date_time_new_from_unix_utc (secs);
  if (dt == NULL)
    dt = g_date_time_new_from_unix_utc (0);
  g_date_time_get_ymd (dt, &year, &month, &day);
  /* four-digit years (every real one) without g_date_time_format()'s
   * format parser, a hot path of the API's answers; the same text */
  if (year >= 1000)
    return g_strdup_printf ("%d-%02d-%02dT%02d:%02d:%02dZ", year, month, day,
                            g_date_time_get_hour (dt), g_date_time_get_minute (dt),
                            g_date_time_get_second (dt));
  return g_date_time_format (dt, "%Y-%m-%dT%H:%M:%SZ");
}

static gboolean
digits_at (const char *s, guint n)
{
  guint i;

  for (i = 0; i < n; i++) {
    if (!g_ascii_isdigit (s[i]))
      return FALSE;
  }
  return TRUE;
}

/* RFC 3339 section 5.6 date-time, checked by hand because
 * g_date_time_new_from_iso8601() also takes week dates, ordinal dates and
 * the basic format. */
static gboolean
is_rfc3339 (const char *s)
{
  const char *p;

  if (!digits_at (s, 4) || s[4] != '-' || !digits_at (s + 5, 2) || s[7] != '-' ||
      !digits_at (s + 8, 2))
    return FALSE;
  if (s[10] != 'T' && s[10] != 't' && s[10] != ' ')
    return FALSE;
  if (!digits_at (s + 11, 2) || s[13] != ':' || !digits_at (s + 14, 2) || s[16] != ':' ||
      !digits_at (s + 17, 2))
    return FALSE;
  p = s + 19;
  if (*p == '.') {
    p++;
    if (!g_ascii_isdigit (*p))
      return FALSE;
    while (g_ascii_isdigit (*p))
      p++;
  }
  if ((*p == 'Z' || *p == 'z') && p[1] == '\0')
    return TRUE;
  if ((*p == '+' || *p == '-') && digits_at (p + 1, 2) && p[3] == ':' && digits_at (p + 4, 2) &&
      p[6] == '\0')
    return TRUE;
  return FALSE;
}

gboolean
box_time_parse (const char *str, gint64 *usec_out)
{
  g_autoptr(GDateTime) dt = NULL;
  g_autofree char *copy = NULL;
  gsize len;

  if (str == NULL || !is_rfc3339 (str))
    return FALSE;
  /* GLib wants 'T' and 'Z' where RFC 3339 also allows 't', ' ' and 'z' */
  copy = g_strdup (str);
  len = strlen (copy);
  copy[10] = 'T';
  if (copy[len - 1] == 'z')
    copy[len - 1] = 'Z';
  /* a NULL default zone makes a value without an offset fail */
  dt = g_date_time_new_from_iso8601 (copy, NULL);
  if (dt == NULL)
    return FALSE;
  if (usec_out != NULL)
    *usec_out = g_date_time_to_unix (dt) * G_USEC_PER_SEC + g_date_time_get_microsecond (dt);
  return TRUE;
}

/* ---- Small helpers ----------------------------------------------------- */

GHashTable *
box_records_string_map_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}

static int
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

static JsonObject *
string_map_to_json (GHashTable *map)
{
  JsonObject *obj = json_object_new ();
  g_autofree gpointer *keys = NULL;
  guint n_keys = 0;
  guint i;

  if (map == NULL)
    return obj;
  keys = g_hash_table_get_keys_as_array (map, &n_keys);
  qsort (keys, n_keys, sizeof (gpointer), compare_strings);
  for (i = 0; i < n_keys; i++)
    json_object_set_string_member (obj, keys[i], g_hash_table_lookup (map, keys[i]));
  return obj;
}

JsonArray *
box_records_strv_to_json (char *const *strv)
{
  JsonArray *array = json_array_new ();

  for (guint i = 0; strv != NULL && strv[i] != NULL; i++)
    json_array_add_string_element (array, strv[i]);
  return array;
}

void
box_records_set_string (JsonObject *obj, const char *member, const char *value)
{
  json_object_set_string_member (obj, member, value != NULL ? value : "");
}

void
box_records_set_nullable_string (JsonObject *obj, const char *member, const char *value)
{
  if (value == NULL)
    json_object_set_null_member (obj, member);
  else
    json_object_set_string_member (obj, member, value);
}

static void
set_time (JsonObject *obj, const char *member, gint64 usec)
{
  g_autofree char *str = box_time_format (usec);

  json_object_set_string_member (obj, member, str);
}

static JsonNode *
node_from_object (JsonObject *obj)
{
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_node_take_object (node, obj);
  return node;
}

char *
box_records_hex_encode (GBytes *bytes)
{
  static const char digits[] = "0123456789abcdef";
  gsize size = 0;
  const guint8 *data = g_bytes_get_data (bytes, &size);
  char *hex = g_malloc (size * 2 + 1);

  for (gsize i = 0; i < size; i++) {
    hex[2 * i] = digits[data[i] >> 4];
    hex[2 * i + 1] = digits[data[i] & 0xf];
  }
  hex[size * 2] = '\0';
  return hex;
}

GBytes *
box_records_hex_decode (const char *hex)
{
  gsize len;
  g_autofree guint8 *data = NULL;

  if (hex == NULL || (len = strlen (hex)) % 2 != 0)
    return NULL;
  data = g_malloc (len / 2 + 1);
  for (gsize i = 0; i < len / 2; i++) {
    int hi = g_ascii_xdigit_value (hex[2 * i]);
    int lo = g_ascii_xdigit_value (hex[2 * i + 1]);

    if (hi < 0 || lo < 0)
      return NULL;
    data[i] = (guint8) (hi * 16 + lo);
  }
  return g_bytes_new_take (g_steal_pointer (&data), len / 2);
}

char *
box_records_object_to_string (JsonObject *obj)
{
  g_autoptr(JsonNode) node = node_from_object (obj);

  return json_to_string (node, FALSE);
}

static JsonObject *
resources_to_json (const BoxResources *res)
{
  JsonObject *obj = json_object_new ();

  json_object_set_int_member (obj, "cpus", res->cpus);
  json_object_set_int_member (obj, "memory_mib", res->memory_mib);
  json_object_set_int_member (obj, "disk_gib", res->disk_gib);
  return obj;
}

/* A deep copy: json_node_copy() only references containers. */
static JsonNode *
json_node_deep_copy (JsonNode *node)
{
  JsonNode *copy;

  if (JSON_NODE_HOLDS_OBJECT (node)) {
    JsonObject *obj = json_node_get_object (node);
    JsonObject *out = json_object_new ();
    JsonObjectIter iter;
    const char *name;
    JsonNode *member;

    json_object_iter_init_ordered (&iter, obj);
    while (json_object_iter_next_ordered (&iter, &name, &member))
      json_object_set_member (out, name, json_node_deep_copy (member));
    return node_from_object (out);
  }
  if (JSON_NODE_HOLDS_ARRAY (node)) {
    JsonArray *array = json_node_get_array (node);
    JsonArray *out = json_array_new ();
    guint i;

    for (i = 0; i < json_array_get_length (array); i++)
      json_array_add_element (out, json_node_deep_copy (json_array_get_element (array, i)));
    copy = json_node_new (JSON_NODE_ARRAY);
    json_node_take_array (copy, out);
    return copy;
  }
  return json_node_copy (node);
}

JsonObject *
box_records_json_object_deep_copy (JsonObject *obj)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autoptr(JsonNode) copy = NULL;

  json_node_set_object (node, obj);
  copy = json_node_deep_copy (node);
  return json_object_ref (json_node_get_object (copy));
}

/* ---- API JSON ---------------------------------------------------------- */

JsonNode *
box_project_to_api_json (const BoxProject *project)
{
  JsonObject *obj = json_object_new ();

  g_return_val_if_fail (project != NULL, NULL);
  box_records_set_string (obj, "name", project->name);
  json_object_set_array_member (obj, "domains", box_records_strv_to_json (project->domains));
  set_time (obj, "created_at", project->created_at);
  return node_from_object (obj);
}

JsonNode *
box_key_to_api_json (const BoxKey *key)
{
  JsonObject *obj = json_object_new ();

  g_return_val_if_fail (key != NULL, NULL);
  box_records_set_string (obj, "id", key->id);
  box_records_set_string (obj, "name", key->name);
  box_records_set_string (obj, "project", key->project);
  set_time (obj, "created_at", key->created_at);
  return node_from_object (obj);
}

static JsonObject *
rule_to_json (const BoxRule *rule, gboolean api)
{
  JsonObject *obj = json_object_new ();
  JsonArray *ports;
  guint i;

  if (rule->include != NULL) {
    json_object_set_string_member (obj, "include", rule->include);
    return obj;
  }
  box_records_set_string (obj, "domain", rule->domain);
  json_object_set_string_member (obj, "action", rule->allow ? "allow" : "deny");
  if (!rule->allow || (!api && rule->n_ports == 0))
    return obj;
  ports = json_array_new ();
  if (rule->n_ports == 0) {
    json_array_add_int_element (ports, 80);
    json_array_add_int_element (ports, 443);
  }
  for (i = 0; i < rule->n_ports && rule->ports != NULL; i++)
    json_array_add_int_element (ports, rule->ports[i]);
  json_object_set_array_member (obj, "ports", ports);
  return obj;
}

JsonNode *
box_rule_to_api_json (const BoxRule *rule)
{
  g_return_val_if_fail (rule != NULL, NULL);
  return node_from_object (rule_to_json (rule, TRUE));
}

static JsonObject *
network_to_json (GPtrArray *egress, gboolean api)
{
  JsonObject *obj = json_object_new ();
  JsonArray *rules = json_array_new ();
  guint i;

  for (i = 0; egress != NULL && i < egress->len; i++)
    json_array_add_object_element (rules, rule_to_json (g_ptr_array_index (egress, i), api));
  json_object_set_array_member (obj, "egress", rules);
  return obj;
}

char *
box_sandbox_url (const BoxSandbox *sandbox, const char *sandbox_domain)
{
  g_return_val_if_fail (sandbox != NULL, NULL);
  if (sandbox_domain == NULL || sandbox_domain[0] == '\0')
    return g_strdup ("");
  return g_strdup_printf ("https://%s--%s.%s", sandbox->name != NULL ? sandbox->name : "",
                          sandbox->project != NULL ? sandbox->project : "", sandbox_domain);
}

/* The fields both forms share, in the specification's order. */
void
box_records_sandbox_common_to_json (JsonObject *obj, const BoxSandbox *sandbox, gboolean api)
{
  JsonObject *idle = json_object_new ();

  box_records_set_string (obj, "id", sandbox->id);
  box_records_set_string (obj, "name", sandbox->name);
  box_records_set_string (obj, "project", sandbox->project);
  box_records_set_string (obj, "template", sandbox->template_name);
  box_records_set_string (obj, "image", sandbox->image);
  json_object_set_string_member (obj, "state", box_sandbox_state_to_string (sandbox->state));
  json_object_set_object_member (obj, "resources", resources_to_json (&sandbox->resources));
  json_object_set_object_member (obj, "env", string_map_to_json (sandbox->env));
  json_object_set_object_member (obj, "labels", string_map_to_json (sandbox->labels));
  json_object_set_int_member (idle, "timeout_s", sandbox->idle_timeout_s);
  json_object_set_string_member (idle, "action", box_idle_action_to_string (sandbox->idle_action));
  json_object_set_object_member (obj, "idle", idle);
  if (sandbox->has_deadline) {
    JsonObject *deadline = json_object_new ();

    if (api)
      set_time (deadline, "at", sandbox->deadline_at);
    else
      json_object_set_int_member (deadline, "at", sandbox->deadline_at);
    json_object_set_string_member (deadline, "action",
                                   box_deadline_action_to_string (sandbox->deadline_action));
    json_object_set_object_member (obj, "deadline", deadline);
  } else {
    json_object_set_null_member (obj, "deadline");
  }
  json_object_set_boolean_member (obj, "protected", sandbox->protected_);
  json_object_set_int_member (obj, "http_port", sandbox->http_port);
  json_object_set_object_member (obj, "network", network_to_json (sandbox->egress, api));
  json_object_set_array_member (obj, "secrets", box_records_strv_to_json (sandbox->secrets));
}

JsonNode *
box_sandbox_to_api_json (const BoxSandbox *sandbox, const char *sandbox_domain,
                         const char *const *project_domains)
{
  JsonObject *obj = json_object_new ();
  JsonArray *urls = json_array_new ();
  g_autofree char *url = NULL;
  guint i;

  g_return_val_if_fail (sandbox != NULL, NULL);
  box_records_sandbox_common_to_json (obj, sandbox, TRUE);
  url = box_sandbox_url (sandbox, sandbox_domain);
  json_object_set_string_member (obj, "url", url);
  for (i = 0; project_domains != NULL && project_domains[i] != NULL; i++) {
    g_autofree char *u = g_strdup_printf ("https://%s.%s", sandbox->name != NULL ? sandbox->name : "",
                                          project_domains[i]);
    json_array_add_string_element (urls, u);
  }
  json_object_set_array_member (obj, "urls", urls);
  set_time (obj, "created_at", sandbox->created_at);
  set_time (obj, "updated_at", sandbox->updated_at);
  set_time (obj, "last_active_at", sandbox->last_active_at);
  return node_from_object (obj);
}

JsonNode *
box_checkpoint_to_api_json (const BoxCheckpoint *checkpoint)
{
  JsonObject *obj = json_object_new ();

  g_return_val_if_fail (checkpoint != NULL, NULL);
  box_records_set_string (obj, "id", checkpoint->id);
  box_records_set_string (obj, "sandbox", checkpoint->sandbox);
  box_records_set_string (obj, "comment", checkpoint->comment);
  json_object_set_boolean_member (obj, "memory", checkpoint->memory);
  json_object_set_boolean_member (obj, "auto", checkpoint->auto_);
  set_time (obj, "created_at", checkpoint->created_at);
  return node_from_object (obj);
}

void
box_records_secret_common_to_json (JsonObject *obj, const BoxSecret *secret)
{
  box_records_set_string (obj, "name", secret->name);
  json_object_set_array_member (obj, "hosts", box_records_strv_to_json (secret->hosts));
  box_records_set_string (obj, "placeholder", secret->placeholder);
  if (secret->inject_header != NULL) {
    JsonObject *inject = json_object_new ();

    json_object_set_string_member (inject, "header", secret->inject_header);
    box_records_set_string (inject, "format", secret->inject_format);
    json_object_set_object_member (obj, "inject", inject);
  } else {
    json_object_set_null_member (obj, "inject");
  }
}

JsonNode *
box_secret_to_api_json (const BoxSecret *secret)
{
  JsonObject *obj = json_object_new ();

  g_return_val_if_fail (secret != NULL, NULL);
  box_records_secret_common_to_json (obj, secret);
  set_time (obj, "created_at", secret->created_at);
  set_time (obj, "updated_at", secret->updated_at);
  return node_from_object (obj);
}

JsonNode *
box_template_to_api_json (const BoxTemplate *tmpl)
{
  JsonObject *obj = json_object_new ();

  g_return_val_if_fail (tmpl != NULL, NULL);
  box_records_set_string (obj, "name", tmpl->name);
  box_records_set_string (obj, "image", tmpl->image);
  json_object_set_object_member (obj, "resources", resources_to_json (&tmpl->resources));
  return node_from_object (obj);
}

JsonNode *
box_event_to_api_json (const BoxEvent *event)
{
  JsonObject *obj = json_object_new ();

  g_return_val_if_fail (event != NULL, NULL);
  box_records_set_string (obj, "type", event->type);
  box_records_set_string (obj, "sandbox", event->sandbox);
  set_time (obj, "at", event->at);
  if (event->detail != NULL)
    json_object_set_object_member (obj, "detail", box_records_json_object_deep_copy (event->detail));
  return node_from_object (obj);
}
