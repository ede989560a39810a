/* boxctl: administer a running boxd over D-Bus (org.box.Admin1).
 *
 * A thin client: every command is one method call on the generated proxy;
 * boxd decides who may call (root or its own user).  Output is a table for
 * people or, with --json, JSON shaped like the HTTP API's answers.
 *
 * Exit status: 0 ok, 1 boxd refused or failed the call (its message is
 * printed), 2 bad usage, 3 boxd cannot be reached.
 */
#include "config.h"

#include <locale.h>
#include <string.h>
#include <glib/gi18n.h>
#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "box-dbus-generated.h"
#include "box-table.h"
#include "boxctl-egress.h"

/* as in core/box-dbus-daemon.h, without pulling in the engine's headers */
#define BOXCTL_DBUS_NAME "org.box.Admin1"
#define BOXCTL_DBUS_PATH "/org/box/Admin1"
#define BOXCTL_ERROR_PREFIX "org.box.Error."

#define BOXCTL_TIMEOUT_MS (2 * 60 * 1000)
/* deleting a project stops its VMs */
#define BOXCTL_DELETE_TIMEOUT_MS (10 * 60 * 1000)

enum {
  BOXCTL_EXIT_OK = 0,
  BOXCTL_EXIT_FAILED = 1,
  BOXCTL_EXIT_USAGE = 2,
  BOXCTL_EXIT_UNREACHABLE = 3,
};

typedef struct {
  BoxDBusAdmin1 *proxy;
  gboolean       json;
  char         **domains;   /* --domain, project-create only */
} BoxCtl;

static void
boxctl_clear (BoxCtl *ctl)
{
  g_clear_object (&ctl->proxy);
  g_clear_pointer (&ctl->domains, g_strfreev);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (BoxCtl, boxctl_clear)

typedef gboolean (*BoxCtlFunc) (BoxCtl *ctl, char **args, GError **error);

typedef struct {
  const char *name;
  const char *args;          /* N_() */
  const char *description;   /* N_() */
  guint       min_args;
  guint       max_args;      /* G_MAXUINT: no limit */
  BoxCtlFunc  func;
} BoxCtlCommand;

/* ---- output helpers ---------------------------------------------------- */

static void
print_json (JsonNode *node)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autofree char *text = NULL;

  json_generator_set_pretty (generator, TRUE);
  json_generator_set_root (generator, node);
  text = json_generator_to_data (generator, NULL);
  g_print ("%s\n", text);
}

/* Wraps a serialized list as {member: [...]}, like the HTTP API does. */
static void
print_json_list (const char *member, GVariant *list)
{
  g_autoptr(JsonObject) object = json_object_new ();
  g_autoptr(JsonNode) root = json_node_new (JSON_NODE_OBJECT);

  json_object_set_member (object, member, json_gvariant_serialize (list));
  json_node_set_object (root, object);
  print_json (root);
}

static const char *
dict_str (GVariant *dict, const char *key)
{
  const char *value = NULL;

  if (!g_variant_lookup (dict, key, "&s", &value))
    return "";
  return value;
}

static char *
dict_strv_joined (GVariant *dict, const char *key)
{
  g_autofree const char **strv = NULL;

  if (!g_variant_lookup (dict, key, "^a&s", &strv) || strv[0] == NULL)
    return g_strdup ("");
  return g_strjoinv (", ", (char **) strv);
}

static char *
dict_uint (GVariant *dict, const char *key)
{
  guint32 value = 0;

  if (!g_variant_lookup (dict, key, "u", &value))
    return g_strdup ("");
  return g_strdup_printf ("%u", value);
}

/* "Label:  value" lines with the values aligned. */
static void
print_fields (const char *const *labels, const char *const *values, guint n)
{
  glong width = 0;

  for (guint i = 0; i < n; i++)
    width = MAX (width, g_utf8_strlen (labels[i], -1));
  for (guint i = 0; i < n; i++) {
    g_autoptr(GString) line = g_string_new (labels[i]);

    g_string_append_c (line, ':');
    for (glong pad = g_utf8_strlen (labels[i], -1); pad < width + 2; pad++)
      g_string_append_c (line, ' ');
    g_string_append (line, values[i]);
    g_print ("%s\n", line->str);
  }
}

