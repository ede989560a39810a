/* box-engine-sessions.c: streaming exec, sessions and ports, on top of the
 * sub-API's hold (box-engine-subapi.c) and the sandbox's agent
 * (doc/AGENT-PROTOCOL.md, "Sessions" and "Ports"); and the port access
 * settings, which are records only. */
#include "config.h"

#include <string.h>

#include "box-agent-frame.h"
#include "box-engine-private.h"
#include "box-storage-records.h"
#include "box-validate.h"

void
box_exec_stream_request_free (BoxExecStreamRequest *request)
{
  if (request == NULL)
    return;
  g_strfreev (request->argv);
  g_clear_pointer (&request->env, g_hash_table_unref);
  g_free (request->cwd);
  g_free (request->user);
  g_free (request);
}

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

static gboolean
check_session_id (const char *id, GError **error)
{
  if (session_id_valid (id))
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no session %s in this sandbox", id);
  return FALSE;
}

/* ---- channels on a held sandbox ---------------------------------------- */

static void
channel_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  BoxAgentChannel *channel;

  channel = box_agent_client_open_channel_finish (BOX_AGENT_CLIENT (source), result, &error);
  if (channel == NULL) {
    const char *session = g_task_get_task_data (task);

    if (session != NULL && g_error_matches (error, BOX_ERROR, BOX_ERROR_NOT_FOUND)) {
      g_clear_error (&error);
      g_set_error (&error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no session %s in this sandbox",
                   session);
    }
    g_task_return_error (task, error);
    return;
  }
  g_task_return_pointer (task, channel, g_object_unref);
}

/* Opens a channel with @op on the running sandbox @sandbox_id (held). */
static void
open_channel (BoxEngine *self, const char *sandbox_id, const char *op, JsonObject *args,
              GTask *task)
{
  g_autoptr(BoxAgentClient) agent = NULL;
  GError *error = NULL;

  agent = box_engine_get_agent (self, sandbox_id, &error);
  if (agent == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  box_agent_client_open_channel_async (agent, op, args, g_task_get_cancellable (task),
                                       channel_opened, task);
}

void
box_engine_exec_stream_async (BoxEngine *self, const char *sandbox_id,
                              const BoxExecStreamRequest *request, GCancellable *cancellable,
                              GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(JsonObject) args = json_object_new ();
  g_autofree char *session = box_generate_session_id ();
  JsonArray *argv;

  g_task_set_source_tag (task, box_engine_exec_stream_async);
  if (request->argv == NULL || request->argv[0] == NULL || request->argv[0][0] == '\0') {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID,
                             "invalid cmd: a non-empty argv is required");
    g_object_unref (task);
    return;
  }
  argv = json_array_new ();
  for (guint i = 0; request->argv[i] != NULL; i++)
    json_array_add_string_element (argv, request->argv[i]);
  json_object_set_array_member (args, "argv", argv);
  if (request->env != NULL && g_hash_table_size (request->env) > 0) {
    JsonObject *env = json_object_new ();
    GHashTableIter iter;
    gpointer key, value;

    g_hash_table_iter_init (&iter, request->env);
    while (g_hash_table_iter_next (&iter, &key, &value))
      json_object_set_string_member (env, key, value);
    json_object_set_object_member (args, "env", env);
  }
  if (request->cwd != NULL)
    json_object_set_string_member (args, "cwd", request->cwd);
  if (request->user != NULL)
    json_object_set_string_member (args, "user", request->user);
  json_object_set_boolean_member (args, "tty", request->tty);
  if (request->cols > 0)
    json_object_set_int_member (args, "cols", request->cols);
  if (request->rows > 0)
    json_object_set_int_member (args, "rows", request->rows);
  json_object_set_string_member (args, "session", session);
  json_object_set_boolean_member (args, "detachable", request->detachable);
  open_channel (self, sandbox_id, "exec", args, task);
}

BoxAgentChannel *
box_engine_exec_stream_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_engine_attach_session_async (BoxEngine *self, const char *sandbox_id, const char *session,
                                 gint64 offset, GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(JsonObject) args = json_object_new ();
  GError *error = NULL;

  g_task_set_source_tag (task, box_engine_attach_session_async);
  g_task_set_task_data (task, g_strdup (session), g_free);
  if (!check_session_id (session, &error)) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  json_object_set_string_member (args, "session", session);
  if (offset >= 0)
    json_object_set_int_member (args, "offset", offset);
  open_channel (self, sandbox_id, "attach", args, task);
}

