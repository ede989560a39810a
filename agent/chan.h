/* box guest agent: channels.
 *
 * A channel is one stream of work the host talks to: a process (plain exec,
 * or a worker child doing a file operation), an attachment to a session, or
 * a socket (a TCP connection, a connection to the in-sandbox socket). The
 * parts every kind shares live here: the table, host input (DATA stream 0
 * within the credit the agent grants, EOF), output credit, CLOSE. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "exec.h"
#include "proto.h"

typedef enum {
  BA_CH_PROC,   /* a child process: plain exec, or a worker (c->w != NULL) */
  BA_CH_ATTACH, /* attached to a session (c->s) */
  BA_CH_SOCK,   /* a socket (c->fd) */
} BaChanKind;

typedef struct BaSession BaSession;
typedef struct BaWorker BaWorker;
typedef struct BaChan BaChan;

struct BaChan {
  uint32_t id;
  BaChanKind kind;
  bool dead;              /* ended: freed at the end of the loop turn */
  /* host -> agent: DATA stream 0 */
  BaBuf in;               /* not yet written */
  bool in_eof;            /* the host sent EOF */
  bool in_closed;         /* ... and it was passed on (fd closed, EOF char, shutdown) */
  uint32_t in_uncredited; /* consumed, not yet credited back */
  int in_err;             /* a worker's input: writing it failed with this errno */
  /* agent -> host */
  uint32_t window;        /* DATA bytes the host still accepts */

  /* BA_CH_PROC */
  BaProc p;
  bool exited;
  int status;
  int64_t exited_at;
  int64_t deadline;       /* monotonic ms, 0 = none */
  bool timed_out;
  uint64_t limit;         /* per stream, 0 = unlimited */
  uint64_t sent[3];
  bool trunc[3];
  bool eof[3];            /* output stream at EOF */
  BaWorker *w;            /* a worker: file operations */

  /* BA_CH_ATTACH */
  BaSession *s;
  uint64_t cursor;        /* next offset of the session output to send */
  bool owner;             /* the exec channel that started the session */

  /* BA_CH_SOCK */
  int fd;
  bool connecting;
  int64_t reply_id;       /* port-connect: the request to answer once connected */
  int64_t connect_deadline;
  uint16_t port;
  bool tried_v6;
  bool rd_eof;            /* the peer's side ended (EOF sent to the host) */

  BaChan *next;
};

/* Open an exec channel (a session one when req has "session"). Replies to
 * request `id` on channel 0. */
void ba_chan_exec (int64_t id, uint32_t chan, const BaJson *req);

/* Channel table. ba_chan_new() adds a channel with the initial window. */
BaChan *ba_chan_new (uint32_t id, BaChanKind kind);
BaChan *ba_chan_find (uint32_t id); /* live channels only */
BaChan *ba_chan_first (void);
/* A worker replied that its work is set up: the host's input, held until
 * then, goes on. With fd >= 0, the worker's file (ba_work_reply_ok_input())
 * becomes the channel's input in place of its stdin pipe, which is closed. */
void ba_chan_work_ready (BaChan *c, int fd);
/* Check a request's "chan" for a new host channel: replies `invalid` and
 * returns false when missing, out of range or in use. */
bool ba_chan_take_id (int64_t id, const BaJson *req, uint32_t *chan);
/* The agent ends the channel: sends CLOSE (unless quiet) and marks it dead;
 * what it holds is released at the sweep. */
void ba_chan_end (BaChan *c, bool quiet);
/* Return stdin credit for bytes consumed from c->in. */
void ba_chan_credit (BaChan *c, uint32_t n, bool flush);

/* A frame from the host for channel f->chan (f->chan != 0). */
void ba_chan_frame (const BaFrame *f, const uint8_t *payload);

void ba_chan_poll_prepare (void);
void ba_chan_child_exited (int pid, int status);
int ba_chan_timeout (int64_t now);
void ba_chan_tick (int64_t now);
void ba_chan_sweep (void);
/* The host connection ends (a new hello, the host gone): every channel
 * ends without CLOSE frames; sessions detach or get SIGHUP, workers are
 * killed. */
void ba_chan_close_all (void);
/* detach-all: end the host-opened channels (and the agent-opened ones
 * with `agent`) as if the host had sent CLOSE, sending CLOSE for each.
 * Returns how many were closed; *hung_up counts process groups signalled. */
int ba_chan_detach_all (bool agent, int *hung_up);

void ba_chan_set_window (uint32_t window);
uint32_t ba_chan_get_window (void);
int ba_chan_count (void);

/* {"event":"exit",...} for a wait status (trunc may be NULL). */
void ba_exit_event (BaBuf *b, int status, bool timed_out, const bool trunc[3]);

/* Signal names as in `kill -l` (with or without SIG) or a number; -1 if bad. */
int ba_signal_parse (const BaJson *v);
