/* box guest agent: exec sessions.
 *
 * A session outlives channels: its process, its stdin, and the last 1 MiB of
 * its output in a ring with absolute offsets. Attached channels read the
 * ring at their own cursor within their credit. Output is read from the
 * process while every attached channel is less than a ring behind, and
 * continuously when none is attached, so a detached process never blocks. */

#include "session.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "exec.h"
#include "ring.h"

#define READ_CHUNK (64u << 10)

struct BaSession {
  char id[16];
  BaBuf cmd;            /* the argv as a JSON array */
  bool tty, detachable;
  int64_t started_at;   /* Unix ms */
  BaProc p;
  BaRing ring;
  bool eof[3];
  bool exited;
  int status;
  int64_t exited_at;    /* monotonic ms */
  bool done;            /* exited and output final: fds closed */
  int64_t deadline;
  bool timed_out;
  BaChan **att;         /* attached channels */
  int natt, catt;
  BaSession *next;
};

static BaSession *sessions;
int64_t ba_session_keep_ms = BA_SESSION_KEEP_MS;

static int64_t
unix_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static BaSession *
session_find (const char *id)
{
  for (BaSession *s = sessions; s != NULL; s = s->next)
    if (strcmp (s->id, id) == 0)
      return s;
  return NULL;
}

static bool
session_id_ok (const char *id)
{
  if (id == NULL || strlen (id) != 12 || strncmp (id, "s-", 2) != 0)
    return false;
  for (int i = 2; i < 12; i++)
    if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9')))
      return false;
  return true;
}

static void
session_close_fds (BaSession *s)
{
  if (s->p.fd_in >= 0)
    close (s->p.fd_in);
  if (s->p.fd_out >= 0 && s->p.fd_out != s->p.fd_in)
    close (s->p.fd_out);
  if (s->p.fd_err >= 0)
    close (s->p.fd_err);
  s->p.fd_in = s->p.fd_out = s->p.fd_err = -1;
}

