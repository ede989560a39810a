/* box-error.h: the one public error domain.
 *
 * Every failure that can reach a user carries a BOX_ERROR code; the codes are
 * the interface specification's error codes.  Other domains (GIO, a
 * plugin's library, GnuTLS ...) are converted at the boundary where they occur, and
 * transports map BOX_ERROR to their own form in exactly one place:
 * box_error_http_status() and box_error_to_json() for HTTP,
 * box_error_dbus_name() for D-Bus.
 */
#pragma once

#include "box-export.h"

#include <glib-object.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define BOX_ERROR (box_error_quark ())

/**
 * BoxErrorCode:
 * @BOX_ERROR_INVALID: 400 invalid
 * @BOX_ERROR_UNAUTHORIZED: 401 unauthorized
 * @BOX_ERROR_PERMISSION_DENIED: 403 permission_denied
 * @BOX_ERROR_NOT_FOUND: 404 not_found
 * @BOX_ERROR_ALREADY_EXISTS: 409 already_exists
 * @BOX_ERROR_CONFLICT: 409 conflict
 * @BOX_ERROR_UNSUPPORTED: 501 unsupported
 * @BOX_ERROR_PORT_CLOSED: 502 port_closed
 * @BOX_ERROR_BROKER_FAILED: 502 broker_failed
 * @BOX_ERROR_CAPACITY: 503 capacity (with Retry-After)
 * @BOX_ERROR_SANDBOX_UNAVAILABLE: 503 sandbox_unavailable
 * @BOX_ERROR_INTERNAL: 500 internal: a bug or a broken host
 * @BOX_ERROR_LAST: the number of codes
 *
 * The codes of the %BOX_ERROR domain: the specification's error codes,
 * with their HTTP status.
 */
typedef enum {
  BOX_ERROR_INVALID,             /* 400 invalid */
  BOX_ERROR_UNAUTHORIZED,        /* 401 unauthorized */
  BOX_ERROR_PERMISSION_DENIED,   /* 403 permission_denied */
  BOX_ERROR_NOT_FOUND,           /* 404 not_found */
  BOX_ERROR_ALREADY_EXISTS,      /* 409 already_exists */
  BOX_ERROR_CONFLICT,            /* 409 conflict */
  BOX_ERROR_UNSUPPORTED,         /* 501 unsupported */
  BOX_ERROR_PORT_CLOSED,         /* 502 port_closed */
  BOX_ERROR_BROKER_FAILED,       /* 502 broker_failed */
  BOX_ERROR_CAPACITY,            /* 503 capacity (Retry-After) */
  BOX_ERROR_SANDBOX_UNAVAILABLE, /* 503 sandbox_unavailable */
  BOX_ERROR_INTERNAL,            /* 500 internal: a bug or a broken host */
  BOX_ERROR_RATE_LIMITED,        /* 429 rate_limited (Retry-After); box's own, see doc/API.md */
  BOX_ERROR_LAST
} BoxErrorCode;

/* The enum's GType, named after the domain (box_error_quark()) */
#define BOX_TYPE_ERROR_CODE (box_error_get_type ())
BOX_PLUGIN_API
GType        box_error_get_type     (void) G_GNUC_CONST;

BOX_PLUGIN_API
GQuark       box_error_quark        (void);

BOX_PLUGIN_API
const char  *box_error_code_name    (BoxErrorCode code);
BOX_PLUGIN_API
guint        box_error_http_status  (BoxErrorCode code);
BOX_PLUGIN_API
const char  *box_error_dbus_name    (BoxErrorCode code);

/* Any GError -> BOX_ERROR; foreign domains become BOX_ERROR_INTERNAL with
 * the original message prefixed by @context (may be NULL). */
BOX_PLUGIN_API
GError      *box_error_convert      (const GError *error,
                                     const char   *context);

/* {"error": {"code": ..., "message": ...}} */
BOX_PLUGIN_API
JsonNode    *box_error_to_json      (const GError *error);

/* Seconds a client should wait after BOX_ERROR_CAPACITY. */
#define BOX_ERROR_RETRY_AFTER_S 5

G_END_DECLS
