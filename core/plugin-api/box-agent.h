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

/* One-shot exec (POST /exec/run). */
typedef struct {
  char        **argv;           /* required, non-empty */
  GHashTable   *env;            /* char* -> char*, on top of the sandbox env; may be NULL */
  char         *cwd;            /* NULL: the user's home */
  char         *user;           /* NULL: "box" */
  GBytes       *stdin_data;     /* NULL: empty; then EOF */
  guint         timeout_s;      /* 0: none; the process group is killed after it */
} BoxExecRequest;

typedef struct {
  int           exit_code;      /* 128 + signal when killed (137 on timeout) */
  gboolean      timed_out;
  gboolean      truncated;      /* stdout or stderr was cut at 16 MiB */
  GBytes       *stdout_data;
  GBytes       *stderr_data;
} BoxExecResult;

#define BOX_EXEC_OUTPUT_LIMIT (16u << 20)

BOX_PLUGIN_API
void            box_exec_result_free            (BoxExecResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxExecResult, box_exec_result_free)

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
