/* nftables-netns-fair.c: the filtering resolver shared fairly between
 * sandboxes, in the test's private network namespace (nftables-netns-test.c
 * runs these; the setting is nftables-netns-policy.c's: a restricted
 * "sandbox" at 127.0.0.2, an unrestricted one at 127.0.0.3, this test as
 * the upstream).  One sandbox flooding the resolver with queries, or the
 * proxy with lookups for its connections, holds only its share; a slow
 * report of what a sandbox resolved (the plugin's nft transaction) holds up
 * only the answers that wait for it.
 */
#include "config.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "box-error.h"
#include "nftables-netns-test.h"
#include "nftables-netns-policy.h"

typedef void (*AskFunc) (guint i, gpointer data);

/* Has @ask ask for 1200 new names at once (the upstream never answers),
 * paced within the sockets' buffers; how many reached @upstream, which
 * must be the asker's share: 256 to 512 of the 1024. */
static guint
flood (int upstream, AskFunc ask, gpointer data, const char *who)
{
  guint8 buf[600];
  guint asked = 0;

  for (guint i = 0; i < 1200; i++) {
    ask (i, data);
    if (i % 20 == 19) {
      g_usleep (2000);
      while (readable_within (upstream, 0) && recv (upstream, buf, sizeof buf, 0) > 0)
        asked++;
    }
  }
  while (readable_within (upstream, 300) && recv (upstream, buf, sizeof buf, 0) > 0)
    asked++;
  g_test_message ("%s got %u of its 1200 names asked upstream", who, asked);
  g_assert_cmpuint (asked, >=, 256);
  g_assert_cmpuint (asked, <=, 512);
  return asked;
}

static void
ask_by_query (guint i, gpointer data)
{
  g_autofree char *name = g_strdup_printf ("f%u.allowed.test", i);

  send_query (GPOINTER_TO_INT (data), (guint16) i, name, LDNS_RR_TYPE_A);
}

typedef struct {
  BoxNftablesDns *dns;
  Seen           *seen;
} NodeAsk;

static void
ask_by_lookup (guint i, gpointer data)
{
  NodeAsk *ask = data;
  g_autofree char *name = g_strdup_printf ("n%u.allowed.test", i);

  box_nftables_dns_resolve_func (RESTRICTED, name, on_done, ask->seen, ask->dns);
}

/* A restricted sandbox asking for 1200 new allowed names at once (its
 * upstream never answers) holds at most its share of the lookups; its
 * neighbour's query is still relayed and answered. */
void
dns_restricted_flood (void)
{
  g_autoptr(BoxNftablesEgress) egress = box_nftables_egress_new ();
  g_autoptr(BoxEgressPolicy) policy = test_policy ();
  int upstream = socket_on (SOCK_DGRAM, 0x7f000001, 0);
  int flooder = socket_on (SOCK_DGRAM, RESTRICTED, 0);
  int neighbour = socket_on (SOCK_DGRAM, OPEN, 0);
  g_autoptr(BoxNftablesDns) dns = resolver_on (upstream, egress, policy);
  const char *answer[] = { "fair.test. 60 IN A 203.0.113.90", NULL };
  char *name = NULL;

  box_nftables_dns_allow (dns, RESTRICTED);   /* as the plugin does at attach */
  box_nftables_dns_allow (dns, OPEN);
  flood (upstream, ask_by_query, GINT_TO_POINTER (flooder), "the restricted flooder");

  send_query (neighbour, 0x0500, "fair.test", LDNS_RR_TYPE_A);
  name = upstream_answers (upstream, answer, WAIT_MS);
  g_assert_cmpstr (name, ==, "fair.test.");
  g_free (name);
  assert_answer (next_answer (neighbour, FALSE), 0x0500, LDNS_RCODE_NOERROR, "203.0.113.90",
                 NULL);
  close (upstream);
  close (flooder);
  close (neighbour);
}

/* The proxy's lookups for one sandbox's connections (1200 new names at
 * once, its upstream never answering) hold at most that sandbox's share;
 * a lookup for a neighbour's connection is still asked and answered. */
