/* box-agent.h: a running VM's guest agent, as a hypervisor plugin sees it.
 *
 * The host side of the agent protocol lives in boxd (core/agent/, not part
 * of the SDK).  A hypervisor plugin needs only a little of it: connect to
 * the agent over the VM's byte stream, make the few calls it needs itself
 * (set-time, set-env, reseeding after a restore or fork; a command while
 * it builds a template), notice when the connection ends, and hand the
 * connected agent to the engine (BoxHypervisorInterface.get_agent).  So the
 * SDK exports this interface and no more: boxd's agent client implements
 * it, and box_plugin_context_new_agent() creates one.  Op names and their
 * arguments are the agent protocol's (doc/AGENT-PROTOCOL.md).
 *
 * The object also emits ::closed (GError *error) once, on the thread that
 * created it, when the connection ended or broke; connect to it with
 * g_signal_connect() by name.
 *
 * Thread contract: every call, from the thread-default main context of the
 * thread that created the agent (boxd's main thread for every agent a
 * plugin creates through its context); completions come back there.
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "box-export.h"

G_BEGIN_DECLS

/**
 * BoxExecRequest:
 * @argv: (array zero-terminated=1): the command and its arguments; required,
 *   non-empty
 * @env: (element-type utf8 utf8) (nullable): variables on top of the
 *   sandbox's env
 * @cwd: (nullable): the working directory; %NULL: the user's home
 * @user: (nullable): the user; %NULL: "box"
 * @stdin_data: (nullable): the standard input; %NULL: empty; then EOF
 * @timeout_s: seconds before the process group is killed; 0: none
 *
 * A one-shot command (POST /exec/run).  Owns its members; a boxed type.
 */
typedef struct {
  char        **argv;           /* required, non-empty */
  GHashTable   *env;            /* char* -> char*, on top of the sandbox env; may be NULL */
  char         *cwd;            /* NULL: the user's home */
  char         *user;           /* NULL: "box" */
  GBytes       *stdin_data;     /* NULL: empty; then EOF */
  guint         timeout_s;      /* 0: none; the process group is killed after it */
} BoxExecRequest;

/**
 * BoxExecResult:
 * @exit_code: the exit status; 128 + signal when killed (137 on timeout)
 * @timed_out: the timeout killed it
 * @truncated: stdout or stderr was cut at %BOX_EXEC_OUTPUT_LIMIT
 * @stdout_data: (nullable): what it wrote to stdout
 * @stderr_data: (nullable): what it wrote to stderr
 *
 * How a one-shot command ended.  Owns its members; a boxed type.
 */
typedef struct {
  int           exit_code;      /* 128 + signal when killed (137 on timeout) */
  gboolean      timed_out;
  gboolean      truncated;      /* stdout or stderr was cut at 16 MiB */
  GBytes       *stdout_data;
  GBytes       *stderr_data;
} BoxExecResult;

/**
 * BOX_EXEC_OUTPUT_LIMIT:
 *
 * The most of stdout and of stderr a one-shot command returns (16 MiB).
 */
#define BOX_EXEC_OUTPUT_LIMIT (16u << 20)

#define BOX_TYPE_EXEC_REQUEST (box_exec_request_get_type ())
#define BOX_TYPE_EXEC_RESULT  (box_exec_result_get_type ())

BOX_PLUGIN_API
GType           box_exec_request_get_type       (void) G_GNUC_CONST;
/**
 * box_exec_request_copy:
 * @request: a request
 *
 * Returns: (transfer full): a deep copy
 */
BOX_PLUGIN_API
BoxExecRequest *box_exec_request_copy           (const BoxExecRequest *request);
BOX_PLUGIN_API
void            box_exec_request_free           (BoxExecRequest *request);
BOX_PLUGIN_API
GType           box_exec_result_get_type        (void) G_GNUC_CONST;
/**
 * box_exec_result_copy:
 * @result: a result
 *
 * Returns: (transfer full): a copy (the output bytes are shared)
 */
BOX_PLUGIN_API
BoxExecResult  *box_exec_result_copy            (const BoxExecResult *result);
BOX_PLUGIN_API
void            box_exec_result_free            (BoxExecResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxExecRequest, box_exec_request_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxExecResult, box_exec_result_free)

/**
 * BoxAgentInterface:
 * @g_iface: the parent interface
 * @connect_async: says hello; completes once the agent answered
 * @connect_finish: completes @connect_async
 * @call_async: one request and its reply
 * @call_finish: completes @call_async: the reply's members
 * @exec_run_async: runs a command to its end and collects its output
 * @exec_run_finish: completes @exec_run_async
 * @is_closed: whether the connection ended
 * @close: ends the connection now; pending calls fail; idempotent
 *
 * The virtual methods of an agent; boxd's agent client implements them.
 */

