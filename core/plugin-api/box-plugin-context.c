/* box-plugin-context.c: what a plugin gets from boxd; see box-plugin-context.h.
 *
 * boxd (core/engine) fills a context through its construct properties
 * ("name", "keyfile", "data-dir", "agent-factory") and sets "storage" and
 * "network" once it knows them, so the SDK needs no setter of its own.
 */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "box-plugin-context.h"

struct _BoxPluginContext {
  GObject          parent_instance;

  char            *name;
  GKeyFile        *keyfile;       /* NULL: every key unset */
  char            *group;         /* "plugin.<name>" */
  char            *data_dir;
  char            *state_dir;     /* computed and created on first use */
  GMutex           lock;          /* state_dir */
  BoxStorage      *storage;
  BoxNetwork      *network;
  BoxAgentFactory  agent_factory;
};

G_DEFINE_FINAL_TYPE (BoxPluginContext, box_plugin_context, G_TYPE_OBJECT)

enum {
  PROP_0,
  PROP_NAME,
  PROP_KEYFILE,
  PROP_DATA_DIR,
  PROP_STORAGE,
  PROP_NETWORK,
  PROP_AGENT_FACTORY,
  N_PROPS
};

static GParamSpec *props[N_PROPS];

static void
box_plugin_context_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  BoxPluginContext *self = BOX_PLUGIN_CONTEXT (object);

  switch (prop_id) {
  case PROP_NAME:
    g_value_set_string (value, self->name);
    break;
  case PROP_KEYFILE:
    g_value_set_boxed (value, self->keyfile);
    break;
  case PROP_DATA_DIR:
    g_value_set_string (value, self->data_dir);
    break;
  case PROP_STORAGE:
    g_value_set_object (value, self->storage);
    break;
  case PROP_NETWORK:
    g_value_set_object (value, self->network);
    break;
  case PROP_AGENT_FACTORY:
    g_value_set_pointer (value, (gpointer) self->agent_factory);
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    break;
  }
}

static void
box_plugin_context_set_property (GObject *object, guint prop_id, const GValue *value,
                                 GParamSpec *pspec)
{
  BoxPluginContext *self = BOX_PLUGIN_CONTEXT (object);

  switch (prop_id) {
  case PROP_NAME:
    g_free (self->name);
    self->name = g_value_dup_string (value);
    break;
  case PROP_KEYFILE:
    g_clear_pointer (&self->keyfile, g_key_file_unref);
    self->keyfile = g_value_dup_boxed (value);
    break;
  case PROP_DATA_DIR:
    g_free (self->data_dir);
    self->data_dir = g_value_dup_string (value);
    break;
  case PROP_STORAGE:
    g_clear_object (&self->storage);
    self->storage = g_value_dup_object (value);
    break;
  case PROP_NETWORK:
    g_clear_object (&self->network);
    self->network = g_value_dup_object (value);
    break;
  case PROP_AGENT_FACTORY:
    self->agent_factory = (BoxAgentFactory) g_value_get_pointer (value);
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    break;
  }
}

static void
box_plugin_context_constructed (GObject *object)
{
  BoxPluginContext *self = BOX_PLUGIN_CONTEXT (object);

  G_OBJECT_CLASS (box_plugin_context_parent_class)->constructed (object);
  if (self->name == NULL)
    self->name = g_strdup ("plugin");
  self->group = g_strdup_printf ("plugin.%s", self->name);
}

static void
box_plugin_context_dispose (GObject *object)
{
  BoxPluginContext *self = BOX_PLUGIN_CONTEXT (object);

  g_clear_object (&self->storage);
  g_clear_object (&self->network);
  G_OBJECT_CLASS (box_plugin_context_parent_class)->dispose (object);
}

static void
box_plugin_context_finalize (GObject *object)
{
  BoxPluginContext *self = BOX_PLUGIN_CONTEXT (object);

  g_free (self->name);
  g_free (self->group);
  g_clear_pointer (&self->keyfile, g_key_file_unref);
  g_free (self->data_dir);
  g_free (self->state_dir);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (box_plugin_context_parent_class)->finalize (object);
}

