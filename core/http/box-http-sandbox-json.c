/* box-http-sandbox-json.c: see box-http-sandbox-json.h.  Members in the
 * specification's order, as box-records.c writes them. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "box-http-sandbox-json.h"
#include "box-json-writer.h"

static int
compare_strings (const void *a, const void *b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* {"k":"v",...}, keys sorted */
static void
write_string_map (GString *out, const char *name, GHashTable *map)
{
  g_autofree gpointer *keys = NULL;
  guint n_keys = 0;

  box_json_key (out, name);
  box_json_begin_object (out);
  if (map != NULL) {
    keys = g_hash_table_get_keys_as_array (map, &n_keys);
    qsort (keys, n_keys, sizeof (gpointer), compare_strings);
    for (guint i = 0; i < n_keys; i++)
      box_json_member_string (out, keys[i], g_hash_table_lookup (map, keys[i]));
  }
  box_json_end_object (out);
}

static void
write_time (GString *out, const char *name, gint64 usec)
{
  g_autofree char *str = box_time_format (usec);

  box_json_member_string (out, name, str);
}

/* An egress rule in its API form: allow rules always show their ports. */
static void
write_rule (GString *out, const BoxRule *rule)
{
  box_json_begin_object (out);
  if (rule->include != NULL) {
    box_json_member_string (out, "include", rule->include);
  } else {
    box_json_member_string (out, "domain", rule->domain != NULL ? rule->domain : "");
    box_json_member_string (out, "action", rule->allow ? "allow" : "deny");
    if (rule->allow) {
      box_json_key (out, "ports");
      box_json_begin_array (out);
      if (rule->n_ports == 0) {
        box_json_int (out, 80);
        box_json_int (out, 443);
      }
      for (guint i = 0; i < rule->n_ports && rule->ports != NULL; i++)
        box_json_int (out, rule->ports[i]);
      box_json_end_array (out);
    }
  }
  box_json_end_object (out);
}

void
box_http_sandbox_json_write (GString *out, const BoxSandbox *sandbox,
                             const char *sandbox_domain, const char *const *project_domains)
{
  const char *name = sandbox->name != NULL ? sandbox->name : "";
  g_autofree char *url = box_sandbox_url (sandbox, sandbox_domain);

  box_json_begin_object (out);
  box_json_member_string (out, "id", sandbox->id != NULL ? sandbox->id : "");
  box_json_member_string (out, "name", name);
  box_json_member_string (out, "project", sandbox->project != NULL ? sandbox->project : "");
  box_json_member_string (out, "template",
                          sandbox->template_name != NULL ? sandbox->template_name : "");
  box_json_member_string (out, "image", sandbox->image != NULL ? sandbox->image : "");
  box_json_member_string (out, "state", box_sandbox_state_to_string (sandbox->state));
  box_json_key (out, "resources");
  box_json_begin_object (out);
  box_json_member_int (out, "cpus", sandbox->resources.cpus);
  box_json_member_int (out, "memory_mib", sandbox->resources.memory_mib);
  box_json_member_int (out, "disk_gib", sandbox->resources.disk_gib);
  box_json_end_object (out);
  write_string_map (out, "env", sandbox->env);
  write_string_map (out, "labels", sandbox->labels);
  box_json_key (out, "idle");
  box_json_begin_object (out);
  box_json_member_int (out, "timeout_s", sandbox->idle_timeout_s);
  box_json_member_string (out, "action", box_idle_action_to_string (sandbox->idle_action));
  box_json_end_object (out);
  box_json_key (out, "deadline");
  if (sandbox->has_deadline) {
    box_json_begin_object (out);
    write_time (out, "at", sandbox->deadline_at);
    box_json_member_string (out, "action",
                            box_deadline_action_to_string (sandbox->deadline_action));
    box_json_end_object (out);
  } else {
    box_json_null (out);
  }
  box_json_member_bool (out, "protected", sandbox->protected_);
  box_json_member_int (out, "http_port", sandbox->http_port);
  box_json_key (out, "network");
  box_json_begin_object (out);
  box_json_key (out, "egress");
  box_json_begin_array (out);
  for (guint i = 0; sandbox->egress != NULL && i < sandbox->egress->len; i++)
    write_rule (out, g_ptr_array_index (sandbox->egress, i));
  box_json_end_array (out);
  box_json_end_object (out);
  box_json_key (out, "secrets");
  box_json_begin_array (out);
  for (guint i = 0; sandbox->secrets != NULL && sandbox->secrets[i] != NULL; i++)
    box_json_string (out, sandbox->secrets[i]);
  box_json_end_array (out);
  box_json_member_string (out, "url", url);
  box_json_key (out, "urls");
  box_json_begin_array (out);
  for (guint i = 0; project_domains != NULL && project_domains[i] != NULL; i++) {
    g_autofree char *u = NULL;

    /* a stored domain that is the sandbox domain is no own domain
     * (box-engine-domains.c): its N.<domain> is 404 */
    if (sandbox_domain != NULL && g_ascii_strcasecmp (project_domains[i], sandbox_domain) == 0)
      continue;
    u = g_strdup_printf ("https://%s.%s", name, project_domains[i]);
    box_json_string (out, u);
  }
  box_json_end_array (out);
  write_time (out, "created_at", sandbox->created_at);
  write_time (out, "updated_at", sandbox->updated_at);
  write_time (out, "last_active_at", sandbox->last_active_at);
  box_json_end_object (out);
}
