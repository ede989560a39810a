/* box-edge-cert.c: the edge's certificate and its own CA; see
 * box-edge-cert.h. */
#include "config.h"

#include "box-edge-cert.h"

#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <string.h>

#include "box-error.h"

G_DEFINE_AUTO_CLEANUP_FREE_FUNC (gnutls_x509_crt_t, gnutls_x509_crt_deinit, NULL)
G_DEFINE_AUTO_CLEANUP_FREE_FUNC (gnutls_x509_privkey_t, gnutls_x509_privkey_deinit, NULL)

#define DAY_S (24 * 3600)

char *
box_edge_ca_path (const char *data_dir)
{
  return g_build_filename (data_dir, "tls", "ca.pem", NULL);
}

static gboolean
tls_failed (int ret, const char *what, GError **error)
{
  if (ret >= 0)
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "edge certificate: %s: %s", what,
               gnutls_strerror (ret));
  return FALSE;
}

static gboolean
write_file (const char *path, const gnutls_datum_t *datum, int mode, GError **error)
{
  g_autoptr(GError) local_error = NULL;

  if (!g_file_set_contents_full (path, (const char *) datum->data, datum->size,
                                 G_FILE_SET_CONTENTS_CONSISTENT, mode, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "edge certificate: %s",
                 local_error->message);
    return FALSE;
  }
  return TRUE;
}

static gboolean
read_datum (const char *path, char **contents, gnutls_datum_t *datum)
{
  gsize len = 0;

  if (!g_file_get_contents (path, contents, &len, NULL))
    return FALSE;
  datum->data = (unsigned char *) *contents;
  datum->size = (unsigned int) len;
  return TRUE;
}

static gboolean
load_pair (const char *cert_path, const char *key_path, gnutls_x509_crt_t *crt,
           gnutls_x509_privkey_t *key)
{
  g_autofree char *cert_pem = NULL;
  g_autofree char *key_pem = NULL;
  gnutls_datum_t datum;

  if (!read_datum (cert_path, &cert_pem, &datum) ||
      gnutls_x509_crt_init (crt) < 0 ||
      gnutls_x509_crt_import (*crt, &datum, GNUTLS_X509_FMT_PEM) < 0)
    return FALSE;
  if (key != NULL &&
      (!read_datum (key_path, &key_pem, &datum) ||
       gnutls_x509_privkey_init (key) < 0 ||
       gnutls_x509_privkey_import (*key, &datum, GNUTLS_X509_FMT_PEM) < 0))
    return FALSE;
  return TRUE;
}

/* A new certificate for @key with the common fields set. */
static gboolean
new_cert (gnutls_x509_crt_t *crt, gnutls_x509_privkey_t key, const char *cn, guint days,
          GError **error)
{
  unsigned char serial[16];
  time_t now = time (NULL);
  int ret;

  ret = gnutls_x509_crt_init (crt);
  if (ret >= 0)
    ret = gnutls_rnd (GNUTLS_RND_NONCE, serial, sizeof serial);
  serial[0] &= 0x7f;
  if (ret >= 0)
    ret = gnutls_x509_crt_set_version (*crt, 3);
  if (ret >= 0)
    ret = gnutls_x509_crt_set_serial (*crt, serial, sizeof serial);
  if (ret >= 0)
    ret = gnutls_x509_crt_set_activation_time (*crt, now - 3600);
  if (ret >= 0)
    ret = gnutls_x509_crt_set_expiration_time (*crt, now + (time_t) days * DAY_S);
  if (ret >= 0)
    ret = gnutls_x509_crt_set_dn_by_oid (*crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, strlen (cn));
  if (ret >= 0)
    ret = gnutls_x509_crt_set_key (*crt, key);
  return tls_failed (ret, "cannot fill a certificate", error);
}

static gboolean
new_key (gnutls_x509_privkey_t *key, GError **error)
{
  int ret = gnutls_x509_privkey_init (key);

  if (ret >= 0)
    ret = gnutls_x509_privkey_generate (*key, GNUTLS_PK_ECDSA,
                                        GNUTLS_CURVE_TO_BITS (GNUTLS_ECC_CURVE_SECP256R1), 0);
  return tls_failed (ret, "cannot make a key", error);
}

