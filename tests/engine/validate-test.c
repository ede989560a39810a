/* validate-test.c: every format rule, both sides of every bound. */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-validate.h"

#define DIGEST "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char *
repeat (char c, guint n)
{
  char *s = g_malloc (n + 1);

  memset (s, c, n);
  s[n] = '\0';
  return s;
}

static void
check_message (const GError *error, const char *needle)
{
  if (needle != NULL && strstr (error->message, needle) == NULL)
    g_error ("message %s lacks %s", error->message, needle);
}

/* Checks a result: @ok TRUE means valid; FALSE means BOX_ERROR_INVALID
 * with a message containing @needle (when given). */
#define CHECK(call, ok, needle)                                            \
  G_STMT_START {                                                           \
    g_autoptr(GError) _error = NULL;                                       \
    GError **error = &_error;                                              \
    gboolean _res = (call);                                                \
    if (ok) {                                                              \
      g_assert_no_error (_error);                                          \
      g_assert_true (_res);                                                \
    } else {                                                               \
      g_assert_false (_res);                                               \
      g_assert_error (_error, BOX_ERROR, BOX_ERROR_INVALID);               \
      check_message (_error, (needle));                                    \
    }                                                                      \
  } G_STMT_END

static void
test_sandbox_name (void)
{
  g_autofree char *n32 = repeat ('a', 32);
  g_autofree char *n33 = repeat ('a', 33);
  g_autofree char *p22 = repeat ('p', 22);
  g_autofree char *p23 = repeat ('p', 23);

  CHECK (box_validate_sandbox_name ("web", NULL, error), TRUE, NULL);
  CHECK (box_validate_sandbox_name ("a", NULL, error), TRUE, NULL);
  CHECK (box_validate_sandbox_name ("0", NULL, error), TRUE, NULL);
  CHECK (box_validate_sandbox_name ("calm-otter-0042", "acme", error), TRUE, NULL);
  CHECK (box_validate_sandbox_name (n32, NULL, error), TRUE, NULL);
  CHECK (box_validate_sandbox_name (n33, NULL, error), FALSE, "at most 32");
  /* name + project: 54 fine, 55 not */
  CHECK (box_validate_sandbox_name (n32, p22, error), TRUE, NULL);
  CHECK (box_validate_sandbox_name (n32, p23, error), FALSE, "54");
  CHECK (box_validate_sandbox_name ("a--b", NULL, error), FALSE, "\"--\"");
  CHECK (box_validate_sandbox_name ("-ab", NULL, error), FALSE, "start and end");
  CHECK (box_validate_sandbox_name ("ab-", NULL, error), FALSE, "start and end");
  CHECK (box_validate_sandbox_name ("-", NULL, error), FALSE, "start and end");
  CHECK (box_validate_sandbox_name ("Foo", NULL, error), FALSE,
         "invalid name \"Foo\": must be a DNS label: lowercase letters, digits and '-'");
  CHECK (box_validate_sandbox_name ("a_b", NULL, error), FALSE, "DNS label");
  CHECK (box_validate_sandbox_name ("a.b", NULL, error), FALSE, "DNS label");
  CHECK (box_validate_sandbox_name ("a b", NULL, error), FALSE, "DNS label");
  CHECK (box_validate_sandbox_name ("caf\xc3\xa9", NULL, error), FALSE, "DNS label");
  CHECK (box_validate_sandbox_name ("", NULL, error), FALSE, "1 to 32");
  CHECK (box_validate_sandbox_name (NULL, NULL, error), FALSE, "1 to 32");
  /* would be taken for an ID in /v1/sandboxes/{sandbox} */
  CHECK (box_validate_sandbox_name ("sb-abcdefgh2345", NULL, error), FALSE, "sandbox ID");
  CHECK (box_validate_sandbox_name ("sb-abcdefgh234", NULL, error), TRUE, NULL);
}

