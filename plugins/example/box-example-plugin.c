/* box-example-plugin.c: an example third-party plugin for boxd.
 *
 * This is the `example` auth plugin.  It exists to show how a plugin is
 * written, not to be used: it lets in one fixed bearer token, read from
 * boxd.conf, as a principal of one project:
 *
 *   [boxd]
 *   auth=example
 *
 *   [plugin.example]
 *   token=<at least 32 characters>
 *   project=<an existing project>
 *
 * It keeps no keys, so the key routes answer 501 unsupported.  See
 * README.md next to this file for the walk-through, and meson.build for
 * how to build it against an installed boxd.
 */
#include <string.h>

#include <box.h>

/* 1. The type: a final subclass of BoxPlugin that implements BoxAuth. */
#define BOX_TYPE_EXAMPLE_PLUGIN (box_example_plugin_get_type ())
G_DECLARE_FINAL_TYPE (BoxExamplePlugin, box_example_plugin, BOX, EXAMPLE_PLUGIN, BoxPlugin)

struct _BoxExamplePlugin {
  BoxPlugin  parent_instance;
  char      *token;     /* from [plugin.example] token */
  char      *project;   /* from [plugin.example] project */
};

static void box_example_plugin_auth_init (BoxAuthInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxExamplePlugin, box_example_plugin, BOX_TYPE_PLUGIN,
                               G_IMPLEMENT_INTERFACE (BOX_TYPE_AUTH, box_example_plugin_auth_init))

#define BOX_EXAMPLE_TOKEN_MIN 32

/* 2. The lifecycle.  start() runs once, on the main thread, before any
 * request; returning FALSE stops boxd with the error's message. */
static gboolean
box_example_plugin_start (BoxPlugin *plugin, GCancellable *cancellable, GError **error)
{
  BoxExamplePlugin *self = BOX_EXAMPLE_PLUGIN (plugin);

  self->token = box_plugin_get_config (plugin, "token", NULL);
  self->project = box_plugin_get_config (plugin, "project", NULL);
  if (self->token == NULL || strlen (self->token) < BOX_EXAMPLE_TOKEN_MIN) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "[plugin.%s] token must be set to at least %d characters",
                 box_plugin_get_name (plugin), BOX_EXAMPLE_TOKEN_MIN);
    return FALSE;
  }
  if (self->project == NULL || self->project[0] == '\0') {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "[plugin.%s] project must be set", box_plugin_get_name (plugin));
    return FALSE;
  }
  g_info ("example auth plugin lets its token in as project %s", self->project);
  return TRUE;
}

/* stop() runs once at shutdown; the instance is unreferenced after it. */
static void
box_example_plugin_stop (BoxPlugin *plugin)
{
  BoxExamplePlugin *self = BOX_EXAMPLE_PLUGIN (plugin);

  g_clear_pointer (&self->token, g_free);
  g_debug ("example auth plugin stopped");
}

/* add_status() adds to what the D-Bus GetStatus method (`boxctl status`) shows. */
static void
box_example_plugin_add_status (BoxPlugin *plugin, GVariantBuilder *dict)
{
  BoxExamplePlugin *self = BOX_EXAMPLE_PLUGIN (plugin);

  g_variant_builder_add (dict, "{sv}", "example-project",
                         g_variant_new_string (self->project != NULL ? self->project : ""));
}

/* 3. The interface.  authenticate() is on every request's path: no
 * blocking, and secrets are compared in constant time. */
static gboolean
box_example_equal_constant_time (const char *a, const char *b)
{
  gsize len_a = strlen (a);
  gsize len_b = strlen (b);
  gsize n = MAX (len_a, len_b);
  guint8 diff = len_a == len_b ? 0 : 1;

  for (gsize i = 0; i < n; i++) {
    guint8 ca = i < len_a ? (guint8) a[i] : 0;
    guint8 cb = i < len_b ? (guint8) b[i] : 0;
    diff |= ca ^ cb;
  }
  return diff == 0;
}

static BoxPrincipal *
box_example_plugin_authenticate (BoxAuth *auth, const char *credential, GError **error)
{
  BoxExamplePlugin *self = BOX_EXAMPLE_PLUGIN (auth);
  BoxPrincipal *principal;

  if (self->token == NULL || credential == NULL ||
      !box_example_equal_constant_time (credential, self->token)) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNAUTHORIZED,
                         "a valid API key is required");
    return NULL;
  }
  principal = g_new0 (BoxPrincipal, 1);
  principal->kind = BOX_PRINCIPAL_KEY;
  principal->project = g_strdup (self->project);
  return principal;
}

/* Vfuncs left NULL answer BOX_ERROR_UNSUPPORTED through the interface's
 * wrappers; saying so explicitly gives a better message. */
static BoxKey *
box_example_plugin_create_key (BoxAuth *auth, const char *project, const char *name,
                               char **secret_out, GError **error)
{
  g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                       "the example auth plugin has one token, set in boxd.conf");
  return NULL;
}

static void
box_example_plugin_auth_init (BoxAuthInterface *iface)
{
  iface->authenticate = box_example_plugin_authenticate;
  iface->create_key = box_example_plugin_create_key;
}

static void
box_example_plugin_finalize (GObject *object)
{
  BoxExamplePlugin *self = BOX_EXAMPLE_PLUGIN (object);

  g_free (self->token);
  g_free (self->project);
  G_OBJECT_CLASS (box_example_plugin_parent_class)->finalize (object);
}

static void
box_example_plugin_class_init (BoxExamplePluginClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  BoxPluginClass *plugin_class = BOX_PLUGIN_CLASS (klass);

  object_class->finalize = box_example_plugin_finalize;
  plugin_class->start = box_example_plugin_start;
  plugin_class->stop = box_example_plugin_stop;
  plugin_class->add_status = box_example_plugin_add_status;
}

static void
box_example_plugin_init (BoxExamplePlugin *self)
{}

/* 4. The entry point: the one symbol the module exports. */
BOX_PLUGIN_DEFINE ("example", "An example auth plugin that lets in one token from boxd.conf",
                   box_example_plugin_get_type)
