/* nftables-proxy-test-peers.c: upstream servers and clients for
 * nftables-proxy-test.c; see nftables-proxy-test.h. */
#include "config.h"

#include "nftables-proxy-test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

struct _TestUpstream {
  int                              fd;
  guint16                          port;
  gboolean                         tls;
  gint                             accepted;  /* atomic */
  GThread                         *thread;
  gnutls_x509_privkey_t            key;
  gnutls_x509_crt_t                cert;
  gnutls_certificate_credentials_t creds;
};

typedef struct {
  TestUpstream *up;
  int           fd;
} Peer;

static void
echo_plain (int fd)
{
  char buf[65536];
  ssize_t n;

  while ((n = recv (fd, buf, sizeof buf, 0)) > 0)
    test_send_all (fd, buf, (gsize) n);
  shutdown (fd, SHUT_WR);
}

static void
echo_tls (TestUpstream *up, int fd)
{
  gnutls_session_t session;
  char buf[16384];
  ssize_t n;

  g_assert_cmpint (gnutls_init (&session, GNUTLS_SERVER), ==, 0);
  g_assert_cmpint (gnutls_set_default_priority (session), ==, 0);
  g_assert_cmpint (gnutls_credentials_set (session, GNUTLS_CRD_CERTIFICATE, up->creds), ==, 0);
  gnutls_transport_set_int (session, fd);
  if (gnutls_handshake (session) == 0) {
    while ((n = gnutls_record_recv (session, buf, sizeof buf)) > 0)
      if (gnutls_record_send (session, buf, (size_t) n) < 0)
        break;
    gnutls_bye (session, GNUTLS_SHUT_WR);
  }
  gnutls_deinit (session);
}

static gpointer
peer_thread (gpointer data)
{
  Peer *peer = data;

  if (peer->up->tls)
    echo_tls (peer->up, peer->fd);
  else
    echo_plain (peer->fd);
  close (peer->fd);
  g_free (peer);
  return NULL;
}

static gpointer
accept_thread (gpointer data)
{
  TestUpstream *up = data;
  int fd;

  while ((fd = accept (up->fd, NULL, NULL)) >= 0) {
    Peer *peer = g_new0 (Peer, 1);

    g_atomic_int_inc (&up->accepted);
    peer->up = up;
    peer->fd = fd;
    g_thread_unref (g_thread_new ("test-peer", peer_thread, peer));
  }
  return NULL;
}

static void
make_cert (TestUpstream *up)
{
  time_t now = time (NULL);
  guint8 serial = 7;

  g_assert_cmpint (gnutls_x509_privkey_init (&up->key), ==, 0);
  g_assert_cmpint (gnutls_x509_privkey_generate (up->key, GNUTLS_PK_ECDSA,
                                                 GNUTLS_CURVE_TO_BITS (GNUTLS_ECC_CURVE_SECP256R1),
                                                 0), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_init (&up->cert), ==, 0);
  gnutls_x509_crt_set_version (up->cert, 3);
  gnutls_x509_crt_set_serial (up->cert, &serial, 1);
  gnutls_x509_crt_set_activation_time (up->cert, now - 60);
  gnutls_x509_crt_set_expiration_time (up->cert, now + 3600);
  gnutls_x509_crt_set_dn_by_oid (up->cert, GNUTLS_OID_X520_COMMON_NAME, 0, "allowed.test", 12);
  gnutls_x509_crt_set_subject_alt_name (up->cert, GNUTLS_SAN_DNSNAME, "allowed.test", 12,
                                        GNUTLS_FSAN_APPEND);
  gnutls_x509_crt_set_subject_alt_name (up->cert, GNUTLS_SAN_DNSNAME, "*.ok.test", 9,
                                        GNUTLS_FSAN_APPEND);
  gnutls_x509_crt_set_basic_constraints (up->cert, 1, -1);
  gnutls_x509_crt_set_key (up->cert, up->key);
  g_assert_cmpint (gnutls_x509_crt_sign2 (up->cert, up->cert, up->key, GNUTLS_DIG_SHA256, 0),
                   ==, 0);
  g_assert_cmpint (gnutls_certificate_allocate_credentials (&up->creds), ==, 0);
  g_assert_cmpint (gnutls_certificate_set_x509_key (up->creds, &up->cert, 1, up->key), ==, 0);
}

static TestUpstream *
upstream_new (gboolean tls)
{
  TestUpstream *up = g_new0 (TestUpstream, 1);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof sa;

  up->tls = tls;
  if (tls)
    make_cert (up);
  up->fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (bind (up->fd, (struct sockaddr *) &sa, sizeof sa), ==, 0);
  g_assert_cmpint (listen (up->fd, 128), ==, 0);
  g_assert_cmpint (getsockname (up->fd, (struct sockaddr *) &sa, &len), ==, 0);
  up->port = ntohs (sa.sin_port);
  up->thread = g_thread_new ("test-upstream", accept_thread, up);
  return up;
}

TestUpstream *
test_upstream_echo_new (void)
{
  return upstream_new (FALSE);
}

TestUpstream *
test_upstream_tls_new (void)
{
  return upstream_new (TRUE);
}

guint16
test_upstream_port (TestUpstream *up)
{
  return up->port;
}

