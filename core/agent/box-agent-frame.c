/* box-agent-frame.c: the guest agent's wire format, host side.  Pure code. */
#include "config.h"

#include <string.h>

#include "box-agent-frame.h"
#include "box-error.h"

guint32
box_agent_fnv1a32 (const guint8 *data, gsize len)
{
  guint32 h = 2166136261u;
  gsize i;

  for (i = 0; i < len; i++) {
    h ^= data[i];
    h *= 16777619u;
  }
  return h;
}

static void
put_u16 (guint8 *p, guint16 v)
{
  p[0] = (guint8) (v & 0xff);
  p[1] = (guint8) (v >> 8);
}

static void
put_u32 (guint8 *p, guint32 v)
{
  p[0] = (guint8) (v & 0xff);
  p[1] = (guint8) ((v >> 8) & 0xff);
  p[2] = (guint8) ((v >> 16) & 0xff);
  p[3] = (guint8) (v >> 24);
}

static guint32
get_u32 (const guint8 *p)
{
  return (guint32) p[0] | ((guint32) p[1] << 8) | ((guint32) p[2] << 16) | ((guint32) p[3] << 24);
}

void
box_agent_frame_encode_header (const BoxAgentFrameHeader *header, guint8 out[BOX_AGENT_HEADER_SIZE])
{
  put_u16 (out, BOX_AGENT_FRAME_MAGIC);
  out[2] = header->type;
  out[3] = header->stream;
  put_u32 (out + 4, header->channel);
  put_u32 (out + 8, header->length);
  put_u32 (out + 12, box_agent_fnv1a32 (out, 12));
}

int
box_agent_frame_decode_header (const guint8 *buf, gsize len, BoxAgentFrameHeader *header)
{
  guint32 length;

  /* a truncated header that cannot become valid is refused at once */
  if (len >= 1 && buf[0] != (BOX_AGENT_FRAME_MAGIC & 0xff))
    return -1;
  if (len >= 2 && buf[1] != (BOX_AGENT_FRAME_MAGIC >> 8))
    return -1;
  if (len < BOX_AGENT_HEADER_SIZE)
    return 0;
  length = get_u32 (buf + 8);
  if (buf[2] < BOX_AGENT_FRAME_CTRL || buf[2] > BOX_AGENT_FRAME_CLOSE ||
      length > BOX_AGENT_MAX_PAYLOAD ||
      get_u32 (buf + 12) != box_agent_fnv1a32 (buf, 12))
    return -1;
  header->type = buf[2];
  header->stream = buf[3];
  header->channel = get_u32 (buf + 4);
  header->length = length;
  return 1;
}

GBytes *
box_agent_frame_build (BoxAgentFrameType type, guint8 stream, guint32 channel,
                       const void *payload, gsize len)
{
  BoxAgentFrameHeader header = { .type = type, .stream = stream, .channel = channel, .length = (guint32) len };
  guint8 *buf;

  g_return_val_if_fail (len <= BOX_AGENT_MAX_PAYLOAD, NULL);
  buf = g_malloc (BOX_AGENT_HEADER_SIZE + len);
  box_agent_frame_encode_header (&header, buf);
  if (len > 0)
    memcpy (buf + BOX_AGENT_HEADER_SIZE, payload, len);
  return g_bytes_new_take (buf, BOX_AGENT_HEADER_SIZE + len);
}

GBytes *
box_agent_frame_build_credit (guint32 channel, guint8 stream, guint32 credit)
{
  guint8 p[4];

  put_u32 (p, credit);
  return box_agent_frame_build (BOX_AGENT_FRAME_CREDIT, stream, channel, p, sizeof p);
}

GBytes *
box_agent_frame_build_ctrl (guint32 channel, JsonObject *object)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autofree char *text = NULL;
  gsize len = 0;

  json_node_set_object (node, object);
  json_generator_set_root (gen, node);
  text = json_generator_to_data (gen, &len);
  return box_agent_frame_build (BOX_AGENT_FRAME_CTRL, 0, channel, text, len);
}

/* ---- decoder ------------------------------------------------------------ */

struct _BoxAgentDecoder {
  GByteArray *buf;
  gsize off;            /* start of the unparsed bytes in buf */
  guint64 skipped;
};

BoxAgentDecoder *
box_agent_decoder_new (void)
{
  BoxAgentDecoder *self = g_new0 (BoxAgentDecoder, 1);

  self->buf = g_byte_array_new ();
  return self;
}

void
box_agent_decoder_free (BoxAgentDecoder *self)
{
  if (self == NULL)
    return;
  g_byte_array_unref (self->buf);
  g_free (self);
}

void
box_agent_decoder_feed (BoxAgentDecoder *self, const guint8 *data, gsize len)
{
  /* drop what was parsed before growing, so the buffer stays about one
   * frame plus one read */
  if (self->off > 0 && (self->off == self->buf->len || self->off >= 65536)) {
    g_byte_array_remove_range (self->buf, 0, (guint) self->off);
    self->off = 0;
  }
  g_byte_array_append (self->buf, data, (guint) len);
}

