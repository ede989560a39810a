/* box-nftables-proxy.c: the name-checking proxy; see box-nftables-proxy.h.
 *
 * One thread, one epoll set.  Listeners are level-triggered; connection
 * sockets edge-triggered, and every event on either side of a connection
 * runs its state machine until it would block:
 *
 *   HEAD        reading the request head / ClientHello (deadline)
 *   RESOLVING   the node resolves the name (deadline)
 *   CONNECTING  to the next resolved address (deadline per address)
 *   SPLICING    both ways through a pipe each, no deadline
 *
 * Memory per connection: the Conn struct (~250 bytes), the head buffer
 * (grows from 1 KiB, at most BOX_NFTABLES_SNI_MAX = 16 KiB, freed once
 * sent upstream), and while splicing two pipes of at most PIPE_BYTES each
 * (kernel pages, only as full as the slower side lets them be).
 *
 * Other threads talk to this one through a mailbox (a locked queue and an
 * eventfd); the mailbox is reference counted so that a resolution that
 * ends after the proxy is gone has somewhere harmless to post.  Per-guest
 * stats are under `lock`, written only by the proxy's thread.
 */
#define _GNU_SOURCE   /* accept4 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>   /* SO_ORIGINAL_DST */
#include <netinet/in.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "box-error.h"
#include "box-nftables-pool.h"
#include "box-nftables-proxy-private.h"
#include "box-nftables-ruleset.h"

#define SWEEP_MS        100
#define ACCEPT_PAUSE_US (100 * 1000)

/* ---- blocked networks ---- */

static GArray *
compile_blocked (const char *const *cidrs, GError **error)
{
  g_autoptr(GArray) list = g_array_new (FALSE, FALSE, sizeof (guint32));

  for (guint i = 0; cidrs != NULL && cidrs[i] != NULL; i++) {
    guint32 network, mask;
    guint prefix;

    if (!box_nftables_cidr_parse (cidrs[i], &network, &prefix, error))
      return NULL;
    mask = box_nftables_prefix_mask (prefix);
    g_array_append_val (list, network);
    g_array_append_val (list, mask);
  }
  return g_steal_pointer (&list);
}

gboolean
box_nftables_proxy_set_blocked (BoxNftablesProxy *proxy, const char *const *cidrs,
                                GError **error)
{
  GArray *list = compile_blocked (cidrs, error);

  if (list == NULL)
    return FALSE;
  g_mutex_lock (&proxy->lock);
  g_array_unref (proxy->blocked);
  proxy->blocked = list;
  g_mutex_unlock (&proxy->lock);
  return TRUE;
}

gboolean
box_nftables_proxy_is_blocked (BoxNftablesProxy *proxy, guint32 addr)
{
  gboolean blocked = FALSE;

  g_mutex_lock (&proxy->lock);
  for (guint i = 0; i + 1 < proxy->blocked->len && !blocked; i += 2)
    blocked = (addr & g_array_index (proxy->blocked, guint32, i + 1)) ==
              g_array_index (proxy->blocked, guint32, i);
  g_mutex_unlock (&proxy->lock);
  return blocked;
}

/* A new broker, or none: returns only once no call to the old one is
 * under way, so that the caller may stop it (box-broker.h). */
void
box_nftables_proxy_set_broker (BoxNftablesProxy *proxy, BoxBroker *broker)
{
  g_mutex_lock (&proxy->lock);
  g_set_object (&proxy->broker, broker);
  while (proxy->broker_calls > 0)
    g_cond_wait (&proxy->broker_idle, &proxy->lock);
  g_mutex_unlock (&proxy->lock);
}

BoxBroker *
box_nftables_proxy_get_broker (BoxNftablesProxy *proxy)
{
  BoxBroker *broker = NULL;

  g_mutex_lock (&proxy->lock);
  if (proxy->broker != NULL) {
    broker = g_object_ref (proxy->broker);
    proxy->broker_calls++;
  }
  g_mutex_unlock (&proxy->lock);
  return broker;
}

void
box_nftables_proxy_put_broker (BoxNftablesProxy *proxy, BoxBroker *broker)
{
  if (broker == NULL)
    return;
  g_object_unref (broker);
  g_mutex_lock (&proxy->lock);
  if (--proxy->broker_calls == 0)
    g_cond_broadcast (&proxy->broker_idle);
  g_mutex_unlock (&proxy->lock);
}

