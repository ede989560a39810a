/* box-plugin-loader.c: finds and checks plugin modules; see box-plugin-loader.h.
 *
 * A plugin runs inside boxd with all of boxd's rights, so a file is only
 * opened when nobody but root or boxd's own user could have written it
 * (the check NetworkManager applies to its device plugins).  A module is
 * made resident as soon as its type may have been registered: GType cannot
 * forget a type, so its code must never be unmapped.
 */
#include "config.h"

#include <errno.h>
#include <gmodule.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box-auth.h"
#include "box-broker.h"
#include "box-hypervisor.h"
#include "box-network.h"
#include "box-plugin-loader.h"
#include "box-storage.h"

struct _BoxPluginLoader {
  GObject     parent_instance;
  GPtrArray  *modules;      /* BoxPluginModule*, load order */
  GHashTable *by_name;      /* name -> BoxPluginModule* (borrowed) */
};

G_DEFINE_FINAL_TYPE (BoxPluginLoader, box_plugin_loader, G_TYPE_OBJECT)

static const struct {
  const char *name;
  GType     (*get_type) (void);
} box_plugin_interfaces[] = {
  { "storage",    box_storage_get_type },
  { "auth",       box_auth_get_type },
  { "hypervisor", box_hypervisor_get_type },
  { "network",    box_network_get_type },
  { "broker",     box_broker_get_type },
};

static void
box_plugin_module_free (BoxPluginModule *module)
{
  g_free (module->name);
  g_free (module->path);
  g_strfreev (module->interfaces);
  g_free (module);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxPluginModule, box_plugin_module_free)

static void
box_plugin_loader_finalize (GObject *object)
{
  BoxPluginLoader *self = BOX_PLUGIN_LOADER (object);

  g_hash_table_unref (self->by_name);
  g_ptr_array_unref (self->modules);
  G_OBJECT_CLASS (box_plugin_loader_parent_class)->finalize (object);
}

static void
box_plugin_loader_class_init (BoxPluginLoaderClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = box_plugin_loader_finalize;
}

static void
box_plugin_loader_init (BoxPluginLoader *self)
{
  self->modules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_plugin_module_free);
  self->by_name = g_hash_table_new (g_str_hash, g_str_equal);
}

BoxPluginLoader *
box_plugin_loader_new (void)
{
  return g_object_new (BOX_TYPE_PLUGIN_LOADER, NULL);
}

GType
box_plugin_interface_type (const char *iface_name)
{
  g_return_val_if_fail (iface_name != NULL, G_TYPE_INVALID);

  for (gsize i = 0; i < G_N_ELEMENTS (box_plugin_interfaces); i++) {
    if (g_strcmp0 (box_plugin_interfaces[i].name, iface_name) == 0)
      return box_plugin_interfaces[i].get_type ();
  }
  return G_TYPE_INVALID;
}

gboolean
box_plugin_file_is_safe (const char *path, GError **error)
{
  struct stat st;
  uid_t euid = geteuid ();

  g_return_val_if_fail (path != NULL, FALSE);

  /* stat() follows a symlink: what is checked is what dlopen() maps. */
  if (stat (path, &st) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "cannot stat: %s", g_strerror (saved_errno));
    return FALSE;
  }
  if (!S_ISREG (st.st_mode)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, "not a regular file");
    return FALSE;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_PERMISSION_DENIED,
                 "writable by %s (mode %04o)",
                 (st.st_mode & S_IWOTH) != 0 ? "everyone" : "its group",
                 (guint) (st.st_mode & 07777));
    return FALSE;
  }
  if (st.st_uid != 0 && st.st_uid != euid) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_PERMISSION_DENIED,
                 "owned by uid %u, not root or boxd's user (uid %u)",
                 (guint) st.st_uid, (guint) euid);
    return FALSE;
  }
  return TRUE;
}

