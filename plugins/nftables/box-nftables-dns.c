/* box-nftables-dns.c: the sandboxes' resolver: sockets, the relay for
 * unrestricted sandboxes and the upstream queries of the filtering
 * resolver (box-nftables-dns-policy.c); see box-nftables-dns.h.
 *
 * UDP: each query gets its own upstream socket (a fresh source port, so a
 * forged answer must guess it), a 2 s timer per attempt, up to
 * MAX(2, n_upstreams) attempts over the upstreams in turn, then SERVFAIL.
 * At most BOX_DNS_MAX_PENDING queries are in flight, and each sandbox at
 * most its share of them (BOX_DNS_MAX_PENDING divided by the number of
 * sandboxes, at least one); more are dropped (the client retries), so one
 * sandbox flooding the resolver cannot crowd the others out.
 * TCP: each connection is served by a small thread pool with blocking
 * sockets (10 s timeouts), relaying length-prefixed messages over one
 * upstream TCP connection; each sandbox holds at most its share of the
 * pool's threads (BOX_DNS_TCP_THREADS divided by the number of sandboxes,
 * at least one) and further connections of its own are closed.
 * Answers (checked by box-nftables-dns-message.c): an answer that carries an internal address (an A or AAAA record
 * in the built-in private, loopback, link-local, shared, multicast or
 * reserved ranges, or in the configured blocked networks) is not forwarded:
 * the sandbox gets REFUSED instead, so no name can point a sandbox at the
 * node's internal network (DNS rebinding, split-horizon names).
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "box-error.h"
#include "box-nftables-dns-private.h"

/* ---- who may ask ---- */

/* Whether @client is a sandbox we answer; *address is its address (host
 * byte order) and *n_clients the number of sandboxes, for their shares. */
static gboolean
client_allowed (BoxNftablesDns *dns, GSocketAddress *client, guint32 *address, guint *n_clients)
{
  g_autoptr(GMutexLocker) locker = NULL;
  GInetAddress *inet;
  guint32 addr;

  if (!G_IS_INET_SOCKET_ADDRESS (client))
    return FALSE;
  inet = g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (client));
  if (g_inet_address_get_family (inet) != G_SOCKET_FAMILY_IPV4)
    return FALSE;
  memcpy (&addr, g_inet_address_to_bytes (inet), 4);
  *address = g_ntohl (addr);
  locker = g_mutex_locker_new (&dns->lock);
  *n_clients = MAX (1, g_hash_table_size (dns->allowed));
  return g_hash_table_contains (dns->allowed, GUINT_TO_POINTER (*address)) ||
         (dns->egress != NULL && box_nftables_egress_lookup (dns->egress, *address, NULL, NULL));
}

/* An answer the sandbox may see: @answer itself, or REFUSED when it
 * carries an internal address (or cannot be read).  NULL: send nothing. */
static GBytes *
filter_answer (BoxNftablesDns *dns, const guint8 *query, gsize query_len,
               const guint8 *answer, gsize len)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&dns->lock);

  if (box_nftables_dns_answer_is_public (answer, len, (const char *const *) dns->blocked))
    return g_bytes_new (answer, len);
  g_debug ("dns: an answer with an internal address (or unreadable) was refused");
  return box_nftables_dns_refused (query, query_len);
}

void
box_nftables_dns_set_blocked (BoxNftablesDns *dns, const char *const *cidrs)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&dns->lock);

  g_strfreev (dns->blocked);
  dns->blocked = g_strdupv ((char **) cidrs);
}

void
box_nftables_dns_set_egress (BoxNftablesDns *dns, BoxNftablesEgress *egress)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&dns->lock);

  dns->egress = egress;
}

void
box_nftables_dns_allow (BoxNftablesDns *dns, guint32 address)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&dns->lock);

  g_hash_table_add (dns->allowed, GUINT_TO_POINTER (address));
}

void
box_nftables_dns_forget (BoxNftablesDns *dns, guint32 address)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&dns->lock);

  g_hash_table_remove (dns->allowed, GUINT_TO_POINTER (address));
}

/* ---- per-sandbox counts (address -> count, absent = 0) ---- */

