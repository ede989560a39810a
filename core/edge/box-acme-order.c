/* box-acme-order.c: one ACME order (RFC 8555 7.4): the directory, the
 * account, newOrder for one host, its http-01 authorization, finalize
 * with a CSR and the certificate's download; see box-acme.h.  Each step
 * is one request (box-acme-http.c) whose reply goes to the next step's
 * function. */
#include "config.h"

#include <gnutls/x509.h>
#include <string.h>

#include "box-acme-jws.h"
#include "box-acme-private.h"

#define POLLS_MAX        60
#define POLL_DEFAULT_S   1
#define CHAIN_MAX        8

/* ---- the steps ------------------------------------------------------------- */

static void step_account (BoxAcmeOrder *order);
static void step_order (BoxAcmeOrder *order);
static void got_authz (BoxAcmeOrder *order, BoxAcmeReply *reply);
static void got_order (BoxAcmeOrder *order, BoxAcmeReply *reply);

static gboolean
deadline (gpointer user_data)
{
  BoxAcmeOrder *order = user_data;

  order->deadline = 0;
  g_cancellable_cancel (order->cancel);
  return G_SOURCE_REMOVE;
}

static void
got_directory (BoxAcmeOrder *order, BoxAcmeReply *reply)
{
  BoxAcme *self = order->acme;
  const char *nonce_url = box_acme_member_url (reply->object, "newNonce");
  const char *account_url = box_acme_member_url (reply->object, "newAccount");
  const char *order_url = box_acme_member_url (reply->object, "newOrder");

  if (!box_acme_ok_or_fail (order, reply, "the directory"))
    return;
  if (nonce_url == NULL || account_url == NULL || order_url == NULL) {
    box_acme_fail (order, "the directory %s names no newNonce, newAccount or newOrder", self->directory);
    return;
  }
  g_free (self->new_nonce);
  g_free (self->new_account);
  g_free (self->new_order);
  self->new_nonce = g_strdup (nonce_url);
  self->new_account = g_strdup (account_url);
  self->new_order = g_strdup (order_url);
  self->dir_loaded = TRUE;
  step_account (order);
}

void
box_acme_order_run (BoxAcmeOrder *order)
{
  order->deadline = g_timeout_add_seconds (BOX_ACME_ORDER_S, deadline, order);
  if (!order->acme->dir_loaded)
    box_acme_fetch (order, "GET", order->acme->directory, NULL, got_directory);
  else
    step_account (order);
}

static void
got_account (BoxAcmeOrder *order, BoxAcmeReply *reply)
{
  BoxAcme *self = order->acme;

  if (!box_acme_ok_or_fail (order, reply, "newAccount"))
    return;
  if (!box_acme_good_url (reply->location)) {
    box_acme_fail (order, "newAccount gave no account URL");
    return;
  }
  if (self->kid == NULL)
    g_message ("acme: account %s", reply->location);
  g_free (self->kid);
  self->kid = g_strdup (reply->location);
  step_order (order);
}

static void
step_account (BoxAcmeOrder *order)
{
  BoxAcme *self = order->acme;
  BoxConfig *config = box_engine_get_config (self->engine);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *payload = NULL;

  if (self->kid != NULL) {
    step_order (order);
    return;
  }
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "termsOfServiceAgreed");
  json_builder_add_boolean_value (b, TRUE);
  if (config->acme_email != NULL && config->acme_email[0] != '\0') {
    g_autofree char *mailto = g_strdup_printf ("mailto:%s", config->acme_email);

    json_builder_set_member_name (b, "contact");
    json_builder_begin_array (b);
    json_builder_add_string_value (b, mailto);
    json_builder_end_array (b);
  }
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  payload = json_to_string (root, FALSE);
  box_acme_post (order, self->new_account, payload, got_account);
}

static void
step_order (BoxAcmeOrder *order)
{
  g_autofree char *payload = g_strdup_printf (
    "{\"identifiers\":[{\"type\":\"dns\",\"value\":\"%s\"}]}", order->host);

  box_acme_post (order, order->acme->new_order, payload, got_order);
}

