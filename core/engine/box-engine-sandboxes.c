/* box-engine-sandboxes.c: the sandbox state machine.
 *
 * Every operation on a sandbox takes the sandbox's lock (one operation at a
 * time per sandbox, in arrival order), re-reads the record, decides the
 * transition from the state it finds, runs the hypervisor operation,
 * writes the record and emits the event.  Other sandboxes are not held up.
 *
 * What is known only while boxd runs (the lock, calls in flight, the last
 * activity, deadlines and idle settings for the tick) lives in a
 * BoxSandboxRuntime per sandbox, refreshed from every record written.
 */
#include "config.h"

#include "box-agent-client.h"
#include "box-agent-exec.h"
#include "box-engine-private.h"
#include "box-storage-records.h"
#include "box-validate.h"

#define TICK_INTERVAL_S 1

typedef struct {
  BoxSandboxRuntime base;
  char             *project;
  BoxSandboxState   state;
  gboolean          has_deadline;
  gint64            deadline_at;
  BoxDeadlineAction deadline_action;
  guint             idle_timeout_s;
  BoxIdleAction     idle_action;
} Runtime;

typedef enum {
  OP_CREATE,
  OP_STATE,
  OP_UPDATE,
  OP_DELETE,
} OpKind;

typedef struct {
  OpKind            kind;
  char             *project;     /* NULL: any (internal operations) */
  char             *id;          /* the sandbox ID once known */
  BoxSandbox       *sandbox;     /* the record, fresh under the lock */
  BoxStateRequest   request;
  const char       *reason;      /* event reason: "request", "idle", "deadline" */
  gboolean          force;       /* delete even when protected */
  BoxSandboxUpdate *update;
  BoxSandboxState   from;        /* the state before a transition */
  GPtrArray        *egress;     /* expanded rules for the VM request */
} Op;

static void
op_free (Op *op)
{
  g_free (op->project);
  g_free (op->id);
  g_clear_pointer (&op->sandbox, box_sandbox_free);
  g_clear_pointer (&op->update, box_sandbox_update_free);
  g_clear_pointer (&op->egress, g_ptr_array_unref);
  g_free (op);
}

/* ---- runtime and locks ------------------------------------------------- */

static void
runtime_free (gpointer data)
{
  Runtime *rt = data;

  g_assert (g_queue_is_empty (&rt->base.waiters));
  g_free (rt->base.id);
  g_free (rt->project);
  g_free (rt);
}

void
box_engine_sandboxes_init (BoxEngine *self)
{
  self->runtime = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, runtime_free);
}

void
box_engine_sandboxes_finalize (BoxEngine *self)
{
  g_clear_pointer (&self->runtime, g_hash_table_unref);
}

static Runtime *
runtime_get (BoxEngine *self, const char *id)
{
  Runtime *rt = g_hash_table_lookup (self->runtime, id);

  if (rt == NULL) {
    rt = g_new0 (Runtime, 1);
    rt->base.id = g_strdup (id);
    rt->base.last_active = box_engine_now (self);
    g_queue_init (&rt->base.waiters);
    g_hash_table_insert (self->runtime, rt->base.id, rt);
  }
  return rt;
}

/* Keeps the tick's view in step with the record just written. */
static void
runtime_sync (BoxEngine *self, const BoxSandbox *sandbox)
{
  Runtime *rt = runtime_get (self, sandbox->id);

  g_free (rt->project);
  rt->project = g_strdup (sandbox->project);
  rt->state = sandbox->state;
  rt->has_deadline = sandbox->has_deadline;
  rt->deadline_at = sandbox->deadline_at;
  rt->deadline_action = sandbox->deadline_action;
  rt->idle_timeout_s = sandbox->idle_timeout_s;
  rt->idle_action = sandbox->idle_action;
}

void
box_engine_lock_sandbox_async (BoxEngine *self, const char *id, GAsyncReadyCallback callback,
                               gpointer user_data)
{
  BOX_ENGINE_ASSERT_OWNER (self);
  Runtime *rt = runtime_get (self, id);
  GTask *task = g_task_new (self, NULL, callback, user_data);

  g_task_set_source_tag (task, box_engine_lock_sandbox_async);
  if (!rt->base.busy) {
    rt->base.busy = TRUE;
    g_task_return_boolean (task, TRUE);
    g_object_unref (task);
    return;
  }
  g_queue_push_tail (&rt->base.waiters, task);
}

void
box_engine_unlock_sandbox (BoxEngine *self, const char *id)
{
  BOX_ENGINE_ASSERT_OWNER (self);
  Runtime *rt = g_hash_table_lookup (self->runtime, id);
  GTask *next;

  g_return_if_fail (rt != NULL && rt->base.busy);
  next = g_queue_pop_head (&rt->base.waiters);
  if (next != NULL) {
    /* the lock passes on; busy stays TRUE */
    g_task_return_boolean (next, TRUE);
    g_object_unref (next);
    return;
  }
  rt->base.busy = FALSE;
  if (rt->base.deleted)
    g_hash_table_remove (self->runtime, id);
}

/* ---- helpers ----------------------------------------------------------- */

static JsonObject *
detail_new (const char *key, const char *value)
{
  JsonObject *detail = json_object_new ();

  json_object_set_string_member (detail, key, value);
  return detail;
}

