/* box-broker-http-private.h: the parts of box-broker-http.c that read and
 * write one head (box-broker-http-head.c); for the rewriter and its tests
 * only. */
#pragma once

#include "box-broker-http.h"

G_BEGIN_DECLS

/* The longest chunk-size or trailer line accepted in a chunked body. */
#define BOX_BROKER_HTTP_MAX_LINE 4096

typedef struct {
  char *name;
  char *value;   /* without the surrounding whitespace */
} BoxBrokerHttpField;

/* One parsed head.  A request has method, target and version; an answer
 * has version and status.  The framing fields are checked for anything
 * two readers could see differently. */
typedef struct {
  char      *method;
  char      *target;
  char      *version;
  guint      status;
  GPtrArray *fields;       /* BoxBrokerHttpField*, in order */
  gboolean   has_length;
  guint64    length;
  gboolean   chunked;      /* Transfer-Encoding ends with chunked */
  gboolean   has_coding;   /* any Transfer-Encoding */
  gboolean   upgrade;      /* an Upgrade header */
  gboolean   websocket;    /* Upgrade: websocket + Connection: upgrade */
} BoxBrokerHttpHead;

void box_broker_http_head_free (BoxBrokerHttpHead *head);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxBrokerHttpHead, box_broker_http_head_free)

/* Where the head in @buf[0..@len) ends (the index after its empty line),
 * or 0 when it does not yet; @from: bytes before it were searched
 * already. */
gsize box_broker_http_head_end (const guint8 *buf, gsize len, gsize from);

/* @data: a whole head including its empty line.  BOX_ERROR_INVALID on
 * anything the broker refuses to read. */
BoxBrokerHttpHead *box_broker_http_head_parse (const guint8 *data, gsize len,
                                               gboolean request, GError **error);

/* Whether the rule with path prefix @prefix applies to request target
 * @target; see box-broker-http.h. */
gboolean box_broker_http_path_matches (const char *prefix, const char *target);

/* Whether every Host of @head and an absolute-form target's authority
 * name @host (any case, optionally :443), so that the server the
 * connection's TLS reached serves it. */
gboolean box_broker_http_host_matches (const BoxBrokerHttpHead *head, const char *host);

/* The request @head with @rules applied, as bytes, appended to @out. */
gboolean box_broker_http_write_request (BoxBrokerHttpHead *head, GPtrArray *rules,
                                        GByteArray *out, GError **error);

/* Whether a WebSocket upgrade made both directions pass through. */
gboolean box_broker_http_is_tunnel (BoxBrokerHttp *http);

G_END_DECLS
