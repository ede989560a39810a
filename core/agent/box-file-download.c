/* box-file-download.c: a download as a GInputStream (see
 * box-file-download.h), over the input half of a BoxAgentStream on the
 * transfer's channel: that half gives the bytes and the flow control; this
 * one adds what makes an output complete (the agent's EOF on stream 1, the
 * announced length, no error event) and fs-list's entries. */
#include "config.h"

#include "box-agent-private.h"
#include "box-agent-stream.h"
#include "box-error.h"
#include "box-file-download.h"

/* LIST: bytes read at a time for entries */
#define ENTRIES_READ (64 * 1024)

struct _BoxFileDownload {
  GInputStream     parent_instance;

  BoxAgentStream  *stream;
  GInputStream    *base;        /* the stream's input half (borrowed) */
  BoxAgentChannel *channel;
  GMainContext    *context;     /* the channel's */
  BoxFileOp        op;
  gint64           length;
  BoxFileInfo     *info;        /* READ: the Stat at open */
  guint64          received;
  gboolean         agent_eof;   /* the agent ended its output */
  gboolean         complete;    /* the end was read, and it was complete */
  GError          *error;       /* the output will not complete */
  gulong           eof_id;
  gulong           ctrl_id;
  GString         *line;        /* LIST: a partial line */
};

static void box_file_download_pollable_init (GPollableInputStreamInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxFileDownload, box_file_download, G_TYPE_INPUT_STREAM,
                               G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_INPUT_STREAM,
                                                      box_file_download_pollable_init))

/* The output will not complete: reads fail with @error (taken) from now
 * on, and the work in the sandbox stops (which also wakes a reader). */
static void
download_fail (BoxFileDownload *self, GError *error)
{
  if (self->complete || self->error != NULL) {
    g_error_free (error);
    return;
  }
  self->error = error;
  box_agent_stream_abort (self->stream);
}

static void
on_eof (BoxAgentChannel *channel, guint stream, gpointer user_data)
{
  BoxFileDownload *self = user_data;

  if (stream == 1)
    self->agent_eof = TRUE;
}

static void
on_ctrl (BoxAgentChannel *channel, JsonObject *msg, gpointer user_data)
{
  BoxFileDownload *self = user_data;

  if (g_strcmp0 (json_object_get_string_member_with_default (msg, "event", ""), "error") == 0)
    download_fail (self, box_agent_error_from_reply (msg));
}

static gboolean
propagate_failure (BoxFileDownload *self, GError **error)
{
  if (self->error == NULL)
    return FALSE;
  g_propagate_error (error, g_error_copy (self->error));
  return TRUE;
}

/* The base input ended: complete, or not. */
static gssize
download_end (BoxFileDownload *self, GError **error)
{
  if (!self->agent_eof)
    download_fail (self, g_error_new_literal (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                                              "the agent's output ended without its end"));
  else if (self->length >= 0 && self->received != (guint64) self->length)
    download_fail (self, g_error_new (BOX_ERROR, BOX_ERROR_INTERNAL,
                                      "the agent sent %" G_GUINT64_FORMAT " of the %" G_GINT64_FORMAT
                                      " bytes it announced", self->received, self->length));
  if (propagate_failure (self, error))
    return -1;
  self->complete = TRUE;
  return 0;
}

static gssize
download_read_nonblocking (GPollableInputStream *pollable, void *buffer, gsize count,
                           GError **error)
{
  BoxFileDownload *self = BOX_FILE_DOWNLOAD (pollable);
  gssize n;

  if (propagate_failure (self, error))
    return -1;
  if (self->complete || count == 0)
    return 0;
  n = g_pollable_input_stream_read_nonblocking (G_POLLABLE_INPUT_STREAM (self->base), buffer,
                                                count, NULL, error);
  if (n < 0)
    return -1;
  if (n == 0)
    return download_end (self, error);
  self->received += (guint64) n;
  if (self->length >= 0 && self->received > (guint64) self->length) {
    download_fail (self, g_error_new (BOX_ERROR, BOX_ERROR_INTERNAL,
                                      "the agent sent more than the %" G_GINT64_FORMAT
                                      " bytes it announced", self->length));
    propagate_failure (self, error);
    return -1;
  }
  return n;
}

