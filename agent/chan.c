/* box guest agent: channels.
 *
 * A channel carries one process: DATA frames of stream 0 go to its stdin,
 * its stdout (1) and stderr (2) come back as DATA frames. Each direction has
 * a credit window: the agent never sends more output than the host granted
 * (so a fast producer is paused in its pipe, not buffered here), and the host
 * never sends more stdin than the agent granted (so stdin buffering is
 * bounded by the window). Output frames go out only while the connection's
 * output queue is short, channels taking turns, so one channel cannot starve
 * the others. */

#include "chan.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "exec.h"

#define OUT_QUEUE_HIGH (128u << 10)
#define CREDIT_BATCH (32u << 10)

typedef struct BaChan BaChan;
struct BaChan {
  uint32_t id;
  BaProc p;
  bool exited;
  int status;
  BaBuf in;               /* stdin not yet written */
  bool in_eof;            /* host sent EOF for stdin */
  uint32_t in_uncredited; /* stdin bytes written but not yet credited back */
  uint32_t window;        /* output bytes the host still accepts */
  uint64_t limit;         /* per stream, 0 = unlimited; beyond it output is dropped */
  uint64_t sent[3];
  bool trunc[3];
  bool eof[3];            /* stdout/stderr reached EOF (or EIO on a pty) */
  int64_t deadline;       /* monotonic ms, 0 = none */
  int64_t exited_at;
  bool timed_out;
  BaChan *next;
};

static BaChan *chans;
static uint32_t initial_window = BA_DEFAULT_WINDOW;

void
ba_chan_set_window (uint32_t window)
{
  initial_window = window >= 4096 ? window : 4096;
}

int
ba_chan_count (void)
{
  int n = 0;
  for (BaChan *c = chans; c != NULL; c = c->next)
    n++;
  return n;
}

static BaChan *
chan_find (uint32_t id)
{
  for (BaChan *c = chans; c != NULL; c = c->next)
    if (c->id == id)
      return c;
  return NULL;
}

static void
reply_error (int64_t id, const char *code, const char *msg)
{
  BaBuf b = { 0 };
  ba_jw_begin (&b);
  ba_jw_int (&b, "id", id);
  ba_jw_bool (&b, "ok", false);
  ba_jw_key (&b, "error");
  ba_jw_begin (&b);
  ba_jw_str (&b, "code", code);
  ba_jw_str (&b, "message", msg);
  ba_jw_end (&b);
  ba_jw_end (&b);
  ba_send_json (0, &b);
}

void
ba_chan_exec (int64_t id, uint32_t chan, const BaJson *req)
{
  const char *code = NULL;
  char msg[512];
  int64_t timeout_ms = 0, limit = 0;
  BaChan *c;
  BaBuf b = { 0 };

  if (chan == 0 || chan_find (chan) != NULL) {
    reply_error (id, BA_E_INVALID, chan == 0 ? "chan must be non-zero" : "channel in use");
    return;
  }
  if ((ba_json_get (req, "timeout_ms") != NULL && (!ba_json_get_int (req, "timeout_ms", &timeout_ms) || timeout_ms < 0)) ||
      (ba_json_get (req, "limit") != NULL && (!ba_json_get_int (req, "limit", &limit) || limit < 0))) {
    reply_error (id, BA_E_INVALID, "timeout_ms and limit must be non-negative integers");
    return;
  }
  c = calloc (1, sizeof *c);
  if (c == NULL) {
    reply_error (id, BA_E_START, "out of memory");
    return;
  }
  if (!ba_spawn (req, &c->p, &code, msg, sizeof msg)) {
    free (c);
    reply_error (id, code, msg);
    return;
  }
  c->id = chan;
  c->window = initial_window;
  c->limit = (uint64_t) limit;
  c->deadline = timeout_ms > 0 ? ba_now_ms () + timeout_ms : 0;
  c->eof[BA_STDIN] = true;
  if (c->p.fd_err < 0)
    c->eof[BA_STDERR] = true;
  c->next = chans;
  chans = c;

  ba_jw_begin (&b);
  ba_jw_int (&b, "id", id);
  ba_jw_bool (&b, "ok", true);
  ba_jw_int (&b, "chan", chan);
  ba_jw_int (&b, "pid", c->p.pid);
  ba_jw_end (&b);
  ba_send_json (0, &b);
}

