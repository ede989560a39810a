/* box guest agent: workers. See work.h. */

#include "work.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "logs.h"

#define MAX_LINE (BA_MAX_PAYLOAD + 4096)

struct BaWorker {
  pid_t pid;
  int res;            /* our end of the result socket */
  BaBuf buf;          /* partial line */
  BaBuf events;       /* event lines held until the output is drained */
  int64_t id;         /* the request */
  uint32_t chan_id;
  BaChan *chan;
  int in_fd;          /* the file the worker passed for the host's input, or -1 */
  bool has_out;
  bool graceful;      /* has host input: abandoned by closing it, not killed */
  bool replied, failed, exited, res_eof, dead;
  int status;
  BaWorker *next;
};

static BaWorker *workers;

/* ---- child side ----------------------------------------------------------- */

static void
write_all (int fd, const void *p, size_t n)
{
  while (n > 0) {
    ssize_t w = write (fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      _exit (3);
    p = (const uint8_t *) p + w;
    n -= (size_t) w;
  }
}

/* A result line; with fd >= 0 the descriptor goes along with it
 * (SCM_RIGHTS), arriving at the agent no later than the line. */
static void
send_line_fd (BaWorkCtx *w, BaBuf *b, int fd)
{
  union {
    struct cmsghdr h;
    char space[CMSG_SPACE (sizeof (int))];
  } u;
  struct iovec iov;
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.space, .msg_controllen = sizeof u.space };
  struct cmsghdr *cm = CMSG_FIRSTHDR (&msg);
  ssize_t r;

  ba_buf_append (b, "\n", 1);
  if (b->oom)
    _exit (4);
  if (fd >= 0) {
    memset (&u, 0, sizeof u);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN (sizeof (int));
    memcpy (CMSG_DATA (cm), &fd, sizeof fd);
    iov = (struct iovec) { .iov_base = b->data, .iov_len = b->len };
    do
      r = sendmsg (w->res, &msg, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
      _exit (3);
    write_all (w->res, b->data + r, b->len - (size_t) r);
  } else {
    write_all (w->res, b->data, b->len);
  }
  ba_buf_clear (b);
}

static void
send_line (BaWorkCtx *w, BaBuf *b)
{
  send_line_fd (w, b, -1);
}

void
ba_work_reply_begin (BaBuf *b)
{
  ba_jw_begin (b);
  ba_jw_bool (b, "ok", true);
}

void
ba_work_reply_end (BaWorkCtx *w, BaBuf *b)
{
  ba_jw_end (b);
  w->replied = true;
  send_line (w, b);
}

void
ba_work_reply_ok (BaWorkCtx *w)
{
  BaBuf b = { 0 };
  ba_work_reply_begin (&b);
  ba_work_reply_end (w, &b);
}

void
ba_work_error (BaWorkCtx *w, const char *code, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  BaBuf b = { 0 };
  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  ba_jw_begin (&b);
  if (w->replied)
    ba_jw_str (&b, "event", "error");
  else
    ba_jw_bool (&b, "ok", false);
  ba_jw_key (&b, "error");
  ba_jw_begin (&b);
  ba_jw_str (&b, "code", code);
  ba_jw_str (&b, "message", msg);
  ba_jw_end (&b);
  ba_jw_end (&b);
  w->replied = true;
  w->failed = true;
  send_line (w, &b);
}

void
ba_work_errno (BaWorkCtx *w, int err, const char *what, const char *path)
{
  ba_work_error (w, ba_errno_code (err), "%s %s: %s", what, path, strerror (err));
}

void
ba_work_event (BaWorkCtx *w, BaBuf *b)
{
  send_line (w, b);
}

void
ba_work_reply_ok_input (BaWorkCtx *w, int fd)
{
  BaBuf b = { 0 };
  ba_work_reply_begin (&b);
  ba_jw_end (&b);
  w->replied = true;
  send_line_fd (w, &b, fd);
}

int
ba_work_wait_input (BaWorkCtx *w)
{
  uint8_t m[5];
  size_t got = 0;
  while (got < sizeof m) {
    ssize_t r = read (w->res, m + got, sizeof m - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    got += (size_t) r;
    if (m[0] == 'c')
      return 0;
    if (m[0] != 'e')
      return -1;
  }
  return m[1] | m[2] << 8 | m[3] << 16 | m[4] << 24;
}

static void
move_fd (int from, int to)
{
  if (from == to) {
    fcntl (to, F_SETFD, 0);
    return;
  }
  dup2 (from, to);
}

static void
child_main (int fin, int fout, int fres, const BaUser *u, const BaJson *req, BaWorkFn fn)
{
  sigset_t none;
  BaWorkCtx w = { .in = fin >= 0 ? 0 : -1, .out = fout >= 0 ? 1 : -1, .res = 3, .user = u };
  int hi[3];

  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  for (int s = 1; s < NSIG; s++)
    signal (s, SIG_DFL);
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (fin < 0)
    fin = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fout < 0)
    fout = open ("/dev/null", O_WRONLY | O_CLOEXEC);
  /* out of the way of 0, 1, 3 first, then into place */
  hi[0] = fcntl (fin, F_DUPFD_CLOEXEC, 10);
  hi[1] = fcntl (fout, F_DUPFD_CLOEXEC, 10);
  hi[2] = fcntl (fres, F_DUPFD_CLOEXEC, 10);
  move_fd (hi[0], 0);
  move_fd (hi[1], 1);
  move_fd (hi[2], 3);
  fcntl (3, F_SETFD, FD_CLOEXEC); /* never inherited by what the worker runs */
  if (syscall (SYS_close_range, 4u, ~0u, 0u) < 0)
    for (int fd = 4; fd < 65536; fd++)
      close (fd);
  umask (022);
  if (chdir ("/") < 0)
    _exit (5);
  if (u != NULL && (setgroups ((size_t) u->ngroups, u->groups) < 0 || setgid (u->gid) < 0 || setuid (u->uid) < 0)) {
    ba_work_error (&w, "failed", "cannot switch to user %s: %s", u->name, strerror (errno));
    _exit (0);
  }
  fn (&w, req);
  if (!w.replied)
    ba_work_error (&w, "failed", "the operation gave no result");
  _exit (w.failed ? 1 : 0);
}

/* ---- agent side -------------------------------------------------------------- */

void
ba_work_start (int64_t id, uint32_t chan, const BaJson *req, int flags, BaWorkFn fn)
{
  const BaJson *uj = ba_json_get (req, "user");
  BaUser user, *u = NULL;
  int res[2] = { -1, -1 }, in[2] = { -1, -1 }, out[2] = { -1, -1 };
  BaWorker *w;
  BaChan *c = NULL;
  pid_t pid;

  if (uj != NULL && (uj->type != BA_JSTR || uj->slen == 0)) {
    ba_reply_error (id, "invalid", "user must be a user name");
    return;
  }
  if (uj != NULL) {
    if (!ba_user_lookup (uj->s, &user)) {
      char msg[128];
      snprintf (msg, sizeof msg, "unknown user %.64s", uj->s);
      ba_reply_error (id, "unknown_user", msg);
      return;
    }
    u = &user;
  }
  w = calloc (1, sizeof *w);
  if (w == NULL || socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, res) < 0 ||
      ((flags & BA_WORK_IN) && pipe2 (in, O_CLOEXEC) < 0) || ((flags & BA_WORK_OUT) && pipe2 (out, O_CLOEXEC) < 0)) {
    for (int *fd = (int[]) { res[0], res[1], in[0], in[1], out[0], out[1], -2 }; *fd != -2; fd++)
      if (*fd >= 0)
        close (*fd);
    free (w);
    ba_reply_error (id, "failed", strerror (errno));
    return;
  }
  ba_pipe_grow ((int[]) { in[1], out[0] }, 2);
  pid = fork ();
  if (pid == 0)
    child_main (in[0], out[1], res[1], u, req, fn);
  close (res[1]);
  if (in[0] >= 0)
    close (in[0]);
  if (out[1] >= 0)
    close (out[1]);
  if (pid < 0) {
    int err = errno;
    for (int *fd = (int[]) { res[0], in[1], out[0], -2 }; *fd != -2; fd++)
      if (*fd >= 0)
        close (*fd);
    free (w);
    ba_reply_error (id, "failed", strerror (err));
    return;
  }
  fcntl (res[0], F_SETFL, O_NONBLOCK);
  w->pid = pid;
  w->res = res[0];
  w->in_fd = -1;
  w->id = id;
  w->chan_id = chan;
  w->has_out = (flags & BA_WORK_OUT) != 0;
  w->graceful = (flags & BA_WORK_IN) != 0;
  if (chan != 0)
    c = ba_chan_new (chan, BA_CH_PROC);
  if (chan != 0 && c == NULL) {
    kill (pid, SIGKILL);
    w->dead = true;
    if (in[1] >= 0)
      close (in[1]);
    if (out[0] >= 0)
      close (out[0]);
    ba_reply_error (id, "failed", "out of memory");
  } else if (c != NULL) {
    c->p.pid = pid;
    c->p.fd_in = in[1];
    c->p.fd_out = out[0];
    if (in[1] >= 0)
      fcntl (in[1], F_SETFL, O_NONBLOCK);
    if (out[0] >= 0)
      fcntl (out[0], F_SETFL, O_NONBLOCK);
    c->eof[BA_STDOUT] = out[0] < 0;
    c->eof[BA_STDERR] = true;
    c->in_closed = in[1] < 0;
    c->w = w;
    w->chan = c;
  }
  w->next = workers;
  workers = w;
}

