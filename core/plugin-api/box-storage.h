/* box-storage.h: where records live, as collections of generic records.
 *
 * A store keeps BoxStorageRecords.  A record is a JSON body the store does
 * not read, filed under:
 *
 *   kind      the collection ("sandbox", "project", "key", ...); a store
 *             never knows the kinds, so a new kind needs no change here
 *   scope     what it belongs to (a project name, a sandbox ID), "" for none
 *   id        unique among the records of its kind
 *   name      NULL, or unique among the records of one kind and scope
 *   lookup    NULL, or unique among the records of its kind (a key's hash)
 *
 * Every write gives the records it writes a new revision, from one counter
 * of the whole store that only grows; create_revision is the revision of
 * the insert and gives the insertion order.
 *
 * Writes are batches of BoxStorageOps applied in one transaction, all or
 * nothing: an INSERT that collides with an id, name or lookup fails with
 * BOX_ERROR_ALREADY_EXISTS; an UPDATE, DELETE or CHECK of an absent record
 * with BOX_ERROR_NOT_FOUND; one whose record->revision is not 0 and is not
 * the stored revision with BOX_ERROR_CONFLICT (compare-and-swap: the writer
 * names the revision it read).  DELETE_SCOPE deletes every record of the
 * scope (of one kind, or of every kind when record->kind is NULL).  On
 * success the store sets revision (and, for an INSERT, create_revision) in
 * the records of the INSERT and UPDATE ops.  Once a write has returned TRUE
 * it survives a kill -9 of boxd.
 *
 * Reads: get by id, name or lookup (NOT_FOUND when absent; a NULL scope
 * means any scope; with BY_NAME and a NULL scope the first of the list
 * order); list by scope (NULL = every scope) and optionally by name or
 * lookup, ordered by created_at, then id (BOX_STORAGE_ORDER_CREATED) or
 * then insertion (BOX_STORAGE_ORDER_INSERTED).  Lists return a GPtrArray
 * that owns its records.
 *
 * Threads: the sync calls are made on the main thread by the engine and
 * may be made from any thread by a plugin; an implementation must be quick
 * for the embedded case.  The async calls report in the thread-default
 * main context of the caller; the default implementations run the sync
 * call in-line and report from an idle callback, so a network store
 * overrides them.  Ops and their records stay alive and untouched until
 * the callback has run.
 *
 * The typed records of the engine (BoxSandbox, ...) map to records in
 * box-storage-records.h, which is core code, not part of this interface.
 */
#pragma once

#include "box-export.h"

#include "box-plugin.h"

G_BEGIN_DECLS

/**
 * BoxStorageRecord:
 * @kind: the collection ("sandbox", "project", "key", ...)
 * @scope: what it belongs to (a project name, a sandbox ID); "" for none
 * @id: unique among the records of its kind
 * @name: (nullable): unique among the records of one kind and scope
 * @lookup: (nullable): unique among the records of its kind (a key's hash)
 * @body: the JSON text, which the store does not read
 * @created_at: set by the writer; orders lists
 * @revision: set by the store; 0 in an UPDATE means any
 * @create_revision: set by the store: the revision of the insert
 *
 * One stored record.  Owns its strings; a boxed type.
 */
typedef struct {
  char    *kind;
  char    *scope;            /* "" for none */
  char    *id;
  char    *name;             /* NULL for none */
  char    *lookup;           /* NULL for none */
  char    *body;             /* JSON text */
  gint64   created_at;       /* set by the writer; orders lists */
  guint64  revision;         /* set by the store; 0 in an UPDATE = any */
  guint64  create_revision;  /* set by the store */
} BoxStorageRecord;

/**
 * BoxStorageOpType:
 * @BOX_STORAGE_OP_INSERT: a new record
 * @BOX_STORAGE_OP_UPDATE: by kind and id; scope, name, lookup, body replaced
 * @BOX_STORAGE_OP_DELETE: by kind and id (and scope when not %NULL)
 * @BOX_STORAGE_OP_DELETE_SCOPE: by scope (and kind when not %NULL); none is
 *   fine
 * @BOX_STORAGE_OP_CHECK: the record exists (at that revision when not 0)
 *
 * What one op of a box_storage_write() batch does.
 */
