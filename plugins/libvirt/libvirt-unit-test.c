/* libvirt-unit-test.c: the libvirt plugin's pure parts, without a VM:
 * the domain XML, the kernel command line, the per-sandbox state file, IDs,
 * the configuration and the image manifest. */
#include "config.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <glib/gstdio.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "box-config.h"
#include "box-engine.h"
#include "box-libvirt-private.h"

static void
assert_contains (const char *haystack, const char *needle)
{
  if (strstr (haystack, needle) == NULL)
    g_error ("\"%s\" not found in:\n%s", needle, haystack);
}

static void
assert_lacks (const char *haystack, const char *needle)
{
  if (strstr (haystack, needle) != NULL)
    g_error ("\"%s\" unexpectedly found in:\n%s", needle, haystack);
}

static BoxLibvirtDomainSpec
base_spec (void)
{
  BoxLibvirtDomainSpec spec = {
    .name = "box-abc",
    .accel = "tcg",
    .cpus = 2,
    .memory_mib = 2048,
    .kernel = "/img/vmlinuz",
    .initrd = "/img/initrd.img",
    .cmdline = "console=ttyS0 box.hostname=a&b",
    .disk = "/vms/abc/disk.qcow2",
    .agent_socket = "/vms/abc/agent.sock",
    .console_log = "/vms/abc/console.log",
    .uid = 64055,
    .gid = 107,
    .tb_cache_mib = 128,
  };
  return spec;
}

static void
test_xml_fork (void)
{
  BoxLibvirtDomainSpec spec = base_spec ();
  g_autofree char *xml = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonParser) unused = NULL;

  spec.ram_path = "/tpl/ram";
  spec.ram_shared = FALSE;
  spec.incoming = TRUE;
  spec.nic = BOX_LIBVIRT_NIC_TAP;
  spec.tap = "box-tap1";
  spec.mac = "52:54:00:aa:bb:cc";
  xml = box_libvirt_domain_xml (&spec);

  assert_contains (xml, "<domain type='qemu'");
  assert_contains (xml, "<name>box-abc</name>");
  assert_contains (xml, "<memory unit='MiB'>2048</memory>");
  assert_contains (xml, "<vcpu>2</vcpu>");
  assert_contains (xml, "<global_quota>200000</global_quota>");
  assert_contains (xml, "machine='q35'");
  assert_contains (xml, "<kernel>/img/vmlinuz</kernel>");
  /* escaped */
  assert_contains (xml, "box.hostname=a&amp;b");
  assert_contains (xml, "<tb-cache unit='MiB'>128</tb-cache>");
  /* QEMU under the VM's own uid, QEMU's group */
  assert_contains (xml, "<seclabel type='static' model='dac' relabel='no'>"
                   "<label>+64055:+107</label></seclabel>");
  /* the console through virtlogd (bounded), truncated at each start */
  assert_contains (xml, "<serial type='null'>\n"
                   "      <log file='/vms/abc/console.log' append='off'/>\n"
                   "    </serial>");
  assert_lacks (xml, "<serial type='file'>");
  assert_contains (xml, "<source file='/vms/abc/disk.qcow2'/>");
  assert_contains (xml, "cache='writeback'");
  assert_contains (xml, "<interface type='ethernet'>");
  assert_contains (xml, "<target dev='box-tap1' managed='no'/>");
  assert_contains (xml, "<mac address='52:54:00:aa:bb:cc'/>");
  assert_contains (xml, "name='org.box.agent.0'");
  assert_contains (xml, "<source mode='bind' path='/vms/abc/agent.sock'/>");
  assert_contains (xml, "memory-backend-file,id=box-ram,size=2097152K,mem-path=/tpl/ram,share=off");
  /* whole MiB: libvirt's <memory> is the size, no -m of ours */
  assert_lacks (xml, "<qemu:arg value='-m'/>");
  assert_contains (xml, "memory-backend=box-ram");
  assert_contains (xml, "<qemu:arg value='-incoming'/>");
  assert_contains (xml, "<qemu:arg value='defer'/>");
}

static void
test_xml_variants (void)
{
  BoxLibvirtDomainSpec spec = base_spec ();
  g_autofree char *boot = NULL;
  g_autofree char *padded = NULL;
  g_autofree char *tmpl = NULL;
  g_autofree char *kvm = NULL;

  /* a cold boot: anonymous RAM of our own id, no incoming, no NIC */
  boot = box_libvirt_domain_xml (&spec);
  assert_contains (boot, "memory-backend-ram,id=box-ram,size=2097152K");
  assert_lacks (boot, "-incoming");
  assert_lacks (boot, "<interface");

  /* a RAM block of no whole MiB (TCG's padding): QEMU's -m follows it */
  spec.ram_kib = 2048 * 1024 + 8;
  padded = box_libvirt_domain_xml (&spec);
  assert_contains (padded, "memory-backend-ram,id=box-ram,size=2097160K");
  assert_contains (padded, "<qemu:arg value='-m'/>\n    <qemu:arg value='size=2097160K'/>");
  assert_contains (padded, "<memory unit='MiB'>2048</memory>");
  spec.ram_kib = 0;

  /* a template being built: shared RAM file, a NIC without a tap */
  spec.ram_path = "/tpl/ram";
  spec.ram_shared = TRUE;
  spec.nic = BOX_LIBVIRT_NIC_LOOSE;
  tmpl = box_libvirt_domain_xml (&spec);
  assert_contains (tmpl, "mem-path=/tpl/ram,share=on");
  assert_contains (tmpl, "<interface type='ethernet'>");
  assert_lacks (tmpl, "managed='no'");
  assert_contains (tmpl, "<model type='virtio'/>");

  spec.accel = "kvm";
  kvm = box_libvirt_domain_xml (&spec);
  assert_contains (kvm, "<domain type='kvm'");
  assert_contains (kvm, "host-passthrough");
  assert_lacks (kvm, "tb-cache");
}

