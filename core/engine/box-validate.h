/* box-validate.h: format rules for names, labels, rules, secrets and IDs.
 *
 * Pure functions with no state: they check what a value looks like, not
 * whether it exists.  Every failure is BOX_ERROR_INVALID with a message a
 * person can act on (it names the field and the rule).  Fuzzed by
 * tests/fuzz-validate.c.
 */
#pragma once

#include "box-egress-policy.h"
#include "box-records.h"

G_BEGIN_DECLS

#define BOX_SANDBOX_NAME_MAX        32
#define BOX_SANDBOX_PROJECT_NAME_MAX 54   /* name + project */
#define BOX_PROJECT_NAME_MAX        32
#define BOX_LABEL_KEY_MAX           63
#define BOX_LABEL_VALUE_MAX         255
#define BOX_IDLE_TIMEOUT_MIN        30
#define BOX_IDLE_TIMEOUT_DEFAULT    300
#define BOX_HTTP_PORT_DEFAULT       8080
#define BOX_EGRESS_RULES_MAX        BOX_EGRESS_POLICY_MAX_RULES
#define BOX_SECRET_NAME_MAX         64
#define BOX_SECRET_VALUE_MAX        8192
#define BOX_PLACEHOLDER_PREFIX_MAX  64
#define BOX_CPUS_MIN 1
#define BOX_CPUS_MAX 32
#define BOX_MEMORY_MIB_MIN 128
#define BOX_MEMORY_MIB_MAX (256 * 1024)
#define BOX_DISK_GIB_MIN 1
#define BOX_DISK_GIB_MAX 2048

/* A DNS label: [a-z0-9-], starts and ends with a letter or digit, no "--",
 * at most 32 chars, and name + project at most 54 chars (@project may be NULL). */
gboolean box_validate_sandbox_name     (const char *name, const char *project, GError **error);
gboolean box_validate_project_name     (const char *name, GError **error);
gboolean box_validate_project_domain   (const char *domain, GError **error);
gboolean box_validate_key_name         (const char *name, GError **error);
gboolean box_validate_label            (const char *key, const char *value, GError **error);
gboolean box_validate_env_name         (const char *name, GError **error);
gboolean box_validate_resources        (const BoxResources *resources, GError **error);
gboolean box_validate_http_port        (gint64 port, GError **error);
/* "<repository>@sha256:<64 hex>"; a tag is refused with a message saying so. */
gboolean box_validate_image_ref        (const char *image, GError **error);
gboolean box_validate_rule             (const BoxRule *rule, GError **error);
/* All rules, with "defaults" counted expanded (@n_defaults entries). */
gboolean box_validate_rules            (GPtrArray *rules, guint n_defaults, GError **error);
gboolean box_validate_secret_name      (const char *name, GError **error);
gboolean box_validate_secret_value     (const char *value, gsize len, GError **error);
/* exact host or "*.<suffix>", either optionally followed by a "/path" prefix */
gboolean box_validate_secret_host      (const char *host, GError **error);
gboolean box_validate_inject_header    (const char *header, GError **error);
gboolean box_validate_placeholder_prefix (const char *prefix, GError **error);

gboolean box_is_sandbox_id             (const char *str);
gboolean box_is_ip_address             (const char *str);

/* Random identifiers from GnuTLS's generator (lowercase base32 a-z2-7). */
char    *box_random_base32             (guint n_chars);
char    *box_generate_sandbox_id       (void);   /* sb-xxxxxxxxxxxx */
char    *box_generate_sandbox_name     (void);   /* <adjective>-<noun>-<4 digits> */
char    *box_generate_key_id           (void);   /* key-xxxxxxxxxxxx */
char    *box_generate_key_secret       (void);   /* box_ + 32 base32 */
char    *box_generate_session_id       (void);   /* s-xxxxxxxxxx */
/* the placeholder: [prefix]__box_<lowercase name>__ */
char    *box_secret_placeholder        (const char *name, const char *prefix);

G_END_DECLS
