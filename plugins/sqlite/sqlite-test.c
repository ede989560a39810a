/* sqlite-test.c: the sqlite storage plugin against a real database file.
 *
 * The binary doubles as the kill -9 writer: "sqlite-test --kill-writer DB N"
 * inserts sandboxes forever and prints each ID once its insert returned
 * ("--kill-writer DB update": updates one sandbox forever, printing 1, 2, ...).
 */
#include "config.h"

#include <glib/gstdio.h>

#include "sqlite-test.h"

static void
rm_rf (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL) {
    g_autofree char *child = g_build_filename (path, name, NULL);

    if (g_file_test (child, G_FILE_TEST_IS_DIR) && !g_file_test (child, G_FILE_TEST_IS_SYMLINK))
      rm_rf (child);
    else
      g_unlink (child);
  }
  g_rmdir (path);
}

BoxStorage *
storage_new (const char *path)
{
  return g_object_new (BOX_TYPE_SQLITE_PLUGIN, "name", "sqlite", "path", path, NULL);
}

BoxStorage *
storage_open (const char *path)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxStorage) storage = storage_new (path);

  g_assert_true (box_plugin_start (BOX_PLUGIN (storage), NULL, &error));
  g_assert_no_error (error);
  return g_steal_pointer (&storage);
}

void
storage_close (BoxStorage **storage)
{
  if (*storage == NULL)
    return;
  box_plugin_stop (BOX_PLUGIN (*storage));
  g_clear_object (storage);
}

void
fixture_setup (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  fx->dir = g_dir_make_tmp ("box-sqlite-XXXXXX", &error);
  g_assert_no_error (error);
  fx->path = g_build_filename (fx->dir, "box.db", NULL);
  if (data == NULL)
    fx->storage = storage_open (fx->path);
}

void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  storage_close (&fx->storage);
  rm_rf (fx->dir);
  g_free (fx->path);
  g_free (fx->dir);
}

/* ---- record makers ----------------------------------------------------- */

static BoxProject *
make_project (const char *name, gint64 created_at)
{
  BoxProject *project = g_new0 (BoxProject, 1);

  project->name = g_strdup (name);
  project->domains = g_new0 (char *, 1);
  project->created_at = created_at;
  return project;
}

static BoxKey *
make_key (const char *id, const char *project, const char *hash, gint64 created_at)
{
  BoxKey *key = g_new0 (BoxKey, 1);

  key->id = g_strdup (id);
  key->name = g_strdup_printf ("name of %s", id);
  key->project = g_strdup (project);
  key->hash = g_strdup (hash);
  key->created_at = created_at;
  return key;
}

BoxSandbox *
make_sandbox (const char *id, const char *project, const char *name, gint64 created_at)
{
  BoxSandbox *sandbox = box_sandbox_new ();

  g_free (sandbox->id);
  sandbox->id = g_strdup (id);
  g_free (sandbox->project);
  sandbox->project = g_strdup (project);
  g_free (sandbox->name);
  sandbox->name = g_strdup (name);
  g_free (sandbox->template_name);
  sandbox->template_name = g_strdup ("base");
  g_free (sandbox->image);
  sandbox->image = g_strdup ("");
  sandbox->state = BOX_SANDBOX_STATE_RUNNING;
  sandbox->resources.cpus = 2;
  sandbox->resources.memory_mib = 1024;
  sandbox->resources.disk_gib = 10;
  g_hash_table_insert (sandbox->labels, g_strdup ("team"), g_strdup ("blue"));
  sandbox->created_at = created_at;
  sandbox->updated_at = created_at;
  sandbox->last_active_at = created_at;
  sandbox->next_checkpoint = 1;
  return sandbox;
}

static BoxCheckpoint *
make_checkpoint (const char *sandbox, const char *project, const char *id, gint64 created_at)
{
  BoxCheckpoint *checkpoint = g_new0 (BoxCheckpoint, 1);

  checkpoint->id = g_strdup (id);
  checkpoint->sandbox = g_strdup (sandbox);
  checkpoint->project = g_strdup (project);
  checkpoint->comment = g_strdup_printf ("checkpoint %s", id);
  checkpoint->created_at = created_at;
  return checkpoint;
}

