/* box-http-files-stream.c: the file routes that stream (see
 * box-http-files.h).
 *
 * Downloads (GET fs/file, fs/tar, fs/list).  The agent's DATA is appended
 * to a chunked answer as it arrives (the body keeps nothing once written:
 * accumulate off), and its bytes are credited back to the agent only when
 * libsoup wrote the chunk ("wrote-chunk"): a client that reads slowly
 * pauses the reader in the sandbox, and boxd holds at most one channel
 * window (1 MiB) per download.  The agent sends EOF only when the whole
 * output was read; a channel that ends without it (a read error midway,
 * the sandbox going away) aborts the connection, so the client sees a
 * truncated chunked body, never a short file taken for complete.
 *
 * Uploads (PUT fs/file, fs/tar).  The route's early stage (headers read)
 * pauses the message, holds the sandbox and opens the agent's channel, so
 * a refusal (no such sandbox, a missing parent, permission) answers before
 * any of the body is read (and with "Expect: 100-continue", before the
 * client sends it).  Then the body goes to the agent as it arrives
 * ("got-chunk", nothing accumulated), in DATA frames of up to 32 KiB; while
 * more than UPLOAD_HIGH bytes are on their way to the agent (waiting for
 * its credit), the message is paused, which stops libsoup reading the
 * socket, and it resumes below UPLOAD_LOW.  So an upload costs boxd about
 * UPLOAD_HIGH + 40 KiB whatever its size.  At the end of the body: EOF,
 * and the answer follows the agent's done (or error) event.
 */
#include "config.h"

#include <string.h>

#include "box-agent-private.h"
#include "box-http-files.h"
#include "box-insandbox.h"

#define UPLOAD_PIECE   (32 * 1024)
#define UPLOAD_HIGH    (512 * 1024)
#define UPLOAD_LOW     (128 * 1024)
#define LIST_LINE_MAX  (1024 * 1024)
/* downloads: the agent's DATA frames (small ones for a tar of small files)
 * are gathered into chunks of up to this much, flushed when the reader has
 * taken what was there */
#define BATCH_MAX      (128 * 1024)

/* ---- downloads ---------------------------------------------------------- */

typedef struct {
  gint              ref_count;
  BoxHttpRequest   *req;
  char             *op;
  JsonObject       *args;
  char             *content_type;
  gboolean          list;
  char             *sandbox_id;    /* held while set */
  BoxAgentChannel  *channel;
  GQueue            credits;       /* per chunk appended: bytes to credit once written */
  GByteArray       *batch;         /* output not yet appended to the answer */
  gsize             batch_credit;  /* what the batch credits once written */
  GSource          *flush_source;
  gboolean          eof;
  gboolean          over;
  gulong            msg_ids[3];
  gulong            interrupt_id;
  GString          *line;          /* list: a partial line */
  guint             n_entries;
} Download;

static Download *
download_ref (Download *d)
{
  d->ref_count++;
  return d;
}

static void
download_unref (Download *d)
{
  if (--d->ref_count > 0)
    return;
  g_assert (d->sandbox_id == NULL);
  g_clear_object (&d->channel);
  g_clear_pointer (&d->req, box_http_request_unref);
  g_free (d->op);
  g_clear_pointer (&d->args, json_object_unref);
  g_free (d->content_type);
  g_queue_clear (&d->credits);
  g_byte_array_unref (d->batch);
  if (d->line != NULL)
    g_string_free (d->line, TRUE);
  g_free (d);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Download, download_unref)

/* The answer is over (written, or the client left, or aborted). */
static void
download_over (Download *d)
{
  g_autoptr(Download) keep = download_ref (d);

  if (d->over)
    return;
  d->over = TRUE;
  for (guint i = 0; i < G_N_ELEMENTS (d->msg_ids); i++)
    g_clear_signal_handler (&d->msg_ids[i], d->req->msg);
  if (d->flush_source != NULL) {
    g_source_destroy (d->flush_source);
    g_clear_pointer (&d->flush_source, g_source_unref);
  }
  if (d->channel != NULL) {
    g_signal_handlers_disconnect_by_data (d->channel, d);
    box_agent_channel_close (d->channel);
  }
  g_clear_signal_handler (&d->interrupt_id, d->req->engine);
  if (d->sandbox_id != NULL) {
    box_engine_release (d->req->engine, d->sandbox_id);
    g_clear_pointer (&d->sandbox_id, g_free);
  }
  download_unref (d);   /* the reference the stream held */
}

