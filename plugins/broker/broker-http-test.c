/* broker-http-test.c: the broker's HTTP/1.1 rewriter (box-broker-http.c).
 *
 * Every client input is fed whole, byte by byte and in random pieces, and
 * must give the same bytes upstream each way. */
#include "config.h"

#include <string.h>
#include <time.h>
#include <json-glib/json-glib.h>

#include "box-error.h"
#include "broker-http-test-util.h"

/* The Host header naming the connection's host: without it no value goes. */
#define H "Host: " TEST_HOST "\r\n"

static void
test_replace_places (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();
  g_autofree char *basic_in = g_base64_encode ((const guchar *) "me:__box_token__", 16);
  g_autofree char *basic_out = g_base64_encode ((const guchar *) "me:s3cr3t-t0ken", 15);
  g_autofree char *in = g_strdup_printf (
    "GET /a/__box_token__/b?k=__box_key__&t=__box_token__ HTTP/1.1\r\n"
    "Host: api.example.com\r\n"
    "X-Token: __box_token____box_token__\r\n"
    "X-Both:  __box_key__:__box_token__ \r\n"
    "Authorization: Basic %s\r\n"
    "X-Plain: no placeholder here\r\n"
    "\r\n", basic_in);
  g_autofree char *expected = g_strdup_printf (
    "GET /a/s3cr3t-t0ken/b?k=KEYVALUE&t=s3cr3t-t0ken HTTP/1.1\r\n"
    "Host: api.example.com\r\n"
    "X-Token: s3cr3t-t0kens3cr3t-t0ken\r\n"
    "X-Both: KEYVALUE:s3cr3t-t0ken\r\n"
    "Authorization: Basic %s\r\n"
    "X-Plain: no placeholder here\r\n"
    "\r\n", basic_out);

  assert_through (rules, in, expected);
  /* a Bearer token and a Basic credential that is not base64 */
  assert_through (rules,
                  "GET / HTTP/1.1\r\n" H "Authorization: Bearer __box_token__\r\n\r\n",
                  "GET / HTTP/1.1\r\n" H "Authorization: Bearer s3cr3t-t0ken\r\n\r\n");
  assert_through (rules,
                  "GET / HTTP/1.1\r\n" H "Authorization: Basic not*base64__box_key__\r\n\r\n",
                  "GET / HTTP/1.1\r\n" H "Authorization: Basic not*base64KEYVALUE\r\n\r\n");
  /* bare LF line ends are read, and written as CRLF */
  assert_through (rules, "GET /__box_key__ HTTP/1.0\nHost: " TEST_HOST "\nX: 1\n\n",
                  "GET /KEYVALUE HTTP/1.0\r\nHost: " TEST_HOST "\r\nX: 1\r\n\r\n");
  /* a value is not searched again for placeholders */
  {
    g_autoptr(GPtrArray) chain = rules_new ();

    g_ptr_array_add (chain, rule_new ("__box_a__", "__box_b__", NULL, NULL, NULL));
    g_ptr_array_add (chain, rule_new ("__box_b__", "B", NULL, NULL, NULL));
    assert_through (chain, "GET / HTTP/1.1\r\n" H "X: __box_a__ __box_b__\r\n\r\n",
                    "GET / HTTP/1.1\r\n" H "X: __box_b__ B\r\n\r\n");
  }
}

static void
test_value_not_for_target (void)
{
  g_autoptr(GPtrArray) rules = rules_new ();

  /* a value with a space cannot go in the request line; in a header it can */
  g_ptr_array_add (rules, rule_new ("__box_x__", "a b", NULL, NULL, NULL));
  assert_through (rules, "GET / HTTP/1.1\r\n" H "X: __box_x__\r\n\r\n",
                  "GET / HTTP/1.1\r\n" H "X: a b\r\n\r\n");
  assert_refused (rules, "GET /__box_x__ HTTP/1.1\r\n" H "\r\n");
}

static void
test_bodies_untouched (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();
  const char *in =
    "POST /__box_key__ HTTP/1.1\r\n" H "Content-Length: 27\r\n\r\n"
    "body __box_key__ GET / HTTP"
    "POST /c HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n"
    "b;ext=1\r\n__box_key__\r\n"
    "3\r\nxyz\r\n0\r\nX-Trailer: __box_key__\r\n\r\n"
    "GET /__box_token__ HTTP/1.1\r\n" H "\r\n";
  const char *expected =
    "POST /KEYVALUE HTTP/1.1\r\n" H "Content-Length: 27\r\n\r\n"
    "body __box_key__ GET / HTTP"
    "POST /c HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n"
    "b;ext=1\r\n__box_key__\r\n"
    "3\r\nxyz\r\n0\r\nX-Trailer: __box_key__\r\n\r\n"
    "GET /s3cr3t-t0ken HTTP/1.1\r\n" H "\r\n";

  assert_through (rules, in, expected);
  /* pipelined, with empty lines between requests */
  assert_through (rules,
                  "GET /1?__box_key__ HTTP/1.1\r\n" H "\r\n\r\nGET /2 HTTP/1.1\r\n" H "X: __box_key__\r\n\r\n"
                  "HEAD /3 HTTP/1.1\r\n" H "\r\n",
                  "GET /1?KEYVALUE HTTP/1.1\r\n" H "\r\nGET /2 HTTP/1.1\r\n" H "X: KEYVALUE\r\n\r\n"
                  "HEAD /3 HTTP/1.1\r\n" H "\r\n");
}

