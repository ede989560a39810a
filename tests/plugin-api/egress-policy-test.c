/* egress-policy-test.c: box_egress_policy_*() on a table of cases.
 *
 * Each case is a rule list in a short notation, a name, a port and the
 * verdict the spec's "Network" section gives.  Notation, rules separated
 * by spaces:  +a.com (allow, default ports 80 and 443), +a.com:22,8080
 * (allow on those ports), -a.com (deny, every port), @ (include defaults).
 * The test defaults are two rules: +pypi.org and +*.github.com:443,22.
 * tests/fuzz/fuzz-egress-policy.c compares the compiled policy with a slow
 * reference on random rule sets.
 */
#include "config.h"

#include <string.h>

#include "box-egress-policy.h"
#include "box-error.h"
#include "box-records.h"
#include "box-requests.h"

static BoxRule *
rule_parse (const char *word)
{
  BoxRule *rule = g_new0 (BoxRule, 1);
  g_auto(GStrv) parts = NULL;

  if (strcmp (word, "@") == 0) {
    rule->include = g_strdup ("defaults");
    return rule;
  }
  g_assert_true (word[0] == '+' || word[0] == '-');
  rule->allow = word[0] == '+';
  parts = g_strsplit (word + 1, ":", 2);
  rule->domain = g_strdup (parts[0] != NULL ? parts[0] : "");
  if (parts[0] != NULL && parts[1] != NULL) {
    g_auto(GStrv) ports = g_strsplit (parts[1], ",", -1);
    guint i;

    rule->n_ports = g_strv_length (ports);
    rule->ports = g_new0 (guint16, rule->n_ports);
    for (i = 0; i < rule->n_ports; i++)
      rule->ports[i] = (guint16) g_ascii_strtoull (ports[i], NULL, 10);
  }
  return rule;
}

static GPtrArray *
rules_parse (const char *text)
{
  GPtrArray *rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_auto(GStrv) words = g_strsplit (text, " ", -1);
  guint i;

  for (i = 0; words[i] != NULL; i++) {
    if (words[i][0] != '\0')
      g_ptr_array_add (rules, rule_parse (words[i]));
  }
  return rules;
}

static BoxEgressPolicy *
policy_parse (const char *text, GError **error)
{
  g_autoptr(GPtrArray) rules = rules_parse (text);
  g_autoptr(GPtrArray) defaults = rules_parse ("+pypi.org +*.github.com:443,22");

  return box_egress_policy_new (rules, defaults, error);
}

typedef struct {
  const char *rules;
  const char *name;
  guint16     port;
  gboolean    allowed;
  const char *why;
} Case;

#define A TRUE
#define D FALSE

