/* box guest agent: main loop and the connection to the host.
 *
 *   box-agent                 PID 1 (or in the initramfs as /init)
 *   box-agent --port PATH     serve on a character device (testing)
 *   box-agent --connect PATH  serve on a Unix socket, connecting to PATH (host tests)
 *   box-agent --fd N          serve on the inherited connected socket N (host tests:
 *                             the dummy hypervisor's agent = option, plugins/dummy)
 * Options for tests: --api-socket PATH (the in-sandbox socket; PID 1 uses
 * /run/box/api.sock), --hooks-dir DIR (presuspend hooks; PID 1 uses
 * /var/lib/box/hooks/presuspend.d), --session-keep-ms N (how long exited
 * sessions stay, 10 minutes by default), --services-dir DIR and
 * --service-logs-dir DIR (supervised services; PID 1 uses
 * /var/lib/box/services and /var/log/box/services), --service-log-bytes N
 * (where logs rotate, 8 MiB), --service-grace-ms N (SIGTERM to SIGKILL),
 * --trust-root DIR (where trust-ca writes; PID 1 uses /).
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "chan.h"
#include "fs.h"
#include "hooks.h"
#include "net.h"
#include "services.h"
#include "session.h"
#include "work.h"
#include "logs.h"

static struct {
  int fd;              /* the port, -1 while closed */
  bool is_socket;      /* --connect: a Unix socket (EOF = host gone for good) */
  char path[300];      /* device to (re)open */
  bool connected;      /* host side open (no POLLHUP) */
  bool ready;          /* a hello was answered on this connection */
  BaBuf out, in;
  char boot_id[40];
  int64_t started_ms;
} conn = { .fd = -1 };

const char *ba_api_socket_path;
const char *ba_hooks_dir;

bool
ba_host_ready (void)
{
  return conn.fd >= 0 && conn.connected && conn.ready;
}

/* ---- the poll set ------------------------------------------------------- */

typedef struct {
  BaPollFn fn;
  void *obj;
  int tag;
} PollEntry;

static struct {
  struct pollfd *pfd;
  PollEntry *ent;
  int n, cap;
} pset;

void
ba_poll_add (int fd, short events, BaPollFn fn, void *obj, int tag)
{
  if (fd < 0)
    return;
  if (pset.n == pset.cap) {
    int cap = pset.cap ? pset.cap * 2 : 64;
    struct pollfd *p = realloc (pset.pfd, sizeof *p * (size_t) cap);
    PollEntry *e;
    if (p == NULL)
      return;
    pset.pfd = p;
    e = realloc (pset.ent, sizeof *e * (size_t) cap);
    if (e == NULL)
      return;
    pset.ent = e;
    pset.cap = cap;
  }
  pset.pfd[pset.n] = (struct pollfd) { .fd = fd, .events = events };
  pset.ent[pset.n] = (PollEntry) { .fn = fn, .obj = obj, .tag = tag };
  pset.n++;
}

int64_t
ba_now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
ba_log (const char *fmt, ...)
{
  char buf[512];
  va_list ap;
  int n;
  va_start (ap, fmt);
  n = vsnprintf (buf, sizeof buf - 1, fmt, ap);
  va_end (ap);
  if (n < 0)
    return;
  if (n > (int) sizeof buf - 2)
    n = sizeof buf - 2;
  buf[n++] = '\n';
  fputs ("box-agent: ", stderr);
  fwrite (buf, 1, (size_t) n, stderr);
  fflush (stderr);
}

/* ---- output ------------------------------------------------------------ */

void
ba_send (uint8_t type, uint8_t stream, uint32_t chan, const void *data, size_t len)
{
  uint8_t h[BA_HEADER_SIZE];
  BaFrame f = { .type = type, .stream = stream, .chan = chan, .len = (uint32_t) len };
  ba_frame_encode (&f, h);
  ba_buf_append (&conn.out, h, sizeof h);
  ba_buf_append (&conn.out, data, len);
}

