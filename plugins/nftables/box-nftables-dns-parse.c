/* box-nftables-dns-parse.c: what the filtering resolver reads and writes,
 * with libldns (pure functions; see box-nftables-dns.h): a restricted
 * sandbox's query, the answers it gets, the queries the resolver sends
 * upstream, and the A records of an upstream's answer.
 *
 * libldns does the wire format (names, compression pointers, counts,
 * lengths); this file only decides.  Names a restricted sandbox asks for
 * are letters, digits, '-' and '_' only: any other byte in a label (a dot
 * inside a label, a NUL, an escape) could make the name the policy checks
 * differ from the name asked upstream.
 */
#include "config.h"

#include <ldns/ldns.h>
#include <string.h>

#include "box-nftables-dns.h"

/* The name of a wire-format dname as the policy sees it: labels of
 * [A-Za-z0-9_-], lowercased, joined by dots, no trailing dot; NULL for
 * the root or any other byte. */
static char *
dname_to_host (const ldns_rdf *rdf)
{
  g_autoptr(GString) out = NULL;
  const guint8 *data;
  gsize size, off = 0;

  if (rdf == NULL || ldns_rdf_get_type (rdf) != LDNS_RDF_TYPE_DNAME)
    return NULL;
  data = ldns_rdf_data (rdf);
  size = ldns_rdf_size (rdf);
  out = g_string_new (NULL);
  while (off < size && data[off] != 0) {
    guint8 label = data[off];

    if (label > 63 || off + 1 + label > size)
      return NULL;
    if (out->len > 0)
      g_string_append_c (out, '.');
    for (guint i = 1; i <= label; i++) {
      char c = (char) data[off + i];

      if (!g_ascii_isalnum (c) && c != '-' && c != '_')
        return NULL;
      g_string_append_c (out, g_ascii_tolower (c));
    }
    off += 1 + label;
  }
  if (out->len == 0 || out->len > 253)
    return NULL;
  return g_string_free (g_steal_pointer (&out), FALSE);
}

void
box_nftables_dns_question_clear (BoxNftablesDnsQuestion *q)
{
  g_clear_pointer (&q->name, g_free);
}

gboolean
box_nftables_dns_read_query (const guint8 *msg, gsize len, BoxNftablesDnsQuestion *q)
{
  ldns_pkt *pkt = NULL;
  ldns_status status;
  ldns_rr *question;

  memset (q, 0, sizeof *q);
  if (msg == NULL || len < 12 || (msg[2] & 0x80) != 0)
    return FALSE;   /* not a query: nothing to answer */
  q->id = (guint16) ((msg[0] << 8) | msg[1]);
  q->rd = (msg[2] & 0x01) != 0;
  status = ldns_wire2pkt (&pkt, msg, len);
  if (status != LDNS_STATUS_OK) {
    q->rcode = status == LDNS_STATUS_DOMAINNAME_OVERFLOW || status == LDNS_STATUS_LABEL_OVERFLOW
               ? LDNS_RCODE_REFUSED : LDNS_RCODE_FORMERR;
    return TRUE;
  }
  if (ldns_pkt_get_opcode (pkt) != LDNS_PACKET_QUERY)
    q->rcode = LDNS_RCODE_NOTIMPL;
  else if (ldns_pkt_qdcount (pkt) != 1 || ldns_rr_list_rr_count (ldns_pkt_question (pkt)) != 1)
    q->rcode = LDNS_RCODE_FORMERR;
  else {
    question = ldns_rr_list_rr (ldns_pkt_question (pkt), 0);
    q->qtype = (guint16) ldns_rr_get_type (question);
    if (ldns_rr_get_class (question) != LDNS_RR_CLASS_IN ||
        q->qtype == LDNS_RR_TYPE_ANY || q->qtype == LDNS_RR_TYPE_AXFR ||
        q->qtype == LDNS_RR_TYPE_IXFR)
      q->rcode = LDNS_RCODE_REFUSED;
    else {
      q->name = dname_to_host (ldns_rr_owner (question));
      if (q->name == NULL)
        q->rcode = LDNS_RCODE_REFUSED;
    }
  }
  ldns_pkt_free (pkt);
  return TRUE;
}

