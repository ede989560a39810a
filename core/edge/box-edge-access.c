/* box-edge-access.c: who may open a sandbox's URL; see box-edge-access.h. */
#include "config.h"

#include "box-edge-access.h"

#include <string.h>

#include "box-edge-route.h"

gboolean
box_edge_project_credential (BoxEngine *engine, const char *project, const char *credential,
                             gboolean *read_only)
{
  g_autoptr(BoxPrincipal) principal = NULL;

  if (credential == NULL || credential[0] == '\0')
    return FALSE;
  principal = box_engine_authenticate (engine, credential, NULL);
  if (principal == NULL || principal->kind != BOX_PRINCIPAL_KEY ||
      g_strcmp0 (principal->project, project) != 0)
    return FALSE;
  if (read_only != NULL)
    *read_only = principal->key != NULL && box_engine_key_is_read_only (engine,
                                                                         principal->key->id);
  return TRUE;
}

gboolean
box_edge_project_key (BoxEngine *engine, const char *project, const char *credential)
{
  gboolean read_only = FALSE;

  return box_edge_project_credential (engine, project, credential, &read_only) && !read_only;
}

char *
box_edge_cookie_token (SoupMessageHeaders *headers)
{
  SoupMessageHeadersIter iter;
  const char *name, *value;
  char *found = NULL;

  soup_message_headers_iter_init (&iter, headers);
  while (soup_message_headers_iter_next (&iter, &name, &value)) {
    g_autofree char *token = NULL;
    g_autofree char *rest = NULL;

    if (g_ascii_strcasecmp (name, "Cookie") != 0)
      continue;
    rest = box_edge_strip_cookie (value, &token);
    if (token != NULL) {
      g_free (found);
      found = g_steal_pointer (&token);
    }
  }
  return found;
}

gboolean
box_edge_hop_by_hop (SoupMessageHeaders *headers, const char *name)
{
  static const char *const hop[] = {
    "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade",
    "Proxy-Authorization", "Proxy-Authenticate", NULL,
  };

  for (guint i = 0; hop[i] != NULL; i++)
    if (g_ascii_strcasecmp (name, hop[i]) == 0)
      return TRUE;
  /* and what the Connection header names */
  return soup_message_headers_header_contains (headers, "Connection", name);
}

GString *
box_edge_upstream_head (const BoxEdgeUpstream *up)
{
  GString *text = g_string_new (NULL);
  SoupMessageHeadersIter iter;
  const char *name, *value;

  g_string_append_printf (text, "%s %s%s%s HTTP/1.1\r\n", up->method, up->path,
                          up->query != NULL ? "?" : "", up->query != NULL ? up->query : "");
  soup_message_headers_iter_init (&iter, up->headers);
  while (soup_message_headers_iter_next (&iter, &name, &value)) {
    if (box_edge_hop_by_hop (up->headers, name) ||
        g_ascii_strncasecmp (name, "X-Forwarded-", strlen ("X-Forwarded-")) == 0 ||
        (up->strip_authorization && g_ascii_strcasecmp (name, "Authorization") == 0))
      continue;
    if (g_ascii_strcasecmp (name, "Cookie") == 0) {
      g_autofree char *token = NULL;
      g_autofree char *rest = box_edge_strip_cookie (value, &token);
      if (rest != NULL)
        g_string_append_printf (text, "Cookie: %s\r\n", rest);
      continue;
    }
    g_string_append_printf (text, "%s: %s\r\n", name, value);
  }
  g_string_append_printf (text, "X-Forwarded-For: %s\r\nX-Forwarded-Proto: https\r\n"
                          "X-Forwarded-Host: %s\r\n", up->peer, up->host);
  if (up->upgrade)
    g_string_append_printf (text, "Connection: Upgrade\r\nUpgrade: %s\r\n",
                            soup_message_headers_get_one (up->headers, "Upgrade"));
  else if (up->close)
    g_string_append (text, "Connection: close\r\n");
  g_string_append (text, "\r\n");
  return text;
}
