/* agent-session-test.c: the typed exec, session and port operations
 * (box-agent-exec.h, BoxExecSession, BoxAgentStream) against the real
 * agent run on this host.  Sessions run commands as root: those tests
 * need root and skip otherwise. */
#include "config.h"

#include <signal.h>
#include <string.h>

#include "agent-test-util.h"
#include "box-agent-exec.h"
#include "box-error.h"

/* ---- a consumer of a session ---- */

typedef struct {
  GString *out[3];
  gboolean exited;
  int code;
  int sig;
  gboolean closed;
  guint touches;
  guint releases;
} Watch;

static void
watch_output (BoxExecSession *session, guint stream, GBytes *bytes, gpointer data)
{
  Watch *w = data;
  gsize len = 0;
  const char *p = g_bytes_get_data (bytes, &len);

  g_assert_true (stream == 1 || stream == 2);
  g_string_append_len (w->out[stream], p, len);
  box_exec_session_output_done (session, len);
}

static void
watch_exited (BoxExecSession *session, int code, int sig, gboolean timed_out, gpointer data)
{
  Watch *w = data;

  g_assert_false (w->exited);
  g_assert_false (w->closed);
  w->exited = TRUE;
  w->code = code;
  w->sig = sig;
}

static void
watch_closed (BoxExecSession *session, gpointer data)
{
  Watch *w = data;

  g_assert_false (w->closed);
  w->closed = TRUE;
}

static void
keeper_touch (gpointer data)
{
  ((Watch *) data)->touches++;
}

static void
keeper_release (gpointer data)
{
  ((Watch *) data)->releases++;
}

static const BoxAgentKeeper test_keeper = { keeper_touch, keeper_release };

static void
watch_init (Watch *w, BoxExecSession *session)
{
  memset (w, 0, sizeof *w);
  w->out[1] = g_string_new (NULL);
  w->out[2] = g_string_new (NULL);
  g_signal_connect (session, "output", G_CALLBACK (watch_output), w);
  g_signal_connect (session, "exited", G_CALLBACK (watch_exited), w);
  g_signal_connect (session, "closed", G_CALLBACK (watch_closed), w);
  box_exec_session_set_keeper (session, &test_keeper, w);
}

static void
watch_clear (Watch *w, BoxExecSession *session)
{
  g_signal_handlers_disconnect_by_data (session, w);
  g_string_free (w->out[1], TRUE);
  g_string_free (w->out[2], TRUE);
}

