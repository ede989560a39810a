/* box-nftables-history.c: resolved names per guest; see box-nftables-history.h. */
#include "config.h"

#include "box-nftables-history.h"
#include "box-nftables-ruleset.h"

typedef struct {
  char    *name;
  guint32  addr;
  gint64   expiry;   /* monotonic, microseconds */
} Item;

struct _BoxNftablesHistory {
  char       *table;
  GHashTable *guests;   /* GUINT_TO_POINTER (guest) -> GHashTable "name/addr" -> Item* */
};

static void
item_free (Item *item)
{
  g_free (item->name);
  g_free (item);
}

BoxNftablesHistory *
box_nftables_history_new (const char *table)
{
  BoxNftablesHistory *history = g_new0 (BoxNftablesHistory, 1);

  history->table = g_strdup (table);
  history->guests = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL,
                                           (GDestroyNotify) g_hash_table_unref);
  return history;
}

void
box_nftables_history_free (BoxNftablesHistory *history)
{
  if (history == NULL)
    return;
  g_hash_table_unref (history->guests);
  g_free (history->table);
  g_free (history);
}

static GHashTable *
guest_items (BoxNftablesHistory *history, guint32 guest, gboolean create)
{
  GHashTable *items = g_hash_table_lookup (history->guests, GUINT_TO_POINTER (guest));

  if (items == NULL && create) {
    items = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) item_free);
    g_hash_table_insert (history->guests, GUINT_TO_POINTER (guest), items);
  }
  return items;
}

static gboolean
is_proxied (guint16 port)
{
  return port == 80 || port == 443;
}

/* port -> latest expiry of the unexpired names for @addr allowed on it */
static GHashTable *
allowed_ports (GHashTable *items, BoxEgressPolicy *policy, guint32 addr, gint64 now)
{
  GHashTable *ports = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  GHashTableIter iter;
  gpointer value;

  if (items == NULL || policy == NULL || !box_egress_policy_is_restricted (policy))
    return ports;
  g_hash_table_iter_init (&iter, items);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    const Item *item = value;
    g_autoptr(GArray) allowed = NULL;

    if (item->addr != addr || item->expiry <= now)
      continue;
    allowed = box_egress_policy_get_ports (policy, item->name);
    for (guint i = 0; i < allowed->len; i++) {
      guint port = g_array_index (allowed, guint16, i);
      gint64 *expiry = g_hash_table_lookup (ports, GUINT_TO_POINTER (port));

      if (is_proxied ((guint16) port))
        continue;
      if (expiry == NULL) {
        expiry = g_new (gint64, 1);
        *expiry = item->expiry;
        g_hash_table_insert (ports, GUINT_TO_POINTER (port), expiry);
      }
      *expiry = MAX (*expiry, item->expiry);
    }
  }
  return ports;
}

/* Makes @addr's elements what @policy says; the ports in @clear (a set,
 * or NULL) that it does not allow are removed. */
static void
refresh_addr (BoxNftablesHistory *history, guint32 guest, GHashTable *items,
              BoxEgressPolicy *policy, guint32 addr, GHashTable *clear, gint64 now, GString *out)
{
  g_autoptr(GHashTable) ports = allowed_ports (items, policy, addr, now);
  GHashTableIter iter;
  gpointer key, value;

  if (clear != NULL) {
    g_hash_table_iter_init (&iter, clear);
    while (g_hash_table_iter_next (&iter, &key, NULL)) {
      if (!g_hash_table_contains (ports, key))
        box_nftables_ruleset_append_resolved (out, history->table, guest, addr,
                                              (guint16) GPOINTER_TO_UINT (key), 0);
    }
  }
  g_hash_table_iter_init (&iter, ports);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    gint64 left = *(gint64 *) value - now;
    guint timeout_s = (guint) ((left + G_USEC_PER_SEC - 1) / G_USEC_PER_SEC);

    box_nftables_ruleset_append_resolved (out, history->table, guest, addr,
                                          (guint16) GPOINTER_TO_UINT (key), MAX (timeout_s, 1));
  }
}

