/* box-edge-http.c: the edge's plain-HTTP listener; see box-edge-http.h. */
#include "config.h"

#include "box-edge-http.h"

#include <libsoup/soup.h>
#include <string.h>

#include "box-edge-server.h"
#include "box-error.h"
#include "box-http-keepalive.h"

struct _BoxEdgeHttp {
  GObject            parent_instance;
  BoxEdgeChallenges *challenges;
  SoupServer        *soup;
  BoxHttpKeepalive  *keepalive;
  guint              https_port;
};

G_DEFINE_FINAL_TYPE (BoxEdgeHttp, box_edge_http, G_TYPE_OBJECT)

static gboolean
valid_host (const char *host, gsize len)
{
  if (len == 0 || len > 253)
    return FALSE;
  if (host[0] == '[') {
    if (len < 3 || host[len - 1] != ']')
      return FALSE;
    for (gsize i = 1; i < len - 1; i++)
      if (!g_ascii_isxdigit (host[i]) && host[i] != ':' && host[i] != '.')
        return FALSE;
    return TRUE;
  }
  for (gsize i = 0; i < len; i++)
    if (!g_ascii_isalnum (host[i]) && host[i] != '-' && host[i] != '.')
      return FALSE;
  return TRUE;
}

char *
box_edge_http_location (const char *host, const char *path, const char *query,
                        guint https_port)
{
  const char *end;
  g_autofree char *name = NULL;
  g_autofree char *port = NULL;

  if (host == NULL || path == NULL || path[0] != '/')
    return NULL;
  /* the Host's own :port (digits only) goes; the edge's https port comes */
  end = host[0] == '[' ? strchr (host, ']') : strchr (host, ':');
  if (end != NULL && host[0] == '[')
    end++;
  if (end == NULL)
    end = host + strlen (host);
  if (*end != '\0') {
    if (*end != ':' || end[1] == '\0' || strspn (end + 1, "0123456789") != strlen (end + 1))
      return NULL;
  }
  if (!valid_host (host, (gsize) (end - host)))
    return NULL;
  name = g_ascii_strdown (host, end - host);
  port = https_port != 443 ? g_strdup_printf (":%u", https_port) : g_strdup ("");
  return g_strconcat ("https://", name, port, path, query != NULL ? "?" : "",
                      query != NULL ? query : "", NULL);
}

static void
reply_text (SoupServerMessage *msg, guint status, const char *text)
{
  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, "text/plain; charset=utf-8", SOUP_MEMORY_COPY, text,
                                    strlen (text));
}

/* Answers from the head alone: the body is never read. */
static void
early_handler (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
               gpointer user_data)
{
  BoxEdgeHttp *self = user_data;
  SoupMessageHeaders *request = soup_server_message_get_request_headers (msg);
  SoupMessageHeaders *response = soup_server_message_get_response_headers (msg);
  GUri *uri = soup_server_message_get_uri (msg);
  g_autofree char *location = NULL;

  soup_message_body_set_accumulate (soup_server_message_get_request_body (msg), FALSE);
  soup_message_headers_replace (response, "Connection", "close");
  if (g_str_has_prefix (path, BOX_EDGE_ACME_PREFIX)) {
    const char *key = box_edge_challenges_lookup (self->challenges,
                                                  path + strlen (BOX_EDGE_ACME_PREFIX));

    if (key != NULL)
      reply_text (msg, SOUP_STATUS_OK, key);
    else
      reply_text (msg, SOUP_STATUS_NOT_FOUND, "no such challenge\n");
    return;
  }
  location = box_edge_http_location (soup_message_headers_get_one (request, "Host"), path,
                                     g_uri_get_query (uri), self->https_port);
  if (location == NULL) {
    reply_text (msg, SOUP_STATUS_BAD_REQUEST, "bad Host\n");
    return;
  }
  soup_message_headers_replace (response, "Location", location);
  reply_text (msg, SOUP_STATUS_PERMANENT_REDIRECT, "use https\n");
}

static void
handler (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
         gpointer user_data)
{
  if (soup_server_message_get_status (msg) == 0)
    early_handler (server, msg, path, query, user_data);
}

static void
box_edge_http_dispose (GObject *object)
{
  BoxEdgeHttp *self = BOX_EDGE_HTTP (object);

  g_clear_pointer (&self->keepalive, box_http_keepalive_free);
  if (self->soup != NULL)
    soup_server_disconnect (self->soup);
  g_clear_object (&self->soup);
  g_clear_object (&self->challenges);
  G_OBJECT_CLASS (box_edge_http_parent_class)->dispose (object);
}

static void
box_edge_http_class_init (BoxEdgeHttpClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = box_edge_http_dispose;
}

static void
box_edge_http_init (BoxEdgeHttp *self)
{
}

BoxEdgeHttp *
box_edge_http_new (BoxEdgeChallenges *challenges, guint https_port, guint header_timeout_s)
{
  BoxEdgeHttp *self = g_object_new (BOX_TYPE_EDGE_HTTP, NULL);

  self->challenges = g_object_ref (challenges);
  self->https_port = https_port;
  self->soup = soup_server_new ("server-header", "boxd/" PACKAGE_VERSION " ", "raw-paths", TRUE,
                                NULL);
  self->keepalive = box_http_keepalive_new (self->soup, 5, 64);
  box_http_keepalive_set_header_timeout (self->keepalive, header_timeout_s);
  soup_server_add_early_handler (self->soup, NULL, early_handler, self, NULL);
  soup_server_add_handler (self->soup, NULL, handler, self, NULL);
  return self;
}

gboolean
box_edge_http_listen (BoxEdgeHttp *self, const char *address, GError **error)
{
  g_autoptr(GSocketAddress) socket_address = NULL;
  g_autoptr(GError) local_error = NULL;

  g_return_val_if_fail (BOX_IS_EDGE_HTTP (self), FALSE);
  socket_address = box_edge_listen_address (address, "edge_http_listen", error);
  if (socket_address == NULL)
    return FALSE;
  if (!soup_server_listen (self->soup, socket_address, 0, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot listen on %s: %s", address,
                 local_error->message);
    return FALSE;
  }
  return TRUE;
}

guint
box_edge_http_get_port (BoxEdgeHttp *self)
{
  g_autoptr(GSList) listeners = NULL;

  g_return_val_if_fail (BOX_IS_EDGE_HTTP (self), 0);
  listeners = soup_server_get_listeners (self->soup);
  for (GSList *l = listeners; l != NULL; l = l->next) {
    g_autoptr(GSocketAddress) address = g_socket_get_local_address (l->data, NULL);

    if (address != NULL && G_IS_INET_SOCKET_ADDRESS (address))
      return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (address));
  }
  return 0;
}

void
box_edge_http_shutdown (BoxEdgeHttp *self)
{
  g_return_if_fail (BOX_IS_EDGE_HTTP (self));
  g_clear_pointer (&self->keepalive, box_http_keepalive_free);
  soup_server_disconnect (self->soup);
}
