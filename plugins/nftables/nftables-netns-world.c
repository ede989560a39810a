/* nftables-netns-world.c: namespaces, processes, probes and the plugin for
 * nftables-netns-test.c; see nftables-netns-test.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* setns, unshare */
#endif
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "nftables-netns-test.h"

World world;

/* ---- processes and namespaces ---- */

static void
child_enter (gpointer user_data)
{
  const char *path = user_data;
  int fd;

  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (path == NULL)
    return;
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns (fd, CLONE_NEWNET) != 0)
    _exit (126);
}

static void
child_unshare (gpointer user_data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (unshare (CLONE_NEWNET) != 0)
    _exit (126);
}

/* Runs @argv in @ns (NULL: the host); the exit status, output in @out. */
int
run_argv (Ns *ns, const char *const *argv, char **out)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *stdout_buf = NULL;
  g_autofree char *stderr_buf = NULL;
  int status = -1;

  if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, child_enter,
                     ns != NULL ? ns->path : NULL, &stdout_buf, &stderr_buf, &status, &error))
    g_error ("cannot run %s: %s", argv[0], error->message);
  if (stderr_buf != NULL && stderr_buf[0] != '\0')
    g_test_message ("%s: %s", argv[0], g_strchomp (stderr_buf));
  if (out != NULL)
    *out = g_steal_pointer (&stdout_buf);
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

/* Runs a shell-free command line split on spaces; asserts success. */
void
must (Ns *ns, const char *cmdline)
{
  g_auto(GStrv) argv = g_strsplit (cmdline, " ", -1);
  int status = run_argv (ns, (const char *const *) argv, NULL);

  if (status != 0)
    g_error ("\"%s\" failed (%d)", cmdline, status);
}

char *
output_of (Ns *ns, const char *cmdline)
{
  g_auto(GStrv) argv = g_strsplit (cmdline, " ", -1);
  char *out = NULL;

  g_assert_cmpint (run_argv (ns, (const char *const *) argv, &out), ==, 0);
  return out;
}

static gboolean
same_ns (const char *path)
{
  g_autofree char *mine = g_file_read_link ("/proc/self/ns/net", NULL);
  g_autofree char *theirs = g_file_read_link (path, NULL);

  return theirs == NULL || g_strcmp0 (mine, theirs) == 0;
}

Ns *
ns_new (void)
{
  const char *argv[] = { "sleep", "3600", NULL };
  g_autoptr(GError) error = NULL;
  Ns *ns = g_new0 (Ns, 1);
  guint i;

  if (!g_spawn_async (NULL, (char **) argv, NULL,
                      G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD, child_unshare, NULL,
                      &ns->pid, &error))
    g_error ("cannot start a namespace holder: %s", error->message);
  ns->path = g_strdup_printf ("/proc/%d/ns/net", ns->pid);
  for (i = 0; i < 500 && same_ns (ns->path); i++)
    g_usleep (10000);
  g_assert_false (same_ns (ns->path));
  must (ns, "ip link set lo up");
  return ns;
}

void
kill_and_reap (GPid pid)
{
  kill (pid, SIGKILL);
  waitpid (pid, NULL, 0);
}

void
ns_free (Ns *ns)
{
  if (ns == NULL)
    return;
  kill_and_reap (ns->pid);
  g_free (ns->path);
  g_free (ns);
}

void
wait_for_file (const char *path)
{
  for (guint i = 0; i < 1000 && !g_file_test (path, G_FILE_TEST_EXISTS); i++)
    g_usleep (10000);
  g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
}

/* A helper server in @ns; returns once it listens. */
void
serve (Ns *ns, const char *const *args, const char *ready)
{
  const char *argv[8] = { "python3", HELPER };
  g_autoptr(GError) error = NULL;
  GPid pid;
  guint i;

  for (i = 0; args[i] != NULL && i + 2 < G_N_ELEMENTS (argv) - 1; i++)
    argv[i + 2] = args[i];
  if (!g_spawn_async (NULL, (char **) argv, NULL,
                      G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD, child_enter,
                      ns != NULL ? ns->path : NULL, &pid, &error))
    g_error ("cannot start the helper: %s", error->message);
  g_array_append_val (world.servers, pid);
  wait_for_file (ready);
}

