/* box-edge-io.c: the edge's byte plumbing; see box-edge-io.h. */
#include "config.h"

#include "box-edge-io.h"

#include <string.h>

/* ---- writing ----------------------------------------------------------- */

typedef struct {
  GBytes          *bytes;
  BoxEdgeDoneFunc  func;
  gpointer         user_data;
} Write;

static void
written (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Write *w = user_data;
  gboolean ok = g_output_stream_write_all_finish (G_OUTPUT_STREAM (source), result, NULL, NULL);

  w->func (ok, w->user_data);
  g_bytes_unref (w->bytes);
  g_free (w);
}

void
box_edge_write (GOutputStream *out, GString *text, GCancellable *cancel, BoxEdgeDoneFunc func,
                gpointer user_data)
{
  Write *w = g_new0 (Write, 1);
  gsize len = text->len;

  w->bytes = g_bytes_new_take (g_string_free (text, FALSE), len);
  w->func = func;
  w->user_data = user_data;
  g_output_stream_write_all_async (out, g_bytes_get_data (w->bytes, NULL), len, G_PRIORITY_DEFAULT,
                                   cancel, written, w);
}

/* ---- copying a body ---------------------------------------------------- */

typedef struct {
  GInputStream    *in;
  GOutputStream   *out;
  GCancellable    *cancel;
  GCancellable    *read_cancel;  /* the reads' with a read timeout (a child of cancel), or NULL */
  gulong           cancel_id;
  guint            read_timeout_s;
  guint            timer;        /* the read under way's timeout */
  gboolean        *timed_out;
  gint64           left;         /* -1: until the end */
  guint64         *counted;      /* NULL, or bytes written are added here */
  BoxEdgeChunks   *chunks;       /* NULL, or the body is chunked: its end found here */
  gsize            moving;       /* the bytes of the write under way */
  BoxEdgeDoneFunc  func;
  gpointer         user_data;
  gsize            size;
  guint8          *buffer;       /* not zeroed: pages untouched until read into */
} Pump;

static void pump_read (Pump *p);

static void
pump_end (Pump *p, gboolean ok)
{
  if (p->read_cancel != NULL) {
    g_cancellable_disconnect (p->cancel, p->cancel_id);
    g_object_unref (p->read_cancel);
  }
  p->func (ok, p->user_data);
  g_object_unref (p->in);
  g_object_unref (p->out);
  g_clear_object (&p->cancel);
  g_free (p->buffer);
  g_free (p);
}

static void
pump_written (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Pump *p = user_data;

  if (!g_output_stream_write_all_finish (p->out, result, NULL, NULL)) {
    pump_end (p, FALSE);
    return;
  }
  if (p->counted != NULL)
    *p->counted += p->moving;
  pump_read (p);
}

static void
pump_move (Pump *p, gssize n)
{
  if (n < 0 || g_cancellable_is_cancelled (p->cancel)) {
    pump_end (p, FALSE);
    return;
  }
  if (n == 0) {
    /* (a chunked body ends at its last chunk, not with the stream) */
    pump_end (p, p->left < 0 && p->chunks == NULL);
    return;
  }
  if (p->left > 0)
    p->left -= n;
  if (p->chunks != NULL) {
    gssize body = box_edge_chunks_scan (p->chunks, p->buffer, (gsize) n);
    if (body < 0) {
      pump_end (p, FALSE);
      return;
    }
    if (body < n)
      p->chunks->extra = TRUE;
    if (p->chunks->done)
      p->left = 0;          /* this write is the last */
    if (body == 0) {
      pump_end (p, TRUE);
      return;
    }
    n = body;
  }
  p->moving = (gsize) n;
  g_output_stream_write_all_async (p->out, p->buffer, (gsize) n, G_PRIORITY_DEFAULT, p->cancel,
                                   pump_written, p);
}

static void
pump_got (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Pump *p = user_data;

  if (p->timer != 0)
    g_source_remove (p->timer);
  p->timer = 0;
  pump_move (p, g_input_stream_read_finish (G_INPUT_STREAM (source), result, NULL));
}

static gboolean
pump_read_timeout (gpointer user_data)
{
  Pump *p = user_data;

  p->timer = 0;
  *p->timed_out = TRUE;
  g_cancellable_cancel (p->read_cancel);   /* the read ends with an error */
  return G_SOURCE_REMOVE;
}

static void
cancel_child (GCancellable *parent, gpointer child)
{
  g_cancellable_cancel (child);
}

