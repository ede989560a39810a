/* box-keys-plugin.c: the `keys` auth plugin.
 *
 * A project key is "box_" followed by 32 lowercase base32 characters
 * (160 random bits).  Only the lowercase hex SHA-256 of the whole key is
 * stored, through the store its context gives it, so a lost key can be replaced
 * but never shown again.  A plain hash is enough: the secret is random and
 * long, so there is nothing to brute-force that a slow hash would protect.
 *
 * authenticate() is on every request's path: a credential that is not
 * shaped like a key is refused without touching storage; otherwise one
 * indexed lookup by hash, and the stored hash is compared with the computed
 * one in constant time before the key is accepted.
 *
 * Keys accepted that way are remembered (at most BOX_KEYS_CACHE_MAX of them,
 * by hash), so a key in use costs a SHA-256 and a hash-table lookup rather
 * than a storage read; the remembered hash is compared in constant time
 * again on every use.  Only this plugin deletes keys (delete_key(); the
 * engine revokes a project's keys through it before deleting the project),
 * and it forgets a key before it deletes it, so a deleted key stops working
 * at once.  (With one store shared by several boxd nodes, a key deleted on
 * another node would have to reach this cache through the store; a single
 * boxd owns its data directory today.)
 */
#include "config.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <string.h>

#include "box-plugin-context.h"
#include "box-keys-plugin.h"

#define BOX_KEYS_PREFIX      "box_"
#define BOX_KEYS_SECRET_LEN  32
#define BOX_KEYS_UNAUTHORIZED "a valid API key is required"
#define BOX_KEYS_CACHE_MAX   1024

struct _BoxKeysPlugin {
  BoxPlugin   parent_instance;
  BoxStorage *storage;   /* tests only; otherwise the context's */
  GHashTable *cache;     /* hash (hex) -> BoxKey*: keys accepted before */
};

static void box_keys_plugin_auth_init (BoxAuthInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxKeysPlugin, box_keys_plugin, BOX_TYPE_PLUGIN,
                               G_IMPLEMENT_INTERFACE (BOX_TYPE_AUTH, box_keys_plugin_auth_init))

gboolean
box_keys_is_key_shaped (const char *credential)
{
  const char *p;

  if (credential == NULL || !g_str_has_prefix (credential, BOX_KEYS_PREFIX))
    return FALSE;
  p = credential + strlen (BOX_KEYS_PREFIX);
  for (guint i = 0; i < BOX_KEYS_SECRET_LEN; i++) {
    if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '2' && p[i] <= '7')))
      return FALSE;
  }
  return p[BOX_KEYS_SECRET_LEN] == '\0';
}

char *
box_keys_hash_secret (const char *secret)
{
  g_return_val_if_fail (secret != NULL, NULL);
  /* GChecksum's string form is lowercase hex */
  return g_compute_checksum_for_string (G_CHECKSUM_SHA256, secret, -1);
}

void
box_keys_plugin_set_storage (BoxKeysPlugin *self, BoxStorage *storage)
{
  g_return_if_fail (BOX_IS_KEYS_PLUGIN (self));
  g_set_object (&self->storage, storage);
  g_hash_table_remove_all (self->cache);
}

static BoxStorage *
box_keys_plugin_get_storage (BoxKeysPlugin *self, GError **error)
{
  BoxStorage *storage;

  if (self->storage != NULL)
    return self->storage;
  storage = box_plugin_context_get_storage (box_plugin_get_context (BOX_PLUGIN (self)));
  if (storage == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                         "the keys plugin has no storage");
    return NULL;
  }
  return storage;
}

/* @n_chars lowercase base32 characters (5 bits from each random byte,
 * exact because 256 is a multiple of 32) from GnuTLS's key-grade generator */
static char *
random_base32 (guint n_chars)
{
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  g_autofree guint8 *bytes = g_malloc (n_chars);
  char *out = g_malloc (n_chars + 1);
  int rc = gnutls_rnd (GNUTLS_RND_KEY, bytes, n_chars);

  if (rc < 0)
    g_error ("gnutls_rnd failed: %s", gnutls_strerror (rc));
  for (guint i = 0; i < n_chars; i++)
    out[i] = alphabet[bytes[i] & 31];
  out[n_chars] = '\0';
  gnutls_memset (bytes, 0, n_chars);
  return out;
}