static void
test_project_name (void)
{
  g_autofree char *n32 = repeat ('b', 32);
  g_autofree char *n33 = repeat ('b', 33);

  CHECK (box_validate_project_name ("acme", error), TRUE, NULL);
  CHECK (box_validate_project_name ("team-7", error), TRUE, NULL);
  CHECK (box_validate_project_name (n32, error), TRUE, NULL);
  CHECK (box_validate_project_name (n33, error), FALSE, "invalid project name");
  CHECK (box_validate_project_name ("Alpha", error), FALSE, "DNS label");
  CHECK (box_validate_project_name ("-alpha", error), FALSE, NULL);
  CHECK (box_validate_project_name ("alpha-", error), FALSE, NULL);
  CHECK (box_validate_project_name ("al--pha", error), FALSE, "--");
  CHECK (box_validate_project_name ("al_pha", error), FALSE, NULL);
  CHECK (box_validate_project_name ("al.pha", error), FALSE, NULL);
  CHECK (box_validate_project_name ("al pha", error), FALSE, NULL);
  CHECK (box_validate_project_name ("", error), FALSE, NULL);
}

static void
test_project_domain (void)
{
  g_autofree char *l63 = repeat ('c', 63);
  g_autofree char *l64 = repeat ('c', 64);
  g_autofree char *d63 = g_strconcat (l63, ".dev", NULL);
  g_autofree char *d64 = g_strconcat (l64, ".dev", NULL);
  g_autofree char *l61 = repeat ('d', 61);
  g_autofree char *l62 = repeat ('d', 62);
  /* 3 labels of 63 + 3 dots + 61 = 253 */
  g_autofree char *d253 = g_strdup_printf ("%s.%s.%s.%s", l63, l63, l63, l61);
  g_autofree char *d254 = g_strdup_printf ("%s.%s.%s.%s", l63, l63, l63, l62);

  g_assert_cmpuint (strlen (d253), ==, 253);
  g_assert_cmpuint (strlen (d254), ==, 254);
  CHECK (box_validate_project_domain ("apps.example.com", error), TRUE, NULL);
  CHECK (box_validate_project_domain ("acme.dev", error), TRUE, NULL);
  CHECK (box_validate_project_domain (d63, error), TRUE, NULL);
  CHECK (box_validate_project_domain (d64, error), FALSE, "63");
  CHECK (box_validate_project_domain (d253, error), TRUE, NULL);
  CHECK (box_validate_project_domain (d254, error), FALSE, "253");
  CHECK (box_validate_project_domain ("localhost", error), FALSE, "'.'");
  CHECK (box_validate_project_domain ("Apps.example.com", error), FALSE, "lowercase");
  CHECK (box_validate_project_domain ("not a domain", error), FALSE, "DNS name");
  CHECK (box_validate_project_domain ("example.com.", error), FALSE, "empty label");
  CHECK (box_validate_project_domain (".example.com", error), FALSE, "empty label");
  CHECK (box_validate_project_domain ("a..b", error), FALSE, "empty label");
  CHECK (box_validate_project_domain ("-a.example.com", error), FALSE, "'-'");
  CHECK (box_validate_project_domain ("*.example.com", error), FALSE, NULL);
  CHECK (box_validate_project_domain ("10.0.0.1", error), FALSE, "IP address");
  CHECK (box_validate_project_domain ("127.1", error), FALSE, "IP address");
  CHECK (box_validate_project_domain ("::1", error), FALSE, "IP address");
  CHECK (box_validate_project_domain ("", error), FALSE, NULL);
}

static void
test_key_name (void)
{
  g_autofree char *n64 = repeat ('k', 64);
  g_autofree char *n65 = repeat ('k', 65);
  GString *utf64 = g_string_new (NULL);
  guint i;

  for (i = 0; i < 64; i++)
    g_string_append (utf64, "\xc3\xa9"); /* é: 64 chars, 128 bytes */
  CHECK (box_validate_key_name ("ci deploy key", error), TRUE, NULL);
  CHECK (box_validate_key_name (n64, error), TRUE, NULL);
  CHECK (box_validate_key_name (utf64->str, error), TRUE, NULL);
  CHECK (box_validate_key_name (n65, error), FALSE, "1 to 64");
  CHECK (box_validate_key_name ("", error), FALSE, "1 to 64");
  CHECK (box_validate_key_name ("a\tb", error), FALSE, "printable");
  CHECK (box_validate_key_name ("a\nb", error), FALSE, "printable");
  CHECK (box_validate_key_name ("\xff\xfe", error), FALSE, "UTF-8");
  g_string_append (utf64, "x");
  CHECK (box_validate_key_name (utf64->str, error), FALSE, "1 to 64");
  g_string_free (utf64, TRUE);
}

