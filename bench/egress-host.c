/* egress-host.c: the egress engine's node side alone, for bench/egress-bench.
 *
 * Wires the nftables plugin's registry, filtering resolver and
 * name-checking proxy together exactly as the plugin's start() does
 * (box-nftables-plugin.c: box_nftables_dns_new with the given upstream,
 * the registry as the resolver's egress, the resolver as the registry's
 * node-side resolver, the proxy with the built-in blocked networks), and
 * registers each GUEST address as a restricted sandbox whose rules allow
 * each ALLOW domain on 80 and 443 (the rule's default ports).  No kernel
 * rules: a client whose source address is a registered guest reaches the
 * resolver and the proxy directly (the same code the redirect reaches).
 *
 *   egress-host DNS_PORT HTTP_PORT TLS_PORT UPSTREAM GUEST[,GUEST...] ALLOW...
 *
 * Prints "ready" on stdout once listening, then runs until stdin closes;
 * on each line "stats GUEST" read from stdin it prints the proxy's counts
 * for that guest ("connections bytes_out bytes_in refused").  Not a test:
 * the program measured is the product's code, through its own API.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "box-nftables-dns.h"
#include "box-nftables-egress.h"
#include "box-nftables-proxy.h"
#include "box-nftables-ruleset.h"

static BoxEgressPolicy *
make_policy (char **domains)
{
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_autoptr(GError) error = NULL;
  BoxEgressPolicy *policy;

  for (guint i = 0; domains[i] != NULL; i++) {
    BoxRule *rule = g_new0 (BoxRule, 1);

    rule->domain = g_strdup (domains[i]);
    rule->allow = TRUE;
    g_ptr_array_add (rules, rule);
  }
  policy = box_egress_policy_new (rules, NULL, &error);
  if (policy == NULL)
    g_error ("egress-host: rules: %s", error->message);
  return policy;
}

static guint32
parse_guest (const char *text)
{
  struct in_addr in;

  if (inet_pton (AF_INET, text, &in) != 1)
    g_error ("egress-host: not an IPv4 address: %s", text);
  return ntohl (in.s_addr);
}

static void
log_line (const char *line, gpointer user_data)
{
  fprintf (stderr, "egress-host: %s\n", line);
}

int
main (int argc, char **argv)
{
  g_autoptr(BoxNftablesEgress) egress = NULL;
  g_autoptr(BoxNftablesDns) dns = NULL;
  g_autoptr(BoxNftablesProxy) proxy = NULL;
  g_autoptr(BoxEgressPolicy) policy = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) guests = NULL;
  const char *upstreams[2] = { NULL, NULL };
  char line[256];

  if (argc < 7) {
    fprintf (stderr, "usage: %s DNS_PORT HTTP_PORT TLS_PORT UPSTREAM GUEST[,GUEST...] ALLOW...\n",
             argv[0]);
    return 2;
  }
  upstreams[0] = argv[4];
  guests = g_strsplit (argv[5], ",", -1);
  policy = make_policy (argv + 6);

  egress = box_nftables_egress_new ();
  box_nftables_egress_set_log_func (egress, log_line, NULL);
  dns = box_nftables_dns_new ((guint16) atoi (argv[1]), upstreams, NULL, &error);
  if (dns == NULL)
    g_error ("egress-host: resolver: %s", error->message);
  box_nftables_dns_set_egress (dns, egress);
  box_nftables_egress_set_resolver (egress, box_nftables_dns_resolve_func, dns);
  proxy = box_nftables_proxy_new (egress, "0.0.0.0", (guint16) atoi (argv[2]),
                                  (guint16) atoi (argv[3]), &error);
  if (proxy == NULL || !box_nftables_proxy_set_blocked (proxy, box_nftables_blocked_builtin (), &error))
    g_error ("egress-host: proxy: %s", error->message);
  for (guint i = 0; guests[i] != NULL; i++) {
    g_autofree char *id = g_strdup_printf ("bench-%u", i);
    guint32 guest = parse_guest (guests[i]);

    /* as attach and set_egress do: the resolver knows the guest, the
     * registry holds its rules */
    box_nftables_dns_allow (dns, guest);
    box_nftables_egress_set (egress, guest, id, policy);
  }
  printf ("ready\n");
  fflush (stdout);

  while (fgets (line, sizeof line, stdin) != NULL) {
    BoxNftablesProxyStats stats = { 0 };

    if (g_str_has_prefix (line, "stats ")) {
      g_strstrip (line);
      if (!box_nftables_proxy_get_stats (proxy, parse_guest (line + 6), &stats))
        memset (&stats, 0, sizeof stats);
      printf ("%u %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n",
              stats.connections, stats.bytes_out, stats.bytes_in, stats.refused);
      fflush (stdout);
    }
  }
  /* the proxy and the resolver go before the registry they use */
  g_clear_pointer (&proxy, box_nftables_proxy_free);
  g_clear_pointer (&dns, box_nftables_dns_free);
  return 0;
}
