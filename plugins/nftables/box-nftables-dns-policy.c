/* box-nftables-dns-policy.c: the filtering resolver of restricted
 * sandboxes, and the node's own resolution for the name-checking proxy
 * (see box-nftables-dns.h and README.md, "DNS").
 *
 * A restricted sandbox's query is read with libldns and answered by the
 * resolver itself, never relayed: REFUSED for anything but one class-IN
 * question, for ANY/AXFR/IXFR, for odd or over-long names and for names its
 * policy does not resolve (reported to the egress registry); AAAA and every
 * other type of an allowed name NOERROR without records; A from the cache
 * or from the resolver's own A query upstream, only with public addresses
 * (an answer with an internal one anywhere is REFUSED), the addresses
 * reported to the egress registry before the answer leaves.
 */
#include "config.h"

#include <ldns/ldns.h>
#include <string.h>

#include "box-error.h"
#include "box-nftables-dns-private.h"

#define BOX_DNS_SYNC_POLL_US (200 * G_TIME_SPAN_MILLISECOND)

static gint64
now_s (void)
{
  return g_get_monotonic_time () / G_USEC_PER_SEC;
}

BoxEgressPolicy *
box_dns_restricted_policy (BoxNftablesDns *dns, guint32 guest)
{
  g_autoptr(BoxEgressPolicy) policy = NULL;
  BoxNftablesEgress *egress;

  g_mutex_lock (&dns->lock);
  egress = dns->egress;
  g_mutex_unlock (&dns->lock);
  if (egress == NULL || !box_nftables_egress_lookup (egress, guest, &policy, NULL) ||
      policy == NULL || !box_egress_policy_is_restricted (policy))
    return NULL;
  return g_steal_pointer (&policy);
}

void
box_dns_lookup_complete (BoxNftablesDns *dns, const char *name, const guint8 *answer,
                         gsize len, BoxNftablesDnsResult *result)
{
  gboolean public;

  if (!box_nftables_dns_read_answer (answer, len, name, result)) {
    memset (result, 0, sizeof *result);
    result->rcode = LDNS_RCODE_SERVFAIL;
    return;
  }
  g_mutex_lock (&dns->lock);
  public = box_nftables_dns_answer_is_public (answer, len, (const char *const *) dns->blocked);
  g_mutex_unlock (&dns->lock);
  if (!public) {
    /* rebinding or split horizon: nothing of it reaches anyone, and it is
     * asked again next time (not cached) */
    g_debug ("dns: the answer for %s carries an internal address: refused", name);
    memset (result, 0, sizeof *result);
    result->rcode = LDNS_RCODE_REFUSED;
    return;
  }
  if (result->rcode != LDNS_RCODE_NOERROR && result->rcode != LDNS_RCODE_NXDOMAIN)
    return;   /* failures are not cached */
  if (result->rcode == LDNS_RCODE_NXDOMAIN)
    result->n_addrs = 0;
  result->ttl = box_nftables_dns_cache_insert (dns->cache, name, now_s (), result->rcode,
                                               result->addrs, result->n_addrs, result->ttl);
}

static gboolean
cache_lookup (BoxNftablesDns *dns, const char *name, BoxNftablesDnsResult *result)
{
  memset (result, 0, sizeof *result);
  return box_nftables_dns_cache_lookup (dns->cache, name, now_s (), &result->rcode,
                                        result->addrs, BOX_NFTABLES_DNS_MAX_ADDRS,
                                        &result->n_addrs, &result->ttl);
}

/* ---- restricted sandboxes ---- */

typedef struct {
  guint32                guest;
  BoxNftablesDnsQuestion question;
  BoxDnsReply            reply;
  gpointer               reply_data;
} Restricted;

static void
restricted_answer (BoxNftablesDns *dns, Restricted *r, const BoxNftablesDnsResult *result)
{
  g_autoptr(GBytes) answer = NULL;
  BoxNftablesEgress *egress;
  guint n_addrs = result->n_addrs;

  if (result->rcode == LDNS_RCODE_NOERROR && n_addrs > 0) {
    /* what fits a 512-byte UDP answer (header, question, then 16 bytes an
     * A record): no client needs EDNS or TCP for it; the sandbox is told,
     * and allowed, exactly those */
    n_addrs = MIN (n_addrs, (512 - 12 - (strlen (r->question.name) + 2 + 4)) / 16);
    g_mutex_lock (&dns->lock);
    egress = dns->egress;
    g_mutex_unlock (&dns->lock);
    if (egress != NULL) {
      /* sent by the reporter thread once reported (the kernel's elements
       * in place), never waited for here */
      answer = box_nftables_dns_build_answer (&r->question, result->rcode, result->addrs,
                                              n_addrs, result->ttl);
      if (!box_dns_reporter_post (dns, r->guest, r->question.name, result->addrs, n_addrs,
                                  result->ttl, answer, r->reply, r->reply_data)) {
        /* over its share of the queue: it asks again */
        g_clear_pointer (&answer, g_bytes_unref);
        answer = box_nftables_dns_build_answer (&r->question, LDNS_RCODE_SERVFAIL, NULL, 0, 0);
        r->reply (answer, r->reply_data);
      }
      box_nftables_dns_question_clear (&r->question);
      g_free (r);
      return;
    }
  }
  answer = box_nftables_dns_build_answer (&r->question, result->rcode, result->addrs,
                                          n_addrs, result->ttl);
  r->reply (answer, r->reply_data);
  box_nftables_dns_question_clear (&r->question);
  g_free (r);
}

