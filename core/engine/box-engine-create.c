/* box-engine-create.c: creating a sandbox, or forking one from a
 * checkpoint: the checks, the record, the first boot.
 *
 * Everything is checked before the record is written (name, deadline,
 * rules, secrets, the project's quota: box-engine-quota.c); a refusal
 * the hypervisor finds later (capacity ...) removes the record again and
 * is reported as deleted, any other failed first boot leaves the sandbox
 * in state error.
 */
#include "config.h"

#include "box-engine-ops-private.h"
#include "box-storage-records.h"
#include "box-validate.h"

/* ---- create ------------------------------------------------------------ */

static gboolean
is_create_refusal (const GError *error)
{
  return g_error_matches (error, BOX_ERROR, BOX_ERROR_CAPACITY) ||
         g_error_matches (error, BOX_ERROR, BOX_ERROR_INVALID) ||
         g_error_matches (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
}

/* A create that fails: a refusal (capacity, invalid, unsupported) leaves no
 * sandbox behind and is reported as deleted; anything else is a first boot
 * that failed, and the sandbox goes to error. */
static void
create_failed (BoxEngine *self, GTask *task, GError *error)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  BoxSandbox *sandbox = op->sandbox;
  g_autoptr(GError) local_error = NULL;

  if (is_create_refusal (error)) {
    BoxVmRequest request;

    box_engine_fill_vm_request (self, &request, op);
    box_hypervisor_run_async (self->hypervisor, BOX_VM_OP_DESTROY, &request, NULL, NULL, NULL);
    if (!box_storage_sandbox_delete (self->storage, sandbox->project, sandbox->id, &local_error))
      g_warning ("sandbox %s: cannot delete the failed create: %s", sandbox->id,
                 local_error->message);
    box_engine_runtime_get (self, sandbox->id)->base.deleted = TRUE;
    box_engine_emit_detail (self, "sandbox.deleted", sandbox, "reason", box_error_code_name (error->code));
  } else {
    g_warning ("sandbox %s: first boot failed: %s", sandbox->id, error->message);
    sandbox->state = BOX_SANDBOX_STATE_ERROR;
    if (!box_engine_save_sandbox (self, sandbox, &local_error))
      g_warning ("sandbox %s: %s", sandbox->id, local_error->message);
    box_engine_emit_detail (self, "sandbox.error", sandbox, "reason", "none");
  }
  box_engine_op_finish_error (self, task, error);
}

static void
create_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  BoxEngineOp *op = g_task_get_task_data (task);
  GError *error = NULL;

  if (!box_hypervisor_run_finish (self->hypervisor, result, &error)) {
    create_failed (self, task, error);
    return;
  }
  op->sandbox->state = BOX_SANDBOX_STATE_RUNNING;
  op->sandbox->last_active_at = box_engine_now (self);
  box_engine_runtime_get (self, op->id)->base.last_active = op->sandbox->last_active_at;
  if (!box_engine_save_sandbox (self, op->sandbox, &error)) {
    create_failed (self, task, error);
    return;
  }
  box_engine_emit_detail (self, "sandbox.running", op->sandbox, "from", "creating");
  box_engine_op_finish_ok (self, task);
}

void
box_engine_copy_map (GHashTable *into, GHashTable *from)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_remove_all (into);
  if (from == NULL)
    return;
  g_hash_table_iter_init (&iter, from);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_hash_table_insert (into, g_strdup (key), g_strdup (value));
}

