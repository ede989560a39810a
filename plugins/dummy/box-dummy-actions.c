/* box-dummy-actions.c: what tests tell the `dummy` hypervisor at run time:
 * fault scripts, capabilities, a VM lost, a fake agent, and what the
 * engine gave it (the action signals, and the exported calls of
 * box-dummy-plugin.h for code linked with it). */
#include "config.h"

#include "box-dummy-plugin-private.h"

/* The VM dies: with @keep_disk its snapshot or disk stays; ::vm-lost with
 * @emit (a VM ended by the plugin's own operation emits none). */
static gboolean
lose (BoxDummyPlugin *self, const char *sandbox_id, gboolean keep_disk, gboolean emit)
{
  BoxDummyVm *vm;
  g_autoptr(GError) error = NULL;

  vm = box_dummy_id_is_valid (sandbox_id) ? box_dummy_plugin_lookup (self, sandbox_id) : NULL;
  if (vm == NULL)
    return FALSE;
  if (!keep_disk) {
    vm->state = BOX_VM_STATE_LOST;
    vm->snapshot_at = 0;
  } else if (vm->state == BOX_VM_STATE_SUSPENDED || vm->state == BOX_VM_STATE_LOST) {
    /* its memory snapshot is a file of its own: it stays */
    vm->state = BOX_VM_STATE_LOST;
  } else {
    /* the disk it ran on is newer than any earlier snapshot */
    vm->state = BOX_VM_STATE_SHUTOFF;
    vm->snapshot_at = g_get_real_time ();
  }
  if (self->agent_procs != NULL)
    box_dummy_agents_stop (self->agent_procs, sandbox_id, FALSE);
  if (!box_dummy_vm_save (vm, box_plugin_get_state_dir (BOX_PLUGIN (self)), &error))
    g_warning ("%s", error->message);
  if (emit)
    box_hypervisor_emit_vm_lost (BOX_HYPERVISOR (self), sandbox_id);
  return TRUE;
}

gboolean
box_dummy_plugin_lose_vm (BoxDummyPlugin *self, const char *sandbox_id)
{
  g_return_val_if_fail (BOX_IS_DUMMY_PLUGIN (self), FALSE);
  return lose (self, sandbox_id, TRUE, TRUE);
}

void
box_dummy_plugin_end_vm (BoxDummyPlugin *self, const char *sandbox_id)
{
  g_return_if_fail (BOX_IS_DUMMY_PLUGIN (self));
  if (!lose (self, sandbox_id, TRUE, FALSE))
    g_warning ("dummy: no VM of sandbox %s to end", sandbox_id);
}

gboolean
box_dummy_plugin_lose_all (BoxDummyPlugin *self, const char *sandbox_id)
{
  g_return_val_if_fail (BOX_IS_DUMMY_PLUGIN (self), FALSE);
  return lose (self, sandbox_id, FALSE, TRUE);
}

gboolean
box_dummy_plugin_script (BoxDummyPlugin *self, const char *rules, GError **error)
{
  g_return_val_if_fail (BOX_IS_DUMMY_PLUGIN (self), FALSE);

  if (rules == NULL || rules[0] == '\0') {
    box_dummy_script_clear (self->script);
    return TRUE;
  }
  return box_dummy_script_add (self->script, rules, error);
}

void
box_dummy_plugin_set_capabilities (BoxDummyPlugin *self, BoxHypervisorCaps caps,
                                   const char *accel)
{
  g_return_if_fail (BOX_IS_DUMMY_PLUGIN (self));

  self->caps_set = TRUE;
  self->caps = caps;
  g_free (self->accel);
  self->accel = g_strdup (accel != NULL ? accel : "none");
}

static gboolean
box_dummy_plugin_script_action (BoxDummyPlugin *self, const char *rules)
{
  g_autoptr(GError) error = NULL;

  if (!box_dummy_plugin_script (self, rules, &error)) {
    g_warning ("dummy: %s", error->message);
    return FALSE;
  }
  return TRUE;
}

static gboolean
box_dummy_plugin_caps_action (BoxDummyPlugin *self, const char *names, const char *accel)
{
  g_autoptr(GError) error = NULL;
  BoxHypervisorCaps caps = 0;

  if (!box_dummy_caps_parse (names, &caps, &error)) {
    g_warning ("dummy: %s", error->message);
    return FALSE;
  }
  box_dummy_plugin_set_capabilities (self, caps, accel);
  return TRUE;
}

