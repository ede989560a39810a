/* box-nftables-egress.c: the egress registry; see box-nftables-egress.h. */
#include "config.h"

#include "box-error.h"
#include "box-nftables-egress.h"

#define LOG_WINDOW_US (60 * G_USEC_PER_SEC)

typedef struct {
  char            *sandbox_id;
  BoxEgressPolicy *policy;        /* NULL: unrestricted */
  gint64           window_start;  /* refusal log rate limit */
  guint            logged;
  guint            suppressed;
} Entry;

struct _BoxNftablesEgress {
  GMutex                  lock;
  GHashTable             *guests;  /* GUINT_TO_POINTER (guest) -> Entry* */
  guint64                 generation;
  BoxNftablesResolvedFunc resolved_func;
  gpointer                resolved_data;
  BoxNftablesResolveFunc  resolve_func;
  gpointer                resolve_data;
  BoxNftablesLogFunc      log_func;
  gpointer                log_data;
};

static void
entry_free (Entry *entry)
{
  g_free (entry->sandbox_id);
  g_clear_pointer (&entry->policy, box_egress_policy_unref);
  g_free (entry);
}

BoxNftablesEgress *
box_nftables_egress_new (void)
{
  BoxNftablesEgress *egress = g_new0 (BoxNftablesEgress, 1);

  g_mutex_init (&egress->lock);
  egress->guests = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL,
                                          (GDestroyNotify) entry_free);
  return egress;
}

void
box_nftables_egress_free (BoxNftablesEgress *egress)
{
  if (egress == NULL)
    return;
  g_hash_table_unref (egress->guests);
  g_mutex_clear (&egress->lock);
  g_free (egress);
}

void
box_nftables_egress_set (BoxNftablesEgress *egress, guint32 guest, const char *sandbox_id,
                         BoxEgressPolicy *policy)
{
  Entry *entry;

  g_return_if_fail (egress != NULL && sandbox_id != NULL);
  g_mutex_lock (&egress->lock);
  entry = g_hash_table_lookup (egress->guests, GUINT_TO_POINTER (guest));
  if (entry == NULL) {
    entry = g_new0 (Entry, 1);
    g_hash_table_insert (egress->guests, GUINT_TO_POINTER (guest), entry);
  }
  g_free (entry->sandbox_id);
  entry->sandbox_id = g_strdup (sandbox_id);
  g_clear_pointer (&entry->policy, box_egress_policy_unref);
  if (policy != NULL && box_egress_policy_is_restricted (policy))
    entry->policy = box_egress_policy_ref (policy);
  egress->generation++;
  g_mutex_unlock (&egress->lock);
}

void
box_nftables_egress_remove (BoxNftablesEgress *egress, guint32 guest)
{
  g_return_if_fail (egress != NULL);
  g_mutex_lock (&egress->lock);
  g_hash_table_remove (egress->guests, GUINT_TO_POINTER (guest));
  egress->generation++;
  g_mutex_unlock (&egress->lock);
}

gboolean
box_nftables_egress_lookup (BoxNftablesEgress *egress, guint32 guest, BoxEgressPolicy **policy,
                            char **sandbox_id)
{
  Entry *entry;

  g_return_val_if_fail (egress != NULL, FALSE);
  g_mutex_lock (&egress->lock);
  entry = g_hash_table_lookup (egress->guests, GUINT_TO_POINTER (guest));
  if (entry != NULL) {
    if (policy != NULL)
      *policy = entry->policy != NULL ? box_egress_policy_ref (entry->policy) : NULL;
    if (sandbox_id != NULL)
      *sandbox_id = g_strdup (entry->sandbox_id);
  }
  g_mutex_unlock (&egress->lock);
  return entry != NULL;
}

guint64
box_nftables_egress_get_generation (BoxNftablesEgress *egress)
{
  guint64 generation;

  g_mutex_lock (&egress->lock);
  generation = egress->generation;
  g_mutex_unlock (&egress->lock);
  return generation;
}

void
box_nftables_egress_set_resolved_func (BoxNftablesEgress *egress, BoxNftablesResolvedFunc func,
                                       gpointer user_data)
{
  g_mutex_lock (&egress->lock);
  egress->resolved_func = func;
  egress->resolved_data = user_data;
  g_mutex_unlock (&egress->lock);
}

