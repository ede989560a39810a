/* box guest agent: service-logs, a service's log files to the host on a
 * channel (doc/AGENT-PROTOCOL.md "Services"): the last `tail` lines across
 * <name>.log.2, .log.1 and .log, then with `follow` what is written next,
 * through rotations and truncations. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define BA_LOGS_TAIL_DEFAULT 100
#define BA_LOGS_TAIL_MAX     10000
/* a longer line is cut: the bytes beyond are dropped, its newline kept */
#define BA_LOGS_LINE_MAX     (16u << 10)

/* The line cut, passing what it lets through to @sink: in the worker its
 * output pipe, in the agent a live follower's channel (logs-live.c). Short
 * runs and cut lines are gathered in @buf (written when full and by
 * ba_logs_emit_flush()); a run of 4 KiB or more of lines the cut leaves as
 * they are goes to @sink straight from the caller's bytes. */
#define BA_LOGS_EMIT_BYTES (64u << 10)
typedef void (*BaLogsSink) (void *ctx, const uint8_t *p, size_t n);
typedef struct {
  BaLogsSink sink;
  void *ctx;
  uint64_t line; /* bytes of the current line passed on so far */
  size_t len;    /* bytes in buf */
  uint8_t buf[BA_LOGS_EMIT_BYTES];
} BaLogsEmit;

void ba_logs_emit_chunk (BaLogsEmit *e, const uint8_t *p, size_t n);
void ba_logs_emit_flush (BaLogsEmit *e);

/* Where the last @lines lines of the files @fds (oldest first, -1 for a
 * missing one) begin: *file and *offset (file 0 offset 0 when they hold
 * fewer). A last line without its newline counts. Returns how many lines
 * that start gives, at most @lines. */
uint64_t ba_logs_tail_start (const int fds[], int nfds, uint64_t lines, int *file,
                             uint64_t *offset);

/* ---- live followers (logs-live.c, in the agent) ---- */

typedef struct BaChan BaChan;
/* A follow worker's offer to take over (its result line @line). */
void ba_logs_offer (BaChan *c, const uint8_t *line, size_t n);
/* The agent wrote @n bytes of service @name's log at offset @at of the
 * file @ino: to its live followers, or back to their workers. */
void ba_logs_written (const char *name, uint64_t ino, uint64_t at, const void *data, size_t n);
/* The log of @name was rotated: file @old_ino ended at @old_end, @new_ino
 * is the current one (0: none). */
void ba_logs_rotated (const char *name, uint64_t old_ino, uint64_t old_end, uint64_t new_ino);
/* Every loop turn: offers waiting for their pipe to empty, ended channels. */
void ba_logs_poll_prepare (void);

/* Starts the worker for request @id on channel @chan (taken, checked);
 * the caller checked that "name" is a service. */
void ba_logs_start (int64_t id, uint32_t chan, const BaJson *req);