static BoxSecret *
make_secret (const char *project, const char *name, const char *host, gint64 at)
{
  BoxSecret *secret = g_new0 (BoxSecret, 1);
  const char sealed[] = { 's', 'e', 'a', 'l', '\0', 0x7f, 'd' };

  secret->name = g_strdup (name);
  secret->project = g_strdup (project);
  secret->hosts = g_new0 (char *, 2);
  secret->hosts[0] = g_strdup (host);
  secret->placeholder = g_strdup_printf ("BOX_SECRET_%s", name);
  secret->inject_header = g_strdup ("Authorization");
  secret->inject_format = g_strdup ("Bearer {value}");
  secret->sealed_value = g_bytes_new (sealed, sizeof sealed);
  secret->created_at = at;
  secret->updated_at = at;
  return secret;
}

static void
assert_ids (GPtrArray *records, gsize offset, const char *const *expected)
{
  g_assert_nonnull (records);
  g_assert_cmpuint (records->len, ==, g_strv_length ((char **) expected));
  for (guint i = 0; i < records->len; i++) {
    const char *id = G_STRUCT_MEMBER (const char *, g_ptr_array_index (records, i), offset);

    g_assert_cmpstr (id, ==, expected[i]);
  }
}

#define ASSERT_IDS(records, type, field, ...) \
  assert_ids ((records), G_STRUCT_OFFSET (type, field), (const char *const[]) { __VA_ARGS__, NULL })

/* ---- CRUD -------------------------------------------------------------- */