static const char *
or_none (const char *value)
{
  return value[0] != '\0' ? value : _("(none)");
}

/* ---- commands ---------------------------------------------------------- */

/* for g_ptr_array_sort(), which passes pointers to the elements */
static gint
compare_strings (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const char *const *) a, *(const char *const *) b);
}

static JsonNode *
status_to_json (GVariant *status)
{
  g_autoptr(JsonNode) root = json_gvariant_serialize (status);
  JsonObject *object = json_node_get_object (root);
  g_autoptr(GVariant) plugins = g_variant_lookup_value (status, "plugins", G_VARIANT_TYPE ("a(sss)"));
  JsonArray *array = json_array_new ();

  /* a(sss) would serialize as arrays; objects say what each field is */
  if (plugins != NULL) {
    GVariantIter iter;
    const char *name, *path, *ifaces;

    g_variant_iter_init (&iter, plugins);
    while (g_variant_iter_next (&iter, "(&s&s&s)", &name, &path, &ifaces)) {
      JsonObject *plugin = json_object_new ();
      g_auto(GStrv) split = g_strsplit (ifaces, ",", -1);
      JsonArray *iface_array = json_array_new ();

      for (guint i = 0; split[i] != NULL; i++) {
        if (split[i][0] != '\0')
          json_array_add_string_element (iface_array, split[i]);
      }
      json_object_set_string_member (plugin, "name", name);
      json_object_set_string_member (plugin, "path", path);
      json_object_set_array_member (plugin, "interfaces", iface_array);
      json_array_add_object_element (array, plugin);
    }
  }
  json_object_set_array_member (object, "plugins", array);
  return g_steal_pointer (&root);
}

static gboolean
cmd_status (BoxCtl *ctl, char **args, GError **error)
{
  g_autoptr(GVariant) status = NULL;
  g_autoptr(GVariant) plugins = NULL;
  g_autofree char *hypervisor = NULL;
  g_autoptr(GPtrArray) extra = g_ptr_array_new_with_free_func (g_free);
  GVariantIter iter;
  const char *key;
  GVariant *value;

  if (!box_dbus_admin1_call_get_status_sync (ctl->proxy, &status, NULL, error))
    return FALSE;
  if (ctl->json) {
    g_autoptr(JsonNode) root = status_to_json (status);

    print_json (root);
    return TRUE;
  }

  /* TRANSLATORS: the hypervisor plugin's name, then how it runs VMs: kvm, tcg or none */
  hypervisor = g_strdup_printf (_("%s (acceleration: %s)"),
                                or_none (dict_str (status, "hypervisor")),
                                or_none (dict_str (status, "accel")));
  {
    const char *labels[] = {
      _("Version"), _("Hypervisor"), _("Storage"), _("Auth"), _("Network"),
      _("Secrets broker"), _("Listening on"), _("Sandbox domain"), _("Data directory"),
    };
    const char *values[] = {
      dict_str (status, "version"), hypervisor,
      or_none (dict_str (status, "storage")), or_none (dict_str (status, "auth")),
      or_none (dict_str (status, "network")), or_none (dict_str (status, "broker")),
      or_none (dict_str (status, "listen")),
      or_none (dict_str (status, "sandbox_domain")), or_none (dict_str (status, "data_dir")),
    };

    print_fields (labels, values, G_N_ELEMENTS (labels));
  }
  if (dict_str (status, "accel-warning")[0] != '\0')
    /* TRANSLATORS: the daemon's warning follows */
    g_print ("\n%s %s\n", _("Warning:"), dict_str (status, "accel-warning"));

  plugins = g_variant_lookup_value (status, "plugins", G_VARIANT_TYPE ("a(sss)"));
  if (plugins != NULL && g_variant_n_children (plugins) > 0) {
    const char *headers[] = { _("PLUGIN"), _("INTERFACES"), _("PATH"), NULL };
    g_autoptr(BoxTable) table = box_table_new (headers);
    const char *name, *path, *ifaces;

    g_print ("\n");
    g_variant_iter_init (&iter, plugins);
    while (g_variant_iter_next (&iter, "(&s&s&s)", &name, &path, &ifaces)) {
      char **row = g_new0 (char *, 4);

      row[0] = g_strdup (name);
      row[1] = g_strdup (ifaces);
      row[2] = g_strdup (path);
      box_table_add_row (table, row);
    }
    box_table_print (table);
  }

  /* what the plugins report about themselves */
  g_variant_iter_init (&iter, status);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value)) {
    if (g_str_has_prefix (key, "plugin.")) {
      g_autofree char *printed = g_variant_print (value, FALSE);

      g_ptr_array_add (extra, g_strdup_printf ("%s = %s", key + strlen ("plugin."), printed));
    }
    g_variant_unref (value);
  }
  if (extra->len > 0) {
    g_ptr_array_sort (extra, compare_strings);
    g_print ("\n%s\n", _("Plugin status:"));
    for (guint i = 0; i < extra->len; i++)
      g_print ("  %s\n", (const char *) g_ptr_array_index (extra, i));
  }
  return TRUE;
}

