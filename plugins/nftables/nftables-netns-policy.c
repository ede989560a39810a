/* nftables-netns-policy.c: the filtering resolver for restricted
 * sandboxes, in the test's private network namespace
 * (nftables-netns-test.c runs these).
 *
 * The resolver runs on its own on loopback with an egress registry: a
 * restricted "sandbox" at 127.0.0.2 (allowed: *.allowed.test on 80 and
 * 443, ssh.allowed.test on 22; denied: deny.allowed.test) and an
 * unrestricted one at 127.0.0.3.  Its upstream is this test (a UDP socket
 * it answers by hand, so it sees every query that reaches it), or, in
 * dns_restricted_world, the world's DNS server in the "internet".
 */
#include "config.h"

#include <arpa/inet.h>
#include <ldns/ldns.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "box-error.h"
#include "nftables-netns-test.h"
#include "nftables-netns-policy.h"


static void
on_resolved (guint32 guest, const char *name, const guint32 *addrs, guint n, guint32 ttl,
             gpointer data)
{
  Seen *seen = data;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&seen->lock);

  g_assert_cmphex (guest, ==, RESTRICTED);
  seen->resolved++;
  g_free (seen->name);
  seen->name = g_strdup (name);
  seen->addr = n > 0 ? addrs[0] : 0;
  seen->n_addrs = n;
  seen->ttl = ttl;
}

static void
on_log (const char *line, gpointer data)
{
  Seen *seen = data;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&seen->lock);

  g_ptr_array_add (seen->lines, g_strdup (line));
}

void
on_done (const guint32 *addrs, guint n, guint32 ttl, const GError *error, gpointer data)
{
  Seen *seen = data;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&seen->lock);

  seen->done++;
  seen->done_addr = n > 0 ? addrs[0] : 0;
  g_clear_error (&seen->done_error);
  seen->done_error = error != NULL ? g_error_copy (error) : NULL;
}

static guint
done_count (Seen *seen)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&seen->lock);

  return seen->done;
}

gboolean
wait_done (Seen *seen, guint count)
{
  for (guint i = 0; i < WAIT_MS / 10; i++) {
    if (done_count (seen) >= count)
      return TRUE;
    g_usleep (10000);
  }
  return FALSE;
}

BoxEgressPolicy *
test_policy (void)
{
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_autoptr(GError) error = NULL;
  BoxEgressPolicy *policy;
  BoxRule *rule;

  rule = g_new0 (BoxRule, 1);
  rule->allow = TRUE;
  rule->domain = g_strdup ("*.allowed.test");
  g_ptr_array_add (rules, rule);
  rule = g_new0 (BoxRule, 1);
  rule->allow = TRUE;
  rule->domain = g_strdup ("ssh.allowed.test");
  rule->ports = g_new (guint16, 1);
  rule->ports[0] = 22;
  rule->n_ports = 1;
  g_ptr_array_add (rules, rule);
  rule = g_new0 (BoxRule, 1);
  rule->domain = g_strdup ("deny.allowed.test");
  g_ptr_array_add (rules, rule);
  policy = box_egress_policy_new (rules, NULL, &error);
  g_assert_no_error (error);
  return policy;
}

int
socket_on (int type, guint32 address, guint16 port)
{
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons (port),
                             .sin_addr.s_addr = htonl (address) };
  int fd = socket (AF_INET, type | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &sin, sizeof sin), ==, 0);
  return fd;
}

gboolean
readable_within (int fd, int timeout_ms)
{
  struct pollfd pfd = { fd, POLLIN, 0 };

  return poll (&pfd, 1, timeout_ms) == 1;
}

/* A query of @type with @id for the name whose labels (length-prefixed,
 * without the root) are @labels. */
