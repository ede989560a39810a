/* box-engine-files.c: the sandbox's files (box-engine.h "files"): typed
 * requests through the agent (box-agent-files.h), held with the sub-API's
 * one "hold, call the agent, release" (box_engine_agent_task()). */
#include "config.h"

#include "box-engine-private.h"

/* ---- one request ---------------------------------------------------------- */

static void
fs_call_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  BoxFileInfo *info = NULL;
  GError *error = NULL;

  box_engine_task_release (task);
  if (box_agent_client_fs_call_finish (BOX_AGENT_CLIENT (source), result, &info, &error))
    g_task_return_pointer (task, info, (GDestroyNotify) box_file_info_free);
  else
    g_task_return_error (task, error);
}

static void
fs_call_run (BoxEngine *self, BoxAgentClient *agent, GTask *task)
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
  box_engine_agent_task (self, project, id_or_name, fs_call_run, task);
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
  const BoxFileRequest *request = g_task_get_task_data (task);
  GError *error = NULL;
  gpointer object;

  if (request->op == BOX_FILE_OP_WATCH)
    object = box_agent_client_fs_watch_finish (BOX_AGENT_CLIENT (source), result, &error);
  else if (request->op == BOX_FILE_OP_WRITE || request->op == BOX_FILE_OP_TAR_PUT)
    object = box_agent_client_fs_upload_finish (BOX_AGENT_CLIENT (source), result, &error);
  else
    object = box_agent_client_fs_download_finish (BOX_AGENT_CLIENT (source), result, &error);
  if (object == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, object, g_object_unref);
}

static void
fs_open_run (BoxEngine *self, BoxAgentClient *agent, GTask *task)
{
  const BoxFileRequest *request = g_task_get_task_data (task);

  if (g_task_get_source_tag (task) == box_engine_fs_watch_async)
    box_agent_client_fs_watch_async (agent, request, g_task_get_cancellable (task), fs_open_done,
                                     task);
  else
    box_agent_client_fs_open_async (agent, request, g_task_get_cancellable (task), fs_open_done,
                                    task);
}

static void
fs_open (BoxEngine *self, const char *sandbox_id, const BoxFileRequest *request, gpointer tag,
         GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);

  g_task_set_source_tag (task, tag);
  g_task_set_task_data (task, box_file_request_copy (request), (GDestroyNotify) box_file_request_free);
  /* the caller holds the sandbox */
  box_engine_agent_task_held (self, sandbox_id, FALSE, fs_open_run, task);
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

BoxFileDownload *
box_engine_fs_download_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  return box_agent_task_propagate_typed (result, self, box_engine_fs_open_async,
                                         BOX_TYPE_FILE_DOWNLOAD, error);
}

BoxFileUpload *
box_engine_fs_upload_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  return box_agent_task_propagate_typed (result, self, box_engine_fs_open_async,
                                         BOX_TYPE_FILE_UPLOAD, error);
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
