/* http-test.c: the HTTP transport in process.
 *
 * Starts a real BoxEngine (sqlite, keys and dummy plugins from
 * BOX_PLUGIN_DIR) and a BoxHttpServer on 127.0.0.1:0, then drives it with a
 * SoupSession on the same main loop: routing, authentication, strict
 * bodies, error shapes and the SSE events stream.
 */
#include "config.h"

#include <string.h>

#include "box.h"
#include "box-config.h"
#include "box-engine.h"
#include "box-plugin-loader.h"
#include "box-requests.h"
#include "box-validate.h"
#include "box-http-server.h"
#include "box-http-util.h"
#include "http-client.h"

#define ADMIN_TOKEN "http-test-admin-token-0123456789"

static BoxEngine *engine;
static BoxHttpServer *server;
static char *data_dir;
static char *key_alpha;   /* project "alpha" */
static char *key_beta;    /* project "beta" */

static char *
create_sandbox (const char *token, const char *name)
{
  g_autofree char *body = g_strdup_printf ("{\"name\": \"%s\"}", name);
  g_autoptr(Reply) reply = call ("POST", "/v1/sandboxes", token, body);
  JsonObject *sandbox;

  if (reply->status != 201)
    g_test_message ("create answered %u: %s", reply->status, reply->body);
  g_assert_cmpuint (reply->status, ==, 201);
  sandbox = reply_object (reply);
  g_assert_cmpstr (json_object_get_string_member (sandbox, "name"), ==, name);
  g_assert_cmpstr (json_object_get_string_member (sandbox, "state"), ==, "running");
  g_assert_true (g_str_has_prefix (json_object_get_string_member (sandbox, "id"), "sb-"));
  return g_strdup (json_object_get_string_member (sandbox, "id"));
}

/* ---- pure helpers ------------------------------------------------------ */

