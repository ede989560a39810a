/* box-dbus-daemon.c: the D-Bus admin interface; see box-dbus-daemon.h.
 *
 * A transport like the HTTP server: each handler turns its arguments into
 * one engine call and the answer (or the GError) back into D-Bus.  BOX_ERROR
 * codes travel as org.box.Error.* names (registered in box-error.c), so
 * g_dbus_method_invocation_return_gerror() does the mapping; anything else
 * is converted to BOX_ERROR first.
 *
 * Authorization happens in one place, box_dbus_daemon_authorize_cb(), bound
 * to the skeleton's g-authorize-method signal.  GDBus emits that signal in a
 * worker thread (a handler is connected), so the handler may block on the
 * bus daemon's GetConnectionUnixUser and touches nothing but its arguments;
 * the method handlers then run on the main context that exported the object.
 */
#include "config.h"

#include <string.h>
#include <unistd.h>
#include <glib/gi18n-lib.h>

#include "box-dbus-daemon.h"
#include "box-dbus-generated.h"
#include "box-engine.h"
#include "box-error.h"

/* How long the gate waits for the bus daemon to name the caller. */
#define BOX_DBUS_CALLER_TIMEOUT_MS 5000

struct _BoxDBusDaemon {
  GObject          parent_instance;
  BoxEngine       *engine;
  GDBusConnection *connection;
  BoxDBusAdmin1   *skeleton;
  guint            owner_id;
};

G_DEFINE_FINAL_TYPE (BoxDBusDaemon, box_dbus_daemon, G_TYPE_OBJECT)

/* ---- errors ------------------------------------------------------------ */

static gboolean
box_dbus_daemon_return_error (GDBusMethodInvocation *invocation, const GError *error)
{
  g_autoptr(GError) converted = box_error_convert (error, NULL);

  g_dbus_method_invocation_return_gerror (invocation, converted);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* ---- the gate ---------------------------------------------------------- */

static gboolean
box_dbus_daemon_get_caller_uid (GDBusMethodInvocation *invocation, guint32 *uid_out,
                                GError **error)
{
  GDBusConnection *connection = g_dbus_method_invocation_get_connection (invocation);
  const char *sender = g_dbus_method_invocation_get_sender (invocation);
  g_autoptr(GVariant) reply = NULL;

  if (sender == NULL) {
    /* a peer-to-peer connection: the kernel told us who is at the other end */
    GCredentials *credentials = g_dbus_connection_get_peer_credentials (connection);
    uid_t uid;

    if (credentials == NULL) {
      g_set_error_literal (error, G_DBUS_ERROR, G_DBUS_ERROR_ACCESS_DENIED,
                           "the caller's credentials are unknown");
      return FALSE;
    }
    uid = g_credentials_get_unix_user (credentials, error);
    if (uid == (uid_t) -1)
      return FALSE;
    *uid_out = (guint32) uid;
    return TRUE;
  }

  reply = g_dbus_connection_call_sync (connection,
                                       "org.freedesktop.DBus",
                                       "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus",
                                       "GetConnectionUnixUser",
                                       g_variant_new ("(s)", sender),
                                       G_VARIANT_TYPE ("(u)"),
                                       G_DBUS_CALL_FLAGS_NONE,
                                       BOX_DBUS_CALLER_TIMEOUT_MS,
                                       NULL,
                                       error);
  if (reply == NULL)
    return FALSE;
  g_variant_get (reply, "(u)", uid_out);
  return TRUE;
}

/* Runs in a GDBus worker thread: uses only its arguments.  @user_data is
 * the uid boxd runs as. */
static gboolean
box_dbus_daemon_authorize_cb (GDBusInterfaceSkeleton *interface,
                              GDBusMethodInvocation  *invocation,
                              gpointer                user_data)
{
  guint32 self_uid = GPOINTER_TO_UINT (user_data);
  guint32 caller_uid = G_MAXUINT32;
  g_autoptr(GError) error = NULL;

  if (!box_dbus_daemon_get_caller_uid (invocation, &caller_uid, &error)) {
    g_dbus_method_invocation_return_error (invocation, G_DBUS_ERROR, G_DBUS_ERROR_ACCESS_DENIED,
                                           "cannot identify the caller: %s", error->message);
    return FALSE;
  }
  if (caller_uid != 0 && caller_uid != self_uid) {
    g_debug ("refused %s.%s from uid %u",
             g_dbus_method_invocation_get_interface_name (invocation),
             g_dbus_method_invocation_get_method_name (invocation), caller_uid);
    g_dbus_method_invocation_return_error_literal (invocation, G_DBUS_ERROR,
                                                   G_DBUS_ERROR_ACCESS_DENIED,
                                                   "only root or the boxd user may administer box");
    return FALSE;
  }
  return TRUE;
}

/* ---- records -> variants ----------------------------------------------- */

static const char *const empty_strv[] = { NULL };

static void
dict_add_time (GVariantBuilder *dict, const char *key, gint64 usec)
{
  g_autofree char *str = box_time_format (usec);

  g_variant_builder_add (dict, "{sv}", key, g_variant_new_string (str));
}

static GVariant *
project_to_variant (const BoxProject *project)
{
  g_auto(GVariantBuilder) dict = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  const char *const *domains = project->domains != NULL
    ? (const char *const *) project->domains : empty_strv;

  g_variant_builder_add (&dict, "{sv}", "name", g_variant_new_string (project->name));
  g_variant_builder_add (&dict, "{sv}", "domains", g_variant_new_strv (domains, -1));
  dict_add_time (&dict, "created_at", project->created_at);
  return g_variant_builder_end (&dict);
}

static GVariant *
key_to_variant (const BoxKey *key)
{
  g_auto(GVariantBuilder) dict = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);

  g_variant_builder_add (&dict, "{sv}", "id", g_variant_new_string (key->id));
  g_variant_builder_add (&dict, "{sv}", "name", g_variant_new_string (key->name));
  g_variant_builder_add (&dict, "{sv}", "project", g_variant_new_string (key->project));
  dict_add_time (&dict, "created_at", key->created_at);
  return g_variant_builder_end (&dict);
}

