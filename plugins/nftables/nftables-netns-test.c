/* nftables-netns-test.c: the nftables plugin with real kernel networking.
 *
 * The test process first moves into a network namespace of its own: that
 * namespace plays the node (the "host"), so the test never touches the
 * machine's real interfaces, routes, sysctls or nftables, and everything
 * it made disappears with the process even when it fails.  Around it:
 *
 *   internet   203.0.113.1/24 (TEST-NET-3) behind the host's "uplink"
 *              up0 203.0.113.254; the host's default route; serves TCP 80
 *              and DNS (every A query -> 203.0.113.80)
 *   lan        192.168.77.2/24 behind lan0 192.168.77.1 (also 10.99.0.1);
 *              serves TCP 80
 *   sandbox a  \  each a namespace whose eth0 is the peer of a veth pair
 *   sandbox b  /  named and addressed by the plugin (the test-only link
 *              hook stands in for the tap, whose guest end is an fd);
 *              each serves TCP 9000
 *   host       serves TCP 8080 on every address
 *
 * Namespaces are held by "sleep" children killed with their parent
 * (PR_SET_PDEATHSIG).  Needs root, /dev/net/tun, ip(8) and python3; skips
 * otherwise.  Every "does not reach" check has a control showing that the
 * server it aims at does answer someone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* setns, unshare */
#endif
#include "config.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "box-engine.h"
#include "box-nftables-nft.h"
#include "box-nftables-plugin.h"

#define HELPER BOX_NFT_TEST_HELPER

#define ID_A "sb-aaaaaaaaaaaa"
#define ID_B "sb-bbbbbbbbbbbb"
#define ID_C "sb-cccccccccccc"
#define ID_T "sb-tttttttttttt"
#define ID_U "sb-uuuuuuuuuuuu"

#define REACHED   0
#define DROPPED   2

typedef struct {
  GPid  pid;
  char *path;   /* /proc/<pid>/ns/net */
} Ns;

typedef struct {
  char              *tmp;
  char              *data_dir;
  Ns                *inet, *lan, *a, *b;
  GArray            *servers;   /* GPid */
  BoxEngine         *engine;
  BoxNftablesPlugin *plugin;
  BoxNetAttachment  *att_a, *att_b;
  BoxNftablesNft    *nft;
} World;

static World world;
static const char *skip_reason;

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
static int
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
static void
must (Ns *ns, const char *cmdline)
{
  g_auto(GStrv) argv = g_strsplit (cmdline, " ", -1);
  int status = run_argv (ns, (const char *const *) argv, NULL);

  if (status != 0)
    g_error ("\"%s\" failed (%d)", cmdline, status);
}

static char *
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

static Ns *
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

static void
kill_and_reap (GPid pid)
{
  kill (pid, SIGKILL);
  waitpid (pid, NULL, 0);
}

static void
ns_free (Ns *ns)
{
  if (ns == NULL)
    return;
  kill_and_reap (ns->pid);
  g_free (ns->path);
  g_free (ns);
}

static void
wait_for_file (const char *path)
{
  for (guint i = 0; i < 1000 && !g_file_test (path, G_FILE_TEST_EXISTS); i++)
    g_usleep (10000);
  g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
}

/* A helper server in @ns; returns once it listens. */
static void
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

static void
serve_tcp (Ns *ns, const char *bind, const char *port, const char *name)
{
  g_autofree char *log = g_build_filename (world.tmp, name, NULL);
  g_autofree char *ready = g_strconcat (log, ".ready", NULL);
  const char *args[] = { "serve", bind, port, log, NULL };

  serve (ns, args, ready);
}

/* REACHED, DROPPED, 3 (refused) or 1 */
static int
probe (Ns *ns, const char *host, const char *port, const char *src)
{
  const char *argv[] = { "python3", HELPER, "connect", host, port, "1", src, NULL };

  return run_argv (ns, argv, NULL);
}

static void
assert_reaches (Ns *ns, const char *host, const char *port)
{
  int status = probe (ns, host, port, NULL);

  if (status != REACHED)
    g_error ("expected to reach %s:%s, got %d", host, port, status);
}

static void
assert_dropped (Ns *ns, const char *host, const char *port)
{
  int status = probe (ns, host, port, NULL);

  if (status != DROPPED)
    g_error ("expected %s:%s to be dropped, got %d", host, port, status);
}

static char *
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

