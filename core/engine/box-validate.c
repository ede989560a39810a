/* box-validate.c: format rules for names, labels, rules, secrets and images.
 *
 * Messages name the field and the rule.  Values are quoted through
 * quote_value(), which keeps a message valid UTF-8 and printable whatever
 * the client sent.  A secret's value is never quoted.
 */
#include "config.h"

#include <string.h>
#include <gio/gio.h>

#include "box-error.h"
#include "box-validate.h"

#define QUOTE_MAX_CHARS 80

/* "value" in double quotes, invalid UTF-8 replaced, control characters
 * escaped, cut after QUOTE_MAX_CHARS characters. */
static char *
quote_value (const char *value)
{
  g_autofree char *valid = g_utf8_make_valid (value != NULL ? value : "", -1);
  GString *out = g_string_new ("\"");
  const char *p;
  guint n = 0;

  for (p = valid; *p != '\0'; p = g_utf8_next_char (p)) {
    gunichar c = g_utf8_get_char (p);

    if (n++ == QUOTE_MAX_CHARS) {
      g_string_append (out, "...");
      break;
    }
    if (c == '"' || c == '\\')
      g_string_append_printf (out, "\\%c", (char) c);
    else if (c < 0x20 || c == 0x7f)
      g_string_append_printf (out, "\\x%02x", c);
    else if (g_unichar_iscntrl (c))
      g_string_append_printf (out, "\\u%04x", c);
    else
      g_string_append_unichar (out, c);
  }
  g_string_append_c (out, '"');
  return g_string_free (out, FALSE);
}

/* "invalid <what> <quoted value>: <reason>" */
static gboolean
fail_value (GError **error, const char *what, const char *value, const char *reason)
{
  g_autofree char *quoted = quote_value (value);

  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid %s %s: %s", what, quoted, reason);
  return FALSE;
}

/* ---- Names and labels -------------------------------------------------- */

static gboolean
is_lower_alnum (char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* The DNS label rules of sandbox and project names. */
static gboolean
check_name_label (const char *field, const char *name, gsize max, GError **error)
{
  g_autofree char *quoted = quote_value (name);
  gsize len = name != NULL ? strlen (name) : 0;
  gsize i;

  if (len == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "invalid %s %s: must be 1 to %" G_GSIZE_FORMAT " characters", field, quoted, max);
    return FALSE;
  }
  for (i = 0; i < len; i++) {
    if (!is_lower_alnum (name[i]) && name[i] != '-') {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                   "invalid %s %s: must be a DNS label: lowercase letters, digits and '-'",
                   field, quoted);
      return FALSE;
    }
  }
  if (len > max) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "invalid %s %s: must be at most %" G_GSIZE_FORMAT " characters", field, quoted,
                 max);
    return FALSE;
  }
  if (name[0] == '-' || name[len - 1] == '-') {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "invalid %s %s: must start and end with a letter or digit", field, quoted);
    return FALSE;
  }
  if (strstr (name, "--") != NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "invalid %s %s: must not contain \"--\" (it separates names in sandbox URLs)",
                 field, quoted);
    return FALSE;
  }
  return TRUE;
}

gboolean
box_validate_sandbox_name (const char *name, const char *project, GError **error)
{
  if (!check_name_label ("name", name, BOX_SANDBOX_NAME_MAX, error))
    return FALSE;
  if (box_is_sandbox_id (name))
    return fail_value (error, "name", name,
                       "must not look like a sandbox ID (sb-...)");
  if (project != NULL && strlen (name) + strlen (project) > BOX_SANDBOX_PROJECT_NAME_MAX) {
    g_autofree char *quoted = quote_value (name);

    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "invalid name %s: name plus project name (%" G_GSIZE_FORMAT
                 " + %" G_GSIZE_FORMAT ") must be at most %d characters",
                 quoted, strlen (name), strlen (project), BOX_SANDBOX_PROJECT_NAME_MAX);
    return FALSE;
  }
  return TRUE;
}

gboolean
box_validate_project_name (const char *name, GError **error)
{
  return check_name_label ("project name", name, BOX_PROJECT_NAME_MAX, error);
}

/* NULL when @str is valid UTF-8 without control characters (and, when
 * @printable, without unprintable ones), else the reason. */
static const char *
check_utf8_text (const char *str, gboolean printable)
{
  const char *p;

  if (str == NULL || !g_utf8_validate (str, -1, NULL))
    return "must be valid UTF-8";
  for (p = str; *p != '\0'; p = g_utf8_next_char (p)) {
    gunichar c = g_utf8_get_char (p);

    if (g_unichar_iscntrl (c) || (printable && !g_unichar_isprint (c)))
      return printable ? "must hold only printable characters" : "must not contain control characters";
  }
  return NULL;
}