bool
ba_work_replied (BaWorker *w)
{
  return w->replied;
}

bool
ba_work_failed (BaWorker *w)
{
  return w->failed;
}

bool
ba_work_finished (BaWorker *w)
{
  return w->res_eof && w->exited;
}

static void
send_events (BaWorker *w)
{
  /* each line is one event */
  size_t off = 0;
  while (off < w->events.len) {
    uint8_t *nl = memchr (w->events.data + off, '\n', w->events.len - off);
    size_t n = (size_t) (nl - (w->events.data + off));
    ba_send (BA_CTRL, 0, w->chan_id, w->events.data + off, n);
    off += n + 1;
  }
  ba_buf_clear (&w->events);
}

void
ba_work_end_chan (BaWorker *w)
{
  BaChan *c = w->chan;
  if (c == NULL)
    return;
  if (!w->replied) {
    char msg[96];
    snprintf (msg, sizeof msg, "the operation's process ended without a result (status %d)", w->status);
    ba_reply_error (w->id, "failed", msg);
    w->replied = true;
    ba_chan_end (c, true);
    w->dead = true;
    return;
  }
  if (w->has_out && !w->failed)
    ba_send (BA_EOF, BA_STDOUT, w->chan_id, NULL, 0);
  send_events (w);
  ba_chan_end (c, false); /* forgets w->chan */
  w->dead = true;
}