static void
test_parse_query (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) params = NULL;
  BoxHttpParam *param;

  params = box_http_parse_query ("label=a%3Db=c&label=x=y&state=running&flag&&q=a+b", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (params->len, ==, 5);
  param = g_ptr_array_index (params, 0);
  g_assert_cmpstr (param->name, ==, "label");
  g_assert_cmpstr (param->value, ==, "a=b=c");
  param = g_ptr_array_index (params, 1);
  g_assert_cmpstr (param->value, ==, "x=y");
  param = g_ptr_array_index (params, 3);
  g_assert_cmpstr (param->name, ==, "flag");
  g_assert_cmpstr (param->value, ==, "");
  param = g_ptr_array_index (params, 4);
  g_assert_cmpstr (param->value, ==, "a b");
  g_clear_pointer (&params, g_ptr_array_unref);

  params = box_http_parse_query ("a=%zz", &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_null (params);
  g_clear_error (&error);
  params = box_http_parse_query ("a=%00", &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_null (params);
  g_clear_error (&error);

  params = box_http_parse_query (NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (params->len, ==, 0);
}

static void
test_bearer (void)
{
  g_autoptr(SoupMessageHeaders) headers = soup_message_headers_new (SOUP_MESSAGE_HEADERS_REQUEST);
  g_autofree char *token = NULL;

  g_assert_null (box_http_bearer_token (headers));
  soup_message_headers_replace (headers, "Authorization", "Basic Zm9vOmJhcg==");
  g_assert_null (box_http_bearer_token (headers));
  soup_message_headers_replace (headers, "Authorization", "Bearer");
  g_assert_null (box_http_bearer_token (headers));
  soup_message_headers_replace (headers, "Authorization", "Bearertoken");
  g_assert_null (box_http_bearer_token (headers));
  soup_message_headers_replace (headers, "Authorization", "bearer  box_abc ");
  token = box_http_bearer_token (headers);
  g_assert_cmpstr (token, ==, "box_abc");
}

/* ---- routing ----------------------------------------------------------- */

static void
test_no_route (void)
{
  g_autoptr(Reply) r1 = call ("GET", "/nope", NULL, NULL);
  g_autoptr(Reply) r2 = call ("GET", "/v1/sandboxes/whatever/nothing", key_alpha, NULL);
  g_autoptr(Reply) r3 = call ("GET", "/v1/nothing/here", key_alpha, NULL);
  g_autoptr(Reply) r4 = call ("GET", "/v1/sandboxes/", key_alpha, NULL);

  assert_error (r1, 404, "not_found", "no route GET /nope");
  assert_error (r2, 404, "not_found", "no route GET /v1/sandboxes/whatever/nothing");
  assert_error (r3, 404, "not_found", "no route GET /v1/nothing/here");
  assert_error (r4, 404, "not_found", "no route GET /v1/sandboxes/");
}

/* A WebSocket route read without the upgrade: 400 invalid (the spec), not
 * a missing route. */
static void
test_websocket_without_upgrade (void)
{
  g_autoptr(Reply) r = call ("GET", "/v1/sandboxes/whatever/exec?cmd=true", key_alpha, NULL);

  assert_error (r, 400, "invalid", NULL);
}

static void
test_method_not_allowed (void)
{
  g_autoptr(Reply) r1 = call ("DELETE", "/v1/sandboxes", key_alpha, NULL);
  g_autoptr(Reply) r2 = call ("GET", "/v1/sandboxes/x/pause", key_alpha, NULL);
  const char *allow;

  assert_error (r1, 405, "invalid", "method DELETE not allowed on /v1/sandboxes");
  allow = soup_message_headers_get_one (r1->headers, "Allow");
  g_assert_nonnull (allow);
  g_assert_nonnull (strstr (allow, "GET"));
  g_assert_nonnull (strstr (allow, "POST"));
  g_assert_null (strstr (allow, "DELETE"));
  assert_error (r2, 405, "invalid", "method GET not allowed on /v1/sandboxes/x/pause");
  g_assert_cmpstr (soup_message_headers_get_one (r2->headers, "Allow"), ==, "POST");
}

/* ---- authentication ---------------------------------------------------- */

static void
test_auth (void)
{
  const char *const required = "a valid API key is required";
  g_autoptr(Reply) none = call ("GET", "/v1/sandboxes", NULL, NULL);
  g_autoptr(Reply) bad = call ("GET", "/v1/sandboxes", "box_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", NULL);
  g_autoptr(Reply) junk = call ("GET", "/v1/sandboxes", "not-a-key", NULL);
  g_autoptr(Reply) admin_on_key = call ("GET", "/v1/sandboxes", ADMIN_TOKEN, NULL);
  g_autoptr(Reply) key_on_admin = call ("GET", "/v1/projects", key_alpha, NULL);
  g_autoptr(Reply) none_on_admin = call ("GET", "/v1/projects", NULL, NULL);
  g_autoptr(Reply) unknown_path = call ("GET", "/v1/no/such/route", NULL, NULL);
  g_autoptr(Reply) key_on_project_route = call ("DELETE", "/v1/projects/alpha", key_alpha, NULL);
  g_autoptr(Reply) whoami_admin = call ("GET", "/v1/whoami", ADMIN_TOKEN, NULL);
  g_autoptr(Reply) ok = call ("GET", "/v1/sandboxes", key_alpha, NULL);
  g_autoptr(Reply) admin_ok = call ("GET", "/v1/projects", ADMIN_TOKEN, NULL);

  assert_error (none, 401, "unauthorized", required);
  assert_error (bad, 401, "unauthorized", required);
  assert_error (junk, 401, "unauthorized", required);
  assert_error (admin_on_key, 401, "unauthorized", required);
  assert_error (key_on_admin, 401, "unauthorized", required);
  assert_error (none_on_admin, 401, "unauthorized", required);
  assert_error (unknown_path, 401, "unauthorized", required);
  assert_error (key_on_project_route, 401, "unauthorized", required);
  assert_error (whoami_admin, 401, "unauthorized", required);
  g_assert_cmpuint (ok->status, ==, 200);
  g_assert_cmpuint (admin_ok->status, ==, 200);
}

static void
test_whoami (void)
{
  g_autoptr(Reply) reply = call ("GET", "/v1/whoami", key_alpha, NULL);
  JsonObject *root;
  JsonObject *project;
  JsonObject *key;

  g_assert_cmpuint (reply->status, ==, 200);
  root = reply_object (reply);
  project = json_object_get_object_member (root, "project");
  key = json_object_get_object_member (root, "key");
  g_assert_cmpstr (json_object_get_string_member (project, "name"), ==, "alpha");
  g_assert_true (json_object_has_member (project, "domains"));
  g_assert_true (json_object_has_member (project, "created_at"));
  g_assert_true (g_str_has_prefix (json_object_get_string_member (key, "id"), "key-"));
  g_assert_cmpstr (json_object_get_string_member (key, "name"), ==, "ci");
  g_assert_cmpstr (json_object_get_string_member (key, "project"), ==, "alpha");
  g_assert_false (json_object_has_member (key, "secret"));
  g_assert_false (json_object_has_member (key, "hash"));
}

static void
test_well_known (void)
{
  g_autoptr(Reply) r1 = call ("GET", "/.well-known/openid-configuration", NULL, NULL);
  g_autoptr(Reply) r2 = call ("GET", "/.well-known/jwks.json", NULL, NULL);
  g_autoptr(Reply) r3 = call ("POST", "/.well-known/jwks.json", NULL, NULL);
  JsonObject *doc, *key;
  JsonArray *claims, *keys;

  /* a default deployment has a signing key; no key is asked for */
  g_assert_cmpuint (r1->status, ==, 200);
  doc = reply_object (r1);
  g_assert_cmpstr (json_object_get_string_member (doc, "issuer"), ==, "http://127.0.0.1:7070");
  g_assert_cmpstr (json_object_get_string_member (doc, "jwks_uri"), ==,
                   "http://127.0.0.1:7070/.well-known/jwks.json");
  claims = json_object_get_array_member (doc, "claims_supported");
  g_assert_cmpuint (json_array_get_length (claims), ==, 12);
  g_assert_cmpstr (json_array_get_string_element (claims, 11), ==, "labels");
  g_assert_cmpuint (r2->status, ==, 200);
  keys = json_object_get_array_member (reply_object (r2), "keys");
  g_assert_cmpuint (json_array_get_length (keys), ==, 1);
  key = json_array_get_object_element (keys, 0);
  g_assert_cmpstr (json_object_get_string_member (key, "kty"), ==, "RSA");
  g_assert_cmpstr (json_object_get_string_member (key, "e"), ==, "AQAB");
  assert_error (r3, 405, "invalid", "method POST not allowed on /.well-known/jwks.json");
}

/* ---- operator ---------------------------------------------------------- */

static void
test_operator (void)
{
  g_autoptr(Reply) created = call ("POST", "/v1/projects", ADMIN_TOKEN, "{\"name\": \"gamma\"}");
  g_autoptr(Reply) again = call ("POST", "/v1/projects", ADMIN_TOKEN, "{\"name\": \"gamma\"}");
  g_autoptr(Reply) list = call ("GET", "/v1/projects", ADMIN_TOKEN, NULL);
  g_autoptr(Reply) get = call ("GET", "/v1/projects/gamma", ADMIN_TOKEN, NULL);
  g_autoptr(Reply) missing = call ("GET", "/v1/projects/nosuch", ADMIN_TOKEN, NULL);
  g_autoptr(Reply) patched = NULL;
  g_autoptr(Reply) bad_patch = NULL;
  g_autoptr(Reply) key = NULL;
  g_autoptr(Reply) keys = NULL;
  g_autoptr(Reply) whoami = NULL;
  g_autoptr(Reply) key_deleted = NULL;
  g_autoptr(Reply) whoami_after = NULL;
  g_autoptr(Reply) deleted = NULL;
  g_autoptr(Reply) gone = NULL;
  g_autofree char *path = NULL;
  g_autofree char *secret = NULL;
  g_autofree char *key_id = NULL;
  JsonArray *array;

  g_assert_cmpuint (created->status, ==, 201);
  g_assert_cmpstr (json_object_get_string_member (reply_object (created), "name"), ==, "gamma");
  g_assert_true (json_object_has_member (reply_object (created), "domains"));
  assert_error (again, 409, "already_exists", NULL);
  g_assert_cmpuint (list->status, ==, 200);
  array = json_object_get_array_member (reply_object (list), "projects");
  g_assert_cmpuint (json_array_get_length (array), >=, 3);
  g_assert_cmpuint (get->status, ==, 200);
  assert_error (missing, 404, "not_found", NULL);

  patched = call ("PATCH", "/v1/projects/gamma", ADMIN_TOKEN,
                  "{\"domains\": [\"apps.example.com\"]}");
  g_assert_cmpuint (patched->status, ==, 200);
  array = json_object_get_array_member (reply_object (patched), "domains");
  g_assert_cmpuint (json_array_get_length (array), ==, 1);
  g_assert_cmpstr (json_array_get_string_element (array, 0), ==, "apps.example.com");
  bad_patch = call ("PATCH", "/v1/projects/gamma", ADMIN_TOKEN, "{\"domain\": []}");
  assert_error (bad_patch, 400, "invalid", NULL);
  g_assert_nonnull (strstr (error_message (bad_patch), "unknown field domain"));

  key = call ("POST", "/v1/projects/gamma/keys", ADMIN_TOKEN, "{\"name\": \"deploy\"}");
  g_assert_cmpuint (key->status, ==, 201);
  secret = g_strdup (json_object_get_string_member (reply_object (key), "secret"));
  key_id = g_strdup (json_object_get_string_member (reply_object (key), "id"));
  g_assert_true (g_str_has_prefix (secret, "box_"));
  g_assert_cmpuint (strlen (secret), ==, 36);
  g_assert_true (g_str_has_prefix (key_id, "key-"));
  g_assert_cmpstr (json_object_get_string_member (reply_object (key), "project"), ==, "gamma");

  keys = call ("GET", "/v1/projects/gamma/keys", ADMIN_TOKEN, NULL);
  g_assert_cmpuint (keys->status, ==, 200);
  array = json_object_get_array_member (reply_object (keys), "keys");
  g_assert_cmpuint (json_array_get_length (array), ==, 1);
  g_assert_false (json_object_has_member (json_array_get_object_element (array, 0), "secret"));

  whoami = call ("GET", "/v1/whoami", secret, NULL);
  g_assert_cmpuint (whoami->status, ==, 200);

  path = g_strdup_printf ("/v1/projects/gamma/keys/%s", key_id);
  key_deleted = call ("DELETE", path, ADMIN_TOKEN, NULL);
  g_assert_cmpuint (key_deleted->status, ==, 204);
  g_assert_cmpstr (key_deleted->body, ==, "");
  whoami_after = call ("GET", "/v1/whoami", secret, NULL);
  assert_error (whoami_after, 401, "unauthorized", "a valid API key is required");

  deleted = call ("DELETE", "/v1/projects/gamma", ADMIN_TOKEN, NULL);
  g_assert_cmpuint (deleted->status, ==, 204);
  gone = call ("GET", "/v1/projects/gamma", ADMIN_TOKEN, NULL);
  assert_error (gone, 404, "not_found", NULL);
}

/* ---- bodies ------------------------------------------------------------ */

static void
test_bodies (void)
{
  g_autoptr(Reply) unknown = call ("POST", "/v1/sandboxes", key_alpha, "{\"bogus\": 1}");
  g_autoptr(Reply) malformed = call ("POST", "/v1/sandboxes", key_alpha, "{\"name\": ");
  g_autoptr(Reply) wrong_type = call_full ("POST", "/v1/sandboxes", key_alpha, "multipart/form-data",
                                           "{}", 2);
  g_autoptr(Reply) with_params = call_full ("POST", "/v1/projects", ADMIN_TOKEN,
                                            "application/json; charset=utf-8",
                                            "{\"name\": \"delta\"}",
                                            strlen ("{\"name\": \"delta\"}"));
  g_autoptr(Reply) pause_body = call ("POST", "/v1/sandboxes/x/pause", key_alpha, "{\"now\": true}");
  g_autoptr(Reply) pause_array = call ("POST", "/v1/sandboxes/x/pause", key_alpha, "[]");
  g_autoptr(Reply) pause_empty = call ("POST", "/v1/sandboxes/nosuch/pause", key_alpha, "{}");
  g_autoptr(Reply) too_big = NULL;
  gsize big_len = BOX_HTTP_BODY_MAX + 16;
  g_autofree char *big = g_malloc (big_len);

  assert_error (unknown, 400, "invalid", "bad request body: json: unknown field bogus");
  assert_error (malformed, 400, "invalid", NULL);
  g_assert_true (g_str_has_prefix (error_message (malformed), "bad request body: "));
  assert_error (wrong_type, 400, "invalid", "Content-Type must be application/json, not multipart/form-data");
  g_assert_cmpuint (with_params->status, ==, 201);
  assert_error (pause_body, 400, "invalid", "bad request body: json: unknown field now");
  assert_error (pause_array, 400, "invalid", NULL);
  assert_error (pause_empty, 404, "not_found", NULL);

  memset (big, ' ', big_len);
  big[0] = '{';
  big[big_len - 1] = '}';
  too_big = call_full ("POST", "/v1/sandboxes", key_alpha, "application/json", big, big_len);
  assert_error (too_big, 400, "invalid", NULL);
  g_assert_nonnull (strstr (error_message (too_big), "too large"));
}

/* ---- sandboxes --------------------------------------------------------- */

static void
test_sandboxes (void)
{
  g_autofree char *id = create_sandbox (key_alpha, "web-1");
  g_autofree char *path = g_strdup_printf ("/v1/sandboxes/%s", id);
  g_autoptr(Reply) by_id = call ("GET", path, key_alpha, NULL);
  g_autoptr(Reply) by_name = call ("GET", "/v1/sandboxes/web-1", key_alpha, NULL);
  g_autoptr(Reply) other_project = call ("GET", path, key_beta, NULL);
  g_autoptr(Reply) other_delete = call ("DELETE", "/v1/sandboxes/web-1", key_beta, NULL);
  g_autoptr(Reply) taken = call ("POST", "/v1/sandboxes", key_alpha, "{\"name\": \"web-1\"}");
  g_autoptr(Reply) labelled = call ("PATCH", "/v1/sandboxes/web-1", key_alpha,
                                    "{\"labels\": {\"tier\": \"front\", \"x\": \"a=b\"}}");
  g_autoptr(Reply) by_label = call ("GET", "/v1/sandboxes?label=tier=front&label=x=a%3Db",
                                    key_alpha, NULL);
  g_autoptr(Reply) by_label_miss = call ("GET", "/v1/sandboxes?label=tier=back", key_alpha, NULL);
  g_autoptr(Reply) bad_label = call ("GET", "/v1/sandboxes?label=tier", key_alpha, NULL);
  g_autoptr(Reply) bad_state = call ("GET", "/v1/sandboxes?state=sleeping", key_alpha, NULL);
  g_autoptr(Reply) running = call ("GET", "/v1/sandboxes?state=running", key_alpha, NULL);
  g_autoptr(Reply) beta_list = call ("GET", "/v1/sandboxes", key_beta, NULL);
  g_autoptr(Reply) paused = call ("POST", "/v1/sandboxes/web-1/pause", key_alpha, NULL);
  g_autoptr(Reply) paused_list = call ("GET", "/v1/sandboxes?state=paused", key_alpha, NULL);
  g_autoptr(Reply) woken = call ("POST", "/v1/sandboxes/web-1/wake", key_alpha, "{}");
  g_autoptr(Reply) stopped = call ("POST", "/v1/sandboxes/web-1/stop", key_alpha, NULL);
  g_autoptr(Reply) pause_stopped = call ("POST", "/v1/sandboxes/web-1/pause", key_alpha, NULL);
  g_autoptr(Reply) deleted = NULL;
  g_autoptr(Reply) gone = NULL;
  JsonArray *array;

  g_assert_cmpuint (by_id->status, ==, 200);
  g_assert_cmpstr (json_object_get_string_member (reply_object (by_id), "name"), ==, "web-1");
  g_assert_cmpuint (by_name->status, ==, 200);
  g_assert_cmpstr (json_object_get_string_member (reply_object (by_name), "id"), ==, id);
  assert_error (other_project, 404, "not_found", NULL);
  assert_error (other_delete, 404, "not_found", NULL);
  assert_error (taken, 409, "already_exists", NULL);
  g_assert_cmpuint (labelled->status, ==, 200);

  g_assert_cmpuint (by_label->status, ==, 200);
  array = json_object_get_array_member (reply_object (by_label), "sandboxes");
  g_assert_cmpuint (json_array_get_length (array), ==, 1);
  array = json_object_get_array_member (reply_object (by_label_miss), "sandboxes");
  g_assert_cmpuint (json_array_get_length (array), ==, 0);
  assert_error (bad_label, 400, "invalid", NULL);
  assert_error (bad_state, 400, "invalid", NULL);
  array = json_object_get_array_member (reply_object (running), "sandboxes");
  g_assert_cmpuint (json_array_get_length (array), ==, 1);
  array = json_object_get_array_member (reply_object (beta_list), "sandboxes");
  g_assert_cmpuint (json_array_get_length (array), ==, 0);

  g_assert_cmpuint (paused->status, ==, 200);
  g_assert_cmpstr (json_object_get_string_member (reply_object (paused), "state"), ==, "paused");
  array = json_object_get_array_member (reply_object (paused_list), "sandboxes");
  g_assert_cmpuint (json_array_get_length (array), ==, 1);
  g_assert_cmpuint (woken->status, ==, 200);
  g_assert_cmpstr (json_object_get_string_member (reply_object (woken), "state"), ==, "running");
  g_assert_cmpuint (stopped->status, ==, 200);
  g_assert_cmpstr (json_object_get_string_member (reply_object (stopped), "state"), ==, "stopped");
  assert_error (pause_stopped, 409, "conflict", NULL);

  deleted = call ("DELETE", path, key_alpha, NULL);
  g_assert_cmpuint (deleted->status, ==, 204);
  g_assert_cmpstr (deleted->body, ==, "");
  gone = call ("GET", path, key_alpha, NULL);
  assert_error (gone, 404, "not_found", NULL);
}

static void
test_catalogue (void)
{
  g_autoptr(Reply) templates = call ("GET", "/v1/templates", key_alpha, NULL);
  g_autoptr(Reply) defaults = call ("GET", "/v1/network/defaults", key_alpha, NULL);
  JsonArray *array;
  gboolean has_base = FALSE;

  g_assert_cmpuint (templates->status, ==, 200);
  array = json_object_get_array_member (reply_object (templates), "templates");
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *tmpl = json_array_get_object_element (array, i);
    if (g_strcmp0 (json_object_get_string_member (tmpl, "name"), "base") == 0)
      has_base = TRUE;
  }
  g_assert_true (has_base);
  g_assert_cmpuint (defaults->status, ==, 200);
  g_assert_true (json_object_has_member (reply_object (defaults), "egress"));
  g_assert_nonnull (json_object_get_array_member (reply_object (defaults), "egress"));
}

static void
test_secrets (void)
{
  g_autoptr(Reply) put = call ("PUT", "/v1/secrets/API_TOKEN", key_alpha,
                               "{\"value\": \"s3cr3t\", \"hosts\": [\"api.example.com\"]}");
  g_autoptr(Reply) bad_name = call ("PUT", "/v1/secrets/api-token", key_alpha,
                                    "{\"value\": \"s3cr3t\", \"hosts\": [\"api.example.com\"]}");
  g_autoptr(Reply) get = call ("GET", "/v1/secrets/API_TOKEN", key_alpha, NULL);
  g_autoptr(Reply) other = call ("GET", "/v1/secrets/API_TOKEN", key_beta, NULL);
  g_autoptr(Reply) list = call ("GET", "/v1/secrets", key_alpha, NULL);
  g_autoptr(Reply) deleted = call ("DELETE", "/v1/secrets/API_TOKEN", key_alpha, NULL);
  g_autoptr(Reply) gone = call ("GET", "/v1/secrets/API_TOKEN", key_alpha, NULL);
  JsonArray *array;

  if (put->status != 200)
    g_test_message ("put answered %u: %s", put->status, put->body);
  g_assert_cmpuint (put->status, ==, 200);
  g_assert_cmpstr (json_object_get_string_member (reply_object (put), "name"), ==, "API_TOKEN");
  g_assert_false (json_object_has_member (reply_object (put), "value"));
  g_assert_null (strstr (put->body, "s3cr3t"));
  assert_error (bad_name, 400, "invalid", NULL);
  g_assert_cmpuint (get->status, ==, 200);
  g_assert_null (strstr (get->body, "s3cr3t"));
  assert_error (other, 404, "not_found", NULL);
  array = json_object_get_array_member (reply_object (list), "secrets");
  g_assert_cmpuint (json_array_get_length (array), ==, 1);
  g_assert_cmpuint (deleted->status, ==, 204);
  assert_error (gone, 404, "not_found", NULL);
}

/* ---- engine-driven errors and clients that leave ----------------------- */

static void
set_dummy (const char *key, const char *value)
{
  GKeyFile *keyfile = box_engine_get_config (engine)->keyfile;

  if (value != NULL)
    g_key_file_set_string (keyfile, "plugin.dummy", key, value);
  else
    g_key_file_remove_key (keyfile, "plugin.dummy", key, NULL);
}

static void
test_capacity (void)
{
  g_autoptr(Reply) full = NULL;

  set_dummy ("max_cpus", "1");
  full = call ("POST", "/v1/sandboxes", key_alpha, "{\"name\": \"too-big\"}");
  set_dummy ("max_cpus", NULL);
  assert_error (full, 503, "capacity", NULL);
  g_assert_cmpstr (soup_message_headers_get_one (full->headers, "Retry-After"), ==, "5");
}

static void
left_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = soup_session_send_and_read_finish (SOUP_SESSION (source), result,
                                                               &error);
  gboolean *done = user_data;

  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  *done = TRUE;
}

static gboolean
cancel_cb (gpointer user_data)
{
  g_cancellable_cancel (user_data);
  return G_SOURCE_REMOVE;
}

/* The client leaves while the engine works: the answer goes nowhere, and
 * the engine's work is not undone. */
static void
test_client_leaves (void)
{
  g_autoptr(SoupMessage) msg = new_message ("POST", "/v1/sandboxes", key_alpha);
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GBytes) body = g_bytes_new_static ("{\"name\": \"left\"}", 16);
  g_autoptr(Reply) created = NULL;
  g_autoptr(Reply) deleted = NULL;
  gboolean done = FALSE;
  gboolean slept = FALSE;

  set_dummy ("delay_ms", "500");
  soup_message_set_request_body_from_bytes (msg, "application/json", body);
  soup_session_send_and_read_async (http_client_session (), msg, G_PRIORITY_DEFAULT, cancellable,
                                    left_cb, &done);
  g_timeout_add (100, cancel_cb, cancellable);
  g_assert_true (iterate_until (&done));
  /* the engine finishes the create meanwhile */
  g_timeout_add (1200, timeout_cb, &slept);
  g_assert_true (iterate_until (&slept));
  set_dummy ("delay_ms", NULL);

  created = call ("GET", "/v1/sandboxes/left", key_alpha, NULL);
  g_assert_cmpuint (created->status, ==, 200);
  g_assert_cmpstr (json_object_get_string_member (reply_object (created), "state"), ==, "running");
  deleted = call ("DELETE", "/v1/sandboxes/left", key_alpha, NULL);
  g_assert_cmpuint (deleted->status, ==, 204);
}