/* The output is incomplete: end the connection without the last chunk. */
static void
download_abort (Download *d, const char *why)
{
  /* stealing the connection emits "disconnected": download_over() */
  g_autoptr(Download) keep = download_ref (d);

  g_debug ("%s %s: %s; the connection is closed", soup_server_message_get_method (d->req->msg),
           g_uri_get_path (soup_server_message_get_uri (d->req->msg)), why);
  if (!d->req->finished) {
    GSocket *socket = soup_server_message_get_socket (d->req->msg);
    g_autoptr(GIOStream) stream = NULL;

    /* Break the transport first: when libsoup lets go of the message it
     * closes the chunked body stream, which writes the last chunk, and
     * that must not reach the client. */
    if (socket != NULL)
      g_socket_shutdown (socket, TRUE, TRUE, NULL);
    else
      box_insandbox_abort_connection (d->req->msg);
    stream = soup_server_message_steal_connection (d->req->msg);
    if (stream != NULL)
      g_io_stream_close (stream, NULL, NULL);
  }
  download_over (d);
}

static void
download_kick (Download *d)
{
  if (!d->req->finished)
    soup_server_message_unpause (d->req->msg);
}

/* The batch becomes a chunk of the answer. */
static void
download_flush (Download *d)
{
  g_autoptr(GBytes) bytes = NULL;

  if (d->flush_source != NULL) {
    g_source_destroy (d->flush_source);
    g_clear_pointer (&d->flush_source, g_source_unref);
  }
  if (d->batch->len == 0 || d->over)
    return;
  bytes = g_byte_array_free_to_bytes (g_steal_pointer (&d->batch));
  d->batch = g_byte_array_sized_new (BATCH_MAX);
  soup_message_body_append_bytes (soup_server_message_get_response_body (d->req->msg), bytes);
  g_queue_push_tail (&d->credits, GSIZE_TO_POINTER (d->batch_credit));
  d->batch_credit = 0;
  download_kick (d);
}

static gboolean
flush_cb (gpointer user_data)
{
  Download *d = user_data;

  g_clear_pointer (&d->flush_source, g_source_unref);
  download_flush (d);
  return G_SOURCE_REMOVE;
}

/* @bytes (crediting @credit once written) go out with the next chunk: at
 * once when the batch is full, else once the frames at hand are taken. */
static void
download_append (Download *d, GBytes *bytes, gsize credit)
{
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (bytes, &len);

  if (len == 0) {
    if (credit > 0)
      box_agent_channel_consumed (d->channel, credit);
    return;
  }
  g_byte_array_append (d->batch, p, (guint) len);
  d->batch_credit += credit;
  if (d->batch->len >= BATCH_MAX) {
    download_flush (d);
  } else if (d->flush_source == NULL) {
    d->flush_source = g_idle_source_new ();
    g_source_set_priority (d->flush_source, G_PRIORITY_DEFAULT_IDLE);
    g_source_set_callback (d->flush_source, flush_cb, d, NULL);
    g_source_attach (d->flush_source, g_main_context_get_thread_default ());
  }
}

static void
on_wrote_chunk (SoupServerMessage *msg, gpointer user_data)
{
  Download *d = user_data;
  gsize credit = GPOINTER_TO_SIZE (g_queue_pop_head (&d->credits));

  if (credit > 0 && d->channel != NULL)
    box_agent_channel_consumed (d->channel, credit);
}

static void
on_msg_over (SoupServerMessage *msg, gpointer user_data)
{
  download_over (user_data);
}

