/* box-cp.c: `box cp`, files and directories in and out of a sandbox.
 *
 *   box cp ./dir  SANDBOX:/path     a tar made here, PUT fs/tar (chunked)
 *   box cp SANDBOX:/path ./dir      GET fs/tar, extracted here
 *   box cp ./file SANDBOX:/path     PUT fs/file (atomic in the sandbox)
 *   box cp SANDBOX:/file ./file     GET fs/file into a temporary file, renamed
 *   "-" as the local side: a tar on stdin or stdout
 *
 * Names follow `cp -r`/`docker cp`: into an existing directory a source
 * keeps its name; otherwise it takes the destination's; SRC/. copies what
 * is in SRC.  Tars are streamed both ways (the writer runs in a thread
 * feeding a pipe), never held whole.  Extraction uses libarchive's secure
 * flags (no "..", no absolute names, nothing through a symlink) relative to
 * the destination.  On a terminal a progress line shows bytes and rate.
 */
#define _GNU_SOURCE   /* nftw() */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <archive.h>
#include <archive_entry.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <glib-unix.h>
#include <gio/gunixinputstream.h>

#include "box-cli.h"

#define CHUNK (256 * 1024)

typedef struct {
  BoxCli     *cli;
  const char *user;
  gboolean    progress;
  /* progress */
  guint64     done;
  guint64     total;      /* 0: unknown */
  gint64      started;
  gint64      drawn_at;
  gboolean    drawn;
} Copy;

/* ---- progress ---------------------------------------------------------- */

static void
progress_draw (Copy *copy, gboolean final)
{
  gint64 now = g_get_monotonic_time ();
  double seconds = MAX ((double) (now - copy->started) / G_USEC_PER_SEC, 0.001);
  g_autofree char *done = box_cli_format_size (copy->done);
  g_autofree char *rate = box_cli_format_size ((guint64) ((double) copy->done / seconds));

  if (!copy->progress || (!final && now - copy->drawn_at < 100 * 1000))
    return;
  copy->drawn_at = now;
  copy->drawn = TRUE;
  if (copy->total > 0) {
    g_autofree char *total = box_cli_format_size (copy->total);
    guint percent = (guint) MIN (copy->done * 100 / copy->total, final ? 100 : 99);
    char bar[21];

    for (guint i = 0; i < 20; i++)
      bar[i] = i < percent / 5 ? '#' : '-';
    bar[20] = '\0';
    g_printerr ("\r%s / %s  %3u%% [%s]  %s/s\033[K", done, total, percent, bar, rate);
  } else {
    g_printerr ("\r%s  %s/s\033[K", done, rate);
  }
  if (final)
    g_printerr (_("  in %.1f s\n"), seconds);
}

static void
progress_add (Copy *copy, gsize n)
{
  copy->done += n;
  progress_draw (copy, FALSE);
}

static void
on_wrote_body_data (SoupMessage *msg, guint chunk_size, gpointer user_data)
{
  progress_add (user_data, chunk_size);
}

/* ---- the sandbox's side ------------------------------------------------ */

/* "name:/path" -> name, path; NULL for a local path. */
static gboolean
split_remote (const char *spec, char **sandbox, char **path)
{
  const char *colon = strchr (spec, ':');

  if (colon == NULL || colon == spec || spec[0] == '/' || spec[0] == '.')
    return FALSE;
  for (const char *p = spec; p < colon; p++) {
    if (!g_ascii_isalnum (*p) && *p != '-')
      return FALSE;
  }
  *sandbox = g_strndup (spec, (gsize) (colon - spec));
  *path = g_strdup (colon + 1);
  return TRUE;
}

static char *
file_query (Copy *copy, const char *path)
{
  g_autoptr(GString) query = g_string_new (NULL);

  box_cli_query_add (query, "path", path);
  if (copy->user != NULL)
    box_cli_query_add (query, "user", copy->user);
  return g_string_free (g_steal_pointer (&query), FALSE);
}

/* The Stat of a path, NULL with no error when it does not exist. */
static JsonNode *
remote_stat (Copy *copy, const char *sandbox, const char *path, GError **error)
{
  g_autofree char *api = box_cli_sandbox_path (sandbox, "/fs/stat");
  g_autofree char *query = file_query (copy, path);
  g_autoptr(GError) local_error = NULL;
  JsonNode *stat = box_cli_call (copy->cli, "GET", api, query, NULL, &local_error);

  if (stat == NULL && !g_error_matches (local_error, BOX_ERROR, BOX_ERROR_NOT_FOUND))
    g_propagate_error (error, g_steal_pointer (&local_error));
  return stat;
}

