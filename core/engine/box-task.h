/* box-task.h: the Task record (`{name, started_at, expires_at}`), its
 * limits, its request body and its stored form.
 *
 * A task is a host-side record (kind "task", scope the sandbox ID) that
 * holds its sandbox awake against the idle rule until it expires or is
 * deleted (box-engine-tasks.c).  The transports write the API's JSON.
 */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define BOX_TASK_NAME_MAX        128    /* bytes */
#define BOX_TASK_EXPIRE_MAX_S    3600
#define BOX_TASK_EXPIRE_DEFAULT  3600
#define BOX_TASKS_MAX            64     /* live tasks per sandbox */

typedef struct {
  char   *name;         /* 1 to 128 bytes of UTF-8, no NUL */
  gint64  started_at;   /* usec since the epoch */
  gint64  expires_at;   /* usec since the epoch; live while now < expires_at */
} BoxTask;

BoxTask  *box_task_copy           (const BoxTask *task);
void      box_task_free           (BoxTask *task);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxTask, box_task_free)

/* 1 to 128 bytes of valid UTF-8; else 400 invalid. */
gboolean  box_task_check_name     (const char *name, GError **error);
/* PUT /tasks/{name}: {expire_s?}, an integer 1 to 3600 (*expire_s 3600
 * when absent); an unknown field or another type is 400 invalid. */
gboolean  box_task_put_from_json  (JsonNode *body, guint *expire_s, GError **error);

/* The stored body (times as integers), and back (NULL: not a task body). */
char     *box_task_to_storage     (const BoxTask *task);
BoxTask  *box_task_from_storage   (const char *body);

G_END_DECLS
