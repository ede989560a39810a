/* insandbox-test.c: the in-sandbox socket's bounds (box-insandbox.c)
 * against a guest that holds connections: a request head that never
 * completes is broken after [boxd] http_header_timeout_s with no answer,
 * a sandbox holds at most BOX_INSANDBOX_MAX_CONNECTIONS connections, and
 * at most BOX_INSANDBOX_MAX_EXEC_RUNS exec/run calls and
 * BOX_INSANDBOX_MAX_DOWNLOADS downloads at once; an exec/run answer is
 * streamed (a guest that does not read it holds its raw output in boxd and
 * no more), read slowly it is the spec's shape byte for byte, and a
 * sandbox's exec/run calls stay within BOX_INSANDBOX_EXEC_RUN_BYTES.
 *
 * A real BoxEngine (dummy hypervisor, the build tree's plugins) and
 * BoxHttpServer as in http-test; the connections come over agent-opened
 * channels of a BoxAgentClient whose other end is the scripted fake agent
 * of tests/agent-client (agent-test-util.c), exactly as BoxSandboxConnections
 * hands them over in boxd. */
#include "config.h"

#include <string.h>

#include "agent-test-util.h"
#include "box-agent-stream.h"
#include "box-error.h"
#include "box-insandbox.h"
#include "http-client.h"

#define ADMIN_TOKEN "insandbox-test-admin-token"
#define FIRST_CHAN  0x80000001u
#define HEAD_TIMEOUT_S 1
#define EXEC_RUN_REQUEST "POST /exec/run HTTP/1.1\r\nHost: box\r\nContent-Type: application/json\r\n" \
                         "Content-Length: 17\r\n\r\n{\"cmd\": [\"true\"]}"

static char *data_dir;
static BoxEngine *engine;
static BoxHttpServer *server;
static BoxInsandbox *insandbox;
static char *sandbox_id;
static FakeAgent *fake;
static BoxAgentClient *client;

/* ---- the fake agent's side ---------------------------------------------- */

typedef struct {
  GString *data;          /* what the host wrote to the connection */
  gboolean eof;           /* the host's EOF on stream 0 */
  gboolean closed;        /* the host's CLOSE */
  gsize    credit;        /* the host's CREDIT for it (an exec channel) */
} Conn;

static GHashTable *conns;   /* channel id -> Conn* */
static GQueue exec_opens = G_QUEUE_INIT;   /* JsonObject*: the host's "exec" opens */

static void
conn_free (Conn *c)
{
  g_string_free (c->data, TRUE);
  g_free (c);
}

static Conn *
conn_of (guint32 chan)
{
  Conn *c = g_hash_table_lookup (conns, GUINT_TO_POINTER (chan));

  if (c == NULL) {
    c = g_new0 (Conn, 1);
    c->data = g_string_new (NULL);
    g_hash_table_insert (conns, GUINT_TO_POINTER (chan), c);
  }
  return c;
}

/* Reads what the host sent until @ms passed or @done (of @chan) holds;
 * answers the host's EOF with the agent's CLOSE, as the agent does once
 * both directions ended. */
static gboolean
pump (guint32 chan, gboolean (*done) (Conn *c), guint ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) ms * 1000;

  while (TRUE) {
    BoxAgentFrameHeader h;
    g_autoptr(GBytes) p = NULL;

    while (box_agent_decoder_next (fake->decoder, &h, &p)) {
      Conn *c = conn_of (h.channel);

      if (h.type == BOX_AGENT_FRAME_DATA)
        g_string_append_len (c->data, g_bytes_get_data (p, NULL), (gssize) g_bytes_get_size (p));
      else if (h.type == BOX_AGENT_FRAME_EOF && !c->eof) {
        c->eof = TRUE;
        /* a connection (not an exec channel: its EOF is stdin's) */
        if (h.channel >= FIRST_CHAN) {
          fake_agent_send (fake, BOX_AGENT_FRAME_EOF, 1, h.channel, NULL, 0);
          fake_agent_send (fake, BOX_AGENT_FRAME_CLOSE, 0, h.channel, NULL, 0);
        }
      } else if (h.type == BOX_AGENT_FRAME_CLOSE) {
        c->closed = TRUE;
      } else if (h.type == BOX_AGENT_FRAME_CREDIT && g_bytes_get_size (p) == 4) {
        const guint8 *b = g_bytes_get_data (p, NULL);

        c->credit += (gsize) b[0] | ((gsize) b[1] << 8) | ((gsize) b[2] << 16) | ((gsize) b[3] << 24);
      } else if (h.type == BOX_AGENT_FRAME_CTRL && h.channel == 0) {
        JsonObject *req = box_agent_parse_ctrl (g_bytes_get_data (p, NULL), g_bytes_get_size (p), NULL);

        if (req != NULL && g_strcmp0 (box_agent_json_get_string (req, "op"), "exec") == 0)
          g_queue_push_tail (&exec_opens, req);
        else if (req != NULL)
          json_object_unref (req);
      }
      g_clear_pointer (&p, g_bytes_unref);
    }
    if (done (conn_of (chan)))
      return TRUE;
    if (g_get_monotonic_time () >= deadline)
      return FALSE;
    fake_agent_poll (fake);
  }
}

