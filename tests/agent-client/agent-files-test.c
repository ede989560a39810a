/* agent-files-test.c: the typed file operations (box-agent-files.h,
 * BoxFileTransfer, BoxFileWatch) against a scripted fake agent: the
 * requests they send, and what they make of the agent's replies, lines and
 * events. */
#include "config.h"

#include <string.h>

#include "agent-test-util.h"
#include "box-agent-files.h"
#include "box-agent-private.h"
#include "box-error.h"
#include "box-file-transfer.h"
#include "box-file-watch.h"

#define STAT_JSON(path, name) \
  "{\"path\":\"" path "\",\"name\":\"" name "\",\"type\":\"file\",\"size\":5," \
  "\"mode\":\"0644\",\"mtime\":\"2026-11-26T10:00:00Z\"}"

typedef struct {
  FakeAgent *fake;
  BoxAgentClient *client;
} Fake;

static void
fake_setup (Fake *f, gconstpointer data)
{
  g_autoptr(GIOStream) stream = NULL;
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) hello = NULL;
  g_autoptr(GError) error = NULL;

  f->fake = fake_agent_new (&stream);
  f->client = box_agent_client_new (stream);
  box_agent_client_connect_async (f->client, NULL, agent_test_store_result, &res);
  hello = fake_agent_read_request (f->fake);
  fake_agent_reply_hello (f->fake, hello);
  agent_test_wait_result (&res);
  g_assert_true (box_agent_client_connect_finish (f->client, res, &error));
  g_assert_no_error (error);
}

static void
fake_teardown (Fake *f, gconstpointer data)
{
  g_clear_object (&f->client);
  fake_agent_free (f->fake);
  agent_test_spin (10);
}

/* Reads the next request, checks its op, answers @reply_members (after
 * "id" and "ok"; with "chan" when it opened one) and returns it. */
static JsonObject *
answer (Fake *f, const char *op, gboolean ok, const char *reply_members, gint64 *chan_out)
{
  JsonObject *req = fake_agent_read_request (f->fake);
  g_autofree char *json = NULL;
  gint64 id = 0, chan = 0;

  g_assert_cmpstr (box_agent_json_get_string (req, "op"), ==, op);
  g_assert_true (box_agent_json_get_int (req, "id", &id));
  if (box_agent_json_get_int (req, "chan", &chan) && ok)
    json = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"chan\":%" G_GINT64_FORMAT "%s%s}",
                            id, chan, reply_members[0] != '\0' ? "," : "", reply_members);
  else
    json = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":%s%s%s}", id, ok ? "true" : "false",
                            reply_members[0] != '\0' ? "," : "", reply_members);
  fake_agent_send_json (f->fake, 0, json);
  if (chan_out != NULL)
    *chan_out = chan;
  return req;
}

static gboolean
call (Fake *f, const BoxFileRequest *request, const char *op, gboolean ok, const char *reply,
      JsonObject **req_out, BoxFileInfo **info, GError **error)
{
  g_autoptr(GAsyncResult) res = NULL;
  JsonObject *req;

  box_agent_client_fs_call_async (f->client, request, NULL, agent_test_store_result, &res);
  req = answer (f, op, ok, reply, NULL);
  agent_test_wait_result (&res);
  if (req_out != NULL)
    *req_out = req;
  else
    json_object_unref (req);
  return box_agent_client_fs_call_finish (f->client, res, info, error);
}

