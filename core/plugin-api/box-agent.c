/* box-agent.c: the guest agent as plugins see it; see box-agent.h. */
#include "config.h"

#include "box-agent.h"

G_DEFINE_INTERFACE (BoxAgent, box_agent, G_TYPE_OBJECT)

static void
box_agent_default_init (BoxAgentInterface *iface)
{}

void
box_exec_result_free (BoxExecResult *result)
{
  if (result == NULL)
    return;
  g_clear_pointer (&result->stdout_data, g_bytes_unref);
  g_clear_pointer (&result->stderr_data, g_bytes_unref);
  g_free (result);
}

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
