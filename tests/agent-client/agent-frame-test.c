/* agent-frame-test.c: the frame codec, and BoxAgentClient against a
 * scripted fake agent (what the real agent does not do on its own:
 * garbage, stale frames, error codes, agent-opened channels, broken credit). */
#include "config.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent-test-util.h"
#include "box-error.h"

/* ---- the codec -------------------------------------------------------------- */

static void
test_fnv (void)
{
  g_assert_cmphex (box_agent_fnv1a32 ((const guint8 *) "", 0), ==, 0x811c9dc5u);
  g_assert_cmphex (box_agent_fnv1a32 ((const guint8 *) "a", 1), ==, 0xe40c292cu);
}

static void
test_encode (void)
{
  /* the same bytes as tests/agent/boxagent.py's encode() */
  static const guint8 ctrl[] = { 0xc5, 0xb0, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
                                 0x3b, 0x6f, 0xb0, 0xa9, '{', '}' };
  static const guint8 credit[] = { 0xc5, 0xb0, 0x04, 0x00, 0x07, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
                                   0xd7, 0xc9, 0x3e, 0xf6, 0x00, 0x80, 0x00, 0x00 };
  g_autoptr(GBytes) a = box_agent_frame_build (BOX_AGENT_FRAME_CTRL, 0, 0, "{}", 2);
  g_autoptr(GBytes) b = box_agent_frame_build_credit (7, 0, 32768);
  g_autoptr(GBytes) expect_a = g_bytes_new_static (ctrl, sizeof ctrl);
  g_autoptr(GBytes) expect_b = g_bytes_new_static (credit, sizeof credit);
  BoxAgentFrameHeader h;

  g_assert_true (g_bytes_equal (a, expect_a));
  g_assert_true (g_bytes_equal (b, expect_b));
  g_assert_cmpint (box_agent_frame_decode_header (credit, sizeof credit, &h), ==, 1);
  g_assert_cmpuint (h.type, ==, BOX_AGENT_FRAME_CREDIT);
  g_assert_cmpuint (h.channel, ==, 7);
  g_assert_cmpuint (h.length, ==, 4);
  g_assert_cmpint (box_agent_frame_decode_header (credit, 15, &h), ==, 0);
  g_assert_cmpint (box_agent_frame_decode_header (credit + 1, 15, &h), ==, -1);
}

static void
test_decode_invalid (void)
{
  guint8 buf[BOX_AGENT_HEADER_SIZE];
  BoxAgentFrameHeader h = { .type = BOX_AGENT_FRAME_DATA, .stream = 1, .channel = 3, .length = 10 };
  BoxAgentFrameHeader out;

  box_agent_frame_encode_header (&h, buf);
  g_assert_cmpint (box_agent_frame_decode_header (buf, sizeof buf, &out), ==, 1);
  g_assert_cmpuint (out.stream, ==, 1);
  buf[12] ^= 1; /* check */
  g_assert_cmpint (box_agent_frame_decode_header (buf, sizeof buf, &out), ==, -1);

  h.type = 6; /* no such type, checksum right */
  box_agent_frame_encode_header (&h, buf);
  g_assert_cmpint (box_agent_frame_decode_header (buf, sizeof buf, &out), ==, -1);
  h.type = 0;
  box_agent_frame_encode_header (&h, buf);
  g_assert_cmpint (box_agent_frame_decode_header (buf, sizeof buf, &out), ==, -1);
  h.type = BOX_AGENT_FRAME_DATA;
  h.length = BOX_AGENT_MAX_PAYLOAD + 1; /* too long */
  box_agent_frame_encode_header (&h, buf);
  g_assert_cmpint (box_agent_frame_decode_header (buf, sizeof buf, &out), ==, -1);
  h.length = BOX_AGENT_MAX_PAYLOAD;
  box_agent_frame_encode_header (&h, buf);
  g_assert_cmpint (box_agent_frame_decode_header (buf, sizeof buf, &out), ==, 1);
}

