/* box-hypervisor.h: what runs a sandbox.
 *
 * The interface is built around snapshots, because that is what makes
 * sandboxes fast: a create is a fork of a template's memory snapshot, a
 * pause is a memory snapshot, a checkpoint is a named snapshot, a fork is a
 * create from a checkpoint.  How a plugin keeps snapshots (hot in a tmpfs
 * file, cold on disk, in a warm pool) is its own business; the semantics
 * are the specification's whatever the tier.
 *
 * Every VM operation goes through run_async()/run_finish() with a BoxVmOp,
 * so the set of operations can grow without breaking the ABI.  Operations
 * on one sandbox are never run concurrently by the engine; operations on
 * different sandboxes are.  Blocking work belongs on a worker thread.
 *
 * The hypervisor keeps its own state for each sandbox ID under its state
 * directory, so that after a restart query() can tell the engine what is
 * there (reconciliation).  When a VM dies on its own, the plugin emits
 * ::vm-lost on the main thread.
 *
 * The hypervisor plugin owns each running VM's connection to its guest
 * agent (it needs it itself: set-time, set-env and reseeding after a
 * restore or fork) and hands the engine the connected client with
 * get_agent(); it makes agents with box_plugin_context_new_agent().  It
 * also owns the VM's network attachment: it calls the BoxNetwork its
 * context gives it (box_plugin_context_get_network()) to attach and detach
 * the VM, since only it knows when a tap device must exist (a warm pool of
 * pre-started VMs attaches before the sandbox exists, then rebinds).  The
 * engine hands the network the sandbox's rules (request->egress) before it
 * asks for an operation that runs the guest's code, and the network
 * applies them at the attach or rebind, so the hypervisor needs only to
 * attach or rebind before the VM runs.
 *
 * Thread contract: the engine calls every vfunc on the main thread, and
 * run_async() completes there (GTask does it when the task was made on the
 * main thread).  Blocking work runs on the plugin's own threads (libvirt: a
 * bounded GThreadPool); from them the plugin may call the BoxNetwork of
 * its context (see box-network.h) and nothing else of boxd.  Agents, the
 * ::vm-lost signal and the context's store are main-thread only.
 */
#pragma once

#include "box-export.h"

#include "box-plugin.h"
#include "box-network.h"

typedef struct _BoxAgentClient BoxAgentClient;   /* box-agent-client.h */

G_BEGIN_DECLS

/**
 * BoxVmOp:
 * @BOX_VM_OP_CREATE: a new VM (from the template, the image, or a fork of
 *   from_*); running when done
 * @BOX_VM_OP_SUSPEND: memory and disk snapshot; nothing runs afterwards
 * @BOX_VM_OP_RESUME: from the suspend snapshot; processes as they were
 * @BOX_VM_OP_SHUTDOWN: processes end; the disk is kept
 * @BOX_VM_OP_BOOT: a fresh boot on the kept disk
 * @BOX_VM_OP_DESTROY: VM, disk, snapshots and checkpoints gone; idempotent
 * @BOX_VM_OP_CHECKPOINT: keep checkpoint_id (memory and disk, or disk only)
 * @BOX_VM_OP_RESTORE: become checkpoint_id; running when done
 * @BOX_VM_OP_DELETE_CHECKPOINT: forget checkpoint_id; idempotent
 * @BOX_VM_OP_LAST: the number of operations
 *
 * The operations of box_hypervisor_run_async().
 */
typedef enum {
  BOX_VM_OP_CREATE,             /* new VM (template, or fork of from_*); running when done */
  BOX_VM_OP_SUSPEND,            /* memory + disk snapshot; nothing runs afterwards */
  BOX_VM_OP_RESUME,             /* from the suspend snapshot; processes as they were */
  BOX_VM_OP_SHUTDOWN,           /* processes end; the disk is kept */
  BOX_VM_OP_BOOT,               /* fresh boot on the kept disk */
  BOX_VM_OP_DESTROY,            /* VM, disk, snapshots and checkpoints gone; idempotent */
  BOX_VM_OP_CHECKPOINT,         /* keep checkpoint_id (memory or disk only) */
  BOX_VM_OP_RESTORE,            /* become checkpoint_id; running when done */
  BOX_VM_OP_DELETE_CHECKPOINT,  /* forget checkpoint_id; idempotent */
  BOX_VM_OP_LAST
} BoxVmOp;

