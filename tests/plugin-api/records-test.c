/* records-test.c: enums, times, copies and the JSON forms of records. */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-records.h"

/* 2026-11-22T00:58:55Z */
#define T0 ((gint64) 1795309135 * G_USEC_PER_SEC)

static char *
node_to_string (JsonNode *node)
{
  return json_to_string (node, FALSE);
}

static void
assert_member_names (JsonObject *obj, const char *const *expected)
{
  g_autoptr(GList) members = json_object_get_members (obj);
  GList *l;
  guint i = 0;

  for (l = members; l != NULL; l = l->next, i++) {
    g_assert_nonnull (expected[i]);
    g_assert_cmpstr (l->data, ==, expected[i]);
  }
  g_assert_null (expected[i]);
}

static void
test_enums (void)
{
  BoxSandboxState state = BOX_SANDBOX_STATE_ERROR;
  BoxIdleAction idle = BOX_IDLE_ACTION_NONE;
  BoxDeadlineAction deadline = BOX_DEADLINE_ACTION_STOP;
  const char *states[] = { "creating", "running", "paused", "stopped", "error" };
  const char *idles[] = { "pause", "stop", "none" };
  const char *deadlines[] = { "delete", "pause", "stop" };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (states); i++) {
    g_assert_cmpstr (box_sandbox_state_to_string (i), ==, states[i]);
    g_assert_true (box_sandbox_state_from_string (states[i], &state));
    g_assert_cmpint (state, ==, i);
  }
  for (i = 0; i < G_N_ELEMENTS (idles); i++) {
    g_assert_cmpstr (box_idle_action_to_string (i), ==, idles[i]);
    g_assert_true (box_idle_action_from_string (idles[i], &idle));
    g_assert_cmpint (idle, ==, i);
  }
  for (i = 0; i < G_N_ELEMENTS (deadlines); i++) {
    g_assert_cmpstr (box_deadline_action_to_string (i), ==, deadlines[i]);
    g_assert_true (box_deadline_action_from_string (deadlines[i], &deadline));
    g_assert_cmpint (deadline, ==, i);
  }
  g_assert_false (box_sandbox_state_from_string ("Running", &state));
  g_assert_false (box_sandbox_state_from_string ("deleted", &state));
  g_assert_false (box_sandbox_state_from_string (NULL, &state));
  g_assert_false (box_idle_action_from_string ("delete", &idle));
  g_assert_false (box_deadline_action_from_string ("none", &deadline));
  g_assert_false (box_deadline_action_from_string ("", &deadline));
}

static void
test_time (void)
{
  g_autofree char *s0 = box_time_format (T0);
  g_autofree char *s1 = box_time_format (T0 + 123456);
  g_autofree char *epoch = box_time_format (0);
  gint64 t = 0;

  g_assert_cmpstr (s0, ==, "2026-11-22T00:58:55Z");
  /* whole seconds */
  g_assert_cmpstr (s1, ==, "2026-11-22T00:58:55Z");
  g_assert_cmpstr (epoch, ==, "1970-01-01T00:00:00Z");

  g_assert_true (box_time_parse ("2026-11-22T00:58:55Z", &t));
  g_assert_cmpint (t, ==, T0);
  g_assert_true (box_time_parse ("2026-11-22T01:58:55+01:00", &t));
  g_assert_cmpint (t, ==, T0);
  g_assert_true (box_time_parse ("2026-11-21T19:58:55-05:00", &t));
  g_assert_cmpint (t, ==, T0);
  g_assert_true (box_time_parse ("2026-11-22T00:58:55.25Z", &t));
  g_assert_cmpint (t, ==, T0 + 250000);
  g_assert_true (box_time_parse ("2026-11-22t00:58:55z", &t));
  g_assert_cmpint (t, ==, T0);

  /* no zone, not RFC 3339, out of range */
  g_assert_false (box_time_parse ("2026-11-22T00:58:55", &t));
  g_assert_false (box_time_parse ("2026-11-22", &t));
  g_assert_false (box_time_parse ("2026-W47-7T00:58:55Z", &t));
  g_assert_false (box_time_parse ("20261122T005855Z", &t));
  g_assert_false (box_time_parse ("2026-11-22T00:58:55+0100", &t));
  g_assert_false (box_time_parse ("2026-13-22T00:58:55Z", &t));
  g_assert_false (box_time_parse ("2026-11-22T24:58:55Z", &t));
  g_assert_false (box_time_parse ("2026-11-22T00:58:55Z ", &t));
  g_assert_false (box_time_parse ("", &t));
  g_assert_false (box_time_parse (NULL, &t));
}

