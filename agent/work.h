/* box guest agent: workers, forked children that do one operation (a file
 * operation, the ports listing, the presuspend hooks) so the agent never
 * blocks on them, and so that with `user` they run with that user's
 * credentials.
 *
 * The child writes JSON lines on a socket: the first is the reply
 * ({"ok":true,...} or {"ok":false,"error":{...}}; the agent adds id and
 * chan), the next ones events for the channel. With BA_WORK_IN the host's
 * DATA stream 0 reaches the child's stdin; with BA_WORK_OUT the child's
 * stdout becomes DATA stream 1 (after the reply; its EOF only once the
 * worker ended without an error event). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "chan.h"
#include "exec.h"
#include "proto.h"

#define BA_WORK_IN 1
#define BA_WORK_OUT 2

/* ---- in the child ---------------------------------------------------------- */

typedef struct {
  int in;             /* host data, or -1 */
  int out;            /* data to the host, or -1 */
  int res;            /* result lines; the commit byte comes back on it */
  const BaUser *user; /* NULL: root */
  bool replied;
  bool failed;
} BaWorkCtx;

typedef void (*BaWorkFn) (BaWorkCtx *w, const BaJson *req);

/* Write {"ok":true then the caller's members then }. */
void ba_work_reply_begin (BaBuf *b);
void ba_work_reply_end (BaWorkCtx *w, BaBuf *b);
void ba_work_reply_ok (BaWorkCtx *w);
/* An error: the reply when none was sent yet, else an `error` event. */
void ba_work_error (BaWorkCtx *w, const char *code, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));
/* The same for an errno value: "<what> <path>: <strerror>". */
void ba_work_errno (BaWorkCtx *w, int err, const char *what, const char *path);
/* An event for the channel: a complete JSON object. */
void ba_work_event (BaWorkCtx *w, BaBuf *b);
/* The reply {"ok":true}, handing @fd (a regular file on a local file
 * system, open for writing) to the agent, which then writes the host's
 * input into it itself instead of into the worker's stdin: a pipe hop and
 * two copies fewer. The worker keeps its own descriptor. */
void ba_work_reply_ok_input (BaWorkCtx *w, int fd);
/* After the host's input reached EOF: 0 when the host ended it (EOF), -1
 * when it was abandoned (CLOSE, the connection gone), or the errno of the
 * agent's failed write into the file of ba_work_reply_ok_input(). */
int ba_work_wait_input (BaWorkCtx *w);

/* ---- in the agent ----------------------------------------------------------- */

/* Start fn in a worker for request id (chan 0: request/reply, no channel).
 * Looks up "user" first (unknown_user). */
void ba_work_start (int64_t id, uint32_t chan, const BaJson *req, int flags, BaWorkFn fn);

bool ba_work_replied (BaWorker *w);
bool ba_work_finished (BaWorker *w);
bool ba_work_failed (BaWorker *w);
/* The worker finished and its channel's output is drained: send EOF (when
 * it succeeded), its last events, and CLOSE. */
void ba_work_end_chan (BaWorker *w);
/* The host's input was all written and the pipe closed: commit (err 0), or
 * writing it into the worker's file failed with errno err. */
void ba_work_input_done (BaWorker *w, int err);
/* A few bytes to the worker on its result socket (the hand-off of
 * logs-live.c). */
void ba_work_tell (BaWorker *w, const void *p, size_t n);
/* The host abandoned it: kill the child (no reply, no events). */
void ba_work_abort (BaWorker *w);
void ba_work_forget_chan (BaWorker *w);
/* Every worker, with or without channel (a new host connection). */
void ba_work_abort_all (void);

void ba_work_poll_prepare (void);
void ba_work_child_exited (int pid, int status);
void ba_work_sweep (void);
