/* nftables-netns-test.c: the nftables plugin with real kernel networking:
 * the masquerade, and a sandbox never reaching the node, the local
 * networks or another sandbox, nothing reaching into it, no spoofing, the
 * resolver (and, in nftables-netns-dns.c, its fairness, its answers and
 * its port), egress rules (nftables-netns-egress.c), restart, rebind,
 * detach and real taps.  The world (a private
 * namespace as the node, namespaces as sandboxes, an "internet") is
 * described in nftables-netns-test.h.  Tests run in order and share it.
 */
#include "config.h"

#include <string.h>

#include "nftables-netns-test.h"

static const char *skip_reason;
static GPtrArray *log_lines;   /* "<domain>: <message>"; any thread logs */
static GMutex log_lock;

static GLogWriterOutput
keep_log (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  const char *domain = NULL, *message = NULL;

  for (gsize i = 0; i < n_fields; i++) {
    if (g_str_equal (fields[i].key, "GLIB_DOMAIN"))
      domain = fields[i].value;
    else if (g_str_equal (fields[i].key, "MESSAGE"))
      message = fields[i].value;
  }
  if (domain != NULL && message != NULL) {
    g_mutex_lock (&log_lock);
    g_ptr_array_add (log_lines, g_strdup_printf ("%s: %s", domain, message));
    g_mutex_unlock (&log_lock);
  }
  return g_log_writer_default (level, fields, n_fields, user_data);
}

gboolean
was_logged (const char *domain, const char *text)
{
  g_autofree char *line = g_strdup_printf ("%s: %s", domain, text);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&log_lock);

  for (guint i = 0; i < log_lines->len; i++) {
    if (g_str_equal (g_ptr_array_index (log_lines, i), line))
      return TRUE;
  }
  return FALSE;
}

guint
logged_count (const char *domain, const char *prefix)
{
  g_autofree char *start = g_strdup_printf ("%s: %s", domain, prefix);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&log_lock);
  guint n = 0;

  for (guint i = 0; i < log_lines->len; i++)
    n += g_str_has_prefix (g_ptr_array_index (log_lines, i), start);
  return n;
}

/* ---- tests, in order ---- */

#define SKIP_IF_NEEDED()           \
  if (skip_reason != NULL) {       \
    g_test_skip (skip_reason);     \
    return;                        \
  }

static void
test_setup (void)
{
  SKIP_IF_NEEDED ();
  world_set_up ();
}

static void
test_attach (void)
{
  g_autofree char *forward = NULL;
  g_autofree char *ipv6 = NULL;
  g_autofree char *addr = NULL;
  g_autofree char *link = NULL;
  g_autofree char *path = NULL;

  SKIP_IF_NEEDED ();
  g_assert_cmpstr (world.att_a->ifname, ==, "bxaaaaaaaaaaaa");
  g_assert_cmpstr (world.att_a->address, ==, "10.222.0.2");
  g_assert_cmpstr (world.att_a->gateway, ==, "10.222.0.1");
  g_assert_cmpuint (world.att_a->prefix, ==, 30);
  g_assert_cmpstr (world.att_a->dns[0], ==, "10.222.0.1");
  g_assert_true (g_str_has_prefix (world.att_a->mac, "52:54:00:"));
  g_assert_cmpstr (world.att_b->ifname, ==, "bxbbbbbbbbbbbb");
  g_assert_cmpstr (world.att_b->address, ==, "10.222.0.6");
  g_assert_cmpstr (world.att_b->gateway, ==, "10.222.0.5");
  g_assert_cmpstr (world.att_a->mac, !=, world.att_b->mac);

  /* the kernel agrees: address, up, IPv6 off, forwarding on, in the sets */
  addr = output_of (NULL, "ip -o -4 addr show dev bxaaaaaaaaaaaa");
  g_assert_nonnull (strstr (addr, "inet 10.222.0.1/30"));
  link = output_of (NULL, "ip -o link show dev bxaaaaaaaaaaaa");
  g_assert_nonnull (strstr (link, ",UP"));
  g_assert_true (g_file_get_contents ("/proc/sys/net/ipv6/conf/bxaaaaaaaaaaaa/disable_ipv6",
                                      &ipv6, NULL, NULL));
  g_assert_cmpstr (ipv6, ==, "1\n");
  g_assert_true (g_file_get_contents ("/proc/sys/net/ipv4/ip_forward", &forward, NULL, NULL));
  g_assert_cmpstr (forward, ==, "1\n");
  g_assert_true (in_set ("taps", "\"bxaaaaaaaaaaaa\""));
  g_assert_true (in_set ("taps", "\"bxbbbbbbbbbbbb\""));
  g_assert_true (in_set ("guests", "\"bxaaaaaaaaaaaa\" . 10.222.0.2"));
  path = record_path (ID_A);
  g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));

  /* attach again: the same attachment */
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(BoxNetAttachment) again = box_network_attach (BOX_NETWORK (world.plugin), ID_A,
                                                            &error);
    g_assert_no_error (error);
    g_assert_cmpstr (again->ifname, ==, world.att_a->ifname);
    g_assert_cmpstr (again->address, ==, world.att_a->address);
    g_assert_cmpstr (again->mac, ==, world.att_a->mac);
  }
  /* the configured extra network is blocked too */
  {
    g_autofree char *blocked = nft_list ("list set inet box blocked");
    g_assert_nonnull (strstr (blocked, "198.51.100.0/24"));
  }
}

