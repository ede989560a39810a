/* box guest agent: supervised services (doc/AGENT-PROTOCOL.md, "Services").
 *
 * Definitions are files DIR/<name>.json (PID 1: /var/lib/box/services);
 * each service's stdout and stderr go through one pipe into
 * LOGDIR/<name>.log (PID 1: /var/log/box/services), rotated at
 * ba_service_log_bytes into <name>.log.1 and <name>.log.2. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

#define BA_SERVICES_MAX        64
#define BA_SERVICE_NAME_MAX    63
#define BA_SERVICE_DEF_MAX     (64u << 10)
#define BA_SERVICE_LOG_BYTES   (8u << 20)
/* restart pauses: 1 s doubling to 30 s; BA_SERVICE_FAILS quick exits in a
 * row (a run shorter than BA_SERVICE_STABLE_MS) make the service crashed */
#define BA_SERVICE_PAUSE_MS    1000
#define BA_SERVICE_PAUSE_MAX   30000
#define BA_SERVICE_FAILS       5
#define BA_SERVICE_STABLE_MS   10000
#define BA_SERVICE_GRACE_MS    10000

extern const char *ba_services_dir;     /* NULL: no services */
extern const char *ba_services_log_dir;
extern uint64_t ba_service_log_bytes;
extern int64_t ba_service_grace_ms;

/* Whether NAME is a valid service name: 1..63 of [A-Za-z0-9_.-], not
 * starting with '.' or '-'. */
bool ba_service_name_ok (const char *name);

/* LOGDIR/<name>.log (gen 0) or LOGDIR/<name>.log.<gen> */
void ba_service_log_path (char *out, size_t n, const char *name, int gen);
/* The current log file of service @name (its inode) and its size, while
 * the agent has it open; false otherwise. */
bool ba_service_log_pos (const char *name, uint64_t *ino, uint64_t *size);

/* Read the definitions (once); services start at the first ba_services_go
 * (PID 1: the first set-env after boot, so they get the sandbox's env).
 * ba_services_hold (a set-env with `hold`: the sandbox env is withheld for
 * a pause or a snapshot) starts none until the next ba_services_go. */
void ba_services_load (void);
void ba_services_go (void);
void ba_services_hold (void);

/* service-list, service-get, service-put, service-delete, service-start,
 * service-stop, service-restart */
void ba_services_op (int64_t id, const char *op, const BaJson *m);

void ba_services_poll_prepare (void);
int ba_services_timeout (int64_t now);
void ba_services_tick (int64_t now);
/* true when PID was a service's process */
bool ba_services_child_exited (pid_t pid, int status);
