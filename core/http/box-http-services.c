/* box-http-services.c: a sandbox's supervised services.
 *
 *   GET    /v1/sandboxes/{sandbox}/services                      {services: [Service]}
 *   PUT    /v1/sandboxes/{sandbox}/services/{name}               definition -> Service
 *   GET    /v1/sandboxes/{sandbox}/services/{name}               Service
 *   DELETE /v1/sandboxes/{sandbox}/services/{name}               204
 *   POST   /v1/sandboxes/{sandbox}/services/{name}/start|stop|restart  Service
 *   GET    /v1/sandboxes/{sandbox}/services/{name}/logs?tail=&follow=&wake=  text/plain
 *
 * All of them wake the sandbox (sub-API routes) and are served on the
 * in-sandbox socket too.  The rules are the engine's (box-engine-services.c)
 * and the agent's (agent/services.c).
 */
#include "config.h"

#include "box-http-files.h"
#include "box-services.h"

static void
service_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = box_engine_service_finish (req->engine, result, &error);

  if (node == NULL) {
    box_http_reply_error (req->msg, error);
  } else if (JSON_NODE_HOLDS_NULL (node)) {
    box_http_reply_empty (req->msg, SOUP_STATUS_NO_CONTENT);
  } else if (JSON_NODE_HOLDS_ARRAY (node)) {
    g_autoptr(GPtrArray) nodes = box_http_node_array_new ();
    JsonArray *array = json_node_get_array (node);

    for (guint i = 0; i < json_array_get_length (array); i++)
      g_ptr_array_add (nodes, json_node_copy (json_array_get_element (array, i)));
    box_http_reply_list (req->msg, "services", nodes);
  } else {
    box_http_reply_json (req->msg, SOUP_STATUS_OK, g_steal_pointer (&node));
  }
  box_http_request_resume (req);
}

static void
service_call (BoxHttpRequest *req, BoxServiceOp op, JsonObject *definition)
{
  box_engine_service_async (req->engine, box_http_request_project (req),
                            box_http_request_param (req, 0), op,
                            op == BOX_SERVICE_OP_LIST ? NULL : box_http_request_param (req, 1),
                            definition, NULL, service_done, box_http_request_pause (req));
}

/* a route without a body */
static void
bodiless (BoxHttpRequest *req, BoxServiceOp op)
{
  g_autoptr(GError) error = NULL;

  if (!box_http_request_no_body (req, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  service_call (req, op, NULL);
}

void
box_http_service_list (BoxHttpRequest *req)
{
  service_call (req, BOX_SERVICE_OP_LIST, NULL);
}

void
box_http_service_get (BoxHttpRequest *req)
{
  service_call (req, BOX_SERVICE_OP_GET, NULL);
}

void
box_http_service_put (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = box_http_request_body (req, FALSE, &error);

  if (body == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  service_call (req, BOX_SERVICE_OP_PUT, json_node_get_object (body));
}

void
box_http_service_delete (BoxHttpRequest *req)
{
  service_call (req, BOX_SERVICE_OP_DELETE, NULL);
}

void
box_http_service_start (BoxHttpRequest *req)
{
  bodiless (req, BOX_SERVICE_OP_START);
}

void
box_http_service_stop (BoxHttpRequest *req)
{
  bodiless (req, BOX_SERVICE_OP_STOP);
}

void
box_http_service_restart (BoxHttpRequest *req)
{
  bodiless (req, BOX_SERVICE_OP_RESTART);
}

void
box_http_service_logs (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "tail", "follow", "wake", NULL };
  g_autoptr(GError) error = NULL;
  const char *name = box_http_request_param (req, 1);
  gboolean follow = FALSE, wake = TRUE;
  guint tail = G_MAXUINT;   /* absent: -1, the agent's default */

  if (!box_http_request_check_query (req, allowed, NULL, &error) ||
      !box_http_request_query_uint (req, "tail", 0, BOX_SERVICE_LOGS_TAIL_MAX, G_MAXUINT, &tail,
                                    &error) ||
      !box_http_request_query_bool (req, "follow", FALSE, &follow, &error) ||
      !box_http_request_query_bool (req, "wake", TRUE, &wake, &error) ||
      !box_service_name_check (name, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_files_download_logs (req, name, tail == G_MAXUINT ? -1 : (gint) tail, follow, wake);
}
