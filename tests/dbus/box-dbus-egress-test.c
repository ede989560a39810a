/* box-dbus-egress-test.c: GetSandboxEgress and ListSandboxAllowed of
 * org.box.Admin1 on a private bus (dbus-fixture.h): a sandbox's rules with
 * {include: defaults} expanded and each marked with where it came from,
 * found by PROJECT/NAME, ID or a NAME one project uses; the addresses of
 * an unrestricted sandbox and of a stopped one (none, without asking a
 * plugin) and of a running restricted one on an engine without a network
 * plugin (Unsupported); bad and unknown sandboxes refused.
 *
 * The rules are written to the sandbox's record through the engine's
 * storage, as the API stores them: this engine (no network plugin) refuses
 * non-empty rules at the API until the egress engine enforces them.  The
 * listing itself against a real nftables set is in
 * plugins/nftables/nftables-netns-list.c.
 */
#include "config.h"

#include "box-requests.h"
#include "box-storage-records.h"
#include "dbus-fixture.h"

static GVariant *
call_egress (const char *sandbox, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  GVariant *rules = NULL;

  box_dbus_admin1_call_get_sandbox_egress (proxy, sandbox, NULL, got_result_cb, &result);
  box_dbus_admin1_call_get_sandbox_egress_finish (proxy, &rules, await_result (&result), error);
  return rules;
}

static GVariant *
call_allowed (const char *sandbox, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  GVariant *allowed = NULL;

  box_dbus_admin1_call_list_sandbox_allowed (proxy, sandbox, NULL, got_result_cb, &result);
  box_dbus_admin1_call_list_sandbox_allowed_finish (proxy, &allowed, await_result (&result),
                                                    error);
  return allowed;
}

static BoxRule *
rule_new (const char *domain, gboolean allow, const guint16 *ports, guint n_ports)
{
  BoxRule *rule = g_new0 (BoxRule, 1);

  if (domain == NULL) {
    rule->include = g_strdup ("defaults");
    return rule;
  }
  rule->domain = g_strdup (domain);
  rule->allow = allow;
  rule->n_ports = n_ports;
  rule->ports = g_memdup2 (ports, sizeof (guint16) * MAX (n_ports, 1));
  return rule;
}

static void
assert_rule (GVariant *rule, const char *domain, const char *action, const guint16 *ports,
             gsize n_ports, const char *source, guint32 index)
{
  g_autoptr(GVariant) got_ports = g_variant_lookup_value (rule, "ports", G_VARIANT_TYPE ("aq"));
  const guint16 *values;
  guint32 got_index = 0;
  gsize n = 0;

  g_assert_cmpstr (lookup_str (rule, "domain"), ==, domain);
  g_assert_cmpstr (lookup_str (rule, "action"), ==, action);
  g_assert_cmpstr (lookup_str (rule, "source"), ==, source);
  g_assert_true (g_variant_lookup (rule, "index", "u", &got_index));
  g_assert_cmpuint (got_index, ==, index);
  g_assert_nonnull (got_ports);
  values = g_variant_get_fixed_array (got_ports, &n, sizeof (guint16));
  g_assert_cmpmem (values, n * sizeof (guint16), ports, n_ports * sizeof (guint16));
}

static void
test_egress (void)
{
  static const guint16 web[] = { 80, 443 };
  static const guint16 own[] = { 443, 22 };
  const char *const none[] = { NULL };
  GPtrArray *defaults = box_engine_get_network_defaults (engine);
  g_autoptr(GVariant) p1 = NULL;
  g_autoptr(GVariant) p2 = NULL;
  g_autoptr(GVariant) open_rules = NULL;
  g_autoptr(GVariant) open_allowed = NULL;
  g_autoptr(GVariant) rules = NULL;
  g_autoptr(GVariant) by_id = NULL;
  g_autoptr(GVariant) first = NULL;
  g_autoptr(GVariant) a_default = NULL;
  g_autoptr(GVariant) last = NULL;
  g_autoptr(GVariant) stopped = NULL;
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(GError) error = NULL;
  const char *const bad[] = { "web", "eg/nosuch", "/web", "eg/", "" };
  const char *const bad_names[] = {
    "org.box.Error.Invalid", "org.box.Error.NotFound", "org.box.Error.Invalid",
    "org.box.Error.Invalid", "org.box.Error.Invalid",
  };

  p1 = call_create_project ("eg", none, &error);
  g_assert_no_error (error);
  p2 = call_create_project ("eg-two", none, &error);
  g_assert_no_error (error);
  create_sandbox ("eg", "{\"name\": \"web\"}");
  create_sandbox ("eg-two", "{\"name\": \"web\"}");

  /* no rules: unrestricted, nothing to list (no plugin is asked) */
  open_rules = call_egress ("eg/web", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (open_rules), ==, 0);
  open_allowed = call_allowed ("eg/web", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (open_allowed), ==, 0);

  /* rules as the API stores them: an allow, the include, a deny */
  sandbox = box_engine_get_sandbox (engine, "eg", "web", &error);
  g_assert_no_error (error);
  g_ptr_array_add (sandbox->egress, rule_new ("api.example.com", TRUE, own, 2));
  g_ptr_array_add (sandbox->egress, rule_new (NULL, FALSE, NULL, 0));
  g_ptr_array_add (sandbox->egress, rule_new ("evil.example", FALSE, NULL, 0));
  g_assert_true (box_storage_sandbox_update (box_engine_get_storage (engine), sandbox, &error));
  g_assert_no_error (error);

  rules = call_egress ("eg/web", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (rules), ==, 2 + defaults->len);
  first = g_variant_get_child_value (rules, 0);
  assert_rule (first, "api.example.com", "allow", own, 2, "rule", 1);
  for (guint i = 0; i < defaults->len; i++) {
    const BoxRule *d = g_ptr_array_index (defaults, i);

    g_clear_pointer (&a_default, g_variant_unref);
    a_default = g_variant_get_child_value (rules, 1 + i);
    assert_rule (a_default, d->domain, "allow", web, 2, "defaults", 2);
  }
  last = g_variant_get_child_value (rules, 1 + defaults->len);
  assert_rule (last, "evil.example", "deny", NULL, 0, "rule", 3);

  /* by ID: the same */
  by_id = call_egress (sandbox->id, &error);
  g_assert_no_error (error);
  g_assert_true (g_variant_equal (by_id, rules));

  /* restricted, and this engine has no network plugin to list addresses */
  g_assert_null (call_allowed ("eg/web", &error));
  assert_remote_error (error, "org.box.Error.Unsupported");
  g_clear_error (&error);

  /* not running: nothing allowed, nothing asked */
  sandbox->state = BOX_SANDBOX_STATE_STOPPED;
  g_assert_true (box_storage_sandbox_update (box_engine_get_storage (engine), sandbox, &error));
  g_assert_no_error (error);
  stopped = call_allowed ("eg/web", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (stopped), ==, 0);

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_assert_null (call_egress (bad[i], &error));
    assert_remote_error (error, bad_names[i]);
    g_clear_error (&error);
    g_assert_null (call_allowed (bad[i], &error));
    assert_remote_error (error, bad_names[i]);
    g_clear_error (&error);
  }
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  fixture_setup ();
  g_test_add_func ("/dbus/egress", test_egress);
  status = g_test_run ();
  fixture_teardown ();
  return status;
}
