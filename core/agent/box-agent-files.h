/* box-agent-files.h: the sandbox's files through its agent, typed (the
 * fs-* operations of doc/AGENT-PROTOCOL.md "Files").
 *
 * The operation names, their JSON arguments, the Stat object, fs-list's
 * lines and the channel events (done, error, fs, overflow) are known here
 * and in box-file-download.c / box-file-upload.c / box-file-watch.c only;
 * callers (the engine, and through it every transport) see a
 * BoxFileRequest, BoxFileInfo records, downloads as a GInputStream
 * (BoxFileDownload), uploads as a GOutputStream (BoxFileUpload) and a
 * BoxFileWatch. */
#pragma once

#include <gio/gio.h>

#include "box-agent-client.h"

G_BEGIN_DECLS

typedef struct _BoxFileDownload BoxFileDownload;
typedef struct _BoxFileUpload BoxFileUpload;
typedef struct _BoxFileWatch BoxFileWatch;

/* A file's Stat (lstat: symlinks are not followed). */
typedef struct {
  char   *path;     /* as requested, repeated and trailing slashes removed */
  char   *name;     /* its last component ("/" for the root) */
  char   *type;     /* "file", "dir", "symlink" or "other" */
  gint64  size;
  char   *mode;     /* permission bits, 4 octal digits ("0644") */
  char   *mtime;    /* RFC 3339 UTC */
  char   *target;   /* a symlink's contents; NULL otherwise */
} BoxFileInfo;

#define BOX_TYPE_FILE_INFO (box_file_info_get_type ())
GType        box_file_info_get_type (void) G_GNUC_CONST;
BoxFileInfo *box_file_info_copy     (const BoxFileInfo *info);
void         box_file_info_free     (BoxFileInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxFileInfo, box_file_info_free)

typedef enum {
  /* one request: box_agent_client_fs_call_async() */
  BOX_FILE_OP_STAT,
  BOX_FILE_OP_MKDIR,
  BOX_FILE_OP_RENAME,
  BOX_FILE_OP_DELETE,
  /* transfers: box_agent_client_fs_open_async() */
  BOX_FILE_OP_READ,        /* download: the file's bytes */
  BOX_FILE_OP_LIST,        /* download: the directory's entries (next_entries) */
  BOX_FILE_OP_TAR_GET,     /* download: a tar of the directory */
  BOX_FILE_OP_WRITE,       /* upload: the file's new bytes; done with its Stat */
  BOX_FILE_OP_TAR_PUT,     /* upload: a tar extracted at path */
  /* box_agent_client_fs_watch_async() */
  BOX_FILE_OP_WATCH,
  /* box_agent_client_service_logs_async(): a download of a service's log */
  BOX_FILE_OP_LOGS,
} BoxFileOp;

/* What an operation acts on.  Every path is absolute. */
typedef struct {
  BoxFileOp  op;
  char      *path;       /* every op but RENAME */
  char      *from;       /* RENAME */
  char      *to;         /* RENAME */
  char      *user;       /* NULL: root */
  gboolean   parents;    /* MKDIR: make missing parents */
  gboolean   recursive;  /* DELETE, WATCH */
  gboolean   mkdir;      /* WRITE: make missing parents */
  gint       mode;       /* MKDIR, WRITE: permission bits; < 0: the default */
} BoxFileRequest;

BoxFileRequest *box_file_request_copy (const BoxFileRequest *request);
void            box_file_request_free (BoxFileRequest *request);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxFileRequest, box_file_request_free)

/* STAT, MKDIR, RENAME (the Stat of `to`) and DELETE (no Stat).  Errors: the
 * agent's, as box_agent_client_call_async() maps them; a reply without a
 * valid Stat is BOX_ERROR_INTERNAL. */
void             box_agent_client_fs_call_async   (BoxAgentClient        *self,
                                                   const BoxFileRequest  *request,
                                                   GCancellable          *cancellable,
                                                   GAsyncReadyCallback    callback,
                                                   gpointer               user_data);
/* TRUE on success, with the Stat in @info (NULL for DELETE). */
gboolean         box_agent_client_fs_call_finish  (BoxAgentClient  *self,
                                                   GAsyncResult    *result,
                                                   BoxFileInfo    **info,
                                                   GError         **error);

/* READ, LIST, TAR_GET (a download: _fs_download_finish()) and WRITE,
 * TAR_PUT (an upload: _fs_upload_finish()), once the agent set the work up
 * (a missing file, a refused permission fail here). */
void             box_agent_client_fs_open_async   (BoxAgentClient        *self,
                                                   const BoxFileRequest  *request,
                                                   GCancellable          *cancellable,
                                                   GAsyncReadyCallback    callback,
                                                   gpointer               user_data);
BoxFileDownload *box_agent_client_fs_download_finish (BoxAgentClient  *self,
                                                      GAsyncResult    *result,
                                                      GError         **error);
BoxFileUpload   *box_agent_client_fs_upload_finish   (BoxAgentClient  *self,
                                                      GAsyncResult    *result,
                                                      GError         **error);
/* The object of a GTask that @source made with @tag, which must be a @type
 * (a typed finish called for a request of the other kind is a programming
 * error: critical, NULL).  The typed finishes of the file transfers, here
 * and in the engine. */
gpointer         box_agent_task_propagate_typed     (GAsyncResult    *result,
                                                      gpointer         source,
                                                      gpointer         tag,
                                                      GType            type,
                                                      GError         **error);

/* WATCH: a watch, once the agent's watches are in place. */
void             box_agent_client_fs_watch_async  (BoxAgentClient        *self,
                                                   const BoxFileRequest  *request,
                                                   GCancellable          *cancellable,
                                                   GAsyncReadyCallback    callback,
                                                   gpointer               user_data);
BoxFileWatch    *box_agent_client_fs_watch_finish (BoxAgentClient  *self,
                                                   GAsyncResult    *result,
                                                   GError         **error);

/* A supervised service's log (the agent's service-logs): a download
 * (box-file-download.h) of the last @tail lines across its log files
 * (< 0: the agent's default, 100; at most 10000), then with @follow what
 * the service writes next: that download never ends by itself, the caller
 * ends it.  BOX_ERROR_NOT_FOUND for a service the sandbox does not have. */
void             box_agent_client_service_logs_async  (BoxAgentClient      *self,
                                                       const char          *name,
                                                       gint                 tail,
                                                       gboolean             follow,
                                                       GCancellable        *cancellable,
                                                       GAsyncReadyCallback  callback,
                                                       gpointer             user_data);
BoxFileDownload *box_agent_client_service_logs_finish (BoxAgentClient  *self,
                                                       GAsyncResult    *result,
                                                       GError         **error);

G_END_DECLS
