/* box-agent-exec.c: the one-shot exec (POST /exec/run) on an agent channel,
 * and the arguments every exec shares. */
#include "config.h"

#include "box-agent-exec.h"
#include "box-agent-private.h"
#include "box-error.h"

static JsonObject *
env_object (GHashTable *env)
{
  JsonObject *obj = json_object_new ();
  GHashTableIter iter;
  gpointer key, value;

  if (env != NULL) {
    g_hash_table_iter_init (&iter, env);
    while (g_hash_table_iter_next (&iter, &key, &value))
      json_object_set_string_member (obj, key, value);
  }
  return obj;
}

JsonObject *
box_agent_exec_args_new (char **argv, GHashTable *env, const char *cwd, const char *user)
{
  JsonObject *args = json_object_new ();
  JsonArray *array = json_array_new ();

  for (guint i = 0; argv[i] != NULL; i++)
    json_array_add_string_element (array, argv[i]);
  json_object_set_array_member (args, "argv", array);
  if (env != NULL && g_hash_table_size (env) > 0)
    json_object_set_object_member (args, "env", env_object (env));
  if (cwd != NULL)
    json_object_set_string_member (args, "cwd", cwd);
  if (user != NULL)
    json_object_set_string_member (args, "user", user);
  return args;
}

typedef struct {
  BoxAgentChannel *channel;
  GByteArray *out[3];           /* [1] stdout, [2] stderr */
  gboolean truncated;
  gboolean done;
  GSource *cancel_source;
} ExecRun;

static void
exec_run_free (ExecRun *run)
{
  if (run->cancel_source != NULL) {
    g_source_destroy (run->cancel_source);
    g_source_unref (run->cancel_source);
  }
  g_clear_object (&run->channel);
  for (guint i = 0; i < G_N_ELEMENTS (run->out); i++)
    if (run->out[i] != NULL)
      g_byte_array_unref (run->out[i]);
  g_free (run);
}

/* Complete @task once: with @result, or with @error (both taken). */
static void
exec_complete (GTask *task, BoxExecResult *result, GError *error)
{
  ExecRun *run = g_task_get_task_data (task);

  if (run->done) {
    box_exec_result_free (result);
    g_clear_error (&error);
    return;
  }
  run->done = TRUE;
  if (run->channel != NULL)
    g_signal_handlers_disconnect_matched (run->channel, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL, task);
  if (run->cancel_source != NULL) {
    g_source_destroy (run->cancel_source);
    g_clear_pointer (&run->cancel_source, g_source_unref);
  }
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, result, (GDestroyNotify) box_exec_result_free);
  /* the reference the signal handlers stood for */
  g_object_unref (task);
}

static void
on_data (BoxAgentChannel *channel, guint stream, GBytes *bytes, gpointer data)
{
  ExecRun *run = g_task_get_task_data (G_TASK (data));
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (bytes, &len);

  if (stream == 1 || stream == 2) {
    GByteArray *buf = run->out[stream];
    gsize room = BOX_EXEC_OUTPUT_LIMIT - MIN (buf->len, BOX_EXEC_OUTPUT_LIMIT);

    /* the agent cuts at the limit itself; this only bounds a wrong one */
    if (len > room)
      run->truncated = TRUE;
    g_byte_array_append (buf, p, (guint) MIN (len, room));
  }
  box_agent_channel_consumed (channel, len);
}

static void
on_ctrl (BoxAgentChannel *channel, JsonObject *msg, gpointer data)
{
  GTask *task = data;
  ExecRun *run = g_task_get_task_data (task);
  BoxExecResult *result;
  gint64 code = -1;

  if (g_strcmp0 (box_agent_json_get_string (msg, "event"), "exit") != 0)
    return;
  if (!box_agent_json_get_int (msg, "code", &code) || code < 0 || code > 255) {
    exec_complete (task, NULL, g_error_new (BOX_ERROR, BOX_ERROR_INTERNAL,
                                            "the agent's exit event has no valid code"));
    return;
  }
  result = g_new0 (BoxExecResult, 1);
  result->exit_code = (int) code;
  result->timed_out = box_agent_json_get_bool (msg, "timed_out", FALSE);
  result->truncated = run->truncated ||
                      box_agent_json_get_bool (msg, "stdout_truncated", FALSE) ||
                      box_agent_json_get_bool (msg, "stderr_truncated", FALSE);
  result->stdout_data = g_byte_array_free_to_bytes (g_steal_pointer (&run->out[1]));
  result->stderr_data = g_byte_array_free_to_bytes (g_steal_pointer (&run->out[2]));
  exec_complete (task, result, NULL);
}

static void
on_closed (BoxAgentChannel *channel, gpointer data)
{
  /* closed before the exit event: the connection (or the VM) went away */
  exec_complete (G_TASK (data), NULL, g_error_new_literal (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                                                           BOX_AGENT_GONE_MESSAGE));
}