void
dns_node_lookup_flood (void)
{
  g_autoptr(BoxNftablesEgress) egress = box_nftables_egress_new ();
  g_autoptr(BoxEgressPolicy) policy = test_policy ();
  int upstream = socket_on (SOCK_DGRAM, 0x7f000001, 0);
  g_autoptr(BoxNftablesDns) dns = resolver_on (upstream, egress, policy);
  const char *answer[] = { "neighbour.allowed.test. 60 IN A 203.0.113.91", NULL };
  Seen flooded = { .lines = g_ptr_array_new_with_free_func (g_free) };
  Seen seen = { .lines = g_ptr_array_new_with_free_func (g_free) };
  NodeAsk ask = { dns, &flooded };
  guint asked;
  char *name = NULL;

  g_mutex_init (&flooded.lock);
  g_mutex_init (&seen.lock);
  box_nftables_dns_allow (dns, RESTRICTED);   /* as the plugin does at attach */
  box_nftables_dns_allow (dns, OPEN);
  asked = flood (upstream, ask_by_lookup, &ask, "the flooding sandbox's proxy");
  /* the others were refused at once, as for silent upstreams */
  g_assert_true (wait_done (&flooded, 1200 - asked));
  g_assert_error (flooded.done_error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);

  box_nftables_dns_resolve_func (OPEN, "neighbour.allowed.test", on_done, &seen, dns);
  name = upstream_answers (upstream, answer, WAIT_MS);
  g_assert_cmpstr (name, ==, "neighbour.allowed.test.");
  g_free (name);
  g_assert_true (wait_done (&seen, 1));
  g_assert_no_error (seen.done_error);
  g_assert_cmphex (seen.done_addr, ==, 0xCB00715B);

  g_clear_pointer (&dns, box_nftables_dns_free);   /* the flood's lookups end first */
  close (upstream);
  g_clear_error (&flooded.done_error);
  g_ptr_array_unref (flooded.lines);
  g_mutex_clear (&flooded.lock);
  g_ptr_array_unref (seen.lines);
  g_mutex_clear (&seen.lock);
}

/* ---- a slow report ---- */

typedef struct {
  GMutex lock;
  GCond  cond;
  gboolean open;
  guint  entered;
  guint32 order[300];   /* the guest of each report, in turn */
} Gate;

/* the plugin's side, stuck as behind its lock in a slow transaction */
static void
stuck_report (guint32 guest, const char *name, const guint32 *addrs, guint n, guint32 ttl,
              gpointer data)
{
  Gate *gate = data;

  g_mutex_lock (&gate->lock);
  if (gate->entered < G_N_ELEMENTS (gate->order))
    gate->order[gate->entered] = guest;
  gate->entered++;
  g_cond_broadcast (&gate->cond);
  while (!gate->open)
    g_cond_wait (&gate->cond, &gate->lock);
  g_mutex_unlock (&gate->lock);
}

static guint
gate_entered (Gate *gate)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&gate->lock);

  return gate->entered;
}

/* the rcodes of the answers on @fd until none comes for 300 ms */
static guint
count_rcode (int fd, ldns_pkt_rcode rcode, guint *others)
{
  guint8 buf[600];
  guint n = 0;
  gssize len;

  while (readable_within (fd, 300) && (len = recv (fd, buf, sizeof buf, 0)) > 0) {
    ldns_pkt *pkt = NULL;

    g_assert_cmpint (ldns_wire2pkt (&pkt, buf, (gsize) len), ==, LDNS_STATUS_OK);
    if (ldns_pkt_get_rcode (pkt) == rcode)
      n++;
    else
      (*others)++;
    ldns_pkt_free (pkt);
  }
  return n;
}

/* Gets a restricted sandbox's first answer of slow.allowed.test (the
 * upstream answers) stuck in its report, behind @gate. */
static void
get_stuck (Gate *gate, BoxNftablesEgress *egress, BoxNftablesDns *dns, int upstream,
           int client, guint16 id)
{
  const char *records[] = { "slow.allowed.test. 60 IN A 203.0.113.92", NULL };
  char *name;

  g_mutex_init (&gate->lock);
  g_cond_init (&gate->cond);
  box_nftables_dns_allow (dns, RESTRICTED);
  box_nftables_egress_set_resolved_func (egress, stuck_report, gate);
  send_query (client, id, "slow.allowed.test", LDNS_RR_TYPE_A);
  name = upstream_answers (upstream, records, WAIT_MS);
  g_assert_cmpstr (name, ==, "slow.allowed.test.");
  g_free (name);
  for (guint i = 0; i < WAIT_MS / 10 && gate_entered (gate) == 0; i++)
    g_usleep (10000);
  g_assert_cmpuint (gate_entered (gate), ==, 1);
}

static void
gate_open (Gate *gate)
{
  g_mutex_lock (&gate->lock);
  gate->open = TRUE;
  g_cond_broadcast (&gate->cond);
  g_mutex_unlock (&gate->lock);
}

/* While the report of a restricted sandbox's answer is stuck, the answer
 * waits (the kernel's elements are not in yet), but the resolver goes on:
 * a neighbour's query is relayed, a denied name REFUSED; the answers that
 * would wait are bounded (the sandbox's share of the queue, SERVFAIL
 * beyond); once the report is through the answer leaves. */