static void
test_owner (void)
{
  BoxLibvirtOwner owner = { .role = "sandbox", .state_dir = "/data/it's", .vm_dir = "/vms",
                            .sandbox = "sb-abc" };
  BoxLibvirtDomainSpec spec = base_spec ();
  g_autofree char *plain = box_libvirt_owner_xml (&owner, FALSE);
  g_autofree char *xml = NULL;

  g_assert_cmpstr (plain, ==, "<vm role='sandbox' state-dir='/data/it&apos;s' vm-dir='/vms' "
                   "sandbox='sb-abc'/>");
  spec.owner = &owner;
  xml = box_libvirt_domain_xml (&spec);
  assert_contains (xml, "<metadata><box:vm xmlns:box='urn:box:libvirt:1' role='sandbox'");
  /* without a state directory nobody could tell it is an orphan: no metadata */
  owner.state_dir = NULL;
  g_clear_pointer (&xml, g_free);
  xml = box_libvirt_domain_xml (&spec);
  assert_lacks (xml, "<metadata>");
}

static void
test_cmdline (void)
{
  char *dns[] = { "10.0.0.1", "10.0.0.2", NULL };
  BoxNetAttachment net = {
    .ifname = "tap0", .mac = "52:54:00:00:00:02", .address = "10.1.2.6", .prefix = 30,
    .gateway = "10.1.2.5", .dns = dns,
  };
  g_autofree char *plain = box_libvirt_kernel_cmdline ("my-box", NULL);
  g_autofree char *with_net = box_libvirt_kernel_cmdline ("my-box", &net);

  g_assert_cmpstr (plain, ==, "console=ttyS0 panic=-1 quiet box.hostname=my-box");
  g_assert_cmpstr (with_net, ==, "console=ttyS0 panic=-1 quiet box.hostname=my-box "
                   "box.ip=10.1.2.6/30 box.gw=10.1.2.5 box.dns=10.0.0.1");
}

static void
test_ids (void)
{
  g_autofree char *a = box_libvirt_new_vm_id ();
  g_autofree char *b = box_libvirt_new_vm_id ();
  g_autofree char *domain = box_libvirt_vm_domain_name (a);
  g_autofree char *path = box_libvirt_vm_path ("/v", a, "disk.qcow2");
  g_autofree char *expected = g_strdup_printf ("/v/vms/%s/disk.qcow2", a);

  g_assert_cmpuint (strlen (a), ==, 12);
  g_assert_true (box_sandbox_id_is_valid (a));
  g_assert_cmpstr (a, !=, b);
  g_assert_true (g_str_has_prefix (domain, "box-"));
  g_assert_cmpstr (path, ==, expected);
  g_assert_true (box_sandbox_id_is_valid ("sb-abcdefghijkl"));
  g_assert_false (box_sandbox_id_is_valid (""));
  g_assert_false (box_sandbox_id_is_valid ("../etc"));
  g_assert_false (box_sandbox_id_is_valid ("SB-1"));
  g_assert_false (box_sandbox_id_is_valid (NULL));
}

static void
test_state_file (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("box-libvirt-unit-XXXXXX", &error);
  g_autofree char *path = NULL;
  BoxLibvirtVm *vm;
  BoxLibvirtVm *loaded;

  g_assert_no_error (error);
  vm = box_libvirt_vm_new ("sb-aaaaaaaaaaaa");
  vm->vm_id = g_strdup ("bbbbbbbbbbbb");
  vm->state = BOX_VM_STATE_SUSPENDED;
  vm->cold = TRUE;
  vm->snapshot_at = 1234567;
  vm->resources = (BoxResources) { 3, 1536, 7 };
  g_free (vm->template_key);
  vm->template_key = g_strdup ("0123456789abcdef");
  g_free (vm->hostname);
  vm->hostname = g_strdup ("happy-box");
  vm->nic = TRUE;
  g_assert_true (box_libvirt_vm_save (vm, dir, &error));
  g_assert_no_error (error);

  path = g_build_filename (dir, "sb-aaaaaaaaaaaa.json", NULL);
  loaded = box_libvirt_vm_load ("sb-aaaaaaaaaaaa", dir, &error);
  g_assert_no_error (error);
  g_assert_nonnull (loaded);
  g_assert_cmpstr (loaded->vm_id, ==, "bbbbbbbbbbbb");
  g_assert_cmpint (loaded->state, ==, BOX_VM_STATE_SUSPENDED);
  g_assert_true (loaded->cold);
  g_assert_cmpint (loaded->snapshot_at, ==, 1234567);
  g_assert_cmpuint (loaded->resources.cpus, ==, 3);
  g_assert_cmpuint (loaded->resources.memory_mib, ==, 1536);
  g_assert_cmpuint (loaded->resources.disk_gib, ==, 7);
  g_assert_cmpstr (loaded->template_key, ==, "0123456789abcdef");
  g_assert_cmpstr (loaded->hostname, ==, "happy-box");
  g_assert_true (loaded->nic);
  box_libvirt_vm_free (loaded);

  /* a broken file is an error, not a crash */
  g_assert_true (g_file_set_contents (path, "{\"vm\": \"../x\"}", -1, NULL));
  loaded = box_libvirt_vm_load ("sb-aaaaaaaaaaaa", dir, &error);
  g_assert_null (loaded);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);
  g_assert_true (g_file_set_contents (path, "{\"vm\": \"bbbbbbbbbbbb\", \"state\": \"odd\"}",
                                      -1, NULL));
  loaded = box_libvirt_vm_load ("sb-aaaaaaaaaaaa", dir, &error);
  g_assert_null (loaded);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);

  box_libvirt_vm_forget ("sb-aaaaaaaaaaaa", dir);
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  box_libvirt_vm_free (vm);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

