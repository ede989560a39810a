/* broker-test-plugin.c: the `testbroker` plugin, a real module boxd loads
 * through its loader, for engine-broker-test.c.
 *
 * It is both the broker and the network (one instance serves both roles)
 * and records every call the engine makes, in order, as strings in the
 * object data "calls" (a GPtrArray of char*):
 *   set_broker [NULL]
 *   stop
 *   set_secrets <sandbox id> [NAME=<value>@<hosts,>#<placeholder>]...
 *   set_brokered <sandbox id> 0|1
 *   rotate_ca
 * The object data "fail", when set to "unavailable" or "refuse", makes
 * set_secrets fail with 503 sandbox_unavailable or 400 invalid;
 * "fail_egress" makes set_egress refuse (400 invalid), "fail_brokered"
 * set_brokered refuse to send a sandbox to the broker (400 invalid).
 * The CA is the fixed text "CA-<n>", n counting rotations.
 */
#include "config.h"

#include <gmodule.h>
#include <string.h>

#include "box-broker.h"
#include "box-network.h"
#include "box-storage-records.h"

#define BOX_TYPE_TEST_BROKER (box_test_broker_get_type ())
G_DECLARE_FINAL_TYPE (BoxTestBroker, box_test_broker, BOX, TEST_BROKER, BoxPlugin)

struct _BoxTestBroker {
  BoxPlugin  parent_instance;
  GPtrArray *calls;   /* char* */
  guint      rotations;
};

static void broker_init (BoxBrokerInterface *iface);
static void network_init (BoxNetworkInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxTestBroker, box_test_broker, BOX_TYPE_PLUGIN,
                               G_IMPLEMENT_INTERFACE (BOX_TYPE_BROKER, broker_init)
                               G_IMPLEMENT_INTERFACE (BOX_TYPE_NETWORK, network_init))

static void
record (gpointer self, char *call)
{
  g_ptr_array_add (BOX_TEST_BROKER (self)->calls, call);
}

static GBytes *
get_ca_pem (BoxBroker *broker, GError **error)
{
  BoxTestBroker *self = BOX_TEST_BROKER (broker);
  g_autofree char *pem = g_strdup_printf ("CA-%u", self->rotations);

  return g_bytes_new (pem, strlen (pem));
}

static gboolean
set_secrets (BoxBroker *broker, const char *sandbox_id, GPtrArray *secrets, GError **error)
{
  const char *fail = g_object_get_data (G_OBJECT (broker), "fail");
  GString *call = g_string_new ("set_secrets ");

  g_string_append (call, sandbox_id);
  for (guint i = 0; i < secrets->len; i++) {
    const BoxBrokeredSecret *item = g_ptr_array_index (secrets, i);
    g_autofree char *hosts = g_strjoinv (",", item->secret->hosts);
    gsize len = 0;
    const char *value = g_bytes_get_data (item->value, &len);

    g_string_append_printf (call, " %s=%.*s@%s#%s", item->secret->name, (int) len, value, hosts,
                            item->secret->placeholder);
  }
  if (g_strcmp0 (fail, "unavailable") == 0 || g_strcmp0 (fail, "refuse") == 0) {
    g_string_append (call, " (failed)");
    g_set_error_literal (error, BOX_ERROR,
                         fail[0] == 'u' ? BOX_ERROR_SANDBOX_UNAVAILABLE : BOX_ERROR_INVALID,
                         "the test broker fails as told");
    record (broker, g_string_free (call, FALSE));
    return FALSE;
  }
  record (broker, g_string_free (call, FALSE));
  return TRUE;
}

static gboolean
wants (BoxBroker *broker, const char *sandbox_id, const char *host)
{
  return FALSE;
}

static gboolean
rotate_ca (BoxBroker *broker, GError **error)
{
  BOX_TEST_BROKER (broker)->rotations++;
  record (broker, g_strdup ("rotate_ca"));
  return TRUE;
}

static void
broker_init (BoxBrokerInterface *iface)
{
  iface->get_ca_pem = get_ca_pem;
  iface->set_secrets = set_secrets;
  iface->wants = wants;
  iface->rotate_ca = rotate_ca;
}

/* Takes any rules (so a sandbox can be restricted); refuses them when
 * the object data "fail_egress" is set. */
static gboolean
set_egress (BoxNetwork *network, const char *sandbox_id, GPtrArray *rules, GError **error)
{
  if (g_object_get_data (G_OBJECT (network), "fail_egress") != NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, "the test network refuses as told");
    return FALSE;
  }
  return TRUE;
}

static gboolean
enforces_egress (BoxNetwork *network)
{
  return TRUE;
}

static void
set_broker (BoxNetwork *network, BoxBroker *broker)
{
  record (network, g_strdup_printf ("set_broker%s",
                                    broker == NULL ? " NULL"
                                    : G_OBJECT (broker) == G_OBJECT (network) ? "" : " (another)"));
}

static gboolean
set_brokered (BoxNetwork *network, const char *sandbox_id, gboolean brokered, GError **error)
{
  if (brokered && g_object_get_data (G_OBJECT (network), "fail_brokered") != NULL) {
    record (network, g_strdup_printf ("set_brokered %s 1 (failed)", sandbox_id));
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, "the test network refuses as told");
    return FALSE;
  }
  record (network, g_strdup_printf ("set_brokered %s %d", sandbox_id, brokered ? 1 : 0));
  return TRUE;
}

static void
network_init (BoxNetworkInterface *iface)
{
  iface->set_egress = set_egress;
  iface->enforces_egress = enforces_egress;
  iface->set_broker = set_broker;
  iface->set_brokered = set_brokered;
}

static void
box_test_broker_finalize (GObject *object)
{
  g_ptr_array_unref (BOX_TEST_BROKER (object)->calls);
  G_OBJECT_CLASS (box_test_broker_parent_class)->finalize (object);
}

static void
box_test_broker_stop (BoxPlugin *plugin)
{
  record (plugin, g_strdup ("stop"));
}

static void
box_test_broker_class_init (BoxTestBrokerClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = box_test_broker_finalize;
  BOX_PLUGIN_CLASS (klass)->stop = box_test_broker_stop;
}

static void
box_test_broker_init (BoxTestBroker *self)
{
  self->calls = g_ptr_array_new_with_free_func (g_free);
  g_object_set_data (G_OBJECT (self), "calls", self->calls);
}

G_MODULE_EXPORT const BoxPluginInfo *box_plugin_query (void);

G_MODULE_EXPORT const BoxPluginInfo *
box_plugin_query (void)
{
  static const BoxPluginInfo info = {
    .abi_version = BOX_PLUGIN_ABI_VERSION,
    .name = "testbroker",
    .description = "a recording broker and network for the engine's tests",
    .get_type = box_test_broker_get_type,
  };
  return &info;
}
