/* box-engine.h: the engine.
 *
 * The engine owns the service's state: it loads plugins, keeps the
 * sandbox state machine, checks every rule that needs state, writes
 * records through BoxStorage, drives VMs through BoxHypervisor and emits
 * events.  Transports (HTTP, D-Bus, the adapter, an in-process tool) call
 * it and only translate.  It lives on the main thread.
 *
 * Request structs (BoxSandboxCreate, BoxSandboxUpdate, BoxSecretPut) stay
 * the caller's: the engine copies what it keeps before returning.
 *
 * Sync calls touch records only.  Calls that may run a VM operation are
 * _async/_finish pairs.  Every call that takes a @project answers
 * BOX_ERROR_NOT_FOUND for another project's resources, exactly as for
 * absent ones.
 *
 * Threads: the engine runs on the thread that created it (boxd's main
 * thread) and keeps its state without locks; every public function must
 * be called there, and every callback and signal comes there.  Functions
 * that change state assert it; plugins must emit their signals
 * (BoxHypervisor::vm-lost) there too.
 */
#pragma once

#include "box-agent-client.h"
#include "box-file-download.h"
#include "box-file-upload.h"
#include "box-file-watch.h"
#include "box-agent-stream.h"
#include "box-auth.h"
#include "box-broker.h"
#include "box-clock.h"
#include "box-config.h"
#include "box-exec-session.h"
#include "box-stats.h"
#include "box-exec.h"
#include "box-hypervisor.h"
#include "box-network.h"
#include "box-plugin-loader.h"
#include "box-storage.h"
#include "box-task.h"

G_BEGIN_DECLS

#define BOX_TYPE_ENGINE (box_engine_get_type ())
G_DECLARE_FINAL_TYPE (BoxEngine, box_engine, BOX, ENGINE, GObject)

typedef enum {
  BOX_STATE_REQUEST_PAUSE,
  BOX_STATE_REQUEST_STOP,
  BOX_STATE_REQUEST_WAKE,
} BoxStateRequest;

/* Takes ownership of @config. */
BoxEngine     *box_engine_new                (BoxConfig *config);
/* The clock the engine reads and arms timers with (box-clock.h); before
 * box_engine_start() only.  Default: the real clock. */
void           box_engine_set_clock          (BoxEngine *self, BoxClock *clock);
BoxClock      *box_engine_get_clock          (BoxEngine *self);
/* Loads plugins, starts them, reconciles sandboxes. */
gboolean       box_engine_start              (BoxEngine *self, GCancellable *cancellable, GError **error);
void           box_engine_stop               (BoxEngine *self);

BoxConfig     *box_engine_get_config         (BoxEngine *self);
BoxPluginLoader *box_engine_get_loader       (BoxEngine *self);
BoxStorage    *box_engine_get_storage        (BoxEngine *self);
BoxAuth       *box_engine_get_auth           (BoxEngine *self);
BoxHypervisor *box_engine_get_hypervisor     (BoxEngine *self);
BoxNetwork    *box_engine_get_network        (BoxEngine *self);   /* may be NULL */
BoxBroker     *box_engine_get_broker         (BoxEngine *self);   /* may be NULL */
/* The usage stats of the sandboxes' URLs (box-stats.h); NULL until started */
BoxStats      *box_engine_get_stats          (BoxEngine *self);
/* The TCP port the edge (sandbox URLs) listens on, set by boxd once it
 * listens; 0: boxd serves no edge.  GET /v1/edge tells clients. */
void           box_engine_set_edge_port      (BoxEngine *self, guint port);
guint          box_engine_get_edge_port      (BoxEngine *self);
/* BoxPlugin*: the started instances */
GPtrArray     *box_engine_get_plugins        (BoxEngine *self);
/* A new context for plugin @plugin_name, as box_engine_start() makes them
 * (configuration, data directory, agent factory; no store or network yet):
 * for tests that make a plugin by hand. */
BoxPluginContext *box_engine_new_plugin_context (BoxEngine *self, const char *plugin_name);
gboolean       box_engine_has_secret_key     (BoxEngine *self);

/* ---- callers ---- */

/* The bearer credential of a request: the admin token or a project key. */
BoxPrincipal  *box_engine_authenticate       (BoxEngine *self, const char *credential, GError **error);

/* ---- operator ---- */

BoxProject    *box_engine_create_project     (BoxEngine *self, const char *name,
                                              const char *const *domains, GError **error);
