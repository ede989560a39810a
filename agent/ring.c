/* box guest agent: the output ring of a session. See ring.h. */
#include "ring.h"

#include <stdlib.h>
#include <string.h>

#define RING_MIN (16u << 10)

void
ba_ring_init (BaRing *r, size_t max)
{
  memset (r, 0, sizeof *r);
  r->max = max;
}

void
ba_ring_free (BaRing *r)
{
  free (r->data);
  free (r->bits);
  r->data = r->bits = NULL;
  r->cap = r->len = r->head = 0;
}

uint64_t
ba_ring_start (const BaRing *r)
{
  return r->end - r->len;
}

uint64_t
ba_ring_clamp (const BaRing *r, uint64_t off)
{
  uint64_t start = ba_ring_start (r);
  return off < start ? start : off > r->end ? r->end : off;
}

static bool
bit_get (const uint8_t *bits, size_t i)
{
  return bits != NULL && (bits[i >> 3] >> (i & 7)) & 1;
}

static void
bit_set (uint8_t *bits, size_t i, bool v)
{
  if (v)
    bits[i >> 3] |= (uint8_t) (1u << (i & 7));
  else
    bits[i >> 3] &= (uint8_t) ~(1u << (i & 7));
}

static void
bits_fill (uint8_t *bits, size_t from, size_t n, bool v)
{
  size_t i = from, end = from + n;
  for (; i < end && (i & 7) != 0; i++)
    bit_set (bits, i, v);
  if (end - i >= 8) {
    memset (bits + (i >> 3), v ? 0xff : 0, (end - i) >> 3);
    i += (end - i) & ~(size_t) 7;
  }
  for (; i < end; i++)
    bit_set (bits, i, v);
}

/* Reallocate to cap bytes, the kept bytes moved to the start. */
static bool
ring_resize (BaRing *r, size_t cap, bool want_bits)
{
  uint8_t *d = malloc (cap), *b = NULL;
  if (d == NULL)
    return false;
  if (want_bits || r->bits != NULL) {
    b = calloc (cap / 8, 1);
    if (b == NULL) {
      free (d);
      return false;
    }
  }
  for (size_t i = 0; i < r->len; i++) {
    size_t from = (r->head + i) & (r->cap - 1);
    d[i] = r->data[from];
    if (b != NULL)
      bit_set (b, i, bit_get (r->bits, from));
  }
  free (r->data);
  free (r->bits);
  r->data = d;
  r->bits = b;
  r->cap = cap;
  r->head = 0;
  return true;
}

/* Grows the storage so that need bytes fit (and the bitmap exists when
 * stderr bytes come); false when memory ran out. */
static bool
ring_make_room (BaRing *r, size_t need, bool err)
{
  size_t cap;
  if (need <= r->cap && (!err || r->bits != NULL))
    return true;
  cap = r->cap > RING_MIN ? r->cap : RING_MIN;
  while (cap < need)
    cap *= 2;
  if (cap > r->max)
    cap = r->max;
  return ring_resize (r, cap, err);
}

/* Appends n bytes already in place at the end of the storage. */
static void
ring_append (BaRing *r, size_t n, bool err)
{
  size_t pos;
  if (r->len + n > r->cap) { /* drop the oldest */
    size_t drop = r->len + n - r->cap;
    r->head = (r->head + drop) & (r->cap - 1);
    r->len -= drop;
  }
  pos = (r->head + r->len) & (r->cap - 1);
  if (r->bits != NULL)
    for (size_t done = 0; done < n; ) {
      size_t run = r->cap - pos < n - done ? r->cap - pos : n - done;
      bits_fill (r->bits, pos, run, err);
      done += run;
      pos = (pos + run) & (r->cap - 1);
    }
  r->len += n;
}

void
ba_ring_write (BaRing *r, const void *d, size_t n, int stream)
{
  const uint8_t *p = d;
  bool err = stream == 2;
  size_t pos;
  if (n == 0)
    return;
  r->end += n;
  if (n > r->max) { /* only the last max bytes can be kept */
    p += n - r->max;
    n = r->max;
    r->len = 0; /* everything older is gone */
  }
  if (!ring_make_room (r, r->len + n < r->max ? r->len + n : r->max, err)) {
    r->oom = true;
    r->len = 0; /* keep offsets right; the bytes are lost */
    return;
  }
  pos = (r->head + r->len) & (r->cap - 1);
  for (size_t done = 0; done < n; ) {
    size_t run = r->cap - pos < n - done ? r->cap - pos : n - done;
    memcpy (r->data + pos, p + done, run);
    done += run;
    pos = (pos + run) & (r->cap - 1);
  }
  ring_append (r, n, err);
}

size_t
ba_ring_reserve (BaRing *r, size_t n, int stream, uint8_t **data)
{
  size_t pos;
  if (n > r->max)
    n = r->max;
  if (n == 0 || !ring_make_room (r, r->len + n < r->max ? r->len + n : r->max, stream == 2)) {
    *data = NULL;
    return 0;
  }
  pos = (r->head + r->len) & (r->cap - 1);
  *data = r->data + pos;
  return r->cap - pos < n ? r->cap - pos : n;
}

void
ba_ring_commit (BaRing *r, size_t n, int stream)
{
  if (n == 0)
    return;
  r->end += n;
  ring_append (r, n, stream == 2);
}

/* The run of one stream's bytes from offset off, at most n: its count, and
 * its index in the storage (*pos). */
static size_t
ring_run (const BaRing *r, uint64_t off, size_t n, size_t *pos, int *stream)
{
  uint64_t start = ba_ring_start (r);
  size_t avail, run;
  bool err;
  *stream = 1;
  if (off < start || off >= r->end || n == 0 || r->len == 0)
    return 0;
  avail = (size_t) (r->end - off);
  if (n > avail)
    n = avail;
  *pos = (r->head + (size_t) (off - start)) & (r->cap - 1);
  err = bit_get (r->bits, *pos);
  *stream = err ? 2 : 1;
  if (r->bits == NULL)
    return n; /* no stderr byte was ever kept: all stdout */
  run = 0;
  while (run < n) {
    size_t i = (*pos + run) & (r->cap - 1);
    /* whole bytes of the bitmap at once when aligned */
    if ((i & 7) == 0 && n - run >= 8 && r->bits[i >> 3] == (err ? 0xff : 0)) {
      run += 8;
      continue;
    }
    if (bit_get (r->bits, i) != err)
      break;
    run++;
  }
  return run > n ? n : run;
}

size_t
ba_ring_peek (const BaRing *r, uint64_t off, size_t n, const uint8_t **data, int *stream)
{
  size_t pos = 0, run = ring_run (r, off, n, &pos, stream);
  if (run > r->cap - pos)
    run = r->cap - pos;
  *data = run > 0 ? r->data + pos : NULL;
  return run;
}
