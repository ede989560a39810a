/* box-nftables-nflog.h: the kernel's own egress refusals, logged.  The
 * ruleset's forward_restricted chain copies the headers of what it refuses
 * (a reset TCP connection, a dropped UDP datagram or ICMP message) to an
 * NFLOG group, at most a few a second per source address; a thread reads
 * the group over raw nfnetlink and reports each one through
 * box_nftables_egress_report_refused() (its per-sandbox limit applies).
 * README.md, "Logs". */
#pragma once

#include <glib.h>

#include "box-nftables-egress.h"

G_BEGIN_DECLS

#define BOX_NFTABLES_NFLOG_GROUP_DEFAULT 5740
/* IPv4 header (at most 60 bytes) + the first 20 of TCP/UDP */
#define BOX_NFTABLES_NFLOG_SNAPLEN 80

typedef struct {
  guint32 saddr;      /* host byte order */
  guint32 daddr;
  guint8  protocol;   /* IPPROTO_* */
  guint16 dport;      /* TCP/UDP; 0 otherwise or for a later fragment */
} BoxNftablesNflogPacket;

typedef void (*BoxNftablesNflogFunc) (const BoxNftablesNflogPacket *packet, gpointer user_data);

/* Walks one datagram read from the group: every NFULNL_MSG_PACKET whose
 * payload is a well-formed IPv4 header goes to @func; anything malformed
 * (short, lying lengths, other messages) is skipped.  Returns how many
 * went to @func. */
guint    box_nftables_nflog_parse        (const guint8 *buf, gsize len, BoxNftablesNflogFunc func,
                                          gpointer user_data);
/* One IPv4 packet's first bytes: FALSE unless a whole, sane header. */
gboolean box_nftables_nflog_parse_ipv4   (const guint8 *data, gsize len,
                                          BoxNftablesNflogPacket *packet);
/* "tcp", "udp", "icmp" or "ip" */
const char *box_nftables_nflog_kind      (guint8 protocol);

typedef struct _BoxNftablesNflog BoxNftablesNflog;

/* Binds @group in this network namespace and starts the reader thread,
 * which reports to @egress (which must outlive it). */
BoxNftablesNflog *box_nftables_nflog_new  (BoxNftablesEgress *egress, guint16 group,
                                           GError **error);
/* Stops and joins the thread, unbinds, closes. */
void              box_nftables_nflog_free (BoxNftablesNflog *nflog);
/* Packets read from the group so far (any thread). */
guint             box_nftables_nflog_get_received (BoxNftablesNflog *nflog);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNftablesNflog, box_nftables_nflog_free)

G_END_DECLS
