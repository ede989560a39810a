/* box-clock.h: the engine's time.
 *
 * Every place the engine reads the time (timestamps in records and
 * events, deadlines, the last activity of a sandbox) or arms a timer (the
 * tick of deadlines and the idle rule) goes through its BoxClock, so that
 * a test can drive time.  The real clock (box_clock_new()) is GLib's:
 * g_get_real_time(), g_get_monotonic_time() and main-loop timeouts.  A
 * manual clock (box_clock_new_manual()) stands still until
 * box_clock_advance() moves it, which runs every timer that falls due on
 * the way, in due order, before it returns.
 *
 * Main thread only, like the engine.
 */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

#define BOX_TYPE_CLOCK (box_clock_get_type ())
G_DECLARE_FINAL_TYPE (BoxClock, box_clock, BOX, CLOCK, GObject)

/* GLib's clocks and main-loop timeouts */
BoxClock *box_clock_new                (void);
/* A clock that starts at @real_time (usec since the epoch) and only moves
 * when advanced; its monotonic time starts at 1 s. */
BoxClock *box_clock_new_manual         (gint64 real_time);
gboolean  box_clock_is_manual          (BoxClock *self);

gint64    box_clock_get_real_time      (BoxClock *self);
gint64    box_clock_get_monotonic_time (BoxClock *self);

/* Calls @func every @interval_ms until it returns G_SOURCE_REMOVE or the
 * timer is removed; an ID > 0. */
guint     box_clock_timeout_add        (BoxClock *self, guint interval_ms, GSourceFunc func,
                                        gpointer user_data);
void      box_clock_source_remove      (BoxClock *self, guint id);

/* Manual clocks only: moves both times by @usec (>= 0), running the timers
 * due on the way with the clock standing at their due time.  Nothing else
 * runs meanwhile: what the timers start asynchronously needs the main
 * loop afterwards. */
void      box_clock_advance            (BoxClock *self, gint64 usec);
/* The number of armed timers (manual clocks; for tests). */
guint     box_clock_count_timers       (BoxClock *self);

G_END_DECLS
