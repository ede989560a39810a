/* box-http-exec.c: POST /v1/sandboxes/{sandbox}/exec/run.
 *
 * The answer, {"exit_code":N,"stdout":"<base64>","stderr":"<base64>",
 * "timed_out":B[,"truncated":true]}, is written as the client takes it,
 * not built whole: once the command ended only its raw output is kept (up
 * to BOX_EXEC_OUTPUT_LIMIT per stream), and the base64 is made PIECE_RAW
 * bytes of it at a time, appended as a chunk of the body while fewer than
 * BATCH_MAX encoded bytes wait to be written ("wrote-chunk" takes them
 * off; the body keeps nothing once written).  A stream's raw output is
 * freed once its last piece is encoded, so boxd never holds a second whole
 * copy: an answer holds at most its raw output plus BATCH_MAX + one piece,
 * whatever the reader does.  On the in-sandbox socket the writes wait for
 * the guest's credit on the connection's agent channel, so a guest that
 * never reads stops the answer after one channel window.  The body has a
 * Content-Length (the sizes are known), so a cut answer is never taken for
 * a whole one.
 *
 * What the answer holds (raw output not yet freed, encoded bytes not yet
 * written) is booked on the message's charge (box-http-charge.h) when it
 * has one: the in-sandbox socket's per-sandbox budget (box-insandbox.c).
 */
#include "config.h"

#include <string.h>

#include "box-http-charge.h"
#include "box-http-util.h"
#include "box-requests.h"

/* raw bytes encoded at a time: a multiple of 3, so that the pieces'
 * base64 joins into the whole's */
#define PIECE_RAW (48 * 1024)
/* no piece is encoded while this many encoded bytes wait to be written */
#define BATCH_MAX (128 * 1024)

G_STATIC_ASSERT (PIECE_RAW % 3 == 0);

typedef enum {
  PART_STDOUT,
  PART_MIDDLE,    /* ","stderr":" */
  PART_STDERR,
  PART_TAIL,      /* ","timed_out":...} */
  PART_DONE,
} Part;

typedef struct {
  gint            ref_count;
  BoxHttpRequest *req;
  BoxExecResult  *exec;
  BoxHttpCharge  *charge;    /* NULL: nobody counts */
  Part            part;
  gsize           off;       /* into the part's raw output */
  GQueue          chunks;    /* per chunk appended: its length */
  gsize           unwritten; /* appended, not yet written */
  gulong          msg_ids[3];
  gboolean        over;
} Answer;

static Answer *
answer_ref (Answer *a)
{
  a->ref_count++;
  return a;
}

static void
answer_unref (Answer *a)
{
  if (--a->ref_count > 0)
    return;
  g_clear_pointer (&a->charge, box_http_charge_unref);
  g_clear_pointer (&a->exec, box_exec_result_free);
  g_clear_pointer (&a->req, box_http_request_unref);
  g_queue_clear (&a->chunks);
  g_free (a);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Answer, answer_unref)

static gsize
base64_length (GBytes *bytes)
{
  gsize len = bytes != NULL ? g_bytes_get_size (bytes) : 0;

  return (len + 2) / 3 * 4;
}

static gsize
raw_length (GBytes *bytes)
{
  return bytes != NULL ? g_bytes_get_size (bytes) : 0;
}

/* What the answer holds: the raw output left, the encoded bytes unwritten. */
static void
answer_book (Answer *a)
{
  if (a->charge != NULL)
    box_http_charge_set (a->charge, raw_length (a->exec->stdout_data) +
                                    raw_length (a->exec->stderr_data) + a->unwritten);
}

static char *
answer_head (BoxExecResult *exec)
{
  return g_strdup_printf ("{\"exit_code\":%d,\"stdout\":\"", exec->exit_code);
}

static char *
answer_tail (BoxExecResult *exec)
{
  return g_strdup_printf ("\",\"timed_out\":%s%s}", exec->timed_out ? "true" : "false",
                          exec->truncated ? ",\"truncated\":true" : "");
}

#define MIDDLE "\",\"stderr\":\""

/* The answer is over (written, or the client left). */
static void
answer_over (Answer *a)
{
  g_autoptr(Answer) keep = answer_ref (a);

  if (a->over)
    return;
  a->over = TRUE;
  for (guint i = 0; i < G_N_ELEMENTS (a->msg_ids); i++)
    g_clear_signal_handler (&a->msg_ids[i], a->req->msg);
  g_clear_pointer (&a->exec->stdout_data, g_bytes_unref);
  g_clear_pointer (&a->exec->stderr_data, g_bytes_unref);
  a->unwritten = 0;
  answer_book (a);
  answer_unref (a);   /* the reference the message's signals held */
}

static void
answer_append (Answer *a, GBytes *bytes)
{
  gsize len = g_bytes_get_size (bytes);

  if (len == 0)
    return;
  soup_message_body_append_bytes (soup_server_message_get_response_body (a->req->msg), bytes);
  g_queue_push_tail (&a->chunks, GSIZE_TO_POINTER (len));
  a->unwritten += len;
}

