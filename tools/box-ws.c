/* box-ws.c: WebSocket connections of `box` (exec, attach, port connect).
 *
 * The upgrade is done by hand over a GSocketClient connection rather than
 * with soup_session_websocket_connect_async(): when the API refuses an
 * upgrade (no key, no such sandbox, nothing listening on a port) its answer
 * is an ordinary {error: {code, message}} body, and libsoup 3.2 does not let
 * a client read the body of a failed handshake.  Once the server switched
 * protocols, libsoup's SoupWebsocketConnection takes the stream.
 *
 * The output side of that stream counts what the socket took, so that a
 * producer (stdin, a local TCP connection) can pause while more than
 * BOX_CLI_WS_HIGH_WATER bytes wait in libsoup's queue: memory stays bounded
 * however fast the producer and however slow the network.  Its input side
 * can pause (box-pausable-input.h), so that a consumer (a local TCP client
 * of port-forward) that does not keep up stops the reading of the socket,
 * and through boxd's credit the producer in the sandbox.
 */
#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "box-cli.h"
#include "box-pausable-input.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define HEAD_MAX (64 * 1024)

/* ---- an output stream that counts what its base stream took ------------- */

#define BOX_CLI_TYPE_COUNT_STREAM (box_cli_count_stream_get_type ())
G_DECLARE_FINAL_TYPE (BoxCliCountStream, box_cli_count_stream, BOX_CLI, COUNT_STREAM,
                      GFilterOutputStream)

struct _BoxCliCountStream {
  GFilterOutputStream parent_instance;
  guint64             written;
  BoxCliWsDrained     drained;
  gpointer            drained_data;
};

static void box_cli_count_stream_pollable_init (GPollableOutputStreamInterface *iface);

G_DEFINE_TYPE_WITH_CODE (BoxCliCountStream, box_cli_count_stream, G_TYPE_FILTER_OUTPUT_STREAM,
                         G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_OUTPUT_STREAM,
                                                box_cli_count_stream_pollable_init))

static GOutputStream *
count_base (gpointer stream)
{
  return g_filter_output_stream_get_base_stream (G_FILTER_OUTPUT_STREAM (stream));
}

static void
count_add (BoxCliCountStream *self, gssize n)
{
  if (n <= 0)
    return;
  self->written += (guint64) n;
  if (self->drained != NULL)
    self->drained (self->drained_data);
}

static gssize
count_write (GOutputStream *stream, const void *buffer, gsize count, GCancellable *cancellable,
             GError **error)
{
  gssize n = g_output_stream_write (count_base (stream), buffer, count, cancellable, error);

  count_add (BOX_CLI_COUNT_STREAM (stream), n);
  return n;
}

static gboolean
count_can_poll (GPollableOutputStream *stream)
{
  GOutputStream *base = count_base (stream);

  return G_IS_POLLABLE_OUTPUT_STREAM (base) &&
         g_pollable_output_stream_can_poll (G_POLLABLE_OUTPUT_STREAM (base));
}

static gboolean
count_is_writable (GPollableOutputStream *stream)
{
  return g_pollable_output_stream_is_writable (G_POLLABLE_OUTPUT_STREAM (count_base (stream)));
}

static GSource *
count_create_source (GPollableOutputStream *stream, GCancellable *cancellable)
{
  g_autoptr(GSource) base_source =
    g_pollable_output_stream_create_source (G_POLLABLE_OUTPUT_STREAM (count_base (stream)), NULL);

  return g_pollable_source_new_full (stream, base_source, cancellable);
}

static gssize
count_write_nonblocking (GPollableOutputStream *stream, const void *buffer, gsize count,
                         GError **error)
{
  gssize n = g_pollable_output_stream_write_nonblocking (
    G_POLLABLE_OUTPUT_STREAM (count_base (stream)), buffer, count, NULL, error);

  count_add (BOX_CLI_COUNT_STREAM (stream), n);
  return n;
}

static void
box_cli_count_stream_pollable_init (GPollableOutputStreamInterface *iface)
{
  iface->can_poll = count_can_poll;
  iface->is_writable = count_is_writable;
  iface->create_source = count_create_source;
  iface->write_nonblocking = count_write_nonblocking;
}

static void
box_cli_count_stream_class_init (BoxCliCountStreamClass *klass)
{
  G_OUTPUT_STREAM_CLASS (klass)->write_fn = count_write;
}

