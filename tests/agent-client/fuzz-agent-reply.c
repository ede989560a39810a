/* fuzz-agent-reply.c: arbitrary bytes as the JSON of an agent's reply or
 * record, through every host-side parser of agent output: the one JSON
 * entry point (box_agent_json_parse), error replies, Stat records (alone
 * and as a member), the `sessions` and `ports` replies, and fs-list lines.
 * The first byte picks how big a cap the JSON gets; the rest is the text.
 * Must never crash, leak or trip a critical. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "box-agent-frame.h"
#include "box-agent-exec.h"
#include "box-agent-private.h"
#include "box-error.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
records (JsonObject *object)
{
  g_autoptr(GError) e1 = NULL;
  g_autoptr(GError) e2 = NULL;
  g_autoptr(GError) e3 = NULL;
  g_autoptr(GError) e4 = NULL;
  g_autoptr(GError) error = box_agent_error_from_reply (object);
  g_autoptr(GPtrArray) sessions = box_agent_sessions_from_reply (object, &e1);
  g_autoptr(GPtrArray) ports = box_agent_ports_from_reply (object, &e2);
  g_autoptr(BoxFileInfo) stat = box_file_info_new_from_json (object, &e3);
  g_autoptr(BoxFileInfo) member = box_file_info_new_from_member (object, "stat", &e4);

  g_assert_nonnull (error);
  /* an error the host logs is escaped and short */
  g_assert_cmpuint (strlen (error->message), <=, 2048);
  g_assert_true ((sessions == NULL) != (e1 == NULL));
  g_assert_true ((ports == NULL) != (e2 == NULL));
  g_assert_true ((stat == NULL) != (e3 == NULL));
  g_assert_true ((member == NULL) != (e4 == NULL));
  for (guint i = 0; sessions != NULL && i < sessions->len; i++) {
    BoxSessionInfo *s = g_ptr_array_index (sessions, i);

    g_assert_nonnull (s->id);
    g_assert_nonnull (s->argv);
  }
  for (guint i = 0; ports != NULL && i < ports->len; i++) {
    BoxPortListener *p = g_ptr_array_index (ports, i);

    g_assert_cmpuint (p->port, >=, 1);
    g_assert_cmpuint (p->port, <=, 65535);
    g_assert_nonnull (p->address);
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const char *text = (const char *) data + 1;
  gsize len, max;

  if (size == 0)
    return 0;
  max = data[0] < 128 ? BOX_AGENT_MAX_PAYLOAD : (gsize) data[0] * 64;
  len = size - 1;
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) root = box_agent_json_parse (text, len, max, &error);

    g_assert_true ((root == NULL) != (error == NULL));
    if (root == NULL)
      g_assert_true (g_error_matches (error, BOX_ERROR, BOX_ERROR_INTERNAL));
    else
      g_assert_cmpuint (len, <=, max);
    if (root != NULL && JSON_NODE_HOLDS_OBJECT (root))
      records (json_node_get_object (root));
  }
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) object = box_agent_json_parse_object (text, len, max, &error);

    g_assert_true ((object == NULL) != (error == NULL));
  }
  {
    /* the text for a log line: bounded, no control characters */
    g_autofree char *nul_terminated = g_strndup (text, len);
    g_autofree char *logged = box_agent_text_for_log (nul_terminated, 100);

    g_assert_cmpuint (strlen (logged), <=, 100 + 12);
    g_assert_true (g_utf8_validate (logged, -1, NULL));
    for (const char *p = logged; *p != '\0'; p++)
      g_assert_true ((guint8) *p >= 0x20 && *p != 0x7f);
  }
  {
    /* as fs-list output: lines of Stat */
    g_autoptr(GString) buffer = g_string_new_len (text, (gssize) len);
    g_autoptr(GPtrArray) infos = g_ptr_array_new_with_free_func ((GDestroyNotify) box_file_info_free);
    g_autoptr(GError) error = NULL;

    if (!box_file_list_take_lines (buffer, infos, &error))
      g_assert_nonnull (error);
  }
  return 0;
}