static char **
box_plugin_type_interfaces (GType type)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  for (gsize i = 0; i < G_N_ELEMENTS (box_plugin_interfaces); i++) {
    if (g_type_is_a (type, box_plugin_interfaces[i].get_type ()))
      g_strv_builder_add (builder, box_plugin_interfaces[i].name);
  }
  return g_strv_builder_end (builder);
}

/* Opens @path and checks its entry point.  On success the module is
 * resident and the returned record complete. */
static BoxPluginModule *
box_plugin_loader_open (BoxPluginLoader *self, const char *path, GError **error)
{
  GModule *module;
  gpointer symbol = NULL;
  BoxPluginQueryFunc query;
  const BoxPluginInfo *info;
  const BoxPluginModule *existing;
  g_autoptr(BoxPluginModule) result = NULL;

  module = g_module_open (path, G_MODULE_BIND_LOCAL | G_MODULE_BIND_LAZY);
  if (module == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "not loadable: %s", g_module_error ());
    return NULL;
  }
  if (!g_module_symbol (module, BOX_PLUGIN_QUERY_SYMBOL, &symbol) || symbol == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "no entry point %s()", BOX_PLUGIN_QUERY_SYMBOL);
    g_module_close (module);
    return NULL;
  }
  query = (BoxPluginQueryFunc) symbol;
  info = query ();
  if (info == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "%s() returned nothing", BOX_PLUGIN_QUERY_SYMBOL);
    g_module_close (module);
    return NULL;
  }
  if (!box_plugin_info_check (info, error)) {
    g_module_close (module);
    return NULL;
  }
  existing = g_hash_table_lookup (self->by_name, info->name);
  if (existing != NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "duplicate plugin name \"%s\" (already loaded from %s)",
                 info->name, existing->path);
    g_module_close (module);
    return NULL;
  }
  if (info->get_type == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, "no type getter");
    g_module_close (module);
    return NULL;
  }

  /* From here the module may have registered types: it stays mapped
   * whether or not it is accepted. */
  g_module_make_resident (module);

  result = g_new0 (BoxPluginModule, 1);
  result->type = info->get_type ();
  if (result->type == G_TYPE_INVALID || !g_type_is_a (result->type, BOX_TYPE_PLUGIN)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "its type %s is not a BoxPlugin",
                 result->type != G_TYPE_INVALID ? g_type_name (result->type) : "(invalid)");
    return NULL;
  }
  if (G_TYPE_IS_ABSTRACT (result->type)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "its type %s is abstract", g_type_name (result->type));
    return NULL;
  }
  result->name = g_strdup (info->name);
  result->path = g_strdup (path);
  result->info = info;
  result->interfaces = box_plugin_type_interfaces (result->type);
  return g_steal_pointer (&result);
}

const BoxPluginModule *
box_plugin_loader_load_file (BoxPluginLoader *self, const char *path, GError **error)
{
  BoxPluginModule *module;

  g_return_val_if_fail (BOX_IS_PLUGIN_LOADER (self), NULL);
  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!g_module_supported ()) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                         "this system cannot load modules");
    return NULL;
  }
  if (!box_plugin_file_is_safe (path, error))
    return NULL;
  module = box_plugin_loader_open (self, path, error);
  if (module == NULL)
    return NULL;

  g_ptr_array_add (self->modules, module);
  g_hash_table_insert (self->by_name, module->name, module);
  g_debug ("plugin %s loaded from %s", module->name, module->path);
  return module;
}

static gint
box_plugin_compare_names (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const char *const *) a, *(const char *const *) b);
}

