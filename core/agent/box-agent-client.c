/* box-agent-client.c: the host side of the guest agent protocol.
 *
 * The reader and the writer are asynchronous operations on the stream that
 * hold only a weak reference to the client, so dropping the client stops
 * them.  Frames are dispatched as they are decoded: channel-0 replies to the
 * pending calls, events to ::event, everything else to its channel. */
#include "config.h"

#include <string.h>

#include "box-agent-exec.h"
#include "box-agent-private.h"
#include "box-error.h"

#define READ_CHUNK 65536
#define READ_TURN (1024 * 1024)
/* What one main-loop turn handles of one connection before it yields to the
 * other sources (other sandboxes' connections, the API): TURN_BUDGET of cost,
 * where a frame costs its payload's size but at least FRAME_MIN_COST, and a
 * control message (JSON to parse) CTRL_COST_FACTOR times that; a turn goes
 * on while at least TURN_LEFT_MIN (a small control message) is left.  So a
 * turn moves up to 1 MiB of data, or about 1000 small frames, but parses at
 * most one full 64 KiB control message (or 64 small ones); the rest of what
 * was read waits for the next turn, and the socket is not read again until
 * it is handled (the guest's writes then wait on the host). */
#define TURN_BUDGET READ_TURN
#define FRAME_MIN_COST 1024
#define CTRL_COST_FACTOR 16
#define TURN_LEFT_MIN (FRAME_MIN_COST * CTRL_COST_FACTOR)
/* The budget bounds one turn, not how often a connection takes one: a
 * guest that keeps the host parsing costly control messages (`parse` in
 * tests/hostile) would take every other turn of the main loop, and a
 * neighbour's exec/run, which needs a dozen turns, paid one of its messages
 * in each (p50 ~500 ms measured in boxd).  So a turn that parsed at least
 * PACE_CTRL_MIN of control payload and took longer than PACE_MIN_US is
 * followed by a pause of PACE_FACTOR times its length before the
 * connection's next turn: such a connection gets at most a quarter of the
 * main loop.  Data and small control messages are never paced. */
#define PACE_CTRL_MIN (BOX_AGENT_CTRL_MAX / 2)
#define PACE_MIN_US 500
#define PACE_FACTOR 3
#define PACE_MAX_MS 1000
#define WRITE_COALESCE 65536
/* agent-opened channels at once: each may hold a window of data */
#define MAX_AGENT_CHANNELS 1024

