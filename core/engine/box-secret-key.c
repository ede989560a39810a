/* box-secret-key.c: the deployment's secret key and AES-256-GCM sealing.
 *
 * The key file holds the 32 key bytes as 64 lowercase hex digits and a
 * newline, mode 0600.  A file that group or others may access is refused:
 * whoever reads it can open every stored secret.
 *
 * A sealed value: version (1) | nonce (12) | ciphertext | tag (16).  The
 * associated data is the version byte followed by the owner string, so a
 * blob opens only for the secret it was sealed for.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include "box-error.h"
#include "box-secret-key.h"

#define KEY_SIZE 32
#define NONCE_SIZE 12
#define TAG_SIZE 16
#define SEALED_VERSION 1
#define HEADER_SIZE (1 + NONCE_SIZE)
#define KEY_FILE_MAX 256

struct _BoxSecretKey {
  guint8 key[KEY_SIZE];
  gnutls_aead_cipher_hd_t cipher;
  GMutex lock; /* a cipher handle is not for concurrent use */
};

void
box_secret_key_free (BoxSecretKey *key)
{
  if (key == NULL)
    return;
  if (key->cipher != NULL)
    gnutls_aead_cipher_deinit (key->cipher);
  g_mutex_clear (&key->lock);
  gnutls_memset (key, 0, sizeof *key);
  g_free (key);
}

static BoxSecretKey *
secret_key_new (const guint8 *bytes, GError **error)
{
  g_autoptr(BoxSecretKey) key = g_new0 (BoxSecretKey, 1);
  gnutls_datum_t datum;
  int rc;

  g_mutex_init (&key->lock);
  memcpy (key->key, bytes, KEY_SIZE);
  datum.data = key->key;
  datum.size = KEY_SIZE;
  rc = gnutls_aead_cipher_init (&key->cipher, GNUTLS_CIPHER_AES_256_GCM, &datum);
  if (rc < 0) {
    key->cipher = NULL;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot set up AES-256-GCM: %s",
                 gnutls_strerror (rc));
    return NULL;
  }
  return g_steal_pointer (&key);
}

static gboolean
write_all (int fd, const char *buf, gsize len)
{
  while (len > 0) {
    ssize_t n = write (fd, buf, len);

    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return FALSE;
    buf += n;
    len -= (gsize) n;
  }
  return TRUE;
}

/* Writes a new key to @path (0600) and its bytes to @bytes; FALSE with
 * errno EEXIST and no error set when the file exists already. */
static gboolean
create_key_file (const char *path, guint8 *bytes, GError **error)
{
  char hex[KEY_SIZE * 2 + 2];
  g_autofree char *dir = g_path_get_dirname (path);
  int rc, fd, saved;
  guint i;

  if (g_mkdir_with_parents (dir, 0700) < 0) {
    saved = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot create %s: %s", dir,
                 g_strerror (saved));
    return FALSE;
  }
  rc = gnutls_rnd (GNUTLS_RND_KEY, bytes, KEY_SIZE);
  if (rc < 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot generate a secret key: %s",
                 gnutls_strerror (rc));
    return FALSE;
  }
  for (i = 0; i < KEY_SIZE; i++)
    g_snprintf (hex + 2 * i, 3, "%02x", bytes[i]);
  hex[KEY_SIZE * 2] = '\n';
  hex[KEY_SIZE * 2 + 1] = '\0';
  fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    saved = errno;
    gnutls_memset (hex, 0, sizeof hex);
    if (saved != EEXIST)
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot create secret key file %s: %s",
                   path, g_strerror (saved));
    errno = saved;
    return FALSE;
  }
  if (!write_all (fd, hex, KEY_SIZE * 2 + 1) || fsync (fd) < 0) {
    saved = errno;
    close (fd);
    g_unlink (path);
    gnutls_memset (hex, 0, sizeof hex);
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot write secret key file %s: %s",
                 path, g_strerror (saved));
    return FALSE;
  }
  gnutls_memset (hex, 0, sizeof hex);
  if (close (fd) < 0) {
    saved = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot write secret key file %s: %s",
                 path, g_strerror (saved));
    return FALSE;
  }
  return TRUE;
}

static gboolean
read_key_file (int fd, const char *path, guint8 *bytes, GError **error)
{
  char buf[KEY_FILE_MAX + 1];
  gsize len = 0;
  gboolean ok = TRUE;
  guint i;

  while (len < KEY_FILE_MAX) {
    ssize_t n = read (fd, buf + len, KEY_FILE_MAX - len);

    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int saved = errno;

      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot read secret key file %s: %s",
                   path, g_strerror (saved));
      return FALSE;
    }
    if (n == 0)
      break;
    len += (gsize) n;
  }
  buf[len] = '\0';
  g_strstrip (buf);
  if (strlen (buf) != KEY_SIZE * 2)
    ok = FALSE;
  for (i = 0; ok && i < KEY_SIZE; i++) {
    int hi = g_ascii_xdigit_value (buf[2 * i]);
    int lo = g_ascii_xdigit_value (buf[2 * i + 1]);

    if (hi < 0 || lo < 0)
      ok = FALSE;
    else
      bytes[i] = (guint8) (hi << 4 | lo);
  }
  gnutls_memset (buf, 0, sizeof buf);
  if (!ok)
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "secret key file %s must hold %d hex digits (a %d-byte key)", path, KEY_SIZE * 2,
                 KEY_SIZE);
  return ok;
}

