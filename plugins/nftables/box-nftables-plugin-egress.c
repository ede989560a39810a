/* box-nftables-plugin-egress.c: the nftables plugin's egress rules: the
 * registry and its hooks, rules kept for IDs not attached yet, and new
 * rules applied to an attached sandbox.  README.md, "Egress rules". */
#include "config.h"

#include "box-plugin-context.h"
#include "box-nftables-conntrack.h"
#include "box-nftables-plugin-private.h"
#include "box-nftables-ruleset.h"

gboolean
box_nftables_record_is_restricted (const BoxNftablesRecord *record)
{
  return record->egress->len > 0;
}

gboolean
box_nftables_plugin_register (BoxNftablesPlugin *self, BoxNftablesRecord *record, GError **error)
{
  g_autoptr(BoxEgressPolicy) policy = box_egress_policy_new (record->egress, NULL, error);

  if (policy == NULL)
    return FALSE;
  box_nftables_egress_set (self->egress, record->subnet.address, record->id, policy);
  return TRUE;
}

/* A copy of @rules (BoxRule*). */
static GPtrArray *
rules_copy (GPtrArray *rules)
{
  GPtrArray *copy = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);

  for (guint i = 0; rules != NULL && i < rules->len; i++)
    g_ptr_array_add (copy, box_rule_copy (g_ptr_array_index (rules, i)));
  return copy;
}

gboolean
box_nftables_plugin_take_pending (BoxNftablesPlugin *self, BoxNftablesRecord *record, GError **error)
{
  GPtrArray *rules = g_hash_table_lookup (self->pending, record->id);

  if (rules == NULL)
    return TRUE;
  g_ptr_array_unref (record->egress);
  record->egress = rules_copy (rules);
  return box_nftables_record_save (record, box_plugin_get_state_dir (BOX_PLUGIN (self)), error);
}

typedef struct {
  BoxNftablesPlugin *self;
  guint32            guest;
  BoxEgressPolicy   *policy;
} Keep;

static gboolean
keep_connection (guint32 daddr, guint16 dport, gpointer user_data)
{
  Keep *keep = user_data;

  /* A connection opened while its name's answer was valid stays while the
   * rules allow that name on that port, however long ago the TTL ran
   * out (an SSH or database connection outlives its DNS answer): every
   * name the guest resolved to @daddr counts, expired or not. */
  return box_nftables_history_allows (keep->self->history, keep->guest, keep->policy, daddr,
                                      dport, G_MININT64);
}

/* New rules for an attached sandbox, at once: saved, the tap in or out
 * of @restricted, the guest's @resolved elements made again from what it
 * resolved, the registry updated, and the established connections the new
 * rules refuse ended. */
gboolean
box_nftables_plugin_apply_egress (BoxNftablesPlugin *self, BoxNftablesRecord *record, GPtrArray *rules,
                     GError **error)
{
  const char *dir = box_plugin_get_state_dir (BOX_PLUGIN (self));
  g_autoptr(BoxEgressPolicy) policy = box_egress_policy_new (rules, NULL, error);
  g_autoptr(BoxEgressPolicy) old = NULL;
  g_autoptr(GPtrArray) previous = NULL;
  g_autoptr(GString) commands = NULL;
  g_autofree char *membership = NULL;
  guint32 guest = record->subnet.address;

  if (policy == NULL)
    return FALSE;
  previous = g_steal_pointer (&record->egress);
  record->egress = rules_copy (rules);
  if (!box_nftables_record_save (record, dir, error)) {
    g_ptr_array_unref (record->egress);
    record->egress = g_steal_pointer (&previous);
    return FALSE;
  }
  box_nftables_egress_lookup (self->egress, guest, &old, NULL);
  membership = box_nftables_ruleset_set_restricted (self->table, record->ifname,
                                                    box_egress_policy_is_restricted (policy));
  commands = g_string_new (membership);
  box_nftables_history_rebuild (self->history, guest, old, policy, g_get_monotonic_time (),
                                commands);
  if (!box_nftables_nft_run (self->nft, commands->str, error)) {
    /* nothing changed in the kernel: the record goes back to the rules
     * that still hold (a restart would otherwise apply refused ones) */
    g_ptr_array_unref (record->egress);
    record->egress = g_steal_pointer (&previous);
    if (!box_nftables_record_save (record, dir, NULL))
      g_warning ("nftables: %s: cannot write back its previous rules", record->id);
    return FALSE;
  }
  box_nftables_egress_set (self->egress, guest, record->id, policy);
  if (box_egress_policy_is_restricted (policy)) {
    Keep keep = { self, guest, policy };
    g_autoptr(GError) local_error = NULL;
    gint cut = box_nftables_conntrack_cut (guest, keep_connection, &keep, &local_error);

    if (cut < 0)
      g_warning ("nftables: %s: cannot end the connections the new rules refuse: %s",
                 record->id, local_error->message);
    else if (cut > 0)
      g_info ("nftables: %s: ended %d connections the new rules refuse", record->id, cut);
  }
  /* the proxied connections (80 and 443) are checked again by name */
  if (self->proxy != NULL)
    box_nftables_proxy_recheck (self->proxy, guest);
  g_info ("nftables: %s: %u egress rules", record->id, box_egress_policy_get_n_rules (policy));
  return TRUE;
}

