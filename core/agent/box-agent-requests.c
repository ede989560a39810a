/* box-agent-requests.c: hello and the requests on channel 0 (calls, and
 * the requests that open channels). */
#include "config.h"

#include <string.h>

#include "box-agent-private.h"
#include "box-error.h"

/* hello is sent again after this long without an answer, then after
 * twice as long each time, up to the maximum */
#define HELLO_RETRY_MS 1000
#define HELLO_RETRY_MAX_MS 8000

/* an agent's message passed on to the API's caller: at most this many
 * bytes of it (cut at a character) */
#define ERROR_MESSAGE_MAX 1024

GError *
box_agent_error_from_reply (JsonObject *reply)
{
  JsonNode *node = json_object_get_member (reply, "error");
  JsonObject *err = node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  const char *code = box_agent_json_get_string (err, "code");
  const char *text = box_agent_json_get_string (err, "message");
  g_autofree char *message = NULL;
  g_autofree char *logged_code = NULL;
  g_autofree char *logged_message = NULL;

  if (code == NULL)
    code = "unknown";
  if (text == NULL || *text == '\0')
    text = code;
  /* the text comes from the guest: bounded (it reached us as valid UTF-8) */
  if (strlen (text) > ERROR_MESSAGE_MAX)
    message = g_utf8_make_valid (text, ERROR_MESSAGE_MAX);
  else
    message = g_strdup (text);
  if (g_str_equal (code, "invalid") || g_str_equal (code, "executable_not_found") ||
      g_str_equal (code, "unknown_user") || g_str_equal (code, "bad_cwd"))
    return g_error_new_literal (BOX_ERROR, BOX_ERROR_INVALID, message);
  if (g_str_equal (code, "permission_denied"))
    return g_error_new_literal (BOX_ERROR, BOX_ERROR_PERMISSION_DENIED, message);
  if (g_str_equal (code, "not_found"))
    return g_error_new_literal (BOX_ERROR, BOX_ERROR_NOT_FOUND, message);
  /* the file, session and port operations' codes that are the spec's */
  if (g_str_equal (code, "already_exists"))
    return g_error_new_literal (BOX_ERROR, BOX_ERROR_ALREADY_EXISTS, message);
  if (g_str_equal (code, "conflict"))
    return g_error_new_literal (BOX_ERROR, BOX_ERROR_CONFLICT, message);
  if (g_str_equal (code, "port_closed"))
    return g_error_new_literal (BOX_ERROR, BOX_ERROR_PORT_CLOSED, message);
  /* an internal error is logged: escaped and short */
  logged_code = box_agent_text_for_log (code, 64);
  logged_message = box_agent_text_for_log (message, 256);
  return g_error_new (BOX_ERROR, BOX_ERROR_INTERNAL, "agent: %s: %s", logged_code, logged_message);
}

static JsonObject *
request_new (JsonObject *args, gint64 id, const char *op)
{
  JsonObject *req = json_object_new ();

  if (args != NULL) {
    JsonObjectIter iter;
    const char *name;
    JsonNode *node;

    json_object_iter_init (&iter, args);
    while (json_object_iter_next (&iter, &name, &node))
      json_object_set_member (req, name, json_node_copy (node));
  }
  json_object_set_int_member (req, "id", id);
  json_object_set_string_member (req, "op", op);
  return req;
}

