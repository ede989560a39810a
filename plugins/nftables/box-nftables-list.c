/* box-nftables-list.c: the set `resolved` read back; see box-nftables-list.h. */
#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>
#include <nftables/libnftables.h>

#include "box-error.h"
#include "box-network.h"
#include "box-nftables-list.h"

static gboolean
fail (GError **error, const char *why)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
               "nftables: unexpected listing of the resolved set: %s", why);
  return FALSE;
}

/* A port as nft prints it: a number (a service name only with -S). */
static gboolean
read_port (JsonNode *node, guint16 *port)
{
  gint64 value;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node))
    return FALSE;
  if (json_node_get_value_type (node) == G_TYPE_INT64) {
    value = json_node_get_int (node);
  } else if (json_node_get_value_type (node) == G_TYPE_STRING) {
    guint64 parsed;

    if (!g_ascii_string_to_unsigned (json_node_get_string (node), 10, 1, 65535, &parsed, NULL))
      return FALSE;
    value = (gint64) parsed;
  } else {
    return FALSE;
  }
  if (value < 1 || value > 65535)
    return FALSE;
  *port = (guint16) value;
  return TRUE;
}

static const char *
read_address (JsonNode *node)
{
  const char *text;
  g_autoptr(GInetAddress) address = NULL;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  text = json_node_get_string (node);
  address = g_inet_address_new_from_string (text);
  if (address == NULL || g_inet_address_get_family (address) != G_SOCKET_FAMILY_IPV4)
    return NULL;
  return text;
}

/* One element: {"concat": [guest, address, port]}, or with a timeout
 * {"elem": {"val": {"concat": [...]}, "timeout": T, "expires": E}}. */
static gboolean
read_element (JsonNode *node, const char *guest, GPtrArray *out, GError **error)
{
  JsonObject *object = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  JsonObject *elem = NULL;
  JsonNode *val = node;
  JsonNode *concat;
  JsonArray *parts;
  const char *who, *address;
  guint16 port;
  gint64 expires = -1;

  if (object == NULL)
    return fail (error, "an element is not an object");
  if (json_object_has_member (object, "elem")) {
    JsonNode *inner = json_object_get_member (object, "elem");

    if (!JSON_NODE_HOLDS_OBJECT (inner))
      return fail (error, "an elem is not an object");
    elem = json_node_get_object (inner);
    val = json_object_get_member (elem, "val");
    if (val == NULL || !JSON_NODE_HOLDS_OBJECT (val))
      return fail (error, "an elem has no val");
    if (json_object_has_member (elem, "expires")) {
      JsonNode *e = json_object_get_member (elem, "expires");

      if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_INT64 ||
          json_node_get_int (e) < 0)
        return fail (error, "an expiry is not a number of seconds");
      expires = json_node_get_int (e);
    }
  }
  concat = json_object_get_member (json_node_get_object (val), "concat");
  if (concat == NULL || !JSON_NODE_HOLDS_ARRAY (concat) ||
      json_array_get_length ((parts = json_node_get_array (concat))) != 3)
    return fail (error, "an element is not guest . address . port");
  who = read_address (json_array_get_element (parts, 0));
  address = read_address (json_array_get_element (parts, 1));
  if (who == NULL || address == NULL || !read_port (json_array_get_element (parts, 2), &port))
    return fail (error, "an element is not guest . address . port");
  if (strcmp (who, guest) == 0) {
    BoxNetAllowed *allowed = g_new0 (BoxNetAllowed, 1);

    if (out->len >= BOX_NFTABLES_LIST_MAX) {
      box_net_allowed_free (allowed);
      return fail (error, "more elements for one guest than a listing returns");
    }
    allowed->address = g_strdup (address);
    allowed->port = port;
    allowed->expires_s = expires < 0 ? G_MAXUINT : (guint) MIN (expires, (gint64) G_MAXUINT - 1);
    g_ptr_array_add (out, allowed);
  }
  return TRUE;
}

static gint
compare_allowed (gconstpointer a, gconstpointer b)
{
  const BoxNetAllowed *x = *(const BoxNetAllowed *const *) a;
  const BoxNetAllowed *y = *(const BoxNetAllowed *const *) b;
  g_autoptr(GInetAddress) ax = g_inet_address_new_from_string (x->address);
  g_autoptr(GInetAddress) ay = g_inet_address_new_from_string (y->address);
  int order = memcmp (g_inet_address_to_bytes (ax), g_inet_address_to_bytes (ay), 4);

  if (order != 0)
    return order;
  return (gint) x->port - (gint) y->port;
}

GPtrArray *
box_nftables_list_parse (const char *json, const char *guest, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GPtrArray) out =
    g_ptr_array_new_with_free_func ((GDestroyNotify) box_net_allowed_free);
  g_autoptr(GError) local_error = NULL;
  JsonNode *root, *list;
  JsonArray *items;
  gboolean seen_set = FALSE;

  if (!json_parser_load_from_data (parser, json, -1, &local_error)) {
    fail (error, local_error->message);
    return NULL;
  }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root) ||
      (list = json_object_get_member (json_node_get_object (root), "nftables")) == NULL ||
      !JSON_NODE_HOLDS_ARRAY (list)) {
    fail (error, "no nftables array");
    return NULL;
  }
  items = json_node_get_array (list);
  for (guint i = 0; i < json_array_get_length (items); i++) {
    JsonNode *item = json_array_get_element (items, i);
    JsonNode *set_node, *elems;
    JsonObject *set;

    if (!JSON_NODE_HOLDS_OBJECT (item) ||
        (set_node = json_object_get_member (json_node_get_object (item), "set")) == NULL)
      continue;   /* metainfo */
    if (!JSON_NODE_HOLDS_OBJECT (set_node) || seen_set) {
      fail (error, "not one set");
      return NULL;
    }
    seen_set = TRUE;
    set = json_node_get_object (set_node);
    elems = json_object_get_member (set, "elem");
    if (elems == NULL)
      continue;   /* an empty set has no elem member */
    if (!JSON_NODE_HOLDS_ARRAY (elems)) {
      fail (error, "elem is not an array");
      return NULL;
    }
    for (guint j = 0; j < json_array_get_length (json_node_get_array (elems)); j++) {
      if (!read_element (json_array_get_element (json_node_get_array (elems), j), guest, out,
                         error))
        return NULL;
    }
  }
  if (!seen_set) {
    fail (error, "no set");
    return NULL;
  }
  g_ptr_array_sort (out, compare_allowed);
  return g_steal_pointer (&out);
}

GPtrArray *
box_nftables_list_resolved (const char *table, const char *guest, GError **error)
{
  struct nft_ctx *ctx = nft_ctx_new (NFT_CTX_DEFAULT);
  g_autofree char *command = g_strdup_printf ("list set inet %s resolved", table);
  GPtrArray *result = NULL;

  if (ctx == NULL || nft_ctx_buffer_output (ctx) != 0 || nft_ctx_buffer_error (ctx) != 0) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                         "nftables: cannot create a libnftables context");
  } else {
    nft_ctx_output_set_flags (ctx, NFT_CTX_OUTPUT_JSON);
    if (nft_run_cmd_from_buffer (ctx, command) != 0) {
      const char *err = nft_ctx_get_error_buffer (ctx);
      g_autofree char *msg = g_strstrip (g_strdup (err != NULL && err[0] != '\0'
                                                   ? err : "unknown error"));

      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "nftables: %s: %s", command, msg);
    } else {
      result = box_nftables_list_parse (nft_ctx_get_output_buffer (ctx), guest, error);
    }
  }
  if (ctx != NULL)
    nft_ctx_free (ctx);
  return result;
}
