/* box-nftables-sni.c: the name of a proxied connection; see
 * box-nftables-sni.h. */
#include "config.h"

#include "box-nftables-sni.h"

#include <string.h>

const char box_nftables_sni_no_name[] = "no server name";

/* TLS: RFC 8446 5.1 (records), 4.1.2 (ClientHello); RFC 6066 3 (SNI). */
#define TLS_HANDSHAKE       0x16
#define TLS_CLIENT_HELLO    1
#define TLS_RECORD_MAX      16384
#define EXT_SERVER_NAME     0x0000
#define SNI_HOST_NAME       0

static gboolean
name_byte (guint8 c)
{
  return g_ascii_isalnum (c) || c == '-' || c == '_' || c == '.';
}

/* @n bytes as a lower-case host name, or NULL when they cannot be one. */
static char *
checked_name (const guint8 *p, gsize n)
{
  if (n == 0 || n > 254)
    return NULL;
  for (gsize i = 0; i < n; i++)
    if (!name_byte (p[i]))
      return NULL;
  return g_ascii_strdown ((const char *) p, (gssize) n);
}

/* A cursor over a bounded slice; every get checks what is left, and a
 * failed get empties the cursor, so later gets fail too. */
typedef struct {
  const guint8 *at;
  gsize         rest;
} Cursor;

static gboolean
get_bytes (Cursor *c, gsize n, const guint8 **out)
{
  if (c->rest < n) {
    c->rest = 0;
    return FALSE;
  }
  if (out != NULL)
    *out = c->at;
  c->at += n;
  c->rest -= n;
  return TRUE;
}

static gboolean
get_be (Cursor *c, guint width, gsize *out)
{
  const guint8 *p;

  if (!get_bytes (c, width, &p))
    return FALSE;
  *out = 0;
  while (width-- > 0)
    *out = (*out << 8) | *p++;
  return TRUE;
}

/* The next vector with a @width-byte length, as a cursor of its own. */
static gboolean
get_vector (Cursor *c, guint width, Cursor *inner)
{
  gsize n;

  return get_be (c, width, &n) && get_bytes (c, n, &inner->at) && ((inner->rest = n), TRUE);
}

/* The body of a server_name extension: one host_name entry, exactly. */
static BoxNftablesSniResult
server_name_extension (Cursor body, char **name, const char **reason)
{
  Cursor list;

  if (!get_vector (&body, 2, &list) || body.rest != 0) {
    *reason = "malformed server name extension";
    return BOX_NFTABLES_SNI_BAD;
  }
  while (list.rest > 0) {
    gsize type;
    Cursor entry;

    if (!get_be (&list, 1, &type) || !get_vector (&list, 2, &entry)) {
      *reason = "malformed server name list";
      return BOX_NFTABLES_SNI_BAD;
    }
    if (type != SNI_HOST_NAME)
      continue;
    if (*name != NULL) {
      *reason = "more than one server name";
      return BOX_NFTABLES_SNI_BAD;
    }
    *name = checked_name (entry.at, entry.rest);
    if (*name == NULL) {
      *reason = "the server name is not a host name";
      return BOX_NFTABLES_SNI_BAD;
    }
  }
  return BOX_NFTABLES_SNI_DONE;
}

