/* tests/edge: the edge's pure parts: hosts, the box_token parameter and
 * cookie (box-edge-route.h), and its own CA (box-edge-cert.h). */
#include "config.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <string.h>
#include <sys/stat.h>

#include "box-edge-cert.h"
#include "box-edge-io.h"
#include "box-edge-route.h"

/* own domains: apps.example.test and deep.apps.example.test (nested) of
 * "acme" and "deep", box.localhost of "boxy" (the sandbox domain's own
 * name too) */
static char *
fake_lookup (gpointer data, const char *host, char **prefix)
{
  static const char *const table[] = {
    "deep.apps.example.test", "deep", "apps.example.test", "acme", "box.localhost", "boxy",
    "localhost", "loc", NULL,
  };

  g_assert_null (data);
  for (const char *p = host; p != NULL; p = strchr (p, '.') != NULL ? strchr (p, '.') + 1 : NULL)
    for (guint i = 0; table[i] != NULL; i += 2)
      if (strcmp (p, table[i]) == 0) {
        *prefix = g_strndup (host, p == host ? 0 : (gsize) (p - host - 1));
        return g_strdup (table[i + 1]);
      }
  return NULL;
}

/* @host parsed as a sandbox-domain host (@resolve FALSE) or resolved with
 * fake_lookup() too; @want_name NULL: refused. */
static void
check (gboolean resolve, const char *host, const char *want_name, const char *want_project,
       guint want_port)
{
  g_autofree char *name = NULL;
  g_autofree char *project = NULL;
  guint port = 99;
  gboolean ok = resolve
                ? box_edge_resolve_host (host, "box.localhost", fake_lookup, NULL, &name,
                                         &project, &port)
                : box_edge_parse_host (host, "sandbox.localhost", &name, &project, &port);

  g_test_message ("%s %s", resolve ? "resolve" : "host", host);
  if (want_name == NULL) {
    g_assert_false (ok);
    return;
  }
  g_assert_true (ok);
  g_assert_cmpstr (name, ==, want_name);
  g_assert_cmpstr (project, ==, want_project);
  g_assert_cmpuint (port, ==, want_port);
}

#define check_host(...)    check (FALSE, __VA_ARGS__)
#define check_resolve(...) check (TRUE, __VA_ARGS__)

static void
test_hosts (void)
{
  check_host ("web--acme.sandbox.localhost", "web", "acme", 0);
  check_host ("WEB--Acme.sandbox.localhost:7443", "web", "acme", 0);
  check_host ("web--acme.sandbox.localhost.", "web", "acme", 0);
  check_host ("3000--my-app--acme.sandbox.localhost", "my-app", "acme", 3000);
  check_host ("65535--a--b.sandbox.localhost", "a", "b", 65535);
  check_host ("sandbox.localhost", NULL, NULL, 0);
  check_host ("acme.sandbox.localhost", NULL, NULL, 0);            /* no -- */
  check_host ("web--acme.other.localhost", NULL, NULL, 0);
  check_host ("web--acme.xsandbox.localhost", NULL, NULL, 0);
  check_host ("x.web--acme.sandbox.localhost", NULL, NULL, 0);     /* a label deeper */
  check_host ("0--web--acme.sandbox.localhost", NULL, NULL, 0);
  check_host ("080--web--acme.sandbox.localhost", NULL, NULL, 0);
  check_host ("65536--web--acme.sandbox.localhost", NULL, NULL, 0);
  check_host ("1--2--web--acme.sandbox.localhost", NULL, NULL, 0);
  check_host ("web---acme.sandbox.localhost", NULL, NULL, 0);
  check_host ("-web--acme.sandbox.localhost", NULL, NULL, 0);
  check_host ("we_b--acme.sandbox.localhost", NULL, NULL, 0);
  check_host ("web--acme.sandbox.localhost:x", NULL, NULL, 0);
  check_host ("", NULL, NULL, 0);
}

static void
test_resolve (void)
{
  check_resolve ("web.apps.example.test", "web", "acme", 0);
  check_resolve ("WEB.Apps.Example.Test.:8443", "web", "acme", 0);
  check_resolve ("3000--web.apps.example.test", "web", "acme", 3000);
  check_resolve ("web.deep.apps.example.test", "web", "deep", 0);   /* the longest domain */
  check_resolve ("apps.example.test", NULL, NULL, 0);                /* the domain itself */
  check_resolve ("a.b.apps.example.test", NULL, NULL, 0);            /* deeper */
  check_resolve ("we_b.apps.example.test", NULL, NULL, 0);
  check_resolve ("web--acme.apps.example.test", NULL, NULL, 0);
  check_resolve ("0--web.apps.example.test", NULL, NULL, 0);
  check_resolve ("1--2--web.apps.example.test", NULL, NULL, 0);
  check_resolve ("web.other.test", NULL, NULL, 0);
  check_resolve ("web.apps.example.test:x", NULL, NULL, 0);
  /* the sandbox domain wins a tie and over a shorter own domain */
  check_resolve ("web--acme.box.localhost", "web", "acme", 0);
  check_resolve ("8080--web--acme.box.localhost", "web", "acme", 8080);
  check_resolve ("web.box.localhost", NULL, NULL, 0);
  check_resolve ("web.localhost", "web", "loc", 0);
  check_resolve ("web.xbox.localhost", NULL, NULL, 0);
}

