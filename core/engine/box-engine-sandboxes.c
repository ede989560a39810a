/* box-engine-sandboxes.c: the sandbox state machine.
 *
 * Every operation on a sandbox takes the sandbox's lock (one operation at a
 * time per sandbox, in arrival order), re-reads the record, decides the
 * transition from the state it finds, runs the hypervisor operation,
 * writes the record and emits the event.  Other sandboxes are not held up.
 * This file holds the locks, the helpers and the common flow of the
 * operations (box-engine-ops-private.h), reading, pause/stop/wake and
 * delete; create, update and the timers have their own files.
 *
 * What is known only while boxd runs (the lock, calls in flight, the last
 * activity, deadlines and idle settings for the tick) lives in a
 * BoxSandboxRuntime per sandbox, refreshed from every record written.
 */
#include "config.h"

#include "box-agent-client.h"
#include "box-agent-exec.h"
#include "box-egress-policy.h"
#include "box-engine-ops-private.h"
#include "box-engine-presuspend.h"
#include "box-storage-records.h"
#include "box-validate.h"

void
box_engine_op_free (BoxEngineOp *op)
{
  g_free (op->project);
  g_free (op->id);
  g_clear_pointer (&op->sandbox, box_sandbox_free);
  g_clear_pointer (&op->update, box_sandbox_update_free);
  g_clear_pointer (&op->egress, g_ptr_array_unref);
  g_clear_pointer (&op->guest_env, g_hash_table_unref);
  if (op->extra_free != NULL)
    g_clear_pointer (&op->extra, op->extra_free);
  g_free (op);
}

/* ---- runtime and locks ------------------------------------------------- */

static void
runtime_free (gpointer data)
{
  BoxEngineRuntime *rt = data;

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

BoxEngineRuntime *
box_engine_runtime_get (BoxEngine *self, const char *id)
{
  BoxEngineRuntime *rt = g_hash_table_lookup (self->runtime, id);

  if (rt == NULL) {
    rt = g_new0 (BoxEngineRuntime, 1);
    rt->base.id = g_strdup (id);
    rt->base.last_active = box_engine_now (self);
    g_queue_init (&rt->base.waiters);
    g_hash_table_insert (self->runtime, rt->base.id, rt);
  }
  return rt;
}

/* Keeps the tick's view in step with the record just written. */
void
box_engine_runtime_sync (BoxEngine *self, const BoxSandbox *sandbox)
{
  BoxEngineRuntime *rt = box_engine_runtime_get (self, sandbox->id);

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
  BoxEngineRuntime *rt = box_engine_runtime_get (self, id);
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
  BoxEngineRuntime *rt = g_hash_table_lookup (self->runtime, id);
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

void
box_engine_emit_detail (BoxEngine *self, const char *type, const BoxSandbox *sandbox, const char *key,
      const char *value)
{
  g_autoptr(JsonObject) detail = key != NULL ? detail_new (key, value) : NULL;

  box_engine_emit (self, type, sandbox, detail);
}


/* @op keeps the expanded rules and the guest's env alive while the
 * request is in use. */
void
box_engine_fill_vm_request (BoxEngine *self, BoxVmRequest *request, BoxEngineOp *op)
{
  const BoxSandbox *sandbox = op->sandbox;

  memset (request, 0, sizeof (*request));
  if (op->egress == NULL)
    op->egress = box_engine_sandbox_rules (self, sandbox);
  request->sandbox_id = sandbox->id;
  request->hostname = sandbox->name;
  request->template_name = sandbox->template_name;
  request->image = sandbox->image;
  request->resources = sandbox->resources;
  if (op->guest_env == NULL)
    op->guest_env = box_engine_guest_env (self, sandbox);
  request->env = op->guest_env;
  request->egress = op->egress;
}

/* Writes @sandbox (updated_at moved) and refreshes the runtime.
 *
 * The write names the revision @sandbox was read at.  The caller holds the
 * sandbox (an op under its lock), so it owns the record: when the stored
 * record moved on meanwhile, the revision is read again and the caller's
 * copy written over it (as the last writer always won), at most
 * BOX_ENGINE_STORAGE_TRIES times; then the conflict is reported. */
gboolean
box_engine_save_sandbox (BoxEngine *self, BoxSandbox *sandbox, GError **error)
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
  box_engine_runtime_sync (self, sandbox);
  return TRUE;
}

gboolean
box_engine_check_deadline (BoxEngine *self, const BoxSandbox *sandbox, GError **error)
{
  if (sandbox->has_deadline && sandbox->deadline_at <= box_engine_now (self)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         "invalid deadline: deadline.at must be in the future");
    return FALSE;
  }
  return TRUE;
}