static GBytes *
query_bytes (guint16 id, const guint8 *labels, gsize labels_len, guint16 type)
{
  GByteArray *msg = g_byte_array_new ();
  const guint8 header[] = { id >> 8, id & 0xff, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
  const guint8 tail[] = { 0, type >> 8, type & 0xff, 0, 1 };   /* the root, type, IN */

  g_byte_array_append (msg, header, sizeof header);
  g_byte_array_append (msg, labels, labels_len);
  g_byte_array_append (msg, tail, sizeof tail);
  return g_byte_array_free_to_bytes (msg);
}

static GBytes *
query_for (guint16 id, const char *name, guint16 type)
{
  g_autoptr(GByteArray) labels = g_byte_array_new ();
  g_auto(GStrv) parts = g_strsplit (name, ".", -1);

  for (guint i = 0; parts[i] != NULL; i++) {
    guint8 n = (guint8) strlen (parts[i]);

    g_byte_array_append (labels, &n, 1);
    g_byte_array_append (labels, (const guint8 *) parts[i], n);
  }
  return query_bytes (id, labels->data, labels->len, type);
}

static void
send_bytes (int fd, GBytes *q)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (RES_PORT),
                            .sin_addr.s_addr = htonl (0x7f000001) };
  gsize len;
  const guint8 *data = g_bytes_get_data (q, &len);

  g_assert_cmpint (sendto (fd, data, len, 0, (struct sockaddr *) &to, sizeof to), ==,
                   (gssize) len);
}

void
send_query (int fd, guint16 id, const char *name, guint16 type)
{
  g_autoptr(GBytes) q = query_for (id, name, type);

  send_bytes (fd, q);
}

/* Answers the next query reaching the upstream with @records (text);
 * returns the name it asked for (NULL: none came within @timeout_ms). */
char *
upstream_answers (int upstream, const char *const *records, int timeout_ms)
{
  guint8 buf[1500];
  struct sockaddr_in from;
  socklen_t from_len = sizeof from;
  ldns_pkt *pkt = NULL;
  guint8 *wire = NULL;
  size_t size = 0;
  char *name;
  gssize n;

  if (!readable_within (upstream, timeout_ms))
    return NULL;
  n = recvfrom (upstream, buf, sizeof buf, 0, (struct sockaddr *) &from, &from_len);
  g_assert_cmpint (n, >, 12);
  g_assert_cmpint (ldns_wire2pkt (&pkt, buf, (gsize) n), ==, LDNS_STATUS_OK);
  name = ldns_rdf2str (ldns_rr_owner (ldns_rr_list_rr (ldns_pkt_question (pkt), 0)));
  ldns_pkt_set_qr (pkt, true);
  ldns_pkt_set_ra (pkt, true);
  for (guint i = 0; records != NULL && records[i] != NULL; i++) {
    ldns_rr *rr = NULL;

    g_assert_cmpint (ldns_rr_new_frm_str (&rr, records[i], 0, NULL, NULL), ==, LDNS_STATUS_OK);
    ldns_pkt_push_rr (pkt, LDNS_SECTION_ANSWER, rr);
  }
  g_assert_cmpint (ldns_pkt2wire (&wire, pkt, &size), ==, LDNS_STATUS_OK);
  g_assert_cmpint (sendto (upstream, wire, size, 0, (struct sockaddr *) &from, from_len), ==,
                   (gssize) size);
  LDNS_FREE (wire);
  ldns_pkt_free (pkt);
  {
    char *copy = g_strdup (name);   /* ldns's allocation, GLib's string */
    free (name);
    return copy;
  }
}

/* The name of the next query reaching @upstream, left unanswered (NULL:
 * none came within @timeout_ms). */
static char *
upstream_asked (int upstream, int timeout_ms)
{
  guint8 buf[1500];
  ldns_pkt *pkt = NULL;
  char *name;
  gssize n;

  if (!readable_within (upstream, timeout_ms))
    return NULL;
  n = recv (upstream, buf, sizeof buf, 0);
  g_assert_cmpint (n, >, 12);
  g_assert_cmpint (ldns_wire2pkt (&pkt, buf, (gsize) n), ==, LDNS_STATUS_OK);
  name = ldns_rdf2str (ldns_rr_owner (ldns_rr_list_rr (ldns_pkt_question (pkt), 0)));
  ldns_pkt_free (pkt);
  {
    char *copy = g_strdup (name);   /* ldns's allocation, GLib's string */
    free (name);
    return copy;
  }
}