static gboolean
is_closed (Conn *c)
{
  return c->closed;
}

/* the whole answer: the host ends its side once it is written */
static gboolean
has_answer (Conn *c)
{
  return c->eof;
}

static void
open_conn (guint32 chan)
{
  g_autofree char *json = g_strdup_printf ("{\"event\":\"accept\",\"chan\":%u,\"peer_pid\":7,"
                                           "\"peer_uid\":0,\"peer_gid\":0}", chan);

  fake_agent_send_json (fake, 0, json);
}

static void
send_bytes (guint32 chan, const char *text)
{
  fake_agent_send (fake, BOX_AGENT_FRAME_DATA, 1, chan, text, strlen (text));
}

/* the agent ends the connection (its client went away): the host forgets
 * the channel without an answer */
static void
drop_conn (guint32 chan)
{
  fake_agent_send (fake, BOX_AGENT_FRAME_CLOSE, 0, chan, NULL, 0);
}

static gboolean
never (Conn *c)
{
  return FALSE;
}

/* lets the host side run for @ms, reading what it sends */
static void
settle (guint ms)
{
  pump (0, never, ms);
}

static void
on_channel_opened (BoxAgentClient *agent, BoxAgentChannel *channel, JsonObject *event,
                   gpointer user_data)
{
  g_autoptr(BoxAgentStream) stream = box_agent_stream_new (channel);
  g_autoptr(GError) error = NULL;

  /* what box-insandbox.c's on_connection does */
  if (!box_insandbox_accept (insandbox, sandbox_id, G_IO_STREAM (stream), &error)) {
    g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
    box_agent_stream_abort (stream);
  }
}

static void
set_header_timeout (guint seconds)
{
  box_engine_get_config (engine)->http_header_timeout_s = seconds;
}

/* ---- tests --------------------------------------------------------------- */

/* A head that stops halfway is broken after the timeout with nothing
 * answered; a complete one on the same sandbox is served meanwhile. */
static void
test_head_timeout (void)
{
  const guint32 slow = FIRST_CHAN, good = FIRST_CHAN + 1, silent = FIRST_CHAN + 2;
  gint64 start = g_get_monotonic_time ();
  gint64 elapsed;
  Conn *c;

  set_header_timeout (HEAD_TIMEOUT_S);
  open_conn (slow);
  send_bytes (slow, "GET /self HTTP/1.1\r\nHost: box\r\nX-Slow: ");
  open_conn (silent);
  open_conn (good);
  send_bytes (good, "GET /self HTTP/1.1\r\nHost: box\r\n\r\n");
  g_assert_true (pump (good, has_answer, 10000));
  c = conn_of (good);
  g_assert_true (g_str_has_prefix (c->data->str, "HTTP/1.1 200"));
  g_assert_nonnull (strstr (c->data->str, sandbox_id));

  /* a byte now and then does not make the head complete */
  g_assert_false (pump (slow, is_closed, 400));
  send_bytes (slow, "a");
  g_assert_false (pump (slow, is_closed, 300));
  g_assert_true (pump (slow, is_closed, 5000));
  elapsed = g_get_monotonic_time () - start;
  g_assert_cmpint (elapsed, >=, HEAD_TIMEOUT_S * G_USEC_PER_SEC - 100000);
  g_assert_cmpint (elapsed, <, (HEAD_TIMEOUT_S + 4) * G_USEC_PER_SEC);
  g_assert_cmpuint (conn_of (slow)->data->len, ==, 0);
  /* a connection that sends nothing at all too */
  g_assert_true (pump (silent, is_closed, 5000));
  g_assert_cmpuint (conn_of (silent)->data->len, ==, 0);
  drop_conn (slow);
  drop_conn (silent);
  settle (200);
}

