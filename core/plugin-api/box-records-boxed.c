/* box-records-boxed.c: the records' lifetimes (new, copy, free) and their
 * boxed GTypes, so that introspection and GValues can carry them. */
#include "config.h"

#include <string.h>
#include <gnutls/gnutls.h>

#include "box-records.h"
#include "box-records-private.h"

/* ---- Copy helpers ------------------------------------------------------ */

GHashTable *
box_records_string_map_copy (GHashTable *map)
{
  GHashTable *copy = box_records_string_map_new ();
  GHashTableIter iter;
  gpointer key, value;

  if (map == NULL)
    return copy;
  g_hash_table_iter_init (&iter, map);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_hash_table_insert (copy, g_strdup (key), g_strdup (value));
  return copy;
}

static GPtrArray *
rules_copy (GPtrArray *rules)
{
  GPtrArray *copy = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  guint i;

  if (rules == NULL)
    return copy;
  for (i = 0; i < rules->len; i++)
    g_ptr_array_add (copy, box_rule_copy (g_ptr_array_index (rules, i)));
  return copy;
}

static char **
strv_copy_or_empty (char **strv)
{
  if (strv == NULL)
    return g_new0 (char *, 1);
  return g_strdupv (strv);
}

/* ---- Lifetime ---------------------------------------------------------- */

void
box_project_free (BoxProject *project)
{
  if (project == NULL)
    return;
  g_free (project->name);
  g_strfreev (project->domains);
  g_free (project);
}

BoxProject *
box_project_copy (const BoxProject *project)
{
  BoxProject *copy;

  if (project == NULL)
    return NULL;
  copy = g_new0 (BoxProject, 1);
  copy->name = g_strdup (project->name);
  copy->domains = strv_copy_or_empty (project->domains);
  copy->created_at = project->created_at;
  copy->revision = project->revision;
  return copy;
}

void
box_key_free (BoxKey *key)
{
  if (key == NULL)
    return;
  g_free (key->id);
  g_free (key->name);
  g_free (key->project);
  g_free (key->hash);
  g_free (key);
}

BoxKey *
box_key_copy (const BoxKey *key)
{
  BoxKey *copy;

  if (key == NULL)
    return NULL;
  copy = g_new0 (BoxKey, 1);
  copy->id = g_strdup (key->id);
  copy->name = g_strdup (key->name);
  copy->project = g_strdup (key->project);
  copy->hash = g_strdup (key->hash);
  copy->created_at = key->created_at;
  copy->revision = key->revision;
  return copy;
}

void
box_principal_free (BoxPrincipal *principal)
{
  if (principal == NULL)
    return;
  g_free (principal->project);
  box_key_free (principal->key);
  g_free (principal->sandbox_id);
  g_free (principal);
}

void
box_rule_free (BoxRule *rule)
{
  if (rule == NULL)
    return;
  g_free (rule->domain);
  g_free (rule->ports);
  g_free (rule->include);
  g_free (rule);
}

BoxRule *
box_rule_copy (const BoxRule *rule)
{
  BoxRule *copy;

  if (rule == NULL)
    return NULL;
  copy = g_new0 (BoxRule, 1);
  copy->domain = g_strdup (rule->domain);
  copy->allow = rule->allow;
  if (rule->ports != NULL && rule->n_ports > 0) {
    copy->ports = g_memdup2 (rule->ports, sizeof (guint16) * rule->n_ports);
    copy->n_ports = rule->n_ports;
  }
  copy->include = g_strdup (rule->include);
  return copy;
}

BoxSandbox *
box_sandbox_new (void)
{
  BoxSandbox *sandbox = g_new0 (BoxSandbox, 1);

  sandbox->template_name = g_strdup ("");
  sandbox->image = g_strdup ("");
  sandbox->state = BOX_SANDBOX_STATE_CREATING;
  sandbox->env = box_records_string_map_new ();
  sandbox->labels = box_records_string_map_new ();
  sandbox->idle_timeout_s = 300;
  sandbox->idle_action = BOX_IDLE_ACTION_PAUSE;
  sandbox->http_port = 8080;
  sandbox->egress = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  sandbox->secrets = g_new0 (char *, 1);
  sandbox->next_checkpoint = 1;
  sandbox->next_auto_checkpoint = 1;
  sandbox->port_access = box_records_string_map_new ();
  return sandbox;
}

