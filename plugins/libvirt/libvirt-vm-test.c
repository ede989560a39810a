/* libvirt-vm-test.c: the libvirt hypervisor with real VMs (suite vm).
 *
 * Runs under tests/vm/vm-run.sh, which starts libvirtd and builds the
 * images (once; they are cached).  The plugin is driven as the engine
 * drives it: box_hypervisor_run_async() with a real engine configuration,
 * the guest reached through get_agent() and exec.  Tests share one
 * sandbox VM where they do not spoil it for the next; they run in order.
 *
 * Env: BOX_VM_TEST_DIR   the plugin's vm_dir (default /var/tmp/box-vm-test;
 *                        template snapshots are kept there between runs)
 *      BOX_VM_TEST_BENCH N /libvirt-vm/bench: N create/exec/pause/wake/destroy
 *                        cycles timed (figures by hand with N = 20,
 *                        doc/PERFORMANCE.md); without it that case is not
 *                        registered: the other cases check each step
 *      BOX_VM_TEST_DISK_CACHE  the plugin's disk_cache (default writeback)
 */
#include "config.h"

#include <glib/gstdio.h>
#include <signal.h>

#include "libvirt-vm-test-util.h"

/* ---- tests ---- */

static void
test_start (void)
{
  g_autoptr(GPtrArray) templates = box_hypervisor_list_templates (suite.hv);
  const BoxTemplate *base;
  const char *accel = box_hypervisor_get_accel (suite.hv);
  BoxHypervisorCapabilities caps;

  g_assert_true (g_str_equal (accel, "kvm") || g_str_equal (accel, "tcg"));
  box_hypervisor_get_capabilities (suite.hv, &caps);
  g_assert_cmpstr (caps.accel, ==, accel);
  g_assert_true (caps.flags & BOX_HYPERVISOR_CAP_GUEST_AGENT);
  g_assert_true (caps.flags & BOX_HYPERVISOR_CAP_MEMORY_SNAPSHOTS);
  g_assert_true (caps.flags & BOX_HYPERVISOR_CAP_CHECKPOINTS);
  g_assert_true (caps.flags & BOX_HYPERVISOR_CAP_FORK);
  g_assert_false (caps.flags & BOX_HYPERVISOR_CAP_IMAGES);
  g_test_message ("accel: %s", accel);
  g_assert_cmpuint (templates->len, ==, 1);
  base = g_ptr_array_index (templates, 0);
  g_assert_cmpstr (base->name, ==, "base");
  g_assert_cmpuint (base->resources.cpus, ==, 2);
  g_assert_cmpuint (base->resources.memory_mib, ==, 2048);
  g_assert_cmpuint (base->resources.disk_gib, ==, 20);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_ABSENT);
}

static void
test_create (void)
{
  g_autofree char *uid = NULL;
  g_autofree char *hostname = NULL;
  g_autofree char *env = NULL;
  g_autofree char *size = NULL;
  g_autoptr(GError) error = NULL;
  gdouble ms;

  /* the first create may wait for the template snapshot */
  ms = run_ok (suite.hv, BOX_VM_OP_CREATE, SANDBOX_A);
  g_test_message ("first create: %.0f ms", ms);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_RUNNING);
  g_assert_false (run_op (suite.hv, BOX_VM_OP_CREATE, SANDBOX_A, 20, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_ALREADY_EXISTS);

  uid = sh (suite.hv, SANDBOX_A, "id -u");
  g_assert_cmpstr (uid, ==, "1000");
  hostname = sh (suite.hv, SANDBOX_A, "hostname");
  g_assert_cmpstr (hostname, ==, "vm-test-a");
  env = sh (suite.hv, SANDBOX_A, "echo $BOX_TEST_VAR");
  g_assert_cmpstr (env, ==, "from-the-sandbox");
  /* the template's 20 GiB: the guest sees about that much (the image is 2 GiB) */
  size = sh (suite.hv, SANDBOX_A, "df -B1 --output=size / | tail -1");
  g_assert_cmpuint (g_ascii_strtoull (size, NULL, 10), >, (guint64) 19 << 30);
  g_assert_cmpuint (g_ascii_strtoull (size, NULL, 10), <=, (guint64) 20 << 30);
}

