/* broker-test-pump.c: whole brokered connections over real TLS on
 * socketpairs: a GnuTLS client trusting the broker's CA -> take_connection()
 * -> a GnuTLS upstream server whose certificate comes from a test CA given
 * as ca_bundle. */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker-test.h"

/* ---- whole connections ------------------------------------------------------ */

typedef struct {
  int              fd;
  gnutls_certificate_credentials_t credentials;
  gboolean         reflect;        /* answer with the request head it got */
  gboolean         at_eof;         /* answer once, at the client's end */
  GMutex           lock;
  GString         *received;       /* every request head */
  char            *alpn;           /* what was negotiated */
  int              handshake_rc;
  gint             sent;           /* bytes of big answers sent (atomic) */
  GThread         *thread;
} Server;

#define BIG (4 * 1024 * 1024)

/* A 4 MiB answer, sent in records as the socket takes them. */
static gboolean
send_big (Server *server, gnutls_session_t session)
{
  g_autofree char *head = g_strdup_printf ("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BIG);
  g_autofree char *chunk = g_malloc (16384);

  memset (chunk, 'x', 16384);
  if (gnutls_record_send (session, head, strlen (head)) < 0)
    return FALSE;
  for (int done = 0; done < BIG; done += 16384) {
    if (gnutls_record_send (session, chunk, 16384) != 16384)
      return FALSE;
    g_atomic_int_add (&server->sent, 16384);
  }
  return TRUE;
}

static gpointer
server_thread (gpointer data)
{
  Server *server = data;
  static const gnutls_datum_t protos[] = { { (unsigned char *) "h2", 2 },
                                           { (unsigned char *) "http/1.1", 8 } };
  gnutls_session_t session;
  gnutls_datum_t alpn = { NULL, 0 };
  g_autoptr(GString) buffer = g_string_new (NULL);
  int rc;

  gnutls_init (&session, GNUTLS_SERVER);
  gnutls_set_default_priority (session);
  gnutls_credentials_set (session, GNUTLS_CRD_CERTIFICATE, server->credentials);
  gnutls_alpn_set_protocols (session, protos, 2, 0);
  gnutls_transport_set_int (session, server->fd);
  do
    rc = gnutls_handshake (session);
  while (rc < 0 && !gnutls_error_is_fatal (rc));
  g_mutex_lock (&server->lock);
  server->handshake_rc = rc;
  if (rc == 0 && gnutls_alpn_get_selected_protocol (session, &alpn) == 0)
    server->alpn = g_strndup ((const char *) alpn.data, alpn.size);
  g_mutex_unlock (&server->lock);
  while (rc == 0) {
    char buf[4096];
    ssize_t n = gnutls_record_recv (session, buf, sizeof buf);
    const char *end;

    if (n <= 0) {
      if (n == 0 && server->at_eof) {   /* a close_notify: the answer comes now */
        static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nafter eof";

        if (gnutls_record_send (session, answer, strlen (answer)) > 0)
          gnutls_bye (session, GNUTLS_SHUT_WR);
      }
      break;
    }
    g_string_append_len (buffer, buf, n);
    while ((end = strstr (buffer->str, "\r\n\r\n")) != NULL) {
      gsize head_len = (gsize) (end - buffer->str) + 4;
      g_autofree char *head = g_strndup (buffer->str, head_len);
      const char *body = server->reflect ? head : "ok";
      g_autofree char *answer = g_strdup_printf ("HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
                                                 strlen (body), body);
      g_mutex_lock (&server->lock);
      g_string_append (server->received, head);
      g_mutex_unlock (&server->lock);
      g_string_erase (buffer, 0, (gssize) head_len);
      if (server->at_eof)
        continue;
      if (g_str_has_prefix (head, "GET /big ")) {
        if (!send_big (server, session))
          break;
        continue;
      }
      if (gnutls_record_send (session, answer, strlen (answer)) < 0)
        break;
    }
  }
  gnutls_deinit (session);
  close (server->fd);
  return NULL;
}

/* A server for @name with a leaf of @ca; @at_eof: it answers only once
 * the client closed its side. */
static Server *
server_start (BoxBrokerCa *ca, const char *name, gboolean reflect, gboolean at_eof, int fd)
{
  Server *server = g_new0 (Server, 1);
  g_autoptr(BoxBrokerLeaf) leaf = box_broker_ca_leaf (ca, name, NULL);
  g_autoptr(GBytes) leaf_pem = box_broker_leaf_get_pem (leaf);

  /* the leaf's credentials belong to the leaf; it stays in the CA's cache
   * for the test's length */
  server->credentials = box_broker_leaf_get_credentials (leaf);
  server->fd = fd;
  server->reflect = reflect;
  server->at_eof = at_eof;
  server->received = g_string_new (NULL);
  server->handshake_rc = 1;
  g_mutex_init (&server->lock);
  server->thread = g_thread_new ("upstream", server_thread, server);
  return server;
}

static Server *
server_new (BoxBrokerCa *ca, const char *name, gboolean reflect, int fd)
{
  return server_start (ca, name, reflect, FALSE, fd);
}

static char *
server_received (Server *server)
{
  char *copy;

  g_mutex_lock (&server->lock);
  copy = g_strdup (server->received->str);
  g_mutex_unlock (&server->lock);
  return copy;
}

static void
server_free (Server *server)
{
  if (server->thread != NULL)
    g_thread_join (server->thread);
  g_string_free (server->received, TRUE);
  g_free (server->alpn);
  g_mutex_clear (&server->lock);
  g_free (server);
}

typedef struct {
  int              fd;
  gnutls_session_t session;
  gnutls_certificate_credentials_t trust;
  int              handshake_rc;
} Client;

static gpointer
client_handshake (gpointer data)
{
  Client *client = data;
  int rc;

  do
    rc = gnutls_handshake (client->session);
  while (rc < 0 && !gnutls_error_is_fatal (rc));
  client->handshake_rc = rc;
  return NULL;
}

static void
set_nonblocking (int fd)
{
  g_assert_cmpint (fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK), ==, 0);
}