/* ---- the mailbox ---- */

Mailbox *
box_nftables_proxy_mailbox_ref (Mailbox *mb)
{
  g_atomic_ref_count_inc (&mb->ref);
  return mb;
}

void
box_nftables_proxy_mailbox_unref (Mailbox *mb)
{
  if (!g_atomic_ref_count_dec (&mb->ref))
    return;
  g_queue_clear_full (&mb->cmds, g_free);
  close (mb->eventfd);
  g_mutex_clear (&mb->lock);
  g_free (mb);
}

void
box_nftables_proxy_mailbox_post (Mailbox *mb, Cmd *cmd)
{
  guint64 one = 1;

  g_mutex_lock (&mb->lock);
  if (mb->closed) {
    g_free (cmd);
  } else {
    g_queue_push_tail (&mb->cmds, cmd);
    if (write (mb->eventfd, &one, sizeof one) < 0 && errno != EAGAIN)
      g_warning ("egress proxy: cannot wake its thread: %s", g_strerror (errno));
  }
  g_mutex_unlock (&mb->lock);
}

static void
post (BoxNftablesProxy *proxy, CmdKind kind, guint32 guest)
{
  Cmd *cmd = g_new0 (Cmd, 1);

  cmd->kind = kind;
  cmd->guest = guest;
  box_nftables_proxy_mailbox_post (proxy->mailbox, cmd);
}

/* ---- admission: the global cap and each guest's fair share ---- */

static Guest *
biggest_holder (BoxNftablesProxy *proxy)
{
  GHashTableIter iter;
  Guest *guest, *biggest = NULL;

  g_hash_table_iter_init (&iter, proxy->guests);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &guest))
    if (biggest == NULL || guest->conns.length > biggest->conns.length)
      biggest = guest;
  return biggest;
}

/* Whether @guest may open one more connection; at the cap, a newcomer
 * under its share takes the place of the biggest holder's oldest
 * connection that is not spliced yet (or else its oldest). */
static gboolean
admit (BoxNftablesProxy *proxy, Guest *guest)
{
  guint cap = (guint) g_atomic_int_get (&proxy->max_connections);
  guint held = guest->conns.length;
  guint holders = proxy->n_holders + (held == 0 ? 1 : 0);
  guint share = MAX (cap / holders, 1);
  Guest *biggest;
  Conn *victim = NULL;

  if (held >= share)
    return FALSE;
  if (g_hash_table_size (proxy->conns) < cap)
    return TRUE;
  biggest = biggest_holder (proxy);
  if (biggest == NULL || biggest->conns.length <= held + 1)
    return FALSE;
  for (GList *l = biggest->conns.head; l != NULL && victim == NULL; l = l->next)
    if (((Conn *) l->data)->state != STATE_SPLICING)
      victim = l->data;
  box_nftables_proxy_conn_close (proxy, victim != NULL ? victim : biggest->conns.head->data, TRUE);
  return TRUE;
}

static void
listeners_watch (BoxNftablesProxy *proxy, gboolean on)
{
  if (on) {
    box_nftables_proxy_watch_fd (proxy, proxy->listen_http, &proxy->http_watch, EPOLLIN);
    box_nftables_proxy_watch_fd (proxy, proxy->listen_tls, &proxy->tls_watch, EPOLLIN);
  } else {
    epoll_ctl (proxy->epoll, EPOLL_CTL_DEL, proxy->listen_http, NULL);
    epoll_ctl (proxy->epoll, EPOLL_CTL_DEL, proxy->listen_tls, NULL);
  }
}

/* Where a redirected connection was going: read before anything else,
 * while conntrack surely has it.  0 when it was not redirected. */
static void
original_destination (int fd, guint32 *addr, guint16 *port)
{
  struct sockaddr_in sa, local;
  socklen_t len = sizeof sa, local_len = sizeof local;

  *addr = 0;
  *port = 0;
  if (getsockopt (fd, SOL_IP, SO_ORIGINAL_DST, &sa, &len) != 0 || sa.sin_family != AF_INET ||
      getsockname (fd, (struct sockaddr *) &local, &local_len) != 0 ||
      (sa.sin_addr.s_addr == local.sin_addr.s_addr && sa.sin_port == local.sin_port))
    return;
  *addr = ntohl (sa.sin_addr.s_addr);
  *port = ntohs (sa.sin_port);
}

