/* box-config.h: boxd's configuration.
 *
 * Built from, in increasing precedence: the compiled-in defaults, the key
 * file (/etc/box/boxd.conf or --config), and command-line flags.  The
 * admin token comes from BOX_ADMIN_TOKEN, else [boxd] admin_token, else a
 * token generated once into <data-dir>/admin-token (0600).  A token shorter
 * than BOX_CONFIG_ADMIN_TOKEN_MIN characters is refused at start.
 *
 *   [boxd]
 *   data_dir=/var/lib/box
 *   listen=127.0.0.1:7070
 *   sandbox_domain=sandbox.localhost
 *   edge_listen=                (HOST:PORT of the edge's TLS listener; off when empty)
 *   edge_cert=                  (the edge's certificate chain and key, PEM; both or
 *   edge_key=                    neither: without, boxd's own CA in <data-dir>/tls/)
 *   edge_max_connections=4096   (0: no bound; open edge connections, handshakes included;
 *                                past it a new one is closed at once, before TLS)
 *   edge_http_listen=           (HOST:PORT of the edge's plain-HTTP listener: redirects
 *                                to https, ACME http-01 challenges; off when empty)
 *   acme=false                  (certificates for hosts under own domains from an ACME server,
 *                                core/edge/box-acme.h; needs edge_http_listen on port 80)
 *   acme_directory=https://acme-v02.api.letsencrypt.org/directory
 *   acme_email=                 (the account's contact, optional)
 *   acme_ca_file=               (PEM CAs to trust for the ACME server's https; default: the system's)
 *   acme_orders_per_hour=20     (0: no bound; orders started in any hour, renewals included)
 *   acme_max_concurrent=4       (0: no bound; orders under way at once)
 *   acme_renew_percent=33       (renew when less than this share of the lifetime is left)
 *   acme_renew_check_s=3600     (how often certificates are checked for renewal)
 *   base_url=http://127.0.0.1:7070
 *   plugin_dir=/usr/lib/x86_64-linux-gnu/box/plugins
 *   storage=auto        (auto: the best installed plugin for the role
 *   auth=auto            that works here: BoxPluginInfo's priority and
 *   hypervisor=auto      probe; a name picks that plugin)
 *   network=auto
 *   broker=auto          (auto: the best broker plugin installed when
 *                        secret_key is on; none (or empty): no broker, and
 *                        a create, fork or PATCH naming secrets is 501;
 *                        a name picks that plugin)
 *   secret_key_file=<data-dir>/secret.key
 *   network_defaults_file=      (what {include: defaults} stands for, replacing the
 *                                compiled-in data/network-defaults.json; read and
 *                                checked at start: a bad file stops boxd)
 *   secret_key=true
 *   identity=true               (false: no signing key; the identity routes answer 501)
 *   identity_key_file=<data-dir>/identity/signing.pem  (RS256, made at the first start;
 *                                retired keys beside it, box-identity.h)
 *   admin_token=
 *   dbus=system|session|none
 *   http_idle_timeout_s=60      (0: no bound; an idle keep-alive connection is closed after it)
 *   http_max_idle=256           (0: no bound; past it the oldest idle connection is closed)
 *   http_header_timeout_s=15    (0: no bound; a connection whose request head is not complete
 *                                this long after it opened or after the first byte is closed;
 *                                the in-sandbox socket's too, from the agent's accept)
 *   rate_per_s=100              (0: no limit; requests per second per key, refilled ...
 *   rate_burst=1000              ... into a bucket of this many; past it 429 rate_limited)
 *   key_max_websockets=1024     (0: no bound; open WebSockets per key)
 *   key_max_sse=64              (0: no bound; open event streams per key)
 *   key_max_sessions=512        (0: no bound; exec WebSockets (exec and attach) per key)
 *
 *   [quota]                     (per project; 0: no bound; doc/API.md "Quotas")
 *   sandboxes=50
 *   cpus=128
 *   memory_mib=262144
 *   disk_gib=4096
 *
 *   [quota.<project>]           (the same keys for one project, over [quota])
 *
 *   [plugin.<name>]
 *   ... read by the plugin through its BoxPluginContext
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define BOX_CONFIG_ADMIN_TOKEN_MIN 16

typedef enum {
  BOX_DBUS_SYSTEM,
  BOX_DBUS_SESSION,
  BOX_DBUS_NONE,
} BoxDBusMode;

/* A project's bounds (0: none).  Disk counts each sandbox at its full
 * size plus its memory (a paused sandbox's snapshot), and each checkpoint
 * at its sandbox's disk plus its memory when it has one. */
