/* box-broker-http-head.c: one HTTP/1.1 head read, checked and (a request)
 * rewritten with the secrets' rules; see box-broker-http-private.h.
 *
 * The broker writes every request head anew from what it parsed, so the
 * server reads exactly what the broker read.  What two readers could still
 * frame differently is refused (RFC 9112 6.3, 11.2): Content-Length and
 * Transfer-Encoding together, differing lengths, a coding other than a
 * single chunked, obs-fold, a name with spaces, a lone CR.
 */
#include "config.h"

#include "box-broker-http-private.h"

#include <string.h>

#include "box-error.h"

void
box_broker_http_head_free (BoxBrokerHttpHead *head)
{
  if (head == NULL)
    return;
  g_free (head->method);
  g_free (head->target);
  g_free (head->version);
  g_clear_pointer (&head->fields, g_ptr_array_unref);
  g_free (head);
}

static void
field_free (gpointer data)
{
  BoxBrokerHttpField *field = data;

  g_free (field->name);
  g_free (field->value);
  g_free (field);
}

gsize
box_broker_http_head_end (const guint8 *buf, gsize len, gsize from)
{
  /* a line feed after an empty line: "\n\n" or "\n\r\n" */
  for (gsize i = from; i < len; i++) {
    if (buf[i] != '\n')
      continue;
    if (i >= 1 && buf[i - 1] == '\n')
      return i + 1;
    if (i >= 2 && buf[i - 1] == '\r' && buf[i - 2] == '\n')
      return i + 1;
  }
  return 0;
}

static gboolean
is_tchar (guint8 c)
{
  return g_ascii_isalnum (c) || (c != 0 && strchr ("!#$%&'*+-.^_`|~", c) != NULL);
}

static gboolean
is_token (const char *s, gsize len)
{
  if (len == 0)
    return FALSE;
  for (gsize i = 0; i < len; i++)
    if (!is_tchar ((guint8) s[i]))
      return FALSE;
  return TRUE;
}

static gboolean
fail (GError **error, const char *why)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "the HTTP head cannot be forwarded: %s", why);
  return FALSE;
}

/* Whether the comma-separated list @value holds @token (any case). */
static gboolean
list_has (const char *value, const char *token)
{
  g_auto(GStrv) items = g_strsplit (value, ",", -1);

  for (guint i = 0; items[i] != NULL; i++)
    if (g_ascii_strcasecmp (g_strstrip (items[i]), token) == 0)
      return TRUE;
  return FALSE;
}

