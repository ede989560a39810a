/* hostile-agent.c: a guest agent that misbehaves on purpose, for
 * tests/hostile/hostile-test.c.
 *
 *   hostile-agent FD MODE
 *
 * Speaks the real protocol on the inherited socket FD (frames from core/agent's
 * encoder): it answers hello as the agent does (so that the host side takes it
 * for a connected agent), then, from the host's first request on, attacks
 * according to MODE until the host side closes the connection:
 *
 *   good      a well-behaved agent: every request gets {"ok": true}; an
 *             `exec` opens its channel and stays quiet
 *   nest      every reply and event carries a nesting bomb (500k '[' in a
 *             1 MiB frame, and a 20k-deep value under 64 KiB), on channel 0
 *             and on the channels it opened, plus DATA lines of bombs
 *   flood     control frames without end: events on channel 0, CTRL, EOF and
 *             CREDIT frames on the channel of every open it never answers
 *   parse     control events as costly to parse as the cap allows (64 KB of
 *             a flat array of numbers) without end, never answering; its
 *             socket's send buffer is 4 MiB, so that the host finds up to
 *             its whole read turn (1 MiB) waiting at every read
 *   credit    answers an open, gives no credit beyond the window for a while,
 *             then a credit of 4 GiB, and stops reading the socket
 *   window    its hello reply asks for a 64 MiB window; every open's channel
 *             gets 64 MiB of DATA at once
 *   channels  opens thousands of channels (accept), 1 MiB of DATA on each
 *   silent    reads everything and never answers anything
 *   garbage   random bytes, half frames and valid frames for other channels
 *             before each (correct) reply
 *   stray     replies to requests never made, frames for channels it never
 *             got (DATA, EOF, CREDIT, CLOSE, CTRL), accept for host ids,
 *             then the correct reply
 *
 * Exits when the host closes the connection (or after 10 minutes).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "box-agent-frame.h"

#define MiB (1024u * 1024u)

typedef struct {
  int fd;
  const char *mode;
  BoxAgentDecoder *decoder;
  gboolean synced;
  gboolean armed;               /* the host asked something after hello: attack */
  gboolean stop_reading;
  guint32 next_chan;
  GArray *opened;               /* guint32: channels the host opened (answered or not) */
  GRand *rand;
} Hostile;

static gboolean
is_mode (Hostile *h, const char *mode)
{
  return g_str_equal (h->mode, mode);
}

/* Everything is written whole or the host went away (then we are done). */
static void
write_all (Hostile *h, const void *data, gsize len)
{
  const guint8 *p = data;

  while (len > 0) {
    ssize_t w = write (h->fd, p, len);

    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      exit (0);
    p += w;
    len -= (gsize) w;
  }
}

static void
send_frame (Hostile *h, BoxAgentFrameType type, guint8 stream, guint32 channel,
            const void *payload, gsize len)
{
  g_autoptr(GBytes) frame = box_agent_frame_build (type, stream, channel, payload, len);

  write_all (h, g_bytes_get_data (frame, NULL), g_bytes_get_size (frame));
}

static void
send_text (Hostile *h, guint32 channel, const char *text)
{
  send_frame (h, BOX_AGENT_FRAME_CTRL, 0, channel, text, strlen (text));
}

/* {"id": ID, "ok": true, MEMBER: [[[[...]]]]} of about @size bytes, @depth deep */
static GString *
bomb (gint64 id, const char *member, gsize depth, gsize size)
{
  GString *s = g_string_new (NULL);

  g_string_printf (s, "{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"event\":\"x\",\"%s\":", id, member);
  for (gsize i = 0; i < depth && s->len < size - 2; i++)
    g_string_append_c (s, '[');
  while (s->len < size - 1)
    g_string_append_c (s, ']');
  g_string_append_c (s, '}');
  return s;
}

static void
send_bombs (Hostile *h, guint32 channel, gint64 id)
{
  g_autoptr(GString) big = bomb (id, "sessions", 1000000, MiB - 64);
  g_autoptr(GString) small = bomb (id, "ports", 20000, 60000);

  send_frame (h, BOX_AGENT_FRAME_CTRL, 0, channel, big->str, big->len);
  send_frame (h, BOX_AGENT_FRAME_CTRL, 0, channel, small->str, small->len);
}

static void
random_bytes (Hostile *h, gsize len)
{
  g_autofree guint8 *buf = g_malloc (len);

  for (gsize i = 0; i < len; i++)
    buf[i] = (guint8) g_rand_int_range (h->rand, 0, 256);
  /* the magic now and then, so that the decoder has to look */
  for (gsize i = 0; i + 2 < len; i += 97) {
    buf[i] = 0xc5;
    buf[i + 1] = 0xb0;
  }
  write_all (h, buf, len);
}

