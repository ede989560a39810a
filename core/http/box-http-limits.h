/* box-http-limits.h: what one key (or one sandbox, on the in-sandbox
 * socket) may ask of the HTTP server at once and over time.
 *
 * - A request rate: a token bucket per key (box-rate-limiter.h) with the
 *   configuration's rate_per_s and rate_burst; past it, 429 rate_limited
 *   with a Retry-After in whole seconds.  The admin token is not limited
 *   (one operator); the in-sandbox socket has a bucket per sandbox.
 * - Open streams: WebSockets (key_max_websockets), Server-Sent Event
 *   streams (key_max_sse) and exec WebSockets, new or attached
 *   (key_max_sessions, counted as WebSockets too); past one, 409 conflict
 *   naming the limit.  A stream's slot is taken when its request is
 *   routed, before the upgrade, and given back when the stream ends.
 *
 * Checked in the early stage, after authentication: a refused request
 * changes nothing and its body is not read.
 */
#pragma once

#include "box-engine.h"
#include "box-http-util.h"

G_BEGIN_DECLS

typedef struct _BoxHttpLimits BoxHttpLimits;

BoxHttpLimits *box_http_limits_new     (BoxEngine *engine);
/* Drops the caller's reference (slots hold one each). */
void           box_http_limits_free    (BoxHttpLimits *self);
/* Admits @req (routed and authenticated): takes a token and, for a
 * stream route, a stream slot kept in req->slot.  FALSE with the error to
 * answer; a rate refusal sets Retry-After on the response already. */
gboolean       box_http_limits_admit   (BoxHttpLimits *self, BoxHttpRequest *req, GError **error);
/* Gives a stream slot back. */
void           box_http_slot_release   (BoxHttpSlot *slot);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxHttpLimits, box_http_limits_free)

G_END_DECLS
