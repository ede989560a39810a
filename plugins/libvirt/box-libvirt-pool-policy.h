/* box-libvirt-pool-policy.h: how many warm domains a template's pool keeps.
 *
 * Pure bookkeeping, no I/O (times are the caller's, monotonic µs), so the
 * policy is unit-tested on made-up histories (libvirt-pool-policy-test.c).
 *
 * The target is at least the floor (pool_size).  It grows to the demand,
 * the creates of the last window (pool_idle_s, at most 60 s), and by one
 * for each create that found the pool empty (the pool was one short of the
 * rate it refills at).  After pool_idle_s without a create it shrinks
 * by one domain per step (a tenth of pool_idle_s, at least 1 s) back to the
 * floor.  It never exceeds the cap: the memory budget and the room the
 * node's capacity leaves, each divided by one pool domain's measured cost,
 * and pool_max_size; the floor wins over the cap (it is the configured
 * minimum, as before the pool grew).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* creates remembered per template: the demand counts no further */
#define BOX_LIBVIRT_POOL_HISTORY 64
/* the demand window's longest */
#define BOX_LIBVIRT_POOL_WINDOW_MAX_US (60 * G_USEC_PER_SEC)

typedef struct {
  guint   floor;        /* pool_size */
  guint   ceiling;      /* pool_max_size, >= floor */
  guint64 budget_mib;   /* what this pool may hold (pool_memory_mib less other pools') */
  guint64 room_mib;     /* what the node's capacity leaves to it */
  guint64 slot_mib;     /* one pool domain's private memory (0: unknown, taken as 1) */
  gint64  idle_us;      /* pool_idle_s: no create for this long, and the pool shrinks */
} BoxLibvirtPoolLimits;

typedef struct {
  gint64   at[BOX_LIBVIRT_POOL_HISTORY];       /* create times, a ring */
  guint    head;                               /* the next entry written */
  guint    count;
  guint    misses;                             /* creates that found the pool empty, since
                                                * the last box_libvirt_pool_target() */
  gint64   last_create;                        /* 0: none yet */
  gint64   last_shrink;
  guint    target;
} BoxLibvirtPoolDemand;

void   box_libvirt_pool_demand_init  (BoxLibvirtPoolDemand *demand, guint floor);
/* A create at @now; @missed: it found no pool domain to take. */
void   box_libvirt_pool_demand_note  (BoxLibvirtPoolDemand *demand, gint64 now, gboolean missed);
/* Creates of the window ending at @now. */
guint  box_libvirt_pool_demand_count (const BoxLibvirtPoolDemand *demand,
                                      const BoxLibvirtPoolLimits *limits, gint64 now);
/* The most pool domains the limits allow (never under the floor). */
guint  box_libvirt_pool_cap          (const BoxLibvirtPoolLimits *limits);
/* Updates and returns the target at @now: grown to the demand at once,
 * shrunk by at most one per call and per step once idle, within the cap. */
guint  box_libvirt_pool_target       (BoxLibvirtPoolDemand *demand,
                                      const BoxLibvirtPoolLimits *limits, gint64 now);
/* One shrink step. */
gint64 box_libvirt_pool_step_us      (const BoxLibvirtPoolLimits *limits);
/* When the target may next shrink (monotonic µs), 0 when it is at the floor. */
gint64 box_libvirt_pool_next_shrink  (const BoxLibvirtPoolDemand *demand,
                                      const BoxLibvirtPoolLimits *limits);

G_END_DECLS
