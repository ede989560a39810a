/* nftables-netns-world.c: namespaces, processes, probes and the plugin for
 * nftables-netns-test.c; see nftables-netns-test.h. */
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

/* REACHED, DROPPED, 3 (refused) or 1 */
int
probe (Ns *ns, const char *host, const char *port, const char *src)
{
  const char *argv[] = { "python3", HELPER, "connect", host, port, "1", src, NULL };

  return run_argv (ns, argv, NULL);
}

void
assert_reaches (Ns *ns, const char *host, const char *port)
{
  int status = probe (ns, host, port, NULL);

  if (status != REACHED)
    g_error ("expected to reach %s:%s, got %d", host, port, status);
}

void
assert_dropped (Ns *ns, const char *host, const char *port)
{
  int status = probe (ns, host, port, NULL);

  if (status != DROPPED)
    g_error ("expected %s:%s to be dropped, got %d", host, port, status);
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

char *
dns_query_name (Ns *ns, const char *server, const char *port, const char *name,
                const char *proto, int *status)
{
  const char *argv[] = { "python3", HELPER, "dns-query", server, port, name, proto, "2", NULL };
  char *out = NULL;

  *status = run_argv (ns, argv, &out);
  return g_strchomp (out);
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

void
udp_send (Ns *ns, const char *payload, const char *src)
{
  const char *argv[] = { "python3", HELPER, "udp-send", "203.0.113.1", "5000", payload, src,
                         NULL };

  g_assert_cmpint (run_argv (ns, argv, NULL), ==, 0);
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