static GVariant *
sandbox_to_variant (const BoxSandbox *sandbox)
{
  g_auto(GVariantBuilder) dict = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);

  g_variant_builder_add (&dict, "{sv}", "id", g_variant_new_string (sandbox->id));
  g_variant_builder_add (&dict, "{sv}", "name", g_variant_new_string (sandbox->name));
  g_variant_builder_add (&dict, "{sv}", "project", g_variant_new_string (sandbox->project));
  g_variant_builder_add (&dict, "{sv}", "state",
                         g_variant_new_string (box_sandbox_state_to_string (sandbox->state)));
  g_variant_builder_add (&dict, "{sv}", "template",
                         g_variant_new_string (sandbox->template_name != NULL
                                               ? sandbox->template_name : ""));
  g_variant_builder_add (&dict, "{sv}", "image",
                         g_variant_new_string (sandbox->image != NULL ? sandbox->image : ""));
  g_variant_builder_add (&dict, "{sv}", "cpus", g_variant_new_uint32 (sandbox->resources.cpus));
  g_variant_builder_add (&dict, "{sv}", "memory_mib",
                         g_variant_new_uint32 (sandbox->resources.memory_mib));
  g_variant_builder_add (&dict, "{sv}", "disk_gib",
                         g_variant_new_uint32 (sandbox->resources.disk_gib));
  dict_add_time (&dict, "created_at", sandbox->created_at);
  return g_variant_builder_end (&dict);
}

/* The name of the plugin instance filling a role, or "" for none. */
static const char *
role_plugin_name (gpointer instance)
{
  if (instance == NULL || !BOX_IS_PLUGIN (instance))
    return "";
  return box_plugin_get_name (BOX_PLUGIN (instance));
}

static const char *
str_or_empty (const char *str)
{
  return str != NULL ? str : "";
}

