/* nftables-netns-egress.c: egress rules in the kernel, in the world of
 * nftables-netns-test.h: sandbox a restricted, b not (the control).
 *
 * What the resolver would report is reported directly through the
 * plugin's registry (box_nftables_egress_report_resolved), so these tests
 * see only the plugin's part: the sets, the redirects and the ends of
 * connections. */
#include "config.h"

#include <string.h>

#include <errno.h>
#include <unistd.h>

#include "nftables-netns-test.h"

#define INET       "203.0.113.1"
#define INET_ADDR  0xcb007101u   /* 203.0.113.1 */

static BoxRule *
rule_new (const char *domain, guint16 port)
{
  BoxRule *rule = g_new0 (BoxRule, 1);

  rule->domain = g_strdup (domain);
  rule->allow = TRUE;
  if (port != 0) {
    rule->n_ports = 1;
    rule->ports = g_new (guint16, 1);
    rule->ports[0] = port;
  }
  return rule;
}

/* "svc.test" on @port_a and @port_b (0: none), "web.test" on 80/443. */
static GPtrArray *
rules_new (guint16 port_a, guint16 port_b)
{
  GPtrArray *rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);

  if (port_a != 0)
    g_ptr_array_add (rules, rule_new ("svc.test", port_a));
  if (port_b != 0)
    g_ptr_array_add (rules, rule_new ("svc.test", port_b));
  g_ptr_array_add (rules, rule_new ("web.test", 0));
  return rules;
}

static void
set_rules (const char *id, GPtrArray *rules)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (box_network_set_egress (BOX_NETWORK (world.plugin), id, rules, &error));
  g_assert_no_error (error);
}

static void
report_for (guint32 guest, const char *name, guint32 ttl_s)
{
  guint32 addr = INET_ADDR;

  box_nftables_egress_report_resolved (box_nftables_plugin_get_egress (world.plugin), guest,
                                       name, &addr, 1, ttl_s);
}

static void
report (const char *name, guint32 ttl_s)
{
  report_for (0x0ade0002u, name, ttl_s);   /* a: 10.222.0.2 */
}

void
egress_resolved_for_b (void)
{
  g_autoptr(GPtrArray) rules = rules_new (9100, 0);

  set_rules (ID_B, rules);
  report_for (0x0ade0006u, "svc.test", 60);   /* b: 10.222.0.6 */
}

static void
assert_probe (Ns *ns, const char *port, int want)
{
  int status = probe (ns, INET, port, NULL, want == DROPPED ? PROBE_DROP_S : PROBE_ANSWER_S);

  if (status != want)
    g_error ("%s:%s: got %d, want %d", INET, port, status, want);
}

static gboolean
udp_arrives (Ns *ns, const char *payload)
{
  udp_send (ns, payload, NULL);
  for (guint i = 0; i < 100 && !log_has ("udp.log", payload); i++)
    g_usleep (10000);
  return log_has ("udp.log", payload);
}

/* Only TCP, and only to what was resolved from an allowed name, within
 * its TTL; 80 and 443 go to the proxy ports. */
