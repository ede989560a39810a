/* Unit tests of the tar format code (agent/tar.c). Host-side: GTest. */
#include <glib.h>
#include <string.h>

#include "tar.h"

static void
test_name_check (void)
{
  static const struct { const char *in, *out; } ok[] = {
    { "a", "a" }, { "a/b", "a/b" }, { "./a/b", "a/b" }, { "a//b/", "a/b" }, { "././a", "a" },
    { ".", "" }, { "./", "" }, { "a/./b", "a/b" }, { "..a/b..", "..a/b.." }, { "a/...", "a/..." },
  };
  static const char *bad[] = {
    "", "/", "/etc/passwd", "..", "../x", "a/../../x", "a/..", "./..", "a/b/../c", "//x",
  };
  char out[64];
  const char *err;
  for (size_t i = 0; i < G_N_ELEMENTS (ok); i++) {
    err = NULL;
    g_assert_true (ba_tar_name_check (ok[i].in, out, sizeof out, &err));
    g_assert_cmpstr (out, ==, ok[i].out);
  }
  for (size_t i = 0; i < G_N_ELEMENTS (bad); i++) {
    err = NULL;
    g_assert_false (ba_tar_name_check (bad[i], out, sizeof out, &err));
    g_assert_nonnull (err);
  }
  /* too long for the buffer */
  g_assert_false (ba_tar_name_check ("abcdefgh/abcdefgh", out, 10, &err));
}

typedef struct {
  GPtrArray *names;
  GPtrArray *links;
  GString *types;
  GByteArray *data;
  guint64 sizes;
  int ends;
  gboolean stop_at_dotdot;
} Sink;

static bool
s_entry (void *ud, const BaTarEntry *e, const char **err)
{
  Sink *s = ud;
  char norm[BA_TAR_NAME_MAX + 1];
  g_ptr_array_add (s->names, g_strdup (e->name));
  g_ptr_array_add (s->links, g_strdup (e->link));
  g_string_append_c (s->types, e->type);
  s->sizes += e->size;
  if (s->stop_at_dotdot && !ba_tar_name_check (e->name, norm, sizeof norm, err))
    return false;
  return true;
}

static bool
s_data (void *ud, const uint8_t *p, size_t n, const char **err)
{
  Sink *s = ud;
  g_byte_array_append (s->data, p, (guint) n);
  return true;
}

static bool
s_end (void *ud, const char **err)
{
  ((Sink *) ud)->ends++;
  return true;
}

static const BaTarSink sink = { s_entry, s_data, s_end };

static void
sink_init (Sink *s)
{
  memset (s, 0, sizeof *s);
  s->names = g_ptr_array_new_with_free_func (g_free);
  s->links = g_ptr_array_new_with_free_func (g_free);
  s->types = g_string_new (NULL);
  s->data = g_byte_array_new ();
}

static void
sink_clear (Sink *s)
{
  g_ptr_array_unref (s->names);
  g_ptr_array_unref (s->links);
  g_string_free (s->types, TRUE);
  g_byte_array_unref (s->data);
}

static void
add_entry (BaBuf *b, const char *name, char type, const char *link, const void *data, size_t n)
{
  static const uint8_t zeros[BA_TAR_BLOCK];
  BaTarEntry e;
  memset (&e, 0, sizeof e);
  g_strlcpy (e.name, name, sizeof e.name);
  if (link != NULL)
    g_strlcpy (e.link, link, sizeof e.link);
  e.type = type;
  e.size = n;
  e.mode = 0644;
  e.mtime = 1700000000;
  ba_tar_encode (b, &e);
  ba_buf_append (b, data, n);
  ba_buf_append (b, zeros, ba_tar_padding (n));
}

static void
finish_archive (BaBuf *b)
{
  static const uint8_t zeros[2 * BA_TAR_BLOCK];
  ba_buf_append (b, zeros, sizeof zeros);
}

