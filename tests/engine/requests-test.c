/* requests-test.c: strict decoding of request bodies. */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-requests.h"
#include "box-validate.h"

#define DIGEST "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define IMAGE "registry.example.com/team/app@sha256:" DIGEST

static JsonNode *
parse (const char *body)
{
  g_autoptr(GError) error = NULL;
  JsonNode *node = box_json_parse_body (body, strlen (body), FALSE, &error);

  g_assert_no_error (error);
  g_assert_nonnull (node);
  return node;
}

static char *
parse_error (const char *body)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = box_json_parse_body (body, strlen (body), FALSE, &error);

  g_assert_null (node);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  return g_strdup (error->message);
}

static BoxSandboxCreate *
create_ok (const char *body)
{
  g_autoptr(JsonNode) node = parse (body);
  g_autoptr(GError) error = NULL;
  BoxSandboxCreate *req = box_sandbox_create_from_json (node, &error);

  g_assert_no_error (error);
  g_assert_nonnull (req);
  return req;
}

/* The error message of a refused create (parse errors included). */
static char *
create_error (const char *body)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = box_json_parse_body (body, strlen (body), FALSE, &error);
  g_autoptr(BoxSandboxCreate) req = NULL;

  if (node == NULL) {
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    return g_strdup (error->message);
  }
  req = box_sandbox_create_from_json (node, &error);
  g_assert_null (req);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  return g_strdup (error->message);
}

static char *
update_error (const char *body)
{
  g_autoptr(JsonNode) node = parse (body);
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandboxUpdate) req = box_sandbox_update_from_json (node, &error);

  g_assert_null (req);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  return g_strdup (error->message);
}

static char *
secret_error (const char *body)
{
  g_autoptr(JsonNode) node = parse (body);
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSecretPut) req = box_secret_put_from_json (node, &error);

  g_assert_null (req);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  return g_strdup (error->message);
}

#define ASSERT_MSG(expr, expected)                    \
  G_STMT_START {                                      \
    g_autofree char *_msg = (expr);                   \
    g_assert_cmpstr (_msg, ==, (expected));           \
  } G_STMT_END

#define ASSERT_MSG_HAS(expr, needle)                                    \
  G_STMT_START {                                                        \
    g_autofree char *_msg = (expr);                                     \
    if (strstr (_msg, (needle)) == NULL)                                \
      g_error ("message %s lacks %s", _msg, (needle));                  \
  } G_STMT_END

static void
test_parse_body (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) empty = box_json_parse_body ("", 0, TRUE, &error);
  g_autoptr(JsonNode) spaces = box_json_parse_body (" \n", 2, TRUE, &error);
  g_autoptr(JsonNode) null_data = box_json_parse_body (NULL, 5, TRUE, &error);
  g_autoptr(JsonNode) obj = parse ("{\"a\": [1, 2.5, \"x\", true, null, {}]}");

  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (empty));
  g_assert_cmpuint (json_object_get_size (json_node_get_object (empty)), ==, 0);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (spaces));
  g_assert_true (JSON_NODE_HOLDS_OBJECT (null_data));
  g_assert_true (JSON_NODE_HOLDS_OBJECT (obj));

  ASSERT_MSG_HAS (parse_error (""), "bad request body: ");
  ASSERT_MSG (parse_error ("{\"name\": "), "bad request body: unexpected end of JSON input");
  ASSERT_MSG (parse_error ("not json"), "bad request body: invalid character 'o' in literal null (expecting 'u')");
  ASSERT_MSG (parse_error ("{\"name\": \"a\",}"),
              "bad request body: invalid character '}' looking for beginning of object key string");
  ASSERT_MSG (parse_error ("{\"a\": 1} x"), "bad request body: invalid character 'x' after top-level value");
  ASSERT_MSG (parse_error ("{\"a\" 1}"), "bad request body: invalid character '1' after object key");
  ASSERT_MSG (parse_error ("{\"a\": [1 2]}"), "bad request body: invalid character '2' after array element");
  ASSERT_MSG (parse_error ("{\"a\": 1 \"b\": 2}"),
              "bad request body: invalid character '\"' after object key:value pair");
  /* what json-glib alone would take */
  ASSERT_MSG (parse_error ("{/* c */}"),
              "bad request body: invalid character '/' looking for beginning of object key string");
  ASSERT_MSG (parse_error ("{'a': 1}"),
              "bad request body: invalid character '\\'' looking for beginning of object key string");
  ASSERT_MSG (parse_error ("{\"a\": 0x10}"),
              "bad request body: invalid character 'x' after object key:value pair");
  ASSERT_MSG (parse_error ("{\"a\": 01}"),
              "bad request body: invalid character '1' after object key:value pair");
  ASSERT_MSG (parse_error ("{} {}"), "bad request body: invalid character '{' after top-level value");
  ASSERT_MSG (parse_error ("{\"a\": 99999999999999999999}"),
              "bad request body: json: number 99999999999999999999 is out of range");
  ASSERT_MSG (parse_error ("{\"a\": \"\\u0000\"}"),
              "bad request body: \\u0000 (NUL) is not allowed in a string");
  ASSERT_MSG (parse_error ("{\"a\": \"\\ud800\"}"), "bad request body: lone surrogate in a \\u escape");
  ASSERT_MSG (parse_error ("{\"a\": \"\\x\"}"), "bad request body: invalid character 'x' in string escape code");
  ASSERT_MSG (parse_error ("{\"a\": \"\t\"}"), "bad request body: invalid character '\\t' in string literal");
  ASSERT_MSG_HAS (parse_error ("{\"a\": \"\xff\"}"), "UTF-8");
  ASSERT_MSG_HAS (parse_error ("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["),
                  "nesting deeper than 64 levels");
  /* a body that is not an object */
  ASSERT_MSG (parse_error ("[1, 2]"), "bad request body: json: cannot unmarshal array into a request object");
  ASSERT_MSG (parse_error ("\"x\""), "bad request body: json: cannot unmarshal string into a request object");
  ASSERT_MSG (parse_error ("null"), "bad request body: json: cannot unmarshal null into a request object");
  ASSERT_MSG (parse_error ("1"), "bad request body: json: cannot unmarshal number into a request object");
  ASSERT_MSG (parse_error ("true"), "bad request body: json: cannot unmarshal bool into a request object");
}

