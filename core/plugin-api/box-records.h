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

#include <glib-object.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* ---- Projects and keys ------------------------------------------------- */

/**
 * BoxProject:
 * @name: the project's name
 * @domains: (array zero-terminated=1): the project's custom domains; never
 *   %NULL
 * @created_at: when it was created (µs since the epoch)
 * @revision: the storage revision it was read at; 0: not stored
 *
 * A project: the unit of tenancy.  A boxed type.
 */
typedef struct {
  char   *name;
  char  **domains;      /* NULL-terminated, never NULL */
  gint64  created_at;
  guint64 revision;     /* the storage revision it was read at; 0 = not stored */
} BoxProject;

/**
 * BoxKey:
 * @id: "key-" and 12 lowercase base32
 * @name: the key's name
 * @project: the project it belongs to
 * @hash: lowercase hex SHA-256 of the whole secret
 * @created_at: when it was created (µs since the epoch)
 * @revision: the storage revision it was read at; 0: not stored
 *
 * A project's API key (never its secret).  A boxed type.
 */
typedef struct {
  char   *id;           /* "key-" + 12 lowercase base32 */
  char   *name;
  char   *project;
  char   *hash;         /* lowercase hex SHA-256 of the whole secret */
  gint64  created_at;
  guint64 revision;     /* the storage revision it was read at; 0 = not stored */
} BoxKey;

/**
 * BoxPrincipalKind:
 * @BOX_PRINCIPAL_ADMIN: the deployment's operator (admin token)
 * @BOX_PRINCIPAL_KEY: a project key
 * @BOX_PRINCIPAL_SANDBOX: a process inside a sandbox (in-sandbox socket)
 *
 * Who a #BoxPrincipal is.
 */
typedef enum {
  BOX_PRINCIPAL_ADMIN,  /* the deployment's operator (admin token) */
  BOX_PRINCIPAL_KEY,    /* a project key */
  BOX_PRINCIPAL_SANDBOX /* a process inside a sandbox (in-sandbox socket) */
} BoxPrincipalKind;

/**
 * BoxPrincipal:
 * @kind: who it is
 * @project: (nullable): the project; %NULL for the admin
 * @key: (nullable): the key, for %BOX_PRINCIPAL_KEY only
 * @sandbox_id: (nullable): the sandbox, for %BOX_PRINCIPAL_SANDBOX only
 *
 * Who is calling (box_auth_authenticate()).  A boxed type.
 */
typedef struct {
  BoxPrincipalKind kind;
  char   *project;      /* NULL for ADMIN */
  BoxKey *key;          /* KEY only */
  char   *sandbox_id;   /* SANDBOX only */
} BoxPrincipal;

/* ---- Egress rules ------------------------------------------------------ */

/**
 * BoxRule:
 * @domain: (nullable): exact, "*.suffix" or "*"; %NULL for an include
 * @allow: allow, or deny
 * @ports: (array length=n_ports) (nullable): the ports an allow rule allows;
 *   none: the default, 80 and 443
 * @n_ports: the number of @ports
 * @include: (nullable): "defaults", or %NULL
 *
 * One egress rule, as the client wrote it.  A boxed type.
 */
typedef struct {
  char     *domain;     /* exact, "*.suffix" or "*"; NULL for an include */
  gboolean  allow;
  guint16  *ports;      /* allow only */
  guint     n_ports;
  char     *include;    /* "defaults" or NULL */
} BoxRule;

/* ---- Sandboxes --------------------------------------------------------- */

/**
 * BoxSandboxState:
 * @BOX_SANDBOX_STATE_CREATING: being created
 * @BOX_SANDBOX_STATE_RUNNING: running
 * @BOX_SANDBOX_STATE_PAUSED: paused (a memory snapshot)
 * @BOX_SANDBOX_STATE_STOPPED: stopped (the disk is kept)
 * @BOX_SANDBOX_STATE_ERROR: failed
 *
 * A sandbox's state (box_sandbox_state_to_string()).
 */
typedef enum {
  BOX_SANDBOX_STATE_CREATING,
  BOX_SANDBOX_STATE_RUNNING,
  BOX_SANDBOX_STATE_PAUSED,
  BOX_SANDBOX_STATE_STOPPED,
  BOX_SANDBOX_STATE_ERROR,
} BoxSandboxState;

/**
 * BoxIdleAction:
 * @BOX_IDLE_ACTION_PAUSE: pause when idle
 * @BOX_IDLE_ACTION_STOP: stop when idle
 * @BOX_IDLE_ACTION_NONE: nothing
 *
 * What happens to an idle sandbox.
 */