guint
test_upstream_accepted (TestUpstream *up)
{
  return (guint) g_atomic_int_get (&up->accepted);
}

gnutls_x509_crt_t
test_upstream_cert (TestUpstream *up)
{
  return up->cert;
}

/* The peer threads are detached and end with their connections; the
 * listener is shut down so that accept() returns. */
void
test_upstream_free (TestUpstream *up)
{
  shutdown (up->fd, SHUT_RDWR);
  g_thread_join (up->thread);
  close (up->fd);
  if (up->tls) {
    gnutls_certificate_free_credentials (up->creds);
    gnutls_x509_crt_deinit (up->cert);
    gnutls_x509_privkey_deinit (up->key);
  }
  g_free (up);
}

int
test_connect (const char *source, guint16 port)
{
  struct sockaddr_in src = { .sin_family = AF_INET };
  struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons (port),
                             .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  struct timeval tv = { .tv_sec = 10 };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (inet_pton (AF_INET, source, &src.sin_addr), ==, 1);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &src, sizeof src), ==, 0);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &dst, sizeof dst), ==, 0);
  g_assert_cmpint (setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), ==, 0);
  return fd;
}

void
test_send_all (int fd, const void *data, gsize len)
{
  const char *p = data;

  while (len > 0) {
    ssize_t n = send (fd, p, len, MSG_NOSIGNAL);

    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    p += n;
    len -= (gsize) n;
  }
}

GString *
test_read_all (int fd, gsize max, gboolean *reset)
{
  GString *out = g_string_new (NULL);
  char buf[65536];

  *reset = FALSE;
  while (out->len < max) {
    ssize_t n = recv (fd, buf, MIN (sizeof buf, max - out->len), 0);

    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      *reset = n < 0 && errno == ECONNRESET;
      break;
    }
    g_string_append_len (out, buf, n);
  }
  return out;
}

gboolean
test_ends_within (int fd, guint ms)
{
  gint64 end = g_get_monotonic_time () + (gint64) ms * 1000;
  char buf[4096];

  for (;;) {
    gint64 left = (end - g_get_monotonic_time ()) / 1000;
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    ssize_t n;

    if (left <= 0 || poll (&pfd, 1, (int) left) <= 0)
      return FALSE;
    n = recv (fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      return TRUE;
  }
}

int
test_tls_handshake (int fd, const char *sni, TestUpstream *up, gnutls_session_t *session)
{
  gnutls_certificate_credentials_t creds;
  int ret;

  g_assert_cmpint (gnutls_certificate_allocate_credentials (&creds), ==, 0);
  g_assert_cmpint (gnutls_certificate_set_x509_trust (creds, &up->cert, 1), ==, 1);
  g_assert_cmpint (gnutls_init (session, GNUTLS_CLIENT), ==, 0);
  g_assert_cmpint (gnutls_set_default_priority (*session), ==, 0);
  g_assert_cmpint (gnutls_credentials_set (*session, GNUTLS_CRD_CERTIFICATE, creds), ==, 0);
  if (sni != NULL) {
    g_assert_cmpint (gnutls_server_name_set (*session, GNUTLS_NAME_DNS, sni, strlen (sni)), ==, 0);
    gnutls_session_set_verify_cert (*session, sni, 0);
  }
  gnutls_session_set_ptr (*session, creds);
  gnutls_transport_set_int (*session, fd);
  do
    ret = gnutls_handshake (*session);
  while (ret < 0 && gnutls_error_is_fatal (ret) == 0);
  return ret;
}

void
test_tls_free (gnutls_session_t session)
{
  gnutls_certificate_credentials_t creds = gnutls_session_get_ptr (session);

  gnutls_deinit (session);
  gnutls_certificate_free_credentials (creds);
}

/* @hello's handshake message cut into records of at most @size bytes. */
GByteArray *
test_reframe (GByteArray *hello, gsize size)
{
  GByteArray *out = g_byte_array_new ();

  for (gsize pos = 5; pos < hello->len; pos += size) {
    gsize n = MIN (size, hello->len - pos);
    guint8 header[5] = { 0x16, 0x03, 0x01, (guint8) (n >> 8), (guint8) n };

    g_byte_array_append (out, header, 5);
    g_byte_array_append (out, hello->data + pos, (guint) n);
  }
  return out;
}

/* Raises the descriptor limit to the hard one; skips the test when that
 * is below @needed. */
gboolean
test_raise_fd_limit (guint needed)
{
  struct rlimit limit;

  g_assert_cmpint (getrlimit (RLIMIT_NOFILE, &limit), ==, 0);
  limit.rlim_cur = limit.rlim_max;
  g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &limit), ==, 0);
  if (limit.rlim_cur < needed)
    g_test_skip ("not enough file descriptors");
  return limit.rlim_cur >= needed;
}

gsize
test_rss_bytes (void)
{
  g_autofree char *statm = NULL;
  g_auto(GStrv) fields = NULL;

  g_assert_true (g_file_get_contents ("/proc/self/statm", &statm, NULL, NULL));
  fields = g_strsplit (statm, " ", -1);
  return (gsize) g_ascii_strtoull (fields[1], NULL, 10) * (gsize) sysconf (_SC_PAGESIZE);
}
