/* fuzz-json.c: arbitrary bytes through the request decoders and the
 * storage readers.  Must never crash, leak or trip a critical. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "box-requests.h"
#include "box-validate.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* What the engine does with a decoded create: a record, both JSON forms. */
static void
exercise_records (const BoxSandboxCreate *req)
{
  g_autoptr(BoxSandbox) sb = box_sandbox_new ();
  g_autoptr(BoxSandbox) back = NULL;
  g_autoptr(BoxSandbox) copy = NULL;
  g_autoptr(JsonNode) api = NULL;
  g_autofree char *stored = NULL;
  const char *domains[] = { "apps.example.com", NULL };
  guint i;

  sb->id = box_generate_sandbox_id ();
  sb->name = g_strdup (req->name != NULL ? req->name : "n");
  sb->project = g_strdup ("p");
  if (req->image != NULL) {
    g_free (sb->image);
    sb->image = g_strdup (req->image);
  }
  sb->resources = req->resources;
  if (req->env != NULL) {
    g_hash_table_unref (sb->env);
    sb->env = g_hash_table_ref (req->env);
  }
  if (req->labels != NULL) {
    g_hash_table_unref (sb->labels);
    sb->labels = g_hash_table_ref (req->labels);
  }
  sb->has_deadline = req->has_deadline;
  sb->deadline_at = req->deadline_at;
  sb->deadline_action = req->deadline_action;
  for (i = 0; req->egress != NULL && i < req->egress->len; i++)
    g_ptr_array_add (sb->egress, box_rule_copy (g_ptr_array_index (req->egress, i)));
  if (req->secrets != NULL) {
    g_strfreev (sb->secrets);
    sb->secrets = g_strdupv (req->secrets);
  }
  for (i = 0; i < sb->egress->len; i++) {
    g_autoptr(JsonNode) rule = box_rule_to_api_json (g_ptr_array_index (sb->egress, i));

    g_assert (rule != NULL);
  }
  copy = box_sandbox_copy (sb);
  api = box_sandbox_to_api_json (copy, "box.example.net", domains);
  stored = box_sandbox_to_storage_json (sb);
  back = box_sandbox_from_storage_json (stored, NULL);
  g_assert (back != NULL);
  g_assert (g_hash_table_size (back->env) == g_hash_table_size (sb->env));
  g_assert (back->egress->len == sb->egress->len);
}

static void
decode (JsonNode *node)
{
  g_autoptr(BoxSandboxCreate) create = box_sandbox_create_from_json (node, NULL);
  g_autoptr(BoxSandboxUpdate) update = box_sandbox_update_from_json (node, NULL);
  g_autoptr(BoxSecretPut) put = box_secret_put_from_json (node, NULL);
  g_autofree char *name = NULL;
  g_auto(GStrv) domains = NULL;
  g_auto(GStrv) patch_domains = NULL;
  g_autofree char *key_name = NULL;
  JsonNode *network;

  if (create != NULL)
    exercise_records (create);
  if (update != NULL)
    g_assert (!update->has_deadline || update->deadline_set);
  if (put != NULL) {
    g_autofree char *placeholder = box_secret_placeholder ("NAME", put->placeholder_prefix);

    g_assert (put->value != NULL && put->hosts != NULL && put->hosts[0] != NULL);
    g_assert (g_str_has_suffix (placeholder, "__box_name__"));
  }
  box_project_create_from_json (node, &name, &domains, NULL);
  box_project_create_from_json (node, NULL, &patch_domains, NULL);
  box_key_create_from_json (node, &key_name, NULL, NULL);
  network = json_object_get_member (json_node_get_object (node), "network");
  if (network != NULL && JSON_NODE_HOLDS_OBJECT (network)) {
    g_autoptr(GPtrArray) rules =
      box_rules_from_json (json_object_get_member (json_node_get_object (network), "egress"), NULL);

    g_assert (rules == NULL || box_validate_rules (rules, 0, NULL) || rules->len > BOX_EGRESS_RULES_MAX);
  }
  {
    g_autoptr(GPtrArray) rules = box_rules_from_json (node, NULL);

    g_assert (rules == NULL);
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = box_json_parse_body ((const char *) data, size, size % 2 == 0, &error);
  g_autofree char *str = g_strndup ((const char *) data, size);

  if (node != NULL) {
    g_assert (JSON_NODE_HOLDS_OBJECT (node));
    decode (node);
  } else {
    g_assert (error != NULL && g_str_has_prefix (error->message, "bad request body: "));
  }

  /* the storage readers take what the database holds, whatever it is */
  {
    g_autoptr(BoxSandbox) sb = box_sandbox_from_storage_json (str, NULL);
    g_autoptr(BoxProject) project = box_project_from_storage_json (str, NULL);
    g_autoptr(BoxCheckpoint) checkpoint = box_checkpoint_from_storage_json (str, NULL);
    g_autoptr(BoxSecret) secret = box_secret_from_storage_json (str, NULL);
    g_autoptr(BoxKey) key = box_key_from_storage_json (str, NULL);
    gint64 t = 0;

    if (sb != NULL) {
      g_autoptr(JsonNode) api = box_sandbox_to_api_json (sb, "d.example", NULL);
      g_autofree char *again = box_sandbox_to_storage_json (sb);

      g_assert (api != NULL && again != NULL);
    }
    if (project != NULL) {
      g_autoptr(JsonNode) api = box_project_to_api_json (project);

      g_assert (api != NULL);
    }
    if (checkpoint != NULL) {
      g_autoptr(JsonNode) api = box_checkpoint_to_api_json (checkpoint);

      g_assert (api != NULL);
    }
    if (secret != NULL) {
      g_autoptr(JsonNode) api = box_secret_to_api_json (secret);
      g_autofree char *again = box_secret_to_storage_json (secret);

      g_assert (api != NULL && again != NULL);
    }
    if (key != NULL) {
      g_autofree char *again = box_key_to_storage_json (key);
      g_autoptr(BoxKey) back = box_key_from_storage_json (again, NULL);

      /* (a string that is not UTF-8 does not parse again) */
      g_assert (again != NULL);
      g_assert (back == NULL || g_strcmp0 (back->hash, key->hash) == 0);
    }
    if (box_time_parse (str, &t)) {
      g_autofree char *formatted = box_time_format (t);

      g_assert (formatted != NULL);
    }
  }
  return 0;
}
