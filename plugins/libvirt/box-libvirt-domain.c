/* box-libvirt-domain.c: blocking work on domains, for worker threads.
 *
 * Snapshots go through QEMU's migration, driven over QMP with
 * virDomainQemuMonitorCommandWithFiles (libvirt's own save/restore streams
 * the whole RAM and takes seconds).  QEMU 7.2 under libvirt's seccomp
 * sandbox may not spawn, so `exec:` migration is out: we open the file,
 * hand QEMU the descriptor with getfd and migrate to `fd:`.  RAM that lives
 * in a shared file (a template being built) is skipped with the
 * x-ignore-shared capability, which must then be set on both sides and is
 * reset afterwards (libvirt's own save would break with it).  QEMU throttles
 * migration to 128 MiB/s unless max-bandwidth is raised.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* SCHED_IDLE */
#endif
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "box-libvirt-private.h"

#define BOX_LIBVIRT_MIGRATION_TIMEOUT_US (600 * G_USEC_PER_SEC)
/* a cancelled migration, or the last pass of one, ends in well under this */
#define END_MIGRATION_TIMEOUT_US         (30 * G_USEC_PER_SEC)
#define BOX_LIBVIRT_FD_NAME              "box-mig"

/* What QEMU needs beyond the guest's RAM: its own heap, the TCG translation
 * cache, device buffers.  The cgroup hard limit is RAM plus this. */
#define BOX_LIBVIRT_QEMU_OVERHEAD_MIB 384

void
box_libvirt_domain_limit_memory (virDomainPtr dom, guint memory_mib, guint tb_cache_mib)
{
  static gsize warned = 0;
  virTypedParameter param = { 0 };

  g_strlcpy (param.field, VIR_DOMAIN_MEMORY_HARD_LIMIT, sizeof param.field);
  param.type = VIR_TYPED_PARAM_ULLONG;
  param.value.ul = ((unsigned long long) memory_mib + BOX_LIBVIRT_QEMU_OVERHEAD_MIB +
                    tb_cache_mib) * 1024;   /* KiB */
  if (virDomainSetMemoryParameters (dom, &param, 1, VIR_DOMAIN_AFFECT_LIVE) < 0) {
    const virError *err = virGetLastError ();
    if (g_once_init_enter (&warned)) {
      g_warning ("libvirt: VMs run without a memory limit: %s",
                 err != NULL && err->message != NULL ? err->message : "unknown error");
      g_once_init_leave (&warned, 1);
    }
    virResetLastError ();
  }
}

virDomainPtr
box_libvirt_domain_start (virConnectPtr conn, const char *xml, gboolean paused,
                          guint memory_mib, guint tb_cache_mib, GError **error)
{
  virDomainPtr dom = virDomainCreateXML (conn, xml, paused ? VIR_DOMAIN_START_PAUSED : 0);

  if (dom == NULL) {
    box_libvirt_set_error (error, "cannot start the VM");
    return NULL;
  }
  box_libvirt_domain_limit_memory (dom, memory_mib, tb_cache_mib);
  return dom;
}

virDomainPtr
box_libvirt_domain_lookup (virConnectPtr conn, const char *name)
{
  virDomainPtr dom = virDomainLookupByName (conn, name);

  if (dom == NULL)
    virResetLastError ();
  return dom;
}

/* Checked against its command line so that a stale pid file never names
 * another process. */
pid_t
box_libvirt_domain_qemu_pid (const char *name)
{
  g_autofree char *pid_path = g_strdup_printf ("/run/libvirt/qemu/%s.pid", name);
  g_autofree char *contents = NULL;
  g_autofree char *cmdline_path = NULL;
  g_autofree char *cmdline = NULL;
  g_autofree char *needle = NULL;
  gsize len = 0;
  guint64 pid = 0;

  if (!g_file_get_contents (pid_path, &contents, NULL, NULL) ||
      !g_ascii_string_to_unsigned (g_strstrip (contents), 10, 2, G_MAXINT32, &pid, NULL))
    return 0;
  cmdline_path = g_strdup_printf ("/proc/%" G_GUINT64_FORMAT "/cmdline", pid);
  if (!g_file_get_contents (cmdline_path, &cmdline, &len, NULL))
    return 0;
  needle = g_strdup_printf ("guest=%s,", name);
  for (gsize i = 0; i < len; i += strlen (cmdline + i) + 1) {
    if (g_str_has_prefix (cmdline + i, needle))
      return (pid_t) pid;
  }
  return 0;
}

