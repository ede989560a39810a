/* box-engine-projects.c: projects, their keys and secrets, and the
 * catalogue (templates and defaults).
 *
 * The object itself is box-engine.c; the sandboxes are
 * box-engine-sandboxes.c.
 */
#include "config.h"

#include <string.h>

#include "box-engine-ops-private.h"
#include "box-storage-records.h"
#include "box-requests.h"
#include "box-validate.h"

/* ---- projects and keys ------------------------------------------------- */

static gboolean
check_domains (BoxEngine *self, const char *project, const char *const *domains, GError **error)
{
  g_autoptr(GPtrArray) projects = NULL;
  guint i, j;

  for (i = 0; domains != NULL && domains[i] != NULL; i++) {
    if (!box_validate_project_domain (domains[i], error))
      return FALSE;
    /* its N.<domain> would be no sandbox URL (those are <name>--<project>) */
    if (g_strcmp0 (domains[i], self->config->sandbox_domain) == 0) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                   "invalid domains: %s is the sandbox domain", domains[i]);
      return FALSE;
    }
    for (j = 0; j < i; j++) {
      if (g_str_equal (domains[i], domains[j])) {
        g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "domain %s is listed twice", domains[i]);
        return FALSE;
      }
    }
  }
  projects = box_storage_project_list (self->storage, error);
  if (projects == NULL)
    return FALSE;
  for (i = 0; i < projects->len; i++) {
    BoxProject *other = g_ptr_array_index (projects, i);
    if (g_strcmp0 (other->name, project) == 0)
      continue;
    for (j = 0; domains != NULL && domains[j] != NULL; j++) {
      if (g_strv_contains ((const char *const *) other->domains, domains[j])) {
        g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                     "domain %s already belongs to another project", domains[j]);
        return FALSE;
      }
    }
  }
  return TRUE;
}

BoxProject *
box_engine_create_project (BoxEngine *self, const char *name, const char *const *domains,
                           GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_autoptr(BoxProject) project = NULL;
  const char *none[] = { NULL };

  if (!box_validate_project_name (name, error))
    return NULL;
  if (!check_domains (self, name, domains, error))
    return NULL;
  project = g_new0 (BoxProject, 1);
  project->name = g_strdup (name);
  project->domains = g_strdupv ((char **) (domains != NULL ? domains : none));
  project->created_at = box_engine_now (self);
  if (!box_storage_project_insert (self->storage, project, error))
    return NULL;
  box_engine_domains_set (self, name, (const char *const *) project->domains);
  g_message ("project %s created", name);
  return g_steal_pointer (&project);
}

GPtrArray *
box_engine_list_projects (BoxEngine *self, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return box_storage_project_list (self->storage, error);
}

/* The storage read of a project whose revision did not change reuses the
 * project parsed before (box-storage-records.c), so a change by any writer
 * of the store is seen at once. */
BoxProject *
box_engine_get_project (BoxEngine *self, const char *name, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);

  if (name == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no project");
    return NULL;
  }
  return box_storage_project_get (self->storage, name, error);
}

