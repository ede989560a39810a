/* box-http-ws-io.c: the stream a server WebSocket runs over (see
 * box-http-ws.h, "Flow control").
 *
 * It wraps the connection libsoup hands over after the upgrade:
 *
 * - Output: every write goes to the connection's pollable output stream;
 *   the bytes the socket accepted are run through a small parser of the
 *   server's own frames (unmasked: 2-byte header, 16- or 64-bit length),
 *   which calls back once per complete data frame.  libsoup keeps data
 *   frames in the order they were sent (only pongs and the close frame jump
 *   the queue, and they are not data frames), so the n-th callback is the
 *   n-th message sent.
 * - Input: a BoxPausableInput (box-pausable-input.h): while paused,
 *   libsoup's read loop stops, and the client's bytes stay in the kernel's
 *   socket buffer (TCP then stops the client).
 * - Closing closes the wrapped stream, asynchronously.
 */
#include "config.h"

#include "box-http-ws.h"
#include "box-pausable-input.h"

/* ---- output ------------------------------------------------------------ */

#define BOX_TYPE_HTTP_WS_OUTPUT (box_http_ws_output_get_type ())
G_DECLARE_FINAL_TYPE (BoxHttpWsOutput, box_http_ws_output, BOX, HTTP_WS_OUTPUT, GOutputStream)

struct _BoxHttpWsOutput {
  GOutputStream         parent_instance;
  GOutputStream        *base;
  BoxHttpWsWrittenFunc  written;
  gpointer              written_data;
  /* the frame being written */
  guint8                head[14];
  guint                 head_len;
  guint64               payload_left;
  gboolean              in_payload;
};

static void box_http_ws_output_pollable_init (GPollableOutputStreamInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxHttpWsOutput, box_http_ws_output, G_TYPE_OUTPUT_STREAM,
                         G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_OUTPUT_STREAM,
                                                box_http_ws_output_pollable_init))

/* The header length once its first two bytes are known. */
static guint
frame_head_size (const guint8 *head)
{
  guint len7 = head[1] & 0x7f;
  guint size = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0);

  return size + ((head[1] & 0x80) != 0 ? 4 : 0);
}

static void
frame_done (BoxHttpWsOutput *self)
{
  guint8 opcode = self->head[0] & 0x0f;
  gboolean fin = (self->head[0] & 0x80) != 0;

  self->head_len = 0;
  self->in_payload = FALSE;
  if (fin && opcode <= 0x2 && self->written != NULL)
    self->written (self->written_data);
}

/* Runs the bytes the socket accepted through the frame parser. */
static void
account (BoxHttpWsOutput *self, const guint8 *data, gsize len)
{
  while (len > 0) {
    if (self->in_payload) {
      guint64 n = MIN ((guint64) len, self->payload_left);

      self->payload_left -= n;
      data += n;
      len -= n;
      if (self->payload_left == 0)
        frame_done (self);
      continue;
    }
    self->head[self->head_len++] = *data++;
    len--;
    if (self->head_len < 2 || self->head_len < frame_head_size (self->head))
      continue;
    {
      guint len7 = self->head[1] & 0x7f;

      if (len7 == 126) {
        self->payload_left = ((guint64) self->head[2] << 8) | self->head[3];
      } else if (len7 == 127) {
        self->payload_left = 0;
        for (guint i = 0; i < 8; i++)
          self->payload_left = (self->payload_left << 8) | self->head[2 + i];
      } else {
        self->payload_left = len7;
      }
    }
    self->in_payload = TRUE;
    if (self->payload_left == 0)
      frame_done (self);
  }
}

static gssize
box_http_ws_output_write (GOutputStream *stream, const void *buffer, gsize count,
                     GCancellable *cancellable, GError **error)
{
  BoxHttpWsOutput *self = BOX_HTTP_WS_OUTPUT (stream);
  gssize n = g_output_stream_write (self->base, buffer, count, cancellable, error);

  if (n > 0)
    account (self, buffer, (gsize) n);
  return n;
}

static gboolean
box_http_ws_output_flush (GOutputStream *stream, GCancellable *cancellable, GError **error)
{
  return g_output_stream_flush (BOX_HTTP_WS_OUTPUT (stream)->base, cancellable, error);
}

static gboolean
box_http_ws_output_close (GOutputStream *stream, GCancellable *cancellable, GError **error)
{
  return TRUE;
}

static gboolean
box_http_ws_output_can_poll (GPollableOutputStream *stream)
{
  return TRUE;
}

static gboolean
box_http_ws_output_is_writable (GPollableOutputStream *stream)
{
  return g_pollable_output_stream_is_writable (G_POLLABLE_OUTPUT_STREAM (BOX_HTTP_WS_OUTPUT (stream)->base));
}

static GSource *
box_http_ws_output_create_source (GPollableOutputStream *stream, GCancellable *cancellable)
{
  BoxHttpWsOutput *self = BOX_HTTP_WS_OUTPUT (stream);
  g_autoptr(GSource) child = g_pollable_output_stream_create_source (G_POLLABLE_OUTPUT_STREAM (self->base), NULL);

  return g_pollable_source_new_full (stream, child, cancellable);
}

static gssize
box_http_ws_output_write_nonblocking (GPollableOutputStream *stream, const void *buffer, gsize count,
                                 GError **error)
{
  BoxHttpWsOutput *self = BOX_HTTP_WS_OUTPUT (stream);
  gssize n = g_pollable_output_stream_write_nonblocking (G_POLLABLE_OUTPUT_STREAM (self->base),
                                                         buffer, count, NULL, error);

  if (n > 0)
    account (self, buffer, (gsize) n);
  return n;
}

