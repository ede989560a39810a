/* box-nftables-dns-cache.c: the resolver's bounded TTL cache; see
 * box-nftables-dns-cache.h. */
#include "config.h"

#include <string.h>

#include "box-nftables-dns-cache.h"

typedef struct {
  char    *name;
  GList   *link;       /* in cache->order */
  gint64   expires;
  guint8   rcode;
  guint    n_addrs;
  guint32  addrs[];
} Entry;

struct _BoxNftablesDnsCache {
  GMutex      lock;
  GHashTable *entries;   /* name -> Entry* (owned) */
  GQueue      order;     /* Entry*, oldest insertion first */
  guint       max_entries;
  gsize       max_bytes;
  gsize       bytes;
  gint64      swept;     /* when expired entries were last dropped (s) */
};

static gsize
entry_cost (const Entry *e)
{
  return sizeof (Entry) + e->n_addrs * sizeof (guint32) + strlen (e->name) + 1 +
         sizeof (GList) + 32;   /* and roughly the hash table's slot */
}

static void
entry_drop (BoxNftablesDnsCache *cache, Entry *e)
{
  cache->bytes -= entry_cost (e);
  g_queue_delete_link (&cache->order, e->link);
  g_hash_table_remove (cache->entries, e->name);   /* frees e */
}

static void
entry_free (Entry *e)
{
  g_free (e->name);
  g_free (e);
}

BoxNftablesDnsCache *
box_nftables_dns_cache_new (guint max_entries, gsize max_bytes)
{
  BoxNftablesDnsCache *cache = g_new0 (BoxNftablesDnsCache, 1);

  g_mutex_init (&cache->lock);
  cache->entries = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                          (GDestroyNotify) entry_free);
  g_queue_init (&cache->order);
  cache->max_entries = MAX (1, max_entries);
  cache->max_bytes = max_bytes;
  return cache;
}

void
box_nftables_dns_cache_free (BoxNftablesDnsCache *cache)
{
  if (cache == NULL)
    return;
  g_queue_clear (&cache->order);
  g_hash_table_unref (cache->entries);
  g_mutex_clear (&cache->lock);
  g_free (cache);
}

gboolean
box_nftables_dns_cache_lookup (BoxNftablesDnsCache *cache, const char *name, gint64 now_s,
                               guint8 *rcode, guint32 *addrs, guint max_addrs, guint *n_addrs,
                               guint32 *ttl)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&cache->lock);
  Entry *e = g_hash_table_lookup (cache->entries, name);

  if (e == NULL)
    return FALSE;
  if (e->expires <= now_s) {
    entry_drop (cache, e);
    return FALSE;
  }
  *rcode = e->rcode;
  *n_addrs = MIN (e->n_addrs, max_addrs);
  memcpy (addrs, e->addrs, *n_addrs * sizeof (guint32));
  *ttl = (guint32) (e->expires - now_s);
  return TRUE;
}

guint32
box_nftables_dns_cache_insert (BoxNftablesDnsCache *cache, const char *name, gint64 now_s,
                               guint8 rcode, const guint32 *addrs, guint n_addrs, guint32 ttl)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&cache->lock);
  Entry *e, *old;

  ttl = CLAMP (ttl, BOX_NFTABLES_DNS_TTL_MIN, BOX_NFTABLES_DNS_TTL_MAX);
  old = g_hash_table_lookup (cache->entries, name);
  if (old != NULL)
    entry_drop (cache, old);
  e = g_malloc0 (sizeof (Entry) + n_addrs * sizeof (guint32));
  e->name = g_strdup (name);
  e->expires = now_s + ttl;
  e->rcode = rcode;
  e->n_addrs = n_addrs;
  if (n_addrs > 0)   /* a negative answer comes with addrs NULL */
    memcpy (e->addrs, addrs, n_addrs * sizeof (guint32));
  if (entry_cost (e) > cache->max_bytes) {
    entry_free (e);
    return ttl;
  }
  /* room: expired entries first, then the oldest.  The walk over every
   * entry is done at most once a second, so that a full cache does not
   * cost each insert a walk over all of it; nothing is lost by that: within
   * the second of a walk nothing else expires (every TTL is >= 5 s) */
  if ((g_hash_table_size (cache->entries) >= cache->max_entries ||
       cache->bytes + entry_cost (e) > cache->max_bytes) && now_s != cache->swept) {
    cache->swept = now_s;
    for (GList *l = cache->order.head; l != NULL;) {
      Entry *victim = l->data;

      l = l->next;
      if (victim->expires <= now_s)
        entry_drop (cache, victim);
    }
  }
  while (g_hash_table_size (cache->entries) >= cache->max_entries ||
         cache->bytes + entry_cost (e) > cache->max_bytes)
    entry_drop (cache, g_queue_peek_head (&cache->order));
  g_queue_push_tail (&cache->order, e);
  e->link = cache->order.tail;
  g_hash_table_insert (cache->entries, e->name, e);
  cache->bytes += entry_cost (e);
  return ttl;
}

guint
box_nftables_dns_cache_get_size (BoxNftablesDnsCache *cache)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&cache->lock);

  return g_hash_table_size (cache->entries);
}

gsize
box_nftables_dns_cache_get_bytes (BoxNftablesDnsCache *cache)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&cache->lock);

  return cache->bytes;
}
