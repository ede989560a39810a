/* nftables-dns-test.c: the filtering resolver's pure parts: reading a
 * restricted sandbox's query, building its answers and the resolver's own
 * upstream queries, reading an upstream's answer, and the TTL cache.
 * Messages are made with libldns (text records) or by hand where libldns
 * would refuse to make them (over-long names, odd bytes). */
#include "config.h"

#include <ldns/ldns.h>
#include <string.h>

#include "box-nftables-dns.h"
#include "box-nftables-dns-cache.h"

/* A query for @name (presentation form) of @type and @klass, as wire. */
static GBytes *
query_for (const char *name, ldns_rr_type type, ldns_rr_class klass)
{
  ldns_pkt *pkt = NULL;
  guint8 *wire = NULL;
  size_t size = 0;
  GBytes *bytes;

  g_assert_cmpint (ldns_pkt_query_new_frm_str (&pkt, name, type, klass, LDNS_RD), ==,
                   LDNS_STATUS_OK);
  ldns_pkt_set_id (pkt, 0x1234);
  g_assert_cmpint (ldns_pkt2wire (&wire, pkt, &size), ==, LDNS_STATUS_OK);
  bytes = g_bytes_new (wire, size);
  LDNS_FREE (wire);
  ldns_pkt_free (pkt);
  return bytes;
}

/* Reads @bytes as a query; its rcode (or -1 when it is no query). */
static int
read_rcode (GBytes *bytes, char **name)
{
  BoxNftablesDnsQuestion q;
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);
  int rcode;

  if (!box_nftables_dns_read_query (data, len, &q))
    return -1;
  rcode = q.rcode;
  if (name != NULL)
    *name = g_strdup (q.name);
  box_nftables_dns_question_clear (&q);
  return rcode;
}

/* A hand-made query with one question: @labels (length-prefixed, ending
 * with the root), type A class IN. */
