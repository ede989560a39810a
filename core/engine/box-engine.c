/* box-engine.c: plugins, callers, projects, keys, secrets, catalogue.
 *
 * The sandbox state machine lives in box-engine-sandboxes.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_OFD_SETLK */
#endif
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>
#include <string.h>
#include <unistd.h>

#include "box-agent-client.h"
#include "box-engine-private.h"
#include "box-storage-records.h"
#include "box-plugin-context.h"
#include "box-requests.h"
#include "box-validate.h"

enum {
  SIGNAL_EVENT,
  SIGNAL_SANDBOX_INTERRUPTED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (BoxEngine, box_engine, G_TYPE_OBJECT)

/* Real hypervisors, best first, for hypervisor=auto. */

static void
box_engine_finalize (GObject *object)
{
  BoxEngine *self = BOX_ENGINE (object);

  box_engine_stop (self);
  if (self->lock_fd >= 0)
    close (self->lock_fd);
  box_engine_sandboxes_finalize (self);
  g_clear_pointer (&self->plugins, g_ptr_array_unref);
  g_clear_object (&self->loader);
  g_clear_pointer (&self->secret_key, box_secret_key_free);
  g_clear_pointer (&self->network_defaults, g_ptr_array_unref);
  g_clear_pointer (&self->config, box_config_free);
  g_clear_pointer (&self->projects, g_hash_table_unref);
  g_clear_object (&self->clock);
  G_OBJECT_CLASS (box_engine_parent_class)->finalize (object);
}

static void
box_engine_class_init (BoxEngineClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = box_engine_finalize;

  /**
   * BoxEngine::event:
   * @event: (type gpointer): the BoxEvent, valid during the emission
   */
  signals[SIGNAL_EVENT] = g_signal_new ("event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                        0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);

  /**
   * BoxEngine::sandbox-interrupted:
   * @sandbox_id: the sandbox
   * @why: "pause", "stop", "delete", "lost", "checkpoint", "restore"
   *
   * Emitted before a sandbox stops running the way its streams knew it:
   * every exec socket, port stream and file watch of the sandbox must end
   * (WebSockets with close code 1011) when this fires.
   */
  signals[SIGNAL_SANDBOX_INTERRUPTED] =
    g_signal_new ("sandbox-interrupted", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                  NULL, NULL, G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_STRING);
}

static void
box_engine_init (BoxEngine *self)
{
  self->plugins = g_ptr_array_new_with_free_func (g_object_unref);
  self->lock_fd = -1;
  self->projects = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify) box_project_free);
  self->clock = box_clock_new ();
  self->owner = g_thread_self ();
  box_engine_sandboxes_init (self);
}

BoxEngine *
box_engine_new (BoxConfig *config)
{
  BoxEngine *self;

  g_return_val_if_fail (config != NULL, NULL);
  self = g_object_new (BOX_TYPE_ENGINE, NULL);
  self->config = config;
  return self;
}

void
box_engine_set_clock (BoxEngine *self, BoxClock *clock)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (BOX_IS_CLOCK (clock));
  g_return_if_fail (!self->started);
  g_set_object (&self->clock, clock);
}

BoxClock *
box_engine_get_clock (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->clock;
}

BoxConfig *
box_engine_get_config (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->config;
}

BoxPluginLoader *
box_engine_get_loader (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->loader;
}

BoxStorage *
box_engine_get_storage (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->storage;
}

BoxAuth *
box_engine_get_auth (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->auth;
}

BoxHypervisor *
box_engine_get_hypervisor (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->hypervisor;
}

BoxNetwork *
box_engine_get_network (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->network;
}

BoxBroker *
box_engine_get_broker (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->broker;
}

GPtrArray *
box_engine_get_plugins (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->plugins;
}

gboolean
box_engine_has_secret_key (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), FALSE);
  return self->secret_key != NULL;
}