static void
box_cli_count_stream_init (BoxCliCountStream *self)
{
}

/* ---- the connection ---------------------------------------------------- */

struct _BoxCliWs {
  GSocketConnection       *socket;
  BoxCliCountStream       *counter;
  GInputStream            *input;    /* BoxPausableInput */
  GIOStream               *io;
  SoupWebsocketConnection *conn;
  guint64                  queued;   /* bytes handed to libsoup, frame headers included */
};

void
box_cli_ws_free (BoxCliWs *ws)
{
  if (ws->counter != NULL)
    ws->counter->drained = NULL;
  g_clear_object (&ws->conn);
  g_clear_object (&ws->io);
  g_clear_object (&ws->input);
  g_clear_object (&ws->counter);
  if (ws->socket != NULL)
    g_io_stream_close (G_IO_STREAM (ws->socket), NULL, NULL);
  g_clear_object (&ws->socket);
  g_free (ws);
}

SoupWebsocketConnection *
box_cli_ws_connection (BoxCliWs *ws)
{
  return ws->conn;
}

guint64
box_cli_ws_pending (BoxCliWs *ws)
{
  return ws->queued > ws->counter->written ? ws->queued - ws->counter->written : 0;
}

void
box_cli_ws_set_input_paused (BoxCliWs *ws, gboolean paused)
{
  box_pausable_input_set_paused (BOX_PAUSABLE_INPUT (ws->input), paused);
}

void
box_cli_ws_set_drained (BoxCliWs *ws, BoxCliWsDrained func, gpointer user_data)
{
  ws->counter->drained = func;
  ws->counter->drained_data = user_data;
}

static void
count_frame (BoxCliWs *ws, gsize payload)
{
  /* a client frame: 2 bytes, the extended length, the 4-byte mask */
  ws->queued += 2 + 4 + payload + (payload > 65535 ? 8 : payload > 125 ? 2 : 0);
}

void
box_cli_ws_send (BoxCliWs *ws, guint8 tag, const guint8 *data, gsize len)
{
  g_autofree guint8 *frame = g_malloc (len + 1);

  if (soup_websocket_connection_get_state (ws->conn) != SOUP_WEBSOCKET_STATE_OPEN)
    return;
  frame[0] = tag;
  if (len > 0)
    memcpy (frame + 1, data, len);
  count_frame (ws, len + 1);
  soup_websocket_connection_send_binary (ws->conn, frame, len + 1);
}

void
box_cli_ws_send_raw (BoxCliWs *ws, const guint8 *data, gsize len)
{
  if (soup_websocket_connection_get_state (ws->conn) != SOUP_WEBSOCKET_STATE_OPEN)
    return;
  count_frame (ws, len);
  soup_websocket_connection_send_binary (ws->conn, data, len);
}

void
box_cli_ws_send_json (BoxCliWs *ws, JsonNode *node)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autofree char *text = NULL;
  gsize len = 0;

  if (soup_websocket_connection_get_state (ws->conn) != SOUP_WEBSOCKET_STATE_OPEN)
    return;
  json_generator_set_root (generator, node);
  text = json_generator_to_data (generator, &len);
  count_frame (ws, len);
  soup_websocket_connection_send_text (ws->conn, text);
}

/* ---- the handshake ----------------------------------------------------- */

/* Reads the response head byte by byte: what follows it is the server's
 * first WebSocket frames, which must stay in the stream for libsoup. */
static GString *
read_head (GInputStream *in, GError **error)
{
  g_autoptr(GString) head = g_string_new (NULL);

  while (!g_str_has_suffix (head->str, "\r\n\r\n")) {
    char c;
    gssize n = g_input_stream_read (in, &c, 1, NULL, error);

    if (n < 0)
      return NULL;
    if (n == 0 || head->len >= HEAD_MAX) {
      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_UNREACHABLE,
                   _("The connection closed before an answer"));
      return NULL;
    }
    g_string_append_c (head, c);
  }
  return g_steal_pointer (&head);
}

static gboolean
read_line (GInputStream *in, GString *line, GError **error)
{
  g_string_truncate (line, 0);
  while (!g_str_has_suffix (line->str, "\r\n")) {
    char c;
    gssize n = g_input_stream_read (in, &c, 1, NULL, error);

    if (n <= 0 || line->len > 1024)
      return FALSE;
    g_string_append_c (line, c);
  }
  g_string_truncate (line, line->len - 2);
  return TRUE;
}