void
serve_tcp (Ns *ns, const char *bind, const char *port, const char *name)
{
  g_autofree char *log = g_build_filename (world.tmp, name, NULL);
  g_autofree char *ready = g_strconcat (log, ".ready", NULL);
  const char *args[] = { "serve", bind, port, log, NULL };

  serve (ns, args, ready);
}

/* A non-blocking IPv4 socket of @type made in @ns (NULL: the host): the
 * calling thread enters @ns for the socket() call only, since a socket
 * keeps the namespace it was made in. */
static int
socket_in_proto (Ns *ns, int type, int protocol)
{
  int home, fd, saved;

  if (ns == NULL)
    return socket (AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol);
  home = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  fd = open (ns->path, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (home, >=, 0);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (setns (fd, CLONE_NEWNET), ==, 0);
  close (fd);
  fd = socket (AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol);
  saved = errno;
  g_assert_cmpint (setns (home, CLONE_NEWNET), ==, 0);
  close (home);
  errno = saved;
  return fd;
}

static int
socket_in (Ns *ns, int type)
{
  return socket_in_proto (ns, type, 0);
}

/* Waits up to @seconds for @events on @fd; FALSE on timeout. */
static gboolean
wait_fd (int fd, short events, int seconds)
{
  struct pollfd p = { .fd = fd, .events = events };
  int n;

  do
    n = poll (&p, 1, seconds * 1000);
  while (n < 0 && errno == EINTR);
  return n > 0;
}

/* Connects from @ns to @host:@port, sends @request, and returns what came
 * back until the peer closed or reset (at most 4 KiB, 3 s per step);
 * *reset tells whether it ended with a reset. */
char *
exchange (Ns *ns, const char *host, const char *port, const char *request, gboolean *reset)
{
  GString *got = exchange_bytes (ns, host, port, request, strlen (request), FALSE, reset);

  return g_string_free (got, FALSE);
}

GString *
exchange_bytes (Ns *ns, const char *host, const char *port, const void *data, gsize len,
                gboolean half_close, gboolean *reset)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (atoi (port)) };
  GString *got = g_string_new (NULL);
  int fd = socket_in (ns, SOCK_STREAM);
  char buf[1024];

  *reset = FALSE;
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (inet_pton (AF_INET, host, &to.sin_addr), ==, 1);
  if (connect (fd, (struct sockaddr *) &to, sizeof to) != 0)
    g_assert_cmpint (errno, ==, EINPROGRESS);
  g_assert_true (wait_fd (fd, POLLOUT, 3));
  g_assert_cmpint (send (fd, data, len, MSG_NOSIGNAL), ==, (gssize) len);
  if (half_close)
    (void) shutdown (fd, SHUT_WR);   /* fails once the peer has reset */
  while (got->len < 4096 && wait_fd (fd, POLLIN, 3)) {
    ssize_t n = recv (fd, buf, sizeof buf, 0);

    if (n <= 0) {
      *reset = n < 0 && errno == ECONNRESET;
      break;
    }
    g_string_append_len (got, buf, n);
  }
  close (fd);
  return got;
}

/* The helper's "connect" in this process (no interpreter started per
 * probe): connect from @ns to @host:@port, from @src if given, and read
 * the server's greeting, @seconds for each step.  REACHED, DROPPED (timed
 * out), 3 (refused) or 1 (another error, or not the greeting).  A probe
 * that wants an answer waits PROBE_ANSWER_S (an answer comes at once on a
 * quiet host; the sanitizer build beside VMs may be starved for seconds),
 * one that wants a drop PROBE_DROP_S. */