gboolean
box_validate_key_name (const char *name, GError **error)
{
  const char *why = check_utf8_text (name, TRUE);
  glong n;

  if (why != NULL)
    return fail_value (error, "key name", name, why);
  n = g_utf8_strlen (name, -1);
  if (n < 1 || n > 64)
    return fail_value (error, "key name", name,
                       "must be 1 to 64 characters");
  return TRUE;
}

gboolean
box_validate_label (const char *key, const char *value, GError **error)
{
  const char *why = check_utf8_text (key, FALSE);
  glong n;

  if (why != NULL)
    return fail_value (error, "label key", key, why);
  n = g_utf8_strlen (key, -1);
  if (n < 1 || n > BOX_LABEL_KEY_MAX)
    return fail_value (error, "label key", key,
                       "must be 1 to 63 characters");
  if (strchr (key, '=') != NULL || strchr (key, ',') != NULL)
    return fail_value (error, "label key", key,
                       "must not contain '=' or ','");
  if (value == NULL || !g_utf8_validate (value, -1, NULL)) {
    g_autofree char *quoted = quote_value (key);

    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "invalid label value for key %s: must be valid UTF-8", quoted);
    return FALSE;
  }
  if (g_utf8_strlen (value, -1) > BOX_LABEL_VALUE_MAX) {
    g_autofree char *quoted = quote_value (key);

    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "invalid label value for key %s: must be at most %d characters", quoted,
                 BOX_LABEL_VALUE_MAX);
    return FALSE;
  }
  return TRUE;
}

gboolean
box_validate_env_name (const char *name, GError **error)
{
  gsize i;

  if (name == NULL || name[0] == '\0')
    return fail_value (error, "env name", name,
                       "must not be empty");
  for (i = 0; name[i] != '\0'; i++) {
    char c = name[i];

    if (!(g_ascii_isalpha (c) || c == '_' || (i > 0 && g_ascii_isdigit (c))))
      return fail_value (error, "env name", name,
                       "must match [A-Za-z_][A-Za-z0-9_]*");
  }
  return TRUE;
}

static gboolean
check_resource (const char *field, guint value, guint min, guint max, const char *unit,
                GError **error)
{
  if (value == 0 || (value >= min && value <= max))
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
               "invalid resources.%s %u: must be 0 (from the template) or %u to %u%s", field,
               value, min, max, unit);
  return FALSE;
}

gboolean
box_validate_resources (const BoxResources *resources, GError **error)
{
  g_return_val_if_fail (resources != NULL, FALSE);
  return check_resource ("cpus", resources->cpus, BOX_CPUS_MIN, BOX_CPUS_MAX, "", error) &&
         check_resource ("memory_mib", resources->memory_mib, BOX_MEMORY_MIB_MIN,
                         BOX_MEMORY_MIB_MAX, " MiB", error) &&
         check_resource ("disk_gib", resources->disk_gib, BOX_DISK_GIB_MIN, BOX_DISK_GIB_MAX,
                         " GiB", error);
}

gboolean
box_validate_http_port (gint64 port, GError **error)
{
  if (port >= 1 && port <= 65535)
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
               "invalid http_port %" G_GINT64_FORMAT ": must be 1 to 65535", port);
  return FALSE;
}

/* ---- Host names -------------------------------------------------------- */

/* NULL when @name is a lowercase DNS name (labels of [a-z0-9-_], 1 to 63
 * chars, not starting or ending with '-'; at most 253 chars in all; not an
 * address), else the reason. */