static void
test_roundtrip (void)
{
  g_autofree char *long_name = NULL, *split_name = NULL, *long_link = NULL, *dirs = NULL;
  BaBuf b = { 0 };
  Sink s;
  BaTarReader r;
  const char *err = NULL;

  long_name = g_strnfill (300, 'n');              /* no slash: needs pax */
  dirs = g_strnfill (120, 'd');
  split_name = g_strdup_printf ("%s/%s", dirs, "file"); /* prefix/name */
  long_link = g_strnfill (200, 'l');
  add_entry (&b, "dir/", '5', NULL, NULL, 0);
  add_entry (&b, "dir/a.txt", '0', NULL, "hello", 5);
  add_entry (&b, long_name, '0', NULL, "x", 1);
  add_entry (&b, split_name, '0', NULL, NULL, 0);
  add_entry (&b, "sym", '2', long_link, NULL, 0);
  add_entry (&b, "hard", '1', "dir/a.txt", NULL, 0);
  finish_archive (&b);

  /* all at once, then byte by byte: the same result */
  for (int mode = 0; mode < 2; mode++) {
    int rc = 0;
    sink_init (&s);
    ba_tar_reader_init (&r);
    if (mode == 0) {
      rc = ba_tar_feed (&r, b.data, b.len, &sink, &s, &err);
    } else {
      for (size_t i = 0; i < b.len && rc == 0; i++)
        rc = ba_tar_feed (&r, b.data + i, 1, &sink, &s, &err);
    }
    g_assert_cmpint (rc, ==, 1);
    g_assert_true (ba_tar_finish (&r, &err));
    g_assert_cmpuint (s.names->len, ==, 6);
    g_assert_cmpstr (s.types->str, ==, "500021");
    g_assert_cmpstr (g_ptr_array_index (s.names, 0), ==, "dir/");
    g_assert_cmpstr (g_ptr_array_index (s.names, 1), ==, "dir/a.txt");
    g_assert_cmpstr (g_ptr_array_index (s.names, 2), ==, long_name);
    g_assert_cmpstr (g_ptr_array_index (s.names, 3), ==, split_name);
    g_assert_cmpstr (g_ptr_array_index (s.links, 4), ==, long_link);
    g_assert_cmpstr (g_ptr_array_index (s.links, 5), ==, "dir/a.txt");
    g_assert_cmpmem (s.data->data, s.data->len, "hellox", 6);
    g_assert_cmpint (s.ends, ==, 6);
    ba_tar_reader_clear (&r);
    sink_clear (&s);
  }
  ba_buf_clear (&b);
}

static void
test_header_checks (void)
{
  BaBuf b = { 0 };
  BaTarEntry e;
  const char *err = NULL;
  uint8_t zero[BA_TAR_BLOCK] = { 0 };
  add_entry (&b, "f", '0', NULL, "abc", 3);
  g_assert_cmpint (ba_tar_header_parse (b.data, &e, &err), ==, 1);
  g_assert_cmpstr (e.name, ==, "f");
  g_assert_cmpuint (e.size, ==, 3);
  g_assert_cmpuint (e.mode, ==, 0644);
  g_assert_cmpint (e.mtime, ==, 1700000000);
  g_assert_cmpint (ba_tar_header_parse (zero, &e, &err), ==, 0);
  b.data[0] ^= 1; /* checksum no longer matches */
  g_assert_cmpint (ba_tar_header_parse (b.data, &e, &err), ==, -1);
  g_assert_nonnull (err);
  b.data[0] ^= 1;
  memcpy (b.data + 124, "9999", 4); /* not octal */
  g_assert_cmpint (ba_tar_header_parse (b.data, &e, &err), ==, -1);
  ba_buf_clear (&b);
}

static void
test_truncated (void)
{
  BaBuf b = { 0 };
  Sink s;
  BaTarReader r;
  const char *err = NULL;
  add_entry (&b, "f", '0', NULL, "abcdef", 6);
  sink_init (&s);
  /* cut inside the data */
  ba_tar_reader_init (&r);
  g_assert_cmpint (ba_tar_feed (&r, b.data, BA_TAR_BLOCK + 3, &sink, &s, &err), ==, 0);
  g_assert_false (ba_tar_finish (&r, &err));
  g_assert_cmpstr (err, ==, "truncated archive");
  ba_tar_reader_clear (&r);
  /* cut inside a header */
  ba_tar_reader_init (&r);
  g_assert_cmpint (ba_tar_feed (&r, b.data, 100, &sink, &s, &err), ==, 0);
  g_assert_false (ba_tar_finish (&r, &err));
  ba_tar_reader_clear (&r);
  /* at an entry boundary without end blocks: accepted */
  ba_tar_reader_init (&r);
  g_assert_cmpint (ba_tar_feed (&r, b.data, b.len, &sink, &s, &err), ==, 0);
  g_assert_true (ba_tar_finish (&r, &err));
  ba_tar_reader_clear (&r);
  sink_clear (&s);
  ba_buf_clear (&b);
}

