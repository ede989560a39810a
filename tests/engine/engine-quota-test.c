/* engine-quota-test.c: a project's quota (box-engine-quota.c) on the
 * engine in process: checkpoints count on the disk quota (their disk at
 * full size, their memory when they have one; also while the hypervisor
 * makes them; a restore that prunes an auto-N counts it gone), per-project groups
 * replace [quota], and a refusal writes nothing and emits nothing.  The
 * HTTP side (every quota, 409 conflict) is tests/e2e/test_limits.py. */
#include "config.h"

#include "engine-fixture.h"

#define ADD(path, func) g_test_add (path, Ef, NULL, ef_set_up, func, ef_tear_down)

static void
no_quota (BoxQuota *quota)
{
  memset (quota, 0, sizeof (*quota));
}

static void
insert_checkpoint (Ef *ef, const char *sandbox_id, const char *id, gboolean memory)
{
  g_autoptr(GError) error = NULL;
  BoxCheckpoint checkpoint = {
    .id = (char *) id, .sandbox = (char *) sandbox_id, .project = (char *) "p",
    .comment = (char *) "", .memory = memory, .created_at = EF_T0,
  };

  g_assert_true (box_storage_checkpoint_insert (box_engine_get_storage (ef->engine), &checkpoint,
                                                &error));
  g_assert_no_error (error);
}

static guint
count_sandboxes (Ef *ef)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) all = box_engine_list_sandboxes (ef->engine, "p", NULL, NULL, &error);

  g_assert_no_error (error);
  return all->len;
}

/* 3 GiB of disk: a sandbox of 1 GiB and 128 MiB takes 1152 MiB; a memory
 * checkpoint of it as much again; a second sandbox no longer fits. */