static const char *
stat_type (JsonNode *stat)
{
  if (stat == NULL || !JSON_NODE_HOLDS_OBJECT (stat))
    return NULL;
  return box_cli_json_string (json_node_get_object (stat), "type");
}


/* PUT @body (of @size bytes, -1: chunked) to @route. */
static gboolean
put_stream (Copy *copy, const char *route, const char *query, const char *type,
            GInputStream *body, goffset size, GError **error)
{
  g_autoptr(SoupMessage) msg = box_cli_message_new (copy->cli, "PUT", route, query);
  g_autoptr(GInputStream) answer = NULL;

  soup_message_set_request_body (msg, type, body, size);
  g_signal_connect (msg, "wrote-body-data", G_CALLBACK (on_wrote_body_data), copy);
  answer = box_cli_send_stream (copy->cli, msg, error);
  if (answer == NULL)
    return FALSE;
  g_input_stream_skip (answer, G_MAXSSIZE, NULL, NULL);
  return TRUE;
}

/* ---- tars made here ---------------------------------------------------- */

typedef struct {
  char   *root;    /* the local directory */
  int     fd;      /* the pipe's write end */
  GError *error;
} TarWriter;

static gboolean
tar_write_entries (struct archive *out, const char *root, GError **error)
{
  struct archive *disk = archive_read_disk_new ();
  struct archive_entry *entry = archive_entry_new ();
  gsize root_len = strlen (root);
  gboolean ok = TRUE;
  int r;

  archive_read_disk_set_symlink_physical (disk);
  archive_read_disk_set_standard_lookup (disk);
  archive_read_disk_set_behavior (disk, ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
                                  ARCHIVE_READDISK_NO_FFLAGS | ARCHIVE_READDISK_NO_SPARSE);
  if (archive_read_disk_open (disk, root) != ARCHIVE_OK) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, "%s: %s", root,
                 archive_error_string (disk));
    ok = FALSE;
  }
  while (ok && (r = archive_read_next_header2 (disk, entry)) != ARCHIVE_EOF) {
    const char *path = archive_entry_pathname (entry);
    mode_t type = archive_entry_filetype (entry);
    const void *buffer;
    size_t size;
    la_int64_t offset;

    if (r < ARCHIVE_WARN) {
      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, "%s", archive_error_string (disk));
      ok = FALSE;
      break;
    }
    archive_read_disk_descend (disk);
    if (strcmp (path, root) == 0)
      continue;   /* the directory itself: the destination */
    if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
      continue;   /* sockets, FIFOs, devices: the sandbox would skip them anyway */
    archive_entry_set_pathname (entry, path + root_len + (root[root_len - 1] == '/' ? 0 : 1));
    archive_entry_set_uid (entry, 0);
    archive_entry_set_gid (entry, 0);
    archive_entry_set_uname (entry, NULL);
    archive_entry_set_gname (entry, NULL);
    archive_entry_set_hardlink (entry, NULL);   /* hard links go as separate files */
    if (archive_write_header (out, entry) != ARCHIVE_OK) {
      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, "%s", archive_error_string (out));
      ok = FALSE;
      break;
    }
    while (type == AE_IFREG &&
           (r = archive_read_data_block (disk, &buffer, &size, &offset)) == ARCHIVE_OK) {
      if (archive_write_data (out, buffer, size) < 0) {
        g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, "%s", archive_error_string (out));
        ok = FALSE;
        break;
      }
    }
    if (ok && type == AE_IFREG && r != ARCHIVE_EOF) {
      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, "%s: %s", path,
                   archive_error_string (disk));
      ok = FALSE;
    }
  }
  archive_entry_free (entry);
  archive_read_free (disk);
  return ok;
}

static gpointer
tar_writer_thread (gpointer data)
{
  TarWriter *writer = data;
  struct archive *out = archive_write_new ();

  archive_write_set_format_pax_restricted (out);
  archive_write_set_bytes_in_last_block (out, 1);
  if (archive_write_open_fd (out, writer->fd) != ARCHIVE_OK)
    g_set_error (&writer->error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, "%s", archive_error_string (out));
  else if (tar_write_entries (out, writer->root, &writer->error) && archive_write_close (out) != ARCHIVE_OK)
    g_set_error (&writer->error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, "%s", archive_error_string (out));
  archive_write_free (out);
  close (writer->fd);
  return NULL;
}

