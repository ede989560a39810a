/* box-sqlite-store-projects.c: projects, keys and meta values. */
#include "config.h"

#include "box-sqlite-store.h"

/* ---- projects ---------------------------------------------------------- */

static gpointer
box_sqlite_project_from_row (BoxSqliteStmt *stmt, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  BoxProject *project;

  project = box_project_from_storage_json ((const char *) sqlite3_column_text (stmt, 0),
                                           &local_error);
  if (project == NULL)
    box_sqlite_set_corrupt_error (error, local_error, "project",
                                  (const char *) sqlite3_column_text (stmt, 1));
  return project;
}

static gboolean
box_sqlite_project_exists (BoxSqliteDb *db, const char *name, gboolean *exists, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt =
    box_sqlite_db_prepare (db, "SELECT 1 FROM projects WHERE name = ?1", error);

  if (stmt == NULL)
    return FALSE;
  box_sqlite_stmt_bind_text (stmt, 1, name);
  return box_sqlite_db_exists (db, stmt, exists, error);
}

gboolean
box_sqlite_store_project_insert (BoxSqliteDb *db, const BoxProject *project, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;
  g_autofree char *data = NULL;
  gboolean exists = FALSE;

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL || !box_sqlite_project_exists (db, project->name, &exists, error))
    return FALSE;
  if (exists) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                 "a project named \"%s\" already exists", project->name);
    return FALSE;
  }

  data = box_project_to_storage_json (project);
  {
    g_autoptr(BoxSqliteStmt) stmt =
      box_sqlite_db_prepare (db, "INSERT INTO projects (name, created_at, data) "
                                 "VALUES (?1, ?2, ?3)", error);

    if (stmt == NULL)
      return FALSE;
    box_sqlite_stmt_bind_text (stmt, 1, project->name);
    sqlite3_bind_int64 (stmt, 2, project->created_at);
    box_sqlite_stmt_bind_text (stmt, 3, data);
    if (!box_sqlite_db_step_done (db, stmt, error))
      return FALSE;
  }
  return box_sqlite_txn_commit (txn, error);
}

gboolean
box_sqlite_store_project_update (BoxSqliteDb *db, const BoxProject *project, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;
  g_autofree char *data = box_project_to_storage_json (project);

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL)
    return FALSE;
  {
    g_autoptr(BoxSqliteStmt) stmt =
      box_sqlite_db_prepare (db, "UPDATE projects SET created_at = ?2, data = ?3 "
                                 "WHERE name = ?1", error);

    if (stmt == NULL)
      return FALSE;
    box_sqlite_stmt_bind_text (stmt, 1, project->name);
    sqlite3_bind_int64 (stmt, 2, project->created_at);
    box_sqlite_stmt_bind_text (stmt, 3, data);
    if (!box_sqlite_db_step_done (db, stmt, error))
      return FALSE;
  }
  if (sqlite3_changes (db->handle) == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no project %s", project->name);
    return FALSE;
  }
  return box_sqlite_txn_commit (txn, error);
}

BoxProject *
box_sqlite_store_project_get (BoxSqliteDb *db, const char *name, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt =
    box_sqlite_db_prepare (db, "SELECT data, name FROM projects WHERE name = ?1", error);
  g_autofree char *not_found = g_strdup_printf ("no project %s", name);

  if (stmt == NULL)
    return NULL;
  box_sqlite_stmt_bind_text (stmt, 1, name);
  return box_sqlite_db_fetch_one (db, stmt, box_sqlite_project_from_row, not_found, error);
}

GPtrArray *
box_sqlite_store_project_list (BoxSqliteDb *db, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt =
    box_sqlite_db_prepare (db, "SELECT data, name FROM projects ORDER BY created_at, name", error);

  if (stmt == NULL)
    return NULL;
  return box_sqlite_db_collect (db, stmt, box_sqlite_project_from_row,
                                (GDestroyNotify) box_project_free, error);
}

/* Everything that belongs to a project, in the caller's transaction. */
static gboolean
box_sqlite_project_delete_children (BoxSqliteDb *db, const char *name, GError **error)
{
  static const char *const statements[] = {
    "DELETE FROM checkpoints WHERE project = ?1 "
    "  OR sandbox_id IN (SELECT id FROM sandboxes WHERE project = ?1)",
    "DELETE FROM sandboxes WHERE project = ?1",
    "DELETE FROM secrets WHERE project = ?1",
    "DELETE FROM keys WHERE project = ?1",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (statements); i++) {
    g_autoptr(BoxSqliteStmt) stmt = box_sqlite_db_prepare (db, statements[i], error);

    if (stmt == NULL)
      return FALSE;
    box_sqlite_stmt_bind_text (stmt, 1, name);
    if (!box_sqlite_db_step_done (db, stmt, error))
      return FALSE;
  }
  return TRUE;
}

