/* box-nftables-ruleset.c: ruleset text; see box-nftables-ruleset.h and README.md. */
#include "config.h"

#include <string.h>

#include "box-nftables-nflog.h"
#include "box-nftables-ruleset.h"

static const char *const blocked_builtin[] = {
  "0.0.0.0/8",        /* "this network" */
  "10.0.0.0/8",       /* private */
  "100.64.0.0/10",    /* shared address space (carrier-grade NAT) */
  "127.0.0.0/8",      /* loopback */
  "169.254.0.0/16",   /* link-local, cloud metadata services */
  "172.16.0.0/12",    /* private */
  "192.168.0.0/16",   /* private */
  "224.0.0.0/4",      /* multicast */
  "240.0.0.0/4",      /* reserved, limited broadcast */
  NULL
};

const char *const *
box_nftables_blocked_builtin (void)
{
  return blocked_builtin;
}

gboolean
box_nftables_table_name_is_valid (const char *table)
{
  gsize len = table != NULL ? strlen (table) : 0;

  if (len < 1 || len > 32 || !g_ascii_islower (table[0]))
    return FALSE;
  for (gsize i = 0; i < len; i++) {
    if (!g_ascii_islower (table[i]) && !g_ascii_isdigit (table[i]) && table[i] != '_')
      return FALSE;
  }
  return TRUE;
}

static void
append_blocked (GString *out, const BoxNftablesRuleset *ruleset)
{
  gboolean first = TRUE;

  for (const char *const *p = blocked_builtin; *p != NULL; p++) {
    g_string_append_printf (out, "%s%s", first ? "" : ", ", *p);
    first = FALSE;
  }
  for (const char *const *p = ruleset->blocked; p != NULL && *p != NULL; p++)
    g_string_append_printf (out, ", %s", *p);
}

char *
box_nftables_ruleset_install (const BoxNftablesRuleset *ruleset)
{
  GString *out = g_string_new (NULL);
  const char *t = ruleset->table;
  guint i;

  g_return_val_if_fail (box_nftables_table_name_is_valid (t), NULL);
  g_return_val_if_fail (ruleset->ifname_prefix != NULL, NULL);

  /* "table ... {}" creates it if missing, so that "delete" cannot fail;
   * all of it is one transaction: there is no moment without rules. */
  g_string_append_printf (out, "table inet %s {}\ndelete table inet %s\n", t, t);
  g_string_append_printf (out, "table inet %s {\n", t);
  g_string_append (out,
    "  set taps { type ifname; }\n"
    "  set guests { type ifname . ipv4_addr; }\n"
    "  set restricted { type ifname; }\n"
    "  set brokered { type ifname; }\n"
    "  set resolved { type ipv4_addr . ipv4_addr . inet_service; flags timeout; }\n"
    "  set refused_log { type ipv4_addr; size 65535; flags dynamic,timeout; timeout 1m; }\n"
    "  set blocked { type ipv4_addr; flags interval; auto-merge; elements = { ");
  append_blocked (out, ruleset);
  g_string_append (out, " }; }\n");

  /* DNS to the gateway goes to the plugin's resolver; a restricted
   * sandbox's web traffic, whatever its destination, to the name-checking
   * proxy, and so does a brokered sandbox's TLS (the proxy hands the
   * connections to a secret's hosts to the broker). */
  g_string_append_printf (out,
    "  chain prerouting {\n"
    "    type nat hook prerouting priority dstnat; policy accept;\n"
    "    iifname @taps ip daddr %s meta l4proto { tcp, udp } th dport 53 redirect to :%u\n"
    "    iifname @restricted tcp dport 80 redirect to :%u\n"
    "    iifname @restricted tcp dport 443 redirect to :%u\n"
    "    iifname @brokered tcp dport 443 redirect to :%u\n"
    "  }\n", ruleset->pool, ruleset->dns_port, ruleset->proxy_http_port,
    ruleset->proxy_tls_port, ruleset->proxy_tls_port);

  /* The node itself: only the resolver, reached through the redirect;
   * the resolver's port is closed to everything else.  A link named like
   * ours that is not (or not yet) in @taps is dropped: fail closed. */
  g_string_append_printf (out,
    "  chain input {\n"
    "    type filter hook input priority filter - 10; policy accept;\n"
    "    iifname \"%s*\" iifname != @taps drop\n"
    "    iifname @taps jump input_from_box\n"
    "    meta l4proto { tcp, udp } th dport %u drop\n"
    "    tcp dport { %u, %u } drop\n"
    "  }\n"
    "  chain input_from_box {\n"
    "    meta nfproto ipv6 drop\n"
    "    iifname . ip saddr != @guests drop\n"
    "    meta l4proto { tcp, udp } th dport %u ct status dnat accept\n"
    "    iifname @restricted tcp dport { %u, %u } ct status dnat accept\n"
    "    iifname @brokered tcp dport %u ct status dnat accept\n"
    "    ct state established,related accept\n"
    "    drop\n"
    "  }\n", ruleset->ifname_prefix, ruleset->dns_port, ruleset->proxy_http_port,
    ruleset->proxy_tls_port, ruleset->dns_port, ruleset->proxy_http_port,
    ruleset->proxy_tls_port, ruleset->proxy_tls_port);

  /* Through the node: out to the internet only; nothing in but replies;
   * box to box falls under "nothing in". */
  g_string_append_printf (out,
    "  chain forward {\n"
    "    type filter hook forward priority filter - 10; policy accept;\n"
    "    iifname \"%s*\" iifname != @taps drop\n"
    "    oifname \"%s*\" oifname != @taps drop\n"
    "    oifname @taps ct state established,related accept\n"
    "    oifname @taps drop\n"
    "    iifname @taps jump forward_from_box\n"
    "  }\n"
    "  chain forward_from_box {\n"
    "    meta nfproto ipv6 drop\n"
    "    iifname . ip saddr != @guests drop\n"
    "    ip daddr @blocked drop\n"
    "    iifname @restricted jump forward_restricted\n"
    "    accept\n"
    "  }\n", ruleset->ifname_prefix, ruleset->ifname_prefix);
  /* Only TCP, and a new connection only to what the guest resolved from
   * a name allowed on that port; refused at once with a reset.  What is
   * refused (or, not TCP, dropped) goes to the NFLOG group first, headers
   * only, at most 5 a second (10 at once) per guest address (unless the
   * kernel has no NFLOG: no_log). */
  g_string_append (out,
    "  chain forward_restricted {\n"
    "    meta l4proto tcp ct state established,related accept\n"
    "    meta l4proto tcp ip saddr . ip daddr . tcp dport @resolved accept\n");
  if (!ruleset->no_log)
    g_string_append_printf (out,
      "    update @refused_log { ip saddr limit rate 5/second burst 10 packets } "
      "log group %u snaplen %u\n", ruleset->log_group, BOX_NFTABLES_NFLOG_SNAPLEN);
  g_string_append (out,
    "    meta l4proto tcp reject with tcp reset\n"
    "    drop\n"
    "  }\n");

  /* From the node's own processes into a sandbox: only replies (the
   * resolver's answers, ICMP errors). */
  g_string_append_printf (out,
    "  chain output {\n"
    "    type filter hook output priority filter - 10; policy accept;\n"
    "    oifname \"%s*\" oifname != @taps drop\n"
    "    oifname @taps ct state established,related accept\n"
    "    oifname @taps drop\n"
    "  }\n", ruleset->ifname_prefix);

  g_string_append (out,
    "  chain postrouting {\n"
    "    type nat hook postrouting priority srcnat; policy accept;\n"
    "    iifname @taps oifname != @taps masquerade\n"
    "  }\n"
    "}\n");

  for (i = 0; ruleset->members != NULL && i < ruleset->members->len; i++) {
    const BoxNftablesMember *m = &g_array_index (ruleset->members, BoxNftablesMember, i);
    g_autofree char *add = box_nftables_ruleset_add_member (t, m->ifname, m->address);
    g_string_append (out, add);
    if (m->restricted)
      g_string_append_printf (out, "add element inet %s restricted { \"%s\" }\n", t, m->ifname);
    if (m->brokered)
      g_string_append_printf (out, "add element inet %s brokered { \"%s\" }\n", t, m->ifname);
  }
  return g_string_free (out, FALSE);
}

