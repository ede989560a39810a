/* box-libvirt-fault-in.c: a restored VM readied for its next save (its RAM
 * mapping faulted in, its dirty bitmap settled).
 *
 * A VM created from the template, forked from a materialised checkpoint or
 * restored to one maps a sparse RAM file privately (box-libvirt-start.c):
 * the pages its guest never touched are not in its QEMU's page tables.  A
 * memory checkpoint, and the automatic one a restore takes first, makes
 * QEMU read every page of the block to find those that are not zero, and
 * through such a mapping each untouched page is a fault into the file's
 * page cache, where anonymous RAM would give the zero page: 2 GiB of them
 * made a full save ~2.3x slower on this TCG host (bench/ram-save-floor,
 * doc/PERFORMANCE.md).  A sandbox that restores is likely to restore again
 * (each restore first saves the VM as an automatic checkpoint), so after a
 * restore, and after a disk-only checkpoint of a running VM (a restore may
 * follow), the plugin makes those faults itself, in the background:
 * one byte of every page of the mapping read with process_vm_readv(),
 * which maps each page into QEMU's page tables as QEMU's own read would.
 * Nothing in the guest changes: an untouched page stays the page cache's
 * until the guest writes it (copy-on-write as before).  The pages are the
 * shared page cache of the RAM file, not QEMU's private memory (what the
 * budgets count, box_libvirt_qemu_rss_mib()).  This needs boxd to see and
 * read the QEMU (root, CAP_SYS_PTRACE); under boxd.service, which hides
 * other users' processes (ProtectProc=invisible) and grants no ptrace, it
 * is skipped and the settle below runs alone.
 *
 * Under TCG a second cost comes first in such a save: QEMU's first sync
 * of the migration dirty bitmap.  A VM's RAM block is 8 KiB more than a
 * multiple of 256 KiB under TCG (box-libvirt-ram.c), which QEMU syncs page
 * by page, resetting every vCPU's TLB entries for each dirty page, and in
 * a QEMU just started every page is dirty: ~1 s for 2 GiB, with QEMU's big
 * lock held (the guest stalls).  So once the pages are mapped and the
 * guest is idle (its domain under IDLE_CPU_PERCENT of a CPU, libvirt's
 * CPU time), the job also settles the bitmap: a migration to /dev/null,
 * cancelled once its set-up (that first sync) is over
 * (box_libvirt_migrate_settle()); the next save's first sync then finds
 * only the pages written since dirty, a fraction for an idle guest.  An
 * idle guest does not notice the stall; a busy one makes the job wait
 * (IDLE_WAIT_S at most, then no settle).  Anything that needs QEMU's big
 * lock meanwhile (an operation, the agent's traffic) waits for the set-up.
 *
 * One VM at a time, a job under the VM's lock, only while no operation of
 * the engine runs: it stops when one starts (within YIELD_CHECK_MS; the
 * VM goes back to the head of the queue, and pages already mapped cost
 * next to nothing the second time), when the QEMU ends, and at stop.  The
 * pages are read on a thread of its own at SCHED_IDLE and nice 19.  A
 * memory checkpoint of a running VM needs none after it: its save read
 * every page and synced the bitmap.  VMs adopted at a start are not
 * queued.  [plugin.libvirt] ram_fault_in=false: never.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* SCHED_IDLE, process_vm_readv() */
#endif
#include "config.h"

#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "box-libvirt-op.h"

#define PAGE_BYTES  4096
/* remote pages per process_vm_readv() (IOV_MAX) */
#define BATCH_PAGES 1024

/* the guest counts as idle while its domain takes less than this much of a
 * CPU (an idle TCG guest: ~1 %), sampled over IDLE_SAMPLE_MS */
#define IDLE_CPU_PERCENT 10
#define IDLE_SAMPLE_MS   500
/* how often a wait looks for an operation to yield to */
#define YIELD_CHECK_MS   20
/* a settle waits this long at most for an idle guest, then gives up */
#define IDLE_WAIT_S      30

typedef struct {
  BoxLibvirtOp *op;
  pid_t    pid;         /* the QEMU (0: not visible to boxd) */
  int      pidfd;
  GArray  *ranges;
  guint64  pages;       /* faulted in */
  gboolean complete;    /* every page of every RAM mapping read */
  gboolean yielded;     /* stopped for an operation, to go again */
  gboolean settled;     /* the dirty bitmap settled (box_libvirt_migrate_settle()) */
  const char *no_settle; /* why not, for the log */
  gint64   settle_us;
} FaultIn;

