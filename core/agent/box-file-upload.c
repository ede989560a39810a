/* box-file-upload.c: an upload as a GOutputStream (see box-file-upload.h),
 * over the output half of a BoxAgentStream on the transfer's channel: that
 * half sends the bytes within the agent's credit and EOF at the end; this
 * one adds the agent's result (its done or error event) as the close's. */
#include "config.h"

#include "box-agent-private.h"
#include "box-agent-stream.h"
#include "box-error.h"
#include "box-file-upload.h"

struct _BoxFileUpload {
  GOutputStream    parent_instance;

  BoxAgentStream  *stream;
  GOutputStream   *base;       /* the stream's output half (borrowed) */
  BoxAgentChannel *channel;
  GMainContext    *context;    /* the channel's */
  BoxFileOp        op;
  gboolean         result;     /* the outcome is known: */
  GError          *error;      /* an error, or done (WRITE: with the Stat) */
  BoxFileInfo     *info;
  GTask           *closing;    /* a close waiting for the outcome */
  gulong           ctrl_id;
  gulong           closed_id;
};

static void box_file_upload_pollable_init (GPollableOutputStreamInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxFileUpload, box_file_upload, G_TYPE_OUTPUT_STREAM,
                               G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_OUTPUT_STREAM,
                                                      box_file_upload_pollable_init))

/* The outcome (@info and @error taken; both NULL: done without a Stat),
 * once: a failure ends the channel (which also wakes a writer), and a
 * waiting close completes. */
static void
upload_outcome (BoxFileUpload *self, BoxFileInfo *info, GError *error)
{
  g_autoptr(BoxFileUpload) keep = g_object_ref (self);
  g_autoptr(GTask) closing = g_steal_pointer (&self->closing);

  if (self->result) {
    g_clear_pointer (&info, box_file_info_free);
    g_clear_error (&error);
    return;
  }
  self->result = TRUE;
  self->info = info;
  self->error = error;
  if (error != NULL)
    box_agent_stream_abort (self->stream);
  if (closing == NULL)
    return;
  if (self->error != NULL)
    g_task_return_error (closing, g_error_copy (self->error));
  else
    g_task_return_boolean (closing, TRUE);
}

static void
on_ctrl (BoxAgentChannel *channel, JsonObject *msg, gpointer user_data)
{
  BoxFileUpload *self = user_data;
  const char *event = json_object_get_string_member_with_default (msg, "event", "");
  GError *error = NULL;
  BoxFileInfo *info = NULL;

  if (g_str_equal (event, "error")) {
    upload_outcome (self, NULL, box_agent_error_from_reply (msg));
  } else if (g_str_equal (event, "done")) {
    if (self->op == BOX_FILE_OP_WRITE &&
        (info = box_file_info_new_from_member (msg, "stat", &error)) == NULL)
      upload_outcome (self, NULL, error);
    else
      upload_outcome (self, info, NULL);
  }
}

static void
on_closed (BoxAgentChannel *channel, gpointer user_data)
{
  upload_outcome (user_data, NULL,
                  g_error_new_literal (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                                       "the sandbox's agent ended the upload without a result"));
}

/* FALSE with @error when nothing more may be written. */
static gboolean
upload_check (BoxFileUpload *self, GError **error)
{
  if (self->error != NULL) {
    g_propagate_error (error, g_error_copy (self->error));
    return FALSE;
  }
  if (self->result) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_CLOSED, "the upload is complete");
    return FALSE;
  }
  return TRUE;
}

static gssize
upload_write_nonblocking (GPollableOutputStream *pollable, const void *buffer, gsize count,
                          GError **error)
{
  BoxFileUpload *self = BOX_FILE_UPLOAD (pollable);

  if (!upload_check (self, error))
    return -1;
  return g_pollable_output_stream_write_nonblocking (G_POLLABLE_OUTPUT_STREAM (self->base), buffer,
                                                     count, NULL, error);
}

static gboolean
upload_is_writable (GPollableOutputStream *pollable)
{
  BoxFileUpload *self = BOX_FILE_UPLOAD (pollable);

  return self->result ||
         g_pollable_output_stream_is_writable (G_POLLABLE_OUTPUT_STREAM (self->base));
}

static GSource *
upload_create_source (GPollableOutputStream *pollable, GCancellable *cancellable)
{
  BoxFileUpload *self = BOX_FILE_UPLOAD (pollable);
  g_autoptr(GSource) child =
    g_pollable_output_stream_create_source (G_POLLABLE_OUTPUT_STREAM (self->base), NULL);

  /* a failure aborts the base, which makes it writable (to fail) */
  return g_pollable_source_new_full (pollable, child, cancellable);
}

static void
box_file_upload_pollable_init (GPollableOutputStreamInterface *iface)
{
  iface->is_writable = upload_is_writable;
  iface->create_source = upload_create_source;
  iface->write_nonblocking = upload_write_nonblocking;
}

static gssize
upload_write (GOutputStream *stream, const void *buffer, gsize count, GCancellable *cancellable,
              GError **error)
{
  BoxFileUpload *self = BOX_FILE_UPLOAD (stream);

  if (!g_main_context_is_owner (self->context)) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                         "an upload is written on its main context only");
    return -1;
  }
  /* nothing here may wait: see the header */
  return upload_write_nonblocking (G_POLLABLE_OUTPUT_STREAM (stream), buffer, count, error);
}

