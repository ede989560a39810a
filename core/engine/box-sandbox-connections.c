/* box-sandbox-connections.c: the in-sandbox socket's connections, from the
 * agents of the running sandboxes (see box-sandbox-connections.h). */
#include "config.h"

#include "box-agent-stream.h"
#include "box-sandbox-connections.h"

#define RETRY_MS 1000

/* The agent connection of one running sandbox. */
typedef struct {
  BoxSandboxConnections *self;
  char                  *sandbox_id;
  BoxAgentClient        *agent;
  gulong                 opened_id;
  gulong                 closed_id;
  gboolean               interrupted;  /* a pause, stop ... was announced: no retry */
  guint                  retry_id;
} AgentWatch;

struct _BoxSandboxConnections {
  GObject     parent_instance;
  BoxEngine  *engine;
  GHashTable *watches;       /* sandbox id -> AgentWatch* */
  gulong      event_id;
  gulong      interrupted_id;
  gboolean    shut_down;
};

G_DEFINE_FINAL_TYPE (BoxSandboxConnections, box_sandbox_connections, G_TYPE_OBJECT)

enum {
  SIGNAL_CONNECTION,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void attach (BoxSandboxConnections *self, const char *sandbox_id);

static void
on_channel_opened (BoxAgentClient *agent, BoxAgentChannel *channel, JsonObject *event,
                   gpointer user_data)
{
  AgentWatch *aw = user_data;
  g_autoptr(BoxAgentStream) stream = box_agent_stream_new (channel);

  g_signal_emit (aw->self, signals[SIGNAL_CONNECTION], 0, aw->sandbox_id, stream);
}

gboolean
box_sandbox_connections_abort (GIOStream *stream)
{
  if (stream == NULL || !BOX_IS_AGENT_STREAM (stream))
    return FALSE;
  box_agent_stream_abort (BOX_AGENT_STREAM (stream));
  return TRUE;
}

static void
watch_drop_agent (AgentWatch *aw)
{
  if (aw->agent == NULL)
    return;
  g_clear_signal_handler (&aw->opened_id, aw->agent);
  g_clear_signal_handler (&aw->closed_id, aw->agent);
  g_clear_object (&aw->agent);
}

static void
agent_watch_free (AgentWatch *aw)
{
  watch_drop_agent (aw);
  g_clear_handle_id (&aw->retry_id, g_source_remove);
  g_free (aw->sandbox_id);
  g_free (aw);
}

static gboolean
retry_cb (gpointer user_data)
{
  AgentWatch *aw = user_data;
  g_autofree char *sandbox_id = g_strdup (aw->sandbox_id);

  aw->retry_id = 0;
  attach (aw->self, sandbox_id);
  return G_SOURCE_REMOVE;
}

static void
on_agent_closed (BoxAgentClient *agent, GError *error, gpointer user_data)
{
  AgentWatch *aw = user_data;

  watch_drop_agent (aw);
  /* the connection broke while the sandbox runs: take the next one (a
   * pause or stop was announced before and its end event re-attaches) */
  if (!aw->interrupted && aw->retry_id == 0)
    aw->retry_id = g_timeout_add (RETRY_MS, retry_cb, aw);
}

/* Takes the channels of @sandbox_id's current agent, if it runs. */
static void
attach (BoxSandboxConnections *self, const char *sandbox_id)
{
  g_autoptr(BoxSandbox) sandbox = NULL;
  g_autoptr(BoxAgentClient) agent = NULL;
  g_autoptr(GError) error = NULL;
  AgentWatch *aw;

  if (self->shut_down)
    return;
  sandbox = box_engine_get_sandbox (self->engine, NULL, sandbox_id, NULL);
  if (sandbox == NULL || sandbox->state != BOX_SANDBOX_STATE_RUNNING) {
    g_hash_table_remove (self->watches, sandbox_id);
    return;
  }
  agent = box_engine_get_agent (self->engine, sandbox->id, &error);
  if (agent == NULL) {
    g_debug ("in-sandbox socket of %s: %s", sandbox->id, error->message);
    g_hash_table_remove (self->watches, sandbox_id);
    return;
  }
  aw = g_hash_table_lookup (self->watches, sandbox->id);
  if (aw == NULL) {
    aw = g_new0 (AgentWatch, 1);
    aw->self = self;
    aw->sandbox_id = g_strdup (sandbox->id);
    g_hash_table_insert (self->watches, aw->sandbox_id, aw);
  }
  aw->interrupted = FALSE;
  g_clear_handle_id (&aw->retry_id, g_source_remove);
  if (aw->agent == agent)
    return;
  watch_drop_agent (aw);
  aw->agent = g_steal_pointer (&agent);
  aw->opened_id = g_signal_connect (aw->agent, "channel-opened", G_CALLBACK (on_channel_opened), aw);
  aw->closed_id = g_signal_connect (aw->agent, "closed", G_CALLBACK (on_agent_closed), aw);
  if (box_agent_client_is_closed (aw->agent))
    on_agent_closed (aw->agent, NULL, aw);
}

static void
on_event (BoxEngine *engine, BoxEvent *event, gpointer user_data)
{
  /* created, woken, restored, checkpointed, paused, deleted ...: whatever
   * changed, the sandbox's agent is looked at again */
  if (event->sandbox != NULL)
    attach (BOX_SANDBOX_CONNECTIONS (user_data), event->sandbox);
}

static void
on_interrupted (BoxEngine *engine, const char *sandbox_id, const char *why, gpointer user_data)
{
  BoxSandboxConnections *self = BOX_SANDBOX_CONNECTIONS (user_data);
  AgentWatch *aw = g_hash_table_lookup (self->watches, sandbox_id);

  if (aw != NULL) {
    aw->interrupted = TRUE;
    g_clear_handle_id (&aw->retry_id, g_source_remove);
  }
}

BoxSandboxConnections *
box_sandbox_connections_new (BoxEngine *engine)
{
  BoxSandboxConnections *self;
  g_autoptr(GPtrArray) running = NULL;
  g_autoptr(GError) error = NULL;
  BoxSandboxState state = BOX_SANDBOX_STATE_RUNNING;

  g_return_val_if_fail (BOX_IS_ENGINE (engine), NULL);

  self = g_object_new (BOX_TYPE_SANDBOX_CONNECTIONS, NULL);
  self->engine = g_object_ref (engine);
  self->event_id = g_signal_connect (engine, "event", G_CALLBACK (on_event), self);
  self->interrupted_id = g_signal_connect (engine, "sandbox-interrupted",
                                           G_CALLBACK (on_interrupted), self);
  running = box_engine_list_sandboxes (engine, NULL, NULL, &state, &error);
  if (running == NULL)
    g_warning ("in-sandbox socket: cannot list the running sandboxes: %s", error->message);
  for (guint i = 0; running != NULL && i < running->len; i++)
    attach (self, ((BoxSandbox *) g_ptr_array_index (running, i))->id);
  return self;
}

void
box_sandbox_connections_shutdown (BoxSandboxConnections *self)
{
  g_return_if_fail (BOX_IS_SANDBOX_CONNECTIONS (self));
  if (self->shut_down)
    return;
  self->shut_down = TRUE;
  g_clear_signal_handler (&self->event_id, self->engine);
  g_clear_signal_handler (&self->interrupted_id, self->engine);
  g_hash_table_remove_all (self->watches);
}

static void
box_sandbox_connections_dispose (GObject *object)
{
  BoxSandboxConnections *self = BOX_SANDBOX_CONNECTIONS (object);

  if (self->engine != NULL)
    box_sandbox_connections_shutdown (self);
  g_clear_object (&self->engine);
  G_OBJECT_CLASS (box_sandbox_connections_parent_class)->dispose (object);
}

static void
box_sandbox_connections_finalize (GObject *object)
{
  BoxSandboxConnections *self = BOX_SANDBOX_CONNECTIONS (object);

  g_hash_table_unref (self->watches);
  G_OBJECT_CLASS (box_sandbox_connections_parent_class)->finalize (object);
}

static void
box_sandbox_connections_class_init (BoxSandboxConnectionsClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = box_sandbox_connections_dispose;
  object_class->finalize = box_sandbox_connections_finalize;
  signals[SIGNAL_CONNECTION] =
    g_signal_new ("connection", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_IO_STREAM);
}

static void
box_sandbox_connections_init (BoxSandboxConnections *self)
{
  self->watches = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                         (GDestroyNotify) agent_watch_free);
}
