/* box-http-exec.c: POST /v1/sandboxes/{sandbox}/exec/run. */
#include "config.h"

#include "box-http-util.h"
#include "box-requests.h"

static char *
base64_of (GBytes *bytes)
{
  gsize len = 0;
  const guchar *data = bytes != NULL ? g_bytes_get_data (bytes, &len) : NULL;

  return g_base64_encode (data, len);
}

static void
exec_run_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxExecResult) exec = box_engine_exec_run_finish (BOX_ENGINE (source), result, &error);
  g_autoptr(JsonBuilder) builder = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;

  if (exec == NULL) {
    box_http_reply_error (req->msg, error);
    box_http_request_resume (req);
    return;
  }
  out = base64_of (exec->stdout_data);
  err = base64_of (exec->stderr_data);
  builder = json_builder_new ();
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "exit_code");
  json_builder_add_int_value (builder, exec->exit_code);
  json_builder_set_member_name (builder, "stdout");
  json_builder_add_string_value (builder, out);
  json_builder_set_member_name (builder, "stderr");
  json_builder_add_string_value (builder, err);
  json_builder_set_member_name (builder, "timed_out");
  json_builder_add_boolean_value (builder, exec->timed_out);
  if (exec->truncated) {
    json_builder_set_member_name (builder, "truncated");
    json_builder_add_boolean_value (builder, TRUE);
  }
  json_builder_end_object (builder);
  box_http_reply_json (req->msg, SOUP_STATUS_OK, json_builder_get_root (builder));
  box_http_request_resume (req);
}

void
box_http_exec_run (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = box_http_request_body (req, FALSE, &error);
  BoxExecRequest *request;

  if (body == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  request = box_exec_request_from_json (body, &error);
  if (request == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_request_keep (req, request, (GDestroyNotify) box_exec_request_free);
  box_engine_exec_run_async (req->engine, box_http_request_project (req),
                             box_http_request_param (req, 0), request, NULL, exec_run_cb,
                             box_http_request_pause (req));
}
