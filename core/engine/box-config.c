/* box-config.c: defaults < key file < flags; see box-config.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box-config.h"
#include "box-error.h"
#include "box-validate.h"

#define DEFAULT_CONFIG_FILE BOX_SYSCONFDIR "/boxd.conf"
#define DEFAULT_LISTEN "127.0.0.1:7070"
#define DEFAULT_SANDBOX_DOMAIN "sandbox.localhost"
#define DEFAULT_HTTP_IDLE_TIMEOUT_S 60
#define DEFAULT_HTTP_MAX_IDLE 256
#define DEFAULT_EDGE_MAX_CONNECTIONS 4096
/* what an event stream keeps queued for one reader (box-http-sse.h) */
#define DEFAULT_HTTP_STREAM_UNWRITTEN_MAX (1024 * 1024)
#define MIN_HTTP_STREAM_UNWRITTEN_MAX     4096
#define DEFAULT_HTTP_HEADER_TIMEOUT_S 15
#define DEFAULT_RATE_PER_S 100
#define DEFAULT_RATE_BURST 1000
#define DEFAULT_KEY_MAX_WEBSOCKETS 1024
#define DEFAULT_KEY_MAX_SSE 64
#define DEFAULT_KEY_MAX_SESSIONS 512
#define DEFAULT_QUOTA_SANDBOXES 50
#define DEFAULT_QUOTA_CPUS 128
#define DEFAULT_QUOTA_MEMORY_MIB 262144
#define DEFAULT_QUOTA_DISK_GIB 4096
#define DEFAULT_ACME_DIRECTORY "https://acme-v02.api.letsencrypt.org/directory"
#define DEFAULT_ACME_ORDERS_PER_HOUR 20
#define DEFAULT_ACME_MAX_CONCURRENT 4
#define DEFAULT_ACME_RENEW_PERCENT 33
#define DEFAULT_ACME_RENEW_CHECK_S 3600

/* boxd run from its build tree loads the plugins built next to it. */
static gboolean
running_uninstalled (void)
{
  g_autofree char *exe = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = exe != NULL ? g_path_get_dirname (exe) : NULL;
  g_autofree char *build_core = g_path_get_dirname (BOX_BUILD_PLUGINDIR);
  g_autofree char *expected = g_build_filename (build_core, "core", NULL);

  return dir != NULL && g_str_equal (dir, expected);
}

BoxConfig *
box_config_new (void)
{
  BoxConfig *config = g_new0 (BoxConfig, 1);

  config->data_dir = g_strdup (BOX_LOCALSTATEDIR);
  config->listen = g_strdup (DEFAULT_LISTEN);
  config->sandbox_domain = g_strdup (DEFAULT_SANDBOX_DOMAIN);
  config->plugin_dir = g_strdup (running_uninstalled () ? BOX_BUILD_PLUGINDIR : BOX_PLUGINDIR);
  config->storage = g_strdup ("auto");
  config->auth = g_strdup ("auto");
  config->hypervisor = g_strdup ("auto");
  config->network = g_strdup ("auto");
  config->broker = g_strdup ("auto");
  config->secret_key = TRUE;
  config->identity = TRUE;
  config->http_idle_timeout_s = DEFAULT_HTTP_IDLE_TIMEOUT_S;
  config->http_max_idle = DEFAULT_HTTP_MAX_IDLE;
  config->edge_max_connections = DEFAULT_EDGE_MAX_CONNECTIONS;
  config->http_stream_unwritten_max = DEFAULT_HTTP_STREAM_UNWRITTEN_MAX;
  config->http_header_timeout_s = DEFAULT_HTTP_HEADER_TIMEOUT_S;
  config->rate_per_s = DEFAULT_RATE_PER_S;
  config->rate_burst = DEFAULT_RATE_BURST;
  config->key_max_websockets = DEFAULT_KEY_MAX_WEBSOCKETS;
  config->key_max_sse = DEFAULT_KEY_MAX_SSE;
  config->key_max_sessions = DEFAULT_KEY_MAX_SESSIONS;
  config->quota.sandboxes = DEFAULT_QUOTA_SANDBOXES;
  config->quota.cpus = DEFAULT_QUOTA_CPUS;
  config->quota.memory_mib = DEFAULT_QUOTA_MEMORY_MIB;
  config->quota.disk_gib = DEFAULT_QUOTA_DISK_GIB;
  config->acme_directory = g_strdup (DEFAULT_ACME_DIRECTORY);
  config->acme_orders_per_hour = DEFAULT_ACME_ORDERS_PER_HOUR;
  config->acme_max_concurrent = DEFAULT_ACME_MAX_CONCURRENT;
  config->acme_renew_percent = DEFAULT_ACME_RENEW_PERCENT;
  config->acme_renew_check_s = DEFAULT_ACME_RENEW_CHECK_S;
  config->dbus = BOX_DBUS_SYSTEM;
  config->keyfile = g_key_file_new ();
  return config;
}