/* A whole ClientHello body (after the handshake header). */
static BoxNftablesSniResult
client_hello (Cursor hello, char **name, const char **reason)
{
  Cursor skipped, extensions;
  gboolean seen_sni = FALSE;

  if (!get_bytes (&hello, 2 + 32, NULL) ||        /* legacy_version, random */
      !get_vector (&hello, 1, &skipped) ||        /* legacy_session_id */
      !get_vector (&hello, 2, &skipped) ||        /* cipher_suites */
      !get_vector (&hello, 1, &skipped)) {        /* legacy_compression_methods */
    *reason = "malformed ClientHello";
    return BOX_NFTABLES_SNI_BAD;
  }
  if (hello.rest == 0) {
    *reason = box_nftables_sni_no_name;
    return BOX_NFTABLES_SNI_BAD;
  }
  if (!get_vector (&hello, 2, &extensions) || hello.rest != 0) {
    *reason = "malformed ClientHello extensions";
    return BOX_NFTABLES_SNI_BAD;
  }
  while (extensions.rest > 0) {
    gsize type;
    Cursor body;

    if (!get_be (&extensions, 2, &type) || !get_vector (&extensions, 2, &body)) {
      *reason = "malformed ClientHello extension";
      return BOX_NFTABLES_SNI_BAD;
    }
    /* An encrypted ClientHello (extension 0xfe0d, or Chrome's GREASE of it) is not
     * refused: the outer server_name is what is checked and what the node
     * resolves and connects to.  With real ECH that is the provider's
     * public name, which must be allowed itself; the inner name is then
     * that server's business, as with a Host inside TLS (fronting). */
    if (type != EXT_SERVER_NAME)
      continue;
    if (seen_sni) {
      *reason = "more than one server name extension";
      return BOX_NFTABLES_SNI_BAD;
    }
    seen_sni = TRUE;
    if (server_name_extension (body, name, reason) != BOX_NFTABLES_SNI_DONE)
      return BOX_NFTABLES_SNI_BAD;
  }
  if (*name == NULL) {
    *reason = box_nftables_sni_no_name;
    return BOX_NFTABLES_SNI_BAD;
  }
  return BOX_NFTABLES_SNI_DONE;
}

BoxNftablesSniResult
box_nftables_sni_parse_tls (const guint8 *data, gsize len, char **name, const char **reason)
{
  g_autofree guint8 *message = NULL;  /* the handshake bytes, records joined */
  gsize have = 0, pos = 0;
  BoxNftablesSniResult result;

  *name = NULL;
  *reason = NULL;
  len = MIN (len, BOX_NFTABLES_SNI_MAX);
  message = g_malloc (len + 1);
  for (;;) {
    gsize record_len, take, hello_len;

    if ((len > pos && data[pos] != TLS_HANDSHAKE) || (len > pos + 1 && data[pos + 1] != 3)) {
      *reason = "not a TLS handshake";
      return BOX_NFTABLES_SNI_BAD;
    }
    if (len - pos < 5)
      break;
    record_len = ((gsize) data[pos + 3] << 8) | data[pos + 4];
    if (record_len == 0 || record_len > TLS_RECORD_MAX) {
      *reason = "bad TLS record length";
      return BOX_NFTABLES_SNI_BAD;
    }
    take = MIN (record_len, len - pos - 5);
    memcpy (message + have, data + pos + 5, take);
    have += take;
    if (have >= 4) {
      if (message[0] != TLS_CLIENT_HELLO) {
        *reason = "not a ClientHello";
        return BOX_NFTABLES_SNI_BAD;
      }
      hello_len = ((gsize) message[1] << 16) | ((gsize) message[2] << 8) | message[3];
      if (hello_len + 4 + 5 > BOX_NFTABLES_SNI_MAX) {
        *reason = "the ClientHello is too large";
        return BOX_NFTABLES_SNI_BAD;
      }
      if (have >= 4 + hello_len) {
        result = client_hello ((Cursor) { message + 4, hello_len }, name, reason);
        if (result != BOX_NFTABLES_SNI_DONE)
          g_clear_pointer (name, g_free);
        return result;
      }
    }
    if (take < record_len)
      break;
    pos += 5 + record_len;
  }
  if (len >= BOX_NFTABLES_SNI_MAX) {
    *reason = "the ClientHello is too large";
    return BOX_NFTABLES_SNI_BAD;
  }
  return BOX_NFTABLES_SNI_MORE;
}

/* ---- HTTP/1.x: RFC 9112 ---- */