/* Frames survive garbage between them and any split of the input. */
static void
test_decode_resync (void)
{
  g_autoptr(GByteArray) stream = g_byte_array_new ();
  g_autoptr(GBytes) f1 = box_agent_frame_build (BOX_AGENT_FRAME_DATA, 1, 5, "hello", 5);
  g_autoptr(GBytes) f2 = box_agent_frame_build (BOX_AGENT_FRAME_EOF, 1, 5, NULL, 0);
  g_autoptr(GBytes) f3 = box_agent_frame_build (BOX_AGENT_FRAME_CTRL, 0, 0, "{\"a\":1}", 7);
  static const guint8 garbage[] = { 0xc5, 0xb0, 0xc5, 0x00, 0xff, 0xc5, 0xb0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                    10, 11, 12, 13, 14, 0xc5 };
  gsize split;

  g_byte_array_append (stream, garbage, sizeof garbage);
  g_byte_array_append (stream, g_bytes_get_data (f1, NULL), (guint) g_bytes_get_size (f1));
  g_byte_array_append (stream, garbage, sizeof garbage);
  g_byte_array_append (stream, g_bytes_get_data (f2, NULL), (guint) g_bytes_get_size (f2));
  /* half a frame, cut off, then a whole one */
  g_byte_array_append (stream, g_bytes_get_data (f1, NULL), 9);
  g_byte_array_append (stream, g_bytes_get_data (f3, NULL), (guint) g_bytes_get_size (f3));

  for (split = 1; split <= stream->len; split++) {
    g_autoptr(BoxAgentDecoder) dec = box_agent_decoder_new ();
    g_autoptr(GPtrArray) frames = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
    GArray *headers = g_array_new (FALSE, FALSE, sizeof (BoxAgentFrameHeader));
    gsize off;

    for (off = 0; off < stream->len; off += split) {
      BoxAgentFrameHeader h;
      GBytes *payload = NULL;

      box_agent_decoder_feed (dec, stream->data + off, MIN (split, stream->len - off));
      while (box_agent_decoder_next (dec, &h, &payload)) {
        g_array_append_val (headers, h);
        g_ptr_array_add (frames, payload);
      }
    }
    g_assert_cmpuint (frames->len, ==, 3);
    g_assert_cmpuint (g_array_index (headers, BoxAgentFrameHeader, 0).type, ==, BOX_AGENT_FRAME_DATA);
    g_assert_cmpmem (g_bytes_get_data (frames->pdata[0], NULL), g_bytes_get_size (frames->pdata[0]), "hello", 5);
    g_assert_cmpuint (g_array_index (headers, BoxAgentFrameHeader, 1).type, ==, BOX_AGENT_FRAME_EOF);
    g_assert_cmpuint (g_array_index (headers, BoxAgentFrameHeader, 2).type, ==, BOX_AGENT_FRAME_CTRL);
    g_assert_cmpuint (box_agent_decoder_get_skipped (dec), ==, 2 * sizeof garbage + 9);
    g_assert_cmpuint (box_agent_decoder_get_buffered (dec), ==, 0);
    g_array_unref (headers);
  }
}

