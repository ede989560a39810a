/* box-storage.c: the BoxStorage interface; see box-storage.h. */
#include "config.h"

#include "box-storage.h"

G_DEFINE_INTERFACE (BoxStorage, box_storage, G_TYPE_OBJECT)

static void
box_storage_default_init (BoxStorageInterface *iface)
{}

gboolean
box_storage_project_insert (BoxStorage *self, const BoxProject *project, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->project_insert == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement project_insert", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->project_insert (self, project, error);
}

gboolean
box_storage_project_update (BoxStorage *self, const BoxProject *project, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->project_update == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement project_update", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->project_update (self, project, error);
}

BoxProject *
box_storage_project_get (BoxStorage *self, const char *name, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->project_get == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement project_get", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->project_get (self, name, error);
}

GPtrArray *
box_storage_project_list (BoxStorage *self, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->project_list == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement project_list", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->project_list (self, error);
}

gboolean
box_storage_project_delete (BoxStorage *self, const char *name, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->project_delete == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement project_delete", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->project_delete (self, name, error);
}

gboolean
box_storage_key_insert (BoxStorage *self, const BoxKey *key, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->key_insert == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement key_insert", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->key_insert (self, key, error);
}

BoxKey *
box_storage_key_get_by_hash (BoxStorage *self, const char *hash, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->key_get_by_hash == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement key_get_by_hash", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->key_get_by_hash (self, hash, error);
}

GPtrArray *
box_storage_key_list (BoxStorage *self, const char *project, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->key_list == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement key_list", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->key_list (self, project, error);
}

gboolean
box_storage_key_delete (BoxStorage *self, const char *project, const char *id, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->key_delete == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement key_delete", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->key_delete (self, project, id, error);
}

gboolean
box_storage_sandbox_insert (BoxStorage *self, const BoxSandbox *sandbox, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->sandbox_insert == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement sandbox_insert", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->sandbox_insert (self, sandbox, error);
}

gboolean
box_storage_sandbox_update (BoxStorage *self, const BoxSandbox *sandbox, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->sandbox_update == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement sandbox_update", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->sandbox_update (self, sandbox, error);
}

BoxSandbox *
box_storage_sandbox_get (BoxStorage *self, const char *project, const char *id_or_name, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->sandbox_get == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement sandbox_get", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->sandbox_get (self, project, id_or_name, error);
}

GPtrArray *
box_storage_sandbox_list (BoxStorage *self, const char *project, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->sandbox_list == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement sandbox_list", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->sandbox_list (self, project, error);
}

gboolean
box_storage_sandbox_delete (BoxStorage *self, const char *project, const char *id, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->sandbox_delete == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement sandbox_delete", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->sandbox_delete (self, project, id, error);
}

gboolean
box_storage_checkpoint_insert (BoxStorage *self, const BoxCheckpoint *checkpoint, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->checkpoint_insert == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement checkpoint_insert", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->checkpoint_insert (self, checkpoint, error);
}

BoxCheckpoint *
box_storage_checkpoint_get (BoxStorage *self, const char *sandbox_id, const char *id, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->checkpoint_get == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement checkpoint_get", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->checkpoint_get (self, sandbox_id, id, error);
}

GPtrArray *
box_storage_checkpoint_list (BoxStorage *self, const char *sandbox_id, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->checkpoint_list == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement checkpoint_list", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->checkpoint_list (self, sandbox_id, error);
}

gboolean
box_storage_checkpoint_delete (BoxStorage *self, const char *sandbox_id, const char *id, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->checkpoint_delete == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement checkpoint_delete", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->checkpoint_delete (self, sandbox_id, id, error);
}

gboolean
box_storage_secret_put (BoxStorage *self, const BoxSecret *secret, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->secret_put == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement secret_put", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->secret_put (self, secret, error);
}

BoxSecret *
box_storage_secret_get (BoxStorage *self, const char *project, const char *name, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->secret_get == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement secret_get", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->secret_get (self, project, name, error);
}

GPtrArray *
box_storage_secret_list (BoxStorage *self, const char *project, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->secret_list == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement secret_list", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->secret_list (self, project, error);
}

gboolean
box_storage_secret_delete (BoxStorage *self, const char *project, const char *name, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->secret_delete == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement secret_delete", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->secret_delete (self, project, name, error);
}

GBytes *
box_storage_meta_get (BoxStorage *self, const char *key, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), NULL);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->meta_get == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement meta_get", G_OBJECT_TYPE_NAME (self));
    return NULL;
  }
  return iface->meta_get (self, key, error);
}

gboolean
box_storage_meta_set (BoxStorage *self, const char *key, GBytes *value, GError **error)
{
  BoxStorageInterface *iface;

  g_return_val_if_fail (BOX_IS_STORAGE (self), FALSE);
  iface = BOX_STORAGE_GET_IFACE (self);
  if (iface->meta_set == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "%s does not implement meta_set", G_OBJECT_TYPE_NAME (self));
    return FALSE;
  }
  return iface->meta_set (self, key, value, error);
}
