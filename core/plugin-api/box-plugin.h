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
 *   2. for each role the configuration assigns to the plugin (or that
 *      `auto` chose for it: the highest priority among the plugins whose
 *      probe says they work here), the engine creates one instance
 *      (g_object_new (info->get_type (), "name", ..., "context", ..., NULL))
 *      with a BoxPluginContext, the plugin's whole view of boxd;
 *   3. start() runs once, storage first, then auth, network, hypervisor,
 *      broker; a FALSE return stops boxd with the error logged;
 *   4. stop() runs once at shutdown, in the reverse order.
 *
 * The ABI version changes whenever BoxPluginInfo, BoxPluginClass or an
 * interface struct changes incompatibly; interfaces grow into their padding.
 * It is also the soname of the SDK library (libbox-plugin-1.so.1), and
 * tests/abi compares the library with the baseline of this version.
 *
 * Thread contract: box_plugin_query(), the probe, the constructor, start(),
 * stop() and add_status() run on the main thread; the getters below may be
 * called from any thread.
 */
#pragma once

#include <gio/gio.h>

#include "box-error.h"
#include "box-export.h"
#include "box-records.h"

G_BEGIN_DECLS

#define BOX_PLUGIN_ABI_VERSION 1

typedef struct _BoxPluginContext BoxPluginContext;   /* box-plugin-context.h */

/**
 * BoxPluginFlags:
 * @BOX_PLUGIN_FLAG_NONE: nothing special
 * @BOX_PLUGIN_FLAG_NO_VM: a hypervisor that runs no VM (a test double):
 *   `auto` takes it only when no other hypervisor works, with a warning,
 *   and gives it no network
 */
typedef enum {
  BOX_PLUGIN_FLAG_NONE  = 0,
  BOX_PLUGIN_FLAG_NO_VM = 1 << 0,
} BoxPluginFlags;

/**
 * BoxPluginProbeFunc:
 * @context: the context the plugin would get
 * @error: why it cannot work here
 *
 * Can this plugin work on this host?  Cheap and without side effects: it
 * runs for every candidate of a role set to `auto`, before any plugin
 * starts, on the main thread.
 *
 * Returns: %TRUE when it can
 */
typedef gboolean (*BoxPluginProbeFunc) (BoxPluginContext *context, GError **error);

/**
 * BoxPluginInfo:
 * @abi_version: %BOX_PLUGIN_ABI_VERSION at build time
 * @name: the plugin's name, e.g. "mystore"; [a-z0-9_-]+
 * @description: one line saying what it is
 * @get_type: the plugin type's getter
 * @priority: for roles set to `auto`: the highest priority whose probe
 *   passes wins each role the plugin's type implements; 0 means never
 *   chosen by auto (100 the usual choice, 50 an alternative, 1 a last
 *   resort)
 * @flags: #BoxPluginFlags
 * @probe: (nullable): can it work here?  %NULL: wherever it loads
 *
 * What a plugin's box_plugin_query() returns (BOX_PLUGIN_DEFINE() writes
 * it).  A boxed type whose copy is shallow (the strings are static).
 */
typedef struct {
  guint32             abi_version;   /* BOX_PLUGIN_ABI_VERSION at build time */
  const char         *name;          /* "mystore"; [a-z0-9_-]+ */
  const char         *description;
  GType             (*get_type) (void);
  /* For roles set to `auto`: the highest priority whose probe passes wins
   * each role the plugin's type implements; 0 means never chosen by auto.
   * Conventions: 100 the usual choice, 50 an alternative, 1 a last resort. */
  gint32              priority;
  guint32             flags;         /* BoxPluginFlags */
  BoxPluginProbeFunc  probe;         /* NULL: works wherever it loads */
  /*< private >*/
  gpointer            reserved[6];
} BoxPluginInfo;

/**
 * BoxPluginQueryFunc:
 *
 * The type of box_plugin_query(), the one symbol a plugin exports.
 *
 * Returns: (transfer none): the plugin's static info
 */
typedef const BoxPluginInfo *(*BoxPluginQueryFunc) (void);

#define BOX_TYPE_PLUGIN_INFO (box_plugin_info_get_type ())
BOX_PLUGIN_API
GType box_plugin_info_get_type (void) G_GNUC_CONST;
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxPluginInfo, g_free)