static void
test_image (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("box-libvirt-image-XXXXXX", &error);
  g_autofree char *real = NULL;
  g_autofree char *link = NULL;
  g_autoptr(BoxLibvirtImage) image = NULL;
  const char *files[] = { "vmlinuz", "initrd.img", "rootfs.ext4" };

  g_assert_no_error (error);
  /* nothing built: the error says how to build it */
  image = box_libvirt_image_load (dir, &error);
  g_assert_null (image);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_nonnull (strstr (error->message, "images/build-base.sh"));
  g_clear_error (&error);

  real = g_build_filename (dir, "base-1234", NULL);
  link = g_build_filename (dir, "base", NULL);
  g_assert_cmpint (g_mkdir (real, 0755), ==, 0);
  g_assert_cmpint (symlink ("base-1234", link), ==, 0);
  for (guint i = 0; i < G_N_ELEMENTS (files); i++) {
    g_autofree char *path = g_build_filename (real, files[i], NULL);
    g_assert_true (g_file_set_contents (path, "12345678", -1, NULL));
  }
  {
    g_autofree char *manifest = g_build_filename (real, "manifest.json", NULL);
    g_assert_true (g_file_set_contents (manifest,
                                        "{\"image_key\": \"k1\", \"resources\": "
                                        "{\"cpus\": 2, \"memory_mib\": 2048, \"disk_gib\": 20}}",
                                        -1, NULL));
  }
  image = box_libvirt_image_load (dir, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (image->key, ==, "k1");
  g_assert_cmpuint (image->rootfs_bytes, ==, 8);
  g_assert_cmpuint (image->resources.memory_mib, ==, 2048);
  g_assert_true (g_str_has_suffix (image->kernel, "base-1234/vmlinuz"));
  box_libvirt_remove_tree (dir, &error);
  g_assert_no_error (error);
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
}

/* ---- QEMU's uids ---- */

static char *
make_vm_dirs (void)
{
  g_autoptr(GError) error = NULL;
  char *root = g_dir_make_tmp ("box-libvirt-uids-XXXXXX", &error);
  g_autofree char *vms = g_build_filename (root, "vms", NULL);
  g_autofree char *templates = g_build_filename (root, "templates", NULL);

  g_assert_no_error (error);
  g_assert_cmpint (g_mkdir (vms, 0711), ==, 0);
  g_assert_cmpint (g_mkdir (templates, 0711), ==, 0);
  return root;
}

static void
test_uid_range (void)
{
  g_autoptr(GError) error = NULL;
  guint first = 0, last = 0;
  const char *bad[] = { "", "5", "10-5", "0-5", "a-b", "1-2-3", "5-2147483647", NULL };

  g_assert_true (box_libvirt_uid_range_parse (BOX_LIBVIRT_UID_RANGE, &first, &last, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (first, ==, 1879048192);
  g_assert_cmpuint (last, ==, 1879113727);
  g_assert_true (box_libvirt_uid_range_parse ("7-7", &first, &last, &error));
  g_assert_cmpuint (first, ==, 7);
  g_assert_cmpuint (last, ==, 7);
  for (guint i = 0; bad[i] != NULL; i++) {
    g_assert_false (box_libvirt_uid_range_parse (bad[i], &first, &last, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    g_clear_error (&error);
  }
}

static void
test_uid_pool (void)
{
  g_autofree char *root = make_vm_dirs ();
  g_autofree char *a = g_build_filename (root, "vms", "aaa", NULL);
  g_autofree char *b = g_build_filename (root, "vms", "bbb", NULL);
  g_autofree char *build = g_build_filename (root, "templates", "k.tmp-ccc", NULL);
  g_autofree char *c = g_build_filename (root, "vms", "ccc", NULL);
  g_autofree char *disk = g_build_filename (a, "disk.qcow2", NULL);
  g_autofree char *marker = g_build_filename (a, BOX_LIBVIRT_UID_FILE, NULL);
  g_autoptr(GError) error = NULL;
  guint uid_a = 0, uid_b = 0, uid_build = 0, uid_c = 0;
  GStatBuf st;

  /* one uid per VM directory, the lowest free first */
  g_assert_true (box_libvirt_vm_dir_claim (root, a, 500, 502, &uid_a, &error));
  g_assert_no_error (error);
  g_assert_true (box_libvirt_vm_dir_claim (root, b, 500, 502, &uid_b, &error));
  g_assert_cmpuint (uid_a, ==, 500);
  g_assert_cmpuint (uid_b, ==, 501);
  g_assert_cmpuint (box_libvirt_vm_dir_uid (a), ==, 500);
  /* the directory is root's, 0711; the record is root's too */
  g_assert_cmpint (g_stat (a, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 07777, ==, 0711);
  g_assert_cmpint (g_stat (marker, &st), ==, 0);
  g_assert_cmpuint (st.st_uid, ==, getuid ());
  /* template builds take one too */
  g_assert_true (box_libvirt_vm_dir_claim (root, build, 500, 502, &uid_build, &error));
  g_assert_cmpuint (uid_build, ==, 502);

  /* exhausted: a capacity error, and no directory made */
  g_assert_false (box_libvirt_vm_dir_claim (root, c, 500, 502, &uid_c, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CAPACITY);
  g_clear_error (&error);
  g_assert_false (g_file_test (c, G_FILE_TEST_EXISTS));

  /* a restarted boxd (nothing in memory) finds the same uids taken */
  g_assert_cmpuint (box_libvirt_uids_taken (root, 500, 502), ==, 3);
  g_assert_cmpuint (box_libvirt_uids_taken (root, 501, 501), ==, 1);

  /* a uid is free again once its VM's directory is gone */
  g_assert_true (g_file_set_contents (disk, "x", -1, NULL));
  g_assert_true (box_libvirt_remove_tree (a, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (box_libvirt_uids_taken (root, 500, 502), ==, 2);
  g_assert_true (box_libvirt_vm_dir_claim (root, c, 500, 502, &uid_c, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (uid_c, ==, 500);

  box_libvirt_remove_tree (root, &error);
  g_assert_no_error (error);
}

/* Makes @dir's entries impossible to remove (and back): a read-only mode
 * for a user, the immutable attribute for root.  FALSE when it cannot. */
static gboolean
set_stuck (const char *dir, gboolean stuck)
{
  int fd, flags = 0;
  gboolean ok;

  if (getuid () != 0)
    return g_chmod (dir, stuck ? 0500 : 0755) == 0;
  fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return FALSE;
  ok = ioctl (fd, FS_IOC_GETFLAGS, &flags) == 0;
  flags = stuck ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
  ok = ok && ioctl (fd, FS_IOC_SETFLAGS, &flags) == 0;
  close (fd);
  return ok;
}

/* remove_tree removes the uid record after every other file: a removal
 * that fails half-way leaves the uid taken */
static void
test_uid_record_last (void)
{
  g_autofree char *root = make_vm_dirs ();
  g_autofree char *a = g_build_filename (root, "vms", "aaa", NULL);
  g_autofree char *sub = g_build_filename (a, "zzz", NULL);
  g_autofree char *stuck = g_build_filename (sub, "file", NULL);
  g_autofree char *b = g_build_filename (root, "vms", "bbb", NULL);
  g_autofree char *marker = g_build_filename (a, BOX_LIBVIRT_UID_FILE, NULL);
  g_autoptr(GError) error = NULL;
  guint uid = 0;

  g_assert_true (box_libvirt_vm_dir_claim (root, a, 500, 500, &uid, &error));
  g_assert_cmpint (g_mkdir (sub, 0755), ==, 0);
  g_assert_true (g_file_set_contents (stuck, "x", -1, NULL));
  if (!set_stuck (sub, TRUE)) {
    g_test_skip ("cannot make a file that resists removal here");
    box_libvirt_remove_tree (root, NULL);
    return;
  }
  g_assert_false (box_libvirt_remove_tree (a, &error));
  g_clear_error (&error);
  g_assert_true (g_file_test (marker, G_FILE_TEST_EXISTS));
  /* its only uid is still taken */
  g_assert_false (box_libvirt_vm_dir_claim (root, b, 500, 500, &uid, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CAPACITY);
  g_clear_error (&error);
  g_assert_true (set_stuck (sub, FALSE));
  g_assert_true (box_libvirt_remove_tree (a, &error));
  g_assert_no_error (error);
  g_assert_true (box_libvirt_vm_dir_claim (root, b, 500, 500, &uid, &error));
  g_assert_cmpuint (uid, ==, 500);
  g_assert_true (box_libvirt_remove_tree (root, &error));
}

/* ---- allow_tcg ---- */

static void
op_done_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GError **error = user_data;

  g_assert_false (box_libvirt_op_finish (BOX_LIBVIRT_PLUGIN (source), result, error));
}

static void
test_tcg_refused (void)
{
  g_autoptr(BoxLibvirtPlugin) plugin = g_object_new (BOX_TYPE_LIBVIRT_PLUGIN, NULL);
  BoxVmRequest request = { .sandbox_id = "sb-abc" };
  const BoxVmOp starts[] = { BOX_VM_OP_CREATE, BOX_VM_OP_RESUME, BOX_VM_OP_BOOT };

  plugin->image = g_new0 (BoxLibvirtImage, 1);
  plugin->accel = g_strdup ("tcg");
  plugin->started = TRUE;
  plugin->config.allow_tcg = TRUE;
  g_assert_false (box_libvirt_tcg_refused (plugin));
  plugin->config.allow_tcg = FALSE;
  g_assert_true (box_libvirt_tcg_refused (plugin));

  for (guint i = 0; i < G_N_ELEMENTS (starts); i++) {
    g_autoptr(GError) error = NULL;

    box_libvirt_op_async (plugin, starts[i], &request, NULL, op_done_cb, &error);
    while (error == NULL)
      g_main_context_iteration (NULL, TRUE);
    g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
    g_assert_nonnull (strstr (error->message, "allow_tcg"));
    g_assert_nonnull (strstr (error->message, "not a security boundary"));
  }
  /* what starts no QEMU is not refused (no such VM here) */
  {
    g_autoptr(GError) error = NULL;
    box_libvirt_op_async (plugin, BOX_VM_OP_SHUTDOWN, &request, NULL, op_done_cb, &error);
    while (error == NULL)
      g_main_context_iteration (NULL, TRUE);
    g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  }

  /* with KVM nothing is refused */
  g_free (plugin->accel);
  plugin->accel = g_strdup ("kvm");
  g_assert_false (box_libvirt_tcg_refused (plugin));
  plugin->started = FALSE;
}

/* A memory checkpoint copies RAM while the guest runs under KVM, and under
 * TCG only for a RAM block that is no multiple of 256 KiB (QEMU's
 * page-by-page dirty sync, which resets the TLB entries; its other path
 * loses writes before 9.0).  A VM booted under TCG gets such a block. */
static void
test_live_ram_copy (void)
{
  guint64 kib;

  g_assert_true (box_libvirt_live_ram_copy_for ("kvm", G_GUINT64_CONSTANT (2048) << 20));
  g_assert_true (box_libvirt_live_ram_copy_for ("kvm", 0));
  g_assert_false (box_libvirt_live_ram_copy_for ("tcg", G_GUINT64_CONSTANT (2048) << 20));
  g_assert_false (box_libvirt_live_ram_copy_for ("tcg", 256 * 1024));
  g_assert_false (box_libvirt_live_ram_copy_for ("tcg", 0));      /* unknown */
  g_assert_false (box_libvirt_live_ram_copy_for (NULL, 8192));    /* not chosen: not KVM */
  g_assert_true (box_libvirt_live_ram_copy_for ("tcg", (G_GUINT64_CONSTANT (2048) << 20) + 8192));
  g_assert_true (box_libvirt_live_ram_copy_for ("tcg", 128 * 1024));

  kib = box_libvirt_ram_kib_for_boot ("tcg", 2048);
  g_assert_cmpuint (kib, ==, 2048 * 1024 + BOX_LIBVIRT_TCG_RAM_PAD_KIB);
  g_assert_true (box_libvirt_live_ram_copy_for ("tcg", kib * 1024));
  g_assert_cmpuint (box_libvirt_ram_kib_for_boot ("kvm", 2048), ==, 2048 * 1024);
  g_assert_cmpuint (box_libvirt_ram_kib_for_boot ("tcg", 256), ==, 256 * 1024 + 8);
}

/* The head of a migration stream as QEMU 7.2 writes it (magic, version,
 * the machine, the "ram" section's block list): the RAM block's size. */
static void
test_stream_ram_kib (void)
{
  static const guint8 head[] = {
    'Q', 'E', 'V', 'M', 0, 0, 0, 3, 7, 0, 0, 0, 10, 'p', 'c', '-', 'q', '3', '5', '-',
    '7', '.', '2', 1, 0, 0, 0, 2, 3, 'r', 'a', 'm', 0, 0, 0, 0, 0, 0, 0, 4,
    0, 0, 0, 0, 4, 8, 0x40, 4,
    7, 'b', 'o', 'x', '-', 'r', 'a', 'm', 0, 0, 0, 0, 4, 0, 0x20, 0,
    20, '/', 'r', 'o', 'm', '@', 'e', 't', 'c',
  };
  g_autofree char *dir = g_dir_make_tmp ("box-ram-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "state", NULL);
  g_autofree guint8 *copy = g_memdup2 (head, sizeof head);

  g_assert_cmpuint (box_libvirt_stream_ram_kib (head, sizeof head), ==, 64 * 1024 + 8);
  /* cut before the length, not a stream, a length that is no page multiple */
  g_assert_cmpuint (box_libvirt_stream_ram_kib (head, 60), ==, 0);
  g_assert_cmpuint (box_libvirt_stream_ram_kib ((const guint8 *) "QEVX\0\0\0\3", 8), ==, 0);
  copy[63] = 1;
  g_assert_cmpuint (box_libvirt_stream_ram_kib (copy, sizeof head), ==, 0);
  /* from a file, and a RAM file's size */
  g_assert_cmpuint (box_libvirt_state_ram_kib (path), ==, 0);
  g_assert_true (g_file_set_contents (path, (const char *) head, sizeof head, NULL));
  g_assert_cmpuint (box_libvirt_state_ram_kib (path), ==, 64 * 1024 + 8);
  g_assert_cmpuint (box_libvirt_file_ram_kib (path), ==, 0);
  g_assert_cmpint (truncate (path, (off_t) (2048 * 1024 + 8) * 1024), ==, 0);
  g_assert_cmpuint (box_libvirt_file_ram_kib (path), ==, 2048 * 1024 + 8);
  g_unlink (path);
  g_rmdir (dir);
}

/* The start sweeps and queues (to materialise) only the checkpoints of this
 * boxd's own sandboxes: another boxd's in a shared vm_dir are left alone. */
static void
test_materialise_sweep_own (void)
{
  g_autoptr(BoxLibvirtPlugin) plugin = g_object_new (BOX_TYPE_LIBVIRT_PLUGIN, NULL);
  g_autofree char *root = g_dir_make_tmp ("box-libvirt-sweep-XXXXXX", NULL);
  g_autofree char *ours = g_build_filename (root, "state", "sb-aaaaaaaaaaaa.json", NULL);
  const char *const ids[] = { "sb-aaaaaaaaaaaa", "sb-bbbbbbbbbbbb" };   /* ours, another's */
  gboolean ram_left[2];

  plugin->config.vm_dir = g_strdup (root);
  plugin->config.checkpoint_materialise = TRUE;
  plugin->state_dir = g_build_filename (root, "state", NULL);
  g_assert_cmpint (g_mkdir (plugin->state_dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (ours, "{}", -1, NULL));
  for (guint i = 0; i < G_N_ELEMENTS (ids); i++) {
    g_autofree char *dir = box_libvirt_checkpoint_dir (plugin, ids[i], "v1");
    g_autofree char *manifest = g_build_filename (dir, "manifest.json", NULL);
    g_autofree char *ram = g_build_filename (dir, "ram", NULL);

    g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
    g_assert_true (g_file_set_contents (manifest, "{\"memory\": true, \"cpus\": 1, "
                                        "\"memory_mib\": 256}", -1, NULL));
    /* a RAM file without "ram" in the manifest: a job cut midway, or
     * another boxd's job under way */
    g_assert_true (g_file_set_contents (ram, "x", -1, NULL));
    box_libvirt_materialise_sweep (plugin, dir, ids[i], "v1");
    ram_left[i] = g_file_test (ram, G_FILE_TEST_EXISTS);
  }
  g_assert_false (ram_left[0]);
  g_assert_true (ram_left[1]);
  g_assert_cmpuint (g_queue_get_length (&plugin->materialise_queue), ==, 1);
  g_assert_cmpstr (g_queue_peek_head (&plugin->materialise_queue), ==, "sb-aaaaaaaaaaaa\nv1");
  g_assert_true (box_libvirt_remove_tree (root, NULL));
}

/* [plugin.libvirt] as @pairs ("key", "value", ..., NULL), loaded. */
static gboolean
load_config (BoxLibvirtConfig *config, GError **error, ...)
{
  g_autoptr(BoxEngine) engine = box_engine_new (box_config_new ());
  g_autoptr(BoxPluginContext) context = NULL;
  g_autoptr(BoxLibvirtPlugin) plugin = NULL;
  const char *key;
  va_list ap;

  va_start (ap, error);
  while ((key = va_arg (ap, const char *)) != NULL)
    g_key_file_set_string (box_engine_get_config (engine)->keyfile, "plugin.libvirt", key,
                           va_arg (ap, const char *));
  va_end (ap);
  context = box_engine_new_plugin_context (engine, "libvirt");
  plugin = g_object_new (BOX_TYPE_LIBVIRT_PLUGIN, "name", "libvirt", "context", context, NULL);
  return box_libvirt_config_load (BOX_PLUGIN (plugin), config, error);
}

/* The warm pool's settings (and checkpoint_materialise): defaults, and bad
 * values refused at start. */
/* A pool domain warms up without set-env: the agent starts the template's
 * services at its first set-env, which must be the sandbox's (the create's),
 * or they would run with the pool's empty env. */
static void
test_pool_warm_steps (void)
{
  g_assert_cmpuint (BOX_LIBVIRT_POOL_WARM_STEPS & BOX_LIBVIRT_GUEST_ENV, ==, 0);
  g_assert_cmpuint (BOX_LIBVIRT_POOL_WARM_STEPS & BOX_LIBVIRT_GUEST_EXEC, !=, 0);
}

static void
test_pool_config (void)
{
  const char *bad[][2] = {
    { "pool_max_size", "1" },        /* below pool_size (2) */
    { "pool_max_size", "257" },
    { "pool_idle_s", "0" },
    { "pool_idle_s", "86401" },
    { "pool_fill_jobs", "0" },
    { "pool_fill_jobs", "17" },
    { "pool_memory_mib", "-1" },
    { "pool_memory_mib", "lots" },
    { "checkpoint_materialise", "maybe" },
    { "checkpoint_ready", "2" },
    { "checkpoint_ready_max", "0" },
    { "checkpoint_ready_max", "65" },
    { "cold_standby", "often" },
    { "ram_fault_in", "yes please" },
  };
  BoxLibvirtConfig config = { 0 };
  g_autoptr(GError) error = NULL;

  if (getpwnam ("libvirt-qemu") == NULL || getgrnam ("kvm") == NULL) {
    g_test_skip ("no libvirt-qemu user or kvm group (libvirt is not installed)");
    return;
  }
  g_assert_true (load_config (&config, &error, NULL));
  g_assert_no_error (error);
  g_assert_cmpuint (config.pool_size, ==, 2);
  g_assert_cmpuint (config.pool_max_size, ==, 64);
  g_assert_cmpuint (config.pool_memory_mib, ==, 0);
  g_assert_cmpuint (config.pool_idle_s, ==, 120);
  g_assert_cmpuint (config.pool_fill_jobs, ==, 2);
  g_assert_true (config.checkpoint_materialise);
  g_assert_true (load_config (&config, &error, "checkpoint_materialise", "false", NULL));
  g_assert_false (config.checkpoint_materialise);
  g_assert_true (config.checkpoint_ready);
  g_assert_true (load_config (&config, &error, "checkpoint_ready", "false", NULL));
  g_assert_false (config.checkpoint_ready);
  g_assert_cmpuint (config.checkpoint_ready_max, ==, 10);
  g_assert_true (load_config (&config, &error, "checkpoint_ready_max", "3", NULL));
  g_assert_cmpuint (config.checkpoint_ready_max, ==, 3);
  g_assert_true (config.cold_standby);
  g_assert_true (load_config (&config, &error, "cold_standby", "false", NULL));
  g_assert_false (config.cold_standby);
  g_assert_true (config.ram_fault_in);
  g_assert_true (load_config (&config, &error, "ram_fault_in", "false", NULL));
  g_assert_false (config.ram_fault_in);
  /* the default ceiling is the highest floor */
  g_assert_true (load_config (&config, &error, "pool_size", "64", NULL));
  g_assert_cmpuint (config.pool_max_size, ==, 64);
  g_assert_true (load_config (&config, &error, "pool_size", "0", "pool_max_size", "0",
                              "pool_memory_mib", "512", "pool_idle_s", "2",
                              "pool_fill_jobs", "1", NULL));
  g_assert_no_error (error);
  g_assert_cmpuint (config.pool_max_size, ==, 0);
  g_assert_cmpuint (config.pool_memory_mib, ==, 512);
  g_assert_cmpuint (config.pool_idle_s, ==, 2);
  g_assert_cmpuint (config.pool_fill_jobs, ==, 1);
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_assert_false (load_config (&config, &error, bad[i][0], bad[i][1], NULL));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    g_assert_nonnull (strstr (error->message, bad[i][0]));
    g_clear_error (&error);
  }
  box_libvirt_config_clear (&config);
}

/* Checkpoint IDs become file names: nothing that could leave the directory. */
static void
test_checkpoint_ids (void)
{
  const char *const good[] = { "v1", "auto-12", "My_Checkpoint-3", NULL };
  const char *const bad[] = { "", "../v1", "v1.tmp-x", "a/b", "v 1", ".", NULL };
  g_autofree char *long_id = g_strnfill (65, 'a');

  for (guint i = 0; good[i] != NULL; i++)
    g_assert_true (box_libvirt_checkpoint_id_is_valid (good[i]));
  for (guint i = 0; bad[i] != NULL; i++)
    g_assert_false (box_libvirt_checkpoint_id_is_valid (bad[i]));
  g_assert_false (box_libvirt_checkpoint_id_is_valid (NULL));
  g_assert_false (box_libvirt_checkpoint_id_is_valid (long_id));
  long_id[64] = '\0';
  g_assert_true (box_libvirt_checkpoint_id_is_valid (long_id));
}

/* A sparse copy has the same bytes and keeps the holes. */
static void
test_copy_sparse (void)
{
  g_autofree char *dir = g_dir_make_tmp ("box-libvirt-copy-XXXXXX", NULL);
  g_autofree char *src = g_build_filename (dir, "src", NULL);
  g_autofree char *dst = g_build_filename (dir, "dst", NULL);
  g_autofree char *a = NULL;
  g_autofree char *b = NULL;
  g_autoptr(GError) error = NULL;
  gsize len_a = 0, len_b = 0;
  GStatBuf st;
  char block[4096];
  int fd;

  g_assert_nonnull (dir);
  fd = open (src, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  g_assert_cmpint (fd, >=, 0);
  memset (block, 'x', sizeof block);
  /* data at 0, a 64 MiB hole, data, a hole to the end */
  g_assert_cmpint (pwrite (fd, block, sizeof block, 0), ==, sizeof block);
  g_assert_cmpint (pwrite (fd, block, sizeof block, 64 << 20), ==, sizeof block);
  g_assert_cmpint (ftruncate (fd, 128 << 20), ==, 0);
  close (fd);

  g_assert_true (box_libvirt_copy_sparse (src, dst, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (src, &a, &len_a, NULL));
  g_assert_true (g_file_get_contents (dst, &b, &len_b, NULL));
  g_assert_cmpuint (len_a, ==, 128 << 20);
  g_assert_cmpmem (a, len_a, b, len_b);
  g_assert_cmpint (g_stat (dst, &st), ==, 0);
  g_assert_cmpuint ((guint64) st.st_blocks * 512, <, 1 << 20);
  g_assert_cmpuint (box_libvirt_file_allocated (dst), ==, (guint64) st.st_blocks * 512);

  /* never over an existing file; a missing source leaves nothing */
  g_assert_false (box_libvirt_copy_sparse (src, dst, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);
  g_unlink (dst);
  g_unlink (src);
  g_assert_false (box_libvirt_copy_sparse (src, dst, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_false (g_file_test (dst, G_FILE_TEST_EXISTS));
  g_rmdir (dir);
}

/* The end of a VM's console, as errors quote it: the last bytes of the
 * file only, escapes and control bytes (NULs too) folded, bounded. */
static void
test_console_tail (void)
{
  g_autofree char *dir = g_dir_make_tmp ("box-console-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "console.log", NULL);
  g_autofree char *missing = box_libvirt_console_file_tail (path, 300);
  g_autofree char *tail = NULL;
  g_autofree char *short_tail = NULL;
  g_autoptr(GString) text = g_string_new (NULL);

  g_assert_cmpstr (missing, ==, "");
  /* 100 KiB of boot noise, then the panic with a colour escape, a NUL and
   * line ends */
  for (guint i = 0; i < 2000; i++)
    g_string_append (text, "[    1.000000] boot line that scrolls away\r\n");
  g_string_append (text, "\033[1;31mKernel panic\033[0m - not syncing:");
  {
    static const char end[] = "\0\t Attempted to kill init!\r\n";

    g_string_append_len (text, end, sizeof end - 1);
  }
  g_assert_true (g_file_set_contents (path, text->str, (gssize) text->len, NULL));

  tail = box_libvirt_console_file_tail (path, 300);
  g_assert_cmpuint (strlen (tail), <=, 300);
  g_assert_true (g_str_has_suffix (tail, "Kernel panic - not syncing: Attempted to kill init!"));
  for (const char *p = tail; *p != '\0'; p++)
    g_assert_true (g_ascii_isprint (*p));
  short_tail = box_libvirt_console_file_tail (path, 20);
  g_assert_cmpstr (short_tail, ==, "Attempted to kill init!" + 3);
  g_unlink (path);
  g_rmdir (dir);
}

/* Two boxds that built the same template snapshot at once: the first to
 * finish keeps it; the second drops its own build rather than replace
 * files that forks of the first may already back onto. */
static void
test_template_install (void)
{
  g_autofree char *root = g_dir_make_tmp ("box-tmpl-XXXXXX", NULL);
  g_autofree char *dir = g_build_filename (root, "k", NULL);
  g_autofree char *first = g_build_filename (root, "k.tmp-aaa", NULL);
  g_autofree char *second = g_build_filename (root, "k.tmp-bbb", NULL);
  g_autofree char *manifest = g_build_filename (dir, "manifest.json", NULL);
  g_autofree char *lock = g_strconcat (dir, ".lock", NULL);
  g_autofree char *kept = NULL;
  g_autoptr(GError) error = NULL;
  const char *builds[] = { first, second };

  for (guint i = 0; i < G_N_ELEMENTS (builds); i++) {
    g_autofree char *m = g_build_filename (builds[i], "manifest.json", NULL);

    g_assert_cmpint (g_mkdir (builds[i], 0700), ==, 0);
    g_assert_true (g_file_set_contents (m, i == 0 ? "first" : "second", -1, NULL));
  }
  /* a half-removed directory (no manifest) is replaced */
  g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);
  g_assert_true (box_libvirt_template_install (first, dir, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (first, G_FILE_TEST_EXISTS));
  g_assert_true (box_libvirt_template_install (second, dir, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (second, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_get_contents (manifest, &kept, NULL, NULL));
  g_assert_cmpstr (kept, ==, "first");
  g_assert_true (box_libvirt_remove_tree (dir, NULL));
  g_unlink (lock);
  g_rmdir (root);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/libvirt/xml/fork", test_xml_fork);
  g_test_add_func ("/libvirt/xml/variants", test_xml_variants);
  g_test_add_func ("/libvirt/cmdline", test_cmdline);
  g_test_add_func ("/libvirt/owner", test_owner);
  g_test_add_func ("/libvirt/ids", test_ids);
  g_test_add_func ("/libvirt/state-file", test_state_file);
  g_test_add_func ("/libvirt/image", test_image);
  g_test_add_func ("/libvirt/uids/range", test_uid_range);
  g_test_add_func ("/libvirt/uids/pool", test_uid_pool);
  g_test_add_func ("/libvirt/uids/record-last", test_uid_record_last);
  g_test_add_func ("/libvirt/tcg-refused", test_tcg_refused);
  g_test_add_func ("/libvirt/live-ram-copy", test_live_ram_copy);
  g_test_add_func ("/libvirt/stream-ram-kib", test_stream_ram_kib);
  g_test_add_func ("/libvirt/materialise-sweep-own", test_materialise_sweep_own);
  g_test_add_func ("/libvirt/pool-config", test_pool_config);
  g_test_add_func ("/libvirt/pool-warm-steps", test_pool_warm_steps);
  g_test_add_func ("/libvirt/checkpoint-ids", test_checkpoint_ids);
  g_test_add_func ("/libvirt/copy-sparse", test_copy_sparse);
  g_test_add_func ("/libvirt/console-tail", test_console_tail);
  g_test_add_func ("/libvirt/template-install", test_template_install);
  return g_test_run ();
}
