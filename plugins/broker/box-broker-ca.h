/* box-broker-ca.h: the broker's CA and the leaf certificates it mints.
 *
 * Thread-safe: the pump's thread mints leaves while the main thread may
 * rotate the CA.
 */
#pragma once

#include <glib.h>
#include <gnutls/gnutls.h>

G_BEGIN_DECLS

/* Leaves kept in memory at once; the least recently used goes first. */
#define BOX_BROKER_CA_LEAF_CACHE 1024

typedef struct _BoxBrokerCa BoxBrokerCa;
/* A leaf for one name: credentials for a TLS server, referenced. */
typedef struct _BoxBrokerLeaf BoxBrokerLeaf;

/* Loads the CA from @key_path and @cert_path, or creates both (the key
 * 0600) when neither exists; one without the other is an error. */
BoxBrokerCa *box_broker_ca_open   (const char *key_path, const char *cert_path, GError **error);
void         box_broker_ca_free   (BoxBrokerCa *ca);
/* The CA certificate, PEM. */
GBytes      *box_broker_ca_get_pem (BoxBrokerCa *ca);
/* A new key and certificate, written atomically over the old ones; the
 * cached leaves are forgotten. */
gboolean     box_broker_ca_rotate (BoxBrokerCa *ca, GError **error);
/* The leaf for @name (a DNS name or an IP literal), from the cache or
 * minted now. */
BoxBrokerLeaf *box_broker_ca_leaf (BoxBrokerCa *ca, const char *name, GError **error);
/* How many leaves the cache holds (tests). */
guint        box_broker_ca_cached (BoxBrokerCa *ca);

BoxBrokerLeaf *box_broker_leaf_ref   (BoxBrokerLeaf *leaf);
void           box_broker_leaf_unref (BoxBrokerLeaf *leaf);
gnutls_certificate_credentials_t box_broker_leaf_get_credentials (BoxBrokerLeaf *leaf);
/* The leaf certificate, PEM (tests). */
GBytes        *box_broker_leaf_get_pem (BoxBrokerLeaf *leaf);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxBrokerCa, box_broker_ca_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxBrokerLeaf, box_broker_leaf_unref)

G_END_DECLS
