/* agent-files-test.c: the typed file operations (box-agent-files.h,
 * BoxFileDownload, BoxFileUpload, BoxFileWatch) against a scripted fake agent: the
 * requests they send, and what they make of the agent's replies, lines and
 * events. */
#include "config.h"

#include <string.h>

#include "agent-test-util.h"
#include "box-agent-files.h"
#include "box-agent-private.h"
#include "box-error.h"
#include "box-file-download.h"
#include "box-file-upload.h"
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
  g_clear_error (&error);
  /* a nesting bomb (json-glib 1.6 recurses without limit: ~500k '[' used
   * to overflow boxd's stack) is refused before it is parsed */
  g_string_truncate (buffer, 0);
  for (guint i = 0; i < 600000; i++)
    g_string_append_c (buffer, '[');
  g_string_append_c (buffer, '\n');
  g_assert_false (box_file_list_take_lines (buffer, infos, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_cmpuint (infos->len, ==, 2);
}

static BoxFileDownload *
open_download (Fake *f, const BoxFileRequest *request, const char *op, const char *reply,
               gint64 *chan)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autoptr(GError) error = NULL;
  BoxFileDownload *d;

  box_agent_client_fs_open_async (f->client, request, NULL, agent_test_store_result, &res);
  req = answer (f, op, TRUE, reply, chan);
  agent_test_wait_result (&res);
  d = box_agent_client_fs_download_finish (f->client, res, &error);
  g_assert_no_error (error);
  g_assert_true (G_IS_POLLABLE_INPUT_STREAM (d));
  g_assert_cmpint (box_file_download_get_op (d), ==, request->op);
  return d;
}

/* Reads @d to its end (TRUE, the bytes in @out) or to an error. */
static gboolean
read_all (BoxFileDownload *d, GByteArray *out, GError **error)
{
  for (;;) {
    g_autoptr(GAsyncResult) res = NULL;
    g_autoptr(GBytes) bytes = NULL;

    g_input_stream_read_bytes_async (G_INPUT_STREAM (d), 3, G_PRIORITY_DEFAULT, NULL,
                                     agent_test_store_result, &res);
    agent_test_wait_result (&res);
    bytes = g_input_stream_read_bytes_finish (G_INPUT_STREAM (d), res, error);
    if (bytes == NULL)
      return FALSE;
    if (g_bytes_get_size (bytes) == 0)
      return TRUE;
    g_byte_array_append (out, g_bytes_get_data (bytes, NULL), (guint) g_bytes_get_size (bytes));
  }
}

static void
test_read (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_READ, .path = "/f", .mode = -1 };
  gint64 chan = 0;
  g_autoptr(BoxFileDownload) d =
    open_download (f, &request, "fs-read", "\"stat\":" STAT_JSON ("/f", "f") ",\"length\":5", &chan);
  g_autoptr(GByteArray) out = g_byte_array_new ();
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (box_file_download_get_length (d), ==, 5);
  g_assert_cmpstr (box_file_download_get_info (d)->name, ==, "f");
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 2, (guint32) chan, "noise", 5);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, "hel", 3);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, "lo", 2);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_EOF, 1, (guint32) chan, NULL, 0);
  g_assert_true (read_all (d, out, &error));
  g_assert_no_error (error);
  /* stream 2 is not output */
  g_assert_cmpmem (out->data, out->len, "hello", 5);
  /* closing it ends the agent's work */
  g_assert_true (g_input_stream_close (G_INPUT_STREAM (d), NULL, &error));
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
}

