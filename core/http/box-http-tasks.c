/* box-http-tasks.c: /v1/sandboxes/{sandbox}/tasks...
 *
 * Tasks are records of the service (box-engine-tasks.c): these routes
 * never wake the sandbox and are not its activity.  All of them are also
 * served on the in-sandbox socket, for its own sandbox.  A name is one
 * path segment, URL-decoded (a slash comes as %2F); the empty name (a
 * path ending in "/tasks/") is 400 invalid, as a name over 128 bytes,
 * once the sandbox was found (another project's is 404 first).
 */
#include "config.h"

#include "box-error.h"
#include "box-http-util.h"
#include "box-requests.h"

static JsonNode *
task_to_json (const BoxTask *task)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autofree char *started = box_time_format (task->started_at);
  g_autofree char *expires = box_time_format (task->expires_at);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "name");
  json_builder_add_string_value (builder, task->name);
  json_builder_set_member_name (builder, "started_at");
  json_builder_add_string_value (builder, started);
  json_builder_set_member_name (builder, "expires_at");
  json_builder_add_string_value (builder, expires);
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

static void
reply_task (BoxHttpRequest *req, BoxTask *task, GError *error)
{
  if (task == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_reply_json (req->msg, SOUP_STATUS_OK, task_to_json (task));
}

void
box_http_task_list (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) tasks = NULL;
  g_autoptr(GPtrArray) nodes = box_http_node_array_new ();

  tasks = box_engine_list_tasks (req->engine, box_http_request_project (req),
                                 box_http_request_param (req, 0), &error);
  if (tasks == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  for (guint i = 0; i < tasks->len; i++)
    g_ptr_array_add (nodes, task_to_json (g_ptr_array_index (tasks, i)));
  box_http_reply_list (req->msg, "tasks", nodes);
}

void
box_http_task_put (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(BoxTask) task = NULL;
  const char *name = box_http_request_param (req, 1);
  guint expire_s = 0;

  body = box_http_request_body (req, TRUE, &error);
  if (body == NULL || !box_task_put_from_json (body, &expire_s, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  task = box_engine_put_task (req->engine, box_http_request_project (req),
                              box_http_request_param (req, 0), name, expire_s, &error);
  reply_task (req, task, error);
}

void
box_http_task_get (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxTask) task = NULL;

  task = box_engine_get_task (req->engine, box_http_request_project (req),
                              box_http_request_param (req, 0), box_http_request_param (req, 1),
                              &error);
  reply_task (req, task, error);
}

void
box_http_task_delete (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;

  if (!box_engine_delete_task (req->engine, box_http_request_project (req),
                               box_http_request_param (req, 0), box_http_request_param (req, 1),
                               &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_reply_empty (req->msg, SOUP_STATUS_NO_CONTENT);
}

/* PUT, GET or DELETE .../tasks/ (the empty name): 404 for a sandbox not
 * found, else 400 for the name; nothing is written. */
void
box_http_task_no_name (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxTask) task = box_engine_get_task (req->engine, box_http_request_project (req),
                                                 box_http_request_param (req, 0), "", &error);

  g_assert (task == NULL);
  box_http_reply_error (req->msg, error);
}
