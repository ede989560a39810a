/* box-broker.c: the BoxBroker interface; see box-broker.h. */
#include "config.h"

#include "box-broker.h"

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
