/* box-file-download.h: a download from the sandbox's files (fs-read,
 * fs-tar-get, fs-list), from box_agent_client_fs_open_async(), as a
 * GInputStream.
 *
 * The stream's bytes are the agent's output: READ the file, TAR_GET a tar,
 * LOGS a service's log (box_agent_client_service_logs_async()).
 * LIST is read as typed entries with box_file_download_next_entries_async()
 * instead of bytes.  Flow control is the agent channel's (box-agent-stream.h):
 * what the agent sent is credited back to it only once it was read here,
 * so a consumer that stops reading pauses the reader in the sandbox after
 * one window.
 *
 * The stream is pollable and never blocks (read it with the async or
 * pollable API on the agent client's main context).  A read fails, rather
 * than ending, when the output is not complete: the agent's error event (a
 * typed BOX_ERROR), the channel closing before the agent's EOF
 * (BOX_ERROR_SANDBOX_UNAVAILABLE), or a READ whose byte count differs from
 * the length the agent announced (BOX_ERROR_INTERNAL).  So end of stream
 * (a read of 0) means the whole output arrived.
 *
 * Closing the stream before its end, box_file_download_abort(), or the
 * last reference going, stops the work in the sandbox. */
#pragma once

#include "box-agent-files.h"

G_BEGIN_DECLS

#define BOX_TYPE_FILE_DOWNLOAD (box_file_download_get_type ())
G_DECLARE_FINAL_TYPE (BoxFileDownload, box_file_download, BOX, FILE_DOWNLOAD, GInputStream)

BoxFileOp          box_file_download_get_op     (BoxFileDownload *self);
/* READ: the file's length when the agent knows it (exactly that many bytes
 * follow); -1 when not (proc, sys ...) and for the other operations. */
gint64             box_file_download_get_length (BoxFileDownload *self);
/* READ: the file's Stat when it was opened (borrowed); else NULL. */
const BoxFileInfo *box_file_download_get_info   (BoxFileDownload *self);
/* Stops the work in the sandbox now: a pending or later read fails with
 * G_IO_ERROR_CANCELLED unless the output was complete.  Idempotent. */
void               box_file_download_abort      (BoxFileDownload *self);

/* LIST: the next entries (BoxFileInfo*, at least one), or an empty array
 * at the end of the directory.  Errors as a read's; a last line without
 * its end is BOX_ERROR_INTERNAL. */
void               box_file_download_next_entries_async  (BoxFileDownload     *self,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
GPtrArray         *box_file_download_next_entries_finish (BoxFileDownload  *self,
                                                          GAsyncResult     *result,
                                                          GError          **error);

G_END_DECLS
