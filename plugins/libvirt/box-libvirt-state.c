/* box-libvirt-state.c: what the plugin keeps of each sandbox's VM.
 *
 * One small JSON file per sandbox in the state directory, kept by the
 * SDK's BoxStateStore (written atomically: write, fsync, rename) at every
 * state change, so that after a
 * restart (or a kill -9 of boxd) query() can answer and running VMs can be
 * adopted: the file names the VM (its directory and libvirt domain), the
 * state the plugin last put it in and where its snapshot is.  libvirt's
 * view (is the domain there?) is the other half; box-libvirt-ops.c puts
 * the two together.
 */
#include "config.h"

#include <glib/gstdio.h>
#include <gnutls/crypto.h>
#include <string.h>

#include "box-libvirt-private.h"

static const char *const state_names[] = {
  [BOX_VM_STATE_ABSENT] = "absent",
  [BOX_VM_STATE_RUNNING] = "running",
  [BOX_VM_STATE_SUSPENDED] = "suspended",
  [BOX_VM_STATE_SHUTOFF] = "shutoff",
  [BOX_VM_STATE_LOST] = "lost",
};

BoxLibvirtVm *
box_libvirt_vm_new (const char *id)
{
  BoxLibvirtVm *vm = g_new0 (BoxLibvirtVm, 1);

  vm->id = g_strdup (id);
  vm->template_key = g_strdup ("");
  vm->hostname = g_strdup ("");
  g_queue_init (&vm->waiting);
  return vm;
}

void
box_libvirt_vm_free (BoxLibvirtVm *vm)
{
  if (vm == NULL)
    return;
  g_assert (g_queue_is_empty (&vm->waiting));
  if (vm->cold_source != 0)
    g_source_remove (vm->cold_source);
  if (vm->agent != NULL) {
    g_signal_handler_disconnect (vm->agent, vm->agent_closed_id);
    g_object_unref (vm->agent);
  }
  g_free (vm->id);
  g_free (vm->vm_id);
  g_free (vm->template_key);
  g_free (vm->hostname);
  g_free (vm);
}

char *
box_libvirt_vm_domain_name (const char *vm_id)
{
  return g_strconcat (BOX_LIBVIRT_NAME_PREFIX, vm_id, NULL);
}

char *
box_libvirt_vm_path (const char *vm_dir, const char *vm_id, const char *file)
{
  return g_build_filename (vm_dir, "vms", vm_id, file, NULL);
}

gint64
box_libvirt_vm_disk_time (const BoxLibvirtVm *vm, const char *vm_dir)
{
  g_autofree char *disk = NULL;
  GStatBuf st;

  /* paused: nothing wrote to the disk since the pause */
  if (vm->state == BOX_VM_STATE_SUSPENDED && vm->snapshot_at != 0)
    return vm->snapshot_at;
  disk = box_libvirt_vm_path (vm_dir, vm->vm_id, "disk.qcow2");
  if (g_stat (disk, &st) == 0 && st.st_mtime > 0)
    return (gint64) st.st_mtime * G_USEC_PER_SEC;
  return g_get_real_time ();
}

/* 12 lowercase base32 characters from the system's random generator */
char *
box_libvirt_new_vm_id (void)
{
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  guint8 bytes[12];
  char *id = g_malloc (G_N_ELEMENTS (bytes) + 1);

  if (gnutls_rnd (GNUTLS_RND_NONCE, bytes, sizeof bytes) != 0) {
    for (guint i = 0; i < G_N_ELEMENTS (bytes); i++)
      bytes[i] = (guint8) g_random_int ();
  }
  for (guint i = 0; i < G_N_ELEMENTS (bytes); i++)
    id[i] = alphabet[bytes[i] & 31];
  id[G_N_ELEMENTS (bytes)] = '\0';
  return id;
}