static void
test_check_fields (void)
{
  const char *allowed[] = { "a", "b", NULL };
  g_autoptr(JsonNode) good = parse ("{\"b\": 1, \"a\": 2}");
  g_autoptr(JsonNode) bad = parse ("{\"a\": 1, \"zz\": 2, \"yy\": 3}");
  g_autoptr(GError) error = NULL;

  g_assert_true (box_json_check_fields (json_node_get_object (good), allowed, &error));
  g_assert_no_error (error);
  /* the first unknown member in document order */
  g_assert_false (box_json_check_fields (json_node_get_object (bad), allowed, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_cmpstr (error->message, ==, "bad request body: json: unknown field zz");
}

static void
test_create_full (void)
{
  g_autoptr(BoxSandboxCreate) req = create_ok (
    "{\"name\": \"web-1\", \"template\": \"base\","
    " \"resources\": {\"cpus\": 4, \"memory_mib\": 4096, \"disk_gib\": 0},"
    " \"env\": {\"A\": \"1\", \"_B\": \"x = y\"}, \"labels\": {\"team\": \"infra\"},"
    " \"idle\": {\"timeout_s\": 30, \"action\": \"none\"},"
    " \"deadline\": {\"at\": \"2030-01-02T15:04:05Z\", \"action\": \"pause\"},"
    " \"protected\": true, \"http_port\": 3000,"
    " \"network\": {\"egress\": [{\"domain\": \"api.example.com\", \"action\": \"allow\"},"
    "                            {\"domain\": \"*.example.org\", \"action\": \"allow\", \"ports\": [22]},"
    "                            {\"domain\": \"*\", \"action\": \"deny\"},"
    "                            {\"include\": \"defaults\"}]},"
    " \"secrets\": [\"GITHUB_TOKEN\"]}");
  gint64 at = 0;
  const BoxRule *rule;

  g_assert_cmpstr (req->name, ==, "web-1");
  g_assert_cmpstr (req->template_name, ==, "base");
  g_assert_null (req->image);
  g_assert_cmpuint (req->resources.cpus, ==, 4);
  g_assert_cmpuint (req->resources.memory_mib, ==, 4096);
  g_assert_cmpuint (req->resources.disk_gib, ==, 0);
  g_assert_cmpstr (g_hash_table_lookup (req->env, "_B"), ==, "x = y");
  g_assert_cmpuint (g_hash_table_size (req->env), ==, 2);
  g_assert_cmpstr (g_hash_table_lookup (req->labels, "team"), ==, "infra");
  g_assert_true (req->has_idle_timeout_s);
  g_assert_cmpuint (req->idle_timeout_s, ==, 30);
  g_assert_true (req->has_idle_action);
  g_assert_cmpint (req->idle_action, ==, BOX_IDLE_ACTION_NONE);
  g_assert_true (req->has_deadline);
  g_assert_true (box_time_parse ("2030-01-02T15:04:05Z", &at));
  g_assert_cmpint (req->deadline_at, ==, at);
  g_assert_cmpint (req->deadline_action, ==, BOX_DEADLINE_ACTION_PAUSE);
  g_assert_true (req->protected_);
  g_assert_true (req->has_http_port);
  g_assert_cmpuint (req->http_port, ==, 3000);
  g_assert_cmpuint (req->egress->len, ==, 4);
  rule = g_ptr_array_index (req->egress, 0);
  g_assert_cmpstr (rule->domain, ==, "api.example.com");
  g_assert_true (rule->allow);
  g_assert_cmpuint (rule->n_ports, ==, 0);
  rule = g_ptr_array_index (req->egress, 1);
  g_assert_cmpuint (rule->n_ports, ==, 1);
  g_assert_cmpuint (rule->ports[0], ==, 22);
  rule = g_ptr_array_index (req->egress, 2);
  g_assert_false (rule->allow);
  rule = g_ptr_array_index (req->egress, 3);
  g_assert_cmpstr (rule->include, ==, "defaults");
  g_assert_null (rule->domain);
  g_assert_cmpstr (req->secrets[0], ==, "GITHUB_TOKEN");
  g_assert_null (req->secrets[1]);
  g_assert_null (req->from_sandbox);
}

static void
test_create_empty_and_nulls (void)
{
  g_autoptr(BoxSandboxCreate) empty = create_ok ("{}");
  g_autoptr(BoxSandboxCreate) nulls = create_ok (
    "{\"name\": null, \"template\": null, \"image\": null, \"resources\": null, \"env\": null,"
    " \"labels\": null, \"idle\": null, \"deadline\": null, \"protected\": null,"
    " \"http_port\": null, \"network\": null, \"secrets\": null, \"from\": null}");
  g_autoptr(BoxSandboxCreate) inner = create_ok (
    "{\"idle\": {\"timeout_s\": null, \"action\": null}, \"resources\": {\"cpus\": null},"
    " \"network\": {\"egress\": null}, \"template\": \"\", \"image\": \"\"}");
  BoxSandboxCreate *reqs[] = { empty, nulls };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (reqs); i++) {
    BoxSandboxCreate *req = reqs[i];

    g_assert_null (req->name);
    g_assert_null (req->template_name);
    g_assert_null (req->image);
    g_assert_cmpuint (req->resources.cpus, ==, 0);
    g_assert_null (req->env);
    g_assert_null (req->labels);
    g_assert_false (req->has_idle_timeout_s);
    g_assert_false (req->has_idle_action);
    g_assert_false (req->has_deadline);
    g_assert_false (req->protected_);
    g_assert_false (req->has_http_port);
    g_assert_null (req->egress);
    g_assert_null (req->secrets);
    g_assert_null (req->from_sandbox);
  }
  g_assert_false (inner->has_idle_timeout_s);
  g_assert_false (inner->has_idle_action);
  /* a network without egress: no rules, the whole internet */
  g_assert_nonnull (inner->egress);
  g_assert_cmpuint (inner->egress->len, ==, 0);
  /* "" is what a record shows for "none" */
  g_assert_null (inner->template_name);
  g_assert_null (inner->image);
}

static void
test_create_image (void)
{
  g_autoptr(BoxSandboxCreate) req = create_ok ("{\"image\": \"" IMAGE "\"}");

  g_assert_cmpstr (req->image, ==, IMAGE);
  g_assert_null (req->template_name);
  ASSERT_MSG_HAS (create_error ("{\"image\": \"docker.io/library/alpine:3.19\"}"), "tags are refused");
  ASSERT_MSG_HAS (create_error ("{\"image\": \"alpine\"}"), "digest");
  ASSERT_MSG (create_error ("{\"template\": \"base\", \"image\": \"" IMAGE "\"}"),
              "invalid request: give template or image, not both");
}

static void
test_unknown_fields (void)
{
  ASSERT_MSG (create_error ("{\"bogus\": 1}"), "bad request body: json: unknown field bogus");
  ASSERT_MSG (create_error ("{\"name\": \"okname\", \"colour\": \"red\"}"),
              "bad request body: json: unknown field colour");
  ASSERT_MSG (create_error ("{\"idle\": {\"timeout_s\": 60, \"sleepy\": true}}"),
              "bad request body: json: unknown field sleepy");
  ASSERT_MSG (create_error ("{\"resources\": {\"gpus\": 1}}"), "bad request body: json: unknown field gpus");
  ASSERT_MSG (create_error ("{\"deadline\": {\"at\": \"2030-01-01T00:00:00Z\", \"action\": \"stop\", \"x\": 1}}"),
              "bad request body: json: unknown field x");
  ASSERT_MSG (create_error ("{\"network\": {\"egress\": [], \"ingress\": []}}"),
              "bad request body: json: unknown field ingress");
  ASSERT_MSG (create_error ("{\"network\": {\"egress\": [{\"domain\": \"a.com\", \"action\": \"allow\","
                            " \"proto\": \"udp\"}]}}"),
              "bad request body: json: unknown field proto");
  ASSERT_MSG (create_error ("{\"from\": {\"sandbox\": \"a\", \"checkpoint\": \"v1\", \"memory\": true}}"),
              "bad request body: json: unknown field memory");
  /* the first unknown one in document order, even before a bad value */
  ASSERT_MSG (create_error ("{\"name\": \"Bad\", \"zz\": 1}"), "bad request body: json: unknown field zz");
}

static void
test_type_errors (void)
{
  ASSERT_MSG (create_error ("{\"name\": 5}"),
              "bad request body: json: cannot unmarshal number into field name of type string");
  ASSERT_MSG (create_error ("{\"protected\": \"yes\"}"),
              "bad request body: json: cannot unmarshal string into field protected of type boolean");
  ASSERT_MSG (create_error ("{\"env\": [\"A=1\"]}"),
              "bad request body: json: cannot unmarshal array into field env of type object");
  ASSERT_MSG (create_error ("{\"env\": {\"A\": 1}}"),
              "bad request body: json: cannot unmarshal number into field env of type string");
  ASSERT_MSG (create_error ("{\"labels\": \"a=b\"}"),
              "bad request body: json: cannot unmarshal string into field labels of type object");
  ASSERT_MSG (create_error ("{\"http_port\": \"8080\"}"),
              "bad request body: json: cannot unmarshal string into field http_port of type integer");
  ASSERT_MSG (create_error ("{\"http_port\": 8080.0}"),
              "bad request body: json: cannot unmarshal number into field http_port of type integer");
  ASSERT_MSG (create_error ("{\"resources\": {\"cpus\": 1.5}}"),
              "bad request body: json: cannot unmarshal number into field resources.cpus of type integer");
  ASSERT_MSG (create_error ("{\"resources\": {\"cpus\": \"2\"}}"),
              "bad request body: json: cannot unmarshal string into field resources.cpus of type integer");
  ASSERT_MSG (create_error ("{\"resources\": {\"memory_mib\": 1e3}}"),
              "bad request body: json: cannot unmarshal number into field resources.memory_mib of type integer");
  ASSERT_MSG (create_error ("{\"idle\": {\"timeout_s\": \"300\"}}"),
              "bad request body: json: cannot unmarshal string into field idle.timeout_s of type integer");
  ASSERT_MSG (create_error ("{\"idle\": true}"),
              "bad request body: json: cannot unmarshal bool into field idle of type object");
  ASSERT_MSG (create_error ("{\"deadline\": {\"at\": 5, \"action\": \"stop\"}}"),
              "bad request body: json: cannot unmarshal number into field deadline.at of type string");
  ASSERT_MSG (create_error ("{\"secrets\": \"A\"}"),
              "bad request body: json: cannot unmarshal string into field secrets of type array");
  ASSERT_MSG (create_error ("{\"secrets\": [\"A\", null]}"),
              "bad request body: json: cannot unmarshal null into field secrets of type string");
  ASSERT_MSG (create_error ("{\"network\": []}"),
              "bad request body: json: cannot unmarshal array into field network of type object");
  ASSERT_MSG (create_error ("{\"network\": {\"egress\": {}}}"),
              "bad request body: json: cannot unmarshal object into field network.egress of type array");
  ASSERT_MSG (create_error ("{\"network\": {\"egress\": [\"a.com\"]}}"),
              "bad request body: json: cannot unmarshal string into field network.egress of type object");
  ASSERT_MSG (create_error ("{\"network\": {\"egress\": [{\"domain\": \"a.com\", \"action\": \"allow\","
                            " \"ports\": [\"80\"]}]}}"),
              "bad request body: json: cannot unmarshal string into field network.egress.ports of type integer");
  ASSERT_MSG (create_error ("{\"network\": {\"egress\": [{\"domain\": [], \"action\": \"allow\"}]}}"),
              "bad request body: json: cannot unmarshal array into field network.egress.domain of type string");
  ASSERT_MSG (create_error ("{\"from\": {\"sandbox\": 1, \"checkpoint\": \"v1\"}}"),
              "bad request body: json: cannot unmarshal number into field from.sandbox of type string");
}

static void
test_create_values (void)
{
  g_autofree char *n33 = g_strnfill (33, 'a');
  g_autofree char *body33 = g_strdup_printf ("{\"name\": \"%s\"}", n33);

  ASSERT_MSG (create_error ("{\"name\": \"Foo\"}"),
              "invalid name \"Foo\": must be a DNS label: lowercase letters, digits and '-'");
  ASSERT_MSG_HAS (create_error (body33), "at most 32");
  ASSERT_MSG_HAS (create_error ("{\"name\": \"\"}"), "invalid name");
  ASSERT_MSG_HAS (create_error ("{\"name\": \"a--b\"}"), "--");
  ASSERT_MSG_HAS (create_error ("{\"labels\": {\"a=b\": \"v\"}}"), "invalid label key");
  ASSERT_MSG_HAS (create_error ("{\"env\": {\"1A\": \"x\"}}"), "invalid env name \"1A\"");
  ASSERT_MSG (create_error ("{\"resources\": {\"cpus\": 33}}"),
              "invalid resources.cpus 33: must be 0 (from the template) or 1 to 32");
  ASSERT_MSG (create_error ("{\"resources\": {\"cpus\": -1}}"),
              "invalid resources.cpus -1: must be 0 (from the template) or 1 to 32");
  ASSERT_MSG (create_error ("{\"resources\": {\"memory_mib\": 127}}"),
              "invalid resources.memory_mib 127: must be 0 (from the template) or 128 to 262144 MiB");
  ASSERT_MSG (create_error ("{\"resources\": {\"disk_gib\": 4294967296}}"),
              "invalid resources.disk_gib 4294967296: must be 0 (from the template) or 1 to 2048 GiB");
  ASSERT_MSG (create_error ("{\"idle\": {\"timeout_s\": 29}}"),
              "invalid idle.timeout_s 29: must be at least 30 seconds");
  ASSERT_MSG (create_error ("{\"idle\": {\"timeout_s\": -5}}"),
              "invalid idle.timeout_s -5: must be at least 30 seconds");
  ASSERT_MSG (create_error ("{\"idle\": {\"action\": \"sleep\"}}"),
              "invalid idle.action \"sleep\": must be pause, stop or none");
  ASSERT_MSG (create_error ("{\"http_port\": 70000}"), "invalid http_port 70000: must be 1 to 65535");
  ASSERT_MSG (create_error ("{\"http_port\": 0}"), "invalid http_port 0: must be 1 to 65535");
  ASSERT_MSG_HAS (create_error ("{\"secrets\": [\"bad-name\"]}"), "invalid secret name \"bad-name\"");
  ASSERT_MSG (create_error ("{\"secrets\": [\"A\", \"A\"]}"), "invalid secrets: \"A\" is listed twice");
  ASSERT_MSG (create_error ("{\"secrets\": [\"GITHUB_TOKEN\"], \"env\": {\"GITHUB_TOKEN\": \"x\"}}"),
              "invalid secrets: \"GITHUB_TOKEN\" is also a key in env; a sandbox cannot have both");
}

static void
test_deadline (void)
{
  ASSERT_MSG_HAS (create_error ("{\"deadline\": {\"at\": \"tomorrow\", \"action\": \"delete\"}}"),
                  "invalid deadline.at \"tomorrow\"");
  ASSERT_MSG_HAS (create_error ("{\"deadline\": {\"at\": \"2030-01-02T15:04:05\", \"action\": \"delete\"}}"),
                  "invalid deadline.at");
  ASSERT_MSG (create_error ("{\"deadline\": {\"action\": \"delete\"}}"),
              "invalid deadline: at is required (an RFC 3339 time)");
  ASSERT_MSG (create_error ("{\"deadline\": {\"at\": \"2030-01-02T15:04:05Z\"}}"),
              "invalid deadline: action is required (delete, pause or stop)");
  ASSERT_MSG (create_error ("{\"deadline\": {\"at\": \"2030-01-02T15:04:05Z\", \"action\": \"explode\"}}"),
              "invalid deadline.action \"explode\": must be delete, pause or stop");
  {
    /* in the past is the engine's call, not the decoder's */
    g_autoptr(BoxSandboxCreate) req =
      create_ok ("{\"deadline\": {\"at\": \"2001-01-01T01:00:00+01:00\", \"action\": \"delete\"}}");
    gint64 at = 0;

    g_assert_true (box_time_parse ("2001-01-01T00:00:00Z", &at));
    g_assert_true (req->has_deadline);
    g_assert_cmpint (req->deadline_at, ==, at);
  }
}

static void
test_fork (void)
{
  g_autoptr(BoxSandboxCreate) req =
    create_ok ("{\"name\": \"copy\", \"from\": {\"sandbox\": \"web\", \"checkpoint\": \"v1\"},"
               " \"network\": {\"egress\": []}, \"env\": {\"A\": \"b\"}}");

  g_assert_cmpstr (req->from_sandbox, ==, "web");
  g_assert_cmpstr (req->from_checkpoint, ==, "v1");
  g_assert_nonnull (req->egress);
  ASSERT_MSG_HAS (create_error ("{\"from\": {\"sandbox\": \"web\", \"checkpoint\": \"v1\"}, \"template\": \"base\"}"),
                  "come from the checkpoint");
  ASSERT_MSG_HAS (create_error ("{\"from\": {\"sandbox\": \"web\", \"checkpoint\": \"v1\"}, \"image\": \"" IMAGE "\"}"),
                  "come from the checkpoint");
  ASSERT_MSG_HAS (create_error ("{\"from\": {\"sandbox\": \"web\", \"checkpoint\": \"v1\"},"
                                " \"resources\": {\"cpus\": 2}}"),
                  "come from the checkpoint");
  /* given at all, even as "none" */
  ASSERT_MSG_HAS (create_error ("{\"from\": {\"sandbox\": \"web\", \"checkpoint\": \"v1\"}, \"template\": \"\"}"),
                  "come from the checkpoint");
  ASSERT_MSG_HAS (create_error ("{\"from\": {\"sandbox\": \"web\", \"checkpoint\": \"v1\"}, \"image\": null}"),
                  "come from the checkpoint");
  ASSERT_MSG_HAS (create_error ("{\"from\": {\"sandbox\": \"web\", \"checkpoint\": \"v1\"}, \"resources\": {}}"),
                  "come from the checkpoint");
  ASSERT_MSG (create_error ("{\"from\": {\"sandbox\": \"web\"}}"),
              "invalid from: a fork needs both from.sandbox and from.checkpoint");
  ASSERT_MSG (create_error ("{\"from\": {\"checkpoint\": \"v1\"}}"),
              "invalid from: a fork needs both from.sandbox and from.checkpoint");
  ASSERT_MSG (create_error ("{\"from\": {}}"),
              "invalid from: a fork needs both from.sandbox and from.checkpoint");
}

static void
test_rules (void)
{
  ASSERT_MSG_HAS (create_error ("{\"network\": {\"egress\": [{\"domain\": \"1.2.3.4\", \"action\": \"allow\"}]}}"),
                  "IP address");
  ASSERT_MSG_HAS (create_error ("{\"network\": {\"egress\": [{\"domain\": \"::1\", \"action\": \"allow\"}]}}"),
                  "IP address");
  ASSERT_MSG_HAS (create_error ("{\"network\": {\"egress\": [{\"domain\": \"x.com\", \"action\": \"deny\","
                                " \"ports\": [80]}]}}"),
                  "a deny rule takes no ports");
  ASSERT_MSG (create_error ("{\"network\": {\"egress\": [{\"domain\": \"x.com\", \"action\": \"maybe\"}]}}"),
              "invalid network rule action \"maybe\": must be allow or deny");
  ASSERT_MSG (create_error ("{\"network\": {\"egress\": [{\"domain\": \"x.com\"}]}}"),
              "invalid network rule for \"x.com\": action is required (allow or deny)");
  ASSERT_MSG_HAS (create_error ("{\"network\": {\"egress\": [{}]}}"), "domain and action are required");
  ASSERT_MSG_HAS (create_error ("{\"network\": {\"egress\": [{\"include\": \"everything\"}]}}"), "\"defaults\"");
  ASSERT_MSG (create_error ("{\"network\": {\"egress\": [{\"include\": \"defaults\", \"action\": \"allow\"}]}}"),
              "invalid network rule: an include entry has no other field");
  ASSERT_MSG (create_error ("{\"network\": {\"egress\": [{\"domain\": \"x.com\", \"action\": \"allow\","
                            " \"ports\": [0]}]}}"),
              "invalid network rule port 0: must be 1 to 65535");
  ASSERT_MSG (create_error ("{\"network\": {\"egress\": [{\"domain\": \"x.com\", \"action\": \"allow\","
                            " \"ports\": [65536]}]}}"),
              "invalid network rule port 65536: must be 1 to 65535");
  {
    g_autoptr(JsonNode) node = parse ("{\"egress\": [{\"domain\": \"a.com\", \"action\": \"allow\","
                                      " \"ports\": [1, 65535]}]}");
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) rules =
      box_rules_from_json (json_object_get_member (json_node_get_object (node), "egress"), &error);
    const BoxRule *rule;

    g_assert_no_error (error);
    g_assert_cmpuint (rules->len, ==, 1);
    rule = g_ptr_array_index (rules, 0);
    g_assert_cmpuint (rule->n_ports, ==, 2);
    g_assert_cmpuint (rule->ports[1], ==, 65535);
  }
}

