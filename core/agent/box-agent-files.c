/* box-agent-files.c: the fs-* operations, typed (see box-agent-files.h):
 * requests to JSON arguments, the Stat object and fs-list's lines to
 * BoxFileInfo. */
#include "config.h"

#include <string.h>

#include "box-agent-private.h"
#include "box-error.h"
#include "box-file-download.h"
#include "box-file-upload.h"
#include "box-file-watch.h"

#define LIST_LINE_MAX (1024 * 1024)

/* ---- records ------------------------------------------------------------- */

BoxFileInfo *
box_file_info_copy (const BoxFileInfo *info)
{
  BoxFileInfo *copy = g_new0 (BoxFileInfo, 1);

  copy->path = g_strdup (info->path);
  copy->name = g_strdup (info->name);
  copy->type = g_strdup (info->type);
  copy->size = info->size;
  copy->mode = g_strdup (info->mode);
  copy->mtime = g_strdup (info->mtime);
  copy->target = g_strdup (info->target);
  return copy;
}

void
box_file_info_free (BoxFileInfo *info)
{
  if (info == NULL)
    return;
  g_free (info->path);
  g_free (info->name);
  g_free (info->type);
  g_free (info->mode);
  g_free (info->mtime);
  g_free (info->target);
  g_free (info);
}

G_DEFINE_BOXED_TYPE (BoxFileInfo, box_file_info, box_file_info_copy, box_file_info_free)

BoxFileRequest *
box_file_request_copy (const BoxFileRequest *request)
{
  BoxFileRequest *copy = g_new0 (BoxFileRequest, 1);

  *copy = *request;
  copy->path = g_strdup (request->path);
  copy->from = g_strdup (request->from);
  copy->to = g_strdup (request->to);
  copy->user = g_strdup (request->user);
  return copy;
}

void
box_file_request_free (BoxFileRequest *request)
{
  if (request == NULL)
    return;
  g_free (request->path);
  g_free (request->from);
  g_free (request->to);
  g_free (request->user);
  g_free (request);
}

static gboolean
take_string (JsonObject *stat, const char *name, gboolean required, char **out, GError **error)
{
  JsonNode *node = json_object_get_member (stat, name);

  if (node == NULL && !required)
    return TRUE;
  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_STRING) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the agent's Stat has no string %s", name);
    return FALSE;
  }
  *out = g_strdup (json_node_get_string (node));
  return TRUE;
}

BoxFileInfo *
box_file_info_new_from_json (JsonObject *stat, GError **error)
{
  g_autoptr(BoxFileInfo) info = g_new0 (BoxFileInfo, 1);
  JsonNode *size;

  if (stat == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the agent sent no Stat");
    return NULL;
  }
  if (!take_string (stat, "path", TRUE, &info->path, error) ||
      !take_string (stat, "name", TRUE, &info->name, error) ||
      !take_string (stat, "type", TRUE, &info->type, error))
    return NULL;
  size = json_object_get_member (stat, "size");
  if (size == NULL || !JSON_NODE_HOLDS_VALUE (size) ||
      json_node_get_value_type (size) != G_TYPE_INT64) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the agent's Stat has no size");
    return NULL;
  }
  info->size = json_node_get_int (size);
  if (!take_string (stat, "mode", TRUE, &info->mode, error) ||
      !take_string (stat, "mtime", TRUE, &info->mtime, error) ||
      !take_string (stat, "target", FALSE, &info->target, error))
    return NULL;
  return g_steal_pointer (&info);
}

BoxFileInfo *
box_file_info_new_from_member (JsonObject *object, const char *name, GError **error)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, name) : NULL;

  return box_file_info_new_from_json (node != NULL && JSON_NODE_HOLDS_OBJECT (node) ?
                                      json_node_get_object (node) : NULL, error);
}

gboolean
box_file_list_take_lines (GString *buffer, GPtrArray *infos, GError **error)
{
  char *nl;

  while ((nl = memchr (buffer->str, '\n', buffer->len)) != NULL) {
    gsize len = (gsize) (nl - buffer->str);
    /* the agent (as of this writing) puts the array's separating comma
     * before each line but the first of a batch: tolerated */
    gsize skip = len > 0 && buffer->str[0] == ',' ? 1 : 0;
    g_autoptr(JsonObject) stat = NULL;
    BoxFileInfo *info;

    /* guest JSON: size, UTF-8 and depth checked before json-glib */
    stat = box_agent_json_parse_object (buffer->str + skip, len - skip, LIST_LINE_MAX, error);
    if (stat == NULL)
      return FALSE;
    info = box_file_info_new_from_json (stat, error);
    if (info == NULL)
      return FALSE;
    g_ptr_array_add (infos, info);
    g_string_erase (buffer, 0, (gssize) len + 1);
  }
  if (buffer->len > LIST_LINE_MAX) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "an fs-list line is too long");
    return FALSE;
  }
  return TRUE;
}

