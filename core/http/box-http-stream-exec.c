/* box-http-stream-exec.c: streaming exec and sessions.
 *
 *   GET  /v1/sandboxes/{sandbox}/exec                            WebSocket
 *   GET  /v1/sandboxes/{sandbox}/exec/sessions                   {sessions: [Session]}
 *   GET  /v1/sandboxes/{sandbox}/exec/sessions/{session}         WebSocket (attach)
 *   POST /v1/sandboxes/{sandbox}/exec/sessions/{session}/signal  204
 *
 * and the bridge between a WebSocket and a BoxExecSession that the exec
 * socket and attach share.
 *
 * Order of a WebSocket route: the upgrade check (400), the query (400), the
 * hold (404 no such sandbox, 503 ...), for attach the agent's attach (404
 * unknown session) -- all plain HTTP errors -- then the upgrade.  The exec
 * itself is asked for before the upgrade too, but a command that cannot
 * start is an `error` frame after it (then close 1000), as the spec wants.
 *
 * Flow control (see box-http-ws.h): output of the session goes to the
 * socket as it comes, and is acknowledged (box_exec_session_output_done())
 * only once the socket took the bytes (::written), so boxd holds at most
 * one channel window (1 MiB) per stream however slow the client; stdin is
 * written to the session, and the socket stops being read while more than
 * BOX_HTTP_WS_BRIDGE_INPUT_HIGH bytes wait to be taken (the bridge and the
 * hold before it are box-http-ws-bridge.c, shared with ports/connect).
 */
#include "config.h"

#include <string.h>

#include "box-http-util.h"
#include "box-http-ws-bridge.h"
#include "box-json-private.h"
#include "box-requests.h"
#include "box-validate.h"

enum {
  TAG_STDIN = 0,
  TAG_STDOUT = 1,
  TAG_STDERR = 2,
  TAG_EOF = 4,
};

/* ---- the bridge: a WebSocket over a session ---------------------------- */

typedef struct {
  BoxHttpWsBridge *bridge;
  BoxExecSession  *session;
  gboolean         session_closed;
  gboolean         exited;         /* the exit frame went out */
} Bridge;

static void
bridge_free (gpointer peer)
{
  Bridge *b = peer;

  g_signal_handlers_disconnect_by_data (b->session, b);
  g_clear_object (&b->session);
  g_free (b);
}

/* ---- sandbox to client ---- */

static void
on_output (BoxExecSession *session, guint stream, GBytes *bytes, gpointer user_data)
{
  Bridge *b = user_data;
  BoxHttpWs *ws = box_http_ws_bridge_get_ws (b->bridge);
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (bytes, &len);

  if (box_http_ws_bridge_is_ws_closed (b->bridge) || !box_http_ws_is_open (ws)) {
    /* nobody to give it to: let the producer go on */
    box_exec_session_output_done (session, len);
    return;
  }
  /* acknowledged once the socket took the bytes (::written) */
  box_http_ws_send_binary (ws, stream == 2 ? TAG_STDERR : TAG_STDOUT, data, len, len);
}

static void
on_exited (BoxExecSession *session, int code, int sig, gboolean timed_out, gpointer user_data)
{
  Bridge *b = user_data;
  g_autoptr(JsonBuilder) builder = NULL;
  g_autoptr(JsonNode) node = NULL;

  b->exited = TRUE;
  builder = json_builder_new ();
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, "exit");
  json_builder_set_member_name (builder, "code");
  json_builder_add_int_value (builder, code);
  json_builder_end_object (builder);
  node = json_builder_get_root (builder);
  box_http_ws_send_json (box_http_ws_bridge_get_ws (b->bridge), node);
  box_http_ws_bridge_close (b->bridge, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
}