/**
 * BoxVmState:
 * @BOX_VM_STATE_ABSENT: nothing known: no VM, no disk
 * @BOX_VM_STATE_RUNNING: the VM runs
 * @BOX_VM_STATE_SUSPENDED: a memory snapshot to resume from
 * @BOX_VM_STATE_SHUTOFF: a disk to boot
 * @BOX_VM_STATE_LOST: the VM died; a snapshot may remain (snapshot_at)
 *
 * What a hypervisor knows of a sandbox's VM (box_hypervisor_query()).
 */
typedef enum {
  BOX_VM_STATE_ABSENT,          /* nothing known: no VM, no disk */
  BOX_VM_STATE_RUNNING,
  BOX_VM_STATE_SUSPENDED,       /* a memory snapshot to resume from */
  BOX_VM_STATE_SHUTOFF,         /* a disk to boot */
  BOX_VM_STATE_LOST,            /* the VM died; a snapshot may remain (snapshot_at) */
} BoxVmState;

/**
 * BoxHypervisorCaps:
 * @BOX_HYPERVISOR_CAP_NONE: none
 * @BOX_HYPERVISOR_CAP_GUEST_AGENT: runs VMs with a guest agent (get_agent)
 * @BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS: SUSPEND/RESUME and CHECKPOINT with
 *   memory
 * @BOX_HYPERVISOR_CAP_CHECKPOINTS: CHECKPOINT, RESTORE
 * @BOX_HYPERVISOR_CAP_FORK: CREATE from a checkpoint (from_*)
 * @BOX_HYPERVISOR_CAP_HOT_PAUSE: a pause keeps the VM in memory a while
 * @BOX_HYPERVISOR_CAP_IMAGES: CREATE from request->image
 *
 * What a hypervisor can do, so that the engine asks instead of finding out
 * by failing (box_hypervisor_get_capabilities()).
 */
typedef enum {
  BOX_HYPERVISOR_CAP_NONE             = 0,
  BOX_HYPERVISOR_CAP_GUEST_AGENT      = 1 << 0,   /* runs VMs with a guest agent (get_agent) */
  BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS = 1 << 1,   /* SUSPEND/RESUME and CHECKPOINT with memory */
  BOX_HYPERVISOR_CAP_CHECKPOINTS      = 1 << 2,   /* CHECKPOINT, RESTORE */
  BOX_HYPERVISOR_CAP_FORK             = 1 << 3,   /* CREATE from a checkpoint (from_*) */
  BOX_HYPERVISOR_CAP_HOT_PAUSE        = 1 << 4,   /* a pause keeps the VM in memory a while */
  BOX_HYPERVISOR_CAP_IMAGES           = 1 << 5,   /* CREATE from request->image */
} BoxHypervisorCaps;

/**
 * BoxHypervisorCapabilities:
 * @flags: what it can do
 * @accel: "kvm", "tcg" or "none" (runs no VM); static or owned by the plugin
 *
 * What box_hypervisor_get_capabilities() fills in.  A boxed type whose copy
 * is shallow: @accel is never owned.
 */
typedef struct {
  BoxHypervisorCaps  flags;
  const char        *accel;      /* "kvm", "tcg" or "none" (runs no VM); static or owned by the plugin */
  /*< private >*/
  gpointer           reserved[6];
} BoxHypervisorCapabilities;

