/* nftables-proxy-test.h: the peers of nftables-proxy-test.c, built by
 * nftables-proxy-test-peers.c: upstream servers on loopback (a TCP echo
 * server and a GnuTLS echo server with a certificate made at start-up for
 * the test names) and blocking clients bound to a chosen source address
 * (127.0.0.1 and 127.0.0.2 play two sandboxes, 127.0.0.3 an unknown one).
 */
#pragma once

#include <glib.h>
#include <gnutls/gnutls.h>

G_BEGIN_DECLS

typedef struct _TestUpstream TestUpstream;

/* Echoes each connection's bytes back until its EOF, then closes. */
TestUpstream *test_upstream_echo_new  (void);
/* Completes a TLS handshake (certificate for "allowed.test" and
 * "*.ok.test") and echoes records back until the client's close. */
TestUpstream *test_upstream_tls_new   (void);
guint16       test_upstream_port      (TestUpstream *up);
/* Connections accepted so far. */
guint         test_upstream_accepted  (TestUpstream *up);
/* The certificate the TLS upstream shows (for clients to trust). */
gnutls_x509_crt_t test_upstream_cert  (TestUpstream *up);
void          test_upstream_free      (TestUpstream *up);

/* A blocking TCP connection from @source (an IPv4 literal) to 127.0.0.1
 * @port, with a 10 s receive timeout. */
int       test_connect      (const char *source, guint16 port);
void      test_send_all     (int fd, const void *data, gsize len);
/* Reads until EOF, an error or @max bytes; *reset says whether it ended in
 * a reset (ECONNRESET). */
GString  *test_read_all     (int fd, gsize max, gboolean *reset);
/* Whether the connection ends (EOF or reset) within @ms, reading and
 * dropping what arrives. */
gboolean  test_ends_within  (int fd, guint ms);
/* A TLS client session over @fd that trusts @up's certificate and checks
 * it against @sni; the handshake's return value. */
int       test_tls_handshake (int fd, const char *sni, TestUpstream *up,
                              gnutls_session_t *session);
/* @hello (one TLS record) with its handshake message cut into records of
 * at most @size bytes. */
GByteArray *test_reframe     (GByteArray *hello, gsize size);
/* Raises RLIMIT_NOFILE to its hard limit; FALSE (and the test skipped)
 * when that is below @needed. */
gboolean  test_raise_fd_limit (guint needed);
/* This process's resident memory. */
gsize     test_rss_bytes     (void);
/* Frees a session of test_tls_handshake() and its credentials. */
void      test_tls_free      (gnutls_session_t session);

G_END_DECLS
