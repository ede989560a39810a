/* box-nftables-sni.h: the name a restricted sandbox's connection is for,
 * read from its first bytes by the name-checking proxy
 * (box-nftables-proxy.c): the TLS ClientHello's server name on port 443,
 * the HTTP/1.x request head's Host on port 80.
 *
 * Pure, bounded functions over bytes from a guest (hostile): they read at
 * most @len bytes, never allocate more than the name they return, and are
 * fuzzed (tests/fuzz/fuzz-sni.c).  The caller feeds everything read so far
 * (at most BOX_NFTABLES_SNI_MAX bytes) until the answer is not MORE.
 *
 * Both are strict where a lax reading would let the name checked differ
 * from the name the server acts on: a second server name or Host, header
 * folding, a bare CR or LF, a NUL, or a name byte outside letters, digits,
 * '-', '_' and '.' is BAD.  An encrypted ClientHello (ECH) is read by its
 * outer server name, which is what the node connects to.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The most bytes the proxy reads before it must know the name. */
#define BOX_NFTABLES_SNI_MAX 16384

typedef enum {
  BOX_NFTABLES_SNI_MORE,  /* complete so far; read more (within BOX_NFTABLES_SNI_MAX) */
  BOX_NFTABLES_SNI_DONE,  /* *name is set: lower case, port stripped */
  BOX_NFTABLES_SNI_BAD,   /* refuse; *reason says why (a static string) */
} BoxNftablesSniResult;

/* The reason of a well-formed ClientHello without a server name (the
 * proxy compares the pointer: such a hello may pass where no name is
 * checked). */
extern const char box_nftables_sni_no_name[];

/* The server name of a ClientHello that may span several TLS records.
 * A hello without a server name is BAD (box_nftables_sni_no_name). */
BoxNftablesSniResult box_nftables_sni_parse_tls  (const guint8 *data, gsize len, char **name,
                                                  const char **reason);

/* The host of an HTTP/1.0 or 1.1 request head (up to the empty line): the
 * Host header, which must be there once; an absolute-URI request target
 * (`GET http://host/`) must name the same host.  CONNECT is BAD, and so
 * is an Upgrade header naming any protocol but WebSocket (h2c, TLS). */
BoxNftablesSniResult box_nftables_sni_parse_http (const guint8 *data, gsize len, char **host,
                                                  const char **reason);

/* A head that box_nftables_sni_parse_http() accepted (with whatever
 * followed it), rewritten so that the server answers this one request and
 * closes: every Connection, Keep-Alive and Proxy-Connection header dropped,
 * "Connection: close" added ("Connection: upgrade, close" when the request
 * asks for an Upgrade), the bytes after the head unchanged.  Only the first
 * request of a connection is checked, so a second one (another Host, maybe
 * served from the same address) must never be served on it: RFC 9112 9.6,
 * a server MUST NOT process further requests after "close". */
GByteArray *box_nftables_sni_http_close (const guint8 *data, gsize len);

G_END_DECLS
