/* box-nftables-proxy.h: the name-checking proxy for ports 80 and 443.
 *
 * nftables redirects a restricted sandbox's TCP 80 and 443 to the proxy's
 * two ports.  For each connection the proxy finds the sandbox by the
 * source address (BoxNftablesEgress), reads the first bytes (the HTTP
 * request head's Host, the TLS ClientHello's server name; see
 * box-nftables-sni.h), asks the sandbox's policy, and then either refuses
 * (port 80: a 403 permission_denied, then a reset; port 443: a reset) or
 * connects to an address the node resolves for that name itself, sends
 * the bytes read, and splices both ways (splice(2), no copies).  It never
 * terminates TLS and never uses the address the sandbox dialled.
 *
 * A sandbox that uses secrets ("brokered") has its TCP 443 redirected
 * here too.  Unrestricted, its connection goes to the address it dialled
 * (the original destination of the redirect, SO_ORIGINAL_DST), never to
 * the node itself nor a blocked network, also without a server name: not
 * TLS, or nothing within the head timeout (a protocol whose server speaks
 * first), it is spliced there as it is; restricted, as above (no name, no
 * pass).  Either way, when the broker wants the name
 * (box_broker_wants(), asked only after the policy allowed it), the proxy
 * connects upstream and then hands the sandbox's socket, the bytes read
 * so far and the upstream socket to box_broker_take_connection(): the
 * connection leaves the proxy (its count, caps and timeouts) there, and is
 * counted as brokered.
 *
 * It runs on a thread of its own (epoll, nonblocking sockets).  Every
 * function here is safe from any thread; recheck and forget are carried
 * out on the proxy's thread shortly after they return.
 */
#pragma once

#include <glib.h>

#include "box-broker.h"
#include "box-nftables-egress.h"

G_BEGIN_DECLS

typedef struct _BoxNftablesProxy BoxNftablesProxy;

/* Connections held at once, all sandboxes together; each sandbox may hold
 * its fair share: the cap divided by the sandboxes holding connections. */
#define BOX_NFTABLES_PROXY_MAX_CONNECTIONS 4096
/* A client has this long to send its whole request head or ClientHello. */
#define BOX_NFTABLES_PROXY_HEAD_TIMEOUT_MS 5000
/* Each upstream address gets this long to accept the connection. */
#define BOX_NFTABLES_PROXY_CONNECT_TIMEOUT_MS 5000

typedef struct {
  guint   connections;  /* open now */
  guint64 bytes_out;    /* from the sandbox to the internet */
  guint64 bytes_in;     /* from the internet to the sandbox */
  guint64 refused;      /* connections refused (policy, parse, caps) */
  guint64 brokered;     /* connections handed to the broker */
} BoxNftablesProxyStats;

/* Listens on @bind_address (an IPv4 literal) at @http_port and @tls_port
 * (0: any free port) and starts the proxy's thread. */
BoxNftablesProxy *box_nftables_proxy_new  (BoxNftablesEgress *egress, const char *bind_address,
                                           guint16 http_port, guint16 tls_port, GError **error);
/* Closes every connection (reset) and stops the thread. */
void              box_nftables_proxy_free (BoxNftablesProxy *proxy);

guint16  box_nftables_proxy_get_port (BoxNftablesProxy *proxy, gboolean tls);
/* Where allowed connections go (default 80 and 443); for tests. */
void     box_nftables_proxy_set_upstream_ports (BoxNftablesProxy *proxy, guint16 http,
                                                guint16 tls);
/* The connection cap and the timeouts (defaults above); 0 keeps a value.
 * For tests and the plugin's configuration; applies to new connections. */
void     box_nftables_proxy_set_limits (BoxNftablesProxy *proxy, guint max_connections,
                                        guint head_timeout_ms, guint connect_timeout_ms);

/* The networks the proxy never connects to, whatever the node's
 * resolution answered (it hands out public addresses only: this is the
 * second line, since the proxy dials from the node itself and the
 * forward chain's `@blocked` does not see it).  Replaces the list, which
 * starts as box_nftables_blocked_builtin(); the plugin passes those and
 * its `blocked=`.  FALSE with %BOX_ERROR_INVALID on a malformed CIDR, and
 * the list unchanged. */
gboolean box_nftables_proxy_set_blocked (BoxNftablesProxy *proxy, const char *const *cidrs,
                                         GError **error);

/* The broker TLS connections to a secret's hosts go to (NULL: none, every
 * connection is spliced); a reference is kept.  Returns only once no call
 * to the previous broker (wants, take_connection) is under way, so that it
 * may be stopped then. */
void     box_nftables_proxy_set_broker (BoxNftablesProxy *proxy, BoxBroker *broker);

/* The policy of @guest changed: each of its connections is checked again
 * against the registry and reset when no longer allowed (all of them when
 * the guest is gone). */
void     box_nftables_proxy_recheck (BoxNftablesProxy *proxy, guint32 guest);
/* The sandbox is gone: reset all of its connections, forget its stats. */
void     box_nftables_proxy_forget  (BoxNftablesProxy *proxy, guint32 guest);
/* FALSE when the proxy has seen no connection from @guest since it was
 * last forgotten. */
gboolean box_nftables_proxy_get_stats (BoxNftablesProxy *proxy, guint32 guest,
                                       BoxNftablesProxyStats *stats);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNftablesProxy, box_nftables_proxy_free)

G_END_DECLS