/* 0 turns the bound off: a half head is still open after the timeout. */
static void
test_head_timeout_off (void)
{
  const guint32 chan = FIRST_CHAN + 10;

  set_header_timeout (0);
  open_conn (chan);
  send_bytes (chan, "GET /self HTTP/1.1\r\n");
  g_assert_false (pump (chan, is_closed, (HEAD_TIMEOUT_S + 1) * 1000));
  drop_conn (chan);
  settle (200);
}

/* One connection more than the bound is broken at once, unanswered; when
 * one of them ends its place is given back. */
static void
test_max_connections (void)
{
  const guint32 base = FIRST_CHAN + 100;
  const guint32 extra = base + BOX_INSANDBOX_MAX_CONNECTIONS;
  const guint32 later = extra + 1;
  Conn *c;

  set_header_timeout (0);
  settle (200);
  for (guint32 i = 0; i < BOX_INSANDBOX_MAX_CONNECTIONS; i++)
    open_conn (base + i);
  open_conn (extra);
  send_bytes (extra, "GET /self HTTP/1.1\r\nHost: box\r\n\r\n");
  g_assert_true (pump (extra, is_closed, 10000));
  g_assert_cmpuint (conn_of (extra)->data->len, ==, 0);
  /* the ones held were not touched */
  for (guint32 i = 0; i < BOX_INSANDBOX_MAX_CONNECTIONS; i++)
    g_assert_false (conn_of (base + i)->closed);

  /* still full */
  open_conn (extra + 2);
  g_assert_true (pump (extra + 2, is_closed, 10000));
  drop_conn (base);
  settle (200);
  open_conn (later);
  send_bytes (later, "GET /self HTTP/1.1\r\nHost: box\r\n\r\n");
  g_assert_true (pump (later, has_answer, 10000));
  c = conn_of (later);
  g_assert_true (g_str_has_prefix (c->data->str, "HTTP/1.1 200"));

  for (guint32 i = 1; i < BOX_INSANDBOX_MAX_CONNECTIONS; i++)
    drop_conn (base + i);
  settle (200);
}

static char *
status_line (Conn *c)
{
  const char *end = strstr (c->data->str, "\r\n");

  return end != NULL ? g_strndup (c->data->str, (gsize) (end - c->data->str)) : g_strdup (c->data->str);
}

/* The places of one kind of call: @max connections whose requests never
 * end (@held, or @held and @held_odd by turns) hold them all, each from
 * its head on; one more, @whole, is 409 conflict with @refusal, and other
 * routes are served meanwhile.  When one ends, its place comes back (past
 * the head, the timeout is not what ends the others) and @whole is served,
 * not refused. */
