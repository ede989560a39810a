/* fuzz-nftables-nflog.c: box_nftables_nflog_parse() on any datagram.
 *
 * The netlink framing comes from the kernel, but the payload is a guest's
 * packet; whatever the bytes, nothing is read out of bounds and every
 * packet handed on is one whose header the input really holds: its source
 * and destination are bytes of the input.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <glib.h>

#include "box-nftables-nflog.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

typedef struct {
  const uint8_t *data;
  size_t         size;
} Input;

static gboolean
holds (const Input *input, guint32 addr)
{
  guint32 be = htonl (addr);

  for (size_t i = 0; i + 4 <= input->size; i++) {
    if (memcmp (input->data + i, &be, 4) == 0)
      return TRUE;
  }
  return FALSE;
}

static void
check (const BoxNftablesNflogPacket *packet, gpointer user_data)
{
  const Input *input = user_data;

  g_assert_true (holds (input, packet->saddr));
  g_assert_true (holds (input, packet->daddr));
  if (packet->protocol != 6 && packet->protocol != 17)
    g_assert_cmpuint (packet->dport, ==, 0);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* a copy of exactly @size bytes, so that a read past it is caught */
  g_autofree guint8 *copy = g_memdup2 (data, size);
  Input input = { copy, size };

  box_nftables_nflog_parse (copy, size, check, &input);
  return 0;
}
