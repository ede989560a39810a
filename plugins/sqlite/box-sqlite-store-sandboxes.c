/* box-sqlite-store-sandboxes.c: sandboxes, their checkpoints, and secrets. */
#include "config.h"

#include "box-sqlite-store.h"

/* Runs a statement whose parameters are all text (NULL binds SQL NULL). */
static gboolean
box_sqlite_run_text (BoxSqliteDb *db, const char *sql, const char *const *params,
                     gsize n_params, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = box_sqlite_db_prepare (db, sql, error);

  if (stmt == NULL)
    return FALSE;
  for (gsize i = 0; i < n_params; i++)
    box_sqlite_stmt_bind_text (stmt, (int) i + 1, params[i]);
  return box_sqlite_db_step_done (db, stmt, error);
}

static gboolean
box_sqlite_exists_text (BoxSqliteDb *db, const char *sql, const char *const *params,
                        gsize n_params, gboolean *exists, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = box_sqlite_db_prepare (db, sql, error);

  if (stmt == NULL)
    return FALSE;
  for (gsize i = 0; i < n_params; i++)
    box_sqlite_stmt_bind_text (stmt, (int) i + 1, params[i]);
  return box_sqlite_db_exists (db, stmt, exists, error);
}

/* ---- sandboxes --------------------------------------------------------- */

static gpointer
box_sqlite_sandbox_from_row (BoxSqliteStmt *stmt, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  BoxSandbox *sandbox;

  sandbox = box_sandbox_from_storage_json ((const char *) sqlite3_column_text (stmt, 0),
                                           &local_error);
  if (sandbox == NULL)
    box_sqlite_set_corrupt_error (error, local_error, "sandbox",
                                  (const char *) sqlite3_column_text (stmt, 1));
  return sandbox;
}

/* Checks that @name is free in @project for the sandbox @id. */
static gboolean
box_sqlite_sandbox_check_name (BoxSqliteDb *db, const BoxSandbox *sandbox, GError **error)
{
  const char *params[] = { sandbox->project, sandbox->name, sandbox->id };
  gboolean exists = FALSE;

  if (!box_sqlite_exists_text (db, "SELECT 1 FROM sandboxes WHERE project = ?1 AND name = ?2 "
                                   "AND id <> ?3", params, G_N_ELEMENTS (params), &exists, error))
    return FALSE;
  if (exists) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                 "a sandbox named \"%s\" already exists in project \"%s\"",
                 sandbox->name, sandbox->project);
    return FALSE;
  }
  return TRUE;
}

static gboolean
box_sqlite_sandbox_write (BoxSqliteDb *db, const char *sql, const BoxSandbox *sandbox,
                          GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = box_sqlite_db_prepare (db, sql, error);
  g_autofree char *data = NULL;

  if (stmt == NULL)
    return FALSE;
  data = box_sandbox_to_storage_json (sandbox);
  box_sqlite_stmt_bind_text (stmt, 1, sandbox->id);
  box_sqlite_stmt_bind_text (stmt, 2, sandbox->project);
  box_sqlite_stmt_bind_text (stmt, 3, sandbox->name);
  box_sqlite_stmt_bind_text (stmt, 4, box_sandbox_state_to_string (sandbox->state));
  sqlite3_bind_int64 (stmt, 5, sandbox->created_at);
  box_sqlite_stmt_bind_text (stmt, 6, data);
  return box_sqlite_db_step_done (db, stmt, error);
}

gboolean
box_sqlite_store_sandbox_insert (BoxSqliteDb *db, const BoxSandbox *sandbox, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;
  const char *params[] = { sandbox->id };
  gboolean exists = FALSE;

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL ||
      !box_sqlite_exists_text (db, "SELECT 1 FROM sandboxes WHERE id = ?1",
                               params, G_N_ELEMENTS (params), &exists, error))
    return FALSE;
  if (exists) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                 "a sandbox with ID \"%s\" already exists", sandbox->id);
    return FALSE;
  }
  if (!box_sqlite_sandbox_check_name (db, sandbox, error) ||
      !box_sqlite_sandbox_write (db, "INSERT INTO sandboxes "
                                     "(id, project, name, state, created_at, data) "
                                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6)", sandbox, error))
    return FALSE;
  return box_sqlite_txn_commit (txn, error);
}

gboolean
box_sqlite_store_sandbox_update (BoxSqliteDb *db, const BoxSandbox *sandbox, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;
  const char *params[] = { sandbox->id };
  gboolean exists = FALSE;

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL ||
      !box_sqlite_exists_text (db, "SELECT 1 FROM sandboxes WHERE id = ?1",
                               params, G_N_ELEMENTS (params), &exists, error))
    return FALSE;
  if (!exists) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no sandbox %s", sandbox->id);
    return FALSE;
  }
  if (!box_sqlite_sandbox_check_name (db, sandbox, error) ||
      !box_sqlite_sandbox_write (db, "UPDATE sandboxes SET project = ?2, name = ?3, state = ?4, "
                                     "created_at = ?5, data = ?6 WHERE id = ?1", sandbox, error))
    return FALSE;
  return box_sqlite_txn_commit (txn, error);
}

