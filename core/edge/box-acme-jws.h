/* box-acme-jws.h: the crypto of the ACME client (box-acme.h), RFC 8555
 * section 6.2 and RFC 7515/7518/7638.
 *
 * The account key is ECDSA P-256 (ES256), kept as PKCS#8 PEM, mode 0600.
 * A request body is a flattened JWS: {"protected", "payload",
 * "signature"}, each base64url without padding; the protected header
 * carries alg ES256, the nonce, the url and either the account's jwk
 * (newAccount) or its kid (every later request); the signature is the raw
 * r||s (64 bytes), not DER.  The key authorization of a challenge is
 * token "." base64url(SHA-256 of the JWK thumbprint input, RFC 7638). */
#pragma once

#include <glib.h>
#include <gnutls/abstract.h>
#include <gnutls/x509.h>

G_BEGIN_DECLS

/* base64url of @len bytes at @data, without padding. */
char     *box_acme_b64url          (const void *data, gsize len);
/* The key at @path, or a new one written there (0600, atomically) when
 * there is none; BOX_ERROR_INTERNAL when it does not load or save. */
gboolean  box_acme_key_load_or_new (const char *path, gnutls_privkey_t *key, GError **error);
/* The public JWK of @key with its members in lexicographic order and no
 * white space (the thumbprint input of RFC 7638 3.2). */
char     *box_acme_jwk             (gnutls_privkey_t key, GError **error);
/* base64url(SHA-256(@jwk)): @jwk as box_acme_jwk() makes it. */
char     *box_acme_thumbprint      (const char *jwk);
/* The flattened JWS of @payload (NULL: the empty payload of POST-as-GET)
 * for @url with @nonce, signed by @key; @kid NULL puts @jwk in the header. */
char     *box_acme_jws             (gnutls_privkey_t key, const char *jwk, const char *kid,
                                    const char *nonce, const char *url, const char *payload,
                                    GError **error);
/* ES256 over @data: the raw r||s, 64 bytes. */
GBytes   *box_acme_sign_es256      (gnutls_privkey_t key, const void *data, gsize len,
                                    GError **error);
/* A new P-256 key for @host (*@key_pem, PKCS#8 PEM) and a CSR for it
 * naming @host as CN and DNS SAN, as base64url DER (*@csr). */
gboolean  box_acme_csr             (const char *host, char **key_pem, char **csr,
                                    GError **error);

/* Whether @crt's public key is that of @key_pem. */
gboolean  box_acme_key_matches     (gnutls_x509_crt_t crt, const char *key_pem);

G_END_DECLS