void
ba_send_json (uint32_t chan, BaBuf *json)
{
  if (!json->oom)
    ba_send (BA_CTRL, 0, chan, json->data, json->len);
  ba_buf_clear (json);
}

size_t
ba_out_pending (void)
{
  return conn.out.len;
}

static void
flush_out (void)
{
  size_t done = 0;
  /* virtio-serial takes at most 32 KiB per write: move what is left to the
   * front once, not after every write */
  while (conn.fd >= 0 && done < conn.out.len) {
    ssize_t w = write (conn.fd, conn.out.data + done, conn.out.len - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      break; /* EAGAIN (host not reading / not connected): wait for POLLOUT */
    done += (size_t) w;
  }
  ba_buf_consume (&conn.out, done);
}

void
ba_reply_begin (BaBuf *b, int64_t id)
{
  ba_jw_begin (b);
  ba_jw_int (b, "id", id);
  ba_jw_bool (b, "ok", true);
}

void
ba_reply_ok (int64_t id)
{
  BaBuf b = { 0 };
  ba_reply_begin (&b, id);
  ba_jw_end (&b);
  ba_send_json (0, &b);
}

void
ba_reply_error (int64_t id, const char *code, const char *msg)
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

const char *
ba_errno_code (int err)
{
  switch (err) {
  case ENOENT:
  case ENOTDIR:
    return "not_found";
  case EACCES:
  case EPERM:
  case EROFS:
    return "permission_denied";
  case EEXIST:
    return "already_exists";
  case ENOTEMPTY:
  case EBUSY:     /* a mount point, a file system in use */
  case ETXTBSY:   /* a running executable */
  case ENOSPC:    /* the file system is full: the sandbox's state, not a bug */
  case EDQUOT:
    return "conflict";
  case EISDIR:
  case EINVAL:
  case ENAMETOOLONG:
  case EXDEV:
  case ELOOP:
    return "invalid";
  default:
    return "failed";
  }
}

static void
add_identity (BaBuf *b)
{
  ba_jw_int (b, "version", BA_VERSION);
  ba_jw_str (b, "agent", BA_AGENT_VERSION);
  ba_jw_str (b, "boot_id", conn.boot_id);
  ba_jw_int (b, "uptime_ms", ba_now_ms () - conn.started_ms);
  ba_jw_int (b, "window", ba_chan_get_window ());
}

static void
send_ready (void)
{
  BaBuf b = { 0 };
  ba_jw_begin (&b);
  ba_jw_str (&b, "event", "ready");
  add_identity (&b);
  ba_jw_end (&b);
  ba_send_json (0, &b);
}

/* ---- operations on channel 0 ---------------------------------------------- */

static void
op_hello (int64_t id, const BaJson *m)
{
  int64_t window = 0;
  const char *nonce = ba_json_get_str (m, "nonce");
  BaBuf b = { 0 };
  /* A hello starts a new host connection: whatever the previous one had
   * queued or half-sent is dropped (the host resynchronises on the reply),
   * and its channels are closed. */
  ba_buf_consume (&conn.out, conn.out.len);
  ba_chan_close_all ();
  if (ba_json_get_int (m, "window", &window) && window > 0 && window <= (int64_t) 64 << 20)
    ba_chan_set_window ((uint32_t) window);
  conn.ready = true;
  ba_reply_begin (&b, id);
  add_identity (&b);
  if (nonce != NULL)
    ba_jw_str (&b, "nonce", nonce);
  ba_jw_end (&b);
  ba_send_json (0, &b);
}

static void
op_set_time (int64_t id, const BaJson *m)
{
  int64_t ns;
  struct timespec ts;
  BaBuf b = { 0 };
  if (!ba_json_get_int (m, "unix_ns", &ns) || ns <= 0) {
    ba_reply_error (id, "invalid", "unix_ns must be a positive integer");
    return;
  }
  ts.tv_sec = ns / 1000000000;
  ts.tv_nsec = ns % 1000000000;
  if (clock_settime (CLOCK_REALTIME, &ts) < 0) {
    ba_reply_error (id, "failed", strerror (errno));
    return;
  }
  ba_reply_begin (&b, id);
  ba_jw_end (&b);
  ba_send_json (0, &b);
}

static void
op_reseed (int64_t id, const BaJson *m)
{
  const BaJson *d = ba_json_get (m, "data");
  struct {
    struct rand_pool_info info;
    uint8_t buf[512];
  } req;
  long n;
  int fd;
  BaBuf b = { 0 };
  if (d == NULL || d->type != BA_JSTR || d->slen > 680 ||
      (n = ba_base64_decode (d->s, d->slen, req.buf)) < 16) {
    ba_reply_error (id, "invalid", "data must be base64 of 16 to 512 bytes");
    return;
  }
  req.info.entropy_count = (int) n * 8;
  req.info.buf_size = (int) n;
  fd = open ("/dev/urandom", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ioctl (fd, RNDADDENTROPY, &req.info) < 0) {
    ba_reply_error (id, "failed", strerror (errno));
    if (fd >= 0)
      close (fd);
    return;
  }
  close (fd);
  explicit_bzero (req.buf, sizeof req.buf);
  ba_reply_begin (&b, id);
  ba_jw_int (&b, "bytes", n);
  ba_jw_end (&b);
  ba_send_json (0, &b);
}

static void
dispatch (const BaJson *m)
{
  int64_t id = 0, chan = 0;
  const char *op = ba_json_get_str (m, "op");
  const char *err = NULL;
  BaBuf b = { 0 };

  if (!ba_json_get_int (m, "id", &id) || op == NULL) {
    ba_reply_error (id, "invalid", "a request needs an integer id and an op");
    return;
  }
  if (strcmp (op, "hello") == 0) {
    op_hello (id, m);
  } else if (strcmp (op, "ping") == 0) {
    ba_reply_begin (&b, id);
    ba_jw_int (&b, "uptime_ms", ba_now_ms () - conn.started_ms);
    ba_jw_int (&b, "channels", ba_chan_count ());
    ba_jw_end (&b);
    ba_send_json (0, &b);
  } else if (strcmp (op, "set-time") == 0) {
    op_set_time (id, m);
  } else if (strcmp (op, "reseed-random") == 0) {
    op_reseed (id, m);
  } else if (strcmp (op, "set-env") == 0) {
    if (!ba_env_set_sandbox (ba_json_get (m, "env"))) {
      ba_reply_error (id, "invalid", "env must map variable names to strings");
      return;
    }
    /* the services of this boot start once they can get the sandbox's env;
     * `hold`: the env is withheld for a pause or a snapshot, none starts
     * (a restart after a crash would keep the empty env) until it is back */
    if (ba_json_get_bool (m, "hold", false))
      ba_services_hold ();
    else
      ba_services_go ();
    ba_reply_begin (&b, id);
    ba_jw_end (&b);
    ba_send_json (0, &b);
  } else if (strcmp (op, "set-hostname") == 0 || strcmp (op, "configure-network") == 0) {
    const char *host = ba_json_get_str (m, "hostname");
    if (host != NULL && !ba_set_hostname (host, &err)) {
      ba_reply_error (id, "invalid", err);
      return;
    }
    if (strcmp (op, "configure-network") == 0 && !ba_net_configure (m, &err)) {
      ba_reply_error (id, "failed", err);
      return;
    }
    ba_reply_begin (&b, id);
    ba_jw_end (&b);
    ba_send_json (0, &b);
  } else if (strcmp (op, "grow-fs") == 0) {
    int64_t before = 0, after = 0, bytes = 0;
    if (ba_json_get (m, "bytes") != NULL && (!ba_json_get_int (m, "bytes", &bytes) || bytes < 0)) {
      ba_reply_error (id, "invalid", "bytes must be a size in bytes");
      return;
    }
    if (!ba_grow_rootfs ((uint64_t) bytes, &before, &after, &err)) {
      ba_reply_error (id, "failed", err);
      return;
    }
    ba_reply_begin (&b, id);
    ba_jw_int (&b, "old_blocks", before);
    ba_jw_int (&b, "new_blocks", after);
    ba_jw_end (&b);
    ba_send_json (0, &b);
  } else if (strcmp (op, "trust-ca") == 0) {
    ba_trust_ca (id, m);
  } else if (strcmp (op, "sync") == 0) {
    sync ();
    ba_reply_begin (&b, id);
    ba_jw_end (&b);
    ba_send_json (0, &b);
  } else if (strcmp (op, "exec") == 0) {
    if (!ba_json_get_int (m, "chan", &chan) || chan <= 0 || chan > 0x7fffffff) {
      ba_reply_error (id, "invalid", "chan must be 1 to 2^31-1");
      return;
    }
    ba_chan_exec (id, (uint32_t) chan, m);
  } else if (strcmp (op, "attach") == 0 || strcmp (op, "sessions") == 0 ||
             strcmp (op, "session-signal") == 0 || strcmp (op, "detach-all") == 0) {
    ba_session_op (id, op, m);
  } else if (strncmp (op, "fs-", 3) == 0) {
    ba_fs_op (id, op, m);
  } else if (strcmp (op, "ports") == 0 || strcmp (op, "port-connect") == 0) {
    ba_net_op (id, op, m);
  } else if (strncmp (op, "service-", 8) == 0) {
    ba_services_op (id, op, m);
  } else if (strcmp (op, "presuspend") == 0) {
    ba_hooks_presuspend (id, m);
  } else if (strcmp (op, "poweroff") == 0) {
    ba_reply_begin (&b, id);
    ba_jw_end (&b);
    ba_send_json (0, &b);
    flush_out ();
    sync ();
    if (getpid () == 1)
      reboot (RB_POWER_OFF);
    exit (0);
  } else {
    ba_reply_error (id, "unknown_op", op);
  }
}

static void
handle_frame (const BaFrame *f, const uint8_t *payload)
{
  if (f->chan != 0) {
    ba_chan_frame (f, payload);
    return;
  }
  if (f->type == BA_CTRL) {
    const char *err = NULL;
    BaJson *m = ba_json_parse ((const char *) payload, f->len, &err);
    if (m == NULL || m->type != BA_JOBJ) {
      ba_log ("bad control message: %s", err != NULL ? err : "not an object");
      ba_reply_error (0, "invalid", err != NULL ? err : "not an object");
    } else {
      dispatch (m);
    }
    ba_json_free (m);
  }
}

static void
process_input (void)
{
  size_t off = 0;
  while (off < conn.in.len) {
    BaFrame f;
    int r = ba_frame_decode (conn.in.data + off, conn.in.len - off, &f);
    if (r < 0) {
      size_t skip = ba_frame_resync (conn.in.data + off + 1, conn.in.len - off - 1) + 1;
      ba_log ("resync: skipped %zu bytes", skip);
      off += skip;
      continue;
    }
    if (r == 0 || conn.in.len - off < BA_HEADER_SIZE + (size_t) f.len)
      break;
    handle_frame (&f, conn.in.data + off + BA_HEADER_SIZE);
    off += BA_HEADER_SIZE + f.len;
  }
  ba_buf_consume (&conn.in, off);
}

/* ---- the port ------------------------------------------------------------- */

static bool
find_port (char *out, size_t outlen)
{
  DIR *d = opendir ("/sys/class/virtio-ports");
  struct dirent *e;
  bool found = false;
  if (access ("/dev/virtio-ports/" BA_PORT_NAME, F_OK) == 0) {
    snprintf (out, outlen, "/dev/virtio-ports/" BA_PORT_NAME);
    if (d != NULL)
      closedir (d);
    return true;
  }
  if (d == NULL)
    return false;
  while (!found && (e = readdir (d)) != NULL) {
    char p[300], name[64] = "";
    FILE *f;
    if (e->d_name[0] == '.')
      continue;
    snprintf (p, sizeof p, "/sys/class/virtio-ports/%s/name", e->d_name);
    f = fopen (p, "re");
    if (f == NULL)
      continue;
    if (fgets (name, sizeof name, f) != NULL) {
      name[strcspn (name, "\n")] = 0;
      if (strcmp (name, BA_PORT_NAME) == 0) {
        snprintf (out, outlen, "/dev/%s", e->d_name);
        found = true;
      }
    }
    fclose (f);
  }
  closedir (d);
  return found;
}

static bool
open_port (void)
{
  if (conn.fd >= 0)
    return true;
  if (conn.path[0] == 0 && !find_port (conn.path, sizeof conn.path))
    return false;
  conn.fd = open (conn.path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (conn.fd < 0) {
    if (errno != EBUSY)
      ba_log ("open %s: %s", conn.path, strerror (errno));
    return false;
  }
  return true;
}

static void
connect_socket (const char *path)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  snprintf (sa.sun_path, sizeof sa.sun_path, "%s", path);
  if (fd < 0 || connect (fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
    ba_log ("connect %s: %s", path, strerror (errno));
    exit (1);
  }
  fcntl (fd, F_SETFL, O_NONBLOCK);
  conn.fd = fd;
  conn.is_socket = true;
}

/* --fd N: a connected socket the parent handed down */
static void
use_socket_fd (const char *arg)
{
  char *end = NULL;
  long fd = strtol (arg, &end, 10);
  int type = 0;
  socklen_t len = sizeof type;
  if (end == arg || *end != 0 || fd < 0 || fd > 65535 ||
      getsockopt ((int) fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_STREAM) {
    ba_log ("--fd %s: not a stream socket", arg);
    exit (1);
  }
  fcntl ((int) fd, F_SETFD, FD_CLOEXEC);
  fcntl ((int) fd, F_SETFL, O_NONBLOCK);
  conn.fd = (int) fd;
  conn.is_socket = true;
}

static void
make_boot_id (void)
{
  FILE *f = fopen ("/proc/sys/kernel/random/boot_id", "re");
  if (f == NULL || fgets (conn.boot_id, sizeof conn.boot_id, f) == NULL)
    snprintf (conn.boot_id, sizeof conn.boot_id, "pid-%d", (int) getpid ());
  conn.boot_id[strcspn (conn.boot_id, "\n")] = 0;
  if (f != NULL)
    fclose (f);
}

static void
reap (void)
{
  int status;
  pid_t pid;
  while ((pid = waitpid (-1, &status, WNOHANG)) > 0) {
    ba_chan_child_exited (pid, status);
    ba_session_child_exited (pid, status);
    ba_work_child_exited (pid, status);
    ba_services_child_exited (pid, status);
  }
}

static int sfd = -1;

static void
on_signal (void *obj, int tag, short revents)
{
  struct signalfd_siginfo si;
  while (read (sfd, &si, sizeof si) == sizeof si)
    ;
}

/* The host side went away (or a new connection starts): end the channels
 * of the previous one. */
static void
host_gone (int64_t now, int64_t *retry_at)
{
  bool was = conn.connected;
  if (was)
    ba_log ("host disconnected");
  conn.connected = false;
  conn.ready = false;
  ba_buf_consume (&conn.in, conn.in.len);
  if (was)
    ba_chan_close_all ();
  *retry_at = now + 50;
}

static int64_t retry_at;
static bool port_event; /* on_port ran this turn */

static void
on_port (void *obj, int tag, short re)
{
  int64_t now = ba_now_ms ();
  port_event = true;
  if (re & POLLIN) {
    size_t got = 0;
    ssize_t r = -1;
    uint8_t *p;
    /* virtio-serial hands out one guest buffer (a page) per read: take what
     * is there, up to 256 KiB, before parsing and going back to poll (this
     * alone doubled the host-to-guest rate under TCG); straight into the
     * input buffer, a copy less per byte */
    while (got < 256 * 1024 && (p = ba_buf_reserve (&conn.in, 65536)) != NULL &&
           (r = read (conn.fd, p, 65536)) > 0) {
      conn.in.len += (size_t) r;
      got += (size_t) r;
    }
    if (got > 0)
      process_input ();
    else if (conn.is_socket && (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))) {
      /* --connect (tests): the host end is gone for good (EOF, or a reset
       * when it closed with unread data) */
      ba_log ("host closed the socket");
      exit (0);
    }
  }
  if ((re & POLLHUP) && !(re & POLLIN)) {
    /* virtio-serial: the host side is not connected. Look again a little
     * later. A restore or a reconnecting host shows up as the HUP going
     * away. */
    if (conn.is_socket) {
      ba_log ("host hung up");
      exit (0);
    }
    host_gone (now, &retry_at);
  } else if (!conn.connected) {
    conn.connected = true;
    send_ready ();
  }
  if (re & (POLLERR | POLLNVAL)) {
    if (conn.is_socket) {
      ba_log ("host socket error");
      exit (0);
    }
    close (conn.fd);
    conn.fd = -1;
    host_gone (now, &retry_at);
    retry_at = now + 100;
  }
}

static void
serve (void)
{
  sigset_t set;

  sigemptyset (&set);
  sigaddset (&set, SIGCHLD);
  sigprocmask (SIG_BLOCK, &set, NULL);
  sfd = signalfd (-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  signal (SIGPIPE, SIG_IGN);
  if (getpid () != 1)
    prctl (PR_SET_CHILD_SUBREAPER, 1);
  if (ba_api_socket_path != NULL)
    ba_net_listen (ba_api_socket_path);

  while (true) {
    int timeout, t;
    int64_t now = ba_now_ms ();
    bool poll_port;

    if (conn.fd < 0 && now >= retry_at) {
      if (open_port ())
        conn.connected = false;
      else
        retry_at = now + 100;
    }
    /* send what is ready before waiting: output from session rings */
    ba_session_pump ();

    pset.n = 0;
    port_event = false;
    ba_poll_add (sfd, POLLIN, on_signal, NULL, 0);
    poll_port = conn.fd >= 0 && (conn.connected || now >= retry_at);
    if (poll_port)
      ba_poll_add (conn.fd, POLLIN | (conn.out.len > 0 ? POLLOUT : 0), on_port, NULL, 0);
    ba_chan_poll_prepare ();
    ba_session_poll_prepare ();
    ba_work_poll_prepare ();
    ba_logs_poll_prepare ();
    ba_net_poll_prepare ();
    ba_services_poll_prepare ();

    timeout = ba_chan_timeout (now);
    t = ba_session_timeout (now);
    if (t >= 0 && (timeout < 0 || t < timeout))
      timeout = t;
    t = ba_net_timeout (now);
    if (t >= 0 && (timeout < 0 || t < timeout))
      timeout = t;
    t = ba_services_timeout (now);
    if (t >= 0 && (timeout < 0 || t < timeout))
      timeout = t;
    if (conn.fd < 0 || !conn.connected) {
      t = (int) (retry_at > now ? retry_at - now : 50);
      if (timeout < 0 || t < timeout)
        timeout = t;
    }
    if (poll (pset.pfd, (nfds_t) pset.n, timeout) < 0 && errno != EINTR) {
      ba_log ("poll: %s", strerror (errno));
      continue;
    }
    now = ba_now_ms ();

    /* the callbacks run in order; objects they end are only marked dead */
    for (int i = 0; i < pset.n; i++)
      if (pset.pfd[i].revents != 0)
        pset.ent[i].fn (pset.ent[i].obj, pset.ent[i].tag, pset.pfd[i].revents);
    reap ();

    /* a host that connected but sends nothing yet shows no event: look */
    if (!port_event && conn.fd >= 0 && !conn.connected && now >= retry_at) {
      struct pollfd p = { .fd = conn.fd, .events = POLLIN };
      if (poll (&p, 1, 0) >= 0 && !(p.revents & POLLHUP)) {
        conn.connected = true;
        send_ready ();
      } else {
        retry_at = now + 50;
      }
    }

    ba_chan_tick (now);
    ba_session_tick (now);
    ba_net_tick (now);
    ba_services_tick (now);
    ba_work_sweep ();
    ba_chan_sweep ();
    if (conn.connected)
      flush_out ();
  }
}

int
main (int argc, char **argv)
{
  const char *connect_path = NULL;
  const char *socket_fd = NULL;

  for (int i = 1; i < argc; i++) {
    if (strcmp (argv[i], "--port") == 0 && i + 1 < argc)
      snprintf (conn.path, sizeof conn.path, "%s", argv[++i]);
    else if (strcmp (argv[i], "--connect") == 0 && i + 1 < argc)
      connect_path = argv[++i];
    else if (strcmp (argv[i], "--fd") == 0 && i + 1 < argc)
      socket_fd = argv[++i];
    else if (strcmp (argv[i], "--api-socket") == 0 && i + 1 < argc)
      ba_api_socket_path = argv[++i];
    else if (strcmp (argv[i], "--hooks-dir") == 0 && i + 1 < argc)
      ba_hooks_dir = argv[++i];
    else if (strcmp (argv[i], "--trust-root") == 0 && i + 1 < argc)
      ba_trust_root = argv[++i];
    else if (strcmp (argv[i], "--session-keep-ms") == 0 && i + 1 < argc)
      ba_session_keep_ms = atoll (argv[++i]);
    else if (strcmp (argv[i], "--services-dir") == 0 && i + 1 < argc)
      ba_services_dir = argv[++i];
    else if (strcmp (argv[i], "--service-logs-dir") == 0 && i + 1 < argc)
      ba_services_log_dir = argv[++i];
    else if (strcmp (argv[i], "--service-log-bytes") == 0 && i + 1 < argc)
      ba_service_log_bytes = (uint64_t) atoll (argv[++i]);
    else if (strcmp (argv[i], "--service-grace-ms") == 0 && i + 1 < argc)
      ba_service_grace_ms = atoll (argv[++i]);
    else if (strcmp (argv[i], "--version") == 0) {
      printf ("box-agent %s (protocol %d)\n", BA_AGENT_VERSION, BA_VERSION);
      return 0;
    }
  }
  if (getpid () == 1 && access ("/lib/box/modules/modules.load", F_OK) == 0 && access ("/etc/os-release", F_OK) != 0)
    ba_init_stage1 (argc, argv); /* in the initramfs; does not return */
  conn.started_ms = ba_now_ms ();
  if (getpid () == 1) {
    ba_init_stage2 ();
    if (ba_api_socket_path == NULL)
      ba_api_socket_path = "/run/box/api.sock";
    if (ba_hooks_dir == NULL)
      ba_hooks_dir = "/var/lib/box/hooks/presuspend.d";
    if (ba_services_dir == NULL)
      ba_services_dir = "/var/lib/box/services";
    if (ba_services_log_dir == NULL)
      ba_services_log_dir = "/var/log/box/services";
  } else if (ba_services_dir != NULL) {
    ba_services_go (); /* tests: no set-env comes first */
  }
  if (ba_services_dir != NULL && ba_services_log_dir == NULL)
    ba_services_log_dir = ba_services_dir;
  if (ba_service_log_bytes < 4096)
    ba_service_log_bytes = 4096;
  ba_services_load ();
  make_boot_id ();
  if (connect_path != NULL)
    connect_socket (connect_path);
  else if (socket_fd != NULL)
    use_socket_fd (socket_fd);
  serve ();
  return 0;
}
