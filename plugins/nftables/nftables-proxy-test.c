/* nftables-proxy-test.c: the name-checking proxy (box-nftables-proxy.c);
 * its parsers have nftables-sni-test.c.
 *
 * The proxy listens on loopback; clients connect straight to its ports
 * from 127.0.0.1 (sandbox sb-a), 127.0.0.2 (sb-b, same rules), 127.0.0.4
 * (sb-open, unrestricted) or 127.0.0.3 (no sandbox).  A fake node
 * resolver answers 127.0.0.1 for every *.test name, so allowed
 * connections reach the local upstreams: an echo server, and a GnuTLS
 * server whose certificate the TLS clients verify.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <json-glib/json-glib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "box-error.h"
#include "box-nftables-proxy.h"
#include "box-nftables-sni.h"
#include "box-test-tls.h"
#include "nftables-proxy-test.h"

#define GUEST_A    0x7f000001u
#define GUEST_B    0x7f000002u
#define GUEST_OPEN 0x7f000004u

/* ---- the proxy ---- */

typedef struct {
  BoxNftablesEgress *egress;
  BoxNftablesProxy  *proxy;
  TestUpstream      *echo;
  TestUpstream      *tls;
  GMutex             lock;
  GPtrArray         *log;
} Fixture;

typedef struct {
  const char *domain;
  gboolean    allow;
  guint16     port;  /* 0: the default ports */
} Rule;

static const Rule default_rules[] = {
  { "allowed.test", TRUE, 0 },
  { "*.ok.test", TRUE, 0 },
  { "bad.ok.test", FALSE, 0 },
  { "httponly.test", TRUE, 80 },
  { "tlsonly.test", TRUE, 443 },
};

static BoxEgressPolicy *
make_policy (const Rule *rules, guint n)
{
  g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_autoptr(GError) error = NULL;
  BoxEgressPolicy *policy;

  for (guint i = 0; i < n; i++) {
    BoxRule *rule = g_new0 (BoxRule, 1);

    rule->domain = g_strdup (rules[i].domain);
    rule->allow = rules[i].allow;
    if (rules[i].port != 0) {
      rule->n_ports = 1;
      rule->ports = g_new (guint16, 1);
      rule->ports[0] = rules[i].port;
    }
    g_ptr_array_add (list, rule);
  }
  policy = box_egress_policy_new (list, NULL, &error);
  g_assert_no_error (error);
  return policy;
}

typedef struct {
  BoxNftablesResolveDone done;
  gpointer               done_data;
} LateAnswer;

static gpointer
answer_late (gpointer data)
{
  g_autofree LateAnswer *late = data;
  guint32 addr = 0x7f000001u;

  g_usleep (50 * 1000);
  late->done (&addr, 1, 60, NULL, late->done_data);
  return NULL;
}

/* The node's resolver, faked: every *.test name is 127.0.0.1 (a name
 * starting "late." answers from another thread), "second.ok.test" is
 * 127.0.0.9 (refused) then 127.0.0.1, "nowhere.test" fails, and
 * "rebind.ok.test" and "mixed.ok.test" answer blocked addresses (all of
 * them, the first). */
static void
fake_resolve (guint32 guest, const char *name, BoxNftablesResolveDone done, gpointer done_data,
              gpointer user_data)
{
  guint32 addrs[2] = { 0x7f000001u, 0x7f000001u };
  g_autoptr(GError) error = NULL;

  /* each lookup names the connecting sandbox (its share of the resolver) */
  g_assert_true (guest == GUEST_A || guest == GUEST_B || guest == GUEST_OPEN);

  if (strcmp (name, "rebind.ok.test") == 0) {
    guint32 internal[2] = { 0x7f00000cu, 0x7f00000du };  /* 127.0.0.12, .13 */

    done (internal, 2, 60, NULL, done_data);
  } else if (strcmp (name, "mixed.ok.test") == 0) {
    addrs[0] = 0x7f00000eu;  /* 127.0.0.14 */
    done (addrs, 2, 60, NULL, done_data);
  } else if (strcmp (name, "second.ok.test") == 0) {
    addrs[0] = 0x7f000009u;  /* nothing listens there: refused */
    done (addrs, 2, 60, NULL, done_data);
  } else if (strcmp (name, "nowhere.test") == 0) {
    error = g_error_new_literal (BOX_ERROR, BOX_ERROR_NOT_FOUND, "no such name");
    done (NULL, 0, 0, error, done_data);
  } else if (g_str_has_prefix (name, "late.")) {
    LateAnswer *late = g_new0 (LateAnswer, 1);

    late->done = done;
    late->done_data = done_data;
    g_thread_unref (g_thread_new ("late-answer", answer_late, late));
  } else {
    done (addrs, 2, 60, NULL, done_data);
  }
}