gboolean
box_agent_decoder_next (BoxAgentDecoder *self, BoxAgentFrameHeader *header, GBytes **payload)
{
  while (self->off < self->buf->len) {
    const guint8 *p = self->buf->data + self->off;
    gsize avail = self->buf->len - self->off;
    const guint8 *next;
    int r = box_agent_frame_decode_header (p, avail, header);

    if (r == 0)
      return FALSE;
    if (r > 0) {
      if (avail < BOX_AGENT_HEADER_SIZE + (gsize) header->length)
        return FALSE;
      *payload = g_bytes_new (p + BOX_AGENT_HEADER_SIZE, header->length);
      self->off += BOX_AGENT_HEADER_SIZE + header->length;
      return TRUE;
    }
    /* not a header here: skip one byte, then on to the next byte that
     * could start the magic */
    next = memchr (p + 1, BOX_AGENT_FRAME_MAGIC & 0xff, avail - 1);
    if (next == NULL) {
      self->skipped += avail;
      self->off = self->buf->len;
    } else {
      self->skipped += (guint64) (next - p);
      self->off += (gsize) (next - p);
    }
  }
  return FALSE;
}

guint64
box_agent_decoder_get_skipped (BoxAgentDecoder *self)
{
  return self->skipped;
}

gsize
box_agent_decoder_get_buffered (BoxAgentDecoder *self)
{
  return self->buf->len - self->off;
}

/* ---- control messages ---------------------------------------------------- */

/* Deepest nesting of arrays and objects outside strings; json-glib's
 * parser recurses, so deep input is refused before it gets there. */
static gboolean
depth_ok (const guint8 *p, gsize len)
{
  gboolean in_string = FALSE;
  guint depth = 0;
  gsize i;

  for (i = 0; i < len; i++) {
    guint8 c = p[i];

    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = FALSE;
    } else if (c == '"') {
      in_string = TRUE;
    } else if (c == '{' || c == '[') {
      if (++depth > BOX_AGENT_JSON_MAX_DEPTH)
        return FALSE;
    } else if ((c == '}' || c == ']') && depth > 0) {
      depth--;
    }
  }
  return TRUE;
}

JsonNode *
box_agent_json_parse (const char *data, gsize len, gsize max_len, GError **error)
{
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GError) local_error = NULL;
  JsonNode *root;

  if (len > max_len) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "agent JSON is too long (%" G_GSIZE_FORMAT " bytes, at most %" G_GSIZE_FORMAT ")",
                 len, max_len);
    return NULL;
  }
  if (len == 0 || !g_utf8_validate_len (data, len, NULL) || memchr (data, 0, len) != NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "agent JSON is not valid UTF-8 text");
    return NULL;
  }
  if (!depth_ok ((const guint8 *) data, len)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "agent JSON is nested too deeply");
    return NULL;
  }
  parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, data, (gssize) len, &local_error)) {
    g_autofree char *why = box_agent_text_for_log (local_error->message, 200);

    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "agent JSON does not parse: %s", why);
    return NULL;
  }
  root = json_parser_steal_root (parser);
  if (root == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "agent JSON is empty");
    return NULL;
  }
  return root;
}

JsonObject *
box_agent_json_parse_object (const char *data, gsize len, gsize max_len, GError **error)
{
  g_autoptr(JsonNode) root = box_agent_json_parse (data, len, max_len, error);

  if (root == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "agent JSON is not an object");
    return NULL;
  }
  return json_node_dup_object (root);
}

JsonObject *
box_agent_parse_ctrl (const guint8 *payload, gsize len, GError **error)
{
  return box_agent_json_parse_object ((const char *) payload, len, BOX_AGENT_MAX_PAYLOAD, error);
}

char *
box_agent_text_for_log (const char *text, gsize max)
{
  GString *out = g_string_new (NULL);
  const char *p = text != NULL ? text : "";
  const char *end = p + strlen (p);

  while (p < end) {
    gunichar c = g_utf8_get_char_validated (p, end - p);
    gsize n;

    if (out->len >= max) {
      g_string_append (out, "...");
      break;
    }
    if (c == (gunichar) -1 || c == (gunichar) -2) {
      g_string_append_printf (out, "\\x%02x", (guint8) *p);
      p++;
      continue;
    }
    n = (gsize) (g_utf8_next_char (p) - p);
    if (c == '\\' || c == '"')
      g_string_append_printf (out, "\\%c", (char) c);
    else if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == 0x2028 || c == 0x2029)
      g_string_append_printf (out, "\\u%04x", c);
    else
      g_string_append_len (out, p, (gssize) n);
    p += n;
  }
  return g_string_free (out, FALSE);
}

static JsonNode *
get_value (JsonObject *object, const char *name, GType type)
{
  JsonNode *node;

  if (object == NULL)
    return NULL;
  node = json_object_get_member (object, name);
  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != type)
    return NULL;
  return node;
}

gboolean
box_agent_json_get_int (JsonObject *object, const char *name, gint64 *out)
{
  JsonNode *node = get_value (object, name, G_TYPE_INT64);

  if (node == NULL)
    return FALSE;
  *out = json_node_get_int (node);
  return TRUE;
}

const char *
box_agent_json_get_string (JsonObject *object, const char *name)
{
  JsonNode *node = get_value (object, name, G_TYPE_STRING);

  return node != NULL ? json_node_get_string (node) : NULL;
}

gboolean
box_agent_json_get_bool (JsonObject *object, const char *name, gboolean fallback)
{
  JsonNode *node = get_value (object, name, G_TYPE_BOOLEAN);

  return node != NULL ? json_node_get_boolean (node) : fallback;
}
