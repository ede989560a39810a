/* box-broker-pump.c: one thread, an epoll loop, many connections; what
 * one connection does is box-broker-pump-conn.c's.
 *
 * take() (any thread) counts a connection against the caps, under the
 * lock, and queues it for the thread, which an eventfd wakes.  The thread
 * adopts what is queued, closes what was evicted for newcomers, gives live
 * connections new rules when the secrets changed, and times out the
 * stalled.  Epoll is level-triggered, and every event runs the whole step
 * function of its connection again, which reads whatever it may.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "box-error.h"
#include "box-broker-pump-private.h"

/* ---- connections -------------------------------------------------------- */

/* Called with the lock held. */
static void
uncount (BoxBrokerPump *pump, const char *sandbox_id)
{
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (pump->per_sandbox, sandbox_id));

  if (n <= 1)
    g_hash_table_remove (pump->per_sandbox, sandbox_id);
  else
    g_hash_table_insert (pump->per_sandbox, g_strdup (sandbox_id), GUINT_TO_POINTER (n - 1));
  pump->open--;
}

static void
conn_destroy (Conn *conn)
{
  BoxBrokerPump *pump = conn->pump;

  for (guint i = 0; i < 2; i++) {
    Side *side = &conn->side[i];
    if (side->fd >= 0)
      close (side->fd);
    if (side->tls != NULL)
      gnutls_deinit (side->tls);
    g_byte_array_unref (side->out);
  }
  g_mutex_lock (&pump->lock);
  g_queue_delete_link (&pump->taken, conn->taken_link);
  if (conn->evicted)
    g_queue_remove (&pump->evicted, conn);
  else
    uncount (pump, conn->sandbox);
  g_mutex_unlock (&pump->lock);
  g_clear_pointer (&conn->http, box_broker_http_free);
  g_clear_pointer (&conn->leaf, box_broker_leaf_unref);
  g_clear_pointer (&conn->head, g_bytes_unref);
  g_free (conn->sandbox);
  g_free (conn->host);
  g_free (conn);
}

/* Finished: out of epoll and of the list at once, freed after the batch of
 * events at hand (a later event of it may still point at it). */
static void
conn_retire (Conn *conn)
{
  BoxBrokerPump *pump = conn->pump;

  for (guint i = 0; i < 2; i++) {
    if (conn->side[i].events != 0)
      epoll_ctl (pump->epfd, EPOLL_CTL_DEL, conn->side[i].fd, NULL);
    conn->side[i].events = 0;
  }
  if (conn->link != NULL)
    g_queue_delete_link (&pump->conns, conn->link);
  conn->link = NULL;
  conn->dead = TRUE;
  g_ptr_array_add (pump->dead, conn);
}

static void
conn_watch (Conn *conn, int which, guint32 events)
{
  Side *side = &conn->side[which];
  struct epoll_event ev = { .events = events, .data.ptr = side };

  if (events == side->events)
    return;
  if (events == 0)
    epoll_ctl (conn->pump->epfd, EPOLL_CTL_DEL, side->fd, NULL);
  else
    epoll_ctl (conn->pump->epfd, side->events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, side->fd, &ev);
  side->events = events;
}

/* After a step: destroys a finished connection, or tells epoll what it
 * waits for.  FALSE when it is gone. */
static gboolean
conn_settle (Conn *conn)
{
  guint32 want[2] = { 0, 0 };

  if (conn->state == CLOSING) {
    if ((conn->side[CLIENT].out->len == 0 && conn->side[UPSTREAM].out->len == 0) ||
        g_get_monotonic_time () >= conn->deadline) {
      conn_retire (conn);
      return FALSE;
    }
  } else if (conn->state == UPSTREAM_HANDSHAKE) {
    want[UPSTREAM] = EPOLLIN;
  } else if (conn->state == CLIENT_HANDSHAKE) {
    want[CLIENT] = EPOLLIN;
  } else {
    for (int i = 0; i < 2; i++) {
      if (!conn->side[i].eof && conn->side[1 - i].out->len < BOX_BROKER_PUMP_BUFFER)
        want[i] = EPOLLIN;
    }
  }
  for (int i = 0; i < 2; i++) {
    if (conn->side[i].out->len > 0)
      want[i] |= EPOLLOUT;
    conn_watch (conn, i, want[i]);
  }
  return TRUE;
}

/* ---- the thread ---------------------------------------------------------- */

static void
adopt_pending (BoxBrokerPump *pump)
{
  Conn *conn;

  for (;;) {
    g_autoptr(GError) error = NULL;

    gboolean evicted;

    g_mutex_lock (&pump->lock);
    conn = g_queue_pop_head (&pump->pending);
    evicted = conn != NULL && conn->evicted;
    g_mutex_unlock (&pump->lock);
    if (conn == NULL)
      return;
    g_queue_push_tail (&pump->conns, conn);
    conn->link = pump->conns.tail;
    conn->deadline = deadline_in (g_atomic_int_get (&pump->handshake_ms));
    if (evicted) {   /* evicted before it began */
      conn->state = CLOSING;
      conn->deadline = 0;
    } else if (!box_broker_conn_start (conn, &error)) {
      g_message ("broker: %s: %s", conn->host, error->message);
      conn->state = CLOSING;
      conn->deadline = 0;
    } else {
      box_broker_conn_step (conn);
    }
    conn_settle (conn);
  }
}

