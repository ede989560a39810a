/* box-http-secrets.c: /v1/secrets...
 *
 * A deployment without a secret key answers every secret route with 501
 * unsupported, before anything else is looked at.
 */
#include "config.h"

#include "box-error.h"
#include "box-http-util.h"
#include "box-requests.h"
#include "box-validate.h"

static gboolean
check_secret_key (BoxHttpRequest *req)
{
  if (box_engine_has_secret_key (req->engine))
    return TRUE;
  box_http_reply_error_literal (req->msg, BOX_ERROR_UNSUPPORTED,
                                "this deployment has no secret key");
  return FALSE;
}

void
box_http_secret_put (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(BoxSecretPut) request = NULL;
  g_autoptr(BoxSecret) secret = NULL;
  const char *name = box_http_request_param (req, 0);

  if (!check_secret_key (req))
    return;
  if (!box_validate_secret_name (name, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  body = box_http_request_body (req, FALSE, &error);
  if (body != NULL)
    request = box_secret_put_from_json (body, &error);
  if (request == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  secret = box_engine_put_secret (req->engine, box_http_request_project (req), name,
                                  request, &error);
  if (secret == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_reply_json (req->msg, SOUP_STATUS_OK, box_secret_to_api_json (secret));
}

void
box_http_secret_list (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) secrets = NULL;
  g_autoptr(GPtrArray) nodes = box_http_node_array_new ();

  if (!check_secret_key (req))
    return;
  secrets = box_engine_list_secrets (req->engine, box_http_request_project (req), &error);
  if (secrets == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  for (guint i = 0; i < secrets->len; i++)
    g_ptr_array_add (nodes, box_secret_to_api_json (g_ptr_array_index (secrets, i)));
  box_http_reply_list (req->msg, "secrets", nodes);
}

void
box_http_secret_get (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSecret) secret = NULL;

  if (!check_secret_key (req))
    return;
  secret = box_engine_get_secret (req->engine, box_http_request_project (req),
                                  box_http_request_param (req, 0), &error);
  if (secret == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_reply_json (req->msg, SOUP_STATUS_OK, box_secret_to_api_json (secret));
}

void
box_http_secret_delete (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;

  if (!check_secret_key (req))
    return;
  if (!box_engine_delete_secret (req->engine, box_http_request_project (req),
                                 box_http_request_param (req, 0), &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_reply_empty (req->msg, SOUP_STATUS_NO_CONTENT);
}
