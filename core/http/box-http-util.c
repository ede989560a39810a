/* box-http-util.c: requests, query strings, bodies and answers of the HTTP API. */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-http-limits.h"
#include "box-http-util.h"
#include "box-requests.h"

/* ---- requests ---------------------------------------------------------- */

BoxHttpRequest *
box_http_request_new (BoxHttpServer *server, BoxEngine *engine, SoupServerMessage *msg)
{
  BoxHttpRequest *req = g_new0 (BoxHttpRequest, 1);

  req->ref_count = 1;
  req->server = server;
  req->engine = g_object_ref (engine);
  req->msg = msg;   /* borrowed until box_http_request_attach() */
  req->path_params = g_ptr_array_new_with_free_func (g_free);
  req->query = g_ptr_array_new_with_free_func ((GDestroyNotify) box_http_param_free);
  return req;
}

BoxHttpRequest *
box_http_request_ref (BoxHttpRequest *req)
{
  g_return_val_if_fail (req != NULL, NULL);
  req->ref_count++;
  return req;
}

void
box_http_request_unref (BoxHttpRequest *req)
{
  g_return_if_fail (req != NULL);
  if (--req->ref_count > 0)
    return;
  if (req->finished_id != 0) {
    /* attached: the reference is ours */
    g_signal_handler_disconnect (req->msg, req->finished_id);
    g_signal_handler_disconnect (req->msg, req->disconnected_id);
    g_object_unref (req->msg);
  }
  if (req->kept_free != NULL)
    req->kept_free (req->kept);
  g_clear_pointer (&req->slot, box_http_slot_release);
  g_clear_pointer (&req->principal, box_principal_free);
  g_ptr_array_unref (req->path_params);
  g_ptr_array_unref (req->query);
  g_object_unref (req->engine);
  g_free (req);
}

static void
on_message_finished (SoupServerMessage *msg, gpointer user_data)
{
  BoxHttpRequest *req = user_data;

  req->finished = TRUE;
}

void
box_http_request_attach (BoxHttpRequest *req)
{
  g_return_if_fail (req->finished_id == 0);

  g_object_ref (req->msg);
  req->finished_id = g_signal_connect (req->msg, "finished",
                                       G_CALLBACK (on_message_finished), req);
  req->disconnected_id = g_signal_connect (req->msg, "disconnected",
                                           G_CALLBACK (on_message_finished), req);
}

BoxHttpRequest *
box_http_request_pause (BoxHttpRequest *req)
{
  g_return_val_if_fail (req->finished_id != 0, NULL);
  g_return_val_if_fail (!req->paused, NULL);

  soup_server_message_pause (req->msg);
  req->paused = TRUE;
  return box_http_request_ref (req);
}

void
box_http_request_resume (BoxHttpRequest *req)
{
  if (!req->paused)
    return;
  req->paused = FALSE;
  /* A client that went away has nothing left to send to. */
  if (!req->finished)
    soup_server_message_unpause (req->msg);
}

gpointer
box_http_request_keep (BoxHttpRequest *req, gpointer data, GDestroyNotify free_fn)
{
  g_return_val_if_fail (req->kept == NULL, data);

  req->kept = data;
  req->kept_free = free_fn;
  return data;
}

const char *
box_http_request_param (BoxHttpRequest *req, guint index)
{
  g_return_val_if_fail (index < req->path_params->len, NULL);
  return g_ptr_array_index (req->path_params, index);
}

const char *
box_http_request_query (BoxHttpRequest *req, const char *name)
{
  for (guint i = 0; i < req->query->len; i++) {
    BoxHttpParam *param = g_ptr_array_index (req->query, i);
    if (g_strcmp0 (param->name, name) == 0)
      return param->value;
  }
  return NULL;
}

gboolean
box_http_request_check_query (BoxHttpRequest *req, const char *const *allowed,
                              const char *const *repeatable, GError **error)
{
  for (guint i = 0; i < req->query->len; i++) {
    BoxHttpParam *param = g_ptr_array_index (req->query, i);

    if (!g_strv_contains (allowed, param->name)) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "unknown query parameter %s", param->name);
      return FALSE;
    }
    if (repeatable != NULL && g_strv_contains (repeatable, param->name))
      continue;
    for (guint j = 0; j < i; j++) {
      BoxHttpParam *earlier = g_ptr_array_index (req->query, j);

      if (g_str_equal (earlier->name, param->name)) {
        g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "query parameter %s given twice",
                     param->name);
        return FALSE;
      }
    }
  }
  return TRUE;
}

