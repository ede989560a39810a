/* Unit tests of the agent's wire protocol (agent/proto.c). Host-side: GTest. */
#include <glib.h>
#include <string.h>

#include "proto.h"

static void
test_frame_roundtrip (void)
{
  BaFrame f = { .type = BA_DATA, .stream = BA_STDERR, .chan = 0x80000001u, .len = 12345 }, g;
  uint8_t h[BA_HEADER_SIZE];
  ba_frame_encode (&f, h);
  g_assert_cmpint (ba_frame_decode (h, sizeof h, &g), ==, 1);
  g_assert_cmpuint (g.type, ==, BA_DATA);
  g_assert_cmpuint (g.stream, ==, BA_STDERR);
  g_assert_cmpuint (g.chan, ==, 0x80000001u);
  g_assert_cmpuint (g.len, ==, 12345);
  /* truncated header: need more */
  g_assert_cmpint (ba_frame_decode (h, 5, &g), ==, 0);
  /* any flipped bit in the header is refused */
  for (size_t i = 0; i < sizeof h; i++) {
    uint8_t c[BA_HEADER_SIZE];
    memcpy (c, h, sizeof c);
    c[i] ^= 0x10;
    g_assert_cmpint (ba_frame_decode (c, sizeof c, &g), ==, -1);
  }
}

static void
test_frame_limits (void)
{
  uint8_t h[BA_HEADER_SIZE];
  BaFrame g;
  BaFrame big = { .type = BA_DATA, .chan = 1, .len = BA_MAX_PAYLOAD + 1 };
  BaFrame credit = { .type = BA_CREDIT, .chan = 1, .len = 3 };
  BaFrame close = { .type = BA_CLOSE, .chan = 1, .len = 1 };
  BaFrame unknown = { .type = 9, .chan = 1, .len = 0 };
  ba_frame_encode (&big, h);
  g_assert_cmpint (ba_frame_decode (h, sizeof h, &g), ==, -1);
  ba_frame_encode (&credit, h);
  g_assert_cmpint (ba_frame_decode (h, sizeof h, &g), ==, -1);
  ba_frame_encode (&close, h);
  g_assert_cmpint (ba_frame_decode (h, sizeof h, &g), ==, -1);
  ba_frame_encode (&unknown, h);
  g_assert_cmpint (ba_frame_decode (h, sizeof h, &g), ==, -1);
}

static void
test_frame_resync (void)
{
  uint8_t buf[64] = { 0xc5, 0x00, 0xc5, 0xb1, 7, 7, 7 };
  BaFrame f = { .type = BA_CTRL, .chan = 0, .len = 2 };
  ba_frame_encode (&f, buf + 20);
  g_assert_cmpuint (ba_frame_resync (buf, 20 + BA_HEADER_SIZE), ==, 20);
  g_assert_cmpuint (ba_frame_resync (buf, 7), ==, 7);
  /* a header cut short at the end may still be one */
  g_assert_cmpuint (ba_frame_resync (buf + 20, 3), ==, 0);
}

static void
test_json_valid (void)
{
  const char *err = NULL;
  const char *text = " {\"id\": 7, \"op\": \"exec\", \"argv\": [\"a\\u00e9\\ud83d\\ude00\", \"\\n\"],"
                     " \"tty\": true, \"env\": {}, \"x\": null, \"f\": -1.5e3, \"big\": 9223372036854775807} ";
  BaJson *v = ba_json_parse (text, strlen (text), &err);
  const BaJson *argv;
  int64_t i;
  g_assert_nonnull (v);
  g_assert_true (ba_json_get_int (v, "id", &i));
  g_assert_cmpint (i, ==, 7);
  g_assert_cmpstr (ba_json_get_str (v, "op"), ==, "exec");
  argv = ba_json_get (v, "argv");
  g_assert_cmpint (argv->type, ==, BA_JARR);
  g_assert_cmpstr (argv->child->s, ==, "a\xc3\xa9\xf0\x9f\x98\x80");
  g_assert_cmpstr (argv->child->next->s, ==, "\n");
  g_assert_true (ba_json_get_bool (v, "tty", false));
  g_assert_cmpint (ba_json_get (v, "x")->type, ==, BA_JNULL);
  g_assert_false (ba_json_get_int (v, "f", &i));
  g_assert_cmpfloat (ba_json_get (v, "f")->d, ==, -1500.0);
  g_assert_true (ba_json_get_int (v, "big", &i));
  g_assert_cmpint (i, ==, G_MAXINT64);
  ba_json_free (v);
}