/* ---- events ------------------------------------------------------------ */

static void
test_events (void)
{
  SseClient *alpha = sse_open ("/v1/events", key_alpha);
  SseClient *beta = NULL;
  g_autofree char *first = NULL;
  g_autofree char *block = NULL;
  g_autofree char *id = NULL;
  g_autofree char *beta_id = NULL;
  g_autoptr(JsonObject) event = NULL;
  g_autoptr(Reply) missing = call ("GET", "/v1/events?sandbox=nosuch", key_alpha, NULL);
  g_autoptr(Reply) no_key = call ("GET", "/v1/events", NULL, NULL);
  SoupMessageHeaders *headers = soup_message_get_response_headers (alpha->msg);

  assert_error (missing, 404, "not_found", NULL);
  assert_error (no_key, 401, "unauthorized", "a valid API key is required");

  g_assert_cmpuint (soup_message_get_status (alpha->msg), ==, 200);
  g_assert_cmpstr (soup_message_headers_get_content_type (headers, NULL), ==, "text/event-stream");
  g_assert_cmpstr (soup_message_headers_get_one (headers, "Cache-Control"), ==, "no-cache");
  g_assert_cmpint (soup_message_headers_get_encoding (headers), ==, SOUP_ENCODING_CHUNKED);
  first = sse_next (alpha);
  g_assert_cmpstr (first, ==, ": connected");

  /* beta's stream sees only beta's sandboxes */
  beta = sse_open ("/v1/events", key_beta);
  g_free (sse_next (beta));

  id = create_sandbox (key_alpha, "ev-1");
  block = sse_next (alpha);
  event = parse_event (block, "sandbox.created");
  g_assert_cmpstr (json_object_get_string_member (event, "type"), ==, "sandbox.created");
  g_assert_cmpstr (json_object_get_string_member (event, "sandbox"), ==, id);
  g_assert_true (json_object_has_member (event, "at"));

  beta_id = create_sandbox (key_beta, "ev-2");
  g_clear_pointer (&block, g_free);
  g_clear_pointer (&event, json_object_unref);
  block = sse_next (beta);
  event = parse_event (block, "sandbox.created");
  g_assert_cmpstr (json_object_get_string_member (event, "sandbox"), ==, beta_id);

  /* a client that leaves is noticed at the next write, without harm */
  sse_close (beta);
  {
    g_autoptr(Reply) r = call ("DELETE", "/v1/sandboxes/ev-2", key_beta, NULL);
    g_assert_cmpuint (r->status, ==, 204);
  }
  sse_close (alpha);
  {
    g_autoptr(Reply) r = call ("DELETE", "/v1/sandboxes/ev-1", key_alpha, NULL);
    g_assert_cmpuint (r->status, ==, 204);
  }
}

