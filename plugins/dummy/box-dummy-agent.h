/* box-dummy-agent.h: the `dummy` hypervisor's agent processes, a test
 * facility (internal to the plugin).
 *
 * With `[plugin.dummy] agent = PATH`, every running sandbox gets a real
 * agent process on the host in place of a VM's guest agent: PATH is spawned
 * with one end of a socketpair as fd 3 and its arguments from `agent_args`
 * (default "--fd {fd}", box-agent's flag; "{fd}" is replaced by 3), or,
 * per sandbox, from the variable BOX_DUMMY_AGENT_ARGS of the sandbox's
 * env at create.  When that variable's first word is an absolute path, it
 * is the program instead of PATH, and must be one of the ';'-separated
 * paths of `agent_programs` (e.g. "/.../hostile-agent {fd} flood" for
 * tests/hostile/hostile-agent); otherwise the sandbox does not start.  boxd
 * gets the other end through box_plugin_context_new_agent(), so its
 * BoxAgentClient, channels and budgets are those of a libvirt VM's agent.
 *
 * Lifecycle, as a VM's: create, boot and restore start a new process (a
 * restore's is a fresh one); suspend stops it (SIGSTOP) and resume
 * continues it; shutdown, destroy and a lost VM kill it (SIGKILL).  When
 * the process ends, its connection is closed (calls in flight fail); when
 * boxd closes the connection (e.g. over its budget), the process is
 * killed.  Either way, the next get_agent() of a running sandbox starts a
 * new one, as the libvirt plugin reconnects to a VM's agent.  Each end is
 * logged with its reason ("dummy: the agent of ID ended: ...").
 */
#pragma once

#include "box-agent.h"
#include "box-plugin-context.h"

G_BEGIN_DECLS

#define BOX_DUMMY_AGENT_ARGS_VAR     "BOX_DUMMY_AGENT_ARGS"
#define BOX_DUMMY_AGENT_ARGS_DEFAULT "--fd {fd}"
#define BOX_DUMMY_AGENT_FD           3

typedef struct _BoxDummyAgents BoxDummyAgents;

/* @program: the agent's path; @args: its default arguments (shell words);
 * @programs: the other programs a sandbox may name (';'-separated paths) */
BoxDummyAgents *box_dummy_agents_new   (BoxPluginContext *context, const char *program,
                                        const char *args, const char *programs);
/* Kills every process. */
void            box_dummy_agents_free  (BoxDummyAgents *self);
/* Whether @args parse as shell words with at most 64 of them. */
gboolean        box_dummy_agents_check_args (const char *args, GError **error);
/* @sandbox_id's arguments from now on (NULL: the default ones); FALSE
 * (BOX_ERROR_INVALID) when they do not parse or name a program not allowed. */
gboolean        box_dummy_agents_set_args (BoxDummyAgents *self, const char *sandbox_id,
                                           const char *args, GError **error);
/* Kills @sandbox_id's process, if any, and starts a new one. */
gboolean        box_dummy_agents_start (BoxDummyAgents *self, const char *sandbox_id,
                                        GError **error);
/* SIGSTOP (@paused) or SIGCONT @sandbox_id's process, if any. */
void            box_dummy_agents_pause (BoxDummyAgents *self, const char *sandbox_id,
                                        gboolean paused);
/* Kills @sandbox_id's process, if any; @forget: its arguments too. */
void            box_dummy_agents_stop  (BoxDummyAgents *self, const char *sandbox_id,
                                        gboolean forget);
/* @sandbox_id's connected agent (a new reference); a new process when the
 * last one ended or none runs.  NULL with @error when it cannot start. */
BoxAgent       *box_dummy_agents_get   (BoxDummyAgents *self, const char *sandbox_id,
                                        GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxDummyAgents, box_dummy_agents_free)

G_END_DECLS
