/* box-ports.c: `box ports` and `box port-forward`.
 *
 * port-forward listens on local TCP ports; each accepted connection opens
 * GET /v1/sandboxes/{sandbox}/ports/{port}/connect (a WebSocket carrying the
 * raw TCP stream, binary frames both ways) and pumps bytes until either side
 * ends.  Memory stays bounded both ways: the local side is read only while
 * less than BOX_CLI_WS_HIGH_WATER bytes wait to be sent, and the socket is
 * read only while less than that waits for the local client.
 */
#include "config.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib/gi18n.h>
#include <glib-unix.h>

#include "box-cli.h"

#define CHUNK (64 * 1024)

/* `box ports --access`: the listeners with the access of each, then the
 * ports whose access was set that nothing listens on. */
static int
print_with_access (BoxCli *cli, const char *sandbox, JsonArray *array)
{
  const char *const header[] = { _("PORT"), _("ADDRESS"), _("PID"), _("SESSION"), _("ACCESS"),
                                 NULL };
  g_autoptr(JsonNode) settings = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxTable) table = NULL;
  g_autoptr(GHashTable) listed = g_hash_table_new (NULL, NULL);
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  JsonArray *set;

  settings = box_cli_port_settings (cli, sandbox, &error);
  if (settings == NULL)
    return box_cli_fail (cli, error);
  set = json_object_get_array_member (json_node_get_object (settings), "ports");
  table = box_table_new (header);
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "ports");
  json_builder_begin_array (builder);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonNode *element = json_array_get_element (array, i);
    JsonObject *port = JSON_NODE_HOLDS_OBJECT (element) ? json_node_get_object (element) : NULL;
    guint number = (guint) box_cli_json_int (port, "port", 0);
    const char *access = box_cli_port_access (settings, number);
    g_autofree char *shown = g_strdup_printf ("%u", number);
    g_autofree char *pid = g_strdup_printf ("%d", (int) box_cli_json_int (port, "pid", 0));

    if (port == NULL)
      continue;   /* not a listener: nothing to show */
    g_hash_table_add (listed, GUINT_TO_POINTER (number));
    box_table_add (table, shown, box_cli_json_string (port, "address") ?: "", pid,
                   box_cli_json_string (port, "session") ?: "", access, NULL);
    /* the answer is ours: the listener gets its access and goes into the list */
    json_object_set_string_member (port, "access", access);
    json_builder_add_value (builder, json_node_copy (element));
  }
  for (guint i = 0; i < json_array_get_length (set); i++) {
    JsonNode *element = json_array_get_element (set, i);
    JsonObject *setting = JSON_NODE_HOLDS_OBJECT (element) ? json_node_get_object (element) : NULL;
    guint number = (guint) box_cli_json_int (setting, "port", 0);
    g_autofree char *shown = g_strdup_printf ("%u", number);

    if (number == 0 || g_hash_table_contains (listed, GUINT_TO_POINTER (number)))
      continue;
    g_hash_table_add (listed, GUINT_TO_POINTER (number));
    box_table_add (table, shown, "", "", "", box_cli_port_access (settings, number), NULL);
    json_builder_begin_object (builder);
    json_builder_set_member_name (builder, "port");
    json_builder_add_int_value (builder, number);
    json_builder_set_member_name (builder, "access");
    json_builder_add_string_value (builder, box_cli_port_access (settings, number));
    json_builder_end_object (builder);
  }
  json_builder_end_array (builder);
  json_builder_end_object (builder);
  if (cli->json) {
    g_autoptr(JsonNode) root = json_builder_get_root (builder);

    box_cli_print_json (root);
  } else {
    box_table_print (table);
  }
  return BOX_CLI_EXIT_OK;
}

int
box_cmd_ports (BoxCli *cli, int argc, char **argv)
{
  gboolean access = FALSE;
  gboolean json = FALSE;
  const GOptionEntry entries[] = {
    { "access", 0, 0, G_OPTION_ARG_NONE, &access,
      N_("Add the access of each port (private or public), and the ports set but not "
         "listening"), NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_("Print the answer as JSON"), NULL },
    { NULL }
  };
  const char *const header[] = { _("PORT"), _("ADDRESS"), _("PID"), _("SESSION"), NULL };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(BoxTable) table = NULL;
  g_autofree char *path = NULL;
  JsonArray *array = NULL;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX"),
                      _("List the TCP ports listening in a sandbox, on every address."), 1, 1,
                      &status) ||
      !box_cli_ready (cli, &status))
    return status;
  path = box_cli_sandbox_path (argv[1], "/ports");
  /* with --access the JSON printed is the merged list, not the API's */
  cli->json = json && !access;
  array = box_cli_get_list (cli, path, NULL, "ports", _("The API's answer has no ports"), &answer, &status);
  if (array == NULL)
    return status;
  cli->json = json;
  if (access)
    return print_with_access (cli, argv[1], array);
  table = box_table_new (header);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *port = json_array_get_object_element (array, i);
    g_autofree char *number = g_strdup_printf ("%d", (int) box_cli_json_int (port, "port", 0));
    g_autofree char *pid = g_strdup_printf ("%d", (int) box_cli_json_int (port, "pid", 0));

    box_table_add (table, number, box_cli_json_string (port, "address") ?: "", pid,
                       box_cli_json_string (port, "session") ?: "", NULL);
  }
  box_table_print (table);
  return BOX_CLI_EXIT_OK;
}

