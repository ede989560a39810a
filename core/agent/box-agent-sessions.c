/* box-agent-sessions.c: sessions and ports, typed (box-agent-exec.h):
 * the agent's requests built here, its replies turned into the engine's
 * records, its channels into a BoxExecSession or a BoxAgentStream. */
#include "config.h"

#include <string.h>

#include "box-agent-exec.h"
#include "box-agent-private.h"
#include "box-error.h"

/* "s-" + 10 of [0-9a-z], as the agent wants them */
static gboolean
session_id_valid (const char *id)
{
  if (id == NULL || strlen (id) != 12 || id[0] != 's' || id[1] != '-')
    return FALSE;
  for (guint i = 2; i < 12; i++)
    if (!g_ascii_isdigit (id[i]) && !(id[i] >= 'a' && id[i] <= 'z'))
      return FALSE;
  return TRUE;
}

static GError *
no_session_error (const char *id)
{
  return g_error_new (BOX_ERROR, BOX_ERROR_NOT_FOUND, "no session %s in this sandbox", id);
}

/* The agent's not_found of a request about @session names the session. */
static GError *
session_error (GError *error, const char *session)
{
  if (session != NULL && g_error_matches (error, BOX_ERROR, BOX_ERROR_NOT_FOUND)) {
    g_error_free (error);
    return no_session_error (session);
  }
  return error;
}

/* ---- streams: exec, attach, port-connect ------------------------------- */

typedef enum { OPEN_EXEC, OPEN_ATTACH, OPEN_PORT } OpenKind;

typedef struct {
  OpenKind  kind;
  char     *session;
} Open;

static void
open_free (Open *open)
{
  g_free (open->session);
  g_free (open);
}

static void
stream_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  Open *open = g_task_get_task_data (task);
  g_autoptr(BoxAgentChannel) channel = NULL;
  GError *error = NULL;
  JsonObject *reply;
  gint64 pid = 0, offset = 0;
  const char *session;

  channel = box_agent_client_open_channel_finish (BOX_AGENT_CLIENT (source), result, &error);
  if (channel == NULL) {
    g_task_return_error (task, session_error (error, open->session));
    return;
  }
  if (open->kind == OPEN_PORT) {
    g_task_return_pointer (task, box_agent_stream_new (channel), g_object_unref);
    return;
  }
  reply = box_agent_channel_get_reply (channel);
  box_agent_json_get_int (reply, "pid", &pid);
  session = box_agent_json_get_string (reply, "session");
  if (open->kind == OPEN_ATTACH)
    box_agent_json_get_int (reply, "offset", &offset);
  g_task_return_pointer (task, box_exec_session_new (channel, session != NULL ? session : open->session,
                                                     pid, offset),
                         g_object_unref);
}

static void
open_stream (BoxAgentClient *self, GTask *task, OpenKind kind, const char *session,
             const char *op, JsonObject *args)
{
  Open *open = g_new0 (Open, 1);

  open->kind = kind;
  open->session = g_strdup (session);
  g_task_set_task_data (task, open, (GDestroyNotify) open_free);
  box_agent_client_open_channel_async (self, op, args, g_task_get_cancellable (task),
                                       stream_opened, task);
}

void
box_agent_client_exec_session_async (BoxAgentClient *self, const BoxExecStreamRequest *request,
                                     const char *session_id, GCancellable *cancellable,
                                     GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  g_autoptr(JsonObject) args = NULL;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  g_return_if_fail (request != NULL && session_id != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_exec_session_async);
  if (request->argv == NULL || request->argv[0] == NULL || request->argv[0][0] == '\0') {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID,
                             "invalid cmd: a non-empty argv is required");
    return;
  }
  args = box_agent_exec_args_new (request->argv, request->env, request->cwd, request->user);
  json_object_set_boolean_member (args, "tty", request->tty);
  if (request->cols > 0)
    json_object_set_int_member (args, "cols", request->cols);
  if (request->rows > 0)
    json_object_set_int_member (args, "rows", request->rows);
  json_object_set_string_member (args, "session", session_id);
  json_object_set_boolean_member (args, "detachable", request->detachable);
  open_stream (self, g_steal_pointer (&task), OPEN_EXEC, NULL, "exec", args);
}