static void
test_update (void)
{
  g_autoptr(JsonNode) node = parse (
    "{\"env\": {}, \"labels\": {\"a\": \"b\"}, \"idle\": {\"action\": \"stop\"},"
    " \"deadline\": null, \"protected\": false, \"http_port\": 80,"
    " \"network\": {\"egress\": [{\"domain\": \"*\", \"action\": \"allow\"}]}, \"secrets\": []}");
  g_autoptr(JsonNode) empty_node = parse ("{}");
  g_autoptr(JsonNode) deadline_node = parse ("{\"deadline\": {\"at\": \"2030-01-01T00:00:00Z\", \"action\": \"stop\"}}");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandboxUpdate) req = box_sandbox_update_from_json (node, &error);
  g_autoptr(BoxSandboxUpdate) empty = box_sandbox_update_from_json (empty_node, &error);
  g_autoptr(BoxSandboxUpdate) deadline = box_sandbox_update_from_json (deadline_node, &error);

  g_assert_no_error (error);
  g_assert_nonnull (req->env);
  g_assert_cmpuint (g_hash_table_size (req->env), ==, 0);
  g_assert_cmpstr (g_hash_table_lookup (req->labels, "a"), ==, "b");
  g_assert_false (req->has_idle_timeout_s);
  g_assert_true (req->has_idle_action);
  g_assert_cmpint (req->idle_action, ==, BOX_IDLE_ACTION_STOP);
  /* null clears the deadline */
  g_assert_true (req->deadline_set);
  g_assert_false (req->has_deadline);
  g_assert_true (req->has_protected);
  g_assert_false (req->protected_);
  g_assert_true (req->has_http_port);
  g_assert_cmpuint (req->http_port, ==, 80);
  g_assert_cmpuint (req->egress->len, ==, 1);
  g_assert_nonnull (req->secrets);
  g_assert_null (req->secrets[0]);

  /* omitted: unchanged */
  g_assert_null (empty->env);
  g_assert_null (empty->labels);
  g_assert_false (empty->has_idle_timeout_s);
  g_assert_false (empty->has_idle_action);
  g_assert_false (empty->deadline_set);
  g_assert_false (empty->has_deadline);
  g_assert_false (empty->has_protected);
  g_assert_false (empty->has_http_port);
  g_assert_null (empty->egress);
  g_assert_null (empty->secrets);

  g_assert_true (deadline->deadline_set);
  g_assert_true (deadline->has_deadline);
  g_assert_cmpint (deadline->deadline_action, ==, BOX_DEADLINE_ACTION_STOP);

  ASSERT_MSG (update_error ("{\"name\": \"renamed\"}"), "bad request body: json: unknown field name");
  ASSERT_MSG (update_error ("{\"template\": \"base\"}"), "bad request body: json: unknown field template");
  ASSERT_MSG (update_error ("{\"resources\": {\"cpus\": 4}}"), "bad request body: json: unknown field resources");
  ASSERT_MSG (update_error ("{\"from\": {}}"), "bad request body: json: unknown field from");
  ASSERT_MSG (update_error ("{\"idle\": {\"timeout_s\": 1}}"),
              "invalid idle.timeout_s 1: must be at least 30 seconds");
  ASSERT_MSG (update_error ("{\"protected\": \"yes\"}"),
              "bad request body: json: cannot unmarshal string into field protected of type boolean");
  ASSERT_MSG_HAS (update_error ("{\"secrets\": [\"T\"], \"env\": {\"T\": \"x\"}}"), "also a key in env");
  ASSERT_MSG_HAS (update_error ("{\"labels\": {\"ok\": \"v\"}, \"idle\": {\"timeout_s\": 1}}"), "idle.timeout_s");
}