static void
test_parse_ctrl (void)
{
  static const char *const bad[] = {
    "", "[]", "1", "{", "{\"a\":1} x", "{\"a\":\"\xff\"}", "{\"a\":\"\0\"}",
  };
  g_autoptr(GString) deep = g_string_new ("{\"a\":");
  g_autoptr(JsonObject) ok = NULL;
  g_autoptr(GError) error = NULL;
  gint64 v = 0;
  guint i;

  ok = box_agent_parse_ctrl ((const guint8 *) "{\"id\":3,\"ok\":true,\"s\":\"x\"}", 26, &error);
  g_assert_no_error (error);
  g_assert_true (box_agent_json_get_int (ok, "id", &v));
  g_assert_cmpint (v, ==, 3);
  g_assert_true (box_agent_json_get_bool (ok, "ok", FALSE));
  g_assert_false (box_agent_json_get_int (ok, "s", &v));
  g_assert_null (box_agent_json_get_string (ok, "id"));
  g_assert_cmpstr (box_agent_json_get_string (ok, "s"), ==, "x");

  for (i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) e = NULL;
    gsize len = i == 6 ? 9 : strlen (bad[i]);

    g_assert_null (box_agent_parse_ctrl ((const guint8 *) bad[i], len, &e));
    g_assert_error (e, BOX_ERROR, BOX_ERROR_INTERNAL);
  }
  for (i = 0; i < 40; i++)
    g_string_append (deep, "[");
  for (i = 0; i < 40; i++)
    g_string_append (deep, "]");
  g_string_append (deep, "}");
  g_clear_error (&error);
  g_assert_null (box_agent_parse_ctrl ((const guint8 *) deep->str, deep->len, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
}

/* ---- a fake agent ------------------------------------------------------------- */

typedef struct {
  FakeAgent *fake;
  BoxAgentClient *client;
  GPtrArray *events;
  GError *closed_error;
  guint n_closed;
} Fake;

static void
on_event (BoxAgentClient *client, JsonObject *event, gpointer data)
{
  Fake *f = data;

  g_ptr_array_add (f->events, json_object_ref (event));
}

static void
on_closed (BoxAgentClient *client, GError *error, gpointer data)
{
  Fake *f = data;

  f->n_closed++;
  g_clear_error (&f->closed_error);
  f->closed_error = g_error_copy (error);
}

static void
fake_setup (Fake *f, gconstpointer data)
{
  g_autoptr(GIOStream) stream = NULL;

  f->fake = fake_agent_new (&stream);
  f->client = box_agent_client_new (stream);
  f->events = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  g_signal_connect (f->client, "event", G_CALLBACK (on_event), f);
  g_signal_connect (f->client, "closed", G_CALLBACK (on_closed), f);
}

static void
fake_teardown (Fake *f, gconstpointer data)
{
  BoxAgentClient *client = f->client;

  g_signal_handlers_disconnect_by_data (f->client, f);
  g_object_add_weak_pointer (G_OBJECT (client), (gpointer *) &client);
  g_object_unref (f->client);
  g_assert_null (client);
  fake_agent_free (f->fake);
  g_ptr_array_unref (f->events);
  g_clear_error (&f->closed_error);
  agent_test_spin (10);
}

/* hello as the agent answers it, after whatever junk @before sends */
static void
fake_connect (Fake *f, void (*before) (Fake *f))
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) hello = NULL;
  g_autoptr(GError) error = NULL;

  box_agent_client_connect_async (f->client, NULL, agent_test_store_result, &res);
  hello = fake_agent_read_request (f->fake);
  if (before != NULL) {
    /* a ready makes the client send hello again: answer the newest */
    before (f);
    g_clear_pointer (&hello, json_object_unref);
    hello = fake_agent_read_request (f->fake);
  }
  fake_agent_reply_hello (f->fake, hello);
  agent_test_wait_result (&res);
  g_assert_true (box_agent_client_connect_finish (f->client, res, &error));
  g_assert_no_error (error);
}

static void
send_junk (Fake *f)
{
  static const guint8 junk[] = { 0x00, 0xc5, 0xb0, 0x01, 0xff, 0xc5, 0xc5, 0xb0, 0x7f, 0x12 };
  g_autoptr(GBytes) half = box_agent_frame_build (BOX_AGENT_FRAME_DATA, 1, 9, "stale output", 12);

  /* the agent's ready, a stale reply and a stale event from before a
   * restore, half a frame, garbage: all to be ignored */
  fake_agent_send_json (f->fake, 0, "{\"event\":\"ready\",\"version\":1,\"agent\":\"fake\","
                                    "\"boot_id\":\"b-0\",\"uptime_ms\":1,\"window\":262144}");
  fake_agent_send_json (f->fake, 0, "{\"id\":1,\"ok\":true,\"version\":1,\"nonce\":\"stale\"}");
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, 1, "old", 3);
  fake_agent_write (f->fake, junk, sizeof junk);
  fake_agent_write (f->fake, g_bytes_get_data (half, NULL), 20);
  fake_agent_write (f->fake, junk, sizeof junk);
}

