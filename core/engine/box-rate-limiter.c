/* box-rate-limiter.c: token buckets (see the header). */
#include "config.h"

#include "box-rate-limiter.h"

/* Forget full buckets once the table is this large (checked on each take). */
#define SWEEP_SIZE 1024

typedef struct {
  double tokens;
  gint64 updated;     /* monotonic usec of the last refill */
} Bucket;

struct _BoxRateLimiter {
  GObject     parent_instance;
  BoxClock   *clock;
  guint       rate_per_s;
  guint       burst;
  GHashTable *buckets;   /* name -> Bucket* */
};

G_DEFINE_FINAL_TYPE (BoxRateLimiter, box_rate_limiter, G_TYPE_OBJECT)

static void
box_rate_limiter_finalize (GObject *object)
{
  BoxRateLimiter *self = BOX_RATE_LIMITER (object);

  g_clear_object (&self->clock);
  g_clear_pointer (&self->buckets, g_hash_table_unref);
  G_OBJECT_CLASS (box_rate_limiter_parent_class)->finalize (object);
}

static void
box_rate_limiter_class_init (BoxRateLimiterClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = box_rate_limiter_finalize;
}

static void
box_rate_limiter_init (BoxRateLimiter *self)
{
  self->buckets = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}

BoxRateLimiter *
box_rate_limiter_new (BoxClock *clock, guint rate_per_s, guint burst)
{
  BoxRateLimiter *self;

  g_return_val_if_fail (BOX_IS_CLOCK (clock), NULL);

  self = g_object_new (BOX_TYPE_RATE_LIMITER, NULL);
  self->clock = g_object_ref (clock);
  self->rate_per_s = rate_per_s;
  self->burst = MAX (burst, 1);
  return self;
}

static void
refill (BoxRateLimiter *self, Bucket *bucket, gint64 now)
{
  double gained = (double) (now - bucket->updated) / G_USEC_PER_SEC * self->rate_per_s;

  bucket->tokens = MIN ((double) self->burst, bucket->tokens + gained);
  bucket->updated = now;
}

static void
sweep (BoxRateLimiter *self, gint64 now)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->buckets);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    refill (self, value, now);
    if (((Bucket *) value)->tokens >= self->burst)
      g_hash_table_iter_remove (&iter);
  }
}

gboolean
box_rate_limiter_take (BoxRateLimiter *self, const char *name, guint *retry_after_s)
{
  gint64 now;
  Bucket *bucket;

  g_return_val_if_fail (BOX_IS_RATE_LIMITER (self), FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  if (self->rate_per_s == 0)
    return TRUE;
  now = box_clock_get_monotonic_time (self->clock);
  if (g_hash_table_size (self->buckets) >= SWEEP_SIZE)
    sweep (self, now);
  bucket = g_hash_table_lookup (self->buckets, name);
  if (bucket == NULL) {
    bucket = g_new0 (Bucket, 1);
    bucket->tokens = self->burst;
    bucket->updated = now;
    g_hash_table_insert (self->buckets, g_strdup (name), bucket);
  }
  refill (self, bucket, now);
  if (bucket->tokens >= 1.0) {
    bucket->tokens -= 1.0;
    return TRUE;
  }
  if (retry_after_s != NULL) {
    double wait_s = (1.0 - bucket->tokens) / self->rate_per_s;
    guint whole = (guint) wait_s;

    *retry_after_s = MAX (1, whole < wait_s ? whole + 1 : whole);
  }
  return FALSE;
}

guint
box_rate_limiter_get_size (BoxRateLimiter *self)
{
  g_return_val_if_fail (BOX_IS_RATE_LIMITER (self), 0);
  return g_hash_table_size (self->buckets);
}
