/* box-storage.c: the BoxStorage interface; see box-storage.h. */
#include "config.h"

#include "box-storage.h"

G_DEFINE_INTERFACE (BoxStorage, box_storage, G_TYPE_OBJECT)

/* An op borrows its record: the boxed copy is shallow. */
static BoxStorageOp *
box_storage_op_copy (const BoxStorageOp *op)
{
  return g_memdup2 (op, sizeof *op);
}

G_DEFINE_BOXED_TYPE (BoxStorageOp, box_storage_op, box_storage_op_copy, g_free)

/* ---- default async variants: the sync call, in-line ------------------- */

typedef struct {
  char            *kind;
  char            *scope;
  BoxStorageIndex  index;
  char            *key;
  BoxStorageOrder  order;
} ReadArgs;

static void
read_args_free (ReadArgs *args)
{
  g_free (args->kind);
  g_free (args->scope);
  g_free (args->key);
  g_free (args);
}

static void
default_write_async (BoxStorage *self, BoxStorageOp *ops, guint n_ops,
                     GCancellable *cancellable, GAsyncReadyCallback callback,
                     gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  GError *error = NULL;

  g_task_set_source_tag (task, default_write_async);
  if (g_task_return_error_if_cancelled (task))
    return;
  if (box_storage_write (self, ops, n_ops, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

static gboolean
default_write_finish (BoxStorage *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

static GTask *
read_task_new (BoxStorage *self, gpointer tag, const char *kind, const char *scope,
               BoxStorageIndex index, const char *key, BoxStorageOrder order,
               GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  ReadArgs *args = g_new0 (ReadArgs, 1);

  g_task_set_source_tag (task, tag);
  args->kind = g_strdup (kind);
  args->scope = g_strdup (scope);
  args->index = index;
  args->key = g_strdup (key);
  args->order = order;
  g_task_set_task_data (task, args, (GDestroyNotify) read_args_free);
  return task;
}

static void
default_get_async (BoxStorage *self, const char *kind, const char *scope,
                   BoxStorageIndex index, const char *key, GCancellable *cancellable,
                   GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = read_task_new (self, default_get_async, kind, scope, index, key, 0,
                                         cancellable, callback, user_data);
  GError *error = NULL;
  BoxStorageRecord *record;

  if (g_task_return_error_if_cancelled (task))
    return;
  record = box_storage_get (self, kind, scope, index, key, &error);
  if (record != NULL)
    g_task_return_pointer (task, record, (GDestroyNotify) box_storage_record_free);
  else
    g_task_return_error (task, error);
}

static BoxStorageRecord *
default_get_finish (BoxStorage *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

static void
default_list_async (BoxStorage *self, const char *kind, const char *scope,
                    BoxStorageIndex index, const char *key, BoxStorageOrder order,
                    GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = read_task_new (self, default_list_async, kind, scope, index, key,
                                         order, cancellable, callback, user_data);
  GError *error = NULL;
  GPtrArray *records;

  if (g_task_return_error_if_cancelled (task))
    return;
  records = box_storage_list (self, kind, scope, index, key, order, &error);
  if (records != NULL)
    g_task_return_pointer (task, records, (GDestroyNotify) g_ptr_array_unref);
  else
    g_task_return_error (task, error);
}

static GPtrArray *
default_list_finish (BoxStorage *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

static void
box_storage_default_init (BoxStorageInterface *iface)
{
  iface->write_async = default_write_async;
  iface->write_finish = default_write_finish;
  iface->get_async = default_get_async;
  iface->get_finish = default_get_finish;
  iface->list_async = default_list_async;
  iface->list_finish = default_list_finish;
}

/* ---- records ----------------------------------------------------------- */

BoxStorageRecord *
box_storage_record_new (const char *kind, const char *scope, const char *id, const char *body)
{
  BoxStorageRecord *record = g_new0 (BoxStorageRecord, 1);

  record->kind = g_strdup (kind);
  record->scope = g_strdup (scope != NULL ? scope : "");
  record->id = g_strdup (id);
  record->body = g_strdup (body != NULL ? body : "{}");
  return record;
}

BoxStorageRecord *
box_storage_record_copy (const BoxStorageRecord *record)
{
  BoxStorageRecord *copy;

  g_return_val_if_fail (record != NULL, NULL);
  copy = g_new0 (BoxStorageRecord, 1);
  *copy = *record;
  copy->kind = g_strdup (record->kind);
  copy->scope = g_strdup (record->scope);
  copy->id = g_strdup (record->id);
  copy->name = g_strdup (record->name);
  copy->lookup = g_strdup (record->lookup);
  copy->body = g_strdup (record->body);
  return copy;
}

void
box_storage_record_free (BoxStorageRecord *record)
{
  if (record == NULL)
    return;
  g_free (record->kind);
  g_free (record->scope);
  g_free (record->id);
  g_free (record->name);
  g_free (record->lookup);
  g_free (record->body);
  g_free (record);
}

G_DEFINE_BOXED_TYPE (BoxStorageRecord, box_storage_record, box_storage_record_copy,
                     box_storage_record_free)

/* ---- dispatch ---------------------------------------------------------- */

static gboolean
check_implemented (BoxStorage *self, gconstpointer vfunc, const char *name, GError **error)
{
  if (vfunc != NULL)
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
               "%s does not implement %s", G_OBJECT_TYPE_NAME (self), name);
  return FALSE;
}

gboolean
box_storage_write (BoxStorage *self, BoxStorageOp *ops, guint n_ops, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  g_return_val_if_fail (ops != NULL || n_ops == 0, FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (!check_implemented (self, iface->write, "write", error))
    return FALSE;
  return iface->write (self, ops, n_ops, error);
}

BoxStorageRecord *
box_storage_get (BoxStorage *self, const char *kind, const char *scope, BoxStorageIndex index,
                 const char *key, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  g_return_val_if_fail (kind != NULL && key != NULL, NULL);
  g_return_val_if_fail (index != BOX_STORAGE_BY_SCOPE, NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (!check_implemented (self, iface->get, "get", error))
    return NULL;
  return iface->get (self, kind, scope, index, key, error);
}

GPtrArray *
box_storage_list (BoxStorage *self, const char *kind, const char *scope, BoxStorageIndex index,
                  const char *key, BoxStorageOrder order, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  g_return_val_if_fail (kind != NULL, NULL);
  g_return_val_if_fail ((index == BOX_STORAGE_BY_SCOPE) == (key == NULL), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (!check_implemented (self, iface->list, "list", error))
    return NULL;
  return iface->list (self, kind, scope, index, key, order, error);
}

void
box_storage_write_async (BoxStorage *self, BoxStorageOp *ops, guint n_ops,
                         GCancellable *cancellable, GAsyncReadyCallback callback,
                         gpointer user_data)
{
  g_return_if_fail (BOX_IS_STORAGE (self));
  BOX_STORAGE_GET_IFACE (self)->write_async (self, ops, n_ops, cancellable, callback, user_data);
}

gboolean
box_storage_write_finish (BoxStorage *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  return BOX_STORAGE_GET_IFACE (self)->write_finish (self, result, error);
}

void
box_storage_get_async (BoxStorage *self, const char *kind, const char *scope,
                       BoxStorageIndex index, const char *key, GCancellable *cancellable,
                       GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (BOX_IS_STORAGE (self));
  BOX_STORAGE_GET_IFACE (self)->get_async (self, kind, scope, index, key, cancellable,
                                           callback, user_data);
}

BoxStorageRecord *
box_storage_get_finish (BoxStorage *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  return BOX_STORAGE_GET_IFACE (self)->get_finish (self, result, error);
}

void
box_storage_list_async (BoxStorage *self, const char *kind, const char *scope,
                        BoxStorageIndex index, const char *key, BoxStorageOrder order,
                        GCancellable *cancellable, GAsyncReadyCallback callback,
                        gpointer user_data)
{
  g_return_if_fail (BOX_IS_STORAGE (self));
  BOX_STORAGE_GET_IFACE (self)->list_async (self, kind, scope, index, key, order, cancellable,
                                            callback, user_data);
}

GPtrArray *
box_storage_list_finish (BoxStorage *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  return BOX_STORAGE_GET_IFACE (self)->list_finish (self, result, error);
}

/* ---- one-op conveniences ----------------------------------------------- */

static gboolean
write_one (BoxStorage *self, BoxStorageOpType type, BoxStorageRecord *record, GError **error)
{
  BoxStorageOp op = { type, record };

  return box_storage_write (self, &op, 1, error);
}

gboolean
box_storage_insert (BoxStorage *self, BoxStorageRecord *record, GError **error)
{
  return write_one (self, BOX_STORAGE_OP_INSERT, record, error);
}

gboolean
box_storage_update (BoxStorage *self, BoxStorageRecord *record, GError **error)
{
  return write_one (self, BOX_STORAGE_OP_UPDATE, record, error);
}

gboolean
box_storage_delete (BoxStorage *self, const char *kind, const char *scope, const char *id,
                    guint64 revision, GError **error)
{
  BoxStorageRecord record = { (char *) kind, (char *) scope, (char *) id, NULL, NULL, NULL,
                              0, revision, 0 };

  return write_one (self, BOX_STORAGE_OP_DELETE, &record, error);
}