/* A client of @host through the broker to an upstream served by @server
 * (made with the upstream end): the handshake is done (or failed: see
 * handshake_rc) when it returns. */
static Client *
client_connect (Fixture *f, const char *host, gboolean offer_h2, int upstream_fd)
{
  static const gnutls_datum_t protos[] = { { (unsigned char *) "h2", 2 },
                                           { (unsigned char *) "http/1.1", 8 } };
  Client *client = g_new0 (Client, 1);
  g_autoptr(GBytes) ca_pem = box_broker_get_ca_pem (BOX_BROKER (f->plugin), NULL);
  gnutls_datum_t datum = { (unsigned char *) g_bytes_get_data (ca_pem, NULL), (unsigned) g_bytes_get_size (ca_pem) };
  struct timeval tv = { .tv_sec = 10 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) head = NULL;
  struct pollfd pfd;
  GThread *thread;
  guint8 buf[64];
  ssize_t n;
  int pair[2];

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), ==, 0);
  client->fd = pair[0];
  setsockopt (client->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  gnutls_certificate_allocate_credentials (&client->trust);
  g_assert_cmpint (gnutls_certificate_set_x509_trust_mem (client->trust, &datum, GNUTLS_X509_FMT_PEM), ==, 1);
  gnutls_init (&client->session, GNUTLS_CLIENT);
  gnutls_set_default_priority (client->session);
  gnutls_credentials_set (client->session, GNUTLS_CRD_CERTIFICATE, client->trust);
  if (!g_hostname_is_ip_address (host))
    gnutls_server_name_set (client->session, GNUTLS_NAME_DNS, host, strlen (host));
  gnutls_session_set_verify_cert (client->session, host, 0);
  gnutls_alpn_set_protocols (client->session, offer_h2 ? protos : protos + 1, offer_h2 ? 2 : 1, 0);
  gnutls_transport_set_int (client->session, client->fd);
  thread = g_thread_new ("client", client_handshake, client);

  /* the network's part: read the start of the ClientHello, hand over */
  pfd.fd = pair[1];
  pfd.events = POLLIN;
  g_assert_cmpint (poll (&pfd, 1, 10000), ==, 1);
  n = recv (pair[1], buf, sizeof buf, 0);
  g_assert_cmpint (n, >, 0);
  head = g_bytes_new (buf, (gsize) n);
  set_nonblocking (pair[1]);
  set_nonblocking (upstream_fd);
  g_assert_true (box_broker_take_connection (BOX_BROKER (f->plugin), SANDBOX, host, pair[1], head,
                                             upstream_fd, &error));
  g_assert_no_error (error);
  g_thread_join (thread);
  return client;
}