static char *
dns_query (Ns *ns, const char *server, const char *port, const char *proto, int *status)
{
  const char *argv[] = { "python3", HELPER, "dns-query", server, port, "example.test", proto,
                         "2", NULL };
  char *out = NULL;

  *status = run_argv (ns, argv, &out);
  return g_strchomp (out);
}

/* ---- the plugin ---- */

static gboolean
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

static BoxNftablesPlugin *
plugin_new_started (void)
{
  g_autoptr(GError) error = NULL;
  BoxNftablesPlugin *plugin = g_object_new (BOX_TYPE_NFTABLES_PLUGIN, "name", "nftables",
                                            "engine", world.engine, NULL);

  box_nftables_plugin_set_link_func (plugin, make_veth, NULL);
  g_assert_true (box_plugin_start (BOX_PLUGIN (plugin), NULL, &error));
  g_assert_no_error (error);
  return plugin;
}

static void
configure_guest (Ns *ns, const BoxNetAttachment *att)
{
  g_autofree char *addr = g_strdup_printf ("ip addr add %s/%u dev eth0", att->address,
                                           att->prefix);
  g_autofree char *route = g_strdup_printf ("ip route add default via %s", att->gateway);

  must (ns, addr);
  must (ns, "ip link set eth0 up");
  must (ns, route);
}

static char *
nft_list (const char *what)
{
  g_autoptr(GError) error = NULL;
  char *out = box_nftables_nft_list (world.nft, what, &error);

  g_assert_no_error (error);
  return out;
}

static gboolean
in_set (const char *set, const char *element)
{
  g_autofree char *cmd = g_strdup_printf ("list set inet box %s", set);
  g_autofree char *out = nft_list (cmd);

  return strstr (out, element) != NULL;
}

static gboolean
link_exists (const char *ifname)
{
  g_autofree char *path = g_strdup_printf ("/proc/sys/net/ipv4/conf/%s", ifname);

  return g_file_test (path, G_FILE_TEST_IS_DIR);
}

static char *
record_path (const char *id)
{
  g_autofree char *name = g_strconcat (id, ".json", NULL);

  return g_build_filename (world.data_dir, "nftables", name, NULL);
}

/* ---- tests, in order ---- */

#define SKIP_IF_NEEDED()           \
  if (skip_reason != NULL) {       \
    g_test_skip (skip_reason);     \
    return;                        \
  }

static void
test_setup (void)
{
  g_autoptr(GError) error = NULL;
  BoxConfig *config;

  SKIP_IF_NEEDED ();
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

static void
test_attach (void)
{
  g_autofree char *forward = NULL;
  g_autofree char *ipv6 = NULL;
  g_autofree char *addr = NULL;
  g_autofree char *link = NULL;
  g_autofree char *expect = NULL;
  g_autofree char *path = NULL;

  SKIP_IF_NEEDED ();
  g_assert_cmpstr (world.att_a->ifname, ==, "bxaaaaaaaaaaaa");
  g_assert_cmpstr (world.att_a->address, ==, "10.222.0.2");
  g_assert_cmpstr (world.att_a->gateway, ==, "10.222.0.1");
  g_assert_cmpuint (world.att_a->prefix, ==, 30);
  g_assert_cmpstr (world.att_a->dns[0], ==, "10.222.0.1");
  g_assert_true (g_str_has_prefix (world.att_a->mac, "52:54:00:"));
  g_assert_cmpstr (world.att_b->ifname, ==, "bxbbbbbbbbbbbb");
  g_assert_cmpstr (world.att_b->address, ==, "10.222.0.6");
  g_assert_cmpstr (world.att_b->gateway, ==, "10.222.0.5");
  g_assert_cmpstr (world.att_a->mac, !=, world.att_b->mac);

  /* the kernel agrees: address, up, IPv6 off, forwarding on, in the sets */
  addr = output_of (NULL, "ip -o -4 addr show dev bxaaaaaaaaaaaa");
  g_assert_nonnull (strstr (addr, "inet 10.222.0.1/30"));
  link = output_of (NULL, "ip -o link show dev bxaaaaaaaaaaaa");
  g_assert_nonnull (strstr (link, ",UP"));
  g_assert_true (g_file_get_contents ("/proc/sys/net/ipv6/conf/bxaaaaaaaaaaaa/disable_ipv6",
                                      &ipv6, NULL, NULL));
  g_assert_cmpstr (ipv6, ==, "1\n");
  g_assert_true (g_file_get_contents ("/proc/sys/net/ipv4/ip_forward", &forward, NULL, NULL));
  g_assert_cmpstr (forward, ==, "1\n");
  g_assert_true (in_set ("taps", "\"bxaaaaaaaaaaaa\""));
  g_assert_true (in_set ("taps", "\"bxbbbbbbbbbbbb\""));
  g_assert_true (in_set ("guests", "\"bxaaaaaaaaaaaa\" . 10.222.0.2"));
  path = record_path (ID_A);
  g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));

  /* attach again: the same attachment */
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(BoxNetAttachment) again = box_network_attach (BOX_NETWORK (world.plugin), ID_A,
                                                            &error);
    g_assert_no_error (error);
    g_assert_cmpstr (again->ifname, ==, world.att_a->ifname);
    g_assert_cmpstr (again->address, ==, world.att_a->address);
    g_assert_cmpstr (again->mac, ==, world.att_a->mac);
  }
  expect = g_strdup ("the blocked set has the configured network");
  g_test_message ("%s", expect);
  {
    g_autofree char *blocked = nft_list ("list set inet box blocked");
    g_assert_nonnull (strstr (blocked, "198.51.100.0/24"));
  }
}