static void
on_session_closed (BoxExecSession *session, gpointer user_data)
{
  Bridge *b = user_data;

  b->session_closed = TRUE;
  box_http_ws_bridge_peer_done (b->bridge);
  if (!box_http_ws_bridge_is_ws_closed (b->bridge)) {
    if (!b->exited)
      /* no exit: the sandbox or its agent went away under the session */
      box_http_ws_bridge_close (b->bridge, SOUP_WEBSOCKET_CLOSE_SERVER_ERROR,
                                "the session's stream ended");
    else
      box_http_ws_bridge_close (b->bridge, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
  }
  box_http_ws_bridge_maybe_free (b->bridge);
}

static void
on_ws_written (BoxHttpWsBridge *bridge, gpointer peer, guint64 credit)
{
  Bridge *b = peer;

  box_exec_session_output_done (b->session, (gsize) credit);
}

/* ---- client to sandbox ---- */

typedef struct {
  Bridge *bridge;
  gsize   len;
} StdinWrite;

static void
stdin_written (GObject *source, GAsyncResult *result, gpointer user_data)
{
  StdinWrite *w = user_data;
  Bridge *b = w->bridge;
  g_autoptr(GError) error = NULL;

  if (!box_exec_session_write_stdin_finish (BOX_EXEC_SESSION (source), result, &error))
    g_debug ("session %s: stdin: %s", box_exec_session_get_id (b->session), error->message);
  box_http_ws_bridge_input_taken (b->bridge, w->len);
  g_free (w);
  box_http_ws_bridge_maybe_free (b->bridge);
}

static void
write_stdin (Bridge *b, const guint8 *data, gsize len)
{
  g_autoptr(GBytes) bytes = NULL;
  StdinWrite *w;

  if (len == 0)
    return;
  bytes = g_bytes_new (data, len);
  w = g_new0 (StdinWrite, 1);
  w->bridge = b;
  w->len = len;
  box_http_ws_bridge_input_add (b->bridge, len);
  box_exec_session_write_stdin_async (b->session, bytes, NULL, stdin_written, w);
}

/* A string member of a control frame, or NULL. */
static const char *
ctrl_string (JsonObject *obj, const char *name)
{
  JsonNode *node = box_json_member (obj, name);

  return node != NULL && box_json_is_string (node) ? json_node_get_string (node) : NULL;
}

/* An integer member of a control frame, or -1. */
static gint64
ctrl_int (JsonObject *obj, const char *name)
{
  gboolean present = FALSE;
  gint64 n = -1;

  if (!box_json_get_int (obj, name, name, &present, &n, NULL) || !present)
    return -1;
  return n;
}

/* {"type": "resize", "cols", "rows"}, {"type": "signal", "signal"} */
static void
handle_control (Bridge *b, GBytes *message)
{
  g_autoptr(GError) error = NULL;
  gsize len = 0;
  const char *text = g_bytes_get_data (message, &len);
  g_autoptr(JsonNode) node = box_json_parse_body (text, len, FALSE, &error);
  JsonObject *obj;
  const char *type;

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node)) {
    g_debug ("session: a control frame that is no JSON object");
    return;
  }
  obj = json_node_get_object (node);
  type = ctrl_string (obj, "type");
  if (g_strcmp0 (type, "resize") == 0) {
    gint64 cols = ctrl_int (obj, "cols");
    gint64 rows = ctrl_int (obj, "rows");

    if (cols >= 1 && cols <= 65535 && rows >= 1 && rows <= 65535)
      box_exec_session_resize (b->session, (guint) cols, (guint) rows);
  } else if (g_strcmp0 (type, "signal") == 0) {
    box_exec_session_send_signal (b->session, ctrl_string (obj, "signal"));
  } else {
    g_debug ("session: unknown control frame type %s", type);
  }
}

static void
on_ws_message (BoxHttpWsBridge *bridge, gpointer peer, guint type, GBytes *message)
{
  Bridge *b = peer;
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (message, &len);

  if (b->session_closed)
    return;
  if (type == SOUP_WEBSOCKET_DATA_TEXT)
    handle_control (b, message);
  else if (len == 1 && data[0] == TAG_EOF)
    box_exec_session_close_stdin (b->session);
  else if (len >= 1 && data[0] == TAG_STDIN)
    write_stdin (b, data + 1, len - 1);
}

