/* box-edge-http.h: the edge's optional plain-HTTP listener
 * (edge_http_listen, --edge-http-listen HOST:PORT).
 *
 * Every request is answered 308 Permanent Redirect to the https URL of the
 * same host, path and query (308, not 301, so that a POST stays a POST),
 * with the edge's https port in the Location when it is not 443; a Host
 * that is no host name (or IP literal) is 400.  The one exception is
 * /.well-known/acme-challenge/<token>: 200 with the key authorization from
 * the challenge store (box-edge-challenges.h), or 404.  The request body
 * is never read, and the connection is closed after each answer. */
#pragma once

#include <gio/gio.h>

#include "box-edge-challenges.h"

G_BEGIN_DECLS

#define BOX_EDGE_ACME_PREFIX "/.well-known/acme-challenge/"

#define BOX_TYPE_EDGE_HTTP (box_edge_http_get_type ())
G_DECLARE_FINAL_TYPE (BoxEdgeHttp, box_edge_http, BOX, EDGE_HTTP, GObject)

/* The Location for a request to @host (a Host header, maybe with :port)
 * of @path (starting with '/') and @query (NULL: none), the edge's https
 * listener being on @https_port; NULL when @host is no host. */
char        *box_edge_http_location (const char *host, const char *path, const char *query,
                                     guint https_port);

/* @header_timeout_s bounds a request head (0: no bound). */
BoxEdgeHttp *box_edge_http_new      (BoxEdgeChallenges *challenges, guint https_port,
                                     guint header_timeout_s);
gboolean     box_edge_http_listen   (BoxEdgeHttp *self, const char *address, GError **error);
guint        box_edge_http_get_port (BoxEdgeHttp *self);
void         box_edge_http_shutdown (BoxEdgeHttp *self);

G_END_DECLS
