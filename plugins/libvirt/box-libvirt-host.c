/* box-libvirt-host.c: configuration, the guest image, and what the host offers.
 *
 * KVM: /dev/kvm existing is not enough (on some hosts it is a PVM-only KVM
 * on which a stock kernel hangs), so with accel=auto QEMU really boots the
 * guest kernel with KVM, without a disk, and we wait at most 10 s for the
 * first sign of user space on its console (images/probe-kvm.sh does the
 * same by hand).  The answer is cached in the state directory, keyed by the
 * kernel and the QEMU version, so boxd pays the probe once.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gio/gunixinputstream.h>

#include "box-libvirt-private.h"

#define BOX_LIBVIRT_PROBE_TIMEOUT_S 10

/* ---- configuration ---- */

void
box_libvirt_config_clear (BoxLibvirtConfig *config)
{
  g_clear_pointer (&config->uri, g_free);
  g_clear_pointer (&config->image_dir, g_free);
  g_clear_pointer (&config->vm_dir, g_free);
  g_clear_pointer (&config->accel, g_free);
  g_clear_pointer (&config->qemu_user, g_free);
  g_clear_pointer (&config->qemu_group, g_free);
  g_clear_pointer (&config->disk_cache, g_free);
}

static gboolean
config_uint (BoxPlugin *plugin, const char *key, const char *fallback, guint64 max,
             guint64 *value, GError **error)
{
  return box_plugin_context_get_uint (box_plugin_get_context (plugin), key,
                                      g_ascii_strtoull (fallback, NULL, 10), max, value, error);
}

static gboolean
config_uint_positive (BoxPlugin *plugin, const char *key, const char *fallback, guint64 max,
                      guint64 *value, GError **error)
{
  if (!config_uint (plugin, key, fallback, max, value, error))
    return FALSE;
  if (*value == 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "[plugin.%s] %s: must be at least 1",
                 box_plugin_get_name (plugin), key);
    return FALSE;
  }
  return TRUE;
}