BoxProject *
box_engine_set_project_domains (BoxEngine *self, const char *name, const char *const *domains,
                                GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  const char *none[] = { NULL };

  /* read, change, write at the revision read; a lost race starts again */
  for (guint attempt = 1;; attempt++) {
    g_autoptr(BoxProject) project = box_storage_project_get (self->storage, name, error);
    g_autoptr(GError) local = NULL;

    if (project == NULL)
      return NULL;
    if (!check_domains (self, name, domains, error))
      return NULL;
    g_strfreev (project->domains);
    project->domains = g_strdupv ((char **) (domains != NULL ? domains : none));
    if (box_storage_project_update (self->storage, project, &local)) {
      box_engine_domains_set (self, name, (const char *const *) project->domains);
      return g_steal_pointer (&project);
    }
    if (attempt == BOX_ENGINE_STORAGE_TRIES ||
        !g_error_matches (local, BOX_ERROR, BOX_ERROR_CONFLICT)) {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  }
}

/* Deletes @project's keys through the auth plugin, so that one which
 * remembers the keys it accepted forgets them before they are gone (storage
 * would delete them with the project behind its back). */
static gboolean
revoke_project_keys (BoxEngine *self, const char *project, GError **error)
{
  g_autoptr(GPtrArray) keys = NULL;
  g_autoptr(GError) local_error = NULL;

  keys = box_auth_list_keys (self->auth, project, &local_error);
  if (keys == NULL) {
    /* an auth plugin without keys has none to revoke */
    if (g_error_matches (local_error, BOX_ERROR, BOX_ERROR_UNSUPPORTED))
      return TRUE;
    g_propagate_error (error, g_steal_pointer (&local_error));
    return FALSE;
  }
  for (guint i = 0; i < keys->len; i++) {
    const BoxKey *key = g_ptr_array_index (keys, i);
    if (!box_auth_delete_key (self->auth, project, key->id, error))
      return FALSE;
  }
  return TRUE;
}

static void
delete_project_sandboxes_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  g_autoptr(GTask) task = user_data;
  const char *name = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;

  if (!box_engine_destroy_project_sandboxes_finish (self, result, &error) ||
      !revoke_project_keys (self, name, &error) ||
      !box_storage_project_delete (self->storage, name, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  box_engine_domains_set (self, name, NULL);
  g_message ("project %s deleted", name);
  g_task_return_boolean (task, TRUE);
}

void
box_engine_delete_project_async (BoxEngine *self, const char *name, GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (name != NULL);
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(BoxProject) project = NULL;
  GError *error = NULL;

  g_task_set_source_tag (task, box_engine_delete_project_async);
  g_task_set_task_data (task, g_strdup (name), g_free);
  project = box_storage_project_get (self->storage, name, &error);
  if (project == NULL) {
    g_task_return_error (task, error);
    return;
  }
  box_engine_destroy_project_sandboxes_async (self, name, cancellable,
                                              delete_project_sandboxes_cb,
                                              g_steal_pointer (&task));
}

gboolean
box_engine_delete_project_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* Read-only keys: the auth plugin makes the key, the engine keeps a mark
 * (kind BOX_STORAGE_KIND_KEY_ACCESS, scope the project, id the key's ID)
 * and a set of the marked IDs in memory.  The secret is handed out only
 * once the mark is stored; a mark that cannot be stored takes the key
 * back.  (A crash between the two leaves a full key whose secret nobody
 * ever got.) */
static BoxKey *
create_read_only_key (BoxEngine *self, const char *project, const char *name, char **secret_out,
                      GError **error)
{
  g_autofree char *secret = NULL;
  g_autoptr(BoxKey) key = box_auth_create_key (self->auth, project, name, &secret, error);
  g_autoptr(BoxStorageRecord) mark = NULL;
  g_autoptr(GError) local_error = NULL;

  if (key == NULL)
    return NULL;
  mark = box_storage_record_new (BOX_STORAGE_KIND_KEY_ACCESS, project, key->id,
                                 "{\"read_only\":true}");
  if (!box_storage_insert (self->storage, mark, &local_error)) {
    g_autoptr(GError) undo_error = NULL;

    if (!box_auth_delete_key (self->auth, project, key->id, &undo_error))
      g_warning ("a read-only key without its mark could not be taken back: %s",
                 undo_error->message);
    g_propagate_error (error, box_error_convert (local_error, "storing a read-only key"));
    return NULL;
  }
  if (self->read_only_keys == NULL)
    self->read_only_keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_hash_table_add (self->read_only_keys, g_strdup (key->id));
  if (secret_out != NULL)
    *secret_out = g_steal_pointer (&secret);
  return g_steal_pointer (&key);
}

BoxKey *
box_engine_create_key (BoxEngine *self, const char *project, const char *name, gboolean read_only,
                       char **secret_out, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (project != NULL, NULL);
  g_autoptr(BoxProject) owner = box_storage_project_get (self->storage, project, error);

  if (owner == NULL)
    return NULL;
  if (!box_validate_key_name (name, error))
    return NULL;
  if (!read_only)
    return box_auth_create_key (self->auth, project, name, secret_out, error);
  return create_read_only_key (self, project, name, secret_out, error);
}

gboolean
box_engine_key_is_read_only (BoxEngine *self, const char *key_id)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), FALSE);
  return key_id != NULL && self->read_only_keys != NULL &&
         g_hash_table_contains (self->read_only_keys, key_id);
}

