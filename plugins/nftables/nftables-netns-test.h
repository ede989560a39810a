/* nftables-netns-test.h: the world of nftables-netns-test.c (namespaces,
 * processes, probes, the plugin), built by nftables-netns-world.c.
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
 * (PR_SET_PDEATHSIG).  The servers are nftables-test-helper.py processes;
 * the probes (connect, DNS query, UDP send) run in this process, on a
 * socket made in the prober's namespace.  Needs root, /dev/net/tun, ip(8)
 * and python3; skips otherwise.  Every "does not reach" check has a control showing that the
 * server it aims at does answer someone.
 */
#pragma once

#include "box-engine.h"
#include "box-nftables-dns.h"
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
#define REFUSED   3   /* a reset */

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

extern World world;

/* processes and namespaces (@ns NULL: the host) */
const char        *check_prerequisites (void);   /* NULL, or why the test skips */
int                run_argv        (Ns *ns, const char *const *argv, char **out);
void               must            (Ns *ns, const char *cmdline);   /* split on spaces */
char              *output_of       (Ns *ns, const char *cmdline);
Ns                *ns_new          (void);
void               ns_free         (Ns *ns);
void               kill_and_reap   (GPid pid);
void               wait_for_file   (const char *path);

/* probes: servers log to <world.tmp>/<name> */
void               serve           (Ns *ns, const char *const *args, const char *ready);
void               serve_tcp       (Ns *ns, const char *bind, const char *port, const char *name);
#define PROBE_ANSWER_S 5
#define PROBE_DROP_S   1
int                probe           (Ns *ns, const char *host, const char *port, const char *src,
                                    int seconds);
void               assert_reaches  (Ns *ns, const char *host, const char *port);
void               assert_dropped  (Ns *ns, const char *host, const char *port);
char              *last_peer       (const char *name);
/* a connection to a "hold" server, greeted; then 0 while it echoes, or the errno */
int                open_held       (Ns *ns, const char *host, const char *port);
char              *exchange        (Ns *ns, const char *host, const char *port, const char *request,
                                    gboolean *reset);
/* the same with @len bytes of @data, then a half-close when @half_close */
GString           *exchange_bytes  (Ns *ns, const char *host, const char *port, const void *data,
                                    gsize len, gboolean half_close, gboolean *reset);
int                held_echo       (int fd);
gboolean           icmp_echo       (Ns *ns);   /* to 203.0.113.1: a reply came */
gboolean           log_has         (const char *name, const char *line);
void               udp_send        (Ns *ns, const char *payload, const char *src);
char              *dns_query       (Ns *ns, const char *server, const char *port,
                                    const char *proto, int *status);
char              *dns_query_name  (Ns *ns, const char *server, const char *port,
                                    const char *name, const char *proto, int *status);
char              *dns_query_within (Ns *ns, const char *server, const char *port,
                                     const char *name, const char *proto, int seconds,
                                     int *status);   /* @seconds per step */

/* the plugin */
gboolean           make_veth       (const char *ifname, const char *sandbox_id,
                                    gpointer user_data, GError **error);
BoxNftablesPlugin *plugin_new_started (void);
void               configure_guest (Ns *ns, const BoxNetAttachment *att);
char              *nft_list        (const char *what);
gboolean           in_set          (const char *set, const char *element);
gboolean           link_exists     (const char *ifname);
char              *record_path     (const char *id);

/* the resolver under pressure (nftables-netns-dns.c) */
void               dns_fair_udp    (void);
void               dns_fair_tcp    (void);
void               dns_port_privileged (void);   /* with the plugin stopped */
void               dns_default_upstreams (void);
void               dns_tcp_stop    (void);
/* the filtering resolver of restricted sandboxes (nftables-netns-policy.c) */
void               dns_restricted  (void);
void               dns_restricted_world (void);
/* sharing it fairly (nftables-netns-fair.c) */
void               dns_restricted_flood (void);
void               dns_node_lookup_flood (void);
void               dns_report_stuck (void);
void               dns_report_round_robin (void);

/* whether a message @text of log domain @domain was logged (structured
 * logging: the test's writer keeps them) */
gboolean           was_logged      (const char *domain, const char *text);
/* how many lines of @domain start with @prefix */
guint              logged_count    (const char *domain, const char *prefix);

/* egress rules (nftables-netns-egress.c) */
void               egress_enforced (void);
void               egress_patch    (void);
void               egress_pending_and_restart (void);
void               egress_resolved_for_b (void);
/* the kernel's refusals logged (nftables-netns-egress.c) */
void               egress_kernel_refusals (void);   /* restricts b, reports svc.test for it */
/* the resolved set read back (nftables-netns-list.c) */
void               list_allowed_in_world (void);

/* TLS connections handed to the secrets broker (nftables-netns-broker.c) */
void               broker_unrestricted (void);
void               broker_restricted (void);
void               broker_membership (void);
void               broker_unset_waits (void);
void               broker_server_first (void);

void               world_set_up    (void);
void               world_free      (void);
