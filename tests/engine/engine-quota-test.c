/* engine-quota-test.c: a project's quota (box-engine-quota.c) on the
 * engine in process: checkpoints count on the disk quota (their disk at
 * full size, their memory when they have one), per-project groups
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
  ADD ("/engine/quota/project-group", test_project_group);
  return g_test_run ();
}