void
ba_work_input_done (BaWorker *w, int err)
{
  uint8_t m[5] = { 'c' };
  size_t n = 1;
  if (err != 0) {
    m[0] = 'e';
    ba_put_u32 (m + 1, (uint32_t) err);
    n = 5;
  }
  (void) !write (w->res, m, n);
}

void
ba_work_tell (BaWorker *w, const void *p, size_t n)
{
  /* a few bytes on a socket the worker reads before it writes more: they fit */
  (void) !send (w->res, p, n, MSG_NOSIGNAL);
}

void
ba_work_abort (BaWorker *w)
{
  /* A worker reading host input sees its end (no commit byte) once the
   * agent closed its side, and cleans up (fs-write removes its temporary
   * file); the others are killed. */
  if (!w->exited && !w->graceful)
    kill (w->pid, SIGKILL);
  w->chan = NULL;
  w->dead = true;
}

void
ba_work_forget_chan (BaWorker *w)
{
  w->chan = NULL;
}

void
ba_work_abort_all (void)
{
  for (BaWorker *w = workers; w != NULL; w = w->next)
    if (!w->dead)
      ba_work_abort (w);
}

static void
handle_line (BaWorker *w, uint8_t *line, size_t n)
{
  BaBuf b = { 0 };
  if (n < 2 || line[0] != '{')
    return;
  if (!w->replied) {
    bool ok = n >= 10 && memcmp (line, "{\"ok\":true", 10) == 0;
    w->replied = true;
    ba_buf_printf (&b, "{\"id\":%lld,", (long long) w->id);
    if (ok && w->chan != NULL)
      ba_buf_printf (&b, "\"chan\":%u,", w->chan_id);
    ba_buf_append (&b, line + 1, n - 1);
    if (b.len > BA_MAX_PAYLOAD) {
      ba_buf_clear (&b);
      ba_reply_error (w->id, "too_large", "the reply does not fit a control frame");
      ok = false;
    } else {
      ba_send_json (0, &b);
    }
    if (ok && w->chan != NULL) {
      ba_chan_work_ready (w->chan, w->in_fd);
      w->in_fd = -1;
    }
    if (!ok) {
      w->failed = true;
      if (w->chan != NULL)
        ba_chan_end (w->chan, true);
      if (!w->exited)
        kill (w->pid, SIGKILL);
      w->chan = NULL;
    }
    return;
  }
  if (n >= 17 && memcmp (line, "{\"event\":\"error\"", 16) == 0)
    w->failed = true;
  if (n >= 12 && memcmp (line, "{\"handoff\":", 11) == 0) {
    if (w->chan != NULL && w->has_out)
      ba_logs_offer (w->chan, line, n);
    else
      ba_work_tell (w, "n", 1);
    return;
  }
  if (w->chan == NULL || n > BA_MAX_PAYLOAD)
    return;
  if (w->has_out) {
    ba_buf_append (&w->events, line, n);
    ba_buf_append (&w->events, "\n", 1);
  } else {
    ba_send (BA_CTRL, 0, w->chan_id, line, n);
  }
}