static void
test_secret_put (void)
{
  g_autoptr(JsonNode) node = parse (
    "{\"value\": \"s3cret\", \"hosts\": [\"api.github.com\", \"*.example.com/v1\"],"
    " \"inject\": {\"header\": \"Authorization\", \"format\": \"Bearer {value}\"},"
    " \"placeholder_prefix\": \"ghp_\"}");
  g_autoptr(JsonNode) plain_node = parse ("{\"value\": \"v\", \"hosts\": [\"h.example.com\"], \"inject\": null}");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSecretPut) req = box_secret_put_from_json (node, &error);
  g_autoptr(BoxSecretPut) plain = box_secret_put_from_json (plain_node, &error);
  g_autofree char *v8192 = g_strnfill (8192, 'y');
  g_autofree char *v8193 = g_strnfill (8193, 'y');
  g_autofree char *body8192 = g_strdup_printf ("{\"value\": \"%s\", \"hosts\": [\"h.example.com\"]}", v8192);
  g_autofree char *body8193 = g_strdup_printf ("{\"value\": \"%s\", \"hosts\": [\"h.example.com\"]}", v8193);
  g_autoptr(JsonNode) node8192 = parse (body8192);
  g_autoptr(BoxSecretPut) req8192 = box_secret_put_from_json (node8192, &error);

  g_assert_no_error (error);
  g_assert_cmpstr (req->value, ==, "s3cret");
  g_assert_cmpuint (g_strv_length (req->hosts), ==, 2);
  g_assert_cmpstr (req->inject_header, ==, "Authorization");
  g_assert_cmpstr (req->inject_format, ==, "Bearer {value}");
  g_assert_cmpstr (req->placeholder_prefix, ==, "ghp_");
  g_assert_null (plain->inject_header);
  g_assert_null (plain->inject_format);
  g_assert_null (plain->placeholder_prefix);
  g_assert_nonnull (req8192);

  ASSERT_MSG_HAS (secret_error (body8193), "1 to 8192 bytes");
  ASSERT_MSG (secret_error ("{\"hosts\": [\"h.example.com\"]}"), "invalid secret: value is required");
  ASSERT_MSG_HAS (secret_error ("{\"value\": \"\", \"hosts\": [\"h.example.com\"]}"), "1 to 8192 bytes");
  ASSERT_MSG_HAS (secret_error ("{\"value\": \"a\\nb\", \"hosts\": [\"h.example.com\"]}"), "CR, LF or NUL");
  ASSERT_MSG_HAS (secret_error ("{\"value\": \"a\\rb\", \"hosts\": [\"h.example.com\"]}"), "CR, LF or NUL");
  ASSERT_MSG (secret_error ("{\"value\": \"v\"}"), "invalid secret: hosts must name at least one host");
  ASSERT_MSG (secret_error ("{\"value\": \"v\", \"hosts\": []}"), "invalid secret: hosts must name at least one host");
  ASSERT_MSG_HAS (secret_error ("{\"value\": \"v\", \"hosts\": [\"\"]}"), "invalid secret host");
  ASSERT_MSG_HAS (secret_error ("{\"value\": \"v\", \"hosts\": [\"https://h.example.com\"]}"), "scheme");
  ASSERT_MSG_HAS (secret_error ("{\"value\": \"v\", \"hosts\": [\"h.example.com:8443\"]}"), "port");
  ASSERT_MSG_HAS (secret_error ("{\"value\": \"v\", \"hosts\": [\"h.example.com\"],"
                                " \"inject\": {\"header\": \"Host\", \"format\": \"{value}\"}}"),
                  "frames or routes");
  ASSERT_MSG_HAS (secret_error ("{\"value\": \"v\", \"hosts\": [\"h.example.com\"],"
                                " \"inject\": {\"header\": \"transfer-encoding\", \"format\": \"{value}\"}}"),
                  "frames or routes");
  ASSERT_MSG (secret_error ("{\"value\": \"v\", \"hosts\": [\"h.example.com\"],"
                            " \"inject\": {\"header\": \"X-Key\", \"format\": \"static\"}}"),
              "invalid inject.format: must contain {value}");
  ASSERT_MSG (secret_error ("{\"value\": \"v\", \"hosts\": [\"h.example.com\"],"
                            " \"inject\": {\"header\": \"X-Key\"}}"),
              "invalid inject: header and format are both required");
  ASSERT_MSG (secret_error ("{\"value\": \"v\", \"hosts\": [\"h.example.com\"],"
                            " \"inject\": {\"header\": \"X-Key\", \"format\": \"{value}\\r\\nX: y\"}}"),
              "invalid inject.format: must not contain CR or LF");
  ASSERT_MSG (secret_error ("{\"value\": \"v\", \"hosts\": [\"h.example.com\"],"
                            " \"inject\": {\"header\": \"X-Key\", \"format\": \"{value}\", \"x\": 1}}"),
              "bad request body: json: unknown field x");
  ASSERT_MSG_HAS (secret_error ("{\"value\": \"v\", \"hosts\": [\"h.example.com\"], \"placeholder_prefix\": \"a b\"}"),
                  "without spaces");
  ASSERT_MSG (secret_error ("{\"value\": \"v\", \"hosts\": [\"h.example.com\"], \"bogus\": 1}"),
              "bad request body: json: unknown field bogus");
  ASSERT_MSG (secret_error ("{\"value\": 5, \"hosts\": [\"h.example.com\"]}"),
              "bad request body: json: cannot unmarshal number into field value of type string");
  ASSERT_MSG (secret_error ("{\"value\": \"v\", \"hosts\": \"h.example.com\"}"),
              "bad request body: json: cannot unmarshal string into field hosts of type array");
  /* a value in a message would leak it */
  {
    g_autofree char *msg = secret_error ("{\"value\": \"hunter2\\n\", \"hosts\": [\"h.example.com\"]}");

    g_assert_null (strstr (msg, "hunter2"));
  }
}

