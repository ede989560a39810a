/* box-engine-files.c: the sandbox's files through its agent (the fs-*
 * operations of doc/AGENT-PROTOCOL.md "Files"): one-shot requests that
 * hold the sandbox for their duration, and channels on a sandbox the
 * caller holds. */
#include "config.h"

#include "box-engine-private.h"

typedef struct {
  char       *op;
  JsonObject *args;
  char       *sandbox_id;   /* once held */
} FsCall;

static void
fs_call_free (FsCall *call)
{
  g_free (call->op);
  g_clear_pointer (&call->args, json_object_unref);
  g_free (call->sandbox_id);
  g_free (call);
}

static void
fs_call_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  FsCall *call = g_task_get_task_data (task);
  GError *error = NULL;
  JsonObject *reply = box_agent_client_call_finish (BOX_AGENT_CLIENT (source), result, &error);

  box_engine_release (self, call->sandbox_id);
  if (reply == NULL) {
    g_task_return_error (task, error);
    return;
  }
  g_task_return_pointer (task, reply, (GDestroyNotify) json_object_unref);
}

static void
fs_call_held (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  g_autoptr(GTask) task = user_data;
  FsCall *call = g_task_get_task_data (task);
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(BoxAgentClient) agent = NULL;
  GCancellable *cancellable;
  GError *error = NULL;

  sandbox = box_engine_hold_finish (self, result, &error);
  if (sandbox == NULL) {
    g_task_return_error (task, error);
    return;
  }
  call->sandbox_id = g_strdup (sandbox->id);
  agent = box_engine_get_agent (self, sandbox->id, &error);
  if (agent == NULL) {
    box_engine_release (self, call->sandbox_id);
    g_task_return_error (task, error);
    return;
  }
  cancellable = g_task_get_cancellable (task);
  box_agent_client_call_async (agent, call->op, call->args, cancellable, fs_call_done,
                               g_steal_pointer (&task));
}

void
box_engine_fs_call_async (BoxEngine *self, const char *project, const char *id_or_name,
                          const char *op, JsonObject *args, GCancellable *cancellable,
                          GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;
  FsCall *call;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (op != NULL && g_str_has_prefix (op, "fs-"));

  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_fs_call_async);
  call = g_new0 (FsCall, 1);
  call->op = g_strdup (op);
  call->args = args != NULL ? json_object_ref (args) : json_object_new ();
  g_task_set_task_data (task, call, (GDestroyNotify) fs_call_free);
  box_engine_hold_async (self, project, id_or_name, cancellable, fs_call_held, task);
}

JsonObject *
box_engine_fs_call_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

static void
fs_open_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  BoxAgentChannel *channel =
    box_agent_client_open_channel_finish (BOX_AGENT_CLIENT (source), result, &error);

  if (channel == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, channel, g_object_unref);
}

void
box_engine_fs_open_async (BoxEngine *self, const char *sandbox_id, const char *op,
                          JsonObject *args, GCancellable *cancellable,
                          GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  g_autoptr(BoxAgentClient) agent = NULL;
  GError *error = NULL;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (op != NULL && g_str_has_prefix (op, "fs-"));

  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_fs_open_async);
  agent = box_engine_get_agent (self, sandbox_id, &error);
  if (agent == NULL) {
    g_task_return_error (task, error);
    return;
  }
  box_agent_client_open_channel_async (agent, op, args, cancellable, fs_open_done,
                                       g_steal_pointer (&task));
}

BoxAgentChannel *
box_engine_fs_open_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
