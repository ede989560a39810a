/* engine-checkpoints-test.c: the order of a checkpoint in the engine
 * (box-engine-checkpoints.c) on the dummy hypervisor: an accepted
 * checkpoint (the in-sandbox socket's 201) has its number but no record,
 * nothing is interrupted and nothing is snapshotted until the caller lets
 * it go; only memory checkpoints and restores end streams; a restore of a
 * stopped sandbox keeps a disk-only auto-N; at start, a record without
 * files goes (checkpoint.deleted) and files without a record are deleted.
 * The HTTP side is tests/e2e/test_checkpoints.py. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine-fixture.h"

#define ADD(path, func) g_test_add (path, Ef, NULL, ef_set_up, func, ef_tear_down)

typedef struct {
  gboolean       done;
  GAsyncResult  *result;
  GTask         *go;
  BoxCheckpoint *accepted;
} Taken;

static void
taken_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Taken *taken = user_data;

  taken->result = g_object_ref (result);
  taken->done = TRUE;
}

static void
on_accepted (BoxEngine *engine, const BoxCheckpoint *checkpoint, GTask *go, gpointer user_data)
{
  Taken *taken = user_data;

  taken->accepted = box_checkpoint_copy (checkpoint);
  taken->go = go;
}

static BoxCheckpoint *
take (Ef *ef, const char *id, gboolean memory, GError **error)
{
  Taken taken = { 0 };
  BoxCheckpoint *checkpoint;

  box_engine_create_checkpoint_async (ef->engine, ef->project, id, NULL, memory, NULL, NULL, NULL,
                                      taken_cb, &taken);
  ef_wait (ef, &taken.done);
  checkpoint = box_engine_create_checkpoint_finish (ef->engine, taken.result, error);
  g_object_unref (taken.result);
  return checkpoint;
}

static BoxCheckpoint *
stored (Ef *ef, const char *sandbox_id, const char *id)
{
  return box_storage_checkpoint_get (box_engine_get_storage (ef->engine), sandbox_id, id, NULL);
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
  Taken taken = { 0 };

  ef_forget (ef);
  box_engine_create_checkpoint_async (ef->engine, NULL, sandbox->id, "inside", TRUE, on_accepted,
                                      &taken, NULL, taken_cb, &taken);
  ef_settle (ef);
  g_assert_nonnull (taken.go);
  g_assert_cmpstr (taken.accepted->id, ==, "v1");
  g_assert_cmpstr (taken.accepted->comment, ==, "inside");
  g_assert_true (taken.accepted->memory);
  /* accepted: numbered, but nothing written, ended or snapshotted yet */
  early = stored (ef, sandbox->id, "v1");
  g_assert_null (early);
  g_assert_false (taken.done);
  ef_assert_interrupted (ef, "");
  ef_assert_events (ef, "");

  g_task_return_boolean (taken.go, TRUE);
  g_object_unref (taken.go);
  ef_wait (ef, &taken.done);
  made = box_engine_create_checkpoint_finish (ef->engine, taken.result, &error);
  g_object_unref (taken.result);
  g_assert_no_error (error);
  g_assert_cmpstr (made->id, ==, "v1");
  late = stored (ef, sandbox->id, "v1");
  g_assert_nonnull (late);
  expected = g_strdup_printf ("%s checkpoint", sandbox->id);
  ef_assert_interrupted (ef, expected);
  g_clear_pointer (&expected, g_free);
  expected = g_strdup_printf ("checkpoint.created %s -", sandbox->id);
  ef_assert_events (ef, expected);
  box_checkpoint_free (taken.accepted);
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
  Taken taken = { 0 };

  ef_forget (ef);
  disk = take (ef, sandbox->id, FALSE, &error);
  g_assert_no_error (error);
  ef_assert_interrupted (ef, "");          /* disk only: nothing ends */
  memory = take (ef, sandbox->id, TRUE, &error);
  g_assert_no_error (error);
  expected = g_strdup_printf ("%s checkpoint", sandbox->id);
  ef_assert_interrupted (ef, expected);
  g_clear_pointer (&expected, g_free);

  box_engine_restore_checkpoint_async (ef->engine, ef->project, sandbox->id, "v1", NULL, taken_cb,
                                       &taken);
  ef_wait (ef, &taken.done);
  restored = box_engine_restore_checkpoint_finish (ef->engine, taken.result, &error);
  g_clear_object (&taken.result);
  g_assert_no_error (error);
  g_assert_cmpint (restored->state, ==, BOX_SANDBOX_STATE_RUNNING);
  expected = g_strdup_printf ("%s restore", sandbox->id);
  ef_assert_interrupted (ef, expected);
  auto1 = stored (ef, sandbox->id, "auto-1");
  g_assert_true (auto1->auto_ && auto1->memory);

  /* a stopped sandbox has nothing in memory: its auto-N is its disk */
  stopped = ef_change (ef, sandbox->id, BOX_STATE_REQUEST_STOP, &error);
  g_assert_no_error (error);
  taken.done = FALSE;
  box_engine_restore_checkpoint_async (ef->engine, ef->project, sandbox->id, "v2", NULL, taken_cb,
                                       &taken);
  ef_wait (ef, &taken.done);
  again = box_engine_restore_checkpoint_finish (ef->engine, taken.result, &error);
  g_clear_object (&taken.result);
  g_assert_no_error (error);
  g_assert_cmpint (again->state, ==, BOX_SANDBOX_STATE_RUNNING);
  auto2 = stored (ef, sandbox->id, "auto-2");
  g_assert_true (auto2->auto_);
  g_assert_false (auto2->memory);
  g_assert_cmpint (ef_vm_state (ef, sandbox->id), ==, BOX_VM_STATE_RUNNING);
}

static void
vm_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_assert_true (box_hypervisor_run_finish (BOX_HYPERVISOR (source), result, NULL));
  *(gboolean *) user_data = TRUE;
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
    g_autoptr(BoxCheckpoint) made = take (ef, sandbox->id, FALSE, &error);
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
    g_autoptr(BoxCheckpoint) next = take (ef, sandbox->id, FALSE, &error);
    g_assert_no_error (error);
    g_assert_cmpstr (next->id, ==, "v4");
  }
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);
  ADD ("/checkpoints/accepted-waits", test_accepted_waits);
  ADD ("/checkpoints/interruptions", test_interruptions);
  ADD ("/checkpoints/reconcile-both-ways", test_reconcile_both_ways);
  return g_test_run ();
}
