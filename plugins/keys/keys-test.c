/* keys-test.c: the `keys` auth plugin against an in-memory storage double. */
#include "config.h"

#include <string.h>

#include "box-keys-plugin.h"

/* ---- a BoxStorage test double: projects and keys in memory ---- */

#define TEST_TYPE_STORAGE (test_storage_get_type ())
G_DECLARE_FINAL_TYPE (TestStorage, test_storage, TEST, STORAGE, GObject)

struct _TestStorage {
  GObject    parent_instance;
  GPtrArray *projects;      /* BoxProject* */
  GPtrArray *keys;          /* BoxKey* */
  guint      n_lookups;     /* key_get_by_hash calls */
  gboolean   lying;         /* key_get_by_hash answers any hash with the first key */
};

static void test_storage_iface_init (BoxStorageInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (TestStorage, test_storage, G_TYPE_OBJECT,
                               G_IMPLEMENT_INTERFACE (BOX_TYPE_STORAGE, test_storage_iface_init))

static BoxProject *
test_storage_project_get (BoxStorage *storage, const char *name, GError **error)
{
  TestStorage *self = TEST_STORAGE (storage);

  for (guint i = 0; i < self->projects->len; i++) {
    BoxProject *project = g_ptr_array_index (self->projects, i);
    if (g_strcmp0 (project->name, name) == 0)
      return box_project_copy (project);
  }
  g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "project %s not found", name);
  return NULL;
}

static gboolean
test_storage_key_insert (BoxStorage *storage, const BoxKey *key, GError **error)
{
  TestStorage *self = TEST_STORAGE (storage);

  for (guint i = 0; i < self->keys->len; i++) {
    BoxKey *other = g_ptr_array_index (self->keys, i);
    if (g_strcmp0 (other->id, key->id) == 0 || g_strcmp0 (other->hash, key->hash) == 0) {
      g_set_error_literal (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS, "key exists");
      return FALSE;
    }
  }
  g_ptr_array_add (self->keys, box_key_copy (key));
  return TRUE;
}

static BoxKey *
test_storage_key_get_by_hash (BoxStorage *storage, const char *hash, GError **error)
{
  TestStorage *self = TEST_STORAGE (storage);

  self->n_lookups++;
  if (self->lying && self->keys->len > 0)
    return box_key_copy (g_ptr_array_index (self->keys, 0));
  for (guint i = 0; i < self->keys->len; i++) {
    BoxKey *key = g_ptr_array_index (self->keys, i);
    if (g_strcmp0 (key->hash, hash) == 0)
      return box_key_copy (key);
  }
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no such key");
  return NULL;
}

static GPtrArray *
test_storage_key_list (BoxStorage *storage, const char *project, GError **error)
{
  TestStorage *self = TEST_STORAGE (storage);
  GPtrArray *keys = g_ptr_array_new_with_free_func ((GDestroyNotify) box_key_free);

  for (guint i = 0; i < self->keys->len; i++) {
    BoxKey *key = g_ptr_array_index (self->keys, i);
    if (g_strcmp0 (key->project, project) == 0)
      g_ptr_array_add (keys, box_key_copy (key));
  }
  return keys;
}

/* Deliberately ignores @project: the plugin must not rely on storage to
 * keep projects apart when deleting. */
static gboolean
test_storage_key_delete (BoxStorage *storage, const char *project, const char *id, GError **error)
{
  TestStorage *self = TEST_STORAGE (storage);

  for (guint i = 0; i < self->keys->len; i++) {
    BoxKey *key = g_ptr_array_index (self->keys, i);
    if (g_strcmp0 (key->id, id) == 0) {
      g_ptr_array_remove_index (self->keys, i);
      return TRUE;
    }
  }
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no such key");
  return FALSE;
}

static void
test_storage_iface_init (BoxStorageInterface *iface)
{
  iface->project_get = test_storage_project_get;
  iface->key_insert = test_storage_key_insert;
  iface->key_get_by_hash = test_storage_key_get_by_hash;
  iface->key_list = test_storage_key_list;
  iface->key_delete = test_storage_key_delete;
}

static void
test_storage_finalize (GObject *object)
{
  TestStorage *self = TEST_STORAGE (object);

  g_ptr_array_unref (self->projects);
  g_ptr_array_unref (self->keys);
  G_OBJECT_CLASS (test_storage_parent_class)->finalize (object);
}

