/* engine-reconcile-test.c: what boxd finds after a restart (the records
 * against what the hypervisor still has), timers across a restart, and
 * project teardown. */
#include "config.h"

#include <glib/gstdio.h>

#include "engine-fixture.h"

#define ADD(path, func) g_test_add (path, Ef, NULL, ef_set_up, func, ef_tear_down)

/* What the dummy hypervisor has for @id while boxd is down: @state
 * ("running", "suspended", "shutoff", "lost") or NULL for nothing. */
static void
set_vm (Ef *ef, const char *id, const char *state, gint64 snapshot_at)
{
  g_autofree char *name = g_strconcat (id, ".json", NULL);
  g_autofree char *path = g_build_filename (ef->data_dir, "dummy", name, NULL);
  g_autofree char *json = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_null (ef->engine);
  g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
  if (state == NULL) {
    g_assert_cmpint (g_unlink (path), ==, 0);
    return;
  }
  json = g_strdup_printf ("{\"state\": \"%s\", \"snapshot_at\": %" G_GINT64_FORMAT ", \"cpus\": 2, "
                          "\"memory_mib\": 2048, \"disk_gib\": 20, \"checkpoints\": {}}",
                          state, snapshot_at);
  g_assert_true (g_file_set_contents (path, json, -1, &error));
  g_assert_no_error (error);
}

static BoxSandbox *
change_ok (Ef *ef, const char *id, BoxStateRequest request)
{
  g_autoptr(GError) error = NULL;
  BoxSandbox *sandbox = ef_change (ef, id, request, &error);

  g_assert_no_error (error);
  return sandbox;
}

static void
test_restart_consistent (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) running = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) paused = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) stopped = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) p = change_ok (ef, paused->id, BOX_STATE_REQUEST_PAUSE);
  g_autoptr(BoxSandbox) s = change_ok (ef, stopped->id, BOX_STATE_REQUEST_STOP);

  ef_stop (ef);
  ef_forget (ef);
  ef_start (ef);
  ef_assert_events (ef, "");
  g_assert_cmpint (ef_state (ef, running->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_cmpint (ef_state (ef, paused->id), ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_cmpint (ef_state (ef, stopped->id), ==, BOX_SANDBOX_STATE_STOPPED);
  /* and they work */
  g_clear_pointer (&p, box_sandbox_free);
  p = change_ok (ef, paused->id, BOX_STATE_REQUEST_WAKE);
  g_assert_cmpint (p->state, ==, BOX_SANDBOX_STATE_RUNNING);
}

static void
test_restart_lost (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) gone = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) snap = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) disk = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) cold = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) stopped = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) creating = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) c = change_ok (ef, cold->id, BOX_STATE_REQUEST_PAUSE);
  g_autoptr(BoxSandbox) s = change_ok (ef, stopped->id, BOX_STATE_REQUEST_STOP);
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *want = NULL;
  g_autofree char *events = NULL;
  const gint64 snapshot_at = EF_T0 - 60 * G_USEC_PER_SEC;

  /* boxd died during a first boot */
  creating->state = BOX_SANDBOX_STATE_CREATING;
  g_assert_true (box_storage_sandbox_update (box_engine_get_storage (ef->engine), creating, &error));
  g_assert_no_error (error);

  ef_stop (ef);
  set_vm (ef, gone->id, NULL, 0);                      /* running, its VM gone */
  set_vm (ef, snap->id, "lost", snapshot_at);           /* running, died; a snapshot is left */
  set_vm (ef, disk->id, "shutoff", snapshot_at);        /* running, died; its disk is left */
  set_vm (ef, cold->id, "shutoff", 0);                  /* paused, but only its disk is left */
  set_vm (ef, stopped->id, "suspended", snapshot_at);   /* stopped: a snapshot is fine */
  ef_forget (ef);
  ef_advance (ef, 7);
  ef_start (ef);

  g_assert_cmpint (ef_state (ef, gone->id), ==, BOX_SANDBOX_STATE_ERROR);
  after = box_engine_get_sandbox (ef->engine, "p", snap->id, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_cmpint (after->snapshot_at, ==, snapshot_at);
  g_assert_cmpint (after->updated_at, ==, EF_T0 + 7 * G_USEC_PER_SEC);
  g_assert_cmpint (ef_state (ef, disk->id), ==, BOX_SANDBOX_STATE_STOPPED);
  g_assert_cmpint (ef_state (ef, cold->id), ==, BOX_SANDBOX_STATE_STOPPED);
  g_assert_cmpint (ef_state (ef, stopped->id), ==, BOX_SANDBOX_STATE_STOPPED);
  g_assert_cmpint (ef_state (ef, creating->id), ==, BOX_SANDBOX_STATE_ERROR);

  want = g_strdup_printf ("sandbox.error %s reconciled", gone->id);
  events = ef_take_events (ef);
  g_assert_nonnull (strstr (events, want));
  g_clear_pointer (&want, g_free);
  want = g_strdup_printf ("sandbox.stopped %s vm_lost", disk->id);
  g_assert_nonnull (strstr (events, want));
  g_clear_pointer (&want, g_free);
  want = g_strdup_printf ("sandbox.stopped %s vm_lost", cold->id);
  g_assert_nonnull (strstr (events, want));
  ef_forget (ef);

  /* the one left its disk boots on it */
  g_clear_pointer (&after, box_sandbox_free);
  after = change_ok (ef, disk->id, BOX_STATE_REQUEST_WAKE);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_RUNNING);

  /* the one with a snapshot wakes from it */
  g_clear_pointer (&after, box_sandbox_free);
  after = change_ok (ef, snap->id, BOX_STATE_REQUEST_WAKE);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_RUNNING);
}

