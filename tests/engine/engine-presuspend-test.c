/* engine-presuspend-test.c: the guest's presuspend hooks before a pause,
 * asked of a scripted fake agent that the dummy hypervisor hands out
 * (ef_fake_agent()): the request comes before anything is interrupted or
 * snapshotted, for the API's pause and the idle rule's; failed hooks and a
 * guest that never answers do not hold the pause (the latter for
 * BOX_ENGINE_PRESUSPEND_WAIT_MS of real time).  A memory checkpoint runs
 * the hooks too, then ends the streams and snapshots only once the agent
 * read the CLOSE of their channels (it sends a non-detachable session
 * SIGHUP then): a `ping` queued after those frames must be answered first,
 * and a silent agent holds the snapshot BOX_ENGINE_END_STREAMS_WAIT_MS at
 * most. */
#include "config.h"

#include <string.h>

#include "agent-test-util.h"
#include "box-engine-presuspend.h"
#include "engine-fixture.h"

#define AGENT_CAPS      "guest-agent,memory-snapshots"
#define CHECKPOINT_CAPS "guest-agent,memory-snapshots,checkpoints"

typedef struct {
  Ef              ef;
  FakeAgent      *fake;     /* the fixture's */
  BoxAgentClient *client;
} Fixture;

static void
set_up (Fixture *f, gconstpointer caps)
{
  ef_set_up (&f->ef, caps);
}

static void
tear_down (Fixture *f, gconstpointer caps)
{
  ef_tear_down (&f->ef, caps);
}

/* A sandbox whose agent is the fake one, connected. */
static BoxSandbox *
create_with_agent (Fixture *f, const char *json)
{
  BoxSandbox *sb = ef_create_ok (&f->ef, json);

  f->fake = ef_fake_agent (&f->ef, sb->id, &f->client);
  return sb;
}

/* The presuspend request, checked; the VM still runs and nothing was
 * interrupted yet. */
static gint64
read_presuspend (Fixture *f, const char *sandbox_id)
{
  g_autoptr(JsonObject) req = fake_agent_read_request (f->fake);
  gint64 id = 0, timeout_ms = 0;

  g_assert_cmpstr (box_agent_json_get_string (req, "op"), ==, "presuspend");
  g_assert_true (box_agent_json_get_int (req, "id", &id));
  g_assert_true (box_agent_json_get_int (req, "timeout_ms", &timeout_ms));
  g_assert_cmpint (timeout_ms, ==, BOX_ENGINE_PRESUSPEND_TIMEOUT_MS);
  g_assert_cmpint (box_hypervisor_query (f->ef.hv, sandbox_id, NULL), ==, BOX_VM_STATE_RUNNING);
  g_assert_cmpuint (f->ef.interrupted->len, ==, 0);
  return id;
}

static void
reply_counts (Fixture *f, gint64 id, const char *counts)
{
  g_autofree char *json = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,%s}", id, counts);

  fake_agent_send_json (f->fake, 0, json);
}

static void
pause_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  gboolean *done = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sb = box_engine_change_state_finish (BOX_ENGINE (source), result, &error);

  g_assert_no_error (error);
  g_assert_cmpint (sb->state, ==, BOX_SANDBOX_STATE_PAUSED);
  *done = TRUE;
}

static void
test_pause (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxSandbox) sb = create_with_agent (f, "{}");
  g_autofree char *want = g_strdup_printf ("sandbox.paused %s request", sb->id);
  gboolean done = FALSE;

  ef_forget (&f->ef);
  box_engine_change_state_async (f->ef.engine, "p", sb->id, BOX_STATE_REQUEST_PAUSE, NULL,
                                 pause_done, &done);
  /* hooks that failed and timed out: logged, the pause goes on */
  reply_counts (f, read_presuspend (f, sb->id), "\"ran\":2,\"failed\":1,\"timed_out\":1,\"skipped\":3");
  ef_wait (&f->ef, &done);
  g_assert_cmpint (ef_state (&f->ef, sb->id), ==, BOX_SANDBOX_STATE_PAUSED);
  ef_assert_events (&f->ef, want);

  /* a pause of a paused sandbox is a no-op: no hooks */
  done = FALSE;
  box_engine_change_state_async (f->ef.engine, "p", sb->id, BOX_STATE_REQUEST_PAUSE, NULL,
                                 pause_done, &done);
  ef_wait (&f->ef, &done);
}

