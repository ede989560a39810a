/* box.h: the plugin SDK, libbox-plugin-1 (what a plugin includes).
 *
 * The engine, its configuration and the transports are boxd's own and not
 * part of it; a plugin sees boxd through its BoxPluginContext.
 */
#pragma once

#include "box-agent.h"
#include "box-auth.h"
#include "box-broker.h"
#include "box-egress-policy.h"
#include "box-enum-types.h"
#include "box-error.h"
#include "box-export.h"
#include "box-hypervisor.h"
#include "box-network.h"
#include "box-plugin.h"
#include "box-plugin-context.h"
#include "box-records.h"
#include "box-state-store.h"
#include "box-storage.h"
#include "box-storage-records.h"
