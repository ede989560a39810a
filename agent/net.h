/* box guest agent: ports (listing, port-connect) and the in-sandbox socket. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"

/* ports, port-connect */
void ba_net_op (int64_t id, const char *op, const BaJson *m);
/* Listen on the in-sandbox socket (its directory made 0755, the socket 0666). */
void ba_net_listen (const char *path);

void ba_net_poll_prepare (void);
int ba_net_timeout (int64_t now);
void ba_net_tick (int64_t now);