static void
emit (BoxEngine *self, const char *type, const BoxSandbox *sandbox, const char *key,
      const char *value)
{
  g_autoptr(JsonObject) detail = key != NULL ? detail_new (key, value) : NULL;

  box_engine_emit (self, type, sandbox, detail);
}

static GPtrArray *expand_rules (BoxEngine *self, GPtrArray *egress);

/* @op keeps the expanded rules alive while the request is in use. */
static void
fill_vm_request (BoxEngine *self, BoxVmRequest *request, Op *op)
{
  const BoxSandbox *sandbox = op->sandbox;

  memset (request, 0, sizeof (*request));
  if (op->egress == NULL)
    op->egress = expand_rules (self, sandbox->egress);
  request->sandbox_id = sandbox->id;
  request->hostname = sandbox->name;
  request->template_name = sandbox->template_name;
  request->image = sandbox->image;
  request->resources = sandbox->resources;
  request->env = sandbox->env;
  request->egress = op->egress;
}

/* Writes @sandbox (updated_at moved) and refreshes the runtime.
 *
 * The write names the revision @sandbox was read at.  The caller holds the
 * sandbox (an op under its lock), so it owns the record: when the stored
 * record moved on meanwhile, the revision is read again and the caller's
 * copy written over it (as the last writer always won), at most
 * BOX_ENGINE_STORAGE_TRIES times; then the conflict is reported. */
static gboolean
save (BoxEngine *self, BoxSandbox *sandbox, GError **error)
{
  sandbox->updated_at = box_engine_now (self);
  for (guint attempt = 1;; attempt++) {
    g_autoptr(GError) local = NULL;
    g_autoptr(BoxSandbox) stored = NULL;

    if (box_storage_sandbox_update (self->storage, sandbox, &local))
      break;
    if (attempt == BOX_ENGINE_STORAGE_TRIES ||
        !g_error_matches (local, BOX_ERROR, BOX_ERROR_CONFLICT)) {
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
    g_debug ("engine: %s: %s; writing again", sandbox->id, local->message);
    stored = box_storage_sandbox_get (self->storage, NULL, sandbox->id, error);
    if (stored == NULL)
      return FALSE;
    sandbox->revision = stored->revision;
  }
  runtime_sync (self, sandbox);
  return TRUE;
}

static gboolean
check_deadline (BoxEngine *self, const BoxSandbox *sandbox, GError **error)
{
  if (sandbox->has_deadline && sandbox->deadline_at <= box_engine_now (self)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         "invalid deadline: deadline.at must be in the future");
    return FALSE;
  }
  return TRUE;
}

static gboolean
check_secrets_env (const BoxSandbox *sandbox, GError **error)
{
  guint i;

  for (i = 0; sandbox->secrets[i] != NULL; i++) {
    if (g_hash_table_contains (sandbox->env, sandbox->secrets[i])) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                   "invalid secrets: %s is also set in env; a secret's variable cannot be in env",
                   sandbox->secrets[i]);
      return FALSE;
    }
  }
  return TRUE;
}

/* Valid rules (400 otherwise), and none at all: until the egress engine
 * lands (issue 16) nothing enforces them, and rules that are stored and
 * returned but not enforced would let a caller believe a sandbox is
 * confined when it is not.  An empty list (the whole internet) is what
 * every sandbox gets. */
static gboolean
check_rules (BoxEngine *self, GPtrArray *egress, GError **error)
{
  if (egress == NULL)
    return TRUE;
  if (!box_validate_rules (egress, box_engine_count_defaults (self), error))
    return FALSE;
  if (egress->len > 0) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                         "egress rules are not enforced by this deployment yet: "
                         "network.egress must be empty");
    return FALSE;
  }
  return TRUE;
}

/* The rules a network plugin enforces: includes expanded. */
static GPtrArray *
expand_rules (BoxEngine *self, GPtrArray *egress)
{
  GPtrArray *rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  guint i, j;

  for (i = 0; i < egress->len; i++) {
    BoxRule *rule = g_ptr_array_index (egress, i);
    if (rule->include != NULL) {
      for (j = 0; j < self->network_defaults->len; j++)
        g_ptr_array_add (rules, box_rule_copy (g_ptr_array_index (self->network_defaults, j)));
    } else {
      g_ptr_array_add (rules, box_rule_copy (rule));
    }
  }
  return rules;
}

/* ---- operations: common flow ------------------------------------------- */

static void op_locked (GObject *source, GAsyncResult *result, gpointer user_data);

