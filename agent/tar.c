/* box guest agent: tar format. See tar.h. */
#include "tar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* header layout (POSIX ustar) */
#define H_NAME 0
#define H_MODE 100
#define H_UID 108
#define H_GID 116
#define H_SIZE 124
#define H_MTIME 136
#define H_CHKSUM 148
#define H_TYPE 156
#define H_LINK 157
#define H_MAGIC 257
#define H_VERSION 263
#define H_UNAME 265
#define H_GNAME 297
#define H_PREFIX 345

/* ---- numbers ----------------------------------------------------------- */

/* Octal (spaces/NULs around), or GNU base-256 when the top bit is set. */
static bool
parse_num (const uint8_t *f, size_t n, uint64_t *out)
{
  uint64_t v = 0;
  size_t i = 0;
  if (n > 0 && (f[0] & 0x80)) {
    if (f[0] & 0x40)
      return false; /* negative */
    v = f[0] & 0x3f;
    for (i = 1; i < n; i++) {
      if (v >> 55)
        return false;
      v = (v << 8) | f[i];
    }
    *out = v;
    return true;
  }
  while (i < n && (f[i] == ' ' || f[i] == 0))
    i++;
  if (i == n) {
    *out = 0;
    return true;
  }
  for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
    if (v >> 60)
      return false;
    v = v * 8 + (uint64_t) (f[i] - '0');
  }
  for (; i < n; i++)
    if (f[i] != ' ' && f[i] != 0)
      return false;
  *out = v;
  return true;
}

static void
put_octal (uint8_t *f, size_t n, uint64_t v)
{
  /* n-1 digits, then NUL */
  f[n - 1] = 0;
  for (size_t i = n - 1; i-- > 0; ) {
    f[i] = (uint8_t) ('0' + (v & 7));
    v >>= 3;
  }
}

static bool
fits_octal (size_t n, uint64_t v)
{
  return (n - 1) * 3 >= 64 || v < ((uint64_t) 1 << ((n - 1) * 3));
}

static void
copy_field (char *dst, const uint8_t *f, size_t n)
{
  size_t l = 0;
  while (l < n && f[l] != 0)
    l++;
  memcpy (dst, f, l);
  dst[l] = 0;
}

/* ---- header ------------------------------------------------------------ */

int
ba_tar_header_parse (const uint8_t b[BA_TAR_BLOCK], BaTarEntry *e, const char **err)
{
  uint64_t sum = 0, ssum = 0, want, v;
  bool zero = true;

  for (size_t i = 0; i < BA_TAR_BLOCK; i++)
    if (b[i] != 0) {
      zero = false;
      break;
    }
  if (zero)
    return 0;
  for (size_t i = 0; i < BA_TAR_BLOCK; i++) {
    uint8_t c = (i >= H_CHKSUM && i < H_CHKSUM + 8) ? ' ' : b[i];
    sum += c;
    ssum += (uint64_t) (int64_t) (int8_t) c;
  }
  if (!parse_num (b + H_CHKSUM, 8, &want) || (want != sum && want != (ssum & 0xffffffffu) && want != ssum)) {
    *err = "bad tar header checksum";
    return -1;
  }
  memset (e, 0, sizeof *e);
  if (memcmp (b + H_MAGIC, "ustar\0", 6) == 0 && b[H_PREFIX] != 0) {
    char prefix[156];
    copy_field (prefix, b + H_PREFIX, 155);
    snprintf (e->name, sizeof e->name, "%s/", prefix);
    copy_field (e->name + strlen (e->name), b + H_NAME, 100);
  } else {
    copy_field (e->name, b + H_NAME, 100);
  }
  copy_field (e->link, b + H_LINK, 100);
  e->type = (char) b[H_TYPE];
  if (e->type == 0 || e->type == '7')
    e->type = '0';
  if (b[H_TYPE] == 0 && e->name[0] != 0 && e->name[strlen (e->name) - 1] == '/')
    e->type = '5'; /* old tar: a directory is a name ending in / */
  if (!parse_num (b + H_MODE, 8, &v)) {
    *err = "bad mode in a tar header";
    return -1;
  }
  e->mode = (uint32_t) (v & 07777);
  if (!parse_num (b + H_SIZE, 12, &e->size) || e->size > ((uint64_t) 1 << 62)) {
    *err = "bad size in a tar header";
    return -1;
  }
  if (!parse_num (b + H_MTIME, 12, &v)) {
    *err = "bad mtime in a tar header";
    return -1;
  }
  e->mtime = (int64_t) (v & 0x7fffffffffffffffull);
  if (!parse_num (b + H_UID, 8, &v))
    v = 0;
  e->uid = (uint32_t) v;
  if (!parse_num (b + H_GID, 8, &v))
    v = 0;
  e->gid = (uint32_t) v;
  /* these types carry no data whatever the size field says */
  if (e->type == '1' || e->type == '2' || e->type == '5' || e->type == '3' || e->type == '4' || e->type == '6')
    e->size = 0;
  return 1;
}