GPtrArray     *box_engine_list_projects      (BoxEngine *self, GError **error);
BoxProject    *box_engine_get_project        (BoxEngine *self, const char *name, GError **error);
BoxProject    *box_engine_set_project_domains (BoxEngine *self, const char *name,
                                              const char *const *domains, GError **error);
/* The project whose own domain @host (lowercase, without :port or a
 * trailing dot) is or lies under, the longest matching domain winning: its
 * name, and in *@prefix the labels before that domain ("" for the domain
 * itself); NULL when @host is under no project's domain.  From memory: the
 * map is kept as domains are set and rebuilt from storage at start. */
char          *box_engine_project_for_host   (BoxEngine *self, const char *host, char **prefix);
/* Deletes the project's sandboxes (VMs included), checkpoints, secrets and keys. */
void           box_engine_delete_project_async (BoxEngine *self, const char *name,
                                              GCancellable *cancellable, GAsyncReadyCallback callback,
                                              gpointer user_data);
gboolean       box_engine_delete_project_finish (BoxEngine *self, GAsyncResult *result, GError **error);
/* @read_only: a key that may only read (doc/API.md "Read-only keys") */
BoxKey        *box_engine_create_key         (BoxEngine *self, const char *project, const char *name,
                                              gboolean read_only, char **secret_out, GError **error);
/* Whether the key @key_id (a principal's key->id) is read-only. */
gboolean       box_engine_key_is_read_only   (BoxEngine *self, const char *key_id);
GPtrArray     *box_engine_list_keys          (BoxEngine *self, const char *project, GError **error);
gboolean       box_engine_delete_key         (BoxEngine *self, const char *project, const char *key_id,
                                              GError **error);
/* What a project holds against its quota, counted as create checks it
 * (box-engine-quota.c; doc/API.md "Quotas and limits"). */
typedef struct {
  guint   sandboxes;
  guint64 cpus;
  guint64 memory_mib;
  guint64 disk_mib;             /* disks at full size, memory snapshots, checkpoints */
} BoxQuotaUsage;
/* @project's effective quota ([quota.<project>] over [quota]; 0: no bound)
 * and what it holds now; BOX_ERROR_NOT_FOUND for no such project. */
gboolean       box_engine_get_quota          (BoxEngine *self, const char *project, BoxQuota *quota,
                                              BoxQuotaUsage *usage, GError **error);

/* ---- sandboxes ---- */

void           box_engine_create_sandbox_async  (BoxEngine *self, const char *project,
                                                 BoxSandboxCreate *request, GCancellable *cancellable,
                                                 GAsyncReadyCallback callback, gpointer user_data);
BoxSandbox    *box_engine_create_sandbox_finish (BoxEngine *self, GAsyncResult *result, GError **error);
/* @project NULL: every project (operator).  @labels "k" -> "v", all must
 * match (may be NULL).  @state NULL for any. */
GPtrArray     *box_engine_list_sandboxes     (BoxEngine *self, const char *project, GHashTable *labels,
                                              const BoxSandboxState *state, GError **error);
BoxSandbox    *box_engine_get_sandbox        (BoxEngine *self, const char *project,
                                              const char *id_or_name, GError **error);
void           box_engine_update_sandbox_async  (BoxEngine *self, const char *project,
                                                 const char *id_or_name, BoxSandboxUpdate *update,
                                                 GCancellable *cancellable, GAsyncReadyCallback callback,
                                                 gpointer user_data);
BoxSandbox    *box_engine_update_sandbox_finish (BoxEngine *self, GAsyncResult *result, GError **error);
void           box_engine_delete_sandbox_async  (BoxEngine *self, const char *project,
                                                 const char *id_or_name, GCancellable *cancellable,
                                                 GAsyncReadyCallback callback, gpointer user_data);
gboolean       box_engine_delete_sandbox_finish (BoxEngine *self, GAsyncResult *result, GError **error);
void           box_engine_change_state_async    (BoxEngine *self, const char *project,
                                                 const char *id_or_name, BoxStateRequest request,
                                                 GCancellable *cancellable, GAsyncReadyCallback callback,
                                                 gpointer user_data);
BoxSandbox    *box_engine_change_state_finish   (BoxEngine *self, GAsyncResult *result, GError **error);