/**
 * BoxAgent:
 *
 * A running VM's guest agent, as a hypervisor plugin sees it: connect over
 * the VM's byte stream, make the few calls a plugin needs itself, notice
 * when the connection ends (the ::closed signal, once, on the creating
 * thread), and hand the connected agent to the engine.
 * box_plugin_context_new_agent() creates one.  Every call comes from the
 * thread-default main context of the thread that created it.
 */
#define BOX_TYPE_AGENT (box_agent_get_type ())
BOX_PLUGIN_API
G_DECLARE_INTERFACE (BoxAgent, box_agent, BOX, AGENT, GObject)

struct _BoxAgentInterface {
  GTypeInterface g_iface;

  void            (*connect_async)   (BoxAgent *self, GCancellable *cancellable,
                                      GAsyncReadyCallback callback, gpointer user_data);
  gboolean        (*connect_finish)  (BoxAgent *self, GAsyncResult *result, GError **error);
  void            (*call_async)      (BoxAgent *self, const char *op, JsonObject *args,
                                      GCancellable *cancellable, GAsyncReadyCallback callback,
                                      gpointer user_data);
  JsonObject     *(*call_finish)     (BoxAgent *self, GAsyncResult *result, GError **error);
  void            (*exec_run_async)  (BoxAgent *self, const BoxExecRequest *request,
                                      GCancellable *cancellable, GAsyncReadyCallback callback,
                                      gpointer user_data);
  BoxExecResult  *(*exec_run_finish) (BoxAgent *self, GAsyncResult *result, GError **error);
  gboolean        (*is_closed)       (BoxAgent *self);
  void            (*close)           (BoxAgent *self);

  /*< private >*/
  gpointer padding[12];
};

/**
 * box_agent_connect_async:
 * @self: the agent
 * @cancellable: (nullable): cancels the wait (a timeout is the caller's)
 * @callback: (scope async): called on the creating thread
 * @user_data: (closure): data for @callback
 *
 * Says hello and completes once the agent answered.  Errors:
 * G_IO_ERROR_CANCELLED, BOX_ERROR_SANDBOX_UNAVAILABLE (the stream ended),
 * BOX_ERROR_INTERNAL (an agent speaking another protocol version).
 */
BOX_PLUGIN_API
void            box_agent_connect_async  (BoxAgent            *self,
                                          GCancellable        *cancellable,
                                          GAsyncReadyCallback  callback,
                                          gpointer             user_data);
BOX_PLUGIN_API
gboolean        box_agent_connect_finish (BoxAgent      *self,
                                          GAsyncResult  *result,
                                          GError       **error);
/**
 * box_agent_call_async:
 * @self: the agent
 * @op: the agent operation ("set-time" ...)
 * @args: (nullable): its arguments; not consumed
 * @cancellable: (nullable): cancels the call (a late reply is ignored)
 * @callback: (scope async): called on the creating thread
 * @user_data: (closure): data for @callback
 *
 * One request and its reply.  An `ok: false` reply is a BOX_ERROR carrying
 * the agent's message.
 */
BOX_PLUGIN_API
void            box_agent_call_async     (BoxAgent            *self,
                                          const char          *op,
                                          JsonObject          *args,
                                          GCancellable        *cancellable,
                                          GAsyncReadyCallback  callback,
                                          gpointer             user_data);
/**
 * box_agent_call_finish:
 * @self: the agent
 * @result: the result
 * @error: the agent's error, or why there was no reply
 *
 * Returns: (transfer full): the reply's members, including id and ok
 */
BOX_PLUGIN_API
JsonObject     *box_agent_call_finish    (BoxAgent      *self,
                                          GAsyncResult  *result,
                                          GError       **error);
/**
 * box_agent_exec_run_async:
 * @self: the agent
 * @request: the command; copied as needed, may go once this returns
 * @cancellable: (nullable): kills the command's process group
 * @callback: (scope async): called on the creating thread
 * @user_data: (closure): data for @callback
 *
 * Runs a command to its end and collects its output (at most
 * BOX_EXEC_OUTPUT_LIMIT of each).  A non-zero exit is a result, not an error.
 */
BOX_PLUGIN_API
void            box_agent_exec_run_async  (BoxAgent             *self,
                                           const BoxExecRequest *request,
                                           GCancellable         *cancellable,
                                           GAsyncReadyCallback   callback,
                                           gpointer              user_data);
/**
 * box_agent_exec_run_finish:
 * @self: the agent
 * @result: the result
 * @error: why the command did not run
 *
 * Returns: (transfer full): the result; free with box_exec_result_free()
 */
BOX_PLUGIN_API
BoxExecResult  *box_agent_exec_run_finish (BoxAgent      *self,
                                           GAsyncResult  *result,
                                           GError       **error);
BOX_PLUGIN_API
gboolean        box_agent_is_closed       (BoxAgent *self);
/* Ends the connection now; pending calls fail; idempotent. */
BOX_PLUGIN_API
void            box_agent_close           (BoxAgent *self);

G_END_DECLS
