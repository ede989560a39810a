/* box-plugin-context.h: what a plugin gets from boxd.
 *
 * boxd gives every plugin instance a BoxPluginContext
 * (box_plugin_get_context()): its name, its section [plugin.<name>] of
 * boxd.conf with typed getters, its state directory, the store if it is a
 * store's client (every plugin but the storage plugin), the network if it
 * is the hypervisor, a way to connect to a VM's guest agent, and logging.
 * It is all a plugin sees of the daemon; the engine itself is not part of
 * the SDK.
 *
 * Thread contract: the getters of the configuration, the name and the state
 * directory may be called from any thread (they read values fixed before the
 * plugin started).  box_plugin_context_get_storage(),
 * box_plugin_context_get_network() and box_plugin_context_new_agent() are
 * main-thread calls, and so are the calls a plugin makes on the objects they
 * return, unless that interface's header says otherwise.
 */
#pragma once

#include <gio/gio.h>

#include "box-agent.h"
#include "box-export.h"
#include "box-network.h"
#include "box-storage.h"

G_BEGIN_DECLS

#define BOX_TYPE_PLUGIN_CONTEXT (box_plugin_context_get_type ())
BOX_PLUGIN_API
G_DECLARE_FINAL_TYPE (BoxPluginContext, box_plugin_context, BOX, PLUGIN_CONTEXT, GObject)

/**
 * BoxAgentFactory:
 * @stream: the VM's byte stream to its agent
 *
 * How boxd makes its agent client; set by boxd on the contexts it creates.
 *
 * Returns: (transfer full): a new agent, not connected yet
 */
typedef BoxAgent *(*BoxAgentFactory) (GIOStream *stream);

BOX_PLUGIN_API
const char  *box_plugin_context_get_name      (BoxPluginContext *self);
/**
 * box_plugin_context_get_state_dir:
 *
 * <data-dir>/<plugin name>, created with mode 0700 on the first call.
 *
 * Returns: (nullable): the directory, or %NULL (with a warning) when boxd
 *   has no data directory
 */
BOX_PLUGIN_API
const char  *box_plugin_context_get_state_dir (BoxPluginContext *self);
/**
 * box_plugin_context_get_storage:
 *
 * Returns: (transfer none) (nullable): the store, for plugins that keep
 *   records in it (the storage plugin itself gets %NULL)
 */
BOX_PLUGIN_API
BoxStorage  *box_plugin_context_get_storage   (BoxPluginContext *self);
/**
 * box_plugin_context_get_network:
 *
 * Returns: (transfer none) (nullable): the network plugin, for the
 *   hypervisor, which attaches and detaches its VMs; %NULL when sandboxes
 *   have no network
 */
BOX_PLUGIN_API
BoxNetwork  *box_plugin_context_get_network   (BoxPluginContext *self);
/**
 * box_plugin_context_new_agent:
 * @stream: the VM's byte stream to its guest agent (a reference is taken)
 * @error: BOX_ERROR_UNSUPPORTED when the context was made without an agent
 *   factory (a test's)
 *
 * Returns: (transfer full) (nullable): a new agent client; start it with
 *   box_agent_connect_async()
 */
BOX_PLUGIN_API
BoxAgent    *box_plugin_context_new_agent     (BoxPluginContext *self,
                                               GIOStream        *stream,
                                               GError          **error);

/* ---- configuration: [plugin.<name>] in boxd.conf ---------------------- */

/**
 * box_plugin_context_get_string:
 * @key: the key
 * @fallback: (nullable): the value when @key is unset
 *
 * Returns: (transfer full) (nullable): the value, surrounding blanks removed
 */
BOX_PLUGIN_API
char        *box_plugin_context_get_string    (BoxPluginContext *self,
                                               const char       *key,
                                               const char       *fallback);
/**
 * box_plugin_context_get_uint:
 * @value: (out): the value
 *
 * A decimal number from 0 to @max; @fallback when unset.  Anything else is
 * BOX_ERROR_INVALID "[plugin.<name>] <key>: <why>".
 */
BOX_PLUGIN_API
gboolean     box_plugin_context_get_uint      (BoxPluginContext *self,
                                               const char       *key,
                                               guint64           fallback,
                                               guint64           max,
                                               guint64          *value,
                                               GError          **error);
/**
 * box_plugin_context_get_bool:
 * @value: (out): the value
 *
 * true/false, yes/no, on/off, 1/0 (any case); @fallback when unset.
 */
BOX_PLUGIN_API
gboolean     box_plugin_context_get_bool      (BoxPluginContext *self,
                                               const char       *key,
                                               gboolean          fallback,
                                               gboolean         *value,
                                               GError          **error);
/**
 * box_plugin_context_get_strv:
 * @fallback: (nullable) (array zero-terminated=1): the list when unset
 *
 * A list separated by commas or semicolons, each item stripped, empty
 * items dropped ("a, b;c" is a, b, c).
 *
 * Returns: (transfer full) (array zero-terminated=1): the items
 */
BOX_PLUGIN_API
char       **box_plugin_context_get_strv      (BoxPluginContext   *self,
                                               const char         *key,
                                               const char * const *fallback);
/**
 * box_plugin_context_get_size:
 * @value: (out): the size in bytes
 *
 * A byte count: a whole number with an optional binary unit K, M, G or T
 * (also KiB, MiB ...; KB etc. are binary too): "512M", "2G", "4096".
 * @fallback when unset.
 */
BOX_PLUGIN_API
gboolean     box_plugin_context_get_size      (BoxPluginContext *self,
                                               const char       *key,
                                               guint64           fallback,
                                               guint64          *value,
                                               GError          **error);

/**
 * box_plugin_context_log:
 * @level: one of G_LOG_LEVEL_*
 * @format: printf-style
 *
 * Logs through GLib's structured log with the domain "box-<name>", so
 * journald and G_MESSAGES_DEBUG tell plugins apart.  Any thread.
 */
BOX_PLUGIN_API
void         box_plugin_context_log           (BoxPluginContext *self,
                                               GLogLevelFlags    level,
                                               const char       *format,
                                               ...) G_GNUC_PRINTF (3, 4);

/**
 * box_sandbox_id_is_valid:
 * @id: (nullable): a sandbox ID
 *
 * The one sandbox-ID check plugins share: 1 to 64 of [a-z0-9-], not
 * starting with '-'.  Such an ID is safe as a file name, a VM's name
 * and a key.
 */
BOX_PLUGIN_API
gboolean     box_sandbox_id_is_valid          (const char *id);

G_END_DECLS
