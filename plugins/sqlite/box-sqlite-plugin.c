/* box-sqlite-plugin.c: BoxPlugin + BoxStorage glue around BoxSqliteDb. */
#include "config.h"

#include "box-storage.h"
#include "box-sqlite-plugin.h"
#include "box-sqlite-schema.h"
#include "box-sqlite-store.h"

struct _BoxSqlitePlugin {
  BoxPlugin    parent_instance;
  char        *path;    /* the "path" property, or NULL */
  BoxSqliteDb *db;      /* between start() and stop() */
};

enum {
  PROP_0,
  PROP_PATH,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

static void box_sqlite_plugin_storage_init (BoxStorageInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxSqlitePlugin, box_sqlite_plugin, BOX_TYPE_PLUGIN,
                               G_IMPLEMENT_INTERFACE (BOX_TYPE_STORAGE,
                                                      box_sqlite_plugin_storage_init))

BOX_PLUGIN_DEFINE_FULL ("sqlite", "SQLite storage (the embedded default)",
                        box_sqlite_plugin_get_type, 100, BOX_PLUGIN_FLAG_NONE, NULL)

const char *
box_sqlite_plugin_get_path (BoxSqlitePlugin *self)
{
  g_return_val_if_fail (BOX_IS_SQLITE_PLUGIN (self), NULL);
  return self->db != NULL ? self->db->path : NULL;
}

static char *
box_sqlite_plugin_choose_path (BoxSqlitePlugin *self, GError **error)
{
  g_autofree char *configured = NULL;
  const char *state_dir;

  if (self->path != NULL)
    return g_strdup (self->path);
  configured = box_plugin_get_config (BOX_PLUGIN (self), "path", NULL);
  if (configured != NULL && configured[0] != '\0')
    return g_steal_pointer (&configured);
  state_dir = box_plugin_get_state_dir (BOX_PLUGIN (self));
  if (state_dir == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                         "sqlite: no state directory for the database");
    return NULL;
  }
  return g_build_filename (state_dir, "box.db", NULL);
}

static gboolean
box_sqlite_plugin_start (BoxPlugin *plugin, GCancellable *cancellable, GError **error)
{
  BoxSqlitePlugin *self = BOX_SQLITE_PLUGIN (plugin);
  g_autofree char *path = NULL;

  g_return_val_if_fail (self->db == NULL, FALSE);

  path = box_sqlite_plugin_choose_path (self, error);
  if (path == NULL)
    return FALSE;
  self->db = box_sqlite_db_open (path, error);
  if (self->db == NULL)
    return FALSE;
  g_debug ("sqlite: using %s", path);
  return TRUE;
}

static void
box_sqlite_plugin_stop (BoxPlugin *plugin)
{
  BoxSqlitePlugin *self = BOX_SQLITE_PLUGIN (plugin);

  g_clear_pointer (&self->db, box_sqlite_db_close);
}

static void
box_sqlite_plugin_add_status (BoxPlugin *plugin, GVariantBuilder *dict)
{
  BoxSqlitePlugin *self = BOX_SQLITE_PLUGIN (plugin);

  if (self->db == NULL)
    return;
  g_variant_builder_add (dict, "{sv}", "database", g_variant_new_string (self->db->path));
  g_variant_builder_add (dict, "{sv}", "schema_version",
                         g_variant_new_uint32 (BOX_SQLITE_SCHEMA_VERSION));
}

static void
box_sqlite_plugin_finalize (GObject *object)
{
  BoxSqlitePlugin *self = BOX_SQLITE_PLUGIN (object);

  g_clear_pointer (&self->db, box_sqlite_db_close);
  g_free (self->path);
  G_OBJECT_CLASS (box_sqlite_plugin_parent_class)->finalize (object);
}

