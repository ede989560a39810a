/* agent-channel-test.c: streaming channels against the real agent: flow
 * control both ways with bounded buffers, and a fast producer next to an
 * interactive channel. */
#include "config.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <gio/gunixsocketaddress.h>

#include "agent-test-util.h"
#include "box-error.h"

#define MiB (1024 * 1024)

typedef struct {
  BoxAgentClient *client;
  BoxAgentChannel *channel;
  GChecksum *checksum;
  GString *text;                /* kept output, for the interactive channel */
  gsize got;                    /* bytes received */
  gsize pending;                /* received, not consumed yet */
  gboolean drain;               /* consume at once */
  gsize max_buffered;
  gsize max_queued;
  gboolean eof;
  gboolean closed;
  gint64 exit_code;
} Stream;

static void
stream_on_data (BoxAgentChannel *channel, guint stream, GBytes *bytes, gpointer data)
{
  Stream *s = data;
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (bytes, &len);

  if (stream == 2) {
    g_test_message ("stderr: %.*s", (int) len, (const char *) p);
    box_agent_channel_consumed (channel, len);
    return;
  }
  g_assert_cmpuint (stream, ==, 1);
  if (s->checksum != NULL)
    g_checksum_update (s->checksum, p, (gssize) len);
  if (s->text != NULL)
    g_string_append_len (s->text, (const char *) p, (gssize) len);
  s->got += len;
  s->pending += len;
  s->max_buffered = MAX (s->max_buffered, box_agent_channel_get_buffered (channel));
  s->max_queued = MAX (s->max_queued, box_agent_client_get_queued_bytes (s->client));
  if (s->drain) {
    box_agent_channel_consumed (channel, s->pending);
    s->pending = 0;
  }
}

static void
stream_on_eof (BoxAgentChannel *channel, guint stream, gpointer data)
{
  Stream *s = data;

  if (stream == 1)
    s->eof = TRUE;
}

static void
stream_on_ctrl (BoxAgentChannel *channel, JsonObject *msg, gpointer data)
{
  Stream *s = data;

  if (g_strcmp0 (box_agent_json_get_string (msg, "event"), "exit") == 0)
    g_assert_true (box_agent_json_get_int (msg, "code", &s->exit_code));
}

static void
stream_on_closed (BoxAgentChannel *channel, gpointer data)
{
  Stream *s = data;

  s->closed = TRUE;
}

static void
stream_open (Agent *f, Stream *s, const char *shell_command)
{
  g_autoptr(JsonObject) args = json_object_new ();
  JsonArray *argv = json_array_new ();
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GError) error = NULL;
  gint64 pid = 0;

  json_array_add_string_element (argv, "sh");
  json_array_add_string_element (argv, "-c");
  json_array_add_string_element (argv, shell_command);
  json_object_set_array_member (args, "argv", argv);
  json_object_set_string_member (args, "user", "root");
  box_agent_client_open_channel_async (f->client, "exec", args, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  s->client = f->client;
  s->exit_code = -1;
  s->channel = box_agent_client_open_channel_finish (f->client, res, &error);
  g_assert_no_error (error);
  g_assert_true (box_agent_json_get_int (box_agent_channel_get_reply (s->channel), "pid", &pid));
  g_assert_cmpint (pid, >, 0);
  g_signal_connect (s->channel, "data", G_CALLBACK (stream_on_data), s);
  g_signal_connect (s->channel, "eof", G_CALLBACK (stream_on_eof), s);
  g_signal_connect (s->channel, "ctrl", G_CALLBACK (stream_on_ctrl), s);
  g_signal_connect (s->channel, "closed", G_CALLBACK (stream_on_closed), s);
}

static void
stream_clear (Stream *s)
{
  if (s->channel != NULL)
    g_signal_handlers_disconnect_by_data (s->channel, s);
  g_clear_object (&s->channel);
  g_clear_pointer (&s->checksum, g_checksum_free);
  if (s->text != NULL)
    g_string_free (s->text, TRUE);
  s->text = NULL;
}

/* ---- 64 MiB through cat, with a slow consumer ------------------------------------ */

typedef struct {
  Stream *s;
  GChecksum *sent;
  guint8 *chunk;
  guint n_written;
  guint n_chunks;
  gboolean write_done;
} Writer;

static void write_next (Writer *w);