static void
pump_read (Pump *p)
{
  GInputStream *in = p->in;
  gsize want = p->size;

  if (p->left == 0) {
    pump_end (p, TRUE);
    return;
  }
  if (p->left > 0 && (guint64) p->left < want)
    want = (gsize) p->left;
  if (G_IS_BUFFERED_INPUT_STREAM (in)) {
    gsize avail = 0;
    const char *data = g_buffered_input_stream_peek_buffer (G_BUFFERED_INPUT_STREAM (in), &avail);

    if (avail > 0) {
      gsize n = MIN (avail, want);
      memcpy (p->buffer, data, n);
      g_input_stream_skip (in, n, NULL, NULL);
      pump_move (p, (gssize) n);
      return;
    }
    in = g_filter_input_stream_get_base_stream (G_FILTER_INPUT_STREAM (in));
  }
  if (p->read_timeout_s > 0)
    p->timer = g_timeout_add_seconds (p->read_timeout_s, pump_read_timeout, p);
  g_input_stream_read_async (in, p->buffer, want, G_PRIORITY_DEFAULT,
                             p->read_cancel != NULL ? p->read_cancel : p->cancel, pump_got, p);
}

void
box_edge_pump (GInputStream *in, GOutputStream *out, gint64 length, GCancellable *cancel,
               BoxEdgeDoneFunc func, gpointer user_data)
{
  box_edge_pump_counted (in, out, length, NULL, cancel, func, user_data);
}

/* A pump, not started yet (pump_read() starts it). */
static Pump *
pump_new (GInputStream *in, GOutputStream *out, gint64 length, guint64 *counted, gsize size,
          guint read_timeout_s, gboolean *timed_out, GCancellable *cancel, BoxEdgeDoneFunc func,
          gpointer user_data)
{
  Pump *p = g_new0 (Pump, 1);

  if (read_timeout_s > 0) {
    p->read_timeout_s = read_timeout_s;
    p->timed_out = timed_out;
    p->read_cancel = g_cancellable_new ();
    if (cancel != NULL)
      p->cancel_id = g_cancellable_connect (cancel, G_CALLBACK (cancel_child), p->read_cancel,
                                            NULL);
  }
  p->size = size;
  p->buffer = g_malloc (size);
  p->counted = counted;
  p->in = g_object_ref (in);
  p->out = g_object_ref (out);
  p->cancel = cancel != NULL ? g_object_ref (cancel) : NULL;
  p->left = length;
  p->func = func;
  p->user_data = user_data;
  return p;
}

static void
pump_start (GInputStream *in, GOutputStream *out, gint64 length, guint64 *counted, gsize size,
            GCancellable *cancel, BoxEdgeDoneFunc func, gpointer user_data)
{
  pump_read (pump_new (in, out, length, counted, size, 0, NULL, cancel, func, user_data));
}

void
box_edge_pump_timed (GInputStream *in, GOutputStream *out, gint64 length, guint read_timeout_s,
                     gboolean *timed_out, GCancellable *cancel, BoxEdgeDoneFunc func,
                     gpointer user_data)
{
  *timed_out = FALSE;
  pump_read (pump_new (in, out, length, NULL, BOX_EDGE_PUMP_BUFFER, read_timeout_s, timed_out,
                       cancel, func, user_data));
}

void
box_edge_pump_counted (GInputStream *in, GOutputStream *out, gint64 length, guint64 *counted,
                       GCancellable *cancel, BoxEdgeDoneFunc func, gpointer user_data)
{
  pump_start (in, out, length, counted, BOX_EDGE_PUMP_BUFFER, cancel, func, user_data);
}

void
box_edge_pump_chunked (GInputStream *in, GOutputStream *out, BoxEdgeChunks *chunks,
                       guint64 *counted, GCancellable *cancel, BoxEdgeDoneFunc func,
                       gpointer user_data)
{
  /* (-1: pump_read() reads whole buffers; the scan sets left to 0 at the end) */
  Pump *p = pump_new (in, out, -1, counted, BOX_EDGE_PUMP_BUFFER, 0, NULL, cancel, func, user_data);

  p->chunks = chunks;
  pump_read (p);
}

void
box_edge_relay (GInputStream *in, GOutputStream *out, GCancellable *cancel, BoxEdgeDoneFunc func,
                gpointer user_data)
{
  pump_start (in, out, -1, NULL, BOX_EDGE_RELAY_BUFFER, cancel, func, user_data);
}

/* ---- where a chunked body ends ----------------------------------------- */

enum { CH_SIZE, CH_EXT, CH_DATA, CH_DATA_END, CH_TRAILER_START, CH_TRAILER, CH_TRAILER_CR };

