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

/* ---- BoxStorage: each call forwards to box-sqlite-store.c --------------
 *
 * The async variants are the interface's defaults (the sync call in-line):
 * a write is a few milliseconds of the caller's thread. */

static BoxSqliteDb *
box_sqlite_plugin_db (BoxStorage *storage, GError **error)
{
  BoxSqlitePlugin *self = BOX_SQLITE_PLUGIN (storage);

  if (self->db == NULL)
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL, "sqlite storage is not started");
  return self->db;
}

static gboolean
box_sqlite_plugin_write (BoxStorage *storage, BoxStorageOp *ops, guint n_ops, GError **error)
{
  BoxSqliteDb *db = box_sqlite_plugin_db (storage, error);

  return db != NULL && box_sqlite_store_write (db, ops, n_ops, error);
}

static BoxStorageRecord *
box_sqlite_plugin_get (BoxStorage *storage, const char *kind, const char *scope,
                       BoxStorageIndex index, const char *key, GError **error)
{
  BoxSqliteDb *db = box_sqlite_plugin_db (storage, error);

  return db != NULL ? box_sqlite_store_get (db, kind, scope, index, key, error) : NULL;
}

static GPtrArray *
box_sqlite_plugin_list (BoxStorage *storage, const char *kind, const char *scope,
                        BoxStorageIndex index, const char *key, BoxStorageOrder order,
                        GError **error)
{
  BoxSqliteDb *db = box_sqlite_plugin_db (storage, error);

  return db != NULL ? box_sqlite_store_list (db, kind, scope, index, key, order, error) : NULL;
}

static void
box_sqlite_plugin_storage_init (BoxStorageInterface *iface)
{
  iface->write = box_sqlite_plugin_write;
  iface->get = box_sqlite_plugin_get;
  iface->list = box_sqlite_plugin_list;
}
