/* http-client.c: a SoupSession client for http-test, on the test's main loop,
 * and the engine and server the tests run. */
#include "config.h"

#include <string.h>

#include "http-client.h"

static BoxHttpServer *client_server;
static SoupSession *client_session;

void
http_test_start (const char *admin_token, char **data_dir, BoxEngine **engine,
                 BoxHttpServer **server)
{
  g_autoptr(GError) error = NULL;
  const char *plugin_dir = g_getenv ("BOX_PLUGIN_DIR");
  BoxConfig *config = box_config_new ();

  *data_dir = g_dir_make_tmp ("box-http-test-XXXXXX", &error);
  g_assert_no_error (error);
  g_setenv ("BOX_ADMIN_TOKEN", admin_token, TRUE);
  g_free (config->data_dir);
  config->data_dir = g_strdup (*data_dir);
  g_free (config->hypervisor);
  config->hypervisor = g_strdup ("dummy");
  if (plugin_dir != NULL) {
    g_free (config->plugin_dir);
    config->plugin_dir = g_strdup (plugin_dir);
  }
  config->dbus = BOX_DBUS_NONE;
  g_assert_true (box_config_resolve (config, &error));
  g_assert_no_error (error);

  *engine = box_engine_new (config);
  g_assert_true (box_engine_start (*engine, NULL, &error));
  g_assert_no_error (error);

  *server = box_http_server_new (*engine);
  g_assert_true (box_http_server_listen (*server, "127.0.0.1:0", &error));
  g_assert_no_error (error);
  g_assert_cmpuint (box_http_server_get_port (*server), >, 0);
}

char *
http_test_make_key (const char *admin_token, const char *project)
{
  g_autofree char *body = g_strdup_printf ("{\"name\": \"%s\"}", project);
  g_autofree char *path = g_strdup_printf ("/v1/projects/%s/keys", project);
  g_autoptr(Reply) created = call ("POST", "/v1/projects", admin_token, body);
  g_autoptr(Reply) key = call ("POST", path, admin_token, "{\"name\": \"ci\"}");

  g_assert_cmpuint (created->status, ==, 201);
  g_assert_cmpuint (key->status, ==, 201);
  return g_strdup (json_object_get_string_member (reply_object (key), "secret"));
}

void
http_test_stop (char **data_dir, BoxEngine **engine, BoxHttpServer **server)
{
  box_http_server_shutdown (*server);
  g_clear_object (server);
  box_engine_stop (*engine);
  g_clear_object (engine);
  /* let sources that hold the last references run */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  if (*data_dir != NULL) {
    g_autofree char *argv0 = g_find_program_in_path ("rm");
    const char *argv[] = { argv0, "-rf", *data_dir, NULL };
    if (argv0 != NULL)
      g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, NULL,
                    NULL);
  }
  g_clear_pointer (data_dir, g_free);
}

void
http_client_init (BoxHttpServer *server)
{
  client_server = server;
  g_clear_object (&client_session);
  if (server != NULL)
    client_session = g_object_new (SOUP_TYPE_SESSION, "max-conns-per-host", 16, "max-conns", 32,
                                   NULL);
}

SoupSession *
http_client_session (void)
{
  return client_session;
}

void
reply_free (Reply *reply)
{
  g_free (reply->body);
  g_clear_pointer (&reply->json, json_node_unref);
  g_clear_pointer (&reply->headers, soup_message_headers_unref);
  g_free (reply);
}

typedef struct {
  GBytes  *bytes;
  GError  *error;
  gboolean done;
} Pending;

static void
sent_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Pending *pending = user_data;

  pending->bytes = soup_session_send_and_read_finish (SOUP_SESSION (source), result,
                                                      &pending->error);
  pending->done = TRUE;
}

gboolean
timeout_cb (gpointer user_data)
{
  gboolean *timed_out = user_data;

  *timed_out = TRUE;
  return G_SOURCE_REMOVE;
}

/* Runs the main loop until *@done (FALSE after 20 s). */
gboolean
iterate_until (gboolean *done)
{
  gboolean timed_out = FALSE;
  guint id = g_timeout_add_seconds (20, timeout_cb, &timed_out);

  while (!*done && !timed_out)
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (id);
  return *done;
}

SoupMessage *
new_message (const char *method, const char *path, const char *token)
{
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u%s",
                                          box_http_server_get_port (client_server), path);
  SoupMessage *msg = soup_message_new (method, url);

  g_assert_nonnull (msg);
  if (token != NULL) {
    g_autofree char *value = g_strdup_printf ("Bearer %s", token);
    soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", value);
  }
  return msg;
}

Reply *
call_full (const char *method, const char *path, const char *token,
           const char *content_type, const char *body, gsize body_len)
{
  g_autoptr(SoupMessage) msg = new_message (method, path, token);
  Pending pending = { 0 };
  Reply *reply = g_new0 (Reply, 1);
  g_autoptr(JsonParser) parser = json_parser_new ();
  gsize len = 0;
  const char *data;

  if (body != NULL) {
    g_autoptr(GBytes) bytes = g_bytes_new (body, body_len);
    soup_message_set_request_body_from_bytes (msg, content_type, bytes);
  }
  soup_session_send_and_read_async (client_session, msg, G_PRIORITY_DEFAULT, NULL, sent_cb, &pending);
  g_assert_true (iterate_until (&pending.done));
  g_assert_no_error (pending.error);

  reply->status = soup_message_get_status (msg);
  reply->headers = soup_message_headers_ref (soup_message_get_response_headers (msg));
  data = g_bytes_get_data (pending.bytes, &len);
  reply->body = g_strndup (data != NULL ? data : "", len);
  if (len > 0 && json_parser_load_from_data (parser, reply->body, len, NULL))
    reply->json = json_node_ref (json_parser_get_root (parser));
  g_bytes_unref (pending.bytes);
  return reply;
}

