/* box-engine-ops-private.h: the sandbox operations' shared parts.
 *
 * An operation (create, pause/stop/wake, update, delete) is a GTask whose
 * task data is a BoxEngineOp; it runs under the sandbox's lock
 * (box-engine-sandboxes.c) and ends with box_engine_op_finish_ok() or
 * box_engine_op_finish_error().  The files that share this header:
 * box-engine-sandboxes.c (runtime, locks, the common flow, pause/stop/wake,
 * delete), box-engine-create.c, box-engine-update.c, box-engine-ticks.c
 * (deadlines, idle, lost VMs, reconciliation, project deletion) and
 * box-engine-quota.c.
 */
#pragma once

#include "box-engine-private.h"

G_BEGIN_DECLS

typedef struct {
  BoxSandboxRuntime base;
  char             *project;
  BoxSandboxState   state;
  gboolean          has_deadline;
  gint64            deadline_at;
  BoxDeadlineAction deadline_action;
  guint             idle_timeout_s;
  BoxIdleAction     idle_action;
  /* box-engine-tasks.c: the latest expiry of its live tasks (0: none),
   * once read from the store */
  gint64            tasks_until;
  gboolean          tasks_known;
  /* box-engine-broker.c: the broker holds its secrets (pushed, not dropped) */
  gboolean          broker_holds;
} BoxEngineRuntime;

typedef enum {
  BOX_ENGINE_OP_CREATE,
  BOX_ENGINE_OP_STATE,
  BOX_ENGINE_OP_UPDATE,
  BOX_ENGINE_OP_DELETE,
} BoxEngineOpKind;

typedef struct {
  BoxEngineOpKind   kind;
  char             *project;     /* NULL: any (internal operations) */
  char             *id;          /* the sandbox ID once known */
  BoxSandbox       *sandbox;     /* the record, fresh under the lock */
  BoxStateRequest   request;
  const char       *reason;      /* event reason: "request", "idle", "deadline" */
  gboolean          force;       /* delete even when protected */
  BoxSandboxUpdate *update;
  BoxSandboxState   from;        /* the state before a transition */
  GPtrArray        *egress;     /* expanded rules for the VM request */
  GHashTable       *guest_env;  /* the VM request's env (box_engine_guest_env()) */
  gboolean          trust_ca;   /* box_engine_push_egress() ran: the broker CA goes
                                 * to the guest before the op ends (a running sandbox) */
  /* an operation of another file (checkpoints): runs under the lock in
   * place of the kinds above, with its own data */
  void            (*run)         (BoxEngine *self, GTask *task);
  gpointer          extra;
  GDestroyNotify    extra_free;
} BoxEngineOp;

void              box_engine_op_free            (BoxEngineOp *op);
/* The runtime of sandbox @id, made when missing. */
BoxEngineRuntime *box_engine_runtime_get        (BoxEngine *self, const char *id);
/* Keeps the tick's view in step with the record just written. */
void              box_engine_runtime_sync       (BoxEngine *self, const BoxSandbox *sandbox);
/* An event with one string detail @key = @value (none when @key is NULL). */
void              box_engine_emit_detail        (BoxEngine *self, const char *type,
                                                 const BoxSandbox *sandbox, const char *key,
                                                 const char *value);
/* @op keeps the expanded rules alive while @request is in use. */
void              box_engine_fill_vm_request    (BoxEngine *self, BoxVmRequest *request,
                                                 BoxEngineOp *op);
gboolean          box_engine_save_sandbox       (BoxEngine *self, BoxSandbox *sandbox,
                                                 GError **error);
gboolean          box_engine_check_deadline     (BoxEngine *self, const BoxSandbox *sandbox,
                                                 GError **error);
gboolean          box_engine_check_secrets_env  (const BoxSandbox *sandbox, GError **error);
gboolean          box_engine_check_rules        (BoxEngine *self, GPtrArray *egress,
                                                 GError **error);
/* Hands the network plugin the sandbox's rules (op->egress, expanded
 * here when NULL) before the hypervisor runs its code. */
gboolean          box_engine_push_egress        (BoxEngine *self, BoxEngineOp *op,
                                                 GError **error);
/* box-engine-broker.c: hands the broker @sandbox's secrets (values
 * unsealed) and marks it brokered in the network; nothing when there is
 * no broker or it uses none. */
gboolean          box_engine_push_secrets       (BoxEngine *self, const BoxSandbox *sandbox,
                                                 GError **error);
gboolean          box_engine_push_secrets_full  (BoxEngine *self, const BoxSandbox *sandbox,
                                                 gboolean *broker_took, GError **error);
gboolean          box_engine_broker_needs       (BoxEngine *self, const BoxSandbox *sandbox);
/* Takes them back (an empty set, not brokered); failures are logged. */
void              box_engine_drop_secrets       (BoxEngine *self, const char *sandbox_id);
/* At start: the network gets the broker, the hypervisor its CA, every
 * awake sandbox its secrets. */
void              box_engine_broker_reconcile   (BoxEngine *self);
/* box-engine-broker.c: sends the broker's CA to the guest of @sandbox_id
 * (trust-ca); @done (may be NULL) runs once the guest answered or not, or
 * BOX_ENGINE_CA_WAIT_MS of real time passed (the call cancelled), a
 * failure logged.  FALSE, @done not called: nothing to send (no broker, no
 * guest agent). */
