/* box-libvirt-pool-policy.c: the warm pool's adaptive size (see the header). */
#include "config.h"

#include "box-libvirt-pool-policy.h"

void
box_libvirt_pool_demand_init (BoxLibvirtPoolDemand *demand, guint floor)
{
  *demand = (BoxLibvirtPoolDemand) { .target = floor };
}

void
box_libvirt_pool_demand_note (BoxLibvirtPoolDemand *demand, gint64 now, gboolean missed)
{
  demand->at[demand->head] = now;
  demand->misses += missed ? 1 : 0;
  demand->head = (demand->head + 1) % BOX_LIBVIRT_POOL_HISTORY;
  demand->count = MIN (demand->count + 1, BOX_LIBVIRT_POOL_HISTORY);
  demand->last_create = now;
}

static gint64
window_us (const BoxLibvirtPoolLimits *limits)
{
  return MIN (MAX (limits->idle_us, 1), BOX_LIBVIRT_POOL_WINDOW_MAX_US);
}

guint
box_libvirt_pool_demand_count (const BoxLibvirtPoolDemand *demand,
                               const BoxLibvirtPoolLimits *limits, gint64 now)
{
  gint64 since = now - window_us (limits);
  guint n = 0;

  for (guint i = 0; i < demand->count; i++) {
    guint at = (demand->head + BOX_LIBVIRT_POOL_HISTORY - 1 - i) % BOX_LIBVIRT_POOL_HISTORY;

    if (demand->at[at] <= since)
      break;    /* older ones too: the ring is in time order */
    n++;
  }
  return n;
}

guint
box_libvirt_pool_cap (const BoxLibvirtPoolLimits *limits)
{
  guint64 slot = MAX (limits->slot_mib, 1);
  guint64 cap = MIN (limits->budget_mib, limits->room_mib) / slot;

  cap = MIN (cap, limits->ceiling);
  return MAX ((guint) cap, limits->floor);
}

gint64
box_libvirt_pool_step_us (const BoxLibvirtPoolLimits *limits)
{
  return MAX (limits->idle_us / 10, G_USEC_PER_SEC);
}

gint64
box_libvirt_pool_next_shrink (const BoxLibvirtPoolDemand *demand,
                              const BoxLibvirtPoolLimits *limits)
{
  gint64 idle_from = demand->last_create + limits->idle_us;

  if (demand->target <= limits->floor)
    return 0;
  if (demand->last_shrink < idle_from)
    return idle_from;
  return demand->last_shrink + box_libvirt_pool_step_us (limits);
}

guint
box_libvirt_pool_target (BoxLibvirtPoolDemand *demand, const BoxLibvirtPoolLimits *limits,
                         gint64 now)
{
  guint cap = box_libvirt_pool_cap (limits);
  guint wanted = box_libvirt_pool_demand_count (demand, limits, now);
  gint64 next;

  demand->target = MAX (demand->target, limits->floor);
  if (demand->misses > 0 || wanted > demand->target) {
    demand->target = MAX (MIN (demand->target + demand->misses, G_MAXUINT16), wanted);
    demand->misses = 0;
  } else {
    next = box_libvirt_pool_next_shrink (demand, limits);
    if (next != 0 && now >= next) {
      demand->target--;
      demand->last_shrink = now;
    }
  }
  demand->target = MIN (demand->target, cap);
  return demand->target;
}