static void
test_internet (void)
{
  g_autofree char *peer = NULL;

  SKIP_IF_NEEDED ();
  assert_reaches (world.a, "203.0.113.1", "80");
  /* the internet host sees the node's uplink address, not the sandbox */
  peer = last_peer ("inet.log");
  g_assert_cmpstr (peer, ==, "203.0.113.254");
  assert_reaches (world.b, "203.0.113.1", "80");
}

static void
test_not_the_node (void)
{
  SKIP_IF_NEEDED ();
  /* controls: the node's server answers the node itself and the internet */
  assert_reaches (NULL, "10.222.0.1", "8080");
  assert_reaches (world.inet, "203.0.113.254", "8080");

  assert_dropped (world.a, world.att_a->gateway, "8080");
  assert_dropped (world.a, world.att_b->gateway, "8080");
  assert_dropped (world.a, "203.0.113.254", "8080");
  assert_dropped (world.a, "192.168.77.1", "8080");
  assert_dropped (world.a, "10.99.0.1", "8080");
  assert_dropped (world.b, world.att_b->gateway, "8080");
}

static void
test_not_local_networks (void)
{
  SKIP_IF_NEEDED ();
  assert_reaches (NULL, "192.168.77.2", "80");   /* control */
  assert_dropped (world.a, "192.168.77.2", "80");
  assert_dropped (world.b, "192.168.77.2", "80");
}

static void
test_not_other_sandboxes (void)
{
  SKIP_IF_NEEDED ();
  /* two rules cover this: nothing in but replies, and the pool lies in 10/8 */
  assert_reaches (world.b, "127.0.0.1", "9000");   /* control: b's server */
  assert_reaches (world.b, world.att_b->address, "9000");
  assert_dropped (world.a, world.att_b->address, "9000");
  assert_dropped (world.b, world.att_a->address, "9000");
}

static void
test_nothing_reaches_in (void)
{
  SKIP_IF_NEEDED ();
  assert_reaches (world.a, "127.0.0.1", "9000");   /* control: a's server */
  /* the internet routes to the pool through the node: dropped */
  assert_dropped (world.inet, world.att_a->address, "9000");
  assert_dropped (world.lan, world.att_a->address, "9000");
  /* nor the node's own processes */
  assert_dropped (NULL, world.att_a->address, "9000");
}

static gboolean
log_has (const char *name, const char *line)
{
  g_autofree char *log = g_build_filename (world.tmp, name, NULL);
  g_autofree char *contents = NULL;
  g_autofree char *needle = g_strconcat (line, "\n", NULL);

  g_assert_true (g_file_get_contents (log, &contents, NULL, NULL));
  return strstr (contents, needle) != NULL;
}

static void
udp_send (Ns *ns, const char *payload, const char *src)
{
  const char *argv[] = { "python3", HELPER, "udp-send", "203.0.113.1", "5000", payload, src,
                         NULL };

  g_assert_cmpint (run_argv (ns, argv, NULL), ==, 0);
}