void
box_libvirt_domain_background (const char *name)
{
  /* <linux/ioprio.h>: class in the top bits, data 0 */
  const int ioprio_idle = 3 << 13, ioprio_who_process = 1;
  const struct sched_param param = { 0 };
  pid_t pid = box_libvirt_domain_qemu_pid (name);
  g_autofree char *tasks_path = NULL;
  g_autoptr(GDir) tasks = NULL;
  const char *entry;

  if (pid == 0)
    return;
  /* all three are per thread on Linux; threads made later inherit those of
   * the thread that makes them */
  tasks_path = g_strdup_printf ("/proc/%d/task", (int) pid);
  tasks = g_dir_open (tasks_path, 0, NULL);
  while (tasks != NULL && (entry = g_dir_read_name (tasks)) != NULL) {
    guint64 tid = 0;
    if (!g_ascii_string_to_unsigned (entry, 10, 1, G_MAXINT32, &tid, NULL))
      continue;
    sched_setscheduler ((pid_t) tid, SCHED_IDLE, &param);
    setpriority (PRIO_PROCESS, (id_t) tid, 19);
    syscall (SYS_ioprio_set, ioprio_who_process, (int) tid, ioprio_idle);
  }
}

guint64
box_libvirt_qemu_rss_mib (const char *domain_name)
{
  pid_t pid = box_libvirt_domain_qemu_pid (domain_name);
  g_autofree char *path = NULL;
  g_autofree char *status = NULL;
  g_auto(GStrv) lines = NULL;
  guint64 kib = 0;

  if (pid == 0)
    return 0;
  path = g_strdup_printf ("/proc/%d/status", (int) pid);
  if (!g_file_get_contents (path, &status, NULL, NULL))
    return 0;
  /* private memory: anonymous and shmem; the template's RAM file pages are
   * shared page cache and not counted per VM */
  lines = g_strsplit (status, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    if (g_str_has_prefix (lines[i], "RssAnon:") || g_str_has_prefix (lines[i], "RssShmem:"))
      kib += g_ascii_strtoull (strchr (lines[i], ':') + 1, NULL, 10);
  }
  return kib / 1024;
}

void
box_libvirt_qemu_rss_average (const char *domain_name, guint64 *average_mib)
{
  guint64 rss = box_libvirt_qemu_rss_mib (domain_name);

  if (rss != 0)
    *average_mib = *average_mib == 0 ? rss : (3 * *average_mib + rss) / 4;
}

gboolean
box_libvirt_domain_destroy (virConnectPtr conn, const char *name, GError **error)
{
  virDomainPtr dom = box_libvirt_domain_lookup (conn, name);
  pid_t pid;
  int ret;

  if (dom == NULL)
    return TRUE;
  /* libvirt's destroy sends SIGTERM and then always sleeps 200 ms before
   * it looks again; a QEMU that is gone already is noticed at once. */
  pid = box_libvirt_domain_qemu_pid (name);
  if (pid != 0 && kill (pid, SIGKILL) == 0) {
    for (guint i = 0; i < 200 && kill (pid, 0) == 0; i++)
      g_usleep (1000);
  }
  ret = virDomainDestroy (dom);
  if (ret < 0) {
    const virError *err = virGetLastError ();
    gboolean gone = err != NULL && (err->code == VIR_ERR_NO_DOMAIN ||
                                    err->code == VIR_ERR_OPERATION_INVALID);
    if (!gone) {
      box_libvirt_set_error (error, "cannot destroy the VM");
      virDomainFree (dom);
      return FALSE;
    }
    virResetLastError ();
  }
  virDomainFree (dom);
  return TRUE;
}

gboolean
box_libvirt_domain_wait_gone (virConnectPtr conn, const char *name, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  for (;;) {
    virDomainPtr dom = box_libvirt_domain_lookup (conn, name);
    int active;

    if (dom == NULL)
      return TRUE;
    active = virDomainIsActive (dom);
    virDomainFree (dom);
    if (active != 1) {
      virResetLastError ();
      return TRUE;
    }
    if (g_get_monotonic_time () >= deadline)
      return FALSE;
    g_usleep (20000);
  }
}

