/* box-nftables-nft.h: a libnftables context behind a mutex.
 *
 * Each call runs one buffer of nft commands as one transaction over
 * netlink; it blocks for a few milliseconds, so call it from a worker
 * thread (the hypervisor plugin's) or from start().  Errors come back as
 * BOX_ERROR_INTERNAL with nft's own message. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _BoxNftablesNft BoxNftablesNft;

BoxNftablesNft *box_nftables_nft_new  (GError **error);
void            box_nftables_nft_free (BoxNftablesNft *nft);
gboolean        box_nftables_nft_run  (BoxNftablesNft *nft, const char *commands,
                                       GError **error);
/* The output of a listing command (e.g. "list set inet box taps"). */
char           *box_nftables_nft_list (BoxNftablesNft *nft, const char *command,
                                       GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNftablesNft, box_nftables_nft_free)

G_END_DECLS