static GVariant *
box_dbus_daemon_build_status (BoxDBusDaemon *self)
{
  g_auto(GVariantBuilder) dict = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_auto(GVariantBuilder) plugins = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE ("a(sss)"));
  BoxConfig *config = box_engine_get_config (self->engine);
  BoxHypervisor *hypervisor = box_engine_get_hypervisor (self->engine);
  BoxPluginLoader *loader = box_engine_get_loader (self->engine);
  GPtrArray *instances = box_engine_get_plugins (self->engine);
  const char *accel = NULL;

  g_variant_builder_add (&dict, "{sv}", "version", g_variant_new_string (PACKAGE_VERSION));
  g_variant_builder_add (&dict, "{sv}", "hypervisor",
                         g_variant_new_string (role_plugin_name (hypervisor)));
  if (hypervisor != NULL)
    accel = box_hypervisor_get_accel (hypervisor);
  g_variant_builder_add (&dict, "{sv}", "accel",
                         g_variant_new_string (accel != NULL ? accel : "none"));
  /* issue 12: a production host must know its VMs are not isolated */
  if (g_strcmp0 (accel, "tcg") == 0)
    g_variant_builder_add (&dict, "{sv}", "accel-warning",
                           g_variant_new_string ("TCG is not a security boundary: a guest "
                                                 "that escapes QEMU runs code on the host"));

  if (loader != NULL) {
    GPtrArray *modules = box_plugin_loader_get_modules (loader);

    for (guint i = 0; modules != NULL && i < modules->len; i++) {
      const BoxPluginModule *module = g_ptr_array_index (modules, i);
      g_autofree char *ifaces = module->interfaces != NULL
        ? g_strjoinv (",", module->interfaces) : g_strdup ("");

      g_variant_builder_add (&plugins, "(sss)", module->name, str_or_empty (module->path), ifaces);
    }
  }
  g_variant_builder_add (&dict, "{sv}", "plugins", g_variant_builder_end (&plugins));

  g_variant_builder_add (&dict, "{sv}", "storage",
                         g_variant_new_string (role_plugin_name (box_engine_get_storage (self->engine))));
  g_variant_builder_add (&dict, "{sv}", "auth",
                         g_variant_new_string (role_plugin_name (box_engine_get_auth (self->engine))));
  g_variant_builder_add (&dict, "{sv}", "network",
                         g_variant_new_string (role_plugin_name (box_engine_get_network (self->engine))));
  g_variant_builder_add (&dict, "{sv}", "broker",
                         g_variant_new_string (role_plugin_name (box_engine_get_broker (self->engine))));
  g_variant_builder_add (&dict, "{sv}", "listen",
                         g_variant_new_string (str_or_empty (config->listen)));
  g_variant_builder_add (&dict, "{sv}", "sandbox_domain",
                         g_variant_new_string (str_or_empty (config->sandbox_domain)));
  g_variant_builder_add (&dict, "{sv}", "data_dir",
                         g_variant_new_string (str_or_empty (config->data_dir)));

  /* each started plugin's own keys, as plugin.<name>.<key> */
  for (guint i = 0; instances != NULL && i < instances->len; i++) {
    BoxPlugin *plugin = g_ptr_array_index (instances, i);
    g_auto(GVariantBuilder) extra = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
    g_autoptr(GVariant) extra_dict = NULL;
    GVariantIter iter;
    const char *key;
    GVariant *value;

    box_plugin_add_status (plugin, &extra);
    extra_dict = g_variant_ref_sink (g_variant_builder_end (&extra));
    g_variant_iter_init (&iter, extra_dict);
    while (g_variant_iter_next (&iter, "{&sv}", &key, &value)) {
      g_autofree char *full = g_strdup_printf ("plugin.%s.%s", box_plugin_get_name (plugin), key);

      g_variant_builder_add (&dict, "{sv}", full, value);
      g_variant_unref (value);
    }
  }

  return g_variant_builder_end (&dict);
}

/* ---- handlers ---------------------------------------------------------- */

