/* box-agent-private.h: between the parts of BoxAgentClient (box-agent-client.c:
 * the stream, dispatch and closing; box-agent-requests.c: hello and requests)
 * and BoxAgentChannel.  Not installed. */
#pragma once

#include "box-agent-client.h"
#include "box-agent-files.h"
#include "box-agent-frame.h"
#include "box-exec-session.h"

G_BEGIN_DECLS

#define BOX_AGENT_GONE_MESSAGE "the sandbox's agent went away"

/* A request waiting for its reply. */
typedef struct {
  BoxAgentClient *self;         /* not a reference: the table is the client's */
  gint64 id;
  GTask *task;                  /* NULL once completed early (cancelled) */
  GSource *cancel_source;
  BoxAgentChannel *channel;     /* an open: the channel it opens (a reference) */
  GSource *timeout_source;      /* the host's limit on the wait for the reply */
  gboolean large;               /* its reply may be up to a frame (a listing) */
} Call;

/* Everything the host holds on behalf of one agent connection (frames held
 * for channels not yet taken, data handed to consumers and not consumed)
 * stays under this; over it the connection is closed (the agent may
 * connect again). */
#define BOX_AGENT_CONNECTION_BUDGET (64u << 20)
/* A request the agent has not answered after this long fails with
 * BOX_ERROR_SANDBOX_UNAVAILABLE (the longest legitimate wait is presuspend's
 * 60 s). */
#define BOX_AGENT_CALL_TIMEOUT_MS (120 * 1000)

struct _BoxAgentClient {
  GObject parent_instance;

  GIOStream *stream;
  GMainContext *context;
  GCancellable *io_cancellable;
  BoxAgentDecoder *decoder;
  gboolean started;             /* reader running, hello sent */
  gboolean synced;              /* our hello's reply arrived */
  gboolean closed;
  gboolean reading;
  gboolean stream_closed;
  GSource *dispatch_source;     /* what was read waits for the next turn's budget */
  gsize turn_max_cost;          /* the most one turn handled (tests read it) */
  guint paced_turns;            /* turns followed by a pause for their cost (tests read it) */

  gint64 hello_id;
  char *nonce;
  GTask *connect_task;
  GSource *connect_cancel;
  GSource *hello_timer;         /* sends hello again until the reply comes */
  guint hello_retry_ms;
  GQueue held_requests;         /* GBytes: requests made before the reply */
  JsonObject *info;
  guint32 window;

  GQueue urgent;                /* GBytes frames: credits and requests */
  GQueue normal;                /* GBytes frames: everything else, in order */
  gsize queued_bytes;
  guint64 normal_queued;        /* bytes of normal frames queued, ever */
  guint64 normal_written;       /* of those, written to the stream */
  GQueue flush_waiters;         /* FlushWaiter, by mark: channels waiting for normal_written */
  gboolean writing;

  gint64 next_id;
  guint32 next_chan;
  GHashTable *calls;            /* &Call.id -> Call */
  GHashTable *channels;         /* GUINT_TO_POINTER (id) -> BoxAgentChannel */
  guint n_agent_channels;       /* of those, opened by the agent */
  guint n_large_calls;          /* calls pending whose reply may exceed BOX_AGENT_CTRL_MAX */

  gsize charged;                /* held on the agent's behalf, against budget */
  gsize budget;                 /* BOX_AGENT_CONNECTION_BUDGET (tests lower it) */
  guint call_timeout_ms;        /* BOX_AGENT_CALL_TIMEOUT_MS (tests lower it) */

  gint64 note_window;           /* log lines caused by the guest: rate limit */
  guint note_count;
  guint note_suppressed;
};


/* box-agent-client.c */
/* A log line caused by what the agent sent (at debug level), at most 20
 * per 10 s per connection; guest text in it must have gone through
 * box_agent_text_for_log(). */
void             box_agent_client_note            (BoxAgentClient *self,
                                                   const char     *format,
                                                   ...) G_GNUC_PRINTF (2, 3);
/* The host holds @delta more (or fewer) bytes for the agent; the budget is
 * checked by the reader after each frame. */
void             box_agent_client_charge          (BoxAgentClient *self,
                                                   gssize          delta);
/* Start the reader (once). */
void             box_agent_client_start_read      (BoxAgentClient *self);
void             box_agent_client_send_frame_take (BoxAgentClient *self,
                                                   GBytes         *frame,
                                                   gboolean        urgent);
/* The connection is over: fail everything, emit ::closed. */
void             box_agent_client_lost            (BoxAgentClient *self,
                                                   const char     *why);
GError          *box_agent_gone_error             (void);
void             box_agent_call_free              (Call *call);
void             box_agent_destroy_source         (GSource **source);

/* box-agent-requests.c */
void             box_agent_client_send_hello      (BoxAgentClient *self,
                                                   gboolean        flush);
void             box_agent_client_stop_hello      (BoxAgentClient *self);
/* A reply while not synchronised: ours to hello, or left over. */
void             box_agent_client_hello_reply     (BoxAgentClient *self,
                                                   JsonObject     *msg);
