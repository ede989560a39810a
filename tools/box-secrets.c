/* box-secrets.c: `box secrets` and `box secret put|get|delete`, the
 * project's brokered secrets (PUT/GET/DELETE /v1/secrets/{name}).
 *
 * A secret's value never comes from the command line (argv is visible to
 * every user of the machine and lands in shell histories): `put` reads it
 * from standard input when that is not a terminal -- all of it, one line
 * end (LF or CR LF) at its end dropped -- and otherwise prompts for it on
 * the terminal with the echo off (once: nothing shows what was typed, so a
 * second prompt would not help to see a typo, and a wrong value is
 * replaced by putting it again).  The value is checked here as the API
 * would (1 byte to 8 KiB, no CR, LF or NUL, UTF-8 as JSON needs), so that
 * a value the API would refuse is refused before it leaves, and it is
 * never printed: the API's answers carry the placeholder, never the value.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <glib/gi18n.h>

#include "box-cli.h"

/* The spec's limits of a secret (name, value). */
#define SECRET_NAME_MAX   64
#define SECRET_VALUE_MAX  8192
/* The longest line a terminal in canonical mode passes on whole (Linux's
 * N_TTY buffer is 4096 with the line end); a longer one arrives cut. */
#define TERMINAL_LINE_MAX 4095

static char *
secret_path (const char *name)
{
  g_autofree char *escaped = g_uri_escape_string (name, NULL, FALSE);

  return g_strconcat ("/v1/secrets/", escaped, NULL);
}

/* [A-Z_][A-Z0-9_]*, at most 64: the variable the placeholder appears in. */
static gboolean
check_name (const char *name, GError **error)
{
  gsize len = strlen (name);
  gboolean good = len > 0 && len <= SECRET_NAME_MAX;

  for (gsize i = 0; good && i < len; i++) {
    char c = name[i];

    good = (c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && g_ascii_isdigit (c));
  }
  if (!good) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                 _("“%s” is not a secret name: it is an environment variable name of capital "
                   "letters, digits and “_” (not first a digit), at most 64 characters."), name);
    return FALSE;
  }
  return TRUE;
}

/* "Header: format with {value}" -> header, format (the spaces after the
 * colon dropped).  The API checks the header further (not one that frames
 * or routes the request). */
static gboolean
parse_inject (const char *spec, char **header, char **format, GError **error)
{
  const char *colon = strchr (spec, ':');
  const char *rest;

  if (colon == NULL || colon == spec) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                 _("--inject takes “HEADER: FORMAT”, for example “Authorization: Bearer "
                   "{value}”, not “%s”."), spec);
    return FALSE;
  }
  for (const char *p = spec; p < colon; p++) {
    if (!g_ascii_isalnum (*p) && strchr ("!#$%&'*+-.^_`|~", *p) == NULL) {
      g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                   _("--inject “%s”: the part before the colon is not a header name."), spec);
      return FALSE;
    }
  }
  rest = colon + 1;
  while (*rest == ' ' || *rest == '\t')
    rest++;
  if (strstr (rest, "{value}") == NULL) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                 _("--inject “%s”: the format after the colon needs {value}, where the value "
                   "goes."), spec);
    return FALSE;
  }
  *header = g_strndup (spec, (gsize) (colon - spec));
  *format = g_strdup (rest);
  return TRUE;
}

/* ---- reading the value ------------------------------------------------- */

/* Reads from @fd until EOF, a LF (when @line) or more than the value may
 * hold plus a line end; FALSE with errno on a read error. */
static gboolean
read_value_bytes (int fd, gboolean line, GByteArray *out)
{
  guint8 buffer[1024];

  while (out->len <= SECRET_VALUE_MAX + 2) {
    gssize n = read (fd, buffer, line ? 1 : sizeof buffer);

    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return FALSE;
    if (n == 0)
      break;
    g_byte_array_append (out, buffer, (guint) n);
    if (line && buffer[0] == '\n')
      break;
  }
  return TRUE;
}

/* The terminal's settings while the echo is off, for a signal to restore. */
static struct termios saved_termios;
static volatile sig_atomic_t echo_is_off;

