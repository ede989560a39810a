/* box-broker-http.c: the broker's HTTP/1.1 rewriter, one per connection;
 * see box-broker-http.h.  Heads are read and written in
 * box-broker-http-head.c, bodies framed in box-broker-http-framer.c; this
 * file follows both directions and checks the answers.
 *
 * Answers are checked with one Knuth-Morris-Pratt automaton per value:
 * each byte costs O(1) amortised per rule whatever the value, the state
 * carries a match across reads, and the largest state is exactly how many
 * trailing bytes could still become a value (those are held back).  A
 * value that starts in the first BOX_BROKER_HTTP_CHECK_BYTES of a body is
 * found even if it ends after them.
 *
 * Only requests naming the connection's (verified) host get the rules;
 * one without Host, HTTP/1.1 too, goes as it is (a server may serve it
 * from a default virtual host), answered by the server, not by us.
 */
#include "config.h"

#include "box-broker-http-private.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "box-error.h"

/* Requests sent and not yet answered; more is no client's pipelining. */
#define MAX_PENDING 1024

typedef enum { SIDE_HEAD, SIDE_BODY, SIDE_WAIT_UPGRADE, SIDE_TUNNEL } SideState;

typedef struct {
  gboolean head;       /* a HEAD request: its answer has no body */
  gboolean websocket;
} Pending;

/* One value's automaton. */
typedef struct {
  const guint8 *value;      /* the rule's, which the rules array keeps */
  gsize         len;
  guint        *fail;       /* KMP failure table */
  guint         state;      /* how many bytes of the value were just seen */
} Matcher;

struct _BoxBrokerHttp {
  char       *host;         /* the connection's (its TLS server name) */
  GPtrArray  *rules;
  GPtrArray  *retired;      /* rules arrays replaced while requests with
                             * their values wait for an answer ... */
  guint       retired_left; /* ... that many answers still */
  Matcher    *matchers;     /* one per rule */
  guint       n_matchers;

  SideState   client;
  GByteArray *client_head;  /* a request head being read */
  GByteArray *replay;       /* held while an upgrade is answered */
  BoxBrokerHttpFramer client_body;
  gboolean    client_failed;
  GQueue      pending;

  SideState   up;
  GByteArray *up_head;      /* an answer's head being read */
  BoxBrokerHttpFramer up_body;
  guint64     body_seen;    /* bytes of the answer's body so far */
  gboolean    checking;
  GByteArray *held;         /* a body's end that may begin a value ... */
  gsize       held_start;   /* ... from here: released bytes before it are
                             * dropped in one go, not one read at a time */
  gboolean    released;     /* something of the current answer went out */
  gboolean    rechunk;      /* a chunked body's data: released as chunks */
  gboolean    up_failed;
  gboolean    poisoned;     /* new rules found a value in what is held */
};

void
box_broker_http_rule_free (BoxBrokerHttpRule *rule)
{
  if (rule == NULL)
    return;
  g_free (rule->placeholder);
  g_clear_pointer (&rule->value, g_bytes_unref);
  g_free (rule->inject_header);
  g_free (rule->inject_format);
  g_free (rule->path_prefix);
  g_free (rule);
}

/* One byte through every automaton; FALSE when a value is complete. */
static gboolean
step (BoxBrokerHttp *http, guint8 c)
{
  for (guint i = 0; i < http->n_matchers; i++) {
    Matcher *m = &http->matchers[i];
    guint s = m->state;

    while (s > 0 && m->value[s] != c)
      s = m->fail[s - 1];
    if (m->value[s] == c)
      s++;
    if (s == m->len)
      return FALSE;
    m->state = s;
  }
  return TRUE;
}

static guint
max_state (BoxBrokerHttp *http)
{
  guint best = 0;

  for (guint i = 0; i < http->n_matchers; i++)
    best = MAX (best, http->matchers[i].state);
  return best;
}

static void
reset_states (BoxBrokerHttp *http)
{
  for (guint i = 0; i < http->n_matchers; i++)
    http->matchers[i].state = 0;
}

