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

/**
 * BoxBrokeredSecret:
 * @secret: the secret's hosts, placeholder and injection; borrowed
 * @value: the plaintext; borrowed
 *
 * One secret a broker injects for a sandbox.  A boxed type whose copy is
 * shallow (the members are borrowed).
 */
typedef struct {
  const BoxSecret *secret;   /* hosts, placeholder, inject */
  GBytes          *value;    /* plaintext */
} BoxBrokeredSecret;

#define BOX_TYPE_BROKERED_SECRET (box_brokered_secret_get_type ())
BOX_PLUGIN_API
GType box_brokered_secret_get_type (void) G_GNUC_CONST;
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxBrokeredSecret, g_free)

/**
 * BoxBrokerInterface:
 * @g_iface: the parent interface
 * @get_ca_pem: the CA certificate (PEM) every sandbox trusts
 * @set_secrets: replaces the set of secrets brokered for a sandbox
 *   (#BoxBrokeredSecret); an empty array stops brokering for it; applies at
 *   once
 *
 * The virtual methods of a secrets broker.
 */

/**
 * BoxBroker:
 *
 * The secrets broker: a TLS-intercepting proxy that puts secrets into a
 * sandbox's outgoing requests, so that the sandbox only ever sees
 * placeholders.
 */
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

  /*< private >*/
  gpointer padding[16];
};

/**
 * box_broker_get_ca_pem:
 * @self: the broker
 * @error: why there is none
 *
 * Returns: (transfer full) (nullable): the CA certificate sandboxes trust
 */
BOX_PLUGIN_API
GBytes   *box_broker_get_ca_pem  (BoxBroker *self, GError **error);
/**
 * box_broker_set_secrets:
 * @self: the broker
 * @sandbox_id: the sandbox
 * @secrets: (element-type BoxBrokeredSecret): what to broker; empty: none
 * @error: why it failed
 *
 * Replaces the set of secrets brokered for @sandbox_id; applies at once.
 *
 * Returns: %TRUE on success
 */
BOX_PLUGIN_API
gboolean  box_broker_set_secrets (BoxBroker *self, const char *sandbox_id, GPtrArray *secrets,
                                  GError **error);

G_END_DECLS