static gboolean
tchar (guint8 c)
{
  return g_ascii_isalnum (c) || (c != '\0' && strchr ("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The host of "host[:port]", or NULL. */
static char *
authority_host (const guint8 *p, gsize n)
{
  gsize colon = n;

  for (gsize i = 0; i < n; i++)
    if (p[i] == ':')
      colon = i;
  if (colon < n) {
    gsize digits = n - colon - 1;

    if (digits == 0 || digits > 5)
      return NULL;
    for (gsize i = colon + 1; i < n; i++)
      if (!g_ascii_isdigit (p[i]))
        return NULL;
    n = colon;
  }
  return checked_name (p, n);
}

/* The request line: CONNECT refused; an absolute-URI's host in *uri_host. */
static gboolean
request_line (const guint8 *p, gsize n, char **uri_host, const char **reason)
{
  const guint8 *sp1 = memchr (p, ' ', n), *sp2, *target;
  gsize target_len, method_len;

  sp2 = sp1 != NULL ? memchr (sp1 + 1, ' ', (gsize) (p + n - sp1 - 1)) : NULL;
  if (sp1 == NULL || sp2 == NULL || sp1 == p) {
    *reason = "malformed request line";
    return FALSE;
  }
  method_len = (gsize) (sp1 - p);
  target = sp1 + 1;
  target_len = (gsize) (sp2 - target);
  for (gsize i = 0; i < method_len; i++)
    if (!tchar (p[i])) {
      *reason = "malformed request method";
      return FALSE;
    }
  if (method_len == 7 && memcmp (p, "CONNECT", 7) == 0) {
    *reason = "CONNECT is not allowed";
    return FALSE;
  }
  if ((gsize) (p + n - sp2 - 1) != 8 ||
      (memcmp (sp2 + 1, "HTTP/1.1", 8) != 0 && memcmp (sp2 + 1, "HTTP/1.0", 8) != 0)) {
    *reason = "not an HTTP/1.0 or 1.1 request";
    return FALSE;
  }
  if (target_len == 0 || memchr (target, ' ', target_len) != NULL) {
    *reason = "malformed request target";
    return FALSE;
  }
  if (target[0] == '/' || (target_len == 1 && target[0] == '*'))
    return TRUE;
  for (gsize i = 0; i + 2 < target_len; i++) {
    if (target[i] == ':' && target[i + 1] == '/' && target[i + 2] == '/') {
      const guint8 *start = target + i + 3;
      gsize len = 0;

      while (start + len < target + target_len && strchr ("/?#", start[len]) == NULL)
        len++;
      if (memchr (start, '@', len) != NULL) {
        *reason = "user information in the request target";
        return FALSE;
      }
      *uri_host = authority_host (start, len);
      if (*uri_host == NULL) {
        *reason = "the request target's host is not a host name";
        return FALSE;
      }
      return TRUE;
    }
    if (!g_ascii_isalnum (target[i]) && strchr ("+-.", target[i]) == NULL)
      break;
  }
  *reason = "malformed request target";
  return FALSE;
}

/* Whether an Upgrade header's value (a list of protocol[/version]) names
 * WebSocket only.  Any other protocol would turn the checked connection
 * into one the proxy never reads again: h2c multiplexes requests for any
 * :authority on it, a TLS upgrade hides the requests that follow. */
static gboolean
upgrade_is_websocket (const guint8 *value, gsize len)
{
  gsize start = 0;

  while (start <= len) {
    const guint8 *comma = memchr (value + start, ',', len - start);
    gsize end = comma != NULL ? (gsize) (comma - value) : len, a = start, b = end;

    while (a < b && (value[a] == ' ' || value[a] == '\t'))
      a++;
    while (b > a && (value[b - 1] == ' ' || value[b - 1] == '\t'))
      b--;
    if (a < b) {
      const guint8 *slash = memchr (value + a, '/', b - a);
      gsize name_len = slash != NULL ? (gsize) (slash - (value + a)) : b - a;

      if (name_len != 9 || g_ascii_strncasecmp ((const char *) value + a, "websocket", 9) != 0)
        return FALSE;
    }
    start = end + 1;
  }
  return TRUE;
}

/* One header line; a Host header's host goes to *host (once only). */
static gboolean
header_line (const guint8 *p, gsize n, char **host, const char **reason)
{
  const guint8 *colon = memchr (p, ':', n), *value, *end = p + n;

  if (n > 0 && (p[0] == ' ' || p[0] == '\t')) {
    *reason = "folded header line";
    return FALSE;
  }
  if (colon == NULL || colon == p) {
    *reason = "malformed header line";
    return FALSE;
  }
  for (const guint8 *c = p; c < colon; c++)
    if (!tchar (*c)) {
      *reason = "malformed header name";
      return FALSE;
    }
  if (colon - p == 7 && g_ascii_strncasecmp ((const char *) p, "upgrade", 7) == 0 &&
      !upgrade_is_websocket (colon + 1, (gsize) (end - colon - 1))) {
    *reason = "an Upgrade to another protocol than WebSocket (such as h2c) is not allowed";
    return FALSE;
  }
  if (colon - p != 4 || g_ascii_strncasecmp ((const char *) p, "host", 4) != 0)
    return TRUE;
  if (*host != NULL) {
    *reason = "more than one Host header";
    return FALSE;
  }
  value = colon + 1;
  while (value < end && (*value == ' ' || *value == '\t'))
    value++;
  while (end > value && (end[-1] == ' ' || end[-1] == '\t'))
    end--;
  *host = authority_host (value, (gsize) (end - value));
  if (*host == NULL) {
    *reason = "the Host header is not a host name";
    return FALSE;
  }
  return TRUE;
}

static BoxNftablesSniResult
request_head (const guint8 *data, gsize len, char **host, const char **reason)
{
  g_autofree char *uri_host = NULL;
  gsize start = 0;
  gboolean first = TRUE;

  for (;;) {
    const guint8 *crlf = memchr (data + start, '\r', len - start);
    gsize line_len = (gsize) (crlf - (data + start));

    if (line_len == 0)
      break;
    if (first ? !request_line (data + start, line_len, &uri_host, reason)
              : !header_line (data + start, line_len, host, reason))
      return BOX_NFTABLES_SNI_BAD;
    first = FALSE;
    start += line_len + 2;
  }
  if (*host == NULL) {
    *reason = "no Host header";
    return BOX_NFTABLES_SNI_BAD;
  }
  if (uri_host != NULL && strcmp (uri_host, *host) != 0) {
    *reason = "the request target names another host than the Host header";
    return BOX_NFTABLES_SNI_BAD;
  }
  return BOX_NFTABLES_SNI_DONE;
}

BoxNftablesSniResult
box_nftables_sni_parse_http (const guint8 *data, gsize len, char **host, const char **reason)
{
  BoxNftablesSniResult result;

  *host = NULL;
  *reason = NULL;
  len = MIN (len, BOX_NFTABLES_SNI_MAX);
  /* Every CR is followed by LF and every LF follows a CR, no NUL; the head
   * ends at the first empty line. */
  for (gsize i = 0; i < len; i++) {
    if (data[i] == '\0' || (data[i] == '\n' && (i == 0 || data[i - 1] != '\r')) ||
        (i > 0 && data[i - 1] == '\r' && data[i] != '\n')) {
      *reason = "malformed request head";
      return BOX_NFTABLES_SNI_BAD;
    }
    if (data[i] == '\n' && i >= 3 && data[i - 2] == '\n') {
      if (i == 3) {
        *reason = "malformed request head";
        return BOX_NFTABLES_SNI_BAD;
      }
      result = request_head (data, i + 1, host, reason);
      if (result != BOX_NFTABLES_SNI_DONE)
        g_clear_pointer (host, g_free);
      return result;
    }
  }
  if (len >= BOX_NFTABLES_SNI_MAX) {
    *reason = "the request head is too large";
    return BOX_NFTABLES_SNI_BAD;
  }
  return BOX_NFTABLES_SNI_MORE;
}

static gboolean
header_is (const guint8 *line, gsize len, const char *name)
{
  gsize n = strlen (name);

  return len > n && line[n] == ':' && g_ascii_strncasecmp ((const char *) line, name, n) == 0;
}

GByteArray *
box_nftables_sni_http_close (const guint8 *data, gsize len)
{
  GByteArray *out = g_byte_array_sized_new ((guint) len + 32);
  gboolean upgrade = FALSE;
  gsize start = 0;

  for (;;) {
    const guint8 *cr = memchr (data + start, '\r', len - start);
    gsize line_len;

    g_return_val_if_fail (cr != NULL, out);  /* not an accepted head */
    line_len = (gsize) (cr - (data + start));
    if (line_len == 0)
      break;
    if (start > 0 && header_is (data + start, line_len, "upgrade"))
      upgrade = TRUE;
    if (start == 0 || (!header_is (data + start, line_len, "connection") &&
                       !header_is (data + start, line_len, "keep-alive") &&
                       !header_is (data + start, line_len, "proxy-connection")))
      g_byte_array_append (out, data + start, (guint) line_len + 2);
    start += line_len + 2;
  }
  if (upgrade)
    g_byte_array_append (out, (const guint8 *) "Connection: upgrade, close\r\n", 28);
  else
    g_byte_array_append (out, (const guint8 *) "Connection: close\r\n", 19);
  g_byte_array_append (out, data + start, (guint) (len - start));
  return out;
}