/* ---- requests ------------------------------------------------------------ */

static const char *
op_name (BoxFileOp op)
{
  switch (op) {
  case BOX_FILE_OP_STAT:    return "fs-stat";
  case BOX_FILE_OP_MKDIR:   return "fs-mkdir";
  case BOX_FILE_OP_RENAME:  return "fs-rename";
  case BOX_FILE_OP_DELETE:  return "fs-delete";
  case BOX_FILE_OP_READ:    return "fs-read";
  case BOX_FILE_OP_LIST:    return "fs-list";
  case BOX_FILE_OP_TAR_GET: return "fs-tar-get";
  case BOX_FILE_OP_WRITE:   return "fs-write";
  case BOX_FILE_OP_TAR_PUT: return "fs-tar-put";
  case BOX_FILE_OP_WATCH:   return "fs-watch";
  case BOX_FILE_OP_LOGS:    return "service-logs";
  default:                  g_assert_not_reached ();
  }
}

/* The request's arguments as the agent takes them. */
JsonObject *
box_file_request_to_args (const BoxFileRequest *request)
{
  JsonObject *args = json_object_new ();

  if (request->op == BOX_FILE_OP_RENAME) {
    json_object_set_string_member (args, "from", request->from);
    json_object_set_string_member (args, "to", request->to);
  } else {
    json_object_set_string_member (args, "path", request->path);
  }
  if (request->user != NULL)
    json_object_set_string_member (args, "user", request->user);
  if (request->op == BOX_FILE_OP_DELETE || request->op == BOX_FILE_OP_WATCH)
    json_object_set_boolean_member (args, "recursive", request->recursive);
  if (request->op == BOX_FILE_OP_MKDIR)
    json_object_set_boolean_member (args, "parents", request->parents);
  if (request->op == BOX_FILE_OP_WRITE)
    json_object_set_boolean_member (args, "mkdir", request->mkdir);
  if ((request->op == BOX_FILE_OP_MKDIR || request->op == BOX_FILE_OP_WRITE) && request->mode >= 0) {
    g_autofree char *mode = g_strdup_printf ("%04o", (guint) request->mode);

    json_object_set_string_member (args, "mode", mode);
  }
  return args;
}

static gboolean
check_request (const BoxFileRequest *request, BoxFileOp first, BoxFileOp last)
{
  if (request->op < first || request->op > last)
    return FALSE;
  if (request->op == BOX_FILE_OP_RENAME)
    return request->from != NULL && request->to != NULL;
  return request->path != NULL;
}

static void
fs_call_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  BoxFileOp op = GPOINTER_TO_INT (g_task_get_task_data (task));
  GError *error = NULL;
  g_autoptr(JsonObject) reply = box_agent_client_call_finish (BOX_AGENT_CLIENT (source), result,
                                                              &error);
  BoxFileInfo *info;

  if (reply == NULL) {
    g_task_return_error (task, error);
  } else if (op == BOX_FILE_OP_DELETE) {
    g_task_return_pointer (task, NULL, NULL);
  } else if ((info = box_file_info_new_from_member (reply, "stat", &error)) == NULL) {
    g_task_return_error (task, error);
  } else {
    g_task_return_pointer (task, info, (GDestroyNotify) box_file_info_free);
  }
}

void
box_agent_client_fs_call_async (BoxAgentClient *self, const BoxFileRequest *request,
                                GCancellable *cancellable, GAsyncReadyCallback callback,
                                gpointer user_data)
{
  GTask *task;
  g_autoptr(JsonObject) args = NULL;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  g_return_if_fail (request != NULL && check_request (request, BOX_FILE_OP_STAT, BOX_FILE_OP_DELETE));

  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_fs_call_async);
  g_task_set_task_data (task, GINT_TO_POINTER (request->op), NULL);
  args = box_file_request_to_args (request);
  box_agent_client_call_async (self, op_name (request->op), args, cancellable, fs_call_done, task);
}

gboolean
box_agent_client_fs_call_finish (BoxAgentClient *self, GAsyncResult *result, BoxFileInfo **info,
                                 GError **error)
{
  g_autoptr(BoxFileInfo) found = NULL;

  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  found = g_task_propagate_pointer (G_TASK (result), error);
  if (g_task_had_error (G_TASK (result)))
    return FALSE;
  if (info != NULL)
    *info = g_steal_pointer (&found);
  return TRUE;
}