gboolean
box_sqlite_store_project_delete (BoxSqliteDb *db, const char *name, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL)
    return FALSE;
  {
    g_autoptr(BoxSqliteStmt) stmt =
      box_sqlite_db_prepare (db, "DELETE FROM projects WHERE name = ?1", error);

    if (stmt == NULL)
      return FALSE;
    box_sqlite_stmt_bind_text (stmt, 1, name);
    if (!box_sqlite_db_step_done (db, stmt, error))
      return FALSE;
  }
  if (sqlite3_changes (db->handle) == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no project %s", name);
    return FALSE;
  }
  if (!box_sqlite_project_delete_children (db, name, error))
    return FALSE;
  return box_sqlite_txn_commit (txn, error);
}

/* ---- keys -------------------------------------------------------------- */

/* Keys have no storage form in box-records.h; this plugin owns this one:
 * {"id", "name", "project", "hash", "created_at" (microseconds)}. */
static char *
box_sqlite_key_to_json (const BoxKey *key)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "id");
  json_builder_add_string_value (builder, key->id);
  json_builder_set_member_name (builder, "name");
  json_builder_add_string_value (builder, key->name);
  json_builder_set_member_name (builder, "project");
  json_builder_add_string_value (builder, key->project);
  json_builder_set_member_name (builder, "hash");
  json_builder_add_string_value (builder, key->hash);
  json_builder_set_member_name (builder, "created_at");
  json_builder_add_int_value (builder, key->created_at);
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  return json_to_string (root, FALSE);
}

static gpointer
box_sqlite_key_from_row (BoxSqliteStmt *stmt, GError **error)
{
  const char *id = (const char *) sqlite3_column_text (stmt, 1);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) local_error = NULL;
  g_autoptr(BoxKey) key = g_new0 (BoxKey, 1);
  JsonObject *obj;
  JsonNode *root;

  if (!json_parser_load_from_data (parser, (const char *) sqlite3_column_text (stmt, 0), -1,
                                   &local_error)) {
    box_sqlite_set_corrupt_error (error, local_error, "key", id);
    return NULL;
  }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    box_sqlite_set_corrupt_error (error, NULL, "key", id);
    return NULL;
  }
  obj = json_node_get_object (root);
  key->id = g_strdup (json_object_get_string_member_with_default (obj, "id", id));
  key->name = g_strdup (json_object_get_string_member_with_default (obj, "name", ""));
  key->project = g_strdup (json_object_get_string_member_with_default (obj, "project", ""));
  key->hash = g_strdup (json_object_get_string_member_with_default (obj, "hash", ""));
  key->created_at = json_object_get_int_member_with_default (obj, "created_at", 0);
  return g_steal_pointer (&key);
}

static gboolean
box_sqlite_key_exists (BoxSqliteDb *db, const char *sql, const char *value,
                       gboolean *exists, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = box_sqlite_db_prepare (db, sql, error);

  if (stmt == NULL)
    return FALSE;
  box_sqlite_stmt_bind_text (stmt, 1, value);
  return box_sqlite_db_exists (db, stmt, exists, error);
}

gboolean
box_sqlite_store_key_insert (BoxSqliteDb *db, const BoxKey *key, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;
  g_autofree char *data = NULL;
  gboolean exists = FALSE;

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL ||
      !box_sqlite_key_exists (db, "SELECT 1 FROM keys WHERE id = ?1", key->id, &exists, error))
    return FALSE;
  if (exists) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                 "a key with ID \"%s\" already exists", key->id);
    return FALSE;
  }
  if (!box_sqlite_key_exists (db, "SELECT 1 FROM keys WHERE hash = ?1", key->hash, &exists, error))
    return FALSE;
  if (exists) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                         "a key with the same secret already exists");
    return FALSE;
  }

  data = box_sqlite_key_to_json (key);
  {
    g_autoptr(BoxSqliteStmt) stmt =
      box_sqlite_db_prepare (db, "INSERT INTO keys (id, project, hash, created_at, data) "
                                 "VALUES (?1, ?2, ?3, ?4, ?5)", error);

    if (stmt == NULL)
      return FALSE;
    box_sqlite_stmt_bind_text (stmt, 1, key->id);
    box_sqlite_stmt_bind_text (stmt, 2, key->project);
    box_sqlite_stmt_bind_text (stmt, 3, key->hash);
    sqlite3_bind_int64 (stmt, 4, key->created_at);
    box_sqlite_stmt_bind_text (stmt, 5, data);
    if (!box_sqlite_db_step_done (db, stmt, error))
      return FALSE;
  }
  return box_sqlite_txn_commit (txn, error);
}