/* "set-agent": what get_agent() hands out for @sandbox_id (NULL: none) */
static gboolean
box_dummy_plugin_set_agent_action (BoxDummyPlugin *self, const char *sandbox_id, GObject *agent)
{
  if (agent == NULL)
    g_hash_table_remove (self->agents, sandbox_id);
  else
    g_hash_table_replace (self->agents, g_strdup (sandbox_id), g_object_ref (agent));
  return TRUE;
}

/* "guest-ca": that CA, a new reference (NULL: none) */
static GBytes *
box_dummy_plugin_guest_ca_action (BoxDummyPlugin *self)
{
  return self->guest_ca != NULL ? g_bytes_ref (self->guest_ca) : NULL;
}

void
box_dummy_plugin_add_actions (GObjectClass *klass)
{
  /**
   * BoxDummyPlugin::script:
   * @rules: rules as in box-dummy-script.h, appended; "" clears the script
   *
   * Returns: FALSE (and a warning) for a syntax error
   */
  g_signal_new_class_handler ("script", G_TYPE_FROM_CLASS (klass),
                              G_SIGNAL_RUN_LAST | G_SIGNAL_ACTION,
                              G_CALLBACK (box_dummy_plugin_script_action), NULL, NULL, NULL,
                              G_TYPE_BOOLEAN, 1, G_TYPE_STRING);
  /**
   * BoxDummyPlugin::set-capabilities:
   * @caps: capability names, comma-separated
   * @accel: the accel to report
   */
  g_signal_new_class_handler ("set-capabilities", G_TYPE_FROM_CLASS (klass),
                              G_SIGNAL_RUN_LAST | G_SIGNAL_ACTION,
                              G_CALLBACK (box_dummy_plugin_caps_action), NULL, NULL, NULL,
                              G_TYPE_BOOLEAN, 2, G_TYPE_STRING, G_TYPE_STRING);
  /**
   * BoxDummyPlugin::lose-vm:
   * @sandbox_id: as box_dummy_plugin_lose_vm()
   */
  g_signal_new_class_handler ("lose-vm", G_TYPE_FROM_CLASS (klass),
                              G_SIGNAL_RUN_LAST | G_SIGNAL_ACTION,
                              G_CALLBACK (box_dummy_plugin_lose_vm), NULL, NULL, NULL,
                              G_TYPE_BOOLEAN, 1, G_TYPE_STRING);
  /**
   * BoxDummyPlugin::lose-all:
   * @sandbox_id: as box_dummy_plugin_lose_all()
   */
  g_signal_new_class_handler ("lose-all", G_TYPE_FROM_CLASS (klass),
                              G_SIGNAL_RUN_LAST | G_SIGNAL_ACTION,
                              G_CALLBACK (box_dummy_plugin_lose_all), NULL, NULL, NULL,
                              G_TYPE_BOOLEAN, 1, G_TYPE_STRING);
  /**
   * BoxDummyPlugin::set-agent:
   * @sandbox_id: the sandbox
   * @agent: (nullable): a connected agent (boxd's BoxAgentClient) that
   *   get_agent() hands out for it from now on; %NULL: none again
   *
   * For engine tests of what goes to the guest (a scripted fake agent).
   */
  g_signal_new_class_handler ("set-agent", G_TYPE_FROM_CLASS (klass),
                              G_SIGNAL_RUN_LAST | G_SIGNAL_ACTION,
                              G_CALLBACK (box_dummy_plugin_set_agent_action), NULL, NULL, NULL,
                              G_TYPE_BOOLEAN, 2, G_TYPE_STRING, G_TYPE_OBJECT);
  /**
   * BoxDummyPlugin::guest-ca:
   *
   * Returns: (transfer full) (nullable): the CA set_guest_ca() was last
   *   given, for engine tests
   */
  g_signal_new_class_handler ("guest-ca", G_TYPE_FROM_CLASS (klass),
                              G_SIGNAL_RUN_LAST | G_SIGNAL_ACTION,
                              G_CALLBACK (box_dummy_plugin_guest_ca_action), NULL, NULL, NULL,
                              G_TYPE_BYTES, 0);
}