static gboolean
poll_later (gpointer user_data)
{
  BoxAcmeOrder *order = user_data;

  order->poll_timer = 0;
  if (order->finalize == NULL || order->authz != NULL)
    box_acme_post (order, order->authz, NULL, got_authz);
  else
    box_acme_post (order, order->url, NULL, got_order);
  return G_SOURCE_REMOVE;
}

static void
poll (BoxAcmeOrder *order, BoxAcmeReply *reply, const char *what)
{
  if (++order->polls > POLLS_MAX) {
    box_acme_fail (order, "%s still not done after %d polls", what, POLLS_MAX);
    return;
  }
  order->poll_timer = g_timeout_add_seconds (reply->retry_after > 0 ? reply->retry_after
                                                                    : POLL_DEFAULT_S,
                                             poll_later, order);
}

static void
got_certificate (BoxAcmeOrder *order, BoxAcmeReply *reply)
{
  g_autoptr(GError) error = NULL;
  gnutls_x509_crt_t *crts = NULL;
  unsigned int n = 0;
  gsize len = 0;
  const char *data;
  gnutls_datum_t datum;
  g_autofree char *chain = NULL;
  gboolean acceptable = FALSE;

  if (!box_acme_ok_or_fail (order, reply, "the certificate"))
    return;
  data = g_bytes_get_data (reply->body, &len);
  chain = g_strndup (data, len);
  datum.data = (unsigned char *) chain;
  datum.size = (unsigned int) strlen (chain);
  if (gnutls_x509_crt_list_import2 (&crts, &n, &datum, GNUTLS_X509_FMT_PEM, 0) < 0 || n == 0 ||
      n > CHAIN_MAX) {
    box_acme_fail (order, "the certificate is no PEM chain of 1 to %d certificates", CHAIN_MAX);
    return;
  }
  acceptable = gnutls_x509_crt_check_hostname (crts[0], order->host) != 0 &&
               box_acme_key_matches (crts[0], order->key_pem);
  for (unsigned int i = 0; i < n; i++)
    gnutls_x509_crt_deinit (crts[i]);
  gnutls_free (crts);
  if (!acceptable) {
    box_acme_fail (order, "the certificate does not name %s or is not for the key sent",
                   order->host);
    return;
  }
  if (!box_acme_store (order->acme, order->host, chain, order->key_pem, &error)) {
    box_acme_fail (order, "%s", error->message);
    return;
  }
  g_message ("acme: certificate for %s installed", order->host);
  box_acme_order_done (order, NULL);
}

static void
step_finalize (BoxAcmeOrder *order)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *csr = NULL;
  g_autofree char *payload = NULL;

  g_clear_pointer (&order->key_pem, g_free);
  if (!box_acme_csr (order->host, &order->key_pem, &csr, &error)) {
    box_acme_fail (order, "%s", error->message);
    return;
  }
  payload = g_strdup_printf ("{\"csr\":\"%s\"}", csr);
  order->polls = 0;
  box_acme_post (order, order->finalize, payload, got_order);
}

/* An order object: from newOrder, finalize or a poll. */
static void
got_order (BoxAcmeOrder *order, BoxAcmeReply *reply)
{
  const char *status;
  const char *cert_url;
  JsonArray *authzs;

  if (!box_acme_ok_or_fail (order, reply, "the order"))
    return;
  if (reply->object == NULL || (status = json_object_get_string_member_with_default (
                                  reply->object, "status", NULL)) == NULL) {
    box_acme_fail (order, "the order is no JSON object with a status");
    return;
  }
  if (order->url == NULL) {
    /* newOrder's answer: where it lives, its authorization, finalize */
    const char *finalize = box_acme_member_url (reply->object, "finalize");

    authzs = box_acme_member_array (reply->object, "authorizations");
    if (!box_acme_good_url (reply->location) || finalize == NULL || authzs == NULL ||
        json_array_get_length (authzs) != 1 ||
        !box_acme_good_url (json_node_get_string (json_array_get_element (authzs, 0)))) {
      box_acme_fail (order, "newOrder gave no order URL, finalize URL or single authorization");
      return;
    }
    order->url = g_strdup (reply->location);
    order->finalize = g_strdup (finalize);
    order->authz = g_strdup (json_node_get_string (json_array_get_element (authzs, 0)));
  }
  if (g_str_equal (status, "pending")) {
    box_acme_post (order, order->authz, NULL, got_authz);
  } else if (g_str_equal (status, "ready")) {
    g_clear_pointer (&order->authz, g_free);
    step_finalize (order);
  } else if (g_str_equal (status, "processing")) {
    g_clear_pointer (&order->authz, g_free);
    poll (order, reply, "the order");
  } else if (g_str_equal (status, "valid") &&
             (cert_url = box_acme_member_url (reply->object, "certificate")) != NULL) {
    box_acme_post (order, cert_url, NULL, got_certificate);
  } else {
    g_autofree char *why = box_acme_problem (reply);

    box_acme_fail (order, "the order is %s (%s)", status, why);
  }
}

