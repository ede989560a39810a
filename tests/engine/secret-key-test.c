/* secret-key-test.c: the secret key file and AES-256-GCM sealing. */
#include "config.h"

#include <string.h>
#include <sys/stat.h>
#include <glib/gstdio.h>

#include "box-error.h"
#include "box-secret-key.h"

typedef struct {
  char *dir;
  char *path;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  f->dir = g_dir_make_tmp ("box-secret-key-XXXXXX", &error);
  g_assert_no_error (error);
  f->path = g_build_filename (f->dir, "sub", "secret.key", NULL);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_autofree char *sub = g_path_get_dirname (f->path);

  g_unlink (f->path);
  g_rmdir (sub);
  g_rmdir (f->dir);
  g_free (f->path);
  g_free (f->dir);
}

static gboolean
contains (const guint8 *hay, gsize hay_len, const char *needle)
{
  gsize n = strlen (needle);
  gsize i;

  for (i = 0; i + n <= hay_len; i++) {
    if (memcmp (hay + i, needle, n) == 0)
      return TRUE;
  }
  return FALSE;
}

static BoxSecretKey *
load_new (Fixture *f)
{
  g_autoptr(GError) error = NULL;
  BoxSecretKey *key = box_secret_key_load (f->path, TRUE, &error);

  g_assert_no_error (error);
  g_assert_nonnull (key);
  return key;
}

