/* fuzz-egress-policy.c: the compiled egress policy against a slow reference.
 *
 * The input is read as a small program: rules (exact, "*.suffix", "*",
 * include, or a raw domain straight from the input), defaults, then
 * lookups (names built from a few labels in random case with an optional
 * trailing dot, or raw bytes).  Labels and ports come from small alphabets
 * so that rules overlap and precedence matters.  Each lookup's
 * box_egress_policy_allows() on every port of the alphabet and
 * box_egress_policy_resolves() must equal the reference below, written
 * from the spec's words (a scan of every rule, no tables).  A rule set
 * that box_validate_rules() accepts must compile.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "box-egress-policy.h"
#include "box-error.h"
#include "box-validate.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static const char *const labels[] = { "a", "b", "c", "xn--d", "e-f", "0", "g_h" };
static const guint16 ports[] = { 22, 80, 443, 8080, 1, 65535 };
static const guint16 probe_ports[] = { 0, 1, 22, 80, 443, 8080, 9999, 65535 };

typedef struct {
  const uint8_t *data;
  size_t         size;
  size_t         pos;
} Reader;

static guint
next (Reader *r)
{
  return r->pos < r->size ? r->data[r->pos++] : 0;
}

static gboolean
more (Reader *r)
{
  return r->pos < r->size;
}

/* 1 to 3 labels from the alphabet, or raw bytes up to a NUL (at most 300) */
static char *
make_name (Reader *r, gboolean raw_ok, gboolean mixed_case)
{
  guint kind = next (r);
  GString *name = g_string_new (NULL);
  guint i, n;

  if (raw_ok && kind % 8 == 7) {
    for (i = 0; i < 300 && more (r); i++) {
      char c = (char) next (r);

      if (c == '\0')
        break;
      g_string_append_c (name, c);
    }
    return g_string_free (name, FALSE);
  }
  n = 1 + kind % 3;
  for (i = 0; i < n; i++) {
    g_string_append (name, labels[next (r) % G_N_ELEMENTS (labels)]);
    if (i + 1 < n)
      g_string_append_c (name, '.');
  }
  if (mixed_case) {
    guint mask = next (r);

    for (i = 0; i < name->len; i++) {
      if ((mask >> (i % 8)) & 1)
        name->str[i] = g_ascii_toupper (name->str[i]);
    }
    if (kind & 0x80)
      g_string_append_c (name, '.');
  }
  return g_string_free (name, FALSE);
}

static BoxRule *
make_rule (Reader *r, gboolean include_ok)
{
  BoxRule *rule = g_new0 (BoxRule, 1);
  guint kind = next (r);
  g_autofree char *name = NULL;
  guint i;

  if (include_ok && kind % 10 == 9) {
    rule->include = g_strdup ("defaults");
    return rule;
  }
  rule->allow = (kind & 0x10) == 0;
  name = make_name (r, TRUE, FALSE);
  switch (kind % 10) {
    case 0: case 1: case 2: case 3:
      rule->domain = g_steal_pointer (&name);
      break;
    case 4: case 5: case 6: case 7:
      rule->domain = g_strconcat ("*.", name, NULL);
      break;
    default:
      rule->domain = g_strdup ("*");
      break;
  }
  if (rule->allow) {
    rule->n_ports = next (r) % 4;
    rule->ports = g_new0 (guint16, MAX (rule->n_ports, 1));
    for (i = 0; i < rule->n_ports; i++)
      rule->ports[i] = ports[next (r) % G_N_ELEMENTS (ports)];
  }
  return rule;
}

/* ---- the reference, from the spec's words -------------------------------- */

/* the name as rules spell it (lowercase, one trailing dot dropped), or NULL
 * when it is not a host name (or reads as an address) */
static char *
ref_name (const char *name)
{
  static GRegex *syntax;
  g_autofree char *lower = g_ascii_strdown (name, -1);
  gsize len = strlen (lower);
  const char *last;

  if (syntax == NULL)
    syntax = g_regex_new ("^(?:[a-z0-9_-]{1,63}\\.)*[a-z0-9_-]{1,63}$", G_REGEX_RAW | G_REGEX_DOLLAR_ENDONLY, 0, NULL);
  if (len > 0 && lower[len - 1] == '.')
    lower[--len] = '\0';
  if (len > 253 || !g_regex_match (syntax, lower, 0, NULL))
    return NULL;
  last = strrchr (lower, '.');
  last = last != NULL ? last + 1 : lower;
  if (strspn (last, "0123456789") == strlen (last) || g_str_has_prefix (last, "0x"))
    return NULL;
  return g_steal_pointer (&lower);
}

static gboolean
ref_covers (const BoxRule *rule, guint16 port)
{
  guint i;

  if (!rule->allow)
    return TRUE;   /* a deny covers every port */
  if (rule->n_ports == 0)
    return port == 80 || port == 443;
  for (i = 0; i < rule->n_ports; i++) {
    if (rule->ports[i] == port)
      return TRUE;
  }
  return FALSE;
}

/* how specific a match is: exact > longer suffix > "*"; -1: no match */
static int
ref_specificity (const char *domain, const char *name)
{
  if (strcmp (domain, name) == 0)
    return 1000;
  if (strcmp (domain, "*") == 0)
    return 0;
  if (g_str_has_prefix (domain, "*.") && g_str_has_suffix (name, domain + 1))
    return (int) strlen (domain);
  return -1;
}