static void
on_ws_closed (BoxHttpWsBridge *bridge, gpointer peer)
{
  Bridge *b = peer;

  if (!b->session_closed) {
    /* exec: SIGHUP unless detachable; attach: detach.  The hold ends.
     * Closing fails the stdin writes still pending, and GTask may run
     * their callbacks (stdin_written) right here: the bridge outlives
     * them (we are within its depth) and goes after we return. */
    b->session_closed = TRUE;
    box_http_ws_bridge_peer_done (bridge);
    box_exec_session_close (b->session);
  }
}

static const BoxHttpWsBridgeFuncs session_bridge = {
  .message = on_ws_message,
  .written = on_ws_written,
  .ws_closed = on_ws_closed,
  .free = bridge_free,
};

/* A WebSocket over @session until both are over (the exec frames: output
 * tagged 1/2, stdin 0, EOF 4, resize and signal, exit then 1000, 1011 when
 * the stream ends without an exit). */
static void
bridge_session (BoxHttpWs *ws, BoxExecSession *session, BoxEngine *engine, const char *sandbox_id)
{
  Bridge *b = g_new0 (Bridge, 1);

  b->session = g_object_ref (session);
  b->bridge = box_http_ws_bridge_new (ws, engine, sandbox_id, &session_bridge, b);
  g_signal_connect (session, "output", G_CALLBACK (on_output), b);
  g_signal_connect (session, "exited", G_CALLBACK (on_exited), b);
  g_signal_connect (session, "closed", G_CALLBACK (on_session_closed), b);
  if (box_exec_session_is_closed (session))
    on_session_closed (session, b);
  else
    box_http_ws_bridge_start (b->bridge);
}

/* ---- the query --------------------------------------------------------- */

/* An integer in @min..@max, or -1 when absent. */
static gboolean
query_int (BoxHttpRequest *req, const char *name, gint64 min, gint64 max, gint64 *out,
           GError **error)
{
  const char *value = box_http_request_query (req, name);
  guint64 n = 0;

  *out = -1;
  if (value == NULL)
    return TRUE;
  if (!g_ascii_string_to_unsigned (value, 10, (guint64) min, (guint64) max, &n, NULL)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid %s: must be an integer from %"
                 G_GINT64_FORMAT " to %" G_GINT64_FORMAT, name, min, max);
    return FALSE;
  }
  *out = (gint64) n;
  return TRUE;
}

static BoxExecStreamRequest *
exec_request_from_query (BoxHttpRequest *req, GError **error)
{
  g_autoptr(BoxExecStreamRequest) request = g_new0 (BoxExecStreamRequest, 1);
  g_autoptr(GPtrArray) cmd = box_http_request_query_all (req, "cmd");
  g_autoptr(GPtrArray) env = box_http_request_query_all (req, "env");
  const char *cwd = box_http_request_query (req, "cwd");
  const char *user = box_http_request_query (req, "user");
  static const char *const allowed[] = { "cmd", "tty", "cols", "rows", "cwd", "env", "user",
                                         "detachable", NULL };
  static const char *const repeatable[] = { "cmd", "env", NULL };
  gint64 cols, rows;

  /* a misspelt detachable= must not quietly give a session that ends
   * with its socket */
  if (!box_http_request_check_query (req, allowed, repeatable, error))
    return NULL;
  if (cmd->len == 0 || ((const char *) g_ptr_array_index (cmd, 0))[0] == '\0') {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         "invalid cmd: at least one cmd= parameter (the argv, in order) is required");
    return NULL;
  }
  request->argv = g_new0 (char *, cmd->len + 1);
  for (guint i = 0; i < cmd->len; i++)
    request->argv[i] = g_strdup (g_ptr_array_index (cmd, i));
  if (!box_http_request_query_bool (req, "tty", FALSE, &request->tty, error) ||
      !box_http_request_query_bool (req, "detachable", FALSE, &request->detachable, error) ||
      !query_int (req, "cols", 1, 65535, &cols, error) ||
      !query_int (req, "rows", 1, 65535, &rows, error))
    return NULL;
  request->cols = cols > 0 ? (guint) cols : 0;
  request->rows = rows > 0 ? (guint) rows : 0;
  if (cwd != NULL) {
    if (cwd[0] != '/') {
      g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                           "invalid cwd: must be an absolute path");
      return NULL;
    }
    request->cwd = g_strdup (cwd);
  }
  if (user != NULL) {
    if (user[0] == '\0') {
      g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid user: must not be empty");
      return NULL;
    }
    request->user = g_strdup (user);
  }
  for (guint i = 0; i < env->len; i++) {
    const char *kv = g_ptr_array_index (env, i);
    const char *eq = strchr (kv, '=');
    g_autofree char *name = NULL;

    if (eq == NULL) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid env %s: must be NAME=VALUE", kv);
      return NULL;
    }
    name = g_strndup (kv, eq - kv);
    if (!box_validate_env_name (name, error))
      return NULL;
    if (request->env == NULL)
      request->env = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
    g_hash_table_replace (request->env, g_steal_pointer (&name), g_strdup (eq + 1));
  }
  return g_steal_pointer (&request);
}