static gboolean
download_is_readable (GPollableInputStream *pollable)
{
  BoxFileDownload *self = BOX_FILE_DOWNLOAD (pollable);

  return self->error != NULL || self->complete ||
         g_pollable_input_stream_is_readable (G_POLLABLE_INPUT_STREAM (self->base));
}

static GSource *
download_create_source (GPollableInputStream *pollable, GCancellable *cancellable)
{
  BoxFileDownload *self = BOX_FILE_DOWNLOAD (pollable);
  g_autoptr(GSource) child =
    g_pollable_input_stream_create_source (G_POLLABLE_INPUT_STREAM (self->base), NULL);

  /* a failure aborts the base, which makes it readable: one source is enough */
  return g_pollable_source_new_full (pollable, child, cancellable);
}

static void
box_file_download_pollable_init (GPollableInputStreamInterface *iface)
{
  iface->is_readable = download_is_readable;
  iface->create_source = download_create_source;
  iface->read_nonblocking = download_read_nonblocking;
}

static gssize
download_read (GInputStream *stream, void *buffer, gsize count, GCancellable *cancellable,
               GError **error)
{
  BoxFileDownload *self = BOX_FILE_DOWNLOAD (stream);

  if (!g_main_context_is_owner (self->context)) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                         "a download is read on its main context only");
    return -1;
  }
  /* nothing here may wait: see the header */
  return download_read_nonblocking (G_POLLABLE_INPUT_STREAM (stream), buffer, count, error);
}

static gboolean
download_close (GInputStream *stream, GCancellable *cancellable, GError **error)
{
  BoxFileDownload *self = BOX_FILE_DOWNLOAD (stream);

  /* complete or not, nothing more is read: the agent's work ends */
  box_agent_stream_abort (self->stream);
  return TRUE;
}

static void
download_close_async (GInputStream *stream, int io_priority, GCancellable *cancellable,
                      GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (stream, cancellable, callback, user_data);

  /* in place: GIO's default would close in a worker thread */
  g_task_set_source_tag (task, download_close_async);
  download_close (stream, cancellable, NULL);
  g_task_return_boolean (task, TRUE);
}

static gboolean
download_close_finish (GInputStream *stream, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

BoxFileDownload *
box_file_download_new (BoxAgentChannel *channel, BoxFileOp op)
{
  BoxFileDownload *self;
  JsonObject *reply;

  g_return_val_if_fail (BOX_IS_AGENT_CHANNEL (channel), NULL);
  g_return_val_if_fail (op == BOX_FILE_OP_READ || op == BOX_FILE_OP_LIST ||
                        op == BOX_FILE_OP_TAR_GET || op == BOX_FILE_OP_LOGS, NULL);

  self = g_object_new (BOX_TYPE_FILE_DOWNLOAD, NULL);
  self->channel = g_object_ref (channel);
  self->context = g_main_context_ref_thread_default ();
  self->op = op;
  self->stream = box_agent_stream_new (channel);
  self->base = g_io_stream_get_input_stream (G_IO_STREAM (self->stream));
  self->eof_id = g_signal_connect (channel, "eof", G_CALLBACK (on_eof), self);
  self->ctrl_id = g_signal_connect (channel, "ctrl", G_CALLBACK (on_ctrl), self);
  if (op == BOX_FILE_OP_LIST)
    self->line = g_string_new (NULL);
  reply = box_agent_channel_get_reply (channel);
  if (op == BOX_FILE_OP_READ && reply != NULL) {
    gint64 length = -1;

    if (box_agent_json_get_int (reply, "length", &length) && length >= 0)
      self->length = length;
    self->info = box_file_info_new_from_member (reply, "stat", NULL);
  }
  return self;
}

BoxFileOp
box_file_download_get_op (BoxFileDownload *self)
{
  g_return_val_if_fail (BOX_IS_FILE_DOWNLOAD (self), BOX_FILE_OP_READ);
  return self->op;
}

gint64
box_file_download_get_length (BoxFileDownload *self)
{
  g_return_val_if_fail (BOX_IS_FILE_DOWNLOAD (self), -1);
  return self->length;
}

const BoxFileInfo *
box_file_download_get_info (BoxFileDownload *self)
{
  g_return_val_if_fail (BOX_IS_FILE_DOWNLOAD (self), NULL);
  return self->info;
}

void
box_file_download_abort (BoxFileDownload *self)
{
  g_return_if_fail (BOX_IS_FILE_DOWNLOAD (self));
  download_fail (self, g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CANCELLED,
                                            "the download was stopped"));
}

