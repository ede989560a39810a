/* box-acme.c: the ACME client's orders, their limits and renewal; see
 * box-acme.h.  The HTTP exchange is box-acme-http.c, the crypto
 * box-acme-jws.c. */
#include "config.h"

#include "box-acme.h"

#include <errno.h>
#include <string.h>

#include "box-acme-jws.h"
#include "box-acme-private.h"
#include "box-edge-cert.h"
#include "box-edge-route.h"
#include "box-error.h"
#include "box-records.h"

#define HOUR_US          (G_USEC_PER_SEC * (gint64) 3600)
#define BACKOFF_FIRST_S  60
#define BACKOFF_MAX_S    (24 * 3600)
/* how long shutdown waits for the orders under way to end */
#define SHUTDOWN_US      (5 * G_USEC_PER_SEC)
/* refused orders are logged at most once in this long */
#define REFUSED_LOG_US   (60 * G_USEC_PER_SEC)

G_DEFINE_FINAL_TYPE (BoxAcme, box_acme, G_TYPE_OBJECT)

typedef struct {
  GTlsCertificate *cert;
  gint64           not_before;   /* unix seconds */
  gint64           not_after;
} Held;

typedef struct {
  gint64 retry_at;               /* monotonic */
  guint  failures;
} Backoff;

typedef struct {
  GTask     *task;
  BoxAcmeOrder *order;
  guint      timer;
} Waiter;

static void
held_free (gpointer p)
{
  Held *h = p;

  g_object_unref (h->cert);
  g_free (h);
}

static void
box_acme_finalize (GObject *object)
{
  BoxAcme *self = BOX_ACME (object);

  /* orders hold a reference: none is under way here */
  if (self->renew_timer != 0)
    g_source_remove (self->renew_timer);
  g_hash_table_unref (self->orders);
  g_hash_table_unref (self->held);
  g_hash_table_unref (self->backoff);
  g_array_unref (self->started);
  g_clear_object (&self->session);
  g_clear_object (&self->certs);
  g_clear_object (&self->challenges);
  g_clear_object (&self->engine);
  if (self->key != NULL)
    gnutls_privkey_deinit (self->key);
  g_free (self->jwk);
  g_free (self->thumbprint);
  g_free (self->kid);
  g_free (self->nonce);
  g_free (self->new_nonce);
  g_free (self->new_account);
  g_free (self->new_order);
  g_free (self->dir);
  g_free (self->directory);
  g_free (self->sandbox_suffix);
  G_OBJECT_CLASS (box_acme_parent_class)->finalize (object);
}

static void
box_acme_class_init (BoxAcmeClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = box_acme_finalize;
}

static void
box_acme_init (BoxAcme *self)
{
  self->orders = g_hash_table_new (g_str_hash, g_str_equal);
  self->held = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, held_free);
  self->backoff = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->started = g_array_new (FALSE, FALSE, sizeof (gint64));
}

/* ---- certificates on disk ------------------------------------------------ */

/* Installs @cert for @host and remembers its lifetime (0, 0 when the
 * certificate tells none: renewed at the next check). */
static void
hold (BoxAcme *self, const char *host, GTlsCertificate *cert)
{
  g_autoptr(GDateTime) not_before = g_tls_certificate_get_not_valid_before (cert);
  g_autoptr(GDateTime) not_after = g_tls_certificate_get_not_valid_after (cert);
  Held *h = g_new0 (Held, 1);

  if (not_before != NULL && not_after != NULL &&
      g_date_time_compare (not_after, not_before) > 0) {
    h->not_before = g_date_time_to_unix (not_before);
    h->not_after = g_date_time_to_unix (not_after);
  }
  h->cert = g_object_ref (cert);
  g_hash_table_insert (self->held, g_strdup (host), h);
  box_edge_certs_set (self->certs, host, cert);
}

