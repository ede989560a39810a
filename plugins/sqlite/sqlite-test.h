/* sqlite-test.h: shared by sqlite-test.c and sqlite-test-durability.c. */
#pragma once

#include "box-storage.h"
#include "box-storage-records.h"
#include "box-sqlite-plugin.h"
#include "box-sqlite-schema.h"

typedef struct {
  char       *dir;
  char       *path;      /* <dir>/box.db */
  BoxStorage *storage;   /* started on path, unless the test data is non-NULL */
} Fixture;

void        fixture_setup    (Fixture *fx, gconstpointer data);
void        fixture_teardown (Fixture *fx, gconstpointer data);

/* A plugin on @path: not started / started (asserting success). */
BoxStorage *storage_new      (const char *path);
BoxStorage *storage_open     (const char *path);
void        storage_close    (BoxStorage **storage);

BoxSandbox *make_sandbox     (const char *id, const char *project, const char *name,
                              gint64 created_at);

/* sqlite-test-durability.c */
int         kill_writer_main        (const char *path, const char *round);
void        test_persistence        (Fixture *fx, gconstpointer data);
void        test_engine_paths       (Fixture *fx, gconstpointer data);
void        test_module             (Fixture *fx, gconstpointer data);
void        test_migrate_v1         (Fixture *fx, gconstpointer data);
void        test_future_version     (Fixture *fx, gconstpointer data);
void        test_foreign_database   (Fixture *fx, gconstpointer data);
void        test_kill9              (Fixture *fx, gconstpointer data);
void        test_kill9_updates      (Fixture *fx, gconstpointer data);

/* sqlite-test-records.c */
void        test_records_cas        (Fixture *fx, gconstpointer data);
void        test_records_batch      (Fixture *fx, gconstpointer data);
void        test_records_async      (Fixture *fx, gconstpointer data);
void        test_records_stats      (Fixture *fx, gconstpointer data);
void        test_sandbox_reads      (Fixture *fx, gconstpointer data);
void        test_migrate_v2_fixture (Fixture *fx, gconstpointer data);