/* GNU long names ('L') and pax paths reach the name check like any name. */
static void
test_meta_names (void)
{
  BaBuf b = { 0 };
  Sink s;
  BaTarReader r;
  const char *err = NULL;
  const char *evil = "../../etc/cron.d/x";
  BaBuf pax = { 0 };
  char rec[64];

  /* GNU: ././@LongLink with the name as data, then the entry */
  add_entry (&b, "././@LongLink", 'L', NULL, evil, strlen (evil) + 1);
  add_entry (&b, "short", '0', NULL, "x", 1);
  finish_archive (&b);
  sink_init (&s);
  s.stop_at_dotdot = TRUE;
  ba_tar_reader_init (&r);
  g_assert_cmpint (ba_tar_feed (&r, b.data, b.len, &sink, &s, &err), ==, -1);
  g_assert_cmpstr (g_ptr_array_index (s.names, 0), ==, evil);
  g_assert_cmpstr (err, ==, "entry name with a .. component");
  ba_tar_reader_clear (&r);
  sink_clear (&s);
  ba_buf_clear (&b);

  /* pax: "path=/abs" overrides the header's name */
  g_snprintf (rec, sizeof rec, "%d path=/etc/shadow\n", 20);
  ba_buf_append (&pax, rec, strlen (rec));
  add_entry (&b, "PaxHeader/x", 'x', NULL, pax.data, pax.len);
  add_entry (&b, "x", '0', NULL, NULL, 0);
  finish_archive (&b);
  sink_init (&s);
  s.stop_at_dotdot = TRUE;
  ba_tar_reader_init (&r);
  g_assert_cmpint (ba_tar_feed (&r, b.data, b.len, &sink, &s, &err), ==, -1);
  g_assert_cmpstr (g_ptr_array_index (s.names, 0), ==, "/etc/shadow");
  g_assert_cmpstr (err, ==, "absolute entry name");
  ba_tar_reader_clear (&r);
  sink_clear (&s);
  ba_buf_clear (&b);

  /* a malformed pax record is refused */
  add_entry (&b, "PaxHeader/x", 'x', NULL, "99 path=x\n", 10);
  add_entry (&b, "x", '0', NULL, NULL, 0);
  sink_init (&s);
  ba_tar_reader_init (&r);
  g_assert_cmpint (ba_tar_feed (&r, b.data, b.len, &sink, &s, &err), ==, -1);
  g_assert_cmpuint (s.names->len, ==, 0);
  ba_tar_reader_clear (&r);
  sink_clear (&s);
  ba_buf_clear (&b);
  ba_buf_clear (&pax);
}

static void
test_big_size (void)
{
  BaBuf b = { 0 };
  BaTarEntry e = { 0 }, got;
  BaTarReader r;
  Sink s;
  const char *err = NULL;
  g_strlcpy (e.name, "big", sizeof e.name);
  e.type = '0';
  e.size = (uint64_t) 9 << 30; /* beyond 8 GiB: pax size */
  e.uid = 5000000;             /* beyond 7 octal digits: pax uid */
  ba_tar_encode (&b, &e);
  g_assert_cmpuint (b.len, ==, 3 * BA_TAR_BLOCK);
  sink_init (&s);
  ba_tar_reader_init (&r);
  g_assert_cmpint (ba_tar_feed (&r, b.data, b.len, &sink, &s, &err), ==, 0);
  g_assert_cmpuint (s.sizes, ==, (uint64_t) 9 << 30);
  g_assert_cmpint (ba_tar_header_parse (b.data + 2 * BA_TAR_BLOCK, &got, &err), ==, 1);
  g_assert_cmpstr (got.name, ==, "big");
  ba_tar_reader_clear (&r);
  sink_clear (&s);
  ba_buf_clear (&b);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/agent/tar/name-check", test_name_check);
  g_test_add_func ("/agent/tar/roundtrip", test_roundtrip);
  g_test_add_func ("/agent/tar/header-checks", test_header_checks);
  g_test_add_func ("/agent/tar/truncated", test_truncated);
  g_test_add_func ("/agent/tar/meta-names", test_meta_names);
  g_test_add_func ("/agent/tar/big-size", test_big_size);
  return g_test_run ();
}