static void
test_inject (void)
{
  g_autoptr(GPtrArray) rules = rules_new ();

  g_ptr_array_add (rules, rule_new ("__box_api__", "V4LUE", "X-Api-Key", "Key {value} / {value}", NULL));
  g_ptr_array_add (rules, rule_new ("__box_token__", "T", NULL, NULL, NULL));
  assert_through (rules,
                  "GET /__box_api__ HTTP/1.1\r\nx-api-key: mine\r\nHost: api.example.com\r\n"
                  "X-API-KEY: __box_api__\r\nX: __box_token__\r\n\r\n",
                  "GET /__box_api__ HTTP/1.1\r\nHost: api.example.com\r\nX: T\r\n"
                  "X-Api-Key: Key V4LUE / V4LUE\r\n\r\n");
  /* set on a request that has no placeholder at all */
  assert_through (rules, "GET / HTTP/1.1\r\n" H "\r\n",
                  "GET / HTTP/1.1\r\n" H "X-Api-Key: Key V4LUE / V4LUE\r\n\r\n");
  /* but not on one that names no host */
  assert_through (rules, "GET / HTTP/1.1\r\nX: __box_token__\r\n\r\n",
                  "GET / HTTP/1.1\r\nX: __box_token__\r\n\r\n");
  /* a format that would start another header is refused, not written */
  {
    g_autoptr(GPtrArray) broken = rules_new ();

    g_ptr_array_add (broken, rule_new ("__box_api__", "V", "X-Api-Key", "{value}\r\nHost: evil", NULL));
    assert_refused (broken, "GET / HTTP/1.1\r\n" H "\r\n");
  }
}

static void
test_path_prefix (void)
{
  g_autoptr(GPtrArray) rules = rules_new ();
  const struct { const char *prefix, *target; gboolean match; } cases[] = {
    { "/v1", "/v1", TRUE },
    { "/v1", "/v1?x=1", TRUE },
    { "/v1", "/v1/models", TRUE },
    { "/v1", "/v1x", FALSE },
    { "/v1", "/v2/v1", FALSE },
    { "/v1", "/V1", FALSE },
    { "/v1/", "/v1/a", TRUE },
    { "/v1/", "/v1", FALSE },
    { "/v1", "/v1/../admin", FALSE },
    { "/v1", "/v1/./a", FALSE },
    { "/v1", "/v1/a/..", FALSE },
    { "/v1", "/v1/..;/admin", FALSE },
    { "/v1", "/v1/%2e%2e/admin", FALSE },
    { "/v1", "/v1/%2E./admin", FALSE },
    { "/v1", "/v1%2fx", FALSE },
    { "/v1", "/v1/%2Fx", FALSE },
    { "/v1", "/v1/%5cx", FALSE },
    { "/v1", "/v1\\x", FALSE },
    { "/v1", "/v1/a?next=/../x", TRUE },
    { "/v1", "/v1/a%20b", TRUE },
    { "/v1", "https://h/v1", FALSE },
    { "/v1", "*", FALSE },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_test_message ("%s %s", cases[i].prefix, cases[i].target);
    g_assert_cmpint (box_broker_http_path_matches (cases[i].prefix, cases[i].target), ==, cases[i].match);
  }
  g_ptr_array_add (rules, rule_new ("__box_a__", "A", NULL, NULL, "/v1"));
  g_ptr_array_add (rules, rule_new ("__box_b__", "B", "X-B", "{value}", "/v2"));
  assert_through (rules, "GET /v1/x?__box_a__ HTTP/1.1\r\n" H "X: __box_a__\r\n\r\n",
                  "GET /v1/x?A HTTP/1.1\r\n" H "X: A\r\n\r\n");
  /* no match: the placeholder stays, the injected header is not set */
  assert_through (rules, "GET /v1/../v3?__box_a__ HTTP/1.1\r\n" H "X: __box_a__\r\nX-B: mine\r\n\r\n",
                  "GET /v1/../v3?__box_a__ HTTP/1.1\r\n" H "X: __box_a__\r\nX-B: mine\r\n\r\n");
  assert_through (rules, "GET /v2 HTTP/1.1\r\n" H "X: __box_a__\r\nX-B: mine\r\n\r\n",
                  "GET /v2 HTTP/1.1\r\n" H "X: __box_a__\r\nX-B: B\r\n\r\n");
}