void
box_nftables_egress_report_resolved (BoxNftablesEgress *egress, guint32 guest, const char *name,
                                     const guint32 *addrs, guint n_addrs, guint32 ttl_s)
{
  BoxNftablesResolvedFunc func;
  gpointer data;

  g_mutex_lock (&egress->lock);
  func = egress->resolved_func;
  data = egress->resolved_data;
  g_mutex_unlock (&egress->lock);
  if (func != NULL && n_addrs > 0)
    func (guest, name, addrs, n_addrs, ttl_s, data);
}

void
box_nftables_egress_set_resolver (BoxNftablesEgress *egress, BoxNftablesResolveFunc func,
                                  gpointer user_data)
{
  g_mutex_lock (&egress->lock);
  egress->resolve_func = func;
  egress->resolve_data = user_data;
  g_mutex_unlock (&egress->lock);
}

void
box_nftables_egress_resolve (BoxNftablesEgress *egress, guint32 guest, const char *name,
                             BoxNftablesResolveDone done, gpointer done_data)
{
  BoxNftablesResolveFunc func;
  gpointer data;

  g_mutex_lock (&egress->lock);
  func = egress->resolve_func;
  data = egress->resolve_data;
  g_mutex_unlock (&egress->lock);
  if (func == NULL) {
    g_autoptr(GError) error = g_error_new_literal (BOX_ERROR, BOX_ERROR_INTERNAL,
                                                   "the node has no resolver running");
    done (NULL, 0, 0, error, done_data);
    return;
  }
  func (guest, name, done, done_data, data);
}

void
box_nftables_egress_set_log_func (BoxNftablesEgress *egress, BoxNftablesLogFunc func,
                                  gpointer user_data)
{
  g_mutex_lock (&egress->lock);
  egress->log_func = func;
  egress->log_data = user_data;
  g_mutex_unlock (&egress->lock);
}

/* A name from a guest, fit for a log line: at most 253 bytes of letters,
 * digits, '.', '-', '_' and '*'; anything else shows as '?'. */
static char *
printable_name (const char *name)
{
  GString *out;

  if (name == NULL)
    return g_strdup ("(no name)");
  out = g_string_new (NULL);
  for (const char *p = name; *p != '\0' && out->len < 253; p++) {
    gboolean ok = g_ascii_isalnum (*p) || *p == '.' || *p == '-' || *p == '_' || *p == '*';
    g_string_append_c (out, ok ? *p : '?');
  }
  return g_string_free (out, FALSE);
}

void
box_nftables_egress_report_refused (BoxNftablesEgress *egress, guint32 guest, const char *kind,
                                    const char *name, guint16 port)
{
  g_autofree char *summary = NULL;
  g_autofree char *line = NULL;
  g_autofree char *shown = printable_name (name);
  BoxNftablesLogFunc func;
  gpointer data;
  gint64 now = g_get_monotonic_time ();
  Entry *entry;

  g_mutex_lock (&egress->lock);
  func = egress->log_func;
  data = egress->log_data;
  entry = g_hash_table_lookup (egress->guests, GUINT_TO_POINTER (guest));
  if (entry == NULL || func == NULL) {
    g_mutex_unlock (&egress->lock);
    return;
  }
  if (now - entry->window_start >= LOG_WINDOW_US) {
    if (entry->suppressed > 0)
      summary = g_strdup_printf ("egress refused: sandbox %s: %u more refused in the last minute "
                                 "(not logged one by one)", entry->sandbox_id, entry->suppressed);
    entry->window_start = now;
    entry->logged = 0;
    entry->suppressed = 0;
  }
  if (entry->logged < BOX_NFTABLES_EGRESS_LOG_BURST) {
    entry->logged++;
    if (port != 0)
      line = g_strdup_printf ("egress refused: sandbox %s %s %s:%u", entry->sandbox_id, kind,
                              shown, port);
    else
      line = g_strdup_printf ("egress refused: sandbox %s %s %s", entry->sandbox_id, kind, shown);
  } else {
    entry->suppressed++;
  }
  g_mutex_unlock (&egress->lock);
  if (summary != NULL)
    func (summary, data);
  if (line != NULL)
    func (line, data);
}
