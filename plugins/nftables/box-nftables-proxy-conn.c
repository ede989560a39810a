/* box-nftables-proxy-conn.c: one proxied connection, from the first
 * bytes to the splice; see box-nftables-proxy.c for the whole. */
#define _GNU_SOURCE   /* splice, pipe2, F_SETPIPE_SZ */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "box-nftables-proxy-private.h"
#include "box-nftables-sni.h"

/* ---- sockets ---- */

void
box_nftables_proxy_reset_fd (int fd)
{
  struct linger linger = { .l_onoff = 1, .l_linger = 0 };

  if (fd < 0)
    return;
  (void) setsockopt (fd, SOL_SOCKET, SO_LINGER, &linger, sizeof linger);
  close (fd);
}

static void
close_pipe (Direction *dir)
{
  for (guint i = 0; i < 2; i++)
    if (dir->pipe[i] >= 0)
      close (dir->pipe[i]);
  dir->pipe[0] = dir->pipe[1] = -1;
}

gboolean
box_nftables_proxy_watch_fd (BoxNftablesProxy *proxy, int fd, Watch *watch, guint32 events)
{
  struct epoll_event ev = { .events = events, .data.ptr = watch };

  return epoll_ctl (proxy->epoll, EPOLL_CTL_ADD, fd, &ev) == 0;
}

Guest *
box_nftables_proxy_guest_get (BoxNftablesProxy *proxy, guint32 addr)
{
  Guest *guest = g_hash_table_lookup (proxy->guests, GUINT_TO_POINTER (addr));

  if (guest == NULL) {
    guest = g_new0 (Guest, 1);
    guest->addr = addr;
    g_mutex_lock (&proxy->lock);
    g_hash_table_insert (proxy->guests, GUINT_TO_POINTER (addr), guest);
    g_mutex_unlock (&proxy->lock);
  }
  return guest;
}

void
box_nftables_proxy_count (BoxNftablesProxy *proxy, guint64 *counter, guint64 n)
{
  g_mutex_lock (&proxy->lock);
  *counter += n;
  g_mutex_unlock (&proxy->lock);
}

void
box_nftables_proxy_set_deadline (BoxNftablesProxy *proxy, Conn *conn, guint ms)
{
  if (conn->deadline != 0)
    g_queue_unlink (&proxy->timed, &conn->timed_link);
  conn->deadline = ms > 0 ? g_get_monotonic_time () + (gint64) ms * 1000 : 0;
  if (conn->deadline != 0)
    g_queue_push_tail_link (&proxy->timed, &conn->timed_link);
}

/* A relay passes segments on as they come (no Nagle delay on top of the
 * ends' own); an upstream that vanishes without a word is found by
 * keepalive probes (there is no idle timeout), the guest side by forget. */