/* By ID first, then by name; with no @project a name must be unambiguous. */
BoxSandbox *
box_sqlite_store_sandbox_get (BoxSqliteDb *db, const char *project, const char *id_or_name,
                              GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(GPtrArray) found = NULL;
  g_autoptr(BoxSqliteStmt) by_id = NULL;
  g_autoptr(BoxSqliteStmt) by_name = NULL;

  by_id = box_sqlite_db_prepare (db, "SELECT data, id FROM sandboxes WHERE id = ?1 "
                                     "AND (?2 IS NULL OR project = ?2)", error);
  if (by_id == NULL)
    return NULL;
  box_sqlite_stmt_bind_text (by_id, 1, id_or_name);
  box_sqlite_stmt_bind_text (by_id, 2, project);
  found = box_sqlite_db_collect (db, by_id, box_sqlite_sandbox_from_row,
                                 (GDestroyNotify) box_sandbox_free, error);
  if (found == NULL)
    return NULL;

  if (found->len == 0) {
    g_clear_pointer (&found, g_ptr_array_unref);
    if (project != NULL) {
      by_name = box_sqlite_db_prepare (db, "SELECT data, id FROM sandboxes "
                                           "WHERE project = ?1 AND name = ?2", error);
      if (by_name != NULL)
        box_sqlite_stmt_bind_text (by_name, 1, project);
    } else {
      by_name = box_sqlite_db_prepare (db, "SELECT data, id FROM sandboxes WHERE name = ?2 "
                                           "ORDER BY created_at, id", error);
    }
    if (by_name == NULL)
      return NULL;
    box_sqlite_stmt_bind_text (by_name, 2, id_or_name);
    found = box_sqlite_db_collect (db, by_name, box_sqlite_sandbox_from_row,
                                   (GDestroyNotify) box_sandbox_free, error);
    if (found == NULL)
      return NULL;
  }

  if (found->len == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no sandbox %s", id_or_name);
    return NULL;
  }
  if (found->len > 1) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "sandbox name %s is used in %u projects; use the sandbox ID",
                 id_or_name, found->len);
    return NULL;
  }
  return g_ptr_array_steal_index (found, 0);
}

GPtrArray *
box_sqlite_store_sandbox_list (BoxSqliteDb *db, const char *project, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt = NULL;

  if (project != NULL) {
    stmt = box_sqlite_db_prepare (db, "SELECT data, id FROM sandboxes WHERE project = ?1 "
                                      "ORDER BY created_at, id", error);
    if (stmt != NULL)
      box_sqlite_stmt_bind_text (stmt, 1, project);
  } else {
    stmt = box_sqlite_db_prepare (db, "SELECT data, id FROM sandboxes "
                                      "ORDER BY created_at, id", error);
  }
  if (stmt == NULL)
    return NULL;
  return box_sqlite_db_collect (db, stmt, box_sqlite_sandbox_from_row,
                                (GDestroyNotify) box_sandbox_free, error);
}

gboolean
box_sqlite_store_sandbox_delete (BoxSqliteDb *db, const char *project, const char *id,
                                 GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;
  const char *params[] = { id, project };

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL ||
      !box_sqlite_run_text (db, "DELETE FROM sandboxes WHERE id = ?1 "
                                "AND (?2 IS NULL OR project = ?2)",
                            params, G_N_ELEMENTS (params), error))
    return FALSE;
  if (sqlite3_changes (db->handle) == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no sandbox %s", id);
    return FALSE;
  }
  if (!box_sqlite_run_text (db, "DELETE FROM checkpoints WHERE sandbox_id = ?1",
                            params, 1, error))
    return FALSE;
  return box_sqlite_txn_commit (txn, error);
}

/* ---- checkpoints ------------------------------------------------------- */

static gpointer
box_sqlite_checkpoint_from_row (BoxSqliteStmt *stmt, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  BoxCheckpoint *checkpoint;

  checkpoint = box_checkpoint_from_storage_json ((const char *) sqlite3_column_text (stmt, 0),
                                                 &local_error);
  if (checkpoint == NULL)
    box_sqlite_set_corrupt_error (error, local_error, "checkpoint",
                                  (const char *) sqlite3_column_text (stmt, 1));
  return checkpoint;
}

