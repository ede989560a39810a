/* box-egress.c: `box egress SANDBOX …`, a sandbox's egress rules.
 *
 * Shows the rules (the `network` field of the sandbox) or edits them: an
 * edit reads the sandbox, changes its list and PATCHes `network` with the
 * whole new list.  The API has no revision for a sandbox, so two edits at
 * the same time are last-writer-wins (the later PATCH replaces the list the
 * earlier one set); what is printed afterwards is the list the PATCH
 * answered, so what holds is always what is shown.
 *
 * Edits, applied in this order whatever the order on the command line:
 * --clear (no rules), --remove DOMAIN (every rule of that domain),
 * --no-defaults, --defaults ({include: defaults} once), --deny DOMAIN and
 * --allow DOMAIN[:PORT,…] (each replacing what the list held for that
 * domain, allow or deny: an allow and a deny on one domain are a deny, so
 * keeping both would not do what was asked).  Checked here: the form of
 * each argument (an IP address, a misplaced `*`, ports); the API checks
 * the rest (400 invalid) and then nothing changed.
 */
#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "box-cli.h"

typedef struct {
  char   *domain;     /* NULL: the include */
  gboolean allow;
  GArray *ports;      /* guint16; allow only; empty: the API's default */
} EgressRule;

static void
egress_rule_free (EgressRule *rule)
{
  if (rule == NULL)
    return;   /* taken by the list */
  g_free (rule->domain);
  g_clear_pointer (&rule->ports, g_array_unref);
  g_free (rule);
}

static EgressRule *
egress_rule_new (const char *domain, gboolean allow)
{
  EgressRule *rule = g_new0 (EgressRule, 1);

  rule->domain = g_strdup (domain);
  rule->allow = allow;
  rule->ports = g_array_new (FALSE, FALSE, sizeof (guint16));
  return rule;
}

/* "80,443" -> @ports; FALSE for anything but 1 to 65535, comma-separated. */
static gboolean
parse_ports (const char *text, GArray *ports)
{
  g_auto(GStrv) parts = g_strsplit (text, ",", -1);

  if (parts[0] == NULL)
    return FALSE;
  for (guint i = 0; parts[i] != NULL; i++) {
    guint64 port;
    guint16 value;
    gboolean seen = FALSE;

    if (!g_ascii_string_to_unsigned (parts[i], 10, 1, 65535, &port, NULL))
      return FALSE;
    value = (guint16) port;
    for (guint j = 0; j < ports->len; j++)
      seen = seen || g_array_index (ports, guint16, j) == value;
    if (!seen)
      g_array_append_val (ports, value);
  }
  return TRUE;
}

/* The form of a rule's domain, lowercased into *out; the API checks the
 * name itself. */
static gboolean
check_domain (const char *option, const char *text, char **out, GError **error)
{
  g_autofree char *domain = g_ascii_strdown (text, -1);
  const char *star = strchr (domain, '*');

  if (domain[0] == '\0') {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE, _("%s needs a domain."), option);
    return FALSE;
  }
  if (g_hostname_is_ip_address (domain) || strchr (domain, ':') != NULL) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                 _("%s “%s”: rules take host names, not IP addresses."), option, text);
    return FALSE;
  }
  if (star != NULL && strcmp (domain, "*") != 0 &&
      (star != domain || domain[1] != '.' || strchr (domain + 1, '*') != NULL ||
       domain[2] == '\0')) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                 _("%s “%s”: a wildcard is “*” or “*.NAME”."), option, text);
    return FALSE;
  }
  *out = g_steal_pointer (&domain);
  return TRUE;
}