static const char *
check_host_name (const char *name, gboolean need_dot)
{
  gsize len = strlen (name);
  const char *label = name;
  const char *last_label = name;
  gboolean all_digits = TRUE;
  gsize i;

  if (len == 0)
    return "must not be empty";
  if (box_is_ip_address (name))
    return "must be a host name, not an IP address";
  if (len > 253)
    return "must be at most 253 characters";
  for (i = 0; i <= len; i++) {
    char c = name[i];

    if (c == '.' || c == '\0') {
      gsize label_len = (gsize) (name + i - label);

      if (label_len == 0)
        return "must not have an empty label (\"..\", or a leading or trailing '.')";
      if (label_len > 63)
        return "each label must be at most 63 characters";
      if (label[0] == '-' || name[i - 1] == '-')
        return "labels must not start or end with '-'";
      last_label = label;
      label = name + i + 1;
      continue;
    }
    if (g_ascii_isupper (c))
      return "must be lowercase";
    if ((guchar) c >= 0x80)
      return "must be ASCII: an internationalized name goes in its xn-- (punycode) form";
    if (!is_lower_alnum (c) && c != '-' && c != '_')
      return "must be a DNS name: lowercase letters, digits, '-', '_' and '.'";
  }
  if (need_dot && strchr (name, '.') == NULL)
    return "must contain at least one '.'";
  /* a numeric last label reads as an address to many resolvers ("127.1") */
  for (i = 0; last_label[i] != '\0'; i++) {
    if (!g_ascii_isdigit (last_label[i]))
      all_digits = FALSE;
  }
  if (all_digits || (last_label[0] == '0' && last_label[1] == 'x'))
    return "must be a host name, not an IP address";
  return NULL;
}

gboolean
box_validate_project_domain (const char *domain, GError **error)
{
  const char *why;

  if (domain == NULL)
    return fail_value (error, "project domain", "",
                       "must not be empty");
  why = check_host_name (domain, TRUE);
  if (why != NULL)
    return fail_value (error, "project domain", domain, why);
  return TRUE;
}

gboolean
box_is_ip_address (const char *str)
{
  gsize len;

  if (str == NULL || str[0] == '\0')
    return FALSE;
  len = strlen (str);
  if (str[0] == '[' && len > 2 && str[len - 1] == ']') {
    g_autofree char *inner = g_strndup (str + 1, len - 2);

    return g_hostname_is_ip_address (inner);
  }
  return g_hostname_is_ip_address (str);
}

gboolean
box_is_sandbox_id (const char *str)
{
  gsize i;

  if (str == NULL || !g_str_has_prefix (str, "sb-") || strlen (str) != 15)
    return FALSE;
  for (i = 3; i < 15; i++) {
    if (!((str[i] >= 'a' && str[i] <= 'z') || (str[i] >= '2' && str[i] <= '7')))
      return FALSE;
  }
  return TRUE;
}

/* ---- Images ------------------------------------------------------------ */

/* A path component: [a-z0-9]+ joined by '.', '_', "__" or runs of '-'. */
static gboolean
is_path_component (const char *s, gsize len)
{
  gsize i;

  if (len == 0 || !is_lower_alnum (s[0]) || !is_lower_alnum (s[len - 1]))
    return FALSE;
  for (i = 1; i < len; i++) {
    if (is_lower_alnum (s[i]) || s[i] == '-')
      continue;
    if (s[i] == '.' && is_lower_alnum (s[i + 1]))
      continue;
    if (s[i] == '_' && (is_lower_alnum (s[i + 1]) || (s[i + 1] == '_' && is_lower_alnum (s[i + 2]))))
      continue;
    return FALSE;
  }
  return TRUE;
}

/* "host", "host:port": the first component is a registry when it has a
 * '.' or a ':', or is "localhost" (the Docker rule). */
static gboolean
is_registry (const char *s, gsize len)
{
  g_autofree char *host = g_strndup (s, len);
  char *colon = strchr (host, ':');

  if (colon != NULL) {
    const char *port = colon + 1;
    guint64 n = 0;

    *colon = '\0';
    if (port[0] == '\0' || !g_ascii_string_to_unsigned (port, 10, 1, 65535, &n, NULL))
      return FALSE;
  }
  if (g_strcmp0 (host, "localhost") == 0)
    return TRUE;
  if (g_hostname_is_ip_address (host) && strchr (host, ':') == NULL)
    return TRUE;
  return check_host_name (host, FALSE) == NULL;
}

static gboolean
has_registry (const char *repo, gsize first_len)
{
  return memchr (repo, '.', first_len) != NULL || memchr (repo, ':', first_len) != NULL ||
         (first_len == 9 && strncmp (repo, "localhost", 9) == 0);
}