typedef enum {
  BOX_IDLE_ACTION_PAUSE,
  BOX_IDLE_ACTION_STOP,
  BOX_IDLE_ACTION_NONE,
} BoxIdleAction;

/**
 * BoxDeadlineAction:
 * @BOX_DEADLINE_ACTION_DELETE: delete it
 * @BOX_DEADLINE_ACTION_PAUSE: pause it
 * @BOX_DEADLINE_ACTION_STOP: stop it
 *
 * What happens to a sandbox at its deadline.
 */
typedef enum {
  BOX_DEADLINE_ACTION_DELETE,
  BOX_DEADLINE_ACTION_PAUSE,
  BOX_DEADLINE_ACTION_STOP,
} BoxDeadlineAction;

/**
 * BoxResources:
 * @cpus: virtual CPUs
 * @memory_mib: memory in MiB
 * @disk_gib: disk in GiB
 *
 * A sandbox's size.  A plain value; a boxed type.
 */
typedef struct {
  guint cpus;
  guint memory_mib;
  guint disk_gib;
} BoxResources;

/**
 * BoxSandbox:
 * @id: "sb-" and 12 lowercase base32
 * @name: the sandbox's name
 * @project: the project it belongs to
 * @template_name: the template; "" when from an image
 * @image: the image; "" when from a template
 * @state: its state
 * @resources: its size
 * @env: (element-type utf8 utf8): the environment; never %NULL
 * @labels: (element-type utf8 utf8): the labels; never %NULL
 * @idle_timeout_s: seconds without activity before @idle_action
 * @idle_action: what happens when idle
 * @has_deadline: whether @deadline_at is set
 * @deadline_at: the deadline (µs since the epoch)
 * @deadline_action: what happens at the deadline
 * @protected_: refuses deletion while set
 * @http_port: the guest port the sandbox URL serves
 * @egress: (element-type BoxRule): the egress rules, as the client wrote
 *   them
 * @secrets: (array zero-terminated=1): the names of the secrets it may use;
 *   never %NULL
 * @created_at: when it was created (µs since the epoch)
 * @updated_at: when it last changed
 * @last_active_at: when it was last active
 * @node: (nullable): internal: the node that holds it awake
 * @snapshot_at: internal: the newest snapshot's time; 0 for none
 * @next_checkpoint: internal: the next "vN" number
 * @next_auto_checkpoint: internal: the next "auto-N" number
 * @fork_source: (nullable): internal: "sb-.../vN" for a fork
 * @port_access: (element-type utf8 utf8): internal: "<port>" -> "private" or
 *   "public" for the ports whose access was set; never %NULL
 * @revision: the storage revision it was read at; 0: not stored
 *
 * A sandbox.  The internal members are in the storage form only.  A boxed
 * type.
 */
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

/**
 * BoxCheckpoint:
 * @id: "v1", ... or "auto-1", ...
 * @sandbox: the sandbox ID
 * @project: the project
 * @comment: the client's comment
 * @memory: memory and disk, or disk only
 * @auto_: made automatically
 * @created_at: when it was made (µs since the epoch)
 * @revision: the storage revision it was read at; 0: not stored
 *
 * A sandbox's checkpoint.  A boxed type.
 */
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

/**
 * BoxSecret:
 * @name: the secret's name
 * @project: the project
 * @hosts: (array zero-terminated=1): the hosts it is sent to; at least one
 * @placeholder: what sandboxes see instead of the value
 * @inject_header: (nullable): the header to inject; %NULL when inject is
 *   null
 * @inject_format: (nullable): the header value's format
 * @sealed_value: the value, AEAD-sealed by the engine; never plaintext
 * @created_at: when it was created (µs since the epoch)
 * @updated_at: when it last changed
 * @revision: the storage revision it was read at; 0: not stored
 *
 * A project's secret, as stored.  A boxed type.
 */
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

/**
 * BoxTemplate:
 * @name: the template's name
 * @image: the image it was built from; "" for the built-in templates
 * @resources: its default size
 *
 * A template sandboxes are created from.  A boxed type.
 */
typedef struct {
  char         *name;
  char         *image;        /* "" for the built-in templates */
  BoxResources  resources;
} BoxTemplate;

/* ---- Events ------------------------------------------------------------ */

/**
 * BoxEvent:
 * @type: "sandbox.created", ...
 * @project: the project
 * @sandbox: (nullable): the sandbox ID
 * @at: when it happened (µs since the epoch)
 * @detail: (nullable): extra members
 *
 * An event of GET /v1/events.  A boxed type.
 */
