/* nftables-netns-dns.c: the sandboxes' resolver under pressure, in the
 * test's private network namespace (nftables-netns-test.c runs these):
 * one sandbox flooding it with UDP queries or holding TCP connections
 * does not crowd another out, answers with internal addresses never reach
 * a sandbox, and its port cannot be taken by a local user while boxd is
 * down.
 *
 * The fairness cases run the forwarder on its own on loopback, with the
 * test as its upstream (a UDP socket and a TCP listener on one port) and
 * two "sandboxes" at 127.0.0.2 (the flooder) and 127.0.0.3.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* accept4 */
#endif
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <glib/gstdio.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nftables-netns-test.h"

#define FAIR_PORT   10056
#define FLOODER     0x7f000002
#define NEIGHBOUR   0x7f000003
#define WAIT_MS     3000

/* A query "<label>.test A IN" with @id into @buf; its length. */
static gsize
make_query (guint8 *buf, guint16 id, const char *label)
{
  gsize n = strlen (label), off = 12;

  memset (buf, 0, 12);
  buf[0] = id >> 8;
  buf[1] = id & 0xff;
  buf[2] = 0x01;   /* RD */
  buf[5] = 1;      /* one question */
  buf[off++] = (guint8) n;
  memcpy (buf + off, label, n);
  off += n;
  memcpy (buf + off, "\4test\0\0\1\0\1", 10);
  return off + 10;
}

/* The upstream's answer to @query: one A record, 93.184.216.34. */
static gsize
make_answer (guint8 *buf, const guint8 *query, gsize len)
{
  static const guint8 rr[] = { 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 93, 184, 216, 34 };

  memcpy (buf, query, len);
  buf[2] |= 0x80;
  buf[3] = 0x80;
  buf[7] = 1;
  memcpy (buf + len, rr, sizeof rr);
  return len + sizeof rr;
}

static int
bound_socket (int type, guint32 address, guint16 port)
{
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons (port),
                             .sin_addr.s_addr = htonl (address) };
  int one = 1;
  int fd = socket (AF_INET, type | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &sin, sizeof sin), ==, 0);
  return fd;
}

static guint16
local_port (int fd)
{
  struct sockaddr_in sin;
  socklen_t len = sizeof sin;

  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &sin, &len), ==, 0);
  return ntohs (sin.sin_port);
}

static gboolean
readable (int fd, int timeout_ms)
{
  struct pollfd pfd = { fd, POLLIN, 0 };

  return poll (&pfd, 1, timeout_ms) == 1;
}

static void
send_to_forwarder (int fd, const guint8 *buf, gsize len)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (FAIR_PORT),
                            .sin_addr.s_addr = htonl (0x7f000001) };

  g_assert_cmpint (sendto (fd, buf, len, 0, (struct sockaddr *) &to, sizeof to), ==, (gssize) len);
}

static BoxNftablesDns *
fair_forwarder (guint16 upstream_port)
{
  g_autofree char *upstream = g_strdup_printf ("127.0.0.1:%u", upstream_port);
  const char *upstreams[] = { upstream, NULL };
  g_autoptr(GError) error = NULL;
  BoxNftablesDns *dns = box_nftables_dns_new (FAIR_PORT, upstreams, NULL, &error);

  g_assert_no_error (error);
  box_nftables_dns_allow (dns, FLOODER);
  box_nftables_dns_allow (dns, NEIGHBOUR);
  return dns;
}

/* UDP: the flooder gets at most its share of the pending queries (half,
 * with two sandboxes), and the neighbour's query still goes upstream and
 * its answer comes back. */
