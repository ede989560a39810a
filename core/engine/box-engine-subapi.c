/* box-engine-subapi.c: what every call under /v1/sandboxes/{sandbox}/ shares:
 * waking the sandbox, holding it awake, reaching its agent; and the
 * one-shot exec built on them. */
#include "config.h"

#include "box-agent-client.h"
#include "box-engine-private.h"
#include "box-requests.h"

static void
hold_woken (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  BoxSandbox *sandbox = box_engine_change_state_finish (self, result, &error);
  BoxSandboxRuntime *rt;

  if (sandbox == NULL) {
    g_task_return_error (task, error);
    return;
  }
  rt = g_hash_table_lookup (self->runtime, sandbox->id);
  g_assert (rt != NULL);
  rt->holds++;
  rt->last_active = box_engine_now (self);
  g_task_return_pointer (task, sandbox, (GDestroyNotify) box_sandbox_free);
}

void
box_engine_hold_async (BoxEngine *self, const char *project, const char *id_or_name,
                       GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (id_or_name != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  GTask *task = g_task_new (self, cancellable, callback, user_data);

  g_task_set_source_tag (task, box_engine_hold_async);
  /* A wake of a running sandbox is a no-op that still goes through the
   * sandbox's lock, so the hold starts after any operation in progress. */
  box_engine_change_state_async (self, project, id_or_name, BOX_STATE_REQUEST_WAKE, cancellable,
                                 hold_woken, task);
}

BoxSandbox *
box_engine_hold_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_engine_release (BoxEngine *self, const char *sandbox_id)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  BoxSandboxRuntime *rt = g_hash_table_lookup (self->runtime, sandbox_id);

  if (rt == NULL)
    return;   /* deleted meanwhile */
  g_return_if_fail (rt->holds > 0);
  rt->holds--;
  rt->last_active = box_engine_now (self);
}

void
box_engine_touch (BoxEngine *self, const char *sandbox_id)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  BoxSandboxRuntime *rt = g_hash_table_lookup (self->runtime, sandbox_id);

  if (rt != NULL)
    rt->last_active = box_engine_now (self);
}

BoxAgentClient *
box_engine_get_agent (BoxEngine *self, const char *sandbox_id, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (sandbox_id != NULL, NULL);
  /* ask rather than fail: a hypervisor that runs no VM has no agent */
  if (!box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_GUEST_AGENT)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED, "the %s hypervisor runs no VM",
                 box_plugin_get_name (BOX_PLUGIN (self->hypervisor)));
    return NULL;
  }
  return box_hypervisor_get_agent (self->hypervisor, sandbox_id, error);
}

/* ---- exec/run ---------------------------------------------------------- */

typedef struct {
  BoxEngine      *engine;
  BoxExecRequest *request;
  char           *sandbox_id;
  GCancellable   *cancellable;     /* ours: fired when the sandbox stops running */
  GCancellable   *caller;          /* the caller's, forwarded to ours */
  gulong          cancel_id;
  gulong          interrupted_id;  /* on the engine */
  char           *interrupted;     /* why, once it happened */
} ExecRun;

static void
exec_run_free (ExecRun *run)
{
  if (run->caller != NULL) {
    g_cancellable_disconnect (run->caller, run->cancel_id);
    g_object_unref (run->caller);
  }
  if (run->interrupted_id != 0)
    g_signal_handler_disconnect (run->engine, run->interrupted_id);
  g_clear_pointer (&run->request, box_exec_request_free);
  g_free (run->sandbox_id);
  g_free (run->interrupted);
  g_clear_object (&run->cancellable);
  g_free (run);
}

static void
forward_cancel (GCancellable *caller, gpointer user_data)
{
  g_cancellable_cancel (G_CANCELLABLE (user_data));
}

/* A command cannot finish in a sandbox that pauses, stops or goes away
 * under it: the call ends then instead of hanging until a wake. */
static void
exec_run_interrupted (BoxEngine *engine, const char *sandbox_id, const char *why,
                      gpointer user_data)
{
  ExecRun *run = user_data;

  if (g_strcmp0 (sandbox_id, run->sandbox_id) != 0 || run->interrupted != NULL)
    return;
  run->interrupted = g_strdup (why);
  g_cancellable_cancel (run->cancellable);
}

static void
exec_run_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  ExecRun *run = g_task_get_task_data (task);
  GError *error = NULL;
  BoxExecResult *exec_result;

  exec_result = box_agent_client_exec_run_finish (BOX_AGENT_CLIENT (source), result, &error);
  box_engine_release (self, run->sandbox_id);
  if (exec_result == NULL) {
    if (run->interrupted != NULL && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
      g_clear_error (&error);
      error = g_error_new (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                           "the sandbox went away while the command ran (%s); its exit status is unknown",
                           run->interrupted);
    }
    g_task_return_error (task, error);
    return;
  }
  g_task_return_pointer (task, exec_result, (GDestroyNotify) box_exec_result_free);
}

static void
exec_run_held (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  GTask *task = user_data;
  ExecRun *run = g_task_get_task_data (task);
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(BoxAgentClient) agent = NULL;
  GError *error = NULL;

  sandbox = box_engine_hold_finish (self, result, &error);
  if (sandbox == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  run->sandbox_id = g_strdup (sandbox->id);
  agent = box_engine_get_agent (self, sandbox->id, &error);
  if (agent == NULL) {
    box_engine_release (self, run->sandbox_id);
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  run->interrupted_id = g_signal_connect (self, "sandbox-interrupted",
                                          G_CALLBACK (exec_run_interrupted), run);
  box_agent_client_exec_run_async (agent, run->request, run->cancellable, exec_run_done, task);
}

void
box_engine_exec_run_async (BoxEngine *self, const char *project, const char *id_or_name,
                           const BoxExecRequest *request, GCancellable *cancellable,
                           GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  ExecRun *run = g_new0 (ExecRun, 1);

  g_task_set_source_tag (task, box_engine_exec_run_async);
  run->engine = self;
  run->request = box_exec_request_copy (request);
  run->cancellable = g_cancellable_new ();
  if (cancellable != NULL) {
    run->caller = g_object_ref (cancellable);
    run->cancel_id = g_cancellable_connect (cancellable, G_CALLBACK (forward_cancel),
                                            g_object_ref (run->cancellable), g_object_unref);
  }
  g_task_set_task_data (task, run, (GDestroyNotify) exec_run_free);
  box_engine_hold_async (self, project, id_or_name, cancellable, exec_run_held, task);
}

BoxExecResult *
box_engine_exec_run_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