/* --allow DOMAIN[:PORT,…] (the ports after the last colon) */
static EgressRule *
parse_allow (const char *spec, GError **error)
{
  const char *colon = strrchr (spec, ':');
  g_autofree char *name = colon != NULL ? g_strndup (spec, (gsize) (colon - spec)) : g_strdup (spec);
  g_autofree char *domain = NULL;
  EgressRule *rule;

  if (g_hostname_is_ip_address (spec)) {
    check_domain ("--allow", spec, &domain, error);   /* says why */
    return NULL;
  }
  if (!check_domain ("--allow", name, &domain, error))
    return NULL;
  rule = egress_rule_new (domain, TRUE);
  if (colon != NULL && !parse_ports (colon + 1, rule->ports)) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                 _("--allow “%s”: the ports after the colon are numbers 1 to 65535, "
                   "separated by commas."), spec);
    egress_rule_free (rule);
    return NULL;
  }
  return rule;
}

/* --deny DOMAIN: a deny covers every port */
static EgressRule *
parse_deny (const char *spec, GError **error)
{
  g_autofree char *domain = NULL;

  if (strchr (spec, ':') != NULL && !g_hostname_is_ip_address (spec)) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                 _("--deny “%s”: a deny covers every port and takes none."), spec);
    return NULL;
  }
  if (!check_domain ("--deny", spec, &domain, error))
    return NULL;
  return egress_rule_new (domain, FALSE);
}

/* The API's {egress: [Rule]} -> EgressRule*; FALSE when it is not that. */
static gboolean
rules_from_network (JsonObject *network, GPtrArray *rules)
{
  JsonNode *egress = network != NULL ? json_object_get_member (network, "egress") : NULL;
  JsonArray *array;

  if (egress == NULL || JSON_NODE_HOLDS_NULL (egress))
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (egress))
    return FALSE;
  array = json_node_get_array (egress);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *object = json_array_get_object_element (array, i);
    const char *domain = box_cli_json_string (object, "domain");
    const char *action = box_cli_json_string (object, "action");
    JsonNode *ports = object != NULL ? json_object_get_member (object, "ports") : NULL;
    EgressRule *rule;

    if (object == NULL)
      return FALSE;
    if (g_strcmp0 (box_cli_json_string (object, "include"), "defaults") == 0) {
      g_ptr_array_add (rules, egress_rule_new (NULL, FALSE));
      continue;
    }
    if (domain == NULL || (g_strcmp0 (action, "allow") != 0 && g_strcmp0 (action, "deny") != 0))
      return FALSE;
    rule = egress_rule_new (domain, strcmp (action, "allow") == 0);
    g_ptr_array_add (rules, rule);
    if (ports != NULL && JSON_NODE_HOLDS_ARRAY (ports)) {
      JsonArray *list = json_node_get_array (ports);

      for (guint j = 0; j < json_array_get_length (list); j++) {
        JsonNode *element = json_array_get_element (list, j);
        gint64 value = JSON_NODE_HOLDS_VALUE (element) &&
                       json_node_get_value_type (element) == G_TYPE_INT64
                       ? json_node_get_int (element) : 0;
        guint16 port = (guint16) value;

        if (value < 1 || value > 65535)
          return FALSE;   /* a rule box would not send back as it was */
        g_array_append_val (rule->ports, port);
      }
    }
  }
  return TRUE;
}

static JsonNode *
network_body (GPtrArray *rules)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "network");
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "egress");
  json_builder_begin_array (builder);
  for (guint i = 0; i < rules->len; i++) {
    EgressRule *rule = g_ptr_array_index (rules, i);

    json_builder_begin_object (builder);
    if (rule->domain == NULL) {
      json_builder_set_member_name (builder, "include");
      json_builder_add_string_value (builder, "defaults");
    } else {
      json_builder_set_member_name (builder, "domain");
      json_builder_add_string_value (builder, rule->domain);
      json_builder_set_member_name (builder, "action");
      json_builder_add_string_value (builder, rule->allow ? "allow" : "deny");
      if (rule->allow && rule->ports->len > 0) {
        json_builder_set_member_name (builder, "ports");
        json_builder_begin_array (builder);
        for (guint j = 0; j < rule->ports->len; j++)
          json_builder_add_int_value (builder, g_array_index (rule->ports, guint16, j));
        json_builder_end_array (builder);
      }
    }
    json_builder_end_object (builder);
  }
  json_builder_end_array (builder);
  json_builder_end_object (builder);
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