static gboolean
handle_get_status (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation, gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);

  box_dbus_admin1_complete_get_status (object, invocation, box_dbus_daemon_build_status (self));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_projects (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation, gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_auto(GVariantBuilder) list = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE ("aa{sv}"));
  g_autoptr(GPtrArray) projects = NULL;
  g_autoptr(GError) error = NULL;

  projects = box_engine_list_projects (self->engine, &error);
  if (projects == NULL)
    return box_dbus_daemon_return_error (invocation, error);
  for (guint i = 0; i < projects->len; i++)
    g_variant_builder_add_value (&list, project_to_variant (g_ptr_array_index (projects, i)));
  box_dbus_admin1_complete_list_projects (object, invocation, g_variant_builder_end (&list));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_create_project (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                       const char *name, const char *const *domains, gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_autoptr(BoxProject) project = NULL;
  g_autoptr(GError) error = NULL;

  project = box_engine_create_project (self->engine, name, domains, &error);
  if (project == NULL)
    return box_dbus_daemon_return_error (invocation, error);
  box_dbus_admin1_complete_create_project (object, invocation, project_to_variant (project));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
delete_project_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  g_autoptr(GError) error = NULL;

  if (!box_engine_delete_project_finish (BOX_ENGINE (source), result, &error)) {
    box_dbus_daemon_return_error (invocation, error);
    return;
  }
  g_dbus_method_invocation_return_value (invocation, NULL);
}

