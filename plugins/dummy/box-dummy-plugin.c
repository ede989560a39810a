/* box-dummy-plugin.c: the `dummy` hypervisor, which runs no VM.
 *
 * A test double with the semantics of a real hypervisor plugin: every
 * operation is a state change on a per-sandbox record (running, suspended,
 * shutoff or lost, the newest snapshot's time and the checkpoints), written
 * to <state-dir>/<sandbox id>.json so that query() answers after a restart
 * exactly as a real plugin must.  Operations complete asynchronously, on a
 * main-loop source, after an optional delay.
 *
 * It is the engine's test double, so it can be told to misbehave: fail or
 * delay any operation (per operation, per sandbox, n times), lose a VM in
 * the middle of an operation, report any capability.  Through its config
 * section, or at run time through box_dummy_plugin_script() or, for code
 * that has only the instance (the plugin exports no symbol but its entry),
 * the action signals "script", "set-capabilities", "lose-vm",
 * "lose-all", "set-agent" (a test's fake agent for get_agent()) and
 * "guest-ca" (what set_guest_ca() was last given): box-dummy-actions.c.
 *
 *   [plugin.dummy]
 *   delay_ms=0            artificial latency of every operation
 *   max_cpus=4096         capacity, counted over RUNNING VMs
 *   max_memory_mib=16777216
 *   fail_create=false     CREATE fails with BOX_ERROR_INTERNAL "injected failure"
 *   script=               fault rules, ';'-separated (box-dummy-script.h)
 *   capabilities=memory-snapshots,checkpoints,fork
 *   accel=none
 *   templates=base,e2b    the templates offered (of those two)
 *   agent=                a program run as each running sandbox's guest agent
 *                         (tests; adds the guest-agent capability); see
 *                         box-dummy-agent.h
 *   agent_args=--fd {fd}  its arguments; a sandbox's env variable
 *                         BOX_DUMMY_AGENT_ARGS at create overrides them
 *   agent_programs=       other programs (';'-separated paths) that variable
 *                         may name as its first word
 */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "box-dummy-plugin-private.h"
#include "box-plugin-context.h"

#define BOX_DUMMY_MAX_CPUS_DEFAULT        "4096"
#define BOX_DUMMY_MAX_MEMORY_MIB_DEFAULT  "16777216"   /* 16 TiB */
#define BOX_DUMMY_DELAY_MS_MAX            600000
#define BOX_DUMMY_CAPS_DEFAULT            "memory-snapshots,checkpoints,fork"

static void box_dummy_plugin_hypervisor_init (BoxHypervisorInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxDummyPlugin, box_dummy_plugin, BOX_TYPE_PLUGIN,
                               G_IMPLEMENT_INTERFACE (BOX_TYPE_HYPERVISOR,
                                                      box_dummy_plugin_hypervisor_init))

/* ---- configuration ---- */

static gboolean
box_dummy_config_uint (BoxDummyPlugin *self, const char *key, const char *fallback,
                       guint64 max, guint64 *value, GError **error)
{
  return box_plugin_context_get_uint (box_plugin_get_context (BOX_PLUGIN (self)), key,
                                      g_ascii_strtoull (fallback, NULL, 10), max, value, error);
}

static gboolean
box_dummy_config_bool (BoxDummyPlugin *self, const char *key, gboolean *value, GError **error)
{
  return box_plugin_context_get_bool (box_plugin_get_context (BOX_PLUGIN (self)), key, FALSE, value,
                                      error);
}