void
dns_fair_udp (void)
{
  g_autoptr(BoxNftablesDns) dns = NULL;
  int upstream = bound_socket (SOCK_DGRAM, 0x7f000001, 0);
  int flooder = bound_socket (SOCK_DGRAM, FLOODER, 0);
  int neighbour = bound_socket (SOCK_DGRAM, NEIGHBOUR, 0);
  guint8 buf[512], answer[600];
  guint flooded = 0;
  gboolean forwarded = FALSE;
  gint64 deadline;
  gsize len;

  dns = fair_forwarder (local_port (upstream));
  /* 1200 queries, more than the whole bound (1024); the upstream never
   * answers them, so each stays pending for seconds */
  for (guint i = 0; i < 1200; i++) {
    len = make_query (buf, (guint16) i, "flood");
    send_to_forwarder (flooder, buf, len);
    if (i % 20 == 19) {
      g_usleep (2000);
      while (readable (upstream, 0) && recv (upstream, buf, sizeof buf, 0) > 0)
        flooded++;
    }
  }
  while (readable (upstream, 300) && recv (upstream, buf, sizeof buf, 0) > 0)
    flooded++;
  g_test_message ("the flooder got %u of its 1200 queries forwarded", flooded);
  g_assert_cmpuint (flooded, >=, 256);    /* it did fill its share */
  g_assert_cmpuint (flooded, <=, 512);    /* and no more */

  len = make_query (buf, 0xbeef, "fair");
  send_to_forwarder (neighbour, buf, len);
  deadline = g_get_monotonic_time () + WAIT_MS * 1000;
  while (!forwarded && g_get_monotonic_time () < deadline) {
    struct sockaddr_in from;
    socklen_t from_len = sizeof from;
    gssize n;

    if (!readable (upstream, 100))
      continue;
    n = recvfrom (upstream, buf, sizeof buf, 0, (struct sockaddr *) &from, &from_len);
    if (n < 12 || buf[0] != 0xbe || buf[1] != 0xef)
      continue;   /* one of the flood's */
    forwarded = TRUE;
    len = make_answer (answer, buf, (gsize) n);
    g_assert_cmpint (sendto (upstream, answer, len, 0, (struct sockaddr *) &from, from_len), ==,
                     (gssize) len);
  }
  g_assert_true (forwarded);
  g_assert_true (readable (neighbour, WAIT_MS));
  g_assert_cmpint (recv (neighbour, answer, sizeof answer, 0), >, 12);
  g_assert_cmphex (answer[0], ==, 0xbe);
  g_assert_cmphex (answer[1], ==, 0xef);
  g_assert_cmphex (answer[3] & 0x0f, ==, 0);   /* NOERROR */
  g_assert_cmphex (answer[7], ==, 1);          /* the answer */
  close (upstream);
  close (flooder);
  close (neighbour);
}

/* TCP: the flooder holds at most its share of the worker threads (half,
 * with two sandboxes); its other connections are closed at once, and the
 * neighbour is served while the flooder's connections sit idle. */
void
dns_fair_tcp (void)
{
  g_autoptr(BoxNftablesDns) dns = NULL;
  int udp = bound_socket (SOCK_DGRAM, 0x7f000001, 0);
  int listener = bound_socket (SOCK_STREAM, 0x7f000001, local_port (udp));
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (FAIR_PORT),
                            .sin_addr.s_addr = htonl (0x7f000001) };
  int held[8], neighbour, conn;
  guint closed = 0;
  guint8 buf[600], answer[600];
  guint8 prefix[2];
  gsize len;

  g_assert_cmpint (listen (listener, 16), ==, 0);
  dns = fair_forwarder (local_port (udp));
  for (guint i = 0; i < G_N_ELEMENTS (held); i++) {
    held[i] = bound_socket (SOCK_STREAM, FLOODER, 0);
    g_assert_cmpint (connect (held[i], (struct sockaddr *) &to, sizeof to), ==, 0);
  }
  g_usleep (300000);
  for (guint i = 0; i < G_N_ELEMENTS (held); i++) {
    if (readable (held[i], 0) && recv (held[i], buf, sizeof buf, MSG_DONTWAIT) <= 0)
      closed++;
  }
  g_test_message ("%u of the flooder's 8 idle connections were closed", closed);
  g_assert_cmpuint (closed, ==, 4);

  neighbour = bound_socket (SOCK_STREAM, NEIGHBOUR, 0);
  g_assert_cmpint (connect (neighbour, (struct sockaddr *) &to, sizeof to), ==, 0);
  len = make_query (buf + 2, 0xcafe, "fair");
  buf[0] = 0;
  buf[1] = (guint8) len;
  g_assert_cmpint (send (neighbour, buf, len + 2, 0), ==, (gssize) len + 2);

  /* served now, not after the flooder's connections time out (10 s) */
  g_assert_true (readable (listener, WAIT_MS));
  conn = accept4 (listener, NULL, NULL, SOCK_CLOEXEC);
  g_assert_cmpint (conn, >=, 0);
  g_assert_true (readable (conn, WAIT_MS));
  g_assert_cmpint (recv (conn, prefix, 2, MSG_WAITALL), ==, 2);
  g_assert_cmpint (prefix[0], ==, 0);
  g_assert_cmpint (recv (conn, buf, prefix[1], MSG_WAITALL), ==, prefix[1]);
  len = make_answer (answer + 2, buf, prefix[1]);
  answer[0] = 0;
  answer[1] = (guint8) len;
  g_assert_cmpint (send (conn, answer, len + 2, 0), ==, (gssize) len + 2);

  g_assert_true (readable (neighbour, WAIT_MS));
  g_assert_cmpint (recv (neighbour, prefix, 2, MSG_WAITALL), ==, 2);
  g_assert_cmpint (recv (neighbour, buf, prefix[1], MSG_WAITALL), ==, prefix[1]);
  g_assert_cmphex (buf[0], ==, 0xca);
  g_assert_cmphex (buf[1], ==, 0xfe);
  g_assert_cmphex (buf[3] & 0x0f, ==, 0);
  close (conn);
  close (neighbour);
  for (guint i = 0; i < G_N_ELEMENTS (held); i++)
    close (held[i]);
  close (listener);
  close (udp);
}

