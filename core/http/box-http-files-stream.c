/* box-http-files-stream.c: the file routes that stream (see
 * box-http-files.h), on the engine's BoxFileTransfer.
 *
 * Downloads (GET fs/file, fs/tar, fs/list).  The transfer's output is
 * appended to a chunked answer as it arrives (the body keeps nothing once
 * written: accumulate off), and it is reported consumed to the transfer
 * (which credits the agent) only when libsoup wrote the chunk
 * ("wrote-chunk"): a client that reads slowly pauses the reader in the
 * sandbox, and boxd holds at most one channel window (1 MiB) per download.
 * The output is complete only with the transfer's ::eof; a transfer that
 * closes without it (a read error midway, the sandbox going away) aborts
 * the connection, so the client sees a truncated body, never a short file
 * taken for complete.
 *
 * Uploads (PUT fs/file, fs/tar).  The route's early stage (headers read)
 * pauses the message, holds the sandbox and opens the transfer, so a
 * refusal (no such sandbox, a missing parent, permission) answers before
 * any of the body is read (and with "Expect: 100-continue", before the
 * client sends it).  Then the body goes to the transfer as it arrives
 * ("got-chunk", nothing accumulated), in writes of up to 32 KiB; while
 * more than UPLOAD_HIGH bytes are on their way to the agent (waiting for
 * its credit), the message is paused, which stops libsoup reading the
 * socket, and it resumes below UPLOAD_LOW.  So an upload costs boxd about
 * UPLOAD_HIGH + 40 KiB whatever its size.  At the end of the body the
 * input ends, and the answer follows the transfer's ::done (or ::failed).
 */
#include "config.h"

#include <string.h>

#include "box-http-files.h"
#include "box-insandbox.h"

#define UPLOAD_PIECE   (32 * 1024)
#define UPLOAD_HIGH    (512 * 1024)
#define UPLOAD_LOW     (128 * 1024)
/* downloads: the transfer's output (small pieces for a tar of small files)
 * is gathered into chunks of up to this much, flushed when the reader has
 * taken what was there */
#define BATCH_MAX      (128 * 1024)

/* ---- downloads ---------------------------------------------------------- */

