/* box-records.h: the service's records.
 *
 * Records are plain structs owned by whoever holds them (free with the
 * matching _free(), or g_autoptr).  The engine is the only writer; storage
 * plugins persist them, transports serialise them.  Two JSON forms exist:
 *
 *   - the API form (box_*_to_api_json()): exactly the fields of the
 *     interface specification, computed fields (url, urls) included;
 *   - the storage form (box_*_to_storage_json() / _from_storage_json()):
 *     everything needed to rebuild the record, including internal fields.
 *     It is the body of a BoxStorageRecord (box-storage-records.h), which
 *     stores treat as opaque, so a new field needs no schema migration.
 *
 * Times are gint64 microseconds since the Unix epoch (g_get_real_time()),
 * formatted as RFC 3339 UTC by box_time_format().
 */
#pragma once

#include "box-export.h"

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* ---- Projects and keys ------------------------------------------------- */

typedef struct {
  char   *name;
  char  **domains;      /* NULL-terminated, never NULL */
  gint64  created_at;
  guint64 revision;     /* the storage revision it was read at; 0 = not stored */
} BoxProject;

typedef struct {
  char   *id;           /* "key-" + 12 lowercase base32 */
  char   *name;
  char   *project;
  char   *hash;         /* lowercase hex SHA-256 of the whole secret */
  gint64  created_at;
  guint64 revision;     /* the storage revision it was read at; 0 = not stored */
} BoxKey;

typedef enum {
  BOX_PRINCIPAL_ADMIN,  /* the deployment's operator (admin token) */
  BOX_PRINCIPAL_KEY,    /* a project key */
  BOX_PRINCIPAL_SANDBOX /* a process inside a sandbox (in-sandbox socket) */
} BoxPrincipalKind;

typedef struct {
  BoxPrincipalKind kind;
  char   *project;      /* NULL for ADMIN */
  BoxKey *key;          /* KEY only */
  char   *sandbox_id;   /* SANDBOX only */
} BoxPrincipal;

/* ---- Egress rules ------------------------------------------------------ */

typedef struct {
  char     *domain;     /* exact, "*.suffix" or "*"; NULL for an include */
  gboolean  allow;
  guint16  *ports;      /* allow only */
  guint     n_ports;
  char     *include;    /* "defaults" or NULL */
} BoxRule;

/* ---- Sandboxes --------------------------------------------------------- */

typedef enum {
  BOX_SANDBOX_STATE_CREATING,
  BOX_SANDBOX_STATE_RUNNING,
  BOX_SANDBOX_STATE_PAUSED,
  BOX_SANDBOX_STATE_STOPPED,
  BOX_SANDBOX_STATE_ERROR,
} BoxSandboxState;

typedef enum {
  BOX_IDLE_ACTION_PAUSE,
  BOX_IDLE_ACTION_STOP,
  BOX_IDLE_ACTION_NONE,
} BoxIdleAction;

typedef enum {
  BOX_DEADLINE_ACTION_DELETE,
  BOX_DEADLINE_ACTION_PAUSE,
  BOX_DEADLINE_ACTION_STOP,
} BoxDeadlineAction;

typedef struct {
  guint cpus;
  guint memory_mib;
  guint disk_gib;
} BoxResources;

typedef struct {
  char              *id;             /* "sb-" + 12 lowercase base32 */
  char              *name;
  char              *project;
  char              *template_name;  /* "" when from an image */
  char              *image;          /* "" when from a template */
  BoxSandboxState    state;
  BoxResources       resources;
  GHashTable        *env;            /* char* -> char*, never NULL */
  GHashTable        *labels;         /* char* -> char*, never NULL */
  guint              idle_timeout_s;
  BoxIdleAction      idle_action;
  gboolean           has_deadline;
  gint64             deadline_at;
  BoxDeadlineAction  deadline_action;
  gboolean           protected_;
  guint              http_port;
  GPtrArray         *egress;         /* BoxRule*, as the client wrote them */
  char             **secrets;        /* NULL-terminated, never NULL */
  gint64             created_at;
  gint64             updated_at;
  gint64             last_active_at;
  /* internal, storage form only */
  char              *node;           /* node that holds it awake, or NULL */
  gint64             snapshot_at;    /* time of the newest snapshot, 0 for none */
  guint              next_checkpoint;/* next "vN" number */
  guint              next_auto_checkpoint;
  char              *fork_source;    /* "sb-.../vN" for a fork, or NULL */
  /* ports whose access was set (PUT /ports/{port}): "<port>" -> "private" or
   * "public"; never NULL; every other port is private */
  GHashTable        *port_access;
  guint64            revision;       /* the storage revision it was read at; 0 = not stored */
} BoxSandbox;

/* ---- Checkpoints ------------------------------------------------------- */