static void
test_storage_class_init (TestStorageClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = test_storage_finalize;
}

static void
test_storage_init (TestStorage *self)
{
  self->projects = g_ptr_array_new_with_free_func ((GDestroyNotify) box_project_free);
  self->keys = g_ptr_array_new_with_free_func ((GDestroyNotify) box_key_free);
}

static void
test_storage_add_project (TestStorage *self, const char *name)
{
  BoxProject *project = g_new0 (BoxProject, 1);

  project->name = g_strdup (name);
  project->domains = g_new0 (char *, 1);
  project->created_at = g_get_real_time ();
  g_ptr_array_add (self->projects, project);
}

/* ---- fixture ---- */

typedef struct {
  TestStorage *storage;
  BoxAuth     *auth;
} Fixture;

static void
fixture_set_up (Fixture *fixture, gconstpointer user_data)
{
  fixture->storage = g_object_new (TEST_TYPE_STORAGE, NULL);
  test_storage_add_project (fixture->storage, "alpha");
  test_storage_add_project (fixture->storage, "beta");
  fixture->auth = g_object_new (BOX_TYPE_KEYS_PLUGIN, "name", "keys", NULL);
  box_keys_plugin_set_storage (BOX_KEYS_PLUGIN (fixture->auth), BOX_STORAGE (fixture->storage));
}

static void
fixture_tear_down (Fixture *fixture, gconstpointer user_data)
{
  g_clear_object (&fixture->auth);
  g_clear_object (&fixture->storage);
}

static BoxKey *
create_key (Fixture *fixture, const char *project, const char *name, char **secret_out)
{
  g_autoptr(GError) error = NULL;
  BoxKey *key = box_auth_create_key (fixture->auth, project, name, secret_out, &error);

  g_assert_no_error (error);
  g_assert_nonnull (key);
  return key;
}

static void
assert_unauthorized (Fixture *fixture, const char *credential)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxPrincipal) principal = box_auth_authenticate (fixture->auth, credential, &error);

  g_assert_null (principal);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNAUTHORIZED);
  g_assert_cmpstr (error->message, ==, "a valid API key is required");
}

/* ---- tests ---- */

