/* box-keys-plugin.h: the `keys` auth plugin (internal to the plugin and its test). */
#pragma once

#include "box-auth.h"
#include "box-storage.h"
#include "box-storage-records.h"

G_BEGIN_DECLS

#define BOX_TYPE_KEYS_PLUGIN (box_keys_plugin_get_type ())
G_DECLARE_FINAL_TYPE (BoxKeysPlugin, box_keys_plugin, BOX, KEYS_PLUGIN, BoxPlugin)

/* For tests: use @storage instead of the engine's. */
void     box_keys_plugin_set_storage (BoxKeysPlugin *self, BoxStorage *storage);

/* TRUE when @credential has the shape of a key: "box_" + 32 of [a-z2-7]. */
gboolean box_keys_is_key_shaped      (const char *credential);
/* Lowercase hex SHA-256 of @secret. */
char    *box_keys_hash_secret        (const char *secret);

G_END_DECLS
