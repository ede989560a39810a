/* box-libvirt-private.h: what the files of the libvirt plugin share.
 *
 * Threads: the plugin object, its VMs, templates and pool live on the main
 * thread.  Blocking libvirt calls run on worker threads
 * (box_libvirt_run_in_thread) and see only the data handed to them, the
 * connection (thread-safe) and the configuration (immutable once started).
 * libvirt's own event loop runs on one more thread; it only posts domain
 * lifecycle events to the main context.
 *
 * Files on disk:
 *   <state dir>/<sandbox id>.json     what the plugin knows of a sandbox (box-libvirt-state.c)
 *   <state dir>/accel-<key>           the cached KVM probe (box-libvirt-host.c)
 *   <vm_dir>/vms/<vm id>/             one VM: disk.qcow2, agent.sock, console.log, cold.mig
 *   <vm_dir>/templates/<key>/         a template snapshot: disk.qcow2, ram, state, manifest.json
 * <vm_dir> must be reachable by QEMU's user; the state dir need not be.
 */
#pragma once

#include <libvirt/libvirt.h>

#include "box-agent.h"
#include "box-plugin-context.h"
#include "box-state-store.h"
#include "box-libvirt-plugin.h"
#include "box-libvirt-pool-policy.h"

G_BEGIN_DECLS

/* Changes whenever the domain layout changes: template snapshots made by
 * another recipe cannot be restored into our domains, so it is part of
 * their key. */
#define BOX_LIBVIRT_RECIPE      "box-libvirt-4"
#define BOX_LIBVIRT_RAM_ID      "box-ram"
#define BOX_LIBVIRT_AGENT_PORT  "org.box.agent.0"
#define BOX_LIBVIRT_NAME_PREFIX "box-"
/* Under TCG a VM booted now has this much RAM beyond its memory_mib, so
 * that its RAM block is no multiple of 256 KiB (box-libvirt-ram.c) */
#define BOX_LIBVIRT_TCG_RAM_PAD_KIB 8

/* ---- the guest image -------------------------------------------------- */

typedef struct {
  char         *dir;            /* the resolved image directory (base-<key>) */
  char         *key;            /* manifest.json image_key */
  char         *kernel;
  char         *initrd;
  char         *rootfs;         /* raw ext4 */
  guint64       rootfs_bytes;
  BoxResources  resources;      /* the template's defaults */
} BoxLibvirtImage;

void             box_libvirt_image_free (BoxLibvirtImage *image);
/* Reads <image_dir>/base; the error says how to build it. */
BoxLibvirtImage *box_libvirt_image_load (const char *image_dir, GError **error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxLibvirtImage, box_libvirt_image_free)

/* ---- configuration ([plugin.libvirt]) --------------------------------- */

typedef struct {
  char    *uri;                 /* qemu:///system */
  char    *image_dir;           /* /var/cache/box/images */
  char    *vm_dir;              /* /var/lib/libvirt/box */
  char    *accel;               /* auto, kvm or tcg */
  char    *qemu_user;           /* libvirt-qemu */
  char    *qemu_group;          /* kvm */
  guint    qemu_uid;            /* VMs made before uid_range: their QEMU's uid */
  guint    qemu_gid;            /* every QEMU's gid */
  guint    uid_first;           /* uid_range: one uid per VM from here */
  guint    uid_last;
  gboolean allow_tcg;           /* TRUE: VMs may run without KVM */
  guint    pool_size;           /* 2: the pool's floor */
  guint    pool_max_size;       /* 64: its ceiling (box-libvirt-pool-policy.h) */
  guint64  pool_memory_mib;     /* 0: an eighth of max_memory_mib, for all pools */
  guint    pool_idle_s;         /* 120: no create for this long, and pools shrink */
  guint    pool_fill_jobs;      /* 2: pool fills at once, per template */
  guint    hot_pause_s;         /* 60 */
  guint64  disk_reserve_mib;    /* 256: left free on vm_dir by checkpoints, restores, forks */
  gboolean checkpoint_materialise; /* TRUE: memory checkpoints materialised in the background */
  gboolean checkpoint_ready;     /* TRUE: forks of each sandbox's newest materialised memory
                                  * checkpoint made ready in advance (box-libvirt-ready.c) */
  guint    checkpoint_ready_max; /* 10: at most so many of them per sandbox */
  gboolean cold_standby;        /* TRUE: a cold VM's domain started in advance for its wake
                                 * (box-libvirt-standby.c) */
  gboolean ram_fault_in;        /* TRUE: a restored VM's RAM mapping faulted in ahead of
                                 * its next save (box-libvirt-fault-in.c) */
  guint64  max_memory_mib;      /* 0: MemTotal minus a reserve */
  guint64  max_cpus;            /* 0: CPUs times cpu_overcommit */
  guint    cpu_overcommit;      /* 64 */
  guint    tb_cache_mib;        /* TCG translation cache per VM, 64 */
  guint    boot_timeout_s;      /* 120 */
  char    *disk_cache;          /* writeback (default), none or unsafe */
} BoxLibvirtConfig;

void     box_libvirt_config_clear (BoxLibvirtConfig *config);
gboolean box_libvirt_config_load  (BoxPlugin *plugin, BoxLibvirtConfig *config, GError **error);

/* ---- QEMU's uids (box-libvirt-uids.c) ---------------------------------- */

/* In every VM directory while its VM's files exist: the uid its QEMU runs
 * under (removed last by box_libvirt_remove_tree()). */
#define BOX_LIBVIRT_UID_FILE "uid"
/* The default uid_range: above the ranges systemd and useradd hand out. */
#define BOX_LIBVIRT_UID_RANGE "1879048192-1879113727"

gboolean box_libvirt_uid_range_parse (const char *text, guint *first, guint *last,
                                      GError **error);