#define BOX_ENGINE_CA_WAIT_MS 5000
typedef void    (*BoxEngineCaDone)              (BoxEngine *self, gpointer data);
gboolean          box_engine_send_ca            (BoxEngine *self, const char *sandbox_id,
                                                 BoxEngineCaDone done, gpointer data);
/* What the guest runs everything with: @sandbox's env and, for each secret
 * it uses, NAME=<its placeholder>; with a broker, the variables that point
 * TLS clients at the bundle that trusts its CA.  A new table. */
GHashTable       *box_engine_guest_env          (BoxEngine *self, const BoxSandbox *sandbox);
/* The rules a network plugin enforces: includes expanded. */
GPtrArray        *box_engine_expand_rules       (BoxEngine *self, GPtrArray *egress);
/* What the network enforces for @sandbox: its rules expanded and, when it
 * is restricted, its secrets' hosts on 443. */
GPtrArray        *box_engine_sandbox_rules      (BoxEngine *self, const BoxSandbox *sandbox);
/* The same with @replacing (not NULL) standing for the stored secret of
 * its name: what a secret PUT would make of the sandbox's rules. */
GPtrArray        *box_engine_sandbox_rules_replacing (BoxEngine *self, const BoxSandbox *sandbox,
                                                      const BoxSecret *replacing);
/* 400 when box_engine_sandbox_rules() would be over the 1000. */
gboolean          box_engine_check_rule_count   (BoxEngine *self, const BoxSandbox *sandbox,
                                                 GError **error);
gboolean          box_engine_check_rule_count_replacing (BoxEngine *self,
                                                         const BoxSandbox *sandbox,
                                                         const BoxSecret *replacing,
                                                         GError **error);
/* Replaces @into's entries by copies of @from's (none when NULL). */
void              box_engine_copy_map           (GHashTable *into, GHashTable *from);

GTask            *box_engine_op_task_new        (BoxEngine *self, BoxEngineOpKind kind,
                                                 const char *project, gpointer source_tag,
                                                 GCancellable *cancellable,
                                                 GAsyncReadyCallback callback,
                                                 gpointer user_data);
/* Resolves @id_or_name in the op's project, then runs @task's op under the lock. */
void              box_engine_op_start           (BoxEngine *self, GTask *task,
                                                 const char *id_or_name);
void              box_engine_op_finish_ok       (BoxEngine *self, GTask *task);
void              box_engine_op_finish_error    (BoxEngine *self, GTask *task, GError *error);
/* The end of a wake's BOOT or RESUME of @op->sandbox (from @op->from): the
 * record becomes running and saved, sandbox.running is emitted.  A failure
 * is 503 sandbox_unavailable (a capacity error stays itself). */
gboolean          box_engine_woken_finish       (BoxEngine *self, BoxEngineOp *op,
                                                 GAsyncResult *result, GError **error);

/* box-engine-checkpoints.c: the kind of the records that name a
 * checkpoint being made or deleted (scope the sandbox, ID
 * "<sandbox>/<checkpoint>"), gone once it is finished. */
#define BOX_ENGINE_CHECKPOINT_PENDING_KIND "checkpoint-pending"
void              box_engine_checkpoint_pending_clear (BoxEngine *self, const char *sandbox_id,
                                                       const char *checkpoint);
/* The end of a DELETE_CHECKPOINT of @checkpoint (@result): its pending
 * record goes with its files (TRUE), or stays for the next start. */
gboolean          box_engine_checkpoint_files_deleted (BoxEngine *self, const char *sandbox_id,
                                                       const char *checkpoint,
                                                       GAsyncResult *result);
/* Marks @checkpoint pending, deletes its record and emits
 * checkpoint.deleted; the files are the caller's to delete. */
gboolean          box_engine_checkpoint_delete_record (BoxEngine *self, const BoxSandbox *sandbox,
                                                       const char *checkpoint, GError **error);
/* box-engine-checkpoints-reconcile.c: at start, checkpoints left half-made
 * by a crash (pending, never written) are deleted from the hypervisor, then
 * records and files are compared both ways. */
void              box_engine_reconcile_checkpoints (BoxEngine *self);

/* box-engine-tasks.c: whether a live task holds @rt's sandbox awake at
 * @now (the idle rule asks); ends every task of @sandbox_id (a stop, a
 * restore; @why is logged). */
gboolean          box_engine_tasks_live         (BoxEngine *self, BoxEngineRuntime *rt,
                                                 gint64 now);
void              box_engine_end_tasks          (BoxEngine *self, const char *sandbox_id,
                                                 const char *why);

/* box-engine-update.c: the update op, under the lock */
void              box_engine_run_update         (BoxEngine *self, GTask *task);

/* box-engine-quota.c: refuses (409 conflict, quota exceeded) a new sandbox
 * of @wanted resources that would take @project past its quota. */
gboolean          box_engine_check_quota        (BoxEngine *self, const char *project,
                                                 const BoxResources *wanted, GError **error);
/* What a checkpoint of a sandbox of @resources counts on the disk quota:
 * its disk, plus its memory for a memory checkpoint. */
guint64           box_engine_checkpoint_disk_mib (const BoxResources *resources, gboolean memory);
/* The same for a new checkpoint of @disk_mib (box_engine_checkpoint_disk_mib()),
 * once @freed_mib went (a restore's auto-N prunes the oldest). */
gboolean          box_engine_check_checkpoint_quota (BoxEngine *self, const char *project,
                                                     guint64 disk_mib, guint64 freed_mib,
                                                     GError **error);

G_END_DECLS