/* Reads every <id>.json of the state directory once. */
static void
box_dummy_plugin_ensure_loaded (BoxDummyPlugin *self)
{
  const char *dir;
  g_autoptr(GDir) gdir = NULL;
  g_autoptr(GError) error = NULL;
  const char *entry;

  if (self->loaded)
    return;
  self->loaded = TRUE;
  dir = box_plugin_get_state_dir (BOX_PLUGIN (self));
  if (dir == NULL)
    return;
  gdir = g_dir_open (dir, 0, &error);
  if (gdir == NULL) {
    g_warning ("cannot read the dummy hypervisor's state in %s: %s", dir, error->message);
    return;
  }
  while ((entry = g_dir_read_name (gdir)) != NULL) {
    g_autofree char *id = NULL;
    g_autofree char *path = NULL;
    g_autoptr(GError) error_vm = NULL;
    BoxDummyVm *vm;

    if (!g_str_has_suffix (entry, ".json"))
      continue;
    id = g_strndup (entry, strlen (entry) - strlen (".json"));
    if (!box_dummy_id_is_valid (id))
      continue;
    path = g_build_filename (dir, entry, NULL);
    vm = box_dummy_vm_load (id, path, &error_vm);
    if (vm == NULL) {
      g_warning ("ignoring the dummy hypervisor's state in %s: %s", path, error_vm->message);
      continue;
    }
    g_hash_table_replace (self->vms, vm->id, vm);
  }
}

BoxDummyVm *
box_dummy_plugin_lookup (BoxDummyPlugin *self, const char *id)
{
  box_dummy_plugin_ensure_loaded (self);
  return g_hash_table_lookup (self->vms, id);
}

static void
box_dummy_plugin_forget (BoxDummyPlugin *self, const char *id)
{
  g_autofree char *path = box_dummy_vm_path (box_plugin_get_state_dir (BOX_PLUGIN (self)), id);

  g_hash_table_remove (self->vms, id);
  if (path != NULL && g_unlink (path) != 0 && errno != ENOENT)
    g_warning ("cannot remove %s: %s", path, g_strerror (errno));
}

/* ---- capacity ---- */

/* Whether @resources fit next to every RUNNING VM but @except. */
static gboolean
box_dummy_plugin_has_room (BoxDummyPlugin *self, const BoxResources *resources,
                           const char *except, GError **error)
{
  guint64 max_cpus = 0;
  guint64 max_memory = 0;
  guint64 cpus = resources->cpus;
  guint64 memory = resources->memory_mib;
  GHashTableIter iter;
  gpointer value;

  if (!box_dummy_config_uint (self, "max_cpus", BOX_DUMMY_MAX_CPUS_DEFAULT, G_MAXUINT32,
                              &max_cpus, error) ||
      !box_dummy_config_uint (self, "max_memory_mib", BOX_DUMMY_MAX_MEMORY_MIB_DEFAULT,
                              G_MAXUINT32, &max_memory, error))
    return FALSE;

  box_dummy_plugin_ensure_loaded (self);
  g_hash_table_iter_init (&iter, self->vms);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    const BoxDummyVm *vm = value;
    if (vm->state != BOX_VM_STATE_RUNNING || g_strcmp0 (vm->id, except) == 0)
      continue;
    cpus += vm->resources.cpus;
    memory += vm->resources.memory_mib;
  }
  if (cpus > max_cpus || memory > max_memory) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CAPACITY,
                 "no node has room for %u CPUs and %u MiB",
                 resources->cpus, resources->memory_mib);
    return FALSE;
  }
  return TRUE;
}

/* ---- operations ---- */

typedef struct {
  BoxVmOp       op;
  char         *sandbox_id;
  BoxResources  resources;
  char         *checkpoint_id;
  gboolean      memory;
  char         *from_sandbox_id;
  char         *from_checkpoint_id;
  char         *agent_args;     /* CREATE: BOX_DUMMY_AGENT_ARGS of the env */
  BoxDummyOutcome scripted;
} BoxDummyOp;

static void
box_dummy_op_free (BoxDummyOp *op)
{
  g_free (op->sandbox_id);
  g_free (op->checkpoint_id);
  g_free (op->from_sandbox_id);
  g_free (op->from_checkpoint_id);
  g_free (op->agent_args);
  g_free (op);
}

static gboolean
box_dummy_not_found (const char *id, GError **error)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no VM for sandbox %s", id);
  return FALSE;
}

static gboolean
box_dummy_conflict (const BoxDummyOp *op, const BoxDummyVm *vm, GError **error)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT, "cannot %s the %s VM of sandbox %s",
               box_vm_op_to_string (op->op), box_dummy_vm_state_name (vm->state), vm->id);
  return FALSE;
}