static GBytes *
pkt_to_bytes (ldns_pkt *pkt)
{
  guint8 *wire = NULL;
  size_t size = 0;
  GBytes *bytes = NULL;

  if (ldns_pkt2wire (&wire, pkt, &size) == LDNS_STATUS_OK && size <= 65535)
    bytes = g_bytes_new (wire, size);
  LDNS_FREE (wire);
  return bytes;
}

GBytes *
box_nftables_dns_build_answer (const BoxNftablesDnsQuestion *q, guint8 rcode,
                               const guint32 *addrs, guint n_addrs, guint32 ttl)
{
  g_autofree char *fqdn = NULL;
  ldns_rdf *owner = NULL;
  ldns_pkt *pkt;
  GBytes *bytes;

  pkt = ldns_pkt_new ();
  if (pkt == NULL)
    return NULL;
  ldns_pkt_set_id (pkt, q->id);
  ldns_pkt_set_qr (pkt, true);
  ldns_pkt_set_rd (pkt, q->rd);
  ldns_pkt_set_ra (pkt, true);
  ldns_pkt_set_opcode (pkt, LDNS_PACKET_QUERY);
  ldns_pkt_set_rcode (pkt, rcode);
  if (q->name != NULL) {
    ldns_rr *question = ldns_rr_new ();

    fqdn = g_strconcat (q->name, ".", NULL);
    owner = ldns_dname_new_frm_str (fqdn);
    if (owner == NULL) {
      ldns_rr_free (question);
      ldns_pkt_free (pkt);
      return NULL;
    }
    ldns_rr_set_question (question, true);
    ldns_rr_set_owner (question, ldns_rdf_clone (owner));
    ldns_rr_set_type (question, (ldns_rr_type) q->qtype);
    ldns_rr_set_class (question, LDNS_RR_CLASS_IN);
    ldns_pkt_push_rr (pkt, LDNS_SECTION_QUESTION, question);
    for (guint i = 0; i < n_addrs; i++) {
      ldns_rr *rr = ldns_rr_new ();
      guint32 be = g_htonl (addrs[i]);

      ldns_rr_set_owner (rr, ldns_rdf_clone (owner));
      ldns_rr_set_type (rr, LDNS_RR_TYPE_A);
      ldns_rr_set_class (rr, LDNS_RR_CLASS_IN);
      ldns_rr_set_ttl (rr, ttl);
      ldns_rr_push_rdf (rr, ldns_rdf_new_frm_data (LDNS_RDF_TYPE_A, 4, &be));
      ldns_pkt_push_rr (pkt, LDNS_SECTION_ANSWER, rr);
    }
    ldns_rdf_deep_free (owner);
  }
  bytes = pkt_to_bytes (pkt);
  ldns_pkt_free (pkt);
  return bytes;
}

GBytes *
box_nftables_dns_build_query (const char *name, guint16 *id)
{
  g_autofree char *fqdn = g_strconcat (name, ".", NULL);
  ldns_pkt *pkt = NULL;
  GBytes *bytes;

  if (ldns_pkt_query_new_frm_str (&pkt, fqdn, LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN,
                                  LDNS_RD) != LDNS_STATUS_OK)
    return NULL;
  *id = (guint16) g_random_int_range (0, 65536);
  ldns_pkt_set_id (pkt, *id);
  ldns_pkt_set_edns_udp_size (pkt, 1232);   /* room for many A records, no fragments */
  bytes = pkt_to_bytes (pkt);
  ldns_pkt_free (pkt);
  return bytes;
}

static gboolean
in_chain (GPtrArray *chain, const ldns_rdf *name)
{
  for (guint i = 0; i < chain->len; i++)
    if (ldns_dname_compare (g_ptr_array_index (chain, i), name) == 0)
      return TRUE;
  return FALSE;
}

/* The TTL of a negative answer (RFC 2308): the SOA's, at most its MINIMUM. */
static guint32
negative_ttl (ldns_pkt *pkt)
{
  ldns_rr_list *authority = ldns_pkt_authority (pkt);

  for (gsize i = 0; i < ldns_rr_list_rr_count (authority); i++) {
    ldns_rr *rr = ldns_rr_list_rr (authority, i);

    if (ldns_rr_get_type (rr) == LDNS_RR_TYPE_SOA && ldns_rr_rd_count (rr) == 7)
      return MIN (ldns_rr_ttl (rr), ldns_rdf2native_int32 (ldns_rr_rdf (rr, 6)));
  }
  return 0;
}

