/* agent-test-util.h: waiting on the main loop, and a scripted fake agent. */
#pragma once

#include <gio/gio.h>

#include "box-agent-client.h"
#include "box-agent-frame.h"

G_BEGIN_DECLS

/* Every wait gives up (and fails the test) after this long. */
#define AGENT_TEST_TIMEOUT_S 60

void           agent_test_init          (void);
/* GAsyncReadyCallback storing a reference to the result in *(GAsyncResult **) data */
void           agent_test_store_result  (GObject      *source,
                                         GAsyncResult *result,
                                         gpointer      data);
/* Iterate the main context until *slot is set; returns it (still *slot's). */
GAsyncResult  *agent_test_wait_result   (GAsyncResult **slot);
/* Iterate until *flag; FALSE after @timeout_ms. */
gboolean       agent_test_wait_flag     (gboolean *flag,
                                         guint     timeout_ms);
/* Iterate until @cond holds; fails the test after AGENT_TEST_TIMEOUT_S. */
#define AGENT_TEST_WAIT_FOR(cond) \
  G_STMT_START { \
    gint64 wait_deadline_ = g_get_monotonic_time () + AGENT_TEST_TIMEOUT_S * G_USEC_PER_SEC; \
    while (!(cond)) { \
      g_assert_cmpint (g_get_monotonic_time (), <, wait_deadline_); \
      g_main_context_iteration (NULL, TRUE); \
    } \
  } G_STMT_END

/* Iterate for about @ms. */
void           agent_test_spin          (guint ms);

/* A fake agent on the other end of a socketpair: the test scripts it. */
typedef struct {
  int fd;
  BoxAgentDecoder *decoder;
} FakeAgent;

/* *client_stream: the client's side, to give to box_agent_client_new() */
FakeAgent     *fake_agent_new           (GIOStream **client_stream);
void           fake_agent_free          (FakeAgent *fake);
void           fake_agent_write         (FakeAgent  *fake,
                                         const void *data,
                                         gsize       len);
void           fake_agent_send          (FakeAgent         *fake,
                                         BoxAgentFrameType  type,
                                         guint8             stream,
                                         guint32            channel,
                                         const void        *payload,
                                         gsize              len);
void           fake_agent_send_json     (FakeAgent  *fake,
                                         guint32     channel,
                                         const char *json);
/* Feeds what the client wrote to the decoder; when nothing was there,
 * iterates the main context once instead and returns FALSE. */
gboolean       fake_agent_poll          (FakeAgent *fake);
/* The next frame from the client (iterating the main context meanwhile). */
void           fake_agent_read          (FakeAgent           *fake,
                                         BoxAgentFrameHeader *header,
                                         GBytes             **payload);
/* The next CTRL frame on channel 0, parsed (other frames are skipped). */
JsonObject    *fake_agent_read_request  (FakeAgent *fake);
/* Answer a hello (from fake_agent_read_request()) as the agent would. */
void           fake_agent_reply_hello   (FakeAgent  *fake,
                                         JsonObject *hello);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (FakeAgent, fake_agent_free)

/* The real agent, `$BOX_AGENT --connect SOCKET`, as a test fixture. */
typedef struct {
  char *dir;
  char *api_path;               /* with --api-socket (setup data non-NULL) */
  GSocketListener *listener;
  GSubprocess *agent;
  GSocketConnection *conn;
  BoxAgentClient *client;
  guint n_closed;
  GError *closed_error;
} Agent;

/* Starts the agent and accepts its connection (skips the test without
 * BOX_AGENT: f->conn stays NULL).  With @data non-NULL, the agent also
 * serves the in-sandbox API socket at f->api_path. */
void           agent_setup              (Agent         *f,
                                         gconstpointer  data);
void           agent_teardown           (Agent         *f,
                                         gconstpointer  data);
/* A client on f->conn, connected; FALSE when the test was skipped. */
gboolean       agent_connect            (Agent *f);
/* FALSE (and the test skipped) unless root: the agent runs commands as
 * root, and only root may switch users. */
gboolean       agent_need_root          (void);
JsonObject    *agent_call               (Agent       *f,
                                         const char  *op,
                                         JsonObject  *args,
                                         GError     **error);
void           agent_signal             (Agent *f,
                                         int    sig);

G_END_DECLS
