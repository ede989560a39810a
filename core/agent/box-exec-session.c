/* box-exec-session.c: a session's stream over an agent channel: DATA on
 * streams 1 and 2 as ::output, the `exit` event as ::exited, stdin as DATA
 * and EOF on stream 0, resize and signal as the channel's CTRL messages. */
#include "config.h"

#include "box-agent-private.h"
#include "box-error.h"
#include "box-exec-session.h"

struct _BoxExecSession {
  GObject parent_instance;

  BoxAgentChannel *channel;
  char *id;
  gint64 pid;
  gint64 offset;
  gboolean closed;              /* ::closed emitted or closed by the consumer */
  gboolean stdin_closed;

  const BoxAgentKeeper *keeper;
  gpointer keeper_data;
};

enum { SIGNAL_OUTPUT, SIGNAL_EXITED, SIGNAL_CLOSED, N_SIGNALS };
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (BoxExecSession, box_exec_session, G_TYPE_OBJECT)

static void
touch (BoxExecSession *self)
{
  if (self->keeper != NULL)
    self->keeper->touch (self->keeper_data);
}

static void
release (BoxExecSession *self)
{
  const BoxAgentKeeper *keeper = g_steal_pointer (&self->keeper);

  if (keeper != NULL)
    keeper->release (g_steal_pointer (&self->keeper_data));
}

static void
on_data (BoxAgentChannel *channel, guint stream, GBytes *bytes, gpointer user_data)
{
  BoxExecSession *self = user_data;

  if (self->closed || (stream != 1 && stream != 2)) {
    /* nobody to give it to: let the producer go on */
    box_agent_channel_consumed (channel, g_bytes_get_size (bytes));
    return;
  }
  touch (self);
  g_signal_emit (self, signals[SIGNAL_OUTPUT], 0, stream, bytes);
}

static void
on_ctrl (BoxAgentChannel *channel, JsonObject *msg, gpointer user_data)
{
  BoxExecSession *self = user_data;
  gint64 code = -1, sig = 0;

  if (self->closed || g_strcmp0 (box_agent_json_get_string (msg, "event"), "exit") != 0)
    return;
  if (!box_agent_json_get_int (msg, "code", &code) || code < G_MININT || code > G_MAXINT)
    return;   /* no status: the stream then ends as if the agent went away */
  if (!box_agent_json_get_int (msg, "signal", &sig) || sig < 0 || sig > 255)
    sig = 0;
  g_signal_emit (self, signals[SIGNAL_EXITED], 0, (int) code, (int) sig,
                 box_agent_json_get_bool (msg, "timed_out", FALSE));
}

static void
on_closed (BoxAgentChannel *channel, gpointer user_data)
{
  BoxExecSession *self = user_data;
  g_autoptr(BoxExecSession) keep G_GNUC_UNUSED = g_object_ref (self);

  if (self->closed)
    return;
  self->closed = TRUE;
  g_signal_emit (self, signals[SIGNAL_CLOSED], 0);
  release (self);
}

BoxExecSession *
box_exec_session_new (BoxAgentChannel *channel, const char *id, gint64 pid, gint64 offset)
{
  BoxExecSession *self = g_object_new (BOX_TYPE_EXEC_SESSION, NULL);

  self->channel = g_object_ref (channel);
  self->id = g_strdup (id);
  self->pid = pid;
  self->offset = offset;
  g_signal_connect (channel, "data", G_CALLBACK (on_data), self);
  g_signal_connect (channel, "ctrl", G_CALLBACK (on_ctrl), self);
  g_signal_connect (channel, "closed", G_CALLBACK (on_closed), self);
  return self;
}

const char *
box_exec_session_get_id (BoxExecSession *self)
{
  g_return_val_if_fail (BOX_IS_EXEC_SESSION (self), NULL);
  return self->id;
}

gint64
box_exec_session_get_pid (BoxExecSession *self)
{
  g_return_val_if_fail (BOX_IS_EXEC_SESSION (self), 0);
  return self->pid;
}

gint64
box_exec_session_get_offset (BoxExecSession *self)
{
  g_return_val_if_fail (BOX_IS_EXEC_SESSION (self), 0);
  return self->offset;
}

gboolean
box_exec_session_is_closed (BoxExecSession *self)
{
  g_return_val_if_fail (BOX_IS_EXEC_SESSION (self), TRUE);
  return self->closed;
}