/* Creates @dir (a VM directory under @vm_dir) and records in it the lowest
 * uid of first..last that no VM directory under @vm_dir records; any thread.
 * BOX_ERROR_CAPACITY when every uid is taken. */
gboolean box_libvirt_vm_dir_claim    (const char *vm_dir, const char *dir, guint first,
                                      guint last, guint *uid, GError **error);
/* The uid @dir records, 0 when none. */
guint    box_libvirt_vm_dir_uid      (const char *dir);
/* How many uids of first..last VM directories under @vm_dir record. */
guint    box_libvirt_uids_taken      (const char *vm_dir, guint first, guint last);

/* ---- the host ------------------------------------------------------------ */

/* "kvm" or "tcg": from the configuration, a cached probe or a new probe
 * (QEMU boots @image's kernel with KVM for at most 10 s). */
char    *box_libvirt_choose_accel (const char *setting, const BoxLibvirtImage *image,
                                   const char *state_dir, const char *qemu_version,
                                   char **how);
guint64  box_libvirt_host_memory_mib (void);
guint    box_libvirt_host_cpus        (void);
char    *box_libvirt_console_tail      (const char *text, gsize max);
char    *box_libvirt_console_file_tail (const char *path, gsize max);
/* Memory the sandboxes' VMs hold and will not let go of (hot pauses
 * excepted: they turn cold when memory is short), MiB. */
guint64  box_libvirt_memory_held_mib  (BoxLibvirtPlugin *self);
/* The pid of the domain's QEMU, 0 when it has none. */
pid_t    box_libvirt_domain_qemu_pid  (const char *domain_name);
/* Memory a QEMU really holds (private RSS, MiB), 0 when unknown. */
guint64  box_libvirt_qemu_rss_mib     (const char *domain_name);
/* Folds the domain's QEMU's private memory (when known) into
 * *@average_mib, a running average (0: none yet): what a budget counts a
 * pool domain, ready fork or standby at. */
void     box_libvirt_qemu_rss_average (const char *domain_name, guint64 *average_mib);

/* ---- domain XML ------------------------------------------------------- */

typedef enum {
  BOX_LIBVIRT_NIC_NONE,
  BOX_LIBVIRT_NIC_LOOSE,        /* a template: the device must exist, no traffic */
  BOX_LIBVIRT_NIC_TAP,          /* the network plugin's tap device */
} BoxLibvirtNic;

/* Whose a domain is (box-libvirt-owner.c): recorded in its libvirt metadata. */
typedef struct {
  const char    *role;          /* "pool", "build" or "sandbox" */
  const char    *state_dir;     /* the owning boxd's; NULL: no metadata */
  const char    *vm_dir;
  const char    *sandbox;       /* role sandbox */
} BoxLibvirtOwner;

char     *box_libvirt_owner_xml        (const BoxLibvirtOwner *owner, gboolean with_namespace);
/* Worker threads.  The live domain's metadata. */
gboolean  box_libvirt_domain_set_owner (virDomainPtr dom, const BoxLibvirtOwner *owner,
                                        GError **error);
/* Ends the domains of ours that no boxd can adopt any more; how many. */
guint     box_libvirt_sweep_orphans    (virConnectPtr conn);

typedef struct {
  const char    *name;
  const BoxLibvirtOwner *owner; /* may be NULL */
  const char    *accel;         /* "kvm" or "tcg" */
  guint          cpus;
  guint          memory_mib;
  guint64        ram_kib;       /* the RAM block; 0: memory_mib MiB */
  const char    *kernel;
  const char    *initrd;
  const char    *cmdline;
  const char    *disk;          /* qcow2 */
  const char    *disk_cache;    /* libvirt's cache mode */
  const char    *agent_socket;
  const char    *console_log;
  const char    *ram_path;      /* NULL: anonymous RAM */
  gboolean       ram_shared;    /* share=on (a template being built) */
  gboolean       incoming;      /* -incoming defer: a restore follows */
  BoxLibvirtNic  nic;
  const char    *tap;
  const char    *mac;
  guint          uid;           /* QEMU runs as uid:gid (static DAC label) */
  guint          gid;
  guint          tb_cache_mib;
} BoxLibvirtDomainSpec;

char *box_libvirt_domain_xml     (const BoxLibvirtDomainSpec *spec);

/* box-libvirt-ram.c: the RAM block's size (0: unknown) */
guint64  box_libvirt_ram_kib_for_boot  (const char *accel, guint memory_mib);
gboolean box_libvirt_live_ram_copy_for (const char *accel, guint64 ram_bytes);
guint64  box_libvirt_stream_ram_kib    (const guint8 *head, gsize len);
guint64  box_libvirt_state_ram_kib     (const char *path);
guint64  box_libvirt_file_ram_kib      (const char *path);
/* Worker threads: the running VM's RAM block as its QEMU reports it. */
guint64  box_libvirt_domain_ram_bytes  (virDomainPtr dom);
/* console, hostname and (with @net) the guest's address for a cold boot */
char *box_libvirt_kernel_cmdline (const char *hostname, const BoxNetAttachment *net);

/* ---- the connection (thread-safe) --------------------------------------- */

/* Called on the main context when a domain stopped (libvirt's STOPPED
 * lifecycle event with its detail). */
typedef void (*BoxLibvirtStoppedFunc) (const char *domain_name, int detail, gpointer user_data);

typedef struct _BoxLibvirtConn BoxLibvirtConn;

BoxLibvirtConn *box_libvirt_conn_new  (const char *uri, BoxLibvirtStoppedFunc stopped,
                                       gpointer user_data);
/* @stopped is never called after this returns. */
void            box_libvirt_conn_free (BoxLibvirtConn *conn);
/* The open connection (a new reference: virConnectClose()); reconnects
 * after libvirtd went away. */