/* The A records for @want in @pkt, an answer to "@want A IN". */
static gboolean
read_answer_pkt (ldns_pkt *pkt, ldns_rdf *want, BoxNftablesDnsResult *result)
{
  g_autoptr(GPtrArray) chain = NULL;
  ldns_rr *question;
  ldns_rr_list *answer;
  gboolean grew;

  if (!ldns_pkt_qr (pkt) || ldns_pkt_qdcount (pkt) != 1 ||
      ldns_rr_list_rr_count (ldns_pkt_question (pkt)) != 1)
    return FALSE;
  question = ldns_rr_list_rr (ldns_pkt_question (pkt), 0);
  if (ldns_rr_get_type (question) != LDNS_RR_TYPE_A ||
      ldns_rr_get_class (question) != LDNS_RR_CLASS_IN ||
      ldns_dname_compare (ldns_rr_owner (question), want) != 0)
    return FALSE;   /* not the answer to our question */
  result->rcode = (guint8) ldns_pkt_get_rcode (pkt);
  result->ttl = G_MAXUINT32;
  /* the name, and the CNAME targets reached from it */
  chain = g_ptr_array_new ();
  g_ptr_array_add (chain, want);
  answer = ldns_pkt_answer (pkt);
  do {
    grew = FALSE;
    for (gsize i = 0; i < ldns_rr_list_rr_count (answer) && chain->len < 16; i++) {
      ldns_rr *rr = ldns_rr_list_rr (answer, i);

      if (ldns_rr_get_type (rr) == LDNS_RR_TYPE_CNAME && ldns_rr_rd_count (rr) == 1 &&
          in_chain (chain, ldns_rr_owner (rr)) && !in_chain (chain, ldns_rr_rdf (rr, 0))) {
        g_ptr_array_add (chain, ldns_rr_rdf (rr, 0));
        result->ttl = MIN (result->ttl, ldns_rr_ttl (rr));
        grew = TRUE;
      }
    }
  } while (grew && chain->len < 16);
  for (gsize i = 0; i < ldns_rr_list_rr_count (answer); i++) {
    ldns_rr *rr = ldns_rr_list_rr (answer, i);
    ldns_rdf *rdata = ldns_rr_rd_count (rr) == 1 ? ldns_rr_rdf (rr, 0) : NULL;
    guint32 be;

    if (ldns_rr_get_type (rr) != LDNS_RR_TYPE_A || ldns_rr_get_class (rr) != LDNS_RR_CLASS_IN ||
        rdata == NULL || ldns_rdf_size (rdata) != 4 || !in_chain (chain, ldns_rr_owner (rr)) ||
        result->n_addrs >= BOX_NFTABLES_DNS_MAX_ADDRS)
      continue;
    memcpy (&be, ldns_rdf_data (rdata), 4);
    result->addrs[result->n_addrs++] = g_ntohl (be);
    result->ttl = MIN (result->ttl, ldns_rr_ttl (rr));
  }
  if (result->n_addrs == 0)
    result->ttl = negative_ttl (pkt);
  return TRUE;
}

gboolean
box_nftables_dns_read_answer (const guint8 *msg, gsize len, const char *name,
                              BoxNftablesDnsResult *result)
{
  g_autofree char *fqdn = NULL;
  ldns_pkt *pkt = NULL;
  ldns_rdf *want;
  gboolean ok;

  memset (result, 0, sizeof *result);
  if (msg == NULL || name == NULL)
    return FALSE;
  fqdn = g_strconcat (name, ".", NULL);
  want = ldns_dname_new_frm_str (fqdn);
  if (want == NULL)
    return FALSE;
  ok = ldns_wire2pkt (&pkt, msg, len) == LDNS_STATUS_OK && read_answer_pkt (pkt, want, result);
  ldns_rdf_deep_free (want);
  if (pkt != NULL)
    ldns_pkt_free (pkt);
  return ok;
}