/* ---- pax ---------------------------------------------------------------- */

static bool
parse_dec (const char *s, size_t n, uint64_t *out, bool allow_fraction)
{
  uint64_t v = 0;
  size_t i = 0;
  if (n == 0)
    return false;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
    if (v > (UINT64_MAX - 9) / 10)
      return false;
    v = v * 10 + (uint64_t) (s[i] - '0');
  }
  if (i == 0)
    return false;
  if (i < n && allow_fraction && s[i] == '.') {
    for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
      ;
  }
  if (i != n)
    return false;
  *out = v;
  return true;
}

bool
ba_tar_pax_apply (const uint8_t *data, size_t len, BaTarEntry *e, bool *have_size, const char **err)
{
  size_t off = 0;
  while (off < len) {
    const char *rec = (const char *) data + off, *sp, *eq;
    uint64_t rlen;
    size_t klen, vlen;
    sp = memchr (rec, ' ', len - off);
    if (sp == NULL || !parse_dec (rec, (size_t) (sp - rec), &rlen, false) || rlen < 5 || rlen > len - off ||
        rec[rlen - 1] != '\n') {
      *err = "bad pax header record";
      return false;
    }
    eq = memchr (sp + 1, '=', (size_t) (rec + rlen - 1 - (sp + 1)));
    if (eq == NULL) {
      *err = "bad pax header record";
      return false;
    }
    klen = (size_t) (eq - (sp + 1));
    vlen = (size_t) (rec + rlen - 1 - (eq + 1));
#define KEY(k) (klen == sizeof k - 1 && memcmp (sp + 1, k, klen) == 0)
    if (KEY ("path") || KEY ("linkpath")) {
      char *dst = KEY ("path") ? e->name : e->link;
      if (vlen > BA_TAR_NAME_MAX || memchr (eq + 1, 0, vlen) != NULL) {
        *err = "pax path too long or with a NUL byte";
        return false;
      }
      memcpy (dst, eq + 1, vlen);
      dst[vlen] = 0;
    } else if (KEY ("size")) {
      if (!parse_dec (eq + 1, vlen, &e->size, false) || e->size > ((uint64_t) 1 << 62)) {
        *err = "bad pax size";
        return false;
      }
      *have_size = true;
    } else if (KEY ("mtime")) {
      uint64_t v;
      if (parse_dec (eq + 1, vlen, &v, true) && v < ((uint64_t) 1 << 62))
        e->mtime = (int64_t) v;
    } else if (KEY ("uid") || KEY ("gid")) {
      uint64_t v;
      if (parse_dec (eq + 1, vlen, &v, false) && v <= 0xffffffffu)
        *(KEY ("uid") ? &e->uid : &e->gid) = (uint32_t) v;
    }
#undef KEY
    off += rlen;
  }
  return true;
}

/* ---- names -------------------------------------------------------------- */

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

/* ---- reader ---------------------------------------------------------------- */