gboolean
box_engine_check_secrets_env (const BoxSandbox *sandbox, GError **error)
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

/* Valid rules (400 otherwise), and none at all unless the network plugin
 * enforces them (box_network_enforces_egress(): the nftables plugin does):
 * rules that are stored and returned but not enforced would let a caller
 * believe a sandbox is confined when it is not.  An empty list (the whole
 * internet) every deployment gives. */
gboolean
box_engine_check_rules (BoxEngine *self, GPtrArray *egress, GError **error)
{
  if (egress == NULL)
    return TRUE;
  if (!box_validate_rules (egress, box_engine_count_defaults (self), error))
    return FALSE;
  if (egress->len > 0 && (self->network == NULL || !box_network_enforces_egress (self->network))) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                         "egress rules are not enforced by this deployment yet: "
                         "network.egress must be empty");
    return FALSE;
  }
  return TRUE;
}

/* Before the hypervisor runs the sandbox's code (create, fork, resume,
 * boot, restore): the broker gets its secrets (box-engine-broker.c) and
 * the network plugin the sandbox's rules (and, with a broker, its CA goes
 * to the guest once it runs, box_engine_op_finish_ok()), so that
 * rules given at create or changed while it slept hold before the guest
 * runs.  The plugin keeps them for an ID it has no attachment for yet and
 * applies them when the hypervisor attaches (or rebinds a warm VM). */
gboolean
box_engine_push_egress (BoxEngine *self, BoxEngineOp *op, GError **error)
{
  /* the broker holds its secrets before the network sends it there */
  if (!box_engine_push_secrets (self, op->sandbox, error))
    return FALSE;
  op->trust_ca = self->broker != NULL;
  if (self->network == NULL)
    return TRUE;
  if (op->egress == NULL)
    op->egress = box_engine_sandbox_rules (self, op->sandbox);
  return box_network_set_egress (self->network, op->sandbox->id, op->egress, error);
}

/* The rules a network plugin enforces: includes expanded. */
GPtrArray *
box_engine_expand_rules (BoxEngine *self, GPtrArray *egress)
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

/* In a restricted sandbox, each host of a secret it uses is allowed on 443
 * as if by a rule (the secret is sent there); "host/path" gives its host.
 * A secret deleted meanwhile adds nothing; @replacing (when not NULL)
 * stands for the stored secret of its name. */
