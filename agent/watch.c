/* box guest agent: fs-watch, in a worker (see fs.h): inotify events as
 * {"event":"fs","type","path"} lines, the names of Go's fsnotify. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "fs.h"

#define MASK (IN_CREATE | IN_MODIFY | IN_DELETE | IN_DELETE_SELF | IN_MOVED_FROM | IN_MOVED_TO | \
              IN_MOVE_SELF | IN_ATTRIB | IN_EXCL_UNLINK)

typedef struct {
  BaWorkCtx *w;
  int fd;
  int root_wd;
  bool recursive;
  char **paths; /* by watch descriptor */
  int npaths;
  char last[PATH_MAX + 16];
  int64_t last_ms;
} Watch;

static int
add_watch (Watch *x, const char *path, bool follow)
{
  int wd = inotify_add_watch (x->fd, path, MASK | (follow ? 0 : IN_DONT_FOLLOW));
  if (wd < 0)
    return -1;
  if (wd >= x->npaths) {
    int n = wd + 64;
    char **p = realloc (x->paths, sizeof *p * (size_t) n);
    if (p == NULL)
      _exit (4);
    memset (p + x->npaths, 0, sizeof *p * (size_t) (n - x->npaths));
    x->paths = p;
    x->npaths = n;
  }
  free (x->paths[wd]);
  x->paths[wd] = strdup (path);
  return wd;
}

static void emit (Watch *x, const char *type, const char *path);

/* Watch every directory below path (path itself is watched already).
 * With announce (path was just created or moved in), what is already in
 * it gets a create too: it came before its directory's watch (mkdir -p,
 * tar x, a tree moved in), and may come twice when it raced the watch. */
static void
add_tree (Watch *x, const char *path, int depth, bool announce)
{
  DIR *d;
  struct dirent *e;
  if (depth > 128 || (d = opendir (path)) == NULL)
    return;
  while ((e = readdir (d)) != NULL) {
    char sub[PATH_MAX];
    struct stat st;
    if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
      continue;
    if ((size_t) snprintf (sub, sizeof sub, "%s/%s", strcmp (path, "/") == 0 ? "" : path, e->d_name) >= sizeof sub)
      continue;
    if (lstat (sub, &st) != 0)
      continue;
    if (announce)
      emit (x, "create", sub);
    if (S_ISDIR (st.st_mode) && add_watch (x, sub, false) >= 0)
      add_tree (x, sub, depth + 1, announce);
  }
  closedir (d);
}

static void
emit (Watch *x, const char *type, const char *path)
{
  char key[PATH_MAX + 16];
  struct timespec ts;
  int64_t now;
  BaBuf b = { 0 };
  clock_gettime (CLOCK_MONOTONIC, &ts);
  now = (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  snprintf (key, sizeof key, "%s:%s", type, path);
  /* merge a burst of identical writes */
  if (strcmp (type, "write") == 0 && strcmp (key, x->last) == 0 && now - x->last_ms < 50)
    return;
  snprintf (x->last, sizeof x->last, "%s", key);
  x->last_ms = now;
  ba_jw_begin (&b);
  ba_jw_str (&b, "event", "fs");
  ba_jw_str (&b, "type", type);
  ba_jw_str (&b, "path", path);
  ba_jw_end (&b);
  ba_work_event (x->w, &b);
}

void
ba_fs_watch (BaWorkCtx *w, const BaJson *req)
{
  static Watch x;
  static char buf[64 << 10] __attribute__ ((aligned (__alignof__ (struct inotify_event))));
  char path[PATH_MAX];
  struct stat st;

  if (!ba_fs_path_arg (w, req, "path", path, sizeof path))
    return;
  x.w = w;
  x.recursive = ba_json_get_bool (req, "recursive", false);
  x.fd = inotify_init1 (IN_CLOEXEC);
  if (x.fd < 0) {
    ba_work_errno (w, errno, "watch", path);
    return;
  }
  if (stat (path, &st) < 0 || (x.root_wd = add_watch (&x, path, true)) < 0) {
    ba_work_errno (w, errno, "watch", path);
    return;
  }
  if (x.recursive && S_ISDIR (st.st_mode))
    add_tree (&x, path, 0, false);
  ba_work_reply_ok (w);

  for (;;) {
    ssize_t n = read (x.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ba_work_errno (w, n < 0 ? errno : EIO, "watch", path);
      return;
    }
    for (char *p = buf; p < buf + n; ) {
      struct inotify_event *ev = (struct inotify_event *) p;
      const char *dir = ev->wd >= 0 && ev->wd < x.npaths ? x.paths[ev->wd] : NULL;
      char full[PATH_MAX];
      p += sizeof *ev + ev->len;
      if (ev->mask & IN_Q_OVERFLOW) {
        BaBuf b = { 0 };
        ba_jw_begin (&b);
        ba_jw_str (&b, "event", "overflow");
        ba_jw_end (&b);
        ba_work_event (w, &b);
        continue;
      }
      if (dir == NULL)
        continue;
      if (ev->len > 0 && ev->name[0] != 0)
        snprintf (full, sizeof full, "%s/%s", strcmp (dir, "/") == 0 ? "" : dir, ev->name);
      else
        snprintf (full, sizeof full, "%s", dir);
      if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
        emit (&x, "create", full);
        if (x.recursive && (ev->mask & IN_ISDIR) && add_watch (&x, full, false) >= 0)
          add_tree (&x, full, 0, true);
      }
      if (ev->mask & IN_MODIFY)
        emit (&x, "write", full);
      if (ev->mask & IN_ATTRIB)
        emit (&x, "chmod", full);
      if (ev->mask & IN_DELETE)
        emit (&x, "remove", full);
      if (ev->mask & IN_MOVED_FROM)
        emit (&x, "rename", full);
      if (ev->wd == x.root_wd && (ev->mask & IN_DELETE_SELF)) {
        emit (&x, "remove", path);
        return;
      }
      if (ev->wd == x.root_wd && (ev->mask & IN_MOVE_SELF)) {
        emit (&x, "rename", path);
        return;
      }
      if (ev->mask & IN_IGNORED) {
        if (ev->wd == x.root_wd)
          return;
        free (x.paths[ev->wd]);
        x.paths[ev->wd] = NULL;
      }
    }
  }
}
