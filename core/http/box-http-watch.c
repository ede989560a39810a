/* box-http-watch.c: GET /v1/sandboxes/{sandbox}/fs/watch?path=&recursive=&user=
 * (spec "Files": Watch), a WebSocket of change frames.
 *
 * The engine's BoxFileWatch (inotify in the guest) tells each change;
 * each becomes a text frame {type, path}, type create, write, remove,
 * rename or chmod.  When the guest kernel's queue overflowed, events
 * are lost: the client then gets one frame
 * {type: "overflow", path: <the watched path>} and should read the tree
 * again.  A client that reads so slowly that a frame would take what waits
 * for it past the writers' cap (box-http-sse.h:
 * box_http_stream_unwritten_max()) is dropped: the socket closes with 1008
 * and the reason "slow_reader" (the close frame goes ahead of the backlog;
 * libsoup ends the connection if the client does not answer it), so boxd
 * keeps at most the cap for it.
 *
 * An open watch holds the sandbox awake (a hold for its lifetime).  It
 * closes with 1011 when the sandbox pauses, stops, is deleted,
 * checkpointed with memory, restored or lost; with 1000 when the watched
 * path itself is removed or moved away (after that frame).
 */
#include "config.h"

#include <string.h>

#include "box-http-files.h"
#include "box-http-sse.h"
#include "box-http-ws.h"

typedef struct {
  gint             ref_count;
  BoxHttpRequest  *req;
  BoxEngine       *engine;
  BoxFileRequest  *request;
  char            *sandbox_id;   /* held while set */
  BoxFileWatch    *watch;
  BoxHttpWs       *ws;
  gboolean         lost_events;  /* the guest's queue overflowed: a frame is owed */
  gboolean         path_gone;    /* the watched path was removed or moved */
  gboolean         over;
  gsize            unwritten_max;
} Watch;

static Watch *
watch_ref (Watch *w)
{
  w->ref_count++;
  return w;
}

static void
watch_unref (Watch *w)
{
  if (--w->ref_count > 0)
    return;
  g_assert (w->sandbox_id == NULL);
  g_clear_object (&w->watch);
  g_clear_object (&w->ws);
  g_clear_pointer (&w->req, box_http_request_unref);
  g_object_unref (w->engine);
  box_file_request_free (w->request);
  g_free (w);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Watch, watch_unref)

static void
watch_over (Watch *w)
{
  g_autoptr(Watch) keep = watch_ref (w);

  if (w->over)
    return;
  w->over = TRUE;
  if (w->watch != NULL) {
    g_signal_handlers_disconnect_by_data (w->watch, w);
    box_file_watch_close (w->watch);
  }
  if (w->ws != NULL) {
    g_signal_handlers_disconnect_by_data (w->ws, w);
    box_http_ws_close (w->ws, SOUP_WEBSOCKET_CLOSE_SERVER_ERROR, "the watch ended");
  }
  if (w->sandbox_id != NULL) {
    box_engine_release (w->engine, w->sandbox_id);
    g_clear_pointer (&w->sandbox_id, g_free);
  }
  watch_unref (w);   /* the watch's own reference */
}

static void
drop_reader (Watch *w)
{
  g_message ("fs/watch of %s in %s: the reader is more than %" G_GSIZE_FORMAT
             " bytes behind; dropped", w->request->path, w->sandbox_id, w->unwritten_max);
  g_signal_handlers_disconnect_by_data (w->ws, w);
  box_http_ws_close (w->ws, BOX_HTTP_WS_CLOSE_SLOW_READER, "slow_reader");
  watch_over (w);
}

/* Sends one frame; or, when it would take what waits for the client past
 * the cap, drops the client (FALSE). */
static gboolean
send_frame (Watch *w, const char *type, const char *path)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) node = NULL;
  g_autofree char *text = NULL;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, type);
  json_builder_set_member_name (builder, "path");
  json_builder_add_string_value (builder, path);
  json_builder_end_object (builder);
  node = json_builder_get_root (builder);
  text = json_to_string (node, FALSE);
  if (box_http_ws_get_unwritten (w->ws) + strlen (text) > w->unwritten_max) {
    drop_reader (w);
    return FALSE;
  }
  box_http_ws_send_text (w->ws, text);
  return TRUE;
}

static const char *
change_name (BoxFileChange change)
{
  switch (change) {
  case BOX_FILE_CHANGE_CREATE: return "create";
  case BOX_FILE_CHANGE_WRITE:  return "write";
  case BOX_FILE_CHANGE_REMOVE: return "remove";
  case BOX_FILE_CHANGE_RENAME: return "rename";
  case BOX_FILE_CHANGE_CHMOD:  return "chmod";
  default:                     g_assert_not_reached ();
  }
}

