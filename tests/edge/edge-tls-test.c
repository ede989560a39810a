/* tests/edge: the edge's TLS parts without the engine: the server name of
 * a real ClientHello (box-edge-sni.h), certificates by server name and
 * their reload (box-edge-certs.h), the ACME challenge store and the
 * plain-HTTP listener's answers (box-edge-challenges.h, box-edge-http.h). */
#include "config.h"

#include <glib/gstdio.h>
#include <gnutls/gnutls.h>
#include <libsoup/soup.h>
#include <string.h>

#include "box-edge-cert.h"
#include "box-edge-certs.h"
#include "box-edge-challenges.h"
#include "box-edge-http.h"
#include "box-edge-sni.h"
#include "box-test-tls.h"

static void
test_sni (void)
{
  g_autoptr(GByteArray) hello = box_test_client_hello ("Web--Acme.Sandbox.Localhost");
  g_autoptr(GByteArray) bare = box_test_client_hello (NULL);
  g_autofree char *name = NULL;
  guint8 http[] = "GET / HTTP/1.1\r\n";
  guint8 huge[] = { 0x16, 0x03, 0x01, 0xff, 0xff };

  g_assert_cmpint (box_edge_sni_parse (hello->data, hello->len, &name), ==, BOX_EDGE_SNI_DONE);
  g_assert_cmpstr (name, ==, "web--acme.sandbox.localhost");
  g_clear_pointer (&name, g_free);
  /* every part of the first record asks for more */
  for (guint n = 0; n < hello->len; n++) {
    g_assert_cmpint (box_edge_sni_parse (hello->data, n, &name), ==, BOX_EDGE_SNI_MORE);
    g_assert_null (name);
  }
  g_assert_cmpint (box_edge_sni_parse (bare->data, bare->len, &name), ==, BOX_EDGE_SNI_DONE);
  g_assert_null (name);
  g_assert_cmpint (box_edge_sni_parse (http, sizeof http - 1, &name), ==, BOX_EDGE_SNI_NOT_TLS);
  g_assert_cmpint (box_edge_sni_parse (huge, sizeof huge, &name), ==, BOX_EDGE_SNI_NOT_TLS);
}

/* Hostile bytes: every single-byte change of a real ClientHello parses
 * within its bounds (ASan checks the reads) to a name or none. */
static void
test_sni_mangled (void)
{
  g_autoptr(GByteArray) hello = box_test_client_hello ("a.example.com");
  g_autofree guint8 *copy = g_memdup2 (hello->data, hello->len);

  for (guint i = 0; i < hello->len; i++) {
    for (guint v = 0; v < 256; v += 51) {
      g_autofree char *name = NULL;

      copy[i] = (guint8) (hello->data[i] ^ (v | 1));
      (void) box_edge_sni_parse (copy, hello->len, &name);
      g_assert_true (name == NULL || strlen (name) <= 253);
      copy[i] = hello->data[i];
    }
  }
}

/* ---- certificates by server name ---- */

/* The last warning logged (warnings are not fatal here: a refused pair
 * is one). */
static char *last_warning;

static GLogWriterOutput
writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  if ((level & G_LOG_LEVEL_WARNING) != 0) {
    for (gsize i = 0; i < n_fields; i++) {
      if (g_strcmp0 (fields[i].key, "MESSAGE") == 0) {
        g_free (last_warning);
        last_warning = g_strdup (fields[i].value);
      }
    }
  }
  return g_log_writer_default (level, fields, n_fields, user_data);
}

/* A pair for *.<domain> and <domain> from a throw-away CA, copied to
 * <dir>/<name>.pem and <name>-key.pem. */