char *
box_libvirt_qmp (virDomainPtr dom, const char *command, int fd, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *reply = NULL;
  JsonObject *object;
  int ret;

  if (fd >= 0) {
    int fds[1] = { fd };
    ret = virDomainQemuMonitorCommandWithFiles (dom, command, 1, fds, NULL, NULL, &reply, 0);
  } else {
    ret = virDomainQemuMonitorCommand (dom, command, &reply, 0);
  }
  if (ret < 0) {
    g_autofree char *what = g_strdup_printf ("QEMU monitor command %s", command);
    box_libvirt_set_error (error, what);
    return NULL;
  }
  if (!json_parser_load_from_data (parser, reply, -1, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "QEMU answered %s with %s", command,
                 reply);
    return NULL;
  }
  object = json_node_get_object (json_parser_get_root (parser));
  if (json_object_has_member (object, "error")) {
    JsonNode *err = json_object_get_member (object, "error");
    const char *desc = JSON_NODE_HOLDS_OBJECT (err) ?
      json_object_get_string_member_with_default (json_node_get_object (err), "desc", reply) :
      reply;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "QEMU refused %s: %s", command, desc);
    return NULL;
  }
  if (!json_object_has_member (object, "return"))
    return g_strdup ("{}");
  return json_to_string (json_object_get_member (object, "return"), FALSE);
}

gboolean
box_libvirt_qmp_ok (virDomainPtr dom, const char *command, int fd, GError **error)
{
  g_autofree char *reply = box_libvirt_qmp (dom, command, fd, error);

  return reply != NULL;
}

static gboolean
set_ignore_shared (virDomainPtr dom, gboolean on, GError **error)
{
  g_autofree char *command =
    g_strdup_printf ("{\"execute\":\"migrate-set-capabilities\",\"arguments\":"
                     "{\"capabilities\":[{\"capability\":\"x-ignore-shared\",\"state\":%s}]}}",
                     on ? "true" : "false");

  return box_libvirt_qmp_ok (dom, command, -1, error);
}

/* Hands @fd to QEMU under BOX_LIBVIRT_FD_NAME; @fd is closed either way. */
static gboolean
pass_fd (virDomainPtr dom, int fd, GError **error)
{
  gboolean ok = box_libvirt_qmp_ok (dom, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\""
                        BOX_LIBVIRT_FD_NAME "\"}}", fd, error);

  close (fd);
  return ok;
}

/* Polls query-migrate until the migration completed or failed. */
static gboolean
wait_migration (virDomainPtr dom, const char *what, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + BOX_LIBVIRT_MIGRATION_TIMEOUT_US;
  gulong sleep_us = 500;

  for (;;) {
    g_autoptr(JsonParser) parser = json_parser_new ();
    g_autofree char *reply = box_libvirt_qmp (dom, "{\"execute\":\"query-migrate\"}", -1, error);
    JsonObject *object;
    const char *status;

    if (reply == NULL)
      return FALSE;
    if (!json_parser_load_from_data (parser, reply, -1, NULL) ||
        !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s: query-migrate said %s", what,
                   reply);
      return FALSE;
    }
    object = json_node_get_object (json_parser_get_root (parser));
    status = json_object_get_string_member_with_default (object, "status", "");
    if (g_str_equal (status, "completed"))
      return TRUE;
    if (g_str_equal (status, "failed") || g_str_equal (status, "cancelled")) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s failed: %s", what,
                   json_object_get_string_member_with_default (object, "error-desc", status));
      return FALSE;
    }
    if (g_get_monotonic_time () > deadline) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s: no end after %d s", what,
                   (int) (BOX_LIBVIRT_MIGRATION_TIMEOUT_US / G_USEC_PER_SEC));
      return FALSE;
    }
    g_usleep (sleep_us);
    sleep_us = MIN (sleep_us * 2, 20000);
  }
}

/* The "status" of a QMP query's reply ("" when it has none). */
static char *
qmp_status (virDomainPtr dom, const char *command, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *reply = box_libvirt_qmp (dom, command, -1, error);
  JsonNode *root;

  if (reply == NULL)
    return NULL;
  if (!json_parser_load_from_data (parser, reply, -1, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (root = json_parser_get_root (parser))) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "QEMU answered %s with %s", command, reply);
    return NULL;
  }
  return g_strdup (json_object_get_string_member_with_default (json_node_get_object (root),
                                                               "status", ""));
}

