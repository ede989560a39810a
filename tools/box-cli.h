/* box-cli.h: the parts of `box`, the project users' command-line client.
 *
 * box talks HTTP (libsoup 3) to the API with a project key.  Configuration:
 * BOX_URL and BOX_KEY in the environment win over url= and key= in the
 * [box] group of $XDG_CONFIG_HOME/box/config.
 *
 * Errors: an error answer of the API becomes a BOX_ERROR with the spec's
 * code (core/box-error.c is compiled in); what no API answer describes --
 * bad usage, an API that cannot be reached, a local file, a broken answer --
 * is a BOX_CLI_ERROR.  box_cli_exit_status() turns either into the exit
 * status documented in doc/box.1, in one place.
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "box-error.h"
#include "box-table.h"

G_BEGIN_DECLS

/* Exit statuses (doc/box.1, EXIT STATUS). */
enum {
  BOX_CLI_EXIT_OK = 0,
  BOX_CLI_EXIT_FAILED = 1,        /* the API answered with an error; a local failure */
  BOX_CLI_EXIT_USAGE = 2,         /* bad usage */
  BOX_CLI_EXIT_UNREACHABLE = 3,   /* no answer from the API, or the key was refused */
  /* exec and attach, whose status is otherwise the remote command's: */
  BOX_CLI_EXIT_TIMED_OUT = 124,   /* exec --timeout killed the command */
  BOX_CLI_EXIT_BOX_FAILED = 125,  /* box itself failed (any of 1, 2, 3 above, a lost sandbox) */
  BOX_CLI_EXIT_CANNOT_RUN = 126,  /* the command could not be started */
  BOX_CLI_EXIT_NOT_FOUND = 127,   /* the executable was not found */
};

/* The most of an error answer box reads. */
#define BOX_CLI_ERROR_BODY_MAX (1024 * 1024)

#define BOX_CLI_ERROR (box_cli_error_quark ())

typedef enum {
  BOX_CLI_ERROR_USAGE,        /* bad arguments */
  BOX_CLI_ERROR_UNREACHABLE,  /* connecting, TLS, a connection lost mid-answer */
  BOX_CLI_ERROR_LOCAL,        /* a local file or terminal */
  BOX_CLI_ERROR_PROTOCOL,     /* an answer box does not understand */
  BOX_CLI_ERROR_LOST,         /* a stream ended without its end (WebSocket 1011) */
} BoxCliErrorCode;

GQuark box_cli_error_quark (void);

typedef struct {
  char        *url;      /* base address without a trailing slash */
  char        *key;
  SoupSession *session;
  gboolean     json;     /* --json */
  gboolean     exec;     /* the command's status is the remote command's */
} BoxCli;

void box_cli_clear (BoxCli *cli);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (BoxCli, box_cli_clear)

/* ---- box-http.c: configuration, requests, errors ----------------------- */

/* Reads the environment and the config file; no request yet. */
gboolean    box_cli_configure       (BoxCli *cli, GError **error);
/* url + path (already escaped) + "?" + query (may be NULL or empty). */
char       *box_cli_url             (BoxCli *cli, const char *path, const char *query);
SoupMessage *box_cli_message_new    (BoxCli *cli, const char *method, const char *path,
                                     const char *query);
/* Sends @msg and reads the whole answer.  An error status becomes a
 * BOX_ERROR from the {error: {code, message}} body.  @root_out (may be NULL)
 * gets the parsed JSON body, NULL for an empty one (204). */
gboolean    box_cli_send            (BoxCli *cli, SoupMessage *msg, JsonNode **root_out,
                                     GError **error);
/* Sends @msg and returns the answer's body as a stream, to be read as it
 * comes; an error status is the API's error (its body read), no answer a
 * BOX_CLI_ERROR_UNREACHABLE. */
GInputStream *box_cli_send_stream   (BoxCli *cli, SoupMessage *msg, GError **error);
/* A JSON call: @body may be NULL (no body).  Returns the answer's JSON, or
 * NULL with @error set; an empty answer is a JSON null node. */
JsonNode   *box_cli_call            (BoxCli *cli, const char *method, const char *path,
                                     const char *query, JsonNode *body, GError **error);
/* GET @path?@query of a listing, and its array @member.  NULL when no
 * table is to be printed, with *status the exit status: the call failed,
 * the answer has no such array (@missing: the message saying so), or
 * --json printed the answer.  *answer holds the array. */
JsonArray  *box_cli_get_list        (BoxCli *cli, const char *path, const char *query,
                                     const char *member, const char *missing, JsonNode **answer,
                                     int *status);
/* The same, running the main loop and showing @what with a spinner and the
 * elapsed time on a terminal while it waits. */
JsonNode   *box_cli_call_progress   (BoxCli *cli, const char *method, const char *path,
                                     const char *query, JsonNode *body, const char *what,
                                     GError **error);