/* The events of a restart, in record order: one per sandbox that changed. */
static void
test_restart_events (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) gone = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) snap = ef_create_ok (ef, "{}");
  g_autofree char *events = NULL;
  g_autofree char *want_gone = NULL;
  g_autofree char *want_snap = NULL;

  ef_stop (ef);
  set_vm (ef, gone->id, NULL, 0);
  set_vm (ef, snap->id, "lost", EF_T0);
  ef_forget (ef);
  ef_start (ef);
  events = ef_take_events (ef);
  want_gone = g_strdup_printf ("sandbox.error %s reconciled", gone->id);
  want_snap = g_strdup_printf ("sandbox.paused %s vm_lost", snap->id);
  g_assert_nonnull (strstr (events, want_gone));
  g_assert_nonnull (strstr (events, want_snap));
  g_assert_cmpuint (ef->interrupted->len, ==, 2);
}

/* Deadlines and the idle rule go on after a restart. */
static void
test_restart_timers (Ef *ef, gconstpointer user_data)
{
  g_autofree char *at = ef_future (ef, 5);
  g_autofree char *json = g_strdup_printf ("{\"deadline\": {\"at\": \"%s\", \"action\": \"delete\"}, "
                                           "\"idle\": {\"timeout_s\": 3600, \"action\": \"none\"}}", at);
  g_autoptr(BoxSandbox) dl = ef_create_ok (ef, json);
  g_autoptr(BoxSandbox) idle = ef_create_ok (ef, "{\"idle\": {\"timeout_s\": 30, \"action\": \"stop\"}}");

  ef_advance (ef, 2);
  ef_stop (ef);
  ef_advance (ef, 1);      /* boxd is down for a second */
  ef_start (ef);
  ef_advance (ef, 1);
  g_assert_cmpint (ef_state (ef, dl->id), ==, BOX_SANDBOX_STATE_RUNNING);
  ef_advance (ef, 1);
  g_assert_cmpint (ef_state (ef, dl->id), ==, -1);
  /* idleness counts from the restart: nothing is known of the time before */
  ef_advance (ef, 27);
  g_assert_cmpint (ef_state (ef, idle->id), ==, BOX_SANDBOX_STATE_RUNNING);
  ef_advance (ef, 1);
  g_assert_cmpint (ef_state (ef, idle->id), ==, BOX_SANDBOX_STATE_STOPPED);
}

static void
test_project_teardown (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) running = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) paused = ef_create_ok (ef, "{}");
  g_autoptr(BoxSandbox) prot = ef_create_ok (ef, "{\"protected\": true}");
  g_autoptr(BoxSandbox) pz = change_ok (ef, paused->id, BOX_STATE_REQUEST_PAUSE);
  g_autoptr(BoxSandbox) other = NULL;
  g_autoptr(BoxKey) key = NULL;
  g_autoptr(GPtrArray) keys = NULL;
  g_autoptr(BoxProject) project = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *secret = NULL;
  g_autofree char *rule = g_strdup_printf ("destroy fail sandbox=%s times=1", prot->id);
  g_autofree char *events = NULL;

  key = box_engine_create_key (ef->engine, "p", "ci", FALSE, &secret, &error);
  g_assert_no_error (error);
  ef_project (ef, "q");
  ef->project = "q";
  other = ef_create_ok (ef, "{}");
  ef->project = "p";

  /* a destroy that fails stops the teardown; the project stays */
  ef_script (ef, rule);
  g_assert_false (ef_delete_project (ef, "p", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);
  project = box_engine_get_project (ef->engine, "p", &error);
  g_assert_no_error (error);
  g_assert_cmpint (ef_state (ef, prot->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_clear_pointer (&project, box_project_free);

  ef_forget (ef);
  g_assert_true (ef_delete_project (ef, "p", &error));
  g_assert_no_error (error);
  events = ef_take_events (ef);
  for (guint i = 0; i < 3; i++) {
    BoxSandbox *sb = i == 0 ? running : i == 1 ? paused : prot;
    g_autofree char *want = g_strdup_printf ("sandbox.deleted %s", sb->id);

    /* deleted earlier or now, record and VM */
    g_assert_cmpint (ef_state (ef, sb->id), ==, -1);
    g_assert_cmpint (ef_vm_state (ef, sb->id), ==, BOX_VM_STATE_ABSENT);
    if (sb == prot)
      g_assert_nonnull (strstr (events, want));
  }
  project = box_engine_get_project (ef->engine, "p", &error);
  g_assert_null (project);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  keys = box_engine_list_keys (ef->engine, "p", &error);
  g_assert_null (keys);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  /* another project is untouched */
  g_assert_cmpint (ef_state (ef, other->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_cmpint (ef_vm_state (ef, other->id), ==, BOX_VM_STATE_RUNNING);
  g_assert_false (ef_delete_project (ef, "p", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);

  ADD ("/engine/reconcile/consistent", test_restart_consistent);
  ADD ("/engine/reconcile/lost", test_restart_lost);
  ADD ("/engine/reconcile/events", test_restart_events);
  ADD ("/engine/reconcile/timers", test_restart_timers);
  ADD ("/engine/reconcile/project-teardown", test_project_teardown);
  return g_test_run ();
}