/* The engine checks names before it asks; this is the plugin's own guard:
 * 1 to 64 printable characters. */
static gboolean
check_key_name (const char *name, GError **error)
{
  glong n = name != NULL && g_utf8_validate (name, -1, NULL) ? g_utf8_strlen (name, -1) : 0;

  for (const char *p = name; n > 0 && *p != '\0'; p = g_utf8_next_char (p)) {
    if (!g_unichar_isprint (g_utf8_get_char (p)))
      n = 0;
  }
  if (n < 1 || n > 64) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         "invalid key name: must be 1 to 64 printable characters");
    return FALSE;
  }
  return TRUE;
}

static gboolean
hash_matches (const BoxKey *key, const char *hash)
{
  return key->hash != NULL && strlen (key->hash) == strlen (hash) &&
         gnutls_memcmp (key->hash, hash, strlen (hash)) == 0;
}

static BoxPrincipal *
principal_for_key (const BoxKey *key)
{
  BoxPrincipal *principal = g_new0 (BoxPrincipal, 1);

  principal->kind = BOX_PRINCIPAL_KEY;
  principal->project = g_strdup (key->project);
  principal->key = box_key_copy (key);
  return principal;
}

static void
cache_remember (BoxKeysPlugin *self, const BoxKey *key)
{
  /* a bound, not an LRU: when full, start again from the keys in use */
  if (g_hash_table_size (self->cache) >= BOX_KEYS_CACHE_MAX)
    g_hash_table_remove_all (self->cache);
  g_hash_table_replace (self->cache, g_strdup (key->hash), box_key_copy (key));
}

static gboolean
cache_entry_is_key (gpointer hash, gpointer value, gpointer key_id)
{
  return g_strcmp0 (((BoxKey *) value)->id, key_id) == 0;
}

static void
cache_forget (BoxKeysPlugin *self, const char *key_id)
{
  g_hash_table_foreach_remove (self->cache, cache_entry_is_key, (gpointer) key_id);
}

static BoxPrincipal *
box_keys_plugin_authenticate (BoxAuth *auth, const char *credential, GError **error)
{
  BoxKeysPlugin *self = BOX_KEYS_PLUGIN (auth);
  BoxStorage *storage;
  const BoxKey *known;
  g_autofree char *hash = NULL;
  g_autoptr(BoxKey) key = NULL;
  g_autoptr(GError) error_local = NULL;

  if (!box_keys_is_key_shaped (credential)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNAUTHORIZED, BOX_KEYS_UNAUTHORIZED);
    return NULL;
  }
  hash = box_keys_hash_secret (credential);
  known = g_hash_table_lookup (self->cache, hash);
  if (known != NULL && hash_matches (known, hash))
    return principal_for_key (known);

  storage = box_keys_plugin_get_storage (self, error);
  if (storage == NULL)
    return NULL;
  key = box_storage_key_get_by_hash (storage, hash, &error_local);
  if (key == NULL) {
    if (error_local == NULL || g_error_matches (error_local, BOX_ERROR, BOX_ERROR_NOT_FOUND)) {
      g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNAUTHORIZED, BOX_KEYS_UNAUTHORIZED);
      return NULL;
    }
    g_propagate_error (error, box_error_convert (error_local, "looking up a key"));
    return NULL;
  }
  /* Storage found the row by its index; accept it only when the stored
   * hash really is ours, compared in constant time. */
  if (!hash_matches (key, hash)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNAUTHORIZED, BOX_KEYS_UNAUTHORIZED);
    return NULL;
  }
  cache_remember (self, key);
  return principal_for_key (key);
}

