/* box-libvirt-fault-in.c: a VM's RAM mapping faulted in ahead of its next save.
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
 * budgets count, box_libvirt_qemu_rss_mib()).
 *
 * Under TCG a second cost comes first in such a save: QEMU's first sync
 * of the migration dirty bitmap.  A VM's RAM block is 8 KiB more than a
 * multiple of 256 KiB under TCG (box-libvirt-ram.c), which QEMU syncs page
 * by page, resetting every vCPU's TLB entries for each dirty page, and in
 * a QEMU just started every page is dirty: ~1 s for 2 GiB, with QEMU's big
 * lock held (the guest stalls).  So once the pages are mapped and the
 * guest is idle (its QEMU under IDLE_CPU_PERCENT of a CPU), the job also
 * settles the bitmap: a migration to /dev/null, cancelled once its set-up
 * (that first sync) is over (box_libvirt_migrate_settle()); the next
 * save's first sync finds only what the guest wrote since.  An idle guest
 * does not notice the stall; a busy one makes the job wait (IDLE_WAIT_S
 * at most, then no settle).
 *
 * One VM at a time, a job under the VM's lock on a worker at SCHED_IDLE
 * and nice 19, only while no operation of the engine runs: it stops when
 * one starts (the VM goes back to the head of the queue; pages already
 * mapped cost next to nothing the second time), when the QEMU ends, and
 * at stop; a settle under way ends (cancelled) before the operation goes
 * on.  A memory checkpoint of a running VM needs none after it: its save
 * read every page and synced the bitmap.  [plugin.libvirt]
 * ram_fault_in=false: never.
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

/* the guest counts as idle while its QEMU takes less than this much of a
 * CPU (an idle TCG guest: ~1 %), sampled over IDLE_SAMPLE_MS */
#define IDLE_CPU_PERCENT 10
#define IDLE_SAMPLE_MS   500
/* a settle waits this long at most for an idle guest, then gives up */
#define IDLE_WAIT_S      30

typedef struct {
  BoxLibvirtOp *op;
  guint64  pages;       /* faulted in */
  guint    mappings;    /* RAM mappings found (0: RAM not from a file) */
  gboolean complete;    /* every page of every RAM mapping read */
  gboolean yielded;     /* stopped for an operation, to go again */
  gboolean settled;     /* the dirty bitmap settled (box_libvirt_migrate_settle()) */
  gint64   settle_us;
} FaultIn;

/* The private, writable, file-backed mappings of @pid at least @min_bytes
 * long (QEMU's RAM block over the RAM file), as address pairs; NULL when
 * it is gone. */
static GArray *
ram_mappings (int pid, guint64 min_bytes)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/maps", pid);
  g_autofree char *maps = NULL;
  g_auto(GStrv) lines = NULL;
  GArray *ranges = g_array_new (FALSE, FALSE, sizeof (guint64));

  if (!g_file_get_contents (path, &maps, NULL, NULL)) {
    g_array_unref (ranges);
    return NULL;
  }
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

/* Reads a byte of each page of @ranges in @pid until done, an operation
 * starts (job->yielded) or the QEMU ends (@pidfd). */
static void
read_pages (BoxLibvirtPlugin *self, FaultIn *job, pid_t pid, int pidfd, GArray *ranges)
{
  char sink[BATCH_PAGES];
  struct iovec local[BATCH_PAGES], remote[BATCH_PAGES];

  for (guint i = 0; i < BATCH_PAGES; i++) {
    local[i].iov_base = sink + i;
    local[i].iov_len = 1;
    remote[i].iov_len = 1;
  }
  for (guint r = 0; r + 1 < ranges->len; r += 2) {
    guint64 addr = g_array_index (ranges, guint64, r);
    guint64 hi = g_array_index (ranges, guint64, r + 1);

    while (addr < hi) {
      struct pollfd exited = { .fd = pidfd, .events = POLLIN };
      guint n = (guint) MIN ((hi - addr) / PAGE_BYTES, BATCH_PAGES);
      ssize_t got;

      if (should_yield (self)) {
        job->yielded = TRUE;
        return;
      }
      if (n == 0)
        break;
      /* gone, or unmapped: it ends */
      if (poll (&exited, 1, 0) != 0)
        return;
      for (guint i = 0; i < n; i++)
        remote[i].iov_base = GSIZE_TO_POINTER (addr + (guint64) i * PAGE_BYTES);
      got = process_vm_readv (pid, local, n, remote, n, 0);
      if (got <= 0)
        return;
      job->pages += (guint64) got;
      addr += (guint64) got * PAGE_BYTES;
    }
  }
  job->complete = TRUE;
}

/* The CPU time @pid used so far, in clock ticks; -1 when it is gone. */
static gint64
cpu_ticks (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree char *stat = NULL;
  g_auto(GStrv) fields = NULL;
  const char *after;

  if (!g_file_get_contents (path, &stat, NULL, NULL) || (after = strrchr (stat, ')')) == NULL)
    return -1;
  /* after the command: state (3) ... utime (14), stime (15) */
  fields = g_strsplit (after + 2, " ", 16);
  if (g_strv_length (fields) < 14)
    return -1;
  return g_ascii_strtoll (fields[11], NULL, 10) + g_ascii_strtoll (fields[12], NULL, 10);
}