static void
accept_all (BoxNftablesProxy *proxy, gboolean tls)
{
  for (;;) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    guint32 orig_addr = 0;
    guint16 orig_port = 0;
    int fd = accept4 (tls ? proxy->listen_tls : proxy->listen_http, (struct sockaddr *) &sa,
                      &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    guint32 addr;
    Guest *guest;

    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        /* out of descriptors: let the queue wait rather than spin */
        g_warning ("egress proxy: cannot accept: %s", g_strerror (errno));
        listeners_watch (proxy, FALSE);
        proxy->accept_paused_until = g_get_monotonic_time () + ACCEPT_PAUSE_US;
      }
      return;
    }
    if (tls)
      original_destination (fd, &orig_addr, &orig_port);
    addr = ntohl (sa.sin_addr.s_addr);
    if (sa.sin_family != AF_INET || !box_nftables_egress_lookup (proxy->egress, addr, NULL, NULL)) {
      box_nftables_proxy_reset_fd (fd);
      continue;
    }
    guest = box_nftables_proxy_guest_get (proxy, addr);
    if (!admit (proxy, guest)) {
      box_nftables_proxy_count (proxy, &guest->stats.refused, 1);
      box_nftables_proxy_reset_fd (fd);
      continue;
    }
    box_nftables_proxy_conn_new (proxy, fd, guest, tls, orig_addr, orig_port);
  }
}

/* ---- commands from other threads ---- */

static void
recheck (BoxNftablesProxy *proxy, guint32 addr, gboolean forget)
{
  g_autoptr(BoxEgressPolicy) policy = NULL;
  Guest *guest = g_hash_table_lookup (proxy->guests, GUINT_TO_POINTER (addr));
  gboolean known;

  if (guest == NULL)
    return;
  known = !forget && box_nftables_egress_lookup (proxy->egress, addr, &policy, NULL);
  for (GList *l = guest->conns.head, *next; l != NULL; l = next) {
    Conn *conn = l->data;

    next = l->next;
    if (!known) {
      box_nftables_proxy_conn_close (proxy, conn, TRUE);
    } else if (policy != NULL && conn->state != STATE_HEAD &&
               (conn->name == NULL ||  /* a hello without a name, passed when unrestricted */
                !box_egress_policy_allows (policy, conn->name, conn->tls ? 443 : 80))) {
      box_nftables_egress_report_refused (proxy->egress, addr, conn->tls ? "tls" : "http",
                                          conn->name, conn->tls ? 443 : 80);
      box_nftables_proxy_count (proxy, &guest->stats.refused, 1);
      box_nftables_proxy_conn_close (proxy, conn, TRUE);
    }
  }
  if (forget) {
    g_mutex_lock (&proxy->lock);
    g_hash_table_remove (proxy->guests, GUINT_TO_POINTER (addr));
    g_mutex_unlock (&proxy->lock);
  }
}

static void
run_commands (BoxNftablesProxy *proxy)
{
  Mailbox *mb = proxy->mailbox;
  guint64 value;
  Cmd *cmd;

  (void) read (mb->eventfd, &value, sizeof value);
  for (;;) {
    g_autofree Cmd *owned = NULL;
    Conn *conn;

    g_mutex_lock (&mb->lock);
    cmd = owned = g_queue_pop_head (&mb->cmds);
    g_mutex_unlock (&mb->lock);
    if (cmd == NULL)
      return;
    switch (cmd->kind) {
    case CMD_RECHECK:
    case CMD_FORGET:
      recheck (proxy, cmd->guest, cmd->kind == CMD_FORGET);
      break;
    case CMD_RESOLVED:
      conn = g_hash_table_lookup (proxy->conns, &cmd->conn_id);
      if (conn == NULL || conn->dead || conn->state != STATE_RESOLVING)
        break;
      memcpy (conn->addrs, cmd->addrs, sizeof cmd->addrs);
      conn->n_addrs = cmd->n_addrs;
      box_nftables_proxy_conn_connect_next (proxy, conn);
      break;
    case CMD_QUIT:
      proxy->quit = TRUE;
      break;
    }
  }
}

/* ---- the thread ---- */

/* Frees the connections closed during a batch of events, after it: a
 * later event of the batch may still name one. */
static void
bury (BoxNftablesProxy *proxy)
{
  g_slist_free_full (g_steal_pointer (&proxy->graveyard),
                     (GDestroyNotify) box_nftables_proxy_conn_free);
}

