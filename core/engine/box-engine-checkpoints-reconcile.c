/* box-engine-checkpoints-reconcile.c: what a crash left of checkpoints,
 * reconciled at start (box_engine_reconcile(), box-engine-ticks.c).
 *
 * First the pending records of box-engine-checkpoints.c: one whose
 * checkpoint record exists was finished (only the pending record goes);
 * any other names a checkpoint cut midway, or a delete, whose files are
 * deleted from the hypervisor.
 *
 * Then every sandbox's checkpoint records are compared with the
 * checkpoints the hypervisor keeps for it (box_hypervisor_list_checkpoints();
 * a hypervisor that cannot list them is trusted as it is):
 *   - a record whose files are gone (deleted by hand, a disk lost) could
 *     never be restored or forked: its record is removed (logged, event
 *     checkpoint.deleted) and DELETE_CHECKPOINT clears whatever part of it
 *     is left; only when the hypervisor holds the sandbox's VM (query() is
 *     not ABSENT), since one that knows nothing of the sandbox cannot say
 *     its files are gone;
 *   - files without a record (and without a pending record, which the
 *     pending path deletes already) are no checkpoint anyone can name:
 *     they are deleted (logged).
 * Every delete goes through sweep(), under the sandbox's lock, so none
 * overlaps an operation on it.
 *
 * A memory snapshot never holds the env: the guest forgets it before one
 * and gets it back before the hypervisor's CHECKPOINT completes.  A boxd
 * killed between the two (a checkpoint, or the auto-N of a restore, cut
 * midway) leaves a running guest without its env, and always a pending
 * record without a checkpoint record: the env of each sandbox with such a
 * record is pushed again, if it runs.  A delete cut midway leaves the
 * same kind of record and gets a push too, which changes nothing.  Every
 * other sandbox gets no agent call at start.
 */
#include "config.h"

#include <string.h>

#include "box-agent-exec.h"
#include "box-engine-ops-private.h"
#include "box-storage-records.h"

typedef struct {
  BoxEngine *self;
  char      *sandbox_id;
  char      *checkpoint;
  const char *why;
} Orphan;

static void
orphan_free (Orphan *orphan)
{
  g_object_unref (orphan->self);
  g_free (orphan->sandbox_id);
  g_free (orphan->checkpoint);
  g_free (orphan);
}

static void
orphan_deleted (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Orphan *orphan = user_data;

  if (box_engine_checkpoint_files_deleted (orphan->self, orphan->sandbox_id, orphan->checkpoint,
                                           result))
    g_message ("sandbox %s: checkpoint %s %s deleted", orphan->sandbox_id, orphan->checkpoint,
               orphan->why);
  box_engine_unlock_sandbox (orphan->self, orphan->sandbox_id);
  orphan_free (orphan);
}

static void
orphan_locked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Orphan *orphan = user_data;
  BoxVmRequest vm = { 0 };

  vm.sandbox_id = orphan->sandbox_id;
  vm.checkpoint_id = orphan->checkpoint;
  box_hypervisor_run_async (orphan->self->hypervisor, BOX_VM_OP_DELETE_CHECKPOINT, &vm, NULL,
                            orphan_deleted, orphan);
}

/* Under the sandbox's lock, DELETE_CHECKPOINT of @checkpoint and then its
 * pending record (kept for the next start when the delete fails); logged
 * as "checkpoint <id> <@why, a static string> deleted". */
static void
sweep (BoxEngine *self, const char *sandbox_id, const char *checkpoint, const char *why)
{
  Orphan *orphan = g_new0 (Orphan, 1);

  orphan->why = why;
  orphan->self = g_object_ref (self);
  orphan->sandbox_id = g_strdup (sandbox_id);
  orphan->checkpoint = g_strdup (checkpoint);
  box_engine_lock_sandbox_async (self, orphan->sandbox_id, orphan_locked, orphan);
}

static gboolean
listed (char **ids, const char *id)
{
  return ids != NULL && g_strv_contains ((const char *const *) ids, id);
}

static gboolean
recorded (GPtrArray *records, const char *id)
{
  for (guint i = 0; i < records->len; i++) {
    const BoxCheckpoint *checkpoint = g_ptr_array_index (records, i);

    if (g_str_equal (checkpoint->id, id))
      return TRUE;
  }
  return FALSE;
}

