/* json-writer-test.c: box-json-writer.c and box-http-sandbox-json.c write
 * byte for byte what json-glib's generator writes for the same tree, the
 * reference being box_sandbox_to_api_json () (records-test checks its
 * content).  Strings carry every ASCII byte, UTF-8 and the escapes. */
#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "box-http-sandbox-json.h"
#include "box-json-writer.h"
#include "box-records.h"

static char *
glib_text (JsonNode *node)
{
  return json_to_string (node, FALSE);
}

/* Every byte 0x01..0x7f, then UTF-8 (2, 3 and 4 bytes). */
static char *
nasty_string (void)
{
  GString *s = g_string_new (NULL);

  for (int c = 1; c < 0x80; c++)
    g_string_append_c (s, (char) c);
  g_string_append (s, "é€😀\"\\/");
  return g_string_free (s, FALSE);
}

static void
test_scalars (void)
{
  g_autofree char *nasty = nasty_string ();
  g_autoptr(JsonObject) obj = json_object_new ();
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  JsonArray *array = json_array_new ();
  JsonObject *empty = json_object_new ();
  g_autofree char *expected = NULL;
  g_autoptr(GString) out = g_string_new (NULL);

  json_object_set_string_member (obj, nasty, nasty);
  json_object_set_int_member (obj, "min", G_MININT64);
  json_object_set_int_member (obj, "max", G_MAXINT64);
  json_object_set_int_member (obj, "zero", 0);
  json_object_set_boolean_member (obj, "t", TRUE);
  json_object_set_boolean_member (obj, "f", FALSE);
  json_object_set_null_member (obj, "n");
  json_object_set_string_member (obj, "nullstr", NULL);
  json_object_set_string_member (obj, "empty", "");
  json_array_add_string_element (array, "a");
  json_array_add_int_element (array, -7);
  json_array_add_object_element (array, empty);
  json_array_add_array_element (array, json_array_new ());
  json_array_add_null_element (array);
  json_object_set_array_member (obj, "array", array);
  json_node_set_object (node, obj);
  expected = glib_text (node);

  box_json_begin_object (out);
  box_json_member_string (out, nasty, nasty);
  box_json_member_int (out, "min", G_MININT64);
  box_json_member_int (out, "max", G_MAXINT64);
  box_json_member_int (out, "zero", 0);
  box_json_member_bool (out, "t", TRUE);
  box_json_member_bool (out, "f", FALSE);
  box_json_key (out, "n");
  box_json_null (out);
  box_json_member_string (out, "nullstr", NULL);
  box_json_member_string (out, "empty", "");
  box_json_key (out, "array");
  box_json_begin_array (out);
  box_json_string (out, "a");
  box_json_int (out, -7);
  box_json_begin_object (out);
  box_json_end_object (out);
  box_json_begin_array (out);
  box_json_end_array (out);
  box_json_null (out);
  box_json_end_array (out);
  box_json_end_object (out);
  g_assert_cmpstr (out->str, ==, expected);
}

/* A deep copy of @rule into @egress. */
static void
add_rule (GPtrArray *egress, BoxRule rule)
{
  g_ptr_array_add (egress, box_rule_copy (&rule));
}

static void
assert_same (const BoxSandbox *sb, const char *sandbox_domain, const char *const *domains)
{
  g_autoptr(JsonNode) node = box_sandbox_to_api_json (sb, sandbox_domain, domains);
  g_autofree char *expected = glib_text (node);
  g_autoptr(GString) out = g_string_new (NULL);

  box_http_sandbox_json_write (out, sb, sandbox_domain, domains);
  g_assert_cmpstr (out->str, ==, expected);
}

static void
test_sandbox_minimal (void)
{
  g_autoptr(BoxSandbox) sb = box_sandbox_new ();

  assert_same (sb, NULL, NULL);
  sb->name = g_strdup ("web");
  sb->project = g_strdup ("p");
  assert_same (sb, "", NULL);
  assert_same (sb, "box.example.net", NULL);
}

static void
test_sandbox_full (void)
{
  g_autoptr(BoxSandbox) sb = box_sandbox_new ();
  g_autofree char *nasty = nasty_string ();
  guint16 ports[] = { 22, 8443, 65535 };
  const char *secrets[] = { "GITHUB_TOKEN", "OPENAI_KEY", NULL };
  const char *domains[] = { "apps.acme.dev", "acme.io", NULL };

  sb->id = g_strdup ("sb-abcdefgh2345");
  sb->name = g_strdup ("calm-otter-0042");
  sb->project = g_strdup ("acme");
  g_free (sb->template_name);
  sb->template_name = g_strdup ("base");
  sb->resources = (BoxResources) { 4, 4096, 40 };
  g_hash_table_insert (sb->env, g_strdup ("ZED"), g_strdup ("last"));
  g_hash_table_insert (sb->env, g_strdup ("ALPHA"), g_strdup (nasty));
  g_hash_table_insert (sb->env, g_strdup (nasty), g_strdup ("key"));
  g_hash_table_insert (sb->labels, g_strdup ("team"), g_strdup ("infra"));
  sb->idle_timeout_s = 600;
  sb->idle_action = BOX_IDLE_ACTION_STOP;
  sb->protected_ = TRUE;
  sb->http_port = 3000;
  add_rule (sb->egress, (BoxRule) { .domain = "api.example.com", .allow = TRUE });
  add_rule (sb->egress, (BoxRule) { .domain = "*.example.org", .allow = TRUE, .ports = ports,
                                    .n_ports = G_N_ELEMENTS (ports) });
  add_rule (sb->egress, (BoxRule) { .domain = "evil.example.com" });
  add_rule (sb->egress, (BoxRule) { .include = "defaults" });
  add_rule (sb->egress, (BoxRule) { .allow = TRUE });
  g_strfreev (sb->secrets);
  sb->secrets = g_strdupv ((char **) secrets);
  sb->created_at = G_GINT64_CONSTANT (1795395535) * G_USEC_PER_SEC;
  sb->updated_at = sb->created_at + 1;
  sb->last_active_at = -1;
  for (int state = BOX_SANDBOX_STATE_CREATING; state <= BOX_SANDBOX_STATE_ERROR; state++) {
    sb->state = state;
    assert_same (sb, "box.example.net", domains);
  }
  sb->has_deadline = TRUE;
  sb->deadline_at = sb->created_at + (gint64) 3600 * G_USEC_PER_SEC;
  for (int action = BOX_DEADLINE_ACTION_DELETE; action <= BOX_DEADLINE_ACTION_STOP; action++) {
    sb->deadline_action = action;
    assert_same (sb, "box.example.net", domains);
  }
  sb->idle_action = BOX_IDLE_ACTION_PAUSE;
  sb->protected_ = FALSE;
  assert_same (sb, NULL, domains);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/json-writer/scalars", test_scalars);
  g_test_add_func ("/json-writer/sandbox/minimal", test_sandbox_minimal);
  g_test_add_func ("/json-writer/sandbox/full", test_sandbox_full);
  return g_test_run ();
}
