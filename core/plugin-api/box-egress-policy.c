/* box-egress-policy.c: egress rules compiled into three lookup levels.
 *
 * A domain's rules fold into one entry: a deny (covering every port), or
 * the sorted union of its allows' ports.  Entries sit in a hash table of
 * exact names, one of "*.suffix" suffixes, and one slot for "*".  A lookup
 * walks from the most specific level down: the exact name, each suffix from
 * the longest, then "*"; the first entry that covers the port decides (a
 * deny covers all of them, so it always decides), and an allow entry that
 * lacks the port is passed, as the spec passes a rule that does not cover
 * it.  No entry: deny.
 */
#include "config.h"

#include <string.h>

#include "box-egress-policy.h"
#include "box-error.h"

#define NAME_MAX_LEN  253
#define LABEL_MAX_LEN 63

typedef struct {
  gboolean  deny;
  GArray   *ports;   /* guint16, sorted, unique once compiled */
} Entry;

/* in a g_atomic_rc_box: the reference count is GLib's */
struct _BoxEgressPolicy {
  gboolean     restricted;
  guint        n_rules;
  GHashTable  *exact;     /* name -> Entry */
  GHashTable  *suffix;    /* "example.com" of "*.example.com" -> Entry */
  Entry       *star;      /* "*"; NULL when no rule names it */
};

G_DEFINE_BOXED_TYPE (BoxEgressPolicy, box_egress_policy, box_egress_policy_ref,
                     box_egress_policy_unref)

static void
entry_free (Entry *entry)
{
  if (entry == NULL)
    return;
  g_array_unref (entry->ports);
  g_free (entry);
}

static Entry *
entry_new (void)
{
  Entry *entry = g_new0 (Entry, 1);

  entry->ports = g_array_new (FALSE, FALSE, sizeof (guint16));
  return entry;
}

static int
compare_ports (gconstpointer a, gconstpointer b)
{
  return (int) *(const guint16 *) a - (int) *(const guint16 *) b;
}

static void
entry_compile (Entry *entry)
{
  guint i, n = 0;

  g_array_sort (entry->ports, compare_ports);
  for (i = 0; i < entry->ports->len; i++) {
    guint16 port = g_array_index (entry->ports, guint16, i);

    if (n == 0 || g_array_index (entry->ports, guint16, n - 1) != port)
      g_array_index (entry->ports, guint16, n++) = port;
  }
  g_array_set_size (entry->ports, n);
}

static gboolean
entry_has_port (const Entry *entry, guint16 port)
{
  return bsearch (&port, entry->ports->data, entry->ports->len, sizeof (guint16),
                  compare_ports) != NULL;
}

/* Writes @name lowercased, without one trailing dot, to @out (at least
 * NAME_MAX_LEN + 1 bytes) when it is a host name: labels of 1 to 63 ASCII
 * letters, digits, '-' or '_', at most 253 characters, and a last label that
 * is neither all digits nor "0x..." (those read as an IPv4 address). */
static gboolean
normalize_name (const char *name, char *out)
{
  gsize len, i, label_len = 0, last_label = 0;
  gboolean all_digits = TRUE;

  if (name == NULL)
    return FALSE;
  len = strnlen (name, NAME_MAX_LEN + 2);
  if (len > 0 && name[len - 1] == '.')
    len--;
  if (len == 0 || len > NAME_MAX_LEN)
    return FALSE;
  for (i = 0; i < len; i++) {
    char c = g_ascii_tolower (name[i]);

    out[i] = c;
    if (c == '.') {
      if (label_len == 0)
        return FALSE;
      label_len = 0;
      last_label = i + 1;
      continue;
    }
    if (!g_ascii_isalnum (c) && c != '-' && c != '_')
      return FALSE;
    if (++label_len > LABEL_MAX_LEN)
      return FALSE;
  }
  if (label_len == 0)
    return FALSE;
  out[len] = '\0';
  for (i = last_label; i < len; i++)
    all_digits = all_digits && g_ascii_isdigit (out[i]);
  return !all_digits && !(len - last_label >= 2 && out[last_label] == '0' && out[last_label + 1] == 'x');
}

static gboolean
fail_rule (GError **error, const char *domain, const char *reason)
{
  g_autofree char *escaped = g_strescape (domain != NULL ? domain : "", NULL);

  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "invalid network rule for \"%s\": %s",
               escaped, reason);
  return FALSE;
}