static void
add_secret_hosts (BoxEngine *self, const BoxSandbox *sandbox, const BoxSecret *replacing,
                  GPtrArray *rules)
{
  g_autoptr(GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  for (guint i = 0; sandbox->secrets != NULL && sandbox->secrets[i] != NULL; i++) {
    g_autoptr(BoxSecret) stored = NULL;
    const BoxSecret *secret = replacing;

    if (replacing == NULL || g_strcmp0 (replacing->name, sandbox->secrets[i]) != 0)
      secret = stored = box_storage_secret_get (self->storage, sandbox->project,
                                                sandbox->secrets[i], NULL);
    for (guint j = 0; secret != NULL && secret->hosts != NULL && secret->hosts[j] != NULL; j++) {
      const char *slash = strchr (secret->hosts[j], '/');
      char *host = slash != NULL ? g_strndup (secret->hosts[j], (gsize) (slash - secret->hosts[j]))
                                 : g_strdup (secret->hosts[j]);
      BoxRule *rule;

      if (!g_hash_table_add (seen, host))
        continue;
      rule = g_new0 (BoxRule, 1);
      rule->domain = g_strdup (host);
      rule->allow = TRUE;
      rule->n_ports = 1;
      rule->ports = g_new (guint16, 1);
      rule->ports[0] = 443;
      g_ptr_array_add (rules, rule);
    }
  }
}

GPtrArray *
box_engine_sandbox_rules_replacing (BoxEngine *self, const BoxSandbox *sandbox,
                                    const BoxSecret *replacing)
{
  GPtrArray *rules = box_engine_expand_rules (self, sandbox->egress);

  if (rules->len > 0)
    add_secret_hosts (self, sandbox, replacing, rules);
  return rules;
}

GPtrArray *
box_engine_sandbox_rules (BoxEngine *self, const BoxSandbox *sandbox)
{
  return box_engine_sandbox_rules_replacing (self, sandbox, NULL);
}

/* The secrets' hosts count toward the limit: the network compiles them
 * with the rules, and a list it cannot compile must be refused here. */
gboolean
box_engine_check_rule_count_replacing (BoxEngine *self, const BoxSandbox *sandbox,
                                       const BoxSecret *replacing, GError **error)
{
  g_autoptr(GPtrArray) rules = box_engine_sandbox_rules_replacing (self, sandbox, replacing);

  if (rules->len > BOX_EGRESS_POLICY_MAX_RULES) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "too many network rules: %u counting defaults expanded and the hosts of the "
                 "sandbox's secrets, at most %d", rules->len, BOX_EGRESS_POLICY_MAX_RULES);
    return FALSE;
  }
  return TRUE;
}

gboolean
box_engine_check_rule_count (BoxEngine *self, const BoxSandbox *sandbox, GError **error)
{
  return box_engine_check_rule_count_replacing (self, sandbox, NULL, error);
}

/* ---- operations: common flow ------------------------------------------- */

static void op_locked (GObject *source, GAsyncResult *result, gpointer user_data);

/* Resolves @id_or_name in @project, then runs @task's op under the lock. */
void
box_engine_op_start (BoxEngine *self, GTask *task, const char *id_or_name)
{
  BoxEngineOp *op = g_task_get_task_data (task);
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
ca_sent (BoxEngine *self, gpointer data)
{
  box_engine_op_finish_ok (self, data);
}

void
box_engine_op_finish_ok (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);

  /* the guest that runs from now on trusts the broker CA before the answer */
  if (op->trust_ca) {
    op->trust_ca = FALSE;
    if (op->sandbox->state == BOX_SANDBOX_STATE_RUNNING &&
        box_engine_send_ca (self, op->id, ca_sent, task))
      return;
  }
  box_engine_unlock_sandbox (self, op->id);
  if (op->kind == BOX_ENGINE_OP_DELETE)
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_pointer (task, box_sandbox_copy (op->sandbox), (GDestroyNotify) box_sandbox_free);
  g_object_unref (task);
}

void
box_engine_op_finish_error (BoxEngine *self, GTask *task, GError *error)
{
  BoxEngineOp *op = g_task_get_task_data (task);

  box_engine_unlock_sandbox (self, op->id);
  g_task_return_error (task, error);
  g_object_unref (task);
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

gboolean
box_engine_woken_finish (BoxEngine *self, BoxEngineOp *op, GAsyncResult *result, GError **error)
{
  BoxSandbox *sandbox = op->sandbox;
  GError *local = NULL;

  if (!box_hypervisor_run_finish (self->hypervisor, result, &local)) {
    g_warning ("sandbox %s: wake failed: %s", sandbox->id, local->message);
    if (g_error_matches (local, BOX_ERROR, BOX_ERROR_CAPACITY)) {
      g_propagate_error (error, local);
      return FALSE;
    }
    g_set_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                 "sandbox %s could not be woken: %s", sandbox->name, local->message);
    g_error_free (local);
    return FALSE;
  }
  sandbox->state = BOX_SANDBOX_STATE_RUNNING;
  sandbox->last_active_at = box_engine_now (self);
  box_engine_runtime_get (self, sandbox->id)->base.last_active = sandbox->last_active_at;
  if (!box_engine_save_sandbox (self, sandbox, error))
    return FALSE;
  box_engine_emit_detail (self, "sandbox.running", sandbox, "from",
                          box_sandbox_state_to_string (op->from));
  return TRUE;
}

