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
box_edge_normalize_host (const char *host, char **out)
{
  g_autofree char *lower = NULL;
  char *colon;
  gsize len;

  *out = NULL;
  if (host == NULL)
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
  if (len == 0)
    return FALSE;
  *out = g_steal_pointer (&lower);
  return TRUE;
}

/* @labels (the host before the domain): [<port>--]<name>--<project>, or
 * with @project NULL [<port>--]<name>. */
static gboolean
parse_labels (const char *labels, char **name, char **project, guint *port)
{
  g_auto(GStrv) parts = NULL;
  guint want = project != NULL ? 2 : 1;
  guint n;

  if (labels[0] == '\0' || strchr (labels, '.') != NULL)
    return FALSE;
  parts = g_strsplit (labels, "--", 0);
  n = g_strv_length (parts);
  if (n < want || n > want + 1)
    return FALSE;
  *port = 0;
  if (n == want + 1 && !parse_port (parts[0], port))
    return FALSE;
  for (guint i = n - want; i < n; i++)
    if (!is_label (parts[i]))
      return FALSE;
  *name = g_strdup (parts[n - want]);
  if (project != NULL)
    *project = g_strdup (parts[n - 1]);
  return TRUE;
}

/* Whether @host is @domain or under it. */
static gboolean
matches (const char *host, const char *domain)
{
  gsize hlen = strlen (host), dlen = strlen (domain);

  return dlen > 0 && (g_str_equal (host, domain) ||
                      (hlen > dlen + 1 && host[hlen - dlen - 1] == '.' &&
                       strcmp (host + hlen - dlen, domain) == 0));
}

/* Whether @host is under @domain (not @domain itself): the labels before it. */
static gboolean
under (const char *host, const char *domain, char **labels)
{
  if (!matches (host, domain) || g_str_equal (host, domain))
    return FALSE;
  *labels = g_strndup (host, strlen (host) - strlen (domain) - 1);
  return TRUE;
}

gboolean
box_edge_parse_host (const char *host, const char *domain, char **name, char **project,
                     guint *port)
{
  g_autofree char *lower = NULL;
  g_autofree char *labels = NULL;

  if (domain == NULL || !box_edge_normalize_host (host, &lower) || !under (lower, domain, &labels))
    return FALSE;
  return parse_labels (labels, name, project, port);
}

gboolean
box_edge_resolve_host (const char *host, const char *domain, BoxEdgeDomainLookup lookup,
                       gpointer data, char **name, char **project, guint *port)
{
  g_autofree char *lower = NULL;
  g_autofree char *labels = NULL;
  g_autofree char *owner = NULL;
  gsize domain_len;

  if (!box_edge_normalize_host (host, &lower))
    return FALSE;
  owner = lookup (data, lower, &labels);
  if (owner != NULL) {
    /* the own domain's length: what is left after its labels and their dot */
    domain_len = strlen (lower) - strlen (labels) - (labels[0] != '\0' ? 1 : 0);
    /* a sandbox domain at least as long wins (it matches when it is the
     * host's suffix too) */
    if (domain == NULL || strlen (domain) < domain_len || !matches (lower, domain)) {
      if (!parse_labels (labels, name, NULL, port))
        return FALSE;
      *project = g_steal_pointer (&owner);
      return TRUE;
    }
  }
  return box_edge_parse_host (lower, domain, name, project, port);
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