static void
client_free (Client *client)
{
  gnutls_deinit (client->session);
  gnutls_certificate_free_credentials (client->trust);
  close (client->fd);
  g_free (client);
}

/* Sends @request and reads one answer (by its Content-Length); NULL when
 * the connection closes first. */
static char *
client_ask (Client *client, const char *request)
{
  g_autoptr(GString) answer = g_string_new (NULL);
  const char *end;

  g_assert_cmpint (gnutls_record_send (client->session, request, strlen (request)), ==, (gssize) strlen (request));
  for (;;) {
    char buf[4096];
    ssize_t n;
    if ((end = strstr (answer->str, "\r\n\r\n")) != NULL) {
      const char *cl = strstr (answer->str, "Content-Length: ");
      gsize want = cl != NULL ? (gsize) g_ascii_strtoull (cl + 16, NULL, 10) : 0;
      if (answer->len >= (gsize) (end - answer->str) + 4 + want)
        return g_string_free (g_steal_pointer (&answer), FALSE);
    }
    n = gnutls_record_recv (client->session, buf, sizeof buf);
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
      continue;
    if (n <= 0)
      return answer->len > 0 ? g_string_free (g_steal_pointer (&answer), FALSE) : NULL;
    g_string_append_len (answer, buf, n);
  }
}

static int
socket_pair (int *other)
{
  int pair[2];

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), ==, 0);
  *other = pair[1];
  return pair[0];
}

static void
wait_for_count (Fixture *f, guint count)
{
  for (guint i = 0; i < 1000 && box_broker_pump_count (box_broker_plugin_get_pump (f->plugin)) != count; i++)
    g_usleep (10000);
  g_assert_cmpuint (box_broker_pump_count (box_broker_plugin_get_pump (f->plugin)), ==, count);
}

/* A server for @leaf_name under @ca, and a client of HOST through the
 * broker to it. */
static Client *
connect_through (Fixture *f, BoxBrokerCa *ca, const char *leaf_name, gboolean reflect, gboolean offer_h2,
                 Server **server)
{
  int server_fd, upstream = socket_pair (&server_fd);

  *server = server_new (ca, leaf_name, reflect, server_fd);
  return client_connect (f, HOST, offer_h2, upstream);
}

static void
finish (Fixture *f, Client *client, Server *server)
{
  client_free (client);
  server_free (server);
  wait_for_count (f, 0);
}

/* SANDBOX has a secret for HOST, and a client connects through the broker
 * to a server under the test CA. */
static Client *
brokered (Fixture *f, gboolean reflect, gboolean offer_h2, Server **server)
{
  const char *hosts[] = { HOST, NULL };
  g_autoptr(BoxSecret) secret = broker_test_secret (hosts, PLACEHOLDER, NULL, NULL);

  broker_test_set_one (f->plugin, secret, VALUE);
  return connect_through (f, f->upstream_ca, HOST, reflect, offer_h2, server);
}

#define GET(path) "GET " path " HTTP/1.1\r\nHost: " HOST "\r\nX-Key: " PLACEHOLDER "\r\n\r\n"

