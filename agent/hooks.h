/* box guest agent: presuspend hooks (doc/AGENT-PROTOCOL.md). */
#pragma once

#include <stdint.h>

#include "proto.h"

#define BA_HOOKS_TIMEOUT_MS 5000

void ba_hooks_presuspend (int64_t id, const BaJson *m);
