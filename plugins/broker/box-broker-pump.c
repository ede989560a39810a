/* box-broker-pump.c: one thread, an epoll loop, many connections.
 *
 * Each connection has two sides, the client (the sandbox) and the
 * upstream (the real host), each a nonblocking socket with a GnuTLS
 * session over it.  The sessions read their socket themselves (a pull
 * function; the client's first gets the bytes the network already read)
 * and write into a buffer of ours (a push function that never blocks),
 * which the loop sends when the socket takes it.  So GnuTLS never sees
 * EAGAIN on a write, and backpressure is ours: a side is not read while
 * the other side's buffer is over BOX_BROKER_PUMP_BUFFER.
 *
 * A connection goes: upstream handshake (verified against the trust
 * store; a failure closes the client before its handshake even starts),
 * then the client's handshake with a leaf for the host, then the pump
 * through box-broker-http, then closing (buffers drained, a few seconds at
 * most).  The client's half-close (close_notify, or a bare FIN) is passed
 * upstream as the same and the answers still flow back; the upstream's end
 * closes both.  Epoll is level-triggered, and every event runs the whole step
 * function of its connection again, which reads whatever it may.
 */
#include "config.h"

#include <errno.h>
#include <gio/gio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "box-error.h"
#include "box-broker-http.h"
#include "box-broker-pump.h"

#define CLOSING_MS 5000
#define READ_CHUNK (16 * 1024)

enum { CLIENT, UPSTREAM };
typedef enum { UPSTREAM_HANDSHAKE, CLIENT_HANDSHAKE, PUMPING, CLOSING } State;

typedef struct _Conn Conn;

typedef struct {
  Conn            *conn;
  int              fd;
  gnutls_session_t tls;
  GByteArray      *out;       /* ciphertext not sent yet */
  guint32          events;    /* registered with epoll; 0 = not registered */
  gboolean         eof;
  gboolean         broken;    /* the socket failed: nothing more is sent */
  gboolean         bye;       /* a close_notify went into out */
  gboolean         shut_wr;   /* a half-close to pass on: SHUT_WR once out is sent */
  gboolean         fin;       /* the client's socket ended (kept from GnuTLS) */
} Side;

struct _Conn {
  BoxBrokerPump *pump;
  char          *sandbox;
  char          *host;
  Side           side[2];
  GBytes        *head;        /* the client's first bytes, read before its socket */
  gsize          head_off;
  State          state;
  gint64         deadline;    /* monotonic µs */
  BoxBrokerHttp *http;
  BoxBrokerLeaf *leaf;
  GList         *link;        /* in pump->conns */
  gboolean       dead;        /* finished; freed after the current batch of events */
  /* under pump->lock */
  GList         *taken_link;  /* in pump->taken */
  gboolean       evicted;     /* for a newcomer: no longer counted, closed by the thread */
};

struct _BoxBrokerPump {
  BoxBrokerCa      *ca;
  BoxBrokerSecrets *secrets;
  gnutls_certificate_credentials_t trust;
  int               epfd;
  int               wakefd;
  GThread          *thread;
  gint              quit;        /* atomic */
  guint             max_connections;
  gint              handshake_ms, idle_ms;  /* atomic */
  GMutex            lock;        /* the fields below */
  GQueue            pending;     /* Conn* taken, not yet seen by the thread */
  GHashTable       *per_sandbox; /* id -> count (GUINT_TO_POINTER), evicted ones not */
  guint             open;        /* evicted ones not counted */
  GQueue            taken;       /* Conn* not freed yet, oldest first */
  GQueue            evicted;     /* Conn* evicted, not yet closed by the thread */
  /* the thread's own */
  GQueue            conns;
  GPtrArray        *dead;        /* Conn* finished in this batch of events */
  guint             seen_generation;
};

/* ---- transport ---------------------------------------------------------- */

static ssize_t
push (gnutls_transport_ptr_t ptr, const void *data, size_t len)
{
  Side *side = ptr;

  if (!side->broken)
    g_byte_array_append (side->out, data, (guint) len);
  return (ssize_t) len;
}

static ssize_t
pull (gnutls_transport_ptr_t ptr, void *data, size_t len)
{
  Side *side = ptr;
  Conn *conn = side->conn;
  ssize_t n;

  if (side == &conn->side[CLIENT] && conn->head != NULL) {
    gsize head_len = g_bytes_get_size (conn->head);
    if (conn->head_off < head_len) {
      gsize take = MIN (len, head_len - conn->head_off);
      memcpy (data, (const guint8 *) g_bytes_get_data (conn->head, NULL) + conn->head_off, take);
      conn->head_off += take;
      return (ssize_t) take;
    }
  }
  n = recv (side->fd, data, len, 0);
  if (n == 0 && side == &conn->side[CLIENT] && conn->state == PUMPING) {
    /* a bare FIN is fatal to a GnuTLS session, which could then send no
     * more: the pump sees it as the client's half-close instead */
    side->fin = TRUE;
    gnutls_transport_set_errno (side->tls, EAGAIN);
    return -1;
  }
  if (n < 0)
    gnutls_transport_set_errno (side->tls, errno);
  return n;
}