guint
box_dns_count_of (GHashTable *counts, guint32 address)
{
  return GPOINTER_TO_UINT (g_hash_table_lookup (counts, GUINT_TO_POINTER (address)));
}

void
box_dns_count_set (GHashTable *counts, guint32 address, guint n)
{
  if (n > 0)
    g_hash_table_insert (counts, GUINT_TO_POINTER (address), GUINT_TO_POINTER (n));
  else
    g_hash_table_remove (counts, GUINT_TO_POINTER (address));
}

/* ---- UDP ---- */

static void
query_free (BoxDnsQuery *q)
{
  if (q->done != NULL) {   /* a lookup never answered (shutdown): SERVFAIL */
    BoxNftablesDnsResult failed = { .rcode = 2 };
    BoxDnsLookupDone done = g_steal_pointer (&q->done);

    done (q->dns, &failed, q->done_data);
  }
  box_dns_count_set (q->dns->pending_by_client, q->client_addr,
                     box_dns_count_of (q->dns->pending_by_client, q->client_addr) - 1);
  if (q->read_source != NULL) {
    g_source_destroy (q->read_source);
    g_source_unref (q->read_source);
  }
  if (q->timer != NULL) {
    g_source_destroy (q->timer);
    g_source_unref (q->timer);
  }
  if (q->sock != NULL)
    g_socket_close (q->sock, NULL);
  g_clear_object (&q->sock);
  g_clear_object (&q->client);
  g_clear_pointer (&q->query, g_bytes_unref);
  g_free (q->name);
  g_free (q);
}

static void
query_finish (BoxDnsQuery *q, const guint8 *answer, gsize len)
{
  if (q->name != NULL) {   /* a lookup: @answer is the upstream's (NULL: all failed) */
    BoxNftablesDnsResult result = { .rcode = 2 };
    BoxDnsLookupDone done = g_steal_pointer (&q->done);

    if (answer != NULL)
      box_dns_lookup_complete (q->dns, q->name, answer, len, &result);
    done (q->dns, &result, q->done_data);
  } else if (answer != NULL)
    g_socket_send_to (q->dns->udp, q->client, (const char *) answer, len, NULL, NULL);
  g_hash_table_remove (q->dns->pending, q);   /* frees q */
}

static gboolean query_send (BoxDnsQuery *q);

static gboolean
query_readable_cb (GSocket *sock, GIOCondition condition, gpointer user_data)
{
  BoxDnsQuery *q = user_data;
  g_autofree guint8 *buf = g_malloc (BOX_DNS_MAX_MESSAGE);
  const guint8 *query = g_bytes_get_data (q->query, NULL);
  gssize n;

  n = g_socket_receive (sock, (char *) buf, BOX_DNS_MAX_MESSAGE, NULL, NULL);
  if (n < 0) {
    /* e.g. ICMP port unreachable from a dead upstream: try the next one
     * (query_send destroys this source) */
    query_send (q);
    return G_SOURCE_REMOVE;
  }
  if (n < 12 || buf[0] != query[0] || buf[1] != query[1] || (buf[2] & 0x80) == 0)
    return G_SOURCE_CONTINUE;   /* not the answer to this query */
  if (q->name != NULL) {
    BoxNftablesDnsResult check;

    if (!box_nftables_dns_read_answer (buf, (gsize) n, q->name, &check))
      return G_SOURCE_CONTINUE;   /* not the answer to our question */
    query_finish (q, buf, (gsize) n);
    return G_SOURCE_REMOVE;
  }
  {
    g_autoptr(GBytes) answer = filter_answer (q->dns, query, g_bytes_get_size (q->query),
                                              buf, (gsize) n);

    query_finish (q, answer != NULL ? g_bytes_get_data (answer, NULL) : NULL,
                  answer != NULL ? g_bytes_get_size (answer) : 0);
  }
  return G_SOURCE_REMOVE;
}

static gboolean
query_timeout_cb (gpointer user_data)
{
  BoxDnsQuery *q = user_data;

  query_send (q);
  return G_SOURCE_REMOVE;
}

/* Sends attempt number q->attempt, or answers SERVFAIL when all are used.
 * FALSE when @q is gone. */
