/* box-edge-certs.c: certificates by server name; see box-edge-certs.h. */
#include "config.h"

#include "box-edge-certs.h"

#include <errno.h>
#include <string.h>

#include "box-edge-cert.h"
#include "box-error.h"

/* Changes come in bursts (a certificate, then its key): reload once they
 * settle. */
#define RELOAD_DELAY_MS 300

struct _BoxEdgeCerts {
  GObject          parent_instance;
  char            *data_dir;
  char            *sandbox_domain;
  char            *cert_file;
  char            *key_file;
  char            *domains_dir;
  GTlsCertificate *fallback;
  GHashTable      *files;     /* domain -> GTlsCertificate, from domains_dir */
  GHashTable      *runtime;   /* name -> GTlsCertificate, box_edge_certs_set() */
  GPtrArray       *monitors;
  guint            reload_timer;
};

G_DEFINE_FINAL_TYPE (BoxEdgeCerts, box_edge_certs, G_TYPE_OBJECT)

static void
box_edge_certs_finalize (GObject *object)
{
  BoxEdgeCerts *self = BOX_EDGE_CERTS (object);

  if (self->reload_timer != 0)
    g_source_remove (self->reload_timer);
  g_ptr_array_unref (self->monitors);
  g_hash_table_unref (self->files);
  g_hash_table_unref (self->runtime);
  g_clear_object (&self->fallback);
  g_free (self->data_dir);
  g_free (self->sandbox_domain);
  g_free (self->cert_file);
  g_free (self->key_file);
  g_free (self->domains_dir);
  G_OBJECT_CLASS (box_edge_certs_parent_class)->finalize (object);
}

static void
box_edge_certs_class_init (BoxEdgeCertsClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = box_edge_certs_finalize;
}

static void
box_edge_certs_init (BoxEdgeCerts *self)
{
  self->files = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->runtime = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->monitors = g_ptr_array_new_with_free_func (g_object_unref);
}

/* Reads <domains_dir>/<domain>.pem with <domain>-key.pem into a new table,
 * keeping the old certificate of a domain whose new pair is refused. */
static void
load_domains (BoxEdgeCerts *self)
{
  g_autoptr(GHashTable) files = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                       g_object_unref);
  g_autoptr(GDir) dir = g_dir_open (self->domains_dir, 0, NULL);
  const char *entry;

  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    g_autofree char *domain = NULL;
    g_autofree char *cert_path = NULL;
    g_autofree char *key_path = NULL;
    g_autofree char *key_name = NULL;
    g_autoptr(GTlsCertificate) cert = NULL;
    g_autoptr(GError) error = NULL;
    GTlsCertificate *old;

    if (!g_str_has_suffix (entry, ".pem") || g_str_has_suffix (entry, "-key.pem"))
      continue;
    domain = g_ascii_strdown (entry, (gssize) strlen (entry) - 4);
    key_name = g_strdup_printf ("%s-key.pem", domain);
    cert_path = g_build_filename (self->domains_dir, entry, NULL);
    key_path = g_build_filename (self->domains_dir, key_name, NULL);
    cert = box_edge_cert_load_pair (cert_path, key_path, &error);
    old = g_hash_table_lookup (self->files, domain);
    if (cert == NULL) {
      g_warning ("edge: certificate for %s refused%s: %s", domain,
                 old != NULL ? ", the old one kept" : "", error->message);
      if (old != NULL)
        g_hash_table_insert (files, g_strdup (domain), g_object_ref (old));
      continue;
    }
    if (old != NULL && !g_tls_certificate_is_same (old, cert))
      g_message ("edge: certificate for %s reloaded", domain);
    g_hash_table_insert (files, g_steal_pointer (&domain), g_steal_pointer (&cert));
  }
  g_hash_table_unref (self->files);
  self->files = g_steal_pointer (&files);
}

BoxEdgeCerts *
box_edge_certs_new (const char *data_dir, const char *sandbox_domain, const char *cert_file,
                    const char *key_file, GError **error)
{
  g_autoptr(BoxEdgeCerts) self = g_object_new (BOX_TYPE_EDGE_CERTS, NULL);

  self->data_dir = g_strdup (data_dir);
  self->sandbox_domain = g_strdup (sandbox_domain);
  self->cert_file = g_strdup (cert_file);
  self->key_file = g_strdup (key_file);
  self->domains_dir = g_build_filename (data_dir, "tls", "domains", NULL);
  self->fallback = box_edge_cert_load (data_dir, sandbox_domain, cert_file, key_file, error);
  if (self->fallback == NULL)
    return NULL;
  if (g_mkdir_with_parents (self->domains_dir, 0755) != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot make %s: %s", self->domains_dir,
                 g_strerror (errno));
    return NULL;
  }
  load_domains (self);
  return g_steal_pointer (&self);
}

