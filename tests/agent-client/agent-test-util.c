/* agent-test-util.c: waiting on the main loop, and a scripted fake agent. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <gio/gunixsocketaddress.h>

#include "agent-test-util.h"

static gboolean
tick (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

void
agent_test_init (void)
{
  /* wakes the loop, so that every wait notices its deadline */
  g_timeout_add (50, tick, NULL);
}

void
agent_test_store_result (GObject *source, GAsyncResult *result, gpointer data)
{
  GAsyncResult **slot = data;

  g_assert_null (*slot);
  *slot = g_object_ref (result);
}

GAsyncResult *
agent_test_wait_result (GAsyncResult **slot)
{
  gint64 deadline = g_get_monotonic_time () + AGENT_TEST_TIMEOUT_S * G_USEC_PER_SEC;

  while (*slot == NULL) {
    g_assert_cmpint (g_get_monotonic_time (), <, deadline);
    g_main_context_iteration (NULL, TRUE);
  }
  return *slot;
}

gboolean
agent_test_wait_flag (gboolean *flag, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  while (!*flag) {
    if (g_get_monotonic_time () >= deadline)
      return FALSE;
    g_main_context_iteration (NULL, TRUE);
  }
  return TRUE;
}

void
agent_test_spin (guint ms)
{
  gboolean never = FALSE;

  agent_test_wait_flag (&never, ms);
}

FakeAgent *
fake_agent_new (GIOStream **client_stream)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) socket = NULL;
  FakeAgent *fake;
  int fds[2];

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), ==, 0);
  socket = g_socket_new_from_fd (fds[0], &error);
  g_assert_no_error (error);
  *client_stream = G_IO_STREAM (g_socket_connection_factory_create_connection (socket));
  fake = g_new0 (FakeAgent, 1);
  fake->fd = fds[1];
  /* writes that do not fit let the client's loop run (fake_agent_write) */
  g_assert_cmpint (fcntl (fake->fd, F_SETFL, O_NONBLOCK), ==, 0);
  fake->decoder = box_agent_decoder_new ();
  return fake;
}

void
fake_agent_free (FakeAgent *fake)
{
  if (fake->fd >= 0)
    close (fake->fd);
  box_agent_decoder_free (fake->decoder);
  g_free (fake);
}

void
fake_agent_write (FakeAgent *fake, const void *data, gsize len)
{
  const guint8 *p = data;

  while (len > 0) {
    ssize_t w = write (fake->fd, p, len);

    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno == EAGAIN) {
      if (!g_main_context_iteration (NULL, FALSE))
        g_usleep (1000);
      continue;
    }
    g_assert_cmpint (w, >, 0);
    p += w;
    len -= (gsize) w;
  }
}

void
fake_agent_send (FakeAgent *fake, BoxAgentFrameType type, guint8 stream, guint32 channel,
                 const void *payload, gsize len)
{
  g_autoptr(GBytes) frame = box_agent_frame_build (type, stream, channel, payload, len);

  fake_agent_write (fake, g_bytes_get_data (frame, NULL), g_bytes_get_size (frame));
}

void
fake_agent_send_json (FakeAgent *fake, guint32 channel, const char *json)
{
  fake_agent_send (fake, BOX_AGENT_FRAME_CTRL, 0, channel, json, strlen (json));
}

gboolean
fake_agent_poll (FakeAgent *fake)
{
  guint8 buf[65536];
  ssize_t r = recv (fake->fd, buf, sizeof buf, MSG_DONTWAIT);

  if (r > 0) {
    box_agent_decoder_feed (fake->decoder, buf, (gsize) r);
    return TRUE;
  }
  g_assert_true (r < 0 && (errno == EAGAIN || errno == EINTR));
  /* let the client's writer run */
  if (!g_main_context_iteration (NULL, FALSE))
    g_usleep (1000);
  return FALSE;
}

void
fake_agent_read (FakeAgent *fake, BoxAgentFrameHeader *header, GBytes **payload)
{
  gint64 deadline = g_get_monotonic_time () + AGENT_TEST_TIMEOUT_S * G_USEC_PER_SEC;

  while (!box_agent_decoder_next (fake->decoder, header, payload)) {
    if (!fake_agent_poll (fake))
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
  }
}

JsonObject *
fake_agent_read_request (FakeAgent *fake)
{
  while (TRUE) {
    BoxAgentFrameHeader header;
    g_autoptr(GBytes) payload = NULL;
    g_autoptr(GError) error = NULL;
    JsonObject *msg;

    fake_agent_read (fake, &header, &payload);
    if (header.channel != 0 || header.type != BOX_AGENT_FRAME_CTRL)
      continue;
    msg = box_agent_parse_ctrl (g_bytes_get_data (payload, NULL), g_bytes_get_size (payload), &error);
    g_assert_no_error (error);
    return msg;
  }
}

void
fake_agent_reply_hello (FakeAgent *fake, JsonObject *hello)
{
  gint64 id = 0, window = 0;
  g_autofree char *json = NULL;

  g_assert_cmpstr (box_agent_json_get_string (hello, "op"), ==, "hello");
  g_assert_true (box_agent_json_get_int (hello, "id", &id));
  /* like the agent: the window asked for is the window in effect */
  if (!box_agent_json_get_int (hello, "window", &window))
    window = 256 * 1024;
  json = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"version\":1,\"agent\":\"fake\","
                          "\"boot_id\":\"b-1\",\"uptime_ms\":5,\"window\":%" G_GINT64_FORMAT ",\"nonce\":\"%s\"}",
                          id, window, box_agent_json_get_string (hello, "nonce"));
  fake_agent_send_json (fake, 0, json);
}

