/* box-nftables-record.c: attachment records on disk; see box-nftables-record.h.
 *
 *   {"ifname": "bxabcdefghijkl", "mac": "52:54:00:12:34:56",
 *    "address": "10.222.0.2", "gateway": "10.222.0.1", "prefix": 30,
 *    "egress": [], "created_at": 1700000000000000}
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "box-error.h"
#include "box-nftables-record.h"
#include "box-requests.h"

BoxNftablesRecord *
box_nftables_record_new (const char *id)
{
  BoxNftablesRecord *record = g_new0 (BoxNftablesRecord, 1);

  record->id = g_strdup (id);
  record->egress = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  return record;
}

void
box_nftables_record_free (BoxNftablesRecord *record)
{
  if (record == NULL)
    return;
  g_free (record->id);
  g_free (record->ifname);
  g_free (record->mac);
  g_clear_pointer (&record->egress, g_ptr_array_unref);
  g_free (record);
}

static char *
record_path (const char *dir, const char *id)
{
  g_autofree char *basename = g_strconcat (id, ".json", NULL);

  return g_build_filename (dir, basename, NULL);
}

gboolean
box_nftables_record_save (const BoxNftablesRecord *record, const char *dir, GError **error)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *path = record_path (dir, record->id);
  g_autofree char *address = box_nftables_ipv4_to_string (record->subnet.address);
  g_autofree char *gateway = box_nftables_ipv4_to_string (record->subnet.gateway);
  g_autofree char *data = NULL;
  g_autoptr(GError) local_error = NULL;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "ifname");
  json_builder_add_string_value (builder, record->ifname);
  json_builder_set_member_name (builder, "mac");
  json_builder_add_string_value (builder, record->mac);
  json_builder_set_member_name (builder, "address");
  json_builder_add_string_value (builder, address);
  json_builder_set_member_name (builder, "gateway");
  json_builder_add_string_value (builder, gateway);
  json_builder_set_member_name (builder, "prefix");
  json_builder_add_int_value (builder, record->subnet.prefix);
  json_builder_set_member_name (builder, "egress");
  json_builder_begin_array (builder);
  for (guint i = 0; i < record->egress->len; i++)
    json_builder_add_value (builder, box_rule_to_api_json (g_ptr_array_index (record->egress, i)));
  json_builder_end_array (builder);
  json_builder_set_member_name (builder, "created_at");
  json_builder_add_int_value (builder, record->created_at);
  json_builder_end_object (builder);

  root = json_builder_get_root (builder);
  json_generator_set_root (generator, root);
  data = json_generator_to_data (generator, NULL);
  if (!g_file_set_contents_full (path, data, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600,
                                 &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "cannot save the network attachment of %s: %s", record->id,
                 local_error->message);
    return FALSE;
  }
  return TRUE;
}

static gboolean
bad_record (GError **error, const char *path, const char *what)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s: %s", path, what);
  return FALSE;
}

static gboolean
parse_record (BoxNftablesRecord *record, JsonNode *root, const char *path, GError **error)
{
  JsonObject *obj;
  const char *ifname, *mac, *address, *gateway;
  gint64 prefix;
  guint32 mask;
  JsonNode *egress;
  GPtrArray *rules;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return bad_record (error, path, "not a JSON object");
  obj = json_node_get_object (root);
  ifname = json_object_get_string_member_with_default (obj, "ifname", NULL);
  mac = json_object_get_string_member_with_default (obj, "mac", NULL);
  address = json_object_get_string_member_with_default (obj, "address", NULL);
  gateway = json_object_get_string_member_with_default (obj, "gateway", NULL);
  prefix = json_object_get_int_member_with_default (obj, "prefix", 0);
  if (ifname == NULL || ifname[0] == '\0' || strlen (ifname) > 15 || mac == NULL)
    return bad_record (error, path, "no valid ifname or mac");
  for (const char *p = ifname; *p != '\0'; p++) {
    if (!g_ascii_isalnum (*p))
      return bad_record (error, path, "bad ifname");
  }
  if (prefix < 8 || prefix > 31 ||
      !box_nftables_ipv4_parse (address, &record->subnet.address) ||
      !box_nftables_ipv4_parse (gateway, &record->subnet.gateway))
    return bad_record (error, path, "no valid address, gateway or prefix");
  mask = box_nftables_prefix_mask ((guint) prefix);
  if ((record->subnet.address & mask) != (record->subnet.gateway & mask))
    return bad_record (error, path, "gateway outside the subnet");
  record->subnet.prefix = (guint) prefix;
  record->subnet.network = record->subnet.address & mask;
  record->ifname = g_strdup (ifname);
  record->mac = g_strdup (mac);
  record->created_at = json_object_get_int_member_with_default (obj, "created_at", 0);
  egress = json_object_get_member (obj, "egress");
  rules = box_rules_from_json (egress, error);
  if (rules == NULL)
    return FALSE;
  g_ptr_array_unref (record->egress);
  record->egress = rules;
  return TRUE;
}

BoxNftablesRecord *
box_nftables_record_load (const char *dir, const char *id, GError **error)
{
  g_autofree char *path = record_path (dir, id);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(BoxNftablesRecord) record = box_nftables_record_new (id);
  g_autoptr(GError) local_error = NULL;

  if (!json_parser_load_from_mapped_file (parser, path, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s: %s", path, local_error->message);
    return NULL;
  }
  if (!parse_record (record, json_parser_get_root (parser), path, error))
    return NULL;
  return g_steal_pointer (&record);
}

GPtrArray *
box_nftables_record_load_all (const char *dir)
{
  g_autoptr(GPtrArray) records =
    g_ptr_array_new_with_free_func ((GDestroyNotify) box_nftables_record_free);
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL) {
    g_autofree char *id = NULL;
    g_autoptr(GError) error = NULL;
    BoxNftablesRecord *record;

    if (!g_str_has_suffix (name, ".json"))
      continue;
    id = g_strndup (name, strlen (name) - strlen (".json"));
    if (!box_nftables_id_is_valid (id))
      continue;
    record = box_nftables_record_load (dir, id, &error);
    if (record == NULL) {
      g_warning ("nftables: ignoring a network attachment record: %s", error->message);
      continue;
    }
    g_ptr_array_add (records, record);
  }
  return g_steal_pointer (&records);
}

static void
sync_dir (const char *dir)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd >= 0) {
    fsync (fd);
    close (fd);
  }
}

gboolean
box_nftables_record_remove (const char *dir, const char *id, GError **error)
{
  g_autofree char *path = record_path (dir, id);

  if (g_unlink (path) != 0 && errno != ENOENT) {
    int errsv = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot remove %s: %s", path,
                 g_strerror (errsv));
    return FALSE;
  }
  sync_dir (dir);
  return TRUE;
}

gboolean
box_nftables_record_move (const char *dir, const char *old_id, const char *new_id,
                          GError **error)
{
  g_autofree char *old_path = record_path (dir, old_id);
  g_autofree char *new_path = record_path (dir, new_id);

  if (g_rename (old_path, new_path) != 0) {
    int errsv = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot move %s to %s: %s", old_path,
                 new_path, g_strerror (errsv));
    return FALSE;
  }
  sync_dir (dir);
  return TRUE;
}

BoxNetAttachment *
box_nftables_record_to_attachment (const BoxNftablesRecord *record)
{
  BoxNetAttachment *attachment = g_new0 (BoxNetAttachment, 1);

  attachment->ifname = g_strdup (record->ifname);
  attachment->mac = g_strdup (record->mac);
  attachment->address = box_nftables_ipv4_to_string (record->subnet.address);
  attachment->prefix = record->subnet.prefix;
  attachment->gateway = box_nftables_ipv4_to_string (record->subnet.gateway);
  attachment->dns = g_new0 (char *, 2);
  attachment->dns[0] = box_nftables_ipv4_to_string (record->subnet.gateway);
  return attachment;
}
