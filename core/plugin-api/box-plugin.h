/* box-plugin.h: the plugin contract.
 *
 * A plugin is a shared module that exports exactly one symbol,
 * box_plugin_query(), returning a BoxPluginInfo.  Its type subclasses
 * BoxPlugin and implements one or more of the service interfaces
 * (BoxStorage, BoxAuth, BoxHypervisor, BoxNetwork, BoxBroker) with
 * G_IMPLEMENT_INTERFACE.  Use BOX_PLUGIN_DEFINE() to export the entry point.
 *
 * Lifecycle, all on the main thread:
 *   1. the loader checks the file (regular, not group/world-writable, owned
 *      by root or the daemon's user), opens it resident, checks abi_version;
 *   2. for each interface the configuration assigns to the plugin, the
 *      engine creates one instance (g_object_new (info->get_type (),
 *      "name", ..., "engine", ..., NULL));
 *   3. start() runs once, storage first, then auth, network, hypervisor,
 *      broker; a FALSE return stops boxd with the error logged;
 *   4. stop() runs once at shutdown, in the reverse order.
 *
 * The ABI version changes whenever BoxPluginInfo, BoxPluginClass or an
 * interface struct changes incompatibly; interfaces grow into their padding.
 */
#pragma once

#include <gio/gio.h>

#include "box-error.h"
#include "box-records.h"

G_BEGIN_DECLS

#define BOX_PLUGIN_ABI_VERSION 1

typedef struct _BoxEngine BoxEngine;

typedef struct {
  guint32       abi_version;   /* BOX_PLUGIN_ABI_VERSION at build time */
  const char   *name;          /* "sqlite"; [a-z0-9_-]+ */
  const char   *description;
  GType       (*get_type) (void);
  gpointer      reserved[8];
} BoxPluginInfo;

typedef const BoxPluginInfo *(*BoxPluginQueryFunc) (void);

#define BOX_PLUGIN_QUERY_SYMBOL "box_plugin_query"

#define BOX_PLUGIN_DEFINE(plugin_name, plugin_description, type_getter)  \
  G_MODULE_EXPORT const BoxPluginInfo *box_plugin_query (void);         \
  G_MODULE_EXPORT const BoxPluginInfo *                                  \
  box_plugin_query (void)                                                \
  {                                                                      \
    static const BoxPluginInfo info = {                                  \
      .abi_version = BOX_PLUGIN_ABI_VERSION,                             \
      .name = plugin_name,                                               \
      .description = plugin_description,                                 \
      .get_type = type_getter,                                           \
    };                                                                   \
    return &info;                                                        \
  }

#define BOX_TYPE_PLUGIN (box_plugin_get_type ())
G_DECLARE_DERIVABLE_TYPE (BoxPlugin, box_plugin, BOX, PLUGIN, GObject)

struct _BoxPluginClass {
  GObjectClass parent_class;

  /* Acquire resources; may block briefly.  Return FALSE with a BOX_ERROR
   * to refuse to run (boxd then exits with the message). */
  gboolean (*start)       (BoxPlugin     *self,
                           GCancellable  *cancellable,
                           GError       **error);
  /* Release everything; the instance is unreferenced afterwards. */
  void     (*stop)        (BoxPlugin     *self);
  /* Add "key" -> GVariant pairs describing the plugin's state to the
   * D-Bus status (e.g. "accel" -> "tcg"). */
  void     (*add_status)  (BoxPlugin       *self,
                           GVariantBuilder *dict);

  gpointer padding[12];
};

const char *box_plugin_get_name        (BoxPlugin *self);
BoxEngine  *box_plugin_get_engine      (BoxPlugin *self);
/* <data-dir>/<plugin name>, created 0700 on first call. */
const char *box_plugin_get_state_dir   (BoxPlugin *self);
/* Reads key @key of group [plugin.<name>] in boxd.conf; @fallback when unset. */
char       *box_plugin_get_config      (BoxPlugin *self, const char *key, const char *fallback);
gboolean    box_plugin_start           (BoxPlugin *self, GCancellable *cancellable, GError **error);
void        box_plugin_stop            (BoxPlugin *self);
void        box_plugin_add_status      (BoxPlugin *self, GVariantBuilder *dict);

G_END_DECLS