void
box_config_free (BoxConfig *config)
{
  if (config == NULL)
    return;
  g_free (config->config_file);
  g_free (config->data_dir);
  g_free (config->listen);
  g_free (config->sandbox_domain);
  g_free (config->edge_listen);
  g_free (config->edge_cert);
  g_free (config->edge_http_listen);
  g_free (config->edge_key);
  g_free (config->acme_directory);
  g_free (config->acme_email);
  g_free (config->acme_ca_file);
  g_free (config->base_url);
  g_free (config->plugin_dir);
  g_free (config->storage);
  g_free (config->auth);
  g_free (config->hypervisor);
  g_free (config->network);
  g_free (config->broker);
  g_free (config->secret_key_file);
  g_free (config->network_defaults_file);
  g_free (config->identity_key_file);
  if (config->admin_token != NULL)
    explicit_bzero (config->admin_token, strlen (config->admin_token));
  g_free (config->admin_token);
  g_free (config->admin_token_file);
  g_key_file_unref (config->keyfile);
  g_free (config);
}

static void
take_string (GKeyFile *keyfile, const char *key, char **field)
{
  g_autofree char *value = g_key_file_get_string (keyfile, "boxd", key, NULL);

  if (value != NULL) {
    g_strstrip (value);
    g_free (*field);
    *field = g_steal_pointer (&value);
  }
}

/* [@group] @key as a number in 0..G_MAXUINT32, when present. */
static gboolean
take_group_uint64 (GKeyFile *keyfile, const char *file, const char *group, const char *key,
                   guint64 *field, GError **error)
{
  g_autofree char *value = g_key_file_get_string (keyfile, group, key, NULL);
  guint64 number;

  if (value == NULL)
    return TRUE;
  if (!g_ascii_string_to_unsigned (g_strstrip (value), 10, 0, G_MAXUINT32, &number, NULL)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s: [%s] %s: want a whole number, not \"%s\"",
                 file, group, key, value);
    return FALSE;
  }
  *field = number;
  return TRUE;
}

static gboolean
take_group_uint (GKeyFile *keyfile, const char *file, const char *group, const char *key,
                 guint *field, GError **error)
{
  guint64 number = *field;

  if (!take_group_uint64 (keyfile, file, group, key, &number, error))
    return FALSE;
  *field = (guint) number;
  return TRUE;
}

/* [boxd] @key as a number in 0..G_MAXUINT32, when present. */
static gboolean
take_uint (GKeyFile *keyfile, const char *file, const char *key, guint *field, GError **error)
{
  return take_group_uint (keyfile, file, "boxd", key, field, error);
}

/* [boxd] @key as a boolean, when present. */
static gboolean
take_bool (GKeyFile *keyfile, const char *file, const char *key, gboolean *field, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  gboolean value;

  if (!g_key_file_has_key (keyfile, "boxd", key, NULL))
    return TRUE;
  value = g_key_file_get_boolean (keyfile, "boxd", key, &local_error);
  if (local_error != NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s: %s: %s", file, key, local_error->message);
    return FALSE;
  }
  *field = value;
  return TRUE;
}

