/* box-network.c: the BoxNetwork interface; see box-network.h. */
#include "config.h"

#include "box-network.h"

G_DEFINE_INTERFACE (BoxNetwork, box_network, G_TYPE_OBJECT)

static void
box_network_default_init (BoxNetworkInterface *iface)
{}

BoxNetAttachment *
box_network_attach (BoxNetwork *self, const char *sandbox_id, GError **error)
{
  BoxNetworkInterface *iface;

  g_return_val_if_fail (BOX_IS_NETWORK (self), NULL);
  iface = BOX_NETWORK_GET_IFACE (self);
  if (iface->attach == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement attach", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->attach (self, sandbox_id, error);
}

gboolean
box_network_rebind (BoxNetwork *self, const char *old_id, const char *new_id, GError **error)
{
  BoxNetworkInterface *iface;

  g_return_val_if_fail (BOX_IS_NETWORK (self), FALSE);
  iface = BOX_NETWORK_GET_IFACE (self);
  if (iface->rebind == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement rebind", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->rebind (self, old_id, new_id, error);
}

gboolean
box_network_detach (BoxNetwork *self, const char *sandbox_id, GError **error)
{
  BoxNetworkInterface *iface;

  g_return_val_if_fail (BOX_IS_NETWORK (self), FALSE);
  iface = BOX_NETWORK_GET_IFACE (self);
  if (iface->detach == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement detach", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->detach (self, sandbox_id, error);
}

gboolean
box_network_set_egress (BoxNetwork *self, const char *sandbox_id, GPtrArray *rules, GError **error)
{
  BoxNetworkInterface *iface;

  g_return_val_if_fail (BOX_IS_NETWORK (self), FALSE);
  iface = BOX_NETWORK_GET_IFACE (self);
  if (iface->set_egress == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement set_egress", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->set_egress (self, sandbox_id, rules, error);
}

GPtrArray *
box_network_list_allowed (BoxNetwork *self, const char *sandbox_id, GError **error)
{
  BoxNetworkInterface *iface;

  g_return_val_if_fail (BOX_IS_NETWORK (self), NULL);
  iface = BOX_NETWORK_GET_IFACE (self);
  if (iface->list_allowed == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement list_allowed", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->list_allowed (self, sandbox_id, error);
}

gboolean
box_network_enforces_egress (BoxNetwork *self)
{
  BoxNetworkInterface *iface;

  g_return_val_if_fail (BOX_IS_NETWORK (self), FALSE);
  iface = BOX_NETWORK_GET_IFACE (self);
  return iface->enforces_egress != NULL && iface->enforces_egress (self);
}

void
box_net_attachment_free (BoxNetAttachment *attachment)
{
  if (attachment == NULL)
    return;
  g_free (attachment->ifname);
  g_free (attachment->mac);
  g_free (attachment->address);
  g_free (attachment->gateway);
  g_strfreev (attachment->dns);
  g_free (attachment);
}

BoxNetAttachment *
box_net_attachment_copy (const BoxNetAttachment *attachment)
{
  BoxNetAttachment *copy;

  if (attachment == NULL)
    return NULL;
  copy = g_new0 (BoxNetAttachment, 1);
  copy->ifname = g_strdup (attachment->ifname);
  copy->mac = g_strdup (attachment->mac);
  copy->address = g_strdup (attachment->address);
  copy->prefix = attachment->prefix;
  copy->gateway = g_strdup (attachment->gateway);
  copy->dns = g_strdupv (attachment->dns);
  return copy;
}

G_DEFINE_BOXED_TYPE (BoxNetAttachment, box_net_attachment, box_net_attachment_copy,
                     box_net_attachment_free)

void
box_net_allowed_free (BoxNetAllowed *allowed)
{
  if (allowed == NULL)
    return;
  g_free (allowed->address);
  g_free (allowed);
}

BoxNetAllowed *
box_net_allowed_copy (const BoxNetAllowed *allowed)
{
  BoxNetAllowed *copy;

  if (allowed == NULL)
    return NULL;
  copy = g_new0 (BoxNetAllowed, 1);
  copy->address = g_strdup (allowed->address);
  copy->port = allowed->port;
  copy->expires_s = allowed->expires_s;
  return copy;
}

G_DEFINE_BOXED_TYPE (BoxNetAllowed, box_net_allowed, box_net_allowed_copy, box_net_allowed_free)

void
box_network_set_broker (BoxNetwork *self, BoxBroker *broker)
{
  BoxNetworkInterface *iface;

  g_return_if_fail (BOX_IS_NETWORK (self));
  iface = BOX_NETWORK_GET_IFACE (self);
  if (iface->set_broker != NULL)
    iface->set_broker (self, broker);
}

gboolean
box_network_set_brokered (BoxNetwork *self, const char *sandbox_id, gboolean brokered,
                          GError **error)
{
  BoxNetworkInterface *iface;

  g_return_val_if_fail (BOX_IS_NETWORK (self), FALSE);
  iface = BOX_NETWORK_GET_IFACE (self);
  if (iface->set_brokered == NULL) {
    if (!brokered)
      return TRUE;
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s cannot send connections to the secrets broker", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->set_brokered (self, sandbox_id, brokered, error);
}