/* Makes @vm run, if there is room for it. */
static gboolean
box_dummy_start_vm (BoxDummyPlugin *self, BoxDummyVm *vm, GError **error)
{
  if (!box_dummy_plugin_has_room (self, &vm->resources, vm->id, error))
    return FALSE;
  vm->state = BOX_VM_STATE_RUNNING;
  return TRUE;
}

static gboolean
box_dummy_create (BoxDummyPlugin *self, const BoxDummyOp *op, GError **error)
{
  g_autoptr(BoxDummyVm) vm = NULL;
  gboolean fail = FALSE;

  if (!box_dummy_config_bool (self, "fail_create", &fail, error))
    return FALSE;
  if (fail) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "injected failure");
    return FALSE;
  }
  if (box_dummy_plugin_lookup (self, op->sandbox_id) != NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                 "a VM for sandbox %s exists", op->sandbox_id);
    return FALSE;
  }
  if (self->agent_procs != NULL &&
      !box_dummy_agents_set_args (self->agent_procs, op->sandbox_id, op->agent_args, error))
    return FALSE;
  if (op->from_sandbox_id != NULL) {
    BoxDummyVm *source = box_dummy_plugin_lookup (self, op->from_sandbox_id);
    if (source == NULL)
      return box_dummy_not_found (op->from_sandbox_id, error);
    if (op->from_checkpoint_id != NULL &&
        !g_hash_table_contains (source->checkpoints, op->from_checkpoint_id)) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no checkpoint %s of sandbox %s",
                   op->from_checkpoint_id, op->from_sandbox_id);
      return FALSE;
    }
  }
  vm = box_dummy_vm_new (op->sandbox_id);
  vm->resources = op->resources;
  if (!box_dummy_start_vm (self, vm, error) || !box_dummy_vm_save (vm, box_plugin_get_state_dir (BOX_PLUGIN (self)), error))
    return FALSE;
  g_hash_table_replace (self->vms, vm->id, vm);
  g_steal_pointer (&vm);
  return TRUE;
}

static gboolean
box_dummy_checkpoint (BoxDummyPlugin *self, const BoxDummyOp *op, BoxDummyVm *vm,
                      GError **error)
{
  BoxDummyCheckpoint *checkpoint;

  if (op->checkpoint_id == NULL || op->checkpoint_id[0] == '\0') {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, "a checkpoint needs an ID");
    return FALSE;
  }
  if (g_hash_table_contains (vm->checkpoints, op->checkpoint_id)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS, "checkpoint %s of sandbox %s exists",
                 op->checkpoint_id, vm->id);
    return FALSE;
  }
  /* memory needs something in memory: a running VM or a suspend snapshot */
  if (op->memory && vm->state != BOX_VM_STATE_RUNNING && vm->state != BOX_VM_STATE_SUSPENDED)
    return box_dummy_conflict (op, vm, error);
  checkpoint = g_new0 (BoxDummyCheckpoint, 1);
  checkpoint->memory = op->memory;
  checkpoint->created_at = g_get_real_time ();
  g_hash_table_insert (vm->checkpoints, g_strdup (op->checkpoint_id), checkpoint);
  return TRUE;
}

static void box_dummy_plugin_get_capabilities (BoxHypervisor *hypervisor,
                                               BoxHypervisorCapabilities *caps);

/* An operation the reported capabilities rule out fails as it would on a
 * real hypervisor without them. */
static gboolean
box_dummy_check_caps (BoxDummyPlugin *self, const BoxDummyOp *op, GError **error)
{
  BoxHypervisorCapabilities caps = { 0 };
  BoxHypervisorCaps needed = 0;

  switch (op->op) {
  case BOX_VM_OP_SUSPEND:
  case BOX_VM_OP_RESUME:
    needed = BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS;
    break;
  case BOX_VM_OP_CHECKPOINT:
  case BOX_VM_OP_RESTORE:
    needed = BOX_HYPERVISOR_CAP_CHECKPOINTS;
    break;
  case BOX_VM_OP_CREATE:
    needed = op->from_sandbox_id != NULL ? BOX_HYPERVISOR_CAP_FORK : 0;
    break;
  default:
    break;
  }
  box_dummy_plugin_get_capabilities (BOX_HYPERVISOR (self), &caps);
  if ((caps.flags & needed) == needed)
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED, "the dummy hypervisor cannot %s%s",
               box_vm_op_to_string (op->op), op->op == BOX_VM_OP_CREATE ? " forks" : "");
  return FALSE;
}