static void
test_keys_hash (void)
{
  g_autofree char *hash = box_keys_hash_secret ("abc");

  g_assert_cmpstr (hash, ==, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void
test_keys_shape (void)
{
  g_assert_true (box_keys_is_key_shaped ("box_abcdefghijklmnopqrstuvwxyz234567"));
  g_assert_false (box_keys_is_key_shaped (NULL));
  g_assert_false (box_keys_is_key_shaped (""));
  g_assert_false (box_keys_is_key_shaped ("box_"));
  g_assert_false (box_keys_is_key_shaped ("box_abcdefghijklmnopqrstuvwxyz23456"));
  g_assert_false (box_keys_is_key_shaped ("box_abcdefghijklmnopqrstuvwxyz2345678"));
  g_assert_false (box_keys_is_key_shaped ("box_Abcdefghijklmnopqrstuvwxyz234567"));
  g_assert_false (box_keys_is_key_shaped ("box_abcdefghijklmnopqrstuvwxyz234561"));
  g_assert_false (box_keys_is_key_shaped ("box_abcdefghijklmnopqrstuvwxyz234568"));
  g_assert_false (box_keys_is_key_shaped ("key_abcdefghijklmnopqrstuvwxyz234567"));
  g_assert_false (box_keys_is_key_shaped ("Bearer box_abcdefghijklmnopqrstuvwxyz234567"));
}

static void
test_keys_create_authenticate (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *secret = NULL;
  g_autofree char *hash = NULL;
  g_autoptr(BoxKey) key = create_key (fixture, "alpha", "ci", &secret);
  g_autoptr(BoxPrincipal) principal = NULL;
  BoxKey *stored;
  gint64 now = g_get_real_time ();

  g_assert_true (g_str_has_prefix (key->id, "key-"));
  g_assert_cmpuint (strlen (key->id), ==, 16);
  g_assert_cmpstr (key->name, ==, "ci");
  g_assert_cmpstr (key->project, ==, "alpha");
  g_assert_cmpint (key->created_at, <=, now);
  g_assert_cmpint (key->created_at, >, now - 60 * G_USEC_PER_SEC);
  g_assert_true (box_keys_is_key_shaped (secret));

  /* only the hash is stored */
  g_assert_cmpuint (fixture->storage->keys->len, ==, 1);
  stored = g_ptr_array_index (fixture->storage->keys, 0);
  hash = box_keys_hash_secret (secret);
  g_assert_cmpstr (stored->hash, ==, hash);
  g_assert_cmpuint (strlen (stored->hash), ==, 64);
  g_assert_null (strstr (stored->hash, secret + 4));

  principal = box_auth_authenticate (fixture->auth, secret, &error);
  g_assert_no_error (error);
  g_assert_nonnull (principal);
  g_assert_cmpint (principal->kind, ==, BOX_PRINCIPAL_KEY);
  g_assert_cmpstr (principal->project, ==, "alpha");
  g_assert_nonnull (principal->key);
  g_assert_cmpstr (principal->key->id, ==, key->id);
  g_assert_null (principal->sandbox_id);
}

static void
test_keys_create_refused (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *secret = NULL;
  g_autoptr(BoxKey) key = NULL;

  key = box_auth_create_key (fixture->auth, "gamma", "ci", &secret, &error);
  g_assert_null (key);
  g_assert_null (secret);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  key = box_auth_create_key (fixture->auth, "alpha", "", &secret, &error);
  g_assert_null (key);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_cmpuint (fixture->storage->keys->len, ==, 0);
}

static void
test_keys_list (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxKey) a1 = create_key (fixture, "alpha", "one", NULL);
  g_autoptr(BoxKey) a2 = create_key (fixture, "alpha", "two", NULL);
  g_autoptr(BoxKey) b1 = create_key (fixture, "beta", "one", NULL);
  g_autoptr(GPtrArray) alpha = NULL;
  g_autoptr(GPtrArray) beta = NULL;
  g_autoptr(GPtrArray) gamma = NULL;

  g_assert_cmpstr (a1->id, !=, a2->id);
  alpha = box_auth_list_keys (fixture->auth, "alpha", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (alpha->len, ==, 2);
  g_assert_cmpstr (((BoxKey *) g_ptr_array_index (alpha, 0))->id, ==, a1->id);
  g_assert_cmpstr (((BoxKey *) g_ptr_array_index (alpha, 1))->id, ==, a2->id);

  beta = box_auth_list_keys (fixture->auth, "beta", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (beta->len, ==, 1);
  g_assert_cmpstr (((BoxKey *) g_ptr_array_index (beta, 0))->id, ==, b1->id);

  gamma = box_auth_list_keys (fixture->auth, "gamma", &error);
  g_assert_null (gamma);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
}

static void
test_keys_delete (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *secret = NULL;
  g_autofree char *other_secret = NULL;
  g_autoptr(BoxKey) key = create_key (fixture, "alpha", "ci", &secret);
  g_autoptr(BoxKey) other = create_key (fixture, "alpha", "laptop", &other_secret);
  g_autoptr(BoxPrincipal) principal = box_auth_authenticate (fixture->auth, secret, &error);
  g_autoptr(BoxPrincipal) other_principal = NULL;
  g_autoptr(GPtrArray) keys = NULL;

  g_assert_no_error (error);
  g_assert_nonnull (principal);

  g_assert_true (box_auth_delete_key (fixture->auth, "alpha", key->id, &error));
  g_assert_no_error (error);
  /* revoked: refused on the very next request */
  assert_unauthorized (fixture, secret);
  keys = box_auth_list_keys (fixture->auth, "alpha", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (keys->len, ==, 1);

  /* the other key still works */
  other_principal = box_auth_authenticate (fixture->auth, other_secret, &error);
  g_assert_no_error (error);
  g_assert_nonnull (other_principal);

  /* twice: gone */
  g_assert_false (box_auth_delete_key (fixture->auth, "alpha", key->id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
}

/* A key in use is remembered: no storage read; a deleted one is not. */
static void
test_keys_cache (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *secret = NULL;
  g_autoptr(BoxKey) key = create_key (fixture, "alpha", "ci", &secret);
  guint lookups;

  for (guint i = 0; i < 3; i++) {
    g_autoptr(BoxPrincipal) principal = box_auth_authenticate (fixture->auth, secret, &error);
    g_assert_no_error (error);
    g_assert_nonnull (principal);
    g_assert_cmpstr (principal->project, ==, "alpha");
    g_assert_cmpstr (principal->key->id, ==, key->id);
  }
  g_assert_cmpuint (fixture->storage->n_lookups, ==, 1);

  /* a near miss of a remembered key is refused, and costs a lookup */
  lookups = fixture->storage->n_lookups;
  assert_unauthorized (fixture, "box_abcdefghijklmnopqrstuvwxyz234567");
  g_assert_cmpuint (fixture->storage->n_lookups, ==, lookups + 1);

  g_assert_true (box_auth_delete_key (fixture->auth, "alpha", key->id, &error));
  g_assert_no_error (error);
  lookups = fixture->storage->n_lookups;
  assert_unauthorized (fixture, secret);
  g_assert_cmpuint (fixture->storage->n_lookups, ==, lookups + 1);
}

static void
test_keys_delete_other_project (Fixture *fixture, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *secret = NULL;
  g_autoptr(BoxKey) key = create_key (fixture, "beta", "ci", &secret);
  g_autoptr(BoxPrincipal) principal = NULL;

  g_assert_false (box_auth_delete_key (fixture->auth, "alpha", key->id, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_cmpuint (fixture->storage->keys->len, ==, 1);

  principal = box_auth_authenticate (fixture->auth, secret, &error);
  g_assert_no_error (error);
  g_assert_nonnull (principal);
  g_assert_cmpstr (principal->project, ==, "beta");
}

static void
test_keys_malformed (Fixture *fixture, gconstpointer user_data)
{
  const char *malformed[] = {
    "", "box_", "box", "Bearer", "box_abcdefghijklmnopqrstuvwxyz23456",
    "box_abcdefghijklmnopqrstuvwxyz2345678", "box_ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
    "box_abcdefghijklmnopqrstuvwxyz23456!", "box_abcdefghijklmnopqrstuvwxyz01890",
    "xox_abcdefghijklmnopqrstuvwxyz234567", " box_abcdefghijklmnopqrstuvwxyz234567",
    "box_abcdefghijklmnopqrstuvwxyz234567 ", "box_abcdefghijklmnopqrstuvwxyz23456\xc3\xa9",
  };
  g_autoptr(BoxKey) key = create_key (fixture, "alpha", "ci", NULL);

  assert_unauthorized (fixture, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (malformed); i++)
    assert_unauthorized (fixture, malformed[i]);
  /* none of them reached storage */
  g_assert_cmpuint (fixture->storage->n_lookups, ==, 0);

  /* a well-formed key nobody issued costs one lookup */
  assert_unauthorized (fixture, "box_abcdefghijklmnopqrstuvwxyz234567");
  g_assert_cmpuint (fixture->storage->n_lookups, ==, 1);
}

/* A storage answering with the wrong row must not let anyone in. */
static void
test_keys_hash_mismatch (Fixture *fixture, gconstpointer user_data)
{
  g_autofree char *secret = NULL;
  g_autoptr(BoxKey) key = create_key (fixture, "alpha", "ci", &secret);

  fixture->storage->lying = TRUE;
  assert_unauthorized (fixture, "box_abcdefghijklmnopqrstuvwxyz234567");
  g_assert_cmpuint (fixture->storage->n_lookups, ==, 1);
}

static void
test_keys_no_storage (void)
{
  g_autoptr(BoxAuth) auth = g_object_new (BOX_TYPE_KEYS_PLUGIN, "name", "keys", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxPrincipal) principal = NULL;

  principal = box_auth_authenticate (auth, "box_abcdefghijklmnopqrstuvwxyz234567", &error);
  g_assert_null (principal);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
}

#define ADD(path, func) \
  g_test_add (path, Fixture, NULL, fixture_set_up, func, fixture_tear_down)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/keys/hash", test_keys_hash);
  g_test_add_func ("/keys/shape", test_keys_shape);
  g_test_add_func ("/keys/no-storage", test_keys_no_storage);
  ADD ("/keys/create-authenticate", test_keys_create_authenticate);
  ADD ("/keys/create-refused", test_keys_create_refused);
  ADD ("/keys/list", test_keys_list);
  ADD ("/keys/delete", test_keys_delete);
  ADD ("/keys/cache", test_keys_cache);
  ADD ("/keys/delete-other-project", test_keys_delete_other_project);
  ADD ("/keys/malformed", test_keys_malformed);
  ADD ("/keys/hash-mismatch", test_keys_hash_mismatch);
  return g_test_run ();
}
