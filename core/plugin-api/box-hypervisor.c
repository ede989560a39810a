/* box-hypervisor.c: the BoxHypervisor interface; see box-hypervisor.h. */
#include "config.h"

#include <string.h>

#include "box-hypervisor.h"

G_DEFINE_INTERFACE (BoxHypervisor, box_hypervisor, G_TYPE_OBJECT)

/* Both records borrow their members: their boxed copies are shallow. */
static BoxHypervisorCapabilities *
box_hypervisor_capabilities_copy (const BoxHypervisorCapabilities *caps)
{
  return g_memdup2 (caps, sizeof *caps);
}

G_DEFINE_BOXED_TYPE (BoxHypervisorCapabilities, box_hypervisor_capabilities,
                     box_hypervisor_capabilities_copy, g_free)

static BoxVmRequest *
box_vm_request_copy (const BoxVmRequest *request)
{
  return g_memdup2 (request, sizeof *request);
}

G_DEFINE_BOXED_TYPE (BoxVmRequest, box_vm_request, box_vm_request_copy, g_free)

static void
box_hypervisor_default_init (BoxHypervisorInterface *iface)
{
  /**
   * BoxHypervisor::vm-lost:
   * @self: the hypervisor
   * @sandbox_id: the sandbox whose VM died on its own
   *
   * Emitted on the main thread when a VM died on its own.
   */
  g_signal_new ("vm-lost", G_TYPE_FROM_INTERFACE (iface), G_SIGNAL_RUN_LAST,
                0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

const char *
box_hypervisor_get_accel (BoxHypervisor *self)
{
  BoxHypervisorInterface *iface;
  BoxHypervisorCapabilities caps = { 0 };

  g_return_val_if_fail (BOX_IS_HYPERVISOR (self), NULL);
  iface = BOX_HYPERVISOR_GET_IFACE (self);
  if (iface->get_capabilities != NULL) {
    iface->get_capabilities (self, &caps);
    return caps.accel != NULL ? caps.accel : "none";
  }
  g_return_val_if_fail (iface->get_accel != NULL, NULL);
  return iface->get_accel (self);
}

/* A plugin written before get_capabilities(): one that runs VMs is taken
 * to do everything, since it used to answer UNSUPPORTED where it could not. */
#define BOX_HYPERVISOR_CAPS_ALL \
  (BOX_HYPERVISOR_CAP_GUEST_AGENT | BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS | \
   BOX_HYPERVISOR_CAP_CHECKPOINTS | BOX_HYPERVISOR_CAP_FORK | BOX_HYPERVISOR_CAP_IMAGES)

void
box_hypervisor_get_capabilities (BoxHypervisor *self, BoxHypervisorCapabilities *caps)
{
  BoxHypervisorInterface *iface;

  g_return_if_fail (BOX_IS_HYPERVISOR (self));
  g_return_if_fail (caps != NULL);
  memset (caps, 0, sizeof (*caps));
  iface = BOX_HYPERVISOR_GET_IFACE (self);
  if (iface->get_capabilities != NULL) {
    iface->get_capabilities (self, caps);
    if (caps->accel == NULL)
      caps->accel = "none";
    return;
  }
  caps->accel = iface->get_accel != NULL ? iface->get_accel (self) : NULL;
  if (caps->accel == NULL)
    caps->accel = "none";
  caps->flags = g_str_equal (caps->accel, "none") ? BOX_HYPERVISOR_CAP_NONE
                                                   : BOX_HYPERVISOR_CAPS_ALL;
}

gboolean
box_hypervisor_has_caps (BoxHypervisor *self, BoxHypervisorCaps caps)
{
  BoxHypervisorCapabilities have;

  g_return_val_if_fail (BOX_IS_HYPERVISOR (self), FALSE);
  box_hypervisor_get_capabilities (self, &have);
  return (have.flags & caps) == caps;
}

GPtrArray *
box_hypervisor_list_templates (BoxHypervisor *self)
{
  BoxHypervisorInterface *iface;

  g_return_val_if_fail (BOX_IS_HYPERVISOR (self), NULL);
  iface = BOX_HYPERVISOR_GET_IFACE (self);
  g_return_val_if_fail (iface->list_templates != NULL, NULL);
  return iface->list_templates (self);
}

gboolean
box_hypervisor_check_room (BoxHypervisor *self, const BoxResources *resources, GError **error)
{
  BoxHypervisorInterface *iface;

  g_return_val_if_fail (BOX_IS_HYPERVISOR (self), FALSE);
  iface = BOX_HYPERVISOR_GET_IFACE (self);
  if (iface->check_room == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement check_room", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->check_room (self, resources, error);
}

void
box_hypervisor_run_async (BoxHypervisor *self, BoxVmOp op, const BoxVmRequest *request, GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  BoxHypervisorInterface *iface;

  g_return_if_fail (BOX_IS_HYPERVISOR (self));
  iface = BOX_HYPERVISOR_GET_IFACE (self);
  g_return_if_fail (iface->run_async != NULL);
  iface->run_async (self, op, request, cancellable, callback, user_data);
}

gboolean
box_hypervisor_run_finish (BoxHypervisor *self, GAsyncResult *result, GError **error)
{
  BoxHypervisorInterface *iface;

  g_return_val_if_fail (BOX_IS_HYPERVISOR (self), FALSE);
  iface = BOX_HYPERVISOR_GET_IFACE (self);
  if (iface->run_finish == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement run_finish", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->run_finish (self, result, error);
}

BoxAgentClient *
box_hypervisor_get_agent (BoxHypervisor *self, const char *sandbox_id, GError **error)
{
  BoxHypervisorInterface *iface;

  g_return_val_if_fail (BOX_IS_HYPERVISOR (self), NULL);
  iface = BOX_HYPERVISOR_GET_IFACE (self);
  if (iface->get_agent == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement get_agent", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->get_agent (self, sandbox_id, error);
}

BoxVmState
box_hypervisor_query (BoxHypervisor *self, const char *sandbox_id, gint64 *snapshot_at)
{
  BoxHypervisorInterface *iface;

  g_return_val_if_fail (BOX_IS_HYPERVISOR (self), BOX_VM_STATE_ABSENT);
  iface = BOX_HYPERVISOR_GET_IFACE (self);
  g_return_val_if_fail (iface->query != NULL, BOX_VM_STATE_ABSENT);
  return iface->query (self, sandbox_id, snapshot_at);
}

char **
box_hypervisor_list_checkpoints (BoxHypervisor *self, const char *sandbox_id, GError **error)
{
  BoxHypervisorInterface *iface;

  g_return_val_if_fail (BOX_IS_HYPERVISOR (self), NULL);
  g_return_val_if_fail (sandbox_id != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);
  iface = BOX_HYPERVISOR_GET_IFACE (self);
  if (iface->list_checkpoints == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                         "this hypervisor cannot list its checkpoints");
    return NULL;
  }
  return iface->list_checkpoints (self, sandbox_id, error);
}

void
box_hypervisor_set_guest_ca (BoxHypervisor *self, GBytes *pem)
{
  BoxHypervisorInterface *iface;

  g_return_if_fail (BOX_IS_HYPERVISOR (self));
  iface = BOX_HYPERVISOR_GET_IFACE (self);
  if (iface->set_guest_ca != NULL)
    iface->set_guest_ca (self, pem);
}

void
box_hypervisor_emit_vm_lost (BoxHypervisor *self, const char *sandbox_id)
{
  g_return_if_fail (BOX_IS_HYPERVISOR (self));
  g_signal_emit_by_name (self, "vm-lost", sandbox_id);
}

const char *
box_vm_op_to_string (BoxVmOp op)
{
  static const char *const names[BOX_VM_OP_LAST] = {
    "create", "suspend", "resume", "shutdown", "boot", "destroy",
    "checkpoint", "restore", "delete-checkpoint",
  };

  if ((guint) op >= BOX_VM_OP_LAST)
    return "unknown";
  return names[op];
}
