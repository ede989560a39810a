/* engine-services-test.c: supervised services in the engine
 * (box-engine-services.c, box-services.c) against the scripted fake agent:
 * the definition and needs checks (nothing reaches the guest when they
 * fail), box_engine_ensure_port_service_async() (the edge proxy's "a
 * request to the http_port starts the service"), and the guest's records
 * distrusted.  The real agent's side is tests/agent/services-test.py, the
 * routes tests/e2e/test_services.py.
 */
#include "config.h"

#include "box-error.h"
#include "box-services.h"
#include "engine-fixture.h"

#define AGENT_CAPS "guest-agent,memory-snapshots"

typedef struct {
  Ef              ef;
  FakeAgent      *fake;
  BoxAgentClient *client;
  BoxSandbox     *sb;
} Fixture;

static void
set_up (Fixture *f, gconstpointer caps)
{
  ef_set_up (&f->ef, caps);
  f->sb = ef_create_ok (&f->ef, "{\"name\": \"svc\"}");
  f->fake = ef_fake_agent (&f->ef, f->sb->id, &f->client);
}

static void
tear_down (Fixture *f, gconstpointer caps)
{
  g_clear_pointer (&f->sb, box_sandbox_free);
  ef_tear_down (&f->ef, caps);
}

/* The next request: its op checked, its id. */
static gint64
read_op (Fixture *f, const char *op, JsonObject **out)
{
  g_autoptr(JsonObject) req = fake_agent_read_request (f->fake);
  gint64 id = 0;

  g_assert_cmpstr (box_agent_json_get_string (req, "op"), ==, op);
  g_assert_true (box_agent_json_get_int (req, "id", &id));
  if (out != NULL)
    *out = g_steal_pointer (&req);
  return id;
}

static void
reply (Fixture *f, gint64 id, const char *members)
{
  g_autofree char *json = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,%s}", id,
                                           members);
  fake_agent_send_json (f->fake, 0, json);
}

static JsonObject *
result_object (Fixture *f, EfWait *wait, gboolean ensure, GError **error)
{
  GAsyncResult *result = ef_wait_result (&f->ef, wait);
  g_autoptr(JsonNode) node = ensure ?
    box_engine_ensure_port_service_finish (f->ef.engine, result, error) :
    box_engine_service_finish (f->ef.engine, result, error);

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_dup_object (node) : NULL;
}

#define STOPPED_WEB "{\"name\":\"web\",\"cmd\":[\"srv\"],\"http_port\":8080,\"state\":\"stopped\",\"restarts\":0}"

static void
test_ensure_port_starts (Fixture *f, gconstpointer caps)
{
  EfWait wait = { 0 };
  g_autoptr(JsonObject) start = NULL;
  g_autoptr(JsonObject) record = NULL;
  g_autoptr(GError) error = NULL;
  gint64 id;

  box_engine_ensure_port_service_async (f->ef.engine, "p", "svc", 8080, NULL, ef_wait_cb, &wait);
  id = read_op (f, "service-list", NULL);
  reply (f, id, "\"services\":[{\"name\":\"db\",\"cmd\":[\"db\"],\"state\":\"running\",\"restarts\":0,"
                "\"pid\":7,\"started_at\":1893456000000}," STOPPED_WEB "]");
  id = read_op (f, "service-start", &start);
  g_assert_cmpstr (box_agent_json_get_string (start, "name"), ==, "web");
  reply (f, id, "\"service\":{\"name\":\"web\",\"cmd\":[\"srv\"],\"http_port\":8080,"
                "\"state\":\"running\",\"restarts\":0,\"pid\":42,\"started_at\":1893456001000}");
  record = result_object (f, &wait, TRUE, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_object_get_string_member (record, "state"), ==, "running");
  g_assert_cmpint (json_object_get_int_member (record, "pid"), ==, 42);
  g_assert_cmpstr (json_object_get_string_member (record, "started_at"), ==, "2030-01-01T00:00:01Z");
  g_assert_cmpstr (json_object_get_string_member (record, "user"), ==, "box");
}