static void
reply_ok (Hostile *h, gint64 id, guint32 chan)
{
  g_autofree char *text = chan != 0 ?
    g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"chan\":%u,\"pid\":42}", id, chan) :
    g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"sessions\":[],\"ports\":[]}", id);

  send_text (h, 0, text);
}

static void
handle_hello (Hostile *h, JsonObject *msg, gint64 id)
{
  g_autofree char *text = NULL;
  gint64 window = BOX_AGENT_DEFAULT_WINDOW;

  box_agent_json_get_int (msg, "window", &window);
  if (is_mode (h, "window"))
    window = 64 * MiB;
  text = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true,\"version\":%d,"
                          "\"agent\":\"hostile\",\"boot_id\":\"b\",\"uptime_ms\":1,"
                          "\"window\":%" G_GINT64_FORMAT ",\"nonce\":\"%s\"}",
                          id, BOX_AGENT_PROTOCOL_VERSION, window,
                          box_agent_json_get_string (msg, "nonce"));
  send_text (h, 0, text);
  h->synced = TRUE;
}

static void
handle_request (Hostile *h, JsonObject *msg)
{
  const char *op = box_agent_json_get_string (msg, "op");
  gint64 id = 0, chan = 0;

  if (op == NULL || !box_agent_json_get_int (msg, "id", &id))
    return;
  if (g_str_equal (op, "hello")) {
    handle_hello (h, msg, id);
    return;
  }
  h->armed = TRUE;
  box_agent_json_get_int (msg, "chan", &chan);
  if (chan > 0) {
    guint32 c = (guint32) chan;

    g_array_append_val (h->opened, c);
  }
  if (is_mode (h, "silent") || is_mode (h, "flood") || is_mode (h, "parse"))
    return;
  if (is_mode (h, "nest")) {
    send_bombs (h, 0, id);
    if (chan > 0)
      send_bombs (h, (guint32) chan, id);
    return;
  }
  if (is_mode (h, "garbage")) {
    g_autoptr(GBytes) half = box_agent_frame_build (BOX_AGENT_FRAME_DATA, 1, 77, "xxxxxxxx", 8);

    random_bytes (h, 65536);
    write_all (h, g_bytes_get_data (half, NULL), 10);
    send_frame (h, BOX_AGENT_FRAME_DATA, 1, 12345, "out", 3);
    random_bytes (h, 4096);
    /* a header that promises a frame never sent completes with the reply:
     * the next request's reply resynchronises */
  }
  if (is_mode (h, "stray")) {
    g_autofree char *other = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true}", id + 1000);
    g_autofree char *refusal = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":false,"
                                                "\"error\":{\"code\":\"\\u001b[31mevil\","
                                                "\"message\":\"%s\"}}", id + 2000,
                                                "line\\nbreak\\u0000\\u0007");
    guint8 credit[4] = { 0xff, 0xff, 0xff, 0xff };

    send_text (h, 0, other);
    send_text (h, 0, refusal);
    send_text (h, 0, "{\"event\":\"accept\",\"chan\":5}");
    send_text (h, 0, "{\"event\":\"accept\",\"chan\":\"x\"}");
    for (guint32 c = 100; c < 110; c++) {
      send_frame (h, BOX_AGENT_FRAME_DATA, 1, c, "stray", 5);
      send_frame (h, BOX_AGENT_FRAME_EOF, 1, c, NULL, 0);
      send_frame (h, BOX_AGENT_FRAME_CREDIT, 0, c, credit, 4);
      send_text (h, c, "{\"event\":\"exit\",\"code\":1}");
      send_frame (h, BOX_AGENT_FRAME_CLOSE, 0, c, NULL, 0);
    }
    /* the reply to a channel it never got */
    send_text (h, 0, "{\"id\":99999999,\"ok\":true,\"chan\":777}");
  }
  reply_ok (h, id, (guint32) chan);
  if (chan > 0 && is_mode (h, "window")) {
    static guint8 chunk[BOX_AGENT_DATA_CHUNK];

    for (guint i = 0; i < 64 * MiB / sizeof chunk; i++)
      send_frame (h, BOX_AGENT_FRAME_DATA, 1, (guint32) chan, chunk, sizeof chunk);
  }
  if (chan > 0 && is_mode (h, "credit")) {
    guint8 credit[4] = { 0xff, 0xff, 0xff, 0xff };

    /* after a while the host's writes are stuck on credit; then it gets
     * all the credit it wants from an agent that reads nothing more */
    g_usleep (300 * 1000);
    send_frame (h, BOX_AGENT_FRAME_CREDIT, 0, (guint32) chan, credit, sizeof credit);
    h->stop_reading = TRUE;
  }
}

