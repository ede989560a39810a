/* box-clock.c: the engine's time, real or driven by a test; see box-clock.h. */
#include "config.h"

#include "box-clock.h"

typedef struct {
  guint       id;
  gint64      interval;   /* usec */
  gint64      due;        /* monotonic usec */
  GSourceFunc func;
  gpointer    user_data;
} BoxClockTimer;

struct _BoxClock {
  GObject  parent_instance;

  gboolean manual;
  gint64   real;          /* manual: usec since the epoch */
  gint64   monotonic;     /* manual: usec */
  GList   *timers;        /* manual: BoxClockTimer*, unordered */
  guint    next_id;
};

G_DEFINE_FINAL_TYPE (BoxClock, box_clock, G_TYPE_OBJECT)

static void
box_clock_finalize (GObject *object)
{
  BoxClock *self = BOX_CLOCK (object);

  g_list_free_full (self->timers, g_free);
  G_OBJECT_CLASS (box_clock_parent_class)->finalize (object);
}

static void
box_clock_class_init (BoxClockClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = box_clock_finalize;
}

static void
box_clock_init (BoxClock *self)
{
  self->next_id = 1;
}

BoxClock *
box_clock_new (void)
{
  return g_object_new (BOX_TYPE_CLOCK, NULL);
}

BoxClock *
box_clock_new_manual (gint64 real_time)
{
  BoxClock *self = g_object_new (BOX_TYPE_CLOCK, NULL);

  self->manual = TRUE;
  self->real = real_time;
  self->monotonic = G_USEC_PER_SEC;
  return self;
}

gboolean
box_clock_is_manual (BoxClock *self)
{
  g_return_val_if_fail (BOX_IS_CLOCK (self), FALSE);
  return self->manual;
}

gint64
box_clock_get_real_time (BoxClock *self)
{
  g_return_val_if_fail (BOX_IS_CLOCK (self), 0);
  return self->manual ? self->real : g_get_real_time ();
}

gint64
box_clock_get_monotonic_time (BoxClock *self)
{
  g_return_val_if_fail (BOX_IS_CLOCK (self), 0);
  return self->manual ? self->monotonic : g_get_monotonic_time ();
}

guint
box_clock_timeout_add (BoxClock *self, guint interval_ms, GSourceFunc func, gpointer user_data)
{
  BoxClockTimer *timer;

  g_return_val_if_fail (BOX_IS_CLOCK (self), 0);
  g_return_val_if_fail (func != NULL, 0);

  if (!self->manual && interval_ms % 1000 == 0)
    return g_timeout_add_seconds (interval_ms / 1000, func, user_data);
  if (!self->manual)
    return g_timeout_add (interval_ms, func, user_data);
  timer = g_new0 (BoxClockTimer, 1);
  timer->id = self->next_id++;
  timer->interval = (gint64) interval_ms * 1000;
  timer->due = self->monotonic + timer->interval;
  timer->func = func;
  timer->user_data = user_data;
  self->timers = g_list_prepend (self->timers, timer);
  return timer->id;
}

static GList *
find_timer (BoxClock *self, guint id)
{
  for (GList *l = self->timers; l != NULL; l = l->next) {
    if (((BoxClockTimer *) l->data)->id == id)
      return l;
  }
  return NULL;
}

void
box_clock_source_remove (BoxClock *self, guint id)
{
  GList *link;

  g_return_if_fail (BOX_IS_CLOCK (self));
  g_return_if_fail (id > 0);

  if (!self->manual) {
    g_source_remove (id);
    return;
  }
  link = find_timer (self, id);
  g_return_if_fail (link != NULL);
  g_free (link->data);
  self->timers = g_list_delete_link (self->timers, link);
}

/* The timer due first at or before @until (the oldest on a tie), or NULL. */
static BoxClockTimer *
next_due (BoxClock *self, gint64 until)
{
  BoxClockTimer *best = NULL;

  for (GList *l = self->timers; l != NULL; l = l->next) {
    BoxClockTimer *timer = l->data;

    if (timer->due > until)
      continue;
    if (best == NULL || timer->due < best->due || (timer->due == best->due && timer->id < best->id))
      best = timer;
  }
  return best;
}

static void
move_to (BoxClock *self, gint64 monotonic)
{
  self->real += monotonic - self->monotonic;
  self->monotonic = monotonic;
}

void
box_clock_advance (BoxClock *self, gint64 usec)
{
  gint64 target;
  BoxClockTimer *timer;

  g_return_if_fail (BOX_IS_CLOCK (self));
  g_return_if_fail (self->manual);
  g_return_if_fail (usec >= 0);

  target = self->monotonic + usec;
  while ((timer = next_due (self, target)) != NULL) {
    guint id = timer->id;
    GList *link;

    move_to (self, MAX (timer->due, self->monotonic));
    /* the callback may add or remove timers, this one included */
    timer->due += MAX (timer->interval, 1);
    if (timer->func (timer->user_data) == G_SOURCE_CONTINUE)
      continue;
    link = find_timer (self, id);
    if (link != NULL) {
      g_free (link->data);
      self->timers = g_list_delete_link (self->timers, link);
    }
  }
  move_to (self, target);
}

guint
box_clock_count_timers (BoxClock *self)
{
  g_return_val_if_fail (BOX_IS_CLOCK (self), 0);
  return g_list_length (self->timers);
}
