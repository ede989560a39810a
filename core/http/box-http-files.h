/* box-http-files.h: between the file routes (box-http-files.c: query
 * rules, Stat, one-shot operations), their streams (box-http-files-stream.c:
 * downloads and uploads) and the watch (box-http-watch.c).  Not installed.
 *
 * Query parameters of the file routes: those the route names, each at
 * most once; any other is 400 invalid ("unknown query parameter x"), so a
 * misspelt recursive= or mkdir= does not silently do something else.
 * Booleans are true or false.  Paths are absolute. */
#pragma once

#include "box-http-util.h"

G_BEGIN_DECLS

/* A required absolute path from the query. */
gboolean    box_http_files_query_path  (BoxHttpRequest *req, const char *name, const char **out,
                                        GError **error);
/* {path, user?} from the query, for an agent request */
JsonObject *box_http_files_args_new    (BoxHttpRequest *req, const char *path);
/* The agent's Stat, checked and with only the API's members. */
JsonNode   *box_http_files_stat_node   (JsonObject *stat, GError **error);

/* Streams (box-http-files-stream.c). */
/* GET: @op's channel output becomes the answer (200, @content_type,
 * chunked), credit returned as libsoup writes it; @list: the output is
 * fs-list lines, answered as {entries: [Stat]}. */
void        box_http_files_download    (BoxHttpRequest *req, const char *op, JsonObject *args,
                                        const char *content_type, gboolean list);
/* The early stage of an upload: opens @op's channel and feeds it the body
 * as it arrives; @stat_reply: answer the done event's Stat (200), else 204. */
void        box_http_files_upload_start (BoxHttpRequest *req, const char *op, JsonObject *args,
                                         gboolean stat_reply);
/* The handler stage of an upload (the body was read): answer now or when
 * the agent finished. */
void        box_http_files_upload_finish (BoxHttpRequest *req);

G_END_DECLS