/* ---- LIST ------------------------------------------------------------------ */

static void entries_read (GTask *task);

static void
entries_got (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  BoxFileDownload *self = BOX_FILE_DOWNLOAD (source);
  g_autoptr(GPtrArray) infos = NULL;
  g_autoptr(GBytes) bytes = NULL;
  GError *error = NULL;
  gsize len = 0;
  const char *data;

  bytes = g_input_stream_read_bytes_finish (G_INPUT_STREAM (source), result, &error);
  if (bytes == NULL) {
    g_task_return_error (task, error);
    return;
  }
  infos = g_ptr_array_new_with_free_func ((GDestroyNotify) box_file_info_free);
  data = g_bytes_get_data (bytes, &len);
  if (len == 0) {
    if (self->line->len > 0)
      g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INTERNAL,
                               "the last fs-list line has no end");
    else
      g_task_return_pointer (task, g_steal_pointer (&infos), (GDestroyNotify) g_ptr_array_unref);
    return;
  }
  g_string_append_len (self->line, data, (gssize) len);
  if (!box_file_list_take_lines (self->line, infos, &error)) {
    download_fail (self, g_error_copy (error));
    g_task_return_error (task, error);
  } else if (infos->len == 0) {
    entries_read (g_steal_pointer (&task));
  } else {
    g_task_return_pointer (task, g_steal_pointer (&infos), (GDestroyNotify) g_ptr_array_unref);
  }
}

static void
entries_read (GTask *task)
{
  g_input_stream_read_bytes_async (G_INPUT_STREAM (g_task_get_source_object (task)), ENTRIES_READ,
                                   g_task_get_priority (task), g_task_get_cancellable (task),
                                   entries_got, task);
}

void
box_file_download_next_entries_async (BoxFileDownload *self, GCancellable *cancellable,
                                      GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;

  g_return_if_fail (BOX_IS_FILE_DOWNLOAD (self));
  g_return_if_fail (self->op == BOX_FILE_OP_LIST);

  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_file_download_next_entries_async);
  entries_read (task);
}

GPtrArray *
box_file_download_next_entries_finish (BoxFileDownload *self, GAsyncResult *result,
                                       GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- the object ------------------------------------------------------------ */

static void
box_file_download_dispose (GObject *object)
{
  BoxFileDownload *self = BOX_FILE_DOWNLOAD (object);

  if (self->channel != NULL) {
    g_clear_signal_handler (&self->eof_id, self->channel);
    g_clear_signal_handler (&self->ctrl_id, self->channel);
  }
  G_OBJECT_CLASS (box_file_download_parent_class)->dispose (object);
}

static void
box_file_download_finalize (GObject *object)
{
  BoxFileDownload *self = BOX_FILE_DOWNLOAD (object);

  if (self->stream != NULL)
    box_agent_stream_abort (self->stream);
  g_clear_object (&self->stream);
  g_clear_object (&self->channel);
  g_clear_pointer (&self->context, g_main_context_unref);
  g_clear_pointer (&self->info, box_file_info_free);
  g_clear_error (&self->error);
  if (self->line != NULL)
    g_string_free (self->line, TRUE);
  G_OBJECT_CLASS (box_file_download_parent_class)->finalize (object);
}

static void
box_file_download_class_init (BoxFileDownloadClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GInputStreamClass *stream_class = G_INPUT_STREAM_CLASS (klass);

  object_class->dispose = box_file_download_dispose;
  object_class->finalize = box_file_download_finalize;
  stream_class->read_fn = download_read;
  stream_class->close_fn = download_close;
  stream_class->close_async = download_close_async;
  stream_class->close_finish = download_close_finish;
}

static void
box_file_download_init (BoxFileDownload *self)
{
  self->length = -1;
}