static void
test_label (void)
{
  g_autofree char *k63 = repeat ('k', 63);
  g_autofree char *k64 = repeat ('k', 64);
  g_autofree char *v255 = repeat ('v', 255);
  g_autofree char *v256 = repeat ('v', 256);
  GString *uv = g_string_new (NULL);
  guint i;

  for (i = 0; i < 255; i++)
    g_string_append (uv, "\xe2\x82\xac"); /* €: 255 chars, 765 bytes */
  CHECK (box_validate_label ("team", "infra", error), TRUE, NULL);
  CHECK (box_validate_label ("e2b/user", "", error), TRUE, NULL);
  CHECK (box_validate_label (k63, v255, error), TRUE, NULL);
  CHECK (box_validate_label (k64, "v", error), FALSE, "1 to 63");
  CHECK (box_validate_label ("", "v", error), FALSE, "1 to 63");
  CHECK (box_validate_label ("k", v256, error), FALSE, "at most 255");
  CHECK (box_validate_label ("k", uv->str, error), TRUE, NULL);
  g_string_append (uv, "x");
  CHECK (box_validate_label ("k", uv->str, error), FALSE, "at most 255");
  CHECK (box_validate_label ("a=b", "v", error), FALSE, "'=' or ','");
  CHECK (box_validate_label ("a,b", "v", error), FALSE, "'=' or ','");
  CHECK (box_validate_label ("k", "a=b,c", error), TRUE, NULL);
  CHECK (box_validate_label ("\xc3", "v", error), FALSE, "UTF-8");
  CHECK (box_validate_label ("k", "\xc3", error), FALSE, "UTF-8");
  CHECK (box_validate_label ("a\x01", "v", error), FALSE, "control");
  g_string_free (uv, TRUE);
}

static void
test_env_name (void)
{
  CHECK (box_validate_env_name ("PATH", error), TRUE, NULL);
  CHECK (box_validate_env_name ("_a1", error), TRUE, NULL);
  CHECK (box_validate_env_name ("Z", error), TRUE, NULL);
  CHECK (box_validate_env_name ("lower_case9", error), TRUE, NULL);
  CHECK (box_validate_env_name ("1A", error), FALSE, "[A-Za-z_][A-Za-z0-9_]*");
  CHECK (box_validate_env_name ("A-B", error), FALSE, "invalid env name \"A-B\"");
  CHECK (box_validate_env_name ("A B", error), FALSE, NULL);
  CHECK (box_validate_env_name ("A=B", error), FALSE, NULL);
  CHECK (box_validate_env_name ("", error), FALSE, "empty");
}

static void
test_resources (void)
{
  BoxResources r;

  r = (BoxResources) { 0, 0, 0 };
  CHECK (box_validate_resources (&r, error), TRUE, NULL);
  r = (BoxResources) { 1, 128, 1 };
  CHECK (box_validate_resources (&r, error), TRUE, NULL);
  r = (BoxResources) { 32, 262144, 2048 };
  CHECK (box_validate_resources (&r, error), TRUE, NULL);
  r = (BoxResources) { 33, 0, 0 };
  CHECK (box_validate_resources (&r, error), FALSE, "resources.cpus 33");
  r = (BoxResources) { 0, 127, 0 };
  CHECK (box_validate_resources (&r, error), FALSE, "resources.memory_mib 127");
  r = (BoxResources) { 0, 262145, 0 };
  CHECK (box_validate_resources (&r, error), FALSE, "memory_mib");
  r = (BoxResources) { 0, 0, 2049 };
  CHECK (box_validate_resources (&r, error), FALSE, "resources.disk_gib 2049");
}

static void
test_http_port (void)
{
  CHECK (box_validate_http_port (1, error), TRUE, NULL);
  CHECK (box_validate_http_port (8080, error), TRUE, NULL);
  CHECK (box_validate_http_port (65535, error), TRUE, NULL);
  CHECK (box_validate_http_port (0, error), FALSE, "http_port 0");
  CHECK (box_validate_http_port (65536, error), FALSE, "1 to 65535");
  CHECK (box_validate_http_port (-1, error), FALSE, NULL);
}

