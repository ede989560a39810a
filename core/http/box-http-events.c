/* box-http-events.c: GET /v1/events, the project's events as Server-Sent
 * Events.
 *
 * The answer is chunked and never completes on its own: the headers and a
 * ": connected" comment go out at once, then one "event:"/"data:" block per
 * engine event of the key's project (narrowed to one sandbox by
 * ?sandbox=), and a ": keep-alive" comment every 15 s, which is also how a
 * client that went away is noticed.  The stream ends when the client goes
 * (the message's "finished") or at box_http_server_shutdown().
 */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-http-util.h"

#define KEEPALIVE_INTERVAL_S 15

typedef struct {
  BoxHttpRequest *req;          /* holds the message */
  char           *project;
  char           *sandbox_id;   /* NULL: every sandbox of the project */
  gulong          event_id;
  gulong          finished_id;
  gulong          disconnected_id;
  guint           keepalive_id;
} BoxHttpEventStream;

static void
stream_free (BoxHttpEventStream *stream)
{
  box_http_server_remove_stream (stream->req->server, stream);
  g_clear_signal_handler (&stream->event_id, stream->req->engine);
  g_clear_signal_handler (&stream->finished_id, stream->req->msg);
  g_clear_signal_handler (&stream->disconnected_id, stream->req->msg);
  g_clear_handle_id (&stream->keepalive_id, g_source_remove);
  g_free (stream->project);
  g_free (stream->sandbox_id);
  box_http_request_unref (stream->req);
  g_free (stream);
}

static void
stream_write (BoxHttpEventStream *stream, const char *text)
{
  SoupMessageBody *body = soup_server_message_get_response_body (stream->req->msg);

  soup_message_body_append (body, SOUP_MEMORY_COPY, text, strlen (text));
  /* the message pauses itself whenever it has written all it has */
  soup_server_message_unpause (stream->req->msg);
}

static void
on_engine_event (BoxEngine *engine, BoxEvent *event, gpointer user_data)
{
  BoxHttpEventStream *stream = user_data;
  g_autoptr(JsonNode) node = NULL;
  g_autofree char *data = NULL;
  g_autofree char *text = NULL;

  if (event == NULL || g_strcmp0 (event->project, stream->project) != 0)
    return;
  if (stream->sandbox_id != NULL && g_strcmp0 (event->sandbox, stream->sandbox_id) != 0)
    return;
  node = box_event_to_api_json (event);
  data = json_to_string (node, FALSE);   /* one line: newlines in strings are escaped */
  text = g_strdup_printf ("event: %s\ndata: %s\n\n", event->type, data);
  stream_write (stream, text);
}

static gboolean
on_keepalive (gpointer user_data)
{
  BoxHttpEventStream *stream = user_data;

  stream_write (stream, ": keep-alive\n\n");
  return G_SOURCE_CONTINUE;
}

/* The client went away, or the answer was completed ("finished" or
 * "disconnected", whichever comes first). */
static void
on_finished (SoupServerMessage *msg, gpointer user_data)
{
  stream_free (user_data);
}

/* box_http_server_shutdown(): end the answer cleanly and let go. */
static void
stream_close (gpointer user_data)
{
  BoxHttpEventStream *stream = user_data;

  soup_message_body_complete (soup_server_message_get_response_body (stream->req->msg));
  soup_server_message_unpause (stream->req->msg);
  stream_free (stream);
}

void
box_http_events (BoxHttpRequest *req)
{
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (req->msg);
  SoupMessageBody *body = soup_server_message_get_response_body (req->msg);
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

  soup_server_message_set_status (req->msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_replace (headers, "Content-Type", "text/event-stream");
  soup_message_headers_replace (headers, "Cache-Control", "no-cache");
  soup_message_headers_set_encoding (headers, SOUP_ENCODING_CHUNKED);
  /* written chunks are dropped, not kept for the life of the stream */
  soup_message_body_set_accumulate (body, FALSE);
  /* a HEAD gets the headers only */
  if (g_strcmp0 (soup_server_message_get_method (req->msg), "HEAD") == 0)
    return;
  soup_message_body_append (body, SOUP_MEMORY_STATIC, ": connected\n\n",
                            strlen (": connected\n\n"));

  stream = g_new0 (BoxHttpEventStream, 1);
  stream->req = box_http_request_ref (req);
  stream->project = g_strdup (box_http_request_project (req));
  stream->sandbox_id = g_steal_pointer (&sandbox_id);
  stream->event_id = g_signal_connect (req->engine, "event", G_CALLBACK (on_engine_event), stream);
  stream->finished_id = g_signal_connect (req->msg, "finished", G_CALLBACK (on_finished), stream);
  stream->disconnected_id = g_signal_connect (req->msg, "disconnected",
                                              G_CALLBACK (on_finished), stream);
  stream->keepalive_id = g_timeout_add_seconds (KEEPALIVE_INTERVAL_S, on_keepalive, stream);
  box_http_server_add_stream (req->server, stream, stream_close);
}
