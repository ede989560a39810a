/* box-sqlite-store.c: generic records in the `records` table (see
 * box-sqlite-schema.c for the columns). */
#include "config.h"

#include "box-sqlite-store.h"

#define COLUMNS "kind, scope, id, name, lookup, created_at, revision, seq, body"

static char *
column_dup_nullable (BoxSqliteStmt *stmt, int col)
{
  if (sqlite3_column_type (stmt, col) == SQLITE_NULL)
    return NULL;
  return g_strdup ((const char *) sqlite3_column_text (stmt, col));
}

static gpointer
record_from_row (BoxSqliteStmt *stmt, GError **error)
{
  BoxStorageRecord *record = g_new0 (BoxStorageRecord, 1);

  record->kind = box_sqlite_stmt_dup_text (stmt, 0);
  record->scope = box_sqlite_stmt_dup_text (stmt, 1);
  record->id = box_sqlite_stmt_dup_text (stmt, 2);
  record->name = column_dup_nullable (stmt, 3);
  record->lookup = column_dup_nullable (stmt, 4);
  record->created_at = sqlite3_column_int64 (stmt, 5);
  record->revision = (guint64) sqlite3_column_int64 (stmt, 6);
  record->create_revision = (guint64) sqlite3_column_int64 (stmt, 7);
  record->body = box_sqlite_stmt_dup_text (stmt, 8);
  return record;
}

static const char *
index_column (BoxStorageIndex index)
{
  switch (index) {
  case BOX_STORAGE_BY_ID:
    return "id";
  case BOX_STORAGE_BY_NAME:
    return "name";
  case BOX_STORAGE_BY_LOOKUP:
    return "lookup";
  case BOX_STORAGE_BY_SCOPE:
  default:
    return NULL;
  }
}

/* SELECT ... WHERE kind = ?1 [AND scope = ?2] [AND <index> = ?3] ORDER BY ... */
static BoxSqliteStmt *
prepare_select (BoxSqliteDb *db, const char *kind, const char *scope, BoxStorageIndex index,
                const char *key, BoxStorageOrder order, GError **error)
{
  const char *column = index_column (index);
  g_autofree char *sql = NULL;
  BoxSqliteStmt *stmt;

  sql = g_strdup_printf ("SELECT " COLUMNS " FROM records WHERE kind = ?1%s%s%s%s ORDER BY "
                         "created_at, %s",
                         scope != NULL ? " AND scope = ?2" : "",
                         column != NULL ? " AND " : "", column != NULL ? column : "",
                         column != NULL ? " = ?3" : "",
                         order == BOX_STORAGE_ORDER_INSERTED ? "seq" : "id");
  stmt = box_sqlite_db_prepare (db, sql, error);
  if (stmt == NULL)
    return NULL;
  box_sqlite_stmt_bind_text (stmt, 1, kind);
  if (scope != NULL)
    box_sqlite_stmt_bind_text (stmt, 2, scope);
  if (column != NULL)
    box_sqlite_stmt_bind_text (stmt, 3, key);
  return stmt;
}

BoxStorageRecord *
box_sqlite_store_get (BoxSqliteDb *db, const char *kind, const char *scope,
                      BoxStorageIndex index, const char *key, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt = prepare_select (db, kind, scope, index, key,
                                                  BOX_STORAGE_ORDER_CREATED, error);
  g_autofree char *not_found = g_strdup_printf ("no %s %s", kind, key);

  if (stmt == NULL)
    return NULL;
  return box_sqlite_db_fetch_one (db, stmt, record_from_row, not_found, error);
}

GPtrArray *
box_sqlite_store_list (BoxSqliteDb *db, const char *kind, const char *scope,
                       BoxStorageIndex index, const char *key, BoxStorageOrder order,
                       GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt = prepare_select (db, kind, scope, index, key, order, error);

  if (stmt == NULL)
    return NULL;
  return box_sqlite_db_collect (db, stmt, record_from_row,
                                (GDestroyNotify) box_storage_record_free, error);
}

/* ---- writing ----------------------------------------------------------- */

/* The next revision of the store. */
static gboolean
next_revision (BoxSqliteDb *db, guint64 *revision, GError **error)
{
  g_autoptr(BoxSqliteStmt) bump = box_sqlite_db_prepare (db, "UPDATE revision SET value = value + 1",
                                                         error);
  g_autoptr(BoxSqliteStmt) read = NULL;
  gboolean has_row = FALSE;

  if (bump == NULL || !box_sqlite_db_step_done (db, bump, error))
    return FALSE;
  read = box_sqlite_db_prepare (db, "SELECT value FROM revision", error);
  if (read == NULL || !box_sqlite_db_step_row (db, read, &has_row, error))
    return FALSE;
  if (!has_row) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "sqlite: no revision row");
    return FALSE;
  }
  *revision = (guint64) sqlite3_column_int64 (read, 0);
  return TRUE;
}