/* The error of an answer with @status and @body (an {error: ...} object). */
GError     *box_cli_error_from_answer (guint status, const char *reason, GBytes *body);
/* A GIO/TLS/resolver error of a connection to @url -> BOX_CLI_ERROR_UNREACHABLE. */
GError     *box_cli_error_network   (const char *url, const GError *error);
/* Prints "box: <message> (<code>)" (and {error} on stdout with --json);
 * returns the exit status. */
int         box_cli_fail            (BoxCli *cli, const GError *error);
int         box_cli_exit_status     (BoxCli *cli, const GError *error);
/* "/v1/sandboxes/<escaped name>" + @suffix */
char       *box_cli_sandbox_path    (const char *sandbox, const char *suffix);
/* DELETE "<collection>/<escaped name>" (@collection already escaped)
 * for each of @names, printing each name deleted; goes on after a failure
 * and returns the first failure's exit status.  @conflict_hint (may be
 * NULL): printed after a 409 conflict, saying what to do. */
int         box_cli_delete_each     (BoxCli *cli, const char *collection, char **names,
                                     int n_names, const char *conflict_hint);
/* A JSON array member of @builder named @member holding @strv (none when
 * @strv is NULL). */
void        box_cli_add_strv        (JsonBuilder *builder, const char *member, char **strv);
/* "K=V" strings -> a JSON object member of @builder named @member (none
 * when @pairs is NULL); a pair without "=" or key is a usage error naming
 * @option. */
gboolean    box_cli_add_map         (JsonBuilder *builder, const char *member, char **pairs,
                                     const char *option, GError **error);
/* Appends name=escaped(value) to a query string. */
void        box_cli_query_add       (GString *query, const char *name, const char *value);

/* ---- output helpers ---------------------------------------------------- */

void        box_cli_print_json      (JsonNode *node);
/* "Label:  value" lines, the values aligned after the longest label. */
typedef struct {
  const char *label;   /* translated */
  const char *value;
} BoxCliField;
void        box_cli_print_fields    (const BoxCliField *fields, guint n_fields);
/* Rows of strings; the first row is the (translated) header. */
/* An RFC 3339 time as "2 minutes ago" style local text. */
char        *box_cli_format_age     (const char *rfc3339);
char        *box_cli_format_size    (guint64 bytes);

/* Member lookups that tolerate absence and wrong types. */
const char  *box_cli_json_string    (JsonObject *object, const char *member);
gint64       box_cli_json_int       (JsonObject *object, const char *member, gint64 fallback);
gboolean     box_cli_json_bool      (JsonObject *object, const char *member);
JsonObject  *box_cli_json_object    (JsonObject *object, const char *member);
/* The strings of the array @member joined by @separator ("" when none). */
char        *box_cli_json_strings   (JsonObject *object, const char *member,
                                     const char *separator);

/* ---- box-ws.c: WebSocket connections ----------------------------------- */

typedef struct _BoxCliWs BoxCliWs;
typedef void (*BoxCliWsDrained) (gpointer user_data);

/* Connects to @path?@query with the key; a refused upgrade is the API's
 * error from its body.  Blocks; the _async variant does the handshake in a
 * thread. */
BoxCliWs    *box_cli_ws_connect     (BoxCli *cli, const char *path, const char *query,
                                     GError **error);
void         box_cli_ws_connect_async  (BoxCli *cli, const char *path, const char *query,
                                        GAsyncReadyCallback callback, gpointer user_data);
BoxCliWs    *box_cli_ws_connect_finish (GAsyncResult *result, GError **error);
SoupWebsocketConnection *box_cli_ws_connection (BoxCliWs *ws);
/* Bytes handed to the connection that the socket did not take yet. */
guint64      box_cli_ws_pending     (BoxCliWs *ws);
void         box_cli_ws_send        (BoxCliWs *ws, guint8 tag, const guint8 *data, gsize len);
/* A binary frame without a tag (the raw TCP stream of a port). */
void         box_cli_ws_send_raw    (BoxCliWs *ws, const guint8 *data, gsize len);
void         box_cli_ws_send_json   (BoxCliWs *ws, JsonNode *node);
/* While paused, the connection reads nothing more from the server (its
 * messages stop; TCP, then boxd's credit, stop the sender). */
void         box_cli_ws_set_input_paused (BoxCliWs *ws, gboolean paused);
/* @func runs each time the socket took bytes (to resume a paused reader). */
void         box_cli_ws_set_drained (BoxCliWs *ws, BoxCliWsDrained func, gpointer user_data);
void         box_cli_ws_free        (BoxCliWs *ws);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxCliWs, box_cli_ws_free)

#define BOX_CLI_WS_HIGH_WATER (1024 * 1024)

/* ---- commands ---------------------------------------------------------- */

/* argv[0] is the command's name; returns the exit status. */
typedef int (*BoxCliFunc) (BoxCli *cli, int argc, char **argv);