/* ---- start-up ---------------------------------------------------------- */

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
  if (wanted == NULL || wanted[0] == '\0' || g_str_equal (wanted, "none"))
    return NULL;
  if (!g_str_equal (wanted, "auto"))
    return wanted;
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

static gboolean
load_network_defaults (BoxEngine *self, GError **error)
{
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GPtrArray) rules = NULL;
  JsonNode *root;
  JsonObject *object;
  gsize len;
  const char *data;

  bytes = g_resources_lookup_data ("/org/box/network-defaults.json",
                                   G_RESOURCE_LOOKUP_FLAGS_NONE, error);
  if (bytes == NULL)
    return FALSE;
  data = g_bytes_get_data (bytes, &len);
  if (!json_parser_load_from_data (parser, data, (gssize) len, error))
    return FALSE;
  root = json_parser_get_root (parser);
  if (!JSON_NODE_HOLDS_OBJECT (root) ||
      !json_object_has_member ((object = json_node_get_object (root)), "egress")) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                         "network-defaults.json has no egress list");
    return FALSE;
  }
  rules = box_rules_from_json (json_object_get_member (object, "egress"), error);
  if (rules == NULL)
    return FALSE;
  self->network_defaults = g_steal_pointer (&rules);
  return TRUE;
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
      if (network_optional && G_OBJECT (plugin) == G_OBJECT (self->network)) {
        g_warning ("network plugin %s cannot start, sandboxes get no network: %s",
                   box_plugin_get_name (plugin), local_error->message);
        self->network = NULL;
        g_object_set (box_plugin_get_context (BOX_PLUGIN (self->hypervisor)), "network", NULL, NULL);
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

  if (!box_engine_reconcile (self, error))
    return FALSE;
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
  for (i = self->plugins->len; i > 0; i--)
    box_plugin_stop (g_ptr_array_index (self->plugins, i - 1));
}

/* ---- events ------------------------------------------------------------ */

void
box_engine_emit_event (BoxEngine *self, BoxEvent *event)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (event != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  g_signal_emit (self, signals[SIGNAL_EVENT], 0, event);
}

void
box_engine_emit_interrupted (BoxEngine *self, const char *sandbox_id, const char *why)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  g_signal_emit (self, signals[SIGNAL_SANDBOX_INTERRUPTED], 0, sandbox_id, why);
}

void
box_engine_emit (BoxEngine *self, const char *type, const BoxSandbox *sandbox, JsonObject *detail)
{
  g_autoptr(BoxEvent) event = box_event_new (type, sandbox->project, sandbox->id, detail);

  event->at = box_engine_now (self);
  g_debug ("event %s %s", type, sandbox->id);
  box_engine_emit_event (self, event);
}

/* ---- callers ----------------------------------------------------------- */

BoxPrincipal *
box_engine_authenticate (BoxEngine *self, const char *credential, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  guint8 given[32], admin[32];
  gboolean is_admin;

  if (credential == NULL || credential[0] == '\0') {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNAUTHORIZED, "a valid API key is required");
    return NULL;
  }
  /* Compared as SHA-256 digests, in constant time over their fixed size:
   * neither the time taken nor an early length check tells a caller how
   * long the admin token is or how much of it they guessed. */
  is_admin = gnutls_hash_fast (GNUTLS_DIG_SHA256, credential, strlen (credential), given) == 0 &&
             gnutls_hash_fast (GNUTLS_DIG_SHA256, self->config->admin_token,
                               strlen (self->config->admin_token), admin) == 0 &&
             gnutls_memcmp (given, admin, sizeof given) == 0;
  explicit_bzero (given, sizeof given);
  explicit_bzero (admin, sizeof admin);
  if (is_admin) {
    BoxPrincipal *principal = g_new0 (BoxPrincipal, 1);
    principal->kind = BOX_PRINCIPAL_ADMIN;
    return principal;
  }
  return box_auth_authenticate (self->auth, credential, error);
}

