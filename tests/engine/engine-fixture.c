/* engine-fixture.c: an in-process BoxEngine for unit tests; see engine-fixture.h. */
#include "config.h"

#include <glib/gstdio.h>

#include "box-requests.h"
#include "engine-fixture.h"

static void
remove_tree (const char *path)
{
  g_autoptr(GDir) dir = NULL;
  const char *entry;

  if (!g_file_test (path, G_FILE_TEST_IS_DIR)) {
    g_unlink (path);
    return;
  }
  dir = g_dir_open (path, 0, NULL);
  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *child = g_build_filename (path, entry, NULL);
    remove_tree (child);
  }
  g_rmdir (path);
}

static void
on_event (BoxEngine *engine, BoxEvent *event, gpointer user_data)
{
  Ef *ef = user_data;
  const char *reason = "-";
  gint64 *at = g_new (gint64, 1);

  if (event->detail != NULL && json_object_has_member (event->detail, "reason"))
    reason = json_object_get_string_member (event->detail, "reason");
  else if (event->detail != NULL && json_object_has_member (event->detail, "from"))
    reason = json_object_get_string_member (event->detail, "from");
  g_ptr_array_add (ef->events, g_strdup_printf ("%s %s %s", event->type, event->sandbox, reason));
  *at = event->at;
  g_ptr_array_add (ef->event_times, at);
}

static void
on_interrupted (BoxEngine *engine, const char *sandbox_id, const char *why, gpointer user_data)
{
  Ef *ef = user_data;

  g_ptr_array_add (ef->interrupted, g_strdup_printf ("%s %s", sandbox_id, why));
}

void
ef_init (int *argc, char ***argv)
{
  g_test_init (argc, argv, NULL);
  g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
}

void
ef_set_up (Ef *ef, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;

  ef->project = "p";
  if (user_data != NULL)
    ef->dummy_caps = g_strdup (user_data);
  ef->data_dir = g_dir_make_tmp ("box-engine-test-XXXXXX", &error);
  g_assert_no_error (error);
  ef->clock = box_clock_new_manual (EF_T0);
  ef->events = g_ptr_array_new_with_free_func (g_free);
  ef->event_times = g_ptr_array_new_with_free_func (g_free);
  ef->interrupted = g_ptr_array_new_with_free_func (g_free);
  ef->fakes = g_ptr_array_new_with_free_func ((GDestroyNotify) fake_agent_free);
  ef->clients = g_ptr_array_new_with_free_func (g_object_unref);
  ef_start (ef);
  ef_project (ef, "p");
}

BoxConfig *
ef_config (Ef *ef)
{
  BoxConfig *config = box_config_new ();

  g_free (config->data_dir);
  config->data_dir = g_strdup (ef->data_dir);
  g_free (config->plugin_dir);
  config->plugin_dir = g_strdup (BOX_BUILD_PLUGINDIR);
  g_free (config->hypervisor);
  config->hypervisor = g_strdup ("dummy");
  g_free (config->network);
  config->network = g_strdup ("none");
  config->secret_key = FALSE;
  config->identity = ef->identity;   /* default none: no RSA key made per test */
  config->dbus = BOX_DBUS_NONE;
  config->admin_token = g_strdup ("admin-token-for-tests");
  if (ef->dummy_script != NULL)
    g_key_file_set_string (config->keyfile, "plugin.dummy", "script", ef->dummy_script);
  if (ef->dummy_caps != NULL)
    g_key_file_set_string (config->keyfile, "plugin.dummy", "capabilities", ef->dummy_caps);

  if (ef->configure != NULL)
    ef->configure (config);
  return config;
}

