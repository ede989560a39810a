/* broker-host.c: the secrets broker alone, and a GnuTLS client, for
 * bench/broker-bench.  Built by the bench itself against the plugin SDK
 * (libbox-plugin-1) and GnuTLS; not a test.
 *
 *   broker-host serve MODULE DATA_DIR UPSTREAM_PORT HOST [KEY=VALUE...]
 *     loads the broker plugin MODULE (its .so) as boxd does (the module's
 *     box_plugin_query(), an instance with a context whose plugin.NAME
 *     group holds the KEY=VALUEs and whose data dir is DATA_DIR, start()),
 *     gives sandbox "sb-bench" one secret TOKEN (hosts: HOST, inject
 *     null, value "bench-value-...") and listens on 127.0.0.1: each
 *     connection accepted is handed to take_connection() with a new TCP
 *     connection to 127.0.0.1:UPSTREAM_PORT, as the network's proxy does.
 *     Prints "ready PORT CAFILE" (CAFILE: the broker CA, written to
 *     DATA_DIR/broker-ca.pem); on each line "rss" read from stdin prints
 *     its VmRSS in KiB; ends when stdin closes.
 *
 *   broker-host client PORT HOST CAFILE MODE N
 *     a GnuTLS client to 127.0.0.1:PORT, server name HOST, trusting
 *     CAFILE; each request is "GET / HTTP/1.1" with an X-Token header
 *     holding the secret's placeholder, its answer read whole
 *     (Content-Length).  MODE:
 *       keepalive  one connection, N requests one after the other: prints
 *                  "us" and each request's time in microseconds
 *       handshake  N connections one after the other, each a handshake
 *                  and one request: prints "us" and each handshake's time
 *       idle       N connections, one request each, then held open:
 *                  prints "held N" and waits for stdin to close
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <gmodule.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "box.h"

#define PLACEHOLDER "__box_token__"

static int
tcp_connect (guint16 port)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons (port) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;

  sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  if (fd < 0 || connect (fd, (struct sockaddr *) &sa, sizeof sa) != 0)
    g_error ("broker-host: connect to port %u: %s", port, g_strerror (errno));
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static long
rss_kib (void)
{
  g_autofree char *status = NULL;
  const char *p;

  if (!g_file_get_contents ("/proc/self/status", &status, NULL, NULL) ||
      (p = strstr (status, "VmRSS:")) == NULL)
    return -1;
  return strtol (p + 6, NULL, 10);
}

/* ---- serve ------------------------------------------------------------ */

typedef struct {
  BoxBroker *broker;
  int        listen_fd;
  guint16    upstream_port;
  char      *host;
} Serve;

static gpointer
accept_thread (gpointer data)
{
  Serve *s = data;

  for (;;) {
    g_autoptr(GError) error = NULL;
    int fd = accept4 (s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    int up, one = 1;

    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      g_error ("broker-host: accept: %s", g_strerror (errno));
    }
    setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    up = tcp_connect (s->upstream_port);
    g_unix_set_fd_nonblocking (up, TRUE, NULL);
    if (!box_broker_take_connection (s->broker, "sb-bench", s->host, fd, NULL, up, &error))
      g_printerr ("broker-host: take_connection: %s\n", error->message);
  }
  return NULL;
}

static gpointer
stdin_thread (gpointer data)
{
  GMainLoop *loop = data;
  char line[64];

  while (fgets (line, sizeof line, stdin) != NULL) {
    if (g_str_has_prefix (line, "rss")) {
      printf ("%ld\n", rss_kib ());
      fflush (stdout);
    }
  }
  g_main_loop_quit (loop);
  return NULL;
}