static void
test_events_one_sandbox (void)
{
  g_autofree char *id_a = create_sandbox (key_alpha, "one-a");
  g_autofree char *id_b = create_sandbox (key_alpha, "one-b");
  SseClient *client = sse_open ("/v1/events?sandbox=one-b", key_alpha);
  g_autofree char *first = sse_next (client);
  g_autofree char *block = NULL;
  g_autoptr(JsonObject) event = NULL;
  g_autoptr(Reply) r1 = call ("POST", "/v1/sandboxes/one-a/stop", key_alpha, NULL);
  g_autoptr(Reply) r2 = call ("POST", "/v1/sandboxes/one-b/stop", key_alpha, NULL);

  g_assert_cmpstr (first, ==, ": connected");
  g_assert_cmpuint (r1->status, ==, 200);
  g_assert_cmpuint (r2->status, ==, 200);
  block = sse_next (client);
  event = parse_event (block, "sandbox.stopped");
  g_assert_cmpstr (json_object_get_string_member (event, "sandbox"), ==, id_b);
  sse_close (client);
}

static void
shutdown_create_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = soup_session_send_and_read_finish (SOUP_SESSION (source), result,
                                                               &error);
  gboolean *done = user_data;

  /* the connection was closed under the request */
  g_assert_nonnull (error);
  *done = TRUE;
}