int
probe (Ns *ns, const char *host, const char *port, const char *src, int seconds)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (atoi (port)) };
  struct sockaddr_in from = { .sin_family = AF_INET };
  char greeting[16] = "";
  socklen_t len = sizeof (int);
  int fd, err = 0, status = 1;
  ssize_t n = 0;

  g_assert_cmpint (inet_pton (AF_INET, host, &to.sin_addr), ==, 1);
  fd = socket_in (ns, SOCK_STREAM);
  g_assert_cmpint (fd, >=, 0);
  if (src != NULL) {
    g_assert_cmpint (inet_pton (AF_INET, src, &from.sin_addr), ==, 1);
    if (bind (fd, (struct sockaddr *) &from, sizeof from) != 0)
      goto out;
  }
  if (connect (fd, (struct sockaddr *) &to, sizeof to) != 0 && errno != EINPROGRESS) {
    status = errno == ECONNREFUSED ? 3 : 1;
    goto out;
  }
  if (!wait_fd (fd, POLLOUT, seconds)) {
    status = DROPPED;
    goto out;
  }
  getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    status = err == ECONNREFUSED ? 3 : 1;
    goto out;
  }
  if (!wait_fd (fd, POLLIN, seconds)) {
    status = DROPPED;
    goto out;
  }
  n = recv (fd, greeting, sizeof greeting - 1, 0);
  status = n == 6 && memcmp (greeting, "hello\n", 6) == 0 ? REACHED : 1;
out:
  if (status != REACHED)
    g_test_message ("probe %s:%s from %s: %s", host, port, src ? src : "-",
                    status == DROPPED ? "timed out" : status == 3 ? "refused"
                    : err != 0 ? g_strerror (err) : "an error, or not the greeting");
  close (fd);
  return status;
}

void
assert_reaches (Ns *ns, const char *host, const char *port)
{
  int status = probe (ns, host, port, NULL, PROBE_ANSWER_S);

  if (status != REACHED)
    g_error ("expected to reach %s:%s, got %d", host, port, status);
}

void
assert_dropped (Ns *ns, const char *host, const char *port)
{
  int status = probe (ns, host, port, NULL, PROBE_DROP_S);

  if (status != DROPPED)
    g_error ("expected %s:%s to be dropped, got %d", host, port, status);
}

int
open_held (Ns *ns, const char *host, const char *port)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (atoi (port)) };
  char greeting[8] = "";
  int fd = socket_in (ns, SOCK_STREAM);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (inet_pton (AF_INET, host, &to.sin_addr), ==, 1);
  if (connect (fd, (struct sockaddr *) &to, sizeof to) != 0)
    g_assert_cmpint (errno, ==, EINPROGRESS);
  g_assert_true (wait_fd (fd, POLLIN, 2));
  g_assert_cmpint (recv (fd, greeting, sizeof greeting - 1, 0), ==, 6);
  g_assert_cmpstr (greeting, ==, "hello\n");
  return fd;
}

int
held_echo (int fd)
{
  char buf[8] = "";
  ssize_t n;

  if (send (fd, "ping\n", 5, MSG_NOSIGNAL) != 5)
    return errno;
  if (!wait_fd (fd, POLLIN, 2))
    return ETIMEDOUT;
  n = recv (fd, buf, sizeof buf - 1, 0);
  if (n < 0)
    return errno;
  return n == 5 && memcmp (buf, "ping\n", 5) == 0 ? 0 : EPIPE;
}

/* An ICMP echo from @ns (raw socket, root) to 203.0.113.1: whether a
 * reply came within a second. */