/* ---- checkpoints (box-engine-checkpoints.c) ----
 * IDs "v1", "v2", ... per sandbox from its record's counter, never reused:
 * a checkpoint that passed the checks takes its number before the
 * hypervisor makes it, so one that then fails spends it.  "auto-1", ...
 * are the automatic ones a restore keeps (the newest 5).  Listing, reading
 * and deleting never wake the sandbox. */

/* BoxCheckpoint*, oldest first */
GPtrArray     *box_engine_list_checkpoints   (BoxEngine *self, const char *project,
                                              const char *id_or_name, GError **error);
BoxCheckpoint *box_engine_get_checkpoint     (BoxEngine *self, const char *project,
                                              const char *id_or_name, const char *checkpoint,
                                              GError **error);
/* Called once a checkpoint was accepted (checked, its ID taken), before the
 * sandbox is paused for it; the engine goes on when @go is returned (any
 * value, exactly once).  The in-sandbox socket answers its caller there. */
typedef void (*BoxEngineCheckpointAccepted) (BoxEngine *self, const BoxCheckpoint *checkpoint,
                                             GTask *go, gpointer user_data);
/* @comment may be NULL; @accepted may be NULL. */
void           box_engine_create_checkpoint_async  (BoxEngine *self, const char *project,
                                                    const char *id_or_name, const char *comment,
                                                    gboolean memory,
                                                    BoxEngineCheckpointAccepted accepted,
                                                    gpointer accepted_data,
                                                    GCancellable *cancellable,
                                                    GAsyncReadyCallback callback,
                                                    gpointer user_data);
BoxCheckpoint *box_engine_create_checkpoint_finish (BoxEngine *self, GAsyncResult *result,
                                                    GError **error);
void           box_engine_delete_checkpoint_async  (BoxEngine *self, const char *project,
                                                    const char *id_or_name, const char *checkpoint,
                                                    GCancellable *cancellable,
                                                    GAsyncReadyCallback callback,
                                                    gpointer user_data);
gboolean       box_engine_delete_checkpoint_finish (BoxEngine *self, GAsyncResult *result,
                                                    GError **error);
/* The sandbox, running, once restored. */
void           box_engine_restore_checkpoint_async  (BoxEngine *self, const char *project,
                                                     const char *id_or_name, const char *checkpoint,
                                                     GCancellable *cancellable,
                                                     GAsyncReadyCallback callback,
                                                     gpointer user_data);
BoxSandbox    *box_engine_restore_checkpoint_finish (BoxEngine *self, GAsyncResult *result,
                                                     GError **error);

/* ---- tasks (box-engine-tasks.c) ----
 * Records of the service: they never wake the sandbox and are not its
 * activity.  While one is live the idle rule leaves the sandbox alone; a
 * stop or a restore ends them all, a pause does not.  @name is checked
 * (1 to 128 bytes of UTF-8, else 400 invalid); an absent or expired task
 * is 404 not_found; a new task beyond 64 live ones is 409 conflict. */

/* BoxTask*, live ones only, oldest first */
GPtrArray     *box_engine_list_tasks         (BoxEngine *self, const char *project,
                                              const char *id_or_name, GError **error);
BoxTask       *box_engine_get_task           (BoxEngine *self, const char *project,
                                              const char *id_or_name, const char *name,
                                              GError **error);
/* Creates the task, or moves a live one's expiry to now + @expire_s (1 to
 * 3600); started_at stays. */
BoxTask       *box_engine_put_task           (BoxEngine *self, const char *project,
                                              const char *id_or_name, const char *name,
                                              guint expire_s, GError **error);
gboolean       box_engine_delete_task        (BoxEngine *self, const char *project,
                                              const char *id_or_name, const char *name,
                                              GError **error);

/* ---- the sandbox sub-API ----
 * Every call under /v1/sandboxes/{sandbox}/ (exec, files, ports, ...)
 * wakes a sleeping sandbox before it runs and holds it awake until it ends:
 * box_engine_hold_async() wakes it when needed and counts the call in
 * flight (the idle rule waits while any is); box_engine_release() ends the
 * hold and counts as activity.  Explicit pause and stop, and deadlines, are
 * not prevented by holds. */
void           box_engine_hold_async         (BoxEngine *self, const char *project,
                                              const char *id_or_name, GCancellable *cancellable,
                                              GAsyncReadyCallback callback, gpointer user_data);
