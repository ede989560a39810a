/* box guest agent: presuspend hooks, run one after another by a worker (so
 * the agent keeps serving meanwhile) within one deadline for all. */

#include "hooks.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "exec.h"
#include "work.h"

static int
cmp_names (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* Copy what the hook prints to the agent's log (our stderr). */
static void
drain (int fd)
{
  char buf[4096];
  ssize_t r;
  while (fd >= 0 && (r = read (fd, buf, sizeof buf)) > 0)
    (void) !write (2, buf, (size_t) r);
}

/* Run one hook until it exits or the deadline. Returns the wait status, or
 * -1 when it was killed at the deadline. */
static int
run_one (const char *path, int64_t deadline)
{
  char json[4200];
  const char *code = NULL, *err = NULL;
  char msg[256];
  BaJson *req;
  BaProc p;
  BaBuf b = { 0 };
  int status = 0;

  ba_jw_begin (&b);
  ba_jw_key (&b, "argv");
  ba_buf_append (&b, "[", 1);
  ba_jw_raw_string (&b, path, strlen (path));
  ba_buf_append (&b, "]", 1);
  ba_jw_str (&b, "user", "root");
  ba_jw_str (&b, "cwd", "/");
  ba_jw_end (&b);
  snprintf (json, sizeof json, "%.*s", (int) b.len, (const char *) b.data);
  ba_buf_clear (&b);
  req = ba_json_parse (json, strlen (json), &err);
  if (req == NULL || !ba_spawn (req, &p, &code, msg, sizeof msg)) {
    ba_log ("presuspend hook %s: %s", path, req == NULL ? err : msg);
    ba_json_free (req);
    return 1 << 8; /* as exit code 1 */
  }
  ba_json_free (req);
  close (p.fd_in);
  for (;;) {
    struct pollfd pfd[2] = { { .fd = p.fd_out, .events = POLLIN }, { .fd = p.fd_err, .events = POLLIN } };
    int64_t left = deadline - ba_now_ms ();
    pid_t r = waitpid (p.pid, &status, WNOHANG);
    if (r == p.pid) {
      drain (p.fd_out);
      drain (p.fd_err);
      break;
    }
    if (left <= 0) {
      kill (-p.pid, SIGKILL);
      waitpid (p.pid, &status, 0);
      status = -1;
      break;
    }
    if (poll (pfd, 2, left < 50 ? (int) left : 50) > 0) {
      for (int i = 0; i < 2; i++)
        if (pfd[i].revents & POLLIN) {
          char buf[4096];
          ssize_t n = read (pfd[i].fd, buf, sizeof buf);
          if (n > 0)
            (void) !write (2, buf, (size_t) n);
        } else if (pfd[i].revents != 0) {
          /* closed: stop polling it */
          if (i == 0) {
            close (p.fd_out);
            p.fd_out = -1;
          } else {
            close (p.fd_err);
            p.fd_err = -1;
          }
        }
    }
  }
  if (p.fd_out >= 0)
    close (p.fd_out);
  if (p.fd_err >= 0)
    close (p.fd_err);
  return status;
}

static void
run_hooks (BaWorkCtx *w, const BaJson *req)
{
  int64_t timeout = BA_HOOKS_TIMEOUT_MS, deadline;
  int ran = 0, failed = 0, timed_out = 0, skipped = 0;
  char **names = NULL;
  size_t n = 0, cap = 0;
  DIR *d;
  struct dirent *e;
  BaBuf b = { 0 };

  if (ba_json_get (req, "timeout_ms") != NULL &&
      (!ba_json_get_int (req, "timeout_ms", &timeout) || timeout < 1 || timeout > 60000)) {
    ba_work_error (w, "invalid", "timeout_ms must be 1 to 60000");
    return;
  }
  deadline = ba_now_ms () + timeout;
  d = ba_hooks_dir != NULL ? opendir (ba_hooks_dir) : NULL;
  while (d != NULL && (e = readdir (d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    if (!ba_grow ((void **) &names, &cap, n, sizeof *names))
      break;
    names[n++] = strdup (e->d_name);
  }
  if (d != NULL)
    closedir (d);
  if (n > 0)
    qsort (names, n, sizeof *names, cmp_names);
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    struct stat st;
    int status;
    snprintf (path, sizeof path, "%s/%s", ba_hooks_dir, names[i]);
    if (stat (path, &st) < 0 || !S_ISREG (st.st_mode) || access (path, X_OK) < 0)
      continue;
    if (timed_out || ba_now_ms () >= deadline) {
      skipped++;
      continue;
    }
    ran++;
    status = run_one (path, deadline);
    if (status == -1) {
      timed_out = 1;
      ba_log ("presuspend hook %s killed at the deadline", path);
    } else if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
      failed++;
      ba_log ("presuspend hook %s failed (status %d)", path, status);
    }
  }
  ba_work_reply_begin (&b);
  ba_jw_int (&b, "ran", ran);
  ba_jw_int (&b, "failed", failed);
  ba_jw_int (&b, "timed_out", timed_out);
  ba_jw_int (&b, "skipped", skipped);
  ba_work_reply_end (w, &b);
}

void
ba_hooks_presuspend (int64_t id, const BaJson *m)
{
  ba_work_start (id, 0, m, 0, run_hooks);
}
