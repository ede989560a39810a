/* box.h: everything a plugin or an in-process tool needs. */
#pragma once

#include "box-auth.h"
#include "box-broker.h"
#include "box-config.h"
#include "box-engine.h"
#include "box-error.h"
#include "box-hypervisor.h"
#include "box-network.h"
#include "box-plugin.h"
#include "box-plugin-loader.h"
#include "box-records.h"
#include "box-requests.h"
#include "box-storage.h"
#include "box-storage-records.h"
#include "box-validate.h"
