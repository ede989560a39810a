/* box guest agent: the output ring of a session (pure: no I/O, no globals).
 *
 * Keeps the last `max` bytes written, addressed by absolute offsets: byte N
 * is the Nth byte ever written. The storage grows as bytes arrive (up to
 * `max`), so a quiet session holds little memory. Each byte remembers whether
 * it came from stderr (a bitmap allocated at the first stderr byte). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint8_t *data;
  uint8_t *bits;  /* bit i set: data[i] is stderr; NULL until needed */
  size_t cap;     /* allocated bytes (0, or a power of two <= max) */
  size_t max;     /* bytes kept at most (a power of two) */
  size_t head;    /* index of the oldest byte */
  size_t len;     /* bytes kept */
  uint64_t end;   /* absolute offset just after the newest byte */
  bool oom;       /* an allocation failed: bytes were lost */
} BaRing;

/* max must be a power of two >= 64. */
void ba_ring_init (BaRing *r, size_t max);
void ba_ring_free (BaRing *r);
/* Append n bytes of stream 1 (stdout) or 2 (stderr); the oldest bytes are
 * dropped beyond max. */
void ba_ring_write (BaRing *r, const void *d, size_t n, int stream);
/* ba_ring_write() in two steps, for a read() straight into the ring:
 * ba_ring_reserve() makes room for up to n bytes of stream and returns how
 * many can be written contiguously at *data (0 when memory ran out), then
 * ba_ring_commit() appends the n bytes (at most that many) of the same
 * stream that were written there.  Bytes the commit drops (the oldest) may
 * already be overwritten in between. */
size_t ba_ring_reserve (BaRing *r, size_t n, int stream, uint8_t **data);
void ba_ring_commit (BaRing *r, size_t n, int stream);
/* Absolute offset of the oldest byte kept. */
uint64_t ba_ring_start (const BaRing *r);
/* Clamp a requested offset into [start, end]. */
uint64_t ba_ring_clamp (const BaRing *r, uint64_t off);
/* The bytes from offset off (which must be within [start, end]), in place:
 * at most n, only one stream's run (*stream says which), and only up to
 * where the storage wraps around (read on from off + count for the rest).
 * *data points into the ring and is good until the next write.  Returns the
 * count (0 at the end). */
size_t ba_ring_peek (const BaRing *r, uint64_t off, size_t n, const uint8_t **data, int *stream);