void
egress_enforced (void)
{
  g_autoptr(GPtrArray) rules = rules_new (9100, 0);
  g_autoptr(GPtrArray) none = g_ptr_array_new ();

  serve_tcp (world.inet, "0.0.0.0", "9100", "inet9100.log");
  serve_tcp (world.inet, "0.0.0.0", "9102", "inet9102.log");
  assert_probe (world.a, "9100", REACHED);   /* unrestricted still */

  set_rules (ID_A, rules);
  g_assert_true (in_set ("restricted", "\"bxaaaaaaaaaaaa\""));
  g_assert_false (in_set ("restricted", "\"bxbbbbbbbbbbbb\""));

  /* refusals the resolver and the proxy report are logged by sandbox */
  box_nftables_egress_report_refused (box_nftables_plugin_get_egress (world.plugin), 0x0ade0002u,
                                      "tcp", "x.test", 22);
  g_assert_true (was_logged ("box-nftables", "egress refused: sandbox " ID_A " tcp x.test:22"));

  /* no UDP, no ICMP; b, unrestricted, is the control */
  g_assert_false (udp_arrives (world.a, "restricted-udp"));
  g_assert_true (udp_arrives (world.b, "unrestricted-udp"));
  g_assert_false (icmp_echo (world.a));
  g_assert_true (icmp_echo (world.b));

  /* TCP to an address nobody resolved: a reset at once */
  assert_probe (world.a, "9100", REFUSED);
  assert_probe (world.b, "9100", REACHED);

  /* resolved from a name allowed on 9100: that port only, for the TTL */
  report ("svc.test", 2);
  g_assert_true (in_set ("resolved", "10.222.0.2 . 203.0.113.1 . 9100"));
  assert_probe (world.a, "9100", REACHED);
  assert_probe (world.a, "9102", REFUSED);
  /* a name not allowed on any other port adds nothing */
  report ("web.test", 30);
  assert_probe (world.a, "9102", REFUSED);
  g_usleep (2500 * 1000);
  g_assert_false (in_set ("resolved", "10.222.0.2 . 203.0.113.1 . 9100"));
  assert_probe (world.a, "9100", REFUSED);

  /* 80 and 443, whatever the address, land on the plugin's name-checking
   * proxy, which knows the sandbox by its own address: a Host no rule
   * allows gets the proxy's 403, and a first flight that is no TLS
   * ClientHello a reset; b, unrestricted, reaches port 80 itself */
  {
    gboolean reset;
    g_autofree char *denied = exchange (world.a, INET, "80",
                                        "GET / HTTP/1.1\r\nHost: nope.test\r\n\r\n", &reset);
    g_autofree char *not_tls = exchange (world.a, INET, "443", "hello, not TLS\r\n\r\n", &reset);

    g_assert_true (g_str_has_prefix (denied, "HTTP/1.1 403 "));
    g_assert_nonnull (strstr (denied, "\"permission_denied\""));
    g_assert_nonnull (strstr (denied, "nope.test"));
    g_assert_cmpstr (not_tls, ==, "");
    g_assert_true (reset);
    g_assert_true (was_logged ("box-nftables", "egress refused: sandbox " ID_A " http nope.test:80"));
  }
  assert_probe (world.b, "80", REACHED);
  /* the proxy's ports are nobody else's: not b's, not reached directly */
  assert_dropped (world.b, world.att_b->gateway, "536");
  assert_dropped (world.a, world.att_a->gateway, "537");

  /* the whole internet again */
  set_rules (ID_A, none);
  g_assert_false (in_set ("restricted", "\"bxaaaaaaaaaaaa\""));
  assert_probe (world.a, "9100", REACHED);
  g_assert_true (udp_arrives (world.a, "unrestricted-again"));
}

/* New rules on an awake sandbox: its elements made again at once, and a
 * connection the new rules refuse ended (reset on its next packet). */
void
egress_patch (void)
{
  g_autoptr(GPtrArray) both = rules_new (9101, 9100);
  g_autoptr(GPtrArray) only_9100 = rules_new (9100, 0);
  g_autoptr(GPtrArray) other = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_autoptr(GPtrArray) none = g_ptr_array_new ();
  g_autofree char *log = g_build_filename (world.tmp, "hold.log", NULL);
  g_autofree char *ready = g_strconcat (log, ".ready", NULL);
  const char *args[] = { "hold", "0.0.0.0", "9101", log, NULL };
  int kept, cut;

  g_ptr_array_add (other, rule_new ("other.test", 9101));
  serve (world.inet, args, ready);
  set_rules (ID_A, both);
  report ("svc.test", 60);
  g_assert_true (in_set ("resolved", "10.222.0.2 . 203.0.113.1 . 9101"));
  g_assert_true (in_set ("resolved", "10.222.0.2 . 203.0.113.1 . 9100"));
  cut = open_held (world.a, INET, "9101");
  kept = open_held (world.b, INET, "9101");
  g_assert_cmpint (held_echo (cut), ==, 0);

  /* 9101 is no longer allowed: its element goes, 9100's stays, and the
   * open connection is reset; b's (unrestricted) lives on */
  set_rules (ID_A, only_9100);
  g_assert_false (in_set ("resolved", "10.222.0.2 . 203.0.113.1 . 9101"));
  g_assert_true (in_set ("resolved", "10.222.0.2 . 203.0.113.1 . 9100"));
  g_assert_cmpint (held_echo (cut), ==, ECONNRESET);
  g_assert_cmpint (held_echo (kept), ==, 0);
  assert_probe (world.a, "9100", REACHED);
  close (cut);
  close (kept);

  /* a connection made while unrestricted survives rules that allow it
   * (svc.test resolved to its address within the TTL), not rules that
   * allow the port only for a name that never resolved there */
  set_rules (ID_A, none);
  cut = open_held (world.a, INET, "9101");
  set_rules (ID_A, both);
  g_assert_cmpint (held_echo (cut), ==, 0);
  set_rules (ID_A, other);
  g_assert_cmpint (held_echo (cut), ==, ECONNRESET);
  close (cut);
  set_rules (ID_A, none);
}

/* Rules for an ID without an attachment wait for it (create, a warm slot
 * taken); a boxd restart (stop, start) keeps them. */
