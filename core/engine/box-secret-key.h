/* box-secret-key.h: the deployment's secret key, sealing secret values at rest.
 *
 * 32 random bytes (GnuTLS's key-grade generator) in a 0600 file, used with
 * AES-256-GCM (GnuTLS AEAD).  A sealed value is: 1 byte format version (1),
 * 12 bytes nonce, ciphertext + 16 bytes tag.  The associated data binds a
 * value to its owner ("<project>/<name>") so sealed blobs cannot be swapped
 * between secrets.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _BoxSecretKey BoxSecretKey;

/* Reads @path; when absent and @create, writes a new key there (0600). */
BoxSecretKey *box_secret_key_load   (const char *path, gboolean create, GError **error);
void          box_secret_key_free   (BoxSecretKey *key);
GBytes       *box_secret_key_seal   (BoxSecretKey *key, const char *associated,
                                     const void *plaintext, gsize len, GError **error);
/* The plaintext, or NULL with BOX_ERROR_INTERNAL when the blob does not open. */
GBytes       *box_secret_key_open   (BoxSecretKey *key, const char *associated,
                                     GBytes *sealed, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSecretKey, box_secret_key_free)

G_END_DECLS
