/* box-exec.h: the typed records of the exec, session and port sub-API.
 *
 * The engine's API speaks these (box-engine.h); every transport turns them
 * into its own wire form (core/http writes the API's JSON) and the agent
 * layer (core/agent/box-agent-exec.h) into the guest agent's messages.
 * Nothing here knows either.  Each record is a boxed type with a copy and
 * a free; strings and arrays are owned by the record.
 */
#pragma once

#include <gio/gio.h>

/* BoxExecRequest, BoxExecResult (boxed, with copy and free) and
 * BOX_EXEC_OUTPUT_LIMIT: the plugin SDK's (hypervisor plugins run
 * commands too) */
#include "box-agent.h"

G_BEGIN_DECLS

/* A streaming exec in a session of its own (GET /exec, a WebSocket). */
typedef struct {
  char       **argv;          /* required, non-empty */
  GHashTable  *env;           /* char* -> char*, may be NULL */
  char        *cwd;           /* NULL: the user's home */
  char        *user;          /* NULL: "box" */
  gboolean     tty;
  guint        cols;          /* the TTY's first size; 0: unset */
  guint        rows;
  gboolean     detachable;
} BoxExecStreamRequest;

/* A session of a sandbox, as listed (GET /exec/sessions). */
typedef struct {
  char        *id;            /* "s-" + 10 of [0-9a-z] */
  char       **argv;          /* the command, never NULL */
  gboolean     tty;
  gint64       pid;
  gint64       started_at;    /* usec since the epoch */
  gboolean     exited;
  gboolean     has_exit_code; /* exit_code is known (once exited) */
  int          exit_code;     /* 128 + signal when killed */
  gboolean     attached;      /* a stream is attached to it */
} BoxSessionInfo;

/* A TCP listener in a sandbox (GET /ports, the port watch). */
typedef struct {
  guint        port;
  char        *address;       /* the bound address, as the guest shows it */
  gint64       pid;           /* 0: unknown */
  char        *session;       /* the session that started it, or NULL */
} BoxPortListener;

/* The access setting of one port (GET /ports/settings, PUT /ports/{port}). */
typedef struct {
  guint        port;
  char        *access;        /* "private" or "public" */
  char        *url;           /* "" without a sandbox domain */
} BoxPortSetting;

#define BOX_TYPE_EXEC_STREAM_REQUEST (box_exec_stream_request_get_type ())
#define BOX_TYPE_SESSION_INFO        (box_session_info_get_type ())
#define BOX_TYPE_PORT_LISTENER       (box_port_listener_get_type ())
#define BOX_TYPE_PORT_SETTING        (box_port_setting_get_type ())

GType                 box_exec_stream_request_get_type (void) G_GNUC_CONST;
BoxExecStreamRequest *box_exec_stream_request_copy     (const BoxExecStreamRequest *request);
void                  box_exec_stream_request_free     (BoxExecStreamRequest *request);

GType                 box_session_info_get_type        (void) G_GNUC_CONST;
BoxSessionInfo       *box_session_info_copy            (const BoxSessionInfo *info);
void                  box_session_info_free            (BoxSessionInfo *info);

GType                 box_port_listener_get_type       (void) G_GNUC_CONST;
BoxPortListener      *box_port_listener_copy           (const BoxPortListener *listener);
void                  box_port_listener_free           (BoxPortListener *listener);

GType                 box_port_setting_get_type        (void) G_GNUC_CONST;
BoxPortSetting       *box_port_setting_new             (guint port, const char *access,
                                                        const char *url);
BoxPortSetting       *box_port_setting_copy            (const BoxPortSetting *setting);
void                  box_port_setting_free            (BoxPortSetting *setting);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxExecStreamRequest, box_exec_stream_request_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxSessionInfo, box_session_info_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxPortListener, box_port_listener_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxPortSetting, box_port_setting_free)

G_END_DECLS