virConnectPtr   box_libvirt_conn_get  (BoxLibvirtConn *conn, GError **error);
/* BOX_ERROR_INTERNAL "@what: <libvirt's last error>"; returns FALSE */
gboolean        box_libvirt_set_error (GError **error, const char *what);

/* ---- blocking domain work (worker threads) -------------------------------- */

/* Starts a transient domain and limits its memory. */
virDomainPtr box_libvirt_domain_start   (virConnectPtr conn, const char *xml, gboolean paused,
                                         guint memory_mib, guint tb_cache_mib, GError **error);
/* The cgroup memory hard limit of a running domain: its RAM plus QEMU's
 * own needs (a warning, once, where the host has no memory cgroup). */
void         box_libvirt_domain_limit_memory (virDomainPtr dom, guint memory_mib,
                                              guint tb_cache_mib);
/* NULL when there is no such (running) domain */
virDomainPtr box_libvirt_domain_lookup  (virConnectPtr conn, const char *name);
/* Kills the domain if it runs; idempotent. */
gboolean     box_libvirt_domain_destroy (virConnectPtr conn, const char *name, GError **error);
/* Waits up to @timeout_ms for the domain to end on its own. */
gboolean     box_libvirt_domain_wait_gone (virConnectPtr conn, const char *name, guint timeout_ms);
/* A QMP command through libvirt; @fd (or -1) is passed along.  The reply's
 * "return" member as JSON text. */
char        *box_libvirt_qmp            (virDomainPtr dom, const char *command, int fd,
                                         GError **error);
/* The same, for a command whose answer is only success. */
gboolean     box_libvirt_qmp_ok         (virDomainPtr dom, const char *command, int fd,
                                         GError **error);
/* fsync(2) of the file at @path. */
gboolean     box_libvirt_fsync_file     (const char *path, GError **error);
/* What a boxd killed in the middle of a migration to a file (a checkpoint,
 * a cold pause) left, which QEMU carried on alone: a migration still
 * running is cancelled; a guest its end stopped (QEMU's "postmigrate",
 * its disk images handed over) is started again (*resumed), which gives
 * QEMU its images back; a later migration out of it is then safe. */
gboolean     box_libvirt_domain_end_migration (virDomainPtr dom, gboolean *resumed,
                                               GError **error);
/* Device state (and RAM unless it is shared and @ignore_shared) into
 * @path: QEMU migrates to an fd: it may not spawn (seccomp). */
gboolean     box_libvirt_migrate_save   (virDomainPtr dom, const char *path,
                                         gboolean ignore_shared, GError **error);
/* A migration to /dev/null cancelled once its set-up is over: under TCG,
 * QEMU's first sync of the migration dirty bitmap of a RAM block that is
 * no multiple of 256 KiB resets the vCPUs' TLB entries page by page,
 * ~1 s for 2 GiB of pages all dirty (as they are in a QEMU just started),
 * with the big lock held.  After it, that work is done for the pages the
 * guest does not write again (box-libvirt-fault-in.c).  The vCPUs are not
 * stopped (a migration that ended before its cancel is resumed). */
gboolean     box_libvirt_migrate_settle (virDomainPtr dom, GError **error);
/* The reverse into a domain started paused with -incoming defer. */
gboolean     box_libvirt_migrate_load   (virDomainPtr dom, const char *path,
                                         gboolean ignore_shared, GError **error);
/* Every thread of the domain's QEMU (and those it makes later) yields the
 * CPUs and the disk to everything else: SCHED_IDLE, nice 19, the idle I/O
 * class (best effort). */
void         box_libvirt_domain_background (const char *name);
gboolean     box_libvirt_run_command    (const char *const *argv, GError **error);
gboolean     box_libvirt_create_overlay (const char *path, const char *backing,
                                         const char *backing_format, guint64 size_bytes,
                                         GError **error);
gboolean     box_libvirt_remove_tree    (const char *path, GError **error);
/* Moves a finished template build from @tmp_dir to @dir, unless another
 * boxd finished the same snapshot first: then @tmp_dir is removed. */
gboolean     box_libvirt_template_install (const char *tmp_dir, const char *dir,
                                           GError **error);

/* ---- sandboxes' VMs ------------------------------------------------------- */

typedef struct _BoxLibvirtTemplate BoxLibvirtTemplate;

typedef struct {
  char          *id;             /* sandbox ID */
  char          *vm_id;          /* <vm_dir>/vms/<vm id>, domain box-<vm id> */
  BoxVmState     state;          /* RUNNING, SUSPENDED or SHUTOFF */
  gboolean       cold;           /* SUSPENDED: in cold.mig, no QEMU */
  gint64         snapshot_at;
  gint64         paused_at;      /* monotonic, for hot -> cold */
  BoxResources   resources;
  char          *template_key;   /* "" after a cold boot */
  char          *hostname;
  gboolean       nic;

  /* main thread only, not saved */
  BoxAgent *agent;
  gulong          agent_closed_id;
  gboolean        busy;
  GQueue          waiting;       /* GTask* waiting for busy to clear */
  guint           cold_source;
  gboolean        expect_stop;   /* our own operation ends the domain */
  gboolean        standby;       /* cold: its domain waits for cold.mig (box-libvirt-standby.c) */
  gboolean        gone;          /* destroyed; freed once nobody waits for it */
} BoxLibvirtVm;

BoxLibvirtVm *box_libvirt_vm_new        (const char *id);
void          box_libvirt_vm_free       (BoxLibvirtVm *vm);
char         *box_libvirt_vm_domain_name (const char *vm_id);
char         *box_libvirt_vm_path       (const char *vm_dir, const char *vm_id, const char *file);
char         *box_libvirt_new_vm_id     (void);
/* When the disk of @vm (a VM that just died) last changed: the pause for a
 * paused one, else its disk file's mtime (now if unknown).  query()
 * reports it as the SHUTOFF VM's snapshot_at. */