/* ---- the egress registry's hooks (any thread) ---- */

/* The resolver's reporter thread (never the resolver's own, which goes on
 * meanwhile): takes the plugin's lock (the reporter holds none of the
 * resolver's, see README.md) and runs one transaction; the answer is sent
 * after it. */
static void
on_resolved (guint32 guest, const char *name, const guint32 *addrs, guint n_addrs, guint32 ttl_s,
             gpointer user_data)
{
  BoxNftablesPlugin *self = user_data;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  g_autoptr(BoxEgressPolicy) policy = NULL;
  g_autoptr(GString) commands = g_string_new (NULL);
  g_autoptr(GError) error = NULL;

  if (!self->started || !box_nftables_egress_lookup (self->egress, guest, &policy, NULL) ||
      policy == NULL)
    return;
  box_nftables_history_add (self->history, guest, policy, name, addrs, n_addrs, ttl_s,
                            g_get_monotonic_time (), commands);
  if (commands->len > 0 && !box_nftables_nft_run (self->nft, commands->str, &error))
    g_warning ("nftables: cannot add what a sandbox resolved: %s", error->message);
}

static void
on_log (const char *line, gpointer user_data)
{
  BoxNftablesPlugin *self = user_data;

  box_plugin_context_log (box_plugin_get_context (BOX_PLUGIN (self)), G_LOG_LEVEL_MESSAGE, "%s",
                          line);
}

BoxNftablesEgress *
box_nftables_plugin_get_egress (BoxNftablesPlugin *self)
{
  g_return_val_if_fail (BOX_IS_NFTABLES_PLUGIN (self), NULL);
  return self->egress;
}

guint
box_nftables_plugin_get_refusals_read (BoxNftablesPlugin *self)
{
  g_autoptr(GMutexLocker) locker = NULL;

  g_return_val_if_fail (BOX_IS_NFTABLES_PLUGIN (self), 0);
  locker = g_mutex_locker_new (&self->lock);
  return self->nflog != NULL ? box_nftables_nflog_get_received (self->nflog) : 0;
}

gboolean
box_nftables_plugin_rebound (BoxNftablesPlugin *self, BoxNftablesRecord *record, GError **error)
{
  g_autoptr(GPtrArray) rules = NULL;

  if (!g_hash_table_contains (self->pending, record->id))
    return box_nftables_plugin_register (self, record, error);
  rules = rules_copy (g_hash_table_lookup (self->pending, record->id));
  if (!box_nftables_plugin_apply_egress (self, record, rules, error))
    return FALSE;
  g_hash_table_remove (self->pending, record->id);
  return TRUE;
}

void
box_nftables_plugin_forget_guest (BoxNftablesPlugin *self, BoxNftablesRecord *record,
                                  GString *commands)
{
  g_autoptr(BoxEgressPolicy) old = NULL;
  guint32 guest = record->subnet.address;

  box_nftables_egress_lookup (self->egress, guest, &old, NULL);
  box_nftables_history_rebuild (self->history, guest, old, NULL, g_get_monotonic_time (),
                                commands);
  box_nftables_egress_remove (self->egress, guest);
  box_nftables_history_forget (self->history, guest);
  if (self->proxy != NULL)
    box_nftables_proxy_forget (self->proxy, guest);
}

void
box_nftables_plugin_set_pending (BoxNftablesPlugin *self, const char *sandbox_id, GPtrArray *rules)
{
  if (rules == NULL || rules->len == 0)
    g_hash_table_remove (self->pending, sandbox_id);
  else
    g_hash_table_insert (self->pending, g_strdup (sandbox_id), rules_copy (rules));
}

void
box_nftables_plugin_egress_start (BoxNftablesPlugin *self)
{
  box_nftables_plugin_egress_stop (self);
  self->egress = box_nftables_egress_new ();
  self->history = box_nftables_history_new (self->table);
  box_nftables_egress_set_resolved_func (self->egress, on_resolved, self);
  box_nftables_egress_set_log_func (self->egress, on_log, self);
}

void
box_nftables_plugin_egress_stop (BoxNftablesPlugin *self)
{
  g_clear_pointer (&self->egress, box_nftables_egress_free);
  g_clear_pointer (&self->history, box_nftables_history_free);
  g_hash_table_remove_all (self->pending);
}
