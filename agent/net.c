/* box guest agent: ports and sockets.
 *
 * A socket channel (BA_CH_SOCK) carries a TCP connection (port-connect) or
 * a connection to the in-sandbox socket: the host's DATA stream 0 is written
 * to the socket (chan.c), what the socket gives is DATA stream 1 within the
 * host's credit, and EOF both ways is a half-close. */

#include "net.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"
#include "chan.h"
#include "session.h"
#include "work.h"

#define CONNECT_TIMEOUT_MS 10000
#define MAX_SOCK_CHANNELS 256
#define FIRST_AGENT_CHAN 0x80000000u

static int listen_fd = -1;
static uint32_t next_agent_chan = FIRST_AGENT_CHAN;

/* ---- ports (in a worker) ------------------------------------------------- */

typedef struct {
  int port;
  char addr[INET6_ADDRSTRLEN];
  unsigned long inode;
  int pid;
} Listener;

static void
parse_proc_net (const char *file, bool v6, Listener **v, size_t *n, size_t *cap)
{
  FILE *f = fopen (file, "re");
  char line[512];
  if (f == NULL)
    return;
  if (fgets (line, sizeof line, f) == NULL) { /* header */
    fclose (f);
    return;
  }
  while (fgets (line, sizeof line, f) != NULL) {
    char local[64], state[8];
    unsigned long inode;
    unsigned port;
    char *colon;
    uint8_t a[16];
    if (sscanf (line, " %*s %63s %*s %7s %*s %*s %*s %*s %*s %lu", local, state, &inode) != 3 ||
        strcmp (state, "0A") != 0 || (colon = strchr (local, ':')) == NULL)
      continue;
    *colon = 0;
    if (sscanf (colon + 1, "%x", &port) != 1 || strlen (local) != (v6 ? 32u : 8u))
      continue;
    for (int i = 0; i < (v6 ? 4 : 1); i++) {
      char word[9];
      uint32_t x;
      memcpy (word, local + i * 8, 8);
      word[8] = 0;
      x = (uint32_t) strtoul (word, NULL, 16);
      memcpy (a + i * 4, &x, 4); /* the kernel prints each word in host order */
    }
    if (*n == *cap) {
      Listener *nv;
      *cap = *cap ? *cap * 2 : 32;
      nv = realloc (*v, sizeof *nv * *cap);
      if (nv == NULL)
        break;
      *v = nv;
    }
    (*v)[*n].port = (int) port;
    (*v)[*n].inode = inode;
    (*v)[*n].pid = 0;
    inet_ntop (v6 ? AF_INET6 : AF_INET, a, (*v)[*n].addr, sizeof (*v)[*n].addr);
    (*n)++;
  }
  fclose (f);
}

/* pid's parent, process group and session from /proc/pid/stat. */
static bool
proc_ids (int pid, int *ppid, int *pgrp, int *sid)
{
  char p[64], buf[1024], *e;
  FILE *f;
  size_t n;
  snprintf (p, sizeof p, "/proc/%d/stat", pid);
  f = fopen (p, "re");
  if (f == NULL)
    return false;
  n = fread (buf, 1, sizeof buf - 1, f);
  fclose (f);
  buf[n] = 0;
  e = strrchr (buf, ')'); /* the command name may hold anything */
  return e != NULL && sscanf (e + 1, " %*c %d %d %d", ppid, pgrp, sid) == 3;
}

static const char *
session_of (int pid)
{
  for (int depth = 0; pid > 1 && depth < 64; depth++) {
    int ppid, pgrp, sid;
    const char *s = ba_session_by_pid (pid);
    if (s != NULL)
      return s;
    if (!proc_ids (pid, &ppid, &pgrp, &sid))
      return NULL;
    if ((s = ba_session_by_pid (sid)) != NULL || (s = ba_session_by_pid (pgrp)) != NULL)
      return s;
    pid = ppid;
  }
  return NULL;
}

static int
cmp_listener (const void *a, const void *b)
{
  const Listener *x = a, *y = b;
  if (x->port != y->port)
    return x->port < y->port ? -1 : 1;
  return strcmp (x->addr, y->addr);
}