/* fs-list lines (one Stat per line) -> ",{Stat}" */
static gboolean
list_lines (Download *d, GString *out, GError **error)
{
  char *nl;

  while ((nl = memchr (d->line->str, '\n', d->line->len)) != NULL) {
    gsize len = (gsize) (nl - d->line->str);
    g_autoptr(JsonParser) parser = json_parser_new ();
    g_autoptr(JsonNode) stat = NULL;
    g_autofree char *text = NULL;
    /* the agent (as of this writing) puts the array's separating comma
     * before each line but the first of a batch: tolerated */
    gsize skip = len > 0 && d->line->str[0] == ',' ? 1 : 0;
    JsonNode *root;

    if (!json_parser_load_from_data (parser, d->line->str + skip, (gssize) (len - skip), error))
      return FALSE;
    root = json_parser_get_root (parser);
    stat = box_http_files_stat_node (root != NULL && JSON_NODE_HOLDS_OBJECT (root) ?
                                     json_node_get_object (root) : NULL, error);
    if (stat == NULL)
      return FALSE;
    text = json_to_string (stat, FALSE);
    if (d->n_entries++ > 0)
      g_string_append_c (out, ',');
    g_string_append (out, text);
    g_string_erase (d->line, 0, (gssize) len + 1);
  }
  if (d->line->len > LIST_LINE_MAX) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "an fs-list line is too long");
    return FALSE;
  }
  return TRUE;
}

static void
on_data (BoxAgentChannel *channel, guint stream, GBytes *bytes, gpointer user_data)
{
  Download *d = user_data;
  g_autoptr(GString) out = NULL;
  g_autoptr(GError) error = NULL;
  gsize len = g_bytes_get_size (bytes);

  if (stream != 1) {
    box_agent_channel_consumed (channel, len);
    return;
  }
  if (!d->list) {
    download_append (d, bytes, len);
    return;
  }
  g_string_append_len (d->line, g_bytes_get_data (bytes, NULL), (gssize) len);
  out = g_string_new (NULL);
  if (!list_lines (d, out, &error)) {
    download_abort (d, error->message);
    return;
  }
  {
    gsize out_len = out->len;
    g_autoptr(GBytes) chunk = g_bytes_new_take (g_string_free (g_steal_pointer (&out), FALSE), out_len);

    download_append (d, chunk, len);
  }
}

static void
on_eof (BoxAgentChannel *channel, guint stream, gpointer user_data)
{
  Download *d = user_data;

  if (stream != 1 || d->eof)
    return;
  if (d->list) {
    g_autoptr(GBytes) tail = NULL;

    if (d->line->len > 0) {
      download_abort (d, "the last fs-list line has no end");
      return;
    }
    tail = g_bytes_new_static ("]}", 2);
    download_append (d, tail, 0);
  }
  d->eof = TRUE;
  download_flush (d);
  soup_message_body_complete (soup_server_message_get_response_body (d->req->msg));
  download_kick (d);
}

static void
on_ctrl (BoxAgentChannel *channel, JsonObject *msg, gpointer user_data)
{
  Download *d = user_data;

  if (g_strcmp0 (json_object_get_string_member_with_default (msg, "event", ""), "error") == 0) {
    g_autoptr(GError) error = box_agent_error_from_reply (msg);

    g_debug ("%s in sandbox %s: %s", d->op, d->sandbox_id, error->message);
  }
}

static void
on_closed (BoxAgentChannel *channel, gpointer user_data)
{
  Download *d = user_data;

  if (!d->eof)
    download_abort (d, "the agent's output ended without EOF");
}

/* The sandbox pauses, stops, goes ...: the output will not complete (a
 * hot pause would leave the channel open and the client waiting). */
