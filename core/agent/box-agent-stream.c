/* box-agent-stream.c: a pollable GIOStream over one BoxAgentChannel.
 *
 * The state lives in a reference-counted Shared block that the GIOStream,
 * its two halves, writes in flight and a lingering close all hold: libsoup
 * and GIO keep references on the halves independently of the GIOStream.
 * Every async operation completes on the main context without threads
 * (GIO's default close_async and flush_async would run close_fn in a
 * thread). */
#include "config.h"

#include <string.h>

#include "box-agent-stream.h"
#include "box-error.h"

/* at most this much per DATA write handed to the channel */
#define WRITE_PIECE (64 * 1024)

typedef struct {
  gint             ref_count;
  BoxAgentChannel *channel;
  GMainContext    *context;       /* where the channel lives */
  gulong           data_id;
  gulong           eof_id;
  gulong           closed_id;

  GQueue           in;            /* GBytes from the agent, not read yet */
  gsize            in_off;        /* read from the head already */
  gsize            in_queued;
  gboolean         in_eof;        /* EOF on stream 1 (or the channel closed) */
  gboolean         in_closed;     /* the input stream was closed: discard */

  gsize            out_in_flight; /* written, not yet queued within credit */
  GError          *out_error;
  gboolean         out_closed;

  gboolean         channel_closed;
  gboolean         aborted;       /* box_agent_stream_abort(): nothing more goes out */
  gboolean         close_written; /* close the channel once the writes are out */
  GSource         *linger;        /* closing: the channel is closed after it */

  const BoxAgentKeeper *keeper;   /* box_agent_stream_set_keeper() */
  gpointer         keeper_data;
} Shared;

static void
shared_touch (Shared *sh)
{
  if (sh->keeper != NULL)
    sh->keeper->touch (sh->keeper_data);
}

static void
shared_release (Shared *sh)
{
  const BoxAgentKeeper *keeper = g_steal_pointer (&sh->keeper);

  if (keeper != NULL)
    keeper->release (g_steal_pointer (&sh->keeper_data));
}

static Shared *
shared_ref (Shared *sh)
{
  sh->ref_count++;
  return sh;
}

static void
shared_unref (Shared *sh)
{
  if (--sh->ref_count > 0)
    return;
  shared_release (sh);
  if (sh->linger != NULL) {
    g_source_destroy (sh->linger);
    g_source_unref (sh->linger);
  }
  g_signal_handler_disconnect (sh->channel, sh->data_id);
  g_signal_handler_disconnect (sh->channel, sh->eof_id);
  g_signal_handler_disconnect (sh->channel, sh->closed_id);
  /* nobody reads or writes any more: the work in the sandbox ends */
  box_agent_channel_close (sh->channel);
  g_queue_clear_full (&sh->in, (GDestroyNotify) g_bytes_unref);
  g_clear_error (&sh->out_error);
  g_object_unref (sh->channel);
  g_main_context_unref (sh->context);
  g_free (sh);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Shared, shared_unref)

static gboolean
shared_readable (Shared *sh)
{
  return sh->in_queued > 0 || sh->in_eof || sh->in_closed;
}

static gboolean
shared_writable (Shared *sh)
{
  return sh->out_in_flight < BOX_AGENT_STREAM_WRITE_LIMIT || sh->out_error != NULL ||
         sh->out_closed || sh->channel_closed || sh->aborted;
}

static void
on_data (BoxAgentChannel *channel, guint stream, GBytes *bytes, gpointer user_data)
{
  Shared *sh = user_data;

  if (stream != 1 || sh->in_closed) {
    /* not ours to deliver (or nobody reads): taken at once */
    box_agent_channel_consumed (channel, g_bytes_get_size (bytes));
    return;
  }
  g_queue_push_tail (&sh->in, g_bytes_ref (bytes));
  sh->in_queued += g_bytes_get_size (bytes);
}

static void
on_eof (BoxAgentChannel *channel, guint stream, gpointer user_data)
{
  Shared *sh = user_data;

  if (stream == 1)
    sh->in_eof = TRUE;
}