static void
check_places (guint32 base, guint max, const char *held, const char *held_odd,
              const char *whole, const char *refusal)
{
  const guint32 extra = base + max;
  const guint32 self_chan = extra + 1, later = extra + 2;
  g_autofree char *refused = NULL;
  g_autofree char *served = NULL;
  g_autofree char *again = NULL;

  set_header_timeout (HEAD_TIMEOUT_S);
  settle (200);
  for (guint32 i = 0; i < max; i++) {
    open_conn (base + i);
    send_bytes (base + i, i % 2 == 1 && held_odd != NULL ? held_odd : held);
  }
  settle (300);
  open_conn (extra);
  send_bytes (extra, whole);
  g_assert_true (pump (extra, has_answer, 10000));
  refused = status_line (conn_of (extra));
  g_assert_cmpstr (refused, ==, "HTTP/1.1 409 Conflict");
  g_assert_nonnull (strstr (conn_of (extra)->data->str, refusal));
  open_conn (self_chan);
  send_bytes (self_chan, "GET /self HTTP/1.1\r\nHost: box\r\n\r\n");
  g_assert_true (pump (self_chan, has_answer, 10000));
  served = status_line (conn_of (self_chan));
  g_assert_cmpstr (served, ==, "HTTP/1.1 200 OK");

  drop_conn (base);
  settle (200);
  for (guint32 i = 1; i < max; i++)
    g_assert_false (conn_of (base + i)->closed);
  open_conn (later);
  send_bytes (later, whole);
  g_assert_true (pump (later, has_answer, 10000));
  again = status_line (conn_of (later));
  g_test_message ("%s once a place is back: %s", whole, again);
  g_assert_true (g_str_has_prefix (again, "HTTP/1.1 "));
  g_assert_cmpstr (again, !=, "HTTP/1.1 409 Conflict");
  g_assert_cmpstr (again, !=, "HTTP/1.1 400 Bad Request");
  for (guint32 i = 1; i < max; i++)
    drop_conn (base + i);
  settle (200);
}

/* exec/run answers are built whole: at most BOX_INSANDBOX_MAX_EXEC_RUNS at
 * once per sandbox, each counted until its connection ends (here bodies
 * that never come). */
static void
test_max_exec_runs (void)
{
  check_places (FIRST_CHAN + 1000, BOX_INSANDBOX_MAX_EXEC_RUNS,
                "POST /exec/run HTTP/1.1\r\nHost: box\r\nContent-Type: application/json\r\n"
                "Content-Length: 100\r\n\r\n{\"cmd\"", NULL,
                EXEC_RUN_REQUEST, "too many exec/run calls");
}

/* A download holds its buffers in boxd until the guest reads it: at most
 * BOX_INSANDBOX_MAX_DOWNLOADS at once per sandbox, GET fs/file and fs/tar
 * together (here requests with a body announced, never sent); once a
 * place is back the next one is served (501: the dummy hypervisor runs no
 * agent). */
static void
test_max_downloads (void)
{
  check_places (FIRST_CHAN + 2000, BOX_INSANDBOX_MAX_DOWNLOADS,
                "GET /fs/file?path=/big HTTP/1.1\r\nHost: box\r\nContent-Length: 10\r\n\r\n",
                "GET /fs/tar?path=/srv HTTP/1.1\r\nHost: box\r\nContent-Length: 10\r\n\r\n",
                "GET /fs/tar?path=/srv HTTP/1.1\r\nHost: box\r\n\r\n", "too many downloads");
}

/* ---- exec/run answers ----------------------------------------------------- */

/* what an answer may hold besides its raw output: the base64 made and not
 * yet written (box-http-exec.c: BATCH_MAX + one piece) */
#define ENCODED_SLACK (256u << 10)

static gboolean
has_exec_open (Conn *c)
{
  return !g_queue_is_empty (&exec_opens);
}

static gsize grow_from;   /* grew(): more than this, or the end */

static gboolean
grew (Conn *c)
{
  return c->eof || c->data->len > grow_from;
}

/* Output nobody would guess: every byte value, no run repeating. */
static GBytes *
output_of (gsize len, guint seed)
{
  guint8 *p = g_malloc (len);

  for (gsize i = 0; i < len; i++)
    p[i] = (guint8) (i * 131 + i / 251 + seed);
  return g_bytes_new_take (p, len);
}

static void
send_within_credit (guint32 chan, guint8 stream, GBytes *bytes)
{
  gsize len = 0, off = 0;
  const guint8 *p = g_bytes_get_data (bytes, &len);
  gsize credit = 1u << 20;   /* the host's window (fake_agent_reply_hello) */
  gsize seen = 0;

  while (off < len) {
    gsize n = MIN (MIN (len - off, (gsize) BOX_AGENT_DATA_CHUNK), credit);

    if (n == 0) {
      Conn *c = conn_of (chan);

      settle (5);
      credit += c->credit - seen;
      seen = c->credit;
      continue;
    }
    fake_agent_send (fake, BOX_AGENT_FRAME_DATA, stream, chan, p + off, n);
    off += n;
    credit -= n;
  }
}