static void
print_project (GVariant *project)
{
  g_autofree char *domains = dict_strv_joined (project, "domains");
  const char *labels[] = { _("Project"), _("Domains"), _("Created") };
  const char *values[] = {
    dict_str (project, "name"), or_none (domains), dict_str (project, "created_at"),
  };

  print_fields (labels, values, G_N_ELEMENTS (labels));
}

static gboolean
cmd_projects (BoxCtl *ctl, char **args, GError **error)
{
  g_autoptr(GVariant) projects = NULL;
  const char *headers[] = { _("NAME"), _("DOMAINS"), _("CREATED"), NULL };
  g_autoptr(BoxTable) table = NULL;
  GVariantIter iter;
  GVariant *project;

  if (!box_dbus_admin1_call_list_projects_sync (ctl->proxy, &projects, NULL, error))
    return FALSE;
  if (ctl->json) {
    print_json_list ("projects", projects);
    return TRUE;
  }
  if (g_variant_n_children (projects) == 0) {
    g_print ("%s\n", _("No projects."));
    return TRUE;
  }
  table = box_table_new (headers);
  g_variant_iter_init (&iter, projects);
  while ((project = g_variant_iter_next_value (&iter)) != NULL) {
    char **row = g_new0 (char *, 4);

    row[0] = g_strdup (dict_str (project, "name"));
    row[1] = dict_strv_joined (project, "domains");
    row[2] = g_strdup (dict_str (project, "created_at"));
    box_table_add_row (table, row);
    g_variant_unref (project);
  }
  box_table_print (table);
  return TRUE;
}

static gboolean
cmd_project_create (BoxCtl *ctl, char **args, GError **error)
{
  const char *const empty[] = { NULL };
  g_autoptr(GVariant) project = NULL;

  if (!box_dbus_admin1_call_create_project_sync (ctl->proxy, args[0],
                                                 ctl->domains != NULL
                                                 ? (const char *const *) ctl->domains : empty,
                                                 &project, NULL, error))
    return FALSE;
  if (ctl->json) {
    g_autoptr(JsonNode) root = json_gvariant_serialize (project);

    print_json (root);
    return TRUE;
  }
  g_print (_("Created project %s."), dict_str (project, "name"));
  g_print ("\n");
  print_project (project);
  return TRUE;
}