static gboolean
migration_is_over (const char *status)
{
  return status[0] == '\0' || g_str_equal (status, "none") || g_str_equal (status, "completed") ||
         g_str_equal (status, "failed") || g_str_equal (status, "cancelled");
}

gboolean
box_libvirt_domain_end_migration (virDomainPtr dom, gboolean *resumed, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + END_MIGRATION_TIMEOUT_US;
  g_autofree char *migration = qmp_status (dom, "{\"execute\":\"query-migrate\"}", error);
  g_autofree char *run = NULL;

  *resumed = FALSE;
  if (migration == NULL)
    return FALSE;
  if (!migration_is_over (migration)) {
    g_autofree char *reply = box_libvirt_qmp (dom, "{\"execute\":\"migrate_cancel\"}", -1,
                                              error);
    if (reply == NULL)
      return FALSE;
  }
  for (;;) {
    if (migration_is_over (migration)) {
      g_free (run);
      run = qmp_status (dom, "{\"execute\":\"query-status\"}", error);
      if (run == NULL)
        return FALSE;
      /* finish-migrate: the last pass, the vCPUs stopped; it ends alone */
      if (!g_str_equal (run, "finish-migrate"))
        break;
    }
    if (g_get_monotonic_time () > deadline) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                   "a migration left by a previous run did not end within %d s",
                   (int) (END_MIGRATION_TIMEOUT_US / G_USEC_PER_SEC));
      return FALSE;
    }
    g_usleep (20000);
    g_free (migration);
    migration = qmp_status (dom, "{\"execute\":\"query-migrate\"}", error);
    if (migration == NULL)
      return FALSE;
  }
  if (g_str_equal (run, "postmigrate")) {
    g_autofree char *reply = box_libvirt_qmp (dom, "{\"execute\":\"cont\"}", -1, error);

    if (reply == NULL)
      return FALSE;
    *resumed = TRUE;
  }
  return TRUE;
}

gboolean
box_libvirt_fsync_file (const char *path, GError **error)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  gboolean ok;

  if (fd < 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot open %s: %s", path,
                 g_strerror (saved_errno));
    return FALSE;
  }
  ok = fsync (fd) == 0;
  if (!ok) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot write %s to disk: %s", path,
                 g_strerror (saved_errno));
  }
  close (fd);
  return ok;
}

gboolean
box_libvirt_migrate_save (virDomainPtr dom, const char *path, gboolean ignore_shared,
                          GError **error)
{
  int fd;

  if (!set_ignore_shared (dom, ignore_shared, error) ||
      !box_libvirt_qmp_ok (dom, "{\"execute\":\"migrate-set-parameters\",\"arguments\":"
               "{\"max-bandwidth\":107374182400}}", -1, error))
    return FALSE;
  fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot create %s: %s", path,
                 g_strerror (saved_errno));
    return FALSE;
  }
  if (!pass_fd (dom, fd, error) ||
      !box_libvirt_qmp_ok (dom, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:"
               BOX_LIBVIRT_FD_NAME "\"}}", -1, error) ||
      !wait_migration (dom, "saving the VM's state", error) ||
      !box_libvirt_fsync_file (path, error))
    return FALSE;
  return !ignore_shared || set_ignore_shared (dom, FALSE, error);
}

/* Until the migration left its set-up (and its first sync of the dirty
 * bitmap): active, or over. */
static gboolean
wait_setup (virDomainPtr dom, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + END_MIGRATION_TIMEOUT_US;

  for (;;) {
    g_autofree char *status = qmp_status (dom, "{\"execute\":\"query-migrate\"}", error);

    if (status == NULL)
      return FALSE;
    if (!g_str_equal (status, "setup"))
      return TRUE;
    if (g_get_monotonic_time () > deadline) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                   "the migration's set-up did not end within %d s",
                   (int) (END_MIGRATION_TIMEOUT_US / G_USEC_PER_SEC));
      return FALSE;
    }
    g_usleep (2000);
  }
}