static void
written (GObject *source, GAsyncResult *result, gpointer data)
{
  Writer *w = data;
  g_autoptr(GError) error = NULL;

  g_assert_true (box_agent_channel_write_finish (BOX_AGENT_CHANNEL (source), result, &error));
  g_assert_no_error (error);
  w->s->max_queued = MAX (w->s->max_queued, box_agent_client_get_queued_bytes (w->s->client));
  write_next (w);
}

static void
write_next (Writer *w)
{
  g_autoptr(GBytes) bytes = NULL;

  if (w->n_written == w->n_chunks) {
    box_agent_channel_send_eof (w->s->channel, 0);
    w->write_done = TRUE;
    return;
  }
  /* each chunk differs, so that order matters to the checksum */
  w->chunk[0] = (guint8) w->n_written;
  w->chunk[MiB - 1] = (guint8) (w->n_written * 3);
  g_checksum_update (w->sent, w->chunk, MiB);
  bytes = g_bytes_new (w->chunk, MiB);
  w->n_written++;
  box_agent_channel_write_async (w->s->channel, 0, bytes, NULL, written, w);
}

static gboolean
consume_some (gpointer data)
{
  Stream *s = data;
  gsize n = MIN (s->pending, 64 * 1024);

  if (s->channel != NULL && n > 0) {
    s->pending -= n;
    box_agent_channel_consumed (s->channel, n);
  }
  return G_SOURCE_CONTINUE;
}

static void
test_flow (Agent *f, gconstpointer data)
{
  Stream s = { 0 };
  Writer w = { .s = &s, .n_chunks = 64 };
  guint consumer;

  if (!agent_need_root () || !agent_connect (f))
    return;
  stream_open (f, &s, "exec cat");
  s.checksum = g_checksum_new (G_CHECKSUM_SHA256);
  w.sent = g_checksum_new (G_CHECKSUM_SHA256);
  w.chunk = g_malloc (MiB);
  for (gsize i = 0; i < MiB; i++)
    w.chunk[i] = (guint8) (i * 7 + (i >> 11));
  /* the consumer takes at most 64 KiB a millisecond: slower than cat */
  consumer = g_timeout_add (1, consume_some, &s);
  write_next (&w);
  AGENT_TEST_WAIT_FOR (s.closed);
  g_source_remove (consumer);

  g_assert_true (w.write_done);
  g_assert_true (s.eof);
  g_assert_cmpint (s.exit_code, ==, 0);
  g_assert_cmpuint (s.got, ==, (gsize) 64 * MiB);
  g_assert_cmpstr (g_checksum_get_string (s.checksum), ==, g_checksum_get_string (w.sent));
  /* the agent kept to the credit; the output queue stayed within the
   * windows of the channel (plus frame headers and one coalesced write) */
  g_assert_cmpuint (s.max_buffered, <=, BOX_AGENT_DEFAULT_WINDOW);
  g_assert_cmpuint (s.max_queued, <=, 2 * BOX_AGENT_DEFAULT_WINDOW);
  g_test_message ("max buffered %" G_GSIZE_FORMAT ", max queued %" G_GSIZE_FORMAT,
                  s.max_buffered, s.max_queued);
  g_checksum_free (w.sent);
  g_free (w.chunk);
  stream_clear (&s);
}

/* ---- a fast producer next to an interactive channel ------------------------------ */

static gint64
round_trip (Agent *f, Stream *cat, guint n)
{
  g_autofree char *line = g_strdup_printf ("line %u\n", n);
  g_autoptr(GBytes) bytes = g_bytes_new (line, strlen (line));
  gint64 start = g_get_monotonic_time ();

  g_string_truncate (cat->text, 0);
  box_agent_channel_write_async (cat->channel, 0, bytes, NULL, NULL, NULL);
  while (strstr (cat->text->str, line) == NULL) {
    g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
    g_main_context_iteration (NULL, TRUE);
  }
  return g_get_monotonic_time () - start;
}

