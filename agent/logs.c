/* box guest agent: a service's logs to the host (service-logs, see
 * logs.h and doc/AGENT-PROTOCOL.md "Services").
 *
 * Runs in a worker (work.h), so the agent's loop never reads a file: the
 * worker writes into its output pipe, which the agent reads only while the
 * channel has credit and its port queue room, so a reader the host does
 * not drain blocks here, in write(), and nothing piles up in the agent. */
#include "agent.h"
#include "fs.h"
#include "logs.h"
#include "services.h"
#include "work.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_FILES 3 /* .log.2, .log.1, .log */
#define READ_BYTES (256u << 10)
/* follow: how long to wait for a change before looking anyway */
#define FOLLOW_POLL_MS 500

void
ba_logs_emit_flush (BaLogsEmit *e)
{
  if (e->len > 0)
    e->sink (e->ctx, e->buf, e->len);
  e->len = 0;
}

static void
emit_put (BaLogsEmit *e, const uint8_t *p, size_t n)
{
  while (n > 0) {
    size_t k = n < BA_LOGS_EMIT_BYTES - e->len ? n : BA_LOGS_EMIT_BYTES - e->len;
    memcpy (e->buf + e->len, p, k);
    e->len += k;
    p += k;
    n -= k;
    if (e->len == BA_LOGS_EMIT_BYTES)
      ba_logs_emit_flush (e);
  }
}

/* Passes @n bytes on, cutting every line at BA_LOGS_LINE_MAX bytes (its
 * end, the newline, is kept). */
static void
emit (BaLogsEmit *e, const uint8_t *p, size_t n)
{
  while (n > 0) {
    const uint8_t *nl = memchr (p, '\n', n);
    size_t len = nl != NULL ? (size_t) (nl - p) + 1 : n;
    size_t body = nl != NULL ? len - 1 : len;
    size_t keep = e->line >= BA_LOGS_LINE_MAX ? 0 :
                  (body < BA_LOGS_LINE_MAX - e->line ? body : (size_t) (BA_LOGS_LINE_MAX - e->line));
    /* a whole line that fits is passed on as it is, newline included */
    emit_put (e, p, keep == body && nl != NULL ? len : keep);
    e->line += body;
    if (nl != NULL) {
      if (keep != body)
        emit_put (e, (const uint8_t *) "\n", 1);
      e->line = 0;
    }
    p += len;
    n -= len;
  }
}

/* A run of at least DIRECT_MIN bytes that the line cut leaves as it is
 * goes to the pipe straight from the read buffer: no copy into e->buf and
 * no per-line call; shorter runs are gathered by emit() as before. */
#define DIRECT_MIN (4u << 10)

/* Passes @n bytes read from a log on, as emit() does. */
void
ba_logs_emit_chunk (BaLogsEmit *e, const uint8_t *p, size_t n)
{
  while (n > 0) {
    size_t ok = 0; /* bytes from p the cut leaves as they are */
    uint64_t line = e->line;
    const uint8_t *nl;
    size_t len;
    while (ok < n) {
      /* the line is whole when its newline is within room + 1 bytes; the
       * last newline there ends a run of whole lines (one look per 16 KiB
       * of short lines instead of one per line) */
      size_t room = line >= BA_LOGS_LINE_MAX ? 0 : (size_t) (BA_LOGS_LINE_MAX - line);
      len = n - ok < room + 1 ? n - ok : room + 1;
      nl = memrchr (p + ok, '\n', len);
      if (nl != NULL) {
        ok = (size_t) (nl - p) + 1;
        line = 0;
      } else if (n - ok <= room) {
        line += n - ok; /* the start of a line that fits, up to the end */
        ok = n;
      } else {
        break; /* a line beyond the cut starts at ok */
      }
    }
    if (ok >= DIRECT_MIN) {
      ba_logs_emit_flush (e);
      e->sink (e->ctx, p, ok);
      e->line = line;
    } else if (ok > 0) {
      emit (e, p, ok);
    } else {
      /* a line beyond the cut: through emit(), up to its end */
      nl = memchr (p, '\n', n);
      ok = nl != NULL ? (size_t) (nl - p) + 1 : n;
      emit (e, p, ok);
    }
    p += ok;
    n -= ok;
  }
}