static void
test_image_ref (void)
{
  g_autofree char *long_repo = repeat ('r', 256);
  g_autofree char *too_long = g_strconcat (long_repo, "@sha256:" DIGEST, NULL);

  CHECK (box_validate_image_ref ("registry.example.com/org/name@sha256:" DIGEST, error), TRUE, NULL);
  CHECK (box_validate_image_ref ("registry.example.com:5000/org/name@sha256:" DIGEST, error), TRUE, NULL);
  CHECK (box_validate_image_ref ("localhost/app@sha256:" DIGEST, error), TRUE, NULL);
  CHECK (box_validate_image_ref ("10.0.0.5:5000/app@sha256:" DIGEST, error), TRUE, NULL);
  CHECK (box_validate_image_ref ("alpine@sha256:" DIGEST, error), TRUE, NULL);
  CHECK (box_validate_image_ref ("library/my_app.v2-x@sha256:" DIGEST, error), TRUE, NULL);
  /* tags */
  CHECK (box_validate_image_ref ("docker.io/library/alpine:3.19", error), FALSE, "tags are refused");
  CHECK (box_validate_image_ref ("alpine:latest", error), FALSE, "digest is required");
  CHECK (box_validate_image_ref ("alpine:3.19@sha256:" DIGEST, error), FALSE, "tags are refused");
  CHECK (box_validate_image_ref ("registry.example.com:5000/app:1@sha256:" DIGEST, error), FALSE, "tags");
  /* no digest, bad digests */
  CHECK (box_validate_image_ref ("alpine", error), FALSE, "digest is required");
  CHECK (box_validate_image_ref ("registry.example.com/app@sha256:abc", error), FALSE, "64");
  CHECK (box_validate_image_ref ("app@sha256:" DIGEST "0", error), FALSE, "64");
  CHECK (box_validate_image_ref ("app@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
                                 error), FALSE, "lowercase hex");
  CHECK (box_validate_image_ref ("app@sha512:" DIGEST, error), FALSE, "sha256");
  CHECK (box_validate_image_ref ("app@" DIGEST, error), FALSE, "sha256");
  /* repositories */
  CHECK (box_validate_image_ref ("Registry.example.com/app@sha256:" DIGEST, error), FALSE, "registry");
  CHECK (box_validate_image_ref ("registry.example.com/App@sha256:" DIGEST, error), FALSE, "lowercase");
  CHECK (box_validate_image_ref ("registry.example.com//app@sha256:" DIGEST, error), FALSE, NULL);
  CHECK (box_validate_image_ref ("registry.example.com/app/@sha256:" DIGEST, error), FALSE, NULL);
  CHECK (box_validate_image_ref ("registry.example.com:99999/app@sha256:" DIGEST, error), FALSE, NULL);
  CHECK (box_validate_image_ref ("-app@sha256:" DIGEST, error), FALSE, NULL);
  CHECK (box_validate_image_ref ("a..b@sha256:" DIGEST, error), FALSE, NULL);
  CHECK (box_validate_image_ref ("@sha256:" DIGEST, error), FALSE, NULL);
  CHECK (box_validate_image_ref ("https://r.example.com/app@sha256:" DIGEST, error), FALSE, NULL);
  CHECK (box_validate_image_ref (too_long, error), FALSE, "255");
  CHECK (box_validate_image_ref ("", error), FALSE, NULL);
  CHECK (box_validate_image_ref (NULL, error), FALSE, NULL);
}

static BoxRule *
rule (const char *domain, gboolean allow, guint16 port, const char *include)
{
  BoxRule *r = g_new0 (BoxRule, 1);

  r->domain = g_strdup (domain);
  r->allow = allow;
  r->include = g_strdup (include);
  if (port != 0) {
    r->ports = g_new (guint16, 1);
    r->ports[0] = port;
    r->n_ports = 1;
  }
  return r;
}

#define CHECK_RULE(domain, allow, port, include, ok, needle)                \
  G_STMT_START {                                                           \
    g_autoptr(BoxRule) _r = rule (domain, allow, port, include);           \
    CHECK (box_validate_rule (_r, error), ok, needle);                     \
  } G_STMT_END

