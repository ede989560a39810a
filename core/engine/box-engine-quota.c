/* box-engine-quota.c: a project's quota, checked when a sandbox is created.
 *
 * A quota bounds what a project's sandboxes hold, whatever their state
 * (a stopped sandbox can be woken at any time, so what it would take
 * counts while it exists): their number, their CPUs and memory, and the
 * disk the host keeps for them.  Disk counts a sandbox's disk at its full
 * size (a thin overlay can grow to it), plus its memory (the snapshot a
 * pause or an idle rule writes), plus each checkpoint: the sandbox's disk
 * again, and its memory when the checkpoint has one.
 *
 * box_engine_get_quota() shows a project's quota and usage (the D-Bus
 * GetProjectQuota, boxctl quota).
 *
 * Resources do not change after create, so create (and fork) is the one
 * place to check a sandbox, and a new checkpoint (or the automatic one a
 * restore keeps) checks the disk it adds.  A create's check and insert
 * run in one main-loop turn, so two creates cannot both take the last
 * room; a checkpoint's record is written only once the hypervisor made
 * it, so the checkpoints under way (their pending records) count too.  A
 * restore checks the room once the automatic checkpoints it prunes (beyond
 * the newest 5) are gone.  Refusals are 409 conflict
 * (the project's state forbids the call, as a 65th live task does) with a
 * message naming the quota; nothing is written.
 */
#include "config.h"

#include "box-engine-ops-private.h"
#include "box-storage-records.h"

static void
add_sandbox (BoxQuotaUsage *usage, const BoxResources *resources)
{
  usage->sandboxes++;
  usage->cpus += resources->cpus;
  usage->memory_mib += resources->memory_mib;
  usage->disk_mib += (guint64) resources->disk_gib * 1024 + resources->memory_mib;
}

guint64
box_engine_checkpoint_disk_mib (const BoxResources *resources, gboolean memory)
{
  return (guint64) resources->disk_gib * 1024 + (memory ? resources->memory_mib : 0);
}

/* The checkpoints of @sandbox under way: a pending record without a
 * checkpoint record (box-engine-checkpoints.c) is one the hypervisor is
 * making (or a delete not yet finished), whose room is taken too, so two
 * checkpoints at once cannot both take the last of it.  A record without
 * "memory" (written before it was kept) counts with memory. */
static gboolean
add_pending (BoxEngine *self, const BoxSandbox *sandbox, GPtrArray *checkpoints,
             BoxQuotaUsage *usage, GError **error)
{
  g_autoptr(GPtrArray) pending = box_storage_list (self->storage,
                                                   BOX_ENGINE_CHECKPOINT_PENDING_KIND,
                                                   sandbox->id, BOX_STORAGE_BY_SCOPE, NULL,
                                                   BOX_STORAGE_ORDER_CREATED, error);

  if (pending == NULL)
    return FALSE;
  for (guint i = 0; i < pending->len; i++) {
    const BoxStorageRecord *record = g_ptr_array_index (pending, i);
    const char *slash = strchr (record->id, '/');
    g_autoptr(JsonParser) parser = json_parser_new ();
    gboolean recorded = FALSE, memory = TRUE;
    JsonNode *root;

    for (guint j = 0; slash != NULL && j < checkpoints->len; j++)
      recorded |= g_str_equal (((const BoxCheckpoint *) g_ptr_array_index (checkpoints, j))->id,
                               slash + 1);
    if (recorded)
      continue;
    if (json_parser_load_from_data (parser, record->body, -1, NULL) &&
        JSON_NODE_HOLDS_OBJECT (root = json_parser_get_root (parser)))
      memory = json_object_get_boolean_member_with_default (json_node_get_object (root), "memory",
                                                            TRUE);
    usage->disk_mib += box_engine_checkpoint_disk_mib (&sandbox->resources, memory);
  }
  return TRUE;
}

