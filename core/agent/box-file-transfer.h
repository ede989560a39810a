/* box-file-transfer.h: one file download or upload through the agent
 * (fs-read, fs-list, fs-tar-get, fs-write, fs-tar-put on a channel), from
 * box_agent_client_fs_open_async().
 *
 * Downloads: the output comes as ::data (READ, TAR_GET: the bytes) or
 * ::entries (LIST: the directory's entries, typed), then ::eof once it is
 * complete.  Flow control is the channel's: the agent may send one window
 * beyond what the consumer reported delivered with
 * box_file_transfer_consumed() (for ::data its length, for ::entries the
 * size it carries), so a consumer that does not deliver pauses the reader
 * in the sandbox.
 *
 * Uploads: box_file_transfer_write_async() within the agent's credit, then
 * box_file_transfer_end_input(); the agent's result is ::done (WRITE: with
 * the file's new Stat) or ::failed.
 *
 * ::failed (GError *error) is the agent's error event (a typed BOX_ERROR,
 * as box_agent_client_call_async() maps it) or output that does not parse;
 * ::closed ends every transfer (after ::eof or ::done when it succeeded):
 * a download closed without ::eof is incomplete.  Signals are emitted on
 * the agent client's main context, from the main loop after the open
 * completed: connect handlers before returning to it.
 */
#pragma once

#include "box-agent-files.h"

G_BEGIN_DECLS

#define BOX_TYPE_FILE_TRANSFER (box_file_transfer_get_type ())
G_DECLARE_FINAL_TYPE (BoxFileTransfer, box_file_transfer, BOX, FILE_TRANSFER, GObject)

BoxFileOp    box_file_transfer_get_op        (BoxFileTransfer *self);
/* READ: the file's length when the agent knows it (exactly that many bytes
 * follow); -1 when not (proc, sys ...) and for the other operations. */
gint64       box_file_transfer_get_length    (BoxFileTransfer *self);
/* READ: the file's Stat when it was opened (borrowed); else NULL. */
const BoxFileInfo *box_file_transfer_get_info (BoxFileTransfer *self);
gboolean     box_file_transfer_is_closed     (BoxFileTransfer *self);

/* Downloads: @n bytes of what ::data / ::entries handed over were
 * delivered onward. */
void         box_file_transfer_consumed      (BoxFileTransfer *self,
                                              gsize            n);

/* Uploads: @data goes to the agent; completes once it is within the
 * agent's credit.  Fails with G_IO_ERROR_CLOSED once the transfer is
 * closed, BOX_ERROR_SANDBOX_UNAVAILABLE when the agent went away. */
void         box_file_transfer_write_async   (BoxFileTransfer     *self,
                                              GBytes              *data,
                                              GCancellable        *cancellable,
                                              GAsyncReadyCallback  callback,
                                              gpointer             user_data);
gboolean     box_file_transfer_write_finish  (BoxFileTransfer *self,
                                              GAsyncResult    *result,
                                              GError         **error);
/* Uploads: the input is complete (after the writes queued so far). */
void         box_file_transfer_end_input     (BoxFileTransfer *self);

/* Stop: a download stops reading, an upload not yet done is abandoned
 * (nothing changes in the sandbox).  ::closed follows.  Idempotent. */
void         box_file_transfer_close         (BoxFileTransfer *self);

/* Signals:
 *   ::data (GBytes *bytes)                     READ, TAR_GET output
 *   ::entries (GPtrArray *infos, guint64 size) LIST output: BoxFileInfo*, standing
 *                                              for @size bytes of credit
 *   ::eof                                      the output is complete
 *   ::done (BoxFileInfo *info)                 uploads: the agent finished (@info:
 *                                              WRITE's Stat, else NULL)
 *   ::failed (GError *error)
 *   ::closed
 */

G_END_DECLS