static void
test_rule (void)
{
  g_autoptr(BoxRule) zero_port = rule ("a.example.com", TRUE, 443, NULL);
  g_autoptr(BoxRule) include_with_domain = rule ("a.example.com", FALSE, 0, "defaults");
  g_autoptr(BoxRule) include_with_ports = rule (NULL, FALSE, 80, "defaults");

  CHECK_RULE ("api.example.com", TRUE, 0, NULL, TRUE, NULL);
  CHECK_RULE ("api.example.com", TRUE, 443, NULL, TRUE, NULL);
  CHECK_RULE ("*.example.com", FALSE, 0, NULL, TRUE, NULL);
  CHECK_RULE ("*", TRUE, 22, NULL, TRUE, NULL);
  CHECK_RULE ("*", FALSE, 0, NULL, TRUE, NULL);
  CHECK_RULE ("localhost", TRUE, 0, NULL, TRUE, NULL);
  CHECK_RULE ("_dmarc.example.com", TRUE, 0, NULL, TRUE, NULL);
  CHECK_RULE (NULL, FALSE, 0, "defaults", TRUE, NULL);
  /* addresses */
  CHECK_RULE ("1.2.3.4", TRUE, 0, NULL, FALSE, "IP address");
  CHECK_RULE ("10.0.0.1", FALSE, 0, NULL, FALSE, "IP address");
  CHECK_RULE ("::1", TRUE, 0, NULL, FALSE, "IP address");
  CHECK_RULE ("2001:db8::1", TRUE, 0, NULL, FALSE, "IP address");
  CHECK_RULE ("[2001:db8::1]", TRUE, 0, NULL, FALSE, "IP address");
  CHECK_RULE ("127.1", TRUE, 0, NULL, FALSE, "IP address");
  CHECK_RULE ("*.10.0.0.1", TRUE, 0, NULL, FALSE, "IP address");
  /* names */
  CHECK_RULE ("X.com", TRUE, 0, NULL, FALSE, "lowercase");
  CHECK_RULE ("a b.com", TRUE, 0, NULL, FALSE, NULL);
  CHECK_RULE ("*example.com", TRUE, 0, NULL, FALSE, "wildcard");
  CHECK_RULE ("a.*.com", TRUE, 0, NULL, FALSE, "wildcard");
  CHECK_RULE ("*.", TRUE, 0, NULL, FALSE, NULL);
  CHECK_RULE ("*.*", TRUE, 0, NULL, FALSE, NULL);
  CHECK_RULE ("example.com.", TRUE, 0, NULL, FALSE, NULL);
  CHECK_RULE ("", TRUE, 0, NULL, FALSE, "domain is required");
  CHECK_RULE (NULL, TRUE, 0, NULL, FALSE, "domain is required");
  CHECK_RULE ("https://a.com", TRUE, 0, NULL, FALSE, NULL);
  CHECK_RULE ("a.com:443", TRUE, 0, NULL, FALSE, NULL);
  CHECK_RULE ("b\xc3\xbc" "cher.example", TRUE, 0, NULL, FALSE, "xn--");
  CHECK_RULE ("*.b\xc3\xbc" "cher.example", TRUE, 0, NULL, FALSE, "xn--");
  CHECK_RULE ("xn--bcher-kva.example", TRUE, 0, NULL, TRUE, NULL);
  /* ports */
  CHECK_RULE ("x.com", FALSE, 80, NULL, FALSE, "deny rule takes no ports");
  zero_port->ports[0] = 0;
  CHECK (box_validate_rule (zero_port, error), FALSE, "1 to 65535");
  zero_port->ports[0] = 65535;
  CHECK (box_validate_rule (zero_port, error), TRUE, NULL);
  /* includes */
  CHECK_RULE (NULL, FALSE, 0, "everything", FALSE, "\"defaults\"");
  CHECK (box_validate_rule (include_with_domain, error), FALSE, "no other field");
  CHECK (box_validate_rule (include_with_ports, error), FALSE, "no other field");
  CHECK (box_validate_rule (NULL, error), FALSE, NULL);
}

static GPtrArray *
rules_of (guint n_plain, gboolean with_include)
{
  GPtrArray *rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  guint i;

  if (with_include)
    g_ptr_array_add (rules, rule (NULL, FALSE, 0, "defaults"));
  for (i = 0; i < n_plain; i++) {
    g_autofree char *domain = g_strdup_printf ("h%u.example.com", i);

    g_ptr_array_add (rules, rule (domain, TRUE, 0, NULL));
  }
  return rules;
}