/* Resolves @id_or_name in @project, then runs @task's op under the lock. */
static void
op_start (BoxEngine *self, GTask *task, const char *id_or_name)
{
  Op *op = g_task_get_task_data (task);
  g_autoptr(BoxSandbox) sandbox = NULL;
  GError *error = NULL;

  sandbox = box_storage_sandbox_get (self->storage, op->project, id_or_name, &error);
  if (sandbox == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  op->id = g_strdup (sandbox->id);
  box_engine_lock_sandbox_async (self, op->id, op_locked, task);
}

static void
op_finish_ok (BoxEngine *self, GTask *task)
{
  Op *op = g_task_get_task_data (task);

  box_engine_unlock_sandbox (self, op->id);
  if (op->kind == OP_DELETE)
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_pointer (task, box_sandbox_copy (op->sandbox), (GDestroyNotify) box_sandbox_free);
  g_object_unref (task);
}

static void
op_finish_error (BoxEngine *self, GTask *task, GError *error)
{
  Op *op = g_task_get_task_data (task);

  box_engine_unlock_sandbox (self, op->id);
  g_task_return_error (task, error);
  g_object_unref (task);
}

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
  Op *op = g_task_get_task_data (task);
  BoxSandbox *sandbox = op->sandbox;
  g_autoptr(GError) local_error = NULL;

  if (is_create_refusal (error)) {
    BoxVmRequest request;

    fill_vm_request (self, &request, op);
    box_hypervisor_run_async (self->hypervisor, BOX_VM_OP_DESTROY, &request, NULL, NULL, NULL);
    if (!box_storage_sandbox_delete (self->storage, sandbox->project, sandbox->id, &local_error))
      g_warning ("sandbox %s: cannot delete the failed create: %s", sandbox->id,
                 local_error->message);
    runtime_get (self, sandbox->id)->base.deleted = TRUE;
    emit (self, "sandbox.deleted", sandbox, "reason", box_error_code_name (error->code));
  } else {
    g_warning ("sandbox %s: first boot failed: %s", sandbox->id, error->message);
    sandbox->state = BOX_SANDBOX_STATE_ERROR;
    if (!save (self, sandbox, &local_error))
      g_warning ("sandbox %s: %s", sandbox->id, local_error->message);
    emit (self, "sandbox.error", sandbox, "reason", "none");
  }
  op_finish_error (self, task, error);
}

static void
create_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  Op *op = g_task_get_task_data (task);
  GError *error = NULL;

  if (!box_hypervisor_run_finish (self->hypervisor, result, &error)) {
    create_failed (self, task, error);
    return;
  }
  op->sandbox->state = BOX_SANDBOX_STATE_RUNNING;
  op->sandbox->last_active_at = box_engine_now (self);
  runtime_get (self, op->id)->base.last_active = op->sandbox->last_active_at;
  if (!save (self, op->sandbox, &error)) {
    create_failed (self, task, error);
    return;
  }
  emit (self, "sandbox.running", op->sandbox, "from", "creating");
  op_finish_ok (self, task);
}

static void
copy_map (GHashTable *into, GHashTable *from)
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
  if (tmpl == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid template: unknown template %s",
                 template_name);
    return NULL;
  }

  sandbox->id = box_generate_sandbox_id ();
  sandbox->project = g_strdup (project);
  g_free (sandbox->template_name);
  sandbox->template_name = g_strdup (tmpl->name);
  g_free (sandbox->image);
  sandbox->image = g_strdup ("");
  sandbox->state = BOX_SANDBOX_STATE_CREATING;
  sandbox->resources.cpus = req->resources.cpus != 0 ? req->resources.cpus : tmpl->resources.cpus;
  sandbox->resources.memory_mib = req->resources.memory_mib != 0 ? req->resources.memory_mib
                                                                  : tmpl->resources.memory_mib;
  sandbox->resources.disk_gib = req->resources.disk_gib != 0 ? req->resources.disk_gib
                                                              : tmpl->resources.disk_gib;
  copy_map (sandbox->env, req->env);
  copy_map (sandbox->labels, req->labels);
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
prepare_create (BoxEngine *self, Op *op, const BoxSandboxCreate *request, GError **error)
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
  op->sandbox->name = choose_name (self, op->project, request->name, error);
  if (op->sandbox->name == NULL || !check_deadline (self, op->sandbox, error) ||
      !check_rules (self, op->sandbox->egress, error) || !check_secrets_env (op->sandbox, error) ||
      !box_engine_check_secrets (self, op->project, (const char *const *) op->sandbox->secrets,
                                 error))
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
  Op *op = g_new0 (Op, 1);
  BoxVmRequest vm;
  GError *error = NULL;

  g_task_set_source_tag (task, box_engine_create_sandbox_async);
  g_task_set_task_data (task, op, (GDestroyNotify) op_free);
  op->kind = OP_CREATE;
  op->project = g_strdup (project);

  if (!prepare_create (self, op, request, &error) ||
      !box_storage_sandbox_insert (self->storage, op->sandbox, &error)) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  op->id = g_strdup (op->sandbox->id);
  runtime_sync (self, op->sandbox);
  runtime_get (self, op->id)->base.busy = TRUE;   /* nobody can know it yet */
  emit (self, "sandbox.created", op->sandbox, NULL, NULL);

  if (!box_hypervisor_check_room (self->hypervisor, &op->sandbox->resources, &error)) {
    create_failed (self, task, error);
    return;
  }
  fill_vm_request (self, &vm, op);
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

/* ---- reading ----------------------------------------------------------- */

BoxSandbox *
box_engine_get_sandbox (BoxEngine *self, const char *project, const char *id_or_name,
                        GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (id_or_name != NULL, NULL);
  return box_storage_sandbox_get (self->storage, project, id_or_name, error);
}

static gboolean
labels_match (const BoxSandbox *sandbox, GHashTable *labels)
{
  GHashTableIter iter;
  gpointer key, value;

  if (labels == NULL)
    return TRUE;
  g_hash_table_iter_init (&iter, labels);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    if (g_strcmp0 (g_hash_table_lookup (sandbox->labels, key), value) != 0)
      return FALSE;
  }
  return TRUE;
}

