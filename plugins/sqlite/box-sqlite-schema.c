/* box-sqlite-schema.c: the ordered migration steps.
 *
 * Append a step to change the schema; never edit a step that has shipped.
 * The `data` columns hold the records' storage JSON (box-records.h), so a
 * new record field needs no step; the other columns exist to be indexed,
 * to be unique or to order lists.
 */
#include "config.h"

#include "box-sqlite-schema.h"

typedef struct {
  int         version;
  const char *summary;
  const char *sql;
} BoxSqliteMigration;

static const BoxSqliteMigration migrations[] = {
  {
    1, "the record tables",
    "PRAGMA application_id = 1651472484;"   /* BOX_SQLITE_APPLICATION_ID */
    "CREATE TABLE projects ("
    "  name        TEXT PRIMARY KEY NOT NULL,"
    "  created_at  INTEGER NOT NULL,"
    "  data        TEXT NOT NULL"
    ");"
    "CREATE TABLE keys ("
    "  id          TEXT PRIMARY KEY NOT NULL,"
    "  project     TEXT NOT NULL,"
    "  hash        TEXT NOT NULL UNIQUE,"
    "  created_at  INTEGER NOT NULL,"
    "  data        TEXT NOT NULL"
    ");"
    "CREATE TABLE sandboxes ("
    "  id          TEXT PRIMARY KEY NOT NULL,"
    "  project     TEXT NOT NULL,"
    "  name        TEXT NOT NULL,"
    "  state       TEXT NOT NULL,"
    "  created_at  INTEGER NOT NULL,"
    "  data        TEXT NOT NULL,"
    "  UNIQUE (project, name)"
    ");"
    "CREATE TABLE checkpoints ("
    "  sandbox_id  TEXT NOT NULL,"
    "  id          TEXT NOT NULL,"
    "  project     TEXT NOT NULL,"
    "  created_at  INTEGER NOT NULL,"
    "  created_seq INTEGER NOT NULL,"
    "  data        TEXT NOT NULL,"
    "  PRIMARY KEY (sandbox_id, id)"
    ");"
    "CREATE TABLE secrets ("
    "  project     TEXT NOT NULL,"
    "  name        TEXT NOT NULL,"
    "  created_at  INTEGER NOT NULL,"
    "  data        TEXT NOT NULL,"
    "  sealed      BLOB,"
    "  PRIMARY KEY (project, name)"
    ");"
  },
  {
    2, "list indexes and the meta table",
    "CREATE INDEX keys_by_project ON keys (project, created_at, id);"
    "CREATE INDEX sandboxes_by_project ON sandboxes (project, created_at, id);"
    "CREATE INDEX sandboxes_by_created ON sandboxes (created_at, id);"
    "CREATE INDEX checkpoints_by_project ON checkpoints (project);"
    "CREATE INDEX checkpoints_by_created ON checkpoints (sandbox_id, created_at, created_seq);"
    "CREATE INDEX secrets_by_created ON secrets (project, created_at, name);"
    "CREATE TABLE meta ("
    "  key         TEXT PRIMARY KEY NOT NULL,"
    "  value       BLOB NOT NULL"
    ");"
  },
};

G_STATIC_ASSERT (G_N_ELEMENTS (migrations) == BOX_SQLITE_SCHEMA_VERSION);

static gboolean
box_sqlite_schema_get_application_id (BoxSqliteDb *db, gint64 *id, GError **error)
{
  g_autoptr(BoxSqliteStmt) stmt = box_sqlite_db_prepare (db, "PRAGMA application_id", error);
  gboolean has_row = FALSE;

  if (stmt == NULL || !box_sqlite_db_step_row (db, stmt, &has_row, error))
    return FALSE;
  /* the pragma is a signed 32-bit value */
  *id = has_row ? (guint32) sqlite3_column_int (stmt, 0) : 0;
  return TRUE;
}

gboolean
box_sqlite_schema_check (BoxSqliteDb *db, int *version, GError **error)
{
  gint64 app_id = 0;

  if (!box_sqlite_schema_get_application_id (db, &app_id, error) ||
      !box_sqlite_db_get_user_version (db, version, error))
    return FALSE;
  if (app_id != 0 && app_id != BOX_SQLITE_APPLICATION_ID) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "not a box database (application_id %" G_GINT64_FORMAT ")", app_id);
    return FALSE;
  }
  if (*version < 0 || *version > BOX_SQLITE_SCHEMA_VERSION) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "schema version %d is newer than this boxd understands (%d); "
                 "refusing to use it (upgrade boxd or restore a backup)",
                 *version, BOX_SQLITE_SCHEMA_VERSION);
    return FALSE;
  }
  return TRUE;
}

/* One step in its own transaction; the version is read again inside it, so
 * two processes opening the same file do not apply a step twice. */
static gboolean
box_sqlite_schema_apply (BoxSqliteDb *db, const BoxSqliteMigration *step, GError **error)
{
  g_autoptr(BoxSqliteTxn) txn = box_sqlite_txn_begin (db, error);
  g_autoptr(GError) local_error = NULL;
  g_autofree char *set_version = NULL;
  int version = 0;

  if (txn == NULL || !box_sqlite_schema_check (db, &version, error))
    return FALSE;
  if (version >= step->version)
    return TRUE;   /* someone else did it; the rollback is harmless */
  if (version != step->version - 1) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "schema version %d cannot move to %d", version, step->version);
    return FALSE;
  }
  set_version = g_strdup_printf ("PRAGMA user_version = %d", step->version);
  if (!box_sqlite_db_exec (db, step->sql, &local_error) ||
      !box_sqlite_db_exec (db, set_version, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "migrating to schema version %d (%s): %s",
                 step->version, step->summary, local_error->message);
    return FALSE;
  }
  if (!box_sqlite_txn_commit (txn, error))
    return FALSE;
  g_debug ("sqlite: %s now at schema version %d (%s)", db->path, step->version, step->summary);
  return TRUE;
}

gboolean
box_sqlite_schema_migrate (BoxSqliteDb *db, int target, GError **error)
{
  int version = 0;

  g_return_val_if_fail (target <= BOX_SQLITE_SCHEMA_VERSION, FALSE);

  if (!box_sqlite_db_get_user_version (db, &version, error))
    return FALSE;
  for (gsize i = 0; i < G_N_ELEMENTS (migrations); i++) {
    const BoxSqliteMigration *step = &migrations[i];

    if (step->version <= version)
      continue;
    if (step->version > target)
      break;
    if (!box_sqlite_schema_apply (db, step, error))
      return FALSE;
  }
  return TRUE;
}
