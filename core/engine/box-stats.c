/* box-stats.c: usage stats counted in memory, flushed in batches; see
 * box-stats.h. */
#include "config.h"

#include "box-stats.h"

#include <string.h>

#include "box-error.h"
#include "box-storage-records.h"

enum {
  F_REQUESTS, F_2XX, F_3XX, F_4XX, F_5XX, F_WEBSOCKETS, F_BYTES, F_KEY, F_VISITORS, N_FIELDS
};

static const char *const field_names[N_FIELDS] = {
  "requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "websockets",
  "bytes_sent", "key_requests", "visitors",
};

#define SALT_LEN 32

typedef struct {
  char    *sandbox;
  char    *day;
  guint64  v[N_FIELDS];
} Pending;

struct _BoxStats {
  GObject     parent_instance;
  BoxStorage *storage;
  guint       timer;
  char       *day;                 /* today, UTC, as counted */
  guint8      salt[SALT_LEN];      /* today's; a new one each day */
  GHashTable *pending;             /* "<sandbox>/<day>" -> Pending* */
  GHashTable *visitors;            /* sandbox ID -> set of guint64 (today's hashes) */
  char       *pruned;              /* the day of the last prune, or NULL */
};

G_DEFINE_FINAL_TYPE (BoxStats, box_stats, G_TYPE_OBJECT)

static void
pending_free (Pending *p)
{
  g_free (p->sandbox);
  g_free (p->day);
  g_free (p);
}

static char *
day_string (GDateTime *t)
{
  return g_date_time_format (t, "%Y-%m-%d");
}

static char *
today_string (void)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();

  return day_string (now);
}

/* Today's day; a new day forgets the visitors and the salt. */
static const char *
current_day (BoxStats *self)
{
  g_autofree char *today = today_string ();

  if (g_strcmp0 (today, self->day) != 0) {
    g_free (self->day);
    self->day = g_steal_pointer (&today);
    for (guint i = 0; i < SALT_LEN; i += 4) {
      guint32 r = g_random_int ();
      memcpy (self->salt + i, &r, 4);
    }
    g_hash_table_remove_all (self->visitors);
  }
  return self->day;
}

static Pending *
pending_get (BoxStats *self, const char *sandbox_id)
{
  const char *day = current_day (self);
  g_autofree char *key = g_strdup_printf ("%s/%s", sandbox_id, day);
  Pending *p = g_hash_table_lookup (self->pending, key);

  if (p == NULL) {
    p = g_new0 (Pending, 1);
    p->sandbox = g_strdup (sandbox_id);
    p->day = g_strdup (day);
    g_hash_table_insert (self->pending, g_steal_pointer (&key), p);
  }
  return p;
}

/* TRUE when the client was not seen on the sandbox today (and is now). */
static gboolean
new_visitor (BoxStats *self, const char *sandbox_id, const char *address, const char *user_agent)
{
  g_autoptr(GHmac) hmac = g_hmac_new (G_CHECKSUM_SHA256, self->salt, SALT_LEN);
  GHashTable *seen = g_hash_table_lookup (self->visitors, sandbox_id);
  guint8 digest[32];
  gsize len = sizeof digest;
  gint64 hash;

  g_hmac_update (hmac, (const guchar *) (address != NULL ? address : ""), -1);
  g_hmac_update (hmac, (const guchar *) "", 1);   /* the NUL between them */
  g_hmac_update (hmac, (const guchar *) (user_agent != NULL ? user_agent : ""), -1);
  g_hmac_get_digest (hmac, digest, &len);
  memcpy (&hash, digest, sizeof hash);
  if (seen == NULL) {
    seen = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
    g_hash_table_insert (self->visitors, g_strdup (sandbox_id), seen);
  }
  if (g_hash_table_contains (seen, &hash) || g_hash_table_size (seen) >= BOX_STATS_VISITORS_MAX)
    return FALSE;
  g_hash_table_add (seen, g_memdup2 (&hash, sizeof hash));
  return TRUE;
}

void
box_stats_count (BoxStats *self, const char *sandbox_id, guint status, gboolean key,
                 const char *address, const char *user_agent)
{
  Pending *p;

  g_return_if_fail (BOX_IS_STATS (self) && sandbox_id != NULL);
  p = pending_get (self, sandbox_id);
  p->v[F_REQUESTS]++;
  if (status == 101)
    p->v[F_WEBSOCKETS]++;
  else if (status >= 200 && status < 600)
    p->v[F_2XX + status / 100 - 2]++;
  if (key)
    p->v[F_KEY]++;
  if (new_visitor (self, sandbox_id, address, user_agent))
    p->v[F_VISITORS]++;
}