GPtrArray *
box_engine_list_sandboxes (BoxEngine *self, const char *project, GHashTable *labels,
                           const BoxSandboxState *state, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_autoptr(GPtrArray) all = box_storage_sandbox_list (self->storage, project, error);
  GPtrArray *matching;
  guint i;

  if (all == NULL)
    return NULL;
  matching = g_ptr_array_new_with_free_func ((GDestroyNotify) box_sandbox_free);
  for (i = 0; i < all->len; i++) {
    BoxSandbox *sandbox = g_ptr_array_index (all, i);
    if ((state == NULL || sandbox->state == *state) && labels_match (sandbox, labels))
      g_ptr_array_add (matching, box_sandbox_copy (sandbox));
  }
  return matching;
}

/* ---- pause, stop, wake ------------------------------------------------- */

static void
state_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  Op *op = g_task_get_task_data (task);
  BoxSandbox *sandbox = op->sandbox;
  GError *error = NULL;
  const char *type;

  if (!box_hypervisor_run_finish (self->hypervisor, result, &error)) {
    g_warning ("sandbox %s: %s failed: %s", sandbox->id,
               op->request == BOX_STATE_REQUEST_WAKE ? "wake" :
               op->request == BOX_STATE_REQUEST_PAUSE ? "pause" : "stop", error->message);
    if (op->request == BOX_STATE_REQUEST_WAKE && !g_error_matches (error, BOX_ERROR, BOX_ERROR_CAPACITY)) {
      GError *unavailable = g_error_new (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                                         "sandbox %s could not be woken: %s", sandbox->name,
                                         error->message);
      g_error_free (error);
      error = unavailable;
    }
    op_finish_error (self, task, error);
    return;
  }

  /* A deadline fires once. */
  if (g_strcmp0 (op->reason, "deadline") == 0)
    sandbox->has_deadline = FALSE;
  switch (op->request) {
  case BOX_STATE_REQUEST_PAUSE:
    sandbox->state = BOX_SANDBOX_STATE_PAUSED;
    sandbox->snapshot_at = box_engine_now (self);
    type = "sandbox.paused";
    break;
  case BOX_STATE_REQUEST_STOP:
    sandbox->state = BOX_SANDBOX_STATE_STOPPED;
    sandbox->snapshot_at = 0;
    type = "sandbox.stopped";
    break;
  case BOX_STATE_REQUEST_WAKE:
  default:
    sandbox->state = BOX_SANDBOX_STATE_RUNNING;
    sandbox->last_active_at = box_engine_now (self);
    runtime_get (self, sandbox->id)->base.last_active = sandbox->last_active_at;
    type = "sandbox.running";
    break;
  }
  if (!save (self, sandbox, &error)) {
    op_finish_error (self, task, error);
    return;
  }
  if (op->request == BOX_STATE_REQUEST_WAKE)
    emit (self, type, sandbox, "from", box_sandbox_state_to_string (op->from));
  else
    emit (self, type, sandbox, "reason", op->reason);
  op_finish_ok (self, task);
}

/* The hypervisor operation for @request from @state; BOX_VM_OP_LAST for a
 * no-op; FALSE when the state forbids it. */
static gboolean
plan_transition (const BoxSandbox *sandbox, BoxStateRequest request, BoxVmOp *vm_op,
                 GError **error)
{
  BoxSandboxState state = sandbox->state;

  *vm_op = BOX_VM_OP_LAST;
  if (state == BOX_SANDBOX_STATE_ERROR || state == BOX_SANDBOX_STATE_CREATING) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT,
                 "sandbox %s is in state %s; it cannot be paused, stopped or woken",
                 sandbox->name, box_sandbox_state_to_string (state));
    return FALSE;
  }
  switch (request) {
  case BOX_STATE_REQUEST_PAUSE:
    if (state == BOX_SANDBOX_STATE_STOPPED) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT,
                   "sandbox %s is stopped; a stopped sandbox cannot be paused", sandbox->name);
      return FALSE;
    }
    if (state == BOX_SANDBOX_STATE_RUNNING)
      *vm_op = BOX_VM_OP_SUSPEND;
    break;
  case BOX_STATE_REQUEST_STOP:
    if (state != BOX_SANDBOX_STATE_STOPPED)
      *vm_op = BOX_VM_OP_SHUTDOWN;
    break;
  case BOX_STATE_REQUEST_WAKE:
  default:
    if (state == BOX_SANDBOX_STATE_PAUSED)
      *vm_op = BOX_VM_OP_RESUME;
    else if (state == BOX_SANDBOX_STATE_STOPPED)
      *vm_op = BOX_VM_OP_BOOT;
    break;
  }
  return TRUE;
}

static void
run_state (BoxEngine *self, GTask *task)
{
  Op *op = g_task_get_task_data (task);
  BoxVmRequest vm;
  BoxVmOp vm_op;
  GError *error = NULL;

  if (!plan_transition (op->sandbox, op->request, &vm_op, &error)) {
    op_finish_error (self, task, error);
    return;
  }
  if (vm_op == BOX_VM_OP_LAST) {
    /* Already there; a deadline that found it so is spent all the same. */
    if (g_strcmp0 (op->reason, "deadline") == 0 && op->sandbox->has_deadline) {
      op->sandbox->has_deadline = FALSE;
      if (!save (self, op->sandbox, &error)) {
        op_finish_error (self, task, error);
        return;
      }
    }
    op_finish_ok (self, task);
    return;
  }
  /* ask rather than fail: a pause is a memory snapshot */
  if (vm_op == BOX_VM_OP_SUSPEND &&
      !box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS)) {
    op_finish_error (self, task,
                     g_error_new (BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                                  "this deployment's hypervisor cannot pause sandboxes "
                                  "(no memory snapshots); stop %s instead", op->sandbox->name));
    return;
  }
  if ((vm_op == BOX_VM_OP_RESUME || vm_op == BOX_VM_OP_BOOT) &&
      !box_hypervisor_check_room (self->hypervisor, &op->sandbox->resources, &error)) {
    op_finish_error (self, task, error);
    return;
  }
  op->from = op->sandbox->state;
  if (vm_op == BOX_VM_OP_SUSPEND || vm_op == BOX_VM_OP_SHUTDOWN)
    box_engine_emit_interrupted (self, op->sandbox->id, vm_op == BOX_VM_OP_SUSPEND ? "pause" : "stop");
  fill_vm_request (self, &vm, op);
  box_hypervisor_run_async (self->hypervisor, vm_op, &vm, NULL, state_done, task);
}

