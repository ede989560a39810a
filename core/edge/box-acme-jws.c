/* box-acme-jws.c: the ACME client's keys, JWS and CSR; see
 * box-acme-jws.h. */
#include "config.h"

#include "box-acme-jws.h"

#include <gnutls/crypto.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "box-error.h"
#include "box-identity.h"

#define P256_BYTES 32

G_DEFINE_AUTO_CLEANUP_FREE_FUNC (gnutls_x509_privkey_t, gnutls_x509_privkey_deinit, NULL)
G_DEFINE_AUTO_CLEANUP_FREE_FUNC (gnutls_x509_crq_t, gnutls_x509_crq_deinit, NULL)

static gboolean
ok_or_error (int ret, const char *what, GError **error)
{
  if (ret >= 0)
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "acme: %s: %s", what, gnutls_strerror (ret));
  return FALSE;
}

char *
box_acme_b64url (const void *data, gsize len)
{
  return box_b64url_encode (data, len);
}

static gboolean
new_p256 (gnutls_x509_privkey_t *key, GError **error)
{
  int ret = gnutls_x509_privkey_init (key);

  if (ret >= 0)
    ret = gnutls_x509_privkey_generate (*key, GNUTLS_PK_ECDSA,
                                        GNUTLS_CURVE_TO_BITS (GNUTLS_ECC_CURVE_SECP256R1), 0);
  return ok_or_error (ret, "cannot make a key", error);
}

static char *
export_pem (gnutls_x509_privkey_t key, GError **error)
{
  gnutls_datum_t pem = { NULL, 0 };
  char *out;

  if (!ok_or_error (gnutls_x509_privkey_export2_pkcs8 (key, GNUTLS_X509_FMT_PEM, NULL,
                                                       GNUTLS_PKCS_PLAIN, &pem),
                    "cannot export a key", error))
    return NULL;
  out = g_strndup ((const char *) pem.data, pem.size);
  gnutls_free (pem.data);
  return out;
}

gboolean
box_acme_key_load_or_new (const char *path, gnutls_privkey_t *key, GError **error)
{
  g_auto(gnutls_x509_privkey_t) x509 = NULL;
  g_autofree char *pem = NULL;
  g_autoptr(GError) local_error = NULL;
  gsize len = 0;
  int ret;

  if (g_file_get_contents (path, &pem, &len, NULL)) {
    gnutls_datum_t datum = { (unsigned char *) pem, (unsigned int) len };

    ret = gnutls_x509_privkey_init (&x509);
    if (ret >= 0)
      ret = gnutls_x509_privkey_import (x509, &datum, GNUTLS_X509_FMT_PEM);
    if (ret >= 0 && gnutls_x509_privkey_get_pk_algorithm (x509) != GNUTLS_PK_ECDSA)
      ret = GNUTLS_E_UNKNOWN_PK_ALGORITHM;
    if (!ok_or_error (ret, path, error))
      return FALSE;
  } else {
    if (!new_p256 (&x509, error) || (pem = export_pem (x509, error)) == NULL)
      return FALSE;
    if (!g_file_set_contents_full (path, pem, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600,
                                   &local_error)) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "acme: %s", local_error->message);
      return FALSE;
    }
    g_message ("acme: made an account key in %s", path);
  }
  ret = gnutls_privkey_init (key);
  if (ret >= 0)
    ret = gnutls_privkey_import_x509 (*key, x509, GNUTLS_PRIVKEY_IMPORT_COPY);
  return ok_or_error (ret, "cannot use the account key", error);
}

/* @datum as exactly @width big-endian bytes (leading zeros added or
 * dropped), base64url; NULL when it does not fit. */
static char *
fixed_b64url (const gnutls_datum_t *datum, gsize width)
{
  guint8 buf[P256_BYTES] = { 0 };
  const guint8 *p = datum->data;
  gsize n = datum->size;

  g_assert (width <= sizeof buf);
  while (n > width && *p == 0) {
    p++;
    n--;
  }
  if (n > width)
    return NULL;
  memcpy (buf + (width - n), p, n);
  return box_acme_b64url (buf, width);
}

char *
box_acme_jwk (gnutls_privkey_t key, GError **error)
{
  gnutls_ecc_curve_t curve = GNUTLS_ECC_CURVE_INVALID;
  gnutls_datum_t x = { NULL, 0 }, y = { NULL, 0 };
  g_autofree char *x64 = NULL;
  g_autofree char *y64 = NULL;
  int ret;

  ret = gnutls_privkey_export_ecc_raw2 (key, &curve, &x, &y, NULL, 0);
  if (!ok_or_error (ret, "cannot read the account key", error))
    return NULL;
  x64 = fixed_b64url (&x, P256_BYTES);
  y64 = fixed_b64url (&y, P256_BYTES);
  gnutls_free (x.data);
  gnutls_free (y.data);
  if (curve != GNUTLS_ECC_CURVE_SECP256R1 || x64 == NULL || y64 == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                         "acme: the account key is no P-256 key");
    return NULL;
  }
  return g_strdup_printf ("{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}", x64, y64);
}

char *
box_acme_thumbprint (const char *jwk)
{
  return box_jwk_thumbprint (jwk);
}

