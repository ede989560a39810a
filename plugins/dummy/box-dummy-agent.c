/* box-dummy-agent.c: the `dummy` hypervisor's agent processes; see
 * box-dummy-agent.h. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "box-dummy-agent.h"
#include "box-error.h"

#define BOX_DUMMY_AGENT_ARGS_MAX 64

struct _BoxDummyAgents {
  BoxPluginContext *context;
  char             *program;
  char             *args;        /* the default arguments */
  char            **programs;    /* what else a sandbox may run */
  GHashTable       *procs;       /* sandbox id -> Proc* */
};

typedef struct {
  char         *id;
  char         *args;            /* NULL: the default ones */
  GSubprocess  *proc;            /* NULL: none runs */
  GCancellable *wait;            /* the wait for @proc's end */
  BoxAgent     *agent;           /* its connection (boxd's BoxAgentClient) */
  gulong        closed_id;
} Proc;

static void
proc_end (Proc *p)
{
  if (p->agent != NULL) {
    g_signal_handler_disconnect (p->agent, p->closed_id);
    p->closed_id = 0;
    box_agent_close (p->agent);
    g_clear_object (&p->agent);
  }
  if (p->wait != NULL) {
    g_cancellable_cancel (p->wait);
    g_clear_object (&p->wait);
  }
  if (p->proc != NULL) {
    /* continued, or a stopped process would keep its SIGKILL pending */
    g_subprocess_send_signal (p->proc, SIGCONT);
    g_subprocess_force_exit (p->proc);
    g_clear_object (&p->proc);   /* GLib's child watch reaps it */
  }
}

static void
proc_free (Proc *p)
{
  proc_end (p);
  g_free (p->id);
  g_free (p->args);
  g_free (p);
}

gboolean
box_dummy_agents_check_args (const char *args, GError **error)
{
  g_auto(GStrv) words = NULL;
  g_autoptr(GError) local = NULL;

  if (args == NULL || args[0] == '\0')
    return TRUE;
  if (!g_shell_parse_argv (args, NULL, &words, &local)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "agent arguments \"%s\": %s", args,
                 local->message);
    return FALSE;
  }
  if (g_strv_length (words) > BOX_DUMMY_AGENT_ARGS_MAX) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "more than %d agent arguments",
                 BOX_DUMMY_AGENT_ARGS_MAX);
    return FALSE;
  }
  return TRUE;
}

BoxDummyAgents *
box_dummy_agents_new (BoxPluginContext *context, const char *program, const char *args,
                      const char *programs)
{
  BoxDummyAgents *self = g_new0 (BoxDummyAgents, 1);

  self->context = g_object_ref (context);
  self->program = g_strdup (program);
  self->args = g_strdup (args);
  self->programs = g_strsplit (programs != NULL ? programs : "", ";", -1);
  self->procs = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) proc_free);
  return self;
}

void
box_dummy_agents_free (BoxDummyAgents *self)
{
  if (self == NULL)
    return;
  g_hash_table_unref (self->procs);
  g_object_unref (self->context);
  g_free (self->program);
  g_free (self->args);
  g_strfreev (self->programs);
  g_free (self);
}

static Proc *
lookup (BoxDummyAgents *self, const char *sandbox_id, gboolean create)
{
  Proc *p = g_hash_table_lookup (self->procs, sandbox_id);

  if (p == NULL && create) {
    p = g_new0 (Proc, 1);
    p->id = g_strdup (sandbox_id);
    g_hash_table_insert (self->procs, p->id, p);
  }
  return p;
}

gboolean
box_dummy_agents_set_args (BoxDummyAgents *self, const char *sandbox_id, const char *args,
                           GError **error)
{
  g_auto(GStrv) words = NULL;
  Proc *p;

  if (!box_dummy_agents_check_args (args, error))
    return FALSE;
  if (args != NULL && args[0] != '\0' && g_shell_parse_argv (args, NULL, &words, NULL) &&
      g_path_is_absolute (words[0]) && !g_strv_contains ((const char * const *) self->programs, words[0])) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "%s is not one of [plugin.dummy] agent_programs", words[0]);
    return FALSE;
  }
  p = lookup (self, sandbox_id, TRUE);
  g_free (p->args);
  p->args = g_strdup (args);
  return TRUE;
}

static gboolean
unref_idle_cb (gpointer data)
{
  g_object_unref (data);
  return G_SOURCE_REMOVE;
}

/* boxd closed the connection (or it broke): the process goes too */
static void
agent_closed_cb (BoxAgent *agent, GError *error, gpointer user_data)
{
  Proc *p = user_data;

  g_message ("dummy: the agent of %s ended: connection closed%s%s", p->id,
             error != NULL ? ": " : "", error != NULL ? error->message : "");
  /* not unreffed in its own signal */
  g_signal_handler_disconnect (p->agent, p->closed_id);
  p->closed_id = 0;
  g_idle_add (unref_idle_cb, g_steal_pointer (&p->agent));
  proc_end (p);
}