/* Resolves the template and fills in what the request left to defaults. */
static BoxSandbox *
sandbox_from_request (BoxEngine *self, const char *project, const BoxSandboxCreate *req,
                      GError **error)
{
  g_autoptr(BoxSandbox) sandbox = box_sandbox_new ();
  g_autoptr(GPtrArray) templates = NULL;
  const BoxTemplate *tmpl = NULL;
  BoxResources defaults = { 0 };
  const char *template_name;
  guint i;

  if (req->image != NULL) {
    /* The format was checked; pulling images comes with OCI support. */
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                         "this deployment allows no image registry; create from a template");
    return NULL;
  }
  template_name = req->template_name != NULL ? req->template_name : "base";
  templates = box_hypervisor_list_templates (self->hypervisor);
  for (i = 0; templates != NULL && i < templates->len; i++) {
    BoxTemplate *candidate = g_ptr_array_index (templates, i);
    if (g_strcmp0 (candidate->name, template_name) == 0)
      tmpl = candidate;
  }
  /* A fork's template is its checkpoint's, which the hypervisor keeps
   * while a checkpoint uses it even when the deployment no longer offers
   * it: its name, and the source's sizes, are all a fork needs. */
  if (tmpl == NULL && req->from_sandbox == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid template: unknown template %s",
                 template_name);
    return NULL;
  }
  if (tmpl != NULL)
    defaults = tmpl->resources;

  sandbox->id = box_generate_sandbox_id ();
  sandbox->project = g_strdup (project);
  g_free (sandbox->template_name);
  sandbox->template_name = g_strdup (template_name);
  g_free (sandbox->image);
  sandbox->image = g_strdup ("");
  sandbox->state = BOX_SANDBOX_STATE_CREATING;
  sandbox->resources.cpus = req->resources.cpus != 0 ? req->resources.cpus : defaults.cpus;
  sandbox->resources.memory_mib = req->resources.memory_mib != 0 ? req->resources.memory_mib
                                                                  : defaults.memory_mib;
  sandbox->resources.disk_gib = req->resources.disk_gib != 0 ? req->resources.disk_gib
                                                              : defaults.disk_gib;
  box_engine_copy_map (sandbox->env, req->env);
  box_engine_copy_map (sandbox->labels, req->labels);
  sandbox->idle_timeout_s = req->has_idle_timeout_s ? req->idle_timeout_s : BOX_IDLE_TIMEOUT_DEFAULT;
  sandbox->idle_action = req->has_idle_action ? req->idle_action : BOX_IDLE_ACTION_PAUSE;
  sandbox->has_deadline = req->has_deadline;
  sandbox->deadline_at = req->deadline_at;
  sandbox->deadline_action = req->deadline_action;
  sandbox->protected_ = req->protected_;
  sandbox->http_port = req->has_http_port ? req->http_port : BOX_HTTP_PORT_DEFAULT;
  if (req->egress != NULL) {
    for (i = 0; i < req->egress->len; i++)
      g_ptr_array_add (sandbox->egress, box_rule_copy (g_ptr_array_index (req->egress, i)));
  }
  if (req->secrets != NULL) {
    g_strfreev (sandbox->secrets);
    sandbox->secrets = g_strdupv (req->secrets);
  }
  sandbox->created_at = sandbox->updated_at = sandbox->last_active_at = box_engine_now (self);
  sandbox->next_checkpoint = 1;
  sandbox->next_auto_checkpoint = 1;
  return g_steal_pointer (&sandbox);
}

/* A name the request gave, or a generated one that fits the project. */
static char *
choose_name (BoxEngine *self, const char *project, const char *wanted, GError **error)
{
  guint attempt;

  if (wanted != NULL)
    return box_validate_sandbox_name (wanted, project, error) ? g_strdup (wanted) : NULL;
  for (attempt = 0; attempt < 64; attempt++) {
    g_autofree char *name = box_generate_sandbox_name ();
    g_autoptr(BoxSandbox) taken = NULL;

    if (!box_validate_sandbox_name (name, project, NULL))
      continue;
    taken = box_storage_sandbox_get (self->storage, project, name, NULL);
    if (taken == NULL)
      return g_steal_pointer (&name);
  }
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot generate a free sandbox name");
  return NULL;
}

static BoxSandbox *
fork_source (BoxEngine *self, const char *project, const BoxSandboxCreate *req,
             BoxCheckpoint **checkpoint_out, GError **error)
{
  g_autoptr(BoxSandbox) source = box_storage_sandbox_get (self->storage, project,
                                                          req->from_sandbox, error);

  if (source == NULL)
    return NULL;
  *checkpoint_out = box_storage_checkpoint_get (self->storage, source->id, req->from_checkpoint,
                                                error);
  if (*checkpoint_out == NULL)
    return NULL;
  return g_steal_pointer (&source);
}

