/* box-nftables-history.h: what each restricted guest resolved, and the
 * @resolved set elements that follows from it (the "other ports" rule).
 *
 * The resolver reports (guest, name, addresses, TTL).  Each (name, address)
 * is kept until its expiry, at most BOX_NFTABLES_HISTORY_MAX per guest, so
 * that the elements can be computed again under new rules: for an address,
 * the element guest . address . port exists while some unexpired name that
 * resolved to it is allowed on that port (80 and 443 excepted: the proxy
 * checks those by name), with the latest expiry of those names as its
 * timeout.  Not thread-safe: the plugin's lock guards it.  The functions
 * append nftables commands to @out; the caller runs them (one transaction).
 */
#pragma once

#include <glib.h>

#include "box-egress-policy.h"

G_BEGIN_DECLS

/* (name, address) pairs kept per guest; beyond, the soonest to expire goes */
#define BOX_NFTABLES_HISTORY_MAX     1024
/* an answer's TTL is clamped to this range for the set's timeouts */
#define BOX_NFTABLES_TTL_MIN_S       2
#define BOX_NFTABLES_TTL_MAX_S       86400

typedef struct _BoxNftablesHistory BoxNftablesHistory;

BoxNftablesHistory *box_nftables_history_new     (const char *table);
void                box_nftables_history_free    (BoxNftablesHistory *history);

/* @guest resolved @name to @addrs (host byte order) for @ttl_s seconds,
 * under @policy (restricted).  @now: g_get_monotonic_time(). */
void     box_nftables_history_add      (BoxNftablesHistory *history, guint32 guest,
                                        BoxEgressPolicy *policy, const char *name,
                                        const guint32 *addrs, guint n_addrs, guint32 ttl_s,
                                        gint64 now, GString *out);
/* The guest's rules changed from @old (NULL: none) to @new (NULL or
 * unrestricted: every element goes): its elements are made again. */
void     box_nftables_history_rebuild  (BoxNftablesHistory *history, guint32 guest,
                                        BoxEgressPolicy *old, BoxEgressPolicy *new,
                                        gint64 now, GString *out);
/* Whether a connection from @guest to @addr:@port is allowed under
 * @policy by some name that resolved to @addr and had not expired at @now
 * (G_MININT64: expired or not, for established connections). */
gboolean box_nftables_history_allows   (BoxNftablesHistory *history, guint32 guest,
                                        BoxEgressPolicy *policy, guint32 addr, guint16 port,
                                        gint64 now);
/* The guest is gone (detach); its elements time out or went with it. */
void     box_nftables_history_forget   (BoxNftablesHistory *history, guint32 guest);
guint    box_nftables_history_count    (BoxNftablesHistory *history, guint32 guest);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNftablesHistory, box_nftables_history_free)

G_END_DECLS