static void
op_ports (BaWorkCtx *w, const BaJson *req)
{
  Listener *v = NULL;
  size_t n = 0, cap = 0;
  DIR *proc;
  struct dirent *e;
  BaBuf b = { 0 };

  parse_proc_net ("/proc/net/tcp", false, &v, &n, &cap);
  parse_proc_net ("/proc/net/tcp6", true, &v, &n, &cap);
  proc = n > 0 ? opendir ("/proc") : NULL;
  while (proc != NULL && (e = readdir (proc)) != NULL) {
    char dir[64];
    DIR *fds;
    struct dirent *fe;
    int pid;
    if (!isdigit ((unsigned char) e->d_name[0]))
      continue;
    pid = atoi (e->d_name);
    snprintf (dir, sizeof dir, "/proc/%d/fd", pid);
    fds = opendir (dir);
    while (fds != NULL && (fe = readdir (fds)) != NULL) {
      char lp[320], target[64];
      ssize_t tl;
      unsigned long ino;
      snprintf (lp, sizeof lp, "%s/%s", dir, fe->d_name);
      tl = readlink (lp, target, sizeof target - 1);
      if (tl <= 0)
        continue;
      target[tl] = 0;
      if (sscanf (target, "socket:[%lu]", &ino) != 1)
        continue;
      for (size_t i = 0; i < n; i++)
        if (v[i].inode == ino && ino != 0 && (v[i].pid == 0 || pid < v[i].pid))
          v[i].pid = pid;
    }
    if (fds != NULL)
      closedir (fds);
  }
  if (proc != NULL)
    closedir (proc);
  if (n > 0)
    qsort (v, n, sizeof *v, cmp_listener);
  ba_work_reply_begin (&b);
  ba_jw_key (&b, "ports");
  ba_buf_append (&b, "[", 1);
  for (size_t i = 0; i < n; i++) {
    const char *s = v[i].pid > 0 ? session_of (v[i].pid) : NULL;
    ba_jw_begin (&b);
    ba_jw_int (&b, "port", v[i].port);
    ba_jw_str (&b, "address", v[i].addr);
    ba_jw_int (&b, "pid", v[i].pid);
    if (s != NULL)
      ba_jw_str (&b, "session", s);
    ba_jw_end (&b);
  }
  ba_buf_append (&b, "]", 1);
  free (v);
  ba_work_reply_end (w, &b);
}

/* ---- socket channels --------------------------------------------------------- */

static void
sock_reply (BaChan *c)
{
  BaBuf b = { 0 };
  ba_reply_begin (&b, c->reply_id);
  ba_jw_int (&b, "chan", c->id);
  ba_jw_end (&b);
  ba_send_json (0, &b);
  c->reply_id = 0;
}

/* Try 127.0.0.1, then ::1. Replies and ends the channel when both refuse. */
static void
sock_connect (BaChan *c)
{
  int one = 1;
  for (;;) {
    bool v6 = c->tried_v6;
    struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons (c->port), .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons (c->port), .sin6_addr = IN6ADDR_LOOPBACK_INIT };
    int r;
    if (c->fd >= 0)
      close (c->fd);
    c->fd = socket (v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd >= 0) {
      setsockopt (c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      r = v6 ? connect (c->fd, (struct sockaddr *) &a6, sizeof a6) : connect (c->fd, (struct sockaddr *) &a4, sizeof a4);
    } else {
      r = -1;
    }
    if (r == 0) {
      c->connecting = false;
      sock_reply (c);
      return;
    }
    if (r < 0 && errno == EINPROGRESS) {
      c->connecting = true;
      c->connect_deadline = ba_now_ms () + CONNECT_TIMEOUT_MS;
      return;
    }
    if (!v6) {
      c->tried_v6 = true;
      continue;
    }
    break;
  }
  ba_reply_error (c->reply_id, "port_closed", "nothing listens on the port");
  c->reply_id = 0;
  ba_chan_end (c, true);
}

