/* box-records-private.h: helpers shared by box-records.c (the API form),
 * box-records-boxed.c (lifetimes) and box-records-storage.c (the storage form).  Not installed. */
#pragma once

#include "box-records.h"

G_BEGIN_DECLS

/* enum value -> name */
extern const char *const box_records_sandbox_states[5];
extern const char *const box_records_idle_actions[3];
extern const char *const box_records_deadline_actions[3];

GHashTable *box_records_string_map_new (void);
/* a deep copy of a char* -> char* map; an empty one for NULL */
GHashTable *box_records_string_map_copy (GHashTable *map);
JsonArray *box_records_strv_to_json (char *const *strv);
void box_records_set_string (JsonObject *obj, const char *member, const char *value);
void box_records_set_nullable_string (JsonObject *obj, const char *member, const char *value);
char *box_records_object_to_string (JsonObject *obj);
gboolean box_records_enum_from_string (const char *const *names, guint n_names, const char *str, guint *out);
void box_records_sandbox_common_to_json (JsonObject *obj, const BoxSandbox *sandbox, gboolean api);
/* bytes <-> lowercase hex; decoding takes either case, NULL when malformed */
char *box_records_hex_encode (GBytes *bytes);
GBytes *box_records_hex_decode (const char *hex);
void box_records_secret_common_to_json (JsonObject *obj, const BoxSecret *secret);
/* A deep copy: json_object_ref() and json_node_copy() share containers. */
JsonObject *box_records_json_object_deep_copy (JsonObject *obj);

G_END_DECLS
