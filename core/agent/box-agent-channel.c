/* box-agent-channel.c: one channel of a guest agent connection: credits
 * both ways, the write queue, and the frames from the agent as signals. */
#include "config.h"

#include <string.h>

#include "box-agent-private.h"
#include "box-error.h"

/* bytes kept for a channel nobody took yet beyond its window of DATA
 * (control, EOF and CREDIT frames, and what each frame costs to keep) */
#define HELD_EXTRA_MAX (256u << 10)
/* after our CLOSE, the agent's answer is awaited this long; then the
 * channel is over anyway (its id forgotten) */
#define CLOSE_TIMEOUT_MS (30 * 1000)
/* what keeping a frame costs besides its payload */
#define HELD_FRAME_COST (BOX_AGENT_HEADER_SIZE + sizeof (HeldFrame) + 32)

typedef struct {
  BoxAgentChannel *self;
  GTask *task;
  GBytes *data;
  gsize off;
  guint8 stream;
  gboolean queued;              /* every byte is in the connection's queue ... */
  guint64 mark;                 /* ... and on the stream once normal_written reaches this */
  GSource *cancel_source;
} PendingWrite;

typedef struct {
  BoxAgentFrameHeader header;
  GBytes *payload;
} HeldFrame;

struct _BoxAgentChannel {
  GObject parent_instance;

  BoxAgentClient *client;       /* not a reference; NULL once the channel is over */
  GMainContext *context;
  guint32 id;
  guint32 window;
  JsonObject *reply;

  gsize send_credit;            /* DATA bytes we may still send */
  GQueue writes;                /* PendingWrite, in call order */
  guint eof_pending;            /* a bit per stream: EOF once the writes are out */
  gboolean pumping;

  gboolean held;                /* frames wait in held_frames until released */
  GQueue held_frames;
  gsize held_bytes;             /* what held_frames cost */
  gsize charged;                /* held_bytes + buffered, charged to the client */
  gboolean uncharged;           /* the client forgot the channel: no more charges */
  GSource *release_source;
  GSource *close_timer;         /* the host's limit on the wait for the agent's CLOSE */
  gboolean lost;                /* the connection went away */
  gboolean close_sent;
  gboolean closed;              /* ::closed emitted */

  gsize recv_credit;            /* DATA bytes the agent may still send */
  gsize buffered;               /* handed over by ::data, not consumed */
  gsize uncredited;             /* consumed, not yet credited back */
};

enum { SIGNAL_DATA, SIGNAL_EOF, SIGNAL_CTRL, SIGNAL_CLOSED, N_SIGNALS };
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (BoxAgentChannel, box_agent_channel, G_TYPE_OBJECT)

static void
held_frame_free (HeldFrame *held)
{
  g_bytes_unref (held->payload);
  g_free (held);
}

static void
pending_write_free (PendingWrite *pw)
{
  if (pw->cancel_source != NULL) {
    g_source_destroy (pw->cancel_source);
    g_source_unref (pw->cancel_source);
  }
  g_clear_object (&pw->task);
  g_bytes_unref (pw->data);
  g_free (pw);
}

static void
send_frame_take (BoxAgentChannel *self, GBytes *frame, gboolean urgent)
{
  if (self->client != NULL)
    box_agent_client_send_frame (self->client, frame, urgent);
  g_bytes_unref (frame);
}

static void
charge (BoxAgentChannel *self, gsize n)
{
  if (self->client == NULL || self->uncharged)
    return;
  self->charged += n;
  box_agent_client_charge (self->client, (gssize) n);
}

static void
refund (BoxAgentChannel *self, gsize n)
{
  n = MIN (n, self->charged);
  self->charged -= n;
  if (self->client != NULL && n > 0)
    box_agent_client_charge (self->client, -(gssize) n);
}

void
box_agent_channel_drop_charges (BoxAgentChannel *self)
{
  refund (self, self->charged);
  self->uncharged = TRUE;
}

static gsize
held_cost (HeldFrame *held)
{
  return g_bytes_get_size (held->payload) + HELD_FRAME_COST;
}

static void
clear_held (BoxAgentChannel *self)
{
  refund (self, self->held_bytes);
  self->held_bytes = 0;
  g_queue_clear_full (&self->held_frames, (GDestroyNotify) held_frame_free);
}

