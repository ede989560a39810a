/* box guest agent: service-logs, a service's log files to the host on a
 * channel (doc/AGENT-PROTOCOL.md "Services"): the last `tail` lines across
 * <name>.log.2, .log.1 and .log, then with `follow` what is written next,
 * through rotations and truncations. */
#pragma once

#include <stdint.h>

#include "proto.h"

#define BA_LOGS_TAIL_DEFAULT 100
#define BA_LOGS_TAIL_MAX     10000
/* a longer line is cut: the bytes beyond are dropped, its newline kept */
#define BA_LOGS_LINE_MAX     (16u << 10)

/* Where the last @lines lines of the files @fds (oldest first, -1 for a
 * missing one) begin: *file and *offset (file 0 offset 0 when they hold
 * fewer). A last line without its newline counts. Returns how many lines
 * that start gives, at most @lines. */
uint64_t ba_logs_tail_start (const int fds[], int nfds, uint64_t lines, int *file,
                             uint64_t *offset);

/* Starts the worker for request @id on channel @chan (taken, checked);
 * the caller checked that "name" is a service. */
void ba_logs_start (int64_t id, uint32_t chan, const BaJson *req);
