/* box guest agent: file operations. Each op body runs in a worker child
 * (work.c) that already switched to the requested user: plain system calls
 * then get the kernel's permission checks. */

#include "fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "chan.h"
#include "tar.h"

/* ---- helpers ---------------------------------------------------------------- */

void
ba_fs_write_all (int fd, const void *p, size_t n)
{
  while (n > 0) {
    ssize_t w = write (fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      _exit (3); /* the agent closed the pipe: the host abandoned the call */
    p = (const uint8_t *) p + w;
    n -= (size_t) w;
  }
}

bool
ba_fs_path_arg (BaWorkCtx *w, const BaJson *req, const char *key, char *out, size_t outlen)
{
  const BaJson *v = ba_json_get (req, key);
  if (v == NULL || v->type != BA_JSTR || v->slen == 0 || strlen (v->s) != v->slen) {
    ba_work_error (w, "invalid", "%s must be an absolute path", key);
    return false;
  }
  if (v->s[0] != '/') {
    ba_work_error (w, "invalid", "%s must be an absolute path: %s", key, v->s);
    return false;
  }
  if (v->slen + 2 > outlen || v->slen >= PATH_MAX) {
    ba_work_error (w, "invalid", "%s is too long", key);
    return false;
  }
  ba_path_normalise (v->s, out);
  return true;
}

const char *
ba_fs_base_name (const char *path)
{
  const char *s = strrchr (path, '/');
  return s == NULL ? path : (s[1] != 0 ? s + 1 : path);
}

void
ba_fs_stat_json (BaBuf *b, const char *key, const char *path, const struct stat *st, const char *target)
{
  char link[PATH_MAX + 1], mtime[40];
  struct tm tm;
  time_t t = st->st_mtime;
  const char *type = S_ISREG (st->st_mode) ? "file" : S_ISDIR (st->st_mode) ? "dir" : S_ISLNK (st->st_mode) ? "symlink" : "other";

  if (key != NULL)
    ba_jw_key (b, key);
  ba_jw_begin (b);
  ba_jw_str (b, "path", path);
  ba_jw_str (b, "name", strcmp (path, "/") == 0 ? "/" : ba_fs_base_name (path));
  ba_jw_str (b, "type", type);
  ba_jw_int (b, "size", (int64_t) st->st_size);
  ba_jw_key (b, "mode");
  ba_buf_printf (b, "\"%04o\"", (unsigned) (st->st_mode & 07777));
  gmtime_r (&t, &tm);
  strftime (mtime, sizeof mtime, "%Y-%m-%dT%H:%M:%SZ", &tm);
  ba_jw_str (b, "mtime", mtime);
  if (S_ISLNK (st->st_mode)) {
    if (target == NULL) {
      ssize_t n = readlink (path, link, sizeof link - 1);
      link[n > 0 ? n : 0] = 0;
      target = link;
    }
    ba_jw_str (b, "target", target);
  }
  ba_jw_end (b);
}

bool
ba_fs_mode_arg (BaWorkCtx *w, const BaJson *req, uint32_t dflt, uint32_t *mode, bool *given)
{
  const BaJson *v = ba_json_get (req, "mode");
  *mode = dflt;
  if (given != NULL)
    *given = v != NULL;
  if (v == NULL)
    return true;
  if (v->type == BA_JNUM && v->is_int && v->i >= 0 && v->i <= 07777) {
    *mode = (uint32_t) v->i;
    return true;
  }
  if (v->type == BA_JSTR && v->slen >= 1 && v->slen <= 5) {
    uint32_t m = 0;
    size_t i;
    for (i = 0; i < v->slen && v->s[i] >= '0' && v->s[i] <= '7'; i++)
      m = m * 8 + (uint32_t) (v->s[i] - '0');
    if (i == v->slen && m <= 07777) {
      *mode = m;
      return true;
    }
  }
  ba_work_error (w, "invalid", "mode must be an octal string such as \"0644\"");
  return false;
}

int
ba_fs_mkdirs (const char *path, size_t *first_made)
{
  char p[PATH_MAX];
  struct stat st;
  size_t n = strlen (path);
  if (first_made != NULL)
    *first_made = 0;
  if (n >= sizeof p)
    return ENAMETOOLONG;
  if (n <= 1)
    return 0;
  memcpy (p, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (p[i] != '/' && p[i] != 0)
      continue;
    p[i] = 0;
    if (mkdir (p, 0755) < 0) {
      if (errno != EEXIST)
        return errno;
      if (stat (p, &st) < 0 || !S_ISDIR (st.st_mode))
        return ENOTDIR;
    } else if (first_made != NULL && *first_made == 0) {
      *first_made = i;
    }
    p[i] = i < n ? '/' : 0;
  }
  return 0;
}

/* ---- request/reply ops ----------------------------------------------------- */

static void
reply_stat (BaWorkCtx *w, const char *path)
{
  struct stat st;
  BaBuf b = { 0 };
  if (lstat (path, &st) < 0) {
    ba_work_errno (w, errno, "stat", path);
    return;
  }
  ba_work_reply_begin (&b);
  ba_fs_stat_json (&b, "stat", path, &st, NULL);
  ba_work_reply_end (w, &b);
}

static void
op_stat (BaWorkCtx *w, const BaJson *req)
{
  char path[PATH_MAX];
  if (ba_fs_path_arg (w, req, "path", path, sizeof path))
    reply_stat (w, path);
}

static int
cmp_names (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The names in a directory, sorted; NULL with errno on failure. */
static char **
list_names (int dfd, size_t *count)
{
  DIR *d = fdopendir (dup (dfd));
  struct dirent *e;
  char **v = NULL;
  size_t n = 0, cap = 0;
  if (d == NULL)
    return NULL;
  while ((errno = 0, e = readdir (d)) != NULL) {
    if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
      continue;
    if (!ba_grow ((void **) &v, &cap, n + 1, sizeof *v))
      _exit (4);
    v[n++] = strdup (e->d_name);
  }
  closedir (d);
  if (v == NULL && (v = calloc (1, sizeof *v)) == NULL)
    _exit (4);
  qsort (v, n, sizeof *v, cmp_names);
  v[n] = NULL;
  *count = n;
  return v;
}

static void
op_list (BaWorkCtx *w, const BaJson *req)
{
  char path[PATH_MAX], sub[PATH_MAX + NAME_MAX + 2];
  bool chan = ba_json_get (req, "chan") != NULL;
  struct stat st;
  size_t n = 0;
  char **names;
  int dfd;
  BaBuf b = { 0 };

  if (!ba_fs_path_arg (w, req, "path", path, sizeof path))
    return;
  if (lstat (path, &st) < 0) {
    ba_work_errno (w, errno, "stat", path);
    return;
  }
  if (!S_ISDIR (st.st_mode)) {
    ba_work_error (w, "invalid", "not a directory: %s", path);
    return;
  }
  dfd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  names = dfd >= 0 ? list_names (dfd, &n) : NULL;
  if (names == NULL) {
    ba_work_errno (w, errno, "list", path);
    return;
  }
  if (chan)
    ba_work_reply_ok (w);
  else {
    ba_work_reply_begin (&b);
    ba_jw_key (&b, "entries");
    ba_buf_append (&b, "[", 1);
  }
  for (size_t i = 0; i < n; i++) {
    char target[PATH_MAX + 1];
    ssize_t tl = 0;
    if (fstatat (dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue; /* gone meanwhile */
    snprintf (sub, sizeof sub, "%s/%s", strcmp (path, "/") == 0 ? "" : path, names[i]);
    if (S_ISLNK (st.st_mode)) {
      tl = readlinkat (dfd, names[i], target, sizeof target - 1);
      target[tl > 0 ? tl : 0] = 0;
    }
    ba_fs_stat_json (&b, NULL, sub, &st, S_ISLNK (st.st_mode) ? target : NULL);
    if (chan) {
      ba_buf_append (&b, "\n", 1);
      if (b.len >= 65536 || i + 1 == n) {
        ba_fs_write_all (w->out, b.data, b.len);
        b.len = 0;
      }
    }
  }
  if (chan) {
    if (b.len > 0)
      ba_fs_write_all (w->out, b.data, b.len);
    ba_buf_clear (&b);
    return;
  }
  ba_buf_append (&b, "]", 1);
  if (b.len > BA_MAX_PAYLOAD - 4096) {
    ba_buf_clear (&b);
    ba_work_error (w, "too_large", "%zu entries do not fit a reply: list with a channel", n);
    return;
  }
  ba_work_reply_end (w, &b);
}

static void
op_mkdir (BaWorkCtx *w, const BaJson *req)
{
  char path[PATH_MAX], parent[PATH_MAX];
  uint32_t mode;
  struct stat st;
  bool parents = ba_json_get_bool (req, "parents", false);

  if (!ba_fs_path_arg (w, req, "path", path, sizeof path) || !ba_fs_mode_arg (w, req, 0755, &mode, NULL))
    return;
  if (parents) {
    char *slash;
    int err;
    if (lstat (path, &st) == 0) {
      if (S_ISDIR (st.st_mode))
        reply_stat (w, path);
      else
        ba_work_errno (w, EEXIST, "mkdir", path);
      return;
    }
    snprintf (parent, sizeof parent, "%s", path);
    slash = strrchr (parent, '/');
    if (slash != NULL && slash != parent) {
      *slash = 0;
      if ((err = ba_fs_mkdirs (parent, NULL)) != 0) {
        ba_work_errno (w, err, "mkdir", parent);
        return;
      }
    }
  }
  if (mkdir (path, mode & 0777) < 0) {
    ba_work_errno (w, errno, "mkdir", path);
    return;
  }
  if (chmod (path, mode) < 0) {
    ba_work_errno (w, errno, "chmod", path);
    return;
  }
  reply_stat (w, path);
}

/* The end of copying a file or directory: out gets the owner (when root),
 * mode and times of st, unless err; both are closed.  Returns the error. */
static int
copy_done (int in, int out, const struct stat *st, bool root, int err)
{
  struct timespec ts[2] = { st->st_atim, st->st_mtim };
  if (err == 0 && root && fchown (out, st->st_uid, st->st_gid) < 0)
    err = errno;
  if (err == 0 && (fchmod (out, st->st_mode & 07777) < 0 || futimens (out, ts) < 0))
    err = errno;
  if (in >= 0)
    close (in);
  if (out >= 0)
    close (out);
  return err;
}

/* Copies from (not following a symlink) to the new name to in dirfd,
 * with modes and times, and owners when root: 0 or an errno value. */
static int
copy_entry (int sfd, const char *from, int dfd, const char *to, bool root)
{
  struct stat st;
  int err = 0;
  if (fstatat (sfd, from, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno;
  if (S_ISREG (st.st_mode)) {
    int in = openat (sfd, from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int out = in < 0 ? -1 : openat (dfd, to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (in < 0 || out < 0)
      err = errno;
    while (err == 0) {
      ssize_t n = copy_file_range (in, NULL, out, NULL, 1 << 30, 0);
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL))
        n = sendfile (out, in, NULL, 1 << 30);
      if (n < 0 && errno != EINTR)
        err = errno;
      if (n == 0)
        break;
    }
    return copy_done (in, out, &st, root, err);
  }
  if (S_ISLNK (st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlinkat (sfd, from, target, sizeof target - 1);
    if (n < 0)
      return errno;
    target[n] = 0;
    if (symlinkat (target, dfd, to) < 0 || (root && fchownat (dfd, to, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0))
      return errno;
    utimensat (dfd, to, (struct timespec[2]) { st.st_atim, st.st_mtim }, AT_SYMLINK_NOFOLLOW);
    return 0;
  }
  if (S_ISDIR (st.st_mode)) {
    int in, out;
    size_t n = 0;
    char **names;
    if (mkdirat (dfd, to, 0700) < 0)
      return errno;
    in = openat (sfd, from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    out = openat (dfd, to, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    names = in >= 0 && out >= 0 ? list_names (in, &n) : NULL;
    if (names == NULL)
      err = errno;
    for (size_t i = 0; i < n; i++) {
      if (err == 0)
        err = copy_entry (in, names[i], out, names[i], root);
      free (names[i]);
    }
    free (names);
    return copy_done (in, out, &st, root, err);
  }
  return EINVAL; /* a device, FIFO or socket does not move between file systems */
}

/* rename(2) between file systems, as mv(1) does it: a copy next to `to`
 * (same file system) renamed over it, then the original removed.  A
 * failure before the rename leaves everything as it was. */
static int
move_across (const char *from, const char *to, char *where, size_t wlen)
{
  char tmp[PATH_MAX], dir[PATH_MAX];
  struct stat st;
  int err;
  snprintf (dir, sizeof dir, "%s", to);
  *strrchr (dir, '/') = 0;
  if ((size_t) snprintf (tmp, sizeof tmp, "%s/.box-move-%ld", dir, (long) getpid ()) >= sizeof tmp)
    return ENAMETOOLONG;
  snprintf (where, wlen, "%s", to);
  err = copy_entry (AT_FDCWD, from, AT_FDCWD, tmp, geteuid () == 0);
  if (err == 0 && rename (tmp, to) < 0)
    err = errno;
  if (err != 0) {
    char ignored[PATH_MAX];
    if (lstat (tmp, &st) == 0)
      ba_fs_remove_tree (AT_FDCWD, tmp, ignored, sizeof ignored, tmp, st.st_dev);
    return err;
  }
  snprintf (where, wlen, "%s", from);
  return lstat (from, &st) == 0 ? ba_fs_remove_tree (AT_FDCWD, from, where, wlen, from, st.st_dev) : 0;
}

static void
op_rename (BaWorkCtx *w, const BaJson *req)
{
  char from[PATH_MAX], to[PATH_MAX], where[PATH_MAX];
  struct stat st, tst;
  int err = 0;
  if (!ba_fs_path_arg (w, req, "from", from, sizeof from) || !ba_fs_path_arg (w, req, "to", to, sizeof to))
    return;
  if (rename (from, to) == 0) {
    reply_stat (w, to);
    return;
  }
  err = errno;
  snprintf (where, sizeof where, "%s", from);
  if (err == EXDEV && lstat (from, &st) == 0) {
    /* what rename(2) would refuse on one file system is refused here too */
    if (lstat (to, &tst) == 0 && (S_ISDIR (st.st_mode) != S_ISDIR (tst.st_mode)))
      err = S_ISDIR (st.st_mode) ? ENOTDIR : EISDIR;
    else if (strcmp (from, "/") == 0 || (strncmp (to, from, strlen (from)) == 0 && to[strlen (from)] == '/'))
      err = EINVAL; /* into itself */
    else if ((err = move_across (from, to, where, sizeof where)) == 0) {
      reply_stat (w, to);
      return;
    }
  }
  /* both exist, of kinds rename(2) will not swap (a directory onto a
   * file or a non-empty directory): the state forbids it */
  if ((err == ENOTDIR || err == EISDIR || err == EEXIST || err == ENOTEMPTY) && lstat (from, &st) == 0 &&
      lstat (to, &st) == 0)
    ba_work_error (w, "conflict", "rename %s: %s is in the way (%s)", from, to, strerror (err));
  else
    ba_work_errno (w, err, "rename", where);
}

int
ba_fs_remove_tree (int dfd, const char *name, char *err_path, size_t len, const char *path, dev_t dev)
{
  int fd, err = 0;
  size_t n = 0;
  char **names;
  struct stat st;
  if (unlinkat (dfd, name, 0) == 0)
    return 0;
  if (errno != EISDIR && errno != EPERM) {
    snprintf (err_path, len, "%s", path);
    return errno;
  }
  fd = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 && fstat (fd, &st) == 0 && st.st_dev != dev) {
    /* another filesystem is mounted here: never emptied */
    close (fd);
    snprintf (err_path, len, "%s", path);
    return EBUSY;
  }
  names = fd >= 0 ? list_names (fd, &n) : NULL;
  if (names == NULL) {
    snprintf (err_path, len, "%s", path);
    err = errno;
    if (fd >= 0)
      close (fd);
    return err;
  }
  for (size_t i = 0; i < n && err == 0; i++) {
    char sub[PATH_MAX];
    snprintf (sub, sizeof sub, "%s/%s", path, names[i]);
    err = ba_fs_remove_tree (fd, names[i], err_path, len, sub, dev);
  }
  for (size_t i = 0; i < n; i++)
    free (names[i]);
  free (names);
  close (fd);
  if (err == 0 && unlinkat (dfd, name, AT_REMOVEDIR) < 0) {
    snprintf (err_path, len, "%s", path);
    err = errno;
  }
  return err;
}

static void
op_delete (BaWorkCtx *w, const BaJson *req)
{
  char path[PATH_MAX], parent[PATH_MAX], where[PATH_MAX];
  struct stat st;
  int dfd, err;
  if (!ba_fs_path_arg (w, req, "path", path, sizeof path))
    return;
  if (strcmp (path, "/") == 0) {
    ba_work_error (w, "invalid", "cannot delete /");
    return;
  }
  if (lstat (path, &st) < 0) {
    ba_work_errno (w, errno, "delete", path);
    return;
  }
  if (!S_ISDIR (st.st_mode)) {
    if (unlink (path) < 0)
      ba_work_errno (w, errno, "delete", path);
    else
      ba_work_reply_ok (w);
    return;
  }
  if (rmdir (path) == 0) {
    ba_work_reply_ok (w);
    return;
  }
  if ((errno != ENOTEMPTY && errno != EEXIST) || !ba_json_get_bool (req, "recursive", false)) {
    if (errno == ENOTEMPTY || errno == EEXIST)
      ba_work_error (w, "conflict", "directory not empty: %s", path);
    else
      ba_work_errno (w, errno, "delete", path);
    return;
  }
  snprintf (parent, sizeof parent, "%s", path);
  *strrchr (parent, '/') = 0;
  dfd = open (parent[0] != 0 ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    ba_work_errno (w, errno, "delete", path);
    return;
  }
  err = ba_fs_remove_tree (dfd, ba_fs_base_name (path), where, sizeof where, path, st.st_dev);
  if (err != 0)
    ba_work_errno (w, err, "delete", where);
  else
    ba_work_reply_ok (w);
}

/* ---- dispatch --------------------------------------------------------------- */

void
ba_fs_op (int64_t id, const char *op, const BaJson *m)
{
  static const struct {
    const char *op;
    BaWorkFn fn;
    int flags;
    int chan; /* 0 none, 1 required, 2 optional */
  } ops[] = {
    { "fs-stat", op_stat, 0, 0 },
    { "fs-list", op_list, BA_WORK_OUT, 2 },
    { "fs-mkdir", op_mkdir, 0, 0 },
    { "fs-rename", op_rename, 0, 0 },
    { "fs-delete", op_delete, 0, 0 },
    { "fs-read", ba_fs_read, BA_WORK_OUT, 1 },
    { "fs-write", ba_fs_write, BA_WORK_IN, 1 },
    { "fs-tar-get", ba_fs_tar_get, BA_WORK_OUT, 1 },
    { "fs-tar-put", ba_fs_tar_put, BA_WORK_IN, 1 },
    { "fs-watch", ba_fs_watch, 0, 1 },
  };
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    uint32_t chan = 0;
    if (strcmp (op, ops[i].op) != 0)
      continue;
    if ((ops[i].chan == 1 || (ops[i].chan == 2 && ba_json_get (m, "chan") != NULL)) && !ba_chan_take_id (id, m, &chan))
      return;
    ba_work_start (id, chan, m, chan != 0 ? ops[i].flags : 0, ops[i].fn);
    return;
  }
  ba_reply_error (id, "unknown_op", op);
}