static void
test_internet (void)
{
  g_autofree char *peer = NULL;

  SKIP_IF_NEEDED ();
  assert_reaches (world.a, "203.0.113.1", "80");
  /* the internet host sees the node's uplink address, not the sandbox */
  peer = last_peer ("inet.log");
  g_assert_cmpstr (peer, ==, "203.0.113.254");
  assert_reaches (world.b, "203.0.113.1", "80");
}

static void
test_not_the_node (void)
{
  SKIP_IF_NEEDED ();
  /* controls: the node's server answers the node itself and the internet */
  assert_reaches (NULL, "10.222.0.1", "8080");
  assert_reaches (world.inet, "203.0.113.254", "8080");

  assert_dropped (world.a, world.att_a->gateway, "8080");
  assert_dropped (world.a, world.att_b->gateway, "8080");
  assert_dropped (world.a, "203.0.113.254", "8080");
  assert_dropped (world.a, "192.168.77.1", "8080");
  assert_dropped (world.a, "10.99.0.1", "8080");
  assert_dropped (world.b, world.att_b->gateway, "8080");
}

static void
test_not_local_networks (void)
{
  SKIP_IF_NEEDED ();
  assert_reaches (NULL, "192.168.77.2", "80");   /* control */
  assert_dropped (world.a, "192.168.77.2", "80");
  assert_dropped (world.b, "192.168.77.2", "80");
}

static void
test_not_other_sandboxes (void)
{
  SKIP_IF_NEEDED ();
  /* two rules cover this: nothing in but replies, and the pool lies in 10/8 */
  assert_reaches (world.b, "127.0.0.1", "9000");   /* control: b's server */
  assert_reaches (world.b, world.att_b->address, "9000");
  assert_dropped (world.a, world.att_b->address, "9000");
  assert_dropped (world.b, world.att_a->address, "9000");
}

static void
test_nothing_reaches_in (void)
{
  SKIP_IF_NEEDED ();
  assert_reaches (world.a, "127.0.0.1", "9000");   /* control: a's server */
  /* the internet routes to the pool through the node: dropped */
  assert_dropped (world.inet, world.att_a->address, "9000");
  assert_dropped (world.lan, world.att_a->address, "9000");
  /* nor the node's own processes */
  assert_dropped (NULL, world.att_a->address, "9000");
}

