/* box-dummy-vm.h: what the `dummy` hypervisor keeps per sandbox, and its
 * file <state-dir>/<sandbox id>.json (internal to the plugin). */
#pragma once

#include "box-hypervisor.h"

G_BEGIN_DECLS

typedef struct {
  gboolean memory;
  gint64   created_at;
} BoxDummyCheckpoint;

typedef struct {
  char         *id;
  BoxVmState    state;
  gint64        snapshot_at;
  BoxResources  resources;
  GHashTable   *checkpoints;   /* id -> BoxDummyCheckpoint* */
} BoxDummyVm;

BoxDummyVm  *box_dummy_vm_new        (const char *id);
void         box_dummy_vm_free       (BoxDummyVm *vm);
const char  *box_dummy_vm_state_name (BoxVmState state);
/* Sandbox IDs become file names: nothing but [a-z0-9-]. */
gboolean     box_dummy_id_is_valid   (const char *id);
/* <dir>/<id>.json, or NULL without a @dir */
char        *box_dummy_vm_path       (const char *dir, const char *id);
/* Writes @vm to <dir>/<id>.json atomically (0600); without a @dir it
 * lives in memory only and this does nothing. */
gboolean     box_dummy_vm_save       (BoxDummyVm *vm, const char *dir, GError **error);
BoxDummyVm  *box_dummy_vm_load       (const char *id, const char *path, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxDummyVm, box_dummy_vm_free)

G_END_DECLS