/* A download whose output ends wrong: every read after fails with @code. */
static void
check_download_fails (Fake *f, BoxFileOp op, const char *agent_op, const char *reply,
                      const char *const *frames, GQuark domain, gint code, const char *message)
{
  BoxFileRequest request = { .op = op, .path = "/d", .mode = -1 };
  gint64 chan = 0;
  g_autoptr(BoxFileDownload) d = open_download (f, &request, agent_op, reply, &chan);
  g_autoptr(GByteArray) out = g_byte_array_new ();
  g_autoptr(GError) error = NULL;

  for (guint i = 0; frames[i] != NULL; i++) {
    if (g_str_equal (frames[i], "EOF"))
      fake_agent_send (f->fake, BOX_AGENT_FRAME_EOF, 1, (guint32) chan, NULL, 0);
    else if (g_str_equal (frames[i], "CLOSE"))
      fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
    else if (frames[i][0] == '{')
      fake_agent_send_json (f->fake, (guint32) chan, frames[i]);
    else
      fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, frames[i], strlen (frames[i]));
  }
  g_assert_false (read_all (d, out, &error));
  g_assert_error (error, domain, code);
  if (message != NULL)
    g_assert_cmpstr (error->message, ==, message);
  /* and it stays failed: never an end that looks complete */
  g_clear_error (&error);
  g_assert_false (read_all (d, out, &error));
  g_assert_error (error, domain, code);
}

static void
test_read_error (Fake *f, gconstpointer data)
{
  const char *const error_event[] = {
    "part", "{\"event\":\"error\",\"error\":{\"code\":\"conflict\",\"message\":\"the file shrank\"}}",
    "CLOSE", NULL
  };
  const char *const no_eof[] = { "part", "CLOSE", NULL };
  const char *const short_read[] = { "hel", "EOF", "CLOSE", NULL };
  const char *const long_read[] = { "hello", "!", "EOF", NULL };
  const char *length5 = "\"stat\":" STAT_JSON ("/d", "d") ",\"length\":5";

  check_download_fails (f, BOX_FILE_OP_TAR_GET, "fs-tar-get", "", error_event, BOX_ERROR,
                        BOX_ERROR_CONFLICT, "the file shrank");
  check_download_fails (f, BOX_FILE_OP_TAR_GET, "fs-tar-get", "", no_eof, BOX_ERROR,
                        BOX_ERROR_SANDBOX_UNAVAILABLE, NULL);
  check_download_fails (f, BOX_FILE_OP_READ, "fs-read", length5, short_read, BOX_ERROR,
                        BOX_ERROR_INTERNAL, "the agent sent 3 of the 5 bytes it announced");
  check_download_fails (f, BOX_FILE_OP_READ, "fs-read", length5, long_read, BOX_ERROR,
                        BOX_ERROR_INTERNAL, "the agent sent more than the 5 bytes it announced");
}

static void
test_read_abort (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_TAR_GET, .path = "/d", .mode = -1 };
  gint64 chan = 0;
  g_autoptr(BoxFileDownload) d = open_download (f, &request, "fs-tar-get", "", &chan);
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  gboolean got_close = FALSE;

  /* a read waiting for output fails once the download is stopped, and the
   * agent is told to stop */
  g_input_stream_read_bytes_async (G_INPUT_STREAM (d), 10, G_PRIORITY_DEFAULT, NULL,
                                   agent_test_store_result, &res);
  agent_test_spin (20);
  g_assert_null (res);
  box_file_download_abort (d);
  agent_test_wait_result (&res);
  bytes = g_input_stream_read_bytes_finish (G_INPUT_STREAM (d), res, &error);
  g_assert_null (bytes);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  while (!got_close) {
    BoxAgentFrameHeader h;
    g_autoptr(GBytes) p = NULL;

    fake_agent_read (f->fake, &h, &p);
    got_close = h.type == BOX_AGENT_FRAME_CLOSE && h.channel == (guint32) chan;
  }
}

static GPtrArray *
list_all (BoxFileDownload *d, GError **error)
{
  g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func ((GDestroyNotify) box_file_info_free);

  for (;;) {
    g_autoptr(GAsyncResult) res = NULL;
    g_autoptr(GPtrArray) infos = NULL;

    box_file_download_next_entries_async (d, NULL, agent_test_store_result, &res);
    agent_test_wait_result (&res);
    infos = box_file_download_next_entries_finish (d, res, error);
    if (infos == NULL)
      return NULL;
    if (infos->len == 0)
      return g_steal_pointer (&all);
    for (guint i = 0; i < infos->len; i++)
      g_ptr_array_add (all, box_file_info_copy (infos->pdata[i]));
  }
}