void
box_sandbox_free (BoxSandbox *sandbox)
{
  if (sandbox == NULL)
    return;
  g_free (sandbox->id);
  g_free (sandbox->name);
  g_free (sandbox->project);
  g_free (sandbox->template_name);
  g_free (sandbox->image);
  g_clear_pointer (&sandbox->env, g_hash_table_unref);
  g_clear_pointer (&sandbox->labels, g_hash_table_unref);
  g_clear_pointer (&sandbox->egress, g_ptr_array_unref);
  g_strfreev (sandbox->secrets);
  g_free (sandbox->node);
  g_free (sandbox->fork_source);
  g_clear_pointer (&sandbox->port_access, g_hash_table_unref);
  g_free (sandbox);
}

BoxSandbox *
box_sandbox_copy (const BoxSandbox *sandbox)
{
  BoxSandbox *copy;

  if (sandbox == NULL)
    return NULL;
  copy = g_new0 (BoxSandbox, 1);
  *copy = *sandbox;
  copy->id = g_strdup (sandbox->id);
  copy->name = g_strdup (sandbox->name);
  copy->project = g_strdup (sandbox->project);
  copy->template_name = g_strdup (sandbox->template_name != NULL ? sandbox->template_name : "");
  copy->image = g_strdup (sandbox->image != NULL ? sandbox->image : "");
  copy->env = box_records_string_map_copy (sandbox->env);
  copy->labels = box_records_string_map_copy (sandbox->labels);
  copy->egress = rules_copy (sandbox->egress);
  copy->secrets = strv_copy_or_empty (sandbox->secrets);
  copy->node = g_strdup (sandbox->node);
  copy->fork_source = g_strdup (sandbox->fork_source);
  copy->port_access = box_records_string_map_copy (sandbox->port_access);   /* NULL: empty */
  return copy;
}

void
box_checkpoint_free (BoxCheckpoint *checkpoint)
{
  if (checkpoint == NULL)
    return;
  g_free (checkpoint->id);
  g_free (checkpoint->sandbox);
  g_free (checkpoint->project);
  g_free (checkpoint->comment);
  g_free (checkpoint);
}

BoxCheckpoint *
box_checkpoint_copy (const BoxCheckpoint *checkpoint)
{
  BoxCheckpoint *copy;

  if (checkpoint == NULL)
    return NULL;
  copy = g_new0 (BoxCheckpoint, 1);
  *copy = *checkpoint;
  copy->id = g_strdup (checkpoint->id);
  copy->sandbox = g_strdup (checkpoint->sandbox);
  copy->project = g_strdup (checkpoint->project);
  copy->comment = g_strdup (checkpoint->comment);
  return copy;
}

void
box_secret_free (BoxSecret *secret)
{
  if (secret == NULL)
    return;
  g_free (secret->name);
  g_free (secret->project);
  g_strfreev (secret->hosts);
  g_free (secret->placeholder);
  g_free (secret->inject_header);
  g_free (secret->inject_format);
  g_clear_pointer (&secret->sealed_value, g_bytes_unref);
  g_free (secret);
}

BoxSecret *
box_secret_copy (const BoxSecret *secret)
{
  BoxSecret *copy;

  if (secret == NULL)
    return NULL;
  copy = g_new0 (BoxSecret, 1);
  *copy = *secret;
  copy->name = g_strdup (secret->name);
  copy->project = g_strdup (secret->project);
  copy->hosts = strv_copy_or_empty (secret->hosts);
  copy->placeholder = g_strdup (secret->placeholder);
  copy->inject_header = g_strdup (secret->inject_header);
  copy->inject_format = g_strdup (secret->inject_format);
  /* GBytes is immutable: a reference is as good as a copy */
  copy->sealed_value = secret->sealed_value != NULL ? g_bytes_ref (secret->sealed_value) : NULL;
  return copy;
}