typedef struct {
  gint              ref_count;
  BoxHttpRequest   *req;
  BoxFileRequest   *request;
  char             *content_type;
  gboolean          list;
  char             *sandbox_id;    /* held while set */
  BoxFileTransfer  *transfer;
  GQueue            credits;       /* per chunk appended: bytes to credit once written */
  GByteArray       *batch;         /* output not yet appended to the answer */
  gsize             batch_credit;  /* what the batch credits once written */
  GSource          *flush_source;
  gboolean          eof;
  gboolean          over;
  gulong            msg_ids[3];
  gulong            interrupt_id;
  guint             n_entries;     /* list: written so far */
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
  g_clear_object (&d->transfer);
  g_clear_pointer (&d->req, box_http_request_unref);
  g_clear_pointer (&d->request, box_file_request_free);
  g_free (d->content_type);
  g_queue_clear (&d->credits);
  g_byte_array_unref (d->batch);
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
  if (d->transfer != NULL) {
    g_signal_handlers_disconnect_by_data (d->transfer, d);
    box_file_transfer_close (d->transfer);
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
      box_file_transfer_consumed (d->transfer, credit);
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

  if (credit > 0 && d->transfer != NULL)
    box_file_transfer_consumed (d->transfer, credit);
}

static void
on_msg_over (SoupServerMessage *msg, gpointer user_data)
{
  download_over (user_data);
}

static void
on_data (BoxFileTransfer *transfer, GBytes *bytes, gpointer user_data)
{
  download_append (user_data, bytes, g_bytes_get_size (bytes));
}

/* list: entries -> ",{Stat}" ... */
static void
on_entries (BoxFileTransfer *transfer, GPtrArray *infos, guint64 size, gpointer user_data)
{
  Download *d = user_data;
  GString *out = g_string_new (NULL);
  g_autoptr(GBytes) chunk = NULL;

  for (guint i = 0; i < infos->len; i++) {
    g_autoptr(JsonNode) node = box_http_files_info_node (g_ptr_array_index (infos, i));
    g_autofree char *text = json_to_string (node, FALSE);

    if (d->n_entries++ > 0)
      g_string_append_c (out, ',');
    g_string_append (out, text);
  }
  chunk = g_string_free_to_bytes (out);
  download_append (d, chunk, (gsize) size);
}

static void
on_eof (BoxFileTransfer *transfer, gpointer user_data)
{
  Download *d = user_data;

  if (d->list) {
    g_autoptr(GBytes) tail = g_bytes_new_static ("]}", 2);

    download_append (d, tail, 0);
  }
  d->eof = TRUE;
  download_flush (d);
  soup_message_body_complete (soup_server_message_get_response_body (d->req->msg));
  download_kick (d);
}

static void
on_failed (BoxFileTransfer *transfer, GError *error, gpointer user_data)
{
  Download *d = user_data;

  g_debug ("%s of %s in sandbox %s: %s", g_uri_get_path (soup_server_message_get_uri (d->req->msg)),
           d->request->path, d->sandbox_id, error->message);
  if (!d->eof)
    download_abort (d, error->message);
}

static void
on_closed (BoxFileTransfer *transfer, gpointer user_data)
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
  if (d->transfer == NULL) {
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
  gint64 length;

  d->transfer = box_engine_fs_open_finish (BOX_ENGINE (source), result, &error);
  if (d->over) {
    /* answered meanwhile (the sandbox went away) */
    if (d->transfer != NULL)
      box_file_transfer_close (d->transfer);
    return;
  }
  if (d->transfer == NULL || d->req->finished) {
    if (d->transfer == NULL)
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
    box_file_transfer_close (d->transfer);
    box_http_request_resume (d->req);
    return;
  }
  /* a file of a known length (the agent says): Content-Length, so that
   * every client tells a cut transfer from a whole one (a connection
   * closed between two chunks reads as the end to some, libsoup's among
   * them); else chunked */
  length = box_file_transfer_get_length (d->transfer);
  if (length >= 0)
    soup_message_headers_set_content_length (headers, length);
  else
    soup_message_headers_set_encoding (headers, SOUP_ENCODING_CHUNKED);
  soup_message_body_set_accumulate (soup_server_message_get_response_body (msg), FALSE);
  g_signal_connect (d->transfer, "data", G_CALLBACK (on_data), d);
  g_signal_connect (d->transfer, "entries", G_CALLBACK (on_entries), d);
  g_signal_connect (d->transfer, "eof", G_CALLBACK (on_eof), d);
  g_signal_connect (d->transfer, "failed", G_CALLBACK (on_failed), d);
  g_signal_connect (d->transfer, "closed", G_CALLBACK (on_closed), d);
  if (d->list) {
    g_autoptr(GBytes) head = g_bytes_new_static ("{\"entries\":[", 12);

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
  box_engine_fs_open_async (d->req->engine, d->sandbox_id, d->request, NULL, download_opened,
                            download_ref (d));
}

void
box_http_files_download (BoxHttpRequest *req, const BoxFileRequest *request,
                         const char *content_type)
{
  Download *d = g_new0 (Download, 1);

  d->ref_count = 1;   /* the stream's, until download_over() */
  d->req = box_http_request_pause (req);
  d->request = box_file_request_copy (request);
  d->content_type = g_strdup (content_type);
  d->list = request->op == BOX_FILE_OP_LIST;
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
  BoxFileRequest   *request;
  gboolean          stat_reply;
  char             *sandbox_id;     /* held while set */
  BoxFileTransfer  *transfer;
  GByteArray       *piece;          /* body bytes not yet handed to the channel */
  gsize             in_flight;      /* handed to the channel, not yet within credit */
  gboolean          paused;         /* we paused the message */
  gboolean          got_body;
  gboolean          answered;       /* an answer is set (early error or the outcome) */
  gboolean          waiting;        /* the handler stage paused the request for the outcome */
  gboolean          over;
  GError           *error;          /* the outcome: an error ... */
  gboolean          done;           /* ... or done, */
  BoxFileInfo      *info;           /* with the file's Stat (WRITE) */
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
  g_clear_object (&u->transfer);
  g_clear_pointer (&u->req, box_http_request_unref);
  g_clear_object (&u->msg);
  g_clear_pointer (&u->request, box_file_request_free);
  g_byte_array_unref (u->piece);
  g_clear_error (&u->error);
  g_clear_pointer (&u->info, box_file_info_free);
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
  if (u->transfer != NULL) {
    g_signal_handlers_disconnect_by_data (u->transfer, u);
    /* before done this abandons the write: nothing changes */
    box_file_transfer_close (u->transfer);
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
  } else if (u->done && u->waiting) {
    if (u->stat_reply && u->info != NULL)
      box_http_reply_json (u->msg, SOUP_STATUS_OK, box_http_files_info_node (u->info));
    else
      box_http_reply_empty (u->msg, SOUP_STATUS_NO_CONTENT);
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
  if (u->error == NULL && !u->done)
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

  /* a failed write is explained by the transfer's ::failed */
  box_file_transfer_write_finish (BOX_FILE_TRANSFER (source), result, &error);
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

  if (u->piece->len == 0 || u->transfer == NULL || box_file_transfer_is_closed (u->transfer))
    return;
  w = g_new0 (UploadWrite, 1);
  w->u = upload_ref (u);
  w->len = u->piece->len;
  bytes = g_byte_array_free_to_bytes (g_steal_pointer (&u->piece));
  u->piece = g_byte_array_sized_new (UPLOAD_PIECE);
  u->in_flight += w->len;
  box_file_transfer_write_async (u->transfer, bytes, NULL, upload_written, w);
}

static void
on_got_chunk (SoupServerMessage *msg, GBytes *chunk, gpointer user_data)
{
  Upload *u = user_data;
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (chunk, &len);

  if (u->error != NULL || u->transfer == NULL)
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
  if (u->error != NULL || u->transfer == NULL)
    return;
  upload_flush (u);
  box_file_transfer_end_input (u->transfer);
}

static void
on_upload_done (BoxFileTransfer *transfer, BoxFileInfo *info, gpointer user_data)
{
  Upload *u = user_data;

  if (u->error == NULL && !u->done) {
    u->done = TRUE;
    u->info = info != NULL ? box_file_info_copy (info) : NULL;
  }
  upload_answer (u);
}

static void
on_upload_failed (BoxFileTransfer *transfer, GError *error, gpointer user_data)
{
  upload_fail (user_data, g_error_copy (error));
}

static void
on_upload_closed (BoxFileTransfer *transfer, gpointer user_data)
{
  /* nothing more goes to the agent; the body is read and dropped */
  upload_unpause (user_data);
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

  u->transfer = box_engine_fs_open_finish (BOX_ENGINE (source), result, &error);
  if (u->over || u->error != NULL) {
    g_clear_error (&error);
    if (u->transfer != NULL)
      box_file_transfer_close (u->transfer);
    return;
  }
  if (u->transfer == NULL) {
    upload_fail (u, error);
    return;
  }
  g_signal_connect (u->transfer, "done", G_CALLBACK (on_upload_done), u);
  g_signal_connect (u->transfer, "failed", G_CALLBACK (on_upload_failed), u);
  g_signal_connect (u->transfer, "closed", G_CALLBACK (on_upload_closed), u);
  /* now the body may come */
  upload_unpause (u);
}

static void
on_upload_interrupted (BoxEngine *engine, const char *sandbox_id, const char *why,
                       gpointer user_data)
{
  Upload *u = user_data;

  if (g_strcmp0 (sandbox_id, u->sandbox_id) != 0 || u->done)
    return;
  upload_fail (u, g_error_new (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                               "the sandbox went away (%s) during the transfer", why));
  if (u->transfer != NULL) {
    g_signal_handlers_disconnect_by_data (u->transfer, u);
    box_file_transfer_close (u->transfer);
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
  box_engine_fs_open_async (u->engine, u->sandbox_id, u->request, NULL, upload_opened,
                            upload_ref (u));
}

void
box_http_files_upload_start (BoxHttpRequest *req, const BoxFileRequest *request)
{
  Upload *u = g_new0 (Upload, 1);
  SoupServerMessage *msg = req->msg;

  u->ref_count = 1;   /* the message's, until upload_over() */
  u->req = box_http_request_ref (req);
  u->msg = g_object_ref (msg);
  u->engine = req->engine;
  u->request = box_file_request_copy (request);
  u->stat_reply = request->op == BOX_FILE_OP_WRITE;
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
