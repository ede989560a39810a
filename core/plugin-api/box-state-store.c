/* box-state-store.c: per-ID JSON state files; see box-state-store.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "box-error.h"
#include "box-plugin-context.h"
#include "box-state-store.h"

struct _BoxStateStore {
  GObject  parent_instance;
  char    *dir;
};

G_DEFINE_FINAL_TYPE (BoxStateStore, box_state_store, G_TYPE_OBJECT)

static void
box_state_store_finalize (GObject *object)
{
  g_free (BOX_STATE_STORE (object)->dir);
  G_OBJECT_CLASS (box_state_store_parent_class)->finalize (object);
}

static void
box_state_store_class_init (BoxStateStoreClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = box_state_store_finalize;
}

static void
box_state_store_init (BoxStateStore *self)
{}

BoxStateStore *
box_state_store_new (const char *dir)
{
  BoxStateStore *self;

  g_return_val_if_fail (dir != NULL, NULL);
  self = g_object_new (BOX_TYPE_STATE_STORE, NULL);
  self->dir = g_strdup (dir);
  return self;
}

const char *
box_state_store_get_dir (BoxStateStore *self)
{
  g_return_val_if_fail (BOX_IS_STATE_STORE (self), NULL);
  return self->dir;
}

static char *
state_path (BoxStateStore *self, const char *id)
{
  g_autofree char *basename = g_strconcat (id, ".json", NULL);

  return g_build_filename (self->dir, basename, NULL);
}

/* A rename or unlink is durable once its directory is synced. */
static void
sync_dir (const char *dir)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd >= 0) {
    fsync (fd);
    close (fd);
  }
}

static gboolean
check_id (const char *id, GError **error)
{
  if (box_sandbox_id_is_valid (id))
    return TRUE;
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "\"%s\" is not a valid ID for a state file",
               id != NULL ? id : "(null)");
  return FALSE;
}

gboolean
box_state_store_save (BoxStateStore *self, const char *id, JsonNode *node, GError **error)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autofree char *path = NULL;
  g_autofree char *data = NULL;
  g_autoptr(GError) local_error = NULL;
  gsize len = 0;

  g_return_val_if_fail (BOX_IS_STATE_STORE (self), FALSE);
  g_return_val_if_fail (node != NULL, FALSE);
  if (!check_id (id, error))
    return FALSE;

  if (g_mkdir_with_parents (self->dir, 0700) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot create %s: %s", self->dir,
                 g_strerror (saved_errno));
    return FALSE;
  }
  path = state_path (self, id);
  json_generator_set_root (generator, node);
  data = json_generator_to_data (generator, &len);
  /* CONSISTENT: a temporary file, fsync, rename over the old one */
  if (!g_file_set_contents_full (path, data, (gssize) len, G_FILE_SET_CONTENTS_CONSISTENT, 0600,
                                 &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot save the state of %s: %s", id,
                 local_error->message);
    return FALSE;
  }
  sync_dir (self->dir);
  return TRUE;
}

JsonNode *
box_state_store_load (BoxStateStore *self, const char *id, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *path = NULL;
  g_autoptr(GError) local_error = NULL;

  g_return_val_if_fail (BOX_IS_STATE_STORE (self), NULL);
  if (!check_id (id, error))
    return NULL;

  path = state_path (self, id);
  if (!json_parser_load_from_mapped_file (parser, path, &local_error)) {
    if (g_error_matches (local_error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
      g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "%s has no state", id);
    else
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s: %s", path, local_error->message);
    return NULL;
  }
  if (json_parser_get_root (parser) == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s: empty", path);
    return NULL;
  }
  return json_parser_steal_root (parser);
}

static gint
compare_ids (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const char *const *) a, *(const char *const *) b);
}

char **
box_state_store_list (BoxStateStore *self)
{
  g_autoptr(GPtrArray) ids = g_ptr_array_new ();
  g_autoptr(GDir) dir = NULL;
  const char *name;

  g_return_val_if_fail (BOX_IS_STATE_STORE (self), NULL);

  dir = g_dir_open (self->dir, 0, NULL);
  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL) {
    g_autofree char *id = NULL;

    if (!g_str_has_suffix (name, ".json"))
      continue;
    id = g_strndup (name, strlen (name) - strlen (".json"));
    if (box_sandbox_id_is_valid (id))
      g_ptr_array_add (ids, g_steal_pointer (&id));
  }
  g_ptr_array_sort (ids, compare_ids);
  g_ptr_array_add (ids, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&ids), FALSE);
}

gboolean
box_state_store_remove (BoxStateStore *self, const char *id, GError **error)
{
  g_autofree char *path = NULL;

  g_return_val_if_fail (BOX_IS_STATE_STORE (self), FALSE);
  if (!check_id (id, error))
    return FALSE;

  path = state_path (self, id);
  if (g_unlink (path) != 0 && errno != ENOENT) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot remove %s: %s", path,
                 g_strerror (saved_errno));
    return FALSE;
  }
  sync_dir (self->dir);
  return TRUE;
}

gboolean
box_state_store_move (BoxStateStore *self, const char *old_id, const char *new_id, GError **error)
{
  g_autofree char *from = NULL;
  g_autofree char *to = NULL;

  g_return_val_if_fail (BOX_IS_STATE_STORE (self), FALSE);
  if (!check_id (old_id, error) || !check_id (new_id, error))
    return FALSE;

  from = state_path (self, old_id);
  to = state_path (self, new_id);
  if (g_rename (from, to) != 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, saved_errno == ENOENT ? BOX_ERROR_NOT_FOUND : BOX_ERROR_INTERNAL,
                 "cannot move the state of %s to %s: %s", old_id, new_id, g_strerror (saved_errno));
    return FALSE;
  }
  sync_dir (self->dir);
  return TRUE;
}