/* The sandbox, running; pair with box_engine_release (sandbox->id). */
BoxSandbox    *box_engine_hold_finish        (BoxEngine *self, GAsyncResult *result, GError **error);
/* The same without waking: BOX_ERROR_CONFLICT when the sandbox is not
 * running (once any operation in progress on it settled); finish with
 * box_engine_hold_finish(). */
void           box_engine_hold_running_async (BoxEngine *self, const char *project,
                                              const char *id_or_name, GCancellable *cancellable,
                                              GAsyncReadyCallback callback, gpointer user_data);

void           box_engine_release            (BoxEngine *self, const char *sandbox_id);
/* Marks activity without a hold (e.g. data on a long stream). */
void           box_engine_touch              (BoxEngine *self, const char *sandbox_id);
/* The running sandbox's agent (a new reference). */
BoxAgentClient *box_engine_get_agent         (BoxEngine *self, const char *sandbox_id,
                                              GError **error);

/* POST /exec/run: hold, run through the agent, release. */
void           box_engine_exec_run_async     (BoxEngine *self, const char *project,
                                              const char *id_or_name,
                                              const BoxExecRequest *request,
                                              GCancellable *cancellable,
                                              GAsyncReadyCallback callback, gpointer user_data);
BoxExecResult *box_engine_exec_run_finish    (BoxEngine *self, GAsyncResult *result,
                                              GError **error);

/* ---- secrets ---- */

BoxSecret     *box_engine_put_secret         (BoxEngine *self, const char *project, const char *name,
                                              BoxSecretPut *request, GError **error);
BoxSecret     *box_engine_get_secret         (BoxEngine *self, const char *project, const char *name,
                                              GError **error);
GPtrArray     *box_engine_list_secrets       (BoxEngine *self, const char *project, GError **error);
gboolean       box_engine_delete_secret      (BoxEngine *self, const char *project, const char *name,
                                              GError **error);

/* ---- identity (box-engine-identity.c, box-identity.h) ----
 * Each fails with BOX_ERROR_UNSUPPORTED when the deployment runs without a
 * signing key ([boxd] identity=false). */

gboolean       box_engine_has_identity       (BoxEngine *self);
/* The OIDC discovery document: issuer is [boxd] base_url. */
JsonNode      *box_engine_identity_discovery (BoxEngine *self, GError **error);
JsonNode      *box_engine_identity_jwks      (BoxEngine *self, GError **error);
/* A token for the sandbox @sandbox_id of @project, as it is now, for
 * @audience, live @ttl_s seconds (checked by the caller: 1 to 3600);
 * *@expires_at its exp (usec since the epoch). */
char          *box_engine_identity_token     (BoxEngine *self, const char *project,
                                              const char *sandbox_id, const char *audience,
                                              guint ttl_s, gint64 *expires_at, GError **error);
/* A new signing key (*@kid); the old one (*@retired_kid) stays in the JWKS
 * until *@retired_until (usec since the epoch). */
gboolean       box_engine_identity_rotate    (BoxEngine *self, char **kid, char **retired_kid,
                                              gint64 *retired_until, GError **error);

/* A new broker CA (box_broker_rotate_ca()); 501 unsupported without a
 * broker.  *@sandboxes (may be NULL): the awake sandboxes using secrets,
 * which need the new CA. */
gboolean       box_engine_rotate_broker_ca   (BoxEngine *self, guint *sandboxes, GError **error);

/* ---- catalogue ---- */

GPtrArray     *box_engine_list_templates     (BoxEngine *self);             /* BoxTemplate* */
GPtrArray     *box_engine_get_network_defaults (BoxEngine *self);           /* BoxRule* (borrowed) */

/* ---- events ----
 * ::event (BoxEvent *event) is emitted on the main thread for every event;
 * subscribers filter by project and sandbox themselves.
 * ::sandbox-interrupted (const char *sandbox_id, const char *why) fires
 * before a sandbox pauses, stops, is deleted, checkpointed with memory,
 * restored, or found lost: its streams end then (WebSockets close 1011). */
void           box_engine_emit_event         (BoxEngine *self, BoxEvent *event);

/* ---- streaming exec, sessions and ports (box-engine-sessions.c) ----
 * Calls marked (held) act on a sandbox the caller holds
 * (box_engine_hold_async()), and the hold passes to the call: to the
 * session or stream it gives, which ends it when closed (or when it ends
 * by itself); on an error it is released at once.  Data through them
 * counts as the sandbox's activity.  The others hold and release the
 * sandbox themselves, except the port settings, which are records only and
 * never wake it.  Records are box-exec.h's. */

