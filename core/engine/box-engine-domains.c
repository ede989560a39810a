/* box-engine-domains.c: which project an own domain belongs to, kept in
 * memory so that the edge never reads storage to route a host.
 *
 * self->domains maps each own domain to its project's name.  It is built
 * from the projects in storage at start and changed where domains change:
 * box_engine_create_project(), box_engine_set_project_domains() and the
 * end of a project's deletion (box-engine-projects.c).  Domains are
 * unique across projects (check_domains() there), so a domain has at most
 * one owner.  A stored domain that is the sandbox domain is left out at
 * load (logged). */
#include "config.h"

#include <string.h>

#include "box-engine-private.h"
#include "box-storage-records.h"

static GHashTable *
domains_table (BoxEngine *self)
{
  if (self->domains == NULL)
    self->domains = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  return self->domains;
}

static gboolean
owned_by (gpointer key, gpointer value, gpointer user_data)
{
  return g_str_equal (value, user_data);
}

void
box_engine_domains_set (BoxEngine *self, const char *project, const char *const *domains)
{
  GHashTable *table = domains_table (self);

  BOX_ENGINE_ASSERT_OWNER (self);
  g_hash_table_foreach_remove (table, owned_by, (gpointer) project);
  for (guint i = 0; domains != NULL && domains[i] != NULL; i++)
    g_hash_table_insert (table, g_ascii_strdown (domains[i], -1), g_strdup (project));
}

gboolean
box_engine_domains_load (BoxEngine *self, GError **error)
{
  g_autoptr(GPtrArray) projects = box_storage_project_list (self->storage, error);

  if (projects == NULL)
    return FALSE;
  g_clear_pointer (&self->domains, g_hash_table_unref);
  for (guint i = 0; i < projects->len; i++) {
    const BoxProject *project = g_ptr_array_index (projects, i);
    g_autoptr(GPtrArray) kept = g_ptr_array_new ();

    /* a domain stored before check_domains() refused the sandbox domain,
     * or one that became the sandbox domain since: no own domain (its
     * N.<domain> hosts stay 404, its <name>--<project> hosts the sandbox
     * domain's) */
    for (guint j = 0; project->domains != NULL && project->domains[j] != NULL; j++) {
      if (g_ascii_strcasecmp (project->domains[j], self->config->sandbox_domain) == 0)
        g_warning ("project %s: its domain %s is the sandbox domain: left out of the own "
                   "domains", project->name, project->domains[j]);
      else
        g_ptr_array_add (kept, project->domains[j]);
    }
    g_ptr_array_add (kept, NULL);
    box_engine_domains_set (self, project->name, (const char *const *) kept->pdata);
  }
  return TRUE;
}

char *
box_engine_project_for_host (BoxEngine *self, const char *host, char **prefix)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (host != NULL && prefix != NULL, NULL);

  *prefix = NULL;
  if (self->domains == NULL)
    return NULL;
  BOX_ENGINE_ASSERT_OWNER (self);
  /* the host itself, then each name above it: the first hit is the longest */
  for (const char *p = host; p != NULL; p = strchr (p, '.') != NULL ? strchr (p, '.') + 1 : NULL) {
    const char *project = g_hash_table_lookup (self->domains, p);

    if (project != NULL) {
      *prefix = g_strndup (host, p == host ? 0 : (gsize) (p - host - 1));
      return g_strdup (project);
    }
  }
  return NULL;
}