/* Another size than the pool's: smaller (a domain of its own) and larger
 * (a pool domain grown further). */
static void
test_disk_sizes (void)
{
  const guint sizes[] = { 4, 24 };

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++) {
    g_autofree char *size = NULL;
    g_autofree char *host = NULL;
    gdouble ms = run_ok_disk (suite.hv, BOX_VM_OP_CREATE, SANDBOX_B, sizes[i]);

    size = sh (suite.hv, SANDBOX_B, "df -B1 --output=size / | tail -1");
    g_assert_cmpuint (g_ascii_strtoull (size, NULL, 10), >, ((guint64) sizes[i] << 30) * 9 / 10);
    g_assert_cmpuint (g_ascii_strtoull (size, NULL, 10), <=, (guint64) sizes[i] << 30);
    host = sh (suite.hv, SANDBOX_B, "hostname");
    g_assert_cmpstr (host, ==, "vm-test-b");
    g_test_message ("create with %u GiB: %.0f ms", sizes[i], ms);
    run_ok (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_B);
  }
}

static void
test_exec_round_trip (void)
{
  g_autoptr(GArray) times = g_array_new (FALSE, FALSE, sizeof (gdouble));
  const char *argv[] = { "true", NULL };

  for (guint i = 0; i < 10; i++) {
    gint64 start = g_get_monotonic_time ();
    int code = -1;
    g_autofree char *out = exec_full (suite.hv, SANDBOX_A, &code, argv);
    gdouble ms = (g_get_monotonic_time () - start) / 1e3;

    g_assert_cmpint (code, ==, 0);
    g_array_append_val (times, ms);
  }
  g_test_message ("exec true: p50 %.1f ms", median (times));
}

static void
test_pause_wake (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *pid = NULL;
  g_autofree char *check = NULL;
  g_autofree char *script = NULL;
  gint64 snapshot_at = 0;
  gdouble pause_ms, wake_ms;

  pid = sh (suite.hv, SANDBOX_A,
            "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; "
            "echo kept > /tmp/hot-file");
  pause_ms = run_ok (suite.hv, BOX_VM_OP_SUSPEND, SANDBOX_A);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, &snapshot_at), ==,
                   BOX_VM_STATE_SUSPENDED);
  g_assert_cmpint (snapshot_at, >, 0);
  g_assert_null (box_hypervisor_get_agent (suite.hv, SANDBOX_A, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  /* a no-op in the same state */
  run_ok (suite.hv, BOX_VM_OP_SUSPEND, SANDBOX_A);

  wake_ms = run_ok (suite.hv, BOX_VM_OP_RESUME, SANDBOX_A);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_RUNNING);
  script = g_strdup_printf ("kill -0 %s && cat /tmp/hot-file && echo $BOX_TEST_VAR", pid);
  check = sh (suite.hv, SANDBOX_A, script);
  g_assert_cmpstr (check, ==, "kept\nfrom-the-sandbox");
  g_test_message ("hot pause %.1f ms, wake %.1f ms", pause_ms, wake_ms);
}

static gboolean timeout_cb (gpointer user_data);

/* The pid of @domain's QEMU, 0 when it has none. */
static pid_t
qemu_pid (const char *domain)
{
  g_autofree char *path = g_strdup_printf ("/run/libvirt/qemu/%s.pid", domain);
  g_autofree char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return 0;
  return (pid_t) g_ascii_strtoll (text, NULL, 10);
}

/* A pause of SANDBOX_A turned cold: its QEMU @running ended, and a standby
 * domain (box-libvirt-standby.c) waits for its wake; the standby's QEMU. */
