/* box-agent.c: the guest agent as plugins see it; see box-agent.h. */
#include "config.h"

#include "box-agent.h"
#include "box-records-private.h"

G_DEFINE_INTERFACE (BoxAgent, box_agent, G_TYPE_OBJECT)

static void
box_agent_default_init (BoxAgentInterface *iface)
{}

BoxExecRequest *
box_exec_request_copy (const BoxExecRequest *request)
{
  BoxExecRequest *copy;

  g_return_val_if_fail (request != NULL, NULL);
  copy = g_new0 (BoxExecRequest, 1);
  copy->argv = g_strdupv (request->argv);
  copy->env = request->env != NULL ? box_records_string_map_copy (request->env) : NULL;
  copy->cwd = g_strdup (request->cwd);
  copy->user = g_strdup (request->user);
  copy->stdin_data = request->stdin_data != NULL ? g_bytes_ref (request->stdin_data) : NULL;
  copy->timeout_s = request->timeout_s;
  return copy;
}

void
box_exec_request_free (BoxExecRequest *request)
{
  if (request == NULL)
    return;
  g_strfreev (request->argv);
  g_clear_pointer (&request->env, g_hash_table_unref);
  g_free (request->cwd);
  g_free (request->user);
  g_clear_pointer (&request->stdin_data, g_bytes_unref);
  g_free (request);
}

G_DEFINE_BOXED_TYPE (BoxExecRequest, box_exec_request, box_exec_request_copy, box_exec_request_free)

BoxExecResult *
box_exec_result_copy (const BoxExecResult *result)
{
  BoxExecResult *copy;

  g_return_val_if_fail (result != NULL, NULL);
  copy = g_new0 (BoxExecResult, 1);
  *copy = *result;
  copy->stdout_data = result->stdout_data != NULL ? g_bytes_ref (result->stdout_data) : NULL;
  copy->stderr_data = result->stderr_data != NULL ? g_bytes_ref (result->stderr_data) : NULL;
  return copy;
}

void
box_exec_result_free (BoxExecResult *result)
{
  if (result == NULL)
    return;
  g_clear_pointer (&result->stdout_data, g_bytes_unref);
  g_clear_pointer (&result->stderr_data, g_bytes_unref);
  g_free (result);
}

G_DEFINE_BOXED_TYPE (BoxExecResult, box_exec_result, box_exec_result_copy, box_exec_result_free)

void
box_agent_connect_async (BoxAgent *self, GCancellable *cancellable, GAsyncReadyCallback callback,
                         gpointer user_data)
{
  g_return_if_fail (BOX_IS_AGENT (self));
  BOX_AGENT_GET_IFACE (self)->connect_async (self, cancellable, callback, user_data);
}

gboolean
box_agent_connect_finish (BoxAgent *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (BOX_IS_AGENT (self), FALSE);
  return BOX_AGENT_GET_IFACE (self)->connect_finish (self, result, error);
}

void
box_agent_call_async (BoxAgent *self, const char *op, JsonObject *args, GCancellable *cancellable,
                      GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (BOX_IS_AGENT (self));
  g_return_if_fail (op != NULL);
  BOX_AGENT_GET_IFACE (self)->call_async (self, op, args, cancellable, callback, user_data);
}

JsonObject *
box_agent_call_finish (BoxAgent *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (BOX_IS_AGENT (self), NULL);
  return BOX_AGENT_GET_IFACE (self)->call_finish (self, result, error);
}

void
box_agent_exec_run_async (BoxAgent *self, const BoxExecRequest *request, GCancellable *cancellable,
                          GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (BOX_IS_AGENT (self));
  g_return_if_fail (request != NULL);
  BOX_AGENT_GET_IFACE (self)->exec_run_async (self, request, cancellable, callback, user_data);
}

BoxExecResult *
box_agent_exec_run_finish (BoxAgent *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (BOX_IS_AGENT (self), NULL);
  return BOX_AGENT_GET_IFACE (self)->exec_run_finish (self, result, error);
}

gboolean
box_agent_is_closed (BoxAgent *self)
{
  g_return_val_if_fail (BOX_IS_AGENT (self), TRUE);
  return BOX_AGENT_GET_IFACE (self)->is_closed (self);
}

void
box_agent_close (BoxAgent *self)
{
  g_return_if_fail (BOX_IS_AGENT (self));
  BOX_AGENT_GET_IFACE (self)->close (self);
}
