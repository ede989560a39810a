/* agent-client-test.c: BoxAgentClient against the real guest agent, run as
 * `box-agent --connect SOCKET` on this host (BOX_AGENT names the binary).
 * The exec tests run commands as root, so they need root. */
#include "config.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "agent-test-util.h"
#include "box-agent-exec.h"
#include "box-error.h"

static void
test_connect (Agent *f, gconstpointer data)
{
  JsonObject *info;
  gint64 v = -1;

  if (!agent_connect (f))
    return;
  info = box_agent_client_get_info (f->client);
  g_assert_nonnull (info);
  g_assert_true (box_agent_json_get_int (info, "version", &v));
  g_assert_cmpint (v, ==, 1);
  g_assert_nonnull (box_agent_json_get_string (info, "agent"));
  g_assert_nonnull (box_agent_json_get_string (info, "boot_id"));
  g_assert_true (box_agent_json_get_int (info, "uptime_ms", &v));
  g_assert_cmpint (v, >=, 0);
  g_assert_true (box_agent_json_get_int (info, "window", &v));
  g_assert_cmpint (v, ==, BOX_AGENT_DEFAULT_WINDOW);
}

static void
test_ping (Agent *f, gconstpointer data)
{
  g_autoptr(JsonObject) reply = NULL;
  g_autoptr(JsonObject) reply2 = NULL;
  g_autoptr(GError) error = NULL;
  gint64 v = -1;

  if (!agent_connect (f))
    return;
  reply = agent_call (f, "ping", NULL, &error);
  g_assert_no_error (error);
  g_assert_true (box_agent_json_get_bool (reply, "ok", FALSE));
  g_assert_true (box_agent_json_get_int (reply, "uptime_ms", &v));
  g_assert_true (box_agent_json_get_int (reply, "channels", &v));
  g_assert_cmpint (v, ==, 0);

  reply2 = agent_call (f, "no-such-op", NULL, &error);
  g_assert_null (reply2);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_nonnull (strstr (error->message, "unknown_op"));
}

/* Garbage and the start of a frame on the stream before hello, as a
 * previous host connection may leave behind: the agent takes our first hello
 * (and the one its ready event makes us repeat) as that frame's payload, so
 * the client has to flush and say hello again. */
static void
test_resync (Agent *f, gconstpointer data)
{
  static const guint8 junk[] = { 0xc5, 0xb0, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x33, 0xc5, 0xff, 0x00, 0xb0 };
  g_autoptr(GBytes) half = NULL;
  g_autoptr(JsonObject) reply = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree guint8 *filler = g_malloc0 (4000);
  GOutputStream *out;
  gint64 start;

  if (f->conn == NULL)
    return;
  half = box_agent_frame_build (BOX_AGENT_FRAME_DATA, 0, 12345, filler, 4000);
  out = g_io_stream_get_output_stream (G_IO_STREAM (f->conn));
  g_output_stream_write_all (out, junk, sizeof junk, NULL, NULL, &error);
  g_assert_no_error (error);
  g_output_stream_write_all (out, g_bytes_get_data (half, NULL), 100, NULL, NULL, &error);
  g_assert_no_error (error);
  start = g_get_monotonic_time ();
  if (!agent_connect (f))
    return;
  g_assert_cmpint (g_get_monotonic_time () - start, >=, G_USEC_PER_SEC / 2);
  reply = agent_call (f, "ping", NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (reply);
}

/* ---- exec/run ------------------------------------------------------------------ */

static BoxExecResult *
run (Agent *f, const BoxExecRequest *req, GError **error)
{
  g_autoptr(GAsyncResult) res = NULL;

  box_agent_client_exec_run_async (f->client, req, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  return box_agent_client_exec_run_finish (f->client, res, error);
}

static void
assert_output (GBytes *bytes, const char *expected)
{
  g_assert_cmpmem (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), expected, strlen (expected));
}

static void
test_exec_basic (Agent *f, gconstpointer data)
{
  char *argv_true[] = { "true", NULL };
  char *argv_exit[] = { "sh", "-c", "echo out; echo err >&2; exit 3", NULL };
  char *argv_signal[] = { "sh", "-c", "kill -TERM $$", NULL };
  BoxExecRequest req = { .user = "root" };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) ping = NULL;
  gint64 channels = -1;

  if (!agent_need_root () || !agent_connect (f))
    return;
  {
    g_autoptr(BoxExecResult) r = NULL;

    req.argv = argv_true;
    r = run (f, &req, &error);
    g_assert_no_error (error);
    g_assert_cmpint (r->exit_code, ==, 0);
    g_assert_false (r->timed_out);
    g_assert_false (r->truncated);
    g_assert_cmpuint (g_bytes_get_size (r->stdout_data), ==, 0);
    g_assert_cmpuint (g_bytes_get_size (r->stderr_data), ==, 0);
  }
  {
    g_autoptr(BoxExecResult) r = NULL;

    req.argv = argv_exit;
    r = run (f, &req, &error);
    g_assert_no_error (error);
    g_assert_cmpint (r->exit_code, ==, 3);
    assert_output (r->stdout_data, "out\n");
    assert_output (r->stderr_data, "err\n");
  }
  {
    g_autoptr(BoxExecResult) r = NULL;

    req.argv = argv_signal;
    r = run (f, &req, &error);
    g_assert_no_error (error);
    g_assert_cmpint (r->exit_code, ==, 128 + SIGTERM);
    g_assert_false (r->timed_out);
  }
  /* every channel was closed by the agent */
  ping = agent_call (f, "ping", NULL, &error);
  g_assert_no_error (error);
  g_assert_true (box_agent_json_get_int (ping, "channels", &channels));
  g_assert_cmpint (channels, ==, 0);
}