static gboolean
query_send (BoxDnsQuery *q)
{
  while (q->attempt < q->max_attempts) {
    g_autoptr(GSocketAddress) upstream = NULL;
    g_autoptr(GSocket) sock = NULL;
    guint n_upstreams;
    gsize len;
    const char *data = g_bytes_get_data (q->query, &len);

    upstream = box_dns_get_upstream (q->dns, q->attempt, &n_upstreams);
    q->max_attempts = MAX (2, n_upstreams);
    q->attempt++;
    if (q->read_source != NULL) {
      g_source_destroy (q->read_source);
      g_clear_pointer (&q->read_source, g_source_unref);
    }
    if (q->timer != NULL) {
      g_source_destroy (q->timer);
      g_clear_pointer (&q->timer, g_source_unref);
    }
    if (q->sock != NULL)
      g_socket_close (q->sock, NULL);
    g_clear_object (&q->sock);

    sock = g_socket_new (g_socket_address_get_family (upstream), G_SOCKET_TYPE_DATAGRAM,
                         G_SOCKET_PROTOCOL_UDP, NULL);
    if (sock == NULL || !g_socket_connect (sock, upstream, NULL, NULL) ||
        g_socket_send (sock, data, len, NULL, NULL) < 0)
      continue;
    q->sock = g_steal_pointer (&sock);
    q->read_source = g_socket_create_source (q->sock, G_IO_IN, NULL);
    g_source_set_callback (q->read_source, G_SOURCE_FUNC (query_readable_cb), q, NULL);
    g_source_attach (q->read_source, q->dns->context);
    q->timer = g_timeout_source_new (BOX_DNS_ATTEMPT_MS);
    g_source_set_callback (q->timer, query_timeout_cb, q, NULL);
    g_source_attach (q->timer, q->dns->context);
    return TRUE;
  }
  if (q->name != NULL) {
    query_finish (q, NULL, 0);
    return FALSE;
  }
  {
    gsize len;
    const guint8 *data = g_bytes_get_data (q->query, &len);
    g_autoptr(GBytes) servfail = box_nftables_dns_servfail (data, len);

    query_finish (q, servfail != NULL ? g_bytes_get_data (servfail, NULL) : NULL,
                  servfail != NULL ? g_bytes_get_size (servfail) : 0);
  }
  return FALSE;
}

typedef struct {
  BoxNftablesDns *dns;
  GSocketAddress *client;
} UdpReply;

/* Called on the resolver's thread or the reporter's (a restricted answer
 * waits there for its report): GSocket is not thread-safe, so this sends
 * with sendto(2) on the descriptor, which is (a datagram goes whole), and
 * touches none of the GSocket's state.  The socket outlives the reporter
 * (box_nftables_dns_free() stops it first). */
static void
udp_reply (GBytes *answer, gpointer data)
{
  UdpReply *reply = data;
  struct sockaddr_storage to;

  if (answer != NULL &&
      g_socket_address_to_native (reply->client, &to, sizeof to, NULL) &&
      sendto (g_socket_get_fd (reply->dns->udp), g_bytes_get_data (answer, NULL),
              g_bytes_get_size (answer), MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *) &to,
              g_socket_address_get_native_size (reply->client)) < 0)
    g_debug ("nftables: a DNS answer was not sent: %s", g_strerror (errno));
  g_object_unref (reply->client);
  g_free (reply);
}

gboolean
box_dns_lookup_send (BoxNftablesDns *dns, guint32 client_addr, const char *name,
                     BoxDnsLookupDone done, gpointer done_data)
{
  guint n_clients, share, in_flight;
  BoxDnsQuery *q;
  guint16 id;
  GBytes *query;

  g_mutex_lock (&dns->lock);
  n_clients = MAX (1, g_hash_table_size (dns->allowed));
  g_mutex_unlock (&dns->lock);
  share = MAX (1, BOX_DNS_MAX_PENDING / n_clients);
  in_flight = box_dns_count_of (dns->pending_by_client, client_addr);
  if (g_hash_table_size (dns->pending) >= BOX_DNS_MAX_PENDING || in_flight >= share)
    return FALSE;
  query = box_nftables_dns_build_query (name, &id);
  if (query == NULL)
    return FALSE;
  box_dns_count_set (dns->pending_by_client, client_addr, in_flight + 1);
  q = g_new0 (BoxDnsQuery, 1);
  q->dns = dns;
  q->client_addr = client_addr;
  q->query = query;
  q->max_attempts = 2;
  q->name = g_strdup (name);
  q->done = done;
  q->done_data = done_data;
  g_hash_table_add (dns->pending, q);
  query_send (q);
  return TRUE;
}