static gboolean
parse_start_line (BoxBrokerHttpHead *head, const char *line, gboolean request, GError **error)
{
  g_auto(GStrv) parts = NULL;

  if (request) {
    parts = g_strsplit (line, " ", -1);
    if (g_strv_length (parts) != 3 || !is_token (parts[0], strlen (parts[0])) || parts[1][0] == '\0')
      return fail (error, "the request line is not \"METHOD target HTTP/1.x\"");
    for (const char *p = parts[1]; *p != '\0'; p++)
      if ((guint8) *p <= 0x20 || (guint8) *p >= 0x7f || *p == '#')
        return fail (error, "the request target holds a character a URL cannot hold");
    if (strcmp (parts[2], "HTTP/1.1") != 0 && strcmp (parts[2], "HTTP/1.0") != 0)
      return fail (error, "only HTTP/1.0 and HTTP/1.1 are understood");
    if (g_ascii_strcasecmp (parts[0], "CONNECT") == 0)
      return fail (error, "CONNECT is not forwarded");
    head->method = g_strdup (parts[0]);
    head->target = g_strdup (parts[1]);
    head->version = g_strdup (parts[2]);
    return TRUE;
  }
  if (strncmp (line, "HTTP/1.", 7) != 0 || (line[7] != '0' && line[7] != '1') || line[8] != ' ' ||
      !g_ascii_isdigit (line[9]) || !g_ascii_isdigit (line[10]) || !g_ascii_isdigit (line[11]) ||
      (line[12] != '\0' && line[12] != ' ') || line[9] == '0')
    return fail (error, "the status line is not \"HTTP/1.x NNN reason\"");
  head->version = g_strndup (line, 8);
  head->status = (guint) ((line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0'));
  return TRUE;
}

/* Framing and upgrade from one field; TRUE to go on. */
static gboolean
note_field (BoxBrokerHttpHead *head, const BoxBrokerHttpField *field, gboolean request,
            guint *n_codings, guint *n_hosts, GError **error)
{
  if (g_ascii_strcasecmp (field->name, "Content-Length") == 0) {
    guint64 length = 0;
    gsize n = strlen (field->value);

    if (n == 0 || n > 18 || strspn (field->value, "0123456789") != n)
      return fail (error, "Content-Length is not a number");
    length = g_ascii_strtoull (field->value, NULL, 10);
    if (head->has_length && head->length != length)
      return fail (error, "two different Content-Length headers");
    head->has_length = TRUE;
    head->length = length;
  } else if (g_ascii_strcasecmp (field->name, "Transfer-Encoding") == 0) {
    g_auto(GStrv) items = g_strsplit (field->value, ",", -1);

    head->has_coding = TRUE;
    for (guint i = 0; items[i] != NULL; i++) {
      const char *coding = g_strstrip (items[i]);

      if (coding[0] == '\0')
        continue;
      (*n_codings)++;
      if (head->chunked)   /* chunked must be the last coding, once */
        return fail (error, "a transfer coding after chunked");
      head->chunked = g_ascii_strcasecmp (coding, "chunked") == 0;
    }
  } else if (g_ascii_strcasecmp (field->name, "Host") == 0) {
    (*n_hosts)++;
  } else if (g_ascii_strcasecmp (field->name, "Upgrade") == 0) {
    head->upgrade = TRUE;
  }
  (void) request;
  return TRUE;
}

/* "Transfer_Encoding" and the like: some servers (CGI, proxies) read '_'
 * as '-', and would frame what the broker frames otherwise. */
static gboolean
looks_like_framing (const char *name, gsize len)
{
  g_autofree char *dashed = g_strndup (name, len);

  if (strchr (dashed, '_') == NULL)
    return FALSE;
  g_strdelimit (dashed, "_", '-');
  return g_ascii_strcasecmp (dashed, "Content-Length") == 0 ||
         g_ascii_strcasecmp (dashed, "Transfer-Encoding") == 0;
}

static gboolean
parse_field (BoxBrokerHttpHead *head, char *line, gboolean request,
             guint *n_codings, guint *n_hosts, GError **error)
{
  BoxBrokerHttpField *field;
  char *colon, *value, *end;

  if (line[0] == ' ' || line[0] == '\t')
    return fail (error, "a folded header line (obs-fold)");
  colon = strchr (line, ':');
  if (colon == NULL || !is_token (line, (gsize) (colon - line)))
    return fail (error, "a header name is not a token");
  value = colon + 1;
  while (*value == ' ' || *value == '\t')
    value++;
  end = value + strlen (value);
  while (end > value && (end[-1] == ' ' || end[-1] == '\t'))
    end--;
  for (const char *p = value; p < end; p++)
    if (((guint8) *p < 0x20 && *p != '\t') || (guint8) *p == 0x7f)
      return fail (error, "a header value holds a control character");
  if (looks_like_framing (line, (gsize) (colon - line)))
    return fail (error, "a header name a server could read as Content-Length or Transfer-Encoding");
  field = g_new0 (BoxBrokerHttpField, 1);
  field->name = g_strndup (line, (gsize) (colon - line));
  field->value = g_strndup (value, (gsize) (end - value));
  g_ptr_array_add (head->fields, field);
  return note_field (head, field, request, n_codings, n_hosts, error);
}

static gboolean
check_framing (BoxBrokerHttpHead *head, gboolean request, guint n_codings, guint n_hosts,
               GError **error)
{
  if (head->has_length && head->has_coding)
    return fail (error, "both Content-Length and Transfer-Encoding");
  if (request && head->has_coding && (n_codings != 1 || !head->chunked))
    return fail (error, "a request's Transfer-Encoding other than chunked");
  if (request && head->has_coding && strcmp (head->version, "HTTP/1.0") == 0)
    return fail (error, "Transfer-Encoding in an HTTP/1.0 request");
  if (request && n_hosts > 1)
    return fail (error, "more than one Host header");
  if (head->upgrade) {
    gboolean ws = FALSE, conn = FALSE;

    for (guint i = 0; i < head->fields->len; i++) {
      const BoxBrokerHttpField *field = g_ptr_array_index (head->fields, i);

      if (g_ascii_strcasecmp (field->name, "Upgrade") == 0 && list_has (field->value, "websocket"))
        ws = TRUE;
      if (g_ascii_strcasecmp (field->name, "Connection") == 0 && list_has (field->value, "upgrade"))
        conn = TRUE;
    }
    head->websocket = ws && conn;
  }
  return TRUE;
}

BoxBrokerHttpHead *
box_broker_http_head_parse (const guint8 *data, gsize len, gboolean request, GError **error)
{
  g_autoptr(BoxBrokerHttpHead) head = g_new0 (BoxBrokerHttpHead, 1);
  guint n_codings = 0, n_hosts = 0;
  gsize at = 0;
  gboolean first = TRUE;

  head->fields = g_ptr_array_new_with_free_func (field_free);
  if (memchr (data, '\0', len) != NULL) {
    fail (error, "a NUL byte in the head");
    return NULL;
  }
  while (at < len) {
    const guint8 *nl = memchr (data + at, '\n', len - at);
    gsize end = nl != NULL ? (gsize) (nl - data) : len;
    g_autofree char *line = NULL;

    if (end > at && data[end - 1] == '\r')
      line = g_strndup ((const char *) data + at, end - 1 - at);
    else
      line = g_strndup ((const char *) data + at, end - at);
    at = end + 1;
    if (strchr (line, '\r') != NULL) {
      fail (error, "a CR not followed by LF");
      return NULL;
    }
    if (line[0] == '\0')
      break;
    if (first ? !parse_start_line (head, line, request, error)
              : !parse_field (head, line, request, &n_codings, &n_hosts, error))
      return NULL;
    first = FALSE;
  }
  if (first) {
    fail (error, "an empty head");
    return NULL;
  }
  if (!check_framing (head, request, n_codings, n_hosts, error))
    return NULL;
  return g_steal_pointer (&head);
}

gboolean
box_broker_http_path_matches (const char *prefix, const char *target)
{
  gsize path_len, prefix_len = strlen (prefix);
  const char *query;
  g_autofree char *path = NULL;
  g_auto(GStrv) segments = NULL;

  if (target[0] != '/')
    return FALSE;
  query = strchr (target, '?');
  path_len = query != NULL ? (gsize) (query - target) : strlen (target);
  path = g_strndup (target, path_len);
  /* A server may normalise these to another path than the prefix names
   * ("/v1/../admin", "/v1%2f..%2fadmin", "/v1\..\admin", Tomcat's
   * "/v1/..;/admin"), so a path holding one never gets a prefix's secret. */
  if (strchr (path, '\\') != NULL)
    return FALSE;
  for (const char *p = strchr (path, '%'); p != NULL; p = strchr (p + 1, '%')) {
    if (p[1] == '\0' || p[2] == '\0')
      break;
    if ((p[1] == '2' && (g_ascii_tolower (p[2]) == 'e' || g_ascii_tolower (p[2]) == 'f')) ||
        (p[1] == '5' && g_ascii_tolower (p[2]) == 'c'))
      return FALSE;
  }
  segments = g_strsplit (path, "/", -1);
  for (guint i = 0; segments[i] != NULL; i++) {
    char *semicolon = strchr (segments[i], ';');

    if (semicolon != NULL)
      *semicolon = '\0';
    if (strcmp (segments[i], ".") == 0 || strcmp (segments[i], "..") == 0)
      return FALSE;
  }
  if (strncmp (path, prefix, prefix_len) != 0)
    return FALSE;
  return path[prefix_len] == '\0' || path[prefix_len] == '/' ||
         (prefix_len > 0 && prefix[prefix_len - 1] == '/');
}

/* Whether @authority ("host", "host:443", "[v6]:443") names @host. */
static gboolean
authority_is (const char *authority, gsize len, const char *host)
{
  const char *colon;

  if (len > 0 && authority[0] == '[') {
    const char *close = memchr (authority, ']', len);

    if (close == NULL)
      return FALSE;
    colon = close + 1 < authority + len ? close + 1 : NULL;
    if (colon != NULL && (*colon != ':' || (gsize) (authority + len - colon) != 4 ||
                          strncmp (colon, ":443", 4) != 0))
      return FALSE;
    return (gsize) (close - authority - 1) == strlen (host) &&
           g_ascii_strncasecmp (authority + 1, host, strlen (host)) == 0;
  }
  colon = memchr (authority, ':', len);
  if (colon != NULL) {
    if ((gsize) (authority + len - colon) != 4 || strncmp (colon, ":443", 4) != 0)
      return FALSE;
    len = (gsize) (colon - authority);
  }
  return len == strlen (host) && g_ascii_strncasecmp (authority, host, len) == 0;
}

gboolean
box_broker_http_host_matches (const BoxBrokerHttpHead *head, const char *host)
{
  gboolean has_host = FALSE;

  for (guint i = 0; i < head->fields->len; i++) {
    const BoxBrokerHttpField *field = g_ptr_array_index (head->fields, i);

    if (g_ascii_strcasecmp (field->name, "Host") != 0)
      continue;
    if (!authority_is (field->value, strlen (field->value), host))
      return FALSE;
    has_host = TRUE;
  }
  if (head->target[0] != '/' && head->target[0] != '*') {
    const char *authority = strstr (head->target, "://"), *end;

    if (authority == NULL)
      return FALSE;
    authority += 3;
    end = authority + strcspn (authority, "/?");
    if (memchr (authority, '@', (gsize) (end - authority)) != NULL ||
        !authority_is (authority, (gsize) (end - authority), host))
      return FALSE;
    return TRUE;
  }
  /* without Host (and an origin-form target) the request names no host:
   * a server need not answer HTTP/1.1's 400 (RFC 9112 3.2) and may take it
   * to a default virtual host, HTTP/1.0's always does; no value goes */
  return has_host;
}

/* @len bytes of @s with every placeholder of @rules (the ones that
 * replace) replaced by its value, in one pass: a value is never searched
 * again for placeholders.  NULL when the result would be longer than
 * @max (many short placeholders of a long value). */
static GString *
replace_placeholders (const char *s, gsize len, GPtrArray *rules, gsize max)
{
  GString *out = g_string_sized_new (len);
  g_autofree const char **next = g_new0 (const char *, rules->len + 1);
  gsize at = 0;

  for (guint i = 0; i < rules->len; i++) {
    const BoxBrokerHttpRule *rule = g_ptr_array_index (rules, i);
    gsize n = strlen (rule->placeholder);

    next[i] = n > 0 ? memmem (s, len, rule->placeholder, n) : NULL;
  }
  for (;;) {
    guint best = rules->len;
    const BoxBrokerHttpRule *rule;
    gsize value_len;
    const char *value;

    for (guint i = 0; i < rules->len; i++)
      if (next[i] != NULL && (best == rules->len || next[i] < next[best]))
        best = i;
    if (best == rules->len)
      break;
    rule = g_ptr_array_index (rules, best);
    value = g_bytes_get_data (rule->value, &value_len);
    if (out->len + (gsize) (next[best] - (s + at)) + value_len > max) {
      g_string_free (out, TRUE);
      return NULL;
    }
    g_string_append_len (out, s + at, next[best] - (s + at));
    g_string_append_len (out, value, (gssize) value_len);
    at = (gsize) (next[best] - s) + strlen (rule->placeholder);
    for (guint i = 0; i < rules->len; i++)
      if (next[i] != NULL && next[i] < s + at) {
        const char *placeholder = ((BoxBrokerHttpRule *) g_ptr_array_index (rules, i))->placeholder;

        next[i] = memmem (s + at, len - at, placeholder, strlen (placeholder));
      }
  }
  if (out->len + (len - at) > max) {
    g_string_free (out, TRUE);
    return NULL;
  }
  g_string_append_len (out, s + at, (gssize) (len - at));
  return out;
}

/* Strict base64 (RFC 4648 4, padded): g_base64_decode() skips what it
 * does not know, and a credential that is not base64 stays as it is. */
static gboolean
is_base64 (const char *s)
{
  gsize n = strlen (s), pad = 0;

  if (n == 0 || n % 4 != 0)
    return FALSE;
  while (pad < 2 && s[n - 1 - pad] == '=')
    pad++;
  for (gsize i = 0; i < n - pad; i++)
    if (!g_ascii_isalnum (s[i]) && s[i] != '+' && s[i] != '/')
      return FALSE;
  return TRUE;
}

/* "Basic <b64>" with the placeholders replaced inside the credential;
 * FALSE when it would grow past @max. */
static gboolean
replace_in_basic (GString *value, GPtrArray *rules, gsize max)
{
  const char *credential;
  g_autofree guchar *plain = NULL;
  gsize plain_len = 0;
  g_autoptr(GString) replaced = NULL;
  g_autofree char *encoded = NULL;

  if (value->len < 6 || g_ascii_strncasecmp (value->str, "Basic ", 6) != 0)
    return TRUE;
  credential = value->str + 6;
  while (*credential == ' ')
    credential++;
  if (!is_base64 (credential))
    return TRUE;
  plain = g_base64_decode (credential, &plain_len);
  replaced = replace_placeholders ((const char *) plain, plain_len, rules, max / 4 * 3);
  if (replaced == NULL)
    return FALSE;
  if (replaced->len == plain_len && memcmp (replaced->str, plain, plain_len) == 0)
    return TRUE;
  encoded = g_base64_encode ((const guchar *) replaced->str, replaced->len);
  g_string_truncate (value, (gsize) (credential - value->str));
  g_string_append (value, encoded);
  return value->len <= max;
}

/* The h2c (and any other non-WebSocket) upgrade is dropped, so that the
 * connection stays HTTP/1.1: Upgrade, HTTP2-Settings and their
 * Connection tokens go.  NULL: drop the whole field. */
static char *
strip_upgrade (const BoxBrokerHttpField *field)
{
  g_auto(GStrv) items = NULL;
  g_autoptr(GPtrArray) kept = NULL;

  if (g_ascii_strcasecmp (field->name, "Upgrade") == 0 ||
      g_ascii_strcasecmp (field->name, "HTTP2-Settings") == 0)
    return NULL;
  if (g_ascii_strcasecmp (field->name, "Connection") != 0)
    return g_strdup (field->value);
  items = g_strsplit (field->value, ",", -1);
  kept = g_ptr_array_new ();
  for (guint i = 0; items[i] != NULL; i++) {
    char *token = g_strstrip (items[i]);

    if (token[0] != '\0' && g_ascii_strcasecmp (token, "upgrade") != 0 &&
        g_ascii_strcasecmp (token, "http2-settings") != 0)
      g_ptr_array_add (kept, token);
  }
  if (kept->len == 0)
    return NULL;
  g_ptr_array_add (kept, NULL);
  return g_strjoinv (", ", (char **) kept->pdata);
}

static void
append_str (GByteArray *out, const char *s)
{
  g_byte_array_append (out, (const guint8 *) s, (guint) strlen (s));
}

static gboolean
injected_name (GPtrArray *inject, const char *name)
{
  for (guint i = 0; i < inject->len; i++) {
    const BoxBrokerHttpRule *rule = g_ptr_array_index (inject, i);

    if (g_ascii_strcasecmp (rule->inject_header, name) == 0)
      return TRUE;
  }
  return FALSE;
}

static void
append_injected (GByteArray *out, const BoxBrokerHttpRule *rule)
{
  gsize value_len;
  const char *value = g_bytes_get_data (rule->value, &value_len);
  const char *format = rule->inject_format, *at;

  append_str (out, rule->inject_header);
  append_str (out, ": ");
  while ((at = strstr (format, "{value}")) != NULL) {
    g_byte_array_append (out, (const guint8 *) format, (guint) (at - format));
    g_byte_array_append (out, (const guint8 *) value, (guint) value_len);
    format = at + strlen ("{value}");
  }
  append_str (out, format);
  append_str (out, "\r\n");
}

static void
free_string (gpointer string)
{
  if (string != NULL)
    g_string_free (string, TRUE);
}

gboolean
box_broker_http_write_request (BoxBrokerHttpHead *head, GPtrArray *rules,
                               GByteArray *out, GError **error)
{
  g_autoptr(GPtrArray) replace = g_ptr_array_new ();
  g_autoptr(GPtrArray) inject = g_ptr_array_new ();
  g_autoptr(GString) target = NULL;
  g_autoptr(GPtrArray) values = NULL;
  gsize start = out->len, size;
  gboolean carried, identity_sent = FALSE;

  for (guint i = 0; rules != NULL && i < rules->len; i++) {
    BoxBrokerHttpRule *rule = g_ptr_array_index (rules, i);

    if (rule->path_prefix != NULL && !box_broker_http_path_matches (rule->path_prefix, head->target))
      continue;
    /* the engine validated both; a line break here would be a new header */
    if (rule->inject_header != NULL &&
        (!is_token (rule->inject_header, strlen (rule->inject_header)) || rule->inject_format == NULL ||
         strpbrk (rule->inject_format, "\r\n") != NULL))
      return fail (error, "a secret's inject header or format cannot go in a head");
    g_ptr_array_add (rule->inject_header != NULL ? inject : replace, rule);
  }
  target = replace_placeholders (head->target, strlen (head->target), replace,
                                 BOX_BROKER_HTTP_MAX_REWRITTEN);
  if (target == NULL)
    return fail (error, "the request head grows past 128 KiB with the secrets' values");
  for (gsize i = 0; i < target->len; i++)
    if ((guint8) target->str[i] <= 0x20 || (guint8) target->str[i] >= 0x7f)
      return fail (error, "a secret's value has a character a request target cannot hold");
  append_str (out, head->method);
  append_str (out, " ");
  g_byte_array_append (out, (const guint8 *) target->str, (guint) target->len);
  append_str (out, " ");
  append_str (out, head->version);
  append_str (out, "\r\n");
  size = out->len - start;
  carried = inject->len > 0 || strcmp (target->str, head->target) != 0;
  values = g_ptr_array_new_full (head->fields->len, free_string);
  for (guint i = 0; i < head->fields->len; i++) {
    const BoxBrokerHttpField *field = g_ptr_array_index (head->fields, i);
    g_autofree char *kept = NULL;
    GString *value;

    kept = injected_name (inject, field->name) ? NULL
         : head->upgrade && !head->websocket ? strip_upgrade (field) : g_strdup (field->value);
    if (kept == NULL) {
      g_ptr_array_add (values, NULL);
      continue;
    }
    value = replace_placeholders (kept, strlen (kept), replace,
                                  BOX_BROKER_HTTP_MAX_REWRITTEN - MIN (size, BOX_BROKER_HTTP_MAX_REWRITTEN));
    g_ptr_array_add (values, value);
    if (value == NULL ||
        ((g_ascii_strcasecmp (field->name, "Authorization") == 0 ||
          g_ascii_strcasecmp (field->name, "Proxy-Authorization") == 0) &&
         !replace_in_basic (value, replace, BOX_BROKER_HTTP_MAX_REWRITTEN - MIN (size, BOX_BROKER_HTTP_MAX_REWRITTEN))))
      return fail (error, "the request head grows past 128 KiB with the secrets' values");
    size += strlen (field->name) + value->len + 4;
    if (strcmp (value->str, field->value) != 0)
      carried = TRUE;
  }
  /* a request with a value asks for the answer as it is: a compressed
   * echo of the value would pass the answer's check */
  for (guint i = 0; i < head->fields->len; i++) {
    const BoxBrokerHttpField *field = g_ptr_array_index (head->fields, i);
    GString *value = g_ptr_array_index (values, i);

    if (value == NULL)
      continue;
    if (carried && g_ascii_strcasecmp (field->name, "Accept-Encoding") == 0) {
      if (!identity_sent)
        append_str (out, "Accept-Encoding: identity\r\n");
      identity_sent = TRUE;
      continue;
    }
    append_str (out, field->name);
    append_str (out, ": ");
    g_byte_array_append (out, (const guint8 *) value->str, (guint) value->len);
    append_str (out, "\r\n");
  }
  if (carried && !identity_sent)
    append_str (out, "Accept-Encoding: identity\r\n");
  for (guint i = 0; i < inject->len; i++)
    append_injected (out, g_ptr_array_index (inject, i));
  append_str (out, "\r\n");
  if (out->len - start > BOX_BROKER_HTTP_MAX_REWRITTEN)
    return fail (error, "the request head grows past 128 KiB with the secrets' values");
  return TRUE;
}
