/* sqlite-test-records.c: the generic record interface (compare-and-swap,
 * batches, scopes, async) and the migration of a data directory written by
 * the release before it (tests/e2e/fixtures/data-v2.sql). */
#include "config.h"

#include <sqlite3.h>

#include "sqlite-test.h"

/* ---- the generic interface -------------------------------------------- */

static BoxStorageRecord *
record (const char *kind, const char *scope, const char *id, const char *name, gint64 at)
{
  BoxStorageRecord *r = box_storage_record_new (kind, scope, id, "{\"n\":1}");

  r->name = g_strdup (name);
  r->created_at = at;
  return r;
}

void
test_records_cas (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxStorageRecord) a = record ("task", "p", "t-1", "build", 10);
  g_autoptr(BoxStorageRecord) stale = NULL;
  g_autoptr(BoxStorageRecord) got = NULL;
  guint64 first;

  /* a kind no code has heard of */
  g_assert_true (box_storage_insert (fx->storage, a, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (a->revision, >, 0);
  g_assert_cmpuint (a->create_revision, ==, a->revision);
  first = a->revision;
  stale = box_storage_record_copy (a);

  g_free (a->body);
  a->body = g_strdup ("{\"n\":2}");
  g_assert_true (box_storage_update (fx->storage, a, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (a->revision, >, first);

  /* the stale copy names the revision it read: conflict, nothing written */
  g_free (stale->body);
  stale->body = g_strdup ("{\"n\":3}");
  g_assert_false (box_storage_update (fx->storage, stale, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_clear_error (&error);
  g_assert_cmpuint (stale->revision, ==, first);
  g_assert_false (box_storage_delete (fx->storage, "task", "p", "t-1", first, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_clear_error (&error);

  got = box_storage_get (fx->storage, "task", "p", BOX_STORAGE_BY_NAME, "build", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->body, ==, "{\"n\":2}");
  g_assert_cmpuint (got->revision, ==, a->revision);
  g_assert_cmpuint (got->create_revision, ==, first);

  /* revision 0: unconditional */
  stale->revision = 0;
  g_assert_true (box_storage_update (fx->storage, stale, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stale->revision, >, a->revision);
  g_assert_true (box_storage_delete (fx->storage, "task", "p", "t-1", stale->revision, &error));
  g_assert_no_error (error);
  g_clear_pointer (&got, box_storage_record_free);
  got = box_storage_get (fx->storage, "task", NULL, BOX_STORAGE_BY_ID, "t-1", &error);
  g_assert_null (got);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "no task t-1");
}

/* Reads of a sandbox come from the parsed copy a store keeps while the
 * record's revision is the one parsed: every read is a copy of its own,
 * and a write by anyone (the typed helpers or the generic interface) is
 * seen at once. */
void
test_sandbox_reads (Fixture *fx, gconstpointer data)
{
  g_autoptr(BoxSandbox) sandbox = make_sandbox ("sb-aaaaaaaaaaaa", "p", "web", 10);
  g_autoptr(BoxSandbox) first = NULL;
  g_autoptr(BoxSandbox) second = NULL;
  g_autoptr(BoxSandbox) third = NULL;
  g_autoptr(BoxSandbox) fourth = NULL;
  g_autoptr(BoxStorageRecord) raw = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *first_json = NULL;
  g_autofree char *second_json = NULL;
  g_autofree char *body = NULL;

  g_assert_true (box_storage_sandbox_insert (fx->storage, sandbox, &error));
  g_assert_no_error (error);
  first = box_storage_sandbox_get (fx->storage, "p", "sb-aaaaaaaaaaaa", &error);
  g_assert_no_error (error);
  /* a caller's change to its copy is its own */
  g_hash_table_replace (first->labels, g_strdup ("team"), g_strdup ("changed"));
  second = box_storage_sandbox_get (fx->storage, "p", "web", &error);
  g_assert_no_error (error);
  g_assert_true (first != second);
  g_assert_cmpstr (g_hash_table_lookup (second->labels, "team"), ==, "blue");
  g_assert_cmpuint (second->revision, ==, sandbox->revision);
  first_json = box_sandbox_to_storage_json (sandbox);
  second_json = box_sandbox_to_storage_json (second);
  g_assert_cmpstr (second_json, ==, first_json);

  /* a typed update is read back */
  g_hash_table_replace (second->labels, g_strdup ("team"), g_strdup ("red"));
  g_assert_true (box_storage_sandbox_update (fx->storage, second, &error));
  g_assert_no_error (error);
  third = box_storage_sandbox_get (fx->storage, "p", "sb-aaaaaaaaaaaa", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (g_hash_table_lookup (third->labels, "team"), ==, "red");
  g_assert_cmpuint (third->revision, ==, second->revision);

  /* so is a write through the generic interface, by another writer */
  raw = box_storage_get (fx->storage, "sandbox", "p", BOX_STORAGE_BY_ID, "sb-aaaaaaaaaaaa",
                         &error);
  g_assert_no_error (error);
  g_hash_table_replace (third->labels, g_strdup ("team"), g_strdup ("green"));
  body = box_sandbox_to_storage_json (third);
  g_free (raw->body);
  raw->body = g_steal_pointer (&body);
  g_assert_true (box_storage_update (fx->storage, raw, &error));
  g_assert_no_error (error);
  fourth = box_storage_sandbox_get (fx->storage, "p", "web", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (g_hash_table_lookup (fourth->labels, "team"), ==, "green");
  g_assert_cmpuint (fourth->revision, ==, raw->revision);
  g_assert_cmpuint (fourth->revision, >, third->revision);
}

void
test_records_batch (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxStorageRecord) x = record ("svc", "sb-1", "s-x", "x", 5);
  g_autoptr(BoxStorageRecord) y = record ("svc", "sb-1", "s-y", "y", 5);
  g_autoptr(BoxStorageRecord) clash = record ("svc", "sb-1", "s-z", "x", 5);
  g_autoptr(BoxStorageRecord) other = record ("usage", "sb-2", "u-1", NULL, 1);
  g_autoptr(BoxStorageRecord) scope = box_storage_record_new (NULL, "sb-1", NULL, NULL);
  g_autoptr(GPtrArray) list = NULL;
  BoxStorageOp bad[] = { { BOX_STORAGE_OP_INSERT, x }, { BOX_STORAGE_OP_INSERT, clash } };
  BoxStorageOp good[] = { { BOX_STORAGE_OP_INSERT, y }, { BOX_STORAGE_OP_INSERT, x },
                          { BOX_STORAGE_OP_INSERT, other } };
  BoxStorageOp wipe[] = { { BOX_STORAGE_OP_DELETE_SCOPE, scope } };

  /* all or nothing: the name clash undoes the first insert */
  g_assert_false (box_storage_write (fx->storage, bad, G_N_ELEMENTS (bad), &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);
  g_clear_error (&error);
  g_assert_cmpuint (x->revision, ==, 0);
  list = box_storage_list (fx->storage, "svc", NULL, BOX_STORAGE_BY_SCOPE, NULL,
                           BOX_STORAGE_ORDER_CREATED, &error);
  g_assert_cmpuint (list->len, ==, 0);
  g_clear_pointer (&list, g_ptr_array_unref);

  g_assert_true (box_storage_write (fx->storage, good, G_N_ELEMENTS (good), &error));
  g_assert_no_error (error);
  g_assert_cmpuint (x->revision, >, y->revision);
  /* same created_at: by id, or by insertion */
  list = box_storage_list (fx->storage, "svc", "sb-1", BOX_STORAGE_BY_SCOPE, NULL,
                           BOX_STORAGE_ORDER_CREATED, &error);
  g_assert_cmpuint (list->len, ==, 2);
  g_assert_cmpstr (((BoxStorageRecord *) list->pdata[0])->id, ==, "s-x");
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_list (fx->storage, "svc", "sb-1", BOX_STORAGE_BY_SCOPE, NULL,
                           BOX_STORAGE_ORDER_INSERTED, &error);
  g_assert_cmpstr (((BoxStorageRecord *) list->pdata[0])->id, ==, "s-y");
  g_clear_pointer (&list, g_ptr_array_unref);

  /* deleting a scope takes every kind in it and nothing else */
  g_assert_true (box_storage_write (fx->storage, wipe, G_N_ELEMENTS (wipe), &error));
  g_assert_no_error (error);
  list = box_storage_list (fx->storage, "svc", NULL, BOX_STORAGE_BY_SCOPE, NULL,
                           BOX_STORAGE_ORDER_CREATED, &error);
  g_assert_cmpuint (list->len, ==, 0);
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_list (fx->storage, "usage", "sb-2", BOX_STORAGE_BY_SCOPE, NULL,
                           BOX_STORAGE_ORDER_CREATED, &error);
  g_assert_cmpuint (list->len, ==, 1);
}

static void
async_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GAsyncResult **out = user_data;

  *out = g_object_ref (result);
}

static GAsyncResult *
wait_result (GAsyncResult **slot)
{
  while (*slot == NULL)
    g_main_context_iteration (NULL, TRUE);
  return *slot;
}

void
test_records_async (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxStorageRecord) a = record ("task", "", "t-a", NULL, 1);
  g_autoptr(BoxStorageRecord) got = NULL;
  g_autoptr(GPtrArray) list = NULL;
  GAsyncResult *result = NULL;
  BoxStorageOp ops[] = { { BOX_STORAGE_OP_INSERT, a } };

  box_storage_write_async (fx->storage, ops, 1, NULL, async_done, &result);
  g_assert_true (box_storage_write_finish (fx->storage, wait_result (&result), &error));
  g_assert_no_error (error);
  g_assert_cmpuint (a->revision, >, 0);
  g_clear_object (&result);

  box_storage_get_async (fx->storage, "task", NULL, BOX_STORAGE_BY_ID, "t-a", NULL, async_done,
                         &result);
  got = box_storage_get_finish (fx->storage, wait_result (&result), &error);
  g_assert_no_error (error);
  g_assert_cmpuint (got->revision, ==, a->revision);
  g_clear_object (&result);

  box_storage_get_async (fx->storage, "task", NULL, BOX_STORAGE_BY_ID, "t-none", NULL,
                         async_done, &result);
  g_assert_null (box_storage_get_finish (fx->storage, wait_result (&result), &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_clear_object (&result);

  box_storage_list_async (fx->storage, "task", "", BOX_STORAGE_BY_SCOPE, NULL,
                          BOX_STORAGE_ORDER_CREATED, NULL, async_done, &result);
  list = box_storage_list_finish (fx->storage, wait_result (&result), &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, 1);
  g_clear_object (&result);
}

/* ---- migration of a data directory of the previous release ------------ */

typedef struct {
  char   *key;      /* first column */
  char   *key2;     /* second column */
  char   *data;     /* storage JSON */
  GBytes *blob;     /* sealed / meta value */
} OldRow;

static void
old_row_free (OldRow *row)
{
  g_free (row->key);
  g_free (row->key2);
  g_free (row->data);
  g_clear_pointer (&row->blob, g_bytes_unref);
  g_free (row);
}

/* @sql: SELECT key, key2, data, blob */
static GPtrArray *
old_rows (sqlite3 *db, const char *sql)
{
  GPtrArray *rows = g_ptr_array_new_with_free_func ((GDestroyNotify) old_row_free);
  sqlite3_stmt *stmt = NULL;

  g_assert_cmpint (sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL), ==, SQLITE_OK);
  while (sqlite3_step (stmt) == SQLITE_ROW) {
    OldRow *row = g_new0 (OldRow, 1);

    row->key = g_strdup ((const char *) sqlite3_column_text (stmt, 0));
    row->key2 = g_strdup ((const char *) sqlite3_column_text (stmt, 1));
    row->data = g_strdup ((const char *) sqlite3_column_text (stmt, 2));
    if (sqlite3_column_type (stmt, 3) != SQLITE_NULL)
      row->blob = g_bytes_new (sqlite3_column_blob (stmt, 3), sqlite3_column_bytes (stmt, 3));
    g_ptr_array_add (rows, row);
  }
  sqlite3_finalize (stmt);
  return rows;
}

typedef char *(*ToJson) (gconstpointer record);
typedef gpointer (*FromJson) (const char *json, GError **error);

/* The typed record read now has the storage form of the old row. */
static void
assert_same (gconstpointer got, const char *old_json, FromJson from_json, ToJson to_json,
             GDestroyNotify free_func)
{
  gpointer want = from_json (old_json, NULL);
  g_autofree char *want_json = NULL;
  g_autofree char *got_json = NULL;

  g_assert_nonnull (got);
  g_assert_nonnull (want);
  want_json = to_json (want);
  got_json = to_json (got);
  g_assert_cmpstr (got_json, ==, want_json);
  free_func (want);
}

void
test_migrate_v2_fixture (Fixture *fx, gconstpointer data)
{
  const char *root = g_getenv ("BOX_SOURCE_ROOT");
  g_autofree char *sql_path = NULL;
  g_autofree char *sql = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) projects = NULL, keys = NULL, sandboxes = NULL;
  g_autoptr(GPtrArray) checkpoints = NULL, secrets = NULL, meta = NULL;
  g_autoptr(GPtrArray) list = NULL;
  g_autoptr(BoxSandbox) fresh = NULL;
  guint64 newest = 0;
  sqlite3 *raw = NULL;
  char *errmsg = NULL;

  g_assert_nonnull (root);   /* meson sets it */
  sql_path = g_build_filename (root, "tests", "e2e", "fixtures", "data-v2.sql", NULL);
  g_assert_true (g_file_get_contents (sql_path, &sql, NULL, &error));
  g_assert_cmpint (sqlite3_open (fx->path, &raw), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_exec (raw, sql, NULL, NULL, &errmsg), ==, SQLITE_OK);
  projects = old_rows (raw, "SELECT name, '', data, NULL FROM projects ORDER BY created_at, name");
  keys = old_rows (raw, "SELECT hash, project, data, NULL FROM keys ORDER BY created_at, id");
  sandboxes = old_rows (raw, "SELECT id, project, data, NULL FROM sandboxes");
  checkpoints = old_rows (raw, "SELECT id, sandbox_id, data, NULL FROM checkpoints "
                               "ORDER BY sandbox_id, created_at, created_seq");
  secrets = old_rows (raw, "SELECT name, project, data, sealed FROM secrets");
  meta = old_rows (raw, "SELECT key, '', '', value FROM meta");
  sqlite3_close (raw);
  g_assert_cmpuint (projects->len, ==, 2);
  g_assert_cmpuint (keys->len, ==, 3);
  g_assert_cmpuint (sandboxes->len, ==, 4);
  g_assert_cmpuint (checkpoints->len, ==, 4);
  g_assert_cmpuint (secrets->len, ==, 3);
  g_assert_cmpuint (meta->len, ==, 1);

  fx->storage = storage_open (fx->path);

  list = box_storage_project_list (fx->storage, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, projects->len);
  for (guint i = 0; i < projects->len; i++) {
    OldRow *row = projects->pdata[i];
    BoxProject *got = list->pdata[i];

    g_assert_cmpstr (got->name, ==, row->key);
    g_assert_cmpuint (got->revision, >, 0);
    newest = MAX (newest, got->revision);
    assert_same (got, row->data, (FromJson) box_project_from_storage_json,
                 (ToJson) box_project_to_storage_json, (GDestroyNotify) box_project_free);
  }
  g_clear_pointer (&list, g_ptr_array_unref);

  /* keys are found by their hash: the old secrets still authenticate */
  for (guint i = 0; i < keys->len; i++) {
    OldRow *row = keys->pdata[i];
    g_autoptr(BoxKey) got = box_storage_key_get_by_hash (fx->storage, row->key, &error);

    g_assert_no_error (error);
    g_assert_cmpstr (got->project, ==, row->key2);
    assert_same (got, row->data, (FromJson) box_key_from_storage_json,
                 (ToJson) box_key_to_storage_json, (GDestroyNotify) box_key_free);
  }
  list = box_storage_key_list (fx->storage, "alpha", &error);
  g_assert_cmpuint (list->len, ==, 2);
  g_clear_pointer (&list, g_ptr_array_unref);

  /* sandboxes by ID and by name, every field kept */
  for (guint i = 0; i < sandboxes->len; i++) {
    OldRow *row = sandboxes->pdata[i];
    g_autoptr(BoxSandbox) by_id = box_storage_sandbox_get (fx->storage, row->key2, row->key, &error);
    g_autoptr(BoxSandbox) by_name = NULL;

    g_assert_no_error (error);
    by_name = box_storage_sandbox_get (fx->storage, row->key2, by_id->name, &error);
    g_assert_no_error (error);
    g_assert_cmpstr (by_name->id, ==, row->key);
    newest = MAX (newest, by_id->revision);
    assert_same (by_id, row->data, (FromJson) box_sandbox_from_storage_json,
                 (ToJson) box_sandbox_to_storage_json, (GDestroyNotify) box_sandbox_free);
  }

  /* checkpoints: oldest first, then in the order they were made */
  {
    const char *sandbox_id = ((OldRow *) checkpoints->pdata[0])->key2;

    list = box_storage_checkpoint_list (fx->storage, sandbox_id, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (list->len, ==, checkpoints->len);
    for (guint i = 0; i < checkpoints->len; i++) {
      OldRow *row = checkpoints->pdata[i];
      g_autoptr(BoxCheckpoint) got = box_storage_checkpoint_get (fx->storage, row->key2, row->key,
                                                                 &error);

      g_assert_no_error (error);
      g_assert_cmpstr (((BoxCheckpoint *) list->pdata[i])->id, ==, row->key);
      assert_same (got, row->data, (FromJson) box_checkpoint_from_storage_json,
                   (ToJson) box_checkpoint_to_storage_json, (GDestroyNotify) box_checkpoint_free);
    }
    g_clear_pointer (&list, g_ptr_array_unref);
  }

  /* secrets with their sealed values, byte for byte */
  for (guint i = 0; i < secrets->len; i++) {
    OldRow *row = secrets->pdata[i];
    g_autoptr(BoxSecret) got = box_storage_secret_get (fx->storage, row->key2, row->key, &error);
    g_autoptr(BoxSecret) want = NULL;
    g_autofree char *want_json = NULL;
    g_autofree char *got_json = NULL;

    g_assert_no_error (error);
    g_assert_nonnull (row->blob);
    g_assert_true (g_bytes_equal (got->sealed_value, row->blob));
    want = box_secret_from_storage_json (row->data, NULL);
    want->sealed_value = g_bytes_ref (row->blob);
    want_json = box_secret_to_storage_json (want);
    got_json = box_secret_to_storage_json (got);
    g_assert_cmpstr (got_json, ==, want_json);
  }

  for (guint i = 0; i < meta->len; i++) {
    OldRow *row = meta->pdata[i];
    g_autoptr(GBytes) got = box_storage_meta_get (fx->storage, row->key, &error);

    g_assert_no_error (error);
    g_assert_true (g_bytes_equal (got, row->blob));
  }

  /* the revision counter continues after the migrated records */
  fresh = make_sandbox ("sb-freshfreshfr", "alpha", "fresh", g_get_real_time ());
  g_assert_true (box_storage_sandbox_insert (fx->storage, fresh, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (fresh->revision, >, newest);
  storage_close (&fx->storage);

  g_assert_cmpint (sqlite3_open (fx->path, &raw), ==, SQLITE_OK);
  {
    sqlite3_stmt *stmt = NULL;

    g_assert_cmpint (sqlite3_prepare_v2 (raw, "PRAGMA user_version", -1, &stmt, NULL), ==, SQLITE_OK);
    g_assert_cmpint (sqlite3_step (stmt), ==, SQLITE_ROW);
    g_assert_cmpint (sqlite3_column_int (stmt, 0), ==, BOX_SQLITE_SCHEMA_VERSION);
    sqlite3_finalize (stmt);
  }
  sqlite3_close (raw);
}

/* The usage stats collection as core/engine/box-stats.c keeps it: kind
 * "stats", scope the sandbox ID, name the UTC day, id "<sandbox>/<day>";
 * one row per day (the name is unique in the scope), updated in place,
 * listed per sandbox, pruned by id, and gone with the sandbox's scope. */
void
test_records_stats (Fixture *fx, gconstpointer data)
{
  g_autoptr(BoxSandbox) sandbox = make_sandbox ("sb-statsstatsab", "p", "web", 10);
  g_autoptr(BoxStorageRecord) day1 = box_storage_record_new ("stats", sandbox->id,
                                                             "sb-statsstatsab/2026-11-26",
                                                             "{\"requests\":1}");
  g_autoptr(BoxStorageRecord) day2 = box_storage_record_new ("stats", sandbox->id,
                                                             "sb-statsstatsab/2026-11-27",
                                                             "{\"requests\":2}");
  g_autoptr(BoxStorageRecord) twin = box_storage_record_new ("stats", sandbox->id,
                                                             "sb-statsstatsab/other",
                                                             "{}");
  g_autoptr(BoxStorageRecord) got = NULL;
  g_autoptr(GPtrArray) rows = NULL;
  g_autoptr(GError) error = NULL;
  guint64 revision;

  g_assert_true (box_storage_sandbox_insert (fx->storage, sandbox, &error));
  g_assert_no_error (error);
  day1->name = g_strdup ("2026-11-26");
  day2->name = g_strdup ("2026-11-27");
  twin->name = g_strdup ("2026-11-27");
  {
    BoxStorageOp ops[] = { { BOX_STORAGE_OP_INSERT, day1 }, { BOX_STORAGE_OP_INSERT, day2 } };
    g_assert_true (box_storage_write (fx->storage, ops, G_N_ELEMENTS (ops), &error));
    g_assert_no_error (error);
  }
  /* one row per day and sandbox */
  g_assert_false (box_storage_insert (fx->storage, twin, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);
  g_clear_error (&error);

  /* updated in place, compare-and-swap on the revision read */
  revision = day2->revision;
  g_free (day2->body);
  day2->body = g_strdup ("{\"requests\":5}");
  g_assert_true (box_storage_update (fx->storage, day2, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (day2->revision, >, revision);
  got = box_storage_get (fx->storage, "stats", sandbox->id, BOX_STORAGE_BY_NAME, "2026-11-27",
                         &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->body, ==, "{\"requests\":5}");
  g_assert_cmpstr (got->id, ==, "sb-statsstatsab/2026-11-27");

  rows = box_storage_list (fx->storage, "stats", sandbox->id, BOX_STORAGE_BY_SCOPE, NULL,
                           BOX_STORAGE_ORDER_CREATED, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (rows->len, ==, 2);
  g_clear_pointer (&rows, g_ptr_array_unref);

  /* pruned by id */
  g_assert_true (box_storage_delete (fx->storage, "stats", sandbox->id,
                                     "sb-statsstatsab/2026-11-26", 0, &error));
  g_assert_no_error (error);
  rows = box_storage_list (fx->storage, "stats", NULL, BOX_STORAGE_BY_SCOPE, NULL,
                           BOX_STORAGE_ORDER_CREATED, &error);
  g_assert_cmpuint (rows->len, ==, 1);
  g_clear_pointer (&rows, g_ptr_array_unref);

  /* the sandbox's delete takes its traffic */
  g_assert_true (box_storage_sandbox_delete (fx->storage, "p", sandbox->id, &error));
  g_assert_no_error (error);
  rows = box_storage_list (fx->storage, "stats", sandbox->id, BOX_STORAGE_BY_SCOPE, NULL,
                           BOX_STORAGE_ORDER_CREATED, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (rows->len, ==, 0);
}