/* ---- projects and keys ------------------------------------------------- */

static gboolean
check_domains (BoxEngine *self, const char *project, const char *const *domains, GError **error)
{
  g_autoptr(GPtrArray) projects = NULL;
  guint i, j;

  for (i = 0; domains != NULL && domains[i] != NULL; i++) {
    if (!box_validate_project_domain (domains[i], error))
      return FALSE;
    for (j = 0; j < i; j++) {
      if (g_str_equal (domains[i], domains[j])) {
        g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "domain %s is listed twice", domains[i]);
        return FALSE;
      }
    }
  }
  projects = box_storage_project_list (self->storage, error);
  if (projects == NULL)
    return FALSE;
  for (i = 0; i < projects->len; i++) {
    BoxProject *other = g_ptr_array_index (projects, i);
    if (g_strcmp0 (other->name, project) == 0)
      continue;
    for (j = 0; domains != NULL && domains[j] != NULL; j++) {
      if (g_strv_contains ((const char *const *) other->domains, domains[j])) {
        g_set_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS,
                     "domain %s already belongs to another project", domains[j]);
        return FALSE;
      }
    }
  }
  return TRUE;
}

BoxProject *
box_engine_create_project (BoxEngine *self, const char *name, const char *const *domains,
                           GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_autoptr(BoxProject) project = NULL;
  const char *none[] = { NULL };

  if (!box_validate_project_name (name, error))
    return NULL;
  if (!check_domains (self, name, domains, error))
    return NULL;
  project = g_new0 (BoxProject, 1);
  project->name = g_strdup (name);
  project->domains = g_strdupv ((char **) (domains != NULL ? domains : none));
  project->created_at = box_engine_now (self);
  g_hash_table_remove (self->projects, name);
  if (!box_storage_project_insert (self->storage, project, error))
    return NULL;
  g_message ("project %s created", name);
  return g_steal_pointer (&project);
}

GPtrArray *
box_engine_list_projects (BoxEngine *self, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return box_storage_project_list (self->storage, error);
}

/* Bounds the projects remembered; past it they are all forgotten. */
#define MAX_PROJECTS_KEPT 1024

/* Read through self->projects: the storage read (and its JSON parse) once
 * per project until the engine changes it, not once per API answer. */
BoxProject *
box_engine_get_project (BoxEngine *self, const char *name, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  const BoxProject *kept = name != NULL ? g_hash_table_lookup (self->projects, name) : NULL;
  BoxProject *project;

  if (kept != NULL)
    return box_project_copy (kept);
  if (name == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no project");
    return NULL;
  }
  project = box_storage_project_get (self->storage, name, error);
  if (project == NULL)
    return NULL;
  if (g_hash_table_size (self->projects) >= MAX_PROJECTS_KEPT)
    g_hash_table_remove_all (self->projects);
  g_hash_table_insert (self->projects, g_strdup (name), box_project_copy (project));
  return project;
}

