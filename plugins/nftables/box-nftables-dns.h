/* box-nftables-dns.h: the sandboxes' resolver, a small DNS forwarder.
 *
 * Sandboxes are told to use their gateway as resolver; nftables redirects
 * udp/tcp 53 to the gateway onto this forwarder's port, and the forwarder
 * relays queries to the node's upstream resolvers (those of
 * /etc/resolv.conf, re-read when it changes, or the configured ones).  It
 * runs on its own thread with its own main context, answers only the guest
 * addresses it was told about (box_nftables_dns_allow), and knows for each
 * query which sandbox asked (the source address: taps are anti-spoofed in
 * nftables).  The later egress engine turns it into the filtering resolver
 * the specification asks for (REFUSED for names the rules do not allow, no
 * private addresses in answers); see README.md.
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

typedef struct _BoxNftablesDns BoxNftablesDns;

/* Binds 0.0.0.0:@port for UDP and TCP and starts the thread.  @upstreams
 * ("A.B.C.D", "A.B.C.D:port", "[v6]:port"), or NULL/empty for the
 * nameservers of @resolv_conf (NULL: /etc/resolv.conf). */
BoxNftablesDns *box_nftables_dns_new     (guint16 port, const char *const *upstreams,
                                          const char *resolv_conf, GError **error);
void            box_nftables_dns_free    (BoxNftablesDns *dns);
/* Guest addresses (host byte order) the forwarder answers. */
void            box_nftables_dns_allow   (BoxNftablesDns *dns, guint32 address);
void            box_nftables_dns_forget  (BoxNftablesDns *dns, guint32 address);
/* The upstreams in use now, as text (for the status and the log). */
char           *box_nftables_dns_describe_upstreams (BoxNftablesDns *dns);

/* Pure helpers, exposed for tests. */
/* Offset just past the question section of a DNS message with exactly one
 * question, or -1 when it is malformed. */
gssize          box_nftables_dns_question_end (const guint8 *msg, gsize len);
/* A SERVFAIL answer to @query (header + its question), or NULL when the
 * query is malformed. */
GBytes         *box_nftables_dns_servfail     (const guint8 *query, gsize len);
/* The nameserver addresses of a resolv.conf (NULL-terminated, maybe empty). */
char          **box_nftables_dns_parse_resolv_conf (const char *contents);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNftablesDns, box_nftables_dns_free)

G_END_DECLS
