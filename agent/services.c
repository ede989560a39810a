/* box guest agent: supervised services.
 *
 * A service is a definition file and, while it should run, one process
 * (its own process group) whose stdout and stderr share a pipe that the
 * agent copies into the service's log file.  Everything is bounded: at
 * most BA_SERVICES_MAX services, definitions of at most BA_SERVICE_DEF_MAX
 * bytes, at most 64 KiB of a service's output copied per loop turn, and
 * log files rotated at ba_service_log_bytes with two old files kept.
 *
 * The rules (doc/API.md, "Services"):
 *   - a service that should run starts when every service it needs is
 *     running (until then it is `starting`);
 *   - its process exiting, for whatever reason, while it should run is a
 *     failure: it starts again after a pause of 1 s, doubling per failure
 *     in a row up to 30 s; a run of at least 10 s resets the count;
 *     the 5th failure in a row makes it `crashed` (no more tries until a
 *     start, restart, PUT or the next boot);
 *   - stop: SIGTERM to the process group, SIGKILL after the grace period;
 *     when the main process ends, whatever is left of its group is killed;
 *   - `restarts` counts the starts after the first (automatic or asked).
 * Replies to put/start/stop/restart/delete wait until no process of the
 * service is being stopped, so a reply shows the settled state.
 */

#include "agent.h"
#include "chan.h"
#include "logs.h"
#include "services.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

const char *ba_services_dir;
const char *ba_services_log_dir;
uint64_t ba_service_log_bytes = BA_SERVICE_LOG_BYTES;
int64_t ba_service_grace_ms = BA_SERVICE_GRACE_MS;

#define MAX_PENDING 8
/* a service's output, copied into its log: at most COPY_PER_TURN bytes per
 * loop turn (the other services and channels get theirs), READ_BYTES per
 * read and log write (the pipe holds BA_PIPE_SIZE, so one read takes what
 * a fast writer left in a turn), so a fast writer costs few guest syscalls
 * (each one is dear under TCG) and wakes a follower (logs.c) once per
 * chunk */
#define COPY_PER_TURN (256u << 10)
#define READ_BYTES (256u << 10)

typedef struct {
  bool used;
  char name[BA_SERVICE_NAME_MAX + 1];
  BaJson *def;          /* the canonical definition */
  bool want;            /* should run */
  bool crashed;
  bool deleting;
  bool restart_now;     /* after this stop, start at once (restart, PUT) */
  pid_t pid;            /* > 0 while its main process lives */
  bool stopping;        /* SIGTERM sent */
  int64_t kill_at;      /* SIGKILL then (monotonic ms) */
  int64_t run_since;    /* monotonic ms */
  int64_t started_at;   /* unix ms */
  int64_t next_start;   /* monotonic ms */
  int fails;
  int64_t restarts;
  bool started_once;
  int out_fd;           /* the output pipe, -1 */
  int log_fd;           /* -1 */
  uint64_t log_size;
  uint64_t log_ino;     /* of the file log_fd writes */
  int64_t pending[MAX_PENDING];
  int npending;
} Svc;

static Svc svcs[BA_SERVICES_MAX];
static bool loaded, going, held;

bool
ba_service_name_ok (const char *name)
{
  size_t n = name != NULL ? strlen (name) : 0;
  if (n == 0 || n > BA_SERVICE_NAME_MAX || name[0] == '.' || name[0] == '-')
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '.' || c == '-'))
      return false;
  }
  return true;
}

static Svc *
find (const char *name)
{
  for (int i = 0; i < BA_SERVICES_MAX; i++)
    if (svcs[i].used && strcmp (svcs[i].name, name) == 0)
      return &svcs[i];
  return NULL;
}

/* ---- definitions ---------------------------------------------------------- */

static bool
string_array_ok (const BaJson *a, bool names, size_t max)
{
  size_t n = 0;
  if (a->type != BA_JARR)
    return false;
  for (const BaJson *c = a->child; c != NULL; c = c->next) {
    if (c->type != BA_JSTR || strlen (c->s) != c->slen || ++n > max)
      return false;
    if (names && !ba_service_name_ok (c->s))
      return false;
  }
  return true;
}

