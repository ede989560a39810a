/* box-edge-server.h: the edge, where sandbox and port URLs are answered.
 *
 * A TLS listener (edge_listen, off when not set) in front of the
 * sandboxes' ports: each connection's ClientHello is peeked at for its
 * server name (box-edge-sni.h), then it is handshaken (TLS 1.2 or 1.3,
 * ALPN http/1.1, the certificate box-edge-certs.h gives for that name),
 * both within the header timeout,
 * and then served by box-edge-conn.h.  It calls the engine as the HTTP API
 * does and is no part of its route table. */
#pragma once

#include <gio/gio.h>

#include "box-acme.h"
#include "box-edge-certs.h"
#include "box-engine.h"

G_BEGIN_DECLS

/* The GnuTLS priority string boxd sets for GIO's TLS (unless
 * G_TLS_GNUTLS_PRIORITY is set already): TLS 1.2 and 1.3 only. */
#define BOX_EDGE_TLS_PRIORITY "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

#define BOX_TYPE_EDGE_SERVER (box_edge_server_get_type ())
G_DECLARE_FINAL_TYPE (BoxEdgeServer, box_edge_server, BOX, EDGE_SERVER, GObject)

/* Sets the TLS priority for the process; call before any TLS is used. */
void           box_edge_server_init_tls  (void);
BoxEdgeServer *box_edge_server_new       (BoxEngine *engine, BoxEdgeCerts *certs);
/* Handshakes for hosts under own domains without a certificate wait for
 * @acme to get one (box-acme.h); NULL: never. */
void           box_edge_server_set_acme  (BoxEdgeServer *self, BoxAcme *acme);
/* @address (HOST:PORT, HOST an IP address or localhost) as a socket
 * address; BOX_ERROR_INVALID naming the config @key when it is not. */
GSocketAddress *box_edge_listen_address  (const char *address, const char *key, GError **error);
/* Listens on @address (HOST:PORT; port 0 picks one). */
gboolean       box_edge_server_listen    (BoxEdgeServer *self, const char *address, GError **error);
/* Connections open now, from accept (the handshake counts) to their end:
 * past the config's edge_max_connections new ones are closed at once. */
guint          box_edge_server_get_open  (BoxEdgeServer *self);
guint          box_edge_server_get_port  (BoxEdgeServer *self);
/* Stops listening and ends every connection. */
void           box_edge_server_shutdown  (BoxEdgeServer *self);

G_END_DECLS