static void
on_changed (BoxFileWatch *watch, gint change, const char *path, gpointer user_data)
{
  Watch *w = user_data;

  if (g_str_equal (path, w->request->path) &&
      (change == BOX_FILE_CHANGE_REMOVE || change == BOX_FILE_CHANGE_RENAME))
    w->path_gone = TRUE;
  if (w->lost_events) {
    w->lost_events = FALSE;
    if (!send_frame (w, "overflow", w->request->path))
      return;
  }
  send_frame (w, change_name ((BoxFileChange) change), path);
}

static void
on_overflow (BoxFileWatch *watch, gpointer user_data)
{
  Watch *w = user_data;

  w->lost_events = TRUE;
}

static void
on_failed (BoxFileWatch *watch, GError *error, gpointer user_data)
{
  Watch *w = user_data;

  g_debug ("the watch of %s in %s: %s", w->request->path, w->sandbox_id, error->message);
}

static void
on_watch_closed (BoxFileWatch *watch, gpointer user_data)
{
  Watch *w = user_data;

  if (w->lost_events && !send_frame (w, "overflow", w->request->path))
    return;
  g_signal_handlers_disconnect_by_data (w->ws, w);
  if (w->path_gone)
    box_http_ws_close (w->ws, SOUP_WEBSOCKET_CLOSE_NORMAL, "the watched path is gone");
  else
    box_http_ws_close (w->ws, SOUP_WEBSOCKET_CLOSE_SERVER_ERROR, "the watch ended in the sandbox");
  watch_over (w);
}

static void
on_ws_closed (BoxHttpWs *ws, gpointer user_data)
{
  watch_over (user_data);
}

static void
watch_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(Watch) w = user_data;
  g_autoptr(GError) error = NULL;

  w->watch = box_engine_fs_watch_finish (BOX_ENGINE (source), result, &error);
  if (w->watch == NULL) {
    box_http_reply_error (w->req->msg, error);
    box_http_request_resume (w->req);
    watch_over (w);
    return;
  }
  box_http_stream_limit_sndbuf (w->req);
  w->ws = box_http_ws_new (w->req);
  g_clear_pointer (&w->req, box_http_request_unref);
  if (!box_http_ws_is_open (w->ws)) {
    watch_over (w);
    return;
  }
  box_http_ws_end_on_interrupt (w->ws, w->engine, w->sandbox_id);
  g_signal_connect (w->ws, "closed", G_CALLBACK (on_ws_closed), w);
  g_signal_connect (w->watch, "changed", G_CALLBACK (on_changed), w);
  g_signal_connect (w->watch, "overflow", G_CALLBACK (on_overflow), w);
  g_signal_connect (w->watch, "failed", G_CALLBACK (on_failed), w);
  g_signal_connect (w->watch, "closed", G_CALLBACK (on_watch_closed), w);
}

static void
watch_held (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(Watch) w = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = box_engine_hold_finish (BOX_ENGINE (source), result, &error);

  if (sandbox == NULL) {
    box_http_reply_error (w->req->msg, error);
    box_http_request_resume (w->req);
    watch_over (w);
    return;
  }
  w->sandbox_id = g_strdup (sandbox->id);
  if (w->req->finished) {
    box_http_request_resume (w->req);
    watch_over (w);
    return;
  }
  box_engine_fs_watch_async (w->engine, w->sandbox_id, w->request, NULL, watch_opened,
                             watch_ref (w));
}

void
box_http_fs_watch (BoxHttpRequest *req)
{
  static const char *const allowed[] = { "path", "user", "recursive", NULL };
  g_autoptr(GError) error = NULL;
  const char *path = NULL;
  gboolean recursive = FALSE;
  Watch *w;

  if (!box_http_ws_check_upgrade (req, &error) ||
      !box_http_request_check_query (req, allowed, NULL, &error) ||
      !box_http_files_query_path (req, "path", &path, &error) ||
      !box_http_request_query_bool (req, "recursive", FALSE, &recursive, &error)) {
    box_http_reply_error (req->msg, error);
    return;
  }
  w = g_new0 (Watch, 1);
  w->ref_count = 1;   /* the watch's own, until watch_over() */
  w->engine = g_object_ref (req->engine);
  w->request = box_http_files_request_new (req, BOX_FILE_OP_WATCH, path);
  w->request->recursive = recursive;
  w->req = box_http_request_pause (req);
  w->unwritten_max = box_http_stream_unwritten_max (req);
  box_engine_hold_async (req->engine, box_http_request_project (req),
                         box_http_request_param (req, 0), NULL, watch_held, watch_ref (w));
}
