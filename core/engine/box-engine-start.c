/* box-engine-start.c: the engine's start and stop: which plugin serves
 * each role (hypervisor, network, store, auth, broker: the best working one
 * for `auto`; the broker only with a secret key), the plugins' contexts,
 * the network defaults, the data directory's lock, and the sandboxes'
 * reconciliation at start.
 *
 * The object itself is box-engine.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_OFD_SETLK */
#endif
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "box-agent-client.h"
#include "box-engine-ops-private.h"
#include "box-storage-records.h"
#include "box-plugin-context.h"
#include "box-requests.h"
#include "box-validate.h"

/* How plugins connect to a guest agent: boxd's client, as a BoxAgent. */
static BoxAgent *
engine_new_agent (GIOStream *stream)
{
  return BOX_AGENT (box_agent_client_new (stream));
}

/* A plugin's view of boxd: its configuration, state directory and agent
 * factory; box_engine_start() adds the store and the network. */
static BoxPluginContext *
engine_make_context (const char *plugin_name, gpointer user_data)
{
  BoxEngine *self = user_data;

  return g_object_new (BOX_TYPE_PLUGIN_CONTEXT,
                       "name", plugin_name,
                       "keyfile", self->config->keyfile,
                       "data-dir", self->config->data_dir,
                       "agent-factory", (gpointer) engine_new_agent,
                       NULL);
}

BoxPluginContext *
box_engine_new_plugin_context (BoxEngine *self, const char *plugin_name)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (plugin_name != NULL, NULL);
  return engine_make_context (plugin_name, self);
}

/* The plugin instance serving @iface_name: one instance per plugin, shared
 * when a plugin serves several interfaces. */
static GObject *
instantiate (BoxEngine *self, const char *iface_name, const char *plugin_name, GError **error)
{
  const BoxPluginModule *module;
  GType iface_type = box_plugin_interface_type (iface_name);
  g_autoptr(BoxPluginContext) context = NULL;
  BoxPlugin *plugin;
  guint i;

  for (i = 0; i < self->plugins->len; i++) {
    BoxPlugin *existing = g_ptr_array_index (self->plugins, i);
    if (g_strcmp0 (box_plugin_get_name (existing), plugin_name) == 0) {
      if (!g_type_is_a (G_OBJECT_TYPE (existing), iface_type))
        break;
      return G_OBJECT (existing);
    }
  }

  module = box_plugin_loader_lookup (self->loader, plugin_name);
  if (module == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "%s plugin \"%s\" is not installed in %s", iface_name, plugin_name,
                 self->config->plugin_dir);
    return NULL;
  }
  if (!g_type_is_a (module->type, iface_type)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "plugin \"%s\" does not implement the %s interface", plugin_name, iface_name);
    return NULL;
  }
  context = engine_make_context (module->name, self);
  plugin = g_object_new (module->type, "name", module->name, "context", context, NULL);
  g_ptr_array_add (self->plugins, plugin);
  return G_OBJECT (plugin);
}

/* The plugin for @iface_name: the one the configuration names, or for
 * `auto` the best that works here (box_plugin_loader_choose()); NULL with
 * @error when none. */
static const char *
choose_plugin (BoxEngine *self, const char *iface_name, const char *wanted, guint32 exclude_flags,
               GError **error)
{
  const BoxPluginModule *module;
  g_autoptr(GError) local_error = NULL;

  if (g_strcmp0 (wanted, "auto") != 0)
    return wanted;
  module = box_plugin_loader_choose (self->loader, box_plugin_interface_type (iface_name),
                                     exclude_flags, engine_make_context, self, &local_error);
  if (module == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s=auto: %s in %s", iface_name,
                 local_error->message, self->config->plugin_dir);
    return NULL;
  }
  return module->name;
}

/* hypervisor=auto: the best hypervisor that runs VMs; only when none is
 * installed (or none works) one that runs no VM, said loudly. */
static const char *
choose_hypervisor (BoxEngine *self, GError **error)
{
  const char *name;
  g_autoptr(GError) local_error = NULL;

  name = choose_plugin (self, "hypervisor", self->config->hypervisor, BOX_PLUGIN_FLAG_NO_VM,
                        &local_error);
  if (name != NULL)
    return name;
  name = choose_plugin (self, "hypervisor", self->config->hypervisor, 0, error);
  if (name != NULL)
    g_warning ("no real hypervisor plugin is installed in %s; falling back to the %s "
               "hypervisor: sandboxes are records only and run no VM",
               self->config->plugin_dir, name);
  return name;
}