static void
test_fake_resync (Fake *f, gconstpointer data)
{
  JsonObject *info;
  gint64 v = 0;

  fake_connect (f, send_junk);
  info = box_agent_client_get_info (f->client);
  g_assert_nonnull (info);
  g_assert_cmpstr (box_agent_json_get_string (info, "agent"), ==, "fake");
  g_assert_cmpstr (box_agent_json_get_string (info, "boot_id"), ==, "b-1");
  g_assert_true (box_agent_json_get_int (info, "window", &v));
  g_assert_cmpint (v, ==, BOX_AGENT_DEFAULT_WINDOW);
  g_assert_false (json_object_has_member (info, "nonce"));
  g_assert_false (json_object_has_member (info, "id"));
  /* nothing from before the reply came through */
  g_assert_cmpuint (f->events->len, ==, 0);

  /* after the reply, events do */
  fake_agent_send_json (f->fake, 0, "{\"event\":\"ready\",\"version\":1}");
  AGENT_TEST_WAIT_FOR (f->events->len > 0);
  g_assert_cmpstr (box_agent_json_get_string (f->events->pdata[0], "event"), ==, "ready");
  g_assert_cmpuint (f->n_closed, ==, 0);
}

static void
test_fake_errors (Fake *f, gconstpointer data)
{
  static const struct {
    const char *code;
    int error;
  } cases[] = {
    { "invalid", BOX_ERROR_INVALID },
    { "executable_not_found", BOX_ERROR_INVALID },
    { "unknown_user", BOX_ERROR_INVALID },
    { "bad_cwd", BOX_ERROR_INVALID },
    { "permission_denied", BOX_ERROR_PERMISSION_DENIED },
    { "not_found", BOX_ERROR_NOT_FOUND },
    { "already_exists", BOX_ERROR_ALREADY_EXISTS },
    { "conflict", BOX_ERROR_CONFLICT },
    { "port_closed", BOX_ERROR_PORT_CLOSED },
    { "failed", BOX_ERROR_INTERNAL },
    { "start_failed", BOX_ERROR_INTERNAL },
    { "something_new", BOX_ERROR_INTERNAL },
  };
  guint i;

  fake_connect (f, NULL);
  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(GAsyncResult) res = NULL;
    g_autoptr(JsonObject) req = NULL;
    g_autoptr(JsonObject) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *json = NULL;
    gint64 id = 0;

    box_agent_client_call_async (f->client, "fs-stat", NULL, NULL, agent_test_store_result, &res);
    req = fake_agent_read_request (f->fake);
    g_assert_cmpstr (box_agent_json_get_string (req, "op"), ==, "fs-stat");
    g_assert_true (box_agent_json_get_int (req, "id", &id));
    json = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":false,\"error\":{\"code\":\"%s\","
                            "\"message\":\"it says %s\"}}", id, cases[i].code, cases[i].code);
    fake_agent_send_json (f->fake, 0, json);
    agent_test_wait_result (&res);
    reply = box_agent_client_call_finish (f->client, res, &error);
    g_assert_null (reply);
    g_assert_error (error, BOX_ERROR, cases[i].error);
    g_assert_nonnull (strstr (error->message, "it says"));
  }
}