static void
chan_free (BaChan *c, bool hangup)
{
  for (BaChan **pp = &chans; *pp != NULL; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  if (hangup && !c->exited) {
    kill (-c->p.pid, SIGHUP);
    kill (-c->p.pid, SIGCONT);
  }
  if (c->p.fd_in >= 0)
    close (c->p.fd_in);
  if (c->p.fd_out >= 0)
    close (c->p.fd_out);
  if (c->p.fd_err >= 0)
    close (c->p.fd_err);
  ba_buf_clear (&c->in);
  free (c);
}

void
ba_chan_close_all (void)
{
  while (chans != NULL)
    chan_free (chans, true);
}

static int
signal_by_name (const BaJson *v)
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
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp (v->s, names[i].name) == 0 || (strncmp (v->s, "SIG", 3) == 0 && strcmp (v->s + 3, names[i].name) == 0))
      return names[i].sig;
  return -1;
}

static void
chan_ctrl (BaChan *c, const uint8_t *payload, uint32_t len)
{
  const char *err = NULL;
  BaJson *m = ba_json_parse ((const char *) payload, len, &err);
  const char *op = ba_json_get_str (m, "op");
  if (m == NULL || op == NULL) {
    ba_log ("chan %u: bad control message: %s", c->id, err != NULL ? err : "no op");
  } else if (strcmp (op, "resize") == 0) {
    int64_t cols = 0, rows = 0;
    if (c->p.tty && ba_json_get_int (m, "cols", &cols) && ba_json_get_int (m, "rows", &rows) &&
        cols > 0 && cols < 65536 && rows > 0 && rows < 65536) {
      struct winsize ws = { .ws_row = (unsigned short) rows, .ws_col = (unsigned short) cols };
      ioctl (c->p.fd_in, TIOCSWINSZ, &ws);
    }
  } else if (strcmp (op, "signal") == 0) {
    int sig = signal_by_name (ba_json_get (m, "signal"));
    if (sig > 0 && !c->exited)
      kill (-c->p.pid, sig);
  } else {
    ba_log ("chan %u: unknown op %s", c->id, op);
  }
  ba_json_free (m);
}

void
ba_chan_frame (const BaFrame *f, const uint8_t *payload)
{
  BaChan *c = chan_find (f->chan);
  if (c == NULL) {
    /* Late frames for a channel that is gone are normal; tell the host once
     * more that it is closed unless it is closing it itself. */
    if (f->type == BA_DATA || f->type == BA_CTRL)
      ba_send (BA_CLOSE, 0, f->chan, NULL, 0);
    return;
  }
  switch (f->type) {
  case BA_DATA:
    if (c->in_eof || c->p.fd_in < 0)
      break; /* stdin closed: dropped */
    ba_buf_append (&c->in, payload, f->len);
    break;
  case BA_EOF:
    if (f->stream == BA_STDIN)
      c->in_eof = true;
    break;
  case BA_CREDIT:
    c->window += ba_get_u32 (payload);
    break;
  case BA_CTRL:
    chan_ctrl (c, payload, f->len);
    break;
  case BA_CLOSE:
    chan_free (c, true);
    ba_send (BA_CLOSE, 0, f->chan, NULL, 0);
    break;
  default:
    break;
  }
}

int
ba_chan_poll_prepare (struct pollfd *pfd, int max)
{
  int n = 0;
  bool room = ba_out_pending () < OUT_QUEUE_HIGH;
  for (BaChan *c = chans; c != NULL && n + 3 <= max; c = c->next) {
    /* stdin: the pty master doubles as output, so use a separate slot */
    pfd[n++] = (struct pollfd) { .fd = (c->in.len > 0 && c->p.fd_in >= 0) ? c->p.fd_in : -1, .events = POLLOUT };
    for (int s = BA_STDOUT; s <= BA_STDERR; s++) {
      int fd = s == BA_STDOUT ? c->p.fd_out : c->p.fd_err;
      bool want = !c->eof[s] && fd >= 0 && room && (c->window > 0 || (c->limit > 0 && c->sent[s] >= c->limit));
      pfd[n++] = (struct pollfd) { .fd = want ? fd : -1, .events = POLLIN };
    }
  }
  return n;
}