static void
test_ensure_port_running_or_none (Fixture *f, gconstpointer caps)
{
  EfWait wait = { 0 }, wait2 = { 0 };
  g_autoptr(JsonObject) record = NULL;
  g_autoptr(GError) error = NULL;
  gint64 id;

  box_engine_ensure_port_service_async (f->ef.engine, "p", "svc", 5432, NULL, ef_wait_cb, &wait);
  id = read_op (f, "service-list", NULL);
  reply (f, id, "\"services\":[{\"name\":\"db\",\"cmd\":[\"db\"],\"http_port\":5432,"
                "\"state\":\"running\",\"restarts\":3,\"pid\":7,\"started_at\":1893456000000}]");
  record = result_object (f, &wait, TRUE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (json_object_get_int_member (record, "pid"), ==, 7);
  g_assert_cmpint (json_object_get_int_member (record, "restarts"), ==, 3);

  /* no service serves the port: 404, and nothing is started */
  box_engine_ensure_port_service_async (f->ef.engine, "p", "svc", 9999, NULL, ef_wait_cb, &wait2);
  id = read_op (f, "service-list", NULL);
  reply (f, id, "\"services\":[" STOPPED_WEB "]");
  g_assert_null (result_object (f, &wait2, TRUE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_false (fake_agent_poll (f->fake));
}

static JsonObject *
object_of (const char *json)
{
  g_autoptr(JsonNode) node = json_from_string (json, NULL);

  g_assert_nonnull (node);
  return json_node_dup_object (node);
}

/* PUT: the needs are checked against the agent's listing, and a refusal
 * sends no service-put */
static void
test_put_needs (Fixture *f, gconstpointer caps)
{
  static const struct {
    const char *def;
    const char *message;
  } refused[] = {
    { "{\"cmd\":[\"x\"],\"needs\":[\"nope\"]}", "no service named \"nope\"" },
    /* b needs c needs a: a needing b closes the cycle */
    { "{\"cmd\":[\"x\"],\"needs\":[\"b\"]}", "a cycle: a -> b -> c -> a" },
  };
  const char *listing = "\"services\":["
    "{\"name\":\"b\",\"cmd\":[\"b\"],\"needs\":[\"c\"],\"state\":\"running\",\"restarts\":0,\"pid\":2,\"started_at\":1},"
    "{\"name\":\"c\",\"cmd\":[\"c\"],\"needs\":[\"a\"],\"state\":\"starting\",\"restarts\":0},"
    "{\"name\":\"a\",\"cmd\":[\"a\"],\"state\":\"stopped\",\"restarts\":0}]";

  for (guint i = 0; i < G_N_ELEMENTS (refused); i++) {
    EfWait wait = { 0 };
    g_autoptr(JsonObject) def = object_of (refused[i].def);
    g_autoptr(GError) error = NULL;
    gint64 id;

    box_engine_service_async (f->ef.engine, "p", "svc", BOX_SERVICE_OP_PUT, "a", def, NULL,
                              ef_wait_cb, &wait);
    id = read_op (f, "service-list", NULL);
    reply (f, id, listing);
    g_assert_null (result_object (f, &wait, FALSE, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    g_assert_nonnull (strstr (error->message, refused[i].message));
    g_assert_false (fake_agent_poll (f->fake));
  }
}

/* a bad definition is refused before the sandbox is asked anything */
static void
test_put_refused_early (Fixture *f, gconstpointer caps)
{
  static const char *const defs[] = {
    "{}", "{\"cmd\":[]}", "{\"cmd\":[\"\"]}", "{\"cmd\":\"x\"}", "{\"cmd\":[\"x\"],\"color\":1}",
    "{\"cmd\":[\"x\"],\"http_port\":70000}", "{\"cmd\":[\"x\"],\"env\":{\"1A\":\"b\"}}",
    "{\"cmd\":[\"x\"],\"env\":{\"A\":1}}", "{\"cmd\":[\"x\"],\"needs\":[\"a\",\"a\"]}",
    "{\"cmd\":[\"x\"],\"needs\":[\"w\"]}", "{\"cmd\":[\"x\"],\"cwd\":\"\"}",
  };

  for (guint i = 0; i < G_N_ELEMENTS (defs); i++) {
    EfWait wait = { 0 };
    g_autoptr(JsonObject) def = object_of (defs[i]);
    g_autoptr(GError) error = NULL;

    box_engine_service_async (f->ef.engine, "p", "svc", BOX_SERVICE_OP_PUT, "w", def, NULL,
                              ef_wait_cb, &wait);
    g_assert_null (result_object (f, &wait, FALSE, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    g_assert_false (fake_agent_poll (f->fake));
  }
  for (const char *const *name = (const char *const[]) { "", "-a", ".a", "a/b", "a b", NULL };
       *name != NULL; name++) {
    EfWait wait = { 0 };
    g_autoptr(GError) error = NULL;

    box_engine_service_async (f->ef.engine, "p", "svc", BOX_SERVICE_OP_GET, *name, NULL, NULL,
                              ef_wait_cb, &wait);
    g_assert_null (result_object (f, &wait, FALSE, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  }
}

/* records from the guest are checked member by member */
static void
test_hostile_records (Fixture *f, gconstpointer caps)
{
  static const char *const bad[] = {
    "{\"name\":\"w\",\"cmd\":[\"x\"],\"state\":\"dancing\",\"restarts\":0}",
    "{\"name\":\"w\",\"cmd\":[\"x\"],\"state\":\"running\",\"restarts\":0,\"pid\":-1,\"started_at\":1}",
    "{\"name\":\"w\",\"cmd\":[\"x\"],\"state\":\"running\",\"restarts\":0,\"pid\":3}",
    "{\"name\":\"w\",\"cmd\":[\"x\"],\"state\":\"stopped\",\"restarts\":-1}",
    "{\"name\":\"../w\",\"cmd\":[\"x\"],\"state\":\"stopped\",\"restarts\":0}",
    "{\"name\":\"w\",\"cmd\":[],\"state\":\"stopped\",\"restarts\":0}",
    "[1]",
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    EfWait wait = { 0 };
    g_autoptr(GError) error = NULL;
    g_autofree char *members = g_strdup_printf ("\"service\":%s", bad[i]);
    gint64 id;

    box_engine_service_async (f->ef.engine, "p", "svc", BOX_SERVICE_OP_GET, "w", NULL, NULL,
                              ef_wait_cb, &wait);
    id = read_op (f, "service-get", NULL);
    reply (f, id, members);
    g_test_message ("record %s", bad[i]);
    g_assert_null (result_object (f, &wait, FALSE, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  }
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);
#define ADD(path, fn) \
  g_test_add (path, Fixture, AGENT_CAPS, set_up, fn, tear_down)
  ADD ("/services/ensure-port/starts", test_ensure_port_starts);
  ADD ("/services/ensure-port/running-or-none", test_ensure_port_running_or_none);
  ADD ("/services/put/needs", test_put_needs);
  ADD ("/services/put/refused-early", test_put_refused_early);
  ADD ("/services/hostile-records", test_hostile_records);
  return g_test_run ();
}