/* ---- the real agent ---- */

static gboolean
cancel_cb (gpointer data)
{
  g_cancellable_cancel (data);
  return G_SOURCE_REMOVE;
}

static void
on_closed (BoxAgentClient *client, GError *error, gpointer data)
{
  Agent *f = data;

  f->n_closed++;
  g_clear_error (&f->closed_error);
  f->closed_error = g_error_copy (error);
}

/* a test that fails half-way must not leave an agent behind */
static void
die_with_parent (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

void
agent_setup (Agent *f, gconstpointer data)
{
  const char *agent = g_getenv ("BOX_AGENT");
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocketAddress) addr = NULL;
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autofree char *path = NULL;

  if (agent == NULL || !g_file_test (agent, G_FILE_TEST_IS_EXECUTABLE)) {
    g_test_skip ("BOX_AGENT does not name the box-agent binary");
    return;
  }
  f->dir = g_dir_make_tmp ("box-agent-test-XXXXXX", &error);
  g_assert_no_error (error);
  path = g_build_filename (f->dir, "agent.sock", NULL);
  f->listener = g_socket_listener_new ();
  addr = g_unix_socket_address_new (path);
  g_socket_listener_add_address (f->listener, addr, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT,
                                 NULL, NULL, &error);
  g_assert_no_error (error);
  g_socket_listener_accept_async (f->listener, NULL, agent_test_store_result, &res);
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_subprocess_launcher_set_child_setup (launcher, die_with_parent, NULL, NULL);
  if (data != NULL) {
    /* the in-sandbox API socket, next to the host's */
    f->api_path = g_build_filename (f->dir, "api.sock", NULL);
    f->agent = g_subprocess_launcher_spawn (launcher, &error, agent, "--connect", path,
                                            "--api-socket", f->api_path, NULL);
  } else {
    f->agent = g_subprocess_launcher_spawn (launcher, &error, agent, "--connect", path, NULL);
  }
  g_assert_no_error (error);
  agent_test_wait_result (&res);
  f->conn = g_socket_listener_accept_finish (f->listener, res, NULL, &error);
  g_assert_no_error (error);
}

void
agent_teardown (Agent *f, gconstpointer data)
{
  g_autoptr(GAsyncResult) res = NULL;

  if (f->client != NULL) {
    BoxAgentClient *client = f->client;

    /* nothing keeps the client alive once its owner lets go */
    g_signal_handlers_disconnect_by_data (f->client, f);
    g_object_add_weak_pointer (G_OBJECT (client), (gpointer *) &client);
    g_clear_object (&f->client);
    g_assert_null (client);
  }
  if (f->conn != NULL)
    g_io_stream_close (G_IO_STREAM (f->conn), NULL, NULL);
  g_clear_object (&f->conn);
  if (f->agent != NULL) {
    /* the agent exits when the host closes the socket */
    g_autoptr(GCancellable) cancellable = g_cancellable_new ();
    guint timer = g_timeout_add_seconds (10, (GSourceFunc) cancel_cb, cancellable);

    g_subprocess_wait_async (f->agent, cancellable, agent_test_store_result, &res);
    agent_test_wait_result (&res);
    if (!g_subprocess_wait_finish (f->agent, res, NULL)) {
      /* the agent's bug, not the client's: with --connect it stays when
       * the host's close reaches it as a reset (unread data) */
      g_test_message ("the agent did not exit when the host closed the socket");
      g_subprocess_force_exit (f->agent);
    } else {
      g_source_remove (timer);
    }
  }
  g_clear_object (&f->agent);
  g_clear_object (&f->listener);
  if (f->dir != NULL) {
    g_autofree char *path = g_build_filename (f->dir, "agent.sock", NULL);

    g_unlink (path);
    if (f->api_path != NULL)
      g_unlink (f->api_path);
    g_rmdir (f->dir);
  }
  g_clear_pointer (&f->dir, g_free);
  g_clear_pointer (&f->api_path, g_free);
  g_clear_error (&f->closed_error);
}

gboolean
agent_connect (Agent *f)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GError) error = NULL;

  if (f->conn == NULL)
    return FALSE;
  f->client = box_agent_client_new (G_IO_STREAM (f->conn));
  g_signal_connect (f->client, "closed", G_CALLBACK (on_closed), f);
  box_agent_client_connect_async (f->client, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  g_assert_true (box_agent_client_connect_finish (f->client, res, &error));
  g_assert_no_error (error);
  return TRUE;
}

gboolean
agent_need_root (void)
{
  if (getuid () != 0) {
    g_test_skip ("the agent runs commands as root: needs root");
    return FALSE;
  }
  return TRUE;
}

JsonObject *
agent_call (Agent *f, const char *op, JsonObject *args, GError **error)
{
  g_autoptr(GAsyncResult) res = NULL;

  box_agent_client_call_async (f->client, op, args, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  return box_agent_client_call_finish (f->client, res, error);
}

void
agent_signal (Agent *f, int sig)
{
  const char *pid = g_subprocess_get_identifier (f->agent);

  /* NULL once it was reaped */
  g_assert_nonnull (pid);
  kill ((pid_t) atoi (pid), sig);
}
