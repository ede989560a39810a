/* libvirt-pool-policy-test.c: the warm pool's adaptive size on made-up
 * histories (box-libvirt-pool-policy.c: growth, shrink when idle, the
 * memory budget, the node's room and pool_max_size, the floor). */
#include "config.h"

#include "box-libvirt-pool-policy.h"

#define S(x) ((gint64) ((x) * 1e6))
/* monotonic times start anywhere: not at 0 */
#define T0 S (1000)

static BoxLibvirtPoolLimits
limits_default (void)
{
  return (BoxLibvirtPoolLimits) {
    .floor = 2, .ceiling = 32, .budget_mib = 2048, .room_mib = G_MAXUINT64,
    .slot_mib = 64, .idle_us = S (120),
  };
}

static void
test_floor_without_demand (void)
{
  BoxLibvirtPoolLimits limits = limits_default ();
  BoxLibvirtPoolDemand demand;

  box_libvirt_pool_demand_init (&demand, limits.floor);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0), ==, 2);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + S (3600)), ==, 2);
  g_assert_cmpint (box_libvirt_pool_next_shrink (&demand, &limits), ==, 0);
  /* a floor of 0 stays 0 */
  limits.floor = 0;
  box_libvirt_pool_demand_init (&demand, 0);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0), ==, 0);
}

static void
test_growth (void)
{
  BoxLibvirtPoolLimits limits = limits_default ();
  BoxLibvirtPoolDemand demand;
  gint64 now = T0;

  box_libvirt_pool_demand_init (&demand, limits.floor);
  /* a create at a person's pace that found a domain: the floor covers it */
  box_libvirt_pool_demand_note (&demand, now, FALSE);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, now), ==, 2);
  /* a burst of 20 within a second: the first two found domains, the
   * others none; the target follows at once */
  for (guint i = 1; i < 20; i++) {
    now += S (0.05);
    box_libvirt_pool_demand_note (&demand, now, i >= 3);
    box_libvirt_pool_target (&demand, &limits, now);
  }
  /* 20 creates: a pool of 20 serves the next such burst */
  g_assert_cmpuint (box_libvirt_pool_demand_count (&demand, &limits, now), ==, 20);
  g_assert_cmpuint (demand.target, ==, 20);
  /* the window slides: a minute later the old creates no longer count, but
   * the target holds until the pool has been idle for pool_idle_s */
  now += S (61);
  g_assert_cmpuint (box_libvirt_pool_demand_count (&demand, &limits, now), ==, 0);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, now), ==, 20);
  /* pool_max_size caps it */
  limits.ceiling = 8;
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, now), ==, 8);
}

static void
test_growth_by_misses (void)
{
  BoxLibvirtPoolLimits limits = limits_default ();
  BoxLibvirtPoolDemand demand;
  gint64 now = T0;

  /* pool_size 0: the first create finds nothing, and the pool keeps one */
  limits.floor = 0;
  box_libvirt_pool_demand_init (&demand, 0);
  box_libvirt_pool_demand_note (&demand, now, TRUE);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, now), ==, 1);
  /* creates further apart than the window, each finding the pool empty
   * (it refills slower than they come): one more each time */
  for (guint i = 0; i < 3; i++) {
    now += S (61);
    box_libvirt_pool_demand_note (&demand, now, TRUE);
    g_assert_cmpuint (box_libvirt_pool_demand_count (&demand, &limits, now), ==, 1);
    g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, now), ==, 2 + i);
  }
  /* one served from the pool changes nothing */
  now += S (61);
  box_libvirt_pool_demand_note (&demand, now, FALSE);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, now), ==, 4);
  /* misses noted between two looks count all */
  box_libvirt_pool_demand_note (&demand, now + 1, TRUE);
  box_libvirt_pool_demand_note (&demand, now + 2, TRUE);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, now + 3), ==, 6);
}

static void
test_growth_without_misses (void)
{
  BoxLibvirtPoolLimits limits = limits_default ();
  BoxLibvirtPoolDemand demand;
  gint64 now = T0;

  /* steady creates every 5 s, each served: 12 in the window of 60 s */
  box_libvirt_pool_demand_init (&demand, limits.floor);
  for (guint i = 0; i < 30; i++) {
    now += S (5);
    box_libvirt_pool_demand_note (&demand, now, FALSE);
    box_libvirt_pool_target (&demand, &limits, now);
  }
  g_assert_cmpuint (demand.target, ==, 12);
  /* a shorter pool_idle_s is a shorter window */
  limits.idle_us = S (10);
  g_assert_cmpuint (box_libvirt_pool_demand_count (&demand, &limits, now), ==, 2);
}

