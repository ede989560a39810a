/* box-stream.c: an exec or attach WebSocket joined to this terminal.
 *
 * Frames (spec "Exec: streaming"): binary frames carry a tag byte, 0 stdin
 * (the single byte 4 is stdin EOF) towards the sandbox, 1 stdout and 2
 * stderr back; text frames are JSON control messages (started, attached,
 * exit, error from the server; resize and signal from us).
 *
 * With a TTY and stdin (-it) the local terminal is put in raw mode
 * (restored on every way out: the end of the session, a detach, a signal,
 * exit() through atexit), and Ctrl-C is an input byte like any other; with
 * a TTY the window's size goes with the request and after every SIGWINCH.
 * Otherwise exec passes SIGINT and SIGTERM to the command as signal frames
 * (attach does not: there they end box, which leaves the session running).
 * A detachable session is left running by the detach keys (default Ctrl-P
 * Ctrl-Q, raw mode only), which close the socket.
 *
 * Stdin is read only while libsoup's send queue is below
 * BOX_CLI_WS_HIGH_WATER (see box-ws.c); output is written to stdout and
 * stderr before the next frame is read, so a slow terminal slows the
 * command through the server's flow control.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>
#include <glib/gi18n.h>
#include <glib-unix.h>
#include <gio/gunixinputstream.h>

#include "box-cli.h"

#define STDIN_CHUNK (32 * 1024)
#define CLOSE_WAIT_MS 2000

/* ---- the terminal ------------------------------------------------------ */

static struct termios saved_termios, raw_termios;
static gboolean terminal_raw;
static int cont_pipe[2] = { -1, -1 };   /* SIGCONT -> the main loop */

static void
terminal_restore (void)
{
  if (!terminal_raw)
    return;
  tcsetattr (STDIN_FILENO, TCSADRAIN, &saved_termios);
  terminal_raw = FALSE;
}

static gboolean
terminal_make_raw (GError **error)
{
  static gboolean atexit_done;
  struct termios raw;

  if (tcgetattr (STDIN_FILENO, &saved_termios) < 0) {
    int saved_errno = errno;

    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL,
                 _("Cannot read the terminal's settings: %s"), g_strerror (saved_errno));
    return FALSE;
  }
  if (!atexit_done) {
    atexit (terminal_restore);
    atexit_done = TRUE;
  }
  raw = saved_termios;
  cfmakeraw (&raw);
  raw_termios = raw;
  if (tcsetattr (STDIN_FILENO, TCSADRAIN, &raw) < 0) {
    int saved_errno = errno;

    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL,
                 _("Cannot put the terminal in raw mode: %s"), g_strerror (saved_errno));
    return FALSE;
  }
  terminal_raw = TRUE;
  return TRUE;
}

gboolean
box_cli_parse_detach_keys (const char *spec, GByteArray *out, GError **error)
{
  g_auto(GStrv) keys = g_strsplit (spec, ",", -1);

  for (guint i = 0; keys[i] != NULL; i++) {
    const char *key = g_strstrip (keys[i]);
    guint8 byte;

    if (g_str_has_prefix (key, "ctrl-") && strlen (key) == 6 &&
        ((key[5] >= 'a' && key[5] <= 'z') || strchr ("@[\\]^_", key[5]) != NULL)) {
      byte = (guint8) (g_ascii_toupper (key[5]) & 0x1f);
    } else if (strlen (key) == 1 && g_ascii_isprint (key[0])) {
      byte = (guint8) key[0];
    } else {
      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                   _("Bad detach key “%s”: use ctrl-LETTER or a single character."), key);
      return FALSE;
    }
    g_byte_array_append (out, &byte, 1);
  }
  if (out->len == 0) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE, _("No detach keys given."));
    return FALSE;
  }
  return TRUE;
}

/* ---- the session ------------------------------------------------------- */

typedef struct {
  BoxCli                    *cli;
  BoxCliWs                  *ws;
  const BoxCliStreamOptions *options;
  GMainLoop                 *loop;
  GInputStream              *in;
  GCancellable              *cancellable;
  GByteArray                *detach_keys;
  guint                      detach_matched;
  guint8                     buffer[STDIN_CHUNK];
  gboolean                   reading;     /* a stdin read is under way */
  gboolean                   stdin_done;  /* EOF sent, or no stdin */
  gboolean                   finished;
  gboolean                   got_exit;
  gboolean                   detached;
  int                        status;
  char                      *session;
  GError                    *error;       /* why it ended, when not by an exit frame */
  guint                      signal_ids[4];
  guint                      close_timeout;
} Stream;

