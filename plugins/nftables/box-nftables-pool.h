/* box-nftables-pool.h: pure helpers of the nftables plugin: the address
 * pool carved into point-to-point subnets, interface names and MAC
 * addresses derived from sandbox IDs, IPv4/CIDR parsing.  No kernel calls;
 * tested in nftables-test.c. */
#pragma once

#include "box-plugin-context.h"   /* box_sandbox_id_is_valid() */

#include <glib.h>

G_BEGIN_DECLS

/* Addresses are in host byte order throughout. */
typedef struct {
  guint32 base;           /* the pool's network address */
  guint   prefix;         /* the pool's prefix length, e.g. 16 */
  guint   subnet_prefix;  /* 30 or 31: the size of each sandbox's subnet */
} BoxNftablesPool;

typedef struct {
  guint32 network;
  guint32 gateway;        /* the host side of the tap */
  guint32 address;        /* the guest */
  guint   prefix;
} BoxNftablesSubnet;

gboolean  box_nftables_ipv4_parse      (const char *str, guint32 *addr);
char     *box_nftables_ipv4_to_string  (guint32 addr);
/* "A.B.C.D/N" (or a bare address, /32); the address must be the network's
 * first address (no host bits set). */
gboolean  box_nftables_cidr_parse      (const char *str, guint32 *network, guint *prefix,
                                        GError **error);
guint32   box_nftables_prefix_mask     (guint prefix);

gboolean  box_nftables_pool_init       (BoxNftablesPool *pool, const char *cidr,
                                        guint subnet_prefix, GError **error);
/* How many subnets the pool holds. */
guint32   box_nftables_pool_n_subnets  (const BoxNftablesPool *pool);
/* The subnet at @index (< n_subnets).  /30: network, gateway .1, guest .2;
 * /31 (RFC 3021): gateway .0, guest .1. */
void      box_nftables_pool_subnet     (const BoxNftablesPool *pool, guint32 index,
                                        BoxNftablesSubnet *subnet);
/* The lowest index whose subnet overlaps none of @used (BoxNftablesSubnet*,
 * whatever their prefix: records made under another pool configuration
 * still count).  FALSE with BOX_ERROR_CAPACITY when the pool is full. */
gboolean  box_nftables_pool_allocate   (const BoxNftablesPool *pool, GPtrArray *used,
                                        guint32 *index, GError **error);

/* Interface name for @sandbox_id: @prefix (1-3 chars) + 12 chars, at most
 * 15 in all.  "sb-" + 12 lowercase base32 IDs give prefix + those 12 chars
 * (the name shows the sandbox) on attempt 0; other IDs, and every later
 * attempt (a name already taken), give prefix + 12 hex digits of
 * SHA-256(id ":" attempt). */
char     *box_nftables_ifname_for_id   (const char *prefix, const char *sandbox_id,
                                        guint attempt);
gboolean  box_nftables_ifname_prefix_is_valid (const char *prefix);
/* "52:54:00:xx:xx:xx", the last three bytes from SHA-256(id).  Each tap is
 * its own point-to-point link, so a clash between two sandboxes is harmless. */
char     *box_nftables_mac_for_id      (const char *sandbox_id);
/* Sandbox IDs become file names: [a-z0-9-], 1-64 chars. */

G_END_DECLS
