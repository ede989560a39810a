/* box-libvirt-plugin.h: the `libvirt` hypervisor (QEMU through libvirt). */
#pragma once

#include "box-hypervisor.h"
#include "box-plugin.h"

G_BEGIN_DECLS

#define BOX_TYPE_LIBVIRT_PLUGIN (box_libvirt_plugin_get_type ())
G_DECLARE_FINAL_TYPE (BoxLibvirtPlugin, box_libvirt_plugin, BOX, LIBVIRT_PLUGIN, BoxPlugin)

G_END_DECLS