static void
test_concurrent (Agent *f, gconstpointer data)
{
  Stream fast = { 0 }, cat = { 0 };
  gint64 worst = 0;
  gsize before;
  guint i;

  if (!agent_need_root () || !agent_connect (f))
    return;
  /* 200M is gone in a fraction of a second here: 2000M outlasts the test */
  stream_open (f, &fast, "yes | head -c 2000M");
  stream_open (f, &cat, "exec cat");
  cat.text = g_string_new (NULL);
  cat.drain = TRUE;

  /* the producer's consumer does not drain: the agent stops at one window */
  for (i = 0; i < 10; i++)
    worst = MAX (worst, round_trip (f, &cat, i));
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) ping = agent_call (f, "ping", NULL, &error);
    gint64 channels = 0;

    /* channel 0 answers too, with both channels open */
    g_assert_no_error (error);
    g_assert_true (box_agent_json_get_int (ping, "channels", &channels));
    g_assert_cmpint (channels, ==, 2);
  }
  g_assert_cmpuint (fast.got, <=, BOX_AGENT_DEFAULT_WINDOW);
  g_assert_cmpuint (fast.max_buffered, <=, BOX_AGENT_DEFAULT_WINDOW);

  /* now it drains as fast as it can: the interactive channel still answers */
  fast.drain = TRUE;
  box_agent_channel_consumed (fast.channel, fast.pending);
  fast.pending = 0;
  before = fast.got;
  {
    gint64 t0 = g_get_monotonic_time ();

    AGENT_TEST_WAIT_FOR (fast.got > before);
    g_test_message ("the producer resumed after %" G_GINT64_FORMAT " us", g_get_monotonic_time () - t0);
  }
  for (i = 10; i < 40; i++) {
    worst = MAX (worst, round_trip (f, &cat, i));
    /* the producer runs in between */
    agent_test_spin (10);
  }
  g_assert_false (fast.closed);
  g_assert_cmpuint (fast.got - before, >, 4 * BOX_AGENT_DEFAULT_WINDOW);
  g_test_message ("worst round trip %" G_GINT64_FORMAT " us; producer moved %" G_GSIZE_FORMAT " bytes",
                  worst, fast.got - before);
  g_assert_cmpint (worst, <, 2 * G_USEC_PER_SEC);

  /* closing both: the agent answers CLOSE (SIGHUP to the processes) */
  box_agent_channel_close (fast.channel);
  box_agent_channel_close (cat.channel);
  g_assert_true (agent_test_wait_flag (&fast.closed, 10000));
  g_assert_true (agent_test_wait_flag (&cat.closed, 10000));
  stream_clear (&fast);
  stream_clear (&cat);
}

/* Signals and EOF through the channel; the exit event arrives as ::ctrl. */
static void
test_signal (Agent *f, gconstpointer data)
{
  Stream s = { 0 };
  g_autoptr(JsonObject) msg = json_object_new ();

  if (!agent_need_root () || !agent_connect (f))
    return;
  stream_open (f, &s, "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done");
  s.text = g_string_new (NULL);
  s.drain = TRUE;
  AGENT_TEST_WAIT_FOR (strstr (s.text->str, "ready\n") != NULL);
  json_object_set_string_member (msg, "op", "signal");
  json_object_set_string_member (msg, "signal", "TERM");
  box_agent_channel_send_ctrl (s.channel, msg);
  g_assert_true (agent_test_wait_flag (&s.closed, 10000));
  g_assert_cmpint (s.exit_code, ==, 7);
  g_assert_nonnull (strstr (s.text->str, "got-term\n"));
  g_assert_true (s.eof);
  stream_clear (&s);
}

/* ---- a channel the agent opens: the in-sandbox API socket ------------------------ */

typedef struct {
  BoxAgentChannel *channel;
  JsonObject *event;
  GString *in;                  /* what the in-sandbox client sent */
  gboolean eof;
  gboolean closed;
} Accepted;

static void
accepted_data (BoxAgentChannel *channel, guint stream, GBytes *bytes, gpointer data)
{
  Accepted *a = data;
  gsize len = 0;
  const char *p = g_bytes_get_data (bytes, &len);

  g_assert_cmpuint (stream, ==, 1);
  g_string_append_len (a->in, p, (gssize) len);
  box_agent_channel_consumed (channel, len);
}

static void
accepted_eof (BoxAgentChannel *channel, guint stream, gpointer data)
{
  Accepted *a = data;

  a->eof = TRUE;
}

static void
accepted_closed (BoxAgentChannel *channel, gpointer data)
{
  Accepted *a = data;

  a->closed = TRUE;
}

