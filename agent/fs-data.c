/* box guest agent: a file's contents, streamed (fs-read, fs-write; the
 * ops and their checks are fs.c's, doc/AGENT-PROTOCOL.md, Files).  Each
 * body runs in a worker child (work.c) that already switched to the
 * requested user. */

#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "agent.h"
#include "chan.h"

/* Whether fd's size is its length: not on the kernel's pseudo file
 * systems, whose files say 0 or 4096 whatever they hold. */
static bool
size_is_length (int fd)
{
  static const unsigned long pseudo[] = {
    PROC_SUPER_MAGIC, SYSFS_MAGIC, DEBUGFS_MAGIC, TRACEFS_MAGIC, SECURITYFS_MAGIC,
    CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, BPF_FS_MAGIC, EFIVARFS_MAGIC, 0x65735546 /* fuse */,
    0x62656570 /* configfs */,
  };
  struct statfs sf;
  if (fstatfs (fd, &sf) < 0)
    return false;
  for (size_t i = 0; i < sizeof pseudo / sizeof pseudo[0]; i++)
    if ((unsigned long) sf.f_type == pseudo[i])
      return false;
  return true;
}

/* The file's bytes to the host: exactly "length" of them when the reply
 * gives one (the file's size at open; a file that grew is cut there, one
 * that shrank is an error, so a short body is never taken for whole),
 * else to its end. */
void
ba_fs_read (BaWorkCtx *w, const BaJson *req)
{
  char path[PATH_MAX];
  static uint8_t buf[1 << 16];
  struct stat st;
  BaBuf b = { 0 };
  uint64_t left;
  bool exact;
  int fd;
  if (!ba_fs_path_arg (w, req, "path", path, sizeof path))
    return;
  fd = open (path, O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0 || fstat (fd, &st) < 0) {
    ba_work_errno (w, errno, "open", path);
    return;
  }
  if (!S_ISREG (st.st_mode)) {
    ba_work_error (w, "invalid", "not a regular file: %s", path);
    return;
  }
  fcntl (fd, F_SETFL, 0);
  exact = size_is_length (fd);
  left = exact ? (uint64_t) st.st_size : UINT64_MAX;
  ba_work_reply_begin (&b);
  ba_fs_stat_json (&b, "stat", path, &st, NULL);
  if (exact)
    ba_jw_int (&b, "length", (int64_t) st.st_size);
  ba_work_reply_end (w, &b);
  while (left > 0) {
    ssize_t r = sendfile (w->out, fd, NULL, left < (1 << 20) ? (size_t) left : 1 << 20);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && (errno == EINVAL || errno == ENOSYS))
      break; /* plain reads below */
    if (r < 0) {
      if (errno == EPIPE)
        _exit (3);
      ba_work_errno (w, errno, "read", path);
      return;
    }
    if (r == 0)
      break;
    left -= (uint64_t) r;
  }
  while (left > 0) {
    ssize_t r = read (fd, buf, left < sizeof buf ? (size_t) left : sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      ba_work_errno (w, errno, "read", path);
      return;
    }
    if (r == 0)
      break;
    ba_fs_write_all (w->out, buf, (size_t) r);
    left -= (uint64_t) r;
  }
  if (exact && left > 0)
    ba_work_error (w, "conflict", "%s shrank while it was read (%lld of %lld bytes)", path,
                   (long long) ((uint64_t) st.st_size - left), (long long) st.st_size);
}

static void
temp_name (char *out, size_t len, const char *base, int attempt)
{
  uint32_t rnd = 0;
  if (getrandom (&rnd, sizeof rnd, 0) < 0)
    rnd = (uint32_t) getpid () * 2654435761u + (uint32_t) attempt;
  snprintf (out, len, ".%.200s.box-%08x", base, rnd);
}

/* Whether fd's file lives in memory (tmpfs), where a write waits for
 * nothing but memory: then the agent writes the host's data into it from
 * its own loop (a pipe hop and two copies fewer: under TCG, 1.5x the
 * throughput). On a disk file system the worker keeps writing, so that the
 * kernel's dirty-page throttling, or a server's or a FUSE process's
 * slowness, pauses the worker and never the agent's other channels. */
static bool
file_in_memory (int fd)
{
  struct statfs sf;
  return fstatfs (fd, &sf) == 0 && (unsigned long) sf.f_type == TMPFS_MAGIC;
}

/* The host's data from the worker's stdin into fd, to its EOF: 0, or the
 * errno of the failed read (*failed_read) or write. */