/* The next answer on @fd (UDP, or TCP when @tcp); NULL when none came. */
ldns_pkt *
next_answer (int fd, gboolean tcp)
{
  guint8 buf[1500];
  ldns_pkt *pkt = NULL;
  gssize n;

  if (!readable_within (fd, WAIT_MS))
    return NULL;
  if (tcp) {
    guint8 prefix[2];

    g_assert_cmpint (recv (fd, prefix, 2, MSG_WAITALL), ==, 2);
    n = recv (fd, buf, (prefix[0] << 8) | prefix[1], MSG_WAITALL);
  } else {
    n = recv (fd, buf, sizeof buf, 0);
  }
  g_assert_cmpint (n, >=, 12);
  g_assert_cmpint (ldns_wire2pkt (&pkt, buf, (gsize) n), ==, LDNS_STATUS_OK);
  return pkt;
}

/* Asserts @pkt's RCODE and first A record (NULL: no records at all). */
void
assert_answer (ldns_pkt *pkt, guint16 id, ldns_pkt_rcode rcode, const char *a, guint32 *ttl)
{
  ldns_rr_list *answer;

  g_assert_nonnull (pkt);
  g_assert_cmphex (ldns_pkt_id (pkt), ==, id);
  g_assert_cmpint (ldns_pkt_get_rcode (pkt), ==, rcode);
  answer = ldns_pkt_answer (pkt);
  if (a == NULL) {
    g_assert_cmpuint (ldns_rr_list_rr_count (answer), ==, 0);
  } else {
    ldns_rr *rr = ldns_rr_list_rr (answer, 0);
    char *str;

    g_assert_nonnull (rr);
    g_assert_cmpint (ldns_rr_get_type (rr), ==, LDNS_RR_TYPE_A);
    str = ldns_rdf2str (ldns_rr_rdf (rr, 0));
    g_assert_cmpstr (str, ==, a);
    free (str);
    if (ttl != NULL)
      *ttl = ldns_rr_ttl (rr);
  }
  ldns_pkt_free (pkt);
}

static gboolean
logged (Seen *seen, const char *needle)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&seen->lock);

  for (guint i = 0; i < seen->lines->len; i++)
    if (strstr (g_ptr_array_index (seen->lines, i), needle) != NULL)
      return TRUE;
  return FALSE;
}

