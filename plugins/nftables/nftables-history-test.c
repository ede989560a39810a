/* nftables-history-test.c: what restricted guests resolved, turned into
 * @resolved set elements (box-nftables-history.c).  Pure: the commands are
 * compared as text (nftables-netns-test.c runs them for real). */
#include "config.h"

#include <string.h>

#include "box-nftables-history.h"

#define GUEST 0x0ade0002u   /* 10.222.0.2 */
#define ADDR  0xcb007101u   /* 203.0.113.1 */
#define ADDR2 0xcb007102u   /* 203.0.113.2 */
#define S     G_USEC_PER_SEC
#define T0    (G_GINT64_CONSTANT (1000) * S)

static BoxRule *
rule_new (const char *domain, gboolean allow, guint16 port)
{
  BoxRule *rule = g_new0 (BoxRule, 1);

  rule->domain = g_strdup (domain);
  rule->allow = allow;
  if (port != 0) {
    rule->n_ports = 1;
    rule->ports = g_new (guint16, 1);
    rule->ports[0] = port;
  }
  return rule;
}

/* "a.test" on 22 and 80, "b.test" on 22 (or denied with @deny_b) */
static BoxEgressPolicy *
policy_new (gboolean deny_b)
{
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);

  g_ptr_array_add (rules, rule_new ("a.test", TRUE, 22));
  g_ptr_array_add (rules, rule_new ("a.test", TRUE, 80));
  g_ptr_array_add (rules, rule_new ("b.test", !deny_b, deny_b ? 0 : 22));
  return box_egress_policy_new (rules, NULL, NULL);
}

static gboolean
has (GString *out, const char *line)
{
  g_autofree char *needle = g_strconcat (line, "\n", NULL);

  return strstr (out->str, needle) != NULL;
}

static void
test_add (void)
{
  g_autoptr(BoxNftablesHistory) history = box_nftables_history_new ("box");
  g_autoptr(BoxEgressPolicy) policy = policy_new (FALSE);
  g_autoptr(GString) out = g_string_new (NULL);
  guint32 addrs[] = { ADDR, ADDR2 };

  /* ports other than 80/443 only; the TTL clamped to at least 2 s */
  box_nftables_history_add (history, GUEST, policy, "a.test", addrs, 2, 0, T0, out);
  g_assert_true (has (out, "add element inet box resolved { 10.222.0.2 . 203.0.113.1 . 22 timeout 2s }"));
  g_assert_true (has (out, "add element inet box resolved { 10.222.0.2 . 203.0.113.2 . 22 timeout 2s }"));
  g_assert_null (strstr (out->str, " . 80 "));
  g_assert_cmpuint (box_nftables_history_count (history, GUEST), ==, 2);
  g_assert_true (box_nftables_history_allows (history, GUEST, policy, ADDR, 22, T0 + S));
  g_assert_false (box_nftables_history_allows (history, GUEST, policy, ADDR, 23, T0 + S));
  g_assert_false (box_nftables_history_allows (history, GUEST, policy, ADDR, 22, T0 + 2 * S));
  g_assert_false (box_nftables_history_allows (history, GUEST + 4, policy, ADDR, 22, T0));

  /* a second name on the same address: the element lives as long as the
   * latest; at most a day */
  g_string_truncate (out, 0);
  box_nftables_history_add (history, GUEST, policy, "b.test", addrs, 1, G_MAXUINT32, T0, out);
  g_assert_true (has (out, "add element inet box resolved { 10.222.0.2 . 203.0.113.1 . 22 timeout 86400s }"));
  /* a name denied everywhere adds nothing, but is kept for later rules */
  g_string_truncate (out, 0);
  box_nftables_history_add (history, GUEST, policy, "c.test", addrs, 1, 60, T0, out);
  g_assert_null (strstr (out->str, "timeout 60s"));
  g_assert_cmpuint (box_nftables_history_count (history, GUEST), ==, 4);

  box_nftables_history_forget (history, GUEST);
  g_assert_cmpuint (box_nftables_history_count (history, GUEST), ==, 0);
}

