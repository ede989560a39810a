/* box-plugin.c: the plugin base class; see box-plugin.h.
 *
 * A BoxPlugin knows its name and its context (box-plugin-context.h), the
 * narrow view of boxd the engine gives it.  It holds a reference on the
 * context; the context holds none on the plugin.
 */
#include "config.h"

#include <string.h>

#include "box-plugin.h"
#include "box-plugin-context.h"

typedef struct {
  char             *name;
  BoxPluginContext *context;
  gboolean          started;
  gboolean          stopped;
} BoxPluginPrivate;

G_DEFINE_TYPE_WITH_PRIVATE (BoxPlugin, box_plugin, G_TYPE_OBJECT)

/* The info is static and borrowed: the boxed copy is shallow. */
static BoxPluginInfo *
box_plugin_info_copy (const BoxPluginInfo *info)
{
  return g_memdup2 (info, sizeof *info);
}

G_DEFINE_BOXED_TYPE (BoxPluginInfo, box_plugin_info, box_plugin_info_copy, g_free)

enum {
  PROP_0,
  PROP_NAME,
  PROP_CONTEXT,
  N_PROPS
};

static GParamSpec *props[N_PROPS];

static void
box_plugin_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  BoxPlugin *self = BOX_PLUGIN (object);
  BoxPluginPrivate *priv = box_plugin_get_instance_private (self);

  switch (prop_id) {
  case PROP_NAME:
    g_value_set_string (value, priv->name);
    break;
  case PROP_CONTEXT:
    g_value_set_object (value, priv->context);
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
  case PROP_CONTEXT:
    g_clear_object (&priv->context);
    priv->context = g_value_dup_object (value);
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
  if (priv->context == NULL)
    priv->context = g_object_new (BOX_TYPE_PLUGIN_CONTEXT, "name", priv->name, NULL);
}

static void
box_plugin_dispose (GObject *object)
{
  BoxPluginPrivate *priv = box_plugin_get_instance_private (BOX_PLUGIN (object));

  g_clear_object (&priv->context);
  G_OBJECT_CLASS (box_plugin_parent_class)->dispose (object);
}

static void
box_plugin_finalize (GObject *object)
{
  BoxPlugin *self = BOX_PLUGIN (object);
  BoxPluginPrivate *priv = box_plugin_get_instance_private (self);

  g_free (priv->name);
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
   * The plugin's name, as its BoxPluginInfo says ("mystore").
   */
  props[PROP_NAME] =
    g_param_spec_string ("name", NULL, NULL, NULL,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  /**
   * BoxPlugin:context:
   * The plugin's view of boxd (its configuration, state directory, store,
   * network); a context with none of them when not given.
   */
  props[PROP_CONTEXT] =
    g_param_spec_object ("context", NULL, NULL, BOX_TYPE_PLUGIN_CONTEXT,
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

BoxPluginContext *
box_plugin_get_context (BoxPlugin *self)
{
  BoxPluginPrivate *priv;

  g_return_val_if_fail (BOX_IS_PLUGIN (self), NULL);
  priv = box_plugin_get_instance_private (self);
  return priv->context;
}

const char *
box_plugin_get_state_dir (BoxPlugin *self)
{
  g_return_val_if_fail (BOX_IS_PLUGIN (self), NULL);
  return box_plugin_context_get_state_dir (box_plugin_get_context (self));
}

char *
box_plugin_get_config (BoxPlugin *self, const char *key, const char *fallback)
{
  g_return_val_if_fail (BOX_IS_PLUGIN (self), NULL);
  g_return_val_if_fail (key != NULL, NULL);
  return box_plugin_context_get_string (box_plugin_get_context (self), key, fallback);
}

gboolean
box_plugin_info_check (const BoxPluginInfo *info, GError **error)
{
  const char *name;

  g_return_val_if_fail (info != NULL, FALSE);

  if (info->abi_version != BOX_PLUGIN_ABI_VERSION) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "ABI version %u, boxd needs %u",
                 (guint) info->abi_version, (guint) BOX_PLUGIN_ABI_VERSION);
    return FALSE;
  }
  name = info->name != NULL ? info->name : "";
  for (const char *p = name; *p != '\0'; p++) {
    if (!g_ascii_islower (*p) && !g_ascii_isdigit (*p) && *p != '_' && *p != '-')
      name = "";
  }
  if (name[0] == '\0' || strlen (name) > 64) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "bad plugin name \"%s\" (must be [a-z0-9_-]+)",
                 info->name != NULL ? info->name : "");
    return FALSE;
  }
  return TRUE;
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