typedef struct {
  char       *type;           /* "sandbox.created", ... */
  char       *project;
  char       *sandbox;        /* sandbox ID */
  gint64      at;
  JsonObject *detail;         /* may be NULL */
} BoxEvent;

/* ---- Requests (decoded and format-checked, not yet checked against state) */

/**
 * BoxSandboxCreate:
 * @name: (nullable): the name
 * @template_name: (nullable): the template
 * @image: (nullable): the image
 * @resources: the size; 0: from the template
 * @env: (element-type utf8 utf8) (nullable): %NULL when absent
 * @labels: (element-type utf8 utf8) (nullable): %NULL when absent
 * @has_idle_timeout_s: @idle_timeout_s was present
 * @idle_timeout_s: the idle timeout
 * @has_idle_action: @idle_action was present
 * @idle_action: the idle action
 * @has_deadline: a deadline was present and not null
 * @deadline_at: the deadline (µs since the epoch)
 * @deadline_action: what happens at the deadline
 * @protected_: refuses deletion while set
 * @has_http_port: @http_port was present
 * @http_port: the guest port the sandbox URL serves
 * @egress: (element-type BoxRule) (nullable): %NULL when network was absent
 * @secrets: (array zero-terminated=1) (nullable): %NULL when absent
 * @from_sandbox: (nullable): the fork source, or %NULL
 * @from_checkpoint: (nullable): the fork source's checkpoint
 *
 * A create request, decoded and format-checked, not yet checked against
 * state.  A boxed type.
 */
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

/**
 * BoxSandboxUpdate:
 * @env: (element-type utf8 utf8) (nullable): %NULL: unchanged
 * @labels: (element-type utf8 utf8) (nullable): %NULL: unchanged
 * @has_idle_timeout_s: @idle_timeout_s was present
 * @idle_timeout_s: the idle timeout
 * @has_idle_action: @idle_action was present
 * @idle_action: the idle action
 * @deadline_set: the deadline field was present
 * @has_deadline: ... and not null
 * @deadline_at: the deadline (µs since the epoch)
 * @deadline_action: what happens at the deadline
 * @has_protected: @protected_ was present
 * @protected_: refuses deletion while set
 * @has_http_port: @http_port was present
 * @http_port: the guest port the sandbox URL serves
 * @egress: (element-type BoxRule) (nullable): %NULL: unchanged
 * @secrets: (array zero-terminated=1) (nullable): %NULL: unchanged
 *
 * An update request (PATCH), decoded and format-checked.  A boxed type.
 */
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

/**
 * BoxSecretPut:
 * @value: the plaintext, wiped on free
 * @hosts: (array zero-terminated=1): the hosts it is sent to
 * @inject_header: (nullable): %NULL: inject null
 * @inject_format: (nullable): the header value's format
 * @placeholder_prefix: (nullable): %NULL: none
 *
 * A secret write request (PUT), decoded and format-checked.  A boxed type.
 */
typedef struct {
  char    *value;                 /* plaintext, wiped on free */
  char   **hosts;
  char    *inject_header;         /* NULL = inject null */
  char    *inject_format;
  char    *placeholder_prefix;    /* NULL = none */
} BoxSecretPut;

/* ---- Enums <-> strings ------------------------------------------------- */

/**
 * box_sandbox_state_to_string:
 * @state: a state
 *
 * Returns: its API name ("running", ...)
 */
BOX_PLUGIN_API
const char *box_sandbox_state_to_string   (BoxSandboxState state);
/**
 * box_sandbox_state_from_string:
 * @str: an API name
 * @out: (out): the state
 *
 * Returns: %FALSE when @str names no state
 */
BOX_PLUGIN_API
gboolean    box_sandbox_state_from_string (const char *str, BoxSandboxState *out);
/**
 * box_idle_action_to_string:
 * @action: an idle action
 *
 * Returns: its API name ("pause", ...)
 */
BOX_PLUGIN_API
const char *box_idle_action_to_string     (BoxIdleAction action);
/**
 * box_idle_action_from_string:
 * @str: an API name
 * @out: (out): the idle action
 *
 * Returns: %FALSE when @str names no idle action
 */
BOX_PLUGIN_API
gboolean    box_idle_action_from_string   (const char *str, BoxIdleAction *out);
/**
 * box_deadline_action_to_string:
 * @action: a deadline action
 *
 * Returns: its API name ("delete", ...)
 */