/* Fail every pending write with @error (taken). */
static void
fail_writes (BoxAgentChannel *self, GError *error)
{
  PendingWrite *pw;

  while ((pw = g_queue_pop_head (&self->writes)) != NULL) {
    g_task_return_error (pw->task, g_error_copy (error));
    pending_write_free (pw);
  }
  self->eof_pending = 0;
  g_error_free (error);
}

/* Complete the writes at the head whose bytes are on the stream. */
static void
complete_flushed (BoxAgentChannel *self)
{
  PendingWrite *pw;

  while (self->client != NULL && (pw = g_queue_peek_head (&self->writes)) != NULL &&
         pw->queued && pw->mark <= self->client->normal_written) {
    g_queue_pop_head (&self->writes);
    g_task_return_boolean (pw->task, TRUE);
    pending_write_free (pw);
  }
}

void
box_agent_channel_flushed (BoxAgentChannel *self)
{
  g_autoptr(BoxAgentChannel) keep G_GNUC_UNUSED = g_object_ref (self);

  complete_flushed (self);
}

/* Queue what credit allows of the writes, in order.  A write completes
 * once its last byte was written to the stream (complete_flushed()), not
 * when it is queued: a guest that grants credit and does not read leaves
 * the writer waiting, not the host's queue growing. */
static void
pump_writes (BoxAgentChannel *self)
{
  g_autoptr(BoxAgentChannel) keep G_GNUC_UNUSED = g_object_ref (self);
  gboolean all_queued = TRUE;

  if (self->pumping)
    return;
  self->pumping = TRUE;
  for (GList *l = self->writes.head; l != NULL && self->client != NULL; l = l->next) {
    PendingWrite *pw = l->data;
    gsize len = 0;
    const guint8 *p = g_bytes_get_data (pw->data, &len);

    if (pw->queued)
      continue;
    pw->mark = self->client->normal_queued;
    while (pw->off < len && self->send_credit > 0 && self->client != NULL) {
      gsize n = MIN (MIN (len - pw->off, self->send_credit), BOX_AGENT_DATA_CHUNK);
      GBytes *frame = box_agent_frame_build (BOX_AGENT_FRAME_DATA, pw->stream, self->id,
                                             p + pw->off, n);

      pw->mark = box_agent_client_send_frame (self->client, frame, FALSE);
      g_bytes_unref (frame);
      pw->off += n;
      self->send_credit -= n;
    }
    if (pw->off < len) {
      all_queued = FALSE;
      break; /* wait for CREDIT */
    }
    pw->queued = TRUE;
    if (self->client != NULL && pw->mark > self->client->normal_written)
      box_agent_client_wait_flushed (self->client, self, pw->mark);
  }
  if (self->client != NULL && all_queued && self->eof_pending != 0) {
    for (guint s = 0; s < 8; s++)
      if (self->eof_pending & (1u << s))
        send_frame_take (self, box_agent_frame_build (BOX_AGENT_FRAME_EOF, (guint8) s, self->id, NULL, 0), FALSE);
    self->eof_pending = 0;
  }
  self->pumping = FALSE;
  /* (a write with nothing left to write completes at once; its callback
   * may write again) */
  complete_flushed (self);
}

/* The channel is over: nothing more goes either way. */
static void
finish (BoxAgentChannel *self, GError *write_error)
{
  g_autoptr(BoxAgentChannel) keep G_GNUC_UNUSED = g_object_ref (self);
  BoxAgentClient *client;

  box_agent_channel_drop_charges (self);
  box_agent_destroy_source (&self->close_timer);
  client = g_steal_pointer (&self->client);
  fail_writes (self, write_error);
  if (client != NULL)
    box_agent_client_forget_channel (client, self);
  if (!self->held && !self->closed) {
    self->closed = TRUE;
    g_signal_emit (self, signals[SIGNAL_CLOSED], 0);
  }
}

