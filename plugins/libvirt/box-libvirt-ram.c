/* box-libvirt-ram.c: how large a VM's RAM block is, and whether a memory
 * checkpoint may copy it while the guest runs.
 *
 * Under TCG, QEMU before 9.0 loses guest writes during a pre-copy when the
 * RAM block's length is a multiple of 256 KiB (64 pages, one word of the
 * dirty bitmap): cpu_physical_memory_sync_dirty_bitmap() then takes its
 * word-at-a-time path, which clears the migration dirty bits without
 * resetting the vCPUs' TLB entries, so a vCPU keeps writing a page through
 * a TLB entry that no longer marks it dirty and the snapshot keeps the
 * page as it was (QEMU commit 03bfc2188f, 9.0, fixes that path).  A block
 * of any other length takes the page-by-page path, which resets the TLB
 * entries of each page it finds dirty (cpu_physical_memory_test_and_clear_dirty).
 * So under TCG a VM booted now gets BOX_LIBVIRT_TCG_RAM_PAD_KIB more than
 * its memory_mib, and a memory checkpoint pre-copies only a RAM block whose
 * length QEMU reports as not a multiple of 256 KiB; any other (a VM booted
 * before, or from an old template or checkpoint) gets the stop-copy.
 *
 * A VM that loads a snapshot must have the RAM block size the snapshot
 * was taken with (QEMU refuses a "Length mismatch"), so the size comes
 * from what it loads: the RAM file's size, or the block list at the head
 * of a migration stream.
 */
#include "config.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

#include "box-libvirt-private.h"

/* One word of QEMU's dirty bitmap: 64 pages of 4 KiB */
#define DIRTY_WORD_BYTES   (G_GUINT64_CONSTANT (64) * 4096)
/* The head of a migration stream that holds its RAM block list */
#define STREAM_HEAD_BYTES  8192

guint64
box_libvirt_ram_kib_for_boot (const char *accel, guint memory_mib)
{
  guint64 kib = (guint64) memory_mib * 1024;

  return g_strcmp0 (accel, "kvm") == 0 ? kib : kib + BOX_LIBVIRT_TCG_RAM_PAD_KIB;
}

gboolean
box_libvirt_live_ram_copy_for (const char *accel, guint64 ram_bytes)
{
  if (g_strcmp0 (accel, "kvm") == 0)
    return TRUE;
  /* an accelerator not known yet: no pre-copy */
  return g_strcmp0 (accel, "tcg") == 0 && ram_bytes > 0 && ram_bytes % DIRTY_WORD_BYTES != 0;
}

guint64
box_libvirt_stream_ram_kib (const guint8 *head, gsize len)
{
  static const char name[] = "\007" BOX_LIBVIRT_RAM_ID;
  gsize name_len = sizeof name - 1;
  guint64 bytes = 0;

  if (len < 8 || memcmp (head, "QEVM", 4) != 0)
    return 0;
  /* the first mention of the block is the list in the "ram" section's
   * setup: its name (length-prefixed) and its length (big-endian) */
  for (gsize i = 8; i + name_len + 8 <= len; i++) {
    if (memcmp (head + i, name, name_len) != 0)
      continue;
    for (gsize k = 0; k < 8; k++)
      bytes = (bytes << 8) | head[i + name_len + k];
    break;
  }
  if (bytes == 0 || bytes % 8192 != 0 || bytes > (G_GUINT64_CONSTANT (1) << 44))
    return 0;
  return bytes / 1024;
}

guint64
box_libvirt_state_ram_kib (const char *path)
{
  guint8 head[STREAM_HEAD_BYTES];
  ssize_t got;
  int fd = open (path, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return 0;
  got = pread (fd, head, sizeof head, 0);
  close (fd);
  return got > 0 ? box_libvirt_stream_ram_kib (head, (gsize) got) : 0;
}

guint64
box_libvirt_file_ram_kib (const char *path)
{
  struct stat st;

  if (stat (path, &st) != 0 || st.st_size <= 0 || st.st_size % 8192 != 0)
    return 0;
  return (guint64) st.st_size / 1024;
}

/* The size of the running VM's RAM block as its QEMU reports it; 0 when
 * unknown. */
guint64
box_libvirt_domain_ram_bytes (virDomainPtr dom)
{
  /* box_libvirt_qmp() answers with QEMU's "return": here the memdev list */
  g_autofree char *reply = box_libvirt_qmp (dom, "{\"execute\":\"query-memdev\"}", -1, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonArray *memdevs;

  if (reply == NULL || !json_parser_load_from_data (parser, reply, -1, NULL) ||
      !JSON_NODE_HOLDS_ARRAY (json_parser_get_root (parser)))
    return 0;
  memdevs = json_node_get_array (json_parser_get_root (parser));
  for (guint i = 0; i < json_array_get_length (memdevs); i++) {
    JsonNode *node = json_array_get_element (memdevs, i);
    JsonObject *memdev = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;

    if (memdev != NULL &&
        g_strcmp0 (json_object_get_string_member_with_default (memdev, "id", ""),
                   BOX_LIBVIRT_RAM_ID) == 0)
      return (guint64) json_object_get_int_member_with_default (memdev, "size", 0);
  }
  return 0;
}