typedef struct {
  char     *id;         /* "v1", ... or "auto-1", ... */
  char     *sandbox;    /* sandbox ID */
  char     *project;
  char     *comment;
  gboolean  memory;
  gboolean  auto_;
  gint64    created_at;
  guint64   revision;   /* the storage revision it was read at; 0 = not stored */
} BoxCheckpoint;

/* ---- Secrets ----------------------------------------------------------- */

typedef struct {
  char   *name;
  char   *project;
  char  **hosts;              /* NULL-terminated, at least one */
  char   *placeholder;
  char   *inject_header;      /* NULL when inject is null */
  char   *inject_format;
  GBytes *sealed_value;       /* AEAD-sealed by the engine; never plaintext */
  gint64  created_at;
  gint64  updated_at;
  guint64 revision;           /* the storage revision it was read at; 0 = not stored */
} BoxSecret;

/* ---- Templates --------------------------------------------------------- */

typedef struct {
  char         *name;
  char         *image;        /* "" for the built-in templates */
  BoxResources  resources;
} BoxTemplate;

/* ---- Events ------------------------------------------------------------ */

typedef struct {
  char       *type;           /* "sandbox.created", ... */
  char       *project;
  char       *sandbox;        /* sandbox ID */
  gint64      at;
  JsonObject *detail;         /* may be NULL */
} BoxEvent;

/* ---- Requests (decoded and format-checked, not yet checked against state) */

typedef struct {
  /* each has_* is TRUE when the field was present in the request */
  char            *name;
  char            *template_name;
  char            *image;
  BoxResources     resources;     /* 0 = from the template */
  GHashTable      *env;           /* NULL when absent */
  GHashTable      *labels;        /* NULL when absent */
  gboolean         has_idle_timeout_s;
  guint            idle_timeout_s;
  gboolean         has_idle_action;
  BoxIdleAction    idle_action;
  gboolean         has_deadline;  /* present and not null */
  gint64           deadline_at;
  BoxDeadlineAction deadline_action;
  gboolean         protected_;
  gboolean         has_http_port;
  guint            http_port;
  GPtrArray       *egress;        /* NULL when network absent */
  char           **secrets;       /* NULL when absent */
  char            *from_sandbox;  /* fork source, or NULL */
  char            *from_checkpoint;
} BoxSandboxCreate;

typedef struct {
  GHashTable      *env;           /* NULL = unchanged */
  GHashTable      *labels;        /* NULL = unchanged */
  gboolean         has_idle_timeout_s;
  guint            idle_timeout_s;
  gboolean         has_idle_action;
  BoxIdleAction    idle_action;
  gboolean         deadline_set;  /* the field was present */
  gboolean         has_deadline;  /* ... and not null */
  gint64           deadline_at;
  BoxDeadlineAction deadline_action;
  gboolean         has_protected;
  gboolean         protected_;
  gboolean         has_http_port;
  guint            http_port;
  GPtrArray       *egress;        /* NULL = unchanged */
  char           **secrets;       /* NULL = unchanged */
} BoxSandboxUpdate;

typedef struct {
  char    *value;                 /* plaintext, wiped on free */
  char   **hosts;
  char    *inject_header;         /* NULL = inject null */
  char    *inject_format;
  char    *placeholder_prefix;    /* NULL = none */
} BoxSecretPut;

/* ---- Enums <-> strings ------------------------------------------------- */

BOX_PLUGIN_API
const char *box_sandbox_state_to_string   (BoxSandboxState state);
BOX_PLUGIN_API
gboolean    box_sandbox_state_from_string (const char *str, BoxSandboxState *out);
BOX_PLUGIN_API
const char *box_idle_action_to_string     (BoxIdleAction action);
BOX_PLUGIN_API
gboolean    box_idle_action_from_string   (const char *str, BoxIdleAction *out);
BOX_PLUGIN_API
const char *box_deadline_action_to_string (BoxDeadlineAction action);
BOX_PLUGIN_API
gboolean    box_deadline_action_from_string (const char *str, BoxDeadlineAction *out);

/* ---- Time -------------------------------------------------------------- */

/* RFC 3339 UTC in whole seconds, e.g. "2026-11-22T00:58:55Z". */
BOX_PLUGIN_API
char       *box_time_format               (gint64 usec);
/* Parses RFC 3339 (any offset); FALSE when malformed. */
BOX_PLUGIN_API
gboolean    box_time_parse                (const char *str, gint64 *usec_out);

/* ---- Lifetime ---------------------------------------------------------- */