static void
process_frame (BoxAgentChannel *self, const BoxAgentFrameHeader *header, GBytes *payload)
{
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (payload, &len);

  switch (header->type) {
  case BOX_AGENT_FRAME_DATA:
    if (self->close_sent || len == 0)
      break;
    self->buffered += len;
    charge (self, len);
    g_signal_emit (self, signals[SIGNAL_DATA], 0, (guint) header->stream, payload);
    break;
  case BOX_AGENT_FRAME_EOF:
    if (!self->close_sent)
      g_signal_emit (self, signals[SIGNAL_EOF], 0, (guint) header->stream);
    break;
  case BOX_AGENT_FRAME_CREDIT:
    if (len == 4) {
      guint32 credit = (guint32) p[0] | ((guint32) p[1] << 8) | ((guint32) p[2] << 16) | ((guint32) p[3] << 24);

      self->send_credit = MIN (self->send_credit + credit, (gsize) G_MAXUINT32);
      pump_writes (self);
    }
    break;
  case BOX_AGENT_FRAME_CTRL: {
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) msg = box_agent_parse_ctrl (p, len, &error);

    if (msg == NULL && self->client != NULL)
      box_agent_client_note (self->client, "channel %u: %s", self->id, error->message);
    else if (!self->close_sent)
      g_signal_emit (self, signals[SIGNAL_CTRL], 0, msg);
    break;
  }
  case BOX_AGENT_FRAME_CLOSE:
    finish (self, g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CLOSED, "the channel is closed"));
    break;
  default:
    break;
  }
}

void
box_agent_channel_handle_frame (BoxAgentChannel *self, const BoxAgentFrameHeader *header,
                                GBytes *payload)
{
  g_autoptr(BoxAgentChannel) keep G_GNUC_UNUSED = g_object_ref (self);

  if (self->close_sent && header->type != BOX_AGENT_FRAME_CLOSE)
    return;
  if (header->type == BOX_AGENT_FRAME_DATA) {
    /* a guest is not trusted to keep to its credit: what it sends beyond
     * is never buffered, and the channel ends */
    if (header->length > self->recv_credit) {
      if (self->client != NULL)
        box_agent_client_note (self->client, "channel %u: DATA beyond the credit; closing it", self->id);
      box_agent_channel_close (self);
      return;
    }
    self->recv_credit -= header->length;
  }
  /* held data counts in bytes: DATA within the window, the rest within
   * HELD_EXTRA_MAX */
  if (self->held && self->held_bytes + g_bytes_get_size (payload) + HELD_FRAME_COST >
                    (gsize) self->window + HELD_EXTRA_MAX) {
    if (self->client != NULL)
      box_agent_client_note (self->client, "channel %u: too much before it was taken; closing it", self->id);
    box_agent_channel_close (self);
    return;
  }
  if (self->held) {
    HeldFrame *held = g_new0 (HeldFrame, 1);

    held->header = *header;
    held->payload = g_bytes_ref (payload);
    g_queue_push_tail (&self->held_frames, held);
    self->held_bytes += held_cost (held);
    charge (self, held_cost (held));
    /* the id is free for reuse only once the agent's CLOSE is seen */
    if (header->type == BOX_AGENT_FRAME_CLOSE && self->client != NULL) {
      box_agent_channel_drop_charges (self);
      box_agent_client_forget_channel (g_steal_pointer (&self->client), self);
    }
    return;
  }
  process_frame (self, header, payload);
}

static gboolean
release_cb (gpointer data)
{
  BoxAgentChannel *self = data;
  g_autoptr(BoxAgentChannel) keep G_GNUC_UNUSED = g_object_ref (self);
  HeldFrame *held;

  g_clear_pointer (&self->release_source, g_source_unref);
  self->held = FALSE;
  while (!self->closed && (held = g_queue_pop_head (&self->held_frames)) != NULL) {
    self->held_bytes -= MIN (self->held_bytes, held_cost (held));
    refund (self, held_cost (held));
    process_frame (self, &held->header, held->payload);
    held_frame_free (held);
  }
  /* over while held (lost, or closed by the agent) */
  if (!self->closed && self->client == NULL) {
    self->closed = TRUE;
    g_signal_emit (self, signals[SIGNAL_CLOSED], 0);
  }
  return G_SOURCE_REMOVE;
}