static BoxRule *
rule_new (const char *domain, gboolean allow, const guint16 *ports, guint n_ports,
          const char *include)
{
  BoxRule *rule = g_new0 (BoxRule, 1);

  rule->domain = g_strdup (domain);
  rule->allow = allow;
  if (n_ports > 0)
    rule->ports = g_memdup2 (ports, sizeof (guint16) * n_ports);
  rule->n_ports = n_ports;
  rule->include = g_strdup (include);
  return rule;
}

static BoxSandbox *
sandbox_full (void)
{
  BoxSandbox *sb = box_sandbox_new ();
  const guint16 ports[] = { 22, 8443 };
  const char *secrets[] = { "GITHUB_TOKEN", "OPENAI_KEY", NULL };

  sb->id = g_strdup ("sb-abcdefgh2345");
  sb->name = g_strdup ("calm-otter-0042");
  sb->project = g_strdup ("acme");
  g_free (sb->template_name);
  sb->template_name = g_strdup ("base");
  sb->state = BOX_SANDBOX_STATE_PAUSED;
  sb->resources = (BoxResources) { 4, 4096, 40 };
  g_hash_table_insert (sb->env, g_strdup ("ZED"), g_strdup ("last"));
  g_hash_table_insert (sb->env, g_strdup ("ALPHA"), g_strdup ("first"));
  g_hash_table_insert (sb->labels, g_strdup ("team"), g_strdup ("infra"));
  sb->idle_timeout_s = 600;
  sb->idle_action = BOX_IDLE_ACTION_STOP;
  sb->has_deadline = TRUE;
  sb->deadline_at = T0 + (gint64) 3600 * G_USEC_PER_SEC;
  sb->deadline_action = BOX_DEADLINE_ACTION_DELETE;
  sb->protected_ = TRUE;
  sb->http_port = 3000;
  g_ptr_array_add (sb->egress, rule_new ("api.example.com", TRUE, NULL, 0, NULL));
  g_ptr_array_add (sb->egress, rule_new ("*.example.org", TRUE, ports, 2, NULL));
  g_ptr_array_add (sb->egress, rule_new ("evil.example.com", FALSE, NULL, 0, NULL));
  g_ptr_array_add (sb->egress, rule_new (NULL, FALSE, NULL, 0, "defaults"));
  g_strfreev (sb->secrets);
  sb->secrets = g_strdupv ((char **) secrets);
  sb->created_at = T0;
  sb->updated_at = T0 + 1;
  sb->last_active_at = T0 + 2 * G_USEC_PER_SEC + 7;
  sb->node = g_strdup ("node-1");
  sb->snapshot_at = T0 + 99;
  sb->next_checkpoint = 4;
  sb->next_auto_checkpoint = 2;
  sb->fork_source = g_strdup ("sb-zzzzzzzzzzzz/v3");
  return sb;
}

static void
assert_rules_equal (GPtrArray *a, GPtrArray *b)
{
  guint i;

  g_assert_cmpuint (a->len, ==, b->len);
  for (i = 0; i < a->len; i++) {
    const BoxRule *ra = g_ptr_array_index (a, i);
    const BoxRule *rb = g_ptr_array_index (b, i);

    g_assert_cmpstr (ra->domain, ==, rb->domain);
    g_assert_cmpstr (ra->include, ==, rb->include);
    g_assert_cmpint (ra->allow, ==, rb->allow);
    g_assert_cmpuint (ra->n_ports, ==, rb->n_ports);
    if (ra->n_ports > 0)
      g_assert_cmpmem (ra->ports, ra->n_ports * 2, rb->ports, rb->n_ports * 2);
  }
}

