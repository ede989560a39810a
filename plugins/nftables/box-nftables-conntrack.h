/* box-nftables-conntrack.h: ends a guest's established TCP connections
 * that new egress rules no longer allow, by deleting their conntrack
 * entries (libnetfilter_conntrack).  The guest's next packet on such a
 * connection is then a new one to the ruleset, which refuses it with a
 * reset unless the destination is allowed again.  Blocking (netlink); any
 * thread. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* TRUE: the guest may keep its connection to @daddr:@dport (host order). */
typedef gboolean (*BoxNftablesKeepFunc) (guint32 daddr, guint16 dport, gpointer user_data);

/* Deletes the conntrack entries of TCP connections that @guest (host byte
 * order) opened, other than to ports 80 and 443 and other than those
 * redirected to the node (the resolver and the proxy judge those
 * themselves), for which @keep answers FALSE.  Returns how many were deleted,
 * or -1 with @error. */
gint box_nftables_conntrack_cut (guint32 guest, BoxNftablesKeepFunc keep, gpointer user_data,
                                 GError **error);

G_END_DECLS
