/* box-nftables-plugin.h: the `nftables` network plugin (internal to the
 * plugin and its tests; the .so exports only box_plugin_query). */
#pragma once

#include "box-network.h"
#include "box-nftables-egress.h"

G_BEGIN_DECLS

#define BOX_TYPE_NFTABLES_PLUGIN (box_nftables_plugin_get_type ())
G_DECLARE_FINAL_TYPE (BoxNftablesPlugin, box_nftables_plugin, BOX, NFTABLES_PLUGIN, BoxPlugin)

/* Test-only hook.  A tap's guest end is a file descriptor, so a test that
 * plays the guest with a network namespace needs another kind of link:
 * with a link function set, attach() calls @func to create the link named
 * @ifname (e.g. a veth pair whose peer goes into a namespace) instead of
 * creating a tap, and an existing link is not required to be a tap.
 * Everything else (addresses, sets, resolver, records) is the same. */
typedef gboolean (*BoxNftablesLinkFunc) (const char *ifname, const char *sandbox_id,
                                         gpointer user_data, GError **error);
void box_nftables_plugin_set_link_func (BoxNftablesPlugin *self, BoxNftablesLinkFunc func,
                                        gpointer user_data);

/* The registry where the resolver, the proxy and the kernel rules meet
 * (box-nftables-egress.h): made by start(), gone at stop(); NULL when
 * stopped. */
BoxNftablesEgress *box_nftables_plugin_get_egress (BoxNftablesPlugin *self);
/* How many of the kernel's refusals the NFLOG reader has read (tests). */
guint              box_nftables_plugin_get_refusals_read (BoxNftablesPlugin *self);

G_END_DECLS