gboolean
box_validate_image_ref (const char *image, GError **error)
{
  const char *at, *slash, *last, *digest, *p;
  g_autofree char *repo = NULL;
  gsize i;

  if (image == NULL || image[0] == '\0')
    return fail_value (error, "image", "",
                       "must be <repository>@sha256:<64 hex digits>");
  at = strchr (image, '@');
  repo = at != NULL ? g_strndup (image, (gsize) (at - image)) : g_strdup (image);
  last = strrchr (repo, '/');
  last = last != NULL ? last + 1 : repo;
  if (strchr (last, ':') != NULL)
    return fail_value (error, "image", image,
                       "tags are refused, a digest is required: <repository>@sha256:<64 hex digits>");
  if (at == NULL)
    return fail_value (error, "image", image,
                       "a digest is required: <repository>@sha256:<64 hex digits>");
  if (strlen (repo) == 0 || strlen (repo) > 255)
    return fail_value (error, "image", image,
                       "the repository must be 1 to 255 characters");
  slash = strchr (repo, '/');
  p = repo;
  if (slash != NULL && has_registry (repo, (gsize) (slash - repo))) {
    if (!is_registry (repo, (gsize) (slash - repo)))
      return fail_value (error, "image", image,
                       "the registry must be a lowercase host with an optional :port");
    p = slash + 1;
  }
  while (TRUE) {
    const char *end = strchr (p, '/');
    gsize len = end != NULL ? (gsize) (end - p) : strlen (p);

    if (!is_path_component (p, len))
      return fail_value (error, "image", image,
                       "repository path components must be lowercase letters, digits and '.', '_' or '-' between them");
    if (end == NULL)
      break;
    p = end + 1;
  }
  digest = at + 1;
  if (!g_str_has_prefix (digest, "sha256:"))
    return fail_value (error, "image", image,
                       "the digest must be sha256:<64 hex digits>");
  digest += strlen ("sha256:");
  for (i = 0; digest[i] != '\0'; i++) {
    if (!g_ascii_isdigit (digest[i]) && !(digest[i] >= 'a' && digest[i] <= 'f'))
      break;
  }
  if (i != 64 || digest[i] != '\0')
    return fail_value (error, "image", image,
                       "the digest must be sha256: and 64 lowercase hex digits");
  return TRUE;
}

/* ---- Egress rules ------------------------------------------------------ */

gboolean
box_validate_rule (const BoxRule *rule, GError **error)
{
  const char *domain;
  const char *why = NULL;
  guint i;

  if (rule == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid network rule: empty");
    return FALSE;
  }
  if (rule->include != NULL) {
    if (g_strcmp0 (rule->include, "defaults") != 0)
      return fail_value (error, "network rule: include", rule->include,
                       "the only value is \"defaults\"");
    if (rule->domain != NULL || rule->n_ports > 0) {
      g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                           "invalid network rule: an include entry has no other field");
      return FALSE;
    }
    return TRUE;
  }
  domain = rule->domain;
  if (domain == NULL || domain[0] == '\0') {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         "invalid network rule: domain is required (or include: \"defaults\")");
    return FALSE;
  }
  if (box_is_ip_address (domain))
    why = "an IP address is invalid, rules take host names";
  else if (g_strcmp0 (domain, "*") == 0)
    why = NULL;
  else if (g_str_has_prefix (domain, "*."))
    why = check_host_name (domain + 2, FALSE);
  else if (strchr (domain, '*') != NULL)
    why = "a wildcard must be \"*\" or \"*.<name>\"";
  else
    why = check_host_name (domain, FALSE);
  if (why != NULL)
    return fail_value (error, "network rule domain", domain, why);
  if (!rule->allow && rule->n_ports > 0)
    return fail_value (error, "network rule for", domain,
                       "a deny rule takes no ports (it covers every port)");
  for (i = 0; i < rule->n_ports; i++) {
    if (rule->ports == NULL || rule->ports[i] == 0)
      return fail_value (error, "network rule for", domain,
                       "ports must be 1 to 65535");
  }
  return TRUE;
}

gboolean
box_validate_rules (GPtrArray *rules, guint n_defaults, GError **error)
{
  guint64 count = 0;
  guint i;

  if (rules == NULL)
    return TRUE;
  for (i = 0; i < rules->len; i++) {
    const BoxRule *rule = g_ptr_array_index (rules, i);

    if (!box_validate_rule (rule, error))
      return FALSE;
    count += rule->include != NULL ? n_defaults : 1;
  }
  if (count > BOX_EGRESS_RULES_MAX) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "too many network rules: %" G_GUINT64_FORMAT
                 " counting defaults expanded, at most %d", count, BOX_EGRESS_RULES_MAX);
    return FALSE;
  }
  return TRUE;
}

/* ---- Secrets ----------------------------------------------------------- */

gboolean
box_validate_secret_name (const char *name, GError **error)
{
  gsize i;

  if (name == NULL || name[0] == '\0')
    return fail_value (error, "secret name", "",
                       "must not be empty");
  for (i = 0; name[i] != '\0'; i++) {
    char c = name[i];

    if (!((c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && g_ascii_isdigit (c))))
      return fail_value (error, "secret name", name,
                       "must match [A-Z_][A-Z0-9_]*");
  }
  if (i > BOX_SECRET_NAME_MAX)
    return fail_value (error, "secret name", name,
                       "must be at most 64 characters");
  return TRUE;
}

