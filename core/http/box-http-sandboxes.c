/* box-http-sandboxes.c: /v1/sandboxes..., /v1/templates and
 * /v1/network/defaults. */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-http-sandbox-json.h"
#include "box-http-util.h"
#include "box-json-writer.h"
#include "box-requests.h"

/* The domains of @project, for the sandboxes' "urls": one lookup per
 * answer, however many sandboxes it shows.  NULL when the project has none
 * (or is gone). */
static GStrv
project_domains (BoxHttpRequest *req, const char *project_name)
{
  g_autoptr(BoxProject) project = NULL;

  if (project_name == NULL)
    return NULL;
  project = box_engine_get_project (req->engine, project_name, NULL);

  return project != NULL ? g_steal_pointer (&project->domains) : NULL;
}

/* A sandbox as the API shows it (with its URLs), into @out. */
static void
write_sandbox (GString *out, BoxHttpRequest *req, const BoxSandbox *sandbox,
               const char *const *domains)
{
  box_http_sandbox_json_write (out, sandbox, box_engine_get_config (req->engine)->sandbox_domain,
                               domains);
}

static void
reply_sandbox (BoxHttpRequest *req, guint status, const BoxSandbox *sandbox)
{
  /* the sandbox's own project: the in-sandbox socket's caller has no key */
  g_auto(GStrv) domains = project_domains (req, sandbox->project);
  GString *out = g_string_sized_new (1024);

  write_sandbox (out, req, sandbox, (const char *const *) domains);
  box_http_reply_json_text (req->msg, status, out);
}

/* ---- create, list, get ------------------------------------------------- */

static void
sandbox_created_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = NULL;

  sandbox = box_engine_create_sandbox_finish (BOX_ENGINE (source), result, &error);
  if (sandbox == NULL)
    box_http_reply_error (req->msg, error);
  else
    reply_sandbox (req, SOUP_STATUS_CREATED, sandbox);
  box_http_request_resume (req);
}

void
box_http_sandbox_create (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(BoxSandboxCreate) request = NULL;

  /* every field is optional, so an empty body is {} */
  body = box_http_request_body (req, TRUE, &error);
  if (body != NULL)
    request = box_sandbox_create_from_json (body, &error);
  if (request == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  /* the request stays alive until the engine answers */
  box_engine_create_sandbox_async (req->engine, box_http_request_project (req),
                                   box_http_request_keep (req, g_steal_pointer (&request),
                                                          (GDestroyNotify) box_sandbox_create_free),
                                   NULL, sandbox_created_cb, box_http_request_pause (req));
}

/* label=k=v (repeatable, split at the first '=') and state=<state> */
static gboolean
parse_list_filters (BoxHttpRequest *req, GHashTable *labels, gboolean *has_state,
                    BoxSandboxState *state, GError **error)
{
  g_autoptr(GPtrArray) filters = box_http_request_query_all (req, "label");
  const char *state_str = box_http_request_query (req, "state");

  for (guint i = 0; i < filters->len; i++) {
    const char *filter = g_ptr_array_index (filters, i);
    const char *eq = strchr (filter, '=');
    if (eq == NULL || eq == filter) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                   "bad label filter \"%s\": want label=<key>=<value>", filter);
      return FALSE;
    }
    g_hash_table_insert (labels, g_strndup (filter, eq - filter), g_strdup (eq + 1));
  }
  *has_state = state_str != NULL;
  if (state_str != NULL && !box_sandbox_state_from_string (state_str, state)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "bad state \"%s\": want creating, running, paused, stopped or error", state_str);
    return FALSE;
  }
  return TRUE;
}