static guint64 tree_bytes;

static int
add_size (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  if (flag == FTW_F && S_ISREG (st->st_mode))
    tree_bytes += (guint64) st->st_size;
  return 0;
}

/* A local directory's contents into @route as a tar (made while sent). */
static gboolean
upload_tree (Copy *copy, const char *root, const char *sandbox, const char *path, GError **error)
{
  g_autofree char *route = box_cli_sandbox_path (sandbox, "/fs/tar");
  g_autofree char *query = file_query (copy, path);
  g_autoptr(GInputStream) pipe_in = NULL;
  TarWriter writer = { .root = (char *) root };
  GThread *thread;
  int fds[2];
  gboolean ok;

  tree_bytes = 0;
  nftw (root, add_size, 32, FTW_PHYS);
  copy->total = tree_bytes;
  if (!g_unix_open_pipe (fds, FD_CLOEXEC, error))
    return FALSE;
  writer.fd = fds[1];
  pipe_in = g_unix_input_stream_new (fds[0], TRUE);
  thread = g_thread_new ("box-tar", tar_writer_thread, &writer);
  ok = put_stream (copy, route, query, "application/x-tar", pipe_in, -1, error);
  /* an early answer leaves the writer blocked: closing the pipe ends it */
  g_input_stream_close (pipe_in, NULL, NULL);
  g_thread_join (thread);
  if (ok && writer.error != NULL) {
    g_propagate_error (error, writer.error);
    return FALSE;
  }
  g_clear_error (&writer.error);
  return ok;
}

/* ---- tars from the sandbox --------------------------------------------- */

typedef struct {
  Copy         *copy;
  GInputStream *in;
  guint8        buffer[CHUNK];
  GError       *error;
} TarReader;

static la_ssize_t
tar_read (struct archive *archive, void *data, const void **buffer)
{
  TarReader *reader = data;
  gssize n = g_input_stream_read (reader->in, reader->buffer, sizeof reader->buffer, NULL,
                                  reader->error == NULL ? &reader->error : NULL);

  if (n < 0)
    return -1;
  progress_add (reader->copy, (gsize) n);
  *buffer = reader->buffer;
  return n;
}

/* Extracts the tar read from @in into the current directory. */
static gboolean
extract_here (Copy *copy, GInputStream *in, GError **error)
{
  TarReader reader = { .copy = copy, .in = in };
  struct archive *archive = archive_read_new ();
  struct archive *disk = archive_write_disk_new ();
  struct archive_entry *entry;
  gboolean ok = TRUE;
  int r;

  archive_read_support_format_tar (archive);
  /* no ARCHIVE_EXTRACT_UNLINK: it would remove a symlink on the way
   * (yours, in the destination) where SECURE_SYMLINKS refuses the entry;
   * a file or symlink in the place of an entry is still replaced */
  archive_write_disk_set_options (disk, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                  ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                  ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                  ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
  if (archive_read_open (archive, &reader, NULL, tar_read, NULL) != ARCHIVE_OK)
    ok = FALSE;
  while (ok && (r = archive_read_next_header (archive, &entry)) != ARCHIVE_EOF) {
    const void *buffer;
    size_t size;
    la_int64_t offset;

    if (r < ARCHIVE_WARN) {
      ok = FALSE;
      break;
    }
    /* what a sandbox sends is not trusted: files, directories and links
     * only, and never set-user or set-group-ID (box may run as root) */
    if (archive_entry_hardlink (entry) == NULL && archive_entry_filetype (entry) != AE_IFREG &&
        archive_entry_filetype (entry) != AE_IFDIR && archive_entry_filetype (entry) != AE_IFLNK)
      continue;
    archive_entry_set_perm (entry, archive_entry_perm (entry) & 01777);
    if (archive_write_header (disk, entry) < ARCHIVE_WARN) {
      ok = FALSE;
      break;
    }
    while ((r = archive_read_data_block (archive, &buffer, &size, &offset)) == ARCHIVE_OK) {
      if (archive_write_data_block (disk, buffer, size, offset) < ARCHIVE_WARN) {
        ok = FALSE;
        break;
      }
    }
    if (ok && r != ARCHIVE_EOF)
      ok = FALSE;
    if (ok && archive_write_finish_entry (disk) < ARCHIVE_WARN)
      ok = FALSE;
  }
  if (!ok) {
    if (reader.error != NULL)
      g_propagate_error (error, box_cli_error_network (copy->cli->url, reader.error));
    else {
      const char *why = archive_error_string (disk);

      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, _("Cannot extract the tar: %s"),
                   why != NULL ? why : archive_error_string (archive) != NULL
                   ? archive_error_string (archive) : g_strerror (EIO));
    }
  }
  g_clear_error (&reader.error);
  archive_write_close (disk);
  archive_write_free (disk);
  archive_read_free (archive);
  return ok;
}

