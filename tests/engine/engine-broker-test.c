/* engine-broker-test.c: the engine hands sandboxes' secrets to the broker.
 *
 * boxd's engine, in process on the dummy hypervisor, loads the `testbroker`
 * module (broker-test-plugin.c, a real plugin found by the loader in a
 * plugin directory made of the build tree's plugins and it) as its broker
 * and network; the module records every call.  Checked: the network gets
 * the broker at start; a sandbox using secrets gets them (values unsealed)
 * and is marked brokered at create, fork, wake, restore and boxd's
 * restart; a PATCH of its secrets and a PUT of a secret it uses reach it
 * at once when awake; emptying its secrets or deleting it takes them back;
 * a refusal is not kept, an unreachable broker keeps the change (503); and
 * no value ever appears in boxd's log or in an event.
 */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "box-agent-frame.h"
#include "box-engine-ops-private.h"  /* BOX_ENGINE_CA_WAIT_MS */
#include "box-requests.h"
#include "engine-fixture.h"

#define V1 "v1-value-Zq7yXw3k"
#define V2 "v2-value-Pm4tRb8n"

static GString *log_text;      /* everything logged, every level */
static GString *event_text;    /* every event's detail */
static char *plugin_dir;

static GLogWriterOutput
capture_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  for (gsize i = 0; i < n_fields; i++)
    if (g_str_equal (fields[i].key, "MESSAGE")) {
      g_string_append_len (log_text, fields[i].value,
                           fields[i].length < 0 ? (gssize) strlen (fields[i].value) : fields[i].length);
      g_string_append_c (log_text, '\n');
    }
  return g_log_writer_default (level, fields, n_fields, user_data);
}

static void
on_event (BoxEngine *engine, BoxEvent *event, gpointer user_data)
{
  g_autofree char *detail = NULL;

  if (event->detail != NULL) {
    g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

    json_node_set_object (node, event->detail);
    detail = json_to_string (node, FALSE);
  }
  g_string_append_printf (event_text, "%s %s %s\n", event->type, event->sandbox,
                          detail != NULL ? detail : "");
}

static void
configure (BoxConfig *config)
{
  g_free (config->plugin_dir);
  config->plugin_dir = g_strdup (plugin_dir);
  g_free (config->network);
  config->network = g_strdup ("testbroker");
  g_free (config->broker);
  config->broker = g_strdup ("testbroker");
  config->secret_key = TRUE;
  g_free (config->secret_key_file);
  config->secret_key_file = g_build_filename (config->data_dir, "secret.key", NULL);
}

static void
set_up (Ef *ef, gconstpointer user_data)
{
  ef->configure = configure;
  ef_set_up (ef, user_data);
  g_signal_connect (ef->engine, "event", G_CALLBACK (on_event), NULL);
}

static GObject *
broker (Ef *ef)
{
  BoxBroker *b = box_engine_get_broker (ef->engine);

  g_assert_nonnull (b);
  g_assert_true (G_OBJECT (b) == G_OBJECT (box_engine_get_network (ef->engine)));
  return G_OBJECT (b);
}

/* The calls recorded since the last take, joined by "\n", forgotten. */
static char *
take_calls (Ef *ef)
{
  GPtrArray *calls = g_object_get_data (broker (ef), "calls");
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < calls->len; i++)
    g_string_append_printf (out, "%s%s", i > 0 ? "\n" : "", (char *) g_ptr_array_index (calls, i));
  g_ptr_array_set_size (calls, 0);
  return g_string_free (out, FALSE);
}

static void
assert_calls (Ef *ef, const char *expected)
{
  g_autofree char *got = take_calls (ef);

  g_assert_cmpstr (got, ==, expected);
}

/* the two calls a sandbox using TOKEN (with @value) gets */
static void
assert_pushed (Ef *ef, const char *id, const char *value)
{
  g_autofree char *expected = g_strdup_printf (
    "set_secrets %s TOKEN=%s@api.secret.test,*.secret.test/v1#__box_token__\n"
    "set_brokered %s 1", id, value, id);

  assert_calls (ef, expected);
}