/* One operation as a state change; @vm is the sandbox's record or NULL. */
static gboolean
box_dummy_apply (BoxDummyPlugin *self, const BoxDummyOp *op, GError **error)
{
  BoxDummyVm *vm;

  if (!box_dummy_check_caps (self, op, error))
    return FALSE;
  if (op->op == BOX_VM_OP_CREATE)
    return box_dummy_create (self, op, error);

  vm = box_dummy_plugin_lookup (self, op->sandbox_id);
  switch (op->op) {
  case BOX_VM_OP_DESTROY:
    box_dummy_plugin_forget (self, op->sandbox_id);
    return TRUE;
  case BOX_VM_OP_DELETE_CHECKPOINT:
    if (vm == NULL || op->checkpoint_id == NULL ||
        !g_hash_table_remove (vm->checkpoints, op->checkpoint_id))
      return TRUE;
    return box_dummy_vm_save (vm, box_plugin_get_state_dir (BOX_PLUGIN (self)), error);
  default:
    break;
  }
  if (vm == NULL)
    return box_dummy_not_found (op->sandbox_id, error);

  switch (op->op) {
  case BOX_VM_OP_SUSPEND:
    if (vm->state == BOX_VM_STATE_SUSPENDED)
      return TRUE;
    if (vm->state != BOX_VM_STATE_RUNNING)
      return box_dummy_conflict (op, vm, error);
    vm->state = BOX_VM_STATE_SUSPENDED;
    vm->snapshot_at = g_get_real_time ();
    break;
  case BOX_VM_OP_RESUME:
    if (vm->state == BOX_VM_STATE_RUNNING)
      return TRUE;
    if (vm->state == BOX_VM_STATE_SHUTOFF ||
        (vm->state == BOX_VM_STATE_LOST && vm->snapshot_at == 0))
      return box_dummy_conflict (op, vm, error);
    if (!box_dummy_start_vm (self, vm, error))
      return FALSE;
    break;
  case BOX_VM_OP_SHUTDOWN:
    if (vm->state == BOX_VM_STATE_SHUTOFF)
      return TRUE;
    vm->state = BOX_VM_STATE_SHUTOFF;
    vm->snapshot_at = 0;
    break;
  case BOX_VM_OP_BOOT:
    if (vm->state == BOX_VM_STATE_RUNNING)
      return TRUE;
    if (!box_dummy_start_vm (self, vm, error))
      return FALSE;
    vm->snapshot_at = 0;
    break;
  case BOX_VM_OP_CHECKPOINT:
    if (!box_dummy_checkpoint (self, op, vm, error))
      return FALSE;
    break;
  case BOX_VM_OP_RESTORE:
    if (op->checkpoint_id == NULL || !g_hash_table_contains (vm->checkpoints, op->checkpoint_id)) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no checkpoint %s of sandbox %s",
                   op->checkpoint_id != NULL ? op->checkpoint_id : "(none)", vm->id);
      return FALSE;
    }
    if (vm->state != BOX_VM_STATE_RUNNING && !box_dummy_start_vm (self, vm, error))
      return FALSE;
    break;
  default:
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "the dummy hypervisor cannot %s", box_vm_op_to_string (op->op));
    return FALSE;
  }
  return box_dummy_vm_save (vm, box_plugin_get_state_dir (BOX_PLUGIN (self)), error);
}