/* Closes the connections evicted for newcomers (no goodbye, as for a timeout). */
static void
close_evicted (BoxBrokerPump *pump)
{
  for (;;) {
    Conn *conn;

    g_mutex_lock (&pump->lock);
    conn = g_queue_pop_head (&pump->evicted);
    g_mutex_unlock (&pump->lock);
    if (conn == NULL)
      return;
    if (conn->link == NULL || conn->dead)   /* pending: closed at adoption */
      continue;
    conn->state = CLOSING;
    conn->deadline = 0;
    conn_settle (conn);
  }
}

/* New rules for every live connection, before anything more is read. */
static void
apply_secrets (BoxBrokerPump *pump)
{
  guint generation = box_broker_secrets_generation (pump->secrets);
  GList *next;

  if (generation == pump->seen_generation)
    return;
  pump->seen_generation = generation;
  for (GList *l = pump->conns.head; l != NULL; l = next) {
    Conn *conn = l->data;
    g_autoptr(GPtrArray) rules = NULL;

    next = l->next;
    if (conn->state == CLOSING)
      continue;
    rules = box_broker_secrets_rules (pump->secrets, conn->sandbox, conn->host);
    if (rules->len == 0) {
      box_broker_conn_close (conn);
      box_broker_conn_step (conn);
      conn_settle (conn);
    } else if (conn->http != NULL) {
      box_broker_http_set_rules (conn->http, rules);
    }
  }
}

static void
sweep (BoxBrokerPump *pump)
{
  gint64 now = g_get_monotonic_time ();
  GList *next;

  for (GList *l = pump->conns.head; l != NULL; l = next) {
    Conn *conn = l->data;

    next = l->next;
    if (now < conn->deadline)
      continue;
    if (conn->state != CLOSING) {
      g_debug ("broker: %s: timed out", conn->host);
      conn->state = CLOSING;   /* a peer that stalls gets no goodbye */
    }
    conn->deadline = 0;
    conn_settle (conn);
  }
  g_ptr_array_set_size (pump->dead, 0);
}

static gpointer
pump_thread (gpointer data)
{
  BoxBrokerPump *pump = data;
  struct epoll_event events[64];
  gint64 last_sweep = g_get_monotonic_time ();

  while (!g_atomic_int_get (&pump->quit)) {
    int n = epoll_wait (pump->epfd, events, G_N_ELEMENTS (events), 250);

    apply_secrets (pump);
    for (int i = 0; i < n; i++) {
      Side *side = events[i].data.ptr;
      if (side == NULL) {
        guint64 count;
        if (read (pump->wakefd, &count, sizeof count) < 0 && errno != EAGAIN)
          g_debug ("broker: wake: %s", g_strerror (errno));
        continue;
      }
      if (side->conn->dead)
        continue;
      box_broker_conn_step (side->conn);
      conn_settle (side->conn);
    }
    adopt_pending (pump);
    close_evicted (pump);
    g_ptr_array_set_size (pump->dead, 0);
    if (g_get_monotonic_time () - last_sweep >= 250 * 1000) {
      sweep (pump);
      last_sweep = g_get_monotonic_time ();
    }
  }
  while (pump->conns.head != NULL)
    conn_retire (pump->conns.head->data);
  g_ptr_array_set_size (pump->dead, 0);
  return NULL;
}

/* ---- the API -------------------------------------------------------------- */

BoxBrokerPump *
box_broker_pump_new (BoxBrokerCa *ca, BoxBrokerSecrets *secrets, gnutls_certificate_credentials_t trust,
                     guint max_connections, GError **error)
{
  BoxBrokerPump *pump = g_new0 (BoxBrokerPump, 1);
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

  pump->ca = ca;
  pump->secrets = secrets;
  pump->trust = trust;
  pump->max_connections = MAX (max_connections, 1);
  pump->handshake_ms = BOX_BROKER_PUMP_HANDSHAKE_MS;
  pump->idle_ms = BOX_BROKER_PUMP_IDLE_MS;
  pump->seen_generation = box_broker_secrets_generation (secrets);
  g_mutex_init (&pump->lock);
  g_queue_init (&pump->pending);
  g_queue_init (&pump->conns);
  g_queue_init (&pump->taken);
  g_queue_init (&pump->evicted);
  pump->dead = g_ptr_array_new_with_free_func ((GDestroyNotify) conn_destroy);
  pump->per_sandbox = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  pump->epfd = epoll_create1 (EPOLL_CLOEXEC);
  pump->wakefd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (pump->epfd < 0 || pump->wakefd < 0 || epoll_ctl (pump->epfd, EPOLL_CTL_ADD, pump->wakefd, &ev) < 0) {
    int errsv = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "broker: epoll: %s", g_strerror (errsv));
    box_broker_pump_free (pump);
    return NULL;
  }
  pump->thread = g_thread_new ("box-broker", pump_thread, pump);
  return pump;
}