/* The agent's side of the next exec: stdout @out, stderr @err, the exit
 * event (with both streams cut at the limit, as the agent says). */
static void
serve_exec (GBytes *out, GBytes *err, int code)
{
  g_autoptr(JsonObject) open = NULL;
  g_autofree char *reply = NULL;
  g_autofree char *exit_event = NULL;
  gint64 id = 0, chan = 0;

  g_assert_true (pump (0, has_exec_open, 10000));
  open = g_queue_pop_head (&exec_opens);
  g_assert_true (box_agent_json_get_int (open, "id", &id));
  g_assert_true (box_agent_json_get_int (open, "chan", &chan));
  reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true}", id);
  fake_agent_send_json (fake, 0, reply);
  send_within_credit ((guint32) chan, 1, out);
  send_within_credit ((guint32) chan, 2, err);
  exit_event = g_strdup_printf ("{\"event\":\"exit\",\"code\":%d,\"timed_out\":false,"
                                "\"stdout_truncated\":true}", code);
  fake_agent_send_json (fake, (guint32) chan, exit_event);
  fake_agent_send (fake, BOX_AGENT_FRAME_EOF, 1, (guint32) chan, NULL, 0);
  fake_agent_send (fake, BOX_AGENT_FRAME_EOF, 2, (guint32) chan, NULL, 0);
  fake_agent_send (fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
}

/* The dummy hypervisor hands out @agent as the sandbox's (NULL: none, and
 * it says it runs no agent again: its default capabilities). */
static void
set_agent (BoxAgentClient *agent)
{
  BoxHypervisor *hv = box_engine_get_hypervisor (engine);
  gboolean ok = FALSE;

  g_signal_emit_by_name (hv, "set-capabilities", agent != NULL ? "memory-snapshots,checkpoints,fork,guest-agent" : "memory-snapshots,checkpoints,fork", "none", &ok);
  g_assert_true (ok);
  g_signal_emit_by_name (hv, "set-agent", sandbox_id, agent, &ok);
  g_assert_true (ok);
}

static void
give_credit (guint32 chan, guint32 n)
{
  g_autoptr(GBytes) frame = box_agent_frame_build_credit (chan, 0, n);

  fake_agent_write (fake, g_bytes_get_data (frame, NULL), g_bytes_get_size (frame));
}

/* The answer's body, once the whole answer is in @c. */
static const char *
body_of (Conn *c, gsize *len)
{
  const char *end = strstr (c->data->str, "\r\n\r\n");
  const char *cl = strstr (c->data->str, "Content-Length: ");

  g_assert_nonnull (end);
  g_assert_true (cl != NULL && cl < end);
  *len = c->data->len - (gsize) (end + 4 - c->data->str);
  g_assert_cmpuint (g_ascii_strtoull (cl + 16, NULL, 10), ==, *len);
  return end + 4;
}

/* A guest that asks for 2 x 16 MiB of output and never reads: boxd holds
 * the raw output and at most ENCODED_SLACK more, and writes no more than
 * the connection's window.  Read slowly, the answer is the spec's shape
 * byte for byte (base64, "truncated"), and each stream's output is let go
 * once it is sent. */