gboolean
box_libvirt_vm_save (const BoxLibvirtVm *vm, const char *state_dir, GError **error)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(BoxStateStore) store = NULL;
  g_autoptr(JsonNode) root = NULL;

  if (state_dir == NULL)
    return TRUE;   /* no data directory: memory only */
  store = box_state_store_new (state_dir);
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "vm");
  json_builder_add_string_value (builder, vm->vm_id);
  json_builder_set_member_name (builder, "state");
  json_builder_add_string_value (builder, state_names[vm->state]);
  json_builder_set_member_name (builder, "cold");
  json_builder_add_boolean_value (builder, vm->cold);
  json_builder_set_member_name (builder, "snapshot_at");
  json_builder_add_int_value (builder, vm->snapshot_at);
  json_builder_set_member_name (builder, "cpus");
  json_builder_add_int_value (builder, vm->resources.cpus);
  json_builder_set_member_name (builder, "memory_mib");
  json_builder_add_int_value (builder, vm->resources.memory_mib);
  json_builder_set_member_name (builder, "disk_gib");
  json_builder_add_int_value (builder, vm->resources.disk_gib);
  json_builder_set_member_name (builder, "template");
  json_builder_add_string_value (builder, vm->template_key);
  json_builder_set_member_name (builder, "hostname");
  json_builder_add_string_value (builder, vm->hostname);
  json_builder_set_member_name (builder, "nic");
  json_builder_add_boolean_value (builder, vm->nic);
  json_builder_end_object (builder);

  root = json_builder_get_root (builder);
  return box_state_store_save (store, vm->id, root, error);
}

BoxLibvirtVm *
box_libvirt_vm_load (const char *id, const char *state_dir, GError **error)
{
  g_autoptr(BoxStateStore) store = box_state_store_new (state_dir);
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(GError) local_error = NULL;
  BoxLibvirtVm *vm;
  JsonObject *object;
  const char *state;
  const char *vm_id;

  root = box_state_store_load (store, id, &local_error);
  if (root == NULL) {
    /* absent or unreadable: either way nothing to adopt */
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s", local_error->message);
    return NULL;
  }
  if (!JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "not a JSON object");
    return NULL;
  }
  object = json_node_get_object (root);
  vm_id = json_object_get_string_member_with_default (object, "vm", "");
  if (!box_sandbox_id_is_valid (vm_id)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "bad VM id \"%s\"", vm_id);
    return NULL;
  }
  vm = box_libvirt_vm_new (id);
  vm->vm_id = g_strdup (vm_id);
  state = json_object_get_string_member_with_default (object, "state", "");
  vm->state = BOX_VM_STATE_ABSENT;
  for (guint i = BOX_VM_STATE_RUNNING; i < G_N_ELEMENTS (state_names); i++) {
    if (g_strcmp0 (state, state_names[i]) == 0)
      vm->state = i;
  }
  if (vm->state == BOX_VM_STATE_ABSENT) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "unknown state \"%s\"", state);
    box_libvirt_vm_free (vm);
    return NULL;
  }
  vm->cold = json_object_get_boolean_member_with_default (object, "cold", FALSE);
  vm->snapshot_at = json_object_get_int_member_with_default (object, "snapshot_at", 0);
  vm->resources.cpus = json_object_get_int_member_with_default (object, "cpus", 0);
  vm->resources.memory_mib = json_object_get_int_member_with_default (object, "memory_mib", 0);
  vm->resources.disk_gib = json_object_get_int_member_with_default (object, "disk_gib", 0);
  g_free (vm->template_key);
  vm->template_key = g_strdup (json_object_get_string_member_with_default (object, "template",
                                                                           ""));
  g_free (vm->hostname);
  vm->hostname = g_strdup (json_object_get_string_member_with_default (object, "hostname", ""));
  vm->nic = json_object_get_boolean_member_with_default (object, "nic", FALSE);
  return vm;
}

void
box_libvirt_vm_forget (const char *id, const char *state_dir)
{
  g_autoptr(BoxStateStore) store = NULL;
  g_autoptr(GError) error = NULL;

  if (state_dir == NULL)
    return;
  store = box_state_store_new (state_dir);
  if (!box_state_store_remove (store, id, &error))
    g_warning ("libvirt: %s", error->message);
}