static void
answer_append_text (Answer *a, char *text)
{
  g_autoptr(GBytes) bytes = g_bytes_new_take (text, strlen (text));

  answer_append (a, bytes);
}

/* The next piece of @slot's raw output as base64; the output is freed
 * (*slot NULL) with its last piece. */
static void
answer_encode (Answer *a, GBytes **slot)
{
  gsize len = raw_length (*slot);
  const guchar *data = *slot != NULL ? g_bytes_get_data (*slot, NULL) : NULL;
  gsize n = MIN (PIECE_RAW, len - MIN (a->off, len));

  if (n > 0) {
    char *text = g_base64_encode (data + a->off, n);

    a->off += n;
    answer_append_text (a, text);
  }
  if (a->off >= len) {
    g_clear_pointer (slot, g_bytes_unref);
    a->off = 0;
  }
}

/* Appends pieces while few enough wait to be written. */
static void
answer_pump (Answer *a)
{
  while (!a->over && a->part != PART_DONE && a->unwritten < BATCH_MAX) {
    switch (a->part) {
    case PART_STDOUT:
      answer_encode (a, &a->exec->stdout_data);
      if (a->exec->stdout_data == NULL)
        a->part = PART_MIDDLE;
      break;
    case PART_MIDDLE:
      answer_append_text (a, g_strdup (MIDDLE));
      a->part = PART_STDERR;
      break;
    case PART_STDERR:
      answer_encode (a, &a->exec->stderr_data);
      if (a->exec->stderr_data == NULL)
        a->part = PART_TAIL;
      break;
    case PART_TAIL:
      answer_append_text (a, answer_tail (a->exec));
      soup_message_body_complete (soup_server_message_get_response_body (a->req->msg));
      a->part = PART_DONE;
      break;
    case PART_DONE:
      break;
    }
  }
  answer_book (a);
  if (!a->over && !a->req->finished)
    soup_server_message_unpause (a->req->msg);
}

static void
on_wrote_chunk (SoupServerMessage *msg, gpointer user_data)
{
  Answer *a = user_data;

  a->unwritten -= GPOINTER_TO_SIZE (g_queue_pop_head (&a->chunks));
  answer_pump (a);
}

static void
on_msg_over (SoupServerMessage *msg, gpointer user_data)
{
  answer_over (user_data);
}

/* Starts writing @exec (taken) as the answer of @req (paused). */
static void
answer_start (BoxHttpRequest *req, BoxExecResult *exec)
{
  SoupServerMessage *msg = req->msg;
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (msg);
  BoxHttpCharge *charge = box_http_charge_of (msg);
  Answer *a = g_new0 (Answer, 1);
  g_autofree char *head = answer_head (exec);
  g_autofree char *tail = answer_tail (exec);

  a->ref_count = 1;   /* the message's signals' */
  a->req = box_http_request_ref (req);
  a->exec = exec;
  a->charge = charge != NULL ? box_http_charge_ref (charge) : NULL;
  g_queue_init (&a->chunks);
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_set_content_type (headers, "application/json", NULL);
  soup_message_headers_set_content_length (headers, strlen (head) + base64_length (exec->stdout_data) +
                                                    strlen (MIDDLE) + base64_length (exec->stderr_data) +
                                                    strlen (tail));
  soup_message_body_set_accumulate (soup_server_message_get_response_body (msg), FALSE);
  a->msg_ids[0] = g_signal_connect (msg, "wrote-chunk", G_CALLBACK (on_wrote_chunk), a);
  a->msg_ids[1] = g_signal_connect (msg, "finished", G_CALLBACK (on_msg_over), a);
  a->msg_ids[2] = g_signal_connect (msg, "disconnected", G_CALLBACK (on_msg_over), a);
  answer_append_text (a, g_steal_pointer (&head));
  answer_pump (a);
}

/* An answer that is not the output holds nothing: the reservation the
 * message may carry goes. */
static void
unreserve (BoxHttpRequest *req)
{
  BoxHttpCharge *charge = box_http_charge_of (req->msg);

  if (charge != NULL)
    box_http_charge_set (charge, 0);
}

static void
exec_run_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  BoxExecResult *exec = box_engine_exec_run_finish (BOX_ENGINE (source), result, &error);

  if (exec == NULL) {
    unreserve (req);
    box_http_reply_error (req->msg, error);
  } else if (req->finished) {
    unreserve (req);
    box_exec_result_free (exec);   /* nobody to answer */
  } else {
    answer_start (req, exec);
  }
  box_http_request_resume (req);
}

void
box_http_exec_run (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = box_http_request_body (req, FALSE, &error);
  BoxExecRequest *request;

  if (body == NULL) {
    unreserve (req);
    box_http_reply_error (req->msg, error);
    return;
  }
  request = box_exec_request_from_json (body, &error);
  if (request == NULL) {
    unreserve (req);
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_request_keep (req, request, (GDestroyNotify) box_exec_request_free);
  box_engine_exec_run_async (req->engine, box_http_request_project (req),
                             box_http_request_param (req, 0), request, NULL, exec_run_cb,
                             box_http_request_pause (req));
}