static BoxBroker *
load_broker (const char *module_path, const char *data_dir, char **kv, GError **error)
{
  GModule *module = g_module_open (module_path, G_MODULE_BIND_LOCAL);
  BoxPluginQueryFunc query = NULL;
  const BoxPluginInfo *info;
  g_autoptr(GKeyFile) keyfile = g_key_file_new ();
  g_autofree char *group = NULL;
  g_autoptr(BoxPluginContext) context = NULL;
  GObject *plugin;

  if (module == NULL || !g_module_symbol (module, "box_plugin_query", (gpointer *) &query)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s", g_module_error ());
    return NULL;
  }
  g_module_make_resident (module);
  info = query ();
  if (!box_plugin_info_check (info, error))
    return NULL;
  group = g_strdup_printf ("plugin.%s", info->name);
  for (guint i = 0; kv[i] != NULL; i++) {
    g_auto(GStrv) pair = g_strsplit (kv[i], "=", 2);

    if (pair[1] != NULL)
      g_key_file_set_string (keyfile, group, pair[0], pair[1]);
  }
  context = g_object_new (BOX_TYPE_PLUGIN_CONTEXT, "name", info->name, "keyfile", keyfile,
                          "data-dir", data_dir, NULL);
  plugin = g_object_new (info->get_type (), "name", info->name, "context", context, NULL);
  if (!BOX_IS_BROKER (plugin)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s is no broker", info->name);
    return NULL;
  }
  if (!box_plugin_start (BOX_PLUGIN (plugin), NULL, error))
    return NULL;
  return BOX_BROKER (plugin);
}

static int
serve (char **argv, int argc)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr(GPtrArray) secrets = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GBytes) ca = NULL;
  g_autofree char *ca_path = NULL;
  g_autofree char *value = g_strdup_printf ("bench-value-%08x%08x", g_random_int (), g_random_int ());
  char *hosts[2] = { argv[5], NULL };
  BoxSecret secret = { .name = "TOKEN", .project = "bench", .hosts = hosts,
                       .placeholder = PLACEHOLDER };
  BoxBrokeredSecret *brokered = g_new0 (BoxBrokeredSecret, 1);
  g_autoptr(GBytes) value_bytes = g_bytes_new (value, strlen (value));
  struct sockaddr_in sa = { .sin_family = AF_INET };
  socklen_t len = sizeof sa;
  Serve s = { .upstream_port = (guint16) atoi (argv[4]), .host = argv[5] };

  s.broker = load_broker (argv[2], argv[3], argv + 6, &error);
  if (s.broker == NULL)
    g_error ("broker-host: the broker: %s", error->message);
  brokered->secret = &secret;
  brokered->value = value_bytes;
  g_ptr_array_add (secrets, brokered);
  if (!box_broker_set_secrets (s.broker, "sb-bench", secrets, &error))
    g_error ("broker-host: set_secrets: %s", error->message);
  if (!box_broker_wants (s.broker, "sb-bench", s.host))
    g_error ("broker-host: the broker does not want %s", s.host);
  ca = box_broker_get_ca_pem (s.broker, &error);
  ca_path = g_build_filename (argv[3], "broker-ca.pem", NULL);
  if (ca == NULL || !g_file_set_contents (ca_path, g_bytes_get_data (ca, NULL), g_bytes_get_size (ca),
                                          &error))
    g_error ("broker-host: the CA: %s", error->message);
  sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  s.listen_fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (bind (s.listen_fd, (struct sockaddr *) &sa, sizeof sa) != 0 || listen (s.listen_fd, 1024) != 0 ||
      getsockname (s.listen_fd, (struct sockaddr *) &sa, &len) != 0)
    g_error ("broker-host: listen: %s", g_strerror (errno));
  g_thread_unref (g_thread_new ("accept", accept_thread, &s));
  g_thread_unref (g_thread_new ("stdin", stdin_thread, loop));
  printf ("ready %u %s\n", ntohs (sa.sin_port), ca_path);
  fflush (stdout);
  g_main_loop_run (loop);
  _exit (0);   /* the accept thread never returns; the process ends here */
}

/* ---- client ----------------------------------------------------------- */

typedef struct {
  gnutls_session_t session;
  int              fd;
} Conn;

static void
conn_open (Conn *c, guint16 port, const char *host, gnutls_certificate_credentials_t cred)
{
  int r;

  c->fd = tcp_connect (port);
  gnutls_init (&c->session, GNUTLS_CLIENT);
  gnutls_server_name_set (c->session, GNUTLS_NAME_DNS, host, strlen (host));
  gnutls_set_default_priority (c->session);
  gnutls_credentials_set (c->session, GNUTLS_CRD_CERTIFICATE, cred);
  gnutls_session_set_verify_cert (c->session, host, 0);
  gnutls_transport_set_int (c->session, c->fd);
  do
    r = gnutls_handshake (c->session);
  while (r < 0 && !gnutls_error_is_fatal (r));
  if (r < 0)
    g_error ("broker-host: handshake: %s", gnutls_strerror (r));
}