static void
test_checkpoints_count (Ef *ef, gconstpointer user_data)
{
  BoxConfig *config = box_engine_get_config (ef->engine);
  const char *small = "{\"resources\": {\"cpus\": 1, \"memory_mib\": 128, \"disk_gib\": 1}}";
  g_autoptr(BoxSandbox) first = NULL;
  g_autoptr(BoxSandbox) second = NULL;
  g_autoptr(GError) error = NULL;

  no_quota (&config->quota);
  config->quota.disk_gib = 3;
  first = ef_create_ok (ef, small);
  insert_checkpoint (ef, first->id, "v1", TRUE);
  ef_forget (ef);

  g_assert_null (ef_create (ef, small, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_assert_nonnull (strstr (error->message, "quota exceeded"));
  g_assert_nonnull (strstr (error->message, "checkpoints"));
  g_clear_error (&error);
  ef_assert_events (ef, "");
  g_assert_cmpuint (count_sandboxes (ef), ==, 1);

  /* 1152 + 1152 + 1152 = 3456 MiB fits a quota of 4 GiB */
  config->quota.disk_gib = 4;
  second = ef_create_ok (ef, small);
  g_assert_cmpuint (count_sandboxes (ef), ==, 2);
}

/* A disk-only checkpoint counts its disk, not the memory. */
static void
test_disk_checkpoint (Ef *ef, gconstpointer user_data)
{
  BoxConfig *config = box_engine_get_config (ef->engine);
  const char *small = "{\"resources\": {\"cpus\": 1, \"memory_mib\": 1024, \"disk_gib\": 1}}";
  g_autoptr(BoxSandbox) first = NULL;
  g_autoptr(BoxSandbox) second = NULL;
  g_autoptr(GError) error = NULL;

  no_quota (&config->quota);
  /* 2048 (sandbox) + 1024 (disk checkpoint) + 2048 (new) = 5120 MiB: fits 5 GiB */
  config->quota.disk_gib = 5;
  first = ef_create_ok (ef, small);
  insert_checkpoint (ef, first->id, "v1", FALSE);
  second = ef_create_ok (ef, small);
  /* the next would be 7168 */
  g_assert_null (ef_create (ef, small, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
}

static guint
pending_of (Ef *ef, const char *sandbox_id)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) pending = box_storage_list (box_engine_get_storage (ef->engine),
                                                   "checkpoint-pending", sandbox_id,
                                                   BOX_STORAGE_BY_SCOPE, NULL,
                                                   BOX_STORAGE_ORDER_CREATED, &error);

  g_assert_no_error (error);
  return pending->len;
}

/* A checkpoint the hypervisor is still making takes its room: with 7 GiB,
 * two sandboxes of 2048 MiB and one memory checkpoint under way (6144),
 * a second one at the same time (8192) is refused; once the first is
 * recorded it counts once, as a record: a disk-only one (1024) fits. */
static void
test_checkpoint_under_way (Ef *ef, gconstpointer user_data)
{
  BoxConfig *config = box_engine_get_config (ef->engine);
  const char *small = "{\"resources\": {\"cpus\": 1, \"memory_mib\": 1024, \"disk_gib\": 1}}";
  g_autoptr(BoxSandbox) first = NULL;
  g_autoptr(BoxSandbox) second = NULL;
  g_autoptr(BoxCheckpoint) refused = NULL;
  g_autoptr(BoxCheckpoint) made = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *rule = NULL;
  EfWait wait = { 0 };
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

  no_quota (&config->quota);
  config->quota.disk_gib = 7;
  first = ef_create_ok (ef, small);
  second = ef_create_ok (ef, small);
  rule = g_strdup_printf ("checkpoint delay ms=1500 sandbox=%s", first->id);
  ef_script (ef, rule);
  box_engine_create_checkpoint_async (ef->engine, ef->project, first->id, NULL, TRUE, NULL, NULL,
                                      NULL, ef_wait_cb, &wait);
  while (pending_of (ef, first->id) == 0 && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, FALSE);
  g_assert_cmpuint (pending_of (ef, first->id), ==, 1);
  g_assert_false (wait.done);

  refused = ef_checkpoint (ef, second->id, TRUE, &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_assert_nonnull (strstr (error->message, "quota exceeded"));
  g_assert_null (refused);
  g_clear_error (&error);
  g_assert_cmpuint (pending_of (ef, second->id), ==, 0);

  result = ef_wait_result (ef, &wait);
  made = box_engine_create_checkpoint_finish (ef->engine, result, &error);
  g_assert_no_error (error);
  g_assert_nonnull (made);
  /* recorded: 6144 MiB, and a disk-only one of the second (1024) fits */
  g_clear_pointer (&made, box_checkpoint_free);
  made = ef_checkpoint (ef, second->id, FALSE, &error);
  g_assert_no_error (error);
  g_assert_nonnull (made);
}

/* A project at its disk quota can still restore once it keeps the newest
 * 5 automatic checkpoints: the sixth prunes the oldest.  First, with 4
 * auto-N nothing is pruned and nothing credited: at 7 GiB the fifth
 * restore is refused.  Then at 8 GiB: a sandbox of 1152 MiB, v1 and
 * auto-1..5 (memory, 1152 each) hold 8064 MiB, and the restore's auto-6
 * would make 9216 without the one it prunes. */
static void
test_restore_at_quota (Ef *ef, gconstpointer user_data)
{
  BoxConfig *config = box_engine_get_config (ef->engine);
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(BoxCheckpoint) base = NULL;
  g_autoptr(BoxCheckpoint) more = NULL;
  g_autoptr(BoxSandbox) back = NULL;
  g_autoptr(GError) error = NULL;

  no_quota (&config->quota);
  config->quota.disk_gib = 8;
  sandbox = ef_create_ok (ef, "{\"resources\": {\"cpus\": 1, \"memory_mib\": 128, \"disk_gib\": 1}}");
  base = ef_checkpoint (ef, sandbox->id, TRUE, &error);
  g_assert_no_error (error);
  /* with 4 auto-N nothing is pruned: no credit, a restore that would go
   * over the quota is refused (7 GiB: 1152 + 1152 + 4 * 1152 = 6912, the
   * fifth would make 8064) */
  config->quota.disk_gib = 7;
  for (guint i = 1; i <= 4; i++) {
    g_clear_pointer (&back, box_sandbox_free);
    back = ef_restore (ef, sandbox->id, "v1", &error);
    g_assert_no_error (error);
  }
  g_clear_pointer (&back, box_sandbox_free);
  back = ef_restore (ef, sandbox->id, "v1", &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_assert_null (back);
  g_clear_error (&error);
  config->quota.disk_gib = 8;
  for (guint i = 5; i <= 6; i++) {
    g_clear_pointer (&back, box_sandbox_free);
    back = ef_restore (ef, sandbox->id, "v1", &error);
    g_assert_no_error (error);
  }
  g_assert_null (box_storage_checkpoint_get (box_engine_get_storage (ef->engine), sandbox->id,
                                             "auto-1", NULL));
  /* the quota still holds: a new checkpoint (9216) is refused */
  more = ef_checkpoint (ef, sandbox->id, TRUE, &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_assert_null (more);
}

/* [quota.<project>] replaces [quota] for that project only. */
static void
test_project_group (Ef *ef, gconstpointer user_data)
{
  BoxConfig *config = box_engine_get_config (ef->engine);
  BoxQuota quota;
  g_autoptr(BoxSandbox) first = NULL;
  g_autoptr(GError) error = NULL;

  no_quota (&config->quota);
  config->quota.sandboxes = 5;
  g_key_file_set_string (config->keyfile, "quota.p", "sandboxes", "1");
  box_config_get_quota (config, "p", &quota);
  g_assert_cmpuint (quota.sandboxes, ==, 1);
  box_config_get_quota (config, "other", &quota);
  g_assert_cmpuint (quota.sandboxes, ==, 5);

  first = ef_create_ok (ef, "{}");
  g_assert_null (ef_create (ef, "{}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_assert_nonnull (strstr (error->message, "at most 1 sandboxes"));
  g_assert_cmpuint (count_sandboxes (ef), ==, 1);
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);

  ADD ("/engine/quota/checkpoints-count", test_checkpoints_count);
  ADD ("/engine/quota/disk-checkpoint", test_disk_checkpoint);
  ADD ("/engine/quota/checkpoint-under-way", test_checkpoint_under_way);
  ADD ("/engine/quota/restore-at-quota", test_restore_at_quota);
  ADD ("/engine/quota/project-group", test_project_group);
  return g_test_run ();
}