static void
state_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  BoxEngineOp *op = g_task_get_task_data (task);
  BoxSandbox *sandbox = op->sandbox;
  GError *error = NULL;
  const char *type;

  if (op->request == BOX_STATE_REQUEST_WAKE) {
    if (box_engine_woken_finish (self, op, result, &error))
      box_engine_op_finish_ok (self, task);
    else
      box_engine_op_finish_error (self, task, error);
    return;
  }
  if (!box_hypervisor_run_finish (self->hypervisor, result, &error)) {
    g_warning ("sandbox %s: %s failed: %s", sandbox->id,
               op->request == BOX_STATE_REQUEST_PAUSE ? "pause" : "stop", error->message);
    box_engine_op_finish_error (self, task, error);
    return;
  }

  /* A deadline fires once. */
  if (g_strcmp0 (op->reason, "deadline") == 0)
    sandbox->has_deadline = FALSE;
  if (op->request == BOX_STATE_REQUEST_PAUSE) {
    sandbox->state = BOX_SANDBOX_STATE_PAUSED;
    sandbox->snapshot_at = box_engine_now (self);
    type = "sandbox.paused";
  } else {
    sandbox->state = BOX_SANDBOX_STATE_STOPPED;
    sandbox->snapshot_at = 0;
    type = "sandbox.stopped";
  }
  if (!box_engine_save_sandbox (self, sandbox, &error)) {
    box_engine_op_finish_error (self, task, error);
    return;
  }
  if (sandbox->state == BOX_SANDBOX_STATE_STOPPED)
    box_engine_end_tasks (self, sandbox->id, "stopped");
  box_engine_emit_detail (self, type, sandbox, "reason", op->reason);
  box_engine_op_finish_ok (self, task);
}

static void
run_vm_op (BoxEngine *self, GTask *task, BoxVmOp vm_op)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  BoxVmRequest vm;

  if (vm_op == BOX_VM_OP_SUSPEND || vm_op == BOX_VM_OP_SHUTDOWN)
    box_engine_emit_interrupted (self, op->sandbox->id, vm_op == BOX_VM_OP_SUSPEND ? "pause" : "stop");
  box_engine_fill_vm_request (self, &vm, op);
  box_hypervisor_run_async (self->hypervisor, vm_op, &vm, NULL, state_done, task);
}

/* The hooks ran (or could not): the pause goes on either way. */
static void
presuspend_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = BOX_ENGINE (source);

  box_engine_run_presuspend_hooks_finish (self, result);
  run_vm_op (self, task, BOX_VM_OP_SUSPEND);
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
  BoxEngineOp *op = g_task_get_task_data (task);
  BoxVmOp vm_op;
  GError *error = NULL;

  if (!plan_transition (op->sandbox, op->request, &vm_op, &error)) {
    box_engine_op_finish_error (self, task, error);
    return;
  }
  if (vm_op == BOX_VM_OP_LAST) {
    /* Already there; a deadline that found it so is spent all the same. */
    if (g_strcmp0 (op->reason, "deadline") == 0 && op->sandbox->has_deadline) {
      op->sandbox->has_deadline = FALSE;
      if (!box_engine_save_sandbox (self, op->sandbox, &error)) {
        box_engine_op_finish_error (self, task, error);
        return;
      }
    }
    box_engine_op_finish_ok (self, task);
    return;
  }
  /* ask rather than fail: a pause is a memory snapshot */
  if (vm_op == BOX_VM_OP_SUSPEND &&
      !box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS)) {
    box_engine_op_finish_error (self, task,
                     g_error_new (BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                                  "this deployment's hypervisor cannot pause sandboxes "
                                  "(no memory snapshots); stop %s instead", op->sandbox->name));
    return;
  }
  if ((vm_op == BOX_VM_OP_RESUME || vm_op == BOX_VM_OP_BOOT) &&
      !box_hypervisor_check_room (self->hypervisor, &op->sandbox->resources, &error)) {
    box_engine_op_finish_error (self, task, error);
    return;
  }
  if ((vm_op == BOX_VM_OP_RESUME || vm_op == BOX_VM_OP_BOOT) &&
      !box_engine_push_egress (self, op, &error)) {
    box_engine_op_finish_error (self, task, error);
    return;
  }
  op->from = op->sandbox->state;
  /* the guest's hooks first, while everything still runs */
  if (vm_op == BOX_VM_OP_SUSPEND) {
    box_engine_run_presuspend_hooks_async (self, op->sandbox->id, presuspend_done, task);
    return;
  }
  run_vm_op (self, task, vm_op);
}

