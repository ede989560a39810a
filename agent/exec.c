/* box guest agent: users, environment and starting processes.
 * No NSS: /etc/passwd and /etc/group are read directly. */

#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* ---- users ---------------------------------------------------------- */

/* Split a colon-separated line in place into at most n fields. */
static int
split_colon (char *line, char **f, int n)
{
  int k = 0;
  f[k++] = line;
  for (char *p = line; *p != 0 && k < n; p++)
    if (*p == ':') {
      *p = 0;
      f[k++] = p + 1;
    }
  return k;
}

static bool
parse_id (const char *s, unsigned long *out)
{
  char *e;
  if (*s == 0)
    return false;
  errno = 0;
  *out = strtoul (s, &e, 10);
  return errno == 0 && *e == 0 && *out < 0xffffffffUL;
}

bool
ba_user_lookup (const char *name, BaUser *u)
{
  FILE *f;
  char line[1024];
  bool found = false;

  memset (u, 0, sizeof *u);
  if (name == NULL || *name == 0 || strlen (name) >= sizeof u->name)
    return false;
  f = fopen ("/etc/passwd", "re");
  if (f == NULL)
    return false;
  while (fgets (line, sizeof line, f) != NULL) {
    char *fld[7];
    unsigned long uid, gid;
    line[strcspn (line, "\n")] = 0;
    if (split_colon (line, fld, 7) != 7 || strcmp (fld[0], name) != 0)
      continue;
    if (!parse_id (fld[2], &uid) || !parse_id (fld[3], &gid))
      continue;
    u->uid = (uid_t) uid;
    u->gid = (gid_t) gid;
    snprintf (u->name, sizeof u->name, "%s", fld[0]);
    snprintf (u->home, sizeof u->home, "%s", *fld[5] != 0 ? fld[5] : "/");
    snprintf (u->shell, sizeof u->shell, "%s", *fld[6] != 0 ? fld[6] : "/bin/sh");
    found = true;
    break;
  }
  fclose (f);
  if (!found)
    return false;

  u->groups[u->ngroups++] = u->gid;
  f = fopen ("/etc/group", "re");
  if (f == NULL)
    return true;
  while (fgets (line, sizeof line, f) != NULL) {
    char *fld[4];
    unsigned long gid;
    line[strcspn (line, "\n")] = 0;
    if (split_colon (line, fld, 4) != 4 || !parse_id (fld[2], &gid) || gid == u->gid)
      continue;
    for (char *m = strtok (fld[3], ","); m != NULL; m = strtok (NULL, ","))
      if (strcmp (m, name) == 0 && u->ngroups < (int) (sizeof u->groups / sizeof u->groups[0]))
        u->groups[u->ngroups++] = (gid_t) gid;
  }
  fclose (f);
  return true;
}

/* ---- environment ------------------------------------------------------ */

typedef struct {
  char **v;
  int n, cap;
} EnvList;

static EnvList sandbox_env; /* memory only: never written to disk */