static void
on_closed (BoxAgentChannel *channel, gpointer user_data)
{
  Shared *sh = user_data;

  sh->channel_closed = TRUE;
  sh->in_eof = TRUE;
  if (sh->linger != NULL) {
    g_source_destroy (sh->linger);
    g_clear_pointer (&sh->linger, g_source_unref);
    shared_unref (sh);   /* the linger's reference */
  }
}

/* ---- a source that is ready while a condition holds -------------------- */

typedef struct {
  GSource   source;
  Shared   *sh;
  gboolean (*ready) (Shared *sh);
} CondSource;

static gboolean
cond_prepare (GSource *source, gint *timeout)
{
  CondSource *cs = (CondSource *) source;

  *timeout = -1;
  return cs->ready (cs->sh);
}

static gboolean
cond_check (GSource *source)
{
  CondSource *cs = (CondSource *) source;

  return cs->ready (cs->sh);
}

static gboolean
cond_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  return callback != NULL ? callback (user_data) : G_SOURCE_CONTINUE;
}

static void
cond_finalize (GSource *source)
{
  shared_unref (((CondSource *) source)->sh);
}

/* g_pollable_source_new_full() gives its child a dummy closure, which only
 * sources with a closure_callback may have */
static gboolean
cond_closure_callback (gpointer data)
{
  GClosure *closure = data;
  GValue result = G_VALUE_INIT;
  gboolean ret;

  g_value_init (&result, G_TYPE_BOOLEAN);
  g_closure_invoke (closure, &result, 0, NULL, NULL);
  ret = g_value_get_boolean (&result);
  g_value_unset (&result);
  return ret;
}

static GSourceFuncs cond_funcs = {
  cond_prepare, cond_check, cond_dispatch, cond_finalize,
  (GSourceFunc) cond_closure_callback, NULL,
};

/* State changes only in dispatches on this context, and prepare runs again
 * after each dispatch, so no wake-up is needed. */
static GSource *
cond_source_new (GObject *pollable, Shared *sh, gboolean (*ready) (Shared *sh),
                 GCancellable *cancellable)
{
  GSource *child = g_source_new (&cond_funcs, sizeof (CondSource));
  GSource *source;

  ((CondSource *) child)->sh = shared_ref (sh);
  ((CondSource *) child)->ready = ready;
  source = g_pollable_source_new_full (pollable, child, cancellable);
  g_source_unref (child);
  return source;
}

static void
would_block (GError **error)
{
  g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK, "Operation would block");
}

/* ---- the input half ----------------------------------------------------- */

#define BOX_TYPE_AGENT_INPUT (box_agent_input_get_type ())
G_DECLARE_FINAL_TYPE (BoxAgentInput, box_agent_input, BOX, AGENT_INPUT, GInputStream)

struct _BoxAgentInput {
  GInputStream parent_instance;
  Shared      *sh;
};

static void box_agent_input_pollable_init (GPollableInputStreamInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxAgentInput, box_agent_input, G_TYPE_INPUT_STREAM,
                               G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_INPUT_STREAM,
                                                      box_agent_input_pollable_init))

static gssize
input_read_nonblocking (GPollableInputStream *pollable, void *buffer, gsize count,
                        GError **error)
{
  Shared *sh = BOX_AGENT_INPUT (pollable)->sh;
  gsize done = 0;

  if (sh->in_queued == 0) {
    if (sh->in_eof || sh->in_closed)
      return 0;
    would_block (error);
    return -1;
  }
  while (done < count && sh->in_queued > 0) {
    GBytes *head = g_queue_peek_head (&sh->in);
    gsize len = 0;
    const guint8 *p = g_bytes_get_data (head, &len);
    gsize n = MIN (count - done, len - sh->in_off);

    memcpy ((guint8 *) buffer + done, p + sh->in_off, n);
    done += n;
    sh->in_off += n;
    sh->in_queued -= n;
    if (sh->in_off == len) {
      g_bytes_unref (g_queue_pop_head (&sh->in));
      sh->in_off = 0;
    }
  }
  /* read by the consumer: the agent may send that much more */
  box_agent_channel_consumed (sh->channel, done);
  shared_touch (sh);
  return (gssize) done;
}