typedef enum {
  BOX_STORAGE_OP_INSERT,
  BOX_STORAGE_OP_UPDATE,       /* by kind and id; scope, name, lookup, body replaced */
  BOX_STORAGE_OP_DELETE,       /* by kind and id (and scope when not NULL) */
  BOX_STORAGE_OP_DELETE_SCOPE, /* by scope (and kind when not NULL); none is fine */
  BOX_STORAGE_OP_CHECK,        /* the record exists (at that revision when not 0) */
} BoxStorageOpType;

/**
 * BoxStorageOp:
 * @type: what it does
 * @record: the record it works on; not owned
 *
 * One op of a write batch.  A boxed type whose copy is shallow (@record is
 * borrowed).
 */
typedef struct {
  BoxStorageOpType  type;
  BoxStorageRecord *record;    /* not owned */
} BoxStorageOp;

/**
 * BoxStorageIndex:
 * @BOX_STORAGE_BY_ID: by id
 * @BOX_STORAGE_BY_NAME: by name (within a scope)
 * @BOX_STORAGE_BY_LOOKUP: by lookup key
 * @BOX_STORAGE_BY_SCOPE: list only: no key, every record of the scope
 *
 * Which key a get or a list uses.
 */
typedef enum {
  BOX_STORAGE_BY_ID,
  BOX_STORAGE_BY_NAME,
  BOX_STORAGE_BY_LOOKUP,
  BOX_STORAGE_BY_SCOPE,        /* list only: no key, every record of the scope */
} BoxStorageIndex;

/**
 * BoxStorageOrder:
 * @BOX_STORAGE_ORDER_CREATED: created_at, then id
 * @BOX_STORAGE_ORDER_INSERTED: created_at, then create_revision
 *
 * The order of a list.
 */
typedef enum {
  BOX_STORAGE_ORDER_CREATED,   /* created_at, then id */
  BOX_STORAGE_ORDER_INSERTED,  /* created_at, then create_revision */
} BoxStorageOrder;

#define BOX_TYPE_STORAGE_RECORD (box_storage_record_get_type ())
#define BOX_TYPE_STORAGE_OP     (box_storage_op_get_type ())

BOX_PLUGIN_API
GType box_storage_record_get_type (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType box_storage_op_get_type     (void) G_GNUC_CONST;
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxStorageOp, g_free)

/**
 * BoxStorageInterface:
 * @g_iface: the parent interface
 * @write: applies a batch of ops in one transaction, all or nothing
 * @get: one record by id, name or lookup, or %NULL with %BOX_ERROR_NOT_FOUND
 * @list: the records of a scope, optionally by name or lookup, in order
 * @write_async: @write for a network store; the default runs @write in-line
 *   and reports from an idle callback
 * @write_finish: completes @write_async
 * @get_async: @get for a network store; default as for @write_async
 * @get_finish: completes @get_async
 * @list_async: @list for a network store; default as for @write_async
 * @list_finish: completes @list_async
 *
 * The virtual methods of a store: generic record collections with
 * revisions and compare-and-swap updates (see #BoxStorage).
 */

/**
 * BoxStorage:
 *
 * Where records live, as collections of #BoxStorageRecord: a JSON body the
 * store does not read, filed under a kind, a scope, an id, and optionally
 * a name and a lookup key.  Every write gives its records a new revision
 * from one counter of the whole store; an UPDATE, DELETE or CHECK whose
 * record names a revision other than the stored one fails with
 * %BOX_ERROR_CONFLICT (compare-and-swap).  A write that returned %TRUE
 * survives a kill -9 of boxd.  The sync calls are made on the main thread
 * by the engine and from any thread by a plugin; the async calls report in
 * the caller's thread-default main context.
 */
