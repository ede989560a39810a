/* box-edge-route.c: hosts, the token parameter and cookie; see
 * box-edge-route.h. */
#include "config.h"

#include "box-edge-route.h"

#include <string.h>

static gboolean
is_label (const char *s)
{
  gsize len = strlen (s);

  if (len == 0 || len > 63 || s[0] == '-' || s[len - 1] == '-' || strstr (s, "--") != NULL)
    return FALSE;
  for (const char *p = s; *p != '\0'; p++)
    if (!g_ascii_islower (*p) && !g_ascii_isdigit (*p) && *p != '-')
      return FALSE;
  return TRUE;
}

static gboolean
parse_port (const char *s, guint *port)
{
  guint64 value = 0;

  if (s[0] == '0' || !g_ascii_string_to_unsigned (s, 10, 1, 65535, &value, NULL))
    return FALSE;
  *port = (guint) value;
  return TRUE;
}

gboolean
box_edge_parse_host (const char *host, const char *domain, char **name, char **project,
                     guint *port)
{
  g_autofree char *lower = NULL;
  g_autofree char *suffix = NULL;
  g_auto(GStrv) parts = NULL;
  char *colon;
  gsize len;
  guint n;

  if (host == NULL || domain == NULL || domain[0] == '\0')
    return FALSE;
  lower = g_ascii_strdown (host, -1);
  colon = strrchr (lower, ':');
  if (colon != NULL) {
    guint ignored;
    if (!parse_port (colon + 1, &ignored))
      return FALSE;
    *colon = '\0';
  }
  len = strlen (lower);
  if (len > 0 && lower[len - 1] == '.')       /* the absolute form */
    lower[--len] = '\0';
  suffix = g_strdup_printf (".%s", domain);
  if (!g_str_has_suffix (lower, suffix) || len <= strlen (suffix))
    return FALSE;
  lower[len - strlen (suffix)] = '\0';
  if (strchr (lower, '.') != NULL)
    return FALSE;
  parts = g_strsplit (lower, "--", 0);
  n = g_strv_length (parts);
  if (n < 2 || n > 3)
    return FALSE;
  *port = 0;
  if (n == 3 && !parse_port (parts[0], port))
    return FALSE;
  if (!is_label (parts[n - 2]) || !is_label (parts[n - 1]))
    return FALSE;
  *name = g_strdup (parts[n - 2]);
  *project = g_strdup (parts[n - 1]);
  return TRUE;
}

/* Splits @list at @sep, drops the items named box_token (their value, the
 * last one, in @token) and joins the rest with @join. */
static char *
strip (const char *list, char sep, const char *join, gboolean trim, gboolean decode, char **token)
{
  const char sep_s[2] = { sep, '\0' };
  g_auto(GStrv) items = NULL;
  g_autoptr(GString) out = NULL;

  *token = NULL;
  if (list == NULL)
    return NULL;
  items = g_strsplit (list, sep_s, 0);
  for (guint i = 0; items[i] != NULL; i++) {
    const char *item = trim ? g_strstrip (items[i]) : items[i];
    const char *eq = strchr (item, '=');
    gsize key_len = eq != NULL ? (gsize) (eq - item) : strlen (item);

    if (item[0] == '\0')
      continue;
    if (key_len == strlen (BOX_EDGE_TOKEN) && strncmp (item, BOX_EDGE_TOKEN, key_len) == 0) {
      g_free (*token);
      *token = eq == NULL ? g_strdup ("")
               : decode ? g_uri_unescape_string (eq + 1, NULL) : g_strdup (eq + 1);
      if (*token == NULL)
        *token = g_strdup ("");
      continue;
    }
    if (out == NULL)
      out = g_string_new (item);
    else
      g_string_append_printf (out, "%s%s", join, item);
  }
  return out != NULL ? g_string_free (g_steal_pointer (&out), FALSE) : NULL;
}

char *
box_edge_strip_query (const char *query, char **token)
{
  return strip (query, '&', "&", FALSE, TRUE, token);
}

char *
box_edge_strip_cookie (const char *cookie, char **token)
{
  return strip (cookie, ';', "; ", TRUE, FALSE, token);
}