static void
test_rules_count (void)
{
  g_autoptr(GPtrArray) r1000 = rules_of (1000, FALSE);
  g_autoptr(GPtrArray) r1001 = rules_of (1001, FALSE);
  g_autoptr(GPtrArray) d1000 = rules_of (1000 - 40, TRUE);
  g_autoptr(GPtrArray) d1001 = rules_of (1001 - 40, TRUE);
  g_autoptr(GPtrArray) bad = rules_of (3, FALSE);

  CHECK (box_validate_rules (r1000, 40, error), TRUE, NULL);
  CHECK (box_validate_rules (r1001, 40, error), FALSE, "too many network rules: 1001");
  CHECK (box_validate_rules (d1000, 40, error), TRUE, NULL);
  CHECK (box_validate_rules (d1001, 40, error), FALSE, "counting defaults expanded");
  CHECK (box_validate_rules (NULL, 40, error), TRUE, NULL);
  g_ptr_array_add (bad, rule ("1.1.1.1", TRUE, 0, NULL));
  CHECK (box_validate_rules (bad, 40, error), FALSE, "IP address");
}

static void
test_secret_name (void)
{
  g_autofree char *n64 = repeat ('A', 64);
  g_autofree char *n65 = repeat ('A', 65);

  CHECK (box_validate_secret_name ("GITHUB_TOKEN", error), TRUE, NULL);
  CHECK (box_validate_secret_name ("_X9", error), TRUE, NULL);
  CHECK (box_validate_secret_name (n64, error), TRUE, NULL);
  CHECK (box_validate_secret_name (n65, error), FALSE, "at most 64");
  CHECK (box_validate_secret_name ("github_token", error), FALSE, "[A-Z_][A-Z0-9_]*");
  CHECK (box_validate_secret_name ("9TOKEN", error), FALSE, NULL);
  CHECK (box_validate_secret_name ("MY-TOKEN", error), FALSE, NULL);
  CHECK (box_validate_secret_name ("", error), FALSE, NULL);
}

static void
test_secret_value (void)
{
  g_autofree char *v8192 = repeat ('y', 8192);
  g_autofree char *v8193 = repeat ('y', 8193);
  g_autoptr(GError) err = NULL;

  CHECK (box_validate_secret_value ("x", 1, error), TRUE, NULL);
  CHECK (box_validate_secret_value (v8192, 8192, error), TRUE, NULL);
  CHECK (box_validate_secret_value (v8193, 8193, error), FALSE, "1 to 8192 bytes");
  CHECK (box_validate_secret_value ("", 0, error), FALSE, "1 to 8192 bytes");
  CHECK (box_validate_secret_value ("a\rb", 3, error), FALSE, "CR, LF or NUL");
  CHECK (box_validate_secret_value ("a\nb", 3, error), FALSE, "CR, LF or NUL");
  CHECK (box_validate_secret_value ("a\0b", 3, error), FALSE, "CR, LF or NUL");
  CHECK (box_validate_secret_value ("tab\tand spaces", 14, error), TRUE, NULL);
  /* the message never shows the value */
  g_assert_false (box_validate_secret_value ("hunter2\n", 8, &err));
  g_assert_null (strstr (err->message, "hunter2"));
}

