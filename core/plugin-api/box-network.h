/* box-network.h: a sandbox's network.
 *
 * A network plugin gives each sandbox an interface (a tap device the
 * hypervisor plugs in; the hypervisor plugin calls attach/rebind/detach), its addresses and NAT to the internet, keeps
 * sandboxes away from the node, the local networks and each other, and
 * enforces egress rules.  set_egress() gets the rules with "defaults"
 * already expanded; an empty array means the whole internet.
 *
 * Thread contract: set_egress() comes from the engine on the main thread.
 * attach(), rebind() and detach() come from the hypervisor plugin, which
 * may call them from its worker threads (libvirt does, while it creates,
 * resumes or destroys a VM): an implementation must take its own lock
 * around its state and must not touch main-loop state in them (the
 * nftables plugin holds one mutex for each call).  Calls for one sandbox
 * never overlap.
 */
#pragma once

#include "box-export.h"

#include "box-plugin.h"
#include "box-broker.h"

G_BEGIN_DECLS

/**
 * BoxNetAttachment:
 * @ifname: the tap device on the host
 * @mac: the guest's MAC address ("52:54:00:...")
 * @address: the guest's IPv4 address
 * @prefix: the guest's prefix length
 * @gateway: the IPv4 gateway (the host side)
 * @dns: (array zero-terminated=1): the resolvers the guest uses
 *
 * A sandbox's network interface.  Owns its members; a boxed type.
 */
typedef struct {
  char    *ifname;        /* tap device on the host */
  char    *mac;           /* "52:54:00:..." */
  char    *address;       /* guest IPv4 address */
  guint    prefix;        /* guest prefix length */
  char    *gateway;       /* IPv4 gateway (the host side) */
  char   **dns;           /* resolvers the guest uses */
} BoxNetAttachment;

#define BOX_TYPE_NET_ATTACHMENT (box_net_attachment_get_type ())
BOX_PLUGIN_API
GType             box_net_attachment_get_type (void) G_GNUC_CONST;
BOX_PLUGIN_API
void              box_net_attachment_free (BoxNetAttachment *attachment);
/**
 * box_net_attachment_copy:
 * @attachment: (nullable): an attachment
 *
 * Returns: (transfer full) (nullable): a deep copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxNetAttachment *box_net_attachment_copy (const BoxNetAttachment *attachment);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNetAttachment, box_net_attachment_free)

/**
 * BoxNetAllowed:
 * @address: the IPv4 address the sandbox may connect to
 * @port: the TCP port it may connect to there
 * @expires_s: the seconds left before the permission lapses (the rest of
 *   the DNS answer's TTL); 0 when it lapses within the second
 *
 * One address a restricted sandbox may reach on a port other than 80 and
 * 443, because it resolved a name allowed on that port (see
 * box_network_list_allowed()).  Owns its members; a boxed type.
 */
typedef struct {
  char    *address;
  guint16  port;
  guint    expires_s;
} BoxNetAllowed;

#define BOX_TYPE_NET_ALLOWED (box_net_allowed_get_type ())
BOX_PLUGIN_API
GType          box_net_allowed_get_type (void) G_GNUC_CONST;
BOX_PLUGIN_API
void           box_net_allowed_free (BoxNetAllowed *allowed);
/**
 * box_net_allowed_copy:
 * @allowed: (nullable): an allowed address
 *
 * Returns: (transfer full) (nullable): a copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxNetAllowed *box_net_allowed_copy (const BoxNetAllowed *allowed);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNetAllowed, box_net_allowed_free)

/**
 * BoxNetworkInterface:
 * @g_iface: the parent interface
 * @attach: sets up (or finds again, after a restart) a sandbox's interface
 * @rebind: gives the attachment made for one ID (a warm pool slot) to
 *   another
 * @detach: tears it down; idempotent
 * @set_egress: applies a sandbox's egress rules (#BoxRule, "defaults"
 *   expanded) at once and cuts what they no longer allow
 * @list_allowed: the addresses a sandbox may reach now on ports other than
 *   80 and 443 (#BoxNetAllowed), for the operator's view; may be %NULL
 * @enforces_egress: whether set_egress() enforces a non-empty list (%NULL:
 *   it does not, and the engine refuses rules with 501)
 *
 * The virtual methods of a network plugin.  @attach, @rebind and @detach
 * may come from the hypervisor plugin's worker threads.
 */

/**
 * BoxNetwork:
 *
 * A sandbox's network: a tap device per sandbox, its addresses and NAT to
 * the internet, isolation from the node, the local networks and other
 * sandboxes, and egress rules.  set_egress() comes from the engine on the
 * main thread; attach(), rebind() and detach() come from the hypervisor
 * plugin, possibly from its worker threads, so an implementation locks its
 * own state and touches no main-loop state in them.  Calls for one sandbox
 * never overlap.
 */
#define BOX_TYPE_NETWORK (box_network_get_type ())
BOX_PLUGIN_API
G_DECLARE_INTERFACE (BoxNetwork, box_network, BOX, NETWORK, GObject)

struct _BoxNetworkInterface {
  GTypeInterface g_iface;