static void
test_rebuild (void)
{
  g_autoptr(BoxNftablesHistory) history = box_nftables_history_new ("box");
  g_autoptr(BoxEgressPolicy) policy = policy_new (FALSE);
  g_autoptr(BoxEgressPolicy) deny_b = policy_new (TRUE);
  g_autoptr(BoxEgressPolicy) open = box_egress_policy_new (NULL, NULL, NULL);
  g_autoptr(GString) out = g_string_new (NULL);
  guint32 addr = ADDR, addr2 = ADDR2;

  box_nftables_history_add (history, GUEST, policy, "a.test", &addr, 1, 10, T0, out);
  box_nftables_history_add (history, GUEST, policy, "b.test", &addr2, 1, 30, T0, out);

  /* b.test denied: its address's element goes, a.test's is renewed with
   * what is left of its TTL */
  g_string_truncate (out, 0);
  box_nftables_history_rebuild (history, GUEST, policy, deny_b, T0 + 4 * S, out);
  g_assert_true (has (out, "delete element inet box resolved { 10.222.0.2 . 203.0.113.2 . 22 }"));
  g_assert_null (strstr (out->str, "203.0.113.2 . 22 timeout 26s"));
  g_assert_true (has (out, "add element inet box resolved { 10.222.0.2 . 203.0.113.1 . 22 timeout 6s }"));
  g_assert_false (box_nftables_history_allows (history, GUEST, deny_b, ADDR2, 22, T0 + 4 * S));

  /* unrestricted: every element goes; the history stays for later rules */
  g_string_truncate (out, 0);
  box_nftables_history_rebuild (history, GUEST, deny_b, open, T0 + 5 * S, out);
  g_assert_true (has (out, "delete element inet box resolved { 10.222.0.2 . 203.0.113.1 . 22 }"));
  g_assert_null (strstr (out->str, "timeout 5s"));
  g_string_truncate (out, 0);
  box_nftables_history_rebuild (history, GUEST, open, policy, T0 + 5 * S, out);
  g_assert_true (has (out, "add element inet box resolved { 10.222.0.2 . 203.0.113.2 . 22 timeout 25s }"));

  /* expired pairs stay at the rebuild (no element made for them): an
   * established connection to their address stays allowed while the
   * rules allow the name (asked with G_MININT64), not once they do not */
  g_string_truncate (out, 0);
  box_nftables_history_rebuild (history, GUEST, policy, policy, T0 + 20 * S, out);
  g_assert_cmpuint (box_nftables_history_count (history, GUEST), ==, 2);
  g_assert_null (strstr (out->str, "203.0.113.1 . 22 timeout"));
  g_assert_false (box_nftables_history_allows (history, GUEST, policy, ADDR, 22, T0 + 20 * S));
  g_assert_true (box_nftables_history_allows (history, GUEST, policy, ADDR, 22, G_MININT64));
  g_assert_false (box_nftables_history_allows (history, GUEST, deny_b, ADDR2, 22, G_MININT64));
}

static void
test_bounded (void)
{
  g_autoptr(BoxNftablesHistory) history = box_nftables_history_new ("box");
  g_autoptr(BoxEgressPolicy) policy = policy_new (FALSE);
  g_autoptr(GString) out = g_string_new (NULL);

  /* a guest resolving without end keeps at most the bound; the pair that
   * expires first goes, with its element */
  for (guint i = 0; i < BOX_NFTABLES_HISTORY_MAX; i++) {
    guint32 addr = 0xcb007100u + i;
    box_nftables_history_add (history, GUEST, policy, "a.test", &addr, 1, 100 + i, T0, out);
  }
  g_assert_cmpuint (box_nftables_history_count (history, GUEST), ==, BOX_NFTABLES_HISTORY_MAX);
  g_string_truncate (out, 0);
  {
    guint32 addr = 0x08080808u;
    box_nftables_history_add (history, GUEST, policy, "a.test", &addr, 1, 500, T0, out);
  }
  g_assert_cmpuint (box_nftables_history_count (history, GUEST), ==, BOX_NFTABLES_HISTORY_MAX);
  g_assert_true (has (out, "delete element inet box resolved { 10.222.0.2 . 203.0.113.0 . 22 }"));
  g_assert_true (has (out, "add element inet box resolved { 10.222.0.2 . 8.8.8.8 . 22 timeout 500s }"));
  g_assert_false (box_nftables_history_allows (history, GUEST, policy, 0xcb007100u, 22, T0));
  g_assert_true (box_nftables_history_allows (history, GUEST, policy, 0xcb007101u, 22, T0));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/nftables-history/add", test_add);
  g_test_add_func ("/nftables-history/rebuild", test_rebuild);
  g_test_add_func ("/nftables-history/bounded", test_bounded);
  return g_test_run ();
}