enum { SIGNAL_EVENT, SIGNAL_CLOSED, SIGNAL_CHANNEL_OPENED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void box_agent_client_agent_init (BoxAgentInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxAgentClient, box_agent_client, G_TYPE_OBJECT,
                               G_IMPLEMENT_INTERFACE (BOX_TYPE_AGENT, box_agent_client_agent_init))

typedef struct {
  GWeakRef client;
  guint8 buf[READ_CHUNK];
} ReadOp;

typedef struct {
  GWeakRef client;
  GBytes *bytes;
  gsize normal_bytes;           /* of them, from the normal queue */
} WriteOp;

typedef struct {
  guint64 mark;
  BoxAgentChannel *channel;     /* a reference */
} FlushWaiter;

static void
flush_waiter_free (FlushWaiter *waiter)
{
  g_object_unref (waiter->channel);
  g_free (waiter);
}

static void flush_output (BoxAgentClient *self);

/* ---- helpers ------------------------------------------------------------- */

GMainContext *
box_agent_client_get_context (BoxAgentClient *client)
{
  return client->context;
}

GSource *
box_agent_watch_cancellable (GMainContext *context, GCancellable *cancellable,
                             GCancellableSourceFunc func, gpointer data)
{
  GSource *source;

  if (cancellable == NULL)
    return NULL;
  source = g_cancellable_source_new (cancellable);
  g_source_set_callback (source, G_SOURCE_FUNC (func), data, NULL);
  g_source_attach (source, context);
  return source;
}

void
box_agent_destroy_source (GSource **source)
{
  if (*source == NULL)
    return;
  g_source_destroy (*source);
  g_clear_pointer (source, g_source_unref);
}

#define NOTE_WINDOW_US (10 * G_USEC_PER_SEC)
#define NOTE_MAX 20

void
box_agent_client_note (BoxAgentClient *self, const char *format, ...)
{
  gint64 now = g_get_monotonic_time ();
  g_autofree char *text = NULL;
  va_list args;

  if (now - self->note_window >= NOTE_WINDOW_US) {
    if (self->note_suppressed > 0)
      g_debug ("agent: %u more lines about this agent were left out", self->note_suppressed);
    self->note_window = now;
    self->note_count = 0;
    self->note_suppressed = 0;
  }
  if (self->note_count >= NOTE_MAX) {
    self->note_suppressed++;
    return;
  }
  self->note_count++;
  va_start (args, format);
  text = g_strdup_vprintf (format, args);
  va_end (args);
  g_debug ("agent: %s", text);
}

void
box_agent_client_charge (BoxAgentClient *self, gssize delta)
{
  if (delta < 0)
    self->charged -= MIN (self->charged, (gsize) -delta);
  else
    self->charged += (gsize) delta;
}

GError *
box_agent_gone_error (void)
{
  return g_error_new_literal (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE, BOX_AGENT_GONE_MESSAGE);
}

void
box_agent_call_free (Call *call)
{
  if (call->large && call->self->n_large_calls > 0)
    call->self->n_large_calls--;
  box_agent_destroy_source (&call->timeout_source);
  box_agent_destroy_source (&call->cancel_source);
  g_clear_object (&call->task);
  g_clear_object (&call->channel);
  g_free (call);
}

/* ---- output -------------------------------------------------------------- */

guint64
box_agent_client_send_frame (BoxAgentClient *client, GBytes *frame, gboolean urgent)
{
  guint64 mark;

  if (client->closed)
    return client->normal_queued;
  client->queued_bytes += g_bytes_get_size (frame);
  if (!urgent)
    client->normal_queued += g_bytes_get_size (frame);
  mark = client->normal_queued;
  g_queue_push_tail (urgent ? &client->urgent : &client->normal, g_bytes_ref (frame));
  flush_output (client);
  return mark;
}

void
box_agent_client_send_frame_take (BoxAgentClient *self, GBytes *frame, gboolean urgent)
{
  box_agent_client_send_frame (self, frame, urgent);
  g_bytes_unref (frame);
}

void
box_agent_client_wait_flushed (BoxAgentClient *client, BoxAgentChannel *channel, guint64 mark)
{
  FlushWaiter *waiter;

  if (client->closed || client->normal_written >= mark)
    return;
  waiter = g_new0 (FlushWaiter, 1);
  waiter->mark = mark;
  waiter->channel = g_object_ref (channel);
  g_queue_push_tail (&client->flush_waiters, waiter);
}

/* Tell the channels whose writes reached the stream (marks only grow, so
 * the queue is in order). */
static void
notify_flushed (BoxAgentClient *self)
{
  FlushWaiter *waiter;

  while (!self->closed && (waiter = g_queue_peek_head (&self->flush_waiters)) != NULL &&
         waiter->mark <= self->normal_written) {
    g_queue_pop_head (&self->flush_waiters);
    box_agent_channel_flushed (waiter->channel);
    flush_waiter_free (waiter);
  }
}

static GBytes *
pop_frame (BoxAgentClient *self, gsize *normal_bytes)
{
  GBytes *frame = g_queue_pop_head (&self->urgent);

  if (frame != NULL)
    return frame;
  frame = g_queue_pop_head (&self->normal);
  if (frame != NULL)
    *normal_bytes += g_bytes_get_size (frame);
  return frame;
}

static void
write_done (GObject *source, GAsyncResult *result, gpointer data)
{
  WriteOp *op = data;
  g_autoptr(BoxAgentClient) self = g_weak_ref_get (&op->client);
  g_autoptr(GError) error = NULL;
  gsize size = g_bytes_get_size (op->bytes);

  if (!g_output_stream_write_all_finish (G_OUTPUT_STREAM (source), result, NULL, &error) &&
      self != NULL && !self->closed) {
    g_autofree char *why = g_strdup_printf ("writing: %s", error->message);

    box_agent_client_lost (self, why);
  }
  if (self != NULL) {
    self->writing = FALSE;
    self->queued_bytes -= MIN (self->queued_bytes, size);
    if (!self->closed) {
      self->normal_written += op->normal_bytes;
      notify_flushed (self);
    }
    if (self->closed && !self->reading && !self->stream_closed) {
      self->stream_closed = TRUE;
      g_io_stream_close_async (self->stream, G_PRIORITY_DEFAULT, NULL, NULL, NULL);
    }
    flush_output (self);
  }
  g_weak_ref_clear (&op->client);
  g_bytes_unref (op->bytes);
  g_free (op);
}

static void
flush_output (BoxAgentClient *self)
{
  WriteOp *op;
  GBytes *first;

  if (self->writing || self->closed)
    return;
  if (g_queue_is_empty (&self->urgent) && g_queue_is_empty (&self->normal))
    return;
  op = g_new0 (WriteOp, 1);
  first = pop_frame (self, &op->normal_bytes);
  g_weak_ref_init (&op->client, self);
  if (g_bytes_get_size (first) >= WRITE_COALESCE ||
      (g_queue_is_empty (&self->urgent) && g_queue_is_empty (&self->normal))) {
    op->bytes = first;
  } else {
    /* many small frames (credits, small writes) go out in one write */
    GByteArray *buf = g_byte_array_sized_new (WRITE_COALESCE);
    GBytes *frame = first;

    while (frame != NULL) {
      gsize len = 0;
      const guint8 *p = g_bytes_get_data (frame, &len);

      g_byte_array_append (buf, p, (guint) len);
      g_bytes_unref (frame);
      frame = buf->len < WRITE_COALESCE ? pop_frame (self, &op->normal_bytes) : NULL;
    }
    op->bytes = g_byte_array_free_to_bytes (buf);
  }
  self->writing = TRUE;
  g_main_context_push_thread_default (self->context);
  g_output_stream_write_all_async (g_io_stream_get_output_stream (self->stream),
                                   g_bytes_get_data (op->bytes, NULL), g_bytes_get_size (op->bytes),
                                   G_PRIORITY_DEFAULT, self->io_cancellable, write_done, op);
  g_main_context_pop_thread_default (self->context);
}


/* ---- closing ------------------------------------------------------------- */

void
box_agent_client_lost (BoxAgentClient *self, const char *why)
{
  g_autoptr(BoxAgentClient) keep G_GNUC_UNUSED = g_object_ref (self);
  g_autoptr(GError) closed_error = NULL;
  g_autoptr(GList) calls = NULL;
  g_autoptr(GList) channels = NULL;

  if (self->closed)
    return;
  self->closed = TRUE;
  g_debug ("agent connection closed: %s", why);
  g_cancellable_cancel (self->io_cancellable);
  g_queue_clear_full (&self->urgent, (GDestroyNotify) g_bytes_unref);
  g_queue_clear_full (&self->normal, (GDestroyNotify) g_bytes_unref);
  g_queue_clear_full (&self->held_requests, (GDestroyNotify) g_bytes_unref);
  g_queue_clear_full (&self->flush_waiters, (GDestroyNotify) flush_waiter_free);
  self->queued_bytes = 0;
  box_agent_client_stop_hello (self);
  box_agent_destroy_source (&self->dispatch_source);
  if (!self->reading && !self->writing && !self->stream_closed) {
    self->stream_closed = TRUE;
    g_io_stream_close_async (self->stream, G_PRIORITY_DEFAULT, NULL, NULL, NULL);
  }

  if (self->connect_task != NULL) {
    GTask *task = g_steal_pointer (&self->connect_task);

    box_agent_destroy_source (&self->connect_cancel);
    g_task_return_error (task, box_agent_gone_error ());
    g_object_unref (task);
  }
  self->charged = 0;
  /* steal both tables first: completions may call back into the client */
  calls = g_hash_table_get_values (self->calls);
  g_hash_table_steal_all (self->calls);
  channels = g_hash_table_get_values (self->channels);
  g_hash_table_steal_all (self->channels);
  self->n_agent_channels = 0;
  for (GList *l = calls; l != NULL; l = l->next) {
    Call *call = l->data;

    if (call->channel != NULL)
      box_agent_channel_lost (call->channel);
    if (call->task != NULL)
      g_task_return_error (call->task, box_agent_gone_error ());
    box_agent_call_free (call);
  }
  for (GList *l = channels; l != NULL; l = l->next) {
    box_agent_channel_lost (l->data);
    g_object_unref (l->data);
  }
  closed_error = g_error_new (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE, "%s (%s)",
                              BOX_AGENT_GONE_MESSAGE, why);
  g_signal_emit (self, signals[SIGNAL_CLOSED], 0, closed_error);
}

void
box_agent_client_close (BoxAgentClient *self)
{
  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  box_agent_client_lost (self, "closed by the host");
}

/* ---- input --------------------------------------------------------------- */



static void
agent_channel_opened (BoxAgentClient *self, guint32 id, JsonObject *event)
{
  g_autoptr(BoxAgentChannel) channel = NULL;

  if (id < BOX_AGENT_FIRST_AGENT_CHANNEL || g_hash_table_contains (self->channels, GUINT_TO_POINTER (id)))
    return;
  if (self->n_agent_channels >= MAX_AGENT_CHANNELS) {
    box_agent_client_note (self, "the agent opened too many channels; refusing %u", id);
    box_agent_client_send_frame_take (self, box_agent_frame_build (BOX_AGENT_FRAME_CLOSE, 0, id, NULL, 0), FALSE);
    return;
  }
  channel = box_agent_channel_new (self, id, self->window);
  box_agent_channel_set_reply (channel, event);
  g_hash_table_insert (self->channels, GUINT_TO_POINTER (id), g_object_ref (channel));
  self->n_agent_channels++;
  if (!g_signal_has_handler_pending (self, signals[SIGNAL_CHANNEL_OPENED], 0, TRUE)) {
    box_agent_channel_close (channel);
    return;
  }
  g_signal_emit (self, signals[SIGNAL_CHANNEL_OPENED], 0, channel, event);
  box_agent_channel_release (channel);
}

static void
handle_ctrl0 (BoxAgentClient *self, JsonObject *msg, gsize len)
{
  const char *event = box_agent_json_get_string (msg, "event");
  gint64 id = 0, chan = 0;

  if (event != NULL) {
    if (g_str_equal (event, "accept") && box_agent_json_get_int (msg, "chan", &chan) &&
        chan >= BOX_AGENT_FIRST_AGENT_CHANNEL && chan <= G_MAXUINT32)
      agent_channel_opened (self, (guint32) chan, msg);
    else
      g_signal_emit (self, signals[SIGNAL_EVENT], 0, msg);
    return;
  }
  if (box_agent_json_get_int (msg, "id", &id)) {
    Call *call = g_hash_table_lookup (self->calls, &id);

    if (call == NULL) {
      if (!box_agent_json_get_bool (msg, "ok", TRUE)) {
        g_autoptr(GError) error = box_agent_error_from_reply (msg);

        box_agent_client_note (self, "the agent refused request %" G_GINT64_FORMAT ": %s",
                               id, error->message);
      }
      return;
    }
    g_hash_table_steal (self->calls, &id);
    if (len > BOX_AGENT_CTRL_MAX && !call->large) {
      g_autoptr(JsonObject) refusal = json_object_new ();
      g_autoptr(JsonObject) err = json_object_new ();

      /* as if the agent had said so: the call fails, the text is ours */
      json_object_set_string_member (err, "code", "too_large");
      json_object_set_string_member (err, "message", "the agent's reply is too long");
      json_object_set_boolean_member (refusal, "ok", FALSE);
      json_object_set_object_member (refusal, "error", g_steal_pointer (&err));
      box_agent_client_complete_call (self, call, refusal);
      return;
    }
    box_agent_client_complete_call (self, call, msg);
    return;
  }
  box_agent_client_note (self, "a control message with neither id nor event ignored");
}

static JsonObject *
parse_ctrl (BoxAgentClient *self, GBytes *payload)
{
  g_autoptr(GError) error = NULL;
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (payload, &len);
  JsonObject *msg = box_agent_parse_ctrl (p, len, &error);

  if (msg == NULL && self->synced)
    box_agent_client_note (self, "%s", error->message);
  return msg;
}

static void
handle_frame (BoxAgentClient *self, const BoxAgentFrameHeader *header, GBytes *payload)
{
  g_autoptr(JsonObject) msg = NULL;
  BoxAgentChannel *channel;

  /* control messages are small; only the replies to listings (sessions,
   * ports) may fill a frame, and only while one is awaited */
  if (header->type == BOX_AGENT_FRAME_CTRL && header->length > BOX_AGENT_CTRL_MAX &&
      (header->channel != 0 || self->n_large_calls == 0 || !self->synced)) {
    box_agent_client_note (self, "a control message of %u bytes on channel %u dropped",
                           header->length, header->channel);
    return;
  }
  if (!self->synced) {
    /* discard everything until the reply to our hello */
    if (header->channel != 0 || header->type != BOX_AGENT_FRAME_CTRL ||
        (msg = parse_ctrl (self, payload)) == NULL)
      return;
    /* the agent just saw the host side (re)connect: it may have missed a
     * hello written before it was listening */
    if (g_strcmp0 (box_agent_json_get_string (msg, "event"), "ready") == 0 && self->hello_timer != NULL)
      box_agent_client_send_hello (self, FALSE);
    else
      box_agent_client_hello_reply (self, msg);
    return;
  }
  if (header->channel == 0) {
    if (header->type == BOX_AGENT_FRAME_CTRL && (msg = parse_ctrl (self, payload)) != NULL)
      handle_ctrl0 (self, msg, header->length);
    return;
  }
  channel = g_hash_table_lookup (self->channels, GUINT_TO_POINTER (header->channel));
  if (channel != NULL) {
    box_agent_channel_handle_frame (channel, header, payload);
    return;
  }
  if (header->channel >= BOX_AGENT_FIRST_AGENT_CHANNEL && header->type == BOX_AGENT_FRAME_CTRL &&
      (msg = parse_ctrl (self, payload)) != NULL &&
      g_strcmp0 (box_agent_json_get_string (msg, "event"), "accept") == 0) {
    agent_channel_opened (self, header->channel, msg);
    return;
  }
  box_agent_client_note (self, "a frame of type %u for unknown channel %u ignored",
                         header->type, header->channel);
}

static gsize
frame_cost (const BoxAgentFrameHeader *header)
{
  gsize cost = MAX ((gsize) header->length, FRAME_MIN_COST);

  return header->type == BOX_AGENT_FRAME_CTRL ? cost * CTRL_COST_FACTOR : cost;
}

/* Handles decoded frames up to this turn's budget; TRUE when the budget ran
 * out (frames may be left in the decoder). */
static gboolean
process_input (BoxAgentClient *self, gsize *ctrl_bytes)
{
  guint64 skipped = box_agent_decoder_get_skipped (self->decoder);
  BoxAgentFrameHeader header;
  GBytes *payload = NULL;
  gsize spent = 0;

  while (!self->closed && spent + TURN_LEFT_MIN <= TURN_BUDGET &&
         box_agent_decoder_next (self->decoder, &header, &payload)) {
    handle_frame (self, &header, payload);
    g_clear_pointer (&payload, g_bytes_unref);
    spent += frame_cost (&header);
    if (header.type == BOX_AGENT_FRAME_CTRL)
      *ctrl_bytes += header.length;
    if (!self->closed && self->charged > self->budget) {
      g_autofree char *why = g_strdup_printf ("the agent is over its budget of %" G_GSIZE_FORMAT
                                              " bytes held by the host", self->budget);

      box_agent_client_lost (self, why);
    }
  }
  self->turn_max_cost = MAX (self->turn_max_cost, spent);
  skipped = box_agent_decoder_get_skipped (self->decoder) - skipped;
  if (skipped > 0 && self->synced)
    box_agent_client_note (self, "stream out of sync: skipped %" G_GUINT64_FORMAT " bytes", skipped);
  else if (skipped > 0)
    g_debug ("agent stream: skipped %" G_GUINT64_FORMAT " bytes before the hello reply", skipped);
  return !self->closed && spent + TURN_LEFT_MIN > TURN_BUDGET;
}

static void dispatch_input (BoxAgentClient *self);

static gboolean
dispatch_next_turn (gpointer data)
{
  g_autoptr(BoxAgentClient) self = g_object_ref (data);

  /* the main loop holds the source while it runs */
  g_clear_pointer (&self->dispatch_source, g_source_unref);
  dispatch_input (self);
  return G_SOURCE_REMOVE;
}

/* Handles what was read, one budget per main-loop turn (paced when it was
 * costly), then reads again. */
static void
dispatch_input (BoxAgentClient *self)
{
  gint64 start = g_get_monotonic_time ();
  gsize ctrl_bytes = 0;
  gboolean more = process_input (self, &ctrl_bytes);
  gint64 took = g_get_monotonic_time () - start;
  guint pause_ms = 0;

  if (!self->closed && ctrl_bytes >= PACE_CTRL_MIN && took > PACE_MIN_US)
    pause_ms = (guint) MIN ((took * PACE_FACTOR + 999) / 1000, PACE_MAX_MS);
  if (pause_ms > 0) {
    self->paced_turns++;
    /* the next turn (or the next read) after the pause */
    self->dispatch_source = g_timeout_source_new (pause_ms);
    g_source_set_priority (self->dispatch_source, G_PRIORITY_DEFAULT);
    g_source_set_callback (self->dispatch_source, dispatch_next_turn, self, NULL);
    g_source_attach (self->dispatch_source, self->context);
    return;
  }
  if (more) {
    self->dispatch_source = g_idle_source_new ();
    g_source_set_priority (self->dispatch_source, G_PRIORITY_DEFAULT);
    g_source_set_callback (self->dispatch_source, dispatch_next_turn, self, NULL);
    g_source_attach (self->dispatch_source, self->context);
    return;
  }
  if (!self->closed)
    box_agent_client_start_read (self);
}

static void
read_done (GObject *source, GAsyncResult *result, gpointer data)
{
  ReadOp *op = data;
  g_autoptr(BoxAgentClient) self = g_weak_ref_get (&op->client);
  g_autoptr(GError) error = NULL;
  gssize n = g_input_stream_read_finish (G_INPUT_STREAM (source), result, &error);

  if (self != NULL) {
    self->reading = FALSE;
    if (self->closed) {
      if (!self->writing && !self->stream_closed) {
        self->stream_closed = TRUE;
        g_io_stream_close_async (self->stream, G_PRIORITY_DEFAULT, NULL, NULL, NULL);
      }
    } else if (n < 0) {
      g_autofree char *why = g_strdup_printf ("reading: %s", error->message);

      box_agent_client_lost (self, why);
    } else if (n == 0) {
      box_agent_client_lost (self, "end of stream");
    } else {
      GInputStream *in = g_io_stream_get_input_stream (self->stream);
      gsize total = (gsize) n;

      /* drain what the socket holds (up to READ_TURN) before handling it:
       * QEMU's chardev buffer is small, and a turn per 64 KiB left the
       * guest's port waiting on the host */
      box_agent_decoder_feed (self->decoder, op->buf, (gsize) n);
      while (total < READ_TURN && G_IS_POLLABLE_INPUT_STREAM (in) &&
             g_pollable_input_stream_can_poll (G_POLLABLE_INPUT_STREAM (in))) {
        gssize more = g_pollable_input_stream_read_nonblocking (G_POLLABLE_INPUT_STREAM (in), op->buf,
                                                                sizeof op->buf, NULL, NULL);
        if (more <= 0)
          break;
        box_agent_decoder_feed (self->decoder, op->buf, (gsize) more);
        total += (gsize) more;
      }
      dispatch_input (self);
    }
  }
  g_weak_ref_clear (&op->client);
  g_free (op);
}

void
box_agent_client_start_read (BoxAgentClient *self)
{
  ReadOp *op = g_new (ReadOp, 1);

  g_weak_ref_init (&op->client, self);
  self->reading = TRUE;
  g_main_context_push_thread_default (self->context);
  g_input_stream_read_async (g_io_stream_get_input_stream (self->stream), op->buf, sizeof op->buf,
                             G_PRIORITY_DEFAULT, self->io_cancellable, read_done, op);
  g_main_context_pop_thread_default (self->context);
}

void
box_agent_client_forget_channel (BoxAgentClient *client, BoxAgentChannel *channel)
{
  gpointer key = GUINT_TO_POINTER (box_agent_channel_get_id (channel));

  box_agent_channel_drop_charges (channel);
  if (g_hash_table_lookup (client->channels, key) != channel)
    return;
  g_hash_table_remove (client->channels, key);
  if (GPOINTER_TO_UINT (key) >= BOX_AGENT_FIRST_AGENT_CHANNEL)
    client->n_agent_channels--;
}

/* ---- accessors and the object --------------------------------------------- */

JsonObject *
box_agent_client_get_info (BoxAgentClient *self)
{
  g_return_val_if_fail (BOX_IS_AGENT_CLIENT (self), NULL);
  return self->info;
}

gboolean
box_agent_client_is_closed (BoxAgentClient *self)
{
  g_return_val_if_fail (BOX_IS_AGENT_CLIENT (self), TRUE);
  return self->closed;
}

gsize
box_agent_client_get_queued_bytes (BoxAgentClient *self)
{
  g_return_val_if_fail (BOX_IS_AGENT_CLIENT (self), 0);
  return self->queued_bytes;
}

BoxAgentClient *
box_agent_client_new (GIOStream *stream)
{
  BoxAgentClient *self;

  g_return_val_if_fail (G_IS_IO_STREAM (stream), NULL);
  self = g_object_new (BOX_TYPE_AGENT_CLIENT, NULL);
  self->stream = g_object_ref (stream);
  return self;
}

static void
box_agent_client_dispose (GObject *object)
{
  BoxAgentClient *self = BOX_AGENT_CLIENT (object);
  g_autoptr(GList) channels = NULL;

  /* no calls can be pending here (their tasks hold the client); channels can */
  self->closed = TRUE;
  g_cancellable_cancel (self->io_cancellable);
  box_agent_client_stop_hello (self);
  box_agent_destroy_source (&self->dispatch_source);
  channels = g_hash_table_get_values (self->channels);
  g_hash_table_steal_all (self->channels);
  self->n_agent_channels = 0;
  for (GList *l = channels; l != NULL; l = l->next) {
    box_agent_channel_lost (l->data);
    g_object_unref (l->data);
  }
  g_hash_table_remove_all (self->calls);
  G_OBJECT_CLASS (box_agent_client_parent_class)->dispose (object);
}

static void
box_agent_client_finalize (GObject *object)
{
  BoxAgentClient *self = BOX_AGENT_CLIENT (object);

  g_queue_clear_full (&self->urgent, (GDestroyNotify) g_bytes_unref);
  g_queue_clear_full (&self->normal, (GDestroyNotify) g_bytes_unref);
  g_queue_clear_full (&self->held_requests, (GDestroyNotify) g_bytes_unref);
  g_queue_clear_full (&self->flush_waiters, (GDestroyNotify) flush_waiter_free);
  g_hash_table_unref (self->calls);
  g_hash_table_unref (self->channels);
  g_clear_pointer (&self->info, json_object_unref);
  g_free (self->nonce);
  box_agent_decoder_free (self->decoder);
  g_clear_object (&self->io_cancellable);
  g_clear_object (&self->stream);
  g_main_context_unref (self->context);
  G_OBJECT_CLASS (box_agent_client_parent_class)->finalize (object);
}

/* BoxAgent, what hypervisor plugins see (box-agent.h) */
static void
agent_connect_async (BoxAgent *agent, GCancellable *cancellable, GAsyncReadyCallback callback,
                     gpointer user_data)
{
  box_agent_client_connect_async (BOX_AGENT_CLIENT (agent), cancellable, callback, user_data);
}

static gboolean
agent_connect_finish (BoxAgent *agent, GAsyncResult *result, GError **error)
{
  return box_agent_client_connect_finish (BOX_AGENT_CLIENT (agent), result, error);
}

static void
agent_call_async (BoxAgent *agent, const char *op, JsonObject *args, GCancellable *cancellable,
                  GAsyncReadyCallback callback, gpointer user_data)
{
  box_agent_client_call_async (BOX_AGENT_CLIENT (agent), op, args, cancellable, callback, user_data);
}

static JsonObject *
agent_call_finish (BoxAgent *agent, GAsyncResult *result, GError **error)
{
  return box_agent_client_call_finish (BOX_AGENT_CLIENT (agent), result, error);
}

static void
agent_exec_run_async (BoxAgent *agent, const BoxExecRequest *request, GCancellable *cancellable,
                      GAsyncReadyCallback callback, gpointer user_data)
{
  box_agent_client_exec_run_async (BOX_AGENT_CLIENT (agent), request, cancellable, callback,
                                   user_data);
}

static BoxExecResult *
agent_exec_run_finish (BoxAgent *agent, GAsyncResult *result, GError **error)
{
  return box_agent_client_exec_run_finish (BOX_AGENT_CLIENT (agent), result, error);
}

static gboolean
agent_is_closed (BoxAgent *agent)
{
  return box_agent_client_is_closed (BOX_AGENT_CLIENT (agent));
}

static void
agent_close (BoxAgent *agent)
{
  box_agent_client_close (BOX_AGENT_CLIENT (agent));
}

static void
box_agent_client_agent_init (BoxAgentInterface *iface)
{
  iface->connect_async = agent_connect_async;
  iface->connect_finish = agent_connect_finish;
  iface->call_async = agent_call_async;
  iface->call_finish = agent_call_finish;
  iface->exec_run_async = agent_exec_run_async;
  iface->exec_run_finish = agent_exec_run_finish;
  iface->is_closed = agent_is_closed;
  iface->close = agent_close;
}

static void
box_agent_client_class_init (BoxAgentClientClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = box_agent_client_dispose;
  object_class->finalize = box_agent_client_finalize;

  signals[SIGNAL_EVENT] =
    g_signal_new ("event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, JSON_TYPE_OBJECT);
  signals[SIGNAL_CLOSED] =
    g_signal_new ("closed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_ERROR);
  signals[SIGNAL_CHANNEL_OPENED] =
    g_signal_new ("channel-opened", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, BOX_TYPE_AGENT_CHANNEL, JSON_TYPE_OBJECT);
}

static void
box_agent_client_init (BoxAgentClient *self)
{
  self->context = g_main_context_ref_thread_default ();
  self->io_cancellable = g_cancellable_new ();
  self->decoder = box_agent_decoder_new ();
  self->window = BOX_AGENT_DEFAULT_WINDOW;
  self->budget = BOX_AGENT_CONNECTION_BUDGET;
  self->call_timeout_ms = BOX_AGENT_CALL_TIMEOUT_MS;
  self->next_id = 1;
  self->next_chan = 1;
  self->calls = g_hash_table_new_full (g_int64_hash, g_int64_equal, NULL, (GDestroyNotify) box_agent_call_free);
  self->channels = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_object_unref);
}