/* A definition: {cmd, cwd?, env?, user?, needs?, http_port?}, nothing else. */
static bool
def_ok (const BaJson *d, const char **err)
{
  const BaJson *cmd = d != NULL ? ba_json_get (d, "cmd") : NULL;
  if (d == NULL || d->type != BA_JOBJ) {
    *err = "a definition is an object";
    return false;
  }
  for (const BaJson *c = d->child; c != NULL; c = c->next) {
    bool ok;
    if (strcmp (c->key, "cmd") == 0)
      ok = string_array_ok (c, false, 4096) && c->child != NULL;
    else if (strcmp (c->key, "needs") == 0)
      ok = string_array_ok (c, true, BA_SERVICES_MAX);
    else if (strcmp (c->key, "cwd") == 0 || strcmp (c->key, "user") == 0)
      ok = c->type == BA_JSTR && strlen (c->s) == c->slen && c->slen > 0;
    else if (strcmp (c->key, "env") == 0) {
      ok = c->type == BA_JOBJ;
      for (const BaJson *e = c->child; ok && e != NULL; e = e->next)
        ok = e->type == BA_JSTR && strlen (e->s) == e->slen;
    } else if (strcmp (c->key, "http_port") == 0)
      ok = c->type == BA_JNUM && c->is_int && c->i >= 1 && c->i <= 65535;
    else {
      *err = "unknown field in the definition";
      return false;
    }
    if (!ok) {
      *err = "a definition field has the wrong type";
      return false;
    }
  }
  if (cmd == NULL) {
    *err = "cmd must be a non-empty array of strings";
    return false;
  }
  return true;
}

static void
write_value (BaBuf *b, const BaJson *v)
{
  switch (v->type) {
  case BA_JSTR:
    ba_jw_raw_string (b, v->s, v->slen);
    break;
  case BA_JNUM:
    ba_buf_printf (b, "%lld", (long long) v->i);
    break;
  case BA_JBOOL:
    ba_buf_printf (b, "%s", v->b ? "true" : "false");
    break;
  case BA_JARR:
    ba_buf_append (b, "[", 1);
    for (const BaJson *c = v->child; c != NULL; c = c->next) {
      if (c != v->child)
        ba_buf_append (b, ",", 1);
      write_value (b, c);
    }
    ba_buf_append (b, "]", 1);
    break;
  case BA_JOBJ:
    ba_buf_append (b, "{", 1);
    for (const BaJson *c = v->child; c != NULL; c = c->next) {
      if (c != v->child)
        ba_buf_append (b, ",", 1);
      ba_jw_raw_string (b, c->key, strlen (c->key));
      ba_buf_append (b, ":", 1);
      write_value (b, c);
    }
    ba_buf_append (b, "}", 1);
    break;
  default:
    ba_buf_append (b, "null", 4);
  }
}

/* mkdir -p (mode 0755) */
static void
make_dirs (const char *dir)
{
  char p[512];
  snprintf (p, sizeof p, "%s", dir);
  for (char *c = p + 1; *c != 0; c++)
    if (*c == '/') {
      *c = 0;
      mkdir (p, 0755);
      *c = '/';
    }
  mkdir (p, 0755);
}

static void
path_of (char *out, size_t n, const char *name, const char *suffix)
{
  snprintf (out, n, "%s/%s%s", ba_services_dir, name, suffix);
}

/* Write the definition atomically (a temporary file, fsync, rename). */
static bool
def_save (const char *name, const BaJson *def)
{
  char path[512], tmp[520];
  BaBuf b = { 0 };
  int fd;
  bool ok;
  make_dirs (ba_services_dir);
  path_of (path, sizeof path, name, ".json");
  snprintf (tmp, sizeof tmp, "%s.tmp", path);
  write_value (&b, def);
  ba_buf_append (&b, "\n", 1);
  fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ok = fd >= 0 && !b.oom && write (fd, b.data, b.len) == (ssize_t) b.len && fsync (fd) == 0;
  if (fd >= 0)
    close (fd);
  ok = ok && rename (tmp, path) == 0;
  if (!ok)
    unlink (tmp);
  ba_buf_clear (&b);
  free (b.data);
  return ok;
}

static Svc *
slot_new (const char *name)
{
  for (int i = 0; i < BA_SERVICES_MAX; i++)
    if (!svcs[i].used) {
      Svc *s = &svcs[i];
      memset (s, 0, sizeof *s);
      s->used = true;
      snprintf (s->name, sizeof s->name, "%s", name);
      s->out_fd = s->log_fd = -1;
      return s;
    }
  return NULL;
}