void
ba_tar_reader_init (BaTarReader *r)
{
  memset (r, 0, sizeof *r);
  r->state = BA_TAR_HDR;
}

void
ba_tar_reader_clear (BaTarReader *r)
{
  free (r->meta);
  r->meta = NULL;
}

static int
fail (BaTarReader *r, const char **err, const char *msg)
{
  if (msg != NULL)
    *err = msg;
  r->state = BA_TAR_ERR;
  return -1;
}

/* A header block is complete in r->blk. */
static int
header_done (BaTarReader *r, const BaTarSink *s, void *ud, const char **err)
{
  BaTarEntry *e = &r->e;
  int h = ba_tar_header_parse (r->blk, e, err);
  if (h < 0)
    return fail (r, err, NULL);
  if (h == 0) {
    if (++r->zeros >= 2)
      r->state = BA_TAR_END;
    return r->state == BA_TAR_END ? 1 : 0;
  }
  if (r->zeros > 0)
    return fail (r, err, "a lone zero block inside the archive");
  if (e->type == 'x' || e->type == 'g' || e->type == 'L' || e->type == 'K') {
    if (e->size > BA_TAR_META_MAX)
      return fail (r, err, "tar extended header too large");
    if (r->meta == NULL && (r->meta = malloc (BA_TAR_META_MAX + 1)) == NULL)
      return fail (r, err, "out of memory");
    r->meta_type = e->type;
    r->meta_len = 0;
    r->remain = e->size;
    r->pad = ba_tar_padding (e->size);
    r->state = BA_TAR_META;
    return 0;
  }
  /* the pending pax/GNU values win over the header's */
  if (r->p_name)
    memcpy (e->name, r->pending.name, sizeof e->name);
  if (r->p_link)
    memcpy (e->link, r->pending.link, sizeof e->link);
  if (r->p_mtime)
    e->mtime = r->pending.mtime;
  if (r->p_uid)
    e->uid = r->pending.uid;
  if (r->p_gid)
    e->gid = r->pending.gid;
  if (r->p_size && e->type != '1' && e->type != '2' && e->type != '5')
    e->size = r->pending.size;
  r->p_name = r->p_link = r->p_size = r->p_mtime = r->p_uid = r->p_gid = false;
  if (!s->entry (ud, e, err))
    return fail (r, err, NULL);
  r->remain = e->size;
  r->pad = ba_tar_padding (e->size);
  r->state = BA_TAR_DATA;
  if (r->remain == 0) {
    if (!s->entry_end (ud, err))
      return fail (r, err, NULL);
    r->state = r->pad > 0 ? BA_TAR_PAD : BA_TAR_HDR;
  }
  return 0;
}

static int
meta_done (BaTarReader *r, const char **err)
{
  if (r->meta_type == 'x') {
    BaTarEntry tmp;
    bool have_size = false;
    memset (&tmp, 0, sizeof tmp);
    tmp.mtime = -1;
    tmp.uid = tmp.gid = 0xffffffffu;
    if (!ba_tar_pax_apply (r->meta, r->meta_len, &tmp, &have_size, err))
      return fail (r, err, NULL);
    if (tmp.name[0] != 0) {
      memcpy (r->pending.name, tmp.name, sizeof tmp.name);
      r->p_name = true;
    }
    if (tmp.link[0] != 0) {
      memcpy (r->pending.link, tmp.link, sizeof tmp.link);
      r->p_link = true;
    }
    if (have_size) {
      r->pending.size = tmp.size;
      r->p_size = true;
    }
    if (tmp.mtime >= 0) {
      r->pending.mtime = tmp.mtime;
      r->p_mtime = true;
    }
    if (tmp.uid != 0xffffffffu) {
      r->pending.uid = tmp.uid;
      r->p_uid = true;
    }
    if (tmp.gid != 0xffffffffu) {
      r->pending.gid = tmp.gid;
      r->p_gid = true;
    }
  } else if (r->meta_type == 'L' || r->meta_type == 'K') {
    char *dst = r->meta_type == 'L' ? r->pending.name : r->pending.link;
    size_t l = r->meta_len;
    while (l > 0 && r->meta[l - 1] == 0)
      l--;
    if (l > BA_TAR_NAME_MAX || memchr (r->meta, 0, l) != NULL)
      return fail (r, err, "GNU long name too long or with a NUL byte");
    memcpy (dst, r->meta, l);
    dst[l] = 0;
    *(r->meta_type == 'L' ? &r->p_name : &r->p_link) = true;
  }
  /* 'g' (global pax headers) is ignored */
  r->state = r->pad > 0 ? BA_TAR_PAD : BA_TAR_HDR;
  return 0;
}