static void
make_pair (const char *dir, const char *name, const char *domain)
{
  g_autofree char *scratch = g_dir_make_tmp ("edge-pair-XXXXXX", NULL);
  g_autoptr(GTlsCertificate) cert = NULL;
  g_autofree char *pem = NULL;
  g_autofree char *key = NULL;
  g_autofree char *src_cert = g_build_filename (scratch, "tls", "edge.pem", NULL);
  g_autofree char *src_key = g_build_filename (scratch, "tls", "edge-key.pem", NULL);
  g_autofree char *dst_cert = g_strdup_printf ("%s/%s.pem", dir, name);
  g_autofree char *dst_key = g_strdup_printf ("%s/%s-key.pem", dir, name);
  g_autoptr(GError) error = NULL;

  cert = box_edge_cert_load (scratch, domain, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (src_cert, &pem, NULL, NULL));
  g_assert_true (g_file_get_contents (src_key, &key, NULL, NULL));
  g_assert_true (g_file_set_contents (dst_cert, pem, -1, NULL));
  g_assert_true (g_file_set_contents (dst_key, key, -1, NULL));
}

static gboolean
names (GTlsCertificate *cert, const char *host)
{
  g_autoptr(GSocketConnectable) identity = g_network_address_new (host, 443);

  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  return (g_tls_certificate_verify (cert, identity, NULL) & G_TLS_CERTIFICATE_BAD_IDENTITY) == 0;
  G_GNUC_END_IGNORE_DEPRECATIONS
}

static void
test_certs (void)
{
  g_autofree char *data_dir = g_dir_make_tmp ("edge-certs-XXXXXX", NULL);
  g_autofree char *domains = g_build_filename (data_dir, "tls", "domains", NULL);
  g_autofree char *ex_key = g_build_filename (domains, "example.com-key.pem", NULL);
  g_autofree char *ex_cert = g_build_filename (domains, "example.com.pem", NULL);
  g_autoptr(BoxEdgeCerts) certs = NULL;
  g_autoptr(GTlsCertificate) before = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *good_key = NULL;
  g_autofree char *other_key = NULL;

  g_assert_cmpint (g_mkdir_with_parents (domains, 0755), ==, 0);
  make_pair (domains, "example.com", "example.com");
  make_pair (domains, "deep.example.com", "deep.example.com");
  certs = box_edge_certs_new (data_dir, "sandbox.localhost", NULL, NULL, &error);
  g_assert_no_error (error);

  {
    g_autoptr(GTlsCertificate) fallback = box_edge_certs_lookup (certs, NULL);
    g_autoptr(GTlsCertificate) unknown = box_edge_certs_lookup (certs, "other.org");
    g_autoptr(GTlsCertificate) sandbox = box_edge_certs_lookup (certs, "a--b.sandbox.localhost");
    g_autoptr(GTlsCertificate) apex = box_edge_certs_lookup (certs, "example.com");
    g_autoptr(GTlsCertificate) sub = box_edge_certs_lookup (certs, "web.example.com");
    g_autoptr(GTlsCertificate) deep = box_edge_certs_lookup (certs, "x.deep.example.com");

    g_assert_true (names (fallback, "a--b.sandbox.localhost"));
    g_assert_true (g_tls_certificate_is_same (fallback, unknown));
    g_assert_true (g_tls_certificate_is_same (fallback, sandbox));
    g_assert_true (names (apex, "example.com"));
    g_assert_true (g_tls_certificate_is_same (apex, sub));
    g_assert_true (names (deep, "x.deep.example.com"));
    g_assert_false (g_tls_certificate_is_same (deep, sub));
    before = g_object_ref (apex);
  }

  /* a key that is not the certificate's: refused, the old pair kept */
  g_assert_true (g_file_get_contents (ex_key, &good_key, NULL, NULL));
  {
    g_autofree char *deep_key = g_build_filename (domains, "deep.example.com-key.pem", NULL);
    g_assert_true (g_file_get_contents (deep_key, &other_key, NULL, NULL));
  }
  g_assert_true (g_file_set_contents (ex_key, other_key, -1, NULL));
  g_clear_pointer (&last_warning, g_free);
  box_edge_certs_reload (certs);
  g_assert_nonnull (last_warning);
  g_assert_nonnull (strstr (last_warning, "certificate for example.com refused, the old one kept"));
  {
    g_autoptr(GTlsCertificate) now = box_edge_certs_lookup (certs, "web.example.com");
    g_assert_true (g_tls_certificate_is_same (now, before));
  }

  /* a good new pair: served from now on */
  make_pair (domains, "example.com", "example.com");
  box_edge_certs_reload (certs);
  {
    g_autoptr(GTlsCertificate) now = box_edge_certs_lookup (certs, "web.example.com");
    g_assert_false (g_tls_certificate_is_same (now, before));
    g_assert_true (names (now, "web.example.com"));
  }

  /* files gone: the domain is dropped */
  g_assert_cmpint (g_unlink (ex_cert), ==, 0);
  box_edge_certs_reload (certs);
  {
    g_autoptr(GTlsCertificate) now = box_edge_certs_lookup (certs, "web.example.com");
    g_autoptr(GTlsCertificate) fallback = box_edge_certs_lookup (certs, NULL);
    g_assert_true (g_tls_certificate_is_same (now, fallback));
  }

  /* the seam for ACME: a certificate set at run time */
  box_edge_certs_set (certs, "Web.Example.com", before);
  {
    g_autoptr(GTlsCertificate) now = box_edge_certs_lookup (certs, "web.example.com");
    g_assert_true (g_tls_certificate_is_same (now, before));
  }
}