/* TCP connections that arrive as the resolver stops are all closed by
 * box_nftables_dns_free(), whoever took them last: the listener, the
 * queue or a worker thread.  Each round first has a connection served
 * and ended, so that a pool thread waits for the next one: the late
 * connection handed to it as the pool stops was once dropped by GLib,
 * never served nor freed, its socket left open. */
void
dns_tcp_stop (void)
{
  int udp = bound_socket (SOCK_DGRAM, 0x7f000001, 0);
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (FAIR_PORT),
                            .sin_addr.s_addr = htonl (0x7f000001) };
  guint8 buf[64];

  for (guint round = 0; round < 200; round++) {
    BoxNftablesDns *dns = fair_forwarder (local_port (udp));
    int served = bound_socket (SOCK_STREAM, NEIGHBOUR, 0);
    int late = bound_socket (SOCK_STREAM, NEIGHBOUR, 0);
    gint64 start;

    g_assert_cmpint (connect (served, (struct sockaddr *) &to, sizeof to), ==, 0);
    g_assert_cmpint (shutdown (served, SHUT_WR), ==, 0);
    g_assert_true (readable (served, WAIT_MS));   /* its worker ended it */
    g_assert_cmpint (recv (served, buf, sizeof buf, 0), ==, 0);
    close (served);
    g_usleep (1000);   /* the worker back in the pool, waiting */

    g_assert_cmpint (connect (late, (struct sockaddr *) &to, sizeof to), ==, 0);
    g_usleep ((round % 8) * 50);   /* now and then just as it is accepted */
    start = g_get_monotonic_time ();
    box_nftables_dns_free (dns);
    g_assert_cmpint (g_get_monotonic_time () - start, <, G_USEC_PER_SEC);
    /* closed by the free: nothing else would close it within WAIT_MS */
    if (!readable (late, WAIT_MS))
      g_error ("round %u: a connection taken as the resolver stopped was left open", round);
    g_assert_cmpint (recv (late, buf, sizeof buf, 0), <=, 0);
    close (late);
  }
  close (udp);
}

/* Whether an unprivileged user (nobody) can bind UDP and TCP @port. */
static gboolean
nobody_can_bind (guint16 port)
{
  pid_t pid = fork ();
  int status = 0;

  g_assert_cmpint (pid, >=, 0);
  if (pid == 0) {
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons (port) };
    int udp, tcp;

    if (setgroups (0, NULL) != 0 || setgid (65534) != 0 || setuid (65534) != 0)
      _exit (3);
    udp = socket (AF_INET, SOCK_DGRAM, 0);
    tcp = socket (AF_INET, SOCK_STREAM, 0);
    if (bind (udp, (struct sockaddr *) &sin, sizeof sin) == 0 ||
        bind (tcp, (struct sockaddr *) &sin, sizeof sin) == 0)
      _exit (0);
    _exit (errno == EACCES ? 1 : 2);
  }
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), !=, 3);
  return WEXITSTATUS (status) == 0;
}

