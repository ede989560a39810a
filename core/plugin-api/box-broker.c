/* box-broker.c: the BoxBroker interface; see box-broker.h. */
#include "config.h"

#include "box-broker.h"

#include <unistd.h>

G_DEFINE_INTERFACE (BoxBroker, box_broker, G_TYPE_OBJECT)

/* The members are borrowed: the boxed copy is shallow. */
static BoxBrokeredSecret *
box_brokered_secret_copy (const BoxBrokeredSecret *secret)
{
  return g_memdup2 (secret, sizeof *secret);
}

G_DEFINE_BOXED_TYPE (BoxBrokeredSecret, box_brokered_secret, box_brokered_secret_copy, g_free)

static void
box_broker_default_init (BoxBrokerInterface *iface)
{}

GBytes *
box_broker_get_ca_pem (BoxBroker *self, GError **error)
{
  BoxBrokerInterface *iface;

  g_return_val_if_fail (BOX_IS_BROKER (self), NULL);
  iface = BOX_BROKER_GET_IFACE (self);
  if (iface->get_ca_pem == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement get_ca_pem", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->get_ca_pem (self, error);
}

gboolean
box_broker_set_secrets (BoxBroker *self, const char *sandbox_id, GPtrArray *secrets, GError **error)
{
  BoxBrokerInterface *iface;

  g_return_val_if_fail (BOX_IS_BROKER (self), FALSE);
  iface = BOX_BROKER_GET_IFACE (self);
  if (iface->set_secrets == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement set_secrets", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->set_secrets (self, sandbox_id, secrets, error);
}

gboolean
box_broker_wants (BoxBroker *self, const char *sandbox_id, const char *host)
{
  BoxBrokerInterface *iface;

  g_return_val_if_fail (BOX_IS_BROKER (self), FALSE);
  iface = BOX_BROKER_GET_IFACE (self);
  return iface->wants != NULL && iface->wants (self, sandbox_id, host);
}

gboolean
box_broker_take_connection (BoxBroker *self, const char *sandbox_id, const char *host,
                            int client_fd, GBytes *client_head, int upstream_fd, GError **error)
{
  BoxBrokerInterface *iface;

  g_return_val_if_fail (BOX_IS_BROKER (self), FALSE);
  iface = BOX_BROKER_GET_IFACE (self);
  if (iface->take_connection == NULL) {
    /* the descriptors are ours from the call on */
    if (client_fd >= 0)
      close (client_fd);
    if (upstream_fd >= 0)
      close (upstream_fd);
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement take_connection", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->take_connection (self, sandbox_id, host, client_fd, client_head, upstream_fd,
                                 error);
}

gboolean
box_broker_rotate_ca (BoxBroker *self, GError **error)
{
  BoxBrokerInterface *iface;

  g_return_val_if_fail (BOX_IS_BROKER (self), FALSE);
  iface = BOX_BROKER_GET_IFACE (self);
  if (iface->rotate_ca == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s cannot rotate its CA", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->rotate_ca (self, error);
}
