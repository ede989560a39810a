/* box guest agent: wire protocol (frames, strict JSON, base64). Pure. */
#include "proto.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- frames -------------------------------------------------------- */

uint32_t
ba_get_u32 (const uint8_t *p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

void
ba_put_u32 (uint8_t *p, uint32_t v)
{
  p[0] = v & 0xff;
  p[1] = (v >> 8) & 0xff;
  p[2] = (v >> 16) & 0xff;
  p[3] = (v >> 24) & 0xff;
}

static uint32_t
fnv1a (const uint8_t *p, size_t n)
{
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 16777619u;
  }
  return h;
}

void
ba_frame_encode (const BaFrame *f, uint8_t out[BA_HEADER_SIZE])
{
  out[0] = BA_MAGIC & 0xff;
  out[1] = BA_MAGIC >> 8;
  out[2] = f->type;
  out[3] = f->stream;
  ba_put_u32 (out + 4, f->chan);
  ba_put_u32 (out + 8, f->len);
  ba_put_u32 (out + 12, fnv1a (out, 12));
}

int
ba_frame_decode (const uint8_t *buf, size_t n, BaFrame *f)
{
  if (n >= 1 && buf[0] != (BA_MAGIC & 0xff))
    return -1;
  if (n >= 2 && buf[1] != (BA_MAGIC >> 8))
    return -1;
  if (n < BA_HEADER_SIZE)
    return 0;
  if (ba_get_u32 (buf + 12) != fnv1a (buf, 12))
    return -1;
  f->type = buf[2];
  f->stream = buf[3];
  f->chan = ba_get_u32 (buf + 4);
  f->len = ba_get_u32 (buf + 8);
  if (f->type < BA_CTRL || f->type > BA_CLOSE || f->len > BA_MAX_PAYLOAD)
    return -1;
  if (f->type == BA_CREDIT && f->len != 4)
    return -1;
  if ((f->type == BA_EOF || f->type == BA_CLOSE) && f->len != 0)
    return -1;
  return 1;
}

size_t
ba_frame_resync (const uint8_t *buf, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    BaFrame f;
    if (ba_frame_decode (buf + i, n - i, &f) >= 0)
      return i;
  }
  return n;
}

/* ---- buffers ---------------------------------------------------------- */

bool
ba_grow (void **p, size_t *cap, size_t n, size_t size)
{
  size_t c = *cap ? *cap : 64;
  void *np;
  if (n < *cap)
    return true;
  while (c <= n)
    c *= 2;
  np = realloc (*p, c * size);
  if (np == NULL)
    return false;
  *p = np;
  *cap = c;
  return true;
}

uint8_t *
ba_buf_reserve (BaBuf *b, size_t n)
{
  if (b->oom)
    return NULL;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n)
      cap *= 2;
    uint8_t *d = realloc (b->data, cap);
    if (d == NULL) {
      b->oom = true;
      return NULL;
    }
    b->data = d;
    b->cap = cap;
  }
  return b->data + b->len;
}

void
ba_buf_append (BaBuf *b, const void *data, size_t n)
{
  uint8_t *p;
  if (n == 0 || (p = ba_buf_reserve (b, n)) == NULL)
    return;
  memcpy (p, data, n);
  b->len += n;
}

void
ba_buf_printf (BaBuf *b, const char *fmt, ...)
{
  char tmp[256];
  va_list ap;
  int n;
  va_start (ap, fmt);
  n = vsnprintf (tmp, sizeof tmp, fmt, ap);
  va_end (ap);
  if (n > 0)
    ba_buf_append (b, tmp, (size_t) n < sizeof tmp ? (size_t) n : sizeof tmp - 1);
}

void
ba_buf_consume (BaBuf *b, size_t n)
{
  if (n >= b->len) {
    b->len = 0;
    return;
  }
  memmove (b->data, b->data + n, b->len - n);
  b->len -= n;
}

void
ba_buf_clear (BaBuf *b)
{
  free (b->data);
  memset (b, 0, sizeof *b);
}

/* ---- JSON reader ------------------------------------------------------ */

typedef struct {
  const char *p, *end;
  const char *err;
  int nodes;
} JP;