/* ---- update ------------------------------------------------------------ */

static void
replace_map (GHashTable *into, GHashTable *from)
{
  if (from != NULL)
    copy_map (into, from);
}

static gboolean
apply_update (BoxEngine *self, BoxSandbox *sandbox, const BoxSandboxUpdate *update,
              gboolean *network_changed, GError **error)
{
  guint i;

  replace_map (sandbox->env, update->env);
  replace_map (sandbox->labels, update->labels);
  if (update->has_idle_timeout_s)
    sandbox->idle_timeout_s = update->idle_timeout_s;
  if (update->has_idle_action)
    sandbox->idle_action = update->idle_action;
  if (update->deadline_set) {
    sandbox->has_deadline = update->has_deadline;
    sandbox->deadline_at = update->has_deadline ? update->deadline_at : 0;
    sandbox->deadline_action = update->deadline_action;
  }
  if (update->has_protected)
    sandbox->protected_ = update->protected_;
  if (update->has_http_port)
    sandbox->http_port = update->http_port;
  *network_changed = FALSE;
  if (update->egress != NULL) {
    g_ptr_array_set_size (sandbox->egress, 0);
    for (i = 0; i < update->egress->len; i++)
      g_ptr_array_add (sandbox->egress, box_rule_copy (g_ptr_array_index (update->egress, i)));
    *network_changed = TRUE;
  }
  if (update->secrets != NULL) {
    g_strfreev (sandbox->secrets);
    sandbox->secrets = g_strdupv (update->secrets);
  }
  return (!update->deadline_set || check_deadline (self, sandbox, error)) &&
         check_rules (self, update->egress, error) && check_secrets_env (sandbox, error) &&
         (update->secrets == NULL ||
          box_engine_check_secrets (self, sandbox->project,
                                    (const char *const *) sandbox->secrets, error));
}

static void
env_pushed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  Op *op = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;

  /* The record holds the new env either way; the guest gets it at its
   * next wake at the latest. */
  if (!box_agent_client_set_env_finish (BOX_AGENT_CLIENT (source), result, &error))
    g_warning ("sandbox %s: the new env did not reach the guest now: %s", op->id, error->message);
  op_finish_ok (self, task);
}

static void
push_env (BoxEngine *self, GTask *task)
{
  Op *op = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxAgentClient) agent = NULL;

  /* a hypervisor that runs no VM has no guest to tell */
  if (!box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_GUEST_AGENT)) {
    op_finish_ok (self, task);
    return;
  }
  agent = box_hypervisor_get_agent (self->hypervisor, op->id, &error);
  if (agent == NULL) {
    g_warning ("sandbox %s: the new env did not reach the guest now: %s", op->id,
               error->message);
    op_finish_ok (self, task);
    return;
  }
  box_agent_client_set_env_async (agent, op->sandbox->env, NULL, env_pushed, task);
}

static void
run_update (BoxEngine *self, GTask *task)
{
  Op *op = g_task_get_task_data (task);
  g_autoptr(BoxSandbox) changed = box_sandbox_copy (op->sandbox);
  gboolean network_changed = FALSE;
  GError *error = NULL;

  if (!apply_update (self, changed, op->update, &network_changed, &error)) {
    op_finish_error (self, task, error);
    return;
  }
  /* An awake sandbox gets new rules at once.  A change the node refuses is
   * not kept; one that cannot reach the node is kept for the next wake. */
  if (network_changed && self->network != NULL && changed->state == BOX_SANDBOX_STATE_RUNNING) {
    g_autoptr(GPtrArray) rules = expand_rules (self, changed->egress);
    g_autoptr(GError) apply_error = NULL;

    if (!box_network_set_egress (self->network, changed->id, rules, &apply_error)) {
      if (!g_error_matches (apply_error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE)) {
        op_finish_error (self, task, g_steal_pointer (&apply_error));
        return;
      }
      if (!save (self, changed, &error)) {
        op_finish_error (self, task, error);
        return;
      }
      op_finish_error (self, task, g_steal_pointer (&apply_error));
      return;
    }
  }
  if (!save (self, changed, &error)) {
    op_finish_error (self, task, error);
    return;
  }
  g_clear_pointer (&op->sandbox, box_sandbox_free);
  op->sandbox = g_steal_pointer (&changed);
  /* A new env reaches processes started after the change (and the whole
   * sandbox at its next wake, when the hypervisor hands it over again). */
  if (op->update->env != NULL && op->sandbox->state == BOX_SANDBOX_STATE_RUNNING) {
    push_env (self, task);
    return;
  }
  op_finish_ok (self, task);
}