static void
restricted_lookup_done (BoxNftablesDns *dns, const BoxNftablesDnsResult *result, gpointer data)
{
  restricted_answer (dns, data, result);
}

void
box_dns_restricted_query (BoxNftablesDns *dns, guint32 guest, BoxEgressPolicy *policy,
                          const guint8 *msg, gsize len, BoxDnsReply reply, gpointer reply_data)
{
  Restricted *r = g_new0 (Restricted, 1);
  BoxNftablesDnsResult result = { 0 };

  r->guest = guest;
  r->reply = reply;
  r->reply_data = reply_data;
  if (!box_nftables_dns_read_query (msg, len, &r->question)) {
    reply (NULL, reply_data);
    g_free (r);
    return;
  }
  result.rcode = r->question.rcode;
  if (result.rcode == LDNS_RCODE_NOERROR &&
      !box_egress_policy_resolves (policy, r->question.name)) {
    BoxNftablesEgress *egress;

    g_mutex_lock (&dns->lock);
    egress = dns->egress;
    g_mutex_unlock (&dns->lock);
    if (egress != NULL)
      box_nftables_egress_report_refused (egress, guest, "dns", r->question.name, 0);
    result.rcode = LDNS_RCODE_REFUSED;
  }
  /* allowed: only A has records (IPv6 is dropped for restricted sandboxes,
   * and other types would only carry names and addresses nobody checked) */
  if (result.rcode != LDNS_RCODE_NOERROR || r->question.qtype != LDNS_RR_TYPE_A ||
      cache_lookup (dns, r->question.name, &result)) {
    restricted_answer (dns, r, &result);
    return;
  }
  if (!box_dns_lookup_send (dns, guest, r->question.name, restricted_lookup_done, r)) {
    result.rcode = LDNS_RCODE_SERVFAIL;   /* over its share: it asks again */
    restricted_answer (dns, r, &result);
  }
}

/* ---- from the TCP workers ---- */

typedef struct {
  BoxNftablesDns  *dns;
  guint32          guest;
  BoxEgressPolicy *policy;
  GBytes          *query;
  GAsyncQueue     *answers;   /* gets one GBytes (empty: no answer) */
  gboolean         started;
} SyncQuery;

static void
sync_reply (GBytes *answer, gpointer data)
{
  GAsyncQueue *answers = data;

  g_async_queue_push (answers, answer != NULL ? g_bytes_ref (answer) : g_bytes_new (NULL, 0));
  g_async_queue_unref (answers);
}

static gboolean
sync_start (gpointer data)
{
  SyncQuery *s = data;
  gsize len;
  const guint8 *msg = g_bytes_get_data (s->query, &len);

  s->started = TRUE;
  box_dns_restricted_query (s->dns, s->guest, s->policy, msg, len, sync_reply,
                            g_async_queue_ref (s->answers));
  return G_SOURCE_REMOVE;
}

static void
sync_free (SyncQuery *s)
{
  if (!s->started)   /* the forwarder stopped first */
    g_async_queue_push (s->answers, g_bytes_new (NULL, 0));
  g_async_queue_unref (s->answers);
  box_egress_policy_unref (s->policy);
  g_bytes_unref (s->query);
  g_free (s);
}

GBytes *
box_dns_restricted_query_sync (BoxNftablesDns *dns, guint32 guest, BoxEgressPolicy *policy,
                               const guint8 *msg, gsize len)
{
  g_autoptr(GAsyncQueue) answers = g_async_queue_new_full ((GDestroyNotify) g_bytes_unref);
  SyncQuery *s = g_new0 (SyncQuery, 1);
  GBytes *answer = NULL;

  s->dns = dns;
  s->guest = guest;
  s->policy = box_egress_policy_ref (policy);
  s->query = g_bytes_new (msg, len);
  s->answers = g_async_queue_ref (answers);
  g_main_context_invoke_full (dns->context, G_PRIORITY_DEFAULT, sync_start, s,
                              (GDestroyNotify) sync_free);
  while (answer == NULL && !g_cancellable_is_cancelled (dns->cancellable))
    answer = g_async_queue_timeout_pop (answers, BOX_DNS_SYNC_POLL_US);
  if (answer != NULL && g_bytes_get_size (answer) == 0)
    g_clear_pointer (&answer, g_bytes_unref);
  return answer;
}

