/* box guest agent: fs-tar-get and fs-tar-put, in a worker (see fs.h).
 *
 * tar-put creates every entry relative to directory descriptors opened one
 * component at a time with O_NOFOLLOW from the target directory, after the
 * name was checked (tar.c: no absolute names, no ".."): an entry can only
 * land inside the directory, whatever symlinks exist or the archive
 * creates.
 *
 * A refused or failed tar-put changes nothing: what it creates where
 * nothing was is journalled (only where the parent existed before: inside
 * a directory it made, everything is its own), what it replaces is first
 * renamed aside to a backup name in the same directory (so on the same
 * file system) and journalled.  On failure the journal is undone backwards
 * and the directories it made for the target go; on success the backups
 * are removed.  Directory modes are applied only after success. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "fs.h"
#include "tar.h"

#define OUT_FLUSH (128u << 10)
#define MAX_DEPTH 512

/* ---- tar-get ----------------------------------------------------------------- */

typedef struct {
  BaWorkCtx *w;
  BaTarWriter *tw;
  BaBuf out;
  int64_t entries, skipped;
} TarOut;

static void
out_flush (TarOut *t)
{
  if (t->out.len > 0)
    ba_fs_write_all (t->w->out, t->out.data, t->out.len);
  t->out.len = 0;
}

/* What libarchive produces: small pieces (headers, padding) are gathered,
 * file data goes straight through when nothing waits before it. */
static void
out_write (void *ud, const void *p, size_t n)
{
  TarOut *t = ud;
  if (t->out.len == 0 && n >= OUT_FLUSH / 2) {
    ba_fs_write_all (t->w->out, p, n);
    return;
  }
  ba_buf_append (&t->out, p, n);
  if (t->out.oom)
    _exit (4);
  if (t->out.len >= OUT_FLUSH)
    out_flush (t);
}

static void
entry_from_stat (BaTarEntry *e, const char *name, const struct stat *st, char type)
{
  memset (e, 0, sizeof *e);
  e->name = name;
  e->link = "";
  e->type = type;
  e->mode = st->st_mode & 07777;
  e->mtime = st->st_mtime;
  e->uid = st->st_uid;
  e->gid = st->st_gid;
}

/* Counts the entry as stored, or as skipped when libarchive refused it. */
static bool
put_header (TarOut *t, const BaTarEntry *e)
{
  const char *err = NULL;
  bool ok = ba_tar_write_header (t->tw, e, &err);
  *(ok ? &t->entries : &t->skipped) += 1;
  return ok;
}

/* A regular file: its header, then exactly st_size bytes (the writer pads
 * with zeros if it shrank, and cuts what it grew). */
