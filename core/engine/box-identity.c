/* box-identity.c: the identity issuer's keys and signatures; see
 * box-identity.h. */
#include "config.h"

#include "box-identity.h"

#include <errno.h>
#include <string.h>
#include <glib/gstdio.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "box-error.h"

#define RETIRED_INFIX ".retired-"
#define NEW_SUFFIX    ".new"
/* the most characters of a kid (43) and of a Unix second, with room */
#define MAX_NAME_TAIL 128

typedef struct {
  gnutls_privkey_t key;
  char            *kid;
  char            *n;       /* base64url */
  char            *e;
  char            *path;
  gint64           until;   /* retired keys: listed until then; 0: the signing key */
  gint64           made;    /* retired keys: its file's mtime (ns), which orders equal untils */
} Key;

struct _BoxIdentity {
  char      *path;      /* the signing key's file */
  Key       *signing;
  GPtrArray *retired;   /* Key*, newest first */
};

G_DEFINE_AUTO_CLEANUP_FREE_FUNC (gnutls_x509_privkey_t, gnutls_x509_privkey_deinit, NULL)
G_DEFINE_AUTO_CLEANUP_FREE_FUNC (gnutls_pubkey_t, gnutls_pubkey_deinit, NULL)

static gboolean
ok_or_error (int ret, const char *what, GError **error)
{
  if (ret >= 0)
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "identity: %s: %s", what,
               gnutls_strerror (ret));
  return FALSE;
}

char *
box_b64url_encode (const void *data, gsize len)
{
  char *s = g_base64_encode (data, len);
  gsize n = strlen (s);

  while (n > 0 && s[n - 1] == '=')
    s[--n] = '\0';
  for (char *p = s; *p != '\0'; p++) {
    if (*p == '+')
      *p = '-';
    else if (*p == '/')
      *p = '_';
  }
  return s;
}

static gboolean
rename_or_error (const char *from, const char *to, GError **error)
{
  int saved_errno;

  if (g_rename (from, to) == 0)
    return TRUE;
  saved_errno = errno;
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "identity: cannot rename %s: %s", from,
               g_strerror (saved_errno));
  return FALSE;
}

char *
box_jwk_thumbprint (const char *jwk)
{
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  guint8 digest[32];
  gsize len = sizeof digest;

  g_checksum_update (sum, (const guchar *) jwk, (gssize) strlen (jwk));
  g_checksum_get_digest (sum, digest, &len);
  return box_b64url_encode (digest, len);
}

static void
key_free (Key *key)
{
  if (key == NULL)
    return;
  if (key->key != NULL)
    gnutls_privkey_deinit (key->key);
  g_free (key->kid);
  g_free (key->n);
  g_free (key->e);
  g_free (key->path);
  g_free (key);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Key, key_free)

/* n, e and the kid of @key->key. */
static gboolean
key_describe (Key *key, GError **error)
{
  g_auto(gnutls_pubkey_t) pub = NULL;
  gnutls_datum_t n = { NULL, 0 }, e = { NULL, 0 };
  g_autofree char *jwk = NULL;
  int ret;

  ret = gnutls_pubkey_init (&pub);
  if (ret >= 0)
    ret = gnutls_pubkey_import_privkey (pub, key->key, 0, 0);
  if (ret >= 0)
    ret = gnutls_pubkey_export_rsa_raw2 (pub, &n, &e, GNUTLS_EXPORT_FLAG_NO_LZ);
  if (!ok_or_error (ret, "cannot read a public key", error))
    return FALSE;
  key->n = box_b64url_encode (n.data, n.size);
  key->e = box_b64url_encode (e.data, e.size);
  gnutls_free (n.data);
  gnutls_free (e.data);
  /* RFC 7638 3.2: the required members in lexicographic order, no white
   * space; base64url holds nothing JSON escapes */
  jwk = g_strdup_printf ("{\"e\":\"%s\",\"kty\":\"RSA\",\"n\":\"%s\"}", key->e, key->n);
  key->kid = box_jwk_thumbprint (jwk);
  return TRUE;
}