static void
test_list (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_LIST, .path = "/d", .mode = -1 };
  gint64 chan = 0;
  g_autoptr(BoxFileDownload) d = open_download (f, &request, "fs-list", "", &chan);
  const char *part1 = STAT_JSON ("/d/a", "a") "\n{\"path\":\"/d/b\",";
  const char *part2 = "\"name\":\"b\",\"type\":\"dir\",\"size\":0,\"mode\":\"0755\",\"mtime\":\"m\"}\n";
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(GError) error = NULL;

  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, part1, strlen (part1));
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, part2, strlen (part2));
  fake_agent_send (f->fake, BOX_AGENT_FRAME_EOF, 1, (guint32) chan, NULL, 0);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  entries = list_all (d, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (entries->len, ==, 2);
  g_assert_cmpstr (((BoxFileInfo *) entries->pdata[0])->name, ==, "a");
  g_assert_cmpstr (((BoxFileInfo *) entries->pdata[1])->type, ==, "dir");
}

static void
test_list_unfinished (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_LIST, .path = "/d", .mode = -1 };
  gint64 chan = 0;
  g_autoptr(BoxFileDownload) d = open_download (f, &request, "fs-list", "", &chan);
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(GError) error = NULL;

  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, "{\"path\"", 7);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_EOF, 1, (guint32) chan, NULL, 0);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  /* an output that ends mid-line is not complete */
  entries = list_all (d, &error);
  g_assert_null (entries);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_assert_cmpstr (error->message, ==, "the last fs-list line has no end");
}

static BoxFileUpload *
open_upload (Fake *f, const BoxFileRequest *request, const char *op, gint64 *chan,
             JsonObject **req_out)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GError) error = NULL;
  JsonObject *req;
  BoxFileUpload *u;

  box_agent_client_fs_open_async (f->client, request, NULL, agent_test_store_result, &res);
  req = answer (f, op, TRUE, "", chan);
  if (req_out != NULL)
    *req_out = req;
  else
    json_object_unref (req);
  agent_test_wait_result (&res);
  u = box_agent_client_fs_upload_finish (f->client, res, &error);
  g_assert_no_error (error);
  g_assert_true (G_IS_POLLABLE_OUTPUT_STREAM (u));
  g_assert_cmpint (box_file_upload_get_op (u), ==, request->op);
  return u;
}

static gboolean
write_all (BoxFileUpload *u, const char *text, GError **error)
{
  g_autoptr(GAsyncResult) res = NULL;

  g_output_stream_write_all_async (G_OUTPUT_STREAM (u), text, strlen (text), G_PRIORITY_DEFAULT,
                                   NULL, agent_test_store_result, &res);
  agent_test_wait_result (&res);
  return g_output_stream_write_all_finish (G_OUTPUT_STREAM (u), res, NULL, error);
}

/* What the agent gets on @chan up to its CLOSE or EOF on stream 0:
 * the data, "+EOF" for an EOF. */
static char *
agent_receives (Fake *f, gint64 chan)
{
  GString *got = g_string_new (NULL);

  for (;;) {
    BoxAgentFrameHeader h;
    g_autoptr(GBytes) p = NULL;

    fake_agent_read (f->fake, &h, &p);
    if (h.channel != (guint32) chan)
      continue;
    if (h.type == BOX_AGENT_FRAME_DATA) {
      g_assert_cmpuint (h.stream, ==, 0);
      g_string_append_len (got, g_bytes_get_data (p, NULL), h.length);
    } else if (h.type == BOX_AGENT_FRAME_EOF) {
      g_assert_cmpuint (h.stream, ==, 0);
      g_string_append (got, "+EOF");
      break;
    } else if (h.type == BOX_AGENT_FRAME_CLOSE) {
      break;
    }
  }
  return g_string_free (got, FALSE);
}