/* A role that may be left out (network, broker): TRUE when @wanted
 * settles it without a choice, *@name then the plugin it names or NULL
 * for none (`none` or empty); FALSE for `auto`. */
static gboolean
named_or_none (const char *wanted, const char **name)
{
  *name = NULL;
  if (wanted == NULL || wanted[0] == '\0' || g_str_equal (wanted, "none"))
    return TRUE;
  if (g_str_equal (wanted, "auto"))
    return FALSE;
  *name = wanted;
  return TRUE;
}

/* network=auto: the best network plugin when the hypervisor runs real VMs;
 * none for one that runs no VM (it has no VM to connect).  *optional is
 * TRUE when a failing start should leave sandboxes without a network
 * rather than stop boxd. */
static const char *
choose_network (BoxEngine *self, const char *hypervisor, gboolean *optional)
{
  const char *wanted = self->config->network;
  const BoxPluginModule *module;
  const char *name;
  g_autoptr(GError) local_error = NULL;

  *optional = FALSE;
  if (named_or_none (wanted, &name))
    return name;
  module = box_plugin_loader_lookup (self->loader, hypervisor);
  if (module != NULL && (module->info->flags & BOX_PLUGIN_FLAG_NO_VM) != 0)
    return NULL;
  name = choose_plugin (self, "network", wanted, 0, &local_error);
  if (name == NULL) {
    g_warning ("no network plugin is installed in %s: sandboxes get no network",
               self->config->plugin_dir);
    return NULL;
  }
  *optional = TRUE;
  return name;
}

/* broker=auto: with a secret key, the best broker plugin installed (a
 * default install's `broker`), whatever the hypervisor; without a key
 * none (every secret route is 501 then); when none is installed none, said
 * loudly: a create, fork or PATCH naming secrets is then 501
 * (box_engine_check_secrets()).  *optional as for choose_network(). */
static const char *
choose_broker (BoxEngine *self, gboolean *optional)
{
  const char *name;
  g_autoptr(GError) local_error = NULL;

  *optional = FALSE;
  if (named_or_none (self->config->broker, &name))
    return name;
  if (!self->config->secret_key)
    return NULL;
  name = choose_plugin (self, "broker", "auto", 0, &local_error);
  if (name == NULL) {
    g_warning ("broker=auto: %s: sandboxes cannot use secrets", local_error->message);
    return NULL;
  }
  *optional = TRUE;
  return name;
}

/* Give each plugin what it may use of the others: the store to every
 * plugin but the store itself, the network to the hypervisor. */
static void
connect_contexts (BoxEngine *self)
{
  for (guint i = 0; i < self->plugins->len; i++) {
    BoxPlugin *plugin = g_ptr_array_index (self->plugins, i);
    BoxPluginContext *context = box_plugin_get_context (plugin);

    if (G_OBJECT (plugin) != G_OBJECT (self->storage))
      g_object_set (context, "storage", self->storage, NULL);
    if (G_OBJECT (plugin) == G_OBJECT (self->hypervisor))
      g_object_set (context, "network", self->network, NULL);
  }
}

/* A plugin `auto` chose for a role that may be left out (network,
 * broker) that cannot start: boxd runs without it, said loudly.  One
 * instance serving both roles is not left out. */
static gboolean
left_out (BoxEngine *self, BoxPlugin *plugin, gboolean network_optional, gboolean broker_optional,
          const GError *why)
{
  gboolean is_network = G_OBJECT (plugin) == G_OBJECT (self->network);
  gboolean is_broker = G_OBJECT (plugin) == G_OBJECT (self->broker);

  if (is_network && !is_broker && network_optional) {
    g_warning ("network plugin %s cannot start, sandboxes get no network: %s",
               box_plugin_get_name (plugin), why->message);
    self->network = NULL;
    g_object_set (box_plugin_get_context (BOX_PLUGIN (self->hypervisor)), "network", NULL, NULL);
    return TRUE;
  }
  if (is_broker && !is_network && broker_optional) {
    g_warning ("broker plugin %s cannot start, sandboxes cannot use secrets: %s",
               box_plugin_get_name (plugin), why->message);
    self->broker = NULL;
    return TRUE;
  }
  return FALSE;
}