gboolean
box_engine_load_read_only_keys (BoxEngine *self, GError **error)
{
  g_autoptr(GPtrArray) marks = box_storage_list (self->storage, BOX_STORAGE_KIND_KEY_ACCESS, NULL,
                                                 BOX_STORAGE_BY_SCOPE, NULL,
                                                 BOX_STORAGE_ORDER_CREATED, error);

  if (marks == NULL)
    return FALSE;
  g_clear_pointer (&self->read_only_keys, g_hash_table_unref);
  self->read_only_keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; i < marks->len; i++)
    g_hash_table_add (self->read_only_keys,
                      g_strdup (((BoxStorageRecord *) g_ptr_array_index (marks, i))->id));
  return TRUE;
}

GPtrArray *
box_engine_list_keys (BoxEngine *self, const char *project, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (project != NULL, NULL);
  g_autoptr(BoxProject) owner = box_storage_project_get (self->storage, project, error);

  if (owner == NULL)
    return NULL;
  return box_auth_list_keys (self->auth, project, error);
}

gboolean
box_engine_delete_key (BoxEngine *self, const char *project, const char *key_id, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), FALSE);
  g_return_val_if_fail (project != NULL && key_id != NULL, FALSE);
  g_autoptr(BoxProject) owner = box_storage_project_get (self->storage, project, error);
  g_autoptr(GError) local_error = NULL;

  if (owner == NULL)
    return FALSE;
  if (!box_auth_delete_key (self->auth, project, key_id, error))
    return FALSE;
  /* the key is gone; a mark left behind would name no key */
  if (!box_storage_delete (self->storage, BOX_STORAGE_KIND_KEY_ACCESS, project, key_id, 0,
                           &local_error) &&
      !g_error_matches (local_error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
    g_warning ("the read-only mark of key %s stays: %s", key_id, local_error->message);
  if (self->read_only_keys != NULL)
    g_hash_table_remove (self->read_only_keys, key_id);
  return TRUE;
}

/* ---- secrets ----------------------------------------------------------- */

static gboolean
require_secret_key (BoxEngine *self, GError **error)
{
  if (self->secret_key != NULL)
    return TRUE;
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                       "this deployment has no secret key, so it cannot keep secrets");
  return FALSE;
}

