/* box-storage-records.c: the typed records on the generic store; see
 * box-storage-records.h.  Adding a record kind means adding functions like
 * these (and a storage JSON form), never touching box-storage.h. */
#include "config.h"

#include <stdarg.h>

#include "box-error.h"
#include "box-records-private.h"
#include "box-storage-records.h"

/* How often a read-modify-write is tried again after losing a race. */
#define BOX_STORAGE_RECORDS_TRIES 3

typedef gpointer (*FromBody) (const char *body, GError **error);

/* ---- shared ------------------------------------------------------------ */

static BoxStorageRecord *
record_new (const char *kind, const char *scope, const char *id, char *body, gint64 created_at,
            guint64 revision)
{
  BoxStorageRecord *record = box_storage_record_new (kind, scope, id, NULL);

  g_free (record->body);
  record->body = body;
  record->created_at = created_at;
  record->revision = revision;
  return record;
}

/* @record's body as a typed record whose revision is at @rev_offset. */
static gpointer
decode (const BoxStorageRecord *record, FromBody from_body, gsize rev_offset, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  gpointer typed = from_body (record->body, &local_error);

  if (typed == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "stored %s %s is unreadable: %s",
                 record->kind, record->id, local_error->message);
    return NULL;
  }
  G_STRUCT_MEMBER (guint64, typed, rev_offset) = record->revision;
  return typed;
}

static gpointer
decode_one (BoxStorageRecord *record, FromBody from_body, gsize rev_offset, GError **error)
{
  g_autoptr(BoxStorageRecord) owned = record;

  if (owned == NULL)
    return NULL;
  return decode (owned, from_body, rev_offset, error);
}

static GPtrArray *
decode_all (GPtrArray *records, FromBody from_body, gsize rev_offset, GDestroyNotify free_func,
            GError **error)
{
  g_autoptr(GPtrArray) owned = records;
  g_autoptr(GPtrArray) typed = NULL;

  if (owned == NULL)
    return NULL;
  typed = g_ptr_array_new_full (owned->len, free_func);
  for (guint i = 0; i < owned->len; i++) {
    gpointer one = decode (g_ptr_array_index (owned, i), from_body, rev_offset, error);

    if (one == NULL)
      return NULL;
    g_ptr_array_add (typed, one);
  }
  return g_steal_pointer (&typed);
}

/* Moves @local into @error, with a message of its own when its code is
 * @code; always FALSE. */
G_GNUC_PRINTF (4, 5)
static gboolean
reword (GError **error, GError *local, int code, const char *format, ...)
{
  if (g_error_matches (local, BOX_ERROR, code)) {
    va_list args;

    va_start (args, format);
    g_free (local->message);
    local->message = g_strdup_vprintf (format, args);
    va_end (args);
  }
  g_propagate_error (error, local);
  return FALSE;
}

static gboolean
exists (BoxStorage *self, const char *kind, const char *id)
{
  g_autoptr(BoxStorageRecord) found = box_storage_get (self, kind, NULL, BOX_STORAGE_BY_ID, id,
                                                       NULL);

  return found != NULL;
}

/* An op that names a record by kind, scope and ID only. */
static BoxStorageRecord *
record_ref (const char *kind, const char *scope, const char *id)
{
  BoxStorageRecord *record = box_storage_record_new (kind, NULL, id, NULL);

  g_free (record->scope);
  record->scope = g_strdup (scope);
  return record;
}

/* ---- parsed records ------------------------------------------------------ */

/* Reading a sandbox or a project is mostly parsing its stored JSON, and
 * the API reads the same ones again and again.  Each store keeps the
 * records of those kinds it parsed, by kind and ID, with the revision they
 * were parsed at: a record read at that revision has that body (revisions
 * come from one counter of the store that only grows), so a copy of the
 * parsed one is the same record.  A write by anyone (this process through
 * any path, another writer of the same store) gives a new revision, so the
 * next read parses again.  Bounded per kind; emptied when full.  Any thread
 * may read (a plugin's store calls), hence the lock. */
#define PARSED_CACHE_MAX 4096

