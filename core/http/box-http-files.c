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

/* An octal permission string (1 to 4 digits, at most 07777) as "0NNN". */
static gboolean
parse_mode (const char *name, const char *value, char **out, GError **error)
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
  *out = g_strdup_printf ("%04o", mode);
  return TRUE;
}

JsonObject *
box_http_files_args_new (BoxHttpRequest *req, const char *path)
{
  JsonObject *args = json_object_new ();
  const char *user = box_http_request_query (req, "user");

  if (path != NULL)
    json_object_set_string_member (args, "path", path);
  if (user != NULL)
    json_object_set_string_member (args, "user", user);
  return args;
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

static gboolean
copy_string (JsonObject *from, JsonObject *to, const char *name, gboolean required,
             GError **error)
{
  JsonNode *node = json_object_get_member (from, name);

  if (node == NULL && !required)
    return TRUE;
  if (node == NULL || !box_json_is_string (node)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the agent's Stat has no string %s", name);
    return FALSE;
  }
  json_object_set_string_member (to, name, json_node_get_string (node));
  return TRUE;
}

JsonNode *
box_http_files_stat_node (JsonObject *stat, GError **error)
{
  g_autoptr(JsonObject) out = json_object_new ();
  JsonNode *size = stat != NULL ? json_object_get_member (stat, "size") : NULL;
  JsonNode *node;

  if (stat == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the agent sent no Stat");
    return NULL;
  }
  if (!copy_string (stat, out, "path", TRUE, error) ||
      !copy_string (stat, out, "name", TRUE, error) ||
      !copy_string (stat, out, "type", TRUE, error))
    return NULL;
  if (size == NULL || !JSON_NODE_HOLDS_VALUE (size) ||
      json_node_get_value_type (size) != G_TYPE_INT64) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the agent's Stat has no size");
    return NULL;
  }
  json_object_set_int_member (out, "size", json_node_get_int (size));
  if (!copy_string (stat, out, "mode", TRUE, error) ||
      !copy_string (stat, out, "mtime", TRUE, error) ||
      !copy_string (stat, out, "target", FALSE, error))
    return NULL;
  node = json_node_new (JSON_NODE_OBJECT);
  json_node_set_object (node, out);
  return node;
}

static JsonObject *
member_object (JsonObject *obj, const char *name)
{
  JsonNode *node = obj != NULL ? json_object_get_member (obj, name) : NULL;

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

/* ---- one-shot operations ------------------------------------------------ */

typedef enum {
  REPLY_STAT,       /* {stat} -> Stat */
  REPLY_EMPTY,      /* 204 */
} ReplyKind;

static void
fs_call_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  ReplyKind kind = GPOINTER_TO_INT (req->kept);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) reply = box_engine_fs_call_finish (BOX_ENGINE (source), result, &error);
  JsonNode *node;

  if (reply == NULL) {
    box_http_reply_error (req->msg, error);
  } else if (kind == REPLY_EMPTY) {
    box_http_reply_empty (req->msg, SOUP_STATUS_NO_CONTENT);
  } else if ((node = box_http_files_stat_node (member_object (reply, "stat"), &error)) == NULL) {
    box_http_reply_error (req->msg, error);
  } else {
    box_http_reply_json (req->msg, SOUP_STATUS_OK, node);
  }
  box_http_request_resume (req);
}

/* Runs @op with @args (taken) and answers as @kind says. */
static void
fs_call (BoxHttpRequest *req, const char *op, JsonObject *args, ReplyKind kind)
{
  g_autoptr(JsonObject) owned = args;

  box_http_request_keep (req, GINT_TO_POINTER (kind), NULL);
  box_engine_fs_call_async (req->engine, box_http_request_project (req),
                            box_http_request_param (req, 0), op, owned, NULL, fs_call_cb,
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
  fs_call (req, "fs-stat", box_http_files_args_new (req, path), REPLY_STAT);
}

void
box_http_fs_file_delete (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "path", "user", "recursive", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) args = NULL;
  const char *path = NULL;
  gboolean recursive = FALSE;

  if (!path_query (req, allowed, &path))
    return;
  if (!box_http_request_query_bool (req, "recursive", FALSE, &recursive, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  args = box_http_files_args_new (req, path);
  json_object_set_boolean_member (args, "recursive", recursive);
  fs_call (req, "fs-delete", g_steal_pointer (&args), REPLY_EMPTY);
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
  g_autoptr(JsonObject) args = NULL;
  g_autofree char *path = NULL;
  g_autofree char *mode_str = NULL;
  g_autofree char *mode = NULL;
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
  args = box_http_files_args_new (req, path);
  json_object_set_boolean_member (args, "parents", parents);
  if (mode != NULL)
    json_object_set_string_member (args, "mode", mode);
  fs_call (req, "fs-mkdir", g_steal_pointer (&args), REPLY_STAT);
}

void
box_http_fs_rename (BoxHttpRequest *req)
{
  static const char *const query[] = { "user", NULL };
  static const char *const fields[] = { "from", "to", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) body = NULL;
  g_autoptr(JsonObject) args = NULL;
  g_autofree char *from = NULL;
  g_autofree char *to = NULL;

  if (!box_http_request_check_query (req, query, NULL, &error) || !check_user (req, &error) ||
      (body = body_object (req, fields, &error)) == NULL ||
      !body_path (body, "from", &from, &error) ||
      !body_path (body, "to", &to, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  args = box_http_files_args_new (req, NULL);
  json_object_set_string_member (args, "from", from);
  json_object_set_string_member (args, "to", to);
  fs_call (req, "fs-rename", g_steal_pointer (&args), REPLY_STAT);
}

/* ---- streams ------------------------------------------------------------ */

/* GET fs/file, fs/list, fs/tar: the agent's output of @op streamed. */
static void
download (BoxHttpRequest *req, const char *op, const char *content_type, gboolean list)
{
  static const char *const allowed[] = { "path", "user", NULL };
  const char *path = NULL;
  g_autoptr(JsonObject) args = NULL;

  if (!path_query (req, allowed, &path))
    return;
  args = box_http_files_args_new (req, path);
  box_http_files_download (req, op, args, content_type, list);
}

void
box_http_fs_file_get (BoxHttpRequest *req)
{
  download (req, "fs-read", "application/octet-stream", FALSE);
}

void
box_http_fs_list (BoxHttpRequest *req)
{
  download (req, "fs-list", "application/json", TRUE);
}

void
box_http_fs_tar_get (BoxHttpRequest *req)
{
  download (req, "fs-tar-get", "application/x-tar", FALSE);
}

/* Early stage of PUT fs/file: the query is checked before any byte of the
 * body is read. */
void
box_http_fs_file_put_start (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "path", "user", "mode", "mkdir", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) args = NULL;
  g_autofree char *mode = NULL;
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
  args = box_http_files_args_new (req, path);
  json_object_set_boolean_member (args, "mkdir", mkdir);
  if (mode != NULL)
    json_object_set_string_member (args, "mode", mode);
  box_http_files_upload_start (req, "fs-write", args, TRUE);
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
  g_autoptr(JsonObject) args = NULL;
  const char *path = NULL;

  if (!box_http_request_check_query (req, allowed, NULL, &error) || !check_user (req, &error) ||
      !box_http_files_query_path (req, "path", &path, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  args = box_http_files_args_new (req, path);
  box_http_files_upload_start (req, "fs-tar-put", args, FALSE);
}

void
box_http_fs_tar_put (BoxHttpRequest *req)
{
  box_http_files_upload_finish (req);
}