static gboolean
udp_readable_cb (GSocket *sock, GIOCondition condition, gpointer user_data)
{
  BoxNftablesDns *dns = user_data;
  g_autofree guint8 *buf = g_malloc (BOX_DNS_MAX_MESSAGE);

  for (;;) {
    g_autoptr(GSocketAddress) client = NULL;
    g_autoptr(GError) error = NULL;
    BoxDnsQuery *q;
    guint32 address = 0;
    guint n_clients = 1, share, in_flight;
    gssize n;

    n = g_socket_receive_from (sock, &client, (char *) buf, BOX_DNS_MAX_MESSAGE, NULL, &error);
    if (n < 0) {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
        break;
      g_debug ("dns: receive: %s", error->message);
      break;
    }
    /* from a sandbox we know */
    if (client == NULL || !client_allowed (dns, client, &address, &n_clients))
      continue;
    /* the whole bound, and this sandbox's share of it */
    share = MAX (1, BOX_DNS_MAX_PENDING / n_clients);
    in_flight = box_dns_count_of (dns->pending_by_client, address);
    if (g_hash_table_size (dns->pending) >= BOX_DNS_MAX_PENDING || in_flight >= share)
      continue;
    {
      g_autoptr(BoxEgressPolicy) policy = box_dns_restricted_policy (dns, address);

      if (policy != NULL) {   /* the filtering resolver reads it (libldns) */
        UdpReply *reply = g_new0 (UdpReply, 1);

        reply->dns = dns;
        reply->client = g_steal_pointer (&client);
        box_dns_restricted_query (dns, address, policy, buf, (gsize) n, udp_reply, reply);
        continue;
      }
    }
    /* relayed: a query (QR clear) with a sane question */
    if (box_nftables_dns_question_end (buf, (gsize) n) < 0 || (buf[2] & 0x80) != 0)
      continue;
    box_dns_count_set (dns->pending_by_client, address, in_flight + 1);
    q = g_new0 (BoxDnsQuery, 1);
    q->dns = dns;
    q->client_addr = address;
    q->client = g_steal_pointer (&client);
    q->query = g_bytes_new (buf, (gsize) n);
    q->max_attempts = 2;
    g_hash_table_add (dns->pending, q);
    query_send (q);
  }
  return G_SOURCE_CONTINUE;
}

/* ---- TCP ---- */

static gboolean
read_message (GInputStream *in, guint8 *buf, gsize *len, GCancellable *cancellable,
              GError **error)
{
  guint8 prefix[2];
  gsize got = 0;

  if (!g_input_stream_read_all (in, prefix, 2, &got, cancellable, error))
    return FALSE;
  if (got != 2) {
    *len = 0;   /* end of stream */
    return TRUE;
  }
  *len = ((gsize) prefix[0] << 8) | prefix[1];
  if (*len < 12) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "short DNS message");
    return FALSE;
  }
  if (!g_input_stream_read_all (in, buf, *len, &got, cancellable, error))
    return FALSE;
  if (got != *len) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT, "truncated DNS message");
    return FALSE;
  }
  return TRUE;
}

static gboolean
write_message (GOutputStream *out, const guint8 *buf, gsize len, GCancellable *cancellable,
               GError **error)
{
  guint8 prefix[2] = { (guint8) (len >> 8), (guint8) (len & 0xff) };

  return g_output_stream_write_all (out, prefix, 2, NULL, cancellable, error) &&
         g_output_stream_write_all (out, buf, len, NULL, cancellable, error);
}

typedef struct {
  BoxNftablesDns *dns;
  GSocket        *sock;
  guint32         address;   /* the sandbox's, host byte order */
} BoxDnsTcpClient;