/* ---- port-forward ------------------------------------------------------ */

typedef struct {
  BoxCli     *cli;
  const char *sandbox;
  GPtrArray  *services;   /* GSocketService */
  GList      *pumps;      /* Pump* */
} Forward;

typedef struct {
  GSocketService *service;
  guint           remote;
} Listener;

typedef struct {
  Forward           *forward;
  guint              remote;
  GSocketConnection *local;
  BoxCliWs          *ws;
  GCancellable      *cancellable;
  guint8             buffer[CHUNK];
  gboolean           connecting;
  gboolean           reading;
  gboolean           local_eof;
  GQueue             out;       /* GBytes for the local side */
  gsize              out_bytes;
  gboolean           ws_paused; /* the local client is behind */
  gboolean           writing;
  gboolean           ws_closed;
  gboolean           done;
  gulong             ids[2];
} Pump;

static void pump_read (Pump *pump);
static void pump_write (Pump *pump);

static void
pump_free (Pump *pump)
{
  if (pump->ws != NULL) {
    for (guint i = 0; i < G_N_ELEMENTS (pump->ids); i++) {
      if (pump->ids[i] != 0)
        g_signal_handler_disconnect (box_cli_ws_connection (pump->ws), pump->ids[i]);
    }
    box_cli_ws_set_drained (pump->ws, NULL, NULL);
  }
  g_clear_pointer (&pump->ws, box_cli_ws_free);
  g_queue_clear_full (&pump->out, (GDestroyNotify) g_bytes_unref);
  g_clear_object (&pump->local);
  g_clear_object (&pump->cancellable);
  g_free (pump);
}

/* Ends the connection once nothing is under way any more. */
static void
pump_maybe_free (Pump *pump)
{
  if (!pump->done || pump->connecting || pump->reading || pump->writing)
    return;
  pump->forward->pumps = g_list_remove (pump->forward->pumps, pump);
  pump_free (pump);
}