int
ba_tar_feed (BaTarReader *r, const uint8_t *p, size_t n, const BaTarSink *s, void *ud, const char **err)
{
  while (n > 0) {
    size_t take;
    int rc;
    switch (r->state) {
    case BA_TAR_END:
      return 1;
    case BA_TAR_ERR:
      *err = "the archive was refused";
      return -1;
    case BA_TAR_HDR:
      take = BA_TAR_BLOCK - r->fill < n ? BA_TAR_BLOCK - r->fill : n;
      memcpy (r->blk + r->fill, p, take);
      r->fill += take;
      p += take;
      n -= take;
      if (r->fill == BA_TAR_BLOCK) {
        r->fill = 0;
        rc = header_done (r, s, ud, err);
        if (rc != 0)
          return rc;
      }
      break;
    case BA_TAR_DATA:
      take = r->remain < n ? (size_t) r->remain : n;
      if (!s->data (ud, p, take, err))
        return fail (r, err, NULL);
      r->remain -= take;
      p += take;
      n -= take;
      if (r->remain == 0) {
        if (!s->entry_end (ud, err))
          return fail (r, err, NULL);
        r->state = r->pad > 0 ? BA_TAR_PAD : BA_TAR_HDR;
      }
      break;
    case BA_TAR_META:
      take = r->remain < n ? (size_t) r->remain : n;
      memcpy (r->meta + r->meta_len, p, take);
      r->meta_len += take;
      r->remain -= take;
      p += take;
      n -= take;
      if (r->remain == 0 && meta_done (r, err) < 0)
        return -1;
      break;
    case BA_TAR_PAD:
      take = r->pad < n ? r->pad : n;
      r->pad -= take;
      p += take;
      n -= take;
      if (r->pad == 0)
        r->state = BA_TAR_HDR;
      break;
    default:
      return fail (r, err, "bad reader state");
    }
  }
  if (r->state == BA_TAR_DATA && r->remain == 0)
    r->state = r->pad > 0 ? BA_TAR_PAD : BA_TAR_HDR;
  return r->state == BA_TAR_END ? 1 : 0;
}

bool
ba_tar_finish (const BaTarReader *r, const char **err)
{
  if (r->state == BA_TAR_END)
    return true;
  if (r->state == BA_TAR_HDR && r->fill == 0 && !r->p_name && !r->p_link && !r->p_size)
    return true;
  if (r->state != BA_TAR_ERR)
    *err = "truncated archive";
  return false;
}

/* ---- writer ---------------------------------------------------------------- */

size_t
ba_tar_padding (uint64_t size)
{
  return (size_t) ((BA_TAR_BLOCK - (size % BA_TAR_BLOCK)) % BA_TAR_BLOCK);
}

static void
pax_record (BaBuf *b, const char *key, const char *val, size_t vlen)
{
  /* "<len> key=value\n", len counting its own digits */
  size_t base = strlen (key) + vlen + 3, len = base + 1;
  char num[24];
  for (;;) {
    size_t digits = (size_t) snprintf (num, sizeof num, "%zu", len);
    if (base + digits == len)
      break;
    len = base + digits;
  }
  ba_buf_printf (b, "%zu %s=", len, key);
  ba_buf_append (b, val, vlen);
  ba_buf_append (b, "\n", 1);
}