static void
test_no_spoofing (void)
{
  g_autofree char *add = g_strdup_printf ("ip addr add %s/32 dev eth0", world.att_b->address);
  g_autofree char *del = g_strdup_printf ("ip addr del %s/32 dev eth0", world.att_b->address);
  g_autofree char *add_out = g_strdup ("ip addr add 198.18.0.7/32 dev eth0");
  g_autofree char *del_out = g_strdup ("ip addr del 198.18.0.7/32 dev eth0");

  SKIP_IF_NEEDED ();
  /* a sends datagrams with b's address and with an address from nowhere
   * as their source: they never leave the node; its own one does */
  must (world.a, add);
  must (world.a, add_out);
  udp_send (world.a, "spoofed-sandbox", world.att_b->address);
  udp_send (world.a, "spoofed-outside", "198.18.0.7");
  udp_send (world.a, "honest", world.att_a->address);
  must (world.a, del);
  must (world.a, del_out);
  for (guint i = 0; i < 200 && !log_has ("udp.log", "honest"); i++)
    g_usleep (10000);
  g_usleep (300000);   /* the spoofed ones went first; give them time anyway */
  g_assert_true (log_has ("udp.log", "honest"));
  g_assert_false (log_has ("udp.log", "spoofed-sandbox"));
  g_assert_false (log_has ("udp.log", "spoofed-outside"));
}

static void
test_resolver (void)
{
  g_autofree char *udp = NULL;
  g_autofree char *tcp = NULL;
  g_autofree char *direct = NULL;
  g_autofree char *outside = NULL;
  int status;

  SKIP_IF_NEEDED ();
  /* DNS to the gateway reaches the plugin's forwarder, which asks the
   * upstream in the "internet" */
  udp = dns_query (world.a, world.att_a->gateway, "53", "udp", &status);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpstr (udp, ==, "203.0.113.80");
  tcp = dns_query (world.b, world.att_b->gateway, "53", "tcp", &status);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpstr (tcp, ==, "203.0.113.80");

  /* the forwarder's own port is not open to sandboxes or to the world */
  direct = dns_query (world.a, world.att_a->gateway, BOX_NFTABLES_DNS_PORT_DEFAULT, "udp", &status);
  g_assert_cmpint (status, ==, DROPPED);
  outside = dns_query (world.inet, "203.0.113.254", BOX_NFTABLES_DNS_PORT_DEFAULT, "udp", &status);
  g_assert_cmpint (status, ==, DROPPED);

  /* an answer with an internal address (private, loopback, link-local,
   * the configured blocked network, v4-mapped private) is refused, over
   * UDP and TCP; the upstream did answer (with a public address first) */
  for (guint i = 0; i < 5; i++) {
    const char *names[] = { "internal.test", "loopback.test", "metadata.test", "blocked.test",
                            "mapped.test" };
    const char *proto = i % 2 == 0 ? "udp" : "tcp";
    g_autofree char *direct_answer = dns_query_name (world.inet, "203.0.113.1", "53", names[i],
                                                     proto, &status);
    g_autofree char *refused = NULL;

    g_assert_cmpstr (direct_answer, ==, "203.0.113.80");
    refused = dns_query_name (world.a, world.att_a->gateway, "53", names[i], proto, &status);
    g_assert_cmpint (status, ==, 1);
    g_assert_cmpstr (refused, ==, "no answer (rcode 5)");
  }
}

static void
test_resolver_fair_udp (void)
{
  SKIP_IF_NEEDED ();
  dns_fair_udp ();
}

static void
test_resolver_fair_tcp (void)
{
  SKIP_IF_NEEDED ();
  dns_fair_tcp ();
}

/* A link named like the plugin's but not in its sets (not attached yet,
 * or made by someone else) gets nowhere; renamed, the same link is an
 * ordinary host link again (the control). */
static void
test_fail_closed (void)
{
  g_autofree char *veth = NULL;
  Ns *rogue;

  SKIP_IF_NEEDED ();
  rogue = ns_new ();
  veth = g_strdup_printf ("ip link add bxrogue0 type veth peer name eth0 netns %d", rogue->pid);
  must (NULL, veth);
  must (NULL, "ip addr add 10.223.0.1/30 dev bxrogue0");
  must (NULL, "ip link set bxrogue0 up");
  must (rogue, "ip addr add 10.223.0.2/30 dev eth0");
  must (rogue, "ip link set eth0 up");
  must (rogue, "ip route add default via 10.223.0.1");
  assert_dropped (rogue, "203.0.113.1", "80");
  assert_dropped (rogue, "10.223.0.1", "8080");

  must (NULL, "ip link set bxrogue0 down");
  must (NULL, "ip link set bxrogue0 name rogue0");
  must (NULL, "ip link set rogue0 up");
  assert_reaches (rogue, "10.223.0.1", "8080");
  must (NULL, "ip link del rogue0");
  ns_free (rogue);
}

