/* box-broker-pump.h: the broker's connections, on one thread of its own.
 *
 * take() may be called from any thread; everything else on the thread that
 * made the pump.
 */
#pragma once

#include <gnutls/gnutls.h>

#include "box-broker-ca.h"
#include "box-broker-secrets.h"

G_BEGIN_DECLS

/* Connections held at once, all sandboxes together; each sandbox may hold
 * its fair share: the cap divided by the sandboxes holding connections. */
#define BOX_BROKER_PUMP_MAX_CONNECTIONS 1024
/* Both TLS handshakes together must be done within this. */
#define BOX_BROKER_PUMP_HANDSHAKE_MS    10000
/* A connection with no byte either way for this long is closed. */
#define BOX_BROKER_PUMP_IDLE_MS         (5 * 60 * 1000)
/* A side is not read while the other side's unsent output is over this. */
#define BOX_BROKER_PUMP_BUFFER          (256 * 1024)

typedef struct _BoxBrokerPump BoxBrokerPump;

/* @trust: what upstream certificates are verified against; borrowed, it
 * must outlive the pump. */
BoxBrokerPump *box_broker_pump_new  (BoxBrokerCa *ca, BoxBrokerSecrets *secrets,
                                     gnutls_certificate_credentials_t trust,
                                     guint max_connections, GError **error);
/* Stops the thread and closes every connection. */
void           box_broker_pump_free (BoxBrokerPump *pump);
/* Takes both descriptors (closed also on failure: BOX_ERROR_CAPACITY when
 * over a cap). */
gboolean       box_broker_pump_take (BoxBrokerPump *pump, const char *sandbox_id, const char *host,
                                     int client_fd, GBytes *client_head, int upstream_fd,
                                     GError **error);
/* The secrets changed: live connections take their new rules before they
 * read anything more, and those of a sandbox with no secret for their host
 * any more are closed. */
void           box_broker_pump_secrets_changed (BoxBrokerPump *pump);
/* Connections open now (any thread). */
guint          box_broker_pump_count (BoxBrokerPump *pump);
/* Tests: shorter timeouts. */
void           box_broker_pump_set_timeouts (BoxBrokerPump *pump, guint handshake_ms, guint idle_ms);

G_END_DECLS