static BoxSandboxUpdate *
update_copy (const BoxSandboxUpdate *update)
{
  BoxSandboxUpdate *copy = g_new0 (BoxSandboxUpdate, 1);
  guint i;

  *copy = *update;
  if (update->env != NULL) {
    copy->env = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
    copy_map (copy->env, update->env);
  }
  if (update->labels != NULL) {
    copy->labels = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
    copy_map (copy->labels, update->labels);
  }
  if (update->egress != NULL) {
    copy->egress = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
    for (i = 0; i < update->egress->len; i++)
      g_ptr_array_add (copy->egress, box_rule_copy (g_ptr_array_index (update->egress, i)));
  }
  copy->secrets = g_strdupv (update->secrets);
  return copy;
}

/* ---- delete ------------------------------------------------------------ */

static void
delete_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  Op *op = g_task_get_task_data (task);
  GError *error = NULL;

  if (!box_hypervisor_run_finish (self->hypervisor, result, &error)) {
    op_finish_error (self, task, error);
    return;
  }
  if (!box_storage_sandbox_delete (self->storage, op->sandbox->project, op->id, &error)) {
    op_finish_error (self, task, error);
    return;
  }
  runtime_get (self, op->id)->base.deleted = TRUE;
  emit (self, "sandbox.deleted", op->sandbox, "reason", op->reason);
  op_finish_ok (self, task);
}

static void
run_delete (BoxEngine *self, GTask *task)
{
  Op *op = g_task_get_task_data (task);
  BoxVmRequest vm;

  if (op->sandbox->protected_ && !op->force) {
    op_finish_error (self, task,
                     g_error_new (BOX_ERROR, BOX_ERROR_CONFLICT,
                                  "sandbox %s is protected; set protected to false to delete it",
                                  op->sandbox->name));
    return;
  }
  box_engine_emit_interrupted (self, op->sandbox->id, "delete");
  fill_vm_request (self, &vm, op);
  box_hypervisor_run_async (self->hypervisor, BOX_VM_OP_DESTROY, &vm, NULL, delete_done, task);
}

/* ---- dispatch under the lock ------------------------------------------- */

static void
op_locked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  GTask *task = user_data;
  Op *op = g_task_get_task_data (task);
  GError *error = NULL;

  /* The record may have changed (or gone) while we waited. */
  g_clear_pointer (&op->sandbox, box_sandbox_free);
  op->sandbox = box_storage_sandbox_get (self->storage, op->project, op->id, &error);
  if (op->sandbox == NULL) {
    op_finish_error (self, task, error);
    return;
  }
  switch (op->kind) {
  case OP_STATE:
    run_state (self, task);
    break;
  case OP_UPDATE:
    run_update (self, task);
    break;
  case OP_DELETE:
    run_delete (self, task);
    break;
  case OP_CREATE:
  default:
    g_assert_not_reached ();
  }
}

static GTask *
op_task_new (BoxEngine *self, OpKind kind, const char *project, gpointer source_tag,
             GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  Op *op = g_new0 (Op, 1);

  g_task_set_source_tag (task, source_tag);
  op->kind = kind;
  op->project = g_strdup (project);
  op->reason = "request";
  g_task_set_task_data (task, op, (GDestroyNotify) op_free);
  return task;
}

void
box_engine_change_state_async (BoxEngine *self, const char *project, const char *id_or_name,
                               BoxStateRequest request, GCancellable *cancellable,
                               GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (id_or_name != NULL);
  g_return_if_fail (request <= BOX_STATE_REQUEST_WAKE);
  BOX_ENGINE_ASSERT_OWNER (self);
  GTask *task = op_task_new (self, OP_STATE, project, box_engine_change_state_async, cancellable,
                             callback, user_data);
  Op *op = g_task_get_task_data (task);

  op->request = request;
  op_start (self, task, id_or_name);
}