static void
test_smuggling (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();
  g_autofree char *huge = NULL;
  g_autofree char *filler = g_strnfill (BOX_BROKER_HTTP_MAX_HEAD, 'a');
  const char *refused[] = {
    "POST / HTTP/1.1\r\n" H "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
    "POST / HTTP/1.1\r\n" H "Content-Length: 3\r\nContent-Length: 4\r\n\r\n",
    "POST / HTTP/1.1\r\n" H "Content-Length: 3, 3\r\n\r\n",
    "POST / HTTP/1.1\r\n" H "Content-Length: -1\r\n\r\n",
    "POST / HTTP/1.1\r\n" H "Content-Length: +3\r\n\r\n",
    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip, chunked\r\n\r\n",
    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked, chunked\r\n\r\n",
    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip\r\n\r\n",
    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n",
    "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "GET / HTTP/1.1\r\n" H "X: a\r\n  folded\r\n\r\n",
    "GET / HTTP/1.1\r\n" H "X : a\r\n\r\n",
    "GET / HTTP/1.1\r\n" H "X Y: a\r\n\r\n",
    "GET / HTTP/1.1\r\n" H ": a\r\n\r\n",
    "GET / HTTP/1.1\r\n" H "X: a\rb\r\n\r\n",
    "GET / HTTP/1.1\r\n" H "X: a\x01\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "POST / HTTP/1.1\r\n" H "Content-Length: 4\r\nTransfer_Encoding: chunked\r\n\r\n",
    "POST / HTTP/1.1\r\n" H "content_length: 4\r\n\r\n",
    "GET /  HTTP/1.1\r\n\r\n",
    "GET / HTTP/2.0\r\n\r\n",
    "GET /a#b HTTP/1.1\r\n" H "\r\n",
    "CONNECT h:443 HTTP/1.1\r\n" H "\r\n",
    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\nz\r\n",
    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n3\nabc\r\n",
    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n3\r\nabcX",
    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n0\r\nX: 1\n\r\n",
    "GET / HTTP/1.1\r\n" H "Upgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: 1\r\n\r\nx",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (refused); i++) {
    g_test_message ("refused: %s", refused[i]);
    assert_refused (rules, refused[i]);
  }
  /* identical duplicates and upper-case chunked are fine */
  assert_through (rules, "POST / HTTP/1.1\r\n" H "Content-Length: 1\r\nContent-Length: 1\r\n\r\nx",
                  "POST / HTTP/1.1\r\n" H "Content-Length: 1\r\nContent-Length: 1\r\n\r\nx");
  assert_through (rules, "POST / HTTP/1.1\r\n" H "Transfer-Encoding: Chunked\r\n\r\n0\r\n\r\n",
                  "POST / HTTP/1.1\r\n" H "Transfer-Encoding: Chunked\r\n\r\n0\r\n\r\n");
  /* a head of 64 KiB is refused, also when it never ends */
  huge = g_strdup_printf ("GET / HTTP/1.1\r\n" H "X: %s\r\n\r\n", filler);
  assert_refused (rules, huge);
  huge[strlen (huge) - 4] = '\0';
  assert_refused (rules, huge);
  /* a refused stream stays refused */
  {
    BoxBrokerHttp *http = box_broker_http_new (rules, TEST_HOST);
    g_autoptr(GByteArray) out = g_byte_array_new ();
    g_autoptr(GError) error = NULL;

    g_assert_false (feed (http, FALSE, refused[0], strlen (refused[0]), FEED_WHOLE, out, &error));
    g_clear_error (&error);
    g_assert_false (feed (http, FALSE, "GET / HTTP/1.1\r\n\r\n", 18, FEED_WHOLE, out, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    g_assert_cmpuint (out->len, ==, 0);
    box_broker_http_free (http);
  }
}

static void
test_host (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();
  const char *same[] = {
    "GET /__box_key__ HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
    "GET /__box_key__ HTTP/1.1\r\nHost: API.Example.COM:443\r\n\r\n",
    "GET https://api.example.com/__box_key__ HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
    "GET https://api.example.com:443?__box_key__ HTTP/1.1\r\n\r\n",
  };
  const char *other[] = {
    "GET /__box_key__ HTTP/1.1\r\nHost: other.example.com\r\n\r\n",
    "GET /__box_key__ HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n",
    "GET /__box_key__ HTTP/1.1\r\nHost: api.example.com.evil\r\n\r\n",
    "GET /__box_key__ HTTP/1.1\r\nHost: api.example.com.\r\n\r\n",
    "GET https://other.example.com/__box_key__ HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
    "GET https://api.example.com@other/__box_key__ HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
    "GET https://api.example.com/__box_key__ HTTP/1.1\r\nHost: other\r\n\r\n",
    /* no Host: no host named, whatever the version (a server may take
     * it to a default virtual host) */
    "GET /__box_key__ HTTP/1.0\r\n\r\n",
    "GET /__box_key__ HTTP/1.1\r\n\r\n",
    "GET /a?__box_token__ HTTP/1.1\r\nX: __box_key__\r\n\r\n",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (same); i++) {
    g_autoptr(GError) error = NULL;
    g_autofree char *out = client_through (rules, same[i], &error);

    g_test_message ("the connection's host: %s", same[i]);
    g_assert_no_error (error);
    g_assert_nonnull (strstr (out, "KEYVALUE"));
  }
  /* another virtual host: the placeholders go as they are */
  for (gsize i = 0; i < G_N_ELEMENTS (other); i++) {
    g_autoptr(GError) error = NULL;
    g_autofree char *out = client_through (rules, other[i], &error);

    g_test_message ("another host: %s", other[i]);
    g_assert_no_error (error);
    g_assert_cmpstr (out, ==, other[i]);
  }
  /* an IPv6 literal connection */
  {
    BoxBrokerHttp *http = box_broker_http_new (rules, "2001:db8::1");
    g_autoptr(GByteArray) out = g_byte_array_new ();
    const char *req = "GET /__box_key__ HTTP/1.1\r\nHost: [2001:DB8::1]:443\r\n\r\n";

    g_assert_true (box_broker_http_from_client (http, (const guint8 *) req, strlen (req), out, NULL));
    g_assert_nonnull (g_strstr_len ((const char *) out->data, out->len, "KEYVALUE"));
    box_broker_http_free (http);
  }
}

static void
test_identity (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();
  g_autoptr(GError) error = NULL;
  g_autofree char *out = NULL;

  g_ptr_array_add (rules, rule_new ("__box_api__", "APIVAL", "X-Api", "{value}", "/api"));
  /* a value in the request: the answer is asked for uncompressed */
  out = client_through (rules, "GET /__box_key__ HTTP/1.1\r\n" H "Accept-Encoding: gzip, br\r\n"
                        "X: 1\r\naccept-encoding: deflate\r\n\r\n", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (out, ==, "GET /KEYVALUE HTTP/1.1\r\n" H "Accept-Encoding: identity\r\nX: 1\r\n\r\n");
  g_clear_pointer (&out, g_free);
  out = client_through (rules, "GET / HTTP/1.1\r\n" H "X: __box_token__\r\n\r\n", &error);
  g_assert_cmpstr (out, ==, "GET / HTTP/1.1\r\n" H "X: s3cr3t-t0ken\r\nAccept-Encoding: identity\r\n\r\n");
  g_clear_pointer (&out, g_free);
  out = client_through (rules, "GET /api HTTP/1.1\r\n" H "Accept-Encoding: gzip\r\n\r\n", &error);
  g_assert_cmpstr (out, ==, "GET /api HTTP/1.1\r\n" H "Accept-Encoding: identity\r\nX-Api: APIVAL\r\n\r\n");
  g_clear_pointer (&out, g_free);
  /* no value: as the client asked */
  out = client_through (rules, "GET / HTTP/1.1\r\n" H "Accept-Encoding: gzip\r\n\r\n", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (out, ==, "GET / HTTP/1.1\r\n" H "Accept-Encoding: gzip\r\n\r\n");
}

static void
test_websocket (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();
  Conn conn;
  const char *upgrade = "GET /ws?t=__box_token__ HTTP/1.1\r\n" H "Upgrade: websocket\r\n"
                        "Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: k\r\n\r\n";
  const guint8 frame[] = { 0x81, 0x8b, 0, 0, 0, 0, '_', '_', 'b', 'o', 'x', '_', 'k', 'e', 'y', '_', '_' };

  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, upgrade));
  assert_bytes (conn.up, "GET /ws?t=s3cr3t-t0ken HTTP/1.1\r\n" H "Upgrade: websocket\r\n"
                "Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: k\r\n\r\n");
  /* sent before the answer: held */
  g_assert_true (conn_client (&conn, "early __box_key__"));
  g_assert_cmpuint (conn.up->len, ==, 0);
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nraw"));
  assert_bytes (conn.down, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nraw");
  g_assert_false (box_broker_http_can_answer (conn.http));
  g_byte_array_set_size (conn.up, 0);
  g_assert_true (box_broker_http_from_client (conn.http, frame, sizeof frame, conn.up, &conn.error));
  g_assert_cmpuint (conn.up->len, ==, strlen ("early __box_key__") + sizeof frame);
  g_assert_cmpmem (conn.up->data, 17, "early __box_key__", 17);
  g_assert_cmpmem (conn.up->data + 17, sizeof frame, frame, sizeof frame);
  /* the client's frames are a tunnel; the server's first bytes are
   * checked as a body (an echo of the handshake's credential) */
  g_assert_true (conn_client (&conn, "GET / HTTP/1.1\r\n" H "X: __box_key__\r\n\r\n"));
  assert_bytes (conn.up, "GET / HTTP/1.1\r\n" H "X: __box_key__\r\n\r\n");
  g_assert_true (conn_upstream (&conn, "frame s3cr3t-"));
  assert_bytes (conn.down, "frame ");
  g_assert_false (conn_upstream (&conn, "t0ken"));
  g_assert_error (conn.error, BOX_ERROR, BOX_ERROR_BROKER_FAILED);
  g_assert_cmpuint (conn.down->len, ==, 0);
  conn_clear (&conn);

  /* the value in the same read as the 101 */
  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, upgrade));
  g_assert_false (conn_upstream (&conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
                                        "\x81\x0cs3cr3t-t0ken"));
  g_assert_error (conn.error, BOX_ERROR, BOX_ERROR_BROKER_FAILED);
  conn_clear (&conn);

  /* past the first BOX_BROKER_HTTP_CHECK_BYTES it is a tunnel; what is
   * held at the close goes out */
  {
    g_autofree char *filler = g_strnfill (BOX_BROKER_HTTP_CHECK_BYTES, 'f');

    conn_init (&conn, rules);
    g_assert_true (conn_client (&conn, upgrade));
    g_assert_true (conn_upstream (&conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"));
    g_assert_true (conn_upstream (&conn, filler));
    g_assert_true (conn_upstream (&conn, "s3cr3t-t0ken"));
    assert_bytes (conn.down, "s3cr3t-t0ken");
    g_assert_true (conn_upstream (&conn, "s3cr3t"));
    g_byte_array_set_size (conn.down, 0);
    g_assert_true (box_broker_http_upstream_eof (conn.http, conn.down, &conn.error));
    conn_clear (&conn);
  }

  /* refused: what the client sent meanwhile is read as requests */
  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, upgrade));
  g_assert_true (conn_client (&conn, "GET /__box_key__ HTTP/1.1\r\n" H "\r\n"));
  g_assert_cmpuint (conn.up->len, ==, 0);
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 400 No\r\nContent-Length: 2\r\n\r\nno"));
  g_assert_true (conn_client (&conn, ""));
  assert_bytes (conn.up, "GET /KEYVALUE HTTP/1.1\r\n" H "\r\n");
  conn_clear (&conn);

  /* a 101 nobody asked for */
  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, "GET / HTTP/1.1\r\n" H "\r\n"));
  g_assert_false (conn_upstream (&conn, "HTTP/1.1 101 Switching Protocols\r\n\r\n"));
  g_assert_error (conn.error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_cmpuint (conn.down->len, ==, 0);
  conn_clear (&conn);
}

