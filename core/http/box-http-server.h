/* box-http-server.h: the HTTP API (libsoup 3).
 *
 * Routes /v1/... and /.well-known/... to the engine.  Authentication runs
 * first for every /v1 request: the admin token for /v1/projects..., a
 * project key for everything else.  Handlers never block: a call that
 * waits for the engine pauses the message and unpauses it from the
 * callback.  Errors are produced in one place (box_http_reply_error()).
 */
#pragma once

#include <libsoup/soup.h>

#include "box-engine.h"

G_BEGIN_DECLS

#define BOX_TYPE_HTTP_SERVER (box_http_server_get_type ())
G_DECLARE_FINAL_TYPE (BoxHttpServer, box_http_server, BOX, HTTP_SERVER, GObject)

BoxHttpServer *box_http_server_new      (BoxEngine *engine);
/* @listen is "host:port" (port 0 picks one); see box_http_server_get_port(). */
gboolean       box_http_server_listen   (BoxHttpServer *self, const char *listen, GError **error);
guint          box_http_server_get_port (BoxHttpServer *self);
SoupServer    *box_http_server_get_soup (BoxHttpServer *self);
/* The rate and stream limits every request passes (box-http-limits.h). */
struct _BoxHttpLimits *box_http_server_get_limits (BoxHttpServer *self);
/* Closes listeners and every open stream. */
void           box_http_server_shutdown (BoxHttpServer *self);

G_END_DECLS