#define BOX_TYPE_STORAGE (box_storage_get_type ())
BOX_PLUGIN_API
G_DECLARE_INTERFACE (BoxStorage, box_storage, BOX, STORAGE, GObject)

struct _BoxStorageInterface {
  GTypeInterface g_iface;

  gboolean          (*write)        (BoxStorage *self, BoxStorageOp *ops, guint n_ops,
                                     GError **error);
  BoxStorageRecord *(*get)          (BoxStorage *self, const char *kind, const char *scope,
                                     BoxStorageIndex index, const char *key, GError **error);
  GPtrArray        *(*list)         (BoxStorage *self, const char *kind, const char *scope,
                                     BoxStorageIndex index, const char *key,
                                     BoxStorageOrder order, GError **error);

  void              (*write_async)  (BoxStorage *self, BoxStorageOp *ops, guint n_ops,
                                     GCancellable *cancellable, GAsyncReadyCallback callback,
                                     gpointer user_data);
  gboolean          (*write_finish) (BoxStorage *self, GAsyncResult *result, GError **error);
  void              (*get_async)    (BoxStorage *self, const char *kind, const char *scope,
                                     BoxStorageIndex index, const char *key,
                                     GCancellable *cancellable, GAsyncReadyCallback callback,
                                     gpointer user_data);
  BoxStorageRecord *(*get_finish)   (BoxStorage *self, GAsyncResult *result, GError **error);
  void              (*list_async)   (BoxStorage *self, const char *kind, const char *scope,
                                     BoxStorageIndex index, const char *key,
                                     BoxStorageOrder order, GCancellable *cancellable,
                                     GAsyncReadyCallback callback, gpointer user_data);
  GPtrArray        *(*list_finish)  (BoxStorage *self, GAsyncResult *result, GError **error);

  /*< private >*/
  gpointer padding[16];
};

/**
 * box_storage_record_new:
 * @kind: the collection
 * @scope: (nullable): what it belongs to; %NULL for "" (none)
 * @id: its id
 * @body: the JSON text
 *
 * Returns: (transfer full): a record created now, not stored yet
 */
BOX_PLUGIN_API
BoxStorageRecord *box_storage_record_new   (const char *kind, const char *scope, const char *id,
                                            const char *body);
/**
 * box_storage_record_copy:
 * @record: a record
 *
 * Returns: (transfer full): a deep copy
 */
BOX_PLUGIN_API
BoxStorageRecord *box_storage_record_copy  (const BoxStorageRecord *record);
BOX_PLUGIN_API
void              box_storage_record_free  (BoxStorageRecord *record);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxStorageRecord, box_storage_record_free)

/**
 * box_storage_write:
 * @self: the store
 * @ops: (array length=n_ops): the batch
 * @n_ops: the number of @ops
 * @error: why nothing was written
 *
 * Applies @ops in one transaction, all or nothing; sets the revisions of
 * the INSERT and UPDATE records on success.
 *
 * Returns: %TRUE when every op applied
 */
BOX_PLUGIN_API
gboolean          box_storage_write        (BoxStorage *self, BoxStorageOp *ops, guint n_ops,
                                            GError **error);
/**
 * box_storage_get:
 * @self: the store
 * @kind: the collection
 * @scope: (nullable): the scope; %NULL for any
 * @index: which key @key is
 * @key: the id, name or lookup
 * @error: %BOX_ERROR_NOT_FOUND when absent
 *
 * Returns: (transfer full) (nullable): the record
 */
BOX_PLUGIN_API
BoxStorageRecord *box_storage_get          (BoxStorage *self, const char *kind, const char *scope,
                                            BoxStorageIndex index, const char *key,
                                            GError **error);
/**
 * box_storage_list:
 * @self: the store
 * @kind: the collection
 * @scope: (nullable): the scope; %NULL for every scope
 * @index: %BOX_STORAGE_BY_SCOPE, or the key @key is
 * @key: (nullable): the name or lookup; %NULL with %BOX_STORAGE_BY_SCOPE
 * @order: the order
 * @error: why it failed
 *
 * Returns: (transfer container) (element-type BoxStorageRecord) (nullable):
 *   the records, which the array owns
 */
