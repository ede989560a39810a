/* box-http-util.h: private helpers of the HTTP transport (not installed).
 *
 * A request goes through two stages.  The early stage (headers read, body
 * not yet) routes it, authenticates it and parses the query; a failure
 * answers at once and the body is then discarded unread into memory.  The
 * handler stage runs the route's handler with a BoxHttpRequest.  A handler
 * answers before it returns, or pauses the request with
 * box_http_request_pause() and answers from its callback, then calls
 * box_http_request_resume().
 *
 * Every error answer goes through box_http_reply_error().
 */
#pragma once

#include <libsoup/soup.h>

#include "box-engine.h"
#include "box-error.h"
#include "box-http-server.h"

G_BEGIN_DECLS

#define BOX_HTTP_BODY_MAX (1024 * 1024)

typedef enum {
  BOX_HTTP_AUTH_NONE,   /* no credential needed */
  BOX_HTTP_AUTH_ADMIN,  /* the operator's admin token */
  BOX_HTTP_AUTH_KEY,    /* a project key */
} BoxHttpAuth;

typedef struct _BoxHttpRequest BoxHttpRequest;
typedef struct _BoxHttpSlot BoxHttpSlot;    /* box-http-limits.h */
typedef void (*BoxHttpHandler) (BoxHttpRequest *req);

/* BoxHttpRoute.flags */
typedef enum {
  /* also served on the in-sandbox socket (box-insandbox.c), at the path
   * without its "/v1/sandboxes/{sandbox}" prefix */
  BOX_HTTP_ROUTE_IN_SANDBOX = 1 << 0,
  /* a stream, counted against the caller's limits (box-http-limits.h) */
  BOX_HTTP_ROUTE_WEBSOCKET  = 1 << 1,
  BOX_HTTP_ROUTE_SSE        = 1 << 2,
  BOX_HTTP_ROUTE_SESSION    = 1 << 3,  /* an exec WebSocket (new or attached) */
  /* with BOX_HTTP_ROUTE_IN_SANDBOX: served there only, not on the API
   * socket (GET /identity/token) */
  BOX_HTTP_ROUTE_SANDBOX_ONLY = 1 << 4,
} BoxHttpRouteFlags;

typedef struct {
  const char     *method;
  const char     *pattern;    /* "/v1/sandboxes/{sandbox}/pause" */
  BoxHttpAuth     auth;
  gboolean        json_body;  /* the route reads a JSON body */
  BoxHttpHandler  handler;
  /* optional (zero when left out): */
  guint           flags;      /* BoxHttpRouteFlags */
  /* Runs in the early stage (routed, authenticated, query parsed; the body
   * not read yet) for a route that takes its body as it arrives: it may
   * pause the message, connect to "got-chunk" (the body is not kept) or
   * answer at once.  The handler still runs once the body was read,
   * unless an answer was set by then. */
  BoxHttpHandler  start;
} BoxHttpRoute;

typedef struct {
  char *name;
  char *value;
} BoxHttpParam;

struct _BoxHttpRequest {
  gint                ref_count;
  BoxHttpServer      *server;       /* borrowed: the server outlives its streams */
  BoxEngine          *engine;       /* owned */
  SoupServerMessage  *msg;          /* owned from the handler stage on */
  const BoxHttpRoute *route;
  BoxPrincipal       *principal;    /* NULL for BOX_HTTP_AUTH_NONE */
  GPtrArray          *path_params;  /* char*: the {param} segments, decoded, in order */
  GPtrArray          *query;        /* BoxHttpParam*: in order, repeats kept */
  gboolean            body_too_large;
  gboolean            paused;
  gboolean            finished;     /* the message is done (answered or the client left) */
  gulong              finished_id;
  gulong              disconnected_id;
  BoxHttpSlot        *slot;         /* a stream route's slot, until a stream takes it */
  gpointer            kept;         /* see box_http_request_keep() */
  GDestroyNotify      kept_free;
};

BoxHttpRequest *box_http_request_new        (BoxHttpServer *server, BoxEngine *engine,
                                             SoupServerMessage *msg);
BoxHttpRequest *box_http_request_ref        (BoxHttpRequest *req);
void            box_http_request_unref      (BoxHttpRequest *req);
/* Handler stage: takes a reference on the message and watches it finish. */
void            box_http_request_attach     (BoxHttpRequest *req);
/* Pauses the message; returns a new reference for the callback. */
BoxHttpRequest *box_http_request_pause      (BoxHttpRequest *req);
/* Sends what was set (unless the client already left). */
void            box_http_request_resume     (BoxHttpRequest *req);
/* Keeps @data (an engine call's argument) alive as long as @req; returns @data. */
gpointer        box_http_request_keep       (BoxHttpRequest *req, gpointer data,
                                             GDestroyNotify free_fn);

