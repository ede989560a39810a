/* box-pausable-input.c: see box-pausable-input.h. */
#include "config.h"

#include "box-pausable-input.h"

struct _BoxPausableInput {
  GInputStream  parent_instance;
  GInputStream *base;
  gboolean      paused;
  GCancellable *gate;     /* while paused: cancelled to open the gate */
};

static void box_pausable_input_pollable_init (GPollableInputStreamInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxPausableInput, box_pausable_input, G_TYPE_INPUT_STREAM,
                         G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_INPUT_STREAM,
                                                box_pausable_input_pollable_init))

static gssize
box_pausable_input_read (GInputStream *stream, void *buffer, gsize count,
                         GCancellable *cancellable, GError **error)
{
  BoxPausableInput *self = BOX_PAUSABLE_INPUT (stream);

  return g_input_stream_read (self->base, buffer, count, cancellable, error);
}

static gboolean
box_pausable_input_close (GInputStream *stream, GCancellable *cancellable, GError **error)
{
  /* the wrapped GIOStream closes its own streams */
  return TRUE;
}

static gboolean
box_pausable_input_can_poll (GPollableInputStream *stream)
{
  return TRUE;
}

static gboolean
box_pausable_input_is_readable (GPollableInputStream *stream)
{
  BoxPausableInput *self = BOX_PAUSABLE_INPUT (stream);

  return !self->paused && g_pollable_input_stream_is_readable (G_POLLABLE_INPUT_STREAM (self->base));
}

static GSource *
box_pausable_input_create_source (GPollableInputStream *stream, GCancellable *cancellable)
{
  BoxPausableInput *self = BOX_PAUSABLE_INPUT (stream);
  g_autoptr(GSource) child = NULL;

  if (self->paused) {
    /* ready once the gate's cancellable is cancelled (on resume) */
    child = g_cancellable_source_new (self->gate);
  } else {
    child = g_pollable_input_stream_create_source (G_POLLABLE_INPUT_STREAM (self->base), NULL);
  }
  return g_pollable_source_new_full (stream, child, cancellable);
}

static gssize
box_pausable_input_read_nonblocking (GPollableInputStream *stream, void *buffer, gsize count,
                                     GError **error)
{
  BoxPausableInput *self = BOX_PAUSABLE_INPUT (stream);

  if (self->paused) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK, "input paused");
    return -1;
  }
  return g_pollable_input_stream_read_nonblocking (G_POLLABLE_INPUT_STREAM (self->base), buffer,
                                                   count, NULL, error);
}

void
box_pausable_input_set_paused (BoxPausableInput *self, gboolean paused)
{
  if (self->paused == paused)
    return;
  self->paused = paused;
  if (paused) {
    self->gate = g_cancellable_new ();
  } else {
    /* open the gate: libsoup's waiting source dispatches and it reads */
    g_cancellable_cancel (self->gate);
    g_clear_object (&self->gate);
  }
}

static void
box_pausable_input_finalize (GObject *object)
{
  BoxPausableInput *self = BOX_PAUSABLE_INPUT (object);

  g_clear_object (&self->gate);
  g_clear_object (&self->base);
  G_OBJECT_CLASS (box_pausable_input_parent_class)->finalize (object);
}

static void
box_pausable_input_class_init (BoxPausableInputClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GInputStreamClass *stream_class = G_INPUT_STREAM_CLASS (klass);

  object_class->finalize = box_pausable_input_finalize;
  stream_class->read_fn = box_pausable_input_read;
  stream_class->close_fn = box_pausable_input_close;
}

static void
box_pausable_input_pollable_init (GPollableInputStreamInterface *iface)
{
  iface->can_poll = box_pausable_input_can_poll;
  iface->is_readable = box_pausable_input_is_readable;
  iface->create_source = box_pausable_input_create_source;
  iface->read_nonblocking = box_pausable_input_read_nonblocking;
}

static void
box_pausable_input_init (BoxPausableInput *self)
{
}

GInputStream *
box_pausable_input_new (GInputStream *base)
{
  BoxPausableInput *self;

  g_return_val_if_fail (G_IS_POLLABLE_INPUT_STREAM (base), NULL);
  self = g_object_new (BOX_TYPE_PAUSABLE_INPUT, NULL);
  self->base = g_object_ref (base);
  return G_INPUT_STREAM (self);
}
