/* engine-identity-test.c: the engine's identity issuer
 * (box-engine-identity.c) on the test clock: a token's claims (the
 * sandbox as it is now, times from the engine's clock), an unknown or
 * another project's sandbox, discovery's issuer from base_url, a retired
 * key leaving the JWKS exactly when the clock passes its time (also after
 * a restart), every call 501 without a signing key, and the default
 * issuer for a wildcard listen address (the host's name, with a warning). */
#include "config.h"

#include <string.h>

#include "box-identity.h"
#include "engine-fixture.h"

#define T0_S (EF_T0 / G_USEC_PER_SEC)

static void
set_up (Ef *ef, gconstpointer data)
{
  ef_set_up (ef, data);
  ef_stop (ef);
  ef->identity = TRUE;
  ef_start (ef);
}

/* The claims of @token, decoded (not verified: identity-test.c does that). */
static JsonObject *
claims_of (const char *token)
{
  g_auto(GStrv) parts = g_strsplit (token, ".", 4);
  g_autoptr(GString) b64 = NULL;
  g_autofree guchar *raw = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  gsize len = 0;

  g_assert_cmpuint (g_strv_length (parts), ==, 3);
  b64 = g_string_new (parts[1]);
  g_string_replace (b64, "-", "+", 0);
  g_string_replace (b64, "_", "/", 0);
  while (b64->len % 4 != 0)
    g_string_append_c (b64, '=');
  raw = g_base64_decode (b64->str, &len);
  g_assert_true (json_parser_load_from_data (parser, (const char *) raw, (gssize) len, NULL));
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static guint
jwks_len (Ef *ef)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) jwks = box_engine_identity_jwks (ef->engine, &error);

  g_assert_no_error (error);
  return json_array_get_length (json_object_get_array_member (json_node_get_object (jwks),
                                                              "keys"));
}

static void
test_token (Ef *ef, gconstpointer data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{\"name\": \"web\", \"labels\": {\"a\": \"1\"}}");
  g_autoptr(BoxSandbox) changed = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) claims = NULL;
  g_autoptr(JsonNode) doc = NULL;
  g_autofree char *token = NULL;
  g_autofree char *sub = g_strdup_printf ("project:p:sandbox:%s", sb->id);
  char *none;
  gint64 expires_at = 0;

  box_clock_advance (ef->clock, 5 * G_USEC_PER_SEC);
  changed = ef_update (ef, sb->id, "{\"labels\": {\"b\": \"2\"}}", &error);
  g_assert_no_error (error);
  token = box_engine_identity_token (ef->engine, "p", sb->id, "aud-1", 90, &expires_at, &error);
  g_assert_no_error (error);
  claims = claims_of (token);
  g_assert_cmpstr (json_object_get_string_member (claims, "sub"), ==, sub);
  g_assert_cmpstr (json_object_get_string_member (claims, "aud"), ==, "aud-1");
  g_assert_cmpint (json_object_get_int_member (claims, "iat"), ==, T0_S + 5);
  g_assert_cmpint (json_object_get_int_member (claims, "nbf"), ==, T0_S + 5);
  g_assert_cmpint (json_object_get_int_member (claims, "exp"), ==, T0_S + 95);
  g_assert_cmpint (expires_at, ==, (T0_S + 95) * G_USEC_PER_SEC);
  g_assert_cmpstr (json_object_get_string_member (claims, "sandbox_name"), ==, "web");
  g_assert_cmpstr (json_object_get_string_member (claims, "template"), ==, sb->template_name);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (claims, "labels"),
                                                  "b"), ==, "2");
  g_assert_false (json_object_has_member (json_object_get_object_member (claims, "labels"), "a"));
  g_assert_cmpuint (strlen (json_object_get_string_member (claims, "jti")), ==, 26);

  none = box_engine_identity_token (ef->engine, "p", "sb-aaaaaaaaaaaa", "a", 60, NULL, &error);
  g_assert_null (none);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  ef_project (ef, "q");
  none = box_engine_identity_token (ef->engine, "q", sb->id, "a", 60, NULL, &error);
  g_assert_null (none);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  doc = box_engine_identity_discovery (ef->engine, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (doc), "issuer"), ==,
                   json_object_get_string_member (claims, "iss"));
}