/* Through the restricted sandbox's eyes, over UDP. */
static void
restricted_udp (int client, int upstream, Seen *seen)
{
  const char *www[] = { "www.allowed.test. 60 IN A 203.0.113.80", NULL };
  const char *rebind[] = { "rebind.allowed.test. 60 IN A 203.0.113.9",
                           "rebind.allowed.test. 60 IN A 10.1.2.3", NULL };
  const char *brief[] = { "brief.allowed.test. 0 IN A 203.0.113.81", NULL };
  guint8 longname[300];
  gsize off = 0;
  char *asked;
  guint32 ttl = 0;

  /* an allowed name: asked upstream once, reported before it is answered */
  send_query (client, 0x0101, "www.allowed.test", LDNS_RR_TYPE_A);
  asked = upstream_answers (upstream, www, WAIT_MS);
  g_assert_cmpstr (asked, ==, "www.allowed.test.");
  g_free (asked);
  assert_answer (next_answer (client, FALSE), 0x0101, LDNS_RCODE_NOERROR, "203.0.113.80", &ttl);
  g_assert_cmpuint (ttl, ==, 60);
  g_mutex_lock (&seen->lock);
  g_assert_cmpuint (seen->resolved, ==, 1);
  g_assert_cmpstr (seen->name, ==, "www.allowed.test");
  g_assert_cmphex (seen->addr, ==, 0xCB007150);
  g_assert_cmpuint (seen->ttl, ==, 60);
  g_mutex_unlock (&seen->lock);

  /* again, in other letters: from the cache, the upstream sees nothing */
  send_query (client, 0x0102, "WWW.Allowed.TEST", LDNS_RR_TYPE_A);
  assert_answer (next_answer (client, FALSE), 0x0102, LDNS_RCODE_NOERROR, "203.0.113.80", &ttl);
  g_assert_cmpuint (ttl, <=, 60);
  g_assert_cmpuint (ttl, >=, 55);
  g_assert_null (upstream_answers (upstream, NULL, 300));
  g_mutex_lock (&seen->lock);
  g_assert_cmpuint (seen->resolved, ==, 2);
  g_mutex_unlock (&seen->lock);

  /* names the rules do not resolve: REFUSED, logged, never asked */
  send_query (client, 0x0103, "evil.test", LDNS_RR_TYPE_A);
  assert_answer (next_answer (client, FALSE), 0x0103, LDNS_RCODE_REFUSED, NULL, NULL);
  send_query (client, 0x0104, "deny.allowed.test", LDNS_RR_TYPE_A);
  assert_answer (next_answer (client, FALSE), 0x0104, LDNS_RCODE_REFUSED, NULL, NULL);
  g_assert_null (upstream_answers (upstream, NULL, 300));
  g_assert_true (logged (seen, "sb-restricted dns evil.test"));
  g_assert_true (logged (seen, "sb-restricted dns deny.allowed.test"));
  /* a name allowed on port 22 only still resolves */
  send_query (client, 0x0105, "ssh.allowed.test", LDNS_RR_TYPE_A);
  asked = upstream_answers (upstream, (const char *[]) { "ssh.allowed.test. 30 IN A 203.0.113.22",
                                                         NULL }, WAIT_MS);
  g_assert_cmpstr (asked, ==, "ssh.allowed.test.");
  g_free (asked);
  assert_answer (next_answer (client, FALSE), 0x0105, LDNS_RCODE_NOERROR, "203.0.113.22", NULL);

  /* ANY, AXFR, another class, a name longer than DNS allows: REFUSED */
  send_query (client, 0x0106, "www.allowed.test", LDNS_RR_TYPE_ANY);
  assert_answer (next_answer (client, FALSE), 0x0106, LDNS_RCODE_REFUSED, NULL, NULL);
  send_query (client, 0x0107, "www.allowed.test", LDNS_RR_TYPE_AXFR);
  assert_answer (next_answer (client, FALSE), 0x0107, LDNS_RCODE_REFUSED, NULL, NULL);
  /* 3 labels of 63, one of 50, allowed.test: 257 octets with the root */
  for (guint i = 0; i < 4; i++) {
    longname[off++] = i < 3 ? 63 : 50;
    memset (longname + off, 'a', longname[off - 1]);
    off += longname[off - 1];
  }
  memcpy (longname + off, "\x07" "allowed" "\x04" "test", 13);
  off += 13;
  {
    g_autoptr(GBytes) q = query_bytes (0x0108, longname, off, LDNS_RR_TYPE_A);

    send_bytes (client, q);
  }
  {
    ldns_pkt *pkt = next_answer (client, FALSE);
    guint8 rcode;

    g_assert_nonnull (pkt);
    rcode = ldns_pkt_get_rcode (pkt);
    ldns_pkt_free (pkt);
    g_assert_cmpuint (rcode, ==, LDNS_RCODE_REFUSED);
    g_assert_false (logged (seen, "aaaaaaaa"));   /* refused before any rule was asked */
  }

  /* AAAA and other types of an allowed name: NOERROR, no records */
  send_query (client, 0x0109, "www.allowed.test", LDNS_RR_TYPE_AAAA);
  assert_answer (next_answer (client, FALSE), 0x0109, LDNS_RCODE_NOERROR, NULL, NULL);
  send_query (client, 0x010a, "www.allowed.test", LDNS_RR_TYPE_TXT);
  assert_answer (next_answer (client, FALSE), 0x010a, LDNS_RCODE_NOERROR, NULL, NULL);
  g_assert_null (upstream_answers (upstream, NULL, 300));

  /* rebinding: one internal address in the answer, and nothing of it
   * reaches the sandbox or the registry; asked again next time */
  for (guint16 id = 0x010b; id <= 0x010c; id++) {
    send_query (client, id, "rebind.allowed.test", LDNS_RR_TYPE_A);
    asked = upstream_answers (upstream, rebind, WAIT_MS);
    g_assert_cmpstr (asked, ==, "rebind.allowed.test.");
    g_free (asked);
    assert_answer (next_answer (client, FALSE), id, LDNS_RCODE_REFUSED, NULL, NULL);
  }
  g_mutex_lock (&seen->lock);
  g_assert_cmpuint (seen->resolved, ==, 3);   /* www twice, ssh */
  g_mutex_unlock (&seen->lock);

  /* a TTL of 0 is held for the minimum */
  send_query (client, 0x010d, "brief.allowed.test", LDNS_RR_TYPE_A);
  g_free (upstream_answers (upstream, brief, WAIT_MS));
  assert_answer (next_answer (client, FALSE), 0x010d, LDNS_RCODE_NOERROR, "203.0.113.81", &ttl);
  g_assert_cmpuint (ttl, ==, 5);

  /* 32 addresses: as many as fit 512 bytes are told, and reported */
  {
    g_autoptr(GPtrArray) many = g_ptr_array_new_with_free_func (g_free);
    ldns_pkt *pkt;
    guint8 *wire = NULL;
    size_t size = 0;

    for (guint i = 0; i < 32; i++)
      g_ptr_array_add (many, g_strdup_printf ("many.allowed.test. 60 IN A 203.0.113.%u", 100 + i));
    g_ptr_array_add (many, NULL);
    send_query (client, 0x010e, "many.allowed.test", LDNS_RR_TYPE_A);
    g_free (upstream_answers (upstream, (const char *const *) many->pdata, WAIT_MS));
    pkt = next_answer (client, FALSE);
    g_assert_nonnull (pkt);
    g_assert_cmpint (ldns_pkt2wire (&wire, pkt, &size), ==, LDNS_STATUS_OK);
    g_assert_cmpuint (size, <=, 512);
    g_assert_cmpuint (ldns_pkt_ancount (pkt), ==, 29);
    g_mutex_lock (&seen->lock);
    g_assert_cmpuint (seen->n_addrs, ==, 29);
    g_mutex_unlock (&seen->lock);
    LDNS_FREE (wire);
    ldns_pkt_free (pkt);
  }
}