static void
test_secret_host (void)
{
  CHECK (box_validate_secret_host ("api.example.com", error), TRUE, NULL);
  CHECK (box_validate_secret_host ("*.example.com", error), TRUE, NULL);
  CHECK (box_validate_secret_host ("api.example.com/v1/", error), TRUE, NULL);
  CHECK (box_validate_secret_host ("*.example.com/repos/acme", error), TRUE, NULL);
  CHECK (box_validate_secret_host ("api.example.com/a%20b@c:d", error), TRUE, NULL);
  CHECK (box_validate_secret_host ("https://api.example.com", error), FALSE, "scheme");
  CHECK (box_validate_secret_host ("api.example.com:443", error), FALSE, "no port");
  CHECK (box_validate_secret_host ("API.example.com", error), FALSE, "lowercase");
  CHECK (box_validate_secret_host ("*", error), FALSE, NULL);
  CHECK (box_validate_secret_host ("*.com", error), FALSE, NULL);
  CHECK (box_validate_secret_host ("a.*.com", error), FALSE, "wildcard");
  CHECK (box_validate_secret_host ("10.0.0.1", error), FALSE, "IP address");
  CHECK (box_validate_secret_host ("[::1]", error), FALSE, "IP address");
  CHECK (box_validate_secret_host ("", error), FALSE, NULL);
  CHECK (box_validate_secret_host ("/v1", error), FALSE, NULL);
  CHECK (box_validate_secret_host ("api.example.com/a b", error), FALSE, "path");
  CHECK (box_validate_secret_host ("api.example.com/a?b", error), FALSE, "path");
  CHECK (box_validate_secret_host ("api.example.com/a/../b", error), FALSE, "'..'");
  CHECK (box_validate_secret_host ("api.example.com//b", error), FALSE, NULL);
}

static void
test_inject_header (void)
{
  const char *refused[] = {
    "Host", "host", "Content-Length", "transfer-encoding", "Connection", "Upgrade", "Keep-Alive",
    "Proxy-Connection", "TE", "Trailer", "Expect", "CONTENT-LENGTH",
  };
  guint i;

  CHECK (box_validate_inject_header ("Authorization", error), TRUE, NULL);
  CHECK (box_validate_inject_header ("X-Api-Key", error), TRUE, NULL);
  CHECK (box_validate_inject_header ("x-goog-api-key", error), TRUE, NULL);
  for (i = 0; i < G_N_ELEMENTS (refused); i++)
    CHECK (box_validate_inject_header (refused[i], error), FALSE, "frames or routes");
  CHECK (box_validate_inject_header (":authority", error), FALSE, "pseudo");
  CHECK (box_validate_inject_header (":path", error), FALSE, "pseudo");
  CHECK (box_validate_inject_header ("X Api", error), FALSE, "token");
  CHECK (box_validate_inject_header ("X-Api:", error), FALSE, "token");
  CHECK (box_validate_inject_header ("X-\xc3\xa9", error), FALSE, "token");
  CHECK (box_validate_inject_header ("", error), FALSE, NULL);
}

static void
test_placeholder_prefix (void)
{
  g_autofree char *p64 = repeat ('p', 64);
  g_autofree char *p65 = repeat ('p', 65);

  CHECK (box_validate_placeholder_prefix (NULL, error), TRUE, NULL);
  CHECK (box_validate_placeholder_prefix ("", error), TRUE, NULL);
  CHECK (box_validate_placeholder_prefix ("sk-", error), TRUE, NULL);
  CHECK (box_validate_placeholder_prefix ("!~{}", error), TRUE, NULL);
  CHECK (box_validate_placeholder_prefix (p64, error), TRUE, NULL);
  CHECK (box_validate_placeholder_prefix (p65, error), FALSE, "at most 64");
  CHECK (box_validate_placeholder_prefix ("a b", error), FALSE, "without spaces");
  CHECK (box_validate_placeholder_prefix ("a\tb", error), FALSE, NULL);
  CHECK (box_validate_placeholder_prefix ("\xc3\xa9", error), FALSE, "ASCII");
}

static gboolean
all_base32 (const char *s)
{
  for (; *s != '\0'; s++) {
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '2' && *s <= '7')))
      return FALSE;
  }
  return TRUE;
}