static void
log_line (const char *line, gpointer user_data)
{
  Fixture *f = user_data;

  g_mutex_lock (&f->lock);
  g_ptr_array_add (f->log, g_strdup (line));
  g_mutex_unlock (&f->lock);
}

static gboolean
logged (Fixture *f, const char *line)
{
  gboolean found = FALSE;

  g_mutex_lock (&f->lock);
  for (guint i = 0; i < f->log->len && !found; i++)
    found = strcmp (f->log->pdata[i], line) == 0;
  g_mutex_unlock (&f->lock);
  return found;
}

/* Internal addresses for the tests: on loopback, so that nothing would
 * leave the machine even if the check failed. */
static const char *const blocked_networks[] = { "127.0.0.12/30", "10.0.0.0/8", NULL };

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(BoxEgressPolicy) policy = make_policy (default_rules, G_N_ELEMENTS (default_rules));
  g_autoptr(GError) error = NULL;

  g_mutex_init (&f->lock);
  f->log = g_ptr_array_new_with_free_func (g_free);
  f->egress = box_nftables_egress_new ();
  box_nftables_egress_set (f->egress, GUEST_A, "sb-a", policy);
  box_nftables_egress_set (f->egress, GUEST_B, "sb-b", policy);
  box_nftables_egress_set (f->egress, GUEST_OPEN, "sb-open", NULL);
  box_nftables_egress_set_resolver (f->egress, fake_resolve, NULL);
  box_nftables_egress_set_log_func (f->egress, log_line, f);
  f->proxy = box_nftables_proxy_new (f->egress, "127.0.0.1", 0, 0, &error);
  g_assert_no_error (error);
  /* the upstreams are on loopback, which is blocked by default */
  g_assert_true (box_nftables_proxy_set_blocked (f->proxy, blocked_networks, &error));
  g_assert_no_error (error);
  f->echo = test_upstream_echo_new ();
  f->tls = test_upstream_tls_new ();
  box_nftables_proxy_set_upstream_ports (f->proxy, test_upstream_port (f->echo),
                                         test_upstream_port (f->tls));
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  box_nftables_proxy_free (f->proxy);
  test_upstream_free (f->echo);
  test_upstream_free (f->tls);
  box_nftables_egress_free (f->egress);
  g_ptr_array_unref (f->log);
  g_mutex_clear (&f->lock);
}

static int
connect_http (Fixture *f, const char *source)
{
  return test_connect (source, box_nftables_proxy_get_port (f->proxy, FALSE));
}

/* Sends @head, half-closes and reads everything back. */
static GString *
exchange (Fixture *f, const char *source, const char *head, gboolean *reset)
{
  int fd = connect_http (f, source);
  GString *answer;

  test_send_all (fd, head, strlen (head));
  shutdown (fd, SHUT_WR);
  answer = test_read_all (fd, 1 << 20, reset);
  close (fd);
  return answer;
}

/* What the upstream gets for @head: told to close after its answer. */
static char *
closed_head (const char *head)
{
  GByteArray *bytes = box_nftables_sni_http_close ((const guint8 *) head, strlen (head));

  g_byte_array_append (bytes, (const guint8 *) "", 1);
  return (char *) g_byte_array_free (bytes, FALSE);
}