static void
assert_maps_equal (GHashTable *a, GHashTable *b)
{
  GHashTableIter iter;
  gpointer key, value;

  g_assert_cmpuint (g_hash_table_size (a), ==, g_hash_table_size (b));
  g_hash_table_iter_init (&iter, a);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_assert_cmpstr (g_hash_table_lookup (b, key), ==, value);
}

static void
assert_sandboxes_equal (const BoxSandbox *a, const BoxSandbox *b)
{
  g_assert_cmpstr (a->id, ==, b->id);
  g_assert_cmpstr (a->name, ==, b->name);
  g_assert_cmpstr (a->project, ==, b->project);
  g_assert_cmpstr (a->template_name, ==, b->template_name);
  g_assert_cmpstr (a->image, ==, b->image);
  g_assert_cmpint (a->state, ==, b->state);
  g_assert_cmpuint (a->resources.cpus, ==, b->resources.cpus);
  g_assert_cmpuint (a->resources.memory_mib, ==, b->resources.memory_mib);
  g_assert_cmpuint (a->resources.disk_gib, ==, b->resources.disk_gib);
  assert_maps_equal (a->env, b->env);
  assert_maps_equal (a->labels, b->labels);
  g_assert_cmpuint (a->idle_timeout_s, ==, b->idle_timeout_s);
  g_assert_cmpint (a->idle_action, ==, b->idle_action);
  g_assert_cmpint (a->has_deadline, ==, b->has_deadline);
  g_assert_cmpint (a->deadline_at, ==, b->deadline_at);
  g_assert_cmpint (a->deadline_action, ==, b->deadline_action);
  g_assert_cmpint (a->protected_, ==, b->protected_);
  g_assert_cmpuint (a->http_port, ==, b->http_port);
  assert_rules_equal (a->egress, b->egress);
  g_assert_true (g_strv_equal ((const char *const *) a->secrets, (const char *const *) b->secrets));
  g_assert_cmpint (a->created_at, ==, b->created_at);
  g_assert_cmpint (a->updated_at, ==, b->updated_at);
  g_assert_cmpint (a->last_active_at, ==, b->last_active_at);
  g_assert_cmpstr (a->node, ==, b->node);
  g_assert_cmpint (a->snapshot_at, ==, b->snapshot_at);
  g_assert_cmpuint (a->next_checkpoint, ==, b->next_checkpoint);
  g_assert_cmpuint (a->next_auto_checkpoint, ==, b->next_auto_checkpoint);
  g_assert_cmpstr (a->fork_source, ==, b->fork_source);
}

static void
test_sandbox_new_defaults (void)
{
  g_autoptr(BoxSandbox) sb = box_sandbox_new ();

  g_assert_nonnull (sb->env);
  g_assert_nonnull (sb->labels);
  g_assert_nonnull (sb->egress);
  g_assert_nonnull (sb->secrets);
  g_assert_null (sb->secrets[0]);
  g_assert_cmpstr (sb->template_name, ==, "");
  g_assert_cmpstr (sb->image, ==, "");
  g_assert_cmpuint (sb->idle_timeout_s, ==, 300);
  g_assert_cmpint (sb->idle_action, ==, BOX_IDLE_ACTION_PAUSE);
  g_assert_cmpuint (sb->http_port, ==, 8080);
  g_assert_false (sb->protected_);
  g_assert_false (sb->has_deadline);
}

static void
test_sandbox_copy_deep (void)
{
  g_autoptr(BoxSandbox) sb = sandbox_full ();
  g_autoptr(BoxSandbox) copy = box_sandbox_copy (sb);
  BoxRule *rule;

  assert_sandboxes_equal (sb, copy);
  g_assert_true (copy->env != sb->env);
  g_assert_true (copy->egress != sb->egress);
  g_assert_true (copy->secrets != sb->secrets);
  g_assert_true (copy->name != sb->name);
  /* changing the copy leaves the original alone */
  g_hash_table_insert (copy->env, g_strdup ("NEW"), g_strdup ("1"));
  rule = g_ptr_array_index (copy->egress, 1);
  rule->ports[0] = 1;
  g_assert_false (g_hash_table_contains (sb->env, "NEW"));
  g_assert_cmpuint (((BoxRule *) g_ptr_array_index (sb->egress, 1))->ports[0], ==, 22);
  g_assert_null (box_sandbox_copy (NULL));
}

