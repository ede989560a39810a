/* box-nftables-link.h: the kernel side of a sandbox's interface.
 *
 * Taps through /dev/net/tun (TUNSETIFF, TUNSETPERSIST), everything else
 * through rtnetlink (never the ioctl address calls, which would put a
 * classful /8 route on the link for a moment), all in the calling
 * thread's network namespace.  Blocking but quick. */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* 0 when there is no such link. */
guint    box_nftables_link_index        (const char *ifname);
/* TRUE when @ifname is a tap device (driver "tun", bus "tap"). */
gboolean box_nftables_link_is_tap       (const char *ifname);
/* A persistent tap: IFF_TAP | IFF_NO_PI | IFF_VNET_HDR, single queue;
 * @owner (uid) may open it without CAP_NET_ADMIN unless (uid_t) -1. */
gboolean box_nftables_link_create_tap   (const char *ifname, uid_t owner, GError **error);
/* Sets @address/@prefix on the link (replacing the same address). */
gboolean box_nftables_link_set_address  (const char *ifname, guint32 address, guint prefix,
                                         GError **error);
gboolean box_nftables_link_set_up       (const char *ifname, gboolean up, GError **error);
/* TRUE also when the link is not there. */
gboolean box_nftables_link_delete       (const char *ifname, GError **error);
/* net.ipv6.conf.<ifname>.disable_ipv6 = 1 */
gboolean box_nftables_link_disable_ipv6 (const char *ifname, GError **error);
/* TRUE when the caller may change the network (root or CAP_NET_ADMIN). */
gboolean box_nftables_have_net_admin    (void);
/* Whether @address (IPv4, host byte order) is one of this node's own, in
 * the caller's network namespace: a bind(2) test (EADDRNOTAVAIL: not
 * ours), confirmed by the interface list when the bind succeeds, since
 * net.ipv4.ip_nonlocal_bind lets any bind succeed.  TRUE when it cannot
 * tell (fail closed). */
gboolean box_nftables_address_is_local (guint32 address);
/* net.ipv4.ip_unprivileged_port_start (1024 when it cannot be read). */
guint    box_nftables_unprivileged_port_start (void);
/* net.ipv4.ip_forward = 1; *changed says whether it was off.  boxd.service
 * makes /proc/sys read-only (ProtectKernelTunables): there the set-up
 * (tools/setup.sh) turns it on and this only checks. */
gboolean box_nftables_enable_forwarding (gboolean *changed, GError **error);

G_END_DECLS