BoxAgentChannel *
box_engine_attach_session_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_engine_port_connect_async (BoxEngine *self, const char *sandbox_id, guint port,
                               GCancellable *cancellable, GAsyncReadyCallback callback,
                               gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(JsonObject) args = json_object_new ();

  g_task_set_source_tag (task, box_engine_port_connect_async);
  if (port < 1 || port > 65535) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID,
                             "invalid port %u: must be 1 to 65535", port);
    g_object_unref (task);
    return;
  }
  json_object_set_int_member (args, "port", port);
  open_channel (self, sandbox_id, "port-connect", args, task);
}

BoxAgentChannel *
box_engine_port_connect_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- plain calls: hold, ask the agent, release ------------------------- */

typedef GPtrArray *(*ConvertFunc) (JsonObject *reply, GError **error);

typedef struct {
  char        *op;
  JsonObject  *args;
  char        *session;     /* for the not_found message */
  ConvertFunc  convert;     /* NULL: the answer is TRUE */
  char        *sandbox_id;  /* once held */
  gboolean     held;
} Call;

static void
call_free (Call *call)
{
  g_free (call->op);
  g_clear_pointer (&call->args, json_object_unref);
  g_free (call->session);
  g_free (call->sandbox_id);
  g_free (call);
}

static void
call_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  Call *call = g_task_get_task_data (task);
  g_autoptr(JsonObject) reply = NULL;
  GError *error = NULL;
  GPtrArray *out;

  reply = box_agent_client_call_finish (BOX_AGENT_CLIENT (source), result, &error);
  if (call->held) {
    call->held = FALSE;
    box_engine_release (self, call->sandbox_id);
  }
  if (reply == NULL) {
    if (call->session != NULL && g_error_matches (error, BOX_ERROR, BOX_ERROR_NOT_FOUND)) {
      g_clear_error (&error);
      g_set_error (&error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no session %s in this sandbox",
                   call->session);
    }
    g_task_return_error (task, error);
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
call_agent (BoxEngine *self, GTask *task, const char *sandbox_id)
{
  Call *call = g_task_get_task_data (task);
  g_autoptr(BoxAgentClient) agent = NULL;
  GError *error = NULL;

  agent = box_engine_get_agent (self, sandbox_id, &error);
  if (agent == NULL) {
    if (call->held) {
      call->held = FALSE;
      box_engine_release (self, call->sandbox_id);
    }
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  box_agent_client_call_async (agent, call->op, call->args, g_task_get_cancellable (task),
                               call_done, task);
}

static void
call_held (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  GTask *task = user_data;
  Call *call = g_task_get_task_data (task);
  g_autoptr(BoxSandbox) sandbox = NULL;
  GError *error = NULL;

  sandbox = box_engine_hold_finish (self, result, &error);
  if (sandbox == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  call->sandbox_id = g_strdup (sandbox->id);
  if (call->session != NULL && !check_session_id (call->session, &error)) {
    box_engine_release (self, call->sandbox_id);
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  call->held = TRUE;
  call_agent (self, task, sandbox->id);
}

/* Takes @args.  @session: the session the call is about (its not_found). */
static void
held_call (BoxEngine *self, const char *project, const char *id_or_name, const char *op,
           JsonObject *args, const char *session, ConvertFunc convert, GTask *task)
{
  Call *call = g_new0 (Call, 1);

  call->op = g_strdup (op);
  call->args = args;
  call->session = g_strdup (session);
  call->convert = convert;
  g_task_set_task_data (task, call, (GDestroyNotify) call_free);
  box_engine_hold_async (self, project, id_or_name, g_task_get_cancellable (task), call_held,
                         task);
}

static GPtrArray *
array_member (JsonObject *reply, const char *member, GError **error)
{
  JsonNode *node = json_object_get_member (reply, member);

  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the agent's %s reply has no %s array",
                 member, member);
    return NULL;
  }
  return g_ptr_array_new_with_free_func ((GDestroyNotify) json_node_unref);
}

static void
copy_member (JsonObject *to, JsonObject *from, const char *member)
{
  JsonNode *node = json_object_get_member (from, member);

  if (node != NULL && !JSON_NODE_HOLDS_NULL (node))
    json_object_set_member (to, member, json_node_copy (node));
}

static JsonNode *
node_take_object (JsonObject *obj)
{
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_node_take_object (node, obj);
  return node;
}

/* the agent's sessions -> {id, cmd, tty, pid, started_at, exited, exit_code?, attached} */
static GPtrArray *
convert_sessions (JsonObject *reply, GError **error)
{
  g_autoptr(GPtrArray) out = array_member (reply, "sessions", error);
  JsonArray *array;

  if (out == NULL)
    return NULL;
  array = json_object_get_array_member (reply, "sessions");
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *s = json_array_get_object_element (array, i);
    JsonObject *api;
    gint64 ms = 0;
    g_autofree char *started_at = NULL;

    if (s == NULL)
      continue;
    api = json_object_new ();
    copy_member (api, s, "id");
    copy_member (api, s, "cmd");
    json_object_set_boolean_member (api, "tty", box_agent_json_get_bool (s, "tty", FALSE));
    copy_member (api, s, "pid");
    box_agent_json_get_int (s, "started_at", &ms);
    started_at = box_time_format (ms * 1000);
    json_object_set_string_member (api, "started_at", started_at);
    json_object_set_boolean_member (api, "exited", box_agent_json_get_bool (s, "exited", FALSE));
    copy_member (api, s, "exit_code");
    json_object_set_boolean_member (api, "attached", box_agent_json_get_bool (s, "attached", FALSE));
    g_ptr_array_add (out, node_take_object (api));
  }
  return g_steal_pointer (&out);
}

/* the agent's listeners -> {port, address, pid, session?} */
static GPtrArray *
convert_ports (JsonObject *reply, GError **error)
{
  g_autoptr(GPtrArray) out = array_member (reply, "ports", error);
  JsonArray *array;

  if (out == NULL)
    return NULL;
  array = json_object_get_array_member (reply, "ports");
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *p = json_array_get_object_element (array, i);
    JsonObject *api;

    if (p == NULL)
      continue;
    api = json_object_new ();
    copy_member (api, p, "port");
    copy_member (api, p, "address");
    copy_member (api, p, "pid");
    copy_member (api, p, "session");
    g_ptr_array_add (out, node_take_object (api));
  }
  return g_steal_pointer (&out);
}