static void
test_sandbox_api_json (void)
{
  g_autoptr(BoxSandbox) sb = sandbox_full ();
  const char *domains[] = { "apps.acme.dev", "acme.io", NULL };
  const char *fields[] = {
    "id", "name", "project", "template", "image", "state", "resources", "env", "labels", "idle",
    "deadline", "protected", "http_port", "network", "secrets", "url", "urls", "created_at",
    "updated_at", "last_active_at", NULL,
  };
  g_autoptr(JsonNode) node = box_sandbox_to_api_json (sb, "box.example.net", domains);
  g_autofree char *str = node_to_string (node);
  JsonObject *obj = json_node_get_object (node);
  JsonObject *o;
  JsonArray *a;

  assert_member_names (obj, fields);
  g_assert_cmpstr (json_object_get_string_member (obj, "id"), ==, "sb-abcdefgh2345");
  g_assert_cmpstr (json_object_get_string_member (obj, "template"), ==, "base");
  g_assert_cmpstr (json_object_get_string_member (obj, "image"), ==, "");
  g_assert_cmpstr (json_object_get_string_member (obj, "state"), ==, "paused");
  o = json_object_get_object_member (obj, "resources");
  g_assert_cmpint (json_object_get_int_member (o, "cpus"), ==, 4);
  g_assert_cmpint (json_object_get_int_member (o, "memory_mib"), ==, 4096);
  g_assert_cmpint (json_object_get_int_member (o, "disk_gib"), ==, 40);
  /* maps come out sorted */
  g_assert_nonnull (strstr (str, "\"env\":{\"ALPHA\":\"first\",\"ZED\":\"last\"}"));
  o = json_object_get_object_member (obj, "idle");
  g_assert_cmpint (json_object_get_int_member (o, "timeout_s"), ==, 600);
  g_assert_cmpstr (json_object_get_string_member (o, "action"), ==, "stop");
  o = json_object_get_object_member (obj, "deadline");
  g_assert_cmpstr (json_object_get_string_member (o, "at"), ==, "2026-11-22T01:58:55Z");
  g_assert_cmpstr (json_object_get_string_member (o, "action"), ==, "delete");
  g_assert_true (json_object_get_boolean_member (obj, "protected"));
  g_assert_cmpint (json_object_get_int_member (obj, "http_port"), ==, 3000);
  /* rules as written, default ports shown */
  g_assert_nonnull (strstr (str, "\"network\":{\"egress\":["
                                 "{\"domain\":\"api.example.com\",\"action\":\"allow\",\"ports\":[80,443]},"
                                 "{\"domain\":\"*.example.org\",\"action\":\"allow\",\"ports\":[22,8443]},"
                                 "{\"domain\":\"evil.example.com\",\"action\":\"deny\"},"
                                 "{\"include\":\"defaults\"}]}"));
  a = json_object_get_array_member (obj, "secrets");
  g_assert_cmpuint (json_array_get_length (a), ==, 2);
  g_assert_cmpstr (json_array_get_string_element (a, 1), ==, "OPENAI_KEY");
  g_assert_cmpstr (json_object_get_string_member (obj, "url"), ==,
                   "https://calm-otter-0042--acme.box.example.net");
  a = json_object_get_array_member (obj, "urls");
  g_assert_cmpuint (json_array_get_length (a), ==, 2);
  g_assert_cmpstr (json_array_get_string_element (a, 0), ==, "https://calm-otter-0042.apps.acme.dev");
  g_assert_cmpstr (json_array_get_string_element (a, 1), ==, "https://calm-otter-0042.acme.io");
  g_assert_cmpstr (json_object_get_string_member (obj, "created_at"), ==, "2026-11-22T00:58:55Z");
  g_assert_cmpstr (json_object_get_string_member (obj, "last_active_at"), ==, "2026-11-22T00:58:57Z");
  /* internal fields stay internal */
  g_assert_null (strstr (str, "node-1"));
  g_assert_null (strstr (str, "fork_source"));
  g_assert_null (strstr (str, "snapshot_at"));
}