/* The keys of a [quota] or [quota.<project>] group into @quota. */
static gboolean
take_quota (GKeyFile *keyfile, const char *file, const char *group, BoxQuota *quota,
            GError **error)
{
  return take_group_uint (keyfile, file, group, "sandboxes", &quota->sandboxes, error) &&
         take_group_uint (keyfile, file, group, "cpus", &quota->cpus, error) &&
         take_group_uint64 (keyfile, file, group, "memory_mib", &quota->memory_mib, error) &&
         take_group_uint64 (keyfile, file, group, "disk_gib", &quota->disk_gib, error);
}

/* Every [quota.<project>] group, checked now so that a typo fails at start. */
static gboolean
check_project_quotas (GKeyFile *keyfile, const char *file, const BoxQuota *base, GError **error)
{
  g_auto(GStrv) groups = g_key_file_get_groups (keyfile, NULL);

  for (guint i = 0; groups[i] != NULL; i++) {
    BoxQuota quota = *base;

    if (!g_str_has_prefix (groups[i], "quota."))
      continue;
    if (!take_quota (keyfile, file, groups[i], &quota, error))
      return FALSE;
  }
  return TRUE;
}

void
box_config_get_quota (BoxConfig *config, const char *project, BoxQuota *quota)
{
  g_autofree char *group = g_strdup_printf ("quota.%s", project);

  *quota = config->quota;
  if (project != NULL && g_key_file_has_group (config->keyfile, group))
    take_quota (config->keyfile, config->config_file, group, quota, NULL);
}

static gboolean
parse_dbus_mode (const char *value, BoxDBusMode *out, GError **error)
{
  if (g_strcmp0 (value, "system") == 0)
    *out = BOX_DBUS_SYSTEM;
  else if (g_strcmp0 (value, "session") == 0)
    *out = BOX_DBUS_SESSION;
  else if (g_strcmp0 (value, "none") == 0)
    *out = BOX_DBUS_NONE;
  else {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "dbus must be system, session or none, not \"%s\"", value);
    return FALSE;
  }
  return TRUE;
}

