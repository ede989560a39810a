/* box-engine-checkpoints-reconcile.c: checkpoint records and the
 * hypervisor's files compared both ways at start.
 *
 * After the pending records of box-engine-checkpoints.c are dealt with,
 * every sandbox's checkpoint records are compared with the checkpoints the
 * hypervisor keeps for it (box_hypervisor_list_checkpoints(); a hypervisor
 * that cannot list them is trusted as it is):
 *   - a record whose files are gone (deleted by hand, a disk lost) could
 *     never be restored or forked: its record is removed (logged, event
 *     checkpoint.deleted) and DELETE_CHECKPOINT clears whatever part of it
 *     is left; only when the hypervisor holds the sandbox's VM (query() is
 *     not ABSENT), since one that knows nothing of the sandbox cannot say
 *     its files are gone;
 *   - files without a record (and without a pending record, which the
 *     pending path deletes already) are no checkpoint anyone can name:
 *     they are deleted (logged).
 * Both deletes go through box_engine_checkpoint_sweep(), under the
 * sandbox's lock, so they never overlap an operation on it.
 *
 * A memory snapshot never holds the env: the guest forgets it before one
 * and gets it back after.  A boxd killed between the two (a checkpoint, or
 * the auto-N of a restore, cut midway) leaves a running guest without its
 * env, so every running sandbox's env is pushed again at start.
 */
#include "config.h"

#include "box-agent-exec.h"
#include "box-engine-ops-private.h"
#include "box-storage-records.h"

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
    box_engine_checkpoint_sweep (self, sandbox->id, checkpoint->id, "with missing files");
  }
  for (guint i = 0; held[i] != NULL; i++) {
    g_autofree char *key = g_strdup_printf ("%s/%s", sandbox->id, held[i]);

    if (recorded (records, held[i]) || g_hash_table_contains (swept, key))
      continue;
    g_warning ("sandbox %s: the hypervisor keeps files of checkpoint %s, which has no record; "
               "they are deleted", sandbox->id, held[i]);
    box_engine_checkpoint_sweep (self, sandbox->id, held[i], "without a record");
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

static void
push_env (BoxEngine *self, BoxSandbox *sandbox)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxAgentClient) agent = NULL;

  if (sandbox->state != BOX_SANDBOX_STATE_RUNNING || sandbox->env == NULL ||
      !box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_GUEST_AGENT))
    return;
  agent = box_hypervisor_get_agent (self->hypervisor, sandbox->id, &error);
  if (agent == NULL) {
    g_warning ("sandbox %s: its env did not reach the guest at start: %s", sandbox->id,
               error->message);
    return;
  }
  box_agent_client_set_env_async (agent, sandbox->env, NULL, env_pushed,
                                  box_sandbox_copy (sandbox));
}

void
box_engine_reconcile_checkpoint_files (BoxEngine *self, GHashTable *swept)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) sandboxes = box_storage_sandbox_list (self->storage, NULL, &error);
  gboolean listing = TRUE;

  if (sandboxes == NULL) {
    g_warning ("checkpoints: not reconciled with the hypervisor's: %s", error->message);
    return;
  }
  for (guint i = 0; i < sandboxes->len; i++) {
    BoxSandbox *sandbox = g_ptr_array_index (sandboxes, i);

    listing = listing && reconcile_sandbox (self, sandbox, swept);
    push_env (self, sandbox);
  }
}