static void
assert_dropped (Ef *ef, const char *id)
{
  g_autofree char *expected = g_strdup_printf ("set_secrets %s\nset_brokered %s 0", id, id);

  assert_calls (ef, expected);
}

static gboolean
try_put_secret (Ef *ef, const char *name, const char *value, GError **error)
{
  g_autofree char *json = g_strdup_printf (
    "{\"value\": \"%s\", \"hosts\": [\"api.secret.test\", \"*.secret.test/v1\"]}", value);

  return ef_put_secret (ef, name, json, error);
}

static void
put_secret (Ef *ef, const char *name, const char *value)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (try_put_secret (ef, name, value, &error));
  g_assert_no_error (error);
}

static void
assert_no_value (void)
{
  g_assert_null (strstr (log_text->str, V1));
  g_assert_null (strstr (log_text->str, V2));
  g_assert_null (strstr (event_text->str, V1));
  g_assert_null (strstr (event_text->str, V2));
}

/* At start the network gets the broker; a sandbox without secrets is
 * never handed to it. */
static void
test_without_secrets (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(GError) error = NULL;

  assert_calls (ef, "set_broker");
  sb = ef_create_ok (ef, "{}");
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_PAUSE);
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_WAKE);
  g_assert_true (ef_delete (ef, sb->id, &error));
  assert_calls (ef, "");
}

/* create, pause (nothing), wake, PUT (awake users only), fork, restore,
 * restart, PATCH emptied, delete */