static void
check_query (const char *query, const char *want_rest, const char *want_token)
{
  g_autofree char *token = NULL;
  g_autofree char *rest = box_edge_strip_query (query, &token);

  g_assert_cmpstr (rest, ==, want_rest);
  g_assert_cmpstr (token, ==, want_token);
}

static void
test_query (void)
{
  check_query (NULL, NULL, NULL);
  check_query ("a=1&b=2", "a=1&b=2", NULL);
  check_query ("box_token=box_K", NULL, "box_K");
  check_query ("a=1&box_token=box_K&b=2&a=3", "a=1&b=2&a=3", "box_K");
  check_query ("box_tokens=1&box_token=x%2By", "box_tokens=1", "x+y");
  check_query ("box_token", NULL, "");
}

static void
check_cookie (const char *cookie, const char *want_rest, const char *want_token)
{
  g_autofree char *token = NULL;
  g_autofree char *rest = box_edge_strip_cookie (cookie, &token);

  g_assert_cmpstr (rest, ==, want_rest);
  g_assert_cmpstr (token, ==, want_token);
}

static void
test_cookie (void)
{
  check_cookie ("a=1", "a=1", NULL);
  check_cookie ("box_token=box_K", NULL, "box_K");
  check_cookie ("a=1; box_token=box_K;b=2", "a=1; b=2", "box_K");
  check_cookie ("my_box_token=1; box_token=", "my_box_token=1", "");
}

static gnutls_x509_crt_t
read_crt (const char *path)
{
  g_autofree char *pem = NULL;
  gsize len = 0;
  gnutls_x509_crt_t crt = NULL;
  gnutls_datum_t datum;

  g_assert_true (g_file_get_contents (path, &pem, &len, NULL));
  datum.data = (unsigned char *) pem;
  datum.size = (unsigned int) len;
  g_assert_cmpint (gnutls_x509_crt_init (&crt), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_import (crt, &datum, GNUTLS_X509_FMT_PEM), ==, 0);
  return crt;
}

static guint
file_mode (const char *path)
{
  struct stat st;

  g_assert_cmpint (stat (path, &st), ==, 0);
  return st.st_mode & 0777;
}