void
box_template_free (BoxTemplate *tmpl)
{
  if (tmpl == NULL)
    return;
  g_free (tmpl->name);
  g_free (tmpl->image);
  g_free (tmpl);
}

BoxTemplate *
box_template_copy (const BoxTemplate *tmpl)
{
  BoxTemplate *copy;

  if (tmpl == NULL)
    return NULL;
  copy = g_new0 (BoxTemplate, 1);
  copy->name = g_strdup (tmpl->name);
  copy->image = g_strdup (tmpl->image != NULL ? tmpl->image : "");
  copy->resources = tmpl->resources;
  return copy;
}

/* @detail is copied: the caller keeps its own reference. */
BoxEvent *
box_event_new (const char *type, const char *project, const char *sandbox, JsonObject *detail)
{
  BoxEvent *event = g_new0 (BoxEvent, 1);

  event->type = g_strdup (type);
  event->project = g_strdup (project);
  event->sandbox = g_strdup (sandbox);
  event->at = g_get_real_time ();
  event->detail = detail != NULL ? box_records_json_object_deep_copy (detail) : NULL;
  return event;
}

void
box_event_free (BoxEvent *event)
{
  if (event == NULL)
    return;
  g_free (event->type);
  g_free (event->project);
  g_free (event->sandbox);
  g_clear_pointer (&event->detail, json_object_unref);
  g_free (event);
}

BoxEvent *
box_event_copy (const BoxEvent *event)
{
  BoxEvent *copy;

  if (event == NULL)
    return NULL;
  copy = g_new0 (BoxEvent, 1);
  copy->type = g_strdup (event->type);
  copy->project = g_strdup (event->project);
  copy->sandbox = g_strdup (event->sandbox);
  copy->at = event->at;
  copy->detail = event->detail != NULL ? box_records_json_object_deep_copy (event->detail) : NULL;
  return copy;
}

void
box_sandbox_create_free (BoxSandboxCreate *req)
{
  if (req == NULL)
    return;
  g_free (req->name);
  g_free (req->template_name);
  g_free (req->image);
  g_clear_pointer (&req->env, g_hash_table_unref);
  g_clear_pointer (&req->labels, g_hash_table_unref);
  g_clear_pointer (&req->egress, g_ptr_array_unref);
  g_strfreev (req->secrets);
  g_free (req->from_sandbox);
  g_free (req->from_checkpoint);
  g_free (req);
}

void
box_sandbox_update_free (BoxSandboxUpdate *req)
{
  if (req == NULL)
    return;
  g_clear_pointer (&req->env, g_hash_table_unref);
  g_clear_pointer (&req->labels, g_hash_table_unref);
  g_clear_pointer (&req->egress, g_ptr_array_unref);
  g_strfreev (req->secrets);
  g_free (req);
}

void
box_secret_put_free (BoxSecretPut *req)
{
  if (req == NULL)
    return;
  if (req->value != NULL) {
    /* gnutls_memset() is not optimised away like a memset() before free() */
    gnutls_memset (req->value, 0, strlen (req->value));
    g_free (req->value);
  }
  g_strfreev (req->hosts);
  g_free (req->inject_header);
  g_free (req->inject_format);
  g_free (req->placeholder_prefix);
  g_free (req);
}

/* ---- Copies of the principal, resources and requests -------------------- */

BoxPrincipal *
box_principal_copy (const BoxPrincipal *principal)
{
  BoxPrincipal *copy;

  if (principal == NULL)
    return NULL;
  copy = g_new0 (BoxPrincipal, 1);
  copy->kind = principal->kind;
  copy->project = g_strdup (principal->project);
  copy->key = box_key_copy (principal->key);
  copy->sandbox_id = g_strdup (principal->sandbox_id);
  return copy;
}

BoxResources *
box_resources_copy (const BoxResources *resources)
{
  if (resources == NULL)
    return NULL;
  return g_memdup2 (resources, sizeof *resources);
}