static void
test_lifecycle (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxSandbox) asleep = NULL;
  g_autoptr(BoxSandbox) fork = NULL;
  g_autoptr(BoxSandbox) restored = NULL;
  g_autoptr(BoxSandbox) patched = NULL;
  g_autoptr(BoxCheckpoint) cp = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *from = NULL;
  g_autofree char *expected = NULL;

  put_secret (ef, "TOKEN", V1);
  g_free (take_calls (ef));
  sb = ef_create_ok (ef, "{\"secrets\": [\"TOKEN\"]}");
  assert_pushed (ef, sb->id, V1);
  asleep = ef_create_ok (ef, "{\"secrets\": [\"TOKEN\"]}");
  assert_pushed (ef, asleep->id, V1);
  ef_change_ok (ef, asleep->id, BOX_STATE_REQUEST_PAUSE);
  assert_calls (ef, "");
  ef_change_ok (ef, asleep->id, BOX_STATE_REQUEST_WAKE);
  assert_pushed (ef, asleep->id, V1);
  ef_change_ok (ef, asleep->id, BOX_STATE_REQUEST_STOP);
  ef_change_ok (ef, asleep->id, BOX_STATE_REQUEST_WAKE);
  assert_pushed (ef, asleep->id, V1);
  ef_change_ok (ef, asleep->id, BOX_STATE_REQUEST_PAUSE);

  /* a new value reaches the awake user at once; the asleep one at its wake */
  put_secret (ef, "TOKEN", V2);
  assert_pushed (ef, sb->id, V2);
  ef_change_ok (ef, asleep->id, BOX_STATE_REQUEST_WAKE);
  assert_pushed (ef, asleep->id, V2);

  /* a fork keeps the source's secrets; a restore hands them over again */
  cp = ef_checkpoint (ef, sb->id, FALSE, &error);
  g_assert_no_error (error);
  g_free (take_calls (ef));
  from = g_strdup_printf ("{\"from\": {\"sandbox\": \"%s\", \"checkpoint\": \"v1\"}}", sb->id);
  fork = ef_create_ok (ef, from);
  assert_pushed (ef, fork->id, V2);
  restored = ef_restore (ef, sb->id, "v1", &error);
  g_assert_no_error (error);
  assert_pushed (ef, sb->id, V2);

  /* boxd's restart: the broker starts empty, every awake user gets them */
  ef_change_ok (ef, fork->id, BOX_STATE_REQUEST_STOP);
  ef_stop (ef);
  ef_start (ef);
  g_signal_connect (ef->engine, "event", G_CALLBACK (on_event), NULL);
  {
    g_autofree char *got = take_calls (ef);

    g_assert_true (g_str_has_prefix (got, "set_broker\n"));
    g_assert_nonnull (strstr (got, sb->id));
    g_assert_nonnull (strstr (got, asleep->id));
    g_assert_null (strstr (got, fork->id));   /* stopped: at its wake */
    g_assert_nonnull (strstr (got, "TOKEN=" V2 "@"));
  }

  /* emptied by a PATCH (asleep or not): taken back; deleted: the same */
  patched = ef_update (ef, fork->id, "{\"secrets\": []}", &error);
  g_assert_no_error (error);
  assert_dropped (ef, fork->id);
  g_assert_true (ef_delete (ef, sb->id, &error));
  assert_dropped (ef, sb->id);
  g_assert_true (ef_delete (ef, fork->id, &error));
  assert_calls (ef, "");

  /* deleting a secret in use is 409 */
  g_assert_false (box_engine_delete_secret (ef->engine, "p", "TOKEN", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_clear_error (&error);
  expected = g_strdup_printf ("sandbox.created %s", asleep->id);
  g_assert_nonnull (strstr (event_text->str, expected));
  assert_no_value ();
}

/* A PATCH the broker refuses is not kept; one it cannot take now is kept
 * and answered 503. */
static void
test_patch_refused (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(BoxSandbox) kept = NULL;
  g_autoptr(GError) error = NULL;

  put_secret (ef, "TOKEN", V1);
  sb = ef_create_ok (ef, "{}");
  g_free (take_calls (ef));
  g_object_set_data (broker (ef), "fail", (gpointer) "refuse");
  g_assert_null (ef_update (ef, sb->id, "{\"secrets\": [\"TOKEN\"]}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  after = box_engine_get_sandbox (ef->engine, "p", sb->id, NULL);
  g_assert_cmpuint (g_strv_length (after->secrets), ==, 0);

  g_object_set_data (broker (ef), "fail", (gpointer) "unavailable");
  g_assert_null (ef_update (ef, sb->id, "{\"secrets\": [\"TOKEN\"]}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_clear_error (&error);
  kept = box_engine_get_sandbox (ef->engine, "p", sb->id, NULL);
  g_assert_cmpstrv (kept->secrets, ((const char *const[]) { "TOKEN", NULL }));
  g_free (take_calls (ef));

  /* the next wake applies it */
  g_object_set_data (broker (ef), "fail", NULL);
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_PAUSE);
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_WAKE);
  assert_pushed (ef, sb->id, V1);
  assert_no_value ();
}

/* A PATCH adding TOKEN to a sandbox created from @create_json, with the
 * test network failing as the object data @fail tells: not kept, and the
 * broker forgets what it took (its set_brokered call answered @brokered). */
static void
assert_patch_undone (Ef *ef, const char *create_json, const char *fail, const char *brokered)
{
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *expected = NULL;

  put_secret (ef, "TOKEN", V1);
  sb = ef_create_ok (ef, create_json);
  g_free (take_calls (ef));
  g_object_set_data (broker (ef), fail, (gpointer) "refuse");
  g_assert_null (ef_update (ef, sb->id, "{\"secrets\": [\"TOKEN\"]}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_object_set_data (broker (ef), fail, NULL);
  expected = g_strdup_printf ("set_secrets %s TOKEN=" V1 "@api.secret.test,*.secret.test/v1"
                              "#__box_token__\nset_brokered %s %s\nset_secrets %s\n"
                              "set_brokered %s 0", sb->id, sb->id, brokered, sb->id, sb->id);
  assert_calls (ef, expected);
  after = box_engine_get_sandbox (ef->engine, "p", sb->id, NULL);
  g_assert_cmpuint (g_strv_length (after->secrets), ==, 0);
  assert_no_value ();
}

/* the broker took the secrets, the network refused the new rules */
static void
test_patch_rules_refused (Ef *ef, gconstpointer user_data)
{
  assert_patch_undone (ef, "{\"network\": {\"egress\": [{\"domain\": \"api.example.com\", "
                           "\"action\": \"allow\"}]}}", "fail_egress", "1");
}

/* the broker took the secrets, the network refused to send it there */
static void
test_patch_brokered_refused (Ef *ef, gconstpointer user_data)
{
  assert_patch_undone (ef, "{}", "fail_brokered", "1 (failed)");
}

/* A secret PUT the broker refuses puts the previous record back; one it
 * cannot take now keeps the new one (503). */
static void
test_put_refused (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(GError) error = NULL;

  put_secret (ef, "TOKEN", V1);
  sb = ef_create_ok (ef, "{\"secrets\": [\"TOKEN\"]}");
  g_free (take_calls (ef));

  g_object_set_data (broker (ef), "fail", (gpointer) "refuse");
  g_assert_false (try_put_secret (ef, "TOKEN", V2, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  g_object_set_data (broker (ef), "fail", NULL);
  g_free (take_calls (ef));
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_PAUSE);
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_WAKE);
  assert_pushed (ef, sb->id, V1);   /* the old value again */

  g_object_set_data (broker (ef), "fail", (gpointer) "unavailable");
  g_assert_false (try_put_secret (ef, "TOKEN", V2, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  g_clear_error (&error);
  g_object_set_data (broker (ef), "fail", NULL);
  g_free (take_calls (ef));
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_PAUSE);
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_WAKE);
  assert_pushed (ef, sb->id, V2);   /* kept */
  assert_no_value ();
}

/* A PUT while a wake is under way, after the broker got the old value:
 * the waking sandbox gets the new one at once, not only at its next wake. */
static void
test_put_during_wake (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxSandbox) woken = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *rule = NULL;
  GPtrArray *calls;
  EfWait wait = { 0 };

  put_secret (ef, "TOKEN", V1);
  sb = ef_create_ok (ef, "{\"secrets\": [\"TOKEN\"]}");
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_PAUSE);
  g_free (take_calls (ef));
  rule = g_strdup_printf ("* delay ms=300 sandbox=%s", sb->id);
  ef_script (ef, rule);
  box_engine_change_state_async (ef->engine, ef->project, sb->id, BOX_STATE_REQUEST_WAKE, NULL,
                                 ef_wait_cb, &wait);
  calls = g_object_get_data (broker (ef), "calls");
  while (calls->len < 2 && !wait.done)
    g_main_context_iteration (NULL, TRUE);
  assert_pushed (ef, sb->id, V1);
  g_assert_false (wait.done);
  g_assert_cmpint (ef_state (ef, sb->id), !=, BOX_SANDBOX_STATE_RUNNING);

  put_secret (ef, "TOKEN", V2);
  assert_pushed (ef, sb->id, V2);
  result = ef_wait_result (ef, &wait);
  woken = box_engine_change_state_finish (ef->engine, result, &error);
  g_assert_no_error (error);
  g_assert_cmpint (woken->state, ==, BOX_SANDBOX_STATE_RUNNING);
  assert_calls (ef, "");
  assert_no_value ();
}

/* The guest gets, with its env, NAME=<placeholder> for each secret (here
 * when a running sandbox's secrets are PATCHed), never the value. */
static void
test_guest_env (Ef *ef, gconstpointer user_data)
{
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxSandbox) after = NULL;
  g_autoptr(JsonNode) body = json_from_string ("{\"secrets\": [\"TOKEN\"]}", NULL);
  g_autoptr(BoxSandboxUpdate) update = box_sandbox_update_from_json (body, NULL);
  g_autoptr(JsonObject) request = NULL;
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  g_autofree char *reply = NULL;
  EfWait wait = { 0 };
  FakeAgent *fake;
  JsonObject *env;
  gint64 id = 0;

  put_secret (ef, "TOKEN", V1);
  sb = ef_create_ok (ef, "{\"env\": {\"E\": \"e\"}}");
  fake = ef_fake_agent (ef, sb->id, NULL);
  assert_calls (ef, "set_broker");
  box_engine_update_sandbox_async (ef->engine, "p", sb->id, update, NULL, ef_wait_cb, &wait);
  request = fake_agent_read_request (fake);
  g_assert_cmpstr (box_agent_json_get_string (request, "op"), ==, "set-env");
  env = json_object_get_object_member (request, "env");
  g_assert_nonnull (env);
  /* E, TOKEN and the five that point TLS clients at the broker CA */
  g_assert_cmpuint (json_object_get_size (env), ==, 7);
  g_assert_cmpstr (json_object_get_string_member (env, "E"), ==, "e");
  g_assert_cmpstr (json_object_get_string_member (env, "NODE_EXTRA_CA_CERTS"), ==,
                   "/etc/box/ca.pem");
  g_assert_cmpstr (json_object_get_string_member (env, "SSL_CERT_FILE"), ==,
                   "/etc/ssl/certs/ca-certificates.crt");
  g_assert_cmpstr (json_object_get_string_member (env, "UV_NATIVE_TLS"), ==, "1");
  g_assert_cmpstr (json_object_get_string_member (env, "TOKEN"), ==, "__box_token__");
  json_node_set_object (node, request);
  text = json_to_string (node, FALSE);
  g_assert_null (strstr (text, V1));
  g_assert_true (box_agent_json_get_int (request, "id", &id));
  reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true}", id);
  fake_agent_send_json (fake, 0, reply);
  result = ef_wait_result (ef, &wait);
  after = box_engine_update_sandbox_finish (ef->engine, result, &error);
  g_assert_no_error (error);
  g_assert_cmpstrv (after->secrets, ((const char *const[]) { "TOKEN", NULL }));
  assert_pushed (ef, sb->id, V1);
}

/* ---- the broker CA in every guest ---- */

typedef struct {
  Ef             *ef;
  BoxAgentClient *client;
} Handing;

/* a new sandbox (create, fork) has the test's fake agent from its start */
static void
hand_agent (BoxEngine *engine, BoxEvent *event, gpointer user_data)
{
  Handing *h = user_data;
  gboolean ok = FALSE;

  if (g_strcmp0 (event->type, "sandbox.created") == 0)
    g_signal_emit_by_name (h->ef->hv, "set-agent", event->sandbox, h->client, &ok);
}

/* Answers the guest's calls (their ops appended to @ops) until a
 * trust-ca; its pem. */
static char *
serve_until_ca (FakeAgent *fake, GString *ops)
{
  for (;;) {
    g_autoptr(JsonObject) request = fake_agent_read_request (fake);
    const char *op = box_agent_json_get_string (request, "op");
    g_autofree char *reply = NULL;
    gint64 id = 0;

    g_assert_true (box_agent_json_get_int (request, "id", &id));
    g_string_append_printf (ops, "%s ", op);
    reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true}", id);
    fake_agent_send_json (fake, 0, reply);
    if (g_strcmp0 (op, "trust-ca") == 0)
      return g_strdup (box_agent_json_get_string (request, "pem"));
  }
}

