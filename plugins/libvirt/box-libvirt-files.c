/* box-libvirt-files.c: the file steps of checkpoints, restores and forks,
 * for worker threads: sparse copies, links and renames that say which
 * file failed, a full disk as BOX_ERROR_CAPACITY.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* copy_file_range, SEEK_DATA, SEEK_HOLE */
#endif
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box-libvirt-private.h"

#define COPY_CHUNK (G_GUINT64_CONSTANT (64) << 20)

gboolean
box_libvirt_errno_error (GError **error, int saved_errno, const char *what, const char *path)
{
  BoxErrorCode code = saved_errno == ENOSPC || saved_errno == EDQUOT ? BOX_ERROR_CAPACITY :
                      BOX_ERROR_INTERNAL;

  g_set_error (error, BOX_ERROR, code, "%s %s: %s", what, path, g_strerror (saved_errno));
  return FALSE;
}

gboolean
box_libvirt_fsync_dir (const char *path)
{
  int fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  gboolean ok;

  if (fd < 0)
    return FALSE;
  ok = fsync (fd) == 0;
  close (fd);
  return ok;
}

/* Copies [offset, offset + len) of @in to the same place in @out. */
static gboolean
copy_range (int in, int out, off_t offset, guint64 len)
{
  while (len > 0) {
    loff_t in_off = offset, out_off = offset;
    ssize_t n = copy_file_range (in, &in_off, out, &out_off, MIN (len, COPY_CHUNK), 0);

    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)) {
      char buf[65536];
      ssize_t r = pread (in, buf, MIN (len, sizeof buf), offset);
      if (r <= 0 || pwrite (out, buf, r, offset) != r)
        return FALSE;
      n = r;
    } else if (n <= 0) {
      return FALSE;
    }
    offset += n;
    len -= n;
  }
  return TRUE;
}

gboolean
box_libvirt_copy_sparse (const char *src, const char *dst, GError **error)
{
  int in = open (src, O_RDONLY | O_CLOEXEC);
  int out;
  struct stat st;
  off_t data = 0;
  gboolean ok = TRUE;

  if (in < 0)
    return box_libvirt_errno_error (error, errno, "cannot open", src);
  if (fstat (in, &st) != 0) {
    int saved_errno = errno;
    close (in);
    return box_libvirt_errno_error (error, saved_errno, "cannot read", src);
  }
  out = open (dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0) {
    int saved_errno = errno;
    close (in);
    return box_libvirt_errno_error (error, saved_errno, "cannot create", dst);
  }
  errno = 0;
  if (ftruncate (out, st.st_size) != 0)
    ok = FALSE;
  while (ok && data < st.st_size) {
    off_t hole;

    data = lseek (in, data, SEEK_DATA);
    if (data < 0) {
      ok = errno == ENXIO;   /* no data after this: the rest is a hole */
      errno = 0;
      break;
    }
    hole = lseek (in, data, SEEK_HOLE);
    if (hole < 0)
      hole = st.st_size;
    ok = copy_range (in, out, data, (guint64) (hole - data));
    data = hole;
  }
  if (ok && fsync (out) != 0)
    ok = FALSE;
  if (!ok) {
    int saved_errno = errno != 0 ? errno : EIO;
    close (in);
    close (out);
    g_unlink (dst);
    return box_libvirt_errno_error (error, saved_errno, "cannot copy to", dst);
  }
  close (in);
  close (out);
  return TRUE;
}

gboolean
box_libvirt_write_file (const char *path, const char *contents, GError **error)
{
  g_autoptr(GError) local_error = NULL;

  if (!g_file_set_contents_full (path, contents, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600,
                                 &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s", local_error->message);
    return FALSE;
  }
  return TRUE;
}

gboolean
box_libvirt_link_file (const char *from, const char *to, GError **error)
{
  g_unlink (to);
  if (link (from, to) != 0)
    return box_libvirt_errno_error (error, errno, "cannot link", to);
  return TRUE;
}

gboolean
box_libvirt_rename_file (const char *from, const char *to, GError **error)
{
  if (g_rename (from, to) != 0)
    return box_libvirt_errno_error (error, errno, "cannot rename", from);
  /* two links of one file: rename() leaves both (a state linked again
   * over the cold.mig it came from) */
  g_unlink (from);
  return TRUE;
}
