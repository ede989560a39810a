/* box guest agent: channels (see chan.h) and the plain exec channel.
 *
 * A plain exec channel carries one process: DATA frames of stream 0 go to
 * its stdin, its stdout (1) and stderr (2) come back as DATA frames. Each
 * direction has a credit window: the agent never sends more output than the
 * host granted (so a fast producer is paused in its pipe, not buffered here),
 * and the host never sends more stdin than the agent granted (so stdin
 * buffering is bounded by the window). Output is read only while the
 * connection's output queue is short, channels taking turns, so one channel
 * cannot starve the others. */

#include "chan.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "exec.h"
#include "session.h"
#include "work.h"

#define CREDIT_BATCH (32u << 10)

static BaChan *chans;
static uint32_t initial_window = BA_DEFAULT_WINDOW;

void
ba_chan_set_window (uint32_t window)
{
  initial_window = window >= 4096 ? window : 4096;
}

uint32_t
ba_chan_get_window (void)
{
  return initial_window;
}

int
ba_chan_count (void)
{
  int n = 0;
  for (BaChan *c = chans; c != NULL; c = c->next)
    n += !c->dead;
  return n;
}

BaChan *
ba_chan_first (void)
{
  return chans;
}

BaChan *
ba_chan_find (uint32_t id)
{
  for (BaChan *c = chans; c != NULL; c = c->next)
    if (c->id == id && !c->dead)
      return c;
  return NULL;
}

BaChan *
ba_chan_new (uint32_t id, BaChanKind kind)
{
  BaChan *c = calloc (1, sizeof *c);
  if (c == NULL)
    return NULL;
  c->id = id;
  c->kind = kind;
  c->window = initial_window;
  c->p.fd_in = c->p.fd_out = c->p.fd_err = -1;
  c->fd = -1;
  c->eof[BA_STDIN] = true;
  c->next = chans;
  chans = c;
  return c;
}

bool
ba_chan_take_id (int64_t id, const BaJson *req, uint32_t *chan)
{
  int64_t v = 0;
  if (!ba_json_get_int (req, "chan", &v) || v <= 0 || v > 0x7fffffff) {
    ba_reply_error (id, "invalid", "chan must be 1 to 2^31-1");
    return false;
  }
  if (ba_chan_find ((uint32_t) v) != NULL) {
    ba_reply_error (id, "invalid", "channel in use");
    return false;
  }
  *chan = (uint32_t) v;
  return true;
}

/* Release what the channel's work holds, for an end the host caused (CLOSE,
 * the connection gone, detach-all). Returns true when a process group was
 * sent SIGHUP. */
static bool
chan_abandon (BaChan *c)
{
  switch (c->kind) {
  case BA_CH_PROC:
    if (c->w != NULL) {
      ba_work_abort (c->w);
      c->w = NULL;
      return false;
    }
    if (!c->exited) {
      kill (-c->p.pid, SIGHUP);
      kill (-c->p.pid, SIGCONT);
      return true;
    }
    return false;
  case BA_CH_ATTACH:
    return ba_session_detach (c, true);
  case BA_CH_SOCK:
    return false;
  }
  return false;
}

void
ba_chan_end (BaChan *c, bool quiet)
{
  if (c->dead)
    return;
  if (c->kind == BA_CH_ATTACH)
    ba_session_detach (c, false);
  if (c->w != NULL) {
    ba_work_forget_chan (c->w);
    c->w = NULL;
  }
  if (!quiet)
    ba_send (BA_CLOSE, 0, c->id, NULL, 0);
  c->dead = true;
}

static void
chan_free (BaChan *c)
{
  if (c->p.fd_in >= 0)
    close (c->p.fd_in);
  if (c->p.fd_out >= 0 && c->p.fd_out != c->p.fd_in)
    close (c->p.fd_out);
  if (c->p.fd_err >= 0)
    close (c->p.fd_err);
  if (c->fd >= 0)
    close (c->fd);
  ba_buf_clear (&c->in);
  free (c);
}

void
ba_chan_sweep (void)
{
  for (BaChan **pp = &chans; *pp != NULL; ) {
    BaChan *c = *pp;
    if (c->dead) {
      *pp = c->next;
      chan_free (c);
    } else {
      pp = &c->next;
    }
  }
}

void
ba_chan_close_all (void)
{
  for (BaChan *c = chans; c != NULL; c = c->next)
    if (!c->dead) {
      chan_abandon (c);
      ba_chan_end (c, true);
    }
  ba_work_abort_all ();
}