void
box_exec_session_output_done (BoxExecSession *self, gsize n)
{
  g_return_if_fail (BOX_IS_EXEC_SESSION (self));
  box_agent_channel_consumed (self->channel, n);
}

static void
stdin_written (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;

  if (box_agent_channel_write_finish (BOX_AGENT_CHANNEL (source), result, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

void
box_exec_session_write_stdin_async (BoxExecSession *self, GBytes *data, GCancellable *cancellable,
                                    GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;

  g_return_if_fail (BOX_IS_EXEC_SESSION (self));
  g_return_if_fail (data != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_exec_session_write_stdin_async);
  if (self->stdin_closed) {
    g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_CLOSED, "stdin is closed");
    g_object_unref (task);
    return;
  }
  touch (self);
  box_agent_channel_write_async (self->channel, 0, data, cancellable, stdin_written, task);
}

gboolean
box_exec_session_write_stdin_finish (BoxExecSession *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

void
box_exec_session_close_stdin (BoxExecSession *self)
{
  g_return_if_fail (BOX_IS_EXEC_SESSION (self));
  if (self->stdin_closed)
    return;
  self->stdin_closed = TRUE;
  touch (self);
  box_agent_channel_send_eof (self->channel, 0);
}

void
box_exec_session_resize (BoxExecSession *self, guint cols, guint rows)
{
  g_autoptr(JsonObject) ctrl = NULL;

  g_return_if_fail (BOX_IS_EXEC_SESSION (self));
  if (cols < 1 || cols > 65535 || rows < 1 || rows > 65535)
    return;
  touch (self);
  ctrl = json_object_new ();
  json_object_set_string_member (ctrl, "op", "resize");
  json_object_set_int_member (ctrl, "cols", cols);
  json_object_set_int_member (ctrl, "rows", rows);
  box_agent_channel_send_ctrl (self->channel, ctrl);
}

void
box_exec_session_send_signal (BoxExecSession *self, const char *name)
{
  g_autoptr(JsonObject) ctrl = NULL;

  g_return_if_fail (BOX_IS_EXEC_SESSION (self));
  if (name == NULL || name[0] == '\0')
    return;
  touch (self);
  ctrl = json_object_new ();
  json_object_set_string_member (ctrl, "op", "signal");
  json_object_set_string_member (ctrl, "signal", name);
  box_agent_channel_send_ctrl (self->channel, ctrl);
}

void
box_exec_session_close (BoxExecSession *self)
{
  g_return_if_fail (BOX_IS_EXEC_SESSION (self));
  if (self->closed)
    return;
  self->closed = TRUE;
  release (self);
  /* exec: SIGHUP unless detachable; attach: detach */
  box_agent_channel_close (self->channel);
}

void
box_exec_session_set_keeper (BoxExecSession *self, const BoxAgentKeeper *keeper, gpointer data)
{
  g_return_if_fail (BOX_IS_EXEC_SESSION (self));
  g_return_if_fail (keeper != NULL && self->keeper == NULL);
  self->keeper = keeper;
  self->keeper_data = data;
  if (self->closed)
    release (self);
}

static void
box_exec_session_dispose (GObject *object)
{
  BoxExecSession *self = BOX_EXEC_SESSION (object);

  release (self);
  if (self->channel != NULL) {
    g_signal_handlers_disconnect_by_data (self->channel, self);
    /* nobody uses the stream any more */
    box_agent_channel_close (self->channel);
    g_clear_object (&self->channel);
  }
  G_OBJECT_CLASS (box_exec_session_parent_class)->dispose (object);
}

static void
box_exec_session_finalize (GObject *object)
{
  BoxExecSession *self = BOX_EXEC_SESSION (object);

  g_free (self->id);
  G_OBJECT_CLASS (box_exec_session_parent_class)->finalize (object);
}

static void
box_exec_session_class_init (BoxExecSessionClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = box_exec_session_dispose;
  object_class->finalize = box_exec_session_finalize;

  signals[SIGNAL_OUTPUT] =
    g_signal_new ("output", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_BYTES);
  signals[SIGNAL_EXITED] =
    g_signal_new ("exited", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 3, G_TYPE_INT, G_TYPE_INT, G_TYPE_BOOLEAN);
  signals[SIGNAL_CLOSED] =
    g_signal_new ("closed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);
}

static void
box_exec_session_init (BoxExecSession *self)
{
}