/* What the attack writes while nobody asks. */
static void
attack_step (Hostile *h)
{
  if (!h->armed)
    return;
  if (is_mode (h, "flood")) {
    static char big[60000];

    if (big[0] == '\0') {
      memset (big, ' ', sizeof big);
      memcpy (big, "{\"event\":\"flood\",\"x\":\"", 22);
      memcpy (big + sizeof big - 2, "\"}", 2);
    }
    send_frame (h, BOX_AGENT_FRAME_CTRL, 0, 0, big, sizeof big);
    send_text (h, 0, "{\"event\":\"flood\"}");
    for (guint i = 0; i < h->opened->len; i++) {
      guint32 c = g_array_index (h->opened, guint32, i);
      guint8 credit[4] = { 1, 0, 0, 0 };

      send_frame (h, BOX_AGENT_FRAME_CTRL, 0, c, big, sizeof big);
      send_frame (h, BOX_AGENT_FRAME_EOF, 1, c, NULL, 0);
      send_frame (h, BOX_AGENT_FRAME_CREDIT, 0, c, credit, sizeof credit);
    }
  } else if (is_mode (h, "parse")) {
    static GString *costly;

    if (costly == NULL) {
      costly = g_string_new ("{\"event\":\"flood\",\"x\":[0");
      while (costly->len < BOX_AGENT_CTRL_MAX - 8)
        g_string_append (costly, ",0");
      g_string_append (costly, "]}");
    }
    send_frame (h, BOX_AGENT_FRAME_CTRL, 0, 0, costly->str, costly->len);
  } else if (is_mode (h, "nest")) {
    send_bombs (h, 0, 0);
    for (guint i = 0; i < h->opened->len; i++) {
      g_autoptr(GString) line = bomb (0, "name", 40000, 60000);

      g_string_append_c (line, '\n');
      send_frame (h, BOX_AGENT_FRAME_DATA, 1, g_array_index (h->opened, guint32, i), line->str,
                  MIN (line->len, BOX_AGENT_DATA_CHUNK));
    }
  } else if (is_mode (h, "channels")) {
    static guint8 chunk[BOX_AGENT_DATA_CHUNK];
    g_autofree char *accept = NULL;
    guint32 chan = BOX_AGENT_FIRST_AGENT_CHANNEL + h->next_chan++;

    if (h->next_chan > 5000)
      return;
    accept = g_strdup_printf ("{\"event\":\"accept\",\"chan\":%u}", chan);
    send_text (h, 0, accept);
    for (guint i = 0; i < BOX_AGENT_DEFAULT_WINDOW / sizeof chunk; i++)
      send_frame (h, BOX_AGENT_FRAME_DATA, 1, chan, chunk, sizeof chunk);
  }
}

static void
read_some (Hostile *h)
{
  guint8 buf[65536];
  ssize_t n = read (h->fd, buf, sizeof buf);
  BoxAgentFrameHeader header;
  GBytes *payload = NULL;

  if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
    exit (0);
  if (n < 0)
    return;
  box_agent_decoder_feed (h->decoder, buf, (gsize) n);
  while (box_agent_decoder_next (h->decoder, &header, &payload)) {
    if (header.channel == 0 && header.type == BOX_AGENT_FRAME_CTRL) {
      g_autoptr(JsonObject) msg = box_agent_parse_ctrl (g_bytes_get_data (payload, NULL),
                                                        g_bytes_get_size (payload), NULL);

      if (msg != NULL)
        handle_request (h, msg);
    }
    g_bytes_unref (payload);
  }
}

int
main (int argc, char **argv)
{
  Hostile h = { 0 };
  gint64 deadline = g_get_monotonic_time () + 600 * G_USEC_PER_SEC;

  if (argc != 3) {
    g_printerr ("usage: hostile-agent FD MODE\n");
    return 2;
  }
  signal (SIGPIPE, SIG_IGN);
  h.fd = atoi (argv[1]);
  h.mode = argv[2];
  h.decoder = box_agent_decoder_new ();
  h.opened = g_array_new (FALSE, FALSE, sizeof (guint32));
  h.rand = g_rand_new_with_seed (12);
  if (is_mode (&h, "parse")) {
    int size = 4 * MiB;

    /* FORCE goes past wmem_max (as root) */
    if (setsockopt (h.fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) != 0)
      setsockopt (h.fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  }
  while (g_get_monotonic_time () < deadline) {
    struct pollfd p = { .fd = h.fd, .events = h.stop_reading ? 0 : POLLIN };
    gboolean attacking = h.armed && (is_mode (&h, "flood") || is_mode (&h, "parse") ||
                                      is_mode (&h, "nest") || is_mode (&h, "channels"));
    int r = poll (&p, 1, attacking ? 0 : 100);

    if (r < 0 && errno != EINTR)
      return 1;
    if (p.revents & (POLLIN | POLLHUP | POLLERR))
      read_some (&h);
    attack_step (&h);
  }
  return 0;
}