void
box_http_sandbox_list (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) labels = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr(GPtrArray) sandboxes = NULL;
  g_auto(GStrv) domains = NULL;
  GString *out = NULL;
  BoxSandboxState state = BOX_SANDBOX_STATE_RUNNING;
  gboolean has_state = FALSE;

  if (!parse_list_filters (req, labels, &has_state, &state, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  sandboxes = box_engine_list_sandboxes (req->engine, box_http_request_project (req),
                                         g_hash_table_size (labels) > 0 ? labels : NULL,
                                         has_state ? &state : NULL, &error);
  if (sandboxes == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  domains = project_domains (req, box_http_request_project (req));
  out = g_string_sized_new (1024 * (sandboxes->len + 1));
  box_json_begin_object (out);
  box_json_key (out, "sandboxes");
  box_json_begin_array (out);
  for (guint i = 0; i < sandboxes->len; i++)
    write_sandbox (out, req, g_ptr_array_index (sandboxes, i), (const char *const *) domains);
  box_json_end_array (out);
  box_json_end_object (out);
  box_http_reply_json_text (req->msg, SOUP_STATUS_OK, out);
}

void
box_http_sandbox_get (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = NULL;

  sandbox = box_engine_get_sandbox (req->engine, box_http_request_project (req),
                                    box_http_request_param (req, 0), &error);
  if (sandbox == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  reply_sandbox (req, SOUP_STATUS_OK, sandbox);
}

/* ---- update, delete ---------------------------------------------------- */

static void
sandbox_updated_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = NULL;

  sandbox = box_engine_update_sandbox_finish (BOX_ENGINE (source), result, &error);
  if (sandbox == NULL)
    box_http_reply_error (req->msg, error);
  else
    reply_sandbox (req, SOUP_STATUS_OK, sandbox);
  box_http_request_resume (req);
}

void
box_http_sandbox_update (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(BoxSandboxUpdate) update = NULL;

  body = box_http_request_body (req, FALSE, &error);
  if (body != NULL)
    update = box_sandbox_update_from_json (body, &error);
  if (update == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_engine_update_sandbox_async (req->engine, box_http_request_project (req),
                                   box_http_request_param (req, 0),
                                   box_http_request_keep (req, g_steal_pointer (&update),
                                                          (GDestroyNotify) box_sandbox_update_free),
                                   NULL,
                                   sandbox_updated_cb, box_http_request_pause (req));
}

static void
sandbox_deleted_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;

  if (!box_engine_delete_sandbox_finish (BOX_ENGINE (source), result, &error))
    box_http_reply_error (req->msg, error);
  else
    box_http_reply_empty (req->msg, SOUP_STATUS_NO_CONTENT);
  box_http_request_resume (req);
}

void
box_http_sandbox_delete (BoxHttpRequest *req)
{
  box_engine_delete_sandbox_async (req->engine, box_http_request_project (req),
                                   box_http_request_param (req, 0), NULL,
                                   sandbox_deleted_cb, box_http_request_pause (req));
}

/* ---- pause, stop, wake ------------------------------------------------- */

/* The answer of a paused request: @sandbox (200), or @error. */
static void
answer_sandbox (BoxHttpRequest *req, const BoxSandbox *sandbox, const GError *error)
{
  if (sandbox == NULL)
    box_http_reply_error (req->msg, error);
  else
    reply_sandbox (req, SOUP_STATUS_OK, sandbox);
  box_http_request_resume (req);
}

static void
state_changed_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = NULL;

  sandbox = box_engine_change_state_finish (BOX_ENGINE (source), result, &error);
  answer_sandbox (req, sandbox, error);
}

static void
change_state (BoxHttpRequest *req, BoxStateRequest request)
{
  g_autoptr(GError) error = NULL;

  if (!box_http_request_no_body (req, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_engine_change_state_async (req->engine, box_http_request_project (req),
                                 box_http_request_param (req, 0), request, NULL,
                                 state_changed_cb, box_http_request_pause (req));
}

/* POST .../checkpoints/{checkpoint}/restore (box-http-checkpoints.c has the rest) */
static void
restored_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = NULL;

  sandbox = box_engine_restore_checkpoint_finish (BOX_ENGINE (source), result, &error);
  answer_sandbox (req, sandbox, error);
}

void
box_http_checkpoint_restore (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;

  if (!box_http_request_no_body (req, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  box_engine_restore_checkpoint_async (req->engine, box_http_request_project (req),
                                       box_http_request_param (req, 0),
                                       box_http_request_param (req, 1), NULL, restored_cb,
                                       box_http_request_pause (req));
}

void
box_http_sandbox_pause (BoxHttpRequest *req)
{
  change_state (req, BOX_STATE_REQUEST_PAUSE);
}

void
box_http_sandbox_stop (BoxHttpRequest *req)
{
  change_state (req, BOX_STATE_REQUEST_STOP);
}

void
box_http_sandbox_wake (BoxHttpRequest *req)
{
  change_state (req, BOX_STATE_REQUEST_WAKE);
}

/* ---- catalogue --------------------------------------------------------- */

void
box_http_template_list (BoxHttpRequest *req)
{
  g_autoptr(GPtrArray) templates = box_engine_list_templates (req->engine);
  g_autoptr(GPtrArray) nodes = box_http_node_array_new ();

  for (guint i = 0; templates != NULL && i < templates->len; i++)
    g_ptr_array_add (nodes, box_template_to_api_json (g_ptr_array_index (templates, i)));
  box_http_reply_list (req->msg, "templates", nodes);
}

void
box_http_network_defaults (BoxHttpRequest *req)
{
  GPtrArray *rules = box_engine_get_network_defaults (req->engine);   /* borrowed */
  g_autoptr(GPtrArray) nodes = box_http_node_array_new ();

  for (guint i = 0; rules != NULL && i < rules->len; i++)
    g_ptr_array_add (nodes, box_rule_to_api_json (g_ptr_array_index (rules, i)));
  box_http_reply_list (req->msg, "egress", nodes);
}
