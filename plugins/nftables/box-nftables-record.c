/* box-nftables-record.c: attachment records on disk; see box-nftables-record.h.
 *
 *   {"ifname": "bxabcdefghijkl", "mac": "52:54:00:12:34:56",
 *    "address": "10.222.0.2", "gateway": "10.222.0.1", "prefix": 30,
 *    "egress": [], "created_at": 1700000000000000}
 */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-nftables-record.h"
#include "box-state-store.h"

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

gboolean
box_nftables_record_save (const BoxNftablesRecord *record, const char *dir, GError **error)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(BoxStateStore) store = box_state_store_new (dir);
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *address = box_nftables_ipv4_to_string (record->subnet.address);
  g_autofree char *gateway = box_nftables_ipv4_to_string (record->subnet.gateway);
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
  if (!box_state_store_save (store, record->id, root, &local_error)) {
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
  rules = box_rules_from_storage_json (egress, error);
  if (rules == NULL)
    return FALSE;
  g_ptr_array_unref (record->egress);
  record->egress = rules;
  return TRUE;
}

BoxNftablesRecord *
box_nftables_record_load (const char *dir, const char *id, GError **error)
{
  g_autoptr(BoxStateStore) store = box_state_store_new (dir);
  g_autofree char *basename = g_strconcat (id, ".json", NULL);
  g_autofree char *path = g_build_filename (dir, basename, NULL);
  g_autoptr(BoxNftablesRecord) record = box_nftables_record_new (id);
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(GError) local_error = NULL;

  root = box_state_store_load (store, id, &local_error);
  if (root == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s: %s", path, local_error->message);
    return NULL;
  }
  if (!parse_record (record, root, path, error))
    return NULL;
  return g_steal_pointer (&record);
}

GPtrArray *
box_nftables_record_load_all (const char *dir)
{
  g_autoptr(GPtrArray) records =
    g_ptr_array_new_with_free_func ((GDestroyNotify) box_nftables_record_free);
  g_autoptr(BoxStateStore) store = box_state_store_new (dir);
  g_auto(GStrv) ids = box_state_store_list (store);

  for (guint i = 0; ids[i] != NULL; i++) {
    g_autoptr(GError) error = NULL;
    BoxNftablesRecord *record = box_nftables_record_load (dir, ids[i], &error);

    if (record == NULL) {
      g_warning ("nftables: ignoring a network attachment record: %s", error->message);
      continue;
    }
    g_ptr_array_add (records, record);
  }
  return g_steal_pointer (&records);
}

gboolean
box_nftables_record_remove (const char *dir, const char *id, GError **error)
{
  g_autoptr(BoxStateStore) store = box_state_store_new (dir);

  return box_state_store_remove (store, id, error);
}

gboolean
box_nftables_record_move (const char *dir, const char *old_id, const char *new_id,
                          GError **error)
{
  g_autoptr(BoxStateStore) store = box_state_store_new (dir);
  g_autoptr(GError) local_error = NULL;

  if (!box_state_store_move (store, old_id, new_id, &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s", local_error->message);
    return FALSE;
  }
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