BoxSandbox *
box_engine_change_state_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_engine_update_sandbox_async (BoxEngine *self, const char *project, const char *id_or_name,
                                 BoxSandboxUpdate *update, GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (id_or_name != NULL);
  g_return_if_fail (update != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  GTask *task = op_task_new (self, OP_UPDATE, project, box_engine_update_sandbox_async,
                             cancellable, callback, user_data);
  Op *op = g_task_get_task_data (task);

  op->update = update_copy (update);
  op_start (self, task, id_or_name);
}

BoxSandbox *
box_engine_update_sandbox_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_engine_delete_sandbox_async (BoxEngine *self, const char *project, const char *id_or_name,
                                 GCancellable *cancellable, GAsyncReadyCallback callback,
                                 gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (id_or_name != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  GTask *task = op_task_new (self, OP_DELETE, project, box_engine_delete_sandbox_async,
                             cancellable, callback, user_data);

  op_start (self, task, id_or_name);
}

gboolean
box_engine_delete_sandbox_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* ---- internal transitions: deadlines, idle, project deletion ----------- */

static void
internal_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autofree char *what = user_data;
  g_autoptr(GError) error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error) &&
      !g_error_matches (error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
    g_warning ("%s failed: %s", what, error->message);
}

static void
internal_state_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autofree char *what = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sandbox = g_task_propagate_pointer (G_TASK (result), &error);

  if (sandbox == NULL && !g_error_matches (error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
    g_warning ("%s failed: %s", what, error->message);
}

/* Applies a deadline or the idle rule; @reason goes into the event. */
static void
internal_transition (BoxEngine *self, const char *id, gboolean delete, BoxStateRequest request,
                     const char *reason)
{
  GTask *task;
  Op *op;
  char *what = g_strdup_printf ("sandbox %s: %s (%s)", id,
                                delete ? "delete" : request == BOX_STATE_REQUEST_PAUSE ? "pause" : "stop",
                                reason);

  g_message ("%s", what);
  task = op_task_new (self, delete ? OP_DELETE : OP_STATE, NULL, internal_transition, NULL,
                      delete ? internal_done : internal_state_done, what);
  op = g_task_get_task_data (task);
  op->reason = reason;
  op->request = request;
  op->force = TRUE;
  op_start (self, task, id);
}

static gboolean
tick (gpointer user_data)
{
  BoxEngine *self = user_data;
  gint64 now = box_engine_now (self);
  g_autoptr(GPtrArray) due = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  gpointer value;
  guint i;

  BOX_ENGINE_ASSERT_OWNER (self);

  g_hash_table_iter_init (&iter, self->runtime);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Runtime *rt = value;

    if (rt->base.busy || rt->base.deleted)
      continue;
    if (rt->has_deadline && rt->deadline_at <= now) {
      rt->has_deadline = FALSE;   /* once; the record follows */
      g_ptr_array_add (due, g_strdup_printf ("d%d%s", rt->deadline_action, rt->base.id));
    } else if (rt->state == BOX_SANDBOX_STATE_RUNNING && rt->idle_action != BOX_IDLE_ACTION_NONE &&
               rt->base.holds == 0 &&
               now - rt->base.last_active >= (gint64) rt->idle_timeout_s * G_USEC_PER_SEC) {
      rt->base.last_active = now;   /* not again before the next timeout */
      g_ptr_array_add (due, g_strdup_printf ("i%d%s", rt->idle_action, rt->base.id));
    }
  }
  /* Act outside the iteration: an operation may change the table. */
  for (i = 0; i < due->len; i++) {
    const char *entry = g_ptr_array_index (due, i);
    const char *id = entry + 2;
    int action = entry[1] - '0';

    if (entry[0] == 'd') {
      if (action == BOX_DEADLINE_ACTION_DELETE)
        internal_transition (self, id, TRUE, 0, "deadline");
      else
        internal_transition (self, id, FALSE,
                             action == BOX_DEADLINE_ACTION_PAUSE ? BOX_STATE_REQUEST_PAUSE
                                                                  : BOX_STATE_REQUEST_STOP,
                             "deadline");
    } else {
      internal_transition (self, id, FALSE,
                           action == BOX_IDLE_ACTION_PAUSE ? BOX_STATE_REQUEST_PAUSE
                                                            : BOX_STATE_REQUEST_STOP,
                           "idle");
    }
  }
  return G_SOURCE_CONTINUE;
}

/* ---- the VM died on its own -------------------------------------------- */

/* Records what happened to a sandbox whose VM is gone: back to its latest
 * memory snapshot (paused, reason @lost_reason, detail.snapshot_at) or,
 * without one, error with reason reconciled. */
static void
mark_lost (BoxEngine *self, BoxSandbox *sandbox, const char *lost_reason)
{
  g_autoptr(GError) error = NULL;
  gint64 snapshot_at = 0;
  BoxVmState vm_state = box_hypervisor_query (self->hypervisor, sandbox->id, &snapshot_at);
  g_autoptr(JsonObject) detail = json_object_new ();

  box_engine_emit_interrupted (self, sandbox->id, "lost");
  if (vm_state == BOX_VM_STATE_SUSPENDED || (vm_state == BOX_VM_STATE_LOST && snapshot_at != 0)) {
    g_autofree char *at = box_time_format (snapshot_at);

    sandbox->state = BOX_SANDBOX_STATE_PAUSED;
    sandbox->snapshot_at = snapshot_at;
    json_object_set_string_member (detail, "reason", lost_reason);
    json_object_set_string_member (detail, "snapshot_at", at);
    if (save (self, sandbox, &error))
      box_engine_emit (self, "sandbox.paused", sandbox, detail);
  } else {
    /* No memory snapshot to go back to (the VM ran, or its pause lived in
     * the QEMU that died): the specification's "gone with no snapshot". */
    sandbox->state = BOX_SANDBOX_STATE_ERROR;
    json_object_set_string_member (detail, "reason", "reconciled");
    if (save (self, sandbox, &error))
      box_engine_emit (self, "sandbox.error", sandbox, detail);
  }
  if (error != NULL)
    g_warning ("sandbox %s: cannot record the lost VM: %s", sandbox->id, error->message);
  else
    g_message ("sandbox %s: VM lost, now %s", sandbox->id,
               box_sandbox_state_to_string (sandbox->state));
}

static void
vm_lost_locked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  g_autofree char *id = user_data;
  g_autoptr(BoxSandbox) sandbox = box_storage_sandbox_get (self->storage, NULL, id, NULL);

  /* A running VM, or a paused one whose snapshot lived in its QEMU (a hot
   * pause), that died on its own: back to what the hypervisor still has. */
  if (sandbox != NULL && (sandbox->state == BOX_SANDBOX_STATE_RUNNING ||
                          sandbox->state == BOX_SANDBOX_STATE_PAUSED)) {
    BoxVmState vm_state = box_hypervisor_query (self->hypervisor, id, NULL);

    if (sandbox->state == BOX_SANDBOX_STATE_RUNNING || vm_state != BOX_VM_STATE_SUSPENDED)
      mark_lost (self, sandbox, "vm_lost");
  }
  box_engine_unlock_sandbox (self, id);
}

