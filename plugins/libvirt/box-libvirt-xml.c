/* box-libvirt-xml.c: the domain XML of a sandbox VM, and its kernel command line.
 *
 * Every domain has the same devices in the same order, whether it boots, is
 * a template being built or restores a snapshot: a restore needs exactly
 * the device layout the snapshot was taken with (libvirt assigns the same
 * PCI addresses to the same device list).  Only the NIC is optional, and
 * whether there is one is part of a template snapshot's key.
 *
 * The RAM is an object of our own (`-object memory-backend-file|ram` with
 * id box-ram, `-machine memory-backend=box-ram`) rather than libvirt's
 * <memoryBacking>: a template's RAM must live in a file we name and keep
 * (libvirt picks the path of its file-backed RAM and deletes it at
 * destroy), and forks map that file privately.  libvirt still creates its
 * own pc.ram object; it is never used, so it costs address space only.
 *
 * Confinement is libvirt's: each VM's QEMU runs as a uid of its own
 * (box-libvirt-uids.c) and QEMU's group (a static DAC label, relabel='no':
 * we own our files and chown them ourselves, so libvirt does not change
 * the ownership of shared backing files and kernels at every start and
 * stop), with QEMU's seccomp sandbox (qemu.conf seccomp_sandbox=1, libvirt's
 * default: -sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,
 * resourcecontrol=deny), a console bounded by virtlogd and, where the host
 * has them, libvirt's cgroups: the
 * vCPU quota is set here, the memory hard limit once the domain runs
 * (box_libvirt_domain_limit_memory): with <memtune> in the XML libvirt also
 * raises QEMU's RLIMIT_MEMLOCK to the limit, which needs CAP_SYS_RESOURCE,
 * which a container may lack.
 */
#include "config.h"

#include "box-libvirt-private.h"

char *
box_libvirt_kernel_cmdline (const char *hostname, const BoxNetAttachment *net)
{
  GString *str = g_string_new ("console=ttyS0 panic=-1 quiet");

  if (hostname != NULL && hostname[0] != '\0')
    g_string_append_printf (str, " box.hostname=%s", hostname);
  if (net != NULL && net->address != NULL) {
    g_string_append_printf (str, " box.ip=%s/%u", net->address, net->prefix);
    if (net->gateway != NULL)
      g_string_append_printf (str, " box.gw=%s", net->gateway);
    if (net->dns != NULL && net->dns[0] != NULL)
      g_string_append_printf (str, " box.dns=%s", net->dns[0]);
  }
  return g_string_free (str, FALSE);
}

static void
append_escaped (GString *xml, const char *format, ...) G_GNUC_PRINTF (2, 3);

static void
append_escaped (GString *xml, const char *format, ...)
{
  va_list args;
  g_autofree char *text = NULL;

  va_start (args, format);
  text = g_markup_vprintf_escaped (format, args);
  va_end (args);
  g_string_append (xml, text);
}