static void
test_h2c (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();

  assert_through (rules,
                  "GET / HTTP/1.1\r\nHost: api.example.com\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                  "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nX: __box_key__\r\n\r\n",
                  "GET / HTTP/1.1\r\nHost: api.example.com\r\nX: KEYVALUE\r\n\r\n");
  assert_through (rules,
                  "GET / HTTP/1.1\r\n" H "Connection: keep-alive, upgrade\r\nUpgrade: h2c, foo\r\n\r\n",
                  "GET / HTTP/1.1\r\n" H "Connection: keep-alive\r\n\r\n");
}

static void
test_continue (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();
  Conn conn;

  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, "PUT /__box_key__ HTTP/1.1\r\n" H "Expect: 100-continue\r\n"
                              "Content-Length: 4\r\n\r\n"));
  assert_bytes (conn.up, "PUT /KEYVALUE HTTP/1.1\r\n" H "Expect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 100 Continue\r\n\r\n"));
  assert_bytes (conn.down, "HTTP/1.1 100 Continue\r\n\r\n");
  g_assert_true (box_broker_http_can_answer (conn.http));
  g_assert_true (conn_client (&conn, "dataGET /2 HTTP/1.1\r\n" H "\r\n"));
  assert_bytes (conn.up, "dataGET /2 HTTP/1.1\r\n" H "\r\n");
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
                                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
  assert_bytes (conn.down, "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  g_assert_true (box_broker_http_can_answer (conn.http));
  /* an answer to nothing */
  g_assert_false (conn_upstream (&conn, "HTTP/1.1 200 OK\r\n\r\n"));
  g_assert_error (conn.error, BOX_ERROR, BOX_ERROR_INVALID);
  conn_clear (&conn);
}

