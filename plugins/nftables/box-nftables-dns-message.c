/* box-nftables-dns-message.c: the DNS message helpers of the sandboxes'
 * resolver (pure functions; see box-nftables-dns.h): the question of a
 * query, error answers, whether an answer carries an internal address (read
 * with libldns), and
 * the nameservers of a resolv.conf.
 */
#include "config.h"

#include <ldns/ldns.h>
#include <gio/gio.h>
#include <string.h>

#include "box-nftables-dns.h"
#include "box-nftables-pool.h"
#include "box-nftables-ruleset.h"

#define BOX_DNS_RCODE_SERVFAIL    2
#define BOX_DNS_RCODE_REFUSED     5

gssize
box_nftables_dns_question_end (const guint8 *msg, gsize len)
{
  gsize off = 12, name_len = 0;

  if (msg == NULL || len < 12 || msg[4] != 0 || msg[5] != 1)
    return -1;
  for (;;) {
    guint8 label;

    if (off >= len)
      return -1;
    label = msg[off];
    if (label == 0) {
      off++;
      break;
    }
    if ((label & 0xc0) != 0)
      return -1;   /* no compression or extended labels in a query's question */
    name_len += label + 1;
    if (name_len > 255)
      return -1;
    off += 1 + label;
  }
  if (off + 4 > len)
    return -1;
  return (gssize) (off + 4);
}

static GBytes *
error_answer (const guint8 *query, gsize len, guint8 rcode)
{
  gssize end = box_nftables_dns_question_end (query, len);
  guint8 *answer;

  if (end < 0 || (query[2] & 0x80) != 0)
    return NULL;
  answer = g_memdup2 (query, (gsize) end);
  answer[2] = 0x80 | (query[2] & 0x79);     /* QR, keep opcode and RD */
  answer[3] = 0x80 | rcode;                 /* RA, the RCODE */
  memset (answer + 6, 0, 6);                /* no answers, authority, additional */
  return g_bytes_new_take (answer, (gsize) end);
}

GBytes *
box_nftables_dns_servfail (const guint8 *query, gsize len)
{
  return error_answer (query, len, BOX_DNS_RCODE_SERVFAIL);
}

GBytes *
box_nftables_dns_refused (const guint8 *query, gsize len)
{
  return error_answer (query, len, BOX_DNS_RCODE_REFUSED);
}

static gboolean
ipv4_blocked (guint32 address, const char *const *extra)
{
  const char *const *lists[] = { box_nftables_blocked_builtin (), extra };

  for (guint l = 0; l < G_N_ELEMENTS (lists); l++) {
    for (guint i = 0; lists[l] != NULL && lists[l][i] != NULL; i++) {
      guint32 network, mask;
      guint prefix;

      if (!box_nftables_cidr_parse (lists[l][i], &network, &prefix, NULL))
        continue;
      mask = prefix == 0 ? 0 : G_MAXUINT32 << (32 - prefix);
      if ((address & mask) == (network & mask))
        return TRUE;
    }
  }
  return FALSE;
}

static gboolean
ipv6_blocked (const guint8 *a, const char *const *extra)
{
  static const guint8 zero[16] = { 0 };
  static const guint8 mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
  static const guint8 nat64[12] = { 0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };

  if (memcmp (a, zero, 15) == 0)                     /* :: and ::1 */
    return TRUE;
  if ((a[0] & 0xfe) == 0xfc)                         /* fc00::/7 unique local */
    return TRUE;
  if (a[0] == 0xfe && (a[1] & 0xc0) != 0)            /* fe80::/10, fec0::/10 */
    return TRUE;
  if (a[0] == 0xff)                                  /* multicast */
    return TRUE;
  if (memcmp (a, mapped, 12) == 0 || memcmp (a, nat64, 12) == 0 ||
      memcmp (a, zero, 12) == 0) {                   /* an IPv4 address inside */
    guint32 v4 = ((guint32) a[12] << 24) | ((guint32) a[13] << 16) | ((guint32) a[14] << 8) | a[15];
    return ipv4_blocked (v4, extra);
  }
  return FALSE;
}