static void
test_exec_stdin (Agent *f, gconstpointer data)
{
  char *argv_cat[] = { "cat", NULL };
  char *argv_wc[] = { "wc", "-c", NULL };
  char *argv_head[] = { "head", "-c", "10", NULL };
  BoxExecRequest req = { .user = "root" };
  g_autoptr(GError) error = NULL;
  gsize big_len = 3 * 1024 * 1024 + 17;
  g_autofree guint8 *big = g_malloc (big_len);

  if (!agent_need_root () || !agent_connect (f))
    return;
  for (gsize i = 0; i < big_len; i++)
    big[i] = (guint8) (i % 251);
  {
    g_autoptr(BoxExecResult) r = NULL;

    req.argv = argv_cat;
    req.stdin_data = g_bytes_new_static ("hello\n", 6);
    r = run (f, &req, &error);
    g_clear_pointer (&req.stdin_data, g_bytes_unref);
    g_assert_no_error (error);
    g_assert_cmpint (r->exit_code, ==, 0);
    assert_output (r->stdout_data, "hello\n");
  }
  {
    /* more than a window each way: stdin within credit, output credited back */
    g_autoptr(BoxExecResult) r = NULL;

    req.stdin_data = g_bytes_new_static (big, big_len);
    r = run (f, &req, &error);
    g_assert_no_error (error);
    g_assert_cmpint (r->exit_code, ==, 0);
    g_assert_cmpmem (g_bytes_get_data (r->stdout_data, NULL), g_bytes_get_size (r->stdout_data), big, big_len);
  }
  {
    g_autoptr(BoxExecResult) r = NULL;
    g_autofree char *expect = g_strdup_printf ("%" G_GSIZE_FORMAT "\n", big_len);

    req.argv = argv_wc;
    r = run (f, &req, &error);
    g_assert_no_error (error);
    assert_output (r->stdout_data, expect);
  }
  {
    /* a process that reads little of its stdin and exits */
    g_autoptr(BoxExecResult) r = NULL;

    req.argv = argv_head;
    r = run (f, &req, &error);
    g_assert_no_error (error);
    g_assert_cmpint (r->exit_code, ==, 0);
    g_assert_cmpmem (g_bytes_get_data (r->stdout_data, NULL), g_bytes_get_size (r->stdout_data), big, 10);
  }
  g_clear_pointer (&req.stdin_data, g_bytes_unref);
}

static void
test_exec_timeout (Agent *f, gconstpointer data)
{
  char *argv[] = { "sleep", "30", NULL };
  BoxExecRequest req = { .argv = argv, .user = "root", .timeout_s = 1 };
  g_autoptr(BoxExecResult) r = NULL;
  g_autoptr(GError) error = NULL;
  gint64 start;

  if (!agent_need_root () || !agent_connect (f))
    return;
  start = g_get_monotonic_time ();
  r = run (f, &req, &error);
  g_assert_no_error (error);
  g_assert_true (r->timed_out);
  g_assert_cmpint (r->exit_code, ==, 137);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 10 * G_USEC_PER_SEC);
}

