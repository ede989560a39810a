/* box-http-events.c: GET /v1/events, the project's events as Server-Sent
 * Events.
 *
 * The answer (box-http-sse.h) is chunked and never completes on its own:
 * one "event:"/"data:" block per engine event of the key's project
 * (narrowed to one sandbox by ?sandbox=).  The stream ends when the client
 * goes, at box_http_server_shutdown(), or when the client reads so slowly
 * that the writer's cap is reached (a last `dropped` event).
 */
#include "config.h"

#include "box-error.h"
#include "box-http-sse.h"

typedef struct {
  BoxEngine      *engine;
  BoxHttpSse     *sse;
  char           *project;
  char           *sandbox_id;   /* NULL: every sandbox of the project */
  gulong          event_id;
} BoxHttpEventStream;

/* The answer is over (BoxHttpSseOverFunc): the sse is gone already. */
static void
stream_over (gpointer user_data)
{
  BoxHttpEventStream *stream = user_data;

  g_clear_signal_handler (&stream->event_id, stream->engine);
  g_object_unref (stream->engine);
  g_free (stream->project);
  g_free (stream->sandbox_id);
  g_free (stream);
}

static void
on_engine_event (BoxEngine *engine, BoxEvent *event, gpointer user_data)
{
  BoxHttpEventStream *stream = user_data;
  g_autoptr(JsonNode) node = NULL;
  g_autofree char *data = NULL;

  if (event == NULL || g_strcmp0 (event->project, stream->project) != 0)
    return;
  if (stream->sandbox_id != NULL && g_strcmp0 (event->sandbox, stream->sandbox_id) != 0)
    return;
  node = box_event_to_api_json (event);
  data = json_to_string (node, FALSE);   /* one line: newlines in strings are escaped */
  box_http_sse_send (stream->sse, event->type, data);
  if (box_http_sse_is_dropped (stream->sse))
    /* nothing more is written: stop formatting events for it */
    g_clear_signal_handler (&stream->event_id, stream->engine);
}

void
box_http_events (BoxHttpRequest *req)
{
  const char *sandbox = box_http_request_query (req, "sandbox");
  BoxHttpEventStream *stream;
  g_autofree char *sandbox_id = NULL;

  if (sandbox != NULL && sandbox[0] != '\0') {
    g_autoptr(GError) error = NULL;
    g_autoptr(BoxSandbox) record = box_engine_get_sandbox (req->engine,
                                                           box_http_request_project (req),
                                                           sandbox, &error);
    if (record == NULL) {
      box_http_reply_error (req->msg, error);
      return;
    }
    sandbox_id = g_strdup (record->id);
  }

  stream = g_new0 (BoxHttpEventStream, 1);
  stream->sse = box_http_sse_start (req, stream_over, stream);
  if (stream->sse == NULL) {
    /* a HEAD: the headers only */
    g_free (stream);
    return;
  }
  stream->engine = g_object_ref (req->engine);
  stream->project = g_strdup (box_http_request_project (req));
  stream->sandbox_id = g_steal_pointer (&sandbox_id);
  stream->event_id = g_signal_connect (req->engine, "event", G_CALLBACK (on_engine_event), stream);
}