/* Gives the sandbox's TCP slot back. */
static void
tcp_client_free (BoxDnsTcpClient *c)
{
  g_mutex_lock (&c->dns->lock);
  box_dns_count_set (c->dns->tcp_by_client, c->address,
                     box_dns_count_of (c->dns->tcp_by_client, c->address) - 1);
  g_mutex_unlock (&c->dns->lock);
  g_socket_close (c->sock, NULL);
  g_object_unref (c->sock);
  g_free (c);
}

/* Takes a TCP slot of the sandbox at @address when it has one left. */
static gboolean
tcp_take_slot (BoxNftablesDns *dns, guint32 address, guint n_clients)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&dns->lock);
  guint n = box_dns_count_of (dns->tcp_by_client, address);

  if (n >= MAX (1, BOX_DNS_TCP_THREADS / n_clients))
    return FALSE;
  box_dns_count_set (dns->tcp_by_client, address, n + 1);
  return TRUE;
}

static void
tcp_serve (gpointer data, gpointer user_data)
{
  BoxDnsTcpClient *client = data;
  GSocket *sock = client->sock;
  BoxNftablesDns *dns = user_data;
  g_autoptr(GSocketConnection) conn = NULL;
  g_autoptr(GSocketConnection) upstream = NULL;
  g_autoptr(GSocketClient) connector = g_socket_client_new ();
  g_autofree guint8 *buf = g_malloc (BOX_DNS_MAX_MESSAGE);
  g_autofree guint8 *query = g_malloc (BOX_DNS_MAX_MESSAGE);
  g_autoptr(GError) error = NULL;

  g_socket_set_blocking (sock, TRUE);
  g_socket_set_timeout (sock, BOX_DNS_TCP_TIMEOUT_S);
  conn = g_socket_connection_factory_create_connection (sock);
  g_socket_client_set_timeout (connector, BOX_DNS_TCP_TIMEOUT_S);

  for (;;) {
    gsize len = 0;

    if (!read_message (g_io_stream_get_input_stream (G_IO_STREAM (conn)), buf, &len,
                       dns->cancellable, &error) || len == 0)
      break;
    {
      g_autoptr(BoxEgressPolicy) policy = box_dns_restricted_policy (dns, client->address);

      if (policy != NULL) {
        g_autoptr(GBytes) answer = box_dns_restricted_query_sync (dns, client->address, policy,
                                                                  buf, len);
        if (answer == NULL ||
            !write_message (g_io_stream_get_output_stream (G_IO_STREAM (conn)),
                            g_bytes_get_data (answer, NULL), g_bytes_get_size (answer),
                            dns->cancellable, &error))
          break;
        continue;
      }
    }
    if (box_nftables_dns_question_end (buf, len) < 0 || (buf[2] & 0x80) != 0)
      break;
    if (upstream == NULL) {
      g_autoptr(GSocketAddress) addr = NULL;
      guint n_upstreams;

      addr = box_dns_get_upstream (dns, 0, &n_upstreams);
      upstream = g_socket_client_connect (connector, G_SOCKET_CONNECTABLE (addr),
                                          dns->cancellable, &error);
      if (upstream == NULL) {
        g_autoptr(GBytes) servfail = box_nftables_dns_servfail (buf, len);
        if (servfail != NULL)
          write_message (g_io_stream_get_output_stream (G_IO_STREAM (conn)),
                         g_bytes_get_data (servfail, NULL), g_bytes_get_size (servfail),
                         dns->cancellable, NULL);
        break;
      }
      g_socket_set_timeout (g_socket_connection_get_socket (upstream), BOX_DNS_TCP_TIMEOUT_S);
    }
    {
      g_autoptr(GBytes) answer = NULL;
      gsize query_len = len;

      memcpy (query, buf, len);
      if (!write_message (g_io_stream_get_output_stream (G_IO_STREAM (upstream)), buf, len,
                          dns->cancellable, &error) ||
          !read_message (g_io_stream_get_input_stream (G_IO_STREAM (upstream)), buf, &len,
                         dns->cancellable, &error) || len == 0)
        break;
      answer = filter_answer (dns, query, query_len, buf, len);
      if (answer == NULL ||
          !write_message (g_io_stream_get_output_stream (G_IO_STREAM (conn)),
                          g_bytes_get_data (answer, NULL), g_bytes_get_size (answer),
                          dns->cancellable, &error))
        break;
    }
  }
  if (error != NULL)
    g_debug ("dns: tcp: %s", error->message);
  g_io_stream_close (G_IO_STREAM (conn), NULL, NULL);
  if (upstream != NULL)
    g_io_stream_close (G_IO_STREAM (upstream), NULL, NULL);
  g_clear_object (&conn);
  tcp_client_free (client);
}