static void
on_channel_opened (BoxAgentClient *client, BoxAgentChannel *channel, JsonObject *event, gpointer data)
{
  Accepted *a = data;

  g_assert_null (a->channel);
  a->channel = g_object_ref (channel);
  a->event = json_object_ref (event);
  g_signal_connect (channel, "data", G_CALLBACK (accepted_data), a);
  g_signal_connect (channel, "eof", G_CALLBACK (accepted_eof), a);
  g_signal_connect (channel, "closed", G_CALLBACK (accepted_closed), a);
}

static void
test_api_socket (Agent *f, gconstpointer data)
{
  Accepted a = { .in = g_string_new (NULL) };
  g_autoptr(GSocketClient) socket_client = g_socket_client_new ();
  g_autoptr(GSocketAddress) addr = NULL;
  g_autoptr(GSocketConnection) inside = NULL;
  g_autoptr(GAsyncResult) res = NULL;
  static const char request[] = "GET /self HTTP/1.1\r\n\r\n";
  static const char response[] = "HTTP/1.1 204 No Content\r\n\r\n";
  g_autoptr(GBytes) answer = g_bytes_new_static (response, strlen (response));
  g_autoptr(GError) error = NULL;
  GInputStream *in;
  char buf[64];
  gsize got = 0;
  gint64 v = 0;

  if (!agent_need_root () || !agent_connect (f))
    return;
  g_signal_connect (f->client, "channel-opened", G_CALLBACK (on_channel_opened), &a);
  /* a process in the sandbox connects to /run/box/api.sock */
  addr = g_unix_socket_address_new (f->api_path);
  g_socket_client_connect_async (socket_client, G_SOCKET_CONNECTABLE (addr), NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  inside = g_socket_client_connect_finish (socket_client, res, &error);
  g_assert_no_error (error);
  g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (inside)), request, strlen (request),
                             NULL, NULL, &error);
  g_assert_no_error (error);

  AGENT_TEST_WAIT_FOR (a.channel != NULL);
  g_assert_cmpuint (box_agent_channel_get_id (a.channel), >=, 0x80000000u);
  g_assert_true (box_agent_json_get_int (a.event, "peer_pid", &v));
  g_assert_cmpint (v, ==, getpid ());
  g_assert_true (box_agent_json_get_int (a.event, "peer_uid", &v));
  g_assert_cmpint (v, ==, getuid ());
  g_assert_true (json_object_equal (box_agent_channel_get_reply (a.channel), a.event));
  AGENT_TEST_WAIT_FOR (a.in->len >= strlen (request));
  g_assert_cmpstr (a.in->str, ==, request);

  /* the host answers on stream 0; the client's half-close is EOF */
  box_agent_channel_write_async (a.channel, 0, answer, NULL, NULL, NULL);
  in = g_io_stream_get_input_stream (G_IO_STREAM (inside));
  g_input_stream_read_all (in, buf, strlen (response), &got, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (buf, got, response, strlen (response));
  g_socket_shutdown (g_socket_connection_get_socket (inside), FALSE, TRUE, &error);
  g_assert_no_error (error);
  AGENT_TEST_WAIT_FOR (a.eof);

  /* the host closes: the client in the sandbox sees the end */
  box_agent_channel_close (a.channel);
  AGENT_TEST_WAIT_FOR (a.closed);
  g_assert_cmpint (g_input_stream_read (in, buf, sizeof buf, NULL, &error), ==, 0);
  g_assert_no_error (error);

  g_signal_handlers_disconnect_by_data (f->client, &a);
  g_signal_handlers_disconnect_by_data (a.channel, &a);
  g_clear_object (&a.channel);
  g_clear_pointer (&a.event, json_object_unref);
  g_string_free (a.in, TRUE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  agent_test_init ();
  signal (SIGPIPE, SIG_IGN);

  g_test_add ("/agent-channel/flow", Agent, NULL, agent_setup, test_flow, agent_teardown);
  g_test_add ("/agent-channel/concurrent", Agent, NULL, agent_setup, test_concurrent, agent_teardown);
  g_test_add ("/agent-channel/signal", Agent, NULL, agent_setup, test_signal, agent_teardown);
  g_test_add ("/agent-channel/api-socket", Agent, "api", agent_setup, test_api_socket, agent_teardown);
  return g_test_run ();
}
