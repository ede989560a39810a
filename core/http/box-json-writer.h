/* box-json-writer.h: JSON written straight into a GString, for the API's
 * hot answers (box-http-sandbox-json.c): no JsonNode tree, no generator.
 * The bytes are those json-glib's json_to_string (node, FALSE) writes for
 * the same tree (same escapes, no spaces), which tests/http/json-writer-test.c
 * checks.  Commas are placed from the buffer's last byte: a value or a
 * member name that follows '{', '[' or ':' gets none. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

void box_json_begin_object  (GString *out);
void box_json_end_object    (GString *out);
void box_json_begin_array   (GString *out);
void box_json_end_array     (GString *out);
/* "name": (a value follows) */
void box_json_key           (GString *out, const char *name);
/* null for NULL, as json_object_set_string_member () */
void box_json_string        (GString *out, const char *value);
void box_json_int           (GString *out, gint64 value);
void box_json_bool          (GString *out, gboolean value);
void box_json_null          (GString *out);

/* "name":value */
void box_json_member_string (GString *out, const char *name, const char *value);
void box_json_member_int    (GString *out, const char *name, gint64 value);
void box_json_member_bool   (GString *out, const char *name, gboolean value);

G_END_DECLS
