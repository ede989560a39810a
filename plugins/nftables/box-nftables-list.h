/* box-nftables-list.h: the addresses a restricted sandbox may reach on
 * ports other than 80 and 443, read back from the kernel.
 *
 * The resolver fills the set `resolved` of `table inet <table>` (type
 * ipv4_addr . ipv4_addr . inet_service, flags timeout) with guest address .
 * resolved address . port, each element timing out with its DNS answer's
 * TTL.  This lists that set through libnftables' JSON output and keeps the
 * elements of one guest, with the seconds each has left: the operator's
 * view (BoxNetwork's list_allowed, boxctl egress). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The most elements one listing returns for a guest (the resolver bounds
 * what it adds; this bounds what an operator's call can cost). */
#define BOX_NFTABLES_LIST_MAX 65536

/* `nft -j list set inet <table> resolved` output -> BoxNetAllowed* of
 * @guest (dotted IPv4), sorted by address then port.  Elements without a
 * timeout have expires_s G_MAXUINT.  Output that is not such a listing is
 * BOX_ERROR_INTERNAL. */
GPtrArray *box_nftables_list_parse    (const char *json, const char *guest, GError **error);
/* Runs the listing with a libnftables context of its own (JSON output;
 * the plugin's shared context stays in text mode) and parses it.  Blocks
 * for a few milliseconds. */
GPtrArray *box_nftables_list_resolved (const char *table, const char *guest, GError **error);

G_END_DECLS
