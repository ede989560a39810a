/* box-plugin.c: the plugin base class; see box-plugin.h.
 *
 * A BoxPlugin knows its name and the engine that created it.  The engine
 * owns its plugins, so the plugin keeps only a weak pointer back: it is
 * cleared when the engine goes away, and a plugin used after that sees
 * NULL (its configuration then reads as the fallbacks).
 */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>

#include "box-engine.h"
#include "box-plugin.h"

typedef struct {
  char      *name;
  BoxEngine *engine;     /* weak */
  char      *state_dir;  /* computed and created on first use */
  gboolean   started;
  gboolean   stopped;
} BoxPluginPrivate;

G_DEFINE_TYPE_WITH_PRIVATE (BoxPlugin, box_plugin, G_TYPE_OBJECT)

enum {
  PROP_0,
  PROP_NAME,
  PROP_ENGINE,
  N_PROPS
};

static GParamSpec *props[N_PROPS];

static void
box_plugin_set_engine (BoxPlugin *self, BoxEngine *engine)
{
  BoxPluginPrivate *priv = box_plugin_get_instance_private (self);

  if (priv->engine != NULL)
    g_object_remove_weak_pointer (G_OBJECT (priv->engine), (gpointer *) &priv->engine);
  priv->engine = engine;
  if (priv->engine != NULL)
    g_object_add_weak_pointer (G_OBJECT (priv->engine), (gpointer *) &priv->engine);
}

static void
box_plugin_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  BoxPlugin *self = BOX_PLUGIN (object);
  BoxPluginPrivate *priv = box_plugin_get_instance_private (self);

  switch (prop_id) {
  case PROP_NAME:
    g_value_set_string (value, priv->name);
    break;
  case PROP_ENGINE:
    g_value_set_object (value, priv->engine);
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    break;
  }
}

static void
box_plugin_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  BoxPlugin *self = BOX_PLUGIN (object);
  BoxPluginPrivate *priv = box_plugin_get_instance_private (self);

  switch (prop_id) {
  case PROP_NAME:
    g_free (priv->name);
    priv->name = g_value_dup_string (value);
    break;
  case PROP_ENGINE:
    box_plugin_set_engine (self, g_value_get_object (value));
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    break;
  }
}

static void
box_plugin_constructed (GObject *object)
{
  BoxPlugin *self = BOX_PLUGIN (object);
  BoxPluginPrivate *priv = box_plugin_get_instance_private (self);

  G_OBJECT_CLASS (box_plugin_parent_class)->constructed (object);

  if (priv->name == NULL)
    priv->name = g_strdup (G_OBJECT_TYPE_NAME (object));
}

static void
box_plugin_dispose (GObject *object)
{
  box_plugin_set_engine (BOX_PLUGIN (object), NULL);
  G_OBJECT_CLASS (box_plugin_parent_class)->dispose (object);
}

static void
box_plugin_finalize (GObject *object)
{
  BoxPlugin *self = BOX_PLUGIN (object);
  BoxPluginPrivate *priv = box_plugin_get_instance_private (self);

  g_free (priv->name);
  g_free (priv->state_dir);
  G_OBJECT_CLASS (box_plugin_parent_class)->finalize (object);
}

