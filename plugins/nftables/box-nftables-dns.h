/* box-nftables-dns.h: the sandboxes' resolver.
 *
 * Sandboxes are told to use their gateway as resolver; nftables redirects
 * udp/tcp 53 to the gateway onto this resolver's port.  It runs on its own
 * thread with its own main context, answers only the guest addresses it
 * was told about (box_nftables_dns_allow, or registered in the egress
 * registry), and knows for each query which sandbox asked (the source
 * address: taps are anti-spoofed in nftables).  An unrestricted sandbox's
 * queries are relayed to the upstreams (those of /etc/resolv.conf, re-read
 * when it changes, or the configured ones) and an answer with an internal
 * address in it is replaced by REFUSED; a restricted sandbox gets the
 * filtering resolver (box-nftables-dns-policy.c): names its rules do not
 * resolve REFUSED, A answers only, public addresses only, from a bounded
 * TTL cache or the resolver's own upstream query.  Each sandbox gets a
 * fair share of the pending queries and of the TCP slots.  DNS messages
 * are read and written with libldns.  See README.md, "DNS".
 */
#pragma once

#include <gio/gio.h>

#include "box-nftables-egress.h"

G_BEGIN_DECLS

typedef struct _BoxNftablesDns BoxNftablesDns;

/* The plugin's default dns_port: privileged (below 1024), so that no local
 * user can bind it while boxd is down and nftables still redirects the
 * sandboxes' DNS there. */
#define BOX_NFTABLES_DNS_PORT_DEFAULT "535"

/* Binds 0.0.0.0:@port for UDP and TCP and starts the thread.  @upstreams
 * ("A.B.C.D", "A.B.C.D:port", "[v6]:port"), or NULL/empty for the
 * nameservers of @resolv_conf (NULL: /etc/resolv.conf). */
BoxNftablesDns *box_nftables_dns_new     (guint16 port, const char *const *upstreams,
                                          const char *resolv_conf, GError **error);
void            box_nftables_dns_free    (BoxNftablesDns *dns);
/* Guest addresses (host byte order) the forwarder answers. */
void            box_nftables_dns_allow   (BoxNftablesDns *dns, guint32 address);
void            box_nftables_dns_forget  (BoxNftablesDns *dns, guint32 address);
/* Extra IPv4 CIDRs (besides the built-in internal ranges) that no
 * forwarded answer may carry. */
void            box_nftables_dns_set_blocked (BoxNftablesDns *dns, const char *const *cidrs);
/* The egress registry (not owned; NULL: none): a sandbox registered
 * there with a restricted policy gets the filtering resolver (see
 * README.md), and a guest address registered there is answered like one
 * given to box_nftables_dns_allow. */
void            box_nftables_dns_set_egress (BoxNftablesDns *dns, BoxNftablesEgress *egress);
/* The node's own resolution of @name (a BoxNftablesResolveFunc, @user_data
 * the BoxNftablesDns*), through the resolver's cache and upstreams: the
 * name's public IPv4 addresses, or an error when it has none (NXDOMAIN, no
 * A record, an internal address in the answer, upstream failure).  A
 * lookup sent upstream counts toward @guest's fair share of the lookups
 * in flight, as its own queries do (none left: an upstream failure).
 * @done is called exactly once, from any thread. */
void            box_nftables_dns_resolve_func (guint32 guest, const char *name,
                                               BoxNftablesResolveDone done, gpointer done_data,
                                               gpointer user_data);
/* The upstreams in use now, as text (for the status and the log). */
char           *box_nftables_dns_describe_upstreams (BoxNftablesDns *dns);

/* Pure helpers, exposed for tests. */
/* Offset just past the question section of a DNS message with exactly one
 * question, or -1 when it is malformed. */
gssize          box_nftables_dns_question_end (const guint8 *msg, gsize len);
/* A SERVFAIL answer to @query (header + its question), or NULL when the
 * query is malformed. */
