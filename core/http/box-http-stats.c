/* box-http-stats.c: where the sandboxes' URLs are served, and their
 * usage stats.
 *
 *   GET /v1/edge                               {sandbox_domain, port}
 *   GET /v1/sandboxes/{sandbox}/stats?days=N   {sandbox, name, days, total, visitor_days}
 *
 * port is the edge's TCP port (null: boxd serves no edge); clients add it
 * to a URL when it is not 443 (doc/API.md).
 *
 * N is 1 to 90 (default 7); anything else, a repeated or an unknown
 * parameter is 400 invalid.  The counts waiting in memory are written
 * first (box-stats.h).  Only records are read: the sandbox is never woken.
 */
#include "config.h"

#include "box-http-util.h"

void
box_http_edge (BoxHttpRequest *req)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  guint port = box_engine_get_edge_port (req->engine);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "sandbox_domain");
  json_builder_add_string_value (builder, box_engine_get_config (req->engine)->sandbox_domain);
  json_builder_set_member_name (builder, "port");
  if (port != 0)
    json_builder_add_int_value (builder, port);
  else
    json_builder_add_null_value (builder);
  json_builder_end_object (builder);
  box_http_reply_json (req->msg, SOUP_STATUS_OK, json_builder_get_root (builder));
}

void
box_http_sandbox_stats (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "days", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(JsonNode) node = NULL;
  BoxStats *stats = box_engine_get_stats (req->engine);
  guint days = 0;

  if (!box_http_request_check_query (req, allowed, NULL, &error) ||
      !box_http_request_query_uint (req, "days", 1, BOX_STATS_DAYS_KEPT, BOX_STATS_DAYS_DEFAULT,
                                    &days, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  sandbox = box_engine_get_sandbox (req->engine, box_http_request_project (req),
                                    box_http_request_param (req, 0), &error);
  if (sandbox == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  if (stats == NULL) {
    box_http_reply_error_literal (req->msg, BOX_ERROR_SANDBOX_UNAVAILABLE, "the engine is not started");
    return;
  }
  node = box_stats_read (stats, sandbox, days, &error);
  if (node == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_reply_json (req->msg, SOUP_STATUS_OK, g_steal_pointer (&node));   /* takes it */
}