void
ba_services_load (void)
{
  DIR *d;
  struct dirent *e;
  if (loaded || ba_services_dir == NULL)
    return;
  loaded = true;
  d = opendir (ba_services_dir);
  if (d == NULL)
    return;
  while ((e = readdir (d)) != NULL) {
    char name[BA_SERVICE_NAME_MAX + 8], path[512];
    size_t n = strlen (e->d_name);
    const char *err = NULL;
    char *text;
    BaJson *def;
    Svc *s;
    int fd;
    ssize_t r;
    if (n <= 5 || n - 5 > BA_SERVICE_NAME_MAX || strcmp (e->d_name + n - 5, ".json") != 0)
      continue;
    snprintf (name, sizeof name, "%.*s", (int) (n - 5), e->d_name);
    if (!ba_service_name_ok (name) || find (name) != NULL)
      continue;
    path_of (path, sizeof path, name, ".json");
    fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    text = malloc (BA_SERVICE_DEF_MAX);
    r = fd >= 0 && text != NULL ? read (fd, text, BA_SERVICE_DEF_MAX) : -1;
    if (fd >= 0)
      close (fd);
    def = r > 0 && r < (ssize_t) BA_SERVICE_DEF_MAX ? ba_json_parse (text, (size_t) r, &err) : NULL;
    free (text);
    if (def == NULL || !def_ok (def, &err) || (s = slot_new (name)) == NULL) {
      ba_log ("service %s: definition ignored: %s", name, err != NULL ? err : "unreadable");
      ba_json_free (def);
      continue;
    }
    s->def = def;
    s->want = true;
  }
  closedir (d);
}

/* ---- logs ----------------------------------------------------------------- */

void
ba_service_log_path (char *out, size_t n, const char *name, int gen)
{
  if (gen == 0)
    snprintf (out, n, "%s/%s.log", ba_services_log_dir, name);
  else
    snprintf (out, n, "%s/%s.log.%d", ba_services_log_dir, name, gen);
}

