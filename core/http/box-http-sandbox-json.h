/* box-http-sandbox-json.h: a sandbox as the API shows it, written straight
 * into the answer's text (box-json-writer.h).  The same bytes as
 * json_to_string (box_sandbox_to_api_json (...), FALSE), the form the
 * records keep as their reference (tests/http/json-writer-test.c compares
 * the two). */
#pragma once

#include "box-records.h"

G_BEGIN_DECLS

void box_http_sandbox_json_write (GString *out, const BoxSandbox *sandbox,
                                  const char *sandbox_domain,
                                  const char *const *project_domains);

G_END_DECLS
