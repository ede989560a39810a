/* boxctl-egress.h: `boxctl egress SANDBOX`, a sandbox's effective egress
 * rules and the addresses it may reach now (boxctl-egress.c). */
#pragma once

#include "box-dbus-generated.h"

G_BEGIN_DECLS

/* Prints a table (or with @json one JSON object {rules, allowed}); FALSE
 * with @error from boxd when a call failed (in a table, the rules are
 * printed before an error of the addresses' call). */
gboolean boxctl_egress (BoxDBusAdmin1 *proxy, gboolean json, const char *sandbox, GError **error);

G_END_DECLS
