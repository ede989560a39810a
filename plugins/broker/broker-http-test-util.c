/* broker-http-test-util.c: helpers of the rewriter's tests; see
 * broker-http-test-util.h. */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "broker-http-test-util.h"
BoxBrokerHttpRule *
rule_new (const char *placeholder, const char *value, const char *inject_header,
          const char *inject_format, const char *path_prefix)
{
  BoxBrokerHttpRule *rule = g_new0 (BoxBrokerHttpRule, 1);

  rule->placeholder = g_strdup (placeholder);
  rule->value = g_bytes_new (value, strlen (value));
  rule->inject_header = g_strdup (inject_header);
  rule->inject_format = g_strdup (inject_format);
  rule->path_prefix = g_strdup (path_prefix);
  return rule;
}

GPtrArray *
rules_new (void)
{
  return g_ptr_array_new_with_free_func ((GDestroyNotify) box_broker_http_rule_free);
}

/* The two usual secrets: TOKEN and KEY replaced everywhere. */
GPtrArray *
two_rules (void)
{
  GPtrArray *rules = rules_new ();

  g_ptr_array_add (rules, rule_new ("__box_token__", "s3cr3t-t0ken", NULL, NULL, NULL));
  g_ptr_array_add (rules, rule_new ("__box_key__", "KEYVALUE", NULL, NULL, NULL));
  return rules;
}


gboolean
feed (BoxBrokerHttp *http, gboolean upstream, const char *data, gsize len, FeedMode mode,
      GByteArray *out, GError **error)
{
  gsize at = 0;

  while (at < len) {
    gsize n = mode == FEED_WHOLE ? len - at
            : mode == FEED_BYTES ? 1 : (gsize) g_test_rand_int_range (1, 40);
    gboolean ok;

    n = MIN (n, len - at);
    ok = upstream ? box_broker_http_from_upstream (http, (const guint8 *) data + at, n, out, error)
                  : box_broker_http_from_client (http, (const guint8 *) data + at, n, out, error);
    if (!ok)
      return FALSE;
    at += n;
  }
  return TRUE;
}

/* What goes upstream for @input, the same in every feeding mode; NULL
 * with the error of the whole feed. */
char *
client_through (GPtrArray *rules, const char *input, GError **error)
{
  g_autofree char *first = NULL;

  for (FeedMode mode = FEED_WHOLE; mode < FEED_LAST; mode++) {
    g_autoptr(GByteArray) out = g_byte_array_new ();
    BoxBrokerHttp *http = box_broker_http_new (rules, TEST_HOST);
    g_autoptr(GError) local = NULL;
    gboolean ok = feed (http, FALSE, input, strlen (input), mode, out, &local);

    box_broker_http_free (http);
    if (mode == FEED_WHOLE && !ok) {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
    g_assert_no_error (local);
    g_byte_array_append (out, (const guint8 *) "", 1);
    if (first == NULL)
      first = g_strdup ((const char *) out->data);
    else
      g_assert_cmpstr ((const char *) out->data, ==, first);
  }
  return g_steal_pointer (&first);
}

/* @s without the "Accept-Encoding: identity" the broker adds to a
 * request carrying a value (/broker-http/identity checks it exactly). */
char *
without_identity (const char *s)
{
  g_auto(GStrv) parts = g_strsplit (s, "Accept-Encoding: identity\r\n", -1);

  return g_strjoinv ("", parts);
}

void
assert_through (GPtrArray *rules, const char *input, const char *expected)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *out = client_through (rules, input, &error);
  g_autofree char *plain = NULL;

  g_assert_no_error (error);
  plain = without_identity (out);
  g_assert_cmpstr (plain, ==, expected);
}

void
assert_refused (GPtrArray *rules, const char *input)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *out = client_through (rules, input, &error);

  g_assert_null (out);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
}


void
conn_init (Conn *conn, GPtrArray *rules)
{
  conn->http = box_broker_http_new (rules, TEST_HOST);
  conn->up = g_byte_array_new ();
  conn->down = g_byte_array_new ();
  conn->error = NULL;
}