/* The private, writable, file-backed mappings of @pid at least @min_bytes
 * long (QEMU's RAM block over the RAM file), as address pairs; NULL when
 * they cannot be read (gone, or hidden from boxd). */
static GArray *
ram_mappings (int pid, guint64 min_bytes)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/maps", pid);
  g_autofree char *maps = NULL;
  g_auto(GStrv) lines = NULL;
  GArray *ranges;

  if (!g_file_get_contents (path, &maps, NULL, NULL))
    return NULL;
  ranges = g_array_new (FALSE, FALSE, sizeof (guint64));
  lines = g_strsplit (maps, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    guint64 lo, hi, inode;
    char perms[5];

    /* "lo-hi perms offset dev inode path" */
    if (sscanf (lines[i], "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x %4s %*x %*s %"
                G_GINT64_MODIFIER "u", &lo, &hi, perms, &inode) != 4)
      continue;
    if (inode == 0 || strchr (lines[i], '/') == NULL || hi <= lo || hi - lo < min_bytes ||
        perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p')
      continue;
    g_array_append_val (ranges, lo);
    g_array_append_val (ranges, hi);
  }
  return ranges;
}

/* Any operation of the engine (a pause waits for this VM's lock), and the
 * plugin's stop. */
static gboolean
should_yield (BoxLibvirtPlugin *self)
{
  return g_atomic_int_get (&self->engine_ops) > 0 ||
         g_cancellable_is_cancelled (self->cancellable);
}

/* Sleeps @ms, looking for an operation to yield to; FALSE (job->yielded)
 * when one came. */
static gboolean
nap (BoxLibvirtPlugin *self, FaultIn *job, guint ms)
{
  for (guint slept = 0; slept < ms; slept += YIELD_CHECK_MS) {
    if (should_yield (self)) {
      job->yielded = TRUE;
      return FALSE;
    }
    g_usleep (YIELD_CHECK_MS * 1000);
  }
  job->yielded = should_yield (self);
  return !job->yielded;
}

/* A thread of its own at SCHED_IDLE and nice 19 (they end with it; a
 * pool thread could not always get its priority back): reads a byte of
 * each page of job->ranges until done, an operation starts
 * (job->yielded) or the QEMU ends. */
static gpointer
read_pages (gpointer data)
{
  FaultIn *job = data;
  BoxLibvirtPlugin *self = job->op->self;
  const struct sched_param idle = { 0 };
  const pid_t tid = (pid_t) syscall (SYS_gettid);
  char sink[BATCH_PAGES];
  struct iovec local[BATCH_PAGES], remote[BATCH_PAGES];

  /* (refused under boxd.service's system call filter: it runs at the
   * pool's priority then) */
  sched_setscheduler (tid, SCHED_IDLE, &idle);
  setpriority (PRIO_PROCESS, (id_t) tid, 19);
  for (guint i = 0; i < BATCH_PAGES; i++) {
    local[i].iov_base = sink + i;
    local[i].iov_len = 1;
    remote[i].iov_len = 1;
  }
  for (guint r = 0; r + 1 < job->ranges->len; r += 2) {
    guint64 addr = g_array_index (job->ranges, guint64, r);
    guint64 hi = g_array_index (job->ranges, guint64, r + 1);

    while (addr < hi) {
      struct pollfd exited = { .fd = job->pidfd, .events = POLLIN };
      guint n = (guint) MIN ((hi - addr) / PAGE_BYTES, BATCH_PAGES);
      ssize_t got;

      if (should_yield (self)) {
        job->yielded = TRUE;
        return NULL;
      }
      if (n == 0)
        break;
      /* gone, or not ours to read: it ends */
      if (poll (&exited, 1, 0) != 0)
        return NULL;
      for (guint i = 0; i < n; i++)
        remote[i].iov_base = GSIZE_TO_POINTER (addr + (guint64) i * PAGE_BYTES);
      got = process_vm_readv (job->pid, local, n, remote, n, 0);
      if (got <= 0)
        return NULL;
      job->pages += (guint64) got;
      addr += (guint64) got * PAGE_BYTES;
    }
  }
  job->complete = TRUE;
  return NULL;
}

