/* box-file-upload.h: an upload into the sandbox's files (fs-write,
 * fs-tar-put), from box_agent_client_fs_open_async(), as a GOutputStream.
 *
 * What is written goes to the agent as the file's new bytes (WRITE) or a
 * tar to extract (TAR_PUT).  Flow control is the agent channel's
 * (box-agent-stream.h): a write is accepted while less than
 * BOX_AGENT_STREAM_WRITE_LIMIT bytes wait for the agent's credit; beyond
 * that the stream is not writable, so a slow sandbox slows the writer.
 * The stream is pollable and never blocks (write it with the async or
 * pollable API on the agent client's main context).
 *
 * The upload is committed by g_output_stream_close_async(): the input
 * ends, and the close completes with the agent's result, once the file is
 * in place (WRITE: box_file_upload_get_info() is then the file's new Stat)
 * or with its error (a typed BOX_ERROR; a channel closed without a result
 * is BOX_ERROR_SANDBOX_UNAVAILABLE).  An error the agent reports earlier
 * (a refused tar member) fails the writes from then on.
 *
 * An upload not closed that way is abandoned, and nothing changes in the
 * sandbox: box_file_upload_abort(), a synchronous close before the
 * agent's result (G_IO_ERROR_CANCELLED), or the last reference going. */
#pragma once

#include "box-agent-files.h"

G_BEGIN_DECLS

#define BOX_TYPE_FILE_UPLOAD (box_file_upload_get_type ())
G_DECLARE_FINAL_TYPE (BoxFileUpload, box_file_upload, BOX, FILE_UPLOAD, GOutputStream)

BoxFileOp          box_file_upload_get_op   (BoxFileUpload *self);
/* WRITE, once the close succeeded: the file's Stat (borrowed); else NULL. */
const BoxFileInfo *box_file_upload_get_info (BoxFileUpload *self);
/* Abandons the upload now (nothing changes in the sandbox): writes and a
 * pending close fail with G_IO_ERROR_CANCELLED.  Idempotent; after the
 * agent's result it changes nothing. */
void               box_file_upload_abort    (BoxFileUpload *self);

G_END_DECLS