typedef struct {
  const char     *quark_name;
  FromBody        from_body;
  gsize           rev_offset;
  GBoxedCopyFunc  copy;
  GDestroyNotify  free;
} ParsedKind;

static const ParsedKind parsed_sandboxes = {
  "box-storage-sandbox-cache", (FromBody) box_sandbox_from_storage_json,
  G_STRUCT_OFFSET (BoxSandbox, revision),
  (GBoxedCopyFunc) box_sandbox_copy, (GDestroyNotify) box_sandbox_free,
};

static const ParsedKind parsed_projects = {
  "box-storage-project-cache", (FromBody) box_project_from_storage_json,
  G_STRUCT_OFFSET (BoxProject, revision),
  (GBoxedCopyFunc) box_project_copy, (GDestroyNotify) box_project_free,
};

typedef struct {
  GMutex      lock;
  GHashTable *by_id;   /* char* -> the typed record (its own revision) */
} ParsedCache;

static void
parsed_cache_free (ParsedCache *cache)
{
  g_hash_table_unref (cache->by_id);
  g_mutex_clear (&cache->lock);
  g_free (cache);
}

static ParsedCache *
parsed_cache (BoxStorage *self, const ParsedKind *kind)
{
  static GMutex create_lock;
  GQuark quark = g_quark_from_static_string (kind->quark_name);
  ParsedCache *cache;

  g_mutex_lock (&create_lock);
  cache = g_object_get_qdata (G_OBJECT (self), quark);
  if (cache == NULL) {
    cache = g_new0 (ParsedCache, 1);
    g_mutex_init (&cache->lock);
    cache->by_id = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, kind->free);
    g_object_set_qdata_full (G_OBJECT (self), quark, cache, (GDestroyNotify) parsed_cache_free);
  }
  g_mutex_unlock (&create_lock);
  return cache;
}

/* @record as a typed record of @kind: a copy of the one parsed before when
 * its revision is unchanged, else parsed (and kept). */
static gpointer
parsed_decode (BoxStorage *self, const ParsedKind *kind, const BoxStorageRecord *record,
               GError **error)
{
  ParsedCache *cache = parsed_cache (self, kind);
  gpointer parsed;
  gpointer hit;

  g_mutex_lock (&cache->lock);
  hit = g_hash_table_lookup (cache->by_id, record->id);
  if (hit != NULL && G_STRUCT_MEMBER (guint64, hit, kind->rev_offset) == record->revision) {
    gpointer copy = kind->copy (hit);

    g_mutex_unlock (&cache->lock);
    return copy;
  }
  g_mutex_unlock (&cache->lock);

  parsed = decode (record, kind->from_body, kind->rev_offset, error);
  if (parsed == NULL)
    return NULL;
  g_mutex_lock (&cache->lock);
  if (g_hash_table_size (cache->by_id) >= PARSED_CACHE_MAX)
    g_hash_table_remove_all (cache->by_id);
  g_hash_table_replace (cache->by_id, g_strdup (record->id), kind->copy (parsed));
  g_mutex_unlock (&cache->lock);
  return parsed;
}

static BoxSandbox *
sandbox_decode (BoxStorage *self, const BoxStorageRecord *record, GError **error)
{
  return parsed_decode (self, &parsed_sandboxes, record, error);
}

/* ---- projects ---------------------------------------------------------- */

static BoxStorageRecord *
project_record (const BoxProject *project)
{
  return record_new (BOX_STORAGE_KIND_PROJECT, "", project->name,
                     box_project_to_storage_json (project), project->created_at,
                     project->revision);
}

gboolean
box_storage_project_insert (BoxStorage *self, BoxProject *project, GError **error)
{
  g_autoptr(BoxStorageRecord) record = NULL;
  GError *local = NULL;

  g_return_val_if_fail (project != NULL, FALSE);
  record = project_record (project);
  record->revision = 0;
  if (!box_storage_insert (self, record, &local))
    return reword (error, local, BOX_ERROR_ALREADY_EXISTS,
                   "a project named \"%s\" already exists", project->name);
  project->revision = record->revision;
  return TRUE;
}