gboolean
box_engine_check_secrets (BoxEngine *self, const char *project, const char *const *secrets,
                          GError **error)
{
  guint i;

  if (secrets == NULL || secrets[0] == NULL)
    return TRUE;
  if (!require_secret_key (self, error))
    return FALSE;
  /* the secret routes keep working without a broker (they are records),
   * but a sandbox would get placeholders that nothing replaces */
  if (self->broker == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "this node brokers no secrets: [boxd] broker=%s",
                 g_strcmp0 (self->config->broker, "auto") == 0
                 ? "auto found no broker plugin that starts" : "none");
    return FALSE;
  }
  for (i = 0; secrets[i] != NULL; i++) {
    g_autoptr(BoxSecret) secret = NULL;
    g_autoptr(GError) local_error = NULL;

    if (!box_validate_secret_name (secrets[i], error))
      return FALSE;
    secret = box_storage_secret_get (self->storage, project, secrets[i], &local_error);
    if (secret == NULL) {
      if (g_error_matches (local_error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
        g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid secrets: no secret named %s",
                     secrets[i]);
      else
        g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
  }
  return TRUE;
}

/* The project's restricted sandboxes (any rule) that use secret @name,
 * whatever their state: their rules hold its hosts on 443. */
static GPtrArray *
restricted_users (BoxEngine *self, const char *project, const char *name, GError **error)
{
  g_autoptr(GPtrArray) sandboxes = box_storage_sandbox_list (self->storage, project, error);
  GPtrArray *users;

  if (sandboxes == NULL)
    return NULL;
  users = g_ptr_array_new_with_free_func ((GDestroyNotify) box_sandbox_free);
  for (guint i = 0; i < sandboxes->len; i++) {
    BoxSandbox *sandbox = g_ptr_array_index (sandboxes, i);

    if (sandbox->egress->len > 0 && sandbox->secrets != NULL &&
        g_strv_contains ((const char *const *) sandbox->secrets, name))
      g_ptr_array_add (users, box_sandbox_copy (sandbox));
  }
  return users;
}

/* 400 as for a create or PATCH when @secret's hosts would take one of
 * @users over the 1000 rules. */
static gboolean
check_users_rule_count (BoxEngine *self, GPtrArray *users, const BoxSecret *secret,
                        GError **error)
{
  for (guint i = 0; i < users->len; i++) {
    const BoxSandbox *sandbox = g_ptr_array_index (users, i);
    g_autoptr(GError) local_error = NULL;

    if (!box_engine_check_rule_count_replacing (self, sandbox, secret, &local_error)) {
      g_set_error (error, local_error->domain, local_error->code, "%s (sandbox %s)",
                   local_error->message, sandbox->name);
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
strv_equal (char **a, char **b)
{
  if (a == NULL || b == NULL)
    return (a == NULL || a[0] == NULL) && (b == NULL || b[0] == NULL);
  return g_strv_equal ((const char *const *) a, (const char *const *) b);
}

/* The awake sandboxes using secret @name, and those waking past the
 * broker's push (box_engine_broker_needs()): the broker gets its stored
 * value, hosts and injection at once (asleep ones get them at their wake).
 * When @hosts_changed, each restricted one of @restricted gets its rules
 * again, now with the stored hosts: an awake sandbox at once, an asleep
 * one holds them until its wake, which hands them over again (so a wake
 * already under way cannot keep the old hosts).  Every sandbox is tried;
 * the first failure is kept. */
static gboolean
push_users (BoxEngine *self, const char *project, const char *name, GPtrArray *restricted,
            gboolean hosts_changed, GError **error)
{
  g_autoptr(GPtrArray) sandboxes = box_storage_sandbox_list (self->storage, project, error);
  GError *first = NULL;

  if (sandboxes == NULL)
    return FALSE;
  for (guint i = 0; self->broker != NULL && i < sandboxes->len; i++) {
    const BoxSandbox *sandbox = g_ptr_array_index (sandboxes, i);
    g_autoptr(GError) local_error = NULL;

    if (!box_engine_broker_needs (self, sandbox) || sandbox->secrets == NULL ||
        !g_strv_contains ((const char *const *) sandbox->secrets, name) ||
        box_engine_push_secrets (self, sandbox, &local_error))
      continue;
    g_warning ("sandbox %s: the changed secret %s did not reach the broker now: %s",
               sandbox->id, name, local_error->message);
    if (first == NULL)
      first = g_error_new (local_error->domain, local_error->code,
                           "sandbox %s could not take the secret now: %s", sandbox->name,
                           local_error->message);
  }
  for (guint i = 0; hosts_changed && self->network != NULL && i < restricted->len; i++) {
    const BoxSandbox *sandbox = g_ptr_array_index (restricted, i);
    g_autoptr(GPtrArray) rules = box_engine_sandbox_rules (self, sandbox);
    g_autoptr(GError) local_error = NULL;

    if (box_network_set_egress (self->network, sandbox->id, rules, &local_error))
      continue;
    g_warning ("sandbox %s: the rules with a changed secret's hosts did not reach the "
               "network now: %s", sandbox->id, local_error->message);
    if (first == NULL)
      first = g_error_new (local_error->domain, local_error->code,
                           "sandbox %s's network rules could not take the secret's hosts now: %s",
                           sandbox->name, local_error->message);
  }
  if (first != NULL) {
    g_propagate_error (error, first);
    return FALSE;
  }
  return TRUE;
}

/* A PUT whose change could not reach a sandbox: 503 sandbox_unavailable
 * keeps the stored secret (the sandbox's next wake applies it, as for a
 * PATCH); any other refusal puts the previous record back (none: the
 * secret goes again) and hands the users that back, then answers it. */
static void
put_unapplied (BoxEngine *self, const BoxSecret *existing, const char *project, const char *name,
               GPtrArray *restricted, GError **error)
{
  g_autoptr(GError) local_error = NULL;

  if (g_error_matches (*error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE)) {
    g_prefix_error (error, "the secret is stored, but it applies at the next wake: ");
    return;
  }
  if (existing != NULL ? !box_storage_secret_put (self->storage, (BoxSecret *) existing, &local_error)
                       : !box_storage_secret_delete (self->storage, project, name, &local_error))
    g_warning ("secret %s/%s: the refused PUT could not be undone: %s", project, name,
               local_error->message);
  else if (!push_users (self, project, name, restricted, TRUE, &local_error))
    g_warning ("secret %s/%s: the previous record did not reach every sandbox again: %s",
               project, name, local_error->message);
}

BoxSecret *
box_engine_put_secret (BoxEngine *self, const char *project, const char *name,
                       BoxSecretPut *request, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (project != NULL && name != NULL, NULL);
  g_return_val_if_fail (request != NULL && request->value != NULL, NULL);
  g_autoptr(BoxSecret) secret = NULL;
  g_autoptr(BoxSecret) existing = NULL;
  g_autoptr(GPtrArray) users = NULL;
  g_autofree char *associated = NULL;
  gint64 now = box_engine_now (self);

  if (!require_secret_key (self, error))
    return NULL;
  if (!box_validate_secret_name (name, error))
    return NULL;

  secret = g_new0 (BoxSecret, 1);
  secret->name = g_strdup (name);
  secret->project = g_strdup (project);
  secret->hosts = g_strdupv (request->hosts);
  secret->placeholder = box_secret_placeholder (name, request->placeholder_prefix);
  secret->inject_header = g_strdup (request->inject_header);
  secret->inject_format = g_strdup (request->inject_format);
  associated = g_strdup_printf ("%s/%s", project, name);
  secret->sealed_value = box_secret_key_seal (self->secret_key, associated, request->value,
                                              strlen (request->value), error);
  if (secret->sealed_value == NULL)
    return NULL;
  existing = box_storage_secret_get (self->storage, project, name, NULL);
  secret->created_at = existing != NULL ? existing->created_at : now;
  secret->updated_at = now;
  /* the hosts are part of its restricted users' rules, and count */
  users = restricted_users (self, project, name, error);
  if (users == NULL || !check_users_rule_count (self, users, secret, error))
    return NULL;
  if (!box_storage_secret_put (self->storage, secret, error))
    return NULL;
  /* the same hosts make the same rules: a new value alone changes none */
  if (!push_users (self, project, name, users,
                   existing == NULL || !strv_equal (existing->hosts, secret->hosts), error)) {
    put_unapplied (self, existing, project, name, users, error);
    return NULL;
  }
  return g_steal_pointer (&secret);
}

BoxSecret *
box_engine_get_secret (BoxEngine *self, const char *project, const char *name, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (project != NULL, NULL);
  if (!require_secret_key (self, error))
    return NULL;
  return box_storage_secret_get (self->storage, project, name, error);
}

GPtrArray *
box_engine_list_secrets (BoxEngine *self, const char *project, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (project != NULL, NULL);
  if (!require_secret_key (self, error))
    return NULL;
  return box_storage_secret_list (self->storage, project, error);
}

gboolean
box_engine_delete_secret (BoxEngine *self, const char *project, const char *name, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), FALSE);
  g_return_val_if_fail (project != NULL, FALSE);
  g_autoptr(BoxSecret) secret = NULL;
  g_autoptr(GPtrArray) sandboxes = NULL;
  guint i;

  if (!require_secret_key (self, error))
    return FALSE;
  secret = box_storage_secret_get (self->storage, project, name, error);
  if (secret == NULL)
    return FALSE;
  sandboxes = box_storage_sandbox_list (self->storage, project, error);
  if (sandboxes == NULL)
    return FALSE;
  for (i = 0; i < sandboxes->len; i++) {
    BoxSandbox *sandbox = g_ptr_array_index (sandboxes, i);
    if (g_strv_contains ((const char *const *) sandbox->secrets, name)) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT, "secret %s is used by sandbox %s",
                   name, sandbox->name);
      return FALSE;
    }
  }
  return box_storage_secret_delete (self->storage, project, name, error);
}

/* ---- catalogue --------------------------------------------------------- */

GPtrArray *
box_engine_list_templates (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return box_hypervisor_list_templates (self->hypervisor);
}

GPtrArray *
box_engine_get_network_defaults (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->network_defaults;
}

guint
box_engine_count_defaults (BoxEngine *self)
{
  return self->network_defaults != NULL ? self->network_defaults->len : 0;
}