/* The forwarder on its own, on other ports, from the node's loopback. */
static void
test_resolver_failures (void)
{
  const char *refused[] = { "203.0.113.1:5353", NULL };
  const char *failover[] = { "203.0.113.9", "203.0.113.1", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxNftablesDns) dead = NULL;
  g_autoptr(BoxNftablesDns) second = NULL;
  g_autofree char *udp = NULL;
  g_autofree char *tcp = NULL;
  g_autofree char *stranger = NULL;
  g_autofree char *answer = NULL;
  guint32 loopback = 0x7f000001;
  int status;

  SKIP_IF_NEEDED ();
  /* nothing listens upstream: SERVFAIL at once, over UDP and TCP */
  dead = box_nftables_dns_new (10054, refused, NULL, &error);
  g_assert_no_error (error);
  box_nftables_dns_allow (dead, loopback);
  udp = dns_query (NULL, "127.0.0.1", "10054", "udp", &status);
  g_assert_cmpint (status, ==, 1);
  g_assert_cmpstr (udp, ==, "no answer (rcode 2)");
  tcp = dns_query (NULL, "127.0.0.1", "10054", "tcp", &status);
  g_assert_cmpint (status, ==, 1);
  g_assert_cmpstr (tcp, ==, "no answer (rcode 2)");
  /* a client it was not told about gets nothing */
  box_nftables_dns_forget (dead, loopback);
  stranger = dns_query (NULL, "127.0.0.1", "10054", "udp", &status);
  g_assert_cmpint (status, ==, DROPPED);

  /* the second port is taken */
  g_assert_null (box_nftables_dns_new (10054, refused, NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);

  /* the first upstream never answers: the next one does */
  second = box_nftables_dns_new (10055, failover, NULL, &error);
  g_assert_no_error (error);
  box_nftables_dns_allow (second, loopback);
  answer = dns_query_within (NULL, "127.0.0.1", "10055", "example.test", "udp", 5, &status);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpstr (answer, ==, "203.0.113.80");
}

static void
test_resolver_upstreams (void)
{
  SKIP_IF_NEEDED ();
  dns_default_upstreams ();
}

static void
test_resolver_tcp_stop (void)
{
  SKIP_IF_NEEDED ();
  dns_tcp_stop ();
}

static void
test_resolver_restricted (void)
{
  SKIP_IF_NEEDED ();
  dns_restricted ();
}

static void
test_resolver_restricted_world (void)
{
  SKIP_IF_NEEDED ();
  dns_restricted_world ();
}

static void
test_resolver_restricted_flood (void)
{
  SKIP_IF_NEEDED ();
  dns_restricted_flood ();
}

static void
test_resolver_node_lookup_flood (void)
{
  SKIP_IF_NEEDED ();
  dns_node_lookup_flood ();
}

static void
test_resolver_report_stuck (void)
{
  SKIP_IF_NEEDED ();
  dns_report_stuck ();
}

static void
test_resolver_report_round_robin (void)
{
  SKIP_IF_NEEDED ();
  dns_report_round_robin ();
}

static void
test_set_egress (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) bad = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  BoxRule *rule = g_new0 (BoxRule, 1);

  SKIP_IF_NEEDED ();
  /* rules that do not compile change nothing */
  rule->domain = g_strdup ("Not A Name");
  rule->allow = TRUE;
  g_ptr_array_add (bad, rule);
  g_assert_false (box_network_set_egress (BOX_NETWORK (world.plugin), ID_A, bad, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_false (in_set ("restricted", "\"bxaaaaaaaaaaaa\""));
  assert_reaches (world.a, "203.0.113.1", "80");
}

static void
test_egress_enforced (void)
{
  SKIP_IF_NEEDED ();
  egress_enforced ();
}

static void
test_egress_kernel_refusals (void)
{
  SKIP_IF_NEEDED ();
  egress_kernel_refusals ();
}

static void
test_egress_patch (void)
{
  SKIP_IF_NEEDED ();
  egress_patch ();
}

static void
test_egress_pending_and_restart (void)
{
  SKIP_IF_NEEDED ();
  egress_pending_and_restart ();
}

static void
test_list_allowed (void)
{
  SKIP_IF_NEEDED ();
  list_allowed_in_world ();
}

static void
test_broker_unrestricted (void)
{
  SKIP_IF_NEEDED ();
  broker_unrestricted ();
}

static void
test_broker_restricted (void)
{
  SKIP_IF_NEEDED ();
  broker_restricted ();
}

static void
test_broker_membership (void)
{
  SKIP_IF_NEEDED ();
  broker_membership ();
}

static void
test_broker_unset_waits (void)
{
  SKIP_IF_NEEDED ();
  broker_unset_waits ();
}

static void
test_broker_server_first (void)
{
  SKIP_IF_NEEDED ();
  broker_server_first ();
}

static void
test_rebind (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxNetAttachment) moved = NULL;
  g_autofree char *path_a = record_path (ID_A);
  g_autofree char *path_c = record_path (ID_C);

  SKIP_IF_NEEDED ();
  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), ID_A, ID_C, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (path_a, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (path_c, G_FILE_TEST_EXISTS));
  /* the tap keeps its name, address and MAC; the guest notices nothing */
  moved = box_network_attach (BOX_NETWORK (world.plugin), ID_C, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (moved->ifname, ==, world.att_a->ifname);
  g_assert_cmpstr (moved->address, ==, world.att_a->address);
  g_assert_cmpstr (moved->mac, ==, world.att_a->mac);
  assert_reaches (world.a, "203.0.113.1", "80");

  g_assert_false (box_network_rebind (BOX_NETWORK (world.plugin), ID_C, ID_B, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_clear_error (&error);
  g_assert_false (box_network_rebind (BOX_NETWORK (world.plugin), ID_A, ID_C, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), ID_C, ID_A, &error));
  g_assert_no_error (error);
}

static void
test_restart (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxNetAttachment) again = NULL;
  g_autofree char *answer = NULL;
  int status;

  SKIP_IF_NEEDED ();
  /* stop() leaves taps and rules: running VMs keep their network */
  box_plugin_stop (BOX_PLUGIN (world.plugin));
  g_clear_object (&world.plugin);
  g_assert_true (link_exists (world.att_a->ifname));
  g_assert_true (in_set ("taps", "\"bxaaaaaaaaaaaa\""));
  assert_reaches (world.a, "203.0.113.1", "80");
  assert_dropped (world.a, world.att_b->address, "9000");
  /* meanwhile nobody can take the resolver's port */
  dns_port_privileged ();

  /* a new instance reinstalls the table with the recorded members */
  world.plugin = plugin_new_started ();
  g_assert_true (in_set ("taps", "\"bxaaaaaaaaaaaa\""));
  g_assert_true (in_set ("guests", "\"bxbbbbbbbbbbbb\" . 10.222.0.6"));
  again = box_network_attach (BOX_NETWORK (world.plugin), ID_A, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (again->ifname, ==, world.att_a->ifname);
  g_assert_cmpstr (again->address, ==, world.att_a->address);
  assert_reaches (world.a, "203.0.113.1", "80");
  assert_dropped (world.a, world.att_a->gateway, "8080");
  answer = dns_query (world.a, world.att_a->gateway, "53", "udp", &status);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpstr (answer, ==, "203.0.113.80");
}

static void
test_real_taps (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxNetAttachment) tap = NULL;
  g_autoptr(BoxNetAttachment) again = NULL;
  g_autoptr(BoxNetAttachment) slot = NULL;
  g_autofree char *addr = NULL;
  g_autofree char *link = NULL;
  g_autofree char *path_u = record_path (ID_U);

  SKIP_IF_NEEDED ();
  box_nftables_plugin_set_link_func (world.plugin, NULL, NULL);

  tap = box_network_attach (BOX_NETWORK (world.plugin), ID_T, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (tap->ifname, ==, "bxtttttttttttt");
  g_assert_cmpstr (tap->address, ==, "10.222.0.10");   /* the next free /30 */
  link = output_of (NULL, "ip -d -o link show dev bxtttttttttttt");
  g_assert_nonnull (strstr (link, "tun type tap"));
  g_assert_nonnull (strstr (link, "vnet_hdr on persist on"));
  g_assert_nonnull (strstr (link, ",UP"));
  addr = output_of (NULL, "ip -o -4 addr show dev bxtttttttttttt");
  g_assert_nonnull (strstr (addr, "inet 10.222.0.9/30"));
  g_assert_true (in_set ("taps", "\"bxtttttttttttt\""));

  /* found again after the tap vanished behind the plugin's back */
  must (NULL, "ip link del bxtttttttttttt");
  again = box_network_attach (BOX_NETWORK (world.plugin), ID_T, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (again->address, ==, tap->address);
  g_assert_true (link_exists ("bxtttttttttttt"));

  /* a warm-pool slot: any ID; the name is a hash; rebind keeps it */
  slot = box_network_attach (BOX_NETWORK (world.plugin), "pool-slot-1", &error);
  g_assert_no_error (error);
  g_assert_true (g_str_has_prefix (slot->ifname, "bx"));
  g_assert_cmpuint (strlen (slot->ifname), ==, 14);
  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), "pool-slot-1", ID_U, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_test (path_u, G_FILE_TEST_EXISTS));
  g_assert_true (link_exists (slot->ifname));

  /* detach: tap, set members and record gone; twice is fine */
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_T, &error));
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_U, &error));
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_U, &error));
  g_assert_no_error (error);
  g_assert_false (link_exists ("bxtttttttttttt"));
  g_assert_false (link_exists (slot->ifname));
  g_assert_false (in_set ("taps", "\"bxtttttttttttt\""));
  g_assert_false (in_set ("guests", slot->ifname));
  g_assert_false (g_file_test (path_u, G_FILE_TEST_EXISTS));

  box_nftables_plugin_set_link_func (world.plugin, make_veth, NULL);
}

