/* fuzz-broker-http.c: the broker's HTTP/1.1 rewriter on any bytes from
 * both sides.
 *
 * The input is segments separated by 0x01; a segment starting with 'U'
 * comes from upstream, any other from the client (its first byte is
 * dropped); the first byte of the input, when odd, closes the upstream at
 * the end.  Whatever the bytes: no crash, errors only INVALID or
 * BROKER_FAILED, no rule's value in what reaches the client before a
 * WebSocket tunnel, each call's output bounded by its input plus a head
 * and what was held, and what reaches the client always a prefix of what
 * the upstream sent (all of it after a clean close) unless a chunked body
 * went by (its data is framed anew).
 */
#include "config.h"

#include <stdint.h>
#include <string.h>
#include <glib.h>

#include "box-error.h"
#include "box-broker-http-private.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static BoxBrokerHttpRule *
rule_new (const char *placeholder, const char *value, const char *header, const char *prefix)
{
  BoxBrokerHttpRule *rule = g_new0 (BoxBrokerHttpRule, 1);

  rule->placeholder = g_strdup (placeholder);
  rule->value = g_bytes_new (value, strlen (value));
  rule->inject_header = g_strdup (header);
  rule->inject_format = header != NULL ? g_strdup ("Bearer {value}") : NULL;
  rule->path_prefix = g_strdup (prefix);
  return rule;
}

static void
check_error (const GError *error)
{
  g_assert_true (g_error_matches (error, BOX_ERROR, BOX_ERROR_INVALID) ||
                 g_error_matches (error, BOX_ERROR, BOX_ERROR_BROKER_FAILED));
}

/* Whether the upstream may have sent a chunked body. */
static gboolean
rechunked (GByteArray *sent)
{
  g_autofree char *lower = NULL;

  if (sent->len == 0)
    return FALSE;
  lower = g_ascii_strdown ((const char *) sent->data, sent->len);
  return strstr (lower, "chunked") != NULL || memchr (sent->data, '\0', sent->len) != NULL;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_broker_http_rule_free);
  g_autoptr(GByteArray) seen = g_byte_array_new ();   /* to the client, before a tunnel */
  g_autoptr(GByteArray) sent = g_byte_array_new ();   /* by the upstream */
  g_autoptr(GByteArray) down = g_byte_array_new ();   /* to the client */
  BoxBrokerHttp *http;
  gboolean client_ok = TRUE, up_ok = TRUE;
  gsize at = 1;

  if (size == 0)
    return 0;
  g_ptr_array_add (rules, rule_new ("PH_A", "SECRETVALUE", NULL, NULL));
  g_ptr_array_add (rules, rule_new ("PH_B", "abcabd", NULL, "/v1"));
  g_ptr_array_add (rules, rule_new ("PH_C", "xyzzy", "X-Key", NULL));
  http = box_broker_http_new (rules, "h");
  while (at < size) {
    const uint8_t *end = memchr (data + at, 0x01, size - at);
    gsize len = end != NULL ? (gsize) (end - data) - at : size - at;
    gboolean upstream = len > 0 && data[at] == 'U';
    g_autoptr(GByteArray) out = g_byte_array_new ();
    g_autoptr(GError) error = NULL;

    if (len > 0) {
      if (upstream && up_ok) {
        up_ok = box_broker_http_from_upstream (http, data + at + 1, len - 1, out, &error);
        g_assert_cmpuint (out->len, <=, len + BOX_BROKER_HTTP_MAX_HEAD + 8192);
        g_byte_array_append (sent, data + at + 1, (guint) (len - 1));
        g_byte_array_append (down, out->data, out->len);
        if (!rechunked (sent)) {
          g_assert_cmpuint (down->len, <=, sent->len);
          g_assert_cmpmem (down->data, down->len, sent->data, down->len);
        }
      } else if (!upstream && client_ok) {
        client_ok = box_broker_http_from_client (http, data + at + 1, len - 1, out, &error);
        g_assert_cmpuint (out->len, <=, 4 * (len + BOX_BROKER_HTTP_MAX_HEAD) + 1024);
      }
      if (error != NULL)
        check_error (error);
      if (upstream && !box_broker_http_is_tunnel (http))
        g_byte_array_append (seen, out->data, out->len);
    }
    at += len + 1;
  }
  if ((data[0] & 1) != 0 && up_ok) {
    g_autoptr(GByteArray) out = g_byte_array_new ();
    g_autoptr(GError) error = NULL;

    if (!box_broker_http_upstream_eof (http, out, &error))
      check_error (error);
    else {
      g_byte_array_append (down, out->data, out->len);
      if (!rechunked (sent))
        g_assert_cmpmem (down->data, down->len, sent->data, sent->len);
    }
    g_assert_cmpuint (out->len, <, 8192);
    if (!box_broker_http_is_tunnel (http))
      g_byte_array_append (seen, out->data, out->len);
  }
  for (guint i = 0; seen->len > 0 && i < rules->len; i++) {
    const BoxBrokerHttpRule *rule = g_ptr_array_index (rules, i);
    gsize value_len;
    const void *value = g_bytes_get_data (rule->value, &value_len);

    g_assert_null (memmem (seen->data, seen->len, value, value_len));
  }
  box_broker_http_free (http);
  return 0;
}