static void
evict_one (BoxNftablesHistory *history, guint32 guest, GHashTable *items,
           BoxEgressPolicy *policy, gint64 now, GString *out)
{
  GHashTableIter iter;
  gpointer key, value;
  const char *victim = NULL;
  gint64 soonest = G_MAXINT64;
  guint32 addr = 0;
  g_autoptr(GHashTable) clear = NULL;

  /* the expired ones first: their elements timed out already */
  g_hash_table_iter_init (&iter, items);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    if (((Item *) value)->expiry <= now)
      g_hash_table_iter_remove (&iter);
  }
  if (g_hash_table_size (items) < BOX_NFTABLES_HISTORY_MAX)
    return;
  g_hash_table_iter_init (&iter, items);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    const Item *item = value;
    if (item->expiry < soonest) {
      soonest = item->expiry;
      victim = key;
      addr = item->addr;
    }
  }
  clear = allowed_ports (items, policy, addr, now);
  g_hash_table_remove (items, victim);
  refresh_addr (history, guest, items, policy, addr, clear, now, out);
}

void
box_nftables_history_add (BoxNftablesHistory *history, guint32 guest, BoxEgressPolicy *policy,
                          const char *name, const guint32 *addrs, guint n_addrs, guint32 ttl_s,
                          gint64 now, GString *out)
{
  GHashTable *items = guest_items (history, guest, TRUE);
  gint64 expiry = now + (gint64) CLAMP (ttl_s, BOX_NFTABLES_TTL_MIN_S,
                                        BOX_NFTABLES_TTL_MAX_S) * G_USEC_PER_SEC;

  g_return_if_fail (name != NULL);
  for (guint i = 0; i < n_addrs; i++) {
    g_autofree char *key = g_strdup_printf ("%s/%08x", name, addrs[i]);
    Item *item = g_hash_table_lookup (items, key);

    if (item == NULL) {
      if (g_hash_table_size (items) >= BOX_NFTABLES_HISTORY_MAX)
        evict_one (history, guest, items, policy, now, out);
      item = g_new0 (Item, 1);
      item->name = g_strdup (name);
      item->addr = addrs[i];
      g_hash_table_insert (items, g_steal_pointer (&key), item);
    }
    item->expiry = MAX (item->expiry, expiry);
    refresh_addr (history, guest, items, policy, addrs[i], NULL, now, out);
  }
}

void
box_nftables_history_rebuild (BoxNftablesHistory *history, guint32 guest, BoxEgressPolicy *old,
                              BoxEgressPolicy *new, gint64 now, GString *out)
{
  GHashTable *items = guest_items (history, guest, FALSE);
  g_autoptr(GHashTable) addrs = g_hash_table_new (NULL, NULL);
  GHashTableIter iter;
  gpointer key, value;

  if (items == NULL)
    return;
  /* expired items stay (until evicted, the expired first): they have no
   * elements left, but they tell which established connections the rules
   * still allow (box_nftables_history_allows() with G_MININT64) */
  g_hash_table_iter_init (&iter, items);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    if (((Item *) value)->expiry > now)
      g_hash_table_add (addrs, GUINT_TO_POINTER (((Item *) value)->addr));
  }
  g_hash_table_iter_init (&iter, addrs);
  while (g_hash_table_iter_next (&iter, &key, NULL)) {
    guint32 addr = GPOINTER_TO_UINT (key);
    g_autoptr(GHashTable) clear = allowed_ports (items, old, addr, now);

    refresh_addr (history, guest, items, new, addr, clear, now, out);
  }
}

gboolean
box_nftables_history_allows (BoxNftablesHistory *history, guint32 guest, BoxEgressPolicy *policy,
                             guint32 addr, guint16 port, gint64 now)
{
  g_autoptr(GHashTable) ports = allowed_ports (guest_items (history, guest, FALSE), policy, addr,
                                               now);

  return g_hash_table_contains (ports, GUINT_TO_POINTER ((guint) port));
}

void
box_nftables_history_forget (BoxNftablesHistory *history, guint32 guest)
{
  g_hash_table_remove (history->guests, GUINT_TO_POINTER (guest));
}

guint
box_nftables_history_count (BoxNftablesHistory *history, guint32 guest)
{
  GHashTable *items = guest_items (history, guest, FALSE);

  return items != NULL ? g_hash_table_size (items) : 0;
}