/**
 * box_plugin_info_check:
 * @info: what a plugin's box_plugin_query() returned
 * @error: %BOX_ERROR_INVALID saying why it does not pass
 *
 * The checks boxd's loader makes of a plugin's info: the ABI version this
 * SDK has, a name of 1 to 64 of [a-z0-9_-].  (It also keeps BoxPluginInfo
 * in the SDK's ABI, so that tests/abi sees a change of its layout.)
 *
 * Returns: %TRUE when @info passes; BOX_ERROR_INVALID saying why otherwise
 */
BOX_PLUGIN_API
gboolean box_plugin_info_check (const BoxPluginInfo *info, GError **error);

#define BOX_PLUGIN_QUERY_SYMBOL "box_plugin_query"

/* A plugin that `auto` never chooses: name it in boxd.conf to use it. */
#define BOX_PLUGIN_DEFINE(plugin_name, plugin_description, type_getter)  \
  BOX_PLUGIN_DEFINE_FULL (plugin_name, plugin_description, type_getter, 0, 0, NULL)

#define BOX_PLUGIN_DEFINE_FULL(plugin_name, plugin_description, type_getter, \
                               plugin_priority, plugin_flags, probe_func)      \
  G_MODULE_EXPORT const BoxPluginInfo *box_plugin_query (void);         \
  G_MODULE_EXPORT const BoxPluginInfo *                                  \
  box_plugin_query (void)                                                \
  {                                                                      \
    static const BoxPluginInfo info = {                                  \
      .abi_version = BOX_PLUGIN_ABI_VERSION,                             \
      .name = plugin_name,                                               \
      .description = plugin_description,                                 \
      .get_type = type_getter,                                           \
      .priority = plugin_priority,                                       \
      .flags = plugin_flags,                                             \
      .probe = probe_func,                                               \
    };                                                                   \
    return &info;                                                        \
  }

/**
 * BoxPluginClass:
 * @parent_class: the parent class
 * @start: acquires resources; may block briefly; %FALSE with a #BoxErrorCode
 *   refuses to run (boxd then exits with the message)
 * @stop: releases everything; the instance is unreferenced afterwards
 * @add_status: adds "key" -> #GVariant pairs describing the plugin's state
 *   to the D-Bus status (e.g. "accel" -> "tcg")
 *
 * The lifecycle of a plugin, all on the main thread.
 */

/**
 * BoxPlugin:
 *
 * The base class of every plugin.  A plugin's type subclasses it and
 * implements one or more of #BoxStorage, #BoxAuth, #BoxHypervisor,
 * #BoxNetwork and #BoxBroker.  boxd makes one instance per role with its
 * #BoxPluginContext, runs start() once (storage first, then auth, network,
 * hypervisor, broker) and stop() once at shutdown, in the reverse order.
 */
#define BOX_TYPE_PLUGIN (box_plugin_get_type ())
BOX_PLUGIN_API
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

  /*< private >*/
  gpointer padding[12];
};

BOX_PLUGIN_API
const char *box_plugin_get_name        (BoxPlugin *self);
/**
 * box_plugin_get_context:
 *
 * Returns: (transfer none): the plugin's view of boxd; a context with no
 *   configuration and no data directory when the plugin was made without one
 */
BOX_PLUGIN_API
BoxPluginContext *box_plugin_get_context (BoxPlugin *self);
/**
 * box_plugin_get_state_dir:
 *
 * <data-dir>/<plugin name>, created 0700 on first call
 * (box_plugin_context_get_state_dir()).
 *
 * Returns: (nullable): the directory
 */
BOX_PLUGIN_API
const char *box_plugin_get_state_dir   (BoxPlugin *self);
/**
 * box_plugin_get_config:
 * @fallback: (nullable): the value when unset
 *
 * Reads key @key of group [plugin.<name>] in boxd.conf
 * (box_plugin_context_get_string()).
 *
 * Returns: (transfer full) (nullable): the value
 */
BOX_PLUGIN_API
char       *box_plugin_get_config      (BoxPlugin *self, const char *key, const char *fallback);
BOX_PLUGIN_API
gboolean    box_plugin_start           (BoxPlugin *self, GCancellable *cancellable, GError **error);
BOX_PLUGIN_API
void        box_plugin_stop            (BoxPlugin *self);
BOX_PLUGIN_API
void        box_plugin_add_status      (BoxPlugin *self, GVariantBuilder *dict);

G_END_DECLS
