/* engine-tasks-test.c: tasks (box-engine-tasks.c) on the engine's manual
 * clock: names and bounds, the 64 live tasks, expiry in wall time, the
 * idle rule held by a live task, and what ends tasks (a stop, a restore)
 * and what does not (a pause, a restart of boxd). */
#include "config.h"

#include <string.h>

#include "engine-fixture.h"

#define ADD(path, func) g_test_add (path, Ef, NULL, ef_set_up, func, ef_tear_down)

static BoxTask *
put (Ef *ef, const char *sandbox, const char *name, guint expire_s)
{
  g_autoptr(GError) error = NULL;
  BoxTask *task = box_engine_put_task (ef->engine, "p", sandbox, name, expire_s, &error);

  g_assert_no_error (error);
  g_assert_nonnull (task);
  return task;
}

static void
assert_put_fails (Ef *ef, const char *sandbox, const char *name, guint expire_s, gint code)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxTask) task = box_engine_put_task (ef->engine, "p", sandbox, name, expire_s, &error);

  g_assert_error (error, BOX_ERROR, code);
  g_assert_null (task);
}

/* The names of the live tasks, joined by "|". */
static char *
names (Ef *ef, const char *sandbox)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) tasks = box_engine_list_tasks (ef->engine, "p", sandbox, &error);
  g_autoptr(GString) out = g_string_new (NULL);

  g_assert_no_error (error);
  for (guint i = 0; i < tasks->len; i++) {
    BoxTask *task = g_ptr_array_index (tasks, i);

    g_string_append_printf (out, "%s%s", i > 0 ? "|" : "", task->name);
  }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static void
assert_names (Ef *ef, const char *sandbox, const char *expected)
{
  g_autofree char *got = names (ef, sandbox);

  g_assert_cmpstr (got, ==, expected);
}

static gboolean
has_task (Ef *ef, const char *sandbox, const char *name)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxTask) task = box_engine_get_task (ef->engine, "p", sandbox, name, &error);

  if (task == NULL)
    g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  return task != NULL;
}

/* The task records the store holds for @sandbox_id, expired ones too. */
static guint
stored_records (Ef *ef, const char *sandbox_id)
{
  g_autoptr(GPtrArray) records = box_storage_list (box_engine_get_storage (ef->engine), "task",
                                                   sandbox_id, BOX_STORAGE_BY_SCOPE, NULL,
                                                   BOX_STORAGE_ORDER_CREATED, NULL);

  g_assert_nonnull (records);
  return records->len;
}

static gboolean
has_event (Ef *ef, const char *type, const char *id, const char *reason)
{
  g_autofree char *wanted = g_strdup_printf ("%s %s %s", type, id, reason);

  for (guint i = 0; i < ef->events->len; i++) {
    if (g_str_equal (g_ptr_array_index (ef->events, i), wanted))
      return TRUE;
  }
  return FALSE;
}

