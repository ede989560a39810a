/* box-sqlite-plugin.h: the "sqlite" plugin, the embedded default storage.
 *
 * BoxSqlitePlugin implements BoxStorage on one SQLite file, by default
 * <data-dir>/sqlite/box.db, or [plugin.sqlite] path= in boxd.conf.  The
 * construct-only "path" property overrides both (tests use it).
 */
#pragma once

#include "box-plugin.h"

G_BEGIN_DECLS

#define BOX_TYPE_SQLITE_PLUGIN (box_sqlite_plugin_get_type ())
G_DECLARE_FINAL_TYPE (BoxSqlitePlugin, box_sqlite_plugin, BOX, SQLITE_PLUGIN, BoxPlugin)

/* The database file in use (NULL before start()). */
const char *box_sqlite_plugin_get_path (BoxSqlitePlugin *self);

G_END_DECLS