static void
restore_echo_and_raise (int signum)
{
  if (echo_is_off)
    tcsetattr (STDIN_FILENO, TCSAFLUSH, &saved_termios);
  signal (signum, SIG_DFL);
  raise (signum);
}

/* Prompts on the terminal with the echo off and reads one line. */
static gboolean
prompt_value (const char *name, GByteArray *out, GError **error)
{
  static const int signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
  struct sigaction action = { 0 };
  struct sigaction previous[G_N_ELEMENTS (signals)];
  struct termios quiet;
  gboolean read_ok;
  int saved_errno;

  if (tcgetattr (STDIN_FILENO, &saved_termios) != 0) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL,
                 _("Cannot read the terminal's settings: %s"), g_strerror (errno));
    return FALSE;
  }
  action.sa_handler = restore_echo_and_raise;
  sigemptyset (&action.sa_mask);
  for (guint i = 0; i < G_N_ELEMENTS (signals); i++)
    sigaction (signals[i], &action, &previous[i]);
  quiet = saved_termios;
  quiet.c_lflag &= ~(tcflag_t) (ECHO | ECHOE | ECHOK | ECHONL);
  quiet.c_lflag |= ICANON;
  echo_is_off = 1;
  if (tcsetattr (STDIN_FILENO, TCSAFLUSH, &quiet) != 0) {
    saved_errno = errno;
    echo_is_off = 0;
    for (guint i = 0; i < G_N_ELEMENTS (signals); i++)
      sigaction (signals[i], &previous[i], NULL);
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL,
                 _("Cannot turn the terminal's echo off: %s"), g_strerror (saved_errno));
    return FALSE;
  }
  /* after the flush of what was typed ahead, so that nothing typed after
   * the prompt is lost */
  g_printerr (_("Value of %s (not shown, ends with Enter): "), name);
  read_ok = read_value_bytes (STDIN_FILENO, TRUE, out);
  saved_errno = errno;
  tcsetattr (STDIN_FILENO, TCSAFLUSH, &saved_termios);
  echo_is_off = 0;
  for (guint i = 0; i < G_N_ELEMENTS (signals); i++)
    sigaction (signals[i], &previous[i], NULL);
  g_printerr ("\n");
  if (!read_ok) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL, _("Cannot read the terminal: %s"),
                 g_strerror (saved_errno));
    return FALSE;
  }
  return TRUE;
}

/* The value, from standard input or the prompt, checked as the API checks
 * it; NULL with @error set (a usage error for a value of the wrong form). */
static char *
read_value (const char *name, GError **error)
{
  g_autoptr(GByteArray) bytes = g_byte_array_new ();
  gboolean terminal = isatty (STDIN_FILENO);
  gsize len;

  if (terminal) {
    if (!prompt_value (name, bytes, error))
      return NULL;
  } else if (!read_value_bytes (STDIN_FILENO, FALSE, bytes)) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_LOCAL,
                 _("Cannot read standard input: %s"), g_strerror (errno));
    return NULL;
  }
  len = bytes->len;
  if (len > 0 && bytes->data[len - 1] == '\n')
    len--;
  if (terminal && len >= TERMINAL_LINE_MAX) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                 _("A terminal line holds at most %d bytes, so this value may have been cut; "
                   "give it on standard input instead; nothing was changed."),
                 TERMINAL_LINE_MAX - 1);
    return NULL;
  }
  if (len > 0 && bytes->data[len - 1] == '\r' && len < bytes->len)
    len--;
  if (len == 0) {
    g_set_error_literal (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                         terminal ? _("No value was typed; nothing was changed.")
                                  : _("Standard input holds no value; nothing was changed."));
    return NULL;
  }
  if (len > SECRET_VALUE_MAX) {
    g_set_error (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                 _("The value is longer than %d bytes; nothing was changed."), SECRET_VALUE_MAX);
    return NULL;
  }
  if (memchr (bytes->data, '\r', len) != NULL || memchr (bytes->data, '\n', len) != NULL ||
      memchr (bytes->data, '\0', len) != NULL) {
    g_set_error_literal (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                         _("The value holds a CR, LF or NUL byte, which a secret's value cannot "
                           "(only one line end at its very end is dropped); nothing was "
                           "changed."));
    return NULL;
  }
  if (!g_utf8_validate_len ((const char *) bytes->data, len, NULL)) {
    g_set_error_literal (error, BOX_CLI_ERROR, BOX_CLI_ERROR_USAGE,
                         _("The value is not UTF-8 text; nothing was changed."));
    return NULL;
  }
  return g_strndup ((const char *) bytes->data, len);
}