static gboolean
cmd_project_delete (BoxCtl *ctl, char **args, GError **error)
{
  g_dbus_proxy_set_default_timeout (G_DBUS_PROXY (ctl->proxy), BOXCTL_DELETE_TIMEOUT_MS);
  if (!box_dbus_admin1_call_delete_project_sync (ctl->proxy, args[0], NULL, error))
    return FALSE;
  if (ctl->json) {
    g_autoptr(JsonNode) root = json_node_new (JSON_NODE_OBJECT);

    json_node_take_object (root, json_object_new ());
    print_json (root);
    return TRUE;
  }
  g_print (_("Deleted project %s with its sandboxes, secrets and keys."), args[0]);
  g_print ("\n");
  return TRUE;
}

static gboolean
cmd_project_domains (BoxCtl *ctl, char **args, GError **error)
{
  g_autoptr(GVariant) project = NULL;

  if (!box_dbus_admin1_call_set_project_domains_sync (ctl->proxy, args[0],
                                                      (const char *const *) &args[1],
                                                      &project, NULL, error))
    return FALSE;
  if (ctl->json) {
    g_autoptr(JsonNode) root = json_gvariant_serialize (project);

    print_json (root);
    return TRUE;
  }
  print_project (project);
  return TRUE;
}

/* "N" for a bound, "no bound" for 0 */
static char *
quota_bound (guint64 value, const char *unit)
{
  if (value == 0)
    return g_strdup (_("no bound"));
  return g_strdup_printf ("%" G_GUINT64_FORMAT "%s", value, unit);
}

static guint64
dict_u64 (GVariant *dict, const char *key)
{
  guint64 t = 0;
  guint32 u = 0;

  if (g_variant_lookup (dict, key, "t", &t))
    return t;
  if (g_variant_lookup (dict, key, "u", &u))
    return u;
  return 0;
}

static gboolean
cmd_quota (BoxCtl *ctl, char **args, GError **error)
{
  g_autoptr(GVariant) quota = NULL;
  g_autoptr(GVariant) usage = NULL;
  /* TRANSLATORS: column headers of boxctl quota */
  const char *headers[] = { _("RESOURCE"), _("USED"), _("QUOTA"), NULL };
  const char *names[] = { _("sandboxes"), _("CPUs"), _("memory"), _("disk") };
  const char *used_keys[] = { "sandboxes", "cpus", "memory_mib", "disk_mib" };
  const char *quota_keys[] = { "sandboxes", "cpus", "memory_mib", "disk_gib" };
  const char *units[] = { "", "", " MiB", " MiB" };
  const guint64 scale[] = { 1, 1, 1, 1024 };
  g_autoptr(BoxTable) table = NULL;

  if (!box_dbus_admin1_call_get_project_quota_sync (ctl->proxy, args[0], &quota, &usage, NULL,
                                                    error))
    return FALSE;
  if (ctl->json) {
    g_autoptr(JsonObject) object = json_object_new ();
    g_autoptr(JsonNode) root = json_node_new (JSON_NODE_OBJECT);

    json_object_set_string_member (object, "project", args[0]);
    json_object_set_member (object, "quota", json_gvariant_serialize (quota));
    json_object_set_member (object, "usage", json_gvariant_serialize (usage));
    json_node_set_object (root, object);
    print_json (root);
    return TRUE;
  }
  table = box_table_new (headers);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++) {
    char **row = g_new0 (char *, 4);

    row[0] = g_strdup (names[i]);
    row[1] = g_strdup_printf ("%" G_GUINT64_FORMAT "%s", dict_u64 (usage, used_keys[i]), units[i]);
    row[2] = quota_bound (dict_u64 (quota, quota_keys[i]) * scale[i], units[i]);
    box_table_add_row (table, row);
  }
  g_print (_("Project %s (disk counts every disk at its full size, its memory and each checkpoint):"),
           args[0]);
  g_print ("\n");
  box_table_print (table);
  return TRUE;
}

