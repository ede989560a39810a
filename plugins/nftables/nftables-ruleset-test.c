/* nftables-ruleset-test.c: variants of the ruleset text
 * (box-nftables-ruleset.c; the whole of it has nftables-test.c): for
 * sandboxes that use secrets, whose TCP 443 goes to the proxy and nothing
 * else of theirs changes (installed for real in nftables-netns-broker.c),
 * and without the log rule, for a kernel without nfnetlink_log. */
#include "config.h"

#include <string.h>

#include "box-nftables-ruleset.h"

static void
test_install (void)
{
  g_autoptr(GArray) members = g_array_new (FALSE, TRUE, sizeof (BoxNftablesMember));
  BoxNftablesMember open = { "bxaaaaaaaaaaaa", "10.222.0.2", FALSE, TRUE };
  BoxNftablesMember restricted = { "bxbbbbbbbbbbbb", "10.222.0.6", TRUE, TRUE };
  BoxNftablesMember plain = { "bxcccccccccccc", "10.222.0.10", FALSE, FALSE };
  BoxNftablesRuleset ruleset = {
    .table = "box", .pool = "10.222.0.0/16", .ifname_prefix = "bx", .dns_port = 10053,
    .proxy_http_port = 10080, .proxy_tls_port = 10443, .log_group = 5740,
    .members = members,
  };
  g_autofree char *text = NULL;

  g_array_append_val (members, open);
  g_array_append_val (members, restricted);
  g_array_append_val (members, plain);
  text = box_nftables_ruleset_install (&ruleset);

  g_assert_nonnull (strstr (text, "  set brokered { type ifname; }\n"));
  /* 443 only (not 80), to the TLS port; after the restricted redirects */
  g_assert_nonnull (strstr (text, "    iifname @restricted tcp dport 443 redirect to :10443\n"
                                  "    iifname @brokered tcp dport 443 redirect to :10443\n"
                                  "  }\n"));
  g_assert_null (strstr (text, "@brokered tcp dport 80"));
  /* the redirected connections reach the proxy's TLS port, nothing else */
  g_assert_nonnull (strstr (text, "    iifname @brokered tcp dport 10443 ct status dnat accept\n"
                                  "    ct state established,related accept\n"
                                  "    drop\n"));
  /* the forward chain does not change: a brokered sandbox is not restricted */
  g_assert_null (strstr (text, "@brokered jump"));
  g_assert_nonnull (strstr (text, "add element inet box brokered { \"bxaaaaaaaaaaaa\" }\n"));
  g_assert_nonnull (strstr (text, "add element inet box brokered { \"bxbbbbbbbbbbbb\" }\n"));
  g_assert_null (strstr (text, "brokered { \"bxcccccccccccc\" }"));
  g_assert_null (strstr (text, "restricted { \"bxaaaaaaaaaaaa\" }"));
}

static void
test_membership (void)
{
  g_autofree char *on = box_nftables_ruleset_set_brokered ("box", "bxcc", TRUE);
  g_autofree char *off = box_nftables_ruleset_set_brokered ("box", "bxcc", FALSE);
  g_autofree char *remove = box_nftables_ruleset_remove_member ("box", "bxcc", "10.222.0.10");

  g_assert_cmpstr (on, ==, "add element inet box brokered { \"bxcc\" }\n");
  /* idempotent: add first, so that the delete cannot fail */
  g_assert_cmpstr (off, ==, "add element inet box brokered { \"bxcc\" }\n"
                            "delete element inet box brokered { \"bxcc\" }\n");
  /* a detached tap leaves the set too (its name goes to the next sandbox) */
  g_assert_true (g_str_has_suffix (remove, off));
}

/* Only the log rule goes: the refusal itself stays. */
static void
test_no_log (void)
{
  BoxNftablesRuleset ruleset = {
    .table = "box", .pool = "10.222.0.0/16", .ifname_prefix = "bx", .dns_port = 10053,
    .proxy_http_port = 10080, .proxy_tls_port = 10443, .log_group = 5740,
  };
  g_autofree char *with_log = box_nftables_ruleset_install (&ruleset);
  g_autofree char *without = NULL;
  const char *rule = "    update @refused_log { ip saddr limit rate 5/second burst 10 packets } "
                     "log group 5740 snaplen 80\n";
  char *at = strstr (with_log, rule);

  ruleset.no_log = TRUE;
  without = box_nftables_ruleset_install (&ruleset);
  g_assert_nonnull (at);
  memmove (at, at + strlen (rule), strlen (at + strlen (rule)) + 1);
  g_assert_cmpstr (without, ==, with_log);
  g_assert_nonnull (strstr (without, "    meta l4proto tcp reject with tcp reset\n    drop\n"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/nftables/brokered/install", test_install);
  g_test_add_func ("/nftables/brokered/membership", test_membership);
  g_test_add_func ("/nftables/ruleset/no-log", test_no_log);
  return g_test_run ();
}