void
ef_start (Ef *ef)
{
  g_autoptr(GError) error = NULL;

  g_assert_null (ef->engine);
  ef->engine = box_engine_new (ef_config (ef));
  box_engine_set_clock (ef->engine, ef->clock);
  g_signal_connect (ef->engine, "event", G_CALLBACK (on_event), ef);
  g_signal_connect (ef->engine, "sandbox-interrupted", G_CALLBACK (on_interrupted), ef);
  g_assert_true (box_engine_start (ef->engine, NULL, &error));
  g_assert_no_error (error);
  ef->hv = box_engine_get_hypervisor (ef->engine);
  g_assert_cmpstr (box_plugin_get_name (BOX_PLUGIN (ef->hv)), ==, "dummy");
  /* the tick runs on the test clock */
  g_assert_cmpuint (box_clock_count_timers (ef->clock), ==, 1);
}

void
ef_stop (Ef *ef)
{
  ef_settle (ef);
  box_engine_stop (ef->engine);
  g_assert_cmpuint (box_clock_count_timers (ef->clock), ==, 0);
  ef->hv = NULL;
  g_clear_object (&ef->engine);
}

void
ef_tear_down (Ef *ef, gconstpointer user_data)
{
  if (ef->engine != NULL)
    ef_stop (ef);
  g_clear_object (&ef->clock);
  g_ptr_array_unref (ef->events);
  g_ptr_array_unref (ef->event_times);
  g_ptr_array_unref (ef->interrupted);
  g_ptr_array_unref (ef->clients);
  g_ptr_array_unref (ef->fakes);
  remove_tree (ef->data_dir);
  g_free (ef->data_dir);
  g_free (ef->dummy_script);
  g_free (ef->dummy_caps);
}

void
ef_settle (Ef *ef)
{
  while (g_main_context_iteration (NULL, FALSE))
    ;
}

static gboolean
timed_out (gpointer user_data)
{
  g_error ("timed out waiting for the engine");
  return G_SOURCE_REMOVE;
}

void
ef_wait (Ef *ef, gboolean *done)
{
  guint watchdog = g_timeout_add_seconds (10, timed_out, NULL);

  while (!*done)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (watchdog);
  ef_settle (ef);
}

void
ef_advance (Ef *ef, guint seconds)
{
  for (guint i = 0; i < seconds; i++) {
    box_clock_advance (ef->clock, G_USEC_PER_SEC);
    ef_settle (ef);
  }
}

void
ef_script (Ef *ef, const char *rules)
{
  gboolean ok = FALSE;

  g_signal_emit_by_name (ef->hv, "script", rules, &ok);
  g_assert_true (ok);
}

void
ef_caps (Ef *ef, const char *caps, const char *accel)
{
  gboolean ok = FALSE;

  g_signal_emit_by_name (ef->hv, "set-capabilities", caps, accel, &ok);
  g_assert_true (ok);
}

gboolean
ef_lose_vm (Ef *ef, const char *sandbox_id)
{
  gboolean lost = FALSE;

  g_signal_emit_by_name (ef->hv, "lose-vm", sandbox_id, &lost);
  return lost;
}

gboolean
ef_lose_all (Ef *ef, const char *sandbox_id)
{
  gboolean lost = FALSE;

  g_signal_emit_by_name (ef->hv, "lose-all", sandbox_id, &lost);
  return lost;
}

void
ef_project (Ef *ef, const char *name)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxProject) project = box_engine_create_project (ef->engine, name, NULL, &error);

  g_assert_no_error (error);
  g_assert_nonnull (project);
  g_assert_cmpint (project->created_at, ==, box_clock_get_real_time (ef->clock));
}

/* ---- async calls, waited for ---- */

void
ef_wait_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  EfWait *wait = user_data;

  wait->result = g_object_ref (result);
  wait->done = TRUE;
}

GAsyncResult *
ef_wait_result (Ef *ef, EfWait *wait)
{
  ef_wait (ef, &wait->done);
  return wait->result;
}

static JsonNode *
parse (const char *json)
{
  g_autoptr(GError) error = NULL;
  JsonNode *node = box_json_parse_body (json, strlen (json), TRUE, &error);

  g_assert_no_error (error);
  return node;
}