/* The project of sandbox @id, or NULL with NOT_FOUND. */
static char *
box_sqlite_sandbox_project (BoxSqliteDb *db, const char *id, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt =
    box_sqlite_db_prepare (db, "SELECT project FROM sandboxes WHERE id = ?1", error);
  gboolean has_row = FALSE;

  if (stmt == NULL)
    return NULL;
  box_sqlite_stmt_bind_text (stmt, 1, id);
  if (!box_sqlite_db_step_row (db, stmt, &has_row, error))
    return NULL;
  if (!has_row) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no sandbox %s", id);
    return NULL;
  }
  return box_sqlite_stmt_dup_text (stmt, 0);
}

gboolean
box_sqlite_store_checkpoint_insert (BoxSqliteDb *db, const BoxCheckpoint *checkpoint,
                                    GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;
  g_autofree char *project = NULL;
  g_autofree char *data = NULL;
  const char *params[] = { checkpoint->sandbox, checkpoint->id };
  gboolean exists = FALSE;

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL)
    return FALSE;
  project = box_sqlite_sandbox_project (db, checkpoint->sandbox, error);
  if (project == NULL ||
      !box_sqlite_exists_text (db, "SELECT 1 FROM checkpoints WHERE sandbox_id = ?1 AND id = ?2",
                               params, G_N_ELEMENTS (params), &exists, error))
    return FALSE;
  if (exists) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                 "a checkpoint \"%s\" already exists in sandbox \"%s\"",
                 checkpoint->id, checkpoint->sandbox);
    return FALSE;
  }

  data = box_checkpoint_to_storage_json (checkpoint);
  {
    g_autoptr(BoxSqliteStmt) stmt =
      box_sqlite_db_prepare (db, "INSERT INTO checkpoints "
                                 "(sandbox_id, id, project, created_at, created_seq, data) "
                                 "VALUES (?1, ?2, ?3, ?4, (SELECT COALESCE (MAX (created_seq), 0) + 1 "
                                 "FROM checkpoints WHERE sandbox_id = ?1), ?5)", error);

    if (stmt == NULL)
      return FALSE;
    box_sqlite_stmt_bind_text (stmt, 1, checkpoint->sandbox);
    box_sqlite_stmt_bind_text (stmt, 2, checkpoint->id);
    box_sqlite_stmt_bind_text (stmt, 3, checkpoint->project != NULL ? checkpoint->project : project);
    sqlite3_bind_int64 (stmt, 4, checkpoint->created_at);
    box_sqlite_stmt_bind_text (stmt, 5, data);
    if (!box_sqlite_db_step_done (db, stmt, error))
      return FALSE;
  }
  return box_sqlite_txn_commit (txn, error);
}

BoxCheckpoint *
box_sqlite_store_checkpoint_get (BoxSqliteDb *db, const char *sandbox_id, const char *id,
                                 GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt =
    box_sqlite_db_prepare (db, "SELECT data, id FROM checkpoints "
                               "WHERE sandbox_id = ?1 AND id = ?2", error);
  g_autofree char *not_found = g_strdup_printf ("no checkpoint %s in sandbox %s", id, sandbox_id);

  if (stmt == NULL)
    return NULL;
  box_sqlite_stmt_bind_text (stmt, 1, sandbox_id);
  box_sqlite_stmt_bind_text (stmt, 2, id);
  return box_sqlite_db_fetch_one (db, stmt, box_sqlite_checkpoint_from_row, not_found, error);
}

GPtrArray *
box_sqlite_store_checkpoint_list (BoxSqliteDb *db, const char *sandbox_id, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt =
    box_sqlite_db_prepare (db, "SELECT data, id FROM checkpoints WHERE sandbox_id = ?1 "
                               "ORDER BY created_at, created_seq", error);

  if (stmt == NULL)
    return NULL;
  box_sqlite_stmt_bind_text (stmt, 1, sandbox_id);
  return box_sqlite_db_collect (db, stmt, box_sqlite_checkpoint_from_row,
                                (GDestroyNotify) box_checkpoint_free, error);
}

gboolean
box_sqlite_store_checkpoint_delete (BoxSqliteDb *db, const char *sandbox_id, const char *id,
                                    GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;
  const char *params[] = { sandbox_id, id };

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL ||
      !box_sqlite_run_text (db, "DELETE FROM checkpoints WHERE sandbox_id = ?1 AND id = ?2",
                            params, G_N_ELEMENTS (params), error))
    return FALSE;
  if (sqlite3_changes (db->handle) == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND,
                 "no checkpoint %s in sandbox %s", id, sandbox_id);
    return FALSE;
  }
  return box_sqlite_txn_commit (txn, error);
}

/* ---- secrets ----------------------------------------------------------- */