static int
copy_input (BaWorkCtx *w, int fd, bool *failed_read)
{
  static uint8_t buf[1 << 20]; /* a syscall per MiB: they are dear under TCG */
  for (;;) {
    ssize_t r = read (w->in, buf, sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      *failed_read = r < 0;
      return r < 0 ? errno : 0;
    }
    for (ssize_t off = 0; off < r; ) {
      ssize_t k = write (fd, buf + off, (size_t) (r - off));
      if (k < 0 && errno == EINTR)
        continue;
      if (k < 0)
        return errno;
      off += k;
    }
  }
}

void
ba_fs_write (BaWorkCtx *w, const BaJson *req)
{
  char path[PATH_MAX], dir[PATH_MAX], tmp[NAME_MAX + 1];
  const char *base;
  uint32_t mode;
  bool mode_given, existed = false, unnamed, failed_read = false;
  struct stat st, old;
  int dfd, fd = -1, err = 0;
  BaBuf b = { 0 };

  if (!ba_fs_path_arg (w, req, "path", path, sizeof path) || !ba_fs_mode_arg (w, req, 0644, &mode, &mode_given))
    return;
  if (strcmp (path, "/") == 0) {
    ba_work_error (w, "invalid", "/ is a directory");
    return;
  }
  base = ba_fs_base_name (path);
  snprintf (dir, sizeof dir, "%.*s", (int) (base - path), path);
  if (strlen (dir) > 1)
    dir[strlen (dir) - 1] = 0;
  if (ba_json_get_bool (req, "mkdir", false)) {
    int err = ba_fs_mkdirs (dir, NULL);
    if (err != 0) {
      ba_work_errno (w, err, "mkdir", dir);
      return;
    }
  }
  dfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    ba_work_errno (w, errno, "open", dir);
    return;
  }
  if (fstatat (dfd, base, &old, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR (old.st_mode)) {
      ba_work_error (w, "invalid", "is a directory: %s", path);
      return;
    }
    existed = S_ISREG (old.st_mode);
    if (existed && !mode_given)
      mode = old.st_mode & 07777;
  }
  /* an unnamed file (nothing is left behind if the call is abandoned or the
   * guest stops), given a name only to be renamed over path */
  fd = openat (dfd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, 0600);
  unnamed = fd >= 0;
  if (fd < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
    ba_work_errno (w, errno, "create", path);
    return;
  }
  for (int i = 0; i < 100 && fd < 0; i++) {
    temp_name (tmp, sizeof tmp, base, i);
    fd = openat (dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) {
      ba_work_errno (w, errno, "create", path);
      return;
    }
  }
  if (fd < 0) {
    ba_work_errno (w, EEXIST, "create", path);
    return;
  }
  if (file_in_memory (fd)) {
    ba_work_reply_ok_input (w, fd); /* the agent writes the data */
  } else {
    ba_work_reply_ok (w);
    err = copy_input (w, fd, &failed_read);
  }
  if (err == 0)
    err = ba_work_wait_input (w); /* or the errno of the agent's write */
  if (err != 0) {
    if (!unnamed)
      unlinkat (dfd, tmp, 0);
    if (err < 0) /* abandoned: the old file stays */
      _exit (1);
    ba_work_errno (w, err, failed_read ? "read" : "write", failed_read ? "input" : path);
    return;
  }
  if (unnamed) {
    char proc[64];
    snprintf (proc, sizeof proc, "/proc/self/fd/%d", fd);
    for (int i = 0; ; i++) {
      temp_name (tmp, sizeof tmp, base, i);
      if (linkat (AT_FDCWD, proc, dfd, tmp, AT_SYMLINK_FOLLOW) == 0)
        break;
      if (errno != EEXIST || i == 100) {
        ba_work_errno (w, errno, "write", path);
        return;
      }
    }
  }
  if (fchmod (fd, mode) < 0 || (existed && w->user == NULL && fchown (fd, old.st_uid, old.st_gid) < 0) ||
      fsync (fd) < 0 || renameat (dfd, tmp, dfd, base) < 0) {
    err = errno;
    unlinkat (dfd, tmp, 0);
    ba_work_errno (w, err, "write", path);
    return;
  }
  fsync (dfd);
  if (fstat (fd, &st) < 0) {
    ba_work_errno (w, errno, "stat", path);
    return;
  }
  ba_jw_begin (&b);
  ba_jw_str (&b, "event", "done");
  ba_fs_stat_json (&b, "stat", path, &st, NULL);
  ba_jw_end (&b);
  ba_work_event (w, &b);
}