void
box_stats_add_bytes (BoxStats *self, const char *sandbox_id, guint64 bytes)
{
  g_return_if_fail (BOX_IS_STATS (self) && sandbox_id != NULL);
  if (bytes > 0)
    pending_get (self, sandbox_id)->v[F_BYTES] += bytes;
}

/* ---- the store ---------------------------------------------------------- */

static void
counts_from_body (const char *body, guint64 v[N_FIELDS])
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *object;

  if (body == NULL || !json_parser_load_from_data (parser, body, -1, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return;
  object = json_node_get_object (json_parser_get_root (parser));
  for (guint i = 0; i < N_FIELDS; i++) {
    gint64 n = json_object_get_int_member_with_default (object, field_names[i], 0);
    v[i] = n > 0 ? (guint64) n : 0;
  }
}

static char *
counts_to_body (const guint64 v[N_FIELDS])
{
  GString *text = g_string_new ("{");

  for (guint i = 0; i < N_FIELDS; i++)
    g_string_append_printf (text, "%s\"%s\":%" G_GUINT64_FORMAT, i > 0 ? "," : "",
                            field_names[i], v[i]);
  g_string_append_c (text, '}');
  return g_string_free (text, FALSE);
}

/* The op that adds @p to its stored row; NULL (no error) when the sandbox
 * is gone. */
static BoxStorageRecord *
merged_record (BoxStats *self, Pending *p, BoxStorageOpType *type, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(BoxStorageRecord) sandbox = NULL;
  g_autoptr(BoxStorageRecord) stored = NULL;
  g_autofree char *id = g_strdup_printf ("%s/%s", p->sandbox, p->day);
  g_autofree char *body = NULL;
  guint64 v[N_FIELDS] = { 0 };
  BoxStorageRecord *record;

  sandbox = box_storage_get (self->storage, BOX_STORAGE_KIND_SANDBOX, NULL, BOX_STORAGE_BY_ID,
                             p->sandbox, &local_error);
  if (sandbox == NULL) {
    if (g_error_matches (local_error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
      return NULL;
    g_propagate_error (error, g_steal_pointer (&local_error));
    return NULL;
  }
  stored = box_storage_get (self->storage, BOX_STORAGE_KIND_STATS, p->sandbox,
                            BOX_STORAGE_BY_ID, id, &local_error);
  if (stored == NULL && !g_error_matches (local_error, BOX_ERROR, BOX_ERROR_NOT_FOUND)) {
    g_propagate_error (error, g_steal_pointer (&local_error));
    return NULL;
  }
  if (stored != NULL)
    counts_from_body (stored->body, v);
  for (guint i = 0; i < N_FIELDS; i++)
    v[i] += p->v[i];
  body = counts_to_body (v);
  record = box_storage_record_new (BOX_STORAGE_KIND_STATS, p->sandbox, id, body);
  record->name = g_strdup (p->day);
  if (stored != NULL) {
    record->created_at = stored->created_at;
    record->revision = stored->revision;
  }
  *type = stored != NULL ? BOX_STORAGE_OP_UPDATE : BOX_STORAGE_OP_INSERT;
  return record;
}

/* Deletes of rows older than the days kept (in @records and @ops). */
static gboolean
add_prunes (BoxStats *self, const char *today, GPtrArray *records, GArray *ops, GError **error)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autoptr(GDateTime) first = g_date_time_add_days (now, -(BOX_STATS_DAYS_KEPT - 1));
  g_autofree char *cutoff = day_string (first);
  g_autoptr(GPtrArray) rows = box_storage_list (self->storage, BOX_STORAGE_KIND_STATS, NULL,
                                                BOX_STORAGE_BY_SCOPE, NULL,
                                                BOX_STORAGE_ORDER_CREATED, error);

  if (rows == NULL)
    return FALSE;
  for (guint i = 0; i < rows->len; i++) {
    BoxStorageRecord *row = g_ptr_array_index (rows, i);
    BoxStorageOp op = { BOX_STORAGE_OP_DELETE, NULL };

    if (row->name == NULL || strcmp (row->name, cutoff) >= 0)
      continue;
    op.record = box_storage_record_copy (row);
    op.record->revision = 0;
    g_ptr_array_add (records, op.record);
    g_array_append_val (ops, op);
  }
  return TRUE;
}

gboolean
box_stats_flush (BoxStats *self, GError **error)
{
  g_autoptr(GPtrArray) records = g_ptr_array_new_with_free_func (
    (GDestroyNotify) box_storage_record_free);
  g_autoptr(GArray) ops = g_array_new (FALSE, TRUE, sizeof (BoxStorageOp));
  g_autofree char *today = today_string ();
  GHashTableIter iter;
  Pending *p;

  g_return_val_if_fail (BOX_IS_STATS (self), FALSE);
  g_hash_table_iter_init (&iter, self->pending);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &p)) {
    g_autoptr(GError) local_error = NULL;
    BoxStorageOp op = { BOX_STORAGE_OP_INSERT, NULL };

    op.record = merged_record (self, p, &op.type, &local_error);
    if (local_error != NULL) {
      g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
    if (op.record == NULL)
      continue;
    g_ptr_array_add (records, op.record);
    g_array_append_val (ops, op);
  }
  if (g_strcmp0 (self->pruned, today) != 0 && !add_prunes (self, today, records, ops, error))
    return FALSE;
  if (ops->len > 0 &&
      !box_storage_write (self->storage, (BoxStorageOp *) (gpointer) ops->data, ops->len, error))
    return FALSE;
  g_hash_table_remove_all (self->pending);
  g_free (self->pruned);
  self->pruned = g_steal_pointer (&today);
  return TRUE;
}

static gboolean
flush_cb (gpointer user_data)
{
  BoxStats *self = user_data;
  g_autoptr(GError) error = NULL;

  if (!box_stats_flush (self, &error))
    g_warning ("usage stats not written (kept for the next try): %s", error->message);
  return G_SOURCE_CONTINUE;
}

/* ---- reading ------------------------------------------------------------- */

static void
add_counts (JsonBuilder *b, const guint64 v[N_FIELDS], guint n)
{
  for (guint i = 0; i < n; i++) {
    json_builder_set_member_name (b, field_names[i]);
    json_builder_add_int_value (b, (gint64) v[i]);
  }
}

JsonNode *
box_stats_read (BoxStats *self, const BoxSandbox *sandbox, guint days, GError **error)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autoptr(GPtrArray) rows = NULL;
  g_autoptr(GHashTable) by_day = g_hash_table_new (g_str_hash, g_str_equal);
  guint64 total[N_FIELDS] = { 0 };

  g_return_val_if_fail (BOX_IS_STATS (self), NULL);
  g_return_val_if_fail (days >= 1 && days <= BOX_STATS_DAYS_KEPT, NULL);
  if (!box_stats_flush (self, error))
    return NULL;
  rows = box_storage_list (self->storage, BOX_STORAGE_KIND_STATS, sandbox->id,
                           BOX_STORAGE_BY_SCOPE, NULL, BOX_STORAGE_ORDER_CREATED, error);
  if (rows == NULL)
    return NULL;
  for (guint i = 0; i < rows->len; i++) {
    BoxStorageRecord *row = g_ptr_array_index (rows, i);
    if (row->name != NULL)
      g_hash_table_insert (by_day, row->name, row);
  }

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "sandbox");
  json_builder_add_string_value (b, sandbox->id);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, sandbox->name);
  json_builder_set_member_name (b, "days");
  json_builder_begin_array (b);
  for (guint i = days; i-- > 0;) {
    g_autoptr(GDateTime) t = g_date_time_add_days (now, -(gint) i);
    g_autofree char *day = day_string (t);
    BoxStorageRecord *row = g_hash_table_lookup (by_day, day);
    guint64 v[N_FIELDS] = { 0 };

    if (row != NULL)
      counts_from_body (row->body, v);
    for (guint f = 0; f < N_FIELDS; f++)
      total[f] += v[f];
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "day");
    json_builder_add_string_value (b, day);
    add_counts (b, v, N_FIELDS);
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
  json_builder_set_member_name (b, "total");
  json_builder_begin_object (b);
  add_counts (b, total, F_VISITORS);   /* every field but visitors */
  json_builder_end_object (b);
  json_builder_set_member_name (b, "visitor_days");
  json_builder_add_int_value (b, (gint64) total[F_VISITORS]);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* ---- the object ------------------------------------------------------------ */

static void
box_stats_finalize (GObject *object)
{
  BoxStats *self = BOX_STATS (object);

  if (self->timer != 0)
    g_source_remove (self->timer);
  g_clear_object (&self->storage);
  g_hash_table_unref (self->pending);
  g_hash_table_unref (self->visitors);
  g_free (self->day);
  g_free (self->pruned);
  G_OBJECT_CLASS (box_stats_parent_class)->finalize (object);
}

static void
box_stats_class_init (BoxStatsClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = box_stats_finalize;
}

static void
box_stats_init (BoxStats *self)
{
  self->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                         (GDestroyNotify) pending_free);
  self->visitors = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify) g_hash_table_unref);
}

BoxStats *
box_stats_new (BoxStorage *storage, guint flush_ms)
{
  BoxStats *self = g_object_new (BOX_TYPE_STATS, NULL);

  self->storage = g_object_ref (storage);
  self->timer = g_timeout_add (flush_ms > 0 ? flush_ms : BOX_STATS_FLUSH_MS, flush_cb, self);
  return self;
}