void
box_engine_list_sessions_async (BoxEngine *self, const char *project, const char *id_or_name,
                                GCancellable *cancellable, GAsyncReadyCallback callback,
                                gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);

  g_task_set_source_tag (task, box_engine_list_sessions_async);
  held_call (self, project, id_or_name, "sessions", NULL, NULL, convert_sessions, task);
}

GPtrArray *
box_engine_list_sessions_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_engine_signal_session_async (BoxEngine *self, const char *project, const char *id_or_name,
                                 const char *session, const char *signal_name,
                                 GCancellable *cancellable, GAsyncReadyCallback callback,
                                 gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  JsonObject *args;

  g_task_set_source_tag (task, box_engine_signal_session_async);
  if (signal_name == NULL || signal_name[0] == '\0') {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID,
                             "invalid signal: a name as in kill -l (TERM, HUP, ...) is required");
    g_object_unref (task);
    return;
  }
  args = json_object_new ();
  json_object_set_string_member (args, "session", session);
  json_object_set_string_member (args, "signal", signal_name);
  held_call (self, project, id_or_name, "session-signal", args, session, NULL, task);
}

gboolean
box_engine_signal_session_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

void
box_engine_list_ports_async (BoxEngine *self, const char *project, const char *id_or_name,
                             GCancellable *cancellable, GAsyncReadyCallback callback,
                             gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);

  g_task_set_source_tag (task, box_engine_list_ports_async);
  held_call (self, project, id_or_name, "ports", NULL, NULL, convert_ports, task);
}

GPtrArray *
box_engine_list_ports_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_engine_poll_ports_async (BoxEngine *self, const char *sandbox_id, GCancellable *cancellable,
                             GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  Call *call = g_new0 (Call, 1);

  g_task_set_source_tag (task, box_engine_poll_ports_async);
  call->op = g_strdup ("ports");
  call->convert = convert_ports;
  g_task_set_task_data (task, call, (GDestroyNotify) call_free);
  call_agent (self, task, sandbox_id);
}

GPtrArray *
box_engine_poll_ports_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- port access settings (records) ------------------------------------ */

char *
box_engine_port_url (BoxEngine *self, const BoxSandbox *sandbox, guint port)
{
  const char *domain = box_engine_get_config (self)->sandbox_domain;

  if (domain == NULL || domain[0] == '\0')
    return g_strdup ("");
  return g_strdup_printf ("https://%u--%s--%s.%s", port, sandbox->name, sandbox->project, domain);
}

static JsonNode *
port_setting_to_json (BoxEngine *self, const BoxSandbox *sandbox, guint port, const char *access)
{
  JsonObject *obj = json_object_new ();
  g_autofree char *url = box_engine_port_url (self, sandbox, port);

  json_object_set_int_member (obj, "port", port);
  json_object_set_string_member (obj, "access", access);
  json_object_set_string_member (obj, "url", url);
  return node_take_object (obj);
}

