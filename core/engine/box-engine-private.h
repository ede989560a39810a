/* box-engine-private.h: shared between box-engine.c (plugins, callers,
 * projects, keys, secrets, catalogue) and the sandbox state machine
 * (box-engine-sandboxes.c and the files of box-engine-ops-private.h). */
#pragma once

#include "box-clock.h"
#include "box-engine.h"
#include "box-identity.h"
#include "box-secret-key.h"

G_BEGIN_DECLS

/* How often a write that lost a compare-and-swap race is tried again
 * before the conflict is reported (see box-storage-records.h). */
#define BOX_ENGINE_STORAGE_TRIES 3

struct _BoxEngine {
  GObject           parent_instance;

  BoxConfig        *config;
  BoxPluginLoader  *loader;
  GPtrArray        *plugins;          /* BoxPlugin*, started, in start order */
  BoxStorage       *storage;
  BoxAuth          *auth;
  BoxHypervisor    *hypervisor;
  BoxNetwork       *network;          /* may be NULL */
  BoxBroker        *broker;           /* may be NULL */
  BoxSecretKey     *secret_key;       /* NULL: secrets unsupported */
  BoxIdentity      *identity;         /* NULL: identity unsupported */
  BoxStats         *stats;            /* the edge's usage counts; NULL until started */
  guint             edge_port;        /* the edge's listening port; 0: no edge */
  GHashTable       *read_only_keys;   /* key IDs marked read-only (box-engine-projects.c) */
  GHashTable       *domains;          /* own domain -> project name (box-engine-domains.c) */
  GPtrArray        *network_defaults; /* BoxRule* */
  gboolean          started;
  BoxClock         *clock;            /* every time read and timer; real by default */
  GThread          *owner;            /* the thread that created it: the only one it runs on */
  int               lock_fd;          /* holds <data_dir>/boxd.lock, or -1 */

  /* sandbox ID -> BoxSandboxRuntime*: what is known only while boxd runs */
  GHashTable       *runtime;
  guint             tick_id;
  gulong            vm_lost_id;
};

/* In-memory companion of a sandbox record. */
typedef struct {
  char    *id;
  gboolean busy;         /* an operation holds the sandbox */
  GQueue   waiters;      /* GTask* waiting for the sandbox */
  guint    holds;        /* calls in flight that keep it awake */
  gint64   last_active;  /* the engine clock's real time, usec */
  gboolean deleted;
} BoxSandboxRuntime;

/* The engine keeps its state (the runtime table, the sandbox locks, the
 * plugins) without locks: every call must come from its owner thread. */
#define BOX_ENGINE_ASSERT_OWNER(self) g_assert (g_thread_self () == (self)->owner)

/* The engine clock's real time (usec since the epoch) */
#define box_engine_now(self) box_clock_get_real_time ((self)->clock)

/* box-engine-sandboxes.c */
/* One operation at a time per sandbox, in arrival order: the callback runs
 * holding the lock (g_task_propagate_boolean on its result is TRUE); pass
 * it on with box_engine_unlock_sandbox(). */
void     box_engine_lock_sandbox_async  (BoxEngine *self, const char *id,
                                         GAsyncReadyCallback callback, gpointer user_data);
void     box_engine_unlock_sandbox      (BoxEngine *self, const char *id);
void     box_engine_sandboxes_init      (BoxEngine *self);
void     box_engine_sandboxes_finalize  (BoxEngine *self);
/* box-engine-ticks.c */
gboolean box_engine_reconcile           (BoxEngine *self, GError **error);
/* Whether a sandbox recorded in @state can have a VM in @vm_state (what
 * the start's reconciliation checks; creating never matches). */
gboolean box_engine_vm_matches          (BoxSandboxState state, BoxVmState vm_state);
/* Puts @sandbox (saved, with its event) back to what the hypervisor still
 * has of its VM: paused on a memory snapshot, stopped on a disk, with
 * reason @lost_reason and detail.snapshot_at; error (reconciled) when
 * nothing is left. */
void     box_engine_mark_lost           (BoxEngine *self, BoxSandbox *sandbox,
                                         const char *lost_reason);
/* Reads the read-only keys' marks into self->read_only_keys (at start). */
gboolean box_engine_load_read_only_keys (BoxEngine *self, GError **error);
/* Records of the read-only keys' marks: scope the project, id the key ID */
#define BOX_STORAGE_KIND_KEY_ACCESS "key_access"
void     box_engine_start_ticks         (BoxEngine *self);
/* box-engine-domains.c: the own domains' map.  _set() makes @domains
 * (NULL: none) the whole list of @project's; _load() rebuilds the map from
 * storage (at start). */
void     box_engine_domains_set         (BoxEngine *self, const char *project,
                                         const char *const *domains);
gboolean box_engine_domains_load        (BoxEngine *self, GError **error);
/* Destroys every sandbox of @project (protected or not); for project deletion. */
void     box_engine_destroy_project_sandboxes_async  (BoxEngine *self, const char *project,
                                                      GCancellable *cancellable,
                                                      GAsyncReadyCallback callback,
                                                      gpointer user_data);
gboolean box_engine_destroy_project_sandboxes_finish (BoxEngine *self, GAsyncResult *result,
                                                      GError **error);

/* box-engine-subapi.c: hold, call the agent, release.
 * box_engine_agent_task() holds the sandbox @id_or_name of @project (waking
 * it), finds its agent and runs @func (self, agent, @task) with the hold
 * attached to @task; box_engine_agent_task_held() does the same for
 * @sandbox_id that the caller holds already (@held: the hold passes to
 * @task) or does not need held.  Failing to hold or to reach the agent
 * completes @task with the error.  @func starts the agent's call; its
 * callback ends the hold with box_engine_task_release() before it returns
 * (a hold still attached is released when @task is finalized), or hands
 * the hold on to the stream it made (box_engine_task_steal_hold(), then
 * box_engine_hold_keeper with the hold as data).  Both take @task. */
typedef struct _BoxEngineHold BoxEngineHold;
typedef void (*BoxEngineAgentFunc) (BoxEngine *self, BoxAgentClient *agent, GTask *task);
void           box_engine_agent_task       (BoxEngine *self, const char *project,
                                            const char *id_or_name, BoxEngineAgentFunc func,
                                            GTask *task);
void           box_engine_agent_task_held  (BoxEngine *self, const char *sandbox_id, gboolean held,
                                            BoxEngineAgentFunc func, GTask *task);
void           box_engine_task_release     (GTask *task);
BoxEngineHold *box_engine_task_steal_hold  (GTask *task);
/* The sandbox @task holds (NULL: none). */
const char    *box_engine_task_sandbox     (GTask *task);
/* touch: activity; release: the hold ends */
extern const BoxAgentKeeper box_engine_hold_keeper;

/* box-engine.c */
void     box_engine_emit                (BoxEngine *self, const char *type, const BoxSandbox *sandbox,
                                         JsonObject *detail);
/* ::sandbox-interrupted */
void     box_engine_emit_interrupted    (BoxEngine *self, const char *sandbox_id, const char *why);
/* Checks that every name in @secrets exists in @project (400 invalid
 * otherwise); naming any without a secret key or without a broker is 501
 * unsupported. */
gboolean box_engine_check_secrets       (BoxEngine *self, const char *project,
                                         const char *const *secrets, GError **error);
guint    box_engine_count_defaults      (BoxEngine *self);

G_END_DECLS