/* @call was taken out of the table; frees it. */
void             box_agent_client_complete_call   (BoxAgentClient *self,
                                                   Call           *call,
                                                   JsonObject     *reply);

/* client -> channel */
BoxAgentChannel *box_agent_channel_new            (BoxAgentClient *client,
                                                   guint32         id,
                                                   guint32         window);
void             box_agent_channel_set_reply      (BoxAgentChannel *self,
                                                   JsonObject      *reply);
/* A frame for this channel from the agent. */
void             box_agent_channel_handle_frame   (BoxAgentChannel           *self,
                                                   const BoxAgentFrameHeader *header,
                                                   GBytes                    *payload);
/* Deliver held frames from an idle, then frames as they come. */
void             box_agent_channel_release        (BoxAgentChannel *self);
/* The connection is gone (or the client disposed): fail everything,
 * emit ::closed (once released). */
void             box_agent_channel_lost           (BoxAgentChannel *self);

/* The bytes of a channel's writes up to @mark were written to the stream. */
void             box_agent_channel_flushed        (BoxAgentChannel *self);
/* The client forgets the channel: what it held for it is no longer charged. */
void             box_agent_channel_drop_charges   (BoxAgentChannel *self);

/* channel -> client */
/* Queue a frame; @urgent frames (CREDIT, channel-0 requests) go before
 * queued data.  Nothing happens once the client is closed.  For a normal
 * frame, the mark its last byte has in normal_queued: the frame is on the
 * stream once normal_written reaches it. */
guint64          box_agent_client_send_frame      (BoxAgentClient *client,
                                                   GBytes         *frame,
                                                   gboolean        urgent);
/* box_agent_channel_flushed (@channel) once normal_written >= @mark (never
 * from within this call: nothing when it is already). */
void             box_agent_client_wait_flushed    (BoxAgentClient  *client,
                                                   BoxAgentChannel *channel,
                                                   guint64          mark);
/* The channel is over (CLOSE from the agent): forget its id. */
void             box_agent_client_forget_channel  (BoxAgentClient  *client,
                                                   BoxAgentChannel *channel);
GMainContext    *box_agent_client_get_context     (BoxAgentClient *client);

/* A source on @context that runs @func(@cancellable, @data) once @cancellable is
 * cancelled; NULL without a cancellable.  Destroy it when done. */
GSource         *box_agent_watch_cancellable      (GMainContext            *context,
                                                   GCancellable            *cancellable,
                                                   GCancellableSourceFunc   func,
                                                   gpointer                 data);

/* box-exec-session.c: the stream of a session over @channel (which it
 * takes a reference on and listens to; right after the channel was opened) */
BoxExecSession  *box_exec_session_new             (BoxAgentChannel *channel,
                                                   const char      *id,
                                                   gint64           pid,
                                                   gint64           offset);

/* box-agent-exec.c: {argv, env?, cwd?, user?} of an exec request */
JsonObject      *box_agent_exec_args_new          (char       **argv,
                                                   GHashTable  *env,
                                                   const char  *cwd,
                                                   const char  *user);

/* agent error {code, message} -> BOX_ERROR */
GError          *box_agent_error_from_reply       (JsonObject *reply);

/* box-agent-sessions.c: the replies to `sessions` and `ports` as
 * BoxSessionInfo* / BoxPortListener* (what a guest sends that is not one
 * is left out); BOX_ERROR_INTERNAL without the array */
GPtrArray       *box_agent_sessions_from_reply    (JsonObject *reply, GError **error);
GPtrArray       *box_agent_ports_from_reply       (JsonObject *reply, GError **error);

/* box-agent-files.c */
/* The agent's Stat object as a record; BOX_ERROR_INTERNAL when a member is
 * missing or of the wrong type (@stat NULL: "the agent sent no Stat"). */
BoxFileInfo     *box_file_info_new_from_json      (JsonObject *stat, GError **error);
/* The same from @object's member @name. */
BoxFileInfo     *box_file_info_new_from_member    (JsonObject *object, const char *name,
                                                   GError **error);
/* fs-list output: the complete lines at the start of @buffer (one Stat
 * each) become BoxFileInfo* added to @infos and leave @buffer; a line that
 * does not parse, or an unfinished one over 1 MiB, is BOX_ERROR_INTERNAL. */
gboolean         box_file_list_take_lines         (GString *buffer, GPtrArray *infos,
                                                   GError **error);
JsonObject      *box_file_request_to_args         (const BoxFileRequest *request);
/* box-file-download.c, box-file-upload.c, box-file-watch.c: take a
 * reference on @channel and connect to it (before its first frames are
 * released) */
BoxFileDownload *box_file_download_new            (BoxAgentChannel *channel, BoxFileOp op);
BoxFileUpload   *box_file_upload_new              (BoxAgentChannel *channel, BoxFileOp op);
BoxFileWatch    *box_file_watch_new               (BoxAgentChannel *channel, const char *path);

G_END_DECLS