BoxSecretKey *
box_secret_key_load (const char *path, gboolean create, GError **error)
{
  guint8 bytes[KEY_SIZE];
  BoxSecretKey *key;
  struct stat st;
  gboolean ok;
  int fd, saved;

  g_return_val_if_fail (path != NULL, NULL);

  /* a symlink is followed: fstat() below checks the file it names */
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create) {
    if (create_key_file (path, bytes, error)) {
      key = secret_key_new (bytes, error);
      gnutls_memset (bytes, 0, sizeof bytes);
      return key;
    }
    if (errno != EEXIST)
      return NULL;
    /* lost a race with another creator: read theirs */
    fd = open (path, O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) {
    saved = errno;
    g_set_error (error, BOX_ERROR, saved == ENOENT ? BOX_ERROR_NOT_FOUND : BOX_ERROR_INTERNAL,
                 "cannot open secret key file %s: %s", path, g_strerror (saved));
    return NULL;
  }
  if (fstat (fd, &st) < 0) {
    saved = errno;
    close (fd);
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot stat secret key file %s: %s",
                 path, g_strerror (saved));
    return NULL;
  }
  if (!S_ISREG (st.st_mode)) {
    close (fd);
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "secret key file %s is not a regular file",
                 path);
    return NULL;
  }
  if ((st.st_mode & 077) != 0) {
    close (fd);
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "secret key file %s has mode %04o: group and others must have no access "
                 "(chmod 600 %s)", path, (guint) (st.st_mode & 07777), path);
    return NULL;
  }
  ok = read_key_file (fd, path, bytes, error);
  close (fd);
  if (!ok)
    return NULL;
  key = secret_key_new (bytes, error);
  gnutls_memset (bytes, 0, sizeof bytes);
  return key;
}

static GByteArray *
associated_data (const char *associated)
{
  GByteArray *aad = g_byte_array_new ();
  const guint8 version = SEALED_VERSION;

  g_byte_array_append (aad, &version, 1);
  if (associated != NULL)
    g_byte_array_append (aad, (const guint8 *) associated, (guint) strlen (associated));
  return aad;
}

GBytes *
box_secret_key_seal (BoxSecretKey *key, const char *associated, const void *plaintext, gsize len,
                     GError **error)
{
  g_autoptr(GByteArray) aad = associated_data (associated);
  g_autofree guint8 *out = NULL;
  gsize ctext_len = len + TAG_SIZE;
  int rc;

  g_return_val_if_fail (key != NULL, NULL);
  g_return_val_if_fail (plaintext != NULL || len == 0, NULL);

  out = g_malloc (HEADER_SIZE + ctext_len);
  out[0] = SEALED_VERSION;
  rc = gnutls_rnd (GNUTLS_RND_NONCE, out + 1, NONCE_SIZE);
  if (rc >= 0) {
    g_mutex_lock (&key->lock);
    rc = gnutls_aead_cipher_encrypt (key->cipher, out + 1, NONCE_SIZE, aad->data, aad->len,
                                     TAG_SIZE, plaintext != NULL ? plaintext : "", len,
                                     out + HEADER_SIZE, &ctext_len);
    g_mutex_unlock (&key->lock);
  }
  if (rc < 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot seal a secret value: %s",
                 gnutls_strerror (rc));
    return NULL;
  }
  return g_bytes_new_take (g_steal_pointer (&out), HEADER_SIZE + ctext_len);
}

/* A plaintext buffer that is wiped when its GBytes goes. */
typedef struct {
  gsize len;
  guint8 data[];
} Plain;

static void
plain_free (gpointer data)
{
  Plain *plain = data;

  gnutls_memset (plain->data, 0, plain->len);
  g_free (plain);
}

GBytes *
box_secret_key_open (BoxSecretKey *key, const char *associated, GBytes *sealed, GError **error)
{
  g_autoptr(GByteArray) aad = associated_data (associated);
  const guint8 *data;
  gsize size = 0;
  Plain *plain;
  gsize ptext_len;
  int rc;

  g_return_val_if_fail (key != NULL, NULL);

  data = sealed != NULL ? g_bytes_get_data (sealed, &size) : NULL;
  if (data == NULL || size < HEADER_SIZE + TAG_SIZE || data[0] != SEALED_VERSION) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                         "the sealed secret value is damaged or of an unknown format");
    return NULL;
  }
  ptext_len = size - HEADER_SIZE;
  plain = g_malloc (sizeof (Plain) + ptext_len + 1);
  plain->len = ptext_len;
  g_mutex_lock (&key->lock);
  rc = gnutls_aead_cipher_decrypt (key->cipher, data + 1, NONCE_SIZE, aad->data, aad->len,
                                   TAG_SIZE, data + HEADER_SIZE, size - HEADER_SIZE, plain->data,
                                   &ptext_len);
  g_mutex_unlock (&key->lock);
  if (rc < 0) {
    plain_free (plain);
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "the sealed secret value does not open (another key, another owner, or damaged): %s",
                 gnutls_strerror (rc));
    return NULL;
  }
  return g_bytes_new_with_free_func (plain->data, ptext_len, plain_free, plain);
}