static gpointer
box_sqlite_secret_from_row (BoxSqliteStmt *stmt, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GBytes) sealed = NULL;
  BoxSecret *secret;

  if (sqlite3_column_type (stmt, 2) != SQLITE_NULL)
    sealed = g_bytes_new (sqlite3_column_blob (stmt, 2), sqlite3_column_bytes (stmt, 2));
  secret = box_secret_from_storage_json ((const char *) sqlite3_column_text (stmt, 0),
                                         sealed, &local_error);
  if (secret == NULL)
    box_sqlite_set_corrupt_error (error, local_error, "secret",
                                  (const char *) sqlite3_column_text (stmt, 1));
  return secret;
}

/* The stored created_at of a secret; *exists FALSE when there is none. */
static gboolean
box_sqlite_secret_created_at (BoxSqliteDb *db, const BoxSecret *secret, gboolean *exists,
                              gint64 *created_at, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt =
    box_sqlite_db_prepare (db, "SELECT created_at FROM secrets "
                               "WHERE project = ?1 AND name = ?2", error);

  if (stmt == NULL)
    return FALSE;
  box_sqlite_stmt_bind_text (stmt, 1, secret->project);
  box_sqlite_stmt_bind_text (stmt, 2, secret->name);
  if (!box_sqlite_db_step_row (db, stmt, exists, error))
    return FALSE;
  if (*exists)
    *created_at = sqlite3_column_int64 (stmt, 0);
  return TRUE;
}

gboolean
box_sqlite_store_secret_put (BoxSqliteDb *db, const BoxSecret *secret, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;
  g_autoptr(BoxSecret) kept = NULL;
  g_autofree char *data = NULL;
  gint64 created_at = 0;
  gboolean exists = FALSE;
  gconstpointer sealed = NULL;
  gsize sealed_size = 0;

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL ||
      !box_sqlite_secret_created_at (db, secret, &exists, &created_at, error))
    return FALSE;
  if (exists && created_at != secret->created_at) {
    kept = box_secret_copy (secret);
    kept->created_at = created_at;
    secret = kept;
  }

  data = box_secret_to_storage_json (secret);
  if (secret->sealed_value != NULL)
    sealed = g_bytes_get_data (secret->sealed_value, &sealed_size);
  {
    g_autoptr(BoxSqliteStmt) stmt =
      box_sqlite_db_prepare (db, "INSERT INTO secrets (project, name, created_at, data, sealed) "
                                 "VALUES (?1, ?2, ?3, ?4, ?5) "
                                 "ON CONFLICT (project, name) DO UPDATE SET "
                                 "data = excluded.data, sealed = excluded.sealed", error);

    if (stmt == NULL)
      return FALSE;
    box_sqlite_stmt_bind_text (stmt, 1, secret->project);
    box_sqlite_stmt_bind_text (stmt, 2, secret->name);
    sqlite3_bind_int64 (stmt, 3, secret->created_at);
    box_sqlite_stmt_bind_text (stmt, 4, data);
    if (secret->sealed_value != NULL)
      sqlite3_bind_blob64 (stmt, 5, sealed != NULL ? sealed : "", sealed_size, SQLITE_TRANSIENT);
    if (!box_sqlite_db_step_done (db, stmt, error))
      return FALSE;
  }
  return box_sqlite_txn_commit (txn, error);
}

BoxSecret *
box_sqlite_store_secret_get (BoxSqliteDb *db, const char *project, const char *name,
                             GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt =
    box_sqlite_db_prepare (db, "SELECT data, name, sealed FROM secrets "
                               "WHERE project = ?1 AND name = ?2", error);
  g_autofree char *not_found = g_strdup_printf ("no secret %s", name);

  if (stmt == NULL)
    return NULL;
  box_sqlite_stmt_bind_text (stmt, 1, project);
  box_sqlite_stmt_bind_text (stmt, 2, name);
  return box_sqlite_db_fetch_one (db, stmt, box_sqlite_secret_from_row, not_found, error);
}

GPtrArray *
box_sqlite_store_secret_list (BoxSqliteDb *db, const char *project, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt =
    box_sqlite_db_prepare (db, "SELECT data, name, sealed FROM secrets WHERE project = ?1 "
                               "ORDER BY created_at, name", error);

  if (stmt == NULL)
    return NULL;
  box_sqlite_stmt_bind_text (stmt, 1, project);
  return box_sqlite_db_collect (db, stmt, box_sqlite_secret_from_row,
                                (GDestroyNotify) box_secret_free, error);
}

gboolean
box_sqlite_store_secret_delete (BoxSqliteDb *db, const char *project, const char *name,
                                GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;
  const char *params[] = { project, name };

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL ||
      !box_sqlite_run_text (db, "DELETE FROM secrets WHERE project = ?1 AND name = ?2",
                            params, G_N_ELEMENTS (params), error))
    return FALSE;
  if (sqlite3_changes (db->handle) == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no secret %s", name);
    return FALSE;
  }
  return box_sqlite_txn_commit (txn, error);
}