static BoxExecSession *
exec_session (Agent *f, const BoxExecStreamRequest *req, const char *id, GError **error)
{
  g_autoptr(GAsyncResult) res = NULL;

  box_agent_client_exec_session_async (f->client, req, id, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  return box_agent_client_exec_session_finish (f->client, res, error);
}

static BoxExecSession *
attach_session (Agent *f, const char *id, gint64 offset, GError **error)
{
  g_autoptr(GAsyncResult) res = NULL;

  box_agent_client_attach_session_async (f->client, id, offset, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  return box_agent_client_attach_session_finish (f->client, res, error);
}

static GPtrArray *
list_sessions (Agent *f)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GError) error = NULL;
  GPtrArray *list;

  box_agent_client_list_sessions_async (f->client, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  list = box_agent_client_list_sessions_finish (f->client, res, &error);
  g_assert_no_error (error);
  return list;
}

static gboolean
signal_session (Agent *f, const char *id, const char *name, GError **error)
{
  g_autoptr(GAsyncResult) res = NULL;

  box_agent_client_signal_session_async (f->client, id, name, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  return box_agent_client_signal_session_finish (f->client, res, error);
}

static const BoxSessionInfo *
find_session (GPtrArray *list, const char *id)
{
  for (guint i = 0; i < list->len; i++) {
    const BoxSessionInfo *info = g_ptr_array_index (list, i);

    if (g_strcmp0 (info->id, id) == 0)
      return info;
  }
  return NULL;
}

/* stdin in, stdout and stderr out, the exit status typed, then closed;
 * the keeper hears of it all and is released once */
static void
test_exec (Agent *f, gconstpointer data)
{
  char *argv[] = { "sh", "-c", "read x; echo \"got:$x\"; echo err >&2; exit 7", NULL };
  BoxExecStreamRequest req = { .argv = argv, .user = "root" };
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxExecSession) session = NULL;
  g_autoptr(GBytes) line = g_bytes_new_static ("hello\n", 6);
  g_autoptr(GAsyncResult) wres = NULL;
  Watch w;

  if (!agent_need_root () || !agent_connect (f))
    return;
  session = exec_session (f, &req, "s-test000001", &error);
  g_assert_no_error (error);
  watch_init (&w, session);
  g_assert_cmpstr (box_exec_session_get_id (session), ==, "s-test000001");
  g_assert_cmpint (box_exec_session_get_pid (session), >, 0);
  g_assert_cmpint (box_exec_session_get_offset (session), ==, 0);

  box_exec_session_write_stdin_async (session, line, NULL, agent_test_store_result, &wres);
  agent_test_wait_result (&wres);
  g_assert_true (box_exec_session_write_stdin_finish (session, wres, &error));
  g_assert_no_error (error);
  box_exec_session_close_stdin (session);
  AGENT_TEST_WAIT_FOR (w.closed);
  g_assert_true (w.exited);
  g_assert_cmpint (w.code, ==, 7);
  g_assert_cmpint (w.sig, ==, 0);
  g_assert_cmpstr (w.out[1]->str, ==, "got:hello\n");
  g_assert_cmpstr (w.out[2]->str, ==, "err\n");
  g_assert_true (box_exec_session_is_closed (session));
  g_assert_cmpuint (w.touches, >=, 3);
  g_assert_cmpuint (w.releases, ==, 1);
  box_exec_session_close (session);
  g_assert_cmpuint (w.releases, ==, 1);

  /* a command that cannot start is an error of the call */
  {
    char *missing[] = { "/nonexistent/cmd", NULL };
    BoxExecStreamRequest bad = { .argv = missing, .user = "root" };
    g_autoptr(BoxExecSession) none = exec_session (f, &bad, "s-test000002", &error);

    g_assert_null (none);
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  }
  watch_clear (&w, session);
}

/* the sandbox env under every exec's own */
static void
test_set_env (Agent *f, gconstpointer data)
{
  char *argv[] = { "sh", "-c", "echo \"$BOX_A-$BOX_B\"", NULL };
  g_autoptr(GHashTable) env = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GHashTable) own = g_hash_table_new (g_str_hash, g_str_equal);
  BoxExecStreamRequest req = { .argv = argv, .user = "root", .env = own };
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxExecSession) session = NULL;
  Watch w;

  if (!agent_need_root () || !agent_connect (f))
    return;
  g_hash_table_insert (env, "BOX_A", "sandbox");
  g_hash_table_insert (env, "BOX_B", "sandbox");
  g_hash_table_insert (own, "BOX_B", "own");
  box_agent_client_set_env_async (f->client, env, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  g_assert_true (box_agent_client_set_env_finish (f->client, res, &error));
  g_assert_no_error (error);
  session = exec_session (f, &req, "s-test000005", &error);
  g_assert_no_error (error);
  watch_init (&w, session);
  AGENT_TEST_WAIT_FOR (w.closed);
  g_assert_cmpstr (w.out[1]->str, ==, "sandbox-own\n");
  watch_clear (&w, session);
}

/* a TTY's size at start and after resize, and a signal by name */
static void
test_tty_signal (Agent *f, gconstpointer data)
{
  char *argv[] = { "sh", "-c", "trap 'stty size' WINCH; stty size; while :; do sleep 0.05; done", NULL };
  BoxExecStreamRequest req = { .argv = argv, .user = "root", .tty = TRUE, .cols = 80, .rows = 24 };
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxExecSession) session = NULL;
  Watch w;

  if (!agent_need_root () || !agent_connect (f))
    return;
  session = exec_session (f, &req, "s-test000003", &error);
  g_assert_no_error (error);
  watch_init (&w, session);
  AGENT_TEST_WAIT_FOR (strstr (w.out[1]->str, "24 80") != NULL);
  box_exec_session_resize (session, 100, 40);
  AGENT_TEST_WAIT_FOR (strstr (w.out[1]->str, "40 100") != NULL);
  box_exec_session_send_signal (session, "KILL");
  AGENT_TEST_WAIT_FOR (w.closed);
  g_assert_true (w.exited);
  g_assert_cmpint (w.code, ==, 128 + SIGKILL);
  g_assert_cmpint (w.sig, ==, SIGKILL);
  g_assert_cmpuint (w.releases, ==, 1);
  watch_clear (&w, session);
}

/* detach, list, attach with a replay offset, signal by session, exit seen
 * by the attached stream; unknown and exited sessions */