void
box_agent_client_hello_reply (BoxAgentClient *self, JsonObject *msg)
{
  gint64 id = 0, version = 0, window = 0;
  const char *nonce = box_agent_json_get_string (msg, "nonce");
  GTask *task;

  /* anything else is left over from before: ready, stale replies */
  if (!box_agent_json_get_int (msg, "id", &id) || id != self->hello_id ||
      nonce == NULL || g_strcmp0 (nonce, self->nonce) != 0)
    return;
  self->synced = TRUE;
  box_agent_client_stop_hello (self);
  task = g_steal_pointer (&self->connect_task);
  box_agent_destroy_source (&self->connect_cancel);
  if (!box_agent_json_get_bool (msg, "ok", FALSE) ||
      !box_agent_json_get_int (msg, "version", &version) || version != BOX_AGENT_PROTOCOL_VERSION) {
    g_autoptr(GError) error = NULL;

    if (!box_agent_json_get_bool (msg, "ok", FALSE))
      error = box_agent_error_from_reply (msg);
    else
      error = g_error_new (BOX_ERROR, BOX_ERROR_INTERNAL,
                           "the agent speaks protocol version %" G_GINT64_FORMAT ", not %d",
                           version, BOX_AGENT_PROTOCOL_VERSION);
    if (task != NULL)
      g_task_return_error (task, g_steal_pointer (&error));
    g_clear_object (&task);
    box_agent_client_lost (self, "hello refused");
    return;
  }
  g_clear_pointer (&self->info, json_object_unref);
  self->info = json_object_ref (msg);
  json_object_remove_member (self->info, "id");
  json_object_remove_member (self->info, "ok");
  json_object_remove_member (self->info, "nonce");
  /* the window is the host's (sent in our hello), whatever the reply says:
   * an agent that sends beyond it has its channel closed */
  if (box_agent_json_get_int (msg, "window", &window) && window != (gint64) self->window)
    box_agent_client_note (self, "the agent asked for a window of %" G_GINT64_FORMAT
                           " bytes; it gets %u", window, self->window);
  json_object_set_int_member (self->info, "window", self->window);
  /* requests made while connecting go now, so that no later hello could
   * have closed what they open */
  while (!g_queue_is_empty (&self->held_requests))
    box_agent_client_send_frame_take (self, g_queue_pop_head (&self->held_requests), TRUE);
  if (task != NULL) {
    g_task_return_boolean (task, TRUE);
    g_object_unref (task);
  }
}

void
box_agent_client_complete_call (BoxAgentClient *self, Call *call, JsonObject *reply)
{
  gboolean ok = box_agent_json_get_bool (reply, "ok", FALSE);

  if (call->channel != NULL && ok) {
    box_agent_channel_set_reply (call->channel, reply);
    if (call->task != NULL)
      g_task_return_pointer (call->task, g_object_ref (call->channel), g_object_unref);
    else /* the open was cancelled: undo it */
      box_agent_channel_close (call->channel);
  } else if (call->channel != NULL) {
    box_agent_client_forget_channel (self, call->channel);
    if (call->task != NULL)
      g_task_return_error (call->task, box_agent_error_from_reply (reply));
  } else if (call->task != NULL && ok) {
    g_task_return_pointer (call->task, json_object_ref (reply), (GDestroyNotify) json_object_unref);
  } else if (call->task != NULL) {
    g_task_return_error (call->task, box_agent_error_from_reply (reply));
  }
  box_agent_call_free (call);
}

/* hello with a fresh nonce; only the reply to the newest one counts.  With
 * @flush, a megabyte of zeros goes first: the agent may be waiting for the
 * rest of a frame cut off when the previous host connection ended (it would
 * take our hello as that frame's payload); the zeros complete any such frame
 * and are then skipped byte by byte. */
void
box_agent_client_send_hello (BoxAgentClient *self, gboolean flush)
{
  g_autoptr(JsonObject) hello = NULL;

  if (flush) {
    gsize len = BOX_AGENT_HEADER_SIZE + BOX_AGENT_MAX_PAYLOAD;

    box_agent_client_send_frame_take (self, g_bytes_new_take (g_malloc0 (len), len), TRUE);
  }
  g_free (self->nonce);
  self->nonce = g_uuid_string_random ();
  self->hello_id = self->next_id++;
  hello = request_new (NULL, self->hello_id, "hello");
  json_object_set_int_member (hello, "version", BOX_AGENT_PROTOCOL_VERSION);
  json_object_set_int_member (hello, "window", self->window);
  json_object_set_string_member (hello, "nonce", self->nonce);
  box_agent_client_send_frame_take (self, box_agent_frame_build_ctrl (0, hello), TRUE);
}

static gboolean hello_retry (gpointer data);