static void
assert_ca_sent (FakeAgent *fake, const char *expected)
{
  g_autoptr(GString) ops = g_string_new (NULL);
  g_autofree char *pem = serve_until_ca (fake, ops);

  g_assert_cmpstr (ops->str, ==, "trust-ca ");
  g_assert_cmpstr (pem, ==, expected);
}

static BoxSandbox *
create_served (Ef *ef, FakeAgent *fake, const char *json, const char *ca)
{
  g_autoptr(JsonNode) body = json_from_string (json, NULL);
  g_autoptr(BoxSandboxCreate) request = box_sandbox_create_from_json (body, NULL);
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  EfWait wait = { 0 };
  BoxSandbox *sandbox;

  box_engine_create_sandbox_async (ef->engine, ef->project, request, NULL, ef_wait_cb, &wait);
  assert_ca_sent (fake, ca);
  result = ef_wait_result (ef, &wait);
  sandbox = box_engine_create_sandbox_finish (ef->engine, result, &error);
  g_assert_no_error (error);
  return sandbox;
}

static void
wake_served (Ef *ef, FakeAgent *fake, const char *id, const char *ca)
{
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(BoxSandbox) woken = NULL;
  g_autoptr(GError) error = NULL;
  EfWait wait = { 0 };

  box_engine_change_state_async (ef->engine, ef->project, id, BOX_STATE_REQUEST_WAKE, NULL,
                                 ef_wait_cb, &wait);
  assert_ca_sent (fake, ca);
  result = ef_wait_result (ef, &wait);
  woken = box_engine_change_state_finish (ef->engine, result, &error);
  g_assert_no_error (error);
}