static void
test_sandbox_api_json_minimal (void)
{
  g_autoptr(BoxSandbox) sb = box_sandbox_new ();
  g_autoptr(JsonNode) node = NULL;
  g_autofree char *url = NULL;
  JsonObject *obj;

  sb->name = g_strdup ("web");
  sb->project = g_strdup ("p");
  node = box_sandbox_to_api_json (sb, NULL, NULL);
  obj = json_node_get_object (node);
  g_assert_cmpstr (json_object_get_string_member (obj, "url"), ==, "");
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (obj, "urls")), ==, 0);
  g_assert_true (json_object_get_null_member (obj, "deadline"));
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (
                      json_object_get_object_member (obj, "network"), "egress")), ==, 0);
  g_assert_cmpuint (json_object_get_size (json_object_get_object_member (obj, "env")), ==, 0);
  url = box_sandbox_url (sb, "");
  g_assert_cmpstr (url, ==, "");
  g_clear_pointer (&url, g_free);
  url = box_sandbox_url (sb, "d.example");
  g_assert_cmpstr (url, ==, "https://web--p.d.example");
}

static void
test_sandbox_storage_round_trip (void)
{
  g_autoptr(BoxSandbox) sb = sandbox_full ();
  g_autoptr(BoxSandbox) minimal = box_sandbox_new ();
  g_autoptr(BoxSandbox) back = NULL;
  g_autoptr(BoxSandbox) back2 = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *json = box_sandbox_to_storage_json (sb);
  g_autofree char *json_again = NULL;
  g_autofree char *json_minimal = NULL;

  back = box_sandbox_from_storage_json (json, &error);
  g_assert_no_error (error);
  assert_sandboxes_equal (sb, back);
  /* stable output */
  json_again = box_sandbox_to_storage_json (back);
  g_assert_cmpstr (json, ==, json_again);

  minimal->id = g_strdup ("sb-aaaaaaaaaaaa");
  minimal->name = g_strdup ("m");
  minimal->project = g_strdup ("p");
  json_minimal = box_sandbox_to_storage_json (minimal);
  back2 = box_sandbox_from_storage_json (json_minimal, &error);
  g_assert_no_error (error);
  assert_sandboxes_equal (minimal, back2);
  g_assert_null (back2->node);
  g_assert_null (back2->fork_source);
}

static void
test_storage_corrupt (void)
{
  const char *bad[] = {
    "", "not json", "[]", "{\"id\": 5}", "{\"env\": {\"A\": 1}}", "{\"state\": \"flying\"}",
    "{\"network\": {\"egress\": [1]}}", "{\"network\": {\"egress\": [{\"ports\": [70000]}]}}",
    "{\"deadline\": {\"at\": \"soon\"}}", "{\"secrets\": [1]}", "{\"protected\": \"yes\"}",
    "{\"http_port\": 1.5}",
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(BoxSandbox) sb = box_sandbox_from_storage_json (bad[i], &error);

    g_assert_null (sb);
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  }
  {
    g_autoptr(GError) error = NULL;
    /* members missing from an older record take their defaults */
    g_autoptr(BoxSandbox) sb = box_sandbox_from_storage_json ("{\"id\": \"sb-aaaaaaaaaaaa\"}", &error);

    g_assert_no_error (error);
    g_assert_cmpuint (sb->http_port, ==, 8080);
    g_assert_cmpuint (sb->idle_timeout_s, ==, 300);
    g_assert_nonnull (sb->secrets);
  }
}