static const Case cases[] = {
  /* no match is a deny; an allow opens 80 and 443 unless it names ports */
  { "+a.com", "a.com", 443, A, "exact allow, default port 443" },
  { "+a.com", "a.com", 80, A, "exact allow, default port 80" },
  { "+a.com", "a.com", 22, D, "exact allow, port not covered" },
  { "+a.com", "b.com", 443, D, "no match" },
  { "+a.com", "x.a.com", 443, D, "an exact name does not cover names under it" },
  { "+a.com:22", "a.com", 22, A, "explicit port" },
  { "+a.com:22", "a.com", 443, D, "explicit ports replace the default" },
  { "+a.com:22 +a.com:8080", "a.com", 8080, A, "ports of two allows add up" },
  /* *.suffix: every name under it, not the name itself */
  { "+*.a.com", "x.a.com", 443, A, "suffix" },
  { "+*.a.com", "y.x.a.com", 443, A, "suffix, deeper" },
  { "+*.a.com", "a.com", 443, D, "*.a.com is not a.com" },
  { "+*.a.com", "xa.com", 443, D, "a suffix matches whole labels" },
  { "+*.com", "a.com", 443, A, "top-level suffix" },
  /* precedence: exact > longest suffix > *, whatever the order */
  { "+a.com -*.com", "a.com", 443, A, "exact allow beats a suffix deny" },
  { "-*.com +a.com", "a.com", 443, A, "exact allow beats a suffix deny, other order" },
  { "-a.com +*.com", "a.com", 443, D, "exact deny beats a suffix allow" },
  { "+*.com -a.com", "a.com", 443, D, "exact deny beats a suffix allow, other order" },
  { "-*.com +*.a.com", "x.a.com", 443, A, "longer suffix allow beats a shorter deny" },
  { "+*.a.com -*.com", "x.a.com", 443, A, "longer suffix allow beats a shorter deny, other order" },
  { "+*.com -*.a.com", "x.a.com", 443, D, "longer suffix deny beats a shorter allow" },
  { "-*.a.com +*.com", "x.a.com", 443, D, "longer suffix deny beats a shorter allow, other order" },
  { "+*.com -*.a.com", "x.b.com", 443, A, "the shorter suffix where the longer does not match" },
  { "+* -*.a.com", "x.a.com", 443, D, "suffix deny beats *" },
  { "-* +*.a.com", "x.a.com", 443, A, "suffix allow beats * deny" },
  { "-* +a.com", "a.com", 443, A, "exact allow beats * deny" },
  { "+* -a.com", "a.com", 443, D, "exact deny beats *" },
  { "+*.b.a.com -*.a.com +*.com", "x.b.a.com", 443, A, "nested suffixes: the longest decides" },
  { "+*.b.a.com -*.a.com +*.com", "x.c.a.com", 443, D, "nested suffixes: the middle one decides" },
  { "+*.b.a.com -*.a.com +*.com", "x.d.com", 443, A, "nested suffixes: the shortest decides" },
  { "+*.b.a.com -*.a.com +*.com", "b.a.com", 443, D, "b.a.com is under *.a.com, not *.b.a.com" },
  /* "*" alone */
  { "+*", "anything.example", 443, A, "* allows every name on 80 and 443" },
  { "+*", "anything.example", 22, D, "* with default ports" },
  { "+*:22", "anything.example", 22, A, "* on a port" },
  { "-*", "a.com", 443, D, "* deny" },
  { "+*", "localhost", 80, A, "* matches a one-label name" },
  /* an allow and a deny on the same domain are a deny, on every port */
  { "+a.com -a.com", "a.com", 443, D, "allow and deny on one name" },
  { "-a.com +a.com:22", "a.com", 22, D, "allow and deny on one name, the allow's own port" },
  { "+*.a.com -*.a.com +*.com", "x.a.com", 443, D, "allow and deny on one suffix beat a shorter allow" },
  { "+* -*", "a.com", 80, D, "allow and deny on *" },
  /* ports: a rule that does not cover the port is passed over */
  { "+a.com:22 +*.com", "a.com", 443, A, "exact allow on 22 does not cover 443: the suffix decides" },
  { "+a.com:22 -*.com", "a.com", 443, D, "exact allow on 22 does not cover 443: the suffix deny decides" },
  { "+a.com:22 -*.com", "a.com", 22, A, "exact allow on 22 covers 22" },
  { "-a.com +*.com:22", "a.com", 22, D, "a deny covers every port" },
  { "-a.com", "a.com", 65535, D, "a deny covers every port, 65535" },
  { "+*.com:8080 +*:443", "a.com", 443, A, "a suffix without the port passes to *" },
  { "+a.com", "a.com", 0, D, "port 0 is never allowed" },
  /* names: case, one trailing dot, malformed names and addresses */
  { "+a.com", "A.CoM", 443, A, "case-insensitive" },
  { "+*.a.com", "X.A.COM.", 443, A, "case and trailing dot" },
  { "+a.com", "a.com.", 443, A, "one trailing dot" },
  { "+a.com", "a.com..", 443, D, "two trailing dots" },
  { "+*", ".a.com", 443, D, "a leading dot" },
  { "+*", "a..com", 443, D, "an empty label" },
  { "+*", "", 443, D, "an empty name" },
  { "+*", ".", 443, D, "the root" },
  { "+*", "a com", 443, D, "a space" },
  { "+*", "a.com:443", 443, D, "a port in the name" },
  { "+*", "a/b.com", 443, D, "a slash" },
  { "+*", "1.2.3.4", 443, D, "an IPv4 address is not a name" },
  { "+*", "127.1", 443, D, "a short IPv4 form" },
  { "+*", "2130706433", 443, D, "an IPv4 address as one number" },
  { "+*", "0x7f000001", 443, D, "an IPv4 address in hex" },
  { "+*", "::1", 443, D, "an IPv6 address" },
  { "+*", "[::1]", 443, D, "an IPv6 literal" },
  { "+*", "a.b.123", 443, D, "a numeric last label" },
  { "+*", "123.example", 443, A, "a numeric first label is a name" },
  { "+*", "_dmarc.a.com", 443, A, "an underscore" },
  { "+*", "b\xc3\xbc" "cher.example", 443, D, "an IDN in Unicode: rules take its A-label" },
  { "+xn--bcher-kva.example", "XN--BCHER-KVA.example", 443, A, "an IDN's A-label, any case" },
  { "+*", "a\xff.com", 443, D, "a byte that is not ASCII" },
  { "+*",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com", 443, D,
    "a label of 64" },
  { "+*",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com", 443, A,
    "a label of 63" },
  /* include: defaults */
  { "@", "pypi.org", 443, A, "a default" },
  { "@", "pypi.org", 22, D, "a default, other port" },
  { "@", "api.github.com", 22, A, "a default suffix with its ports" },
  { "@", "github.com", 443, D, "*.github.com is not github.com" },
  { "@", "example.com", 443, D, "not in the defaults" },
  { "@ -pypi.org", "pypi.org", 443, D, "a deny over a default" },
  { "-*.github.com @", "api.github.com", 443, D, "a default and a deny on one domain" },
  { "@ +*", "example.com", 443, A, "defaults and *" },
  { "@ -*", "pypi.org", 443, A, "a default beats a * deny" },
};

