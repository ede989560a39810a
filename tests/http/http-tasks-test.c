/* http-tasks-test.c: the task routes over HTTP (box-http-tasks.c): bodies,
 * names URL-encoded in the path, the spec's errors, another project's
 * sandbox, the 64 live tasks, and that no task call wakes a sandbox. */
#include "config.h"

#include <string.h>

#include "http-client.h"

#define ADMIN_TOKEN "http-tasks-admin-token-0123456789"
#define TASKS "/v1/sandboxes/tk/tasks"

static BoxEngine *engine;
static BoxHttpServer *server;
static char *data_dir;
static char *key_alpha;   /* project "alpha", sandbox "tk" */
static char *key_beta;    /* project "beta" */

static Reply *
task_call (const char *method, const char *name, const char *body)
{
  g_autofree char *path = g_strdup_printf (TASKS "/%s", name);

  return call (method, path, key_alpha, body);
}

/* The task answered: its name, and expires_at - started_at in seconds. */
static gint64
assert_task (Reply *reply, const char *name)
{
  JsonObject *task;
  gint64 started = 0;
  gint64 expires = 0;

  if (reply->status != 200)
    g_test_message ("unexpected answer %u: %s", reply->status, reply->body);
  g_assert_cmpuint (reply->status, ==, 200);
  task = reply_object (reply);
  g_assert_cmpuint (json_object_get_size (task), ==, 3);
  g_assert_cmpstr (json_object_get_string_member (task, "name"), ==, name);
  g_assert_true (box_time_parse (json_object_get_string_member (task, "started_at"), &started));
  g_assert_true (box_time_parse (json_object_get_string_member (task, "expires_at"), &expires));
  return (expires - started) / G_USEC_PER_SEC;
}

static char *
listed_names (const char *key)
{
  g_autoptr(Reply) list = call ("GET", TASKS, key, NULL);
  g_autoptr(GString) out = g_string_new (NULL);
  JsonArray *tasks;

  g_assert_cmpuint (list->status, ==, 200);
  g_assert_cmpuint (json_object_get_size (reply_object (list)), ==, 1);
  tasks = json_object_get_array_member (reply_object (list), "tasks");
  for (guint i = 0; i < json_array_get_length (tasks); i++)
    g_string_append_printf (out, "%s%s", i > 0 ? "|" : "",
                            json_object_get_string_member (json_array_get_object_element (tasks, i),
                                                           "name"));
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static void
test_bodies (void)
{
  g_autoptr(Reply) made = task_call ("PUT", "build%20job", NULL);
  g_autoptr(Reply) empty_object = task_call ("PUT", "build%20job", "{}");
  g_autoptr(Reply) moved = task_call ("PUT", "build%20job", "{\"expire_s\": 60}");
  g_autoptr(Reply) longest = task_call ("PUT", "build%20job", "{\"expire_s\": 3600}");
  g_autoptr(Reply) shortest = task_call ("PUT", "build%20job", "{\"expire_s\": 1}");
  g_autoptr(Reply) got = task_call ("GET", "build%20job", NULL);
  static const struct {
    const char *body;
    const char *message;
  } bad[] = {
    { "{\"expire_s\": 0}", "invalid expire_s 0: must be 1 to 3600" },
    { "{\"expire_s\": 3601}", "invalid expire_s 3601: must be 1 to 3600" },
    { "{\"expire_s\": -5}", "invalid expire_s -5: must be 1 to 3600" },
    { "{\"expire_s\": 1.5}", NULL },
    { "{\"expire_s\": \"60\"}", NULL },
    { "{\"expire_s\": 60, \"note\": 1}", "bad request body: json: unknown field note" },
    { "[]", NULL },
    { "{", NULL },
  };

  g_assert_cmpint (assert_task (made, "build job"), ==, 3600);   /* the default */
  g_assert_cmpint (assert_task (empty_object, "build job"), ==, 3600);
  /* a PUT moves the expiry, started_at stays */
  g_assert_cmpint (assert_task (moved, "build job"), <=, 61);
  g_assert_cmpstr (json_object_get_string_member (reply_object (moved), "started_at"), ==,
                   json_object_get_string_member (reply_object (made), "started_at"));
  g_assert_cmpint (assert_task (longest, "build job"), >=, 3600);
  g_assert_cmpint (assert_task (shortest, "build job"), <=, 2);
  assert_task (got, "build job");
  g_assert_cmpstr (json_object_get_string_member (reply_object (got), "expires_at"), ==,
                   json_object_get_string_member (reply_object (shortest), "expires_at"));

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(Reply) reply = task_call ("PUT", "other", bad[i].body);

    assert_error (reply, 400, "invalid", bad[i].message);
  }
  /* nothing was made by the refused ones */
  {
    g_autoptr(Reply) absent = task_call ("GET", "other", NULL);

    assert_error (absent, 404, "not_found", NULL);
  }
  {
    g_autoptr(Reply) deleted = task_call ("DELETE", "build%20job", NULL);
    g_autoptr(Reply) again = task_call ("DELETE", "build%20job", NULL);
    g_autoptr(Reply) gone = task_call ("GET", "build%20job", NULL);

    g_assert_cmpuint (deleted->status, ==, 204);
    g_assert_cmpstr (deleted->body, ==, "");
    assert_error (again, 404, "not_found", NULL);
    assert_error (gone, 404, "not_found", NULL);
  }
}

