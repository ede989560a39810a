/* box-sqlite-db.h: one SQLite connection with a statement cache.
 *
 * BoxSqliteDb is the sqlite plugin's plain-C core: it opens the database
 * (WAL, synchronous=FULL, foreign keys, busy timeout, mode 0600), brings the
 * schema up to date (box-sqlite-schema.c) and hands out cached prepared
 * statements.  The record functions (box-sqlite-store.h) are written
 * against it; BoxSqlitePlugin only adds the GObject glue.
 *
 * The connection is opened with SQLITE_OPEN_FULLMUTEX and every public
 * store call holds db->lock, so a worker thread may use it too; callers
 * that run a transaction over several statements hold the lock throughout.
 */
#pragma once

#include <sqlite3.h>

#include "box-error.h"

G_BEGIN_DECLS

typedef struct {
  sqlite3    *handle;
  char       *path;
  GHashTable *stmts;      /* SQL text -> sqlite3_stmt*, finalized on close */
  GMutex      lock;
} BoxSqliteDb;

/* Opens (creating when absent) the database at @path and migrates it to
 * the current schema; fails when the file is newer than this code. */
BoxSqliteDb  *box_sqlite_db_open       (const char *path, GError **error);
void          box_sqlite_db_close      (BoxSqliteDb *db);

/* Sets @error to BOX_ERROR_INTERNAL "<context>: <sqlite3_errmsg>". */
void          box_sqlite_db_set_error  (BoxSqliteDb *db, GError **error, const char *context);

/* Runs SQL text without results (several statements allowed). */
gboolean      box_sqlite_db_exec       (BoxSqliteDb *db, const char *sql, GError **error);

/* A prepared statement from the cache, reset and with no bindings.  Use
 * with g_autoptr(BoxSqliteStmt): leaving the scope resets it again, so
 * no statement stays active across a COMMIT. */
typedef sqlite3_stmt BoxSqliteStmt;
BoxSqliteStmt *box_sqlite_db_prepare   (BoxSqliteDb *db, const char *sql, GError **error);
void           box_sqlite_stmt_release (BoxSqliteStmt *stmt);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSqliteStmt, box_sqlite_stmt_release)

/* Steps a statement that returns no row (INSERT/UPDATE/DELETE). */
gboolean      box_sqlite_db_step_done  (BoxSqliteDb *db, BoxSqliteStmt *stmt, GError **error);
/* Steps once: TRUE with *has_row set, or FALSE with @error. */
gboolean      box_sqlite_db_step_row   (BoxSqliteDb *db, BoxSqliteStmt *stmt,
                                        gboolean *has_row, GError **error);
/* Binds a string (NULL binds SQL NULL); the text is copied. */
void          box_sqlite_stmt_bind_text (BoxSqliteStmt *stmt, int index, const char *text);
/* Returns column @col as a newly allocated string, "" for NULL. */
char         *box_sqlite_stmt_dup_text (BoxSqliteStmt *stmt, int col);

/* A write transaction (BEGIN IMMEDIATE).  Freeing it without a successful
 * commit rolls it back. */
typedef struct {
  BoxSqliteDb *db;
  gboolean     done;
} BoxSqliteTxn;

BoxSqliteTxn *box_sqlite_txn_begin     (BoxSqliteDb *db, GError **error);
gboolean      box_sqlite_txn_commit    (BoxSqliteTxn *txn, GError **error);
void          box_sqlite_txn_free      (BoxSqliteTxn *txn);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSqliteTxn, box_sqlite_txn_free)

/* Holds db->lock until the end of the scope; declare it first, so that
 * transactions and statements are released before the lock. */
#define BOX_SQLITE_DB_LOCK(db) \
  g_autoptr(GMutexLocker) G_PASTE (box_sqlite_locker_, __LINE__) G_GNUC_UNUSED = \
    g_mutex_locker_new (&(db)->lock)

/* Turns a record parse failure into BOX_ERROR_INTERNAL naming the row. */
void          box_sqlite_set_corrupt_error (GError **error, const GError *parse_error,
                                            const char *what, const char *key);

/* Parses the current row of @stmt into a record, or NULL with @error. */
typedef gpointer (*BoxSqliteRowFunc) (BoxSqliteStmt *stmt, GError **error);

/* Steps @stmt to its end and collects a record per row into a new array
 * with @free_func set. */
GPtrArray    *box_sqlite_db_collect    (BoxSqliteDb *db, BoxSqliteStmt *stmt,
                                        BoxSqliteRowFunc row_func, GDestroyNotify free_func,
                                        GError **error);
/* Steps @stmt once: the parsed record, or NULL with BOX_ERROR_NOT_FOUND
 * and @not_found as the message when there is no row. */
gpointer      box_sqlite_db_fetch_one  (BoxSqliteDb *db, BoxSqliteStmt *stmt,
                                        BoxSqliteRowFunc row_func, const char *not_found,
                                        GError **error);
/* Steps a "SELECT 1 ..." statement: TRUE with *exists set, or FALSE. */
gboolean      box_sqlite_db_exists     (BoxSqliteDb *db, BoxSqliteStmt *stmt,
                                        gboolean *exists, GError **error);

/* Reads PRAGMA user_version. */
gboolean      box_sqlite_db_get_user_version (BoxSqliteDb *db, int *version, GError **error);

G_END_DECLS