gint64        box_libvirt_vm_disk_time  (const BoxLibvirtVm *vm, const char *vm_dir);
/* <state dir>/<id>.json */
gboolean      box_libvirt_vm_save       (const BoxLibvirtVm *vm, const char *state_dir,
                                         GError **error);
BoxLibvirtVm *box_libvirt_vm_load       (const char *id, const char *state_dir, GError **error);
void          box_libvirt_vm_forget     (const char *id, const char *state_dir);

/* ---- the plugin ------------------------------------------------------------ */

struct _BoxLibvirtPlugin {
  BoxPlugin          parent_instance;

  BoxLibvirtConfig   config;
  char              *state_dir;      /* NULL without an engine */
  BoxLibvirtImage   *image;
  BoxLibvirtConn    *conn;
  char              *accel;          /* "kvm", "tcg" */
  char              *qemu_version;   /* "7.2.22" */
  guint64            max_memory_mib;
  guint64            max_cpus;
  guint64            pool_budget_mib; /* every pool's domains together, at most */
  gboolean           started;
  GCancellable      *cancellable;    /* cancelled at stop */
  GThreadPool       *workers;        /* box_libvirt_run_in_thread(), BOX_LIBVIRT_WORKERS at most */
  gint               works;          /* atomic: operations, fills, builds, materialisations and jobs under way */
  guint              cold_running;   /* cold snapshots being made */

  GHashTable        *vms;            /* sandbox id -> BoxLibvirtVm* */
  GHashTable        *templates;      /* key -> BoxLibvirtTemplate* */
  /* memory checkpoints to materialise ("<sandbox>\n<checkpoint>"), the job under way */
  GQueue             materialise_queue;
  struct _BoxLibvirtMaterialise *materialising;
  guint              materialise_source; /* box_libvirt_materialise_kick(): the quiet wait */
  /* atomic (worker threads read it): creates, forks, wakes, checkpoints and
   * restores under way; a materialisation yields to them */
  gint               heavy_ops;
  /* forks made ready in advance (box-libvirt-ready.c): sandbox ID -> its
   * newest materialised memory checkpoint's BoxLibvirtReadySet (keys owned
   * by the values), the one fork being made, a ready fork's measured cost */
  GHashTable        *readies;
  struct _BoxLibvirtReady *ready_making;
  guint64            ready_mib;
  gint64             ready_last_fork;    /* monotonic: the last fork of a memory checkpoint */
  guint              ready_quiet_source; /* ready_next() once forks stopped coming */
  /* standby domains for cold wakes (box-libvirt-standby.c): sandbox IDs
   * that want one, whether one is being made, a standby's measured cost */
  GQueue             standby_queue;
  gboolean           standby_making;
  guint64            standby_mib;
  /* RAM mappings faulted in ahead of a save (box-libvirt-fault-in.c):
   * sandbox IDs that want it, whether one runs (since when), how many ended */
  GQueue             fault_in_queue;
  gboolean           fault_in_running;
  guint              fault_ins_done;
  guint              fault_in_yields;    /* jobs that gave way to an operation */
  /* atomic: the engine's operations under way (a fault-in yields to any) */
  gint               engine_ops;
  /* the CA every guest trusts (box_hypervisor_set_guest_ca()): pool
   * domains take it as they warm up; main thread */
  GBytes            *guest_ca;
};

typedef gboolean (*BoxLibvirtWorkFunc) (BoxLibvirtPlugin *self, gpointer data, GError **error);

/* Blocking libvirt calls at once, at most (more wait in the queue). */
#define BOX_LIBVIRT_WORKERS 16

/* Runs @func on a worker of the plugin's own pool; @callback on the main
 * context.  @func must not call into boxd except through BoxNetwork (see
 * doc/PLUGINS.md, "Thread contracts"). */
void      box_libvirt_run_in_thread (BoxLibvirtPlugin *self, BoxLibvirtWorkFunc func,
                                     gpointer data, GDestroyNotify data_free,
                                     GCancellable *cancellable, GAsyncReadyCallback callback,
                                     gpointer user_data);
gboolean  box_libvirt_run_finish    (GAsyncResult *result, GError **error);
/* A reference on the plugin that its stop waits for (box_libvirt_plugin_stop()):
 * taken by whatever is under way (an operation, a fill, a build, a
 * materialisation, a job) and given back when it is freed. */
BoxLibvirtPlugin *box_libvirt_hold    (BoxLibvirtPlugin *self);
void      box_libvirt_release       (BoxLibvirtPlugin *self);

BoxNetwork *box_libvirt_get_network (BoxLibvirtPlugin *self);
/* TCG is not a security boundary: without KVM and with allow_tcg=false no
 * QEMU starts. */
gboolean  box_libvirt_tcg_refused   (BoxLibvirtPlugin *self);
BoxLibvirtVm *box_libvirt_lookup_vm (BoxLibvirtPlugin *self, const char *id);
BoxLibvirtVm *box_libvirt_find_vm_by_domain (BoxLibvirtPlugin *self, const char *domain_name);
void      box_libvirt_save_vm       (BoxLibvirtPlugin *self, BoxLibvirtVm *vm);
void      box_libvirt_set_agent     (BoxLibvirtPlugin *self, BoxLibvirtVm *vm,
                                     BoxAgent *agent);

/* Per-VM serialisation: @callback runs (on the main context) once no other
 * job holds @vm; box_libvirt_vm_unlock() lets the next one in. */
void      box_libvirt_vm_lock_async (BoxLibvirtPlugin *self, BoxLibvirtVm *vm,
                                     GAsyncReadyCallback callback, gpointer user_data);