BOX_PLUGIN_API
const char *box_deadline_action_to_string (BoxDeadlineAction action);
/**
 * box_deadline_action_from_string:
 * @str: an API name
 * @out: (out): the deadline action
 *
 * Returns: %FALSE when @str names no deadline action
 */
BOX_PLUGIN_API
gboolean    box_deadline_action_from_string (const char *str, BoxDeadlineAction *out);

/* ---- Time -------------------------------------------------------------- */

/**
 * box_time_format:
 * @usec: microseconds since the Unix epoch
 *
 * Returns: (transfer full): RFC 3339 UTC in whole seconds, e.g.
 *   "2026-11-22T00:58:55Z"
 */
BOX_PLUGIN_API
char       *box_time_format               (gint64 usec);
/**
 * box_time_parse:
 * @str: RFC 3339 with any offset
 * @usec_out: (out): microseconds since the Unix epoch
 *
 * Returns: %FALSE when @str is malformed
 */
BOX_PLUGIN_API
gboolean    box_time_parse                (const char *str, gint64 *usec_out);

/* ---- Lifetime ----------------------------------------------------------
 *
 * Every record is a boxed GType (box-records-boxed.c): _copy() is deep and
 * takes NULL, _free() takes NULL, g_autoptr() works.  BoxResources is a
 * plain value; its copy is g_memdup2(). */

#define BOX_TYPE_PROJECT        (box_project_get_type ())
#define BOX_TYPE_KEY            (box_key_get_type ())
#define BOX_TYPE_PRINCIPAL      (box_principal_get_type ())
#define BOX_TYPE_RULE           (box_rule_get_type ())
#define BOX_TYPE_RESOURCES      (box_resources_get_type ())
#define BOX_TYPE_SANDBOX        (box_sandbox_get_type ())
#define BOX_TYPE_CHECKPOINT     (box_checkpoint_get_type ())
#define BOX_TYPE_SECRET         (box_secret_get_type ())
#define BOX_TYPE_TEMPLATE       (box_template_get_type ())
#define BOX_TYPE_EVENT          (box_event_get_type ())
#define BOX_TYPE_SANDBOX_CREATE (box_sandbox_create_get_type ())
#define BOX_TYPE_SANDBOX_UPDATE (box_sandbox_update_get_type ())
#define BOX_TYPE_SECRET_PUT     (box_secret_put_get_type ())

