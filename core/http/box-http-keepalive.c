/* box-http-keepalive.c: closes idle keep-alive connections (see the header).
 *
 * How libsoup 3.2 keeps a connection alive: when an answer is written, the
 * finished message's completion runs (SoupServer::request-finished), then
 * libsoup makes the next message with no completion callback and polls the
 * socket for it.  The first byte of a request emits
 * SoupServer::request-started and gives that message its completion; an
 * end of stream before that byte only fails the message, nobody
 * disconnects, and the socket leaks.
 *
 * So from request-finished on, an idle connection is watched here, through
 * the finished message (its "disconnected" says libsoup closed the
 * connection itself, and soup_server_message_steal_connection() is the one
 * public way to take the connection away from the server).  The socket
 * source runs at G_PRIORITY_HIGH, above libsoup's own source on the same
 * socket, so an end of stream is always seen here first, while the message
 * libsoup waits with still holds its I/O; readable data means a request is
 * coming and the watch is dropped.  A request that libsoup already holds in
 * its buffer (pipelining) drops the watch through request-started.
 */
#include "config.h"

#include <errno.h>
#include <sys/socket.h>

#include "box-http-keepalive.h"

typedef struct {
  BoxHttpKeepalive  *owner;
  SoupServerMessage *msg;       /* the finished request; holds the connection */
  GSocket           *socket;
  GSource           *watch;
  GSource           *timeout;
  GList             *link;      /* in owner->idle, oldest first */
  gulong             disconnected_id;
} IdleConn;

/* A message whose request head is still coming. */
typedef struct {
  BoxHttpKeepalive  *owner;
  SoupServerMessage *msg;
  GSource           *timeout;
  gulong             headers_id;
  gulong             finished_id;
  gulong             disconnected_id;
} HeadWait;

struct _BoxHttpKeepalive {
  SoupServer *soup;
  guint       idle_timeout_s;
  guint       header_timeout_s;
  GHashTable *heads;            /* SoupServerMessage* -> HeadWait* */
  guint       max_idle;
  GQueue      idle;             /* IdleConn*, oldest first */
  GHashTable *by_socket;        /* GSocket* -> IdleConn* */
  gulong      finished_id;
  gulong      started_id;
};

static void
idle_conn_free (IdleConn *conn)
{
  BoxHttpKeepalive *self = conn->owner;

  g_hash_table_remove (self->by_socket, conn->socket);
  g_queue_delete_link (&self->idle, conn->link);
  g_source_destroy (conn->watch);
  g_source_unref (conn->watch);
  if (conn->timeout != NULL) {
    g_source_destroy (conn->timeout);
    g_source_unref (conn->timeout);
  }
  g_signal_handler_disconnect (conn->msg, conn->disconnected_id);
  g_object_unref (conn->msg);
  g_object_unref (conn->socket);
  g_free (conn);
}

/* Takes the connection from libsoup and closes it. */
static void
idle_conn_close (IdleConn *conn)
{
  g_autoptr(SoupServerMessage) msg = g_object_ref (conn->msg);
  g_autoptr(GIOStream) stream = NULL;

  idle_conn_free (conn);
  stream = soup_server_message_steal_connection (msg);
  if (stream != NULL)
    g_io_stream_close (stream, NULL, NULL);
}

