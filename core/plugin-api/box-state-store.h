/* box-state-store.h: a plugin's per-sandbox JSON state, kept atomically.
 *
 * One file <dir>/<id>.json per ID (IDs as box_sandbox_id_is_valid() says),
 * written to a temporary file, synced and renamed over the old one, so a
 * crash (or kill -9) at any moment leaves either the old or the new
 * content, never a mix.  The hypervisor keeps what it needs to find a VM
 * again after a restart here, the network plugin its attachments.
 *
 * Thread contract: a store holds no state besides its directory; calls on
 * different IDs may come from any threads at once, calls on one ID must not
 * race each other (the engine never runs two operations on one sandbox).
 */
#pragma once

#include <json-glib/json-glib.h>

#include "box-export.h"

G_BEGIN_DECLS

#define BOX_TYPE_STATE_STORE (box_state_store_get_type ())
BOX_PLUGIN_API
G_DECLARE_FINAL_TYPE (BoxStateStore, box_state_store, BOX, STATE_STORE, GObject)

/**
 * box_state_store_new:
 * @dir: the directory (a plugin's state directory, or a folder in it);
 *   created 0700 when missing at the first save
 *
 * Returns: (transfer full): the store
 */
BOX_PLUGIN_API
BoxStateStore *box_state_store_new    (const char *dir);
BOX_PLUGIN_API
const char    *box_state_store_get_dir (BoxStateStore *self);
/**
 * box_state_store_save:
 * @node: the state; a JSON object or array
 *
 * Replaces the state of @id atomically and durably (the file is 0600).
 * An invalid @id is BOX_ERROR_INVALID, a failed write BOX_ERROR_INTERNAL.
 */
BOX_PLUGIN_API
gboolean       box_state_store_save   (BoxStateStore *self,
                                       const char    *id,
                                       JsonNode      *node,
                                       GError       **error);
/**
 * box_state_store_load:
 *
 * Returns: (transfer full) (nullable): the state of @id; %NULL with
 *   BOX_ERROR_NOT_FOUND when there is none, BOX_ERROR_INTERNAL when the
 *   file cannot be read or is not JSON
 */
BOX_PLUGIN_API
JsonNode      *box_state_store_load   (BoxStateStore *self,
                                       const char    *id,
                                       GError       **error);
/**
 * box_state_store_list:
 *
 * Returns: (transfer full) (array zero-terminated=1): the IDs that have a
 *   state, sorted; files with other names (temporaries too) are skipped
 */
BOX_PLUGIN_API
char         **box_state_store_list   (BoxStateStore *self);
/* Idempotent: TRUE also when @id has no state. */
BOX_PLUGIN_API
gboolean       box_state_store_remove (BoxStateStore *self,
                                       const char    *id,
                                       GError       **error);
/* rename(2): the state belongs to exactly one of the two IDs at any time;
 * an existing state of @new_id is replaced. */
BOX_PLUGIN_API
gboolean       box_state_store_move   (BoxStateStore *self,
                                       const char    *old_id,
                                       const char    *new_id,
                                       GError       **error);

G_END_DECLS