static gboolean
cmd_keys (BoxCtl *ctl, char **args, GError **error)
{
  g_autoptr(GVariant) keys = NULL;
  const char *headers[] = { _("ID"), _("NAME"), _("CREATED"), NULL };
  g_autoptr(BoxTable) table = NULL;
  GVariantIter iter;
  GVariant *key;

  if (!box_dbus_admin1_call_list_keys_sync (ctl->proxy, args[0], &keys, NULL, error))
    return FALSE;
  if (ctl->json) {
    print_json_list ("keys", keys);
    return TRUE;
  }
  if (g_variant_n_children (keys) == 0) {
    g_print (_("Project %s has no keys."), args[0]);
    g_print ("\n");
    return TRUE;
  }
  table = box_table_new (headers);
  g_variant_iter_init (&iter, keys);
  while ((key = g_variant_iter_next_value (&iter)) != NULL) {
    char **row = g_new0 (char *, 4);

    row[0] = g_strdup (dict_str (key, "id"));
    row[1] = g_strdup (dict_str (key, "name"));
    row[2] = g_strdup (dict_str (key, "created_at"));
    box_table_add_row (table, row);
    g_variant_unref (key);
  }
  box_table_print (table);
  return TRUE;
}

static gboolean
cmd_key_create (BoxCtl *ctl, char **args, GError **error)
{
  g_autoptr(GVariant) key = NULL;
  g_autofree char *secret = NULL;

  if (!box_dbus_admin1_call_create_key_sync (ctl->proxy, args[0], args[1], &key, &secret,
                                             NULL, error))
    return FALSE;
  if (ctl->json) {
    g_autoptr(JsonNode) root = json_gvariant_serialize (key);

    /* the same shape as POST /v1/projects/{project}/keys */
    json_object_set_string_member (json_node_get_object (root), "secret", secret);
    print_json (root);
  } else {
    g_print (_("Created key %s (%s) in project %s."), dict_str (key, "id"),
             dict_str (key, "name"), dict_str (key, "project"));
    g_print ("\n");
    g_print ("%s\n", _("The key is shown only this once; store it now:"));
    g_print ("%s\n", secret);
  }
  memset (secret, 0, strlen (secret));
  return TRUE;
}

static gboolean
cmd_key_delete (BoxCtl *ctl, char **args, GError **error)
{
  if (!box_dbus_admin1_call_delete_key_sync (ctl->proxy, args[0], args[1], NULL, error))
    return FALSE;
  if (ctl->json) {
    g_autoptr(JsonNode) root = json_node_new (JSON_NODE_OBJECT);

    json_node_take_object (root, json_object_new ());
    print_json (root);
    return TRUE;
  }
  g_print (_("Deleted key %s from project %s."), args[1], args[0]);
  g_print ("\n");
  return TRUE;
}

/* boxctl broker rotate-ca (the only broker command: main() checks) */
static gboolean
cmd_broker (BoxCtl *ctl, char **args, GError **error)
{
  g_autoptr(GVariant) rotation = NULL;
  guint32 sandboxes = 0;

  if (!box_dbus_admin1_call_rotate_broker_ca_sync (ctl->proxy, &rotation, NULL, error))
    return FALSE;
  if (ctl->json) {
    g_autoptr(JsonNode) root = json_gvariant_serialize (rotation);

    print_json (root);
    return TRUE;
  }
  g_variant_lookup (rotation, "sandboxes", "u", &sandboxes);
  g_print (_("The secrets broker has a new CA; %u awake sandboxes use secrets."), sandboxes);
  g_print ("\n");
  return TRUE;
}

static gboolean
cmd_rotate_signing_key (BoxCtl *ctl, char **args, GError **error)
{
  g_autoptr(GVariant) rotation = NULL;

  if (!box_dbus_admin1_call_rotate_signing_key_sync (ctl->proxy, &rotation, NULL, error))
    return FALSE;
  if (ctl->json) {
    g_autoptr(JsonNode) root = json_gvariant_serialize (rotation);

    print_json (root);
    return TRUE;
  }
  g_print (_("The identity signing key is now %s."), dict_str (rotation, "kid"));
  g_print ("\n");
  g_print (_("The old key %s stays in the JWKS until %s."), dict_str (rotation, "retired_kid"),
           dict_str (rotation, "retired_until"));
  g_print ("\n");
  return TRUE;
}