/* Every sandbox (secrets or not) gets the broker CA before its create,
 * fork, wake and restore answer, every awake one after a rotation (an
 * asleep one at its wake); a guest that cannot take it is logged and
 * the operation succeeds. */
/* What the hypervisor was last given (box_hypervisor_set_guest_ca()). */
static void
assert_guest_ca (Ef *ef, const char *pem)
{
  g_autoptr(GBytes) ca = NULL;

  g_signal_emit_by_name (ef->hv, "guest-ca", &ca);
  g_assert_nonnull (ca);
  g_assert_cmpmem (g_bytes_get_data (ca, NULL), g_bytes_get_size (ca), pem, strlen (pem));
}

static void
test_trust_ca (Ef *ef, gconstpointer user_data)
{
  Handing h = { ef, NULL };
  FakeAgent *fake = ef_fake_agent (ef, "sb-unused", &h.client);
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxSandbox) sleeper = NULL;
  g_autoptr(BoxSandbox) fork = NULL;
  g_autoptr(BoxSandbox) restored = NULL;
  g_autoptr(BoxSandbox) lost = NULL;
  g_autoptr(BoxCheckpoint) cp = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *from = NULL;
  EfWait wait = { 0 };
  gint64 until;
  guint awake = 0;
  gboolean ok = FALSE;

  /* the hypervisor has the CA from the start, for guests it prepares */
  assert_guest_ca (ef, "CA-0");
  g_signal_connect (ef->engine, "event", G_CALLBACK (hand_agent), &h);
  sb = create_served (ef, fake, "{}", "CA-0");
  sleeper = create_served (ef, fake, "{}", "CA-0");
  ef_change_ok (ef, sleeper->id, BOX_STATE_REQUEST_STOP);
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_STOP);
  wake_served (ef, fake, sb->id, "CA-0");

  /* a rotation: the awake one at once, the stopped one at its wake */
  g_assert_true (box_engine_rotate_broker_ca (ef->engine, &awake, &error));
  g_assert_no_error (error);
  assert_guest_ca (ef, "CA-1");
  assert_ca_sent (fake, "CA-1");
  ef_settle (ef);
  until = g_get_monotonic_time () + 100 * 1000;
  while (g_get_monotonic_time () < until)
    g_assert_false (fake_agent_poll (fake));
  wake_served (ef, fake, sleeper->id, "CA-1");

  /* a fork and a restore (of a stopped sandbox: no agent call before) */
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_STOP);
  cp = ef_checkpoint (ef, sb->id, FALSE, &error);
  g_assert_no_error (error);
  from = g_strdup_printf ("{\"from\": {\"sandbox\": \"%s\", \"checkpoint\": \"v1\"}}", sb->id);
  fork = create_served (ef, fake, from, "CA-1");
  box_engine_restore_checkpoint_async (ef->engine, ef->project, sb->id, "v1", NULL, ef_wait_cb,
                                       &wait);
  assert_ca_sent (fake, "CA-1");
  result = ef_wait_result (ef, &wait);
  restored = box_engine_restore_checkpoint_finish (ef->engine, result, &error);
  g_assert_no_error (error);

  /* no agent for a new sandbox: logged, and the create succeeds */
  g_signal_handlers_disconnect_by_func (ef->engine, hand_agent, &h);
  lost = ef_create_ok (ef, "{}");
  g_assert_cmpint (ef_state (ef, lost->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_nonnull (strstr (log_text->str, "the guest did not get the broker CA"));
  /* a guest that refuses it: logged, the wake succeeds */
  g_signal_emit_by_name (ef->hv, "set-agent", lost->id, h.client, &ok);
  ef_change_ok (ef, lost->id, BOX_STATE_REQUEST_STOP);
  g_clear_object (&result);
  wait = (EfWait) { 0 };
  box_engine_change_state_async (ef->engine, ef->project, lost->id, BOX_STATE_REQUEST_WAKE, NULL,
                                 ef_wait_cb, &wait);
  {
    g_autoptr(JsonObject) request = fake_agent_read_request (fake);
    g_autofree char *reply = NULL;
    gint64 id = 0;

    g_assert_cmpstr (box_agent_json_get_string (request, "op"), ==, "trust-ca");
    g_assert_true (box_agent_json_get_int (request, "id", &id));
    reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":false,"
                             "\"error\":{\"code\":\"invalid\",\"message\":\"no\"}}", id);
    fake_agent_send_json (fake, 0, reply);
  }
  result = ef_wait_result (ef, &wait);
  g_clear_pointer (&lost, box_sandbox_free);
  lost = box_engine_change_state_finish (ef->engine, result, &error);
  g_assert_no_error (error);
  g_assert_nonnull (strstr (log_text->str, "the guest did not take the broker CA"));
}