static gboolean
handle_delete_project (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                       const char *name, gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);

  /* not cancelled when the daemon stops: a half-deleted project helps nobody */
  box_engine_delete_project_async (self->engine, name, NULL, delete_project_cb,
                                   g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_set_project_domains (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                            const char *name, const char *const *domains, gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_autoptr(BoxProject) project = NULL;
  g_autoptr(GError) error = NULL;

  project = box_engine_set_project_domains (self->engine, name, domains, &error);
  if (project == NULL)
    return box_dbus_daemon_return_error (invocation, error);
  box_dbus_admin1_complete_set_project_domains (object, invocation, project_to_variant (project));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_get_project_quota (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                          const char *name, gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_auto(GVariantDict) quota_dict = G_VARIANT_DICT_INIT (NULL);
  g_auto(GVariantDict) usage_dict = G_VARIANT_DICT_INIT (NULL);
  g_autoptr(GError) error = NULL;
  BoxQuotaUsage usage;
  BoxQuota quota;

  if (!box_engine_get_quota (self->engine, name, &quota, &usage, &error))
    return box_dbus_daemon_return_error (invocation, error);
  g_variant_dict_insert (&quota_dict, "sandboxes", "u", quota.sandboxes);
  g_variant_dict_insert (&quota_dict, "cpus", "t", (guint64) quota.cpus);
  g_variant_dict_insert (&quota_dict, "memory_mib", "t", (guint64) quota.memory_mib);
  g_variant_dict_insert (&quota_dict, "disk_gib", "t", (guint64) quota.disk_gib);
  g_variant_dict_insert (&usage_dict, "sandboxes", "u", usage.sandboxes);
  g_variant_dict_insert (&usage_dict, "cpus", "t", usage.cpus);
  g_variant_dict_insert (&usage_dict, "memory_mib", "t", usage.memory_mib);
  g_variant_dict_insert (&usage_dict, "disk_mib", "t", usage.disk_mib);
  box_dbus_admin1_complete_get_project_quota (object, invocation, g_variant_dict_end (&quota_dict),
                                              g_variant_dict_end (&usage_dict));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_keys (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                  const char *project, gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_auto(GVariantBuilder) list = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE ("aa{sv}"));
  g_autoptr(GPtrArray) keys = NULL;
  g_autoptr(GError) error = NULL;

  keys = box_engine_list_keys (self->engine, project, &error);
  if (keys == NULL)
    return box_dbus_daemon_return_error (invocation, error);
  for (guint i = 0; i < keys->len; i++)
    g_variant_builder_add_value (&list, key_to_variant (g_ptr_array_index (keys, i)));
  box_dbus_admin1_complete_list_keys (object, invocation, g_variant_builder_end (&list));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_create_key (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                   const char *project, const char *name, gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_autoptr(BoxKey) key = NULL;
  g_autofree char *secret = NULL;
  g_autoptr(GError) error = NULL;

  key = box_engine_create_key (self->engine, project, name, FALSE, &secret, &error);
  if (key == NULL)
    return box_dbus_daemon_return_error (invocation, error);
  box_dbus_admin1_complete_create_key (object, invocation, key_to_variant (key), secret);
  /* the only copy this process keeps goes away now */
  if (secret != NULL)
    memset (secret, 0, strlen (secret));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_delete_key (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                   const char *project, const char *key_id, gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_autoptr(GError) error = NULL;

  if (!box_engine_delete_key (self->engine, project, key_id, &error))
    return box_dbus_daemon_return_error (invocation, error);
  box_dbus_admin1_complete_delete_key (object, invocation);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_rotate_broker_ca (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                         gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_auto(GVariantBuilder) dict = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_autoptr(GError) error = NULL;
  guint sandboxes = 0;

  if (!box_engine_rotate_broker_ca (self->engine, &sandboxes, &error))
    return box_dbus_daemon_return_error (invocation, error);
  g_variant_builder_add (&dict, "{sv}", "sandboxes", g_variant_new_uint32 (sandboxes));
  box_dbus_admin1_complete_rotate_broker_ca (object, invocation, g_variant_builder_end (&dict));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_rotate_signing_key (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                           gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_auto(GVariantBuilder) dict = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_autofree char *kid = NULL;
  g_autofree char *retired_kid = NULL;
  g_autoptr(GError) error = NULL;
  gint64 until = 0;

  if (!box_engine_identity_rotate (self->engine, &kid, &retired_kid, &until, &error))
    return box_dbus_daemon_return_error (invocation, error);
  g_variant_builder_add (&dict, "{sv}", "kid", g_variant_new_string (kid));
  g_variant_builder_add (&dict, "{sv}", "retired_kid", g_variant_new_string (retired_kid));
  dict_add_time (&dict, "retired_until", until);
  box_dbus_admin1_complete_rotate_signing_key (object, invocation,
                                               g_variant_builder_end (&dict));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_sandboxes (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                       gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_auto(GVariantBuilder) list = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE ("aa{sv}"));
  g_autoptr(GPtrArray) sandboxes = NULL;
  g_autoptr(GError) error = NULL;

  sandboxes = box_engine_list_sandboxes (self->engine, NULL, NULL, NULL, &error);
  if (sandboxes == NULL)
    return box_dbus_daemon_return_error (invocation, error);
  for (guint i = 0; i < sandboxes->len; i++)
    g_variant_builder_add_value (&list, sandbox_to_variant (g_ptr_array_index (sandboxes, i)));
  box_dbus_admin1_complete_list_sandboxes (object, invocation, g_variant_builder_end (&list));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* "PROJECT/NAME", an ID, or a NAME one project uses. */
static BoxSandbox *
find_sandbox (BoxDBusDaemon *self, const char *spec, GError **error)
{
  const char *slash = strchr (spec, '/');
  g_autofree char *project = slash != NULL ? g_strndup (spec, (gsize) (slash - spec)) : NULL;

  if ((slash != NULL && (slash == spec || slash[1] == '\0')) || spec[0] == '\0') {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "\"%s\" is not a sandbox: want an ID, PROJECT/NAME or NAME", spec);
    return NULL;
  }
  return box_engine_get_sandbox (self->engine, project, slash != NULL ? slash + 1 : spec, error);
}

static GVariant *
rule_to_variant (const BoxRule *rule, const char *source, guint index)
{
  static const guint16 web[] = { 80, 443 };
  g_auto(GVariantBuilder) dict = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  const guint16 *ports = rule->n_ports > 0 ? rule->ports : web;
  gsize n_ports = rule->n_ports > 0 ? rule->n_ports : G_N_ELEMENTS (web);

  g_variant_builder_add (&dict, "{sv}", "domain", g_variant_new_string (rule->domain));
  g_variant_builder_add (&dict, "{sv}", "action",
                         g_variant_new_string (rule->allow ? "allow" : "deny"));
  g_variant_builder_add (&dict, "{sv}", "ports",
                         g_variant_new_fixed_array (G_VARIANT_TYPE_UINT16, ports,
                                                    rule->allow ? n_ports : 0, sizeof (guint16)));
  g_variant_builder_add (&dict, "{sv}", "source", g_variant_new_string (source));
  g_variant_builder_add (&dict, "{sv}", "index", g_variant_new_uint32 (index));
  return g_variant_builder_end (&dict);
}

static gboolean
handle_get_sandbox_egress (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                           const char *spec, gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_auto(GVariantBuilder) list = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE ("aa{sv}"));
  GPtrArray *defaults = box_engine_get_network_defaults (self->engine);   /* borrowed */
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(GError) error = NULL;

  sandbox = find_sandbox (self, spec, &error);
  if (sandbox == NULL)
    return box_dbus_daemon_return_error (invocation, error);
  for (guint i = 0; sandbox->egress != NULL && i < sandbox->egress->len; i++) {
    const BoxRule *rule = g_ptr_array_index (sandbox->egress, i);

    if (rule->include == NULL) {
      g_variant_builder_add_value (&list, rule_to_variant (rule, "rule", i + 1));
      continue;
    }
    for (guint j = 0; defaults != NULL && j < defaults->len; j++)
      g_variant_builder_add_value (&list, rule_to_variant (g_ptr_array_index (defaults, j),
                                                           "defaults", i + 1));
  }
  box_dbus_admin1_complete_get_sandbox_egress (object, invocation, g_variant_builder_end (&list));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_sandbox_allowed (BoxDBusAdmin1 *object, GDBusMethodInvocation *invocation,
                             const char *spec, gpointer user_data)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (user_data);
  g_auto(GVariantBuilder) list = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE ("aa{sv}"));
  BoxNetwork *network = box_engine_get_network (self->engine);
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(GPtrArray) allowed = NULL;
  g_autoptr(GError) error = NULL;

  sandbox = find_sandbox (self, spec, &error);
  if (sandbox == NULL)
    return box_dbus_daemon_return_error (invocation, error);
  /* unrestricted: every public address; not running: none (nothing to ask) */
  if (sandbox->egress != NULL && sandbox->egress->len > 0 &&
      sandbox->state == BOX_SANDBOX_STATE_RUNNING) {
    if (network == NULL)
      g_set_error_literal (&error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                           "this node has no network plugin");
    else
      allowed = box_network_list_allowed (network, sandbox->id, &error);
    if (allowed == NULL)
      return box_dbus_daemon_return_error (invocation, error);
  }
  for (guint i = 0; allowed != NULL && i < allowed->len; i++) {
    const BoxNetAllowed *entry = g_ptr_array_index (allowed, i);
    g_auto(GVariantBuilder) dict = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);

    g_variant_builder_add (&dict, "{sv}", "address", g_variant_new_string (entry->address));
    g_variant_builder_add (&dict, "{sv}", "port", g_variant_new_uint16 (entry->port));
    g_variant_builder_add (&dict, "{sv}", "expires_s", g_variant_new_uint32 (entry->expires_s));
    g_variant_builder_add_value (&list, g_variant_builder_end (&dict));
  }
  box_dbus_admin1_complete_list_sandbox_allowed (object, invocation,
                                                 g_variant_builder_end (&list));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* ---- the bus name ------------------------------------------------------ */

static void
name_acquired_cb (GDBusConnection *connection, const char *name, gpointer user_data)
{
  g_debug ("owning %s", name);
}

static void
name_lost_cb (GDBusConnection *connection, const char *name, gpointer user_data)
{
  if (connection == NULL)
    g_warning (_("Lost the connection to the bus; %s is no longer available"), name);
  else
    g_warning (_("Cannot own the bus name %s (is another boxd running, or does the bus policy forbid it?)"),
               name);
}

/* ---- lifetime ---------------------------------------------------------- */

gboolean
box_dbus_daemon_start (BoxDBusDaemon *self, GBusType bus_type, GDBusConnection *connection,
                       GError **error)
{
  g_autoptr(BoxDBusAdmin1) skeleton = NULL;

  g_return_val_if_fail (BOX_IS_DBUS_DAEMON (self), FALSE);
  g_return_val_if_fail (connection == NULL || G_IS_DBUS_CONNECTION (connection), FALSE);
  g_return_val_if_fail (self->skeleton == NULL, FALSE);

  if (connection != NULL) {
    self->connection = g_object_ref (connection);
  } else {
    g_autoptr(GError) local_error = NULL;

    self->connection = g_bus_get_sync (bus_type, NULL, &local_error);
    if (self->connection == NULL) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot connect to the %s bus: %s",
                   bus_type == G_BUS_TYPE_SESSION ? "session" : "system", local_error->message);
      return FALSE;
    }
  }

  skeleton = box_dbus_admin1_skeleton_new ();
  g_signal_connect (skeleton, "g-authorize-method",
                    G_CALLBACK (box_dbus_daemon_authorize_cb), GUINT_TO_POINTER ((guint) getuid ()));
  g_signal_connect_object (skeleton, "handle-get-status", G_CALLBACK (handle_get_status), self, 0);
  g_signal_connect_object (skeleton, "handle-list-projects", G_CALLBACK (handle_list_projects), self, 0);
  g_signal_connect_object (skeleton, "handle-create-project", G_CALLBACK (handle_create_project), self, 0);
  g_signal_connect_object (skeleton, "handle-delete-project", G_CALLBACK (handle_delete_project), self, 0);
  g_signal_connect_object (skeleton, "handle-set-project-domains",
                           G_CALLBACK (handle_set_project_domains), self, 0);
  g_signal_connect_object (skeleton, "handle-get-project-quota",
                           G_CALLBACK (handle_get_project_quota), self, 0);
  g_signal_connect_object (skeleton, "handle-list-keys", G_CALLBACK (handle_list_keys), self, 0);
  g_signal_connect_object (skeleton, "handle-create-key", G_CALLBACK (handle_create_key), self, 0);
  g_signal_connect_object (skeleton, "handle-delete-key", G_CALLBACK (handle_delete_key), self, 0);
  g_signal_connect_object (skeleton, "handle-rotate-signing-key",
                           G_CALLBACK (handle_rotate_signing_key), self, 0);
  g_signal_connect_object (skeleton, "handle-rotate-broker-ca",
                           G_CALLBACK (handle_rotate_broker_ca), self, 0);
  g_signal_connect_object (skeleton, "handle-list-sandboxes",
                           G_CALLBACK (handle_list_sandboxes), self, 0);
  g_signal_connect_object (skeleton, "handle-get-sandbox-egress",
                           G_CALLBACK (handle_get_sandbox_egress), self, 0);
  g_signal_connect_object (skeleton, "handle-list-sandbox-allowed",
                           G_CALLBACK (handle_list_sandbox_allowed), self, 0);

  {
    g_autoptr(GError) local_error = NULL;

    if (!g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (skeleton), self->connection,
                                           BOX_DBUS_PATH, &local_error)) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot export %s: %s",
                   BOX_DBUS_PATH, local_error->message);
      g_clear_object (&self->connection);
      return FALSE;
    }
  }
  self->skeleton = g_steal_pointer (&skeleton);

  /* A peer-to-peer connection (no unique name) has no bus to own a name on:
   * the peer talks to the object directly. */
  if (g_dbus_connection_get_unique_name (self->connection) != NULL) {
    self->owner_id = g_bus_own_name_on_connection (self->connection, BOX_DBUS_NAME,
                                                   G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE,
                                                   name_acquired_cb, name_lost_cb, NULL, NULL);
  }
  return TRUE;
}

