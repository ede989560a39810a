/* box-agent-frame.h: the guest agent's wire format, host side.
 *
 * Pure code, no I/O: the frame header encoder, an incremental decoder that
 * resynchronises on garbage (skipping one byte at a time to the next valid
 * header, as doc/AGENT-PROTOCOL.md asks), and the parser for the JSON of
 * control frames.  BoxAgentClient is built on it; the fuzz target
 * tests/agent-client/fuzz-agent-frame.c feeds it arbitrary bytes.
 *
 * A header is 16 bytes, little-endian: magic 0xB0C5 (u16), type (u8),
 * stream (u8), channel (u32), payload length (u32, at most 1 MiB), and
 * FNV-1a-32 of the first 12 bytes (u32).
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define BOX_AGENT_PROTOCOL_VERSION 1
#define BOX_AGENT_FRAME_MAGIC      0xB0C5u
#define BOX_AGENT_HEADER_SIZE      16
#define BOX_AGENT_MAX_PAYLOAD      (1u << 20)   /* 1 MiB */
#define BOX_AGENT_DATA_CHUNK       (32u << 10)  /* largest DATA payload we send */
#define BOX_AGENT_DEFAULT_WINDOW   (1u << 20)   /* initial credit per channel and direction */
#define BOX_AGENT_JSON_MAX_DEPTH   32
/* A control message from the agent: at most this long, except replies to
 * the requests that list (sessions, ports), which may fill a frame. */
#define BOX_AGENT_CTRL_MAX         (64u << 10)  /* 64 KiB */
/* Channel ids from here on are opened by the agent. */
#define BOX_AGENT_FIRST_AGENT_CHANNEL 0x80000000u

typedef enum {
  BOX_AGENT_FRAME_CTRL = 1,     /* one JSON object */
  BOX_AGENT_FRAME_DATA = 2,     /* raw bytes of `stream` */
  BOX_AGENT_FRAME_EOF = 3,      /* end of `stream`, empty */
  BOX_AGENT_FRAME_CREDIT = 4,   /* u32 LE: more DATA bytes the peer may send */
  BOX_AGENT_FRAME_CLOSE = 5,    /* the channel is gone, empty */
} BoxAgentFrameType;

typedef struct {
  guint8  type;                 /* BoxAgentFrameType */
  guint8  stream;               /* 0 stdin, 1 stdout, 2 stderr */
  guint32 channel;
  guint32 length;               /* of the payload */
} BoxAgentFrameHeader;

guint32  box_agent_fnv1a32             (const guint8 *data,
                                        gsize         len);

void     box_agent_frame_encode_header (const BoxAgentFrameHeader *header,
                                        guint8                     out[BOX_AGENT_HEADER_SIZE]);

/* 1: a valid header was decoded into @header; 0: fewer than 16 bytes;
 * -1: no valid header starts at @buf. */
int      box_agent_frame_decode_header (const guint8        *buf,
                                        gsize                len,
                                        BoxAgentFrameHeader *header);

/* A whole frame (header and payload) ready to write.  @len is at most
 * BOX_AGENT_MAX_PAYLOAD. */
GBytes  *box_agent_frame_build         (BoxAgentFrameType type,
                                        guint8            stream,
                                        guint32           channel,
                                        const void       *payload,
                                        gsize             len);
GBytes  *box_agent_frame_build_credit  (guint32 channel,
                                        guint8  stream,
                                        guint32 credit);
/* A CTRL frame carrying @object. */
GBytes  *box_agent_frame_build_ctrl    (guint32     channel,
                                        JsonObject *object);

/* Incremental decoder: feed it bytes as they arrive, take frames out. */
typedef struct _BoxAgentDecoder BoxAgentDecoder;

BoxAgentDecoder *box_agent_decoder_new     (void);
void             box_agent_decoder_free    (BoxAgentDecoder *self);
void             box_agent_decoder_feed    (BoxAgentDecoder *self,
                                            const guint8    *data,
                                            gsize            len);
/* TRUE with the next complete frame (@payload: a new reference, never
 * NULL); FALSE when more bytes are needed.  Invalid headers are skipped
 * (counted by box_agent_decoder_get_skipped()). */
gboolean         box_agent_decoder_next    (BoxAgentDecoder     *self,
                                            BoxAgentFrameHeader *header,
                                            GBytes             **payload);
/* Bytes skipped while resynchronising, in total. */
guint64          box_agent_decoder_get_skipped (BoxAgentDecoder *self);
/* Bytes fed but not yet taken out as frames or skipped. */
gsize            box_agent_decoder_get_buffered (BoxAgentDecoder *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxAgentDecoder, box_agent_decoder_free)

/* Every JSON value that comes from the agent goes through here (control
 * messages, fs-list lines, anything a stream carries): at most @max_len
 * bytes, valid UTF-8 without NUL, at most BOX_AGENT_JSON_MAX_DEPTH deep,
 * all checked before json-glib sees it (its parser recurses without
 * limit).  The root (a new reference), or NULL with BOX_ERROR_INTERNAL. */
JsonNode        *box_agent_json_parse      (const char   *data,
                                            gsize         len,
                                            gsize         max_len,
                                            GError      **error);
/* The same, for a value that must be an object. */
JsonObject      *box_agent_json_parse_object (const char *data,
                                              gsize       len,
                                              gsize       max_len,
                                              GError    **error);
/* The JSON object of a CTRL payload (box_agent_json_parse_object() with
 * the frame's cap, BOX_AGENT_MAX_PAYLOAD; the client applies the smaller
 * BOX_AGENT_CTRL_MAX before). */
JsonObject      *box_agent_parse_ctrl      (const guint8 *payload,
                                            gsize         len,
                                            GError      **error);
/* Guest text for a log line: at most @max bytes of it, control
 * characters, quotes, backslashes and invalid UTF-8 escaped, "..." when
 * cut.  Never NULL. */
char            *box_agent_text_for_log    (const char *text,
                                            gsize       max);

/* Typed member getters that never complain: FALSE/NULL when @name is
 * absent or of another type. */
gboolean         box_agent_json_get_int    (JsonObject  *object,
                                            const char  *name,
                                            gint64      *out);
const char      *box_agent_json_get_string (JsonObject  *object,
                                            const char  *name);
gboolean         box_agent_json_get_bool   (JsonObject  *object,
                                            const char  *name,
                                            gboolean     fallback);

G_END_DECLS
