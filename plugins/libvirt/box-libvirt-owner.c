/* box-libvirt-owner.c: which boxd a domain belongs to, and orphans.
 *
 * Every domain carries libvirt metadata naming its role (pool, build or
 * sandbox), the state directory of the boxd that made it, its vm_dir and,
 * for a sandbox, the sandbox ID.  A boxd keeps a record in that state
 * directory for as long as the domain is its own: <state>/pool/<vm id> for
 * pool and build domains (box-libvirt-template.c), <state>/<sandbox>.json
 * for sandboxes.  A domain whose records are gone can never be adopted (its
 * boxd was killed and its data directory removed, as tests do), so any
 * boxd that starts ends it and removes its files.  The order of writes at a
 * create keeps a domain always covered by one record: the role becomes
 * sandbox before the state file is written, the pool record goes after.
 */
#include "config.h"

#include <libvirt/virterror.h>
#include <stdlib.h>
#include <string.h>

#include "box-libvirt-private.h"

#define BOX_LIBVIRT_METADATA_NS  "urn:box:libvirt:1"
#define BOX_LIBVIRT_METADATA_KEY "box"

char *
box_libvirt_owner_xml (const BoxLibvirtOwner *owner, gboolean with_namespace)
{
  const char *sandbox = owner->sandbox != NULL ? owner->sandbox : "";

  if (with_namespace)
    return g_markup_printf_escaped ("<" BOX_LIBVIRT_METADATA_KEY ":vm xmlns:"
                                    BOX_LIBVIRT_METADATA_KEY "='" BOX_LIBVIRT_METADATA_NS "' "
                                    "role='%s' state-dir='%s' vm-dir='%s' sandbox='%s'/>",
                                    owner->role, owner->state_dir, owner->vm_dir, sandbox);
  return g_markup_printf_escaped ("<vm role='%s' state-dir='%s' vm-dir='%s' sandbox='%s'/>",
                                  owner->role, owner->state_dir, owner->vm_dir, sandbox);
}

gboolean
box_libvirt_domain_set_owner (virDomainPtr dom, const BoxLibvirtOwner *owner, GError **error)
{
  g_autofree char *xml = NULL;

  if (owner->state_dir == NULL)
    return TRUE;
  xml = box_libvirt_owner_xml (owner, FALSE);
  if (virDomainSetMetadata (dom, VIR_DOMAIN_METADATA_ELEMENT, xml, BOX_LIBVIRT_METADATA_KEY,
                            BOX_LIBVIRT_METADATA_NS, VIR_DOMAIN_AFFECT_LIVE) < 0)
    return box_libvirt_set_error (error, "cannot record the VM's owner");
  return TRUE;
}

typedef struct {
  char *role;
  char *state_dir;
  char *vm_dir;
  char *sandbox;
} Parsed;

static void
parsed_clear (Parsed *parsed)
{
  g_free (parsed->role);
  g_free (parsed->state_dir);
  g_free (parsed->vm_dir);
  g_free (parsed->sandbox);
}

static void
owner_start_element (GMarkupParseContext *context, const char *element_name,
                     const char **names, const char **values, gpointer user_data,
                     GError **error)
{
  Parsed *parsed = user_data;

  if (!g_str_equal (element_name, "vm") &&
      !g_str_equal (element_name, BOX_LIBVIRT_METADATA_KEY ":vm"))
    return;
  for (guint i = 0; names[i] != NULL; i++) {
    char **field = NULL;

    if (g_str_equal (names[i], "role"))
      field = &parsed->role;
    else if (g_str_equal (names[i], "state-dir"))
      field = &parsed->state_dir;
    else if (g_str_equal (names[i], "vm-dir"))
      field = &parsed->vm_dir;
    else if (g_str_equal (names[i], "sandbox"))
      field = &parsed->sandbox;
    if (field != NULL) {
      g_free (*field);
      *field = g_strdup (values[i]);
    }
  }
}

/* TRUE when a record of its boxd still covers the domain. */
static gboolean
owned (const Parsed *parsed, const char *vm_id)
{
  g_autofree char *record = NULL;

  if (parsed->state_dir == NULL || parsed->state_dir[0] == '\0' ||
      !g_path_is_absolute (parsed->state_dir))
    return TRUE;   /* not ours to judge */
  record = g_build_filename (parsed->state_dir, "pool", vm_id, NULL);
  if (g_file_test (record, G_FILE_TEST_EXISTS))
    return TRUE;
  if (g_strcmp0 (parsed->role, "sandbox") == 0 && box_sandbox_id_is_valid (parsed->sandbox)) {
    g_autofree char *name = g_strconcat (parsed->sandbox, ".json", NULL);
    g_autofree char *state = g_build_filename (parsed->state_dir, name, NULL);
    return g_file_test (state, G_FILE_TEST_EXISTS);
  }
  return FALSE;
}

guint
box_libvirt_sweep_orphans (virConnectPtr conn)
{
  virDomainPtr *domains = NULL;
  int n = virConnectListAllDomains (conn, &domains, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
  guint removed = 0;

  if (n < 0) {
    virResetLastError ();
    return 0;
  }
  for (int i = 0; i < n; i++) {
    const char *name = virDomainGetName (domains[i]);
    const char *vm_id = name + strlen (BOX_LIBVIRT_NAME_PREFIX);
    g_autofree char *xml = NULL;
    GMarkupParser parser = { owner_start_element, NULL, NULL, NULL, NULL };
    g_autoptr(GMarkupParseContext) context = NULL;
    Parsed parsed = { NULL, };

    if (!g_str_has_prefix (name, BOX_LIBVIRT_NAME_PREFIX) || !box_sandbox_id_is_valid (vm_id)) {
      virDomainFree (domains[i]);
      continue;
    }
    xml = virDomainGetMetadata (domains[i], VIR_DOMAIN_METADATA_ELEMENT,
                                BOX_LIBVIRT_METADATA_NS, 0);
    if (xml == NULL) {
      virResetLastError ();   /* made by something else */
      virDomainFree (domains[i]);
      continue;
    }
    context = g_markup_parse_context_new (&parser, 0, &parsed, NULL);
    if (g_markup_parse_context_parse (context, xml, -1, NULL) && !owned (&parsed, vm_id)) {
      g_autofree char *dir = NULL;

      g_message ("libvirt: ending %s, a %s VM whose boxd (%s) is gone", name,
                 parsed.role != NULL ? parsed.role : "?", parsed.state_dir);
      box_libvirt_domain_destroy (conn, name, NULL);
      if (parsed.vm_dir != NULL && g_path_is_absolute (parsed.vm_dir)) {
        dir = box_libvirt_vm_path (parsed.vm_dir, vm_id, NULL);
        box_libvirt_remove_tree (dir, NULL);
      }
      removed++;
    }
    parsed_clear (&parsed);
    virDomainFree (domains[i]);
  }
  free (domains);
  return removed;
}