void
conn_clear (Conn *conn)
{
  box_broker_http_free (conn->http);
  g_byte_array_unref (conn->up);
  g_byte_array_unref (conn->down);
  g_clear_error (&conn->error);
}

gboolean
conn_client (Conn *conn, const char *data)
{
  g_clear_error (&conn->error);
  g_byte_array_set_size (conn->up, 0);
  return box_broker_http_from_client (conn->http, (const guint8 *) data, strlen (data), conn->up, &conn->error);
}

gboolean
conn_upstream (Conn *conn, const char *data)
{
  g_clear_error (&conn->error);
  g_byte_array_set_size (conn->down, 0);
  return box_broker_http_from_upstream (conn->http, (const guint8 *) data, strlen (data), conn->down,
                                        &conn->error);
}

void
assert_bytes (GByteArray *bytes, const char *expected)
{
  g_autofree char *s = g_strndup ((const char *) bytes->data, bytes->len);
  g_autofree char *plain = without_identity (s);

  g_assert_cmpstr (plain, ==, expected);
}

/* The answers to @requests, fed in @mode: what reaches the client, or
 * NULL with the error. */
char *
answers_through (GPtrArray *rules, const char *requests, const char *answers, FeedMode mode,
                 gboolean eof, GError **error)
{
  BoxBrokerHttp *http = box_broker_http_new (rules, TEST_HOST);
  g_autoptr(GByteArray) up = g_byte_array_new ();
  g_autoptr(GByteArray) down = g_byte_array_new ();
  gboolean ok;

  g_assert_true (box_broker_http_from_client (http, (const guint8 *) requests, strlen (requests), up, NULL));
  ok = feed (http, TRUE, answers, strlen (answers), mode, down, error) &&
       (!eof || box_broker_http_upstream_eof (http, down, error));
  box_broker_http_free (http);
  if (!ok)
    return NULL;
  return g_strndup ((const char *) down->data, down->len);
}

/* @s with each chunked body's data chunks joined into one, extensions
 * dropped: the broker frames the data anew, as its reads and holds go. */
char *
join_chunks (const char *s)
{
  const char *marker = "Transfer-Encoding: chunked\r\n\r\n";
  GString *out = g_string_new (NULL);
  const char *at = s, *found;

  while ((found = strstr (at, marker)) != NULL) {
    g_autoptr(GString) data = g_string_new (NULL);
    const char *p = found + strlen (marker);
    guint64 size;

    g_string_append_len (out, at, p - at);
    while ((size = g_ascii_strtoull (p, NULL, 16)) > 0) {
      p = strstr (p, "\r\n") + 2;
      g_string_append_len (data, p, (gssize) size);
      p += size + 2;
    }
    if (data->len > 0)
      g_string_append_printf (out, "%zx\r\n%s\r\n", data->len, data->str);
    at = strstr (p, "\r\n") + 2;   /* past the last chunk's line */
    g_string_append (out, "0\r\n");
  }
  g_string_append (out, at);
  return g_string_free (out, FALSE);
}

/* The answers must pass unchanged (@code -1; chunked data may be framed
 * anew) or fail with @code, in every feeding mode. */
void
check_answers (GPtrArray *rules, const char *requests, const char *answers, gboolean eof, gint code)
{
  for (FeedMode mode = FEED_WHOLE; mode < FEED_LAST; mode++) {
    g_autoptr(GError) error = NULL;
    g_autofree char *out = answers_through (rules, requests, answers, mode, eof, &error);

    if (code < 0) {
      g_autofree char *joined = NULL, *expected = join_chunks (answers);

      g_assert_no_error (error);
      joined = join_chunks (out);
      g_assert_cmpstr (joined, ==, expected);
    } else {
      g_assert_null (out);
      g_assert_error (error, BOX_ERROR, code);
    }
  }
}

void
assert_answers (GPtrArray *rules, const char *requests, const char *answers, gboolean eof)
{
  check_answers (rules, requests, answers, eof, -1);
}

void
assert_answer_fails (GPtrArray *rules, const char *requests, const char *answers, gint code)
{
  check_answers (rules, requests, answers, TRUE, code);
}