gboolean
box_http_request_query_bool (BoxHttpRequest *req, const char *name, gboolean def, gboolean *out,
                             GError **error)
{
  const char *value = box_http_request_query (req, name);

  if (value == NULL)
    *out = def;
  else if (g_str_equal (value, "true"))
    *out = TRUE;
  else if (g_str_equal (value, "false"))
    *out = FALSE;
  else {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s must be true or false, not %s", name,
                 value);
    return FALSE;
  }
  return TRUE;
}

gboolean
box_http_request_query_uint (BoxHttpRequest *req, const char *name, guint min, guint max,
                             guint def, guint *out, GError **error)
{
  const char *value = box_http_request_query (req, name);
  guint64 n = 0;

  *out = def;
  if (value == NULL)
    return TRUE;
  if (!g_ascii_isdigit (value[0]) ||
      !g_ascii_string_to_unsigned (value, 10, min, max, &n, NULL)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s must be an integer from %u to %u", name,
                 min, max);
    return FALSE;
  }
  *out = (guint) n;
  return TRUE;
}

GPtrArray *
box_http_request_query_all (BoxHttpRequest *req, const char *name)
{
  GPtrArray *values = g_ptr_array_new ();

  for (guint i = 0; i < req->query->len; i++) {
    BoxHttpParam *param = g_ptr_array_index (req->query, i);
    if (g_strcmp0 (param->name, name) == 0)
      g_ptr_array_add (values, param->value);
  }
  return values;
}

const char *
box_http_request_project (BoxHttpRequest *req)
{
  if (req->principal == NULL || req->principal->kind != BOX_PRINCIPAL_KEY)
    return NULL;
  return req->principal->project;
}

/* JSON bodies come as application/json (or any +json type).  A missing
 * type, text/plain and curl's default for -d
 * (application/x-www-form-urlencoded) are read as JSON too, so that
 * `curl -d '{...}'` works; types that announce something else entirely
 * (multipart, octet-stream ...) are refused. */
static gboolean
content_type_is_json (SoupMessageHeaders *headers)
{
  const char *content_type = soup_message_headers_get_content_type (headers, NULL);

  if (content_type == NULL)
    return soup_message_headers_get_one (headers, "Content-Type") == NULL;
  return g_ascii_strcasecmp (content_type, "application/json") == 0 ||
         g_str_has_suffix (content_type, "+json") ||
         g_ascii_strcasecmp (content_type, "text/plain") == 0 ||
         g_ascii_strcasecmp (content_type, "application/x-www-form-urlencoded") == 0;
}

JsonNode *
box_http_request_body (BoxHttpRequest *req, gboolean empty_ok, GError **error)
{
  SoupMessageBody *body = soup_server_message_get_request_body (req->msg);
  g_autoptr(GBytes) bytes = NULL;
  const char *data;
  gsize len = 0;

  if (req->body_too_large || body->length > BOX_HTTP_BODY_MAX) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "request body too large (limit %u bytes)", (guint) BOX_HTTP_BODY_MAX);
    return NULL;
  }
  bytes = soup_message_body_flatten (body);
  data = g_bytes_get_data (bytes, &len);
  if (len > 0 && !content_type_is_json (soup_server_message_get_request_headers (req->msg))) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "Content-Type must be application/json, not %s",
                 soup_message_headers_get_content_type (soup_server_message_get_request_headers (req->msg), NULL));
    return NULL;
  }
  return box_json_parse_body (data != NULL ? data : "", len, empty_ok, error);
}

gboolean
box_http_request_no_body (BoxHttpRequest *req, GError **error)
{
  static const char *const none[] = { NULL };
  g_autoptr(JsonNode) body = box_http_request_body (req, TRUE, error);

  if (body == NULL)
    return FALSE;
  if (!JSON_NODE_HOLDS_OBJECT (body)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         "bad request body: this route takes no body (or {})");
    return FALSE;
  }
  return box_json_check_fields (json_node_get_object (body), none, error);
}

/* ---- query strings and headers ----------------------------------------- */

void
box_http_param_free (BoxHttpParam *param)
{
  if (param == NULL)
    return;
  g_free (param->name);
  g_free (param->value);
  g_free (param);
}

static char *
query_unescape (const char *str, gsize len)
{
  g_autofree char *plain = g_strndup (str, len);

  g_strdelimit (plain, "+", ' ');
  /* NULL for a malformed escape or an escaped NUL */
  return g_uri_unescape_string (plain, NULL);
}

