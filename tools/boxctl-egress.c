/* boxctl-egress.c: `boxctl egress SANDBOX`.
 *
 * Two calls: GetSandboxEgress (the rules with {include: defaults}
 * expanded, each marked with where it came from) and ListSandboxAllowed
 * (the addresses a restricted sandbox resolved and may reach on ports
 * other than 80 and 443, with the seconds their TTL has left).  Both are
 * asked before anything is printed, so --json prints one document: the
 * answer, or the error. */
#include "config.h"

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>

#include "boxctl-egress.h"
#include "box-table.h"

/* 59 s, 4m05s, 2h07m; "never" for an element without a timeout */
static char *
format_left (guint32 seconds)
{
  if (seconds == G_MAXUINT32)
    return g_strdup (_("never"));
  if (seconds < 60)
    return g_strdup_printf ("%us", seconds);
  if (seconds < 3600)
    return g_strdup_printf ("%um%02us", seconds / 60, seconds % 60);
  return g_strdup_printf ("%uh%02um", seconds / 3600, (seconds % 3600) / 60);
}

static char *
rule_ports (GVariant *rule)
{
  g_autoptr(GVariant) ports = g_variant_lookup_value (rule, "ports", G_VARIANT_TYPE ("aq"));
  g_autoptr(GString) text = g_string_new (NULL);
  const char *action = NULL;
  const guint16 *values;
  gsize n = 0;

  if (g_variant_lookup (rule, "action", "&s", &action) && g_strcmp0 (action, "deny") == 0)
    return g_strdup (_("all"));
  values = ports != NULL ? g_variant_get_fixed_array (ports, &n, sizeof (guint16)) : NULL;
  for (gsize i = 0; i < n; i++)
    g_string_append_printf (text, "%s%u", i > 0 ? "," : "", values[i]);
  return g_string_free (g_steal_pointer (&text), FALSE);
}

static char *
rule_origin (GVariant *rule)
{
  const char *source = "";
  guint32 index = 0;

  g_variant_lookup (rule, "source", "&s", &source);
  g_variant_lookup (rule, "index", "u", &index);
  if (g_strcmp0 (source, "defaults") == 0)
    /* TRANSLATORS: where a rule came from: the defaults the sandbox's Nth rule includes */
    return g_strdup_printf (_("defaults (rule %u)"), index);
  /* TRANSLATORS: where a rule came from: the sandbox's own Nth rule */
  return g_strdup_printf (_("rule %u"), index);
}

static void
print_rules (GVariant *rules)
{
  const char *headers[] = { _("DOMAIN"), _("ACTION"), _("PORTS"), _("FROM"), NULL };
  g_autoptr(BoxTable) table = NULL;
  GVariantIter iter;
  GVariant *rule;

  if (g_variant_n_children (rules) == 0) {
    g_print ("%s\n", _("Unrestricted: no egress rules, the whole internet."));
    return;
  }
  table = box_table_new (headers);
  g_variant_iter_init (&iter, rules);
  while ((rule = g_variant_iter_next_value (&iter)) != NULL) {
    char **row = g_new0 (char *, 5);
    const char *domain = "", *action = "";

    g_variant_lookup (rule, "domain", "&s", &domain);
    g_variant_lookup (rule, "action", "&s", &action);
    row[0] = g_strdup (domain);
    row[1] = g_strdup (g_strcmp0 (action, "allow") == 0 ? _("allow") : _("deny"));
    row[2] = rule_ports (rule);
    row[3] = rule_origin (rule);
    box_table_add_row (table, row);
    g_variant_unref (rule);
  }
  box_table_print (table);
}

static void
print_allowed (GVariant *allowed)
{
  const char *headers[] = { _("ADDRESS"), _("PORT"), _("EXPIRES IN"), NULL };
  g_autoptr(BoxTable) table = NULL;
  GVariantIter iter;
  GVariant *entry;

  g_print ("\n");
  if (g_variant_n_children (allowed) == 0) {
    g_print ("%s\n", _("No addresses allowed on other ports now (none resolved lately)."));
    return;
  }
  table = box_table_new (headers);
  g_variant_iter_init (&iter, allowed);
  while ((entry = g_variant_iter_next_value (&iter)) != NULL) {
    char **row = g_new0 (char *, 4);
    const char *address = "";
    guint16 port = 0;
    guint32 left = 0;

    g_variant_lookup (entry, "address", "&s", &address);
    g_variant_lookup (entry, "port", "q", &port);
    g_variant_lookup (entry, "expires_s", "u", &left);
    row[0] = g_strdup (address);
    row[1] = g_strdup_printf ("%u", port);
    row[2] = format_left (left);
    box_table_add_row (table, row);
    g_variant_unref (entry);
  }
  box_table_print (table);
}

gboolean
boxctl_egress (BoxDBusAdmin1 *proxy, gboolean json, const char *sandbox, GError **error)
{
  g_autoptr(GVariant) rules = NULL;
  g_autoptr(GVariant) allowed = NULL;
  g_autoptr(GError) allowed_error = NULL;

  if (!box_dbus_admin1_call_get_sandbox_egress_sync (proxy, sandbox, &rules, NULL, error))
    return FALSE;
  box_dbus_admin1_call_list_sandbox_allowed_sync (proxy, sandbox, &allowed, NULL, &allowed_error);
  if (json) {
    g_autoptr(JsonObject) object = json_object_new ();
    g_autoptr(JsonNode) root = json_node_new (JSON_NODE_OBJECT);
    g_autoptr(JsonGenerator) generator = json_generator_new ();
    g_autofree char *text = NULL;

    if (allowed == NULL) {
      g_propagate_error (error, g_steal_pointer (&allowed_error));
      return FALSE;
    }
    json_object_set_member (object, "rules", json_gvariant_serialize (rules));
    json_object_set_member (object, "allowed", json_gvariant_serialize (allowed));
    json_node_set_object (root, object);
    json_generator_set_pretty (generator, TRUE);
    json_generator_set_root (generator, root);
    text = json_generator_to_data (generator, NULL);
    g_print ("%s\n", text);
    return TRUE;
  }
  print_rules (rules);
  if (allowed == NULL) {
    g_propagate_error (error, g_steal_pointer (&allowed_error));
    return FALSE;
  }
  if (g_variant_n_children (rules) > 0)
    print_allowed (allowed);
  return TRUE;
}
