/* box guest agent: wire protocol (frames, strict JSON, base64).
 *
 * Pure functions only: no I/O, no globals, no allocation outside the
 * objects passed in. This file is what a fuzz target links against.
 * See doc/AGENT-PROTOCOL.md.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- frames -------------------------------------------------------- */

#define BA_MAGIC          0xB0C5u
#define BA_HEADER_SIZE    16
#define BA_MAX_PAYLOAD    (1u << 20)   /* 1 MiB */
#define BA_DATA_CHUNK     (32u << 10)  /* largest DATA payload a sender should use */
#define BA_DEFAULT_WINDOW (1u << 20)  /* initial credit per channel and direction */
#define BA_VERSION        1

enum {
  BA_CTRL = 1,   /* payload: one JSON object */
  BA_DATA = 2,   /* payload: raw bytes of stream `stream` */
  BA_EOF = 3,    /* end of stream `stream`, empty payload */
  BA_CREDIT = 4, /* payload: u32 LE, more bytes the peer may send on chan */
  BA_CLOSE = 5,  /* channel is gone, empty payload */
};

enum { BA_STDIN = 0, BA_STDOUT = 1, BA_STDERR = 2 };

typedef struct {
  uint8_t type;
  uint8_t stream;
  uint32_t chan;
  uint32_t len;
} BaFrame;

void ba_frame_encode (const BaFrame *f, uint8_t out[BA_HEADER_SIZE]);

/* Parse a header at buf[0..n). Returns:
 *   1  a valid header was decoded into *f (payload follows, f->len bytes)
 *   0  need more bytes (n < BA_HEADER_SIZE)
 *  -1  not a valid header at this offset (the caller skips a byte to resync) */
int ba_frame_decode (const uint8_t *buf, size_t n, BaFrame *f);

/* Scan buf for the next position where a valid header starts (or could
 * start, if truncated). Returns the offset, or n if none. */
size_t ba_frame_resync (const uint8_t *buf, size_t n);

uint32_t ba_get_u32 (const uint8_t *p);
void ba_put_u32 (uint8_t *p, uint32_t v);

/* ---- strict JSON ----------------------------------------------------- */

typedef enum {
  BA_JNULL, BA_JBOOL, BA_JNUM, BA_JSTR, BA_JARR, BA_JOBJ,
} BaJsonType;

typedef struct BaJson BaJson;
struct BaJson {
  BaJsonType type;
  bool b;
  bool is_int;      /* number without fraction/exponent that fits int64 */
  int64_t i;
  double d;
  char *s;          /* BA_JSTR: NUL-terminated (may contain NULs: use slen) */
  size_t slen;
  char *key;        /* member name when inside an object */
  BaJson *child;    /* first element/member */
  BaJson *next;     /* sibling */
};

#define BA_JSON_MAX_DEPTH 32
#define BA_JSON_MAX_NODES 65536

/* Parse exactly one JSON value (objects with duplicate keys are refused,
 * trailing garbage is refused, strings must be valid UTF-8). Returns NULL
 * and a static message in *err on failure. Free with ba_json_free(). */
BaJson *ba_json_parse (const char *text, size_t len, const char **err);
void ba_json_free (BaJson *v);

const BaJson *ba_json_get (const BaJson *obj, const char *key);
const char *ba_json_get_str (const BaJson *obj, const char *key); /* NULL if absent/not string */
bool ba_json_get_int (const BaJson *obj, const char *key, int64_t *out);
bool ba_json_get_bool (const BaJson *obj, const char *key, bool dflt);

/* A growable byte buffer; also the JSON writer. */
typedef struct {
  uint8_t *data;
  size_t len;
  size_t cap;
  bool oom;
} BaBuf;

void ba_buf_append (BaBuf *b, const void *data, size_t n);
/* Room for n more bytes after len (to read into; the caller adds to len),
 * or NULL when out of memory (b->oom). */
uint8_t *ba_buf_reserve (BaBuf *b, size_t n);
/* Room for element n of the array *p of size-byte elements with *cap of
 * them (doubling, from 64); false when out of memory (*p unchanged). */
bool ba_grow (void **p, size_t *cap, size_t n, size_t size);
void ba_buf_printf (BaBuf *b, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
void ba_buf_consume (BaBuf *b, size_t n);
void ba_buf_clear (BaBuf *b);

/* JSON writer helpers: they append a separator automatically when the
 * buffer's last byte is not '{', '[' or ':'. */
void ba_jw_begin (BaBuf *b);                     /* { */
void ba_jw_end (BaBuf *b);                       /* } */
void ba_jw_key (BaBuf *b, const char *key);      /* "key": */
void ba_jw_str (BaBuf *b, const char *key, const char *s);
void ba_jw_strn (BaBuf *b, const char *key, const char *s, size_t n);
void ba_jw_int (BaBuf *b, const char *key, int64_t v);
void ba_jw_bool (BaBuf *b, const char *key, bool v);
void ba_jw_raw_string (BaBuf *b, const char *s, size_t n); /* quoted, escaped */

/* ---- base64 (RFC 4648, with padding) ---------------------------------- */

/* Decode; returns the decoded length or -1 on invalid input.
 * out must hold at least len/4*3 bytes. */
long ba_base64_decode (const char *in, size_t len, uint8_t *out);
void ba_base64_encode (BaBuf *b, const uint8_t *in, size_t len);