Reply *
call (const char *method, const char *path, const char *token, const char *json_body)
{
  return call_full (method, path, token, "application/json", json_body,
                    json_body != NULL ? strlen (json_body) : 0);
}

JsonObject *
reply_object (Reply *reply)
{
  g_assert_nonnull (reply->json);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (reply->json));
  return json_node_get_object (reply->json);
}

/* Asserts the {error: {code, message}} shape, and nothing else in it. */
void
assert_error (Reply *reply, guint status, const char *code, const char *message)
{
  JsonObject *root;
  JsonObject *error;

  if (reply->status != status)
    g_test_message ("unexpected answer %u: %s", reply->status, reply->body);
  g_assert_cmpuint (reply->status, ==, status);
  g_assert_cmpstr (soup_message_headers_get_content_type (reply->headers, NULL), ==,
                   "application/json");
  root = reply_object (reply);
  g_assert_cmpuint (json_object_get_size (root), ==, 1);
  error = json_object_get_object_member (root, "error");
  g_assert_nonnull (error);
  g_assert_cmpuint (json_object_get_size (error), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (error, "code"), ==, code);
  if (message != NULL)
    g_assert_cmpstr (json_object_get_string_member (error, "message"), ==, message);
  else
    g_assert_cmpstr (json_object_get_string_member (error, "message"), !=, "");
}

const char *
error_message (Reply *reply)
{
  return json_object_get_string_member (json_object_get_object_member (reply_object (reply),
                                                                      "error"), "message");
}

static void read_next_line (SseClient *client);

static void
line_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  SseClient *client = user_data;
  g_autoptr(GError) error = NULL;
  gsize len = 0;
  g_autofree char *line = g_data_input_stream_read_line_finish_utf8 (G_DATA_INPUT_STREAM (source),
                                                                     result, &len, &error);

  if (line == NULL) {
    if (error != NULL && !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      client->error = g_steal_pointer (&error);
    client->eof = TRUE;
    return;
  }
  if (len == 0) {
    g_queue_push_tail (&client->blocks, g_string_free (g_steal_pointer (&client->block), FALSE));
    client->block = g_string_new (NULL);
  } else {
    if (client->block->len > 0)
      g_string_append_c (client->block, '\n');
    g_string_append (client->block, line);
  }
  read_next_line (client);
}

static void
read_next_line (SseClient *client)
{
  g_data_input_stream_read_line_async (client->data, G_PRIORITY_DEFAULT, client->cancellable,
                                       line_cb, client);
}

static void
sse_sent_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  SseClient *client = user_data;
  g_autoptr(GInputStream) stream = soup_session_send_finish (SOUP_SESSION (source), result,
                                                             &client->error);

  client->opened = TRUE;
  if (stream == NULL)
    return;
  client->data = g_data_input_stream_new (stream);
  g_data_input_stream_set_newline_type (client->data, G_DATA_STREAM_NEWLINE_TYPE_LF);
  read_next_line (client);
}

SseClient *
sse_open (const char *path, const char *token)
{
  SseClient *client = g_new0 (SseClient, 1);

  client->msg = new_message ("GET", path, token);
  client->cancellable = g_cancellable_new ();
  client->block = g_string_new (NULL);
  g_queue_init (&client->blocks);
  soup_session_send_async (client_session, client->msg, G_PRIORITY_DEFAULT, client->cancellable,
                           sse_sent_cb, client);
  g_assert_true (iterate_until (&client->opened));
  g_assert_no_error (client->error);
  return client;
}

/* The next complete block, waiting up to 20 s. */
char *
sse_next (SseClient *client)
{
  gboolean timed_out = FALSE;
  guint id = g_timeout_add_seconds (20, timeout_cb, &timed_out);

  while (g_queue_is_empty (&client->blocks) && !client->eof && !timed_out)
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (id);
  g_assert_no_error (client->error);
  g_assert_false (g_queue_is_empty (&client->blocks));
  return g_queue_pop_head (&client->blocks);
}

void
sse_close (SseClient *client)
{
  g_cancellable_cancel (client->cancellable);
  if (client->data != NULL) {
    /* let the cancelled read finish */
    iterate_until (&client->eof);
    g_input_stream_close (G_INPUT_STREAM (client->data), NULL, NULL);
    g_object_unref (client->data);
  }
  g_object_unref (client->msg);
  g_object_unref (client->cancellable);
  g_string_free (client->block, TRUE);
  g_queue_clear_full (&client->blocks, g_free);
  g_clear_error (&client->error);
  g_free (client);
}

/* "event: <type>\ndata: <json>" -> the data object, checking the type. */
JsonObject *
parse_event (const char *block, const char *type)
{
  g_auto(GStrv) lines = g_strsplit (block, "\n", -1);
  g_autofree char *event_line = g_strdup_printf ("event: %s", type);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  g_assert_cmpuint (g_strv_length (lines), ==, 2);
  g_assert_cmpstr (lines[0], ==, event_line);
  g_assert_true (g_str_has_prefix (lines[1], "data: "));
  json_parser_load_from_data (parser, lines[1] + 6, -1, &error);
  g_assert_no_error (error);
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

