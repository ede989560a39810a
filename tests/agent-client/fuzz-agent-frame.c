/* fuzz-agent-frame.c: arbitrary bytes from a guest through the frame
 * decoder (split at input-chosen places) and the control message parser.
 * Must never crash, leak or trip a critical; every frame it yields must
 * re-encode to the header it came from. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "box-agent-frame.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(BoxAgentDecoder) dec = box_agent_decoder_new ();
  gsize off = 0, step;
  guint64 taken = 0;

  if (size == 0)
    return 0;
  /* the first byte picks how the stream is cut into reads */
  step = (gsize) data[0] + 1;
  data++;
  size--;
  while (off < size) {
    gsize n = MIN (step, size - off);
    BoxAgentFrameHeader h;
    GBytes *payload = NULL;

    box_agent_decoder_feed (dec, data + off, n);
    off += n;
    while (box_agent_decoder_next (dec, &h, &payload)) {
      guint8 again[BOX_AGENT_HEADER_SIZE];
      BoxAgentFrameHeader h2;
      gsize len = 0;
      const guint8 *p = g_bytes_get_data (payload, &len);

      g_assert_cmpuint (len, ==, h.length);
      g_assert_cmpuint (len, <=, BOX_AGENT_MAX_PAYLOAD);
      box_agent_frame_encode_header (&h, again);
      g_assert_cmpint (box_agent_frame_decode_header (again, sizeof again, &h2), ==, 1);
      g_assert_cmpuint (h2.type, ==, h.type);
      g_assert_cmpuint (h2.channel, ==, h.channel);
      taken += BOX_AGENT_HEADER_SIZE + len;
      if (h.type == BOX_AGENT_FRAME_CTRL) {
        g_autoptr(GError) error = NULL;
        g_autoptr(JsonObject) msg = box_agent_parse_ctrl (p, len, &error);
        gint64 v;

        g_assert_true ((msg == NULL) != (error == NULL));
        if (msg != NULL) {
          (void) box_agent_json_get_int (msg, "id", &v);
          (void) box_agent_json_get_string (msg, "event");
          (void) box_agent_json_get_bool (msg, "ok", FALSE);
        }
      }
      g_bytes_unref (payload);
    }
  }
  /* every byte was either a frame, skipped, or is still waiting */
  g_assert_cmpuint (taken + box_agent_decoder_get_skipped (dec) + box_agent_decoder_get_buffered (dec), ==, size);
  /* also the whole input as one control message */
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) msg = box_agent_parse_ctrl (data, size, &error);

    g_assert_true ((msg == NULL) != (error == NULL));
  }
  return 0;
}
