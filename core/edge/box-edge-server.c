/* box-edge-server.c: the edge's TLS listener; see box-edge-server.h. */
#include "config.h"

#include "box-edge-server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "box-acme.h"
#include "box-edge-conn.h"
#include "box-edge-sni.h"
#include "box-error.h"

/* How often a ClientHello that came in part is peeked at again. */
#define PEEK_RETRY_MS 20
/* The bound of a connection's ClientHello and handshake when
 * http_header_timeout_s is 0. */
#define PEEK_MAX_S 30

struct _BoxEdgeServer {
  GObject           parent_instance;
  BoxEngine        *engine;
  BoxEdgeCerts     *certs;
  BoxEdgePool      *pool;     /* idle streams to sandbox ports */
  BoxAcme          *acme;     /* NULL: no ACME */
  GSocketService   *service;
  GCancellable     *shutdown;
  guint             port;
  guint             open;      /* connections from accept to their end */
  gint64            refused_logged;
};

G_DEFINE_FINAL_TYPE (BoxEdgeServer, box_edge_server, G_TYPE_OBJECT)

/* One connection from accept to the end of its handshake: first the
 * ClientHello is peeked at for its server name (the bytes stay in the
 * socket for GIO's TLS), then the handshake with that name's
 * certificate.  Both within the header timeout. */
typedef struct {
  BoxEdgeServer     *server;
  GSocketConnection *connection;
  GIOStream         *tls;
  char              *peer;
  GCancellable      *cancel;
  guint              timer;
  GSource           *readable;
  guint              retry;
  guint8            *peeked;
  char              *server_name;  /* while waiting for ACME */
  gboolean           served;   /* passed on to box_edge_conn_serve() */
} Handshake;

static void
handshake_free (Handshake *h)
{
  if (h->timer != 0)
    g_source_remove (h->timer);
  if (h->retry != 0)
    g_source_remove (h->retry);
  if (h->readable != NULL) {
    g_source_destroy (h->readable);
    g_source_unref (h->readable);
  }
  if (!h->served)
    h->server->open--;
  g_object_unref (h->server);
  g_object_unref (h->connection);
  g_clear_object (&h->tls);
  g_free (h->peeked);
  g_free (h->server_name);
  g_object_unref (h->cancel);
  g_free (h->peer);
  g_free (h);
}

static void
conn_ended (gpointer data)
{
  BoxEdgeServer *self = data;

  self->open--;
  g_object_unref (self);
}

static gboolean
handshake_timeout (gpointer user_data)
{
  Handshake *h = user_data;

  h->timer = 0;
  g_cancellable_cancel (h->cancel);
  if (h->tls == NULL) {
    /* still peeking: nothing async to wait for */
    g_debug ("edge: no ClientHello from %s in time", h->peer);
    g_io_stream_close (G_IO_STREAM (h->connection), NULL, NULL);
    handshake_free (h);
  }
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
    h->served = TRUE;
    box_edge_conn_serve (h->server->engine, h->server->pool, h->tls, h->peer,
                         config->http_idle_timeout_s, h->server->shutdown, conn_ended, g_object_ref (h->server));
  }
  handshake_free (h);
}

static void start_handshake (Handshake *h, const char *server_name);
static void wait_readable (Handshake *h);
static gboolean handshake_timeout (gpointer user_data);

static guint
header_timeout_s (BoxEdgeServer *self)
{
  BoxConfig *config = box_engine_get_config (self->engine);

  return config->http_header_timeout_s > 0 ? config->http_header_timeout_s : PEEK_MAX_S;
}

/* A first certificate for h->server_name came (or not, in time): the
 * handshake goes on with what there is, in a new header timeout. */
static void
acme_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Handshake *h = user_data;
  g_autofree char *name = g_steal_pointer (&h->server_name);

  box_acme_ensure_finish (BOX_ACME (source), result);
  if (g_cancellable_is_cancelled (h->server->shutdown)) {
    g_io_stream_close (G_IO_STREAM (h->connection), NULL, NULL);
    handshake_free (h);
    return;
  }
  h->timer = g_timeout_add_seconds (header_timeout_s (h->server), handshake_timeout, h);
  start_handshake (h, name);
}