BoxExecSession *
box_agent_client_exec_session_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_agent_client_attach_session_async (BoxAgentClient *self, const char *session_id, gint64 offset,
                                       GCancellable *cancellable, GAsyncReadyCallback callback,
                                       gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  g_autoptr(JsonObject) args = NULL;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_attach_session_async);
  if (!session_id_valid (session_id)) {
    g_task_return_error (task, no_session_error (session_id));
    return;
  }
  args = json_object_new ();
  json_object_set_string_member (args, "session", session_id);
  if (offset >= 0)
    json_object_set_int_member (args, "offset", offset);
  open_stream (self, g_steal_pointer (&task), OPEN_ATTACH, session_id, "attach", args);
}

BoxExecSession *
box_agent_client_attach_session_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_agent_client_port_connect_async (BoxAgentClient *self, guint port, GCancellable *cancellable,
                                     GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  g_autoptr(JsonObject) args = NULL;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_port_connect_async);
  if (port < 1 || port > 65535) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID,
                             "invalid port %u: must be 1 to 65535", port);
    return;
  }
  args = json_object_new ();
  json_object_set_int_member (args, "port", port);
  open_stream (self, g_steal_pointer (&task), OPEN_PORT, NULL, "port-connect", args);
}

BoxAgentStream *
box_agent_client_port_connect_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- calls: sessions, session-signal, ports ---------------------------- */

/* the reply -> a GPtrArray of records, or NULL with @error */
typedef GPtrArray *(*ConvertFunc) (JsonObject *reply, GError **error);

typedef struct {
  char        *session;
  ConvertFunc  convert;   /* NULL: the answer is TRUE */
} TypedCall;

static void
call_free (TypedCall *call)
{
  g_free (call->session);
  g_free (call);
}

static void
call_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  TypedCall *call = g_task_get_task_data (task);
  g_autoptr(JsonObject) reply = NULL;
  GError *error = NULL;
  GPtrArray *out;

  reply = box_agent_client_call_finish (BOX_AGENT_CLIENT (source), result, &error);
  if (reply == NULL) {
    g_task_return_error (task, session_error (error, call->session));
    return;
  }
  if (call->convert == NULL) {
    g_task_return_boolean (task, TRUE);
    return;
  }
  out = call->convert (reply, &error);
  if (out == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, out, (GDestroyNotify) g_ptr_array_unref);
}

static void
typed_call (BoxAgentClient *self, GTask *task, const char *op, JsonObject *args,
            const char *session, ConvertFunc convert)
{
  TypedCall *call = g_new0 (TypedCall, 1);

  call->session = g_strdup (session);
  call->convert = convert;
  g_task_set_task_data (task, call, (GDestroyNotify) call_free);
  box_agent_client_call_async (self, op, args, g_task_get_cancellable (task), call_done, task);
}

static JsonArray *
array_member (JsonObject *reply, const char *member, GError **error)
{
  JsonNode *node = json_object_get_member (reply, member);

  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the agent's %s reply has no %s array",
                 member, member);
    return NULL;
  }
  return json_node_get_array (node);
}

static char **
strv_member (JsonObject *obj, const char *member)
{
  JsonNode *node = json_object_get_member (obj, member);
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  JsonArray *array;

  if (node != NULL && JSON_NODE_HOLDS_ARRAY (node)) {
    array = json_node_get_array (node);
    for (guint i = 0; i < json_array_get_length (array); i++) {
      JsonNode *element = json_array_get_element (array, i);

      if (JSON_NODE_HOLDS_VALUE (element) && json_node_get_value_type (element) == G_TYPE_STRING)
        g_strv_builder_add (builder, json_node_get_string (element));
    }
  }
  return g_strv_builder_end (builder);
}

/* The object at @i of @array, NULL when it is something else (a guest's
 * array may hold anything). */