gboolean
box_libvirt_config_load (BoxPlugin *plugin, BoxLibvirtConfig *config, GError **error)
{
  const char *cache = g_getenv ("BOX_IMAGE_CACHE");
  struct passwd *pw;
  struct group *gr;
  guint64 value = 0;
  g_autofree char *uid_range = NULL;
  g_autoptr(GError) local_error = NULL;

  box_libvirt_config_clear (config);
  config->uri = box_plugin_get_config (plugin, "uri", "qemu:///system");
  config->image_dir = box_plugin_get_config (plugin, "image_dir",
                                             cache != NULL && cache[0] != '\0' ?
                                             cache : "/var/cache/box/images");
  config->vm_dir = box_plugin_get_config (plugin, "vm_dir", "/var/lib/libvirt/box");
  config->accel = box_plugin_get_config (plugin, "accel", "auto");
  config->qemu_user = box_plugin_get_config (plugin, "qemu_user", "libvirt-qemu");
  config->qemu_group = box_plugin_get_config (plugin, "qemu_group", "kvm");

  config->disk_cache = box_plugin_get_config (plugin, "disk_cache", "writeback");
  if (!g_str_equal (config->disk_cache, "writeback") && !g_str_equal (config->disk_cache, "none") &&
      !g_str_equal (config->disk_cache, "unsafe")) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "[plugin.%s] disk_cache: \"%s\" is not writeback, none or unsafe",
                 box_plugin_get_name (plugin), config->disk_cache);
    return FALSE;
  }
  if (!g_path_is_absolute (config->vm_dir) || strchr (config->vm_dir, ',') != NULL) {
    /* the path ends up in QEMU options, where a comma separates options */
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "[plugin.%s] vm_dir: \"%s\" must be an absolute path without commas",
                 box_plugin_get_name (plugin), config->vm_dir);
    return FALSE;
  }
  if (!g_str_equal (config->accel, "auto") && !g_str_equal (config->accel, "kvm") &&
      !g_str_equal (config->accel, "tcg")) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "[plugin.%s] accel: \"%s\" is not auto, kvm or tcg",
                 box_plugin_get_name (plugin), config->accel);
    return FALSE;
  }
  pw = getpwnam (config->qemu_user);
  gr = getgrnam (config->qemu_group);
  if (pw == NULL || gr == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "[plugin.%s] QEMU's user %s or group %s does not exist (libvirt's qemu.conf "
                 "user and group)", box_plugin_get_name (plugin), config->qemu_user,
                 config->qemu_group);
    return FALSE;
  }
  config->qemu_uid = pw->pw_uid;
  config->qemu_gid = gr->gr_gid;
  uid_range = box_plugin_get_config (plugin, "uid_range", BOX_LIBVIRT_UID_RANGE);
  if (!box_libvirt_uid_range_parse (uid_range, &config->uid_first, &config->uid_last,
                                    &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "[plugin.%s] %s",
                 box_plugin_get_name (plugin), local_error->message);
    return FALSE;
  }
  if (!box_plugin_context_get_bool (box_plugin_get_context (plugin), "allow_tcg", TRUE,
                                    &config->allow_tcg, error))
    return FALSE;

  if (!config_uint (plugin, "pool_size", "2", 64, &value, error))
    return FALSE;
  config->pool_size = value;
  /* the pool grows with demand up to pool_max_size (default: 64, the
   * most pool_size may be) within pool_memory_mib (0: an eighth of the
   * node's memory capacity), and shrinks after pool_idle_s without creates */
  if (!config_uint (plugin, "pool_max_size", "64", 256, &value, error))
    return FALSE;
  config->pool_max_size = value;
  if (config->pool_max_size < config->pool_size) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "[plugin.%s] pool_max_size: %u is below pool_size (%u)",
                 box_plugin_get_name (plugin), config->pool_max_size, config->pool_size);
    return FALSE;
  }
  if (!config_uint (plugin, "pool_memory_mib", "0", G_MAXUINT32, &config->pool_memory_mib,
                    error))
    return FALSE;
  if (!config_uint_positive (plugin, "pool_idle_s", "120", 24 * 3600, &value, error))
    return FALSE;
  config->pool_idle_s = value;
  if (!config_uint_positive (plugin, "pool_fill_jobs", "2", 16, &value, error))
    return FALSE;
  config->pool_fill_jobs = value;
  if (!config_uint (plugin, "hot_pause_s", "60", 7 * 24 * 3600, &value, error))
    return FALSE;
  config->hot_pause_s = value;
  if (!config_uint (plugin, "max_memory_mib", "0", G_MAXUINT32, &config->max_memory_mib, error) ||
      !config_uint (plugin, "max_cpus", "0", G_MAXUINT32, &config->max_cpus, error))
    return FALSE;
  if (!config_uint (plugin, "cpu_overcommit", "128", 1024, &value, error))
    return FALSE;
  config->cpu_overcommit = MAX (value, 1);
  if (!config_uint (plugin, "tb_cache_mib", "128", 4096, &value, error))
    return FALSE;
  config->tb_cache_mib = value;
  if (!config_uint (plugin, "boot_timeout_s", "120", 3600, &value, error))
    return FALSE;
  config->boot_timeout_s = MAX (value, 1);
  if (!config_uint (plugin, "disk_reserve_mib", "256", G_MAXUINT32, &config->disk_reserve_mib,
                    error))
    return FALSE;
  if (!box_plugin_context_get_bool (box_plugin_get_context (plugin), "checkpoint_materialise",
                                    TRUE, &config->checkpoint_materialise, error))
    return FALSE;
  if (!box_plugin_context_get_bool (box_plugin_get_context (plugin), "checkpoint_ready",
                                    TRUE, &config->checkpoint_ready, error))
    return FALSE;
  if (!config_uint_positive (plugin, "checkpoint_ready_max", "10", 64, &value, error))
    return FALSE;
  config->checkpoint_ready_max = value;
  if (!box_plugin_context_get_bool (box_plugin_get_context (plugin), "cold_standby",
                                    TRUE, &config->cold_standby, error))
    return FALSE;
  if (!box_plugin_context_get_bool (box_plugin_get_context (plugin), "ram_fault_in",
                                    TRUE, &config->ram_fault_in, error))
    return FALSE;
  return TRUE;
}

/* ---- the guest image ---- */

void
box_libvirt_image_free (BoxLibvirtImage *image)
{
  if (image == NULL)
    return;
  g_free (image->dir);
  g_free (image->key);
  g_free (image->kernel);
  g_free (image->initrd);
  g_free (image->rootfs);
  g_free (image);
}