static void
free_matchers (BoxBrokerHttp *http)
{
  for (guint i = 0; i < http->n_matchers; i++)
    g_free (http->matchers[i].fail);
  g_clear_pointer (&http->matchers, g_free);
  http->n_matchers = 0;
}

static void
add_matchers (BoxBrokerHttp *http, GPtrArray *rules)
{
  for (guint i = 0; i < rules->len; i++) {
    const BoxBrokerHttpRule *rule = g_ptr_array_index (rules, i);
    Matcher *m = &http->matchers[http->n_matchers];
    guint k = 0;

    m->value = g_bytes_get_data (rule->value, &m->len);
    if (m->len == 0)
      continue;
    m->fail = g_new0 (guint, m->len + 1);
    for (gsize q = 1; q < m->len; q++) {
      while (k > 0 && m->value[k] != m->value[q])
        k = m->fail[k - 1];
      if (m->value[k] == m->value[q])
        k++;
      m->fail[q] = k;
    }
    http->n_matchers++;
  }
}

/* One automaton per value of the rules and of the retired ones. */
static void
build_matchers (BoxBrokerHttp *http)
{
  guint n = http->rules->len + 1;

  free_matchers (http);
  for (guint i = 0; http->retired != NULL && i < http->retired->len; i++)
    n += ((GPtrArray *) g_ptr_array_index (http->retired, i))->len;
  http->matchers = g_new0 (Matcher, n);
  add_matchers (http, http->rules);
  for (guint i = 0; http->retired != NULL && i < http->retired->len; i++)
    add_matchers (http, g_ptr_array_index (http->retired, i));
}

/* An answer ended: the retired values are dropped once every request
 * pending when they were replaced has its answer. */
static void
answer_done (BoxBrokerHttp *http)
{
  if (http->retired == NULL || --http->retired_left > 0)
    return;
  g_clear_pointer (&http->retired, g_ptr_array_unref);
  build_matchers (http);
}

BoxBrokerHttp *
box_broker_http_new (GPtrArray *rules, const char *host)
{
  BoxBrokerHttp *http = g_new0 (BoxBrokerHttp, 1);

  http->host = g_strdup (host);
  http->rules = g_ptr_array_ref (rules);
  build_matchers (http);
  http->client_head = g_byte_array_new ();
  http->up_head = g_byte_array_new ();
  http->held = g_byte_array_new ();
  g_queue_init (&http->pending);
  return http;
}

void
box_broker_http_free (BoxBrokerHttp *http)
{
  if (http == NULL)
    return;
  free_matchers (http);
  g_free (http->host);
  g_ptr_array_unref (http->rules);
  g_clear_pointer (&http->retired, g_ptr_array_unref);
  g_byte_array_unref (http->client_head);
  g_clear_pointer (&http->replay, g_byte_array_unref);
  g_byte_array_unref (http->up_head);
  g_byte_array_unref (http->held);
  g_queue_clear_full (&http->pending, g_free);
  g_free (http);
}

void
box_broker_http_set_rules (BoxBrokerHttp *http, GPtrArray *rules)
{
  /* requests sent with the old values may still be answered: those
   * answers (and the one being read) are checked for them too */
  guint left = g_queue_get_length (&http->pending) + (http->up == SIDE_BODY ? 1 : 0);

  if (http->up == SIDE_TUNNEL)   /* a tunnel's start: checked for both, for good */
    left = G_MAXUINT;
  if (left > 0) {
    if (http->retired == NULL)
      http->retired = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
    g_ptr_array_add (http->retired, g_ptr_array_ref (http->rules));
    http->retired_left = MAX (http->retired_left, left);
  }
  g_ptr_array_ref (rules);
  g_ptr_array_unref (http->rules);
  http->rules = rules;
  build_matchers (http);
  /* what is held back is checked again for the new values */
  for (gsize i = http->held_start; i < http->held->len; i++)
    if (!step (http, http->held->data[i]))
      http->poisoned = TRUE;
}

static gboolean
fail_value (GError **error)
{
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_BROKER_FAILED,
                       "the answer carried a secret's value");
  return FALSE;
}