static void
test_names_and_bodies (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"name\": \"t1\"}");
  g_autoptr(BoxTask) a = NULL;
  g_autoptr(BoxTask) moved = NULL;
  g_autoptr(BoxTask) got = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *expected = NULL;
  char longest[BOX_TASK_NAME_MAX + 2];
  const char *utf8 = "d\xc3\xa9j\xc3\xa0 \xe6\x97\xa5\xe6\x9c\xac";

  a = put (ef, "t1", "build job", BOX_TASK_EXPIRE_DEFAULT);
  g_assert_cmpstr (a->name, ==, "build job");
  g_assert_cmpint (a->started_at, ==, EF_T0);
  g_assert_cmpint (a->expires_at, ==, EF_T0 + G_GINT64_CONSTANT (3600) * G_USEC_PER_SEC);

  /* a PUT on a live task moves its expiry (by ID or name); started_at stays */
  ef_advance (ef, 10);
  moved = put (ef, sb->id, "build job", 60);
  g_assert_cmpint (moved->started_at, ==, EF_T0);
  g_assert_cmpint (moved->expires_at, ==, EF_T0 + 70 * G_USEC_PER_SEC);
  got = box_engine_get_task (ef->engine, "p", "t1", "build job", &error);
  g_assert_no_error (error);
  g_assert_cmpint (got->expires_at, ==, moved->expires_at);
  g_assert_cmpint (stored_records (ef, sb->id), ==, 1);

  /* any UTF-8, slashes included; 1 to 128 bytes */
  box_task_free (put (ef, "t1", "a/b", 60));
  box_task_free (put (ef, "t1", utf8, 60));
  memset (longest, 'x', sizeof longest);
  longest[BOX_TASK_NAME_MAX] = '\0';
  box_task_free (put (ef, "t1", longest, 60));
  expected = g_strdup_printf ("build job|a/b|%s|%s", utf8, longest);
  assert_names (ef, "t1", expected);
  g_assert_true (has_task (ef, "t1", "a/b"));
  g_assert_false (has_task (ef, "t1", "a"));

  /* bad names: 400, nothing written */
  longest[BOX_TASK_NAME_MAX] = 'x';
  longest[BOX_TASK_NAME_MAX + 1] = '\0';
  assert_put_fails (ef, "t1", longest, 60, BOX_ERROR_INVALID);
  assert_put_fails (ef, "t1", "", 60, BOX_ERROR_INVALID);
  assert_put_fails (ef, "t1", "bad \xff", 60, BOX_ERROR_INVALID);
  g_assert_cmpint (stored_records (ef, sb->id), ==, 4);

  /* absent sandbox, another project's sandbox: 404 */
  assert_put_fails (ef, "nope", "x", 60, BOX_ERROR_NOT_FOUND);
  ef_project (ef, "q");
  g_assert_null (box_engine_put_task (ef->engine, "q", sb->id, "x", 60, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_null (box_engine_list_tasks (ef->engine, "q", "t1", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (box_engine_delete_task (ef->engine, "q", sb->id, "a/b", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  /* delete: once; then 404 */
  g_assert_true (box_engine_delete_task (ef->engine, "p", "t1", "a/b", &error));
  g_assert_no_error (error);
  g_assert_false (box_engine_delete_task (ef->engine, "p", "t1", "a/b", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_false (has_task (ef, "t1", "a/b"));
  g_assert_cmpint (stored_records (ef, sb->id), ==, 3);

  /* deleting the sandbox deletes its tasks */
  g_assert_true (ef_delete (ef, sb->id, NULL));
  g_assert_cmpint (stored_records (ef, sb->id), ==, 0);
}

static void
test_limit (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"name\": \"many\"}");
  g_autoptr(BoxSandbox) other = ef_create_ok (ef, "{\"name\": \"other\"}");
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < BOX_TASKS_MAX; i++) {
    g_autofree char *name = g_strdup_printf ("job-%u", i);

    box_task_free (put (ef, "many", name, i < 10 ? 5 : 3600));
  }
  /* the 65th is 409; moving a live one's expiry is not a new task */
  assert_put_fails (ef, "many", "job-64", 60, BOX_ERROR_CONFLICT);
  box_task_free (put (ef, "many", "job-63", 60));
  g_assert_cmpint (stored_records (ef, sb->id), ==, BOX_TASKS_MAX);
  /* the limit is per sandbox */
  box_task_free (put (ef, "other", "job-64", 60));

  /* a deleted one frees a place */
  g_assert_true (box_engine_delete_task (ef->engine, "p", "many", "job-20", &error));
  box_task_free (put (ef, "many", "job-64", 60));
  assert_put_fails (ef, "many", "job-65", 60, BOX_ERROR_CONFLICT);

  /* expired ones do not count: ten expire after 5 s */
  ef_advance (ef, 5);
  for (guint i = 65; i < 75; i++) {
    g_autofree char *name = g_strdup_printf ("job-%u", i);

    box_task_free (put (ef, "many", name, 60));
  }
  assert_put_fails (ef, "many", "job-75", 60, BOX_ERROR_CONFLICT);
  g_assert_cmpint (stored_records (ef, sb->id), ==, BOX_TASKS_MAX);
}

static void
test_expiry (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"name\": \"exp\"}");
  g_autoptr(BoxSandbox) paused = NULL;
  g_autoptr(BoxSandbox) woken = NULL;
  g_autoptr(GError) error = NULL;

  box_task_free (put (ef, "exp", "short", 10));
  box_task_free (put (ef, "exp", "long", 100));
  ef_advance (ef, 9);
  assert_names (ef, "exp", "long|short");  /* same start: by name */
  ef_advance (ef, 1);
  /* expired: neither listed nor read, and its record is gone */
  assert_names (ef, "exp", "long");
  g_assert_false (has_task (ef, "exp", "short"));
  g_assert_cmpint (stored_records (ef, sb->id), ==, 1);
  /* a PUT of an expired name is a new task */
  {
    g_autoptr(BoxTask) again = put (ef, "exp", "short", 10);

    g_assert_cmpint (again->started_at, ==, EF_T0 + 10 * G_USEC_PER_SEC);
  }

  /* a pause keeps tasks, and expiry counts the time paused */
  paused = ef_change (ef, "exp", BOX_STATE_REQUEST_PAUSE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (paused->state, ==, BOX_SANDBOX_STATE_PAUSED);
  assert_names (ef, "exp", "long|short");
  ef_advance (ef, 90);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_PAUSED);  /* not woken */
  assert_names (ef, "exp", "");
  woken = ef_change (ef, "exp", BOX_STATE_REQUEST_WAKE, &error);
  g_assert_no_error (error);
  assert_names (ef, "exp", "");
}

static void
test_idle (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) held = ef_create_ok (ef, "{\"name\": \"held\", \"idle\": {\"timeout_s\": 30, \"action\": \"pause\"}}");
  g_autoptr(BoxSandbox) expiring = ef_create_ok (ef, "{\"name\": \"expiring\", \"idle\": {\"timeout_s\": 30, \"action\": \"stop\"}}");
  g_autoptr(BoxSandbox) free_ = ef_create_ok (ef, "{\"name\": \"free\", \"idle\": {\"timeout_s\": 30, \"action\": \"pause\"}}");
  g_autoptr(GError) error = NULL;

  box_task_free (put (ef, "held", "work", 3600));
  box_task_free (put (ef, "expiring", "work", 45));
  ef_advance (ef, 30);
  /* without a task: paused at 30 s; with one: left alone */
  g_assert_cmpint (ef_state (ef, free_->id), ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_cmpint (ef_state (ef, held->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_cmpint (ef_state (ef, expiring->id), ==, BOX_SANDBOX_STATE_RUNNING);
  ef_advance (ef, 14);
  g_assert_cmpint (ef_state (ef, expiring->id), ==, BOX_SANDBOX_STATE_RUNNING);
  /* its task expires at 45 s: the idle action follows at that tick */
  ef_advance (ef, 1);
  g_assert_cmpint (ef_state (ef, expiring->id), ==, BOX_SANDBOX_STATE_STOPPED);
  g_assert_cmpint (stored_records (ef, expiring->id), ==, 0);

  ef_advance (ef, 100);
  g_assert_cmpint (ef_state (ef, held->id), ==, BOX_SANDBOX_STATE_RUNNING);
  /* the task deleted: idle since its creation, paused at the next tick */
  g_assert_true (box_engine_delete_task (ef->engine, "p", "held", "work", &error));
  g_assert_no_error (error);
  ef_advance (ef, 1);
  g_assert_cmpint (ef_state (ef, held->id), ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_true (has_event (ef, "sandbox.paused", held->id, "idle"));
  g_assert_true (has_event (ef, "sandbox.stopped", expiring->id, "idle"));
}

/* An explicit pause or stop and a deadline are not prevented by tasks;
 * a stop ends them, a pause does not. */
static void
test_stop_and_deadline (Ef *ef, gconstpointer user_data)
{
  g_autofree char *at = ef_future (ef, 20);
  g_autofree char *json = g_strdup_printf ("{\"name\": \"dl\", \"deadline\": {\"at\": \"%s\", "
                                           "\"action\": \"stop\"}}", at);
  g_autoptr(BoxSandbox) dl = ef_create_ok (ef, json);
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"name\": \"st\"}");
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(GError) error = NULL;

  box_task_free (put (ef, "dl", "work", 3600));
  box_task_free (put (ef, "st", "one", 3600));
  box_task_free (put (ef, "st", "two", 3600));

  after = ef_change (ef, "st", BOX_STATE_REQUEST_PAUSE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_PAUSED);
  assert_names (ef, "st", "one|two");
  g_clear_pointer (&after, box_sandbox_free);
  after = ef_change (ef, "st", BOX_STATE_REQUEST_STOP, &error);
  g_assert_no_error (error);
  g_assert_cmpint (after->state, ==, BOX_SANDBOX_STATE_STOPPED);
  assert_names (ef, "st", "");
  g_assert_cmpint (stored_records (ef, sb->id), ==, 0);
  /* a task declared while stopped is the sandbox's next work: it stays */
  box_task_free (put (ef, "st", "later", 3600));
  g_clear_pointer (&after, box_sandbox_free);
  after = ef_change (ef, "st", BOX_STATE_REQUEST_WAKE, &error);
  g_assert_no_error (error);
  assert_names (ef, "st", "later");

  ef_advance (ef, 20);
  g_assert_cmpint (ef_state (ef, dl->id), ==, BOX_SANDBOX_STATE_STOPPED);
  g_assert_true (has_event (ef, "sandbox.stopped", dl->id, "deadline"));
  assert_names (ef, "dl", "");
}

/* A VM that died with its disk kept is a stop: its tasks end. */
static void
test_lost_vm (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"name\": \"lost\"}");

  box_task_free (put (ef, "lost", "work", 3600));
  g_assert_true (ef_lose_vm (ef, sb->id));
  ef_settle (ef);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_STOPPED);
  assert_names (ef, "lost", "");
}

static void
test_restore_ends (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"name\": \"rs\"}");
  g_autoptr(BoxCheckpoint) memory = NULL;
  g_autoptr(BoxCheckpoint) disk = NULL;
  g_autoptr(BoxSandbox) restored = NULL;
  g_autoptr(GError) error = NULL;

  /* a checkpoint keeps them */
  box_task_free (put (ef, "rs", "work", 3600));
  memory = ef_checkpoint (ef, sb->id, TRUE, &error);
  g_assert_no_error (error);
  disk = ef_checkpoint (ef, sb->id, FALSE, &error);
  g_assert_no_error (error);
  assert_names (ef, "rs", "work");

  restored = ef_restore (ef, sb->id, memory->id, &error);
  g_assert_no_error (error);
  assert_names (ef, "rs", "");
  g_clear_pointer (&restored, box_sandbox_free);
  box_task_free (put (ef, "rs", "again", 3600));
  restored = ef_restore (ef, sb->id, disk->id, &error);
  g_assert_no_error (error);
  assert_names (ef, "rs", "");
  g_assert_cmpint (stored_records (ef, sb->id), ==, 0);
}

/* Tasks are records: they survive a restart of boxd and still hold the
 * sandbox awake, and the task calls never wake it. */
static void
test_restart (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"name\": \"rr\", \"idle\": {\"timeout_s\": 30, \"action\": \"pause\"}}");
  g_autoptr(BoxSandbox) paused = NULL;
  g_autoptr(GError) error = NULL;

  box_task_free (put (ef, "rr", "work", 100));
  ef_stop (ef);
  ef_start (ef);
  ef_advance (ef, 60);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);
  ef_advance (ef, 40);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_PAUSED);

  /* on a paused sandbox: no wake, no activity */
  ef_forget (ef);
  box_task_free (put (ef, "rr", "work", 100));
  assert_names (ef, "rr", "work");
  g_assert_true (has_task (ef, "rr", "work"));
  g_assert_true (box_engine_delete_task (ef->engine, "p", "rr", "work", &error));
  g_assert_no_error (error);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_PAUSED);
  ef_assert_events (ef, "");
  paused = box_engine_get_sandbox (ef->engine, "p", "rr", &error);
  g_assert_no_error (error);
  g_assert_cmpint (paused->state, ==, BOX_SANDBOX_STATE_PAUSED);
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);
  ADD ("/engine/tasks/names-and-bodies", test_names_and_bodies);
  ADD ("/engine/tasks/limit", test_limit);
  ADD ("/engine/tasks/expiry", test_expiry);
  ADD ("/engine/tasks/idle", test_idle);
  ADD ("/engine/tasks/stop-and-deadline", test_stop_and_deadline);
  ADD ("/engine/tasks/lost-vm", test_lost_vm);
  ADD ("/engine/tasks/restore-ends", test_restore_ends);
  ADD ("/engine/tasks/restart", test_restart);
  return g_test_run ();
}