static gboolean
download_tree (Copy *copy, const char *sandbox, const char *path, const char *target,
               GError **error)
{
  g_autofree char *route = box_cli_sandbox_path (sandbox, "/fs/tar");
  g_autofree char *query = file_query (copy, path);
  g_autoptr(SoupMessage) msg = box_cli_message_new (copy->cli, "GET", route, query);
  g_autoptr(GInputStream) body = NULL;
  int saved_cwd;
  gboolean ok;

  if (g_mkdir_with_parents (target, 0755) < 0) {
    int saved_errno = errno;

    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, _("Cannot create %s: %s"), target,
                 g_strerror (saved_errno));
    return FALSE;
  }
  body = box_cli_send_stream (copy->cli, msg, error);
  if (body == NULL)
    return FALSE;
  /* names stay relative to the destination, so that the secure flags
   * check them and not the destination's own path */
  saved_cwd = open (".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (saved_cwd < 0 || chdir (target) < 0) {
    int saved_errno = errno;

    if (saved_cwd >= 0)
      close (saved_cwd);
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, _("Cannot enter %s: %s"), target,
                 g_strerror (saved_errno));
    return FALSE;
  }
  ok = extract_here (copy, body, error);
  if (ok) {
    /* libarchive stops at the archive's end: the answer's own end follows */
    g_autoptr(GError) read_error = NULL;
    guint8 rest[512];
    gssize n;

    while ((n = g_input_stream_read (body, rest, sizeof rest, NULL, &read_error)) > 0)
      ;
    if (n < 0) {
      g_propagate_error (error, box_cli_error_network (copy->cli->url, read_error));
      ok = FALSE;
    }
  }
  if (fchdir (saved_cwd) < 0)
    g_warning ("cannot go back to the working directory: %s", g_strerror (errno));
  close (saved_cwd);
  return ok;
}

/* ---- single files ------------------------------------------------------ */

static gboolean
upload_file (Copy *copy, const char *local, const struct stat *st, const char *sandbox,
             const char *path, GError **error)
{
  g_autofree char *route = box_cli_sandbox_path (sandbox, "/fs/file");
  g_autofree char *query = file_query (copy, path);
  g_autofree char *mode = g_strdup_printf ("%04o", (guint) (st->st_mode & 07777));
  g_autoptr(GString) full_query = g_string_new (query);
  g_autoptr(GFile) file = g_file_new_for_path (local);
  g_autoptr(GFileInputStream) in = g_file_read (file, NULL, error);

  if (in == NULL)
    return FALSE;
  box_cli_query_add (full_query, "mode", mode);
  copy->total = (guint64) st->st_size;
  return put_stream (copy, route, full_query->str, "application/octet-stream",
                     G_INPUT_STREAM (in), st->st_size, error);
}

/* Sets "Cannot write @name: <errno>"; returns FALSE. */
static gboolean
write_failed (const char *name, GError **error)
{
  int saved_errno = errno;

  g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, _("Cannot write %s: %s"), name,
               g_strerror (saved_errno));
  return FALSE;
}

/* Reads @body (of @msg's answer) to its end into @fd (@name for
 * messages): a read error, or fewer bytes than the Content-Length, is the
 * connection's (exit status 3), a write error a local one. */
static gboolean
copy_body (Copy *copy, SoupMessage *msg, GInputStream *body, int fd, const char *name,
           GError **error)
{
  g_autofree guint8 *buffer = g_malloc (CHUNK);
  SoupMessageHeaders *headers = soup_message_get_response_headers (msg);
  goffset expected = soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CONTENT_LENGTH
                     ? soup_message_headers_get_content_length (headers) : -1;
  goffset got = 0;

  for (;;) {
    g_autoptr(GError) read_error = NULL;
    gssize n = g_input_stream_read (body, buffer, CHUNK, NULL, &read_error);

    if (n < 0) {
      g_propagate_error (error, box_cli_error_network (copy->cli->url, read_error));
      return FALSE;
    }
    if (n == 0) {
      /* libsoup ends a body cut short like a whole one: the length tells */
      if (expected < 0 || got == expected)
        return TRUE;
      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_UNREACHABLE,
                   _("The transfer from %s broke off after %lld of %lld bytes"), copy->cli->url,
                   (long long) got, (long long) expected);
      return FALSE;
    }
    got += n;
    for (gssize off = 0; off < n; ) {
      gssize w = write (fd, buffer + off, (gsize) (n - off));

      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        return write_failed (name, error);
      off += w;
    }
    progress_add (copy, (gsize) n);
  }
}

