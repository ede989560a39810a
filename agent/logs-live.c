/* box guest agent: live followers of a service's log (see logs.h).
 *
 * A follow worker (logs.c) that read the current log file to its end
 * offers the agent to take over: from then on the agent passes what the
 * service writes straight to the channel, as it writes it into the log (no
 * file read, no worker pipe). The file stays the truth: a follower the
 * host does not drain fast enough (its window or the agent's output queue
 * short of one write) goes back to its worker, told the file and offset it
 * got to, and reads the file again from there. So the agent holds nothing
 * for a follower but its place: no buffer, whatever the rate.
 *
 * The switch to live loses and repeats nothing: the worker offers at the
 * end of what it wrote into its pipe; the agent takes it only once that
 * pipe is empty (all of it went to the channel before the live bytes) and
 * sends what the service wrote since the offer (at most GAP_MAX, read from
 * the file once) before the next write. Back to the worker, the offset is
 * the first byte not sent. */
#include "agent.h"
#include "chan.h"
#include "logs.h"
#include "services.h"
#include "work.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define FOLLOWERS_MAX 16
/* the bytes written between an offer and its take-over that the agent reads
 * from the file; a follower further behind stays with its worker */
#define GAP_MAX (256u << 10)

typedef struct {
  bool used;
  bool live; /* else offered, waiting for the worker's pipe to empty */
  uint32_t chan;
  char name[BA_SERVICE_NAME_MAX + 1];
  uint64_t ino, off; /* the next byte to send: file and offset */
  uint64_t line;     /* the cut's state there */
} Follower;

static Follower followers[FOLLOWERS_MAX];
static BaLogsEmit out;

static BaChan *
follower_chan (const Follower *f)
{
  BaChan *c = ba_chan_find (f->chan);
  return c != NULL && !c->dead && c->w != NULL && !ba_work_finished (c->w) ? c : NULL;
}

static void
send_data (void *ctx, const uint8_t *p, size_t n)
{
  BaChan *c = ctx;
  while (n > 0) {
    size_t k = n < BA_DATA_CHUNK ? n : BA_DATA_CHUNK;
    ba_send (BA_DATA, BA_STDOUT, c->id, p, k);
    c->sent[BA_STDOUT] += k;
    c->window -= (uint32_t) k; /* within it: checked before */
    p += k;
    n -= k;
  }
}

/* Passes @n bytes of the log on to the channel of @f, through the cut. */
static void
pass (Follower *f, BaChan *c, const uint8_t *p, size_t n)
{
  out.sink = send_data;
  out.ctx = c;
  out.line = f->line;
  out.len = 0;
  ba_logs_emit_chunk (&out, p, n);
  ba_logs_emit_flush (&out);
  f->line = out.line;
  f->off += n;
}

/* Live bytes go out while the follower's window and the agent's output
 * queue have room for the whole write: the queue may grow past
 * BA_OUT_QUEUE_HIGH (where the agent stops reading its other sources) up to
 * LIVE_QUEUE_MAX, so that one write of the service (up to 256 KiB) does not
 * send a follower the host drains at the channel's pace back to the file
 * every time the queue is not yet empty. */
#define LIVE_QUEUE_MAX (1u << 20)

static bool
room_for (const BaChan *c, uint64_t n)
{
  return c->window >= n && ba_out_pending () + n <= LIVE_QUEUE_MAX;
}

static void
put_u64 (uint8_t *p, uint64_t v)
{
  ba_put_u32 (p, (uint32_t) v);
  ba_put_u32 (p + 4, (uint32_t) (v >> 32));
}

static void
forget (Follower *f)
{
  memset (f, 0, sizeof *f);
}

/* Back to the worker, from the first byte not sent. */
static void
fall_back (Follower *f, BaChan *c)
{
  uint8_t m[25] = { 'r' };
  put_u64 (m + 1, f->ino);
  put_u64 (m + 9, f->off);
  put_u64 (m + 17, f->line);
  ba_work_tell (c->w, m, sizeof m);
  forget (f);
}

