/* box-storage-records.h: the typed records on the generic store.
 *
 * Core code, not part of the BoxStorage interface: each function maps a
 * typed record (box-records.h) to BoxStorageRecords and back, with the
 * storage JSON of box-records-storage.c as the body.  The kinds:
 *
 *   kind        scope        id                 name       lookup
 *   project     ""           name               -          -
 *   key         project      key ID             -          hash
 *   sandbox     project      sandbox ID         name       -
 *   checkpoint  sandbox ID   "<sandbox>/<id>"   id         -
 *   secret      project      "<project>/<name>" name       -
 *   meta        ""           key                -          -
 *
 * Reads set the typed record's revision; inserts and updates set it to the
 * revision written.  An update is a compare-and-swap against the revision
 * in the record (0: unconditional) and fails with BOX_ERROR_CONFLICT when
 * the stored record has moved on.  Deleting a sandbox deletes every record
 * in its scope (its checkpoints); deleting a project deletes every record
 * in its scope and in its sandboxes' scopes, all in one transaction.
 *
 * Error codes and messages are those of the old per-type interface.
 */
#pragma once

#include "box-records.h"
#include "box-storage.h"

G_BEGIN_DECLS

#define BOX_STORAGE_KIND_PROJECT    "project"
#define BOX_STORAGE_KIND_KEY        "key"
#define BOX_STORAGE_KIND_SANDBOX    "sandbox"
#define BOX_STORAGE_KIND_CHECKPOINT "checkpoint"
#define BOX_STORAGE_KIND_SECRET     "secret"
#define BOX_STORAGE_KIND_META       "meta"

BOX_PLUGIN_API
gboolean       box_storage_project_insert    (BoxStorage *self, BoxProject *project, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_project_update    (BoxStorage *self, BoxProject *project, GError **error);
/**
 * box_storage_project_get:
 * @self: the store
 * @name: the name
 * @error: %BOX_ERROR_NOT_FOUND when absent
 *
 * Returns: (transfer full) (nullable): the record
 */
BOX_PLUGIN_API
BoxProject    *box_storage_project_get       (BoxStorage *self, const char *name, GError **error);
/**
 * box_storage_project_list:
 * @self: the store
 * @error: why it failed
 *
 * Returns: (transfer container) (element-type BoxProject) (nullable): every project, which
 *   the array owns
 */
BOX_PLUGIN_API
GPtrArray     *box_storage_project_list      (BoxStorage *self, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_project_delete    (BoxStorage *self, const char *name, GError **error);

BOX_PLUGIN_API
gboolean       box_storage_key_insert        (BoxStorage *self, BoxKey *key, GError **error);
/**
 * box_storage_key_get_by_hash:
 * @self: the store
 * @hash: the hash
 * @error: %BOX_ERROR_NOT_FOUND when absent
 *
 * Returns: (transfer full) (nullable): the record
 */
BOX_PLUGIN_API
BoxKey        *box_storage_key_get_by_hash   (BoxStorage *self, const char *hash, GError **error);
/**
 * box_storage_key_list:
 * @self: the store
 * @project: (nullable): the project
 * @error: why it failed
 *
 * Returns: (transfer container) (element-type BoxKey) (nullable): the keys of @project (%NULL: of every project), which
 *   the array owns
 */
BOX_PLUGIN_API
GPtrArray     *box_storage_key_list          (BoxStorage *self, const char *project, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_key_delete        (BoxStorage *self, const char *project, const char *id,
                                              GError **error);

/* A NULL @project means "any project" (operator paths); by ID first, then
 * by name, which must then be unambiguous. */
BOX_PLUGIN_API
gboolean       box_storage_sandbox_insert    (BoxStorage *self, BoxSandbox *sandbox, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_sandbox_update    (BoxStorage *self, BoxSandbox *sandbox, GError **error);
/**
 * box_storage_sandbox_get:
 * @self: the store
 * @project: (nullable): the project; %NULL for any
 * @id_or_name: the id or name
 * @error: %BOX_ERROR_NOT_FOUND when absent
 *
 * Returns: (transfer full) (nullable): the record
 */
BOX_PLUGIN_API
BoxSandbox    *box_storage_sandbox_get       (BoxStorage *self, const char *project,
                                              const char *id_or_name, GError **error);
/**
 * box_storage_sandbox_list:
 * @self: the store
 * @project: (nullable): the project; %NULL: every project
 * @error: why it failed
 *
 * Returns: (transfer container) (element-type BoxSandbox) (nullable): the project's sandboxes, which
 *   the array owns
 */
BOX_PLUGIN_API
GPtrArray     *box_storage_sandbox_list      (BoxStorage *self, const char *project, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_sandbox_delete    (BoxStorage *self, const char *project, const char *id,
                                              GError **error);

/* The sandbox must exist (NOT_FOUND otherwise); lists are oldest first,
 * then in insertion order. */
BOX_PLUGIN_API
gboolean       box_storage_checkpoint_insert (BoxStorage *self, BoxCheckpoint *checkpoint,
                                              GError **error);
/**
 * box_storage_checkpoint_get:
 * @self: the store
 * @sandbox_id: the sandbox id
 * @id: the id
 * @error: %BOX_ERROR_NOT_FOUND when absent
 *
 * Returns: (transfer full) (nullable): the record
 */
BOX_PLUGIN_API
BoxCheckpoint *box_storage_checkpoint_get    (BoxStorage *self, const char *sandbox_id,
                                              const char *id, GError **error);
/**
 * box_storage_checkpoint_list:
 * @self: the store
 * @sandbox_id: the sandbox
 * @error: why it failed
 *
 * Returns: (transfer container) (element-type BoxCheckpoint) (nullable): the sandbox's checkpoints, which
 *   the array owns
 */
BOX_PLUGIN_API
GPtrArray     *box_storage_checkpoint_list   (BoxStorage *self, const char *sandbox_id,
                                              GError **error);
BOX_PLUGIN_API
gboolean       box_storage_checkpoint_delete (BoxStorage *self, const char *sandbox_id,
                                              const char *id, GError **error);

/* put inserts or replaces, keeping the stored created_at */
BOX_PLUGIN_API
gboolean       box_storage_secret_put        (BoxStorage *self, BoxSecret *secret, GError **error);
/**
 * box_storage_secret_get:
 * @self: the store
 * @project: the project
 * @name: the name
 * @error: %BOX_ERROR_NOT_FOUND when absent
 *
 * Returns: (transfer full) (nullable): the record
 */
BOX_PLUGIN_API
BoxSecret     *box_storage_secret_get        (BoxStorage *self, const char *project,
                                              const char *name, GError **error);
/**
 * box_storage_secret_list:
 * @self: the store
 * @project: the project
 * @error: why it failed
 *
 * Returns: (transfer container) (element-type BoxSecret) (nullable): the project's secrets, which
 *   the array owns
 */
BOX_PLUGIN_API
GPtrArray     *box_storage_secret_list       (BoxStorage *self, const char *project, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_secret_delete     (BoxStorage *self, const char *project,
                                              const char *name, GError **error);

/* small named values of the service itself; get of an absent key is NOT_FOUND */
BOX_PLUGIN_API
GBytes        *box_storage_meta_get          (BoxStorage *self, const char *key, GError **error);
BOX_PLUGIN_API
gboolean       box_storage_meta_set          (BoxStorage *self, const char *key, GBytes *value,
                                              GError **error);

G_END_DECLS