/* FALSE when the hypervisor cannot list checkpoints at all. */
static gboolean
reconcile_sandbox (BoxEngine *self, const BoxSandbox *sandbox, GHashTable *swept)
{
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) held = box_hypervisor_list_checkpoints (self->hypervisor, sandbox->id, &error);
  g_autoptr(GPtrArray) records = NULL;
  gboolean vouches;

  if (held == NULL) {
    if (g_error_matches (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED))
      return FALSE;
    g_warning ("sandbox %s: its checkpoints are not reconciled: %s", sandbox->id, error->message);
    return TRUE;
  }
  records = box_storage_checkpoint_list (self->storage, sandbox->id, &error);
  if (records == NULL) {
    g_warning ("sandbox %s: its checkpoints are not reconciled: %s", sandbox->id, error->message);
    return TRUE;
  }
  /* a hypervisor that holds nothing of the sandbox cannot vouch for its
   * checkpoints either (another hypervisor's, a migrated database) */
  vouches = box_hypervisor_query (self->hypervisor, sandbox->id, NULL) != BOX_VM_STATE_ABSENT;
  for (guint i = 0; vouches && i < records->len; i++) {
    const BoxCheckpoint *checkpoint = g_ptr_array_index (records, i);

    if (listed (held, checkpoint->id))
      continue;
    g_warning ("sandbox %s: checkpoint %s has a record but the hypervisor has no files for it; "
               "the record is removed", sandbox->id, checkpoint->id);
    if (!box_engine_checkpoint_delete_record (self, sandbox, checkpoint->id, &error)) {
      g_warning ("sandbox %s: checkpoint %s: %s", sandbox->id, checkpoint->id, error->message);
      g_clear_error (&error);
      continue;
    }
    sweep (self, sandbox->id, checkpoint->id, "with missing files");
  }
  for (guint i = 0; held[i] != NULL; i++) {
    g_autofree char *key = g_strdup_printf ("%s/%s", sandbox->id, held[i]);

    if (recorded (records, held[i]) || g_hash_table_contains (swept, key))
      continue;
    g_warning ("sandbox %s: the hypervisor keeps files of checkpoint %s, which has no record; "
               "they are deleted", sandbox->id, held[i]);
    sweep (self, sandbox->id, held[i], "without a record");
  }
  return TRUE;
}

static void
env_pushed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(BoxSandbox) sandbox = user_data;
  g_autoptr(GError) error = NULL;

  if (!box_agent_client_set_env_finish (BOX_AGENT_CLIENT (source), result, &error))
    g_warning ("sandbox %s: its env did not reach the guest at start: %s", sandbox->id,
               error->message);
}

/* The env of @sandbox_id, whose checkpoint was cut midway, pushed again
 * to its guest when it runs (see the top). */
static void
push_env (BoxEngine *self, const char *sandbox_id)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(BoxAgentClient) agent = NULL;
  g_autoptr(GHashTable) env = NULL;

  if (!box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_GUEST_AGENT))
    return;
  sandbox = box_storage_sandbox_get (self->storage, NULL, sandbox_id, NULL);
  if (sandbox == NULL || sandbox->state != BOX_SANDBOX_STATE_RUNNING || sandbox->env == NULL)
    return;
  agent = box_hypervisor_get_agent (self->hypervisor, sandbox->id, &error);
  if (agent == NULL) {
    g_warning ("sandbox %s: its env did not reach the guest at start: %s", sandbox->id,
               error->message);
    return;
  }
  env = box_engine_guest_env (self, sandbox);
  box_agent_client_set_env_async (agent, env, NULL, env_pushed, g_steal_pointer (&sandbox));
}

/* Records and files compared both ways (@swept holds
 * "<sandbox>/<checkpoint>" already being deleted). */
static void
reconcile_files (BoxEngine *self, GHashTable *swept)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) sandboxes = box_storage_sandbox_list (self->storage, NULL, &error);
  gboolean listing = TRUE;

  if (sandboxes == NULL) {
    g_warning ("checkpoints: not reconciled with the hypervisor's: %s", error->message);
    return;
  }
  /* a hypervisor that cannot list checkpoints says so for the first one */
  for (guint i = 0; listing && i < sandboxes->len; i++)
    listing = reconcile_sandbox (self, g_ptr_array_index (sandboxes, i), swept);
}

void
box_engine_reconcile_checkpoints (BoxEngine *self)
{
  g_autoptr(GHashTable) swept = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GHashTable) cut = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) pending = box_storage_list (self->storage,
                                                   BOX_ENGINE_CHECKPOINT_PENDING_KIND, NULL,
                                                   BOX_STORAGE_BY_SCOPE, NULL,
                                                   BOX_STORAGE_ORDER_CREATED, &error);
  GHashTableIter iter;
  gpointer sandbox_id;

  if (pending == NULL) {
    g_warning ("checkpoints: cannot list the pending ones: %s", error->message);
    return;
  }
  for (guint i = 0; i < pending->len; i++) {
    const BoxStorageRecord *record = g_ptr_array_index (pending, i);
    const char *slash = strchr (record->id, '/');
    g_autoptr(BoxCheckpoint) written = NULL;

    if (slash == NULL)
      continue;
    written = box_storage_checkpoint_get (self->storage, record->scope, slash + 1, NULL);
    if (written != NULL) {
      /* made and recorded; only the pending record was left */
      box_engine_checkpoint_pending_clear (self, record->scope, slash + 1);
      continue;
    }
    sweep (self, record->scope, slash + 1, "left by a crash");
    g_hash_table_add (swept, g_strdup (record->id));
    g_hash_table_add (cut, g_strdup (record->scope));
  }
  g_hash_table_iter_init (&iter, cut);
  while (g_hash_table_iter_next (&iter, &sandbox_id, NULL))
    push_env (self, sandbox_id);
  reconcile_files (self, swept);
}