static void
test_answers_framing (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();
  const char *three = "GET /1 HTTP/1.1\r\n" H "\r\nHEAD /2 HTTP/1.1\r\n" H "\r\nGET /3 HTTP/1.1\r\n" H "\r\n";

  /* HEAD's answer has no body though it names a length */
  assert_answers (rules, three,
                  "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
                  "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"
                  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3;x=y\r\nabc\r\n0\r\nT: s3cr\r\n\r\n", FALSE);
  assert_answers (rules, three,
                  "HTTP/1.1 204 No Content\r\n\r\n"
                  "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"
                  "HTTP/1.0 200 OK\r\n\r\nuntil close s3cr3t-t0ke", TRUE);
  /* until close: a value at the very end is still found at the close */
  assert_answer_fails (rules, "GET / HTTP/1.1\r\n" H "\r\n",
                       "HTTP/1.1 200 OK\r\n\r\nuntil close s3cr3t-t0ken", BOX_ERROR_BROKER_FAILED);
  /* the server closes in a head */
  assert_answer_fails (rules, "GET / HTTP/1.1\r\n" H "\r\n", "HTTP/1.1 200 OK\r\nX:", BOX_ERROR_INVALID);
  assert_answer_fails (rules, "GET / HTTP/1.1\r\n" H "\r\n",
                       "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                       BOX_ERROR_INVALID);
  assert_answer_fails (rules, "GET / HTTP/1.1\r\n" H "\r\n", "HTTP/9 200\r\n\r\n", BOX_ERROR_INVALID);
}

static void
test_answers_checked (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();
  const char *get = "GET / HTTP/1.1\r\n" H "\r\n";
  g_autofree char *filler = g_strnfill (BOX_BROKER_HTTP_CHECK_BYTES, 'x');
  g_autofree char *late = g_strdup_printf ("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%sKEYVALUE",
                                           BOX_BROKER_HTTP_CHECK_BYTES + 8, filler);
  g_autofree char *straddle = g_strdup_printf ("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%sKEYVALUE",
                                               BOX_BROKER_HTTP_CHECK_BYTES + 4, filler + 4);
  Conn conn;

  assert_answer_fails (rules, get, "HTTP/1.1 302 Found\r\nLocation: /?t=s3cr3t-t0ken\r\n\r\n",
                       BOX_ERROR_BROKER_FAILED);
  assert_answer_fails (rules, get, "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nKEYVALUE and more...",
                       BOX_ERROR_BROKER_FAILED);
  /* past the first CHECK_BYTES of the body: passes; straddling: found */
  assert_answers (rules, get, late, FALSE);
  assert_answer_fails (rules, get, straddle, BOX_ERROR_BROKER_FAILED);

  /* a value split over two reads: nothing of it released */
  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, get));
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\nhello s3cr3t"));
  assert_bytes (conn.down, "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\nhello ");
  g_assert_false (box_broker_http_can_answer (conn.http));
  g_assert_false (conn_upstream (&conn, "-t0ken"));
  g_assert_error (conn.error, BOX_ERROR, BOX_ERROR_BROKER_FAILED);
  g_assert_false (strstr (conn.error->message, "s3cr3t") != NULL);
  g_assert_cmpuint (conn.down->len, ==, 0);
  conn_clear (&conn);

  /* a held prefix that does not become a value goes out with the next read */
  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, get));
  g_assert_true (box_broker_http_can_answer (conn.http));
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\ndata: KEY"));
  assert_bytes (conn.down, "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\ndata: ");
  g_assert_true (conn_upstream (&conn, "s!\n"));
  assert_bytes (conn.down, "KEYs!\n");
  g_assert_true (box_broker_http_can_answer (conn.http));
  /* a head is held until complete */
  g_assert_true (conn_client (&conn, get));
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"));
  g_assert_cmpuint (conn.down->len, ==, 0);
  g_assert_true (conn_upstream (&conn, "\r\n"));
  assert_bytes (conn.down, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  conn_clear (&conn);
}

