/* box-libvirt-adopt.c: what a previous run left.
 *
 * At start the plugin reads its state files and asks libvirt about each
 * VM: a running domain is adopted (the agent connection is opened again,
 * its hello goes out at once), a paused one stays hot-paused and gets its
 * cold timer back, a cold snapshot must still be on disk (a paused domain
 * of a cold VM, its standby or a wake cut before its resume, is ended:
 * the standby is made again), and a domain that is gone leaves its disk
 * (SHUTOFF).  A migration the previous run
 * left behind (a checkpoint or a cold pause cut midway) is ended first,
 * and a disk snapshot cut midway finished or undone.
 * The engine's reconciliation then compares its records with query().
 */
#include "config.h"

#include <libvirt/virterror.h>
#include <string.h>

#include "box-libvirt-op.h"

/* A checkpoint or a cold pause cut by the end of the previous run left its
 * migration to QEMU: cancelled if it runs, and a guest its end stopped
 * runs again (a sandbox that was running), or runs for a moment and is
 * paused again (one that was paused: QEMU gets its disk images back only
 * by running), so that the next migration out of it is safe. */
static void
end_migration (virDomainPtr dom, BoxLibvirtVm *vm, int *state)
{
  g_autoptr(GError) error = NULL;
  gboolean resumed = FALSE;
  int reason = 0;

  if (!box_libvirt_domain_end_migration (dom, &resumed, &error)) {
    g_warning ("libvirt: sandbox %s: %s", vm->id, error->message);
    return;
  }
  if (!resumed)
    return;
  if (vm->state == BOX_VM_STATE_SUSPENDED && virDomainSuspend (dom) != 0)
    g_warning ("libvirt: sandbox %s: cannot pause its VM again after a cut migration", vm->id);
  g_message ("libvirt: sandbox %s: a migration of its VM cut by the previous run ended; "
             "the VM %s", vm->id, vm->state == BOX_VM_STATE_SUSPENDED ? "stays paused" : "runs again");
  if (virDomainGetState (dom, state, &reason, 0) < 0)
    *state = VIR_DOMAIN_NOSTATE;
}