gboolean
box_libvirt_migrate_settle (virDomainPtr dom, GError **error)
{
  gboolean resumed = FALSE, ok;
  int fd;

  /* 1000 bytes a second: the bulk pass after the set-up sends next to
   * nothing (QEMU 7.2 allows a tenth of it per 100 ms; below 10 that is 0,
   * which it takes for no limit).  Every save sets max-bandwidth again
   * (box_libvirt_migrate_save()) */
  if (!set_ignore_shared (dom, FALSE, error) ||
      !box_libvirt_qmp_ok (dom, "{\"execute\":\"migrate-set-parameters\",\"arguments\":"
               "{\"max-bandwidth\":1000}}", -1, error))
    return FALSE;
  fd = open ("/dev/null", O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot open /dev/null: %s",
                 g_strerror (saved_errno));
    return FALSE;
  }
  if (!pass_fd (dom, fd, error) ||
      !box_libvirt_qmp_ok (dom, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:"
               BOX_LIBVIRT_FD_NAME "\"}}", -1, error))
    return FALSE;
  ok = wait_setup (dom, error);
  /* cancelled either way (or, had it ended, the vCPUs run again); the
   * first error counts */
  if (!box_libvirt_domain_end_migration (dom, &resumed, ok ? error : NULL))
    return FALSE;
  return ok;
}

gboolean
box_libvirt_migrate_load (virDomainPtr dom, const char *path, gboolean ignore_shared,
                          GError **error)
{
  int fd;

  if (ignore_shared && !set_ignore_shared (dom, TRUE, error))
    return FALSE;
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot open %s: %s", path,
                 g_strerror (saved_errno));
    return FALSE;
  }
  if (!pass_fd (dom, fd, error) ||
      !box_libvirt_qmp_ok (dom, "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":\"fd:"
               BOX_LIBVIRT_FD_NAME "\"}}", -1, error) ||
      !wait_migration (dom, "restoring the VM's state", error))
    return FALSE;
  /* libvirt's own save would break with the capability left on */
  return !ignore_shared || set_ignore_shared (dom, FALSE, error);
}

/* ---- files and commands ---- */

gboolean
box_libvirt_run_command (const char *const *argv, GError **error)
{
  g_autofree char *err_output = NULL;
  g_autoptr(GError) local_error = NULL;
  int status = 0;

  if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL,
                     NULL, NULL, NULL, &err_output, &status, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot run %s: %s", argv[0],
                 local_error->message);
    return FALSE;
  }
  if (!g_spawn_check_wait_status (status, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s failed: %s", argv[0],
                 err_output != NULL && err_output[0] != '\0' ? g_strstrip (err_output) :
                 local_error->message);
    return FALSE;
  }
  return TRUE;
}

gboolean
box_libvirt_create_overlay (const char *path, const char *backing, const char *backing_format,
                            guint64 size_bytes, GError **error)
{
  g_autofree char *size = g_strdup_printf ("%" G_GUINT64_FORMAT, size_bytes);
  const char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F", backing_format,
                         "-b", backing, path, size, NULL };

  return box_libvirt_run_command (argv, error);
}

gboolean
box_libvirt_remove_tree (const char *path, GError **error)
{
  GStatBuf st;
  g_autoptr(GDir) dir = NULL;
  const char *entry;

  if (g_lstat (path, &st) != 0)
    return TRUE;
  if (S_ISDIR (st.st_mode)) {
    g_autoptr(GError) local_error = NULL;
    g_autofree char *marker = NULL;

    dir = g_dir_open (path, 0, &local_error);
    if (dir == NULL) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot remove %s: %s", path,
                   local_error->message);
      return FALSE;
    }
    while ((entry = g_dir_read_name (dir)) != NULL) {
      g_autofree char *child = NULL;

      if (g_str_equal (entry, BOX_LIBVIRT_UID_FILE))
        continue;
      child = g_build_filename (path, entry, NULL);
      if (!box_libvirt_remove_tree (child, error))
        return FALSE;
    }
    /* a VM's uid is free again once its other files are gone (box-libvirt-uids.c) */
    marker = g_build_filename (path, BOX_LIBVIRT_UID_FILE, NULL);
    if (!box_libvirt_remove_tree (marker, error))
      return FALSE;
    if (g_rmdir (path) != 0 && errno != ENOENT) {
      int saved_errno = errno;
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot remove %s: %s", path,
                   g_strerror (saved_errno));
      return FALSE;
    }
    return TRUE;
  }
  if (g_unlink (path) != 0 && errno != ENOENT) {
    int saved_errno = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot remove %s: %s", path,
                 g_strerror (saved_errno));
    return FALSE;
  }
  return TRUE;
}