static void
box_plugin_context_class_init (BoxPluginContextClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GParamFlags construct = G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS;

  object_class->get_property = box_plugin_context_get_property;
  object_class->set_property = box_plugin_context_set_property;
  object_class->constructed = box_plugin_context_constructed;
  object_class->dispose = box_plugin_context_dispose;
  object_class->finalize = box_plugin_context_finalize;

  /**
   * BoxPluginContext:name:
   * The plugin's name; its configuration is the group [plugin.<name>].
   */
  props[PROP_NAME] = g_param_spec_string ("name", NULL, NULL, NULL, construct);
  /**
   * BoxPluginContext:keyfile:
   * boxd.conf (not copied: boxd does not change it while plugins run).
   */
  props[PROP_KEYFILE] = g_param_spec_boxed ("keyfile", NULL, NULL, G_TYPE_KEY_FILE, construct);
  /**
   * BoxPluginContext:data-dir:
   * boxd's data directory; the plugin's state directory is in it.
   */
  props[PROP_DATA_DIR] = g_param_spec_string ("data-dir", NULL, NULL, NULL, construct);
  /**
   * BoxPluginContext:storage:
   * The store, for a store's client.
   */
  props[PROP_STORAGE] =
    g_param_spec_object ("storage", NULL, NULL, BOX_TYPE_STORAGE,
                         G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  /**
   * BoxPluginContext:network:
   * The network, for the hypervisor.
   */
  props[PROP_NETWORK] =
    g_param_spec_object ("network", NULL, NULL, BOX_TYPE_NETWORK,
                         G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  /**
   * BoxPluginContext:agent-factory: (skip)
   * A #BoxAgentFactory.
   */
  props[PROP_AGENT_FACTORY] = g_param_spec_pointer ("agent-factory", NULL, NULL, construct);
  g_object_class_install_properties (object_class, N_PROPS, props);
}

static void
box_plugin_context_init (BoxPluginContext *self)
{
  g_mutex_init (&self->lock);
}

const char *
box_plugin_context_get_name (BoxPluginContext *self)
{
  g_return_val_if_fail (BOX_IS_PLUGIN_CONTEXT (self), NULL);
  return self->name;
}

const char *
box_plugin_context_get_state_dir (BoxPluginContext *self)
{
  g_autoptr(GMutexLocker) locker = NULL;
  g_autofree char *dir = NULL;

  g_return_val_if_fail (BOX_IS_PLUGIN_CONTEXT (self), NULL);
  locker = g_mutex_locker_new (&self->lock);
  if (self->state_dir != NULL)
    return self->state_dir;
  if (self->data_dir == NULL) {
    g_warning ("plugin %s has no data directory for its state", self->name);
    return NULL;
  }
  dir = g_build_filename (self->data_dir, self->name, NULL);
  if (g_mkdir_with_parents (dir, 0700) != 0) {
    int saved_errno = errno;
    g_warning ("cannot create state directory %s of plugin %s: %s", dir, self->name,
               g_strerror (saved_errno));
  } else if (g_chmod (dir, 0700) != 0) {
    int saved_errno = errno;
    g_warning ("cannot set the mode of %s: %s", dir, g_strerror (saved_errno));
  }
  self->state_dir = g_steal_pointer (&dir);
  return self->state_dir;
}

BoxStorage *
box_plugin_context_get_storage (BoxPluginContext *self)
{
  g_return_val_if_fail (BOX_IS_PLUGIN_CONTEXT (self), NULL);
  return self->storage;
}

BoxNetwork *
box_plugin_context_get_network (BoxPluginContext *self)
{
  g_return_val_if_fail (BOX_IS_PLUGIN_CONTEXT (self), NULL);
  return self->network;
}

BoxAgent *
box_plugin_context_new_agent (BoxPluginContext *self, GIOStream *stream, GError **error)
{
  g_return_val_if_fail (BOX_IS_PLUGIN_CONTEXT (self), NULL);
  g_return_val_if_fail (G_IS_IO_STREAM (stream), NULL);

  if (self->agent_factory == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "plugin %s: this context cannot connect to guest agents", self->name);
    return NULL;
  }
  return self->agent_factory (stream);
}

/* ---- configuration ------------------------------------------------------- */

char *
box_plugin_context_get_string (BoxPluginContext *self, const char *key, const char *fallback)
{
  g_autofree char *value = NULL;

  g_return_val_if_fail (BOX_IS_PLUGIN_CONTEXT (self), NULL);
  g_return_val_if_fail (key != NULL, NULL);

  if (self->keyfile != NULL)
    value = g_key_file_get_string (self->keyfile, self->group, key, NULL);
  if (value == NULL)
    return g_strdup (fallback);
  return g_strdup (g_strstrip (value));
}

static gboolean
config_invalid (BoxPluginContext *self, const char *key, GError **error, const char *why)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "[%s] %s: %s", self->group, key, why);
  return FALSE;
}

gboolean
box_plugin_context_get_uint (BoxPluginContext *self, const char *key, guint64 fallback,
                             guint64 max, guint64 *value, GError **error)
{
  g_autofree char *str = NULL;
  g_autoptr(GError) local_error = NULL;

  g_return_val_if_fail (BOX_IS_PLUGIN_CONTEXT (self), FALSE);
  g_return_val_if_fail (key != NULL && value != NULL, FALSE);

  str = box_plugin_context_get_string (self, key, NULL);
  if (str == NULL) {
    *value = fallback;
    return TRUE;
  }
  if (!g_ascii_string_to_unsigned (str, 10, 0, max, value, &local_error))
    return config_invalid (self, key, error, local_error->message);
  return TRUE;
}