static void
box_http_ws_output_finalize (GObject *object)
{
  g_clear_object (&BOX_HTTP_WS_OUTPUT (object)->base);
  G_OBJECT_CLASS (box_http_ws_output_parent_class)->finalize (object);
}

static void
box_http_ws_output_class_init (BoxHttpWsOutputClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GOutputStreamClass *stream_class = G_OUTPUT_STREAM_CLASS (klass);

  object_class->finalize = box_http_ws_output_finalize;
  stream_class->write_fn = box_http_ws_output_write;
  stream_class->flush = box_http_ws_output_flush;
  stream_class->close_fn = box_http_ws_output_close;
}

static void
box_http_ws_output_pollable_init (GPollableOutputStreamInterface *iface)
{
  iface->can_poll = box_http_ws_output_can_poll;
  iface->is_writable = box_http_ws_output_is_writable;
  iface->create_source = box_http_ws_output_create_source;
  iface->write_nonblocking = box_http_ws_output_write_nonblocking;
}

static void
box_http_ws_output_init (BoxHttpWsOutput *self)
{
}

/* ---- the stream -------------------------------------------------------- */

#define BOX_TYPE_HTTP_WS_IO (box_http_ws_io_get_type ())
G_DECLARE_FINAL_TYPE (BoxHttpWsIo, box_http_ws_io, BOX, HTTP_WS_IO, GIOStream)

struct _BoxHttpWsIo {
  GIOStream    parent_instance;
  GIOStream   *base;
  BoxPausableInput *input;
  BoxHttpWsOutput *output;
};

G_DEFINE_FINAL_TYPE (BoxHttpWsIo, box_http_ws_io, G_TYPE_IO_STREAM)

static GInputStream *
box_http_ws_io_get_input_stream (GIOStream *stream)
{
  return G_INPUT_STREAM (BOX_HTTP_WS_IO (stream)->input);
}

static GOutputStream *
box_http_ws_io_get_output_stream (GIOStream *stream)
{
  return G_OUTPUT_STREAM (BOX_HTTP_WS_IO (stream)->output);
}

static gboolean
box_http_ws_io_close (GIOStream *stream, GCancellable *cancellable, GError **error)
{
  return g_io_stream_close (BOX_HTTP_WS_IO (stream)->base, cancellable, error);
}

static void
base_closed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;

  if (!g_io_stream_close_finish (G_IO_STREAM (source), result, &error))
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

static void
box_http_ws_io_close_async (GIOStream *stream, int io_priority, GCancellable *cancellable,
                       GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (stream, cancellable, callback, user_data);

  g_task_set_source_tag (task, box_http_ws_io_close_async);
  g_io_stream_close_async (BOX_HTTP_WS_IO (stream)->base, io_priority, cancellable, base_closed, task);
}

static gboolean
box_http_ws_io_close_finish (GIOStream *stream, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

static void
box_http_ws_io_finalize (GObject *object)
{
  BoxHttpWsIo *self = BOX_HTTP_WS_IO (object);

  g_clear_object (&self->input);
  g_clear_object (&self->output);
  g_clear_object (&self->base);
  G_OBJECT_CLASS (box_http_ws_io_parent_class)->finalize (object);
}

static void
box_http_ws_io_class_init (BoxHttpWsIoClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GIOStreamClass *stream_class = G_IO_STREAM_CLASS (klass);

  object_class->finalize = box_http_ws_io_finalize;
  stream_class->get_input_stream = box_http_ws_io_get_input_stream;
  stream_class->get_output_stream = box_http_ws_io_get_output_stream;
  stream_class->close_fn = box_http_ws_io_close;
  stream_class->close_async = box_http_ws_io_close_async;
  stream_class->close_finish = box_http_ws_io_close_finish;
}

static void
box_http_ws_io_init (BoxHttpWsIo *self)
{
}

GIOStream *
box_http_ws_io_new (GIOStream *base, BoxHttpWsWrittenFunc written, gpointer user_data)
{
  BoxHttpWsIo *self;

  g_return_val_if_fail (G_IS_IO_STREAM (base), NULL);
  g_return_val_if_fail (G_IS_POLLABLE_INPUT_STREAM (g_io_stream_get_input_stream (base)), NULL);
  g_return_val_if_fail (G_IS_POLLABLE_OUTPUT_STREAM (g_io_stream_get_output_stream (base)), NULL);

  self = g_object_new (BOX_TYPE_HTTP_WS_IO, NULL);
  self->base = g_object_ref (base);
  self->input = BOX_PAUSABLE_INPUT (box_pausable_input_new (g_io_stream_get_input_stream (base)));
  self->output = g_object_new (BOX_TYPE_HTTP_WS_OUTPUT, NULL);
  self->output->base = g_object_ref (g_io_stream_get_output_stream (base));
  self->output->written = written;
  self->output->written_data = user_data;
  return G_IO_STREAM (self);
}

void
box_http_ws_io_set_input_paused (GIOStream *io, gboolean paused)
{
  g_return_if_fail (BOX_IS_HTTP_WS_IO (io));
  box_pausable_input_set_paused (BOX_HTTP_WS_IO (io)->input, paused);
}

void
box_http_ws_io_detach (GIOStream *io)
{
  g_return_if_fail (BOX_IS_HTTP_WS_IO (io));
  BOX_HTTP_WS_IO (io)->output->written = NULL;
  BOX_HTTP_WS_IO (io)->output->written_data = NULL;
}
