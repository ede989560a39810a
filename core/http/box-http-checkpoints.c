/* box-http-checkpoints.c: /v1/sandboxes/{sandbox}/checkpoints...
 * (the restore, which answers a Sandbox, is in box-http-sandboxes.c).
 *
 * POST is also served on the in-sandbox socket, where it answers 201 as
 * soon as the engine accepted the checkpoint (checked, its ID taken) and
 * before the sandbox is paused for it: the engine waits until the answer
 * was written to the caller's connection, so that the caller, paused with
 * everything else, carries on after it in the checkpoint and in its
 * restores and forks. */
#include "config.h"

#include "box-error.h"
#include "box-http-util.h"
#include "box-requests.h"

static void
reply_checkpoint (BoxHttpRequest *req, guint status, const BoxCheckpoint *checkpoint)
{
  box_http_reply_json (req->msg, status, box_checkpoint_to_api_json (checkpoint));
}

/* ---- create ------------------------------------------------------------- */

typedef struct {
  BoxHttpRequest *req;
  GTask          *go;          /* the engine waits for it (in-sandbox only) */
  gulong          handler[2];  /* the answer's "finished" and "disconnected" */
  gboolean        answered;
} Create;

static void
create_free (Create *create)
{
  g_assert (create->go == NULL);
  box_http_request_unref (create->req);
  g_free (create);
}

/* The in-sandbox answer is out (or its caller left): the engine goes on. */
static void
answer_out (SoupServerMessage *msg, gpointer user_data)
{
  Create *create = user_data;
  GTask *go = g_steal_pointer (&create->go);

  for (guint i = 0; i < G_N_ELEMENTS (create->handler); i++)
    g_clear_signal_handler (&create->handler[i], msg);
  if (go != NULL) {
    g_task_return_boolean (go, TRUE);
    g_object_unref (go);
  }
}

static void
on_accepted (BoxEngine *engine, const BoxCheckpoint *checkpoint, GTask *go, gpointer user_data)
{
  Create *create = user_data;
  BoxHttpRequest *req = create->req;

  create->go = go;
  create->answered = TRUE;
  if (req->finished) {
    answer_out (req->msg, create);
    return;
  }
  create->handler[0] = g_signal_connect (req->msg, "finished", G_CALLBACK (answer_out), create);
  create->handler[1] = g_signal_connect (req->msg, "disconnected", G_CALLBACK (answer_out),
                                         create);
  reply_checkpoint (req, SOUP_STATUS_CREATED, checkpoint);
  box_http_request_resume (req);
}

static void
created_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Create *create = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxCheckpoint) checkpoint = NULL;

  checkpoint = box_engine_create_checkpoint_finish (BOX_ENGINE (source), result, &error);
  if (create->answered) {
    /* in-sandbox: the caller had its 201 already */
    if (checkpoint == NULL)
      g_warning ("in-sandbox checkpoint failed after it was accepted: %s", error->message);
  } else {
    if (checkpoint == NULL)
      box_http_reply_error (create->req->msg, error);
    else
      reply_checkpoint (create->req, SOUP_STATUS_CREATED, checkpoint);
    box_http_request_resume (create->req);
  }
  create_free (create);
}

void
box_http_checkpoint_create (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) body = NULL;
  g_autofree char *comment = NULL;
  gboolean memory = TRUE;
  gboolean in_sandbox = req->principal != NULL && req->principal->kind == BOX_PRINCIPAL_SANDBOX;
  Create *create;

  body = box_http_request_body (req, TRUE, &error);
  if (body == NULL || !box_checkpoint_create_from_json (body, &comment, &memory, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  create = g_new0 (Create, 1);
  create->req = box_http_request_pause (req);
  box_engine_create_checkpoint_async (req->engine, box_http_request_project (req),
                                      box_http_request_param (req, 0), comment, memory,
                                      in_sandbox ? on_accepted : NULL, create, NULL, created_cb,
                                      create);
}

/* ---- list, get, delete -------------------------------------------------- */

void
box_http_checkpoint_list (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) checkpoints = NULL;
  g_autoptr(GPtrArray) nodes = box_http_node_array_new ();

  checkpoints = box_engine_list_checkpoints (req->engine, box_http_request_project (req),
                                             box_http_request_param (req, 0), &error);
  if (checkpoints == NULL) {
    box_http_reply_error (req->msg, error);
    return;
  }
  for (guint i = 0; i < checkpoints->len; i++)
    g_ptr_array_add (nodes, box_checkpoint_to_api_json (g_ptr_array_index (checkpoints, i)));
  box_http_reply_list (req->msg, "checkpoints", nodes);
}

void
box_http_checkpoint_get (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxCheckpoint) checkpoint = NULL;

  checkpoint = box_engine_get_checkpoint (req->engine, box_http_request_project (req),
                                          box_http_request_param (req, 0),
                                          box_http_request_param (req, 1), &error);
  if (checkpoint == NULL)
    box_http_reply_error (req->msg, error);
  else
    reply_checkpoint (req, SOUP_STATUS_OK, checkpoint);
}

static void
deleted_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxHttpRequest) req = user_data;
  g_autoptr(GError) error = NULL;

  if (!box_engine_delete_checkpoint_finish (BOX_ENGINE (source), result, &error))
    box_http_reply_error (req->msg, error);
  else
    box_http_reply_empty (req->msg, SOUP_STATUS_NO_CONTENT);
  box_http_request_resume (req);
}

void
box_http_checkpoint_delete (BoxHttpRequest *req)
{
  box_engine_delete_checkpoint_async (req->engine, box_http_request_project (req),
                                      box_http_request_param (req, 0),
                                      box_http_request_param (req, 1), NULL, deleted_cb,
                                      box_http_request_pause (req));
}