static void
sweep (BoxNftablesProxy *proxy)
{
  gint64 now = g_get_monotonic_time ();

  for (GList *l = proxy->timed.head, *next; l != NULL; l = next) {
    Conn *conn = l->data;

    next = l->next;
    if (conn->deadline > now)
      continue;
    if (conn->state == STATE_CONNECTING)
      box_nftables_proxy_conn_connect_next (proxy, conn);
    else if (conn->state == STATE_HEAD)
      box_nftables_proxy_conn_head_timeout (proxy, conn);
    else
      box_nftables_proxy_conn_close (proxy, conn, TRUE);
  }
  if (proxy->accept_paused_until != 0 && now >= proxy->accept_paused_until) {
    proxy->accept_paused_until = 0;
    listeners_watch (proxy, TRUE);
  }
}

static gpointer
proxy_thread (gpointer user_data)
{
  BoxNftablesProxy *proxy = user_data;
  struct epoll_event events[64];

  while (!proxy->quit) {
    gboolean timed = proxy->timed.length > 0 || proxy->accept_paused_until != 0;
    int timeout = proxy->again.length > 0 ? 0 : timed ? SWEEP_MS : -1;
    int n = epoll_wait (proxy->epoll, events, G_N_ELEMENTS (events), timeout);
    guint turns = proxy->again.length;

    for (int i = 0; i < n; i++) {
      Watch *watch = events[i].data.ptr;

      switch (watch->kind) {
      case WATCH_LISTEN_HTTP:
      case WATCH_LISTEN_TLS:
        accept_all (proxy, watch->kind == WATCH_LISTEN_TLS);
        break;
      case WATCH_WAKE:
        run_commands (proxy);
        break;
      case WATCH_CLIENT:
      case WATCH_UPSTREAM:
        box_nftables_proxy_conn_event (proxy, watch, events[i].events);
        break;
      }
    }
    /* the busy connections that were waiting, each once (a pump may queue
     * its connection again, at the tail) */
    while (turns-- > 0 && proxy->again.head != NULL)
      box_nftables_proxy_conn_pump_again (proxy, proxy->again.head->data);
    sweep (proxy);
    bury (proxy);
  }
  return NULL;
}

static int
listen_on (struct in_addr addr, guint16 port, guint16 *bound, GError **error)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons (port), .sin_addr = addr };
  socklen_t len = sizeof sa;
  int one = 1, errsv;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

  if (fd >= 0 && setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
      bind (fd, (struct sockaddr *) &sa, sizeof sa) == 0 && listen (fd, SOMAXCONN) == 0 &&
      getsockname (fd, (struct sockaddr *) &sa, &len) == 0) {
    *bound = ntohs (sa.sin_port);
    return fd;
  }
  errsv = errno;
  if (fd >= 0)
    close (fd);
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
               "the egress proxy cannot listen on TCP port %u: %s", port, g_strerror (errsv));
  return -1;
}

BoxNftablesProxy *
box_nftables_proxy_new (BoxNftablesEgress *egress, const char *bind_address, guint16 http_port,
                        guint16 tls_port, GError **error)
{
  g_autoptr(BoxNftablesProxy) proxy = g_new0 (BoxNftablesProxy, 1);
  struct in_addr addr;

  g_return_val_if_fail (egress != NULL, NULL);
  proxy->egress = egress;
  proxy->epoll = proxy->listen_http = proxy->listen_tls = -1;
  proxy->upstream_http = 80;
  proxy->upstream_tls = 443;
  proxy->max_connections = BOX_NFTABLES_PROXY_MAX_CONNECTIONS;
  proxy->head_timeout_ms = BOX_NFTABLES_PROXY_HEAD_TIMEOUT_MS;
  proxy->connect_timeout_ms = BOX_NFTABLES_PROXY_CONNECT_TIMEOUT_MS;
  proxy->http_watch = (Watch) { WATCH_LISTEN_HTTP, NULL };
  proxy->tls_watch = (Watch) { WATCH_LISTEN_TLS, NULL };
  proxy->wake_watch = (Watch) { WATCH_WAKE, NULL };
  proxy->conns = g_hash_table_new (g_int64_hash, g_int64_equal);
  proxy->guests = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  g_mutex_init (&proxy->lock);
  g_cond_init (&proxy->broker_idle);
  proxy->blocked = compile_blocked (box_nftables_blocked_builtin (), NULL);
  proxy->mailbox = g_new0 (Mailbox, 1);
  g_atomic_ref_count_init (&proxy->mailbox->ref);
  g_mutex_init (&proxy->mailbox->lock);
  proxy->mailbox->eventfd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC);

  if (inet_pton (AF_INET, bind_address, &addr) != 1) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "the egress proxy's address is not an IPv4 address: %s", bind_address);
    return NULL;
  }
  proxy->listen_http = listen_on (addr, http_port, &proxy->http_port, error);
  if (proxy->listen_http < 0)
    return NULL;
  proxy->listen_tls = listen_on (addr, tls_port, &proxy->tls_port, error);
  if (proxy->listen_tls < 0)
    return NULL;
  proxy->epoll = epoll_create1 (EPOLL_CLOEXEC);
  if (proxy->epoll < 0 || proxy->mailbox->eventfd < 0 ||
      !box_nftables_proxy_watch_fd (proxy, proxy->mailbox->eventfd, &proxy->wake_watch, EPOLLIN)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the egress proxy cannot poll: %s",
                 g_strerror (errno));
    return NULL;
  }
  listeners_watch (proxy, TRUE);
  proxy->thread = g_thread_new ("box-egress-proxy", proxy_thread, proxy);
  return g_steal_pointer (&proxy);
}