static void
test_detach (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxNetAttachment) reused = NULL;
  g_autofree char *path_b = record_path (ID_B);

  SKIP_IF_NEEDED ();
  /* what b resolved goes with it: its address is the next sandbox's */
  egress_resolved_for_b ();
  g_assert_true (in_set ("resolved", "10.222.0.6 . 203.0.113.1 . 9100"));
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_B, &error));
  g_assert_no_error (error);
  g_assert_false (in_set ("resolved", "10.222.0.6 . 203.0.113.1 . 9100"));
  g_assert_false (link_exists (world.att_b->ifname));
  g_assert_false (in_set ("taps", "\"bxbbbbbbbbbbbb\""));
  g_assert_false (in_set ("guests", "10.222.0.6"));
  g_assert_false (g_file_test (path_b, G_FILE_TEST_EXISTS));
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_B, &error));
  g_assert_no_error (error);
  /* the others carry on */
  assert_reaches (world.a, "203.0.113.1", "80");

  /* attached again, b gets the lowest free subnet: its old one */
  reused = box_network_attach (BOX_NETWORK (world.plugin), ID_B, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (reused->address, ==, "10.222.0.6");
  configure_guest (world.b, reused);
  assert_reaches (world.b, "203.0.113.1", "80");
  assert_dropped (world.b, world.att_a->address, "9000");
}