/* Whether a row of @kind other than @id has @column = @value (in @scope
 * when not NULL). */
static gboolean
taken (BoxSqliteDb *db, const char *column, const BoxStorageRecord *record, const char *value,
       const char *scope, gboolean *is_taken, GError **error)
{
  g_autofree char *sql = g_strdup_printf ("SELECT 1 FROM records WHERE kind = ?1 AND %s = ?2 "
                                          "AND id <> ?3%s", column,
                                          scope != NULL ? " AND scope = ?4" : "");
  g_autoptr(BoxSqliteStmt) stmt = box_sqlite_db_prepare (db, sql, error);

  if (stmt == NULL)
    return FALSE;
  box_sqlite_stmt_bind_text (stmt, 1, record->kind);
  box_sqlite_stmt_bind_text (stmt, 2, value);
  box_sqlite_stmt_bind_text (stmt, 3, record->id);
  if (scope != NULL)
    box_sqlite_stmt_bind_text (stmt, 4, scope);
  return box_sqlite_db_exists (db, stmt, is_taken, error);
}

/* The unique name and lookup of @record are free (the ID is checked by the
 * caller). */
static gboolean
check_unique (BoxSqliteDb *db, const BoxStorageRecord *record, GError **error)
{
  gboolean is_taken = FALSE;

  if (record->name != NULL &&
      !taken (db, "name", record, record->name, record->scope, &is_taken, error))
    return FALSE;
  if (is_taken) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                 "a %s named \"%s\" already exists in \"%s\"",
                 record->kind, record->name, record->scope);
    return FALSE;
  }
  if (record->lookup != NULL &&
      !taken (db, "lookup", record, record->lookup, NULL, &is_taken, error))
    return FALSE;
  if (is_taken) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                 "a %s with the same lookup key already exists", record->kind);
    return FALSE;
  }
  return TRUE;
}

/* The stored revision of @record (NOT_FOUND when absent or, with a scope,
 * in another scope), checked against record->revision (when not 0). */
static gboolean
check_current (BoxSqliteDb *db, const BoxStorageRecord *record, gboolean use_scope,
               GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = NULL;
  gboolean has_row = FALSE;
  guint64 stored;

  stmt = box_sqlite_db_prepare (db, "SELECT revision, scope FROM records "
                                    "WHERE kind = ?1 AND id = ?2", error);
  if (stmt == NULL)
    return FALSE;
  box_sqlite_stmt_bind_text (stmt, 1, record->kind);
  box_sqlite_stmt_bind_text (stmt, 2, record->id);
  if (!box_sqlite_db_step_row (db, stmt, &has_row, error))
    return FALSE;
  if (!has_row || (use_scope && record->scope != NULL &&
                   g_strcmp0 ((const char *) sqlite3_column_text (stmt, 1), record->scope) != 0)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no %s %s", record->kind, record->id);
    return FALSE;
  }
  stored = (guint64) sqlite3_column_int64 (stmt, 0);
  if (record->revision != 0 && record->revision != stored) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT,
                 "%s %s was changed meanwhile (revision %" G_GUINT64_FORMAT ", not %"
                 G_GUINT64_FORMAT ")", record->kind, record->id, stored, record->revision);
    return FALSE;
  }
  return TRUE;
}

/* Runs @sql with the record's columns bound as ?1 kind, ?2 scope, ?3 id,
 * ?4 name, ?5 lookup, ?6 created_at, ?7 revision, ?8 body. */
static gboolean
write_row (BoxSqliteDb *db, const char *sql, const BoxStorageRecord *record, guint64 revision,
           GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = box_sqlite_db_prepare (db, sql, error);

  if (stmt == NULL)
    return FALSE;
  box_sqlite_stmt_bind_text (stmt, 1, record->kind);
  box_sqlite_stmt_bind_text (stmt, 2, record->scope != NULL ? record->scope : "");
  box_sqlite_stmt_bind_text (stmt, 3, record->id);
  box_sqlite_stmt_bind_text (stmt, 4, record->name);
  box_sqlite_stmt_bind_text (stmt, 5, record->lookup);
  sqlite3_bind_int64 (stmt, 6, record->created_at);
  sqlite3_bind_int64 (stmt, 7, (sqlite3_int64) revision);
  box_sqlite_stmt_bind_text (stmt, 8, record->body != NULL ? record->body : "{}");
  return box_sqlite_db_step_done (db, stmt, error);
}