gboolean
box_plugin_loader_load_dir (BoxPluginLoader *self, const char *dir, GError **error)
{
  g_autoptr(GDir) gdir = NULL;
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error_local = NULL;
  const char *entry;

  g_return_val_if_fail (BOX_IS_PLUGIN_LOADER (self), FALSE);
  g_return_val_if_fail (dir != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  gdir = g_dir_open (dir, 0, &error_local);
  if (gdir == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "cannot read the plugin directory %s: %s", dir, error_local->message);
    return FALSE;
  }
  while ((entry = g_dir_read_name (gdir)) != NULL) {
    if (g_str_has_suffix (entry, ".so"))
      g_ptr_array_add (names, g_strdup (entry));
  }
  g_ptr_array_sort (names, box_plugin_compare_names);

  for (guint i = 0; i < names->len; i++) {
    g_autofree char *path = g_build_filename (dir, g_ptr_array_index (names, i), NULL);
    g_autoptr(GError) error_file = NULL;

    if (box_plugin_loader_load_file (self, path, &error_file) == NULL) {
      g_log_structured (G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                        "BOX_PLUGIN_PATH", path,
                        "MESSAGE", "plugin %s refused: %s", path, error_file->message);
    }
  }
  return TRUE;
}

const BoxPluginModule *
box_plugin_loader_lookup (BoxPluginLoader *self, const char *name)
{
  g_return_val_if_fail (BOX_IS_PLUGIN_LOADER (self), NULL);
  g_return_val_if_fail (name != NULL, NULL);

  return g_hash_table_lookup (self->by_name, name);
}

GPtrArray *
box_plugin_loader_get_modules (BoxPluginLoader *self)
{
  g_return_val_if_fail (BOX_IS_PLUGIN_LOADER (self), NULL);

  return self->modules;
}

static gint
compare_priority (gconstpointer a, gconstpointer b)
{
  const BoxPluginModule *ma = *(const BoxPluginModule *const *) a;
  const BoxPluginModule *mb = *(const BoxPluginModule *const *) b;

  /* highest first; equal priorities by name, so the choice is stable */
  if (ma->info->priority != mb->info->priority)
    return ma->info->priority > mb->info->priority ? -1 : 1;
  return g_strcmp0 (ma->name, mb->name);
}

const BoxPluginModule *
box_plugin_loader_choose (BoxPluginLoader *self, GType iface_type, guint32 exclude_flags,
                          BoxPluginLoaderContextFunc make_context, gpointer user_data,
                          GError **error)
{
  g_autoptr(GPtrArray) candidates = g_ptr_array_new ();
  g_autoptr(GString) refused = g_string_new (NULL);

  g_return_val_if_fail (BOX_IS_PLUGIN_LOADER (self), NULL);
  g_return_val_if_fail (G_TYPE_IS_INTERFACE (iface_type), NULL);

  for (guint i = 0; i < self->modules->len; i++) {
    BoxPluginModule *module = g_ptr_array_index (self->modules, i);

    if (module->info->priority > 0 && g_type_is_a (module->type, iface_type) &&
        (module->info->flags & exclude_flags) == 0)
      g_ptr_array_add (candidates, module);
  }
  g_ptr_array_sort (candidates, compare_priority);

  for (guint i = 0; i < candidates->len; i++) {
    const BoxPluginModule *module = g_ptr_array_index (candidates, i);
    g_autoptr(BoxPluginContext) context = NULL;
    g_autoptr(GError) local_error = NULL;

    if (module->info->probe == NULL)
      return module;
    context = make_context != NULL ? make_context (module->name, user_data) :
              g_object_new (BOX_TYPE_PLUGIN_CONTEXT, "name", module->name, NULL);
    if (module->info->probe (context, &local_error))
      return module;
    g_info ("plugin %s cannot work here: %s", module->name,
            local_error != NULL ? local_error->message : "its probe says no");
    g_string_append_printf (refused, "%s%s: %s", refused->len > 0 ? "; " : "", module->name,
                            local_error != NULL ? local_error->message : "its probe says no");
  }
  if (refused->len > 0)
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no %s plugin works here (%s)",
                 g_type_name (iface_type), refused->str);
  else
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no %s plugin is installed",
                 g_type_name (iface_type));
  return NULL;
}
