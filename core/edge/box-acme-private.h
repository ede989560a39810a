/* box-acme-private.h: what box-acme.c (orders, limits, renewal) and
 * box-acme-order.c (the RFC 8555 exchange of one order) share. */
#pragma once

#include <gnutls/abstract.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "box-acme.h"

G_BEGIN_DECLS

struct _BoxAcme {
  GObject            parent_instance;
  BoxEngine         *engine;
  BoxEdgeCerts      *certs;
  BoxEdgeChallenges *challenges;
  char              *dir;          /* <data-dir>/tls/acme */
  char              *sandbox_suffix;  /* ".{sandbox_domain}" */
  SoupSession       *session;
  char              *directory;    /* the directory URL */
  gboolean           dir_loaded;
  char              *new_nonce;
  char              *new_account;
  char              *new_order;
  gnutls_privkey_t   key;          /* the account key */
  char              *jwk;
  char              *thumbprint;
  char              *kid;          /* the account URL once known */
  char              *nonce;        /* the last Replay-Nonce, unused yet */
  GHashTable        *orders;       /* host -> BoxAcmeOrder, under way */
  GHashTable        *held;         /* host -> Held */
  GHashTable        *backoff;      /* host -> Backoff */
  GArray            *started;      /* gint64 monotonic start of each order in the last hour */
  guint              renew_timer;
  gint64             refused_logged_at;  /* monotonic, 0: never */
  guint              refused_quiet;      /* refusals not logged since */
  gboolean           stopped;
};

typedef struct _BoxAcmeOrder BoxAcmeOrder;
typedef struct _BoxAcmeReply BoxAcmeReply;
typedef void (*BoxAcmeNext) (BoxAcmeOrder *order, BoxAcmeReply *reply);

struct _BoxAcmeReply {
  guint       status;
  char       *location;
  guint       retry_after;   /* seconds, 0: none */
  char       *content_type;
  GBytes     *body;
  JsonObject *object;        /* the body as a JSON object, or NULL */
};

struct _BoxAcmeOrder {
  BoxAcme      *acme;
  char         *host;
  GPtrArray    *waiters;     /* Waiter (box-acme.c) */
  GCancellable *cancel;
  guint         deadline;
  guint         poll_timer;
  guint         polls;
  guint         bad_nonces;
  /* the signed request under way */
  char         *post_url;
  char         *post_payload;
  BoxAcmeNext   post_next;
  /* the order */
  char         *url;
  char         *authz;
  char         *finalize;
  char         *token;
  char         *key_pem;     /* the certificate's new key */
};

gboolean      box_acme_http_init  (BoxAcme *self, const char *directory, const char *ca_file,
                                   GError **error);
BoxAcmeOrder *box_acme_order_new  (BoxAcme *self, const char *host);
void          box_acme_order_free (BoxAcmeOrder *order);
void          box_acme_order_run  (BoxAcmeOrder *order);
/* Ends @order (NULL @failure: the certificate is installed), answers its
 * waiters and frees it. */
void          box_acme_order_done (BoxAcmeOrder *order, const char *failure);
/* Writes @host's chain and key and serves them. */
gboolean      box_acme_store      (BoxAcme *self, const char *host, const char *chain,
                                   const char *key_pem, GError **error);

/* box-acme-http.c: the exchange.  Each ends @order on failure. */
void          box_acme_fetch      (BoxAcmeOrder *order, const char *method, const char *url,
                                   const char *body, BoxAcmeNext next);
/* POSTs @payload (NULL: POST-as-GET) to @url as a JWS with a fresh nonce
 * (again on badNonce); the reply to @next. */
void          box_acme_post       (BoxAcmeOrder *order, const char *url, const char *payload,
                                   BoxAcmeNext next);
void          box_acme_fail       (BoxAcmeOrder *order, const char *format, ...)
                                   G_GNUC_PRINTF (2, 3);
/* Whether @reply is a 2xx; otherwise ends @order with the problem. */
gboolean      box_acme_ok_or_fail (BoxAcmeOrder *order, BoxAcmeReply *reply, const char *what);
/* "HTTP <status>: <type>: <detail>" of an error reply. */
char         *box_acme_problem    (BoxAcmeReply *reply);
/* An https URL of sane length. */
gboolean      box_acme_good_url   (const char *url);
/* Members of a reply's JSON, NULL when missing or of another type (a URL
 * also when it is no box_acme_good_url()). */
const char   *box_acme_member_url    (JsonObject *object, const char *name);
JsonArray    *box_acme_member_array  (JsonObject *object, const char *name);
JsonObject   *box_acme_member_object (JsonObject *object, const char *name);
JsonObject   *box_acme_element_object (JsonArray *array, guint i);

G_END_DECLS
