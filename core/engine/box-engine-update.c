/* box-engine-update.c: PATCH of a sandbox: the new fields applied under
 * the lock, the broker and the network told at once when the sandbox is
 * awake, the new env pushed to the guest.
 */
#include "config.h"

#include "box-agent-client.h"
#include "box-agent-exec.h"
#include "box-engine-ops-private.h"

/* ---- update ------------------------------------------------------------ */

static void
replace_map (GHashTable *into, GHashTable *from)
{
  if (from != NULL)
    box_engine_copy_map (into, from);
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
    /* a restricted sandbox's secrets' hosts are among its rules */
    *network_changed = *network_changed || sandbox->egress->len > 0;
  }
  return (!update->deadline_set || box_engine_check_deadline (self, sandbox, error)) &&
         box_engine_check_rules (self, update->egress, error) && box_engine_check_secrets_env (sandbox, error) &&
         (update->secrets == NULL ||
          box_engine_check_secrets (self, sandbox->project,
                                    (const char *const *) sandbox->secrets, error)) &&
         box_engine_check_rule_count (self, sandbox, error);
}

static void
env_pushed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  BoxEngine *self = g_task_get_source_object (task);
  BoxEngineOp *op = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;

  /* The record holds the new env either way; the guest gets it at its
   * next wake at the latest. */
  if (!box_agent_client_set_env_finish (BOX_AGENT_CLIENT (source), result, &error))
    g_warning ("sandbox %s: the new env did not reach the guest now: %s", op->id, error->message);
  box_engine_op_finish_ok (self, task);
}

static void
push_env (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxAgentClient) agent = NULL;

  /* a hypervisor that runs no VM has no guest to tell */
  if (!box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_GUEST_AGENT)) {
    box_engine_op_finish_ok (self, task);
    return;
  }
  agent = box_hypervisor_get_agent (self->hypervisor, op->id, &error);
  if (agent == NULL) {
    g_warning ("sandbox %s: the new env did not reach the guest now: %s", op->id,
               error->message);
    box_engine_op_finish_ok (self, task);
    return;
  }
  op->guest_env = box_engine_guest_env (self, op->sandbox);
  box_agent_client_set_env_async (agent, op->guest_env, NULL, env_pushed, task);
}

/* A change the node refused is not kept (the broker gets the old secrets
 * back when it took the new ones); one that could not reach it is kept
 * for the next wake.  Either way the PATCH answers @apply_error. */
static void
finish_unapplied (BoxEngine *self, GTask *task, BoxSandbox *changed, gboolean secrets_pushed,
                  GError *apply_error)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  GError *error = NULL;

  if (!g_error_matches (apply_error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE)) {
    if (secrets_pushed && (op->sandbox->secrets == NULL || op->sandbox->secrets[0] == NULL)) {
      box_engine_drop_secrets (self, op->id);
    } else if (secrets_pushed && !box_engine_push_secrets (self, op->sandbox, &error)) {
      g_warning ("sandbox %s: the broker did not take its secrets back: %s", op->id,
                 error->message);
      g_clear_error (&error);
    }
    box_engine_op_finish_error (self, task, apply_error);
    return;
  }
  if (!box_engine_save_sandbox (self, changed, &error)) {
    g_error_free (apply_error);
    box_engine_op_finish_error (self, task, error);
    return;
  }
  box_engine_op_finish_error (self, task, apply_error);
}

void
box_engine_run_update (BoxEngine *self, GTask *task)
{
  BoxEngineOp *op = g_task_get_task_data (task);
  g_autoptr(BoxSandbox) changed = box_sandbox_copy (op->sandbox);
  gboolean network_changed = FALSE;
  gboolean awake;
  gboolean secrets_pushed = FALSE;
  gboolean had_secrets = op->sandbox->secrets != NULL && op->sandbox->secrets[0] != NULL;
  GError *error = NULL;

  if (!apply_update (self, changed, op->update, &network_changed, &error)) {
    box_engine_op_finish_error (self, task, error);
    return;
  }
  /* An awake sandbox gets new secrets and rules at once (an asleep one at
   * its wake). */
  awake = changed->state == BOX_SANDBOX_STATE_RUNNING;
  if (op->update->secrets != NULL && awake) {
    /* the broker may have taken them before the network refused */
    if (!box_engine_push_secrets_full (self, changed, &secrets_pushed, &error)) {
      finish_unapplied (self, task, changed, secrets_pushed, error);
      return;
    }
  }
  if (network_changed && self->network != NULL && awake) {
    g_autoptr(GPtrArray) rules = box_engine_sandbox_rules (self, changed);

    if (!box_network_set_egress (self->network, changed->id, rules, &error)) {
      finish_unapplied (self, task, changed, secrets_pushed, error);
      return;
    }
  }
  if (!box_engine_save_sandbox (self, changed, &error)) {
    box_engine_op_finish_error (self, task, error);
    return;
  }
  /* emptied: the broker forgets them whatever the state */
  if (had_secrets && (changed->secrets == NULL || changed->secrets[0] == NULL))
    box_engine_drop_secrets (self, changed->id);
  g_clear_pointer (&op->sandbox, box_sandbox_free);
  op->sandbox = g_steal_pointer (&changed);
  /* A new env (or new secrets: their placeholders) reaches processes
   * started after the change (and the whole sandbox at its next wake,
   * when the hypervisor hands it over again). */
  if ((op->update->env != NULL || op->update->secrets != NULL) &&
      op->sandbox->state == BOX_SANDBOX_STATE_RUNNING) {
    push_env (self, task);
    return;
  }
  box_engine_op_finish_ok (self, task);
}

static BoxSandboxUpdate *
update_copy (const BoxSandboxUpdate *update)
{
  BoxSandboxUpdate *copy = g_new0 (BoxSandboxUpdate, 1);
  guint i;

  *copy = *update;
  if (update->env != NULL) {
    copy->env = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
    box_engine_copy_map (copy->env, update->env);
  }
  if (update->labels != NULL) {
    copy->labels = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
    box_engine_copy_map (copy->labels, update->labels);
  }
  if (update->egress != NULL) {
    copy->egress = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
    for (i = 0; i < update->egress->len; i++)
      g_ptr_array_add (copy->egress, box_rule_copy (g_ptr_array_index (update->egress, i)));
  }
  copy->secrets = g_strdupv (update->secrets);
  return copy;
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
  GTask *task = box_engine_op_task_new (self, BOX_ENGINE_OP_UPDATE, project, box_engine_update_sandbox_async,
                             cancellable, callback, user_data);
  BoxEngineOp *op = g_task_get_task_data (task);

  op->update = update_copy (update);
  box_engine_op_start (self, task, id_or_name);
}

BoxSandbox *
box_engine_update_sandbox_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

