/* box-engine-services.c: supervised services, through the sandbox's agent
 * (its service-* operations, doc/AGENT-PROTOCOL.md).  Every call holds
 * (wakes) the sandbox like the other sub-API calls.  A PUT checks the
 * definition here first, then the needs against the agent's listing, then
 * hands it to the agent; every record from the agent is checked
 * (box_service_record_from_agent) before a client sees it.
 */
#include "config.h"

#include "box-agent-client.h"
#include "box-agent-files.h"
#include "box-file-download.h"
#include "box-engine-private.h"
#include "box-error.h"
#include "box-services.h"

static const char *const op_names[] = {
  [BOX_SERVICE_OP_LIST] = "service-list",
  [BOX_SERVICE_OP_GET] = "service-get",
  [BOX_SERVICE_OP_PUT] = "service-put",
  [BOX_SERVICE_OP_DELETE] = "service-delete",
  [BOX_SERVICE_OP_START] = "service-start",
  [BOX_SERVICE_OP_STOP] = "service-stop",
  [BOX_SERVICE_OP_RESTART] = "service-restart",
};

typedef struct {
  BoxServiceOp op;
  char *name;
  JsonObject *def;       /* PUT */
  guint port;            /* ensure_port: the http_port; 0 otherwise */
  BoxAgentClient *agent;
} ServiceCall;

static void
service_call_free (ServiceCall *call)
{
  g_free (call->name);
  g_clear_pointer (&call->def, json_object_unref);
  g_clear_object (&call->agent);
  g_free (call);
}

/* The listing's records, checked; NULL with @error. */
static JsonArray *
records_from_reply (JsonObject *reply, GError **error)
{
  JsonNode *node = json_object_get_member (reply, "services");
  g_autoptr(JsonArray) out = json_array_new ();
  JsonArray *raw;

  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node) ||
      json_array_get_length (raw = json_node_get_array (node)) > BOX_SERVICES_MAX) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "agent: bad service listing");
    return NULL;
  }
  for (guint i = 0; i < json_array_get_length (raw); i++) {
    JsonNode *e = json_array_get_element (raw, i);
    JsonObject *record = box_service_record_from_agent (JSON_NODE_HOLDS_OBJECT (e) ?
                                                        json_node_get_object (e) : NULL, error);
    if (record == NULL)
      return NULL;
    json_array_add_object_element (out, record);
  }
  return g_steal_pointer (&out);
}

static JsonObject *
record_from_reply (JsonObject *reply, GError **error)
{
  JsonNode *node = json_object_get_member (reply, "service");

  return box_service_record_from_agent (node != NULL && JSON_NODE_HOLDS_OBJECT (node) ?
                                        json_node_get_object (node) : NULL, error);
}

static void
finish_node (GTask *task, JsonNode *node, GError *error)
{
  box_engine_task_release (task);
  if (node == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, node, (GDestroyNotify) json_node_unref);
}

static void call_op (GTask *task, BoxServiceOp op);

static void
op_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  ServiceCall *call = g_task_get_task_data (task);
  GError *error = NULL;
  g_autoptr(JsonObject) reply = box_agent_client_call_finish (BOX_AGENT_CLIENT (source), result,
                                                               &error);
  JsonNode *node = NULL;

  if (reply == NULL) {
    finish_node (task, NULL, error);
    return;
  }
  if (call->op == BOX_SERVICE_OP_DELETE) {
    node = json_node_new (JSON_NODE_NULL);
  } else if (call->op == BOX_SERVICE_OP_LIST) {
    JsonArray *records = records_from_reply (reply, &error);
    if (records != NULL)
      node = json_node_init_array (json_node_alloc (), records);
    g_clear_pointer (&records, json_array_unref);
  } else {
    JsonObject *record = record_from_reply (reply, &error);
    if (record != NULL)
      node = json_node_init_object (json_node_alloc (), record);
    g_clear_pointer (&record, json_object_unref);
  }
  finish_node (task, node, error);
}

/* The listing a PUT or an ensure_port needs came. */
static void
listed_first (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  ServiceCall *call = g_task_get_task_data (task);
  GError *error = NULL;
  g_autoptr(JsonObject) reply = box_agent_client_call_finish (BOX_AGENT_CLIENT (source), result,
                                                               &error);
  g_autoptr(JsonArray) records = reply != NULL ? records_from_reply (reply, &error) : NULL;

  if (records == NULL) {
    finish_node (task, NULL, error);
    return;
  }
  if (call->port == 0) {
    if (!box_service_needs_check (call->name, call->def, records, &error)) {
      finish_node (task, NULL, error);
      return;
    }
    call_op (g_steal_pointer (&task), BOX_SERVICE_OP_PUT);
    return;
  }
  /* ensure_port: the first service serving the port */
  for (guint i = 0; i < json_array_get_length (records); i++) {
    JsonObject *s = json_array_get_object_element (records, i);
    if (json_object_has_member (s, "http_port") &&
        json_object_get_int_member (s, "http_port") == call->port) {
      call->name = g_strdup (json_object_get_string_member (s, "name"));
      if (g_str_equal (json_object_get_string_member (s, "state"), "running")) {
        finish_node (task, json_node_init_object (json_node_alloc (), s), NULL);
        return;
      }
      call_op (g_steal_pointer (&task), BOX_SERVICE_OP_START);
      return;
    }
  }
  finish_node (task, NULL, g_error_new (BOX_ERROR, BOX_ERROR_NOT_FOUND,
                                        "no service serves port %u", call->port));
}

