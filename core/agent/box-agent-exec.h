/* box-agent-exec.h: the exec, session and port operations of the guest
 * agent, typed.
 *
 * The engine's records (box-exec.h) in, its records and objects out: this
 * is where they become the agent's requests (`exec`, `attach`, `sessions`,
 * `session-signal`, `ports`, `port-connect`, doc/AGENT-PROTOCOL.md) and its
 * replies and events become records again.  Errors are the agent's, mapped
 * as box_agent_client_call_async() says; an unknown session is
 * BOX_ERROR_NOT_FOUND "no session <id> in this sandbox".
 */
#pragma once

#include "box-agent-client.h"
#include "box-agent-stream.h"
#include "box-exec-session.h"
#include "box-exec.h"

G_BEGIN_DECLS

/* exec with limit 16 MiB and timeout_ms, stdin within credit then EOF,
 * output collected (credit returned as it is taken) until the exit event.
 * Errors concern starting the command (see call_async()); a non-zero exit
 * is a result.  A channel that ends without an exit event (the connection
 * went away, or the agent closed it for a pause: detach-all) is
 * BOX_ERROR_SANDBOX_UNAVAILABLE.  Cancelling closes the channel (SIGHUP to
 * the process group) and completes with G_IO_ERROR_CANCELLED. */
void            box_agent_client_exec_run_async     (BoxAgentClient       *self,
                                                     const BoxExecRequest *request,
                                                     GCancellable         *cancellable,
                                                     GAsyncReadyCallback   callback,
                                                     gpointer              user_data);
BoxExecResult  *box_agent_client_exec_run_finish    (BoxAgentClient *self,
                                                     GAsyncResult   *result,
                                                     GError        **error);

/* The sandbox env (@env: char* -> char*, may be NULL for none), under
 * every later exec's own; kept in the agent's memory only. */
void            box_agent_client_set_env_async      (BoxAgentClient       *self,
                                                     GHashTable           *env,
                                                     GCancellable         *cancellable,
                                                     GAsyncReadyCallback   callback,
                                                     gpointer              user_data);
gboolean        box_agent_client_set_env_finish     (BoxAgentClient *self,
                                                     GAsyncResult   *result,
                                                     GError        **error);

/* trust-ca: the guest trusts @pem (the secrets broker's CA, PEM
 * CERTIFICATE blocks, at most 16 KiB) in place of the one it trusted
 * before: /etc/box/ca.pem and the system bundle (doc/AGENT-PROTOCOL.md). */
void            box_agent_client_trust_ca_async     (BoxAgentClient       *self,
                                                     GBytes               *pem,
                                                     GCancellable         *cancellable,
                                                     GAsyncReadyCallback   callback,
                                                     gpointer              user_data);
gboolean        box_agent_client_trust_ca_finish    (BoxAgentClient *self,
                                                     GAsyncResult   *result,
                                                     GError        **error);

/* exec in a new session @session_id, chosen by the caller ("s-" + 10 of
 * [0-9a-z]); the stream is attached to it from offset 0.  Errors concern
 * starting the command (unknown user, executable not found, bad cwd:
 * BOX_ERROR_INVALID). */
void            box_agent_client_exec_session_async  (BoxAgentClient             *self,
                                                      const BoxExecStreamRequest *request,
                                                      const char                 *session_id,
                                                      GCancellable               *cancellable,
                                                      GAsyncReadyCallback         callback,
                                                      gpointer                    user_data);
BoxExecSession *box_agent_client_exec_session_finish (BoxAgentClient *self,
                                                      GAsyncResult   *result,
                                                      GError        **error);
/* A stream of the session @session_id from byte @offset of its output (< 0:
 * the oldest kept); box_exec_session_get_offset() says where the replay
 * really starts. */
void            box_agent_client_attach_session_async  (BoxAgentClient      *self,
                                                        const char          *session_id,
                                                        gint64               offset,
                                                        GCancellable        *cancellable,
                                                        GAsyncReadyCallback  callback,
                                                        gpointer             user_data);
BoxExecSession *box_agent_client_attach_session_finish (BoxAgentClient *self,
                                                        GAsyncResult   *result,
                                                        GError        **error);
/* The sessions, oldest first: BoxSessionInfo*. */
void            box_agent_client_list_sessions_async  (BoxAgentClient      *self,
                                                       GCancellable        *cancellable,
                                                       GAsyncReadyCallback  callback,
                                                       gpointer             user_data);
GPtrArray      *box_agent_client_list_sessions_finish (BoxAgentClient *self,
                                                       GAsyncResult   *result,
                                                       GError        **error);
/* @signal_name as in `kill -l` (SIG optional); BOX_ERROR_CONFLICT once the
 * session exited. */
void            box_agent_client_signal_session_async  (BoxAgentClient      *self,
                                                        const char          *session_id,
                                                        const char          *signal_name,
                                                        GCancellable        *cancellable,
                                                        GAsyncReadyCallback  callback,
                                                        gpointer             user_data);
gboolean        box_agent_client_signal_session_finish (BoxAgentClient *self,
                                                        GAsyncResult   *result,
                                                        GError        **error);
/* Every TCP listener, by port then address: BoxPortListener*. */
void            box_agent_client_list_ports_async  (BoxAgentClient      *self,
                                                    GCancellable        *cancellable,
                                                    GAsyncReadyCallback  callback,
                                                    gpointer             user_data);
GPtrArray      *box_agent_client_list_ports_finish (BoxAgentClient *self,
                                                    GAsyncResult   *result,
                                                    GError        **error);
/* A TCP connection to 127.0.0.1:@port in the sandbox as a byte stream
 * (BoxAgentStream: closing its output stream half-closes the connection,
 * its input ends when the peer shut its side).  BOX_ERROR_PORT_CLOSED
 * when nothing listens. */
void            box_agent_client_port_connect_async  (BoxAgentClient      *self,
                                                      guint                port,
                                                      GCancellable        *cancellable,
                                                      GAsyncReadyCallback  callback,
                                                      gpointer             user_data);
BoxAgentStream *box_agent_client_port_connect_finish (BoxAgentClient *self,
                                                      GAsyncResult   *result,
                                                      GError        **error);

G_END_DECLS