gboolean
icmp_echo (Ns *ns)
{
  static const guint8 echo[8] = { 8, 0, 0xf7, 0xfe, 0, 1, 0, 0 };   /* type 8, id 1 */
  struct sockaddr_in to = { .sin_family = AF_INET };
  guint8 reply[128];
  int fd = socket_in_proto (ns, SOCK_RAW, IPPROTO_ICMP);
  gboolean got = FALSE;

  g_assert_cmpint (fd, >=, 0);
  inet_pton (AF_INET, "203.0.113.1", &to.sin_addr);
  g_assert_cmpint (sendto (fd, echo, sizeof echo, 0, (struct sockaddr *) &to, sizeof to), ==, 8);
  while (!got && wait_fd (fd, POLLIN, 1)) {
    ssize_t n = recv (fd, reply, sizeof reply, 0);
    /* the IPv4 header, then the ICMP type: 0 is an echo reply */
    got = n >= 28 && reply[(reply[0] & 0x0f) * 4] == 0;
  }
  close (fd);
  return got;
}

char *
last_peer (const char *name)
{
  g_autofree char *log = g_build_filename (world.tmp, name, NULL);
  g_autofree char *contents = NULL;
  g_auto(GStrv) lines = NULL;
  guint n;

  g_assert_true (g_file_get_contents (log, &contents, NULL, NULL));
  lines = g_strsplit (g_strchomp (contents), "\n", -1);
  n = g_strv_length (lines);
  g_assert_cmpuint (n, >, 0);
  return g_strdup (lines[n - 1]);
}

/* Reads exactly @len bytes within @seconds per read; FALSE otherwise. */
static gboolean
read_exact (int fd, guint8 *buf, gsize len, int seconds, gboolean *timed_out)
{
  gsize got = 0;

  while (got < len) {
    ssize_t n;

    if (!wait_fd (fd, POLLIN, seconds)) {
      *timed_out = TRUE;
      return FALSE;
    }
    n = recv (fd, buf + got, len - got, 0);
    if (n <= 0)
      return FALSE;
    got += n;
  }
  return TRUE;
}

/* The first A record's address in the DNS message @msg, or NULL. */
static char *
first_a (const guint8 *msg, gsize len)
{
  gsize off = 12;
  guint answers;

  if (len < 12)
    return NULL;
  answers = msg[6] << 8 | msg[7];
  while (off < len && msg[off] != 0)   /* the question's name */
    off += 1 + msg[off];
  off += 5;
  for (guint i = 0; i < answers && off < len; i++) {
    guint type, rdlen;

    if ((msg[off] & 0xC0) == 0xC0) {
      off += 2;
    } else {
      while (off < len && msg[off] != 0)
        off += 1 + msg[off];
      off += 1;
    }
    if (off + 10 > len)
      return NULL;
    type = msg[off] << 8 | msg[off + 1];
    rdlen = msg[off + 8] << 8 | msg[off + 9];
    off += 10;
    if (off + rdlen > len)
      return NULL;
    if (type == 1 && rdlen == 4)
      return g_strdup_printf ("%u.%u.%u.%u", msg[off], msg[off + 1], msg[off + 2], msg[off + 3]);
    off += rdlen;
  }
  return NULL;
}

/* The helper's "dns-query" in this process: an A query for @name to
 * @server:@port over @proto ("udp" or "tcp") from @ns, @seconds per step.
 * Returns the first A answer (*status 0), or what went wrong: "timed out"
 * (*status DROPPED), "no answer (rcode N)", "wrong id" or an error (1). */
