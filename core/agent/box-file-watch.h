/* box-file-watch.h: a watch on a path in the sandbox (fs-watch: inotify in
 * the guest), from box_agent_client_fs_watch_async().
 *
 * ::changed (BoxFileChange change, const char *path) per change;
 * ::overflow when the guest's kernel lost events (read the tree again);
 * ::failed (GError *error) for an error the agent reported; ::closed once,
 * when the watch ended (box_file_watch_close(), the agent ended it, the
 * watched path was removed or moved away after its ::changed, or the agent
 * went away).  Signals are emitted on the agent client's main context,
 * from the main loop after the watch was returned: connect handlers
 * before returning to it.
 */
#pragma once

#include "box-agent-files.h"

G_BEGIN_DECLS

typedef enum {
  BOX_FILE_CHANGE_CREATE,   /* created or moved in: the new name */
  BOX_FILE_CHANGE_WRITE,    /* modified */
  BOX_FILE_CHANGE_REMOVE,   /* deleted */
  BOX_FILE_CHANGE_RENAME,   /* moved away: the old name */
  BOX_FILE_CHANGE_CHMOD,    /* attributes changed */
} BoxFileChange;

#define BOX_TYPE_FILE_WATCH (box_file_watch_get_type ())
G_DECLARE_FINAL_TYPE (BoxFileWatch, box_file_watch, BOX, FILE_WATCH, GObject)

/* The watched path, as requested. */
const char  *box_file_watch_get_path   (BoxFileWatch *self);
gboolean     box_file_watch_is_closed  (BoxFileWatch *self);
/* Ends the watch; ::closed follows.  Idempotent. */
void         box_file_watch_close      (BoxFileWatch *self);

G_END_DECLS