GPtrArray *
box_http_parse_query (const char *query, GError **error)
{
  g_autoptr(GPtrArray) params =
    g_ptr_array_new_with_free_func ((GDestroyNotify) box_http_param_free);
  const char *p = query;

  while (p != NULL && *p != '\0') {
    const char *end = strchr (p, '&');
    const char *eq;
    gsize len = end != NULL ? (gsize) (end - p) : strlen (p);
    g_autofree char *name = NULL;
    g_autofree char *value = NULL;

    eq = memchr (p, '=', len);
    if (len > 0) {
      if (eq != NULL) {
        name = query_unescape (p, eq - p);
        value = query_unescape (eq + 1, len - (eq - p) - 1);
      } else {
        name = query_unescape (p, len);
        value = g_strdup ("");
      }
      if (name == NULL || value == NULL) {
        g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                             "malformed escape in the query string");
        return NULL;
      }
      {
        BoxHttpParam *param = g_new0 (BoxHttpParam, 1);
        param->name = g_steal_pointer (&name);
        param->value = g_steal_pointer (&value);
        g_ptr_array_add (params, param);
      }
    }
    p = end != NULL ? end + 1 : NULL;
  }
  return g_steal_pointer (&params);
}

char *
box_http_bearer_token (SoupMessageHeaders *headers)
{
  const char *value = soup_message_headers_get_one (headers, "Authorization");
  const char *token;

  if (value == NULL)
    return NULL;
  while (*value == ' ' || *value == '\t')
    value++;
  if (g_ascii_strncasecmp (value, "Bearer", 6) != 0 || (value[6] != ' ' && value[6] != '\t'))
    return NULL;
  token = value + 6;
  while (*token == ' ' || *token == '\t')
    token++;
  if (*token == '\0')
    return NULL;
  return g_strchomp (g_strdup (token));
}

/* ---- answers ----------------------------------------------------------- */

void
box_http_reply_json (SoupServerMessage *msg, guint status, JsonNode *node)
{
  g_autoptr(JsonNode) owned = node;
  gsize len = 0;
  char *text = json_to_string (owned, FALSE);

  len = strlen (text);
  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_TAKE, text, len);
}

void
box_http_reply_json_text (SoupServerMessage *msg, guint status, GString *text)
{
  gsize len = text->len;

  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_TAKE,
                                    g_string_free (text, FALSE), len);
}

void
box_http_reply_empty (SoupServerMessage *msg, guint status)
{
  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, NULL, SOUP_MEMORY_STATIC, NULL, 0);
}

void
box_http_reply_error (SoupServerMessage *msg, const GError *error)
{
  g_autoptr(GError) converted = NULL;
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (msg);

  g_return_if_fail (error != NULL);

  converted = box_error_convert (error, NULL);
  if (converted->code == BOX_ERROR_INTERNAL)
    g_warning ("HTTP %s %s: %s", soup_server_message_get_method (msg),
               g_uri_get_path (soup_server_message_get_uri (msg)), converted->message);
  if (converted->code == BOX_ERROR_CAPACITY) {
    g_autofree char *seconds = g_strdup_printf ("%d", BOX_ERROR_RETRY_AFTER_S);
    soup_message_headers_replace (headers, "Retry-After", seconds);
  }
  box_http_reply_json (msg, box_error_http_status (converted->code),
                       box_error_to_json (converted));
}

void
box_http_reply_error_literal (SoupServerMessage *msg, BoxErrorCode code, const char *message)
{
  g_autoptr(GError) error = g_error_new_literal (BOX_ERROR, code, message);

  box_http_reply_error (msg, error);
}

GPtrArray *
box_http_node_array_new (void)
{
  return g_ptr_array_new_with_free_func ((GDestroyNotify) json_node_unref);
}

void
box_http_reply_list (SoupServerMessage *msg, const char *member, GPtrArray *nodes)
{
  g_autoptr(JsonObject) object = json_object_new ();
  JsonArray *array = json_array_sized_new (nodes->len);
  JsonNode *root = json_node_new (JSON_NODE_OBJECT);

  for (guint i = 0; i < nodes->len; i++)
    json_array_add_element (array, json_node_ref (g_ptr_array_index (nodes, i)));
  json_object_set_array_member (object, member, array);
  json_node_set_object (root, object);
  box_http_reply_json (msg, SOUP_STATUS_OK, root);
}
