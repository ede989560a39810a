/* engine-states-test.c: the sandbox state machine, in process, on the
 * scripted dummy hypervisor: every transition and its event, and what a
 * failure at each step leaves behind. */
#include "config.h"

#include <string.h>

#include "engine-fixture.h"

#define ADD(path, func) g_test_add (path, Ef, NULL, ef_set_up, func, ef_tear_down)

static void
test_create (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"name\": \"one\", \"labels\": {\"k\": \"v\"}}");
  g_autofree char *want = g_strdup_printf ("sandbox.created %s -, sandbox.running %s creating",
                                           sb->id, sb->id);
  g_autoptr(BoxSandbox) stored = NULL;

  ef_assert_events (ef, want);
  g_assert_cmpstr (sb->name, ==, "one");
  g_assert_cmpstr (sb->template_name, ==, "base");
  g_assert_cmpuint (sb->resources.cpus, ==, 2);
  g_assert_cmpint (sb->created_at, ==, EF_T0);
  g_assert_cmpint (sb->last_active_at, ==, EF_T0);
  g_assert_cmpint (ef_vm_state (ef, sb->id), ==, BOX_VM_STATE_RUNNING);

  stored = box_engine_get_sandbox (ef->engine, "p", "one", NULL);
  g_assert_nonnull (stored);
  g_assert_cmpint (stored->state, ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_cmpint (stored->updated_at, ==, EF_T0);
}