/* The CPU time the domain used so far (libvirt's figure: boxd may not see
 * QEMU's /proc), ns; -1 when unknown. */
static gint64
cpu_ns (virDomainPtr dom)
{
  virDomainInfo info;

  return virDomainGetInfo (dom, &info) == 0 ? (gint64) info.cpuTime : -1;
}

/* Until the guest is idle (TRUE), an operation starts (job->yielded), the
 * domain ends or IDLE_WAIT_S pass. */
static gboolean
wait_idle (BoxLibvirtPlugin *self, FaultIn *job, virDomainPtr dom)
{
  gint64 deadline = g_get_monotonic_time () + IDLE_WAIT_S * G_USEC_PER_SEC;
  gint64 before = cpu_ns (dom), at = g_get_monotonic_time ();

  job->no_settle = "the domain's CPU time is unknown (gone?)";
  while (before >= 0 && g_get_monotonic_time () < deadline) {
    gint64 after, now;

    if (!nap (self, job, IDLE_SAMPLE_MS))
      return FALSE;
    after = cpu_ns (dom);
    now = g_get_monotonic_time ();
    if (after < 0)
      return FALSE;
    /* used / elapsed (ns / us) under IDLE_CPU_PERCENT % */
    if ((after - before) * 100 < IDLE_CPU_PERCENT * (now - at) * 1000)
      return TRUE;
    before = after;
    at = now;
  }
  if (before >= 0)
    job->no_settle = "the guest was not idle";
  return FALSE;
}

/* Worker, under the VM's lock: the fault-in (when boxd may read the
 * QEMU's memory), then (TCG, a RAM block pre-copied) the settle of the
 * dirty bitmap once the guest is idle. */
static gboolean
fault_in_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  FaultIn *job = data;
  BoxLibvirtOp *op = job->op;
  virConnectPtr conn;
  virDomainPtr dom;
  gboolean ok = TRUE;

  job->pid = box_libvirt_domain_qemu_pid (op->domain);
  job->pidfd = job->pid != 0 ? pidfd_open (job->pid, 0) : -1;
  /* its pid is this QEMU's for as long as pidfd says it runs */
  if (job->pidfd >= 0)
    job->ranges = ram_mappings (job->pid, (guint64) op->resources.memory_mib << 20);
  if (job->ranges != NULL) {
    GThread *reader = g_thread_try_new ("box-fault-in", read_pages, job, error);

    if (reader == NULL)
      ok = FALSE;
    else
      g_thread_join (reader);
  }
  if (job->pidfd >= 0)
    close (job->pidfd);
  g_clear_pointer (&job->ranges, g_array_unref);
  if (!ok || job->yielded)
    return ok;
  if (g_strcmp0 (self->accel, "tcg") != 0) {
    job->no_settle = "not TCG";
    return TRUE;
  }
  conn = box_libvirt_conn_get (self->conn, error);
  if (conn == NULL)
    return FALSE;
  dom = box_libvirt_domain_lookup (conn, op->domain);
  if (dom == NULL)
    job->no_settle = "the domain is gone";
  else if (!box_libvirt_live_ram_copy (self, dom))
    job->no_settle = "its RAM block is copied with the guest stopped";
  else if (wait_idle (self, job, dom)) {
    gint64 t0 = g_get_monotonic_time ();

    ok = box_libvirt_migrate_settle (dom, error);
    job->settled = ok;
    job->settle_us = g_get_monotonic_time () - t0;
  }
  if (dom != NULL)
    virDomainFree (dom);
  virConnectClose (conn);
  return ok;
}

static void fault_in_next (BoxLibvirtPlugin *self);