static void
pump_end (Pump *pump)
{
  if (!pump->done) {
    pump->done = TRUE;
    g_cancellable_cancel (pump->cancellable);
    if (pump->ws != NULL &&
        soup_websocket_connection_get_state (box_cli_ws_connection (pump->ws)) ==
        SOUP_WEBSOCKET_STATE_OPEN)
      soup_websocket_connection_close (box_cli_ws_connection (pump->ws),
                                       SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
    g_io_stream_close (G_IO_STREAM (pump->local), NULL, NULL);
  }
  pump_maybe_free (pump);
}

static void
on_local_written (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Pump *pump = user_data;
  g_autoptr(GError) error = NULL;
  GBytes *next;

  pump->writing = FALSE;
  if (!g_output_stream_write_all_finish (G_OUTPUT_STREAM (source), result, NULL, &error)) {
    pump_end (pump);
    return;
  }
  next = g_queue_pop_head (&pump->out);
  pump->out_bytes -= g_bytes_get_size (next);
  g_bytes_unref (next);
  if (pump->ws_paused && pump->out_bytes <= BOX_CLI_WS_HIGH_WATER / 2) {
    pump->ws_paused = FALSE;
    box_cli_ws_set_input_paused (pump->ws, FALSE);
  }
  pump_write (pump);
}

static void
pump_write (Pump *pump)
{
  GBytes *next;

  if (pump->writing)
    return;
  if (pump->done) {
    pump_maybe_free (pump);
    return;
  }
  next = g_queue_peek_head (&pump->out);
  if (next == NULL) {
    if (pump->ws_closed)
      pump_end (pump);   /* the sandbox's side ended and all of it was written */
    return;
  }
  pump->writing = TRUE;
  g_output_stream_write_all_async (g_io_stream_get_output_stream (G_IO_STREAM (pump->local)),
                                   g_bytes_get_data (next, NULL), g_bytes_get_size (next),
                                   G_PRIORITY_DEFAULT, pump->cancellable, on_local_written, pump);
}

static void
on_ws_message (SoupWebsocketConnection *conn, SoupWebsocketDataType type, GBytes *message,
               gpointer user_data)
{
  Pump *pump = user_data;

  if (type != SOUP_WEBSOCKET_DATA_BINARY || g_bytes_get_size (message) == 0)
    return;
  g_queue_push_tail (&pump->out, g_bytes_ref (message));
  pump->out_bytes += g_bytes_get_size (message);
  if (!pump->ws_paused && pump->out_bytes >= BOX_CLI_WS_HIGH_WATER) {
    pump->ws_paused = TRUE;
    box_cli_ws_set_input_paused (pump->ws, TRUE);
  }
  pump_write (pump);
}

static void
on_ws_closed (SoupWebsocketConnection *conn, gpointer user_data)
{
  Pump *pump = user_data;

  pump->ws_closed = TRUE;
  if (soup_websocket_connection_get_close_code (conn) == SOUP_WEBSOCKET_CLOSE_SERVER_ERROR)
    g_printerr (_("box: the connection to port %u ended: the sandbox went away.\n"), pump->remote);
  pump_write (pump);
}

static void
on_local_read (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Pump *pump = user_data;
  g_autoptr(GError) error = NULL;
  gssize n = g_input_stream_read_finish (G_INPUT_STREAM (source), result, &error);

  pump->reading = FALSE;
  if (pump->done) {
    pump_maybe_free (pump);
    return;
  }
  if (n < 0) {
    pump_end (pump);
    return;
  }
  if (n == 0) {
    /* the local client is done sending: the sandbox's side gets its end of
     * file after what went before, and its answer still comes until it
     * closes (then on_ws_closed) */
    g_autoptr(JsonNode) eof = json_from_string ("{\"type\": \"eof\"}", NULL);

    pump->local_eof = TRUE;
    box_cli_ws_send_json (pump->ws, eof);
    return;
  }
  box_cli_ws_send_raw (pump->ws, pump->buffer, (gsize) n);
  pump_read (pump);
}

static void
pump_read (Pump *pump)
{
  if (pump->reading || pump->done || pump->local_eof)
    return;
  if (box_cli_ws_pending (pump->ws) > BOX_CLI_WS_HIGH_WATER)
    return;   /* on_drained() goes on */
  pump->reading = TRUE;
  g_input_stream_read_async (g_io_stream_get_input_stream (G_IO_STREAM (pump->local)),
                             pump->buffer, sizeof pump->buffer, G_PRIORITY_DEFAULT,
                             pump->cancellable, on_local_read, pump);
}

static void
on_drained (gpointer user_data)
{
  Pump *pump = user_data;

  if (box_cli_ws_pending (pump->ws) <= BOX_CLI_WS_HIGH_WATER / 2)
    pump_read (pump);
}

static void
on_connected (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Pump *pump = user_data;
  g_autoptr(GError) error = NULL;
  SoupWebsocketConnection *conn;

  pump->connecting = FALSE;
  pump->ws = box_cli_ws_connect_finish (result, &error);
  if (pump->done) {
    pump_maybe_free (pump);
    return;
  }
  if (pump->ws == NULL) {
    if (error->domain == BOX_ERROR)
      g_printerr (_("box: port %u: %s (%s)\n"), pump->remote, error->message,
                  box_error_code_name (error->code));
    else
      g_printerr (_("box: port %u: %s\n"), pump->remote, error->message);
    pump_end (pump);
    return;
  }
  conn = box_cli_ws_connection (pump->ws);
  pump->ids[0] = g_signal_connect (conn, "message", G_CALLBACK (on_ws_message), pump);
  pump->ids[1] = g_signal_connect (conn, "closed", G_CALLBACK (on_ws_closed), pump);
  box_cli_ws_set_drained (pump->ws, on_drained, pump);
  pump_read (pump);
}

static gboolean
on_incoming (GSocketService *service, GSocketConnection *connection, GObject *source_object,
             gpointer user_data)
{
  Forward *forward = user_data;
  Listener *listener = g_object_get_data (G_OBJECT (service), "box-listener");
  Pump *pump = g_new0 (Pump, 1);
  g_autofree char *suffix = g_strdup_printf ("/ports/%u/connect", listener->remote);
  g_autofree char *path = box_cli_sandbox_path (forward->sandbox, suffix);

  pump->forward = forward;
  pump->remote = listener->remote;
  pump->local = g_object_ref (connection);
  pump->cancellable = g_cancellable_new ();
  g_queue_init (&pump->out);
  forward->pumps = g_list_prepend (forward->pumps, pump);
  g_socket_set_option (g_socket_connection_get_socket (connection), IPPROTO_TCP, TCP_NODELAY, 1,
                       NULL);
  pump->connecting = TRUE;
  box_cli_ws_connect_async (forward->cli, path, NULL, on_connected, pump);
  return TRUE;
}

/* "8080" or "9000:8080" -> local, remote */
static gboolean
parse_spec (const char *spec, guint *local, guint *remote)
{
  g_auto(GStrv) parts = g_strsplit (spec, ":", -1);
  guint64 values[2];
  guint n = g_strv_length (parts);

  if (n < 1 || n > 2)
    return FALSE;
  for (guint i = 0; i < n; i++) {
    if (!g_ascii_string_to_unsigned (parts[i], 10, 0, 65535, &values[i], NULL))
      return FALSE;
  }
  *local = (guint) values[0];
  *remote = (guint) values[n - 1];
  return *remote != 0;
}

static gboolean
on_quit (gpointer user_data)
{
  g_main_loop_quit (user_data);
  return G_SOURCE_CONTINUE;   /* both are removed once the loop ends */
}

int
box_cmd_port_forward (BoxCli *cli, int argc, char **argv)
{
  g_autofree char *address = NULL;
  const GOptionEntry entries[] = {
    { "address", 0, 0, G_OPTION_ARG_STRING, &address,
      N_("Listen on this local address (default 127.0.0.1)"), N_("ADDRESS") },
    { NULL }
  };
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr(GPtrArray) services = g_ptr_array_new_with_free_func (g_object_unref);
  g_autoptr(GInetAddress) inet = NULL;
  Forward forward = { .cli = cli, .services = services };
  guint int_id, term_id;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SANDBOX [LOCAL:]REMOTE…"),
                      _("Forward local TCP ports to ports of a sandbox until interrupted; "
                        "LOCAL 0 picks a free port."), 2, G_MAXUINT, &status))
    return status;
  forward.sandbox = argv[1];
  inet = g_inet_address_new_from_string (address != NULL ? address : "127.0.0.1");
  if (inet == NULL)
    return box_cli_usage_error (cli, "port-forward", _("--address takes an IP address."));
  for (int i = 2; i < argc; i++) {
    guint local = 0, remote = 0;

    if (!parse_spec (argv[i], &local, &remote)) {
      g_autofree char *message = g_strdup_printf (_("“%s” is not [LOCAL:]REMOTE (ports)."), argv[i]);

      return box_cli_usage_error (cli, "port-forward", message);
    }
  }
  if (!box_cli_ready (cli, &status))
    return status;

  for (int i = 2; i < argc; i++) {
    guint local = 0, remote = 0;
    g_autoptr(GSocketAddress) bind_address = NULL;
    g_autoptr(GSocketAddress) effective = NULL;
    g_autoptr(GSocketService) service = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *shown = NULL;
    Listener *listener;

    parse_spec (argv[i], &local, &remote);
    service = g_socket_service_new ();
    bind_address = g_inet_socket_address_new (inet, (guint16) local);
    if (!g_socket_listener_add_address (G_SOCKET_LISTENER (service), bind_address,
                                        G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL,
                                        &effective, &error)) {
      g_autoptr(GError) local_error = g_error_new (BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL,
                                                   _("Cannot listen on port %u: %s"), local,
                                                   error->message);

      return box_cli_fail (cli, local_error);
    }
    listener = g_new0 (Listener, 1);
    listener->remote = remote;
    g_object_set_data_full (G_OBJECT (service), "box-listener", listener, g_free);
    g_signal_connect (service, "incoming", G_CALLBACK (on_incoming), &forward);
    shown = g_socket_connectable_to_string (G_SOCKET_CONNECTABLE (effective));
    g_print (_("Forwarding %s -> %s:%u\n"), shown, forward.sandbox, remote);
    g_ptr_array_add (services, g_steal_pointer (&service));
  }
  fflush (stdout);

  int_id = g_unix_signal_add (SIGINT, on_quit, loop);
  term_id = g_unix_signal_add (SIGTERM, on_quit, loop);
  g_main_loop_run (loop);
  g_source_remove (int_id);
  g_source_remove (term_id);

  for (guint i = 0; i < services->len; i++)
    g_socket_service_stop (g_ptr_array_index (services, i));
  while (forward.pumps != NULL) {
    Pump *pump = forward.pumps->data;

    if (!pump->done)
      pump_end (pump);
    else
      g_main_context_iteration (NULL, TRUE);
  }
  return BOX_CLI_EXIT_OK;
}