/* Reads a head out of @data into @buf; *@used: bytes of @data taken.
 * Returns the parsed head once complete, NULL otherwise (with @error set
 * when it cannot be one).  Empty lines before a head are skipped (an
 * answer's are appended to @out). */
static BoxBrokerHttpHead *
read_head (GByteArray *buf, const guint8 *data, gsize len, gsize *used, gboolean request,
           BoxBrokerHttp *http, GByteArray *out, GError **error)
{
  gsize skip = 0, old = buf->len, take, end;

  while (buf->len == 0 && skip < len && (data[skip] == '\r' || data[skip] == '\n'))
    skip++;
  /* an answer's stray line ends go on: the client skips them too */
  if (!request)
    g_byte_array_append (out, data, (guint) skip);
  take = MIN (len - skip, BOX_BROKER_HTTP_MAX_HEAD - buf->len);
  g_byte_array_append (buf, data + skip, (guint) take);
  end = box_broker_http_head_end (buf->data, buf->len, old > 2 ? old - 2 : 0);
  if (end == 0) {
    *used = skip + take;
    if (buf->len >= BOX_BROKER_HTTP_MAX_HEAD)
      box_broker_http_fail_invalid (error, request ? "a request head is larger than 64 KiB"
                                                   : "an answer's head is larger than 64 KiB");
    return NULL;
  }
  *used = skip + (end - old);
  g_byte_array_set_size (buf, (guint) end);
  if (!request) {
    for (guint i = 0; i < http->n_matchers; i++) {
      const Matcher *m = &http->matchers[i];

      if (memmem (buf->data, buf->len, m->value, m->len) != NULL) {
        fail_value (error);
        return NULL;
      }
    }
  }
  return box_broker_http_head_parse (buf->data, buf->len, request, error);
}

static gboolean
client_head (BoxBrokerHttp *http, const guint8 *data, gsize len, gsize *used,
             GByteArray *out, GError **error)
{
  g_autoptr(BoxBrokerHttpHead) head = NULL;
  g_autoptr(GError) local = NULL;
  Pending *pending;
  gboolean has_body;
  guint before;

  head = read_head (http->client_head, data, len, used, TRUE, http, NULL, &local);
  if (head == NULL) {
    if (local == NULL)
      return TRUE;
    g_propagate_error (error, g_steal_pointer (&local));
    return FALSE;
  }
  g_byte_array_set_size (http->client_head, 0);
  if (g_queue_get_length (&http->pending) >= MAX_PENDING)
    return box_broker_http_fail_invalid (error, "too many requests wait for an answer");
  has_body = head->chunked || (head->has_length && head->length > 0);
  if (head->websocket && has_body)
    return box_broker_http_fail_invalid (error, "a WebSocket upgrade request with a body");
  before = out->len;
  /* another virtual host than the connection's: placeholders stay */
  if (!box_broker_http_write_request (head, box_broker_http_host_matches (head, http->host) ? http->rules : NULL,
                                      out, error)) {
    g_byte_array_set_size (out, before);   /* nothing of a refused head goes */
    return FALSE;
  }
  pending = g_new0 (Pending, 1);
  pending->head = g_ascii_strcasecmp (head->method, "HEAD") == 0;
  pending->websocket = head->websocket;
  g_queue_push_tail (&http->pending, pending);
  box_broker_http_framer_start (&http->client_body, head, FALSE, TRUE);
  if (head->websocket)
    http->client = SIDE_WAIT_UPGRADE;
  else if (http->client_body.state != BODY_DONE)
    http->client = SIDE_BODY;
  return TRUE;
}

/* One side's next step on @len > 0 bytes: *@used of them were taken. */
typedef gboolean (*StepFunc) (BoxBrokerHttp *http, const guint8 *data, gsize len, gsize *used,
                              GByteArray *out, GError **error);