char *
dns_query_within (Ns *ns, const char *server, const char *port, const char *name,
                  const char *proto, int seconds, int *status)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (atoi (port)) };
  gboolean tcp = g_str_equal (proto, "tcp"), timed_out = FALSE;
  g_autoptr(GByteArray) query = g_byte_array_new ();
  g_auto(GStrv) labels = g_strsplit (name, ".", -1);
  static const guint8 header[] = { 0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 };
  static const guint8 a_in[] = { 0, 0, 1, 0, 1 };   /* root label, type A, class IN */
  guint8 reply[4096], prefix[2];
  gsize reply_len = 0;
  char *answer = NULL;
  int fd;

  g_assert_cmpint (inet_pton (AF_INET, server, &to.sin_addr), ==, 1);
  if (tcp)
    g_byte_array_append (query, (const guint8 *) "\0\0", 2);   /* the length, below */
  g_byte_array_append (query, header, sizeof header);
  for (guint i = 0; labels[i] != NULL; i++) {
    guint8 n = strlen (labels[i]);

    if (n == 0)
      continue;
    g_byte_array_append (query, &n, 1);
    g_byte_array_append (query, (const guint8 *) labels[i], n);
  }
  g_byte_array_append (query, a_in, sizeof a_in);
  if (tcp) {
    query->data[0] = (query->len - 2) >> 8;
    query->data[1] = (query->len - 2) & 0xFF;
  }

  fd = socket_in (ns, tcp ? SOCK_STREAM : SOCK_DGRAM);
  g_assert_cmpint (fd, >=, 0);
  *status = 1;
  if (connect (fd, (struct sockaddr *) &to, sizeof to) != 0 && errno != EINPROGRESS)
    goto out;
  if (tcp) {
    int err = 0;
    socklen_t len = sizeof err;

    if (!wait_fd (fd, POLLOUT, seconds)) {
      timed_out = TRUE;
      goto out;
    }
    getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0)
      goto out;
  }
  if (send (fd, query->data, query->len, MSG_NOSIGNAL) != (ssize_t) query->len)
    goto out;
  if (tcp) {
    if (!read_exact (fd, prefix, 2, seconds, &timed_out))
      goto out;
    reply_len = prefix[0] << 8 | prefix[1];
    if (!read_exact (fd, reply, reply_len, seconds, &timed_out))
      goto out;
  } else {
    ssize_t n;

    if (!wait_fd (fd, POLLIN, seconds)) {
      timed_out = TRUE;
      goto out;
    }
    n = recv (fd, reply, sizeof reply, 0);
    if (n < 0)
      goto out;
    reply_len = n;
  }
  if (reply_len < 4 || reply[0] != 0x42 || reply[1] != 0x42) {
    answer = g_strdup ("wrong id");
  } else if ((answer = first_a (reply, reply_len)) != NULL) {
    *status = 0;
  } else {
    answer = g_strdup_printf ("no answer (rcode %d)", reply[3] & 0x0F);
  }
out:
  if (timed_out) {
    *status = DROPPED;
    answer = g_strdup ("timed out");
  } else if (answer == NULL) {
    answer = g_strdup_printf ("error: %s", g_strerror (errno));
  }
  close (fd);
  return answer;
}

char *
dns_query_name (Ns *ns, const char *server, const char *port, const char *name,
                const char *proto, int *status)
{
  return dns_query_within (ns, server, port, name, proto, 2, status);
}

char *
dns_query (Ns *ns, const char *server, const char *port, const char *proto, int *status)
{
  return dns_query_name (ns, server, port, "example.test", proto, status);
}

/* ---- the plugin ---- */

gboolean
make_veth (const char *ifname, const char *sandbox_id, gpointer user_data, GError **error)
{
  g_autofree char *cmd = NULL;
  Ns *ns = NULL;

  if (g_str_equal (sandbox_id, ID_A))
    ns = world.a;
  else if (g_str_equal (sandbox_id, ID_B))
    ns = world.b;
  if (ns == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "no namespace for %s", sandbox_id);
    return FALSE;
  }
  cmd = g_strdup_printf ("ip link add %s type veth peer name eth0 netns %d", ifname, ns->pid);
  must (NULL, cmd);
  return TRUE;
}

BoxNftablesPlugin *
plugin_new_started (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxPluginContext) context = box_engine_new_plugin_context (world.engine, "nftables");
  BoxNftablesPlugin *plugin = g_object_new (BOX_TYPE_NFTABLES_PLUGIN, "name", "nftables",
                                            "context", context, NULL);

  box_nftables_plugin_set_link_func (plugin, make_veth, NULL);
  g_assert_true (box_plugin_start (BOX_PLUGIN (plugin), NULL, &error));
  g_assert_no_error (error);
  return plugin;
}