static void
session_free (BaSession *s)
{
  for (BaSession **pp = &sessions; *pp != NULL; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  while (s->natt > 0)
    ba_chan_end (s->att[0], false); /* detaches */
  session_close_fds (s);
  ba_ring_free (&s->ring);
  ba_buf_clear (&s->cmd);
  free (s->att);
  free (s);
}

static bool
session_attach (BaSession *s, BaChan *c, uint64_t cursor, bool owner)
{
  if (s->natt == s->catt) {
    int cap = s->catt ? s->catt * 2 : 4;
    BaChan **a = realloc (s->att, sizeof *a * (size_t) cap);
    if (a == NULL)
      return false;
    s->att = a;
    s->catt = cap;
  }
  s->att[s->natt++] = c;
  c->s = s;
  c->cursor = cursor;
  c->owner = owner;
  return true;
}

bool
ba_session_detach (BaChan *c, bool by_host)
{
  BaSession *s = c->s;
  bool hup = false;
  if (s == NULL)
    return false;
  for (int i = 0; i < s->natt; i++)
    if (s->att[i] == c) {
      s->att[i] = s->att[--s->natt];
      break;
    }
  if (by_host && c->owner && !s->detachable && !s->exited) {
    kill (-s->p.pid, SIGHUP);
    kill (-s->p.pid, SIGCONT);
    hup = true;
  }
  c->s = NULL;
  return hup;
}

/* How many more output bytes may be read now: a ring minus what the
 * slowest attached channel has not sent yet; unbounded when detached. */
static size_t
session_room (const BaSession *s)
{
  uint64_t lag = 0;
  if (s->natt == 0)
    return READ_CHUNK;
  for (int i = 0; i < s->natt; i++) {
    uint64_t cur = ba_ring_clamp (&s->ring, s->att[i]->cursor);
    if (s->ring.end - cur > lag)
      lag = s->ring.end - cur;
  }
  if (lag >= BA_SESSION_RING)
    return 0;
  return BA_SESSION_RING - lag < READ_CHUNK ? (size_t) (BA_SESSION_RING - lag) : READ_CHUNK;
}

/* One read from stream st into the ring. false at EOF or EAGAIN. */
static bool
session_read (BaSession *s, int st)
{
  static uint8_t buf[READ_CHUNK];
  int fd = st == BA_STDOUT ? s->p.fd_out : s->p.fd_err;
  size_t room = session_room (s);
  uint8_t *into = NULL;
  ssize_t r;
  if (s->eof[st] || fd < 0 || room == 0)
    return false;
  /* straight into the ring; through buf only when it has no memory left
   * (ba_ring_write() then counts the loss) */
  room = ba_ring_reserve (&s->ring, room, st, &into);
  if (room == 0) {
    into = NULL;
    room = session_room (s);
  }
  r = read (fd, into != NULL ? into : buf, room);
  if (r < 0 && errno == EINTR)
    return true;
  if (r < 0 && errno == EAGAIN)
    return false;
  if (r <= 0) { /* EOF, or EIO once a pty's last writer is gone */
    s->eof[st] = true;
    if (s->tty)
      s->eof[BA_STDERR] = true;
    return false;
  }
  if (into != NULL)
    ba_ring_commit (&s->ring, (size_t) r, st);
  else
    ba_ring_write (&s->ring, buf, (size_t) r, st);
  return true;
}

static void
on_out (void *obj, int st, short revents)
{
  BaSession *s = obj;
  /* a few reads per turn while the ring has room, as for plain exec */
  for (int i = 0; i < 8 && !s->done; i++)
    if (!session_read (s, st))
      break;
}

void
ba_session_poll_prepare (void)
{
  for (BaSession *s = sessions; s != NULL; s = s->next) {
    if (s->done || session_room (s) == 0)
      continue;
    if (!s->eof[BA_STDOUT])
      ba_poll_add (s->p.fd_out, POLLIN, on_out, s, BA_STDOUT);
    if (!s->eof[BA_STDERR])
      ba_poll_add (s->p.fd_err, POLLIN, on_out, s, BA_STDERR);
  }
}

/* Send one chunk of ring output to c. Returns true if it sent something. */
static bool
att_send (BaChan *c)
{
  BaSession *s = c->s;
  const uint8_t *buf;
  size_t want, n;
  int st;
  if (c->dead || c->window == 0 || s == NULL)
    return false;
  c->cursor = ba_ring_clamp (&s->ring, c->cursor);
  want = c->window < BA_DATA_CHUNK ? c->window : BA_DATA_CHUNK;
  /* straight from the ring into the frame (ba_send copies it) */
  n = ba_ring_peek (&s->ring, c->cursor, want, &buf, &st);
  if (n == 0)
    return false;
  c->cursor += n;
  c->window -= (uint32_t) n;
  ba_send (BA_DATA, (uint8_t) (s->tty ? BA_STDOUT : st), c->id, buf, n);
  return true;
}

static void
att_maybe_finish (BaChan *c)
{
  BaSession *s = c->s;
  BaBuf b = { 0 };
  if (c->dead || s == NULL || !s->done || c->cursor < s->ring.end || ba_out_pending () >= BA_OUT_QUEUE_HIGH)
    return;
  ba_exit_event (&b, s->status, s->timed_out, NULL);
  ba_send_json (c->id, &b);
  ba_chan_end (c, false);
}

void
ba_session_pump (void)
{
  bool more = true;
  /* round robin: one chunk per channel per round */
  while (more && ba_out_pending () < BA_OUT_QUEUE_HIGH) {
    more = false;
    for (BaSession *s = sessions; s != NULL; s = s->next)
      for (int i = 0; i < s->natt && ba_out_pending () < BA_OUT_QUEUE_HIGH; i++)
        more |= att_send (s->att[i]);
  }
  for (BaSession *s = sessions; s != NULL; s = s->next)
    for (int i = s->natt - 1; i >= 0; i--)
      if (i < s->natt)
        att_maybe_finish (s->att[i]);
}

void
ba_session_child_exited (int pid, int status)
{
  for (BaSession *s = sessions; s != NULL; s = s->next)
    if (s->p.pid == pid && !s->exited) {
      s->exited = true;
      s->status = status;
      s->exited_at = ba_now_ms ();
      return;
    }
}

int
ba_session_timeout (int64_t now)
{
  int64_t best = -1;
  for (BaSession *s = sessions; s != NULL; s = s->next) {
    int64_t t;
    if (!s->exited && s->deadline > 0)
      t = s->deadline - now;
    else if (s->exited && !s->done)
      t = 10;
    else if (s->done)
      t = s->exited_at + ba_session_keep_ms - now;
    else
      continue;
    if (t < 0)
      t = 0;
    if (best < 0 || t < best)
      best = t;
  }
  if (best < 0)
    return -1;
  return best > 0x7fffffff ? 0x7fffffff : (int) best;
}

void
ba_session_tick (int64_t now)
{
  for (BaSession *s = sessions, *next; s != NULL; s = next) {
    next = s->next;
    if (!s->exited && s->deadline > 0 && now >= s->deadline) {
      s->timed_out = true;
      s->deadline = 0;
      kill (-s->p.pid, SIGKILL);
    }
    if (s->exited && !s->done && session_room (s) > 0) {
      /* drain what the pipes hold; a background child keeping them open
       * is not waited for beyond 100 ms */
      for (int st = BA_STDOUT; st <= BA_STDERR; st++)
        for (int k = 0; k < 16 && session_room (s) > 0 && session_read (s, st); k++)
          ;
      if ((s->eof[BA_STDOUT] && s->eof[BA_STDERR]) || (now - s->exited_at >= 100 && session_room (s) > 0)) {
        s->done = true;
        session_close_fds (s);
      }
    }
    if (s->done && now - s->exited_at >= ba_session_keep_ms)
      session_free (s);
  }
}

/* ---- host interface ----------------------------------------------------- */

int
ba_session_stdin_fd (BaSession *s)
{
  return s != NULL && !s->done ? s->p.fd_in : -1;
}

bool
ba_session_tty (BaSession *s)
{
  return s != NULL && s->tty;
}

void
ba_session_stdin_eof (BaSession *s)
{
  if (s == NULL || s->p.fd_in < 0 || s->done)
    return;
  if (s->tty) {
    static const char eof_char = 4;
    (void) !write (s->p.fd_in, &eof_char, 1);
    return;
  }
  close (s->p.fd_in);
  s->p.fd_in = -1;
}

void
ba_session_ctrl (BaSession *s, const char *op, const BaJson *m)
{
  if (s == NULL)
    return;
  if (strcmp (op, "resize") == 0) {
    int64_t cols = 0, rows = 0;
    if (s->tty && !s->done && ba_json_get_int (m, "cols", &cols) && ba_json_get_int (m, "rows", &rows) &&
        cols > 0 && cols < 65536 && rows > 0 && rows < 65536) {
      struct winsize ws = { .ws_row = (unsigned short) rows, .ws_col = (unsigned short) cols };
      ioctl (s->p.fd_in >= 0 ? s->p.fd_in : s->p.fd_out, TIOCSWINSZ, &ws);
    }
  } else if (strcmp (op, "signal") == 0) {
    int sig = ba_signal_parse (ba_json_get (m, "signal"));
    if (sig > 0 && !s->exited)
      kill (-s->p.pid, sig);
  } else {
    ba_log ("session %s: unknown op %s", s->id, op);
  }
}

const char *
ba_session_by_pid (int pid)
{
  for (BaSession *s = sessions; s != NULL; s = s->next)
    if (s->p.pid == pid && !s->exited)
      return s->id;
  return NULL;
}

/* Make room for one more session: forget the session that exited first. */
static bool
session_make_room (void)
{
  int n = 0;
  BaSession *oldest = NULL;
  for (BaSession *s = sessions; s != NULL; s = s->next) {
    n++;
    if (s->done && (oldest == NULL || s->exited_at < oldest->exited_at))
      oldest = s;
  }
  if (n < BA_SESSION_MAX)
    return true;
  if (oldest == NULL)
    return false;
  session_free (oldest);
  return true;
}

void
ba_session_exec (int64_t id, uint32_t chan, const BaJson *req, int64_t timeout_ms)
{
  const char *sid = ba_json_get_str (req, "session");
  const BaJson *det = ba_json_get (req, "detachable");
  const BaJson *argv = ba_json_get (req, "argv");
  const char *code = NULL;
  char msg[512];
  BaSession *s;
  BaChan *c;
  BaBuf b = { 0 };

  if (!session_id_ok (sid)) {
    ba_reply_error (id, "invalid", "session must be s- and 10 characters [0-9a-z]");
    return;
  }
  if (det != NULL && det->type != BA_JBOOL) {
    ba_reply_error (id, "invalid", "detachable must be a boolean");
    return;
  }
  if (ba_json_get (req, "limit") != NULL) {
    ba_reply_error (id, "invalid", "limit cannot be used with a session");
    return;
  }
  if (session_find (sid) != NULL) {
    ba_reply_error (id, "invalid", "session id in use");
    return;
  }
  if (!session_make_room ()) {
    ba_reply_error (id, "failed", "too many sessions");
    return;
  }
  s = calloc (1, sizeof *s);
  if (s == NULL) {
    ba_reply_error (id, "start_failed", "out of memory");
    return;
  }
  if (!ba_spawn (req, &s->p, &code, msg, sizeof msg)) {
    free (s);
    ba_reply_error (id, code, msg);
    return;
  }
  snprintf (s->id, sizeof s->id, "%s", sid);
  s->tty = s->p.tty;
  s->detachable = det != NULL && det->b;
  s->started_at = unix_ms ();
  s->deadline = timeout_ms > 0 ? ba_now_ms () + timeout_ms : 0;
  s->eof[BA_STDIN] = true;
  if (s->p.fd_err < 0)
    s->eof[BA_STDERR] = true;
  ba_ring_init (&s->ring, BA_SESSION_RING);
  ba_buf_append (&s->cmd, "[", 1);
  for (const BaJson *a = argv->child; a != NULL; a = a->next) {
    if (a != argv->child)
      ba_buf_append (&s->cmd, ",", 1);
    ba_jw_raw_string (&s->cmd, a->s, a->slen);
  }
  ba_buf_append (&s->cmd, "]", 1);
  s->next = sessions;
  sessions = s;

  c = ba_chan_new (chan, BA_CH_ATTACH);
  if (c == NULL || !session_attach (s, c, 0, true)) {
    if (c != NULL)
      ba_chan_end (c, true);
    kill (-s->p.pid, SIGHUP);
    ba_reply_error (id, "start_failed", "out of memory");
    return;
  }
  ba_reply_begin (&b, id);
  ba_jw_int (&b, "chan", chan);
  ba_jw_int (&b, "pid", s->p.pid);
  ba_jw_str (&b, "session", s->id);
  ba_jw_end (&b);
  ba_send_json (0, &b);
}

static void
op_attach (int64_t id, const BaJson *m)
{
  const char *sid = ba_json_get_str (m, "session");
  const BaJson *off = ba_json_get (m, "offset");
  uint32_t chan;
  uint64_t start;
  BaSession *s;
  BaChan *c;
  BaBuf b = { 0 };

  if (!ba_chan_take_id (id, m, &chan))
    return;
  if (sid == NULL) {
    ba_reply_error (id, "invalid", "session is required");
    return;
  }
  if (off != NULL && (off->type != BA_JNUM || !off->is_int || off->i < 0)) {
    ba_reply_error (id, "invalid", "offset must be a non-negative integer");
    return;
  }
  s = session_find (sid);
  if (s == NULL) {
    ba_reply_error (id, "not_found", "no such session");
    return;
  }
  start = ba_ring_clamp (&s->ring, off != NULL ? (uint64_t) off->i : 0);
  c = ba_chan_new (chan, BA_CH_ATTACH);
  if (c == NULL || !session_attach (s, c, start, false)) {
    if (c != NULL)
      ba_chan_end (c, true);
    ba_reply_error (id, "failed", "out of memory");
    return;
  }
  ba_reply_begin (&b, id);
  ba_jw_int (&b, "chan", chan);
  ba_jw_str (&b, "session", s->id);
  ba_jw_int (&b, "offset", (int64_t) start);
  ba_jw_int (&b, "pid", s->p.pid);
  ba_jw_bool (&b, "tty", s->tty);
  ba_jw_bool (&b, "exited", s->exited);
  ba_jw_end (&b);
  ba_send_json (0, &b);
}

static void
op_sessions (int64_t id)
{
  BaBuf b = { 0 };
  int n = 0;
  BaSession **list;
  for (BaSession *s = sessions; s != NULL; s = s->next)
    n++;
  list = calloc ((size_t) n + 1, sizeof *list);
  if (list == NULL) {
    ba_reply_error (id, "failed", "out of memory");
    return;
  }
  n = 0;
  for (BaSession *s = sessions; s != NULL; s = s->next)
    list[n++] = s;
  ba_reply_begin (&b, id);
  ba_jw_key (&b, "sessions");
  ba_buf_append (&b, "[", 1);
  for (int i = n - 1; i >= 0; i--) { /* oldest first: the list is newest first */
    BaSession *s = list[i];
    ba_jw_begin (&b);
    ba_jw_str (&b, "id", s->id);
    ba_jw_key (&b, "cmd");
    ba_buf_append (&b, s->cmd.data, s->cmd.len);
    ba_jw_bool (&b, "tty", s->tty);
    ba_jw_int (&b, "pid", s->p.pid);
    ba_jw_int (&b, "started_at", s->started_at);
    ba_jw_bool (&b, "detachable", s->detachable);
    ba_jw_bool (&b, "exited", s->exited);
    if (s->exited)
      ba_jw_int (&b, "exit_code", WIFEXITED (s->status) ? WEXITSTATUS (s->status) : 128 + WTERMSIG (s->status));
    ba_jw_bool (&b, "attached", s->natt > 0);
    ba_jw_int (&b, "output_start", (int64_t) ba_ring_start (&s->ring));
    ba_jw_int (&b, "output_end", (int64_t) s->ring.end);
    ba_jw_end (&b);
  }
  ba_buf_append (&b, "]", 1);
  ba_jw_end (&b);
  free (list);
  if (b.len > BA_MAX_PAYLOAD) {
    ba_buf_clear (&b);
    ba_reply_error (id, "too_large", "too many sessions to list");
    return;
  }
  ba_send_json (0, &b);
}

static void
op_signal (int64_t id, const BaJson *m)
{
  const char *sid = ba_json_get_str (m, "session");
  int sig = ba_signal_parse (ba_json_get (m, "signal"));
  BaSession *s = sid != NULL ? session_find (sid) : NULL;
  if (sid == NULL || sig <= 0) {
    ba_reply_error (id, "invalid", "session and a valid signal are required");
    return;
  }
  if (s == NULL) {
    ba_reply_error (id, "not_found", "no such session");
    return;
  }
  if (s->exited) {
    ba_reply_error (id, "conflict", "the session has exited");
    return;
  }
  kill (-s->p.pid, sig);
  ba_reply_ok (id);
}

void
ba_session_op (int64_t id, const char *op, const BaJson *m)
{
  if (strcmp (op, "attach") == 0) {
    op_attach (id, m);
  } else if (strcmp (op, "sessions") == 0) {
    op_sessions (id);
  } else if (strcmp (op, "session-signal") == 0) {
    op_signal (id, m);
  } else if (strcmp (op, "detach-all") == 0) {
    int hung_up = 0, closed = ba_chan_detach_all (ba_json_get_bool (m, "agent_channels", false), &hung_up);
    BaBuf b = { 0 };
    ba_reply_begin (&b, id);
    ba_jw_int (&b, "closed", closed);
    ba_jw_int (&b, "hung_up", hung_up);
    ba_jw_end (&b);
    ba_send_json (0, &b);
  }
}
