/* box-nftables-record.h: one sandbox's network attachment, as kept in
 * <state dir>/<sandbox id>.json so that a restarted boxd finds its taps
 * and subnets again. */
#pragma once

#include "box-network.h"
#include "box-nftables-pool.h"

G_BEGIN_DECLS

typedef struct {
  char              *id;          /* the sandbox it belongs to now (the file name) */
  char              *ifname;
  char              *mac;
  BoxNftablesSubnet  subnet;
  GPtrArray         *egress;      /* BoxRule*, as last set; empty = whole internet */
  gint64             created_at;
} BoxNftablesRecord;

BoxNftablesRecord *box_nftables_record_new      (const char *id);
void               box_nftables_record_free     (BoxNftablesRecord *record);
/* Written atomically (rename) and synced. */
gboolean           box_nftables_record_save     (const BoxNftablesRecord *record,
                                                 const char *dir, GError **error);
BoxNftablesRecord *box_nftables_record_load     (const char *dir, const char *id,
                                                 GError **error);
/* Every <id>.json in @dir; unreadable ones are logged and skipped. */
GPtrArray         *box_nftables_record_load_all (const char *dir);
/* TRUE also when there is no file. */
gboolean           box_nftables_record_remove   (const char *dir, const char *id,
                                                 GError **error);
/* rename(2): the attachment belongs to exactly one of the two IDs at any time. */
gboolean           box_nftables_record_move     (const char *dir, const char *old_id,
                                                 const char *new_id, GError **error);
BoxNetAttachment  *box_nftables_record_to_attachment (const BoxNftablesRecord *record);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxNftablesRecord, box_nftables_record_free)

G_END_DECLS