static void
test_calls (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_STAT, .path = "/etc/hosts", .mode = -1 };
  g_autoptr(BoxFileInfo) info = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autoptr(GError) error = NULL;

  /* stat: path only (no user), the Stat typed */
  g_assert_true (call (f, &request, "fs-stat", TRUE, "\"stat\":" STAT_JSON ("/etc/hosts", "hosts"),
                       &req, &info, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (box_agent_json_get_string (req, "path"), ==, "/etc/hosts");
  g_assert_false (json_object_has_member (req, "user"));
  g_assert_cmpstr (info->path, ==, "/etc/hosts");
  g_assert_cmpstr (info->name, ==, "hosts");
  g_assert_cmpstr (info->type, ==, "file");
  g_assert_cmpint (info->size, ==, 5);
  g_assert_cmpstr (info->mode, ==, "0644");
  g_assert_cmpstr (info->mtime, ==, "2026-11-26T10:00:00Z");
  g_assert_null (info->target);
  g_clear_pointer (&info, box_file_info_free);
  g_clear_pointer (&req, json_object_unref);

  /* mkdir: parents, the mode as 4 octal digits, the user */
  request = (BoxFileRequest) { .op = BOX_FILE_OP_MKDIR, .path = "/d", .user = "box", .parents = TRUE,
                               .mode = 0750 };
  g_assert_true (call (f, &request, "fs-mkdir", TRUE,
                       "\"stat\":{\"path\":\"/d\",\"name\":\"d\",\"type\":\"symlink\",\"size\":1,"
                       "\"mode\":\"0750\",\"mtime\":\"m\",\"target\":\"x\"}", &req, &info, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (box_agent_json_get_string (req, "mode"), ==, "0750");
  g_assert_cmpstr (box_agent_json_get_string (req, "user"), ==, "box");
  g_assert_true (json_object_get_boolean_member (req, "parents"));
  g_assert_cmpstr (info->target, ==, "x");
  g_clear_pointer (&info, box_file_info_free);
  g_clear_pointer (&req, json_object_unref);

  /* mkdir without a mode: none sent (the agent's default) */
  request.mode = -1;
  g_assert_true (call (f, &request, "fs-mkdir", TRUE, "\"stat\":" STAT_JSON ("/d", "d"), &req, &info,
                       &error));
  g_assert_false (json_object_has_member (req, "mode"));
  g_clear_pointer (&info, box_file_info_free);
  g_clear_pointer (&req, json_object_unref);

  /* rename: from and to, no path */
  request = (BoxFileRequest) { .op = BOX_FILE_OP_RENAME, .from = "/a", .to = "/b", .mode = -1 };
  g_assert_true (call (f, &request, "fs-rename", TRUE, "\"stat\":" STAT_JSON ("/b", "b"), &req, &info,
                       &error));
  g_assert_cmpstr (box_agent_json_get_string (req, "from"), ==, "/a");
  g_assert_cmpstr (box_agent_json_get_string (req, "to"), ==, "/b");
  g_assert_false (json_object_has_member (req, "path"));
  g_assert_cmpstr (info->name, ==, "b");
  g_clear_pointer (&info, box_file_info_free);
  g_clear_pointer (&req, json_object_unref);

  /* delete: TRUE without a Stat */
  request = (BoxFileRequest) { .op = BOX_FILE_OP_DELETE, .path = "/a", .recursive = TRUE, .mode = -1 };
  info = (BoxFileInfo *) 0x1;
  g_assert_true (call (f, &request, "fs-delete", TRUE, "", &req, &info, &error));
  g_assert_no_error (error);
  g_assert_null (info);
  g_assert_true (json_object_get_boolean_member (req, "recursive"));
  g_clear_pointer (&req, json_object_unref);

  /* the agent's errors, typed */
  request = (BoxFileRequest) { .op = BOX_FILE_OP_STAT, .path = "/nope", .mode = -1 };
  g_assert_false (call (f, &request, "fs-stat", FALSE,
                        "\"error\":{\"code\":\"not_found\",\"message\":\"no such file\"}", NULL, &info,
                        &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "no such file");
  g_clear_error (&error);

  /* a Stat that is not one */
  g_assert_false (call (f, &request, "fs-stat", TRUE, "\"stat\":{\"path\":\"/x\",\"name\":\"x\"}",
                        NULL, &info, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_cmpstr (error->message, ==, "the agent's Stat has no string type");
  g_clear_error (&error);
  g_assert_false (call (f, &request, "fs-stat", TRUE, "", NULL, &info, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_cmpstr (error->message, ==, "the agent sent no Stat");
}

static void
test_list_lines (void)
{
  g_autoptr(GString) buffer = g_string_new (STAT_JSON ("/a", "a") "\n," STAT_JSON ("/b", "b") "\n{\"pa");
  g_autoptr(GPtrArray) infos = g_ptr_array_new_with_free_func ((GDestroyNotify) box_file_info_free);
  g_autoptr(GError) error = NULL;

  /* complete lines (a leading comma tolerated); the partial one stays */
  g_assert_true (box_file_list_take_lines (buffer, infos, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (infos->len, ==, 2);
  g_assert_cmpstr (((BoxFileInfo *) infos->pdata[1])->path, ==, "/b");
  g_assert_cmpstr (buffer->str, ==, "{\"pa");
  g_string_append (buffer, "th\":1}\n");
  g_assert_false (box_file_list_take_lines (buffer, infos, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);
  g_string_truncate (buffer, 0);
  g_string_append (buffer, "not json\n");
  g_assert_false (box_file_list_take_lines (buffer, infos, &error));
  g_assert_nonnull (error);
}

typedef struct {
  GByteArray *data;
  GPtrArray *entries;
  guint64 credit;
  gboolean eof;
  gboolean closed;
  BoxFileInfo *done;
  gboolean got_done;
  GError *failed;
  guint n_failed;
} Seen;

static void
seen_clear (Seen *s)
{
  g_clear_pointer (&s->data, g_byte_array_unref);
  g_clear_pointer (&s->entries, g_ptr_array_unref);
  g_clear_pointer (&s->done, box_file_info_free);
  g_clear_error (&s->failed);
}

static void
on_data (BoxFileTransfer *t, GBytes *bytes, Seen *s)
{
  g_byte_array_append (s->data, g_bytes_get_data (bytes, NULL), (guint) g_bytes_get_size (bytes));
  box_file_transfer_consumed (t, g_bytes_get_size (bytes));
}

static void
on_entries (BoxFileTransfer *t, GPtrArray *infos, guint64 size, Seen *s)
{
  for (guint i = 0; i < infos->len; i++)
    g_ptr_array_add (s->entries, box_file_info_copy (infos->pdata[i]));
  s->credit += size;
  box_file_transfer_consumed (t, size);
}

static void
on_eof (BoxFileTransfer *t, Seen *s)
{
  s->eof = TRUE;
}

static void
on_done (BoxFileTransfer *t, BoxFileInfo *info, Seen *s)
{
  s->got_done = TRUE;
  s->done = info != NULL ? box_file_info_copy (info) : NULL;
}

static void
on_failed (BoxFileTransfer *t, GError *error, Seen *s)
{
  s->n_failed++;
  g_clear_error (&s->failed);
  s->failed = g_error_copy (error);
}

static void
on_closed (GObject *t, Seen *s)
{
  s->closed = TRUE;
}

static BoxFileTransfer *
open_transfer (Fake *f, const BoxFileRequest *request, const char *op, const char *reply,
               Seen *s, gint64 *chan)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autoptr(GError) error = NULL;
  BoxFileTransfer *t;

  box_agent_client_fs_open_async (f->client, request, NULL, agent_test_store_result, &res);
  req = answer (f, op, TRUE, reply, chan);
  agent_test_wait_result (&res);
  t = box_agent_client_fs_open_finish (f->client, res, &error);
  g_assert_no_error (error);
  g_assert_cmpint (box_file_transfer_get_op (t), ==, request->op);
  s->data = g_byte_array_new ();
  s->entries = g_ptr_array_new_with_free_func ((GDestroyNotify) box_file_info_free);
  g_signal_connect (t, "data", G_CALLBACK (on_data), s);
  g_signal_connect (t, "entries", G_CALLBACK (on_entries), s);
  g_signal_connect (t, "eof", G_CALLBACK (on_eof), s);
  g_signal_connect (t, "done", G_CALLBACK (on_done), s);
  g_signal_connect (t, "failed", G_CALLBACK (on_failed), s);
  g_signal_connect (t, "closed", G_CALLBACK (on_closed), s);
  return t;
}

static void
test_read (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_READ, .path = "/f", .mode = -1 };
  Seen s = { 0 };
  gint64 chan = 0;
  g_autoptr(BoxFileTransfer) t =
    open_transfer (f, &request, "fs-read", "\"stat\":" STAT_JSON ("/f", "f") ",\"length\":5", &s, &chan);

  g_assert_cmpint (box_file_transfer_get_length (t), ==, 5);
  g_assert_cmpstr (box_file_transfer_get_info (t)->name, ==, "f");
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 2, (guint32) chan, "noise", 5);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, "hel", 3);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, "lo", 2);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_EOF, 1, (guint32) chan, NULL, 0);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  AGENT_TEST_WAIT_FOR (s.closed);
  /* stream 2 is not output */
  g_assert_cmpmem (s.data->data, s.data->len, "hello", 5);
  g_assert_true (s.eof);
  g_assert_cmpuint (s.n_failed, ==, 0);
  seen_clear (&s);
}

static void
test_read_error (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_TAR_GET, .path = "/d", .mode = -1 };
  Seen s = { 0 };
  gint64 chan = 0;
  g_autoptr(BoxFileTransfer) t = open_transfer (f, &request, "fs-tar-get", "", &s, &chan);

  g_assert_cmpint (box_file_transfer_get_length (t), ==, -1);
  g_assert_null (box_file_transfer_get_info (t));
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, "part", 4);
  fake_agent_send_json (f->fake, (guint32) chan,
                        "{\"event\":\"error\",\"error\":{\"code\":\"conflict\",\"message\":\"the file shrank\"}}");
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  AGENT_TEST_WAIT_FOR (s.closed);
  g_assert_false (s.eof);
  g_assert_cmpuint (s.n_failed, ==, 1);
  g_assert_error (s.failed, BOX_ERROR, BOX_ERROR_CONFLICT);
  g_assert_cmpstr (s.failed->message, ==, "the file shrank");
  seen_clear (&s);
}

static void
test_list (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_LIST, .path = "/d", .mode = -1 };
  Seen s = { 0 };
  gint64 chan = 0;
  g_autoptr(BoxFileTransfer) t = open_transfer (f, &request, "fs-list", "", &s, &chan);
  const char *part1 = STAT_JSON ("/d/a", "a") "\n{\"path\":\"/d/b\",";
  const char *part2 = "\"name\":\"b\",\"type\":\"dir\",\"size\":0,\"mode\":\"0755\",\"mtime\":\"m\"}\n";

  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, part1, strlen (part1));
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, part2, strlen (part2));
  fake_agent_send (f->fake, BOX_AGENT_FRAME_EOF, 1, (guint32) chan, NULL, 0);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  AGENT_TEST_WAIT_FOR (s.closed);
  g_assert_true (s.eof);
  g_assert_cmpuint (s.entries->len, ==, 2);
  g_assert_cmpstr (((BoxFileInfo *) s.entries->pdata[0])->name, ==, "a");
  g_assert_cmpstr (((BoxFileInfo *) s.entries->pdata[1])->type, ==, "dir");
  /* every byte is accounted for: the consumer credits all it got */
  g_assert_cmpuint (s.credit, ==, strlen (part1) + strlen (part2));
  g_assert_cmpuint (s.data->len, ==, 0);
  seen_clear (&s);
}