/* The body of a refused upgrade: Content-Length, chunked, or to EOF. */
static GBytes *
read_error_body (GInputStream *in, SoupMessageHeaders *headers)
{
  g_autoptr(GByteArray) body = g_byte_array_new ();
  guint8 buffer[4096];

  if (soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CHUNKED) {
    g_autoptr(GString) line = g_string_new (NULL);

    while (body->len < BOX_CLI_ERROR_BODY_MAX && read_line (in, line, NULL)) {
      guint64 size = g_ascii_strtoull (line->str, NULL, 16);

      if (size == 0 || size > BOX_CLI_ERROR_BODY_MAX)
        break;
      while (size > 0) {
        gssize n = g_input_stream_read (in, buffer, MIN (size, sizeof buffer), NULL, NULL);

        if (n <= 0)
          return g_byte_array_free_to_bytes (g_steal_pointer (&body));
        g_byte_array_append (body, buffer, (guint) n);
        size -= (guint64) n;
      }
      read_line (in, line, NULL);
    }
  } else {
    goffset left = soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CONTENT_LENGTH
      ? soup_message_headers_get_content_length (headers) : BOX_CLI_ERROR_BODY_MAX;

    while (left > 0 && body->len < BOX_CLI_ERROR_BODY_MAX) {
      gssize n = g_input_stream_read (in, buffer, (gsize) MIN (left, (goffset) sizeof buffer),
                                      NULL, NULL);

      if (n <= 0)
        break;
      g_byte_array_append (body, buffer, (guint) n);
      left -= n;
    }
  }
  return g_byte_array_free_to_bytes (g_steal_pointer (&body));
}

static char *
accept_for (const char *key)
{
  g_autoptr(GChecksum) sha1 = g_checksum_new (G_CHECKSUM_SHA1);
  guint8 digest[20];
  gsize len = sizeof digest;

  g_checksum_update (sha1, (const guchar *) key, -1);
  g_checksum_update (sha1, (const guchar *) WS_GUID, -1);
  g_checksum_get_digest (sha1, digest, &len);
  return g_base64_encode (digest, len);
}

static char *
random_key (void)
{
  guint8 bytes[16];

  for (guint i = 0; i < sizeof bytes; i++)
    bytes[i] = (guint8) g_random_int_range (0, 256);
  return g_base64_encode (bytes, sizeof bytes);
}

/* The upgrade, blocking (run in a thread by box_cli_ws_connect_async()):
 * the connection once the server switched protocols. */
static GSocketConnection *
handshake (const char *url, const char *api_key, GError **error)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_ENCODED, error);
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnectable) address = NULL;
  g_autoptr(GSocketConnection) socket = NULL;
  g_autoptr(GString) request = g_string_new (NULL);
  g_autoptr(GString) head = NULL;
  g_autoptr(SoupMessageHeaders) headers = NULL;
  g_autoptr(GError) local_error = NULL;
  g_autofree char *key = random_key ();
  g_autofree char *expected = accept_for (key);
  g_autofree char *reason = NULL;
  g_autofree char *host_header = NULL;
  gboolean https;
  const char *host;
  int port;
  guint status = 0;
  const char *accept;

  if (uri == NULL)
    return NULL;
  https = g_strcmp0 (g_uri_get_scheme (uri), "https") == 0;
  host = g_uri_get_host (uri);
  port = g_uri_get_port (uri) > 0 ? g_uri_get_port (uri) : (https ? 443 : 80);
  host_header = strchr (host, ':') != NULL ? g_strdup_printf ("[%s]:%d", host, port)
                                           : g_strdup_printf ("%s:%d", host, port);

  g_socket_client_set_tls (client, https);
  address = g_network_address_new (host, (guint16) port);
  socket = g_socket_client_connect (client, address, NULL, &local_error);
  if (socket == NULL) {
    g_propagate_error (error, box_cli_error_network (url, local_error));
    return NULL;
  }

  g_string_append_printf (request, "GET %s%s%s HTTP/1.1\r\n", g_uri_get_path (uri),
                          g_uri_get_query (uri) != NULL ? "?" : "",
                          g_uri_get_query (uri) != NULL ? g_uri_get_query (uri) : "");
  g_string_append_printf (request, "Host: %s\r\n", host_header);
  g_string_append (request, "Upgrade: websocket\r\nConnection: Upgrade\r\n");
  g_string_append_printf (request, "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n", key);
  g_string_append_printf (request, "Authorization: Bearer %s\r\n", api_key);
  g_string_append (request, "User-Agent: box/" PACKAGE_VERSION "\r\n\r\n");
  if (!g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (socket)),
                                  request->str, request->len, NULL, NULL, &local_error)) {
    g_propagate_error (error, box_cli_error_network (url, local_error));
    return NULL;
  }

  head = read_head (g_io_stream_get_input_stream (G_IO_STREAM (socket)), &local_error);
  if (head == NULL) {
    g_propagate_error (error, box_cli_error_network (url, local_error));
    return NULL;
  }
  headers = soup_message_headers_new (SOUP_MESSAGE_HEADERS_RESPONSE);
  if (!soup_headers_parse_response (head->str, (int) head->len, headers, NULL, &status, &reason)) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                 _("The API's answer to a WebSocket request is not HTTP"));
    return NULL;
  }
  if (status != SOUP_STATUS_SWITCHING_PROTOCOLS) {
    g_autoptr(GBytes) body = read_error_body (g_io_stream_get_input_stream (G_IO_STREAM (socket)),
                                              headers);

    g_propagate_error (error, box_cli_error_from_answer (status, reason, body));
    return NULL;
  }
  accept = soup_message_headers_get_one (headers, "Sec-WebSocket-Accept");
  if (!soup_message_headers_header_equals (headers, "Upgrade", "websocket") ||
      g_strcmp0 (accept, expected) != 0) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                 _("The API's WebSocket handshake is not valid"));
    return NULL;
  }
  return g_steal_pointer (&socket);
}

