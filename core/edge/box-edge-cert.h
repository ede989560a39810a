/* box-edge-cert.h: the edge's TLS certificate.
 *
 * With an operator's certificate and key (config edge_cert, edge_key) the
 * edge serves those (reloaded on SIGHUP and on change: box-edge-certs.h).
 * Without, boxd keeps its own certificate authority in
 * <data-dir>/tls/: ca.pem and ca-key.pem (0600), made at the first start
 * (ECDSA P-256, ten years), and from it edge.pem (the leaf, then the CA)
 * and edge-key.pem (0600) for *.{sandbox_domain} and {sandbox_domain},
 * valid a year.  Later starts reuse them; the leaf is issued again when
 * it does not name the configured domain, is not the CA's, or has less
 * than 30 days left.
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define BOX_EDGE_CA_DAYS    3650
#define BOX_EDGE_LEAF_DAYS  365
#define BOX_EDGE_RENEW_DAYS 30

/* The CA's path in @data_dir. */
char            *box_edge_ca_path      (const char *data_dir);
/* @cert_file and @key_file both set: those; both NULL: the own CA's leaf
 * (made or renewed as above).  BOX_ERROR_INVALID when only one is set or
 * they do not load. */
GTlsCertificate *box_edge_cert_load    (const char *data_dir, const char *domain,
                                        const char *cert_file, const char *key_file,
                                        GError **error);

/* The certificate chain at @cert_path with its key: BOX_ERROR_INVALID when
 * either does not load or the key is not the certificate's. */
GTlsCertificate *box_edge_cert_load_pair (const char *cert_path, const char *key_path,
                                          GError **error);

G_END_DECLS