static void
test_attach (Agent *f, gconstpointer data)
{
  char *argv[] = { "sh", "-c", "echo one; exec sleep 60", NULL };
  BoxExecStreamRequest req = { .argv = argv, .user = "root", .detachable = TRUE };
  const char *id = "s-test000004";
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxExecSession) session = NULL;
  g_autoptr(BoxExecSession) attached = NULL;
  g_autoptr(GPtrArray) list = NULL;
  const BoxSessionInfo *info;
  Watch w, a;

  if (!agent_need_root () || !agent_connect (f))
    return;
  session = exec_session (f, &req, id, &error);
  g_assert_no_error (error);
  watch_init (&w, session);
  AGENT_TEST_WAIT_FOR (strcmp (w.out[1]->str, "one\n") == 0);
  /* detach: the keeper is released, nothing more is emitted */
  box_exec_session_close (session);
  g_assert_cmpuint (w.releases, ==, 1);
  g_assert_true (box_exec_session_is_closed (session));
  agent_test_spin (100);
  g_assert_false (w.closed);

  list = list_sessions (f);
  info = find_session (list, id);
  g_assert_nonnull (info);
  g_assert_cmpstr (info->argv[0], ==, "sh");
  g_assert_cmpstr (info->argv[2], ==, "echo one; exec sleep 60");
  g_assert_false (info->tty);
  g_assert_false (info->exited);
  g_assert_false (info->has_exit_code);
  g_assert_cmpint (info->pid, >, 0);
  g_assert_cmpint (info->started_at, >, (g_get_real_time () - 600 * G_USEC_PER_SEC));
  g_assert_cmpint (info->started_at % 1000, ==, 0);
  g_clear_pointer (&list, g_ptr_array_unref);

  /* the replay from byte 2 of the output */
  attached = attach_session (f, id, 2, &error);
  g_assert_no_error (error);
  watch_init (&a, attached);
  g_assert_cmpstr (box_exec_session_get_id (attached), ==, id);
  g_assert_cmpint (box_exec_session_get_offset (attached), ==, 2);
  AGENT_TEST_WAIT_FOR (strcmp (a.out[1]->str, "e\n") == 0);
  list = list_sessions (f);
  g_assert_true (find_session (list, id)->attached);
  g_clear_pointer (&list, g_ptr_array_unref);

  g_assert_true (signal_session (f, id, "TERM", &error));
  g_assert_no_error (error);
  AGENT_TEST_WAIT_FOR (a.closed);
  g_assert_true (a.exited);
  g_assert_cmpint (a.code, ==, 128 + SIGTERM);
  g_assert_cmpint (a.releases, ==, 1);

  list = list_sessions (f);
  info = find_session (list, id);
  g_assert_true (info->exited);
  g_assert_true (info->has_exit_code);
  g_assert_cmpint (info->exit_code, ==, 128 + SIGTERM);

  /* an exited session: a conflict to signal, a replay to attach */
  g_assert_false (signal_session (f, id, "TERM", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_clear_error (&error);
  {
    g_autoptr(BoxExecSession) again = attach_session (f, id, -1, &error);
    Watch r;

    g_assert_no_error (error);
    watch_init (&r, again);
    AGENT_TEST_WAIT_FOR (r.closed);
    g_assert_cmpstr (r.out[1]->str, ==, "one\n");
    g_assert_true (r.exited);
    watch_clear (&r, again);
  }

  /* unknown sessions, whether well-formed or not */
  g_assert_false (signal_session (f, "s-zzzzzzzzzz", "TERM", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "no session s-zzzzzzzzzz in this sandbox");
  g_clear_error (&error);
  g_assert_null (attach_session (f, "nope", 0, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "no session nope in this sandbox");
  g_clear_error (&error);
  g_assert_null (attach_session (f, "s-zzzzzzzzzz", 0, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  watch_clear (&a, attached);
  watch_clear (&w, session);
}

/* ---- ports ---- */

typedef struct {
  GSocket *socket;
  GString *got;
  gboolean eof;
} Peer;

/* what the peer can read now, without waiting */
static gboolean
peer_poll (Peer *p)
{
  char buf[4096];
  gssize n;

  while (!p->eof && (n = g_socket_receive (p->socket, buf, sizeof buf, NULL, NULL)) >= 0) {
    if (n == 0)
      p->eof = TRUE;
    g_string_append_len (p->got, buf, n);
  }
  return p->eof;
}

static guint
find_listener (GPtrArray *ports, guint port)
{
  guint found = 0;

  for (guint i = 0; i < ports->len; i++) {
    const BoxPortListener *l = g_ptr_array_index (ports, i);

    if (l->port == port && g_strcmp0 (l->address, "127.0.0.1") == 0)
      found++;
  }
  return found;
}

/* a listener of ours listed, then a connection through the stream that
 * half-closes both ways */
static void
test_ports (Agent *f, gconstpointer data)
{
  g_autoptr(GSocketListener) listener = g_socket_listener_new ();
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr(GSocketAddress) bound = NULL;
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) ports = NULL;
  g_autoptr(BoxAgentStream) stream = NULL;
  g_autoptr(GSocketConnection) conn = NULL;
  GOutputStream *out;
  GInputStream *in;
  Peer peer = { NULL, g_string_new (NULL), FALSE };
  GString *back = g_string_new (NULL);
  gboolean back_eof = FALSE;
  guint port;

  if (!agent_connect (f))
    return;
  g_assert_true (g_socket_listener_add_address (listener, any, G_SOCKET_TYPE_STREAM,
                                                G_SOCKET_PROTOCOL_TCP, NULL, &bound, &error));
  g_assert_no_error (error);
  port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));

  box_agent_client_list_ports_async (f->client, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  ports = box_agent_client_list_ports_finish (f->client, res, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (find_listener (ports, port), ==, 1);
  g_clear_object (&res);

  box_agent_client_port_connect_async (f->client, port, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  stream = box_agent_client_port_connect_finish (f->client, res, &error);
  g_assert_no_error (error);
  g_assert_true (G_IS_IO_STREAM (stream));
  g_clear_object (&res);
  g_socket_listener_accept_async (listener, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  conn = g_socket_listener_accept_finish (listener, res, NULL, &error);
  g_assert_no_error (error);
  peer.socket = g_socket_connection_get_socket (conn);
  g_socket_set_blocking (peer.socket, FALSE);

  /* host to peer, then the host's half-close */
  out = g_io_stream_get_output_stream (G_IO_STREAM (stream));
  in = g_io_stream_get_input_stream (G_IO_STREAM (stream));
  g_assert_cmpint (g_pollable_output_stream_write_nonblocking (G_POLLABLE_OUTPUT_STREAM (out), "ping", 4,
                                                               NULL, &error), ==, 4);
  g_assert_true (g_output_stream_close (out, NULL, &error));
  AGENT_TEST_WAIT_FOR (peer_poll (&peer));
  g_assert_cmpstr (peer.got->str, ==, "ping");

  /* the answer still comes after the half-close, then the peer's EOF */
  g_assert_cmpint (g_socket_send (peer.socket, "pong", 4, NULL, &error), ==, 4);
  g_assert_true (g_socket_shutdown (peer.socket, FALSE, TRUE, &error));
  while (!back_eof) {
    char buf[64];
    gssize n;

    g_clear_error (&error);
    n = g_pollable_input_stream_read_nonblocking (G_POLLABLE_INPUT_STREAM (in), buf, sizeof buf,
                                                  NULL, &error);
    if (n < 0) {
      g_assert_error (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK);
      g_main_context_iteration (NULL, TRUE);
      continue;
    }
    g_string_append_len (back, buf, n);
    back_eof = n == 0;
  }
  g_clear_error (&error);
  g_assert_cmpstr (back->str, ==, "pong");
  g_assert_true (g_io_stream_close (G_IO_STREAM (stream), NULL, &error));

  /* nothing listens any more */
  g_socket_listener_close (listener);
  g_clear_object (&res);
  box_agent_client_port_connect_async (f->client, port, NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  g_assert_null (box_agent_client_port_connect_finish (f->client, res, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_PORT_CLOSED);
  g_string_free (peer.got, TRUE);
  g_string_free (back, TRUE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  agent_test_init ();
  signal (SIGPIPE, SIG_IGN);

  g_test_add ("/agent-session/exec", Agent, NULL, agent_setup, test_exec, agent_teardown);
  g_test_add ("/agent-session/set-env", Agent, NULL, agent_setup, test_set_env, agent_teardown);
  g_test_add ("/agent-session/tty-signal", Agent, NULL, agent_setup, test_tty_signal, agent_teardown);
  g_test_add ("/agent-session/attach", Agent, NULL, agent_setup, test_attach, agent_teardown);
  g_test_add ("/agent-session/ports", Agent, NULL, agent_setup, test_ports, agent_teardown);
  return g_test_run ();
}