static gint
compare_port_keys (gconstpointer a, gconstpointer b)
{
  guint64 pa = g_ascii_strtoull (*(const char *const *) a, NULL, 10);
  guint64 pb = g_ascii_strtoull (*(const char *const *) b, NULL, 10);

  return pa < pb ? -1 : pa > pb ? 1 : 0;
}

GPtrArray *
box_engine_list_port_settings (BoxEngine *self, const char *project, const char *id_or_name,
                               GError **error)
{
  g_autoptr(BoxSandbox) sandbox = box_storage_sandbox_get (box_engine_get_storage (self), project,
                                                           id_or_name, error);
  g_autoptr(GPtrArray) keys = NULL;
  GPtrArray *out;

  if (sandbox == NULL)
    return NULL;
  keys = g_ptr_array_new ();
  {
    GHashTableIter iter;
    gpointer key;

    g_hash_table_iter_init (&iter, sandbox->port_access);
    while (g_hash_table_iter_next (&iter, &key, NULL))
      g_ptr_array_add (keys, key);
  }
  g_ptr_array_sort (keys, compare_port_keys);
  out = g_ptr_array_new_with_free_func ((GDestroyNotify) json_node_unref);
  for (guint i = 0; i < keys->len; i++) {
    const char *key = g_ptr_array_index (keys, i);

    g_ptr_array_add (out, port_setting_to_json (self, sandbox, (guint) g_ascii_strtoull (key, NULL, 10),
                                                g_hash_table_lookup (sandbox->port_access, key)));
  }
  return out;
}

typedef struct {
  char  *project;
  char  *id_or_name;
  char  *sandbox_id;    /* the sandbox whose lock we hold */
  guint  port;
  char  *access;
} PortAccess;

static void
port_access_free (PortAccess *pa)
{
  g_free (pa->project);
  g_free (pa->id_or_name);
  g_free (pa->sandbox_id);
  g_free (pa->access);
  g_free (pa);
}

/* The record change itself: read, change, write at the revision read; a
 * write that lost the race to another writer starts again from the read. */
static JsonNode *
write_port_access (BoxEngine *self, PortAccess *pa, GError **error)
{
  BoxStorage *storage = box_engine_get_storage (self);

  for (guint attempt = 1;; attempt++) {
    g_autoptr(BoxSandbox) sandbox = box_storage_sandbox_get (storage, pa->project, pa->id_or_name,
                                                             error);
    g_autoptr(GError) local = NULL;

    if (sandbox == NULL)
      return NULL;
    g_hash_table_replace (sandbox->port_access, g_strdup_printf ("%u", pa->port),
                          g_strdup (pa->access));
    if (box_storage_sandbox_update (storage, sandbox, &local))
      return port_setting_to_json (self, sandbox, pa->port, pa->access);
    if (attempt == BOX_ENGINE_STORAGE_TRIES ||
        !g_error_matches (local, BOX_ERROR, BOX_ERROR_CONFLICT)) {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  }
}

static void
port_access_locked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  g_autoptr(GTask) task = user_data;
  PortAccess *pa = g_task_get_task_data (task);
  GError *error = NULL;
  JsonNode *node = write_port_access (self, pa, &error);

  box_engine_unlock_sandbox (self, pa->sandbox_id);
  if (node == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, node, (GDestroyNotify) json_node_unref);
}

void
box_engine_set_port_access_async (BoxEngine *self, const char *project, const char *id_or_name,
                                  guint port, const char *access, GCancellable *cancellable,
                                  GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  PortAccess *pa = g_new0 (PortAccess, 1);
  g_autoptr(BoxSandbox) sandbox = NULL;
  GError *error = NULL;

  g_task_set_source_tag (task, box_engine_set_port_access_async);
  pa->project = g_strdup (project);
  pa->id_or_name = g_strdup (id_or_name);
  pa->port = port;
  pa->access = g_strdup (access);
  g_task_set_task_data (task, pa, (GDestroyNotify) port_access_free);
  if (port < 1 || port > 65535 ||
      (g_strcmp0 (access, "private") != 0 && g_strcmp0 (access, "public") != 0)) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID,
                             port < 1 || port > 65535 ? "invalid port: must be 1 to 65535"
                                                      : "invalid access: must be private or public");
    g_object_unref (task);
    return;
  }
  sandbox = box_storage_sandbox_get (box_engine_get_storage (self), project, id_or_name, &error);
  if (sandbox == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  /* An operation in progress (a pause, an update ...) writes the record it
   * read when it began: take the sandbox's lock after it, so that neither
   * change is lost.  No wake is involved. */
  pa->sandbox_id = g_strdup (sandbox->id);
  box_engine_lock_sandbox_async (self, sandbox->id, port_access_locked, task);
}

JsonNode *
box_engine_set_port_access_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