static void
test_names (void)
{
  g_autofree char *name128 = g_strnfill (128, 'n');
  g_autofree char *name129 = g_strnfill (129, 'n');
  g_autoptr(Reply) slash = task_call ("PUT", "a%2Fb", NULL);
  g_autoptr(Reply) slash_get = task_call ("GET", "a%2Fb", NULL);
  g_autoptr(Reply) utf8 = task_call ("PUT", "%C3%A9t%C3%A9%20%E6%97%A5", NULL);
  g_autoptr(Reply) longest = task_call ("PUT", name128, NULL);
  g_autoptr(Reply) too_long = task_call ("PUT", name129, NULL);
  g_autoptr(Reply) too_long_get = task_call ("GET", name129, NULL);
  g_autoptr(Reply) not_utf8 = task_call ("PUT", "x%FF", NULL);
  g_autoptr(Reply) empty_put = task_call ("PUT", "", NULL);
  g_autoptr(Reply) empty_get = task_call ("GET", "", NULL);
  g_autoptr(Reply) empty_delete = task_call ("DELETE", "", NULL);
  g_autoptr(Reply) unescaped = call ("GET", TASKS "/a/b", key_alpha, NULL);
  g_autofree char *expected = g_strdup_printf ("a/b|\xc3\xa9t\xc3\xa9 \xe6\x97\xa5|%s", name128);
  g_autofree char *names = NULL;

  assert_task (slash, "a/b");
  assert_task (slash_get, "a/b");
  assert_task (utf8, "\xc3\xa9t\xc3\xa9 \xe6\x97\xa5");
  assert_task (longest, name128);
  assert_error (too_long, 400, "invalid", "invalid task name: 1 to 128 bytes (URL-encoded in the path), not 129");
  assert_error (too_long_get, 400, "invalid", NULL);
  assert_error (not_utf8, 400, "invalid", "invalid task name: not UTF-8");
  assert_error (empty_put, 400, "invalid", "invalid task name: 1 to 128 bytes (URL-encoded in the path), not 0");
  assert_error (empty_get, 400, "invalid", NULL);
  assert_error (empty_delete, 400, "invalid", NULL);
  /* a slash not encoded is another path: no such route */
  assert_error (unescaped, 404, "not_found", NULL);
  names = listed_names (key_alpha);
  g_assert_cmpstr (names, ==, expected);

  for (guint i = 0; i < 3; i++) {
    const char *name = i == 0 ? "a%2Fb" : i == 1 ? "%C3%A9t%C3%A9%20%E6%97%A5" : name128;
    g_autoptr(Reply) deleted = task_call ("DELETE", name, NULL);

    g_assert_cmpuint (deleted->status, ==, 204);
  }
}

/* Another project's sandbox and an unknown one are 404, and nothing is
 * written. */