/* A file, or what a symlink points to (GET follows it; its stat is the
 * link's), written to a temporary file beside @target (0600 until done)
 * and renamed over it: @target is the old file or the whole new one. */
static gboolean
download_file (Copy *copy, const char *sandbox, const char *path, JsonObject *stat,
               const char *target, GError **error)
{
  g_autofree char *route = box_cli_sandbox_path (sandbox, "/fs/file");
  g_autofree char *query = file_query (copy, path);
  g_autoptr(SoupMessage) msg = box_cli_message_new (copy->cli, "GET", route, query);
  g_autoptr(GInputStream) body = NULL;
  g_autofree char *dir = g_path_get_dirname (target);
  g_autofree char *base = g_path_get_basename (target);
  g_autofree char *tmp = NULL;
  gboolean file = g_strcmp0 (box_cli_json_string (stat, "type"), "file") == 0;
  const char *mode = box_cli_json_string (stat, "mode");
  mode_t mask = umask (0);
  guint perm;
  int fd;
  gboolean ok;

  umask (mask);
  perm = file && mode != NULL ? (guint) g_ascii_strtoull (mode, NULL, 8) & 0777 : 0666 & ~mask;
  copy->total = file ? (guint64) MAX (box_cli_json_int (stat, "size", 0), 0) : 0;
  body = box_cli_send_stream (copy->cli, msg, error);
  if (body == NULL)
    return FALSE;
  tmp = g_strdup_printf ("%s/.%s.box-XXXXXX", dir, base);
  fd = g_mkstemp_full (tmp, O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) {
    int saved_errno = errno;

    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, _("Cannot create %s: %s"), target,
                 g_strerror (saved_errno));
    return FALSE;
  }
  ok = copy_body (copy, msg, body, fd, target, error);
  if (ok && fchmod (fd, perm) < 0)
    ok = write_failed (target, error);
  if (close (fd) < 0 && ok)
    ok = write_failed (target, error);
  if (ok && g_rename (tmp, target) < 0)
    ok = write_failed (target, error);
  if (!ok)
    g_unlink (tmp);
  return ok;
}

/* ---- the command ------------------------------------------------------- */

/* "a/b/." -> TRUE and "a/b"; trailing slashes go. */
static gboolean
strip_dot (char *path)
{
  gsize len = strlen (path);
  gboolean contents = FALSE;

  if (len >= 2 && strcmp (path + len - 2, "/.") == 0) {
    contents = TRUE;
    path[len - 1] = '\0';
    len--;
  } else if (strcmp (path, ".") == 0) {
    return TRUE;
  }
  while (len > 1 && path[len - 1] == '/')
    path[--len] = '\0';
  return contents;
}

static gboolean
copy_in (Copy *copy, const char *local, const char *sandbox, char *path, GError **error)
{
  g_autofree char *source = g_strdup (local);
  gboolean contents = strip_dot (source);
  g_autofree char *base = g_path_get_basename (source);
  g_autoptr(JsonNode) dest_stat = NULL;
  g_autofree char *target = NULL;
  const char *dest_type;
  struct stat st;

  if (strcmp (local, "-") == 0) {
    g_autoptr(GInputStream) in = g_unix_input_stream_new (STDIN_FILENO, FALSE);
    g_autofree char *route = box_cli_sandbox_path (sandbox, "/fs/tar");
    g_autofree char *query = file_query (copy, path);

    return put_stream (copy, route, query, "application/x-tar", in, -1, error);
  }
  if (stat (source, &st) < 0) {
    int saved_errno = errno;

    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, "%s: %s", local, g_strerror (saved_errno));
    return FALSE;
  }
  strip_dot (path);
  dest_stat = remote_stat (copy, sandbox, path, error);
  if (dest_stat == NULL && error != NULL && *error != NULL)
    return FALSE;
  dest_type = stat_type (dest_stat);
  if (g_strcmp0 (dest_type, "dir") == 0 && !contents)
    target = g_build_filename (path, base, NULL);
  else
    target = g_strdup (path);

  if (S_ISDIR (st.st_mode)) {
    if (dest_type != NULL && g_strcmp0 (dest_type, "dir") != 0) {
      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL,
                   _("%s:%s exists and is not a directory"), sandbox, path);
      return FALSE;
    }
    return upload_tree (copy, source, sandbox, target, error);
  }
  if (!S_ISREG (st.st_mode)) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL,
                 _("%s is neither a file nor a directory"), local);
    return FALSE;
  }
  return upload_file (copy, source, &st, sandbox, target, error);
}