BoxProject *
box_engine_set_project_domains (BoxEngine *self, const char *name, const char *const *domains,
                                GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  const char *none[] = { NULL };

  /* read, change, write at the revision read; a lost race starts again */
  for (guint attempt = 1;; attempt++) {
    g_autoptr(BoxProject) project = box_storage_project_get (self->storage, name, error);
    g_autoptr(GError) local = NULL;

    if (project == NULL)
      return NULL;
    if (!check_domains (self, name, domains, error))
      return NULL;
    g_strfreev (project->domains);
    project->domains = g_strdupv ((char **) (domains != NULL ? domains : none));
    g_hash_table_remove (self->projects, name);
    if (box_storage_project_update (self->storage, project, &local))
      return g_steal_pointer (&project);
    if (attempt == BOX_ENGINE_STORAGE_TRIES ||
        !g_error_matches (local, BOX_ERROR, BOX_ERROR_CONFLICT)) {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  }
}

/* Deletes @project's keys through the auth plugin, so that one which
 * remembers the keys it accepted forgets them before they are gone (storage
 * would delete them with the project behind its back). */
static gboolean
revoke_project_keys (BoxEngine *self, const char *project, GError **error)
{
  g_autoptr(GPtrArray) keys = NULL;
  g_autoptr(GError) local_error = NULL;

  keys = box_auth_list_keys (self->auth, project, &local_error);
  if (keys == NULL) {
    /* an auth plugin without keys has none to revoke */
    if (g_error_matches (local_error, BOX_ERROR, BOX_ERROR_UNSUPPORTED))
      return TRUE;
    g_propagate_error (error, g_steal_pointer (&local_error));
    return FALSE;
  }
  for (guint i = 0; i < keys->len; i++) {
    const BoxKey *key = g_ptr_array_index (keys, i);
    if (!box_auth_delete_key (self->auth, project, key->id, error))
      return FALSE;
  }
  return TRUE;
}

static void
delete_project_sandboxes_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  g_autoptr(GTask) task = user_data;
  const char *name = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;

  g_hash_table_remove (self->projects, name);
  if (!box_engine_destroy_project_sandboxes_finish (self, result, &error) ||
      !revoke_project_keys (self, name, &error) ||
      !box_storage_project_delete (self->storage, name, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  g_message ("project %s deleted", name);
  g_task_return_boolean (task, TRUE);
}

void
box_engine_delete_project_async (BoxEngine *self, const char *name, GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (name != NULL);
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(BoxProject) project = NULL;
  GError *error = NULL;

  g_task_set_source_tag (task, box_engine_delete_project_async);
  g_task_set_task_data (task, g_strdup (name), g_free);
  project = box_storage_project_get (self->storage, name, &error);
  if (project == NULL) {
    g_task_return_error (task, error);
    return;
  }
  box_engine_destroy_project_sandboxes_async (self, name, cancellable,
                                              delete_project_sandboxes_cb,
                                              g_steal_pointer (&task));
}

gboolean
box_engine_delete_project_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

BoxKey *
box_engine_create_key (BoxEngine *self, const char *project, const char *name, char **secret_out,
                       GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (project != NULL, NULL);
  g_autoptr(BoxProject) owner = box_storage_project_get (self->storage, project, error);

  if (owner == NULL)
    return NULL;
  if (!box_validate_key_name (name, error))
    return NULL;
  return box_auth_create_key (self->auth, project, name, secret_out, error);
}

GPtrArray *
box_engine_list_keys (BoxEngine *self, const char *project, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (project != NULL, NULL);
  g_autoptr(BoxProject) owner = box_storage_project_get (self->storage, project, error);

  if (owner == NULL)
    return NULL;
  return box_auth_list_keys (self->auth, project, error);
}

gboolean
box_engine_delete_key (BoxEngine *self, const char *project, const char *key_id, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), FALSE);
  g_return_val_if_fail (project != NULL && key_id != NULL, FALSE);
  g_autoptr(BoxProject) owner = box_storage_project_get (self->storage, project, error);

  if (owner == NULL)
    return FALSE;
  return box_auth_delete_key (self->auth, project, key_id, error);
}

/* ---- secrets ----------------------------------------------------------- */

static gboolean
require_secret_key (BoxEngine *self, GError **error)
{
  if (self->secret_key != NULL)
    return TRUE;
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                       "this deployment has no secret key, so it cannot keep secrets");
  return FALSE;
}

