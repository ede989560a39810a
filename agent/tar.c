/* box guest agent: tar through libarchive, and the entry-name check. See tar.h. */
#include "tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ------------------------------------------------------------------- */

bool
ba_tar_name_check (const char *name, char *out, size_t outlen, const char **err)
{
  const char *p = name;
  size_t o = 0;

  if (name[0] == 0) {
    *err = "empty entry name";
    return false;
  }
  if (name[0] == '/') {
    *err = "absolute entry name";
    return false;
  }
  while (*p != 0) {
    const char *c = p;
    size_t n;
    while (*p != 0 && *p != '/')
      p++;
    n = (size_t) (p - c);
    while (*p == '/')
      p++;
    if (n == 0 || (n == 1 && c[0] == '.'))
      continue;
    if (n == 2 && c[0] == '.' && c[1] == '.') {
      *err = "entry name with a .. component";
      return false;
    }
    if (o + (o > 0) + n + 1 > outlen) {
      *err = "entry name too long";
      return false;
    }
    if (o > 0)
      out[o++] = '/';
    memcpy (out + o, c, n);
    o += n;
  }
  if (outlen == 0) {
    *err = "entry name too long";
    return false;
  }
  out[o] = 0;
  return true;
}

/* ---- reading ----------------------------------------------------------------- */

#define READ_BUF (1u << 20)

typedef struct {
  BaTarReadFn fn;
  void *ud;
  uint8_t *buf;
} Input;

static la_ssize_t
input_read (struct archive *a, void *data, const void **buf)
{
  Input *in = data;
  ssize_t n = in->fn (in->ud, in->buf, READ_BUF);

  *buf = in->buf;
  if (n < 0) {
    archive_set_error (a, errno, "reading the archive: %s", strerror (errno));
    return -1;
  }
  return n;
}

static char last_error[512];

static const char *
archive_failure (struct archive *a, const char *what)
{
  const char *why = archive_error_string (a);
  snprintf (last_error, sizeof last_error, "%s: %s", what, why != NULL ? why : "damaged archive");
  return last_error;
}

/* Names are bytes here, as they are on Linux: pax headers carry UTF-8, and
 * libarchive hands them over as multibyte strings of the current locale. */
static void
utf8_locale (void)
{
  static bool done;
  if (!done && setlocale (LC_CTYPE, "C.UTF-8") == NULL)
    setlocale (LC_CTYPE, "C.utf8");
  done = true;
}

static void
entry_from_archive (struct archive_entry *ae, BaTarEntry *e)
{
  const char *name = archive_entry_pathname (ae);
  const char *hard = archive_entry_hardlink (ae);

  memset (e, 0, sizeof *e);
  e->name = name != NULL ? name : "";
  e->link = "";
  if (hard != NULL) {
    e->type = '1';
    e->link = hard;
  } else {
    switch (archive_entry_filetype (ae)) {
    case AE_IFREG: e->type = '0'; break;
    case AE_IFDIR: e->type = '5'; break;
    case AE_IFLNK:
      e->type = '2';
      e->link = archive_entry_symlink (ae) != NULL ? archive_entry_symlink (ae) : "";
      break;
    default: e->type = '?'; break;
    }
  }
  e->size = archive_entry_size_is_set (ae) && archive_entry_size (ae) > 0 ? (uint64_t) archive_entry_size (ae) : 0;
  e->mode = (uint32_t) archive_entry_perm (ae) & 07777;
  e->mtime = archive_entry_mtime (ae);
  e->uid = (uint32_t) archive_entry_uid (ae);
  e->gid = (uint32_t) archive_entry_gid (ae);
}

int
ba_tar_read (BaTarReadFn read_fn, void *read_ud, const BaTarSink *s, void *ud, const char **err)
{
  Input in = { read_fn, read_ud, malloc (READ_BUF) };
  struct archive *a = archive_read_new ();
  struct archive_entry *ae;
  int rc = 1;

  utf8_locale ();
  if (a == NULL || in.buf == NULL) {
    *err = "out of memory";
    free (in.buf);
    return -1;
  }
  archive_read_support_format_tar (a);
  archive_read_support_format_empty (a);
  if (archive_read_open (a, &in, NULL, input_read, NULL) != ARCHIVE_OK) {
    *err = archive_failure (a, "not a tar archive");
    rc = -1;
    goto out;
  }
  for (;;) {
    BaTarEntry e;
    int r = archive_read_next_header (a, &ae);
    if (r == ARCHIVE_EOF)
      break;
    if (r < ARCHIVE_WARN) {
      *err = archive_failure (a, "bad archive");
      rc = -1;
      goto out;
    }
    entry_from_archive (ae, &e);
    if (!s->entry (ud, &e, err)) {
      rc = 0;
      goto out;
    }
    for (;;) {
      const void *p;
      size_t n;
      la_int64_t off;
      r = archive_read_data_block (a, &p, &n, &off);
      if (r == ARCHIVE_EOF)
        break;
      if (r < ARCHIVE_WARN) {
        *err = archive_failure (a, "bad archive");
        rc = -1;
        goto out;
      }
      if (n > 0 && !s->data (ud, (uint64_t) off, p, n, err)) {
        rc = 0;
        goto out;
      }
    }
    if (!s->entry_end (ud, err)) {
      rc = 0;
      goto out;
    }
  }
out:
  archive_read_free (a);
  free (in.buf);
  return rc;
}