static void
on_connected (void *obj, int tag, short revents)
{
  BaChan *c = obj;
  int err = 0;
  socklen_t len = sizeof err;
  if (c->dead || !c->connecting)
    return;
  if (getsockopt (c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
    err = errno;
  if (err == 0) {
    c->connecting = false;
    sock_reply (c);
    return;
  }
  c->connecting = false;
  if (!c->tried_v6) {
    c->tried_v6 = true;
    sock_connect (c);
    return;
  }
  ba_reply_error (c->reply_id, "port_closed", "nothing listens on the port");
  c->reply_id = 0;
  ba_chan_end (c, true);
}

/* One chunk from the socket; false when there is nothing more to take now
 * (EAGAIN, EOF, the end of the credit, the connection gone). */
static bool
sock_read_chunk (BaChan *c)
{
  uint8_t buf[BA_DATA_CHUNK];
  size_t want;
  ssize_t r;
  if (c->dead || c->rd_eof || c->window == 0)
    return false;
  want = c->window < sizeof buf ? c->window : sizeof buf;
  r = read (c->fd, buf, want);
  if (r < 0 && errno == EINTR)
    return true;
  if (r < 0 && errno == EAGAIN)
    return false;
  if (r < 0) { /* reset: the connection is over */
    ba_chan_end (c, false);
    return false;
  }
  if (r == 0) {
    c->rd_eof = true;
    ba_send (BA_EOF, BA_STDOUT, c->id, NULL, 0);
    return false;
  }
  c->window -= (uint32_t) r;
  ba_send (BA_DATA, BA_STDOUT, c->id, buf, (size_t) r);
  return true;
}

static void
on_sock_read (void *obj, int tag, short revents)
{
  /* a few chunks per turn while the host has room, as for process output */
  for (int i = 0; i < 8 && ba_out_pending () < BA_OUT_QUEUE_HIGH; i++)
    if (!sock_read_chunk (obj))
      break;
}

static int
count_agent_socks (void)
{
  int n = 0;
  for (BaChan *c = ba_chan_first (); c != NULL; c = c->next)
    n += !c->dead && c->kind == BA_CH_SOCK && c->id >= FIRST_AGENT_CHAN;
  return n;
}

static void
on_accept (void *obj, int tag, short revents)
{
  struct ucred cred = { 0 };
  socklen_t len = sizeof cred;
  BaChan *c;
  BaBuf b = { 0 };
  int fd = accept4 (listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0)
    return;
  getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
  while (ba_chan_find (next_agent_chan) != NULL)
    next_agent_chan = next_agent_chan == 0xffffffffu ? FIRST_AGENT_CHAN : next_agent_chan + 1;
  c = ba_chan_new (next_agent_chan, BA_CH_SOCK);
  next_agent_chan = next_agent_chan == 0xffffffffu ? FIRST_AGENT_CHAN : next_agent_chan + 1;
  if (c == NULL) {
    close (fd);
    return;
  }
  c->fd = fd;
  ba_jw_begin (&b);
  ba_jw_str (&b, "event", "accept");
  ba_jw_int (&b, "chan", c->id);
  ba_jw_int (&b, "peer_pid", cred.pid);
  ba_jw_int (&b, "peer_uid", cred.uid);
  ba_jw_int (&b, "peer_gid", cred.gid);
  ba_jw_end (&b);
  ba_send_json (0, &b);
}

void
ba_net_listen (const char *path)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  char dir[sizeof sa.sun_path];
  char *slash;
  if (strlen (path) >= sizeof dir) {
    ba_log ("api socket path too long: %s", path);
    return;
  }
  snprintf (dir, sizeof dir, "%s", path);
  slash = strrchr (dir, '/');
  if (slash != NULL && slash != dir) {
    *slash = 0;
    mkdir (dir, 0755);
    chmod (dir, 0755);
  }
  /* bound and listening under a temporary name first, so that the socket
   * appears ready: a client that sees it can connect */
  if (snprintf (sa.sun_path, sizeof sa.sun_path, "%s.new", path) >= (int) sizeof sa.sun_path) {
    ba_log ("api socket path too long: %s", path);
    return;
  }
  unlink (sa.sun_path);
  listen_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd < 0 || bind (listen_fd, (struct sockaddr *) &sa, sizeof sa) < 0 || chmod (sa.sun_path, 0666) < 0 ||
      listen (listen_fd, 128) < 0 || rename (sa.sun_path, path) < 0) {
    ba_log ("api socket %s: %s", path, strerror (errno));
    if (listen_fd >= 0)
      close (listen_fd);
    unlink (sa.sun_path);
    listen_fd = -1;
  }
}

void
ba_net_poll_prepare (void)
{
  bool room = ba_out_pending () < BA_OUT_QUEUE_HIGH;
  if (listen_fd >= 0 && ba_host_ready () && count_agent_socks () < MAX_SOCK_CHANNELS)
    ba_poll_add (listen_fd, POLLIN, on_accept, NULL, 0);
  for (BaChan *c = ba_chan_first (); c != NULL; c = c->next) {
    if (c->dead || c->kind != BA_CH_SOCK || c->fd < 0)
      continue;
    if (c->connecting)
      ba_poll_add (c->fd, POLLOUT, on_connected, c, 0);
    else if (!c->rd_eof && c->window > 0 && room)
      ba_poll_add (c->fd, POLLIN, on_sock_read, c, 0);
  }
}

int
ba_net_timeout (int64_t now)
{
  int64_t best = -1;
  for (BaChan *c = ba_chan_first (); c != NULL; c = c->next)
    if (!c->dead && c->kind == BA_CH_SOCK && c->connecting) {
      int64_t t = c->connect_deadline - now;
      if (t < 0)
        t = 0;
      if (best < 0 || t < best)
        best = t;
    }
  return best < 0 ? -1 : (int) best;
}

void
ba_net_tick (int64_t now)
{
  for (BaChan *c = ba_chan_first (); c != NULL; c = c->next) {
    if (c->dead || c->kind != BA_CH_SOCK)
      continue;
    if (c->connecting && now >= c->connect_deadline) {
      c->connecting = false;
      ba_reply_error (c->reply_id, "port_closed", "the port did not accept the connection within 10 s");
      c->reply_id = 0;
      ba_chan_end (c, true);
    } else if (!c->connecting && c->rd_eof && c->in_closed && c->in.len == 0) {
      ba_chan_end (c, false);
    }
  }
}

/* ---- requests ------------------------------------------------------------------ */

void
ba_net_op (int64_t id, const char *op, const BaJson *m)
{
  int64_t port = 0;
  uint32_t chan;
  BaChan *c;
  if (strcmp (op, "ports") == 0) {
    ba_work_start (id, 0, m, 0, op_ports);
    return;
  }
  if (!ba_chan_take_id (id, m, &chan))
    return;
  if (!ba_json_get_int (m, "port", &port) || port < 1 || port > 65535) {
    ba_reply_error (id, "invalid", "port must be 1 to 65535");
    return;
  }
  c = ba_chan_new (chan, BA_CH_SOCK);
  if (c == NULL) {
    ba_reply_error (id, "failed", "out of memory");
    return;
  }
  c->port = (uint16_t) port;
  c->reply_id = id;
  sock_connect (c);
}
