/* box-broker-ca.c: the broker's CA (an ECDSA P-256 key and a self-signed
 * certificate valid for 10 years, on disk) and its leaves.
 *
 * Leaves are minted on demand, one per server name, valid for 7 days from
 * an hour ago (clocks in guests drift), and kept in memory only, at most
 * BOX_BROKER_CA_LEAF_CACHE of them (least recently used out first).  All
 * leaves share one key, made at start and never written anywhere: minting
 * then costs one signature rather than a key generation, and a key per leaf
 * would protect nothing, since whoever could read one leaf's key out of
 * boxd's memory could read the CA key as well.  A rotation makes a new
 * leaf key too.
 */
#include "config.h"

#include <gio/gio.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <string.h>

#include "box-error.h"
#include "box-broker-ca.h"

#define CA_VALIDITY_S   (10 * 365 * 24 * 3600LL)
#define LEAF_VALIDITY_S (7 * 24 * 3600LL)
#define BACKDATE_S      3600

struct _BoxBrokerLeaf {
  gint                             refs;
  char                            *name;
  GList                           *link;    /* in the CA's LRU queue; NULL once evicted */
  gnutls_certificate_credentials_t credentials;
  GBytes                          *pem;
};

struct _BoxBrokerCa {
  GMutex              lock;
  char               *key_path;
  char               *cert_path;
  gnutls_x509_privkey_t key;
  gnutls_x509_crt_t   cert;
  GBytes             *pem;
  gnutls_x509_privkey_t leaf_key;
  GHashTable         *leaves;   /* name -> BoxBrokerLeaf* (the cache's reference) */
  GQueue              lru;      /* BoxBrokerLeaf*, most recent first */
};

static gboolean
gnutls_check (int rc, const char *what, GError **error)
{
  if (rc >= 0)
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "broker CA: %s: %s", what, gnutls_strerror (rc));
  return FALSE;
}

static gboolean
set_serial (gnutls_x509_crt_t crt, GError **error)
{
  guint8 serial[16];

  if (!gnutls_check (gnutls_rnd (GNUTLS_RND_NONCE, serial, sizeof serial), "random serial", error))
    return FALSE;
  serial[0] &= 0x7f;   /* positive */
  serial[0] |= 0x01;   /* and no leading zero byte */
  return gnutls_check (gnutls_x509_crt_set_serial (crt, serial, sizeof serial), "serial", error);
}

static gnutls_x509_privkey_t
new_key (GError **error)
{
  gnutls_x509_privkey_t key = NULL;

  if (!gnutls_check (gnutls_x509_privkey_init (&key), "key", error))
    return NULL;
  if (!gnutls_check (gnutls_x509_privkey_generate (key, GNUTLS_PK_ECDSA,
                                                   GNUTLS_CURVE_TO_BITS (GNUTLS_ECC_CURVE_SECP256R1), 0),
                     "generating a key", error)) {
    gnutls_x509_privkey_deinit (key);
    return NULL;
  }
  return key;
}

static GBytes *
export_datum (int rc, gnutls_datum_t *out, const char *what, GError **error)
{
  GBytes *bytes;

  if (!gnutls_check (rc, what, error))
    return NULL;
  bytes = g_bytes_new (out->data, out->size);
  gnutls_memset (out->data, 0, out->size);
  gnutls_free (out->data);
  return bytes;
}

