/* box-auth.c: the BoxAuth interface; see box-auth.h. */
#include "config.h"

#include "box-auth.h"

G_DEFINE_INTERFACE (BoxAuth, box_auth, G_TYPE_OBJECT)

static void
box_auth_default_init (BoxAuthInterface *iface)
{}

BoxPrincipal *
box_auth_authenticate (BoxAuth *self, const char *credential, GError **error)
{
  BoxAuthInterface *iface;

  g_return_val_if_fail (BOX_IS_AUTH (self), NULL);
  iface = BOX_AUTH_GET_IFACE (self);
  if (iface->authenticate == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement authenticate", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->authenticate (self, credential, error);
}

BoxKey *
box_auth_create_key (BoxAuth *self, const char *project, const char *name, char **secret_out, GError **error)
{
  BoxAuthInterface *iface;

  g_return_val_if_fail (BOX_IS_AUTH (self), NULL);
  iface = BOX_AUTH_GET_IFACE (self);
  if (iface->create_key == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement create_key", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->create_key (self, project, name, secret_out, error);
}

GPtrArray *
box_auth_list_keys (BoxAuth *self, const char *project, GError **error)
{
  BoxAuthInterface *iface;

  g_return_val_if_fail (BOX_IS_AUTH (self), NULL);
  iface = BOX_AUTH_GET_IFACE (self);
  if (iface->list_keys == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement list_keys", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->list_keys (self, project, error);
}

gboolean
box_auth_delete_key (BoxAuth *self, const char *project, const char *key_id, GError **error)
{
  BoxAuthInterface *iface;

  g_return_val_if_fail (BOX_IS_AUTH (self), FALSE);
  iface = BOX_AUTH_GET_IFACE (self);
  if (iface->delete_key == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement delete_key", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->delete_key (self, project, key_id, error);
}
