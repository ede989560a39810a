/* box-dummy-vm.c: the `dummy` hypervisor's per-sandbox record and its
 * file; see box-dummy-vm.h. */
#include "config.h"

#include <string.h>

#include "box-dummy-vm.h"
#include "box-plugin-context.h"

static const char *const box_dummy_state_names[] = {
  [BOX_VM_STATE_ABSENT] = "absent",
  [BOX_VM_STATE_RUNNING] = "running",
  [BOX_VM_STATE_SUSPENDED] = "suspended",
  [BOX_VM_STATE_SHUTOFF] = "shutoff",
  [BOX_VM_STATE_LOST] = "lost",
};

BoxDummyVm *
box_dummy_vm_new (const char *id)
{
  BoxDummyVm *vm = g_new0 (BoxDummyVm, 1);

  vm->id = g_strdup (id);
  vm->checkpoints = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  return vm;
}

void
box_dummy_vm_free (BoxDummyVm *vm)
{
  g_free (vm->id);
  g_hash_table_unref (vm->checkpoints);
  g_free (vm);
}


/* Sandbox IDs become file names: the SDK's one check. */
gboolean
box_dummy_id_is_valid (const char *id)
{
  return box_sandbox_id_is_valid (id);
}

const char *
box_dummy_vm_state_name (BoxVmState state)
{
  return (guint) state < G_N_ELEMENTS (box_dummy_state_names) ? box_dummy_state_names[state] : "unknown";
}

char *
box_dummy_vm_path (const char *dir, const char *id)
{
  g_autofree char *basename = NULL;

  if (dir == NULL)
    return NULL;
  basename = g_strconcat (id, ".json", NULL);
  return g_build_filename (dir, basename, NULL);
}

gboolean
box_dummy_vm_save (BoxDummyVm *vm, const char *dir, GError **error)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *path = box_dummy_vm_path (dir, vm->id);
  g_autofree char *data = NULL;
  g_autoptr(GError) error_local = NULL;
  GHashTableIter iter;
  gpointer key, value;

  if (path == NULL)
    return TRUE;   /* no engine, no data directory: memory only */

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "state");
  json_builder_add_string_value (builder, box_dummy_state_names[vm->state]);
  json_builder_set_member_name (builder, "snapshot_at");
  json_builder_add_int_value (builder, vm->snapshot_at);
  json_builder_set_member_name (builder, "cpus");
  json_builder_add_int_value (builder, vm->resources.cpus);
  json_builder_set_member_name (builder, "memory_mib");
  json_builder_add_int_value (builder, vm->resources.memory_mib);
  json_builder_set_member_name (builder, "disk_gib");
  json_builder_add_int_value (builder, vm->resources.disk_gib);
  json_builder_set_member_name (builder, "checkpoints");
  json_builder_begin_object (builder);
  g_hash_table_iter_init (&iter, vm->checkpoints);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    const BoxDummyCheckpoint *checkpoint = value;
    json_builder_set_member_name (builder, key);
    json_builder_begin_object (builder);
    json_builder_set_member_name (builder, "memory");
    json_builder_add_boolean_value (builder, checkpoint->memory);
    json_builder_set_member_name (builder, "created_at");
    json_builder_add_int_value (builder, checkpoint->created_at);
    json_builder_end_object (builder);
  }
  json_builder_end_object (builder);
  json_builder_end_object (builder);

  root = json_builder_get_root (builder);
  json_generator_set_root (generator, root);
  data = json_generator_to_data (generator, NULL);
  if (!g_file_set_contents_full (path, data, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600,
                                 &error_local)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "cannot save the state of %s: %s", vm->id, error_local->message);
    return FALSE;
  }
  return TRUE;
}

BoxDummyVm *
box_dummy_vm_load (const char *id, const char *path, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(BoxDummyVm) vm = box_dummy_vm_new (id);
  JsonObject *object;
  JsonObject *checkpoints;
  const char *state;
  GList *members;

  if (!json_parser_load_from_mapped_file (parser, path, error))
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "not a JSON object");
    return NULL;
  }
  object = json_node_get_object (json_parser_get_root (parser));
  state = json_object_get_string_member_with_default (object, "state", "");
  vm->state = BOX_VM_STATE_ABSENT;
  for (guint i = BOX_VM_STATE_RUNNING; i < G_N_ELEMENTS (box_dummy_state_names); i++) {
    if (g_strcmp0 (state, box_dummy_state_names[i]) == 0)
      vm->state = i;
  }
  if (vm->state == BOX_VM_STATE_ABSENT) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "unknown state \"%s\"", state);
    return NULL;
  }
  vm->snapshot_at = json_object_get_int_member_with_default (object, "snapshot_at", 0);
  vm->resources.cpus = json_object_get_int_member_with_default (object, "cpus", 0);
  vm->resources.memory_mib = json_object_get_int_member_with_default (object, "memory_mib", 0);
  vm->resources.disk_gib = json_object_get_int_member_with_default (object, "disk_gib", 0);
  if (json_object_has_member (object, "checkpoints") &&
      JSON_NODE_HOLDS_OBJECT (json_object_get_member (object, "checkpoints"))) {
    checkpoints = json_object_get_object_member (object, "checkpoints");
    members = json_object_get_members (checkpoints);
    for (GList *l = members; l != NULL; l = l->next) {
      JsonNode *node = json_object_get_member (checkpoints, l->data);
      BoxDummyCheckpoint *checkpoint;

      if (!JSON_NODE_HOLDS_OBJECT (node))
        continue;
      checkpoint = g_new0 (BoxDummyCheckpoint, 1);
      checkpoint->memory = json_object_get_boolean_member_with_default (json_node_get_object (node),
                                                                        "memory", FALSE);
      checkpoint->created_at = json_object_get_int_member_with_default (json_node_get_object (node),
                                                                        "created_at", 0);
      g_hash_table_insert (vm->checkpoints, g_strdup (l->data), checkpoint);
    }
    g_list_free (members);
  }
  return g_steal_pointer (&vm);
}