/* ---- output ------------------------------------------------------------ */

/* "Header: format", or NULL for inject null. */
static char *
inject_text (JsonObject *secret)
{
  JsonObject *inject = box_cli_json_object (secret, "inject");

  if (inject == NULL)
    return NULL;
  return g_strdup_printf ("%s: %s", box_cli_json_string (inject, "header") ?: "",
                          box_cli_json_string (inject, "format") ?: "");
}

static int
print_secret (BoxCli *cli, JsonNode *answer)
{
  JsonObject *secret = JSON_NODE_HOLDS_OBJECT (answer) ? json_node_get_object (answer) : NULL;
  g_autofree char *hosts = NULL;
  g_autofree char *inject = NULL;

  if (secret == NULL) {
    g_autoptr(GError) error = g_error_new (BOX_CLI_ERROR, BOX_CLI_ERROR_PROTOCOL,
                                           _("The API's answer is not %s"), _("a secret"));
    return box_cli_fail (cli, error);
  }
  if (cli->json) {
    box_cli_print_json (answer);
    return BOX_CLI_EXIT_OK;
  }
  hosts = box_cli_json_strings (secret, "hosts", ", ");
  inject = inject_text (secret);
  {
    const BoxCliField fields[] = {
      { _("Name"), box_cli_json_string (secret, "name") ?: "" },
      { _("Hosts"), hosts },
      { _("Placeholder"), box_cli_json_string (secret, "placeholder") ?: "" },
      { _("Inject"), inject != NULL ? inject
                                    : _("none (the placeholder is replaced in the request head)") },
      { _("Created"), box_cli_json_string (secret, "created_at") ?: "" },
      { _("Updated"), box_cli_json_string (secret, "updated_at") ?: "" },
    };

    box_cli_print_fields (fields, G_N_ELEMENTS (fields));
  }
  return BOX_CLI_EXIT_OK;
}

/* ---- commands ---------------------------------------------------------- */

int
box_cmd_secrets (BoxCli *cli, int argc, char **argv)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the answer as JSON"), NULL },
    { NULL }
  };
  const char *const header[] = { _("NAME"), _("HOSTS"), _("PLACEHOLDER"), _("INJECT"),
                                 _("UPDATED"), NULL };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(BoxTable) table = NULL;
  JsonArray *array;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, "",
                      _("List the project's secrets (never their values)."), 0, 0, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  array = box_cli_get_list (cli, "/v1/secrets", NULL, "secrets",
                            _("The API's answer has no secrets"), &answer, &status);
  if (array == NULL)
    return status;
  table = box_table_new (header);
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonObject *secret = json_array_get_object_element (array, i);
    g_autofree char *hosts = box_cli_json_strings (secret, "hosts", ",");
    g_autofree char *inject = inject_text (secret);
    g_autofree char *age = box_cli_format_age (box_cli_json_string (secret, "updated_at"));

    box_table_add (table, box_cli_json_string (secret, "name") ?: "", hosts,
                   box_cli_json_string (secret, "placeholder") ?: "",
                   inject != NULL ? inject : "-", age, NULL);
  }
  box_table_print (table);
  return BOX_CLI_EXIT_OK;
}