static void
test_rule_api_json (void)
{
  const guint16 ports[] = { 5432 };
  g_autoptr(BoxRule) allow = rule_new ("db.example.com", TRUE, ports, 1, NULL);
  g_autoptr(BoxRule) deny = rule_new ("*", FALSE, NULL, 0, NULL);
  g_autoptr(BoxRule) include = rule_new (NULL, FALSE, NULL, 0, "defaults");
  g_autoptr(BoxRule) copy = box_rule_copy (allow);
  g_autoptr(JsonNode) n1 = box_rule_to_api_json (allow);
  g_autoptr(JsonNode) n2 = box_rule_to_api_json (deny);
  g_autoptr(JsonNode) n3 = box_rule_to_api_json (include);
  g_autofree char *s1 = node_to_string (n1);
  g_autofree char *s2 = node_to_string (n2);
  g_autofree char *s3 = node_to_string (n3);

  g_assert_cmpstr (s1, ==, "{\"domain\":\"db.example.com\",\"action\":\"allow\",\"ports\":[5432]}");
  g_assert_cmpstr (s2, ==, "{\"domain\":\"*\",\"action\":\"deny\"}");
  g_assert_cmpstr (s3, ==, "{\"include\":\"defaults\"}");
  g_assert_true (copy->ports != allow->ports);
  g_assert_cmpuint (copy->ports[0], ==, 5432);
}

static BoxSecret *
secret_full (void)
{
  BoxSecret *secret = g_new0 (BoxSecret, 1);
  const char *hosts[] = { "api.github.com", "*.example.com/v1", NULL };
  const guint8 blob[] = { 1, 2, 3, 4 };

  secret->name = g_strdup ("GITHUB_TOKEN");
  secret->project = g_strdup ("acme");
  secret->hosts = g_strdupv ((char **) hosts);
  secret->placeholder = g_strdup ("__box_github_token__");
  secret->inject_header = g_strdup ("Authorization");
  secret->inject_format = g_strdup ("Bearer {value}");
  secret->sealed_value = g_bytes_new (blob, sizeof blob);
  secret->created_at = T0;
  secret->updated_at = T0 + 5;
  return secret;
}