static void
test_pause_stop_wake (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{}");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) after = NULL;
  g_autofree char *want = NULL;
  g_autofree char *interrupted = NULL;

  ef_forget (ef);
  ef_advance (ef, 5);
  after = ef_change (ef, sb->id, BOX_STATE_REQUEST_PAUSE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_cmpint (after->snapshot_at, ==, EF_T0 + 5 * G_USEC_PER_SEC);
  g_assert_cmpint (after->updated_at, ==, EF_T0 + 5 * G_USEC_PER_SEC);
  g_assert_cmpint (ef_vm_state (ef, sb->id), ==, BOX_VM_STATE_SUSPENDED);
  g_clear_pointer (&after, box_sandbox_free);
  /* a second pause is a no-op: no event, no VM operation */
  ef_script (ef, "suspend fail");
  after = ef_change (ef, sb->id, BOX_STATE_REQUEST_PAUSE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_PAUSED);
  ef_script (ef, "");
  g_clear_pointer (&after, box_sandbox_free);

  after = ef_change (ef, sb->id, BOX_STATE_REQUEST_WAKE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_RUNNING);
  g_clear_pointer (&after, box_sandbox_free);

  after = ef_change (ef, sb->id, BOX_STATE_REQUEST_STOP, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_STOPPED);
  g_assert_cmpint (after->snapshot_at, ==, 0);
  g_assert_cmpint (ef_vm_state (ef, sb->id), ==, BOX_VM_STATE_SHUTOFF);
  g_clear_pointer (&after, box_sandbox_free);

  /* a stopped sandbox cannot be paused */
  g_assert_null (ef_change (ef, sb->id, BOX_STATE_REQUEST_PAUSE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_clear_error (&error);

  after = ef_change (ef, sb->id, BOX_STATE_REQUEST_WAKE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_cmpint (ef_vm_state (ef, sb->id), ==, BOX_VM_STATE_RUNNING);

  want = g_strdup_printf ("sandbox.paused %s request, sandbox.running %s paused, "
                          "sandbox.stopped %s request, sandbox.running %s stopped",
                          sb->id, sb->id, sb->id, sb->id);
  ef_assert_events (ef, want);
  interrupted = ef_take_interrupted (ef);
  g_clear_pointer (&want, g_free);
  want = g_strdup_printf ("%s pause, %s stop", sb->id, sb->id);
  g_assert_cmpstr (interrupted, ==, want);
}

/* A failed pause or stop leaves the sandbox as it was; a failed wake is
 * sandbox_unavailable (capacity stays capacity) and leaves it asleep. */
static void
test_failures (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{}");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) after = NULL;

  ef_forget (ef);
  ef_script (ef, "suspend fail times=1");
  g_assert_null (ef_change (ef, sb->id, BOX_STATE_REQUEST_PAUSE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_cmpstr (error->message, ==, "injected failure");
  g_clear_error (&error);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);
  ef_assert_events (ef, "");

  ef_script (ef, "shutdown fail code=conflict times=1");
  g_assert_null (ef_change (ef, sb->id, BOX_STATE_REQUEST_STOP, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_clear_error (&error);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);

  /* the rules were spent: the same requests work now */
  after = ef_change (ef, sb->id, BOX_STATE_REQUEST_PAUSE, &error);
  g_assert_no_error (error);
  g_clear_pointer (&after, box_sandbox_free);

  ef_script (ef, "resume fail times=1");
  g_assert_null (ef_change (ef, sb->id, BOX_STATE_REQUEST_WAKE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_assert_true (g_str_has_suffix (error->message, "could not be woken: injected failure"));
  g_clear_error (&error);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_PAUSED);

  ef_script (ef, "resume fail code=capacity times=1");
  g_assert_null (ef_change (ef, sb->id, BOX_STATE_REQUEST_WAKE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CAPACITY);
  g_clear_error (&error);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_PAUSED);

  /* a hold (the sub-API) wakes it the same way */
  ef_script (ef, "resume fail times=1");
  g_assert_null (ef_hold (ef, sb->id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_clear_error (&error);
  after = ef_hold (ef, sb->id, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_RUNNING);
  box_engine_release (ef->engine, sb->id);
}

/* A create refused (capacity, invalid, unsupported) leaves nothing behind;
 * any other failure of the first boot leaves the sandbox in error. */
static void
test_create_failures (Ef *ef, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) all = NULL;
  g_autoptr(BoxSandbox) broken = NULL;
  g_auto(GStrv) events = NULL;
  g_autofree char *got = NULL;

  ef_script (ef, "create fail code=capacity times=1");
  g_assert_null (ef_create (ef, "{\"name\": \"refused\"}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CAPACITY);
  g_clear_error (&error);
  g_assert_null (box_engine_get_sandbox (ef->engine, "p", "refused", NULL));
  got = ef_take_events (ef);
  events = g_strsplit (got, ", ", -1);
  g_assert_cmpuint (g_strv_length (events), ==, 2);
  g_assert_true (g_str_has_prefix (events[0], "sandbox.created sb-"));
  g_assert_true (g_str_has_prefix (events[1], "sandbox.deleted sb-"));
  g_assert_true (g_str_has_suffix (events[1], " capacity"));

  ef_script (ef, "create fail times=1");
  g_assert_null (ef_create (ef, "{\"name\": \"broken\"}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);
  broken = box_engine_get_sandbox (ef->engine, "p", "broken", &error);
  g_assert_no_error (error);
  g_assert_cmpint (broken->state, ==, BOX_SANDBOX_STATE_ERROR);
  g_clear_pointer (&got, g_free);
  got = ef_take_events (ef);
  g_assert_true (g_str_has_suffix (got, " none"));
  g_assert_nonnull (strstr (got, "sandbox.error"));

  /* nothing can be done with it but deleting it */
  g_assert_null (ef_change (ef, "broken", BOX_STATE_REQUEST_WAKE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_clear_error (&error);
  g_assert_true (ef_delete (ef, "broken", &error));
  g_assert_no_error (error);

  /* checks that need state come before the record exists */
  g_assert_null (ef_create (ef, "{\"template\": \"nope\"}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  all = box_engine_list_sandboxes (ef->engine, "p", NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (all->len, ==, 0);
}

static void
test_delete (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"protected\": true}");
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *want = NULL;
  g_autofree char *got = NULL;

  ef_forget (ef);
  g_assert_false (ef_delete (ef, sb->id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_clear_error (&error);
  after = ef_update (ef, sb->id, "{\"protected\": false}", &error);
  g_assert_no_error (error);
  g_assert_false (after->protected_);

  /* a failed destroy keeps the record */
  ef_script (ef, "destroy fail times=1");
  g_assert_false (ef_delete (ef, sb->id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);

  g_assert_true (ef_delete (ef, sb->id, &error));
  g_assert_no_error (error);
  g_assert_cmpint (ef_state (ef, sb->id), ==, -1);
  g_assert_cmpint (ef_vm_state (ef, sb->id), ==, BOX_VM_STATE_ABSENT);
  want = g_strdup_printf ("sandbox.deleted %s request", sb->id);
  got = ef_take_events (ef);
  g_assert_nonnull (strstr (got, want));
  g_assert_false (ef_delete (ef, sb->id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
}

/* Operations on one sandbox run one at a time, in arrival order. */
typedef struct {
  GPtrArray *order;
  const char *name;
} Step;

static void
step_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Step *step = user_data;
  g_autoptr(BoxSandbox) sb = box_engine_change_state_finish (BOX_ENGINE (source), result, NULL);

  g_ptr_array_add (step->order, g_strdup_printf ("%s:%s", step->name,
                                                 sb != NULL ? box_sandbox_state_to_string (sb->state)
                                                            : "failed"));
}

static void
test_serialized (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) other = ef_create_ok (ef, "{}");
  g_autoptr(GPtrArray) order = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *rule = g_strdup_printf ("suspend delay ms=150 sandbox=%s", sb->id);
  Step pause = { order, "pause" }, wake = { order, "wake" }, stop = { order, "stop" };
  Step other_pause = { order, "other" };
  gint64 start = g_get_monotonic_time ();

  ef_script (ef, rule);
  box_engine_change_state_async (ef->engine, "p", sb->id, BOX_STATE_REQUEST_PAUSE, NULL,
                                 step_done, &pause);
  box_engine_change_state_async (ef->engine, "p", sb->id, BOX_STATE_REQUEST_WAKE, NULL,
                                 step_done, &wake);
  box_engine_change_state_async (ef->engine, "p", sb->id, BOX_STATE_REQUEST_STOP, NULL,
                                 step_done, &stop);
  /* another sandbox is not held up by the slow pause */
  box_engine_change_state_async (ef->engine, "p", other->id, BOX_STATE_REQUEST_PAUSE, NULL,
                                 step_done, &other_pause);
  while (order->len < 4)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 150 * 1000);
  g_assert_cmpstr (g_ptr_array_index (order, 0), ==, "other:paused");
  g_assert_cmpstr (g_ptr_array_index (order, 1), ==, "pause:paused");
  g_assert_cmpstr (g_ptr_array_index (order, 2), ==, "wake:running");
  g_assert_cmpstr (g_ptr_array_index (order, 3), ==, "stop:stopped");
}

/* Another writer moves the record on while an operation holds the sandbox:
 * a write at the revision read before fails with conflict, and the
 * operation's own save, which loses the compare-and-swap, reads the
 * revision again and writes (the holder owns the record). */
static void
test_storage_conflict (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{}");
  BoxStorage *storage = box_engine_get_storage (ef->engine);
  g_autoptr(GPtrArray) order = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *rule = g_strdup_printf ("suspend delay ms=300 sandbox=%s", sb->id);
  g_autoptr(BoxSandbox) stale = NULL;
  g_autoptr(BoxSandbox) other = NULL;
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(GError) error = NULL;
  Step pause = { order, "pause" };
  g_autofree char *interrupted = NULL;

  ef_script (ef, rule);
  ef_forget (ef);
  box_engine_change_state_async (ef->engine, "p", sb->id, BOX_STATE_REQUEST_PAUSE, NULL,
                                 step_done, &pause);
  /* the pause has read the record and waits for the hypervisor */
  while (ef->interrupted->len == 0)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (order->len, ==, 0);

  stale = box_storage_sandbox_get (storage, "p", sb->id, &error);
  g_assert_no_error (error);
  other = box_sandbox_copy (stale);
  g_hash_table_replace (other->labels, g_strdup ("by"), g_strdup ("other"));
  g_assert_true (box_storage_sandbox_update (storage, other, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (other->revision, >, stale->revision);
  g_assert_false (box_storage_sandbox_update (storage, stale, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_clear_error (&error);

  while (order->len < 1)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpstr (g_ptr_array_index (order, 0), ==, "pause:paused");
  after = box_storage_sandbox_get (storage, "p", sb->id, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_cmpuint (after->revision, >, other->revision);
  g_assert_null (g_hash_table_lookup (after->labels, "by"));
  interrupted = ef_take_interrupted (ef);
  g_assert_nonnull (strstr (interrupted, sb->id));
}

/* A project written behind the engine's back, through the storage
 * interface (as another writer of the store would): the engine's next read
 * sees it, while reads of an unchanged project keep their revision. */
static void
test_project_changed_behind (Ef *ef, gconstpointer user_data)
{
  BoxStorage *storage = box_engine_get_storage (ef->engine);
  const char *const domains[] = { "other.example.com", NULL };
  g_autoptr(BoxProject) first = NULL;
  g_autoptr(BoxProject) again = NULL;
  g_autoptr(BoxProject) other = NULL;
  g_autoptr(BoxProject) seen = NULL;
  g_autoptr(GError) error = NULL;

  first = box_engine_get_project (ef->engine, "p", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_strv_length (first->domains), ==, 0);
  again = box_engine_get_project (ef->engine, "p", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (again->revision, ==, first->revision);

  other = box_storage_project_get (storage, "p", &error);
  g_assert_no_error (error);
  g_strfreev (other->domains);
  other->domains = g_strdupv ((char **) domains);
  g_assert_true (box_storage_project_update (storage, other, &error));
  g_assert_no_error (error);

  seen = box_engine_get_project (ef->engine, "p", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (seen->revision, ==, other->revision);
  g_assert_cmpuint (seen->revision, >, first->revision);
  g_assert_cmpstrv (seen->domains, domains);
}

/* The VM dies in the middle of an operation: the operation fails, then
 * the engine records what the hypervisor has left. */
static void
test_lost_mid_operation (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) running = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) paused = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *rule = NULL;
  g_autofree char *want = NULL;

  /* running, lost during its pause: no memory snapshot, but its disk */
  rule = g_strdup_printf ("suspend lose sandbox=%s times=1", running->id);
  ef_script (ef, rule);
  ef_forget (ef);
  g_assert_null (ef_change (ef, running->id, BOX_STATE_REQUEST_PAUSE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);
  ef_settle (ef);
  g_assert_cmpint (ef_state (ef, running->id), ==, BOX_SANDBOX_STATE_STOPPED);
  want = g_strdup_printf ("sandbox.stopped %s vm_lost", running->id);
  ef_assert_events (ef, want);

  /* paused (a snapshot), lost during its wake: back to the snapshot */
  after = ef_change (ef, paused->id, BOX_STATE_REQUEST_PAUSE, &error);
  g_assert_no_error (error);
  ef_forget (ef);
  g_clear_pointer (&rule, g_free);
  rule = g_strdup_printf ("resume lose sandbox=%s times=1", paused->id);
  ef_script (ef, rule);
  g_assert_null (ef_change (ef, paused->id, BOX_STATE_REQUEST_WAKE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_clear_error (&error);
  ef_settle (ef);
  g_assert_cmpint (ef_state (ef, paused->id), ==, BOX_SANDBOX_STATE_PAUSED);
  g_clear_pointer (&want, g_free);
  want = g_strdup_printf ("sandbox.paused %s vm_lost", paused->id);
  ef_assert_events (ef, want);
  g_clear_pointer (&want, g_free);
  want = g_strdup_printf ("%s lost", paused->id);
  ef_assert_interrupted (ef, want);
  /* and it wakes from there */
  g_clear_pointer (&after, box_sandbox_free);
  after = ef_change (ef, paused->id, BOX_STATE_REQUEST_WAKE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_RUNNING);
}

static void
on_event_detail (BoxEngine *engine, BoxEvent *event, gpointer user_data)
{
  char **snapshot_at = user_data;

  g_clear_pointer (snapshot_at, g_free);
  if (event->detail != NULL && json_object_has_member (event->detail, "snapshot_at"))
    *snapshot_at = g_strdup (json_object_get_string_member (event->detail, "snapshot_at"));
}

/* The VM dies on its own, outside any operation: back to its disk
 * (stopped, then a wake boots it), to its memory snapshot (paused), or,
 * with nothing left, error. */
static void
test_lost_on_its_own (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *want = NULL;
  g_autofree char *snapshot_at = NULL;
  gint64 at = 0;
  gulong handler = g_signal_connect (ef->engine, "event", G_CALLBACK (on_event_detail), &snapshot_at);

  /* running: its disk is what is left */
  ef_forget (ef);
  g_assert_true (ef_lose_vm (ef, sb->id));
  ef_settle (ef);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_STOPPED);
  want = g_strdup_printf ("sandbox.stopped %s vm_lost", sb->id);
  ef_assert_events (ef, want);
  g_assert_nonnull (snapshot_at);
  g_assert_true (box_time_parse (snapshot_at, &at));
  g_assert_cmpint (at, >, 0);
  g_clear_pointer (&want, g_free);
  want = g_strdup_printf ("%s lost", sb->id);
  ef_assert_interrupted (ef, want);
  /* the next wake boots it */
  after = ef_change (ef, sb->id, BOX_STATE_REQUEST_WAKE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_RUNNING);
  g_clear_pointer (&want, g_free);
  want = g_strdup_printf ("sandbox.running %s stopped", sb->id);
  ef_assert_events (ef, want);

  /* nothing left to go back to: error, reason reconciled, no snapshot_at */
  g_assert_true (ef_lose_all (ef, sb->id));
  ef_settle (ef);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_ERROR);
  g_clear_pointer (&want, g_free);
  want = g_strdup_printf ("sandbox.error %s reconciled", sb->id);
  ef_assert_events (ef, want);
  g_assert_null (snapshot_at);

  /* a paused sandbox whose snapshot is still there stays as it is */
  g_clear_pointer (&sb, box_sandbox_free);
  g_clear_pointer (&after, box_sandbox_free);
  sb = ef_create_ok (ef, "{}");
  after = ef_change (ef, sb->id, BOX_STATE_REQUEST_PAUSE, &error);
  g_assert_no_error (error);
  ef_forget (ef);
  g_signal_emit_by_name (ef->hv, "vm-lost", sb->id);
  ef_settle (ef);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_PAUSED);
  ef_assert_events (ef, "");
  g_signal_handler_disconnect (ef->engine, handler);
}

static void
test_update (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"env\": {\"A\": \"1\"}}");
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(GError) error = NULL;

  ef_advance (ef, 3);
  after = ef_update (ef, sb->id, "{\"env\": {\"B\": \"2\"}, \"idle\": {\"timeout_s\": 60}}", &error);
  g_assert_no_error (error);
  g_assert_null (g_hash_table_lookup (after->env, "A"));
  g_assert_cmpstr (g_hash_table_lookup (after->env, "B"), ==, "2");
  g_assert_cmpuint (after->idle_timeout_s, ==, 60);
  g_assert_cmpint (after->updated_at, ==, EF_T0 + 3 * G_USEC_PER_SEC);
  g_clear_pointer (&after, box_sandbox_free);

  /* a deadline must be in the future of the engine's clock */
  g_assert_null (ef_update (ef, sb->id, "{\"deadline\": {\"at\": \"2030-01-01T00:00:02Z\", "
                                        "\"action\": \"delete\"}}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  after = ef_update (ef, sb->id, "{\"deadline\": {\"at\": \"2030-01-01T00:00:04Z\", "
                                 "\"action\": \"delete\"}}", &error);
  g_assert_no_error (error);
  g_assert_true (after->has_deadline);
}

/* The engine asks the hypervisor what it can do rather than failing. */
static void
test_capabilities (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(GError) error = NULL;
  BoxHypervisorCapabilities caps;

  box_hypervisor_get_capabilities (ef->hv, &caps);
  g_assert_cmpstr (caps.accel, ==, "none");
  g_assert_cmpint (caps.flags, ==, BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS |
                                   BOX_HYPERVISOR_CAP_CHECKPOINTS | BOX_HYPERVISOR_CAP_FORK);
  g_assert_cmpstr (box_hypervisor_get_accel (ef->hv), ==, "none");

  /* no guest agent: the sub-API says so without asking the plugin */
  g_assert_null (box_engine_get_agent (ef->engine, sb->id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_assert_cmpstr (error->message, ==, "the dummy hypervisor runs no VM");
  g_clear_error (&error);

  /* no memory snapshots: a pause is refused before anything is interrupted */
  ef_caps (ef, "checkpoints", "tcg");
  g_assert_cmpstr (box_hypervisor_get_accel (ef->hv), ==, "tcg");
  ef_forget (ef);
  g_assert_null (ef_change (ef, sb->id, BOX_STATE_REQUEST_PAUSE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_clear_error (&error);
  ef_assert_interrupted (ef, "");
  ef_assert_events (ef, "");
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);
  /* a stop needs none */
  after = ef_change (ef, sb->id, BOX_STATE_REQUEST_STOP, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_STOPPED);

  /* a hypervisor that claims a guest agent is asked, and its failure passes through */
  ef_caps (ef, "guest-agent,memory-snapshots", "kvm");
  g_assert_null (box_engine_get_agent (ef->engine, sb->id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_clear_error (&error);
}

/* Without the fork capability a fork is refused before any record exists. */
static void
test_fork_capability (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) source = ef_create_ok (ef, "{\"name\": \"src\"}");
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) all = NULL;
  BoxCheckpoint checkpoint = {
    .id = (char *) "v1", .sandbox = source->id, .project = (char *) "p", .comment = (char *) "",
    .memory = FALSE, .created_at = EF_T0,
  };

  g_assert_true (box_storage_checkpoint_insert (box_engine_get_storage (ef->engine), &checkpoint,
                                                &error));
  g_assert_no_error (error);
  ef_caps (ef, "memory-snapshots,checkpoints", "none");
  ef_forget (ef);
  g_assert_null (ef_create (ef, "{\"from\": {\"sandbox\": \"src\", \"checkpoint\": \"v1\"}}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_clear_error (&error);
  ef_assert_events (ef, "");
  all = box_engine_list_sandboxes (ef->engine, "p", NULL, NULL, &error);
  g_assert_cmpuint (all->len, ==, 1);

  /* another project's sandbox is still not found first */
  g_assert_null (ef_create (ef, "{\"from\": {\"sandbox\": \"nope\", \"checkpoint\": \"v1\"}}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);

  ADD ("/engine/states/create", test_create);
  ADD ("/engine/states/pause-stop-wake", test_pause_stop_wake);
  ADD ("/engine/states/failures", test_failures);
  ADD ("/engine/states/create-failures", test_create_failures);
  ADD ("/engine/states/delete", test_delete);
  ADD ("/engine/states/serialized", test_serialized);
  ADD ("/engine/states/lost-mid-operation", test_lost_mid_operation);
  ADD ("/engine/states/lost-on-its-own", test_lost_on_its_own);
  ADD ("/engine/states/update", test_update);
  ADD ("/engine/states/storage-conflict", test_storage_conflict);
  ADD ("/engine/states/project-changed-behind", test_project_changed_behind);
  ADD ("/engine/states/capabilities", test_capabilities);
  ADD ("/engine/states/fork-capability", test_fork_capability);
  return g_test_run ();
}