BoxKey *
box_sqlite_store_key_get_by_hash (BoxSqliteDb *db, const char *hash, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt =
    box_sqlite_db_prepare (db, "SELECT data, id FROM keys WHERE hash = ?1", error);

  if (stmt == NULL)
    return NULL;
  box_sqlite_stmt_bind_text (stmt, 1, hash);
  return box_sqlite_db_fetch_one (db, stmt, box_sqlite_key_from_row,
                                  "no key with that secret", error);
}

GPtrArray *
box_sqlite_store_key_list (BoxSqliteDb *db, const char *project, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt = NULL;

  if (project != NULL) {
    stmt = box_sqlite_db_prepare (db, "SELECT data, id FROM keys WHERE project = ?1 "
                                      "ORDER BY created_at, id", error);
    if (stmt != NULL)
      box_sqlite_stmt_bind_text (stmt, 1, project);
  } else {
    stmt = box_sqlite_db_prepare (db, "SELECT data, id FROM keys ORDER BY created_at, id", error);
  }
  if (stmt == NULL)
    return NULL;
  return box_sqlite_db_collect (db, stmt, box_sqlite_key_from_row,
                                (GDestroyNotify) box_key_free, error);
}

gboolean
box_sqlite_store_key_delete (BoxSqliteDb *db, const char *project, const char *id, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL)
    return FALSE;
  {
    g_autoptr(BoxSqliteStmt) stmt =
      box_sqlite_db_prepare (db, "DELETE FROM keys WHERE id = ?1 "
                                 "AND (?2 IS NULL OR project = ?2)", error);

    if (stmt == NULL)
      return FALSE;
    box_sqlite_stmt_bind_text (stmt, 1, id);
    box_sqlite_stmt_bind_text (stmt, 2, project);
    if (!box_sqlite_db_step_done (db, stmt, error))
      return FALSE;
  }
  if (sqlite3_changes (db->handle) == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no key %s", id);
    return FALSE;
  }
  return box_sqlite_txn_commit (txn, error);
}

/* ---- meta -------------------------------------------------------------- */

static gpointer
box_sqlite_bytes_from_row (BoxSqliteStmt *stmt, GError **error)
{
  return g_bytes_new (sqlite3_column_blob (stmt, 0), sqlite3_column_bytes (stmt, 0));
}

GBytes *
box_sqlite_store_meta_get (BoxSqliteDb *db, const char *key, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteStmt) stmt =
    box_sqlite_db_prepare (db, "SELECT value FROM meta WHERE key = ?1", error);
  g_autofree char *not_found = g_strdup_printf ("no meta value %s", key);

  if (stmt == NULL)
    return NULL;
  box_sqlite_stmt_bind_text (stmt, 1, key);
  return box_sqlite_db_fetch_one (db, stmt, box_sqlite_bytes_from_row, not_found, error);
}

gboolean
box_sqlite_store_meta_set (BoxSqliteDb *db, const char *key, GBytes *value, GError **error)
{
  BOX_SQLITE_DB_LOCK (db);
  g_autoptr(BoxSqliteTxn) txn = NULL;
  gsize size = 0;
  gconstpointer bytes = g_bytes_get_data (value, &size);

  txn = box_sqlite_txn_begin (db, error);
  if (txn == NULL)
    return FALSE;
  {
    g_autoptr(BoxSqliteStmt) stmt =
      box_sqlite_db_prepare (db, "INSERT INTO meta (key, value) VALUES (?1, ?2) "
                                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                             error);

    if (stmt == NULL)
      return FALSE;
    box_sqlite_stmt_bind_text (stmt, 1, key);
    /* a NULL pointer would bind SQL NULL; an empty value is an empty blob */
    sqlite3_bind_blob64 (stmt, 2, bytes != NULL ? bytes : "", size, SQLITE_TRANSIENT);
    if (!box_sqlite_db_step_done (db, stmt, error))
      return FALSE;
  }
  return box_sqlite_txn_commit (txn, error);
}