void
configure_guest (Ns *ns, const BoxNetAttachment *att)
{
  g_autofree char *addr = g_strdup_printf ("ip addr add %s/%u dev eth0", att->address,
                                           att->prefix);
  g_autofree char *route = g_strdup_printf ("ip route add default via %s", att->gateway);

  must (ns, addr);
  must (ns, "ip link set eth0 up");
  must (ns, route);
}

char *
nft_list (const char *what)
{
  g_autoptr(GError) error = NULL;
  char *out = box_nftables_nft_list (world.nft, what, &error);

  g_assert_no_error (error);
  return out;
}

gboolean
in_set (const char *set, const char *element)
{
  g_autofree char *cmd = g_strdup_printf ("list set inet box %s", set);
  g_autofree char *out = nft_list (cmd);

  return strstr (out, element) != NULL;
}

gboolean
link_exists (const char *ifname)
{
  g_autofree char *path = g_strdup_printf ("/proc/sys/net/ipv4/conf/%s", ifname);

  return g_file_test (path, G_FILE_TEST_IS_DIR);
}

char *
record_path (const char *id)
{
  g_autofree char *name = g_strconcat (id, ".json", NULL);

  return g_build_filename (world.data_dir, "nftables", name, NULL);
}

gboolean
log_has (const char *name, const char *line)
{
  g_autofree char *log = g_build_filename (world.tmp, name, NULL);
  g_autofree char *contents = NULL;
  g_autofree char *needle = g_strconcat (line, "\n", NULL);

  g_assert_true (g_file_get_contents (log, &contents, NULL, NULL));
  return strstr (contents, needle) != NULL;
}

/* One datagram with @payload from @ns (from @src) to 203.0.113.1:5000. */
void
udp_send (Ns *ns, const char *payload, const char *src)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (5000) };
  struct sockaddr_in from = { .sin_family = AF_INET };
  int fd = socket_in (ns, SOCK_DGRAM);

  g_assert_cmpint (fd, >=, 0);
  inet_pton (AF_INET, "203.0.113.1", &to.sin_addr);
  if (src != NULL) {
    g_assert_cmpint (inet_pton (AF_INET, src, &from.sin_addr), ==, 1);
    g_assert_cmpint (bind (fd, (struct sockaddr *) &from, sizeof from), ==, 0);
  }
  g_assert_cmpint (sendto (fd, payload, strlen (payload), 0, (struct sockaddr *) &to, sizeof to),
                   ==, (gssize) strlen (payload));
  close (fd);
}

/* ---- the world ---- */

