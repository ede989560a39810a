/* engine-checkpoints-test.c: the order of a checkpoint in the engine
 * (box-engine-checkpoints.c) on the dummy hypervisor: an accepted
 * checkpoint (the in-sandbox socket's 201) has its number but no record,
 * nothing is interrupted and nothing is snapshotted until the caller lets
 * it go; only memory checkpoints and restores end streams; a restore of a
 * stopped sandbox keeps a disk-only auto-N; numbers are never handed out
 * twice (deletes, restores, a restart); the newest 5 automatic ones are
 * kept, the older ones go with their hypervisor files; a restore that
 * fails after the old VM ended leaves the sandbox on its disk, and a
 * paused one whose VM died under a checkpoint is announced once; another project's
 * checkpoints are not found, and a fork that names what a checkpoint gives
 * is refused before anything exists; at start, a record without files goes
 * (checkpoint.deleted) and files without a record are deleted, and only a
 * sandbox whose checkpoint was cut midway gets its env pushed again.  The
 * request parsing (unknown fields) is tests/engine/requests-test.c; the
 * HTTP side tests/e2e/test_checkpoints.py. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "box-engine-ops-private.h"
#include "engine-fixture.h"

#define ADD(path, func) g_test_add (path, Ef, NULL, ef_set_up, func, ef_tear_down)

/* What the in-sandbox socket's caller gets: the checkpoint accepted, and
 * the task that lets it go. */
typedef struct {
  GTask         *go;
  BoxCheckpoint *accepted;
} Accepted;

static void
on_accepted (BoxEngine *engine, const BoxCheckpoint *checkpoint, GTask *go, gpointer user_data)
{
  Accepted *accepted = user_data;

  accepted->accepted = box_checkpoint_copy (checkpoint);
  accepted->go = go;
}

static BoxCheckpoint *
stored (Ef *ef, const char *sandbox_id, const char *id)
{
  return box_storage_checkpoint_get (box_engine_get_storage (ef->engine), sandbox_id, id, NULL);
}

/* The IDs of @id's checkpoints, oldest first, joined by " ". */
static char *
listed (Ef *ef, const char *id)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) all = box_engine_list_checkpoints (ef->engine, ef->project, id, &error);
  g_autoptr(GString) ids = g_string_new (NULL);

  g_assert_no_error (error);
  for (guint i = 0; i < all->len; i++) {
    const BoxCheckpoint *checkpoint = g_ptr_array_index (all, i);

    g_string_append_printf (ids, "%s%s", i > 0 ? " " : "", checkpoint->id);
  }
  return g_string_free (g_steal_pointer (&ids), FALSE);
}

/* How many times @needle stands in @haystack. */
static guint
count_of (const char *haystack, const char *needle)
{
  guint n = 0;

  for (const char *at = strstr (haystack, needle); at != NULL; at = strstr (at + 1, needle))
    n++;
  return n;
}

static int
compare_strings (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The checkpoints the hypervisor keeps for @sandbox_id, sorted, joined by " ". */
static char *
held (Ef *ef, const char *sandbox_id)
{
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) ids = box_hypervisor_list_checkpoints (ef->hv, sandbox_id, &error);

  g_assert_no_error (error);
  qsort (ids, g_strv_length (ids), sizeof (char *), compare_strings);
  return g_strjoinv (" ", ids);
}

