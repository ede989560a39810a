/* box-file-transfer.c: a file download or upload on an agent channel (see
 * box-file-transfer.h): stream 1 is the output, stream 0 the input; the
 * agent's CTRL events done and error are the result. */
#include "config.h"

#include "box-agent-private.h"
#include "box-error.h"
#include "box-file-transfer.h"

struct _BoxFileTransfer {
  GObject          parent_instance;

  BoxAgentChannel *channel;
  BoxFileOp        op;
  gint64           length;
  BoxFileInfo     *info;      /* READ: the Stat at open */
  GString         *line;      /* LIST: a partial line */
  gboolean         eof;
  gboolean         result;    /* ::done or ::failed was emitted */
};

G_DEFINE_FINAL_TYPE (BoxFileTransfer, box_file_transfer, G_TYPE_OBJECT)

enum {
  SIGNAL_DATA,
  SIGNAL_ENTRIES,
  SIGNAL_EOF,
  SIGNAL_DONE,
  SIGNAL_FAILED,
  SIGNAL_CLOSED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static gboolean
is_upload (BoxFileTransfer *self)
{
  return self->op == BOX_FILE_OP_WRITE || self->op == BOX_FILE_OP_TAR_PUT;
}

/* Emits ::failed with @error (taken), once per transfer. */
static void
transfer_fail (BoxFileTransfer *self, GError *error)
{
  g_autoptr(GError) owned = error;

  if (self->result)
    return;
  self->result = TRUE;
  g_signal_emit (self, signals[SIGNAL_FAILED], 0, owned);
}

static void
on_data (BoxAgentChannel *channel, guint stream, GBytes *bytes, gpointer user_data)
{
  BoxFileTransfer *self = user_data;
  g_autoptr(GPtrArray) infos = NULL;
  GError *error = NULL;
  gsize len = g_bytes_get_size (bytes);

  if (stream != 1 || is_upload (self) || self->result) {
    /* nothing the transfer takes: never let it hold the window */
    box_agent_channel_consumed (channel, len);
    return;
  }
  if (self->op != BOX_FILE_OP_LIST) {
    g_signal_emit (self, signals[SIGNAL_DATA], 0, bytes);
    return;
  }
  g_string_append_len (self->line, g_bytes_get_data (bytes, NULL), (gssize) len);
  infos = g_ptr_array_new_with_free_func ((GDestroyNotify) box_file_info_free);
  if (!box_file_list_take_lines (self->line, infos, &error)) {
    transfer_fail (self, error);
    return;
  }
  g_signal_emit (self, signals[SIGNAL_ENTRIES], 0, infos, (guint64) len);
}

static void
on_eof (BoxAgentChannel *channel, guint stream, gpointer user_data)
{
  BoxFileTransfer *self = user_data;

  if (stream != 1 || is_upload (self) || self->eof || self->result)
    return;
  if (self->op == BOX_FILE_OP_LIST && self->line->len > 0) {
    transfer_fail (self, g_error_new_literal (BOX_ERROR, BOX_ERROR_INTERNAL,
                                              "the last fs-list line has no end"));
    return;
  }
  self->eof = TRUE;
  g_signal_emit (self, signals[SIGNAL_EOF], 0);
}

static void
on_ctrl (BoxAgentChannel *channel, JsonObject *msg, gpointer user_data)
{
  BoxFileTransfer *self = user_data;
  const char *event = json_object_get_string_member_with_default (msg, "event", "");

  if (self->result)
    return;
  if (g_str_equal (event, "error")) {
    transfer_fail (self, box_agent_error_from_reply (msg));
  } else if (g_str_equal (event, "done")) {
    g_autoptr(BoxFileInfo) info = NULL;
    GError *error = NULL;

    if (self->op == BOX_FILE_OP_WRITE &&
        (info = box_file_info_new_from_member (msg, "stat", &error)) == NULL) {
      transfer_fail (self, error);
      return;
    }
    self->result = TRUE;
    g_signal_emit (self, signals[SIGNAL_DONE], 0, info);
  }
}

static void
on_closed (BoxAgentChannel *channel, gpointer user_data)
{
  BoxFileTransfer *self = user_data;
  g_autoptr(BoxFileTransfer) keep = g_object_ref (self);

  if (is_upload (self))
    transfer_fail (self, g_error_new_literal (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                                              "the sandbox's agent ended the transfer without a result"));
  g_signal_emit (self, signals[SIGNAL_CLOSED], 0);
}

BoxFileTransfer *
box_file_transfer_new (BoxAgentChannel *channel, BoxFileOp op)
{
  BoxFileTransfer *self = g_object_new (BOX_TYPE_FILE_TRANSFER, NULL);
  JsonObject *reply = box_agent_channel_get_reply (channel);

  self->channel = g_object_ref (channel);
  self->op = op;
  if (op == BOX_FILE_OP_LIST)
    self->line = g_string_new (NULL);
  if (op == BOX_FILE_OP_READ && reply != NULL) {
    gint64 length = -1;

    if (box_agent_json_get_int (reply, "length", &length) && length >= 0)
      self->length = length;
    self->info = box_file_info_new_from_member (reply, "stat", NULL);
  }
  g_signal_connect (channel, "data", G_CALLBACK (on_data), self);
  g_signal_connect (channel, "eof", G_CALLBACK (on_eof), self);
  g_signal_connect (channel, "ctrl", G_CALLBACK (on_ctrl), self);
  g_signal_connect (channel, "closed", G_CALLBACK (on_closed), self);
  return self;
}

BoxFileOp
box_file_transfer_get_op (BoxFileTransfer *self)
{
  g_return_val_if_fail (BOX_IS_FILE_TRANSFER (self), BOX_FILE_OP_READ);
  return self->op;
}

gint64
box_file_transfer_get_length (BoxFileTransfer *self)
{
  g_return_val_if_fail (BOX_IS_FILE_TRANSFER (self), -1);
  return self->length;
}

const BoxFileInfo *
box_file_transfer_get_info (BoxFileTransfer *self)
{
  g_return_val_if_fail (BOX_IS_FILE_TRANSFER (self), NULL);
  return self->info;
}

gboolean
box_file_transfer_is_closed (BoxFileTransfer *self)
{
  g_return_val_if_fail (BOX_IS_FILE_TRANSFER (self), TRUE);
  return box_agent_channel_is_closed (self->channel);
}

void
box_file_transfer_consumed (BoxFileTransfer *self, gsize n)
{
  g_return_if_fail (BOX_IS_FILE_TRANSFER (self));
  if (n > 0)
    box_agent_channel_consumed (self->channel, n);
}

static void
write_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;