static void
assert_passes (Fixture *f, const char *source, const char *head)
{
  g_autofree char *expected = closed_head (head);
  gboolean reset;
  g_autoptr(GString) answer = exchange (f, source, head, &reset);

  g_autofree char *shown = g_strescape (head, NULL);

  g_test_message ("passes: %s", shown);
  g_assert_false (reset);
  g_assert_cmpstr (answer->str, ==, expected);  /* the echo: what the upstream got */
}

/* A 403 permission_denied whose message contains @words, then a reset. */
static void
assert_forbidden (Fixture *f, const char *source, const char *head, const char *words)
{
  guint before = test_upstream_accepted (f->echo);
  gboolean reset;
  g_autoptr(GString) answer = exchange (f, source, head, &reset);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  const char *body = strstr (answer->str, "\r\n\r\n");
  JsonObject *err;

  g_autofree char *shown = g_strescape (head, NULL);

  g_test_message ("forbidden: %s", shown);
  g_assert_true (g_str_has_prefix (answer->str, "HTTP/1.1 403 Forbidden\r\n"));
  g_assert_nonnull (strstr (answer->str, "\r\nConnection: close\r\n"));
  g_assert_nonnull (body);
  g_assert_true (json_parser_load_from_data (parser, body + 4, -1, &error));
  g_assert_no_error (error);
  err = json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)),
                                       "error");
  g_assert_cmpstr (json_object_get_string_member (err, "code"), ==, "permission_denied");
  g_assert_nonnull (strstr (json_object_get_string_member (err, "message"), words));
  g_assert_true (reset);
  g_assert_cmpuint (test_upstream_accepted (f->echo), ==, before);
}

static void
assert_echo (Fixture *f, const char *head, const char *echo)
{
  gboolean reset;
  g_autoptr(GString) answer = exchange (f, "127.0.0.1", head, &reset);

  g_assert_false (reset);
  g_assert_cmpstr (answer->str, ==, echo);
}

