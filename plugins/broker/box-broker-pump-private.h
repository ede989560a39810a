/* box-broker-pump-private.h: what box-broker-pump.c (the thread, the
 * hand-over and the caps) and box-broker-pump-conn.c (one connection) share;
 * for those two files only. */
#pragma once

#include <gio/gio.h>

#include "box-broker-http.h"
#include "box-broker-pump.h"

G_BEGIN_DECLS

enum { CLIENT, UPSTREAM };
typedef enum { UPSTREAM_HANDSHAKE, CLIENT_HANDSHAKE, PUMPING, CLOSING } State;

typedef struct _Conn Conn;

/* One end of a connection: a nonblocking socket and the GnuTLS session over
 * it, which writes into out (box-broker-pump-conn.c's push function). */
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

static inline gint64
deadline_in (gint ms)
{
  return g_get_monotonic_time () + (gint64) ms * 1000;
}

/* The rest is box-broker-pump-conn.c's, called on the pump's thread. */

/* The upstream's TLS client session: verified against the pump's trust
 * for the host, its server name unless an address. */
gboolean box_broker_conn_start (Conn *conn, GError **error);
/* Runs @conn as far as it goes without blocking. */
void     box_broker_conn_step  (Conn *conn);
/* From now on nothing more is read: CLOSING, with a TLS close where a
 * session is up. */
void     box_broker_conn_close (Conn *conn);

G_END_DECLS
