/* Unit tests of the session output ring (agent/ring.c). Host-side: GTest. */
#include <glib.h>
#include <string.h>

#include "ring.h"

/* A stream's run from off, copied (at most n): ba_ring_peek() read on
 * across the wrap of the storage, as the agent frames it. */
static size_t
ring_read (const BaRing *r, uint64_t off, void *out, size_t n, int *stream)
{
  size_t done = 0;
  *stream = 1;
  while (done < n) {
    const uint8_t *p = NULL;
    int st = 0;
    size_t k = ba_ring_peek (r, off + done, n - done, &p, &st);
    if (k == 0 || (done > 0 && st != *stream))
      break;
    *stream = st;
    memcpy ((uint8_t *) out + done, p, k);
    done += k;
  }
  return done;
}

static void
test_ring_basic (void)
{
  BaRing r;
  uint8_t out[64];
  int st = 0;
  ba_ring_init (&r, 1 << 20);
  g_assert_cmpuint (ba_ring_start (&r), ==, 0);
  g_assert_cmpuint (r.end, ==, 0);
  g_assert_cmpuint (ring_read (&r, 0, out, sizeof out, &st), ==, 0);
  ba_ring_write (&r, "hello ", 6, 1);
  ba_ring_write (&r, "world", 5, 2);
  ba_ring_write (&r, "!", 1, 1);
  g_assert_cmpuint (r.end, ==, 12);
  g_assert_cmpuint (ba_ring_start (&r), ==, 0);
  /* one stream's run at a time */
  g_assert_cmpuint (ring_read (&r, 0, out, sizeof out, &st), ==, 6);
  g_assert_cmpint (st, ==, 1);
  g_assert_cmpmem (out, 6, "hello ", 6);
  g_assert_cmpuint (ring_read (&r, 6, out, sizeof out, &st), ==, 5);
  g_assert_cmpint (st, ==, 2);
  g_assert_cmpmem (out, 5, "world", 5);
  g_assert_cmpuint (ring_read (&r, 8, out, 2, &st), ==, 2);
  g_assert_cmpmem (out, 2, "rl", 2);
  g_assert_cmpuint (ring_read (&r, 11, out, sizeof out, &st), ==, 1);
  g_assert_cmpint (st, ==, 1);
  g_assert_cmpuint (ring_read (&r, 12, out, sizeof out, &st), ==, 0);
  /* clamping */
  g_assert_cmpuint (ba_ring_clamp (&r, 100), ==, 12);
  g_assert_cmpuint (ba_ring_clamp (&r, 3), ==, 3);
  ba_ring_free (&r);
}

static void
test_ring_small_memory (void)
{
  BaRing r;
  ba_ring_init (&r, 1 << 20);
  ba_ring_write (&r, "x", 1, 1);
  /* a quiet session holds little: no stderr bitmap, a small buffer */
  g_assert_null (r.bits);
  g_assert_cmpuint (r.cap, <=, 16 << 10);
  ba_ring_free (&r);
}

static void
test_ring_wrap (void)
{
  BaRing r;
  uint8_t chunk[1000], out[4096];
  int st;
  uint64_t total = 0;
  ba_ring_init (&r, 4096);
  for (int i = 0; i < 20; i++) {
    for (size_t k = 0; k < sizeof chunk; k++)
      chunk[k] = (uint8_t) ((total + k) % 251);
    ba_ring_write (&r, chunk, sizeof chunk, 1);
    total += sizeof chunk;
  }
  g_assert_cmpuint (r.end, ==, total);
  g_assert_cmpuint (ba_ring_start (&r), ==, total - 4096);
  g_assert_cmpuint (r.cap, ==, 4096);
  /* older than kept: clamped to the oldest byte */
  g_assert_cmpuint (ba_ring_clamp (&r, 0), ==, total - 4096);
  g_assert_cmpuint (ring_read (&r, 0, out, sizeof out, &st), ==, 0);
  {
    uint64_t off = ba_ring_start (&r);
    while (off < r.end) {
      size_t n = ring_read (&r, off, out, 777, &st);
      g_assert_cmpuint (n, >, 0);
      for (size_t k = 0; k < n; k++)
        g_assert_cmpuint (out[k], ==, (off + k) % 251);
      off += n;
    }
  }
  /* one write larger than the ring keeps only its tail */
  {
    uint8_t big[10000];
    for (size_t k = 0; k < sizeof big; k++)
      big[k] = (uint8_t) k;
    ba_ring_write (&r, big, sizeof big, 2);
    g_assert_cmpuint (r.end, ==, total + sizeof big);
    g_assert_cmpuint (ba_ring_start (&r), ==, r.end - 4096);
    g_assert_cmpuint (ring_read (&r, ba_ring_start (&r), out, sizeof out, &st), ==, 4096);
    g_assert_cmpint (st, ==, 2);
    g_assert_cmpmem (out, 4096, big + sizeof big - 4096, 4096);
  }
  ba_ring_free (&r);
}

