/* box-edge-access.c: who may open a sandbox's URL; see box-edge-access.h. */
#include "config.h"

#include "box-edge-access.h"

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