int
ba_chan_detach_all (bool agent, int *hung_up)
{
  int n = 0;
  *hung_up = 0;
  for (BaChan *c = chans; c != NULL; c = c->next)
    if (!c->dead && (agent || c->id < 0x80000000u)) {
      if (chan_abandon (c))
        (*hung_up)++;
      ba_chan_end (c, false);
      n++;
    }
  return n;
}

/* kill -l's real-time names: RTMIN, RTMIN+n, RTMAX-n, RTMAX. */
static int
rt_signal (const char *name)
{
  int base, sign, sig;
  char *end;
  long n = 0;
  if (strncmp (name, "RTMIN", 5) == 0) {
    base = SIGRTMIN;
    sign = 1;
  } else if (strncmp (name, "RTMAX", 5) == 0) {
    base = SIGRTMAX;
    sign = -1;
  } else {
    return -1;
  }
  name += 5;
  if (*name != 0) {
    if (*name != (sign > 0 ? '+' : '-') || name[1] < '1' || name[1] > '9')
      return -1;
    errno = 0;
    n = strtol (name + 1, &end, 10);
    if (*end != 0 || errno != 0 || n > SIGRTMAX - SIGRTMIN)
      return -1;
  }
  sig = base + sign * (int) n;
  return sig >= SIGRTMIN && sig <= SIGRTMAX ? sig : -1;
}