/* Random writes and reads against a model holding the whole history. */
static void
test_ring_model (void)
{
  const size_t max = 1 << 14;
  GRand *rnd = g_rand_new_with_seed (42);
  GByteArray *hist = g_byte_array_new ();
  GByteArray *streams = g_byte_array_new ();
  BaRing r;
  ba_ring_init (&r, max);
  for (int it = 0; it < 3000; it++) {
    size_t n = (size_t) g_rand_int_range (rnd, 0, it % 50 == 0 ? 40000 : 700);
    int st = g_rand_boolean (rnd) ? 1 : 2;
    uint8_t *buf = g_malloc (n + 1);
    for (size_t k = 0; k < n; k++) {
      buf[k] = (uint8_t) g_rand_int (rnd);
      g_byte_array_append (streams, (guint8 *) &st, 1);
    }
    g_byte_array_append (hist, buf, (guint) n);
    if (g_rand_boolean (rnd)) {
      ba_ring_write (&r, buf, n, st);
    } else {
      /* in place: reserve, fill (perhaps less than reserved), commit */
      for (size_t done = 0; done < n; ) {
        uint8_t *at = NULL;
        size_t room = ba_ring_reserve (&r, n - done, st, &at), k;
        g_assert_cmpuint (room, >, 0);
        g_assert_nonnull (at);
        k = room > 1 && g_rand_boolean (rnd) ? room / 2 : room;
        memcpy (at, buf + done, k);
        ba_ring_commit (&r, k, st);
        done += k;
      }
    }
    g_free (buf);
    g_assert_cmpuint (r.end, ==, hist->len);
    g_assert_cmpuint (ba_ring_start (&r), ==, hist->len > max ? hist->len - max : 0);
    for (int q = 0; q < 4; q++) {
      uint64_t start = ba_ring_start (&r), off;
      uint8_t out[3000];
      int got;
      size_t m;
      if (r.end == start)
        break;
      off = start + (uint64_t) g_rand_int_range (rnd, 0, (gint32) (r.end - start));
      m = ring_read (&r, off, out, sizeof out, &got);
      g_assert_cmpuint (m, >, 0);
      g_assert_cmpmem (out, m, hist->data + off, m);
      for (size_t k = 0; k < m; k++)
        g_assert_cmpint (streams->data[off + k], ==, got);
      /* the run is as long as it can be */
      if (m < sizeof out && off + m < r.end)
        g_assert_cmpint (streams->data[off + m], !=, got);
      /* peek: the same bytes in place, up to where the storage wraps; the
       * rest follows from the next offset */
      {
        const uint8_t *p = NULL;
        int pst = 0;
        size_t k = ba_ring_peek (&r, off, sizeof out, &p, &pst);
        g_assert_cmpuint (k, >, 0);
        g_assert_cmpuint (k, <=, m);
        g_assert_cmpint (pst, ==, got);
        g_assert_cmpmem (p, k, hist->data + off, k);
        if (k < m) {
          size_t k2 = ba_ring_peek (&r, off + k, m - k, &p, &pst);
          g_assert_cmpuint (k2, ==, m - k);
          g_assert_cmpmem (p, k2, hist->data + off + k, k2);
          g_assert_cmpint (pst, ==, got);
        }
      }
    }
  }
  ba_ring_free (&r);
  g_byte_array_unref (hist);
  g_byte_array_unref (streams);
  g_rand_free (rnd);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/agent/ring/basic", test_ring_basic);
  g_test_add_func ("/agent/ring/small-memory", test_ring_small_memory);
  g_test_add_func ("/agent/ring/wrap", test_ring_wrap);
  g_test_add_func ("/agent/ring/model", test_ring_model);
  return g_test_run ();
}
