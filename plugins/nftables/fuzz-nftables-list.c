/* fuzz-nftables-list.c: box_nftables_list_parse() on any input.
 *
 * The listing comes from the kernel, but what it holds was put there by
 * the resolver from DNS answers to a sandbox; the parser must refuse or
 * read whatever it is given without reading out of bounds, and every
 * entry it returns must be the guest's, an IPv4 address and a port in
 * 1..65535.  The first line of the input (up to a newline) is the guest
 * address asked for; the rest is the listing.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>
#include <gio/gio.h>

#include "box-error.h"
#include "box-network.h"
#include "box-nftables-list.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const uint8_t *newline = memchr (data, '\n', size);
  gsize guest_len = newline != NULL ? (gsize) (newline - data) : 0;
  g_autofree char *guest = g_strndup ((const char *) data, guest_len);
  g_autofree char *json = NULL;
  g_autoptr(GPtrArray) list = NULL;
  g_autoptr(GError) error = NULL;

  if (newline == NULL)
    return 0;
  json = g_strndup ((const char *) newline + 1, size - guest_len - 1);
  list = box_nftables_list_parse (json, guest, &error);
  if (list == NULL) {
    g_assert_true (g_error_matches (error, BOX_ERROR, BOX_ERROR_INTERNAL));
    return 0;
  }
  g_assert_no_error (error);
  for (guint i = 0; i < list->len; i++) {
    const BoxNetAllowed *entry = g_ptr_array_index (list, i);
    g_autoptr(GInetAddress) address = g_inet_address_new_from_string (entry->address);

    g_assert_nonnull (address);
    g_assert_cmpint (g_inet_address_get_family (address), ==, G_SOCKET_FAMILY_IPV4);
    g_assert_cmpuint (entry->port, >=, 1);
  }
  return 0;
}