static void
test_no_spoofing (void)
{
  g_autofree char *add = g_strdup_printf ("ip addr add %s/32 dev eth0", world.att_b->address);
  g_autofree char *del = g_strdup_printf ("ip addr del %s/32 dev eth0", world.att_b->address);
  g_autofree char *add_out = g_strdup ("ip addr add 198.18.0.7/32 dev eth0");
  g_autofree char *del_out = g_strdup ("ip addr del 198.18.0.7/32 dev eth0");

  SKIP_IF_NEEDED ();
  /* a sends datagrams with b's address and with an address from nowhere
   * as their source: they never leave the node; its own one does */
  must (world.a, add);
  must (world.a, add_out);
  udp_send (world.a, "spoofed-sandbox", world.att_b->address);
  udp_send (world.a, "spoofed-outside", "198.18.0.7");
  udp_send (world.a, "honest", world.att_a->address);
  must (world.a, del);
  must (world.a, del_out);
  for (guint i = 0; i < 200 && !log_has ("udp.log", "honest"); i++)
    g_usleep (10000);
  g_usleep (300000);   /* the spoofed ones went first; give them time anyway */
  g_assert_true (log_has ("udp.log", "honest"));
  g_assert_false (log_has ("udp.log", "spoofed-sandbox"));
  g_assert_false (log_has ("udp.log", "spoofed-outside"));
}

static void
test_resolver (void)
{
  g_autofree char *udp = NULL;
  g_autofree char *tcp = NULL;
  g_autofree char *direct = NULL;
  g_autofree char *outside = NULL;
  int status;

  SKIP_IF_NEEDED ();
  /* DNS to the gateway reaches the plugin's forwarder, which asks the
   * upstream in the "internet" */
  udp = dns_query (world.a, world.att_a->gateway, "53", "udp", &status);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpstr (udp, ==, "203.0.113.80");
  tcp = dns_query (world.b, world.att_b->gateway, "53", "tcp", &status);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpstr (tcp, ==, "203.0.113.80");

  /* the forwarder's own port is not open to sandboxes or to the world */
  direct = dns_query (world.a, world.att_a->gateway, "10053", "udp", &status);
  g_assert_cmpint (status, ==, DROPPED);
  outside = dns_query (world.inet, "203.0.113.254", "10053", "udp", &status);
  g_assert_cmpint (status, ==, DROPPED);
}

/* A link named like the plugin's but not in its sets (not attached yet,
 * or made by someone else) gets nowhere; renamed, the same link is an
 * ordinary host link again (the control). */
static void
test_fail_closed (void)
{
  g_autofree char *veth = NULL;
  Ns *rogue;

  SKIP_IF_NEEDED ();
  rogue = ns_new ();
  veth = g_strdup_printf ("ip link add bxrogue0 type veth peer name eth0 netns %d", rogue->pid);
  must (NULL, veth);
  must (NULL, "ip addr add 10.223.0.1/30 dev bxrogue0");
  must (NULL, "ip link set bxrogue0 up");
  must (rogue, "ip addr add 10.223.0.2/30 dev eth0");
  must (rogue, "ip link set eth0 up");
  must (rogue, "ip route add default via 10.223.0.1");
  assert_dropped (rogue, "203.0.113.1", "80");
  assert_dropped (rogue, "10.223.0.1", "8080");

  must (NULL, "ip link set bxrogue0 down");
  must (NULL, "ip link set bxrogue0 name rogue0");
  must (NULL, "ip link set rogue0 up");
  assert_reaches (rogue, "10.223.0.1", "8080");
  must (NULL, "ip link del rogue0");
  ns_free (rogue);
}