static void
load_stored (BoxAcme *self)
{
  g_autoptr(GDir) dir = g_dir_open (self->dir, 0, NULL);
  const char *entry;

  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *host = NULL;
    g_autofree char *cert_path = NULL;
    g_autofree char *key_path = NULL;
    g_autoptr(GTlsCertificate) cert = NULL;
    g_autoptr(GError) error = NULL;

    if (!g_str_has_suffix (entry, ".pem") || g_str_has_suffix (entry, "-key.pem"))
      continue;
    host = g_strndup (entry, strlen (entry) - 4);
    cert_path = g_build_filename (self->dir, entry, NULL);
    key_path = g_strdup_printf ("%s/%s-key.pem", self->dir, host);
    cert = box_edge_cert_load_pair (cert_path, key_path, &error);
    if (cert == NULL) {
      g_warning ("acme: stored certificate for %s refused: %s", host, error->message);
      continue;
    }
    hold (self, host, cert);
    g_message ("acme: loaded the certificate for %s", host);
  }
}

gboolean
box_acme_store (BoxAcme *self, const char *host, const char *chain, const char *key_pem,
                GError **error)
{
  g_autofree char *cert_path = g_strdup_printf ("%s/%s.pem", self->dir, host);
  g_autofree char *key_path = g_strdup_printf ("%s/%s-key.pem", self->dir, host);
  g_autofree char *both = g_strconcat (chain, key_pem, NULL);
  g_autoptr(GTlsCertificate) cert = NULL;
  g_autoptr(GError) local_error = NULL;

  cert = g_tls_certificate_new_from_pem (both, -1, &local_error);
  if (cert == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "the certificate does not load: %s",
                 local_error->message);
    return FALSE;
  }
  /* the key first: a certificate on disk always has its key */
  if (!g_file_set_contents_full (key_path, key_pem, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600,
                                 &local_error) ||
      !g_file_set_contents_full (cert_path, chain, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0644,
                                 &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s", local_error->message);
    return FALSE;
  }
  hold (self, host, cert);
  return TRUE;
}

/* ---- which hosts ----------------------------------------------------------- */

static char *
project_for_host (gpointer engine, const char *host, char **prefix)
{
  return box_engine_project_for_host (engine, host, prefix);
}

/* Whether @host is a sandbox URL's host under a project's own domain
 * ([<port>--]<name>.<domain>, not the domain itself nor a deeper name):
 * the engine's domain map answers from memory, so a storm of handshakes
 * reads no storage, and a domain set or removed counts at once. */
static gboolean
under_own_domain (BoxAcme *self, const char *host)
{
  g_autofree char *name = NULL;
  g_autofree char *project = NULL;
  guint port = 0;

  /* (names under the sandbox domain were sent away by the caller) */
  return box_edge_resolve_host (host, NULL, project_for_host, self->engine, &name, &project,
                                &port);
}

gboolean
box_acme_wants (BoxAcme *self, const char *server_name)
{
  g_autofree char *host = NULL;

  g_return_val_if_fail (BOX_IS_ACME (self), FALSE);
  if (server_name == NULL || self->stopped)
    return FALSE;
  host = g_ascii_strdown (server_name, -1);
  /* the sandbox domain's names have the default certificate */
  if (g_str_has_suffix (host, self->sandbox_suffix))
    return FALSE;
  /* under_own_domain() checks the name's shape: every label before the
   * own domain goes through box_edge_resolve_host()'s label rules, and the
   * domain is a stored one */
  return !g_hash_table_contains (self->held, host) &&
         !box_edge_certs_covers (self->certs, host) && under_own_domain (self, host);
}

/* ---- orders, waiters and limits ------------------------------------------ */

static void
waiter_done (Waiter *w, gboolean ok)
{
  if (w->timer != 0)
    g_source_remove (w->timer);
  if (w->order != NULL)
    g_ptr_array_remove (w->order->waiters, w);
  g_task_return_boolean (w->task, ok);
  g_object_unref (w->task);
  g_free (w);
}

static gboolean
waiter_timeout (gpointer user_data)
{
  Waiter *w = user_data;

  w->timer = 0;
  g_message ("acme: no certificate for %s in time, serving the default meanwhile",
             w->order->host);
  waiter_done (w, FALSE);
  return G_SOURCE_REMOVE;
}

