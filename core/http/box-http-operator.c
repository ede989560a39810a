/* box-http-operator.c: GET /v1/whoami, the operator's /v1/projects...
 * routes (admin token) and the identity discovery routes. */
#include "config.h"

#include "box-error.h"
#include "box-http-util.h"
#include "box-requests.h"
#include "box-validate.h"

/* ---- whoami ------------------------------------------------------------ */

void
box_http_whoami (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxProject) project = NULL;
  g_autoptr(JsonObject) object = json_object_new ();
  JsonNode *root;

  project = box_engine_get_project (req->engine, req->principal->project, &error);
  if (project == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  json_object_set_member (object, "project", box_project_to_api_json (project));
  if (req->principal->key != NULL)
    json_object_set_member (object, "key", box_key_to_api_json (req->principal->key));
  else
    json_object_set_null_member (object, "key");
  root = json_node_new (JSON_NODE_OBJECT);
  json_node_set_object (root, object);
  box_http_reply_json (req->msg, SOUP_STATUS_OK, root);
}

/* ---- projects ---------------------------------------------------------- */

void
box_http_project_create (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = NULL;
  g_autofree char *name = NULL;
  g_auto(GStrv) domains = NULL;
  g_autoptr(BoxProject) project = NULL;

  body = box_http_request_body (req, FALSE, &error);
  if (body == NULL || !box_project_create_from_json (body, &name, &domains, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  project = box_engine_create_project (req->engine, name, (const char *const *) domains, &error);
  if (project == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_reply_json (req->msg, SOUP_STATUS_CREATED, box_project_to_api_json (project));
}

void
box_http_project_list (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) projects = NULL;
  g_autoptr(GPtrArray) nodes = box_http_node_array_new ();

  projects = box_engine_list_projects (req->engine, &error);
  if (projects == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  for (guint i = 0; i < projects->len; i++)
    g_ptr_array_add (nodes, box_project_to_api_json (g_ptr_array_index (projects, i)));
  box_http_reply_list (req->msg, "projects", nodes);
}

void
box_http_project_get (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxProject) project = NULL;

  project = box_engine_get_project (req->engine, box_http_request_param (req, 0), &error);
  if (project == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_reply_json (req->msg, SOUP_STATUS_OK, box_project_to_api_json (project));
}

/* {domains?: [string]}: FALSE with the error, else *present says whether
 * domains was given (null clears). */
static gboolean
project_update_from_json (JsonNode *body, gboolean *present, GStrv *domains_out, GError **error)
{
  static const char *const allowed[] = { "domains", NULL };
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  JsonObject *object;
  JsonNode *domains;

  if (!JSON_NODE_HOLDS_OBJECT (body)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "bad request body: json: cannot unmarshal %s into a value of type object",
                 json_node_type_name (body));
    return FALSE;
  }
  object = json_node_get_object (body);
  if (!box_json_check_fields (object, allowed, error))
    return FALSE;
  domains = json_object_get_member (object, "domains");
  *present = domains != NULL;
  if (domains != NULL && JSON_NODE_HOLDS_ARRAY (domains)) {
    JsonArray *array = json_node_get_array (domains);
    for (guint i = 0; i < json_array_get_length (array); i++) {
      JsonNode *element = json_array_get_element (array, i);
      const char *domain;
      if (!JSON_NODE_HOLDS_VALUE (element) ||
          json_node_get_value_type (element) != G_TYPE_STRING) {
        g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                     "bad request body: json: cannot unmarshal %s into field domains of type string",
                     json_node_type_name (element));
        return FALSE;
      }
      domain = json_node_get_string (element);
      if (!box_validate_project_domain (domain, error))
        return FALSE;
      g_strv_builder_add (builder, domain);
    }
  } else if (domains != NULL && !JSON_NODE_HOLDS_NULL (domains)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "bad request body: json: cannot unmarshal %s into field domains of type []string",
                 json_node_type_name (domains));
    return FALSE;
  }
  *domains_out = g_strv_builder_end (builder);
  return TRUE;
}

void
box_http_project_update (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = NULL;
  g_auto(GStrv) domains = NULL;
  g_autoptr(BoxProject) project = NULL;
  gboolean present = FALSE;
  const char *name = box_http_request_param (req, 0);

  body = box_http_request_body (req, FALSE, &error);
  if (body == NULL || !project_update_from_json (body, &present, &domains, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  if (present)
    project = box_engine_set_project_domains (req->engine, name,
                                              (const char *const *) domains, &error);
  else
    project = box_engine_get_project (req->engine, name, &error);
  if (project == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_reply_json (req->msg, SOUP_STATUS_OK, box_project_to_api_json (project));
}

static void
project_deleted_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;

  if (!box_engine_delete_project_finish (BOX_ENGINE (source), result, &error))
    box_http_reply_error (req->msg, error);
  else
    box_http_reply_empty (req->msg, SOUP_STATUS_NO_CONTENT);
  box_http_request_resume (req);
}

void
box_http_project_delete (BoxHttpRequest *req)
{
  box_engine_delete_project_async (req->engine, box_http_request_param (req, 0), NULL,
                                   project_deleted_cb, box_http_request_pause (req));
}

/* ---- keys -------------------------------------------------------------- */

/* The Key shape, and read_only: true on a read-only key only (a full key
 * keeps the spec's exact shape). */
static JsonNode *
key_to_json (BoxHttpRequest *req, const BoxKey *key)
{
  JsonNode *node = box_key_to_api_json (key);

  if (box_engine_key_is_read_only (req->engine, key->id))
    json_object_set_boolean_member (json_node_get_object (node), "read_only", TRUE);
  return node;
}

void
box_http_key_create (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = NULL;
  g_autofree char *name = NULL;
  g_autofree char *secret = NULL;
  g_autoptr(BoxKey) key = NULL;
  gboolean read_only = FALSE;
  JsonNode *node;

  body = box_http_request_body (req, FALSE, &error);
  if (body == NULL || !box_key_create_from_json (body, &name, &read_only, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  key = box_engine_create_key (req->engine, box_http_request_param (req, 0), name, read_only,
                               &secret, &error);
  if (key == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  node = key_to_json (req, key);
  json_object_set_string_member (json_node_get_object (node), "secret", secret);
  box_http_reply_json (req->msg, SOUP_STATUS_CREATED, node);
}

void
box_http_key_list (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) keys = NULL;
  g_autoptr(GPtrArray) nodes = box_http_node_array_new ();

  keys = box_engine_list_keys (req->engine, box_http_request_param (req, 0), &error);
  if (keys == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  for (guint i = 0; i < keys->len; i++)
    g_ptr_array_add (nodes, key_to_json (req, g_ptr_array_index (keys, i)));
  box_http_reply_list (req->msg, "keys", nodes);
}

void
box_http_key_delete (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;

  if (!box_engine_delete_key (req->engine, box_http_request_param (req, 0),
                              box_http_request_param (req, 1), &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_http_reply_empty (req->msg, SOUP_STATUS_NO_CONTENT);
}