/**
 * BoxVmRequest:
 * @sandbox_id: the sandbox
 * @hostname: the sandbox's name
 * @template_name: the template; "" with an image
 * @image: the image; "" with a template
 * @resources: CPUs, memory and disk
 * @env: (element-type utf8 utf8): handed to the guest at every start; never
 *   snapshotted
 * @egress: (element-type BoxRule): the egress rules, "defaults" expanded;
 *   empty: the whole internet
 * @checkpoint_id: (nullable): for CHECKPOINT, RESTORE, DELETE_CHECKPOINT
 * @memory: CHECKPOINT: memory and disk, or disk only
 * @from_sandbox_id: (nullable): CREATE as a fork: the source sandbox
 * @from_checkpoint_id: (nullable): CREATE as a fork: its checkpoint
 *
 * What a VM operation works on.  The engine owns every member; the
 * request is valid until box_hypervisor_run_async() returns.  A boxed type
 * whose copy is shallow (the members are borrowed).
 */
typedef struct {
  const char       *sandbox_id;
  const char       *hostname;          /* the sandbox's name */
  const char       *template_name;     /* "" with an image */
  const char       *image;             /* "" with a template */
  BoxResources      resources;
  GHashTable       *env;               /* handed to the guest at every start; never snapshotted */
  GPtrArray        *egress;            /* BoxRule*, "defaults" expanded; empty = whole internet */
  const char       *checkpoint_id;     /* CHECKPOINT, RESTORE, DELETE_CHECKPOINT */
  gboolean          memory;            /* CHECKPOINT: memory and disk, or disk only */
  const char       *from_sandbox_id;   /* CREATE as a fork */
  const char       *from_checkpoint_id;
  /*< private >*/
  gpointer          reserved[8];
} BoxVmRequest;

#define BOX_TYPE_HYPERVISOR_CAPABILITIES (box_hypervisor_capabilities_get_type ())
#define BOX_TYPE_VM_REQUEST              (box_vm_request_get_type ())

BOX_PLUGIN_API
GType box_hypervisor_capabilities_get_type (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType box_vm_request_get_type              (void) G_GNUC_CONST;
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxHypervisorCapabilities, g_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxVmRequest, g_free)

/**
 * BoxHypervisorInterface:
 * @g_iface: the parent interface
 * @get_accel: "kvm", "tcg" or "none" (runs no VM); optional with
 *   @get_capabilities
 * @list_templates: the templates really available (#BoxTemplate, a new
 *   array)
 * @check_room: %FALSE with %BOX_ERROR_CAPACITY when the resources do not
 *   fit now
 * @run_async: starts one VM operation (#BoxVmOp); completes on the main
 *   thread
 * @run_finish: completes @run_async
 * @get_agent: the connected agent of a running VM (a new reference), or
 *   %NULL with %BOX_ERROR_SANDBOX_UNAVAILABLE (not running) or
 *   %BOX_ERROR_UNSUPPORTED (a hypervisor that runs no VM)
 * @query: what exists for a sandbox ID, and the newest snapshot's time
 * @get_capabilities: fills in a zeroed #BoxHypervisorCapabilities;
 *   optional (without it the capabilities are derived from @get_accel: an
 *   accel other than "none" is taken to do everything); answers from
 *   memory, on the main thread
 * @list_checkpoints: the IDs of the whole checkpoints the hypervisor keeps
 *   for a sandbox (a new %NULL-terminated array); optional (without it
 *   the engine cannot tell files without a record at start)
 * @set_guest_ca: the CA (PEM) every guest trusts, or %NULL; optional; for
 *   a hypervisor that prepares guests in advance; main thread, at start
 *   and after a rotation
 *
 * The virtual methods of a hypervisor plugin; see the thread contract in
 * the #BoxHypervisor description.
 */

/**
 * BoxHypervisorInterface::get_agent:
 * @self: the hypervisor
 * @sandbox_id: the sandbox
 * @error: %BOX_ERROR_SANDBOX_UNAVAILABLE or %BOX_ERROR_UNSUPPORTED
 *
 * The vfunc behind box_hypervisor_get_agent().
 *
 * Returns: (transfer full) (nullable) (type BoxAgent): the running VM's
 *   connected agent
 */

