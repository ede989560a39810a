/* box-engine-private.h: shared between box-engine.c (plugins, callers,
 * projects, keys, secrets, catalogue) and box-engine-sandboxes.c (the
 * sandbox state machine). */
#pragma once

#include "box-engine.h"
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
  GPtrArray        *network_defaults; /* BoxRule* */
  gboolean          started;
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
  gint64   last_active;  /* monotonic-free wall clock, usec */
  gboolean deleted;
} BoxSandboxRuntime;

/* box-engine-sandboxes.c */
/* One operation at a time per sandbox, in arrival order: the callback runs
 * holding the lock (g_task_propagate_boolean on its result is TRUE); pass
 * it on with box_engine_unlock_sandbox(). */
void     box_engine_lock_sandbox_async  (BoxEngine *self, const char *id,
                                         GAsyncReadyCallback callback, gpointer user_data);
void     box_engine_unlock_sandbox      (BoxEngine *self, const char *id);
void     box_engine_sandboxes_init      (BoxEngine *self);
void     box_engine_sandboxes_finalize  (BoxEngine *self);
gboolean box_engine_reconcile           (BoxEngine *self, GError **error);
void     box_engine_start_ticks         (BoxEngine *self);
/* Destroys every sandbox of @project (protected or not); for project deletion. */
void     box_engine_destroy_project_sandboxes_async  (BoxEngine *self, const char *project,
                                                      GCancellable *cancellable,
                                                      GAsyncReadyCallback callback,
                                                      gpointer user_data);
gboolean box_engine_destroy_project_sandboxes_finish (BoxEngine *self, GAsyncResult *result,
                                                      GError **error);

/* box-engine.c */
void     box_engine_emit                (BoxEngine *self, const char *type, const BoxSandbox *sandbox,
                                         JsonObject *detail);
/* ::sandbox-interrupted */
void     box_engine_emit_interrupted    (BoxEngine *self, const char *sandbox_id, const char *why);
/* Checks that every name in @secrets exists in @project (400 invalid otherwise). */
gboolean box_engine_check_secrets       (BoxEngine *self, const char *project,
                                         const char *const *secrets, GError **error);
guint    box_engine_count_defaults      (BoxEngine *self);

G_END_DECLS