void
box_dbus_daemon_stop (BoxDBusDaemon *self)
{
  g_return_if_fail (BOX_IS_DBUS_DAEMON (self));

  if (self->owner_id != 0) {
    g_bus_unown_name (self->owner_id);
    self->owner_id = 0;
  }
  if (self->skeleton != NULL) {
    g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (self->skeleton));
    g_signal_handlers_disconnect_by_data (self->skeleton, self);
    g_clear_object (&self->skeleton);
  }
  g_clear_object (&self->connection);
}

static void
box_dbus_daemon_dispose (GObject *object)
{
  BoxDBusDaemon *self = BOX_DBUS_DAEMON (object);

  box_dbus_daemon_stop (self);
  g_clear_object (&self->engine);
  G_OBJECT_CLASS (box_dbus_daemon_parent_class)->dispose (object);
}

static void
box_dbus_daemon_class_init (BoxDBusDaemonClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = box_dbus_daemon_dispose;
}

static void
box_dbus_daemon_init (BoxDBusDaemon *self)
{
}

BoxDBusDaemon *
box_dbus_daemon_new (BoxEngine *engine)
{
  BoxDBusDaemon *self;

  g_return_val_if_fail (BOX_IS_ENGINE (engine), NULL);

  self = g_object_new (BOX_TYPE_DBUS_DAEMON, NULL);
  self->engine = g_object_ref (engine);
  return self;
}