/* the process ended on its own: its connection goes too */
static void
proc_exited_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  Proc *p = user_data;

  if (!g_subprocess_wait_finish (G_SUBPROCESS (source), result, &error) &&
      g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;   /* ended by us: @p may be gone */
  if (g_subprocess_get_if_signaled (G_SUBPROCESS (source)))
    g_message ("dummy: the agent of %s ended: killed by signal %d", p->id,
               g_subprocess_get_term_sig (G_SUBPROCESS (source)));
  else
    g_message ("dummy: the agent of %s ended: exit %d", p->id,
               g_subprocess_get_exit_status (G_SUBPROCESS (source)));
  proc_end (p);
}

static void
hello_done_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GError) error = NULL;

  if (!box_agent_connect_finish (BOX_AGENT (source), result, &error))
    g_message ("dummy: hello to an agent failed: %s", error->message);
}

static void
child_setup (gpointer user_data)
{
  /* an agent never outlives boxd (a VM does, but these are test doubles) */
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

static char **
make_argv (BoxDummyAgents *self, Proc *p, GError **error)
{
  const char *args = p->args != NULL ? p->args : self->args;
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  g_auto(GStrv) words = NULL;
  g_autofree char *fd = g_strdup_printf ("%d", BOX_DUMMY_AGENT_FD);
  guint i = 0;

  if (!box_dummy_agents_check_args (args, error))
    return NULL;
  if (args != NULL && args[0] != '\0')
    g_shell_parse_argv (args, NULL, &words, NULL);
  /* set_args() allowed an absolute path in front of a sandbox's own */
  if (words != NULL && p->args != NULL && g_path_is_absolute (words[0]))
    g_strv_builder_add (builder, words[i++]);
  else
    g_strv_builder_add (builder, self->program);
  if (words != NULL) {
    for (; words[i] != NULL; i++) {
      g_auto(GStrv) parts = g_strsplit (words[i], "{fd}", -1);
      g_autofree char *word = g_strjoinv (fd, parts);

      g_strv_builder_add (builder, word);
    }
  }
  return g_strv_builder_end (builder);
}

gboolean
box_dummy_agents_start (BoxDummyAgents *self, const char *sandbox_id, GError **error)
{
  Proc *p = lookup (self, sandbox_id, TRUE);
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GSocket) socket = NULL;
  g_autoptr(GSocketConnection) connection = NULL;
  g_autoptr(GError) local = NULL;
  g_auto(GStrv) argv = NULL;
  int fds[2];

  proc_end (p);
  argv = make_argv (self, p, error);
  if (argv == NULL)
    return FALSE;
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "socketpair: %s", g_strerror (errno));
    return FALSE;
  }
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_INHERIT);
  g_subprocess_launcher_take_fd (launcher, fds[1], BOX_DUMMY_AGENT_FD);
  g_subprocess_launcher_set_child_setup (launcher, child_setup, NULL, NULL);
  p->proc = g_subprocess_launcher_spawnv (launcher, (const char * const *) argv, &local);
  g_clear_object (&launcher);   /* closes our copy of the child's end */
  if (p->proc == NULL) {
    close (fds[0]);
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot start the agent of %s: %s",
                 sandbox_id, local->message);
    return FALSE;
  }
  p->wait = g_cancellable_new ();
  g_subprocess_wait_async (p->proc, p->wait, proc_exited_cb, p);

  socket = g_socket_new_from_fd (fds[0], &local);
  if (socket == NULL) {
    close (fds[0]);
    proc_end (p);
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "agent socket: %s", local->message);
    return FALSE;
  }
  connection = g_socket_connection_factory_create_connection (socket);
  p->agent = box_plugin_context_new_agent (self->context, G_IO_STREAM (connection), error);
  if (p->agent == NULL) {
    proc_end (p);
    return FALSE;
  }
  p->closed_id = g_signal_connect (p->agent, "closed", G_CALLBACK (agent_closed_cb), p);
  /* hello goes out now; calls may follow at once */
  box_agent_connect_async (p->agent, NULL, hello_done_cb, NULL);
  g_message ("dummy: the agent of %s started (pid %s)", sandbox_id,
             g_subprocess_get_identifier (p->proc));
  return TRUE;
}

void
box_dummy_agents_pause (BoxDummyAgents *self, const char *sandbox_id, gboolean paused)
{
  Proc *p = lookup (self, sandbox_id, FALSE);

  if (p != NULL && p->proc != NULL)
    g_subprocess_send_signal (p->proc, paused ? SIGSTOP : SIGCONT);
}

void
box_dummy_agents_stop (BoxDummyAgents *self, const char *sandbox_id, gboolean forget)
{
  Proc *p = lookup (self, sandbox_id, FALSE);

  if (p == NULL)
    return;
  if (p->proc != NULL)
    g_message ("dummy: the agent of %s ended: stopped with its VM", sandbox_id);
  if (forget)
    g_hash_table_remove (self->procs, sandbox_id);
  else
    proc_end (p);
}

BoxAgent *
box_dummy_agents_get (BoxDummyAgents *self, const char *sandbox_id, GError **error)
{
  Proc *p = lookup (self, sandbox_id, FALSE);

  if (p == NULL || p->agent == NULL || box_agent_is_closed (p->agent)) {
    if (!box_dummy_agents_start (self, sandbox_id, error))
      return NULL;
    p = lookup (self, sandbox_id, FALSE);
  }
  return g_object_ref (p->agent);
}