BOX_PLUGIN_API
void           box_project_free        (BoxProject *project);
BOX_PLUGIN_API
BoxProject    *box_project_copy        (const BoxProject *project);
BOX_PLUGIN_API
void           box_key_free            (BoxKey *key);
BOX_PLUGIN_API
BoxKey        *box_key_copy            (const BoxKey *key);
BOX_PLUGIN_API
void           box_principal_free      (BoxPrincipal *principal);
BOX_PLUGIN_API
void           box_rule_free           (BoxRule *rule);
BOX_PLUGIN_API
BoxRule       *box_rule_copy           (const BoxRule *rule);
BOX_PLUGIN_API
BoxSandbox    *box_sandbox_new         (void);
BOX_PLUGIN_API
void           box_sandbox_free        (BoxSandbox *sandbox);
BOX_PLUGIN_API
BoxSandbox    *box_sandbox_copy        (const BoxSandbox *sandbox);
BOX_PLUGIN_API
void           box_checkpoint_free     (BoxCheckpoint *checkpoint);
BOX_PLUGIN_API
BoxCheckpoint *box_checkpoint_copy     (const BoxCheckpoint *checkpoint);
BOX_PLUGIN_API
void           box_secret_free         (BoxSecret *secret);
BOX_PLUGIN_API
BoxSecret     *box_secret_copy         (const BoxSecret *secret);
BOX_PLUGIN_API
void           box_template_free       (BoxTemplate *tmpl);
BOX_PLUGIN_API
BoxTemplate   *box_template_copy       (const BoxTemplate *tmpl);
BOX_PLUGIN_API
BoxEvent      *box_event_new           (const char *type, const char *project,
                                        const char *sandbox, JsonObject *detail);
BOX_PLUGIN_API
void           box_event_free          (BoxEvent *event);
BOX_PLUGIN_API
BoxEvent      *box_event_copy          (const BoxEvent *event);
BOX_PLUGIN_API
void           box_sandbox_create_free (BoxSandboxCreate *req);
BOX_PLUGIN_API
void           box_sandbox_update_free (BoxSandboxUpdate *req);
BOX_PLUGIN_API
void           box_secret_put_free     (BoxSecretPut *req);

/* ---- JSON forms -------------------------------------------------------- */

BOX_PLUGIN_API
JsonNode      *box_project_to_api_json    (const BoxProject *project);
BOX_PLUGIN_API
JsonNode      *box_key_to_api_json        (const BoxKey *key);
BOX_PLUGIN_API
JsonNode      *box_rule_to_api_json       (const BoxRule *rule);
/* @sandbox_domain may be NULL/"" (url is then ""); @project_domains may be NULL. */
BOX_PLUGIN_API
JsonNode      *box_sandbox_to_api_json    (const BoxSandbox *sandbox,
                                           const char *sandbox_domain,
                                           const char *const *project_domains);
BOX_PLUGIN_API
JsonNode      *box_checkpoint_to_api_json (const BoxCheckpoint *checkpoint);
BOX_PLUGIN_API
JsonNode      *box_secret_to_api_json     (const BoxSecret *secret);
BOX_PLUGIN_API
JsonNode      *box_template_to_api_json   (const BoxTemplate *tmpl);
/* {type, sandbox, at, detail?} */
BOX_PLUGIN_API
JsonNode      *box_event_to_api_json      (const BoxEvent *event);

BOX_PLUGIN_API
char          *box_project_to_storage_json      (const BoxProject *project);
BOX_PLUGIN_API
BoxProject    *box_project_from_storage_json    (const char *json, GError **error);
BOX_PLUGIN_API
char          *box_key_to_storage_json          (const BoxKey *key);
BOX_PLUGIN_API
BoxKey        *box_key_from_storage_json        (const char *json, GError **error);
BOX_PLUGIN_API
char          *box_sandbox_to_storage_json      (const BoxSandbox *sandbox);
BOX_PLUGIN_API
BoxSandbox    *box_sandbox_from_storage_json    (const char *json, GError **error);
/* An array of rules as box_rule_to_api_json() or the storage form wrote
 * them (BoxRule*; NULL or JSON null: none).  Trusts what it reads: for
 * rules that were validated before they were written. */
BOX_PLUGIN_API
GPtrArray     *box_rules_from_storage_json      (JsonNode *egress, GError **error);
BOX_PLUGIN_API
char          *box_checkpoint_to_storage_json   (const BoxCheckpoint *checkpoint);
BOX_PLUGIN_API
BoxCheckpoint *box_checkpoint_from_storage_json (const char *json, GError **error);
/* The sealed value is in the JSON as "sealed", in hex. */
BOX_PLUGIN_API
char          *box_secret_to_storage_json       (const BoxSecret *secret);
BOX_PLUGIN_API
BoxSecret     *box_secret_from_storage_json     (const char *json, GError **error);

/* The sandbox URL: https://<name>--<project>.<domain> ("" without a domain) */
BOX_PLUGIN_API
char          *box_sandbox_url                  (const BoxSandbox *sandbox,
                                                 const char *sandbox_domain);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxProject, box_project_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxKey, box_key_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxPrincipal, box_principal_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxRule, box_rule_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSandbox, box_sandbox_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxCheckpoint, box_checkpoint_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSecret, box_secret_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxTemplate, box_template_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxEvent, box_event_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSandboxCreate, box_sandbox_create_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSandboxUpdate, box_sandbox_update_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSecretPut, box_secret_put_free)

G_END_DECLS