gboolean
box_engine_check_secrets (BoxEngine *self, const char *project, const char *const *secrets,
                          GError **error)
{
  guint i;

  if (secrets == NULL || secrets[0] == NULL)
    return TRUE;
  if (!require_secret_key (self, error))
    return FALSE;
  for (i = 0; secrets[i] != NULL; i++) {
    g_autoptr(BoxSecret) secret = NULL;
    g_autoptr(GError) local_error = NULL;

    if (!box_validate_secret_name (secrets[i], error))
      return FALSE;
    secret = box_storage_secret_get (self->storage, project, secrets[i], &local_error);
    if (secret == NULL) {
      if (g_error_matches (local_error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
        g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid secrets: no secret named %s",
                     secrets[i]);
      else
        g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
  }
  return TRUE;
}

BoxSecret *
box_engine_put_secret (BoxEngine *self, const char *project, const char *name,
                       BoxSecretPut *request, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (project != NULL && name != NULL, NULL);
  g_return_val_if_fail (request != NULL && request->value != NULL, NULL);
  g_autoptr(BoxSecret) secret = NULL;
  g_autoptr(BoxSecret) existing = NULL;
  g_autofree char *associated = NULL;
  gint64 now = box_engine_now (self);

  if (!require_secret_key (self, error))
    return NULL;
  if (!box_validate_secret_name (name, error))
    return NULL;

  secret = g_new0 (BoxSecret, 1);
  secret->name = g_strdup (name);
  secret->project = g_strdup (project);
  secret->hosts = g_strdupv (request->hosts);
  secret->placeholder = box_secret_placeholder (name, request->placeholder_prefix);
  secret->inject_header = g_strdup (request->inject_header);
  secret->inject_format = g_strdup (request->inject_format);
  associated = g_strdup_printf ("%s/%s", project, name);
  secret->sealed_value = box_secret_key_seal (self->secret_key, associated, request->value,
                                              strlen (request->value), error);
  if (secret->sealed_value == NULL)
    return NULL;
  existing = box_storage_secret_get (self->storage, project, name, NULL);
  secret->created_at = existing != NULL ? existing->created_at : now;
  secret->updated_at = now;
  if (!box_storage_secret_put (self->storage, secret, error))
    return NULL;
  /* The broker (when there is one) picks the new value up at once; see
   * box_engine_sandboxes for where sandboxes are handed their secrets. */
  return g_steal_pointer (&secret);
}

BoxSecret *
box_engine_get_secret (BoxEngine *self, const char *project, const char *name, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (project != NULL, NULL);
  if (!require_secret_key (self, error))
    return NULL;
  return box_storage_secret_get (self->storage, project, name, error);
}

GPtrArray *
box_engine_list_secrets (BoxEngine *self, const char *project, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (project != NULL, NULL);
  if (!require_secret_key (self, error))
    return NULL;
  return box_storage_secret_list (self->storage, project, error);
}

gboolean
box_engine_delete_secret (BoxEngine *self, const char *project, const char *name, GError **error)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), FALSE);
  g_return_val_if_fail (project != NULL, FALSE);
  g_autoptr(BoxSecret) secret = NULL;
  g_autoptr(GPtrArray) sandboxes = NULL;
  guint i;

  if (!require_secret_key (self, error))
    return FALSE;
  secret = box_storage_secret_get (self->storage, project, name, error);
  if (secret == NULL)
    return FALSE;
  sandboxes = box_storage_sandbox_list (self->storage, project, error);
  if (sandboxes == NULL)
    return FALSE;
  for (i = 0; i < sandboxes->len; i++) {
    BoxSandbox *sandbox = g_ptr_array_index (sandboxes, i);
    if (g_strv_contains ((const char *const *) sandbox->secrets, name)) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT, "secret %s is used by sandbox %s",
                   name, sandbox->name);
      return FALSE;
    }
  }
  return box_storage_secret_delete (self->storage, project, name, error);
}

/* ---- catalogue --------------------------------------------------------- */

GPtrArray *
box_engine_list_templates (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return box_hypervisor_list_templates (self->hypervisor);
}

GPtrArray *
box_engine_get_network_defaults (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->network_defaults;
}

guint
box_engine_count_defaults (BoxEngine *self)
{
  return self->network_defaults != NULL ? self->network_defaults->len : 0;
}
