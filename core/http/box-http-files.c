/* box-http-files.c: /v1/sandboxes/{sandbox}/fs/... (spec "Files"): the
 * query rules, Stat, and the one-shot operations (stat, delete, mkdir,
 * rename); the streams are in box-http-files-stream.c. */
#include "config.h"

#include <string.h>

#include "box-http-files.h"
#include "box-json-private.h"
#include "box-requests.h"

/* ---- query ------------------------------------------------------------- */

static gboolean
check_path (const char *name, const char *path, GError **error)
{
  if (path == NULL || path[0] == '\0') {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s is required", name);
    return FALSE;
  }
  if (path[0] != '/') {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s must be an absolute path, not %s",
                 name, path);
    return FALSE;
  }
  return TRUE;
}

gboolean
box_http_files_query_path (BoxHttpRequest *req, const char *name, const char **out,
                           GError **error)
{
  const char *path = box_http_request_query (req, name);

  if (!check_path (name, path, error))
    return FALSE;
  *out = path;
  return TRUE;
}

/* An octal permission string (1 to 4 digits, at most 07777). */
static gboolean
parse_mode (const char *name, const char *value, gint *out, GError **error)
{
  guint mode = 0;
  gsize len = strlen (value);

  if (len == 0 || len > 5) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "%s must be an octal permission string like 0644, not %s", name, value);
    return FALSE;
  }
  for (gsize i = 0; i < len; i++) {
    if (value[i] < '0' || value[i] > '7') {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                   "%s must be an octal permission string like 0644, not %s", name, value);
      return FALSE;
    }
    mode = mode * 8 + (guint) (value[i] - '0');
  }
  if (mode > 07777) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s %s is beyond 07777", name, value);
    return FALSE;
  }
  *out = (gint) mode;
  return TRUE;
}

BoxFileRequest *
box_http_files_request_new (BoxHttpRequest *req, BoxFileOp op, const char *path)
{
  BoxFileRequest *request = g_new0 (BoxFileRequest, 1);

  request->op = op;
  request->path = g_strdup (path);
  request->user = g_strdup (box_http_request_query (req, "user"));
  request->mode = -1;
  return request;
}

static gboolean
check_user (BoxHttpRequest *req, GError **error)
{
  const char *user = box_http_request_query (req, "user");

  if (user != NULL && user[0] == '\0') {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, "user must not be empty");
    return FALSE;
  }
  return TRUE;
}

/* ---- Stat ----------------------------------------------------------------- */

JsonNode *
box_http_files_info_node (const BoxFileInfo *info)
{
  g_autoptr(JsonObject) out = json_object_new ();
  JsonNode *node;

  json_object_set_string_member (out, "path", info->path);
  json_object_set_string_member (out, "name", info->name);
  json_object_set_string_member (out, "type", info->type);
  json_object_set_int_member (out, "size", info->size);
  json_object_set_string_member (out, "mode", info->mode);
  json_object_set_string_member (out, "mtime", info->mtime);
  if (info->target != NULL)
    json_object_set_string_member (out, "target", info->target);
  node = json_node_new (JSON_NODE_OBJECT);
  json_node_set_object (node, out);
  return node;
}

/* ---- one-shot operations ------------------------------------------------ */

static void
fs_call_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxFileInfo) info = NULL;

  if (!box_engine_fs_call_finish (BOX_ENGINE (source), result, &info, &error))
    box_http_reply_error (req->msg, error);
  else if (info == NULL)
    box_http_reply_empty (req->msg, SOUP_STATUS_NO_CONTENT);
  else
    box_http_reply_json (req->msg, SOUP_STATUS_OK, box_http_files_info_node (info));
  box_http_request_resume (req);
}

/* Runs @request (taken) and answers with its Stat, or 204 without one. */
static void
fs_call (BoxHttpRequest *req, BoxFileRequest *request)
{
  g_autoptr(BoxFileRequest) owned = request;

  box_engine_fs_call_async (req->engine, box_http_request_project (req),
                            box_http_request_param (req, 0), owned, NULL, fs_call_cb,
                            box_http_request_pause (req));
}

/* Checks the query of a route whose only query parameters are @allowed
 * and whose path comes from "path"; answers the error itself. */
static gboolean
path_query (BoxHttpRequest *req, const char *const *allowed, const char **path)
{
  g_autoptr(GError) error = NULL;

  if (!box_http_request_check_query (req, allowed, NULL, &error) || !check_user (req, &error) ||
      !box_http_files_query_path (req, "path", path, &error)) {
    box_http_reply_error (req->msg, error);
    return FALSE;
  }
  return TRUE;
}

void
box_http_fs_stat (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "path", "user", NULL };
  const char *path = NULL;

  if (!path_query (req, allowed, &path))
    return;
  fs_call (req, box_http_files_request_new (req, BOX_FILE_OP_STAT, path));
}