/* A memory checkpoint of a stopped sandbox boots it, and it runs on: its
 * guest gets the broker CA after the boot, before anything else of the
 * checkpoint (the presuspend hooks), and the sandbox stays awake. */
static void
test_trust_ca_memory_checkpoint (Ef *ef, gconstpointer user_data)
{
  Handing h = { ef, NULL };
  FakeAgent *fake = ef_fake_agent (ef, "sb-unused", &h.client);
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxCheckpoint) cp = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  EfWait wait = { 0 };
  gboolean ok = FALSE;

  g_string_truncate (log_text, 0);
  g_signal_connect (ef->engine, "event", G_CALLBACK (hand_agent), &h);
  sb = create_served (ef, fake, "{}", "CA-0");
  ef_change_ok (ef, sb->id, BOX_STATE_REQUEST_STOP);
  g_signal_emit_by_name (ef->hv, "set-agent", sb->id, h.client, &ok);
  box_engine_create_checkpoint_async (ef->engine, ef->project, sb->id, NULL, TRUE, NULL, NULL,
                                      NULL, ef_wait_cb, &wait);
  /* the first call after the boot (without it: the presuspend hooks') */
  {
    g_autoptr(JsonObject) request = fake_agent_read_request (fake);
    g_autofree char *reply = NULL;
    gint64 id = 0;

    g_assert_cmpstr (box_agent_json_get_string (request, "op"), ==, "trust-ca");
    g_assert_cmpstr (box_agent_json_get_string (request, "pem"), ==, "CA-0");
    g_assert_true (box_agent_json_get_int (request, "id", &id));
    reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true}", id);
    fake_agent_send_json (fake, 0, reply);
  }
  /* the rest of the checkpoint's calls to the guest, answered */
  while (!wait.done) {
    if (fake_agent_poll (fake)) {
      g_autoptr(JsonObject) request = fake_agent_read_request (fake);
      g_autofree char *reply = NULL;
      gint64 id = 0;

      g_assert_cmpstr (box_agent_json_get_string (request, "op"), !=, "trust-ca");
      g_assert_true (box_agent_json_get_int (request, "id", &id));
      reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true}", id);
      fake_agent_send_json (fake, 0, reply);
    }
    g_main_context_iteration (NULL, FALSE);
  }
  result = ef_wait_result (ef, &wait);
  cp = box_engine_create_checkpoint_finish (ef->engine, result, &error);
  g_assert_no_error (error);
  g_assert_nonnull (cp);
  g_assert_cmpint (ef_state (ef, sb->id), ==, BOX_SANDBOX_STATE_RUNNING);
  g_assert_null (strstr (log_text->str, "broker CA"));
}

