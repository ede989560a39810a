/* box-libvirt-disk-room.c: room on vm_dir's file system.
 *
 * Checkpoints, restores and forks check first that what they write leaves
 * disk_reserve_mib free (503 capacity otherwise, nothing written).  A
 * failure midway is capacity too when the disk filled meanwhile
 * (box_libvirt_note_disk_full()), and so is a fork whose files fitted but
 * whose guest then met the full disk: QEMU's default werror=enospc stops
 * the guest on the write, so its set-up times out instead of failing
 * (box_libvirt_check_guest_disk()).
 */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "box-libvirt-op.h"

/* less free than this (and the reserve) after a failure: the disk filled */
#define DISK_FULL_SLACK ((guint64) 1 << 20)

guint64
box_libvirt_file_allocated (const char *path)
{
  GStatBuf st;

  if (g_stat (path, &st) != 0)
    return 0;
  return (guint64) st.st_blocks * 512;
}

gboolean
box_libvirt_check_disk_room (BoxLibvirtPlugin *self, guint64 bytes, GError **error)
{
  struct statvfs st;
  guint64 free_bytes, reserve;

  if (statvfs (self->config.vm_dir, &st) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot read the free space of %s: %s",
                 self->config.vm_dir, g_strerror (saved_errno));
    return FALSE;
  }
  free_bytes = (guint64) st.f_bavail * st.f_frsize;
  /* (disk_reserve_mib is at most G_MAXUINT32: no overflow) */
  reserve = self->config.disk_reserve_mib << 20;
  if (free_bytes < bytes + reserve) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CAPACITY,
                 "no room on this node's disk: %" G_GUINT64_FORMAT " MiB needed, %"
                 G_GUINT64_FORMAT " MiB free", (bytes + reserve) >> 20, free_bytes >> 20);
    return FALSE;
  }
  return TRUE;
}

/* After a failure: a node disk that filled up meanwhile (another writer, or
 * more to write than estimated: the guest's RAM as it is) makes it 503
 * capacity, as if it had not fitted from the start. */
void
box_libvirt_note_disk_full (BoxLibvirtPlugin *self, GError **error)
{
  g_autoptr(GError) room = NULL;
  GError *full;

  if (error == NULL || *error == NULL ||
      g_error_matches (*error, BOX_ERROR, BOX_ERROR_CAPACITY) ||
      box_libvirt_check_disk_room (self, DISK_FULL_SLACK, &room))
    return;
  full = g_error_new (BOX_ERROR, BOX_ERROR_CAPACITY, "%s (%s)", room->message, (*error)->message);
  g_clear_error (error);
  *error = full;
}

/* Whether QEMU stopped @dom on a write that found no room (its default
 * werror=enospc: the guest is paused, not told). */
static gboolean
domain_stopped_on_enospc (virDomainPtr dom)
{
  virDomainDiskError errors[16];
  int state = VIR_DOMAIN_NOSTATE, reason = 0, n;
  gboolean full = FALSE;

  if (virDomainGetState (dom, &state, &reason, 0) < 0 || state != VIR_DOMAIN_PAUSED ||
      reason != VIR_DOMAIN_PAUSED_IOERROR)
    return FALSE;
  n = virDomainGetDiskErrors (dom, errors, G_N_ELEMENTS (errors), 0);
  for (int i = 0; i < n; i++) {
    full = full || errors[i].error == VIR_DOMAIN_DISK_ERROR_NO_SPACE;
    free (errors[i].disk);
  }
  return full;
}

gboolean
box_libvirt_check_guest_disk (BoxLibvirtPlugin *self, const char *domain, GError **error)
{
  virConnectPtr conn = box_libvirt_conn_get (self->conn, NULL);
  virDomainPtr dom = conn != NULL ? box_libvirt_domain_lookup (conn, domain) : NULL;
  gboolean full = dom != NULL && domain_stopped_on_enospc (dom);

  if (dom != NULL)
    virDomainFree (dom);
  if (conn != NULL)
    virConnectClose (conn);
  if (full) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CAPACITY,
                 "no room on this node's disk: the guest met a full disk");
    return FALSE;
  }
  return box_libvirt_check_disk_room (self, DISK_FULL_SLACK, error);
}