int
ba_signal_parse (const BaJson *v)
{
  static const struct { const char *name; int sig; } names[] = {
    { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "ILL", SIGILL }, { "TRAP", SIGTRAP },
    { "ABRT", SIGABRT }, { "BUS", SIGBUS }, { "FPE", SIGFPE }, { "KILL", SIGKILL }, { "USR1", SIGUSR1 },
    { "SEGV", SIGSEGV }, { "USR2", SIGUSR2 }, { "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
    { "STKFLT", SIGSTKFLT }, { "CHLD", SIGCHLD }, { "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "TSTP", SIGTSTP },
    { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU }, { "URG", SIGURG }, { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ },
    { "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH }, { "IO", SIGIO }, { "PWR", SIGPWR },
    { "SYS", SIGSYS },
  };
  if (v == NULL)
    return -1;
  if (v->type == BA_JNUM && v->is_int && v->i > 0 && v->i < NSIG)
    return (int) v->i;
  if (v->type != BA_JSTR)
    return -1;
  const char *name = strncmp (v->s, "SIG", 3) == 0 ? v->s + 3 : v->s;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp (name, names[i].name) == 0)
      return names[i].sig;
  return rt_signal (name);
}

/* ---- plain exec ------------------------------------------------------------ */

void
ba_chan_exec (int64_t id, uint32_t chan, const BaJson *req)
{
  const char *code = NULL;
  char msg[512];
  int64_t timeout_ms = 0, limit = 0;
  BaProc p;
  BaChan *c;
  BaBuf b = { 0 };

  if (ba_chan_find (chan) != NULL) {
    ba_reply_error (id, BA_E_INVALID, "channel in use");
    return;
  }
  if ((ba_json_get (req, "timeout_ms") != NULL && (!ba_json_get_int (req, "timeout_ms", &timeout_ms) || timeout_ms < 0)) ||
      (ba_json_get (req, "limit") != NULL && (!ba_json_get_int (req, "limit", &limit) || limit < 0))) {
    ba_reply_error (id, BA_E_INVALID, "timeout_ms and limit must be non-negative integers");
    return;
  }
  if (ba_json_get (req, "session") != NULL || ba_json_get_bool (req, "detachable", false)) {
    ba_session_exec (id, chan, req, timeout_ms);
    return;
  }
  if (!ba_spawn (req, &p, &code, msg, sizeof msg)) {
    ba_reply_error (id, code, msg);
    return;
  }
  c = ba_chan_new (chan, BA_CH_PROC);
  if (c == NULL) {
    kill (-p.pid, SIGKILL);
    close (p.fd_in);
    if (p.fd_out != p.fd_in)
      close (p.fd_out);
    if (p.fd_err >= 0)
      close (p.fd_err);
    ba_reply_error (id, BA_E_START, "out of memory");
    return;
  }
  c->p = p;
  c->limit = (uint64_t) limit;
  c->deadline = timeout_ms > 0 ? ba_now_ms () + timeout_ms : 0;
  if (c->p.fd_err < 0)
    c->eof[BA_STDERR] = true;

  ba_reply_begin (&b, id);
  ba_jw_int (&b, "chan", chan);
  ba_jw_int (&b, "pid", c->p.pid);
  ba_jw_end (&b);
  ba_send_json (0, &b);
}

static void
chan_ctrl (BaChan *c, const uint8_t *payload, uint32_t len)
{
  const char *err = NULL;
  BaJson *m = ba_json_parse ((const char *) payload, len, &err);
  const char *op = ba_json_get_str (m, "op");
  if (m == NULL || op == NULL) {
    ba_log ("chan %u: bad control message: %s", c->id, err != NULL ? err : "no op");
  } else if (c->kind == BA_CH_ATTACH) {
    ba_session_ctrl (c->s, op, m);
  } else if (c->kind == BA_CH_PROC && c->w == NULL && strcmp (op, "resize") == 0) {
    int64_t cols = 0, rows = 0;
    if (c->p.tty && ba_json_get_int (m, "cols", &cols) && ba_json_get_int (m, "rows", &rows) &&
        cols > 0 && cols < 65536 && rows > 0 && rows < 65536) {
      struct winsize ws = { .ws_row = (unsigned short) rows, .ws_col = (unsigned short) cols };
      ioctl (c->p.fd_in, TIOCSWINSZ, &ws);
    }
  } else if (c->kind == BA_CH_PROC && c->w == NULL && strcmp (op, "signal") == 0) {
    int sig = ba_signal_parse (ba_json_get (m, "signal"));
    if (sig > 0 && !c->exited)
      kill (-c->p.pid, sig);
  } else {
    ba_log ("chan %u: unknown op %s", c->id, op);
  }
  ba_json_free (m);
}

/* ---- host input (stream 0) ------------------------------------------------ */

static void chan_pump_in (BaChan *c);

void
ba_chan_work_ready (BaChan *c, int fd)
{
  if (fd >= 0 && (c->in_closed || c->dead)) {
    close (fd);
  } else if (fd >= 0) {
    if (c->p.fd_in >= 0)
      close (c->p.fd_in);
    c->p.fd_in = fd;
  }
  if (!c->dead)
    chan_pump_in (c); /* what the host sent early, or its EOF */
}

/* Host input held until the work is set up */
static bool
chan_in_held (BaChan *c)
{
  return c->kind == BA_CH_PROC && c->w != NULL && !ba_work_replied (c->w);
}

static int
chan_in_fd (BaChan *c)
{
  switch (c->kind) {
  case BA_CH_PROC:
    return chan_in_held (c) ? -1 : c->p.fd_in;
  case BA_CH_ATTACH:
    return ba_session_stdin_fd (c->s);
  case BA_CH_SOCK:
    return c->connecting ? -1 : c->fd;
  }
  return -1;
}

void
ba_chan_credit (BaChan *c, uint32_t n, bool flush)
{
  c->in_uncredited += n;
  if (c->in_uncredited >= CREDIT_BATCH || (flush && c->in_uncredited > 0)) {
    uint8_t p[4];
    ba_put_u32 (p, c->in_uncredited);
    ba_send (BA_CREDIT, BA_STDIN, c->id, p, 4);
    c->in_uncredited = 0;
  }
}

/* Pass the host's EOF on once everything before it was written. */
static void
chan_maybe_close_in (BaChan *c)
{
  if (!c->in_eof || c->in_closed || c->in.len > 0 || c->dead || chan_in_held (c))
    return;
  switch (c->kind) {
  case BA_CH_PROC:
    if (c->p.tty && c->p.fd_in >= 0) {
      /* A terminal has no half-close: send the EOF character once. */
      static const char eof_char = 4;
      (void) !write (c->p.fd_in, &eof_char, 1);
      c->in_eof = false; /* a later EOF sends it again */
      return;
    }
    if (c->p.fd_in >= 0) {
      close (c->p.fd_in);
      c->p.fd_in = -1;
    }
    if (c->w != NULL)
      ba_work_input_done (c->w, c->in_err);
    break;
  case BA_CH_ATTACH:
    ba_session_stdin_eof (c->s);
    if (ba_session_tty (c->s)) {
      c->in_eof = false;
      return;
    }
    break;
  case BA_CH_SOCK:
    if (c->connecting)
      return;
    shutdown (c->fd, SHUT_WR);
    break;
  }
  c->in_closed = true;
}

static void
chan_pump_in (BaChan *c)
{
  int fd = chan_in_fd (c);
  while (c->in.len > 0 && fd >= 0) {
    ssize_t w = write (fd, c->in.data, c->in.len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno == EAGAIN)
      break;
    if (w <= 0) {
      /* EPIPE: the reader is gone; a worker's file (a full file system):
       * the worker reports the error. Either way the rest is dropped. */
      if (c->w != NULL)
        c->in_err = w < 0 ? errno : EIO;
      ba_chan_credit (c, (uint32_t) c->in.len, false);
      c->in.len = 0;
      c->in_eof = true;
      break;
    }
    ba_chan_credit (c, (uint32_t) w, false);
    ba_buf_consume (&c->in, (size_t) w);
  }
  if (c->in.len == 0)
    ba_chan_credit (c, 0, true);
  chan_maybe_close_in (c);
}

static void
on_in (void *obj, int tag, short revents)
{
  BaChan *c = obj;
  if (!c->dead)
    chan_pump_in (c);
}

void
ba_chan_frame (const BaFrame *f, const uint8_t *payload)
{
  BaChan *c = ba_chan_find (f->chan);
  if (c == NULL) {
    /* Late frames for a channel that is gone are normal; tell the host once
     * more that it is closed unless it is closing it itself. */
    if (f->type == BA_DATA || f->type == BA_CTRL)
      ba_send (BA_CLOSE, 0, f->chan, NULL, 0);
    return;
  }
  switch (f->type) {
  case BA_DATA:
    if (f->stream != BA_STDIN || c->in_eof || c->in_closed ||
        (chan_in_fd (c) < 0 && !chan_in_held (c) && !(c->kind == BA_CH_SOCK && c->connecting))) {
      ba_chan_credit (c, f->len, true); /* input closed: dropped */
      break;
    }
    if (c->in.len == 0 && chan_in_fd (c) >= 0) {
      /* nothing queued: straight to the process or socket, saving a copy
       * and a trip through poll; what does not fit waits for POLLOUT */
      ssize_t w = write (chan_in_fd (c), payload, f->len);
      if (w > 0) {
        ba_chan_credit (c, (uint32_t) w, false);
        payload += w;
        ba_buf_append (&c->in, payload, f->len - (size_t) w);
        if (c->in.len == 0)
          ba_chan_credit (c, 0, true);
        break;
      }
    }
    ba_buf_append (&c->in, payload, f->len);
    break;
  case BA_EOF:
    if (f->stream == BA_STDIN) {
      c->in_eof = true;
      chan_maybe_close_in (c);
    }
    break;
  case BA_CREDIT: {
    uint64_t w = (uint64_t) c->window + ba_get_u32 (payload);
    c->window = w > 0xffffffffu ? 0xffffffffu : (uint32_t) w;
    break;
  }
  case BA_CTRL:
    chan_ctrl (c, payload, f->len);
    break;
  case BA_CLOSE:
    chan_abandon (c);
    ba_chan_end (c, false);
    break;
  default:
    break;
  }
}

/* ---- process output ------------------------------------------------------- */

/* Read what the stream has (one chunk). Returns false at EOF/EAGAIN. */
static bool
chan_pump_out (BaChan *c, int s)
{
  uint8_t buf[BA_DATA_CHUNK];
  int fd = s == BA_STDOUT ? c->p.fd_out : c->p.fd_err;
  bool discard = c->limit > 0 && c->sent[s] >= c->limit;
  size_t want = discard ? sizeof buf : (c->window < sizeof buf ? c->window : sizeof buf);
  ssize_t r;

  if (c->eof[s] || fd < 0 || want == 0 || c->dead)
    return false;
  if (!discard && c->limit > 0 && c->limit - c->sent[s] < want)
    want = (size_t) (c->limit - c->sent[s]);
  r = read (fd, buf, want);
  if (r < 0 && errno == EINTR)
    return true;
  if (r < 0 && errno == EAGAIN)
    return false;
  if (r <= 0) { /* EOF, or EIO when a pty's last writer is gone */
    c->eof[s] = true;
    if (c->p.tty)
      c->eof[BA_STDERR] = true;
    /* a worker's EOF waits for its result: sent only when it succeeded */
    if (c->w == NULL)
      ba_send (BA_EOF, (uint8_t) s, c->id, NULL, 0);
    return false;
  }
  if (discard) {
    c->trunc[s] = true;
    return true;
  }
  c->sent[s] += (uint64_t) r;
  c->window -= (uint32_t) r;
  ba_send (BA_DATA, (uint8_t) s, c->id, buf, (size_t) r);
  return true;
}

static void
on_out (void *obj, int s, short revents)
{
  BaChan *c = obj;
  /* a few chunks per turn while the host has room: fewer loop turns for a
   * fast producer, still bounded so the other channels get their turn */
  for (int i = 0; i < 8 && ba_out_pending () < BA_OUT_QUEUE_HIGH; i++)
    if (!chan_pump_out (c, s))
      break;
}

void
ba_chan_poll_prepare (void)
{
  bool room = ba_out_pending () < BA_OUT_QUEUE_HIGH;
  for (BaChan *c = chans; c != NULL; c = c->next) {
    int fd;
    if (c->dead)
      continue;
    fd = chan_in_fd (c);
    if (c->in.len > 0 && fd >= 0)
      ba_poll_add (fd, POLLOUT, on_in, c, 0);
    if (c->kind != BA_CH_PROC || !room || (c->w != NULL && !ba_work_replied (c->w)))
      continue;
    for (int s = BA_STDOUT; s <= BA_STDERR; s++) {
      fd = s == BA_STDOUT ? c->p.fd_out : c->p.fd_err;
      if (!c->eof[s] && fd >= 0 && (c->window > 0 || (c->limit > 0 && c->sent[s] >= c->limit)))
        ba_poll_add (fd, POLLIN, on_out, c, s);
    }
  }
}

void
ba_chan_child_exited (int pid, int status)
{
  for (BaChan *c = chans; c != NULL; c = c->next)
    if (c->kind == BA_CH_PROC && c->w == NULL && c->p.pid == pid && !c->exited && !c->dead) {
      c->exited = true;
      c->status = status;
      c->exited_at = ba_now_ms ();
      return;
    }
}

int
ba_chan_timeout (int64_t now)
{
  int64_t best = -1;
  for (BaChan *c = chans; c != NULL; c = c->next) {
    int64_t t = -1;
    if (c->dead || c->kind != BA_CH_PROC || c->w != NULL)
      continue;
    if (!c->exited && c->deadline > 0)
      t = c->deadline - now;
    else if (c->exited)
      t = 10; /* finishing: drain and re-check soon */
    if (t >= 0 && (best < 0 || t < best))
      best = t;
  }
  if (best < 0)
    return -1;
  return best > 0 ? (int) best : 0;
}

/* {"event":"exit",...} for a wait status. */
void
ba_exit_event (BaBuf *b, int status, bool timed_out, const bool trunc[3])
{
  int code = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
  ba_jw_begin (b);
  ba_jw_str (b, "event", "exit");
  ba_jw_int (b, "code", code);
  if (WIFSIGNALED (status))
    ba_jw_int (b, "signal", WTERMSIG (status));
  ba_jw_bool (b, "timed_out", timed_out);
  ba_jw_bool (b, "stdout_truncated", trunc != NULL && trunc[BA_STDOUT]);
  ba_jw_bool (b, "stderr_truncated", trunc != NULL && trunc[BA_STDERR]);
  ba_jw_end (b);
}

static void
chan_finish (BaChan *c)
{
  BaBuf b = { 0 };
  ba_exit_event (&b, c->status, c->timed_out, c->trunc);
  ba_send_json (c->id, &b);
  ba_chan_end (c, false);
}

void
ba_chan_tick (int64_t now)
{
  for (BaChan *c = chans; c != NULL; c = c->next) {
    if (c->dead || c->kind != BA_CH_PROC)
      continue;
    if (c->w != NULL) {
      /* a worker's channel ends once its output is drained and the worker
       * finished (its last events go first) */
      if (ba_work_finished (c->w) &&
          (c->p.fd_out < 0 || c->eof[BA_STDOUT] || !ba_work_replied (c->w) || ba_work_failed (c->w)))
        ba_work_end_chan (c->w);
      continue;
    }
    if (!c->exited && c->deadline > 0 && now >= c->deadline) {
      c->timed_out = true;
      c->deadline = 0;
      kill (-c->p.pid, SIGKILL);
    }
    if (!c->exited)
      continue;
    /* The process is gone: drain what its pipes hold (output written by a
     * background child afterwards is not waited for beyond 100 ms), then
     * report the exit once the host has room for it. */
    if (ba_out_pending () >= BA_OUT_QUEUE_HIGH)
      continue;
    while (chan_pump_out (c, BA_STDOUT))
      if (ba_out_pending () >= BA_OUT_QUEUE_HIGH)
        break;
    while (chan_pump_out (c, BA_STDERR))
      if (ba_out_pending () >= BA_OUT_QUEUE_HIGH)
        break;
    if ((c->eof[BA_STDOUT] && c->eof[BA_STDERR]) ||
        (c->window > 0 && now - c->exited_at >= 100 && ba_out_pending () < BA_OUT_QUEUE_HIGH))
      chan_finish (c);
  }
}