/* A guest that never answers trust-ca holds its create
 * BOX_ENGINE_CA_WAIT_MS at most (not the agent's two-minute call
 * timeout): then the create answers, logged. */
static void
test_trust_ca_silent (Ef *ef, gconstpointer user_data)
{
  Handing h = { ef, NULL };
  FakeAgent *fake = ef_fake_agent (ef, "sb-unused", &h.client);
  g_autoptr(JsonNode) body = json_from_string ("{}", NULL);
  g_autoptr(BoxSandboxCreate) request = box_sandbox_create_from_json (body, NULL);
  g_autoptr(JsonObject) call = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(GError) error = NULL;
  EfWait wait = { 0 };
  gint64 start = g_get_monotonic_time ();

  g_string_truncate (log_text, 0);
  g_signal_connect (ef->engine, "event", G_CALLBACK (hand_agent), &h);
  box_engine_create_sandbox_async (ef->engine, ef->project, request, NULL, ef_wait_cb, &wait);
  call = fake_agent_read_request (fake);
  g_assert_cmpstr (box_agent_json_get_string (call, "op"), ==, "trust-ca");
  result = ef_wait_result (ef, &wait);
  sb = box_engine_create_sandbox_finish (ef->engine, result, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_get_monotonic_time () - start, >=, (BOX_ENGINE_CA_WAIT_MS - 100) * 1000);
  g_assert_cmpint (g_get_monotonic_time () - start, <, (BOX_ENGINE_CA_WAIT_MS + 3000) * 1000);
  g_assert_nonnull (strstr (log_text->str, "the guest did not take the broker CA within"));
}

