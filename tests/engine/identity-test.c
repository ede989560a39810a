/* identity-test.c: the identity issuer's keys and tokens (box-identity.c):
 * the key file (0600, made once, kept), tokens verified by an independent
 * verifier (tests/e2e/jwtcheck.py: PyJWT against the JWKS, the RFC 7638
 * thumbprint computed there from the key's numbers), a tampered token
 * refused, rotation (the new key signs, the old one listed until its time,
 * then gone with its file, across a reload), a rotation cut short finished
 * at load, and a bad key file refused and left alone. */
#include "config.h"

#include <string.h>
#include <sys/stat.h>
#include <glib/gstdio.h>

#include "box-error.h"
#include "box-identity.h"

#define T0 1900000000

typedef struct {
  char *dir;
  char *path;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  f->dir = g_dir_make_tmp ("box-identity-XXXXXX", &error);
  g_assert_no_error (error);
  f->path = g_build_filename (f->dir, "identity", "signing.pem", NULL);
}

static void
remove_tree (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL) {
    g_autofree char *child = g_build_filename (path, name, NULL);

    if (g_file_test (child, G_FILE_TEST_IS_DIR))
      remove_tree (child);
    else
      g_unlink (child);
  }
  g_rmdir (path);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  remove_tree (f->dir);
  g_free (f->path);
  g_free (f->dir);
}

static BoxIdentity *
load (Fixture *f, gint64 now)
{
  g_autoptr(GError) error = NULL;
  BoxIdentity *id = box_identity_load (f->path, now, &error);

  g_assert_no_error (error);
  g_assert_nonnull (id);
  return id;
}

