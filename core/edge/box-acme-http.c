/* box-acme-http.c: the ACME client's HTTP exchange (libsoup 3, async):
 * bounded replies, signed POSTs with nonces, problem documents; the
 * steps of an order are box-acme-order.c.
 *
 * Signed requests take the last Replay-Nonce (or a new one from newNonce)
 * and are sent again on badNonce, a few times.  Replies are bounded in
 * size; an error reply is logged with its problem document's type and
 * detail and ends the order. */
#include "config.h"


#include <string.h>

#include "box-acme-jws.h"
#include "box-acme-private.h"
#include "box-error.h"

/* An answer larger than this is refused (a chain is a few KiB). */
#define REPLY_MAX        (64 * 1024)
#define REQUEST_TIMEOUT_S 30
#define BAD_NONCE_TRIES  5
#define POLL_MAX_S       10

typedef struct {
  BoxAcmeOrder *order;
  SoupMessage  *msg;
  BoxAcmeNext   next;
  GInputStream *stream;
  GByteArray   *body;
} Fetch;


static void
reply_free (BoxAcmeReply *reply)
{
  g_free (reply->location);
  g_free (reply->content_type);
  g_clear_pointer (&reply->body, g_bytes_unref);
  g_clear_pointer (&reply->object, json_object_unref);
  g_free (reply);
}

gboolean
box_acme_http_init (BoxAcme *self, const char *directory, const char *ca_file, GError **error)
{
  g_autoptr(GUri) uri = NULL;

  uri = directory != NULL ? g_uri_parse (directory, G_URI_FLAGS_NONE, NULL) : NULL;
  if (uri == NULL || g_strcmp0 (g_uri_get_scheme (uri), "https") != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "acme_directory %s is no https URL", directory != NULL ? directory : "(none)");
    return FALSE;
  }
  self->directory = g_strdup (directory);
  self->session = soup_session_new_with_options ("timeout", REQUEST_TIMEOUT_S,
                                                 "idle-timeout", 60,
                                                 "user-agent", "boxd-acme/" PACKAGE_VERSION,
                                                 "max-conns-per-host", 4, NULL);
  if (ca_file != NULL && ca_file[0] != '\0') {
    g_autoptr(GTlsDatabase) db = NULL;
    g_autoptr(GError) local_error = NULL;

    db = g_tls_file_database_new (ca_file, &local_error);
    if (db == NULL) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "acme_ca_file %s: %s", ca_file,
                   local_error->message);
      return FALSE;
    }
    soup_session_set_tls_database (self->session, db);
  }
  return TRUE;
}

BoxAcmeOrder *
box_acme_order_new (BoxAcme *self, const char *host)
{
  BoxAcmeOrder *order = g_new0 (BoxAcmeOrder, 1);

  order->acme = g_object_ref (self);
  order->host = g_strdup (host);
  order->waiters = g_ptr_array_new ();
  order->cancel = g_cancellable_new ();
  return order;
}

void
box_acme_order_free (BoxAcmeOrder *order)
{
  if (order->deadline != 0)
    g_source_remove (order->deadline);
  if (order->poll_timer != 0)
    g_source_remove (order->poll_timer);
  if (order->token != NULL)
    box_edge_challenges_remove (order->acme->challenges, order->token);
  g_ptr_array_unref (order->waiters);
  g_object_unref (order->cancel);
  g_free (order->host);
  g_free (order->post_url);
  g_free (order->post_payload);
  g_free (order->url);
  g_free (order->authz);
  g_free (order->finalize);
  g_free (order->token);
  g_free (order->key_pem);
  g_object_unref (order->acme);
  g_free (order);
}

void
box_acme_fail (BoxAcmeOrder *order, const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  box_acme_order_done (order, message);
}

/* "HTTP <status>: <type>: <detail>" of an error reply. */
char *
box_acme_problem (BoxAcmeReply *reply)
{
  const char *type = NULL, *detail = NULL;

  if (reply->object != NULL) {
    type = json_object_get_string_member_with_default (reply->object, "type", NULL);
    detail = json_object_get_string_member_with_default (reply->object, "detail", NULL);
  }
  return g_strdup_printf ("HTTP %u: %s: %s", reply->status, type != NULL ? type : "no problem type",
                          detail != NULL ? detail : "no detail");
}

