/* engine-timers-test.c: deadlines and the idle rule on the engine's manual
 * clock (what tests/e2e/test_timers.py waited 30-70 s of real time for):
 * each fires at its second, not before, once, with its reason. */
#include "config.h"

#include "engine-fixture.h"

#define ADD(path, func) g_test_add (path, Ef, NULL, ef_set_up, func, ef_tear_down)

/* The time of the first recorded event "<type> <id> <reason>", or -1. */
static gint64
event_at (Ef *ef, const char *type, const char *id, const char *reason)
{
  g_autofree char *wanted = g_strdup_printf ("%s %s %s", type, id, reason);

  for (guint i = 0; i < ef->events->len; i++) {
    if (g_str_equal (g_ptr_array_index (ef->events, i), wanted))
      return *(gint64 *) g_ptr_array_index (ef->event_times, i);
  }
  return -1;
}

/* Events other than created/running for @id. */
static guint
count_changes (Ef *ef, const char *id)
{
  guint n = 0;

  for (guint i = 0; i < ef->events->len; i++) {
    const char *event = g_ptr_array_index (ef->events, i);

    if (strstr (event, id) != NULL && !g_str_has_prefix (event, "sandbox.created ") &&
        !g_str_has_prefix (event, "sandbox.running "))
      n++;
  }
  return n;
}

static BoxSandbox *
create_with_deadline (Ef *ef, const char *name, const char *action, gint64 in_s,
                      const char *more)
{
  g_autofree char *at = ef_future (ef, in_s);
  g_autofree char *json = g_strdup_printf ("{\"name\": \"%s\", \"deadline\": {\"at\": \"%s\", "
                                           "\"action\": \"%s\"}%s}", name, at, action, more);

  return ef_create_ok (ef, json);
}

#define IDLE_NONE ", \"idle\": {\"timeout_s\": 3600, \"action\": \"none\"}"

