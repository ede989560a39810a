/* loader-test-plugin.c: tiny modules for loader-test.c.
 *
 * Built several times with different macros:
 *   TEST_PLUGIN_NAME     the name in BoxPluginInfo
 *   TEST_PLUGIN_ABI      the ABI version it claims (default: the right one)
 *   TEST_PLUGIN_NO_ENTRY export no box_plugin_query() at all
 *   TEST_PLUGIN_NOT_A_PLUGIN  its type is a plain GObject
 * The plugin type implements BoxAuth and BoxNetwork with empty vfuncs, so
 * the loader must report two interfaces.
 */
#include "config.h"

#include <gmodule.h>

#include "box-auth.h"
#include "box-network.h"

#ifndef TEST_PLUGIN_ABI
#define TEST_PLUGIN_ABI BOX_PLUGIN_ABI_VERSION
#endif

#define BOX_TYPE_LOADER_TEST_PLUGIN (box_loader_test_plugin_get_type ())
G_DECLARE_FINAL_TYPE (BoxLoaderTestPlugin, box_loader_test_plugin, BOX, LOADER_TEST_PLUGIN, BoxPlugin)

struct _BoxLoaderTestPlugin {
  BoxPlugin parent_instance;
};

static void
box_loader_test_plugin_auth_init (BoxAuthInterface *iface)
{}

static void
box_loader_test_plugin_network_init (BoxNetworkInterface *iface)
{}

G_DEFINE_TYPE_WITH_CODE (BoxLoaderTestPlugin, box_loader_test_plugin, BOX_TYPE_PLUGIN,
                         G_IMPLEMENT_INTERFACE (BOX_TYPE_AUTH, box_loader_test_plugin_auth_init)
                         G_IMPLEMENT_INTERFACE (BOX_TYPE_NETWORK, box_loader_test_plugin_network_init))

static void
box_loader_test_plugin_class_init (BoxLoaderTestPluginClass *klass)
{}

static void
box_loader_test_plugin_init (BoxLoaderTestPlugin *self)
{}

#ifdef TEST_PLUGIN_NOT_A_PLUGIN
static GType
test_plugin_get_type (void)
{
  return G_TYPE_OBJECT;
}
#else
#define test_plugin_get_type box_loader_test_plugin_get_type
#endif

#ifndef TEST_PLUGIN_NO_ENTRY
G_MODULE_EXPORT const BoxPluginInfo *box_plugin_query (void);

G_MODULE_EXPORT const BoxPluginInfo *
box_plugin_query (void)
{
  static const BoxPluginInfo info = {
    .abi_version = TEST_PLUGIN_ABI,
    .name = TEST_PLUGIN_NAME,
    .description = "a module for the loader's tests",
    .get_type = test_plugin_get_type,
  };
  return &info;
}
#else
/* Something exported, so the module is an ordinary shared object. */
G_MODULE_EXPORT int box_plugin_test_no_entry (void);

G_MODULE_EXPORT int
box_plugin_test_no_entry (void)
{
  return 1;
}
#endif
