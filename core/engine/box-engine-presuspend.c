/* box-engine-presuspend.c: the guest's presuspend hooks before a pause or
 * a memory checkpoint, and the end of the streams before a memory
 * checkpoint's snapshot; see box-engine-presuspend.h. */
#include "config.h"

#include "box-agent-hooks.h"
#include "box-agent-frame.h"
#include "box-engine-presuspend.h"

typedef struct {
  char         *sandbox_id;
  GCancellable *cancel;
  GSource      *timer;
} Presuspend;

static void
presuspend_free (Presuspend *ps)
{
  if (ps->timer != NULL) {
    g_source_destroy (ps->timer);
    g_source_unref (ps->timer);
  }
  g_clear_object (&ps->cancel);
  g_free (ps->sandbox_id);
  g_free (ps);
}

static gboolean
wait_over (gpointer user_data)
{
  Presuspend *ps = user_data;

  g_cancellable_cancel (ps->cancel);
  return G_SOURCE_REMOVE;
}

/* The opening of both: a task of @tag for @callback, and the agent of
 * @sandbox_id's guest in *@agent, whose answer the task awaits @wait_ms of
 * real time at most (its data's cancellable is cancelled then).  NULL when
 * there is no agent to ask (a hypervisor that runs no VM has none; one that
 * cannot give it is logged with @what): the task answered FALSE then. */
static GTask *
guest_wait_start (BoxEngine *self, const char *sandbox_id, gpointer tag, const char *what,
                  guint wait_ms, GAsyncReadyCallback callback, gpointer user_data,
                  BoxAgentClient **agent)
{
  g_autoptr(GTask) task = g_task_new (self, NULL, callback, user_data);
  g_autoptr(GError) error = NULL;
  Presuspend *ps;

  g_task_set_source_tag (task, tag);
  *agent = NULL;
  if (box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_GUEST_AGENT)) {
    *agent = box_hypervisor_get_agent (self->hypervisor, sandbox_id, &error);
    if (*agent == NULL)
      g_message ("sandbox %s: %s: %s", sandbox_id, what, error->message);
  }
  if (*agent == NULL) {
    g_task_return_boolean (task, FALSE);
    return NULL;
  }
  ps = g_new0 (Presuspend, 1);
  ps->sandbox_id = g_strdup (sandbox_id);
  ps->cancel = g_cancellable_new ();
  g_task_set_task_data (task, ps, (GDestroyNotify) presuspend_free);
  ps->timer = g_timeout_source_new (wait_ms);
  g_source_set_callback (ps->timer, wait_over, ps, NULL);
  g_source_attach (ps->timer, g_main_context_get_thread_default ());
  return g_steal_pointer (&task);
}

static void
hooks_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  Presuspend *ps = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  BoxPresuspendResult counts = { 0 };

  if (!box_agent_client_presuspend_finish (BOX_AGENT_CLIENT (source), result, &counts, &error)) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
      g_warning ("sandbox %s: the presuspend hooks did not answer within %d ms; "
                 "going on without them", ps->sandbox_id, BOX_ENGINE_PRESUSPEND_WAIT_MS);
    } else {
      /* the message may be the guest's: escaped and short */
      g_autofree char *text = box_agent_text_for_log (error->message, 256);

      g_warning ("sandbox %s: the presuspend hooks failed (%s); going on without them",
                 ps->sandbox_id, text);
    }
    g_task_return_boolean (task, FALSE);
    return;
  }
  if (counts.failed > 0 || counts.timed_out > 0)
    g_warning ("sandbox %s: presuspend hooks: %u ran, %u failed, %u timed out, %u skipped",
               ps->sandbox_id, counts.ran, counts.failed, counts.timed_out, counts.skipped);
  else if (counts.ran > 0)
    g_debug ("sandbox %s: presuspend hooks: %u ran", ps->sandbox_id, counts.ran);
  g_task_return_boolean (task, TRUE);
}

void
box_engine_run_presuspend_hooks_async (BoxEngine *self, const char *sandbox_id,
                                       GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(BoxAgentClient) agent = NULL;
  GTask *task;
  Presuspend *ps;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);

  task = guest_wait_start (self, sandbox_id, box_engine_run_presuspend_hooks_async,
                           "no presuspend hooks", BOX_ENGINE_PRESUSPEND_WAIT_MS, callback,
                           user_data, &agent);
  if (task == NULL)
    return;
  ps = g_task_get_task_data (task);
  box_agent_client_presuspend_async (agent, BOX_ENGINE_PRESUSPEND_TIMEOUT_MS, ps->cancel,
                                     hooks_done, task);
}

gboolean
box_engine_run_presuspend_hooks_finish (BoxEngine *self, GAsyncResult *result)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), NULL);
}

/* ---- the end of the streams --------------------------------------------- */

static void
barrier_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  Presuspend *ps = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;

  if (!box_agent_client_barrier_finish (BOX_AGENT_CLIENT (source), result, &error)) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      g_warning ("sandbox %s: the guest agent did not confirm the end of the streams within %d ms; "
                 "snapshotting anyway", ps->sandbox_id, BOX_ENGINE_END_STREAMS_WAIT_MS);
    else
      g_message ("sandbox %s: the end of the streams is not confirmed: %s", ps->sandbox_id,
                 error->message);
    g_task_return_boolean (task, FALSE);
    return;
  }
  g_task_return_boolean (task, TRUE);
}

void
box_engine_end_streams_async (BoxEngine *self, const char *sandbox_id, const char *why,
                              GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(BoxAgentClient) agent = NULL;
  GTask *task;
  Presuspend *ps;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);

  /* the streams close now, their channels' CLOSE queued for the agent */
  box_engine_emit_interrupted (self, sandbox_id, why);
  task = guest_wait_start (self, sandbox_id, box_engine_end_streams_async,
                           "the end of the streams is not confirmed",
                           BOX_ENGINE_END_STREAMS_WAIT_MS, callback, user_data, &agent);
  if (task == NULL)
    return;
  ps = g_task_get_task_data (task);
  box_agent_client_barrier_async (agent, ps->cancel, barrier_done, task);
}

gboolean
box_engine_end_streams_finish (BoxEngine *self, GAsyncResult *result)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), NULL);
}
