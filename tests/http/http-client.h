/* http-client.h: a SoupSession client for http-test, on the test's main loop. */
#pragma once

#include <libsoup/soup.h>

#include "box.h"
#include "box-config.h"
#include "box-engine.h"
#include "box-plugin-loader.h"
#include "box-requests.h"
#include "box-validate.h"
#include "box-http-server.h"

G_BEGIN_DECLS

typedef struct {
  guint               status;
  char               *body;
  JsonNode           *json;      /* NULL when the body is not JSON */
  SoupMessageHeaders *headers;
} Reply;

typedef struct {
  SoupMessage      *msg;
  GDataInputStream *data;
  GCancellable     *cancellable;
  GString          *block;
  GQueue            blocks;       /* char*: complete blocks, without the blank line */
  gboolean          opened;
  gboolean          eof;
  GError           *error;
} SseClient;

/* A started engine on the dummy hypervisor and the build tree's plugins
 * ($BOX_PLUGIN_DIR) in a new temporary *@data_dir, with BOX_ADMIN_TOKEN
 * set to @admin_token, and its BoxHttpServer listening on 127.0.0.1:0. */
void         http_test_start    (const char     *admin_token,
                                 char          **data_dir,
                                 BoxEngine     **engine,
                                 BoxHttpServer **server);
/* A new project @project and a key of it (its secret), made with the
 * operator's @admin_token on the client's server. */
char        *http_test_make_key (const char *admin_token, const char *project);
/* Stops and drops them, runs what is pending, removes the directory. */
void         http_test_stop     (char          **data_dir,
                                 BoxEngine     **engine,
                                 BoxHttpServer **server);

/* Points the client at @server (and makes its session); NULL drops them. */
void         http_client_init   (BoxHttpServer *server);
SoupSession *http_client_session (void);

void         reply_free         (Reply *reply);
/* Runs the main loop until *@done (FALSE after 20 s). */
gboolean     iterate_until      (gboolean *done);
/* A GSourceFunc that sets the gboolean at @user_data */
gboolean     timeout_cb         (gpointer user_data);
SoupMessage *new_message        (const char *method, const char *path, const char *token);
Reply       *call_full          (const char *method, const char *path, const char *token,
                                 const char *content_type, const char *body, gsize body_len);
Reply       *call               (const char *method, const char *path, const char *token,
                                 const char *json_body);
JsonObject  *reply_object       (Reply *reply);
/* Asserts the {error: {code, message}} shape; @message NULL: any non-empty */
void         assert_error       (Reply *reply, guint status, const char *code,
                                 const char *message);
const char  *error_message      (Reply *reply);

SseClient   *sse_open           (const char *path, const char *token);
/* The next complete block, waiting up to 20 s. */
char        *sse_next           (SseClient *client);
void         sse_close          (SseClient *client);
/* "event: <type>\ndata: <json>" -> the data object, checking the type. */
JsonObject  *parse_event        (const char *block, const char *type);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Reply, reply_free)

G_END_DECLS