static void
on_res (void *obj, int tag, short revents)
{
  BaWorker *w = obj;
  uint8_t tmp[65536];
  union {
    struct cmsghdr h;
    char space[CMSG_SPACE (4 * sizeof (int))];
  } u;
  struct iovec iov = { .iov_base = tmp, .iov_len = sizeof tmp };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.space, .msg_controllen = sizeof u.space };
  ssize_t r;
  size_t off = 0;
  if (w->dead || w->res_eof)
    return;
  r = recvmsg (w->res, &msg, MSG_CMSG_CLOEXEC);
  /* a file descriptor comes only with the reply of an operation whose input
   * the agent writes itself (ba_work_reply_ok_input()); keep the first */
  for (struct cmsghdr *cm = CMSG_FIRSTHDR (&msg); r >= 0 && cm != NULL; cm = CMSG_NXTHDR (&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
      continue;
    for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN (0)) / sizeof (int); i++) {
      int fd;
      memcpy (&fd, CMSG_DATA (cm) + i * sizeof (int), sizeof fd);
      if (w->in_fd < 0 && !w->replied)
        w->in_fd = fd;
      else
        close (fd);
    }
  }
  if (r < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (r <= 0) {
    w->res_eof = true;
    if (w->chan == NULL) {
      if (!w->replied)
        ba_reply_error (w->id, "failed", "the operation's process ended without a result");
      w->replied = true;
      w->dead = true;
    }
    return;
  }
  ba_buf_append (&w->buf, tmp, (size_t) r);
  while (off < w->buf.len) {
    uint8_t *nl = memchr (w->buf.data + off, '\n', w->buf.len - off);
    if (nl == NULL)
      break;
    handle_line (w, w->buf.data + off, (size_t) (nl - (w->buf.data + off)));
    off = (size_t) (nl - w->buf.data) + 1;
  }
  ba_buf_consume (&w->buf, off);
  if (w->buf.len > MAX_LINE) {
    ba_log ("worker %d: result line too long", (int) w->pid);
    ba_buf_clear (&w->buf);
    kill (w->pid, SIGKILL);
  }
}

void
ba_work_poll_prepare (void)
{
  bool room = ba_out_pending () < BA_OUT_QUEUE_HIGH;
  for (BaWorker *w = workers; w != NULL; w = w->next)
    if (!w->dead && !w->res_eof && room)
      ba_poll_add (w->res, POLLIN, on_res, w, 0);
}

void
ba_work_child_exited (int pid, int status)
{
  for (BaWorker *w = workers; w != NULL; w = w->next)
    if (w->pid == pid && !w->exited) {
      w->exited = true;
      w->status = status;
      if (status != 0)
        w->failed = true;
      return;
    }
}

void
ba_work_sweep (void)
{
  for (BaWorker **pp = &workers; *pp != NULL; ) {
    BaWorker *w = *pp;
    if (w->dead) {
      *pp = w->next;
      close (w->res);
      if (w->in_fd >= 0)
        close (w->in_fd);
      ba_buf_clear (&w->buf);
      ba_buf_clear (&w->events);
      free (w);
    } else {
      pp = &w->next;
    }
  }
}