/* Shutdown ends open streams (the client sees the end of the answer) and
 * the connections of requests that wait for the engine, whose answers
 * then go nowhere. */
static void
test_events_shutdown (void)
{
  SseClient *client = sse_open ("/v1/events", key_beta);
  g_autofree char *first = sse_next (client);
  g_autoptr(SoupMessage) msg = new_message ("POST", "/v1/sandboxes", key_beta);
  g_autoptr(GBytes) body = g_bytes_new_static ("{\"name\": \"late\"}", 16);
  gboolean done = FALSE;
  gboolean slept = FALSE;

  g_assert_cmpstr (first, ==, ": connected");
  set_dummy ("delay_ms", "300");
  soup_message_set_request_body_from_bytes (msg, "application/json", body);
  soup_session_send_and_read_async (http_client_session (), msg, G_PRIORITY_DEFAULT, NULL,
                                    shutdown_create_cb, &done);
  /* until the engine has the create in hand */
  g_timeout_add (100, timeout_cb, &slept);
  g_assert_true (iterate_until (&slept));

  box_http_server_shutdown (server);
  g_assert_true (iterate_until (&client->eof));
  g_assert_true (iterate_until (&done));
  /* the engine answers after the shutdown */
  slept = FALSE;
  g_timeout_add (700, timeout_cb, &slept);
  g_assert_true (iterate_until (&slept));
  set_dummy ("delay_ms", NULL);
  sse_close (client);
}