BoxSandbox *
ef_create (Ef *ef, const char *json, GError **error)
{
  g_autoptr(JsonNode) body = parse (json);
  g_autoptr(BoxSandboxCreate) request = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  EfWait wait = { 0 };

  request = box_sandbox_create_from_json (body, error);
  if (request == NULL)
    return NULL;
  box_engine_create_sandbox_async (ef->engine, ef->project, request, NULL, ef_wait_cb, &wait);
  result = ef_wait_result (ef, &wait);
  return box_engine_create_sandbox_finish (ef->engine, result, error);
}

BoxSandbox *
ef_create_ok (Ef *ef, const char *json)
{
  g_autoptr(GError) error = NULL;
  BoxSandbox *sandbox = ef_create (ef, json, &error);

  g_assert_no_error (error);
  g_assert_nonnull (sandbox);
  g_assert_cmpint (sandbox->state, ==, BOX_SANDBOX_STATE_RUNNING);
  return sandbox;
}

void
ef_change_ok (Ef *ef, const char *id, BoxStateRequest request)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) after = ef_change (ef, id, request, &error);

  g_assert_no_error (error);
}

gboolean
ef_put_secret (Ef *ef, const char *name, const char *json, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(JsonNode) body = json_from_string (json, &local_error);
  g_autoptr(BoxSecretPut) put = NULL;
  g_autoptr(BoxSecret) secret = NULL;

  g_assert_no_error (local_error);
  put = box_secret_put_from_json (body, &local_error);
  g_assert_no_error (local_error);
  secret = box_engine_put_secret (ef->engine, ef->project, name, put, error);
  return secret != NULL;
}

BoxSandbox *
ef_change (Ef *ef, const char *id, BoxStateRequest request, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  EfWait wait = { 0 };

  box_engine_change_state_async (ef->engine, ef->project, id, request, NULL, ef_wait_cb, &wait);
  result = ef_wait_result (ef, &wait);
  return box_engine_change_state_finish (ef->engine, result, error);
}

BoxSandbox *
ef_update (Ef *ef, const char *id, const char *json, GError **error)
{
  g_autoptr(JsonNode) body = parse (json);
  g_autoptr(BoxSandboxUpdate) update = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  EfWait wait = { 0 };

  update = box_sandbox_update_from_json (body, error);
  if (update == NULL)
    return NULL;
  box_engine_update_sandbox_async (ef->engine, ef->project, id, update, NULL, ef_wait_cb, &wait);
  result = ef_wait_result (ef, &wait);
  return box_engine_update_sandbox_finish (ef->engine, result, error);
}

gboolean
ef_delete (Ef *ef, const char *id, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  EfWait wait = { 0 };

  box_engine_delete_sandbox_async (ef->engine, ef->project, id, NULL, ef_wait_cb, &wait);
  result = ef_wait_result (ef, &wait);
  return box_engine_delete_sandbox_finish (ef->engine, result, error);
}

gboolean
ef_delete_project (Ef *ef, const char *name, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  EfWait wait = { 0 };

  box_engine_delete_project_async (ef->engine, name, NULL, ef_wait_cb, &wait);
  result = ef_wait_result (ef, &wait);
  return box_engine_delete_project_finish (ef->engine, result, error);
}

BoxSandbox *
ef_hold (Ef *ef, const char *id, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  EfWait wait = { 0 };

  box_engine_hold_async (ef->engine, ef->project, id, NULL, ef_wait_cb, &wait);
  result = ef_wait_result (ef, &wait);
  return box_engine_hold_finish (ef->engine, result, error);
}

BoxCheckpoint *
ef_checkpoint (Ef *ef, const char *id, gboolean memory, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  EfWait wait = { 0 };

  box_engine_create_checkpoint_async (ef->engine, ef->project, id, NULL, memory, NULL, NULL, NULL,
                                      ef_wait_cb, &wait);
  result = ef_wait_result (ef, &wait);
  return box_engine_create_checkpoint_finish (ef->engine, result, error);
}

