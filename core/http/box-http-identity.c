/* box-http-identity.c: the identity routes (the spec's "Identity routes";
 * the engine's side is box-engine-identity.c).
 *
 * GET /.well-known/openid-configuration and /.well-known/jwks.json need no
 * key; GET /identity/token is served on the in-sandbox socket only (the
 * route table flags it BOX_HTTP_ROUTE_SANDBOX_ONLY, so there is no such
 * route under /v1) and issues a token for the calling sandbox.  Without a
 * signing key all three answer 501 unsupported. */
#include "config.h"

#include <string.h>

#include "box-http-util.h"
#include "box-identity.h"

static void
reply_node_or_error (BoxHttpRequest *req, JsonNode *node, const GError *error)
{
  if (node == NULL)
    box_http_reply_error (req->msg, error);
  else
    box_http_reply_json (req->msg, SOUP_STATUS_OK, node);
}

void
box_http_oidc_discovery (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  JsonNode *node = box_engine_identity_discovery (req->engine, &error);

  reply_node_or_error (req, node, error);
}

void
box_http_oidc_jwks (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  JsonNode *node = box_engine_identity_jwks (req->engine, &error);

  reply_node_or_error (req, node, error);
}

void
box_http_identity_token (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "audience", "ttl_s", NULL };
  g_autoptr(GError) error = NULL;
  g_autofree char *token = NULL;
  g_autofree char *expires = NULL;
  const char *audience;
  gint64 expires_at = 0;
  guint ttl_s = 0;
  JsonObject *answer;

  /* the route table serves it on the in-sandbox socket only */
  g_return_if_fail (req->principal != NULL && req->principal->kind == BOX_PRINCIPAL_SANDBOX);
  if (!box_engine_has_identity (req->engine)) {
    box_http_reply_error_literal (req->msg, BOX_ERROR_UNSUPPORTED,
                                  "this deployment has no signing key");
    return;
  }
  audience = box_http_request_query (req, "audience");
  if (!box_http_request_check_query (req, allowed, NULL, &error) ||
      !box_http_request_query_uint (req, "ttl_s", BOX_IDENTITY_TTL_MIN_S, BOX_IDENTITY_TTL_MAX_S,
                                    BOX_IDENTITY_TTL_DEFAULT_S, &ttl_s, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  if (audience == NULL || audience[0] == '\0') {
    box_http_reply_error_literal (req->msg, BOX_ERROR_INVALID, "audience is required");
    return;
  }
  if (!g_utf8_validate (audience, -1, NULL) || strlen (audience) > BOX_IDENTITY_AUDIENCE_MAX) {
    box_http_reply_error_literal (req->msg, BOX_ERROR_INVALID,
                                  "audience must be UTF-8 of at most 1024 bytes");
    return;
  }
  token = box_engine_identity_token (req->engine, req->principal->project,
                                     req->principal->sandbox_id, audience, ttl_s, &expires_at,
                                     &error);
  if (token == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  expires = box_time_format (expires_at);
  answer = json_object_new ();
  json_object_set_string_member (answer, "token", token);
  json_object_set_string_member (answer, "expires_at", expires);
  box_http_reply_json (req->msg, SOUP_STATUS_OK, json_node_init_object (json_node_alloc (), answer));
}