static void
test_accepted_waits (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sandbox = ef_create_ok (ef, "{}");
  g_autoptr(BoxCheckpoint) made = NULL;
  g_autoptr(BoxCheckpoint) early = NULL;
  g_autoptr(BoxCheckpoint) late = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *expected = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  Accepted accepted = { 0 };
  EfWait taken = { 0 };

  ef_forget (ef);
  box_engine_create_checkpoint_async (ef->engine, NULL, sandbox->id, "inside", TRUE, on_accepted,
                                      &accepted, NULL, ef_wait_cb, &taken);
  ef_settle (ef);
  g_assert_nonnull (accepted.go);
  g_assert_cmpstr (accepted.accepted->id, ==, "v1");
  g_assert_cmpstr (accepted.accepted->comment, ==, "inside");
  g_assert_true (accepted.accepted->memory);
  /* accepted: numbered, but nothing written, ended or snapshotted yet */
  early = stored (ef, sandbox->id, "v1");
  g_assert_null (early);
  g_assert_false (taken.done);
  ef_assert_interrupted (ef, "");
  ef_assert_events (ef, "");

  g_task_return_boolean (accepted.go, TRUE);
  g_object_unref (accepted.go);
  result = ef_wait_result (ef, &taken);
  made = box_engine_create_checkpoint_finish (ef->engine, result, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (made->id, ==, "v1");
  late = stored (ef, sandbox->id, "v1");
  g_assert_nonnull (late);
  expected = g_strdup_printf ("%s checkpoint", sandbox->id);
  ef_assert_interrupted (ef, expected);
  g_clear_pointer (&expected, g_free);
  expected = g_strdup_printf ("checkpoint.created %s -", sandbox->id);
  ef_assert_events (ef, expected);
  box_checkpoint_free (accepted.accepted);
}

static void
test_interruptions (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sandbox = ef_create_ok (ef, "{}");
  g_autoptr(BoxCheckpoint) disk = NULL;
  g_autoptr(BoxCheckpoint) memory = NULL;
  g_autoptr(BoxSandbox) restored = NULL;
  g_autoptr(BoxSandbox) stopped = NULL;
  g_autoptr(BoxSandbox) again = NULL;
  g_autoptr(BoxCheckpoint) auto1 = NULL;
  g_autoptr(BoxCheckpoint) auto2 = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *expected = NULL;

  ef_forget (ef);
  disk = ef_checkpoint (ef, sandbox->id, FALSE, &error);
  g_assert_no_error (error);
  ef_assert_interrupted (ef, "");          /* disk only: nothing ends */
  memory = ef_checkpoint (ef, sandbox->id, TRUE, &error);
  g_assert_no_error (error);
  expected = g_strdup_printf ("%s checkpoint", sandbox->id);
  ef_assert_interrupted (ef, expected);
  g_clear_pointer (&expected, g_free);

  restored = ef_restore (ef, sandbox->id, "v1", &error);
  g_assert_no_error (error);
  g_assert_cmpint (restored->state, ==, BOX_SANDBOX_STATE_RUNNING);
  expected = g_strdup_printf ("%s restore", sandbox->id);
  ef_assert_interrupted (ef, expected);
  auto1 = stored (ef, sandbox->id, "auto-1");
  g_assert_true (auto1->auto_ && auto1->memory);

  /* a stopped sandbox has nothing in memory: its auto-N is its disk */
  stopped = ef_change (ef, sandbox->id, BOX_STATE_REQUEST_STOP, &error);
  g_assert_no_error (error);
  again = ef_restore (ef, sandbox->id, "v2", &error);
  g_assert_no_error (error);
  g_assert_cmpint (again->state, ==, BOX_SANDBOX_STATE_RUNNING);
  auto2 = stored (ef, sandbox->id, "auto-2");
  g_assert_true (auto2->auto_);
  g_assert_false (auto2->memory);
  g_assert_cmpint (ef_vm_state (ef, sandbox->id), ==, BOX_VM_STATE_RUNNING);
}

/* An ID is never handed out twice: not after deleting the newest, not
 * after a restore to a checkpoint older than the counter, not after a
 * restart; automatic IDs count on their own. */
static void
test_numbers_never_reused (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sandbox = ef_create_ok (ef, "{}");
  g_autoptr(GError) error = NULL;
  g_autofree char *ids = NULL;
  BoxCheckpoint *made;
  BoxSandbox *back;

  for (guint i = 0; i < 2; i++) {
    made = ef_checkpoint (ef, sandbox->id, TRUE, &error);
    g_assert_no_error (error);
    box_checkpoint_free (made);
  }
  g_assert_true (ef_delete_checkpoint (ef, sandbox->id, "v2", &error));
  g_assert_no_error (error);
  back = ef_restore (ef, sandbox->id, "v1", &error);
  g_assert_no_error (error);
  box_sandbox_free (back);
  made = ef_checkpoint (ef, sandbox->id, FALSE, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (made->id, ==, "v3");
  box_checkpoint_free (made);
  g_assert_true (ef_delete_checkpoint (ef, sandbox->id, "auto-1", &error));
  g_assert_no_error (error);
  back = ef_restore (ef, sandbox->id, "v3", &error);
  g_assert_no_error (error);
  box_sandbox_free (back);
  ids = listed (ef, sandbox->id);
  g_assert_cmpstr (ids, ==, "v1 v3 auto-2");
  g_clear_pointer (&ids, g_free);
  ids = held (ef, sandbox->id);
  g_assert_cmpstr (ids, ==, "auto-2 v1 v3");
  g_clear_pointer (&ids, g_free);

  /* the counters are in the sandbox's record: a restart keeps them */
  ef_stop (ef);
  ef_start (ef);
  g_assert_true (ef_delete_checkpoint (ef, sandbox->id, "v3", &error));
  g_assert_no_error (error);
  made = ef_checkpoint (ef, sandbox->id, TRUE, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (made->id, ==, "v4");
  box_checkpoint_free (made);
  back = ef_restore (ef, sandbox->id, "v1", &error);
  g_assert_no_error (error);
  box_sandbox_free (back);
  ids = listed (ef, sandbox->id);
  g_assert_cmpstr (ids, ==, "v1 auto-2 v4 auto-3");
}

/* Six restores keep the newest 5 automatic checkpoints; the oldest goes
 * from the records and from the hypervisor, announced deleted; the
 * client's own checkpoints are never pruned. */
static void
test_auto_retention (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sandbox = ef_create_ok (ef, "{}");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxCheckpoint) base = ef_checkpoint (ef, sandbox->id, TRUE, &error);
  g_autofree char *ids = NULL;
  g_autofree char *events = NULL;

  g_assert_no_error (error);
  for (guint i = 1; i <= 5; i++) {
    BoxSandbox *back = ef_restore (ef, sandbox->id, "v1", &error);

    g_assert_no_error (error);
    box_sandbox_free (back);
  }
  ids = listed (ef, sandbox->id);
  g_assert_cmpstr (ids, ==, "v1 auto-1 auto-2 auto-3 auto-4 auto-5");
  g_clear_pointer (&ids, g_free);
  ef_forget (ef);
  box_sandbox_free (ef_restore (ef, sandbox->id, "v1", &error));
  g_assert_no_error (error);
  ids = listed (ef, sandbox->id);
  g_assert_cmpstr (ids, ==, "v1 auto-2 auto-3 auto-4 auto-5 auto-6");
  g_clear_pointer (&ids, g_free);
  ids = held (ef, sandbox->id);
  g_assert_cmpstr (ids, ==, "auto-2 auto-3 auto-4 auto-5 auto-6 v1");
  /* one was pruned, and announced */
  events = ef_take_events (ef);
  g_assert_nonnull (strstr (events, "checkpoint.deleted"));
  g_assert_null (strstr (strstr (events, "checkpoint.deleted") + 1, "checkpoint.deleted"));
}

/* A restore that fails after it ended the old VM (the libvirt plugin's,
 * when the checkpoint's QEMU does not start) does not leave the record
 * running over a VM that is not: the sandbox goes back to its disk
 * (stopped, vm_lost), a wake boots it, and the next restore works. */
static void
test_restore_failed_after_vm_ended (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sandbox = ef_create_ok (ef, "{}");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxCheckpoint) base = ef_checkpoint (ef, sandbox->id, TRUE, &error);
  g_autoptr(BoxSandbox) back = NULL;
  g_autofree char *events = NULL;
  g_autofree char *stopped = g_strdup_printf ("sandbox.stopped %s vm_lost", sandbox->id);

  g_assert_no_error (error);
  ef_forget (ef);
  ef_script (ef, "restore end times=1");
  back = ef_restore (ef, sandbox->id, "v1", &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_null (back);
  g_clear_error (&error);
  g_assert_cmpint (ef_vm_state (ef, sandbox->id), ==, BOX_VM_STATE_SHUTOFF);
  g_assert_cmpint (ef_state (ef, sandbox->id), ==, BOX_SANDBOX_STATE_STOPPED);
  events = ef_take_events (ef);
  g_assert_nonnull (strstr (events, stopped));
  g_assert_cmpuint (count_of (events, "sandbox.stopped"), ==, 1);
  g_assert_null (strstr (events, "checkpoint.restored"));
  ef_change_ok (ef, sandbox->id, BOX_STATE_REQUEST_WAKE);
  g_assert_cmpint (ef_state (ef, sandbox->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_cmpint (ef_vm_state (ef, sandbox->id), ==, BOX_VM_STATE_RUNNING);
  back = ef_restore (ef, sandbox->id, "v1", &error);
  g_assert_no_error (error);
  g_assert_cmpint (back->state, ==, BOX_SANDBOX_STATE_RUNNING);
}

/* A paused sandbox whose VM dies under a checkpoint keeps its memory
 * snapshot (the dummy: LOST with it): still paused, and announced once
 * (by the hypervisor's ::vm-lost), not again by the failed op; a later
 * failed op announces nothing. */
static void
test_paused_lost_once (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sandbox = ef_create_ok (ef, "{}");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxCheckpoint) made = NULL;
  g_autofree char *events = NULL;
  g_autofree char *paused = g_strdup_printf ("sandbox.paused %s vm_lost", sandbox->id);

  ef_change_ok (ef, sandbox->id, BOX_STATE_REQUEST_PAUSE);
  ef_forget (ef);
  ef_script (ef, "checkpoint lose times=1");
  made = ef_checkpoint (ef, sandbox->id, TRUE, &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_null (made);
  g_clear_error (&error);
  ef_settle (ef);
  g_assert_cmpint (ef_state (ef, sandbox->id), ==, BOX_SANDBOX_STATE_PAUSED);
  events = ef_take_events (ef);
  g_assert_nonnull (strstr (events, paused));
  g_assert_cmpuint (count_of (events, "sandbox.paused"), ==, 1);
  ef_script (ef, "checkpoint fail times=1");
  made = ef_checkpoint (ef, sandbox->id, TRUE, &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  ef_settle (ef);
  g_clear_pointer (&events, g_free);
  events = ef_take_events (ef);
  g_assert_null (strstr (events, "sandbox.paused"));
}

/* Another project's sandbox and checkpoints are not found by any
 * operation, and nothing of them changes; a missing checkpoint of one's
 * own is not found either. */
static void
test_other_project (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sandbox = ef_create_ok (ef, "{\"name\": \"mine\"}");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxCheckpoint) base = ef_checkpoint (ef, sandbox->id, TRUE, &error);
  g_autoptr(GPtrArray) list = NULL;
  g_autofree char *body = NULL;
  g_autofree char *ids = NULL;

  g_assert_no_error (error);
  ef_project (ef, "q");
  ef_forget (ef);
  for (guint i = 0; i < 2; i++) {
    const char *by = i == 0 ? sandbox->id : "mine";

    list = box_engine_list_checkpoints (ef->engine, "q", by, &error);
    g_assert_null (list);
    g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
    g_clear_error (&error);
    g_assert_null (box_engine_get_checkpoint (ef->engine, "q", by, "v1", &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
    g_clear_error (&error);
    /* every operation, a fork of it too, as project q */
    ef->project = "q";
    g_assert_false (ef_delete_checkpoint (ef, by, "v1", &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
    g_clear_error (&error);
    g_assert_null (ef_restore (ef, by, "v1", &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
    g_clear_error (&error);
    g_assert_null (ef_checkpoint (ef, by, TRUE, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
    g_clear_error (&error);
    body = g_strdup_printf ("{\"from\": {\"sandbox\": \"%s\", \"checkpoint\": \"v1\"}}", by);
    g_assert_null (ef_create (ef, body, &error));
    ef->project = "p";
    g_clear_pointer (&body, g_free);
    g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
    g_clear_error (&error);
  }
  /* one's own missing checkpoint */
  g_assert_null (ef_restore (ef, sandbox->id, "v9", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (ef_delete_checkpoint (ef, sandbox->id, "v9", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  ef_assert_events (ef, "");
  ef_assert_interrupted (ef, "");
  ids = listed (ef, sandbox->id);
  g_assert_cmpstr (ids, ==, "v1");
  g_assert_cmpint (ef_state (ef, sandbox->id), ==, BOX_SANDBOX_STATE_RUNNING);
}

static void
offer_base_only (BoxConfig *config)
{
  g_key_file_set_string (config->keyfile, "plugin.dummy", "templates", "base");
}

/* A fork does not need its template in the deployment's catalogue: the
 * checkpoint holds what it needs.  A sandbox of "e2b" is checkpointed,
 * boxd restarts offering only "base" (a create from "e2b" is now 400),
 * and a fork of the checkpoint is made, of "e2b" with the source's sizes. */
static void
test_fork_template_gone (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) source = ef_create_ok (ef, "{\"name\": \"src\", \"template\": \"e2b\"}");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxCheckpoint) base = ef_checkpoint (ef, source->id, TRUE, &error);
  g_autoptr(BoxSandbox) refused = NULL;
  g_autoptr(BoxSandbox) fork = NULL;

  g_assert_no_error (error);
  ef_stop (ef);
  ef->configure = offer_base_only;
  ef_start (ef);
  refused = ef_create (ef, "{\"template\": \"e2b\"}", &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_null (refused);
  g_clear_error (&error);
  fork = ef_create (ef, "{\"name\": \"fk\", \"from\": {\"sandbox\": \"src\", \"checkpoint\": \"v1\"}}",
                    &error);
  g_assert_no_error (error);
  g_assert_cmpstr (fork->template_name, ==, "e2b");
  g_assert_cmpuint (fork->resources.memory_mib, ==, source->resources.memory_mib);
  g_assert_cmpint (ef_state (ef, fork->id), ==, BOX_SANDBOX_STATE_RUNNING);
}

/* A fork takes template, image and resources from the checkpoint: naming
 * any of them, or a field `from` does not have, is 400 and creates
 * nothing; a valid fork gets the source's resources. */
static void
test_fork_rules (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) source = ef_create_ok (ef, "{\"name\": \"src\", \"resources\": "
                                                   "{\"cpus\": 1, \"memory_mib\": 512, \"disk_gib\": 3}}");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxCheckpoint) base = ef_checkpoint (ef, source->id, TRUE, &error);
  g_autoptr(BoxSandbox) fork = NULL;
  g_autoptr(GPtrArray) all = NULL;
  static const char *const refused[] = {
    "\"template\": \"base\"",
    "\"image\": \"r.example/x@sha256:0000000000000000000000000000000000000000000000000000000000000000\"",
    "\"resources\": {\"cpus\": 1}",
  };

  g_assert_no_error (error);
  ef_forget (ef);
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++) {
    g_autofree char *body = g_strdup_printf ("{\"from\": {\"sandbox\": \"src\", \"checkpoint\": "
                                             "\"v1\"}, %s}", refused[i]);

    g_assert_null (ef_create (ef, body, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    g_assert_nonnull (strstr (error->message, "come from the checkpoint"));
    g_clear_error (&error);
  }
  g_assert_null (ef_create (ef, "{\"from\": {\"sandbox\": \"src\", \"checkpoint\": \"v1\", "
                                "\"memory\": true}}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  ef_assert_events (ef, "");
  all = box_engine_list_sandboxes (ef->engine, "p", NULL, NULL, &error);
  g_assert_cmpuint (all->len, ==, 1);

  fork = ef_create (ef, "{\"name\": \"fk\", \"from\": {\"sandbox\": \"src\", \"checkpoint\": \"v1\"}}",
                    &error);
  g_assert_no_error (error);
  g_assert_cmpuint (fork->resources.cpus, ==, 1);
  g_assert_cmpuint (fork->resources.memory_mib, ==, 512);
  g_assert_cmpuint (fork->resources.disk_gib, ==, 3);
  g_assert_cmpint (fork->state, ==, BOX_SANDBOX_STATE_RUNNING);
}

static void
vm_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_assert_true (box_hypervisor_run_finish (BOX_HYPERVISOR (source), result, NULL));
  *(gboolean *) user_data = TRUE;
}

/* Files deleted by hand (the hypervisor forgets v2) and a record lost
 * (v1's): the restart removes v2's record with checkpoint.deleted and
 * deletes v1's files; v3, whole on both sides, stays. */
static void
test_reconcile_both_ways (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sandbox = ef_create_ok (ef, "{}");
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) left = NULL;
  g_autofree char *before = NULL;
  g_autofree char *after = NULL;
  g_autofree char *expected = NULL;
  BoxVmRequest vm = { .sandbox_id = sandbox->id, .checkpoint_id = "v2" };
  gboolean done = FALSE;

  for (guint i = 0; i < 3; i++) {
    g_autoptr(BoxCheckpoint) made = ef_checkpoint (ef, sandbox->id, FALSE, &error);
    g_assert_no_error (error);
  }
  before = held (ef, sandbox->id);
  g_assert_cmpstr (before, ==, "v1 v2 v3");
  box_hypervisor_run_async (ef->hv, BOX_VM_OP_DELETE_CHECKPOINT, &vm, NULL, vm_done, &done);
  ef_wait (ef, &done);
  g_assert_true (box_storage_checkpoint_delete (box_engine_get_storage (ef->engine), sandbox->id,
                                                "v1", &error));
  g_assert_no_error (error);
  ef_stop (ef);
  ef_forget (ef);
  ef_start (ef);
  ef_settle (ef);

  left = box_storage_checkpoint_list (box_engine_get_storage (ef->engine), sandbox->id, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (left->len, ==, 1);
  g_assert_cmpstr (((BoxCheckpoint *) g_ptr_array_index (left, 0))->id, ==, "v3");
  after = held (ef, sandbox->id);
  g_assert_cmpstr (after, ==, "v3");
  expected = g_strdup_printf ("checkpoint.deleted %s -", sandbox->id);
  ef_assert_events (ef, expected);
  /* the next checkpoint still takes a new number */
  {
    g_autoptr(BoxCheckpoint) next = ef_checkpoint (ef, sandbox->id, FALSE, &error);
    g_assert_no_error (error);
    g_assert_cmpstr (next->id, ==, "v4");
  }
}

/* Nothing written to @fake for about @ms. */
static void
assert_nothing_sent (Ef *ef, FakeAgent *fake, guint ms)
{
  gint64 until = g_get_monotonic_time () + ms * 1000;

  ef_settle (ef);
  while (g_get_monotonic_time () < until)
    g_assert_false (fake_agent_poll (fake));
}

static void
insert_pending (Ef *ef, const char *sandbox_id, const char *checkpoint)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *id = g_strdup_printf ("%s/%s", sandbox_id, checkpoint);
  g_autoptr(BoxStorageRecord) record = box_storage_record_new ("checkpoint-pending", sandbox_id,
                                                               id, "{}");

  g_assert_true (box_storage_insert (box_engine_get_storage (ef->engine), record, &error));
  g_assert_no_error (error);
}

static gboolean
pending_left (Ef *ef, const char *sandbox_id, const char *checkpoint)
{
  g_autofree char *id = g_strdup_printf ("%s/%s", sandbox_id, checkpoint);
  g_autoptr(BoxStorageRecord) record = box_storage_get (box_engine_get_storage (ef->engine),
                                                        "checkpoint-pending", sandbox_id,
                                                        BOX_STORAGE_BY_ID, id, NULL);

  return record != NULL;
}

/* A guest forgets its env before a memory snapshot and gets it back once
 * the hypervisor's CHECKPOINT is done: at start, the sandbox whose
 * checkpoint was cut midway (a pending record, no checkpoint record) gets
 * its env pushed again; one whose pending record names a finished
 * checkpoint, and one without any, get no agent call at all.  The start's
 * reconciliation is called as box_engine_reconcile() calls it, with the
 * fake agents in place (a restart would load a dummy without them). */
static void
test_env_after_cut (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) cut = ef_create_ok (ef, "{\"env\": {\"E\": \"cut\"}}");
  g_autoptr(BoxSandbox) done = ef_create_ok (ef, "{\"env\": {\"E\": \"done\"}}");
  g_autoptr(BoxSandbox) quiet = ef_create_ok (ef, "{\"env\": {\"E\": \"quiet\"}}");
  g_autoptr(BoxCheckpoint) made = NULL;
  g_autoptr(BoxCheckpoint) kept = NULL;
  g_autoptr(JsonObject) request = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *reply = NULL;
  FakeAgent *to_cut, *to_done, *to_quiet;
  JsonObject *env;
  gint64 id = 0;

  to_cut = ef_fake_agent (ef, cut->id, NULL);
  to_done = ef_fake_agent (ef, done->id, NULL);
  to_quiet = ef_fake_agent (ef, quiet->id, NULL);
  /* done's v1 was made and recorded; only its pending record was left */
  made = ef_checkpoint (ef, done->id, FALSE, &error);
  g_assert_no_error (error);
  insert_pending (ef, done->id, made->id);
  insert_pending (ef, cut->id, "v1");

  box_engine_reconcile_checkpoints (ef->engine);
  request = fake_agent_read_request (to_cut);
  g_assert_cmpstr (box_agent_json_get_string (request, "op"), ==, "set-env");
  env = json_object_get_object_member (request, "env");
  g_assert_nonnull (env);
  g_assert_cmpuint (json_object_get_size (env), ==, 1);
  g_assert_cmpstr (json_object_get_string_member (env, "E"), ==, "cut");
  g_assert_true (box_agent_json_get_int (request, "id", &id));
  reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true}", id);
  fake_agent_send_json (to_cut, 0, reply);
  assert_nothing_sent (ef, to_done, 200);
  assert_nothing_sent (ef, to_quiet, 100);
  assert_nothing_sent (ef, to_cut, 100);
  g_assert_false (pending_left (ef, cut->id, "v1"));
  g_assert_false (pending_left (ef, done->id, made->id));
  kept = stored (ef, done->id, made->id);
  g_assert_nonnull (kept);
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);
  ADD ("/checkpoints/accepted-waits", test_accepted_waits);
  ADD ("/checkpoints/interruptions", test_interruptions);
  ADD ("/checkpoints/numbers-never-reused", test_numbers_never_reused);
  ADD ("/checkpoints/auto-retention", test_auto_retention);
  ADD ("/checkpoints/restore-failed-after-vm-ended", test_restore_failed_after_vm_ended);
  ADD ("/checkpoints/paused-lost-once", test_paused_lost_once);
  ADD ("/checkpoints/other-project", test_other_project);
  ADD ("/checkpoints/fork-rules", test_fork_rules);
  ADD ("/checkpoints/fork-template-gone", test_fork_template_gone);
  ADD ("/checkpoints/reconcile-both-ways", test_reconcile_both_ways);
  g_test_add ("/checkpoints/env-after-cut", Ef, "guest-agent,memory-snapshots,checkpoints",
              ef_set_up, test_env_after_cut, ef_tear_down);
  return g_test_run ();
}