static void
tune_socket (int fd, gboolean upstream)
{
  int one = 1, idle = 300, interval = 30, probes = 4;

  (void) setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!upstream)
    return;
  (void) setsockopt (fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  (void) setsockopt (fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  (void) setsockopt (fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  (void) setsockopt (fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
}

/* ---- connections ---- */

/* Closes @conn: a reset both ways when @reset, else a plain close. */
void
box_nftables_proxy_conn_close (BoxNftablesProxy *proxy, Conn *conn, gboolean reset)
{
  if (conn->dead)
    return;
  conn->dead = TRUE;
  box_nftables_proxy_set_deadline (proxy, conn, 0);
  if (conn->again_link.data != NULL) {
    g_queue_unlink (&proxy->again, &conn->again_link);
    conn->again_link.data = NULL;
  }
  g_mutex_lock (&proxy->lock);
  g_queue_unlink (&conn->guest->conns, &conn->guest_link);
  conn->guest->stats.connections = conn->guest->conns.length;
  g_mutex_unlock (&proxy->lock);
  if (conn->guest->conns.length == 0)
    proxy->n_holders--;
  g_hash_table_remove (proxy->conns, &conn->id);
  if (reset) {
    box_nftables_proxy_reset_fd (conn->client);
    box_nftables_proxy_reset_fd (conn->upstream);
  } else {
    if (conn->client >= 0)
      close (conn->client);
    if (conn->upstream >= 0)
      close (conn->upstream);
  }
  conn->client = conn->upstream = -1;
  close_pipe (&conn->out);
  close_pipe (&conn->in);
  g_clear_pointer (&conn->head, g_free);
  g_clear_pointer (&conn->name, g_free);
  g_clear_pointer (&conn->sandbox_id, g_free);
  proxy->graveyard = g_slist_prepend (proxy->graveyard, conn);
}

/* A refused connection: logged, counted, a 403 first on port 80, reset. */
static void
conn_refuse (BoxNftablesProxy *proxy, Conn *conn, const char *name, const char *reason)
{
  guint16 port = conn->tls ? 443 : 80;

  box_nftables_egress_report_refused (proxy->egress, conn->guest->addr,
                                      conn->tls ? "tls" : "http", name, port);
  box_nftables_proxy_count (proxy, &conn->guest->stats.refused, 1);
  if (!conn->tls) {
    /* names from the parsers hold only [a-z0-9._-]; reasons are ours */
    g_autofree char *message =
      name != NULL ? g_strdup_printf ("egress rules do not allow %s on port 80", name)
                   : g_strdup_printf ("the request was refused: %s", reason);
    g_autofree char *body = g_strdup_printf (
      "{\"error\":{\"code\":\"permission_denied\",\"message\":\"%s\"}}", message);
    g_autofree char *response = g_strdup_printf (
      "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
      "Connection: close\r\n\r\n%s", strlen (body), body);

    (void) send (conn->client, response, strlen (response), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  box_nftables_proxy_conn_close (proxy, conn, TRUE);
}

/* Moves one direction on as far as it goes, or until @budget rounds
 * (each up to PIPE_BYTES) are spent; FALSE on a broken socket. */
static gboolean
direction_step (BoxNftablesProxy *proxy, int src, int dst, Direction *dir, guint64 *counter,
                guint *budget)
{
  for (; *budget > 0; (*budget)--) {
    gboolean progress = FALSE;
    ssize_t n;

    if (!dir->eof && dir->queued < PIPE_BYTES) {
      n = splice (src, NULL, dir->pipe[1], NULL, PIPE_BYTES - dir->queued,
                  SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        dir->queued += (gsize) n;
        box_nftables_proxy_count (proxy, counter, (guint64) n);
        progress = TRUE;
      } else if (n == 0) {
        dir->eof = progress = TRUE;
      } else if (errno != EAGAIN && errno != EINTR) {
        return FALSE;
      }
    }
    if (dir->queued > 0) {
      n = splice (dir->pipe[0], NULL, dst, NULL, dir->queued, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        dir->queued -= (gsize) n;
        progress = TRUE;
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return FALSE;
      }
    }
    if (dir->eof && dir->queued == 0 && !dir->shut) {
      (void) shutdown (dst, SHUT_WR);
      dir->shut = TRUE;
    }
    if (!progress)
      return TRUE;
  }
  return TRUE;
}

static void
conn_pump (BoxNftablesProxy *proxy, Conn *conn)
{
  guint out_budget = PUMP_ROUNDS, in_budget = PUMP_ROUNDS;

  while (conn->head_sent < conn->head_len) {
    ssize_t n = send (conn->upstream, conn->head + conn->head_sent,
                      conn->head_len - conn->head_sent, MSG_NOSIGNAL);

    if (n > 0) {
      conn->head_sent += (gsize) n;
      box_nftables_proxy_count (proxy, &conn->guest->stats.bytes_out, (guint64) n);
    } else if (errno == EAGAIN) {
      break;
    } else if (errno != EINTR) {
      box_nftables_proxy_conn_close (proxy, conn, TRUE);
      return;
    }
  }
  if (conn->head_sent == conn->head_len) {
    g_clear_pointer (&conn->head, g_free);
    if (!direction_step (proxy, conn->client, conn->upstream, &conn->out,
                         &conn->guest->stats.bytes_out, &out_budget)) {
      box_nftables_proxy_conn_close (proxy, conn, TRUE);
      return;
    }
  }
  if (!direction_step (proxy, conn->upstream, conn->client, &conn->in,
                       &conn->guest->stats.bytes_in, &in_budget)) {
    box_nftables_proxy_conn_close (proxy, conn, TRUE);
    return;
  }
  if (conn->out.shut && conn->in.shut) {
    box_nftables_proxy_conn_close (proxy, conn, FALSE);
  } else if ((out_budget == 0 || in_budget == 0) && conn->again_link.data == NULL) {
    /* more to move, but others' turn first: edge-triggered, so no event
     * would come for what is already there */
    conn->again_link.data = conn;
    g_queue_push_tail_link (&proxy->again, &conn->again_link);
  }
}

static gboolean
open_pipe (Direction *dir)
{
  if (pipe2 (dir->pipe, O_NONBLOCK | O_CLOEXEC) < 0)
    return FALSE;
  (void) fcntl (dir->pipe[1], F_SETPIPE_SZ, PIPE_BYTES);
  return TRUE;
}

/* Connected upstream: the broker takes both sockets and what was read
 * from the sandbox; the connection leaves the proxy.  The broker is held
 * for the call (set_broker(NULL) waits for it to end). */
static void
conn_hand_over (BoxNftablesProxy *proxy, Conn *conn)
{
  BoxBroker *broker = box_nftables_proxy_get_broker (proxy);
  g_autoptr(GBytes) head = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *sandbox_id = g_steal_pointer (&conn->sandbox_id);
  g_autofree char *name = g_strdup (conn->name);
  int client = conn->client, upstream = conn->upstream;

  if (broker == NULL) {  /* unset since wants() (boxd stops): fail closed */
    box_nftables_proxy_conn_close (proxy, conn, TRUE);
    return;
  }
  (void) epoll_ctl (proxy->epoll, EPOLL_CTL_DEL, client, NULL);
  (void) epoll_ctl (proxy->epoll, EPOLL_CTL_DEL, upstream, NULL);
  head = g_bytes_new (conn->head, conn->head_len);
  box_nftables_proxy_count (proxy, &conn->guest->stats.brokered, 1);
  conn->client = conn->upstream = -1;
  box_nftables_proxy_conn_close (proxy, conn, FALSE);
  if (!box_broker_take_connection (broker, sandbox_id, name, client, head, upstream, &error))
    g_debug ("egress proxy: the broker did not take %s's connection to %s: %s", sandbox_id,
             name, error != NULL ? error->message : "no reason given");
  box_nftables_proxy_put_broker (proxy, broker);
}

static void
conn_begin_splice (BoxNftablesProxy *proxy, Conn *conn)
{
  if (conn->brokered) {
    conn_hand_over (proxy, conn);
    return;
  }
  box_nftables_proxy_set_deadline (proxy, conn, 0);
  conn->state = STATE_SPLICING;
  if (!open_pipe (&conn->out) || !open_pipe (&conn->in)) {
    g_warning ("egress proxy: no pipe for a connection: %s", g_strerror (errno));
    box_nftables_proxy_conn_close (proxy, conn, TRUE);
    return;
  }
  conn_pump (proxy, conn);
}

/* Connects to the next resolved address, or resets when none is left. */
void
box_nftables_proxy_conn_connect_next (BoxNftablesProxy *proxy, Conn *conn)
{
  guint16 port = conn->port;
  guint32 events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;

  if (conn->upstream >= 0) {
    close (conn->upstream);
    conn->upstream = -1;
  }
  while (conn->next_addr < conn->n_addrs) {
    guint32 addr = conn->addrs[conn->next_addr++];
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons (port),
                              .sin_addr.s_addr = htonl (addr) };
    int fd;

    if (box_nftables_proxy_is_blocked (proxy, addr)) {
      conn->blocked_seen = TRUE;
      continue;
    }
    fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      break;
    tune_socket (fd, TRUE);
    if ((connect (fd, (struct sockaddr *) &sa, sizeof sa) == 0 || errno == EINPROGRESS) &&
        box_nftables_proxy_watch_fd (proxy, fd, &conn->upstream_watch, events)) {
      conn->upstream = fd;
      conn->state = STATE_CONNECTING;
      box_nftables_proxy_set_deadline (proxy, conn,
                                       (guint) g_atomic_int_get (&proxy->connect_timeout_ms));
      return;
    }
    close (fd);
  }
  /* an internal address from the node's resolution: a rebinding attempt
   * or a resolver bug, worth the operator's eye */
  if (conn->blocked_seen)
    box_nftables_egress_report_refused (proxy->egress, conn->guest->addr,
                                        conn->tls ? "tls" : "http", conn->name,
                                        conn->tls ? 443 : 80);
  box_nftables_proxy_conn_close (proxy, conn, TRUE);
}

typedef struct {
  Mailbox *mailbox;
  guint64  conn_id;
} ResolveData;

/* Any thread: hands the answer to the proxy's thread. */
static void
resolve_done (const guint32 *addrs, guint n_addrs, guint32 ttl_s, const GError *error,
              gpointer done_data)
{
  ResolveData *data = done_data;
  Cmd *cmd = g_new0 (Cmd, 1);

  cmd->kind = CMD_RESOLVED;
  cmd->conn_id = data->conn_id;
  cmd->n_addrs = error == NULL ? MIN (n_addrs, MAX_ADDRS) : 0;
  if (cmd->n_addrs > 0)
    memcpy (cmd->addrs, addrs, cmd->n_addrs * sizeof (guint32));
  box_nftables_proxy_mailbox_post (data->mailbox, cmd);
  box_nftables_proxy_mailbox_unref (data->mailbox);
  g_free (data);
}

/* Whether @addr is one of the node's own (it can be bound). */
static gboolean
is_local_address (guint32 addr)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (addr) };
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  gboolean local;

  if (fd < 0)
    return TRUE;  /* cannot tell: fail closed */
  local = bind (fd, (struct sockaddr *) &sa, sizeof sa) == 0 || errno != EADDRNOTAVAIL;
  close (fd);
  return local;
}

/* An unrestricted sandbox's TLS: to the address it dialled, unless that
 * is the node itself (connect_next skips the blocked networks). */
static void
conn_connect_original (BoxNftablesProxy *proxy, Conn *conn)
{
  if (conn->orig_addr == 0 || is_local_address (conn->orig_addr)) {
    box_nftables_egress_report_refused (proxy->egress, conn->guest->addr, "tls", conn->name,
                                        conn->orig_port);
    box_nftables_proxy_count (proxy, &conn->guest->stats.refused, 1);
    box_nftables_proxy_conn_close (proxy, conn, TRUE);
    return;
  }
  conn->addrs[0] = conn->orig_addr;
  conn->n_addrs = 1;
  conn->next_addr = 0;
  conn->port = conn->orig_port;
  box_nftables_proxy_conn_connect_next (proxy, conn);
}

/* The name is known (NULL: TLS without one, @reason says why): check
 * it, then resolve it, or for an unrestricted sandbox's TLS take the
 * address it dialled.  The broker is asked only about what the policy
 * allows. */
static void
conn_check (BoxNftablesProxy *proxy, Conn *conn, char *name, const char *reason)
{
  g_autoptr(BoxEgressPolicy) policy = NULL;
  BoxBroker *broker;
  ResolveData *data;

  conn->name = name;
  if (!box_nftables_egress_lookup (proxy->egress, conn->guest->addr, &policy,
                                   &conn->sandbox_id)) {
    box_nftables_proxy_conn_close (proxy, conn, TRUE);
    return;
  }
  if (policy != NULL && (name == NULL ||
                         !box_egress_policy_allows (policy, name, conn->tls ? 443 : 80))) {
    conn_refuse (proxy, conn, name, reason);
    return;
  }
  broker = conn->tls && name != NULL ? box_nftables_proxy_get_broker (proxy) : NULL;
  conn->brokered = broker != NULL && box_broker_wants (broker, conn->sandbox_id, name);
  box_nftables_proxy_put_broker (proxy, broker);
  if (policy == NULL && conn->tls) {
    conn_connect_original (proxy, conn);
    return;
  }
  conn->port = (guint16) g_atomic_int_get (conn->tls ? &proxy->upstream_tls
                                                      : &proxy->upstream_http);
  conn->state = STATE_RESOLVING;
  box_nftables_proxy_set_deadline (proxy, conn,
                                   (guint) g_atomic_int_get (&proxy->connect_timeout_ms));
  data = g_new0 (ResolveData, 1);
  data->mailbox = box_nftables_proxy_mailbox_ref (proxy->mailbox);
  data->conn_id = conn->id;
  box_nftables_egress_resolve (proxy->egress, conn->guest->addr, name, resolve_done, data);
}

static void
conn_read_head (BoxNftablesProxy *proxy, Conn *conn)
{
  BoxNftablesSniResult result;
  const char *reason = NULL;
  char *name = NULL;
  gboolean eof = FALSE;

  while (conn->head_len < BOX_NFTABLES_SNI_MAX) {
    ssize_t n;

    if (conn->head_len == conn->head_size) {
      conn->head_size = MIN (MAX (conn->head_size * 2, HEAD_FIRST), BOX_NFTABLES_SNI_MAX);
      conn->head = g_realloc (conn->head, conn->head_size);
    }
    n = recv (conn->client, conn->head + conn->head_len, conn->head_size - conn->head_len, 0);
    if (n > 0) {
      conn->head_len += (gsize) n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n == 0) {
      eof = TRUE;  /* a half-close after the head is fine */
      break;
    } else if (errno == EAGAIN) {
      break;
    } else {
      box_nftables_proxy_conn_close (proxy, conn, TRUE);
      return;
    }
  }
  result = conn->tls ? box_nftables_sni_parse_tls (conn->head, conn->head_len, &name, &reason)
                     : box_nftables_sni_parse_http (conn->head, conn->head_len, &name, &reason);
  if (result == BOX_NFTABLES_SNI_MORE && eof)
    box_nftables_proxy_conn_close (proxy, conn, TRUE);  /* gone before saying where to */
  else if (result == BOX_NFTABLES_SNI_BAD && conn->tls)
    /* on 443 without a name we can read (no or an odd ClientHello, or not
     * TLS at all: ssh, VPNs): only an unrestricted sandbox's passes */
    conn_check (proxy, conn, NULL, reason);
  else if (result == BOX_NFTABLES_SNI_BAD)
    conn_refuse (proxy, conn, NULL, reason);
  else if (result == BOX_NFTABLES_SNI_DONE) {
    if (!conn->tls) {
      GByteArray *head = box_nftables_sni_http_close (conn->head, conn->head_len);

      g_free (conn->head);
      conn->head_len = conn->head_size = head->len;
      conn->head = g_byte_array_free (head, FALSE);
    }
    conn_check (proxy, conn, name, NULL);
  }
}

/* The head timeout ran out.  On 443, a client that waits for its server
 * to speak first (or sent too little to read a name from) is checked as a
 * connection without a name: an unrestricted sandbox's goes to the address
 * it dialled, a restricted one's is refused. */
void
box_nftables_proxy_conn_head_timeout (BoxNftablesProxy *proxy, Conn *conn)
{
  if (conn->tls)
    conn_check (proxy, conn, NULL, "no ClientHello in time");
  else
    box_nftables_proxy_conn_close (proxy, conn, TRUE);
}

void
box_nftables_proxy_conn_event (BoxNftablesProxy *proxy, Watch *watch, guint32 events)
{
  Conn *conn = watch->conn;
  int err = 0;
  socklen_t len = sizeof err;

  if (conn->dead)
    return;
  switch (conn->state) {
  case STATE_HEAD:
    if (watch->kind == WATCH_CLIENT)
      conn_read_head (proxy, conn);
    break;
  case STATE_RESOLVING:
    if ((events & (EPOLLERR | EPOLLHUP)) != 0)
      box_nftables_proxy_conn_close (proxy, conn, TRUE);
    break;
  case STATE_CONNECTING:
    if (watch->kind == WATCH_CLIENT) {
      if ((events & (EPOLLERR | EPOLLHUP)) != 0)
        box_nftables_proxy_conn_close (proxy, conn, TRUE);
    } else if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) != 0) {
      if (getsockopt (conn->upstream, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0)
        box_nftables_proxy_conn_connect_next (proxy, conn);
      else
        conn_begin_splice (proxy, conn);
    }
    break;
  case STATE_SPLICING:
    conn_pump (proxy, conn);
    break;
  }
}

void
box_nftables_proxy_conn_pump_again (BoxNftablesProxy *proxy, Conn *conn)
{
  g_queue_unlink (&proxy->again, &conn->again_link);
  conn->again_link.data = NULL;
  conn_pump (proxy, conn);
}

void
box_nftables_proxy_conn_free (Conn *conn)
{
  g_free (conn);
}

void
box_nftables_proxy_conn_new (BoxNftablesProxy *proxy, int fd, Guest *guest, gboolean tls,
                             guint32 orig_addr, guint16 orig_port)
{
  Conn *conn = g_new0 (Conn, 1);

  tune_socket (fd, FALSE);
  conn->id = ++proxy->next_id;
  conn->guest = guest;
  conn->tls = tls;
  conn->client = fd;
  conn->upstream = -1;
  conn->orig_addr = orig_addr;
  conn->orig_port = orig_port;
  conn->out.pipe[0] = conn->out.pipe[1] = conn->in.pipe[0] = conn->in.pipe[1] = -1;
  conn->client_watch = (Watch) { WATCH_CLIENT, conn };
  conn->upstream_watch = (Watch) { WATCH_UPSTREAM, conn };
  conn->timed_link.data = conn->guest_link.data = conn;
  g_hash_table_insert (proxy->conns, &conn->id, conn);
  if (guest->conns.length == 0)
    proxy->n_holders++;
  g_mutex_lock (&proxy->lock);
  g_queue_push_tail_link (&guest->conns, &conn->guest_link);
  guest->stats.connections = guest->conns.length;
  g_mutex_unlock (&proxy->lock);
  box_nftables_proxy_set_deadline (proxy, conn, (guint) g_atomic_int_get (&proxy->head_timeout_ms));
  if (!box_nftables_proxy_watch_fd (proxy, fd, &conn->client_watch,
                                    EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET))
    box_nftables_proxy_conn_close (proxy, conn, TRUE);
}