static pid_t
pause_cold (pid_t running)
{
  BoxLibvirtPlugin *plugin = BOX_LIBVIRT_PLUGIN (suite.hv);
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (plugin, SANDBOX_A);
  g_autofree char *domain = box_libvirt_vm_domain_name (vm->vm_id);
  g_autofree char *cold = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, "cold.mig");
  gint64 start;
  guint timeout;
  pid_t standby;
  guint64 rss;

  run_ok (suite.hv, BOX_VM_OP_SUSPEND, SANDBOX_A);
  /* what hot_pause_s or memory pressure does */
  start = g_get_monotonic_time ();
  box_libvirt_vm_make_cold (plugin, vm);
  while (!vm->cold)
    g_main_context_iteration (NULL, TRUE);
  g_test_message ("hot to cold: %.0f ms", (g_get_monotonic_time () - start) / 1e3);
  g_assert_true (g_file_test (cold, G_FILE_TEST_IS_REGULAR));
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==,
                   BOX_VM_STATE_SUSPENDED);
  timeout = g_timeout_add_seconds (300, timeout_cb, "the standby domain");
  while (!vm->standby || vm->busy)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
  /* the QEMU that ran is gone; the standby holds QEMU's own memory, not
   * the guest's */
  g_assert_cmpint (kill (running, 0), ==, -1);
  standby = qemu_pid (domain);
  g_assert_cmpint (standby, >, 0);
  g_assert_cmpint (standby, !=, running);
  rss = box_libvirt_qemu_rss_mib (domain);
  g_test_message ("standby QEMU: %" G_GUINT64_FORMAT " MiB", rss);
  g_assert_cmpuint (rss, >, 0);
  g_assert_cmpuint (rss, <, 100);
  return standby;
}

/* A cold pause: the wake loads cold.mig into the standby (the same QEMU
 * runs on); after a restart a new standby is made; one whose QEMU died is
 * not used, the wake starts a domain. */
static void
test_pause_cold (void)
{
  BoxLibvirtPlugin *plugin = BOX_LIBVIRT_PLUGIN (suite.hv);
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (plugin, SANDBOX_A);
  g_autofree char *pid = NULL;
  g_autofree char *check = NULL;
  g_autofree char *script = NULL;
  g_autofree char *domain = box_libvirt_vm_domain_name (vm->vm_id);
  pid_t standby, again;
  gdouble wake_ms;

  pid = sh (suite.hv, SANDBOX_A,
            "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; "
            "echo cold > /tmp/cold-file");
  script = g_strdup_printf ("kill -0 %s && cat /tmp/cold-file && echo $BOX_TEST_VAR", pid);
  standby = pause_cold (qemu_pid (domain));
  wake_ms = run_ok (suite.hv, BOX_VM_OP_RESUME, SANDBOX_A);
  g_assert_cmpint (qemu_pid (domain), ==, standby);
  g_assert_false (vm->standby);
  check = sh (suite.hv, SANDBOX_A, script);
  g_assert_cmpstr (check, ==, "cold\nfrom-the-sandbox");
  g_test_message ("wake from cold into the standby: %.0f ms", wake_ms);

  /* boxd goes away and comes back: the standby is ended and made again */
  standby = pause_cold (standby);
  stop_plugin (&suite.hv);
  suite.hv = new_plugin (suite.engine);
  plugin = BOX_LIBVIRT_PLUGIN (suite.hv);
  vm = box_libvirt_lookup_vm (plugin, SANDBOX_A);
  {
    guint timeout = g_timeout_add_seconds (300, timeout_cb, "the standby after a restart");

    while (!vm->standby || vm->busy)
      g_main_context_iteration (NULL, TRUE);
    g_source_remove (timeout);
  }
  again = qemu_pid (domain);
  g_assert_cmpint (again, >, 0);
  g_assert_cmpint (again, !=, standby);
  g_assert_cmpint (kill (standby, 0), ==, -1);

  /* a standby whose QEMU died is forgotten; the wake starts a domain */
  g_assert_cmpint (kill (again, SIGKILL), ==, 0);
  {
    guint timeout = g_timeout_add_seconds (120, timeout_cb, "the dead standby forgotten");

    while (vm->standby || vm->busy)
      g_main_context_iteration (NULL, TRUE);
    g_source_remove (timeout);
  }
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_SUSPENDED);
  wake_ms = run_ok (suite.hv, BOX_VM_OP_RESUME, SANDBOX_A);
  g_assert_cmpint (qemu_pid (domain), >, 0);
  g_assert_cmpint (qemu_pid (domain), !=, again);
  g_free (check);
  check = sh (suite.hv, SANDBOX_A, script);
  g_assert_cmpstr (check, ==, "cold\nfrom-the-sandbox");
  g_test_message ("wake from cold, its standby dead: %.0f ms", wake_ms);
}