void      box_libvirt_vm_unlock     (BoxLibvirtPlugin *self, BoxLibvirtVm *vm);

/* ---- the guest agent (box-libvirt-guest.c) -------------------------------- */

typedef enum {
  BOX_LIBVIRT_GUEST_TIME     = 1 << 0,   /* set-time */
  BOX_LIBVIRT_GUEST_RANDOM   = 1 << 1,   /* reseed-random */
  BOX_LIBVIRT_GUEST_HOSTNAME = 1 << 2,   /* set-hostname */
  BOX_LIBVIRT_GUEST_NETWORK  = 1 << 3,   /* configure-network */
  BOX_LIBVIRT_GUEST_GROW_FS  = 1 << 4,   /* grow-fs */
  BOX_LIBVIRT_GUEST_ENV      = 1 << 5,   /* set-env */
  BOX_LIBVIRT_GUEST_SYNC     = 1 << 6,   /* sync */
  BOX_LIBVIRT_GUEST_EXEC     = 1 << 7,   /* run `true` (warming up) */
  /* set-env {} with `hold`: the env withheld for a pause or a snapshot
   * (never in one); the agent starts no service until the next set-env */
  BOX_LIBVIRT_GUEST_ENV_HOLD = 1 << 8,
  /* trust-ca with the engine's CA (box_hypervisor_set_guest_ca()); a
   * refusal is logged, not an error */
  BOX_LIBVIRT_GUEST_TRUST_CA = 1 << 9,
} BoxLibvirtGuestSteps;

/* What a warm-pool domain is told while it warms up.  Never set-env: the
 * agent starts the services whose definitions the template's disk holds at
 * its first set-env, so they must wait for the env of the sandbox that
 * takes the domain (its create sends it), not start with the pool's.  The
 * CA every guest trusts, when the engine gave one: the create's own
 * trust-ca then finds its files in place and writes nothing. */
#define BOX_LIBVIRT_POOL_WARM_STEPS \
  (BOX_LIBVIRT_GUEST_TIME | BOX_LIBVIRT_GUEST_RANDOM | BOX_LIBVIRT_GUEST_HOSTNAME | \
   BOX_LIBVIRT_GUEST_EXEC | BOX_LIBVIRT_GUEST_TRUST_CA)

typedef struct {
  BoxPluginContext       *context;      /* makes the agent client */
  const char             *socket_path;
  BoxAgent         *agent;        /* connected already, or NULL to connect */
  BoxLibvirtGuestSteps    steps;
  const char             *hostname;
  const BoxNetAttachment *net;
  GHashTable             *env;
  guint64                 disk_bytes;   /* grow-fs: the size the host gave the disk */
  GBytes                 *ca_pem;       /* trust-ca (NULL: the step is left out) */
  guint                   timeout_s;
} BoxLibvirtGuestSetup;

/* Connects (hello) when needed, then runs the steps (pipelined); the
 * connected client. */
void            box_libvirt_guest_setup_async  (const BoxLibvirtGuestSetup *setup,
                                                GCancellable *cancellable,
                                                GAsyncReadyCallback callback, gpointer user_data);
BoxAgent *box_libvirt_guest_setup_finish (GAsyncResult *result, GError **error);
/* A client on the socket with hello under way (calls may follow at once),
 * for adopting a running VM. */
BoxAgent *box_libvirt_guest_connect_now  (BoxPluginContext *context, const char *socket_path,
                                                GError **error);
/* One request, answered or not within @timeout_s. */
void            box_libvirt_guest_call_async   (BoxAgent *agent, const char *op,
                                                guint timeout_s, GAsyncReadyCallback callback,
                                                gpointer user_data);
gboolean        box_libvirt_guest_call_finish  (GAsyncResult *result, GError **error);

/* ---- templates and the warm pool (box-libvirt-template.c) ------------------ */

struct _BoxLibvirtTemplate {
  BoxLibvirtPlugin *plugin;      /* borrowed: it holds the template */
  char          *key;
  guint          cpus;
  guint          memory_mib;
  gboolean       nic;
  char          *dir;
  gboolean       ready;
  gboolean       building;
  GPtrArray     *waiters;        /* GTask*, waiting for the build */
  GQueue         slots;          /* BoxLibvirtSlot*, restored and paused */
  guint          filling;        /* pool fills under way */
  GList         *in_flight;      /* every fill under way (Fill*, box-libvirt-pool.c) */
  BoxLibvirtPoolDemand demand;   /* recent creates and the pool's target */
  guint64        slot_mib;       /* a pool domain's private memory, measured (0: not yet) */
  guint          refill_source;  /* the next shrink step, or the end of a burst that
                                  * fills wait for (box-libvirt-pool.c), or 0 */
  int            hold_fd;        /* manifest.json under a shared flock while ready, or -1 */
};

typedef struct {
  char               *vm_id;
  char               *net_id;    /* the network attachment's ID until claimed */
  BoxNetAttachment   *net;
  BoxLibvirtTemplate *tmpl;      /* borrowed */
  guint64             disk_bytes;
  gboolean            paused;
  BoxAgent     *agent;     /* connected, warmed up */
} BoxLibvirtSlot;

void      box_libvirt_slot_free        (BoxLibvirtSlot *slot);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxLibvirtSlot, box_libvirt_slot_free)
void      box_libvirt_template_free    (BoxLibvirtTemplate *tmpl);
/* The template snapshot for these sizes (made on first use). */
BoxLibvirtTemplate *box_libvirt_template_get (BoxLibvirtPlugin *self, guint cpus,
                                              guint memory_mib);
/* A restored, paused domain of @tmpl: from the pool, else started now
 * (building the template snapshot first when needed). */