void
box_agent_channel_release (BoxAgentChannel *self)
{
  if (!self->held || self->release_source != NULL)
    return;
  self->release_source = g_idle_source_new ();
  g_source_set_priority (self->release_source, G_PRIORITY_DEFAULT);
  g_source_set_callback (self->release_source, release_cb, self, NULL);
  g_source_attach (self->release_source, self->context);
}

void
box_agent_channel_lost (BoxAgentChannel *self)
{
  if (self->client == NULL)
    return;
  self->lost = TRUE;
  finish (self, g_error_new_literal (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE, BOX_AGENT_GONE_MESSAGE));
}

BoxAgentChannel *
box_agent_channel_new (BoxAgentClient *client, guint32 id, guint32 window)
{
  BoxAgentChannel *self = g_object_new (BOX_TYPE_AGENT_CHANNEL, NULL);

  self->client = client;
  self->context = g_main_context_ref (box_agent_client_get_context (client));
  self->id = id;
  self->window = window;
  self->send_credit = window;
  self->recv_credit = window;
  return self;
}

void
box_agent_channel_set_reply (BoxAgentChannel *self, JsonObject *reply)
{
  g_clear_pointer (&self->reply, json_object_unref);
  self->reply = json_object_ref (reply);
}

/* ---- public ----------------------------------------------------------------- */

guint32
box_agent_channel_get_id (BoxAgentChannel *self)
{
  g_return_val_if_fail (BOX_IS_AGENT_CHANNEL (self), 0);
  return self->id;
}

JsonObject *
box_agent_channel_get_reply (BoxAgentChannel *self)
{
  g_return_val_if_fail (BOX_IS_AGENT_CHANNEL (self), NULL);
  return self->reply;
}

gboolean
box_agent_channel_is_closed (BoxAgentChannel *self)
{
  g_return_val_if_fail (BOX_IS_AGENT_CHANNEL (self), TRUE);
  return self->closed;
}

gsize
box_agent_channel_get_buffered (BoxAgentChannel *self)
{
  g_return_val_if_fail (BOX_IS_AGENT_CHANNEL (self), 0);
  return self->buffered;
}

gsize
box_agent_channel_get_receive_credit (BoxAgentChannel *self)
{
  g_return_val_if_fail (BOX_IS_AGENT_CHANNEL (self), 0);
  return self->recv_credit;
}

static gboolean
write_cancelled (GCancellable *cancellable, gpointer data)
{
  PendingWrite *pw = data;
  BoxAgentChannel *self = pw->self;

  g_queue_remove (&self->writes, pw);
  g_task_return_new_error (pw->task, G_IO_ERROR, G_IO_ERROR_CANCELLED, "Operation was cancelled");
  pending_write_free (pw);
  /* the next write (or the EOF) may go now */
  pump_writes (self);
  return G_SOURCE_REMOVE;
}

void
box_agent_channel_write_async (BoxAgentChannel *self, guint stream, GBytes *data,
                               GCancellable *cancellable, GAsyncReadyCallback callback,
                               gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  PendingWrite *pw;

  g_return_if_fail (BOX_IS_AGENT_CHANNEL (self));
  g_return_if_fail (stream < 256);
  g_return_if_fail (data != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_channel_write_async);
  if (self->lost) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE, BOX_AGENT_GONE_MESSAGE);
    return;
  }
  if (self->client == NULL || self->close_sent) {
    g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_CLOSED, "the channel is closed");
    return;
  }
  pw = g_new0 (PendingWrite, 1);
  pw->self = self;
  pw->task = g_steal_pointer (&task);
  pw->data = g_bytes_ref (data);
  pw->stream = (guint8) stream;
  pw->cancel_source = box_agent_watch_cancellable (self->context, cancellable, write_cancelled, pw);
  g_queue_push_tail (&self->writes, pw);
  pump_writes (self);
}