static gboolean
cmd_sandboxes (BoxCtl *ctl, char **args, GError **error)
{
  g_autoptr(GVariant) sandboxes = NULL;
  const char *headers[] = {
    _("ID"), _("NAME"), _("PROJECT"), _("STATE"), _("TEMPLATE"), _("CPUS"),
    /* TRANSLATORS: column headers: memory in MiB, disk in GiB */
    _("MEMORY MIB"), _("DISK GIB"), _("CREATED"), NULL
  };
  g_autoptr(BoxTable) table = NULL;
  GVariantIter iter;
  GVariant *sandbox;

  if (!box_dbus_admin1_call_list_sandboxes_sync (ctl->proxy, &sandboxes, NULL, error))
    return FALSE;
  if (ctl->json) {
    print_json_list ("sandboxes", sandboxes);
    return TRUE;
  }
  if (g_variant_n_children (sandboxes) == 0) {
    g_print ("%s\n", _("No sandboxes."));
    return TRUE;
  }
  table = box_table_new (headers);
  g_variant_iter_init (&iter, sandboxes);
  while ((sandbox = g_variant_iter_next_value (&iter)) != NULL) {
    char **row = g_new0 (char *, 10);
    const char *tmpl = dict_str (sandbox, "template");

    row[0] = g_strdup (dict_str (sandbox, "id"));
    row[1] = g_strdup (dict_str (sandbox, "name"));
    row[2] = g_strdup (dict_str (sandbox, "project"));
    row[3] = g_strdup (dict_str (sandbox, "state"));
    row[4] = g_strdup (tmpl[0] != '\0' ? tmpl : dict_str (sandbox, "image"));
    row[5] = dict_uint (sandbox, "cpus");
    row[6] = dict_uint (sandbox, "memory_mib");
    row[7] = dict_uint (sandbox, "disk_gib");
    row[8] = g_strdup (dict_str (sandbox, "created_at"));
    box_table_add_row (table, row);
    g_variant_unref (sandbox);
  }
  box_table_print (table);
  return TRUE;
}

static gboolean
cmd_egress (BoxCtl *ctl, char **args, GError **error)
{
  return boxctl_egress (ctl->proxy, ctl->json, args[0], error);
}

static const BoxCtlCommand commands[] = {
  { "status", "", N_("Show how boxd runs: version, plugins, settings"), 0, 0, cmd_status },
  { "projects", "", N_("List the projects"), 0, 0, cmd_projects },
  { "project-create", N_("NAME [--domain DOMAIN]…"), N_("Create a project"), 1, 1,
    cmd_project_create },
  { "project-delete", N_("NAME"),
    N_("Delete a project with all its sandboxes, secrets and keys"), 1, 1, cmd_project_delete },
  { "project-domains", N_("NAME [DOMAIN…]"),
    N_("Replace a project's domains (none given: remove them all)"), 1, G_MAXUINT,
    cmd_project_domains },
  { "quota", N_("PROJECT"), N_("Show a project's quota and what it holds now"), 1, 1,
    cmd_quota },
  { "keys", N_("PROJECT"), N_("List a project's API keys"), 1, 1, cmd_keys },
  { "key-create", N_("PROJECT NAME"), N_("Create an API key and print its secret once"), 2, 2,
    cmd_key_create },
  { "key-delete", N_("PROJECT KEY_ID"), N_("Revoke an API key"), 2, 2, cmd_key_delete },
  { "sandboxes", "", N_("List the sandboxes of every project"), 0, 0, cmd_sandboxes },
  { "egress", N_("SANDBOX"),
    N_("Show a sandbox's effective egress rules and the addresses it may reach now"), 1, 1,
    cmd_egress },
  { "broker", "rotate-ca", N_("Give the secrets broker a new CA"), 1, 1, cmd_broker },
  { "rotate-signing-key", "",
    N_("Make a new identity signing key; the old one stays in the JWKS for an hour"), 0, 0,
    cmd_rotate_signing_key },
};