static void
box_sqlite_plugin_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  BoxSqlitePlugin *self = BOX_SQLITE_PLUGIN (object);

  switch (prop_id) {
  case PROP_PATH:
    g_value_set_string (value, self->path);
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
box_sqlite_plugin_set_property (GObject *object, guint prop_id, const GValue *value,
                                GParamSpec *pspec)
{
  BoxSqlitePlugin *self = BOX_SQLITE_PLUGIN (object);

  switch (prop_id) {
  case PROP_PATH:
    g_free (self->path);
    self->path = g_value_dup_string (value);
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
box_sqlite_plugin_class_init (BoxSqlitePluginClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  BoxPluginClass *plugin_class = BOX_PLUGIN_CLASS (klass);

  object_class->finalize = box_sqlite_plugin_finalize;
  object_class->get_property = box_sqlite_plugin_get_property;
  object_class->set_property = box_sqlite_plugin_set_property;
  plugin_class->start = box_sqlite_plugin_start;
  plugin_class->stop = box_sqlite_plugin_stop;
  plugin_class->add_status = box_sqlite_plugin_add_status;

  /**
   * BoxSqlitePlugin:path:
   *
   * The database file; overrides [plugin.sqlite] path= and the default
   * <state dir>/box.db.
   */
  properties[PROP_PATH] =
    g_param_spec_string ("path", NULL, NULL, NULL,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
box_sqlite_plugin_init (BoxSqlitePlugin *self)
{}

/* ---- BoxStorage: each call forwards to box-sqlite-store-*.c ------------ */

static BoxSqliteDb *
box_sqlite_plugin_db (BoxStorage *storage, GError **error)
{
  BoxSqlitePlugin *self = BOX_SQLITE_PLUGIN (storage);

  if (self->db == NULL)
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "sqlite storage is not started");
  return self->db;
}

#define BOX_SQLITE_FORWARD(ret_type, fail, name, params, args)               \
  static ret_type                                                            \
  box_sqlite_plugin_##name params                                            \
  {                                                                          \
    BoxSqliteDb *db = box_sqlite_plugin_db (storage, error);                 \
                                                                             \
    if (db == NULL)                                                          \
      return fail;                                                           \
    return box_sqlite_store_##name args;                                     \
  }

BOX_SQLITE_FORWARD (gboolean, FALSE, project_insert,
                    (BoxStorage *storage, const BoxProject *project, GError **error),
                    (db, project, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, project_update,
                    (BoxStorage *storage, const BoxProject *project, GError **error),
                    (db, project, error))
BOX_SQLITE_FORWARD (BoxProject *, NULL, project_get,
                    (BoxStorage *storage, const char *name, GError **error),
                    (db, name, error))
BOX_SQLITE_FORWARD (GPtrArray *, NULL, project_list,
                    (BoxStorage *storage, GError **error),
                    (db, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, project_delete,
                    (BoxStorage *storage, const char *name, GError **error),
                    (db, name, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, key_insert,
                    (BoxStorage *storage, const BoxKey *key, GError **error),
                    (db, key, error))
BOX_SQLITE_FORWARD (BoxKey *, NULL, key_get_by_hash,
                    (BoxStorage *storage, const char *hash, GError **error),
                    (db, hash, error))
BOX_SQLITE_FORWARD (GPtrArray *, NULL, key_list,
                    (BoxStorage *storage, const char *project, GError **error),
                    (db, project, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, key_delete,
                    (BoxStorage *storage, const char *project, const char *id, GError **error),
                    (db, project, id, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, sandbox_insert,
                    (BoxStorage *storage, const BoxSandbox *sandbox, GError **error),
                    (db, sandbox, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, sandbox_update,
                    (BoxStorage *storage, const BoxSandbox *sandbox, GError **error),
                    (db, sandbox, error))
BOX_SQLITE_FORWARD (BoxSandbox *, NULL, sandbox_get,
                    (BoxStorage *storage, const char *project, const char *id_or_name,
                     GError **error),
                    (db, project, id_or_name, error))
BOX_SQLITE_FORWARD (GPtrArray *, NULL, sandbox_list,
                    (BoxStorage *storage, const char *project, GError **error),
                    (db, project, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, sandbox_delete,
                    (BoxStorage *storage, const char *project, const char *id, GError **error),
                    (db, project, id, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, checkpoint_insert,
                    (BoxStorage *storage, const BoxCheckpoint *checkpoint, GError **error),
                    (db, checkpoint, error))
BOX_SQLITE_FORWARD (BoxCheckpoint *, NULL, checkpoint_get,
                    (BoxStorage *storage, const char *sandbox_id, const char *id, GError **error),
                    (db, sandbox_id, id, error))
BOX_SQLITE_FORWARD (GPtrArray *, NULL, checkpoint_list,
                    (BoxStorage *storage, const char *sandbox_id, GError **error),
                    (db, sandbox_id, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, checkpoint_delete,
                    (BoxStorage *storage, const char *sandbox_id, const char *id, GError **error),
                    (db, sandbox_id, id, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, secret_put,
                    (BoxStorage *storage, const BoxSecret *secret, GError **error),
                    (db, secret, error))
BOX_SQLITE_FORWARD (BoxSecret *, NULL, secret_get,
                    (BoxStorage *storage, const char *project, const char *name, GError **error),
                    (db, project, name, error))
BOX_SQLITE_FORWARD (GPtrArray *, NULL, secret_list,
                    (BoxStorage *storage, const char *project, GError **error),
                    (db, project, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, secret_delete,
                    (BoxStorage *storage, const char *project, const char *name, GError **error),
                    (db, project, name, error))
BOX_SQLITE_FORWARD (GBytes *, NULL, meta_get,
                    (BoxStorage *storage, const char *key, GError **error),
                    (db, key, error))
BOX_SQLITE_FORWARD (gboolean, FALSE, meta_set,
                    (BoxStorage *storage, const char *key, GBytes *value, GError **error),
                    (db, key, value, error))

static void
box_sqlite_plugin_storage_init (BoxStorageInterface *iface)
{
  iface->project_insert = box_sqlite_plugin_project_insert;
  iface->project_update = box_sqlite_plugin_project_update;
  iface->project_get = box_sqlite_plugin_project_get;
  iface->project_list = box_sqlite_plugin_project_list;
  iface->project_delete = box_sqlite_plugin_project_delete;
  iface->key_insert = box_sqlite_plugin_key_insert;
  iface->key_get_by_hash = box_sqlite_plugin_key_get_by_hash;
  iface->key_list = box_sqlite_plugin_key_list;
  iface->key_delete = box_sqlite_plugin_key_delete;
  iface->sandbox_insert = box_sqlite_plugin_sandbox_insert;
  iface->sandbox_update = box_sqlite_plugin_sandbox_update;
  iface->sandbox_get = box_sqlite_plugin_sandbox_get;
  iface->sandbox_list = box_sqlite_plugin_sandbox_list;
  iface->sandbox_delete = box_sqlite_plugin_sandbox_delete;
  iface->checkpoint_insert = box_sqlite_plugin_checkpoint_insert;
  iface->checkpoint_get = box_sqlite_plugin_checkpoint_get;
  iface->checkpoint_list = box_sqlite_plugin_checkpoint_list;
  iface->checkpoint_delete = box_sqlite_plugin_checkpoint_delete;
  iface->secret_put = box_sqlite_plugin_secret_put;
  iface->secret_get = box_sqlite_plugin_secret_get;
  iface->secret_list = box_sqlite_plugin_secret_list;
  iface->secret_delete = box_sqlite_plugin_secret_delete;
  iface->meta_get = box_sqlite_plugin_meta_get;
  iface->meta_set = box_sqlite_plugin_meta_set;
}