/* The http-01 challenge of @authz: its token in the store, then asks the
 * server to validate. */
static void
answer_challenge (BoxAcmeOrder *order, JsonObject *authz)
{
  JsonArray *challenges = box_acme_member_array (authz, "challenges");
  g_autofree char *key_authorization = NULL;

  for (guint i = 0; challenges != NULL && i < json_array_get_length (challenges) && i < 16; i++) {
    JsonObject *c = box_acme_element_object (challenges, i);
    const char *url = box_acme_member_url (c, "url");
    const char *token;

    if (c == NULL || url == NULL ||
        g_strcmp0 (json_object_get_string_member_with_default (c, "type", NULL), "http-01") != 0)
      continue;
    token = json_object_get_string_member_with_default (c, "token", NULL);
    key_authorization = g_strdup_printf ("%s.%s", token != NULL ? token : "",
                                         order->acme->thumbprint);
    if (token == NULL ||
        !box_edge_challenges_put (order->acme->challenges, token, key_authorization)) {
      box_acme_fail (order, "the http-01 challenge's token is bad, or too many challenges are open");
      return;
    }
    order->token = g_strdup (token);
    order->polls = 0;
    box_acme_post (order, url, "{}", got_authz);
    return;
  }
  box_acme_fail (order, "the authorization offers no http-01 challenge");
}

/* An authorization (POST-as-GET) or a challenge (its POST) object. */
static void
got_authz (BoxAcmeOrder *order, BoxAcmeReply *reply)
{
  const char *status;

  if (!box_acme_ok_or_fail (order, reply, "the authorization"))
    return;
  status = reply->object != NULL
           ? json_object_get_string_member_with_default (reply->object, "status", NULL) : NULL;
  if (status == NULL) {
    box_acme_fail (order, "the authorization has no status");
    return;
  }
  /* a challenge's answer has a "token"; the authorization's a "challenges" */
  if (json_object_has_member (reply->object, "token")) {
    if (g_str_equal (status, "invalid")) {
      g_autofree char *why = box_acme_problem (reply);

      box_acme_fail (order, "the challenge is invalid (%s)", why);
      return;
    }
    poll (order, reply, "the authorization");
    return;
  }
  if (g_str_equal (status, "valid")) {
    if (order->token != NULL) {
      box_edge_challenges_remove (order->acme->challenges, order->token);
      g_clear_pointer (&order->token, g_free);
    }
    g_clear_pointer (&order->authz, g_free);
    step_finalize (order);
  } else if (g_str_equal (status, "pending") && order->token == NULL) {
    answer_challenge (order, reply->object);
  } else if (g_str_equal (status, "pending") || g_str_equal (status, "processing")) {
    poll (order, reply, "the authorization");
  } else {
    JsonArray *challenges = box_acme_member_array (reply->object, "challenges");
    const char *detail = NULL;

    for (guint i = 0; challenges != NULL && i < json_array_get_length (challenges); i++) {
      JsonObject *e = box_acme_member_object (box_acme_element_object (challenges, i), "error");

      if (e != NULL)
        detail = json_object_get_string_member_with_default (e, "detail", NULL);
    }
    box_acme_fail (order, "the authorization is %s: %s", status, detail != NULL ? detail : "no detail");
  }
}
