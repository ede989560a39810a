/* box-identity.h: the identity issuer's keys and signatures (the spec's
 * "Identity routes" and "Identity token claims"; doc/API.md "Identity").
 *
 * Keys are RSA 2048 made and used with GnuTLS, kept as PKCS#8 PEM files
 * mode 0600: the signing key at [boxd] identity_key_file (default
 * <data-dir>/identity/signing.pem), made there at the first start, and
 * each retired key beside it as "<file>.retired-<until>-<kid>", <until>
 * the Unix second after which no token it signed can still be live (its
 * rotation plus BOX_IDENTITY_TTL_MAX_S), so that the removal time survives
 * a restart.  A retired key stays in the JWKS until then; its file is
 * removed the first time the keys are looked at after it (load, JWKS,
 * sign, rotate).  A rotation writes the new key to "<file>.new" first,
 * then renames the old key to its retired name and the new one into
 * place; a load finishes a rotation a crash cut short.
 *
 * A key's kid is its RFC 7638 thumbprint: base64url(SHA-256) of
 * {"e":..,"kty":"RSA","n":..} with no white space, n and e big-endian
 * without leading zero bytes, base64url without padding.  A token is a
 * compact JWS (RFC 7515): header {"alg":"RS256","kid":..,"typ":"JWT"},
 * the claims as given, RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 3.3).
 *
 * Times are Unix seconds given by the caller (the engine's clock). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define BOX_IDENTITY_TTL_MIN_S     1
#define BOX_IDENTITY_TTL_MAX_S     3600
#define BOX_IDENTITY_TTL_DEFAULT_S 600
#define BOX_IDENTITY_KEY_BITS      2048
/* the longest audience a token is made for, in bytes */
#define BOX_IDENTITY_AUDIENCE_MAX  1024

typedef struct _BoxIdentity BoxIdentity;

/* The keys at @path (its directory created 0700 when missing), a new
 * signing key written there when there is none; retired keys past their
 * time removed.  BOX_ERROR_INTERNAL when a key does not load or save. */
BoxIdentity *box_identity_load    (const char *path, gint64 now, GError **error);
void         box_identity_free    (BoxIdentity *self);
/* The signing key's kid. */
const char  *box_identity_get_kid (BoxIdentity *self);
/* {"keys": [...]}: the signing key, then each retired key still live at
 * @now (newest first), as {kty, use, alg, kid, n, e}. */
JsonNode    *box_identity_jwks    (BoxIdentity *self, gint64 now);
/* The compact JWS of @claims signed by the signing key. */
char        *box_identity_sign    (BoxIdentity *self, JsonObject *claims, gint64 now,
                                   GError **error);
/* A new signing key; the old one retired until @now + BOX_IDENTITY_TTL_MAX_S
 * (*@retired_until).  On failure the old key still signs. */
gboolean     box_identity_rotate  (BoxIdentity *self, gint64 now, char **retired_kid,
                                   gint64 *retired_until, GError **error);

/* base64url of @len bytes at @data, without padding (RFC 4648 5). */
char        *box_b64url_encode    (const void *data, gsize len);
/* base64url(SHA-256(@jwk)), @jwk the RFC 7638 3.2 input (the required
 * members in lexicographic order, no white space). */
char        *box_jwk_thumbprint   (const char *jwk);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxIdentity, box_identity_free)

G_END_DECLS
