/* insandbox-test.c: the in-sandbox socket's bounds (box-insandbox.c)
 * against a guest that holds connections: a request head that never
 * completes is broken after [boxd] http_header_timeout_s with no answer,
 * a sandbox holds at most BOX_INSANDBOX_MAX_CONNECTIONS connections, and
 * at most BOX_INSANDBOX_MAX_EXEC_RUNS exec/run calls at once.
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
} Conn;

static GHashTable *conns;   /* channel id -> Conn* */

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
        fake_agent_send (fake, BOX_AGENT_FRAME_EOF, 1, h.channel, NULL, 0);
        fake_agent_send (fake, BOX_AGENT_FRAME_CLOSE, 0, h.channel, NULL, 0);
      } else if (h.type == BOX_AGENT_FRAME_CLOSE)
        c->closed = TRUE;
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

/* exec/run answers are built whole: at most BOX_INSANDBOX_MAX_EXEC_RUNS at
 * once per sandbox, each counted until its connection ends; one more is
 * 409 conflict, other routes are served meanwhile. */
static void
test_max_exec_runs (void)
{
  const guint32 base = FIRST_CHAN + 1000;
  const guint32 extra = base + BOX_INSANDBOX_MAX_EXEC_RUNS;
  const guint32 self_chan = extra + 1, later = extra + 2;
  const char *stuck = "POST /exec/run HTTP/1.1\r\nHost: box\r\nContent-Type: application/json\r\n"
                      "Content-Length: 100\r\n\r\n{\"cmd\"";
  const char *whole = "POST /exec/run HTTP/1.1\r\nHost: box\r\nContent-Type: application/json\r\n"
                      "Content-Length: 17\r\n\r\n{\"cmd\": [\"true\"]}";
  g_autofree char *refused = NULL;
  g_autofree char *served = NULL;
  g_autofree char *again = NULL;

  set_header_timeout (HEAD_TIMEOUT_S);
  settle (200);
  /* bodies that never come: each holds its place */
  for (guint32 i = 0; i < BOX_INSANDBOX_MAX_EXEC_RUNS; i++) {
    open_conn (base + i);
    send_bytes (base + i, stuck);
  }
  settle (200);
  open_conn (extra);
  send_bytes (extra, whole);
  g_assert_true (pump (extra, has_answer, 10000));
  refused = status_line (conn_of (extra));
  g_assert_cmpstr (refused, ==, "HTTP/1.1 409 Conflict");
  g_assert_nonnull (strstr (conn_of (extra)->data->str, "too many exec/run calls"));
  open_conn (self_chan);
  send_bytes (self_chan, "GET /self HTTP/1.1\r\nHost: box\r\n\r\n");
  g_assert_true (pump (self_chan, has_answer, 10000));
  served = status_line (conn_of (self_chan));
  g_assert_cmpstr (served, ==, "HTTP/1.1 200 OK");

  /* one ends: its place comes back (past the head, the timeout is not
   * what ends them) */
  drop_conn (base);
  settle (200);
  for (guint32 i = 1; i < BOX_INSANDBOX_MAX_EXEC_RUNS; i++)
    g_assert_false (conn_of (base + i)->closed);
  open_conn (later);
  send_bytes (later, whole);
  g_assert_true (pump (later, has_answer, 10000));
  again = status_line (conn_of (later));
  g_test_message ("exec/run once a place is back: %s", again);
  g_assert_cmpstr (again, !=, "HTTP/1.1 409 Conflict");
  g_assert_cmpstr (again, !=, "HTTP/1.1 400 Bad Request");
  for (guint32 i = 1; i < BOX_INSANDBOX_MAX_EXEC_RUNS; i++)
    drop_conn (base + i);
  settle (200);
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
  setup ();
  ret = g_test_run ();
  teardown ();
  return ret;
}