static void
test_list_unfinished (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_LIST, .path = "/d", .mode = -1 };
  Seen s = { 0 };
  gint64 chan = 0;
  g_autoptr(BoxFileTransfer) t = open_transfer (f, &request, "fs-list", "", &s, &chan);

  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, "{\"path\"", 7);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_EOF, 1, (guint32) chan, NULL, 0);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  AGENT_TEST_WAIT_FOR (s.closed);
  /* an output that ends mid-line is not complete */
  g_assert_false (s.eof);
  g_assert_error (s.failed, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_cmpstr (s.failed->message, ==, "the last fs-list line has no end");
  seen_clear (&s);
}

static void
test_write (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_WRITE, .path = "/f", .user = "box", .mkdir = TRUE,
                             .mode = 0600 };
  Seen s = { 0 };
  gint64 chan = 0;
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxFileTransfer) t = NULL;
  g_autoptr(GBytes) bytes = g_bytes_new_static ("data", 4);
  gboolean got_data = FALSE, got_eof = FALSE;

  box_agent_client_fs_open_async (f->client, &request, NULL, agent_test_store_result, &res);
  req = answer (f, "fs-write", TRUE, "", &chan);
  g_assert_cmpstr (box_agent_json_get_string (req, "mode"), ==, "0600");
  g_assert_true (json_object_get_boolean_member (req, "mkdir"));
  agent_test_wait_result (&res);
  t = box_agent_client_fs_open_finish (f->client, res, &error);
  g_assert_no_error (error);
  g_signal_connect (t, "done", G_CALLBACK (on_done), &s);
  g_signal_connect (t, "failed", G_CALLBACK (on_failed), &s);
  g_signal_connect (t, "closed", G_CALLBACK (on_closed), &s);
  g_clear_object (&res);
  box_file_transfer_write_async (t, bytes, NULL, agent_test_store_result, &res);
  box_file_transfer_end_input (t);
  /* the agent sees the data on stream 0, then EOF */
  while (!got_eof) {
    BoxAgentFrameHeader h;
    g_autoptr(GBytes) p = NULL;

    fake_agent_read (f->fake, &h, &p);
    if (h.type == BOX_AGENT_FRAME_DATA) {
      g_assert_cmpuint (h.stream, ==, 0);
      g_assert_cmpmem (g_bytes_get_data (p, NULL), h.length, "data", 4);
      got_data = TRUE;
    } else if (h.type == BOX_AGENT_FRAME_EOF) {
      g_assert_cmpuint (h.stream, ==, 0);
      got_eof = TRUE;
    }
  }
  g_assert_true (got_data);
  agent_test_wait_result (&res);
  g_assert_true (box_file_transfer_write_finish (t, res, &error));
  fake_agent_send_json (f->fake, (guint32) chan, "{\"event\":\"done\",\"stat\":" STAT_JSON ("/f", "f") "}");
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  AGENT_TEST_WAIT_FOR (s.closed);
  g_assert_true (s.got_done);
  g_assert_cmpstr (s.done->path, ==, "/f");
  g_assert_cmpuint (s.n_failed, ==, 0);
  seen_clear (&s);
}

