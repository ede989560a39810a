/* box-broker-http.h: the broker's HTTP/1.1 rewriter, one per intercepted
 * connection, both directions, plaintext only (no sockets, no TLS).
 *
 * From the client (the sandbox): request heads are parsed and rewritten
 * (placeholder -> value in the path, the query, every header value and a
 * Basic credential; or an injected header; a request carrying a value
 * asks for Accept-Encoding: identity), bodies are passed through
 * untouched with their framing followed (Content-Length, chunked), so that
 * the next request head on a kept-alive connection is found.  After a
 * WebSocket upgrade (a 101 answer), both directions are passed through as
 * they are, but for the check of the upstream's first
 * BOX_BROKER_HTTP_CHECK_BYTES (as for a body, below).
 *
 * From the upstream server: response heads are parsed to follow the
 * framing (HEAD, 1xx, 204, 304, Content-Length, chunked, until close), and
 * each response head and the first BOX_BROKER_HTTP_CHECK_BYTES of each
 * body (of a chunked body: the chunks' data, framed anew on the way out,
 * and the trailers) are checked for the values of the rules: a value found there fails
 * with BOX_ERROR_BROKER_FAILED.  Nothing of a response head is released
 * before the whole head was checked; of a body, only a trailing part that
 * is a proper prefix of some value is held back until more arrives (so a
 * streamed answer is not delayed).
 *
 * Not thread-safe: one connection's pump uses it from one thread.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The largest request or response head accepted. */
#define BOX_BROKER_HTTP_MAX_HEAD    (64 * 1024)
/* The largest request head written upstream, placeholders replaced: a
 * head rewritten to more is refused (BOX_ERROR_INVALID). */
#define BOX_BROKER_HTTP_MAX_REWRITTEN (128 * 1024)
/* How much of each response body is checked for values. */
#define BOX_BROKER_HTTP_CHECK_BYTES (64 * 1024)

/* What one secret does on one connection (the connection's host already
 * matched one of the secret's hosts; @path_prefix is that host entry's
 * path part). */
typedef struct {
  char   *placeholder;    /* what the sandbox has */
  GBytes *value;          /* the plaintext, 1..8192 bytes, no CR/LF/NUL */
  char   *inject_header;  /* NULL: replace the placeholder */
  char   *inject_format;  /* with "{value}" in it */
  char   *path_prefix;    /* NULL: every path; else only requests whose
                           * path (before '?') is it, or starts with it
                           * followed by '/' (or it ends with '/'); a
                           * path with a dot segment, a backslash or
                           * %2e/%2f/%5c never matches a prefix (the
                           * server may normalise it to another path) */
} BoxBrokerHttpRule;

void box_broker_http_rule_free (BoxBrokerHttpRule *rule);

typedef struct _BoxBrokerHttp BoxBrokerHttp;

/* @rules: BoxBrokerHttpRule*, referenced (the array), may be replaced with
 * box_broker_http_set_rules at any time between feeds. */
/* @host: the connection's host (the TLS server name, or the IP literal
 * connected to); the rules apply only to requests for it (every Host
 * header and an absolute-form target's authority name it, any case,
 * optionally with :443; a request without either, HTTP/1.0 or 1.1, does
 * not: it names no host, and a server may take it to any of its own),
 * others go with their placeholders as they are. */
BoxBrokerHttp *box_broker_http_new       (GPtrArray *rules, const char *host);
void           box_broker_http_free      (BoxBrokerHttp *http);
/* New rules apply from the next request head (a value replaced reaches
 * kept-alive connections at once); the old values are still checked in
 * the answers to the requests pending at the change (and the one being
 * read; after a WebSocket upgrade, for good). */
void           box_broker_http_set_rules (BoxBrokerHttp *http, GPtrArray *rules);

/* Bytes from the client; what goes upstream is appended to @out.  FALSE
 * with BOX_ERROR_INVALID on a request the broker will not forward (a
 * malformed or oversized head, bad framing, anything a server could read
 * differently from the broker); the caller then sends
 * box_broker_http_error_response (400 ...) and closes.
 *
 * After a request asking for a WebSocket upgrade, what the client sends
 * is held (at most BOX_BROKER_HTTP_MAX_HEAD bytes) until the answer is
 * known: a 101 releases it as it is on the next call, another answer
 * parses it as requests.  A client must not send frames before the 101
 * (RFC 6455 4.1), so nothing waits for that. */
gboolean box_broker_http_from_client   (BoxBrokerHttp *http, const guint8 *data, gsize len,
                                        GByteArray *out, GError **error);
/* Bytes from upstream; what goes to the client is appended to @out.  FALSE
 * with BOX_ERROR_BROKER_FAILED when a value would reach the client, or
 * BOX_ERROR_INVALID on a malformed answer. */
gboolean box_broker_http_from_upstream (BoxBrokerHttp *http, const guint8 *data, gsize len,
                                        GByteArray *out, GError **error);
/* The upstream closed: what is still held back is appended to @out (or
 * FALSE as above). */
gboolean box_broker_http_upstream_eof  (BoxBrokerHttp *http, GByteArray *out, GError **error);
/* Whether a 502 (or 400) can still be sent to the client: no byte of the
 * current response has been released yet. */
gboolean box_broker_http_can_answer    (BoxBrokerHttp *http);
/* A whole HTTP/1.1 answer in the API's error shape
 * ({"error":{"code":..., "message":...}}), Connection: close. */
GBytes  *box_broker_http_error_response (guint status, const char *code, const char *message);

G_END_DECLS
