/* box-edge-sni.c: the server name of a ClientHello; see box-edge-sni.h. */
#include "config.h"

#include "box-edge-sni.h"

#include <string.h>

/* A bounded reader over one buffer: every take checks what is left. */
typedef struct {
  const guint8 *p;
  gsize         left;
} Reader;

static gboolean
take (Reader *r, gsize n, const guint8 **out)
{
  if (r->left < n)
    return FALSE;
  if (out != NULL)
    *out = r->p;
  r->p += n;
  r->left -= n;
  return TRUE;
}

static gboolean
take_uint (Reader *r, gsize bytes, gsize *value)
{
  const guint8 *p;

  if (!take (r, bytes, &p))
    return FALSE;
  *value = 0;
  for (gsize i = 0; i < bytes; i++)
    *value = (*value << 8) | p[i];
  return TRUE;
}

/* A sub-reader of the next @len_bytes-prefixed vector. */
static gboolean
take_vector (Reader *r, gsize len_bytes, Reader *sub)
{
  gsize n;

  if (!take_uint (r, len_bytes, &n) || !take (r, n, &sub->p))
    return FALSE;
  sub->left = n;
  return TRUE;
}

static char *
host_name (const guint8 *p, gsize n)
{
  g_autofree char *name = NULL;

  while (n > 0 && p[n - 1] == '.')
    n--;
  if (n == 0 || n > 253)
    return NULL;
  for (gsize i = 0; i < n; i++)
    if (!g_ascii_isalnum (p[i]) && p[i] != '-' && p[i] != '.')
      return NULL;
  name = g_ascii_strdown ((const char *) p, (gssize) n);
  return g_steal_pointer (&name);
}

/* The host name in the server_name extension's body (RFC 6066 3). */
static char *
server_name (Reader ext)
{
  Reader list;

  if (!take_vector (&ext, 2, &list))
    return NULL;
  while (list.left > 0) {
    gsize type;
    Reader entry;

    if (!take_uint (&list, 1, &type) || !take_vector (&list, 2, &entry))
      return NULL;
    if (type == 0)
      return host_name (entry.p, entry.left);
  }
  return NULL;
}

static char *
client_hello_name (Reader r)
{
  gsize type, length, ext_type;
  Reader skip, extensions;

  if (!take_uint (&r, 1, &type) || type != 1 || !take_uint (&r, 3, &length) ||
      length > r.left)
    return NULL;
  r.left = length;
  if (!take (&r, 2 + 32, NULL) ||       /* legacy_version, random */
      !take_vector (&r, 1, &skip) ||    /* legacy_session_id */
      !take_vector (&r, 2, &skip) ||    /* cipher_suites */
      !take_vector (&r, 1, &skip) ||    /* legacy_compression_methods */
      !take_vector (&r, 2, &extensions))
    return NULL;
  while (extensions.left > 0) {
    Reader body;

    if (!take_uint (&extensions, 2, &ext_type) || !take_vector (&extensions, 2, &body))
      return NULL;
    if (ext_type == 0)
      return server_name (body);
  }
  return NULL;
}

BoxEdgeSniResult
box_edge_sni_parse (const guint8 *data, gsize len, char **name)
{
  gsize record_len;

  *name = NULL;
  if (len >= 1 && data[0] != 0x16)
    return BOX_EDGE_SNI_NOT_TLS;
  if (len >= 2 && data[1] != 0x03)
    return BOX_EDGE_SNI_NOT_TLS;
  if (len < 5)
    return BOX_EDGE_SNI_MORE;
  record_len = ((gsize) data[3] << 8) | data[4];
  if (record_len == 0 || record_len > BOX_EDGE_SNI_MAX - 5)
    return BOX_EDGE_SNI_NOT_TLS;
  if (len < 5 + record_len)
    return BOX_EDGE_SNI_MORE;
  *name = client_hello_name ((Reader) { data + 5, record_len });
  return BOX_EDGE_SNI_DONE;
}