  /* Set up (or find again, after a restart) the sandbox's interface. */
  BoxNetAttachment *(*attach)     (BoxNetwork *self, const char *sandbox_id, GError **error);
  /* Give the attachment made for @old_id (e.g. a warm pool slot) to @new_id. */
  gboolean          (*rebind)     (BoxNetwork *self, const char *old_id, const char *new_id,
                                   GError **error);
  /* Tear it down; idempotent. */
  gboolean          (*detach)     (BoxNetwork *self, const char *sandbox_id, GError **error);
  /* BoxRule*, expanded; applies at once and cuts what the rules no longer allow. */
  gboolean          (*set_egress) (BoxNetwork *self, const char *sandbox_id, GPtrArray *rules,
                                   GError **error);
  /* BoxNetAllowed*: what the sandbox may reach now on other ports. */
  GPtrArray        *(*list_allowed) (BoxNetwork *self, const char *sandbox_id, GError **error);
  /* Whether non-empty rules are enforced; NULL: they are not. */
  gboolean          (*enforces_egress) (BoxNetwork *self);
  /* The broker to hand brokered TLS connections to: once at start, and
   * NULL at stop before any plugin stops. */
  void              (*set_broker)      (BoxNetwork *self, BoxBroker *broker);
  /* Whether the sandbox's TCP 443 goes through the node to be checked
   * against box_broker_wants(); applies at once. */
  gboolean          (*set_brokered)    (BoxNetwork *self, const char *sandbox_id,
                                        gboolean brokered, GError **error);

  /*< private >*/
  gpointer padding[12];
};

/**
 * box_network_attach:
 * @self: the network
 * @sandbox_id: the sandbox
 * @error: why it failed
 *
 * Returns: (transfer full) (nullable): the sandbox's interface
 */
BOX_PLUGIN_API
BoxNetAttachment *box_network_attach     (BoxNetwork *self, const char *sandbox_id, GError **error);
BOX_PLUGIN_API
gboolean          box_network_rebind     (BoxNetwork *self, const char *old_id, const char *new_id,
                                          GError **error);
BOX_PLUGIN_API
gboolean          box_network_detach     (BoxNetwork *self, const char *sandbox_id, GError **error);
/**
 * box_network_set_egress:
 * @self: the network
 * @sandbox_id: the sandbox
 * @error: why it failed
 * @rules: (element-type BoxRule): the rules, "defaults" expanded; empty:
 *   the whole internet
 */
BOX_PLUGIN_API
gboolean          box_network_set_egress (BoxNetwork *self, const char *sandbox_id, GPtrArray *rules,
                                          GError **error);
/**
 * box_network_list_allowed:
 * @self: the network
 * @sandbox_id: the sandbox
 * @error: why it failed: %BOX_ERROR_UNSUPPORTED when the plugin does not
 *   implement it, %BOX_ERROR_NOT_FOUND for a sandbox without an attachment
 *
 * The addresses a restricted sandbox may reach now on ports other than 80
 * and 443 (those are checked by name, not by address): each address it
 * resolved from a name allowed on a port, with that port and the seconds
 * left of the answer's TTL.  Empty for an unrestricted sandbox (it may
 * reach every public address) and for a restricted one that resolved
 * nothing lately.  Blocks for a few milliseconds (the kernel is asked).
 *
 * Returns: (transfer container) (element-type BoxNetAllowed) (nullable):
 *   the allowed addresses, freeing their elements; %NULL on error
 */
BOX_PLUGIN_API
GPtrArray        *box_network_list_allowed (BoxNetwork *self, const char *sandbox_id,
                                            GError **error);

/**
 * box_network_enforces_egress:
 * @self: the network
 *
 * Returns: whether set_egress() enforces a non-empty rule list; when it
 *   does not, rules are refused (501 unsupported) rather than stored
 *   unenforced
 */
BOX_PLUGIN_API
gboolean          box_network_enforces_egress (BoxNetwork *self);
/**
 * box_network_set_broker:
 * @self: the network
 * @broker: (nullable): the secrets broker
 *
 * Gives the network the broker that takes TLS connections to secrets'
 * hosts (see box-broker.h); the engine calls it once at start.  A network
 * that cannot hand connections over ignores it, and then
 * box_network_set_brokered() fails.  At stop, before any plugin stops, the
 * engine sets it to %NULL (a call to the broker already under way may
 * still finish; a stopped broker refuses it and closes its sockets).
 */
BOX_PLUGIN_API
void              box_network_set_broker (BoxNetwork *self, BoxBroker *broker);
/**
 * box_network_set_brokered:
 * @self: the network
 * @sandbox_id: the sandbox
 * @brokered: whether it uses secrets
 * @error: why it failed
 *
 * Sends the sandbox's TCP connections to port 443 through the node, where
 * those whose server name box_broker_wants() are handed to the broker and
 * every other one is passed on as it is (and still checked against the
 * sandbox's egress rules); or stops doing so.  Applies at once, also to a
 * sandbox attached later under the same id.
 *
 * Returns: %TRUE on success; %BOX_ERROR_UNSUPPORTED when the network
 *   cannot
 */
BOX_PLUGIN_API
gboolean          box_network_set_brokered (BoxNetwork *self, const char *sandbox_id,
                                            gboolean brokered, GError **error);

G_END_DECLS