/* A URL the server gave: https only, bounded. */
gboolean
box_acme_good_url (const char *url)
{
  return url != NULL && strlen (url) < 2048 && g_str_has_prefix (url, "https://") &&
         g_uri_is_valid (url, G_URI_FLAGS_NONE, NULL);
}

const char *
box_acme_member_url (JsonObject *object, const char *name)
{
  const char *url;

  if (object == NULL)
    return NULL;
  url = json_object_get_string_member_with_default (object, name, NULL);
  return box_acme_good_url (url) ? url : NULL;
}

JsonArray *
box_acme_member_array (JsonObject *object, const char *name)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, name) : NULL;

  return node != NULL && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
}

JsonObject *
box_acme_element_object (JsonArray *array, guint i)
{
  JsonNode *node = json_array_get_element (array, i);

  return JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

JsonObject *
box_acme_member_object (JsonObject *object, const char *name)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, name) : NULL;

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

/* ---- the exchange --------------------------------------------------------- */

static void
fetch_free (Fetch *f)
{
  g_clear_object (&f->msg);
  g_clear_object (&f->stream);
  if (f->body != NULL)
    g_byte_array_unref (f->body);
  g_free (f);
}

static void
fetch_complete (Fetch *f)
{
  BoxAcmeOrder *order = f->order;
  BoxAcme *self = order->acme;
  SoupMessageHeaders *headers = soup_message_get_response_headers (f->msg);
  BoxAcmeReply *reply = g_new0 (BoxAcmeReply, 1);
  BoxAcmeNext next = f->next;
  const char *nonce = soup_message_headers_get_one (headers, "Replay-Nonce");
  const char *retry = soup_message_headers_get_one (headers, "Retry-After");
  const char *type = soup_message_headers_get_content_type (headers, NULL);

  if (nonce != NULL && strlen (nonce) <= BOX_EDGE_CHALLENGE_MAX_TOKEN) {
    g_free (self->nonce);
    self->nonce = g_strdup (nonce);
  }
  reply->status = soup_message_get_status (f->msg);
  reply->location = g_strdup (soup_message_headers_get_one (headers, "Location"));
  if (retry != NULL)
    reply->retry_after = (guint) MIN (g_ascii_strtoull (retry, NULL, 10), POLL_MAX_S);
  reply->content_type = g_strdup (type);
  reply->body = g_byte_array_free_to_bytes (g_steal_pointer (&f->body));
  if (type != NULL && (g_str_equal (type, "application/json") ||
                       g_str_equal (type, "application/problem+json"))) {
    g_autoptr(JsonParser) parser = json_parser_new ();
    gsize len = 0;
    const char *data = g_bytes_get_data (reply->body, &len);

    if (len > 0 && json_parser_load_from_data (parser, data, (gssize) len, NULL) &&
        JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
      reply->object = json_object_ref (json_node_get_object (json_parser_get_root (parser)));
  }
  fetch_free (f);
  next (order, reply);
  reply_free (reply);
}

static void
body_read (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Fetch *f = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) chunk = g_input_stream_read_bytes_finish (G_INPUT_STREAM (source), result,
                                                              &error);

  if (chunk == NULL) {
    BoxAcmeOrder *order = f->order;

    fetch_free (f);
    box_acme_fail (order, "reading the answer: %s", error->message);
    return;
  }
  if (g_bytes_get_size (chunk) == 0) {
    fetch_complete (f);
    return;
  }
  g_byte_array_append (f->body, g_bytes_get_data (chunk, NULL), g_bytes_get_size (chunk));
  if (f->body->len > REPLY_MAX) {
    BoxAcmeOrder *order = f->order;

    fetch_free (f);
    box_acme_fail (order, "an answer larger than %d bytes", REPLY_MAX);
    return;
  }
  g_input_stream_read_bytes_async (f->stream, REPLY_MAX + 1 - f->body->len, G_PRIORITY_DEFAULT,
                                   f->order->cancel, body_read, f);
}

