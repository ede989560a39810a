/* box-sqlite-db.c: the connection, its statement cache and transactions. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box-sqlite-db.h"
#include "box-sqlite-schema.h"

void
box_sqlite_db_set_error (BoxSqliteDb *db, GError **error, const char *context)
{
  int code = db->handle != NULL ? sqlite3_extended_errcode (db->handle) : SQLITE_ERROR;
  BoxErrorCode box_code = BOX_ERROR_INTERNAL;

  /* the record functions check uniqueness first and say it better; this
   * is the backstop */
  if (code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY)
    box_code = BOX_ERROR_ALREADY_EXISTS;
  g_set_error (error, BOX_ERROR, box_code, "%s: %s", context,
               db->handle != NULL ? sqlite3_errmsg (db->handle) : "no database");
}

gboolean
box_sqlite_db_exec (BoxSqliteDb *db, const char *sql, GError **error)
{
  char *errmsg = NULL;

  if (sqlite3_exec (db->handle, sql, NULL, NULL, &errmsg) != SQLITE_OK) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "sqlite: %s",
                 errmsg != NULL ? errmsg : sqlite3_errmsg (db->handle));
    sqlite3_free (errmsg);
    return FALSE;
  }
  return TRUE;
}

BoxSqliteStmt *
box_sqlite_db_prepare (BoxSqliteDb *db, const char *sql, GError **error)
{
  sqlite3_stmt *stmt = g_hash_table_lookup (db->stmts, sql);

  if (stmt == NULL) {
    if (sqlite3_prepare_v3 (db->handle, sql, -1, SQLITE_PREPARE_PERSISTENT,
                            &stmt, NULL) != SQLITE_OK) {
      box_sqlite_db_set_error (db, error, "sqlite: preparing a statement");
      return NULL;
    }
    g_hash_table_insert (db->stmts, g_strdup (sql), stmt);
  }
  sqlite3_reset (stmt);
  sqlite3_clear_bindings (stmt);
  return stmt;
}

void
box_sqlite_stmt_release (BoxSqliteStmt *stmt)
{
  sqlite3_reset (stmt);
  sqlite3_clear_bindings (stmt);
}

gboolean
box_sqlite_db_step_done (BoxSqliteDb *db, BoxSqliteStmt *stmt, GError **error)
{
  int rc = sqlite3_step (stmt);

  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    box_sqlite_db_set_error (db, error, "sqlite");
    return FALSE;
  }
  return TRUE;
}

gboolean
box_sqlite_db_step_row (BoxSqliteDb *db, BoxSqliteStmt *stmt, gboolean *has_row, GError **error)
{
  int rc = sqlite3_step (stmt);

  if (rc == SQLITE_ROW) {
    *has_row = TRUE;
    return TRUE;
  }
  if (rc == SQLITE_DONE) {
    *has_row = FALSE;
    return TRUE;
  }
  box_sqlite_db_set_error (db, error, "sqlite");
  return FALSE;
}

void
box_sqlite_stmt_bind_text (BoxSqliteStmt *stmt, int index, const char *text)
{
  if (text == NULL)
    sqlite3_bind_null (stmt, index);
  else
    sqlite3_bind_text (stmt, index, text, -1, SQLITE_TRANSIENT);
}

char *
box_sqlite_stmt_dup_text (BoxSqliteStmt *stmt, int col)
{
  const unsigned char *text = sqlite3_column_text (stmt, col);

  return g_strdup (text != NULL ? (const char *) text : "");
}

void
box_sqlite_set_corrupt_error (GError **error, const GError *parse_error,
                              const char *what, const char *key)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "stored %s %s is unreadable: %s",
               what, key, parse_error != NULL ? parse_error->message : "unknown error");
}

GPtrArray *
box_sqlite_db_collect (BoxSqliteDb *db, BoxSqliteStmt *stmt, BoxSqliteRowFunc row_func,
                       GDestroyNotify free_func, GError **error)
{
  g_autoptr(GPtrArray) records = g_ptr_array_new_with_free_func (free_func);

  for (;;) {
    gboolean has_row = FALSE;
    gpointer record;

    if (!box_sqlite_db_step_row (db, stmt, &has_row, error))
      return NULL;
    if (!has_row)
      break;
    record = row_func (stmt, error);
    if (record == NULL)
      return NULL;
    g_ptr_array_add (records, record);
  }
  return g_steal_pointer (&records);
}

gpointer
box_sqlite_db_fetch_one (BoxSqliteDb *db, BoxSqliteStmt *stmt, BoxSqliteRowFunc row_func,
                         const char *not_found, GError **error)
{
  gboolean has_row = FALSE;

  if (!box_sqlite_db_step_row (db, stmt, &has_row, error))
    return NULL;
  if (!has_row) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, not_found);
    return NULL;
  }
  return row_func (stmt, error);
}

gboolean
box_sqlite_db_exists (BoxSqliteDb *db, BoxSqliteStmt *stmt, gboolean *exists, GError **error)
{
  return box_sqlite_db_step_row (db, stmt, exists, error);
}

/* ---- transactions ------------------------------------------------------ */

static gboolean
box_sqlite_db_run (BoxSqliteDb *db, const char *sql, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = box_sqlite_db_prepare (db, sql, error);

  if (stmt == NULL)
    return FALSE;
  return box_sqlite_db_step_done (db, stmt, error);
}