void
box_nftables_proxy_free (BoxNftablesProxy *proxy)
{
  GHashTableIter iter;
  Conn *conn;

  if (proxy == NULL)
    return;
  if (proxy->thread != NULL) {
    post (proxy, CMD_QUIT, 0);
    g_thread_join (proxy->thread);
  }
  g_hash_table_iter_init (&iter, proxy->conns);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &conn)) {
    g_hash_table_iter_steal (&iter);
    box_nftables_proxy_conn_close (proxy, conn, TRUE);
  }
  bury (proxy);
  g_mutex_lock (&proxy->mailbox->lock);
  proxy->mailbox->closed = TRUE;
  g_mutex_unlock (&proxy->mailbox->lock);
  box_nftables_proxy_mailbox_unref (proxy->mailbox);
  if (proxy->listen_http >= 0)
    close (proxy->listen_http);
  if (proxy->listen_tls >= 0)
    close (proxy->listen_tls);
  if (proxy->epoll >= 0)
    close (proxy->epoll);
  g_hash_table_unref (proxy->conns);
  g_hash_table_unref (proxy->guests);
  g_array_unref (proxy->blocked);
  g_clear_object (&proxy->broker);
  g_mutex_clear (&proxy->lock);
  g_cond_clear (&proxy->broker_idle);
  g_free (proxy);
}

guint16
box_nftables_proxy_get_port (BoxNftablesProxy *proxy, gboolean tls)
{
  return tls ? proxy->tls_port : proxy->http_port;
}

void
box_nftables_proxy_set_upstream_ports (BoxNftablesProxy *proxy, guint16 http, guint16 tls)
{
  g_atomic_int_set (&proxy->upstream_http, http);
  g_atomic_int_set (&proxy->upstream_tls, tls);
}

void
box_nftables_proxy_set_limits (BoxNftablesProxy *proxy, guint max_connections,
                               guint head_timeout_ms, guint connect_timeout_ms)
{
  if (max_connections > 0)
    g_atomic_int_set (&proxy->max_connections, (gint) max_connections);
  if (head_timeout_ms > 0)
    g_atomic_int_set (&proxy->head_timeout_ms, (gint) head_timeout_ms);
  if (connect_timeout_ms > 0)
    g_atomic_int_set (&proxy->connect_timeout_ms, (gint) connect_timeout_ms);
}

void
box_nftables_proxy_recheck (BoxNftablesProxy *proxy, guint32 guest)
{
  post (proxy, CMD_RECHECK, guest);
}

void
box_nftables_proxy_forget (BoxNftablesProxy *proxy, guint32 guest)
{
  post (proxy, CMD_FORGET, guest);
}

gboolean
box_nftables_proxy_get_stats (BoxNftablesProxy *proxy, guint32 guest,
                              BoxNftablesProxyStats *stats)
{
  Guest *entry;

  g_mutex_lock (&proxy->lock);
  entry = g_hash_table_lookup (proxy->guests, GUINT_TO_POINTER (guest));
  if (entry != NULL)
    *stats = entry->stats;
  g_mutex_unlock (&proxy->lock);
  return entry != NULL;
}
