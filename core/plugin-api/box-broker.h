/* box-broker.h: the secrets broker.
 *
 * A broker terminates TLS to a secret's hosts with a certificate from its
 * CA, puts the secret's value into the request (placeholder replacement or
 * an injected header) and forwards it to the real host, verifying the real
 * host's certificate.  It receives plaintext values from the engine, keeps
 * them in its own memory only, and never hands them to a sandbox.
 *
 * Thread contract: every call on the main thread, except wants() and
 * take_connection(), which the network plugin calls from its own threads;
 * the proxying itself runs on the broker's own threads, which call nothing
 * of boxd.
 *
 * How connections reach it: the engine hands the broker to the network
 * plugin (box_network_set_broker()) and marks the sandboxes that use
 * secrets (box_network_set_brokered()); the network sends those sandboxes'
 * TCP port 443 through its node-side proxy, which reads the ClientHello's
 * server name, asks wants(), and for a brokered name connects to the real
 * host itself (its egress rules and blocked networks apply as for any
 * connection) and hands both sockets over with take_connection().  Every
 * other connection is spliced as it is, never decrypted.
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
 * @wants: whether a connection from a sandbox to a host's port 443 is
 *   brokered; any thread
 * @take_connection: takes over an intercepted connection; any thread
 * @rotate_ca: replaces the CA
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
  /* Whether @sandbox_id's connections to @host (a TLS server name, port
   * 443) are brokered: a secret it uses names the host.  Any thread. */
  gboolean  (*wants)        (BoxBroker *self, const char *sandbox_id, const char *host);
  /* Takes over an intercepted connection; owns both descriptors from the
   * call on, also when it fails.  Any thread. */
  gboolean  (*take_connection) (BoxBroker *self, const char *sandbox_id, const char *host,
                                int client_fd, GBytes *client_head, int upstream_fd,
                                GError **error);
  /* A new CA from now on; the old one mints no more leaves. */
  gboolean  (*rotate_ca)    (BoxBroker *self, GError **error);

  /*< private >*/
  gpointer padding[13];
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

/**
 * box_broker_wants:
 * @self: the broker
 * @sandbox_id: the sandbox the connection comes from
 * @host: the server name of its ClientHello (lowercase)
 *
 * Safe from any thread.
 *
 * Returns: %TRUE when a secret @sandbox_id uses names @host, so that the
 *   connection is to be handed over with box_broker_take_connection()
 */
BOX_PLUGIN_API
gboolean  box_broker_wants       (BoxBroker *self, const char *sandbox_id, const char *host);
/**
 * box_broker_take_connection:
 * @self: the broker
 * @sandbox_id: the sandbox the connection comes from
 * @host: the server name of its ClientHello, for which box_broker_wants()
 *   answered %TRUE
 * @client_fd: the sandbox's TCP connection (nonblocking)
 * @client_head: (nullable): what was already read from it (the start of
 *   the ClientHello); the broker reads it first
 * @upstream_fd: a TCP connection to the real host's port 443, connected
 *   (nonblocking)
 * @error: why it failed
 *
 * Hands an intercepted connection to the broker, which terminates the
 * sandbox's TLS with a leaf of its CA, opens TLS to the real host
 * (verified against its trust store) and puts the secrets' values into
 * the requests.  The broker owns both descriptors from the call on and
 * closes them itself, also when it fails.  Safe from any thread.
 *
 * Returns: %TRUE when the broker took the connection
 */
BOX_PLUGIN_API
gboolean  box_broker_take_connection (BoxBroker *self, const char *sandbox_id, const char *host,
                                      int client_fd, GBytes *client_head, int upstream_fd,
                                      GError **error);
/**
 * box_broker_rotate_ca:
 * @self: the broker
 * @error: why it failed
 *
 * Creates a new CA and mints every later leaf with it; the old CA's leaves
 * are forgotten.  The engine then installs the new CA in every awake
 * sandbox that uses secrets (box_broker_get_ca_pem()).
 *
 * Returns: %TRUE on success
 */
BOX_PLUGIN_API
gboolean  box_broker_rotate_ca   (BoxBroker *self, GError **error);

G_END_DECLS
