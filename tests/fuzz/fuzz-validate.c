/* fuzz-validate.c: arbitrary bytes through every format check.
 *
 * The input is cut at the first NUL or newline into two strings (a and b)
 * so that the two-argument checks (name + project, label key + value) get
 * independent values. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "box-error.h"
#include "box-validate.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(call)                                                           \
  G_STMT_START {                                                              \
    g_autoptr(GError) _error = NULL;                                          \
    GError **error = &_error;                                                 \
    gboolean _ok = (call);                                                    \
    /* a refusal always says why, in the one domain, as valid UTF-8 */        \
    g_assert (_ok == (_error == NULL));                                       \
    g_assert (_ok || g_error_matches (_error, BOX_ERROR, BOX_ERROR_INVALID)); \
    g_assert (_ok || g_utf8_validate (_error->message, -1, NULL));            \
  } G_STMT_END

static void
check_rule (const char *domain, const uint8_t *data, size_t size)
{
  g_autoptr(BoxRule) rule = g_new0 (BoxRule, 1);
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  guint i;

  rule->domain = g_strdup (domain);
  rule->allow = size > 0 && (data[0] & 1) != 0;
  rule->n_ports = size > 1 ? data[1] % 4 : 0;
  rule->ports = g_new0 (guint16, rule->n_ports + 1);
  for (i = 0; i < rule->n_ports && 2 + 2 * i + 1 < size; i++)
    rule->ports[i] = (guint16) (data[2 + 2 * i] << 8 | data[2 + 2 * i + 1]);
  if (size > 2 && data[2] == '!')
    rule->include = g_strdup (domain[0] != '\0' ? domain + 1 : domain);
  CHECK (box_validate_rule (rule, error));
  g_ptr_array_add (rules, box_rule_copy (rule));
  g_ptr_array_add (rules, box_rule_copy (rule));
  CHECK (box_validate_rules (rules, size > 0 ? data[0] * 4u : 0, error));
  {
    g_autoptr(JsonNode) node = box_rule_to_api_json (rule);

    g_assert (node != NULL);
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autofree char *all = g_strndup ((const char *) data, size);
  g_autofree char *a = NULL;
  const char *b;
  char *cut;
  BoxResources res;
  gint64 port = 0;

  cut = strpbrk (all, "\n");
  a = cut != NULL ? g_strndup (all, (gsize) (cut - all)) : g_strdup (all);
  b = cut != NULL ? cut + 1 : "";

  CHECK (box_validate_sandbox_name (a, NULL, error));
  CHECK (box_validate_sandbox_name (a, b, error));
  CHECK (box_validate_project_name (a, error));
  CHECK (box_validate_project_domain (a, error));
  CHECK (box_validate_key_name (a, error));
  CHECK (box_validate_label (a, b, error));
  CHECK (box_validate_env_name (a, error));
  CHECK (box_validate_image_ref (a, error));
  CHECK (box_validate_secret_name (a, error));
  CHECK (box_validate_secret_value ((const char *) data, size, error));
  CHECK (box_validate_secret_host (a, error));
  CHECK (box_validate_inject_header (a, error));
  CHECK (box_validate_placeholder_prefix (a, error));
  (void) box_is_ip_address (a);
  (void) box_is_sandbox_id (a);
  check_rule (a, data, size);

  memset (&res, 0, sizeof res);
  memcpy (&res, data, MIN (size, sizeof res));
  CHECK (box_validate_resources (&res, error));
  memcpy (&port, data, MIN (size, sizeof port));
  CHECK (box_validate_http_port (port, error));
  {
    g_autofree char *placeholder = box_secret_placeholder (a, b);

    g_assert (g_str_has_suffix (placeholder, "__"));
  }
  return 0;
}