static void
on_download_interrupted (BoxEngine *engine, const char *sandbox_id, const char *why,
                         gpointer user_data)
{
  Download *d = user_data;
  g_autofree char *message = NULL;

  if (g_strcmp0 (sandbox_id, d->sandbox_id) != 0)
    return;
  message = g_strdup_printf ("the sandbox went away (%s)", why);
  if (d->channel == NULL) {
    /* still opening: a plain error answer */
    box_http_reply_error_literal (d->req->msg, BOX_ERROR_SANDBOX_UNAVAILABLE, message);
    box_http_request_resume (d->req);
    download_over (d);
  } else if (!d->eof) {
    download_abort (d, message);
  }
}

static void
download_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(Download) d = user_data;
  g_autoptr(GError) error = NULL;
  SoupServerMessage *msg = d->req->msg;
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (msg);
  gint64 length = -1;

  d->channel = box_engine_fs_open_finish (BOX_ENGINE (source), result, &error);
  if (d->over) {
    /* answered meanwhile (the sandbox went away) */
    if (d->channel != NULL)
      box_agent_channel_close (d->channel);
    return;
  }
  if (d->channel == NULL || d->req->finished) {
    if (d->channel == NULL)
      box_http_reply_error (msg, error);
    box_http_request_resume (d->req);
    download_over (d);
    return;
  }
  d->msg_ids[0] = g_signal_connect (msg, "wrote-chunk", G_CALLBACK (on_wrote_chunk), d);
  d->msg_ids[1] = g_signal_connect (msg, "finished", G_CALLBACK (on_msg_over), d);
  d->msg_ids[2] = g_signal_connect (msg, "disconnected", G_CALLBACK (on_msg_over), d);
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_set_content_type (headers, d->content_type, NULL);
  if (soup_server_message_get_method (msg) == SOUP_METHOD_HEAD) {
    /* the answer has no body: nothing to read */
    g_signal_handlers_disconnect_by_data (d->channel, d);
    box_agent_channel_close (d->channel);
    box_http_request_resume (d->req);
    return;
  }
  /* a file of a known length (fs-read's reply says): Content-Length, so
   * that every client tells a cut transfer from a whole one (a connection
   * closed between two chunks reads as the end to some, libsoup's among
   * them); else chunked */
  if (box_agent_channel_get_reply (d->channel) != NULL &&
      box_agent_json_get_int (box_agent_channel_get_reply (d->channel), "length", &length) && length >= 0)
    soup_message_headers_set_content_length (headers, length);
  else
    soup_message_headers_set_encoding (headers, SOUP_ENCODING_CHUNKED);
  soup_message_body_set_accumulate (soup_server_message_get_response_body (msg), FALSE);
  g_signal_connect (d->channel, "data", G_CALLBACK (on_data), d);
  g_signal_connect (d->channel, "eof", G_CALLBACK (on_eof), d);
  g_signal_connect (d->channel, "ctrl", G_CALLBACK (on_ctrl), d);
  g_signal_connect (d->channel, "closed", G_CALLBACK (on_closed), d);
  if (d->list) {
    g_autoptr(GBytes) head = g_bytes_new_static ("{\"entries\":[", 12);

    d->line = g_string_new (NULL);
    download_append (d, head, 0);
  }
  box_http_request_resume (d->req);
}

static void
download_held (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(Download) d = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = box_engine_hold_finish (BOX_ENGINE (source), result, &error);

  if (sandbox == NULL) {
    box_http_reply_error (d->req->msg, error);
    box_http_request_resume (d->req);
    download_over (d);
    return;
  }
  d->sandbox_id = g_strdup (sandbox->id);
  d->interrupt_id = g_signal_connect (d->req->engine, "sandbox-interrupted",
                                      G_CALLBACK (on_download_interrupted), d);
  box_engine_fs_open_async (d->req->engine, d->sandbox_id, d->op, d->args, NULL, download_opened,
                            download_ref (d));
}