gboolean
box_config_load_file (BoxConfig *config, const char *path, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autofree char *dbus = NULL;
  const char *file = path != NULL ? path : DEFAULT_CONFIG_FILE;

  if (!g_key_file_load_from_file (config->keyfile, file, G_KEY_FILE_NONE, &local_error)) {
    if (path == NULL && g_error_matches (local_error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
      return TRUE;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "cannot read %s: %s", file,
                 local_error->message);
    return FALSE;
  }
  g_free (config->config_file);
  config->config_file = g_strdup (file);

  take_string (config->keyfile, "data_dir", &config->data_dir);
  take_string (config->keyfile, "listen", &config->listen);
  take_string (config->keyfile, "sandbox_domain", &config->sandbox_domain);
  take_string (config->keyfile, "edge_listen", &config->edge_listen);
  take_string (config->keyfile, "edge_cert", &config->edge_cert);
  take_string (config->keyfile, "edge_key", &config->edge_key);
  take_string (config->keyfile, "edge_http_listen", &config->edge_http_listen);
  take_string (config->keyfile, "acme_directory", &config->acme_directory);
  take_string (config->keyfile, "acme_email", &config->acme_email);
  take_string (config->keyfile, "acme_ca_file", &config->acme_ca_file);
  if (!take_bool (config->keyfile, file, "acme", &config->acme, error))
    return FALSE;
  take_string (config->keyfile, "base_url", &config->base_url);
  take_string (config->keyfile, "plugin_dir", &config->plugin_dir);
  take_string (config->keyfile, "storage", &config->storage);
  take_string (config->keyfile, "auth", &config->auth);
  take_string (config->keyfile, "hypervisor", &config->hypervisor);
  take_string (config->keyfile, "network", &config->network);
  take_string (config->keyfile, "broker", &config->broker);
  take_string (config->keyfile, "secret_key_file", &config->secret_key_file);
  take_string (config->keyfile, "network_defaults_file", &config->network_defaults_file);
  take_string (config->keyfile, "admin_token", &config->admin_token);
  take_string (config->keyfile, "identity_key_file", &config->identity_key_file);
  if (!take_bool (config->keyfile, file, "secret_key", &config->secret_key, error) ||
      !take_bool (config->keyfile, file, "identity", &config->identity, error))
    return FALSE;
  if (!take_uint (config->keyfile, file, "http_idle_timeout_s", &config->http_idle_timeout_s, error) ||
      !take_uint (config->keyfile, file, "http_max_idle", &config->http_max_idle, error) ||
      !take_uint (config->keyfile, file, "edge_max_connections", &config->edge_max_connections,
                  error) ||
      !take_uint (config->keyfile, file, "http_stream_unwritten_max",
                  &config->http_stream_unwritten_max, error) ||
      !take_uint (config->keyfile, file, "http_header_timeout_s", &config->http_header_timeout_s,
                  error) ||
      !take_uint (config->keyfile, file, "rate_per_s", &config->rate_per_s, error) ||
      !take_uint (config->keyfile, file, "rate_burst", &config->rate_burst, error) ||
      !take_uint (config->keyfile, file, "key_max_websockets", &config->key_max_websockets, error) ||
      !take_uint (config->keyfile, file, "key_max_sse", &config->key_max_sse, error) ||
      !take_uint (config->keyfile, file, "key_max_sessions", &config->key_max_sessions, error) ||
      !take_uint (config->keyfile, file, "acme_orders_per_hour", &config->acme_orders_per_hour,
                  error) ||
      !take_uint (config->keyfile, file, "acme_max_concurrent", &config->acme_max_concurrent,
                  error) ||
      !take_uint (config->keyfile, file, "acme_renew_percent", &config->acme_renew_percent, error) ||
      !take_uint (config->keyfile, file, "acme_renew_check_s", &config->acme_renew_check_s, error) ||
      !take_quota (config->keyfile, file, "quota", &config->quota, error) ||
      !check_project_quotas (config->keyfile, file, &config->quota, error))
    return FALSE;
  if (config->acme_renew_percent > 100 || config->acme_renew_check_s == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "%s: acme_renew_percent is 0 to 100 and acme_renew_check_s at least 1", file);
    return FALSE;
  }
  if (config->http_stream_unwritten_max < MIN_HTTP_STREAM_UNWRITTEN_MAX) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "%s: http_stream_unwritten_max: want at least %d",
                 file, MIN_HTTP_STREAM_UNWRITTEN_MAX);
    return FALSE;
  }
  dbus = g_key_file_get_string (config->keyfile, "boxd", "dbus", NULL);
  if (dbus != NULL) {
    if (!parse_dbus_mode (g_strstrip (dbus), &config->dbus, error))
      return FALSE;
    config->dbus_required = TRUE;
  }
  return TRUE;
}