static BaJson *jp_value (JP *jp, int depth);

static void
jp_ws (JP *jp)
{
  while (jp->p < jp->end && (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' || *jp->p == '\r'))
    jp->p++;
}

static BaJson *
jp_node (JP *jp, BaJsonType t)
{
  BaJson *v;
  if (++jp->nodes > BA_JSON_MAX_NODES) {
    jp->err = "too many values";
    return NULL;
  }
  v = calloc (1, sizeof *v);
  if (v == NULL) {
    jp->err = "out of memory";
    return NULL;
  }
  v->type = t;
  return v;
}

static int
hexval (char c)
{
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool
jp_hex4 (JP *jp, uint32_t *out)
{
  uint32_t v = 0;
  if (jp->end - jp->p < 4)
    return false;
  for (int i = 0; i < 4; i++) {
    int h = hexval (jp->p[i]);
    if (h < 0)
      return false;
    v = v << 4 | (uint32_t) h;
  }
  jp->p += 4;
  *out = v;
  return true;
}

static void
put_utf8 (BaBuf *b, uint32_t cp)
{
  uint8_t u[4];
  size_t n;
  if (cp < 0x80) { u[0] = cp; n = 1; }
  else if (cp < 0x800) { u[0] = 0xc0 | cp >> 6; u[1] = 0x80 | (cp & 0x3f); n = 2; }
  else if (cp < 0x10000) { u[0] = 0xe0 | cp >> 12; u[1] = 0x80 | ((cp >> 6) & 0x3f); u[2] = 0x80 | (cp & 0x3f); n = 3; }
  else { u[0] = 0xf0 | cp >> 18; u[1] = 0x80 | ((cp >> 12) & 0x3f); u[2] = 0x80 | ((cp >> 6) & 0x3f); u[3] = 0x80 | (cp & 0x3f); n = 4; }
  ba_buf_append (b, u, n);
}

/* Length of a valid UTF-8 sequence at p (non-ASCII lead), or 0. */
static size_t
utf8_len (const unsigned char *p, const unsigned char *end)
{
  uint32_t cp;
  size_t n;
  if (p[0] >= 0xc2 && p[0] <= 0xdf) { n = 2; cp = p[0] & 0x1f; }
  else if (p[0] >= 0xe0 && p[0] <= 0xef) { n = 3; cp = p[0] & 0x0f; }
  else if (p[0] >= 0xf0 && p[0] <= 0xf4) { n = 4; cp = p[0] & 0x07; }
  else return 0;
  if ((size_t) (end - p) < n)
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return n;
}

static char *
jp_string (JP *jp, size_t *lenp)
{
  BaBuf b = { 0 };
  jp->p++; /* opening quote */
  while (true) {
    unsigned char c;
    if (jp->p >= jp->end) {
      jp->err = "unterminated string";
      break;
    }
    c = (unsigned char) *jp->p;
    if (c == '"') {
      jp->p++;
      ba_buf_append (&b, "", 1);
      if (b.oom || b.data == NULL) {
        jp->err = "out of memory";
        break;
      }
      *lenp = b.len - 1;
      return (char *) b.data;
    }
    if (c < 0x20) {
      jp->err = "control character in string";
      break;
    }
    if (c == '\\') {
      char e;
      uint32_t cp;
      if (jp->end - jp->p < 2) {
        jp->err = "bad escape";
        break;
      }
      e = jp->p[1];
      jp->p += 2;
      switch (e) {
      case '"': ba_buf_append (&b, "\"", 1); continue;
      case '\\': ba_buf_append (&b, "\\", 1); continue;
      case '/': ba_buf_append (&b, "/", 1); continue;
      case 'b': ba_buf_append (&b, "\b", 1); continue;
      case 'f': ba_buf_append (&b, "\f", 1); continue;
      case 'n': ba_buf_append (&b, "\n", 1); continue;
      case 'r': ba_buf_append (&b, "\r", 1); continue;
      case 't': ba_buf_append (&b, "\t", 1); continue;
      case 'u':
        if (!jp_hex4 (jp, &cp)) {
          jp->err = "bad \\u escape";
          break;
        }
        if (cp >= 0xdc00 && cp <= 0xdfff) {
          jp->err = "lone low surrogate";
          break;
        }
        if (cp >= 0xd800 && cp <= 0xdbff) {
          uint32_t lo;
          if (jp->end - jp->p < 6 || jp->p[0] != '\\' || jp->p[1] != 'u') {
            jp->err = "lone high surrogate";
            break;
          }
          jp->p += 2;
          if (!jp_hex4 (jp, &lo) || lo < 0xdc00 || lo > 0xdfff) {
            jp->err = "bad surrogate pair";
            break;
          }
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        put_utf8 (&b, cp);
        continue;
      default:
        jp->err = "bad escape";
        break;
      }
      break;
    }
    if (c < 0x80) {
      ba_buf_append (&b, jp->p, 1);
      jp->p++;
    } else {
      size_t n = utf8_len ((const unsigned char *) jp->p, (const unsigned char *) jp->end);
      if (n == 0) {
        jp->err = "invalid UTF-8";
        break;
      }
      ba_buf_append (&b, jp->p, n);
      jp->p += n;
    }
  }
  ba_buf_clear (&b);
  return NULL;
}

static BaJson *
jp_number (JP *jp)
{
  const char *s = jp->p;
  bool frac = false;
  char tmp[64];
  BaJson *v;
  size_t n;

  if (jp->p < jp->end && *jp->p == '-')
    jp->p++;
  if (jp->p >= jp->end || *jp->p < '0' || *jp->p > '9')
    goto bad;
  if (*jp->p == '0')
    jp->p++;
  else
    while (jp->p < jp->end && *jp->p >= '0' && *jp->p <= '9')
      jp->p++;
  if (jp->p < jp->end && *jp->p == '.') {
    frac = true;
    jp->p++;
    if (jp->p >= jp->end || *jp->p < '0' || *jp->p > '9')
      goto bad;
    while (jp->p < jp->end && *jp->p >= '0' && *jp->p <= '9')
      jp->p++;
  }
  if (jp->p < jp->end && (*jp->p == 'e' || *jp->p == 'E')) {
    frac = true;
    jp->p++;
    if (jp->p < jp->end && (*jp->p == '+' || *jp->p == '-'))
      jp->p++;
    if (jp->p >= jp->end || *jp->p < '0' || *jp->p > '9')
      goto bad;
    while (jp->p < jp->end && *jp->p >= '0' && *jp->p <= '9')
      jp->p++;
  }
  n = (size_t) (jp->p - s);
  if (n >= sizeof tmp)
    goto bad;
  memcpy (tmp, s, n);
  tmp[n] = 0;
  v = jp_node (jp, BA_JNUM);
  if (v == NULL)
    return NULL;
  v->d = strtod (tmp, NULL);
  if (!isfinite (v->d)) {
    free (v);
    jp->err = "number out of range";
    return NULL;
  }
  if (!frac) {
    char *e;
    long long ll;
    errno = 0;
    ll = strtoll (tmp, &e, 10);
    if (errno == 0 && *e == 0) {
      v->is_int = true;
      v->i = ll;
    }
  }
  return v;
bad:
  jp->err = "bad number";
  return NULL;
}

static bool
jp_lit (JP *jp, const char *lit)
{
  size_t n = strlen (lit);
  if ((size_t) (jp->end - jp->p) < n || memcmp (jp->p, lit, n) != 0)
    return false;
  jp->p += n;
  return true;
}

static BaJson *
jp_container (JP *jp, int depth, bool obj)
{
  BaJson *v = jp_node (jp, obj ? BA_JOBJ : BA_JARR);
  BaJson **tail;
  if (v == NULL)
    return NULL;
  tail = &v->child;
  jp->p++;
  jp_ws (jp);
  if (jp->p < jp->end && *jp->p == (obj ? '}' : ']')) {
    jp->p++;
    return v;
  }
  while (true) {
    char *key = NULL;
    size_t klen;
    BaJson *item;
    jp_ws (jp);
    if (obj) {
      if (jp->p >= jp->end || *jp->p != '"') {
        jp->err = "expected member name";
        break;
      }
      key = jp_string (jp, &klen);
      if (key == NULL)
        break;
      if (strlen (key) != klen || ba_json_get (v, key) != NULL) {
        jp->err = strlen (key) != klen ? "NUL in member name" : "duplicate member name";
        free (key);
        break;
      }
      jp_ws (jp);
      if (jp->p >= jp->end || *jp->p != ':') {
        free (key);
        jp->err = "expected ':'";
        break;
      }
      jp->p++;
    }
    item = jp_value (jp, depth + 1);
    if (item == NULL) {
      free (key);
      break;
    }
    item->key = key;
    *tail = item;
    tail = &item->next;
    jp_ws (jp);
    if (jp->p < jp->end && *jp->p == ',') {
      jp->p++;
      continue;
    }
    if (jp->p < jp->end && *jp->p == (obj ? '}' : ']')) {
      jp->p++;
      return v;
    }
    jp->err = obj ? "expected ',' or '}'" : "expected ',' or ']'";
    break;
  }
  ba_json_free (v);
  return NULL;
}

static BaJson *
jp_value (JP *jp, int depth)
{
  BaJson *v;
  if (depth > BA_JSON_MAX_DEPTH) {
    jp->err = "nested too deeply";
    return NULL;
  }
  jp_ws (jp);
  if (jp->p >= jp->end) {
    jp->err = "unexpected end";
    return NULL;
  }
  switch (*jp->p) {
  case '{': return jp_container (jp, depth, true);
  case '[': return jp_container (jp, depth, false);
  case '"':
    v = jp_node (jp, BA_JSTR);
    if (v == NULL)
      return NULL;
    v->s = jp_string (jp, &v->slen);
    if (v->s == NULL) {
      free (v);
      return NULL;
    }
    return v;
  case 't':
  case 'f':
    if (jp_lit (jp, "true") || jp_lit (jp, "false")) {
      v = jp_node (jp, BA_JBOOL);
      if (v != NULL)
        v->b = jp->p[-1] == 'e' && jp->p[-2] == 'u';
      return v;
    }
    break;
  case 'n':
    if (jp_lit (jp, "null"))
      return jp_node (jp, BA_JNULL);
    break;
  default:
    if (*jp->p == '-' || (*jp->p >= '0' && *jp->p <= '9'))
      return jp_number (jp);
    break;
  }
  jp->err = "unexpected character";
  return NULL;
}

BaJson *
ba_json_parse (const char *text, size_t len, const char **err)
{
  JP jp = { text, text + len, NULL, 0 };
  BaJson *v = jp_value (&jp, 0);
  if (v != NULL) {
    jp_ws (&jp);
    if (jp.p != jp.end) {
      ba_json_free (v);
      v = NULL;
      jp.err = "trailing characters";
    }
  }
  if (v == NULL && err != NULL)
    *err = jp.err != NULL ? jp.err : "invalid JSON";
  return v;
}

void
ba_json_free (BaJson *v)
{
  while (v != NULL) {
    BaJson *next = v->next;
    ba_json_free (v->child);
    free (v->s);
    free (v->key);
    free (v);
    v = next;
  }
}

const BaJson *
ba_json_get (const BaJson *obj, const char *key)
{
  if (obj == NULL || obj->type != BA_JOBJ)
    return NULL;
  for (const BaJson *c = obj->child; c != NULL; c = c->next)
    if (strcmp (c->key, key) == 0)
      return c;
  return NULL;
}

const char *
ba_json_get_str (const BaJson *obj, const char *key)
{
  const BaJson *v = ba_json_get (obj, key);
  return v != NULL && v->type == BA_JSTR ? v->s : NULL;
}

bool
ba_json_get_int (const BaJson *obj, const char *key, int64_t *out)
{
  const BaJson *v = ba_json_get (obj, key);
  if (v == NULL || v->type != BA_JNUM || !v->is_int)
    return false;
  *out = v->i;
  return true;
}

bool
ba_json_get_bool (const BaJson *obj, const char *key, bool dflt)
{
  const BaJson *v = ba_json_get (obj, key);
  return v != NULL && v->type == BA_JBOOL ? v->b : dflt;
}

/* ---- JSON writer ------------------------------------------------------ */

static void
jw_sep (BaBuf *b)
{
  if (b->len > 0) {
    char last = (char) b->data[b->len - 1];
    if (last != '{' && last != '[' && last != ':')
      ba_buf_append (b, ",", 1);
  }
}

void
ba_jw_raw_string (BaBuf *b, const char *s, size_t n)
{
  static const char hex[] = "0123456789abcdef";
  ba_buf_append (b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char) s[i];
    if (c == '"' || c == '\\') {
      char e[2] = { '\\', (char) c };
      ba_buf_append (b, e, 2);
    } else if (c < 0x20 || c == 0x7f) {
      char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
      ba_buf_append (b, e, 6);
    } else if (c < 0x80) {
      ba_buf_append (b, &s[i], 1);
    } else {
      size_t l = utf8_len ((const unsigned char *) s + i, (const unsigned char *) s + n);
      if (l == 0) {
        ba_buf_append (b, "\xef\xbf\xbd", 3); /* U+FFFD for invalid bytes */
      } else {
        ba_buf_append (b, s + i, l);
        i += l - 1;
      }
    }
  }
  ba_buf_append (b, "\"", 1);
}

void
ba_jw_begin (BaBuf *b)
{
  jw_sep (b);
  ba_buf_append (b, "{", 1);
}

void
ba_jw_end (BaBuf *b)
{
  ba_buf_append (b, "}", 1);
}

void
ba_jw_key (BaBuf *b, const char *key)
{
  jw_sep (b);
  ba_jw_raw_string (b, key, strlen (key));
  ba_buf_append (b, ":", 1);
}

void
ba_jw_strn (BaBuf *b, const char *key, const char *s, size_t n)
{
  ba_jw_key (b, key);
  ba_jw_raw_string (b, s, n);
}

void
ba_jw_str (BaBuf *b, const char *key, const char *s)
{
  ba_jw_strn (b, key, s, strlen (s));
}

void
ba_jw_int (BaBuf *b, const char *key, int64_t v)
{
  ba_jw_key (b, key);
  ba_buf_printf (b, "%lld", (long long) v);
}

void
ba_jw_bool (BaBuf *b, const char *key, bool v)
{
  ba_jw_key (b, key);
  ba_buf_printf (b, "%s", v ? "true" : "false");
}

/* ---- base64 ------------------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int
b64val (char c)
{
  const char *p;
  if (c == 0)
    return -1;
  p = strchr (b64, c);
  return p != NULL ? (int) (p - b64) : -1;
}

long
ba_base64_decode (const char *in, size_t len, uint8_t *out)
{
  size_t o = 0;
  if (len % 4 != 0)
    return -1;
  for (size_t i = 0; i < len; i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; k++) {
      if (in[i + k] == '=' && i + 4 == len && k >= 2) {
        v[k] = 0;
        pad++;
      } else {
        if (pad > 0)
          return -1;
        v[k] = b64val (in[i + k]);
        if (v[k] < 0)
          return -1;
      }
    }
    if (pad == 1 && in[i + 2] == '=')
      return -1;
    out[o++] = (uint8_t) (v[0] << 2 | v[1] >> 4);
    if (pad < 2)
      out[o++] = (uint8_t) ((v[1] & 15) << 4 | v[2] >> 2);
    if (pad < 1)
      out[o++] = (uint8_t) ((v[2] & 3) << 6 | v[3]);
  }
  return (long) o;
}

void
ba_base64_encode (BaBuf *b, const uint8_t *in, size_t len)
{
  for (size_t i = 0; i < len; i += 3) {
    uint32_t v = (uint32_t) in[i] << 16;
    char o[4];
    if (i + 1 < len) v |= (uint32_t) in[i + 1] << 8;
    if (i + 2 < len) v |= in[i + 2];
    o[0] = b64[v >> 18];
    o[1] = b64[(v >> 12) & 63];
    o[2] = i + 1 < len ? b64[(v >> 6) & 63] : '=';
    o[3] = i + 2 < len ? b64[v & 63] : '=';
    ba_buf_append (b, o, 4);
  }
}