static void
test_cleanup (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *tables = NULL;

  SKIP_IF_NEEDED ();
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_A, &error));
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_B, &error));
  g_assert_no_error (error);
  box_plugin_stop (BOX_PLUGIN (world.plugin));
  g_clear_object (&world.plugin);
  g_assert_true (box_nftables_nft_run (world.nft, "delete table inet box\n", &error));
  g_assert_no_error (error);
  tables = nft_list ("list tables");
  g_assert_null (strstr (tables, "inet box"));

  for (guint i = 0; i < world.servers->len; i++)
    kill_and_reap (g_array_index (world.servers, GPid, i));
  g_array_set_size (world.servers, 0);
  g_clear_pointer (&world.inet, ns_free);
  g_clear_pointer (&world.lan, ns_free);
  g_clear_pointer (&world.a, ns_free);
  g_clear_pointer (&world.b, ns_free);
}

int
main (int argc, char **argv)
{
  int ret;

  skip_reason = check_prerequisites ();
  g_test_init (&argc, &argv, NULL);
  log_lines = g_ptr_array_new_with_free_func (g_free);
  g_log_set_writer_func (keep_log, NULL, NULL);
  g_test_add_func ("/nftables-netns/setup", test_setup);
  g_test_add_func ("/nftables-netns/attach", test_attach);
  g_test_add_func ("/nftables-netns/internet", test_internet);
  g_test_add_func ("/nftables-netns/not-the-node", test_not_the_node);
  g_test_add_func ("/nftables-netns/not-local-networks", test_not_local_networks);
  g_test_add_func ("/nftables-netns/not-other-sandboxes", test_not_other_sandboxes);
  g_test_add_func ("/nftables-netns/nothing-reaches-in", test_nothing_reaches_in);
  g_test_add_func ("/nftables-netns/no-spoofing", test_no_spoofing);
  g_test_add_func ("/nftables-netns/resolver", test_resolver);
  g_test_add_func ("/nftables-netns/resolver-failures", test_resolver_failures);
  g_test_add_func ("/nftables-netns/resolver-fair-udp", test_resolver_fair_udp);
  g_test_add_func ("/nftables-netns/resolver-fair-tcp", test_resolver_fair_tcp);
  g_test_add_func ("/nftables-netns/resolver-upstreams", test_resolver_upstreams);
  g_test_add_func ("/nftables-netns/resolver-tcp-stop", test_resolver_tcp_stop);
  g_test_add_func ("/nftables-netns/resolver-restricted", test_resolver_restricted);
  g_test_add_func ("/nftables-netns/resolver-restricted-world", test_resolver_restricted_world);
  g_test_add_func ("/nftables-netns/resolver-restricted-flood", test_resolver_restricted_flood);
  g_test_add_func ("/nftables-netns/resolver-node-lookup-flood",
                   test_resolver_node_lookup_flood);
  g_test_add_func ("/nftables-netns/resolver-report-stuck", test_resolver_report_stuck);
  g_test_add_func ("/nftables-netns/resolver-report-round-robin",
                   test_resolver_report_round_robin);
  g_test_add_func ("/nftables-netns/fail-closed", test_fail_closed);
  g_test_add_func ("/nftables-netns/set-egress", test_set_egress);
  g_test_add_func ("/nftables-netns/egress-enforced", test_egress_enforced);
  g_test_add_func ("/nftables-netns/egress-kernel-refusals", test_egress_kernel_refusals);
  g_test_add_func ("/nftables-netns/egress-patch", test_egress_patch);
  g_test_add_func ("/nftables-netns/egress-pending-and-restart", test_egress_pending_and_restart);
  g_test_add_func ("/nftables-netns/list-allowed", test_list_allowed);
  g_test_add_func ("/nftables-netns/broker-unrestricted", test_broker_unrestricted);
  g_test_add_func ("/nftables-netns/broker-restricted", test_broker_restricted);
  g_test_add_func ("/nftables-netns/broker-membership", test_broker_membership);
  g_test_add_func ("/nftables-netns/broker-unset-waits", test_broker_unset_waits);
  g_test_add_func ("/nftables-netns/broker-server-first", test_broker_server_first);
  g_test_add_func ("/nftables-netns/rebind", test_rebind);
  g_test_add_func ("/nftables-netns/restart", test_restart);
  g_test_add_func ("/nftables-netns/real-taps", test_real_taps);
  g_test_add_func ("/nftables-netns/detach", test_detach);
  g_test_add_func ("/nftables-netns/cleanup", test_cleanup);
  ret = g_test_run ();
  world_free ();
  return ret;
}