static void
call_op (GTask *task, BoxServiceOp op)
{
  ServiceCall *call = g_task_get_task_data (task);
  g_autoptr(JsonObject) args = json_object_new ();

  call->op = op;
  if (call->name != NULL && op != BOX_SERVICE_OP_LIST)
    json_object_set_string_member (args, "name", call->name);
  if (op == BOX_SERVICE_OP_PUT)
    json_object_set_object_member (args, "def", json_object_ref (call->def));
  box_agent_client_call_async (call->agent, op_names[op], args, g_task_get_cancellable (task),
                               op_done, task);
}

static void
service_start (BoxEngine *self, BoxAgentClient *agent, GTask *task)
{
  ServiceCall *call = g_task_get_task_data (task);
  g_autoptr(JsonObject) none = json_object_new ();

  call->agent = g_object_ref (agent);
  if (call->op == BOX_SERVICE_OP_PUT || call->port != 0) {
    box_agent_client_call_async (agent, "service-list", none, g_task_get_cancellable (task),
                                 listed_first, task);
    return;
  }
  call_op (task, call->op);
}

void
box_engine_service_async (BoxEngine *self, const char *project, const char *id_or_name,
                          BoxServiceOp op, const char *name, JsonObject *definition,
                          GCancellable *cancellable, GAsyncReadyCallback callback,
                          gpointer user_data)
{
  GTask *task;
  ServiceCall *call;
  GError *error = NULL;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (op <= BOX_SERVICE_OP_RESTART);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_service_async);
  if ((op != BOX_SERVICE_OP_LIST && !box_service_name_check (name, &error)) ||
      (op == BOX_SERVICE_OP_PUT && (definition == NULL ||
                                    !box_service_definition_check (name, definition, &error)))) {
    if (error == NULL)
      error = g_error_new_literal (BOX_ERROR, BOX_ERROR_INVALID, "a definition is an object");
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  call = g_new0 (ServiceCall, 1);
  call->op = op;
  call->name = g_strdup (name);
  call->def = definition != NULL ? json_object_ref (definition) : NULL;
  g_task_set_task_data (task, call, (GDestroyNotify) service_call_free);
  box_engine_agent_task (self, project, id_or_name, service_start, task);
}

JsonNode *
box_engine_service_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_engine_ensure_port_service_async (BoxEngine *self, const char *project,
                                      const char *id_or_name, guint port,
                                      GCancellable *cancellable, GAsyncReadyCallback callback,
                                      gpointer user_data)
{
  GTask *task;
  ServiceCall *call;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (port >= 1 && port <= 65535);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_ensure_port_service_async);
  call = g_new0 (ServiceCall, 1);
  call->op = BOX_SERVICE_OP_LIST;
  call->port = port;
  g_task_set_task_data (task, call, (GDestroyNotify) service_call_free);
  box_engine_agent_task (self, project, id_or_name, service_start, task);
}

JsonNode *
box_engine_ensure_port_service_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- logs (held by the caller) ------------------------------------------- */

typedef struct {
  char     *name;
  gint      tail;
  gboolean  follow;
} LogsCall;

static void
logs_call_free (LogsCall *call)
{
  g_free (call->name);
  g_free (call);
}

static void
logs_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  BoxFileDownload *download = box_agent_client_service_logs_finish (BOX_AGENT_CLIENT (source),
                                                                    result, &error);

  if (download == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, download, g_object_unref);
}

static void
logs_run (BoxEngine *self, BoxAgentClient *agent, GTask *task)
{
  LogsCall *call = g_task_get_task_data (task);

  box_agent_client_service_logs_async (agent, call->name, call->tail, call->follow,
                                       g_task_get_cancellable (task), logs_opened, task);
}

void
box_engine_service_logs_async (BoxEngine *self, const char *sandbox_id, const char *name,
                               gint tail, gboolean follow, GCancellable *cancellable,
                               GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;
  LogsCall *call;
  GError *error = NULL;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_service_logs_async);
  if (!box_service_name_check (name, &error)) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  if (tail > BOX_SERVICE_LOGS_TAIL_MAX) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID,
                             "tail must be an integer from 0 to %d", BOX_SERVICE_LOGS_TAIL_MAX);
    g_object_unref (task);
    return;
  }
  call = g_new0 (LogsCall, 1);
  call->name = g_strdup (name);
  call->tail = tail;
  call->follow = follow;
  g_task_set_task_data (task, call, (GDestroyNotify) logs_call_free);
  /* the caller holds the sandbox */
  box_engine_agent_task_held (self, sandbox_id, FALSE, logs_run, task);
}

BoxFileDownload *
box_engine_service_logs_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  return box_agent_task_propagate_typed (result, self, box_engine_service_logs_async,
                                         BOX_TYPE_FILE_DOWNLOAD, error);
}