static gboolean
write_insert (BoxSqliteDb *db, const BoxStorageRecord *record, guint64 *revision,
              GError **error)
{
  g_autoptr(BoxSqliteStmt) exists = NULL;
  gboolean is_taken = FALSE;

  exists = box_sqlite_db_prepare (db, "SELECT 1 FROM records WHERE kind = ?1 AND id = ?2", error);
  if (exists == NULL)
    return FALSE;
  box_sqlite_stmt_bind_text (exists, 1, record->kind);
  box_sqlite_stmt_bind_text (exists, 2, record->id);
  if (!box_sqlite_db_exists (db, exists, &is_taken, error))
    return FALSE;
  if (is_taken) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                 "a %s with ID \"%s\" already exists", record->kind, record->id);
    return FALSE;
  }
  if (!check_unique (db, record, error) || !next_revision (db, revision, error))
    return FALSE;
  return write_row (db, "INSERT INTO records (" COLUMNS ") "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8)", record, *revision, error);
}

static gboolean
write_update (BoxSqliteDb *db, const BoxStorageRecord *record, guint64 *revision,
              GError **error)
{
  if (!check_current (db, record, FALSE, error) || !check_unique (db, record, error) ||
      !next_revision (db, revision, error))
    return FALSE;
  return write_row (db, "UPDATE records SET scope = ?2, name = ?4, lookup = ?5, "
                        "created_at = ?6, revision = ?7, body = ?8 "
                        "WHERE kind = ?1 AND id = ?3", record, *revision, error);
}

static gboolean
write_delete (BoxSqliteDb *db, const BoxStorageRecord *record, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = NULL;

  if (!check_current (db, record, TRUE, error))
    return FALSE;
  stmt = box_sqlite_db_prepare (db, "DELETE FROM records WHERE kind = ?1 AND id = ?2", error);
  if (stmt == NULL)
    return FALSE;
  box_sqlite_stmt_bind_text (stmt, 1, record->kind);
  box_sqlite_stmt_bind_text (stmt, 2, record->id);
  return box_sqlite_db_step_done (db, stmt, error);
}

static gboolean
write_delete_scope (BoxSqliteDb *db, const BoxStorageRecord *record, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = NULL;

  if (record->kind != NULL)
    stmt = box_sqlite_db_prepare (db, "DELETE FROM records WHERE scope = ?1 AND kind = ?2", error);
  else
    stmt = box_sqlite_db_prepare (db, "DELETE FROM records WHERE scope = ?1", error);
  if (stmt == NULL)
    return FALSE;
  box_sqlite_stmt_bind_text (stmt, 1, record->scope != NULL ? record->scope : "");
  if (record->kind != NULL)
    box_sqlite_stmt_bind_text (stmt, 2, record->kind);
  return box_sqlite_db_step_done (db, stmt, error);
}

static gboolean
write_op (BoxSqliteDb *db, const BoxStorageOp *op, guint64 *revision, GError **error)
{
  const BoxStorageRecord *record = op->record;

  if (record == NULL || (op->type != BOX_STORAGE_OP_DELETE_SCOPE &&
                         (record->kind == NULL || record->id == NULL))) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "sqlite: an incomplete op");
    return FALSE;
  }
  switch (op->type) {
  case BOX_STORAGE_OP_INSERT:
    return write_insert (db, record, revision, error);
  case BOX_STORAGE_OP_UPDATE:
    return write_update (db, record, revision, error);
  case BOX_STORAGE_OP_DELETE:
    return write_delete (db, record, error);
  case BOX_STORAGE_OP_DELETE_SCOPE:
    return write_delete_scope (db, record, error);
  case BOX_STORAGE_OP_CHECK:
    return check_current (db, record, TRUE, error);
  default:
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED, "sqlite: unknown op %d", op->type);
    return FALSE;
  }
}

gboolean
box_sqlite_store_write (BoxSqliteDb *db, BoxStorageOp *ops, guint n_ops, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = box_sqlite_txn_begin (db, error);
  g_autofree guint64 *revisions = g_new0 (guint64, n_ops + 1);

  if (txn == NULL)
    return FALSE;
  for (guint i = 0; i < n_ops; i++)
    if (!write_op (db, &ops[i], &revisions[i], error))
      return FALSE;
  if (!box_sqlite_txn_commit (txn, error))
    return FALSE;
  /* only a committed write changes the caller's records */
  for (guint i = 0; i < n_ops; i++) {
    if (ops[i].type == BOX_STORAGE_OP_INSERT)
      ops[i].record->create_revision = revisions[i];
    if (ops[i].type == BOX_STORAGE_OP_INSERT || ops[i].type == BOX_STORAGE_OP_UPDATE)
      ops[i].record->revision = revisions[i];
  }
  return TRUE;
}
