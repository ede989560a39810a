/* box-http-sse.h: a Server-Sent Events answer (GET /v1/events,
 * ports/watch), and the one cap on what any streaming writer of the API
 * (these, and the WebSocket fs/watch) keeps for a reader that does not
 * keep up.
 *
 * box_http_sse_start() answers 200 text/event-stream, chunked, with a
 * ": connected" comment, and keeps the answer open: box_http_sse_send()
 * adds one "event:"/"data:" block, a ": keep-alive" comment goes out every
 * BOX_HTTP_SSE_KEEPALIVE_S (which is also how a client that went away is
 * noticed), and box_http_sse_end() completes the answer.
 *
 * The cap: the writer counts the bytes it queued and libsoup has not
 * written to the socket yet.  A send that would take them past
 * box_http_stream_unwritten_max() drops the reader instead: the event is
 * not queued, one last event
 *
 *   event: dropped
 *   data: {"reason": "slow_reader", "unwritten_max": <bytes>}
 *
 * follows what was queued, and the answer completes.  So boxd holds at most
 * the cap (and that last event) for each reader, however slow; the
 * socket's kernel send buffer is set small (64 KiB) for the same reason.
 *
 * The stream is over when the answer completed and was written, the
 * client went away, or at box_http_server_shutdown(): @over is then called
 * once (the writer's owner lets go of its state); the BoxHttpSse is freed
 * already then.
 */
#pragma once

#include "box-http-util.h"

G_BEGIN_DECLS

#define BOX_HTTP_SSE_KEEPALIVE_S 15

typedef struct _BoxHttpSse BoxHttpSse;
typedef void (*BoxHttpSseOverFunc) (gpointer user_data);

/* Bytes a streaming answer may keep queued for one reader ([boxd]
 * http_stream_unwritten_max, 1 MiB by default). */
gsize       box_http_stream_unwritten_max (BoxHttpRequest *req);
/* Sets the kernel's send buffer of @req's socket small (64 KiB), so that a
 * reader that does not read is seen by the cap instead of filling megabytes
 * of socket buffer. */
void        box_http_stream_limit_sndbuf  (BoxHttpRequest *req);

/* Starts the answer of @req (not paused, or paused and resumed by the
 * caller after).  A HEAD gets the headers only: NULL, and @over is never
 * called. */
BoxHttpSse *box_http_sse_start      (BoxHttpRequest *req, BoxHttpSseOverFunc over,
                                     gpointer user_data);
/* One event; @data is one line (JSON as json_to_string (node, FALSE)
 * writes it).  Nothing once the stream was dropped or ended. */
void        box_http_sse_send       (BoxHttpSse *self, const char *event, const char *data);
/* Completes the answer after what was queued. */
void        box_http_sse_end        (BoxHttpSse *self);
gboolean    box_http_sse_is_dropped (BoxHttpSse *self);

G_END_DECLS