static void
test_stop_boot (void)
{
  g_autofree char *pid = NULL;
  g_autofree char *check = NULL;
  g_autofree char *script = NULL;
  g_autofree char *hostname = NULL;
  gdouble stop_ms, boot_ms;

  pid = sh (suite.hv, SANDBOX_A,
            "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; "
            "echo disk > /home/box/disk-file; echo tmp > /tmp/tmp-file");
  stop_ms = run_ok (suite.hv, BOX_VM_OP_SHUTDOWN, SANDBOX_A);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_SHUTOFF);
  run_ok (suite.hv, BOX_VM_OP_SHUTDOWN, SANDBOX_A);   /* no-op */

  boot_ms = run_ok (suite.hv, BOX_VM_OP_BOOT, SANDBOX_A);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_RUNNING);
  script = g_strdup_printf ("cat /home/box/disk-file; test -e /tmp/tmp-file || echo no-tmp; "
                            "kill -0 %s 2>/dev/null || echo no-process; echo $BOX_TEST_VAR", pid);
  check = sh (suite.hv, SANDBOX_A, script);
  g_assert_cmpstr (check, ==, "disk\nno-tmp\nno-process\nfrom-the-sandbox");
  hostname = sh (suite.hv, SANDBOX_A, "hostname");
  g_assert_cmpstr (hostname, ==, "vm-test-a");
  g_test_message ("stop %.0f ms, boot %.0f ms", stop_ms, boot_ms);
}

/* A paused sandbox stopped: what was written before the pause is on the
 * disk at the next boot, though the guest never synced it itself. */
static void
test_stop_paused (void)
{
  g_autofree char *check = NULL;

  g_free (sh (suite.hv, SANDBOX_A, "echo before-pause > /home/box/paused-file"));
  run_ok (suite.hv, BOX_VM_OP_SUSPEND, SANDBOX_A);
  run_ok (suite.hv, BOX_VM_OP_SHUTDOWN, SANDBOX_A);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_SHUTOFF);
  run_ok (suite.hv, BOX_VM_OP_BOOT, SANDBOX_A);
  check = sh (suite.hv, SANDBOX_A, "cat /home/box/paused-file");
  g_assert_cmpstr (check, ==, "before-pause");
}

static void
test_restart (void)
{
  g_autofree char *uid = NULL;
  g_autofree char *pid = NULL;
  g_autofree char *check = NULL;
  g_autofree char *script = NULL;

  pid = sh (suite.hv, SANDBOX_A, "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!");
  /* boxd goes away and comes back: the VM keeps running and is adopted */
  stop_plugin (&suite.hv);
  suite.hv = new_plugin (suite.engine);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_RUNNING);
  script = g_strdup_printf ("kill -0 %s && id -u", pid);
  check = sh (suite.hv, SANDBOX_A, script);
  g_assert_cmpstr (check, ==, "1000");
}

static void
vm_lost_cb (BoxHypervisor *hv, const char *sandbox_id, gpointer user_data)
{
  char **lost = user_data;

  g_free (*lost);
  *lost = g_strdup (sandbox_id);
}

static gboolean
timeout_cb (gpointer user_data)
{
  g_error ("timed out: %s", (const char *) user_data);
  return G_SOURCE_REMOVE;
}