gboolean
box_agent_channel_write_finish (BoxAgentChannel *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

void
box_agent_channel_send_eof (BoxAgentChannel *self, guint stream)
{
  g_return_if_fail (BOX_IS_AGENT_CHANNEL (self));
  g_return_if_fail (stream < 8);
  if (self->client == NULL || self->close_sent)
    return;
  self->eof_pending |= 1u << stream;
  pump_writes (self);
}

void
box_agent_channel_send_ctrl (BoxAgentChannel *self, JsonObject *message)
{
  g_return_if_fail (BOX_IS_AGENT_CHANNEL (self));
  g_return_if_fail (message != NULL);
  if (self->client == NULL || self->close_sent)
    return;
  send_frame_take (self, box_agent_frame_build_ctrl (self->id, message), FALSE);
}

static gboolean
close_timed_out (gpointer data)
{
  BoxAgentChannel *self = data;

  if (self->client != NULL)
    box_agent_client_note (self->client, "channel %u: no CLOSE from the agent; forgotten", self->id);
  finish (self, g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CLOSED, "the channel is closed"));
  return G_SOURCE_REMOVE;
}

void
box_agent_channel_close (BoxAgentChannel *self)
{
  g_return_if_fail (BOX_IS_AGENT_CHANNEL (self));
  if (self->close_sent || self->closed)
    return;
  self->close_sent = TRUE;
  /* what arrived but was not delivered yet is of no use any more */
  clear_held (self);
  fail_writes (self, g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CLOSED, "the channel was closed"));
  if (self->client != NULL) {
    /* nothing is delivered any more; ::closed follows the agent's CLOSE,
     * or the host's timeout */
    self->held = FALSE;
    send_frame_take (self, box_agent_frame_build (BOX_AGENT_FRAME_CLOSE, 0, self->id, NULL, 0), FALSE);
    self->close_timer = g_timeout_source_new (CLOSE_TIMEOUT_MS);
    g_source_set_callback (self->close_timer, close_timed_out, self, NULL);
    g_source_attach (self->close_timer, self->context);
  } else {
    /* over already but still held: ::closed comes from the idle */
    box_agent_channel_release (self);
  }
}

void
box_agent_channel_consumed (BoxAgentChannel *self, gsize n)
{
  g_return_if_fail (BOX_IS_AGENT_CHANNEL (self));
  g_return_if_fail (n <= self->buffered);
  self->buffered -= n;
  refund (self, n);
  if (self->client == NULL || self->close_sent)
    return;
  self->uncredited += n;
  if (self->uncredited >= MIN (BOX_AGENT_DATA_CHUNK, self->window / 4)) {
    send_frame_take (self, box_agent_frame_build_credit (self->id, 0, (guint32) self->uncredited), TRUE);
    self->recv_credit += self->uncredited;
    self->uncredited = 0;
  }
}

/* ---- the object -------------------------------------------------------------- */

static void
box_agent_channel_dispose (GObject *object)
{
  BoxAgentChannel *self = BOX_AGENT_CHANNEL (object);

  if (self->release_source != NULL) {
    g_source_destroy (self->release_source);
    g_clear_pointer (&self->release_source, g_source_unref);
  }
  box_agent_destroy_source (&self->close_timer);
  clear_held (self);
  G_OBJECT_CLASS (box_agent_channel_parent_class)->dispose (object);
}

static void
box_agent_channel_finalize (GObject *object)
{
  BoxAgentChannel *self = BOX_AGENT_CHANNEL (object);

  /* pending writes hold the channel (their tasks): none are left here */
  g_queue_clear_full (&self->writes, (GDestroyNotify) pending_write_free);
  g_clear_pointer (&self->reply, json_object_unref);
  g_main_context_unref (self->context);
  G_OBJECT_CLASS (box_agent_channel_parent_class)->finalize (object);
}

static void
box_agent_channel_class_init (BoxAgentChannelClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = box_agent_channel_dispose;
  object_class->finalize = box_agent_channel_finalize;

  signals[SIGNAL_DATA] =
    g_signal_new ("data", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_BYTES);
  signals[SIGNAL_EOF] =
    g_signal_new ("eof", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_UINT);
  signals[SIGNAL_CTRL] =
    g_signal_new ("ctrl", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, JSON_TYPE_OBJECT);
  signals[SIGNAL_CLOSED] =
    g_signal_new ("closed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);
}

static void
box_agent_channel_init (BoxAgentChannel *self)
{
  self->held = TRUE;
  g_queue_init (&self->writes);
  g_queue_init (&self->held_frames);
}
