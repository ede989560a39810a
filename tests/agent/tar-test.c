/* Unit tests of the tar layer (agent/tar.c: libarchive's reader and writer
 * as the agent drives them, and the entry-name check). Host-side: GTest. */
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "tar.h"

#define BLOCK 512

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
  gboolean stop_at_check; /* refuse names the check refuses, as tar-put does */
  guint entry_start;      /* where the current entry's data starts in data */
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
  s->entry_start = s->data->len;
  if (s->stop_at_check && !ba_tar_name_check (e->name, norm, sizeof norm, err))
    return false;
  return true;
}

static bool
s_data (void *ud, uint64_t off, const uint8_t *p, size_t n, const char **err)
{
  Sink *s = ud;
  g_assert_cmpuint (off, ==, s->data->len - s->entry_start); /* nothing here is sparse */
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

/* An archive in memory, read back in pieces of a given size. */
typedef struct {
  const uint8_t *p;
  size_t len, off, piece;
} Mem;

static ssize_t
mem_read (void *ud, void *buf, size_t size)
{
  Mem *m = ud;
  size_t n = MIN (MIN (size, m->piece), m->len - m->off);
  memcpy (buf, m->p + m->off, n);
  m->off += n;
  return (ssize_t) n;
}

static int
read_mem (const void *p, size_t len, size_t piece, Sink *s, const char **err)
{
  Mem m = { p, len, 0, piece };
  return ba_tar_read (mem_read, &m, &sink, s, err);
}

static void
collect (void *ud, const void *p, size_t n)
{
  g_byte_array_append (ud, p, (guint) n);
}

static void
write_entry (BaTarWriter *w, const char *name, char type, const char *link, const char *data)
{
  BaTarEntry e = { .name = name, .link = link != NULL ? link : "", .type = type, .mode = 0644,
                   .mtime = 1700000000, .size = data != NULL ? strlen (data) : 0 };
  const char *err = NULL;
  g_assert_true (ba_tar_write_header (w, &e, &err));
  if (data != NULL)
    ba_tar_write_data (w, data, strlen (data));
}

/* A raw ustar header (for what the writer never makes: GNU long names,
 * hand-made pax records, damage). */
static void
raw_entry (GByteArray *b, const char *name, char type, const void *data, size_t n)
{
  uint8_t h[BLOCK] = { 0 };
  static const uint8_t zeros[BLOCK];
  unsigned sum = 0;
  g_strlcpy ((char *) h, name, 100);
  memcpy (h + 100, "0000644", 7);
  memcpy (h + 108, "0000000", 7);
  memcpy (h + 116, "0000000", 7);
  g_snprintf ((char *) h + 124, 12, "%011o", (unsigned) n);
  memcpy (h + 136, "14524770400", 11);
  h[156] = (uint8_t) type;
  memcpy (h + 257, "ustar\0" "00", 8);
  memset (h + 148, ' ', 8);
  for (int i = 0; i < BLOCK; i++)
    sum += h[i];
  g_snprintf ((char *) h + 148, 8, "%06o", sum);
  g_byte_array_append (b, h, BLOCK);
  g_byte_array_append (b, data, (guint) n);
  g_byte_array_append (b, zeros, (guint) ((BLOCK - n % BLOCK) % BLOCK));
}

static void
raw_end (GByteArray *b)
{
  static const uint8_t zeros[2 * BLOCK];
  g_byte_array_append (b, zeros, sizeof zeros);
}

static void
test_roundtrip (void)
{
  g_autofree char *long_name = g_strnfill (300, 'n');  /* no slash: needs pax */
  g_autofree char *dirs = g_strnfill (120, 'd');
  g_autofree char *split_name = g_strdup_printf ("%s/%s", dirs, "file");
  g_autofree char *long_link = g_strnfill (200, 'l');
  GByteArray *b = g_byte_array_new ();
  BaTarWriter *w = ba_tar_writer_new (collect, b);
  const char *err = NULL;
  Sink s;

  write_entry (w, "dir/", '5', NULL, NULL);
  write_entry (w, "dir/a.txt", '0', NULL, "hello");
  write_entry (w, long_name, '0', NULL, "x");
  write_entry (w, split_name, '0', NULL, NULL);
  write_entry (w, "sym", '2', long_link, NULL);
  write_entry (w, "hard", '1', "dir/a.txt", NULL);
  write_entry (w, "caf\xc3\xa9/\xe2\x82\xac.txt", '0', NULL, "utf8");
  ba_tar_writer_finish (w);
  g_assert_cmpuint (b->len % BLOCK, ==, 0);

  /* all at once, then in small uneven pieces: the same result */
  for (size_t piece = b->len; piece > 0; piece = piece > 7 ? 7 : 0) {
    sink_init (&s);
    g_assert_cmpint (read_mem (b->data, b->len, piece, &s, &err), ==, 1);
    g_assert_cmpuint (s.names->len, ==, 7);
    g_assert_cmpstr (s.types->str, ==, "5000210");
    g_assert_cmpstr (g_ptr_array_index (s.names, 0), ==, "dir/");
    g_assert_cmpstr (g_ptr_array_index (s.names, 1), ==, "dir/a.txt");
    g_assert_cmpstr (g_ptr_array_index (s.names, 2), ==, long_name);
    g_assert_cmpstr (g_ptr_array_index (s.names, 3), ==, split_name);
    g_assert_cmpstr (g_ptr_array_index (s.links, 4), ==, long_link);
    g_assert_cmpstr (g_ptr_array_index (s.links, 5), ==, "dir/a.txt");
    g_assert_cmpstr (g_ptr_array_index (s.names, 6), ==, "caf\xc3\xa9/\xe2\x82\xac.txt");
    g_assert_cmpmem (s.data->data, s.data->len, "hellox" "utf8", 10);
    g_assert_cmpint (s.ends, ==, 7);
    sink_clear (&s);
  }
  g_byte_array_unref (b);
}

/* A file that shrank while it was read is padded to the size its header
 * promised, one that grew is cut: the archive stays well formed. */
static void
test_size_kept (void)
{
  GByteArray *b = g_byte_array_new ();
  BaTarWriter *w = ba_tar_writer_new (collect, b);
  BaTarEntry e = { .name = "short", .link = "", .type = '0', .mode = 0600, .size = 10 };
  const char *err = NULL;
  Sink s;

  g_assert_true (ba_tar_write_header (w, &e, &err));
  ba_tar_write_data (w, "abc", 3);
  e.name = "long";
  e.size = 2;
  g_assert_true (ba_tar_write_header (w, &e, &err));
  ba_tar_write_data (w, "abcdef", 6);
  ba_tar_writer_finish (w);
  sink_init (&s);
  g_assert_cmpint (read_mem (b->data, b->len, b->len, &s, &err), ==, 1);
  g_assert_cmpmem (s.data->data, s.data->len, "abc\0\0\0\0\0\0\0" "ab", 12);
  sink_clear (&s);
  g_byte_array_unref (b);
}

static void
test_not_tar (void)
{
  GByteArray *b = g_byte_array_new ();
  const char *err = NULL;
  Sink s;
  int rc;

  /* an empty input is an empty archive */
  sink_init (&s);
  g_assert_cmpint (read_mem ("", 0, 1, &s, &err), ==, 1);
  g_assert_cmpuint (s.names->len, ==, 0);
  sink_clear (&s);
  /* text, a gzip header, a header with a bad checksum */
  sink_init (&s);
  err = NULL;
  g_assert_cmpint (read_mem ("hello, this is not a tar archive\n", 33, 64, &s, &err), ==, -1);
  g_assert_nonnull (err);
  g_assert_cmpint (read_mem ("\x1f\x8b\x08\0\0\0\0\0", 8, 64, &s, &err), ==, -1);
  raw_entry (b, "f", '0', "abc", 3);
  raw_end (b);
  b->data[0] ^= 1;
  rc = read_mem (b->data, b->len, b->len, &s, &err);
  g_assert_cmpint (rc, ==, -1);
  g_assert_cmpuint (s.names->len, ==, 0);
  sink_clear (&s);
  g_byte_array_unref (b);
}

static void
test_truncated (void)
{
  GByteArray *b = g_byte_array_new ();
  const char *err = NULL;
  Sink s;

  raw_entry (b, "f", '0', "abcdef", 6);
  raw_entry (b, "g", '0', "gg", 2);
  sink_init (&s);
  /* cut inside the data */
  g_assert_cmpint (read_mem (b->data, BLOCK + 3, 64, &s, &err), ==, -1);
  g_assert_nonnull (err);
  /* cut inside the second header */
  err = NULL;
  g_assert_cmpint (read_mem (b->data, 2 * BLOCK + 100, 64, &s, &err), ==, -1);
  g_assert_nonnull (err);
  sink_clear (&s);
  /* at an entry boundary without end blocks: accepted */
  sink_init (&s);
  g_assert_cmpint (read_mem (b->data, b->len, 64, &s, &err), ==, 1);
  g_assert_cmpuint (s.names->len, ==, 2);
  sink_clear (&s);
  g_byte_array_unref (b);
}

/* GNU long names ('L') and pax paths reach the check like any name. */
static void
test_meta_names (void)
{
  const char *evil = "../../etc/cron.d/x";
  GByteArray *b = g_byte_array_new ();
  const char *err = NULL;
  char rec[64];
  Sink s;

  /* GNU: ././@LongLink with the name as data, then the entry */
  raw_entry (b, "././@LongLink", 'L', evil, strlen (evil) + 1);
  raw_entry (b, "short", '0', "x", 1);
  raw_end (b);
  sink_init (&s);
  s.stop_at_check = TRUE;
  g_assert_cmpint (read_mem (b->data, b->len, 100, &s, &err), ==, 0);
  g_assert_cmpstr (g_ptr_array_index (s.names, 0), ==, evil);
  g_assert_cmpstr (err, ==, "entry name with a .. component");
  sink_clear (&s);
  g_byte_array_set_size (b, 0);

  /* pax: "path=/etc/shadow" overrides the header's name */
  g_snprintf (rec, sizeof rec, "%d path=/etc/shadow\n", 20);
  raw_entry (b, "PaxHeader/x", 'x', rec, strlen (rec));
  raw_entry (b, "x", '0', NULL, 0);
  raw_end (b);
  sink_init (&s);
  s.stop_at_check = TRUE;
  g_assert_cmpint (read_mem (b->data, b->len, 100, &s, &err), ==, 0);
  g_assert_cmpstr (g_ptr_array_index (s.names, 0), ==, "/etc/shadow");
  g_assert_cmpstr (err, ==, "absolute entry name");
  sink_clear (&s);
  g_byte_array_unref (b);
}

/* Sizes and ids beyond ustar's octal fields go into a pax header. */
static void
test_big_size (void)
{
  GByteArray *b = g_byte_array_new ();
  BaTarWriter *w = ba_tar_writer_new (collect, b);
  BaTarEntry e = { .name = "big", .link = "", .type = '0', .size = (uint64_t) 9 << 30, .uid = 5000000 };
  const char *err = NULL;
  Sink s;

  g_assert_true (ba_tar_write_header (w, &e, &err));
  g_assert_cmpuint (b->len, ==, 3 * BLOCK); /* pax header, its data, the header */
  sink_init (&s);
  g_assert_cmpint (read_mem (b->data, b->len, b->len, &s, &err), ==, -1); /* no data follows */
  g_assert_cmpuint (s.sizes, ==, (uint64_t) 9 << 30);
  g_assert_cmpstr (g_ptr_array_index (s.names, 0), ==, "big");
  sink_clear (&s);
  /* dropped without its end (which would owe 9 GiB of zeros) */
  ba_tar_writer_abandon (w);
  g_assert_cmpuint (b->len, ==, 3 * BLOCK);
  g_byte_array_unref (b);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/agent/tar/name-check", test_name_check);
  g_test_add_func ("/agent/tar/roundtrip", test_roundtrip);
  g_test_add_func ("/agent/tar/size-kept", test_size_kept);
  g_test_add_func ("/agent/tar/not-tar", test_not_tar);
  g_test_add_func ("/agent/tar/truncated", test_truncated);
  g_test_add_func ("/agent/tar/meta-names", test_meta_names);
  g_test_add_func ("/agent/tar/big-size", test_big_size);
  return g_test_run ();
}
