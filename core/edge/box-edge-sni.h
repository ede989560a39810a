/* box-edge-sni.h: the server name a TLS client asks for, read from its
 * first record (the ClientHello) before the handshake, as a pure function
 * (unit tested in tests/edge/).  GIO's TLS (GLib 2.74) has no SNI
 * callback, so the edge peeks at the first record, bounded to one record
 * (BOX_EDGE_SNI_MAX bytes), picks the certificate, and then hands the
 * untouched socket to GIO's TLS. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* A TLS record header and the largest plaintext record (RFC 8446 5.1). */
#define BOX_EDGE_SNI_MAX (5 + 16384)

typedef enum {
  BOX_EDGE_SNI_MORE,     /* the first record is not complete yet */
  BOX_EDGE_SNI_DONE,     /* *name is the host name asked for, or NULL when none */
  BOX_EDGE_SNI_NOT_TLS,  /* not a TLS handshake record */
} BoxEdgeSniResult;

/* Reads the first @len bytes a client sent.  A ClientHello spread over
 * more than one record, or one that does not parse, gives DONE with no
 * name (the default certificate); a name is lower-cased, without a
 * trailing dot, and only when it is a plausible host name (letters,
 * digits, '-', '.', at most 253 bytes). */
BoxEdgeSniResult box_edge_sni_parse (const guint8 *data, gsize len, char **name);

G_END_DECLS