static void
test_malformed (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxSandbox) sb = create_with_agent (f, "{}");
  gboolean done = FALSE;

  box_engine_change_state_async (f->ef.engine, "p", sb->id, BOX_STATE_REQUEST_PAUSE, NULL,
                                 pause_done, &done);
  reply_counts (f, read_presuspend (f, sb->id), "\"ran\":\"lots\"");
  ef_wait (&f->ef, &done);
  g_assert_cmpint (ef_state (&f->ef, sb->id), ==, BOX_SANDBOX_STATE_PAUSED);
}

static void
test_silent (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxSandbox) sb = create_with_agent (f, "{}");
  gboolean done = FALSE;
  gint64 start, took;

  box_engine_change_state_async (f->ef.engine, "p", sb->id, BOX_STATE_REQUEST_PAUSE, NULL,
                                 pause_done, &done);
  read_presuspend (f, sb->id);
  start = g_get_monotonic_time ();
  /* never answered: the host stops waiting */
  ef_wait (&f->ef, &done);
  took = (g_get_monotonic_time () - start) / 1000;
  g_test_message ("a silent guest held the pause %" G_GINT64_FORMAT " ms", took);
  g_assert_cmpint (took, >=, BOX_ENGINE_PRESUSPEND_WAIT_MS - 500);
  g_assert_cmpint (took, <, BOX_ENGINE_PRESUSPEND_WAIT_MS + 3000);
  g_assert_cmpint (ef_state (&f->ef, sb->id), ==, BOX_SANDBOX_STATE_PAUSED);
}

static void
test_idle (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxSandbox) sb = create_with_agent (f, "{\"idle\": {\"timeout_s\": 30, \"action\": \"pause\"}}");
  g_autofree char *want = g_strdup_printf ("sandbox.paused %s idle", sb->id);
  gint64 id;

  ef_forget (&f->ef);
  ef_advance (&f->ef, 29);
  g_assert_cmpint (ef_state (&f->ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);
  box_clock_advance (f->ef.clock, G_USEC_PER_SEC);
  id = read_presuspend (f, sb->id);
  reply_counts (f, id, "\"ran\":1,\"failed\":0,\"timed_out\":0,\"skipped\":0");
  AGENT_TEST_WAIT_FOR (ef_state (&f->ef, sb->id) == BOX_SANDBOX_STATE_PAUSED);
  ef_settle (&f->ef);
  ef_assert_events (&f->ef, want);
}

/* ---- the end of the streams before a memory checkpoint ---- */

/* A channel of the fake agent's, as an exec stream holds one. */
static BoxAgentChannel *
open_channel (Fixture *f)
{
  g_autoptr(JsonObject) req = NULL;
  g_autofree char *reply = NULL;
  gint64 id = 0;
  EfWait opened = { 0 };
  BoxAgentChannel *channel;

  box_agent_client_open_channel_async (f->client, "exec", NULL, NULL, ef_wait_cb, &opened);
  req = fake_agent_read_request (f->fake);
  g_assert_cmpstr (box_agent_json_get_string (req, "op"), ==, "exec");
  g_assert_true (box_agent_json_get_int (req, "id", &id));
  reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"pid\":7}", id);
  fake_agent_send_json (f->fake, 0, reply);
  ef_wait (&f->ef, &opened.done);
  channel = box_agent_client_open_channel_finish (f->client, opened.result, NULL);
  g_object_unref (opened.result);
  g_assert_nonnull (channel);
  return channel;
}

/* What the exec bridge does on ::sandbox-interrupted: its socket closes,
 * and with it the session's channel. */
static void
close_on_interrupt (BoxEngine *engine, const char *sandbox_id, const char *why, gpointer data)
{
  box_agent_channel_close (BOX_AGENT_CHANNEL (data));
}