static gboolean
copy_out (Copy *copy, const char *sandbox, char *path, const char *local, GError **error)
{
  gboolean contents = strip_dot (path);
  g_autofree char *base = g_path_get_basename (path);
  g_autofree char *dest = g_strdup (local);
  g_autofree char *target = NULL;
  g_autoptr(JsonNode) stat_node = NULL;
  g_autoptr(GError) local_error = NULL;
  const char *type;

  stat_node = remote_stat (copy, sandbox, path, &local_error);
  if (stat_node == NULL) {
    if (local_error == NULL)
      local_error = g_error_new (BOX_ERROR, BOX_ERROR_NOT_FOUND, _("%s:%s does not exist"),
                                 sandbox, path);
    g_propagate_error (error, g_steal_pointer (&local_error));
    return FALSE;
  }
  type = stat_type (stat_node);
  if (strcmp (local, "-") == 0) {
    g_autofree char *route = box_cli_sandbox_path (sandbox, "/fs/tar");
    g_autofree char *query = file_query (copy, path);
    g_autoptr(SoupMessage) msg = box_cli_message_new (copy->cli, "GET", route, query);
    g_autoptr(GInputStream) body = box_cli_send_stream (copy->cli, msg, error);

    return body != NULL && copy_body (copy, msg, body, STDOUT_FILENO, _("standard output"), error);
  }
  strip_dot (dest);
  if (g_file_test (dest, G_FILE_TEST_IS_DIR) && !contents)
    target = g_build_filename (dest, base, NULL);
  else
    target = g_strdup (dest);
  if (g_strcmp0 (type, "dir") == 0)
    return download_tree (copy, sandbox, path, target, error);
  return download_file (copy, sandbox, path, json_node_get_object (stat_node), target, error);
}

int
box_cmd_cp (BoxCli *cli, int argc, char **argv)
{
  g_autofree char *user = NULL;
  gboolean quiet = FALSE;
  const GOptionEntry entries[] = {
    { "user", 'u', 0, G_OPTION_ARG_STRING, &user,
      N_("Read and write in the sandbox as this user (default root)"), N_("USER") },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, N_("No progress line"), NULL },
    { NULL }
  };
  g_autofree char *src_sandbox = NULL, *src_path = NULL;
  g_autofree char *dst_sandbox = NULL, *dst_path = NULL;
  g_autoptr(GError) error = NULL;
  Copy copy = { .cli = cli };
  gboolean from, to;
  gboolean ok;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("SOURCE DESTINATION"),
                      _("Copy a file or a directory into a sandbox (DESTINATION is SANDBOX:/PATH) "
                        "or out of one (SOURCE is SANDBOX:/PATH); “-” is a tar on standard input "
                        "or output."), 2, 2, &status))
    return status;
  from = split_remote (argv[1], &src_sandbox, &src_path);
  to = split_remote (argv[2], &dst_sandbox, &dst_path);
  if (from == to)
    return box_cli_usage_error (cli, "cp", _("One of SOURCE and DESTINATION must be SANDBOX:/PATH, "
                                             "the other a local path."));
  if (!g_path_is_absolute (from ? src_path : dst_path))
    return box_cli_usage_error (cli, "cp", _("Paths in a sandbox are absolute (SANDBOX:/PATH)."));
  if (!box_cli_ready (cli, &status))
    return status;
  copy.user = user;
  copy.progress = !quiet && isatty (STDERR_FILENO);
  copy.started = g_get_monotonic_time ();

  if (to)
    ok = copy_in (&copy, argv[1], dst_sandbox, dst_path, &error);
  else
    ok = copy_out (&copy, src_sandbox, src_path, argv[2], &error);
  if (copy.drawn || (ok && copy.progress))
    progress_draw (&copy, TRUE);
  if (!ok)
    return box_cli_fail (cli, error);
  return BOX_CLI_EXIT_OK;
}
