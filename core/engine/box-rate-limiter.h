/* box-rate-limiter.h: token buckets, one per name (a key, a sandbox).
 *
 * Each bucket holds up to @burst tokens and gains @rate_per_s a second
 * (read from a BoxClock's monotonic time, so a test can drive it); a
 * request takes one token, and a bucket without a whole token refuses it
 * and says how many whole seconds until it has one.  A rate of 0 admits
 * everything.  Buckets that have filled up again are forgotten (a full
 * bucket is the same as a new one), so the table holds only the names
 * that were busy lately.
 *
 * Main thread only, like the clock.
 */
#pragma once

#include "box-clock.h"

G_BEGIN_DECLS

#define BOX_TYPE_RATE_LIMITER (box_rate_limiter_get_type ())
G_DECLARE_FINAL_TYPE (BoxRateLimiter, box_rate_limiter, BOX, RATE_LIMITER, GObject)

BoxRateLimiter *box_rate_limiter_new       (BoxClock *clock, guint rate_per_s, guint burst);
/* Takes a token from @name's bucket: TRUE, or FALSE with the whole
 * seconds (at least 1) until a token is there in @retry_after_s. */
gboolean        box_rate_limiter_take      (BoxRateLimiter *self, const char *name,
                                            guint *retry_after_s);
/* The number of buckets kept (for tests). */
guint           box_rate_limiter_get_size  (BoxRateLimiter *self);

G_END_DECLS