GBytes         *box_nftables_dns_servfail     (const guint8 *query, gsize len);
/* The same with RCODE REFUSED. */
GBytes         *box_nftables_dns_refused      (const guint8 *query, gsize len);
/* TRUE when @msg is a readable DNS message none of whose A or AAAA records
 * (answer, authority, additional) is internal: the built-in blocked IPv4
 * ranges (box_nftables_blocked_builtin), @blocked (extra IPv4 CIDRs, or
 * NULL), IPv6 loopback, unspecified, unique-local, link-local, site-local
 * and multicast, and IPv4-mapped/compatible/NAT64 forms of blocked IPv4. */
gboolean        box_nftables_dns_answer_is_public (const guint8 *msg, gsize len,
                                                   const char *const *blocked);
/* A query as the filtering resolver reads it (libldns). */
typedef struct {
  guint16  id;
  gboolean rd;
  guint16  qtype;
  char    *name;    /* lowercased, no trailing dot; only [a-z0-9_-] labels; or NULL */
  guint8   rcode;   /* 0, or the error to answer (FORMERR, NOTIMP, REFUSED) */
} BoxNftablesDnsQuestion;

#define BOX_NFTABLES_DNS_MAX_ADDRS 32

/* What an upstream answered to an A query. */
typedef struct {
  guint8   rcode;
  guint    n_addrs;
  guint32  addrs[BOX_NFTABLES_DNS_MAX_ADDRS];   /* host byte order */
  guint32  ttl;     /* the smallest TTL on the way (CNAMEs and As), or the SOA's */
} BoxNftablesDnsResult;

/* FALSE when @msg is no query at all (send nothing).  Otherwise TRUE with
 * @q filled: q->rcode non-zero when the query is refused at once (not one
 * question, not class IN, ANY/AXFR/IXFR, a name too long or with bytes
 * other than letters, digits, '-' and '_', an opcode other than QUERY).
 * Free with box_nftables_dns_question_clear. */
gboolean        box_nftables_dns_read_query   (const guint8 *msg, gsize len,
                                               BoxNftablesDnsQuestion *q);
void            box_nftables_dns_question_clear (BoxNftablesDnsQuestion *q);
/* The answer to @q: @rcode, its question (when q->name is set) and an A
 * record for each of @addrs with @ttl. */
GBytes         *box_nftables_dns_build_answer (const BoxNftablesDnsQuestion *q, guint8 rcode,
                                               const guint32 *addrs, guint n_addrs, guint32 ttl);
/* An A query for @name with a random ID (returned in @id), RD and EDNS0. */
GBytes         *box_nftables_dns_build_query  (const char *name, guint16 *id);
/* Reads an upstream's answer to the A query for @name: FALSE when it is
 * unreadable or answers another question.  The A records of @name and of
 * the CNAMEs reached from it (at most BOX_NFTABLES_DNS_MAX_ADDRS). */
gboolean        box_nftables_dns_read_answer  (const guint8 *msg, gsize len, const char *name,
                                               BoxNftablesDnsResult *result);
/* The nameserver addresses of a resolv.conf (NULL-terminated, maybe empty). */
char          **box_nftables_dns_parse_resolv_conf (const char *contents);
/* The default upstreams, from a resolv.conf's @contents: its nameservers
 * but the loopback (and unspecified) ones; when it has only those (a local
 * stub such as systemd-resolved's 127.0.0.53, which answers names of the
 * node's networks, VPNs, mDNS and LLMNR), the non-loopback ones of
 * @stub_contents (the stub's own upstreams,
 * BOX_NFTABLES_DNS_STUB_RESOLV_CONF), with *@from_stub set; when there
 * are none either, the loopback ones (a local resolver the operator runs:
 * used, its answers filtered like any).  Maybe empty. */
#define BOX_NFTABLES_DNS_STUB_RESOLV_CONF "/run/systemd/resolve/resolv.conf"
char          **box_nftables_dns_pick_upstreams    (const char *contents,
                                                    const char *stub_contents,
                                                    gboolean *from_stub);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNftablesDns, box_nftables_dns_free)

G_END_DECLS
