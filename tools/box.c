/* box: the command-line client of the box API for project users.
 *
 *   box COMMAND [OPTION…] [ARGUMENT…]
 *
 * main() finds the command in the table below and hands it its arguments;
 * each command parses its own options (box_cli_parse(), so that every
 * command has its own --help), then talks to the API.  The operator's tool
 * is boxctl (D-Bus); box speaks HTTP with a project key.  Exit statuses:
 * box-cli.h and doc/box.1.
 */
#include "config.h"

#include <locale.h>
#include <signal.h>
#include <string.h>
#include <glib/gi18n.h>

#include "box-cli.h"

typedef struct {
  const char *name;
  const char *args;          /* N_() */
  const char *description;   /* N_() */
  BoxCliFunc  func;
} BoxCliCommand;

static const BoxCliCommand commands[] = {
  { "create", N_("[--name NAME] [OPTION…]"), N_("Create a sandbox and wait until it runs"),
    box_cmd_create },
  { "list", N_("[--label K=V]… [--state STATE]"), N_("List the sandboxes"), box_cmd_list },
  { "get", N_("SANDBOX"), N_("Show a sandbox"), box_cmd_get },
  { "delete", N_("SANDBOX…"), N_("Delete sandboxes"), box_cmd_delete },
  { "pause", N_("SANDBOX…"), N_("Pause sandboxes (memory and disk kept)"), box_cmd_pause },
  { "stop", N_("SANDBOX…"), N_("Stop sandboxes (disk kept)"), box_cmd_stop },
  { "wake", N_("SANDBOX…"), N_("Wake sandboxes"), box_cmd_wake },
  { "exec", N_("[-i] [-t] SANDBOX [--] COMMAND [ARG…]"), N_("Run a command in a sandbox"),
    box_cmd_exec },
  { "attach", N_("SANDBOX SESSION"), N_("Attach to an exec session"), box_cmd_attach },
  { "sessions", N_("SANDBOX"), N_("List a sandbox's exec sessions"), box_cmd_sessions },
  { "signal", N_("SANDBOX SESSION SIGNAL"), N_("Send a signal to an exec session"),
    box_cmd_signal },
  { "cp", N_("SOURCE DESTINATION"), N_("Copy files and directories in or out (SANDBOX:PATH)"),
    box_cmd_cp },
  { "ports", N_("SANDBOX [--access]"), N_("List the TCP ports listening in a sandbox"), box_cmd_ports },
  { "port-forward", N_("SANDBOX [LOCAL:]REMOTE…"),
    N_("Forward local TCP ports to ports of a sandbox"), box_cmd_port_forward },
  { "url", N_("SANDBOX [PORT] [--all] [--token]"), N_("Print the URL of a sandbox or of its port"),
    box_cmd_url },
  { "open", N_("SANDBOX [PORT]"), N_("Open the URL of a sandbox or of its port in the browser"),
    box_cmd_open },
  { "port-access", N_("SANDBOX PORT private|public"), N_("Make a port's URL private or public"),
    box_cmd_port_access },
  { "events", N_("[--sandbox SANDBOX]"), N_("Follow the project's events"), box_cmd_events },
  { "checkpoint", N_("SANDBOX [--comment TEXT] [--disk-only]"), N_("Take a checkpoint"),
    box_cmd_checkpoint },
  { "checkpoints", N_("SANDBOX"), N_("List a sandbox's checkpoints"), box_cmd_checkpoints },
  { "restore", N_("SANDBOX CHECKPOINT"), N_("Restore a checkpoint"), box_cmd_restore },
  { "fork", N_("SANDBOX[:CHECKPOINT] [--name NAME]"),
    N_("Create a sandbox from a checkpoint (default: the newest)"), box_cmd_fork },
  { "checkpoint-delete", N_("SANDBOX CHECKPOINT…"), N_("Delete checkpoints"),
    box_cmd_checkpoint_delete },
  { "tasks", N_("SANDBOX"), N_("List a sandbox's live tasks"), box_cmd_tasks },
  { "task-put", N_("SANDBOX NAME [--expire SECONDS]"),
    N_("Declare a task that keeps a sandbox awake"), box_cmd_task_put },
  { "task-delete", N_("SANDBOX NAME…"), N_("Delete tasks"), box_cmd_task_delete },
  { "services", N_("SANDBOX"), N_("List a sandbox's services"), box_cmd_services },
  { "service", N_("put SANDBOX NAME [OPTION…] -- COMMAND…"),
    N_("Define and start a service (also start, stop, restart, delete SANDBOX NAME)"),
    box_cmd_service },
  { "logs", N_("SANDBOX SERVICE [-f] [--tail N]"), N_("Print a service's output"), box_cmd_logs },
  { "egress", N_("SANDBOX [--allow|--deny|--clear …]"),
    N_("Show or edit a sandbox's egress rules"), box_cmd_egress },
  { "secrets", N_("[--json]"), N_("List the project's secrets"), box_cmd_secrets },
  { "secret", N_("put|get|delete NAME [OPTION…]"),
    N_("Create or replace a secret (value from stdin or a prompt), show or delete it"),
    box_cmd_secret },
  { "stats", N_("SANDBOX [--days N]"), N_("Show the usage stats of a sandbox's URLs"),
    box_cmd_stats },
};