static gboolean
input_is_readable (GPollableInputStream *pollable)
{
  return shared_readable (BOX_AGENT_INPUT (pollable)->sh);
}

static GSource *
input_create_source (GPollableInputStream *pollable, GCancellable *cancellable)
{
  return cond_source_new (G_OBJECT (pollable), BOX_AGENT_INPUT (pollable)->sh, shared_readable,
                          cancellable);
}

static void
box_agent_input_pollable_init (GPollableInputStreamInterface *iface)
{
  iface->is_readable = input_is_readable;
  iface->create_source = input_create_source;
  iface->read_nonblocking = input_read_nonblocking;
}

static gssize
input_read (GInputStream *stream, void *buffer, gsize count, GCancellable *cancellable,
            GError **error)
{
  if (!g_main_context_is_owner (BOX_AGENT_INPUT (stream)->sh->context)) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                         "an agent stream is read on its main context only");
    return -1;
  }
  /* nothing here may wait: see the header */
  return input_read_nonblocking (G_POLLABLE_INPUT_STREAM (stream), buffer, count, error);
}

static gboolean
input_close (GInputStream *stream, GCancellable *cancellable, GError **error)
{
  Shared *sh = BOX_AGENT_INPUT (stream)->sh;
  gsize dropped = sh->in_queued;

  /* what comes now is taken and dropped, so the sender can finish */
  sh->in_closed = TRUE;
  g_queue_clear_full (&sh->in, (GDestroyNotify) g_bytes_unref);
  sh->in_off = 0;
  sh->in_queued = 0;
  box_agent_channel_consumed (sh->channel, dropped);
  return TRUE;
}

static void
input_close_async (GInputStream *stream, int io_priority, GCancellable *cancellable,
                   GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (stream, cancellable, callback, user_data);
  GError *error = NULL;

  g_task_set_source_tag (task, input_close_async);
  if (input_close (stream, cancellable, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

static gboolean
input_close_finish (GInputStream *stream, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

static void
box_agent_input_finalize (GObject *object)
{
  shared_unref (BOX_AGENT_INPUT (object)->sh);
  G_OBJECT_CLASS (box_agent_input_parent_class)->finalize (object);
}

static void
box_agent_input_class_init (BoxAgentInputClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GInputStreamClass *stream_class = G_INPUT_STREAM_CLASS (klass);

  object_class->finalize = box_agent_input_finalize;
  stream_class->read_fn = input_read;
  stream_class->close_fn = input_close;
  stream_class->close_async = input_close_async;
  stream_class->close_finish = input_close_finish;
}

static void
box_agent_input_init (BoxAgentInput *self)
{
}

/* ---- the output half ---------------------------------------------------- */

#define BOX_TYPE_AGENT_OUTPUT (box_agent_output_get_type ())
G_DECLARE_FINAL_TYPE (BoxAgentOutput, box_agent_output, BOX, AGENT_OUTPUT, GOutputStream)

struct _BoxAgentOutput {
  GOutputStream parent_instance;
  Shared       *sh;
};

static void box_agent_output_pollable_init (GPollableOutputStreamInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxAgentOutput, box_agent_output, G_TYPE_OUTPUT_STREAM,
                               G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_OUTPUT_STREAM,
                                                      box_agent_output_pollable_init))

typedef struct {
  Shared *sh;
  gsize   len;
} WriteOp;

static void
write_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  WriteOp *op = user_data;
  Shared *sh = op->sh;
  GError *error = NULL;

  if (!box_agent_channel_write_finish (BOX_AGENT_CHANNEL (source), result, &error) &&
      sh->out_error == NULL)
    sh->out_error = error;
  else
    g_clear_error (&error);
  sh->out_in_flight -= op->len;
  if (sh->close_written && sh->out_in_flight == 0)
    box_agent_channel_close (sh->channel);
  shared_unref (sh);
  g_free (op);
}

static gboolean
output_check (Shared *sh, GError **error)
{
  if (sh->out_error != NULL) {
    if (g_error_matches (sh->out_error, G_IO_ERROR, G_IO_ERROR_CLOSED))
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_BROKEN_PIPE, "the peer closed the channel");
    else
      g_propagate_error (error, g_error_copy (sh->out_error));
    return FALSE;
  }
  if (sh->channel_closed || sh->aborted) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_BROKEN_PIPE, "the peer closed the channel");
    return FALSE;
  }
  if (sh->out_closed) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_CLOSED, "Stream is already closed");
    return FALSE;
  }
  return TRUE;
}

