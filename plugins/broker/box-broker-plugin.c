/* box-broker-plugin.c: the `broker` plugin, a BoxBroker with GnuTLS.
 *
 * Options ([plugin.broker] in boxd.conf):
 *   ca_key=          the CA's key (default <data-dir>/broker/ca.key, 0600)
 *   ca_pem=          the CA's certificate (default <data-dir>/broker/ca.pem)
 *   ca_bundle=       PEM file of the CAs upstream servers are verified
 *                    against (default: the system's trust store)
 *   max_connections= brokered connections at once (1-65536, default 1024)
 *
 * The CA (box-broker-ca.c), the secrets table (box-broker-secrets.c) and
 * the connections (box-broker-pump.c, a thread of its own) are separate;
 * this file ties them to the plugin's lifecycle and the interface.
 */
#include "config.h"

#include <unistd.h>

#include "box-plugin-context.h"
#include "box-broker-plugin.h"
#include "box-broker-secrets.h"

struct _BoxBrokerPlugin {
  BoxPlugin         parent_instance;
  BoxBrokerSecrets *secrets;
  BoxBrokerCa      *ca;
  gnutls_certificate_credentials_t trust;
  GMutex            pump_lock;  /* pump, for take_connection (any thread) */
  BoxBrokerPump    *pump;
};

static void box_broker_plugin_broker_init (BoxBrokerInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxBrokerPlugin, box_broker_plugin, BOX_TYPE_PLUGIN,
                               G_IMPLEMENT_INTERFACE (BOX_TYPE_BROKER, box_broker_plugin_broker_init))

BoxBrokerCa *
box_broker_plugin_get_ca (BoxBrokerPlugin *self)
{
  return self->ca;
}

BoxBrokerPump *
box_broker_plugin_get_pump (BoxBrokerPlugin *self)
{
  return self->pump;
}

/* An option's path, or the file @name in the plugin's state directory. */
static char *
path_option (BoxBrokerPlugin *self, const char *key, const char *name, GError **error)
{
  g_autofree char *value = box_plugin_get_config (BOX_PLUGIN (self), key, NULL);
  const char *dir;

  if (value != NULL && value[0] != '\0')
    return g_steal_pointer (&value);
  dir = box_plugin_get_state_dir (BOX_PLUGIN (self));
  if (dir == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "[plugin.%s] %s: not set, and boxd has no data directory",
                 box_plugin_get_name (BOX_PLUGIN (self)), key);
    return NULL;
  }
  return g_build_filename (dir, name, NULL);
}

static gboolean
load_trust (BoxBrokerPlugin *self, GError **error)
{
  g_autofree char *bundle = box_plugin_get_config (BOX_PLUGIN (self), "ca_bundle", NULL);
  int rc = gnutls_certificate_allocate_credentials (&self->trust);

  if (rc >= 0 && bundle != NULL && bundle[0] != '\0')
    rc = gnutls_certificate_set_x509_trust_file (self->trust, bundle, GNUTLS_X509_FMT_PEM);
  else if (rc >= 0)
    rc = gnutls_certificate_set_x509_system_trust (self->trust);
  if (rc == 0)
    rc = GNUTLS_E_NO_CERTIFICATE_FOUND;
  if (rc < 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "[plugin.%s] ca_bundle: %s: %s",
                 box_plugin_get_name (BOX_PLUGIN (self)),
                 bundle != NULL && bundle[0] != '\0' ? bundle : "the system's trust store",
                 gnutls_strerror (rc));
    return FALSE;
  }
  return TRUE;
}

static void
box_broker_plugin_stop (BoxPlugin *plugin)
{
  BoxBrokerPlugin *self = BOX_BROKER_PLUGIN (plugin);
  BoxBrokerPump *pump;

  /* out of take_connection's reach first: a call under way finishes, and
   * what it handed over the pump closes as it goes */
  g_mutex_lock (&self->pump_lock);
  pump = g_steal_pointer (&self->pump);
  g_mutex_unlock (&self->pump_lock);
  box_broker_pump_free (pump);
  g_clear_pointer (&self->ca, box_broker_ca_free);
  if (self->trust != NULL)
    gnutls_certificate_free_credentials (self->trust);
  self->trust = NULL;
}

static gboolean
box_broker_plugin_start (BoxPlugin *plugin, GCancellable *cancellable, GError **error)
{
  BoxBrokerPlugin *self = BOX_BROKER_PLUGIN (plugin);
  BoxPluginContext *context = box_plugin_get_context (plugin);
  g_autofree char *key_path = NULL, *cert_path = NULL;
  guint64 max_connections = 0;
  BoxBrokerPump *pump;

  g_return_val_if_fail (self->pump == NULL, FALSE);

  if (!box_plugin_context_get_uint (context, "max_connections", BOX_BROKER_PUMP_MAX_CONNECTIONS,
                                    65536, &max_connections, error))
    return FALSE;
  if (max_connections == 0) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         "[plugin.broker] max_connections: must be at least 1");
    return FALSE;
  }
  key_path = path_option (self, "ca_key", "ca.key", error);
  if (key_path == NULL)
    return FALSE;
  cert_path = path_option (self, "ca_pem", "ca.pem", error);
  if (cert_path == NULL)
    return FALSE;
  self->ca = box_broker_ca_open (key_path, cert_path, error);
  if (self->ca == NULL || !load_trust (self, error)) {
    box_broker_plugin_stop (plugin);
    return FALSE;
  }
  pump = box_broker_pump_new (self->ca, self->secrets, self->trust, (guint) max_connections, error);
  if (pump == NULL) {
    box_broker_plugin_stop (plugin);
    return FALSE;
  }
  g_mutex_lock (&self->pump_lock);
  self->pump = pump;
  g_mutex_unlock (&self->pump_lock);
  return TRUE;
}