/* ---- errors and exit status -------------------------------------------- */

static gboolean
error_is_unreachable (const GError *error)
{
  return g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_SERVICE_UNKNOWN) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NO_REPLY) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_DISCONNECTED) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_OBJECT) ||
         g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_INTERFACE) ||
         g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CLOSED) ||
         g_error_matches (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT);
}

/* "org.box.Error.AlreadyExists" -> "already_exists" */
static char *
error_code_from_dbus_name (const char *name)
{
  g_autoptr(GString) code = g_string_new (NULL);

  if (name == NULL || !g_str_has_prefix (name, BOXCTL_ERROR_PREFIX))
    return NULL;
  for (const char *p = name + strlen (BOXCTL_ERROR_PREFIX); *p != '\0'; p++) {
    if (g_ascii_isupper (*p) && code->len > 0)
      g_string_append_c (code, '_');
    g_string_append_c (code, g_ascii_tolower (*p));
  }
  return g_string_free (g_steal_pointer (&code), FALSE);
}

/* Prints @error (and a JSON error object with --json); returns the exit
 * status.  @connecting: the error came from reaching boxd, not from a call. */
static int
report_error (BoxCtl *ctl, GError *error, gboolean connecting)
{
  g_autofree char *dbus_name = g_dbus_error_get_remote_error (error);
  g_autofree char *code = error_code_from_dbus_name (dbus_name);
  int status = connecting || error_is_unreachable (error)
    ? BOXCTL_EXIT_UNREACHABLE : BOXCTL_EXIT_FAILED;

  g_dbus_error_strip_remote_error (error);
  if (status == BOXCTL_EXIT_UNREACHABLE)
    g_printerr (_("Cannot reach boxd: %s"), error->message);
  else
    g_printerr (_("Error: %s"), error->message);
  g_printerr ("\n");

  if (ctl->json) {
    g_autoptr(JsonBuilder) builder = json_builder_new ();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_object (builder);
    json_builder_set_member_name (builder, "error");
    json_builder_begin_object (builder);
    if (code != NULL) {
      json_builder_set_member_name (builder, "code");
      json_builder_add_string_value (builder, code);
    }
    if (dbus_name != NULL) {
      json_builder_set_member_name (builder, "dbus_error");
      json_builder_add_string_value (builder, dbus_name);
    }
    json_builder_set_member_name (builder, "message");
    json_builder_add_string_value (builder, error->message);
    json_builder_end_object (builder);
    json_builder_end_object (builder);
    root = json_builder_get_root (builder);
    print_json (root);
  }
  return status;
}

static int
usage_error (const char *message)
{
  g_printerr ("%s\n", message);
  g_printerr ("%s\n", _("Run “boxctl --help” to see the commands."));
  return BOXCTL_EXIT_USAGE;
}

static char *
commands_summary (void)
{
  g_autoptr(GString) summary = g_string_new (_("Commands:"));
  g_auto(GStrv) synopses = g_new0 (char *, G_N_ELEMENTS (commands) + 1);
  glong width = 0;

  for (guint i = 0; i < G_N_ELEMENTS (commands); i++) {
    synopses[i] = commands[i].args[0] != '\0'
      ? g_strdup_printf ("%s %s", commands[i].name, _(commands[i].args))
      : g_strdup (commands[i].name);
    width = MAX (width, g_utf8_strlen (synopses[i], -1));
  }
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++) {
    g_string_append_printf (summary, "\n  %s", synopses[i]);
    for (glong pad = g_utf8_strlen (synopses[i], -1); pad < width + 2; pad++)
      g_string_append_c (summary, ' ');
    g_string_append (summary, _(commands[i].description));
  }
  return g_string_free (g_steal_pointer (&summary), FALSE);
}

