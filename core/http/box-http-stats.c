/* box-http-stats.c: the usage stats of a sandbox's URLs.
 *
 *   GET /v1/sandboxes/{sandbox}/stats?days=N   {sandbox, name, days, total, visitor_days}
 *
 * N is 1 to 90 (default 7); anything else, a repeated or an unknown
 * parameter is 400 invalid.  The counts waiting in memory are written
 * first (box-stats.h).  Only records are read: the sandbox is never woken.
 */
#include "config.h"

#include "box-http-util.h"

/* days: digits only, 1 to BOX_STATS_DAYS_KEPT; the default when absent */
static gboolean
query_days (BoxHttpRequest *req, guint *out, GError **error)
{
  const char *v = box_http_request_query (req, "days");
  guint64 n = 0;

  *out = BOX_STATS_DAYS_DEFAULT;
  if (v == NULL)
    return TRUE;
  if (!g_ascii_isdigit (v[0]) ||
      !g_ascii_string_to_unsigned (v, 10, 1, BOX_STATS_DAYS_KEPT, &n, NULL)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "days must be an integer from 1 to %d",
                 BOX_STATS_DAYS_KEPT);
    return FALSE;
  }
  *out = (guint) n;
  return TRUE;
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
      !query_days (req, &days, &error)) {
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
