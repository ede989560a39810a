/* box-engine-subapi.c: what every call under /v1/sandboxes/{sandbox}/ shares:
 * waking the sandbox, holding it awake, reaching its agent (hold, call the
 * agent, release: box_engine_agent_task()); and the one-shot exec built on
 * them. */
#include "config.h"

#include "box-agent-exec.h"
#include "box-engine-private.h"

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

/* hold_running: under the sandbox's lock, so that a pause or stop in
 * progress has settled; holds only a sandbox that runs. */
static void
hold_running_locked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  g_autoptr(GTask) task = user_data;
  const char *id = g_task_get_task_data (task);
  GError *error = NULL;
  g_autoptr(BoxSandbox) sandbox = box_engine_get_sandbox (self, NULL, id, &error);
  BoxSandboxRuntime *rt;

  if (sandbox == NULL) {
    box_engine_unlock_sandbox (self, id);
    g_task_return_error (task, error);
    return;
  }
  if (sandbox->state != BOX_SANDBOX_STATE_RUNNING) {
    box_engine_unlock_sandbox (self, id);
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_CONFLICT,
                             "the sandbox is %s and wake is false",
                             box_sandbox_state_to_string (sandbox->state));
    return;
  }
  rt = g_hash_table_lookup (self->runtime, sandbox->id);
  g_assert (rt != NULL);
  rt->holds++;
  rt->last_active = box_engine_now (self);
  box_engine_unlock_sandbox (self, id);
  g_task_return_pointer (task, g_steal_pointer (&sandbox), (GDestroyNotify) box_sandbox_free);
}

void
box_engine_hold_running_async (BoxEngine *self, const char *project, const char *id_or_name,
                               GCancellable *cancellable, GAsyncReadyCallback callback,
                               gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (id_or_name != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  GError *error = NULL;
  g_autoptr(BoxSandbox) sandbox = box_engine_get_sandbox (self, project, id_or_name, &error);

  g_task_set_source_tag (task, box_engine_hold_running_async);
  if (sandbox == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  g_task_set_task_data (task, g_strdup (sandbox->id), g_free);
  box_engine_lock_sandbox_async (self, sandbox->id, hold_running_locked, task);
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

/* ---- hold, call the agent, release ----------------------------------- */

struct _BoxEngineHold {
  BoxEngine *engine;
  char      *sandbox_id;
};

static void
hold_free (BoxEngineHold *hold)
{
  box_engine_release (hold->engine, hold->sandbox_id);
  g_object_unref (hold->engine);
  g_free (hold->sandbox_id);
  g_free (hold);
}

static void
hold_touch (gpointer data)
{
  BoxEngineHold *hold = data;

  box_engine_touch (hold->engine, hold->sandbox_id);
}

static void
hold_release (gpointer data)
{
  hold_free (data);
}

const BoxAgentKeeper box_engine_hold_keeper = { hold_touch, hold_release };

static GQuark
hold_quark (void)
{
  return g_quark_from_static_string ("box-engine-hold");
}

void
box_engine_task_release (GTask *task)
{
  g_object_set_qdata (G_OBJECT (task), hold_quark (), NULL);
}

BoxEngineHold *
box_engine_task_steal_hold (GTask *task)
{
  return g_object_steal_qdata (G_OBJECT (task), hold_quark ());
}

const char *
box_engine_task_sandbox (GTask *task)
{
  BoxEngineHold *hold = g_object_get_qdata (G_OBJECT (task), hold_quark ());

  return hold != NULL ? hold->sandbox_id : NULL;
}

typedef struct {
  BoxEngineAgentFunc func;
  GTask *task;
} AgentCall;

void
box_engine_agent_task_held (BoxEngine *self, const char *sandbox_id, gboolean held,
                            BoxEngineAgentFunc func, GTask *task)
{
  g_autoptr(BoxAgentClient) agent = NULL;
  GError *error = NULL;

  if (held) {
    BoxEngineHold *hold = g_new0 (BoxEngineHold, 1);

    hold->engine = g_object_ref (self);
    hold->sandbox_id = g_strdup (sandbox_id);
    g_object_set_qdata_full (G_OBJECT (task), hold_quark (), hold, (GDestroyNotify) hold_free);
  }
  agent = box_engine_get_agent (self, sandbox_id, &error);
  if (agent == NULL) {
    box_engine_task_release (task);
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  func (self, agent, task);
}

static void
agent_task_held (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  AgentCall *call = user_data;
  GTask *task = call->task;
  BoxEngineAgentFunc func = call->func;
  g_autoptr(BoxSandbox) sandbox = NULL;
  GError *error = NULL;

  g_free (call);
  sandbox = box_engine_hold_finish (self, result, &error);
  if (sandbox == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  box_engine_agent_task_held (self, sandbox->id, TRUE, func, task);
}

void
box_engine_agent_task (BoxEngine *self, const char *project, const char *id_or_name,
                       BoxEngineAgentFunc func, GTask *task)
{
  AgentCall *call = g_new0 (AgentCall, 1);

  call->func = func;
  call->task = task;
  box_engine_hold_async (self, project, id_or_name, g_task_get_cancellable (task),
                         agent_task_held, call);
}

/* ---- exec/run ---------------------------------------------------------- */

typedef struct {
  BoxEngine      *engine;
  BoxExecRequest *request;
  GCancellable   *cancellable;     /* ours: fired when the sandbox stops running */
  GCancellable   *caller;          /* the caller's, forwarded to ours */
  gulong          cancel_id;
  gulong          interrupted_id;  /* on the engine */
  char           *sandbox_id;
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
  ExecRun *run = g_task_get_task_data (task);
  GError *error = NULL;
  BoxExecResult *exec_result;

  exec_result = box_agent_client_exec_run_finish (BOX_AGENT_CLIENT (source), result, &error);
  box_engine_task_release (task);
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
exec_run_start (BoxEngine *self, BoxAgentClient *agent, GTask *task)
{
  ExecRun *run = g_task_get_task_data (task);

  run->sandbox_id = g_strdup (box_engine_task_sandbox (task));
  run->interrupted_id = g_signal_connect (self, "sandbox-interrupted",
                                          G_CALLBACK (exec_run_interrupted), run);
  box_agent_client_exec_run_async (agent, run->request, run->cancellable, exec_run_done, task);
}

void
box_engine_exec_run_async (BoxEngine *self, const char *project, const char *id_or_name,
                           const BoxExecRequest *request, GCancellable *cancellable,
                           GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;
  ExecRun *run;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (request != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_exec_run_async);
  run = g_new0 (ExecRun, 1);
  run->engine = self;
  run->request = box_exec_request_copy (request);
  run->cancellable = g_cancellable_new ();
  if (cancellable != NULL) {
    run->caller = g_object_ref (cancellable);
    run->cancel_id = g_cancellable_connect (cancellable, G_CALLBACK (forward_cancel),
                                            g_object_ref (run->cancellable), g_object_unref);
  }
  g_task_set_task_data (task, run, (GDestroyNotify) exec_run_free);
  box_engine_agent_task (self, project, id_or_name, exec_run_start, task);
}

BoxExecResult *
box_engine_exec_run_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