gboolean
box_config_parse_args (BoxConfig *config, int *argc, char ***argv, GError **error)
{
  g_autofree char *config_file = NULL;
  g_autofree char *data_dir = NULL;
  g_autofree char *listen = NULL;
  g_autofree char *sandbox_domain = NULL;
  g_autofree char *edge_listen = NULL;
  g_autofree char *edge_cert = NULL;
  g_autofree char *edge_http_listen = NULL;
  g_autofree char *edge_key = NULL;
  g_autofree char *acme_directory = NULL;
  g_autofree char *acme_email = NULL;
  g_autofree char *acme_ca_file = NULL;
  gboolean acme = FALSE;
  gint edge_max_connections = G_MININT;   /* not given */
  g_autofree char *base_url = NULL;
  g_autofree char *plugin_dir = NULL;
  g_autofree char *storage = NULL;
  g_autofree char *auth = NULL;
  g_autofree char *hypervisor = NULL;
  g_autofree char *network = NULL;
  g_autofree char *secret_key_file = NULL;
  gboolean no_secret_key = FALSE;
  gboolean session_bus = FALSE;
  gboolean system_bus = FALSE;
  gboolean no_dbus = FALSE;
  gboolean version = FALSE;
  g_autoptr(GOptionContext) context = NULL;
  const GOptionEntry entries[] = {
    { "config", 'c', 0, G_OPTION_ARG_FILENAME, &config_file,
      N_("Read this configuration file (default /etc/box/boxd.conf)"), N_("FILE") },
    { "data-dir", 'd', 0, G_OPTION_ARG_FILENAME, &data_dir,
      N_("Keep state in DIR (default /var/lib/box)"), N_("DIR") },
    { "listen", 'l', 0, G_OPTION_ARG_STRING, &listen,
      N_("Serve the HTTP API on HOST:PORT (default 127.0.0.1:7070)"), N_("HOST:PORT") },
    { "sandbox-domain", 0, 0, G_OPTION_ARG_STRING, &sandbox_domain,
      N_("Domain under which sandbox URLs live (default sandbox.localhost)"), N_("DOMAIN") },
    { "edge-listen", 0, 0, G_OPTION_ARG_STRING, &edge_listen,
      N_("Answer sandbox and port URLs over TLS on HOST:PORT (default: off)"), N_("HOST:PORT") },
    { "edge-http-listen", 0, 0, G_OPTION_ARG_STRING, &edge_http_listen,
      N_("Redirect plain HTTP on HOST:PORT to the edge's https (default: off)"), N_("HOST:PORT") },
    { "edge-max-connections", 0, 0, G_OPTION_ARG_INT, &edge_max_connections,
      N_("Close new edge connections past N open ones (default: 4096; 0: no bound)"), N_("N") },
    { "edge-cert", 0, 0, G_OPTION_ARG_FILENAME, &edge_cert,
      N_("The edge's certificate chain (PEM; default: issued by boxd's own CA)"), N_("FILE") },
    { "edge-key", 0, 0, G_OPTION_ARG_FILENAME, &edge_key,
      N_("The key of --edge-cert (PEM)"), N_("FILE") },
    { "acme", 0, 0, G_OPTION_ARG_NONE, &acme,
      N_("Get certificates for hosts under own domains from an ACME server"), NULL },
    { "acme-directory", 0, 0, G_OPTION_ARG_STRING, &acme_directory,
      N_("The ACME server's directory URL (default: Let's Encrypt)"), N_("URL") },
    { "acme-email", 0, 0, G_OPTION_ARG_STRING, &acme_email,
      N_("The ACME account's contact address"), N_("EMAIL") },
    { "acme-ca-file", 0, 0, G_OPTION_ARG_FILENAME, &acme_ca_file,
      N_("Trust the CAs in FILE for the ACME server's https (default: the system's)"), N_("FILE") },
    { "base-url", 0, 0, G_OPTION_ARG_STRING, &base_url,
      N_("The API's public base URL (default http://LISTEN)"), N_("URL") },
    { "plugin-dir", 0, 0, G_OPTION_ARG_FILENAME, &plugin_dir,
      N_("Load plugins from DIR"), N_("DIR") },
    { "storage", 0, 0, G_OPTION_ARG_STRING, &storage,
      N_("Storage plugin (default auto: the best one installed)"), N_("NAME") },
    { "auth", 0, 0, G_OPTION_ARG_STRING, &auth,
      N_("Auth plugin (default auto: the best one installed)"), N_("NAME") },
    { "hypervisor", 0, 0, G_OPTION_ARG_STRING, &hypervisor,
      N_("Hypervisor plugin (default auto: the best one that runs VMs)"), N_("NAME") },
    { "network", 0, 0, G_OPTION_ARG_STRING, &network,
      N_("Network plugin, or none (default auto: the best one, for real VMs)"), N_("NAME") },
    { "secret-key-file", 0, 0, G_OPTION_ARG_FILENAME, &secret_key_file,
      N_("Seal secret values with the key in FILE (created if missing)"), N_("FILE") },
    { "no-secret-key", 0, 0, G_OPTION_ARG_NONE, &no_secret_key,
      N_("Run without a secret key: secret routes answer 501 unsupported"), NULL },
    { "session-bus", 0, 0, G_OPTION_ARG_NONE, &session_bus,
      N_("Offer the admin interface on the session bus"), NULL },
    { "system-bus", 0, 0, G_OPTION_ARG_NONE, &system_bus,
      N_("Offer the admin interface on the system bus (default)"), NULL },
    { "no-dbus", 0, 0, G_OPTION_ARG_NONE, &no_dbus,
      N_("Do not offer the D-Bus admin interface"), NULL },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version,
      N_("Print the version and exit"), NULL },
    { NULL }
  };

  context = g_option_context_new (NULL);
  g_option_context_set_summary (context,
                                _("boxd runs isolated microVM sandboxes and serves their API.\n\n"
                                  "The admin token is read from BOX_ADMIN_TOKEN, else from the\n"
                                  "configuration's admin_token, else generated into DIR/admin-token."));
  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  if (!g_option_context_parse (context, argc, argv, error))
    return FALSE;

  if (version) {
    g_print ("boxd %s\n", PACKAGE_VERSION);
    exit (EXIT_SUCCESS);
  }

  /* The file first, then the flags on top of it. */
  if (!box_config_load_file (config, config_file, error))
    return FALSE;

