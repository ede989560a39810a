/* box-stats.h: usage stats of the sandboxes' URLs, per sandbox per UTC day.
 *
 * The edge counts every answered request here (box_stats_count(),
 * box_stats_add_bytes()): plain additions to counters in memory on the
 * main thread, no lock and no storage write per request.  Every flush
 * interval (30 s; BOX_STATS_FLUSH_MS for tests) and before every read the
 * waiting counts go to the store in one batch: records of kind "stats",
 * scope the sandbox ID, name the day (YYYY-MM-DD), id "<sandbox>/<day>",
 * so a sandbox's delete (which deletes its whole scope) takes its traffic
 * with it.  Rows older than BOX_STATS_DAYS_KEPT days are pruned by the
 * first flush of each day.  Counts of a sandbox deleted before the flush
 * are dropped.
 *
 * Visitors: a client (address plus User-Agent) not yet seen on that
 * sandbox that day.  Only a 64-bit HMAC-SHA256 of the two under a random
 * salt of the day is kept, in memory; salt and hashes are dropped when the
 * UTC day changes.  At most BOX_STATS_VISITORS_MAX hashes per sandbox per
 * day: past that, further new clients are not counted as visitors (the
 * day's visitors are then a lower bound).  A restart of boxd forgets the
 * day's hashes, so a client seen before and after it counts twice.
 */
#pragma once

#include <json-glib/json-glib.h>

#include "box-records.h"
#include "box-storage.h"

G_BEGIN_DECLS

#define BOX_STORAGE_KIND_STATS    "stats"
#define BOX_STATS_DAYS_KEPT       90
#define BOX_STATS_DAYS_DEFAULT    7
#define BOX_STATS_FLUSH_MS        30000
#define BOX_STATS_VISITORS_MAX    20000

#define BOX_TYPE_STATS (box_stats_get_type ())
G_DECLARE_FINAL_TYPE (BoxStats, box_stats, BOX, STATS, GObject)

/* Flushes every @flush_ms (0: BOX_STATS_FLUSH_MS) on the thread-default
 * main context. */
BoxStats *box_stats_new       (BoxStorage *storage, guint flush_ms);
/* One request answered with @status (101: a WebSocket, in no status
 * class); @key: it carried the project's key; @address and @user_agent
 * (may be NULL) make the visitor. */
void      box_stats_count     (BoxStats *self, const char *sandbox_id, guint status,
                               gboolean key, const char *address, const char *user_agent);
/* Response body bytes sent (not a WebSocket's). */
void      box_stats_add_bytes (BoxStats *self, const char *sandbox_id, guint64 bytes);
/* Writes what is waiting (one batch) and prunes old days once a day. */
gboolean  box_stats_flush     (BoxStats *self, GError **error);
/* Flushes, then {sandbox, name, days, total, visitor_days} for the last
 * @days days (1..BOX_STATS_DAYS_KEPT), today (UTC) last. */
JsonNode *box_stats_read      (BoxStats *self, const BoxSandbox *sandbox, guint days,
                               GError **error);

G_END_DECLS