static gboolean
drive (BoxBrokerHttp *http, StepFunc step_func, const guint8 *data, gsize len,
       GByteArray *out, GError **error)
{
  while (len > 0) {
    gsize used = 0;

    if (!step_func (http, data, len, &used, out, error))
      return FALSE;
    data += used;
    len -= used;
  }
  return TRUE;
}

static gboolean
client_step (BoxBrokerHttp *http, const guint8 *data, gsize len, gsize *used,
             GByteArray *out, GError **error)
{
  switch (http->client) {
  case SIDE_TUNNEL:
    g_byte_array_append (out, data, (guint) len);
    *used = len;
    return TRUE;
  case SIDE_WAIT_UPGRADE:
    if (http->replay == NULL)
      http->replay = g_byte_array_new ();
    if (http->replay->len + len > BOX_BROKER_HTTP_MAX_HEAD)
      return box_broker_http_fail_invalid (error, "the client sent too much before the upgrade was answered");
    g_byte_array_append (http->replay, data, (guint) len);
    *used = len;
    return TRUE;
  case SIDE_HEAD:
    return client_head (http, data, len, used, out, error);
  case SIDE_BODY:
    if (!box_broker_http_framer_take (&http->client_body, data, len, used, error))
      return FALSE;
    g_byte_array_append (out, data, (guint) *used);
    if (http->client_body.state == BODY_DONE)
      http->client = SIDE_HEAD;
    return TRUE;
  default:
    g_assert_not_reached ();
  }
}

gboolean
box_broker_http_from_client (BoxBrokerHttp *http, const guint8 *data, gsize len,
                             GByteArray *out, GError **error)
{
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (http->client_failed)
    return box_broker_http_fail_invalid (error, "the request stream was refused already");
  /* what was held while an upgrade was answered goes first */
  if (http->replay != NULL && http->client != SIDE_WAIT_UPGRADE) {
    g_autoptr(GByteArray) replay = g_steal_pointer (&http->replay);

    if (!drive (http, client_step, replay->data, replay->len, out, error)) {
      http->client_failed = TRUE;
      return FALSE;
    }
  }
  if (!drive (http, client_step, data, len, out, error)) {
    http->client_failed = TRUE;
    return FALSE;
  }
  return TRUE;
}

/* Body bytes to the client: a chunked body's data as a chunk of its own
 * (the broker frames it anew, so only data is ever held and checked). */
static void
emit (BoxBrokerHttp *http, GByteArray *out, const guint8 *data, gsize len)
{
  char size[32];

  if (len == 0)
    return;
  if (http->rechunk) {
    g_snprintf (size, sizeof size, "%zx\r\n", len);
    g_byte_array_append (out, (const guint8 *) size, (guint) strlen (size));
  }
  g_byte_array_append (out, data, (guint) len);
  if (http->rechunk)
    g_byte_array_append (out, (const guint8 *) "\r\n", 2);
}

static void
release_held (BoxBrokerHttp *http, GByteArray *out)
{
  emit (http, out, http->held->data + http->held_start, http->held->len - http->held_start);
  g_byte_array_set_size (http->held, 0);
  http->held_start = 0;
}

/* Body bytes of an answer: checked, and released but for what may begin
 * a value. */
static gboolean
pass_body (BoxBrokerHttp *http, const guint8 *data, gsize len, GByteArray *out, GError **error)
{
  gsize hold = 0;

  if (http->checking) {
    for (gsize i = 0; i < len; i++) {
      if (http->body_seen >= BOX_BROKER_HTTP_CHECK_BYTES && max_state (http) == 0) {
        http->checking = FALSE;
        break;
      }
      http->body_seen++;
      if (!step (http, data[i]))
        return fail_value (error);
    }
    if (http->checking)
      hold = max_state (http);
  }
  if (hold >= len) {
    gsize release;

    g_byte_array_append (http->held, data, (guint) len);
    release = http->held->len - http->held_start - hold;
    if (release > 0) {
      emit (http, out, http->held->data + http->held_start, release);
      http->held_start += release;
      http->released = TRUE;
    }
    if (http->held_start >= http->held->len / 2) {
      g_byte_array_remove_range (http->held, 0, (guint) http->held_start);
      http->held_start = 0;
    }
    return TRUE;
  }
  if (http->rechunk && http->held->len > http->held_start) {
    /* one chunk for what was held and what follows it */
    g_byte_array_append (http->held, data, (guint) (len - hold));
    emit (http, out, http->held->data + http->held_start, http->held->len - http->held_start);
    g_byte_array_set_size (http->held, 0);
    http->held_start = 0;
  } else {
    release_held (http, out);
    emit (http, out, data, len - hold);
  }
  g_byte_array_append (http->held, data + len - hold, (guint) hold);
  if (len > hold)
    http->released = TRUE;
  return TRUE;
}