gssize
box_edge_chunks_scan (BoxEdgeChunks *ch, const guint8 *data, gsize len)
{
  gsize i = 0;

  while (i < len && !ch->done) {
    guint8 b = data[i];

    switch (ch->state) {
    case CH_SIZE:
      if (g_ascii_isxdigit (b)) {
        if (ch->left > (G_MAXUINT64 >> 4))
          return -1;
        ch->left = ch->left * 16 + (guint64) g_ascii_xdigit_value (b);
        ch->digits++;
        i++;
        continue;
      }
      if (ch->digits == 0 || (b != ';' && b != ' ' && b != '\t' && b != '\r' && b != '\n'))
        return -1;
      ch->state = CH_EXT;
      continue;   /* the same byte: it may be the line's end */
    case CH_EXT:
      if (b == '\n') {
        ch->digits = 0;
        ch->state = ch->left > 0 ? CH_DATA : CH_TRAILER_START;
      }
      i++;
      continue;
    case CH_DATA: {
      gsize n = (gsize) MIN ((guint64) (len - i), ch->left);
      ch->left -= n;
      i += n;
      if (ch->left == 0)
        ch->state = CH_DATA_END;
      continue;
    }
    case CH_DATA_END:   /* the CRLF after the data */
      if (b == '\n')
        ch->state = CH_SIZE;
      else if (b != '\r')
        return -1;
      i++;
      continue;
    case CH_TRAILER_START:
      ch->state = b == '\r' ? CH_TRAILER_CR : b == '\n' ? CH_TRAILER_START : CH_TRAILER;
      ch->done = b == '\n';
      i++;
      continue;
    case CH_TRAILER:
      if (b == '\n')
        ch->state = CH_TRAILER_START;
      i++;
      continue;
    case CH_TRAILER_CR:
      if (b != '\n')
        return -1;
      ch->done = TRUE;
      i++;
      continue;
    default:
      return -1;
    }
  }
  return (gssize) i;
}

/* ---- reading a head ---------------------------------------------------- */

typedef struct {
  GBufferedInputStream *in;
  GCancellable         *cancel;
  gsize                 max;
  BoxEdgeHeadFunc       func;
  gpointer              user_data;
} HeadRead;

static void head_try (HeadRead *h);

static void
head_end (HeadRead *h, GBytes *head, gboolean too_big)
{
  h->func (head, too_big, h->user_data);
  g_clear_pointer (&head, g_bytes_unref);
  g_object_unref (h->in);
  g_clear_object (&h->cancel);
  g_free (h);
}

static void
head_filled (GObject *source, GAsyncResult *result, gpointer user_data)
{
  HeadRead *h = user_data;
  gssize n = g_buffered_input_stream_fill_finish (h->in, result, NULL);

  if (n <= 0 || g_cancellable_is_cancelled (h->cancel))
    head_end (h, NULL, FALSE);
  else
    head_try (h);
}

static void
head_try (HeadRead *h)
{
  gsize avail = 0;
  const char *buffer = g_buffered_input_stream_peek_buffer (h->in, &avail);

  for (gsize i = 0; i + 3 < avail; i++) {
    if (memcmp (buffer + i, "\r\n\r\n", 4) == 0) {
      /* NUL-terminated past its size: libsoup's parsers read to a NUL */
      char *copy = g_malloc (i + 5);
      GBytes *head;

      memcpy (copy, buffer, i + 4);
      copy[i + 4] = '\0';
      head = g_bytes_new_take (copy, i + 4);
      g_input_stream_skip (G_INPUT_STREAM (h->in), i + 4, NULL, NULL);
      head_end (h, head, FALSE);
      return;
    }
  }
  if (avail >= g_buffered_input_stream_get_buffer_size (h->in)) {
    gsize size = g_buffered_input_stream_get_buffer_size (h->in);

    if (size >= h->max) {
      head_end (h, NULL, TRUE);
      return;
    }
    g_buffered_input_stream_set_buffer_size (h->in, MIN (size * 4, h->max));
  }
  g_buffered_input_stream_fill_async (h->in, -1, G_PRIORITY_DEFAULT, h->cancel, head_filled, h);
}

void
box_edge_read_head (GBufferedInputStream *in, gsize max, GCancellable *cancel,
                    BoxEdgeHeadFunc func, gpointer user_data)
{
  HeadRead *h = g_new0 (HeadRead, 1);

  h->max = max;
  h->in = g_object_ref (in);
  h->cancel = cancel != NULL ? g_object_ref (cancel) : NULL;
  h->func = func;
  h->user_data = user_data;
  head_try (h);
}

gboolean
box_edge_take_buffered (GBufferedInputStream *in, gsize length, GString *text)
{
  gsize avail = 0;
  const char *data = g_buffered_input_stream_peek_buffer (in, &avail);

  if (avail < length)
    return FALSE;
  g_string_append_len (text, data, (gssize) length);
  g_input_stream_skip (G_INPUT_STREAM (in), length, NULL, NULL);
  return TRUE;
}

GBufferedInputStream *
box_edge_buffered_new (GInputStream *base)
{
  GInputStream *in = g_buffered_input_stream_new_sized (base, BOX_EDGE_HEAD_START);

  g_filter_input_stream_set_close_base_stream (G_FILTER_INPUT_STREAM (in), FALSE);
  return G_BUFFERED_INPUT_STREAM (in);
}

void
box_edge_buffered_shrink (GBufferedInputStream *in)
{
  if (g_buffered_input_stream_get_buffer_size (in) > BOX_EDGE_HEAD_START)
    g_buffered_input_stream_set_buffer_size (in, BOX_EDGE_HEAD_START);
}