static void
test_write (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_WRITE, .path = "/f", .user = "box", .mkdir = TRUE,
                             .mode = 0600 };
  gint64 chan = 0;
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(JsonObject) req = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxFileUpload) u = open_upload (f, &request, "fs-write", &chan, &req);
  g_autofree char *got = NULL;

  g_assert_cmpstr (box_agent_json_get_string (req, "mode"), ==, "0600");
  g_assert_true (json_object_get_boolean_member (req, "mkdir"));
  g_assert_true (write_all (u, "da", &error));
  g_assert_true (write_all (u, "ta", &error));
  g_output_stream_close_async (G_OUTPUT_STREAM (u), G_PRIORITY_DEFAULT, NULL,
                               agent_test_store_result, &res);
  /* the agent sees the data on stream 0, then EOF */
  got = agent_receives (f, chan);
  g_assert_cmpstr (got, ==, "data+EOF");
  /* the close waits for the agent's result */
  agent_test_spin (20);
  g_assert_null (res);
  g_assert_null (box_file_upload_get_info (u));
  fake_agent_send_json (f->fake, (guint32) chan, "{\"event\":\"done\",\"stat\":" STAT_JSON ("/f", "f") "}");
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  agent_test_wait_result (&res);
  g_assert_true (g_output_stream_close_finish (G_OUTPUT_STREAM (u), res, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (box_file_upload_get_info (u)->path, ==, "/f");
}

static void
test_upload_error (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_TAR_PUT, .path = "/d", .mode = -1 };
  gint64 chan = 0;
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxFileUpload) u = open_upload (f, &request, "fs-tar-put", &chan, NULL);

  /* the agent refuses the archive midway: writes fail with its error, and
   * so does the close */
  g_assert_true (write_all (u, "tar", &error));
  fake_agent_send_json (f->fake, (guint32) chan,
                        "{\"event\":\"error\",\"error\":{\"code\":\"invalid\",\"message\":\"bad member\"}}");
  agent_test_spin (20);
  g_assert_false (write_all (u, "more", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  g_output_stream_close_async (G_OUTPUT_STREAM (u), G_PRIORITY_DEFAULT, NULL,
                               agent_test_store_result, &res);
  agent_test_wait_result (&res);
  g_assert_false (g_output_stream_close_finish (G_OUTPUT_STREAM (u), res, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_cmpstr (error->message, ==, "bad member");
}

static void
test_upload_no_result (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_TAR_PUT, .path = "/d", .mode = -1 };
  gint64 chan = 0;
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxFileUpload) u = open_upload (f, &request, "fs-tar-put", &chan, NULL);

  g_output_stream_close_async (G_OUTPUT_STREAM (u), G_PRIORITY_DEFAULT, NULL,
                               agent_test_store_result, &res);
  /* output on an upload is not a result; a close without one fails */
  fake_agent_send (f->fake, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, "x", 1);
  fake_agent_send (f->fake, BOX_AGENT_FRAME_CLOSE, 0, (guint32) chan, NULL, 0);
  agent_test_wait_result (&res);
  g_assert_false (g_output_stream_close_finish (G_OUTPUT_STREAM (u), res, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE);
}

static void
test_upload_abandoned (Fake *f, gconstpointer data)
{
  BoxFileRequest request = { .op = BOX_FILE_OP_WRITE, .path = "/f", .mode = -1 };
  gint64 chan = 0;
  g_autoptr(GError) error = NULL;
  g_autofree char *got = NULL;
  BoxFileUpload *u = open_upload (f, &request, "fs-write", &chan, NULL);

  /* an upload dropped without its close is abandoned: the agent gets the
   * bytes and then CLOSE, never EOF (which would commit the file) */
  g_assert_true (write_all (u, "half", &error));
  g_object_unref (u);
  got = agent_receives (f, chan);
  g_assert_cmpstr (got, ==, "half");
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
  g_test_add ("/agent-files/read-abort", Fake, NULL, fake_setup, test_read_abort, fake_teardown);
  g_test_add ("/agent-files/list", Fake, NULL, fake_setup, test_list, fake_teardown);
  g_test_add ("/agent-files/list-unfinished", Fake, NULL, fake_setup, test_list_unfinished, fake_teardown);
  g_test_add ("/agent-files/write", Fake, NULL, fake_setup, test_write, fake_teardown);
  g_test_add ("/agent-files/upload-error", Fake, NULL, fake_setup, test_upload_error, fake_teardown);
  g_test_add ("/agent-files/upload-no-result", Fake, NULL, fake_setup, test_upload_no_result, fake_teardown);
  g_test_add ("/agent-files/upload-abandoned", Fake, NULL, fake_setup, test_upload_abandoned, fake_teardown);
  g_test_add ("/agent-files/watch", Fake, NULL, fake_setup, test_watch, fake_teardown);
  return g_test_run ();
}
