/* box-engine-tasks.c: tasks, the records that hold a sandbox awake.
 *
 * A task is a record of kind "task" (scope the sandbox ID, ID
 * "<sandbox>/<name>") in the store, so that the idle rule sees it without
 * asking the sandbox, and the task routes neither wake the sandbox nor
 * count as its activity (doc/API.md, "Tasks").  A task is live while the
 * engine clock's real time is before its expires_at: expiry counts wall
 * time, a pause included.  Expired records are never answered; they are
 * deleted when a task call or the tick finds them.
 *
 * The tick asks box_engine_tasks_live() of a sandbox that would otherwise
 * be idle: each runtime caches the latest expiry of its live tasks
 * (loaded from the store the first time, kept in step by every task call),
 * so a sandbox held by a task costs no read per tick.
 *
 * A stop (of any cause) and a restore end every task of the sandbox
 * (box_engine_end_tasks()); a pause does not.  Deleting the sandbox deletes
 * its scope, tasks included.
 */
#include "config.h"

#include "box-engine-ops-private.h"
#include "box-storage-records.h"
#include "box-task.h"

#define TASK_KIND "task"

static char *
task_record_id (const char *sandbox_id, const char *name)
{
  return g_strdup_printf ("%s/%s", sandbox_id, name);
}

/* The live tasks of @sandbox_id in start order; expired records are
 * deleted on the way.  The runtime's cache follows. */
static GPtrArray *
load_live (BoxEngine *self, const char *sandbox_id, GError **error)
{
  g_autoptr(GPtrArray) records = box_storage_list (self->storage, TASK_KIND, sandbox_id,
                                                   BOX_STORAGE_BY_SCOPE, NULL,
                                                   BOX_STORAGE_ORDER_CREATED, error);
  g_autoptr(GPtrArray) live = g_ptr_array_new_with_free_func ((GDestroyNotify) box_task_free);
  g_autoptr(GArray) expired = g_array_new (FALSE, TRUE, sizeof (BoxStorageOp));
  BoxEngineRuntime *rt;
  gint64 now = box_engine_now (self);
  gint64 until = 0;

  if (records == NULL)
    return NULL;
  for (guint i = 0; i < records->len; i++) {
    BoxStorageRecord *record = g_ptr_array_index (records, i);
    g_autoptr(BoxTask) task = box_task_from_storage (record->body);

    if (task == NULL || task->expires_at <= now) {
      BoxStorageOp op = { BOX_STORAGE_OP_DELETE, record };

      g_array_append_val (expired, op);
      continue;
    }
    until = MAX (until, task->expires_at);
    g_ptr_array_add (live, g_steal_pointer (&task));
  }
  if (expired->len > 0) {
    g_autoptr(GError) local = NULL;

    if (!box_storage_write (self->storage, (BoxStorageOp *) expired->data, expired->len, &local))
      g_warning ("sandbox %s: cannot delete expired tasks: %s", sandbox_id, local->message);
  }
  rt = box_engine_runtime_get (self, sandbox_id);
  rt->tasks_until = until;
  rt->tasks_known = TRUE;
  return g_steal_pointer (&live);
}

/* What a call on one task starts from: the sandbox (404 first), the name
 * checked, the live tasks and the task named (NULL when absent). */
typedef struct {
  BoxSandbox *sandbox;
  GPtrArray  *live;
  BoxTask    *task;     /* in live, or NULL */
} TaskCall;

static void
task_call_clear (TaskCall *call)
{
  g_clear_pointer (&call->sandbox, box_sandbox_free);
  g_clear_pointer (&call->live, g_ptr_array_unref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (TaskCall, task_call_clear)

static gboolean
task_call_open (BoxEngine *self, const char *project, const char *id_or_name, const char *name,
                gboolean must_exist, TaskCall *call, GError **error)
{
  BOX_ENGINE_ASSERT_OWNER (self);
  call->sandbox = box_storage_sandbox_get (self->storage, project, id_or_name, error);
  if (call->sandbox == NULL || !box_task_check_name (name, error))
    return FALSE;
  call->live = load_live (self, call->sandbox->id, error);
  if (call->live == NULL)
    return FALSE;
  for (guint i = 0; i < call->live->len && call->task == NULL; i++) {
    BoxTask *task = g_ptr_array_index (call->live, i);

    if (g_str_equal (task->name, name))
      call->task = task;
  }
  if (call->task == NULL && must_exist) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND,
                 "no live task %s in sandbox %s", name, call->sandbox->name);
    return FALSE;
  }
  return TRUE;
}

/* The cache after the call: the latest expiry of the live tasks other
 * than the one called, and @until (0: that one is gone). */
static void
task_call_close (BoxEngine *self, TaskCall *call, gint64 until)
{
  BoxEngineRuntime *rt = box_engine_runtime_get (self, call->sandbox->id);

  for (guint i = 0; i < call->live->len; i++) {
    BoxTask *other = g_ptr_array_index (call->live, i);

    if (other != call->task)
      until = MAX (until, other->expires_at);
  }
  rt->tasks_until = until;
}