static GBytes *
raw_query (const guint8 *labels, gsize n)
{
  GByteArray *msg = g_byte_array_new ();
  const guint8 header[] = { 0x12, 0x34, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
  const guint8 tail[] = { 0, 1, 0, 1 };

  g_byte_array_append (msg, header, sizeof header);
  g_byte_array_append (msg, labels, n);
  g_byte_array_append (msg, tail, sizeof tail);
  return g_byte_array_free_to_bytes (msg);
}

static void
test_read_query (void)
{
  g_autoptr(GBytes) q = NULL;
  g_autofree char *name = NULL;
  guint8 buf[400];
  gsize off = 0;

  q = query_for ("WWW.Example.COM.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
  g_assert_cmpint (read_rcode (q, &name), ==, LDNS_RCODE_NOERROR);
  g_assert_cmpstr (name, ==, "www.example.com");
  g_clear_pointer (&q, g_bytes_unref);
  g_clear_pointer (&name, g_free);
  q = query_for ("_sip._tcp.example.com.", LDNS_RR_TYPE_AAAA, LDNS_RR_CLASS_IN);
  g_assert_cmpint (read_rcode (q, &name), ==, LDNS_RCODE_NOERROR);
  g_assert_cmpstr (name, ==, "_sip._tcp.example.com");
  g_clear_pointer (&q, g_bytes_unref);
  g_clear_pointer (&name, g_free);

  /* refused: ANY, zone transfers, another class */
  q = query_for ("example.com.", LDNS_RR_TYPE_ANY, LDNS_RR_CLASS_IN);
  g_assert_cmpint (read_rcode (q, NULL), ==, LDNS_RCODE_REFUSED);
  g_clear_pointer (&q, g_bytes_unref);
  q = query_for ("example.com.", LDNS_RR_TYPE_AXFR, LDNS_RR_CLASS_IN);
  g_assert_cmpint (read_rcode (q, NULL), ==, LDNS_RCODE_REFUSED);
  g_clear_pointer (&q, g_bytes_unref);
  q = query_for ("example.com.", LDNS_RR_TYPE_IXFR, LDNS_RR_CLASS_IN);
  g_assert_cmpint (read_rcode (q, NULL), ==, LDNS_RCODE_REFUSED);
  g_clear_pointer (&q, g_bytes_unref);
  q = query_for ("version.bind.", LDNS_RR_TYPE_TXT, LDNS_RR_CLASS_CH);
  g_assert_cmpint (read_rcode (q, NULL), ==, LDNS_RCODE_REFUSED);
  g_clear_pointer (&q, g_bytes_unref);
  /* the root, a name with a byte that is not a host name's */
  q = query_for (".", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
  g_assert_cmpint (read_rcode (q, NULL), ==, LDNS_RCODE_REFUSED);
  g_clear_pointer (&q, g_bytes_unref);
  q = raw_query ((const guint8 *) "\x08x.github\x03" "com\0", 14);
  g_assert_cmpint (read_rcode (q, NULL), ==, LDNS_RCODE_REFUSED);
  g_clear_pointer (&q, g_bytes_unref);
  q = raw_query ((const guint8 *) "\x03" "a\0b\x03" "com\0", 9);
  g_assert_cmpint (read_rcode (q, NULL), ==, LDNS_RCODE_REFUSED);
  g_clear_pointer (&q, g_bytes_unref);

  /* longer than DNS allows: 4 labels of 63 (256 octets with the root) */
  for (guint i = 0; i < 4; i++) {
    buf[off++] = 63;
    memset (buf + off, 'a', 63);
    off += 63;
  }
  buf[off++] = 0;
  q = raw_query (buf, off);
  g_assert_cmpint (read_rcode (q, NULL), ==, LDNS_RCODE_REFUSED);
  g_clear_pointer (&q, g_bytes_unref);
  /* the longest there is passes: 3 labels of 63 and one of 61 (255) */
  buf[3 * 64] = 61;
  buf[3 * 64 + 62] = 0;
  q = raw_query (buf, 3 * 64 + 63);
  g_assert_cmpint (read_rcode (q, &name), ==, LDNS_RCODE_NOERROR);
  g_assert_cmpuint (strlen (name), ==, 253);
  g_clear_pointer (&q, g_bytes_unref);

  /* two questions, garbage: FORMERR; an answer, a runt: nothing at all */
  {
    g_autoptr(GBytes) one = query_for ("example.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
    gsize len = g_bytes_get_size (one);
    g_autofree guint8 *two = g_memdup2 (g_bytes_get_data (one, NULL), len);

    two[5] = 2;
    q = g_bytes_new (two, len);
    g_assert_cmpint (read_rcode (q, NULL), ==, LDNS_RCODE_FORMERR);
    g_clear_pointer (&q, g_bytes_unref);
    two[5] = 1;
    two[2] |= 0x80;
    q = g_bytes_new (two, len);
    g_assert_cmpint (read_rcode (q, NULL), ==, -1);
    g_clear_pointer (&q, g_bytes_unref);
    two[2] &= 0x7f;
    two[2] |= 0x28;   /* opcode 5, UPDATE */
    q = g_bytes_new (two, len);
    g_assert_cmpint (read_rcode (q, NULL), ==, LDNS_RCODE_NOTIMPL);
    g_clear_pointer (&q, g_bytes_unref);
    q = g_bytes_new (two, 11);
    g_assert_cmpint (read_rcode (q, NULL), ==, -1);
    g_clear_pointer (&q, g_bytes_unref);
    two[2] = 0x01;
    q = g_bytes_new (two, len - 2);
    g_assert_cmpint (read_rcode (q, NULL), ==, LDNS_RCODE_FORMERR);
    g_clear_pointer (&q, g_bytes_unref);
  }
}

/* An upstream's answer to "@name A": @records in presentation form. */
static GBytes *
answer_of (const char *name, ldns_pkt_rcode rcode, const char *const *records,
           const char *const *authority)
{
  ldns_pkt *pkt = NULL;
  guint8 *wire = NULL;
  size_t size = 0;
  GBytes *bytes;

  g_assert_cmpint (ldns_pkt_query_new_frm_str (&pkt, name, LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN,
                                               LDNS_RD), ==, LDNS_STATUS_OK);
  ldns_pkt_set_qr (pkt, true);
  ldns_pkt_set_ra (pkt, true);
  ldns_pkt_set_rcode (pkt, rcode);
  for (guint s = 0; s < 2; s++) {
    const char *const *list = s == 0 ? records : authority;

    for (guint i = 0; list != NULL && list[i] != NULL; i++) {
      ldns_rr *rr = NULL;

      g_assert_cmpint (ldns_rr_new_frm_str (&rr, list[i], 0, NULL, NULL), ==, LDNS_STATUS_OK);
      ldns_pkt_push_rr (pkt, s == 0 ? LDNS_SECTION_ANSWER : LDNS_SECTION_AUTHORITY, rr);
    }
  }
  g_assert_cmpint (ldns_pkt2wire (&wire, pkt, &size), ==, LDNS_STATUS_OK);
  bytes = g_bytes_new (wire, size);
  LDNS_FREE (wire);
  ldns_pkt_free (pkt);
  return bytes;
}

static gboolean
read_answer (GBytes *bytes, const char *name, BoxNftablesDnsResult *r)
{
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);

  return box_nftables_dns_read_answer (data, len, name, r);
}

static void
test_read_answer (void)
{
  const char *chain[] = { "www.example.com. 300 IN CNAME edge.cdn.test.",
                          "edge.cdn.test. 60 IN A 192.0.2.1",
                          "edge.cdn.test. 90 IN A 192.0.2.2",
                          "other.test. 10 IN A 192.0.2.9",   /* not on the way */
                          NULL };
  const char *soa[] = { "example.com. 900 IN SOA ns.example.com. h.example.com. 1 2 3 4 120",
                        NULL };
  g_autoptr(GBytes) answer = NULL;
  BoxNftablesDnsResult r;

  answer = answer_of ("www.example.com.", LDNS_RCODE_NOERROR, chain, NULL);
  g_assert_true (read_answer (answer, "www.example.com", &r));
  g_assert_cmpuint (r.rcode, ==, 0);
  g_assert_cmpuint (r.n_addrs, ==, 2);
  g_assert_cmphex (r.addrs[0], ==, 0xC0000201);
  g_assert_cmphex (r.addrs[1], ==, 0xC0000202);
  g_assert_cmpuint (r.ttl, ==, 60);
  /* the answer to another question is not ours */
  g_assert_false (read_answer (answer, "example.com", &r));
  g_clear_pointer (&answer, g_bytes_unref);

  /* negative answers: the SOA's TTL, at most its minimum */
  answer = answer_of ("nx.example.com.", LDNS_RCODE_NXDOMAIN, NULL, soa);
  g_assert_true (read_answer (answer, "nx.example.com", &r));
  g_assert_cmpuint (r.rcode, ==, LDNS_RCODE_NXDOMAIN);
  g_assert_cmpuint (r.n_addrs, ==, 0);
  g_assert_cmpuint (r.ttl, ==, 120);
  g_clear_pointer (&answer, g_bytes_unref);

  /* a query is no answer; garbage is nothing */
  answer = query_for ("www.example.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
  g_assert_false (read_answer (answer, "www.example.com", &r));
  g_assert_false (box_nftables_dns_read_answer ((const guint8 *) "\1\2\3", 3, "x", &r));
}

static void
test_build (void)
{
  g_autoptr(GBytes) query = NULL;
  g_autoptr(GBytes) answer = NULL;
  BoxNftablesDnsQuestion q = { 0 };
  BoxNftablesDnsResult r;
  const guint32 addrs[] = { 0xCB007150, 0xCB007151 };
  const guint8 *data;
  gsize len;
  guint16 id = 0;

  /* the resolver's own query: one A question with EDNS0 */
  query = box_nftables_dns_build_query ("www.example.com", &id);
  data = g_bytes_get_data (query, &len);
  g_assert_cmphex ((data[0] << 8) | data[1], ==, id);
  g_assert_true (box_nftables_dns_read_query (data, len, &q));
  g_assert_cmpuint (q.rcode, ==, 0);
  g_assert_cmpuint (q.qtype, ==, LDNS_RR_TYPE_A);
  g_assert_cmpstr (q.name, ==, "www.example.com");
  g_assert_true (q.rd);
  g_assert_cmpuint (data[11], ==, 1);   /* the OPT record */

  /* the sandbox's answer: its ID, its question, the records */
  answer = box_nftables_dns_build_answer (&q, 0, addrs, 2, 42);
  g_assert_true (read_answer (answer, "www.example.com", &r));
  g_assert_cmpuint (r.n_addrs, ==, 2);
  g_assert_cmphex (r.addrs[1], ==, 0xCB007151);
  g_assert_cmpuint (r.ttl, ==, 42);
  data = g_bytes_get_data (answer, &len);
  g_assert_cmphex ((data[0] << 8) | data[1], ==, id);
  g_assert_cmphex (data[2] & 0x81, ==, 0x81);   /* QR, RD */
  g_clear_pointer (&answer, g_bytes_unref);
  answer = box_nftables_dns_build_answer (&q, LDNS_RCODE_REFUSED, NULL, 0, 0);
  data = g_bytes_get_data (answer, &len);
  g_assert_cmpuint (data[3] & 0x0f, ==, LDNS_RCODE_REFUSED);
  g_assert_cmpuint (data[5], ==, 1);
  g_assert_cmpuint (data[7], ==, 0);
  box_nftables_dns_question_clear (&q);
  g_clear_pointer (&answer, g_bytes_unref);
  /* without a readable question: the header alone */
  q.id = 7;
  answer = box_nftables_dns_build_answer (&q, LDNS_RCODE_FORMERR, NULL, 0, 0);
  data = g_bytes_get_data (answer, &len);
  g_assert_cmpuint (len, ==, 12);
  g_assert_cmpuint (data[1], ==, 7);
  g_assert_cmpuint (data[3] & 0x0f, ==, LDNS_RCODE_FORMERR);
}

static void
test_cache (void)
{
  g_autoptr(BoxNftablesDnsCache) cache = box_nftables_dns_cache_new (3, 1 << 20);
  guint32 addrs[BOX_NFTABLES_DNS_MAX_ADDRS], one = 0x08080808, ttl;
  guint8 rcode;
  guint n;

  /* the TTL is honoured, within [min, max] */
  g_assert_cmpuint (box_nftables_dns_cache_insert (cache, "a.test", 1000, 0, &one, 1, 60), ==, 60);
  g_assert_true (box_nftables_dns_cache_lookup (cache, "a.test", 1010, &rcode, addrs, 32, &n,
                                                &ttl));
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmphex (addrs[0], ==, one);
  g_assert_cmpuint (ttl, ==, 50);
  g_assert_false (box_nftables_dns_cache_lookup (cache, "a.test", 1060, &rcode, addrs, 32, &n,
                                                 &ttl));
  g_assert_cmpuint (box_nftables_dns_cache_get_size (cache), ==, 0);
  g_assert_cmpuint (box_nftables_dns_cache_get_bytes (cache), ==, 0);
  g_assert_cmpuint (box_nftables_dns_cache_insert (cache, "zero.test", 1000, 0, &one, 1, 0), ==,
                    BOX_NFTABLES_DNS_TTL_MIN);
  g_assert_cmpuint (box_nftables_dns_cache_insert (cache, "week.test", 1000, 3, NULL, 0, 604800),
                    ==, BOX_NFTABLES_DNS_TTL_MAX);
  g_assert_true (box_nftables_dns_cache_lookup (cache, "week.test", 1001, &rcode, addrs, 32, &n,
                                                &ttl));
  g_assert_cmpuint (rcode, ==, 3);
  g_assert_cmpuint (n, ==, 0);

  /* bounded in entries: the oldest goes; a replacement is no new entry */
  box_nftables_dns_cache_insert (cache, "b.test", 1000, 0, &one, 1, 60);
  box_nftables_dns_cache_insert (cache, "b.test", 1000, 0, &one, 1, 60);
  g_assert_cmpuint (box_nftables_dns_cache_get_size (cache), ==, 3);
  box_nftables_dns_cache_insert (cache, "c.test", 1000, 0, &one, 1, 600);
  g_assert_cmpuint (box_nftables_dns_cache_get_size (cache), ==, 3);
  g_assert_false (box_nftables_dns_cache_lookup (cache, "zero.test", 1001, &rcode, addrs, 32, &n,
                                                 &ttl));
  /* expired entries go before fresh ones */
  box_nftables_dns_cache_insert (cache, "d.test", 1100, 0, &one, 1, 60);
  g_assert_false (box_nftables_dns_cache_lookup (cache, "b.test", 1100, &rcode, addrs, 32, &n,
                                                 &ttl));
  g_assert_true (box_nftables_dns_cache_lookup (cache, "c.test", 1100, &rcode, addrs, 32, &n,
                                                &ttl));
  g_assert_true (box_nftables_dns_cache_lookup (cache, "d.test", 1100, &rcode, addrs, 32, &n,
                                                &ttl));
}

static void
test_cache_bytes (void)
{
  g_autoptr(BoxNftablesDnsCache) cache = box_nftables_dns_cache_new (1000, 4096);
  guint32 addrs[BOX_NFTABLES_DNS_MAX_ADDRS] = { 0 }, ttl;
  guint8 rcode;
  guint n;

  for (guint i = 0; i < 200; i++) {
    g_autofree char *name = g_strdup_printf ("host-%u.example.test", i);

    box_nftables_dns_cache_insert (cache, name, 1000, 0, addrs, BOX_NFTABLES_DNS_MAX_ADDRS, 60);
    g_assert_cmpuint (box_nftables_dns_cache_get_bytes (cache), <=, 4096);
  }
  g_assert_cmpuint (box_nftables_dns_cache_get_size (cache), <, 200);
  g_assert_cmpuint (box_nftables_dns_cache_get_size (cache), >, 0);
  /* the newest stayed */
  g_assert_true (box_nftables_dns_cache_lookup (cache, "host-199.example.test", 1001, &rcode,
                                                addrs, 32, &n, &ttl));
  g_assert_cmpuint (n, ==, BOX_NFTABLES_DNS_MAX_ADDRS);
}

static void
test_pick_upstreams (void)
{
  const char *stub = "nameserver 127.0.0.53\noptions edns0 trust-ad\n";
  const char *real = "nameserver 192.0.2.53\nnameserver 127.0.0.1\nnameserver 2001:db8::53\n";
  const char *behind = "nameserver 198.51.100.53\nnameserver ::1\n";
  g_auto(GStrv) direct = NULL;
  g_auto(GStrv) via_stub = NULL;
  g_auto(GStrv) local = NULL;
  gboolean from_stub = TRUE;

  /* loopback servers are dropped when there are others */
  direct = box_nftables_dns_pick_upstreams (real, behind, &from_stub);
  g_assert_false (from_stub);
  g_assert_cmpuint (g_strv_length (direct), ==, 2);
  g_assert_cmpstr (direct[0], ==, "192.0.2.53");
  g_assert_cmpstr (direct[1], ==, "2001:db8::53");
  /* only a local stub: the stub's own upstreams */
  via_stub = box_nftables_dns_pick_upstreams (stub, behind, &from_stub);
  g_assert_true (from_stub);
  g_assert_cmpuint (g_strv_length (via_stub), ==, 1);
  g_assert_cmpstr (via_stub[0], ==, "198.51.100.53");
  /* nothing behind it: the local resolver after all */
  local = box_nftables_dns_pick_upstreams (stub, NULL, &from_stub);
  g_assert_false (from_stub);
  g_assert_cmpuint (g_strv_length (local), ==, 1);
  g_assert_cmpstr (local[0], ==, "127.0.0.53");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/nftables-dns/read-query", test_read_query);
  g_test_add_func ("/nftables-dns/read-answer", test_read_answer);
  g_test_add_func ("/nftables-dns/build", test_build);
  g_test_add_func ("/nftables-dns/cache", test_cache);
  g_test_add_func ("/nftables-dns/cache-bytes", test_cache_bytes);
  g_test_add_func ("/nftables-dns/pick-upstreams", test_pick_upstreams);
  return g_test_run ();
}
