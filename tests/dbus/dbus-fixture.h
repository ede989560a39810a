/* dbus-fixture.h: what the in-process D-Bus tests share (dbus-fixture.c):
 * an engine (sqlite storage, keys auth, dummy hypervisor from
 * BOX_PLUGIN_DIR) behind a BoxDBusDaemon on a GTestDBus session bus, and
 * the generated proxy boxctl uses.  The daemon's handlers run on this
 * thread's main context, so calls are made asynchronously and the tests
 * spin the context until they finish (got_result_cb, await_result). */
#pragma once

#include "box-dbus-daemon.h"
#include "box-dbus-generated.h"
#include "box-engine.h"

extern GTestDBus     *test_bus;
extern BoxEngine     *engine;
extern BoxDBusDaemon *daemon_;
extern BoxDBusAdmin1 *proxy;
extern char          *data_dir;

/* brings all of it up: [quota] cpus=16, [quota.epsilon] for test_quota() */
void          fixture_setup       (void);
void          fixture_teardown    (void);

void          got_result_cb       (GObject *source, GAsyncResult *result, gpointer user_data);
GAsyncResult *await_result        (GAsyncResult **slot);
void          assert_remote_error (const GError *error, const char *dbus_name);
GVariant     *call_create_project (const char *name, const char *const *domains, GError **error);
const char   *lookup_str          (GVariant *dict, const char *key);
/* The dict in @list whose @key is @value, or NULL; new reference. */
GVariant     *find_in_list        (GVariant *list, const char *key, const char *value);
/* Creates a sandbox in @project from a CreateSandbox body, through the engine. */
void          create_sandbox      (const char *project, const char *json);
