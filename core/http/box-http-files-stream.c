/* box-http-files-stream.c: the file routes that stream (see
 * box-http-files.h), on the engine's downloads (a GInputStream) and
 * uploads (a GOutputStream).
 *
 * Downloads (GET fs/file, fs/tar, fs/list).  The download is read as the
 * answer is written: what a read gives (everything the agent sent by then,
 * up to BATCH_MAX) becomes a chunk of the answer (the body keeps nothing
 * once written: accumulate off), and the next read waits while more than
 * BATCH_MAX bytes are appended but not yet written ("wrote-chunk").  The
 * download credits the agent only for what was read, so a client that
 * reads slowly pauses the reader in the sandbox, and boxd holds at most one
 * channel window plus BATCH_MAX per download.  A read that fails (the
 * output will not complete: an error midway, the sandbox going away, a
 * length that does not add up) aborts the connection, so the client sees a
 * truncated body, never a short file taken for complete.
 *
 * A service's log (GET services/{name}/logs) is a download too, of
 * box_engine_service_logs_async(); with follow=true the sandbox's hold
 * ends once the log is open (following is not activity and does not keep
 * the sandbox from idling), and the sandbox pausing, stopping or going
 * away ends the answer cleanly (its last chunk), as the end of a follow.
 *
 * Uploads (PUT fs/file, fs/tar).  The route's early stage (headers read)
 * pauses the message, holds the sandbox and opens the upload, so a refusal
 * (no such sandbox, a missing parent, permission) answers before any of the
 * body is read (and with "Expect: 100-continue", before the client sends
 * it).  Then the body goes to the upload as it arrives ("got-chunk",
 * nothing accumulated), in writes of at least UPLOAD_PIECE bytes, one at a
 * time; while more than UPLOAD_HIGH bytes wait for the write before them,
 * the message is paused, which stops libsoup reading the socket, and it
 * resumes below UPLOAD_LOW.  So an upload costs boxd about 2 x UPLOAD_HIGH
 * plus the agent stream's write limit whatever its size.  At the end of the
 * body the upload is closed, and the answer is the close's outcome.
 */
#include "config.h"

#include <string.h>

#include "box-http-files.h"
#include "box-insandbox.h"

#define UPLOAD_PIECE   (32 * 1024)
#define UPLOAD_HIGH    (256 * 1024)
#define UPLOAD_LOW     (64 * 1024)
/* downloads: a read takes up to this much; no read while this much is
 * appended to the answer and not yet written */
#define BATCH_MAX      (128 * 1024)

/* ---- downloads ---------------------------------------------------------- */

typedef struct {
  gint              ref_count;
  BoxHttpRequest   *req;
  BoxFileRequest   *request;       /* NULL for a service's log */
  char             *service;       /* a service's log: its name */
  gint              tail;
  gboolean          follow;
  gboolean          held;          /* sandbox_id is held */
  char             *content_type;
  gboolean          list;
  char             *sandbox_id;    /* once held (held: still) */
  BoxFileDownload  *download;
  GCancellable     *cancellable;   /* the read in progress */
  GQueue            chunks;        /* per chunk appended: its length */
  gsize             unwritten;     /* appended, not yet written */
  gboolean          reading;
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
  g_assert (!d->held);
  g_free (d->sandbox_id);
  g_free (d->service);
  g_clear_object (&d->download);
  g_clear_object (&d->cancellable);
  g_clear_pointer (&d->req, box_http_request_unref);
  g_clear_pointer (&d->request, box_file_request_free);
  g_free (d->content_type);
  g_queue_clear (&d->chunks);
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
  g_cancellable_cancel (d->cancellable);
  if (d->download != NULL)
    box_file_download_abort (d->download);
  g_clear_signal_handler (&d->interrupt_id, d->req->engine);
  if (d->held) {
    d->held = FALSE;
    box_engine_release (d->req->engine, d->sandbox_id);
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

/* @bytes become a chunk of the answer. */
static void
download_append (Download *d, GBytes *bytes)
{
  gsize len = g_bytes_get_size (bytes);

  if (len == 0)
    return;
  soup_message_body_append_bytes (soup_server_message_get_response_body (d->req->msg), bytes);
  g_queue_push_tail (&d->chunks, GSIZE_TO_POINTER (len));
  d->unwritten += len;
  download_kick (d);
}

static void
download_complete (Download *d)
{
  if (d->list) {
    g_autoptr(GBytes) tail = g_bytes_new_static ("]}", 2);

    download_append (d, tail);
  }
  d->eof = TRUE;
  soup_message_body_complete (soup_server_message_get_response_body (d->req->msg));
  download_kick (d);
}

static void download_pump (Download *d);

/* list: entries -> ",{Stat}" ... */
static GBytes *
entries_chunk (Download *d, GPtrArray *infos)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < infos->len; i++) {
    g_autoptr(JsonNode) node = box_http_files_info_node (g_ptr_array_index (infos, i));
    g_autofree char *text = json_to_string (node, FALSE);

    if (d->n_entries++ > 0)
      g_string_append_c (out, ',');
    g_string_append (out, text);
  }
  return g_string_free_to_bytes (out);
}