static gboolean
on_socket_ready (GSocket *socket, GIOCondition condition, gpointer user_data)
{
  IdleConn *conn = user_data;
  char byte;
  ssize_t n = recv (g_socket_get_fd (socket), &byte, 1, MSG_PEEK | MSG_DONTWAIT);

  if (n > 0) {
    /* a request is arriving: libsoup reads it */
    idle_conn_free (conn);
    return G_SOURCE_REMOVE;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return G_SOURCE_CONTINUE;
  /* end of stream or a reset: the client went away */
  idle_conn_close (conn);
  return G_SOURCE_REMOVE;
}

static gboolean
on_idle_timeout (gpointer user_data)
{
  IdleConn *conn = user_data;

  idle_conn_close (conn);
  return G_SOURCE_REMOVE;
}

static void
on_disconnected (SoupServerMessage *msg, gpointer user_data)
{
  /* libsoup closed the connection itself ("Connection: close", shutdown) */
  idle_conn_free (user_data);
}

static void
on_request_finished (SoupServer *soup, SoupServerMessage *msg, gpointer user_data)
{
  BoxHttpKeepalive *self = user_data;
  GSocket *socket = soup_server_message_get_socket (msg);
  IdleConn *conn;
  IdleConn *old;

  if (socket == NULL || g_socket_is_closed (socket))
    return;
  old = g_hash_table_lookup (self->by_socket, socket);
  if (old != NULL)
    idle_conn_free (old);

  conn = g_new0 (IdleConn, 1);
  conn->owner = self;
  conn->msg = g_object_ref (msg);
  conn->socket = g_object_ref (socket);
  conn->watch = g_socket_create_source (socket, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
  g_source_set_priority (conn->watch, G_PRIORITY_HIGH);
  g_source_set_callback (conn->watch, G_SOURCE_FUNC (on_socket_ready), conn, NULL);
  g_source_attach (conn->watch, g_main_context_get_thread_default ());
  if (self->idle_timeout_s > 0) {
    conn->timeout = g_timeout_source_new_seconds (self->idle_timeout_s);
    g_source_set_priority (conn->timeout, G_PRIORITY_HIGH);
    g_source_set_callback (conn->timeout, on_idle_timeout, conn, NULL);
    g_source_attach (conn->timeout, g_main_context_get_thread_default ());
  }
  conn->disconnected_id = g_signal_connect (msg, "disconnected",
                                            G_CALLBACK (on_disconnected), conn);
  g_queue_push_tail (&self->idle, conn);
  conn->link = self->idle.tail;
  g_hash_table_insert (self->by_socket, socket, conn);

  if (self->max_idle > 0 && self->idle.length > self->max_idle)
    idle_conn_close (g_queue_peek_head (&self->idle));
}

/* ---- request heads --------------------------------------------------- */

static void
head_wait_free (gpointer data)
{
  HeadWait *wait = data;

  g_source_destroy (wait->timeout);
  g_source_unref (wait->timeout);
  g_signal_handler_disconnect (wait->msg, wait->headers_id);
  g_signal_handler_disconnect (wait->msg, wait->finished_id);
  g_signal_handler_disconnect (wait->msg, wait->disconnected_id);
  g_object_unref (wait->msg);
  g_free (wait);
}

static void
on_head_done (SoupServerMessage *msg, gpointer user_data)
{
  HeadWait *wait = user_data;

  g_hash_table_remove (wait->owner->heads, msg);
}

static gboolean
on_head_timeout (gpointer user_data)
{
  HeadWait *wait = user_data;
  BoxHttpKeepalive *self = wait->owner;
  g_autoptr(SoupServerMessage) msg = g_object_ref (wait->msg);
  GSocket *socket = soup_server_message_get_socket (msg);
  IdleConn *conn;

  g_debug ("http: a request head took more than %u s; closing its connection",
           self->header_timeout_s);
  g_hash_table_remove (self->heads, msg);
  if (socket == NULL)
    return G_SOURCE_REMOVE;
  conn = g_hash_table_lookup (self->by_socket, socket);
  if (conn != NULL)
    idle_conn_free (conn);
  /* Not soup_server_message_steal_connection(): libsoup 3.2 cannot steal
   * a connection while it reads a request head (it asserts on the
   * connection's socket).  Closing the socket under it ends the read with
   * an error, after which libsoup drops the connection itself; the peer
   * sees the end of the stream at once and the descriptor is freed now. */
  g_socket_shutdown (socket, TRUE, TRUE, NULL);
  g_socket_close (socket, NULL);
  return G_SOURCE_REMOVE;
}

static void
watch_head (BoxHttpKeepalive *self, SoupServerMessage *msg)
{
  HeadWait *wait;

  if (self->header_timeout_s == 0 || g_hash_table_contains (self->heads, msg))
    return;
  wait = g_new0 (HeadWait, 1);
  wait->owner = self;
  wait->msg = g_object_ref (msg);
  wait->timeout = g_timeout_source_new_seconds (self->header_timeout_s);
  g_source_set_priority (wait->timeout, G_PRIORITY_HIGH);
  g_source_set_callback (wait->timeout, on_head_timeout, wait, NULL);
  g_source_attach (wait->timeout, g_main_context_get_thread_default ());
  wait->headers_id = g_signal_connect (msg, "got-headers", G_CALLBACK (on_head_done), wait);
  wait->finished_id = g_signal_connect (msg, "finished", G_CALLBACK (on_head_done), wait);
  /* the client went away first: nothing to wait for */
  wait->disconnected_id = g_signal_connect (msg, "disconnected", G_CALLBACK (on_head_done), wait);
  g_hash_table_insert (self->heads, msg, wait);
}

static void
on_request_started (SoupServer *soup, SoupServerMessage *msg, gpointer user_data)
{
  BoxHttpKeepalive *self = user_data;
  GSocket *socket = soup_server_message_get_socket (msg);
  IdleConn *conn = socket != NULL ? g_hash_table_lookup (self->by_socket, socket) : NULL;

  if (conn != NULL)
    idle_conn_free (conn);
  watch_head (self, msg);
}

void
box_http_keepalive_set_header_timeout (BoxHttpKeepalive *self, guint timeout_s)
{
  g_return_if_fail (self != NULL);
  self->header_timeout_s = timeout_s;
}

BoxHttpKeepalive *
box_http_keepalive_new (SoupServer *soup, guint idle_timeout_s, guint max_idle)
{
  BoxHttpKeepalive *self;

  g_return_val_if_fail (SOUP_IS_SERVER (soup), NULL);

  self = g_new0 (BoxHttpKeepalive, 1);
  self->soup = g_object_ref (soup);
  self->idle_timeout_s = idle_timeout_s;
  self->max_idle = max_idle;
  g_queue_init (&self->idle);
  self->by_socket = g_hash_table_new (NULL, NULL);
  self->heads = g_hash_table_new_full (NULL, NULL, NULL, head_wait_free);
  self->finished_id = g_signal_connect (soup, "request-finished",
                                        G_CALLBACK (on_request_finished), self);
  self->started_id = g_signal_connect (soup, "request-started",
                                       G_CALLBACK (on_request_started), self);
  return self;
}

void
box_http_keepalive_free (BoxHttpKeepalive *self)
{
  if (self == NULL)
    return;
  g_signal_handler_disconnect (self->soup, self->finished_id);
  g_signal_handler_disconnect (self->soup, self->started_id);
  while (self->idle.head != NULL)
    idle_conn_free (self->idle.head->data);
  g_hash_table_unref (self->by_socket);
  g_hash_table_unref (self->heads);
  g_object_unref (self->soup);
  g_free (self);
}

guint
box_http_keepalive_get_n_idle (BoxHttpKeepalive *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->idle.length;
}