BOX_PLUGIN_API
GType          box_project_get_type        (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_key_get_type            (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_principal_get_type      (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_rule_get_type           (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_resources_get_type      (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_sandbox_get_type        (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_checkpoint_get_type     (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_secret_get_type         (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_template_get_type       (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_event_get_type          (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_sandbox_create_get_type (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_sandbox_update_get_type (void) G_GNUC_CONST;
BOX_PLUGIN_API
GType          box_secret_put_get_type     (void) G_GNUC_CONST;

BOX_PLUGIN_API
void           box_project_free        (BoxProject *project);
/**
 * box_project_copy:
 * @project: (nullable): a project
 *
 * Returns: (transfer full) (nullable): a deep copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxProject    *box_project_copy        (const BoxProject *project);
BOX_PLUGIN_API
void           box_key_free            (BoxKey *key);
/**
 * box_key_copy:
 * @key: (nullable): a key
 *
 * Returns: (transfer full) (nullable): a deep copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxKey        *box_key_copy            (const BoxKey *key);
BOX_PLUGIN_API
void           box_principal_free      (BoxPrincipal *principal);
/**
 * box_principal_copy:
 * @principal: (nullable): a principal
 *
 * Returns: (transfer full) (nullable): a deep copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxPrincipal  *box_principal_copy      (const BoxPrincipal *principal);
BOX_PLUGIN_API
void           box_rule_free           (BoxRule *rule);
/**
 * box_rule_copy:
 * @rule: (nullable): a rule
 *
 * Returns: (transfer full) (nullable): a deep copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxRule       *box_rule_copy           (const BoxRule *rule);
/**
 * box_resources_copy:
 * @resources: (nullable): resources
 *
 * Returns: (transfer full) (nullable): a copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxResources  *box_resources_copy      (const BoxResources *resources);
BOX_PLUGIN_API
void           box_resources_free      (BoxResources *resources);
/**
 * box_sandbox_new:
 *
 * A sandbox with the API's defaults: state creating, idle timeout 300 s
 * with pause, HTTP port 8080, empty maps and lists.
 *
 * Returns: (transfer full): a new sandbox
 */
BOX_PLUGIN_API
BoxSandbox    *box_sandbox_new         (void);
BOX_PLUGIN_API
void           box_sandbox_free        (BoxSandbox *sandbox);
/**
 * box_sandbox_copy:
 * @sandbox: (nullable): a sandbox
 *
 * Returns: (transfer full) (nullable): a deep copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxSandbox    *box_sandbox_copy        (const BoxSandbox *sandbox);
BOX_PLUGIN_API
void           box_checkpoint_free     (BoxCheckpoint *checkpoint);
/**
 * box_checkpoint_copy:
 * @checkpoint: (nullable): a checkpoint
 *
 * Returns: (transfer full) (nullable): a deep copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxCheckpoint *box_checkpoint_copy     (const BoxCheckpoint *checkpoint);
BOX_PLUGIN_API
void           box_secret_free         (BoxSecret *secret);
/**
 * box_secret_copy:
 * @secret: (nullable): a secret
 *
 * Returns: (transfer full) (nullable): a deep copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxSecret     *box_secret_copy         (const BoxSecret *secret);
BOX_PLUGIN_API
void           box_template_free       (BoxTemplate *tmpl);
/**
 * box_template_copy:
 * @tmpl: (nullable): a template
 *
 * Returns: (transfer full) (nullable): a deep copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxTemplate   *box_template_copy       (const BoxTemplate *tmpl);
/**
 * box_event_new:
 * @type: the event type ("sandbox.created", ...)
 * @project: the project
 * @sandbox: (nullable): the sandbox ID
 * @detail: (nullable): extra members; deep-copied, the caller keeps its
 *   reference
 *
 * An event that happened now (g_get_real_time()).
 *
 * Returns: (transfer full): the event
 */
BOX_PLUGIN_API
BoxEvent      *box_event_new           (const char *type, const char *project,
                                        const char *sandbox, JsonObject *detail);
BOX_PLUGIN_API
void           box_event_free          (BoxEvent *event);
/**
 * box_event_copy:
 * @event: (nullable): an event
 *
 * Returns: (transfer full) (nullable): a deep copy; %NULL for %NULL
 */
BOX_PLUGIN_API
BoxEvent      *box_event_copy          (const BoxEvent *event);
BOX_PLUGIN_API
void           box_sandbox_create_free (BoxSandboxCreate *req);
/**
 * box_sandbox_create_copy:
 * @req: (nullable): a create request
 *
 * Returns: (transfer full) (nullable): a deep copy (absent fields stay
 *   %NULL); %NULL for %NULL
 */
BOX_PLUGIN_API
BoxSandboxCreate *box_sandbox_create_copy (const BoxSandboxCreate *req);
BOX_PLUGIN_API
void           box_sandbox_update_free (BoxSandboxUpdate *req);
/**
 * box_sandbox_update_copy:
 * @req: (nullable): an update request
 *
 * Returns: (transfer full) (nullable): a deep copy (absent fields stay
 *   %NULL); %NULL for %NULL
 */
BOX_PLUGIN_API
BoxSandboxUpdate *box_sandbox_update_copy (const BoxSandboxUpdate *req);
/**
 * box_secret_put_free:
 * @req: (nullable) (transfer full): a secret write request
 *
 * Frees @req, wiping the plaintext value first.
 */
BOX_PLUGIN_API
void           box_secret_put_free     (BoxSecretPut *req);
/**
 * box_secret_put_copy:
 * @req: (nullable): a secret write request
 *
 * Returns: (transfer full) (nullable): a deep copy, plaintext included (wiped
 *   again by box_secret_put_free()); %NULL for %NULL
 */
BOX_PLUGIN_API
BoxSecretPut  *box_secret_put_copy     (const BoxSecretPut *req);

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
/**
 * box_rules_from_storage_json:
 * @egress: (nullable): an array of rules as box_rule_to_api_json() or the
 *   storage form wrote them; %NULL or JSON null: none (an empty array)
 * @error: %BOX_ERROR_INTERNAL when malformed
 *
 * Trusts what it reads: for rules that were validated before they were
 * written.
 *
 * Returns: (transfer container) (element-type BoxRule) (nullable): the
 *   rules, which the array owns
 */
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
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxResources, box_resources_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSandbox, box_sandbox_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxCheckpoint, box_checkpoint_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSecret, box_secret_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxTemplate, box_template_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxEvent, box_event_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSandboxCreate, box_sandbox_create_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSandboxUpdate, box_sandbox_update_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSecretPut, box_secret_put_free)

G_END_DECLS