static void stream_read_stdin (Stream *stream);

static void
stream_finish (Stream *stream)
{
  if (stream->finished)
    return;
  stream->finished = TRUE;
  g_cancellable_cancel (stream->cancellable);
  g_main_loop_quit (stream->loop);
}

static gboolean
close_timed_out (gpointer user_data)
{
  Stream *stream = user_data;

  stream->close_timeout = 0;
  stream_finish (stream);
  return G_SOURCE_REMOVE;
}

/* Closes the socket and ends the loop once it closed (or soon anyway). */
static void
stream_close (Stream *stream, gushort code)
{
  SoupWebsocketConnection *conn = box_cli_ws_connection (stream->ws);

  if (soup_websocket_connection_get_state (conn) == SOUP_WEBSOCKET_STATE_OPEN)
    soup_websocket_connection_close (conn, code, NULL);
  if (stream->close_timeout == 0)
    stream->close_timeout = g_timeout_add (CLOSE_WAIT_MS, close_timed_out, stream);
  g_cancellable_cancel (stream->cancellable);
}

static gboolean
write_all (int fd, const guint8 *data, gsize len)
{
  while (len > 0) {
    ssize_t n = write (fd, data, len);

    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN) {
      struct pollfd pfd = { .fd = fd, .events = POLLOUT };

      poll (&pfd, 1, -1);
      continue;
    }
    if (n <= 0)
      return FALSE;
    data += n;
    len -= (gsize) n;
  }
  return TRUE;
}

static void
send_window_size (Stream *stream)
{
  struct winsize size = { 0 };
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) node = NULL;

  if (ioctl (STDIN_FILENO, TIOCGWINSZ, &size) < 0 || size.ws_col == 0 || size.ws_row == 0)
    return;
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, "resize");
  json_builder_set_member_name (builder, "cols");
  json_builder_add_int_value (builder, size.ws_col);
  json_builder_set_member_name (builder, "rows");
  json_builder_add_int_value (builder, size.ws_row);
  json_builder_end_object (builder);
  node = json_builder_get_root (builder);
  box_cli_ws_send_json (stream->ws, node);
}

static void
send_signal (Stream *stream, const char *name)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) node = NULL;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, "signal");
  json_builder_set_member_name (builder, "signal");
  json_builder_add_string_value (builder, name);
  json_builder_end_object (builder);
  node = json_builder_get_root (builder);
  box_cli_ws_send_json (stream->ws, node);
}