void
box_http_files_download (BoxHttpRequest *req, const char *op, JsonObject *args,
                         const char *content_type, gboolean list)
{
  Download *d = g_new0 (Download, 1);

  d->ref_count = 1;   /* the stream's, until download_over() */
  d->req = box_http_request_pause (req);
  d->op = g_strdup (op);
  d->args = json_object_ref (args);
  d->content_type = g_strdup (content_type);
  d->list = list;
  g_queue_init (&d->credits);
  d->batch = g_byte_array_sized_new (BATCH_MAX);
  box_engine_hold_async (req->engine, box_http_request_project (req),
                         box_http_request_param (req, 0), NULL, download_held, download_ref (d));
}

/* ---- uploads ------------------------------------------------------------ */

typedef struct {
  gint              ref_count;
  BoxHttpRequest   *req;            /* early: msg borrowed by req; we hold our own ref */
  SoupServerMessage *msg;
  BoxEngine        *engine;
  char             *op;
  JsonObject       *args;
  gboolean          stat_reply;
  char             *sandbox_id;     /* held while set */
  BoxAgentChannel  *channel;
  GByteArray       *piece;          /* body bytes not yet handed to the channel */
  gsize             in_flight;      /* handed to the channel, not yet within credit */
  gboolean          paused;         /* we paused the message */
  gboolean          got_body;
  gboolean          answered;       /* an answer is set (early error or the outcome) */
  gboolean          waiting;        /* the handler stage paused the request for the outcome */
  gboolean          over;
  GError           *error;          /* the outcome: an error ... */
  JsonObject       *done;           /* ... or the done event */
  gulong            msg_ids[4];
  gulong            interrupt_id;
} Upload;

static Upload *
upload_ref (Upload *u)
{
  u->ref_count++;
  return u;
}

static void
upload_unref (Upload *u)
{
  if (--u->ref_count > 0)
    return;
  g_assert (u->sandbox_id == NULL);
  g_clear_object (&u->channel);
  g_clear_pointer (&u->req, box_http_request_unref);
  g_clear_object (&u->msg);
  g_free (u->op);
  g_clear_pointer (&u->args, json_object_unref);
  g_byte_array_unref (u->piece);
  g_clear_error (&u->error);
  g_clear_pointer (&u->done, json_object_unref);
  g_free (u);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Upload, upload_unref)

static void
upload_unpause (Upload *u)
{
  if (u->paused && !u->over) {
    u->paused = FALSE;
    soup_server_message_unpause (u->msg);
  }
}

static void
upload_over (Upload *u)
{
  g_autoptr(Upload) keep = upload_ref (u);

  if (u->over)
    return;
  u->over = TRUE;
  for (guint i = 0; i < G_N_ELEMENTS (u->msg_ids); i++)
    g_clear_signal_handler (&u->msg_ids[i], u->msg);
  if (u->channel != NULL) {
    g_signal_handlers_disconnect_by_data (u->channel, u);
    /* before the done event this abandons the write: nothing changes */
    box_agent_channel_close (u->channel);
  }
  g_clear_signal_handler (&u->interrupt_id, u->engine);
  if (u->sandbox_id != NULL) {
    box_engine_release (u->engine, u->sandbox_id);
    g_clear_pointer (&u->sandbox_id, g_free);
  }
  /* the message keeps the request (until its handler), the request keeps
   * us (box_http_request_keep()): let go of both, or none is ever freed */
  g_clear_pointer (&u->req, box_http_request_unref);
  g_clear_object (&u->msg);
  upload_unref (u);   /* the message's reference */
}

/* Sets the answer from the outcome, once both are there. */
static void
upload_answer (Upload *u)
{
  if (u->answered || u->over)
    return;
  if (u->error != NULL) {
    box_http_reply_error (u->msg, u->error);
  } else if (u->done != NULL && u->waiting) {
    if (!u->stat_reply) {
      box_http_reply_empty (u->msg, SOUP_STATUS_NO_CONTENT);
    } else {
      JsonNode *stat = json_object_get_member (u->done, "stat");
      g_autoptr(GError) error = NULL;
      JsonNode *node = box_http_files_stat_node (stat != NULL && JSON_NODE_HOLDS_OBJECT (stat) ?
                                                 json_node_get_object (stat) : NULL, &error);

      if (node != NULL)
        box_http_reply_json (u->msg, SOUP_STATUS_OK, node);
      else
        box_http_reply_error (u->msg, error);
    }
  } else {
    return;
  }
  u->answered = TRUE;
  if (u->waiting)
    box_http_request_resume (u->req);
  else
    /* the early stage: the handler will not run; the rest of the body
     * (if any) is read and dropped, then the answer goes */
    upload_unpause (u);
}

