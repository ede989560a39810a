/* libvirt-vm-test-util.c: what the VM tests of the libvirt plugin share
 * (libvirt-vm-test.c, libvirt-ckpt-vm-test.c): an engine and the plugin,
 * operations run to completion, commands in a sandbox. */
#include "config.h"

#include "libvirt-vm-test-util.h"

Suite suite;


/* ---- helpers ---- */

void
set_config (BoxEngine *engine, const char *key, const char *value)
{
  g_key_file_set_string (box_engine_get_config (engine)->keyfile, "plugin.libvirt", key, value);
}

BoxEngine *
new_engine (const char *data_dir)
{
  BoxConfig *config = box_config_new ();
  BoxEngine *engine;

  g_free (config->data_dir);
  config->data_dir = g_strdup (data_dir);
  engine = box_engine_new (config);
  set_config (engine, "vm_dir", suite.vm_dir);
  set_config (engine, "pool_size", "2");
  if (g_getenv ("BOX_VM_TEST_POOL_IDLE_S") != NULL)
    set_config (engine, "pool_idle_s", g_getenv ("BOX_VM_TEST_POOL_IDLE_S"));
  if (g_getenv ("BOX_VM_TEST_DISK_CACHE") != NULL)
    set_config (engine, "disk_cache", g_getenv ("BOX_VM_TEST_DISK_CACHE"));
  return engine;
}

BoxHypervisor *
new_plugin (BoxEngine *engine)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxPluginContext) context = box_engine_new_plugin_context (engine, "libvirt");
  BoxHypervisor *hv = g_object_new (BOX_TYPE_LIBVIRT_PLUGIN, "name", "libvirt",
                                    "context", context, NULL);
  GLogLevelFlags fatal;
  gboolean started;

  /* VMs run under TCG here: the plugin's warning at start that TCG is not a
   * security boundary is expected, not fatal (warnings stay fatal after) */
  fatal = g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  started = box_plugin_start (BOX_PLUGIN (hv), NULL, &error);
  g_log_set_always_fatal (fatal);
  g_assert_true (started);
  g_assert_no_error (error);
  return hv;
}

void
stop_plugin (BoxHypervisor **hv)
{
  box_plugin_stop (BOX_PLUGIN (*hv));
  g_clear_object (hv);
}



void
wait_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Wait *wait = user_data;

  wait->done = TRUE;
  wait->result = g_object_ref (result);
}

void
wait_for (Wait *wait)
{
  while (!wait->done)
    g_main_context_iteration (NULL, TRUE);
}

gboolean
run_request (BoxHypervisor *hv, BoxVmOp op, const BoxVmRequest *request, GError **error)
{
  Wait wait = { FALSE, NULL };
  gboolean ok;

  box_hypervisor_run_async (hv, op, request, NULL, wait_cb, &wait);
  g_assert_false (wait.done);
  wait_for (&wait);
  ok = box_hypervisor_run_finish (hv, wait.result, error);
  g_object_unref (wait.result);
  return ok;
}

gboolean
run_op (BoxHypervisor *hv, BoxVmOp op, const char *id, guint disk_gib, GError **error)
{
  g_autoptr(GHashTable) env = g_hash_table_new (g_str_hash, g_str_equal);
  BoxVmRequest request = {
    .sandbox_id = id,
    .hostname = g_str_equal (id, SANDBOX_A) ? "vm-test-a" : "vm-test-b",
    .template_name = "base",
    .image = "",
    .resources = { 2, 2048, disk_gib },
    .env = env,
  };

  g_hash_table_insert (env, "BOX_TEST_VAR", "from-the-sandbox");
  return run_request (hv, op, &request, error);
}

gdouble
run_ok_disk (BoxHypervisor *hv, BoxVmOp op, const char *id, guint disk_gib)
{
  g_autoptr(GError) error = NULL;
  gint64 start = g_get_monotonic_time ();

  if (!run_op (hv, op, id, disk_gib, &error))
    g_error ("%s %s: %s", box_vm_op_to_string (op), id, error->message);
  return (g_get_monotonic_time () - start) / 1e3;
}

/* with the template's disk size */
gdouble
run_ok (BoxHypervisor *hv, BoxVmOp op, const char *id)
{
  return run_ok_disk (hv, op, id, 20);
}

/* Runs argv in the sandbox as box; stdout, with the exit code in *code. */
char *
exec_full (BoxHypervisor *hv, const char *id, int *code, const char *const *argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxAgentClient) agent = box_hypervisor_get_agent (hv, id, &error);
  g_autoptr(BoxExecResult) result = NULL;
  BoxExecRequest request = { .argv = (char **) argv, .timeout_s = 60 };
  Wait wait = { FALSE, NULL };
  gsize len = 0;
  const char *data;

  g_assert_no_error (error);
  g_assert_nonnull (agent);
  box_agent_client_exec_run_async (agent, &request, NULL, wait_cb, &wait);
  wait_for (&wait);
  result = box_agent_client_exec_run_finish (agent, wait.result, &error);
  g_object_unref (wait.result);
  g_assert_no_error (error);
  if (code != NULL)
    *code = result->exit_code;
  data = g_bytes_get_data (result->stdout_data, &len);
  return data != NULL ? g_strndup (data, len) : g_strdup ("");
}

/* `sh -c @script` as box; stdout without the trailing newline */
char *
sh (BoxHypervisor *hv, const char *id, const char *script)
{
  const char *argv[] = { "sh", "-c", script, NULL };
  int code = -1;
  char *out = exec_full (hv, id, &code, argv);

  g_assert_cmpint (code, ==, 0);
  g_strchomp (out);
  return out;
}

char *
vm_dir_of (const char *id)
{
  BoxLibvirtVm *vm = box_libvirt_lookup_vm (BOX_LIBVIRT_PLUGIN (suite.hv), id);

  g_assert_nonnull (vm);
  return box_libvirt_vm_path (suite.vm_dir, vm->vm_id, NULL);
}

int
compare_double (gconstpointer a, gconstpointer b)
{
  gdouble x = *(const gdouble *) a;
  gdouble y = *(const gdouble *) b;

  return (x > y) - (x < y);
}

gdouble
median (GArray *values)
{
  g_array_sort (values, compare_double);
  return g_array_index (values, gdouble, values->len / 2);
}

void
suite_init (const char *data_prefix)
{
  const char *vm_dir = g_getenv ("BOX_VM_TEST_DIR");
  g_autofree char *build_key = NULL;
  g_autofree char *data_name = NULL;

  suite.vm_dir = g_strdup (vm_dir != NULL && vm_dir[0] != '\0' ? vm_dir :
                           "/var/tmp/box-vm-test");
  /* A data directory of our own per build tree, kept between runs: a run
   * that crashed left VMs behind that this one adopts and removes. */
  build_key = g_compute_checksum_for_string (G_CHECKSUM_SHA256,
                                             g_getenv ("BOX_BUILD_ROOT") != NULL ?
                                             g_getenv ("BOX_BUILD_ROOT") : "", -1);
  build_key[12] = '\0';
  data_name = g_strconcat (data_prefix, build_key, NULL);
  suite.data_dir = g_build_filename (suite.vm_dir, data_name, NULL);
  g_assert_cmpint (g_mkdir_with_parents (suite.data_dir, 0700), ==, 0);
  suite.engine = new_engine (suite.data_dir);
  suite.hv = new_plugin (suite.engine);
}