/* What an operation that succeeded does to the sandbox's agent process. */
static void
box_dummy_plugin_follow_agent (BoxDummyPlugin *self, const BoxDummyOp *op)
{
  g_autoptr(GError) error = NULL;

  if (self->agent_procs == NULL)
    return;
  switch (op->op) {
  case BOX_VM_OP_CREATE:
  case BOX_VM_OP_BOOT:
  case BOX_VM_OP_RESTORE:
    if (!box_dummy_agents_start (self->agent_procs, op->sandbox_id, &error))
      g_warning ("dummy: %s", error->message);
    break;
  case BOX_VM_OP_SUSPEND:
  case BOX_VM_OP_RESUME:
    box_dummy_agents_pause (self->agent_procs, op->sandbox_id, op->op == BOX_VM_OP_SUSPEND);
    break;
  case BOX_VM_OP_SHUTDOWN:
  case BOX_VM_OP_DESTROY:
    box_dummy_agents_stop (self->agent_procs, op->sandbox_id, op->op == BOX_VM_OP_DESTROY);
    break;
  default:
    break;
  }
}

static gboolean
box_dummy_plugin_run_cb (gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  BoxDummyPlugin *self = g_task_get_source_object (task);
  const BoxDummyOp *op = g_task_get_task_data (task);
  GCancellable *cancellable = g_task_get_cancellable (task);
  g_autoptr(GError) error = NULL;

  if (cancellable != NULL && g_cancellable_is_cancelled (cancellable)) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INTERNAL, "%s of %s was cancelled",
                             box_vm_op_to_string (op->op), op->sandbox_id);
    return G_SOURCE_REMOVE;
  }
  if (op->scripted.fail) {
    g_task_return_new_error (task, BOX_ERROR, op->scripted.code, "injected failure");
    return G_SOURCE_REMOVE;
  }
  if (op->scripted.lose) {
    /* the VM dies under the operation: vm-lost first, as a real plugin
     * sees the domain end before its operation fails */
    box_dummy_plugin_lose_vm (self, op->sandbox_id);
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INTERNAL,
                             "the VM of sandbox %s died during %s", op->sandbox_id,
                             box_vm_op_to_string (op->op));
    return G_SOURCE_REMOVE;
  }
  if (op->scripted.end) {
    box_dummy_plugin_end_vm (self, op->sandbox_id);
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INTERNAL,
                             "%s of sandbox %s failed after its VM ended",
                             box_vm_op_to_string (op->op), op->sandbox_id);
    return G_SOURCE_REMOVE;
  }
  if (!box_dummy_apply (self, op, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return G_SOURCE_REMOVE;
  }
  box_dummy_plugin_follow_agent (self, op);
  g_debug ("dummy: %s %s done", box_vm_op_to_string (op->op), op->sandbox_id);
  g_task_return_boolean (task, TRUE);
  return G_SOURCE_REMOVE;
}

static void
box_dummy_plugin_run_async (BoxHypervisor *hypervisor, BoxVmOp vm_op, const BoxVmRequest *request,
                            GCancellable *cancellable, GAsyncReadyCallback callback,
                            gpointer user_data)
{
  BoxDummyPlugin *self = BOX_DUMMY_PLUGIN (hypervisor);
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(GSource) source = NULL;
  g_autoptr(GError) error = NULL;
  BoxDummyOp *op;
  guint64 delay_ms = 0;

  g_task_set_source_tag (task, box_dummy_plugin_run_async);
  g_task_set_name (task, "box_dummy_plugin_run_async");

  if (request == NULL || !box_dummy_id_is_valid (request->sandbox_id)) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID, "bad sandbox ID \"%s\"",
                             request != NULL && request->sandbox_id != NULL ?
                             request->sandbox_id : "");
    return;
  }
  if (!box_dummy_config_uint (self, "delay_ms", "0", BOX_DUMMY_DELAY_MS_MAX, &delay_ms, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }

  /* The request is only valid during this call. */
  op = g_new0 (BoxDummyOp, 1);
  op->op = vm_op;
  op->sandbox_id = g_strdup (request->sandbox_id);
  op->resources = request->resources;
  op->checkpoint_id = g_strdup (request->checkpoint_id);
  op->memory = request->memory;
  op->from_sandbox_id = g_strdup (request->from_sandbox_id);
  op->from_checkpoint_id = g_strdup (request->from_checkpoint_id);
  if (vm_op == BOX_VM_OP_CREATE && request->env != NULL)
    op->agent_args = g_strdup (g_hash_table_lookup (request->env, BOX_DUMMY_AGENT_ARGS_VAR));
  box_dummy_script_match (self->script, vm_op, op->sandbox_id, &op->scripted);
  if (op->scripted.delay_ms > 0)
    delay_ms = op->scripted.delay_ms;
  g_task_set_task_data (task, op, (GDestroyNotify) box_dummy_op_free);

  source = delay_ms > 0 ? g_timeout_source_new ((guint) delay_ms) : g_idle_source_new ();
  g_task_attach_source (task, source, box_dummy_plugin_run_cb);
}