/* Synchronous: only an outcome already known; else the upload is
 * abandoned (this is what a dispose without a close does). */
static gboolean
upload_close (GOutputStream *stream, GCancellable *cancellable, GError **error)
{
  BoxFileUpload *self = BOX_FILE_UPLOAD (stream);

  if (!self->result)
    box_file_upload_abort (self);
  if (self->error != NULL) {
    g_propagate_error (error, g_error_copy (self->error));
    return FALSE;
  }
  return TRUE;
}

static void
upload_close_async (GOutputStream *stream, int io_priority, GCancellable *cancellable,
                    GAsyncReadyCallback callback, gpointer user_data)
{
  BoxFileUpload *self = BOX_FILE_UPLOAD (stream);
  g_autoptr(GTask) task = g_task_new (stream, cancellable, callback, user_data);

  g_task_set_source_tag (task, upload_close_async);
  if (!self->result) {
    /* the input ends (after the writes before it); the outcome follows */
    g_output_stream_close (self->base, NULL, NULL);
    self->closing = g_steal_pointer (&task);
    return;
  }
  if (self->error != NULL)
    g_task_return_error (task, g_error_copy (self->error));
  else
    g_task_return_boolean (task, TRUE);
}

static void
upload_flush_async (GOutputStream *stream, int io_priority, GCancellable *cancellable,
                    GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (stream, cancellable, callback, user_data);

  /* what was written is on its way already (GIO's default would use a thread) */
  g_task_set_source_tag (task, upload_flush_async);
  g_task_return_boolean (task, TRUE);
}

static gboolean
upload_finish (GOutputStream *stream, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

BoxFileUpload *
box_file_upload_new (BoxAgentChannel *channel, BoxFileOp op)
{
  BoxFileUpload *self;

  g_return_val_if_fail (BOX_IS_AGENT_CHANNEL (channel), NULL);
  g_return_val_if_fail (op == BOX_FILE_OP_WRITE || op == BOX_FILE_OP_TAR_PUT, NULL);

  self = g_object_new (BOX_TYPE_FILE_UPLOAD, NULL);
  self->channel = g_object_ref (channel);
  self->context = g_main_context_ref_thread_default ();
  self->op = op;
  self->stream = box_agent_stream_new (channel);
  self->base = g_io_stream_get_output_stream (G_IO_STREAM (self->stream));
  self->ctrl_id = g_signal_connect (channel, "ctrl", G_CALLBACK (on_ctrl), self);
  self->closed_id = g_signal_connect (channel, "closed", G_CALLBACK (on_closed), self);
  return self;
}

BoxFileOp
box_file_upload_get_op (BoxFileUpload *self)
{
  g_return_val_if_fail (BOX_IS_FILE_UPLOAD (self), BOX_FILE_OP_WRITE);
  return self->op;
}

const BoxFileInfo *
box_file_upload_get_info (BoxFileUpload *self)
{
  g_return_val_if_fail (BOX_IS_FILE_UPLOAD (self), NULL);
  return self->info;
}

void
box_file_upload_abort (BoxFileUpload *self)
{
  g_return_if_fail (BOX_IS_FILE_UPLOAD (self));
  upload_outcome (self, NULL, g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CANCELLED,
                                                   "the upload was abandoned"));
}

static void
box_file_upload_dispose (GObject *object)
{
  BoxFileUpload *self = BOX_FILE_UPLOAD (object);

  /* GOutputStream's dispose closes (abandons) an upload not closed */
  G_OBJECT_CLASS (box_file_upload_parent_class)->dispose (object);
  if (self->channel != NULL) {
    g_clear_signal_handler (&self->ctrl_id, self->channel);
    g_clear_signal_handler (&self->closed_id, self->channel);
  }
}

static void
box_file_upload_finalize (GObject *object)
{
  BoxFileUpload *self = BOX_FILE_UPLOAD (object);

  g_assert (self->closing == NULL);
  if (self->stream != NULL)
    box_agent_stream_abort (self->stream);
  g_clear_object (&self->stream);
  g_clear_object (&self->channel);
  g_clear_pointer (&self->context, g_main_context_unref);
  g_clear_pointer (&self->info, box_file_info_free);
  g_clear_error (&self->error);
  G_OBJECT_CLASS (box_file_upload_parent_class)->finalize (object);
}

static void
box_file_upload_class_init (BoxFileUploadClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GOutputStreamClass *stream_class = G_OUTPUT_STREAM_CLASS (klass);

  object_class->dispose = box_file_upload_dispose;
  object_class->finalize = box_file_upload_finalize;
  stream_class->write_fn = upload_write;
  stream_class->close_fn = upload_close;
  stream_class->close_async = upload_close_async;
  stream_class->close_finish = upload_finish;
  stream_class->flush_async = upload_flush_async;
  stream_class->flush_finish = upload_finish;
}

static void
box_file_upload_init (BoxFileUpload *self)
{
}