static int
secret_put (BoxCli *cli, int argc, char **argv)
{
  g_auto(GStrv) hosts = NULL;
  g_autofree char *inject = NULL;
  g_autofree char *prefix = NULL;
  const GOptionEntry entries[] = {
    { "host", 0, 0, G_OPTION_ARG_STRING_ARRAY, &hosts,
      N_("Where the value may go over HTTPS: HOST, *.SUFFIX, either with a path prefix "
         "(HOST/PATH), or an IP address (repeatable, at least one)"), N_("HOST") },
    { "inject", 0, 0, G_OPTION_ARG_STRING, &inject,
      N_("Set this header on every request to the hosts instead of replacing the placeholder, "
         "for example “Authorization: Bearer {value}”"), N_("HEADER: FORMAT") },
    { "prefix", 0, 0, G_OPTION_ARG_STRING, &prefix,
      N_("Put this before the placeholder (printable ASCII, no spaces, at most 64)"),
      N_("PREFIX") },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the secret as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) body = NULL;
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *header = NULL;
  g_autofree char *format = NULL;
  g_autofree char *value = NULL;
  g_autofree char *path = NULL;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("put NAME --host HOST… [OPTION…]"),
                      _("Create or replace a secret. The value is read from standard input (one "
                        "line end at its end dropped) or, on a terminal, asked for once without "
                        "showing it; never from the command line. A typed value is at most 4094 "
                        "bytes (a terminal's line): give longer ones on standard input."), 2, 2, &status))
    return status;
  if (!check_name (argv[2], &error))
    return box_cli_usage_error (cli, "secret", error->message);
  if (hosts == NULL)
    return box_cli_usage_error (cli, "secret",
                                _("Name at least one host the value may go to with --host."));
  if (inject != NULL && !parse_inject (inject, &header, &format, &error))
    return box_cli_usage_error (cli, "secret", error->message);
  if (!box_cli_ready (cli, &status))
    return status;
  value = read_value (argv[2], &error);
  if (value == NULL)
    return error->code == BOX_CLI_ERROR_USAGE ? box_cli_usage_error (cli, "secret", error->message)
                                              : box_cli_fail (cli, error);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "value");
  json_builder_add_string_value (builder, value);
  box_cli_add_strv (builder, "hosts", hosts);
  if (header != NULL) {
    json_builder_set_member_name (builder, "inject");
    json_builder_begin_object (builder);
    json_builder_set_member_name (builder, "header");
    json_builder_add_string_value (builder, header);
    json_builder_set_member_name (builder, "format");
    json_builder_add_string_value (builder, format);
    json_builder_end_object (builder);
  }
  if (prefix != NULL) {
    json_builder_set_member_name (builder, "placeholder_prefix");
    json_builder_add_string_value (builder, prefix);
  }
  json_builder_end_object (builder);
  body = json_builder_get_root (builder);
  path = secret_path (argv[2]);
  answer = box_cli_call (cli, "PUT", path, NULL, body, &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  return print_secret (cli, answer);
}

static int
secret_get (BoxCli *cli, int argc, char **argv)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, N_("Print the secret as JSON"), NULL },
    { NULL }
  };
  g_autoptr(JsonNode) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("get NAME"),
                      _("Show a secret: its hosts, placeholder and inject (never its value)."),
                      2, 2, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  path = secret_path (argv[2]);
  answer = box_cli_call (cli, "GET", path, NULL, NULL, &error);
  if (answer == NULL)
    return box_cli_fail (cli, error);
  return print_secret (cli, answer);
}

static int
secret_delete (BoxCli *cli, int argc, char **argv)
{
  const GOptionEntry entries[] = { { NULL } };
  int status;

  if (!box_cli_parse (cli, &argc, &argv, entries, _("delete NAME…"),
                      _("Delete secrets. A secret a sandbox uses cannot be deleted (conflict)."),
                      2, G_MAXUINT, &status) ||
      !box_cli_ready (cli, &status))
    return status;
  return box_cli_delete_each (cli, "/v1/secrets", argv + 2, argc - 2,
                              _("A secret cannot be deleted while a sandbox uses it: delete "
                                "that sandbox first, or take the secret out of its secrets."));
}

int
box_cmd_secret (BoxCli *cli, int argc, char **argv)
{
  const char *action = argc > 1 ? argv[1] : "";
  const GOptionEntry entries[] = { { NULL } };
  int status;

  if (g_str_equal (action, "put"))
    return secret_put (cli, argc, argv);
  if (g_str_equal (action, "get"))
    return secret_get (cli, argc, argv);
  if (g_str_equal (action, "delete"))
    return secret_delete (cli, argc, argv);
  if (g_str_has_prefix (action, "-") &&
      !box_cli_parse (cli, &argc, &argv, entries, _("put|get|delete NAME [OPTION…]"),
                      _("Create or replace (put), show (get) or delete a project secret; "
                        "“box secret put --help” for the options of put."), 1, 1, &status))
    return status;
  return box_cli_usage_error (cli, "secret", _("The first argument is put, get or delete."));
}
