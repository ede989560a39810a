/* engine-fixture.h: an in-process BoxEngine for unit tests.
 *
 * The engine runs on the `dummy` hypervisor (scripted through its action
 * signals, see plugins/dummy/box-dummy-script.h), SQLite and key auth in a
 * temporary data directory, with a manual BoxClock: time moves only when a
 * test advances it, so deadlines and the idle rule are tested in
 * milliseconds.  Every event and ::sandbox-interrupted is recorded.
 */
#pragma once

#include "agent-test-util.h"
#include "box-engine.h"
#include "box-storage-records.h"

G_BEGIN_DECLS

/* The clock starts at 2030-01-01T00:00:00Z. */
#define EF_T0 (G_GINT64_CONSTANT (1893456000) * G_USEC_PER_SEC)

typedef struct {
  const char    *project;        /* of ef_create() and friends; "p" */
  char          *data_dir;
  char          *dummy_script;   /* [plugin.dummy] script= for the next start, or NULL */
  char          *dummy_caps;     /* [plugin.dummy] capabilities=, or NULL */
  /* called by ef_start() on the new engine's configuration (network=none
   * before), or NULL */
  void         (*configure) (BoxConfig *config);
  gboolean       identity;       /* [boxd] identity for the next start (default FALSE) */
  BoxClock      *clock;
  BoxEngine     *engine;
  BoxHypervisor *hv;
  GPtrArray     *events;         /* char*: "<type> <sandbox id> <reason or from or ->" */
  GPtrArray     *event_times;    /* gint64* (event->at) parallel to events */
  GPtrArray     *interrupted;    /* char*: "<sandbox id> <why>" */
  GPtrArray     *fakes;          /* FakeAgent*: of ef_fake_agent() */
  GPtrArray     *clients;        /* BoxAgentClient*: their clients */
} Ef;

/* An asynchronous call waited for: ef_wait_cb with &wait as its callback,
 * then ef_wait_result(). */
typedef struct {
  gboolean      done;
  GAsyncResult *result;
} EfWait;

/* g_test_init(), with warnings not fatal: the engine warns about the
 * failures the tests inject. */
void        ef_init          (int *argc, char ***argv);
/* A started engine (ef_start()) with a project "p"; @user_data, when not
 * NULL, is the dummy's capabilities (ef->dummy_caps). */
void        ef_set_up        (Ef *ef, gconstpointer user_data);
void        ef_tear_down     (Ef *ef, gconstpointer user_data);
/* Starts an engine on ef->data_dir (also after ef_stop: a restart). */
/* The configuration ef_start() starts an engine with (@configure applied). */
BoxConfig  *ef_config        (Ef *ef);
void        ef_start         (Ef *ef);
/* Stops and drops the engine (boxd exits); the data directory stays. */
void        ef_stop          (Ef *ef);

/* Runs the main loop until nothing is pending. */
void        ef_settle        (Ef *ef);
/* Runs the main loop until *@done (real time, a few seconds at most). */
void        ef_wait          (Ef *ef, gboolean *done);
void          ef_wait_cb     (GObject *source, GAsyncResult *result, gpointer user_data);
/* Runs the main loop until @wait's call completed (ef_wait()); its result
 * (yours). */
GAsyncResult *ef_wait_result (Ef *ef, EfWait *wait);
/* Moves the clock @seconds forward, one second at a time, settling between. */
void        ef_advance       (Ef *ef, guint seconds);

/* Scripts the dummy hypervisor (action signal "script"); asserts the syntax. */
void        ef_script        (Ef *ef, const char *rules);
void        ef_caps          (Ef *ef, const char *caps, const char *accel);
gboolean    ef_lose_vm       (Ef *ef, const char *sandbox_id);
/* the VM and everything it left (dummy "lose-all") */
gboolean    ef_lose_all      (Ef *ef, const char *sandbox_id);

/* A project with the given name (asserts). */
void        ef_project       (Ef *ef, const char *name);
/* Creates a sandbox in ef->project from a JSON body; NULL and @error set on failure. */
BoxSandbox *ef_create        (Ef *ef, const char *json, GError **error);
BoxSandbox *ef_create_ok     (Ef *ef, const char *json);
BoxSandbox *ef_change        (Ef *ef, const char *id, BoxStateRequest request, GError **error);
BoxSandbox *ef_update        (Ef *ef, const char *id, const char *json, GError **error);
/* ef_change() that asserts it succeeded */
void        ef_change_ok     (Ef *ef, const char *id, BoxStateRequest request);
/* PUT /v1/secrets/@name in ef->project from a JSON body (asserted valid) */
gboolean    ef_put_secret    (Ef *ef, const char *name, const char *json, GError **error);
gboolean    ef_delete        (Ef *ef, const char *id, GError **error);
gboolean    ef_delete_project (Ef *ef, const char *name, GError **error);
BoxSandbox *ef_hold          (Ef *ef, const char *id, GError **error);
/* The sandbox's recorded state, or -1 when it does not exist. */
int         ef_state         (Ef *ef, const char *id);
BoxVmState  ef_vm_state      (Ef *ef, const char *id);
/* The recorded events so far, joined by ", ", and forgets them. */
char       *ef_take_events   (Ef *ef);
char       *ef_take_interrupted (Ef *ef);
/* Asserts what ef_take_events() / ef_take_interrupted() would answer. */
void        ef_assert_events (Ef *ef, const char *expected);
void        ef_assert_interrupted (Ef *ef, const char *expected);
/* Forgets the events and interruptions recorded so far. */
void        ef_forget        (Ef *ef);
/* Checkpoints of sandbox @id of ef->project, waited for. */
BoxCheckpoint *ef_checkpoint (Ef *ef, const char *id, gboolean memory, GError **error);
BoxSandbox    *ef_restore    (Ef *ef, const char *id, const char *checkpoint, GError **error);
gboolean       ef_delete_checkpoint (Ef *ef, const char *id, const char *checkpoint,
                                     GError **error);

/* Gives sandbox @sandbox_id a scripted fake agent (tests/agent-client),
 * connected: the dummy hypervisor hands out its client from now on (the
 * engine asks it with the guest-agent capability).  Both stay the
 * fixture's until the tear-down; *@client (may be NULL) is borrowed. */
FakeAgent  *ef_fake_agent    (Ef *ef, const char *sandbox_id, BoxAgentClient **client);

/* RFC 3339 of the clock's now + @seconds */
char       *ef_future        (Ef *ef, gint64 seconds);

G_END_DECLS