static void
print_rules (GPtrArray *rules)
{
  const char *const header[] = { _("DOMAIN"), _("ACTION"), _("PORTS"), NULL };
  g_autoptr(BoxTable) table = NULL;

  if (rules->len == 0) {
    g_print ("%s\n", _("unrestricted (no rules: the whole internet)"));
    return;
  }
  table = box_table_new (header);
  for (guint i = 0; i < rules->len; i++) {
    EgressRule *rule = g_ptr_array_index (rules, i);
    g_autoptr(GString) ports = g_string_new (NULL);

    for (guint j = 0; rule->allow && j < rule->ports->len; j++)
      g_string_append_printf (ports, "%s%u", j > 0 ? "," : "",
                              g_array_index (rule->ports, guint16, j));
    if (rule->domain == NULL)
      box_table_add (table, _("(defaults)"), _("include"), "80,443", NULL);
    else
      box_table_add (table, rule->domain, rule->allow ? _("allow") : _("deny"),
                     rule->allow ? (ports->len > 0 ? ports->str : "80,443") : _("all"), NULL);
  }
  box_table_print (table);
}

/* Drops the rules of @domain (NULL: the include); how many were there. */
static guint
drop_domain (GPtrArray *rules, const char *domain)
{
  guint dropped = 0;

  for (guint i = rules->len; i > 0; i--) {
    EgressRule *rule = g_ptr_array_index (rules, i - 1);

    if (g_strcmp0 (rule->domain, domain) == 0) {
      g_ptr_array_remove_index (rules, i - 1);
      dropped++;
    }
  }
  return dropped;
}

/* @rule takes the place of the first rule of its domain, the others of
 * that domain go. */
static void
put_rule (GPtrArray *rules, EgressRule *rule)
{
  for (guint i = 0; i < rules->len; i++) {
    EgressRule *old = g_ptr_array_index (rules, i);

    if (g_strcmp0 (old->domain, rule->domain) == 0) {
      egress_rule_free (g_steal_pointer (&rules->pdata[i]));
      rules->pdata[i] = rule;
      for (guint j = rules->len; j > i + 1; j--) {
        if (g_strcmp0 (((EgressRule *) g_ptr_array_index (rules, j - 1))->domain,
                       rule->domain) == 0)
          g_ptr_array_remove_index (rules, j - 1);
      }
      return;
    }
  }
  g_ptr_array_add (rules, rule);
}

/* The options, checked before anything is asked of the API. */
typedef struct {
  char   **allow;
  char   **deny;
  char   **remove;
  gboolean defaults;
  gboolean no_defaults;
  gboolean clear;
  gboolean show;
  gboolean dry_run;
  GPtrArray *allow_rules;   /* EgressRule */
  GPtrArray *deny_rules;
  GPtrArray *remove_domains; /* char*, lowercased */
} EgressEdit;