/* A new self-signed CA: key and certificate. */
static gboolean
make_ca (gnutls_x509_privkey_t *key_out, gnutls_x509_crt_t *cert_out, GError **error)
{
  gnutls_x509_privkey_t key = new_key (error);
  gnutls_x509_crt_t crt = NULL;
  g_autofree char *cn = g_strdup_printf ("box broker CA %s", g_get_host_name ());
  guint8 key_id[64];
  size_t key_id_len = sizeof key_id;
  time_t now = time (NULL);
  gboolean ok;

  if (key == NULL)
    return FALSE;
  ok = gnutls_check (gnutls_x509_crt_init (&crt), "certificate", error) &&
       gnutls_check (gnutls_x509_crt_set_version (crt, 3), "version", error) &&
       set_serial (crt, error) &&
       gnutls_check (gnutls_x509_crt_set_activation_time (crt, now - BACKDATE_S), "not before", error) &&
       gnutls_check (gnutls_x509_crt_set_expiration_time (crt, now + CA_VALIDITY_S), "not after", error) &&
       gnutls_check (gnutls_x509_crt_set_dn_by_oid (crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, strlen (cn)),
                     "name", error) &&
       gnutls_check (gnutls_x509_crt_set_key (crt, key), "public key", error) &&
       gnutls_check (gnutls_x509_crt_set_basic_constraints (crt, 1, 0), "basic constraints", error) &&
       gnutls_check (gnutls_x509_crt_set_key_usage (crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN),
                     "key usage", error) &&
       gnutls_check (gnutls_x509_crt_get_key_id (crt, 0, key_id, &key_id_len), "key id", error) &&
       gnutls_check (gnutls_x509_crt_set_subject_key_id (crt, key_id, key_id_len), "key id", error) &&
       gnutls_check (gnutls_x509_crt_sign2 (crt, crt, key, GNUTLS_DIG_SHA256, 0), "signing", error);
  if (!ok) {
    if (crt != NULL)
      gnutls_x509_crt_deinit (crt);
    gnutls_x509_privkey_deinit (key);
    return FALSE;
  }
  *key_out = key;
  *cert_out = crt;
  return TRUE;
}

static gboolean
load_ca (const char *key_path, const char *cert_path, gnutls_x509_privkey_t *key_out,
         gnutls_x509_crt_t *cert_out, GError **error)
{
  g_autofree char *key_pem = NULL, *cert_pem = NULL;
  gsize key_len = 0, cert_len = 0;
  gnutls_datum_t datum;
  gnutls_x509_privkey_t key = NULL;
  gnutls_x509_crt_t crt = NULL;
  guint8 id1[64], id2[64];
  size_t id1_len = sizeof id1, id2_len = sizeof id2;
  gboolean ok;

  if (!g_file_get_contents (key_path, &key_pem, &key_len, error) ||
      !g_file_get_contents (cert_path, &cert_pem, &cert_len, error))
    return FALSE;
  datum.data = (guint8 *) key_pem;
  datum.size = (guint) key_len;
  ok = gnutls_check (gnutls_x509_privkey_init (&key), "key", error) &&
       gnutls_check (gnutls_x509_privkey_import (key, &datum, GNUTLS_X509_FMT_PEM), key_path, error);
  gnutls_memset (key_pem, 0, key_len);
  datum.data = (guint8 *) cert_pem;
  datum.size = (guint) cert_len;
  ok = ok && gnutls_check (gnutls_x509_crt_init (&crt), "certificate", error) &&
       gnutls_check (gnutls_x509_crt_import (crt, &datum, GNUTLS_X509_FMT_PEM), cert_path, error) &&
       gnutls_check (gnutls_x509_privkey_get_key_id (key, 0, id1, &id1_len), "key id", error) &&
       gnutls_check (gnutls_x509_crt_get_key_id (crt, 0, id2, &id2_len), "key id", error);
  if (ok && (id1_len != id2_len || memcmp (id1, id2, id1_len) != 0 ||
             gnutls_x509_crt_get_ca_status (crt, NULL) <= 0)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "broker CA: %s is not a CA certificate for the key in %s", cert_path, key_path);
    ok = FALSE;
  }
  if (!ok) {
    if (crt != NULL)
      gnutls_x509_crt_deinit (crt);
    if (key != NULL)
      gnutls_x509_privkey_deinit (key);
    return FALSE;
  }
  *key_out = key;
  *cert_out = crt;
  return TRUE;
}