static void
test_table (void)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    const Case *c = &cases[i];
    g_autoptr(GError) error = NULL;
    g_autoptr(BoxEgressPolicy) policy = policy_parse (c->rules, &error);

    g_assert_no_error (error);
    if (box_egress_policy_allows (policy, c->name, c->port) != c->allowed)
      g_error ("case %u (%s): [%s] %s:%u should be %s", i, c->why, c->rules, c->name, c->port,
               c->allowed ? "allowed" : "denied");
    g_assert_true (box_egress_policy_is_restricted (policy));
  }
}

typedef struct {
  const char *rules;
  const char *name;
  gboolean    resolves;
} ResolveCase;

static const ResolveCase resolve_cases[] = {
  { "+a.com", "a.com", TRUE },
  { "+a.com:22", "a.com", TRUE },
  { "+a.com", "b.com", FALSE },
  { "-a.com +*.com", "a.com", FALSE },
  { "-a.com +*.com", "b.com", TRUE },
  { "+a.com:22 -*.com", "a.com", TRUE },   /* allowed on 22 */
  { "+a.com +a.com:22 -a.com", "a.com", FALSE },
  { "-*.a.com +*.com", "x.a.com", FALSE },
  { "-*.a.com +*.com", "a.com", TRUE },
  { "-* +*.com:5432", "x.com", TRUE },
  { "-*", "x.com", FALSE },
  { "@", "pypi.org.", TRUE },
  { "@", "PYPI.ORG", TRUE },
  { "@", "x.pypi.org", FALSE },
  { "+*", "1.2.3.4", FALSE },
  { "+*", "a..b", FALSE },
};

static void
test_resolves (void)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (resolve_cases); i++) {
    const ResolveCase *c = &resolve_cases[i];
    g_autoptr(BoxEgressPolicy) policy = policy_parse (c->rules, NULL);

    g_assert_nonnull (policy);
    if (box_egress_policy_resolves (policy, c->name) != c->resolves)
      g_error ("resolve case %u: [%s] %s should %sresolve", i, c->rules, c->name,
               c->resolves ? "" : "not ");
  }
}

typedef struct {
  const char *rules;
  const char *name;
  const char *ports;   /* space-separated, ascending */
} PortsCase;

static const PortsCase ports_cases[] = {
  { "+a.com", "a.com", "80 443" },
  { "+a.com:22,5432 +a.com", "a.com", "22 80 443 5432" },
  { "+*.a.com:22 +x.a.com:8080", "x.a.com", "22 8080" },   /* a rule lacking 22 passes it on */
  { "+*.a.com:22 -x.a.com", "x.a.com", "" },                /* a deny covers every port */
  { "+*.a.com:22 +x.a.com:8080", "y.a.com", "22" },
  { "+*:9000 +*.com:22", "b.com", "22 9000" },         /* an allow lacking a port passes */
  { "-a.com +*:22", "a.com", "" },
  { "+a.com:22 -*.com", "a.com", "22" },
  { "+a.com", "b.com", "" },
  { "+*", "1.2.3.4", "" },
};