gboolean
box_storage_project_update (BoxStorage *self, BoxProject *project, GError **error)
{
  g_autoptr(BoxStorageRecord) record = NULL;

  g_return_val_if_fail (project != NULL, FALSE);
  record = project_record (project);
  if (!box_storage_update (self, record, error))
    return FALSE;
  project->revision = record->revision;
  return TRUE;
}

BoxProject *
box_storage_project_get (BoxStorage *self, const char *name, GError **error)
{
  g_autoptr(BoxStorageRecord) record = box_storage_get (self, BOX_STORAGE_KIND_PROJECT, "",
                                                        BOX_STORAGE_BY_ID, name, error);

  if (record == NULL)
    return NULL;
  return parsed_decode (self, &parsed_projects, record, error);
}

GPtrArray *
box_storage_project_list (BoxStorage *self, GError **error)
{
  return decode_all (box_storage_list (self, BOX_STORAGE_KIND_PROJECT, "", BOX_STORAGE_BY_SCOPE,
                                       NULL, BOX_STORAGE_ORDER_CREATED, error),
                     (FromBody) box_project_from_storage_json,
                     G_STRUCT_OFFSET (BoxProject, revision),
                     (GDestroyNotify) box_project_free, error);
}

/* The project, everything in its scope (keys, sandboxes, secrets, ...) and
 * everything in its sandboxes' scopes (checkpoints, ...), at once. */
gboolean
box_storage_project_delete (BoxStorage *self, const char *name, GError **error)
{
  g_autoptr(GPtrArray) sandboxes = NULL;
  g_autoptr(GPtrArray) refs = g_ptr_array_new_with_free_func ((GDestroyNotify) box_storage_record_free);
  g_autoptr(GArray) ops = g_array_new (FALSE, TRUE, sizeof (BoxStorageOp));
  BoxStorageOp op;

  g_return_val_if_fail (name != NULL, FALSE);
  sandboxes = box_storage_list (self, BOX_STORAGE_KIND_SANDBOX, name, BOX_STORAGE_BY_SCOPE, NULL,
                                BOX_STORAGE_ORDER_CREATED, error);
  if (sandboxes == NULL)
    return FALSE;
  g_ptr_array_add (refs, record_ref (BOX_STORAGE_KIND_PROJECT, "", name));
  g_ptr_array_add (refs, record_ref (NULL, name, NULL));
  for (guint i = 0; i < sandboxes->len; i++) {
    BoxStorageRecord *sandbox = g_ptr_array_index (sandboxes, i);

    g_ptr_array_add (refs, record_ref (NULL, sandbox->id, NULL));
  }
  for (guint i = 0; i < refs->len; i++) {
    op.type = i == 0 ? BOX_STORAGE_OP_DELETE : BOX_STORAGE_OP_DELETE_SCOPE;
    op.record = g_ptr_array_index (refs, i);
    g_array_append_val (ops, op);
  }
  return box_storage_write (self, (BoxStorageOp *) (gpointer) ops->data, ops->len, error);
}

/* ---- keys -------------------------------------------------------------- */

gboolean
box_storage_key_insert (BoxStorage *self, BoxKey *key, GError **error)
{
  g_autoptr(BoxStorageRecord) record = NULL;
  GError *local = NULL;

  g_return_val_if_fail (key != NULL, FALSE);
  record = record_new (BOX_STORAGE_KIND_KEY, key->project, key->id,
                       box_key_to_storage_json (key), key->created_at, 0);
  record->lookup = g_strdup (key->hash);
  if (!box_storage_insert (self, record, &local)) {
    if (g_error_matches (local, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS) &&
        !exists (self, BOX_STORAGE_KIND_KEY, key->id))
      return reword (error, local, BOX_ERROR_ALREADY_EXISTS,
                     "a key with the same secret already exists");
    return reword (error, local, BOX_ERROR_ALREADY_EXISTS,
                   "a key with ID \"%s\" already exists", key->id);
  }
  key->revision = record->revision;
  return TRUE;
}

