/* box guest agent: shared declarations. */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

#define BA_AGENT_VERSION "0.1.0"
#define BA_PORT_NAME "org.box.agent.0"
#define BA_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define BA_RUN_LIMIT (16u << 20)

/* ---- logging (to /dev/kmsg-backed console when PID 1, stderr otherwise) */
void ba_log (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
int64_t ba_now_ms (void); /* CLOCK_MONOTONIC */

/* ---- sys.c: the guest's system set-up ------------------------------- */
/* Init mode, in the initramfs: load modules, mount the root disk, move
 * into it and exec the agent from the root filesystem. Never returns on
 * success. */
void ba_init_stage1 (int argc, char **argv);
/* PID 1 on the root filesystem: mounts, hostname, loopback, fs growth. */
void ba_init_stage2 (void);
const char *ba_cmdline_get (const char *key); /* box.KEY=VALUE from /proc/cmdline */
bool ba_set_hostname (const char *name, const char **err);
bool ba_net_configure (const BaJson *req, const char **err);
bool ba_grow_rootfs (uint64_t min_bytes, int64_t *old_blocks, int64_t *new_blocks,
                     const char **err);
/* Pipes between the agent and the processes and workers it runs hold
 * BA_PIPE_SIZE instead of 64 KiB: fewer wake-ups per MiB streamed, which
 * counts under TCG (pages are only taken as data is queued). */
#define BA_PIPE_SIZE (1 << 20)
void ba_pipe_grow (const int *fds, int n);

#include "exec.h"

/* ---- main.c: connection to the host ------------------------------------ */
/* Queue a frame to the host (frames are never split). */
void ba_send (uint8_t type, uint8_t stream, uint32_t chan, const void *data, size_t len);
void ba_send_json (uint32_t chan, BaBuf *json);
size_t ba_out_pending (void);
/* Output is read from sources only while the queue is below this. */
#define BA_OUT_QUEUE_HIGH (128u << 10)
/* A host connection is up: a hello was answered and the host side has not
 * gone away since. */
bool ba_host_ready (void);

/* Replies on channel 0: ba_reply_begin() writes {"id":N,"ok":true; add
 * members, then ba_jw_end() and ba_send_json (0, b). */
void ba_reply_begin (BaBuf *b, int64_t id);
void ba_reply_ok (int64_t id); /* {"id":N,"ok":true} */
void ba_reply_error (int64_t id, const char *code, const char *msg);
/* The error code for an errno value (doc: Conventions). */
const char *ba_errno_code (int err);

/* The poll set, rebuilt every turn of the main loop: modules add their
 * descriptors with a callback; objects a callback may touch must stay
 * allocated until the end of the turn (they are marked dead and swept). */
typedef void (*BaPollFn) (void *obj, int tag, short revents);
void ba_poll_add (int fd, short events, BaPollFn fn, void *obj, int tag);

/* Paths the tests override (--api-socket, --hooks-dir); NULL: none. */
extern const char *ba_api_socket_path;
extern const char *ba_hooks_dir;

/* ---- trust.c: the op trust-ca (the broker CA); --trust-root DIR for tests */
extern const char *ba_trust_root;
void ba_trust_ca (int64_t id, const BaJson *m);