static void
log_open (Svc *s)
{
  char path[512];
  struct stat st;
  if (s->log_fd >= 0 || ba_services_log_dir == NULL)
    return;
  make_dirs (ba_services_log_dir);
  ba_service_log_path (path, sizeof path, s->name, 0);
  s->log_fd = open (path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  s->log_size = s->log_ino = 0;
  if (s->log_fd >= 0 && fstat (s->log_fd, &st) == 0) {
    s->log_size = (uint64_t) st.st_size;
    s->log_ino = (uint64_t) st.st_ino;
  }
}

bool
ba_service_log_pos (const char *name, uint64_t *ino, uint64_t *size)
{
  for (int i = 0; i < BA_SERVICES_MAX; i++)
    if (svcs[i].used && svcs[i].log_fd >= 0 && strcmp (svcs[i].name, name) == 0) {
      *ino = svcs[i].log_ino;
      *size = svcs[i].log_size;
      return true;
    }
  return false;
}

static void
log_rotate (Svc *s)
{
  char a[512], b[512];
  uint64_t ino = s->log_ino, end = s->log_size;
  if (s->log_fd >= 0)
    close (s->log_fd);
  s->log_fd = -1;
  ba_service_log_path (a, sizeof a, s->name, 1);
  ba_service_log_path (b, sizeof b, s->name, 2);
  rename (a, b);
  ba_service_log_path (b, sizeof b, s->name, 0);
  rename (b, a);
  log_open (s);
  ba_logs_rotated (s->name, ino, end, s->log_fd >= 0 ? s->log_ino : 0);
}

/* Append to the log, rotating so that no file passes the limit (a chunk
 * that would is split at the limit). */
static void
log_write (Svc *s, const char *data, size_t n)
{
  log_open (s);
  while (n > 0 && s->log_fd >= 0) {
    size_t room, k;
    ssize_t w;
    if (s->log_size >= ba_service_log_bytes) {
      log_rotate (s);
      continue;
    }
    room = (size_t) (ba_service_log_bytes - s->log_size);
    k = n < room ? n : room;
    w = write (s->log_fd, data, k);
    if (w <= 0)
      return; /* a full disk: the output is lost, the service runs on */
    ba_logs_written (s->name, s->log_ino, s->log_size, data, (size_t) w);
    s->log_size += (uint64_t) w;
    data += w;
    n -= (size_t) w;
  }
}

static void __attribute__ ((format (printf, 2, 3)))
log_note (Svc *s, const char *fmt, ...)
{
  char line[600];
  va_list ap;
  int n;
  va_start (ap, fmt);
  n = vsnprintf (line, sizeof line, fmt, ap);
  va_end (ap);
  if (n > 0)
    log_write (s, line, (size_t) n < sizeof line ? (size_t) n : sizeof line - 1);
}

static void
on_output (void *obj, int tag, short revents)
{
  Svc *s = obj;
  static char buf[READ_BYTES];
  size_t done = 0;
  while (s->out_fd >= 0 && done < COPY_PER_TURN) {
    ssize_t r = read (s->out_fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      if (r == 0 || errno != EAGAIN) {
        close (s->out_fd);
        s->out_fd = -1;
      }
      break;
    }
    log_write (s, buf, (size_t) r);
    done += (size_t) r;
  }
}

/* ---- processes ------------------------------------------------------------ */

static int64_t
unix_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
failed (Svc *s, int64_t now)
{
  int64_t pause = BA_SERVICE_PAUSE_MS;
  if (now - s->run_since >= BA_SERVICE_STABLE_MS)
    s->fails = 0;
  s->fails++;
  if (s->fails >= BA_SERVICE_FAILS) {
    s->crashed = true;
    log_note (s, "box: %d failures in a row: crashed\n", s->fails);
    return;
  }
  for (int i = 1; i < s->fails && pause < BA_SERVICE_PAUSE_MAX; i++)
    pause *= 2;
  if (pause > BA_SERVICE_PAUSE_MAX)
    pause = BA_SERVICE_PAUSE_MAX;
  s->next_start = now + pause;
}

static void
spawn (Svc *s, int64_t now)
{
  BaBuf b = { 0 };
  BaJson *req;
  BaProc proc;
  const char *code = NULL, *err = NULL;
  char msg[300];
  const BaJson *cmd = ba_json_get (s->def, "cmd");
  const BaJson *env = ba_json_get (s->def, "env");
  const char *cwd = ba_json_get_str (s->def, "cwd");
  const char *user = ba_json_get_str (s->def, "user");

  ba_jw_begin (&b);
  ba_jw_key (&b, "argv");
  write_value (&b, cmd);
  if (env != NULL) {
    ba_jw_key (&b, "env");
    write_value (&b, env);
  }
  if (cwd != NULL)
    ba_jw_str (&b, "cwd", cwd);
  if (user != NULL)
    ba_jw_str (&b, "user", user);
  ba_jw_bool (&b, "merge_stderr", true);
  ba_jw_end (&b);
  req = b.oom ? NULL : ba_json_parse ((const char *) b.data, b.len, &err);
  ba_buf_clear (&b);
  free (b.data);

  if (s->started_once)
    s->restarts++;
  s->started_once = true;
  s->run_since = now;
  if (req == NULL || !ba_spawn (req, &proc, &code, msg, sizeof msg)) {
    log_note (s, "box: cannot start: %s\n", req == NULL ? "out of memory" : msg);
    ba_json_free (req);
    failed (s, now);
    return;
  }
  ba_json_free (req);
  close (proc.fd_in);
  if (proc.fd_err >= 0)
    close (proc.fd_err);
  if (s->out_fd >= 0)
    close (s->out_fd);
  s->out_fd = proc.fd_out;
  s->pid = proc.pid;
  s->started_at = unix_ms ();
  s->stopping = false;
}

static bool
needs_running (const Svc *s)
{
  const BaJson *needs = ba_json_get (s->def, "needs");
  if (needs == NULL)
    return true;
  for (const BaJson *c = needs->child; c != NULL; c = c->next) {
    const Svc *n = find (c->s);
    if (n == NULL || n->pid <= 0 || n->stopping)
      return false;
  }
  return true;
}

static void
stop_process (Svc *s, int64_t now)
{
  if (s->pid <= 0 || s->stopping)
    return;
  kill (-s->pid, SIGTERM);
  kill (s->pid, SIGTERM);
  s->stopping = true;
  s->kill_at = now + ba_service_grace_ms;
}

static const char *
state_of (const Svc *s)
{
  if (s->pid > 0 && !s->stopping)
    return "running";
  if (s->crashed)
    return "crashed";
  return s->want ? "starting" : "stopped";
}

static void
write_record (BaBuf *b, const Svc *s)
{
  static const char *const fields[] = { "cmd", "cwd", "env", "user", "needs", "http_port", NULL };
  ba_jw_begin (b);
  ba_jw_str (b, "name", s->name);
  for (int i = 0; fields[i] != NULL; i++) {
    const BaJson *v = ba_json_get (s->def, fields[i]);
    if (v != NULL) {
      ba_jw_key (b, fields[i]);
      write_value (b, v);
    }
  }
  ba_jw_str (b, "state", state_of (s));
  ba_jw_int (b, "restarts", s->restarts);
  if (s->pid > 0 && !s->stopping) {
    ba_jw_int (b, "pid", s->pid);
    ba_jw_int (b, "started_at", s->started_at);
  }
  ba_jw_end (b);
}

static void
reply_record (int64_t id, const Svc *s)
{
  BaBuf b = { 0 };
  ba_reply_begin (&b, id);
  ba_jw_key (&b, "service");
  write_record (&b, s);
  ba_jw_end (&b);
  ba_send_json (0, &b);
  free (b.data);
}

static void
slot_free (Svc *s)
{
  char path[512];
  path_of (path, sizeof path, s->name, ".json");
  unlink (path);
  if (s->out_fd >= 0)
    close (s->out_fd);
  if (s->log_fd >= 0)
    close (s->log_fd);
  ba_json_free (s->def);
  memset (s, 0, sizeof *s);
  s->out_fd = s->log_fd = -1;
}

/* Answer the waiting requests once no process of the service is stopping. */
static void
settle (Svc *s)
{
  if (s->pid > 0 && s->stopping)
    return;
  for (int i = 0; i < s->npending; i++) {
    if (s->deleting)
      ba_reply_ok (s->pending[i]);
    else
      reply_record (s->pending[i], s);
  }
  s->npending = 0;
  if (s->deleting)
    slot_free (s);
}

bool
ba_services_child_exited (pid_t pid, int status)
{
  int64_t now = ba_now_ms ();
  for (int i = 0; i < BA_SERVICES_MAX; i++) {
    Svc *s = &svcs[i];
    if (!s->used || s->pid != pid)
      continue;
    kill (-pid, SIGKILL); /* what is left of its group */
    /* what it wrote last: the pipe holds at most BA_PIPE_SIZE */
    for (int k = 0; k < (int) (BA_PIPE_SIZE / COPY_PER_TURN) + 1 && s->out_fd >= 0; k++)
      on_output (s, 0, 0);
    if (s->out_fd >= 0)
      close (s->out_fd);
    s->out_fd = -1;
    s->pid = 0;
    if (!s->stopping && s->want && !s->deleting) {
      if (WIFEXITED (status))
        log_note (s, "box: the process exited with status %d\n", WEXITSTATUS (status));
      else
        log_note (s, "box: the process was killed by signal %s\n", strsignal (WTERMSIG (status)));
      failed (s, now);
    } else if (s->restart_now) {
      s->next_start = now;
    }
    s->stopping = false;
    s->restart_now = false;
    ba_services_tick (now);
    settle (s);
    return true;
  }
  return false;
}

void
ba_services_go (void)
{
  going = true;
  held = false;
}

void
ba_services_hold (void)
{
  held = true;
}

void
ba_services_tick (int64_t now)
{
  bool again = true;
  /* a service that starts may let the ones that need it start */
  for (int round = 0; again && round < BA_SERVICES_MAX; round++) {
    again = false;
    for (int i = 0; i < BA_SERVICES_MAX; i++) {
      Svc *s = &svcs[i];
      if (!s->used)
        continue;
      if (s->pid > 0 && s->stopping && now >= s->kill_at) {
        kill (-s->pid, SIGKILL);
        kill (s->pid, SIGKILL);
        s->kill_at = now + 60000;
      }
      if (going && !held && s->want && !s->crashed && !s->deleting && s->pid <= 0 &&
          now >= s->next_start && needs_running (s)) {
        spawn (s, now);
        if (s->pid > 0)
          again = true;
        settle (s);
      }
    }
  }
}

int
ba_services_timeout (int64_t now)
{
  int64_t t = -1;
  for (int i = 0; i < BA_SERVICES_MAX; i++) {
    const Svc *s = &svcs[i];
    int64_t at = -1;
    if (!s->used)
      continue;
    if (s->pid > 0 && s->stopping)
      at = s->kill_at;
    else if (going && !held && s->want && !s->crashed && s->pid <= 0)
      at = s->next_start;
    if (at >= 0 && (t < 0 || at < t))
      t = at;
  }
  if (t < 0)
    return -1;
  return t <= now ? 0 : (int) (t - now < 60000 ? t - now : 60000);
}

void
ba_services_poll_prepare (void)
{
  for (int i = 0; i < BA_SERVICES_MAX; i++)
    if (svcs[i].used && svcs[i].out_fd >= 0)
      ba_poll_add (svcs[i].out_fd, POLLIN, on_output, &svcs[i], 0);
}

/* ---- operations ------------------------------------------------------------ */

static bool
wait_reply (Svc *s, int64_t id)
{
  if (s->npending >= MAX_PENDING) {
    ba_reply_error (id, "conflict", "too many requests wait for this service");
    return false;
  }
  s->pending[s->npending++] = id;
  return true;
}

static void
op_put (int64_t id, const char *name, const BaJson *m)
{
  const BaJson *in = ba_json_get (m, "def");
  const char *err = NULL;
  BaBuf b = { 0 };
  BaJson *def;
  Svc *s = find (name);
  int64_t now = ba_now_ms ();

  if (!def_ok (in, &err)) {
    ba_reply_error (id, "invalid", err);
    return;
  }
  if (s != NULL && (s->deleting || s->npending >= MAX_PENDING)) {
    ba_reply_error (id, "conflict", "the service is being deleted or is busy");
    return;
  }
  if (s == NULL && (s = slot_new (name)) == NULL) {
    ba_reply_error (id, "conflict", "a sandbox has at most 64 services");
    return;
  }
  write_value (&b, in);
  def = b.oom ? NULL : ba_json_parse ((const char *) b.data, b.len, &err);
  free (b.data);
  if (def == NULL || !def_save (name, def)) {
    ba_reply_error (id, "failed", "cannot write the definition");
    ba_json_free (def);
    if (s->def == NULL)
      slot_free (s);
    return;
  }
  ba_json_free (s->def);
  s->def = def;
  s->want = true;
  s->crashed = false;
  s->fails = 0;
  s->next_start = now;
  wait_reply (s, id);
  if (s->pid > 0) {
    s->restart_now = true;
    stop_process (s, now);
  }
  ba_services_tick (now);
  settle (s);
}

void
ba_services_op (int64_t id, const char *op, const BaJson *m)
{
  const char *name = ba_json_get_str (m, "name");
  int64_t now = ba_now_ms ();
  Svc *s;

  if (ba_services_dir == NULL) {
    ba_reply_error (id, "unknown_op", op);
    return;
  }
  if (strcmp (op, "service-list") == 0) {
    BaBuf b = { 0 };
    ba_reply_begin (&b, id);
    ba_jw_key (&b, "services");
    ba_buf_append (&b, "[", 1);
    for (int i = 0; i < BA_SERVICES_MAX; i++)
      if (svcs[i].used && !svcs[i].deleting)
        write_record (&b, &svcs[i]);
    ba_buf_append (&b, "]", 1);
    ba_jw_end (&b);
    ba_send_json (0, &b);
    free (b.data);
    return;
  }
  if (!ba_service_name_ok (name)) {
    ba_reply_error (id, "invalid", "a service name is 1 to 63 of A-Z a-z 0-9 _ . - (not first . or -)");
    return;
  }
  if (strcmp (op, "service-put") == 0) {
    op_put (id, name, m);
    return;
  }
  s = find (name);
  if (s == NULL || s->deleting) {
    ba_reply_error (id, "not_found", "no such service");
    return;
  }
  if (strcmp (op, "service-get") == 0) {
    reply_record (id, s);
    return;
  }
  if (strcmp (op, "service-logs") == 0) {
    uint32_t chan;
    if (ba_chan_take_id (id, m, &chan))
      ba_logs_start (id, chan, m);
    return;
  }
  if (strcmp (op, "service-start") == 0) {
    if (!s->want || s->crashed) {
      s->want = true;
      s->crashed = false;
      s->fails = 0;
      s->next_start = now;
    }
  } else if (strcmp (op, "service-stop") == 0) {
    s->want = false;
    s->crashed = false;
    stop_process (s, now);
  } else if (strcmp (op, "service-restart") == 0) {
    s->want = true;
    s->crashed = false;
    s->fails = 0;
    s->next_start = now;
    if (s->pid > 0) {
      s->restart_now = true;
      stop_process (s, now);
    }
  } else if (strcmp (op, "service-delete") == 0) {
    s->want = false;
    s->deleting = true;
    stop_process (s, now);
  } else {
    ba_reply_error (id, "unknown_op", op);
    return;
  }
  if (!wait_reply (s, id))
    return;
  ba_services_tick (now);
  settle (s);
}