/* ---- the node's own resolution ---- */

typedef struct {
  BoxNftablesDns        *dns;
  guint32                guest;     /* whose share it takes */
  char                  *name;
  BoxNftablesResolveDone done;
  gpointer               done_data;
  gboolean               started;   /* sent upstream */
} NodeLookup;   /* a g_atomic_rc_box: the invoke's reference and the lookup's */

static void
node_lookup_clear (NodeLookup *l)
{
  g_free (l->name);
}

static void
node_lookup_unref (NodeLookup *l)
{
  g_atomic_rc_box_release_full (l, (GDestroyNotify) node_lookup_clear);
}

static void
node_lookup_finish (NodeLookup *l, const BoxNftablesDnsResult *result)
{
  g_autoptr(GError) error = NULL;

  if (result->rcode == LDNS_RCODE_NOERROR && result->n_addrs > 0) {
    l->done (result->addrs, result->n_addrs, result->ttl, NULL, l->done_data);
  } else {
    if (result->rcode == LDNS_RCODE_NOERROR || result->rcode == LDNS_RCODE_NXDOMAIN)
      error = g_error_new (BOX_ERROR, BOX_ERROR_NOT_FOUND, "%s has no public IPv4 address",
                           l->name);
    else if (result->rcode == LDNS_RCODE_REFUSED)
      error = g_error_new (BOX_ERROR, BOX_ERROR_PERMISSION_DENIED,
                           "%s resolves to an internal address", l->name);
    else
      error = g_error_new (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                           "%s: the upstream resolvers did not answer", l->name);
    l->done (NULL, 0, 0, error, l->done_data);
  }
  l->done = NULL;
}

static void
node_lookup_done (BoxNftablesDns *dns, const BoxNftablesDnsResult *result, gpointer data)
{
  node_lookup_finish (data, result);
  node_lookup_unref (data);
}

static gboolean
node_lookup_start (gpointer data)
{
  NodeLookup *l = data;
  BoxNftablesDnsResult failed = { .rcode = LDNS_RCODE_SERVFAIL };

  l->started = TRUE;
  if (!box_dns_lookup_send (l->dns, l->guest, l->name, node_lookup_done,
                            g_atomic_rc_box_acquire (l))) {
    l->started = FALSE;
    node_lookup_finish (l, &failed);
    node_lookup_unref (l);
  }
  return G_SOURCE_REMOVE;
}

static void
node_lookup_unstarted (gpointer data)
{
  NodeLookup *l = data;
  BoxNftablesDnsResult failed = { .rcode = LDNS_RCODE_SERVFAIL };

  if (!l->started && l->done != NULL)   /* the forwarder stopped first */
    node_lookup_finish (l, &failed);
  node_lookup_unref (l);
}

/* @name lowercased without a trailing dot, when it is a host name the
 * resolver asks for (labels of [A-Za-z0-9_-], at most 253 characters). */
static char *
normalize_name (const char *name)
{
  g_autofree char *lower = NULL;
  gsize len;

  if (name == NULL)
    return NULL;
  lower = g_ascii_strdown (name, -1);
  len = strlen (lower);
  if (len > 0 && lower[len - 1] == '.')
    lower[--len] = '\0';
  if (len == 0 || len > 253)
    return NULL;
  for (gsize i = 0, label = 0; i <= len; i++) {
    char c = lower[i];

    if (c == '.' || c == '\0') {
      if (label == 0 || label > 63)
        return NULL;
      label = 0;
    } else if (g_ascii_isalnum (c) || c == '-' || c == '_') {
      label++;
    } else {
      return NULL;
    }
  }
  return g_steal_pointer (&lower);
}

void
box_nftables_dns_resolve_func (guint32 guest, const char *name, BoxNftablesResolveDone done,
                               gpointer done_data, gpointer user_data)
{
  BoxNftablesDns *dns = user_data;
  g_autofree char *host = normalize_name (name);
  BoxNftablesDnsResult result;
  NodeLookup *l;

  if (host == NULL) {
    g_autoptr(GError) error = g_error_new (BOX_ERROR, BOX_ERROR_INVALID,
                                           "not a host name the resolver asks for");
    done (NULL, 0, 0, error, done_data);
    return;
  }
  l = g_atomic_rc_box_new0 (NodeLookup);
  l->dns = dns;
  l->guest = guest;
  l->name = g_steal_pointer (&host);
  l->done = done;
  l->done_data = done_data;
  if (cache_lookup (dns, l->name, &result)) {
    node_lookup_finish (l, &result);
    node_lookup_unref (l);
    return;
  }
  g_main_context_invoke_full (dns->context, G_PRIORITY_DEFAULT, node_lookup_start, l,
                              node_lookup_unstarted);
}