/* Until the guest is idle (TRUE), an operation starts (job->yielded), the
 * QEMU ends or IDLE_WAIT_S pass. */
static gboolean
wait_idle (BoxLibvirtPlugin *self, FaultIn *job, pid_t pid)
{
  gint64 ticks_per_s = sysconf (_SC_CLK_TCK);
  gint64 before = cpu_ticks (pid);

  for (guint i = 0; i < IDLE_WAIT_S * 1000 / IDLE_SAMPLE_MS && before >= 0; i++) {
    gint64 after;

    g_usleep (IDLE_SAMPLE_MS * 1000);
    if (should_yield (self)) {
      job->yielded = TRUE;
      return FALSE;
    }
    after = cpu_ticks (pid);
    if (after < 0)
      return FALSE;
    if ((after - before) * 1000 * 100 < IDLE_CPU_PERCENT * ticks_per_s * IDLE_SAMPLE_MS)
      return TRUE;
    before = after;
  }
  return FALSE;
}

/* Worker, under the VM's lock: the fault-in, then (TCG, a RAM block
 * pre-copied) the settle of the dirty bitmap once the guest is idle. */
static gboolean
fault_in_work (BoxLibvirtPlugin *self, gpointer data, GError **error)
{
  FaultIn *job = data;
  BoxLibvirtOp *op = job->op;
  const struct sched_param idle = { 0 };
  const pid_t tid = (pid_t) syscall (SYS_gettid);
  int policy = sched_getscheduler (tid);
  struct sched_param param = { 0 };
  int nice_was = getpriority (PRIO_PROCESS, (id_t) tid);
  g_autoptr(GArray) ranges = NULL;
  pid_t pid = box_libvirt_domain_qemu_pid (op->domain);
  virConnectPtr conn;
  virDomainPtr dom;
  gboolean ok = TRUE;
  int pidfd;

  if (pid == 0)
    return TRUE;                        /* no QEMU any more: nothing to do */
  pidfd = pidfd_open (pid, 0);
  if (pidfd < 0)
    return TRUE;
  /* its pid is this QEMU's for as long as pidfd says it runs */
  ranges = ram_mappings (pid, (guint64) op->resources.memory_mib << 20);
  if (ranges == NULL) {
    close (pidfd);
    return TRUE;                        /* gone meanwhile */
  }
  job->mappings = ranges->len / 2;
  sched_getparam (tid, &param);
  sched_setscheduler (tid, SCHED_IDLE, &idle);
  setpriority (PRIO_PROCESS, (id_t) tid, 19);
  read_pages (self, job, pid, pidfd, ranges);
  if (!job->yielded && g_strcmp0 (self->accel, "tcg") == 0 && wait_idle (self, job, pid)) {
    conn = box_libvirt_conn_get (self->conn, error);
    dom = conn != NULL ? box_libvirt_domain_lookup (conn, op->domain) : NULL;
    if (dom != NULL && box_libvirt_live_ram_copy (self, dom)) {
      gint64 t0 = g_get_monotonic_time ();

      ok = box_libvirt_migrate_settle (dom, error);
      job->settled = ok;
      job->settle_us = g_get_monotonic_time () - t0;
    }
    if (dom != NULL)
      virDomainFree (dom);
    if (conn != NULL)
      virConnectClose (conn);
    else
      ok = FALSE;
  }
  sched_setscheduler (tid, policy, &param);
  setpriority (PRIO_PROCESS, (id_t) tid, nice_was);
  close (pidfd);
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

  /* (a QEMU that ended meanwhile, say: nothing to act on, hence no warning) */
  if (!box_libvirt_run_finish (result, &error))
    g_message ("libvirt: sandbox %s: RAM fault-in or settle failed: %s", op->id,
               error->message);
  else if (job->yielded && self->started)
    g_queue_push_head (&self->fault_in_queue, g_strdup (op->id));
  else if (job->complete && job->mappings > 0)
    g_debug ("libvirt: sandbox %s: RAM faulted in: %" G_GUINT64_FORMAT " MiB in %.1f ms%s",
             op->id, job->pages * PAGE_BYTES >> 20,
             (g_get_monotonic_time () - op->started) / 1e3,
             job->settled ? ", dirty bitmap settled" : "");
  if (job->settled)
    g_debug ("libvirt: sandbox %s: dirty bitmap settled in %.1f ms", op->id,
             job->settle_us / 1e3);
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
    if (g_queue_find_custom (&self->fault_in_queue, op->id, (GCompareFunc) g_strcmp0) == NULL)
      g_queue_push_head (&self->fault_in_queue, g_strdup (op->id));
    box_libvirt_op_return (task, NULL);
    return;
  }
  job = g_new0 (FaultIn, 1);
  job->op = op;
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
  if (!self->config.ram_fault_in ||
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
box_libvirt_fault_ins_done (BoxLibvirtPlugin *self, gboolean *busy)
{
  if (busy != NULL)
    *busy = self->fault_in_running || !g_queue_is_empty (&self->fault_in_queue);
  return self->fault_ins_done;
}