BoxSandbox *
ef_restore (Ef *ef, const char *id, const char *checkpoint, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  EfWait wait = { 0 };

  box_engine_restore_checkpoint_async (ef->engine, ef->project, id, checkpoint, NULL, ef_wait_cb,
                                       &wait);
  result = ef_wait_result (ef, &wait);
  return box_engine_restore_checkpoint_finish (ef->engine, result, error);
}

gboolean
ef_delete_checkpoint (Ef *ef, const char *id, const char *checkpoint, GError **error)
{
  g_autoptr(GAsyncResult) result = NULL;
  EfWait wait = { 0 };

  box_engine_delete_checkpoint_async (ef->engine, ef->project, id, checkpoint, NULL, ef_wait_cb,
                                      &wait);
  result = ef_wait_result (ef, &wait);
  return box_engine_delete_checkpoint_finish (ef->engine, result, error);
}

/* ---- fake agents ---- */

static void
on_connected (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_assert_true (box_agent_client_connect_finish (BOX_AGENT_CLIENT (source), result, NULL));
  *(gboolean *) user_data = TRUE;
}

FakeAgent *
ef_fake_agent (Ef *ef, const char *sandbox_id, BoxAgentClient **client)
{
  g_autoptr(GIOStream) stream = NULL;
  g_autoptr(JsonObject) hello = NULL;
  FakeAgent *fake = fake_agent_new (&stream);
  BoxAgentClient *agent = box_agent_client_new (stream);
  gboolean connected = FALSE, ok = FALSE;

  g_ptr_array_add (ef->fakes, fake);
  g_ptr_array_add (ef->clients, agent);
  box_agent_client_connect_async (agent, NULL, on_connected, &connected);
  hello = fake_agent_read_request (fake);
  fake_agent_reply_hello (fake, hello);
  ef_wait (ef, &connected);
  g_signal_emit_by_name (ef->hv, "set-agent", sandbox_id, agent, &ok);
  g_assert_true (ok);
  if (client != NULL)
    *client = agent;
  return fake;
}

int
ef_state (Ef *ef, const char *id)
{
  g_autoptr(BoxSandbox) sandbox = box_engine_get_sandbox (ef->engine, NULL, id, NULL);

  return sandbox != NULL ? (int) sandbox->state : -1;
}

BoxVmState
ef_vm_state (Ef *ef, const char *id)
{
  return box_hypervisor_query (ef->hv, id, NULL);
}

static char *
take (GPtrArray *array)
{
  g_autoptr(GString) joined = g_string_new ("");

  for (guint i = 0; i < array->len; i++)
    g_string_append_printf (joined, "%s%s", i > 0 ? ", " : "", (char *) g_ptr_array_index (array, i));
  g_ptr_array_set_size (array, 0);
  return g_string_free (g_steal_pointer (&joined), FALSE);
}

char *
ef_take_events (Ef *ef)
{
  g_ptr_array_set_size (ef->event_times, 0);
  return take (ef->events);
}

char *
ef_take_interrupted (Ef *ef)
{
  return take (ef->interrupted);
}

char *
ef_future (Ef *ef, gint64 seconds)
{
  return box_time_format (box_clock_get_real_time (ef->clock) + seconds * G_USEC_PER_SEC);
}

void
ef_assert_events (Ef *ef, const char *expected)
{
  g_autofree char *got = ef_take_events (ef);

  g_assert_cmpstr (got, ==, expected);
}

void
ef_assert_interrupted (Ef *ef, const char *expected)
{
  g_autofree char *got = ef_take_interrupted (ef);

  g_assert_cmpstr (got, ==, expected);
}

void
ef_forget (Ef *ef)
{
  g_free (ef_take_events (ef));
  g_free (ef_take_interrupted (ef));
}