static void
test_upload_no_result (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_TAR_PUT, .path = "/d", .mode = -1 };
  Seen s = { 0 };
  gint64 chan = 0;
  g_autoptr(BoxFileTransfer) t = open_transfer (f, &request, "fs-tar-put", "", &s, &chan);

  /* output on an upload is not passed on */
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, "x", 1);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  AGENT_TEST_WAIT_FOR (s.closed);
  g_assert_cmpuint (s.data->len, ==, 0);
  g_assert_false (s.got_done);
  g_assert_cmpuint (s.n_failed, ==, 1);
  g_assert_error (s.failed, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
  seen_clear (&s);
}

typedef struct {
  GPtrArray *changes;   /* "kind path" */
  guint n_overflow;
  guint n_failed;
  gboolean closed;
} WatchSeen;

static void
on_changed (BoxFileWatch *w, gint change, const char *path, WatchSeen *s)
{
  g_ptr_array_add (s->changes, g_strdup_printf ("%d %s", change, path));
}

static void
on_overflow (BoxFileWatch *w, WatchSeen *s)
{
  s->n_overflow++;
}

static void
on_watch_failed (BoxFileWatch *w, GError *error, WatchSeen *s)
{
  g_assert_error (error, BOX_ERROR, BOX_ERROR_PERMISSION_DENIED);
  s->n_failed++;
}