static gssize
output_send (Shared *sh, const void *buffer, gsize count)
{
  gsize n = MIN (count, WRITE_PIECE);
  g_autoptr(GBytes) bytes = g_bytes_new (buffer, n);
  WriteOp *op = g_new0 (WriteOp, 1);

  shared_touch (sh);
  op->sh = shared_ref (sh);
  op->len = n;
  sh->out_in_flight += n;
  box_agent_channel_write_async (sh->channel, 0, bytes, NULL, write_done, op);
  return (gssize) n;
}

static gssize
output_write_nonblocking (GPollableOutputStream *pollable, const void *buffer, gsize count,
                          GError **error)
{
  Shared *sh = BOX_AGENT_OUTPUT (pollable)->sh;

  if (!output_check (sh, error))
    return -1;
  if (count == 0)
    return 0;
  if (sh->out_in_flight >= BOX_AGENT_STREAM_WRITE_LIMIT) {
    would_block (error);
    return -1;
  }
  return output_send (sh, buffer, MIN (count, BOX_AGENT_STREAM_WRITE_LIMIT - sh->out_in_flight));
}

static gboolean
output_is_writable (GPollableOutputStream *pollable)
{
  return shared_writable (BOX_AGENT_OUTPUT (pollable)->sh);
}

static GSource *
output_create_source (GPollableOutputStream *pollable, GCancellable *cancellable)
{
  return cond_source_new (G_OBJECT (pollable), BOX_AGENT_OUTPUT (pollable)->sh, shared_writable,
                          cancellable);
}

static void
box_agent_output_pollable_init (GPollableOutputStreamInterface *iface)
{
  iface->is_writable = output_is_writable;
  iface->create_source = output_create_source;
  iface->write_nonblocking = output_write_nonblocking;
}

/* A write from another thread, done on the channel's context: GIO's
 * default close_async runs a filter stream's close_fn in a worker thread,
 * and libsoup's chunked body stream writes its last chunk from there. */
typedef struct {
  Shared       *sh;
  const guint8 *buffer;
  gsize         count;
  gssize        result;
  GError       *error;
  gboolean      done;
  GMutex        mutex;
  GCond         cond;
} ForeignWrite;

static gboolean
foreign_write_cb (gpointer data)
{
  ForeignWrite *fw = data;
  gsize done = 0;

  /* a blocking write may take it all: beyond the limit it waits in the
   * channel's queue (such writes are a few bytes at the end of a body) */
  if (output_check (fw->sh, &fw->error)) {
    while (done < fw->count)
      done += (gsize) output_send (fw->sh, fw->buffer + done, fw->count - done);
    fw->result = (gssize) done;
  } else {
    fw->result = -1;
  }
  g_mutex_lock (&fw->mutex);
  fw->done = TRUE;
  g_cond_signal (&fw->cond);
  g_mutex_unlock (&fw->mutex);
  return G_SOURCE_REMOVE;
}

static gssize
output_write (GOutputStream *stream, const void *buffer, gsize count, GCancellable *cancellable,
              GError **error)
{
  Shared *sh = BOX_AGENT_OUTPUT (stream)->sh;
  ForeignWrite fw = { sh, buffer, count, -1, NULL, FALSE };

  if (g_main_context_is_owner (sh->context))
    return output_write_nonblocking (G_POLLABLE_OUTPUT_STREAM (stream), buffer, count, error);
  g_mutex_init (&fw.mutex);
  g_cond_init (&fw.cond);
  g_main_context_invoke (sh->context, foreign_write_cb, &fw);
  /* the main context runs it soon (it only queues); fw is on our stack */
  g_mutex_lock (&fw.mutex);
  while (!fw.done)
    g_cond_wait (&fw.cond, &fw.mutex);
  g_mutex_unlock (&fw.mutex);
  g_mutex_clear (&fw.mutex);
  g_cond_clear (&fw.cond);
  if (fw.result < 0)
    g_propagate_error (error, fw.error);
  return fw.result;
}

