/* box-dummy-plugin-private.h: the `dummy` hypervisor's instance, shared by
 * box-dummy-plugin.c (the hypervisor) and box-dummy-actions.c (what tests
 * tell it). */
#pragma once

#include "box-dummy-agent.h"
#include "box-dummy-plugin.h"
#include "box-dummy-script.h"
#include "box-dummy-vm.h"

G_BEGIN_DECLS

struct _BoxDummyPlugin {
  BoxPlugin   parent_instance;
  GHashTable *vms;             /* sandbox id -> BoxDummyVm* */
  gboolean    loaded;          /* the state directory has been read */
  BoxDummyScript *script;      /* [plugin.dummy] script=, then box_dummy_plugin_script() */
  gboolean    caps_set;        /* box_dummy_plugin_set_capabilities() overrides the config */
  BoxHypervisorCaps caps;
  char       *accel;
  GHashTable *agents;          /* sandbox id -> GObject (a connected agent), set by tests */
  GBytes     *guest_ca;        /* set_guest_ca()'s, for the "guest-ca" signal */
  BoxDummyAgents *agent_procs; /* [plugin.dummy] agent=: a process per running sandbox */
};

/* The record of @id (the state directory read first), or NULL. */
BoxDummyVm *box_dummy_plugin_lookup      (BoxDummyPlugin *self, const char *id);
/* The action signals ("script", "set-capabilities", "lose-vm", "lose-all",
 * "set-agent", "guest-ca"), from class_init. */
void        box_dummy_plugin_add_actions (GObjectClass *klass);
/* The VM ends under an operation of its own (the script's "end"): shut
 * off on its disk, or lost with a memory snapshot kept; no ::vm-lost. */
void        box_dummy_plugin_end_vm      (BoxDummyPlugin *self, const char *sandbox_id);

G_END_DECLS