static void
test_exec_errors (Agent *f, gconstpointer data)
{
  char *argv_true[] = { "true", NULL };
  char *argv_missing[] = { "no-such-command-here", NULL };
  char *argv_empty[] = { NULL };
  BoxExecRequest req = { .argv = argv_true, .user = "no-such-user-here" };
  g_autoptr(GError) error = NULL;
  BoxExecResult *r;

  if (!agent_need_root () || !agent_connect (f))
    return;
  r = run (f, &req, &error);
  g_assert_null (r);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "no-such-user-here"));
  g_clear_error (&error);

  req.user = "root";
  req.argv = argv_missing;
  r = run (f, &req, &error);
  g_assert_null (r);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "no-such-command-here"));
  g_clear_error (&error);

  req.argv = argv_true;
  req.cwd = "/no/such/dir";
  r = run (f, &req, &error);
  g_assert_null (r);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);

  req.cwd = NULL;
  req.argv = argv_empty;
  r = run (f, &req, &error);
  g_assert_null (r);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
}

static void
test_exec_env (Agent *f, gconstpointer data)
{
  char *argv[] = { "sh", "-c", "echo \"$FOO|$BAR|$HOME|$USER|$LOGNAME|$(pwd)\"", NULL };
  g_autoptr(GHashTable) env = g_hash_table_new (g_str_hash, g_str_equal);
  BoxExecRequest req = { .argv = argv, .user = "root", .cwd = "/tmp", .env = env };
  g_autoptr(JsonObject) args = json_object_new ();
  JsonObject *set = json_object_new ();
  g_autoptr(JsonObject) reply = NULL;
  g_autoptr(BoxExecResult) r = NULL;
  g_autoptr(GError) error = NULL;

  if (!agent_need_root () || !agent_connect (f))
    return;
  /* the sandbox env (set-env), then the call's env on top */
  json_object_set_string_member (set, "FOO", "sandbox");
  json_object_set_string_member (set, "BAR", "from-sandbox");
  json_object_set_object_member (args, "env", set);
  reply = agent_call (f, "set-env", args, &error);
  g_assert_no_error (error);
  g_hash_table_insert (env, "FOO", "call");
  r = run (f, &req, &error);
  g_assert_no_error (error);
  g_assert_cmpint (r->exit_code, ==, 0);
  assert_output (r->stdout_data, "call|from-sandbox|/root|root|root|/tmp\n");
}

static void
test_exec_truncate (Agent *f, gconstpointer data)
{
  char *argv[] = { "sh", "-c", "head -c 20971520 /dev/zero; echo tail >&2", NULL };
  BoxExecRequest req = { .argv = argv, .user = "root" };
  g_autoptr(BoxExecResult) r = NULL;
  g_autoptr(GError) error = NULL;

  if (!agent_need_root () || !agent_connect (f))
    return;
  r = run (f, &req, &error);
  g_assert_no_error (error);
  g_assert_cmpint (r->exit_code, ==, 0);
  g_assert_true (r->truncated);
  g_assert_cmpuint (g_bytes_get_size (r->stdout_data), ==, 16 * 1024 * 1024);
  assert_output (r->stderr_data, "tail\n");
}

static gboolean
cancel_later (gpointer data)
{
  g_cancellable_cancel (data);
  return G_SOURCE_REMOVE;
}

/* Cancelling a run closes its channel: the process gets SIGHUP. */
static void
test_exec_cancel (Agent *f, gconstpointer data)
{
  char *argv[] = { "sleep", "100", NULL };
  BoxExecRequest req = { .argv = argv, .user = "root" };
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GError) error = NULL;
  gint64 start, channels = -1;

  if (!agent_need_root () || !agent_connect (f))
    return;
  start = g_get_monotonic_time ();
  box_agent_client_exec_run_async (f->client, &req, cancellable, agent_test_store_result, &res);
  g_timeout_add (300, cancel_later, cancellable);
  agent_test_wait_result (&res);
  g_assert_null (box_agent_client_exec_run_finish (f->client, res, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 10 * G_USEC_PER_SEC);
  g_clear_error (&error);
  do {
    g_autoptr(JsonObject) ping = agent_call (f, "ping", NULL, &error);

    g_assert_no_error (error);
    g_assert_true (box_agent_json_get_int (ping, "channels", &channels));
    if (channels > 0)
      agent_test_spin (20);
    g_assert_cmpint (g_get_monotonic_time () - start, <, 10 * G_USEC_PER_SEC);
  } while (channels > 0);
}