static gboolean
project_usage (BoxEngine *self, const char *project, BoxQuotaUsage *usage, GError **error)
{
  g_autoptr(GPtrArray) sandboxes = box_storage_sandbox_list (self->storage, project, error);

  if (sandboxes == NULL)
    return FALSE;
  for (guint i = 0; i < sandboxes->len; i++) {
    const BoxSandbox *sandbox = g_ptr_array_index (sandboxes, i);
    g_autoptr(GPtrArray) checkpoints = NULL;

    add_sandbox (usage, &sandbox->resources);
    checkpoints = box_storage_checkpoint_list (self->storage, sandbox->id, error);
    if (checkpoints == NULL || !add_pending (self, sandbox, checkpoints, usage, error))
      return FALSE;
    for (guint j = 0; j < checkpoints->len; j++) {
      const BoxCheckpoint *checkpoint = g_ptr_array_index (checkpoints, j);

      usage->disk_mib += box_engine_checkpoint_disk_mib (&sandbox->resources, checkpoint->memory);
    }
  }
  return TRUE;
}

static gboolean
refuse_for (const char *needer, const char *project, const char *what, guint64 limit,
            const char *unit, guint64 used, guint64 wanted, GError **error)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT,
               "quota exceeded: project %s may hold at most %" G_GUINT64_FORMAT "%s %s; it holds %"
               G_GUINT64_FORMAT "%s and %s needs %" G_GUINT64_FORMAT "%s",
               project, limit, unit, what, used, unit, needer, wanted, unit);
  return FALSE;
}

#define refuse(...) refuse_for ("this sandbox", __VA_ARGS__)
#define DISK_WHAT "of disk (disks at full size, memory snapshots and checkpoints)"

gboolean
box_engine_check_quota (BoxEngine *self, const char *project, const BoxResources *wanted,
                        GError **error)
{
  BoxQuota quota;
  BoxQuotaUsage usage = { 0 };
  BoxQuotaUsage want = { 0 };

  box_config_get_quota (self->config, project, &quota);
  if (quota.sandboxes == 0 && quota.cpus == 0 && quota.memory_mib == 0 && quota.disk_gib == 0)
    return TRUE;
  if (!project_usage (self, project, &usage, error))
    return FALSE;
  add_sandbox (&want, wanted);
  if (quota.sandboxes > 0 && usage.sandboxes + 1 > quota.sandboxes)
    return refuse (project, "sandboxes", quota.sandboxes, "", usage.sandboxes, 1, error);
  if (quota.cpus > 0 && usage.cpus + want.cpus > quota.cpus)
    return refuse (project, "CPUs", quota.cpus, "", usage.cpus, want.cpus, error);
  if (quota.memory_mib > 0 && usage.memory_mib + want.memory_mib > quota.memory_mib)
    return refuse (project, "of memory", quota.memory_mib, " MiB", usage.memory_mib,
                   want.memory_mib, error);
  if (quota.disk_gib > 0 && usage.disk_mib + want.disk_mib > quota.disk_gib * 1024)
    return refuse (project, DISK_WHAT,
                   quota.disk_gib * 1024, " MiB", usage.disk_mib, want.disk_mib, error);
  return TRUE;
}

gboolean
box_engine_get_quota (BoxEngine *self, const char *project, BoxQuota *quota, BoxQuotaUsage *usage,
                      GError **error)
{
  g_autoptr(BoxProject) found = NULL;

  g_return_val_if_fail (BOX_IS_ENGINE (self), FALSE);
  found = box_engine_get_project (self, project, error);
  if (found == NULL)
    return FALSE;
  box_config_get_quota (self->config, found->name, quota);
  *usage = (BoxQuotaUsage) { 0 };
  return project_usage (self, found->name, usage, error);
}

gboolean
box_engine_check_checkpoint_quota (BoxEngine *self, const char *project, guint64 disk_mib,
                                   guint64 freed_mib, GError **error)
{
  BoxQuota quota;
  BoxQuotaUsage usage = { 0 };

  box_config_get_quota (self->config, project, &quota);
  if (quota.disk_gib == 0)
    return TRUE;
  if (!project_usage (self, project, &usage, error))
    return FALSE;
  usage.disk_mib -= MIN (freed_mib, usage.disk_mib);
  if (usage.disk_mib + disk_mib > quota.disk_gib * 1024)
    return refuse_for ("this checkpoint", project, DISK_WHAT, quota.disk_gib * 1024, " MiB",
                       usage.disk_mib, disk_mib, error);
  return TRUE;
}