static gboolean
box_dummy_plugin_run_finish (BoxHypervisor *hypervisor, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, hypervisor), FALSE);
  g_return_val_if_fail (g_task_get_source_tag (G_TASK (result)) == box_dummy_plugin_run_async,
                        FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* ---- the rest of BoxHypervisor ---- */

static void
box_dummy_plugin_get_capabilities (BoxHypervisor *hypervisor, BoxHypervisorCapabilities *caps)
{
  BoxDummyPlugin *self = BOX_DUMMY_PLUGIN (hypervisor);
  g_autofree char *names = NULL;
  g_autofree char *accel = NULL;

  if (self->caps_set) {
    caps->flags = self->caps;
    caps->accel = self->accel;
    return;
  }
  /* start() refused a bad list; the default stands in for one set later */
  names = box_plugin_get_config (BOX_PLUGIN (self), "capabilities", BOX_DUMMY_CAPS_DEFAULT);
  if (!box_dummy_caps_parse (names, &caps->flags, NULL))
    box_dummy_caps_parse (BOX_DUMMY_CAPS_DEFAULT, &caps->flags, NULL);
  if (self->agent_procs != NULL)
    caps->flags |= BOX_HYPERVISOR_CAP_GUEST_AGENT;
  accel = box_plugin_get_config (BOX_PLUGIN (self), "accel", "none");
  if (g_strcmp0 (accel, self->accel) != 0) {
    g_free (self->accel);
    self->accel = g_steal_pointer (&accel);
  }
  caps->accel = self->accel;
}

static const char *
box_dummy_plugin_get_accel (BoxHypervisor *hypervisor)
{
  BoxHypervisorCapabilities caps = { 0 };

  box_dummy_plugin_get_capabilities (hypervisor, &caps);
  return caps.accel;
}

static BoxTemplate *
box_dummy_template_new (const char *name, guint cpus, guint memory_mib, guint disk_gib)
{
  BoxTemplate *tmpl = g_new0 (BoxTemplate, 1);

  tmpl->name = g_strdup (name);
  tmpl->image = g_strdup ("");
  tmpl->resources.cpus = cpus;
  tmpl->resources.memory_mib = memory_mib;
  tmpl->resources.disk_gib = disk_gib;
  return tmpl;
}

/* "base" (2 CPUs, 2048 MiB) and "e2b" (2 CPUs, 1024 MiB), both 20 GiB,
 * or those of them [plugin.dummy] templates= names. */
static GPtrArray *
box_dummy_plugin_list_templates (BoxHypervisor *hypervisor)
{
  GPtrArray *templates = g_ptr_array_new_with_free_func ((GDestroyNotify) box_template_free);
  g_autofree char *names = box_plugin_get_config (BOX_PLUGIN (hypervisor), "templates",
                                                  "base,e2b");
  g_auto(GStrv) offered = g_strsplit (names, ",", -1);

  if (g_strv_contains ((const char *const *) offered, "base"))
    g_ptr_array_add (templates, box_dummy_template_new ("base", 2, 2048, 20));
  if (g_strv_contains ((const char *const *) offered, "e2b"))
    g_ptr_array_add (templates, box_dummy_template_new ("e2b", 2, 1024, 20));
  return templates;
}

static gboolean
box_dummy_plugin_check_room (BoxHypervisor *hypervisor, const BoxResources *resources,
                             GError **error)
{
  g_return_val_if_fail (resources != NULL, FALSE);
  return box_dummy_plugin_has_room (BOX_DUMMY_PLUGIN (hypervisor), resources, NULL, error);
}

static BoxAgentClient *
box_dummy_plugin_get_agent (BoxHypervisor *hypervisor, const char *sandbox_id, GError **error)
{
  BoxDummyPlugin *self = BOX_DUMMY_PLUGIN (hypervisor);
  GObject *agent = g_hash_table_lookup (self->agents, sandbox_id);

  BoxDummyVm *vm;

  if (agent != NULL)
    return (BoxAgentClient *) g_object_ref (agent);
  if (self->agent_procs != NULL) {
    vm = box_dummy_id_is_valid (sandbox_id) ? box_dummy_plugin_lookup (self, sandbox_id) : NULL;
    if (vm == NULL || vm->state != BOX_VM_STATE_RUNNING) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                   "sandbox %s has no running VM", sandbox_id);
      return NULL;
    }
    /* the agent the context made: boxd's BoxAgentClient */
    return (BoxAgentClient *) box_dummy_agents_get (self->agent_procs, sandbox_id, error);
  }
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                       "the dummy hypervisor runs no VM");
  return NULL;
}