/* A host under an own domain without its certificate: the handshake
 * waits for ACME (at most BOX_ACME_WAIT_S, the header timeout stopped
 * meanwhile) so that the first visit gets the right certificate. */
static gboolean
wait_for_acme (Handshake *h, const char *server_name)
{
  if (h->server->acme == NULL || !box_acme_wants (h->server->acme, server_name))
    return FALSE;
  if (h->timer != 0)
    g_source_remove (h->timer);
  h->timer = 0;
  h->server_name = g_strdup (server_name);
  box_acme_ensure_async (h->server->acme, server_name, BOX_ACME_WAIT_S, acme_done, h);
  return TRUE;
}

static gboolean
retry_peek (gpointer user_data)
{
  Handshake *h = user_data;

  h->retry = 0;
  wait_readable (h);
  return G_SOURCE_REMOVE;
}

/* Peeks at what the client sent so far: a whole first record gives the
 * server name; part of one is looked at again a little later (never in
 * a busy loop: the bytes stay readable). */
static gboolean
readable (GSocket *socket, GIOCondition condition, gpointer user_data)
{
  Handshake *h = user_data;
  g_autofree char *name = NULL;
  gssize n;

  g_clear_pointer (&h->readable, g_source_unref);
  if (h->peeked == NULL)
    h->peeked = g_malloc (BOX_EDGE_SNI_MAX);
  /* GLib 2.74 has no g_socket_receive_with_flags() */
  n = recv (g_socket_get_fd (socket), h->peeked, BOX_EDGE_SNI_MAX, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    wait_readable (h);
    return G_SOURCE_REMOVE;
  }
  switch (n <= 0 ? BOX_EDGE_SNI_NOT_TLS : box_edge_sni_parse (h->peeked, (gsize) n, &name)) {
  case BOX_EDGE_SNI_MORE:
    h->retry = g_timeout_add (PEEK_RETRY_MS, retry_peek, h);
    break;
  case BOX_EDGE_SNI_DONE:
    g_clear_pointer (&h->peeked, g_free);
    if (!wait_for_acme (h, name))
      start_handshake (h, name);
    break;
  case BOX_EDGE_SNI_NOT_TLS:
  default:
    g_debug ("edge: %s sent no TLS ClientHello", h->peer);
    g_io_stream_close (G_IO_STREAM (h->connection), NULL, NULL);
    handshake_free (h);
    break;
  }
  return G_SOURCE_REMOVE;
}

static void
wait_readable (Handshake *h)
{
  GSocket *socket = g_socket_connection_get_socket (h->connection);

  h->readable = g_socket_create_source (socket, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
  g_source_set_callback (h->readable, G_SOURCE_FUNC (readable), h, NULL);
  g_source_attach (h->readable, NULL);
}

static void
start_handshake (Handshake *h, const char *server_name)
{
  static const char *const alpn[] = { "http/1.1", NULL };
  g_autoptr(GTlsCertificate) certificate = box_edge_certs_lookup (h->server->certs, server_name);
  g_autoptr(GError) error = NULL;

  /* "database" set to none: without it glib-networking gives each
   * connection credentials of its own with the system's trust store
   * parsed anew, ~3.6 MiB a connection; the edge verifies no client
   * certificates, so it needs no store at all */
  h->tls = g_initable_new (g_tls_backend_get_server_connection_type (g_tls_backend_get_default ()),
                           NULL, &error, "base-io-stream", h->connection, "certificate", certificate,
                           "database", NULL, NULL);
  if (h->tls == NULL) {
    g_warning ("edge: no TLS: %s", error->message);
    g_io_stream_close (G_IO_STREAM (h->connection), NULL, NULL);
    handshake_free (h);
    return;
  }
  g_tls_connection_set_advertised_protocols (G_TLS_CONNECTION (h->tls), alpn);
  g_tls_connection_handshake_async (G_TLS_CONNECTION (h->tls), G_PRIORITY_DEFAULT, h->cancel,
                                    handshake_done, h);
}

static gboolean
incoming (GSocketService *service, GSocketConnection *connection, GObject *source_object,
          gpointer user_data)
{
  BoxEdgeServer *self = user_data;
  g_autoptr(GSocketAddress) remote = NULL;
  BoxConfig *config = box_engine_get_config (self->engine);
  Handshake *h;

  /* over the cap: closed before a byte is read, so memory stays bounded */
  if (config->edge_max_connections > 0 && self->open >= config->edge_max_connections) {
    gint64 now = g_get_monotonic_time ();

    if (now - self->refused_logged >= 60 * G_USEC_PER_SEC) {
      self->refused_logged = now;
      g_warning ("edge: %u connections open (edge_max_connections): new ones are closed",
                 self->open);
    }
    g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
    return TRUE;
  }
  self->open++;
  /* no Nagle: an answer's second write (a body after its head, the next
   * chunk) would otherwise wait for the client's delayed ACK (~40 ms) */
  g_socket_set_option (g_socket_connection_get_socket (connection), IPPROTO_TCP, TCP_NODELAY, 1,
                       NULL);
  h = g_new0 (Handshake, 1);
  h->server = g_object_ref (self);
  h->connection = g_object_ref (connection);
  h->cancel = g_cancellable_new ();
  remote = g_socket_connection_get_remote_address (connection, NULL);
  if (G_IS_INET_SOCKET_ADDRESS (remote))
    h->peer = g_inet_address_to_string (
      g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (remote)));
  else
    h->peer = g_strdup ("unknown");
  /* a ClientHello and the handshake are always bounded in time */
  h->timer = g_timeout_add_seconds (header_timeout_s (self), handshake_timeout, h);
  wait_readable (h);
  return TRUE;
}