static gboolean
load_network_defaults (BoxEngine *self, GError **error)
{
  const char *path = self->config->network_defaults_file;

  self->network_defaults = path != NULL && path[0] != '\0'
                           ? box_network_defaults_load_file (path, error)
                           : box_network_defaults_load (error);
  return self->network_defaults != NULL;
}

/* One engine per data directory: two would both adopt the same VMs and
 * write the same records.  An open file description lock on
 * <data_dir>/boxd.lock, held until the engine is finalized (the kernel
 * drops it when the process dies, however it dies); the file holds the
 * holder's pid for the message of the next one. */
static gboolean
lock_data_dir (BoxEngine *self, GError **error)
{
  g_autofree char *path = g_build_filename (self->config->data_dir, "boxd.lock", NULL);
  struct flock lock = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
  g_autofree char *pid = NULL;
  int fd;

  if (self->lock_fd >= 0)
    return TRUE;
  fd = g_open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    int saved_errno = errno;

    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved_errno), "cannot open %s: %s", path,
                 g_strerror (saved_errno));
    return FALSE;
  }
  if (fcntl (fd, F_OFD_SETLK, &lock) < 0) {
    int saved_errno = errno;
    char held[32] = "";
    ssize_t n = pread (fd, held, sizeof held - 1, 0);

    close (fd);
    if (saved_errno != EAGAIN && saved_errno != EACCES) {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved_errno), "cannot lock %s: %s", path,
                   g_strerror (saved_errno));
      return FALSE;
    }
    held[n > 0 ? n : 0] = '\0';
    g_strstrip (held);
    if (held[0] != '\0')
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_BUSY, "the data directory %s is in use by another boxd (pid %s)",
                   self->config->data_dir, held);
    else
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_BUSY, "the data directory %s is in use by another boxd",
                   self->config->data_dir);
    return FALSE;
  }
  pid = g_strdup_printf ("%d\n", (int) getpid ());
  if (ftruncate (fd, 0) < 0 || pwrite (fd, pid, strlen (pid), 0) < 0)
    g_debug ("cannot record our pid in %s: %s", path, g_strerror (errno));
  self->lock_fd = fd;
  return TRUE;
}

/* BOX_STATS_FLUSH_MS (for tests), else 0: the default interval */
static guint
stats_flush_ms (void)
{
  const char *value = g_getenv ("BOX_STATS_FLUSH_MS");
  guint64 ms = 0;

  if (value != NULL && !g_ascii_string_to_unsigned (value, 10, 1, G_MAXUINT, &ms, NULL))
    g_warning ("BOX_STATS_FLUSH_MS=%s is not a number of milliseconds; using the default", value);
  return (guint) ms;
}

