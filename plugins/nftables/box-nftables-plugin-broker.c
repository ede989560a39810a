/* box-nftables-plugin-broker.c: the nftables plugin's part in the secrets
 * broker (box-broker.h): the broker it hands TLS connections to, and the
 * sandboxes whose TCP 443 goes through the proxy for it (@brokered).
 *
 * Brokered is kept by sandbox ID, attached or not: an ID set before its
 * attach (or before the rebind that gives it a warm slot) is applied then;
 * a detach forgets it (the engine sets it again when the sandbox wakes). */
#include "config.h"

#include "box-error.h"
#include "box-nftables-plugin-private.h"
#include "box-nftables-ruleset.h"

gboolean
box_nftables_plugin_is_brokered (BoxNftablesPlugin *self, const char *sandbox_id)
{
  return g_hash_table_contains (self->brokered, sandbox_id);
}

gboolean
box_nftables_plugin_sync_brokered (BoxNftablesPlugin *self, const BoxNftablesRecord *record,
                                   GError **error)
{
  g_autofree char *commands =
    box_nftables_ruleset_set_brokered (self->table, record->ifname,
                                       box_nftables_plugin_is_brokered (self, record->id));

  return box_nftables_nft_run (self->nft, commands, error);
}

void
box_nftables_plugin_set_broker (BoxNetwork *network, BoxBroker *broker)
{
  BoxNftablesPlugin *self = BOX_NFTABLES_PLUGIN (network);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  g_set_object (&self->broker, broker);
  if (self->proxy != NULL)
    box_nftables_proxy_set_broker (self->proxy, broker);
}

gboolean
box_nftables_plugin_set_brokered (BoxNetwork *network, const char *sandbox_id,
                                  gboolean brokered, GError **error)
{
  BoxNftablesPlugin *self = BOX_NFTABLES_PLUGIN (network);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  BoxNftablesRecord *record;

  if (!box_nftables_plugin_check_call (self, sandbox_id, error))
    return FALSE;
  if (brokered && self->broker == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                         "the nftables network plugin has no secrets broker to hand "
                         "connections to");
    return FALSE;
  }
  record = g_hash_table_lookup (self->records, sandbox_id);
  if (record != NULL) {
    g_autofree char *commands = box_nftables_ruleset_set_brokered (self->table, record->ifname,
                                                                   brokered);

    /* the kernel first: a failure changes nothing */
    if (!box_nftables_nft_run (self->nft, commands, error))
      return FALSE;
  }
  if (brokered)
    g_hash_table_add (self->brokered, g_strdup (sandbox_id));
  else
    g_hash_table_remove (self->brokered, sandbox_id);
  return TRUE;
}
