/* box-nftables-dns.h: the sandboxes' resolver, a small DNS forwarder.
 *
 * Sandboxes are told to use their gateway as resolver; nftables redirects
 * udp/tcp 53 to the gateway onto this forwarder's port, and the forwarder
 * relays queries to the node's upstream resolvers (those of
 * /etc/resolv.conf, re-read when it changes, or the configured ones).  It
 * runs on its own thread with its own main context, answers only the guest
 * addresses it was told about (box_nftables_dns_allow), and knows for each
 * query which sandbox asked (the source address: taps are anti-spoofed in
 * nftables).  Each sandbox gets a fair share of the pending queries and of
 * the TCP slots, and an answer with an internal address in it is replaced
 * by REFUSED (the specification's "never answers with a private
 * address").  The later egress engine turns it into the filtering resolver
 * the specification asks for (REFUSED for names the rules do not allow);
 * see README.md.
 */
#pragma once

#include <gio/gio.h>

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
/* The nameserver addresses of a resolv.conf (NULL-terminated, maybe empty). */
char          **box_nftables_dns_parse_resolv_conf (const char *contents);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNftablesDns, box_nftables_dns_free)

G_END_DECLS