/* the build tree's plugins and the test module, in a directory of links */
/* At stop the network lets go of the broker before any plugin stops (its
 * proxy thread would otherwise hand connections to a stopped broker). */
static void
test_stop_order (Ef *ef, gconstpointer user_data)
{
  g_autoptr(GObject) held = g_object_ref (broker (ef));
  GPtrArray *calls = g_object_get_data (held, "calls");

  g_ptr_array_set_size (calls, 0);
  ef_stop (ef);
  g_assert_cmpuint (calls->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (calls, 0), ==, "set_broker NULL");
  g_assert_cmpstr (g_ptr_array_index (calls, 1), ==, "stop");
}

static char *
make_plugin_dir (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) dir = NULL;
  const char *module = g_getenv ("BOX_TESTBROKER_MODULE");
  char *path = g_dir_make_tmp ("box-broker-plugins-XXXXXX", &error);
  g_autofree char *link = NULL;
  const char *entry;

  g_assert_no_error (error);
  g_assert_nonnull (module);
  dir = g_dir_open (BOX_BUILD_PLUGINDIR, 0, &error);
  g_assert_no_error (error);
  while ((entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *target = NULL;
    g_autofree char *name = NULL;

    if (!g_str_has_suffix (entry, ".so"))
      continue;
    target = g_build_filename (BOX_BUILD_PLUGINDIR, entry, NULL);
    name = g_build_filename (path, entry, NULL);
    g_assert_cmpint (symlink (target, name), ==, 0);
  }
  link = g_build_filename (path, "box-plugin-testbroker.so", NULL);
  g_assert_cmpint (symlink (module, link), ==, 0);
  return path;
}

static void
remove_plugin_dir (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *entry;

  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *name = g_build_filename (path, entry, NULL);
    unlink (name);
  }
  rmdir (path);
}

int
main (int argc, char **argv)
{
  int status;

  ef_init (&argc, &argv);
  log_text = g_string_new (NULL);
  event_text = g_string_new (NULL);
  g_log_set_writer_func (capture_writer, NULL, NULL);
  plugin_dir = make_plugin_dir ();
#define ADD(path, func) g_test_add (path, Ef, NULL, set_up, func, ef_tear_down)
  ADD ("/engine-broker/without-secrets", test_without_secrets);
  ADD ("/engine-broker/stop-order", test_stop_order);
  ADD ("/engine-broker/lifecycle", test_lifecycle);
  ADD ("/engine-broker/patch-refused", test_patch_refused);
  ADD ("/engine-broker/put-refused", test_put_refused);
  ADD ("/engine-broker/patch-rules-refused", test_patch_rules_refused);
  ADD ("/engine-broker/patch-brokered-refused", test_patch_brokered_refused);
  ADD ("/engine-broker/put-during-wake", test_put_during_wake);
  g_test_add ("/engine-broker/guest-env", Ef, "guest-agent,memory-snapshots", set_up,
              test_guest_env, ef_tear_down);
  g_test_add ("/engine-broker/trust-ca", Ef, "guest-agent,memory-snapshots,checkpoints,fork", set_up,
              test_trust_ca, ef_tear_down);
  g_test_add ("/engine-broker/trust-ca-silent", Ef, "guest-agent", set_up, test_trust_ca_silent,
              ef_tear_down);
  g_test_add ("/engine-broker/trust-ca-memory-checkpoint", Ef,
              "guest-agent,memory-snapshots,checkpoints", set_up, test_trust_ca_memory_checkpoint,
              ef_tear_down);
  status = g_test_run ();
  remove_plugin_dir (plugin_dir);
  g_free (plugin_dir);
  return status;
}
