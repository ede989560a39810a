/* box-broker.h: the secrets broker.
 *
 * A broker terminates TLS to a secret's hosts with a certificate from its
 * CA, puts the secret's value into the request (placeholder replacement or
 * an injected header) and forwards it to the real host, verifying the real
 * host's certificate.  It receives plaintext values from the engine, keeps
 * them in its own memory only, and never hands them to a sandbox.
 *
 * Thread contract: every call on the main thread; the proxying itself may
 * run on the plugin's own threads, which call nothing of boxd.
 */
#pragma once

#include "box-export.h"

#include "box-plugin.h"

G_BEGIN_DECLS

typedef struct {
  const BoxSecret *secret;   /* hosts, placeholder, inject */
  GBytes          *value;    /* plaintext */
} BoxBrokeredSecret;

#define BOX_TYPE_BROKER (box_broker_get_type ())
BOX_PLUGIN_API
G_DECLARE_INTERFACE (BoxBroker, box_broker, BOX, BROKER, GObject)

struct _BoxBrokerInterface {
  GTypeInterface g_iface;

  /* The CA certificate (PEM) every sandbox trusts. */
  GBytes   *(*get_ca_pem)   (BoxBroker *self, GError **error);
  /* Replace the set of secrets brokered for a sandbox (BoxBrokeredSecret*);
   * an empty array stops brokering for it.  Applies at once. */
  gboolean  (*set_secrets)  (BoxBroker *self, const char *sandbox_id, GPtrArray *secrets,
                             GError **error);

  gpointer padding[16];
};

/**
 * box_broker_get_ca_pem:
 *
 * Returns: (transfer full) (nullable): the CA certificate sandboxes trust
 */
BOX_PLUGIN_API
GBytes   *box_broker_get_ca_pem  (BoxBroker *self, GError **error);
BOX_PLUGIN_API
gboolean  box_broker_set_secrets (BoxBroker *self, const char *sandbox_id, GPtrArray *secrets,
                                  GError **error);

G_END_DECLS