static gboolean
write_file (const char *path, GBytes *bytes, int mode, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (path);

  if (g_mkdir_with_parents (dir, 0700) != 0) {
    int errsv = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "broker CA: cannot create %s: %s",
                 dir, g_strerror (errsv));
    return FALSE;
  }
  /* written beside it and renamed over it */
  return g_file_set_contents_full (path, g_bytes_get_data (bytes, NULL), (gssize) g_bytes_get_size (bytes),
                                   G_FILE_SET_CONTENTS_CONSISTENT, mode, error);
}

/* The certificate first, then the key: a crash in between leaves a pair
 * that does not match, which the next start refuses (load_ca()) rather
 * than minting with a key nobody trusts. */
static gboolean
save_ca (BoxBrokerCa *ca, gnutls_x509_privkey_t key, gnutls_x509_crt_t crt, GBytes **pem_out,
         GError **error)
{
  gnutls_datum_t out;
  g_autoptr(GBytes) pem = export_datum (gnutls_x509_crt_export2 (crt, GNUTLS_X509_FMT_PEM, &out),
                                        &out, "exporting the certificate", error);
  g_autoptr(GBytes) key_pem = NULL;
  gboolean ok;

  if (pem == NULL)
    return FALSE;
  key_pem = export_datum (gnutls_x509_privkey_export2 (key, GNUTLS_X509_FMT_PEM, &out),
                          &out, "exporting the key", error);
  if (key_pem == NULL)
    return FALSE;
  ok = write_file (ca->cert_path, pem, 0644, error) && write_file (ca->key_path, key_pem, 0600, error);
  gnutls_memset ((gpointer) g_bytes_get_data (key_pem, NULL), 0, g_bytes_get_size (key_pem));
  if (ok)
    *pem_out = g_steal_pointer (&pem);
  return ok;
}

static GBytes *
cert_pem (gnutls_x509_crt_t crt, GError **error)
{
  gnutls_datum_t out;

  return export_datum (gnutls_x509_crt_export2 (crt, GNUTLS_X509_FMT_PEM, &out), &out,
                       "exporting the certificate", error);
}

static void
forget_leaves (BoxBrokerCa *ca)
{
  BoxBrokerLeaf *leaf;

  while ((leaf = g_queue_pop_head (&ca->lru)) != NULL) {
    leaf->link = NULL;
    g_hash_table_remove (ca->leaves, leaf->name);
    box_broker_leaf_unref (leaf);
  }
}

void
box_broker_ca_free (BoxBrokerCa *ca)
{
  if (ca == NULL)
    return;
  forget_leaves (ca);
  g_hash_table_unref (ca->leaves);
  if (ca->key != NULL)
    gnutls_x509_privkey_deinit (ca->key);
  if (ca->cert != NULL)
    gnutls_x509_crt_deinit (ca->cert);
  if (ca->leaf_key != NULL)
    gnutls_x509_privkey_deinit (ca->leaf_key);
  g_clear_pointer (&ca->pem, g_bytes_unref);
  g_free (ca->key_path);
  g_free (ca->cert_path);
  g_mutex_clear (&ca->lock);
  g_free (ca);
}

BoxBrokerCa *
box_broker_ca_open (const char *key_path, const char *cert_path, GError **error)
{
  g_autoptr(BoxBrokerCa) ca = g_new0 (BoxBrokerCa, 1);
  gboolean have_key = g_file_test (key_path, G_FILE_TEST_EXISTS);
  gboolean have_cert = g_file_test (cert_path, G_FILE_TEST_EXISTS);

  g_mutex_init (&ca->lock);
  g_queue_init (&ca->lru);
  ca->leaves = g_hash_table_new (g_str_hash, g_str_equal);
  ca->key_path = g_strdup (key_path);
  ca->cert_path = g_strdup (cert_path);
  if (have_key != have_cert) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "broker CA: %s exists but %s does not; remove it to have a new CA made",
                 have_key ? key_path : cert_path, have_key ? cert_path : key_path);
    return NULL;
  }
  if (have_key) {
    if (!load_ca (key_path, cert_path, &ca->key, &ca->cert, error))
      return NULL;
    ca->pem = cert_pem (ca->cert, error);
    if (ca->pem == NULL)
      return NULL;
  } else if (!make_ca (&ca->key, &ca->cert, error) ||
             !save_ca (ca, ca->key, ca->cert, &ca->pem, error)) {
    return NULL;
  }
  ca->leaf_key = new_key (error);
  if (ca->leaf_key == NULL)
    return NULL;
  return g_steal_pointer (&ca);
}