static void
on_vm_lost (BoxHypervisor *hypervisor, const char *sandbox_id, gpointer user_data)
{
  BoxEngine *self = user_data;

  /* plugins emit ::vm-lost on the main thread (box-hypervisor.h) */
  BOX_ENGINE_ASSERT_OWNER (self);
  box_engine_lock_sandbox_async (self, sandbox_id, vm_lost_locked, g_strdup (sandbox_id));
}

void
box_engine_start_ticks (BoxEngine *self)
{
  self->tick_id = box_clock_timeout_add (self->clock, TICK_INTERVAL_S * 1000, tick, self);
  self->vm_lost_id = g_signal_connect (self->hypervisor, "vm-lost", G_CALLBACK (on_vm_lost), self);
}

/* ---- reconciliation ---------------------------------------------------- */

gboolean
box_engine_reconcile (BoxEngine *self, GError **error)
{
  g_autoptr(GPtrArray) sandboxes = box_storage_sandbox_list (self->storage, NULL, error);
  guint i;

  if (sandboxes == NULL)
    return FALSE;
  for (i = 0; i < sandboxes->len; i++) {
    BoxSandbox *sandbox = g_ptr_array_index (sandboxes, i);
    BoxVmState vm_state = box_hypervisor_query (self->hypervisor, sandbox->id, NULL);
    gboolean consistent;

    switch (sandbox->state) {
    case BOX_SANDBOX_STATE_RUNNING:
      consistent = vm_state == BOX_VM_STATE_RUNNING;
      break;
    case BOX_SANDBOX_STATE_PAUSED:
      consistent = vm_state == BOX_VM_STATE_SUSPENDED;
      break;
    case BOX_SANDBOX_STATE_STOPPED:
      consistent = vm_state == BOX_VM_STATE_SHUTOFF || vm_state == BOX_VM_STATE_SUSPENDED;
      break;
    case BOX_SANDBOX_STATE_ERROR:
      consistent = TRUE;
      break;
    case BOX_SANDBOX_STATE_CREATING:
    default:
      /* boxd died during the first boot */
      consistent = FALSE;
      vm_state = BOX_VM_STATE_ABSENT;
      break;
    }
    if (!consistent) {
      g_message ("sandbox %s: recorded %s, hypervisor has %d; reconciling", sandbox->id,
                 box_sandbox_state_to_string (sandbox->state), vm_state);
      if (sandbox->state == BOX_SANDBOX_STATE_CREATING) {
        g_autoptr(JsonObject) detail = detail_new ("reason", "reconciled");
        sandbox->state = BOX_SANDBOX_STATE_ERROR;
        if (!save (self, sandbox, error))
          return FALSE;
        box_engine_emit (self, "sandbox.error", sandbox, detail);
      } else {
        mark_lost (self, sandbox, "vm_lost");
      }
    }
    runtime_sync (self, sandbox);
  }
  return TRUE;
}

/* ---- project deletion -------------------------------------------------- */

typedef struct {
  GPtrArray *ids;
  guint      next;
} DestroyAll;

static void
destroy_all_free (DestroyAll *all)
{
  g_ptr_array_unref (all->ids);
  g_free (all);
}

static void destroy_next (GTask *task);

static void
destroy_one_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  g_autoptr(GError) error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error) &&
      !g_error_matches (error, BOX_ERROR, BOX_ERROR_NOT_FOUND)) {
    g_task_return_error (task, g_steal_pointer (&error));
    g_object_unref (task);
    return;
  }
  destroy_next (task);
}

static void
destroy_next (GTask *task)
{
  BoxEngine *self = g_task_get_source_object (task);
  DestroyAll *all = g_task_get_task_data (task);
  GTask *one;
  Op *op;

  if (all->next >= all->ids->len) {
    g_task_return_boolean (task, TRUE);
    g_object_unref (task);
    return;
  }
  one = op_task_new (self, OP_DELETE, NULL, destroy_next, NULL, destroy_one_done, task);
  op = g_task_get_task_data (one);
  op->force = TRUE;
  op_start (self, one, g_ptr_array_index (all->ids, all->next++));
}

void
box_engine_destroy_project_sandboxes_async (BoxEngine *self, const char *project,
                                            GCancellable *cancellable,
                                            GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(GPtrArray) sandboxes = NULL;
  DestroyAll *all = g_new0 (DestroyAll, 1);
  GError *error = NULL;
  guint i;

  g_task_set_source_tag (task, box_engine_destroy_project_sandboxes_async);
  all->ids = g_ptr_array_new_with_free_func (g_free);
  g_task_set_task_data (task, all, (GDestroyNotify) destroy_all_free);
  sandboxes = box_storage_sandbox_list (self->storage, project, &error);
  if (sandboxes == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  for (i = 0; i < sandboxes->len; i++)
    g_ptr_array_add (all->ids, g_strdup (((BoxSandbox *) g_ptr_array_index (sandboxes, i))->id));
  destroy_next (task);
}

gboolean
box_engine_destroy_project_sandboxes_finish (BoxEngine *self, GAsyncResult *result,
                                             GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}
