/* box-sqlite-store.h: the BoxStorage operations on a BoxSqliteDb.
 *
 * Same contract as box-storage.h (which BoxSqlitePlugin forwards to these):
 * a write is one IMMEDIATE transaction, lookups that find nothing are
 * BOX_ERROR_NOT_FOUND, unique collisions BOX_ERROR_ALREADY_EXISTS, a
 * revision that moved BOX_ERROR_CONFLICT, SQLite failures
 * BOX_ERROR_INTERNAL.  Each function holds db->lock.
 */
#pragma once

#include "box-storage.h"
#include "box-sqlite-db.h"

G_BEGIN_DECLS

gboolean          box_sqlite_store_write (BoxSqliteDb *db, BoxStorageOp *ops, guint n_ops,
                                          GError **error);
BoxStorageRecord *box_sqlite_store_get   (BoxSqliteDb *db, const char *kind, const char *scope,
                                          BoxStorageIndex index, const char *key,
                                          GError **error);
GPtrArray        *box_sqlite_store_list  (BoxSqliteDb *db, const char *kind, const char *scope,
                                          BoxStorageIndex index, const char *key,
                                          BoxStorageOrder order, GError **error);

G_END_DECLS