static void
test_create_mode (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxSecretKey) key = NULL;
  g_autofree char *contents = NULL;
  gsize len = 0;
  struct stat st;
  guint i;

  /* an absent file without create */
  {
    g_autoptr(GError) error = NULL;
    g_assert_null (box_secret_key_load (f->path, FALSE, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  }
  key = load_new (f);
  g_assert_cmpint (g_stat (f->path, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 07777, ==, 0600);
  g_assert_true (g_file_get_contents (f->path, &contents, &len, NULL));
  /* 64 lowercase hex digits and a newline */
  g_assert_cmpuint (len, ==, 65);
  g_assert_cmpint (contents[64], ==, '\n');
  for (i = 0; i < 64; i++)
    g_assert_true (g_ascii_isdigit (contents[i]) || (contents[i] >= 'a' && contents[i] <= 'f'));
}

static void
test_seal_open (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxSecretKey) key = load_new (f);
  g_autoptr(BoxSecretKey) again = NULL;
  g_autoptr(GError) error = NULL;
  const char *value = "ghp_0123456789abcdef";
  g_autoptr(GBytes) sealed = box_secret_key_seal (key, "acme/GITHUB_TOKEN", value, strlen (value), &error);
  g_autoptr(GBytes) sealed2 = box_secret_key_seal (key, "acme/GITHUB_TOKEN", value, strlen (value), &error);
  g_autoptr(GBytes) plain = NULL;
  g_autoptr(GBytes) plain2 = NULL;
  g_autoptr(GBytes) empty = NULL;
  g_autoptr(GBytes) empty_plain = NULL;
  const guint8 *data_p;
  gsize size = 0;

  g_assert_no_error (error);
  data_p = g_bytes_get_data (sealed, &size);
  /* version, nonce, ciphertext, tag */
  g_assert_cmpuint (size, ==, 1 + 12 + strlen (value) + 16);
  g_assert_cmpuint (data_p[0], ==, 1);
  g_assert_false (contains (data_p, size, value));
  /* a fresh nonce every time */
  g_assert_false (g_bytes_equal (sealed, sealed2));

  plain = box_secret_key_open (key, "acme/GITHUB_TOKEN", sealed, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (g_bytes_get_data (plain, NULL), g_bytes_get_size (plain), value, strlen (value));

  /* the same file opens it after a reload */
  again = box_secret_key_load (f->path, TRUE, &error);
  g_assert_no_error (error);
  plain2 = box_secret_key_open (again, "acme/GITHUB_TOKEN", sealed2, &error);
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (plain, plain2));

  empty = box_secret_key_seal (key, "acme/E", "", 0, &error);
  g_assert_no_error (error);
  empty_plain = box_secret_key_open (key, "acme/E", empty, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_bytes_get_size (empty_plain), ==, 0);
}

static void
test_open_refuses (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxSecretKey) key = load_new (f);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) sealed = box_secret_key_seal (key, "acme/TOKEN", "value", 5, &error);
  gsize size = g_bytes_get_size (sealed);
  g_autofree guint8 *copy = g_memdup2 (g_bytes_get_data (sealed, NULL), size);
  g_autofree char *other_dir = g_dir_make_tmp ("box-secret-key-other-XXXXXX", NULL);
  g_autofree char *other_path = g_build_filename (other_dir, "secret.key", NULL);
  g_autoptr(BoxSecretKey) other = box_secret_key_load (other_path, TRUE, &error);
  guint i;

  g_assert_no_error (error);

  /* another owner (associated data) */
  g_assert_null (box_secret_key_open (key, "acme/OTHER", sealed, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);
  g_assert_null (box_secret_key_open (key, "other/TOKEN", sealed, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);

  /* another key */
  g_assert_null (box_secret_key_open (other, "acme/TOKEN", sealed, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);

  /* any flipped bit: version, nonce, ciphertext or tag */
  for (i = 0; i < size; i++) {
    g_autoptr(GBytes) tampered = NULL;

    copy[i] ^= 0x01;
    tampered = g_bytes_new (copy, size);
    g_assert_null (box_secret_key_open (key, "acme/TOKEN", tampered, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
    g_clear_error (&error);
    copy[i] ^= 0x01;
  }

  /* truncated and empty blobs */
  for (i = 0; i < size; i++) {
    g_autoptr(GBytes) cut = g_bytes_new (copy, i);

    g_assert_null (box_secret_key_open (key, "acme/TOKEN", cut, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
    g_clear_error (&error);
  }
  g_assert_null (box_secret_key_open (key, "acme/TOKEN", NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);

  g_unlink (other_path);
  g_rmdir (other_dir);
}

static void
test_refuses_open_file (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxSecretKey) key = load_new (f);
  const guint modes[] = { 0640, 0604, 0660, 0644, 0610 };
  guint i;

  g_assert_nonnull (key);
  for (i = 0; i < G_N_ELEMENTS (modes); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(BoxSecretKey) refused = NULL;

    g_assert_cmpint (g_chmod (f->path, modes[i]), ==, 0);
    refused = box_secret_key_load (f->path, TRUE, &error);
    g_assert_null (refused);
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
    g_assert_nonnull (strstr (error->message, "chmod 600"));
  }
  g_assert_cmpint (g_chmod (f->path, 0400), ==, 0);
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(BoxSecretKey) ok = box_secret_key_load (f->path, FALSE, &error);

    g_assert_no_error (error);
    g_assert_nonnull (ok);
  }
}

static void
test_refuses_bad_contents (Fixture *f, gconstpointer data)
{
  const char *bad[] = {
    "", "abc\n", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg\n",
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef00\n",
  };
  g_autofree char *sub = g_path_get_dirname (f->path);
  guint i;

  g_assert_cmpint (g_mkdir_with_parents (sub, 0700), ==, 0);
  for (i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(BoxSecretKey) key = NULL;

    g_unlink (f->path);
    g_assert_true (g_file_set_contents_full (f->path, bad[i], -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL));
    key = box_secret_key_load (f->path, TRUE, &error);
    g_assert_null (key);
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  }
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(BoxSecretKey) key = NULL;

    /* uppercase hex and surrounding space are fine */
    g_unlink (f->path);
    g_assert_true (g_file_set_contents_full (
      f->path, " 0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\n\n", -1,
      G_FILE_SET_CONTENTS_NONE, 0600, NULL));
    key = box_secret_key_load (f->path, FALSE, &error);
    g_assert_no_error (error);
    g_assert_nonnull (key);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/secret-key/create-mode", Fixture, NULL, fixture_set_up, test_create_mode,
              fixture_tear_down);
  g_test_add ("/secret-key/seal-open", Fixture, NULL, fixture_set_up, test_seal_open,
              fixture_tear_down);
  g_test_add ("/secret-key/open-refuses", Fixture, NULL, fixture_set_up, test_open_refuses,
              fixture_tear_down);
  g_test_add ("/secret-key/refuses-open-file", Fixture, NULL, fixture_set_up, test_refuses_open_file,
              fixture_tear_down);
  g_test_add ("/secret-key/refuses-bad-contents", Fixture, NULL, fixture_set_up,
              test_refuses_bad_contents, fixture_tear_down);
  return g_test_run ();
}
