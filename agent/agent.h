/* box guest agent: shared declarations. */
#pragma once

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
bool ba_grow_rootfs (int64_t *old_blocks, int64_t *new_blocks, const char **err);

#include "exec.h"

/* ---- main.c: connection to the host ------------------------------------ */
/* Queue a frame to the host (frames are never split). */
void ba_send (uint8_t type, uint8_t stream, uint32_t chan, const void *data, size_t len);
void ba_send_json (uint32_t chan, BaBuf *json);
size_t ba_out_pending (void);