static void
test_secret_json (void)
{
  g_autoptr(BoxSecret) secret = secret_full ();
  g_autoptr(BoxSecret) copy = box_secret_copy (secret);
  g_autoptr(BoxSecret) back = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = box_secret_to_api_json (secret);
  g_autofree char *api = node_to_string (node);
  g_autofree char *storage = box_secret_to_storage_json (secret);
  const char *fields[] = { "name", "hosts", "placeholder", "inject", "created_at", "updated_at", NULL };
  JsonObject *inject;

  assert_member_names (json_node_get_object (node), fields);
  inject = json_object_get_object_member (json_node_get_object (node), "inject");
  g_assert_cmpstr (json_object_get_string_member (inject, "header"), ==, "Authorization");
  g_assert_cmpstr (json_object_get_string_member (inject, "format"), ==, "Bearer {value}");
  g_assert_null (strstr (api, "value\":"));
  g_assert_null (strstr (api, "acme"));

  g_assert_true (g_bytes_equal (copy->sealed_value, secret->sealed_value));
  g_assert_true (copy->hosts != secret->hosts);

  /* the sealed value is not in the storage JSON, it travels beside it */
  g_assert_null (strstr (storage, "sealed"));
  back = box_secret_from_storage_json (storage, secret->sealed_value, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (back->name, ==, secret->name);
  g_assert_cmpstr (back->project, ==, secret->project);
  g_assert_true (g_strv_equal ((const char *const *) back->hosts, (const char *const *) secret->hosts));
  g_assert_cmpstr (back->placeholder, ==, secret->placeholder);
  g_assert_cmpstr (back->inject_header, ==, secret->inject_header);
  g_assert_cmpstr (back->inject_format, ==, secret->inject_format);
  g_assert_true (g_bytes_equal (back->sealed_value, secret->sealed_value));
  g_assert_cmpint (back->created_at, ==, secret->created_at);
  g_assert_cmpint (back->updated_at, ==, secret->updated_at);
}

static void
test_secret_inject_null (void)
{
  g_autoptr(BoxSecret) secret = secret_full ();
  g_autoptr(BoxSecret) back = NULL;
  g_autoptr(JsonNode) node = NULL;
  g_autofree char *storage = NULL;

  g_clear_pointer (&secret->inject_header, g_free);
  g_clear_pointer (&secret->inject_format, g_free);
  node = box_secret_to_api_json (secret);
  g_assert_true (json_object_get_null_member (json_node_get_object (node), "inject"));
  storage = box_secret_to_storage_json (secret);
  back = box_secret_from_storage_json (storage, NULL, NULL);
  g_assert_nonnull (back);
  g_assert_null (back->inject_header);
  g_assert_null (back->inject_format);
  g_assert_null (back->sealed_value);
}

static void
test_checkpoint_json (void)
{
  BoxCheckpoint cp = { (char *) "v3", (char *) "sb-abcdefgh2345", (char *) "acme",
                       (char *) "before upgrade", TRUE, FALSE, T0 };
  g_autoptr(BoxCheckpoint) copy = box_checkpoint_copy (&cp);
  g_autoptr(BoxCheckpoint) back = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = box_checkpoint_to_api_json (&cp);
  g_autofree char *api = node_to_string (node);
  g_autofree char *storage = box_checkpoint_to_storage_json (&cp);

  g_assert_cmpstr (api, ==,
                   "{\"id\":\"v3\",\"sandbox\":\"sb-abcdefgh2345\",\"comment\":\"before upgrade\","
                   "\"memory\":true,\"auto\":false,\"created_at\":\"2026-11-22T00:58:55Z\"}");
  g_assert_true (copy->comment != cp.comment);
  back = box_checkpoint_from_storage_json (storage, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (back->id, ==, "v3");
  g_assert_cmpstr (back->sandbox, ==, cp.sandbox);
  g_assert_cmpstr (back->project, ==, "acme");
  g_assert_cmpstr (back->comment, ==, cp.comment);
  g_assert_true (back->memory);
  g_assert_false (back->auto_);
  g_assert_cmpint (back->created_at, ==, T0);
}

static void
test_project_key_template (void)
{
  const char *domains[] = { "acme.dev", NULL };
  BoxProject project = { (char *) "acme", (char **) domains, T0 };
  BoxKey key = { (char *) "key-abcdefgh2345", (char *) "ci", (char *) "acme",
                 (char *) "deadbeef", T0 };
  BoxTemplate tmpl = { (char *) "base", (char *) "", { 2, 2048, 20 } };
  g_autoptr(BoxProject) pcopy = box_project_copy (&project);
  g_autoptr(BoxKey) kcopy = box_key_copy (&key);
  g_autoptr(BoxTemplate) tcopy = box_template_copy (&tmpl);
  g_autoptr(BoxProject) pback = NULL;
  g_autoptr(JsonNode) pn = box_project_to_api_json (&project);
  g_autoptr(JsonNode) kn = box_key_to_api_json (&key);
  g_autoptr(JsonNode) tn = box_template_to_api_json (&tmpl);
  g_autofree char *ps = node_to_string (pn);
  g_autofree char *ks = node_to_string (kn);
  g_autofree char *ts = node_to_string (tn);
  g_autofree char *pstore = box_project_to_storage_json (&project);

  g_assert_cmpstr (ps, ==, "{\"name\":\"acme\",\"domains\":[\"acme.dev\"],\"created_at\":\"2026-11-22T00:58:55Z\"}");
  g_assert_cmpstr (ks, ==, "{\"id\":\"key-abcdefgh2345\",\"name\":\"ci\",\"project\":\"acme\","
                           "\"created_at\":\"2026-11-22T00:58:55Z\"}");
  g_assert_cmpstr (ts, ==, "{\"name\":\"base\",\"image\":\"\",\"resources\":"
                           "{\"cpus\":2,\"memory_mib\":2048,\"disk_gib\":20}}");
  g_assert_cmpstr (kcopy->hash, ==, "deadbeef");
  g_assert_true (pcopy->domains != project.domains);
  g_assert_cmpuint (tcopy->resources.memory_mib, ==, 2048);
  pback = box_project_from_storage_json (pstore, NULL);
  g_assert_nonnull (pback);
  g_assert_cmpstr (pback->name, ==, "acme");
  g_assert_true (g_strv_equal ((const char *const *) pback->domains, domains));
  g_assert_cmpint (pback->created_at, ==, T0);
}

static void
test_event (void)
{
  g_autoptr(JsonObject) detail = json_object_new ();
  g_autoptr(BoxEvent) event = NULL;
  g_autoptr(BoxEvent) copy = NULL;
  g_autoptr(BoxEvent) bare = box_event_new ("sandbox.created", "acme", "sb-abcdefgh2345", NULL);
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(JsonNode) bare_node = box_event_to_api_json (bare);
  const char *fields[] = { "type", "sandbox", "at", "detail", NULL };
  const char *bare_fields[] = { "type", "sandbox", "at", NULL };
  JsonObject *obj;
  gint64 at = 0;

  json_object_set_string_member (detail, "reason", "idle");
  event = box_event_new ("sandbox.paused", "acme", "sb-abcdefgh2345", detail);
  /* the event holds its own copy */
  json_object_set_string_member (detail, "reason", "changed");
  copy = box_event_copy (event);
  node = box_event_to_api_json (copy);
  obj = json_node_get_object (node);
  assert_member_names (obj, fields);
  g_assert_cmpstr (json_object_get_string_member (obj, "type"), ==, "sandbox.paused");
  g_assert_cmpstr (json_object_get_string_member (obj, "sandbox"), ==, "sb-abcdefgh2345");
  g_assert_true (box_time_parse (json_object_get_string_member (obj, "at"), &at));
  g_assert_cmpint (ABS (at - event->at), <, 2 * G_USEC_PER_SEC);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (obj, "detail"),
                                                  "reason"), ==, "idle");
  assert_member_names (json_node_get_object (bare_node), bare_fields);
}