/* ---- writing ----------------------------------------------------------------- */

struct BaTarWriter {
  struct archive *a;
  struct archive_entry *ae;
  BaTarWriteFn out;
  void *ud;
};

static la_ssize_t
output_write (struct archive *a, void *data, const void *p, size_t n)
{
  BaTarWriter *w = data;
  if (w->out != NULL)
    w->out (w->ud, p, n);
  return (la_ssize_t) n;
}

BaTarWriter *
ba_tar_writer_new (BaTarWriteFn out, void *ud)
{
  BaTarWriter *w = calloc (1, sizeof *w);

  utf8_locale ();
  if (w == NULL || (w->a = archive_write_new ()) == NULL || (w->ae = archive_entry_new ()) == NULL)
    abort ();
  w->out = out;
  w->ud = ud;
  archive_write_set_format_pax_restricted (w->a);
  /* no blocking: every piece goes out as it is made, ending with the two
   * end blocks rather than padding to a 10 KiB record */
  archive_write_set_bytes_per_block (w->a, 0);
  if (archive_write_open (w->a, w, NULL, output_write, NULL) != ARCHIVE_OK)
    abort ();
  return w;
}

bool
ba_tar_write_header (BaTarWriter *w, const BaTarEntry *e, const char **err)
{
  struct archive_entry *ae = w->ae;

  archive_entry_clear (ae);
  archive_entry_set_pathname (ae, e->name);
  archive_entry_set_perm (ae, e->mode & 07777);
  archive_entry_set_mtime (ae, e->mtime, 0);
  archive_entry_set_uid (ae, e->uid);
  archive_entry_set_gid (ae, e->gid);
  switch (e->type) {
  case '5':
    archive_entry_set_filetype (ae, AE_IFDIR);
    break;
  case '2':
    archive_entry_set_filetype (ae, AE_IFLNK);
    archive_entry_set_symlink (ae, e->link);
    break;
  case '1':
    archive_entry_set_filetype (ae, AE_IFREG);
    archive_entry_set_hardlink (ae, e->link);
    break;
  default:
    archive_entry_set_filetype (ae, AE_IFREG);
    archive_entry_set_size (ae, (la_int64_t) e->size);
    break;
  }
  if (archive_write_header (w->a, ae) < ARCHIVE_WARN) {
    *err = archive_failure (w->a, e->name);
    return false;
  }
  return true;
}

void
ba_tar_write_data (BaTarWriter *w, const void *p, size_t n)
{
  const uint8_t *b = p;
  while (n > 0) {
    la_ssize_t k = archive_write_data (w->a, b, n);
    if (k <= 0)
      return; /* beyond the entry's size */
    b += k;
    n -= (size_t) k;
  }
}

void
ba_tar_writer_abandon (BaTarWriter *w)
{
  /* failed, closing it does not pad the entry; what it still writes (the
   * end blocks) goes nowhere */
  archive_write_fail (w->a);
  w->out = NULL;
  ba_tar_writer_finish (w);
}

void
ba_tar_writer_finish (BaTarWriter *w)
{
  archive_write_close (w->a);
  archive_write_free (w->a);
  archive_entry_free (w->ae);
  free (w);
}

bool
ba_path_normalise (const char *path, char *out)
{
  size_t o = 0;
  if (path[0] != '/')
    return false;
  /* as a path API is expected to: "/tmp/.." is "/" for every check that
   * follows (delete refuses "/"), and a base name is never "." or ".." */
  for (const char *c = path, *end; *c != 0; c = end) {
    size_t n;
    while (*c == '/')
      c++;
    end = strchrnul (c, '/');
    n = (size_t) (end - c);
    if (n == 0 || (n == 1 && c[0] == '.'))
      continue;
    if (n == 2 && c[0] == '.' && c[1] == '.') {
      while (o > 0 && out[--o] != '/')
        ;
      continue;
    }
    out[o++] = '/';
    memcpy (out + o, c, n);
    o += n;
  }
  if (o == 0)
    out[o++] = '/';
  out[o] = 0;
  return true;
}