static void
test_chunk_value (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();

  /* the chunks' data is checked, not the framing: a value split by a
   * chunk boundary (or an extension) is found too */
  assert_answer_fails (rules, "GET / HTTP/1.1\r\n" H "\r\n",
                       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "3\r\nKEY\r\n5\r\nVALUE\r\n0\r\n\r\n", BOX_ERROR_BROKER_FAILED);
  assert_answer_fails (rules, "GET / HTTP/1.1\r\n" H "\r\n",
                       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "1;a=b\r\nK\r\n2\r\nEY\r\n5\r\nVALUE\r\n", BOX_ERROR_BROKER_FAILED);
  /* a value's start held across chunks goes out when it turns out not to
   * be one */
  assert_answers (rules, "GET / HTTP/1.1\r\n" H "\r\n",
                  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3\r\nKEY\r\n5\r\nVALUx\r\n2\r\nKE\r\n0\r\n\r\n", FALSE);
  assert_answer_fails (rules, "GET / HTTP/1.1\r\n" H "\r\n",
                       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "a\r\n KEYVALUE \r\n0\r\n\r\n", BOX_ERROR_BROKER_FAILED);
  /* trailers are part of the body's bytes */
  assert_answer_fails (rules, "GET / HTTP/1.1\r\n" H "\r\n",
                       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "0\r\nX-Echo: KEYVALUE\r\n\r\n", BOX_ERROR_BROKER_FAILED);
}

static void
test_no_rules (void)
{
  g_autoptr(GPtrArray) rules = rules_new ();
  const char *in = "GET /__box_key__ HTTP/1.1\r\n" H "Authorization: Basic X19ib3hfa2V5X18=\r\n\r\n";

  /* no secret for this connection: heads are still checked and written
   * anew, nothing is replaced, nothing is held back */
  assert_through (rules, in, in);
  assert_answers (rules, in, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nKEYVALUE", FALSE);
  assert_refused (rules, "GET / HTTP/1.1\r\n" H "X: a\r\n folded\r\n\r\n");
}

static void
test_overlapping_value (void)
{
  g_autoptr(GPtrArray) rules = rules_new ();
  Conn conn;

  /* "abcab" may begin "abcabd"; after "c" only "abc" still may */
  g_ptr_array_add (rules, rule_new ("__box_o__", "abcabd", NULL, NULL, NULL));
  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, "GET / HTTP/1.1\r\n" H "\r\n"));
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nabcab"));
  assert_bytes (conn.down, "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n");
  g_assert_true (conn_upstream (&conn, "c"));
  assert_bytes (conn.down, "abc");
  g_assert_true (conn_upstream (&conn, "ab"));
  assert_bytes (conn.down, "");
  g_assert_true (conn_upstream (&conn, "cab"));
  assert_bytes (conn.down, "abc");
  g_assert_false (conn_upstream (&conn, "d"));
  g_assert_error (conn.error, BOX_ERROR, BOX_ERROR_BROKER_FAILED);
  conn_clear (&conn);
  check_answers (rules, "GET / HTTP/1.1\r\n" H "\r\nGET / HTTP/1.1\r\n" H "\r\n",
                 "\r\nHTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nabcababcabcab\r\n"
                 "HTTP/1.1 200 OK\r\n\r\nababcabcabcab", TRUE, -1);
}