static void
test_exec_run_streamed (void)
{
  const guint32 chan = FIRST_CHAN + 3000;
  g_autoptr(GBytes) out = output_of (BOX_EXEC_OUTPUT_LIMIT, 1);
  g_autoptr(GBytes) err = output_of (BOX_EXEC_OUTPUT_LIMIT - 1, 7);
  g_autofree char *out64 = g_base64_encode (g_bytes_get_data (out, NULL), g_bytes_get_size (out));
  g_autofree char *err64 = g_base64_encode (g_bytes_get_data (err, NULL), g_bytes_get_size (err));
  g_autofree char *expected = g_strdup_printf ("{\"exit_code\":3,\"stdout\":\"%s\",\"stderr\":\"%s\","
                                               "\"timed_out\":false,\"truncated\":true}", out64, err64);
  const gsize raw = g_bytes_get_size (out) + g_bytes_get_size (err);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *status = NULL;
  gsize held, written, len = 0;
  gboolean stdout_let_go = FALSE;
  const char *body;
  Conn *c;

  set_header_timeout (0);
  set_agent (client);
  open_conn (chan);
  send_bytes (chan, EXEC_RUN_REQUEST);
  g_assert_true (pump (0, has_exec_open, 10000));
  /* reserved at its most while the command runs */
  g_assert_cmpuint (box_insandbox_get_answer_bytes (insandbox, sandbox_id), ==,
                    BOX_INSANDBOX_EXEC_RUN_RESERVE);
  serve_exec (out, err, 3);

  /* never read: the connection's window, no more, and the raw output */
  settle (1000);
  c = conn_of (chan);
  written = c->data->len;
  held = box_insandbox_get_answer_bytes (insandbox, sandbox_id);
  g_test_message ("unread: %" G_GSIZE_FORMAT " bytes written, %" G_GSIZE_FORMAT " held", written, held);
  g_assert_cmpuint (written, >, 0);
  g_assert_cmpuint (written, <=, BOX_AGENT_DEFAULT_WINDOW);
  g_assert_false (c->eof);
  g_assert_cmpuint (held, >=, raw);
  g_assert_cmpuint (held, <=, raw + ENCODED_SLACK);

  /* read slowly: a window at a time */
  while (!c->eof) {
    grow_from = c->data->len;
    give_credit (chan, 256u << 10);
    g_assert_true (pump (chan, grew, 10000));
    held = box_insandbox_get_answer_bytes (insandbox, sandbox_id);
    /* once past stdout, its raw output is gone */
    if (c->data->len > strlen (out64) + 64 + 4096) {
      g_assert_cmpuint (held, <=, g_bytes_get_size (err) + ENCODED_SLACK);
      stdout_let_go = TRUE;
    }
  }
  g_assert_true (stdout_let_go);
  g_assert_cmpuint (box_insandbox_get_answer_bytes (insandbox, sandbox_id), ==, 0);
  status = status_line (c);
  g_assert_cmpstr (status, ==, "HTTP/1.1 200 OK");
  g_assert_nonnull (strstr (c->data->str, "Content-Type: application/json"));
  body = body_of (c, &len);
  g_assert_cmpuint (len, ==, strlen (expected));
  g_assert_true (memcmp (body, expected, len) == 0);
  g_assert_true (json_parser_load_from_data (parser, body, (gssize) len, NULL));

  drop_conn (chan);
  set_agent (NULL);
  settle (200);
}

/* Two calls at their most fill a sandbox's exec/run budget: a third is
 * 409 until one's answer is read. */
static void
test_exec_run_budget (void)
{
  const guint32 first = FIRST_CHAN + 4000, second = first + 1, third = first + 2, later = first + 3;
  g_autoptr(GBytes) out = output_of (BOX_EXEC_OUTPUT_LIMIT, 3);
  g_autoptr(GBytes) empty = g_bytes_new_static ("", 0);
  g_autofree char *refused = NULL;
  g_autofree char *again = NULL;
  Conn *c;

  G_STATIC_ASSERT (BOX_INSANDBOX_EXEC_RUN_BYTES >= 2 * BOX_INSANDBOX_EXEC_RUN_RESERVE);
  G_STATIC_ASSERT (BOX_INSANDBOX_EXEC_RUN_BYTES < 3 * BOX_INSANDBOX_EXEC_RUN_RESERVE);
  set_header_timeout (0);
  set_agent (client);
  open_conn (first);
  send_bytes (first, EXEC_RUN_REQUEST);
  serve_exec (out, empty, 0);
  open_conn (second);
  send_bytes (second, EXEC_RUN_REQUEST);
  g_assert_true (pump (0, has_exec_open, 10000));
  /* the first's answer unread (16 MiB), the second running (reserved) */
  settle (300);
  g_assert_cmpuint (box_insandbox_get_answer_bytes (insandbox, sandbox_id), >=,
                    BOX_INSANDBOX_EXEC_RUN_RESERVE + BOX_EXEC_OUTPUT_LIMIT);
  open_conn (third);
  send_bytes (third, EXEC_RUN_REQUEST);
  g_assert_true (pump (third, has_answer, 10000));
  refused = status_line (conn_of (third));
  g_assert_cmpstr (refused, ==, "HTTP/1.1 409 Conflict");
  g_assert_nonnull (strstr (conn_of (third)->data->str, "too many exec/run answers held"));
  g_assert_cmpuint (g_queue_get_length (&exec_opens), ==, 1);   /* the second's; the third ran nothing */
  serve_exec (empty, empty, 0);

  /* the first is read to its end: its bytes come back */
  c = conn_of (first);
  while (!c->eof) {
    grow_from = c->data->len;
    give_credit (first, 1u << 20);
    g_assert_true (pump (first, grew, 10000));
  }
  settle (200);
  open_conn (later);
  send_bytes (later, EXEC_RUN_REQUEST);
  serve_exec (empty, empty, 0);
  g_assert_true (pump (later, has_answer, 10000));
  again = status_line (conn_of (later));
  g_assert_cmpstr (again, ==, "HTTP/1.1 200 OK");
  g_assert_nonnull (strstr (conn_of (later)->data->str, "{\"exit_code\":0,\"stdout\":\"\",\"stderr\":\"\","
                                                        "\"timed_out\":false,\"truncated\":true}"));
  for (guint32 i = first; i <= later; i++)
    drop_conn (i);
  set_agent (NULL);
  settle (200);
  g_assert_cmpuint (box_insandbox_get_answer_bytes (insandbox, sandbox_id), ==, 0);
}