static gboolean
save_pair (gnutls_x509_crt_t crt, gnutls_x509_crt_t chain, gnutls_x509_privkey_t key,
           const char *cert_path, const char *key_path, GError **error)
{
  gnutls_datum_t key_pem = { NULL, 0 };
  gnutls_datum_t cert_pem = { NULL, 0 };
  gnutls_datum_t chain_pem = { NULL, 0 };
  g_autoptr(GByteArray) all = g_byte_array_new ();
  gnutls_datum_t datum;
  gboolean ok;
  int ret;

  ret = gnutls_x509_privkey_export2_pkcs8 (key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN,
                                           &key_pem);
  if (ret >= 0)
    ret = gnutls_x509_crt_export2 (crt, GNUTLS_X509_FMT_PEM, &cert_pem);
  if (ret >= 0 && chain != NULL)
    ret = gnutls_x509_crt_export2 (chain, GNUTLS_X509_FMT_PEM, &chain_pem);
  ok = tls_failed (ret, "cannot export", error);
  if (ok) {
    g_byte_array_append (all, cert_pem.data, cert_pem.size);
    if (chain_pem.data != NULL)
      g_byte_array_append (all, chain_pem.data, chain_pem.size);
    datum.data = all->data;
    datum.size = all->len;
    /* the key first: a certificate on disk always has its key */
    ok = write_file (key_path, &key_pem, 0600, error) && write_file (cert_path, &datum, 0644, error);
  }
  gnutls_free (key_pem.data);
  gnutls_free (cert_pem.data);
  gnutls_free (chain_pem.data);
  return ok;
}

static gboolean
set_key_ids (gnutls_x509_crt_t crt, gnutls_x509_crt_t issuer, GError **error)
{
  unsigned char id[64];
  size_t len = sizeof id;
  int ret = gnutls_x509_crt_get_key_id (crt, 0, id, &len);

  if (ret >= 0)
    ret = gnutls_x509_crt_set_subject_key_id (crt, id, len);
  len = sizeof id;
  if (ret >= 0)
    ret = gnutls_x509_crt_get_key_id (issuer, 0, id, &len);
  if (ret >= 0)
    ret = gnutls_x509_crt_set_authority_key_id (crt, id, len);
  return tls_failed (ret, "cannot set key ids", error);
}

static gboolean
make_ca (const char *ca_path, const char *ca_key_path, gnutls_x509_crt_t *ca,
         gnutls_x509_privkey_t *ca_key, GError **error)
{
  g_autofree char *cn = g_strdup_printf ("box edge CA %s", g_get_host_name ());
  int ret;

  if (!new_key (ca_key, error) || !new_cert (ca, *ca_key, cn, BOX_EDGE_CA_DAYS, error))
    return FALSE;
  ret = gnutls_x509_crt_set_basic_constraints (*ca, 1, 0);
  if (ret >= 0)
    ret = gnutls_x509_crt_set_key_usage (*ca, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN);
  if (!tls_failed (ret, "cannot make the CA", error) || !set_key_ids (*ca, *ca, error))
    return FALSE;
  ret = gnutls_x509_crt_sign2 (*ca, *ca, *ca_key, GNUTLS_DIG_SHA256, 0);
  if (!tls_failed (ret, "cannot sign the CA", error))
    return FALSE;
  g_message ("edge: made a certificate authority in %s", ca_path);
  return save_pair (*ca, NULL, *ca_key, ca_path, ca_key_path, error);
}