static gboolean
not_started (GError **error)
{
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the broker plugin is not started");
  return FALSE;
}

static GBytes *
box_broker_plugin_get_ca_pem (BoxBroker *broker, GError **error)
{
  BoxBrokerPlugin *self = BOX_BROKER_PLUGIN (broker);

  if (self->ca == NULL) {
    not_started (error);
    return NULL;
  }
  return box_broker_ca_get_pem (self->ca);
}

static gboolean
box_broker_plugin_set_secrets (BoxBroker *broker, const char *sandbox_id, GPtrArray *secrets,
                               GError **error)
{
  BoxBrokerPlugin *self = BOX_BROKER_PLUGIN (broker);

  g_return_val_if_fail (sandbox_id != NULL, FALSE);
  box_broker_secrets_set (self->secrets, sandbox_id, secrets);
  if (self->pump != NULL)
    box_broker_pump_secrets_changed (self->pump);
  return TRUE;
}

static gboolean
box_broker_plugin_wants (BoxBroker *broker, const char *sandbox_id, const char *host)
{
  BoxBrokerPlugin *self = BOX_BROKER_PLUGIN (broker);

  return sandbox_id != NULL && host != NULL && box_broker_secrets_wants (self->secrets, sandbox_id, host);
}

static gboolean
box_broker_plugin_take_connection (BoxBroker *broker, const char *sandbox_id, const char *host,
                                   int client_fd, GBytes *client_head, int upstream_fd, GError **error)
{
  BoxBrokerPlugin *self = BOX_BROKER_PLUGIN (broker);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->pump_lock);

  /* the network's thread may call this while stop() runs on the main
   * thread: the pump is used under the lock only (taking never blocks) */
  if (self->pump == NULL || sandbox_id == NULL || host == NULL) {
    close (client_fd);
    close (upstream_fd);
    return not_started (error);
  }
  return box_broker_pump_take (self->pump, sandbox_id, host, client_fd, client_head, upstream_fd, error);
}

static gboolean
box_broker_plugin_rotate_ca (BoxBroker *broker, GError **error)
{
  BoxBrokerPlugin *self = BOX_BROKER_PLUGIN (broker);

  if (self->ca == NULL)
    return not_started (error);
  return box_broker_ca_rotate (self->ca, error);
}

static void
box_broker_plugin_broker_init (BoxBrokerInterface *iface)
{
  iface->get_ca_pem = box_broker_plugin_get_ca_pem;
  iface->set_secrets = box_broker_plugin_set_secrets;
  iface->wants = box_broker_plugin_wants;
  iface->take_connection = box_broker_plugin_take_connection;
  iface->rotate_ca = box_broker_plugin_rotate_ca;
}

static void
box_broker_plugin_add_status (BoxPlugin *plugin, GVariantBuilder *dict)
{
  BoxBrokerPlugin *self = BOX_BROKER_PLUGIN (plugin);

  if (self->pump != NULL)
    g_variant_builder_add (dict, "{sv}", "broker-connections",
                           g_variant_new_uint32 (box_broker_pump_count (self->pump)));
}

static void
box_broker_plugin_finalize (GObject *object)
{
  BoxBrokerPlugin *self = BOX_BROKER_PLUGIN (object);

  box_broker_plugin_stop (BOX_PLUGIN (self));
  box_broker_secrets_free (self->secrets);
  g_mutex_clear (&self->pump_lock);
  G_OBJECT_CLASS (box_broker_plugin_parent_class)->finalize (object);
}

static void
box_broker_plugin_class_init (BoxBrokerPluginClass *klass)
{
  BoxPluginClass *plugin_class = BOX_PLUGIN_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = box_broker_plugin_finalize;
  plugin_class->start = box_broker_plugin_start;
  plugin_class->stop = box_broker_plugin_stop;
  plugin_class->add_status = box_broker_plugin_add_status;
}

static void
box_broker_plugin_init (BoxBrokerPlugin *self)
{
  g_mutex_init (&self->pump_lock);
  self->secrets = box_broker_secrets_new ();
}

BOX_PLUGIN_DEFINE_FULL ("broker", "Secrets broker: TLS interception that puts secret values on the wire",
                        box_broker_plugin_get_type, 100, BOX_PLUGIN_FLAG_NONE, NULL)