/**
 * BoxHypervisor:
 *
 * What runs a sandbox: VMs built around snapshots (a create is a fork of a
 * template's memory snapshot, a pause a memory snapshot, a checkpoint a
 * named snapshot, a fork a create from a checkpoint).  Every VM operation
 * goes through box_hypervisor_run_async() with a #BoxVmOp; operations on
 * one sandbox never overlap.  The engine calls every vfunc on the main
 * thread and run_async() completes there; blocking work runs on the
 * plugin's own threads, from which it may call the #BoxNetwork of its
 * context and nothing else of boxd.  When a VM dies on its own the plugin
 * emits #BoxHypervisor::vm-lost on the main thread.
 */
#define BOX_TYPE_HYPERVISOR (box_hypervisor_get_type ())
BOX_PLUGIN_API
G_DECLARE_INTERFACE (BoxHypervisor, box_hypervisor, BOX, HYPERVISOR, GObject)

struct _BoxHypervisorInterface {
  GTypeInterface g_iface;

  /* "kvm", "tcg" or "none" (runs no VM); optional with get_capabilities() */
  const char  *(*get_accel)      (BoxHypervisor *self);
  /* BoxTemplate*, what is really available */
  GPtrArray   *(*list_templates) (BoxHypervisor *self);
  /* FALSE with BOX_ERROR_CAPACITY when @resources do not fit now */
  gboolean     (*check_room)     (BoxHypervisor *self, const BoxResources *resources,
                                  GError **error);
  void         (*run_async)      (BoxHypervisor *self, BoxVmOp op, const BoxVmRequest *request,
                                  GCancellable *cancellable, GAsyncReadyCallback callback,
                                  gpointer user_data);
  gboolean     (*run_finish)     (BoxHypervisor *self, GAsyncResult *result, GError **error);
  /* The connected agent client of a running VM (a new reference), or
   * NULL with BOX_ERROR_SANDBOX_UNAVAILABLE (not running) or
   * BOX_ERROR_UNSUPPORTED (a hypervisor that runs no VM). */
  BoxAgentClient *(*get_agent)   (BoxHypervisor *self, const char *sandbox_id, GError **error);
  /* What exists for @sandbox_id; *snapshot_at (may be NULL) the newest snapshot's time or 0 */
  BoxVmState   (*query)          (BoxHypervisor *self, const char *sandbox_id, gint64 *snapshot_at);
  /* Fills @caps (zeroed by the caller).  Optional: without it the
   * capabilities are derived from get_accel() (a hypervisor with an accel
   * other than "none" is taken to do everything).  May be called often;
   * answers from memory, on the main thread. */
  void         (*get_capabilities) (BoxHypervisor *self, BoxHypervisorCapabilities *caps);
  /* The IDs of the whole checkpoints kept for @sandbox_id (a new
   * NULL-terminated array, empty for none); NULL with @error when they
   * cannot be listed.  Optional; called on the main thread at start
   * (reconciliation), so it reads only what is local and small. */
  char       **(*list_checkpoints) (BoxHypervisor *self, const char *sandbox_id, GError **error);
  /* The CA (PEM) every guest trusts, or NULL for none: a hypervisor that
   * prepares guests in advance may give it to them (the agent's trust-ca)
   * so that the engine's own trust-ca finds it there.  Optional; called on
   * the main thread at start and after a rotation. */
  void         (*set_guest_ca)   (BoxHypervisor *self, GBytes *pem);

  /*< private >*/
  gpointer padding[13];
};

/* caps->accel when the plugin has get_capabilities() */
BOX_PLUGIN_API
const char  *box_hypervisor_get_accel      (BoxHypervisor *self);
/**
 * box_hypervisor_get_capabilities:
 * @caps: (out caller-allocates): filled in
 */
BOX_PLUGIN_API
void         box_hypervisor_get_capabilities (BoxHypervisor *self, BoxHypervisorCapabilities *caps);
/* TRUE when every flag of @caps is set */
BOX_PLUGIN_API
gboolean     box_hypervisor_has_caps       (BoxHypervisor *self, BoxHypervisorCaps caps);
/**
 * box_hypervisor_list_templates:
 * @self: the hypervisor
 *
 * Returns: (transfer container) (element-type BoxTemplate): the templates
 *   really available
 */
