/* box-error.c */
#include "config.h"

#include <gio/gio.h>

#include "box-error.h"

static const struct {
  const char *name;
  guint status;
  const char *dbus;
} error_table[BOX_ERROR_LAST] = {
  [BOX_ERROR_INVALID] = { "invalid", 400, "org.box.Error.Invalid" },
  [BOX_ERROR_UNAUTHORIZED] = { "unauthorized", 401, "org.box.Error.Unauthorized" },
  [BOX_ERROR_PERMISSION_DENIED] = { "permission_denied", 403, "org.box.Error.PermissionDenied" },
  [BOX_ERROR_NOT_FOUND] = { "not_found", 404, "org.box.Error.NotFound" },
  [BOX_ERROR_ALREADY_EXISTS] = { "already_exists", 409, "org.box.Error.AlreadyExists" },
  [BOX_ERROR_CONFLICT] = { "conflict", 409, "org.box.Error.Conflict" },
  [BOX_ERROR_UNSUPPORTED] = { "unsupported", 501, "org.box.Error.Unsupported" },
  [BOX_ERROR_PORT_CLOSED] = { "port_closed", 502, "org.box.Error.PortClosed" },
  [BOX_ERROR_BROKER_FAILED] = { "broker_failed", 502, "org.box.Error.BrokerFailed" },
  [BOX_ERROR_CAPACITY] = { "capacity", 503, "org.box.Error.Capacity" },
  [BOX_ERROR_SANDBOX_UNAVAILABLE] = { "sandbox_unavailable", 503, "org.box.Error.SandboxUnavailable" },
  [BOX_ERROR_INTERNAL] = { "internal", 500, "org.box.Error.Internal" },
  [BOX_ERROR_RATE_LIMITED] = { "rate_limited", 429, "org.box.Error.RateLimited" },
};

/* Named box_error_get_type (not _code_) so that introspection pairs the
 * enum with box_error_quark() as its error domain. */
G_DEFINE_ENUM_TYPE (BoxErrorCode, box_error,
  G_DEFINE_ENUM_VALUE (BOX_ERROR_INVALID, "invalid"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_UNAUTHORIZED, "unauthorized"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_PERMISSION_DENIED, "permission-denied"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_NOT_FOUND, "not-found"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_ALREADY_EXISTS, "already-exists"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_CONFLICT, "conflict"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_UNSUPPORTED, "unsupported"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_PORT_CLOSED, "port-closed"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_BROKER_FAILED, "broker-failed"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_CAPACITY, "capacity"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_SANDBOX_UNAVAILABLE, "sandbox-unavailable"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_INTERNAL, "internal"),
  G_DEFINE_ENUM_VALUE (BOX_ERROR_LAST, "last"))

GQuark
box_error_quark (void)
{
  static gsize quark = 0;

  if (g_once_init_enter (&quark)) {
    GQuark q = g_quark_from_static_string ("box-error-quark");
    guint i;

    /* Register the D-Bus names so errors round-trip over the bus. */
    for (i = 0; i < BOX_ERROR_LAST; i++)
      g_dbus_error_register_error (q, (gint) i, error_table[i].dbus);
    g_once_init_leave (&quark, (gsize) q);
  }
  return (GQuark) quark;
}

const char *
box_error_code_name (BoxErrorCode code)
{
  if ((guint) code >= BOX_ERROR_LAST)
    return "internal";
  return error_table[code].name;
}

guint
box_error_http_status (BoxErrorCode code)
{
  if ((guint) code >= BOX_ERROR_LAST)
    return 500;
  return error_table[code].status;
}

const char *
box_error_dbus_name (BoxErrorCode code)
{
  if ((guint) code >= BOX_ERROR_LAST)
    return error_table[BOX_ERROR_INTERNAL].dbus;
  return error_table[code].dbus;
}

GError *
box_error_convert (const GError *error, const char *context)
{
  g_return_val_if_fail (error != NULL, NULL);

  if (error->domain == BOX_ERROR && (guint) error->code < BOX_ERROR_LAST)
    return g_error_copy (error);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
    return g_error_new_literal (BOX_ERROR, BOX_ERROR_NOT_FOUND, error->message);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED))
    return g_error_new_literal (BOX_ERROR, BOX_ERROR_PERMISSION_DENIED, error->message);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_EXISTS))
    return g_error_new_literal (BOX_ERROR, BOX_ERROR_ALREADY_EXISTS, error->message);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT))
    return g_error_new_literal (BOX_ERROR, BOX_ERROR_INVALID, error->message);
  if (context != NULL)
    return g_error_new (BOX_ERROR, BOX_ERROR_INTERNAL, "%s: %s", context, error->message);
  return g_error_new_literal (BOX_ERROR, BOX_ERROR_INTERNAL, error->message);
}

JsonNode *
box_error_to_json (const GError *error)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(GError) converted = box_error_convert (error, NULL);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "error");
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "code");
  json_builder_add_string_value (builder, box_error_code_name (converted->code));
  json_builder_set_member_name (builder, "message");
  json_builder_add_string_value (builder, converted->message);
  json_builder_end_object (builder);
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}