/* The certificate in @table for @name or the nearest domain above it. */
static GTlsCertificate *
match (GHashTable *table, const char *name)
{
  for (const char *p = name; p != NULL; p = strchr (p, '.') != NULL ? strchr (p, '.') + 1 : NULL) {
    GTlsCertificate *cert = g_hash_table_lookup (table, p);

    if (cert != NULL)
      return cert;
  }
  return NULL;
}

GTlsCertificate *
box_edge_certs_lookup (BoxEdgeCerts *self, const char *server_name)
{
  GTlsCertificate *cert = NULL;

  g_return_val_if_fail (BOX_IS_EDGE_CERTS (self), NULL);
  if (server_name != NULL && server_name[0] != '\0') {
    /* box-edge-sni.c gives the name in lower case */
    cert = match (self->files, server_name);
    if (cert == NULL)
      cert = g_hash_table_lookup (self->runtime, server_name);
    if (cert == NULL)
      cert = match (self->runtime, server_name);
  }
  return g_object_ref (cert != NULL ? cert : self->fallback);
}

gboolean
box_edge_certs_covers (BoxEdgeCerts *self, const char *server_name)
{
  g_autofree char *name = NULL;

  g_return_val_if_fail (BOX_IS_EDGE_CERTS (self), FALSE);
  if (server_name == NULL || server_name[0] == '\0')
    return FALSE;
  name = g_ascii_strdown (server_name, -1);
  return match (self->files, name) != NULL || g_hash_table_contains (self->runtime, name);
}

void
box_edge_certs_set (BoxEdgeCerts *self, const char *name, GTlsCertificate *certificate)
{
  g_return_if_fail (BOX_IS_EDGE_CERTS (self));
  if (certificate == NULL) {
    g_autofree char *lower = g_ascii_strdown (name, -1);

    g_hash_table_remove (self->runtime, lower);
  } else
    g_hash_table_insert (self->runtime, g_ascii_strdown (name, -1), g_object_ref (certificate));
}

void
box_edge_certs_reload (BoxEdgeCerts *self)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GTlsCertificate) cert = NULL;

  g_return_if_fail (BOX_IS_EDGE_CERTS (self));
  cert = box_edge_cert_load (self->data_dir, self->sandbox_domain, self->cert_file,
                             self->key_file, &error);
  if (cert == NULL) {
    g_warning ("edge: certificate for %s refused, the old one kept: %s", self->sandbox_domain,
               error->message);
  } else if (!g_tls_certificate_is_same (cert, self->fallback)) {
    g_message ("edge: certificate for %s reloaded", self->sandbox_domain);
    g_set_object (&self->fallback, cert);
  }
  load_domains (self);
}

static gboolean
reload_later (gpointer user_data)
{
  BoxEdgeCerts *self = user_data;

  self->reload_timer = 0;
  box_edge_certs_reload (self);
  return G_SOURCE_REMOVE;
}

static void
changed (GFileMonitor *monitor, GFile *file, GFile *other, GFileMonitorEvent event,
         gpointer user_data)
{
  BoxEdgeCerts *self = user_data;

  if (event == G_FILE_MONITOR_EVENT_ATTRIBUTE_CHANGED)
    return;
  if (self->reload_timer != 0)
    g_source_remove (self->reload_timer);
  self->reload_timer = g_timeout_add (RELOAD_DELAY_MS, reload_later, self);
}

static void
watch (BoxEdgeCerts *self, const char *path, gboolean directory)
{
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GError) error = NULL;
  GFileMonitor *monitor;

  monitor = directory ? g_file_monitor_directory (file, G_FILE_MONITOR_WATCH_MOVES, NULL, &error)
                      : g_file_monitor_file (file, G_FILE_MONITOR_WATCH_MOVES, NULL, &error);
  if (monitor == NULL) {
    g_warning ("edge: cannot watch %s (reload with SIGHUP): %s", path, error->message);
    return;
  }
  g_signal_connect_object (monitor, "changed", G_CALLBACK (changed), self, 0);
  g_ptr_array_add (self->monitors, monitor);
}

void
box_edge_certs_watch (BoxEdgeCerts *self)
{
  g_return_if_fail (BOX_IS_EDGE_CERTS (self));
  if (self->monitors->len > 0)
    return;
  if (self->cert_file != NULL) {
    watch (self, self->cert_file, FALSE);
    watch (self, self->key_file, FALSE);
  }
  watch (self, self->domains_dir, TRUE);
}