/* ---- set-up ------------------------------------------------------------ */

static void
setup (void)
{
  http_test_start (ADMIN_TOKEN, &data_dir, &engine, &server);
  http_client_init (server);
  key_alpha = http_test_make_key (ADMIN_TOKEN, "alpha");
  key_beta = http_test_make_key (ADMIN_TOKEN, "beta");
}

static void
test_listen_errors (void)
{
  g_autoptr(BoxHttpServer) other = box_http_server_new (engine);
  g_autoptr(GError) error = NULL;

  g_assert_false (box_http_server_listen (other, "no-port", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (box_http_server_listen (other, "example.invalid:80", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_true (box_http_server_listen (other, "[::1]:0", &error) ||
                 g_error_matches (error, BOX_ERROR, BOX_ERROR_INTERNAL));   /* no IPv6 */
}

static void
teardown (void)
{
  http_client_init (NULL);
  http_test_stop (&data_dir, &engine, &server);
  g_free (key_alpha);
  g_free (key_beta);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  setup ();

  g_test_add_func ("/http/parse-query", test_parse_query);
  g_test_add_func ("/http/bearer", test_bearer);
  g_test_add_func ("/http/listen-errors", test_listen_errors);
  g_test_add_func ("/http/no-route", test_no_route);
  g_test_add_func ("/http/websocket-without-upgrade", test_websocket_without_upgrade);
  g_test_add_func ("/http/method-not-allowed", test_method_not_allowed);
  g_test_add_func ("/http/auth", test_auth);
  g_test_add_func ("/http/whoami", test_whoami);
  g_test_add_func ("/http/well-known", test_well_known);
  g_test_add_func ("/http/operator", test_operator);
  g_test_add_func ("/http/bodies", test_bodies);
  g_test_add_func ("/http/sandboxes", test_sandboxes);
  g_test_add_func ("/http/catalogue", test_catalogue);
  g_test_add_func ("/http/secrets", test_secrets);
  g_test_add_func ("/http/capacity", test_capacity);
  g_test_add_func ("/http/client-leaves", test_client_leaves);
  g_test_add_func ("/http/events", test_events);
  g_test_add_func ("/http/events-one-sandbox", test_events_one_sandbox);
  /* last: it shuts the server down */
  g_test_add_func ("/http/events-shutdown", test_events_shutdown);

  status = g_test_run ();
  teardown ();
  return status;
}