/* Sends what the side's buffer holds, as far as the socket takes it. */
static void
flush_side (Side *side)
{
  while (side->out->len > 0 && !side->broken) {
    ssize_t n = send (side->fd, side->out->data, side->out->len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    if (n <= 0) {
      side->broken = TRUE;
      break;
    }
    g_byte_array_remove_range (side->out, 0, (guint) n);
  }
  if (side->broken)
    g_byte_array_set_size (side->out, 0);
  else if (side->shut_wr && side->out->len == 0) {
    (void) shutdown (side->fd, SHUT_WR);
    side->shut_wr = FALSE;
  }
}

static gboolean
new_session (Side *side, unsigned flags, GError **error)
{
  static const gnutls_datum_t http11 = { (unsigned char *) "http/1.1", 8 };
  int rc;

  rc = gnutls_init (&side->tls, flags | GNUTLS_NONBLOCK);
  if (rc >= 0)
    rc = gnutls_set_default_priority (side->tls);
  if (rc >= 0)
    rc = gnutls_alpn_set_protocols (side->tls, &http11, 1, 0);
  if (rc < 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "broker: TLS session: %s", gnutls_strerror (rc));
    return FALSE;
  }
  gnutls_transport_set_ptr (side->tls, side);
  gnutls_transport_set_push_function (side->tls, push);
  gnutls_transport_set_pull_function (side->tls, pull);
  return TRUE;
}

/* ---- connections -------------------------------------------------------- */

static gint64
deadline_in (gint ms)
{
  return g_get_monotonic_time () + (gint64) ms * 1000;
}

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

/* From now on nothing more is read; what is buffered still goes out, with
 * a TLS close where a session is up. */
static void
side_bye (Side *side)
{
  if (!side->bye)
    gnutls_bye (side->tls, GNUTLS_SHUT_WR);
  side->bye = TRUE;
}

static void
conn_close (Conn *conn)
{
  if (conn->state == CLOSING)
    return;
  if (conn->state == PUMPING) {
    side_bye (&conn->side[CLIENT]);
    side_bye (&conn->side[UPSTREAM]);
  } else if (conn->state == CLIENT_HANDSHAKE) {
    side_bye (&conn->side[UPSTREAM]);
  }
  conn->state = CLOSING;
  conn->deadline = deadline_in (CLOSING_MS);
}

/* Sends all of @data as records of @side's session (they land in its
 * buffer: the push function never blocks). */
static gboolean
send_plain (Side *side, const guint8 *data, gsize len)
{
  while (len > 0) {
    ssize_t n = gnutls_record_send (side->tls, data, len);
    if (n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_AGAIN)
      continue;
    if (n < 0)
      return FALSE;
    data += n;
    len -= (gsize) n;
  }
  return TRUE;
}

static void
answer_and_close (Conn *conn, guint status, const char *code, const char *message)
{
  g_autoptr(GBytes) answer = box_broker_http_error_response (status, code, message);

  send_plain (&conn->side[CLIENT], g_bytes_get_data (answer, NULL), g_bytes_get_size (answer));
  conn_close (conn);
}

static gboolean
handshake (Conn *conn, int which)
{
  Side *side = &conn->side[which];
  int rc = gnutls_handshake (side->tls);

  if (rc == GNUTLS_E_SUCCESS)
    return TRUE;
  if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED || !gnutls_error_is_fatal (rc))
    return FALSE;
  if (which == UPSTREAM) {
    /* never a secret here: the host and GnuTLS's reason */
    g_message ("broker: %s: upstream TLS refused (%s); the sandbox's connection is closed",
               conn->host, gnutls_strerror (rc));
  } else {
    g_debug ("broker: %s: the sandbox's TLS handshake failed: %s", conn->host, gnutls_strerror (rc));
  }
  conn->state = CLOSING;   /* no session to close: just drop the sockets */
  conn->deadline = 0;
  return FALSE;
}

static gboolean
start_client (Conn *conn)
{
  g_autoptr(GError) error = NULL;
  Side *client = &conn->side[CLIENT];

  conn->leaf = box_broker_ca_leaf (conn->pump->ca, conn->host, &error);
  if (conn->leaf == NULL || !new_session (client, GNUTLS_SERVER, &error) ||
      gnutls_credentials_set (client->tls, GNUTLS_CRD_CERTIFICATE,
                              box_broker_leaf_get_credentials (conn->leaf)) < 0) {
    g_message ("broker: %s: %s", conn->host, error != NULL ? error->message : "no TLS credentials");
    conn_close (conn);
    return FALSE;
  }
  conn->state = CLIENT_HANDSHAKE;
  return TRUE;
}

static void
start_pumping (Conn *conn)
{
  g_autoptr(GPtrArray) rules = box_broker_secrets_rules (conn->pump->secrets, conn->sandbox, conn->host);

  if (rules->len == 0) {
    conn_close (conn);
    return;
  }
  conn->http = box_broker_http_new (rules, conn->host);
  conn->state = PUMPING;
  conn->deadline = deadline_in (g_atomic_int_get (&conn->pump->idle_ms));
}