BOX_PLUGIN_API
GPtrArray   *box_hypervisor_list_templates (BoxHypervisor *self);
BOX_PLUGIN_API
gboolean     box_hypervisor_check_room     (BoxHypervisor *self, const BoxResources *resources,
                                            GError **error);
/**
 * box_hypervisor_run_async:
 * @self: the hypervisor
 * @op: the operation
 * @request: what it works on; valid until the call returns
 * @cancellable: (nullable): cancels the operation where it can be
 * @callback: (scope async): called on the main thread
 * @user_data: (closure): data for @callback
 *
 * Runs one VM operation; complete it with box_hypervisor_run_finish().
 */
BOX_PLUGIN_API
void         box_hypervisor_run_async      (BoxHypervisor *self, BoxVmOp op,
                                            const BoxVmRequest *request, GCancellable *cancellable,
                                            GAsyncReadyCallback callback, gpointer user_data);
BOX_PLUGIN_API
gboolean     box_hypervisor_run_finish     (BoxHypervisor *self, GAsyncResult *result,
                                            GError **error);
/**
 * box_hypervisor_get_agent:
 * @self: the hypervisor
 * @sandbox_id: the sandbox
 * @error: %BOX_ERROR_SANDBOX_UNAVAILABLE or %BOX_ERROR_UNSUPPORTED
 *
 * Returns: (transfer full) (nullable) (type BoxAgent): the running VM's connected agent
 *   (a #BoxAgent made by box_plugin_context_new_agent()), or %NULL with
 *   BOX_ERROR_SANDBOX_UNAVAILABLE
 */
BOX_PLUGIN_API
BoxAgentClient *box_hypervisor_get_agent  (BoxHypervisor *self, const char *sandbox_id,
                                            GError **error);
/**
 * box_hypervisor_query:
 * @snapshot_at: (out) (optional): when the kept snapshot was made; for a
 *   SHUTOFF VM that died on its own, when its kept disk was last written
 *   (the engine puts the sandbox back to it, stopped); 0 for none
 *
 * Returns: what the plugin knows of the sandbox's VM
 */
BOX_PLUGIN_API
BoxVmState   box_hypervisor_query          (BoxHypervisor *self, const char *sandbox_id,
                                            gint64 *snapshot_at);
/**
 * box_hypervisor_list_checkpoints:
 * @self: the hypervisor
 * @sandbox_id: the sandbox
 * @error: why they cannot be listed (%BOX_ERROR_UNSUPPORTED: the plugin
 *   has no list_checkpoints())
 *
 * Returns: (transfer full) (nullable) (array zero-terminated=1): the IDs
 *   of the whole checkpoints the hypervisor keeps for @sandbox_id
 */
BOX_PLUGIN_API
char       **box_hypervisor_list_checkpoints (BoxHypervisor *self, const char *sandbox_id,
                                              GError **error);
/**
 * box_hypervisor_set_guest_ca:
 * @self: the hypervisor
 * @pem: (nullable): the CA certificate (PEM) every guest trusts, or %NULL
 *
 * Tells a hypervisor that prepares guests in advance (a warm pool) the CA
 * they are to trust, so that they hold it before a create.  The engine
 * still sends it to every guest it starts; a guest prepared with an older
 * CA gets the new one then.  Does nothing for a plugin without
 * set_guest_ca().
 */
BOX_PLUGIN_API
void         box_hypervisor_set_guest_ca   (BoxHypervisor *self, GBytes *pem);
BOX_PLUGIN_API
const char  *box_vm_op_to_string           (BoxVmOp op);
/* Emits ::vm-lost; for plugins. */
BOX_PLUGIN_API
void         box_hypervisor_emit_vm_lost   (BoxHypervisor *self, const char *sandbox_id);

G_END_DECLS