BOX_PLUGIN_API
GPtrArray        *box_storage_list         (BoxStorage *self, const char *kind, const char *scope,
                                            BoxStorageIndex index, const char *key,
                                            BoxStorageOrder order, GError **error);
/**
 * box_storage_write_async:
 * @self: the store
 * @ops: (array length=n_ops): the batch; alive and untouched until the
 *   callback has run
 * @n_ops: the number of @ops
 * @cancellable: (nullable): a cancellable
 * @callback: (scope async): called in the caller's thread-default context
 * @user_data: (closure): data for @callback
 *
 * box_storage_write() for a network store.
 */
BOX_PLUGIN_API
void              box_storage_write_async  (BoxStorage *self, BoxStorageOp *ops, guint n_ops,
                                            GCancellable *cancellable,
                                            GAsyncReadyCallback callback, gpointer user_data);
BOX_PLUGIN_API
gboolean          box_storage_write_finish (BoxStorage *self, GAsyncResult *result,
                                            GError **error);
/**
 * box_storage_get_async:
 * @self: the store
 * @kind: the collection
 * @scope: (nullable): the scope; %NULL for any
 * @index: which key @key is
 * @key: the id, name or lookup
 * @cancellable: (nullable): a cancellable
 * @callback: (scope async): called in the caller's thread-default context
 * @user_data: (closure): data for @callback
 *
 * box_storage_get() for a network store.
 */
BOX_PLUGIN_API
void              box_storage_get_async    (BoxStorage *self, const char *kind, const char *scope,
                                            BoxStorageIndex index, const char *key,
                                            GCancellable *cancellable,
                                            GAsyncReadyCallback callback, gpointer user_data);
/**
 * box_storage_get_finish:
 * @self: the store
 * @result: the result
 * @error: %BOX_ERROR_NOT_FOUND when absent
 *
 * Returns: (transfer full) (nullable): the record
 */
BOX_PLUGIN_API
BoxStorageRecord *box_storage_get_finish   (BoxStorage *self, GAsyncResult *result,
                                            GError **error);
/**
 * box_storage_list_async:
 * @self: the store
 * @kind: the collection
 * @scope: (nullable): the scope; %NULL for every scope
 * @index: %BOX_STORAGE_BY_SCOPE, or the key @key is
 * @key: (nullable): the name or lookup
 * @order: the order
 * @cancellable: (nullable): a cancellable
 * @callback: (scope async): called in the caller's thread-default context
 * @user_data: (closure): data for @callback
 *
 * box_storage_list() for a network store.
 */
BOX_PLUGIN_API
void              box_storage_list_async   (BoxStorage *self, const char *kind, const char *scope,
                                            BoxStorageIndex index, const char *key,
                                            BoxStorageOrder order, GCancellable *cancellable,
                                            GAsyncReadyCallback callback, gpointer user_data);
/**
 * box_storage_list_finish:
 * @self: the store
 * @result: the result
 * @error: why it failed
 *
 * Returns: (transfer container) (element-type BoxStorageRecord) (nullable):
 *   the records, which the array owns
 */
BOX_PLUGIN_API
GPtrArray        *box_storage_list_finish  (BoxStorage *self, GAsyncResult *result,
                                            GError **error);

/* One-op conveniences over box_storage_write() */
BOX_PLUGIN_API
gboolean          box_storage_insert       (BoxStorage *self, BoxStorageRecord *record,
                                            GError **error);
BOX_PLUGIN_API
gboolean          box_storage_update       (BoxStorage *self, BoxStorageRecord *record,
                                            GError **error);
BOX_PLUGIN_API
gboolean          box_storage_delete       (BoxStorage *self, const char *kind, const char *scope,
                                            const char *id, guint64 revision, GError **error);

G_END_DECLS
