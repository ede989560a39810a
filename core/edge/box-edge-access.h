/* box-edge-access.h: who may open a sandbox's URL (internal to
 * core/edge/): the project's key as a Bearer, the box_token cookie or the
 * ?box_token= parameter (doc/API.md "The edge").  Main thread only, like
 * the engine. */
#pragma once

#include <libsoup/soup.h>

#include "box-engine.h"

G_BEGIN_DECLS

/* Whether @credential (may be NULL) is a key of @project; *@read_only
 * (may be NULL) whether it is a read-only one. */
gboolean  box_edge_project_credential (BoxEngine *engine, const char *project,
                                       const char *credential, gboolean *read_only);
/* Whether @credential is a full key of @project: a read-only key opens no
 * URL (the app behind it may change state). */
gboolean  box_edge_project_key        (BoxEngine *engine, const char *project,
                                       const char *credential);
/* The box_token cookie's value in @headers (the last one), or NULL. */
char     *box_edge_cookie_token       (SoupMessageHeaders *headers);

/* Whether header @name of a message with @headers is hop-by-hop: one of
 * RFC 9110's, or one its Connection header names. */
gboolean  box_edge_hop_by_hop         (SoupMessageHeaders *headers, const char *name);

/* A request as it goes to the sandbox: the edge's client's request. */
typedef struct {
  const char         *method;
  const char         *path;
  const char         *query;            /* without box_token, or NULL */
  SoupMessageHeaders *headers;
  const char         *peer;             /* X-Forwarded-For */
  const char         *host;             /* X-Forwarded-Host */
  gboolean            strip_authorization;
  gboolean            upgrade;
  gboolean            close;            /* the server is to close after it */
} BoxEdgeUpstream;

/* @up's head: hop-by-hop headers, the key and box_token out, the forwarded
 * headers in, then Connection: Upgrade, Connection: close or nothing
 * (HTTP/1.1: the connection stays open). */
GString  *box_edge_upstream_head      (const BoxEdgeUpstream *up);

G_END_DECLS