/* The RSA key in the PEM file @path. */
static Key *
key_load (const char *path, GError **error)
{
  g_auto(gnutls_x509_privkey_t) x509 = NULL;
  g_autoptr(Key) key = g_new0 (Key, 1);
  g_autofree char *pem = NULL;
  g_autoptr(GError) local_error = NULL;
  gsize len = 0;
  unsigned int bits = 0;
  int ret;

  if (!g_file_get_contents (path, &pem, &len, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "identity: %s", local_error->message);
    return NULL;
  }
  {
    gnutls_datum_t datum = { (unsigned char *) pem, (unsigned int) len };

    ret = gnutls_x509_privkey_init (&x509);
    if (ret >= 0)
      ret = gnutls_x509_privkey_import (x509, &datum, GNUTLS_X509_FMT_PEM);
    explicit_bzero (pem, len);
  }
  if (ret >= 0 && (gnutls_x509_privkey_get_pk_algorithm2 (x509, &bits) != GNUTLS_PK_RSA ||
                   bits < BOX_IDENTITY_KEY_BITS))
    ret = GNUTLS_E_UNKNOWN_PK_ALGORITHM;
  if (ret >= 0)
    ret = gnutls_privkey_init (&key->key);
  if (ret >= 0)
    ret = gnutls_privkey_import_x509 (key->key, x509, GNUTLS_PRIVKEY_IMPORT_COPY);
  if (!ok_or_error (ret, path, error) || !key_describe (key, error))
    return NULL;
  key->path = g_strdup (path);
  return g_steal_pointer (&key);
}

/* A new RSA key written to @path (0600, atomically). */
static Key *
key_new (const char *path, GError **error)
{
  g_auto(gnutls_x509_privkey_t) x509 = NULL;
  g_autoptr(GError) local_error = NULL;
  gnutls_datum_t pem = { NULL, 0 };
  gboolean saved;
  int ret;

  ret = gnutls_x509_privkey_init (&x509);
  if (ret >= 0)
    ret = gnutls_x509_privkey_generate (x509, GNUTLS_PK_RSA, BOX_IDENTITY_KEY_BITS, 0);
  if (ret >= 0)
    ret = gnutls_x509_privkey_export2_pkcs8 (x509, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN,
                                             &pem);
  if (!ok_or_error (ret, "cannot make a signing key", error))
    return NULL;
  saved = g_file_set_contents_full (path, (const char *) pem.data, pem.size,
                                    G_FILE_SET_CONTENTS_CONSISTENT, 0600, &local_error);
  explicit_bzero (pem.data, pem.size);
  gnutls_free (pem.data);
  if (!saved) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "identity: %s", local_error->message);
    return NULL;
  }
  return key_load (path, error);
}

/* "<until>-<kid>" after RETIRED_INFIX: @until, or FALSE for another name. */
static gboolean
parse_retired_tail (const char *tail, gint64 *until)
{
  g_autofree char *number = NULL;
  const char *dash = strchr (tail, '-');
  guint64 value;

  if (dash == NULL || dash == tail || dash[1] == '\0' || strlen (tail) > MAX_NAME_TAIL)
    return FALSE;
  number = g_strndup (tail, (gsize) (dash - tail));
  if (!g_ascii_string_to_unsigned (number, 10, 1, G_MAXINT64, &value, NULL))
    return FALSE;
  *until = (gint64) value;
  return TRUE;
}

static gint
newest_first (gconstpointer a, gconstpointer b)
{
  const Key *ka = *(Key *const *) a, *kb = *(Key *const *) b;

  if (ka->until != kb->until)
    return ka->until < kb->until ? 1 : -1;
  return ka->made < kb->made ? 1 : ka->made > kb->made ? -1 : 0;
}

