/* box-json-private.h: the typed getters of the strict request decoder
 * (box-json.c), shared by the request decoders.  Not installed.
 *
 * Each getter leaves *out alone when the member is absent or null and
 * fails with the Go-style type error when it has the wrong type; @path is
 * the dotted member path used in that message.
 */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define BAD_BODY "bad request body: "

const char *box_json_node_type_name (JsonNode *node);
gboolean    box_json_type_error      (JsonNode *node, const char *path, const char *type,
                                      GError **error);
/* "cannot unmarshal <type> into a request object"; returns FALSE */
gboolean    box_json_not_an_object   (JsonNode *node, GError **error);
/* BOX_ERROR_INVALID with @message; returns FALSE */
gboolean    box_json_invalid         (GError **error, const char *message);
/* The member, or NULL when absent or null. */
JsonNode   *box_json_member          (JsonObject *obj, const char *name);
gboolean    box_json_is_string       (JsonNode *node);
gboolean    box_json_get_string      (JsonObject *obj, const char *name, const char *path,
                                      char **out, GError **error);
gboolean    box_json_get_int         (JsonObject *obj, const char *name, const char *path,
                                      gboolean *present, gint64 *out, GError **error);
gboolean    box_json_get_bool        (JsonObject *obj, const char *name, const char *path,
                                      gboolean *present, gboolean *out, GError **error);
/* An object member checked against its allowed fields; *out NULL when absent. */
gboolean    box_json_get_object      (JsonObject *obj, const char *name, const char *path,
                                      const char *const *allowed, JsonObject **out,
                                      GError **error);
gboolean    box_json_get_strv        (JsonObject *obj, const char *name, const char *path,
                                      char ***out, GError **error);
gboolean    box_json_get_string_map  (JsonObject *obj, const char *name, const char *path,
                                      GHashTable **out, GError **error);

G_END_DECLS