/* The same resolver over TCP. */
static void
restricted_tcp (int upstream)
{
  const char *records[] = { "tcp.allowed.test. 60 IN A 203.0.113.82", NULL };
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (RES_PORT),
                            .sin_addr.s_addr = htonl (0x7f000001) };
  int fd = socket_on (SOCK_STREAM, RESTRICTED, 0);
  const char *names[] = { "www.allowed.test", "evil.test", "tcp.allowed.test" };
  const guint16 types[] = { LDNS_RR_TYPE_AXFR, LDNS_RR_TYPE_A, LDNS_RR_TYPE_A };

  g_assert_cmpint (connect (fd, (struct sockaddr *) &to, sizeof to), ==, 0);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++) {
    g_autoptr(GBytes) q = query_for (0x0200 + i, names[i], types[i]);
    gsize len;
    const guint8 *data = g_bytes_get_data (q, &len);
    guint8 prefix[2] = { 0, (guint8) len };

    g_assert_cmpint (send (fd, prefix, 2, 0), ==, 2);
    g_assert_cmpint (send (fd, data, len, 0), ==, (gssize) len);
    if (i < 2) {
      assert_answer (next_answer (fd, TRUE), 0x0200 + i, LDNS_RCODE_REFUSED, NULL, NULL);
    } else {
      g_autofree char *asked = upstream_answers (upstream, records, WAIT_MS);

      g_assert_cmpstr (asked, ==, "tcp.allowed.test.");
      assert_answer (next_answer (fd, TRUE), 0x0200 + i, LDNS_RCODE_NOERROR, "203.0.113.82",
                     NULL);
    }
  }
  close (fd);
}

