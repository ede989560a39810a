/* box-dummy-plugin.h: the `dummy` hypervisor (internal to the plugin and its test). */
#pragma once

#include "box-hypervisor.h"

G_BEGIN_DECLS

#define BOX_TYPE_DUMMY_PLUGIN (box_dummy_plugin_get_type ())
G_DECLARE_FINAL_TYPE (BoxDummyPlugin, box_dummy_plugin, BOX, DUMMY_PLUGIN, BoxPlugin)

/* For tests: the VM of @sandbox_id dies on its own and ::vm-lost is
 * emitted.  A suspended VM keeps its memory snapshot (state LOST,
 * snapshot_at kept); a running one keeps its disk (state SHUTOFF,
 * snapshot_at: now, as a real plugin keeps the disk of a dead QEMU).
 * FALSE when there is no VM. */
gboolean box_dummy_plugin_lose_vm (BoxDummyPlugin *self, const char *sandbox_id);
/* For tests: as lose_vm(), but nothing is left to go back to (state LOST,
 * snapshot_at 0). */
gboolean box_dummy_plugin_lose_all (BoxDummyPlugin *self, const char *sandbox_id);
/* For tests: appends fault rules (box-dummy-script.h); NULL or "" clears them. */
gboolean box_dummy_plugin_script  (BoxDummyPlugin *self, const char *rules, GError **error);
/* For tests: report @caps and @accel from now on, whatever the config says. */
void     box_dummy_plugin_set_capabilities (BoxDummyPlugin *self, BoxHypervisorCaps caps,
                                            const char *accel);

G_END_DECLS