void
world_set_up (void)
{
  g_autoptr(GError) error = NULL;
  BoxConfig *config;

  world.servers = g_array_new (FALSE, FALSE, sizeof (GPid));
  world.tmp = g_dir_make_tmp ("box-nft-netns-XXXXXX", &error);
  g_assert_no_error (error);
  world.data_dir = g_build_filename (world.tmp, "data", NULL);

  must (NULL, "ip link set lo up");
  world.inet = ns_new ();
  world.lan = ns_new ();
  world.a = ns_new ();
  world.b = ns_new ();

  /* the uplink and the internet */
  {
    g_autofree char *veth = g_strdup_printf ("ip link add up0 type veth peer name eth0 netns %d",
                                             world.inet->pid);
    must (NULL, veth);
  }
  must (NULL, "ip addr add 203.0.113.254/24 dev up0");
  must (NULL, "ip link set up0 up");
  must (NULL, "ip route add default via 203.0.113.1");
  must (world.inet, "ip addr add 203.0.113.1/24 dev eth0");
  must (world.inet, "ip link set eth0 up");
  must (world.inet, "ip route add default via 203.0.113.254");

  /* a local network with a private address, and another host address */
  {
    g_autofree char *veth = g_strdup_printf ("ip link add lan0 type veth peer name eth0 netns %d",
                                             world.lan->pid);
    must (NULL, veth);
  }
  must (NULL, "ip addr add 192.168.77.1/24 dev lan0");
  must (NULL, "ip addr add 10.99.0.1/24 dev lan0");
  must (NULL, "ip link set lan0 up");
  must (world.lan, "ip addr add 192.168.77.2/24 dev eth0");
  must (world.lan, "ip link set eth0 up");
  must (world.lan, "ip route add default via 192.168.77.1");

  /* servers */
  serve_tcp (world.inet, "203.0.113.1", "80", "inet.log");
  {
    g_autofree char *log = g_build_filename (world.tmp, "udp.log", NULL);
    g_autofree char *ready = g_strconcat (log, ".ready", NULL);
    const char *args[] = { "udp-serve", "203.0.113.1", "5000", log, NULL };
    serve (world.inet, args, ready);
  }
  {
    g_autofree char *ready = g_build_filename (world.tmp, "dns.ready", NULL);
    const char *args[] = { "dns-serve", "203.0.113.1", "53", "203.0.113.80", ready, NULL };
    serve (world.inet, args, ready);
  }
  serve_tcp (world.lan, "0.0.0.0", "80", "lan.log");
  serve_tcp (NULL, "0.0.0.0", "8080", "host.log");
  serve_tcp (world.a, "0.0.0.0", "9000", "a.log");
  serve_tcp (world.b, "0.0.0.0", "9000", "b.log");

  /* the plugin */
  config = box_config_new ();
  g_free (config->data_dir);
  config->data_dir = g_strdup (world.data_dir);
  g_assert_cmpint (g_mkdir_with_parents (world.data_dir, 0700), ==, 0);
  g_key_file_set_string (config->keyfile, "plugin.nftables", "dns_upstream", "203.0.113.1");
  g_key_file_set_string (config->keyfile, "plugin.nftables", "blocked", "198.51.100.0/24");
  world.engine = box_engine_new (config);
  world.nft = box_nftables_nft_new (&error);
  g_assert_no_error (error);
  world.plugin = plugin_new_started ();

  world.att_a = box_network_attach (BOX_NETWORK (world.plugin), ID_A, &error);
  g_assert_no_error (error);
  world.att_b = box_network_attach (BOX_NETWORK (world.plugin), ID_B, &error);
  g_assert_no_error (error);
  configure_guest (world.a, world.att_a);
  configure_guest (world.b, world.att_b);
}

/* Whatever happened, nothing of this survives the process: the host
 * namespace is the process's own and the children die with it. */
void
world_free (void)
{
  g_autofree char *rm = NULL;

  if (world.servers != NULL) {
    for (guint i = 0; i < world.servers->len; i++)
      kill_and_reap (g_array_index (world.servers, GPid, i));
    g_array_unref (world.servers);
  }
  g_clear_pointer (&world.inet, ns_free);
  g_clear_pointer (&world.lan, ns_free);
  g_clear_pointer (&world.a, ns_free);
  g_clear_pointer (&world.b, ns_free);
  g_clear_object (&world.plugin);
  g_clear_object (&world.engine);
  g_clear_pointer (&world.nft, box_nftables_nft_free);
  g_clear_pointer (&world.att_a, box_net_attachment_free);
  g_clear_pointer (&world.att_b, box_net_attachment_free);
  if (world.tmp != NULL) {
    const char *argv[] = { "rm", "-rf", world.tmp, NULL };
    run_argv (NULL, argv, NULL);
  }
  g_free (world.tmp);
  g_free (world.data_dir);
}

const char *
check_prerequisites (void)
{
  g_autofree char *ip = g_find_program_in_path ("ip");
  g_autofree char *python = g_find_program_in_path ("python3");

  if (geteuid () != 0)
    return "needs root (network namespaces, taps, nftables)";
  if (access ("/dev/net/tun", R_OK | W_OK) != 0)
    return "no /dev/net/tun";
  if (ip == NULL || python == NULL)
    return "needs ip(8) and python3";
  /* before any thread exists: the whole process moves */
  if (unshare (CLONE_NEWNET) != 0)
    return "cannot create a network namespace";
  return NULL;
}