static void
test_http_allowed (Fixture *f, gconstpointer data)
{
  assert_passes (f, "127.0.0.1", "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
  assert_passes (f, "127.0.0.2", "GET /x HTTP/1.1\r\nHost: www.ok.test\r\n\r\nand a body");
  assert_passes (f, "127.0.0.1",
                 "GET http://httponly.test/ HTTP/1.1\r\nHost: httponly.test\r\n\r\n");
  assert_passes (f, "127.0.0.1", "GET / HTTP/1.1\r\nHost: late.ok.test\r\n\r\n");
  assert_passes (f, "127.0.0.1", "GET / HTTP/1.1\r\nHost: second.ok.test\r\n\r\n");
  /* a kept-alive connection is not: the server is told to close after the
   * first answer, so a second request (another Host) is never served */
  assert_echo (f, "GET / HTTP/1.1\r\nHost: allowed.test\r\nconnection: keep-alive\r\n"
               "Keep-Alive: timeout=5\r\nProxy-Connection: x\r\n\r\n"
               "GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n",
               "GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n"
               "GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n");
  assert_echo (f, "GET /ws HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\n\r\n",
               "GET /ws HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: websocket\r\n"
               "Connection: upgrade, close\r\n\r\n");
  /* an unrestricted sandbox is not checked */
  assert_passes (f, "127.0.0.4", "GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n");
}

static void
test_http_denied (Fixture *f, gconstpointer data)
{
  BoxNftablesProxyStats stats;

  assert_forbidden (f, "127.0.0.1", "GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n",
                    "egress rules do not allow denied.test on port 80");
  g_assert_true (logged (f, "egress refused: sandbox sb-a http denied.test:80"));
  assert_forbidden (f, "127.0.0.1", "GET / HTTP/1.1\r\nHost: bad.ok.test\r\n\r\n", "bad.ok.test");
  /* allowed on 443 only */
  assert_forbidden (f, "127.0.0.1", "GET / HTTP/1.1\r\nHost: tlsonly.test\r\n\r\n", "tlsonly.test");
  assert_forbidden (f, "127.0.0.1",
                    "GET http://denied.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
                    "another host");
  assert_forbidden (f, "127.0.0.1",
                    "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "CONNECT");
  assert_forbidden (f, "127.0.0.1", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", "no Host");
  /* an allowed Host, but the connection would become HTTP/2 (any :authority) */
  assert_forbidden (f, "127.0.0.1", "GET / HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: h2c\r\n"
                    "Connection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABk\r\n\r\n",
                    "h2c");
  assert_forbidden (f, "127.0.0.1", "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "127.0.0.1");
  g_assert_true (box_nftables_proxy_get_stats (f->proxy, GUEST_A, &stats));
  g_assert_cmpuint (stats.refused, ==, 8);
  g_assert_cmpuint (stats.connections, ==, 0);
}

static void
test_http_unreachable (Fixture *f, gconstpointer data)
{
  int fd = connect_http (f, "127.0.0.3");
  g_autoptr(GString) unknown = NULL;
  g_autoptr(GString) nowhere = NULL;
  BoxNftablesProxyStats stats;
  gboolean reset;

  /* no sandbox: reset at once, without a word (nothing sent, so that the
   * reset cannot be taken by a send) */
  unknown = test_read_all (fd, 1 << 20, &reset);
  close (fd);
  g_assert_cmpuint (unknown->len, ==, 0);
  g_assert_true (reset);
  g_assert_false (box_nftables_proxy_get_stats (f->proxy, 0x7f000003u, &stats));
  /* the node cannot resolve the name: reset too */
  nowhere = exchange (f, "127.0.0.4", "GET / HTTP/1.1\r\nHost: nowhere.test\r\n\r\n", &reset);
  g_assert_cmpuint (nowhere->len, ==, 0);
  g_assert_true (reset);
}

/* Whatever the node's resolution says, the proxy never dials an internal
 * address: by default none of box_nftables_blocked_builtin() (loopback
 * too), here the test's list. */
static void
test_blocked (Fixture *f, gconstpointer data)
{
  static const char *const bad[] = { "10.0.0.0/8", "10.0.0.1/8", NULL };
  g_autoptr(BoxNftablesProxy) fresh = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) answer = NULL;
  g_autoptr(GString) loopback = NULL;
  guint before = test_upstream_accepted (f->echo);
  gboolean reset;
  int fd;

  answer = exchange (f, "127.0.0.1", "GET / HTTP/1.1\r\nHost: rebind.ok.test\r\n\r\n", &reset);
  g_assert_cmpuint (answer->len, ==, 0);
  g_assert_true (reset);
  g_assert_true (logged (f, "egress refused: sandbox sb-a http rebind.ok.test:80"));
  assert_passes (f, "127.0.0.1", "GET / HTTP/1.1\r\nHost: mixed.ok.test\r\n\r\n");
  g_assert_cmpuint (test_upstream_accepted (f->echo), ==, before + 1);
  /* a malformed list changes nothing */
  g_assert_false (box_nftables_proxy_set_blocked (f->proxy, bad, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  assert_passes (f, "127.0.0.1", "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
  /* the built-in default keeps loopback out */
  g_clear_error (&error);
  fresh = box_nftables_proxy_new (f->egress, "127.0.0.1", 0, 0, &error);
  g_assert_no_error (error);
  box_nftables_proxy_set_upstream_ports (fresh, test_upstream_port (f->echo), 1);
  fd = test_connect ("127.0.0.1", box_nftables_proxy_get_port (fresh, FALSE));
  test_send_all (fd, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 38);
  loopback = test_read_all (fd, 1 << 20, &reset);
  close (fd);
  g_assert_cmpuint (loopback->len, ==, 0);
  g_assert_true (reset);
  g_assert_cmpuint (test_upstream_accepted (f->echo), ==, before + 2);
}

static void
tls_exchange (Fixture *f, const char *sni, gboolean expect_ok)
{
  int fd = test_connect ("127.0.0.1", box_nftables_proxy_get_port (f->proxy, TRUE));
  guint before = test_upstream_accepted (f->tls);
  gnutls_session_t session;
  int ret = test_tls_handshake (fd, sni, f->tls, &session);
  char buf[64];

  g_test_message ("TLS to %s: %s", sni != NULL ? sni : "(no name)", gnutls_strerror (ret));
  if (expect_ok) {
    g_assert_cmpint (ret, ==, 0);
    g_assert_cmpint (gnutls_record_send (session, "ping", 4), ==, 4);
    g_assert_cmpint (gnutls_record_recv (session, buf, sizeof buf), ==, 4);
    g_assert_cmpmem (buf, 4, "ping", 4);
    gnutls_bye (session, GNUTLS_SHUT_RDWR);
  } else {
    g_assert_cmpint (ret, <, 0);
    g_assert_cmpuint (test_upstream_accepted (f->tls), ==, before);
  }
  test_tls_free (session);
  close (fd);
}

static void
test_tls (Fixture *f, gconstpointer data)
{
  tls_exchange (f, "allowed.test", TRUE);
  tls_exchange (f, "www.ok.test", TRUE);
  tls_exchange (f, "denied.test", FALSE);
  g_assert_true (logged (f, "egress refused: sandbox sb-a tls denied.test:443"));
  tls_exchange (f, "bad.ok.test", FALSE);
  tls_exchange (f, "httponly.test", FALSE);
  tls_exchange (f, NULL, FALSE);
  g_assert_true (logged (f, "egress refused: sandbox sb-a tls (no name):443"));
}

/* A ClientHello in 1-byte records, sent a few bytes at a time, reaches
 * the upstream (the echo here) byte for byte. */
static void
test_tls_fragmented (Fixture *f, gconstpointer data)
{
  g_autoptr(GByteArray) hello = box_test_client_hello ("www.ok.test");
  g_autoptr(GByteArray) pieces = test_reframe (hello, 1);
  g_autoptr(GString) answer = NULL;
  int fd, one = 1;
  gboolean reset;

  box_nftables_proxy_set_upstream_ports (f->proxy, test_upstream_port (f->echo),
                                         test_upstream_port (f->echo));
  g_assert_cmpuint (pieces->len, <, BOX_NFTABLES_SNI_MAX);
  fd = test_connect ("127.0.0.1", box_nftables_proxy_get_port (f->proxy, TRUE));
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  for (guint pos = 0; pos < pieces->len; pos += 97) {
    test_send_all (fd, pieces->data + pos, MIN (97, pieces->len - pos));
    g_usleep (1000);
  }
  shutdown (fd, SHUT_WR);
  answer = test_read_all (fd, 1 << 20, &reset);
  close (fd);
  g_assert_false (reset);
  g_assert_cmpmem (answer->str, answer->len, pieces->data, pieces->len);
}

/* A client that does not finish its head in time is reset. */
static void
test_slow (Fixture *f, gconstpointer data)
{
  gint64 start;
  int slow, silent;

  box_nftables_proxy_set_limits (f->proxy, 0, 300, 0);
  start = g_get_monotonic_time ();
  slow = connect_http (f, "127.0.0.1");
  silent = test_connect ("127.0.0.1", box_nftables_proxy_get_port (f->proxy, TRUE));
  test_send_all (slow, "GET / HTTP/1.1\r\nHost: allowed.te", 33);
  g_assert_true (test_ends_within (slow, 3000));
  g_assert_true (test_ends_within (silent, 3000));
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 250 * 1000);
  close (slow);
  close (silent);
}

/* An upstream that never completes the handshake (its accept queue is
 * full, so the kernel drops further SYNs): each address gets the connect
 * timeout, then the client is reset. */
static void
test_connect_timeout (Fixture *f, gconstpointer data)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof sa;
  int stuck = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), filler, client;
  gboolean reset;
  g_autoptr(GString) answer = NULL;
  gint64 start;

  g_assert_cmpint (bind (stuck, (struct sockaddr *) &sa, sizeof sa), ==, 0);
  g_assert_cmpint (listen (stuck, 0), ==, 0);
  g_assert_cmpint (getsockname (stuck, (struct sockaddr *) &sa, &len), ==, 0);
  filler = test_connect ("127.0.0.1", ntohs (sa.sin_port));  /* fills the queue */
  box_nftables_proxy_set_upstream_ports (f->proxy, ntohs (sa.sin_port), ntohs (sa.sin_port));
  box_nftables_proxy_set_limits (f->proxy, 0, 0, 300);
  start = g_get_monotonic_time ();
  client = connect_http (f, "127.0.0.1");
  test_send_all (client, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 38);
  answer = test_read_all (client, 1 << 20, &reset);
  /* two addresses, 300 ms each */
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 550 * 1000);
  g_assert_cmpuint (answer->len, ==, 0);
  g_assert_true (reset);
  close (client);
  close (filler);
  close (stuck);
}

static void
wait_connections (Fixture *f, guint32 guest, guint n)
{
  BoxNftablesProxyStats stats = { 0 };

  for (guint i = 0; i < 500; i++) {
    if (box_nftables_proxy_get_stats (f->proxy, guest, &stats) && stats.connections == n)
      return;
    g_usleep (10 * 1000);
  }
  g_assert_cmpuint (stats.connections, ==, n);
}

/* With a cap of 8, sandbox a's flood of silent connections gets its share
 * and no more, and sandbox b still gets through (taking the place of one
 * of a's). */
static void
test_fair_share (Fixture *f, gconstpointer data)
{
  int flood[8], extra;
  guint ended = 0;

  box_nftables_proxy_set_limits (f->proxy, 8, 20000, 0);
  for (guint i = 0; i < G_N_ELEMENTS (flood); i++)
    flood[i] = connect_http (f, "127.0.0.1");
  wait_connections (f, GUEST_A, 8);
  extra = connect_http (f, "127.0.0.1");
  g_assert_true (test_ends_within (extra, 2000));
  close (extra);
  wait_connections (f, GUEST_A, 8);
  assert_passes (f, "127.0.0.2", "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
  wait_connections (f, GUEST_A, 7);
  for (guint i = 0; i < G_N_ELEMENTS (flood); i++) {
    ended += test_ends_within (flood[i], 10) ? 1 : 0;
    close (flood[i]);
  }
  g_assert_cmpuint (ended, ==, 1);
}

/* Sends @text and reads back what the upstream got (@text itself past the
 * head; a head is told to close). */
static void
send_and_expect_echo (int fd, const char *text)
{
  g_autofree char *echo = g_str_has_prefix (text, "GET ") ? closed_head (text) : g_strdup (text);
  char buf[256];
  gsize len = strlen (echo), got = 0;

  test_send_all (fd, text, strlen (text));
  while (got < len) {
    ssize_t n = recv (fd, buf + got, len - got, 0);

    g_assert_cmpint (n, >, 0);
    got += (gsize) n;
  }
  g_assert_cmpmem (buf, got, echo, len);
}

/* New rules close the live connections they no longer allow, and only
 * those; forget closes the rest. */
static void
test_recheck (Fixture *f, gconstpointer data)
{
  static const Rule narrower[] = { { "allowed.test", TRUE, 0 } };
  g_autoptr(BoxEgressPolicy) policy = make_policy (narrower, G_N_ELEMENTS (narrower));
  int kept = connect_http (f, "127.0.0.1");
  int dropped = connect_http (f, "127.0.0.1");
  int other = connect_http (f, "127.0.0.2");
  BoxNftablesProxyStats stats;

  send_and_expect_echo (kept, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
  send_and_expect_echo (dropped, "GET / HTTP/1.1\r\nHost: www.ok.test\r\n\r\n");
  send_and_expect_echo (other, "GET / HTTP/1.1\r\nHost: www.ok.test\r\n\r\n");
  box_nftables_egress_set (f->egress, GUEST_A, "sb-a", policy);
  box_nftables_proxy_recheck (f->proxy, GUEST_A);
  g_assert_true (test_ends_within (dropped, 2000));
  g_assert_true (logged (f, "egress refused: sandbox sb-a http www.ok.test:80"));
  send_and_expect_echo (kept, "more");
  send_and_expect_echo (other, "more");
  box_nftables_proxy_forget (f->proxy, GUEST_A);
  g_assert_true (test_ends_within (kept, 2000));
  send_and_expect_echo (other, "still");
  g_assert_false (box_nftables_proxy_get_stats (f->proxy, GUEST_A, &stats));
  /* the proxy going away resets what is left */
  g_clear_pointer (&f->proxy, box_nftables_proxy_free);
  g_assert_true (test_ends_within (other, 2000));
  close (kept);
  close (dropped);
  close (other);
}

/* Two thousand connections waiting in their head at once, each holding
 * its head buffer: the proxy keeps them all, a bounded amount of memory
 * each, and another sandbox still gets through at once. */
static void
test_many (Fixture *f, gconstpointer data)
{
  guint n = 2000;
  g_autofree int *fds = NULL;
  gsize before, after;
  gint64 start;

  if (!test_raise_fd_limit (3 * n + 100)) {
    g_test_skip ("cannot raise the open file limit for 2000 connections");
    return;
  }
  fds = g_new (int, n);
  before = test_rss_bytes ();
  for (guint i = 0; i < n; i++) {
    fds[i] = connect_http (f, "127.0.0.1");
    test_send_all (fds[i], "GET / HTTP/1.1\r\n", 16);
  }
  wait_connections (f, GUEST_A, n);
  after = test_rss_bytes ();
  g_test_message ("%u connections waiting in their head: %zu bytes each", n,
                  (after - MIN (before, after)) / n);
  g_assert_cmpuint ((after - MIN (before, after)) / n, <, 8 * 1024);
  start = g_get_monotonic_time ();
  assert_passes (f, "127.0.0.2", "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
  g_assert_cmpint (g_get_monotonic_time () - start, <, G_USEC_PER_SEC);
  for (guint i = 0; i < n; i++)
    close (fds[i]);
  wait_connections (f, GUEST_A, 0);
}

/* A thousand spliced connections open at once, each still answering. */
static void
test_many_spliced (Fixture *f, gconstpointer data)
{
  const char *head = "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
  guint n = 1000;
  g_autofree int *fds = NULL;

  if (!test_raise_fd_limit (8 * n + 100)) {
    g_test_skip ("cannot raise the open file limit for 1000 spliced connections");
    return;
  }
  fds = g_new (int, n);
  for (guint i = 0; i < n; i++) {
    fds[i] = connect_http (f, "127.0.0.1");
    send_and_expect_echo (fds[i], head);
  }
  wait_connections (f, GUEST_A, n);
  for (guint i = 0; i < n; i++)
    send_and_expect_echo (fds[i], "again");
  for (guint i = 0; i < n; i++)
    close (fds[i]);
  wait_connections (f, GUEST_A, 0);
}

typedef struct {
  int          fd;
  const guint8 *data;
  gsize        len;
} Sender;

static gpointer
send_thread (gpointer data)
{
  Sender *s = data;

  test_send_all (s->fd, s->data, s->len);
  shutdown (s->fd, SHUT_WR);
  return NULL;
}

/* 48 MiB through the proxy and back (the echo), intact. */
static void
test_large (Fixture *f, gconstpointer data)
{
  const char *head = "PUT /big HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
  g_autofree char *closed = closed_head (head);
  gsize head_len = strlen (head), body_len = 48 * 1024 * 1024;
  gsize len = head_len + body_len, echo_len = strlen (closed) + body_len;
  g_autofree guint8 *payload = g_malloc (len);
  g_autoptr(GRand) rand = g_rand_new_with_seed (16);
  g_autoptr(GString) answer = NULL;
  g_autoptr(GChecksum) sent = g_checksum_new (G_CHECKSUM_SHA256);
  g_autofree char *got_sum = NULL;
  BoxNftablesProxyStats stats;
  Sender sender;
  GThread *thread;
  gboolean reset;

  memcpy (payload, head, head_len);
  for (gsize i = head_len; i < len; i++)
    payload[i] = (guint8) g_rand_int (rand);
  sender = (Sender) { connect_http (f, "127.0.0.1"), payload, len };
  thread = g_thread_new ("sender", send_thread, &sender);
  answer = test_read_all (sender.fd, echo_len + 1, &reset);
  g_thread_join (thread);
  close (sender.fd);
  g_assert_false (reset);
  g_assert_cmpuint (answer->len, ==, echo_len);
  g_checksum_update (sent, (const guchar *) closed, (gssize) strlen (closed));
  g_checksum_update (sent, payload + head_len, (gssize) body_len);
  got_sum = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (guint8 *) answer->str, answer->len);
  g_assert_cmpstr (got_sum, ==, g_checksum_get_string (sent));
  wait_connections (f, GUEST_A, 0);
  g_assert_true (box_nftables_proxy_get_stats (f->proxy, GUEST_A, &stats));
  g_assert_cmpuint (stats.bytes_out, ==, echo_len);
  g_assert_cmpuint (stats.bytes_in, ==, echo_len);
}

typedef struct {
  int      fd;
  gsize    len;
  gboolean ok;
  gint     done;  /* atomic */
} Bulk;

static gpointer
bulk_reader (gpointer data)
{
  Bulk *bulk = data;
  gboolean reset;
  g_autoptr(GString) answer = test_read_all (bulk->fd, bulk->len + 1, &reset);

  bulk->ok = !reset && answer->len == bulk->len;
  g_atomic_int_set (&bulk->done, 1);
  return NULL;
}

/* While one sandbox moves 256 MiB as fast as loopback goes, another's
 * small exchanges keep being answered: a busy connection takes turns. */
static void
test_busy_neighbour (Fixture *f, gconstpointer data)
{
  const char *head = "PUT /big HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
  g_autofree char *closed = closed_head (head);
  gsize body_len = 256 * 1024 * 1024;
  g_autofree guint8 *payload = g_malloc0 (strlen (head) + body_len);
  int small = connect_http (f, "127.0.0.2");
  gint64 worst = 0;
  guint rounds = 0;
  Sender sender;
  Bulk bulk;
  GThread *writer, *reader;

  memcpy (payload, head, strlen (head));
  send_and_expect_echo (small, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
  sender = (Sender) { connect_http (f, "127.0.0.1"), payload, strlen (head) + body_len };
  bulk = (Bulk) { sender.fd, strlen (closed) + body_len, FALSE, 0 };
  writer = g_thread_new ("bulk-writer", send_thread, &sender);
  reader = g_thread_new ("bulk-reader", bulk_reader, &bulk);
  while (!g_atomic_int_get (&bulk.done) && rounds < 200) {
    gint64 start = g_get_monotonic_time ();

    send_and_expect_echo (small, "ping");
    worst = MAX (worst, g_get_monotonic_time () - start);
    rounds++;
    g_usleep (2000);
  }
  g_thread_join (writer);
  g_thread_join (reader);
  close (sender.fd);
  close (small);
  g_test_message ("%u small exchanges during the bulk transfer, the slowest %" G_GINT64_FORMAT
                  " us", rounds, worst);
  g_assert_true (bulk.ok);
  g_assert_cmpuint (rounds, >, 0);
  g_assert_cmpint (worst, <, G_USEC_PER_SEC);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, func) \
  g_test_add ("/nftables/proxy/" path, Fixture, NULL, fixture_set_up, func, fixture_tear_down)
  ADD ("http/allowed", test_http_allowed);
  ADD ("http/denied", test_http_denied);
  ADD ("http/unreachable", test_http_unreachable);
  ADD ("http/blocked", test_blocked);
  ADD ("tls", test_tls);
  ADD ("tls/fragmented", test_tls_fragmented);
  ADD ("slow", test_slow);
  ADD ("connect-timeout", test_connect_timeout);
  ADD ("fair-share", test_fair_share);
  ADD ("recheck", test_recheck);
  ADD ("large", test_large);
  ADD ("many", test_many);
  ADD ("many-spliced", test_many_spliced);
  ADD ("busy-neighbour", test_busy_neighbour);
#undef ADD
  return g_test_run ();
}