static void
test_pump_replace (Fixture *f, gconstpointer data)
{
  g_autofree char *answer = NULL, *received = NULL;
  gnutls_datum_t alpn;
  Server *server;
  Client *client = brokered (f, FALSE, TRUE, &server);

  g_assert_cmpint (client->handshake_rc, ==, 0);
  /* h2 was offered, http/1.1 was chosen; upstream was offered only http/1.1 */
  g_assert_cmpint (gnutls_alpn_get_selected_protocol (client->session, &alpn), ==, 0);
  g_assert_cmpmem (alpn.data, alpn.size, "http/1.1", 8);
  answer = client_ask (client, GET ("/v1/" PLACEHOLDER));
  g_assert_nonnull (answer);
  g_assert_true (g_str_has_prefix (answer, "HTTP/1.1 200"));
  g_assert_null (strstr (answer, VALUE));
  received = server_received (server);
  g_assert_nonnull (strstr (received, "GET /v1/" VALUE " HTTP/1.1"));
  g_assert_nonnull (strstr (received, "X-Key: " VALUE "\r\n"));
  g_assert_null (strstr (received, PLACEHOLDER));
  g_assert_cmpstr (server->alpn, ==, "http/1.1");
  finish (f, client, server);
}

static void
test_pump_reflect (Fixture *f, gconstpointer data)
{
  g_autofree char *answer = NULL;
  Server *server;
  Client *client = brokered (f, TRUE, FALSE, &server);

  g_assert_cmpint (client->handshake_rc, ==, 0);
  answer = client_ask (client, GET ("/"));
  g_assert_nonnull (answer);
  g_assert_true (g_str_has_prefix (answer, "HTTP/1.1 502"));
  g_assert_nonnull (strstr (answer, "{\"error\":{\"code\":\"broker_failed\""));
  g_assert_null (strstr (answer, VALUE));
  finish (f, client, server);
}

/* A secret for an IP address: the leaf has it as an iPAddress, the
 * upstream is verified for it. */
static void
test_pump_ip (Fixture *f, gconstpointer data)
{
  const char *hosts[] = { "198.51.100.7", NULL };
  g_autoptr(BoxSecret) secret = broker_test_secret (hosts, PLACEHOLDER, NULL, NULL);
  g_autofree char *answer = NULL, *received = NULL;
  Server *server;
  Client *client;
  int server_fd, upstream = socket_pair (&server_fd);

  broker_test_set_one (f->plugin, secret, VALUE);
  server = server_new (f->upstream_ca, "198.51.100.7", FALSE, server_fd);
  client = client_connect (f, "198.51.100.7", FALSE, upstream);
  g_assert_cmpint (client->handshake_rc, ==, 0);
  answer = client_ask (client, "GET /" PLACEHOLDER " HTTP/1.1\r\nHost: 198.51.100.7\r\n\r\n");
  g_assert_nonnull (answer);
  received = server_received (server);
  g_assert_nonnull (strstr (received, "GET /" VALUE " HTTP/1.1"));
  finish (f, client, server);
}

/* inject mode on a host entry with a path prefix: the header is set on
 * the prefix's paths only, replacing the sandbox's own. */
static void
test_pump_inject (Fixture *f, gconstpointer data)
{
  const char *hosts[] = { HOST "/v1", NULL };
  g_autoptr(BoxSecret) secret = broker_test_secret (hosts, PLACEHOLDER, "Authorization", "Bearer {value}");
  g_autofree char *first = NULL, *second = NULL, *received = NULL;
  Server *server;
  Client *client;

  broker_test_set_one (f->plugin, secret, VALUE);
  client = connect_through (f, f->upstream_ca, HOST, FALSE, FALSE, &server);
  first = client_ask (client, "GET /v1/models HTTP/1.1\r\nHost: " HOST "\r\nAuthorization: Bearer mine\r\n\r\n");
  second = client_ask (client, "GET /v2/models HTTP/1.1\r\nHost: " HOST "\r\nAuthorization: Bearer mine\r\n\r\n");
  g_assert_true (first != NULL && second != NULL);
  received = server_received (server);
  g_assert_nonnull (strstr (received, "Authorization: Bearer " VALUE "\r\n"));
  g_assert_cmpint (g_strstr_len (received, -1, "Bearer mine") - received, >, strstr (received, "/v2/") - received);
  g_assert_null (strstr (strstr (received, "/v2/"), VALUE));
  finish (f, client, server);
}

