/* box-nftables-dns-cache.h: the filtering resolver's answer cache.
 *
 * Name -> (RCODE, public IPv4 addresses) until the answer's TTL runs out,
 * bounded in entries and in bytes; when full, the oldest insertions go
 * first (expired entries before them).  The TTL is clamped to
 * [BOX_NFTABLES_DNS_TTL_MIN, BOX_NFTABLES_DNS_TTL_MAX] on insertion.
 * Safe from any thread (one lock).  @now_s is a monotonic time in seconds,
 * given by the caller so that tests can move time.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define BOX_NFTABLES_DNS_TTL_MIN         5
#define BOX_NFTABLES_DNS_TTL_MAX         3600
#define BOX_NFTABLES_DNS_CACHE_ENTRIES   8192
#define BOX_NFTABLES_DNS_CACHE_BYTES     (2 * 1024 * 1024)

typedef struct _BoxNftablesDnsCache BoxNftablesDnsCache;

BoxNftablesDnsCache *box_nftables_dns_cache_new    (guint max_entries, gsize max_bytes);
void                 box_nftables_dns_cache_free   (BoxNftablesDnsCache *cache);
/* TRUE when @name has a fresh entry: its RCODE, addresses (copied into
 * @addrs, at most @max_addrs) and remaining TTL (at least 1). */
gboolean             box_nftables_dns_cache_lookup (BoxNftablesDnsCache *cache, const char *name,
                                                    gint64 now_s, guint8 *rcode, guint32 *addrs,
                                                    guint max_addrs, guint *n_addrs,
                                                    guint32 *ttl);
/* Stores (or replaces) @name's answer; returns the clamped TTL. */
guint32              box_nftables_dns_cache_insert (BoxNftablesDnsCache *cache, const char *name,
                                                    gint64 now_s, guint8 rcode,
                                                    const guint32 *addrs, guint n_addrs,
                                                    guint32 ttl);
guint                box_nftables_dns_cache_get_size  (BoxNftablesDnsCache *cache);
gsize                box_nftables_dns_cache_get_bytes (BoxNftablesDnsCache *cache);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNftablesDnsCache, box_nftables_dns_cache_free)

G_END_DECLS
