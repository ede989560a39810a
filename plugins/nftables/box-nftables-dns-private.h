/* box-nftables-dns-private.h: the resolver's state, shared by
 * box-nftables-dns.c (sockets, relay, upstream queries) and
 * box-nftables-dns-policy.c (the filtering resolver of restricted
 * sandboxes and the node's own resolution).  Not for other files.
 */
#pragma once

#include "box-nftables-dns.h"
#include "box-nftables-dns-cache.h"

#define BOX_DNS_MAX_PENDING       1024
#define BOX_DNS_MAX_REPORTS       256     /* answers waiting for their report */
#define BOX_DNS_ATTEMPT_MS        2000
#define BOX_DNS_TCP_TIMEOUT_S     10
#define BOX_DNS_TCP_THREADS       8
#define BOX_DNS_TCP_BACKLOG       64
#define BOX_DNS_RESOLV_RECHECK_US (5 * G_USEC_PER_SEC)
#define BOX_DNS_MAX_MESSAGE       65535

struct _BoxNftablesDns {
  GMutex         lock;            /* allowed, upstreams, resolv_*, tcp_by_client, blocked, egress */
  GHashTable    *allowed;         /* guint32 addresses (a set) */
  GHashTable    *tcp_by_client;   /* guint32 address -> TCP connections queued or served */
  GStrv          blocked;         /* extra CIDRs no answer may carry */
  GPtrArray     *upstreams;       /* GSocketAddress* */
  gboolean       from_resolv_conf;
  char          *resolv_conf;
  gint64         resolv_checked;
  gint64         resolv_mtime;
  gint64         stub_mtime;      /* of BOX_NFTABLES_DNS_STUB_RESOLV_CONF */
  gboolean       from_stub;       /* the upstreams are the local stub's own */
  BoxNftablesEgress   *egress;    /* not owned; NULL: none */
  BoxNftablesDnsCache *cache;     /* the filtering resolver's answers */

  GSocket       *udp;
  GSocket       *tcp;
  GMainContext  *context;
  GMainLoop     *loop;
  GThread       *thread;
  GThreadPool   *tcp_pool;
  GCancellable  *cancellable;
  GHashTable    *pending;         /* BoxDnsQuery* set; forwarder thread only */
  GHashTable    *pending_by_client; /* guint32 address -> queries in flight; forwarder thread only */

  GMutex         report_lock;     /* the four below and reports_stopping */
  GCond          report_cond;
  guint          n_reports;       /* answers waiting for their report (box-nftables-dns-report.c) */
  GHashTable    *reports_by_guest; /* guint32 address -> GQueue of its reports, oldest first */
  GQueue         report_turns;    /* guests with reports waiting, whose turn is next first */
  guint32        reporting;       /* the guest whose report is in hand, or 0 */
  gboolean       reports_stopping;
  GThread       *reporter;
};

/* The end of the resolver's own A lookup of a name (forwarder thread). */
typedef void (*BoxDnsLookupDone) (BoxNftablesDns *dns, const BoxNftablesDnsResult *result,
                                  gpointer data);
/* Where a restricted sandbox's answer goes: @answer, or NULL for none.
 * Called exactly once. */
typedef void (*BoxDnsReply) (GBytes *answer, gpointer data);

typedef struct {
  BoxNftablesDns *dns;
  guint32         client_addr;    /* host byte order; for a node-side lookup the guest it serves */
  GSocket        *sock;
  GSocketAddress *client;         /* NULL for a lookup */
  GBytes         *query;
  guint           attempt;
  guint           max_attempts;
  GSource        *read_source;
  GSource        *timer;
  char           *name;           /* a lookup: the name asked (else NULL) */
  BoxDnsLookupDone done;          /* a lookup: called once, then cleared */
  gpointer        done_data;
} BoxDnsQuery;

/* box-nftables-dns-upstreams.c */
GPtrArray      *box_dns_parse_upstreams (const char *const *list, GError **error);
/* With the lock held: re-reads resolv.conf when due and changed. */
void            box_dns_reload_resolv_conf_locked (BoxNftablesDns *dns);
/* A new reference to upstream number @attempt (round robin). */
GSocketAddress *box_dns_get_upstream (BoxNftablesDns *dns, guint attempt, guint *n_upstreams);

/* box-nftables-dns.c, forwarder thread */
guint    box_dns_count_of      (GHashTable *counts, guint32 address);
void     box_dns_count_set     (GHashTable *counts, guint32 address, guint n);
/* Sends a new query to the upstreams (one in flight per lookup, the
 * relay's attempts and failover); FALSE when the bounds are full, and then
 * @done has not been called. */
gboolean box_dns_lookup_send   (BoxNftablesDns *dns, guint32 client_addr, const char *name,
                                BoxDnsLookupDone done, gpointer done_data);

/* box-nftables-dns-report.c: the reporter thread */
void     box_dns_reporter_start (BoxNftablesDns *dns);
/* After the forwarder thread: answers still queued are dropped. */
void     box_dns_reporter_stop  (BoxNftablesDns *dns);
/* Queues @answer, to be given to @reply once @addrs are reported for
 * @guest; FALSE (nothing queued, @reply not called) when the queue or
 * @guest's share of it is full, or it stops.  Any thread. */
gboolean box_dns_reporter_post  (BoxNftablesDns *dns, guint32 guest, const char *name,
                                 const guint32 *addrs, guint n_addrs, guint32 ttl,
                                 GBytes *answer, BoxDnsReply reply, gpointer reply_data);

/* box-nftables-dns-policy.c */
/* The compiled policy of the sandbox at @guest when it is restricted
 * (transfer full), else NULL. */
BoxEgressPolicy *box_dns_restricted_policy (BoxNftablesDns *dns, guint32 guest);
/* A restricted sandbox's query, on the forwarder thread: @reply gets the
 * answer (now, or when the upstream answered). */
void     box_dns_restricted_query (BoxNftablesDns *dns, guint32 guest, BoxEgressPolicy *policy,
                                   const guint8 *msg, gsize len, BoxDnsReply reply,
                                   gpointer reply_data);
/* The same from a TCP worker thread: blocks until the answer (NULL: none). */
GBytes  *box_dns_restricted_query_sync (BoxNftablesDns *dns, guint32 guest,
                                        BoxEgressPolicy *policy, const guint8 *msg, gsize len);
/* The lookup's end common to all callers: cache it, check it (an
 * internal address: REFUSED). */
void     box_dns_lookup_complete (BoxNftablesDns *dns, const char *name, const guint8 *answer,
                                  gsize len, BoxNftablesDnsResult *result);
