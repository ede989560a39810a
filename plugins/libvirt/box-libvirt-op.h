/* box-libvirt-op.h: an operation on a VM, shared by box-libvirt-ops.c
 * (dispatch, pause, resume, stop, boot, destroy), box-libvirt-create.c and
 * box-libvirt-adopt.c.  Internal to the plugin. */
#pragma once

#include "box-libvirt-private.h"

G_BEGIN_DECLS

/* the guest's answers after a resume or restore */
#define BOX_LIBVIRT_AGENT_TIMEOUT_S 30

typedef enum {
  BOX_LIBVIRT_JOB_ENGINE,        /* an operation of the engine */
  BOX_LIBVIRT_JOB_COLD,          /* a hot pause turns cold */
  BOX_LIBVIRT_JOB_LOST,          /* the domain stopped on its own */
  BOX_LIBVIRT_JOB_STANDBY,       /* a cold VM's domain started for its wake */
  BOX_LIBVIRT_JOB_FAULT_IN,      /* a restored VM readied for a save (box-libvirt-fault-in.c) */
} BoxLibvirtJobKind;

typedef struct {
  BoxLibvirtPlugin *self;        /* a reference */
  BoxLibvirtJobKind kind;
  BoxVmOp           op;
  char             *id;
  char             *hostname;
  BoxResources      resources;
  GHashTable       *env;
  BoxLibvirtVm     *vm;          /* borrowed: in self->vms, or new (create) */
  BoxLibvirtSlot   *slot;
  BoxNetAttachment *net;
  char             *domain;
  char             *xml;
  gboolean          resize;
  gboolean          graceful;    /* the guest was asked to power off */
  gboolean          set_owner;   /* resume_work makes the domain the sandbox's */
  gboolean          locked;
  gboolean          heavy;       /* counted in self->heavy_ops until it returns */
  gboolean          counted;     /* counted in self->engine_ops until it returns */
  gint64            started;
  /* checkpoints (box-libvirt-checkpoint.c) and forks (box-libvirt-fork.c) */
  char             *checkpoint_id;     /* CHECKPOINT, RESTORE, DELETE_CHECKPOINT */
  gboolean          memory;            /* CHECKPOINT: with memory; RESTORE, fork: it has */
  gboolean          ram;               /* RESTORE, fork: it is materialised */
  char             *from_sandbox_id;   /* CREATE as a fork */
  char             *from_checkpoint_id;
  gboolean          ended;             /* CHECKPOINT, RESTORE: this operation ended the QEMU */
  gboolean          standby;           /* a cold wake: the VM had a standby (taken from vm) */
  /* a fork made ready in advance (box-libvirt-ready.c): its VM's ID; the
   * fork stops once its state is loaded, paused (op->id: its pool ID) */
  char             *ready_vm_id;
} BoxLibvirtOp;

/* An operation (holding the plugin) of @kind on sandbox @id. */
BoxLibvirtOp *box_libvirt_op_new           (BoxLibvirtPlugin *self, BoxLibvirtJobKind kind,
                                            BoxVmOp vm_op, const char *id);

BoxLibvirtOp *box_libvirt_task_op          (GTask *task);
/* Ends @task (taking @error, or success) and releases the VM's lock. */
void          box_libvirt_op_return        (GTask *task, GError *error);
void          box_libvirt_op_fail          (GTask *task, BoxErrorCode code, const char *format,
                                            ...) G_GNUC_PRINTF (3, 4);
/* <vm_dir>/vms/<vm id>/@file of the operation's VM */
char         *box_libvirt_op_file          (BoxLibvirtOp *op, const char *file);
void          box_libvirt_detach_network   (BoxLibvirtPlugin *self, const char *id);
/* op->net: the VM's network attachment (none without a network or NIC). */
gboolean      box_libvirt_op_attach_network (BoxLibvirtOp *op, GError **error);
/* A job of @kind on @vm under its lock; @callback (or NULL) when it ended. */
void          box_libvirt_run_job          (BoxLibvirtPlugin *self, BoxLibvirtVm *vm,
                                            BoxLibvirtJobKind kind, GAsyncReadyCallback callback,
                                            gpointer user_data);
/* Worker threads: grow the disk when op->resize, resume; end the domain and
 * remove the VM's files. */
gboolean      box_libvirt_resume_work      (BoxLibvirtPlugin *self, gpointer data, GError **error);
gboolean      box_libvirt_destroy_work     (BoxLibvirtPlugin *self, gpointer data, GError **error);
/* Worker threads: whether the operation's domain no longer runs (FALSE,
 * BOX_ERROR_CONFLICT: it runs). */
gboolean      box_libvirt_domain_gone_work (BoxLibvirtPlugin *self, gpointer data, GError **error);
/* Worker threads: starts the VM's domain, a boot (@boot) or a restore of
 * its cold.dev + ram or cold.mig (then resumed); what is left of an
 * earlier QEMU goes first (box-libvirt-start.c). */
gboolean      box_libvirt_start_domain_work (BoxLibvirtPlugin *self, BoxLibvirtOp *op,
                                             gboolean boot, GError **error);
/* The domain XML of the operation's VM: a boot (@boot) or a restore.
 * (box-libvirt-start.c, with the start) */
char         *box_libvirt_vm_xml           (BoxLibvirtOp *op, gboolean boot);
/* Worker threads: the VM's cold.dev goes, and its `ram` link unless
 * @keep_ram (a QEMU maps it): a materialised checkpoint's state, used. */