static void
test_deadlines (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sp = create_with_deadline (ef, "dl-pause", "pause", 4, IDLE_NONE);
  g_autoptr(BoxSandbox) ss = create_with_deadline (ef, "dl-stop", "stop", 4, IDLE_NONE);
  g_autoptr(BoxSandbox) sd = create_with_deadline (ef, "dl-delete", "delete", 4,
                                                   ", \"protected\": true");
  g_autoptr(BoxSandbox) later = create_with_deadline (ef, "dl-later", "delete", 3600, "");
  g_autoptr(BoxSandbox) cleared = create_with_deadline (ef, "dl-cleared", "delete", 4, "");
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(GError) error = NULL;
  const gint64 deadline = EF_T0 + 4 * G_USEC_PER_SEC;

  after = ef_update (ef, "dl-cleared", "{\"deadline\": null}", &error);
  g_assert_no_error (error);
  g_assert_false (after->has_deadline);
  g_clear_pointer (&after, box_sandbox_free);

  /* not before its time */
  ef_advance (ef, 3);
  g_assert_cmpint (count_changes (ef, sp->id) + count_changes (ef, ss->id) +
                   count_changes (ef, sd->id), ==, 0);
  g_assert_cmpint (ef_state (ef, sp->id), ==, BOX_SANDBOX_STATE_RUNNING);

  /* at its second, with reason deadline */
  ef_advance (ef, 1);
  g_assert_cmpint (event_at (ef, "sandbox.paused", sp->id, "deadline"), ==, deadline);
  g_assert_cmpint (event_at (ef, "sandbox.stopped", ss->id, "deadline"), ==, deadline);
  g_assert_cmpint (event_at (ef, "sandbox.deleted", sd->id, "deadline"), ==, deadline);

  after = box_engine_get_sandbox (ef->engine, "p", "dl-pause", &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_false (after->has_deadline);   /* a fired deadline is cleared */
  g_clear_pointer (&after, box_sandbox_free);
  g_assert_cmpint (ef_state (ef, ss->id), ==, BOX_SANDBOX_STATE_STOPPED);
  /* deleted although protected */
  g_assert_cmpint (ef_state (ef, sd->id), ==, -1);
  g_assert_cmpint (ef_vm_state (ef, sd->id), ==, BOX_VM_STATE_ABSENT);
  g_assert_cmpint (ef_state (ef, later->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_cmpint (ef_state (ef, cleared->id), ==, BOX_SANDBOX_STATE_RUNNING);

  /* woken after its deadline, it is not paused again by the old one */
  after = ef_change (ef, "dl-pause", BOX_STATE_REQUEST_WAKE, &error);
  g_assert_no_error (error);
  ef_forget (ef);
  ef_advance (ef, 10);
  g_assert_cmpint (ef_state (ef, sp->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_cmpuint (count_changes (ef, sp->id) + count_changes (ef, later->id) +
                    count_changes (ef, cleared->id), ==, 0);
}

static void
ignore_result (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxSandbox) sandbox = box_engine_change_state_finish (BOX_ENGINE (source), result, NULL);

  g_assert_nonnull (sandbox);
}

/* A deadline that finds the sandbox already there is spent all the same;
 * one that finds it busy fires once the operation is over. */
static void
test_deadline_edge_cases (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) paused = create_with_deadline (ef, "already", "pause", 2, IDLE_NONE);
  g_autoptr(BoxSandbox) busy = create_with_deadline (ef, "busy", "stop", 2, IDLE_NONE);
  g_autoptr(BoxSandbox) held = create_with_deadline (ef, "held", "pause", 2, IDLE_NONE);
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(BoxSandbox) hold = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *rule = g_strdup_printf ("suspend delay ms=300 sandbox=%s", busy->id);

  after = ef_change (ef, "already", BOX_STATE_REQUEST_PAUSE, &error);
  g_assert_no_error (error);
  g_clear_pointer (&after, box_sandbox_free);
  hold = ef_hold (ef, "held", &error);
  g_assert_no_error (error);
  ef_forget (ef);

  /* busy: a slow pause is in flight when the deadline comes */
  ef_script (ef, rule);
  box_engine_change_state_async (ef->engine, "p", busy->id, BOX_STATE_REQUEST_PAUSE, NULL,
                                 ignore_result, NULL);
  ef_advance (ef, 2);
  g_assert_cmpint (ef_state (ef, busy->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_cmpint (count_changes (ef, busy->id), ==, 0);

  /* already paused: no event, the deadline is gone */
  after = box_engine_get_sandbox (ef->engine, "p", "already", &error);
  g_assert_no_error (error);
  g_assert_false (after->has_deadline);
  g_assert_cmpint (count_changes (ef, paused->id), ==, 0);
  g_clear_pointer (&after, box_sandbox_free);

  /* a hold does not keep a deadline off */
  g_assert_cmpint (ef_state (ef, held->id), ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_cmpint (event_at (ef, "sandbox.paused", held->id, "deadline"), ==,
                   EF_T0 + 2 * G_USEC_PER_SEC);
  box_engine_release (ef->engine, held->id);

  /* the slow pause ends; the next tick stops it for its deadline */
  while (ef_state (ef, busy->id) != BOX_SANDBOX_STATE_PAUSED)
    g_main_context_iteration (NULL, TRUE);
  ef_advance (ef, 1);
  g_assert_cmpint (ef_state (ef, busy->id), ==, BOX_SANDBOX_STATE_STOPPED);
  g_assert_cmpint (event_at (ef, "sandbox.stopped", busy->id, "deadline"), ==,
                   EF_T0 + 3 * G_USEC_PER_SEC);
  after = box_engine_get_sandbox (ef->engine, "p", "busy", &error);
  g_assert_false (after->has_deadline);
}

static void
test_idle (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) ip = ef_create_ok (ef, "{\"name\": \"idle-pause\", \"idle\": {\"timeout_s\": 30, \"action\": \"pause\"}}");
  g_autoptr(BoxSandbox) ist = ef_create_ok (ef, "{\"name\": \"idle-stop\", \"idle\": {\"timeout_s\": 30, \"action\": \"stop\"}}");
  g_autoptr(BoxSandbox) inone = ef_create_ok (ef, "{\"name\": \"idle-none\", \"idle\": {\"timeout_s\": 30, \"action\": \"none\"}}");
  g_autoptr(BoxSandbox) slow = ef_create_ok (ef, "{\"name\": \"idle-slow\", \"idle\": {\"timeout_s\": 3600, \"action\": \"pause\"}}");
  const gint64 due = EF_T0 + 30 * G_USEC_PER_SEC;

  ef_forget (ef);
  /* not before 30 s of idleness */
  ef_advance (ef, 29);
  g_assert_cmpuint (ef->events->len, ==, 0);
  ef_advance (ef, 1);
  g_assert_cmpint (event_at (ef, "sandbox.paused", ip->id, "idle"), ==, due);
  g_assert_cmpint (event_at (ef, "sandbox.stopped", ist->id, "idle"), ==, due);
  g_assert_cmpint (ef_state (ef, ip->id), ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_cmpint (ef_state (ef, ist->id), ==, BOX_SANDBOX_STATE_STOPPED);

  /* action none and a long timeout: nothing, even much later */
  ef_advance (ef, 120);
  g_assert_cmpuint (count_changes (ef, inone->id) + count_changes (ef, slow->id), ==, 0);
  g_assert_cmpint (ef_state (ef, inone->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_cmpint (ef_state (ef, slow->id), ==, BOX_SANDBOX_STATE_RUNNING);
  /* and the others only once */
  g_assert_cmpuint (count_changes (ef, ip->id) + count_changes (ef, ist->id), ==, 2);
}

/* Calls in flight keep a sandbox awake; their end, and touches, are activity. */
static void
test_idle_activity (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"idle\": {\"timeout_s\": 30, \"action\": \"pause\"}}");
  g_autoptr(BoxSandbox) held = NULL;
  g_autoptr(GError) error = NULL;

  ef_forget (ef);
  held = ef_hold (ef, sb->id, &error);
  g_assert_no_error (error);
  ef_advance (ef, 100);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);

  /* the release counts as activity: thirty more seconds from there */
  box_engine_release (ef->engine, sb->id);
  ef_advance (ef, 29);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);
  box_engine_touch (ef->engine, sb->id);
  ef_advance (ef, 29);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_cmpuint (ef->events->len, ==, 0);
  ef_advance (ef, 1);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_cmpint (event_at (ef, "sandbox.paused", sb->id, "idle"), ==,
                   EF_T0 + 159 * G_USEC_PER_SEC);

  /* a wake is activity too; a paused sandbox is not paused again */
  g_clear_pointer (&held, box_sandbox_free);
  held = ef_change (ef, sb->id, BOX_STATE_REQUEST_WAKE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (held->last_active_at, ==, EF_T0 + 159 * G_USEC_PER_SEC);
  ef_forget (ef);
  ef_advance (ef, 29);
  g_assert_cmpuint (ef->events->len, ==, 0);
  ef_advance (ef, 1);
  g_assert_cmpint (event_at (ef, "sandbox.paused", sb->id, "idle"), ==,
                   EF_T0 + 189 * G_USEC_PER_SEC);
}

/* A failing idle pause is retried a timeout later, not every tick. */
static void
test_idle_failure (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"idle\": {\"timeout_s\": 30, \"action\": \"pause\"}}");
  g_autofree char *rule = g_strdup_printf ("suspend fail sandbox=%s times=1", sb->id);

  ef_script (ef, rule);
  ef_forget (ef);
  ef_advance (ef, 30);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);
  ef_advance (ef, 29);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);
  ef_advance (ef, 1);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_cmpint (event_at (ef, "sandbox.paused", sb->id, "idle"), ==,
                   EF_T0 + 60 * G_USEC_PER_SEC);
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);

  ADD ("/engine/timers/deadlines", test_deadlines);
  ADD ("/engine/timers/deadline-edge-cases", test_deadline_edge_cases);
  ADD ("/engine/timers/idle", test_idle);
  ADD ("/engine/timers/idle-activity", test_idle_activity);
  ADD ("/engine/timers/idle-failure", test_idle_failure);
  return g_test_run ();
}