const char     *box_http_request_param      (BoxHttpRequest *req, guint index);
/* The first value of @name, or NULL */
const char     *box_http_request_query      (BoxHttpRequest *req, const char *name);
/* Every value of @name in order (borrowed strings); never NULL */
GPtrArray      *box_http_request_query_all  (BoxHttpRequest *req, const char *name);
/* Every parameter is in @allowed and, unless in @repeatable (may be NULL),
 * given once; else invalid, naming it. */
gboolean        box_http_request_check_query (BoxHttpRequest *req, const char *const *allowed,
                                              const char *const *repeatable, GError **error);
/* "true" or "false" exactly; @def when absent. */
gboolean        box_http_request_query_bool  (BoxHttpRequest *req, const char *name, gboolean def,
                                              gboolean *out, GError **error);
/* Digits only, @min to @max; @def when absent (it need not be in range). */
gboolean        box_http_request_query_uint  (BoxHttpRequest *req, const char *name, guint min,
                                              guint max, guint def, guint *out, GError **error);
/* The project of a key principal, or NULL */
const char     *box_http_request_project    (BoxHttpRequest *req);
/* The JSON body: size and Content-Type checked, then box_json_parse_body(). */
JsonNode       *box_http_request_body       (BoxHttpRequest *req, gboolean empty_ok, GError **error);
/* For routes that take no body: empty, or an empty object. */
gboolean        box_http_request_no_body    (BoxHttpRequest *req, GError **error);

/* A raw query string ("a=1&b=2&a=3", already without '?') into
 * BoxHttpParam*; '+' is a space.  NULL with BOX_ERROR_INVALID when an
 * escape is malformed. */
GPtrArray      *box_http_parse_query        (const char *query, GError **error);
/* Routing, shared by the API server and the in-sandbox socket
 * (box-http-server.c): "/a/b%2Fc/" -> {"a", "b/c", ""} (NULL for a
 * malformed escape); a pattern's {param} segments match any non-empty
 * segment and go to @params (may be NULL); HEAD matches a GET route. */
GStrv           box_http_split_path         (const char *path);
gboolean        box_http_route_matches      (const char *pattern, const char *const *segments,
                                             GPtrArray *params);
gboolean        box_http_method_matches     (const char *route_method, const char *method);
/* "Bearer <token>" -> token, or NULL */
char           *box_http_bearer_token       (SoupMessageHeaders *headers);
void            box_http_param_free         (BoxHttpParam *param);

/* ---- answers ---- */

void            box_http_reply_error        (SoupServerMessage *msg, const GError *error);
void            box_http_reply_error_literal (SoupServerMessage *msg, BoxErrorCode code,
                                              const char *message);
/* Takes @node. */
void            box_http_reply_json         (SoupServerMessage *msg, guint status, JsonNode *node);
/* Takes @text, JSON already written (box-json-writer.h). */
void            box_http_reply_json_text    (SoupServerMessage *msg, guint status, GString *text);
void            box_http_reply_empty        (SoupServerMessage *msg, guint status);
/* {<member>: [<nodes>]}; @nodes holds JsonNode* and is not modified. */
void            box_http_reply_list         (SoupServerMessage *msg, const char *member,
                                             GPtrArray *nodes);
/* A new JsonNode* array that frees its nodes */
GPtrArray      *box_http_node_array_new     (void);

/* ---- event streams (box-http-server.c) ---- */

typedef void (*BoxHttpStreamClose) (gpointer stream);
void            box_http_server_add_stream    (BoxHttpServer *self, gpointer stream,
                                               BoxHttpStreamClose close_fn);
void            box_http_server_remove_stream (BoxHttpServer *self, gpointer stream);

/* ---- handlers ---- */

/* box-http-operator.c */
void box_http_whoami          (BoxHttpRequest *req);
void box_http_project_create  (BoxHttpRequest *req);
void box_http_project_list    (BoxHttpRequest *req);
void box_http_project_get     (BoxHttpRequest *req);
void box_http_project_update  (BoxHttpRequest *req);
void box_http_project_delete  (BoxHttpRequest *req);
void box_http_key_create      (BoxHttpRequest *req);
void box_http_key_list        (BoxHttpRequest *req);
void box_http_key_delete      (BoxHttpRequest *req);