static void
upload_fail (Upload *u, GError *error)
{
  if (u->error == NULL && u->done == NULL)
    u->error = error;
  else
    g_error_free (error);
  upload_answer (u);
}

typedef struct {
  Upload *u;
  gsize   len;
} UploadWrite;

static void
upload_written (GObject *source, GAsyncResult *result, gpointer user_data)
{
  UploadWrite *w = user_data;
  g_autoptr(Upload) u = w->u;
  g_autoptr(GError) error = NULL;

  /* a failed write is explained by the channel's error event or close */
  box_agent_channel_write_finish (BOX_AGENT_CHANNEL (source), result, &error);
  u->in_flight -= w->len;
  g_free (w);
  if (u->in_flight <= UPLOAD_LOW)
    upload_unpause (u);
}

static void
upload_flush (Upload *u)
{
  g_autoptr(GBytes) bytes = NULL;
  UploadWrite *w;

  if (u->piece->len == 0 || u->channel == NULL || box_agent_channel_is_closed (u->channel))
    return;
  w = g_new0 (UploadWrite, 1);
  w->u = upload_ref (u);
  w->len = u->piece->len;
  bytes = g_byte_array_free_to_bytes (g_steal_pointer (&u->piece));
  u->piece = g_byte_array_sized_new (UPLOAD_PIECE);
  u->in_flight += w->len;
  box_agent_channel_write_async (u->channel, 0, bytes, NULL, upload_written, w);
}

static void
on_got_chunk (SoupServerMessage *msg, GBytes *chunk, gpointer user_data)
{
  Upload *u = user_data;
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (chunk, &len);

  if (u->error != NULL || u->channel == NULL)
    return;   /* dropped: the answer is an error */
  g_byte_array_append (u->piece, p, (guint) len);
  if (u->piece->len >= UPLOAD_PIECE)
    upload_flush (u);
  if (u->in_flight >= UPLOAD_HIGH && !u->paused) {
    /* libsoup stops reading the socket until the agent took some */
    u->paused = TRUE;
    soup_server_message_pause (msg);
  }
}

static void
on_got_body (SoupServerMessage *msg, gpointer user_data)
{
  Upload *u = user_data;

  u->got_body = TRUE;
  if (u->error != NULL || u->channel == NULL)
    return;
  upload_flush (u);
  box_agent_channel_send_eof (u->channel, 0);
}

static void
on_upload_ctrl (BoxAgentChannel *channel, JsonObject *msg, gpointer user_data)
{
  Upload *u = user_data;
  const char *event = json_object_get_string_member_with_default (msg, "event", "");

  if (g_str_equal (event, "done")) {
    if (u->error == NULL && u->done == NULL)
      u->done = json_object_ref (msg);
    upload_answer (u);
  } else if (g_str_equal (event, "error")) {
    upload_fail (u, box_agent_error_from_reply (msg));
  }
}

static void
on_upload_closed (BoxAgentChannel *channel, gpointer user_data)
{
  Upload *u = user_data;

  if (u->done == NULL && u->error == NULL)
    upload_fail (u, g_error_new_literal (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                                         "the sandbox's agent ended the transfer without a result"));
  /* nothing more goes to the agent; the body is read and dropped */
  upload_unpause (u);
}

static void
on_upload_msg_over (SoupServerMessage *msg, gpointer user_data)
{
  upload_over (user_data);
}

