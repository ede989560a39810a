/* box-edge-pool.c: idle streams to sandbox ports; see box-edge-pool.h. */
#include "config.h"

#include "box-edge-pool.h"

typedef struct {
  BoxEdgePool          *pool;
  char                 *key;         /* "<sandbox id>:<port>" */
  BoxAgentStream       *up;
  GBufferedInputStream *uin;
  guint                 timer;
} Idle;

struct _BoxEdgePool {
  BoxEngine  *engine;
  gulong      interrupted_id;
  GHashTable *ports;   /* key -> GQueue of Idle*, newest at the head */
  guint       size;
  gboolean    closed;
};

static void
idle_close (Idle *idle)
{
  if (idle->timer != 0)
    g_source_remove (idle->timer);
  /* graceful: EOF to the server, the hold ends once the channel closed */
  g_io_stream_close_async (G_IO_STREAM (idle->up), G_PRIORITY_DEFAULT, NULL, NULL, NULL);
  g_object_unref (idle->uin);
  g_object_unref (idle->up);
  g_free (idle->key);
  g_free (idle);
}

static void
idle_unlink (Idle *idle)
{
  GQueue *queue = g_hash_table_lookup (idle->pool->ports, idle->key);

  g_queue_remove (queue, idle);
  idle->pool->size--;
  if (g_queue_is_empty (queue))
    g_hash_table_remove (idle->pool->ports, idle->key);
}

static gboolean
idle_expired (gpointer user_data)
{
  Idle *idle = user_data;

  idle->timer = 0;
  idle_unlink (idle);
  idle_close (idle);
  return G_SOURCE_REMOVE;
}

static void
queue_close (gpointer data)
{
  GQueue *queue = data;
  Idle *idle;

  while ((idle = g_queue_pop_head (queue)) != NULL) {
    idle->pool->size--;
    idle_close (idle);
  }
  g_queue_free (queue);
}

static void
interrupted (BoxEngine *engine, const char *sandbox_id, const char *why, gpointer user_data)
{
  BoxEdgePool *pool = user_data;
  g_autofree char *prefix = g_strdup_printf ("%s:", sandbox_id);
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, pool->ports);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (g_str_has_prefix (key, prefix))
      g_hash_table_iter_remove (&iter);
}

BoxEdgePool *
box_edge_pool_new (BoxEngine *engine)
{
  BoxEdgePool *pool = g_new0 (BoxEdgePool, 1);

  pool->engine = g_object_ref (engine);
  pool->ports = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, queue_close);
  pool->interrupted_id = g_signal_connect (engine, "sandbox-interrupted",
                                           G_CALLBACK (interrupted), pool);
  return pool;
}

void
box_edge_pool_free (BoxEdgePool *pool)
{
  if (pool == NULL)
    return;
  g_signal_handler_disconnect (pool->engine, pool->interrupted_id);
  g_hash_table_destroy (pool->ports);
  g_object_unref (pool->engine);
  g_free (pool);
}

void
box_edge_pool_shutdown (BoxEdgePool *pool)
{
  pool->closed = TRUE;
  g_hash_table_remove_all (pool->ports);
}

void
box_edge_pool_put (BoxEdgePool *pool, const char *sandbox_id, guint port, BoxAgentStream *up,
                   GBufferedInputStream *uin)
{
  Idle *idle = g_new0 (Idle, 1);
  GQueue *queue;

  idle->pool = pool;
  idle->key = g_strdup_printf ("%s:%u", sandbox_id, port);
  idle->up = up;
  idle->uin = uin;
  queue = g_hash_table_lookup (pool->ports, idle->key);
  if (pool->closed || pool->size >= BOX_EDGE_POOL_MAX ||
      (queue != NULL && g_queue_get_length (queue) >= BOX_EDGE_POOL_PER_PORT)) {
    idle_close (idle);
    return;
  }
  if (queue == NULL) {
    queue = g_queue_new ();
    g_hash_table_insert (pool->ports, g_strdup (idle->key), queue);
  }
  g_queue_push_head (queue, idle);
  pool->size++;
  idle->timer = g_timeout_add_seconds (BOX_EDGE_POOL_IDLE_S, idle_expired, idle);
}

gboolean
box_edge_pool_take (BoxEdgePool *pool, const char *sandbox_id, guint port, BoxAgentStream **up,
                    GBufferedInputStream **uin)
{
  g_autofree char *key = g_strdup_printf ("%s:%u", sandbox_id, port);
  GQueue *queue = g_hash_table_lookup (pool->ports, key);
  Idle *idle;

  if (queue == NULL)
    return FALSE;
  idle = g_queue_peek_head (queue);
  idle_unlink (idle);
  g_source_remove (idle->timer);
  *up = idle->up;
  *uin = idle->uin;
  g_free (idle->key);
  g_free (idle);
  return TRUE;
}

guint
box_edge_pool_size (BoxEdgePool *pool)
{
  return pool->size;
}
