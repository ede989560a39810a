/* box-requests.h: strict decoding of request bodies.
 *
 * JSON in, request structs out.  Decoding is strict in the way of Go's
 * encoding/json with DisallowUnknownFields, which the specification's
 * messages follow: an unknown member anywhere is
 *   400 invalid "bad request body: json: unknown field <name>"
 * a wrong type is
 *   400 invalid "bad request body: json: cannot unmarshal <json type> into field <path> of type <type>"
 * and malformed JSON is
 *   400 invalid "bad request body: <parser message>".
 * After decoding, each field is format-checked with box-validate.h.  Rules
 * that need state (name taken, unknown template, secret exists) are the
 * engine's.  Fuzzed by tests/fuzz-json.c.
 */
#pragma once

#include "box-exec.h"
#include "box-records.h"

G_BEGIN_DECLS

/* Parses a body.  An empty body is an empty object when @empty_ok. */
JsonNode         *box_json_parse_body           (const char *data, gsize len,
                                                 gboolean empty_ok, GError **error);

/* Fails on the first member of @object (in document order) not in
 * @allowed (NULL-terminated). */
gboolean          box_json_check_fields         (JsonObject *object,
                                                 const char *const *allowed,
                                                 GError **error);

BoxSandboxCreate *box_sandbox_create_from_json  (JsonNode *body, GError **error);
BoxSandboxUpdate *box_sandbox_update_from_json  (JsonNode *body, GError **error);
BoxSecretPut     *box_secret_put_from_json      (JsonNode *body, GError **error);
/* The list under network.egress; each rule checked with box_validate_rule(). */
GPtrArray        *box_rules_from_json           (JsonNode *egress, GError **error);
/* What {include: defaults} stands for: data/network-defaults.json, compiled
 * in as a resource; the engine serves it as GET /v1/network/defaults. */
GPtrArray        *box_network_defaults_load     (GError **error);
/* An operator's replacement for it ([boxd] network_defaults_file): the same
 * document, at most BOX_NETWORK_DEFAULTS_FILE_MAX bytes, 1 to
 * BOX_EGRESS_RULES_MAX rules and no include.  Any fault is BOX_ERROR_INVALID
 * naming the file. */
#define BOX_NETWORK_DEFAULTS_FILE_MAX (1024 * 1024)
GPtrArray        *box_network_defaults_load_file (const char *path, GError **error);

/* Operator bodies (doc/API.md) */
gboolean          box_project_create_from_json  (JsonNode *body, char **name,
                                                 char ***domains, GError **error);
gboolean          box_key_create_from_json      (JsonNode *body, char **name, gboolean *read_only,
                                                 GError **error);

/* POST /checkpoints: {comment?, memory?}; *comment "" when absent, at most
 * BOX_CHECKPOINT_COMMENT_MAX bytes, no control characters; memory default
 * true. */
#define BOX_CHECKPOINT_COMMENT_MAX 256
gboolean          box_checkpoint_create_from_json (JsonNode *body, char **comment,
                                                   gboolean *memory, GError **error);

/* POST /exec/run: {cmd, stdin?, cwd?, env?, user?, timeout_s?}; timeout_s
 * 1..3600 (default 60), stdin base64, cwd absolute, env names checked. */
BoxExecRequest   *box_exec_request_from_json    (JsonNode *body, GError **error);

G_END_DECLS
