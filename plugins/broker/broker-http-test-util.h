/* broker-http-test-util.h: helpers of the rewriter's tests
 * (broker-http-test*.c): rules, feeding in every mode, a connection driven
 * by hand, answers compared. */
#pragma once

#include <glib.h>

#include "box-broker-http-private.h"

G_BEGIN_DECLS

/* The connection's host in every test. */
#define TEST_HOST "api.example.com"

typedef enum { FEED_WHOLE, FEED_BYTES, FEED_RANDOM, FEED_LAST } FeedMode;

/* One connection driven by hand. */
typedef struct {
  BoxBrokerHttp *http;
  GByteArray    *up;     /* what went upstream */
  GByteArray    *down;   /* what went to the client */
  GError        *error;
} Conn;

BoxBrokerHttpRule *rule_new (const char *placeholder, const char *value, const char *inject_header,
                             const char *inject_format, const char *path_prefix);
GPtrArray *rules_new (void);
GPtrArray *two_rules (void);
gboolean feed (BoxBrokerHttp *http, gboolean upstream, const char *data, gsize len, FeedMode mode,
               GByteArray *out, GError **error);
char *client_through (GPtrArray *rules, const char *input, GError **error);
char *without_identity (const char *s);
void assert_through (GPtrArray *rules, const char *input, const char *expected);
void assert_refused (GPtrArray *rules, const char *input);
void conn_init (Conn *conn, GPtrArray *rules);
void conn_clear (Conn *conn);
gboolean conn_client (Conn *conn, const char *data);
gboolean conn_upstream (Conn *conn, const char *data);
void assert_bytes (GByteArray *bytes, const char *expected);
char *answers_through (GPtrArray *rules, const char *requests, const char *answers, FeedMode mode,
                       gboolean eof, GError **error);
char *join_chunks (const char *s);
void check_answers (GPtrArray *rules, const char *requests, const char *answers, gboolean eof,
                    gint code);
void assert_answers (GPtrArray *rules, const char *requests, const char *answers, gboolean eof);
void assert_answer_fails (GPtrArray *rules, const char *requests, const char *answers, gint code);

G_END_DECLS
