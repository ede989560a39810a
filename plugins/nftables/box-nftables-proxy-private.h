/* box-nftables-proxy-private.h: the name-checking proxy's insides, shared
 * by box-nftables-proxy.c (the thread, the listeners, admission, commands
 * from other threads) and box-nftables-proxy-conn.c (one connection's
 * state machine).  Everything here runs on the proxy's thread unless it
 * says otherwise. */
#pragma once

#include "box-nftables-proxy.h"

#define PIPE_BYTES      65536
#define HEAD_FIRST      1024
#define MAX_ADDRS       8
/* Rounds of up to PIPE_BYTES each way before a busy connection lets the
 * others have their turn (round robin through `again`). */
#define PUMP_ROUNDS     8

typedef struct _Conn Conn;

typedef enum {
  WATCH_LISTEN_HTTP,
  WATCH_LISTEN_TLS,
  WATCH_WAKE,
  WATCH_CLIENT,
  WATCH_UPSTREAM,
} WatchKind;

typedef struct {
  WatchKind kind;
  Conn     *conn;
} Watch;

typedef enum { STATE_HEAD, STATE_RESOLVING, STATE_CONNECTING, STATE_SPLICING } ConnState;

/* One way of a spliced connection. */
typedef struct {
  int      pipe[2];
  gsize    queued;  /* bytes in the pipe */
  gboolean eof;     /* the source will send no more */
  gboolean shut;    /* and the destination has been told (SHUT_WR) */
} Direction;

typedef struct {
  guint32               addr;
  GQueue                conns;  /* Conn*, oldest first */
  BoxNftablesProxyStats stats;
} Guest;

struct _Conn {
  guint64   id;
  Guest    *guest;
  gboolean  tls;
  gboolean  dead;
  ConnState state;
  int       client;
  int       upstream;
  Watch     client_watch;
  Watch     upstream_watch;
  guint8   *head;
  gsize     head_len;
  gsize     head_size;
  gsize     head_sent;
  char     *name;
  char     *sandbox_id;
  guint32   orig_addr;   /* the redirect's original destination (TLS), or 0 */
  guint16   orig_port;
  guint16   port;        /* the upstream port connected to */
  gboolean  brokered;    /* handed to the broker once connected upstream */
  guint32   addrs[MAX_ADDRS];
  guint     n_addrs;
  guint     next_addr;
  gboolean  blocked_seen;  /* an address was skipped as internal */
  gint64    deadline;    /* monotonic; in proxy->timed when not 0 */
  GList     timed_link;
  GList     guest_link;
  GList     again_link;  /* in proxy->again when .data is set */
  Direction out;         /* sandbox -> internet */
  Direction in;          /* internet -> sandbox */
};

typedef enum { CMD_RECHECK, CMD_FORGET, CMD_RESOLVED, CMD_QUIT } CmdKind;

typedef struct {
  CmdKind  kind;
  guint32  guest;
  guint64  conn_id;
  guint32  addrs[MAX_ADDRS];
  guint    n_addrs;
} Cmd;

typedef struct {
  gatomicrefcount ref;
  GMutex          lock;
  GQueue          cmds;
  int             eventfd;
  gboolean        closed;
} Mailbox;

struct _BoxNftablesProxy {
  BoxNftablesEgress *egress;
  int                epoll;
  int                listen_http;
  int                listen_tls;
  guint16            http_port;
  guint16            tls_port;
  Watch              http_watch;
  Watch              tls_watch;
  Watch              wake_watch;
  Mailbox           *mailbox;
  GThread           *thread;
  gint               upstream_http;  /* atomic */
  gint               upstream_tls;
  gint               max_connections;
  gint               head_timeout_ms;
  gint               connect_timeout_ms;

  /* the proxy's thread only */
  gboolean           quit;
  GHashTable        *conns;          /* id -> Conn* */
  guint64            next_id;
  GQueue             timed;          /* Conn* with a deadline */
  GQueue             again;          /* Conn* with more to move, in turn */
  GSList            *graveyard;      /* closed during this batch of events */
  guint              n_holders;      /* guests with a connection */
  gint64             accept_paused_until;

  GMutex             lock;
  GHashTable        *guests;         /* addr -> Guest*; written by the proxy's thread */
  GArray            *blocked;        /* guint32 pairs: network, mask */
  BoxBroker         *broker;         /* or NULL */
  guint              broker_calls;   /* wants/take_connection under way */
  GCond              broker_idle;    /* signalled when broker_calls drops to 0 */
};

/* box-nftables-proxy.c; any thread */
Mailbox *box_nftables_proxy_mailbox_ref   (Mailbox *mb);
void     box_nftables_proxy_mailbox_unref (Mailbox *mb);
void     box_nftables_proxy_mailbox_post  (Mailbox *mb, Cmd *cmd);
/* whether @addr lies in a blocked network; any thread */
gboolean box_nftables_proxy_is_blocked    (BoxNftablesProxy *proxy, guint32 addr);
/* (transfer full) (nullable): the broker, for one call to it, which
 * box_nftables_proxy_put_broker() ends (set_broker(NULL) waits for it);
 * the proxy's thread */
BoxBroker *box_nftables_proxy_get_broker  (BoxNftablesProxy *proxy);
void       box_nftables_proxy_put_broker  (BoxNftablesProxy *proxy, BoxBroker *broker);

/* box-nftables-proxy-conn.c */
void     box_nftables_proxy_reset_fd      (int fd);
gboolean box_nftables_proxy_watch_fd      (BoxNftablesProxy *proxy, int fd, Watch *watch,
                                           guint32 events);
Guest   *box_nftables_proxy_guest_get     (BoxNftablesProxy *proxy, guint32 addr);
/* adds @n to one of a guest's stats, under the stats lock */
void     box_nftables_proxy_count         (BoxNftablesProxy *proxy, guint64 *counter, guint64 n);
void     box_nftables_proxy_set_deadline  (BoxNftablesProxy *proxy, Conn *conn, guint ms);
/* @orig_addr, @orig_port: the redirect's original destination (0: none) */
void     box_nftables_proxy_conn_new      (BoxNftablesProxy *proxy, int fd, Guest *guest,
                                           gboolean tls, guint32 orig_addr, guint16 orig_port);
/* closes @conn (a reset both ways when @reset); freed after the batch */
void     box_nftables_proxy_conn_close    (BoxNftablesProxy *proxy, Conn *conn, gboolean reset);
void     box_nftables_proxy_conn_event    (BoxNftablesProxy *proxy, Watch *watch, guint32 events);
void     box_nftables_proxy_conn_connect_next (BoxNftablesProxy *proxy, Conn *conn);
/* @conn's head deadline passed (STATE_HEAD) */
void     box_nftables_proxy_conn_head_timeout (BoxNftablesProxy *proxy, Conn *conn);
/* @conn's turn in `again` came: moves it on */
void     box_nftables_proxy_conn_pump_again (BoxNftablesProxy *proxy, Conn *conn);
void     box_nftables_proxy_conn_free     (Conn *conn);