/* Copies @fd from where it is to its end; false on a read error. */
static bool
copy_to_end (BaLogsEmit *e, int fd)
{
  static uint8_t buf[READ_BYTES];
  for (;;) {
    ssize_t r = read (fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return r == 0;
    ba_logs_emit_chunk (e, buf, (size_t) r);
    ba_logs_emit_flush (e);
  }
}

/* Opens .log.2, .log.1, .log (fds[i] -1 when absent). The agent rotates by
 * two renames and an open: a set that shows one file twice, or a .1 with
 * no .log, was caught midway and is opened again. */
static void
open_set (const char *name, int fds[LOG_FILES])
{
  for (int attempt = 0; attempt < 20; attempt++) {
    struct stat st[LOG_FILES];
    bool torn = false;
    for (int i = 0; i < LOG_FILES; i++) {
      char path[512];
      ba_service_log_path (path, sizeof path, name, LOG_FILES - 1 - i);
      fds[i] = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
      if (fds[i] >= 0 && (fstat (fds[i], &st[i]) < 0 || !S_ISREG (st[i].st_mode))) {
        close (fds[i]);
        fds[i] = -1;
      }
      if (fds[i] >= 0)
        fcntl (fds[i], F_SETFL, 0);
    }
    for (int i = 0; i < LOG_FILES; i++)
      for (int j = i + 1; j < LOG_FILES; j++)
        if (fds[i] >= 0 && fds[j] >= 0 && st[i].st_ino == st[j].st_ino && st[i].st_dev == st[j].st_dev)
          torn = true;
    if (fds[LOG_FILES - 1] < 0 && fds[LOG_FILES - 2] >= 0)
      torn = true;
    if (!torn)
      return;
    for (int i = 0; i < LOG_FILES; i++)
      if (fds[i] >= 0)
        close (fds[i]);
    usleep (5000);
  }
  /* still torn: take what is there */
  for (int i = 0; i < LOG_FILES; i++) {
    char path[512];
    ba_service_log_path (path, sizeof path, name, LOG_FILES - 1 - i);
    fds[i] = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
  }
}

uint64_t
ba_logs_tail_start (const int fds[], int nfds, uint64_t lines, int *file, uint64_t *offset)
{
  static uint8_t buf[READ_BYTES];
  bool last_byte = true; /* the next byte seen (backwards) is the very last one */
  uint64_t found = 0;

  *file = 0;
  *offset = 0;
  if (lines == 0) {
    /* nothing: start at the end of the newest file there is */
    for (int i = nfds - 1; i >= 0; i--) {
      struct stat st;
      if (fds[i] >= 0 && fstat (fds[i], &st) == 0) {
        *file = i;
        *offset = (uint64_t) st.st_size;
        return 0;
      }
    }
    return 0;
  }
  for (int i = nfds - 1; i >= 0; i--) {
    struct stat st;
    uint64_t pos;
    if (fds[i] < 0 || fstat (fds[i], &st) < 0)
      continue;
    pos = (uint64_t) st.st_size;
    while (pos > 0) {
      size_t n = pos < sizeof buf ? (size_t) pos : sizeof buf;
      ssize_t r = pread (fds[i], buf, n, (off_t) (pos - n));
      if (r < 0 && errno == EINTR)
        continue;
      if (r != (ssize_t) n)
        return found; /* shrank meanwhile: from the oldest file */
      for (size_t k = n; k > 0; k--) {
        bool nl = buf[k - 1] == '\n';
        if (last_byte) {
          last_byte = false;
          if (nl)
            continue; /* ends the last line, starts none */
        }
        if (nl && ++found == lines) {
          *file = i;
          *offset = pos - n + k;
          return found;
        }
      }
      pos -= n;
    }
  }
  return found;
}

/* After the file @old (followed to its end) was renamed away: the files
 * that came after it (it is .log.1 now, or .log.2 after two rotations)
 * are copied whole but the current one, whose descriptor is returned (-1
 * when there is none yet); when it was rotated out (three rotations), both
 * old files are. A follower more than three rotations behind loses the
 * files rotated out meanwhile. */
static int
next_file (BaLogsEmit *e, const char *name, const struct stat *old)
{
  int fds[LOG_FILES];
  struct stat st;
  int k = LOG_FILES;

  open_set (name, fds);
  for (int i = 0; i < LOG_FILES - 1; i++)
    if (fds[i] >= 0 && fstat (fds[i], &st) == 0 && st.st_ino == old->st_ino &&
        st.st_dev == old->st_dev)
      k = i;
  for (int i = 0; i < LOG_FILES - 1; i++) {
    /* rotated out (removed by the last rename): the kept ones are newer */
    bool newer = k == LOG_FILES && old->st_nlink == 0 && fds[i] >= 0 && fstat (fds[i], &st) == 0 &&
                 (st.st_mtim.tv_sec > old->st_mtim.tv_sec ||
                  (st.st_mtim.tv_sec == old->st_mtim.tv_sec && st.st_mtim.tv_nsec >= old->st_mtim.tv_nsec));
    if (fds[i] >= 0 && (i > k || newer))
      copy_to_end (e, fds[i]);
    if (fds[i] >= 0)
      close (fds[i]);
  }
  return fds[LOG_FILES - 1];
}

static bool
read_exact (int fd, uint8_t *p, size_t n)
{
  while (n > 0) {
    ssize_t r = read (fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= (size_t) r;
  }
  return true;
}

static uint64_t
get_u64 (const uint8_t *p)
{
  return (uint64_t) ba_get_u32 (p) | (uint64_t) ba_get_u32 (p + 4) << 32;
}

/* The log file whose inode is @ino (the current one or a rotated one),
 * else the oldest there is (@ino was rotated out: what it held after the
 * offset is lost, as for any follower three rotations behind); -1 when
 * there is none. */
static int
open_ino (const char *name, uint64_t ino, bool *found)
{
  int fds[LOG_FILES], fd = -1;
  struct stat st;
  open_set (name, fds);
  *found = false;
  for (int i = 0; i < LOG_FILES; i++)
    if (!*found && fds[i] >= 0 && fstat (fds[i], &st) == 0 && (uint64_t) st.st_ino == ino) {
      fd = fds[i];
      fds[i] = -1;
      *found = true;
    }
  for (int i = 0; i < LOG_FILES; i++)
    if (fd < 0 && fds[i] >= 0) {
      fd = fds[i];
      fds[i] = -1;
    }
  for (int i = 0; i < LOG_FILES; i++)
    if (fds[i] >= 0)
      close (fds[i]);
  return fd;
}

/* The hand-off (logs-live.c): at the end of the current file @fd, the
 * worker offers the agent to pass what the service writes next straight to
 * the channel, and waits for its answer on the result socket: 'n' (not
 * now: go on from the file) or 'y' (taken; the pipe was empty). After 'y'
 * it waits until the follower fell behind: 'r' then the inode of the file,
 * the offset to go on from and the cut's line state (8 bytes each, little
 * endian). Returns 1 when it went on from there (*fd is the file to
 * read next, -1 when there is none), 0 when refused, -1 when no offer was
 * made; exits when the agent closed the socket (the channel ended). */
static int
offer (BaLogsEmit *e, int res, const char *name, int *fdp)
{
  int fd = *fdp;
  struct stat st;
  off_t at = lseek (fd, 0, SEEK_CUR);
  BaBuf b = { 0 };
  uint8_t m[25];
  bool found;

  if (res < 0 || at < 0 || fstat (fd, &st) < 0)
    return -1;
  ba_logs_emit_flush (e);
  ba_jw_begin (&b);
  ba_jw_str (&b, "handoff", name);
  ba_jw_int (&b, "ino", (int64_t) st.st_ino);
  ba_jw_int (&b, "off", (int64_t) at);
  ba_jw_int (&b, "line", (int64_t) e->line);
  ba_jw_end (&b);
  ba_buf_append (&b, "\n", 1);
  if (b.oom)
    _exit (4);
  ba_fs_write_all (res, b.data, b.len);
  ba_buf_clear (&b);
  if (!read_exact (res, m, 1))
    _exit (0);
  if (m[0] != 'y')
    return 0;
  if (!read_exact (res, m, sizeof m) || m[0] != 'r')
    _exit (0);
  close (fd);
  fd = open_ino (name, get_u64 (m + 1), &found);
  e->line = found ? get_u64 (m + 17) : 0;
  if (found)
    lseek (fd, (off_t) get_u64 (m + 9), SEEK_SET);
  *fdp = fd;
  return 1;
}

/* A follower that was refused, or handed back within OFFER_KEEP_MS (a
 * service printing faster than the host takes it), offers again only after
 * a pause doubling from OFFER_BACKOFF_MIN_MS to OFFER_BACKOFF_MAX_MS: each
 * offer stops the worker until its pipe drained, and such a follower is
 * served best by the file path, the worker reading in parallel with the
 * agent. One that stayed live that long offers again at once. */
#define OFFER_KEEP_MS 1000
#define OFFER_BACKOFF_MIN_MS 50
#define OFFER_BACKOFF_MAX_MS 2000

typedef struct {
  int64_t next; /* no offer before (monotonic ms) */
  int64_t backoff;
} Offers;

/* At the end of the current file: offer() when it is time; true when the
 * follow goes on from another place (*fdp). */
static bool
maybe_offer (Offers *o, BaLogsEmit *e, int res, const char *name, int *fdp)
{
  int64_t t0 = ba_now_ms (), t1;
  int r;
  if (t0 < o->next || (r = offer (e, res, name, fdp)) < 0)
    return false;
  t1 = ba_now_ms ();
  if (r == 1 && t1 - t0 >= OFFER_KEEP_MS)
    o->backoff = 0;
  else
    o->backoff = o->backoff == 0 ? OFFER_BACKOFF_MIN_MS :
                 (o->backoff * 2 < OFFER_BACKOFF_MAX_MS ? o->backoff * 2 : OFFER_BACKOFF_MAX_MS);
  o->next = t1 + o->backoff;
  return r == 1;
}

/* Follows the current file: whatever is appended, then, when the name
 * names a new file (rotation) or the file shrank (truncation), the rest of
 * the old one and the new one from its start; caught up, it offers the
 * agent to take over (offer()). Never returns: the host ends it by closing
 * the channel (the agent kills the worker). */
static void
follow (BaLogsEmit *e, int res, const char *name, int fd)
{
  char path[512];
  Offers offers = { 0 };
  int ino = inotify_init1 (IN_CLOEXEC | IN_NONBLOCK);
  if (ino >= 0 && inotify_add_watch (ino, ba_services_log_dir,
                                     IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM |
                                     IN_DELETE | IN_CLOSE_WRITE) < 0) {
    close (ino);
    ino = -1;
  }
  ba_service_log_path (path, sizeof path, name, 0);
  for (;;) {
    struct stat now, st;
    if (fd >= 0 && !copy_to_end (e, fd)) {
      close (fd);
      fd = -1;
    }
    if (stat (path, &now) == 0 && S_ISREG (now.st_mode)) {
      off_t at = fd >= 0 ? lseek (fd, 0, SEEK_CUR) : 0;
      if (fd < 0 || fstat (fd, &st) < 0 || st.st_ino != now.st_ino || st.st_dev != now.st_dev) {
        if (fd >= 0) {
          copy_to_end (e, fd); /* what was written before the rename */
          fstat (fd, &st);
          close (fd);
          fd = next_file (e, name, &st);
        } else {
          fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        }
        continue;
      }
      if (now.st_size < at) {
        lseek (fd, 0, SEEK_SET); /* truncated: from its start again */
        continue;
      }
      if (now.st_size > at)
        continue;
      if (now.st_size == at && maybe_offer (&offers, e, res, name, &fd))
        continue;
    }
    if (ino >= 0) {
      static char evbuf[4096];
      struct pollfd p = { .fd = ino, .events = POLLIN };
      if (poll (&p, 1, FOLLOW_POLL_MS) > 0)
        while (read (ino, evbuf, sizeof evbuf) > 0) {
        }
    } else {
      usleep (100 * 1000);
    }
  }
}

static void
write_out (void *ctx, const uint8_t *p, size_t n)
{
  ba_fs_write_all (((BaWorkCtx *) ctx)->out, p, n);
}

/* The worker: {"name", "tail"?, "follow"?}. */
static void
logs_worker (BaWorkCtx *w, const BaJson *req)
{
  const char *name = ba_json_get_str (req, "name");
  bool follows = ba_json_get_bool (req, "follow", false);
  int64_t tail = BA_LOGS_TAIL_DEFAULT;
  int fds[LOG_FILES];
  static BaLogsEmit e;
  uint64_t offset;
  int file;

  if (ba_json_get (req, "tail") != NULL &&
      (!ba_json_get_int (req, "tail", &tail) || tail < 0 || tail > BA_LOGS_TAIL_MAX)) {
    ba_work_error (w, "invalid", "tail must be an integer from 0 to %d", BA_LOGS_TAIL_MAX);
    return;
  }
  e.sink = write_out;
  e.ctx = w;
  open_set (name, fds);
  ba_logs_tail_start (fds, LOG_FILES, (uint64_t) tail, &file, &offset);
  ba_work_reply_ok (w);
  for (int i = file; i < LOG_FILES; i++) {
    if (fds[i] < 0)
      continue;
    if (i == file)
      lseek (fds[i], (off_t) offset, SEEK_SET);
    if (i < LOG_FILES - 1 || !follows)
      copy_to_end (&e, fds[i]);
  }
  for (int i = 0; i < LOG_FILES - 1; i++)
    if (fds[i] >= 0)
      close (fds[i]);
  if (!follows) {
    if (fds[LOG_FILES - 1] >= 0)
      close (fds[LOG_FILES - 1]);
    return;
  }
  follow (&e, w->res, name, fds[LOG_FILES - 1]);
}

void
ba_logs_start (int64_t id, uint32_t chan, const BaJson *req)
{
  ba_work_start (id, chan, req, BA_WORK_OUT, logs_worker);
}
