/* box-nftables-egress.h: who may go where, shared by the plugin's threads.
 *
 * The egress engine has three parts that run on different threads: the
 * resolver (box-nftables-dns.c), the name-checking proxy for ports 80 and
 * 443 (box-nftables-proxy.c) and the kernel rules (box-nftables-plugin.c,
 * box-nftables-ruleset.c).  They meet here:
 *
 *  - the plugin registers each attached sandbox by its guest address (the
 *    taps are anti-spoofed, so a source address names a sandbox) with its
 *    compiled policy, or NULL for an unrestricted sandbox;
 *  - the resolver and the proxy look a guest address up;
 *  - the resolver reports what a restricted sandbox resolved (name,
 *    addresses, TTL) and the plugin turns it into nftables set elements
 *    with timeouts (the "other ports" rule);
 *  - the proxy asks the node's resolver for a name's addresses;
 *  - the resolver and the proxy report refused connections, which are
 *    logged per sandbox at a bounded rate.
 *
 * Every function is safe from any thread; callbacks run on the caller's
 * thread and must not block.
 */
#pragma once

#include <glib.h>

#include "box-egress-policy.h"

G_BEGIN_DECLS

typedef struct _BoxNftablesEgress BoxNftablesEgress;

/* A restricted sandbox resolved @name to @addrs (IPv4, host byte order,
 * public ones only), valid for @ttl_s seconds. */
typedef void (*BoxNftablesResolvedFunc) (guint32 guest, const char *name, const guint32 *addrs,
                                         guint n_addrs, guint32 ttl_s, gpointer user_data);
/* The end of a node-side resolution: the name's public IPv4 addresses
 * (host byte order) and their TTL, or @error.  Any thread. */
typedef void (*BoxNftablesResolveDone) (const guint32 *addrs, guint n_addrs, guint32 ttl_s,
                                        const GError *error, gpointer done_data);
/* Starts a node-side resolution of @name for the sandbox whose guest
 * address is @guest (its share of the resolver's work); calls @done
 * exactly once. */
typedef void (*BoxNftablesResolveFunc) (guint32 guest, const char *name,
                                        BoxNftablesResolveDone done, gpointer done_data,
                                        gpointer user_data);
/* A log line (already rate-limited). */
typedef void (*BoxNftablesLogFunc) (const char *line, gpointer user_data);

BoxNftablesEgress *box_nftables_egress_new    (void);
void               box_nftables_egress_free   (BoxNftablesEgress *egress);

/* Registers (or updates) the sandbox whose guest address is @guest (host
 * byte order); @policy NULL or unrestricted: the whole internet.  Bumps
 * the generation. */
void     box_nftables_egress_set        (BoxNftablesEgress *egress, guint32 guest,
                                         const char *sandbox_id, BoxEgressPolicy *policy);
void     box_nftables_egress_remove     (BoxNftablesEgress *egress, guint32 guest);
/* FALSE for an unknown guest.  Otherwise TRUE, with (both optional,
 * transfer full) its policy (NULL when unrestricted) and sandbox id. */
gboolean box_nftables_egress_lookup     (BoxNftablesEgress *egress, guint32 guest,
                                         BoxEgressPolicy **policy, char **sandbox_id);
/* Grows by one at every set and remove: a holder of an old policy (an open
 * proxied connection) compares it to know when to check again. */
guint64  box_nftables_egress_get_generation (BoxNftablesEgress *egress);

void     box_nftables_egress_set_resolved_func (BoxNftablesEgress *egress,
                                                BoxNftablesResolvedFunc func, gpointer user_data);
void     box_nftables_egress_report_resolved   (BoxNftablesEgress *egress, guint32 guest,
                                                const char *name, const guint32 *addrs,
                                                guint n_addrs, guint32 ttl_s);

void     box_nftables_egress_set_resolver (BoxNftablesEgress *egress, BoxNftablesResolveFunc func,
                                           gpointer user_data);
/* For @guest's connection.  Without a resolver set, @done gets an error
 * at once. */
void     box_nftables_egress_resolve      (BoxNftablesEgress *egress, guint32 guest,
                                           const char *name, BoxNftablesResolveDone done,
                                           gpointer done_data);

void     box_nftables_egress_set_log_func (BoxNftablesEgress *egress, BoxNftablesLogFunc func,
                                           gpointer user_data);
/* A refused connection or query: @kind is "dns", "http", "tls" or "tcp",
 * @name may be NULL (a TLS hello without a server name), @port 0 for DNS.
 * Logged as "egress refused: sandbox <id> <kind> <name>:<port>", at most
 * BOX_NFTABLES_EGRESS_LOG_BURST lines per sandbox per minute, then one
 * line saying how many more were refused. */
#define BOX_NFTABLES_EGRESS_LOG_BURST 20
void     box_nftables_egress_report_refused (BoxNftablesEgress *egress, guint32 guest,
                                             const char *kind, const char *name, guint16 port);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNftablesEgress, box_nftables_egress_free)

G_END_DECLS
