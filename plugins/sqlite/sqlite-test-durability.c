/* sqlite-test-durability.c: the file on disk: persistence, migrations,
 * refusing unknown files, and surviving kill -9. */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <gmodule.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "box-engine.h"
#include "sqlite-test.h"

/* ---- raw SQLite, independent of the plugin ----------------------------- */

static sqlite3 *
raw_open (const char *path)
{
  sqlite3 *db = NULL;

  g_assert_cmpint (sqlite3_open (path, &db), ==, SQLITE_OK);
  return db;
}

static void
raw_exec (sqlite3 *db, const char *sql)
{
  char *errmsg = NULL;

  if (sqlite3_exec (db, sql, NULL, NULL, &errmsg) != SQLITE_OK)
    g_error ("%s: %s", sql, errmsg);
}

/* The first column of the first row, as text ("" for none). */
static char *
raw_query (sqlite3 *db, const char *sql)
{
  sqlite3_stmt *stmt = NULL;
  char *result;

  g_assert_cmpint (sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL), ==, SQLITE_OK);
  if (sqlite3_step (stmt) == SQLITE_ROW && sqlite3_column_text (stmt, 0) != NULL)
    result = g_strdup ((const char *) sqlite3_column_text (stmt, 0));
  else
    result = g_strdup ("");
  sqlite3_finalize (stmt);
  return result;
}

static void
raw_insert (sqlite3 *db, const char *sql, const char *const *texts, gsize n_texts)
{
  sqlite3_stmt *stmt = NULL;

  g_assert_cmpint (sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL), ==, SQLITE_OK);
  for (gsize i = 0; i < n_texts; i++)
    sqlite3_bind_text (stmt, (int) i + 1, texts[i], -1, SQLITE_TRANSIENT);
  g_assert_cmpint (sqlite3_step (stmt), ==, SQLITE_DONE);
  sqlite3_finalize (stmt);
}

static void
assert_mode_0600 (const char *path)
{
  GStatBuf st;

  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
}

/* ---- persistence ------------------------------------------------------- */

void
test_persistence (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sb = make_sandbox ("sb-aaaaaaaaaaaa", "p", "web", 42);
  g_autoptr(BoxSandbox) got = NULL;
  g_autoptr(GBytes) value = g_bytes_new_static ("signing key", 11);
  g_autoptr(GBytes) got_value = NULL;
  g_autofree char *wal = g_strconcat (fx->path, "-wal", NULL);
  g_autofree char *mode = NULL;
  g_autofree char *want_json = NULL;
  g_autofree char *got_json = NULL;
  g_auto(GVariantBuilder) status = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_autoptr(GVariant) status_dict = NULL;
  const char *status_path = NULL;
  sqlite3 *raw;

  fx->storage = storage_open (fx->path);
  g_assert_cmpstr (box_sqlite_plugin_get_path (BOX_SQLITE_PLUGIN (fx->storage)), ==, fx->path);
  g_assert_true (box_storage_sandbox_insert (fx->storage, sb, &error));
  g_assert_true (box_storage_meta_set (fx->storage, "signing-key", value, &error));
  g_assert_no_error (error);

  /* owner-only files, WAL mode */
  assert_mode_0600 (fx->path);
  assert_mode_0600 (wal);
  raw = raw_open (fx->path);
  mode = raw_query (raw, "PRAGMA journal_mode");
  g_assert_cmpstr (mode, ==, "wal");
  sqlite3_close (raw);

  box_plugin_add_status (BOX_PLUGIN (fx->storage), &status);
  status_dict = g_variant_ref_sink (g_variant_builder_end (&status));
  g_assert_true (g_variant_lookup (status_dict, "database", "&s", &status_path));
  g_assert_cmpstr (status_path, ==, fx->path);

  storage_close (&fx->storage);
  fx->storage = storage_open (fx->path);
  got = box_storage_sandbox_get (fx->storage, "p", "web", &error);
  g_assert_no_error (error);
  want_json = box_sandbox_to_storage_json (sb);
  got_json = box_sandbox_to_storage_json (got);
  g_assert_cmpstr (got_json, ==, want_json);
  got_value = box_storage_meta_get (fx->storage, "signing-key", &error);
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (got_value, value));
}