void      box_libvirt_template_take_slot_async  (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl,
                                                 guint64 disk_bytes, GCancellable *cancellable,
                                                 GAsyncReadyCallback callback,
                                                 gpointer user_data);
BoxLibvirtSlot *box_libvirt_template_take_slot_finish (GAsyncResult *result, GError **error);
/* The slot became a sandbox's VM (its pool record goes). */
void      box_libvirt_template_slot_claimed (BoxLibvirtPlugin *self, BoxLibvirtSlot *slot);
/* Ends the slot's domain, removes its files and network (blocking, briefly). */
void      box_libvirt_template_slot_discard (BoxLibvirtPlugin *self, BoxLibvirtSlot *slot);
/* Makes the snapshot in the background when it is missing. */
void      box_libvirt_template_prepare (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl);
/* Brings the pool to its target (box-libvirt-pool-policy.h): fills in the
 * background (waiting while a burst is served from the pool), ends paused
 * domains beyond it, arms the next shrink step or the burst's end. */
void      box_libvirt_template_refill  (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl);
/* The limits (box-libvirt-pool-policy.h) of what holds @own_mib of the
 * pools' memory budget now: the budget and the node's room less what all
 * else in the pools (warm pools, ready forks, standbys) and the VMs hold. */
void      box_libvirt_pools_limits     (BoxLibvirtPlugin *self, guint64 own_mib, guint floor,
                                        guint ceiling, guint64 slot_mib,
                                        BoxLibvirtPoolLimits *limits);
/* Whether the pools' memory budget (warm pools, ready forks, standby
 * domains: box_libvirt_templates_count()) and the node's memory capacity
 * have room for @mib more. */
gboolean  box_libvirt_pools_room_for   (BoxLibvirtPlugin *self, guint64 mib);
/* The pools' state for the status: targets, domains, their memory (MiB). */
void      box_libvirt_templates_count  (BoxLibvirtPlugin *self, guint *target, guint *ready,
                                        guint *filling, guint64 *memory_mib);
/* Ends every pool domain (at stop) and removes the leftovers of a previous run. */
void      box_libvirt_templates_drain  (BoxLibvirtPlugin *self);
void      box_libvirt_templates_sweep  (BoxLibvirtPlugin *self);
/* Removes the template snapshots of other inputs (an earlier image, QEMU,
 * accelerator or recipe) that no disk under <vm_dir>/vms backs onto and no
 * boxd holds; returns how many. */
guint     box_libvirt_templates_prune  (BoxLibvirtPlugin *self);
/* "ready", "building" or "absent", for the log and status */
const char *box_libvirt_template_describe (BoxLibvirtTemplate *tmpl);

/* between box-libvirt-template.c and box-libvirt-pool.c */
#define BOX_LIBVIRT_POOL_NET_PREFIX "pool-"
/* <state dir>/pool/<vm id> while a pool or build domain exists */
void      box_libvirt_pool_record_add    (BoxLibvirtPlugin *self, const char *vm_id);
void      box_libvirt_pool_record_remove (BoxLibvirtPlugin *self, const char *vm_id);
void      box_libvirt_template_spec      (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl,
                                          BoxLibvirtDomainSpec *spec);
/* 0711: QEMU's user reaches the files, nobody lists them */
gboolean  box_libvirt_make_vm_dir        (const char *path, GError **error);
/* chown uid:qemu_gid, 0600 */
gboolean  box_libvirt_give_to_qemu       (BoxLibvirtPlugin *self, const char *path, guint uid,
                                          GError **error);
/* Claims @dir for a new VM (box_libvirt_vm_dir_claim with the plugin's range). */
gboolean  box_libvirt_claim_vm_dir       (BoxLibvirtPlugin *self, const char *dir, guint *uid,
                                          GError **error);
/* The uid of the VM in @dir: the one recorded, else qemu_user's (a VM made
 * before uid_range existed). */
guint     box_libvirt_vm_uid             (BoxLibvirtPlugin *self, const char *dir);
void      box_libvirt_template_build     (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl);
/* A fork of @tmpl for @waiter (a take_slot task, taken) or the pool; its
 * disk has @disk_bytes (0: the template's default size). */
void      box_libvirt_pool_fill          (BoxLibvirtPlugin *self, BoxLibvirtTemplate *tmpl,
                                          GTask *waiter, guint64 disk_bytes);

/* ---- checkpoints (box-libvirt-checkpoint.c) -------------------------------- */

/* [A-Za-z0-9_-], 1 to 64 characters: part of a file name */
gboolean  box_libvirt_checkpoint_id_is_valid (const char *id);
/* <vm_dir>/checkpoints/<sandbox>.<checkpoint>: disk.qcow2, state (memory), manifest.json */
char     *box_libvirt_checkpoint_dir         (BoxLibvirtPlugin *self, const char *sandbox_id,
                                              const char *checkpoint_id);
/* What a checkpoint was taken of (its manifest). */
typedef struct {
  gboolean      memory;
  gboolean      ram;            /* materialised: ram and devstate (box-libvirt-materialise.c) */
  BoxResources  resources;
  gboolean      nic;
  char         *template_key;
  gint64        created_at;
} BoxLibvirtCheckpointInfo;
void      box_libvirt_checkpoint_info_clear  (BoxLibvirtCheckpointInfo *info);
/* BOX_ERROR_NOT_FOUND when there is no such checkpoint */
gboolean  box_libvirt_checkpoint_info_load   (BoxLibvirtPlugin *self, const char *sandbox_id,
                                              const char *checkpoint_id,
                                              BoxLibvirtCheckpointInfo *info, GError **error);
/* ---- file steps (box-libvirt-files.c) ---- */

/* FALSE, with @error "@what @path: <errno text>" (BOX_ERROR_CAPACITY for
 * ENOSPC and EDQUOT). */