void
box_acme_order_done (BoxAcmeOrder *order, const char *failure)
{
  BoxAcme *self = order->acme;
  Backoff *b = g_hash_table_lookup (self->backoff, order->host);

  if (failure == NULL) {
    g_hash_table_remove (self->backoff, order->host);
  } else {
    if (b == NULL) {
      b = g_new0 (Backoff, 1);
      g_hash_table_insert (self->backoff, g_strdup (order->host), b);
    }
    b->failures = MIN (b->failures + 1, 20u);
    b->retry_at = g_get_monotonic_time () +
                  G_USEC_PER_SEC * (gint64) MIN (BACKOFF_MAX_S,
                                                 BACKOFF_FIRST_S << MIN (b->failures - 1, 11u));
    g_warning ("acme: order for %s failed%s: %s", order->host,
               g_hash_table_contains (self->held, order->host) ? ", the old certificate kept" : "",
               failure);
  }
  g_hash_table_remove (self->orders, order->host);
  while (order->waiters->len > 0)
    waiter_done (g_ptr_array_index (order->waiters, 0), failure == NULL);
  box_acme_order_free (order);
}

/* Whether a new order for @host may start now; why not in *@why. */
static gboolean
may_order (BoxAcme *self, const char *host, const char **why)
{
  BoxConfig *config = box_engine_get_config (self->engine);
  Backoff *b = g_hash_table_lookup (self->backoff, host);
  gint64 now = g_get_monotonic_time ();
  guint kept = 0;

  for (guint i = 0; i < self->started->len; i++)
    if (now - g_array_index (self->started, gint64, i) < HOUR_US)
      g_array_index (self->started, gint64, kept++) = g_array_index (self->started, gint64, i);
  g_array_set_size (self->started, kept);
  if (b != NULL && now < b->retry_at)
    *why = "it failed lately (back-off)";
  else if (config->acme_max_concurrent > 0 &&
           g_hash_table_size (self->orders) >= config->acme_max_concurrent)
    *why = "too many orders under way (acme_max_concurrent)";
  else if (config->acme_orders_per_hour > 0 && self->started->len >= config->acme_orders_per_hour)
    *why = "too many orders this hour (acme_orders_per_hour)";
  else
    return TRUE;
  return FALSE;
}

static BoxAcmeOrder *
start_order (BoxAcme *self, const char *host, gboolean renewal)
{
  gint64 now = g_get_monotonic_time ();
  const char *why = NULL;
  BoxAcmeOrder *order;

  if (!may_order (self, host, &why)) {
    /* a renewal is tried again at each check: not a log line each time */
    if (renewal) {
      g_debug ("acme: no renewal of %s now: %s", host, why);
    } else if (self->refused_logged_at == 0 || now - self->refused_logged_at >= REFUSED_LOG_US) {
      /* a storm of new names: one line a minute, with the count */
      g_message ("acme: no order for %s now: %s (%u more refused since the last line)", host, why,
                 self->refused_quiet);
      self->refused_logged_at = now;
      self->refused_quiet = 0;
    } else {
      self->refused_quiet++;
    }
    return NULL;
  }
  g_array_append_val (self->started, now);
  order = box_acme_order_new (self, host);
  g_hash_table_insert (self->orders, order->host, order);
  g_message ("acme: ordering a %scertificate for %s", renewal ? "new " : "", host);
  box_acme_order_run (order);
  return order;
}

void
box_acme_ensure_async (BoxAcme *self, const char *host, guint timeout_s,
                       GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, NULL, callback, user_data);
  g_autofree char *name = g_ascii_strdown (host, -1);
  BoxAcmeOrder *order;
  Waiter *w;

  g_task_set_source_tag (task, box_acme_ensure_async);
  if (!box_acme_wants (self, name)) {
    g_task_return_boolean (task, g_hash_table_contains (self->held, name));
    return;
  }
  order = g_hash_table_lookup (self->orders, name);
  if (order == NULL)
    order = start_order (self, name, FALSE);
  if (order == NULL) {
    g_task_return_boolean (task, FALSE);
    return;
  }
  w = g_new0 (Waiter, 1);
  w->task = g_steal_pointer (&task);
  w->order = order;
  w->timer = g_timeout_add_seconds (MAX (timeout_s, 1u), waiter_timeout, w);
  g_ptr_array_add (order->waiters, w);
}