static void
test_projects (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxProject) a = make_project ("alpha", 300);
  g_autoptr(BoxProject) b = make_project ("bravo", 100);
  g_autoptr(BoxProject) c = make_project ("charlie", 300);
  g_autoptr(BoxProject) got = NULL;
  g_autoptr(GPtrArray) list = NULL;
  g_autofree char *want_json = NULL;
  g_autofree char *got_json = NULL;

  g_assert_true (box_storage_project_insert (fx->storage, c, &error));
  g_assert_no_error (error);
  g_assert_true (box_storage_project_insert (fx->storage, a, &error));
  g_assert_true (box_storage_project_insert (fx->storage, b, &error));
  g_assert_no_error (error);

  g_assert_false (box_storage_project_insert (fx->storage, a, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);
  g_assert_cmpstr (error->message, ==, "a project named \"alpha\" already exists");
  g_clear_error (&error);

  /* update, then read back the whole record */
  g_strfreev (a->domains);
  a->domains = g_strsplit ("alpha.example.com example.org", " ", -1);
  g_assert_true (box_storage_project_update (fx->storage, a, &error));
  g_assert_no_error (error);
  got = box_storage_project_get (fx->storage, "alpha", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->name, ==, "alpha");
  g_assert_cmpint (got->created_at, ==, 300);
  g_assert_cmpstrv (got->domains, a->domains);
  want_json = box_project_to_storage_json (a);
  got_json = box_project_to_storage_json (got);
  g_assert_cmpstr (got_json, ==, want_json);

  /* created_at, then name */
  list = box_storage_project_list (fx->storage, &error);
  g_assert_no_error (error);
  ASSERT_IDS (list, BoxProject, name, "bravo", "alpha", "charlie");

  g_assert_true (box_storage_project_delete (fx->storage, "bravo", &error));
  g_assert_no_error (error);
  g_clear_pointer (&got, box_project_free);
  got = box_storage_project_get (fx->storage, "bravo", &error);
  g_assert_null (got);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "no project bravo");
  g_clear_error (&error);
  g_assert_false (box_storage_project_delete (fx->storage, "bravo", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (box_storage_project_update (fx->storage, b, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
}

static void
test_keys (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxKey) k1 = make_key ("key-aaaaaaaaaaaa", "p", "11", 200);
  g_autoptr(BoxKey) k2 = make_key ("key-bbbbbbbbbbbb", "p", "22", 100);
  g_autoptr(BoxKey) k3 = make_key ("key-cccccccccccc", "q", "33", 50);
  g_autoptr(BoxKey) k0 = make_key ("key-000000000000", "p", "44", 200);
  g_autoptr(BoxKey) dup_id = make_key ("key-aaaaaaaaaaaa", "q", "55", 1);
  g_autoptr(BoxKey) dup_hash = make_key ("key-dddddddddddd", "q", "22", 1);
  g_autoptr(BoxKey) got = NULL;
  g_autoptr(GPtrArray) list = NULL;

  g_assert_true (box_storage_key_insert (fx->storage, k1, &error));
  g_assert_true (box_storage_key_insert (fx->storage, k2, &error));
  g_assert_true (box_storage_key_insert (fx->storage, k3, &error));
  g_assert_true (box_storage_key_insert (fx->storage, k0, &error));
  g_assert_no_error (error);

  g_assert_false (box_storage_key_insert (fx->storage, dup_id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);
  g_clear_error (&error);
  g_assert_false (box_storage_key_insert (fx->storage, dup_hash, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);
  g_clear_error (&error);

  got = box_storage_key_get_by_hash (fx->storage, "22", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->id, ==, k2->id);
  g_assert_cmpstr (got->name, ==, k2->name);
  g_assert_cmpstr (got->project, ==, "p");
  g_assert_cmpstr (got->hash, ==, "22");
  g_assert_cmpint (got->created_at, ==, 100);
  g_clear_pointer (&got, box_key_free);
  got = box_storage_key_get_by_hash (fx->storage, "99", &error);
  g_assert_null (got);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  list = box_storage_key_list (fx->storage, "p", &error);
  g_assert_no_error (error);
  ASSERT_IDS (list, BoxKey, id, "key-bbbbbbbbbbbb", "key-000000000000", "key-aaaaaaaaaaaa");
  g_clear_pointer (&list, g_ptr_array_unref);

  /* another project's key is not found */
  g_assert_false (box_storage_key_delete (fx->storage, "q", k1->id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "no key key-aaaaaaaaaaaa");
  g_clear_error (&error);
  g_assert_true (box_storage_key_delete (fx->storage, "p", k1->id, &error));
  g_assert_no_error (error);
  list = box_storage_key_list (fx->storage, "p", &error);
  ASSERT_IDS (list, BoxKey, id, "key-bbbbbbbbbbbb", "key-000000000000");
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_key_list (fx->storage, "q", &error);
  ASSERT_IDS (list, BoxKey, id, "key-cccccccccccc");
}

static void
test_sandboxes (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) a = make_sandbox ("sb-aaaaaaaaaaaa", "p", "web", 200);
  g_autoptr(BoxSandbox) b = make_sandbox ("sb-bbbbbbbbbbbb", "p", "db", 100);
  g_autoptr(BoxSandbox) c = make_sandbox ("sb-cccccccccccc", "p", "sb-aaaaaaaaaaaa", 200);
  g_autoptr(BoxSandbox) q = make_sandbox ("sb-qqqqqqqqqqqq", "q", "web", 50);
  g_autoptr(BoxSandbox) dup_name = make_sandbox ("sb-dddddddddddd", "p", "web", 1);
  g_autoptr(BoxSandbox) dup_id = make_sandbox ("sb-aaaaaaaaaaaa", "q", "other", 1);
  g_autoptr(BoxSandbox) got = NULL;
  g_autoptr(GPtrArray) list = NULL;
  g_autofree char *want_json = NULL;
  g_autofree char *got_json = NULL;

  g_assert_true (box_storage_sandbox_insert (fx->storage, a, &error));
  g_assert_true (box_storage_sandbox_insert (fx->storage, b, &error));
  g_assert_true (box_storage_sandbox_insert (fx->storage, c, &error));
  g_assert_true (box_storage_sandbox_insert (fx->storage, q, &error));   /* same name, other project */
  g_assert_no_error (error);

  g_assert_false (box_storage_sandbox_insert (fx->storage, dup_name, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);
  g_assert_cmpstr (error->message, ==, "a sandbox named \"web\" already exists in project \"p\"");
  g_clear_error (&error);
  g_assert_false (box_storage_sandbox_insert (fx->storage, dup_id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);
  g_clear_error (&error);

  /* by ID and by name; an ID match wins over a name match */
  got = box_storage_sandbox_get (fx->storage, "p", "web", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->id, ==, a->id);
  want_json = box_sandbox_to_storage_json (a);
  got_json = box_sandbox_to_storage_json (got);
  g_assert_cmpstr (got_json, ==, want_json);
  g_assert_cmpstr (g_hash_table_lookup (got->labels, "team"), ==, "blue");
  g_clear_pointer (&got, box_sandbox_free);
  got = box_storage_sandbox_get (fx->storage, "p", "sb-aaaaaaaaaaaa", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->name, ==, "web");
  g_clear_pointer (&got, box_sandbox_free);
  got = box_storage_sandbox_get (fx->storage, NULL, "db", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->id, ==, b->id);
  g_clear_pointer (&got, box_sandbox_free);
  got = box_storage_sandbox_get (fx->storage, NULL, "sb-qqqqqqqqqqqq", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->project, ==, "q");
  g_clear_pointer (&got, box_sandbox_free);

  /* project isolation */
  got = box_storage_sandbox_get (fx->storage, "q", "sb-aaaaaaaaaaaa", &error);
  g_assert_null (got);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "no sandbox sb-aaaaaaaaaaaa");
  g_clear_error (&error);
  got = box_storage_sandbox_get (fx->storage, "q", "db", &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  got = box_storage_sandbox_get (fx->storage, "q", "web", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->id, ==, q->id);
  g_clear_pointer (&got, box_sandbox_free);
  /* a name in two projects needs a project or the ID */
  got = box_storage_sandbox_get (fx->storage, NULL, "web", &error);
  g_assert_null (got);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);

  /* update: state and name; a taken name is refused; unknown ID */
  a->state = BOX_SANDBOX_STATE_PAUSED;
  a->updated_at = 999;
  g_assert_true (box_storage_sandbox_update (fx->storage, a, &error));
  g_assert_no_error (error);
  got = box_storage_sandbox_get (fx->storage, "p", a->id, &error);
  g_assert_cmpint (got->state, ==, BOX_SANDBOX_STATE_PAUSED);
  g_assert_cmpint (got->updated_at, ==, 999);
  g_clear_pointer (&got, box_sandbox_free);
  g_free (a->name);
  a->name = g_strdup ("db");
  g_assert_false (box_storage_sandbox_update (fx->storage, a, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);
  g_clear_error (&error);
  g_assert_false (box_storage_sandbox_update (fx->storage, dup_name, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  /* lists: created_at, then ID */
  list = box_storage_sandbox_list (fx->storage, "p", &error);
  g_assert_no_error (error);
  ASSERT_IDS (list, BoxSandbox, id, "sb-bbbbbbbbbbbb", "sb-aaaaaaaaaaaa", "sb-cccccccccccc");
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_sandbox_list (fx->storage, NULL, &error);
  ASSERT_IDS (list, BoxSandbox, id,
              "sb-qqqqqqqqqqqq", "sb-bbbbbbbbbbbb", "sb-aaaaaaaaaaaa", "sb-cccccccccccc");
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_sandbox_list (fx->storage, "nobody", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, 0);
  g_clear_pointer (&list, g_ptr_array_unref);

  /* delete: another project's sandbox is not found */
  g_assert_false (box_storage_sandbox_delete (fx->storage, "q", a->id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_true (box_storage_sandbox_delete (fx->storage, "p", a->id, &error));
  g_assert_no_error (error);
  g_assert_false (box_storage_sandbox_delete (fx->storage, NULL, a->id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_true (box_storage_sandbox_delete (fx->storage, NULL, q->id, &error));
  g_assert_no_error (error);
  list = box_storage_sandbox_list (fx->storage, NULL, &error);
  ASSERT_IDS (list, BoxSandbox, id, "sb-bbbbbbbbbbbb", "sb-cccccccccccc");
}

static void
test_checkpoints (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sb = make_sandbox ("sb-aaaaaaaaaaaa", "p", "web", 1);
  g_autoptr(BoxSandbox) other = make_sandbox ("sb-bbbbbbbbbbbb", "p", "db", 1);
  g_autoptr(BoxCheckpoint) orphan = make_checkpoint ("sb-nonexistent", "p", "v1", 5);
  g_autoptr(BoxCheckpoint) got = NULL;
  g_autoptr(GPtrArray) list = NULL;
  const char *ids[] = { "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "auto-1" };

  g_assert_true (box_storage_sandbox_insert (fx->storage, sb, &error));
  g_assert_true (box_storage_sandbox_insert (fx->storage, other, &error));
  g_assert_no_error (error);

  /* same timestamp for all: insertion order decides, not the ID's text */
  for (gsize i = 0; i < G_N_ELEMENTS (ids); i++) {
    g_autoptr(BoxCheckpoint) cp = make_checkpoint (sb->id, "p", ids[i], 1000);

    cp->memory = (i % 2) == 0;
    cp->auto_ = g_str_has_prefix (ids[i], "auto-");
    g_assert_true (box_storage_checkpoint_insert (fx->storage, cp, &error));
    g_assert_no_error (error);
  }
  {
    g_autoptr(BoxCheckpoint) early = make_checkpoint (other->id, "p", "v1", 10);
    g_autoptr(BoxCheckpoint) dup = make_checkpoint (sb->id, "p", "v3", 10);

    g_assert_true (box_storage_checkpoint_insert (fx->storage, early, &error));
    g_assert_no_error (error);
    g_assert_false (box_storage_checkpoint_insert (fx->storage, dup, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);
    g_clear_error (&error);
  }
  g_assert_false (box_storage_checkpoint_insert (fx->storage, orphan, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  list = box_storage_checkpoint_list (fx->storage, sb->id, &error);
  g_assert_no_error (error);
  ASSERT_IDS (list, BoxCheckpoint, id,
              "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "auto-1");
  g_clear_pointer (&list, g_ptr_array_unref);

  got = box_storage_checkpoint_get (fx->storage, sb->id, "v3", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->sandbox, ==, sb->id);
  g_assert_cmpstr (got->comment, ==, "checkpoint v3");
  g_assert_true (got->memory);
  g_assert_false (got->auto_);
  g_assert_cmpint (got->created_at, ==, 1000);
  g_clear_pointer (&got, box_checkpoint_free);
  got = box_storage_checkpoint_get (fx->storage, other->id, "v3", &error);
  g_assert_null (got);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  g_assert_true (box_storage_checkpoint_delete (fx->storage, sb->id, "v2", &error));
  g_assert_no_error (error);
  g_assert_false (box_storage_checkpoint_delete (fx->storage, sb->id, "v2", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  list = box_storage_checkpoint_list (fx->storage, sb->id, &error);
  g_assert_cmpuint (list->len, ==, G_N_ELEMENTS (ids) - 1);
  g_clear_pointer (&list, g_ptr_array_unref);

  /* deleting the sandbox deletes its checkpoints, not the other's */
  g_assert_true (box_storage_sandbox_delete (fx->storage, "p", sb->id, &error));
  g_assert_no_error (error);
  list = box_storage_checkpoint_list (fx->storage, sb->id, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, 0);
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_checkpoint_list (fx->storage, other->id, &error);
  ASSERT_IDS (list, BoxCheckpoint, id, "v1");
}

static void
test_secrets (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSecret) s1 = make_secret ("p", "GITHUB", "api.github.com", 100);
  g_autoptr(BoxSecret) s2 = make_secret ("p", "AAA", "a.example.com", 200);
  g_autoptr(BoxSecret) s3 = make_secret ("q", "GITHUB", "other.example.com", 50);
  g_autoptr(BoxSecret) again = make_secret ("p", "GITHUB", "new.example.com", 500);
  g_autoptr(BoxSecret) got = NULL;
  g_autoptr(GPtrArray) list = NULL;
  const char new_sealed[] = "new sealed value";

  g_assert_true (box_storage_secret_put (fx->storage, s1, &error));
  g_assert_true (box_storage_secret_put (fx->storage, s2, &error));
  g_assert_true (box_storage_secret_put (fx->storage, s3, &error));
  g_assert_no_error (error);

  got = box_storage_secret_get (fx->storage, "p", "GITHUB", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->hosts[0], ==, "api.github.com");
  g_assert_cmpstr (got->inject_header, ==, "Authorization");
  g_assert_nonnull (got->sealed_value);
  g_assert_true (g_bytes_equal (got->sealed_value, s1->sealed_value));
  g_assert_cmpint (got->created_at, ==, 100);
  g_clear_pointer (&got, box_secret_free);

  /* replacing keeps created_at */
  g_bytes_unref (again->sealed_value);
  again->sealed_value = g_bytes_new_static (new_sealed, sizeof new_sealed);
  g_assert_true (box_storage_secret_put (fx->storage, again, &error));
  g_assert_no_error (error);
  got = box_storage_secret_get (fx->storage, "p", "GITHUB", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got->hosts[0], ==, "new.example.com");
  g_assert_true (g_bytes_equal (got->sealed_value, again->sealed_value));
  g_assert_cmpint (got->created_at, ==, 100);
  g_assert_cmpint (got->updated_at, ==, 500);
  g_clear_pointer (&got, box_secret_free);

  list = box_storage_secret_list (fx->storage, "p", &error);
  g_assert_no_error (error);
  ASSERT_IDS (list, BoxSecret, name, "GITHUB", "AAA");
  g_clear_pointer (&list, g_ptr_array_unref);

  /* isolation */
  got = box_storage_secret_get (fx->storage, "q", "AAA", &error);
  g_assert_null (got);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "no secret AAA");
  g_clear_error (&error);
  got = box_storage_secret_get (fx->storage, "q", "GITHUB", &error);
  g_assert_cmpstr (got->hosts[0], ==, "other.example.com");
  g_clear_pointer (&got, box_secret_free);

  g_assert_false (box_storage_secret_delete (fx->storage, "q", "AAA", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_true (box_storage_secret_delete (fx->storage, "p", "AAA", &error));
  g_assert_no_error (error);
  list = box_storage_secret_list (fx->storage, "p", &error);
  ASSERT_IDS (list, BoxSecret, name, "GITHUB");
}

static void
test_meta (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) value = g_bytes_new ("\0\1\2binary", 9);
  g_autoptr(GBytes) other = g_bytes_new_static ("x", 1);
  g_autoptr(GBytes) empty = g_bytes_new (NULL, 0);
  g_autoptr(GBytes) got = NULL;

  got = box_storage_meta_get (fx->storage, "node-id", &error);
  g_assert_null (got);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  g_assert_true (box_storage_meta_set (fx->storage, "node-id", value, &error));
  g_assert_no_error (error);
  got = box_storage_meta_get (fx->storage, "node-id", &error);
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (got, value));
  g_clear_pointer (&got, g_bytes_unref);

  g_assert_true (box_storage_meta_set (fx->storage, "node-id", other, &error));
  g_assert_true (box_storage_meta_set (fx->storage, "empty", empty, &error));
  g_assert_no_error (error);
  got = box_storage_meta_get (fx->storage, "node-id", &error);
  g_assert_true (g_bytes_equal (got, other));
  g_clear_pointer (&got, g_bytes_unref);
  got = box_storage_meta_get (fx->storage, "empty", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_bytes_get_size (got), ==, 0);
}

/* Deleting a project takes everything of it, and nothing of others. */
static void
test_project_cascade (Fixture *fx, gconstpointer data)
{
  const char *names[] = { "doomed", "kept" };
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list = NULL;
  g_autoptr(BoxKey) key = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (names); i++) {
    const char *p = names[i];
    g_autoptr(BoxProject) project = make_project (p, 1);
    g_autofree char *key_id = g_strdup_printf ("key-%012zu", i);
    g_autofree char *hash = g_strdup_printf ("hash-%s", p);
    g_autoptr(BoxKey) k = make_key (key_id, p, hash, 1);
    g_autofree char *sb_id = g_strdup_printf ("sb-%012zu", i);
    g_autoptr(BoxSandbox) sb = make_sandbox (sb_id, p, "web", 1);
    g_autoptr(BoxCheckpoint) cp = make_checkpoint (sb_id, p, "v1", 1);
    g_autoptr(BoxSecret) secret = make_secret (p, "TOKEN", "example.com", 1);

    g_assert_true (box_storage_project_insert (fx->storage, project, &error));
    g_assert_true (box_storage_key_insert (fx->storage, k, &error));
    g_assert_true (box_storage_sandbox_insert (fx->storage, sb, &error));
    g_assert_true (box_storage_checkpoint_insert (fx->storage, cp, &error));
    g_assert_true (box_storage_secret_put (fx->storage, secret, &error));
    g_assert_no_error (error);
  }

  g_assert_true (box_storage_project_delete (fx->storage, "doomed", &error));
  g_assert_no_error (error);

  list = box_storage_key_list (fx->storage, "doomed", &error);
  g_assert_cmpuint (list->len, ==, 0);
  g_clear_pointer (&list, g_ptr_array_unref);
  key = box_storage_key_get_by_hash (fx->storage, "hash-doomed", &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  list = box_storage_sandbox_list (fx->storage, "doomed", &error);
  g_assert_cmpuint (list->len, ==, 0);
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_checkpoint_list (fx->storage, "sb-000000000000", &error);
  g_assert_cmpuint (list->len, ==, 0);
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_secret_list (fx->storage, "doomed", &error);
  g_assert_cmpuint (list->len, ==, 0);
  g_clear_pointer (&list, g_ptr_array_unref);

  list = box_storage_key_list (fx->storage, "kept", &error);
  g_assert_cmpuint (list->len, ==, 1);
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_sandbox_list (fx->storage, NULL, &error);
  ASSERT_IDS (list, BoxSandbox, id, "sb-000000000001");
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_checkpoint_list (fx->storage, "sb-000000000001", &error);
  g_assert_cmpuint (list->len, ==, 1);
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_secret_list (fx->storage, "kept", &error);
  g_assert_cmpuint (list->len, ==, 1);
  g_clear_pointer (&list, g_ptr_array_unref);
  list = box_storage_project_list (fx->storage, &error);
  ASSERT_IDS (list, BoxProject, name, "kept");
}

static void
test_not_started (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxStorage) storage = storage_new (fx->path);
  g_autoptr(GPtrArray) list = box_storage_project_list (storage, &error);

  g_assert_null (list);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
}

int
main (int argc, char **argv)
{
  if (argc == 4 && g_strcmp0 (argv[1], "--kill-writer") == 0)
    return kill_writer_main (argv[2], argv[3]);

  g_test_init (&argc, &argv, NULL);

#define ADD(path, func, data) \
  g_test_add ("/sqlite/" path, Fixture, data, fixture_setup, func, fixture_teardown)
  ADD ("projects", test_projects, NULL);
  ADD ("keys", test_keys, NULL);
  ADD ("sandboxes", test_sandboxes, NULL);
  ADD ("checkpoints", test_checkpoints, NULL);
  ADD ("secrets", test_secrets, NULL);
  ADD ("meta", test_meta, NULL);
  ADD ("project-cascade", test_project_cascade, NULL);
  ADD ("not-started", test_not_started, "closed");
  ADD ("persistence", test_persistence, "closed");
  ADD ("engine-paths", test_engine_paths, "closed");
  ADD ("module", test_module, "closed");
  ADD ("migrate-from-v1", test_migrate_v1, "closed");
  ADD ("refuse-future-version", test_future_version, "closed");
  ADD ("refuse-foreign-database", test_foreign_database, "closed");
  ADD ("kill-9", test_kill9, "closed");
  ADD ("kill-9-updates", test_kill9_updates, "closed");
  ADD ("records/compare-and-swap", test_records_cas, NULL);
  ADD ("records/batch", test_records_batch, NULL);
  ADD ("records/stats", test_records_stats, NULL);
  ADD ("records/async", test_records_async, NULL);
  ADD ("records/sandbox-reads", test_sandbox_reads, NULL);
  ADD ("migrate-v2-fixture", test_migrate_v2_fixture, "closed");
#undef ADD

  return g_test_run ();
}