BoxKey *
box_storage_key_get_by_hash (BoxStorage *self, const char *hash, GError **error)
{
  GError *local = NULL;
  BoxStorageRecord *record = box_storage_get (self, BOX_STORAGE_KIND_KEY, NULL,
                                              BOX_STORAGE_BY_LOOKUP, hash, &local);

  if (record == NULL) {
    reword (error, local, BOX_ERROR_NOT_FOUND, "no key with that secret");
    return NULL;
  }
  return decode_one (record, (FromBody) box_key_from_storage_json,
                     G_STRUCT_OFFSET (BoxKey, revision), error);
}

GPtrArray *
box_storage_key_list (BoxStorage *self, const char *project, GError **error)
{
  return decode_all (box_storage_list (self, BOX_STORAGE_KIND_KEY, project, BOX_STORAGE_BY_SCOPE,
                                       NULL, BOX_STORAGE_ORDER_CREATED, error),
                     (FromBody) box_key_from_storage_json, G_STRUCT_OFFSET (BoxKey, revision),
                     (GDestroyNotify) box_key_free, error);
}

gboolean
box_storage_key_delete (BoxStorage *self, const char *project, const char *id, GError **error)
{
  return box_storage_delete (self, BOX_STORAGE_KIND_KEY, project, id, 0, error);
}

/* ---- sandboxes --------------------------------------------------------- */

static BoxStorageRecord *
sandbox_record (const BoxSandbox *sandbox)
{
  BoxStorageRecord *record = record_new (BOX_STORAGE_KIND_SANDBOX, sandbox->project, sandbox->id,
                                         box_sandbox_to_storage_json (sandbox),
                                         sandbox->created_at, sandbox->revision);

  record->name = g_strdup (sandbox->name);
  return record;
}

static gboolean
sandbox_name_taken (GError **error, GError *local, const BoxSandbox *sandbox)
{
  return reword (error, local, BOX_ERROR_ALREADY_EXISTS,
                 "a sandbox named \"%s\" already exists in project \"%s\"",
                 sandbox->name, sandbox->project);
}

gboolean
box_storage_sandbox_insert (BoxStorage *self, BoxSandbox *sandbox, GError **error)
{
  g_autoptr(BoxStorageRecord) record = NULL;
  GError *local = NULL;

  g_return_val_if_fail (sandbox != NULL, FALSE);
  record = sandbox_record (sandbox);
  record->revision = 0;
  if (!box_storage_insert (self, record, &local)) {
    if (g_error_matches (local, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS) &&
        !exists (self, BOX_STORAGE_KIND_SANDBOX, sandbox->id))
      return sandbox_name_taken (error, local, sandbox);
    return reword (error, local, BOX_ERROR_ALREADY_EXISTS,
                   "a sandbox with ID \"%s\" already exists", sandbox->id);
  }
  sandbox->revision = record->revision;
  return TRUE;
}

gboolean
box_storage_sandbox_update (BoxStorage *self, BoxSandbox *sandbox, GError **error)
{
  g_autoptr(BoxStorageRecord) record = NULL;
  GError *local = NULL;

  g_return_val_if_fail (sandbox != NULL, FALSE);
  record = sandbox_record (sandbox);
  if (!box_storage_update (self, record, &local))
    return sandbox_name_taken (error, local, sandbox);
  sandbox->revision = record->revision;
  return TRUE;
}

static BoxSandbox *
sandbox_by_name (BoxStorage *self, const char *project, const char *name, GError **error)
{
  g_autoptr(GPtrArray) found = box_storage_list (self, BOX_STORAGE_KIND_SANDBOX, project,
                                                 BOX_STORAGE_BY_NAME, name,
                                                 BOX_STORAGE_ORDER_CREATED, error);

  if (found == NULL)
    return NULL;
  if (found->len == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no sandbox %s", name);
    return NULL;
  }
  if (found->len > 1) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "sandbox name %s is used in %u projects; use the sandbox ID", name, found->len);
    return NULL;
  }
  return sandbox_decode (self, g_ptr_array_index (found, 0), error);
}