static void
schedule_hello_retry (BoxAgentClient *self, guint ms)
{
  box_agent_destroy_source (&self->hello_timer);
  self->hello_retry_ms = ms;
  self->hello_timer = g_timeout_source_new (ms);
  g_source_set_callback (self->hello_timer, hello_retry, self, NULL);
  g_source_attach (self->hello_timer, self->context);
}

static gboolean
hello_retry (gpointer data)
{
  BoxAgentClient *self = data;

  /* not while the previous attempt is still being written (an agent that
   * does not read yet): at most one flush is ever queued */
  if (self->queued_bytes == 0) {
    g_debug ("no answer to hello from the agent: sending it again");
    box_agent_client_send_hello (self, TRUE);
  }
  /* (a booting agent announces itself with ready, which is answered at once) */
  schedule_hello_retry (self, MIN (self->hello_retry_ms * 2, HELLO_RETRY_MAX_MS));
  return G_SOURCE_REMOVE;
}

void
box_agent_client_stop_hello (BoxAgentClient *self)
{
  box_agent_destroy_source (&self->hello_timer);
}

static gboolean
connect_cancelled (GCancellable *cancellable, gpointer data)
{
  BoxAgentClient *self = data;
  GTask *task = g_steal_pointer (&self->connect_task);

  box_agent_destroy_source (&self->connect_cancel);
  box_agent_client_stop_hello (self);
  if (task != NULL) {
    g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_CANCELLED, "Operation was cancelled");
    g_object_unref (task);
  }
  return G_SOURCE_REMOVE;
}

void
box_agent_client_connect_async (BoxAgentClient *self, GCancellable *cancellable,
                                GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_connect_async);
  if (self->closed) {
    g_task_return_error (task, box_agent_gone_error ());
    return;
  }
  if (self->connect_task != NULL) {
    g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_PENDING, "already connecting");
    return;
  }
  if (self->synced) {
    g_task_return_boolean (task, TRUE);
    return;
  }
  if (!self->started) {
    self->started = TRUE;
    box_agent_client_start_read (self);
  }
  self->connect_task = g_steal_pointer (&task);
  self->connect_cancel = box_agent_watch_cancellable (self->context, cancellable, connect_cancelled, self);
  box_agent_client_send_hello (self, FALSE);
  schedule_hello_retry (self, HELLO_RETRY_MS);
}

gboolean
box_agent_client_connect_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

static gboolean
call_cancelled (GCancellable *cancellable, gpointer data)
{
  Call *call = data;
  GTask *task = g_steal_pointer (&call->task);

  /* the call stays in the table until its reply (an open is undone then) */
  box_agent_destroy_source (&call->cancel_source);
  g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_CANCELLED, "Operation was cancelled");
  g_object_unref (task);
  return G_SOURCE_REMOVE;
}

/* The agent never answered: the call fails (an open's channel is closed;
 * a late reply is ignored). */
static gboolean
call_timed_out (gpointer data)
{
  Call *call = data;
  BoxAgentClient *self = call->self;
  g_autoptr(BoxAgentClient) keep G_GNUC_UNUSED = g_object_ref (self);
  GTask *task;

  box_agent_destroy_source (&call->timeout_source);
  box_agent_client_note (self, "no reply to request %" G_GINT64_FORMAT " within %u ms",
                         call->id, self->call_timeout_ms);
  g_hash_table_steal (self->calls, &call->id);
  task = g_steal_pointer (&call->task);
  if (call->channel != NULL) {
    box_agent_channel_close (call->channel);
    box_agent_client_forget_channel (self, call->channel);
  }
  if (task != NULL) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                             "the sandbox's agent did not answer within %u s",
                             self->call_timeout_ms / 1000);
    g_object_unref (task);
  }
  box_agent_call_free (call);
  return G_SOURCE_REMOVE;
}