static void
put_file (TarOut *t, int fd, const char *name, const struct stat *st)
{
  static uint8_t buf[1 << 16];
  BaTarEntry e;
  uint64_t left = (uint64_t) st->st_size;
  entry_from_stat (&e, name, st, '0');
  e.size = left;
  if (!put_header (t, &e))
    return;
  while (left > 0) {
    ssize_t r = read (fd, buf, left < sizeof buf ? (size_t) left : sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break; /* shrank or unreadable: the writer pads */
    ba_tar_write_data (t->tw, buf, (size_t) r);
    left -= (uint64_t) r;
  }
}

static int
strcmp_ptr (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static void
walk (TarOut *t, int dfd, const char *rel, int depth)
{
  BaTarEntry e;
  size_t n = 0;
  char **names = NULL;
  int dup_fd = dup (dfd);
  DIR *d = dup_fd >= 0 ? fdopendir (dup_fd) : NULL;
  struct dirent *de;
  size_t cap = 0;

  if (d == NULL) {
    t->skipped++;
    return;
  }
  while ((de = readdir (d)) != NULL) {
    if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
      continue;
    if (!ba_grow ((void **) &names, &cap, n, sizeof *names))
      _exit (4);
    names[n++] = strdup (de->d_name);
  }
  closedir (d);
  qsort (names, n, sizeof *names, strcmp_ptr);
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    char sub[BA_TAR_NAME_MAX + 2];
    int fd;
    if ((size_t) snprintf (sub, sizeof sub, "%s%s", rel, names[i]) >= BA_TAR_NAME_MAX - 1 ||
        fstatat (dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
      t->skipped++;
      continue;
    }
    if (S_ISDIR (st.st_mode)) {
      fd = depth < MAX_DEPTH ? openat (dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
      if (fd < 0) {
        t->skipped++;
        continue;
      }
      strcat (sub, "/");
      entry_from_stat (&e, sub, &st, '5');
      put_header (t, &e);
      walk (t, fd, sub, depth + 1);
      close (fd);
    } else if (S_ISREG (st.st_mode)) {
      fd = openat (dfd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) {
        t->skipped++;
        continue;
      }
      put_file (t, fd, sub, &st);
      close (fd);
    } else if (S_ISLNK (st.st_mode)) {
      char target[BA_TAR_NAME_MAX + 1];
      ssize_t tl = readlinkat (dfd, names[i], target, sizeof target - 1);
      if (tl < 0) {
        t->skipped++;
        continue;
      }
      target[tl] = 0;
      entry_from_stat (&e, sub, &st, '2');
      e.link = target;
      put_header (t, &e);
    } else {
      t->skipped++;
    }
  }
  for (size_t i = 0; i < n; i++)
    free (names[i]);
  free (names);
}

void
ba_fs_tar_get (BaWorkCtx *w, const BaJson *req)
{
  char path[PATH_MAX];
  struct stat st;
  TarOut t = { .w = w };
  BaBuf b = { 0 };
  int fd;

  if (!ba_fs_path_arg (w, req, "path", path, sizeof path))
    return;
  fd = open (path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || fstat (fd, &st) < 0) {
    ba_work_errno (w, errno, "open", path);
    return;
  }
  if (!S_ISDIR (st.st_mode) && !S_ISREG (st.st_mode)) {
    ba_work_error (w, "invalid", "not a directory or a file: %s", path);
    return;
  }
  ba_work_reply_ok (w);
  t.tw = ba_tar_writer_new (out_write, &t);
  if (S_ISDIR (st.st_mode)) {
    walk (&t, fd, "", 0);
  } else {
    const char *name = strrchr (path, '/') + 1;
    fcntl (fd, F_SETFL, 0);
    put_file (&t, fd, name, &st);
  }
  ba_tar_writer_finish (t.tw);
  out_flush (&t);
  ba_buf_clear (&t.out);
  ba_jw_begin (&b);
  ba_jw_str (&b, "event", "done");
  ba_jw_int (&b, "entries", t.entries);
  ba_jw_int (&b, "skipped", t.skipped);
  ba_jw_end (&b);
  ba_work_event (w, &b);
}

/* ---- tar-put ------------------------------------------------------------------ */

typedef struct {
  char path[BA_TAR_NAME_MAX + 1];
  uint32_t mode;
} DirMode;

/* One change to undo: rel was created (backup 0), or what was at rel is
 * in BACKUP_NAME backup of its directory. */
typedef struct {
  char *rel;
  uint32_t backup;
} Undo;

#define BACKUP_NAME ".box-tar-old-%ld-%u"

/* A directory made by this tar-put. */
typedef struct {
  dev_t dev;
  ino_t ino;
} Made;

typedef struct {
  BaWorkCtx *w;
  int root;
  bool root_made;                   /* the target itself is new: no journal */
  char cached[BA_TAR_NAME_MAX + 1]; /* relative dir whose fd is cached_fd */
  int cached_fd;
  int fd;                           /* the file being written */
  uint64_t end;                     /* how far its data reaches */
  BaTarEntry cur;
  int64_t entries, skipped;
  DirMode *modes;                   /* directory modes applied at the end */
  size_t nmodes, cmodes;
  const char *code;                 /* the error code when a callback stops */
  char msg[BA_TAR_NAME_MAX + 256];
  bool cached_made;                 /* cached_fd is a directory made here */
  Undo *undo;
  size_t nundo, cundo;
  uint32_t nbackups;
  Made *made;                       /* sorted */
  size_t nmade, cmade;
} TarIn;

/* Journals the first len bytes of rel. */
static void
journal (TarIn *t, const char *rel, size_t len, uint32_t backup)
{
  if (!ba_grow ((void **) &t->undo, &t->cundo, t->nundo, sizeof *t->undo))
    _exit (4);
  t->undo[t->nundo].rel = strndup (rel, len);
  if (t->undo[t->nundo].rel == NULL)
    _exit (4);
  t->undo[t->nundo++].backup = backup;
}

static int
made_cmp (const Made *a, dev_t dev, ino_t ino)
{
  if (a->dev != dev)
    return a->dev < dev ? -1 : 1;
  return a->ino == ino ? 0 : a->ino < ino ? -1 : 1;
}

/* The index where (dev, ino) is or belongs in t->made. */
static size_t
made_find (TarIn *t, dev_t dev, ino_t ino, bool *found)
{
  size_t lo = 0, hi = t->nmade;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = made_cmp (&t->made[mid], dev, ino);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = false;
  return lo;
}

static bool
dir_made (TarIn *t, int fd)
{
  struct stat st;
  bool found = false;
  if (t->root_made)
    return true;
  if (fstat (fd, &st) == 0)
    made_find (t, st.st_dev, st.st_ino, &found);
  return found;
}

/* Remembers that the directory base in pfd was made here. */
static void
remember_made (TarIn *t, int pfd, const char *base)
{
  struct stat st;
  bool found;
  size_t at;
  if (t->root_made || fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return;
  at = made_find (t, st.st_dev, st.st_ino, &found);
  if (found)
    return;
  if (!ba_grow ((void **) &t->made, &t->cmade, t->nmade, sizeof *t->made))
    _exit (4);
  memmove (t->made + at + 1, t->made + at, sizeof *t->made * (t->nmade - at));
  t->made[at].dev = st.st_dev;
  t->made[at].ino = st.st_ino;
  t->nmade++;
}

/* Stop with "<what> <name>: <why>". */
static bool
refuse (TarIn *t, const char **err, const char *code, const char *what, const char *name, const char *why)
{
  t->code = code;
  snprintf (t->msg, sizeof t->msg, "%s %s: %s", what, name, why);
  *err = t->msg;
  return false;
}

/* The directory holding rel (a checked, normalised name), relative to the
 * root, opened component by component without following symlinks; missing
 * directories are created when create. Returns a descriptor (owned by the
 * cache) and sets *base, or -1 with the refusal filled in. */
static int
open_parent (TarIn *t, const char *rel, bool create, const char **base, const char **err)
{
  char dir[BA_TAR_NAME_MAX + 1];
  const char *slash = strrchr (rel, '/');
  size_t dlen = slash != NULL ? (size_t) (slash - rel) : 0;
  int cur;

  *base = slash != NULL ? slash + 1 : rel;
  memcpy (dir, rel, dlen);
  dir[dlen] = 0;
  if (t->cached_fd >= 0 && strcmp (dir, t->cached) == 0)
    return t->cached_fd;
  if (t->cached_fd >= 0)
    close (t->cached_fd);
  t->cached_fd = -1;
  memcpy (t->cached, dir, dlen + 1); /* before the walk cuts dir into components */
  cur = dup (t->root);
  t->cached_made = t->root_made;
  for (char *c = dir, *next; cur >= 0 && *c != 0; c = next) {
    int fd;
    next = strchr (c, '/');
    if (next != NULL)
      *next++ = 0;
    else
      next = c + strlen (c);
    fd = openat (cur, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create && mkdirat (cur, c, 0755) == 0) {
      if (!t->cached_made) /* this component's path: t->cached up to c's end */
        journal (t, t->cached, (size_t) (c - dir) + strlen (c), 0);
      remember_made (t, cur, c);
      t->cached_made = true;
      fd = openat (cur, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    } else if (fd >= 0 && !t->cached_made) {
      t->cached_made = dir_made (t, fd);
    }
    if (fd < 0) {
      int e = errno;
      struct stat st;
      bool link = e == ELOOP || (fstatat (cur, c, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK (st.st_mode));
      close (cur);
      if (link)
        refuse (t, err, "invalid", "entry", rel, "goes through a symlink");
      else if (e == ENOTDIR)
        refuse (t, err, "invalid", "entry", rel, "a parent is not a directory");
      else
        refuse (t, err, ba_errno_code (e), "entry", rel, strerror (e));
      return -1;
    }
    close (cur);
    cur = fd;
  }
  if (cur < 0)
    return refuse (t, err, "failed", "entry", rel, strerror (errno)), -1;
  t->cached_fd = cur;
  return cur;
}

/* Make room for a new entry: a file or symlink in the way is renamed to a
 * backup (journalled; *moved) unless it is our own (pmade: its directory
 * was made here); a directory in the way is refused. */
static bool
clear_name (TarIn *t, int pfd, bool pmade, const char *base, const char *rel, const char **err,
            bool *moved)
{
  struct stat st;
  char backup[64];
  *moved = false;
  if (fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return true;
  if (S_ISDIR (st.st_mode))
    return refuse (t, err, "conflict", "entry", rel, "a directory is in the way");
  if (pmade) {
    if (unlinkat (pfd, base, 0) < 0)
      return refuse (t, err, ba_errno_code (errno), "entry", rel, strerror (errno));
    return true;
  }
  snprintf (backup, sizeof backup, BACKUP_NAME, (long) getpid (), t->nbackups + 1);
  if (renameat (pfd, base, pfd, backup) < 0)
    return refuse (t, err, ba_errno_code (errno), "entry", rel, strerror (errno));
  journal (t, rel, strlen (rel), ++t->nbackups);
  *moved = true;
  return true;
}

/* What was made at rel where nothing was: undone on failure. */
static void
journal_new (TarIn *t, bool pmade, bool moved, const char *rel)
{
  if (!pmade && !moved)
    journal (t, rel, strlen (rel), 0);
}

static bool
put_entry (void *ud, const BaTarEntry *e, const char **err)
{
  TarIn *t = ud;
  char rel[BA_TAR_NAME_MAX + 1], trel[BA_TAR_NAME_MAX + 1];
  const char *base, *tbase, *why = NULL;
  struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = e->mtime } };
  bool pmade, moved = false;
  int pfd, tpfd;

  t->cur = *e;
  t->fd = -1;
  if (!ba_tar_name_check (e->name, rel, sizeof rel, &why))
    return refuse (t, err, "invalid", "entry", e->name, why);
  if (rel[0] == 0) { /* the directory itself */
    if (e->type != '5')
      return refuse (t, err, "invalid", "entry", e->name, "names the directory itself");
    return true;
  }
  if (e->type != '0' && e->type != '1' && e->type != '2' && e->type != '5') {
    t->skipped++;
    return true;
  }
  pfd = open_parent (t, rel, true, &base, err);
  if (pfd < 0)
    return false;
  pmade = t->cached_made;
  switch (e->type) {
  case '5': {
    struct stat st;
    if (fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR (st.st_mode) &&
        !clear_name (t, pfd, pmade, base, rel, err, &moved))
      return false;
    if (mkdirat (pfd, base, 0700) == 0) {
      journal_new (t, pmade, moved, rel);
      remember_made (t, pfd, base);
    } else if (errno != EEXIST) {
      return refuse (t, err, ba_errno_code (errno), "entry", rel, strerror (errno));
    }
    if (!ba_grow ((void **) &t->modes, &t->cmodes, t->nmodes, sizeof *t->modes))
      _exit (4);
    memcpy (t->modes[t->nmodes].path, rel, strlen (rel) + 1);
    t->modes[t->nmodes++].mode = e->mode;
    break;
  }
  case '0':
    /* created with its permissions at once (the umask is 0 here); a name
     * that is taken is cleared first.  Syscalls per file are what a tree
     * of small files costs under TCG. */
    t->end = 0;
    t->fd = openat (pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, e->mode & 0777);
    if (t->fd < 0 && errno == EEXIST) {
      if (!clear_name (t, pfd, pmade, base, rel, err, &moved))
        return false;
      t->fd = openat (pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, e->mode & 0777);
    }
    if (t->fd < 0)
      return refuse (t, err, ba_errno_code (errno), "entry", rel, strerror (errno));
    journal_new (t, pmade, moved, rel);
    break;
  case '2':
    if (!clear_name (t, pfd, pmade, base, rel, err, &moved))
      return false;
    if (symlinkat (e->link, pfd, base) < 0)
      return refuse (t, err, ba_errno_code (errno), "entry", rel, strerror (errno));
    journal_new (t, pmade, moved, rel);
    utimensat (pfd, base, ts, AT_SYMLINK_NOFOLLOW);
    break;
  case '1':
    if (!ba_tar_name_check (e->link, trel, sizeof trel, &why) || trel[0] == 0)
      return refuse (t, err, "invalid", "hard link", rel, why != NULL ? why : "links to the directory");
    if (!clear_name (t, pfd, pmade, base, rel, err, &moved))
      return false;
    pfd = dup (pfd); /* the cache may move to the target's directory */
    tpfd = open_parent (t, trel, false, &tbase, err);
    if (tpfd < 0) {
      close (pfd);
      return false;
    }
    if (linkat (tpfd, tbase, pfd, base, 0) < 0) {
      int errn = errno;
      close (pfd);
      return refuse (t, err, errn == ENOENT ? "invalid" : ba_errno_code (errn), "hard link", rel, strerror (errn));
    }
    journal_new (t, pmade, moved, rel);
    close (pfd);
    break;
  }
  t->entries++;
  return true;
}

static bool
put_data (void *ud, uint64_t off, const uint8_t *p, size_t n, const char **err)
{
  TarIn *t = ud;
  while (t->fd >= 0 && n > 0) {
    ssize_t k = pwrite (t->fd, p, n, (off_t) off);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return refuse (t, err, ba_errno_code (errno), "entry", t->cur.name, strerror (errno));
    p += k;
    n -= (size_t) k;
    off += (uint64_t) k;
  }
  t->end = off > t->end ? off : t->end;
  return true;
}

static bool
put_end (void *ud, const char **err)
{
  TarIn *t = ud;
  if (t->fd >= 0) {
    struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = t->cur.mtime } };
    /* a sparse entry may end in a hole */
    if (t->end < t->cur.size && ftruncate (t->fd, (off_t) t->cur.size) < 0)
      return refuse (t, err, ba_errno_code (errno), "entry", t->cur.name, strerror (errno));
    if (t->cur.mode & 07000)
      fchmod (t->fd, t->cur.mode);
    futimens (t->fd, ts);
    close (t->fd);
    t->fd = -1;
  }
  return true;
}

/* Directory modes last (a read-only directory must not stop its entries). */
static void
apply_dir_modes (TarIn *t)
{
  for (size_t i = t->nmodes; i-- > 0; ) {
    const char *base, *err = NULL;
    int pfd = open_parent (t, t->modes[i].path, false, &base, &err);
    int fd = pfd >= 0 ? openat (pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (fd >= 0) {
      fchmod (fd, t->modes[i].mode);
      close (fd);
    }
  }
  free (t->modes);
}

static ssize_t
read_input (void *ud, void *buf, size_t size)
{
  BaWorkCtx *w = ud;
  for (;;) {
    ssize_t n = read (w->in, buf, size);
    if (n >= 0 || errno != EINTR)
      return n;
  }
}

/* The backups of what was replaced go (success). */
static void
drop_backups (TarIn *t)
{
  for (size_t i = 0; i < t->nundo; i++) {
    const char *base, *err = NULL;
    char name[64];
    int pfd;
    if (t->undo[i].backup == 0 || (pfd = open_parent (t, t->undo[i].rel, false, &base, &err)) < 0)
      continue;
    snprintf (name, sizeof name, BACKUP_NAME, (long) getpid (), t->undo[i].backup);
    unlinkat (pfd, name, 0);
  }
}

/* Puts everything back (failure), newest first: what was made goes, what
 * was replaced comes back from its backup. */
static void
undo_all (TarIn *t)
{
  char where[PATH_MAX];
  for (size_t i = t->nundo; i-- > 0; ) {
    const char *base, *err = NULL;
    struct stat st;
    int pfd = open_parent (t, t->undo[i].rel, false, &base, &err);
    if (pfd < 0)
      continue;
    if (fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0)
      ba_fs_remove_tree (pfd, base, where, sizeof where, t->undo[i].rel, st.st_dev);
    if (t->undo[i].backup != 0) {
      char name[64];
      snprintf (name, sizeof name, BACKUP_NAME, (long) getpid (), t->undo[i].backup);
      renameat (pfd, name, pfd, base);
    }
  }
}

/* The directories made for the target itself go: path up to made_len. */
static void
unmake_target (const char *path, size_t made_len)
{
  char top[PATH_MAX], where[PATH_MAX];
  struct stat st;
  if (made_len == 0)
    return;
  memcpy (top, path, made_len);
  top[made_len] = 0;
  if (lstat (top, &st) == 0)
    ba_fs_remove_tree (AT_FDCWD, top, where, sizeof where, top, st.st_dev);
}

void
ba_fs_tar_put (BaWorkCtx *w, const BaJson *req)
{
  static const BaTarSink sink = { put_entry, put_data, put_end };
  static TarIn t;
  char path[PATH_MAX], why[sizeof t.msg];
  const char *err = NULL, *code;
  size_t made_len = 0;
  BaBuf b = { 0 };
  int e, rc;

  if (!ba_fs_path_arg (w, req, "path", path, sizeof path))
    return;
  if ((e = ba_fs_mkdirs (path, &made_len)) != 0) {
    ba_work_errno (w, e, "mkdir", path);
    unmake_target (path, made_len);
    return;
  }
  t.w = w;
  t.cached_fd = t.fd = -1;
  t.root_made = made_len > 0;
  t.root = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (t.root < 0) {
    ba_work_errno (w, errno, "open", path);
    unmake_target (path, made_len);
    return;
  }
  ba_work_reply_ok (w);
  umask (0); /* this worker's: entries get the modes the archive gives them */
  rc = ba_tar_read (read_input, w, &sink, &t, &err);
  if (rc <= 0) {
    /* the refusal first (the undo's own lookups may overwrite t.msg) */
    code = rc == 0 && t.code != NULL ? t.code : "invalid";
    snprintf (why, sizeof why, "%s", err != NULL ? err : "failed");
    if (t.fd >= 0)
      close (t.fd);
    undo_all (&t);
    unmake_target (path, made_len);
    ba_work_error (w, code, "%s", why);
    return;
  }
  drop_backups (&t);
  apply_dir_modes (&t);
  ba_jw_begin (&b);
  ba_jw_str (&b, "event", "done");
  ba_jw_int (&b, "entries", t.entries);
  ba_jw_int (&b, "skipped", t.skipped);
  ba_jw_end (&b);
  ba_work_event (w, &b);
}