static void
sent (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Fetch *f = user_data;
  g_autoptr(GError) error = NULL;

  f->stream = soup_session_send_finish (SOUP_SESSION (source), result, &error);
  if (f->stream == NULL) {
    BoxAcmeOrder *order = f->order;

    fetch_free (f);
    box_acme_fail (order, "%s", error->message);
    return;
  }
  f->body = g_byte_array_new ();
  g_input_stream_read_bytes_async (f->stream, REPLY_MAX + 1, G_PRIORITY_DEFAULT, f->order->cancel,
                                   body_read, f);
}

/* Sends @method @url (with @body, a JWS, for POST); the reply goes to @next. */
void
box_acme_fetch (BoxAcmeOrder *order, const char *method, const char *url, const char *body,
       BoxAcmeNext next)
{
  Fetch *f = g_new0 (Fetch, 1);

  f->order = order;
  f->next = next;
  f->msg = soup_message_new (method, url);
  if (f->msg == NULL) {
    fetch_free (f);
    box_acme_fail (order, "a bad URL %s", url);
    return;
  }
  soup_message_add_flags (f->msg, SOUP_MESSAGE_NO_REDIRECT);
  if (body != NULL) {
    g_autoptr(GBytes) bytes = g_bytes_new (body, strlen (body));

    soup_message_set_request_body_from_bytes (f->msg, "application/jose+json", bytes);
  }
  soup_session_send_async (order->acme->session, f->msg, G_PRIORITY_DEFAULT, order->cancel, sent, f);
}

static void post_signed (BoxAcmeOrder *order);

static void
got_nonce (BoxAcmeOrder *order, BoxAcmeReply *reply)
{
  if (order->acme->nonce == NULL) {
    g_autofree char *why = box_acme_problem (reply);

    box_acme_fail (order, "newNonce gave no nonce (%s)", why);
    return;
  }
  post_signed (order);
}

static void
posted (BoxAcmeOrder *order, BoxAcmeReply *reply)
{
  const char *type = reply->object != NULL
                     ? json_object_get_string_member_with_default (reply->object, "type", NULL)
                     : NULL;

  if (reply->status == 400 && g_strcmp0 (type, "urn:ietf:params:acme:error:badNonce") == 0 &&
      ++order->bad_nonces < BAD_NONCE_TRIES) {
    g_debug ("acme: badNonce for %s, sending again", order->host);
    post_signed (order);
    return;
  }
  order->post_next (order, reply);
}

/* The signed request in order->post_*: with a fresh nonce, and the kid
 * (the jwk for newAccount). */
static void
post_signed (BoxAcmeOrder *order)
{
  BoxAcme *self = order->acme;
  g_autoptr(GError) error = NULL;
  g_autofree char *nonce = NULL;
  g_autofree char *jws = NULL;

  if (self->nonce == NULL) {
    box_acme_fetch (order, "HEAD", self->new_nonce, NULL, got_nonce);
    return;
  }
  nonce = g_steal_pointer (&self->nonce);
  /* newAccount always with the jwk (RFC 8555 6.2), also when another
   * order learnt the kid meanwhile; every other request with the kid */
  jws = box_acme_jws (self->key, self->jwk,
                      g_strcmp0 (order->post_url, self->new_account) == 0 ? NULL : self->kid,
                      nonce, order->post_url, order->post_payload, &error);
  if (jws == NULL) {
    box_acme_fail (order, "%s", error->message);
    return;
  }
  box_acme_fetch (order, "POST", order->post_url, jws, posted);
}

/* POSTs @payload (NULL: POST-as-GET) to @url, signed; the reply to @next. */
void
box_acme_post (BoxAcmeOrder *order, const char *url, const char *payload, BoxAcmeNext next)
{
  g_free (order->post_url);
  g_free (order->post_payload);
  order->post_url = g_strdup (url);
  order->post_payload = g_strdup (payload);
  order->post_next = next;
  order->bad_nonces = 0;
  post_signed (order);
}

/* Whether @reply is a success; otherwise the order fails with what the
 * server said doing @what. */
gboolean
box_acme_ok_or_fail (BoxAcmeOrder *order, BoxAcmeReply *reply, const char *what)
{
  g_autofree char *why = NULL;

  if (reply->status >= 200 && reply->status < 300)
    return TRUE;
  why = box_acme_problem (reply);
  box_acme_fail (order, "%s: %s", what, why);
  return FALSE;
}

