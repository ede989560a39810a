/* dummy-test.c: the `dummy` hypervisor's state machine, persistence,
 * capacity and fault injection. */
#include "config.h"

#include <glib/gstdio.h>
#include <sys/stat.h>

#include "box-agent-client.h"
#include "box-dummy-plugin.h"
#include "box-engine.h"

typedef struct {
  char          *data_dir;
  BoxEngine     *engine;
  BoxHypervisor *hv;
} Fixture;

static void
remove_tree (const char *path)
{
  g_autoptr(GDir) dir = NULL;
  const char *entry;

  if (!g_file_test (path, G_FILE_TEST_IS_DIR)) {
    g_unlink (path);
    return;
  }
  dir = g_dir_open (path, 0, NULL);
  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *child = g_build_filename (path, entry, NULL);
    remove_tree (child);
  }
  g_rmdir (path);
}

static BoxHypervisor *
new_plugin (Fixture *fixture)
{
  g_autoptr(BoxPluginContext) context = box_engine_new_plugin_context (fixture->engine, "dummy");

  return g_object_new (BOX_TYPE_DUMMY_PLUGIN, "name", "dummy", "context", context, NULL);
}

static void
set_config (Fixture *fixture, const char *key, const char *value)
{
  BoxConfig *config = box_engine_get_config (fixture->engine);

  g_key_file_set_string (config->keyfile, "plugin.dummy", key, value);
}

static void
fixture_set_up (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  BoxConfig *config = box_config_new ();

  fixture->data_dir = g_dir_make_tmp ("box-dummy-test-XXXXXX", &error);
  g_assert_no_error (error);
  g_free (config->data_dir);
  config->data_dir = g_strdup (fixture->data_dir);
  fixture->engine = box_engine_new (config);
  fixture->hv = new_plugin (fixture);
}

static void
fixture_tear_down (Fixture *fixture, gconstpointer user_data)
{
  g_clear_object (&fixture->hv);
  g_clear_object (&fixture->engine);
  remove_tree (fixture->data_dir);
  g_free (fixture->data_dir);
}

/* ---- running operations ---- */

typedef struct {
  gboolean      done;
  GAsyncResult *result;
} Wait;

static void
run_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Wait *wait = user_data;

  wait->done = TRUE;
  wait->result = g_object_ref (result);
}

/* Runs @op and waits for it; FALSE with @error when it failed. */
static gboolean
run_full (BoxHypervisor *hv, BoxVmOp op, const BoxVmRequest *request, GError **error)
{
  Wait wait = { FALSE, NULL };
  gboolean ok;

  box_hypervisor_run_async (hv, op, request, NULL, run_cb, &wait);
  /* never completes inside the call */
  g_assert_false (wait.done);
  while (!wait.done)
    g_main_context_iteration (NULL, TRUE);
  ok = box_hypervisor_run_finish (hv, wait.result, error);
  g_object_unref (wait.result);
  return ok;
}

static gboolean
run (BoxHypervisor *hv, BoxVmOp op, const char *sandbox_id, const char *checkpoint_id,
     GError **error)
{
  BoxVmRequest request = {
    .sandbox_id = sandbox_id,
    .hostname = "test",
    .template_name = "base",
    .image = "",
    .resources = { 2, 2048, 20 },
    .checkpoint_id = checkpoint_id,
    .memory = TRUE,
  };

  return run_full (hv, op, &request, error);
}

static void
run_ok (BoxHypervisor *hv, BoxVmOp op, const char *sandbox_id, const char *checkpoint_id)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (run (hv, op, sandbox_id, checkpoint_id, &error));
  g_assert_no_error (error);
}

static void
run_fails (BoxHypervisor *hv, BoxVmOp op, const char *sandbox_id, const char *checkpoint_id,
           gint code)
{
  g_autoptr(GError) error = NULL;

  g_assert_false (run (hv, op, sandbox_id, checkpoint_id, &error));
  g_assert_error (error, BOX_ERROR, code);
}

static BoxVmState
query (BoxHypervisor *hv, const char *sandbox_id, gint64 *snapshot_at)
{
  return box_hypervisor_query (hv, sandbox_id, snapshot_at);
}