/* Replies in another order than the requests; unknown ids ignored. */
static void
test_fake_reply_order (Fake *f, gconstpointer data)
{
  g_autoptr(GAsyncResult) r1 = NULL;
  g_autoptr(GAsyncResult) r2 = NULL;
  g_autoptr(JsonObject) q1 = NULL;
  g_autoptr(JsonObject) q2 = NULL;
  g_autoptr(JsonObject) a1 = NULL;
  g_autoptr(JsonObject) a2 = NULL;
  g_autoptr(JsonObject) args = json_object_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *json1 = NULL;
  g_autofree char *json2 = NULL;
  gint64 id1 = 0, id2 = 0, v = 0;

  fake_connect (f, NULL);
  json_object_set_string_member (args, "path", "/x");
  box_agent_client_call_async (f->client, "one", args, NULL, agent_test_store_result, &r1);
  box_agent_client_call_async (f->client, "two", NULL, NULL, agent_test_store_result, &r2);
  q1 = fake_agent_read_request (f->fake);
  q2 = fake_agent_read_request (f->fake);
  g_assert_cmpstr (box_agent_json_get_string (q1, "path"), ==, "/x");
  g_assert_true (box_agent_json_get_int (q1, "id", &id1));
  g_assert_true (box_agent_json_get_int (q2, "id", &id2));
  g_assert_cmpint (id1, !=, id2);
  /* args are not consumed nor changed */
  g_assert_false (json_object_has_member (args, "id"));

  fake_agent_send_json (f->fake, 0, "{\"id\":999,\"ok\":true}");
  fake_agent_send_json (f->fake, 0, "{\"id\":0,\"ok\":false,\"error\":{\"code\":\"invalid\",\"message\":\"x\"}}");
  json2 = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"n\":2}", id2);
  json1 = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"n\":1}", id1);
  fake_agent_send_json (f->fake, 0, json2);
  fake_agent_send_json (f->fake, 0, json1);
  agent_test_wait_result (&r1);
  agent_test_wait_result (&r2);
  a1 = box_agent_client_call_finish (f->client, r1, &error);
  g_assert_no_error (error);
  a2 = box_agent_client_call_finish (f->client, r2, &error);
  g_assert_no_error (error);
  g_assert_true (box_agent_json_get_int (a1, "n", &v));
  g_assert_cmpint (v, ==, 1);
  g_assert_true (box_agent_json_get_int (a2, "n", &v));
  g_assert_cmpint (v, ==, 2);
}