void
dns_report_stuck (void)
{
  g_autoptr(BoxNftablesEgress) egress = box_nftables_egress_new ();
  g_autoptr(BoxEgressPolicy) policy = test_policy ();
  int upstream = socket_on (SOCK_DGRAM, 0x7f000001, 0);
  int client = socket_on (SOCK_DGRAM, RESTRICTED, 0);
  int open_client = socket_on (SOCK_DGRAM, OPEN, 0);
  g_autoptr(BoxNftablesDns) dns = resolver_on (upstream, egress, policy);
  Gate gate = { 0 };
  guint8 buf[600];
  guint others = 0, servfail;

  box_nftables_dns_allow (dns, OPEN);
  get_stuck (&gate, egress, dns, upstream, client, 0x0700);
  g_assert_false (readable_within (client, 200));   /* not before its report */

  /* the resolver is not stuck with it */
  send_query (open_client, 0x0701, "other.test", LDNS_RR_TYPE_A);
  g_assert_true (readable_within (upstream, WAIT_MS));
  g_assert_cmpint (recv (upstream, buf, sizeof buf, 0), >, 12);
  send_query (client, 0x0702, "evil.test", LDNS_RR_TYPE_A);
  assert_answer (next_answer (client, FALSE), 0x0702, LDNS_RCODE_REFUSED, NULL, NULL);

  /* 200 more from the cache: 127 wait (its share of 256 is 128, one is
   * stuck), the rest SERVFAIL at once */
  for (guint i = 0; i < 200; i++) {
    send_query (client, (guint16) (0x1000 + i), "slow.allowed.test", LDNS_RR_TYPE_A);
    if (i % 20 == 19)
      g_usleep (2000);   /* within the sockets' buffers */
  }
  servfail = count_rcode (client, LDNS_RCODE_SERVFAIL, &others);
  g_assert_cmpuint (servfail, ==, 200 - 127);
  g_assert_cmpuint (others, ==, 0);
  g_assert_cmpuint (gate_entered (&gate), ==, 1);

  /* through: the first answer, then the ones that waited */
  gate_open (&gate);
  assert_answer (next_answer (client, FALSE), 0x0700, LDNS_RCODE_NOERROR, "203.0.113.92", NULL);
  g_assert_cmpuint (count_rcode (client, LDNS_RCODE_NOERROR, &others), ==, 127);
  g_assert_cmpuint (others, ==, 0);
  g_assert_cmpuint (gate_entered (&gate), ==, 128);

  g_clear_pointer (&dns, box_nftables_dns_free);
  close (upstream);
  close (client);
  close (open_client);
  g_cond_clear (&gate.cond);
  g_mutex_clear (&gate.lock);
}

/* Reports are taken round robin across sandboxes: with one sandbox's 20
 * answers waiting behind a stuck report, another sandbox's answer is the
 * next but one, not the 22nd. */
void
dns_report_round_robin (void)
{
  g_autoptr(BoxNftablesEgress) egress = box_nftables_egress_new ();
  g_autoptr(BoxEgressPolicy) policy = test_policy ();
  const guint32 second_addr = 0x7f000004;
  int upstream = socket_on (SOCK_DGRAM, 0x7f000001, 0);
  int client = socket_on (SOCK_DGRAM, RESTRICTED, 0);
  int second = socket_on (SOCK_DGRAM, second_addr, 0);
  g_autoptr(BoxNftablesDns) dns = resolver_on (upstream, egress, policy);
  const char *records[] = { "slow.allowed.test. 60 IN A 203.0.113.92", NULL };
  Gate gate = { 0 };
  guint others = 0;

  box_nftables_egress_set (egress, second_addr, "sb-second", policy);
  box_nftables_dns_allow (dns, second_addr);
  get_stuck (&gate, egress, dns, upstream, client, 0x0800);
  /* 20 more from the cache wait, then the other sandbox's (the resolver
   * reads its socket in order) */
  for (guint i = 0; i < 20; i++)
    send_query (client, (guint16) (0x0900 + i), "slow.allowed.test", LDNS_RR_TYPE_A);
  send_query (second, 0x0a00, "slow.allowed.test", LDNS_RR_TYPE_A);
  g_free (upstream_answers (upstream, records, 300));   /* in case it is asked again */
  g_assert_false (readable_within (second, 200));

  gate_open (&gate);
  g_assert_cmpuint (count_rcode (client, LDNS_RCODE_NOERROR, &others), ==, 21);
  g_assert_cmpuint (count_rcode (second, LDNS_RCODE_NOERROR, &others), ==, 1);
  g_assert_cmpuint (others, ==, 0);
  g_assert_cmpuint (gate_entered (&gate), ==, 22);
  g_assert_cmphex (gate.order[0], ==, RESTRICTED);
  g_assert_cmphex (gate.order[1], ==, RESTRICTED);
  g_assert_cmphex (gate.order[2], ==, second_addr);
  g_assert_cmphex (gate.order[3], ==, RESTRICTED);

  g_clear_pointer (&dns, box_nftables_dns_free);
  close (upstream);
  close (client);
  close (second);
  g_cond_clear (&gate.cond);
  g_mutex_clear (&gate.lock);
}