/* ---- delete ------------------------------------------------------------ */

static void
delete_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  BoxEngineOp *op = g_task_get_task_data (task);
  GError *error = NULL;

  if (!box_hypervisor_run_finish (self->hypervisor, result, &error)) {
    box_engine_op_finish_error (self, task, error);
    return;
  }
  if (!box_storage_sandbox_delete (self->storage, op->sandbox->project, op->id, &error)) {
    box_engine_op_finish_error (self, task, error);
    return;
  }
  box_engine_runtime_get (self, op->id)->base.deleted = TRUE;
  if (op->sandbox->secrets != NULL && op->sandbox->secrets[0] != NULL)
    box_engine_drop_secrets (self, op->id);
  box_engine_emit_detail (self, "sandbox.deleted", op->sandbox, "reason", op->reason);
  box_engine_op_finish_ok (self, task);
}

static void
run_delete (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  BoxVmRequest vm;

  if (op->sandbox->protected_ && !op->force) {
    box_engine_op_finish_error (self, task,
                     g_error_new (BOX_ERROR, BOX_ERROR_CONFLICT,
                                  "sandbox %s is protected; set protected to false to delete it",
                                  op->sandbox->name));
    return;
  }
  box_engine_emit_interrupted (self, op->sandbox->id, "delete");
  box_engine_fill_vm_request (self, &vm, op);
  box_hypervisor_run_async (self->hypervisor, BOX_VM_OP_DESTROY, &vm, NULL, delete_done, task);
}

/* ---- dispatch under the lock ------------------------------------------- */

static void
op_locked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  GTask *task = user_data;
  BoxEngineOp *op = g_task_get_task_data (task);
  GError *error = NULL;

  /* The record may have changed (or gone) while we waited. */
  g_clear_pointer (&op->sandbox, box_sandbox_free);
  op->sandbox = box_storage_sandbox_get (self->storage, op->project, op->id, &error);
  if (op->sandbox == NULL) {
    box_engine_op_finish_error (self, task, error);
    return;
  }
  if (op->run != NULL) {
    op->run (self, task);
    return;
  }
  switch (op->kind) {
  case BOX_ENGINE_OP_STATE:
    run_state (self, task);
    break;
  case BOX_ENGINE_OP_UPDATE:
    box_engine_run_update (self, task);
    break;
  case BOX_ENGINE_OP_DELETE:
    run_delete (self, task);
    break;
  case BOX_ENGINE_OP_CREATE:
  default:
    g_assert_not_reached ();
  }
}

GTask *
box_engine_op_task_new (BoxEngine *self, BoxEngineOpKind kind, const char *project, gpointer source_tag,
             GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  BoxEngineOp *op = g_new0 (BoxEngineOp, 1);

  g_task_set_source_tag (task, source_tag);
  op->kind = kind;
  op->project = g_strdup (project);
  op->reason = "request";
  g_task_set_task_data (task, op, (GDestroyNotify) box_engine_op_free);
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
  GTask *task = box_engine_op_task_new (self, BOX_ENGINE_OP_STATE, project, box_engine_change_state_async, cancellable,
                             callback, user_data);
  BoxEngineOp *op = g_task_get_task_data (task);

  op->request = request;
  box_engine_op_start (self, task, id_or_name);
}

BoxSandbox *
box_engine_change_state_finish (BoxEngine *self, GAsyncResult *result, GError **error)
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
  GTask *task = box_engine_op_task_new (self, BOX_ENGINE_OP_DELETE, project, box_engine_delete_sandbox_async,
                             cancellable, callback, user_data);

  box_engine_op_start (self, task, id_or_name);
}

gboolean
box_engine_delete_sandbox_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