/* Parses @argc/@argv with @entries; "box NAME" in --help; a failure is
 * printed and *status set.  @params: the positional arguments (translated).
 * Checks of the values come next, then box_cli_ready(): a usage error is a
 * usage error whatever the configuration. */
gboolean box_cli_parse (BoxCli *cli, int *argc, char ***argv, const GOptionEntry *entries,
                        const char *params, const char *summary, guint min_args,
                        guint max_args, int *status);
/* The same; @strict_posix: options end at the first other argument. */
gboolean box_cli_parse_full (BoxCli *cli, int *argc, char ***argv, const GOptionEntry *entries,
                             const char *params, const char *summary, guint min_args,
                             guint max_args, gboolean strict_posix, int *status);
/* box_cli_configure(); a failure is printed and *status set. */
gboolean box_cli_ready (BoxCli *cli, int *status);
int      box_cli_usage_error (BoxCli *cli, const char *command, const char *message);

int box_cmd_create   (BoxCli *cli, int argc, char **argv);
int box_cmd_list     (BoxCli *cli, int argc, char **argv);
int box_cmd_get      (BoxCli *cli, int argc, char **argv);
int box_cmd_delete   (BoxCli *cli, int argc, char **argv);
int box_cmd_pause    (BoxCli *cli, int argc, char **argv);
int box_cmd_stop     (BoxCli *cli, int argc, char **argv);
int box_cmd_wake     (BoxCli *cli, int argc, char **argv);
int box_cmd_exec     (BoxCli *cli, int argc, char **argv);
int box_cmd_attach   (BoxCli *cli, int argc, char **argv);
int box_cmd_sessions (BoxCli *cli, int argc, char **argv);
int box_cmd_signal   (BoxCli *cli, int argc, char **argv);
int box_cmd_cp       (BoxCli *cli, int argc, char **argv);
int box_cmd_ports    (BoxCli *cli, int argc, char **argv);
int box_cmd_port_forward (BoxCli *cli, int argc, char **argv);
int box_cmd_url         (BoxCli *cli, int argc, char **argv);
int box_cmd_open        (BoxCli *cli, int argc, char **argv);
int box_cmd_port_access (BoxCli *cli, int argc, char **argv);
int box_cmd_events   (BoxCli *cli, int argc, char **argv);
int box_cmd_checkpoint  (BoxCli *cli, int argc, char **argv);
int box_cmd_checkpoints (BoxCli *cli, int argc, char **argv);
int box_cmd_restore     (BoxCli *cli, int argc, char **argv);
int box_cmd_fork        (BoxCli *cli, int argc, char **argv);
int box_cmd_checkpoint_delete (BoxCli *cli, int argc, char **argv);
int box_cmd_tasks       (BoxCli *cli, int argc, char **argv);
int box_cmd_task_put    (BoxCli *cli, int argc, char **argv);
int box_cmd_task_delete (BoxCli *cli, int argc, char **argv);
int box_cmd_services    (BoxCli *cli, int argc, char **argv);
int box_cmd_service     (BoxCli *cli, int argc, char **argv);
int box_cmd_logs        (BoxCli *cli, int argc, char **argv);
/* box-egress.c */
int box_cmd_egress      (BoxCli *cli, int argc, char **argv);
/* box-stats.c */
int box_cmd_stats       (BoxCli *cli, int argc, char **argv);
/* box-secrets.c */
int box_cmd_secrets     (BoxCli *cli, int argc, char **argv);
int box_cmd_secret      (BoxCli *cli, int argc, char **argv);

/* ---- box-urls.c: the edge's URLs -------------------------------------- */

/* GET .../ports/settings: the answer, checked to hold a ports array. */
JsonNode   *box_cli_port_settings   (BoxCli *cli, const char *sandbox, GError **error);
/* "public" or "private" (the default) for @port in a settings answer. */
const char *box_cli_port_access     (JsonNode *settings, guint port);

/* ---- box-stream.c: an attached exec session ---------------------------- */

typedef struct {
  gboolean    tty;          /* raw terminal, resize */
  gboolean    stdin_open;   /* forward stdin (-i) */
  gboolean    detachable;   /* the detach keys detach */
  gboolean    forward_signals; /* SIGINT, SIGTERM -> signal frames (when not raw) */
  const char *sandbox;      /* for the re-attach hint */
  const char *detach_keys;  /* "ctrl-p,ctrl-q" */
} BoxCliStreamOptions;

/* Runs an exec or attach WebSocket (already connected) to its end; returns
 * the exit status (the remote command's, or a BOX_CLI_EXIT_*). */
int box_cli_stream_run (BoxCli *cli, BoxCliWs *ws, const BoxCliStreamOptions *options);
/* A command that could not start -> 127 (not found), 126, or 125. */
int box_cli_start_error_status (const GError *error);
/* "ctrl-p,ctrl-q" -> bytes; FALSE for a bad spec. */
gboolean box_cli_parse_detach_keys (const char *spec, GByteArray *out, GError **error);

G_END_DECLS