static void
download_got (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(Download) d = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) infos = NULL;
  g_autoptr(GBytes) bytes = NULL;

  d->reading = FALSE;
  if (d->list) {
    infos = box_file_download_next_entries_finish (BOX_FILE_DOWNLOAD (source), result, &error);
    if (infos != NULL && infos->len > 0)
      bytes = entries_chunk (d, infos);
  } else {
    bytes = g_input_stream_read_bytes_finish (G_INPUT_STREAM (source), result, &error);
  }
  /* eof: a follow ended meanwhile, and this read failed as stopped */
  if (d->over || d->eof)
    return;
  if (error != NULL) {
    g_debug ("%s of %s in sandbox %s: %s", g_uri_get_path (soup_server_message_get_uri (d->req->msg)),
             d->request != NULL ? d->request->path : d->service, d->sandbox_id, error->message);
    download_abort (d, error->message);
  } else if (bytes == NULL || g_bytes_get_size (bytes) == 0) {
    download_complete (d);
  } else {
    download_append (d, bytes);
    download_pump (d);
  }
}

/* The next read, unless one is on its way or the answer has enough. */
static void
download_pump (Download *d)
{
  if (d->over || d->eof || d->reading || d->unwritten >= BATCH_MAX)
    return;
  d->reading = TRUE;
  if (d->list)
    box_file_download_next_entries_async (d->download, d->cancellable, download_got,
                                          download_ref (d));
  else
    g_input_stream_read_bytes_async (G_INPUT_STREAM (d->download), BATCH_MAX, G_PRIORITY_DEFAULT,
                                     d->cancellable, download_got, download_ref (d));
}

static void
on_wrote_chunk (SoupServerMessage *msg, gpointer user_data)
{
  Download *d = user_data;

  d->unwritten -= GPOINTER_TO_SIZE (g_queue_pop_head (&d->chunks));
  download_pump (d);
}