/* Everything a create checks before the record exists: on success
 * op->sandbox is the new record, still in state creating. */
static gboolean
prepare_create (BoxEngine *self, BoxEngineOp *op, const BoxSandboxCreate *request, GError **error)
{
  BoxSandboxCreate effective = *request;
  g_autoptr(BoxSandbox) source = NULL;
  g_autoptr(BoxCheckpoint) checkpoint = NULL;

  /* A fork takes its template, image and resources from the checkpoint,
   * and its network and secrets from the source unless given.  The
   * request stays the caller's: only the shallow copy is changed. */
  if (request->from_sandbox != NULL) {
    source = fork_source (self, op->project, request, &checkpoint, error);
    if (source == NULL)
      return FALSE;
    /* ask rather than fail at the VM operation, after the lookups so that
     * another project's sandbox is still not_found */
    if (!box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_FORK)) {
      g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                           "this deployment's hypervisor cannot fork from checkpoints");
      return FALSE;
    }
    effective.template_name = source->template_name;
    effective.image = source->image[0] != '\0' ? source->image : NULL;
    effective.resources = source->resources;
    if (request->egress == NULL)
      effective.egress = source->egress;
    if (request->secrets == NULL)
      effective.secrets = source->secrets;
  }

  op->sandbox = sandbox_from_request (self, op->project, &effective, error);
  if (op->sandbox == NULL)
    return FALSE;
  if (!box_engine_check_quota (self, op->project, &op->sandbox->resources, error))
    return FALSE;
  op->sandbox->name = choose_name (self, op->project, request->name, error);
  if (op->sandbox->name == NULL || !box_engine_check_deadline (self, op->sandbox, error) ||
      !box_engine_check_rules (self, op->sandbox->egress, error) || !box_engine_check_secrets_env (op->sandbox, error) ||
      !box_engine_check_secrets (self, op->project, (const char *const *) op->sandbox->secrets,
                                 error) ||
      !box_engine_check_rule_count (self, op->sandbox, error))
    return FALSE;
  if (source != NULL)
    op->sandbox->fork_source = g_strdup_printf ("%s/%s", source->id, checkpoint->id);
  return TRUE;
}

void
box_engine_create_sandbox_async (BoxEngine *self, const char *project,
                                 BoxSandboxCreate *request, GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (project != NULL);
  g_return_if_fail (request != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  BoxEngineOp *op = g_new0 (BoxEngineOp, 1);
  BoxVmRequest vm;
  GError *error = NULL;

  g_task_set_source_tag (task, box_engine_create_sandbox_async);
  g_task_set_task_data (task, op, (GDestroyNotify) box_engine_op_free);
  op->kind = BOX_ENGINE_OP_CREATE;
  op->project = g_strdup (project);

  if (!prepare_create (self, op, request, &error) ||
      !box_storage_sandbox_insert (self->storage, op->sandbox, &error)) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  op->id = g_strdup (op->sandbox->id);
  box_engine_runtime_sync (self, op->sandbox);
  box_engine_runtime_get (self, op->id)->base.busy = TRUE;   /* nobody can know it yet */
  box_engine_emit_detail (self, "sandbox.created", op->sandbox, NULL, NULL);

  if (!box_hypervisor_check_room (self->hypervisor, &op->sandbox->resources, &error) ||
      !box_engine_push_egress (self, op, &error)) {
    create_failed (self, task, error);
    return;
  }
  box_engine_fill_vm_request (self, &vm, op);
  if (op->sandbox->fork_source != NULL) {
    g_auto(GStrv) parts = g_strsplit (op->sandbox->fork_source, "/", 2);
    vm.from_sandbox_id = parts[0];
    vm.from_checkpoint_id = parts[1];
    box_hypervisor_run_async (self->hypervisor, BOX_VM_OP_CREATE, &vm, cancellable, create_done,
                              task);
    return;
  }
  box_hypervisor_run_async (self->hypervisor, BOX_VM_OP_CREATE, &vm, cancellable, create_done, task);
}

BoxSandbox *
box_engine_create_sandbox_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