/* Many connections one after the other, each with its own request. */
static void
test_pump_many (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < 32; i++) {
    g_autofree char *answer = NULL, *received = NULL;
    Server *server;
    Client *client = brokered (f, FALSE, FALSE, &server);

    answer = client_ask (client, GET ("/many"));
    g_assert_true (answer != NULL && g_str_has_prefix (answer, "HTTP/1.1 200"));
    received = server_received (server);
    g_assert_nonnull (strstr (received, "X-Key: " VALUE "\r\n"));
    finish (f, client, server);
  }
  /* one leaf served them all */
  g_assert_cmpuint (box_broker_ca_cached (box_broker_plugin_get_ca (f->plugin)), ==, 1);
}

/* Eight connections open at once on the one thread, asked in turns. */
static void
test_pump_concurrent (Fixture *f, gconstpointer data)
{
  Server *servers[8];
  Client *clients[8];

  for (guint i = 0; i < G_N_ELEMENTS (clients); i++)
    clients[i] = brokered (f, FALSE, FALSE, &servers[i]);
  g_assert_cmpuint (box_broker_pump_count (box_broker_plugin_get_pump (f->plugin)), ==, 8);
  for (guint round = 0; round < 3; round++) {
    for (guint i = 0; i < G_N_ELEMENTS (clients); i++) {
      g_autofree char *answer = client_ask (clients[i], GET ("/turn"));
      g_assert_true (answer != NULL && g_str_has_prefix (answer, "HTTP/1.1 200"));
    }
  }
  for (guint i = 0; i < G_N_ELEMENTS (clients); i++) {
    g_autofree char *received = server_received (servers[i]);
    g_auto(GStrv) turns = g_strsplit (received, "GET /turn ", -1);

    g_assert_cmpuint (g_strv_length (turns), ==, 4);   /* three requests each */
    g_assert_nonnull (strstr (received, "X-Key: " VALUE "\r\n"));
    client_free (clients[i]);
    server_free (servers[i]);
  }
  wait_for_count (f, 0);
}

/* The upstream's certificate from another CA, or for another name: the
 * client's handshake fails and no request reaches the upstream. */
static void
test_pump_refused (Fixture *f, gconstpointer data)
{
  const char *hosts[] = { HOST, NULL };
  g_autoptr(BoxSecret) secret = broker_test_secret (hosts, PLACEHOLDER, NULL, NULL);
  g_autofree char *other_key = g_build_filename (f->dir, "other.key", NULL);
  g_autofree char *other_pem = g_build_filename (f->dir, "other.pem", NULL);
  g_autoptr(BoxBrokerCa) other = box_broker_ca_open (other_key, other_pem, NULL);

  broker_test_set_one (f->plugin, secret, VALUE);
  for (guint i = 0; i < 2; i++) {
    g_autofree char *received = NULL;
    Server *server;
    Client *client = connect_through (f, i == 0 ? other : f->upstream_ca, i == 0 ? HOST : "wrong.test",
                                      FALSE, FALSE, &server);

    g_assert_cmpint (client->handshake_rc, <, 0);
    client_free (client);
    g_thread_join (server->thread);
    server->thread = NULL;
    received = server_received (server);
    g_assert_cmpstr (received, ==, "");
    g_assert_cmpint (server->handshake_rc, <, 0);
    server_free (server);
  }
  wait_for_count (f, 0);
}

static void
test_pump_bad_request (Fixture *f, gconstpointer data)
{
  g_autofree char *answer = NULL;
  Server *server;
  Client *client = brokered (f, FALSE, FALSE, &server);

  answer = client_ask (client, "BAD REQUEST LINE\r\n\r\n");
  g_assert_nonnull (answer);
  g_assert_true (g_str_has_prefix (answer, "HTTP/1.1 400"));
  g_assert_nonnull (strstr (answer, "\"invalid\""));
  finish (f, client, server);
}

/* A new value reaches a kept-alive connection; no secret left for the host
 * closes it. */