/* A cancelled call completes at once; its late reply is ignored. */
static void
test_call_cancel (Agent *f, gconstpointer data)
{
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) reply = NULL;
  g_autoptr(GError) error = NULL;

  if (!agent_connect (f))
    return;
  agent_signal (f, SIGSTOP);
  box_agent_client_call_async (f->client, "ping", NULL, cancellable, agent_test_store_result, &res);
  agent_test_spin (50);
  g_assert_null (res);
  g_cancellable_cancel (cancellable);
  agent_test_wait_result (&res);
  g_assert_null (box_agent_client_call_finish (f->client, res, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  agent_signal (f, SIGCONT);
  reply = agent_call (f, "ping", NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (reply);
}

static void
set_flag (BoxAgentChannel *channel, gpointer data)
{
  *(gboolean *) data = TRUE;
}

/* The agent dies: ::closed once; pending calls, channels and writes fail. */
static void
test_closed (Agent *f, gconstpointer data)
{
  char *argv[] = { "cat", NULL };
  g_autoptr(JsonObject) args = json_object_new ();
  JsonArray *a = json_array_new ();
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GAsyncResult) wres = NULL;
  g_autoptr(BoxAgentChannel) channel = NULL;
  g_autoptr(GBytes) bytes = g_bytes_new_static ("x", 1);
  g_autoptr(GError) error = NULL;
  gboolean channel_closed = FALSE;

  if (!agent_need_root () || !agent_connect (f))
    return;
  json_array_add_string_element (a, argv[0]);
  json_object_set_array_member (args, "argv", a);
  json_object_set_string_member (args, "user", "root");
  box_agent_client_open_channel_async (f->client, "exec", args, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  channel = box_agent_client_open_channel_finish (f->client, res, &error);
  g_assert_no_error (error);
  g_clear_object (&res);
  g_signal_connect (channel, "closed", G_CALLBACK (set_flag), &channel_closed);

  agent_signal (f, SIGSTOP);
  box_agent_client_call_async (f->client, "ping", NULL, NULL, agent_test_store_result, &res);
  agent_test_spin (50);
  g_assert_null (res);
  /* SIGKILL works on a stopped process */
  g_subprocess_force_exit (f->agent);
  agent_test_wait_result (&res);
  g_assert_null (box_agent_client_call_finish (f->client, res, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_assert_cmpstr (error->message, ==, "the sandbox's agent went away");
  g_clear_error (&error);
  g_clear_object (&res);
  g_assert_cmpuint (f->n_closed, ==, 1);
  g_assert_error (f->closed_error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  agent_test_spin (20);
  g_assert_true (channel_closed);
  g_assert_true (box_agent_channel_is_closed (channel));

  box_agent_channel_write_async (channel, 0, bytes, NULL, agent_test_store_result, &wres);
  agent_test_wait_result (&wres);
  g_assert_false (box_agent_channel_write_finish (channel, wres, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_clear_error (&error);
  box_agent_client_call_async (f->client, "ping", NULL, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  g_assert_null (box_agent_client_call_finish (f->client, res, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_assert_cmpuint (f->n_closed, ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  agent_test_init ();
  /* a child that dies writing to a closed pipe must not kill the test */
  signal (SIGPIPE, SIG_IGN);

  g_test_add ("/agent/connect", Agent, NULL, agent_setup, test_connect, agent_teardown);
  g_test_add ("/agent/ping", Agent, NULL, agent_setup, test_ping, agent_teardown);
  g_test_add ("/agent/resync", Agent, NULL, agent_setup, test_resync, agent_teardown);
  g_test_add ("/agent/exec/basic", Agent, NULL, agent_setup, test_exec_basic, agent_teardown);
  g_test_add ("/agent/exec/stdin", Agent, NULL, agent_setup, test_exec_stdin, agent_teardown);
  g_test_add ("/agent/exec/timeout", Agent, NULL, agent_setup, test_exec_timeout, agent_teardown);
  g_test_add ("/agent/exec/errors", Agent, NULL, agent_setup, test_exec_errors, agent_teardown);
  g_test_add ("/agent/exec/env", Agent, NULL, agent_setup, test_exec_env, agent_teardown);
  g_test_add ("/agent/exec/truncate", Agent, NULL, agent_setup, test_exec_truncate, agent_teardown);
  g_test_add ("/agent/exec/cancel", Agent, NULL, agent_setup, test_exec_cancel, agent_teardown);
  g_test_add ("/agent/call-cancel", Agent, NULL, agent_setup, test_call_cancel, agent_teardown);
  g_test_add ("/agent/closed", Agent, NULL, agent_setup, test_closed, agent_teardown);
  return g_test_run ();
}