static BoxDBusAdmin1 *
connect_to_boxd (GBusType bus_type, GError **error)
{
  g_autoptr(GDBusConnection) connection = NULL;
  g_autoptr(BoxDBusAdmin1) proxy = NULL;
  g_autofree char *owner = NULL;

  connection = g_bus_get_sync (bus_type, NULL, error);
  if (connection == NULL)
    return NULL;
  proxy = box_dbus_admin1_proxy_new_sync (connection,
                                          G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES |
                                          G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS |
                                          G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START,
                                          BOXCTL_DBUS_NAME, BOXCTL_DBUS_PATH, NULL, error);
  if (proxy == NULL)
    return NULL;
  owner = g_dbus_proxy_get_name_owner (G_DBUS_PROXY (proxy));
  if (owner == NULL) {
    g_set_error (error, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER,
                 bus_type == G_BUS_TYPE_SESSION
                 ? _("boxd is not running on the session bus (no owner of %s)")
                 : _("boxd is not running on the system bus (no owner of %s)"),
                 BOXCTL_DBUS_NAME);
    return NULL;
  }
  g_dbus_proxy_set_default_timeout (G_DBUS_PROXY (proxy), BOXCTL_TIMEOUT_MS);
  return g_steal_pointer (&proxy);
}

int
main (int argc, char **argv)
{
  gboolean session = FALSE;
  g_auto(BoxCtl) ctl = { 0 };
  g_autoptr(GOptionContext) context = NULL;
  g_autofree char *summary = NULL;
  g_autoptr(GError) error = NULL;
  const BoxCtlCommand *command = NULL;
  guint n_args;
  GOptionEntry entries[] = {
    { "session", 0, 0, G_OPTION_ARG_NONE, &session,
      N_("Talk to a boxd on the session bus instead of the system bus"), NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &ctl.json, N_("Print JSON for programs"), NULL },
    { "domain", 0, 0, G_OPTION_ARG_STRING_ARRAY, &ctl.domains,
      N_("A domain for project-create (repeatable)"), N_("DOMAIN") },
    { NULL }
  };
  int status;

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);

  context = g_option_context_new (_("COMMAND [ARGUMENT…]"));
  summary = commands_summary ();
  g_option_context_set_summary (context, summary);
  g_option_context_set_description (context,
    _("Exit status: 0 success, 1 boxd reported an error, 2 usage error, 3 boxd cannot be reached."));
  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  if (!g_option_context_parse (context, &argc, &argv, &error))
    return usage_error (error->message);

  if (argc < 2)
    return usage_error (_("No command given."));
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++) {
    if (g_strcmp0 (argv[1], commands[i].name) == 0)
      command = &commands[i];
  }
  if (command == NULL) {
    g_autofree char *message = g_strdup_printf (_("Unknown command “%s”."), argv[1]);

    return usage_error (message);
  }
  n_args = (guint) argc - 2;
  if (n_args < command->min_args || n_args > command->max_args) {
    g_autofree char *message = g_strdup_printf (_("Usage: boxctl %s %s"), command->name,
                                                command->args[0] != '\0' ? _(command->args) : "");

    return usage_error (message);
  }
  if (ctl.domains != NULL && command->func != cmd_project_create)
    return usage_error (_("--domain only goes with project-create."));
  if (command->func == cmd_broker && g_strcmp0 (argv[2], "rotate-ca") != 0)
    return usage_error (_("Usage: boxctl broker rotate-ca"));

  ctl.proxy = connect_to_boxd (session ? G_BUS_TYPE_SESSION : G_BUS_TYPE_SYSTEM, &error);
  if (ctl.proxy == NULL)
    status = report_error (&ctl, error, TRUE);
  else if (!command->func (&ctl, &argv[2], &error))
    status = report_error (&ctl, error, FALSE);
  else
    status = BOXCTL_EXIT_OK;

  return status;
}