static void
test_other_project (void)
{
  g_autoptr(Reply) put = call ("PUT", TASKS "/x", key_beta, NULL);
  g_autoptr(Reply) list = call ("GET", TASKS, key_beta, NULL);
  g_autoptr(Reply) unknown = call ("GET", "/v1/sandboxes/nope/tasks", key_alpha, NULL);
  g_autoptr(Reply) unknown_put = call ("PUT", "/v1/sandboxes/nope/tasks/x", key_alpha, NULL);
  g_autoptr(Reply) no_key = call ("GET", TASKS, NULL, NULL);
  g_autofree char *names = NULL;

  assert_error (put, 404, "not_found", NULL);
  assert_error (list, 404, "not_found", NULL);
  assert_error (unknown, 404, "not_found", NULL);
  assert_error (unknown_put, 404, "not_found", NULL);
  g_assert_cmpuint (no_key->status, ==, 401);
  names = listed_names (key_alpha);
  g_assert_cmpstr (names, ==, "");
}

static void
test_limit (void)
{
  for (guint i = 0; i < 64; i++) {
    g_autofree char *name = g_strdup_printf ("job-%u", i);
    g_autoptr(Reply) reply = task_call ("PUT", name, "{\"expire_s\": 600}");

    assert_task (reply, name);
  }
  {
    g_autoptr(Reply) more = task_call ("PUT", "job-64", NULL);
    g_autoptr(Reply) moved = task_call ("PUT", "job-3", "{\"expire_s\": 60}");
    g_autoptr(Reply) deleted = task_call ("DELETE", "job-0", NULL);
    g_autoptr(Reply) now_fits = task_call ("PUT", "job-64", NULL);

    assert_error (more, 409, "conflict", NULL);
    assert_task (moved, "job-3");
    g_assert_cmpuint (deleted->status, ==, 204);
    assert_task (now_fits, "job-64");
  }
  for (guint i = 1; i <= 64; i++) {
    g_autofree char *name = g_strdup_printf ("job-%u", i);
    g_autoptr(Reply) reply = task_call ("DELETE", name, NULL);

    g_assert_cmpuint (reply->status, ==, 204);
  }
}

/* Tasks are records: their routes do not wake a paused sandbox. */
static void
test_no_wake (void)
{
  g_autoptr(Reply) paused = call ("POST", "/v1/sandboxes/tk/pause", key_alpha, NULL);
  g_autoptr(Reply) put = task_call ("PUT", "while-paused", NULL);
  g_autoptr(Reply) got = task_call ("GET", "while-paused", NULL);
  g_autoptr(Reply) list = call ("GET", TASKS, key_alpha, NULL);
  g_autoptr(Reply) deleted = task_call ("DELETE", "while-paused", NULL);
  g_autoptr(Reply) sandbox = call ("GET", "/v1/sandboxes/tk", key_alpha, NULL);

  g_assert_cmpuint (paused->status, ==, 200);
  assert_task (put, "while-paused");
  assert_task (got, "while-paused");
  g_assert_cmpuint (list->status, ==, 200);
  g_assert_cmpuint (deleted->status, ==, 204);
  g_assert_cmpstr (json_object_get_string_member (reply_object (sandbox), "state"), ==, "paused");
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  http_test_start (ADMIN_TOKEN, &data_dir, &engine, &server);
  http_client_init (server);
  key_alpha = http_test_make_key (ADMIN_TOKEN, "alpha");
  key_beta = http_test_make_key (ADMIN_TOKEN, "beta");
  {
    g_autoptr(Reply) created = call ("POST", "/v1/sandboxes", key_alpha, "{\"name\": \"tk\"}");

    g_assert_cmpuint (created->status, ==, 201);
  }

  g_test_add_func ("/http/tasks/bodies", test_bodies);
  g_test_add_func ("/http/tasks/names", test_names);
  g_test_add_func ("/http/tasks/other-project", test_other_project);
  g_test_add_func ("/http/tasks/limit", test_limit);
  g_test_add_func ("/http/tasks/no-wake", test_no_wake);
  status = g_test_run ();

  http_client_init (NULL);
  http_test_stop (&data_dir, &engine, &server);
  g_free (key_alpha);
  g_free (key_beta);
  return status;
}