gboolean  box_libvirt_errno_error            (GError **error, int saved_errno, const char *what,
                                              const char *path);
/* Worker threads.  Copies the data of @src to a new file @dst (holes stay
 * holes: SEEK_DATA/SEEK_HOLE and copy_file_range), synced; a full disk is
 * BOX_ERROR_CAPACITY and leaves no @dst. */
gboolean  box_libvirt_copy_sparse            (const char *src, const char *dst, GError **error);
/* TRUE when a memory checkpoint of a running guest copies its RAM while it
 * runs (KVM); FALSE: the vCPUs stop for the whole copy (TCG, whose dirty
 * tracking loses writes in QEMU < 9.0: box-libvirt-checkpoint.c). */
gboolean  box_libvirt_live_ram_copy          (BoxLibvirtPlugin *self, virDomainPtr dom);
/* BOX_ERROR_CAPACITY unless @bytes (and a reserve) fit on vm_dir's file system. */
gboolean  box_libvirt_check_disk_room        (BoxLibvirtPlugin *self, guint64 bytes,
                                              GError **error);
/* @contents into @path, 0600, synced and renamed into place. */
gboolean  box_libvirt_write_file             (const char *path, const char *contents,
                                              GError **error);
void      box_libvirt_note_disk_full         (BoxLibvirtPlugin *self, GError **error);
/* Worker threads.  BOX_ERROR_CAPACITY when the guest of @domain met a full
 * disk (QEMU stopped it on a write that found no room) or the node's disk
 * is full now: what a guest that stopped answering may have met. */
gboolean  box_libvirt_check_guest_disk       (BoxLibvirtPlugin *self, const char *domain,
                                              GError **error);
/* link(2) of @from as @to, whatever @to was; BOX_ERROR_CAPACITY when full. */
gboolean  box_libvirt_link_file              (const char *from, const char *to, GError **error);
/* rename(2), and @from unlinked when both were links of one file. */
gboolean  box_libvirt_rename_file            (const char *from, const char *to, GError **error);
/* Bytes a file really takes on disk (0 when absent). */
guint64   box_libvirt_file_allocated         (const char *path);
/* fsync(2) of the directory at @path (its new names), best effort. */
gboolean  box_libvirt_fsync_dir              (const char *path);
/* Worker threads.  Removes every checkpoint of @sandbox_id. */
gboolean  box_libvirt_checkpoints_remove_all (BoxLibvirtPlugin *self, const char *sandbox_id,
                                              GError **error);
/* At start: removes what a checkpoint, restore or fork killed midway left
 * (temporary directories nobody holds); how many. */
guint     box_libvirt_checkpoints_sweep      (BoxLibvirtPlugin *self);
/* At start: removes the temporary files a killed operation left in @vm's directory. */
void      box_libvirt_vm_sweep_temps         (BoxLibvirtPlugin *self, BoxLibvirtVm *vm);
/* The IDs of the whole checkpoints of @sandbox_id (box-libvirt-checkpoint-list.c). */
char    **box_libvirt_checkpoints_list       (BoxLibvirtPlugin *self, const char *sandbox_id,
                                              GError **error);

/* ---- memory checkpoints made template-like (box-libvirt-materialise.c) --- */

typedef struct _BoxLibvirtMaterialise BoxLibvirtMaterialise;
/* Queues a background job that gives the memory checkpoint a RAM file and
 * its device state alone; one job runs at a time. */
void      box_libvirt_materialise_queue (BoxLibvirtPlugin *self, const char *sandbox_id,
                                         const char *checkpoint_id);
/* Starts the queued jobs (after start); ends the queue and the job (at stop). */
void      box_libvirt_materialise_kick  (BoxLibvirtPlugin *self);
void      box_libvirt_materialise_stop  (BoxLibvirtPlugin *self);
/* Forks made ready in advance (box-libvirt-ready.c).  _want: @checkpoint_id
 * (just materialised) is now @sandbox_id's newest, its forks are made when
 * nothing else runs (_kick: operations ended); _forget: the checkpoint
 * (NULL: any of the sandbox's) is gone; _drain at stop; _mib what they
 * hold; _count made and being made; _vm_id the @nth made of the
 * checkpoint (0: the next one taken) and _sizes how many of the sandbox's
 * are made and wanted (tests). */
typedef struct _BoxLibvirtReadySet BoxLibvirtReadySet;
void        box_libvirt_ready_set_free (BoxLibvirtReadySet *set);
void        box_libvirt_ready_want    (BoxLibvirtPlugin *self, const char *sandbox_id,
                                       const char *checkpoint_id);
void        box_libvirt_ready_kick    (BoxLibvirtPlugin *self);
void        box_libvirt_ready_forget  (BoxLibvirtPlugin *self, const char *sandbox_id,
                                       const char *checkpoint_id);
void        box_libvirt_readies_drain (BoxLibvirtPlugin *self);
guint64     box_libvirt_readies_mib   (BoxLibvirtPlugin *self);
void        box_libvirt_readies_count (BoxLibvirtPlugin *self, guint *ready, guint *making);
const char *box_libvirt_ready_vm_id   (BoxLibvirtPlugin *self, const char *sandbox_id,
                                       const char *checkpoint_id, guint nth);
void        box_libvirt_ready_sizes   (BoxLibvirtPlugin *self, const char *sandbox_id,
                                       guint *made, guint *target);

/* Standby domains for cold wakes (box-libvirt-standby.c).  _want: @vm
 * turned cold (or was found cold at start), its standby is made when
 * nothing else runs (_kick: operations ended); _drain at stop; _count and
 * _mib: those made and being made. */