#define TAKE(flag, field) \
  if (flag != NULL) { g_free (config->field); config->field = g_steal_pointer (&flag); }
  TAKE (data_dir, data_dir);
  TAKE (listen, listen);
  TAKE (sandbox_domain, sandbox_domain);
  TAKE (edge_listen, edge_listen);
  TAKE (edge_cert, edge_cert);
  TAKE (edge_key, edge_key);
  TAKE (edge_http_listen, edge_http_listen);
  TAKE (acme_directory, acme_directory);
  TAKE (acme_email, acme_email);
  TAKE (acme_ca_file, acme_ca_file);
  TAKE (base_url, base_url);
  TAKE (plugin_dir, plugin_dir);
  TAKE (storage, storage);
  TAKE (auth, auth);
  TAKE (hypervisor, hypervisor);
  TAKE (network, network);
  TAKE (secret_key_file, secret_key_file);
#undef TAKE

  if (acme)
    config->acme = TRUE;
  if (edge_max_connections != G_MININT && edge_max_connections < 0) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         _("--edge-max-connections must not be negative"));
    return FALSE;
  }
  if (edge_max_connections >= 0)
    config->edge_max_connections = (guint) edge_max_connections;
  if (no_secret_key)
    config->secret_key = FALSE;
  if ((session_bus ? 1 : 0) + (system_bus ? 1 : 0) + (no_dbus ? 1 : 0) > 1) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         _("--session-bus, --system-bus and --no-dbus exclude each other"));
    return FALSE;
  }
  if (session_bus)
    config->dbus = BOX_DBUS_SESSION;
  else if (system_bus)
    config->dbus = BOX_DBUS_SYSTEM;
  else if (no_dbus)
    config->dbus = BOX_DBUS_NONE;
  if (session_bus || system_bus || no_dbus)
    config->dbus_required = TRUE;
  return TRUE;
}

/* Reads a token file that must not be readable by others. */
static char *
read_private_file (const char *path, GError **error)
{
  g_autofree char *contents = NULL;
  struct stat st;

  if (g_stat (path, &st) != 0) {
    int saved_errno = errno;
    g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved_errno), "%s: %s", path,
                 g_strerror (saved_errno));
    return NULL;
  }
  if ((st.st_mode & 0077) != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_PERMISSION_DENIED,
                 "%s is readable by others (mode %04o); make it 0600", path,
                 (guint) (st.st_mode & 07777));
    return NULL;
  }
  if (!g_file_get_contents (path, &contents, NULL, error))
    return NULL;
  return g_strdup (g_strstrip (contents));
}

static gboolean
write_private_file (const char *path, const char *contents, GError **error)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  gsize len = strlen (contents);
  gsize done = 0;

  if (fd < 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot create %s: %s", path,
                 g_strerror (saved_errno));
    return FALSE;
  }
  while (done < len) {
    ssize_t n = write (fd, contents + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int saved_errno = errno;
      close (fd);
      g_unlink (path);
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot write %s: %s", path,
                   g_strerror (saved_errno));
      return FALSE;
    }
    done += (gsize) n;
  }
  if (fsync (fd) != 0 || close (fd) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot write %s: %s", path,
                 g_strerror (saved_errno));
    return FALSE;
  }
  return TRUE;
}

/* base_url when none is set: http:// and the listen address, or for a
 * wildcard one (every address: no client can reach that name) the
 * machine's host name and the port, with a warning, since the identity
 * tokens' issuer must be a URL verifiers can fetch */
