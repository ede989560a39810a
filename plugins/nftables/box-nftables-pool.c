/* box-nftables-pool.c: address pool, names and MACs; see box-nftables-pool.h. */
#include "config.h"

#include <arpa/inet.h>
#include <string.h>

#include "box-error.h"
#include "box-nftables-pool.h"

gboolean
box_nftables_ipv4_parse (const char *str, guint32 *addr)
{
  struct in_addr in;

  /* inet_pton accepts only the dotted-quad form, no "10.1" shorthand */
  if (str == NULL || inet_pton (AF_INET, str, &in) != 1)
    return FALSE;
  *addr = ntohl (in.s_addr);
  return TRUE;
}

char *
box_nftables_ipv4_to_string (guint32 addr)
{
  return g_strdup_printf ("%u.%u.%u.%u", (addr >> 24) & 0xff, (addr >> 16) & 0xff,
                          (addr >> 8) & 0xff, addr & 0xff);
}

guint32
box_nftables_prefix_mask (guint prefix)
{
  if (prefix == 0)
    return 0;
  if (prefix >= 32)
    return 0xffffffffu;
  return 0xffffffffu << (32 - prefix);
}

gboolean
box_nftables_cidr_parse (const char *str, guint32 *network, guint *prefix, GError **error)
{
  g_autofree char *addr_part = NULL;
  const char *slash;
  guint64 len = 32;
  guint32 addr;

  if (str == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, "no network given");
    return FALSE;
  }
  slash = strchr (str, '/');
  addr_part = slash != NULL ? g_strndup (str, slash - str) : g_strdup (str);
  if (!box_nftables_ipv4_parse (addr_part, &addr)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "\"%s\" is not an IPv4 network (want A.B.C.D/N)", str);
    return FALSE;
  }
  if (slash != NULL &&
      !g_ascii_string_to_unsigned (slash + 1, 10, 0, 32, &len, NULL)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "\"%s\": the prefix length must be 0 to 32", str);
    return FALSE;
  }
  if ((addr & ~box_nftables_prefix_mask ((guint) len)) != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "\"%s\" has host bits set", str);
    return FALSE;
  }
  *network = addr;
  *prefix = (guint) len;
  return TRUE;
}

gboolean
box_nftables_pool_init (BoxNftablesPool *pool, const char *cidr, guint subnet_prefix,
                        GError **error)
{
  guint32 base;
  guint prefix;

  if (subnet_prefix != 30 && subnet_prefix != 31) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "subnet prefix %u: only 30 and 31 are supported", subnet_prefix);
    return FALSE;
  }
  if (!box_nftables_cidr_parse (cidr, &base, &prefix, error))
    return FALSE;
  if (prefix > subnet_prefix) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "pool %s is smaller than one /%u subnet", cidr, subnet_prefix);
    return FALSE;
  }
  if (prefix < 8) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "pool %s is larger than a /8", cidr);
    return FALSE;
  }
  pool->base = base;
  pool->prefix = prefix;
  pool->subnet_prefix = subnet_prefix;
  return TRUE;
}

guint32
box_nftables_pool_n_subnets (const BoxNftablesPool *pool)
{
  return (guint32) 1 << (pool->subnet_prefix - pool->prefix);
}

void
box_nftables_pool_subnet (const BoxNftablesPool *pool, guint32 index, BoxNftablesSubnet *subnet)
{
  guint32 size = (guint32) 1 << (32 - pool->subnet_prefix);

  g_return_if_fail (index < box_nftables_pool_n_subnets (pool));
  subnet->network = pool->base + index * size;
  subnet->prefix = pool->subnet_prefix;
  if (pool->subnet_prefix == 31) {
    subnet->gateway = subnet->network;
    subnet->address = subnet->network + 1;
  } else {
    subnet->gateway = subnet->network + 1;
    subnet->address = subnet->network + 2;
  }
}

gboolean
box_nftables_pool_allocate (const BoxNftablesPool *pool, GPtrArray *used, guint32 *index,
                            GError **error)
{
  g_autoptr(GHashTable) taken = g_hash_table_new (NULL, NULL);
  guint32 n = box_nftables_pool_n_subnets (pool);
  guint shift = 32 - pool->subnet_prefix;
  guint64 pool_first = pool->base;
  guint64 pool_last = pool_first + ((guint64) 1 << (32 - pool->prefix)) - 1;
  guint32 i;

  /* Mark every pool index that a used subnet overlaps. */
  for (i = 0; used != NULL && i < used->len; i++) {
    const BoxNftablesSubnet *subnet = g_ptr_array_index (used, i);
    guint64 first = subnet->network & box_nftables_prefix_mask (subnet->prefix);
    guint64 last = first + ((guint64) 1 << (32 - MIN (subnet->prefix, 32))) - 1;
    guint64 j;

    if (last < pool_first || first > pool_last)
      continue;
    first = MAX (first, pool_first);
    last = MIN (last, pool_last);
    for (j = (first - pool_first) >> shift; j <= (last - pool_first) >> shift; j++)
      g_hash_table_add (taken, GUINT_TO_POINTER ((guint) j + 1));
  }
  for (i = 0; i < n; i++) {
    if (!g_hash_table_contains (taken, GUINT_TO_POINTER (i + 1))) {
      *index = i;
      return TRUE;
    }
  }
  g_set_error (error, BOX_ERROR, BOX_ERROR_CAPACITY,
               "the sandbox address pool is full (%u subnets)", n);
  return FALSE;
}

gboolean
box_nftables_ifname_prefix_is_valid (const char *prefix)
{
  gsize len = prefix != NULL ? strlen (prefix) : 0;

  if (len < 1 || len > 3)
    return FALSE;
  for (gsize i = 0; i < len; i++) {
    if (!g_ascii_islower (prefix[i]))
      return FALSE;
  }
  return TRUE;
}

static gboolean
is_sandbox_id (const char *id)
{
  if (!g_str_has_prefix (id, "sb-") || strlen (id) != 15)
    return FALSE;
  for (const char *p = id + 3; *p != '\0'; p++) {
    if (!g_ascii_islower (*p) && !(*p >= '2' && *p <= '7'))
      return FALSE;
  }
  return TRUE;
}

char *
box_nftables_ifname_for_id (const char *prefix, const char *sandbox_id, guint attempt)
{
  g_autofree char *input = NULL;
  g_autofree char *digest = NULL;

  g_return_val_if_fail (box_nftables_ifname_prefix_is_valid (prefix), NULL);
  g_return_val_if_fail (sandbox_id != NULL, NULL);

  if (attempt == 0 && is_sandbox_id (sandbox_id))
    return g_strconcat (prefix, sandbox_id + 3, NULL);
  input = g_strdup_printf ("%s:%u", sandbox_id, attempt);
  digest = g_compute_checksum_for_string (G_CHECKSUM_SHA256, input, -1);
  digest[12] = '\0';
  return g_strconcat (prefix, digest, NULL);
}

char *
box_nftables_mac_for_id (const char *sandbox_id)
{
  g_autoptr(GChecksum) checksum = g_checksum_new (G_CHECKSUM_SHA256);
  guint8 digest[32];
  gsize len = sizeof digest;

  g_checksum_update (checksum, (const guchar *) sandbox_id, -1);
  g_checksum_get_digest (checksum, digest, &len);
  return g_strdup_printf ("52:54:00:%02x:%02x:%02x", digest[0], digest[1], digest[2]);
}