static BoxKey *
box_keys_plugin_create_key (BoxAuth *auth, const char *project, const char *name,
                            char **secret_out, GError **error)
{
  BoxKeysPlugin *self = BOX_KEYS_PLUGIN (auth);
  BoxStorage *storage;
  g_autoptr(BoxProject) project_record = NULL;
  g_autoptr(BoxKey) key = NULL;
  g_autofree char *secret = NULL;

  g_return_val_if_fail (project != NULL, NULL);

  if (!check_key_name (name, error))
    return NULL;
  storage = box_keys_plugin_get_storage (self, error);
  if (storage == NULL)
    return NULL;
  project_record = box_storage_project_get (storage, project, error);
  if (project_record == NULL)
    return NULL;

  {
    g_autofree char *random = random_base32 (BOX_KEYS_SECRET_LEN);
    secret = g_strconcat (BOX_KEYS_PREFIX, random, NULL);
    gnutls_memset (random, 0, BOX_KEYS_SECRET_LEN);
  }
  if (!box_keys_is_key_shaped (secret)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                         "the key generator made a malformed key");
    return NULL;
  }
  key = g_new0 (BoxKey, 1);
  {
    g_autofree char *random = random_base32 (12);
    key->id = g_strconcat ("key-", random, NULL);
  }
  key->name = g_strdup (name);
  key->project = g_strdup (project);
  key->hash = box_keys_hash_secret (secret);
  key->created_at = g_get_real_time ();
  if (!box_storage_key_insert (storage, key, error))
    return NULL;

  if (secret_out != NULL)
    *secret_out = g_steal_pointer (&secret);
  return g_steal_pointer (&key);
}

static GPtrArray *
box_keys_plugin_list_keys (BoxAuth *auth, const char *project, GError **error)
{
  BoxKeysPlugin *self = BOX_KEYS_PLUGIN (auth);
  BoxStorage *storage;
  g_autoptr(BoxProject) project_record = NULL;

  g_return_val_if_fail (project != NULL, NULL);

  storage = box_keys_plugin_get_storage (self, error);
  if (storage == NULL)
    return NULL;
  project_record = box_storage_project_get (storage, project, error);
  if (project_record == NULL)
    return NULL;
  return box_storage_key_list (storage, project, error);
}

static gboolean
box_keys_plugin_delete_key (BoxAuth *auth, const char *project, const char *key_id, GError **error)
{
  BoxKeysPlugin *self = BOX_KEYS_PLUGIN (auth);
  BoxStorage *storage;
  g_autoptr(GPtrArray) keys = NULL;
  gboolean found = FALSE;

  g_return_val_if_fail (project != NULL, FALSE);
  g_return_val_if_fail (key_id != NULL, FALSE);

  storage = box_keys_plugin_get_storage (self, error);
  if (storage == NULL)
    return FALSE;
  /* Another project's key is as absent as a key that never was, whatever
   * the storage plugin does with the project argument. */
  keys = box_storage_key_list (storage, project, error);
  if (keys == NULL)
    return FALSE;
  for (guint i = 0; i < keys->len && !found; i++) {
    const BoxKey *key = g_ptr_array_index (keys, i);
    found = g_strcmp0 (key->id, key_id) == 0;
  }
  if (!found) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "key %s not found", key_id);
    return FALSE;
  }
  /* forgotten first: from here on it needs storage again, where it is gone
   * (or, if the delete fails, still there) */
  cache_forget (self, key_id);
  return box_storage_key_delete (storage, project, key_id, error);
}

static void
box_keys_plugin_auth_init (BoxAuthInterface *iface)
{
  iface->authenticate = box_keys_plugin_authenticate;
  iface->create_key = box_keys_plugin_create_key;
  iface->list_keys = box_keys_plugin_list_keys;
  iface->delete_key = box_keys_plugin_delete_key;
}

static void
box_keys_plugin_dispose (GObject *object)
{
  BoxKeysPlugin *self = BOX_KEYS_PLUGIN (object);

  g_clear_object (&self->storage);
  g_hash_table_remove_all (self->cache);
  G_OBJECT_CLASS (box_keys_plugin_parent_class)->dispose (object);
}

static void
box_keys_plugin_finalize (GObject *object)
{
  BoxKeysPlugin *self = BOX_KEYS_PLUGIN (object);

  g_hash_table_unref (self->cache);
  G_OBJECT_CLASS (box_keys_plugin_parent_class)->finalize (object);
}

static void
box_keys_plugin_class_init (BoxKeysPluginClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = box_keys_plugin_dispose;
  G_OBJECT_CLASS (klass)->finalize = box_keys_plugin_finalize;
}

static void
box_keys_plugin_init (BoxKeysPlugin *self)
{
  self->cache = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                       (GDestroyNotify) box_key_free);
}

BOX_PLUGIN_DEFINE_FULL ("keys", "Project API keys, stored as SHA-256 hashes",
                        box_keys_plugin_get_type, 100, BOX_PLUGIN_FLAG_NONE, NULL)