BoxLibvirtImage *
box_libvirt_image_load (const char *image_dir, GError **error)
{
  g_autofree char *link = g_build_filename (image_dir, "base", NULL);
  g_autofree char *resolved = realpath (link, NULL);
  g_autoptr(BoxLibvirtImage) image = g_new0 (BoxLibvirtImage, 1);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *manifest = NULL;
  JsonObject *object;
  JsonObject *resources;
  GStatBuf st;

  if (resolved != NULL) {
    image->dir = g_strdup (resolved);
    image->kernel = g_build_filename (resolved, "vmlinuz", NULL);
    image->initrd = g_build_filename (resolved, "initrd.img", NULL);
    image->rootfs = g_build_filename (resolved, "rootfs.ext4", NULL);
    manifest = g_build_filename (resolved, "manifest.json", NULL);
  }
  if (resolved == NULL || !g_file_test (image->kernel, G_FILE_TEST_IS_REGULAR) ||
      !g_file_test (image->initrd, G_FILE_TEST_IS_REGULAR) ||
      g_stat (image->rootfs, &st) != 0 ||
      !json_parser_load_from_file (parser, manifest, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "no guest image in %s: build it with images/build-base.sh "
                 "(as root; BOX_IMAGE_CACHE=%s), or set [plugin.libvirt] image_dir",
                 link, image_dir);
    return NULL;
  }
  image->rootfs_bytes = st.st_size;
  object = json_node_get_object (json_parser_get_root (parser));
  image->key = g_strdup (json_object_get_string_member_with_default (object, "image_key", ""));
  if (image->key[0] == '\0') {
    g_free (image->key);
    image->key = g_path_get_basename (resolved);
  }
  image->resources.cpus = 2;
  image->resources.memory_mib = 2048;
  image->resources.disk_gib = 20;
  if (json_object_has_member (object, "resources") &&
      JSON_NODE_HOLDS_OBJECT (json_object_get_member (object, "resources"))) {
    resources = json_object_get_object_member (object, "resources");
    image->resources.cpus =
      json_object_get_int_member_with_default (resources, "cpus", image->resources.cpus);
    image->resources.memory_mib =
      json_object_get_int_member_with_default (resources, "memory_mib",
                                               image->resources.memory_mib);
    image->resources.disk_gib =
      json_object_get_int_member_with_default (resources, "disk_gib", image->resources.disk_gib);
  }
  return g_steal_pointer (&image);
}

/* ---- the host's size ---- */

guint64
box_libvirt_host_memory_mib (void)
{
  g_autofree char *meminfo = NULL;
  const char *line;

  if (!g_file_get_contents ("/proc/meminfo", &meminfo, NULL, NULL))
    return 0;
  line = strstr (meminfo, "MemTotal:");
  if (line == NULL)
    return 0;
  return g_ascii_strtoull (line + strlen ("MemTotal:"), NULL, 10) / 1024;
}

guint
box_libvirt_host_cpus (void)
{
  return g_get_num_processors ();
}

/* ---- KVM or TCG ---- */

/* TRUE when QEMU with KVM got the guest kernel to user space in time. */
/* The end of a console log as one readable line: terminal escape
 * sequences dropped, control characters and runs of blanks folded.  (What
 * a guest wrote: bounded, printable, never more than @max bytes.) */
char *
box_libvirt_console_tail (const char *text, gsize max)
{
  GString *clean = g_string_new (NULL);
  const char *p;
  const char *start;

  for (p = text; *p != '\0'; p++) {
    if (*p == '\033') {
      /* CSI: ESC [ parameters final-letter; other escapes: ESC + one char */
      if (p[1] == '[') {
        p += 2;
        while (*p != '\0' && !g_ascii_isalpha (*p))
          p++;
      } else if (p[1] != '\0') {
        p++;
      }
      if (*p == '\0')
        break;
      continue;
    }
    if (g_ascii_isprint (*p) && *p != ' ')
      g_string_append_c (clean, *p);
    else if (clean->len > 0 && clean->str[clean->len - 1] != ' ')
      g_string_append_c (clean, ' ');
  }
  g_strstrip (clean->str);
  start = clean->str;
  if (strlen (start) > max)
    start += strlen (start) - max;
  p = g_strdup (start);
  g_string_free (clean, TRUE);
  return (char *) p;
}

/* The end of a VM's console log file (virtlogd's, at most 2 MiB), or ""
 * when there is none. */
char *
box_libvirt_console_file_tail (const char *path, gsize max)
{
  char buf[4096];
  ssize_t n = 0;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

  if (fd >= 0) {
    off_t size = lseek (fd, 0, SEEK_END);

    if (size > 0)
      n = pread (fd, buf, sizeof buf - 1, MAX (size - (off_t) (sizeof buf - 1), 0));
    close (fd);
  }
  n = MAX (n, 0);
  buf[n] = '\0';
  /* a NUL from the guest would end the text before its end */
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] == '\0')
      buf[i] = ' ';
  return box_libvirt_console_tail (buf, max);
}