/* The offered follower @f takes over when its worker's pipe is empty and
 * what was written since the offer fits: 1 done (told 'y'), 0 not yet,
 * -1 refused (told 'n'). */
static int
try_live (Follower *f, BaChan *c)
{
  static uint8_t gap[GAP_MAX];
  uint64_t ino, size;
  int avail = 0;
  size_t n;

  if (!ba_service_log_pos (f->name, &ino, &size) || ino != f->ino || f->off > size ||
      size - f->off > GAP_MAX)
    goto refuse;
  if (c->p.fd_out >= 0 && (ioctl (c->p.fd_out, FIONREAD, &avail) < 0 || avail > 0))
    return 0;
  n = (size_t) (size - f->off);
  if (n > 0) {
    char path[512];
    struct stat st;
    int fd;
    if (!room_for (c, n))
      goto refuse;
    ba_service_log_path (path, sizeof path, f->name, 0);
    fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
      goto refuse;
    if (fstat (fd, &st) < 0 || (uint64_t) st.st_ino != ino ||
        pread (fd, gap, n, (off_t) f->off) != (ssize_t) n) {
      close (fd);
      goto refuse;
    }
    close (fd);
    pass (f, c, gap, n);
  }
  f->live = true;
  ba_work_tell (c->w, "y", 1);
  return 1;
refuse:
  ba_work_tell (c->w, "n", 1);
  forget (f);
  return -1;
}

void
ba_logs_offer (BaChan *c, const uint8_t *line, size_t n)
{
  const char *err = NULL;
  BaJson *m = ba_json_parse ((const char *) line, n, &err);
  const char *name = m != NULL ? ba_json_get_str (m, "handoff") : NULL;
  int64_t ino, off, cut;
  Follower *f = NULL;

  for (int i = 0; i < FOLLOWERS_MAX && f == NULL; i++)
    if (!followers[i].used)
      f = &followers[i];
  for (int i = 0; i < FOLLOWERS_MAX; i++)
    if (followers[i].used && followers[i].chan == c->id)
      f = NULL; /* one offer at a time per channel */
  if (f == NULL || name == NULL || strlen (name) > BA_SERVICE_NAME_MAX ||
      !ba_json_get_int (m, "ino", &ino) || !ba_json_get_int (m, "off", &off) ||
      !ba_json_get_int (m, "line", &cut) || off < 0 || cut < 0) {
    ba_json_free (m);
    ba_work_tell (c->w, "n", 1);
    return;
  }
  f->used = true;
  f->chan = c->id;
  snprintf (f->name, sizeof f->name, "%s", name);
  f->ino = (uint64_t) ino;
  f->off = (uint64_t) off;
  f->line = (uint64_t) cut;
  ba_json_free (m);
  try_live (f, c);
}

void
ba_logs_written (const char *name, uint64_t ino, uint64_t at, const void *data, size_t n)
{
  for (int i = 0; i < FOLLOWERS_MAX; i++) {
    Follower *f = &followers[i];
    BaChan *c;
    if (!f->used || !f->live || strcmp (f->name, name) != 0)
      continue;
    if ((c = follower_chan (f)) == NULL)
      forget (f);
    else if (f->ino == ino && f->off == at && room_for (c, n))
      pass (f, c, data, n);
    else
      fall_back (f, c);
  }
}

void
ba_logs_rotated (const char *name, uint64_t old_ino, uint64_t old_end, uint64_t new_ino)
{
  for (int i = 0; i < FOLLOWERS_MAX; i++) {
    Follower *f = &followers[i];
    if (f->used && f->live && strcmp (f->name, name) == 0 && f->ino == old_ino &&
        f->off == old_end) {
      f->ino = new_ino;
      f->off = 0;
    }
  }
}

void
ba_logs_poll_prepare (void)
{
  for (int i = 0; i < FOLLOWERS_MAX; i++) {
    Follower *f = &followers[i];
    BaChan *c;
    if (!f->used)
      continue;
    if ((c = follower_chan (f)) == NULL)
      forget (f);
    else if (!f->live)
      try_live (f, c);
  }
}
