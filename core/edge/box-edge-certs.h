/* box-edge-certs.h: which certificate the edge serves for a server name.
 *
 * The default certificate is the sandbox domain's (box-edge-cert.h: the
 * operator's edge_cert/edge_key, or one of boxd's own CA); it is served
 * for *.{sandbox_domain}, for no server name and for names nobody gave a
 * certificate for.  Own domains' certificates are operator-given files in
 * <data-dir>/tls/domains/: <domain>.pem (the chain) and <domain>-key.pem;
 * <domain>.pem serves <domain> and every name under it, the longest match
 * winning.  box_edge_certs_set() is the seam for certificates made at run
 * time (ACME): they are looked up after the files, in the same way.
 *
 * box_edge_certs_reload() (SIGHUP, and a file monitor on edge_cert,
 * edge_key and the domains folder after box_edge_certs_watch()) reads
 * everything again: a pair that does not load or does not match is
 * refused with a log line and the old one kept; a domain whose files are
 * gone is dropped.  New handshakes get the new certificates; open
 * connections keep theirs. */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define BOX_TYPE_EDGE_CERTS (box_edge_certs_get_type ())
G_DECLARE_FINAL_TYPE (BoxEdgeCerts, box_edge_certs, BOX, EDGE_CERTS, GObject)

/* @cert_file and @key_file: both or neither, as box_edge_cert_load().
 * Fails when the default certificate does not load; a bad own-domain pair
 * is only logged. */
BoxEdgeCerts    *box_edge_certs_new     (const char *data_dir, const char *sandbox_domain,
                                         const char *cert_file, const char *key_file,
                                         GError **error);
/* The certificate for @server_name (NULL: none was sent); never NULL. */
GTlsCertificate *box_edge_certs_lookup  (BoxEdgeCerts *self, const char *server_name);
/* Whether @server_name has a certificate of its own: an operator's
 * domain file that covers it, or one set for exactly that name. */
gboolean         box_edge_certs_covers  (BoxEdgeCerts *self, const char *server_name);
/* Serves @certificate for @name and the names under it (NULL removes). */
void             box_edge_certs_set     (BoxEdgeCerts *self, const char *name,
                                         GTlsCertificate *certificate);
void             box_edge_certs_reload  (BoxEdgeCerts *self);
/* Reloads on changes of the operator's files and the domains folder. */
void             box_edge_certs_watch   (BoxEdgeCerts *self);

G_END_DECLS