char *
box_nftables_ruleset_add_member (const char *table, const char *ifname, const char *address)
{
  return g_strdup_printf ("add element inet %s taps { \"%s\" }\n"
                          "add element inet %s guests { \"%s\" . %s }\n",
                          table, ifname, table, ifname, address);
}

char *
box_nftables_ruleset_remove_member (const char *table, const char *ifname, const char *address)
{
  g_autofree char *add = box_nftables_ruleset_add_member (table, ifname, address);

  /* nft 1.0.6 has no "destroy element": adding first makes the delete
   * succeed whether or not the element was there. */
  g_autofree char *unrestrict = box_nftables_ruleset_set_restricted (table, ifname, FALSE);
  g_autofree char *unbroker = box_nftables_ruleset_set_brokered (table, ifname, FALSE);

  return g_strdup_printf ("%s"
                          "delete element inet %s taps { \"%s\" }\n"
                          "delete element inet %s guests { \"%s\" . %s }\n%s%s",
                          add, table, ifname, table, ifname, address, unrestrict, unbroker);
}

static char *
set_member_of (const char *table, const char *set, const char *ifname, gboolean member)
{
  g_autofree char *add = g_strdup_printf ("add element inet %s %s { \"%s\" }\n", table, set,
                                          ifname);

  if (member)
    return g_steal_pointer (&add);
  return g_strdup_printf ("%sdelete element inet %s %s { \"%s\" }\n", add, table, set, ifname);
}

char *
box_nftables_ruleset_set_restricted (const char *table, const char *ifname, gboolean restricted)
{
  return set_member_of (table, "restricted", ifname, restricted);
}

char *
box_nftables_ruleset_set_brokered (const char *table, const char *ifname, gboolean brokered)
{
  return set_member_of (table, "brokered", ifname, brokered);
}

static void
append_ipv4 (GString *out, guint32 addr)
{
  g_string_append_printf (out, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 0xff,
                          (addr >> 8) & 0xff, addr & 0xff);
}

void
box_nftables_ruleset_append_resolved (GString *out, const char *table, guint32 guest,
                                      guint32 addr, guint16 port, guint timeout_s)
{
  g_autoptr(GString) element = g_string_new ("{ ");

  append_ipv4 (element, guest);
  g_string_append (element, " . ");
  append_ipv4 (element, addr);
  g_string_append_printf (element, " . %u", port);
  /* add-then-delete removes whatever is there (nft 1.0.6 has no
   * "destroy"); the add after it sets the timeout afresh. */
  g_string_append_printf (out, "add element inet %s resolved %s timeout 1s }\n"
                               "delete element inet %s resolved %s }\n",
                          table, element->str, table, element->str);
  if (timeout_s > 0)
    g_string_append_printf (out, "add element inet %s resolved %s timeout %us }\n", table,
                            element->str, timeout_s);
}

char *
box_nftables_ruleset_uninstall (const char *table)
{
  return g_strdup_printf ("table inet %s {}\ndelete table inet %s\n", table, table);
}