static void
test_set_egress (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) none = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  BoxRule *rule = g_new0 (BoxRule, 1);

  SKIP_IF_NEEDED ();
  g_assert_true (box_network_set_egress (BOX_NETWORK (world.plugin), ID_A, none, &error));
  g_assert_no_error (error);

  rule->domain = g_strdup ("example.com");
  rule->allow = TRUE;
  g_ptr_array_add (rules, rule);
  g_assert_false (box_network_set_egress (BOX_NETWORK (world.plugin), ID_A, rules, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_assert_cmpstr (error->message, ==, "egress rules are not enforced yet");
  g_clear_error (&error);
  /* nothing changed: still the whole internet */
  assert_reaches (world.a, "203.0.113.1", "80");

  g_assert_false (box_network_set_egress (BOX_NETWORK (world.plugin), "sb-nosuchsandbx", none,
                                          &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
}

static void
test_rebind (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxNetAttachment) moved = NULL;
  g_autofree char *path_a = record_path (ID_A);
  g_autofree char *path_c = record_path (ID_C);

  SKIP_IF_NEEDED ();
  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), ID_A, ID_C, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (path_a, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (path_c, G_FILE_TEST_EXISTS));
  /* the tap keeps its name, address and MAC; the guest notices nothing */
  moved = box_network_attach (BOX_NETWORK (world.plugin), ID_C, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (moved->ifname, ==, world.att_a->ifname);
  g_assert_cmpstr (moved->address, ==, world.att_a->address);
  g_assert_cmpstr (moved->mac, ==, world.att_a->mac);
  assert_reaches (world.a, "203.0.113.1", "80");

  g_assert_false (box_network_rebind (BOX_NETWORK (world.plugin), ID_C, ID_B, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_clear_error (&error);
  g_assert_false (box_network_rebind (BOX_NETWORK (world.plugin), ID_A, ID_C, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_clear_error (&error);

  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), ID_C, ID_A, &error));
  g_assert_no_error (error);
}

static void
test_restart (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxNetAttachment) again = NULL;

  SKIP_IF_NEEDED ();
  /* stop() leaves taps and rules: running VMs keep their network */
  box_plugin_stop (BOX_PLUGIN (world.plugin));
  g_clear_object (&world.plugin);
  g_assert_true (link_exists (world.att_a->ifname));
  g_assert_true (in_set ("taps", "\"bxaaaaaaaaaaaa\""));
  assert_reaches (world.a, "203.0.113.1", "80");
  assert_dropped (world.a, world.att_b->address, "9000");

  /* a new instance reinstalls the table with the recorded members */
  world.plugin = plugin_new_started ();
  g_assert_true (in_set ("taps", "\"bxaaaaaaaaaaaa\""));
  g_assert_true (in_set ("guests", "\"bxbbbbbbbbbbbb\" . 10.222.0.6"));
  again = box_network_attach (BOX_NETWORK (world.plugin), ID_A, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (again->ifname, ==, world.att_a->ifname);
  g_assert_cmpstr (again->address, ==, world.att_a->address);
  assert_reaches (world.a, "203.0.113.1", "80");
  assert_dropped (world.a, world.att_a->gateway, "8080");
  g_assert_cmpint (run_argv (world.a, (const char *[]) { "python3", HELPER, "dns-query",
                                                         world.att_a->gateway, "53",
                                                         "example.test", "udp", "2", NULL },
                             NULL), ==, 0);
}

static void
test_real_taps (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxNetAttachment) tap = NULL;
  g_autoptr(BoxNetAttachment) again = NULL;
  g_autoptr(BoxNetAttachment) slot = NULL;
  g_autofree char *addr = NULL;
  g_autofree char *link = NULL;
  g_autofree char *path_u = record_path (ID_U);

  SKIP_IF_NEEDED ();
  box_nftables_plugin_set_link_func (world.plugin, NULL, NULL);

  tap = box_network_attach (BOX_NETWORK (world.plugin), ID_T, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (tap->ifname, ==, "bxtttttttttttt");
  g_assert_cmpstr (tap->address, ==, "10.222.0.10");   /* the next free /30 */
  link = output_of (NULL, "ip -d -o link show dev bxtttttttttttt");
  g_assert_nonnull (strstr (link, "tun type tap"));
  g_assert_nonnull (strstr (link, "vnet_hdr on persist on"));
  g_assert_nonnull (strstr (link, ",UP"));
  addr = output_of (NULL, "ip -o -4 addr show dev bxtttttttttttt");
  g_assert_nonnull (strstr (addr, "inet 10.222.0.9/30"));
  g_assert_true (in_set ("taps", "\"bxtttttttttttt\""));

  /* found again after the tap vanished behind the plugin's back */
  must (NULL, "ip link del bxtttttttttttt");
  again = box_network_attach (BOX_NETWORK (world.plugin), ID_T, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (again->address, ==, tap->address);
  g_assert_true (link_exists ("bxtttttttttttt"));

  /* a warm-pool slot: any ID; the name is a hash; rebind keeps it */
  slot = box_network_attach (BOX_NETWORK (world.plugin), "pool-slot-1", &error);
  g_assert_no_error (error);
  g_assert_true (g_str_has_prefix (slot->ifname, "bx"));
  g_assert_cmpuint (strlen (slot->ifname), ==, 14);
  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), "pool-slot-1", ID_U, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_test (path_u, G_FILE_TEST_EXISTS));
  g_assert_true (link_exists (slot->ifname));

  /* detach: tap, set members and record gone; twice is fine */
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_T, &error));
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_U, &error));
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_U, &error));
  g_assert_no_error (error);
  g_assert_false (link_exists ("bxtttttttttttt"));
  g_assert_false (link_exists (slot->ifname));
  g_assert_false (in_set ("taps", "\"bxtttttttttttt\""));
  g_assert_false (in_set ("guests", slot->ifname));
  g_assert_false (g_file_test (path_u, G_FILE_TEST_EXISTS));

  box_nftables_plugin_set_link_func (world.plugin, make_veth, NULL);
}