static void
test_fake_version (Fake *f, gconstpointer data)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) hello = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *json = NULL;
  gint64 id = 0;

  box_agent_client_connect_async (f->client, NULL, agent_test_store_result, &res);
  hello = fake_agent_read_request (f->fake);
  g_assert_true (box_agent_json_get_int (hello, "id", &id));
  g_assert_true (box_agent_json_get_int (hello, "version", &id) && id == 1);
  g_assert_true (box_agent_json_get_int (hello, "id", &id));
  json = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"version\":2,\"nonce\":\"%s\"}",
                          id, box_agent_json_get_string (hello, "nonce"));
  fake_agent_send_json (f->fake, 0, json);
  agent_test_wait_result (&res);
  g_assert_false (box_agent_client_connect_finish (f->client, res, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_true (box_agent_client_is_closed (f->client));
  g_assert_cmpuint (f->n_closed, ==, 1);
}

/* A call before connect fails; connect cancelled completes at once. */
static void
test_fake_not_connected (Fake *f, gconstpointer data)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) first = NULL;

  box_agent_client_call_async (f->client, "ping", NULL, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  g_assert_null (box_agent_client_call_finish (f->client, res, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_object (&res);
  g_clear_error (&error);

  box_agent_client_connect_async (f->client, cancellable, agent_test_store_result, &res);
  g_cancellable_cancel (cancellable);
  agent_test_wait_result (&res);
  g_assert_false (box_agent_client_connect_finish (f->client, res, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_object (&res);
  g_clear_error (&error);
  /* a second attempt works: a fresh nonce, and the reply to the first
   * hello (sent late here) is stale */
  first = fake_agent_read_request (f->fake);
  fake_connect (f, NULL);
  fake_agent_reply_hello (f->fake, first);
  agent_test_spin (50);
  g_assert_cmpuint (f->n_closed, ==, 0);
}

/* Host-side credit: never more DATA in flight than the agent granted, in
 * frames of at most 32 KiB, EOF after the data. */
#define TOTAL (2 * BOX_AGENT_DEFAULT_WINDOW)
static void
test_fake_write_credit (Fake *f, gconstpointer data)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GAsyncResult) wres = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autoptr(BoxAgentChannel) channel = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *json = NULL;
  g_autofree guint8 *big = g_malloc (TOTAL);
  g_autoptr(GBytes) bytes = NULL;
  gint64 id = 0, chan = 0;
  gsize got = 0;
  guint8 credit[4];

  for (gsize i = 0; i < TOTAL; i++)
    big[i] = (guint8) (i * 7 + (i >> 12));
  bytes = g_bytes_new_static (big, TOTAL);
  fake_connect (f, NULL);
  box_agent_client_open_channel_async (f->client, "port-connect", NULL, NULL, agent_test_store_result, &res);
  req = fake_agent_read_request (f->fake);
  g_assert_true (box_agent_json_get_int (req, "id", &id));
  g_assert_true (box_agent_json_get_int (req, "chan", &chan));
  g_assert_cmpint (chan, >, 0);
  g_assert_cmpint (chan, <, 0x80000000);
  json = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"chan\":%" G_GINT64_FORMAT "}", id, chan);
  fake_agent_send_json (f->fake, 0, json);
  agent_test_wait_result (&res);
  channel = box_agent_client_open_channel_finish (f->client, res, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (box_agent_channel_get_id (channel), ==, chan);
  g_assert_true (box_agent_json_get_int (box_agent_channel_get_reply (channel), "chan", &id));

  box_agent_channel_write_async (channel, 0, bytes, NULL, agent_test_store_result, &wres);
  box_agent_channel_send_eof (channel, 0);
  /* exactly one window arrives, then nothing until CREDIT */
  while (got < BOX_AGENT_DEFAULT_WINDOW) {
    BoxAgentFrameHeader h;
    g_autoptr(GBytes) p = NULL;

    fake_agent_read (f->fake, &h, &p);
    g_assert_cmpuint (h.type, ==, BOX_AGENT_FRAME_DATA);
    g_assert_cmpuint (h.channel, ==, chan);
    g_assert_cmpuint (h.length, <=, BOX_AGENT_DATA_CHUNK);
    g_assert_cmpmem (g_bytes_get_data (p, NULL), h.length, big + got, h.length);
    got += h.length;
  }
  g_assert_cmpuint (got, ==, BOX_AGENT_DEFAULT_WINDOW);
  agent_test_spin (100);
  g_assert_null (wres);
  g_assert_cmpuint (box_agent_decoder_get_buffered (f->fake->decoder), ==, 0);
  {
    guint8 probe;

    g_assert_cmpint (recv (f->fake->fd, &probe, 1, MSG_DONTWAIT | MSG_PEEK), ==, -1);
  }
  /* the rest, in credits of 100000 */
  while (got < TOTAL) {
    gsize granted = 100000, taken = 0;

    credit[0] = 100000 & 0xff;
    credit[1] = (100000 >> 8) & 0xff;
    credit[2] = (100000 >> 16) & 0xff;
    credit[3] = 0;
    fake_agent_send (f->fake, BOX_AGENT_FRAME_CREDIT, 0, (guint32) chan, credit, 4);
    while (taken < granted && got < TOTAL) {
      BoxAgentFrameHeader h;
      g_autoptr(GBytes) p = NULL;

      fake_agent_read (f->fake, &h, &p);
      g_assert_cmpuint (h.type, ==, BOX_AGENT_FRAME_DATA);
      g_assert_cmpmem (g_bytes_get_data (p, NULL), h.length, big + got, h.length);
      got += h.length;
      taken += h.length;
    }
    g_assert_cmpuint (taken, <=, granted);
  }
  agent_test_wait_result (&wres);
  g_assert_true (box_agent_channel_write_finish (channel, wres, &error));
  g_assert_no_error (error);
  {
    BoxAgentFrameHeader h;
    g_autoptr(GBytes) p = NULL;

    fake_agent_read (f->fake, &h, &p);
    g_assert_cmpuint (h.type, ==, BOX_AGENT_FRAME_EOF);
    g_assert_cmpuint (h.stream, ==, 0);
  }
}

/* An open cancelled before the reply: the channel the agent opens anyway
 * is closed by the client. */
static void
test_fake_open_cancel (Fake *f, gconstpointer data)
{
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *json = NULL;
  gint64 id = 0, chan = 0;

  fake_connect (f, NULL);
  box_agent_client_open_channel_async (f->client, "exec", NULL, cancellable, agent_test_store_result, &res);
  req = fake_agent_read_request (f->fake);
  g_assert_true (box_agent_json_get_int (req, "id", &id));
  g_assert_true (box_agent_json_get_int (req, "chan", &chan));
  g_cancellable_cancel (cancellable);
  agent_test_wait_result (&res);
  g_assert_null (box_agent_client_open_channel_finish (f->client, res, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);

  /* the late reply, then output: the client answers with CLOSE */
  json = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"chan\":%" G_GINT64_FORMAT ",\"pid\":9}", id, chan);
  fake_agent_send_json (f->fake, 0, json);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, "late", 4);
  while (TRUE) {
    BoxAgentFrameHeader h;
    g_autoptr(GBytes) p = NULL;

    fake_agent_read (f->fake, &h, &p);
    if (h.type == BOX_AGENT_FRAME_CLOSE) {
      g_assert_cmpuint (h.channel, ==, chan);
      break;
    }
  }
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  agent_test_spin (20);
  g_assert_cmpuint (f->n_closed, ==, 0);
}

typedef struct {
  BoxAgentChannel *channel;
  JsonObject *event;
  gsize data;
  gboolean closed;
} Accepted;

static void
on_accepted_data (BoxAgentChannel *channel, guint stream, GBytes *bytes, gpointer user_data)
{
  Accepted *a = user_data;

  a->data += g_bytes_get_size (bytes);
}

static void
on_accepted_closed (BoxAgentChannel *channel, gpointer user_data)
{
  Accepted *a = user_data;

  a->closed = TRUE;
}

static void
on_channel_opened (BoxAgentClient *client, BoxAgentChannel *channel, JsonObject *event, gpointer user_data)
{
  Accepted *a = user_data;

  a->channel = g_object_ref (channel);
  a->event = json_object_ref (event);
  g_signal_connect (channel, "data", G_CALLBACK (on_accepted_data), a);
  g_signal_connect (channel, "closed", G_CALLBACK (on_accepted_closed), a);
}

/* An agent-opened channel, then an agent that ignores the credit: the host
 * buffers no more than the window and closes the channel. */
static void
test_fake_accept (Fake *f, gconstpointer data)
{
  Accepted a = { 0 };
  g_autofree guint8 *chunk = g_malloc0 (BOX_AGENT_DATA_CHUNK);
  gint64 pid = 0;
  guint i;

  fake_connect (f, NULL);
  g_signal_connect (f->client, "channel-opened", G_CALLBACK (on_channel_opened), &a);
  fake_agent_send_json (f->fake, 0x80000001u, "{\"event\":\"accept\",\"peer_pid\":42,\"peer_uid\":0}");
  /* frames right behind the accept are held until the handler ran */
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 0, 0x80000001u, "GET / HTTP/1.1\r\n", 16);
  AGENT_TEST_WAIT_FOR (a.data >= 16);
  g_assert_cmpuint (box_agent_channel_get_id (a.channel), ==, 0x80000001u);
  g_assert_true (box_agent_json_get_int (a.event, "peer_pid", &pid));
  g_assert_cmpint (pid, ==, 42);
  g_assert_cmpuint (box_agent_channel_get_buffered (a.channel), ==, 16);

  /* more than a window without CREDIT: the channel is closed */
  for (i = 0; i < BOX_AGENT_DEFAULT_WINDOW / BOX_AGENT_DATA_CHUNK + 2; i++)
    fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 0, 0x80000001u, chunk, BOX_AGENT_DATA_CHUNK);
  while (TRUE) {
    BoxAgentFrameHeader h;
    g_autoptr(GBytes) p = NULL;

    fake_agent_read (f->fake, &h, &p);
    if (h.type == BOX_AGENT_FRAME_CLOSE) {
      g_assert_cmpuint (h.channel, ==, 0x80000001u);
      break;
    }
  }
  g_assert_cmpuint (box_agent_channel_get_buffered (a.channel), <=, BOX_AGENT_DEFAULT_WINDOW);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, 0x80000001u, NULL, 0);
  AGENT_TEST_WAIT_FOR (a.closed);
  g_assert_true (box_agent_channel_is_closed (a.channel));
  g_signal_handlers_disconnect_by_data (a.channel, &a);
  g_clear_object (&a.channel);
  g_clear_pointer (&a.event, json_object_unref);
  g_signal_handlers_disconnect_by_data (f->client, &a);
}