static void
test_rules_replaced (void)
{
  g_autoptr(GPtrArray) rules = two_rules ();
  g_autoptr(GPtrArray) rotated = rules_new ();
  Conn conn;

  g_ptr_array_add (rotated, rule_new ("__box_token__", "s3cr3t-n3w", NULL, NULL, NULL));
  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, "GET /__box_token__ HTTP/1.1\r\n" H "\r\n"));
  assert_bytes (conn.up, "GET /s3cr3t-t0ken HTTP/1.1\r\n" H "\r\n");
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\ns3cr3t-"));
  assert_bytes (conn.down, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
  box_broker_http_set_rules (conn.http, rotated);
  g_assert_true (conn_client (&conn, "GET /__box_token__?__box_key__ HTTP/1.1\r\n" H "\r\n"));
  assert_bytes (conn.up, "GET /s3cr3t-n3w?__box_key__ HTTP/1.1\r\n" H "\r\n");
  /* the held "s3cr3t-" is checked against the new value */
  g_assert_false (conn_upstream (&conn, "n3w"));
  g_assert_error (conn.error, BOX_ERROR, BOX_ERROR_BROKER_FAILED);
  conn_clear (&conn);

  /* requests sent with the old value: their answers are still checked for
   * it, the one being read and those pending; later ones no more */
  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, "GET /__box_token__ HTTP/1.1\r\n" H "\r\nGET /__box_token__ HTTP/1.1\r\n" H "\r\n"));
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab"));
  box_broker_http_set_rules (conn.http, rotated);
  g_assert_true (conn_client (&conn, "GET /__box_token__ HTTP/1.1\r\n" H "\r\n"));
  assert_bytes (conn.up, "GET /s3cr3t-n3w HTTP/1.1\r\n" H "\r\n");
  g_assert_true (conn_upstream (&conn, "cd"));
  g_assert_false (conn_upstream (&conn, "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\ns3cr3t-t0ken"));
  g_assert_error (conn.error, BOX_ERROR, BOX_ERROR_BROKER_FAILED);
  conn_clear (&conn);
  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, "GET /__box_token__ HTTP/1.1\r\n" H "\r\n"));
  box_broker_http_set_rules (conn.http, rotated);
  g_assert_false (conn_upstream (&conn, "HTTP/1.1 302 Found\r\nLocation: /s3cr3t-t0ken\r\n\r\n"));
  g_assert_error (conn.error, BOX_ERROR, BOX_ERROR_BROKER_FAILED);
  conn_clear (&conn);
  conn_init (&conn, rules);
  g_assert_true (conn_client (&conn, "GET /__box_token__ HTTP/1.1\r\n" H "\r\n"));
  box_broker_http_set_rules (conn.http, rotated);
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 204 No Content\r\n\r\n"));
  g_assert_true (conn_client (&conn, "GET / HTTP/1.1\r\n" H "\r\n"));
  g_assert_true (conn_upstream (&conn, "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\ns3cr3t-t0ken"));
  g_assert_true (conn_client (&conn, "GET / HTTP/1.1\r\n" H "\r\n"));
  g_assert_false (conn_upstream (&conn, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\ns3cr3t-n3w"));
  g_assert_error (conn.error, BOX_ERROR, BOX_ERROR_BROKER_FAILED);
  conn_clear (&conn);
}

static void
test_rewrite_cap (void)
{
  g_autoptr(GPtrArray) rules = rules_new ();
  g_autofree char *value = g_strnfill (8192, 'v');
  g_autoptr(GString) many = g_string_new (NULL);
  g_autofree char *fits = NULL, *header = NULL, *target = NULL, *encoded = NULL, *basic = NULL;

  g_ptr_array_add (rules, rule_new ("__p__", value, NULL, NULL, NULL));
  for (guint i = 0; i < 15; i++)
    g_string_append (many, "__p__");
  /* 15 values of 8 KiB: 120 KiB, under the cap */
  fits = g_strdup_printf ("GET / HTTP/1.1\r\n" H "X: %s\r\n\r\n", many->str);
  {
    g_autoptr(GError) error = NULL;
    g_autofree char *out = client_through (rules, fits, &error);

    g_assert_no_error (error);
    g_assert_cmpuint (strlen (out), >, 15 * 8192);
    g_assert_cmpuint (strlen (out), <=, BOX_BROKER_HTTP_MAX_REWRITTEN);
  }
  /* 17 of them, in one header, over two headers, in the target, in a
   * Basic credential: refused, nothing goes upstream */
  g_string_append (many, "__p____p__");
  header = g_strdup_printf ("GET / HTTP/1.1\r\n" H "X: %s\r\n\r\n", many->str);
  assert_refused (rules, header);
  g_free (fits);
  fits = g_strdup_printf ("GET / HTTP/1.1\r\n" H "X: %s\r\nY: %s\r\n\r\n", many->str + 25, many->str + 60);
  assert_refused (rules, fits);
  target = g_strdup_printf ("GET /%s HTTP/1.1\r\n" H "\r\n", many->str);
  assert_refused (rules, target);
  encoded = g_base64_encode ((const guchar *) many->str, many->len);
  basic = g_strdup_printf ("GET / HTTP/1.1\r\n" H "Authorization: Basic %s\r\n\r\n", encoded);
  assert_refused (rules, basic);
}

/* The thread's CPU time: the machine may be busy with other things. */
static gint64
cpu_time_us (void)
{
  struct timespec ts;

  g_assert_cmpint (clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts), ==, 0);
  return (gint64) ts.tv_sec * G_USEC_PER_SEC + ts.tv_nsec / 1000;
}