void
box_libvirt_adopt (BoxLibvirtPlugin *self)
{
  const char *state_dir = box_plugin_get_state_dir (BOX_PLUGIN (self));
  g_autoptr(GDir) dir = NULL;
  g_autoptr(GError) error = NULL;
  virConnectPtr conn;
  const char *entry;

  if (state_dir == NULL)
    return;
  conn = box_libvirt_conn_get (self->conn, &error);
  if (conn == NULL) {
    g_warning ("libvirt: %s", error->message);
    return;
  }
  dir = g_dir_open (state_dir, 0, NULL);
  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *id = NULL;
    g_autofree char *path = NULL;
    g_autofree char *domain = NULL;
    g_autofree char *cold = NULL;
    g_autoptr(GError) vm_error = NULL;
    BoxLibvirtVm *vm;
    virDomainPtr dom;
    int state = VIR_DOMAIN_NOSTATE;
    int reason = 0;

    if (!g_str_has_suffix (entry, ".json"))
      continue;
    id = g_strndup (entry, strlen (entry) - strlen (".json"));
    if (!box_sandbox_id_is_valid (id))
      continue;
    path = g_build_filename (state_dir, entry, NULL);
    vm = box_libvirt_vm_load (id, state_dir, &vm_error);
    if (vm == NULL) {
      g_warning ("libvirt: ignoring %s: %s", path, vm_error->message);
      continue;
    }
    g_hash_table_replace (self->vms, vm->id, vm);
    box_libvirt_vm_sweep_temps (self, vm);
    domain = box_libvirt_vm_domain_name (vm->vm_id);
    dom = box_libvirt_domain_lookup (conn, domain);
    if (dom != NULL && vm->state == BOX_VM_STATE_SUSPENDED && vm->cold &&
        virDomainGetState (dom, &state, &reason, 0) == 0 && state == VIR_DOMAIN_PAUSED) {
      /* a standby for its wake (box-libvirt-standby.c), or a wake cut
       * before its resume: ended (and its attachment); made again */
      box_libvirt_domain_destroy (conn, domain, NULL);
      box_libvirt_detach_network (self, vm->id);
      virDomainFree (dom);
      dom = NULL;
    }
    state = VIR_DOMAIN_NOSTATE;
    if (dom != NULL && (virDomainIsActive (dom) != 1 ||
                        virDomainGetState (dom, &state, &reason, 0) < 0))
      state = VIR_DOMAIN_NOSTATE;
    if (state == VIR_DOMAIN_RUNNING || state == VIR_DOMAIN_PAUSED)
      end_migration (dom, vm, &state);
    if (!box_libvirt_disk_snapshot_recover (self, vm, state == VIR_DOMAIN_RUNNING ||
                                                      state == VIR_DOMAIN_PAUSED ? dom : NULL,
                                            &vm_error)) {
      g_warning ("libvirt: sandbox %s: %s", id, vm_error->message);
      g_clear_error (&vm_error);
    }
    if (dom != NULL)
      virDomainFree (dom);
    virResetLastError ();

    if (vm->state == BOX_VM_STATE_SUSPENDED && vm->cold) {
      cold = box_libvirt_vm_path (self->config.vm_dir, vm->vm_id, "cold.mig");
      if (!g_file_test (cold, G_FILE_TEST_IS_REGULAR)) {
        g_message ("libvirt: sandbox %s: its cold snapshot is gone; its disk is kept", id);
        vm->snapshot_at = box_libvirt_vm_disk_time (vm, self->config.vm_dir);
        vm->state = BOX_VM_STATE_SHUTOFF;
        vm->cold = FALSE;
        box_libvirt_save_vm (self, vm);
      } else {
        box_libvirt_standby_want (self, vm);
      }
      continue;
    }
    if (vm->state == BOX_VM_STATE_SHUTOFF)
      continue;
    if (state == VIR_DOMAIN_RUNNING) {
      g_autofree char *socket = box_libvirt_vm_path (self->config.vm_dir, vm->vm_id,
                                                     "agent.sock");
      g_autoptr(BoxAgent) agent =
        box_libvirt_guest_connect_now (box_plugin_get_context (BOX_PLUGIN (self)), socket, &vm_error);

      if (vm->state != BOX_VM_STATE_RUNNING) {
        vm->state = BOX_VM_STATE_RUNNING;
        vm->snapshot_at = 0;
        box_libvirt_save_vm (self, vm);
      }
      if (agent == NULL)
        g_warning ("libvirt: sandbox %s: %s", id, vm_error->message);
      box_libvirt_set_agent (self, vm, agent);
      g_message ("libvirt: adopted the running VM %s of sandbox %s", domain, id);
    } else if (state == VIR_DOMAIN_PAUSED) {
      if (vm->state != BOX_VM_STATE_SUSPENDED) {
        /* boxd died between the pause and its record */
        vm->state = BOX_VM_STATE_SUSPENDED;
        vm->snapshot_at = g_get_real_time ();
        box_libvirt_save_vm (self, vm);
      }
      vm->paused_at = g_get_monotonic_time ();
      box_libvirt_schedule_cold (self, vm, self->config.hot_pause_s);
      g_message ("libvirt: adopted the paused VM %s of sandbox %s", domain, id);
    } else {
      g_message ("libvirt: the VM %s of sandbox %s is gone; its disk is kept", domain, id);
      vm->snapshot_at = box_libvirt_vm_disk_time (vm, self->config.vm_dir);
      vm->state = BOX_VM_STATE_SHUTOFF;
      box_libvirt_save_vm (self, vm);
      box_libvirt_detach_network (self, id);
    }
  }
  virConnectClose (conn);
}