/* Forgets and removes the retired keys whose time is over at @now. */
static void
prune (BoxIdentity *self, gint64 now)
{
  for (guint i = self->retired->len; i-- > 0;) {
    Key *key = g_ptr_array_index (self->retired, i);

    if (key->until > now)
      continue;
    if (g_unlink (key->path) != 0 && errno != ENOENT)
      g_warning ("identity: cannot remove %s: %s", key->path, g_strerror (errno));
    else
      g_message ("identity: the retired key %s is no longer listed", key->kid);
    g_ptr_array_remove_index (self->retired, i);
  }
}

static gboolean
load_retired (BoxIdentity *self, GError **error)
{
  g_autofree char *dir_path = g_path_get_dirname (self->path);
  g_autofree char *base = g_path_get_basename (self->path);
  g_autofree char *prefix = g_strconcat (base, RETIRED_INFIX, NULL);
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GDir) dir = g_dir_open (dir_path, 0, &local_error);
  const char *name;

  if (dir == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "identity: %s", local_error->message);
    return FALSE;
  }
  while ((name = g_dir_read_name (dir)) != NULL) {
    g_autofree char *path = NULL;
    gint64 until = 0;
    GStatBuf st;
    Key *key;

    if (!g_str_has_prefix (name, prefix) || !parse_retired_tail (name + strlen (prefix), &until))
      continue;
    path = g_build_filename (dir_path, name, NULL);
    /* a retired key only lets tokens it signed verify until their end: one
     * that cannot be read is left where it is for the operator, and boxd
     * starts without it (those tokens no longer verify) */
    key = key_load (path, &local_error);
    if (key == NULL) {
      g_warning ("identity: the retired key %s is left out of the JWKS: %s", path,
                 local_error->message);
      g_clear_error (&local_error);
      continue;
    }
    key->until = until;
    /* keys are written once (made, then renamed): the newer key is the
     * newer file */
    if (g_stat (path, &st) == 0)
      key->made = (gint64) st.st_mtim.tv_sec * G_GINT64_CONSTANT (1000000000) + st.st_mtim.tv_nsec;
    g_ptr_array_add (self->retired, key);
  }
  g_ptr_array_sort (self->retired, newest_first);
  return TRUE;
}

BoxIdentity *
box_identity_load (const char *path, gint64 now, GError **error)
{
  g_autoptr(BoxIdentity) self = g_new0 (BoxIdentity, 1);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *new_path = g_strconcat (path, NEW_SUFFIX, NULL);

  self->path = g_strdup (path);
  self->retired = g_ptr_array_new_with_free_func ((GDestroyNotify) key_free);
  if (g_mkdir_with_parents (dir, 0700) != 0) {
    int saved_errno = errno;

    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "identity: cannot create %s: %s", dir,
                 g_strerror (saved_errno));
    return NULL;
  }
  /* a rotation cut short after the old key was retired */
  if (!g_file_test (path, G_FILE_TEST_EXISTS) && g_file_test (new_path, G_FILE_TEST_EXISTS) &&
      !rename_or_error (new_path, path, error))
    return NULL;
  g_unlink (new_path);
  if (g_file_test (path, G_FILE_TEST_EXISTS)) {
    self->signing = key_load (path, error);
  } else {
    self->signing = key_new (path, error);
    if (self->signing != NULL)
      g_message ("identity: made a signing key in %s (kid %s)", path, self->signing->kid);
  }
  if (self->signing == NULL || !load_retired (self, error))
    return NULL;
  prune (self, now);
  return g_steal_pointer (&self);
}

void
box_identity_free (BoxIdentity *self)
{
  if (self == NULL)
    return;
  key_free (self->signing);
  g_clear_pointer (&self->retired, g_ptr_array_unref);
  g_free (self->path);
  g_free (self);
}

const char *
box_identity_get_kid (BoxIdentity *self)
{
  return self->signing->kid;
}

static JsonNode *
jwk_node (const Key *key)
{
  JsonObject *jwk = json_object_new ();

  json_object_set_string_member (jwk, "kty", "RSA");
  json_object_set_string_member (jwk, "use", "sig");
  json_object_set_string_member (jwk, "alg", "RS256");
  json_object_set_string_member (jwk, "kid", key->kid);
  json_object_set_string_member (jwk, "n", key->n);
  json_object_set_string_member (jwk, "e", key->e);
  return json_node_init_object (json_node_alloc (), jwk);
}

