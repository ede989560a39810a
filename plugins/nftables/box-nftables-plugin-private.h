/* box-nftables-plugin-private.h: the nftables plugin's state, shared by
 * box-nftables-plugin.c (attachments, the table, start/stop) and
 * box-nftables-plugin-egress.c (egress rules).  Internal. */
#pragma once

#include "box-nftables-dns.h"
#include "box-nftables-egress.h"
#include "box-nftables-history.h"
#include "box-nftables-nflog.h"
#include "box-nftables-nft.h"
#include "box-nftables-plugin.h"
#include "box-nftables-pool.h"
#include "box-nftables-proxy.h"
#include "box-nftables-record.h"

G_BEGIN_DECLS

struct _BoxNftablesPlugin {
  BoxPlugin            parent_instance;

  GMutex               lock;          /* everything below; held across kernel calls */
  gboolean             started;
  GHashTable          *records;       /* sandbox id -> BoxNftablesRecord* */
  BoxNftablesPool      pool;
  char                *pool_cidr;
  char                *table;
  char                *ifname_prefix;
  guint16              dns_port;
  guint16              proxy_http_port;
  guint16              proxy_tls_port;
  guint16              log_group;
  char               **dns_upstream;
  char               **blocked;
  uid_t                tap_owner;
  BoxNftablesNft      *nft;
  BoxNftablesDns      *dns;           /* its thread; freed outside the lock (see stop()) */
  BoxNftablesProxy    *proxy;         /* the name check of 80 and 443; the same */
  BoxNftablesNflog    *nflog;         /* the kernel's refusals, or NULL; the same */
  BoxNftablesEgress   *egress;        /* its own lock; set while started */
  BoxNftablesHistory  *history;       /* what restricted guests resolved */
  GHashTable          *pending;       /* id -> GPtrArray of BoxRule: rules for an ID not attached yet */
  BoxBroker           *broker;        /* set_broker(), or NULL; the proxy has it too */
  GHashTable          *brokered;      /* ids using secrets, attached or not: 443 to the proxy */

  BoxNftablesLinkFunc  link_func;     /* tests only */
  gpointer             link_data;
};

/* box-nftables-plugin-egress.c; with the lock held unless said otherwise */

/* start(): a new registry and history, its hooks set; stop(): gone. */
void       box_nftables_plugin_egress_start (BoxNftablesPlugin *self);
void       box_nftables_plugin_egress_stop  (BoxNftablesPlugin *self);
/* Any rule at all. */
gboolean   box_nftables_record_is_restricted (const BoxNftablesRecord *record);
/* Registers the record's guest with its compiled rules; fails (changing
 * nothing) on rules that do not compile. */
gboolean   box_nftables_plugin_register     (BoxNftablesPlugin *self, BoxNftablesRecord *record,
                                             GError **error);
/* Rules set for the record's ID before it was attached become its own
 * (saved); they stay pending until the attach succeeds. */
gboolean   box_nftables_plugin_take_pending (BoxNftablesPlugin *self, BoxNftablesRecord *record,
                                             GError **error);
/* New rules for an attached sandbox, at once (see the .c). */
gboolean   box_nftables_plugin_apply_egress (BoxNftablesPlugin *self, BoxNftablesRecord *record,
                                             GPtrArray *rules, GError **error);
/* A rebind moved @record to its new ID: rules given for that ID (the
 * engine sets them before the VM is taken from a warm pool) apply now,
 * before the VM runs the sandbox's code; otherwise the old rules stay,
 * registered under the new ID. */
gboolean   box_nftables_plugin_rebound      (BoxNftablesPlugin *self, BoxNftablesRecord *record,
                                             GError **error);
/* The guest is detached: out of the registry and the history, and the
 * commands deleting its @resolved elements appended to @commands (its
 * address goes to the next sandbox, which must not inherit them). */
void       box_nftables_plugin_forget_guest (BoxNftablesPlugin *self, BoxNftablesRecord *record,
                                             GString *commands);
/* set_egress() for an ID without an attachment: kept until its attach. */
void       box_nftables_plugin_set_pending  (BoxNftablesPlugin *self, const char *sandbox_id,
                                             GPtrArray *rules);

/* box-nftables-plugin.c: a valid ID and a started plugin (with the lock held) */
gboolean   box_nftables_plugin_check_call   (BoxNftablesPlugin *self, const char *sandbox_id,
                                             GError **error);

/* box-nftables-plugin-broker.c; with the lock held */

/* Whether @sandbox_id's TCP 443 goes to the proxy for the broker. */
gboolean   box_nftables_plugin_is_brokered  (BoxNftablesPlugin *self, const char *sandbox_id);
/* The record's membership in @brokered made to match its ID's (after an
 * attach or a rebind). */
gboolean   box_nftables_plugin_sync_brokered (BoxNftablesPlugin *self,
                                              const BoxNftablesRecord *record, GError **error);
/* BoxNetwork's set_broker and set_brokered; they take the lock. */
void       box_nftables_plugin_set_broker   (BoxNetwork *network, BoxBroker *broker);
gboolean   box_nftables_plugin_set_brokered (BoxNetwork *network, const char *sandbox_id,
                                             gboolean brokered, GError **error);

G_END_DECLS
