/* choose-test-plugin.c: auth plugins for the loader's `auto` tests
 * (loader-test.c).  Built several times:
 *   TEST_PLUGIN_NAME      the name in BoxPluginInfo (and of its type)
 *   TEST_PLUGIN_PRIORITY  its priority
 *   TEST_PLUGIN_FLAGS     its BoxPluginFlags (default none)
 *   TEST_PLUGIN_PROBE     has a probe, which fails when [plugin.<name>]
 *                         fail=true
 * Each registers a type of its own name, so all load into one process.
 */
#include "config.h"

#include <gmodule.h>

#include "box-auth.h"
#include "box-plugin-context.h"

#ifndef TEST_PLUGIN_FLAGS
#define TEST_PLUGIN_FLAGS BOX_PLUGIN_FLAG_NONE
#endif

static void
choose_test_auth_init (gpointer iface, gpointer data)
{}

static GType
choose_test_get_type (void)
{
  static GType type = 0;

  if (type == 0) {
    const GInterfaceInfo auth_info = { choose_test_auth_init, NULL, NULL };

    type = g_type_register_static_simple (BOX_TYPE_PLUGIN, "BoxChooseTest_" TEST_PLUGIN_NAME,
                                          sizeof (BoxPluginClass), NULL, sizeof (BoxPlugin),
                                          NULL, 0);
    g_type_add_interface_static (type, BOX_TYPE_AUTH, &auth_info);
  }
  return type;
}

#ifdef TEST_PLUGIN_PROBE
static gboolean
choose_test_probe (BoxPluginContext *context, GError **error)
{
  gboolean fail = FALSE;

  if (!box_plugin_context_get_bool (context, "fail", FALSE, &fail, error))
    return FALSE;
  if (fail) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED, "told to fail");
    return FALSE;
  }
  return TRUE;
}
#define PROBE choose_test_probe
#else
#define PROBE NULL
#endif

BOX_PLUGIN_DEFINE_FULL (TEST_PLUGIN_NAME, "a module for the loader's auto tests",
                        choose_test_get_type, TEST_PLUGIN_PRIORITY, TEST_PLUGIN_FLAGS, PROBE)
