/* box-sqlite-schema.c: the ordered migration steps.
 *
 * Append a step to change the schema; never edit a step that has shipped.
 * Since version 3 every record is a row of one table, `records` (see
 * box-storage.h): its body holds the record's JSON, so neither a new field
 * nor a new kind needs a step; the other columns exist to be unique, to be
 * indexed or to order lists.  `seq` is the revision of the insert (the
 * insertion order) and `revision` that of the last write; the one row of
 * `revision` holds the last revision handed out.
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
  {
    /* Every row moves, ids, names and times kept; rows are copied in the
     * order they were made, so that seq keeps the checkpoints' insertion
     * order.  A secret's sealed value and a meta value move into the body
     * as hex. */
    3, "one table of generic records with revisions",
    "CREATE TABLE records ("
    "  seq         INTEGER PRIMARY KEY,"
    "  kind        TEXT NOT NULL,"
    "  scope       TEXT NOT NULL,"
    "  id          TEXT NOT NULL,"
    "  name        TEXT,"
    "  lookup      TEXT,"
    "  created_at  INTEGER NOT NULL,"
    "  revision    INTEGER NOT NULL,"
    "  body        TEXT NOT NULL,"
    "  UNIQUE (kind, id)"
    ");"
    "CREATE UNIQUE INDEX records_by_name ON records (kind, scope, name) WHERE name IS NOT NULL;"
    "CREATE UNIQUE INDEX records_by_lookup ON records (kind, lookup) WHERE lookup IS NOT NULL;"
    "CREATE INDEX records_by_scope ON records (kind, scope, created_at, id);"
    "CREATE INDEX records_by_created ON records (kind, created_at, id);"
    "CREATE INDEX records_in_scope ON records (scope);"
    "CREATE TABLE revision (value INTEGER NOT NULL);"
    "INSERT INTO records (kind, scope, id, created_at, revision, body)"
    "  SELECT 'project', '', name, created_at, 0, data FROM projects"
    "  ORDER BY created_at, name;"
    "INSERT INTO records (kind, scope, id, lookup, created_at, revision, body)"
    "  SELECT 'key', project, id, hash, created_at, 0, data FROM keys"
    "  ORDER BY created_at, id;"
    "INSERT INTO records (kind, scope, id, name, created_at, revision, body)"
    "  SELECT 'sandbox', project, id, name, created_at, 0, data FROM sandboxes"
    "  ORDER BY created_at, id;"
    "INSERT INTO records (kind, scope, id, name, created_at, revision, body)"
    "  SELECT 'checkpoint', sandbox_id, sandbox_id || '/' || id, id, created_at, 0, data"
    "  FROM checkpoints ORDER BY created_at, created_seq;"
    "INSERT INTO records (kind, scope, id, name, created_at, revision, body)"
    "  SELECT 'secret', project, project || '/' || name, name, created_at, 0,"
    "    CASE WHEN sealed IS NULL THEN data"
    "         ELSE json_set (data, '$.sealed', lower (hex (sealed))) END"
    "  FROM secrets ORDER BY created_at, project, name;"
    "INSERT INTO records (kind, scope, id, created_at, revision, body)"
    "  SELECT 'meta', '', key, 0, 0, json_object ('value', lower (hex (value))) FROM meta"
    "  ORDER BY key;"
    "UPDATE records SET revision = seq;"
    "INSERT INTO revision (value) SELECT COALESCE (MAX (seq), 0) FROM records;"
    "DROP TABLE projects;"
    "DROP TABLE keys;"
    "DROP TABLE sandboxes;"
    "DROP TABLE checkpoints;"
    "DROP TABLE secrets;"
    "DROP TABLE meta;"
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
