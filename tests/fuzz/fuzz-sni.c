/* fuzz-sni.c: the proxy's parsers of guest bytes (box-nftables-sni.c), the
 * TLS ClientHello's server name and the HTTP request head's Host.
 *
 * The first byte picks the parser (even: TLS, odd: HTTP) and a cut point;
 * the rest is what a sandbox sent.  Besides staying within the buffer
 * (ASan), the answers must hold together: a name only with DONE, a reason
 * only with BAD, a name of host-name bytes only, and a prefix of the input
 * may only be MORE or the same answer as the whole (the proxy parses again
 * as bytes arrive, so an answer may not depend on how they were cut).
 * A head it accepts, rewritten to close (box_nftables_sni_http_close()),
 * must parse again to the same host.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "box-nftables-sni.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static BoxNftablesSniResult
parse (gboolean tls, const guint8 *data, gsize len, char **name, const char **reason)
{
  BoxNftablesSniResult result = tls ? box_nftables_sni_parse_tls (data, len, name, reason)
                                    : box_nftables_sni_parse_http (data, len, name, reason);

  g_assert_true ((result == BOX_NFTABLES_SNI_DONE) == (*name != NULL));
  g_assert_true ((result == BOX_NFTABLES_SNI_BAD) == (*reason != NULL));
  if (*name != NULL) {
    g_assert_cmpuint (strlen (*name), >, 0);
    g_assert_cmpuint (strlen (*name), <=, 254);
    for (const char *p = *name; *p != '\0'; p++)
      g_assert_true (g_ascii_islower (*p) || g_ascii_isdigit (*p) || strchr ("-_.", *p) != NULL);
  }
  return result;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autofree char *name = NULL, *prefix_name = NULL;
  const char *reason, *prefix_reason;
  BoxNftablesSniResult whole, part;
  gboolean tls;
  gsize cut;

  if (size < 1)
    return 0;
  tls = (data[0] & 1) == 0;
  data++;
  size--;
  whole = parse (tls, data, size, &name, &reason);
  cut = size > 0 ? (gsize) (((guint) (data[-1] >> 1) * size) / 128) : 0;
  part = parse (tls, data, MIN (cut, size), &prefix_name, &prefix_reason);
  if (part != BOX_NFTABLES_SNI_MORE) {
    g_assert_cmpint (part, ==, whole);
    g_assert_cmpstr (prefix_name, ==, name);
  }
  /* the head told to close still names the same host, and only grows by
   * the Connection line */
  if (!tls && whole == BOX_NFTABLES_SNI_DONE) {
    g_autoptr(GByteArray) closed = box_nftables_sni_http_close (data, size);
    g_autofree char *again = NULL;

    g_assert_cmpuint (closed->len, <=, size + 28);
    if (closed->len <= BOX_NFTABLES_SNI_MAX) {
      g_assert_cmpint (parse (FALSE, closed->data, closed->len, &again, &reason), ==,
                       BOX_NFTABLES_SNI_DONE);
      g_assert_cmpstr (again, ==, name);
    }
  }
  return 0;
}