static void
faulted_in (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  FaultIn *job = g_object_get_data (G_OBJECT (task), "box-fault-in");
  BoxLibvirtOp *op = job->op;
  BoxLibvirtPlugin *self = op->self;
  g_autoptr(GError) error = NULL;
  g_autofree char *settle = NULL;

  /* (a QEMU that ended meanwhile, say: nothing to act on, hence no warning) */
  if (!box_libvirt_run_finish (result, &error)) {
    g_message ("libvirt: sandbox %s: RAM fault-in or settle failed: %s", op->id,
               error->message);
  } else if (job->yielded) {
    self->fault_in_yields++;
    if (self->started)
      g_queue_push_head (&self->fault_in_queue, g_strdup (op->id));
  } else {
    settle = job->settled ? g_strdup_printf ("settled in %.0f ms", job->settle_us / 1e3) :
             g_strdup_printf ("not settled (%s)", job->no_settle);
    g_debug ("libvirt: sandbox %s: RAM faulted in: %" G_GUINT64_FORMAT " MiB%s in %.1f ms, "
             "dirty bitmap %s", op->id, job->pages * PAGE_BYTES >> 20,
             job->pid == 0 ? " (QEMU not visible to boxd)" :
             !job->complete ? " (not all: the QEMU ended or may not be read)" : "",
             (g_get_monotonic_time () - op->started) / 1e3, settle);
  }
  box_libvirt_op_return (task, NULL);
}

/* The job, under the VM's lock (box-libvirt-dispatch.c). */
void
box_libvirt_fault_in_start (GTask *task)
{
  BoxLibvirtOp *op = box_libvirt_task_op (task);
  BoxLibvirtPlugin *self = op->self;
  FaultIn *job;

  if (!self->started || op->vm->cold || op->vm->state != BOX_VM_STATE_RUNNING) {
    box_libvirt_op_return (task, NULL);
    return;
  }
  /* a foreground operation began while this job waited for the lock: it
   * goes first, the fault-in follows when it ends */
  if (g_atomic_int_get (&self->engine_ops) > 0) {
    self->fault_in_yields++;
    if (g_queue_find_custom (&self->fault_in_queue, op->id, (GCompareFunc) g_strcmp0) == NULL)
      g_queue_push_head (&self->fault_in_queue, g_strdup (op->id));
    box_libvirt_op_return (task, NULL);
    return;
  }
  job = g_new0 (FaultIn, 1);
  job->op = op;
  job->pidfd = -1;
  job->no_settle = "";
  g_object_set_data_full (G_OBJECT (task), "box-fault-in", job, g_free);
  box_libvirt_run_in_thread (self, fault_in_work, job, NULL, NULL, faulted_in, task);
}

static void
fault_in_ended (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxLibvirtPlugin *self = BOX_LIBVIRT_PLUGIN (source);

  self->fault_in_running = FALSE;
  self->fault_ins_done++;
  fault_in_next (self);
}

static void
fault_in_next (BoxLibvirtPlugin *self)
{
  while (self->started && !self->fault_in_running && g_atomic_int_get (&self->engine_ops) == 0) {
    g_autofree char *id = g_queue_pop_head (&self->fault_in_queue);
    BoxLibvirtVm *vm;

    if (id == NULL)
      return;
    vm = box_libvirt_lookup_vm (self, id);
    /* a running VM's QEMU; a paused one's mapping is read by its cold save */
    if (vm == NULL || vm->gone || vm->cold || vm->state != BOX_VM_STATE_RUNNING)
      continue;
    self->fault_in_running = TRUE;
    box_libvirt_run_job (self, vm, BOX_LIBVIRT_JOB_FAULT_IN, fault_in_ended, NULL);
  }
}

void
box_libvirt_fault_in_want (BoxLibvirtPlugin *self, BoxLibvirtVm *vm)
{
  if (!self->started || !self->config.ram_fault_in ||
      g_queue_find_custom (&self->fault_in_queue, vm->id, (GCompareFunc) g_strcmp0) != NULL)
    return;
  g_queue_push_tail (&self->fault_in_queue, g_strdup (vm->id));
  fault_in_next (self);
}

void
box_libvirt_fault_in_kick (BoxLibvirtPlugin *self)
{
  fault_in_next (self);
}

void
box_libvirt_fault_ins_drain (BoxLibvirtPlugin *self)
{
  g_queue_clear_full (&self->fault_in_queue, g_free);
}

guint
box_libvirt_fault_ins_done (BoxLibvirtPlugin *self, gboolean *busy, guint *yields)
{
  if (busy != NULL)
    *busy = self->fault_in_running || !g_queue_is_empty (&self->fault_in_queue);
  if (yields != NULL)
    *yields = self->fault_in_yields;
  return self->fault_ins_done;
}