static void
test_vm_lost (void)
{
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (BOX_LIBVIRT_PLUGIN (suite.hv), SANDBOX_A);
  g_autofree char *lost = NULL;
  g_autofree char *pid_path = NULL;
  g_autofree char *pid = NULL;
  g_autofree char *disk = NULL;
  gint64 snapshot_at = 0;
  GStatBuf st;
  gulong handler;
  guint timeout;

  g_assert_nonnull (vm);
  pid_path = g_strdup_printf ("/run/libvirt/qemu/box-%s.pid", vm->vm_id);
  g_assert_true (g_file_get_contents (pid_path, &pid, NULL, NULL));
  handler = g_signal_connect (suite.hv, "vm-lost", G_CALLBACK (vm_lost_cb), &lost);
  timeout = g_timeout_add_seconds (30, timeout_cb, "vm-lost after killing QEMU");
  g_assert_cmpint (kill ((pid_t) g_ascii_strtoll (pid, NULL, 10), SIGKILL), ==, 0);
  while (lost == NULL)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
  g_signal_handler_disconnect (suite.hv, handler);
  g_assert_cmpstr (lost, ==, SANDBOX_A);
  /* the disk is what is left, and when it was last written */
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, &snapshot_at), ==, BOX_VM_STATE_SHUTOFF);
  disk = box_libvirt_vm_path (suite.vm_dir, vm->vm_id, "disk.qcow2");
  g_assert_true (g_file_test (disk, G_FILE_TEST_IS_REGULAR));
  g_assert_cmpint (g_stat (disk, &st), ==, 0);
  g_assert_cmpint (snapshot_at, ==, (gint64) st.st_mtime * G_USEC_PER_SEC);
  g_assert_cmpint (snapshot_at, <=, g_get_real_time ());
}