void
box_http_fs_file_delete (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "path", "user", "recursive", NULL };
  g_autoptr(GError) error = NULL;
  BoxFileRequest *request;
  const char *path = NULL;
  gboolean recursive = FALSE;

  if (!path_query (req, allowed, &path))
    return;
  if (!box_http_request_query_bool (req, "recursive", FALSE, &recursive, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  request = box_http_files_request_new (req, BOX_FILE_OP_DELETE, path);
  request->recursive = recursive;
  fs_call (req, request);
}

/* The JSON body of mkdir and rename, with only @allowed members. */
static JsonObject *
body_object (BoxHttpRequest *req, const char *const *allowed, GError **error)
{
  g_autoptr(JsonNode) body = box_http_request_body (req, FALSE, error);

  if (body == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (body)) {
    box_json_not_an_object (body, error);
    return NULL;
  }
  if (!box_json_check_fields (json_node_get_object (body), allowed, error))
    return NULL;
  return json_object_ref (json_node_get_object (body));
}

static gboolean
body_path (JsonObject *body, const char *name, char **out, GError **error)
{
  if (!box_json_get_string (body, name, name, out, error))
    return FALSE;
  return check_path (name, *out, error);
}

void
box_http_fs_mkdir (BoxHttpRequest *req)
{
  static const char *const query[] = { "user", NULL };
  static const char *const fields[] = { "path", "parents", "mode", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) body = NULL;
  BoxFileRequest *request;
  g_autofree char *path = NULL;
  g_autofree char *mode_str = NULL;
  gint mode = -1;
  gboolean parents = FALSE;

  if (!box_http_request_check_query (req, query, NULL, &error) || !check_user (req, &error) ||
      (body = body_object (req, fields, &error)) == NULL ||
      !body_path (body, "path", &path, &error) ||
      !box_json_get_bool (body, "parents", "parents", NULL, &parents, &error) ||
      !box_json_get_string (body, "mode", "mode", &mode_str, &error) ||
      (mode_str != NULL && !parse_mode ("mode", mode_str, &mode, &error))) {
    box_http_reply_error (req->msg, error);
    return;
  }
  request = box_http_files_request_new (req, BOX_FILE_OP_MKDIR, path);
  request->parents = parents;
  request->mode = mode;
  fs_call (req, request);
}

void
box_http_fs_rename (BoxHttpRequest *req)
{
  static const char *const query[] = { "user", NULL };
  static const char *const fields[] = { "from", "to", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) body = NULL;
  BoxFileRequest *request;
  g_autofree char *from = NULL;
  g_autofree char *to = NULL;

  if (!box_http_request_check_query (req, query, NULL, &error) || !check_user (req, &error) ||
      (body = body_object (req, fields, &error)) == NULL ||
      !body_path (body, "from", &from, &error) ||
      !body_path (body, "to", &to, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  request = box_http_files_request_new (req, BOX_FILE_OP_RENAME, NULL);
  request->from = g_steal_pointer (&from);
  request->to = g_steal_pointer (&to);
  fs_call (req, request);
}

/* ---- streams ------------------------------------------------------------ */

/* GET fs/file, fs/list, fs/tar: the output of @op streamed. */
static void
download (BoxHttpRequest *req, BoxFileOp op, const char *content_type)
{
  static const char *const allowed[] = { "path", "user", NULL };
  const char *path = NULL;
  g_autoptr(BoxFileRequest) request = NULL;

  if (!path_query (req, allowed, &path))
    return;
  request = box_http_files_request_new (req, op, path);
  box_http_files_download (req, request, content_type);
}

void
box_http_fs_file_get (BoxHttpRequest *req)
{
  download (req, BOX_FILE_OP_READ, "application/octet-stream");
}

void
box_http_fs_list (BoxHttpRequest *req)
{
  download (req, BOX_FILE_OP_LIST, "application/json");
}

void
box_http_fs_tar_get (BoxHttpRequest *req)
{
  download (req, BOX_FILE_OP_TAR_GET, "application/x-tar");
}

/* Early stage of PUT fs/file: the query is checked before any byte of the
 * body is read. */
void
box_http_fs_file_put_start (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "path", "user", "mode", "mkdir", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxFileRequest) request = NULL;
  gint mode = -1;
  const char *mode_str = box_http_request_query (req, "mode");
  const char *path = NULL;
  gboolean mkdir = FALSE;

  if (!box_http_request_check_query (req, allowed, NULL, &error) || !check_user (req, &error) ||
      !box_http_files_query_path (req, "path", &path, &error) ||
      !box_http_request_query_bool (req, "mkdir", FALSE, &mkdir, &error) ||
      (mode_str != NULL && !parse_mode ("mode", mode_str, &mode, &error))) {
    box_http_reply_error (req->msg, error);
    return;
  }
  request = box_http_files_request_new (req, BOX_FILE_OP_WRITE, path);
  request->mkdir = mkdir;
  request->mode = mode;
  box_http_files_upload_start (req, request);
}

void
box_http_fs_file_put (BoxHttpRequest *req)
{
  box_http_files_upload_finish (req);
}

void
box_http_fs_tar_put_start (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "path", "user", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxFileRequest) request = NULL;
  const char *path = NULL;

  if (!box_http_request_check_query (req, allowed, NULL, &error) || !check_user (req, &error) ||
      !box_http_files_query_path (req, "path", &path, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  request = box_http_files_request_new (req, BOX_FILE_OP_TAR_PUT, path);
  box_http_files_upload_start (req, request);
}

void
box_http_fs_tar_put (BoxHttpRequest *req)
{
  box_http_files_upload_finish (req);
}