void
egress_pending_and_restart (void)
{
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_autoptr(GPtrArray) none = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;

  /* a name a never resolved (svc.test it did, in egress_patch) */
  g_ptr_array_add (rules, rule_new ("other.test", 9100));

  /* pending for sb-ccc..., applied when a's attachment moves there */
  set_rules (ID_C, rules);
  g_assert_false (in_set ("restricted", "\"bxaaaaaaaaaaaa\""));
  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), ID_A, ID_C, &error));
  g_assert_no_error (error);
  g_assert_true (in_set ("restricted", "\"bxaaaaaaaaaaaa\""));
  assert_probe (world.a, "9100", REFUSED);
  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), ID_C, ID_A, &error));
  g_assert_no_error (error);

  /* the rules live in the record: a restarted plugin enforces them */
  box_plugin_stop (BOX_PLUGIN (world.plugin));
  g_clear_object (&world.plugin);
  g_assert_true (in_set ("restricted", "\"bxaaaaaaaaaaaa\""));   /* the table stays meanwhile */
  assert_probe (world.a, "9100", REFUSED);
  world.plugin = plugin_new_started ();
  g_assert_true (in_set ("restricted", "\"bxaaaaaaaaaaaa\""));
  assert_probe (world.a, "9100", REFUSED);
  g_assert_false (udp_arrives (world.a, "restricted-after-restart"));
  report ("other.test", 30);
  assert_probe (world.a, "9100", REACHED);

  set_rules (ID_A, none);
  assert_probe (world.a, "9100", REACHED);
  /* rules for an unknown ID that end up empty leave nothing behind */
  set_rules (ID_C, rules);
  set_rules (ID_C, none);
  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), ID_A, ID_C, &error));
  g_assert_false (in_set ("restricted", "\"bxaaaaaaaaaaaa\""));
  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), ID_C, ID_A, &error));
  g_assert_no_error (error);
}

/* ---- the kernel's own refusals logged (NFLOG, box-nftables-nflog.c) ---- */

/* The reader batches for 0.1 s at most. */
static gboolean
logged_soon (const char *line)
{
  for (guint i = 0; i < 200 && !was_logged ("box-nftables", line); i++)
    g_usleep (10000);
  return was_logged ("box-nftables", line);
}

/* After egress-enforced: b's log window is fresh, a's has room. */
void
egress_kernel_refusals (void)
{
  g_autoptr(GPtrArray) rules = rules_new (9100, 0);
  g_autoptr(GPtrArray) none = g_ptr_array_new ();
  guint before, read;
  gint64 start;
  double seconds;

  set_rules (ID_B, rules);
  set_rules (ID_A, rules);
  serve_tcp (world.inet, "0.0.0.0", "9103", "inet9103.log");

  /* a TCP port no rule allows: a reset, and exactly this line */
  g_assert_cmpint (probe (world.b, INET, "9103", NULL, PROBE_ANSWER_S), ==, REFUSED);
  g_assert_true (logged_soon ("egress refused: sandbox " ID_B " tcp " INET ":9103"));
  /* UDP and ICMP: dropped, and said so */
  udp_send (world.b, "refused-udp", NULL);
  g_assert_true (logged_soon ("egress refused: sandbox " ID_B " udp " INET ":5000"));
  g_assert_false (icmp_echo (world.b));
  g_assert_true (logged_soon ("egress refused: sandbox " ID_B " icmp " INET));

  /* a flood from b: the kernel passes 5 a second (10 at once) of it, the
   * log at most 20 lines a minute */
  before = box_nftables_plugin_get_refusals_read (world.plugin);
  start = g_get_monotonic_time ();
  for (guint i = 0; i < 400; i++)
    udp_send (world.b, "flood", NULL);
  g_usleep (300 * 1000);
  seconds = (g_get_monotonic_time () - start) / (double) G_USEC_PER_SEC;
  read = box_nftables_plugin_get_refusals_read (world.plugin) - before;
  g_test_message ("%u of 400 flooding datagrams read in %.2f s", read, seconds);
  g_assert_cmpuint (read, >=, 1);
  g_assert_cmpuint (read, <=, 10 + 5 * (guint) (seconds + 1));
  g_assert_cmpuint (logged_count ("box-nftables", "egress refused: sandbox " ID_B " "), <=,
                    BOX_NFTABLES_EGRESS_LOG_BURST);

  /* a's refusal, meanwhile, still shows */
  g_assert_cmpint (probe (world.a, INET, "9103", NULL, PROBE_ANSWER_S), ==, REFUSED);
  g_assert_true (logged_soon ("egress refused: sandbox " ID_A " tcp " INET ":9103"));

  set_rules (ID_A, none);
  set_rules (ID_B, none);
}
