/* agent-distrust-test.c: what the host makes of a guest's JSON and text:
 * the one parser every agent value goes through (caps before json-glib),
 * the text that reaches a log, the records built from replies, and the
 * client's limits (control messages over 64 KiB, the host's window, the
 * timeout of a call nobody answers) and the order of what it sends (a
 * barrier after the channels' frames, other requests ahead of them) against
 * the scripted fake agent. */
#include "config.h"

#include <string.h>

#include "agent-test-util.h"
#include "box-agent-exec.h"
#include "box-agent-hooks.h"
#include "box-agent-private.h"
#include "box-error.h"

static void
test_parse (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(JsonObject) object = NULL;
  g_autoptr(GString) deep = g_string_new (NULL);
  static const char nul[] = "{\"a\":\"x\0y\"}";

  node = box_agent_json_parse ("[1,2]", 5, 5, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_ARRAY (node));
  /* the cap is checked before anything else */
  g_assert_null (box_agent_json_parse ("[1,2]", 5, 4, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_nonnull (strstr (error->message, "too long"));
  g_clear_error (&error);
  g_assert_null (box_agent_json_parse (nul, sizeof nul - 1, 100, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);
  g_assert_null (box_agent_json_parse ("\"\xff\"", 3, 100, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);
  /* a nesting bomb of a megabyte never reaches json-glib's recursion */
  for (guint i = 0; i < 500000; i++)
    g_string_append_c (deep, '[');
  g_assert_null (box_agent_json_parse (deep->str, deep->len, BOX_AGENT_MAX_PAYLOAD, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_nonnull (strstr (error->message, "deeply"));
  g_clear_error (&error);
  /* brackets in strings do not count */
  g_string_assign (deep, "{\"a\":\"");
  for (guint i = 0; i < 100; i++)
    g_string_append (deep, "[{");
  g_string_append (deep, "\"}");
  object = box_agent_json_parse_object (deep->str, deep->len, BOX_AGENT_CTRL_MAX, &error);
  g_assert_no_error (error);
  g_assert_nonnull (object);
  g_assert_null (box_agent_json_parse_object ("[]", 2, 10, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
}

static void
test_text_for_log (void)
{
  g_autofree char *plain = box_agent_text_for_log ("all fine", 100);
  g_autofree char *escaped = box_agent_text_for_log ("a\nb\x1b[31m\"q\"\\ \xff", 100);
  g_autofree char *cut = NULL;
  g_autofree char *null = box_agent_text_for_log (NULL, 10);
  g_autofree char *big = g_strnfill (1 << 20, 'x');

  g_assert_cmpstr (plain, ==, "all fine");
  g_assert_cmpstr (escaped, ==, "a\\u000ab\\u001b[31m\\\"q\\\"\\\\ \\xff");
  cut = box_agent_text_for_log (big, 256);
  g_assert_cmpuint (strlen (cut), ==, 256 + 3);
  g_assert_true (g_str_has_suffix (cut, "..."));
  g_assert_cmpstr (null, ==, "");
}

static JsonObject *
parse (const char *json)
{
  g_autoptr(GError) error = NULL;
  JsonObject *object = box_agent_json_parse_object (json, strlen (json), BOX_AGENT_MAX_PAYLOAD, &error);

  g_assert_no_error (error);
  return object;
}

static void
test_error_reply (void)
{
  g_autoptr(GString) json = g_string_new ("{\"ok\":false,\"error\":{\"code\":\"odd\\u001b\",\"message\":\"");
  g_autoptr(JsonObject) reply = NULL;
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < 100000; i++)
    g_string_append (json, "\\n");
  g_string_append (json, "\"}}");
  reply = parse (json->str);
  error = box_agent_error_from_reply (reply);
  /* an unknown code is an internal error that is logged: short, escaped */
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_cmpuint (strlen (error->message), <, 400);
  g_assert_null (strchr (error->message, '\n'));
  g_assert_null (strchr (error->message, '\x1b'));
  g_assert_true (g_str_has_prefix (error->message, "agent: odd\\u001b: \\u000a"));
}

static void
test_records (void)
{
  g_autoptr(JsonObject) sessions = parse ("{\"sessions\":[1,\"x\",[],null,{\"id\":\"nope\"},"
                                          "{\"id\":\"s-0123456789\",\"cmd\":[\"sh\",3],\"pid\":5,"
                                          "\"started_at\":9223372036854775807}]}");
  g_autoptr(JsonObject) ports = parse ("{\"ports\":[1,{\"port\":0,\"address\":\"a\"},"
                                       "{\"port\":70000,\"address\":\"a\"},{\"port\":80},"
                                       "{\"port\":80,\"address\":\"0.0.0.0\",\"pid\":4}]}");
  g_autoptr(JsonObject) neither = parse ("{\"sessions\":{}}");
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) s = box_agent_sessions_from_reply (sessions, &error);
  g_autoptr(GPtrArray) p = NULL;
  BoxSessionInfo *info;
  BoxPortListener *listener;

  /* what is not a session (not an object, no valid id) is left out, and
   * nothing a guest sends trips a critical */
  g_assert_no_error (error);
  g_assert_cmpuint (s->len, ==, 1);
  info = g_ptr_array_index (s, 0);
  g_assert_cmpstr (info->id, ==, "s-0123456789");
  g_assert_cmpuint (g_strv_length (info->argv), ==, 1);
  g_assert_cmpint (info->started_at, >, 0);
  p = box_agent_ports_from_reply (ports, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (p->len, ==, 1);
  listener = g_ptr_array_index (p, 0);
  g_assert_cmpuint (listener->port, ==, 80);
  g_assert_cmpstr (listener->address, ==, "0.0.0.0");
  g_assert_null (box_agent_sessions_from_reply (neither, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
}

/* ---- the client's limits, against the scripted fake agent ----------------- */

typedef struct {
  FakeAgent *fake;
  BoxAgentClient *client;
  guint n_events;
} Fake;

static void
on_event (BoxAgentClient *client, JsonObject *event, gpointer data)
{
  Fake *f = data;

  f->n_events++;
}

static void
fake_setup (Fake *f, gconstpointer data)
{
  g_autoptr(GIOStream) stream = NULL;
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) hello = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *reply = NULL;
  gint64 id = 0;

  f->fake = fake_agent_new (&stream);
  f->client = box_agent_client_new (stream);
  g_signal_connect (f->client, "event", G_CALLBACK (on_event), f);
  box_agent_client_connect_async (f->client, NULL, agent_test_store_result, &res);
  hello = fake_agent_read_request (f->fake);
  g_assert_true (box_agent_json_get_int (hello, "id", &id));
  /* the agent asks for a 64 MiB window */
  reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"version\":1,\"window\":67108864,"
                           "\"nonce\":\"%s\"}", id, box_agent_json_get_string (hello, "nonce"));
  fake_agent_send_json (f->fake, 0, reply);
  agent_test_wait_result (&res);
  g_assert_true (box_agent_client_connect_finish (f->client, res, &error));
  g_assert_no_error (error);
}

static void
fake_teardown (Fake *f, gconstpointer data)
{
  g_signal_handlers_disconnect_by_data (f->client, f);
  g_object_unref (f->client);
  fake_agent_free (f->fake);
  agent_test_spin (10);
}

static void
test_window (Fake *f, gconstpointer data)
{
  gint64 window = 0;

  /* the window stays the host's, whatever the reply asked */
  g_assert_true (box_agent_json_get_int (box_agent_client_get_info (f->client), "window", &window));
  g_assert_cmpint (window, ==, BOX_AGENT_DEFAULT_WINDOW);
  g_assert_cmpuint (f->client->window, ==, BOX_AGENT_DEFAULT_WINDOW);
}

/* a control message of @size bytes: {"id"|"event" ..., "pad": "xxx"} */
static GString *
padded (const char *head, gsize size)
{
  GString *s = g_string_new (head);

  g_string_append (s, ",\"pad\":\"");
  while (s->len < size - 2)
    g_string_append_c (s, 'x');
  g_string_append (s, "\"}");
  return s;
}

/* @op called, and answered with a reply of 200,000 bytes */
static JsonObject *
call_with_big_reply (Fake *f, const char *op, GError **error)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autoptr(GString) reply = NULL;
  g_autofree char *head = NULL;
  gint64 id = 0;

  box_agent_client_call_async (f->client, op, NULL, NULL, agent_test_store_result, &res);
  req = fake_agent_read_request (f->fake);
  g_assert_true (box_agent_json_get_int (req, "id", &id));
  head = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"sessions\":[]", id);
  reply = padded (head, 200000);
  fake_agent_send_json (f->fake, 0, reply->str);
  agent_test_wait_result (&res);
  return box_agent_client_call_finish (f->client, res, error);
}

static void
test_ctrl_cap (Fake *f, gconstpointer data)
{
  g_autoptr(GString) event = padded ("{\"event\":\"big\"", BOX_AGENT_CTRL_MAX + 1);
  g_autoptr(GString) small = padded ("{\"event\":\"small\"", BOX_AGENT_CTRL_MAX);
  g_autoptr(JsonObject) dropped = NULL;
  g_autoptr(JsonObject) listing = NULL;
  g_autoptr(GError) error = NULL;

  /* an event over 64 KiB is dropped; one of 64 KiB is not */
  fake_agent_send_json (f->fake, 0, event->str);
  fake_agent_send_json (f->fake, 0, small->str);
  AGENT_TEST_WAIT_FOR (f->n_events == 1);
  agent_test_spin (50);
  g_assert_cmpuint (f->n_events, ==, 1);

  /* a reply over 64 KiB is dropped unread: the call ends by its timeout ... */
  f->client->call_timeout_ms = 300;
  dropped = call_with_big_reply (f, "ping", &error);
  g_assert_null (dropped);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_clear_error (&error);
  /* ... except for the listings */
  listing = call_with_big_reply (f, "sessions", &error);
  g_assert_no_error (error);
  g_assert_nonnull (listing);
}

static void
test_call_timeout (Fake *f, gconstpointer data)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autoptr(GError) error = NULL;
  gint64 start = g_get_monotonic_time ();

  f->client->call_timeout_ms = 200;
  box_agent_client_call_async (f->client, "ping", NULL, NULL, agent_test_store_result, &res);
  req = fake_agent_read_request (f->fake);
  agent_test_wait_result (&res);
  g_assert_null (box_agent_client_call_finish (f->client, res, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 200 * 1000);
  g_assert_cmpuint (g_hash_table_size (f->client->calls), ==, 0);
  g_assert_false (box_agent_client_is_closed (f->client));
}

/* presuspend, answered with @members after "id" and "ok"; the request's
 * timeout_ms in *@timeout_ms */
static gboolean
presuspend_with (Fake *f, guint timeout, const char *members, gint64 *timeout_ms,
                 BoxPresuspendResult *out, GError **error)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autofree char *reply = NULL;
  gint64 id = 0;

  box_agent_client_presuspend_async (f->client, timeout, NULL, agent_test_store_result, &res);
  req = fake_agent_read_request (f->fake);
  g_assert_cmpstr (box_agent_json_get_string (req, "op"), ==, "presuspend");
  g_assert_true (box_agent_json_get_int (req, "id", &id));
  g_assert_true (box_agent_json_get_int (req, "timeout_ms", timeout_ms));
  reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",%s}", id, members);
  fake_agent_send_json (f->fake, 0, reply);
  agent_test_wait_result (&res);
  return box_agent_client_presuspend_finish (f->client, res, out, error);
}

static void
test_presuspend (Fake *f, gconstpointer data)
{
  static const char *const malformed[] = {
    "\"ok\":true,\"ran\":1,\"failed\":0,\"timed_out\":0",                     /* one missing */
    "\"ok\":true,\"ran\":-1,\"failed\":0,\"timed_out\":0,\"skipped\":0",     /* negative */
    "\"ok\":true,\"ran\":1000001,\"failed\":0,\"timed_out\":0,\"skipped\":0", /* too many */
    "\"ok\":true,\"ran\":\"2\",\"failed\":0,\"timed_out\":0,\"skipped\":0",  /* a string */
    "\"ok\":true,\"ran\":9223372036854775807,\"failed\":0,\"timed_out\":0,\"skipped\":0",
  };
  BoxPresuspendResult counts = { 0 };
  gint64 timeout_ms = 0;
  g_autoptr(GError) error = NULL;

  g_assert_true (presuspend_with (f, 5000, "\"ok\":true,\"ran\":3,\"failed\":1,\"timed_out\":1,"
                                  "\"skipped\":2", &timeout_ms, &counts, &error));
  g_assert_no_error (error);
  g_assert_cmpint (timeout_ms, ==, 5000);
  g_assert_cmpuint (counts.ran, ==, 3);
  g_assert_cmpuint (counts.failed, ==, 1);
  g_assert_cmpuint (counts.timed_out, ==, 1);
  g_assert_cmpuint (counts.skipped, ==, 2);
  /* the timeout is kept within the agent's bounds */
  g_assert_true (presuspend_with (f, 0, "\"ok\":true,\"ran\":0,\"failed\":0,\"timed_out\":0,"
                                  "\"skipped\":0", &timeout_ms, &counts, &error));
  g_assert_cmpint (timeout_ms, ==, BOX_PRESUSPEND_TIMEOUT_MIN_MS);
  g_assert_true (presuspend_with (f, G_MAXUINT, "\"ok\":true,\"ran\":0,\"failed\":0,\"timed_out\":0,"
                                  "\"skipped\":0", &timeout_ms, &counts, &error));
  g_assert_cmpint (timeout_ms, ==, BOX_PRESUSPEND_TIMEOUT_MAX_MS);
  g_assert_cmpuint (counts.ran, ==, 0);
  /* what is not four counts is an error, not a result */
  for (guint i = 0; i < G_N_ELEMENTS (malformed); i++) {
    counts.ran = 77;
    g_assert_false (presuspend_with (f, 5000, malformed[i], &timeout_ms, &counts, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
    g_assert_nonnull (strstr (error->message, "malformed presuspend reply"));
    g_assert_cmpuint (counts.ran, ==, 77);
    g_clear_error (&error);
  }
  /* the agent's refusal is its error */
  g_assert_false (presuspend_with (f, 5000, "\"ok\":false,\"error\":{\"code\":\"failed\","
                                   "\"message\":\"no\"}", &timeout_ms, &counts, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);
}

/* An agent that never answers: the caller's cancellable ends the wait. */
static gboolean
cancel_now (gpointer data)
{
  g_cancellable_cancel (data);
  return G_SOURCE_REMOVE;
}

static void
test_presuspend_silent (Fake *f, gconstpointer data)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autoptr(GCancellable) cancel = g_cancellable_new ();
  g_autoptr(GError) error = NULL;
  gint64 start = g_get_monotonic_time ();

  box_agent_client_presuspend_async (f->client, 5000, cancel, agent_test_store_result, &res);
  req = fake_agent_read_request (f->fake);
  g_timeout_add (200, cancel_now, cancel);
  agent_test_wait_result (&res);
  g_assert_false (box_agent_client_presuspend_finish (f->client, res, NULL, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
}

/* A channel opened by the fake agent's reply. */
static BoxAgentChannel *
fake_open (Fake *f)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autofree char *reply = NULL;
  g_autoptr(GError) error = NULL;
  BoxAgentChannel *channel;
  gint64 id = 0;

  box_agent_client_open_channel_async (f->client, "exec", NULL, NULL, agent_test_store_result, &res);
  req = fake_agent_read_request (f->fake);
  g_assert_true (box_agent_json_get_int (req, "id", &id));
  reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"pid\":7}", id);
  fake_agent_send_json (f->fake, 0, reply);
  agent_test_wait_result (&res);
  channel = box_agent_client_open_channel_finish (f->client, res, &error);
  g_assert_no_error (error);
  return channel;
}

/* With the output backed up (a channel's megabyte of stdin the agent does
 * not read yet), a request goes ahead of the channels' frames, but a barrier
 * comes after the CLOSE queued before it: its answer means the agent
 * handled that CLOSE. */
static void
test_barrier_order (Fake *f, gconstpointer data)
{
  g_autoptr(BoxAgentChannel) busy = fake_open (f);
  g_autoptr(BoxAgentChannel) ended = fake_open (f);
  g_autoptr(GBytes) stdin_data = g_bytes_new_take (g_malloc0 (BOX_AGENT_DEFAULT_WINDOW),
                                                   BOX_AGENT_DEFAULT_WINDOW);
  g_autoptr(GAsyncResult) barrier_res = NULL;
  g_autoptr(GAsyncResult) call_res = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *reply = NULL;
  gint order = 0, call_at = 0, close_at = 0, barrier_at = 0;
  gint64 barrier_id = 0, call_id = 0;

  box_agent_channel_write_async (busy, 0, stdin_data, NULL, NULL, NULL);
  agent_test_spin (100);
  g_assert_cmpuint (box_agent_client_get_queued_bytes (f->client), >, 0);
  box_agent_channel_close (ended);
  box_agent_client_barrier_async (f->client, NULL, agent_test_store_result, &barrier_res);
  box_agent_client_call_async (f->client, "ping", NULL, NULL, agent_test_store_result, &call_res);
  while (barrier_at == 0) {
    BoxAgentFrameHeader header;
    g_autoptr(GBytes) payload = NULL;
    g_autoptr(JsonObject) msg = NULL;

    fake_agent_read (f->fake, &header, &payload);
    order++;
    if (header.type == BOX_AGENT_FRAME_CLOSE && header.channel == box_agent_channel_get_id (ended))
      close_at = order;
    if (header.type != BOX_AGENT_FRAME_CTRL || header.channel != 0)
      continue;
    msg = box_agent_parse_ctrl (g_bytes_get_data (payload, NULL), g_bytes_get_size (payload), &error);
    g_assert_no_error (error);
    g_assert_cmpstr (box_agent_json_get_string (msg, "op"), ==, "ping");
    if (call_at == 0) {
      call_at = order;
      g_assert_true (box_agent_json_get_int (msg, "id", &call_id));
    } else {
      barrier_at = order;
      g_assert_true (box_agent_json_get_int (msg, "id", &barrier_id));
    }
  }
  g_test_message ("request at %d, CLOSE at %d, barrier at %d", call_at, close_at, barrier_at);
  g_assert_cmpint (call_at, <, close_at);
  g_assert_cmpint (close_at, <, barrier_at);
  reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"uptime_ms\":1,\"channels\":1}",
                           barrier_id);
  fake_agent_send_json (f->fake, 0, reply);
  agent_test_wait_result (&barrier_res);
  g_assert_true (box_agent_client_barrier_finish (f->client, barrier_res, &error));
  g_assert_no_error (error);
  g_clear_pointer (&reply, g_free);
  reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true}", call_id);
  fake_agent_send_json (f->fake, 0, reply);
  agent_test_wait_result (&call_res);
}

int
main (int argc, char **argv)
{
  agent_test_init ();
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/agent-distrust/parse", test_parse);
  g_test_add_func ("/agent-distrust/text-for-log", test_text_for_log);
  g_test_add_func ("/agent-distrust/error-reply", test_error_reply);
  g_test_add_func ("/agent-distrust/records", test_records);
  g_test_add ("/agent-distrust/window", Fake, NULL, fake_setup, test_window, fake_teardown);
  g_test_add ("/agent-distrust/ctrl-cap", Fake, NULL, fake_setup, test_ctrl_cap, fake_teardown);
  g_test_add ("/agent-distrust/call-timeout", Fake, NULL, fake_setup, test_call_timeout, fake_teardown);
  g_test_add ("/agent-distrust/barrier-order", Fake, NULL, fake_setup, test_barrier_order, fake_teardown);
  g_test_add ("/agent-distrust/presuspend", Fake, NULL, fake_setup, test_presuspend, fake_teardown);
  g_test_add ("/agent-distrust/presuspend-silent", Fake, NULL, fake_setup, test_presuspend_silent,
              fake_teardown);
  return g_test_run ();
}