static gboolean
exec_cancelled (GCancellable *cancellable, gpointer data)
{
  GTask *task = data;
  ExecRun *run = g_task_get_task_data (task);

  g_object_ref (task);
  box_agent_channel_close (run->channel);
  exec_complete (task, NULL, g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CANCELLED,
                                                  "Operation was cancelled"));
  g_object_unref (task);
  return G_SOURCE_REMOVE;
}

static void
stdin_written (GObject *source, GAsyncResult *result, gpointer data)
{
  g_autoptr(GError) error = NULL;

  /* a process that exits without reading all of its stdin is not an error */
  if (!box_agent_channel_write_finish (BOX_AGENT_CHANNEL (source), result, &error))
    g_debug ("exec stdin: %s", error->message);
}

static void
exec_opened (GObject *source, GAsyncResult *result, gpointer data)
{
  g_autoptr(GTask) task = data;
  ExecRun *run = g_task_get_task_data (task);
  GError *error = NULL;
  GBytes *stdin_data = g_object_get_data (G_OBJECT (task), "stdin");

  run->channel = box_agent_client_open_channel_finish (BOX_AGENT_CLIENT (source), result, &error);
  if (run->channel == NULL) {
    g_task_return_error (task, error);
    return;
  }
  /* the handlers hold a reference on the task until exec_complete() */
  g_signal_connect (run->channel, "data", G_CALLBACK (on_data), task);
  g_signal_connect (run->channel, "ctrl", G_CALLBACK (on_ctrl), task);
  g_signal_connect (run->channel, "closed", G_CALLBACK (on_closed), task);
  g_object_ref (task);
  run->cancel_source = box_agent_watch_cancellable (box_agent_client_get_context (BOX_AGENT_CLIENT (source)),
                                                    g_task_get_cancellable (task), exec_cancelled, task);
  if (stdin_data != NULL && g_bytes_get_size (stdin_data) > 0)
    box_agent_channel_write_async (run->channel, 0, stdin_data, NULL, stdin_written, NULL);
  box_agent_channel_send_eof (run->channel, 0);
}

void
box_agent_client_exec_run_async (BoxAgentClient *self, const BoxExecRequest *request,
                                 GCancellable *cancellable, GAsyncReadyCallback callback,
                                 gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  g_autoptr(JsonObject) args = NULL;
  ExecRun *run;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  g_return_if_fail (request != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_exec_run_async);
  if (request->argv == NULL || request->argv[0] == NULL) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID, "cmd must not be empty");
    return;
  }
  run = g_new0 (ExecRun, 1);
  run->out[1] = g_byte_array_new ();
  run->out[2] = g_byte_array_new ();
  g_task_set_task_data (task, run, (GDestroyNotify) exec_run_free);
  if (request->stdin_data != NULL)
    g_object_set_data_full (G_OBJECT (task), "stdin", g_bytes_ref (request->stdin_data),
                            (GDestroyNotify) g_bytes_unref);

  args = box_agent_exec_args_new (request->argv, request->env, request->cwd, request->user);
  if (request->timeout_s > 0)
    json_object_set_int_member (args, "timeout_ms", (gint64) request->timeout_s * 1000);
  json_object_set_int_member (args, "limit", BOX_EXEC_OUTPUT_LIMIT);

  box_agent_client_open_channel_async (self, "exec", args, cancellable, exec_opened,
                                       g_steal_pointer (&task));
}

BoxExecResult *
box_agent_client_exec_run_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- set-env ------------------------------------------------------------- */

/* set-env and trust-ca: an empty answer */
static void
env_set (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  g_autoptr(JsonObject) reply = NULL;
  GError *error = NULL;

  reply = box_agent_client_call_finish (BOX_AGENT_CLIENT (source), result, &error);
  if (reply == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

void
box_agent_client_set_env_async (BoxAgentClient *self, GHashTable *env, GCancellable *cancellable,
                                GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(JsonObject) args = json_object_new ();
  GTask *task;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_set_env_async);
  json_object_set_object_member (args, "env", env_object (env));
  box_agent_client_call_async (self, "set-env", args, cancellable, env_set, task);
}

gboolean
box_agent_client_set_env_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* ---- trust-ca ------------------------------------------------------------ */

void
box_agent_client_trust_ca_async (BoxAgentClient *self, GBytes *pem, GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(JsonObject) args = json_object_new ();
  g_autofree char *text = NULL;
  gsize len = 0;
  const char *data;
  GTask *task;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_trust_ca_async);
  data = g_bytes_get_data (pem, &len);
  text = g_strndup (data, len);
  json_object_set_string_member (args, "pem", text);
  box_agent_client_call_async (self, "trust-ca", args, cancellable, env_set, task);
}

gboolean
box_agent_client_trust_ca_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}