void
box_resources_free (BoxResources *resources)
{
  g_free (resources);
}

/* The requests keep NULL for an absent field, so their copies do too. */
static GHashTable *
string_map_copy_or_null (GHashTable *map)
{
  return map != NULL ? box_records_string_map_copy (map) : NULL;
}

static GPtrArray *
rules_copy_or_null (GPtrArray *rules)
{
  return rules != NULL ? rules_copy (rules) : NULL;
}

BoxSandboxCreate *
box_sandbox_create_copy (const BoxSandboxCreate *req)
{
  BoxSandboxCreate *copy;

  if (req == NULL)
    return NULL;
  copy = g_memdup2 (req, sizeof *req);
  copy->name = g_strdup (req->name);
  copy->template_name = g_strdup (req->template_name);
  copy->image = g_strdup (req->image);
  copy->env = string_map_copy_or_null (req->env);
  copy->labels = string_map_copy_or_null (req->labels);
  copy->egress = rules_copy_or_null (req->egress);
  copy->secrets = g_strdupv (req->secrets);
  copy->from_sandbox = g_strdup (req->from_sandbox);
  copy->from_checkpoint = g_strdup (req->from_checkpoint);
  return copy;
}

BoxSandboxUpdate *
box_sandbox_update_copy (const BoxSandboxUpdate *req)
{
  BoxSandboxUpdate *copy;

  if (req == NULL)
    return NULL;
  copy = g_memdup2 (req, sizeof *req);
  copy->env = string_map_copy_or_null (req->env);
  copy->labels = string_map_copy_or_null (req->labels);
  copy->egress = rules_copy_or_null (req->egress);
  copy->secrets = g_strdupv (req->secrets);
  return copy;
}

BoxSecretPut *
box_secret_put_copy (const BoxSecretPut *req)
{
  BoxSecretPut *copy;

  if (req == NULL)
    return NULL;
  copy = g_new0 (BoxSecretPut, 1);
  copy->value = g_strdup (req->value);
  copy->hosts = g_strdupv (req->hosts);
  copy->inject_header = g_strdup (req->inject_header);
  copy->inject_format = g_strdup (req->inject_format);
  copy->placeholder_prefix = g_strdup (req->placeholder_prefix);
  return copy;
}

/* ---- Boxed types ------------------------------------------------------- */

G_DEFINE_BOXED_TYPE (BoxProject, box_project, box_project_copy, box_project_free)
G_DEFINE_BOXED_TYPE (BoxKey, box_key, box_key_copy, box_key_free)
G_DEFINE_BOXED_TYPE (BoxPrincipal, box_principal, box_principal_copy, box_principal_free)
G_DEFINE_BOXED_TYPE (BoxRule, box_rule, box_rule_copy, box_rule_free)
G_DEFINE_BOXED_TYPE (BoxResources, box_resources, box_resources_copy, box_resources_free)
G_DEFINE_BOXED_TYPE (BoxSandbox, box_sandbox, box_sandbox_copy, box_sandbox_free)
G_DEFINE_BOXED_TYPE (BoxCheckpoint, box_checkpoint, box_checkpoint_copy, box_checkpoint_free)
G_DEFINE_BOXED_TYPE (BoxSecret, box_secret, box_secret_copy, box_secret_free)
G_DEFINE_BOXED_TYPE (BoxTemplate, box_template, box_template_copy, box_template_free)
G_DEFINE_BOXED_TYPE (BoxEvent, box_event, box_event_copy, box_event_free)
G_DEFINE_BOXED_TYPE (BoxSandboxCreate, box_sandbox_create, box_sandbox_create_copy,
                     box_sandbox_create_free)
G_DEFINE_BOXED_TYPE (BoxSandboxUpdate, box_sandbox_update, box_sandbox_update_copy,
                     box_sandbox_update_free)
G_DEFINE_BOXED_TYPE (BoxSecretPut, box_secret_put, box_secret_put_copy, box_secret_put_free)