/* ---- ACME challenges and the plain-HTTP listener ---- */

static void
test_challenges (void)
{
  g_autoptr(BoxEdgeChallenges) store = box_edge_challenges_new ();
  g_autofree char *long_token = g_strnfill (BOX_EDGE_CHALLENGE_MAX_TOKEN + 1, 'a');
  g_autofree char *long_auth = g_strconcat (long_token, ".x", NULL);

  g_assert_true (box_edge_challenges_put (store, "tok-EN_1", "tok-EN_1.thumb_print-9"));
  g_assert_cmpstr (box_edge_challenges_lookup (store, "tok-EN_1"), ==, "tok-EN_1.thumb_print-9");
  g_assert_null (box_edge_challenges_lookup (store, "tok-en_1"));
  g_assert_false (box_edge_challenges_put (store, "", ".x"));
  g_assert_false (box_edge_challenges_put (store, "a/b", "a/b.x"));
  g_assert_false (box_edge_challenges_put (store, "abc", "abd.x"));      /* not the token's */
  g_assert_false (box_edge_challenges_put (store, "abc", "abc."));
  g_assert_false (box_edge_challenges_put (store, "abc", "abc.x\r\nSet-Cookie: a=b"));
  g_assert_false (box_edge_challenges_put (store, long_token, long_auth));
  g_assert_null (box_edge_challenges_lookup (store, "abc"));
  for (guint i = 1; i < BOX_EDGE_CHALLENGE_MAX; i++) {
    g_autofree char *token = g_strdup_printf ("t%u", i);
    g_autofree char *auth = g_strdup_printf ("t%u.k", i);
    g_assert_true (box_edge_challenges_put (store, token, auth));
  }
  g_assert_false (box_edge_challenges_put (store, "one-more", "one-more.k"));
  g_assert_true (box_edge_challenges_put (store, "t1", "t1.again"));    /* a replace fits */
  box_edge_challenges_remove (store, "t2");
  g_assert_null (box_edge_challenges_lookup (store, "t2"));
  g_assert_true (box_edge_challenges_put (store, "one-more", "one-more.k"));
}

static void
test_location (void)
{
  struct { const char *host, *path, *query; guint port; const char *want; } cases[] = {
    { "web--acme.sandbox.localhost", "/a/b", "x=1&y", 7443,
      "https://web--acme.sandbox.localhost:7443/a/b?x=1&y" },
    { "Web.Example.COM:8080", "/", NULL, 443, "https://web.example.com/" },
    { "[::1]:80", "/p%20q", NULL, 8443, "https://[::1]:8443/p%20q" },
    { "127.0.0.1", "/", "", 443, "https://127.0.0.1/?" },
    { "evil.com/x", "/", NULL, 443, NULL },
    { "a.com:80x", "/", NULL, 443, NULL },
    { "a.com:", "/", NULL, 443, NULL },
    { "", "/", NULL, 443, NULL },
    { "a b", "/", NULL, 443, NULL },
    { "[::1", "/", NULL, 443, NULL },
    { NULL, "/", NULL, 443, NULL },
    { "a.com", "x", NULL, 443, NULL },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree char *got = box_edge_http_location (cases[i].host, cases[i].path, cases[i].query,
                                                   cases[i].port);
    g_test_message ("host %s", cases[i].host);
    g_assert_cmpstr (got, ==, cases[i].want);
  }
}