static void
test_shrink_when_idle (void)
{
  BoxLibvirtPoolLimits limits = limits_default ();
  BoxLibvirtPoolDemand demand;
  gint64 now = T0, last, next;
  guint target = 0;

  box_libvirt_pool_demand_init (&demand, limits.floor);
  for (guint i = 0; i < 8; i++) {
    now += S (0.1);
    box_libvirt_pool_demand_note (&demand, now, FALSE);
  }
  last = now;
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, now), ==, 8);
  /* not before pool_idle_s without a create */
  g_assert_cmpint (box_libvirt_pool_next_shrink (&demand, &limits), ==, last + S (120));
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, last + S (119)), ==, 8);
  /* then one domain per step (a tenth of pool_idle_s), one per call */
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, last + S (120)), ==, 7);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, last + S (120)), ==, 7);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, last + S (131)), ==, 7);
  next = box_libvirt_pool_next_shrink (&demand, &limits);
  g_assert_cmpint (next, ==, last + S (132));
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, next), ==, 6);
  for (now = next; (next = box_libvirt_pool_next_shrink (&demand, &limits)) != 0; now = next)
    target = box_libvirt_pool_target (&demand, &limits, next);
  g_assert_cmpuint (target, ==, 2);
  g_assert_cmpint (now, ==, last + S (120 + 5 * 12));
  /* never under the floor */
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, now + S (3600)), ==, 2);

  /* a create while shrinking starts the idle time again */
  box_libvirt_pool_demand_init (&demand, limits.floor);
  for (guint i = 0; i < 6; i++)
    box_libvirt_pool_demand_note (&demand, T0 + i, FALSE);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + 10), ==, 6);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + S (130)), ==, 5);
  box_libvirt_pool_demand_note (&demand, T0 + S (131), FALSE);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + S (131)), ==, 5);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + S (250)), ==, 5);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + S (251)), ==, 4);

  /* short test-only timings: the step is at least a second */
  limits.idle_us = S (2);
  g_assert_cmpint (box_libvirt_pool_step_us (&limits), ==, S (1));
}

static void
test_budget_cap (void)
{
  BoxLibvirtPoolLimits limits = limits_default ();
  BoxLibvirtPoolDemand demand;

  /* 2048 MiB of budget at 64 MiB a domain: 32; at 256 MiB: 8 */
  limits.ceiling = 64;
  g_assert_cmpuint (box_libvirt_pool_cap (&limits), ==, 32);
  limits.slot_mib = 256;
  g_assert_cmpuint (box_libvirt_pool_cap (&limits), ==, 8);
  box_libvirt_pool_demand_init (&demand, limits.floor);
  for (guint i = 0; i < 20; i++)
    box_libvirt_pool_demand_note (&demand, T0 + i, TRUE);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + 20), ==, 8);
  g_assert_cmpint (box_libvirt_pool_next_shrink (&demand, &limits), ==, T0 + 19 + S (120));
  /* the node's room is the tighter limit */
  limits.room_mib = 1024;
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + 21), ==, 4);
  /* a cost measured lower lets the target grow again to the demand */
  limits.room_mib = G_MAXUINT64;
  limits.slot_mib = 32;
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + 22), ==, 20);
  /* an unknown cost counts as 1 MiB; a budget of 0 leaves the floor */
  limits.slot_mib = 0;
  limits.budget_mib = 0;
  g_assert_cmpuint (box_libvirt_pool_cap (&limits), ==, 2);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + 23), ==, 2);
  /* the floor wins over the budget */
  limits.floor = 5;
  g_assert_cmpuint (box_libvirt_pool_cap (&limits), ==, 5);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + 24), ==, 5);
}

static void
test_history_bound (void)
{
  BoxLibvirtPoolLimits limits = limits_default ();
  BoxLibvirtPoolDemand demand;

  limits.ceiling = 1000;
  limits.budget_mib = G_MAXUINT32;
  box_libvirt_pool_demand_init (&demand, limits.floor);
  for (guint i = 0; i < 1000; i++)
    box_libvirt_pool_demand_note (&demand, T0 + i, FALSE);
  /* only the last BOX_LIBVIRT_POOL_HISTORY creates are remembered */
  g_assert_cmpuint (box_libvirt_pool_demand_count (&demand, &limits, T0 + 1000), ==,
                    BOX_LIBVIRT_POOL_HISTORY);
  g_assert_cmpuint (box_libvirt_pool_target (&demand, &limits, T0 + 1000), ==,
                    BOX_LIBVIRT_POOL_HISTORY);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/libvirt/pool-policy/floor", test_floor_without_demand);
  g_test_add_func ("/libvirt/pool-policy/growth", test_growth);
  g_test_add_func ("/libvirt/pool-policy/growth-without-misses", test_growth_without_misses);
  g_test_add_func ("/libvirt/pool-policy/growth-by-misses", test_growth_by_misses);
  g_test_add_func ("/libvirt/pool-policy/shrink-when-idle", test_shrink_when_idle);
  g_test_add_func ("/libvirt/pool-policy/budget-cap", test_budget_cap);
  g_test_add_func ("/libvirt/pool-policy/history-bound", test_history_bound);
  return g_test_run ();
}
