/* box-task.c: the Task record, its request body and its stored form (see
 * box-task.h). */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-json-private.h"
#include "box-requests.h"
#include "box-task.h"

BoxTask *
box_task_copy (const BoxTask *task)
{
  BoxTask *copy = g_new0 (BoxTask, 1);

  copy->name = g_strdup (task->name);
  copy->started_at = task->started_at;
  copy->expires_at = task->expires_at;
  return copy;
}

void
box_task_free (BoxTask *task)
{
  if (task == NULL)
    return;
  g_free (task->name);
  g_free (task);
}

gboolean
box_task_check_name (const char *name, GError **error)
{
  gsize len = name != NULL ? strlen (name) : 0;

  if (len == 0 || len > BOX_TASK_NAME_MAX) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "invalid task name: 1 to %d bytes (URL-encoded in the path), not %" G_GSIZE_FORMAT,
                 BOX_TASK_NAME_MAX, len);
    return FALSE;
  }
  if (!g_utf8_validate (name, len, NULL)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         "invalid task name: not UTF-8");
    return FALSE;
  }
  return TRUE;
}

gboolean
box_task_put_from_json (JsonNode *body, guint *expire_s, GError **error)
{
  static const char *const fields[] = { "expire_s", NULL };
  gint64 value = BOX_TASK_EXPIRE_DEFAULT;
  JsonObject *obj;

  if (body == NULL || !JSON_NODE_HOLDS_OBJECT (body))
    return box_json_not_an_object (body, error);
  obj = json_node_get_object (body);
  if (!box_json_check_fields (obj, fields, error) ||
      !box_json_get_int (obj, "expire_s", "expire_s", NULL, &value, error))
    return FALSE;
  if (value < 1 || value > BOX_TASK_EXPIRE_MAX_S) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "invalid expire_s %" G_GINT64_FORMAT ": must be 1 to %d", value,
                 BOX_TASK_EXPIRE_MAX_S);
    return FALSE;
  }
  *expire_s = (guint) value;
  return TRUE;
}

char *
box_task_to_storage (const BoxTask *task)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "name");
  json_builder_add_string_value (builder, task->name);
  json_builder_set_member_name (builder, "started_at");
  json_builder_add_int_value (builder, task->started_at);
  json_builder_set_member_name (builder, "expires_at");
  json_builder_add_int_value (builder, task->expires_at);
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  return json_to_string (root, FALSE);
}

BoxTask *
box_task_from_storage (const char *body)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(BoxTask) task = NULL;
  JsonObject *obj;

  if (!json_parser_load_from_data (parser, body, -1, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return NULL;
  obj = json_node_get_object (json_parser_get_root (parser));
  if (!json_object_has_member (obj, "name") || !json_object_has_member (obj, "started_at") ||
      !json_object_has_member (obj, "expires_at"))
    return NULL;
  task = g_new0 (BoxTask, 1);
  task->name = g_strdup (json_object_get_string_member (obj, "name"));
  task->started_at = json_object_get_int_member (obj, "started_at");
  task->expires_at = json_object_get_int_member (obj, "expires_at");
  if (task->name == NULL)
    return NULL;
  return g_steal_pointer (&task);
}