static void
test_free_null_safe (void)
{
  box_project_free (NULL);
  box_key_free (NULL);
  box_principal_free (NULL);
  box_rule_free (NULL);
  box_sandbox_free (NULL);
  box_checkpoint_free (NULL);
  box_secret_free (NULL);
  box_template_free (NULL);
  box_event_free (NULL);
  box_sandbox_create_free (NULL);
  box_sandbox_update_free (NULL);
  box_secret_put_free (NULL);
  g_assert_null (box_project_copy (NULL));
  g_assert_null (box_key_copy (NULL));
  g_assert_null (box_rule_copy (NULL));
  g_assert_null (box_checkpoint_copy (NULL));
  g_assert_null (box_secret_copy (NULL));
  g_assert_null (box_template_copy (NULL));
  g_assert_null (box_event_copy (NULL));
}

static void
test_principal_free (void)
{
  BoxPrincipal *principal = g_new0 (BoxPrincipal, 1);
  BoxKey key = { (char *) "key-abcdefgh2345", (char *) "ci", (char *) "acme", (char *) "00", 0 };

  principal->kind = BOX_PRINCIPAL_KEY;
  principal->project = g_strdup ("acme");
  principal->key = box_key_copy (&key);
  g_assert_cmpstr (principal->key->id, ==, key.id);
  g_assert_true (principal->key->id != key.id);
  /* frees the key too (ASan reports a leak otherwise) */
  box_principal_free (principal);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/records/enums", test_enums);
  g_test_add_func ("/records/time", test_time);
  g_test_add_func ("/records/sandbox/new-defaults", test_sandbox_new_defaults);
  g_test_add_func ("/records/sandbox/copy-deep", test_sandbox_copy_deep);
  g_test_add_func ("/records/sandbox/api-json", test_sandbox_api_json);
  g_test_add_func ("/records/sandbox/api-json-minimal", test_sandbox_api_json_minimal);
  g_test_add_func ("/records/sandbox/storage-round-trip", test_sandbox_storage_round_trip);
  g_test_add_func ("/records/sandbox/storage-corrupt", test_storage_corrupt);
  g_test_add_func ("/records/rule/api-json", test_rule_api_json);
  g_test_add_func ("/records/secret/json", test_secret_json);
  g_test_add_func ("/records/secret/inject-null", test_secret_inject_null);
  g_test_add_func ("/records/checkpoint/json", test_checkpoint_json);
  g_test_add_func ("/records/project-key-template", test_project_key_template);
  g_test_add_func ("/records/event", test_event);
  g_test_add_func ("/records/free-null-safe", test_free_null_safe);
  g_test_add_func ("/records/principal-free", test_principal_free);
  return g_test_run ();
}