/* (held) exec in a new session ("s-" + 10 chars).  Errors concern
 * starting the command (unknown user, executable not found, bad cwd:
 * BOX_ERROR_INVALID). */
void              box_engine_exec_stream_async    (BoxEngine *self, const char *sandbox_id,
                                                   const BoxExecStreamRequest *request,
                                                   GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
BoxExecSession   *box_engine_exec_stream_finish   (BoxEngine *self, GAsyncResult *result,
                                                   GError **error);
/* (held) attach to a session from byte @offset of its output (< 0: the
 * oldest kept); box_exec_session_get_offset() is where the replay really
 * starts.  BOX_ERROR_NOT_FOUND for a session the sandbox does not have. */
void              box_engine_attach_session_async (BoxEngine *self, const char *sandbox_id,
                                                   const char *session, gint64 offset,
                                                   GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
BoxExecSession   *box_engine_attach_session_finish (BoxEngine *self, GAsyncResult *result,
                                                    GError **error);
/* The sessions: BoxSessionInfo*, oldest first. */
void              box_engine_list_sessions_async  (BoxEngine *self, const char *project,
                                                   const char *id_or_name, GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
GPtrArray        *box_engine_list_sessions_finish (BoxEngine *self, GAsyncResult *result,
                                                   GError **error);
/* @signal as in `kill -l` (SIG optional).  BOX_ERROR_NOT_FOUND for an
 * unknown session, BOX_ERROR_CONFLICT once it exited. */
void              box_engine_signal_session_async (BoxEngine *self, const char *project,
                                                   const char *id_or_name, const char *session,
                                                   const char *signal_name, GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
gboolean          box_engine_signal_session_finish (BoxEngine *self, GAsyncResult *result,
                                                    GError **error);
/* Every TCP listener: BoxPortListener*, by port then address. */
void              box_engine_list_ports_async     (BoxEngine *self, const char *project,
                                                   const char *id_or_name, GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
GPtrArray        *box_engine_list_ports_finish    (BoxEngine *self, GAsyncResult *result,
                                                   GError **error);
/* The same without a hold, a wake or activity (the port watch's poll):
 * BOX_ERROR_SANDBOX_UNAVAILABLE unless the sandbox runs. */
void              box_engine_poll_ports_async     (BoxEngine *self, const char *sandbox_id,
                                                   GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
GPtrArray        *box_engine_poll_ports_finish    (BoxEngine *self, GAsyncResult *result,
                                                   GError **error);
/* (held) a TCP connection to 127.0.0.1:@port in the sandbox, as a
 * BoxAgentStream (a GIOStream: closing its output half-closes, its input
 * ends when the peer shut its side; box_agent_stream_close_after_writes()
 * when the user left).  BOX_ERROR_PORT_CLOSED when nothing listens. */
void              box_engine_port_connect_async   (BoxEngine *self, const char *sandbox_id,
                                                   guint port, GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
BoxAgentStream   *box_engine_port_connect_finish  (BoxEngine *self, GAsyncResult *result,
                                                   GError **error);
/* ---- supervised services (box-engine-services.c) ----
 * Each call holds (wakes) the sandbox and goes to its agent.  The answer
 * is a new JsonNode: for LIST an array of Service records, for DELETE a
 * null, otherwise the Service record {name, cmd, cwd?, env?, user, needs,
 * http_port?, state, pid?, restarts, started_at?}.  @name is checked for
 * every op but LIST, and PUT's @definition (the client's object) before
 * the sandbox wakes, its needs against the agent's services after:
 * BOX_ERROR_INVALID naming the fault (an unknown service, a cycle);
 * BOX_ERROR_NOT_FOUND for a sandbox or service that is not there. */
typedef enum {
  BOX_SERVICE_OP_LIST,
  BOX_SERVICE_OP_GET,
  BOX_SERVICE_OP_PUT,
  BOX_SERVICE_OP_DELETE,
  BOX_SERVICE_OP_START,
  BOX_SERVICE_OP_STOP,
  BOX_SERVICE_OP_RESTART,
} BoxServiceOp;
void              box_engine_service_async        (BoxEngine *self, const char *project,
                                                   const char *id_or_name, BoxServiceOp op,
                                                   const char *name, JsonObject *definition,
                                                   GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
JsonNode         *box_engine_service_finish       (BoxEngine *self, GAsyncResult *result,
                                                   GError **error);
/* The service whose http_port is @port runs: started when it is not (the
 * edge proxy's "a request reaching its http_port starts it").  Its record
 * as for box_engine_service_async(); BOX_ERROR_NOT_FOUND when no service
 * serves @port. */
void              box_engine_ensure_port_service_async  (BoxEngine *self, const char *project,
                                                         const char *id_or_name, guint port,
                                                         GCancellable *cancellable,
                                                         GAsyncReadyCallback callback,
                                                         gpointer user_data);
JsonNode         *box_engine_ensure_port_service_finish (BoxEngine *self, GAsyncResult *result,
                                                         GError **error);
/* (held: the caller holds @sandbox_id with box_engine_hold_async() or
 * box_engine_hold_running_async() and may release it once this completes)
 * service @name's log as a download (box-file-download.h): its last @tail
 * lines (< 0: 100; at most BOX_SERVICE_LOGS_TAIL_MAX), then with @follow
 * what the service writes next, until the caller ends it.  Reading it is
 * not the sandbox's activity.  BOX_ERROR_INVALID for a bad name or tail,
 * BOX_ERROR_NOT_FOUND for an unknown service. */
#define BOX_SERVICE_LOGS_TAIL_MAX 10000
void              box_engine_service_logs_async   (BoxEngine *self, const char *sandbox_id,
                                                   const char *name, gint tail, gboolean follow,
                                                   GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
BoxFileDownload  *box_engine_service_logs_finish  (BoxEngine *self, GAsyncResult *result,
                                                   GError **error);
/* Records only (no wake): the access of @port ("private" or "public");
 * waits for an operation in progress on the sandbox so that its record is
 * not overwritten. */
void              box_engine_set_port_access_async  (BoxEngine *self, const char *project,
                                                     const char *id_or_name, guint port,
                                                     const char *access, GCancellable *cancellable,
                                                     GAsyncReadyCallback callback, gpointer user_data);
BoxPortSetting   *box_engine_set_port_access_finish (BoxEngine *self, GAsyncResult *result,
                                                     GError **error);
/* The ports whose access was set: BoxPortSetting*, by port. */
GPtrArray        *box_engine_list_port_settings   (BoxEngine *self, const char *project,
                                                   const char *id_or_name, GError **error);
/* https://<port>--<name>--<project>.<sandbox_domain> ("" without a domain) */
char             *box_engine_port_url             (BoxEngine *self, const BoxSandbox *sandbox,
                                                   guint port);

/* ---- files (box-engine-files.c) ----
 * Typed file operations (box-agent-files.h).  Errors: the engine's (404 no
 * such sandbox, 503 not wakeable) and the agent's, as BOX_ERROR
 * (not_found, permission_denied, invalid, already_exists, conflict). */

/* hold, one request (STAT, MKDIR, RENAME, DELETE), release: TRUE with the
 * Stat in @info (NULL for DELETE). */
void              box_engine_fs_call_async        (BoxEngine *self, const char *project,
                                                   const char *id_or_name,
                                                   const BoxFileRequest *request,
                                                   GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
gboolean          box_engine_fs_call_finish       (BoxEngine *self, GAsyncResult *result,
                                                   BoxFileInfo **info, GError **error);
/* (held: the caller holds @sandbox_id with box_engine_hold_async() and
 * releases it once the transfer is over) a download (READ, LIST, TAR_GET:
 * box_engine_fs_download_finish(), a GInputStream, see
 * box-file-download.h) or an upload (WRITE, TAR_PUT:
 * box_engine_fs_upload_finish(), a GOutputStream, see box-file-upload.h). */
void              box_engine_fs_open_async        (BoxEngine *self, const char *sandbox_id,
                                                   const BoxFileRequest *request,
                                                   GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
BoxFileDownload  *box_engine_fs_download_finish   (BoxEngine *self, GAsyncResult *result,
                                                   GError **error);
BoxFileUpload    *box_engine_fs_upload_finish     (BoxEngine *self, GAsyncResult *result,
                                                   GError **error);
/* (held, likewise) a watch (WATCH), see box-file-watch.h. */
void              box_engine_fs_watch_async       (BoxEngine *self, const char *sandbox_id,
                                                   const BoxFileRequest *request,
                                                   GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
BoxFileWatch     *box_engine_fs_watch_finish      (BoxEngine *self, GAsyncResult *result,
                                                   GError **error);

G_END_DECLS