static void
test_detach (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxNetAttachment) reused = NULL;
  g_autofree char *path_b = record_path (ID_B);

  SKIP_IF_NEEDED ();
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_B, &error));
  g_assert_no_error (error);
  g_assert_false (link_exists (world.att_b->ifname));
  g_assert_false (in_set ("taps", "\"bxbbbbbbbbbbbb\""));
  g_assert_false (in_set ("guests", "10.222.0.6"));
  g_assert_false (g_file_test (path_b, G_FILE_TEST_EXISTS));
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_B, &error));
  g_assert_no_error (error);
  /* the others carry on */
  assert_reaches (world.a, "203.0.113.1", "80");

  /* attached again, b gets the lowest free subnet: its old one */
  reused = box_network_attach (BOX_NETWORK (world.plugin), ID_B, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (reused->address, ==, "10.222.0.6");
  configure_guest (world.b, reused);
  assert_reaches (world.b, "203.0.113.1", "80");
  assert_dropped (world.b, world.att_a->address, "9000");
}

static void
test_cleanup (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *tables = NULL;

  SKIP_IF_NEEDED ();
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_A, &error));
  g_assert_true (box_network_detach (BOX_NETWORK (world.plugin), ID_B, &error));
  g_assert_no_error (error);
  box_plugin_stop (BOX_PLUGIN (world.plugin));
  g_clear_object (&world.plugin);
  g_assert_true (box_nftables_nft_run (world.nft, "delete table inet box\n", &error));
  g_assert_no_error (error);
  tables = nft_list ("list tables");
  g_assert_null (strstr (tables, "inet box"));

  for (guint i = 0; i < world.servers->len; i++)
    kill_and_reap (g_array_index (world.servers, GPid, i));
  g_array_set_size (world.servers, 0);
  g_clear_pointer (&world.inet, ns_free);
  g_clear_pointer (&world.lan, ns_free);
  g_clear_pointer (&world.a, ns_free);
  g_clear_pointer (&world.b, ns_free);
}

/* Whatever happened, nothing of this survives the process: the host
 * namespace is the process's own and the children die with it. */
static void
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

static const char *
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

int
main (int argc, char **argv)
{
  int ret;

  skip_reason = check_prerequisites ();
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/nftables-netns/setup", test_setup);
  g_test_add_func ("/nftables-netns/attach", test_attach);
  g_test_add_func ("/nftables-netns/internet", test_internet);
  g_test_add_func ("/nftables-netns/not-the-node", test_not_the_node);
  g_test_add_func ("/nftables-netns/not-local-networks", test_not_local_networks);
  g_test_add_func ("/nftables-netns/not-other-sandboxes", test_not_other_sandboxes);
  g_test_add_func ("/nftables-netns/nothing-reaches-in", test_nothing_reaches_in);
  g_test_add_func ("/nftables-netns/no-spoofing", test_no_spoofing);
  g_test_add_func ("/nftables-netns/resolver", test_resolver);
  g_test_add_func ("/nftables-netns/fail-closed", test_fail_closed);
  g_test_add_func ("/nftables-netns/set-egress", test_set_egress);
  g_test_add_func ("/nftables-netns/rebind", test_rebind);
  g_test_add_func ("/nftables-netns/restart", test_restart);
  g_test_add_func ("/nftables-netns/real-taps", test_real_taps);
  g_test_add_func ("/nftables-netns/detach", test_detach);
  g_test_add_func ("/nftables-netns/cleanup", test_cleanup);
  ret = g_test_run ();
  world_free ();
  return ret;
}