/* box-http-identity.c */
void box_http_oidc_discovery  (BoxHttpRequest *req);
void box_http_oidc_jwks       (BoxHttpRequest *req);
void box_http_identity_token  (BoxHttpRequest *req);

/* box-http-sandboxes.c */
void box_http_sandbox_create  (BoxHttpRequest *req);
void box_http_sandbox_list    (BoxHttpRequest *req);
void box_http_sandbox_get     (BoxHttpRequest *req);
void box_http_sandbox_update  (BoxHttpRequest *req);
void box_http_sandbox_delete  (BoxHttpRequest *req);
void box_http_sandbox_pause   (BoxHttpRequest *req);
void box_http_sandbox_stop    (BoxHttpRequest *req);
void box_http_sandbox_wake    (BoxHttpRequest *req);
void box_http_template_list   (BoxHttpRequest *req);
void box_http_network_defaults (BoxHttpRequest *req);

/* box-http-checkpoints.c (the restore: box-http-sandboxes.c) */
void box_http_checkpoint_create  (BoxHttpRequest *req);
void box_http_checkpoint_list    (BoxHttpRequest *req);
void box_http_checkpoint_get     (BoxHttpRequest *req);
void box_http_checkpoint_delete  (BoxHttpRequest *req);
void box_http_checkpoint_restore (BoxHttpRequest *req);

/* box-http-tasks.c */
void box_http_task_list       (BoxHttpRequest *req);
void box_http_task_put        (BoxHttpRequest *req);
void box_http_task_get        (BoxHttpRequest *req);
void box_http_task_delete     (BoxHttpRequest *req);
void box_http_task_no_name    (BoxHttpRequest *req);

/* box-http-services.c */
void box_http_service_list     (BoxHttpRequest *req);
void box_http_service_get      (BoxHttpRequest *req);
void box_http_service_put      (BoxHttpRequest *req);
void box_http_service_delete   (BoxHttpRequest *req);
void box_http_service_start    (BoxHttpRequest *req);
void box_http_service_stop     (BoxHttpRequest *req);
void box_http_service_restart  (BoxHttpRequest *req);
void box_http_service_logs     (BoxHttpRequest *req);

/* box-http-secrets.c */
void box_http_secret_put      (BoxHttpRequest *req);
void box_http_secret_list     (BoxHttpRequest *req);
void box_http_secret_get      (BoxHttpRequest *req);
void box_http_secret_delete   (BoxHttpRequest *req);

/* box-http-exec.c */
void box_http_exec_run        (BoxHttpRequest *req);

/* box-http-events.c */
void box_http_events          (BoxHttpRequest *req);

/* box-http-stream-exec.c: streaming exec and sessions */
void box_http_exec_stream     (BoxHttpRequest *req);
void box_http_session_list    (BoxHttpRequest *req);
void box_http_session_attach  (BoxHttpRequest *req);
void box_http_session_signal  (BoxHttpRequest *req);
typedef struct _BoxHttpWs BoxHttpWs;
/* box-http-ports.c */
void box_http_port_list       (BoxHttpRequest *req);
void box_http_port_watch      (BoxHttpRequest *req);
void box_http_port_connect    (BoxHttpRequest *req);
void box_http_port_set        (BoxHttpRequest *req);
void box_http_port_settings   (BoxHttpRequest *req);
/* box-http-stats.c */
void box_http_edge            (BoxHttpRequest *req);
void box_http_sandbox_stats   (BoxHttpRequest *req);

/* box-http-files.c: /v1/sandboxes/{sandbox}/fs/... */
void box_http_fs_file_get     (BoxHttpRequest *req);
void box_http_fs_file_put_start (BoxHttpRequest *req);
void box_http_fs_file_put     (BoxHttpRequest *req);
void box_http_fs_file_delete  (BoxHttpRequest *req);
void box_http_fs_stat         (BoxHttpRequest *req);
void box_http_fs_list         (BoxHttpRequest *req);
void box_http_fs_mkdir        (BoxHttpRequest *req);
void box_http_fs_rename       (BoxHttpRequest *req);
void box_http_fs_tar_get      (BoxHttpRequest *req);
void box_http_fs_tar_put_start (BoxHttpRequest *req);
void box_http_fs_tar_put      (BoxHttpRequest *req);
/* box-http-watch.c */
void box_http_fs_watch        (BoxHttpRequest *req);
/* box-http-server.c: the route table, for the in-sandbox socket */
const BoxHttpRoute *box_http_server_get_routes (guint *n_routes);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxHttpRequest, box_http_request_unref)

G_END_DECLS