BoxSandbox *
box_storage_sandbox_get (BoxStorage *self, const char *project, const char *id_or_name,
                         GError **error)
{
  g_autoptr(GError) local = NULL;
  BoxStorageRecord *record;

  g_return_val_if_fail (id_or_name != NULL, NULL);
  record = box_storage_get (self, BOX_STORAGE_KIND_SANDBOX, project, BOX_STORAGE_BY_ID,
                            id_or_name, &local);
  if (record != NULL) {
    g_autoptr(BoxStorageRecord) owned = record;

    return sandbox_decode (self, owned, error);
  }
  if (!g_error_matches (local, BOX_ERROR, BOX_ERROR_NOT_FOUND)) {
    g_propagate_error (error, g_steal_pointer (&local));
    return NULL;
  }
  return sandbox_by_name (self, project, id_or_name, error);
}

GPtrArray *
box_storage_sandbox_list (BoxStorage *self, const char *project, GError **error)
{
  return decode_all (box_storage_list (self, BOX_STORAGE_KIND_SANDBOX, project,
                                       BOX_STORAGE_BY_SCOPE, NULL, BOX_STORAGE_ORDER_CREATED,
                                       error),
                     (FromBody) box_sandbox_from_storage_json,
                     G_STRUCT_OFFSET (BoxSandbox, revision),
                     (GDestroyNotify) box_sandbox_free, error);
}

/* The sandbox and everything in its scope (its checkpoints), at once. */
gboolean
box_storage_sandbox_delete (BoxStorage *self, const char *project, const char *id,
                            GError **error)
{
  g_autoptr(BoxStorageRecord) sandbox = record_ref (BOX_STORAGE_KIND_SANDBOX, project, id);
  g_autoptr(BoxStorageRecord) scope = record_ref (NULL, id, NULL);
  BoxStorageOp ops[] = {
    { BOX_STORAGE_OP_DELETE, sandbox },
    { BOX_STORAGE_OP_DELETE_SCOPE, scope },
  };

  g_return_val_if_fail (id != NULL, FALSE);
  return box_storage_write (self, ops, G_N_ELEMENTS (ops), error);
}

/* ---- checkpoints: a kind that only the generic path knows -------------- */

static char *
checkpoint_record_id (const char *sandbox_id, const char *id)
{
  return g_strdup_printf ("%s/%s", sandbox_id, id);
}

gboolean
box_storage_checkpoint_insert (BoxStorage *self, BoxCheckpoint *checkpoint, GError **error)
{
  g_autoptr(BoxStorageRecord) sandbox = NULL;
  g_autoptr(BoxStorageRecord) record = NULL;
  g_autoptr(BoxCheckpoint) filled = NULL;
  g_autofree char *record_id = NULL;
  BoxStorageOp ops[2];
  GError *local = NULL;

  g_return_val_if_fail (checkpoint != NULL, FALSE);
  sandbox = box_storage_get (self, BOX_STORAGE_KIND_SANDBOX, NULL, BOX_STORAGE_BY_ID,
                             checkpoint->sandbox, error);
  if (sandbox == NULL)
    return FALSE;
  filled = box_checkpoint_copy (checkpoint);
  if (filled->project == NULL) {
    filled->project = g_strdup (sandbox->scope);
    checkpoint->project = g_strdup (sandbox->scope);
  }
  record_id = checkpoint_record_id (checkpoint->sandbox, checkpoint->id);
  record = record_new (BOX_STORAGE_KIND_CHECKPOINT, checkpoint->sandbox, record_id,
                       box_checkpoint_to_storage_json (filled), checkpoint->created_at, 0);
  record->name = g_strdup (checkpoint->id);
  /* the sandbox must still be there when the checkpoint is written */
  sandbox->revision = 0;
  ops[0] = (BoxStorageOp) { BOX_STORAGE_OP_CHECK, sandbox };
  ops[1] = (BoxStorageOp) { BOX_STORAGE_OP_INSERT, record };
  if (!box_storage_write (self, ops, G_N_ELEMENTS (ops), &local))
    return reword (error, local, BOX_ERROR_ALREADY_EXISTS,
                   "a checkpoint \"%s\" already exists in sandbox \"%s\"",
                   checkpoint->id, checkpoint->sandbox);
  checkpoint->revision = record->revision;
  return TRUE;
}

