/* box-acme.h: certificates for own domains from an ACME server (RFC 8555).
 *
 * With acme=true the edge orders a certificate for a host name under a
 * project's own domain the first time a TLS client asks for it (server
 * name) and none is there yet: account key in
 * <data-dir>/tls/acme-account-key.pem (ECDSA P-256, 0600), one order per
 * host with the http-01 challenge answered by the edge's plain-HTTP
 * listener (box-edge-challenges.h), a fresh key per certificate; the
 * chain and key go to <data-dir>/tls/acme/<host>.pem and <host>-key.pem
 * (0600), written atomically, and are served through box_edge_certs_set().
 * Those files are loaded again at start.  A timer renews a certificate
 * when less than acme_renew_percent of its lifetime is left; a failed
 * order (or renewal) keeps what was there and is tried again after a
 * back-off (1 min, doubling, at most a day).
 *
 * Bounds: one order per host at a time, at most acme_max_concurrent
 * orders at once and acme_orders_per_hour started in any hour; a host
 * refused by these or in its back-off gets the default certificate.
 * Every answer of the server is bounded (64 KiB), each request times out,
 * an order gives up after BOX_ACME_ORDER_S.  The crypto is
 * box-acme-jws.h.  Main thread only. */
#pragma once

#include <gio/gio.h>

#include "box-edge-certs.h"
#include "box-edge-challenges.h"
#include "box-engine.h"

G_BEGIN_DECLS

/* How long a TLS handshake waits for a first certificate at most. */
#define BOX_ACME_WAIT_S   20
/* How long one order may take before it is given up. */
#define BOX_ACME_ORDER_S  120

#define BOX_TYPE_ACME (box_acme_get_type ())
G_DECLARE_FINAL_TYPE (BoxAcme, box_acme, BOX, ACME, GObject)

/* Reads the account key (making one) and the certificates in
 * <data-dir>/tls/acme/, installs those in @certs and starts the renewal
 * timer; the configuration is the engine's (acme_* keys). */
BoxAcme  *box_acme_new           (BoxEngine *engine, BoxEdgeCerts *certs,
                                  BoxEdgeChallenges *challenges, GError **error);
/* Whether a handshake for @server_name should wait for
 * box_acme_ensure_async(): a host under an own domain that has no
 * certificate of its own yet.  @server_name is as box-edge-sni.c gives
 * it (no trailing dot, no more than 253 characters); its labels are
 * checked here. */
gboolean  box_acme_wants         (BoxAcme *self, const char *server_name);
/* Orders a certificate for @host (or joins the order under way) and
 * completes when it is installed, when the order fails or is refused, or
 * after @timeout_s.  Never fails: the result says whether @host has its
 * certificate now. */
void      box_acme_ensure_async  (BoxAcme *self, const char *host, guint timeout_s,
                                  GAsyncReadyCallback callback, gpointer user_data);
gboolean  box_acme_ensure_finish (BoxAcme *self, GAsyncResult *result);
/* Stops the renewal timer and ends the orders under way (their waiters
 * answered), running the main context for that for at most 5 s; for
 * after the main loop. */
void      box_acme_shutdown      (BoxAcme *self);

G_END_DECLS