static void
test_capacity (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *data_dir = g_dir_make_tmp ("box-libvirt-cap-XXXXXX", &error);
  g_autoptr(BoxEngine) engine = NULL;
  g_autoptr(BoxHypervisor) hv = NULL;
  BoxResources big = { 2, 2048, 20 };
  BoxResources small = { 1, 512, 20 };
  BoxResources many_cpus = { 8, 512, 20 };

  g_assert_no_error (error);
  engine = new_engine (data_dir);
  set_config (engine, "max_memory_mib", "1024");
  set_config (engine, "max_cpus", "4");
  set_config (engine, "pool_size", "0");
  /* the suite's plugin probed KVM already */
  set_config (engine, "accel", box_hypervisor_get_accel (suite.hv));
  hv = new_plugin (engine);
  g_assert_false (box_hypervisor_check_room (hv, &big, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CAPACITY);
  g_clear_error (&error);
  g_assert_false (box_hypervisor_check_room (hv, &many_cpus, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CAPACITY);
  g_clear_error (&error);
  g_assert_true (box_hypervisor_check_room (hv, &small, &error));
  g_assert_no_error (error);
  box_plugin_stop (BOX_PLUGIN (hv));
  box_libvirt_remove_tree (data_dir, NULL);
}

/* A boxd killed (no stop) whose data directory is then removed, as tests
 * do: the next start of any boxd ends its pool domain. */
static void
test_orphans (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *data_dir = g_dir_make_tmp ("box-libvirt-orphan-XXXXXX", &error);
  g_autofree char *data_dir2 = g_dir_make_tmp ("box-libvirt-orphan-XXXXXX", &error);
  g_autoptr(BoxEngine) engine = NULL;
  g_autoptr(BoxEngine) engine2 = NULL;
  g_autoptr(BoxHypervisor) hv2 = NULL;
  BoxHypervisor *hv;
  BoxLibvirtTemplate *tmpl;
  BoxLibvirtSlot *slot;
  g_autofree char *domain = NULL;
  virConnectPtr conn;
  virDomainPtr dom;
  guint timeout;

  g_assert_no_error (error);
  engine = new_engine (data_dir);
  set_config (engine, "pool_size", "1");
  set_config (engine, "accel", box_hypervisor_get_accel (suite.hv));
  hv = new_plugin (engine);
  tmpl = box_libvirt_template_get (BOX_LIBVIRT_PLUGIN (hv), 2, 2048);
  timeout = g_timeout_add_seconds (120, timeout_cb, "a pool domain");
  while (g_queue_is_empty (&tmpl->slots))
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
  slot = g_queue_peek_head (&tmpl->slots);
  domain = box_libvirt_vm_domain_name (slot->vm_id);
  /* "killed": never stopped, its records removed with its data */
  g_object_unref (hv);
  box_libvirt_remove_tree (data_dir, NULL);

  engine2 = new_engine (data_dir2);
  set_config (engine2, "pool_size", "0");
  set_config (engine2, "accel", box_hypervisor_get_accel (suite.hv));
  hv2 = new_plugin (engine2);
  conn = box_libvirt_conn_get (BOX_LIBVIRT_PLUGIN (hv2)->conn, &error);
  g_assert_no_error (error);
  dom = box_libvirt_domain_lookup (conn, domain);
  g_assert_null (dom);
  virConnectClose (conn);
  box_plugin_stop (BOX_PLUGIN (hv2));
  box_libvirt_remove_tree (data_dir2, NULL);
}

static void
take_slot_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GPtrArray *taken = user_data;
  g_autoptr(GError) error = NULL;
  BoxLibvirtSlot *slot = box_libvirt_template_take_slot_finish (result, &error);

  g_assert_no_error (error);
  g_ptr_array_add (taken, slot);
}

static guint
status_uint (BoxHypervisor *hv, const char *key)
{
  g_auto(GVariantBuilder) builder = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_autoptr(GVariant) status = NULL;
  g_autoptr(GVariant) value = NULL;

  box_plugin_add_status (BOX_PLUGIN (hv), &builder);
  status = g_variant_ref_sink (g_variant_builder_end (&builder));
  value = g_variant_lookup_value (status, key, NULL);
  g_assert_nonnull (value);
  return g_variant_is_of_type (value, G_VARIANT_TYPE_UINT64) ?
         (guint) g_variant_get_uint64 (value) : g_variant_get_uint32 (value);
}

/* A burst drains the pool: its target grows (within pool_max_size) and it
 * fills up to it; a create that leaves it more than pool_fill_jobs
 * domains starts no fill until 500 ms without a create; after
 * pool_idle_s without a create it shrinks back to pool_size, a domain
 * per step. */
static void
test_pool_adaptive (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *data_dir = g_dir_make_tmp ("box-libvirt-pool-XXXXXX", &error);
  g_autoptr(BoxEngine) engine = NULL;
  g_autoptr(BoxHypervisor) hv = NULL;
  g_autoptr(GPtrArray) taken = g_ptr_array_new ();
  BoxLibvirtPlugin *self;
  BoxLibvirtTemplate *tmpl;
  guint timeout, most = 0, len;
  gint64 burst_at, shrunk_at = 0, took_at;

  g_assert_no_error (error);
  /* the suite's plugin makes the template snapshot (when run alone): two
   * plugins building one at once replace each other's */
  tmpl = box_libvirt_template_get (BOX_LIBVIRT_PLUGIN (suite.hv), 2, 2048);
  timeout = g_timeout_add_seconds (300, timeout_cb, "the template snapshot");
  while (!tmpl->ready)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
  engine = new_engine (data_dir);
  set_config (engine, "pool_size", "1");
  set_config (engine, "pool_max_size", "3");
  set_config (engine, "pool_idle_s", "40");       /* shrink steps of 4 s */
  set_config (engine, "pool_fill_jobs", "1");
  set_config (engine, "accel", box_hypervisor_get_accel (suite.hv));
  hv = new_plugin (engine);
  self = BOX_LIBVIRT_PLUGIN (hv);
  tmpl = box_libvirt_template_get (self, 2, 2048);
  timeout = g_timeout_add_seconds (300, timeout_cb, "the pool's floor");
  while (g_queue_is_empty (&tmpl->slots))
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
  g_assert_cmpuint (tmpl->demand.target, ==, 1);
  g_assert_cmpuint (status_uint (hv, "pool-target"), ==, 1);
  g_assert_cmpuint (tmpl->slot_mib, >, 0);         /* measured: the budget counts it */
  g_assert_cmpuint (tmpl->slot_mib, <, 2048);
  g_assert_cmpuint (status_uint (hv, "pool-budget-mib"), ==, self->max_memory_mib / 8);

  /* a burst of 4: one from the pool, three that find it empty */
  burst_at = g_get_monotonic_time ();
  for (guint i = 0; i < 4; i++)
    box_libvirt_template_take_slot_async (self, tmpl, 20ull << 30, NULL, take_slot_cb, taken);
  g_assert_cmpuint (tmpl->demand.target, ==, 3);  /* 4 creates, pool_max_size 3 */
  timeout = g_timeout_add_seconds (420, timeout_cb, "the pool grown to 3");
  while (taken->len < 4 || g_queue_get_length (&tmpl->slots) < 3) {
    g_main_context_iteration (NULL, TRUE);
    g_assert_cmpuint (g_queue_get_length (&tmpl->slots) + tmpl->filling, <=, 3);
  }
  g_source_remove (timeout);
  g_assert_cmpuint (status_uint (hv, "pool-ready"), ==, 3);
  g_assert_cmpuint (status_uint (hv, "pool-target"), ==, 3);
  g_assert_cmpuint (status_uint (hv, "pool-memory-mib"), ==, 3 * tmpl->slot_mib);

  /* one more create: 2 left, more than pool_fill_jobs (1), so the fill
   * waits for the burst's end, 500 ms after the create */
  took_at = g_get_monotonic_time ();
  box_libvirt_template_take_slot_async (self, tmpl, 20ull << 30, NULL, take_slot_cb, taken);
  while (taken->len < 5)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (g_queue_get_length (&tmpl->slots), ==, 2);
  g_assert_cmpuint (tmpl->filling, ==, 0);
  timeout = g_timeout_add_seconds (300, timeout_cb, "the pool refilled after the burst");
  while (tmpl->filling == 0 && g_queue_get_length (&tmpl->slots) < 3)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
  g_assert_cmpint (g_get_monotonic_time () - took_at, >=, 450 * 1000);
  timeout = g_timeout_add_seconds (300, timeout_cb, "the pool back at 3");
  while (g_queue_get_length (&tmpl->slots) < 3)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
  for (guint i = 0; i < taken->len; i++) {
    box_libvirt_template_slot_discard (self, g_ptr_array_index (taken, i));
    box_libvirt_slot_free (g_ptr_array_index (taken, i));
  }

  /* idle: back to the floor, one domain at a time */
  timeout = g_timeout_add_seconds (240, timeout_cb, "the pool shrunk to 1");
  len = g_queue_get_length (&tmpl->slots);
  while (len > 1 || tmpl->demand.target > 1) {
    g_main_context_iteration (NULL, TRUE);
    most = MAX (most, len);
    if (g_queue_get_length (&tmpl->slots) < len) {
      gint64 now = g_get_monotonic_time ();

      /* one at a time: not before pool_idle_s after the last create,
       * then a step (a tenth of it) apart */
      g_assert_cmpuint (g_queue_get_length (&tmpl->slots), ==, len - 1);
      g_assert_cmpint (now - burst_at, >=, 40 * G_USEC_PER_SEC);
      if (shrunk_at != 0)
        g_assert_cmpint (now - shrunk_at, >=, 4 * G_USEC_PER_SEC - 100000);
      shrunk_at = now;
    }
    len = g_queue_get_length (&tmpl->slots);
  }
  g_source_remove (timeout);
  g_assert_cmpuint (most, ==, 3);
  g_assert_cmpint (shrunk_at - burst_at, >=, (40 + 4) * G_USEC_PER_SEC);
  g_assert_cmpuint (status_uint (hv, "pool-target"), ==, 1);
  box_plugin_stop (BOX_PLUGIN (hv));
  box_libvirt_remove_tree (data_dir, NULL);
}

static void
test_bench (void)
{
  guint n = 1;
  const char *env = g_getenv ("BOX_VM_TEST_BENCH");  /* set: main() registers this case */
  g_autoptr(GArray) creates = g_array_new (FALSE, FALSE, sizeof (gdouble));
  g_autoptr(GArray) pauses = g_array_new (FALSE, FALSE, sizeof (gdouble));
  g_autoptr(GArray) wakes = g_array_new (FALSE, FALSE, sizeof (gdouble));
  g_autoptr(GArray) destroys = g_array_new (FALSE, FALSE, sizeof (gdouble));
  g_autoptr(GArray) first_execs = g_array_new (FALSE, FALSE, sizeof (gdouble));

  if (env != NULL)
    n = MAX (1, (guint) g_ascii_strtoull (env, NULL, 10));
  for (guint i = 0; i < n; i++) {
    gdouble ms;
    g_autofree char *host = NULL;

    /* let the pool refill, as between two users' creates */
    g_usleep (2 * G_USEC_PER_SEC);
    ms = run_ok (suite.hv, BOX_VM_OP_CREATE, SANDBOX_B);
    g_array_append_val (creates, ms);
    {
      const char *argv[] = { "true", NULL };
      gint64 start = g_get_monotonic_time ();
      int code = -1;
      g_autofree char *out = exec_full (suite.hv, SANDBOX_B, &code, argv);

      g_assert_cmpint (code, ==, 0);
      ms += (g_get_monotonic_time () - start) / 1e3;
      g_array_append_val (first_execs, ms);
    }
    host = sh (suite.hv, SANDBOX_B, "hostname");
    g_assert_cmpstr (host, ==, "vm-test-b");
    ms = run_ok (suite.hv, BOX_VM_OP_SUSPEND, SANDBOX_B);
    g_array_append_val (pauses, ms);
    ms = run_ok (suite.hv, BOX_VM_OP_RESUME, SANDBOX_B);
    g_array_append_val (wakes, ms);
    ms = run_ok (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_B);
    g_array_append_val (destroys, ms);
  }
  g_test_message ("%u runs: create p50 %.0f ms, create + first exec p50 %.0f ms, "
                  "pause p50 %.1f ms, wake p50 %.1f ms, destroy p50 %.0f ms", n, median (creates),
                  median (first_execs), median (pauses), median (wakes), median (destroys));
}

static void
test_destroy (void)
{
  g_autofree char *dir = vm_dir_of (SANDBOX_A);
  g_autofree char *state = g_build_filename (suite.data_dir, "libvirt", SANDBOX_A ".json", NULL);

  g_assert_true (g_file_test (dir, G_FILE_TEST_IS_DIR));
  g_assert_true (g_file_test (state, G_FILE_TEST_IS_REGULAR));
  run_ok (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_A);
  g_assert_cmpint (box_hypervisor_query (suite.hv, SANDBOX_A, NULL), ==, BOX_VM_STATE_ABSENT);
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (state, G_FILE_TEST_EXISTS));
  run_ok (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_A);   /* idempotent */
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);
  suite_init ("test-data-");
  run_op (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_A, 20, &error);
  g_assert_no_error (error);
  run_op (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_B, 20, &error);
  g_assert_no_error (error);

  g_test_add_func ("/libvirt-vm/start", test_start);
  g_test_add_func ("/libvirt-vm/create", test_create);
  g_test_add_func ("/libvirt-vm/exec-round-trip", test_exec_round_trip);
  g_test_add_func ("/libvirt-vm/disk-sizes", test_disk_sizes);
  g_test_add_func ("/libvirt-vm/pause-wake", test_pause_wake);
  g_test_add_func ("/libvirt-vm/pause-cold", test_pause_cold);
  g_test_add_func ("/libvirt-vm/stop-boot", test_stop_boot);
  g_test_add_func ("/libvirt-vm/stop-paused", test_stop_paused);
  g_test_add_func ("/libvirt-vm/restart", test_restart);
  if (g_getenv ("BOX_VM_TEST_BENCH") != NULL)
    g_test_add_func ("/libvirt-vm/bench", test_bench);
  g_test_add_func ("/libvirt-vm/vm-lost", test_vm_lost);
  g_test_add_func ("/libvirt-vm/destroy", test_destroy);
  g_test_add_func ("/libvirt-vm/capacity", test_capacity);
  g_test_add_func ("/libvirt-vm/orphans", test_orphans);
  g_test_add_func ("/libvirt-vm/pool-adaptive", test_pool_adaptive);
  status = g_test_run ();

  /* nothing of ours may stay behind, whatever failed */
  if (suite.hv != NULL) {
    g_autoptr(GError) cleanup_error = NULL;
    run_op (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_A, 20, &cleanup_error);
    run_op (suite.hv, BOX_VM_OP_DESTROY, SANDBOX_B, 20, NULL);
    stop_plugin (&suite.hv);
  }
  g_clear_object (&suite.engine);
  g_free (suite.data_dir);
  g_free (suite.vm_dir);
  return status;
}