/* ---- tests ---- */

static void
test_dummy_basics (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GPtrArray) templates = box_hypervisor_list_templates (fixture->hv);
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) status = NULL;
  g_auto(GVariantBuilder) builder = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  const char *accel = NULL;
  BoxTemplate *tmpl;

  g_assert_true (BOX_IS_PLUGIN (fixture->hv));
  g_assert_cmpstr (box_plugin_get_name (BOX_PLUGIN (fixture->hv)), ==, "dummy");
  g_assert_true (box_plugin_start (BOX_PLUGIN (fixture->hv), NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (box_hypervisor_get_accel (fixture->hv), ==, "none");

  g_assert_cmpuint (templates->len, ==, 2);
  tmpl = g_ptr_array_index (templates, 0);
  g_assert_cmpstr (tmpl->name, ==, "base");
  g_assert_cmpstr (tmpl->image, ==, "");
  g_assert_cmpuint (tmpl->resources.cpus, ==, 2);
  g_assert_cmpuint (tmpl->resources.memory_mib, ==, 2048);
  g_assert_cmpuint (tmpl->resources.disk_gib, ==, 20);
  tmpl = g_ptr_array_index (templates, 1);
  g_assert_cmpstr (tmpl->name, ==, "e2b");
  g_assert_cmpuint (tmpl->resources.cpus, ==, 2);
  g_assert_cmpuint (tmpl->resources.memory_mib, ==, 1024);
  g_assert_cmpuint (tmpl->resources.disk_gib, ==, 20);

  g_assert_null (box_hypervisor_get_agent (fixture->hv, "sb-a", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_assert_cmpstr (error->message, ==, "the dummy hypervisor runs no VM");

  box_plugin_add_status (BOX_PLUGIN (fixture->hv), &builder);
  status = g_variant_ref_sink (g_variant_builder_end (&builder));
  g_assert_true (g_variant_lookup (status, "accel", "&s", &accel));
  g_assert_cmpstr (accel, ==, "none");

  g_assert_cmpint (query (fixture->hv, "sb-nothing", NULL), ==, BOX_VM_STATE_ABSENT);
  box_plugin_stop (BOX_PLUGIN (fixture->hv));
}

static void
test_dummy_transitions (Fixture *fixture, gconstpointer user_data)
{
  BoxHypervisor *hv = fixture->hv;
  gint64 snapshot_at = -1;
  gint64 before = g_get_real_time ();

  run_ok (hv, BOX_VM_OP_CREATE, "sb-a", NULL);
  g_assert_cmpint (query (hv, "sb-a", &snapshot_at), ==, BOX_VM_STATE_RUNNING);
  g_assert_cmpint (snapshot_at, ==, 0);
  run_fails (hv, BOX_VM_OP_CREATE, "sb-a", NULL, BOX_ERROR_ALREADY_EXISTS);

  run_ok (hv, BOX_VM_OP_SUSPEND, "sb-a", NULL);
  g_assert_cmpint (query (hv, "sb-a", &snapshot_at), ==, BOX_VM_STATE_SUSPENDED);
  g_assert_cmpint (snapshot_at, >=, before);
  run_ok (hv, BOX_VM_OP_SUSPEND, "sb-a", NULL);   /* already */

  run_ok (hv, BOX_VM_OP_RESUME, "sb-a", NULL);
  g_assert_cmpint (query (hv, "sb-a", NULL), ==, BOX_VM_STATE_RUNNING);
  run_ok (hv, BOX_VM_OP_RESUME, "sb-a", NULL);    /* already */

  run_ok (hv, BOX_VM_OP_SHUTDOWN, "sb-a", NULL);
  g_assert_cmpint (query (hv, "sb-a", &snapshot_at), ==, BOX_VM_STATE_SHUTOFF);
  g_assert_cmpint (snapshot_at, ==, 0);
  run_fails (hv, BOX_VM_OP_SUSPEND, "sb-a", NULL, BOX_ERROR_CONFLICT);
  run_fails (hv, BOX_VM_OP_RESUME, "sb-a", NULL, BOX_ERROR_CONFLICT);
  /* a memory checkpoint needs memory */
  run_fails (hv, BOX_VM_OP_CHECKPOINT, "sb-a", "v0", BOX_ERROR_CONFLICT);

  run_ok (hv, BOX_VM_OP_BOOT, "sb-a", NULL);
  g_assert_cmpint (query (hv, "sb-a", NULL), ==, BOX_VM_STATE_RUNNING);

  run_ok (hv, BOX_VM_OP_CHECKPOINT, "sb-a", "v1");
  run_fails (hv, BOX_VM_OP_CHECKPOINT, "sb-a", "v1", BOX_ERROR_ALREADY_EXISTS);
  run_fails (hv, BOX_VM_OP_CHECKPOINT, "sb-a", NULL, BOX_ERROR_INVALID);
  run_ok (hv, BOX_VM_OP_SHUTDOWN, "sb-a", NULL);
  run_ok (hv, BOX_VM_OP_RESTORE, "sb-a", "v1");
  g_assert_cmpint (query (hv, "sb-a", NULL), ==, BOX_VM_STATE_RUNNING);
  run_fails (hv, BOX_VM_OP_RESTORE, "sb-a", "v9", BOX_ERROR_NOT_FOUND);

  run_ok (hv, BOX_VM_OP_DELETE_CHECKPOINT, "sb-a", "v1");
  run_ok (hv, BOX_VM_OP_DELETE_CHECKPOINT, "sb-a", "v1");   /* idempotent */
  run_fails (hv, BOX_VM_OP_RESTORE, "sb-a", "v1", BOX_ERROR_NOT_FOUND);

  run_ok (hv, BOX_VM_OP_DESTROY, "sb-a", NULL);
  g_assert_cmpint (query (hv, "sb-a", &snapshot_at), ==, BOX_VM_STATE_ABSENT);
  g_assert_cmpint (snapshot_at, ==, 0);
  run_ok (hv, BOX_VM_OP_DESTROY, "sb-a", NULL);              /* idempotent */
  run_ok (hv, BOX_VM_OP_DELETE_CHECKPOINT, "sb-a", "v1");

  /* nothing there */
  run_fails (hv, BOX_VM_OP_RESUME, "sb-a", NULL, BOX_ERROR_NOT_FOUND);
  run_fails (hv, BOX_VM_OP_BOOT, "sb-a", NULL, BOX_ERROR_NOT_FOUND);
  run_fails (hv, BOX_VM_OP_SUSPEND, "sb-a", NULL, BOX_ERROR_NOT_FOUND);
  run_fails (hv, BOX_VM_OP_SHUTDOWN, "sb-a", NULL, BOX_ERROR_NOT_FOUND);
  run_fails (hv, BOX_VM_OP_CHECKPOINT, "sb-a", "v1", BOX_ERROR_NOT_FOUND);
  run_fails (hv, BOX_VM_OP_RESTORE, "sb-a", "v1", BOX_ERROR_NOT_FOUND);

  /* IDs become file names */
  run_fails (hv, BOX_VM_OP_CREATE, "../escape", NULL, BOX_ERROR_INVALID);
  run_fails (hv, BOX_VM_OP_CREATE, "", NULL, BOX_ERROR_INVALID);
}

static void
test_dummy_fork (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  BoxVmRequest request = {
    .sandbox_id = "sb-fork",
    .resources = { 1, 512, 10 },
    .from_sandbox_id = "sb-source",
    .from_checkpoint_id = "v1",
  };

  g_assert_false (run_full (fixture->hv, BOX_VM_OP_CREATE, &request, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-source", NULL);
  g_assert_false (run_full (fixture->hv, BOX_VM_OP_CREATE, &request, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  run_ok (fixture->hv, BOX_VM_OP_CHECKPOINT, "sb-source", "v1");
  g_assert_true (run_full (fixture->hv, BOX_VM_OP_CREATE, &request, &error));
  g_assert_no_error (error);
  g_assert_cmpint (query (fixture->hv, "sb-fork", NULL), ==, BOX_VM_STATE_RUNNING);
  g_assert_cmpint (query (fixture->hv, "sb-source", NULL), ==, BOX_VM_STATE_RUNNING);
}

static void
test_dummy_restart (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *state_dir = g_build_filename (fixture->data_dir, "dummy", NULL);
  g_autofree char *state_file = g_build_filename (state_dir, "sb-b.json", NULL);
  struct stat st;
  gint64 snapshot_b = 0;
  gint64 snapshot_after = 0;

  set_config (fixture, "max_cpus", "6");
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-a", NULL);
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-b", NULL);
  run_ok (fixture->hv, BOX_VM_OP_SUSPEND, "sb-b", NULL);
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-c", NULL);
  run_ok (fixture->hv, BOX_VM_OP_CHECKPOINT, "sb-c", "v1");
  run_ok (fixture->hv, BOX_VM_OP_SHUTDOWN, "sb-c", NULL);
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-d", NULL);
  run_ok (fixture->hv, BOX_VM_OP_DESTROY, "sb-d", NULL);
  g_assert_cmpint (query (fixture->hv, "sb-b", &snapshot_b), ==, BOX_VM_STATE_SUSPENDED);

  /* private state */
  g_assert_cmpint (g_stat (state_dir, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);
  g_assert_cmpint (g_stat (state_file, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);

  /* boxd restarts: a new instance knows what is there */
  g_clear_object (&fixture->hv);
  fixture->hv = new_plugin (fixture);
  g_assert_true (box_plugin_start (BOX_PLUGIN (fixture->hv), NULL, &error));
  g_assert_no_error (error);

  g_assert_cmpint (query (fixture->hv, "sb-a", NULL), ==, BOX_VM_STATE_RUNNING);
  g_assert_cmpint (query (fixture->hv, "sb-b", &snapshot_after), ==, BOX_VM_STATE_SUSPENDED);
  g_assert_cmpint (snapshot_after, ==, snapshot_b);
  g_assert_cmpint (query (fixture->hv, "sb-c", NULL), ==, BOX_VM_STATE_SHUTOFF);
  g_assert_cmpint (query (fixture->hv, "sb-d", NULL), ==, BOX_VM_STATE_ABSENT);

  /* checkpoints survive, and the running VM still counts: 2 of 6 CPUs are
   * in use, so two more fit and a third does not */
  run_ok (fixture->hv, BOX_VM_OP_RESTORE, "sb-c", "v1");
  run_ok (fixture->hv, BOX_VM_OP_RESUME, "sb-b", NULL);
  run_fails (fixture->hv, BOX_VM_OP_CREATE, "sb-e", NULL, BOX_ERROR_CAPACITY);
}

static void
test_dummy_capacity (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  BoxResources small = { 1, 128, 1 };
  BoxResources fits = { 2, 2048, 20 };

  set_config (fixture, "max_cpus", "5");
  set_config (fixture, "max_memory_mib", "4096");

  g_assert_true (box_hypervisor_check_room (fixture->hv, &fits, &error));
  g_assert_no_error (error);
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-a", NULL);
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-b", NULL);

  /* CPUs are left (1 of 5) but no memory */
  g_assert_false (box_hypervisor_check_room (fixture->hv, &small, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CAPACITY);
  g_assert_cmpstr (error->message, ==, "no node has room for 1 CPUs and 128 MiB");
  g_clear_error (&error);
  run_fails (fixture->hv, BOX_VM_OP_CREATE, "sb-c", NULL, BOX_ERROR_CAPACITY);
  g_assert_cmpint (query (fixture->hv, "sb-c", NULL), ==, BOX_VM_STATE_ABSENT);

  /* only RUNNING VMs count */
  run_ok (fixture->hv, BOX_VM_OP_SUSPEND, "sb-a", NULL);
  g_assert_true (box_hypervisor_check_room (fixture->hv, &fits, &error));
  g_assert_no_error (error);
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-c", NULL);
  run_fails (fixture->hv, BOX_VM_OP_RESUME, "sb-a", NULL, BOX_ERROR_CAPACITY);
  g_assert_cmpint (query (fixture->hv, "sb-a", NULL), ==, BOX_VM_STATE_SUSPENDED);
  run_fails (fixture->hv, BOX_VM_OP_BOOT, "sb-a", NULL, BOX_ERROR_CAPACITY);
  run_ok (fixture->hv, BOX_VM_OP_SHUTDOWN, "sb-b", NULL);
  run_ok (fixture->hv, BOX_VM_OP_RESUME, "sb-a", NULL);

  /* CPUs alone */
  set_config (fixture, "max_memory_mib", "1000000");
  g_assert_false (box_hypervisor_check_room (fixture->hv, &(BoxResources) { 4, 128, 1 }, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CAPACITY);
}

static void
test_dummy_fault (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;

  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-a", NULL);
  set_config (fixture, "fail_create", "true");
  g_assert_false (run (fixture->hv, BOX_VM_OP_CREATE, "sb-b", NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_cmpstr (error->message, ==, "injected failure");
  g_assert_cmpint (query (fixture->hv, "sb-b", NULL), ==, BOX_VM_STATE_ABSENT);
  /* only CREATE fails */
  run_ok (fixture->hv, BOX_VM_OP_SUSPEND, "sb-a", NULL);
  run_ok (fixture->hv, BOX_VM_OP_DESTROY, "sb-b", NULL);

  set_config (fixture, "fail_create", "false");
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-b", NULL);
}

static void
test_dummy_bad_config (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;

  set_config (fixture, "delay_ms", "soon");
  g_assert_false (box_plugin_start (BOX_PLUGIN (fixture->hv), NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  run_fails (fixture->hv, BOX_VM_OP_CREATE, "sb-a", NULL, BOX_ERROR_INVALID);

  set_config (fixture, "delay_ms", "0");
  set_config (fixture, "fail_create", "perhaps");
  run_fails (fixture->hv, BOX_VM_OP_CREATE, "sb-a", NULL, BOX_ERROR_INVALID);
}

static void
test_dummy_delay (Fixture *fixture, gconstpointer user_data)
{
  gint64 start;

  set_config (fixture, "delay_ms", "60");
  start = g_get_monotonic_time ();
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-a", NULL);
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 60 * 1000);
  g_assert_cmpint (query (fixture->hv, "sb-a", NULL), ==, BOX_VM_STATE_RUNNING);
}

static void
vm_lost_cb (BoxHypervisor *hv, const char *sandbox_id, gpointer user_data)
{
  char **lost = user_data;

  g_free (*lost);
  *lost = g_strdup (sandbox_id);
}

static void
test_dummy_vm_lost (Fixture *fixture, gconstpointer user_data)
{
  g_autofree char *lost = NULL;
  gint64 snapshot_at = 0;

  g_signal_connect (fixture->hv, "vm-lost", G_CALLBACK (vm_lost_cb), &lost);
  g_assert_false (box_dummy_plugin_lose_vm (BOX_DUMMY_PLUGIN (fixture->hv), "sb-a"));
  g_assert_null (lost);

  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-a", NULL);
  run_ok (fixture->hv, BOX_VM_OP_SUSPEND, "sb-a", NULL);
  run_ok (fixture->hv, BOX_VM_OP_RESUME, "sb-a", NULL);
  /* running: its disk is kept (newer than the earlier memory snapshot) */
  g_assert_true (box_dummy_plugin_lose_vm (BOX_DUMMY_PLUGIN (fixture->hv), "sb-a"));
  g_assert_cmpstr (lost, ==, "sb-a");
  g_assert_cmpint (query (fixture->hv, "sb-a", &snapshot_at), ==, BOX_VM_STATE_SHUTOFF);
  g_assert_cmpint (snapshot_at, >, 0);
  run_ok (fixture->hv, BOX_VM_OP_BOOT, "sb-a", NULL);
  g_assert_cmpint (query (fixture->hv, "sb-a", &snapshot_at), ==, BOX_VM_STATE_RUNNING);
  g_assert_cmpint (snapshot_at, ==, 0);
  /* suspended: its memory snapshot is kept; back from it */
  run_ok (fixture->hv, BOX_VM_OP_SUSPEND, "sb-a", NULL);
  g_clear_pointer (&lost, g_free);
  g_assert_true (box_dummy_plugin_lose_vm (BOX_DUMMY_PLUGIN (fixture->hv), "sb-a"));
  g_assert_cmpstr (lost, ==, "sb-a");
  g_assert_cmpint (query (fixture->hv, "sb-a", &snapshot_at), ==, BOX_VM_STATE_LOST);
  g_assert_cmpint (snapshot_at, >, 0);
  run_ok (fixture->hv, BOX_VM_OP_RESUME, "sb-a", NULL);
  g_assert_cmpint (query (fixture->hv, "sb-a", NULL), ==, BOX_VM_STATE_RUNNING);
  /* nothing left */
  g_assert_true (box_dummy_plugin_lose_all (BOX_DUMMY_PLUGIN (fixture->hv), "sb-a"));
  g_assert_cmpint (query (fixture->hv, "sb-a", &snapshot_at), ==, BOX_VM_STATE_LOST);
  g_assert_cmpint (snapshot_at, ==, 0);
}


static void
test_dummy_script (Fixture *fixture, gconstpointer user_data)
{
  BoxDummyPlugin *dummy = BOX_DUMMY_PLUGIN (fixture->hv);
  g_autoptr(GError) error = NULL;
  g_autofree char *lost = NULL;
  gboolean ok = FALSE;
  gint64 start;

  /* syntax errors add nothing */
  g_assert_false (box_dummy_plugin_script (dummy, "create explode", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (box_dummy_plugin_script (dummy, "suspend fail; teleport fail", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (box_dummy_plugin_script (dummy, "create fail times=x", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (box_dummy_plugin_script (dummy, "create fail code=nope", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-a", NULL);
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-b", NULL);

  /* per operation, per sandbox, n times, with a code */
  g_assert_true (box_dummy_plugin_script (dummy, "suspend fail sandbox=sb-a times=2 code=capacity",
                                          &error));
  g_assert_no_error (error);
  run_fails (fixture->hv, BOX_VM_OP_SUSPEND, "sb-a", NULL, BOX_ERROR_CAPACITY);
  run_ok (fixture->hv, BOX_VM_OP_SUSPEND, "sb-b", NULL);
  run_fails (fixture->hv, BOX_VM_OP_SUSPEND, "sb-a", NULL, BOX_ERROR_CAPACITY);
  g_assert_cmpint (query (fixture->hv, "sb-a", NULL), ==, BOX_VM_STATE_RUNNING);
  run_ok (fixture->hv, BOX_VM_OP_SUSPEND, "sb-a", NULL);

  /* every operation delayed, through the action signal */
  g_signal_emit_by_name (fixture->hv, "script", "* delay ms=60 times=1", &ok);
  g_assert_true (ok);
  start = g_get_monotonic_time ();
  run_ok (fixture->hv, BOX_VM_OP_RESUME, "sb-a", NULL);
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 60 * 1000);

  /* lost in the middle of an operation: vm-lost, then the failure */
  g_signal_connect (fixture->hv, "vm-lost", G_CALLBACK (vm_lost_cb), &lost);
  g_assert_true (box_dummy_plugin_script (dummy, "shutdown lose sandbox=sb-a", NULL));
  run_fails (fixture->hv, BOX_VM_OP_SHUTDOWN, "sb-a", NULL, BOX_ERROR_INTERNAL);
  g_assert_cmpstr (lost, ==, "sb-a");
  g_assert_cmpint (query (fixture->hv, "sb-a", NULL), ==, BOX_VM_STATE_SHUTOFF);

  /* "" clears every rule */
  g_assert_true (box_dummy_plugin_script (dummy, "", NULL));
  run_ok (fixture->hv, BOX_VM_OP_SHUTDOWN, "sb-a", NULL);

  /* from the config, read at start */
  set_config (fixture, "script", "boot fail times=1; destroy delay ms=1");
  g_clear_object (&fixture->hv);   /* boxd restarts with it */
  fixture->hv = new_plugin (fixture);
  g_assert_true (box_plugin_start (BOX_PLUGIN (fixture->hv), NULL, &error));
  g_assert_no_error (error);
  run_fails (fixture->hv, BOX_VM_OP_BOOT, "sb-a", NULL, BOX_ERROR_INTERNAL);
  run_ok (fixture->hv, BOX_VM_OP_BOOT, "sb-a", NULL);
  set_config (fixture, "script", "boot maybe");
  g_clear_object (&fixture->hv);
  fixture->hv = new_plugin (fixture);
  g_assert_false (box_plugin_start (BOX_PLUGIN (fixture->hv), NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
}

static void
test_dummy_capabilities (Fixture *fixture, gconstpointer user_data)
{
  BoxHypervisorCapabilities caps;
  g_autoptr(GError) error = NULL;
  BoxVmRequest fork = {
    .sandbox_id = "sb-fork", .resources = { 1, 512, 10 },
    .from_sandbox_id = "sb-a", .from_checkpoint_id = "v1",
  };

  /* the defaults: what the dummy really does */
  box_hypervisor_get_capabilities (fixture->hv, &caps);
  g_assert_cmpint (caps.flags, ==, BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS |
                                   BOX_HYPERVISOR_CAP_CHECKPOINTS | BOX_HYPERVISOR_CAP_FORK);
  g_assert_cmpstr (caps.accel, ==, "none");
  g_assert_false (box_hypervisor_has_caps (fixture->hv, BOX_HYPERVISOR_CAP_GUEST_AGENT));
  g_assert_true (box_hypervisor_has_caps (fixture->hv, BOX_HYPERVISOR_CAP_FORK |
                                                       BOX_HYPERVISOR_CAP_CHECKPOINTS));

  /* any set, from the config */
  set_config (fixture, "capabilities", "guest-agent, hot-pause,images");
  set_config (fixture, "accel", "kvm");
  g_assert_true (box_plugin_start (BOX_PLUGIN (fixture->hv), NULL, &error));
  g_assert_no_error (error);
  box_hypervisor_get_capabilities (fixture->hv, &caps);
  g_assert_cmpint (caps.flags, ==, BOX_HYPERVISOR_CAP_GUEST_AGENT | BOX_HYPERVISOR_CAP_HOT_PAUSE |
                                   BOX_HYPERVISOR_CAP_IMAGES);
  g_assert_cmpstr (caps.accel, ==, "kvm");
  g_assert_cmpstr (box_hypervisor_get_accel (fixture->hv), ==, "kvm");

  /* and the operations they rule out fail as unsupported */
  run_ok (fixture->hv, BOX_VM_OP_CREATE, "sb-a", NULL);
  run_fails (fixture->hv, BOX_VM_OP_SUSPEND, "sb-a", NULL, BOX_ERROR_UNSUPPORTED);
  run_fails (fixture->hv, BOX_VM_OP_CHECKPOINT, "sb-a", "v1", BOX_ERROR_UNSUPPORTED);
  g_assert_false (run_full (fixture->hv, BOX_VM_OP_CREATE, &fork, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_clear_error (&error);
  g_assert_cmpint (query (fixture->hv, "sb-a", NULL), ==, BOX_VM_STATE_RUNNING);

  /* the test API overrides the config */
  box_dummy_plugin_set_capabilities (BOX_DUMMY_PLUGIN (fixture->hv),
                                     BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS, "tcg");
  box_hypervisor_get_capabilities (fixture->hv, &caps);
  g_assert_cmpint (caps.flags, ==, BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS);
  g_assert_cmpstr (caps.accel, ==, "tcg");
  run_ok (fixture->hv, BOX_VM_OP_SUSPEND, "sb-a", NULL);

  /* a bad list is refused at start */
  set_config (fixture, "capabilities", "teleport");
  g_clear_object (&fixture->hv);
  fixture->hv = new_plugin (fixture);
  g_assert_false (box_plugin_start (BOX_PLUGIN (fixture->hv), NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
}

/* [plugin.dummy] agent=: a process per running sandbox; bad arguments fail
 * the create and leave nothing behind */
static void
test_dummy_agent (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) env = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(BoxAgentClient) agent = NULL;
  BoxHypervisorCapabilities caps = { 0 };
  BoxVmRequest request = {
    .sandbox_id = "sb-a",
    .hostname = "test",
    .template_name = "base",
    .image = "",
    .resources = { 2, 2048, 20 },
    .env = env,
  };
  const char *bad[] = { "/bin/sh -c true", "'unterminated", NULL };

  set_config (fixture, "agent", "sleep");
  g_assert_false (box_plugin_start (BOX_PLUGIN (fixture->hv), NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);

  /* an agent that never answers: enough for the connection's life */
  set_config (fixture, "agent", "/bin/sleep");
  set_config (fixture, "agent_args", "600");
  set_config (fixture, "agent_programs", "/bin/true");
  g_assert_true (box_plugin_start (BOX_PLUGIN (fixture->hv), NULL, &error));
  g_assert_no_error (error);
  box_hypervisor_get_capabilities (fixture->hv, &caps);
  g_assert_true (caps.flags & BOX_HYPERVISOR_CAP_GUEST_AGENT);

  for (guint i = 0; bad[i] != NULL; i++) {
    g_hash_table_insert (env, (gpointer) "BOX_DUMMY_AGENT_ARGS", (gpointer) bad[i]);
    g_assert_false (run_full (fixture->hv, BOX_VM_OP_CREATE, &request, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    g_clear_error (&error);
    g_assert_cmpint (query (fixture->hv, "sb-a", NULL), ==, BOX_VM_STATE_ABSENT);
  }

  g_hash_table_remove (env, "BOX_DUMMY_AGENT_ARGS");
  g_assert_true (run_full (fixture->hv, BOX_VM_OP_CREATE, &request, &error));
  g_assert_no_error (error);
  agent = box_hypervisor_get_agent (fixture->hv, "sb-a", &error);
  g_assert_no_error (error);
  g_assert_false (box_agent_client_is_closed (agent));
  run_ok (fixture->hv, BOX_VM_OP_SHUTDOWN, "sb-a", NULL);
  /* its process was killed with the VM: the connection is gone */
  g_assert_true (box_agent_client_is_closed (agent));
  g_clear_object (&agent);
  g_assert_null (box_hypervisor_get_agent (fixture->hv, "sb-a", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_clear_error (&error);
  run_ok (fixture->hv, BOX_VM_OP_BOOT, "sb-a", NULL);
  agent = box_hypervisor_get_agent (fixture->hv, "sb-a", &error);
  g_assert_no_error (error);
  g_assert_false (box_agent_client_is_closed (agent));
  g_clear_object (&agent);

  /* a listed program of its own; one that ends closes its connection, and
   * the next get_agent() starts another */
  g_hash_table_insert (env, (gpointer) "BOX_DUMMY_AGENT_ARGS", (gpointer) "/bin/true");
  request.sandbox_id = "sb-b";
  g_assert_true (run_full (fixture->hv, BOX_VM_OP_CREATE, &request, &error));
  g_assert_no_error (error);
  agent = box_hypervisor_get_agent (fixture->hv, "sb-b", &error);
  g_assert_no_error (error);
  while (!box_agent_client_is_closed (agent))
    g_main_context_iteration (NULL, TRUE);
  {
    g_autoptr(BoxAgentClient) again = box_hypervisor_get_agent (fixture->hv, "sb-b", &error);

    g_assert_no_error (error);
    g_assert_true (again != agent);
  }
  run_ok (fixture->hv, BOX_VM_OP_DESTROY, "sb-a", NULL);
  run_ok (fixture->hv, BOX_VM_OP_DESTROY, "sb-b", NULL);
}

#define ADD(path, func) \
  g_test_add (path, Fixture, NULL, fixture_set_up, func, fixture_tear_down)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  ADD ("/dummy/basics", test_dummy_basics);
  ADD ("/dummy/transitions", test_dummy_transitions);
  ADD ("/dummy/fork", test_dummy_fork);
  ADD ("/dummy/restart", test_dummy_restart);
  ADD ("/dummy/capacity", test_dummy_capacity);
  ADD ("/dummy/fault", test_dummy_fault);
  ADD ("/dummy/bad-config", test_dummy_bad_config);
  ADD ("/dummy/delay", test_dummy_delay);
  ADD ("/dummy/vm-lost", test_dummy_vm_lost);
  ADD ("/dummy/script", test_dummy_script);
  ADD ("/dummy/capabilities", test_dummy_capabilities);
  ADD ("/dummy/agent", test_dummy_agent);
  return g_test_run ();
}