/* The entry @rule's domain folds into; NULL with @error when the domain is
 * not one a rule may have (it must already be in normal form). */
static Entry *
entry_for_rule (BoxEgressPolicy *self, const BoxRule *rule, GError **error)
{
  const char *domain = rule->domain;
  char normal[NAME_MAX_LEN + 1];
  GHashTable *table;
  Entry *entry;

  if (domain == NULL) {
    fail_rule (error, "", "a domain is required");
    return NULL;
  }
  if (strcmp (domain, "*") == 0) {
    if (self->star == NULL)
      self->star = entry_new ();
    return self->star;
  }
  table = g_str_has_prefix (domain, "*.") ? self->suffix : self->exact;
  if (table == self->suffix)
    domain += 2;
  if (!normalize_name (domain, normal) || strcmp (normal, domain) != 0) {
    fail_rule (error, rule->domain,
               "the domain must be a lowercase host name, \"*.<name>\" or \"*\"");
    return NULL;
  }
  entry = g_hash_table_lookup (table, domain);
  if (entry == NULL) {
    entry = entry_new ();
    g_hash_table_insert (table, g_strdup (domain), entry);
  }
  return entry;
}

static gboolean
add_rule (BoxEgressPolicy *self, const BoxRule *rule, GError **error)
{
  static const guint16 default_ports[] = { 80, 443 };
  Entry *entry;
  guint i;

  if (rule->domain != NULL && !rule->allow && rule->n_ports > 0)
    return fail_rule (error, rule->domain, "a deny rule takes no ports (it covers every port)");
  entry = entry_for_rule (self, rule, error);
  if (entry == NULL)
    return FALSE;
  if (!rule->allow) {
    entry->deny = TRUE;
    return TRUE;
  }
  if (rule->n_ports == 0) {
    g_array_append_vals (entry->ports, default_ports, G_N_ELEMENTS (default_ports));
    return TRUE;
  }
  for (i = 0; i < rule->n_ports; i++) {
    if (rule->ports == NULL || rule->ports[i] == 0)
      return fail_rule (error, rule->domain, "ports must be 1 to 65535");
  }
  g_array_append_vals (entry->ports, rule->ports, rule->n_ports);
  return TRUE;
}

static gboolean
add_rules (BoxEgressPolicy *self, GPtrArray *rules, GPtrArray *defaults, GError **error)
{
  guint i, j;

  for (i = 0; i < rules->len; i++) {
    const BoxRule *rule = g_ptr_array_index (rules, i);

    if (rule == NULL)
      return fail_rule (error, "", "empty");
    if (rule->include == NULL) {
      self->n_rules++;
      if (!add_rule (self, rule, error))
        return FALSE;
      continue;
    }
    if (strcmp (rule->include, "defaults") != 0 || rule->domain != NULL || rule->n_ports > 0)
      return fail_rule (error, "", "an include entry is {\"include\": \"defaults\"} alone");
    if (defaults == NULL)
      return fail_rule (error, "", "include: defaults, and no defaults were given");
    for (j = 0; j < defaults->len; j++) {
      const BoxRule *def = g_ptr_array_index (defaults, j);

      if (def == NULL || def->include != NULL)
        return fail_rule (error, "", "the defaults cannot include anything");
      self->n_rules++;
      if (!add_rule (self, def, error))
        return FALSE;
    }
  }
  if (self->n_rules > BOX_EGRESS_POLICY_MAX_RULES) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "too many network rules: %u counting defaults expanded, at most %d",
                 self->n_rules, BOX_EGRESS_POLICY_MAX_RULES);
    return FALSE;
  }
  return TRUE;
}

BoxEgressPolicy *
box_egress_policy_new (GPtrArray *rules, GPtrArray *defaults, GError **error)
{
  g_autoptr(BoxEgressPolicy) self = g_atomic_rc_box_new0 (BoxEgressPolicy);
  GHashTableIter iter;
  gpointer value;

  g_return_val_if_fail (error == NULL || *error == NULL, NULL);
  self->exact = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) entry_free);
  self->suffix = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) entry_free);
  self->restricted = rules != NULL && rules->len > 0;
  if (!self->restricted)
    return g_steal_pointer (&self);
  if (!add_rules (self, rules, defaults, error))
    return NULL;
  g_hash_table_iter_init (&iter, self->exact);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    entry_compile (value);
  g_hash_table_iter_init (&iter, self->suffix);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    entry_compile (value);
  if (self->star != NULL)
    entry_compile (self->star);
  return g_steal_pointer (&self);
}