static void
test_hostile_cost (void)
{
  g_autoptr(GPtrArray) rules = rules_new ();
  g_autofree char *value = g_strnfill (8192, 'a');
  g_autofree char *body = g_strnfill (BOX_BROKER_HTTP_MAX_HEAD - 100, 'a');
  g_autofree char *request = g_strdup_printf ("GET / HTTP/1.1\r\n" H "X: %s\r\n\r\n", body);
  g_autofree char *answer = g_strdup_printf ("HTTP/1.1 200 OK\r\nX: %s\r\n\r\n", body);
  g_autofree char *answer_body = g_strdup_printf ("HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
                                                  strlen (body), body);
  gint64 start, spent;
  BoxBrokerHttp *http;
  g_autoptr(GByteArray) out = g_byte_array_new ();
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < 16; i++) {
    value[8191 - i] = 'b';
    g_ptr_array_add (rules, rule_new (value + 1, value, NULL, NULL, NULL));
    value[8191 - i] = 'a';
  }
  http = box_broker_http_new (rules, TEST_HOST);
  /* each hostile piece alone: a request head, an answer head, a body */
  for (guint phase = 0; phase < 3; phase++) {
    const char *in = phase == 0 ? request : phase == 1 ? answer : answer_body;

    start = cpu_time_us ();
    if (phase == 0)
      g_assert_true (box_broker_http_from_client (http, (const guint8 *) in, strlen (in), out, &error));
    else
      g_assert_true (box_broker_http_from_upstream (http, (const guint8 *) in, strlen (in), out, &error));
    spent = cpu_time_us () - start;
    g_assert_no_error (error);
    g_test_message ("hostile piece %u (64 KiB, 16 rules of 8 KiB): %" G_GINT64_FORMAT " us", phase, spent);
#if defined(__SANITIZE_ADDRESS__)
    g_assert_cmpint (spent, <, 200000);
#else
    g_assert_cmpint (spent, <, 10000);
#endif
    if (phase == 1)
      g_assert_true (box_broker_http_from_client (http, (const guint8 *) "GET / HTTP/1.1\r\n\r\n", 18, out, &error));
  }
  /* the body a byte a read, each byte a value's start held back: what is
   * released is not moved again and again */
  g_assert_true (box_broker_http_from_client (http, (const guint8 *) "GET / HTTP/1.1\r\n\r\n", 18, out, &error));
  start = cpu_time_us ();
  for (gsize i = 0; answer_body[i] != '\0'; i++)
    g_assert_true (box_broker_http_from_upstream (http, (const guint8 *) answer_body + i, 1, out, &error));
  spent = cpu_time_us () - start;
  g_test_message ("the hostile body a byte a read: %" G_GINT64_FORMAT " us", spent);
#if defined(__SANITIZE_ADDRESS__)
  g_assert_cmpint (spent, <, 2000000);
#else
  g_assert_cmpint (spent, <, 50000);
#endif
  box_broker_http_free (http);
}

static void
test_error_response (void)
{
  g_autoptr(GBytes) bytes = box_broker_http_error_response (502, "broker_failed", "said \"no\"\n");
  gsize len;
  const char *data = g_bytes_get_data (bytes, &len);
  g_autofree char *text = g_strndup (data, len);
  const char *body = strstr (text, "\r\n\r\n") + 4;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *length = g_strdup_printf ("Content-Length: %zu\r\n", strlen (body));
  JsonObject *error;

  g_assert_true (g_str_has_prefix (text, "HTTP/1.1 502 Bad Gateway\r\n"));
  g_assert_nonnull (strstr (text, "Content-Type: application/json\r\n"));
  g_assert_nonnull (strstr (text, "Connection: close\r\n"));
  g_assert_nonnull (strstr (text, length));
  g_assert_true (json_parser_load_from_data (parser, body, -1, NULL));
  error = json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)), "error");
  g_assert_cmpstr (json_object_get_string_member (error, "code"), ==, "broker_failed");
  g_assert_cmpstr (json_object_get_string_member (error, "message"), ==, "said \"no\"\n");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/broker-http/replace-places", test_replace_places);
  g_test_add_func ("/broker-http/value-not-for-target", test_value_not_for_target);
  g_test_add_func ("/broker-http/bodies-untouched", test_bodies_untouched);
  g_test_add_func ("/broker-http/inject", test_inject);
  g_test_add_func ("/broker-http/path-prefix", test_path_prefix);
  g_test_add_func ("/broker-http/smuggling", test_smuggling);
  g_test_add_func ("/broker-http/websocket", test_websocket);
  g_test_add_func ("/broker-http/h2c", test_h2c);
  g_test_add_func ("/broker-http/continue", test_continue);
  g_test_add_func ("/broker-http/answers-framing", test_answers_framing);
  g_test_add_func ("/broker-http/answers-checked", test_answers_checked);
  g_test_add_func ("/broker-http/chunk-value", test_chunk_value);
  g_test_add_func ("/broker-http/no-rules", test_no_rules);
  g_test_add_func ("/broker-http/overlapping-value", test_overlapping_value);
  g_test_add_func ("/broker-http/rules-replaced", test_rules_replaced);
  g_test_add_func ("/broker-http/hostile-cost", test_hostile_cost);
  g_test_add_func ("/broker-http/rewrite-cap", test_rewrite_cap);
  g_test_add_func ("/broker-http/identity", test_identity);
  g_test_add_func ("/broker-http/host", test_host);
  g_test_add_func ("/broker-http/error-response", test_error_response);
  return g_test_run ();
}