static bool
env_name_ok (const char *s, size_t n)
{
  if (n == 0 || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
    return false;
  for (size_t i = 1; i < n; i++)
    if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
      return false;
  return true;
}

static void
env_put (EnvList *e, const char *name, size_t nlen, const char *val)
{
  char *kv;
  for (int i = 0; i < e->n; i++)
    if (strncmp (e->v[i], name, nlen) == 0 && e->v[i][nlen] == '=') {
      free (e->v[i]);
      e->v[i] = e->v[--e->n];
      break;
    }
  if (e->n + 2 > e->cap) {
    int cap = e->cap ? e->cap * 2 : 32;
    char **v = realloc (e->v, sizeof *v * (size_t) cap);
    if (v == NULL)
      return;
    e->v = v;
    e->cap = cap;
  }
  if (asprintf (&kv, "%.*s=%s", (int) nlen, name, val) < 0)
    return;
  e->v[e->n++] = kv;
  e->v[e->n] = NULL;
}

static void
env_free (EnvList *e)
{
  for (int i = 0; i < e->n; i++)
    free (e->v[i]);
  free (e->v);
  memset (e, 0, sizeof *e);
}

static const char *
env_get (const EnvList *e, const char *name)
{
  size_t n = strlen (name);
  for (int i = 0; i < e->n; i++)
    if (strncmp (e->v[i], name, n) == 0 && e->v[i][n] == '=')
      return e->v[i] + n + 1;
  return NULL;
}

static bool
env_put_json (EnvList *e, const BaJson *obj)
{
  if (obj == NULL)
    return true;
  if (obj->type != BA_JOBJ)
    return false;
  for (const BaJson *c = obj->child; c != NULL; c = c->next) {
    if (c->type != BA_JSTR || !env_name_ok (c->key, strlen (c->key)) || strlen (c->s) != c->slen)
      return false;
  }
  for (const BaJson *c = obj->child; c != NULL; c = c->next)
    env_put (e, c->key, strlen (c->key), c->s);
  return true;
}

bool
ba_env_set_sandbox (const BaJson *env)
{
  EnvList fresh = { 0 };
  if (env != NULL && env->type != BA_JOBJ)
    return false;
  if (!env_put_json (&fresh, env)) {
    env_free (&fresh);
    return false;
  }
  env_free (&sandbox_env);
  sandbox_env = fresh;
  return true;
}

/* /etc/environment: KEY=VALUE lines (optional quotes), the image's layer. */
static void
env_load_image (EnvList *e)
{
  FILE *f = fopen ("/etc/environment", "re");
  char line[4096];
  if (f == NULL)
    return;
  while (fgets (line, sizeof line, f) != NULL) {
    char *p = line, *eq, *val;
    size_t vl;
    line[strcspn (line, "\n")] = 0;
    while (*p == ' ' || *p == '\t')
      p++;
    if (strncmp (p, "export ", 7) == 0)
      p += 7;
    eq = strchr (p, '=');
    if (*p == '#' || eq == NULL || !env_name_ok (p, (size_t) (eq - p)))
      continue;
    val = eq + 1;
    vl = strlen (val);
    if (vl >= 2 && (val[0] == '"' || val[0] == '\'') && val[vl - 1] == val[0]) {
      val[vl - 1] = 0;
      val++;
    }
    env_put (e, p, (size_t) (eq - p), val);
  }
  fclose (f);
}

/* ---- executable lookup -------------------------------------------------- */

static bool
is_executable (const char *path)
{
  struct stat st;
  return stat (path, &st) == 0 && S_ISREG (st.st_mode) && (st.st_mode & 0111) != 0;
}

static bool
resolve_exe (const char *name, const char *path, char *out, size_t outlen)
{
  if (strchr (name, '/') != NULL) {
    snprintf (out, outlen, "%s", name);
    return is_executable (name);
  }
  for (const char *p = path; ; ) {
    const char *colon = strchr (p, ':');
    size_t n = colon != NULL ? (size_t) (colon - p) : strlen (p);
    if (n > 0 && (size_t) snprintf (out, outlen, "%.*s/%s", (int) n, p, name) < outlen && is_executable (out))
      return true;
    if (colon == NULL)
      break;
    p = colon + 1;
  }
  return false;
}

/* ---- spawning ------------------------------------------------------------- */

static void
child_fail (int errfd, char kind, int err)
{
  char msg[2] = { kind, (char) err };
  (void) !write (errfd, msg, 2);
  _exit (127);
}

bool
ba_spawn (const BaJson *req, BaProc *proc, const char **code, char *msg, size_t msglen)
{
  const BaJson *argv_j = ba_json_get (req, "argv");
  const char *user_name = ba_json_get_str (req, "user");
  const char *cwd = ba_json_get_str (req, "cwd");
  bool tty = ba_json_get_bool (req, "tty", false);
  bool merge = ba_json_get_bool (req, "merge_stderr", false);
  int64_t cols = 80, rows = 24;
  BaUser u;
  EnvList env = { 0 };
  char exe[4096];
  char **argv = NULL;
  int argc = 0, errp[2] = { -1, -1 }, in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 };
  int master = -1;
  char slave_name[128];
  pid_t pid;
  char fail[2];
  ssize_t r;

  memset (proc, 0, sizeof *proc);
  msg[0] = 0;
  proc->fd_in = proc->fd_out = proc->fd_err = -1;
  *code = BA_E_INVALID;

  if (argv_j == NULL || argv_j->type != BA_JARR || argv_j->child == NULL) {
    snprintf (msg, msglen, "argv must be a non-empty array of strings");
    return false;
  }
  for (const BaJson *c = argv_j->child; c != NULL; c = c->next) {
    if (c->type != BA_JSTR || strlen (c->s) != c->slen) {
      snprintf (msg, msglen, "argv must be a non-empty array of strings");
      return false;
    }
    argc++;
  }
  if (user_name == NULL)
    user_name = "box";
  if (!ba_user_lookup (user_name, &u)) {
    *code = BA_E_USER;
    snprintf (msg, msglen, "unknown user %s", user_name);
    return false;
  }
  ba_json_get_int (req, "cols", &cols);
  ba_json_get_int (req, "rows", &rows);

  /* env layering: image, sandbox, call, then the user's identity */
  env_load_image (&env);
  for (int i = 0; i < sandbox_env.n; i++) {
    const char *kv = sandbox_env.v[i];
    env_put (&env, kv, strcspn (kv, "="), strchr (kv, '=') + 1);
  }
  if (!env_put_json (&env, ba_json_get (req, "env"))) {
    snprintf (msg, msglen, "env must map variable names to strings");
    env_free (&env);
    return false;
  }
  env_put (&env, "HOME", 4, u.home);
  env_put (&env, "USER", 4, u.name);
  env_put (&env, "LOGNAME", 7, u.name);
  env_put (&env, "SHELL", 5, u.shell);
  if (env_get (&env, "PATH") == NULL)
    env_put (&env, "PATH", 4, BA_DEFAULT_PATH);
  if (tty && env_get (&env, "TERM") == NULL)
    env_put (&env, "TERM", 4, "xterm-256color");

  if (!resolve_exe (argv_j->child->s, env_get (&env, "PATH"), exe, sizeof exe)) {
    *code = BA_E_NOT_FOUND;
    snprintf (msg, msglen, "executable not found: %s", argv_j->child->s);
    env_free (&env);
    return false;
  }
  if (cwd == NULL)
    cwd = u.home;

  argv = calloc ((size_t) argc + 1, sizeof *argv);
  if (argv == NULL) {
    env_free (&env);
    return false;
  }
  argc = 0;
  for (const BaJson *c = argv_j->child; c != NULL; c = c->next)
    argv[argc++] = c->s;

  *code = BA_E_START;
  if (pipe2 (errp, O_CLOEXEC) < 0)
    goto fail;
  if (tty) {
    struct winsize ws = { .ws_row = (unsigned short) rows, .ws_col = (unsigned short) cols };
    master = posix_openpt (O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0 || unlockpt (master) < 0 || ptsname_r (master, slave_name, sizeof slave_name) != 0)
      goto fail;
    ioctl (master, TIOCSWINSZ, &ws);
  } else if (pipe2 (in, O_CLOEXEC) < 0 || pipe2 (out, O_CLOEXEC) < 0 || pipe2 (err, O_CLOEXEC) < 0) {
    goto fail;
  } else {
    ba_pipe_grow ((int[]) { in[1], out[0], err[0] }, 3);
  }

  pid = fork ();
  if (pid < 0)
    goto fail;
  if (pid == 0) {
    sigset_t all;
    sigemptyset (&all);
    sigprocmask (SIG_SETMASK, &all, NULL);
    for (int s = 1; s < NSIG; s++)
      signal (s, SIG_DFL);
    setsid ();
    if (tty) {
      int s = open (slave_name, O_RDWR);
      if (s < 0)
        child_fail (errp[1], 's', errno);
      ioctl (s, TIOCSCTTY, 0);
      dup2 (s, 0);
      dup2 (s, 1);
      dup2 (s, 2);
      if (s > 2)
        close (s);
    } else {
      dup2 (in[0], 0);
      dup2 (out[1], 1);
      dup2 (merge ? out[1] : err[1], 2);
    }
    if (setgroups ((size_t) u.ngroups, u.groups) < 0 || setgid (u.gid) < 0 || setuid (u.uid) < 0)
      child_fail (errp[1], 'u', errno);
    if (chdir (cwd) < 0)
      child_fail (errp[1], 'c', errno);
    execve (exe, argv, env.v);
    child_fail (errp[1], 'e', errno);
  }

  close (errp[1]);
  errp[1] = -1;
  do
    r = read (errp[0], fail, 2);
  while (r < 0 && errno == EINTR);
  close (errp[0]);
  errp[0] = -1;
  if (r == 2) {
    waitpid (pid, NULL, 0);
    if (fail[0] == 'c') {
      *code = BA_E_CWD;
      snprintf (msg, msglen, "cannot enter directory %s: %s", cwd, strerror (fail[1]));
    } else {
      snprintf (msg, msglen, "cannot start %s: %s", exe, strerror (fail[1]));
    }
    goto fail;
  }

  proc->pid = pid;
  proc->tty = tty;
  if (tty) {
    proc->fd_in = master;
    proc->fd_out = fcntl (master, F_DUPFD_CLOEXEC, 3);
  } else {
    close (in[0]);
    close (out[1]);
    close (err[1]);
    proc->fd_in = in[1];
    proc->fd_out = out[0];
    proc->fd_err = err[0];
  }
  fcntl (proc->fd_in, F_SETFL, O_NONBLOCK);
  fcntl (proc->fd_out, F_SETFL, O_NONBLOCK);
  if (proc->fd_err >= 0)
    fcntl (proc->fd_err, F_SETFL, O_NONBLOCK);
  free (argv);
  env_free (&env);
  return true;

fail:
  if (msg[0] == 0)
    snprintf (msg, msglen, "cannot start %s: %s", argv[0], strerror (errno));
  for (int *fd = (int[]) { errp[0], errp[1], in[0], in[1], out[0], out[1], err[0], err[1], master, -2 }; *fd != -2; fd++)
    if (*fd >= 0)
      close (*fd);
  free (argv);
  env_free (&env);
  return false;
}
