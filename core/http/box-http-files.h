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
/* A request of @op on @path (may be NULL), with user from the query. */
BoxFileRequest *box_http_files_request_new (BoxHttpRequest *req, BoxFileOp op, const char *path);
/* A Stat as the API shows it. */
JsonNode   *box_http_files_info_node   (const BoxFileInfo *info);

/* Streams (box-http-files-stream.c). */
/* GET: the output of @request (READ, TAR_GET, LIST) becomes the answer
 * (200, @content_type, chunked or with the file's length), read as libsoup
 * writes the answer; LIST is answered as {entries: [Stat]}. */
void        box_http_files_download    (BoxHttpRequest *req, const BoxFileRequest *request,
                                        const char *content_type);
/* GET services/{name}/logs: service @name's log (box_engine_service_logs_async())
 * as text/plain, chunked; @follow: the answer stays open for what the
 * service writes next, without holding the sandbox, and ends (cleanly)
 * when the sandbox pauses, stops or goes away; !@wake: a sandbox that is
 * not running is 409 conflict and is not woken. */
void        box_http_files_download_logs (BoxHttpRequest *req, const char *name, gint tail,
                                          gboolean follow, gboolean wake);
/* The early stage of an upload (WRITE, TAR_PUT): opens the upload and
 * writes it the body as it arrives; the answer is the written file's Stat
 * (WRITE: 200), else 204. */
void        box_http_files_upload_start (BoxHttpRequest *req, const BoxFileRequest *request);
/* The handler stage of an upload (the body was read): answer now or when
 * the agent finished. */
void        box_http_files_upload_finish (BoxHttpRequest *req);

G_END_DECLS