gboolean
box_validate_secret_value (const char *value, gsize len, GError **error)
{
  if (value == NULL || len == 0 || len > BOX_SECRET_VALUE_MAX) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "invalid secret value: must be 1 to %d bytes", BOX_SECRET_VALUE_MAX);
    return FALSE;
  }
  if (memchr (value, '\r', len) != NULL || memchr (value, '\n', len) != NULL ||
      memchr (value, '\0', len) != NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         "invalid secret value: must not contain CR, LF or NUL");
    return FALSE;
  }
  return TRUE;
}

static gboolean
is_path_char (char c)
{
  return g_ascii_isalnum (c) || strchr ("-._~!$&'()*+,;=:@/%", c) != NULL;
}

gboolean
box_validate_secret_host (const char *host, GError **error)
{
  g_autofree char *name = NULL;
  const char *path, *why = NULL;
  gsize i;

  if (host == NULL || host[0] == '\0')
    return fail_value (error, "secret host", "",
                       "must not be empty");
  if (strstr (host, "://") != NULL)
    return fail_value (error, "secret host", host,
                       "give the host without a scheme (HTTPS is implied)");
  path = strchr (host, '/');
  name = path != NULL ? g_strndup (host, (gsize) (path - host)) : g_strdup (host);
  if (strchr (name, ':') != NULL && !box_is_ip_address (name))
    return fail_value (error, "secret host", host,
                       "give no port, secrets go to port 443 only");
  if (g_str_has_prefix (name, "*."))
    why = check_host_name (name + 2, TRUE);
  else if (strchr (name, '*') != NULL)
    why = "a wildcard must be \"*.<suffix>\"";
  else
    why = check_host_name (name, FALSE);
  if (why != NULL)
    return fail_value (error, "secret host", host, why);
  if (path == NULL)
    return TRUE;
  if (strlen (path) > 1024)
    return fail_value (error, "secret host", host,
                       "the path prefix must be at most 1024 characters");
  for (i = 0; path[i] != '\0'; i++) {
    if (!is_path_char (path[i]))
      return fail_value (error, "secret host", host,
                       "the path prefix may hold only URL path characters");
  }
  if (strstr (path, "//") != NULL || strstr (path, "/./") != NULL || strstr (path, "/../") != NULL ||
      g_str_has_suffix (path, "/.") || g_str_has_suffix (path, "/.."))
    return fail_value (error, "secret host", host,
                       "the path prefix must not have empty, '.' or '..' segments");
  return TRUE;
}

static const char *const forbidden_headers[] = {
  "host", "content-length", "transfer-encoding", "connection", "upgrade", "keep-alive",
  "proxy-connection", "te", "trailer", "expect", "http2-settings", NULL,
};

gboolean
box_validate_inject_header (const char *header, GError **error)
{
  gsize i;

  if (header == NULL || header[0] == '\0')
    return fail_value (error, "inject header", "",
                       "must not be empty");
  if (header[0] == ':')
    return fail_value (error, "inject header", header,
                       "pseudo-headers cannot be set");
  for (i = 0; header[i] != '\0'; i++) {
    if (!g_ascii_isalnum (header[i]) && strchr ("!#$%&'*+-.^_`|~", header[i]) == NULL)
      return fail_value (error, "inject header", header,
                       "must be an HTTP header name (token)");
  }
  if (i > 256)
    return fail_value (error, "inject header", header,
                       "must be at most 256 characters");
  for (i = 0; forbidden_headers[i] != NULL; i++) {
    if (g_ascii_strcasecmp (header, forbidden_headers[i]) == 0)
      return fail_value (error, "inject header", header,
                       "it frames or routes the request and cannot be set");
  }
  return TRUE;
}

gboolean
box_validate_placeholder_prefix (const char *prefix, GError **error)
{
  gsize i;

  if (prefix == NULL)
    return TRUE;
  for (i = 0; prefix[i] != '\0'; i++) {
    if ((guchar) prefix[i] < 0x21 || (guchar) prefix[i] > 0x7e)
      return fail_value (error, "placeholder_prefix", prefix,
                       "must be printable ASCII without spaces");
  }
  if (i > BOX_PLACEHOLDER_PREFIX_MAX)
    return fail_value (error, "placeholder_prefix", prefix,
                       "must be at most 64 characters");
  return TRUE;
}