/* ---- GET .../exec ------------------------------------------------------ */

/* The first frame of an exec or attach socket: {type, session, <key>}. */
static void
send_first (BoxHttpWs *ws, const char *type, const char *session, const char *key, gint64 value)
{
  g_autoptr(JsonObject) frame = json_object_new ();
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (frame, "type", type);
  json_object_set_string_member (frame, "session", session);
  json_object_set_int_member (frame, key, value);
  json_node_set_object (node, frame);
  box_http_ws_send_json (ws, node);
}

typedef struct {
  BoxExecStreamRequest *request;
  char                 *sandbox_id;
  gint64                offset;
} Stream;

static void
stream_free (Stream *stream)
{
  g_clear_pointer (&stream->request, box_exec_stream_request_free);
  g_free (stream->sandbox_id);
  g_free (stream);
}

static void
exec_started (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  Stream *stream = req->kept;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxExecSession) session = NULL;
  g_autoptr(BoxHttpWs) ws = NULL;

  /* the hold is the session's now (released already on an error) */
  session = box_engine_exec_stream_finish (req->engine, result, &error);
  ws = box_http_ws_new (req);
  if (session == NULL) {
    /* the command could not start: an error frame instead of started */
    box_http_ws_send_error (ws, error);
    box_http_ws_close (ws, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
    return;
  }
  send_first (ws, "started", box_exec_session_get_id (session), "pid",
              box_exec_session_get_pid (session));
  bridge_session (ws, session, req->engine, stream->sandbox_id);
}

static void
exec_open (BoxHttpRequest *req, const char *sandbox_id)
{
  Stream *stream = req->kept;

  stream->sandbox_id = g_strdup (sandbox_id);
  box_engine_exec_stream_async (req->engine, sandbox_id, stream->request, NULL, exec_started, req);
}