static void
test_pump_new_value (Fixture *f, gconstpointer data)
{
  const char *hosts[] = { HOST, NULL };
  g_autoptr(BoxSecret) secret = broker_test_secret (hosts, PLACEHOLDER, NULL, NULL);
  g_autofree char *first = NULL, *second = NULL, *received = NULL;
  Server *server;
  Client *client = brokered (f, FALSE, FALSE, &server);
  char buf[64];

  first = client_ask (client, GET ("/1"));
  g_assert_nonnull (first);
  broker_test_set_one (f->plugin, secret, "sk-live-ROTATED");
  second = client_ask (client, GET ("/2"));
  g_assert_nonnull (second);
  received = server_received (server);
  g_assert_nonnull (strstr (received, "GET /1 HTTP/1.1\r\nHost: " HOST "\r\nX-Key: " VALUE "\r\n"));
  g_assert_nonnull (strstr (received, "GET /2 HTTP/1.1\r\nHost: " HOST "\r\nX-Key: sk-live-ROTATED\r\n"));

  broker_test_set_one (f->plugin, NULL, NULL);
  g_assert_cmpint (gnutls_record_recv (client->session, buf, sizeof buf), <=, 0);
  finish (f, client, server);
}

/* A big answer to a client that does not read: the server is held back
 * (the broker buffers a bounded amount), and everything arrives once the
 * client reads. */
static void
test_pump_backpressure (Fixture *f, gconstpointer data)
{
  const char *request = "GET /big HTTP/1.1\r\nHost: " HOST "\r\n\r\n";
  g_autofree char *buf = g_malloc (65536);
  gsize got = 0, x = 0;
  Server *server;
  Client *client = brokered (f, FALSE, FALSE, &server);
  int sent = 0;

  g_assert_cmpint (gnutls_record_send (client->session, request, strlen (request)), >, 0);
  /* until the server is held back: nothing more sent for 300 ms */
  for (int last = -1, still = 0, i = 0; still < 3 && i < 200; i++) {
    g_usleep (G_USEC_PER_SEC / 10);
    sent = g_atomic_int_get (&server->sent);
    still = sent == last && sent > 0 ? still + 1 : 0;
    last = sent;
  }
  /* two socket buffers and the broker's 256 KiB (+ a record) at most */
  g_test_message ("sent before the client read: %d", sent);
  g_assert_cmpint (sent, <, 2 * 1024 * 1024);
  g_assert_cmpint (sent, >, 0);
  while (x < BIG) {
    ssize_t n = gnutls_record_recv (client->session, buf, 65536);
    g_assert_cmpint (n, >, 0);
    got += (gsize) n;
    for (ssize_t i = 0; i < n; i++)
      x += buf[i] == 'x';
  }
  g_assert_cmpuint (x, ==, BIG);
  g_assert_cmpint (g_atomic_int_get (&server->sent), ==, BIG);
  finish (f, client, server);
}

/* An idle connection is closed after the idle time. */
static void
test_pump_idle (Fixture *f, gconstpointer data)
{
  g_autofree char *answer = NULL;
  Server *server;
  Client *client;
  char buf[64];

  box_broker_pump_set_timeouts (box_broker_plugin_get_pump (f->plugin), 10000, 300);
  client = brokered (f, FALSE, FALSE, &server);
  answer = client_ask (client, GET ("/"));
  g_assert_nonnull (answer);
  g_assert_cmpuint (box_broker_pump_count (box_broker_plugin_get_pump (f->plugin)), ==, 1);
  /* the broker's close reaches the client within the test's 10 s */
  g_assert_cmpint (gnutls_record_recv (client->session, buf, sizeof buf), <=, 0);
  finish (f, client, server);
}

