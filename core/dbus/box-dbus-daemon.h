/* box-dbus-daemon.h: the D-Bus admin interface (org.box.Admin1).
 *
 * Exports the operator's actions on the system bus (or the session bus for
 * tests and desktop use) under the name org.box.Admin1 at /org/box/Admin1.
 * One gate (g-authorize-method) authorizes every call: root, or the user
 * boxd runs as.
 */
#pragma once

#include "box-engine.h"

G_BEGIN_DECLS

#define BOX_DBUS_NAME "org.box.Admin1"
#define BOX_DBUS_PATH "/org/box/Admin1"

#define BOX_TYPE_DBUS_DAEMON (box_dbus_daemon_get_type ())
G_DECLARE_FINAL_TYPE (BoxDBusDaemon, box_dbus_daemon, BOX, DBUS_DAEMON, GObject)

BoxDBusDaemon *box_dbus_daemon_new    (BoxEngine *engine);
/* Connects to the bus, exports the object and owns the name.  On
 * @connection NULL the bus of @mode is used. */
gboolean       box_dbus_daemon_start  (BoxDBusDaemon *self, GBusType bus_type,
                                       GDBusConnection *connection, GError **error);
void           box_dbus_daemon_stop   (BoxDBusDaemon *self);

G_END_DECLS
