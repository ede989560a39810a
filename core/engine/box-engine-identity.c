/* box-engine-identity.c: the engine's identity issuer (the spec's
 * "Identity routes" and "Identity token claims"): the discovery document,
 * the JWKS, tokens for a sandbox and key rotation, over the keys of
 * box-identity.h.  The issuer is [boxd] base_url, by default the API's own
 * listen address as an http:// URL, so that a default install's tokens
 * verify as they are. */
#include "config.h"

#include <string.h>

#include "box-engine-private.h"
#include "box-error.h"
#include "box-validate.h"

/* spec: Identity routes, "Discovery lists claims_supported (...)" */
static const char *const claims_supported[] = {
  "iss", "sub", "aud", "iat", "nbf", "exp", "jti", "project", "sandbox", "sandbox_name",
  "template", "labels", NULL
};

static gboolean
require_identity (BoxEngine *self, GError **error)
{
  if (self->identity != NULL)
    return TRUE;
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                       "this deployment has no signing key");
  return FALSE;
}

/* base_url without its trailing slashes (box_config_resolve() fills it;
 * without it, its default: the listen address as an http:// URL) */
static char *
issuer (BoxEngine *self)
{
  const char *base = self->config->base_url;
  char *iss = base != NULL && base[0] != '\0' ? g_strdup (base)
                                               : g_strdup_printf ("http://%s", self->config->listen);
  gsize n = strlen (iss);

  while (n > 0 && iss[n - 1] == '/')
    iss[--n] = '\0';
  return iss;
}

static JsonArray *
string_array (const char *const *strings)
{
  JsonArray *array = json_array_new ();

  for (guint i = 0; strings[i] != NULL; i++)
    json_array_add_string_element (array, strings[i]);
  return array;
}

gboolean
box_engine_has_identity (BoxEngine *self)
{
  return self->identity != NULL;
}

JsonNode *
box_engine_identity_discovery (BoxEngine *self, GError **error)
{
  static const char *const algs[] = { "RS256", NULL };
  static const char *const response_types[] = { "id_token", NULL };
  static const char *const subject_types[] = { "public", NULL };
  g_autofree char *iss = NULL;
  g_autofree char *jwks_uri = NULL;
  JsonObject *doc;

  if (!require_identity (self, error))
    return NULL;
  iss = issuer (self);
  jwks_uri = g_strconcat (iss, "/.well-known/jwks.json", NULL);
  doc = json_object_new ();
  json_object_set_string_member (doc, "issuer", iss);
  json_object_set_string_member (doc, "jwks_uri", jwks_uri);
  json_object_set_array_member (doc, "id_token_signing_alg_values_supported", string_array (algs));
  json_object_set_array_member (doc, "response_types_supported", string_array (response_types));
  json_object_set_array_member (doc, "subject_types_supported", string_array (subject_types));
  json_object_set_array_member (doc, "claims_supported", string_array (claims_supported));
  return json_node_init_object (json_node_alloc (), doc);
}

JsonNode *
box_engine_identity_jwks (BoxEngine *self, GError **error)
{
  if (!require_identity (self, error))
    return NULL;
  return box_identity_jwks (self->identity, box_engine_now (self) / G_USEC_PER_SEC);
}

char *
box_engine_identity_token (BoxEngine *self, const char *project, const char *sandbox_id,
                           const char *audience, guint ttl_s, gint64 *expires_at, GError **error)
{
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(JsonObject) claims = NULL;
  g_autofree char *iss = NULL;
  g_autofree char *sub = NULL;
  g_autofree char *jti = NULL;
  JsonObject *labels;
  GHashTableIter iter;
  gpointer key, value;
  gint64 now = box_engine_now (self) / G_USEC_PER_SEC;
  char *token;

  g_return_val_if_fail (ttl_s >= BOX_IDENTITY_TTL_MIN_S && ttl_s <= BOX_IDENTITY_TTL_MAX_S, NULL);
  if (!require_identity (self, error))
    return NULL;
  sandbox = box_engine_get_sandbox (self, project, sandbox_id, error);
  if (sandbox == NULL)
    return NULL;
  iss = issuer (self);
  sub = g_strdup_printf ("project:%s:sandbox:%s", sandbox->project, sandbox->id);
  jti = box_random_base32 (26);   /* 130 bits */
  claims = json_object_new ();
  json_object_set_string_member (claims, "iss", iss);
  json_object_set_string_member (claims, "sub", sub);
  json_object_set_string_member (claims, "aud", audience);
  json_object_set_int_member (claims, "iat", now);
  json_object_set_int_member (claims, "nbf", now);
  json_object_set_int_member (claims, "exp", now + ttl_s);
  json_object_set_string_member (claims, "jti", jti);
  json_object_set_string_member (claims, "project", sandbox->project);
  json_object_set_string_member (claims, "sandbox", sandbox->id);
  json_object_set_string_member (claims, "sandbox_name", sandbox->name != NULL ? sandbox->name : "");
  /* as the API's Sandbox has it: "" when made from an image */
  json_object_set_string_member (claims, "template",
                                 sandbox->template_name != NULL ? sandbox->template_name : "");
  labels = json_object_new ();
  g_hash_table_iter_init (&iter, sandbox->labels);
  while (g_hash_table_iter_next (&iter, &key, &value))
    json_object_set_string_member (labels, key, value);
  json_object_set_object_member (claims, "labels", labels);
  token = box_identity_sign (self->identity, claims, now, error);
  if (token != NULL && expires_at != NULL)
    *expires_at = (now + ttl_s) * G_USEC_PER_SEC;
  return token;
}

gboolean
box_engine_identity_rotate (BoxEngine *self, char **kid, char **retired_kid,
                            gint64 *retired_until, GError **error)
{
  gint64 until = 0;

  if (!require_identity (self, error) ||
      !box_identity_rotate (self->identity, box_engine_now (self) / G_USEC_PER_SEC, retired_kid,
                            &until, error))
    return FALSE;
  if (kid != NULL)
    *kid = g_strdup (box_identity_get_kid (self->identity));
  if (retired_until != NULL)
    *retired_until = until * G_USEC_PER_SEC;
  return TRUE;
}
