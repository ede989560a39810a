/* box-network.h: a sandbox's network.
 *
 * A network plugin gives each sandbox an interface (a tap device the
 * hypervisor plugs in; the hypervisor plugin calls attach/rebind/detach), its addresses and NAT to the internet, keeps
 * sandboxes away from the node, the local networks and each other, and
 * enforces egress rules.  set_egress() gets the rules with "defaults"
 * already expanded; an empty array means the whole internet.
 */
#pragma once

#include "box-plugin.h"

G_BEGIN_DECLS

typedef struct {
  char    *ifname;        /* tap device on the host */
  char    *mac;           /* "52:54:00:..." */
  char    *address;       /* guest IPv4 address */
  guint    prefix;        /* guest prefix length */
  char    *gateway;       /* IPv4 gateway (the host side) */
  char   **dns;           /* resolvers the guest uses */
} BoxNetAttachment;

void              box_net_attachment_free (BoxNetAttachment *attachment);
BoxNetAttachment *box_net_attachment_copy (const BoxNetAttachment *attachment);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNetAttachment, box_net_attachment_free)

#define BOX_TYPE_NETWORK (box_network_get_type ())
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

  gpointer padding[16];
};

BoxNetAttachment *box_network_attach     (BoxNetwork *self, const char *sandbox_id, GError **error);
gboolean          box_network_rebind     (BoxNetwork *self, const char *old_id, const char *new_id,
                                          GError **error);
gboolean          box_network_detach     (BoxNetwork *self, const char *sandbox_id, GError **error);
gboolean          box_network_set_egress (BoxNetwork *self, const char *sandbox_id, GPtrArray *rules,
                                          GError **error);

G_END_DECLS