GBytes *
box_broker_ca_get_pem (BoxBrokerCa *ca)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&ca->lock);

  return g_bytes_ref (ca->pem);
}

gboolean
box_broker_ca_rotate (BoxBrokerCa *ca, GError **error)
{
  gnutls_x509_privkey_t key = NULL, leaf_key = NULL;
  gnutls_x509_crt_t crt = NULL;
  GBytes *pem = NULL;
  g_autoptr(GMutexLocker) locker = NULL;

  if (!make_ca (&key, &crt, error))
    return FALSE;
  leaf_key = new_key (error);
  locker = g_mutex_locker_new (&ca->lock);
  if (leaf_key == NULL || !save_ca (ca, key, crt, &pem, error)) {
    gnutls_x509_crt_deinit (crt);
    gnutls_x509_privkey_deinit (key);
    if (leaf_key != NULL)
      gnutls_x509_privkey_deinit (leaf_key);
    return FALSE;
  }
  gnutls_x509_crt_deinit (ca->cert);
  gnutls_x509_privkey_deinit (ca->key);
  gnutls_x509_privkey_deinit (ca->leaf_key);
  g_bytes_unref (ca->pem);
  ca->cert = crt;
  ca->key = key;
  ca->leaf_key = leaf_key;
  ca->pem = pem;
  forget_leaves (ca);
  return TRUE;
}

/* Called with the lock held. */
static BoxBrokerLeaf *
mint_leaf (BoxBrokerCa *ca, const char *name, GError **error)
{
  g_autoptr(GInetAddress) ip = g_inet_address_new_from_string (name);
  gnutls_x509_crt_t crt = NULL;
  gnutls_x509_crt_t chain[2];
  guint8 key_id[64];
  size_t key_id_len = sizeof key_id;
  time_t now = time (NULL);
  BoxBrokerLeaf *leaf;
  gboolean ok;
  int san_rc;

  if (!gnutls_check (gnutls_x509_crt_init (&crt), "certificate", error))
    return NULL;
  if (ip != NULL)
    san_rc = gnutls_x509_crt_set_subject_alt_name (crt, GNUTLS_SAN_IPADDRESS,
                                                   g_inet_address_to_bytes (ip),
                                                   (guint) g_inet_address_get_native_size (ip),
                                                   GNUTLS_FSAN_SET);
  else
    san_rc = gnutls_x509_crt_set_subject_alt_name (crt, GNUTLS_SAN_DNSNAME, name, (guint) strlen (name),
                                                   GNUTLS_FSAN_SET);
  ok = gnutls_check (gnutls_x509_crt_set_version (crt, 3), "version", error) &&
       set_serial (crt, error) &&
       gnutls_check (gnutls_x509_crt_set_activation_time (crt, now - BACKDATE_S), "not before", error) &&
       gnutls_check (gnutls_x509_crt_set_expiration_time (crt, now + LEAF_VALIDITY_S), "not after", error) &&
       gnutls_check (gnutls_x509_crt_set_dn_by_oid (crt, GNUTLS_OID_X520_COMMON_NAME, 0, name, strlen (name)),
                     "name", error) &&
       gnutls_check (san_rc, "subject alternative name", error) &&
       gnutls_check (gnutls_x509_crt_set_key (crt, ca->leaf_key), "public key", error) &&
       gnutls_check (gnutls_x509_crt_set_basic_constraints (crt, 0, -1), "basic constraints", error) &&
       gnutls_check (gnutls_x509_crt_set_key_usage (crt, GNUTLS_KEY_DIGITAL_SIGNATURE), "key usage", error) &&
       gnutls_check (gnutls_x509_crt_set_key_purpose_oid (crt, GNUTLS_KP_TLS_WWW_SERVER, 1), "purpose", error) &&
       gnutls_check (gnutls_x509_crt_get_key_id (ca->cert, 0, key_id, &key_id_len), "key id", error) &&
       gnutls_check (gnutls_x509_crt_set_authority_key_id (crt, key_id, key_id_len), "key id", error) &&
       gnutls_check (gnutls_x509_crt_sign2 (crt, ca->cert, ca->key, GNUTLS_DIG_SHA256, 0), "signing", error);
  if (!ok) {
    gnutls_x509_crt_deinit (crt);
    return NULL;
  }
  leaf = g_new0 (BoxBrokerLeaf, 1);
  leaf->refs = 1;
  leaf->name = g_strdup (name);
  leaf->pem = cert_pem (crt, NULL);
  chain[0] = crt;
  chain[1] = ca->cert;
  ok = gnutls_check (gnutls_certificate_allocate_credentials (&leaf->credentials), "credentials", error) &&
       gnutls_check (gnutls_certificate_set_x509_key (leaf->credentials, chain, 2, ca->leaf_key),
                     "credentials", error);
  gnutls_x509_crt_deinit (crt);
  if (!ok) {
    box_broker_leaf_unref (leaf);
    return NULL;
  }
  return leaf;
}