/* On the main thread: libsoup's connection attaches its sources here. */
static BoxCliWs *
wrap (GSocketConnection *socket, const char *url)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_ENCODED, NULL);
  BoxCliWs *ws = g_new0 (BoxCliWs, 1);

  ws->socket = g_object_ref (socket);
  ws->counter = g_object_new (BOX_CLI_TYPE_COUNT_STREAM,
                              "base-stream", g_io_stream_get_output_stream (G_IO_STREAM (socket)),
                              "close-base-stream", FALSE, NULL);
  ws->input = box_pausable_input_new (g_io_stream_get_input_stream (G_IO_STREAM (socket)));
  ws->io = g_simple_io_stream_new (ws->input, G_OUTPUT_STREAM (ws->counter));
  ws->conn = soup_websocket_connection_new (ws->io, uri, SOUP_WEBSOCKET_CONNECTION_CLIENT,
                                            NULL, NULL, NULL);
  /* frames as large as the server sends them; pings keep idle sessions open */
  soup_websocket_connection_set_max_incoming_payload_size (ws->conn, 0);
  soup_websocket_connection_set_keepalive_interval (ws->conn, 30);
  return ws;
}

BoxCliWs *
box_cli_ws_connect (BoxCli *cli, const char *path, const char *query, GError **error)
{
  g_autofree char *url = box_cli_url (cli, path, query);
  g_autoptr(GSocketConnection) socket = handshake (url, cli->key, error);

  if (socket == NULL)
    return NULL;
  return wrap (socket, url);
}

typedef struct {
  char *url;
  char *key;
} Connect;

static void
connect_free (Connect *connect)
{
  g_free (connect->url);
  g_free (connect->key);
  g_free (connect);
}

static void
connect_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Connect *connect = task_data;
  GError *error = NULL;
  GSocketConnection *socket = handshake (connect->url, connect->key, &error);

  if (socket == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, socket, g_object_unref);
}

void
box_cli_ws_connect_async (BoxCli *cli, const char *path, const char *query,
                          GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, NULL, callback, user_data);
  Connect *connect = g_new0 (Connect, 1);

  connect->url = box_cli_url (cli, path, query);
  connect->key = g_strdup (cli->key);
  g_task_set_source_tag (task, box_cli_ws_connect_async);
  g_task_set_task_data (task, connect, (GDestroyNotify) connect_free);
  g_task_run_in_thread (task, connect_thread);
}

BoxCliWs *
box_cli_ws_connect_finish (GAsyncResult *result, GError **error)
{
  Connect *connect = g_task_get_task_data (G_TASK (result));
  g_autoptr(GSocketConnection) socket = g_task_propagate_pointer (G_TASK (result), error);

  if (socket == NULL)
    return NULL;
  return wrap (socket, connect->url);
}
