/* box-sqlite-schema.h: the sqlite plugin's schema and its migrations.
 *
 * The schema version lives in PRAGMA user_version (0 = empty file).  Each
 * migration step moves the database from version N-1 to N in its own
 * transaction; a file with a version above BOX_SQLITE_SCHEMA_VERSION was
 * written by a newer boxd and is refused.
 */
#pragma once

#include "box-sqlite-db.h"

G_BEGIN_DECLS

#define BOX_SQLITE_SCHEMA_VERSION 3

/* "boxd" as a big-endian integer, in PRAGMA application_id */
#define BOX_SQLITE_APPLICATION_ID 0x626f7864

/* Fails (and changes nothing) when the file is not a box database or is
 * newer than this code; sets *version to the file's schema version. */
gboolean box_sqlite_schema_check   (BoxSqliteDb *db, int *version, GError **error);

/* Applies the missing steps up to @target (BOX_SQLITE_SCHEMA_VERSION in
 * production; tests may stop earlier). */
gboolean box_sqlite_schema_migrate (BoxSqliteDb *db, int target, GError **error);

G_END_DECLS
