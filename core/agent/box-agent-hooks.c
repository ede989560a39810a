/* box-agent-hooks.c: the presuspend hooks request; see box-agent-hooks.h. */
#include "config.h"

#include "box-agent-hooks.h"
#include "box-agent-private.h"
#include "box-error.h"

static gboolean
get_count (JsonObject *reply, const char *name, guint *out, GError **error)
{
  gint64 value = -1;

  if (!box_agent_json_get_int (reply, name, &value) || value < 0 ||
      value > BOX_PRESUSPEND_COUNT_MAX) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "agent: malformed presuspend reply: %s is not a count in 0..%d", name,
                 BOX_PRESUSPEND_COUNT_MAX);
    return FALSE;
  }
  *out = (guint) value;
  return TRUE;
}

static void
presuspend_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  g_autoptr(JsonObject) reply = NULL;
  g_autofree BoxPresuspendResult *counts = g_new0 (BoxPresuspendResult, 1);
  GError *error = NULL;

  reply = box_agent_client_call_finish (BOX_AGENT_CLIENT (source), result, &error);
  if (reply == NULL ||
      !get_count (reply, "ran", &counts->ran, &error) ||
      !get_count (reply, "failed", &counts->failed, &error) ||
      !get_count (reply, "timed_out", &counts->timed_out, &error) ||
      !get_count (reply, "skipped", &counts->skipped, &error)) {
    g_task_return_error (task, error);
    return;
  }
  g_task_return_pointer (task, g_steal_pointer (&counts), g_free);
}

void
box_agent_client_presuspend_async (BoxAgentClient *self, guint timeout_ms,
                                   GCancellable *cancellable, GAsyncReadyCallback callback,
                                   gpointer user_data)
{
  g_autoptr(JsonObject) args = json_object_new ();
  GTask *task;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_presuspend_async);
  json_object_set_int_member (args, "timeout_ms",
                              CLAMP (timeout_ms, BOX_PRESUSPEND_TIMEOUT_MIN_MS,
                                     BOX_PRESUSPEND_TIMEOUT_MAX_MS));
  box_agent_client_call_async (self, "presuspend", args, cancellable, presuspend_done, task);
}

gboolean
box_agent_client_presuspend_finish (BoxAgentClient *self, GAsyncResult *result,
                                    BoxPresuspendResult *out, GError **error)
{
  g_autofree BoxPresuspendResult *counts = NULL;

  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  g_return_val_if_fail (g_task_get_source_tag (G_TASK (result)) == box_agent_client_presuspend_async,
                        FALSE);
  counts = g_task_propagate_pointer (G_TASK (result), error);
  if (counts == NULL)
    return FALSE;
  if (out != NULL)
    *out = *counts;
  return TRUE;
}