static void
upload_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(Upload) u = user_data;
  GError *error = NULL;

  u->channel = box_engine_fs_open_finish (BOX_ENGINE (source), result, &error);
  if (u->over || u->error != NULL) {
    g_clear_error (&error);
    if (u->channel != NULL)
      box_agent_channel_close (u->channel);
    return;
  }
  if (u->channel == NULL) {
    upload_fail (u, error);
    return;
  }
  g_signal_connect (u->channel, "ctrl", G_CALLBACK (on_upload_ctrl), u);
  g_signal_connect (u->channel, "closed", G_CALLBACK (on_upload_closed), u);
  /* now the body may come */
  upload_unpause (u);
}

static void
on_upload_interrupted (BoxEngine *engine, const char *sandbox_id, const char *why,
                       gpointer user_data)
{
  Upload *u = user_data;

  if (g_strcmp0 (sandbox_id, u->sandbox_id) != 0 || u->done != NULL)
    return;
  upload_fail (u, g_error_new (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                               "the sandbox went away (%s) during the transfer", why));
  if (u->channel != NULL) {
    g_signal_handlers_disconnect_by_data (u->channel, u);
    box_agent_channel_close (u->channel);
  }
  /* the rest of the body is read and dropped */
  upload_unpause (u);
}

static void
upload_held (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(Upload) u = user_data;
  GError *error = NULL;
  g_autoptr(BoxSandbox) sandbox = box_engine_hold_finish (BOX_ENGINE (source), result, &error);

  if (sandbox == NULL) {
    upload_fail (u, error);
    return;
  }
  if (u->over) {
    box_engine_release (u->engine, sandbox->id);
    return;
  }
  u->sandbox_id = g_strdup (sandbox->id);
  u->interrupt_id = g_signal_connect (u->engine, "sandbox-interrupted",
                                      G_CALLBACK (on_upload_interrupted), u);
  box_engine_fs_open_async (u->engine, u->sandbox_id, u->op, u->args, NULL, upload_opened,
                            upload_ref (u));
}

void
box_http_files_upload_start (BoxHttpRequest *req, const char *op, JsonObject *args,
                             gboolean stat_reply)
{
  Upload *u = g_new0 (Upload, 1);
  SoupServerMessage *msg = req->msg;

  u->ref_count = 1;   /* the message's, until upload_over() */
  u->req = box_http_request_ref (req);
  u->msg = g_object_ref (msg);
  u->engine = req->engine;
  u->op = g_strdup (op);
  u->args = json_object_ref (args);
  u->stat_reply = stat_reply;
  u->piece = g_byte_array_sized_new (UPLOAD_PIECE);
  /* the handler stage finds it here (a reference of its own) */
  box_http_request_keep (req, upload_ref (u), (GDestroyNotify) upload_unref);
  soup_message_body_set_accumulate (soup_server_message_get_request_body (msg), FALSE);
  u->msg_ids[0] = g_signal_connect (msg, "got-chunk", G_CALLBACK (on_got_chunk), u);
  u->msg_ids[1] = g_signal_connect (msg, "got-body", G_CALLBACK (on_got_body), u);
  u->msg_ids[2] = g_signal_connect (msg, "finished", G_CALLBACK (on_upload_msg_over), u);
  u->msg_ids[3] = g_signal_connect (msg, "disconnected", G_CALLBACK (on_upload_msg_over), u);
  /* nothing of the body is read until the agent is ready for it */
  u->paused = TRUE;
  soup_server_message_pause (msg);
  box_engine_hold_async (req->engine, box_http_request_project (req),
                         box_http_request_param (req, 0), NULL, upload_held, upload_ref (u));
}

void
box_http_files_upload_finish (BoxHttpRequest *req)
{
  Upload *u = req->kept;

  if (u == NULL) {
    box_http_reply_error_literal (req->msg, BOX_ERROR_INTERNAL, "upload was not started");
    return;
  }
  if (u->answered)
    return;
  /* the body is in; the answer follows the agent's done event */
  u->waiting = TRUE;
  box_http_request_pause (req);
  box_http_request_unref (req);   /* box_http_request_resume() is ours: u->req */
  upload_answer (u);
}
