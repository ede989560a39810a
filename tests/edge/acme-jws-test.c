/* tests/edge: the ACME client's crypto (box-acme-jws.h): base64url, the
 * JWK thumbprint of RFC 7638's example, an ES256 JWS whose raw r||s
 * signature GnuTLS verifies, the account key at rest (0600, loaded
 * again the same), the CSR and its fresh key, and whether a certificate
 * is for a key. */
#include "config.h"

#include <glib/gstdio.h>
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/stat.h>

#include "box-acme-jws.h"

static void
test_b64url (void)
{
  static const guint8 bytes[] = { 0xfb, 0xff, 0xfe, 0x3e, 0x3f };
  g_autofree char *a = box_acme_b64url (bytes, sizeof bytes);
  g_autofree char *b = box_acme_b64url ("a", 1);
  g_autofree char *c = box_acme_b64url ("", 0);

  g_assert_cmpstr (a, ==, "-__-Pj8");   /* base64 "+//+Pj8=" */
  g_assert_cmpstr (b, ==, "YQ");
  g_assert_cmpstr (c, ==, "");
}

/* RFC 7638 3.1: the example RSA key's thumbprint input and result. */
static void
test_thumbprint (void)
{
  static const char *jwk =
    "{\"e\":\"AQAB\",\"kty\":\"RSA\",\"n\":\"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4"
    "cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl9"
    "3lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n9"
    "1CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8"
    "awapJzKnqDKgw\"}";
  g_autofree char *t = box_acme_thumbprint (jwk);

  g_assert_cmpstr (t, ==, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
}

static guint8 *
b64url_decode (const char *s, gsize *len)
{
  g_autoptr(GString) std = g_string_new (s);

  for (gsize i = 0; i < std->len; i++) {
    if (std->str[i] == '-')
      std->str[i] = '+';
    else if (std->str[i] == '_')
      std->str[i] = '/';
  }
  while (std->len % 4 != 0)
    g_string_append_c (std, '=');
  return g_base64_decode (std->str, len);
}

static char *
tmp_path (const char *name)
{
  g_autofree char *dir = g_dir_make_tmp ("box-acme-jws-XXXXXX", NULL);

  g_assert_nonnull (dir);
  return g_build_filename (dir, name, NULL);
}

static void
test_jws (void)
{
  g_autofree char *path = tmp_path ("account-key.pem");
  gnutls_privkey_t key = NULL, again = NULL;
  gnutls_pubkey_t pub = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *jwk = NULL;
  g_autofree char *jwk_again = NULL;
  g_autofree char *jws = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *o;
  g_autofree char *input = NULL;
  g_autofree guint8 *sig = NULL;
  g_autofree guint8 *header = NULL;
  g_autofree guint8 *payload = NULL;
  gsize sig_len = 0, header_len = 0, payload_len = 0;
  gnutls_datum_t r, s, der = { NULL, 0 }, data;
  GStatBuf st;

  g_assert_true (box_acme_key_load_or_new (path, &key, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  jwk = box_acme_jwk (key, &error);
  g_assert_no_error (error);
  g_assert_true (g_str_has_prefix (jwk, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\""));
  /* loaded again: the same key */
  g_assert_true (box_acme_key_load_or_new (path, &again, &error));
  jwk_again = box_acme_jwk (again, &error);
  g_assert_cmpstr (jwk, ==, jwk_again);

  jws = box_acme_jws (key, jwk, NULL, "nonce-1", "https://ca.test/new-acct", "{\"a\":1}", &error);
  g_assert_no_error (error);
  g_assert_true (json_parser_load_from_data (parser, jws, -1, NULL));
  o = json_node_get_object (json_parser_get_root (parser));
  header = b64url_decode (json_object_get_string_member (o, "protected"), &header_len);
  payload = b64url_decode (json_object_get_string_member (o, "payload"), &payload_len);
  g_assert_cmpmem (payload, payload_len, "{\"a\":1}", 7);
  {
    g_autofree char *h = g_strndup ((char *) header, header_len);
    g_autofree char *want = g_strdup_printf (
      "{\"alg\":\"ES256\",\"jwk\":%s,\"nonce\":\"nonce-1\",\"url\":\"https://ca.test/new-acct\"}", jwk);

    g_assert_cmpstr (h, ==, want);
  }
  /* the raw r||s: 64 bytes, verified as DER by GnuTLS */
  sig = b64url_decode (json_object_get_string_member (o, "signature"), &sig_len);
  g_assert_cmpuint (sig_len, ==, 64);
  r.data = sig;
  r.size = 32;
  s.data = sig + 32;
  s.size = 32;
  g_assert_cmpint (gnutls_encode_rs_value (&der, &r, &s), ==, 0);
  input = g_strdup_printf ("%s.%s", json_object_get_string_member (o, "protected"),
                           json_object_get_string_member (o, "payload"));
  data.data = (unsigned char *) input;
  data.size = strlen (input);
  g_assert_cmpint (gnutls_pubkey_init (&pub), ==, 0);
  g_assert_cmpint (gnutls_pubkey_import_privkey (pub, key, 0, 0), ==, 0);
  g_assert_cmpint (gnutls_pubkey_verify_data2 (pub, GNUTLS_SIGN_ECDSA_SHA256, 0, &data, &der),
                   >=, 0);
  /* one changed byte: not verified */
  input[0] ^= 1;
  g_assert_cmpint (gnutls_pubkey_verify_data2 (pub, GNUTLS_SIGN_ECDSA_SHA256, 0, &data, &der),
                   <, 0);
  gnutls_free (der.data);

  /* with a kid and POST-as-GET: kid in the header, the payload empty */
  g_clear_pointer (&jws, g_free);
  jws = box_acme_jws (key, jwk, "https://ca.test/acct/1", "n2", "https://ca.test/o/1", NULL,
                      &error);
  g_assert_no_error (error);
  g_assert_nonnull (strstr (jws, "\"payload\":\"\""));
  g_assert_true (json_parser_load_from_data (parser, jws, -1, NULL));
  o = json_node_get_object (json_parser_get_root (parser));
  g_free (header);
  header = b64url_decode (json_object_get_string_member (o, "protected"), &header_len);
  {
    g_autofree char *h = g_strndup ((char *) header, header_len);

    g_assert_cmpstr (h, ==, "{\"alg\":\"ES256\",\"kid\":\"https://ca.test/acct/1\","
                            "\"nonce\":\"n2\",\"url\":\"https://ca.test/o/1\"}");
  }
  gnutls_pubkey_deinit (pub);
  gnutls_privkey_deinit (key);
  gnutls_privkey_deinit (again);
}

static void
test_csr (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *key_pem = NULL;
  g_autofree char *csr = NULL;
  g_autofree guint8 *der = NULL;
  gsize der_len = 0;
  gnutls_x509_crq_t crq;
  gnutls_datum_t datum;
  char name[256];
  size_t name_len = sizeof name;
  unsigned int type = 0;

  g_assert_true (box_acme_csr ("x.shop.test", &key_pem, &csr, &error));
  g_assert_no_error (error);
  g_assert_true (g_str_has_prefix (key_pem, "-----BEGIN PRIVATE KEY-----"));
  g_assert_null (strchr (csr, '='));
  der = b64url_decode (csr, &der_len);
  datum.data = der;
  datum.size = (unsigned int) der_len;
  g_assert_cmpint (gnutls_x509_crq_init (&crq), ==, 0);
  g_assert_cmpint (gnutls_x509_crq_import (crq, &datum, GNUTLS_X509_FMT_DER), ==, 0);
  g_assert_cmpint (gnutls_x509_crq_verify (crq, 0), >=, 0);
  g_assert_cmpint (gnutls_x509_crq_get_subject_alt_name (crq, 0, name, &name_len, &type, NULL),
                   ==, GNUTLS_SAN_DNSNAME);
  g_assert_cmpstr (name, ==, "x.shop.test");
  gnutls_x509_crq_deinit (crq);
}

/* A self-signed certificate for the key in @key_pem. */
static gnutls_x509_crt_t
self_signed (const char *key_pem)
{
  gnutls_x509_privkey_t key;
  gnutls_x509_crt_t crt;
  gnutls_datum_t datum = { (unsigned char *) key_pem, (unsigned int) strlen (key_pem) };
  static const guint8 serial[] = { 1 };

  g_assert_cmpint (gnutls_x509_privkey_init (&key), ==, 0);
  g_assert_cmpint (gnutls_x509_privkey_import (key, &datum, GNUTLS_X509_FMT_PEM), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_init (&crt), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_set_key (crt, key), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_set_serial (crt, serial, sizeof serial), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_set_activation_time (crt, time (NULL)), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_set_expiration_time (crt, time (NULL) + 3600), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_sign2 (crt, crt, key, GNUTLS_DIG_SHA256, 0), ==, 0);
  gnutls_x509_privkey_deinit (key);
  return crt;
}

static void
test_key_matches (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *key_a = NULL, *key_b = NULL, *csr_a = NULL, *csr_b = NULL;
  gnutls_x509_crt_t crt;

  g_assert_true (box_acme_csr ("a.shop.test", &key_a, &csr_a, &error));
  g_assert_true (box_acme_csr ("a.shop.test", &key_b, &csr_b, &error));
  g_assert_cmpstr (key_a, !=, key_b);   /* a fresh key per certificate */
  crt = self_signed (key_a);
  g_assert_true (box_acme_key_matches (crt, key_a));
  g_assert_false (box_acme_key_matches (crt, key_b));
  g_assert_false (box_acme_key_matches (crt, "not a key"));
  gnutls_x509_crt_deinit (crt);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/acme/b64url", test_b64url);
  g_test_add_func ("/acme/thumbprint-rfc7638", test_thumbprint);
  g_test_add_func ("/acme/jws-es256", test_jws);
  g_test_add_func ("/acme/csr", test_csr);
  g_test_add_func ("/acme/key-matches", test_key_matches);
  return g_test_run ();
}