GBytes *
box_acme_sign_es256 (gnutls_privkey_t key, const void *data, gsize len, GError **error)
{
  gnutls_datum_t in = { (unsigned char *) data, (unsigned int) len };
  gnutls_datum_t der = { NULL, 0 }, r = { NULL, 0 }, s = { NULL, 0 };
  guint8 raw[2 * P256_BYTES] = { 0 };
  gboolean fits;
  int ret;

  ret = gnutls_privkey_sign_data2 (key, GNUTLS_SIGN_ECDSA_SHA256, 0, &in, &der);
  if (ret >= 0)
    ret = gnutls_decode_rs_value (&der, &r, &s);
  gnutls_free (der.data);
  if (!ok_or_error (ret, "cannot sign", error))
    return NULL;
  /* r and s are unsigned integers: a leading zero byte may be there */
  {
    const guint8 *rp = r.data, *sp = s.data;
    gsize rn = r.size, sn = s.size;

    while (rn > P256_BYTES && *rp == 0) {
      rp++;
      rn--;
    }
    while (sn > P256_BYTES && *sp == 0) {
      sp++;
      sn--;
    }
    fits = rn <= P256_BYTES && sn <= P256_BYTES;
    if (fits) {
      memcpy (raw + (P256_BYTES - rn), rp, rn);
      memcpy (raw + P256_BYTES + (P256_BYTES - sn), sp, sn);
    }
  }
  gnutls_free (r.data);
  gnutls_free (s.data);
  if (!fits) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "acme: a signature too long");
    return NULL;
  }
  return g_bytes_new (raw, sizeof raw);
}

static char *
json_string (const char *s)
{
  g_autoptr(JsonNode) node = json_node_init_string (json_node_alloc (), s);

  return json_to_string (node, FALSE);
}

char *
box_acme_jws (gnutls_privkey_t key, const char *jwk, const char *kid, const char *nonce,
              const char *url, const char *payload, GError **error)
{
  g_autofree char *q_nonce = json_string (nonce);
  g_autofree char *q_url = json_string (url);
  g_autofree char *q_kid = kid != NULL ? json_string (kid) : NULL;
  g_autofree char *header = NULL;
  g_autofree char *header64 = NULL;
  g_autofree char *payload64 = NULL;
  g_autofree char *input = NULL;
  g_autofree char *sig64 = NULL;
  g_autoptr(GBytes) sig = NULL;

  if (kid != NULL)
    header = g_strdup_printf ("{\"alg\":\"ES256\",\"kid\":%s,\"nonce\":%s,\"url\":%s}", q_kid,
                              q_nonce, q_url);
  else
    header = g_strdup_printf ("{\"alg\":\"ES256\",\"jwk\":%s,\"nonce\":%s,\"url\":%s}", jwk,
                              q_nonce, q_url);
  header64 = box_acme_b64url (header, strlen (header));
  payload64 = payload != NULL ? box_acme_b64url (payload, strlen (payload)) : g_strdup ("");
  input = g_strdup_printf ("%s.%s", header64, payload64);
  sig = box_acme_sign_es256 (key, input, strlen (input), error);
  if (sig == NULL)
    return NULL;
  sig64 = box_acme_b64url (g_bytes_get_data (sig, NULL), g_bytes_get_size (sig));
  return g_strdup_printf ("{\"protected\":\"%s\",\"payload\":\"%s\",\"signature\":\"%s\"}",
                          header64, payload64, sig64);
}

gboolean
box_acme_csr (const char *host, char **key_pem, char **csr, GError **error)
{
  g_auto(gnutls_x509_privkey_t) key = NULL;
  g_auto(gnutls_x509_crq_t) crq = NULL;
  gnutls_datum_t der = { NULL, 0 };
  g_autofree char *pem = NULL;
  int ret;

  if (!new_p256 (&key, error) || (pem = export_pem (key, error)) == NULL)
    return FALSE;
  ret = gnutls_x509_crq_init (&crq);
  if (ret >= 0)
    ret = gnutls_x509_crq_set_version (crq, 1);
  if (ret >= 0)
    ret = gnutls_x509_crq_set_dn_by_oid (crq, GNUTLS_OID_X520_COMMON_NAME, 0, host, strlen (host));
  if (ret >= 0)
    ret = gnutls_x509_crq_set_subject_alt_name (crq, GNUTLS_SAN_DNSNAME, host, strlen (host),
                                                GNUTLS_FSAN_APPEND);
  if (ret >= 0)
    ret = gnutls_x509_crq_set_key (crq, key);
  if (ret >= 0)
    ret = gnutls_x509_crq_sign2 (crq, key, GNUTLS_DIG_SHA256, 0);
  if (ret >= 0)
    ret = gnutls_x509_crq_export2 (crq, GNUTLS_X509_FMT_DER, &der);
  if (!ok_or_error (ret, "cannot make a CSR", error))
    return FALSE;
  *csr = box_acme_b64url (der.data, der.size);
  gnutls_free (der.data);
  *key_pem = g_steal_pointer (&pem);
  return TRUE;
}

gboolean
box_acme_key_matches (gnutls_x509_crt_t crt, const char *key_pem)
{
  g_auto(gnutls_x509_privkey_t) key = NULL;
  gnutls_datum_t datum = { (unsigned char *) key_pem, (unsigned int) strlen (key_pem) };
  guint8 crt_id[64], key_id[64];
  size_t crt_len = sizeof crt_id, key_len = sizeof key_id;

  return gnutls_x509_privkey_init (&key) >= 0 &&
         gnutls_x509_privkey_import (key, &datum, GNUTLS_X509_FMT_PEM) >= 0 &&
         gnutls_x509_crt_get_key_id (crt, 0, crt_id, &crt_len) >= 0 &&
         gnutls_x509_privkey_get_key_id (key, 0, key_id, &key_len) >= 0 &&
         crt_len == key_len && memcmp (crt_id, key_id, crt_len) == 0;
}