void        box_libvirt_standby_want   (BoxLibvirtPlugin *self, BoxLibvirtVm *vm);
void        box_libvirt_standby_kick   (BoxLibvirtPlugin *self);
void        box_libvirt_standbys_drain (BoxLibvirtPlugin *self);
guint       box_libvirt_standbys_count (BoxLibvirtPlugin *self);
guint64     box_libvirt_standbys_mib   (BoxLibvirtPlugin *self);

/* A VM's RAM mapping faulted in ahead of its next save
 * (box-libvirt-fault-in.c).  _want: @vm was restored or
 * disk-checkpointed, and runs; it is done when nothing else runs (_kick:
 * operations ended); _drain at stop.  _done: how many jobs ended (also
 * those that gave way to an operation, counted in *@yields), *@busy
 * whether one runs or waits (tests). */
void        box_libvirt_fault_in_want  (BoxLibvirtPlugin *self, BoxLibvirtVm *vm);
void        box_libvirt_fault_in_kick  (BoxLibvirtPlugin *self);
void        box_libvirt_fault_ins_drain (BoxLibvirtPlugin *self);
guint       box_libvirt_fault_ins_done (BoxLibvirtPlugin *self, gboolean *busy,
                                        guint *yields);

/* The VM ID of the helper domain while @checkpoint_id of @sandbox_id is
 * materialised, else NULL (tests). */
const char *box_libvirt_materialise_helper (BoxLibvirtPlugin *self, const char *sandbox_id,
                                            const char *checkpoint_id);
/* At start, for the whole checkpoint in @ckpt of one of this boxd's
 * sandboxes (another boxd's sharing vm_dir are left alone): removes what a
 * job killed midway left (*.tmp; ram and devstate without "ram" in the
 * manifest) and queues a memory checkpoint that is not materialised. */
void      box_libvirt_materialise_sweep (BoxLibvirtPlugin *self, const char *ckpt,
                                         const char *sandbox_id, const char *checkpoint_id);
/* Worker threads: "ram": true in the manifest in @dir. */
gboolean  box_libvirt_checkpoint_manifest_set_ram (const char *dir, GError **error);

/* ---- checkpoint disks as backing files (box-libvirt-layers.c) ------------ */

/* How deep a chain of checkpoints of forks may be. */
#define BOX_LIBVIRT_LAYERS_MAX 64
/* How deep disk snapshots (box-libvirt-snapshot.c) make a running VM's
 * chain at most: beyond, a disk-only checkpoint copies the overlay. */
#define BOX_LIBVIRT_SNAPSHOT_HEIGHT 16
/* The backing file name in a qcow2 header, or NULL. */
char     *box_libvirt_qcow2_backing          (const char *path);
/* N when @disk backs onto "layer-N.qcow2", else 0 (the template's disk). */
guint     box_libvirt_layer_height           (const char *disk);
/* The virtual size of the qcow2 image at @path in bytes, 0 when it is none. */
guint64   box_libvirt_qcow2_size             (const char *path);
/* Hard-links layer-1 .. layer-@height of @from_dir into @to_dir (each new
 * name with @suffix, when not NULL). */
gboolean  box_libvirt_layers_link            (const char *from_dir, const char *to_dir,
                                              guint height, const char *suffix, GError **error);
/* @overlay: a new qcow2 image in @dir backing onto @disk (a checkpoint's),
 * which is linked into @dir as its top layer with the layers under it
 * (their names with @suffix: renamed into place by the caller). */
gboolean  box_libvirt_layers_overlay         (const char *disk, const char *dir,
                                              const char *overlay, const char *suffix,
                                              GError **error);
/* @overlay: a new, empty qcow2 image of @size bytes backing onto
 * "layer-@n.qcow2" (resolved where it is opened). */
gboolean  box_libvirt_layers_new_overlay     (const char *overlay, guint n, guint64 size,
                                              GError **error);
/* Removes the layers of @dir above @height (and any temporary ones). */
void      box_libvirt_layers_trim            (const char *dir, guint height);
/* Grants read on every layer to exactly the uids of the VM directories
 * under @vm_dir that link it (@fallback_uid for a directory that records
 * none; 0: nobody), as POSIX ACLs, under <vm_dir>/layers.lock. */
gboolean  box_libvirt_layers_sync            (const char *vm_dir, guint fallback_uid,
                                              GError **error);

/* ---- disk-only checkpoints of a running QEMU (box-libvirt-snapshot.c) ---- */

/* Whether the VM directory's chain has room for one more layer made by a
 * disk snapshot (BOX_LIBVIRT_SNAPSHOT_HEIGHT). */
gboolean  box_libvirt_disk_snapshot_fits     (const char *vm_dir);
/* At start, with the VM's domain when its QEMU runs (else NULL): finishes
 * or undoes a disk snapshot a killed boxd cut midway. */
gboolean  box_libvirt_disk_snapshot_recover  (BoxLibvirtPlugin *self, BoxLibvirtVm *vm,
                                              virDomainPtr dom, GError **error);

/* ---- operations (box-libvirt-ops.c) --------------------------------------- */

void      box_libvirt_op_async         (BoxLibvirtPlugin *self, BoxVmOp op,
                                        const BoxVmRequest *request, GCancellable *cancellable,
                                        GAsyncReadyCallback callback, gpointer user_data);
gboolean  box_libvirt_op_finish        (BoxLibvirtPlugin *self, GAsyncResult *result,
                                        GError **error);
/* A domain stopped on its own: the VM is lost (::vm-lost). */
void      box_libvirt_vm_stopped       (BoxLibvirtPlugin *self, BoxLibvirtVm *vm);
/* Hot pause -> cold snapshot, in the background. */
void      box_libvirt_vm_make_cold     (BoxLibvirtPlugin *self, BoxLibvirtVm *vm);
/* Adopts what a previous run left (state files and libvirt's domains). */
void      box_libvirt_adopt            (BoxLibvirtPlugin *self);

G_END_DECLS
