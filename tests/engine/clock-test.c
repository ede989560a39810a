/* clock-test.c: BoxClock, the engine's time: real, and manual with timers
 * that fire in due order while it is advanced. */
#include "config.h"

#include "box-clock.h"

typedef struct {
  BoxClock  *clock;
  GPtrArray *log;       /* char*: "<name>@<monotonic ms>" */
  guint      remove_id; /* a timer the next callback removes */
  guint      fires_left;
} Trace;

typedef struct {
  Trace      *trace;
  const char *name;
} Timer;

static gboolean
fire (gpointer user_data)
{
  Timer *timer = user_data;
  Trace *trace = timer->trace;

  g_ptr_array_add (trace->log, g_strdup_printf ("%s@%" G_GINT64_FORMAT, timer->name,
                                                box_clock_get_monotonic_time (trace->clock) / 1000));
  if (trace->remove_id != 0) {
    box_clock_source_remove (trace->clock, trace->remove_id);
    trace->remove_id = 0;
  }
  if (g_str_equal (timer->name, "once"))
    return G_SOURCE_REMOVE;
  if (g_str_equal (timer->name, "limited") && --trace->fires_left == 0)
    return G_SOURCE_REMOVE;
  return G_SOURCE_CONTINUE;
}

static char *
joined (GPtrArray *log)
{
  g_ptr_array_add (log, NULL);
  return g_strjoinv (" ", (char **) log->pdata);
}

static void
test_manual_time (void)
{
  g_autoptr(BoxClock) clock = box_clock_new_manual (1000 * G_USEC_PER_SEC);

  g_assert_true (box_clock_is_manual (clock));
  g_assert_cmpint (box_clock_get_real_time (clock), ==, 1000 * G_USEC_PER_SEC);
  g_assert_cmpint (box_clock_get_monotonic_time (clock), ==, G_USEC_PER_SEC);
  box_clock_advance (clock, 1500);
  g_assert_cmpint (box_clock_get_real_time (clock), ==, 1000 * G_USEC_PER_SEC + 1500);
  g_assert_cmpint (box_clock_get_monotonic_time (clock), ==, G_USEC_PER_SEC + 1500);
  box_clock_advance (clock, 0);
  g_assert_cmpint (box_clock_get_monotonic_time (clock), ==, G_USEC_PER_SEC + 1500);
}

static void
test_manual_timers (void)
{
  g_autoptr(BoxClock) clock = box_clock_new_manual (0);
  g_autoptr(GPtrArray) log = g_ptr_array_new_with_free_func (g_free);
  Trace trace = { clock, log, 0, 2 };
  Timer every_300 = { &trace, "every300" };
  Timer once = { &trace, "once" };
  Timer limited = { &trace, "limited" };
  g_autofree char *got = NULL;

  /* the monotonic clock starts at 1000 ms */
  box_clock_timeout_add (clock, 300, fire, &every_300);
  box_clock_timeout_add (clock, 500, fire, &once);
  box_clock_timeout_add (clock, 600, fire, &limited);
  g_assert_cmpuint (box_clock_count_timers (clock), ==, 3);

  /* nothing is due yet */
  box_clock_advance (clock, 299 * 1000);
  g_assert_cmpuint (log->len, ==, 0);

  /* in due order, each at its time; a tie goes to the older timer */
  box_clock_advance (clock, 1000 * 1000 - 299 * 1000);
  got = joined (log);
  g_assert_cmpstr (got, ==, "every300@1300 once@1500 every300@1600 limited@1600 every300@1900");
  g_assert_cmpint (box_clock_get_monotonic_time (clock), ==, 2000 * 1000);
  g_assert_cmpuint (box_clock_count_timers (clock), ==, 2);

  /* limited ends itself after its second run */
  g_ptr_array_set_size (log, 0);
  box_clock_advance (clock, 1000 * 1000);
  g_clear_pointer (&got, g_free);
  got = joined (log);
  g_assert_cmpstr (got, ==, "every300@2200 limited@2200 every300@2500 every300@2800");
  g_assert_cmpuint (box_clock_count_timers (clock), ==, 1);
}

static void
test_manual_remove (void)
{
  g_autoptr(BoxClock) clock = box_clock_new_manual (0);
  g_autoptr(GPtrArray) log = g_ptr_array_new_with_free_func (g_free);
  Trace trace = { clock, log, 0, 0 };
  Timer a = { &trace, "a" };
  Timer b = { &trace, "b" };
  g_autofree char *got = NULL;
  guint id_a;
  guint id_b;

  id_a = box_clock_timeout_add (clock, 100, fire, &a);
  id_b = box_clock_timeout_add (clock, 150, fire, &b);
  g_assert_cmpuint (id_a, !=, id_b);
  /* a's first run removes b before it is due */
  trace.remove_id = id_b;
  box_clock_advance (clock, 400 * 1000);
  got = joined (log);
  g_assert_cmpstr (got, ==, "a@1100 a@1200 a@1300 a@1400");
  box_clock_source_remove (clock, id_a);
  g_assert_cmpuint (box_clock_count_timers (clock), ==, 0);
}

static gboolean
quit_loop (gpointer user_data)
{
  gboolean *fired = user_data;

  *fired = TRUE;
  return G_SOURCE_REMOVE;
}

static void
test_real (void)
{
  g_autoptr(BoxClock) clock = box_clock_new ();
  gint64 before = g_get_real_time ();
  gint64 start = g_get_monotonic_time ();
  gboolean fired = FALSE;

  g_assert_false (box_clock_is_manual (clock));
  g_assert_cmpint (box_clock_get_real_time (clock), >=, before);
  g_assert_cmpint (box_clock_get_real_time (clock), <=, g_get_real_time ());
  g_assert_cmpint (box_clock_get_monotonic_time (clock), >=, start);
  box_clock_timeout_add (clock, 20, quit_loop, &fired);
  while (!fired)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 20 * 1000);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/clock/manual/time", test_manual_time);
  g_test_add_func ("/clock/manual/timers", test_manual_timers);
  g_test_add_func ("/clock/manual/remove", test_manual_remove);
  g_test_add_func ("/clock/real", test_real);
  return g_test_run ();
}
