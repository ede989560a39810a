/* box-dummy-plugin.h: the `dummy` hypervisor (internal to the plugin and its test). */
#pragma once

#include "box-hypervisor.h"

G_BEGIN_DECLS

#define BOX_TYPE_DUMMY_PLUGIN (box_dummy_plugin_get_type ())
G_DECLARE_FINAL_TYPE (BoxDummyPlugin, box_dummy_plugin, BOX, DUMMY_PLUGIN, BoxPlugin)

/* For tests: the VM of @sandbox_id dies on its own (state LOST, its
 * snapshot kept) and ::vm-lost is emitted.  FALSE when there is no VM. */
gboolean box_dummy_plugin_lose_vm (BoxDummyPlugin *self, const char *sandbox_id);

G_END_DECLS