static void
wake (BoxBrokerPump *pump)
{
  guint64 one = 1;

  if (write (pump->wakefd, &one, sizeof one) < 0 && errno != EAGAIN)
    g_debug ("broker: wake: %s", g_strerror (errno));
}

void
box_broker_pump_free (BoxBrokerPump *pump)
{
  Conn *conn;

  if (pump == NULL)
    return;
  if (pump->thread != NULL) {
    g_atomic_int_set (&pump->quit, 1);
    wake (pump);
    g_thread_join (pump->thread);
  }
  while ((conn = g_queue_pop_head (&pump->pending)) != NULL)
    conn_destroy (conn);
  g_ptr_array_unref (pump->dead);
  if (pump->epfd >= 0)
    close (pump->epfd);
  if (pump->wakefd >= 0)
    close (pump->wakefd);
  g_hash_table_unref (pump->per_sandbox);
  g_mutex_clear (&pump->lock);
  g_free (pump);
}

/* The oldest connection of the sandbox holding the most stops counting and
 * goes to the thread to be closed; FALSE when that sandbox holds no more
 * than @mine + 1 (nobody to take from).  Called with the lock held. */
static gboolean
evict_for (BoxBrokerPump *pump, guint mine)
{
  GHashTableIter iter;
  gpointer id, n;
  const char *biggest = NULL;
  guint most = 0;

  g_hash_table_iter_init (&iter, pump->per_sandbox);
  while (g_hash_table_iter_next (&iter, &id, &n))
    if (GPOINTER_TO_UINT (n) > most) {
      most = GPOINTER_TO_UINT (n);
      biggest = id;
    }
  if (biggest == NULL || most <= mine + 1)
    return FALSE;
  for (GList *l = pump->taken.head; l != NULL; l = l->next) {
    Conn *conn = l->data;

    if (!conn->evicted && strcmp (conn->sandbox, biggest) == 0) {
      conn->evicted = TRUE;
      uncount (pump, conn->sandbox);
      g_queue_push_tail (&pump->evicted, conn);
      return TRUE;
    }
  }
  return FALSE;
}

/* Whether @sandbox_id, under its fair share, may have one more connection
 * (when all are held, in place of another's).  Called with the lock held. */
static gboolean
admit (BoxBrokerPump *pump, const char *sandbox_id)
{
  guint mine = GPOINTER_TO_UINT (g_hash_table_lookup (pump->per_sandbox, sandbox_id));
  guint holders = g_hash_table_size (pump->per_sandbox) + (mine == 0 ? 1 : 0);

  if (mine >= MAX (pump->max_connections / holders, 1))
    return FALSE;
  return pump->open < pump->max_connections || evict_for (pump, mine);
}

gboolean
box_broker_pump_take (BoxBrokerPump *pump, const char *sandbox_id, const char *host, int client_fd,
                      GBytes *client_head, int upstream_fd, GError **error)
{
  Conn *conn;

  g_mutex_lock (&pump->lock);
  if (!admit (pump, sandbox_id)) {
    g_mutex_unlock (&pump->lock);
    close (client_fd);
    close (upstream_fd);
    g_set_error (error, BOX_ERROR, BOX_ERROR_CAPACITY,
                 "the broker holds as many connections as it may for sandbox %s", sandbox_id);
    return FALSE;
  }
  conn = g_new0 (Conn, 1);
  conn->pump = pump;
  conn->sandbox = g_strdup (sandbox_id);
  conn->host = g_ascii_strdown (host, -1);
  conn->head = client_head != NULL ? g_bytes_ref (client_head) : NULL;
  conn->state = UPSTREAM_HANDSHAKE;
  for (int i = 0; i < 2; i++) {
    conn->side[i].conn = conn;
    conn->side[i].fd = i == CLIENT ? client_fd : upstream_fd;
    conn->side[i].out = g_byte_array_new ();
  }
  g_hash_table_insert (pump->per_sandbox, g_strdup (sandbox_id),
                       GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (pump->per_sandbox, sandbox_id)) + 1));
  pump->open++;
  g_queue_push_tail (&pump->taken, conn);
  conn->taken_link = pump->taken.tail;
  g_queue_push_tail (&pump->pending, conn);
  g_mutex_unlock (&pump->lock);
  wake (pump);
  return TRUE;
}

void
box_broker_pump_secrets_changed (BoxBrokerPump *pump)
{
  wake (pump);
}

guint
box_broker_pump_count (BoxBrokerPump *pump)
{
  guint n;

  g_mutex_lock (&pump->lock);
  n = pump->open;
  g_mutex_unlock (&pump->lock);
  return n;
}

void
box_broker_pump_set_timeouts (BoxBrokerPump *pump, guint handshake_ms, guint idle_ms)
{
  g_atomic_int_set (&pump->handshake_ms, (gint) handshake_ms);
  g_atomic_int_set (&pump->idle_ms, (gint) idle_ms);
}