static void
test_rotation_on_the_clock (Ef *ef, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *kid = NULL;
  g_autofree char *old = NULL;
  gint64 until = 0;

  g_assert_cmpuint (jwks_len (ef), ==, 1);
  g_assert_true (box_engine_identity_rotate (ef->engine, &kid, &old, &until, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (kid, !=, old);
  g_assert_cmpint (until, ==, EF_T0 + (gint64) (BOX_IDENTITY_TTL_MAX_S + 1) * G_USEC_PER_SEC);
  g_assert_cmpuint (jwks_len (ef), ==, 2);
  box_clock_advance (ef->clock, (gint64) BOX_IDENTITY_TTL_MAX_S * G_USEC_PER_SEC);
  g_assert_cmpuint (jwks_len (ef), ==, 2);
  /* a restart keeps it until its time */
  ef_stop (ef);
  ef_start (ef);
  g_assert_cmpuint (jwks_len (ef), ==, 2);
  box_clock_advance (ef->clock, G_USEC_PER_SEC);
  g_assert_cmpuint (jwks_len (ef), ==, 1);
}

static void
test_without_key (Ef *ef, gconstpointer data)
{
  g_autoptr(BoxSandbox) sb = ef_create_ok (ef, "{}");
  g_autoptr(GError) e1 = NULL, e2 = NULL, e3 = NULL, e4 = NULL;

  g_assert_false (box_engine_has_identity (ef->engine));
  g_assert_null (box_engine_identity_discovery (ef->engine, &e1));
  g_assert_error (e1, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_assert_null (box_engine_identity_jwks (ef->engine, &e2));
  g_assert_error (e2, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_assert_null (box_engine_identity_token (ef->engine, "p", sb->id, "a", 60, NULL, &e3));
  g_assert_error (e3, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_assert_false (box_engine_identity_rotate (ef->engine, NULL, NULL, NULL, &e4));
  g_assert_error (e4, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
}

/* base_url not set: http:// and the listen address; for a wildcard one,
 * which no verifier can fetch, the host's name and port (and a warning,
 * not checked here) */
static void
test_default_issuer (Ef *ef, gconstpointer data)
{
  const struct { const char *listen, *host; } cases[] = {
    { "127.0.0.1:7070", "127.0.0.1" },
    { "[::1]:7070", "[::1]" },
    { "0.0.0.0:7070", NULL },
    { "[::]:7070", NULL },
    { ":7070", NULL },
  };
  g_autofree char *dir = g_build_filename (ef->data_dir, "issuer", NULL);

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(GError) error = NULL;
    BoxConfig *config = box_config_new ();
    g_autofree char *want = g_strdup_printf ("http://%s:7070",
                                             cases[i].host ? cases[i].host : g_get_host_name ());

    g_free (config->data_dir);
    config->data_dir = g_strdup (dir);
    g_free (config->listen);
    config->listen = g_strdup (cases[i].listen);
    g_assert_true (box_config_resolve (config, &error));
    g_assert_no_error (error);
    g_assert_cmpstr (config->base_url, ==, want);
    box_config_free (config);
  }
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);
  g_test_add ("/engine-identity/token", Ef, NULL, set_up, test_token, ef_tear_down);
  g_test_add ("/engine-identity/rotation-on-the-clock", Ef, NULL, set_up,
              test_rotation_on_the_clock, ef_tear_down);
  g_test_add ("/engine-identity/without-key", Ef, NULL, ef_set_up, test_without_key,
              ef_tear_down);
  g_test_add ("/engine-identity/default-issuer", Ef, NULL, ef_set_up, test_default_issuer,
              ef_tear_down);
  return g_test_run ();
}