static gboolean
make_leaf (gnutls_x509_crt_t ca, gnutls_x509_privkey_t ca_key, const char *domain,
           const char *path, const char *key_path, GError **error)
{
  g_auto(gnutls_x509_crt_t) crt = NULL;
  g_auto(gnutls_x509_privkey_t) key = NULL;
  g_autofree char *wildcard = g_strdup_printf ("*.%s", domain);
  int ret;

  if (!new_key (&key, error) || !new_cert (&crt, key, wildcard, BOX_EDGE_LEAF_DAYS, error))
    return FALSE;
  ret = gnutls_x509_crt_set_basic_constraints (crt, 0, -1);
  if (ret >= 0)
    ret = gnutls_x509_crt_set_key_usage (crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
  if (ret >= 0)
    ret = gnutls_x509_crt_set_key_purpose_oid (crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
  if (ret >= 0)
    ret = gnutls_x509_crt_set_subject_alt_name (crt, GNUTLS_SAN_DNSNAME, wildcard,
                                                strlen (wildcard), GNUTLS_FSAN_APPEND);
  if (ret >= 0)
    ret = gnutls_x509_crt_set_subject_alt_name (crt, GNUTLS_SAN_DNSNAME, domain, strlen (domain),
                                                GNUTLS_FSAN_APPEND);
  if (!tls_failed (ret, "cannot make the certificate", error) || !set_key_ids (crt, ca, error))
    return FALSE;
  ret = gnutls_x509_crt_sign2 (crt, ca, ca_key, GNUTLS_DIG_SHA256, 0);
  if (!tls_failed (ret, "cannot sign the certificate", error))
    return FALSE;
  g_message ("edge: issued a certificate for %s in %s", wildcard, path);
  return save_pair (crt, ca, key, path, key_path, error);
}

/* Whether the leaf at @path can serve @domain for a while yet. */
static gboolean
leaf_fits (const char *path, const char *key_path, gnutls_x509_crt_t ca, const char *domain)
{
  g_auto(gnutls_x509_crt_t) crt = NULL;
  g_autofree char *wildcard = g_strdup_printf ("*.%s", domain);
  g_autofree char *probe = g_strdup_printf ("a.%s", domain);

  if (!g_file_test (key_path, G_FILE_TEST_IS_REGULAR) || !load_pair (path, NULL, &crt, NULL))
    return FALSE;
  return gnutls_x509_crt_check_issuer (crt, ca) &&
         gnutls_x509_crt_check_hostname (crt, probe) &&
         gnutls_x509_crt_check_hostname (crt, domain) &&
         gnutls_x509_crt_get_expiration_time (crt) > time (NULL) + BOX_EDGE_RENEW_DAYS * DAY_S;
}

static gboolean
own_certificate (const char *data_dir, const char *domain, char **cert_out, char **key_out,
                 GError **error)
{
  g_autofree char *dir = g_build_filename (data_dir, "tls", NULL);
  g_autofree char *ca_path = box_edge_ca_path (data_dir);
  g_autofree char *ca_key_path = g_build_filename (dir, "ca-key.pem", NULL);
  g_autofree char *path = g_build_filename (dir, "edge.pem", NULL);
  g_autofree char *key_path = g_build_filename (dir, "edge-key.pem", NULL);
  g_auto(gnutls_x509_crt_t) ca = NULL;
  g_auto(gnutls_x509_privkey_t) ca_key = NULL;

  if (g_mkdir_with_parents (dir, 0755) != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "edge certificate: cannot make %s: %s",
                 dir, g_strerror (errno));
    return FALSE;
  }
  if (!g_file_test (ca_path, G_FILE_TEST_EXISTS)) {
    if (!make_ca (ca_path, ca_key_path, &ca, &ca_key, error))
      return FALSE;
  } else if (!load_pair (ca_path, ca_key_path, &ca, &ca_key)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "edge certificate: cannot read the CA %s or its key %s", ca_path, ca_key_path);
    return FALSE;
  }
  if (!leaf_fits (path, key_path, ca, domain) &&
      !make_leaf (ca, ca_key, domain, path, key_path, error))
    return FALSE;
  *cert_out = g_steal_pointer (&path);
  *key_out = g_steal_pointer (&key_path);
  return TRUE;
}

GTlsCertificate *
box_edge_cert_load_pair (const char *cert_path, const char *key_path, GError **error)
{
  g_auto(gnutls_x509_crt_t) crt = NULL;
  g_auto(gnutls_x509_privkey_t) key = NULL;
  g_autoptr(GError) local_error = NULL;
  guint8 crt_id[64], key_id[64];
  size_t crt_id_len = sizeof crt_id, key_id_len = sizeof key_id;
  GTlsCertificate *cert;

  if (!load_pair (cert_path, key_path, &crt, &key)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "edge certificate %s or its key %s does not load (PEM expected)", cert_path,
                 key_path);
    return NULL;
  }
  if (gnutls_x509_crt_get_key_id (crt, 0, crt_id, &crt_id_len) < 0 ||
      gnutls_x509_privkey_get_key_id (key, 0, key_id, &key_id_len) < 0 ||
      crt_id_len != key_id_len || memcmp (crt_id, key_id, crt_id_len) != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "edge certificate %s and key %s are not a pair", cert_path, key_path);
    return NULL;
  }
  cert = g_tls_certificate_new_from_files (cert_path, key_path, &local_error);
  if (cert == NULL)
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "edge certificate %s: %s", cert_path,
                 local_error->message);
  return cert;
}

GTlsCertificate *
box_edge_cert_load (const char *data_dir, const char *domain, const char *cert_file,
                    const char *key_file, GError **error)
{
  g_autofree char *cert_path = NULL;
  g_autofree char *key_path = NULL;

  if ((cert_file == NULL) != (key_file == NULL)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         "edge_cert and edge_key go together: set both or neither");
    return NULL;
  }
  if (cert_file != NULL) {
    cert_path = g_strdup (cert_file);
    key_path = g_strdup (key_file);
  } else if (!own_certificate (data_dir, domain, &cert_path, &key_path, error)) {
    return NULL;
  }
  return box_edge_cert_load_pair (cert_path, key_path, error);
}