static void
test_project_and_key (void)
{
  g_autoptr(JsonNode) p1 = parse ("{\"name\": \"acme\", \"domains\": [\"apps.acme.dev\", \"acme.io\"]}");
  g_autoptr(JsonNode) p2 = parse ("{\"name\": \"beta\"}");
  g_autoptr(JsonNode) patch = parse ("{\"domains\": [\"a.example.org\"]}");
  g_autoptr(JsonNode) k1 = parse ("{\"name\": \"ci key\"}");
  g_autoptr(GError) error = NULL;
  g_autofree char *name = NULL;
  g_autofree char *name2 = NULL;
  g_autofree char *key_name = NULL;
  g_auto(GStrv) domains = NULL;
  g_auto(GStrv) domains2 = NULL;
  g_auto(GStrv) domains3 = NULL;
  const char *bad_projects[] = {
    "{}", "{\"name\": \"Alpha\"}", "{\"name\": 7}", "{\"name\": \"gamma\", \"bogus\": 1}",
    "{\"name\": \"gamma\", \"domains\": [\"not a domain\"]}", "{\"name\": \"gamma\", \"domains\": \"a.b\"}",
    "{\"name\": \"gamma\", \"domains\": [\"a.example.com\", \"a.example.com\"]}",
  };
  guint i;

  g_assert_true (box_project_create_from_json (p1, &name, &domains, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (name, ==, "acme");
  g_assert_cmpuint (g_strv_length (domains), ==, 2);
  g_assert_cmpstr (domains[1], ==, "acme.io");
  g_assert_true (box_project_create_from_json (p2, &name2, &domains2, &error));
  g_assert_nonnull (domains2);
  g_assert_null (domains2[0]);
  /* without a name pointer: the PATCH body, {domains} only */
  g_assert_true (box_project_create_from_json (patch, NULL, &domains3, &error));
  g_assert_cmpstr (domains3[0], ==, "a.example.org");
  g_assert_false (box_project_create_from_json (p2, NULL, NULL, &error));
  g_assert_cmpstr (error->message, ==, "bad request body: json: unknown field name");
  g_clear_error (&error);

  for (i = 0; i < G_N_ELEMENTS (bad_projects); i++) {
    g_autoptr(JsonNode) node = parse (bad_projects[i]);
    g_autofree char *n = NULL;
    g_auto(GStrv) d = NULL;

    g_assert_false (box_project_create_from_json (node, &n, &d, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    g_assert_null (n);
    g_assert_null (d);
    g_clear_error (&error);
  }

  g_assert_true (box_key_create_from_json (k1, &key_name, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (key_name, ==, "ci key");
  {
    g_autoptr(JsonNode) ro = parse ("{\"name\": \"r\", \"read_only\": true}");
    g_autoptr(JsonNode) bad = parse ("{\"name\": \"r\", \"read_only\": \"yes\"}");
    g_autofree char *n = NULL;
    gboolean read_only = FALSE;

    g_assert_true (box_key_create_from_json (ro, &n, &read_only, &error));
    g_assert_no_error (error);
    g_assert_true (read_only);
    g_assert_false (box_key_create_from_json (bad, NULL, &read_only, &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
    g_clear_error (&error);
  }
  {
    g_autoptr(JsonNode) k2 = parse ("{\"name\": \"x\", \"bogus\": true}");
    g_autoptr(JsonNode) k3 = parse ("{}");
    g_autofree char *n = NULL;

    g_assert_false (box_key_create_from_json (k2, &n, NULL, &error));
    g_assert_cmpstr (error->message, ==, "bad request body: json: unknown field bogus");
    g_clear_error (&error);
    g_assert_false (box_key_create_from_json (k3, &n, NULL, &error));
    g_assert_cmpstr (error->message, ==, "invalid key: name is required");
    g_assert_null (n);
  }
}

static void
test_not_an_object (void)
{
  g_autoptr(JsonNode) array = json_node_new (JSON_NODE_ARRAY);
  g_autoptr(GError) error = NULL;

  json_node_take_array (array, json_array_new ());
  g_assert_null (box_sandbox_create_from_json (array, &error));
  g_assert_cmpstr (error->message, ==, "bad request body: json: cannot unmarshal array into a request object");
  g_clear_error (&error);
  g_assert_null (box_sandbox_update_from_json (NULL, &error));
  g_assert_cmpstr (error->message, ==, "bad request body: json: cannot unmarshal null into a request object");
  g_clear_error (&error);
  g_assert_null (box_secret_put_from_json (array, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
}

static char *
exec_error (const char *body)
{
  g_autoptr(JsonNode) node = parse (body);
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxExecRequest) req = box_exec_request_from_json (node, &error);

  g_assert_null (req);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  return g_strdup (error->message);
}

static void
test_exec_run (void)
{
  g_autoptr(JsonNode) full = parse ("{\"cmd\": [\"sh\", \"-c\", \"cat\"], \"stdin\": \"aGVsbG8=\","
                                    " \"cwd\": \"/tmp\", \"env\": {\"A_1\": \"x\"},"
                                    " \"user\": \"root\", \"timeout_s\": 3600}");
  g_autoptr(JsonNode) minimal = parse ("{\"cmd\": [\"true\"]}");
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxExecRequest) req = box_exec_request_from_json (full, &error);
  g_autoptr(BoxExecRequest) copy = NULL;
  g_autoptr(BoxExecRequest) defaults = NULL;
  const char *const messages[][2] = {
    { "{}", "invalid cmd: a non-empty array of strings (argv) is required" },
    { "{\"cmd\": []}", "invalid cmd: a non-empty array of strings (argv) is required" },
    { "{\"cmd\": [\"\"]}", "invalid cmd: a non-empty array of strings (argv) is required" },
    { "{\"cmd\": \"ls -l\"}",
      "bad request body: json: cannot unmarshal string into field cmd of type array" },
    { "{\"cmd\": [1]}",
      "bad request body: json: cannot unmarshal number into field cmd of type string" },
    { "{\"cmd\": [\"true\"], \"timeout_s\": 0}", "invalid timeout_s 0: must be 1 to 3600" },
    { "{\"cmd\": [\"true\"], \"timeout_s\": 3601}", "invalid timeout_s 3601: must be 1 to 3600" },
    { "{\"cmd\": [\"true\"], \"timeout_s\": 1.5}",
      "bad request body: json: cannot unmarshal number into field timeout_s of type integer" },
    { "{\"cmd\": [\"true\"], \"stdin\": \"not base64!\"}", "invalid stdin: must be base64" },
    { "{\"cmd\": [\"true\"], \"stdin\": \"aGVsbG8\"}", "invalid stdin: must be base64" },
    { "{\"cmd\": [\"true\"], \"cwd\": \"tmp\"}", "invalid cwd: must be an absolute path" },
    { "{\"cmd\": [\"true\"], \"user\": \"\"}", "invalid user: must not be empty" },
    { "{\"cmd\": [\"true\"], \"tty\": true}", "bad request body: json: unknown field tty" },
  };
  guint i;

  g_assert_no_error (error);
  g_assert_cmpstr (req->argv[2], ==, "cat");
  g_assert_cmpmem (g_bytes_get_data (req->stdin_data, NULL), g_bytes_get_size (req->stdin_data),
                   "hello", 5);
  g_assert_cmpstr (req->cwd, ==, "/tmp");
  g_assert_cmpstr (g_hash_table_lookup (req->env, "A_1"), ==, "x");
  g_assert_cmpstr (req->user, ==, "root");
  g_assert_cmpuint (req->timeout_s, ==, 3600);

  copy = box_exec_request_copy (req);
  g_assert_cmpstr (copy->argv[0], ==, "sh");
  g_assert_cmpstr (g_hash_table_lookup (copy->env, "A_1"), ==, "x");
  g_assert_true (g_bytes_equal (copy->stdin_data, req->stdin_data));

  defaults = box_exec_request_from_json (minimal, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (defaults->timeout_s, ==, 60);
  g_assert_null (defaults->user);
  g_assert_null (defaults->cwd);
  g_assert_null (defaults->stdin_data);

  for (i = 0; i < G_N_ELEMENTS (messages); i++) {
    g_autofree char *message = exec_error (messages[i][0]);
    g_assert_cmpstr (message, ==, messages[i][1]);
  }
  {
    g_autofree char *message = exec_error ("{\"cmd\": [\"true\"], \"env\": {\"1X\": \"y\"}}");
    g_assert_nonnull (strstr (message, "1X"));
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/requests/parse-body", test_parse_body);
  g_test_add_func ("/requests/check-fields", test_check_fields);
  g_test_add_func ("/requests/create/full", test_create_full);
  g_test_add_func ("/requests/create/empty-and-nulls", test_create_empty_and_nulls);
  g_test_add_func ("/requests/create/image", test_create_image);
  g_test_add_func ("/requests/create/values", test_create_values);
  g_test_add_func ("/requests/unknown-fields", test_unknown_fields);
  g_test_add_func ("/requests/type-errors", test_type_errors);
  g_test_add_func ("/requests/deadline", test_deadline);
  g_test_add_func ("/requests/fork", test_fork);
  g_test_add_func ("/requests/rules", test_rules);
  g_test_add_func ("/requests/update", test_update);
  g_test_add_func ("/requests/secret-put", test_secret_put);
  g_test_add_func ("/requests/project-and-key", test_project_and_key);
  g_test_add_func ("/requests/not-an-object", test_not_an_object);
  g_test_add_func ("/requests/exec-run", test_exec_run);
  return g_test_run ();
}