/* The node's own resolution (the proxy's), through the same cache. */
static void
node_resolution (BoxNftablesDns *dns, BoxNftablesEgress *egress, int upstream, Seen *seen)
{
  const char *node[] = { "node.allowed.test. 60 IN CNAME edge.cdn.test.",
                         "edge.cdn.test. 60 IN A 203.0.113.83", NULL };
  const char *internal[] = { "inside.allowed.test. 60 IN A 169.254.169.254", NULL };
  g_autofree char *asked = NULL;

  box_nftables_dns_resolve_func (RESTRICTED, "Node.Allowed.Test.", on_done, seen, dns);
  asked = upstream_answers (upstream, node, WAIT_MS);
  g_assert_cmpstr (asked, ==, "node.allowed.test.");
  g_assert_true (wait_done (seen, 1));
  g_assert_no_error (seen->done_error);
  g_assert_cmphex (seen->done_addr, ==, 0xCB007153);

  /* cached: done at once, through the registry as the proxy calls it */
  box_nftables_egress_set_resolver (egress, box_nftables_dns_resolve_func, dns);
  box_nftables_egress_resolve (egress, RESTRICTED, "node.allowed.test", on_done, seen);
  g_assert_cmpuint (done_count (seen), ==, 2);
  g_assert_cmphex (seen->done_addr, ==, 0xCB007153);
  g_assert_null (upstream_answers (upstream, NULL, 300));

  /* an internal address is an error; so is a name that is no host name */
  box_nftables_dns_resolve_func (RESTRICTED, "inside.allowed.test", on_done, seen, dns);
  g_free (upstream_answers (upstream, internal, WAIT_MS));
  g_assert_true (wait_done (seen, 3));
  g_assert_error (seen->done_error, BOX_ERROR, BOX_ERROR_PERMISSION_DENIED);
  box_nftables_dns_resolve_func (RESTRICTED, "a b.test", on_done, seen, dns);
  g_assert_cmpuint (done_count (seen), ==, 4);
  g_assert_error (seen->done_error, BOX_ERROR, BOX_ERROR_INVALID);
}

/* A resolver on RES_PORT asking @upstream (a socket on loopback), with
 * @egress: the restricted sandbox with the test policy, and the open one. */
BoxNftablesDns *
resolver_on (int upstream, BoxNftablesEgress *egress, BoxEgressPolicy *policy)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *upstream_str = NULL;
  struct sockaddr_in sin;
  socklen_t sin_len = sizeof sin;
  BoxNftablesDns *dns;

  g_assert_cmpint (getsockname (upstream, (struct sockaddr *) &sin, &sin_len), ==, 0);
  upstream_str = g_strdup_printf ("127.0.0.1:%u", ntohs (sin.sin_port));
  dns = box_nftables_dns_new (RES_PORT, (const char *[]) { upstream_str, NULL }, NULL, &error);
  g_assert_no_error (error);
  box_nftables_egress_set (egress, RESTRICTED, "sb-restricted", policy);
  box_nftables_egress_set (egress, OPEN, "sb-open", NULL);
  box_nftables_dns_set_egress (dns, egress);
  return dns;
}

