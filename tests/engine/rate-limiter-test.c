/* rate-limiter-test.c: BoxRateLimiter's token buckets on a manual clock:
 * a burst, the refill rate, Retry-After, separate names, rate 0, and the
 * table forgetting buckets that filled up again. */
#include "config.h"

#include "box-rate-limiter.h"

#define T0 ((gint64) 1700000000 * G_USEC_PER_SEC)

static guint
take_n (BoxRateLimiter *limiter, const char *name, guint n)
{
  guint taken = 0;

  for (guint i = 0; i < n; i++) {
    guint retry = 0;
    if (box_rate_limiter_take (limiter, name, &retry))
      taken++;
  }
  return taken;
}

static void
test_burst_then_rate (void)
{
  g_autoptr(BoxClock) clock = box_clock_new_manual (T0);
  g_autoptr(BoxRateLimiter) limiter = box_rate_limiter_new (clock, 2, 5);
  guint retry = 0;

  /* a full bucket: the burst, then nothing */
  g_assert_cmpuint (take_n (limiter, "key-a", 5), ==, 5);
  g_assert_false (box_rate_limiter_take (limiter, "key-a", &retry));
  g_assert_cmpuint (retry, ==, 1);

  /* half a second at 2/s: one token */
  box_clock_advance (clock, G_USEC_PER_SEC / 2);
  g_assert_true (box_rate_limiter_take (limiter, "key-a", &retry));
  g_assert_false (box_rate_limiter_take (limiter, "key-a", &retry));

  /* ten seconds refill to the burst, not beyond */
  box_clock_advance (clock, 10 * G_USEC_PER_SEC);
  g_assert_cmpuint (take_n (limiter, "key-a", 20), ==, 5);
}

static void
test_retry_after (void)
{
  g_autoptr(BoxClock) clock = box_clock_new_manual (T0);
  /* one token a second: the wait is given in whole seconds, at least 1 */
  g_autoptr(BoxRateLimiter) limiter = box_rate_limiter_new (clock, 1, 1);
  guint retry = 0;

  g_assert_true (box_rate_limiter_take (limiter, "k", &retry));
  g_assert_false (box_rate_limiter_take (limiter, "k", &retry));
  g_assert_cmpuint (retry, ==, 1);
  box_clock_advance (clock, G_USEC_PER_SEC * 3 / 10);
  g_assert_false (box_rate_limiter_take (limiter, "k", &retry));
  g_assert_cmpuint (retry, ==, 1);
  box_clock_advance (clock, G_USEC_PER_SEC * 7 / 10);
  g_assert_true (box_rate_limiter_take (limiter, "k", &retry));
}

static void
test_names_apart (void)
{
  g_autoptr(BoxClock) clock = box_clock_new_manual (T0);
  g_autoptr(BoxRateLimiter) limiter = box_rate_limiter_new (clock, 1, 3);

  g_assert_cmpuint (take_n (limiter, "key-a", 10), ==, 3);
  /* another key is not held up by the first */
  g_assert_cmpuint (take_n (limiter, "key-b", 10), ==, 3);
  g_assert_cmpuint (box_rate_limiter_get_size (limiter), ==, 2);
}

static void
test_unlimited (void)
{
  g_autoptr(BoxClock) clock = box_clock_new_manual (T0);
  g_autoptr(BoxRateLimiter) limiter = box_rate_limiter_new (clock, 0, 1);

  g_assert_cmpuint (take_n (limiter, "k", 1000), ==, 1000);
  g_assert_cmpuint (box_rate_limiter_get_size (limiter), ==, 0);
}

static void
test_sweep (void)
{
  g_autoptr(BoxClock) clock = box_clock_new_manual (T0);
  g_autoptr(BoxRateLimiter) limiter = box_rate_limiter_new (clock, 10, 10);

  for (guint i = 0; i < 1024; i++) {
    g_autofree char *name = g_strdup_printf ("key-%u", i);
    g_assert_true (box_rate_limiter_take (limiter, name, NULL));
  }
  g_assert_cmpuint (box_rate_limiter_get_size (limiter), ==, 1024);
  /* a second later every bucket is full again: the next take forgets them */
  box_clock_advance (clock, G_USEC_PER_SEC);
  g_assert_true (box_rate_limiter_take (limiter, "new", NULL));
  g_assert_cmpuint (box_rate_limiter_get_size (limiter), ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/rate-limiter/burst-then-rate", test_burst_then_rate);
  g_test_add_func ("/rate-limiter/retry-after", test_retry_after);
  g_test_add_func ("/rate-limiter/names-apart", test_names_apart);
  g_test_add_func ("/rate-limiter/unlimited", test_unlimited);
  g_test_add_func ("/rate-limiter/sweep", test_sweep);
  return g_test_run ();
}