static guint
count_files (Fixture *f)
{
  g_autofree char *dir_path = g_path_get_dirname (f->path);
  g_autoptr(GDir) dir = g_dir_open (dir_path, 0, NULL);
  guint n = 0;

  while (dir != NULL && g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

/* The kids of the JWKS at @now, in order, joined with ' '. */
static char *
jwks_kids (BoxIdentity *id, gint64 now)
{
  g_autoptr(JsonNode) jwks = box_identity_jwks (id, now);
  JsonArray *keys = json_object_get_array_member (json_node_get_object (jwks), "keys");
  g_autoptr(GString) out = g_string_new (NULL);

  for (guint i = 0; i < json_array_get_length (keys); i++) {
    JsonObject *key = json_array_get_object_element (keys, i);

    g_string_append_printf (out, "%s%s", i > 0 ? " " : "",
                            json_object_get_string_member (key, "kid"));
  }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static char *
sign (BoxIdentity *id, const char *sub, gint64 now)
{
  g_autoptr(JsonObject) claims = json_object_new ();
  g_autoptr(GError) error = NULL;
  char *token;

  json_object_set_string_member (claims, "iss", "http://127.0.0.1:7070");
  json_object_set_string_member (claims, "sub", sub);
  json_object_set_string_member (claims, "aud", "https://aud.example");
  /* PyJWT checks these against the real clock */
  now = g_get_real_time () / G_USEC_PER_SEC;
  json_object_set_int_member (claims, "iat", now);
  json_object_set_int_member (claims, "nbf", now);
  json_object_set_int_member (claims, "exp", now + 600);
  json_object_set_string_member (claims, "jti", sub);
  token = box_identity_sign (id, claims, now, &error);
  g_assert_no_error (error);
  g_assert_nonnull (token);
  return token;
}

/* Runs jwtcheck.py on @token against @id's JWKS at @now: its exit status;
 * *@out its output. */
static int
verify (Fixture *f, BoxIdentity *id, gint64 now, const char *token, char **out)
{
  g_autoptr(JsonNode) jwks = box_identity_jwks (id, now);
  g_autofree char *jwks_text = json_to_string (jwks, FALSE);
  g_autofree char *jwks_path = g_build_filename (f->dir, "jwks.json", NULL);
  g_autofree char *token_path = g_build_filename (f->dir, "token", NULL);
  g_autofree char *script = g_test_build_filename (G_TEST_DIST, "..", "e2e", "jwtcheck.py", NULL);
  const char *python = g_getenv ("BOX_PYTHON3");
  g_autoptr(GError) error = NULL;
  g_autofree char *err = NULL;
  int status = -1;

  g_assert_true (g_file_set_contents (jwks_path, jwks_text, -1, NULL));
  g_assert_true (g_file_set_contents (token_path, token, -1, NULL));
  {
    const char *argv[] = { python != NULL ? python : "python3", script, jwks_path, token_path,
                           "https://aud.example", NULL };

    g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, out, &err,
                  &status, &error);
  }
  g_assert_no_error (error);
  if (err != NULL && err[0] != '\0')
    g_test_message ("jwtcheck.py: %s", err);
  return g_spawn_check_wait_status (status, NULL) ? 0 : WEXITSTATUS (status);
}

static void
test_key_file (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxIdentity) id = load (f, T0);
  g_autoptr(BoxIdentity) again = NULL;
  g_autofree char *dir = g_path_get_dirname (f->path);
  GStatBuf st;

  g_assert_cmpint (g_stat (f->path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  g_assert_cmpint (g_stat (dir, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);
  /* base64url of 32 bytes */
  g_assert_cmpuint (strlen (box_identity_get_kid (id)), ==, 43);
  again = load (f, T0 + 1);
  g_assert_cmpstr (box_identity_get_kid (again), ==, box_identity_get_kid (id));
  g_assert_cmpuint (count_files (f), ==, 1);
}

static void
test_verified (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxIdentity) id = load (f, T0);
  g_autofree char *token = sign (id, "project:p:sandbox:sb-1", T0);
  g_autofree char *bad = NULL;
  g_autofree char *out = NULL;
  g_autofree char *out2 = NULL;
  g_autofree char *want_header = g_strdup_printf ("{\"alg\": \"RS256\", \"kid\": \"%s\", "
                                                  "\"typ\": \"JWT\"}",
                                                  box_identity_get_kid (id));
  g_auto(GStrv) lines = NULL;

  g_assert_cmpint (verify (f, id, T0, token, &out), ==, 0);
  lines = g_strsplit (out, "\n", 3);
  g_assert_nonnull (strstr (lines[0], "\"sub\": \"project:p:sandbox:sb-1\""));
  g_assert_cmpstr (lines[1], ==, want_header);

  /* the signature of another payload */
  {
    g_auto(GStrv) parts = g_strsplit (token, ".", 3);
    g_autofree char *payload = g_strdup (parts[1]);

    payload[5] = payload[5] == 'A' ? 'B' : 'A';
    bad = g_strjoin (".", parts[0], payload, parts[2], NULL);
  }
  g_assert_cmpint (verify (f, id, T0, bad, &out2), ==, 1);
  g_assert_true (g_str_has_prefix (out2, "InvalidSignatureError") ||
                 g_str_has_prefix (out2, "DecodeError"));
}

static void
test_rotate (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxIdentity) id = load (f, T0);
  g_autoptr(BoxIdentity) reloaded = NULL;
  g_autoptr(BoxIdentity) later = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *old_kid = g_strdup (box_identity_get_kid (id));
  g_autofree char *old_token = sign (id, "old", T0);
  g_autofree char *new_token = NULL;
  g_autofree char *retired_kid = NULL;
  g_autofree char *kids = NULL;
  g_autofree char *want = NULL;
  g_autofree char *out = NULL;
  gint64 until = 0;

  g_assert_true (box_identity_rotate (id, T0 + 100, &retired_kid, &until, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (retired_kid, ==, old_kid);
  g_assert_cmpstr (box_identity_get_kid (id), !=, old_kid);
  g_assert_cmpint (until, ==, T0 + 100 + BOX_IDENTITY_TTL_MAX_S + 1);
  g_assert_cmpuint (count_files (f), ==, 2);

  /* the new key signs; both verify against the JWKS */
  new_token = sign (id, "new", T0 + 100);
  g_assert_cmpint (verify (f, id, T0 + 100, new_token, &out), ==, 0);
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (verify (f, id, T0 + 100, old_token, &out), ==, 0);
  want = g_strdup_printf ("%s %s", box_identity_get_kid (id), old_kid);
  kids = jwks_kids (id, T0 + 100);
  g_assert_cmpstr (kids, ==, want);

  /* across a restart, until its time */
  reloaded = load (f, T0 + 200);
  g_assert_cmpstr (box_identity_get_kid (reloaded), ==, box_identity_get_kid (id));
  g_clear_pointer (&kids, g_free);
  kids = jwks_kids (reloaded, until - 1);
  g_assert_cmpstr (kids, ==, want);
  g_assert_cmpuint (count_files (f), ==, 2);

  /* then gone, and its file */
  g_clear_pointer (&kids, g_free);
  kids = jwks_kids (reloaded, until);
  g_assert_cmpstr (kids, ==, box_identity_get_kid (id));
  g_assert_cmpuint (count_files (f), ==, 1);
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (verify (f, reloaded, until, old_token, &out), ==, 1);
  later = load (f, until + 1);
  g_clear_pointer (&kids, g_free);
  kids = jwks_kids (later, until + 1);
  g_assert_cmpstr (kids, ==, box_identity_get_kid (id));
}

/* A crash after the old key was retired and before the new one was in
 * place: the load puts the new one in place. */
static void
test_rotation_cut_short (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxIdentity) id = load (f, T0);
  g_autoptr(BoxIdentity) again = NULL;
  g_autofree char *new_path = g_strconcat (f->path, ".new", NULL);
  g_autofree char *kid = g_strdup (box_identity_get_kid (id));
  g_autofree char *pem = NULL;

  g_assert_true (g_file_get_contents (f->path, &pem, NULL, NULL));
  g_assert_true (g_file_set_contents_full (new_path, pem, -1, G_FILE_SET_CONTENTS_NONE, 0600,
                                           NULL));
  g_assert_cmpint (g_unlink (f->path), ==, 0);
  again = load (f, T0);
  g_assert_cmpstr (box_identity_get_kid (again), ==, kid);
  g_assert_false (g_file_test (new_path, G_FILE_TEST_EXISTS));
}

static void
test_bad_key_file (Fixture *f, gconstpointer data)
{
  g_autofree char *dir = g_path_get_dirname (f->path);
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  BoxIdentity *id;

  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (f->path, "not a key\n", -1, NULL));
  id = box_identity_load (f->path, T0, &error);
  g_assert_null (id);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_true (g_file_get_contents (f->path, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, "not a key\n");
}

/* A retired key that cannot be read: left as it is, out of the JWKS (a
 * warning, not fatal here: see main()), and the signing key loads all the
 * same (only its old tokens stop verifying). */
static void
test_bad_retired_key (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxIdentity) id = load (f, T0);
  g_autoptr(BoxIdentity) again = NULL;
  g_autofree char *bad = g_strdup_printf ("%s.retired-%" G_GINT64_FORMAT "-oldkid", f->path,
                                          (gint64) T0 + 1000);
  g_autofree char *kids = NULL;
  g_autofree char *text = NULL;

  g_assert_true (g_file_set_contents (bad, "not a key\n", -1, NULL));
  again = load (f, T0);
  g_assert_cmpstr (box_identity_get_kid (again), ==, box_identity_get_kid (id));
  kids = jwks_kids (again, T0);
  g_assert_cmpstr (kids, ==, box_identity_get_kid (id));
  g_assert_true (g_file_get_contents (bad, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, "not a key\n");
}

static void
test_b64url (void)
{
  static const guint8 bytes[] = { 0xfb, 0xff, 0xbf, 0x00 };
  g_autofree char *a = box_b64url_encode (bytes, 3);
  g_autofree char *b = box_b64url_encode (bytes, 4);
  g_autofree char *c = box_b64url_encode ("", 0);

  g_assert_cmpstr (a, ==, "-_-_");
  g_assert_cmpstr (b, ==, "-_-_AA");
  g_assert_cmpstr (c, ==, "");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* warnings are what boxd logs (bad-retired-key expects one); criticals
   * stay fatal */
  g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  g_test_add_func ("/identity/b64url", test_b64url);
#define ADD(path, fn) g_test_add (path, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)
  ADD ("/identity/key-file", test_key_file);
  ADD ("/identity/verified", test_verified);
  ADD ("/identity/rotate", test_rotate);
  ADD ("/identity/rotation-cut-short", test_rotation_cut_short);
  ADD ("/identity/bad-key-file", test_bad_key_file);
  ADD ("/identity/bad-retired-key", test_bad_retired_key);
#undef ADD
  return g_test_run ();
}