static void
test_checkpoint_streams (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxSandbox) sb = create_with_agent (f, "{}");
  g_autoptr(BoxAgentChannel) channel = open_channel (f);
  g_autoptr(JsonObject) ping = NULL;
  g_autoptr(BoxCheckpoint) made = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *reply = NULL;
  g_autofree char *want = g_strdup_printf ("%s checkpoint", sb->id);
  BoxAgentFrameHeader header;
  GBytes *payload = NULL;
  gint64 id = 0;
  EfWait done = { 0 };
  gulong handler;

  handler = g_signal_connect (f->ef.engine, "sandbox-interrupted", G_CALLBACK (close_on_interrupt),
                              channel);
  ef_forget (&f->ef);
  box_engine_create_checkpoint_async (f->ef.engine, "p", sb->id, NULL, TRUE, NULL, NULL, NULL,
                                      ef_wait_cb, &done);
  reply_counts (f, read_presuspend (f, sb->id), "\"ran\":0,\"failed\":0,\"timed_out\":0,\"skipped\":0");
  /* the channel's CLOSE, then the ping queued after it */
  do {
    g_clear_pointer (&payload, g_bytes_unref);
    fake_agent_read (f->fake, &header, &payload);
  } while (header.type == BOX_AGENT_FRAME_CREDIT);
  g_assert_cmpint (header.type, ==, BOX_AGENT_FRAME_CLOSE);
  g_assert_cmpuint (header.channel, ==, box_agent_channel_get_id (channel));
  g_clear_pointer (&payload, g_bytes_unref);
  ef_assert_interrupted (&f->ef, want);
  ping = fake_agent_read_request (f->fake);
  g_assert_cmpstr (box_agent_json_get_string (ping, "op"), ==, "ping");
  g_assert_true (box_agent_json_get_int (ping, "id", &id));
  /* not snapshotted before the agent answered */
  agent_test_spin (200);
  g_assert_false (done.done);
  g_assert_null (box_storage_checkpoint_get (box_engine_get_storage (f->ef.engine), sb->id, "v1", NULL));
  reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"uptime_ms\":1,\"channels\":0}", id);
  fake_agent_send_json (f->fake, 0, reply);
  ef_wait (&f->ef, &done.done);
  made = box_engine_create_checkpoint_finish (f->ef.engine, done.result, &error);
  g_clear_object (&done.result);
  g_assert_no_error (error);
  g_assert_cmpstr (made->id, ==, "v1");
  g_signal_handler_disconnect (f->ef.engine, handler);
}

static void
test_checkpoint_silent (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxSandbox) sb = create_with_agent (f, "{}");
  g_autoptr(JsonObject) ping = NULL;
  g_autoptr(BoxCheckpoint) made = NULL;
  g_autoptr(GError) error = NULL;
  EfWait done = { 0 };
  gint64 start, took;

  box_engine_create_checkpoint_async (f->ef.engine, "p", sb->id, NULL, TRUE, NULL, NULL, NULL,
                                      ef_wait_cb, &done);
  reply_counts (f, read_presuspend (f, sb->id), "\"ran\":0,\"failed\":0,\"timed_out\":0,\"skipped\":0");
  ping = fake_agent_read_request (f->fake);
  g_assert_cmpstr (box_agent_json_get_string (ping, "op"), ==, "ping");
  start = g_get_monotonic_time ();
  /* never answered: the snapshot goes on */
  ef_wait (&f->ef, &done.done);
  took = (g_get_monotonic_time () - start) / 1000;
  g_test_message ("a silent guest held the checkpoint %" G_GINT64_FORMAT " ms", took);
  g_assert_cmpint (took, >=, BOX_ENGINE_END_STREAMS_WAIT_MS - 500);
  g_assert_cmpint (took, <, BOX_ENGINE_END_STREAMS_WAIT_MS + 3000);
  made = box_engine_create_checkpoint_finish (f->ef.engine, done.result, &error);
  g_clear_object (&done.result);
  g_assert_no_error (error);
  g_assert_cmpstr (made->id, ==, "v1");
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);
  g_test_add ("/engine/presuspend/pause", Fixture, AGENT_CAPS, set_up, test_pause, tear_down);
  g_test_add ("/engine/presuspend/malformed", Fixture, AGENT_CAPS, set_up, test_malformed, tear_down);
  g_test_add ("/engine/presuspend/silent", Fixture, AGENT_CAPS, set_up, test_silent, tear_down);
  g_test_add ("/engine/presuspend/idle", Fixture, AGENT_CAPS, set_up, test_idle, tear_down);
  g_test_add ("/engine/presuspend/checkpoint-streams", Fixture, CHECKPOINT_CAPS, set_up,
              test_checkpoint_streams, tear_down);
  g_test_add ("/engine/presuspend/checkpoint-silent", Fixture, CHECKPOINT_CAPS, set_up,
              test_checkpoint_silent, tear_down);
  return g_test_run ();
}