static guint32
allocate_channel_id (BoxAgentClient *self)
{
  while (self->next_chan == 0 || self->next_chan >= BOX_AGENT_FIRST_AGENT_CHANNEL ||
         g_hash_table_contains (self->channels, GUINT_TO_POINTER (self->next_chan)))
    self->next_chan = self->next_chan == 0 || self->next_chan >= BOX_AGENT_FIRST_AGENT_CHANNEL - 1 ? 1 : self->next_chan + 1;
  return self->next_chan++;
}

/* A request goes ahead of the channels' frames (urgent), except an
 * @ordered one, which the agent reads after everything queued before it. */
static void
start_call (BoxAgentClient *self, GTask *task, const char *op, JsonObject *args, gboolean open,
            gboolean ordered)
{
  g_autoptr(JsonObject) req = NULL;
  Call *call;

  if (self->closed) {
    g_task_return_error (task, box_agent_gone_error ());
    return;
  }
  if (!self->started) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INTERNAL,
                             "the agent client is not connected");
    return;
  }
  /* an open that the reply wins against a cancellation is delivered, so
   * that a channel the agent opened always has an owner */
  if (open)
    g_task_set_check_cancellable (task, FALSE);
  call = g_new0 (Call, 1);
  call->self = self;
  call->id = self->next_id++;
  call->task = g_object_ref (task);
  req = request_new (args, call->id, op);
  if (open) {
    guint32 id = allocate_channel_id (self);

    /* registered now: its first frames may follow the reply at once */
    call->channel = box_agent_channel_new (self, id, self->window);
    g_hash_table_insert (self->channels, GUINT_TO_POINTER (id), g_object_ref (call->channel));
    json_object_set_int_member (req, "chan", id);
  }
  g_hash_table_insert (self->calls, &call->id, call);
  /* listings may answer with a whole frame; everything else is small */
  call->large = g_str_equal (op, "sessions") || g_str_equal (op, "ports") ||
                g_str_equal (op, "service-list");
  if (call->large)
    self->n_large_calls++;
  call->timeout_source = g_timeout_source_new (self->call_timeout_ms);
  g_source_set_callback (call->timeout_source, call_timed_out, call, NULL);
  g_source_attach (call->timeout_source, self->context);
  call->cancel_source = box_agent_watch_cancellable (self->context, g_task_get_cancellable (task),
                                                     call_cancelled, call);
  if (self->synced)
    box_agent_client_send_frame_take (self, box_agent_frame_build_ctrl (0, req), !ordered);
  else
    g_queue_push_tail (&self->held_requests, box_agent_frame_build_ctrl (0, req));
}

void
box_agent_client_call_async (BoxAgentClient *self, const char *op, JsonObject *args,
                             GCancellable *cancellable, GAsyncReadyCallback callback,
                             gpointer user_data)
{
  g_autoptr(GTask) task = NULL;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  g_return_if_fail (op != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_call_async);
  start_call (self, task, op, args, FALSE, FALSE);
}

JsonObject *
box_agent_client_call_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_agent_client_barrier_async (BoxAgentClient *self, GCancellable *cancellable,
                                GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_barrier_async);
  start_call (self, task, "ping", NULL, FALSE, TRUE);
}

gboolean
box_agent_client_barrier_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  g_autoptr(JsonObject) reply = NULL;

  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  reply = g_task_propagate_pointer (G_TASK (result), error);
  return reply != NULL;
}

void
box_agent_client_open_channel_async (BoxAgentClient *self, const char *op, JsonObject *args,
                                     GCancellable *cancellable, GAsyncReadyCallback callback,
                                     gpointer user_data)
{
  g_autoptr(GTask) task = NULL;

  g_return_if_fail (BOX_IS_AGENT_CLIENT (self));
  g_return_if_fail (op != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_agent_client_open_channel_async);
  start_call (self, task, op, args, TRUE, FALSE);
}

BoxAgentChannel *
box_agent_client_open_channel_finish (BoxAgentClient *self, GAsyncResult *result, GError **error)
{
  BoxAgentChannel *channel;

  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  channel = g_task_propagate_pointer (G_TASK (result), error);
  if (channel != NULL)
    box_agent_channel_release (channel);
  return channel;
}
