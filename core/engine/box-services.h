/* box-services.h: supervised services' definitions and records, checked on
 * the host (pure functions; the engine's operations are in
 * box-engine-services.c, the supervisor in agent/services.c).
 */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* A definition's serialised size at most (the agent keeps 16 KiB, and the
 * listing of 64 services fits a frame). */
#define BOX_SERVICE_DEF_MAX   (12 * 1024)
#define BOX_SERVICES_MAX      64

/* 1 to 63 of A-Z a-z 0-9 _ . -, not starting with . or - (the agent's
 * rule: the name is a file name on the sandbox's disk). */
gboolean    box_service_name_check        (const char *name, GError **error);

/* A client's definition {cmd, cwd?, env?, user?, needs?, http_port?}:
 * BOX_ERROR_INVALID naming what is wrong (an unknown field, a missing or
 * empty cmd, a wrong type, a bad need's name, a service needing itself). */
gboolean    box_service_definition_check  (const char *name, JsonObject *def, GError **error);

/* Whether the needs of @name's definition @def name services that exist
 * (@current: the agent's listing, records of box_service_record_from_agent)
 * and make no cycle with them (@def replacing @name's); BOX_ERROR_INVALID
 * naming the unknown service or the cycle ("a -> b -> a"). */
gboolean    box_service_needs_check       (const char *name, JsonObject *def,
                                           JsonArray *current, GError **error);

/* The Service record the API answers, {name, cmd, cwd?, env?, user,
 * needs, http_port?, state, pid?, restarts, started_at?}, from the
 * agent's (hostile: every member's type and size checked, started_at
 * from unix ms to RFC 3339; other members dropped); NULL with
 * BOX_ERROR_INTERNAL when it is not one. */
JsonObject *box_service_record_from_agent (JsonObject *raw, GError **error);

G_END_DECLS
