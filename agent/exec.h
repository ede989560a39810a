/* box guest agent: users, environment and starting processes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "proto.h"

typedef struct {
  uid_t uid;
  gid_t gid;
  gid_t groups[64];
  int ngroups;
  char name[64];
  char home[256];
  char shell[256];
} BaUser;

/* Look a user up by name in /etc/passwd and /etc/group (no NSS). */
bool ba_user_lookup (const char *name, BaUser *u);

/* Replace the sandbox environment (set-env), kept in memory only.
 * FALSE if env is not an object of valid names to strings. */
bool ba_env_set_sandbox (const BaJson *env);

/* Errors that concern starting a command: stable codes for the host. */
#define BA_E_NOT_FOUND "executable_not_found"
#define BA_E_USER "unknown_user"
#define BA_E_CWD "bad_cwd"
#define BA_E_INVALID "invalid"
#define BA_E_START "start_failed"

typedef struct {
  pid_t pid;       /* also the process group (setsid) */
  bool tty;
  int fd_in;       /* stdin pipe, or the pty master */
  int fd_out;      /* stdout pipe, or a dup of the pty master */
  int fd_err;      /* stderr pipe; -1 with a tty */
} BaProc;

/* Start the process an exec request describes: argv, env, cwd (default the
 * user's home), user (default box), tty, cols, rows. Environment layering:
 * /etc/environment, the sandbox env, the call's env, then HOME USER LOGNAME
 * SHELL, PATH defaulting to BA_DEFAULT_PATH. Returns FALSE with a BA_E_* code
 * and a message when the command cannot start. */
bool ba_spawn (const BaJson *req, BaProc *proc, const char **code, char *msg, size_t msglen);
