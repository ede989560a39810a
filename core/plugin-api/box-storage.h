/* box-storage.h: where records live.
 *
 * The engine calls storage on the main thread, one call per write, and
 * every call is atomic (one transaction).  Implementations must be quick
 * for the embedded case (SQLite in WAL mode) and durable: once a call has
 * returned TRUE the write survives a kill -9 of boxd.
 *
 * Lookups that find nothing fail with BOX_ERROR_NOT_FOUND; inserts that
 * collide with a unique key fail with BOX_ERROR_ALREADY_EXISTS.  Lists
 * return a GPtrArray that owns its records (free func set), ordered by
 * creation time then ID.  A NULL @project in a sandbox call means "any
 * project" and is only used by operator paths (D-Bus list, reconciliation).
 *
 * Thread contract: every call comes from the main thread and answers
 * there; a store may use threads of its own inside a call.  Other plugins
 * reach the store through their context, also from the main thread only.
 */
#pragma once

#include "box-export.h"

#include "box-plugin.h"

G_BEGIN_DECLS

#define BOX_TYPE_STORAGE (box_storage_get_type ())
BOX_PLUGIN_API
G_DECLARE_INTERFACE (BoxStorage, box_storage, BOX, STORAGE, GObject)

struct _BoxStorageInterface {
  GTypeInterface g_iface;

  /* projects; deleting a project deletes its keys, sandboxes, checkpoints
   * and secrets in the same transaction */
  gboolean       (*project_insert)    (BoxStorage *self, const BoxProject *project, GError **error);
  gboolean       (*project_update)    (BoxStorage *self, const BoxProject *project, GError **error);
  BoxProject    *(*project_get)       (BoxStorage *self, const char *name, GError **error);
  GPtrArray     *(*project_list)      (BoxStorage *self, GError **error);
  gboolean       (*project_delete)    (BoxStorage *self, const char *name, GError **error);

  /* keys; only hashes are stored */
  gboolean       (*key_insert)        (BoxStorage *self, const BoxKey *key, GError **error);
  BoxKey        *(*key_get_by_hash)   (BoxStorage *self, const char *hash, GError **error);
  GPtrArray     *(*key_list)          (BoxStorage *self, const char *project, GError **error);
  gboolean       (*key_delete)        (BoxStorage *self, const char *project, const char *id, GError **error);

  /* sandboxes; (project, name) is unique; id is unique everywhere */
  gboolean       (*sandbox_insert)    (BoxStorage *self, const BoxSandbox *sandbox, GError **error);
  gboolean       (*sandbox_update)    (BoxStorage *self, const BoxSandbox *sandbox, GError **error);
  BoxSandbox    *(*sandbox_get)       (BoxStorage *self, const char *project, const char *id_or_name, GError **error);
  GPtrArray     *(*sandbox_list)      (BoxStorage *self, const char *project, GError **error);
  /* also deletes the sandbox's checkpoints */
  gboolean       (*sandbox_delete)    (BoxStorage *self, const char *project, const char *id, GError **error);

  /* checkpoints, per sandbox; listed oldest first */
  gboolean       (*checkpoint_insert) (BoxStorage *self, const BoxCheckpoint *checkpoint, GError **error);
  BoxCheckpoint *(*checkpoint_get)    (BoxStorage *self, const char *sandbox_id, const char *id, GError **error);
  GPtrArray     *(*checkpoint_list)   (BoxStorage *self, const char *sandbox_id, GError **error);
  gboolean       (*checkpoint_delete) (BoxStorage *self, const char *sandbox_id, const char *id, GError **error);

  /* secrets, per project; put inserts or replaces (keeping created_at) */
  gboolean       (*secret_put)        (BoxStorage *self, const BoxSecret *secret, GError **error);
  BoxSecret     *(*secret_get)        (BoxStorage *self, const char *project, const char *name, GError **error);
  GPtrArray     *(*secret_list)       (BoxStorage *self, const char *project, GError **error);
  gboolean       (*secret_delete)     (BoxStorage *self, const char *project, const char *name, GError **error);

  /* small named values of the service itself (signing keys, node ID ...);
   * get of an absent key is NOT_FOUND */
  GBytes        *(*meta_get)          (BoxStorage *self, const char *key, GError **error);
  gboolean       (*meta_set)          (BoxStorage *self, const char *key, GBytes *value, GError **error);

  gpointer padding[24];
};

BOX_PLUGIN_API
gboolean       box_storage_project_insert    (BoxStorage *self, const BoxProject *project, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_project_update    (BoxStorage *self, const BoxProject *project, GError **error);
BOX_PLUGIN_API
BoxProject    *box_storage_project_get       (BoxStorage *self, const char *name, GError **error);
BOX_PLUGIN_API
GPtrArray     *box_storage_project_list      (BoxStorage *self, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_project_delete    (BoxStorage *self, const char *name, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_key_insert        (BoxStorage *self, const BoxKey *key, GError **error);
BOX_PLUGIN_API
BoxKey        *box_storage_key_get_by_hash   (BoxStorage *self, const char *hash, GError **error);
BOX_PLUGIN_API
GPtrArray     *box_storage_key_list          (BoxStorage *self, const char *project, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_key_delete        (BoxStorage *self, const char *project, const char *id, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_sandbox_insert    (BoxStorage *self, const BoxSandbox *sandbox, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_sandbox_update    (BoxStorage *self, const BoxSandbox *sandbox, GError **error);
BOX_PLUGIN_API
BoxSandbox    *box_storage_sandbox_get       (BoxStorage *self, const char *project, const char *id_or_name, GError **error);
BOX_PLUGIN_API
GPtrArray     *box_storage_sandbox_list      (BoxStorage *self, const char *project, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_sandbox_delete    (BoxStorage *self, const char *project, const char *id, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_checkpoint_insert (BoxStorage *self, const BoxCheckpoint *checkpoint, GError **error);
BOX_PLUGIN_API
BoxCheckpoint *box_storage_checkpoint_get    (BoxStorage *self, const char *sandbox_id, const char *id, GError **error);
BOX_PLUGIN_API
GPtrArray     *box_storage_checkpoint_list   (BoxStorage *self, const char *sandbox_id, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_checkpoint_delete (BoxStorage *self, const char *sandbox_id, const char *id, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_secret_put        (BoxStorage *self, const BoxSecret *secret, GError **error);
BOX_PLUGIN_API
BoxSecret     *box_storage_secret_get        (BoxStorage *self, const char *project, const char *name, GError **error);
BOX_PLUGIN_API
GPtrArray     *box_storage_secret_list       (BoxStorage *self, const char *project, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_secret_delete     (BoxStorage *self, const char *project, const char *name, GError **error);
BOX_PLUGIN_API
GBytes        *box_storage_meta_get          (BoxStorage *self, const char *key, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_meta_set          (BoxStorage *self, const char *key, GBytes *value, GError **error);

G_END_DECLS