static void
test_own_ca (void)
{
  g_autofree char *dir = g_dir_make_tmp ("box-edge-XXXXXX", NULL);
  g_autofree char *ca_path = box_edge_ca_path (dir);
  g_autofree char *leaf_path = g_build_filename (dir, "tls", "edge.pem", NULL);
  g_autofree char *ca_key = g_build_filename (dir, "tls", "ca-key.pem", NULL);
  g_autofree char *leaf_key = g_build_filename (dir, "tls", "edge-key.pem", NULL);
  g_autofree char *ca_pem = NULL;
  g_autofree char *ca_pem2 = NULL;
  g_autofree char *leaf_pem = NULL;
  g_autofree char *leaf_pem2 = NULL;
  g_autoptr(GTlsCertificate) cert = NULL;
  g_autoptr(GTlsCertificate) again = NULL;
  g_autoptr(GTlsCertificate) other = NULL;
  g_autoptr(GError) error = NULL;
  gnutls_x509_crt_t ca, leaf;
  unsigned int status = 1;

  cert = box_edge_cert_load (dir, "sandbox.localhost", NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (cert);
  g_assert_cmpuint (file_mode (ca_key), ==, 0600);
  g_assert_cmpuint (file_mode (leaf_key), ==, 0600);

  ca = read_crt (ca_path);
  leaf = read_crt (leaf_path);
  g_assert_cmpint (gnutls_x509_crt_get_ca_status (ca, NULL), >, 0);
  g_assert_cmpint (gnutls_x509_crt_get_ca_status (leaf, NULL), ==, 0);
  g_assert_true (gnutls_x509_crt_check_hostname (leaf, "web--acme.sandbox.localhost"));
  g_assert_true (gnutls_x509_crt_check_hostname (leaf, "sandbox.localhost"));
  g_assert_false (gnutls_x509_crt_check_hostname (leaf, "a.b.sandbox.localhost"));
  g_assert_false (gnutls_x509_crt_check_hostname (leaf, "example.com"));
  g_assert_cmpint (gnutls_x509_crt_verify (leaf, &ca, 1, 0, &status), ==, 0);
  g_assert_cmpuint (status, ==, 0);
  gnutls_x509_crt_deinit (leaf);
  gnutls_x509_crt_deinit (ca);

  /* a later start reuses both */
  g_assert_true (g_file_get_contents (ca_path, &ca_pem, NULL, NULL));
  g_assert_true (g_file_get_contents (leaf_path, &leaf_pem, NULL, NULL));
  again = box_edge_cert_load (dir, "sandbox.localhost", NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (ca_path, &ca_pem2, NULL, NULL));
  g_assert_true (g_file_get_contents (leaf_path, &leaf_pem2, NULL, NULL));
  g_assert_cmpstr (ca_pem, ==, ca_pem2);
  g_assert_cmpstr (leaf_pem, ==, leaf_pem2);

  /* another domain: the same CA, a new leaf for it */
  g_clear_pointer (&ca_pem2, g_free);
  g_clear_pointer (&leaf_pem2, g_free);
  other = box_edge_cert_load (dir, "example.test", NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (ca_path, &ca_pem2, NULL, NULL));
  g_assert_true (g_file_get_contents (leaf_path, &leaf_pem2, NULL, NULL));
  g_assert_cmpstr (ca_pem, ==, ca_pem2);
  g_assert_cmpstr (leaf_pem, !=, leaf_pem2);
  leaf = read_crt (leaf_path);
  g_assert_true (gnutls_x509_crt_check_hostname (leaf, "x--y.example.test"));
  gnutls_x509_crt_deinit (leaf);

  /* the operator's files: both or neither */
  g_assert_null (box_edge_cert_load (dir, "example.test", leaf_path, NULL, &error));
  g_assert_nonnull (error);
  g_clear_error (&error);
  g_clear_object (&other);
  other = box_edge_cert_load (dir, "ignored", leaf_path, leaf_key, &error);
  g_assert_no_error (error);
  g_assert_nonnull (other);
}

/* How many bytes of @text box_edge_chunks_scan() takes as the body, fed
 * @step bytes at a time (-1: broken); *@done whether it found the end. */
static gssize
scan_chunks (const char *text, gsize step, gboolean *done)
{
  BoxEdgeChunks chunks = { 0 };
  gsize len = strlen (text), at = 0;

  while (at < len && !chunks.done) {
    gsize n = MIN (step, len - at);
    gssize took = box_edge_chunks_scan (&chunks, (const guint8 *) text + at, n);

    if (took < 0)
      return -1;
    at += (gsize) took;
    if ((gsize) took < n)
      break;
  }
  *done = chunks.done;
  return (gssize) at;
}

static void
test_chunks (void)
{
  static const char *const whole[] = {
    "0\r\n\r\n",
    "5\r\nhello\r\n0\r\n\r\n",
    "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n",
    "3\r\nabc\r\n0\r\nX-Trailer: 1\r\nY: 2\r\n\r\n",
    "3\nabc\n0\n\n",                       /* bare LFs */
    "1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n",
  };
  gboolean done = FALSE;

  for (guint i = 0; i < G_N_ELEMENTS (whole); i++)
    for (gsize step = 1; step <= strlen (whole[i]); step++) {
      g_assert_cmpint (scan_chunks (whole[i], step, &done), ==, (gssize) strlen (whole[i]));
      g_assert_true (done);
    }
  /* bytes after the end are not the body's */
  g_assert_cmpint (scan_chunks ("2\r\nab\r\n0\r\n\r\nHTTP/1.1", 64, &done), ==, 12);
  g_assert_true (done);
  /* not yet at the end */
  g_assert_cmpint (scan_chunks ("5\r\nhel", 64, &done), ==, 6);
  g_assert_false (done);
  g_assert_cmpint (scan_chunks ("0\r\nX: 1\r\n", 64, &done), ==, 9);
  g_assert_false (done);
  /* broken framing */
  g_assert_cmpint (scan_chunks ("x\r\n", 64, &done), ==, -1);
  g_assert_cmpint (scan_chunks ("\r\n", 64, &done), ==, -1);
  g_assert_cmpint (scan_chunks ("2\r\nabX\r\n", 64, &done), ==, -1);
  g_assert_cmpint (scan_chunks ("0\r\n\rX", 64, &done), ==, -1);
  g_assert_cmpint (scan_chunks ("11111111111111111\r\n", 64, &done), ==, -1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/edge/hosts", test_hosts);
  g_test_add_func ("/edge/resolve", test_resolve);
  g_test_add_func ("/edge/query", test_query);
  g_test_add_func ("/edge/cookie", test_cookie);
  g_test_add_func ("/edge/own-ca", test_own_ca);
  g_test_add_func ("/edge/chunks", test_chunks);
  return g_test_run ();
}