static void
end_answer (BoxBrokerHttp *http, GByteArray *out)
{
  release_held (http, out);
  http->rechunk = FALSE;
  http->checking = FALSE;
  http->released = FALSE;
  http->up = SIDE_HEAD;
  answer_done (http);
}

static gboolean
up_head (BoxBrokerHttp *http, const guint8 *data, gsize len, gsize *used,
         GByteArray *out, GError **error)
{
  g_autoptr(BoxBrokerHttpHead) head = NULL;
  g_autoptr(GError) local = NULL;
  g_autofree Pending *pending = NULL;
  gboolean no_body;

  head = read_head (http->up_head, data, len, used, FALSE, http, out, &local);
  if (head == NULL) {
    if (local == NULL)
      return TRUE;
    g_propagate_error (error, g_steal_pointer (&local));
    return FALSE;
  }
  if (g_queue_is_empty (&http->pending))
    return box_broker_http_fail_invalid (error, "the upstream answered a request that was not sent");
  if (head->status == 101 && !((Pending *) g_queue_peek_head (&http->pending))->websocket)
    return box_broker_http_fail_invalid (error,
                                         "the upstream switched protocols without a WebSocket upgrade");
  g_byte_array_append (out, http->up_head->data, http->up_head->len);
  g_byte_array_set_size (http->up_head, 0);
  if (head->status == 101) {
    pending = g_queue_pop_head (&http->pending);
    http->client = SIDE_TUNNEL;
    http->up = SIDE_TUNNEL;
    http->released = TRUE;
    /* a server may echo the handshake (its Authorization) in its first
     * frames: the tunnel's start is checked as a body is */
    http->checking = TRUE;
    http->body_seen = 0;
    reset_states (http);
    return TRUE;
  }
  if (head->status < 200)   /* 100 Continue and the like: the final answer follows */
    return TRUE;
  pending = g_queue_pop_head (&http->pending);
  if (pending->websocket && http->client == SIDE_WAIT_UPGRADE)
    http->client = SIDE_HEAD;
  no_body = pending->head || head->status == 204 || head->status == 304;
  box_broker_http_framer_start (&http->up_body, head, no_body, FALSE);
  if (http->up_body.state == BODY_DONE) {
    answer_done (http);
    return TRUE;
  }
  http->released = TRUE;
  http->up = SIDE_BODY;
  http->rechunk = FALSE;
  http->checking = TRUE;
  http->body_seen = 0;
  reset_states (http);
  return TRUE;
}

/* A chunked answer's body: only the chunks' data and the trailers are
 * checked (a value split by the chunk framing is still found); the data
 * goes out in chunks of the broker's own, the trailers as they are. */
static gboolean
up_chunked (BoxBrokerHttp *http, const guint8 *data, gsize len, gsize *used,
            GByteArray *out, GError **error)
{
  BoxBrokerHttpFramer *framer = &http->up_body;
  gsize at = 0;

  while (at < len && framer->state != BODY_DONE) {
    if (framer->state == BODY_CHUNK_DATA) {
      gsize n = (gsize) MIN ((guint64) (len - at), framer->remain);

      http->rechunk = TRUE;
      if (!pass_body (http, data + at, n, out, error))
        return FALSE;
      at += n;
      framer->remain -= n;
      if (framer->remain == 0)
        framer->state = BODY_CHUNK_DATA_CR;
      continue;
    }
    if (framer->state >= BODY_TRAILER_START) {
      if (!box_broker_http_framer_byte (framer, data[at], error) ||
          !pass_body (http, data + at, 1, out, error))
        return FALSE;
      at++;
      continue;
    }
    if (!box_broker_http_framer_byte (framer, data[at++], error))
      return FALSE;
    if (framer->state == BODY_TRAILER_START) {
      /* the last chunk: what is held goes as a chunk, then the end */
      release_held (http, out);
      reset_states (http);   /* "0", CRLF and a name come between */
      http->rechunk = FALSE;
      g_byte_array_append (out, (const guint8 *) "0\r\n", 3);
      http->released = TRUE;
    }
  }
  *used = at;
  return TRUE;
}

