/* box-http-sse.c: a Server-Sent Events answer with a cap on its unwritten
 * bytes; see box-http-sse.h. */
#include "config.h"

#include <string.h>
#include <sys/socket.h>

#include "box-http-sse.h"

/* The kernel's send buffer of an event stream's socket (SSE, fs/watch).  Linux grows a TCP
 * socket's up to net.ipv4.tcp_wmem's maximum (4 MiB) for a reader that
 * does not read: host memory too, and it would hide a slow reader from
 * the cap for megabytes.  Events need little (the kernel doubles it). */
#define STREAM_SNDBUF (64 * 1024)

struct _BoxHttpSse {
  BoxHttpRequest     *req;
  BoxHttpSseOverFunc  over;
  gpointer            user_data;
  gsize               unwritten;   /* queued, not yet written to the socket */
  gsize               max;
  gboolean            ended;       /* completed (by the owner, the cap or shutdown) */
  gboolean            dropped;
  guint               keepalive_id;
  gulong              wrote_id;
  gulong              finished_id;
  gulong              disconnected_id;
};

gsize
box_http_stream_unwritten_max (BoxHttpRequest *req)
{
  return box_engine_get_config (req->engine)->http_stream_unwritten_max;
}

void
box_http_stream_limit_sndbuf (BoxHttpRequest *req)
{
  g_autoptr(GError) error = NULL;
  GSocket *socket = soup_server_message_get_socket (req->msg);

  if (socket != NULL && !g_socket_set_option (socket, SOL_SOCKET, SO_SNDBUF, STREAM_SNDBUF, &error))
    g_debug ("event stream: SO_SNDBUF: %s", error->message);
}

static void
sse_over (BoxHttpSse *self)
{
  BoxHttpSseOverFunc over = self->over;
  gpointer user_data = self->user_data;

  box_http_server_remove_stream (self->req->server, self);
  g_clear_handle_id (&self->keepalive_id, g_source_remove);
  g_clear_signal_handler (&self->wrote_id, self->req->msg);
  g_clear_signal_handler (&self->finished_id, self->req->msg);
  g_clear_signal_handler (&self->disconnected_id, self->req->msg);
  box_http_request_unref (self->req);
  g_free (self);
  over (user_data);
}

static void
append (BoxHttpSse *self, const char *text, gsize len)
{
  soup_message_body_append (soup_server_message_get_response_body (self->req->msg),
                            SOUP_MEMORY_COPY, text, len);
  self->unwritten += len;
  /* the message pauses itself whenever it has written all it has */
  soup_server_message_unpause (self->req->msg);
}

static void
complete (BoxHttpSse *self)
{
  if (self->ended)
    return;
  self->ended = TRUE;
  g_clear_handle_id (&self->keepalive_id, g_source_remove);
  soup_message_body_complete (soup_server_message_get_response_body (self->req->msg));
  soup_server_message_unpause (self->req->msg);
}

/* Queues @text, or drops the reader when it would be more than the cap
 * behind. */
static void
write_text (BoxHttpSse *self, const char *text)
{
  gsize len = strlen (text);
  g_autofree char *last = NULL;

  if (self->ended)
    return;
  if (self->unwritten + len <= self->max) {
    append (self, text, len);
    return;
  }
  g_message ("event stream %s: the reader is more than %" G_GSIZE_FORMAT
             " bytes behind; dropped", self->req->route->pattern, self->max);
  last = g_strdup_printf ("event: dropped\ndata: {\"reason\":\"slow_reader\","
                          "\"unwritten_max\":%" G_GSIZE_FORMAT "}\n\n", self->max);
  append (self, last, strlen (last));
  self->dropped = TRUE;
  complete (self);
}

void
box_http_sse_send (BoxHttpSse *self, const char *event, const char *data)
{
  g_autofree char *text = NULL;

  g_return_if_fail (self != NULL);
  text = g_strdup_printf ("event: %s\ndata: %s\n\n", event, data);
  write_text (self, text);
}

void
box_http_sse_end (BoxHttpSse *self)
{
  g_return_if_fail (self != NULL);
  complete (self);
}

gboolean
box_http_sse_is_dropped (BoxHttpSse *self)
{
  return self->dropped;
}

static gboolean
on_keepalive (gpointer user_data)
{
  write_text (user_data, ": keep-alive\n\n");
  return G_SOURCE_CONTINUE;
}

static void
on_wrote_body_data (SoupServerMessage *msg, guint chunk_size, gpointer user_data)
{
  BoxHttpSse *self = user_data;

  self->unwritten -= MIN (self->unwritten, (gsize) chunk_size);
}

/* The answer was written to its end, or the client went away ("finished"
 * or "disconnected", whichever comes first). */
static void
on_finished (SoupServerMessage *msg, gpointer user_data)
{
  sse_over (user_data);
}

/* box_http_server_shutdown(): end the answer cleanly and let go. */
static void
on_shutdown (gpointer stream)
{
  BoxHttpSse *self = stream;

  complete (self);
  sse_over (self);
}

BoxHttpSse *
box_http_sse_start (BoxHttpRequest *req, BoxHttpSseOverFunc over, gpointer user_data)
{
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (req->msg);
  SoupMessageBody *body = soup_server_message_get_response_body (req->msg);
  BoxHttpSse *self;

  g_return_val_if_fail (over != NULL, NULL);
  soup_server_message_set_status (req->msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_replace (headers, "Content-Type", "text/event-stream");
  soup_message_headers_replace (headers, "Cache-Control", "no-cache");
  soup_message_headers_set_encoding (headers, SOUP_ENCODING_CHUNKED);
  /* written chunks are dropped, not kept for the life of the stream */
  soup_message_body_set_accumulate (body, FALSE);
  /* a HEAD gets the headers only */
  if (g_strcmp0 (soup_server_message_get_method (req->msg), "HEAD") == 0)
    return NULL;

  self = g_new0 (BoxHttpSse, 1);
  self->req = box_http_request_ref (req);
  self->over = over;
  self->user_data = user_data;
  self->max = box_http_stream_unwritten_max (req);
  self->wrote_id = g_signal_connect (req->msg, "wrote-body-data",
                                     G_CALLBACK (on_wrote_body_data), self);
  self->finished_id = g_signal_connect (req->msg, "finished", G_CALLBACK (on_finished), self);
  self->disconnected_id = g_signal_connect (req->msg, "disconnected",
                                            G_CALLBACK (on_finished), self);
  self->keepalive_id = g_timeout_add_seconds (BOX_HTTP_SSE_KEEPALIVE_S, on_keepalive, self);
  box_http_stream_limit_sndbuf (req);
  box_http_server_add_stream (req->server, self, on_shutdown);
  /* goes out with the headers, once the handler is done */
  soup_message_body_append (body, SOUP_MEMORY_STATIC, ": connected\n\n",
                            strlen (": connected\n\n"));
  self->unwritten = strlen (": connected\n\n");
  return self;
}
