/* box-engine.c: the engine object (its signals and plugins' accessors),
 * events, callers.
 *
 * Start and stop are box-engine-start.c; projects, keys, secrets and the
 * catalogue box-engine-projects.c; the sandbox state machine
 * box-engine-sandboxes.c.
 */
#include "config.h"

#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>
#include <string.h>
#include <unistd.h>

#include "box-engine-private.h"

enum {
  SIGNAL_EVENT,
  SIGNAL_SANDBOX_INTERRUPTED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (BoxEngine, box_engine, G_TYPE_OBJECT)

static void
box_engine_finalize (GObject *object)
{
  BoxEngine *self = BOX_ENGINE (object);

  box_engine_stop (self);
  if (self->lock_fd >= 0)
    close (self->lock_fd);
  box_engine_sandboxes_finalize (self);
  g_clear_pointer (&self->read_only_keys, g_hash_table_unref);
  g_clear_pointer (&self->domains, g_hash_table_unref);
  g_clear_pointer (&self->plugins, g_ptr_array_unref);
  g_clear_object (&self->loader);
  g_clear_pointer (&self->secret_key, box_secret_key_free);
  g_clear_pointer (&self->identity, box_identity_free);
  g_clear_pointer (&self->network_defaults, g_ptr_array_unref);
  g_clear_pointer (&self->config, box_config_free);
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

BoxStats *
box_engine_get_stats (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  return self->stats;
}

void
box_engine_set_edge_port (BoxEngine *self, guint port)
{
  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (port <= 65535);
  self->edge_port = port;
}

guint
box_engine_get_edge_port (BoxEngine *self)
{
  g_return_val_if_fail (BOX_IS_ENGINE (self), 0);
  return self->edge_port;
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