static gboolean
up_step (BoxBrokerHttp *http, const guint8 *data, gsize len, gsize *used,
         GByteArray *out, GError **error)
{
  switch (http->up) {
  case SIDE_TUNNEL:
    *used = len;
    return pass_body (http, data, len, out, error);
  case SIDE_HEAD:
    return up_head (http, data, len, used, out, error);
  case SIDE_BODY:
    if (http->up_body.state >= BODY_CHUNK_SIZE) {
      if (!up_chunked (http, data, len, used, out, error))
        return FALSE;
    } else if (!box_broker_http_framer_take (&http->up_body, data, len, used, error) ||
               !pass_body (http, data, *used, out, error))
      return FALSE;
    if (http->up_body.state == BODY_DONE)
      end_answer (http, out);
    return TRUE;
  case SIDE_WAIT_UPGRADE:
  default:
    g_assert_not_reached ();
  }
}

gboolean
box_broker_http_from_upstream (BoxBrokerHttp *http, const guint8 *data, gsize len,
                               GByteArray *out, GError **error)
{
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (http->up_failed)
    return box_broker_http_fail_invalid (error, "the answer stream was refused already");
  if (http->poisoned || !drive (http, up_step, data, len, out, error)) {
    if (http->poisoned)
      fail_value (error);
    http->up_failed = TRUE;
    return FALSE;
  }
  return TRUE;
}

gboolean
box_broker_http_upstream_eof (BoxBrokerHttp *http, GByteArray *out, GError **error)
{
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (http->up_failed)
    return box_broker_http_fail_invalid (error, "the answer stream was refused already");
  if (http->poisoned) {
    http->up_failed = TRUE;
    return fail_value (error);
  }
  if (http->up == SIDE_HEAD && http->up_head->len > 0) {
    http->up_failed = TRUE;
    return box_broker_http_fail_invalid (error, "the upstream closed in the middle of an answer's head");
  }
  if (http->up == SIDE_BODY)
    end_answer (http, out);
  else if (http->up == SIDE_TUNNEL)
    release_held (http, out);
  return TRUE;
}

gboolean
box_broker_http_can_answer (BoxBrokerHttp *http)
{
  return !http->released;
}

gboolean
box_broker_http_is_tunnel (BoxBrokerHttp *http)
{
  return http->up == SIDE_TUNNEL;
}

GBytes *
box_broker_http_error_response (guint status, const char *code, const char *message)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *body = NULL;
  const char *reason = status == 400 ? "Bad Request" : status == 502 ? "Bad Gateway"
                     : status == 500 ? "Internal Server Error" : status == 503 ? "Service Unavailable"
                     : status == 501 ? "Not Implemented" : "Error";
  GString *answer;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "error");
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "code");
  json_builder_add_string_value (builder, code);
  json_builder_set_member_name (builder, "message");
  json_builder_add_string_value (builder, message);
  json_builder_end_object (builder);
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  json_generator_set_root (generator, root);
  body = json_generator_to_data (generator, NULL);
  answer = g_string_new (NULL);
  g_string_append_printf (answer, "HTTP/1.1 %u %s\r\n"
                          "Content-Type: application/json\r\n"
                          "Content-Length: %zu\r\n"
                          "Connection: close\r\n"
                          "\r\n%s", status, reason, strlen (body), body);
  return g_string_free_to_bytes (answer);
}