/* Read what the stream has (one chunk). Returns false at EOF/EAGAIN. */
static bool
chan_pump_out (BaChan *c, int s)
{
  uint8_t buf[BA_DATA_CHUNK];
  int fd = s == BA_STDOUT ? c->p.fd_out : c->p.fd_err;
  bool discard = c->limit > 0 && c->sent[s] >= c->limit;
  size_t want = discard ? sizeof buf : (c->window < sizeof buf ? c->window : sizeof buf);
  ssize_t r;

  if (c->eof[s] || fd < 0 || want == 0)
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
chan_pump_in (BaChan *c)
{
  while (c->in.len > 0) {
    ssize_t w = write (c->p.fd_in, c->in.data, c->in.len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno == EAGAIN)
      break;
    if (w < 0) { /* EPIPE: the process closed stdin; drop the rest */
      c->in_uncredited += (uint32_t) c->in.len;
      c->in.len = 0;
      c->in_eof = true;
      break;
    }
    c->in_uncredited += (uint32_t) w;
    ba_buf_consume (&c->in, (size_t) w);
  }
  if (c->in_uncredited >= CREDIT_BATCH || (c->in.len == 0 && c->in_uncredited > 0)) {
    uint8_t p[4];
    ba_put_u32 (p, c->in_uncredited);
    ba_send (BA_CREDIT, BA_STDIN, c->id, p, 4);
    c->in_uncredited = 0;
  }
}

/* Close stdin once the host sent EOF and everything was written. */
static void
chan_maybe_close_stdin (BaChan *c)
{
  if (c->in_eof && c->in.len == 0 && c->p.fd_in >= 0 && !c->p.tty) {
    close (c->p.fd_in);
    c->p.fd_in = -1;
  } else if (c->in_eof && c->in.len == 0 && c->p.tty && c->p.fd_in >= 0) {
    /* A terminal has no half-close: send the EOF character once. */
    static const char eof_char = 4;
    (void) !write (c->p.fd_in, &eof_char, 1);
    c->in_eof = false;
  }
}

void
ba_chan_poll_handle (struct pollfd *pfd, int n)
{
  int i = 0;
  for (BaChan *c = chans, *next; c != NULL && i + 3 <= n; c = next, i += 3) {
    next = c->next;
    if (pfd[i].revents != 0)
      chan_pump_in (c);
    for (int s = BA_STDOUT; s <= BA_STDERR; s++)
      if (pfd[i + s].revents != 0)
        chan_pump_out (c, s);
    chan_maybe_close_stdin (c);
  }
}

void
ba_chan_child_exited (int pid, int status)
{
  for (BaChan *c = chans; c != NULL; c = c->next)
    if (c->p.pid == pid && !c->exited) {
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

static void
chan_finish (BaChan *c)
{
  BaBuf b = { 0 };
  int code = WIFEXITED (c->status) ? WEXITSTATUS (c->status) : 128 + WTERMSIG (c->status);
  ba_jw_begin (&b);
  ba_jw_str (&b, "event", "exit");
  ba_jw_int (&b, "code", code);
  if (WIFSIGNALED (c->status))
    ba_jw_int (&b, "signal", WTERMSIG (c->status));
  ba_jw_bool (&b, "timed_out", c->timed_out);
  ba_jw_bool (&b, "stdout_truncated", c->trunc[BA_STDOUT]);
  ba_jw_bool (&b, "stderr_truncated", c->trunc[BA_STDERR]);
  ba_jw_end (&b);
  ba_send_json (c->id, &b);
  ba_send (BA_CLOSE, 0, c->id, NULL, 0);
  chan_free (c, false);
}

void
ba_chan_tick (int64_t now)
{
  for (BaChan *c = chans, *next; c != NULL; c = next) {
    next = c->next;
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
    if (ba_out_pending () >= OUT_QUEUE_HIGH)
      continue;
    while (chan_pump_out (c, BA_STDOUT))
      if (ba_out_pending () >= OUT_QUEUE_HIGH)
        break;
    while (chan_pump_out (c, BA_STDERR))
      if (ba_out_pending () >= OUT_QUEUE_HIGH)
        break;
    if ((c->eof[BA_STDOUT] && c->eof[BA_STDERR]) ||
        (c->window > 0 && now - c->exited_at >= 100 && ba_out_pending () < OUT_QUEUE_HIGH))
      chan_finish (c);
  }
}