gboolean
box_engine_start (BoxEngine *self, GCancellable *cancellable, GError **error)
{
  struct {
    const char *iface;
    const char *name;
  } wanted[] = {
    { "storage", self->config->storage },
    { "auth", self->config->auth },
    { "network", self->config->network },
    { "hypervisor", NULL },
    { "broker", self->config->broker },
  };
  const char *hypervisor_name;
  BoxHypervisorCapabilities caps;
  gboolean network_optional = FALSE;
  gboolean broker_optional = FALSE;
  guint i;

  g_return_val_if_fail (BOX_IS_ENGINE (self), FALSE);
  g_return_val_if_fail (!self->started, FALSE);
  BOX_ENGINE_ASSERT_OWNER (self);

  if (!lock_data_dir (self, error) || !load_network_defaults (self, error))
    return FALSE;

  self->loader = box_plugin_loader_new ();
  if (!box_plugin_loader_load_dir (self->loader, self->config->plugin_dir, error))
    return FALSE;
  wanted[0].name = choose_plugin (self, "storage", self->config->storage, 0, error);
  if (wanted[0].name == NULL)
    return FALSE;
  wanted[1].name = choose_plugin (self, "auth", self->config->auth, 0, error);
  if (wanted[1].name == NULL)
    return FALSE;
  hypervisor_name = choose_hypervisor (self, error);
  if (hypervisor_name == NULL)
    return FALSE;
  wanted[3].name = hypervisor_name;
  wanted[2].name = choose_network (self, hypervisor_name, &network_optional);
  wanted[4].name = choose_broker (self, &broker_optional);

  for (i = 0; i < G_N_ELEMENTS (wanted); i++) {
    GObject *instance;

    if (wanted[i].name == NULL || wanted[i].name[0] == '\0')
      continue;
    instance = instantiate (self, wanted[i].iface, wanted[i].name, error);
    if (instance == NULL)
      return FALSE;
    if (g_str_equal (wanted[i].iface, "storage"))
      self->storage = BOX_STORAGE (instance);
    else if (g_str_equal (wanted[i].iface, "auth"))
      self->auth = BOX_AUTH (instance);
    else if (g_str_equal (wanted[i].iface, "network"))
      self->network = BOX_NETWORK (instance);
    else if (g_str_equal (wanted[i].iface, "hypervisor"))
      self->hypervisor = BOX_HYPERVISOR (instance);
    else
      self->broker = BOX_BROKER (instance);
  }
  if (self->storage == NULL || self->auth == NULL || self->hypervisor == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         "storage, auth and hypervisor plugins are required");
    return FALSE;
  }
  connect_contexts (self);

  /* Start in dependency order: storage first; the array is in that order. */
  for (i = 0; i < self->plugins->len; i++) {
    BoxPlugin *plugin = g_ptr_array_index (self->plugins, i);
    g_autoptr(GError) local_error = NULL;

    if (!box_plugin_start (plugin, cancellable, &local_error)) {
      if (left_out (self, plugin, network_optional, broker_optional, local_error)) {
        g_ptr_array_remove_index (self->plugins, i--);
        continue;
      }
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "plugin %s failed to start: %s",
                   box_plugin_get_name (plugin), local_error->message);
      /* stop those already started, newest first */
      while (i-- > 0)
        box_plugin_stop (g_ptr_array_index (self->plugins, i));
      g_ptr_array_set_size (self->plugins, 0);
      return FALSE;
    }
    g_info ("plugin %s started", box_plugin_get_name (plugin));
  }
  self->started = TRUE;
  box_hypervisor_get_capabilities (self->hypervisor, &caps);
  g_message ("hypervisor: %s (accel %s)", hypervisor_name, caps.accel);

  if (self->config->secret_key) {
    self->secret_key = box_secret_key_load (self->config->secret_key_file, TRUE, error);
    if (self->secret_key == NULL)
      return FALSE;
  } else {
    g_message ("running without a secret key: secret routes answer 501 unsupported");
  }
  if (self->config->identity) {
    /* box_config_resolve() fills the path; an engine made without it
     * keeps its key in the data directory all the same */
    g_autofree char *key_file = self->config->identity_key_file != NULL
      ? g_strdup (self->config->identity_key_file)
      : g_build_filename (self->config->data_dir, "identity", "signing.pem", NULL);

    self->identity = box_identity_load (key_file, box_engine_now (self) / G_USEC_PER_SEC, error);
    if (self->identity == NULL)
      return FALSE;
  } else {
    g_message ("running without an identity signing key: identity routes answer 501 unsupported");
  }

  if (!box_engine_reconcile (self, error) || !box_engine_load_read_only_keys (self, error) ||
      !box_engine_domains_load (self, error))
    return FALSE;
  box_engine_broker_reconcile (self);
  self->stats = box_stats_new (self->storage, stats_flush_ms ());
  box_engine_start_ticks (self);
  return TRUE;
}

void
box_engine_stop (BoxEngine *self)
{
  guint i;

  g_return_if_fail (BOX_IS_ENGINE (self));
  if (!self->started)
    return;
  BOX_ENGINE_ASSERT_OWNER (self);
  self->started = FALSE;
  if (self->tick_id != 0) {
    box_clock_source_remove (self->clock, self->tick_id);
    self->tick_id = 0;
  }
  if (self->vm_lost_id != 0) {
    g_signal_handler_disconnect (self->hypervisor, self->vm_lost_id);
    self->vm_lost_id = 0;
  }
  if (self->stats != NULL) {
    g_autoptr(GError) error = NULL;

    if (!box_stats_flush (self->stats, &error))
      g_warning ("usage stats lost at stop: %s", error->message);
    g_clear_object (&self->stats);
  }
  /* the network's proxy thread may be handing a connection over: it lets
   * go of the broker before the broker stops */
  if (self->network != NULL && self->broker != NULL)
    box_network_set_broker (self->network, NULL);
  for (i = self->plugins->len; i > 0; i--)
    box_plugin_stop (g_ptr_array_index (self->plugins, i - 1));
}