BoxSqliteTxn *
box_sqlite_txn_begin (BoxSqliteDb *db, GError **error)
{
  BoxSqliteTxn *txn;

  if (!box_sqlite_db_run (db, "BEGIN IMMEDIATE", error))
    return NULL;
  txn = g_new0 (BoxSqliteTxn, 1);
  txn->db = db;
  return txn;
}

gboolean
box_sqlite_txn_commit (BoxSqliteTxn *txn, GError **error)
{
  g_return_val_if_fail (!txn->done, FALSE);

  if (!box_sqlite_db_run (txn->db, "COMMIT", error))
    return FALSE;   /* still open: box_sqlite_txn_free() rolls it back */
  txn->done = TRUE;
  return TRUE;
}

void
box_sqlite_txn_free (BoxSqliteTxn *txn)
{
  if (!txn->done && !sqlite3_get_autocommit (txn->db->handle)) {
    g_autoptr(GError) error = NULL;

    if (!box_sqlite_db_run (txn->db, "ROLLBACK", &error))
      g_warning ("sqlite: rolling back failed: %s", error->message);
  }
  g_free (txn);
}

gboolean
box_sqlite_db_get_user_version (BoxSqliteDb *db, int *version, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = box_sqlite_db_prepare (db, "PRAGMA user_version", error);
  gboolean has_row = FALSE;

  if (stmt == NULL || !box_sqlite_db_step_row (db, stmt, &has_row, error))
    return FALSE;
  *version = has_row ? sqlite3_column_int (stmt, 0) : 0;
  return TRUE;
}

/* ---- opening ----------------------------------------------------------- */

/* Creates the file 0600 before SQLite sees it: SQLite gives its -wal and
 * -shm files the database file's mode. */
static gboolean
box_sqlite_db_create_file (const char *path, GError **error)
{
  int fd = g_open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

  if (fd < 0) {
    int saved_errno = errno;

    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot create database %s: %s",
                 path, g_strerror (saved_errno));
    return FALSE;
  }
  if (fchmod (fd, 0600) != 0) {
    int saved_errno = errno;

    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot chmod database %s: %s",
                 path, g_strerror (saved_errno));
    close (fd);
    return FALSE;
  }
  close (fd);
  return TRUE;
}

static gboolean
box_sqlite_db_set_wal (BoxSqliteDb *db, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = box_sqlite_db_prepare (db, "PRAGMA journal_mode=WAL", error);
  gboolean has_row = FALSE;

  if (stmt == NULL || !box_sqlite_db_step_row (db, stmt, &has_row, error))
    return FALSE;
  if (!has_row || g_ascii_strcasecmp ((const char *) sqlite3_column_text (stmt, 0), "wal") != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "database %s cannot use write-ahead logging (journal mode stays %s)",
                 db->path, has_row ? (const char *) sqlite3_column_text (stmt, 0) : "unknown");
    return FALSE;
  }
  return TRUE;
}

static void
box_sqlite_stmt_finalize (gpointer stmt)
{
  sqlite3_finalize (stmt);
}

BoxSqliteDb *
box_sqlite_db_open (const char *path, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  BoxSqliteDb *db;
  int version = 0;
  int rc;

  g_return_val_if_fail (path != NULL, NULL);

  if (!box_sqlite_db_create_file (path, error))
    return NULL;

  db = g_new0 (BoxSqliteDb, 1);
  db->path = g_strdup (path);
  db->stmts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                     box_sqlite_stmt_finalize);
  g_mutex_init (&db->lock);

  rc = sqlite3_open_v2 (path, &db->handle,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                        SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_NOFOLLOW, NULL);
  if (rc != SQLITE_OK) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot open database %s: %s",
                 path, db->handle != NULL ? sqlite3_errmsg (db->handle) : sqlite3_errstr (rc));
    box_sqlite_db_close (db);
    return NULL;
  }
  sqlite3_extended_result_codes (db->handle, 1);

  /* check the version before anything writes to the file */
  if (!box_sqlite_db_exec (db, "PRAGMA busy_timeout=5000", &local_error) ||
      !box_sqlite_schema_check (db, &version, &local_error) ||
      !box_sqlite_db_set_wal (db, &local_error) ||
      !box_sqlite_db_exec (db,
                           "PRAGMA synchronous=FULL;"
                           "PRAGMA foreign_keys=ON;",
                           &local_error) ||
      !box_sqlite_schema_migrate (db, BOX_SQLITE_SCHEMA_VERSION, &local_error)) {
    g_set_error (error, BOX_ERROR, local_error->code, "database %s: %s", path,
                 local_error->message);
    box_sqlite_db_close (db);
    return NULL;
  }
  return db;
}

void
box_sqlite_db_close (BoxSqliteDb *db)
{
  if (db == NULL)
    return;
  g_clear_pointer (&db->stmts, g_hash_table_unref);
  if (db->handle != NULL) {
    if (sqlite3_close (db->handle) != SQLITE_OK)
      g_warning ("sqlite: closing %s: %s", db->path, sqlite3_errmsg (db->handle));
    db->handle = NULL;
  }
  g_mutex_clear (&db->lock);
  g_free (db->path);
  g_free (db);
}