void
box_http_exec_stream (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  Stream *stream;
  BoxExecStreamRequest *request;

  if (!box_http_ws_check_upgrade (req, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  request = exec_request_from_query (req, &error);
  if (request == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  stream = g_new0 (Stream, 1);
  stream->request = request;
  box_http_request_keep (req, stream, (GDestroyNotify) stream_free);
  box_http_ws_hold (req, exec_open);
}

/* ---- GET .../exec/sessions/{session} (attach) -------------------------- */

static void
attach_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  Stream *stream = req->kept;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxExecSession) session = NULL;
  g_autoptr(BoxHttpWs) ws = NULL;

  session = box_engine_attach_session_finish (req->engine, result, &error);
  ws = box_http_ws_accept (req, session != NULL, error);
  if (ws == NULL)
    return;
  send_first (ws, "attached", box_http_request_param (req, 1), "offset",
              box_exec_session_get_offset (session));
  bridge_session (ws, session, req->engine, stream->sandbox_id);
}

static void
attach_open (BoxHttpRequest *req, const char *sandbox_id)
{
  Stream *stream = req->kept;

  stream->sandbox_id = g_strdup (sandbox_id);
  box_engine_attach_session_async (req->engine, sandbox_id, box_http_request_param (req, 1),
                                   stream->offset, NULL, attach_opened, req);
}

void
box_http_session_attach (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  Stream *stream;
  gint64 offset;

  static const char *const allowed[] = { "offset", NULL };

  if (!box_http_ws_check_upgrade (req, &error) ||
      !box_http_request_check_query (req, allowed, NULL, &error) ||
      !query_int (req, "offset", 0, G_MAXINT64, &offset, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  stream = g_new0 (Stream, 1);
  stream->offset = offset;
  box_http_request_keep (req, stream, (GDestroyNotify) stream_free);
  box_http_ws_hold (req, attach_open);
}

/* ---- GET .../exec/sessions, POST .../signal ---------------------------- */

/* {id, cmd, tty, pid, started_at, exited, exit_code?, attached} */
static JsonNode *
session_to_json (const BoxSessionInfo *info)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autofree char *started_at = box_time_format (info->started_at);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "id");
  json_builder_add_string_value (builder, info->id);
  json_builder_set_member_name (builder, "cmd");
  json_builder_begin_array (builder);
  for (guint i = 0; info->argv[i] != NULL; i++)
    json_builder_add_string_value (builder, info->argv[i]);
  json_builder_end_array (builder);
  json_builder_set_member_name (builder, "tty");
  json_builder_add_boolean_value (builder, info->tty);
  json_builder_set_member_name (builder, "pid");
  json_builder_add_int_value (builder, info->pid);
  json_builder_set_member_name (builder, "started_at");
  json_builder_add_string_value (builder, started_at);
  json_builder_set_member_name (builder, "exited");
  json_builder_add_boolean_value (builder, info->exited);
  if (info->has_exit_code) {
    json_builder_set_member_name (builder, "exit_code");
    json_builder_add_int_value (builder, info->exit_code);
  }
  json_builder_set_member_name (builder, "attached");
  json_builder_add_boolean_value (builder, info->attached);
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

static void
sessions_listed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) sessions = box_engine_list_sessions_finish (req->engine, result, &error);
  g_autoptr(GPtrArray) nodes = NULL;

  if (sessions == NULL) {
    box_http_reply_error (req->msg, error);
    box_http_request_resume (req);
    return;
  }
  nodes = box_http_node_array_new ();
  for (guint i = 0; i < sessions->len; i++)
    g_ptr_array_add (nodes, session_to_json (g_ptr_array_index (sessions, i)));
  box_http_reply_list (req->msg, "sessions", nodes);
  box_http_request_resume (req);
}

void
box_http_session_list (BoxHttpRequest *req)
{
  box_engine_list_sessions_async (req->engine, box_http_request_project (req),
                                  box_http_request_param (req, 0), NULL, sessions_listed,
                                  box_http_request_pause (req));
}

static void
session_signalled (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;

  if (!box_engine_signal_session_finish (req->engine, result, &error))
    box_http_reply_error (req->msg, error);
  else
    box_http_reply_empty (req->msg, SOUP_STATUS_NO_CONTENT);
  box_http_request_resume (req);
}

void
box_http_session_signal (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "signal", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = box_http_request_body (req, FALSE, &error);
  g_autofree char *signal_name = NULL;
  JsonObject *obj;

  if (body == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  obj = json_node_get_object (body);
  if (!box_json_check_fields (obj, allowed, &error) ||
      !box_json_get_string (obj, "signal", "signal", &signal_name, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  if (signal_name == NULL || signal_name[0] == '\0') {
    box_http_reply_error_literal (req->msg, BOX_ERROR_INVALID,
                                  "invalid signal: a name as in kill -l (TERM, HUP, ...) is required");
    return;
  }
  box_http_request_keep (req, g_steal_pointer (&signal_name), g_free);
  box_engine_signal_session_async (req->engine, box_http_request_project (req),
                                   box_http_request_param (req, 0), box_http_request_param (req, 1),
                                   req->kept, NULL, session_signalled, box_http_request_pause (req));
}