gboolean
box_plugin_context_get_bool (BoxPluginContext *self, const char *key, gboolean fallback,
                             gboolean *value, GError **error)
{
  static const char *const yes[] = { "true", "yes", "on", "1", NULL };
  static const char *const no[] = { "false", "no", "off", "0", NULL };
  g_autofree char *str = NULL;

  g_return_val_if_fail (BOX_IS_PLUGIN_CONTEXT (self), FALSE);
  g_return_val_if_fail (key != NULL && value != NULL, FALSE);

  str = box_plugin_context_get_string (self, key, NULL);
  if (str == NULL) {
    *value = fallback;
    return TRUE;
  }
  for (guint i = 0; yes[i] != NULL; i++) {
    if (g_ascii_strcasecmp (str, yes[i]) == 0) {
      *value = TRUE;
      return TRUE;
    }
    if (g_ascii_strcasecmp (str, no[i]) == 0) {
      *value = FALSE;
      return TRUE;
    }
  }
  {
    g_autofree char *why = g_strdup_printf ("\"%s\" is not true or false", str);
    return config_invalid (self, key, error, why);
  }
}

char **
box_plugin_context_get_strv (BoxPluginContext *self, const char *key,
                             const char *const *fallback)
{
  g_autofree char *str = NULL;
  g_auto(GStrv) parts = NULL;
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  g_return_val_if_fail (BOX_IS_PLUGIN_CONTEXT (self), NULL);
  g_return_val_if_fail (key != NULL, NULL);

  str = box_plugin_context_get_string (self, key, NULL);
  if (str == NULL)
    return fallback != NULL ? g_strdupv ((char **) fallback) : g_new0 (char *, 1);
  parts = g_strsplit_set (str, ",;", -1);
  for (guint i = 0; parts[i] != NULL; i++) {
    g_strstrip (parts[i]);
    if (parts[i][0] != '\0')
      g_strv_builder_add (builder, parts[i]);
  }
  return g_strv_builder_end (builder);
}

gboolean
box_plugin_context_get_size (BoxPluginContext *self, const char *key, guint64 fallback,
                             guint64 *value, GError **error)
{
  static const char units[] = "KMGT";
  g_autofree char *str = NULL;
  guint64 number;
  char *end = NULL;
  guint shift = 0;

  g_return_val_if_fail (BOX_IS_PLUGIN_CONTEXT (self), FALSE);
  g_return_val_if_fail (key != NULL && value != NULL, FALSE);

  str = box_plugin_context_get_string (self, key, NULL);
  if (str == NULL) {
    *value = fallback;
    return TRUE;
  }
  if (!g_ascii_isdigit (str[0]))
    return config_invalid (self, key, error, "not a size (a number, then K, M, G or T)");
  errno = 0;
  number = g_ascii_strtoull (str, &end, 10);
  if (errno != 0)
    return config_invalid (self, key, error, "the size is too large");
  while (*end == ' ')
    end++;
  if (*end != '\0') {
    const char *unit = strchr (units, g_ascii_toupper (*end));

    if (unit == NULL)
      return config_invalid (self, key, error, "not a size (a number, then K, M, G or T)");
    shift = 10 * (guint) (unit - units + 1);
    end++;
    if (g_ascii_strcasecmp (end, "") != 0 && g_ascii_strcasecmp (end, "B") != 0 &&
        g_ascii_strcasecmp (end, "iB") != 0)
      return config_invalid (self, key, error, "not a size (a number, then K, M, G or T)");
  }
  if (shift > 0 && number > (G_MAXUINT64 >> shift))
    return config_invalid (self, key, error, "the size is too large");
  *value = number << shift;
  return TRUE;
}

void
box_plugin_context_log (BoxPluginContext *self, GLogLevelFlags level, const char *format, ...)
{
  g_autofree char *domain = NULL;
  g_autofree char *message = NULL;
  va_list args;

  g_return_if_fail (BOX_IS_PLUGIN_CONTEXT (self));
  g_return_if_fail (format != NULL);

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  domain = g_strdup_printf ("box-%s", self->name);
  g_log_structured (domain, level, "MESSAGE", "%s", message);
}

gboolean
box_sandbox_id_is_valid (const char *id)
{
  gsize len = id != NULL ? strlen (id) : 0;

  if (len < 1 || len > 64 || id[0] == '-')
    return FALSE;
  for (gsize i = 0; i < len; i++) {
    if (!g_ascii_islower (id[i]) && !g_ascii_isdigit (id[i]) && id[i] != '-')
      return FALSE;
  }
  return TRUE;
}