static gboolean
tcp_acceptable_cb (GSocket *sock, GIOCondition condition, gpointer user_data)
{
  BoxNftablesDns *dns = user_data;

  for (;;) {
    g_autoptr(GSocket) client = g_socket_accept (sock, NULL, NULL);
    g_autoptr(GSocketAddress) remote = NULL;
    BoxDnsTcpClient *item;
    guint32 address = 0;
    guint n_clients = 1;

    if (client == NULL)
      break;
    remote = g_socket_get_remote_address (client, NULL);
    if (remote == NULL || !client_allowed (dns, remote, &address, &n_clients) ||
        g_thread_pool_unprocessed (dns->tcp_pool) >= BOX_DNS_TCP_BACKLOG ||
        !tcp_take_slot (dns, address, n_clients)) {
      g_socket_close (client, NULL);
      continue;
    }
    item = g_new0 (BoxDnsTcpClient, 1);
    item->dns = dns;
    item->sock = g_steal_pointer (&client);
    item->address = address;
    g_thread_pool_push (dns->tcp_pool, item, NULL);
  }
  return G_SOURCE_CONTINUE;
}

/* ---- life cycle ---- */

static gpointer
dns_thread (gpointer user_data)
{
  BoxNftablesDns *dns = user_data;

  g_main_context_push_thread_default (dns->context);
  g_main_loop_run (dns->loop);
  g_main_context_pop_thread_default (dns->context);
  return NULL;
}

static GSocket *
bind_socket (GSocketType type, guint16 port, GError **error)
{
  g_autoptr(GInetAddress) any = g_inet_address_new_any (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) addr = g_inet_socket_address_new (any, port);
  g_autoptr(GSocket) sock = NULL;
  g_autoptr(GError) local_error = NULL;
  gboolean tcp = type == G_SOCKET_TYPE_STREAM;

  sock = g_socket_new (G_SOCKET_FAMILY_IPV4, type,
                       tcp ? G_SOCKET_PROTOCOL_TCP : G_SOCKET_PROTOCOL_UDP, &local_error);
  /* no address reuse for UDP: GLib would add SO_REUSEPORT, and a second
   * resolver on the port must fail, not share the queries */
  if (sock == NULL || !g_socket_bind (sock, addr, tcp, &local_error) ||
      (tcp && !g_socket_listen (sock, &local_error))) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "the sandboxes' resolver cannot listen on %s port %u: %s",
                 tcp ? "TCP" : "UDP", port, local_error->message);
    return NULL;
  }
  g_socket_set_blocking (sock, FALSE);
  return g_steal_pointer (&sock);
}