BoxBrokerLeaf *
box_broker_ca_leaf (BoxBrokerCa *ca, const char *name, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&ca->lock);
  BoxBrokerLeaf *leaf = g_hash_table_lookup (ca->leaves, name);

  if (leaf != NULL) {
    g_queue_unlink (&ca->lru, leaf->link);
    g_queue_push_head_link (&ca->lru, leaf->link);
    return box_broker_leaf_ref (leaf);
  }
  leaf = mint_leaf (ca, name, error);
  if (leaf == NULL)
    return NULL;
  if (g_queue_get_length (&ca->lru) >= BOX_BROKER_CA_LEAF_CACHE) {
    BoxBrokerLeaf *old = g_queue_pop_tail (&ca->lru);
    old->link = NULL;
    g_hash_table_remove (ca->leaves, old->name);
    box_broker_leaf_unref (old);
  }
  g_queue_push_head (&ca->lru, leaf);
  leaf->link = ca->lru.head;
  g_hash_table_insert (ca->leaves, leaf->name, leaf);
  return box_broker_leaf_ref (leaf);
}

guint
box_broker_ca_cached (BoxBrokerCa *ca)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&ca->lock);

  return g_queue_get_length (&ca->lru);
}

BoxBrokerLeaf *
box_broker_leaf_ref (BoxBrokerLeaf *leaf)
{
  g_atomic_int_inc (&leaf->refs);
  return leaf;
}

void
box_broker_leaf_unref (BoxBrokerLeaf *leaf)
{
  if (leaf == NULL || !g_atomic_int_dec_and_test (&leaf->refs))
    return;
  if (leaf->credentials != NULL)
    gnutls_certificate_free_credentials (leaf->credentials);
  g_clear_pointer (&leaf->pem, g_bytes_unref);
  g_free (leaf->name);
  g_free (leaf);
}

gnutls_certificate_credentials_t
box_broker_leaf_get_credentials (BoxBrokerLeaf *leaf)
{
  return leaf->credentials;
}

GBytes *
box_broker_leaf_get_pem (BoxBrokerLeaf *leaf)
{
  return g_bytes_ref (leaf->pem);
}