/* the CA the engine gave it (it prepares no guest in advance to give it to) */
static void
box_dummy_plugin_set_guest_ca (BoxHypervisor *hypervisor, GBytes *pem)
{
  BoxDummyPlugin *self = BOX_DUMMY_PLUGIN (hypervisor);

  g_clear_pointer (&self->guest_ca, g_bytes_unref);
  self->guest_ca = pem != NULL ? g_bytes_ref (pem) : NULL;
}

static BoxVmState
box_dummy_plugin_query (BoxHypervisor *hypervisor, const char *sandbox_id, gint64 *snapshot_at)
{
  BoxDummyPlugin *self = BOX_DUMMY_PLUGIN (hypervisor);
  BoxDummyVm *vm = NULL;

  if (box_dummy_id_is_valid (sandbox_id))
    vm = box_dummy_plugin_lookup (self, sandbox_id);
  if (snapshot_at != NULL)
    *snapshot_at = vm != NULL ? vm->snapshot_at : 0;
  return vm != NULL ? vm->state : BOX_VM_STATE_ABSENT;
}

static char **
box_dummy_plugin_list_checkpoints (BoxHypervisor *hypervisor, const char *sandbox_id,
                                   GError **error)
{
  BoxDummyVm *vm = NULL;
  g_autoptr(GStrvBuilder) ids = g_strv_builder_new ();

  if (box_dummy_id_is_valid (sandbox_id))
    vm = box_dummy_plugin_lookup (BOX_DUMMY_PLUGIN (hypervisor), sandbox_id);
  if (vm != NULL) {
    g_autofree const char **keys = (const char **) g_hash_table_get_keys_as_array (vm->checkpoints,
                                                                                  NULL);
    g_strv_builder_addv (ids, keys);
  }
  return g_strv_builder_end (ids);
}

static void
box_dummy_plugin_hypervisor_init (BoxHypervisorInterface *iface)
{
  iface->get_accel = box_dummy_plugin_get_accel;
  iface->get_capabilities = box_dummy_plugin_get_capabilities;
  iface->list_templates = box_dummy_plugin_list_templates;
  iface->check_room = box_dummy_plugin_check_room;
  iface->run_async = box_dummy_plugin_run_async;
  iface->run_finish = box_dummy_plugin_run_finish;
  iface->get_agent = box_dummy_plugin_get_agent;
  iface->query = box_dummy_plugin_query;
  iface->list_checkpoints = box_dummy_plugin_list_checkpoints;
  iface->set_guest_ca = box_dummy_plugin_set_guest_ca;
}

/* ---- BoxPlugin ---- */