/* With the plugin stopped (boxd down: the table and its redirect stay),
 * no local user can take the resolver's port; the control: an
 * unprivileged port can be taken.  A dns_port above the privileged range
 * is refused at start. */
void
dns_port_privileged (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxPluginContext) context = NULL;
  g_autoptr(BoxNftablesPlugin) other = NULL;
  BoxConfig *config = box_engine_get_config (world.engine);
  guint64 port;

  g_assert_true (g_ascii_string_to_unsigned (BOX_NFTABLES_DNS_PORT_DEFAULT, 10, 1, 1023, &port,
                                             NULL));
  g_assert_false (nobody_can_bind ((guint16) port));
  g_assert_true (nobody_can_bind (10053));

  g_key_file_set_string (config->keyfile, "plugin.nftables", "dns_port", "10053");
  context = box_engine_new_plugin_context (world.engine, "nftables");
  other = g_object_new (BOX_TYPE_NFTABLES_PLUGIN, "name", "nftables", "context", context, NULL);
  g_assert_false (box_plugin_start (BOX_PLUGIN (other), NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "dns_port"));
  g_assert_nonnull (strstr (error->message, "privileged"));
  g_key_file_remove_key (config->keyfile, "plugin.nftables", "dns_port", NULL);

  /* while here: the NFLOG group is 16 bits, refused before anything */
  g_clear_error (&error);
  g_clear_object (&other);
  g_key_file_set_string (config->keyfile, "plugin.nftables", "log_group", "65536");
  other = g_object_new (BOX_TYPE_NFTABLES_PLUGIN, "name", "nftables", "context", context, NULL);
  g_assert_false (box_plugin_start (BOX_PLUGIN (other), NULL, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "log_group"));
  g_key_file_remove_key (config->keyfile, "plugin.nftables", "log_group", NULL);
}

/* The default upstreams: /etc/resolv.conf's without loopback ones; a
 * local stub alone is replaced by its own upstreams when the machine has
 * them, else used and named as such (the status and the start log). */
void
dns_default_upstreams (void)
{
  g_autofree char *dir = g_dir_make_tmp ("box-resolv-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "resolv.conf", NULL);
  g_autofree char *stub_contents = NULL;
  g_auto(GStrv) behind = NULL;
  g_autoptr(GError) error = NULL;
  gboolean from_stub = FALSE;

  g_assert_true (g_file_set_contents (path, "nameserver 127.0.0.1\nnameserver 192.0.2.53\n", -1,
                                      NULL));
  {
    g_autoptr(BoxNftablesDns) dns = box_nftables_dns_new (10059, NULL, path, &error);
    g_autofree char *text = NULL;
    g_autofree char *expected = g_strdup_printf ("192.0.2.53:53 (from %s)", path);

    g_assert_no_error (error);
    text = box_nftables_dns_describe_upstreams (dns);
    g_assert_cmpstr (text, ==, expected);
  }
  /* only a local stub */
  g_assert_true (g_file_set_contents (path, "nameserver 127.0.0.53\n", -1, NULL));
  g_file_get_contents (BOX_NFTABLES_DNS_STUB_RESOLV_CONF, &stub_contents, NULL, NULL);
  behind = box_nftables_dns_pick_upstreams ("nameserver 127.0.0.53\n", stub_contents, &from_stub);
  {
    g_autoptr(BoxNftablesDns) dns = box_nftables_dns_new (10059, NULL, path, &error);
    g_autofree char *text = NULL;

    g_assert_no_error (error);
    text = box_nftables_dns_describe_upstreams (dns);
    g_test_message ("behind a local stub: %s", text);
    if (from_stub) {
      g_assert_true (g_str_has_prefix (text, behind[0]));
      g_assert_nonnull (strstr (text, "has only a local stub"));
    } else {
      g_assert_true (g_str_has_prefix (text, "127.0.0.53:53 (from "));
      g_assert_nonnull (strstr (text, "a resolver on this node"));
    }
  }
  g_unlink (path);
  g_rmdir (dir);
}