static void
test_ports (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (ports_cases); i++) {
    const PortsCase *c = &ports_cases[i];
    g_autoptr(BoxEgressPolicy) policy = policy_parse (c->rules, NULL);
    g_autoptr(GArray) ports = NULL;
    g_autoptr(GString) got = g_string_new (NULL);

    g_assert_nonnull (policy);
    ports = box_egress_policy_get_ports (policy, c->name);
    for (guint j = 0; j < ports->len; j++)
      g_string_append_printf (got, "%s%u", j > 0 ? " " : "", g_array_index (ports, guint16, j));
    if (strcmp (got->str, c->ports) != 0)
      g_error ("ports case %u: [%s] %s: \"%s\", want \"%s\"", i, c->rules, c->name, got->str,
               c->ports);
  }
}

/* An empty list is the whole internet: unrestricted, every name on every
 * port (nothing checks names then); defaults that expand to nothing still
 * restrict (any rule at all). */
static void
test_unrestricted (void)
{
  g_autoptr(GPtrArray) empty = g_ptr_array_new ();
  g_autoptr(BoxEgressPolicy) none = box_egress_policy_new (NULL, NULL, NULL);
  g_autoptr(BoxEgressPolicy) policy = box_egress_policy_new (empty, NULL, NULL);
  g_autoptr(GPtrArray) include = rules_parse ("@");
  g_autoptr(BoxEgressPolicy) nothing = box_egress_policy_new (include, empty, NULL);

  g_assert_false (box_egress_policy_is_restricted (none));
  g_assert_false (box_egress_policy_is_restricted (policy));
  g_assert_true (box_egress_policy_allows (policy, "a.com", 22));
  g_assert_true (box_egress_policy_allows (policy, "a.com", 443));
  g_assert_true (box_egress_policy_resolves (policy, "a.com"));
  g_assert_cmpuint (box_egress_policy_get_n_rules (policy), ==, 0);
  g_assert_true (box_egress_policy_is_restricted (nothing));
  g_assert_false (box_egress_policy_allows (nothing, "a.com", 443));
  g_assert_false (box_egress_policy_resolves (nothing, "a.com"));
  {
    g_autoptr(GArray) ports = box_egress_policy_get_ports (policy, "a.com");
    g_assert_cmpuint (ports->len, ==, 0);
  }
}