BoxCheckpoint *
box_storage_checkpoint_get (BoxStorage *self, const char *sandbox_id, const char *id,
                            GError **error)
{
  GError *local = NULL;
  BoxStorageRecord *record = box_storage_get (self, BOX_STORAGE_KIND_CHECKPOINT, sandbox_id,
                                              BOX_STORAGE_BY_NAME, id, &local);

  if (record == NULL) {
    reword (error, local, BOX_ERROR_NOT_FOUND, "no checkpoint %s in sandbox %s", id, sandbox_id);
    return NULL;
  }
  return decode_one (record, (FromBody) box_checkpoint_from_storage_json,
                     G_STRUCT_OFFSET (BoxCheckpoint, revision), error);
}

GPtrArray *
box_storage_checkpoint_list (BoxStorage *self, const char *sandbox_id, GError **error)
{
  g_return_val_if_fail (sandbox_id != NULL, NULL);
  return decode_all (box_storage_list (self, BOX_STORAGE_KIND_CHECKPOINT, sandbox_id,
                                       BOX_STORAGE_BY_SCOPE, NULL, BOX_STORAGE_ORDER_INSERTED,
                                       error),
                     (FromBody) box_checkpoint_from_storage_json,
                     G_STRUCT_OFFSET (BoxCheckpoint, revision),
                     (GDestroyNotify) box_checkpoint_free, error);
}

gboolean
box_storage_checkpoint_delete (BoxStorage *self, const char *sandbox_id, const char *id,
                               GError **error)
{
  g_autofree char *record_id = checkpoint_record_id (sandbox_id, id);
  GError *local = NULL;

  if (!box_storage_delete (self, BOX_STORAGE_KIND_CHECKPOINT, sandbox_id, record_id, 0, &local))
    return reword (error, local, BOX_ERROR_NOT_FOUND,
                   "no checkpoint %s in sandbox %s", id, sandbox_id);
  return TRUE;
}

/* ---- secrets ----------------------------------------------------------- */

static char *
secret_record_id (const char *project, const char *name)
{
  return g_strdup_printf ("%s/%s", project, name);
}

/* Builds the record to write from the stored one (NULL when there is none). */
typedef BoxStorageRecord *(*BuildFunc) (const BoxStorageRecord *stored, gpointer user_data);

/* Insert, or update at the revision just read; a write that lost the race
 * (to an insert, an update or a delete) starts again from the read. */
