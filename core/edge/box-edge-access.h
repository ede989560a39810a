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

G_END_DECLS