GPtrArray *
box_engine_list_tasks (BoxEngine *self, const char *project, const char *id_or_name,
                       GError **error)
{
  g_autoptr(BoxSandbox) sandbox = NULL;

  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (id_or_name != NULL, NULL);
  BOX_ENGINE_ASSERT_OWNER (self);
  sandbox = box_storage_sandbox_get (self->storage, project, id_or_name, error);
  if (sandbox == NULL)
    return NULL;
  return load_live (self, sandbox->id, error);
}

BoxTask *
box_engine_get_task (BoxEngine *self, const char *project, const char *id_or_name,
                     const char *name, GError **error)
{
  g_auto(TaskCall) call = { 0 };

  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (id_or_name != NULL && name != NULL, NULL);
  if (!task_call_open (self, project, id_or_name, name, TRUE, &call, error))
    return NULL;
  return box_task_copy (call.task);
}

BoxTask *
box_engine_put_task (BoxEngine *self, const char *project, const char *id_or_name,
                     const char *name, guint expire_s, GError **error)
{
  g_auto(TaskCall) call = { 0 };
  g_autoptr(BoxTask) made = NULL;
  g_autoptr(BoxStorageRecord) record = NULL;
  g_autofree char *id = NULL;
  g_autofree char *body = NULL;
  gint64 now;
  gboolean ok;

  g_return_val_if_fail (BOX_IS_ENGINE (self), NULL);
  g_return_val_if_fail (id_or_name != NULL && name != NULL, NULL);
  g_return_val_if_fail (expire_s >= 1 && expire_s <= BOX_TASK_EXPIRE_MAX_S, NULL);
  if (!task_call_open (self, project, id_or_name, name, FALSE, &call, error))
    return NULL;
  if (call.task == NULL && call.live->len >= BOX_TASKS_MAX) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT,
                 "sandbox %s has %u live tasks, the most it may have; delete one or let it expire",
                 call.sandbox->name, call.live->len);
    return NULL;
  }
  now = box_engine_now (self);
  made = g_new0 (BoxTask, 1);
  made->name = g_strdup (name);
  made->started_at = call.task != NULL ? call.task->started_at : now;
  made->expires_at = now + (gint64) expire_s * G_USEC_PER_SEC;
  id = task_record_id (call.sandbox->id, name);
  body = box_task_to_storage (made);
  record = box_storage_record_new (TASK_KIND, call.sandbox->id, id, body);
  record->created_at = made->started_at;
  ok = call.task != NULL ? box_storage_update (self->storage, record, error)
                         : box_storage_insert (self->storage, record, error);
  if (!ok)
    return NULL;
  task_call_close (self, &call, made->expires_at);
  g_debug ("sandbox %s: task %s live until %" G_GINT64_FORMAT, call.sandbox->id, name,
           made->expires_at);
  return g_steal_pointer (&made);
}

gboolean
box_engine_delete_task (BoxEngine *self, const char *project, const char *id_or_name,
                        const char *name, GError **error)
{
  g_auto(TaskCall) call = { 0 };
  g_autofree char *id = NULL;

  g_return_val_if_fail (BOX_IS_ENGINE (self), FALSE);
  g_return_val_if_fail (id_or_name != NULL && name != NULL, FALSE);
  if (!task_call_open (self, project, id_or_name, name, TRUE, &call, error))
    return FALSE;
  id = task_record_id (call.sandbox->id, name);
  if (!box_storage_delete (self->storage, TASK_KIND, call.sandbox->id, id, 0, error))
    return FALSE;
  task_call_close (self, &call, 0);
  return TRUE;
}

gboolean
box_engine_tasks_live (BoxEngine *self, BoxEngineRuntime *rt, gint64 now)
{
  g_autoptr(GPtrArray) live = NULL;
  g_autoptr(GError) error = NULL;

  if (rt->tasks_known && (rt->tasks_until == 0 || rt->tasks_until > now))
    return rt->tasks_until > now;
  /* the first time, or the latest expiry passed: read them (the expired
   * records are deleted on the way) */
  live = load_live (self, rt->base.id, &error);
  if (live == NULL) {
    g_warning ("sandbox %s: cannot read its tasks: %s", rt->base.id, error->message);
    return FALSE;
  }
  return rt->tasks_until > now;
}

void
box_engine_end_tasks (BoxEngine *self, const char *sandbox_id, const char *why)
{
  g_autoptr(BoxStorageRecord) scope = box_storage_record_new (TASK_KIND, sandbox_id, NULL, NULL);
  BoxStorageOp op = { BOX_STORAGE_OP_DELETE_SCOPE, scope };
  g_autoptr(GError) error = NULL;
  BoxEngineRuntime *rt = box_engine_runtime_get (self, sandbox_id);

  if (!box_storage_write (self->storage, &op, 1, &error)) {
    g_warning ("sandbox %s: cannot end its tasks (%s): %s", sandbox_id, why, error->message);
    rt->tasks_known = FALSE;   /* read again */
    return;
  }
  if (rt->tasks_until != 0)
    g_debug ("sandbox %s: tasks ended (%s)", sandbox_id, why);
  rt->tasks_until = 0;
  rt->tasks_known = TRUE;
}
