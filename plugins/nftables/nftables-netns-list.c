/* nftables-netns-list.c: the addresses a restricted sandbox may reach on
 * other ports, read back from a real `resolved` set (nftables-netns-test.c
 * runs this after setup): elements added by hand with timeouts, listed
 * through BoxNetwork's list_allowed for each sandbox, the other sandbox's
 * elements kept out, an expired element gone, an unknown sandbox refused.
 */
#include "config.h"

#include <string.h>

#include "box-nftables-list.h"
#include "nftables-netns-test.h"

static GPtrArray *
allowed_of (const char *id)
{
  g_autoptr(GError) error = NULL;
  GPtrArray *list = box_network_list_allowed (BOX_NETWORK (world.plugin), id, &error);

  g_assert_no_error (error);
  g_assert_nonnull (list);
  return list;
}

static void
assert_entry (GPtrArray *list, guint i, const char *address, guint16 port, guint min_s,
              guint max_s)
{
  const BoxNetAllowed *entry;

  g_assert_cmpuint (i, <, list->len);
  entry = g_ptr_array_index (list, i);
  g_assert_cmpstr (entry->address, ==, address);
  g_assert_cmpuint (entry->port, ==, port);
  g_assert_cmpuint (entry->expires_s, >=, min_s);
  g_assert_cmpuint (entry->expires_s, <=, max_s);
}

void
list_allowed_in_world (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) empty = NULL;
  g_autoptr(GPtrArray) a = NULL;
  g_autoptr(GPtrArray) b = NULL;
  g_autoptr(GPtrArray) later = NULL;
  g_autoptr(GPtrArray) direct = NULL;
  g_autofree char *add = NULL;

  /* the set as the egress ruleset declares it (`add` keeps one that is there) */
  g_assert_true (box_nftables_nft_run (world.nft,
                                       "add set inet box resolved { type ipv4_addr . ipv4_addr . "
                                       "inet_service; flags timeout; }\n"
                                       "flush set inet box resolved\n", &error));
  g_assert_no_error (error);
  empty = allowed_of (ID_A);
  g_assert_cmpuint (empty->len, ==, 0);

  add = g_strdup_printf ("add element inet box resolved { "
                         "%s . 203.0.113.80 . 22 timeout 300s, "
                         "%s . 198.51.100.7 . 5432 timeout 1h, "
                         "%s . 203.0.113.80 . 8443 timeout 2s, "
                         "%s . 203.0.113.9 . 22 timeout 300s }\n",
                         world.att_a->address, world.att_a->address, world.att_a->address,
                         world.att_b->address);
  g_assert_true (box_nftables_nft_run (world.nft, add, &error));
  g_assert_no_error (error);

  /* a's three, by address then port; none of b's */
  a = allowed_of (ID_A);
  g_assert_cmpuint (a->len, ==, 3);
  assert_entry (a, 0, "198.51.100.7", 5432, 3590, 3600);
  assert_entry (a, 1, "203.0.113.80", 22, 290, 300);
  assert_entry (a, 2, "203.0.113.80", 8443, 0, 2);
  b = allowed_of (ID_B);
  g_assert_cmpuint (b->len, ==, 1);
  assert_entry (b, 0, "203.0.113.9", 22, 290, 300);

  /* the same straight from the listing, by guest address */
  direct = box_nftables_list_resolved ("box", world.att_a->address, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (direct->len, ==, 3);

  /* the TTL ran out: the kernel no longer lists it */
  g_usleep (3 * G_USEC_PER_SEC);
  later = allowed_of (ID_A);
  g_assert_cmpuint (later->len, ==, 2);
  assert_entry (later, 1, "203.0.113.80", 22, 280, 300);

  g_assert_null (box_network_list_allowed (BOX_NETWORK (world.plugin), "sb-nosuchsandbx",
                                           &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_null (box_nftables_list_resolved ("nosuchtable", world.att_a->address, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_nonnull (strstr (error->message, "No such file or directory"));
  g_clear_error (&error);

  g_assert_true (box_nftables_nft_run (world.nft, "flush set inet box resolved\n", &error));
  g_assert_no_error (error);
}
