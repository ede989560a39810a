/* box guest agent: channels (processes whose stdio is multiplexed to the host). */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto.h"

/* Open an exec channel. Replies to request `id` on channel 0 (ok with pid,
 * or an error). req: argv env cwd user tty cols rows timeout_ms limit. */
void ba_chan_exec (int64_t id, uint32_t chan, const BaJson *req);

/* A frame from the host for channel f->chan (f->chan != 0). */
void ba_chan_frame (const BaFrame *f, const uint8_t *payload);

/* Fill pollfds for every channel; returns how many were added. */
int ba_chan_poll_prepare (struct pollfd *pfd, int max);
/* Handle the results for the entries ba_chan_poll_prepare() added. */
void ba_chan_poll_handle (struct pollfd *pfd, int n);

/* A child was reaped. */
void ba_chan_child_exited (int pid, int status);
/* Milliseconds until the next channel deadline, or -1. */
int ba_chan_timeout (int64_t now);
/* Deadlines, and channels that can finish now. */
void ba_chan_tick (int64_t now);
/* The host went away (a new hello): close every channel (SIGHUP to each
 * process group). */
void ba_chan_close_all (void);
/* The initial window (credit) for new channels, from hello. */
void ba_chan_set_window (uint32_t window);
int ba_chan_count (void);