static void
on_msg_over (SoupServerMessage *msg, gpointer user_data)
{
  download_over (user_data);
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
  if (d->download == NULL) {
    /* still opening: a plain error answer */
    box_http_reply_error_literal (d->req->msg, BOX_ERROR_SANDBOX_UNAVAILABLE, message);
    box_http_request_resume (d->req);
    download_over (d);
  } else if (d->follow && !d->eof) {
    /* the end of a follow: a clean one */
    box_file_download_abort (d->download);
    download_complete (d);
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

  if (d->service != NULL)
    d->download = box_engine_service_logs_finish (BOX_ENGINE (source), result, &error);
  else
    d->download = box_engine_fs_download_finish (BOX_ENGINE (source), result, &error);
  if (d->over) {
    /* answered meanwhile (the sandbox went away) */
    if (d->download != NULL)
      box_file_download_abort (d->download);
    return;
  }
  if (d->download == NULL || d->req->finished) {
    if (d->download == NULL)
      box_http_reply_error (msg, error);
    box_http_request_resume (d->req);
    download_over (d);
    return;
  }
  if (d->follow && d->held) {
    /* following does not hold the sandbox awake */
    d->held = FALSE;
    box_engine_release (d->req->engine, d->sandbox_id);
  }
  d->msg_ids[0] = g_signal_connect (msg, "wrote-chunk", G_CALLBACK (on_wrote_chunk), d);
  d->msg_ids[1] = g_signal_connect (msg, "finished", G_CALLBACK (on_msg_over), d);
  d->msg_ids[2] = g_signal_connect (msg, "disconnected", G_CALLBACK (on_msg_over), d);
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_set_content_type (headers, d->content_type, NULL);
  if (soup_server_message_get_method (msg) == SOUP_METHOD_HEAD) {
    /* the answer has no body: nothing to read */
    box_file_download_abort (d->download);
    box_http_request_resume (d->req);
    return;
  }
  /* a file of a known length (the agent says): Content-Length, so that
   * every client tells a cut transfer from a whole one (a connection
   * closed between two chunks reads as the end to some, libsoup's among
   * them); else chunked */
  length = box_file_download_get_length (d->download);
  if (length >= 0)
    soup_message_headers_set_content_length (headers, length);
  else
    soup_message_headers_set_encoding (headers, SOUP_ENCODING_CHUNKED);
  soup_message_body_set_accumulate (soup_server_message_get_response_body (msg), FALSE);
  if (d->list) {
    g_autoptr(GBytes) head = g_bytes_new_static ("{\"entries\":[", 12);

    download_append (d, head);
  }
  download_pump (d);
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
  d->held = TRUE;
  d->interrupt_id = g_signal_connect (d->req->engine, "sandbox-interrupted",
                                      G_CALLBACK (on_download_interrupted), d);
  if (d->service != NULL)
    box_engine_service_logs_async (d->req->engine, d->sandbox_id, d->service, d->tail, d->follow,
                                   NULL, download_opened, download_ref (d));
  else
    box_engine_fs_open_async (d->req->engine, d->sandbox_id, d->request, NULL, download_opened,
                              download_ref (d));
}

static Download *
download_new (BoxHttpRequest *req, const char *content_type)
{
  Download *d = g_new0 (Download, 1);

  d->ref_count = 1;   /* the stream's, until download_over() */
  d->req = box_http_request_pause (req);
  d->content_type = g_strdup (content_type);
  g_queue_init (&d->chunks);
  d->cancellable = g_cancellable_new ();
  return d;
}

void
box_http_files_download (BoxHttpRequest *req, const BoxFileRequest *request,
                         const char *content_type)
{
  Download *d = download_new (req, content_type);

  d->request = box_file_request_copy (request);
  d->list = request->op == BOX_FILE_OP_LIST;
  box_engine_hold_async (req->engine, box_http_request_project (req),
                         box_http_request_param (req, 0), NULL, download_held, download_ref (d));
}

void
box_http_files_download_logs (BoxHttpRequest *req, const char *name, gint tail, gboolean follow,
                              gboolean wake)
{
  Download *d = download_new (req, "text/plain");

  d->service = g_strdup (name);
  d->tail = tail;
  d->follow = follow;
  if (wake)
    box_engine_hold_async (req->engine, box_http_request_project (req),
                           box_http_request_param (req, 0), NULL, download_held, download_ref (d));
  else
    box_engine_hold_running_async (req->engine, box_http_request_project (req),
                                   box_http_request_param (req, 0), NULL, download_held,
                                   download_ref (d));
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
  BoxFileUpload    *upload;
  GByteArray       *piece;          /* body bytes not yet handed to the upload */
  GBytes           *writing;        /* the write on its way */
  gboolean          closing;        /* the upload is being closed */
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
  g_clear_object (&u->upload);
  g_clear_pointer (&u->writing, g_bytes_unref);
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
  /* before the outcome this abandons the write: nothing changes */
  if (u->upload != NULL)
    box_file_upload_abort (u->upload);
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

static void
upload_closed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(Upload) u = user_data;
  GError *error = NULL;

  if (!g_output_stream_close_finish (G_OUTPUT_STREAM (source), result, &error)) {
    upload_fail (u, error);
    return;
  }
  if (u->error == NULL && !u->done) {
    const BoxFileInfo *info = box_file_upload_get_info (u->upload);

    u->done = TRUE;
    u->info = info != NULL ? box_file_info_copy (info) : NULL;
  }
  upload_answer (u);
}

static void upload_written (GObject *source, GAsyncResult *result, gpointer user_data);

/* The next write (one at a time), or the close once the body is all in. */
static void
upload_next (Upload *u)
{
  gsize len;

  if (u->writing != NULL || u->closing || u->upload == NULL || u->error != NULL || u->over)
    return;
  if (u->piece->len == 0 || (u->piece->len < UPLOAD_PIECE && !u->got_body)) {
    if (u->got_body && u->piece->len == 0) {
      u->closing = TRUE;
      g_output_stream_close_async (G_OUTPUT_STREAM (u->upload), G_PRIORITY_DEFAULT, NULL,
                                   upload_closed, upload_ref (u));
    }
    return;
  }
  len = u->piece->len;
  u->writing = g_byte_array_free_to_bytes (g_steal_pointer (&u->piece));
  u->piece = g_byte_array_sized_new (UPLOAD_PIECE);
  g_output_stream_write_all_async (G_OUTPUT_STREAM (u->upload), g_bytes_get_data (u->writing, NULL),
                                   len, G_PRIORITY_DEFAULT, NULL, upload_written, upload_ref (u));
  upload_unpause (u);
}

static void
upload_written (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(Upload) u = user_data;
  GError *error = NULL;

  g_clear_pointer (&u->writing, g_bytes_unref);
  if (!g_output_stream_write_all_finish (G_OUTPUT_STREAM (source), result, NULL, &error)) {
    /* the agent's error, or the sandbox gone: the answer; the rest of
     * the body is read and dropped */
    upload_fail (u, error);
    upload_unpause (u);
    return;
  }
  upload_next (u);
  if (u->piece->len <= UPLOAD_LOW)
    upload_unpause (u);
}

static void
on_got_chunk (SoupServerMessage *msg, GBytes *chunk, gpointer user_data)
{
  Upload *u = user_data;
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (chunk, &len);

  if (u->error != NULL || u->upload == NULL)
    return;   /* dropped: the answer is an error */
  g_byte_array_append (u->piece, p, (guint) len);
  upload_next (u);
  if (u->piece->len >= UPLOAD_HIGH && !u->paused) {
    /* libsoup stops reading the socket until the write before is out */
    u->paused = TRUE;
    soup_server_message_pause (msg);
  }
}

static void
on_got_body (SoupServerMessage *msg, gpointer user_data)
{
  Upload *u = user_data;

  u->got_body = TRUE;
  upload_next (u);
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

  u->upload = box_engine_fs_upload_finish (BOX_ENGINE (source), result, &error);
  if (u->over || u->error != NULL) {
    g_clear_error (&error);
    if (u->upload != NULL)
      box_file_upload_abort (u->upload);
    return;
  }
  if (u->upload == NULL) {
    upload_fail (u, error);
    return;
  }
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
  if (u->upload != NULL)
    box_file_upload_abort (u->upload);
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
