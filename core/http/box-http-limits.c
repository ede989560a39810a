/* box-http-limits.c: request rates and open streams per key (see the header). */
#include "config.h"

#include "box-http-limits.h"
#include "box-rate-limiter.h"

typedef struct {
  guint websockets;
  guint sse;
  guint sessions;
} Counts;

struct _BoxHttpLimits {
  BoxRateLimiter *rate;
  guint           max_websockets;
  guint           max_sse;
  guint           max_sessions;
  GHashTable     *open;          /* principal name -> Counts* (only while > 0) */
};

struct _BoxHttpSlot {
  BoxHttpLimits *limits;         /* a reference: a stream may end after the server */
  char          *name;
  guint          flags;          /* the route's BOX_HTTP_ROUTE_WEBSOCKET/_SSE/_SESSION */
};

BoxHttpLimits *
box_http_limits_new (BoxEngine *engine)
{
  BoxConfig *config = box_engine_get_config (engine);
  BoxHttpLimits *self = g_rc_box_new0 (BoxHttpLimits);

  self->rate = box_rate_limiter_new (box_engine_get_clock (engine), config->rate_per_s,
                                     config->rate_burst);
  self->max_websockets = config->key_max_websockets;
  self->max_sse = config->key_max_sse;
  self->max_sessions = config->key_max_sessions;
  self->open = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  return self;
}

static void
limits_clear (gpointer data)
{
  BoxHttpLimits *self = data;

  g_clear_object (&self->rate);
  g_hash_table_unref (self->open);
}

void
box_http_limits_free (BoxHttpLimits *self)
{
  if (self == NULL)
    return;
  g_rc_box_release_full (self, limits_clear);
}

/* The name limits are kept under: the key's ID, or the sandbox's for the
 * in-sandbox socket; NULL for the admin token and routes without a key. */
static char *
principal_name (const BoxPrincipal *principal)
{
  if (principal == NULL)
    return NULL;
  switch (principal->kind) {
  case BOX_PRINCIPAL_KEY:
    return g_strconcat ("key:", principal->key->id, NULL);
  case BOX_PRINCIPAL_SANDBOX:
    return g_strconcat ("sandbox:", principal->sandbox_id, NULL);
  case BOX_PRINCIPAL_ADMIN:
  default:
    return NULL;
  }
}

static gboolean
over (guint count, guint max, const char *what, GError **error)
{
  if (max == 0 || count < max)
    return FALSE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT,
               "too many open %s: a key may have at most %u at once; close one first", what, max);
  return TRUE;
}

gboolean
box_http_limits_admit (BoxHttpLimits *self, BoxHttpRequest *req, GError **error)
{
  g_autofree char *name = principal_name (req->principal);
  guint streams = req->route->flags & (BOX_HTTP_ROUTE_WEBSOCKET | BOX_HTTP_ROUTE_SSE);
  guint retry_after_s = 0;
  BoxHttpSlot *slot;
  Counts *counts;

  if (name == NULL)
    return TRUE;
  if (!box_rate_limiter_take (self->rate, name, &retry_after_s)) {
    g_autofree char *seconds = g_strdup_printf ("%u", retry_after_s);

    soup_message_headers_replace (soup_server_message_get_response_headers (req->msg),
                                  "Retry-After", seconds);
    g_set_error (error, BOX_ERROR, BOX_ERROR_RATE_LIMITED,
                 "too many requests: this key may make %u requests a second (bursts of %u); "
                 "retry after %u s", box_engine_get_config (req->engine)->rate_per_s,
                 box_engine_get_config (req->engine)->rate_burst, retry_after_s);
    return FALSE;
  }
  if (streams == 0)
    return TRUE;

  counts = g_hash_table_lookup (self->open, name);
  if (counts != NULL) {
    if ((req->route->flags & BOX_HTTP_ROUTE_WEBSOCKET) != 0 &&
        over (counts->websockets, self->max_websockets, "WebSockets", error))
      return FALSE;
    if ((req->route->flags & BOX_HTTP_ROUTE_SSE) != 0 &&
        over (counts->sse, self->max_sse, "event streams", error))
      return FALSE;
    if ((req->route->flags & BOX_HTTP_ROUTE_SESSION) != 0 &&
        over (counts->sessions, self->max_sessions, "exec sessions", error))
      return FALSE;
  } else {
    counts = g_new0 (Counts, 1);
    g_hash_table_insert (self->open, g_strdup (name), counts);
  }
  if ((req->route->flags & BOX_HTTP_ROUTE_WEBSOCKET) != 0)
    counts->websockets++;
  if ((req->route->flags & BOX_HTTP_ROUTE_SSE) != 0)
    counts->sse++;
  if ((req->route->flags & BOX_HTTP_ROUTE_SESSION) != 0)
    counts->sessions++;

  slot = g_new0 (BoxHttpSlot, 1);
  slot->limits = g_rc_box_acquire (self);
  slot->name = g_steal_pointer (&name);
  slot->flags = req->route->flags;
  g_clear_pointer (&req->slot, box_http_slot_release);
  req->slot = slot;
  return TRUE;
}

void
box_http_slot_release (BoxHttpSlot *slot)
{
  Counts *counts;

  if (slot == NULL)
    return;
  counts = g_hash_table_lookup (slot->limits->open, slot->name);
  g_assert (counts != NULL);
  if ((slot->flags & BOX_HTTP_ROUTE_WEBSOCKET) != 0)
    counts->websockets--;
  if ((slot->flags & BOX_HTTP_ROUTE_SSE) != 0)
    counts->sse--;
  if ((slot->flags & BOX_HTTP_ROUTE_SESSION) != 0)
    counts->sessions--;
  if (counts->websockets == 0 && counts->sse == 0 && counts->sessions == 0)
    g_hash_table_remove (slot->limits->open, slot->name);
  box_http_limits_free (slot->limits);
  g_free (slot->name);
  g_free (slot);
}