static char *
commands_summary (void)
{
  g_autoptr(GString) summary = g_string_new (_("Commands:"));
  g_auto(GStrv) synopses = g_new0 (char *, G_N_ELEMENTS (commands) + 1);
  glong width = 0;

  for (guint i = 0; i < G_N_ELEMENTS (commands); i++) {
    synopses[i] = g_strdup_printf ("%s %s", commands[i].name, _(commands[i].args));
    width = MAX (width, g_utf8_strlen (synopses[i], -1));
  }
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++) {
    g_string_append_printf (summary, "\n  %s", synopses[i]);
    for (glong pad = g_utf8_strlen (synopses[i], -1); pad < width + 2; pad++)
      g_string_append_c (summary, ' ');
    g_string_append (summary, _(commands[i].description));
  }
  g_string_append_printf (summary, "\n\n%s",
                          _("Run “box COMMAND --help” for the options of a command."));
  return g_string_free (g_steal_pointer (&summary), FALSE);
}

static const char *
environment_help (void)
{
  return _("Configuration: BOX_URL (the API's address, default http://127.0.0.1:7070) and "
           "BOX_KEY (a project API key), or url= and key= in the [box] group of "
           "$XDG_CONFIG_HOME/box/config; the environment wins.\n"
           "Exit status: 0 success, 1 the API answered with an error, 2 bad usage, "
           "3 the API cannot be reached or refused the key; exec and attach exit with the "
           "command's status (see box(1)).");
}

int
box_cli_usage_error (BoxCli *cli, const char *command, const char *message)
{
  g_printerr ("box: %s\n", message);
  if (command != NULL)
    g_printerr (_("Run “box %s --help” for its usage."), command);
  else
    g_printerr ("%s", _("Run “box --help” to see the commands."));
  g_printerr ("\n");
  return cli->exec ? BOX_CLI_EXIT_BOX_FAILED : BOX_CLI_EXIT_USAGE;
}

gboolean
box_cli_parse (BoxCli *cli, int *argc, char ***argv, const GOptionEntry *entries,
               const char *params, const char *summary, guint min_args, guint max_args,
               int *status)
{
  return box_cli_parse_full (cli, argc, argv, entries, params, summary, min_args, max_args, FALSE,
                             status);
}

gboolean
box_cli_parse_full (BoxCli *cli, int *argc, char ***argv, const GOptionEntry *entries,
                    const char *params, const char *summary, guint min_args, guint max_args,
                    gboolean strict_posix, int *status)
{
  g_autoptr(GOptionContext) context = g_option_context_new (params);
  g_autoptr(GError) error = NULL;
  const char *name = (*argv)[0];
  guint n_args;

  g_option_context_set_strict_posix (context, strict_posix);
  g_option_context_set_summary (context, summary);
  g_option_context_set_description (context, environment_help ());
  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  if (!g_option_context_parse (context, argc, argv, &error)) {
    *status = box_cli_usage_error (cli, name, error->message);
    return FALSE;
  }
  n_args = (guint) *argc - 1;
  if (n_args < min_args || n_args > max_args) {
    g_autofree char *message = n_args < min_args
      ? g_strdup_printf (_("Missing arguments: %s"), params)
      : g_strdup_printf (_("Unexpected argument “%s”."), (*argv)[1 + max_args]);

    *status = box_cli_usage_error (cli, name, message);
    return FALSE;
  }
  return TRUE;
}

gboolean
box_cli_ready (BoxCli *cli, int *status)
{
  g_autoptr(GError) error = NULL;

  if (!box_cli_configure (cli, &error)) {
    *status = box_cli_fail (cli, error);
    return FALSE;
  }
  return TRUE;
}

int
main (int argc, char **argv)
{
  g_auto(BoxCli) cli = { 0 };
  g_autofree char *prgname = NULL;
  const BoxCliCommand *command = NULL;
  const char *name;

  /* a closed pipe is an error of the write, not a death with the terminal raw */
  signal (SIGPIPE, SIG_IGN);
  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);

  name = argc > 1 ? argv[1] : NULL;
  if (g_strcmp0 (name, "help") == 0 && argc > 2)
    name = argv[2];
  if (name == NULL || g_strcmp0 (name, "--help") == 0 || g_strcmp0 (name, "-h") == 0 ||
      g_strcmp0 (name, "help") == 0) {
    g_autofree char *summary = commands_summary ();

    g_autofree char *text = g_strdup_printf ("%s\n  box %s\n\n%s\n\n%s\n", _("Usage:"),
                                             _("COMMAND [OPTION…] [ARGUMENT…]"), summary,
                                             environment_help ());

    /* asked for: stdout, exit 0; no command at all: a usage error */
    if (name == NULL) {
      g_printerr ("%s", text);
      return BOX_CLI_EXIT_USAGE;
    }
    g_print ("%s", text);
    return BOX_CLI_EXIT_OK;
  }
  if (g_strcmp0 (name, "--version") == 0) {
    g_print ("box %s\n", PACKAGE_VERSION);
    return BOX_CLI_EXIT_OK;
  }
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++) {
    if (g_strcmp0 (name, commands[i].name) == 0)
      command = &commands[i];
  }
  if (command == NULL) {
    g_autofree char *message = g_strdup_printf (_("Unknown command “%s”."), name);

    return box_cli_usage_error (&cli, NULL, message);
  }

  prgname = g_strdup_printf ("box %s", command->name);
  g_set_prgname (prgname);
  if (g_strcmp0 (argv[1], "help") == 0) {
    char *help_argv[] = { argv[2], (char *) "--help", NULL };

    return command->func (&cli, 2, help_argv);
  }
  return command->func (&cli, argc - 1, argv + 1);
}