/* ---- set-up -------------------------------------------------------------- */

static void
setup (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GIOStream) stream = NULL;
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) hello = NULL;

  http_test_start (ADMIN_TOKEN, &data_dir, &engine, &server);
  http_client_init (server);

  {
    g_autoptr(Reply) project = call ("POST", "/v1/projects", ADMIN_TOKEN, "{\"name\": \"p\"}");
    g_autoptr(Reply) key = call ("POST", "/v1/projects/p/keys", ADMIN_TOKEN, "{\"name\": \"k\"}");
    g_autoptr(Reply) created = NULL;

    g_assert_cmpuint (project->status, ==, 201);
    g_assert_cmpuint (key->status, ==, 201);
    created = call ("POST", "/v1/sandboxes",
                    json_object_get_string_member (reply_object (key), "secret"), "{\"name\": \"in\"}");
    g_assert_cmpuint (created->status, ==, 201);
    sandbox_id = g_strdup (json_object_get_string_member (reply_object (created), "id"));
  }

  insandbox = box_insandbox_new (engine, server);
  conns = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) conn_free);
  fake = fake_agent_new (&stream);
  client = box_agent_client_new (stream);
  g_signal_connect (client, "channel-opened", G_CALLBACK (on_channel_opened), NULL);
  box_agent_client_connect_async (client, NULL, agent_test_store_result, &res);
  hello = fake_agent_read_request (fake);
  fake_agent_reply_hello (fake, hello);
  agent_test_wait_result (&res);
  g_assert_true (box_agent_client_connect_finish (client, res, &error));
  g_assert_no_error (error);
}

static void
teardown (void)
{
  g_signal_handlers_disconnect_by_data (client, NULL);
  box_agent_client_close (client);
  g_clear_object (&client);
  g_clear_pointer (&fake, fake_agent_free);
  g_clear_pointer (&conns, g_hash_table_unref);
  box_insandbox_shutdown (insandbox);
  g_clear_object (&insandbox);
  http_client_init (NULL);
  http_test_stop (&data_dir, &engine, &server);
  g_clear_pointer (&sandbox_id, g_free);
}

int
main (int argc, char **argv)
{
  int ret;

  g_test_init (&argc, &argv, NULL);
  agent_test_init ();
  g_test_add_func ("/insandbox/head-timeout", test_head_timeout);
  g_test_add_func ("/insandbox/head-timeout-off", test_head_timeout_off);
  g_test_add_func ("/insandbox/max-connections", test_max_connections);
  g_test_add_func ("/insandbox/max-exec-runs", test_max_exec_runs);
  g_test_add_func ("/insandbox/max-downloads", test_max_downloads);
  g_test_add_func ("/insandbox/exec-run-streamed", test_exec_run_streamed);
  g_test_add_func ("/insandbox/exec-run-budget", test_exec_run_budget);
  setup ();
  ret = g_test_run ();
  teardown ();
  return ret;
}
