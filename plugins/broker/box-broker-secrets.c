/* box-broker-secrets.c: the table sandbox -> secrets the broker puts in.
 *
 * The values live here only, in memory zeroed before it is freed; they are
 * never logged.  Rules hand a value on by reference (a GBytes of that
 * memory), so a connection using one keeps it until it moves to the next
 * rules.
 */
#include "config.h"

#include <gio/gio.h>
#include <gnutls/gnutls.h>
#include <string.h>

#include "box-broker-http.h"
#include "box-broker-secrets.h"

typedef struct {
  char  **hosts;
  char   *placeholder;
  char   *inject_header;
  char   *inject_format;
  GBytes *value;   /* zeroed when freed */
} Entry;

struct _BoxBrokerSecrets {
  GMutex      lock;
  GHashTable *sandboxes;   /* id -> GPtrArray of Entry* */
  guint       generation;  /* atomic */
};

static void
entry_free (Entry *entry)
{
  g_strfreev (entry->hosts);
  g_free (entry->placeholder);
  g_free (entry->inject_header);
  g_free (entry->inject_format);
  g_bytes_unref (entry->value);
  g_free (entry);
}

typedef struct {
  gsize  len;
  guint8 data[];
} Zeroed;

static void
zero_and_free (gpointer data)
{
  Zeroed *zeroed = data;

  gnutls_memset (zeroed->data, 0, zeroed->len);
  g_free (zeroed);
}

static GBytes *
copy_value (GBytes *value)
{
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (value, &len);
  Zeroed *zeroed = g_malloc (sizeof (Zeroed) + len + 1);

  zeroed->len = len;
  if (len > 0)
    memcpy (zeroed->data, data, len);
  return g_bytes_new_with_free_func (zeroed->data, len, zero_and_free, zeroed);
}

BoxBrokerSecrets *
box_broker_secrets_new (void)
{
  BoxBrokerSecrets *secrets = g_new0 (BoxBrokerSecrets, 1);

  g_mutex_init (&secrets->lock);
  secrets->sandboxes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                              (GDestroyNotify) g_ptr_array_unref);
  return secrets;
}

void
box_broker_secrets_free (BoxBrokerSecrets *secrets)
{
  if (secrets == NULL)
    return;
  g_hash_table_unref (secrets->sandboxes);
  g_mutex_clear (&secrets->lock);
  g_free (secrets);
}

void
box_broker_secrets_set (BoxBrokerSecrets *secrets, const char *sandbox_id, GPtrArray *brokered)
{
  GPtrArray *entries = g_ptr_array_new_with_free_func ((GDestroyNotify) entry_free);
  g_autoptr(GMutexLocker) locker = NULL;

  for (guint i = 0; brokered != NULL && i < brokered->len; i++) {
    const BoxBrokeredSecret *one = g_ptr_array_index (brokered, i);
    Entry *entry;

    if (one == NULL || one->secret == NULL || one->value == NULL)
      continue;
    entry = g_new0 (Entry, 1);
    entry->hosts = g_strdupv (one->secret->hosts);
    entry->placeholder = g_strdup (one->secret->placeholder);
    entry->inject_header = g_strdup (one->secret->inject_header);
    entry->inject_format = g_strdup (one->secret->inject_format);
    entry->value = copy_value (one->value);
    g_ptr_array_add (entries, entry);
  }
  locker = g_mutex_locker_new (&secrets->lock);
  if (entries->len == 0) {
    g_hash_table_remove (secrets->sandboxes, sandbox_id);
    g_ptr_array_unref (entries);
  } else {
    g_hash_table_replace (secrets->sandboxes, g_strdup (sandbox_id), entries);
  }
  g_atomic_int_inc (&secrets->generation);
}

guint
box_broker_secrets_generation (BoxBrokerSecrets *secrets)
{
  return (guint) g_atomic_int_get (&secrets->generation);
}