static gboolean
edit_check (EgressEdit *edit, GError **error)
{
  g_autoptr(GHashTable) named = g_hash_table_new (g_str_hash, g_str_equal);

  edit->allow_rules = g_ptr_array_new_with_free_func ((GDestroyNotify) egress_rule_free);
  edit->deny_rules = g_ptr_array_new_with_free_func ((GDestroyNotify) egress_rule_free);
  edit->remove_domains = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; edit->deny != NULL && edit->deny[i] != NULL; i++) {
    EgressRule *rule = parse_deny (edit->deny[i], error);

    if (rule == NULL)
      return FALSE;
    g_ptr_array_add (edit->deny_rules, rule);
    g_hash_table_add (named, rule->domain);
  }
  for (guint i = 0; edit->allow != NULL && edit->allow[i] != NULL; i++) {
    EgressRule *rule = parse_allow (edit->allow[i], error);

    if (rule == NULL)
      return FALSE;
    g_ptr_array_add (edit->allow_rules, rule);
    if (g_hash_table_contains (named, rule->domain)) {
      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                   _("“%s” is named twice by --allow and --deny; name each domain once."),
                   rule->domain);
      return FALSE;
    }
    g_hash_table_add (named, rule->domain);
  }
  for (guint i = 0; edit->remove != NULL && edit->remove[i] != NULL; i++) {
    char *domain = NULL;

    if (!check_domain ("--remove", edit->remove[i], &domain, error))
      return FALSE;
    g_ptr_array_add (edit->remove_domains, domain);
  }
  if (edit->defaults && edit->no_defaults) {
    g_set_error_literal (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                         _("--defaults and --no-defaults contradict each other."));
    return FALSE;
  }
  if (edit->show && (edit->allow_rules->len > 0 || edit->deny_rules->len > 0 ||
                     edit->remove_domains->len > 0 || edit->defaults || edit->no_defaults ||
                     edit->clear)) {
    g_set_error_literal (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                         _("--show takes no edit (an edit shows the new rules)."));
    return FALSE;
  }
  return TRUE;
}

static gboolean
edit_is_empty (EgressEdit *edit)
{
  return edit->allow_rules->len == 0 && edit->deny_rules->len == 0 &&
         edit->remove_domains->len == 0 && !edit->defaults && !edit->no_defaults && !edit->clear;
}

/* Applies @edit to @rules; FALSE when a --remove names no rule. */
static gboolean
edit_apply (EgressEdit *edit, GPtrArray *rules, GError **error)
{
  if (edit->clear)
    g_ptr_array_set_size (rules, 0);
  for (guint i = 0; i < edit->remove_domains->len; i++) {
    const char *domain = g_ptr_array_index (edit->remove_domains, i);

    if (drop_domain (rules, domain) == 0 && !edit->clear) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND,
                   _("The sandbox has no rule for “%s”; nothing was changed."), domain);
      return FALSE;
    }
  }
  if (edit->no_defaults)
    drop_domain (rules, NULL);
  if (edit->defaults)
    put_rule (rules, egress_rule_new (NULL, FALSE));   /* once, where it was */
  for (guint i = 0; i < edit->deny_rules->len; i++)
    put_rule (rules, g_steal_pointer (&edit->deny_rules->pdata[i]));
  for (guint i = 0; i < edit->allow_rules->len; i++)
    put_rule (rules, g_steal_pointer (&edit->allow_rules->pdata[i]));
  return TRUE;
}

static void
edit_clear (EgressEdit *edit)
{
  g_strfreev (edit->allow);
  g_strfreev (edit->deny);
  g_strfreev (edit->remove);
  g_clear_pointer (&edit->allow_rules, g_ptr_array_unref);
  g_clear_pointer (&edit->deny_rules, g_ptr_array_unref);
  g_clear_pointer (&edit->remove_domains, g_ptr_array_unref);
}

/* The rules of a sandbox answer (GET or PATCH); NULL with @error set when
 * the answer has none. */
static GPtrArray *
answer_rules (JsonNode *answer, GError **error)
{
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) egress_rule_free);
  JsonObject *sandbox = JSON_NODE_HOLDS_OBJECT (answer) ? json_node_get_object (answer) : NULL;

  if (!rules_from_network (box_cli_json_object (sandbox, "network"), rules)) {
    g_set_error_literal (error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                         _("The API's answer has no readable network rules"));
    return NULL;
  }
  return g_steal_pointer (&rules);
}

