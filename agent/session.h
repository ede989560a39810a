/* box guest agent: exec sessions (detachable, with an output ring). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "chan.h"
#include "proto.h"

#define BA_SESSION_RING (1u << 20)        /* output kept per session */
#define BA_SESSION_KEEP_MS (10 * 60 * 1000) /* exited sessions stay listed */
extern int64_t ba_session_keep_ms;          /* BA_SESSION_KEEP_MS; --session-keep-ms in tests */
#define BA_SESSION_MAX 1024

/* exec with "session": start it and attach channel chan (the owner). */
void ba_session_exec (int64_t id, uint32_t chan, const BaJson *req, int64_t timeout_ms);
/* attach, sessions, session-signal, detach-all */
void ba_session_op (int64_t id, const char *op, const BaJson *m);

/* An attached channel ends. by_host: the host closed it (or the connection
 * ended): the owner channel of a running non-detachable session then sends
 * SIGHUP to its group (returns true). */
bool ba_session_detach (BaChan *c, bool by_host);
void ba_session_ctrl (BaSession *s, const char *op, const BaJson *m);
int ba_session_stdin_fd (BaSession *s);
void ba_session_stdin_eof (BaSession *s);
bool ba_session_tty (BaSession *s);
/* The id of the running session whose process is pid, or NULL. */
const char *ba_session_by_pid (int pid);

void ba_session_pump (void);
void ba_session_poll_prepare (void);
void ba_session_child_exited (int pid, int status);
int ba_session_timeout (int64_t now);
void ba_session_tick (int64_t now);