static gboolean
probe_kvm (const BoxLibvirtImage *image, char **how)
{
  const char *argv[] = {
    "qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-machine", "q35", "-m", "256",
    "-smp", "1", "-nographic", "-nodefaults", "-no-reboot", "-serial", "stdio",
    "-kernel", image->kernel, "-initrd", image->initrd,
    "-append", "console=ttyS0 panic=-1 loglevel=4 box.root=/dev/nonexistent", NULL
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GString) output = g_string_new (NULL);
  gint64 start = g_get_monotonic_time ();
  gint64 deadline = start + BOX_LIBVIRT_PROBE_TIMEOUT_S * G_USEC_PER_SEC;
  gboolean booted = FALSE;
  int fd;

  process = g_subprocess_newv (argv, G_SUBPROCESS_FLAGS_STDIN_PIPE |
                               G_SUBPROCESS_FLAGS_STDOUT_PIPE |
                               G_SUBPROCESS_FLAGS_STDERR_MERGE, &error);
  if (process == NULL) {
    *how = g_strdup_printf ("the KVM probe could not start QEMU: %s", error->message);
    return FALSE;
  }
  fd = g_unix_input_stream_get_fd (G_UNIX_INPUT_STREAM (g_subprocess_get_stdout_pipe (process)));
  while (!booted) {
    struct pollfd pfd = { fd, POLLIN, 0 };
    gint64 now = g_get_monotonic_time ();
    char buf[4096];
    ssize_t n;

    if (now >= deadline)
      break;
    if (poll (&pfd, 1, (int) ((deadline - now) / 1000) + 1) <= 0)
      continue;
    n = read (fd, buf, sizeof buf);
    if (n <= 0)
      break;   /* QEMU ended */
    g_string_append_len (output, buf, n);
    booted = strstr (output->str, "box-agent:") != NULL ||
             strstr (output->str, "Run /init as init process") != NULL ||
             strstr (output->str, "Freeing unused kernel") != NULL;
  }
  g_subprocess_force_exit (process);
  g_subprocess_wait (process, NULL, NULL);
  if (booted) {
    *how = g_strdup_printf ("KVM booted the guest kernel in %.1f s",
                            (g_get_monotonic_time () - start) / 1e6);
  } else {
    g_autofree char *tail = box_libvirt_console_tail (output->str, 100);
    *how = g_strdup_printf ("KVM did not boot the guest kernel within %d s%s%s%s",
                            BOX_LIBVIRT_PROBE_TIMEOUT_S, tail[0] != '\0' ? " (console: " : "",
                            tail, tail[0] != '\0' ? ")" : "");
  }
  return booted;
}

char *
box_libvirt_choose_accel (const char *setting, const BoxLibvirtImage *image,
                          const char *state_dir, const char *qemu_version, char **how)
{
  g_autofree char *key_input = NULL;
  g_autofree char *key = NULL;
  g_autofree char *cache_name = NULL;
  g_autofree char *cache = NULL;
  g_autofree char *cached = NULL;
  g_autofree char *probe_how = NULL;
  const char *result;
  GStatBuf st;

  if (!g_str_equal (setting, "auto")) {
    *how = g_strdup ("set by [plugin.libvirt] accel");
    return g_strdup (setting);
  }
  if (access ("/dev/kvm", R_OK | W_OK) != 0) {
    *how = g_strdup ("no usable /dev/kvm");
    return g_strdup ("tcg");
  }
  if (g_stat (image->kernel, &st) != 0) {
    *how = g_strdup ("no guest kernel to probe KVM with");
    return g_strdup ("tcg");
  }
  key_input = g_strdup_printf ("%s\n%" G_GINT64_FORMAT "\n%" G_GINT64_FORMAT "\n%s",
                               image->kernel, (gint64) st.st_size, (gint64) st.st_mtime,
                               qemu_version);
  key = g_compute_checksum_for_string (G_CHECKSUM_SHA256, key_input, -1);
  key[16] = '\0';
  cache_name = g_strconcat ("accel-", key, NULL);
  cache = state_dir != NULL ? g_build_filename (state_dir, cache_name, NULL) : NULL;
  if (cache != NULL && g_file_get_contents (cache, &cached, NULL, NULL)) {
    g_strstrip (cached);
    if (g_str_equal (cached, "kvm") || g_str_equal (cached, "tcg")) {
      *how = g_strdup_printf ("cached KVM probe (%s)", cache);
      return g_steal_pointer (&cached);
    }
  }
  result = probe_kvm (image, &probe_how) ? "kvm" : "tcg";
  *how = g_steal_pointer (&probe_how);
  if (cache != NULL && !g_file_set_contents (cache, result, -1, NULL))
    g_warning ("libvirt: cannot cache the KVM probe in %s", cache);
  return g_strdup (result);
}