typedef struct {
  GMainLoop *loop;
  GBytes    *body;
} Fetch;

static void
fetched (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Fetch *f = user_data;

  f->body = soup_session_send_and_read_finish (SOUP_SESSION (source), result, NULL);
  g_main_loop_quit (f->loop);
}

/* The status of a request for @path with Host @host; *@location its
 * Location, *@body its body. */
static guint
fetch (guint port, const char *method, const char *host, const char *path, char **location,
       char **body)
{
  g_autoptr(SoupSession) session = soup_session_new ();
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u%s", port, path);
  g_autoptr(SoupMessage) msg = soup_message_new (method, url);
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  Fetch f = { loop, NULL };

  soup_message_add_flags (msg, SOUP_MESSAGE_NO_REDIRECT);
  soup_message_headers_replace (soup_message_get_request_headers (msg), "Host", host);
  soup_session_send_and_read_async (session, msg, G_PRIORITY_DEFAULT, NULL, fetched, &f);
  g_main_loop_run (loop);
  g_assert_nonnull (f.body);
  *location = g_strdup (soup_message_headers_get_one (soup_message_get_response_headers (msg),
                                                      "Location"));
  *body = g_strndup (g_bytes_get_data (f.body, NULL), g_bytes_get_size (f.body));
  g_bytes_unref (f.body);
  return soup_message_get_status (msg);
}

static void
test_http (void)
{
  g_autoptr(BoxEdgeChallenges) store = box_edge_challenges_new ();
  g_autoptr(BoxEdgeHttp) http = box_edge_http_new (store, 7443, 5);
  g_autoptr(GError) error = NULL;
  guint port;

  g_assert_true (box_edge_http_listen (http, "127.0.0.1:0", &error));
  g_assert_no_error (error);
  port = box_edge_http_get_port (http);
  g_assert_cmpuint (port, >, 0);
  g_assert_true (box_edge_challenges_put (store, "tok", "tok.thumb"));

  {
    g_autofree char *location = NULL;
    g_autofree char *body = NULL;
    g_assert_cmpuint (fetch (port, "GET", "web--acme.sandbox.localhost", "/a?b=1", &location,
                             &body), ==, 308);
    g_assert_cmpstr (location, ==, "https://web--acme.sandbox.localhost:7443/a?b=1");
  }
  {
    g_autofree char *location = NULL;
    g_autofree char *body = NULL;
    g_assert_cmpuint (fetch (port, "POST", "x.example.com:80", "/form", &location, &body), ==,
                      308);
    g_assert_cmpstr (location, ==, "https://x.example.com:7443/form");
  }
  {
    g_autofree char *location = NULL;
    g_autofree char *body = NULL;
    g_assert_cmpuint (fetch (port, "GET", "x.example.com", BOX_EDGE_ACME_PREFIX "tok", &location,
                             &body), ==, 200);
    g_assert_cmpstr (body, ==, "tok.thumb");
    g_assert_null (location);
  }
  {
    g_autofree char *location = NULL;
    g_autofree char *body = NULL;
    g_assert_cmpuint (fetch (port, "GET", "x.example.com", BOX_EDGE_ACME_PREFIX "nope", &location,
                             &body), ==, 404);
    g_assert_null (location);
  }
  {
    g_autofree char *location = NULL;
    g_autofree char *body = NULL;
    g_assert_cmpuint (fetch (port, "GET", "bad host", "/", &location, &body), ==, 400);
    g_assert_null (location);
  }
  box_edge_http_shutdown (http);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  g_log_set_writer_func (writer, NULL, NULL);
  g_test_add_func ("/edge/sni", test_sni);
  g_test_add_func ("/edge/sni-mangled", test_sni_mangled);
  g_test_add_func ("/edge/certs", test_certs);
  g_test_add_func ("/edge/challenges", test_challenges);
  g_test_add_func ("/edge/http-location", test_location);
  g_test_add_func ("/edge/http", test_http);
  return g_test_run ();
}