/* The stream ends: ::closed once, pending calls and channels fail. */
static void
test_fake_eof (Fake *f, gconstpointer data)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GAsyncResult) res2 = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) req = NULL;

  fake_connect (f, NULL);
  box_agent_client_call_async (f->client, "sync", NULL, NULL, agent_test_store_result, &res);
  box_agent_client_open_channel_async (f->client, "exec", NULL, NULL, agent_test_store_result, &res2);
  req = fake_agent_read_request (f->fake);
  close (f->fake->fd);
  f->fake->fd = -1;
  agent_test_wait_result (&res);
  g_assert_null (box_agent_client_call_finish (f->client, res, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_assert_cmpstr (error->message, ==, "the sandbox's agent went away");
  g_clear_error (&error);
  agent_test_wait_result (&res2);
  g_assert_null (box_agent_client_open_channel_finish (f->client, res2, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_assert_cmpuint (f->n_closed, ==, 1);
  g_assert_error (f->closed_error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_assert_true (box_agent_client_is_closed (f->client));
  box_agent_client_close (f->client);
  g_assert_cmpuint (f->n_closed, ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  agent_test_init ();

  g_test_add_func ("/agent-frame/fnv", test_fnv);
  g_test_add_func ("/agent-frame/encode", test_encode);
  g_test_add_func ("/agent-frame/decode-invalid", test_decode_invalid);
  g_test_add_func ("/agent-frame/decode-resync", test_decode_resync);
  g_test_add_func ("/agent-frame/parse-ctrl", test_parse_ctrl);
  g_test_add ("/agent-fake/resync", Fake, NULL, fake_setup, test_fake_resync, fake_teardown);
  g_test_add ("/agent-fake/errors", Fake, NULL, fake_setup, test_fake_errors, fake_teardown);
  g_test_add ("/agent-fake/reply-order", Fake, NULL, fake_setup, test_fake_reply_order, fake_teardown);
  g_test_add ("/agent-fake/version", Fake, NULL, fake_setup, test_fake_version, fake_teardown);
  g_test_add ("/agent-fake/not-connected", Fake, NULL, fake_setup, test_fake_not_connected, fake_teardown);
  g_test_add ("/agent-fake/write-credit", Fake, NULL, fake_setup, test_fake_write_credit, fake_teardown);
  g_test_add ("/agent-fake/open-cancel", Fake, NULL, fake_setup, test_fake_open_cancel, fake_teardown);
  g_test_add ("/agent-fake/accept", Fake, NULL, fake_setup, test_fake_accept, fake_teardown);
  g_test_add ("/agent-fake/eof", Fake, NULL, fake_setup, test_fake_eof, fake_teardown);
  return g_test_run ();
}