/* Without the path property: <data-dir>/sqlite/box.db, or [plugin.sqlite] path=. */
void
test_engine_paths (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  BoxConfig *config = box_config_new ();
  g_autoptr(BoxEngine) engine = NULL;
  g_autoptr(BoxPluginContext) context = NULL;
  g_autoptr(BoxStorage) storage = NULL;
  g_autofree char *state_dir = g_build_filename (fx->dir, "sqlite", NULL);
  g_autofree char *default_path = g_build_filename (state_dir, "box.db", NULL);
  g_autofree char *custom_path = g_build_filename (fx->dir, "custom.db", NULL);
  GStatBuf st;

  g_free (config->data_dir);
  config->data_dir = g_strdup (fx->dir);
  engine = box_engine_new (config);

  context = box_engine_new_plugin_context (engine, "sqlite");
  storage = g_object_new (BOX_TYPE_SQLITE_PLUGIN, "name", "sqlite", "context", context, NULL);
  g_assert_true (box_plugin_start (BOX_PLUGIN (storage), NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (box_sqlite_plugin_get_path (BOX_SQLITE_PLUGIN (storage)), ==, default_path);
  g_assert_cmpint (g_stat (state_dir, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);
  assert_mode_0600 (default_path);
  storage_close (&storage);

  g_key_file_set_string (config->keyfile, "plugin.sqlite", "path", custom_path);
  storage = g_object_new (BOX_TYPE_SQLITE_PLUGIN, "name", "sqlite", "context", context, NULL);
  g_assert_true (box_plugin_start (BOX_PLUGIN (storage), NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (box_sqlite_plugin_get_path (BOX_SQLITE_PLUGIN (storage)), ==, custom_path);
  assert_mode_0600 (custom_path);
  storage_close (&storage);
}

/* The built module exports its entry point and describes itself.  (Its
 * type is not registered here: this binary has the same type built in.) */
void
test_module (Fixture *fx, gconstpointer data)
{
  const char *plugin_dir = g_getenv ("BOX_PLUGIN_DIR");
  g_autofree char *path = NULL;
  GModule *module = NULL;
  BoxPluginQueryFunc query = NULL;
  const BoxPluginInfo *info;
  gpointer other = NULL;

  if (plugin_dir == NULL) {
    g_test_skip ("BOX_PLUGIN_DIR is not set");
    return;
  }
  path = g_build_filename (plugin_dir, "box-plugin-sqlite.so", NULL);
  module = g_module_open (path, G_MODULE_BIND_LAZY | G_MODULE_BIND_LOCAL);
  if (module == NULL)
    g_error ("%s: %s", path, g_module_error ());
  g_assert_true (g_module_symbol (module, BOX_PLUGIN_QUERY_SYMBOL, (gpointer *) &query));
  info = query ();
  g_assert_cmpuint (info->abi_version, ==, BOX_PLUGIN_ABI_VERSION);
  g_assert_cmpstr (info->name, ==, "sqlite");
  g_assert_nonnull (info->get_type);
  /* nothing else is exported */
  g_assert_false (g_module_symbol (module, "box_sqlite_db_open", &other));
  g_assert_false (g_module_symbol (module, "box_sqlite_plugin_get_type", &other));
  g_module_close (module);
}

/* ---- migrations -------------------------------------------------------- */

/* Version 1 as it shipped, written by hand. */
static const char v1_schema[] =
  "CREATE TABLE projects (name TEXT PRIMARY KEY NOT NULL, created_at INTEGER NOT NULL,"
  "  data TEXT NOT NULL);"
  "CREATE TABLE keys (id TEXT PRIMARY KEY NOT NULL, project TEXT NOT NULL,"
  "  hash TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL, data TEXT NOT NULL);"
  "CREATE TABLE sandboxes (id TEXT PRIMARY KEY NOT NULL, project TEXT NOT NULL,"
  "  name TEXT NOT NULL, state TEXT NOT NULL, created_at INTEGER NOT NULL,"
  "  data TEXT NOT NULL, UNIQUE (project, name));"
  "CREATE TABLE checkpoints (sandbox_id TEXT NOT NULL, id TEXT NOT NULL,"
  "  project TEXT NOT NULL, created_at INTEGER NOT NULL, created_seq INTEGER NOT NULL,"
  "  data TEXT NOT NULL, PRIMARY KEY (sandbox_id, id));"
  "CREATE TABLE secrets (project TEXT NOT NULL, name TEXT NOT NULL,"
  "  created_at INTEGER NOT NULL, data TEXT NOT NULL, sealed BLOB,"
  "  PRIMARY KEY (project, name));"
  "PRAGMA user_version = 1;";

void
test_migrate_v1 (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) old = make_sandbox ("sb-oldoldoldold", "p", "old", 10);
  g_autoptr(BoxSandbox) fresh = make_sandbox ("sb-newnewnewnew", "p", "new", 20);
  g_autoptr(BoxSandbox) got = NULL;
  g_autoptr(GBytes) value = g_bytes_new_static ("v", 1);
  g_autoptr(GPtrArray) list = NULL;
  g_autofree char *old_json = box_sandbox_to_storage_json (old);
  g_autofree char *version = NULL;
  g_autofree char *indexes = NULL;
  g_autofree char *tables = NULL;
  g_autofree char *check = NULL;
  sqlite3 *raw;

  raw = raw_open (fx->path);
  raw_exec (raw, v1_schema);
  {
    const char *row[] = { old->id, old_json };

    raw_insert (raw, "INSERT INTO sandboxes (id, project, name, state, created_at, data) "
                     "VALUES (?1, 'p', 'old', 'running', 10, ?2)", row, G_N_ELEMENTS (row));
  }
  sqlite3_close (raw);

  fx->storage = storage_open (fx->path);
  got = box_storage_sandbox_get (fx->storage, "p", "old", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->id, ==, old->id);
  g_assert_true (box_storage_sandbox_insert (fx->storage, fresh, &error));
  g_assert_true (box_storage_meta_set (fx->storage, "k", value, &error));
  g_assert_no_error (error);
  list = box_storage_sandbox_list (fx->storage, "p", &error);
  g_assert_cmpuint (list->len, ==, 2);
  storage_close (&fx->storage);

  raw = raw_open (fx->path);
  version = raw_query (raw, "PRAGMA user_version");
  g_assert_cmpint (atoi (version), ==, BOX_SQLITE_SCHEMA_VERSION);
  indexes = raw_query (raw, "SELECT group_concat (name, ',') FROM "
                            "(SELECT name FROM sqlite_master WHERE type = 'index' "
                            " AND name NOT LIKE 'sqlite_%' ORDER BY name)");
  g_assert_cmpstr (indexes, ==, "records_by_created,records_by_lookup,records_by_name,"
                                "records_by_scope,records_in_scope");
  tables = raw_query (raw, "SELECT group_concat (name, ',') FROM "
                           "(SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name)");
  g_assert_cmpstr (tables, ==, "records,revision");
  check = raw_query (raw, "PRAGMA integrity_check");
  g_assert_cmpstr (check, ==, "ok");
  sqlite3_close (raw);
}

void
test_future_version (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *future = g_strdup_printf ("CREATE TABLE later (x);"
                                             "PRAGMA user_version = %d;",
                                             BOX_SQLITE_SCHEMA_VERSION + 1);
  g_autofree char *version = NULL;
  g_autofree char *mode = NULL;
  sqlite3 *raw;

  raw = raw_open (fx->path);
  raw_exec (raw, future);
  sqlite3_close (raw);

  fx->storage = storage_new (fx->path);
  g_assert_false (box_plugin_start (BOX_PLUGIN (fx->storage), NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_nonnull (strstr (error->message, "newer than this boxd"));
  g_assert_nonnull (strstr (error->message, fx->path));
  g_clear_object (&fx->storage);

  /* the file is untouched: same version, journal mode not switched */
  raw = raw_open (fx->path);
  version = raw_query (raw, "PRAGMA user_version");
  g_assert_cmpint (atoi (version), ==, BOX_SQLITE_SCHEMA_VERSION + 1);
  mode = raw_query (raw, "PRAGMA journal_mode");
  g_assert_cmpstr (mode, ==, "delete");
  sqlite3_close (raw);
}

void
test_foreign_database (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  sqlite3 *raw;

  raw = raw_open (fx->path);
  raw_exec (raw, "PRAGMA application_id = 42; CREATE TABLE t (x);");
  sqlite3_close (raw);

  fx->storage = storage_new (fx->path);
  g_assert_false (box_plugin_start (BOX_PLUGIN (fx->storage), NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_nonnull (strstr (error->message, "not a box database"));
}

/* ---- kill -9 ----------------------------------------------------------- */

#define KILL_ROUNDS 5
#define KILL_AFTER_US (500 * G_TIME_SPAN_MILLISECOND)
/* how long a writer may take to start (a sanitizer build on a busy machine) */
#define KILL_START_US (30 * G_TIME_SPAN_SECOND)

/* Writes @line to stdout whole; FALSE when stdout is gone. */
static gboolean
ack (const char *line)
{
  gsize len = strlen (line);
  gsize done = 0;

  while (done < len) {
    ssize_t r = write (STDOUT_FILENO, line + done, len - done);

    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return FALSE;
    done += (gsize) r;
  }
  return TRUE;
}

/* The "update" child: one sandbox, read and written back at the revision
 * read with the label n set to 1, 2, ...; after each update has returned,
 * n and a newline go to stdout. */
static int
kill_updater (BoxStorage *storage)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) first = make_sandbox ("sb-updateupdate", "crash", "upd", 1);

  if (!box_storage_sandbox_insert (storage, first, &error) &&
      !g_error_matches (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS)) {
    g_printerr ("kill updater: %s\n", error->message);
    return 1;
  }
  g_clear_error (&error);
  for (guint n = 1;; n++) {
    g_autoptr(BoxSandbox) sandbox = box_storage_sandbox_get (storage, "crash", "upd", &error);
    g_autofree char *line = g_strdup_printf ("%u\n", n);

    if (sandbox == NULL) {
      g_printerr ("kill updater: %s\n", error->message);
      return 1;
    }
    g_hash_table_replace (sandbox->labels, g_strdup ("n"), g_strdup_printf ("%u", n));
    if (!box_storage_sandbox_update (storage, sandbox, &error)) {
      g_printerr ("kill updater: %s\n", error->message);
      return 1;
    }
    if (!ack (line))
      return 1;
  }
}

/* The child: insert sandboxes as fast as possible; after each insert has
 * returned, write its ID and a newline to stdout.  With @round "update",
 * kill_updater() instead. */
int
kill_writer_main (const char *path, const char *round)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxStorage) storage = storage_new (path);

  if (!box_plugin_start (BOX_PLUGIN (storage), NULL, &error)) {
    g_printerr ("kill writer: %s\n", error->message);
    return 1;
  }
  if (g_strcmp0 (round, "update") == 0)
    return kill_updater (storage);
  for (guint n = 0;; n++) {
    g_autofree char *id = g_strdup_printf ("sb-r%sn%08u", round, n);
    g_autofree char *name = g_strdup_printf ("w%s-%u", round, n);
    g_autofree char *line = g_strdup_printf ("%s\n", id);
    g_autoptr(BoxSandbox) sandbox = make_sandbox (id, "crash", name, g_get_real_time ());

    if (!box_storage_sandbox_insert (storage, sandbox, &error)) {
      g_printerr ("kill writer: %s\n", error->message);
      return 1;
    }
    if (!ack (line))
      return 1;
  }
}

/* Reads what is available on @fd into @buf; FALSE at end of file. */
static gboolean
read_some (int fd, GString *buf)
{
  char chunk[4096];
  ssize_t r;

  do
    r = read (fd, chunk, sizeof chunk);
  while (r < 0 && errno == EINTR);
  g_assert_cmpint (r, >=, 0);
  g_string_append_len (buf, chunk, r);
  return r > 0;
}

/* Runs one writer, kills it after KILL_AFTER_US; returns the acknowledged
 * lines (IDs, or update numbers). */
static GStrv
run_writer_and_kill (const char *path, const char *round_str)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *self_exe = g_file_read_link ("/proc/self/exe", &error);
  const char *argv[] = { self_exe, "--kill-writer", path, round_str, NULL };
  g_autoptr(GString) out = g_string_new (NULL);
  gint64 deadline;
  GPid pid = 0;
  int out_fd = -1;
  int status = 0;
  char *last_newline;

  g_assert_no_error (error);
  g_assert_true (g_spawn_async_with_pipes (NULL, (char **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                           NULL, NULL, &pid, NULL, &out_fd, NULL, &error));
  g_assert_no_error (error);

  /* the kill comes KILL_AFTER_US after the first acknowledgement, so that
   * it hits writes whatever the start of the writer cost */
  deadline = g_get_monotonic_time () + KILL_START_US;
  for (gboolean started = FALSE;;) {
    gint64 left = deadline - g_get_monotonic_time ();
    struct pollfd pfd = { .fd = out_fd, .events = POLLIN };

    if (left <= 0)
      break;
    if (poll (&pfd, 1, (int) (left / 1000) + 1) > 0 && !read_some (out_fd, out))
      g_error ("the writer ended by itself: %s", out->str);
    if (!started && strchr (out->str, '\n') != NULL) {
      started = TRUE;
      deadline = g_get_monotonic_time () + KILL_AFTER_US;
    }
  }
  g_assert_cmpint (kill (pid, SIGKILL), ==, 0);
  while (read_some (out_fd, out))
    ;
  close (out_fd);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_spawn_close_pid (pid);
  g_assert_true (WIFSIGNALED (status));
  g_assert_cmpint (WTERMSIG (status), ==, SIGKILL);

  /* only whole lines are acknowledgements */
  last_newline = strrchr (out->str, '\n');
  if (last_newline == NULL)
    return g_new0 (char *, 1);
  g_string_truncate (out, last_newline - out->str);
  return g_strsplit (out->str, "\n", -1);
}

void
test_kill9 (Fixture *fx, gconstpointer data)
{
  g_autoptr(GPtrArray) acked = g_ptr_array_new_with_free_func (g_free);

  for (guint round = 1; round <= KILL_ROUNDS; round++) {
    g_autofree char *round_str = g_strdup_printf ("%u", round);
    g_auto(GStrv) ids = run_writer_and_kill (fx->path, round_str);
    g_autofree char *check = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) list = NULL;
    sqlite3 *raw;

    g_test_message ("round %u: %u inserts acknowledged", round, g_strv_length (ids));
    g_assert_cmpuint (g_strv_length (ids), >, 0);
    for (char **id = ids; *id != NULL; id++)
      g_ptr_array_add (acked, g_strdup (*id));

    raw = raw_open (fx->path);
    check = raw_query (raw, "PRAGMA integrity_check");
    g_assert_cmpstr (check, ==, "ok");
    sqlite3_close (raw);

    /* every acknowledged insert, of this round and the earlier ones */
    fx->storage = storage_open (fx->path);
    for (guint i = 0; i < acked->len; i++) {
      g_autoptr(BoxSandbox) got =
        box_storage_sandbox_get (fx->storage, "crash", g_ptr_array_index (acked, i), &error);

      g_assert_no_error (error);
      g_assert_cmpstr (got->id, ==, g_ptr_array_index (acked, i));
    }
    list = box_storage_sandbox_list (fx->storage, "crash", &error);
    g_assert_no_error (error);
    /* at most the one insert in flight when the kill came is extra */
    g_assert_cmpuint (list->len, >=, acked->len);
    g_assert_cmpuint (list->len, <=, acked->len + round);
    storage_close (&fx->storage);
  }
}

/* kill -9 during compare-and-swap updates of one record: the record reads
 * back whole, with at least the last acknowledged update (and at most the
 * one in flight), and the next update at its revision succeeds. */
void
test_kill9_updates (Fixture *fx, gconstpointer data)
{
  g_auto(GStrv) acked = run_writer_and_kill (fx->path, "update");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) got = NULL;
  guint n_acked = g_strv_length (acked);
  guint last;
  guint stored;
  guint64 revision;

  g_test_message ("%u updates acknowledged", n_acked);
  g_assert_cmpuint (n_acked, >, 0);
  last = (guint) g_ascii_strtoull (acked[n_acked - 1], NULL, 10);
  g_assert_cmpuint (last, ==, n_acked);

  fx->storage = storage_open (fx->path);
  got = box_storage_sandbox_get (fx->storage, "crash", "upd", &error);
  g_assert_no_error (error);
  stored = (guint) g_ascii_strtoull (g_hash_table_lookup (got->labels, "n"), NULL, 10);
  g_assert_cmpuint (stored, >=, last);
  g_assert_cmpuint (stored, <=, last + 1);
  revision = got->revision;
  g_assert_true (box_storage_sandbox_update (fx->storage, got, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (got->revision, >, revision);
  storage_close (&fx->storage);
}