/* Whether the broker closed the other end of @peer within @ms. */
static gboolean
peer_closed (int peer, int ms)
{
  struct pollfd pfd = { .fd = peer, .events = POLLIN };
  char byte;

  return poll (&pfd, 1, ms) == 1 && recv (peer, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* At most max_connections (4 here), each sandbox its fair share: one that
 * took them all gives its oldest up to newcomers; a stalled handshake
 * times out. */
static void
test_pump_cap (Fixture *f, gconstpointer data)
{
  BoxBroker *broker = BOX_BROKER (f->plugin);
  struct { const char *sandbox; gboolean taken; } plan[] = {
    { "a", TRUE }, { "a", TRUE }, { "a", TRUE }, { "a", TRUE },   /* the only holder */
    { "b", TRUE }, { "b", TRUE },   /* each in place of a's oldest */
    { "b", FALSE }, { "a", FALSE },   /* two holders: each one's share is 2 */
    { "c", TRUE }, { "d", TRUE },   /* shares of 1: from whoever holds 2 */
    { "e", FALSE },   /* all hold 1: nobody to take from */
  };
  int peers[G_N_ELEMENTS (plan) * 2];

  box_broker_pump_set_timeouts (box_broker_plugin_get_pump (f->plugin), 3000, 3000);
  for (guint i = 0; i < G_N_ELEMENTS (plan); i++) {
    g_autoptr(GError) error = NULL;
    int client = socket_pair (&peers[2 * i]), upstream = socket_pair (&peers[2 * i + 1]);
    gboolean taken;

    set_nonblocking (client);
    set_nonblocking (upstream);
    taken = box_broker_take_connection (broker, plan[i].sandbox, HOST, client, NULL, upstream, &error);
    g_assert_cmpint (taken, ==, plan[i].taken);
    if (!taken)
      g_assert_error (error, BOX_ERROR, BOX_ERROR_CAPACITY);
    g_assert_cmpuint (box_broker_pump_count (box_broker_plugin_get_pump (f->plugin)), <=, 4);
    if (i == 5) {   /* b's two took a's two oldest */
      g_assert_true (peer_closed (peers[0], 5000));
      g_assert_true (peer_closed (peers[2], 5000));
      for (guint j = 2; j < 6; j++)
        g_assert_false (peer_closed (peers[2 * j], 100));
    }
  }
  g_assert_cmpuint (box_broker_pump_count (box_broker_plugin_get_pump (f->plugin)), ==, 4);
  /* nobody answers the upstream handshakes: all go after 3 s */
  wait_for_count (f, 0);
  for (guint i = 0; i < G_N_ELEMENTS (peers); i++)
    close (peers[i]);
}

/* The client half-closes after its request, with a close_notify or a bare
 * FIN: the upstream sees a half-close (its close_notify) and its answer,
 * sent only then, still reaches the client whole. */
static void
test_pump_half_close (Fixture *f, gconstpointer data)
{
  const char *hosts[] = { HOST, NULL };
  g_autoptr(BoxSecret) secret = broker_test_secret (hosts, PLACEHOLDER, NULL, NULL);

  broker_test_set_one (f->plugin, secret, VALUE);
  for (guint bare = 0; bare < 2; bare++) {
    const char *request = GET ("/half");
    g_autoptr(GString) answer = g_string_new (NULL);
    g_autofree char *received = NULL;
    int server_fd, upstream = socket_pair (&server_fd);
    Server *server = server_start (f->upstream_ca, HOST, FALSE, TRUE, server_fd);
    Client *client = client_connect (f, HOST, FALSE, upstream);

    g_assert_cmpint (client->handshake_rc, ==, 0);
    g_assert_cmpint (gnutls_record_send (client->session, request, strlen (request)), ==,
                     (gssize) strlen (request));
    if (bare)
      g_assert_cmpint (shutdown (client->fd, SHUT_WR), ==, 0);
    else
      g_assert_cmpint (gnutls_bye (client->session, GNUTLS_SHUT_WR), ==, 0);
    for (;;) {
      char buf[4096];
      ssize_t n = gnutls_record_recv (client->session, buf, sizeof buf);

      if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
        continue;
      if (n <= 0) {
        break;
      }
      g_string_append_len (answer, buf, n);
    }
    g_assert_cmpstr (answer->str, ==, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nafter eof");
    received = server_received (server);
    g_assert_nonnull (strstr (received, "X-Key: " VALUE "\r\n"));
    finish (f, client, server);
  }
}

/* The network may hand a connection over while boxd stops the broker:
 * before, during and after the stop, the broker either takes it or closes
 * both descriptors and says why; none is left open. */
static int
count_fds (void)
{
  g_autoptr(GDir) dir = g_dir_open ("/proc/self/fd", 0, NULL);
  int n = 0;

  g_assert_nonnull (dir);
  while (g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

/* Whether the other end of @peer is closed (what it sent may be unread). */
static gboolean
hung_up (int peer, int ms)
{
  struct pollfd pfd = { .fd = peer, .events = POLLIN };

  return poll (&pfd, 1, ms) == 1 && (pfd.revents & POLLHUP) != 0;
}

typedef struct {
  BoxBroker *broker;
  gint       taken;       /* atomic */
  gint       refused;
  GPtrArray *peers;       /* int, as pointers: the test's ends */
} Racer;

static gpointer
racer_thread (gpointer data)
{
  Racer *racer = data;

  for (guint i = 0; i < 100000 && racer->refused < 50; i++) {
    g_autoptr(GError) error = NULL;
    int client_peer, upstream_peer;
    int client = socket_pair (&client_peer), upstream = socket_pair (&upstream_peer);

    set_nonblocking (client);
    set_nonblocking (upstream);
    if (box_broker_take_connection (racer->broker, SANDBOX, HOST, client, NULL, upstream, &error)) {
      g_atomic_int_inc (&racer->taken);
    } else {
      g_assert_nonnull (error);
      /* closed at once: the test's ends see their peers gone */
      g_assert_true (hung_up (client_peer, 0) && hung_up (upstream_peer, 0));
      racer->refused++;
    }
    g_ptr_array_add (racer->peers, GINT_TO_POINTER (client_peer));
    g_ptr_array_add (racer->peers, GINT_TO_POINTER (upstream_peer));
  }
  return NULL;
}

static void
test_pump_stop_race (Fixture *f, gconstpointer data)
{
  Racer racer = { BOX_BROKER (f->plugin), 0, 0, g_ptr_array_new () };
  int before = count_fds ();
  GThread *thread;

  box_broker_pump_set_timeouts (box_broker_plugin_get_pump (f->plugin), 60000, 60000);
  thread = g_thread_new ("racer", racer_thread, &racer);
  while (g_atomic_int_get (&racer.taken) < 50)
    g_usleep (1000);
  box_plugin_stop (BOX_PLUGIN (f->plugin));
  g_thread_join (thread);
  g_assert_cmpint (racer.taken, >=, 50);
  g_assert_cmpint (racer.refused, ==, 50);
  /* what the broker took, the stop closed */
  for (guint i = 0; i < racer.peers->len; i++) {
    int peer = GPOINTER_TO_INT (racer.peers->pdata[i]);

    g_assert_true (hung_up (peer, 1000));
    close (peer);
  }
  /* the stop also closed the pump's own (its epoll and eventfd) */
  g_assert_cmpint (count_fds (), <=, before);
  g_ptr_array_unref (racer.peers);
}

void
broker_test_add_pump (void)
{
#define ADD(path, fn, data) \
  g_test_add ("/broker/" path, Fixture, GUINT_TO_POINTER (data), broker_test_set_up, fn, broker_test_tear_down)
  ADD ("pump/replace", test_pump_replace, 0);
  ADD ("pump/reflect", test_pump_reflect, 0);
  ADD ("pump/ip", test_pump_ip, 0);
  ADD ("pump/inject", test_pump_inject, 0);
  ADD ("pump/many", test_pump_many, 0);
  ADD ("pump/concurrent", test_pump_concurrent, 0);
  ADD ("pump/refused", test_pump_refused, 0);
  ADD ("pump/bad-request", test_pump_bad_request, 0);
  ADD ("pump/new-value", test_pump_new_value, 0);
  ADD ("pump/backpressure", test_pump_backpressure, 0);
  ADD ("pump/idle", test_pump_idle, 0);
  ADD ("pump/cap", test_pump_cap, 4);
  ADD ("pump/half-close", test_pump_half_close, 0);
  ADD ("pump/stop-race", test_pump_stop_race, 0);
#undef ADD
}