static gboolean
names_equal (const char *a, gsize a_len, const char *host)
{
  g_autofree char *name = g_strndup (a, a_len);
  g_autoptr(GInetAddress) ip_a = g_inet_address_new_from_string (name);
  g_autoptr(GInetAddress) ip_b = NULL;

  if (ip_a != NULL) {
    ip_b = g_inet_address_new_from_string (host);
    return ip_b != NULL && g_inet_address_equal (ip_a, ip_b);
  }
  return g_ascii_strcasecmp (name, host) == 0;
}

gboolean
box_broker_host_matches (const char *entry, const char *host, char **path_prefix)
{
  const char *slash = strchr (entry, '/');
  gsize name_len = slash != NULL ? (gsize) (slash - entry) : strlen (entry);
  gboolean match;

  if (path_prefix != NULL)
    *path_prefix = NULL;
  if (host == NULL || host[0] == '\0')
    return FALSE;
  if (name_len > 2 && entry[0] == '*' && entry[1] == '.') {
    /* any name under the suffix, not the suffix itself */
    gsize suffix_len = name_len - 1;   /* ".suffix" */
    gsize host_len = strlen (host);
    match = host_len > suffix_len &&
            g_ascii_strncasecmp (host + host_len - suffix_len, entry + 1, suffix_len) == 0;
  } else {
    match = names_equal (entry, name_len, host);
  }
  if (match && slash != NULL && path_prefix != NULL)
    *path_prefix = g_strdup (slash);
  return match;
}

gboolean
box_broker_secrets_wants (BoxBrokerSecrets *secrets, const char *sandbox_id, const char *host)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&secrets->lock);
  GPtrArray *entries = g_hash_table_lookup (secrets->sandboxes, sandbox_id);

  for (guint i = 0; entries != NULL && i < entries->len; i++) {
    const Entry *entry = g_ptr_array_index (entries, i);
    for (guint j = 0; entry->hosts != NULL && entry->hosts[j] != NULL; j++) {
      if (box_broker_host_matches (entry->hosts[j], host, NULL))
        return TRUE;
    }
  }
  return FALSE;
}

static BoxBrokerHttpRule *
rule_new (const Entry *entry, char *path_prefix)
{
  BoxBrokerHttpRule *rule = g_new0 (BoxBrokerHttpRule, 1);

  rule->placeholder = g_strdup (entry->placeholder);
  rule->value = g_bytes_ref (entry->value);
  rule->inject_header = g_strdup (entry->inject_header);
  rule->inject_format = g_strdup (entry->inject_format);
  rule->path_prefix = path_prefix;
  return rule;
}

/* One rule per secret when a host entry without a path names @host (it
 * applies to every path), else one per matching entry with a path. */
GPtrArray *
box_broker_secrets_rules (BoxBrokerSecrets *secrets, const char *sandbox_id, const char *host)
{
  GPtrArray *rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_broker_http_rule_free);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&secrets->lock);
  GPtrArray *entries = g_hash_table_lookup (secrets->sandboxes, sandbox_id);

  for (guint i = 0; entries != NULL && i < entries->len; i++) {
    const Entry *entry = g_ptr_array_index (entries, i);
    g_autoptr(GPtrArray) with_path = g_ptr_array_new_with_free_func (g_free);
    gboolean every_path = FALSE;

    for (guint j = 0; entry->hosts != NULL && entry->hosts[j] != NULL; j++) {
      char *prefix = NULL;
      if (!box_broker_host_matches (entry->hosts[j], host, &prefix))
        continue;
      if (prefix == NULL)
        every_path = TRUE;
      else
        g_ptr_array_add (with_path, prefix);
    }
    if (every_path) {
      g_ptr_array_add (rules, rule_new (entry, NULL));
      continue;
    }
    for (guint j = 0; j < with_path->len; j++)
      g_ptr_array_add (rules, rule_new (entry, g_strdup (g_ptr_array_index (with_path, j))));
  }
  return rules;
}