JsonNode *
box_identity_jwks (BoxIdentity *self, gint64 now)
{
  JsonArray *keys = json_array_new ();
  JsonObject *root = json_object_new ();

  prune (self, now);
  json_array_add_element (keys, jwk_node (self->signing));
  for (guint i = 0; i < self->retired->len; i++)
    json_array_add_element (keys, jwk_node (g_ptr_array_index (self->retired, i)));
  json_object_set_array_member (root, "keys", keys);
  return json_node_init_object (json_node_alloc (), root);
}

static char *
b64url_json (JsonNode *node)
{
  g_autofree char *text = json_to_string (node, FALSE);

  return box_b64url_encode (text, strlen (text));
}

char *
box_identity_sign (BoxIdentity *self, JsonObject *claims, gint64 now, GError **error)
{
  g_autoptr(JsonObject) header = json_object_new ();
  g_autoptr(JsonNode) header_node = NULL;
  g_autoptr(JsonNode) claims_node = json_node_new (JSON_NODE_OBJECT);
  g_autofree char *header64 = NULL;
  g_autofree char *claims64 = NULL;
  g_autofree char *input = NULL;
  g_autofree char *sig64 = NULL;
  gnutls_datum_t data, sig = { NULL, 0 };

  prune (self, now);
  json_object_set_string_member (header, "alg", "RS256");
  json_object_set_string_member (header, "kid", self->signing->kid);
  json_object_set_string_member (header, "typ", "JWT");
  header_node = json_node_init_object (json_node_alloc (), header);
  json_node_set_object (claims_node, claims);
  header64 = b64url_json (header_node);
  claims64 = b64url_json (claims_node);
  input = g_strdup_printf ("%s.%s", header64, claims64);
  data.data = (unsigned char *) input;
  data.size = (unsigned int) strlen (input);
  if (!ok_or_error (gnutls_privkey_sign_data2 (self->signing->key, GNUTLS_SIGN_RSA_SHA256, 0,
                                               &data, &sig),
                    "cannot sign", error))
    return NULL;
  sig64 = box_b64url_encode (sig.data, sig.size);
  gnutls_free (sig.data);
  return g_strdup_printf ("%s.%s", input, sig64);
}

gboolean
box_identity_rotate (BoxIdentity *self, gint64 now, char **retired_kid, gint64 *retired_until,
                     GError **error)
{
  g_autofree char *new_path = g_strconcat (self->path, NEW_SUFFIX, NULL);
  g_autofree char *retired_path = NULL;
  g_autoptr(Key) fresh = NULL;
  Key *old = self->signing;
  gint64 until = now + BOX_IDENTITY_TTL_MAX_S + 1;

  prune (self, now);
  fresh = key_new (new_path, error);
  if (fresh == NULL) {
    g_unlink (new_path);
    return FALSE;
  }
  retired_path = g_strdup_printf ("%s" RETIRED_INFIX "%" G_GINT64_FORMAT "-%s", self->path, until,
                                  old->kid);
  if (!rename_or_error (self->path, retired_path, error)) {
    g_unlink (new_path);
    return FALSE;
  }
  if (!rename_or_error (new_path, self->path, error)) {
    /* put the old key back: it still signs */
    g_rename (retired_path, self->path);
    g_unlink (new_path);
    return FALSE;
  }
  g_free (fresh->path);
  fresh->path = g_strdup (self->path);
  g_free (old->path);
  old->path = g_steal_pointer (&retired_path);
  old->until = until;
  g_ptr_array_insert (self->retired, 0, old);
  self->signing = g_steal_pointer (&fresh);
  g_message ("identity: the signing key is now %s; %s stays listed until %" G_GINT64_FORMAT,
             self->signing->kid, old->kid, until);
  if (retired_kid != NULL)
    *retired_kid = g_strdup (old->kid);
  if (retired_until != NULL)
    *retired_until = until;
  return TRUE;
}