void
dns_restricted (void)
{
  g_autoptr(BoxNftablesEgress) egress = box_nftables_egress_new ();
  g_autoptr(BoxEgressPolicy) policy = test_policy ();
  int upstream = socket_on (SOCK_DGRAM, 0x7f000001, 0);
  int client = socket_on (SOCK_DGRAM, RESTRICTED, 0);
  int open_client = socket_on (SOCK_DGRAM, OPEN, 0);
  BoxNftablesDns *dns = resolver_on (upstream, egress, policy);
  Seen seen = { .lines = g_ptr_array_new_with_free_func (g_free) };

  g_mutex_init (&seen.lock);
  box_nftables_egress_set_resolved_func (egress, on_resolved, &seen);
  box_nftables_egress_set_log_func (egress, on_log, &seen);

  restricted_udp (client, upstream, &seen);
  restricted_tcp (upstream);
  node_resolution (dns, egress, upstream, &seen);

  /* an unrestricted sandbox's query is relayed as it is (its own ID) */
  send_query (open_client, 0x0301, "evil.test", LDNS_RR_TYPE_A);
  {
    guint8 buf[600];
    g_assert_true (readable_within (upstream, WAIT_MS));
    g_assert_cmpint (recv (upstream, buf, sizeof buf, 0), >, 12);
    g_assert_cmphex ((buf[0] << 8) | buf[1], ==, 0x0301);
  }

  /* lookups in flight when the resolver stops: the node's is done, once,
   * with an error; a TCP worker waiting for one lets go, closing */
  box_nftables_dns_resolve_func (RESTRICTED, "late.allowed.test", on_done, &seen, dns);
  {
    g_autofree char *late = upstream_asked (upstream, WAIT_MS);

    g_assert_cmpstr (late, ==, "late.allowed.test.");
  }
  {
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (RES_PORT),
                              .sin_addr.s_addr = htonl (0x7f000001) };
    int tcp = socket_on (SOCK_STREAM, RESTRICTED, 0);
    g_autoptr(GBytes) q = query_for (0x0400, "tcp-late.allowed.test", LDNS_RR_TYPE_A);
    gsize len;
    const guint8 *data = g_bytes_get_data (q, &len);
    guint8 prefix[2] = { 0, (guint8) len };
    guint8 buf[600];
    g_autofree char *asked = NULL;
    gint64 start;

    g_assert_cmpint (connect (tcp, (struct sockaddr *) &to, sizeof to), ==, 0);
    g_assert_cmpint (send (tcp, prefix, 2, 0), ==, 2);
    g_assert_cmpint (send (tcp, data, len, 0), ==, (gssize) len);
    asked = upstream_asked (upstream, WAIT_MS);
    g_assert_cmpstr (asked, ==, "tcp-late.allowed.test.");   /* its worker waits for it */
    start = g_get_monotonic_time ();
    box_nftables_dns_free (dns);
    g_assert_cmpint (g_get_monotonic_time () - start, <, G_USEC_PER_SEC);
    g_assert_true (readable_within (tcp, WAIT_MS));
    g_assert_cmpint (recv (tcp, buf, sizeof buf, 0), <=, 0);
    close (tcp);
  }
  g_assert_cmpuint (done_count (&seen), ==, 5);
  g_assert_nonnull (seen.done_error);

  close (upstream);
  close (client);
  close (open_client);
  g_clear_error (&seen.done_error);
  g_free (seen.name);
  g_ptr_array_unref (seen.lines);
  g_mutex_clear (&seen.lock);
}

/* With the world's DNS server in the "internet" as upstream, over UDP
 * and TCP: an allowed name answered, a denied one and a rebinding one
 * (the server answers "internal.*" with a public and a 10/8 address)
 * REFUSED. */
void
dns_restricted_world (void)
{
  g_autoptr(BoxNftablesEgress) egress = box_nftables_egress_new ();
  g_autoptr(BoxEgressPolicy) policy = test_policy ();
  g_autoptr(BoxNftablesDns) dns = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *port = g_strdup_printf ("%u", WORLD_PORT);

  dns = box_nftables_dns_new (WORLD_PORT, (const char *[]) { "203.0.113.1", NULL }, NULL, &error);
  g_assert_no_error (error);
  box_nftables_egress_set (egress, 0x7f000001, "sb-world", policy);
  box_nftables_dns_set_egress (dns, egress);
  for (guint i = 0; i < 2; i++) {
    const char *proto = i == 0 ? "udp" : "tcp";
    g_autofree char *allowed = NULL;
    g_autofree char *denied = NULL;
    g_autofree char *rebinding = NULL;
    int status;

    allowed = dns_query_within (NULL, "127.0.0.1", port, i == 0 ? "a.allowed.test"
                                : "b.allowed.test", proto, 5, &status);
    g_assert_cmpint (status, ==, 0);
    g_assert_cmpstr (allowed, ==, "203.0.113.80");
    denied = dns_query_within (NULL, "127.0.0.1", port, "example.test", proto, 5, &status);
    g_assert_cmpint (status, ==, 1);
    g_assert_cmpstr (denied, ==, "no answer (rcode 5)");
    rebinding = dns_query_within (NULL, "127.0.0.1", port, "internal.allowed.test", proto, 5,
                                  &status);
    g_assert_cmpint (status, ==, 1);
    g_assert_cmpstr (rebinding, ==, "no answer (rcode 5)");
  }
}