static void
test_invalid (void)
{
  static const char *const bad[] = {
    "+A.com", "+a.com.", "+1.2.3.4", "+*.", "+*a.com", "+a.*.com", "+*.*.com", "+**",
    "+a..com", "+", "-a.com:80", "+a.com:0", "+a.b.123", "+a\xc3\xa9.com",
  };
  g_autoptr(GPtrArray) include = rules_parse ("@");
  g_autoptr(GError) error = NULL;
  guint i;

  for (i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) bad_error = NULL;
    g_autoptr(BoxEgressPolicy) policy = policy_parse (bad[i], &bad_error);

    if (policy != NULL)
      g_error ("rule %s was accepted", bad[i]);
    g_assert_error (bad_error, BOX_ERROR, BOX_ERROR_INVALID);
    g_assert_true (g_utf8_validate (bad_error->message, -1, NULL));
  }
  /* an include needs the defaults */
  g_assert_null (box_egress_policy_new (include, NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
}

static GPtrArray *
rules_many (guint n)
{
  GPtrArray *rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  guint i;

  for (i = 0; i < n; i++) {
    g_autofree char *word = g_strdup_printf ("+h%u.example", i);

    g_ptr_array_add (rules, rule_parse (word));
  }
  return rules;
}

/* At most 1000 rules counting defaults expanded, with the real defaults
 * (the list GET /v1/network/defaults serves, from the same loader). */
static void
test_limit (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) defaults = box_network_defaults_load (&error);
  g_autoptr(GPtrArray) r1000 = rules_many (1000);
  g_autoptr(GPtrArray) r1001 = rules_many (1001);
  g_autoptr(GPtrArray) with_defaults = NULL;
  g_autoptr(BoxEgressPolicy) policy = NULL;
  guint n;

  g_assert_no_error (error);
  n = defaults->len;
  g_assert_cmpuint (n, >, 10);
  policy = box_egress_policy_new (r1000, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (box_egress_policy_get_n_rules (policy), ==, 1000);
  g_assert_true (box_egress_policy_allows (policy, "h999.example", 443));
  g_assert_false (box_egress_policy_allows (policy, "h1000.example", 443));
  g_clear_pointer (&policy, box_egress_policy_unref);
  g_assert_null (box_egress_policy_new (r1001, NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "1001 counting defaults expanded"));
  g_clear_error (&error);

  with_defaults = rules_many (1000 - n);
  g_ptr_array_add (with_defaults, rule_parse ("@"));
  policy = box_egress_policy_new (with_defaults, defaults, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (box_egress_policy_get_n_rules (policy), ==, 1000);
  g_assert_true (box_egress_policy_allows (policy, "pypi.org", 443));
  g_assert_true (box_egress_policy_allows (policy, "registry.npmjs.org", 80));
  g_assert_false (box_egress_policy_allows (policy, "registry.npmjs.org", 22));
  g_clear_pointer (&policy, box_egress_policy_unref);
  g_ptr_array_add (with_defaults, rule_parse ("+one-more.example"));
  g_assert_null (box_egress_policy_new (with_defaults, defaults, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
}

/* Every default compiles and is allowed on 80 and 443 only. */
static void
test_defaults (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) defaults = box_network_defaults_load (&error);
  g_autoptr(GPtrArray) include = rules_parse ("@");
  g_autoptr(BoxEgressPolicy) policy = NULL;
  guint i;

  g_assert_no_error (error);
  policy = box_egress_policy_new (include, defaults, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (box_egress_policy_get_n_rules (policy), ==, defaults->len);
  for (i = 0; i < defaults->len; i++) {
    const BoxRule *rule = g_ptr_array_index (defaults, i);
    g_autofree char *name = g_str_has_prefix (rule->domain, "*.")
                              ? g_strconcat ("x", rule->domain + 1, NULL)
                              : g_strdup (rule->domain);

    g_assert_true (rule->allow);
    g_assert_true (box_egress_policy_allows (policy, name, 80));
    g_assert_true (box_egress_policy_allows (policy, name, 443));
    g_assert_false (box_egress_policy_allows (policy, name, 22));
    g_assert_true (box_egress_policy_resolves (policy, name));
  }
  g_assert_false (box_egress_policy_resolves (policy, "example.com"));
}

/* A shared policy from several threads, ref and unref as the resolver and
 * the proxy will. */
static gpointer
lookup_thread (gpointer data)
{
  g_autoptr(BoxEgressPolicy) policy = data;
  guint i;

  for (i = 0; i < 20000; i++) {
    g_assert_true (box_egress_policy_allows (policy, "x.a.com", 443));
    g_assert_false (box_egress_policy_allows (policy, "x.b.a.com", 443));
  }
  return NULL;
}

static void
test_threads (void)
{
  g_autoptr(BoxEgressPolicy) policy = policy_parse ("+*.a.com -*.b.a.com", NULL);
  GThread *threads[4];
  guint i;

  for (i = 0; i < G_N_ELEMENTS (threads); i++)
    threads[i] = g_thread_new ("lookup", lookup_thread, box_egress_policy_ref (policy));
  for (i = 0; i < G_N_ELEMENTS (threads); i++)
    g_thread_join (threads[i]);
  g_assert_true (G_TYPE_IS_BOXED (BOX_TYPE_EGRESS_POLICY));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/egress-policy/table", test_table);
  g_test_add_func ("/egress-policy/resolves", test_resolves);
  g_test_add_func ("/egress-policy/ports", test_ports);
  g_test_add_func ("/egress-policy/unrestricted", test_unrestricted);
  g_test_add_func ("/egress-policy/invalid", test_invalid);
  g_test_add_func ("/egress-policy/limit", test_limit);
  g_test_add_func ("/egress-policy/defaults", test_defaults);
  g_test_add_func ("/egress-policy/threads", test_threads);
  return g_test_run ();
}