  if (box_agent_channel_write_finish (BOX_AGENT_CHANNEL (source), result, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

void
box_file_transfer_write_async (BoxFileTransfer *self, GBytes *data, GCancellable *cancellable,
                               GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;

  g_return_if_fail (BOX_IS_FILE_TRANSFER (self));
  g_return_if_fail (data != NULL);

  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_file_transfer_write_async);
  box_agent_channel_write_async (self->channel, 0, data, cancellable, write_done, task);
}

gboolean
box_file_transfer_write_finish (BoxFileTransfer *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

void
box_file_transfer_end_input (BoxFileTransfer *self)
{
  g_return_if_fail (BOX_IS_FILE_TRANSFER (self));
  box_agent_channel_send_eof (self->channel, 0);
}

void
box_file_transfer_close (BoxFileTransfer *self)
{
  g_return_if_fail (BOX_IS_FILE_TRANSFER (self));
  box_agent_channel_close (self->channel);
}

static void
box_file_transfer_dispose (GObject *object)
{
  BoxFileTransfer *self = BOX_FILE_TRANSFER (object);

  if (self->channel != NULL) {
    g_signal_handlers_disconnect_by_data (self->channel, self);
    box_agent_channel_close (self->channel);
    g_clear_object (&self->channel);
  }
  G_OBJECT_CLASS (box_file_transfer_parent_class)->dispose (object);
}

static void
box_file_transfer_finalize (GObject *object)
{
  BoxFileTransfer *self = BOX_FILE_TRANSFER (object);

  g_clear_pointer (&self->info, box_file_info_free);
  if (self->line != NULL)
    g_string_free (self->line, TRUE);
  G_OBJECT_CLASS (box_file_transfer_parent_class)->finalize (object);
}

static void
box_file_transfer_class_init (BoxFileTransferClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = box_file_transfer_dispose;
  object_class->finalize = box_file_transfer_finalize;
  signals[SIGNAL_DATA] =
    g_signal_new ("data", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_BYTES);
  signals[SIGNAL_ENTRIES] =
    g_signal_new ("entries", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, G_TYPE_PTR_ARRAY, G_TYPE_UINT64);
  signals[SIGNAL_EOF] =
    g_signal_new ("eof", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);
  signals[SIGNAL_DONE] =
    g_signal_new ("done", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, BOX_TYPE_FILE_INFO);
  signals[SIGNAL_FAILED] =
    g_signal_new ("failed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_ERROR);
  signals[SIGNAL_CLOSED] =
    g_signal_new ("closed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);
}

static void
box_file_transfer_init (BoxFileTransfer *self)
{
  self->length = -1;
}