static char *
default_base_url (const char *listen)
{
  const char *colon = strrchr (listen, ':');
  g_autofree char *host = g_strndup (listen, colon - listen);

  if (g_strcmp0 (host, "0.0.0.0") != 0 && g_strcmp0 (host, "[::]") != 0 && host[0] != '\0')
    return g_strdup_printf ("http://%s", listen);
  g_warning ("listen %s is every address: base_url (the identity tokens' issuer) is "
             "http://%s%s; set [boxd] base_url to the URL clients use", listen, g_get_host_name (),
             colon);
  return g_strdup_printf ("http://%s%s", g_get_host_name (), colon);
}

gboolean
box_config_resolve (BoxConfig *config, GError **error)
{
  const char *env_token = g_getenv ("BOX_ADMIN_TOKEN");

  if (config->data_dir == NULL || config->data_dir[0] == '\0') {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, "no data directory configured");
    return FALSE;
  }
  if (!g_path_is_absolute (config->data_dir)) {
    g_autofree char *cwd = g_get_current_dir ();
    g_autofree char *abs = g_build_filename (cwd, config->data_dir, NULL);
    g_free (config->data_dir);
    config->data_dir = g_steal_pointer (&abs);
  }
  if (g_mkdir_with_parents (config->data_dir, 0700) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot create data directory %s: %s",
                 config->data_dir, g_strerror (saved_errno));
    return FALSE;
  }
  if (config->listen == NULL || strrchr (config->listen, ':') == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "listen must be HOST:PORT, not \"%s\"",
                 config->listen != NULL ? config->listen : "");
    return FALSE;
  }
  if (config->base_url == NULL || config->base_url[0] == '\0') {
    g_free (config->base_url);
    config->base_url = default_base_url (config->listen);
  }
  if (config->secret_key_file == NULL || config->secret_key_file[0] == '\0') {
    g_free (config->secret_key_file);
    config->secret_key_file = g_build_filename (config->data_dir, "secret.key", NULL);
  }
  if (config->identity_key_file == NULL || config->identity_key_file[0] == '\0') {
    g_free (config->identity_key_file);
    config->identity_key_file = g_build_filename (config->data_dir, "identity", "signing.pem",
                                                  NULL);
  }

  /* The admin token: environment, configuration, or a generated file. */
  if (env_token != NULL && env_token[0] != '\0') {
    g_free (config->admin_token);
    config->admin_token = g_strdup (env_token);
  } else if (config->admin_token == NULL || config->admin_token[0] == '\0') {
    g_autofree char *path = g_build_filename (config->data_dir, "admin-token", NULL);
    g_autoptr(GError) local_error = NULL;
    g_autofree char *token = read_private_file (path, &local_error);

    if (token == NULL) {
      if (!g_error_matches (local_error, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
        g_propagate_error (error, g_steal_pointer (&local_error));
        return FALSE;
      }
      g_autofree char *random = box_random_base32 (40);
      token = g_strdup_printf ("boxadm_%s", random);
      {
        g_autofree char *line = g_strdup_printf ("%s\n", token);
        if (!write_private_file (path, line, error))
          return FALSE;
      }
    }
    g_free (config->admin_token);
    config->admin_token = g_steal_pointer (&token);
    g_free (config->admin_token_file);
    config->admin_token_file = g_steal_pointer (&path);
  }
  /* A short token is guessable: refuse to start rather than warn. */
  if (strlen (config->admin_token) < BOX_CONFIG_ADMIN_TOKEN_MIN) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "the admin token (%s) is shorter than %d characters; use a long random token",
                 env_token != NULL && env_token[0] != '\0' ? "BOX_ADMIN_TOKEN"
                 : config->admin_token_file != NULL ? config->admin_token_file : "admin_token",
                 BOX_CONFIG_ADMIN_TOKEN_MIN);
    return FALSE;
  }
  return TRUE;
}

char *
box_config_get_plugin_value (BoxConfig *config, const char *plugin, const char *key,
                             const char *fallback)
{
  g_autofree char *group = g_strdup_printf ("plugin.%s", plugin);
  g_autofree char *value = g_key_file_get_string (config->keyfile, group, key, NULL);

  if (value == NULL)
    return g_strdup (fallback);
  return g_strdup (g_strstrip (value));
}