/* Reads from side @from as long as there is something and the other side's
 * buffer has room; TRUE when the connection goes on. */
static gboolean
pump_from (Conn *conn, int from)
{
  Side *src = &conn->side[from], *dst = &conn->side[1 - from];
  guint8 buf[READ_CHUNK];
  g_autoptr(GByteArray) plain = g_byte_array_new ();
  guint warnings = 0;

  while (conn->state == PUMPING && !src->eof && dst->out->len < BOX_BROKER_PUMP_BUFFER) {
    g_autoptr(GError) error = NULL;
    ssize_t n = gnutls_record_recv (src->tls, buf, sizeof buf);
    /* what a failing call wrote to @plain is dropped, so whether an answer
     * can still be sent is what it was before the call */
    gboolean can_answer = box_broker_http_can_answer (conn->http);
    gboolean ok;

    if ((n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) && !src->fin)
      break;
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
      n = 0;   /* the client's bare FIN (pull) */
    if (n < 0 && !gnutls_error_is_fatal ((int) n) && ++warnings <= 16)
      continue;   /* a warning alert, a renegotiation asked: ignored, a few */
    g_byte_array_set_size (plain, 0);
    if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
      src->eof = TRUE;
      /* the client's half-close (a close_notify or a bare FIN: the
       * sandbox is the only one on its path) goes upstream as one, a
       * close_notify and a FIN; its session can still send the answers */
      if (from == CLIENT) {
        side_bye (dst);
        dst->shut_wr = TRUE;
      }
      ok = from == CLIENT || box_broker_http_upstream_eof (conn->http, plain, &error);
    } else if (n < 0) {
      g_debug ("broker: %s: %s", conn->host, gnutls_strerror ((int) n));
      conn_close (conn);
      return FALSE;
    } else if (from == CLIENT) {
      ok = box_broker_http_from_client (conn->http, buf, (gsize) n, plain, &error);
    } else {
      ok = box_broker_http_from_upstream (conn->http, buf, (gsize) n, plain, &error);
    }
    conn->deadline = deadline_in (g_atomic_int_get (&conn->pump->idle_ms));
    if (!ok) {
      if (from == CLIENT && g_error_matches (error, BOX_ERROR, BOX_ERROR_INVALID))
        answer_and_close (conn, 400, "invalid", error->message);
      else if (from == UPSTREAM && can_answer)
        answer_and_close (conn, 502, "broker_failed", error->message);
      else
        conn_close (conn);
      return FALSE;
    }
    if (plain->len > 0 && !send_plain (dst, plain->data, plain->len)) {
      conn_close (conn);
      return FALSE;
    }
    if (src->eof && from == UPSTREAM) {
      /* the answers are done: what the client has is sent, then both
       * close (the client's end alone only half-closes: the answers to
       * what it sent still come, until the upstream ends or idles) */
      conn_close (conn);
      return FALSE;
    }
  }
  return TRUE;
}

/* Whether a session holds plaintext already read from its socket (epoll
 * would not tell) that may be read now, the other side having room. */
static gboolean
readable_inside (Conn *conn)
{
  if (conn->state != PUMPING)
    return FALSE;
  for (int i = 0; i < 2; i++) {
    if (!conn->side[i].eof && conn->side[1 - i].out->len < BOX_BROKER_PUMP_BUFFER &&
        gnutls_record_check_pending (conn->side[i].tls) > 0)
      return TRUE;
  }
  return FALSE;
}

/* Runs @conn as far as it goes without blocking. */
static void
conn_step (Conn *conn)
{
  for (;;) {
    State before = conn->state;

    switch (conn->state) {
    case UPSTREAM_HANDSHAKE:
      if (handshake (conn, UPSTREAM))
        start_client (conn);
      break;
    case CLIENT_HANDSHAKE:
      if (handshake (conn, CLIENT))
        start_pumping (conn);
      break;
    case PUMPING:
      if (pump_from (conn, CLIENT))
        pump_from (conn, UPSTREAM);
      break;
    case CLOSING:
      break;
    }
    flush_side (&conn->side[CLIENT]);
    flush_side (&conn->side[UPSTREAM]);
    if (conn->state == before && !readable_inside (conn))
      return;
  }
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
    } else if (!new_session (&conn->side[UPSTREAM], GNUTLS_CLIENT, &error) ||
        gnutls_credentials_set (conn->side[UPSTREAM].tls, GNUTLS_CRD_CERTIFICATE, pump->trust) < 0) {
      g_message ("broker: %s: %s", conn->host, error != NULL ? error->message : "no TLS credentials");
      conn->state = CLOSING;
      conn->deadline = 0;
    } else {
      g_autoptr(GInetAddress) ip = g_inet_address_new_from_string (conn->host);
      /* no server name for an address (RFC 6066), but verified all the same */
      if (ip == NULL)
        gnutls_server_name_set (conn->side[UPSTREAM].tls, GNUTLS_NAME_DNS, conn->host, strlen (conn->host));
      gnutls_session_set_verify_cert (conn->side[UPSTREAM].tls, conn->host, 0);
      conn_step (conn);
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
      conn_close (conn);
      conn_step (conn);
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
      conn_step (side->conn);
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