static void
on_watch_closed (BoxFileWatch *w, WatchSeen *s)
{
  s->closed = TRUE;
}

static void
test_watch (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_WATCH, .path = "/w", .recursive = TRUE, .mode = -1 };
  WatchSeen s = { g_ptr_array_new_with_free_func (g_free) };
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxFileWatch) w = NULL;
  gint64 chan = 0;

  box_agent_client_fs_watch_async (f->client, &request, NULL, agent_test_store_result, &res);
  req = answer (f, "fs-watch", TRUE, "", &chan);
  g_assert_true (json_object_get_boolean_member (req, "recursive"));
  agent_test_wait_result (&res);
  w = box_agent_client_fs_watch_finish (f->client, res, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (box_file_watch_get_path (w), ==, "/w");
  g_signal_connect (w, "changed", G_CALLBACK (on_changed), &s);
  g_signal_connect (w, "overflow", G_CALLBACK (on_overflow), &s);
  g_signal_connect (w, "failed", G_CALLBACK (on_watch_failed), &s);
  g_signal_connect (w, "closed", G_CALLBACK (on_watch_closed), &s);
  fake_agent_send_json (f->fake, (guint32) chan, "{\"event\":\"fs\",\"type\":\"create\",\"path\":\"/w/a\"}");
  fake_agent_send_json (f->fake, (guint32) chan, "{\"event\":\"fs\",\"type\":\"explode\",\"path\":\"/w/a\"}");
  fake_agent_send_json (f->fake, (guint32) chan, "{\"event\":\"overflow\"}");
  fake_agent_send_json (f->fake, (guint32) chan,
                        "{\"event\":\"error\",\"error\":{\"code\":\"permission_denied\",\"message\":\"no\"}}");
  fake_agent_send_json (f->fake, (guint32) chan, "{\"event\":\"fs\",\"type\":\"chmod\",\"path\":\"/w/b\"}");
  fake_agent_send_json (f->fake, (guint32) chan, "{\"event\":\"fs\",\"type\":\"remove\",\"path\":\"/w\"}");
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  AGENT_TEST_WAIT_FOR (s.closed);
  /* an unknown kind is dropped */
  g_assert_cmpuint (s.changes->len, ==, 3);
  g_assert_cmpstr (s.changes->pdata[0], ==, "0 /w/a");
  g_assert_cmpstr (s.changes->pdata[1], ==, "4 /w/b");
  g_assert_cmpstr (s.changes->pdata[2], ==, "2 /w");
  g_assert_cmpuint (s.n_overflow, ==, 1);
  g_assert_cmpuint (s.n_failed, ==, 1);
  g_assert_true (box_file_watch_is_closed (w));
  g_ptr_array_unref (s.changes);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  agent_test_init ();

  g_test_add_func ("/agent-files/list-lines", test_list_lines);
  g_test_add ("/agent-files/calls", Fake, NULL, fake_setup, test_calls, fake_teardown);
  g_test_add ("/agent-files/read", Fake, NULL, fake_setup, test_read, fake_teardown);
  g_test_add ("/agent-files/read-error", Fake, NULL, fake_setup, test_read_error, fake_teardown);
  g_test_add ("/agent-files/list", Fake, NULL, fake_setup, test_list, fake_teardown);
  g_test_add ("/agent-files/list-unfinished", Fake, NULL, fake_setup, test_list_unfinished, fake_teardown);
  g_test_add ("/agent-files/write", Fake, NULL, fake_setup, test_write, fake_teardown);
  g_test_add ("/agent-files/upload-no-result", Fake, NULL, fake_setup, test_upload_no_result, fake_teardown);
  g_test_add ("/agent-files/watch", Fake, NULL, fake_setup, test_watch, fake_teardown);
  return g_test_run ();
}