static void
conn_close (Conn *c)
{
  gnutls_bye (c->session, GNUTLS_SHUT_WR);
  gnutls_deinit (c->session);
  close (c->fd);
}

/* One request and its whole answer (a status 200 with Content-Length). */
static void
conn_request (Conn *c, const char *host)
{
  g_autofree char *req = g_strdup_printf ("GET / HTTP/1.1\r\nHost: %s\r\nX-Token: %s\r\n\r\n", host,
                                          PLACEHOLDER);
  char buf[16384];
  gsize have = 0;
  gssize want = -1;
  ssize_t r;

  if (gnutls_record_send (c->session, req, strlen (req)) != (ssize_t) strlen (req))
    g_error ("broker-host: send failed");
  for (;;) {
    r = gnutls_record_recv (c->session, buf + have, sizeof buf - 1 - have);
    if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
      continue;
    if (r <= 0)
      g_error ("broker-host: the answer ended early: %s", r < 0 ? gnutls_strerror ((int) r) : "EOF");
    have += (gsize) r;
    buf[have] = '\0';
    if (want < 0) {
      const char *end = strstr (buf, "\r\n\r\n");
      const char *cl = g_strstr_len (buf, -1, "Content-Length:");

      if (end == NULL)
        continue;
      if (!g_str_has_prefix (buf, "HTTP/1.1 200") || cl == NULL || cl > end)
        g_error ("broker-host: unexpected answer: %.200s", buf);
      want = (end + 4 - buf) + strtol (cl + 15, NULL, 10);
    }
    if ((gssize) have >= want)
      return;
  }
}

static int
client (char **argv)
{
  guint16 port = (guint16) atoi (argv[2]);
  const char *host = argv[3], *mode = argv[5];
  guint n = (guint) atoi (argv[6]);
  gnutls_certificate_credentials_t cred;
  Conn c;

  gnutls_certificate_allocate_credentials (&cred);
  if (gnutls_certificate_set_x509_trust_file (cred, argv[4], GNUTLS_X509_FMT_PEM) <= 0)
    g_error ("broker-host: no CA in %s", argv[4]);
  if (g_str_equal (mode, "keepalive")) {
    conn_open (&c, port, host, cred);
    printf ("us");
    for (guint i = 0; i < n; i++) {
      gint64 t = g_get_monotonic_time ();

      conn_request (&c, host);
      printf (" %" G_GINT64_FORMAT, g_get_monotonic_time () - t);
    }
    printf ("\n");
    conn_close (&c);
  } else if (g_str_equal (mode, "handshake")) {
    printf ("us");
    for (guint i = 0; i < n; i++) {
      gint64 t = g_get_monotonic_time ();

      conn_open (&c, port, host, cred);
      printf (" %" G_GINT64_FORMAT, g_get_monotonic_time () - t);
      conn_request (&c, host);
      conn_close (&c);
    }
    printf ("\n");
  } else if (g_str_equal (mode, "idle")) {
    Conn *all = g_new0 (Conn, n);
    char line[16];

    for (guint i = 0; i < n; i++) {
      conn_open (&all[i], port, host, cred);
      conn_request (&all[i], host);
    }
    printf ("held %u\n", n);
    fflush (stdout);
    while (fgets (line, sizeof line, stdin) != NULL)
      ;
    for (guint i = 0; i < n; i++)
      conn_close (&all[i]);
    g_free (all);
  } else {
    g_error ("broker-host: unknown mode %s", mode);
  }
  fflush (stdout);
  gnutls_certificate_free_credentials (cred);
  return 0;
}

int
main (int argc, char **argv)
{
  if (argc >= 6 && g_str_equal (argv[1], "serve"))
    return serve (argv, argc);
  if (argc == 7 && g_str_equal (argv[1], "client"))
    return client (argv);
  g_printerr ("usage: broker-host serve MODULE DATA_DIR UPSTREAM_PORT HOST [KEY=VALUE...]\n"
              "       broker-host client PORT HOST CAFILE keepalive|handshake|idle N\n");
  return 2;
}