static void
test_generators (void)
{
  g_autoptr(GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *b = box_random_base32 (40);
  g_autofree char *empty = box_random_base32 (0);
  g_autofree char *placeholder = box_secret_placeholder ("GITHUB_TOKEN", NULL);
  g_autofree char *placeholder_prefixed = box_secret_placeholder ("API_KEY", "sk-");
  g_autofree char *p32 = repeat ('p', 32);
  guint i;

  g_assert_cmpuint (strlen (b), ==, 40);
  g_assert_true (all_base32 (b));
  g_assert_cmpstr (empty, ==, "");
  g_assert_cmpstr (placeholder, ==, "__box_github_token__");
  g_assert_cmpstr (placeholder_prefixed, ==, "sk-__box_api_key__");
  for (i = 0; i < 200; i++) {
    g_autofree char *id = box_generate_sandbox_id ();
    g_autofree char *key_id = box_generate_key_id ();
    g_autofree char *secret = box_generate_key_secret ();
    g_autofree char *session = box_generate_session_id ();
    char *name = box_generate_sandbox_name ();
    g_auto(GStrv) parts = g_strsplit (name, "-", -1);

    g_assert_true (box_is_sandbox_id (id));
    g_assert_true (g_str_has_prefix (key_id, "key-") && strlen (key_id) == 16);
    g_assert_true (all_base32 (key_id + 4));
    g_assert_true (g_str_has_prefix (secret, "box_") && strlen (secret) == 36);
    g_assert_true (all_base32 (secret + 4));
    g_assert_true (g_str_has_prefix (session, "s-") && strlen (session) == 12);
    g_assert_true (all_base32 (session + 2));
    /* <adjective>-<noun>-<4 digits>, valid even with a 32-char project */
    g_assert_cmpuint (g_strv_length (parts), ==, 3);
    g_assert_cmpuint (strlen (parts[2]), ==, 4);
    g_assert_true (g_ascii_isdigit (parts[2][0]) && g_ascii_isdigit (parts[2][3]));
    CHECK (box_validate_sandbox_name (name, p32, error), TRUE, NULL);
    g_hash_table_add (seen, name);
  }
  /* 200 draws from 64 * 64 * 10000: a repeat would be a broken generator */
  g_assert_cmpuint (g_hash_table_size (seen), >, 195);
}

static void
test_is_helpers (void)
{
  g_assert_true (box_is_sandbox_id ("sb-abcdefgh2345"));
  g_assert_false (box_is_sandbox_id ("sb-abcdefgh234"));
  g_assert_false (box_is_sandbox_id ("sb-abcdefgh23456"));
  g_assert_false (box_is_sandbox_id ("sb-abcdefgh2341"));
  g_assert_false (box_is_sandbox_id ("sb-ABCDEFGH2345"));
  g_assert_false (box_is_sandbox_id ("xx-abcdefgh2345"));
  g_assert_false (box_is_sandbox_id (NULL));
  g_assert_true (box_is_ip_address ("1.2.3.4"));
  g_assert_true (box_is_ip_address ("::1"));
  g_assert_true (box_is_ip_address ("[fe80::1]"));
  g_assert_false (box_is_ip_address ("example.com"));
  g_assert_false (box_is_ip_address ("[]"));
  g_assert_false (box_is_ip_address (""));
  g_assert_false (box_is_ip_address (NULL));
}

static void
test_messages_are_printable (void)
{
  g_autoptr(GError) error = NULL;

  /* control characters and invalid UTF-8 never reach a message raw */
  g_assert_false (box_validate_sandbox_name ("a\x01\xff\"b", NULL, &error));
  g_assert_true (g_utf8_validate (error->message, -1, NULL));
  g_assert_null (strchr (error->message, '\x01'));
  g_assert_nonnull (strstr (error->message, "\\x01"));
  g_assert_nonnull (strstr (error->message, "\\\"b"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/validate/sandbox-name", test_sandbox_name);
  g_test_add_func ("/validate/project-name", test_project_name);
  g_test_add_func ("/validate/project-domain", test_project_domain);
  g_test_add_func ("/validate/key-name", test_key_name);
  g_test_add_func ("/validate/label", test_label);
  g_test_add_func ("/validate/env-name", test_env_name);
  g_test_add_func ("/validate/resources", test_resources);
  g_test_add_func ("/validate/http-port", test_http_port);
  g_test_add_func ("/validate/image-ref", test_image_ref);
  g_test_add_func ("/validate/rule", test_rule);
  g_test_add_func ("/validate/rules-count", test_rules_count);
  g_test_add_func ("/validate/secret-name", test_secret_name);
  g_test_add_func ("/validate/secret-value", test_secret_value);
  g_test_add_func ("/validate/secret-host", test_secret_host);
  g_test_add_func ("/validate/inject-header", test_inject_header);
  g_test_add_func ("/validate/placeholder-prefix", test_placeholder_prefix);
  g_test_add_func ("/validate/generators", test_generators);
  g_test_add_func ("/validate/is-helpers", test_is_helpers);
  g_test_add_func ("/validate/messages-printable", test_messages_are_printable);
  return g_test_run ();
}