static gboolean
box_dummy_plugin_start (BoxPlugin *plugin, GCancellable *cancellable, GError **error)
{
  BoxDummyPlugin *self = BOX_DUMMY_PLUGIN (plugin);
  guint64 value = 0;
  gboolean fail = FALSE;
  g_autofree char *caps = NULL;
  g_autofree char *script = NULL;
  g_autofree char *agent = NULL;
  g_autofree char *agent_args = NULL;
  g_autofree char *agent_programs = NULL;
  BoxHypervisorCaps flags = 0;

  /* refuse a bad configuration now rather than at the first operation */
  if (!box_dummy_config_uint (self, "delay_ms", "0", BOX_DUMMY_DELAY_MS_MAX, &value, error) ||
      !box_dummy_config_uint (self, "max_cpus", BOX_DUMMY_MAX_CPUS_DEFAULT, G_MAXUINT32,
                              &value, error) ||
      !box_dummy_config_uint (self, "max_memory_mib", BOX_DUMMY_MAX_MEMORY_MIB_DEFAULT,
                              G_MAXUINT32, &value, error) ||
      !box_dummy_config_bool (self, "fail_create", &fail, error))
    return FALSE;
  caps = box_plugin_get_config (plugin, "capabilities", BOX_DUMMY_CAPS_DEFAULT);
  script = box_plugin_get_config (plugin, "script", "");
  if (!box_dummy_caps_parse (caps, &flags, error))
    return FALSE;
  box_dummy_script_clear (self->script);
  if (!box_dummy_script_add (self->script, script, error))
    return FALSE;
  agent = box_plugin_get_config (plugin, "agent", "");
  agent_args = box_plugin_get_config (plugin, "agent_args", BOX_DUMMY_AGENT_ARGS_DEFAULT);
  agent_programs = box_plugin_get_config (plugin, "agent_programs", "");
  g_clear_pointer (&self->agent_procs, box_dummy_agents_free);
  if (agent[0] != '\0') {
    if (!g_path_is_absolute (agent) || !g_file_test (agent, G_FILE_TEST_IS_EXECUTABLE)) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                   "[plugin.dummy] agent: %s is not an executable's absolute path", agent);
      return FALSE;
    }
    if (!box_dummy_agents_check_args (agent_args, error))
      return FALSE;
    self->agent_procs = box_dummy_agents_new (box_plugin_get_context (plugin), agent, agent_args,
                                              agent_programs);
  }
  box_dummy_plugin_ensure_loaded (self);
  return TRUE;
}

static void
box_dummy_plugin_add_status (BoxPlugin *plugin, GVariantBuilder *dict)
{
  g_variant_builder_add (dict, "{sv}", "accel",
                         g_variant_new_string (box_dummy_plugin_get_accel (BOX_HYPERVISOR (plugin))));
}

static void
box_dummy_plugin_finalize (GObject *object)
{
  BoxDummyPlugin *self = BOX_DUMMY_PLUGIN (object);

  g_hash_table_unref (self->vms);
  g_hash_table_unref (self->agents);
  g_clear_pointer (&self->guest_ca, g_bytes_unref);
  box_dummy_agents_free (self->agent_procs);
  box_dummy_script_free (self->script);
  g_free (self->accel);
  G_OBJECT_CLASS (box_dummy_plugin_parent_class)->finalize (object);
}

static void
box_dummy_plugin_class_init (BoxDummyPluginClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  BoxPluginClass *plugin_class = BOX_PLUGIN_CLASS (klass);

  object_class->finalize = box_dummy_plugin_finalize;
  plugin_class->start = box_dummy_plugin_start;
  plugin_class->add_status = box_dummy_plugin_add_status;

  box_dummy_plugin_add_actions (object_class);
}

static void
box_dummy_plugin_init (BoxDummyPlugin *self)
{
  self->vms = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                     (GDestroyNotify) box_dummy_vm_free);
  self->agents = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->script = box_dummy_script_new ();
  self->accel = g_strdup ("none");
}

/* `auto` takes it last, when no hypervisor that runs VMs is installed,
 * and gives its sandboxes no network. */
BOX_PLUGIN_DEFINE_FULL ("dummy", "A hypervisor that runs no VM (a test double)",
                        box_dummy_plugin_get_type, 1, BOX_PLUGIN_FLAG_NO_VM, NULL)