static void
box_edge_server_dispose (GObject *object)
{
  BoxEdgeServer *self = BOX_EDGE_SERVER (object);

  box_edge_server_shutdown (self);
  g_clear_object (&self->service);
  g_clear_object (&self->certs);
  g_clear_object (&self->acme);
  g_clear_pointer (&self->pool, box_edge_pool_free);
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
box_edge_server_new (BoxEngine *engine, BoxEdgeCerts *certs)
{
  BoxEdgeServer *self = g_object_new (BOX_TYPE_EDGE_SERVER, NULL);

  self->engine = g_object_ref (engine);
  self->certs = g_object_ref (certs);
  self->pool = box_edge_pool_new (engine);
  return self;
}

void
box_edge_server_set_acme (BoxEdgeServer *self, BoxAcme *acme)
{
  g_return_if_fail (BOX_IS_EDGE_SERVER (self));
  g_set_object (&self->acme, acme);
}

GSocketAddress *
box_edge_listen_address (const char *address, const char *key, GError **error)
{
  g_autoptr(GSocketConnectable) connectable = NULL;
  g_autoptr(GInetAddress) inet = NULL;
  g_autoptr(GError) local_error = NULL;
  const char *host;

  connectable = g_network_address_parse (address, 0, &local_error);
  if (connectable == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "bad %s %s (want host:port): %s", key,
                 address, local_error->message);
    return NULL;
  }
  host = g_network_address_get_hostname (G_NETWORK_ADDRESS (connectable));
  inet = g_ascii_strcasecmp (host, "localhost") == 0
         ? g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4) : g_inet_address_new_from_string (host);
  if (inet == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "bad %s %s: the host must be an IP address or localhost", key, address);
    return NULL;
  }
  return g_inet_socket_address_new (inet, g_network_address_get_port (
                                      G_NETWORK_ADDRESS (connectable)));
}

gboolean
box_edge_server_listen (BoxEdgeServer *self, const char *address, GError **error)
{
  g_autoptr(GSocketAddress) socket_address = NULL;
  g_autoptr(GSocketAddress) effective = NULL;
  g_autoptr(GError) local_error = NULL;

  g_return_val_if_fail (BOX_IS_EDGE_SERVER (self), FALSE);
  socket_address = box_edge_listen_address (address, "edge_listen", error);
  if (socket_address == NULL)
    return FALSE;
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
box_edge_server_get_open (BoxEdgeServer *self)
{
  g_return_val_if_fail (BOX_IS_EDGE_SERVER (self), 0);
  return self->open;
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
  if (self->pool != NULL)
    box_edge_pool_shutdown (self->pool);
}
