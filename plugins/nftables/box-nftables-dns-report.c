/* box-nftables-dns-report.c: the reporter thread of the filtering
 * resolver (README.md, "DNS").
 *
 * A restricted sandbox's A answer is sent only once what it carries is
 * reported to the egress registry (the plugin adds the kernel's set
 * elements, under its lock and in an nft transaction), so that the
 * sandbox's connect finds them.  That wait is this thread's, never the
 * resolver's: a slow transaction holds up only the answers that wait for
 * their own elements, while the resolver goes on relaying, refusing and
 * looking up for every sandbox.  The queue is bounded, each sandbox to its
 * share of it (a guest can make many answers from the cache); beyond it
 * the answer is SERVFAIL and the sandbox asks again.  The reports are
 * taken round robin across sandboxes (each its own queue, oldest first):
 * one sandbox's full share waits no other sandbox's answer behind it.
 */
#include "config.h"

#include <string.h>

#include "box-nftables-dns-private.h"

typedef struct {
  guint32     guest;
  char       *name;
  guint32     addrs[BOX_NFTABLES_DNS_MAX_ADDRS];
  guint       n_addrs;
  guint32     ttl;
  GBytes     *answer;
  BoxDnsReply reply;
  gpointer    reply_data;
} Report;

static void
report_free (Report *report)
{
  g_free (report->name);
  g_bytes_unref (report->answer);
  g_free (report);
}

/* The oldest report of the guest whose turn it is; its turn goes to the
 * back of the line if it has more.  With report_lock held. */
static Report *
next_report (BoxNftablesDns *dns)
{
  gpointer guest;
  GQueue *queue;
  Report *report;

  if (dns->n_reports == 0)
    return NULL;
  guest = g_queue_pop_head (&dns->report_turns);
  queue = g_hash_table_lookup (dns->reports_by_guest, guest);
  report = g_queue_pop_head (queue);
  if (g_queue_is_empty (queue))
    g_hash_table_remove (dns->reports_by_guest, guest);
  else
    g_queue_push_tail (&dns->report_turns, guest);
  dns->n_reports--;
  return report;
}

static gpointer
reporter_thread (gpointer data)
{
  BoxNftablesDns *dns = data;

  for (;;) {
    Report *report;
    gboolean stopping;
    BoxNftablesEgress *egress;

    g_mutex_lock (&dns->report_lock);
    while (dns->n_reports == 0 && !dns->reports_stopping)
      g_cond_wait (&dns->report_cond, &dns->report_lock);
    report = next_report (dns);
    dns->reporting = report != NULL ? report->guest : 0;
    stopping = dns->reports_stopping;
    g_mutex_unlock (&dns->report_lock);
    if (report == NULL)
      break;   /* stopping, and nothing left */
    if (!stopping) {
      g_mutex_lock (&dns->lock);
      egress = dns->egress;
      g_mutex_unlock (&dns->lock);
      if (egress != NULL)
        box_nftables_egress_report_resolved (egress, report->guest, report->name, report->addrs,
                                             report->n_addrs, report->ttl);
    }
    /* stopping: no answer, nothing reported */
    report->reply (stopping ? NULL : report->answer, report->reply_data);
    g_mutex_lock (&dns->report_lock);
    dns->reporting = 0;
    g_mutex_unlock (&dns->report_lock);
    report_free (report);
  }
  return NULL;
}

void
box_dns_reporter_start (BoxNftablesDns *dns)
{
  g_mutex_init (&dns->report_lock);
  g_cond_init (&dns->report_cond);
  g_queue_init (&dns->report_turns);
  dns->reports_by_guest = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) g_queue_free);
  dns->reporter = g_thread_new ("box-nft-dns-report", reporter_thread, dns);
}

void
box_dns_reporter_stop (BoxNftablesDns *dns)
{
  if (dns->reporter == NULL)
    return;
  g_mutex_lock (&dns->report_lock);
  dns->reports_stopping = TRUE;
  g_cond_signal (&dns->report_cond);
  g_mutex_unlock (&dns->report_lock);
  g_thread_join (dns->reporter);
  dns->reporter = NULL;
  g_clear_pointer (&dns->reports_by_guest, g_hash_table_unref);
  g_cond_clear (&dns->report_cond);
  g_mutex_clear (&dns->report_lock);
}

gboolean
box_dns_reporter_post (BoxNftablesDns *dns, guint32 guest, const char *name,
                       const guint32 *addrs, guint n_addrs, guint32 ttl, GBytes *answer,
                       BoxDnsReply reply, gpointer reply_data)
{
  guint n_clients, share, queued;
  GQueue *queue;
  Report *report;

  g_mutex_lock (&dns->lock);
  n_clients = MAX (1, g_hash_table_size (dns->allowed));
  g_mutex_unlock (&dns->lock);
  share = MAX (1, BOX_DNS_MAX_REPORTS / n_clients);
  g_mutex_lock (&dns->report_lock);
  queue = g_hash_table_lookup (dns->reports_by_guest, GUINT_TO_POINTER (guest));
  /* its share counts the report in hand too */
  queued = (queue != NULL ? queue->length : 0) + (dns->reporting == guest ? 1 : 0);
  if (dns->reports_stopping || dns->n_reports >= BOX_DNS_MAX_REPORTS || queued >= share) {
    g_mutex_unlock (&dns->report_lock);
    return FALSE;
  }
  report = g_new0 (Report, 1);
  report->guest = guest;
  report->name = g_strdup (name);
  report->n_addrs = MIN (n_addrs, BOX_NFTABLES_DNS_MAX_ADDRS);
  memcpy (report->addrs, addrs, report->n_addrs * sizeof *addrs);
  report->ttl = ttl;
  report->answer = g_bytes_ref (answer);
  report->reply = reply;
  report->reply_data = reply_data;
  if (queue == NULL) {
    queue = g_queue_new ();
    g_hash_table_insert (dns->reports_by_guest, GUINT_TO_POINTER (guest), queue);
    g_queue_push_tail (&dns->report_turns, GUINT_TO_POINTER (guest));
  }
  g_queue_push_tail (queue, report);
  dns->n_reports++;
  g_cond_signal (&dns->report_cond);
  g_mutex_unlock (&dns->report_lock);
  return TRUE;
}