static void
on_text (Stream *stream, GBytes *message)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  gsize len = 0;
  const char *data = g_bytes_get_data (message, &len);
  JsonObject *object;
  const char *type;

  if (!json_parser_load_from_data (parser, data, (gssize) len, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return;
  object = json_node_get_object (json_parser_get_root (parser));
  type = box_cli_json_string (object, "type");
  if (g_strcmp0 (type, "started") == 0 || g_strcmp0 (type, "attached") == 0) {
    g_free (stream->session);
    stream->session = g_strdup (box_cli_json_string (object, "session"));
    if (stream->options->tty)
      send_window_size (stream);
  } else if (g_strcmp0 (type, "exit") == 0) {
    stream->got_exit = TRUE;
    stream->status = (int) CLAMP (box_cli_json_int (object, "code", 255), 0, 255);
    stream_close (stream, SOUP_WEBSOCKET_CLOSE_NORMAL);
  } else if (g_strcmp0 (type, "error") == 0) {
    /* {type: error, error: {code, message}}: the shape of an error answer */
    g_clear_error (&stream->error);
    if (box_cli_json_object (object, "error") != NULL)
      stream->error = box_cli_error_from_answer (500, NULL, message);
    else
      stream->error = g_error_new (BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                                   _("The API sent an error frame without an error"));
    stream->status = box_cli_start_error_status (stream->error);
    stream_close (stream, SOUP_WEBSOCKET_CLOSE_NORMAL);
  }
}

static void
on_message (SoupWebsocketConnection *conn, SoupWebsocketDataType type, GBytes *message,
            gpointer user_data)
{
  Stream *stream = user_data;
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (message, &len);

  if (type == SOUP_WEBSOCKET_DATA_TEXT) {
    on_text (stream, message);
    return;
  }
  if (len == 0 || stream->detached)
    return;
  if ((data[0] == 1 || data[0] == 2) &&
      !write_all (data[0] == 1 ? STDOUT_FILENO : STDERR_FILENO, data + 1, len - 1)) {
    /* nobody reads our output any more: end like a process killed by SIGPIPE */
    stream->status = 128 + SIGPIPE;
    stream->got_exit = TRUE;
    stream_close (stream, SOUP_WEBSOCKET_CLOSE_GOING_AWAY);
  }
}

static void
on_closed (SoupWebsocketConnection *conn, gpointer user_data)
{
  Stream *stream = user_data;
  gushort code = soup_websocket_connection_get_close_code (conn);

  if (!stream->got_exit && !stream->detached && stream->error == NULL) {
    if (code == SOUP_WEBSOCKET_CLOSE_SERVER_ERROR)
      stream->error = g_error_new (BOX_CLI_ERROR, BOX_CLI_ERROR_LOST,
                                   _("The sandbox went away (paused, stopped, deleted or restored); "
                                     "the command's exit status is unknown."));
    else
      stream->error = g_error_new (BOX_CLI_ERROR, BOX_CLI_ERROR_LOST,
                                   _("The connection closed (code %u) before the command ended; "
                                     "its exit status is unknown."), code);
  }
  stream_finish (stream);
}

static void
on_error (SoupWebsocketConnection *conn, GError *error, gpointer user_data)
{
  Stream *stream = user_data;

  if (stream->error == NULL && !stream->got_exit && !stream->detached)
    stream->error = box_cli_error_network (stream->cli->url, error);
}

/* ---- stdin ------------------------------------------------------------- */

static void
send_stdin (Stream *stream, const guint8 *data, gsize len)
{
  g_autoptr(GByteArray) out = NULL;

  if (stream->detach_keys == NULL) {
    box_cli_ws_send (stream->ws, 0, data, len);
    return;
  }
  /* hold back a prefix of the detach keys until it is complete or broken */
  out = g_byte_array_sized_new ((guint) len + stream->detach_keys->len);
  for (gsize i = 0; i < len; i++) {
    if (data[i] == stream->detach_keys->data[stream->detach_matched]) {
      stream->detach_matched++;
      if (stream->detach_matched == stream->detach_keys->len) {
        if (out->len > 0)
          box_cli_ws_send (stream->ws, 0, out->data, out->len);
        stream->detached = TRUE;
        stream_close (stream, SOUP_WEBSOCKET_CLOSE_NORMAL);
        return;
      }
      continue;
    }
    if (stream->detach_matched > 0) {
      g_byte_array_append (out, stream->detach_keys->data, stream->detach_matched);
      stream->detach_matched = 0;
      if (data[i] == stream->detach_keys->data[0]) {
        stream->detach_matched = 1;
        continue;
      }
    }
    g_byte_array_append (out, &data[i], 1);
  }
  if (out->len > 0)
    box_cli_ws_send (stream->ws, 0, out->data, out->len);
}

static void
on_stdin_read (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Stream *stream = user_data;
  g_autoptr(GError) error = NULL;
  gssize n = g_input_stream_read_finish (G_INPUT_STREAM (source), result, &error);

  stream->reading = FALSE;
  if (stream->finished || g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  if (n <= 0) {
    stream->stdin_done = TRUE;
    if (stream->options->tty) {
      /* the terminal hung up */
      stream_close (stream, SOUP_WEBSOCKET_CLOSE_GOING_AWAY);
      return;
    }
    box_cli_ws_send (stream->ws, 4, NULL, 0);
    return;
  }
  send_stdin (stream, stream->buffer, (gsize) n);
  stream_read_stdin (stream);
}

static void
stream_read_stdin (Stream *stream)
{
  if (stream->reading || stream->stdin_done || stream->finished || stream->in == NULL)
    return;
  if (box_cli_ws_pending (stream->ws) > BOX_CLI_WS_HIGH_WATER)
    return;   /* on_drained() goes on */
  stream->reading = TRUE;
  g_input_stream_read_async (stream->in, stream->buffer, sizeof stream->buffer,
                             G_PRIORITY_DEFAULT, stream->cancellable, on_stdin_read, stream);
}

static void
on_drained (gpointer user_data)
{
  Stream *stream = user_data;

  if (!stream->reading && box_cli_ws_pending (stream->ws) <= BOX_CLI_WS_HIGH_WATER / 2)
    stream_read_stdin (stream);
}

/* ---- signals ----------------------------------------------------------- */

static gboolean
on_winch (gpointer user_data)
{
  send_window_size (user_data);
  return G_SOURCE_CONTINUE;
}

/* Stopped in raw mode (only kill(1) sends SIGTSTP then: the terminal's
 * ^Z goes to the command): the terminal as it was, then stop. */
static void
on_tstp_signal (int signum)
{
  int saved_errno = errno;

  tcsetattr (STDIN_FILENO, TCSADRAIN, &saved_termios);
  raise (SIGSTOP);
  errno = saved_errno;
}

/* Continued (after SIGTSTP or SIGSTOP, the shell's fg): raw again, whatever
 * the shell did to the terminal meanwhile; the loop sends the size. */
static void
on_cont_signal (int signum)
{
  int saved_errno = errno;

  if (terminal_raw)
    tcsetattr (STDIN_FILENO, TCSADRAIN, &raw_termios);
  if (cont_pipe[1] >= 0 && write (cont_pipe[1], "c", 1) < 0) {
    /* full: a wake-up is pending anyway */
  }
  errno = saved_errno;
}

static gboolean
on_cont (gint fd, GIOCondition condition, gpointer user_data)
{
  char buf[64];

  while (read (fd, buf, sizeof buf) > 0)
    ;
  send_window_size (user_data);
  return G_SOURCE_CONTINUE;
}

/* The stop/continue handling of raw mode: the source of the loop's side. */
static guint
raw_stop_install (Stream *stream)
{
  struct sigaction sa = { 0 };

  if (cont_pipe[0] < 0 && !g_unix_open_pipe (cont_pipe, FD_CLOEXEC, NULL))
    return 0;
  g_unix_set_fd_nonblocking (cont_pipe[0], TRUE, NULL);
  g_unix_set_fd_nonblocking (cont_pipe[1], TRUE, NULL);
  sigemptyset (&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sa.sa_handler = on_tstp_signal;
  sigaction (SIGTSTP, &sa, NULL);
  sa.sa_handler = on_cont_signal;
  sigaction (SIGCONT, &sa, NULL);
  return g_unix_fd_add (cont_pipe[0], G_IO_IN, on_cont, stream);
}

static void
raw_stop_remove (guint source)
{
  signal (SIGTSTP, SIG_DFL);
  signal (SIGCONT, SIG_DFL);
  if (source != 0)
    g_source_remove (source);
}

static gboolean
on_int (gpointer user_data)
{
  send_signal (user_data, "INT");
  return G_SOURCE_CONTINUE;
}

static gboolean
on_term (gpointer user_data)
{
  send_signal (user_data, "TERM");
  return G_SOURCE_CONTINUE;
}

/* Ends box as the signal would, but with the terminal restored and the
 * socket closed (a non-detachable command gets SIGHUP). */
static void
end_by_signal (Stream *stream, int signum)
{
  stream->status = 128 + signum;
  stream->got_exit = TRUE;
  stream_close (stream, SOUP_WEBSOCKET_CLOSE_GOING_AWAY);
}

static gboolean
on_hup (gpointer user_data)
{
  /* our terminal went away */
  end_by_signal (user_data, SIGHUP);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_raw_int (gpointer user_data)
{
  end_by_signal (user_data, SIGINT);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_raw_term (gpointer user_data)
{
  end_by_signal (user_data, SIGTERM);
  return G_SOURCE_CONTINUE;
}

int
box_cli_stream_run (BoxCli *cli, BoxCliWs *ws, const BoxCliStreamOptions *options)
{
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GError) error = NULL;
  SoupWebsocketConnection *conn = box_cli_ws_connection (ws);
  Stream stream = { .cli = cli, .ws = ws, .options = options, .loop = loop,
                    .cancellable = cancellable, .status = BOX_CLI_EXIT_BOX_FAILED };
  /* raw only when our keys go to the command: else Ctrl-C must stay ours */
  gboolean raw = options->tty && options->stdin_open;
  gulong ids[3];
  guint cont_source = 0;
  int status;

  if (raw && !terminal_make_raw (&error))
    return box_cli_fail (cli, error);
  if (raw)
    cont_source = raw_stop_install (&stream);
  if (raw && options->detachable) {
    stream.detach_keys = g_byte_array_new ();
    if (!box_cli_parse_detach_keys (options->detach_keys != NULL ? options->detach_keys
                                                                 : "ctrl-p,ctrl-q",
                                    stream.detach_keys, &error)) {
      raw_stop_remove (cont_source);
      terminal_restore ();
      g_byte_array_unref (stream.detach_keys);
      return box_cli_fail (cli, error);
    }
  }
  if (options->stdin_open)
    stream.in = g_unix_input_stream_new (STDIN_FILENO, FALSE);
  else
    stream.stdin_done = TRUE;

  ids[0] = g_signal_connect (conn, "message", G_CALLBACK (on_message), &stream);
  ids[1] = g_signal_connect (conn, "closed", G_CALLBACK (on_closed), &stream);
  ids[2] = g_signal_connect (conn, "error", G_CALLBACK (on_error), &stream);
  box_cli_ws_set_drained (ws, on_drained, &stream);
  if (options->tty)
    stream.signal_ids[0] = g_unix_signal_add (SIGWINCH, on_winch, &stream);
  if (raw) {
    /* only kill(1) sends these in raw mode: end, with the terminal restored */
    stream.signal_ids[1] = g_unix_signal_add (SIGINT, on_raw_int, &stream);
    stream.signal_ids[3] = g_unix_signal_add (SIGTERM, on_raw_term, &stream);
  } else if (options->forward_signals) {
    stream.signal_ids[1] = g_unix_signal_add (SIGINT, on_int, &stream);
    stream.signal_ids[3] = g_unix_signal_add (SIGTERM, on_term, &stream);
  }
  stream.signal_ids[2] = g_unix_signal_add (SIGHUP, on_hup, &stream);

  stream_read_stdin (&stream);
  if (soup_websocket_connection_get_state (conn) == SOUP_WEBSOCKET_STATE_OPEN)
    g_main_loop_run (loop);

  for (guint i = 0; i < G_N_ELEMENTS (stream.signal_ids); i++) {
    if (stream.signal_ids[i] != 0)
      g_source_remove (stream.signal_ids[i]);
  }
  if (raw)
    raw_stop_remove (cont_source);
  if (stream.close_timeout != 0)
    g_source_remove (stream.close_timeout);
  for (guint i = 0; i < G_N_ELEMENTS (ids); i++)
    g_signal_handler_disconnect (conn, ids[i]);
  box_cli_ws_set_drained (ws, NULL, NULL);
  /* a read still under way finishes (cancelled) before the stream goes */
  while (stream.reading)
    g_main_context_iteration (NULL, TRUE);
  g_clear_object (&stream.in);
  terminal_restore ();

  if (stream.detached) {
    g_printerr ("\n");
    if (stream.session != NULL)
      g_printerr (_("Detached from session %s; it goes on running. Re-attach with:\n"
                    "  box attach %s %s\n"), stream.session, options->sandbox, stream.session);
    status = BOX_CLI_EXIT_OK;
  } else if (stream.got_exit) {
    status = stream.status;
  } else if (stream.error != NULL && stream.status != BOX_CLI_EXIT_BOX_FAILED) {
    /* the command could not start: 126 or 127 */
    g_printerr ("box: %s (%s)\n", stream.error->message,
                stream.error->domain == BOX_ERROR ? box_error_code_name (stream.error->code) : "");
    status = stream.status;
  } else if (stream.error != NULL) {
    status = box_cli_fail (cli, stream.error);
    if (options->detachable && stream.session != NULL &&
        g_error_matches (stream.error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOST))
      g_printerr (_("The detachable session %s may be attached again after a wake:\n"
                    "  box attach %s %s\n"), stream.session, options->sandbox, stream.session);
  } else {
    status = BOX_CLI_EXIT_BOX_FAILED;
  }
  g_clear_pointer (&stream.detach_keys, g_byte_array_unref);
  g_clear_pointer (&stream.session, g_free);
  g_clear_error (&stream.error);
  return status;
}
