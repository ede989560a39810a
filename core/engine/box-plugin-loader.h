/* box-plugin-loader.h: finds and checks plugin modules. */
#pragma once

#include "box-plugin.h"
#include "box-plugin-context.h"

G_BEGIN_DECLS

typedef struct {
  char                *name;
  char                *path;
  const BoxPluginInfo *info;      /* points into the resident module */
  GType                type;
  /* "storage", "auth", "hypervisor", "network", "broker" the type implements */
  char               **interfaces;
} BoxPluginModule;

#define BOX_TYPE_PLUGIN_LOADER (box_plugin_loader_get_type ())
G_DECLARE_FINAL_TYPE (BoxPluginLoader, box_plugin_loader, BOX, PLUGIN_LOADER, GObject)

BoxPluginLoader       *box_plugin_loader_new        (void);
/* Loads every *.so in @dir.  A file that fails a check is skipped with a
 * warning saying why (wrong owner or mode, not loadable, no entry symbol,
 * wrong ABI version, duplicate name); only an unreadable @dir is an error. */
gboolean               box_plugin_loader_load_dir   (BoxPluginLoader *self,
                                                     const char *dir,
                                                     GError **error);
/* Checks and loads a single file; the error says why it was refused. */
const BoxPluginModule *box_plugin_loader_load_file  (BoxPluginLoader *self,
                                                     const char *path,
                                                     GError **error);
const BoxPluginModule *box_plugin_loader_lookup     (BoxPluginLoader *self,
                                                     const char *name);
/* BoxPluginModule*, in load order */
GPtrArray             *box_plugin_loader_get_modules (BoxPluginLoader *self);
/* The GType of the interface named "storage", "auth", ... or G_TYPE_INVALID */
GType                  box_plugin_interface_type    (const char *iface_name);

/* Makes the context a candidate's probe gets (a new reference). */
typedef BoxPluginContext *(*BoxPluginLoaderContextFunc) (const char *plugin_name,
                                                         gpointer    user_data);

/* `auto`: among the loaded plugins whose type implements @iface_type, whose
 * priority is above 0 and whose flags share nothing with @exclude_flags,
 * the highest priority (then the first name) whose probe passes (a plugin
 * without a probe passes).  NULL with BOX_ERROR_NOT_FOUND saying which
 * refused and why when none.  @make_context may be NULL (an empty context). */
const BoxPluginModule *box_plugin_loader_choose     (BoxPluginLoader            *self,
                                                     GType                       iface_type,
                                                     guint32                     exclude_flags,
                                                     BoxPluginLoaderContextFunc  make_context,
                                                     gpointer                    user_data,
                                                     GError                    **error);

/* The checks the loader applies to a file, exposed for tests. */
gboolean               box_plugin_file_is_safe      (const char *path, GError **error);

G_END_DECLS