typedef struct {
  guint   sandboxes;
  guint   cpus;
  guint64 memory_mib;
  guint64 disk_gib;
} BoxQuota;

typedef struct {
  char        *config_file;       /* the key file read, or NULL */
  char        *data_dir;
  char        *listen;            /* host:port */
  char        *sandbox_domain;
  char        *edge_listen;       /* host:port, or NULL: no edge */
  char        *edge_cert;         /* NULL: boxd's own CA issues one */
  char        *edge_key;
  char        *edge_http_listen;  /* host:port, or NULL: no plain-HTTP listener */
  gboolean     acme;              /* own domains' certificates from acme_directory */
  char        *acme_directory;
  char        *acme_email;        /* NULL or "": no contact */
  char        *acme_ca_file;      /* NULL or "": the system's trust */
  guint        acme_orders_per_hour;
  guint        acme_max_concurrent;
  guint        acme_renew_percent;
  guint        acme_renew_check_s;
  char        *base_url;          /* the API's public base URL */
  char        *plugin_dir;
  char        *storage;           /* plugin names */
  char        *auth;
  char        *hypervisor;        /* "auto": the real one installed, see box-engine.c */
  char        *network;           /* "auto" (default), "none", or a plugin name */
  char        *broker;            /* "auto" (default), "none" or "" (none), or a plugin name */
  char        *secret_key_file;
  char        *network_defaults_file;  /* NULL or "": the compiled-in list */
  gboolean     secret_key;        /* FALSE: run without (secrets answer 501) */
  char        *identity_key_file; /* the identity signing key (box-identity.h) */
  gboolean     identity;          /* FALSE: no signing key (identity routes answer 501) */
  char        *admin_token;       /* resolved by box_config_resolve() */
  char        *admin_token_file;  /* set when the token was read from or generated into a file */
  guint        http_idle_timeout_s;
  guint        http_max_idle;
  guint        edge_max_connections;
  guint        http_stream_unwritten_max;  /* bytes an event stream keeps for one reader */
  guint        http_header_timeout_s;
  guint        rate_per_s;
  guint        rate_burst;
  guint        key_max_websockets;
  guint        key_max_sse;
  guint        key_max_sessions;
  BoxQuota     quota;             /* [quota]; see box_config_get_quota() for a project's */
  BoxDBusMode  dbus;
  gboolean     dbus_required;     /* chosen explicitly: fail when the bus is missing */
  GKeyFile    *keyfile;           /* never NULL; plugin groups */
} BoxConfig;

BoxConfig *box_config_new        (void);
void       box_config_free       (BoxConfig *config);
/* Reads @path (NULL: the default path, silently absent) into @config. */
gboolean   box_config_load_file  (BoxConfig *config, const char *path, GError **error);
/* Parses boxd's flags (overriding the file); handles --help. */
gboolean   box_config_parse_args (BoxConfig *config, int *argc, char ***argv, GError **error);
/* Fills what is derived: data dir created 0700, base_url from listen,
 * admin token resolved (env, file, generated). */
gboolean   box_config_resolve    (BoxConfig *config, GError **error);
/* The [plugin.<name>] value, or @fallback */
char      *box_config_get_plugin_value (BoxConfig *config, const char *plugin, const char *key,
                                        const char *fallback);

/* @project's quota: [quota.<project>] over [quota] (already checked by
 * box_config_load_file()). */
void       box_config_get_quota  (BoxConfig *config, const char *project, BoxQuota *quota);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxConfig, box_config_free)

G_END_DECLS