static gboolean
output_close (GOutputStream *stream, GCancellable *cancellable, GError **error)
{
  Shared *sh = BOX_AGENT_OUTPUT (stream)->sh;

  if (sh->out_closed)
    return TRUE;
  sh->out_closed = TRUE;
  /* after the writes queued so far */
  if (!sh->channel_closed)
    box_agent_channel_send_eof (sh->channel, 0);
  return TRUE;
}

static void
output_complete_now (GOutputStream *stream, gboolean closing, GCancellable *cancellable,
                     GAsyncReadyCallback callback, gpointer user_data, gpointer tag)
{
  g_autoptr(GTask) task = g_task_new (stream, cancellable, callback, user_data);

  g_task_set_source_tag (task, tag);
  if (closing)
    output_close (stream, cancellable, NULL);
  g_task_return_boolean (task, TRUE);
}

static void
output_close_async (GOutputStream *stream, int io_priority, GCancellable *cancellable,
                    GAsyncReadyCallback callback, gpointer user_data)
{
  output_complete_now (stream, TRUE, cancellable, callback, user_data, output_close_async);
}

static void
output_flush_async (GOutputStream *stream, int io_priority, GCancellable *cancellable,
                    GAsyncReadyCallback callback, gpointer user_data)
{
  /* what was written is on its way already */
  output_complete_now (stream, FALSE, cancellable, callback, user_data, output_flush_async);
}

