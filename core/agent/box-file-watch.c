/* box-file-watch.c: fs-watch on an agent channel (see box-file-watch.h):
 * the agent's CTRL events {event: fs, type, path}, {event: overflow} and
 * {event: error} as signals. */
#include "config.h"

#include "box-agent-private.h"
#include "box-file-watch.h"

struct _BoxFileWatch {
  GObject          parent_instance;

  BoxAgentChannel *channel;
  char            *path;
};

G_DEFINE_FINAL_TYPE (BoxFileWatch, box_file_watch, G_TYPE_OBJECT)

enum {
  SIGNAL_CHANGED,
  SIGNAL_OVERFLOW,
  SIGNAL_FAILED,
  SIGNAL_CLOSED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static gboolean
parse_change (const char *type, BoxFileChange *out)
{
  static const char *const names[] = { "create", "write", "remove", "rename", "chmod" };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++) {
    if (g_str_equal (type, names[i])) {
      *out = (BoxFileChange) i;
      return TRUE;
    }
  }
  return FALSE;
}

static void
on_ctrl (BoxAgentChannel *channel, JsonObject *msg, gpointer user_data)
{
  BoxFileWatch *self = user_data;
  const char *event = json_object_get_string_member_with_default (msg, "event", "");
  const char *type = json_object_get_string_member_with_default (msg, "type", "");
  const char *path = json_object_get_string_member_with_default (msg, "path", "");
  BoxFileChange change;

  if (g_str_equal (event, "overflow")) {
    g_signal_emit (self, signals[SIGNAL_OVERFLOW], 0);
  } else if (g_str_equal (event, "fs")) {
    /* a kind this side does not know is dropped */
    if (parse_change (type, &change))
      g_signal_emit (self, signals[SIGNAL_CHANGED], 0, (gint) change, path);
  } else if (g_str_equal (event, "error")) {
    g_autoptr(GError) error = box_agent_error_from_reply (msg);

    g_signal_emit (self, signals[SIGNAL_FAILED], 0, error);
  }
}

static void
on_closed (BoxAgentChannel *channel, gpointer user_data)
{
  g_signal_emit (user_data, signals[SIGNAL_CLOSED], 0);
}

BoxFileWatch *
box_file_watch_new (BoxAgentChannel *channel, const char *path)
{
  BoxFileWatch *self = g_object_new (BOX_TYPE_FILE_WATCH, NULL);

  self->channel = g_object_ref (channel);
  self->path = g_strdup (path);
  g_signal_connect (channel, "ctrl", G_CALLBACK (on_ctrl), self);
  g_signal_connect (channel, "closed", G_CALLBACK (on_closed), self);
  return self;
}

const char *
box_file_watch_get_path (BoxFileWatch *self)
{
  g_return_val_if_fail (BOX_IS_FILE_WATCH (self), NULL);
  return self->path;
}

gboolean
box_file_watch_is_closed (BoxFileWatch *self)
{
  g_return_val_if_fail (BOX_IS_FILE_WATCH (self), TRUE);
  return box_agent_channel_is_closed (self->channel);
}

void
box_file_watch_close (BoxFileWatch *self)
{
  g_return_if_fail (BOX_IS_FILE_WATCH (self));
  box_agent_channel_close (self->channel);
}

static void
box_file_watch_dispose (GObject *object)
{
  BoxFileWatch *self = BOX_FILE_WATCH (object);

  if (self->channel != NULL) {
    g_signal_handlers_disconnect_by_data (self->channel, self);
    box_agent_channel_close (self->channel);
    g_clear_object (&self->channel);
  }
  G_OBJECT_CLASS (box_file_watch_parent_class)->dispose (object);
}

static void
box_file_watch_finalize (GObject *object)
{
  BoxFileWatch *self = BOX_FILE_WATCH (object);

  g_free (self->path);
  G_OBJECT_CLASS (box_file_watch_parent_class)->finalize (object);
}

static void
box_file_watch_class_init (BoxFileWatchClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = box_file_watch_dispose;
  object_class->finalize = box_file_watch_finalize;
  signals[SIGNAL_CHANGED] =
    g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, G_TYPE_INT, G_TYPE_STRING);
  signals[SIGNAL_OVERFLOW] =
    g_signal_new ("overflow", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);
  signals[SIGNAL_FAILED] =
    g_signal_new ("failed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_ERROR);
  signals[SIGNAL_CLOSED] =
    g_signal_new ("closed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);
}

static void
box_file_watch_init (BoxFileWatch *self)
{
}