static gboolean
ref_allows (GPtrArray *expanded, gboolean restricted, const char *name, guint16 port)
{
  g_autofree char *n = NULL;
  gboolean allow = FALSE, deny = FALSE;
  int best = -1;
  guint i;

  if (!restricted)
    return TRUE;
  n = ref_name (name);
  if (n == NULL)
    return FALSE;
  for (i = 0; i < expanded->len; i++) {
    const BoxRule *rule = g_ptr_array_index (expanded, i);
    int s;

    if (!ref_covers (rule, port) || (s = ref_specificity (rule->domain, n)) < 0)
      continue;
    if (s > best) {
      best = s;
      allow = deny = FALSE;
    }
    if (s == best) {
      allow = allow || rule->allow;
      deny = deny || !rule->allow;
    }
  }
  return best >= 0 && allow && !deny;
}

/* allowed on some port: only the ports the rules name can be */
static gboolean
ref_resolves (GPtrArray *expanded, gboolean restricted, const char *name)
{
  guint i, j;

  if (ref_allows (expanded, restricted, name, 80) || ref_allows (expanded, restricted, name, 443))
    return TRUE;
  for (i = 0; i < expanded->len; i++) {
    const BoxRule *rule = g_ptr_array_index (expanded, i);

    for (j = 0; j < rule->n_ports; j++) {
      if (ref_allows (expanded, restricted, name, rule->ports[j]))
        return TRUE;
    }
  }
  return FALSE;
}

/* get_ports() is exactly the ports allows() says yes to: every port any
 * rule names (no other can be allowed) and the probe ports. */
static void
check_ports (BoxEgressPolicy *policy, GPtrArray *expanded, const char *name)
{
  g_autoptr(GArray) ports = box_egress_policy_get_ports (policy, name);
  g_autoptr(GHashTable) listed = g_hash_table_new (NULL, NULL);
  guint i, j;

  for (i = 0; i < ports->len; i++) {
    guint16 port = g_array_index (ports, guint16, i);

    if (i > 0 && g_array_index (ports, guint16, i - 1) >= port)
      g_error ("get_ports (\"%s\") is not ascending", name);
    if (!ref_allows (expanded, TRUE, name, port))
      g_error ("get_ports (\"%s\") lists %u, which the reference denies", name, port);
    g_hash_table_add (listed, GUINT_TO_POINTER ((guint) port));
  }
  for (i = 0; i < expanded->len; i++) {
    const BoxRule *rule = g_ptr_array_index (expanded, i);

    for (j = 0; j < rule->n_ports; j++) {
      if (ref_allows (expanded, TRUE, name, rule->ports[j]) &&
          !g_hash_table_contains (listed, GUINT_TO_POINTER ((guint) rule->ports[j])))
        g_error ("get_ports (\"%s\") lacks %u", name, rule->ports[j]);
    }
  }
  for (i = 0; i < G_N_ELEMENTS (probe_ports); i++) {
    if (ref_allows (expanded, TRUE, name, probe_ports[i]) !=
        g_hash_table_contains (listed, GUINT_TO_POINTER ((guint) probe_ports[i])))
      g_error ("get_ports (\"%s\") and the reference disagree on %u", name, probe_ports[i]);
  }
}

/* ---- the target ------------------------------------------------------- */

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  Reader r = { data, size, 0 };
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_autoptr(GPtrArray) defaults = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_autoptr(GPtrArray) expanded = g_ptr_array_new ();
  g_autoptr(BoxEgressPolicy) policy = NULL;
  g_autoptr(GError) error = NULL;
  guint n_rules = next (&r) % 16, n_defaults = next (&r) % 5;
  gboolean valid;
  guint i, j;

  for (i = 0; i < n_defaults; i++)
    g_ptr_array_add (defaults, make_rule (&r, FALSE));
  for (i = 0; i < n_rules; i++)
    g_ptr_array_add (rules, make_rule (&r, TRUE));
  for (i = 0; i < rules->len; i++) {
    BoxRule *rule = g_ptr_array_index (rules, i);

    if (rule->include == NULL)
      g_ptr_array_add (expanded, rule);
    for (j = 0; rule->include != NULL && j < defaults->len; j++)
      g_ptr_array_add (expanded, g_ptr_array_index (defaults, j));
  }
  valid = box_validate_rules (rules, defaults->len, NULL) &&
          box_validate_rules (defaults, 0, NULL);
  policy = box_egress_policy_new (rules, defaults, &error);
  if (valid && policy == NULL)
    g_error ("rules the API accepts did not compile: %s", error->message);
  if (policy == NULL) {
    g_assert (g_error_matches (error, BOX_ERROR, BOX_ERROR_INVALID));
    return 0;
  }
  g_assert (box_egress_policy_is_restricted (policy) == (rules->len > 0));
  g_assert (box_egress_policy_get_n_rules (policy) == (rules->len > 0 ? expanded->len : 0));
  while (more (&r)) {
    g_autofree char *name = make_name (&r, TRUE, TRUE);
    gboolean restricted = rules->len > 0;

    for (i = 0; i < G_N_ELEMENTS (probe_ports); i++) {
      guint16 port = probe_ports[i];

      if (box_egress_policy_allows (policy, name, port) != ref_allows (expanded, restricted, name, port))
        g_error ("allows (\"%s\", %u) differs from the reference", name, port);
    }
    if (box_egress_policy_resolves (policy, name) != ref_resolves (expanded, restricted, name))
      g_error ("resolves (\"%s\") differs from the reference", name);
    if (restricted)
      check_ports (policy, expanded, name);
  }
  return 0;
}