static gboolean
output_finish (GOutputStream *stream, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

static void
box_agent_output_finalize (GObject *object)
{
  shared_unref (BOX_AGENT_OUTPUT (object)->sh);
  G_OBJECT_CLASS (box_agent_output_parent_class)->finalize (object);
}

static void
box_agent_output_class_init (BoxAgentOutputClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GOutputStreamClass *stream_class = G_OUTPUT_STREAM_CLASS (klass);

  object_class->finalize = box_agent_output_finalize;
  stream_class->write_fn = output_write;
  stream_class->close_fn = output_close;
  stream_class->close_async = output_close_async;
  stream_class->close_finish = output_finish;
  stream_class->flush_async = output_flush_async;
  stream_class->flush_finish = output_finish;
}

static void
box_agent_output_init (BoxAgentOutput *self)
{
}

/* ---- the GIOStream ------------------------------------------------------ */

struct _BoxAgentStream {
  GIOStream       parent_instance;
  Shared         *sh;
  BoxAgentInput  *input;
  BoxAgentOutput *output;
};

G_DEFINE_FINAL_TYPE (BoxAgentStream, box_agent_stream, G_TYPE_IO_STREAM)

static gboolean
linger_expired (gpointer user_data)
{
  Shared *sh = user_data;

  g_clear_pointer (&sh->linger, g_source_unref);
  box_agent_channel_close (sh->channel);
  shared_unref (sh);   /* the linger's reference */
  return G_SOURCE_REMOVE;
}

static gboolean
stream_close (GIOStream *stream, GCancellable *cancellable, GError **error)
{
  BoxAgentStream *self = BOX_AGENT_STREAM (stream);
  Shared *sh = self->sh;

  shared_release (sh);
  input_close (G_INPUT_STREAM (self->input), cancellable, NULL);
  output_close (G_OUTPUT_STREAM (self->output), cancellable, NULL);
  /* The agent closes the channel once both sides are done; until then the
   * writes still queued go out (they hold the shared state). */
  if (!sh->channel_closed && sh->linger == NULL) {
    sh->linger = g_timeout_source_new_seconds (BOX_AGENT_STREAM_LINGER_S);
    g_source_set_callback (sh->linger, linger_expired, shared_ref (sh), NULL);
    g_source_attach (sh->linger, g_main_context_get_thread_default ());
  }
  return TRUE;
}

static void
stream_close_async (GIOStream *stream, int io_priority, GCancellable *cancellable,
                    GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (stream, cancellable, callback, user_data);

  g_task_set_source_tag (task, stream_close_async);
  stream_close (stream, cancellable, NULL);
  g_task_return_boolean (task, TRUE);
}

static gboolean
stream_close_finish (GIOStream *stream, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

static GInputStream *
stream_get_input (GIOStream *stream)
{
  return G_INPUT_STREAM (BOX_AGENT_STREAM (stream)->input);
}

static GOutputStream *
stream_get_output (GIOStream *stream)
{
  return G_OUTPUT_STREAM (BOX_AGENT_STREAM (stream)->output);
}

static void
box_agent_stream_finalize (GObject *object)
{
  BoxAgentStream *self = BOX_AGENT_STREAM (object);

  g_clear_object (&self->input);
  g_clear_object (&self->output);
  shared_unref (self->sh);
  G_OBJECT_CLASS (box_agent_stream_parent_class)->finalize (object);
}

static void
box_agent_stream_class_init (BoxAgentStreamClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GIOStreamClass *stream_class = G_IO_STREAM_CLASS (klass);

  object_class->finalize = box_agent_stream_finalize;
  stream_class->get_input_stream = stream_get_input;
  stream_class->get_output_stream = stream_get_output;
  stream_class->close_fn = stream_close;
  stream_class->close_async = stream_close_async;
  stream_class->close_finish = stream_close_finish;
}

static void
box_agent_stream_init (BoxAgentStream *self)
{
}

BoxAgentStream *
box_agent_stream_new (BoxAgentChannel *channel)
{
  BoxAgentStream *self;
  Shared *sh;

  g_return_val_if_fail (BOX_IS_AGENT_CHANNEL (channel), NULL);

  sh = g_new0 (Shared, 1);
  sh->ref_count = 1;
  sh->channel = g_object_ref (channel);
  sh->context = g_main_context_ref_thread_default ();
  g_queue_init (&sh->in);
  sh->data_id = g_signal_connect (channel, "data", G_CALLBACK (on_data), sh);
  sh->eof_id = g_signal_connect (channel, "eof", G_CALLBACK (on_eof), sh);
  sh->closed_id = g_signal_connect (channel, "closed", G_CALLBACK (on_closed), sh);
  sh->channel_closed = box_agent_channel_is_closed (channel);
  sh->in_eof = sh->channel_closed;

  self = g_object_new (BOX_TYPE_AGENT_STREAM, NULL);
  self->sh = sh;
  self->input = g_object_new (BOX_TYPE_AGENT_INPUT, NULL);
  self->input->sh = shared_ref (sh);
  self->output = g_object_new (BOX_TYPE_AGENT_OUTPUT, NULL);
  self->output->sh = shared_ref (sh);
  return self;
}

BoxAgentChannel *
box_agent_stream_get_channel (BoxAgentStream *self)
{
  g_return_val_if_fail (BOX_IS_AGENT_STREAM (self), NULL);
  return self->sh->channel;
}

void
box_agent_stream_abort (BoxAgentStream *self)
{
  g_return_if_fail (BOX_IS_AGENT_STREAM (self));
  shared_release (self->sh);
  self->sh->aborted = TRUE;
  self->sh->in_eof = TRUE;
  box_agent_channel_close (self->sh->channel);
}

void
box_agent_stream_set_keeper (BoxAgentStream *self, const BoxAgentKeeper *keeper, gpointer data)
{
  g_return_if_fail (BOX_IS_AGENT_STREAM (self));
  g_return_if_fail (keeper != NULL && self->sh->keeper == NULL);
  self->sh->keeper = keeper;
  self->sh->keeper_data = data;
}

void
box_agent_stream_close_after_writes (BoxAgentStream *self)
{
  Shared *sh;

  g_return_if_fail (BOX_IS_AGENT_STREAM (self));
  sh = self->sh;
  shared_release (sh);
  input_close (G_INPUT_STREAM (self->input), NULL, NULL);
  output_close (G_OUTPUT_STREAM (self->output), NULL, NULL);
  if (sh->out_in_flight == 0)
    box_agent_channel_close (sh->channel);
  else
    sh->close_written = TRUE;
}
