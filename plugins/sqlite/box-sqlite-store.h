/* box-sqlite-store.h: the BoxStorage operations on a BoxSqliteDb.
 *
 * Same contract as box-storage.h (which BoxSqlitePlugin forwards to these):
 * every write is one IMMEDIATE transaction, lookups that find nothing are
 * BOX_ERROR_NOT_FOUND, unique collisions BOX_ERROR_ALREADY_EXISTS, SQLite
 * failures BOX_ERROR_INTERNAL.  Each function holds db->lock.
 */
#pragma once

#include "box-records.h"
#include "box-sqlite-db.h"

G_BEGIN_DECLS

/* box-sqlite-store-projects.c */
gboolean       box_sqlite_store_project_insert    (BoxSqliteDb *db, const BoxProject *project, GError **error);
gboolean       box_sqlite_store_project_update    (BoxSqliteDb *db, const BoxProject *project, GError **error);
BoxProject    *box_sqlite_store_project_get       (BoxSqliteDb *db, const char *name, GError **error);
GPtrArray     *box_sqlite_store_project_list      (BoxSqliteDb *db, GError **error);
gboolean       box_sqlite_store_project_delete    (BoxSqliteDb *db, const char *name, GError **error);
gboolean       box_sqlite_store_key_insert        (BoxSqliteDb *db, const BoxKey *key, GError **error);
BoxKey        *box_sqlite_store_key_get_by_hash   (BoxSqliteDb *db, const char *hash, GError **error);
GPtrArray     *box_sqlite_store_key_list          (BoxSqliteDb *db, const char *project, GError **error);
gboolean       box_sqlite_store_key_delete        (BoxSqliteDb *db, const char *project, const char *id, GError **error);
GBytes        *box_sqlite_store_meta_get          (BoxSqliteDb *db, const char *key, GError **error);
gboolean       box_sqlite_store_meta_set          (BoxSqliteDb *db, const char *key, GBytes *value, GError **error);

/* box-sqlite-store-sandboxes.c */
gboolean       box_sqlite_store_sandbox_insert    (BoxSqliteDb *db, const BoxSandbox *sandbox, GError **error);
gboolean       box_sqlite_store_sandbox_update    (BoxSqliteDb *db, const BoxSandbox *sandbox, GError **error);
BoxSandbox    *box_sqlite_store_sandbox_get       (BoxSqliteDb *db, const char *project, const char *id_or_name, GError **error);
GPtrArray     *box_sqlite_store_sandbox_list      (BoxSqliteDb *db, const char *project, GError **error);
gboolean       box_sqlite_store_sandbox_delete    (BoxSqliteDb *db, const char *project, const char *id, GError **error);
gboolean       box_sqlite_store_checkpoint_insert (BoxSqliteDb *db, const BoxCheckpoint *checkpoint, GError **error);
BoxCheckpoint *box_sqlite_store_checkpoint_get    (BoxSqliteDb *db, const char *sandbox_id, const char *id, GError **error);
GPtrArray     *box_sqlite_store_checkpoint_list   (BoxSqliteDb *db, const char *sandbox_id, GError **error);
gboolean       box_sqlite_store_checkpoint_delete (BoxSqliteDb *db, const char *sandbox_id, const char *id, GError **error);
gboolean       box_sqlite_store_secret_put        (BoxSqliteDb *db, const BoxSecret *secret, GError **error);
BoxSecret     *box_sqlite_store_secret_get        (BoxSqliteDb *db, const char *project, const char *name, GError **error);
GPtrArray     *box_sqlite_store_secret_list       (BoxSqliteDb *db, const char *project, GError **error);
gboolean       box_sqlite_store_secret_delete     (BoxSqliteDb *db, const char *project, const char *name, GError **error);

G_END_DECLS