BoxNftablesDns *
box_nftables_dns_new (guint16 port, const char *const *upstreams, const char *resolv_conf,
                      GError **error)
{
  g_autoptr(BoxNftablesDns) dns = g_new0 (BoxNftablesDns, 1);
  GSource *source;

  g_mutex_init (&dns->lock);
  dns->allowed = g_hash_table_new (NULL, NULL);
  dns->tcp_by_client = g_hash_table_new (NULL, NULL);
  dns->pending = g_hash_table_new_full (NULL, NULL, (GDestroyNotify) query_free, NULL);
  dns->pending_by_client = g_hash_table_new (NULL, NULL);
  dns->cache = box_nftables_dns_cache_new (BOX_NFTABLES_DNS_CACHE_ENTRIES,
                                           BOX_NFTABLES_DNS_CACHE_BYTES);
  dns->resolv_conf = g_strdup (resolv_conf != NULL ? resolv_conf : "/etc/resolv.conf");
  dns->cancellable = g_cancellable_new ();
  dns->context = g_main_context_new ();
  dns->loop = g_main_loop_new (dns->context, FALSE);

  if (upstreams != NULL && upstreams[0] != NULL) {
    dns->upstreams = box_dns_parse_upstreams (upstreams, error);
    if (dns->upstreams == NULL)
      return NULL;
  } else {
    dns->from_resolv_conf = TRUE;
    box_dns_reload_resolv_conf_locked (dns);
  }

  dns->udp = bind_socket (G_SOCKET_TYPE_DATAGRAM, port, error);
  if (dns->udp == NULL)
    return NULL;
  dns->tcp = bind_socket (G_SOCKET_TYPE_STREAM, port, error);
  if (dns->tcp == NULL)
    return NULL;
  dns->tcp_pool = g_thread_pool_new_full (tcp_serve, dns, (GDestroyNotify) tcp_client_free,
                                          BOX_DNS_TCP_THREADS, FALSE, error);
  if (dns->tcp_pool == NULL)
    return NULL;

  source = g_socket_create_source (dns->udp, G_IO_IN, NULL);
  g_source_set_callback (source, G_SOURCE_FUNC (udp_readable_cb), dns, NULL);
  g_source_attach (source, dns->context);
  g_source_unref (source);
  source = g_socket_create_source (dns->tcp, G_IO_IN, NULL);
  g_source_set_callback (source, G_SOURCE_FUNC (tcp_acceptable_cb), dns, NULL);
  g_source_attach (source, dns->context);
  g_source_unref (source);

  box_dns_reporter_start (dns);
  dns->thread = g_thread_new ("box-nft-dns", dns_thread, dns);
  return g_steal_pointer (&dns);
}

static gboolean
quit_loop_cb (gpointer loop)
{
  g_main_loop_quit (loop);
  return G_SOURCE_REMOVE;
}

void
box_nftables_dns_free (BoxNftablesDns *dns)
{
  if (dns == NULL)
    return;
  if (dns->cancellable != NULL)
    g_cancellable_cancel (dns->cancellable);
  if (dns->thread != NULL) {
    /* quit from inside the loop: a g_main_loop_quit() before the thread
     * got to g_main_loop_run() would be lost, and the join would hang */
    GSource *quit = g_idle_source_new ();

    g_source_set_callback (quit, quit_loop_cb, dns->loop, NULL);
    g_source_attach (quit, dns->context);
    g_source_unref (quit);
    g_thread_join (dns->thread);
  }
  /* nothing posts any more; it may be waiting on the plugin's lock, which
   * the caller does not hold */
  box_dns_reporter_stop (dns);
  /* every connection taken is served to its end, which comes at once:
   * the workers see the cancellation, and so do the connections still
   * queued (their first read fails).  Not "immediate": GLib then drops a
   * connection a thread of the pool had just taken from the queue, neither
   * served nor given to tcp_client_free(), its socket left open */
  if (dns->tcp_pool != NULL)
    g_thread_pool_free (dns->tcp_pool, FALSE, TRUE);
  if (dns->pending != NULL)
    g_hash_table_unref (dns->pending);   /* the loop is gone: safe to drop sources */
  g_clear_pointer (&dns->pending_by_client, g_hash_table_unref);
  if (dns->udp != NULL)
    g_socket_close (dns->udp, NULL);
  if (dns->tcp != NULL)
    g_socket_close (dns->tcp, NULL);
  g_clear_object (&dns->udp);
  g_clear_object (&dns->tcp);
  g_main_loop_unref (dns->loop);
  g_main_context_unref (dns->context);
  g_clear_object (&dns->cancellable);
  g_clear_pointer (&dns->upstreams, g_ptr_array_unref);
  g_hash_table_unref (dns->allowed);
  g_clear_pointer (&dns->tcp_by_client, g_hash_table_unref);
  g_strfreev (dns->blocked);
  g_clear_pointer (&dns->cache, box_nftables_dns_cache_free);
  g_free (dns->resolv_conf);
  g_mutex_clear (&dns->lock);
  g_free (dns);
}