static void
box_plugin_class_init (BoxPluginClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->get_property = box_plugin_get_property;
  object_class->set_property = box_plugin_set_property;
  object_class->constructed = box_plugin_constructed;
  object_class->dispose = box_plugin_dispose;
  object_class->finalize = box_plugin_finalize;

  /**
   * BoxPlugin:name:
   * The plugin's name, as its BoxPluginInfo says ("sqlite").
   */
  props[PROP_NAME] =
    g_param_spec_string ("name", NULL, NULL, NULL,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  /**
   * BoxPlugin:engine:
   * The engine that created the plugin (not referenced: the engine owns
   * its plugins).
   */
  props[PROP_ENGINE] =
    g_param_spec_object ("engine", NULL, NULL, BOX_TYPE_ENGINE,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, props);
}

static void
box_plugin_init (BoxPlugin *self)
{}

const char *
box_plugin_get_name (BoxPlugin *self)
{
  BoxPluginPrivate *priv;

  g_return_val_if_fail (BOX_IS_PLUGIN (self), NULL);
  priv = box_plugin_get_instance_private (self);
  return priv->name;
}

BoxEngine *
box_plugin_get_engine (BoxPlugin *self)
{
  BoxPluginPrivate *priv;

  g_return_val_if_fail (BOX_IS_PLUGIN (self), NULL);
  priv = box_plugin_get_instance_private (self);
  return priv->engine;
}

static BoxConfig *
box_plugin_get_box_config (BoxPlugin *self)
{
  BoxPluginPrivate *priv = box_plugin_get_instance_private (self);

  if (priv->engine == NULL)
    return NULL;
  return box_engine_get_config (priv->engine);
}

const char *
box_plugin_get_state_dir (BoxPlugin *self)
{
  BoxPluginPrivate *priv;
  BoxConfig *config;

  g_return_val_if_fail (BOX_IS_PLUGIN (self), NULL);
  priv = box_plugin_get_instance_private (self);
  if (priv->state_dir != NULL)
    return priv->state_dir;

  config = box_plugin_get_box_config (self);
  if (config == NULL || config->data_dir == NULL) {
    g_warning ("plugin %s has no engine or data directory for its state", priv->name);
    return NULL;
  }
  priv->state_dir = g_build_filename (config->data_dir, priv->name, NULL);
  if (g_mkdir_with_parents (priv->state_dir, 0700) != 0) {
    int saved_errno = errno;
    g_warning ("cannot create state directory %s of plugin %s: %s",
               priv->state_dir, priv->name, g_strerror (saved_errno));
  } else if (g_chmod (priv->state_dir, 0700) != 0) {
    int saved_errno = errno;
    g_warning ("cannot set the mode of %s: %s", priv->state_dir, g_strerror (saved_errno));
  }
  return priv->state_dir;
}

char *
box_plugin_get_config (BoxPlugin *self, const char *key, const char *fallback)
{
  BoxConfig *config;

  g_return_val_if_fail (BOX_IS_PLUGIN (self), NULL);
  g_return_val_if_fail (key != NULL, NULL);

  config = box_plugin_get_box_config (self);
  if (config == NULL)
    return g_strdup (fallback);
  return box_config_get_plugin_value (config, box_plugin_get_name (self), key, fallback);
}

gboolean
box_plugin_start (BoxPlugin *self, GCancellable *cancellable, GError **error)
{
  BoxPluginClass *klass;
  BoxPluginPrivate *priv;

  g_return_val_if_fail (BOX_IS_PLUGIN (self), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);
  priv = box_plugin_get_instance_private (self);
  g_return_val_if_fail (!priv->started, FALSE);

  klass = BOX_PLUGIN_GET_CLASS (self);
  if (klass->start != NULL && !klass->start (self, cancellable, error))
    return FALSE;
  priv->started = TRUE;
  return TRUE;
}

void
box_plugin_stop (BoxPlugin *self)
{
  BoxPluginClass *klass;
  BoxPluginPrivate *priv;

  g_return_if_fail (BOX_IS_PLUGIN (self));
  priv = box_plugin_get_instance_private (self);
  if (priv->stopped)
    return;
  priv->stopped = TRUE;

  klass = BOX_PLUGIN_GET_CLASS (self);
  if (klass->stop != NULL)
    klass->stop (self);
}

void
box_plugin_add_status (BoxPlugin *self, GVariantBuilder *dict)
{
  BoxPluginClass *klass;

  g_return_if_fail (BOX_IS_PLUGIN (self));
  g_return_if_fail (dict != NULL);

  klass = BOX_PLUGIN_GET_CLASS (self);
  if (klass->add_status != NULL)
    klass->add_status (self, dict);
}