static void
test_json_invalid (void)
{
  const char *bad[] = {
    "", "{", "}", "{\"a\":1,}", "[1,]", "{\"a\":1} x", "{\"a\":1,\"a\":2}", "{a:1}", "01", "1.", "-", "+1",
    ".5", "1e", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\x01\"", "\"\xff\"",
    "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "tru", "nul", "[1 2]", "{\"a\" 1}", "NaN", "1e999", "\"abc",
    "{\"a\\u0000b\":1}",
  };
  g_autoptr(GString) deep = g_string_new (NULL);
  const char *err = NULL;
  for (size_t i = 0; i < G_N_ELEMENTS (bad); i++) {
    BaJson *v = ba_json_parse (bad[i], strlen (bad[i]), &err);
    if (v != NULL)
      g_error ("accepted %s", bad[i]);
    g_assert_nonnull (err);
  }
  for (int i = 0; i < BA_JSON_MAX_DEPTH + 2; i++)
    g_string_append_c (deep, '[');
  for (int i = 0; i < BA_JSON_MAX_DEPTH + 2; i++)
    g_string_append_c (deep, ']');
  g_assert_null (ba_json_parse (deep->str, deep->len, &err));
  g_assert_cmpstr (err, ==, "nested too deeply");
}

static void
test_json_writer (void)
{
  BaBuf b = { 0 };
  const char *err = NULL;
  BaJson *v;
  static const char tricky[] = "q\"b\\s\x01\x1f\x7f \xc3\xa9 \xff end";
  ba_jw_begin (&b);
  ba_jw_int (&b, "id", -3);
  ba_jw_bool (&b, "ok", true);
  ba_jw_strn (&b, "s", tricky, sizeof tricky - 1);
  ba_jw_key (&b, "o");
  ba_jw_begin (&b);
  ba_jw_str (&b, "k", "v");
  ba_jw_end (&b);
  ba_jw_end (&b);
  v = ba_json_parse ((const char *) b.data, b.len, &err);
  g_assert_nonnull (v);
  /* invalid UTF-8 comes back as U+FFFD, everything else unchanged */
  g_assert_cmpstr (ba_json_get_str (v, "s"), ==, "q\"b\\s\x01\x1f\x7f \xc3\xa9 \xef\xbf\xbd end");
  g_assert_cmpstr (ba_json_get_str (ba_json_get (v, "o"), "k"), ==, "v");
  ba_json_free (v);
  ba_buf_clear (&b);
}

static void
test_base64 (void)
{
  uint8_t out[64];
  BaBuf b = { 0 };
  for (size_t n = 0; n < 20; n++) {
    uint8_t in[20];
    long r;
    for (size_t i = 0; i < n; i++)
      in[i] = (uint8_t) (i * 37 + n);
    ba_buf_clear (&b);
    ba_base64_encode (&b, in, n);
    r = ba_base64_decode ((const char *) b.data, b.len, out);
    g_assert_cmpint (r, ==, (long) n);
    g_assert_true (n == 0 || memcmp (in, out, n) == 0);
  }
  ba_buf_clear (&b);
  g_assert_cmpint (ba_base64_decode ("aGk=", 4, out), ==, 2);
  g_assert_cmpint (ba_base64_decode ("aGk", 3, out), ==, -1);
  g_assert_cmpint (ba_base64_decode ("a=Gk", 4, out), ==, -1);
  g_assert_cmpint (ba_base64_decode ("aG=k", 4, out), ==, -1);
  g_assert_cmpint (ba_base64_decode ("aGk=aGk=", 8, out), ==, -1);
  g_assert_cmpint (ba_base64_decode ("a\0k=", 4, out), ==, -1);
}

static void
test_grow (void)
{
  int *v = NULL;
  size_t cap = 0;
  for (size_t n = 0; n < 1000; n++) {
    g_assert_true (ba_grow ((void **) &v, &cap, n, sizeof *v));
    g_assert_cmpuint (cap, >, n);
    v[n] = (int) n;
  }
  g_assert_cmpuint (cap, ==, 1024);
  for (size_t n = 0; n < 1000; n++)
    g_assert_cmpint (v[n], ==, (int) n);
  /* a jump past the next doubling */
  g_assert_true (ba_grow ((void **) &v, &cap, 5000, sizeof *v));
  g_assert_cmpuint (cap, ==, 8192);
  g_assert_cmpint (v[999], ==, 999);
  free (v);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/agent/proto/frame-roundtrip", test_frame_roundtrip);
  g_test_add_func ("/agent/proto/frame-limits", test_frame_limits);
  g_test_add_func ("/agent/proto/frame-resync", test_frame_resync);
  g_test_add_func ("/agent/proto/json-valid", test_json_valid);
  g_test_add_func ("/agent/proto/json-invalid", test_json_invalid);
  g_test_add_func ("/agent/proto/json-writer", test_json_writer);
  g_test_add_func ("/agent/proto/base64", test_base64);
  g_test_add_func ("/agent/proto/grow", test_grow);
  return g_test_run ();
}
