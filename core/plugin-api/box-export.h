/* box-export.h: what libbox-plugin-1 exports.
 *
 * libbox-plugin-1 is built with -fvisibility=hidden; a function is part of
 * the SDK only when its declaration in an installed header carries
 * BOX_PLUGIN_API.  core/plugin-api/libbox-plugin.ver then gives every
 * exported symbol the version node BOX_PLUGIN_1, and tests/abi checks
 * both (doc/PLUGINS.md, "The SDK's boundary").
 */
#pragma once

#define BOX_PLUGIN_API __attribute__ ((visibility ("default"))) extern