static JsonObject *
object_element (JsonArray *array, guint i)
{
  JsonNode *node = json_array_get_element (array, i);

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

/* {id, cmd, tty, pid, started_at (ms), detachable, exited, exit_code?, attached};
 * entries that are not objects or carry no valid id are left out */
GPtrArray *
box_agent_sessions_from_reply (JsonObject *reply, GError **error)
{
  JsonArray *array = array_member (reply, "sessions", error);
  g_autoptr(GPtrArray) out = NULL;

  if (array == NULL)
    return NULL;
  out = g_ptr_array_new_with_free_func ((GDestroyNotify) box_session_info_free);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *s = object_element (array, i);
    BoxSessionInfo *info;
    gint64 ms = 0, code = 0;

    if (s == NULL || !session_id_valid (box_agent_json_get_string (s, "id")))
      continue;
    info = g_new0 (BoxSessionInfo, 1);
    info->id = g_strdup (box_agent_json_get_string (s, "id"));
    info->argv = strv_member (s, "cmd");
    info->tty = box_agent_json_get_bool (s, "tty", FALSE);
    box_agent_json_get_int (s, "pid", &info->pid);
    box_agent_json_get_int (s, "started_at", &ms);
    info->started_at = CLAMP (ms, 0, G_MAXINT64 / 1000) * 1000;
    info->exited = box_agent_json_get_bool (s, "exited", FALSE);
    info->has_exit_code = box_agent_json_get_int (s, "exit_code", &code);
    info->exit_code = (int) CLAMP (code, G_MININT, G_MAXINT);
    info->attached = box_agent_json_get_bool (s, "attached", FALSE);
    g_ptr_array_add (out, info);
  }
  return g_steal_pointer (&out);
}

/* {port, address, pid, session?}; entries that are not objects or have no
 * port in 1..65535 or no address are left out */
GPtrArray *
box_agent_ports_from_reply (JsonObject *reply, GError **error)
{
  JsonArray *array = array_member (reply, "ports", error);
  g_autoptr(GPtrArray) out = NULL;

  if (array == NULL)
    return NULL;
  out = g_ptr_array_new_with_free_func ((GDestroyNotify) box_port_listener_free);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *p = object_element (array, i);
    BoxPortListener *listener;
    gint64 port = 0;

    if (p == NULL || !box_agent_json_get_int (p, "port", &port) || port < 1 || port > 65535 ||
        box_agent_json_get_string (p, "address") == NULL)
      continue;
    listener = g_new0 (BoxPortListener, 1);
    listener->port = (guint) port;
    listener->address = g_strdup (box_agent_json_get_string (p, "address"));
    box_agent_json_get_int (p, "pid", &listener->pid);
    listener->session = g_strdup (box_agent_json_get_string (p, "session"));
    g_ptr_array_add (out, listener);
  }
  return g_steal_pointer (&out);
}

void
box_agent_client_list_sessions_async (BoxAgentClient *self, GCancellable *cancellable,
                                      GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_list_sessions_async);
  typed_call (self, task, "sessions", NULL, NULL, box_agent_sessions_from_reply);
}

GPtrArray *
box_agent_client_list_sessions_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_agent_client_signal_session_async (BoxAgentClient *self, const char *session_id,
                                       const char *signal_name, GCancellable *cancellable,
                                       GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  g_autoptr(JsonObject) args = NULL;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_signal_session_async);
  if (!session_id_valid (session_id)) {
    g_task_return_error (task, no_session_error (session_id));
    return;
  }
  if (signal_name == NULL || signal_name[0] == '\0') {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID,
                             "invalid signal: a name as in kill -l (TERM, HUP, ...) is required");
    return;
  }
  args = json_object_new ();
  json_object_set_string_member (args, "session", session_id);
  json_object_set_string_member (args, "signal", signal_name);
  typed_call (self, g_steal_pointer (&task), "session-signal", args, session_id, NULL);
}

gboolean
box_agent_client_signal_session_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

void
box_agent_client_list_ports_async (BoxAgentClient *self, GCancellable *cancellable,
                                   GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_list_ports_async);
  typed_call (self, task, "ports", NULL, NULL, box_agent_ports_from_reply);
}

GPtrArray *
box_agent_client_list_ports_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