BoxEgressPolicy *
box_egress_policy_ref (BoxEgressPolicy *policy)
{
  g_return_val_if_fail (policy != NULL, NULL);
  return g_atomic_rc_box_acquire (policy);
}

static void
policy_clear (BoxEgressPolicy *policy)
{
  g_hash_table_unref (policy->exact);
  g_hash_table_unref (policy->suffix);
  entry_free (policy->star);
}

void
box_egress_policy_unref (BoxEgressPolicy *policy)
{
  if (policy != NULL)
    g_atomic_rc_box_release_full (policy, (GDestroyNotify) policy_clear);
}

gboolean
box_egress_policy_is_restricted (BoxEgressPolicy *policy)
{
  g_return_val_if_fail (policy != NULL, TRUE);
  return policy->restricted;
}

guint
box_egress_policy_get_n_rules (BoxEgressPolicy *policy)
{
  g_return_val_if_fail (policy != NULL, 0);
  return policy->n_rules;
}

typedef enum { PASS, ALLOW, DENY } Verdict;

/* @port 0: any port (resolves()); an entry with an allow covers some. */
static Verdict
entry_verdict (const Entry *entry, guint16 port)
{
  if (entry == NULL)
    return PASS;
  if (entry->deny)
    return DENY;
  if (entry->ports->len > 0 && (port == 0 || entry_has_port (entry, port)))
    return ALLOW;
  return PASS;
}

static gboolean
lookup (BoxEgressPolicy *self, const char *name, guint16 port)
{
  char normal[NAME_MAX_LEN + 1];
  Verdict verdict;
  const char *dot;

  if (!normalize_name (name, normal))
    return FALSE;
  verdict = entry_verdict (g_hash_table_lookup (self->exact, normal), port);
  for (dot = strchr (normal, '.'); verdict == PASS && dot != NULL; dot = strchr (dot + 1, '.'))
    verdict = entry_verdict (g_hash_table_lookup (self->suffix, dot + 1), port);
  if (verdict == PASS)
    verdict = entry_verdict (self->star, port);
  return verdict == ALLOW;
}

gboolean
box_egress_policy_allows (BoxEgressPolicy *policy, const char *name, guint16 port)
{
  g_return_val_if_fail (policy != NULL, FALSE);
  if (!policy->restricted)
    return TRUE;
  if (port == 0)
    return FALSE;
  return lookup (policy, name, port);
}

gboolean
box_egress_policy_resolves (BoxEgressPolicy *policy, const char *name)
{
  g_return_val_if_fail (policy != NULL, FALSE);
  if (!policy->restricted)
    return TRUE;
  return lookup (policy, name, 0);
}

static void
add_candidates (GArray *out, const Entry *entry)
{
  if (entry != NULL)
    g_array_append_vals (out, entry->ports->data, entry->ports->len);
}

GArray *
box_egress_policy_get_ports (BoxEgressPolicy *policy, const char *name)
{
  char normal[NAME_MAX_LEN + 1];
  g_autoptr(GArray) candidates = g_array_new (FALSE, FALSE, sizeof (guint16));
  GArray *ports = g_array_new (FALSE, FALSE, sizeof (guint16));
  const char *dot;
  guint i;

  g_return_val_if_fail (policy != NULL, ports);
  if (!policy->restricted || !normalize_name (name, normal))
    return ports;
  /* Only a port some rule on the way names can be allowed; the lookup
   * then decides each, so the answer is exactly allows() port by port. */
  add_candidates (candidates, g_hash_table_lookup (policy->exact, normal));
  for (dot = strchr (normal, '.'); dot != NULL; dot = strchr (dot + 1, '.'))
    add_candidates (candidates, g_hash_table_lookup (policy->suffix, dot + 1));
  add_candidates (candidates, policy->star);
  g_array_sort (candidates, compare_ports);
  for (i = 0; i < candidates->len; i++) {
    guint16 port = g_array_index (candidates, guint16, i);

    if (i > 0 && g_array_index (candidates, guint16, i - 1) == port)
      continue;
    if (lookup (policy, normal, port))
      g_array_append_val (ports, port);
  }
  return ports;
}
