/* box-edge-server.c: the edge's TLS listener; see box-edge-server.h. */
#include "config.h"

#include "box-edge-server.h"

#include "box-edge-conn.h"
#include "box-error.h"

struct _BoxEdgeServer {
  GObject           parent_instance;
  BoxEngine        *engine;
  GTlsCertificate  *certificate;
  GSocketService   *service;
  GCancellable     *shutdown;
  guint             port;
};

G_DEFINE_FINAL_TYPE (BoxEdgeServer, box_edge_server, G_TYPE_OBJECT)

typedef struct {
  BoxEdgeServer *server;
  GIOStream     *tls;
  char          *peer;
  GCancellable  *cancel;
  guint          timer;
} Handshake;

static void
handshake_free (Handshake *h)
{
  if (h->timer != 0)
    g_source_remove (h->timer);
  g_object_unref (h->server);
  g_object_unref (h->tls);
  g_object_unref (h->cancel);
  g_free (h->peer);
  g_free (h);
}

static gboolean
handshake_timeout (gpointer user_data)
{
  Handshake *h = user_data;

  h->timer = 0;
  g_cancellable_cancel (h->cancel);
  return G_SOURCE_REMOVE;
}

static void
handshake_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Handshake *h = user_data;
  g_autoptr(GError) error = NULL;
  BoxConfig *config = box_engine_get_config (h->server->engine);

  if (!g_tls_connection_handshake_finish (G_TLS_CONNECTION (source), result, &error) ||
      g_cancellable_is_cancelled (h->server->shutdown)) {
    g_debug ("edge: TLS handshake with %s failed: %s", h->peer,
             error != NULL ? error->message : "shutting down");
    g_io_stream_close_async (h->tls, G_PRIORITY_DEFAULT, NULL, NULL, NULL);
  } else {
    box_edge_conn_serve (h->server->engine, h->tls, h->peer, config->http_idle_timeout_s,
                         h->server->shutdown);
  }
  handshake_free (h);
}

static gboolean
incoming (GSocketService *service, GSocketConnection *connection, GObject *source_object,
          gpointer user_data)
{
  BoxEdgeServer *self = user_data;
  static const char *const alpn[] = { "http/1.1", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocketAddress) remote = NULL;
  g_autoptr(GIOStream) tls = NULL;
  BoxConfig *config = box_engine_get_config (self->engine);
  Handshake *h;

  tls = g_tls_server_connection_new (G_IO_STREAM (connection), self->certificate, &error);
  if (tls == NULL) {
    g_warning ("edge: no TLS: %s", error->message);
    return TRUE;
  }
  g_tls_connection_set_advertised_protocols (G_TLS_CONNECTION (tls), alpn);
  h = g_new0 (Handshake, 1);
  h->server = g_object_ref (self);
  h->tls = g_steal_pointer (&tls);
  h->cancel = g_cancellable_new ();
  remote = g_socket_connection_get_remote_address (connection, NULL);
  if (G_IS_INET_SOCKET_ADDRESS (remote))
    h->peer = g_inet_address_to_string (
      g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (remote)));
  else
    h->peer = g_strdup ("unknown");
  if (config->http_header_timeout_s > 0)
    h->timer = g_timeout_add_seconds (config->http_header_timeout_s, handshake_timeout, h);
  g_tls_connection_handshake_async (G_TLS_CONNECTION (h->tls), G_PRIORITY_DEFAULT, h->cancel,
                                    handshake_done, h);
  return TRUE;
}

static void
box_edge_server_dispose (GObject *object)
{
  BoxEdgeServer *self = BOX_EDGE_SERVER (object);

  box_edge_server_shutdown (self);
  g_clear_object (&self->service);
  g_clear_object (&self->certificate);
  g_clear_object (&self->engine);
  g_clear_object (&self->shutdown);
  G_OBJECT_CLASS (box_edge_server_parent_class)->dispose (object);
}

static void
box_edge_server_class_init (BoxEdgeServerClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = box_edge_server_dispose;
}

static void
box_edge_server_init (BoxEdgeServer *self)
{
  self->shutdown = g_cancellable_new ();
}

void
box_edge_server_init_tls (void)
{
  g_setenv ("G_TLS_GNUTLS_PRIORITY", BOX_EDGE_TLS_PRIORITY, FALSE);
}

BoxEdgeServer *
box_edge_server_new (BoxEngine *engine, GTlsCertificate *certificate)
{
  BoxEdgeServer *self = g_object_new (BOX_TYPE_EDGE_SERVER, NULL);

  self->engine = g_object_ref (engine);
  self->certificate = g_object_ref (certificate);
  return self;
}

gboolean
box_edge_server_listen (BoxEdgeServer *self, const char *address, GError **error)
{
  g_autoptr(GSocketConnectable) connectable = NULL;
  g_autoptr(GInetAddress) inet = NULL;
  g_autoptr(GSocketAddress) socket_address = NULL;
  g_autoptr(GSocketAddress) effective = NULL;
  g_autoptr(GError) local_error = NULL;
  const char *host;

  g_return_val_if_fail (BOX_IS_EDGE_SERVER (self), FALSE);
  connectable = g_network_address_parse (address, 0, &local_error);
  if (connectable == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "bad edge_listen %s (want host:port): %s",
                 address, local_error->message);
    return FALSE;
  }
  host = g_network_address_get_hostname (G_NETWORK_ADDRESS (connectable));
  inet = g_ascii_strcasecmp (host, "localhost") == 0
         ? g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4) : g_inet_address_new_from_string (host);
  if (inet == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "bad edge_listen %s: the host must be an IP address or localhost", address);
    return FALSE;
  }
  socket_address = g_inet_socket_address_new (inet, g_network_address_get_port (
                                                G_NETWORK_ADDRESS (connectable)));
  self->service = g_socket_service_new ();
  if (!g_socket_listener_add_address (G_SOCKET_LISTENER (self->service), socket_address,
                                      G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL,
                                      &effective, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot listen on %s: %s", address,
                 local_error->message);
    g_clear_object (&self->service);
    return FALSE;
  }
  self->port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (effective));
  g_signal_connect (self->service, "incoming", G_CALLBACK (incoming), self);
  g_socket_service_start (self->service);
  return TRUE;
}

guint
box_edge_server_get_port (BoxEdgeServer *self)
{
  g_return_val_if_fail (BOX_IS_EDGE_SERVER (self), 0);
  return self->port;
}

void
box_edge_server_shutdown (BoxEdgeServer *self)
{
  g_return_if_fail (BOX_IS_EDGE_SERVER (self));
  if (self->service != NULL) {
    g_signal_handlers_disconnect_by_data (self->service, self);
    g_socket_service_stop (self->service);
    g_socket_listener_close (G_SOCKET_LISTENER (self->service));
  }
  g_cancellable_cancel (self->shutdown);
}