/* ---- channels ------------------------------------------------------------ */

static void
fs_open_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  BoxFileRequest *request = g_task_get_task_data (task);
  GError *error = NULL;
  g_autoptr(BoxAgentChannel) channel =
    box_agent_client_open_channel_finish (BOX_AGENT_CLIENT (source), result, &error);

  if (channel == NULL)
    g_task_return_error (task, error);
  else if (request->op == BOX_FILE_OP_WATCH)
    g_task_return_pointer (task, box_file_watch_new (channel, request->path), g_object_unref);
  else if (request->op == BOX_FILE_OP_WRITE || request->op == BOX_FILE_OP_TAR_PUT)
    g_task_return_pointer (task, box_file_upload_new (channel, request->op), g_object_unref);
  else
    g_task_return_pointer (task, box_file_download_new (channel, request->op), g_object_unref);
}

static void
fs_open (BoxAgentClient *self, const BoxFileRequest *request, gpointer tag,
         GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(JsonObject) args = box_file_request_to_args (request);

  g_task_set_source_tag (task, tag);
  g_task_set_task_data (task, box_file_request_copy (request), (GDestroyNotify) box_file_request_free);
  box_agent_client_open_channel_async (self, op_name (request->op), args, cancellable,
                                       fs_open_done, task);
}

void
box_agent_client_fs_open_async (BoxAgentClient *self, const BoxFileRequest *request,
                                GCancellable *cancellable, GAsyncReadyCallback callback,
                                gpointer user_data)
{
  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  g_return_if_fail (request != NULL && check_request (request, BOX_FILE_OP_READ, BOX_FILE_OP_TAR_PUT));

  fs_open (self, request, box_agent_client_fs_open_async, cancellable, callback, user_data);
}

gpointer
box_agent_task_propagate_typed (GAsyncResult *result, gpointer source, gpointer tag, GType type,
                                GError **error)
{
  g_autoptr(GObject) object = NULL;

  g_return_val_if_fail (g_task_is_valid (result, source), NULL);
  g_return_val_if_fail (g_task_get_source_tag (G_TASK (result)) == tag, NULL);
  object = g_task_propagate_pointer (G_TASK (result), error);
  if (object != NULL && !g_type_is_a (G_OBJECT_TYPE (object), type)) {
    g_critical ("%s: the request was not for a %s", G_STRFUNC, g_type_name (type));
    return NULL;
  }
  return g_steal_pointer (&object);
}

BoxFileDownload *
box_agent_client_fs_download_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  return box_agent_task_propagate_typed (result, self, box_agent_client_fs_open_async,
                                         BOX_TYPE_FILE_DOWNLOAD, error);
}

BoxFileUpload *
box_agent_client_fs_upload_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  return box_agent_task_propagate_typed (result, self, box_agent_client_fs_open_async,
                                         BOX_TYPE_FILE_UPLOAD, error);
}

void
box_agent_client_fs_watch_async (BoxAgentClient *self, const BoxFileRequest *request,
                                 GCancellable *cancellable, GAsyncReadyCallback callback,
                                 gpointer user_data)
{
  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  g_return_if_fail (request != NULL && check_request (request, BOX_FILE_OP_WATCH, BOX_FILE_OP_WATCH));

  fs_open (self, request, box_agent_client_fs_watch_async, cancellable, callback, user_data);
}

BoxFileWatch *
box_agent_client_fs_watch_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- service logs ---------------------------------------------------------- */

static void
service_logs_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  g_autoptr(BoxAgentChannel) channel =
    box_agent_client_open_channel_finish (BOX_AGENT_CLIENT (source), result, &error);

  if (channel == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, box_file_download_new (channel, BOX_FILE_OP_LOGS), g_object_unref);
}

void
box_agent_client_service_logs_async (BoxAgentClient *self, const char *name, gint tail,
                                     gboolean follow, GCancellable *cancellable,
                                     GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;
  g_autoptr(JsonObject) args = json_object_new ();

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  g_return_if_fail (name != NULL);

  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_service_logs_async);
  json_object_set_string_member (args, "name", name);
  if (tail >= 0)
    json_object_set_int_member (args, "tail", tail);
  json_object_set_boolean_member (args, "follow", follow);
  box_agent_client_open_channel_async (self, op_name (BOX_FILE_OP_LOGS), args, cancellable,
                                       service_logs_opened, task);
}

BoxFileDownload *
box_agent_client_service_logs_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  return box_agent_task_propagate_typed (result, self, box_agent_client_service_logs_async,
                                         BOX_TYPE_FILE_DOWNLOAD, error);
}