char *
box_libvirt_domain_xml (const BoxLibvirtDomainSpec *spec)
{
  GString *xml = g_string_new (NULL);
  gboolean kvm = g_strcmp0 (spec->accel, "kvm") == 0;
  g_autofree char *ram_object = NULL;
  guint64 ram_kib;

  g_string_append (xml, "<domain type='");
  g_string_append (xml, kvm ? "kvm" : "qemu");
  g_string_append (xml, "' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n");
  append_escaped (xml, "  <name>%s</name>\n", spec->name);
  if (spec->owner != NULL && spec->owner->state_dir != NULL) {
    g_autofree char *owner = box_libvirt_owner_xml (spec->owner, TRUE);
    g_string_append_printf (xml, "  <metadata>%s</metadata>\n", owner);
  }
  g_string_append_printf (xml, "  <memory unit='MiB'>%u</memory>\n", spec->memory_mib);
  g_string_append_printf (xml, "  <vcpu>%u</vcpu>\n", spec->cpus);
  /* cgroups: the VM's CPUs at most, its RAM plus QEMU's own needs */
  g_string_append_printf (xml,
                          "  <cputune><global_period>100000</global_period>"
                          "<global_quota>%u</global_quota></cputune>\n",
                          spec->cpus * 100000);
  g_string_append (xml, "  <os>\n    <type arch='x86_64' machine='q35'>hvm</type>\n");
  append_escaped (xml, "    <kernel>%s</kernel>\n", spec->kernel);
  append_escaped (xml, "    <initrd>%s</initrd>\n", spec->initrd);
  append_escaped (xml, "    <cmdline>%s</cmdline>\n", spec->cmdline);
  g_string_append (xml, "  </os>\n");
  g_string_append (xml, "  <features><acpi/>");
  if (!kvm && spec->tb_cache_mib > 0)
    g_string_append_printf (xml, "<tcg><tb-cache unit='MiB'>%u</tb-cache></tcg>",
                            spec->tb_cache_mib);
  g_string_append (xml, "</features>\n");
  if (kvm)
    g_string_append (xml, "  <cpu mode='host-passthrough' check='none'/>\n");
  else
    g_string_append (xml, "  <cpu mode='custom' match='exact' check='none'>"
                          "<model fallback='forbid'>qemu64</model></cpu>\n");
  g_string_append (xml,
                   "  <clock offset='utc'/>\n"
                   "  <on_poweroff>destroy</on_poweroff>\n"
                   "  <on_reboot>destroy</on_reboot>\n"
                   "  <on_crash>destroy</on_crash>\n");
  g_string_append_printf (xml,
                          "  <seclabel type='static' model='dac' relabel='no'>"
                          "<label>+%u:+%u</label></seclabel>\n",
                          spec->uid, spec->gid);
  g_string_append (xml, "  <devices>\n    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n");
  /* writeback by default: a flush from the guest reaches the disk (and
   * QEMU flushes when the vCPUs stop, which a pause pays for); unsafe
   * drops flushes: faster pauses, but a host crash may lose or corrupt
   * what the guest had synced */
  g_string_append (xml, "    <disk type='file' device='disk'>\n");
  append_escaped (xml, "      <driver name='qemu' type='qcow2' cache='%s' discard='unmap'/>\n",
                  spec->disk_cache != NULL ? spec->disk_cache : "writeback");
  append_escaped (xml, "      <source file='%s'/>\n", spec->disk);
  g_string_append (xml,
                   "      <target dev='vda' bus='virtio'/>\n"
                   "    </disk>\n");
  switch (spec->nic) {
  case BOX_LIBVIRT_NIC_TAP:
    g_string_append (xml, "    <interface type='ethernet'>\n");
    append_escaped (xml, "      <mac address='%s'/>\n", spec->mac);
    append_escaped (xml, "      <target dev='%s' managed='no'/>\n", spec->tap);
    g_string_append (xml,
                     "      <model type='virtio'/>\n"
                     "    </interface>\n");
    break;
  case BOX_LIBVIRT_NIC_LOOSE:
    /* a tap of libvirt's own that nothing routes to: a template only needs
     * the device ('user' would add slirp's state to the snapshot) */
    g_string_append (xml,
                     "    <interface type='ethernet'>\n"
                     "      <mac address='52:54:00:00:00:01'/>\n"
                     "      <model type='virtio'/>\n"
                     "    </interface>\n");
    break;
  case BOX_LIBVIRT_NIC_NONE:
  default:
    break;
  }
  /* the console goes to virtlogd (qemu.conf stdio_handler=logd), which
   * rolls the file over at its max_size (virtlogd.conf, 2 MiB) and keeps
   * max_backups (3) old ones: a guest that floods its console fills no
   * disk.  A type='file' chardev would let QEMU write without a bound. */
  g_string_append (xml, "    <serial type='null'>\n");
  append_escaped (xml, "      <log file='%s' append='off'/>\n", spec->console_log);
  g_string_append (xml, "    </serial>\n    <channel type='unix'>\n");
  append_escaped (xml, "      <source mode='bind' path='%s'/>\n", spec->agent_socket);
  g_string_append (xml,
                   "      <target type='virtio' name='" BOX_LIBVIRT_AGENT_PORT "'/>\n"
                   "    </channel>\n"
                   "    <controller type='usb' model='none'/>\n"
                   "    <memballoon model='none'/>\n"
                   "    <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>\n"
                   "  </devices>\n"
                   "  <qemu:commandline>\n");
  ram_kib = spec->ram_kib != 0 ? spec->ram_kib : (guint64) spec->memory_mib * 1024;
  if (spec->ram_path != NULL)
    ram_object = g_strdup_printf ("memory-backend-file,id=" BOX_LIBVIRT_RAM_ID
                                  ",size=%" G_GUINT64_FORMAT "K,mem-path=%s,share=%s",
                                  ram_kib, spec->ram_path, spec->ram_shared ? "on" : "off");
  else
    ram_object = g_strdup_printf ("memory-backend-ram,id=" BOX_LIBVIRT_RAM_ID
                                  ",size=%" G_GUINT64_FORMAT "K", ram_kib);
  g_string_append (xml, "    <qemu:arg value='-object'/>\n");
  append_escaped (xml, "    <qemu:arg value='%s'/>\n", ram_object);
  g_string_append (xml,
                   "    <qemu:arg value='-machine'/>\n"
                   "    <qemu:arg value='memory-backend=" BOX_LIBVIRT_RAM_ID "'/>\n");
  /* libvirt's <memory> is whole MiB; QEMU takes the last -m, which must
   * match the backend */
  if (ram_kib % 1024 != 0)
    g_string_append_printf (xml,
                            "    <qemu:arg value='-m'/>\n"
                            "    <qemu:arg value='size=%" G_GUINT64_FORMAT "K'/>\n", ram_kib);
  if (spec->incoming)
    g_string_append (xml,
                     "    <qemu:arg value='-incoming'/>\n"
                     "    <qemu:arg value='defer'/>\n");
  g_string_append (xml, "  </qemu:commandline>\n</domain>\n");
  return g_string_free (xml, FALSE);
}