static void
header_fill (uint8_t h[BA_TAR_BLOCK], const char *name, size_t nlen, const char *prefix, size_t plen,
             const char *link, char type, uint64_t size, uint32_t mode, int64_t mtime, uint32_t uid, uint32_t gid)
{
  unsigned sum = 0;
  memset (h, 0, BA_TAR_BLOCK);
  memcpy (h + H_NAME, name, nlen);
  put_octal (h + H_MODE, 8, mode & 07777);
  put_octal (h + H_UID, 8, fits_octal (8, uid) ? uid : 0);
  put_octal (h + H_GID, 8, fits_octal (8, gid) ? gid : 0);
  put_octal (h + H_SIZE, 12, fits_octal (12, size) ? size : 0);
  put_octal (h + H_MTIME, 12, mtime > 0 && fits_octal (12, (uint64_t) mtime) ? (uint64_t) mtime : 0);
  h[H_TYPE] = (uint8_t) type;
  if (link != NULL)
    memcpy (h + H_LINK, link, strnlen (link, 100));
  memcpy (h + H_MAGIC, "ustar\0" "00", 8);
  if (plen > 0)
    memcpy (h + H_PREFIX, prefix, plen);
  memset (h + H_CHKSUM, ' ', 8);
  for (size_t i = 0; i < BA_TAR_BLOCK; i++)
    sum += h[i];
  put_octal (h + H_CHKSUM, 7, sum);
  h[H_CHKSUM + 7] = ' ';
}

void
ba_tar_encode (BaBuf *out, const BaTarEntry *e)
{
  size_t nlen = strlen (e->name), llen = strlen (e->link);
  const char *name = e->name, *prefix = "";
  size_t n = nlen, plen = 0;
  bool pax_name = false;
  uint8_t h[BA_TAR_BLOCK];
  BaBuf pax = { 0 };

  if (nlen > 100) {
    /* split into prefix (<= 155) "/" name (<= 100) at a slash */
    const char *cut = NULL;
    for (const char *s = e->name + nlen - 1; s > e->name; s--)
      if (*s == '/' && (size_t) (s - e->name) <= 155 && nlen - (size_t) (s - e->name) - 1 <= 100 &&
          (size_t) (s - e->name) + 1 < nlen) {
        cut = s;
        break;
      }
    if (cut != NULL) {
      prefix = e->name;
      plen = (size_t) (cut - e->name);
      name = cut + 1;
      n = nlen - plen - 1;
    } else {
      pax_name = true;
      n = 100;
    }
  }
  if (pax_name)
    pax_record (&pax, "path", e->name, nlen);
  if (llen > 100)
    pax_record (&pax, "linkpath", e->link, llen);
  if (!fits_octal (12, e->size)) {
    char v[24];
    snprintf (v, sizeof v, "%llu", (unsigned long long) e->size);
    pax_record (&pax, "size", v, strlen (v));
  }
  if (!fits_octal (8, e->uid) || !fits_octal (8, e->gid)) {
    char v[16];
    snprintf (v, sizeof v, "%u", e->uid);
    pax_record (&pax, "uid", v, strlen (v));
    snprintf (v, sizeof v, "%u", e->gid);
    pax_record (&pax, "gid", v, strlen (v));
  }
  if (pax.len > 0) {
    static const uint8_t zeros[BA_TAR_BLOCK];
    header_fill (h, "././@PaxHeader", 14, "", 0, NULL, 'x', pax.len, 0644, e->mtime, 0, 0);
    ba_buf_append (out, h, sizeof h);
    ba_buf_append (out, pax.data, pax.len);
    ba_buf_append (out, zeros, ba_tar_padding (pax.len));
  }
  ba_buf_clear (&pax);
  header_fill (h, name, n, prefix, plen, e->link, e->type, e->size, e->mode, e->mtime, e->uid, e->gid);
  ba_buf_append (out, h, sizeof h);
}
