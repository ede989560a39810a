/* box-engine-files.c: the sandbox's files (box-engine.h "files"): typed
 * requests through the agent (box-agent-files.h), and the one "hold, call
 * the agent, release" sequence of the sub-API (box_engine_run_held()). */
#include "config.h"

#include "box-engine-private.h"

/* ---- hold, call the agent, release ---------------------------------------- */

typedef struct {
  BoxEngine         *engine;
  GTask             *task;         /* until the hold is there */
  BoxEngineHeldFunc  func;
  char              *sandbox_id;   /* held while set */
} Held;

static void
held_free (gpointer data, GClosure *closure)
{
  Held *held = data;

  if (held->sandbox_id != NULL)
    box_engine_release (held->engine, held->sandbox_id);
  g_free (held->sandbox_id);
  g_clear_object (&held->task);
  g_object_unref (held->engine);
  g_free (held);
}

static void
on_task_completed (GTask *task, GParamSpec *pspec, gpointer user_data)
{
  /* the task's callback ran: the hold ends (held_free), once */
  g_signal_handlers_disconnect_by_func (task, on_task_completed, user_data);
}

static void
run_held_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Held *held = user_data;
  BoxEngine *self = BOX_ENGINE (source);
  g_autoptr(GTask) task = g_steal_pointer (&held->task);
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(BoxAgentClient) agent = NULL;
  GError *error = NULL;

  sandbox = box_engine_hold_finish (self, result, &error);
  if (sandbox != NULL) {
    held->sandbox_id = g_strdup (sandbox->id);
    agent = box_engine_get_agent (self, sandbox->id, &error);
  }
  if (agent == NULL) {
    held_free (held, NULL);
    g_task_return_error (task, error);
    return;
  }
  /* the hold ends once the task completed, whoever completes it */
  g_signal_connect_data (task, "notify::completed", G_CALLBACK (on_task_completed), held,
                         held_free, 0);
  held->func (self, sandbox->id, agent, g_steal_pointer (&task));
}

void
box_engine_run_held (BoxEngine *self, const char *project, const char *id_or_name, GTask *task,
                     BoxEngineHeldFunc func)
{
  Held *held = g_new0 (Held, 1);

  held->engine = g_object_ref (self);
  held->task = task;
  held->func = func;
  box_engine_hold_async (self, project, id_or_name, g_task_get_cancellable (task), run_held_cb,
                         held);
}

/* ---- one request ---------------------------------------------------------- */

static void
fs_call_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  BoxFileInfo *info = NULL;
  GError *error = NULL;

  if (box_agent_client_fs_call_finish (BOX_AGENT_CLIENT (source), result, &info, &error))
    g_task_return_pointer (task, info, (GDestroyNotify) box_file_info_free);
  else
    g_task_return_error (task, error);
}

static void
fs_call_run (BoxEngine *self, const char *sandbox_id, BoxAgentClient *agent, GTask *task)
{
  box_agent_client_fs_call_async (agent, g_task_get_task_data (task), g_task_get_cancellable (task),
                                  fs_call_done, task);
}

void
box_engine_fs_call_async (BoxEngine *self, const char *project, const char *id_or_name,
                          const BoxFileRequest *request, GCancellable *cancellable,
                          GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (id_or_name != NULL);
  g_return_if_fail (request != NULL && request->op <= BOX_FILE_OP_DELETE);

  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_fs_call_async);
  g_task_set_task_data (task, box_file_request_copy (request), (GDestroyNotify) box_file_request_free);
  box_engine_run_held (self, project, id_or_name, task, fs_call_run);
}

gboolean
box_engine_fs_call_finish (BoxEngine *self, GAsyncResult *result, BoxFileInfo **info,
                           GError **error)
{
  g_autoptr(BoxFileInfo) found = NULL;

  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  found = g_task_propagate_pointer (G_TASK (result), error);
  if (g_task_had_error (G_TASK (result)))
    return FALSE;
  if (info != NULL)
    *info = g_steal_pointer (&found);
  return TRUE;
}

/* ---- transfers and watches (held) ----------------------------------------- */

static void
fs_open_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  gpointer object;

  if (g_task_get_source_tag (task) == box_engine_fs_watch_async)
    object = box_agent_client_fs_watch_finish (BOX_AGENT_CLIENT (source), result, &error);
  else
    object = box_agent_client_fs_open_finish (BOX_AGENT_CLIENT (source), result, &error);
  if (object == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, object, g_object_unref);
}

static void
fs_open (BoxEngine *self, const char *sandbox_id, const BoxFileRequest *request, gpointer tag,
         GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(BoxAgentClient) agent = NULL;
  GError *error = NULL;

  g_task_set_source_tag (task, tag);
  agent = box_engine_get_agent (self, sandbox_id, &error);
  if (agent == NULL) {
    g_task_return_error (task, error);
    return;
  }
  if (tag == box_engine_fs_watch_async)
    box_agent_client_fs_watch_async (agent, request, cancellable, fs_open_done,
                                     g_steal_pointer (&task));
  else
    box_agent_client_fs_open_async (agent, request, cancellable, fs_open_done,
                                    g_steal_pointer (&task));
}

void
box_engine_fs_open_async (BoxEngine *self, const char *sandbox_id, const BoxFileRequest *request,
                          GCancellable *cancellable, GAsyncReadyCallback callback,
                          gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL);
  g_return_if_fail (request != NULL && request->op >= BOX_FILE_OP_READ &&
                    request->op <= BOX_FILE_OP_TAR_PUT);

  fs_open (self, sandbox_id, request, box_engine_fs_open_async, cancellable, callback, user_data);
}

BoxFileTransfer *
box_engine_fs_open_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_engine_fs_watch_async (BoxEngine *self, const char *sandbox_id, const BoxFileRequest *request,
                           GCancellable *cancellable, GAsyncReadyCallback callback,
                           gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL);
  g_return_if_fail (request != NULL && request->op == BOX_FILE_OP_WATCH);

  fs_open (self, sandbox_id, request, box_engine_fs_watch_async, cancellable, callback, user_data);
}

BoxFileWatch *
box_engine_fs_watch_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