/* Whether @rdf (the data of an A or AAAA record) is an internal address. */
static gboolean
rdata_blocked (ldns_rr_type type, const ldns_rdf *rdf, const char *const *blocked)
{
  const guint8 *a = rdf != NULL ? ldns_rdf_data (rdf) : NULL;

  if (type == LDNS_RR_TYPE_A) {
    if (rdf == NULL || ldns_rdf_size (rdf) != 4)
      return TRUE;
    return ipv4_blocked (((guint32) a[0] << 24) | ((guint32) a[1] << 16) |
                         ((guint32) a[2] << 8) | a[3], blocked);
  }
  return rdf == NULL || ldns_rdf_size (rdf) != 16 || ipv6_blocked (a, blocked);
}

gboolean
box_nftables_dns_answer_is_public (const guint8 *msg, gsize len, const char *const *blocked)
{
  ldns_pkt *pkt = NULL;
  gboolean public = TRUE;

  if (msg == NULL || len < 12 || ldns_wire2pkt (&pkt, msg, len) != LDNS_STATUS_OK)
    return FALSE;
  /* every A and AAAA record of the answer, authority and additional sections */
  for (guint s = 0; s < 3 && public; s++) {
    ldns_rr_list *list = s == 0 ? ldns_pkt_answer (pkt) :
                         s == 1 ? ldns_pkt_authority (pkt) : ldns_pkt_additional (pkt);

    for (gsize i = 0; i < ldns_rr_list_rr_count (list) && public; i++) {
      ldns_rr *rr = ldns_rr_list_rr (list, i);
      ldns_rr_type type = ldns_rr_get_type (rr);

      if (ldns_rr_get_class (rr) == LDNS_RR_CLASS_IN &&
          (type == LDNS_RR_TYPE_A || type == LDNS_RR_TYPE_AAAA))
        public = ldns_rr_rd_count (rr) == 1 && !rdata_blocked (type, ldns_rr_rdf (rr, 0), blocked);
    }
  }
  ldns_pkt_free (pkt);
  return public;
}

char **
box_nftables_dns_parse_resolv_conf (const char *contents)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  g_auto(GStrv) lines = g_strsplit (contents != NULL ? contents : "", "\n", -1);

  for (guint i = 0; lines[i] != NULL; i++) {
    g_auto(GStrv) words = g_strsplit_set (g_strstrip (lines[i]), " \t", -1);
    guint n = 0;
    const char *first = NULL, *second = NULL;

    for (guint j = 0; words[j] != NULL; j++) {
      if (words[j][0] == '\0')
        continue;
      if (n == 0)
        first = words[j];
      else if (n == 1)
        second = words[j];
      n++;
    }
    if (first != NULL && second != NULL && g_str_equal (first, "nameserver"))
      g_strv_builder_add (builder, second);
  }
  return g_strv_builder_end (builder);
}

static gboolean
is_local_server (const char *server)
{
  g_autoptr(GInetAddress) addr = g_inet_address_new_from_string (server);

  return addr == NULL || g_inet_address_get_is_loopback (addr) || g_inet_address_get_is_any (addr);
}

/* The servers of @contents that are (@local TRUE) or are not local. */
static void
add_servers (GStrvBuilder *builder, const char *contents, gboolean local, guint *n)
{
  g_auto(GStrv) servers = box_nftables_dns_parse_resolv_conf (contents);

  for (guint i = 0; servers[i] != NULL; i++) {
    if (is_local_server (servers[i]) == local) {
      g_strv_builder_add (builder, servers[i]);
      (*n)++;
    }
  }
}

char **
box_nftables_dns_pick_upstreams (const char *contents, const char *stub_contents,
                                 gboolean *from_stub)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  guint n = 0;

  *from_stub = FALSE;
  add_servers (builder, contents, FALSE, &n);
  if (n == 0) {
    add_servers (builder, stub_contents, FALSE, &n);
    *from_stub = n > 0;
  }
  if (n == 0)
    add_servers (builder, contents, TRUE, &n);
  return g_strv_builder_end (builder);
}