void          box_libvirt_vm_drop_ram_state (BoxLibvirtOp *op, gboolean keep_ram);
/* The VM has no QEMU any more: agent, cold timer and network go. */
void          box_libvirt_vm_ended         (BoxLibvirtPlugin *self, BoxLibvirtVm *vm);
/* A create or fork that failed midway: the VM's domain and files go (a
 * worker), then @done runs, which gets @error back from
 * box_libvirt_op_undo_finish() (the network attachment gone too). */
void          box_libvirt_op_undo          (GTask *task, GError *error, GAsyncReadyCallback done);
GError       *box_libvirt_op_undo_finish   (GTask *task, GAsyncResult *result);
/* A new VM (create, fork) runs and its guest answered: recorded as
 * running (state file, self->vms, its agent), its pool record gone. */
gboolean      box_libvirt_op_keep_new_vm   (BoxLibvirtOp *op, BoxAgent *agent, GError **error);
/* Undoes a create or fork midway, then fails it with @error. */
typedef void (*BoxLibvirtOpFail) (GTask *task, GError *error);
/* The end of a create or fork once its domain was started or resumed
 * (@result, of box_libvirt_run_in_thread; NULL: it was, and succeeded): the guest is set up as @setup
 * says (its context filled in here), the VM kept and the task answered;
 * any failure goes to @fail.  @what (taken) describes the VM in the log. */
void          box_libvirt_op_guest_start   (GTask *task, GAsyncResult *result,
                                            BoxLibvirtGuestSetup *setup, char *what,
                                            BoxLibvirtOpFail fail);
/* After @seconds (hot_pause_s), a hot pause turns cold. */
void          box_libvirt_schedule_cold    (BoxLibvirtPlugin *self, BoxLibvirtVm *vm,
                                            guint seconds);
void          box_libvirt_op_free          (BoxLibvirtOp *op);
/* The steps of each operation, once the VM's lock is held
 * (box-libvirt-ops.c, box-libvirt-create.c). */
void          box_libvirt_create_start     (GTask *task);
void          box_libvirt_suspend_start    (GTask *task);
void          box_libvirt_cold_start       (GTask *task);
void          box_libvirt_resume_start     (GTask *task);
void          box_libvirt_boot_start       (GTask *task);
void          box_libvirt_shutdown_start   (GTask *task);
void          box_libvirt_destroy_start    (GTask *task);
void          box_libvirt_lost_start       (GTask *task);
void          box_libvirt_fault_in_start   (GTask *task);
void          box_libvirt_checkpoint_start (GTask *task);
void          box_libvirt_restore_start    (GTask *task);
/* no VM lock: the checkpoint may outlive its VM */
void          box_libvirt_delete_checkpoint_start (GTask *task);
/* CREATE from op->from_*: no VM lock (the VM is new) */
void          box_libvirt_fork_start       (GTask *task);

/* Worker threads: freezes the overlay of the operation's VM, whose QEMU
 * (@dom) runs, as its next layer and gives QEMU a new one on it, without
 * stopping the vCPUs (box-libvirt-snapshot.c); *@frozen: the frozen
 * layer's path in the VM's directory.  A snapshot left unfinished before
 * must have been settled (box_libvirt_disk_snapshot_recover()). */
gboolean      box_libvirt_disk_snapshot    (BoxLibvirtPlugin *self, BoxLibvirtOp *op,
                                            virDomainPtr dom, char **frozen, GError **error);

/* Worker threads: links the materialised checkpoint's ram and devstate in
 * @ckpt_dir as ram@suffix and cold.dev@suffix in @vm_dir (FALSE, nothing
 * linked, when it has none any more); box_libvirt_layers_sync() then
 * grants the RAM file to the VM's QEMU (box-libvirt-fork.c). */
gboolean      box_libvirt_link_ram_state   (const char *ckpt_dir, const char *vm_dir,
                                            const char *suffix);

/* Ready forks (box-libvirt-ready.c).  A fork of op->from_* takes the ready
 * fork of that checkpoint when there is one: op->vm gets its VM ID, op->net
 * its attachment (rebound to op->id), op->set_owner is set, and the fork
 * only resumes it; FALSE: there is none, make the fork. */
gboolean      box_libvirt_ready_take       (BoxLibvirtPlugin *self, BoxLibvirtOp *op);

/* Standby domains for cold wakes (box-libvirt-standby.c): the job, and a
 * wake's load of cold.mig into the standby (worker, VM lock held; FALSE:
 * none used, no domain left, start one). */
void          box_libvirt_standby_start    (GTask *task);
/* The LOST job of a cold VM with a standby: forgotten (and the attachment
 * gone) when its domain no longer runs. */
void          box_libvirt_standby_lost_start (GTask *task);
gboolean      box_libvirt_standby_load     (BoxLibvirtPlugin *self, virConnectPtr conn,
                                            BoxLibvirtOp *op);

/* Worker threads, tests only: waits BOX_LIBVIRT_TEST_DELAY_MS at the points
 * BOX_LIBVIRT_TEST_DELAY_AT names (a point is @what up to its first
 * space), logged (box-libvirt-checkpoint-list.c). */
void      box_libvirt_test_delay   (const char *what, const BoxLibvirtOp *op);
void      box_libvirt_test_delay_named (const char *what, const char *id, const char *domain);

G_END_DECLS
