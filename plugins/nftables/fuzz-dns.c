/* fuzz-dns.c: arbitrary bytes through the sandboxes' resolver's parsers
 * (plugins/nftables): a sandbox's query as the filtering resolver reads
 * it, an upstream's answer as it reads and checks it, and the relay's own
 * question check and error answers.
 *
 * Invariants: a query read without error has a host name of at most 253
 * characters of [a-z0-9_.-], and the answer built to it reads back with
 * the same addresses; an upstream answer never yields more than
 * BOX_NFTABLES_DNS_MAX_ADDRS addresses; an answer the check calls public
 * carries none of the internal addresses in its A records. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "box-nftables-dns.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static const guint32 public_addrs[] = { 0xCB007150, 0x08080808 };

static void
check_query (const uint8_t *data, size_t size)
{
  BoxNftablesDnsQuestion q;
  g_autoptr(GBytes) answer = NULL;

  if (!box_nftables_dns_read_query (data, size, &q))
    return;
  if (q.rcode == 0) {
    g_assert (q.name != NULL);
    g_assert (strlen (q.name) > 0 && strlen (q.name) <= 253);
    for (const char *p = q.name; *p != '\0'; p++)
      g_assert (g_ascii_islower (*p) || g_ascii_isdigit (*p) || *p == '-' || *p == '_' ||
                *p == '.');
    answer = box_nftables_dns_build_answer (&q, 0, public_addrs, 2, 60);
    g_assert (answer != NULL);
    if (q.qtype == 1) {
      BoxNftablesDnsResult r;
      gsize len;
      const guint8 *wire = g_bytes_get_data (answer, &len);

      g_assert (box_nftables_dns_read_answer (wire, len, q.name, &r));
      g_assert (r.rcode == 0 && r.n_addrs == 2 && r.ttl == 60);
      g_assert (r.addrs[0] == public_addrs[0] && r.addrs[1] == public_addrs[1]);
      g_assert (box_nftables_dns_answer_is_public (wire, len, NULL));
    }
  } else {
    answer = box_nftables_dns_build_answer (&q, q.rcode, NULL, 0, 0);
    g_assert (answer != NULL);
  }
  box_nftables_dns_question_clear (&q);
}

static void
check_answer (const uint8_t *data, size_t size)
{
  const char *names[] = { "example.com", "a", "www.example.com" };
  gboolean public = box_nftables_dns_answer_is_public (data, size, NULL);

  for (guint i = 0; i < G_N_ELEMENTS (names); i++) {
    BoxNftablesDnsResult r;

    if (!box_nftables_dns_read_answer (data, size, names[i], &r))
      continue;
    g_assert (r.n_addrs <= BOX_NFTABLES_DNS_MAX_ADDRS);
    for (guint j = 0; public && j < r.n_addrs; j++) {
      guint8 first = r.addrs[j] >> 24;

      g_assert (first != 10 && first != 127 && first != 0 && first < 224);
      g_assert ((r.addrs[j] >> 16) != 0xA9FE && (r.addrs[j] >> 16) != 0xC0A8);
    }
  }
}

static void
check_relay (const uint8_t *data, size_t size)
{
  gssize end = box_nftables_dns_question_end (data, size);
  g_autoptr(GBytes) servfail = box_nftables_dns_servfail (data, size);

  g_assert (end < 0 || (gsize) end <= size);
  if (servfail != NULL)
    g_assert (end >= 12 && g_bytes_get_size (servfail) == (gsize) end);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  check_query (data, size);
  check_answer (data, size);
  check_relay (data, size);
  return 0;
}