static gboolean
put (BoxStorage *self, const char *kind, const char *scope, BoxStorageIndex index,
     const char *key, BuildFunc build, gpointer user_data, guint64 *revision, GError **error)
{
  for (guint attempt = 1;; attempt++) {
    g_autoptr(BoxStorageRecord) stored = NULL;
    g_autoptr(BoxStorageRecord) record = NULL;
    g_autoptr(GError) local = NULL;
    gboolean written;

    stored = box_storage_get (self, kind, scope, index, key, &local);
    if (stored == NULL && !g_error_matches (local, BOX_ERROR, BOX_ERROR_NOT_FOUND)) {
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
    g_clear_error (&local);
    record = build (stored, user_data);
    record->revision = stored != NULL ? stored->revision : 0;
    written = stored != NULL ? box_storage_update (self, record, &local)
                             : box_storage_insert (self, record, &local);
    if (written) {
      *revision = record->revision;
      return TRUE;
    }
    if (attempt == BOX_STORAGE_RECORDS_TRIES ||
        !(g_error_matches (local, BOX_ERROR, BOX_ERROR_CONFLICT) ||
          g_error_matches (local, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS) ||
          g_error_matches (local, BOX_ERROR, BOX_ERROR_NOT_FOUND))) {
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  }
}

/* A replaced secret keeps the stored created_at. */
static BoxStorageRecord *
secret_build (const BoxStorageRecord *stored, gpointer user_data)
{
  BoxSecret *secret = user_data;
  g_autofree char *record_id = secret_record_id (secret->project, secret->name);
  g_autoptr(BoxSecret) kept = box_secret_copy (secret);
  BoxStorageRecord *record;

  if (stored != NULL)
    kept->created_at = stored->created_at;
  record = record_new (BOX_STORAGE_KIND_SECRET, kept->project, record_id,
                       box_secret_to_storage_json (kept), kept->created_at, 0);
  record->name = g_strdup (kept->name);
  return record;
}

gboolean
box_storage_secret_put (BoxStorage *self, BoxSecret *secret, GError **error)
{
  g_return_val_if_fail (secret != NULL, FALSE);
  return put (self, BOX_STORAGE_KIND_SECRET, secret->project, BOX_STORAGE_BY_NAME, secret->name,
              secret_build, secret, &secret->revision, error);
}

BoxSecret *
box_storage_secret_get (BoxStorage *self, const char *project, const char *name,
                        GError **error)
{
  g_return_val_if_fail (project != NULL, NULL);
  return decode_one (box_storage_get (self, BOX_STORAGE_KIND_SECRET, project,
                                      BOX_STORAGE_BY_NAME, name, error),
                     (FromBody) box_secret_from_storage_json,
                     G_STRUCT_OFFSET (BoxSecret, revision), error);
}

GPtrArray *
box_storage_secret_list (BoxStorage *self, const char *project, GError **error)
{
  g_return_val_if_fail (project != NULL, NULL);
  return decode_all (box_storage_list (self, BOX_STORAGE_KIND_SECRET, project,
                                       BOX_STORAGE_BY_SCOPE, NULL, BOX_STORAGE_ORDER_CREATED,
                                       error),
                     (FromBody) box_secret_from_storage_json,
                     G_STRUCT_OFFSET (BoxSecret, revision),
                     (GDestroyNotify) box_secret_free, error);
}

gboolean
box_storage_secret_delete (BoxStorage *self, const char *project, const char *name,
                           GError **error)
{
  g_autofree char *record_id = NULL;
  GError *local = NULL;

  g_return_val_if_fail (project != NULL && name != NULL, FALSE);
  record_id = secret_record_id (project, name);
  if (!box_storage_delete (self, BOX_STORAGE_KIND_SECRET, project, record_id, 0, &local))
    return reword (error, local, BOX_ERROR_NOT_FOUND, "no secret %s", name);
  return TRUE;
}

/* ---- meta: {"value": "<hex>"} ------------------------------------------ */

GBytes *
box_storage_meta_get (BoxStorage *self, const char *key, GError **error)
{
  g_autoptr(BoxStorageRecord) record = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  GError *local = NULL;
  JsonNode *root;
  GBytes *value = NULL;

  g_return_val_if_fail (key != NULL, NULL);
  record = box_storage_get (self, BOX_STORAGE_KIND_META, "", BOX_STORAGE_BY_ID, key, &local);
  if (record == NULL) {
    reword (error, local, BOX_ERROR_NOT_FOUND, "no meta value %s", key);
    return NULL;
  }
  if (json_parser_load_from_data (parser, record->body, -1, NULL) &&
      (root = json_parser_get_root (parser)) != NULL && JSON_NODE_HOLDS_OBJECT (root))
    value = box_records_hex_decode (json_object_get_string_member_with_default (
                                      json_node_get_object (root), "value", NULL));
  if (value == NULL)
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "stored meta %s is unreadable", key);
  return value;
}

static BoxStorageRecord *
meta_build (const BoxStorageRecord *stored, gpointer user_data)
{
  const char *const *key_body = user_data;

  return record_new (BOX_STORAGE_KIND_META, "", key_body[0], g_strdup (key_body[1]), 0, 0);
}

gboolean
box_storage_meta_set (BoxStorage *self, const char *key, GBytes *value, GError **error)
{
  g_autoptr(JsonObject) obj = json_object_new ();
  g_autofree char *body = NULL;
  g_autofree char *hex = NULL;
  const char *key_body[2];
  guint64 revision = 0;

  g_return_val_if_fail (key != NULL && value != NULL, FALSE);
  hex = box_records_hex_encode (value);
  json_object_set_string_member (obj, "value", hex);
  body = box_records_object_to_string (g_steal_pointer (&obj));
  key_body[0] = key;
  key_body[1] = body;
  return put (self, BOX_STORAGE_KIND_META, "", BOX_STORAGE_BY_ID, key, meta_build, key_body,
              &revision, error);
}