static void
print_network (BoxCli *cli, JsonNode *answer, GPtrArray *rules)
{
  JsonObject *sandbox = JSON_NODE_HOLDS_OBJECT (answer) ? json_node_get_object (answer) : NULL;
  JsonObject *network = box_cli_json_object (sandbox, "network");

  if (!cli->json) {
    print_rules (rules);
  } else if (network != NULL) {
    g_autoptr(JsonNode) node = json_node_init_object (json_node_alloc (), network);

    box_cli_print_json (node);
  } else {
    g_autoptr(JsonNode) body = network_body (rules);

    box_cli_print_json (json_object_get_member (json_node_get_object (body), "network"));
  }
}

int
box_cmd_egress (BoxCli *cli, int argc, char **argv)
{
  EgressEdit edit = { 0 };
  const GOptionEntry entries[] = {
    { "allow", 0, 0, G_OPTION_ARG_STRING_ARRAY, &edit.allow,
      N_("Allow DOMAIN (exact, *.NAME or *) on PORTs (default 80,443) (repeatable)"),
      N_("DOMAIN[:PORT,…]") },
    { "deny", 0, 0, G_OPTION_ARG_STRING_ARRAY, &edit.deny,
      N_("Deny DOMAIN on every port (repeatable)"), N_("DOMAIN") },
    { "remove", 0, 0, G_OPTION_ARG_STRING_ARRAY, &edit.remove,
      N_("Drop the rules of DOMAIN (repeatable)"), N_("DOMAIN") },
    { "defaults", 0, 0, G_OPTION_ARG_NONE, &edit.defaults,
      N_("Add the service's default hosts (GET /v1/network/defaults)"), NULL },
    { "no-defaults", 0, 0, G_OPTION_ARG_NONE, &edit.no_defaults,
      N_("Drop the default hosts"), NULL },
    { "clear", 0, 0, G_OPTION_ARG_NONE, &edit.clear,
      N_("Drop every rule first: without others, the whole internet again"), NULL },
    { "show", 0, 0, G_OPTION_ARG_NONE, &edit.show,
      N_("Show the rules (what happens without an edit)"), NULL },
    { "dry-run", 'n', 0, G_OPTION_ARG_NONE, &edit.dry_run,
      N_("Print the rules the edit would set and change nothing"), NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the rules as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(JsonNode) patched = NULL;
  g_autoptr(GPtrArray) rules = NULL;
  g_autoptr(GPtrArray) result = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX"),
                      _("Show or edit a sandbox's egress rules. An edit sets the whole new "
                        "list; without rules a sandbox reaches the whole internet."), 1, 1,
                      &status)) {
    edit_clear (&edit);
    return status;
  }
  if (!edit_check (&edit, &error)) {
    edit_clear (&edit);
    return box_cli_usage_error (cli, "egress", error->message);
  }
  if (!box_cli_ready (cli, &status)) {
    edit_clear (&edit);
    return status;
  }
  path = box_cli_sandbox_path (argv[1], "");
  answer = box_cli_call (cli, "GET", path, NULL, NULL, &error);
  if (answer == NULL || (rules = answer_rules (answer, &error)) == NULL) {
    edit_clear (&edit);
    return box_cli_fail (cli, error);
  }
  if (edit_is_empty (&edit)) {
    edit_clear (&edit);
    print_network (cli, answer, rules);
    return BOX_CLI_EXIT_OK;
  }
  if (!edit_apply (&edit, rules, &error)) {
    edit_clear (&edit);
    return box_cli_fail (cli, error);
  }
  edit_clear (&edit);
  body = network_body (rules);
  if (edit.dry_run) {
    print_network (cli, body, rules);
    return BOX_CLI_EXIT_OK;
  }
  patched = box_cli_call (cli, "PATCH", path, NULL, body, &error);
  if (patched == NULL || (result = answer_rules (patched, &error)) == NULL)
    return box_cli_fail (cli, error);
  print_network (cli, patched, result);
  return BOX_CLI_EXIT_OK;
}