gboolean
box_acme_ensure_finish (BoxAcme *self, GAsyncResult *result)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), NULL);
}

/* ---- renewal ----------------------------------------------------------------- */

static gboolean
renew_check (gpointer user_data)
{
  BoxAcme *self = user_data;
  BoxConfig *config = box_engine_get_config (self->engine);
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  GHashTableIter iter;
  gpointer key, value;
  g_autoptr(GPtrArray) due = g_ptr_array_new_with_free_func (g_free);

  g_hash_table_iter_init (&iter, self->held);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    Held *h = value;
    gint64 left_at = h->not_after - (h->not_after - h->not_before) *
                                    (gint64) config->acme_renew_percent / 100;

    if (now >= left_at && !g_hash_table_contains (self->orders, key))
      g_ptr_array_add (due, g_strdup (key));
  }
  for (guint i = 0; i < due->len; i++)
    start_order (self, g_ptr_array_index (due, i), TRUE);
  return G_SOURCE_CONTINUE;
}

/* ---- life ---------------------------------------------------------------------- */

BoxAcme *
box_acme_new (BoxEngine *engine, BoxEdgeCerts *certs, BoxEdgeChallenges *challenges,
              GError **error)
{
  g_autoptr(BoxAcme) self = g_object_new (BOX_TYPE_ACME, NULL);
  BoxConfig *config = box_engine_get_config (engine);
  g_autofree char *key_path = g_build_filename (config->data_dir, "tls",
                                                "acme-account-key.pem", NULL);

  self->engine = g_object_ref (engine);
  self->certs = g_object_ref (certs);
  self->challenges = g_object_ref (challenges);
  self->dir = g_build_filename (config->data_dir, "tls", "acme", NULL);
  self->sandbox_suffix = g_strdup_printf (".%s", config->sandbox_domain);
  if (g_mkdir_with_parents (self->dir, 0755) != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot make %s: %s", self->dir,
                 g_strerror (errno));
    return NULL;
  }
  if (!box_acme_key_load_or_new (key_path, &self->key, error) ||
      (self->jwk = box_acme_jwk (self->key, error)) == NULL ||
      !box_acme_http_init (self, config->acme_directory, config->acme_ca_file, error))
    return NULL;
  self->thumbprint = box_acme_thumbprint (self->jwk);
  load_stored (self);
  self->renew_timer = g_timeout_add_seconds (MAX (config->acme_renew_check_s, 1u), renew_check,
                                             self);
  return g_steal_pointer (&self);
}

void
box_acme_shutdown (BoxAcme *self)
{
  g_autoptr(BoxAcme) keep = NULL;
  gint64 deadline = g_get_monotonic_time () + SHUTDOWN_US;

  g_return_if_fail (BOX_IS_ACME (self));
  keep = g_object_ref (self);
  self->stopped = TRUE;
  if (self->renew_timer != 0)
    g_source_remove (self->renew_timer);
  self->renew_timer = 0;
  /* the main loop has ended: run the context until every order has seen
   * its cancellation (and answered its waiters), boundedly */
  while (g_hash_table_size (self->orders) > 0 && g_get_monotonic_time () < deadline) {
    g_autoptr(GPtrArray) idle = g_ptr_array_new ();
    GHashTableIter iter;
    gpointer value;

    g_hash_table_iter_init (&iter, self->orders);
    while (g_hash_table_iter_next (&iter, NULL, &value)) {
      BoxAcmeOrder *order = value;

      g_cancellable_cancel (order->cancel);
      if (order->poll_timer != 0)
        g_ptr_array_add (idle, order);   /* no request under way to end it */
    }
    for (guint i = 0; i < idle->len; i++)
      box_acme_order_done (g_ptr_array_index (idle, i), "boxd is shutting down");
    if (!g_main_context_iteration (NULL, FALSE))
      g_usleep (10 * 1000);
  }
  while (g_main_context_iteration (NULL, FALSE))
    ;   /* the waiters' callbacks */
}
