/* nftables-sni-test.c: the proxy's parsers (box-nftables-sni.c) on a
 * table of HTTP request heads and on real ClientHellos: GnuTLS's, made
 * here, and OpenSSL's, from the fuzz seeds. */
#include "config.h"

#include <string.h>

#include "box-nftables-sni.h"
#include "box-test-tls.h"
#include "nftables-proxy-test.h"

typedef struct {
  const char *head;
  const char *host;    /* NULL: refused */
} HttpCase;

static const HttpCase http_cases[] = {
  { "GET / HTTP/1.1\r\nHost: Allowed.Test\r\n\r\n", "allowed.test" },
  { "GET / HTTP/1.1\r\nUser-Agent: x\r\nhost:\tallowed.test:8080 \r\nAccept: */*\r\n\r\n",
    "allowed.test" },
  { "POST /a?b HTTP/1.0\r\nHost: a.b\r\n\r\nbody after the head", "a.b" },
  { "GET http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "allowed.test" },
  { "GET HTTP://Allowed.Test:80?q HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n", "allowed.test" },
  { "OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n", "a.test" },
  { "GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    "a.test" },
  { "GET / HTTP/1.1\r\nUpgrade:  WebSocket/13 , websocket\r\nHost: a.test\r\n\r\n", "a.test" },
  { "GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n"
    "HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: a.test\r\nupgrade: H2C\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket, h2c\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nUpgrade: h2c\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: TLS/1.2\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: websockets\r\n\r\n", NULL },
  { "GET http://denied.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", NULL },
  { "GET http://allowed.test@denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n", NULL },
  { "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\n\r\n", NULL },
  { "GET / HTTP/1.0\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: a.test\r\n folded\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost : a.test\r\n\r\n", NULL },
  { "GET / HTTP/1.1\nHost: a.test\n\n", NULL },
  { "GET / HTTP/1.1\r\nHost: a.test\rX: y\r\n\r\n", NULL },
  { "GET / HTTP/2.0\r\nHost: a.test\r\n\r\n", NULL },
  { "GET /  HTTP/1.1\r\nHost: a.test\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: a.test:\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: a.test:123456\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: user@a.test\r\n\r\n", NULL },
  { "GET / HTTP/1.1\r\nHost: \r\n\r\n", NULL },
  { "GET a.test HTTP/1.1\r\nHost: a.test\r\n\r\n", NULL },
  { "\r\n\r\n", NULL },
};

static void
test_parse_http (void)
{
  g_autofree guint8 *big = g_malloc (BOX_NFTABLES_SNI_MAX);
  g_autofree char *host = NULL;
  const char *reason;

  for (guint i = 0; i < G_N_ELEMENTS (http_cases); i++) {
    const HttpCase *c = &http_cases[i];
    const char *blank = strstr (c->head, "\r\n\r\n");
    gsize len = strlen (c->head), end = blank != NULL ? (gsize) (blank - c->head) + 4 : len;
    BoxNftablesSniResult result =
      box_nftables_sni_parse_http ((const guint8 *) c->head, len, &host, &reason);

    g_autofree char *shown = g_strescape (c->head, NULL);

    g_test_message ("case %u: %s", i, shown);
    g_assert_cmpint (result, ==, c->host != NULL ? BOX_NFTABLES_SNI_DONE : BOX_NFTABLES_SNI_BAD);
    g_assert_cmpstr (host, ==, c->host);
    g_assert_true ((reason == NULL) == (c->host != NULL));
    g_clear_pointer (&host, g_free);
    /* an accepted head is MORE at every shorter length */
    for (gsize n = 0; c->host != NULL && n < end; n++) {
      g_assert_cmpint (box_nftables_sni_parse_http ((const guint8 *) c->head, n, &host, &reason),
                       ==, BOX_NFTABLES_SNI_MORE);
      g_assert_null (host);
    }
  }
  /* no end of the head within the bound */
  memset (big, 'a', BOX_NFTABLES_SNI_MAX);
  memcpy (big, "GET / HTTP/1.1\r\nX: ", 19);
  g_assert_cmpint (box_nftables_sni_parse_http (big, BOX_NFTABLES_SNI_MAX - 1, &host, &reason),
                   ==, BOX_NFTABLES_SNI_MORE);
  g_assert_cmpint (box_nftables_sni_parse_http (big, BOX_NFTABLES_SNI_MAX, &host, &reason),
                   ==, BOX_NFTABLES_SNI_BAD);
  g_assert_nonnull (strstr (reason, "too large"));
}

/* The fuzz seeds' real ClientHellos from OpenSSL (Python's ssl module),
 * after their one-byte fuzz prefix. */
static void
test_parse_tls_openssl (void)
{
  static const struct { const char *file; const char *name; } seeds[] = {
    { "tls-openssl-sni", "api.example.com" },
    { "tls-openssl-tls12", "www.ok.test" },
    { "tls-split-records", "a.b.example" },
    { "tls-openssl-nosni", NULL },
    { "tls-gnutls-sni", "www.example.org" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (seeds); i++) {
    g_autofree char *path = g_build_filename (g_getenv ("BOX_SOURCE_ROOT"), "tests", "fuzz",
                                              "corpus", "fuzz-sni", seeds[i].file, NULL);
    g_autofree char *contents = NULL;
    g_autofree char *name = NULL;
    const char *reason;
    gsize len;

    g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
    g_assert_cmpint (box_nftables_sni_parse_tls ((const guint8 *) contents + 1, len - 1, &name,
                                                 &reason),
                     ==, seeds[i].name != NULL ? BOX_NFTABLES_SNI_DONE : BOX_NFTABLES_SNI_BAD);
    g_assert_cmpstr (name, ==, seeds[i].name);
  }
}

/* @hello (one record, as box_test_client_hello makes it) with one more
 * extension at the end of its list, every length fixed. */
static GByteArray *
with_extension (GByteArray *hello, guint16 type, const guint8 *body, guint16 len)
{
  GByteArray *out = g_byte_array_sized_new (hello->len + 4 + len);
  guint8 head[4] = { type >> 8, type & 0xff, len >> 8, len & 0xff };
  gsize off = 5 + 4 + 2 + 32;
  gsize n;

  g_byte_array_append (out, hello->data, hello->len);
  off += 1 + out->data[off];                                   /* session id */
  off += 2 + ((gsize) out->data[off] << 8 | out->data[off + 1]); /* cipher suites */
  off += 1 + out->data[off];                                   /* compression */
  g_assert_cmpuint (off + 2 + ((gsize) out->data[off] << 8 | out->data[off + 1]), ==, out->len);
  n = ((gsize) out->data[off] << 8 | out->data[off + 1]) + 4 + len;
  out->data[off] = n >> 8;
  out->data[off + 1] = n & 0xff;
  n = ((gsize) out->data[3] << 8 | out->data[4]) + 4 + len;
  out->data[3] = n >> 8;
  out->data[4] = n & 0xff;
  n = ((gsize) out->data[6] << 16 | (gsize) out->data[7] << 8 | out->data[8]) + 4 + len;
  out->data[6] = n >> 16;
  out->data[7] = (n >> 8) & 0xff;
  out->data[8] = n & 0xff;
  g_byte_array_append (out, head, 4);
  g_byte_array_append (out, body, len);
  return out;
}

static BoxNftablesSniResult
parse_tls (GByteArray *bytes, gsize len, char **name)
{
  const char *reason;

  return box_nftables_sni_parse_tls (bytes->data, len, name, &reason);
}

static void
test_parse_tls (void)
{
  g_autoptr(GByteArray) hello = box_test_client_hello ("Allowed.TEST");
  g_autoptr(GByteArray) bare = box_test_client_hello (NULL);
  g_autoptr(GByteArray) split = test_reframe (hello, 100);
  g_autoptr(GByteArray) tiny = test_reframe (hello, 1);
  g_autoptr(GByteArray) http = g_byte_array_new ();
  g_autofree guint8 *copy = NULL;
  g_autofree char *name = NULL;
  const char *reason;

  g_assert_cmpint (parse_tls (hello, hello->len, &name), ==, BOX_NFTABLES_SNI_DONE);
  g_assert_cmpstr (name, ==, "allowed.test");
  g_clear_pointer (&name, g_free);
  for (guint n = 0; n < hello->len; n++) {
    g_assert_cmpint (parse_tls (hello, n, &name), ==, BOX_NFTABLES_SNI_MORE);
    g_assert_null (name);
  }
  /* a hello spread over several records, at every length */
  for (GByteArray *a = split; a != NULL; a = a == split ? tiny : NULL) {
    g_assert_cmpint (parse_tls (a, a->len, &name), ==, BOX_NFTABLES_SNI_DONE);
    g_assert_cmpstr (name, ==, "allowed.test");
    g_clear_pointer (&name, g_free);
    for (guint n = 0; n < a->len; n++)
      g_assert_cmpint (parse_tls (a, n, &name), ==, BOX_NFTABLES_SNI_MORE);
  }
  g_assert_cmpint (box_nftables_sni_parse_tls (bare->data, bare->len, &name, &reason), ==,
                   BOX_NFTABLES_SNI_BAD);
  g_assert_cmpstr (reason, ==, "no server name");
  {
    /* an encrypted ClientHello extension (Chrome's GREASE, or real ECH):
     * the outer server name decides; without one it is still refused */
    static const guint8 ech[] = { 0x00, 0x00, 0x01, 0x00, 0x01, 0x2a, 0x00, 0x00, 0x00, 0x00 };
    g_autoptr(GByteArray) greased = with_extension (hello, 0xfe0d, ech, sizeof ech);
    g_autoptr(GByteArray) bare_ech = with_extension (bare, 0xfe0d, ech, sizeof ech);
    g_autoptr(GByteArray) twice = with_extension (hello, 0x0000, hello->data, 0);

    g_assert_cmpint (parse_tls (greased, greased->len, &name), ==, BOX_NFTABLES_SNI_DONE);
    g_assert_cmpstr (name, ==, "allowed.test");
    g_clear_pointer (&name, g_free);
    g_assert_cmpint (parse_tls (bare_ech, bare_ech->len, &name), ==, BOX_NFTABLES_SNI_BAD);
    g_assert_null (name);
    /* the helper itself: a second (empty) server_name extension is refused */
    g_assert_cmpint (box_nftables_sni_parse_tls (twice->data, twice->len, &name, &reason), ==,
                     BOX_NFTABLES_SNI_BAD);
    g_assert_null (name);
  }
  g_byte_array_append (http, (const guint8 *) "GET / HTTP/1.1\r\n", 16);
  g_assert_cmpint (parse_tls (http, http->len, &name), ==, BOX_NFTABLES_SNI_BAD);
  /* an alert record in the middle of the hello */
  split->data[105] = 0x15;
  g_assert_cmpint (parse_tls (split, split->len, &name), ==, BOX_NFTABLES_SNI_BAD);
  /* hostile bytes: every single-byte change parses within its bounds
   * (ASan checks the reads) to a plausible name or a refusal */
  copy = g_memdup2 (hello->data, hello->len);
  for (guint i = 0; i < hello->len; i++) {
    for (guint v = 1; v < 256; v += 37) {
      BoxNftablesSniResult result;

      copy[i] = (guint8) (hello->data[i] ^ v);
      result = box_nftables_sni_parse_tls (copy, hello->len, &name, &reason);
      g_assert_true (result != BOX_NFTABLES_SNI_DONE || (name != NULL && strlen (name) <= 254));
      g_assert_true (result == BOX_NFTABLES_SNI_DONE || name == NULL);
      g_clear_pointer (&name, g_free);
      copy[i] = hello->data[i];
    }
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/nftables/sni/http", test_parse_http);
  g_test_add_func ("/nftables/sni/tls", test_parse_tls);
  if (g_getenv ("BOX_SOURCE_ROOT") != NULL)
    g_test_add_func ("/nftables/sni/tls-openssl", test_parse_tls_openssl);
  return g_test_run ();
}
