/* box-broker-plugin.h: the `broker` plugin (internal to the plugin and its test). */
#pragma once

#include "box-broker.h"
#include "box-broker-ca.h"
#include "box-broker-pump.h"

G_BEGIN_DECLS

#define BOX_TYPE_BROKER_PLUGIN (box_broker_plugin_get_type ())
G_DECLARE_FINAL_TYPE (BoxBrokerPlugin, box_broker_plugin, BOX, BROKER_PLUGIN, BoxPlugin)

/* Tests: the CA and the pump of a started plugin. */
BoxBrokerCa   *box_broker_plugin_get_ca   (BoxBrokerPlugin *self);
BoxBrokerPump *box_broker_plugin_get_pump (BoxBrokerPlugin *self);

G_END_DECLS
