/* box-edge-io.h: the edge's byte plumbing over GIO streams (internal to
 * core/edge/): a write, a body copied a buffer at a time, a head read
 * into a buffered stream.  Everything is async on the caller's context;
 * @cancel ends what is under way (the callback then says FALSE or NULL).
 *
 * Reads from a GBufferedInputStream take what it holds first and then read
 * the stream under it: GBufferedInputStream's own read_async would run a
 * blocking read in a worker thread, which BoxAgentStream refuses and TLS
 * need not do. */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define BOX_EDGE_PUMP_BUFFER (64 * 1024)
/* The buffer of each direction of a relay (an upgraded connection):
 * one TLS record; it mostly idles */
#define BOX_EDGE_RELAY_BUFFER (16 * 1024)
/* A buffered stream that reads heads starts with this much and grows
 * (x4) up to the head's limit only while a head does not fit yet; an idle
 * connection so holds no 64 KiB buffer. */
#define BOX_EDGE_HEAD_START  (4 * 1024)

typedef void (*BoxEdgeDoneFunc) (gboolean ok, gpointer user_data);
/* @head: the bytes up to and including the blank line (with a NUL after
 * them, outside its size: libsoup's parsers want one), or NULL at the end
 * of the stream, on an error, or (@too_big) when the buffer filled first. */
typedef void (*BoxEdgeHeadFunc) (GBytes *head, gboolean too_big, gpointer user_data);

/* Writes @text (taken) whole. */
void box_edge_write     (GOutputStream *out, GString *text, GCancellable *cancel,
                         BoxEdgeDoneFunc func, gpointer user_data);
/* Copies @length bytes (-1: until the end of @in) from @in to @out, each
 * read waiting for the write before it: TRUE when all came. */
void box_edge_pump      (GInputStream *in, GOutputStream *out, gint64 length, GCancellable *cancel,
                         BoxEdgeDoneFunc func, gpointer user_data);
/* box_edge_pump() that adds the bytes it wrote to *@counted as it goes
 * (@counted must live until @func has run). */
void box_edge_pump_counted (GInputStream *in, GOutputStream *out, gint64 length, guint64 *counted,
                            GCancellable *cancel, BoxEdgeDoneFunc func, gpointer user_data);
/* box_edge_pump() whose every read of @in must bring bytes within
 * @read_timeout_s (0: no bound; the writes to @out are not timed): past
 * it the read is cancelled, *@timed_out set and @func told FALSE. */
void box_edge_pump_timed   (GInputStream *in, GOutputStream *out, gint64 length,
                            guint read_timeout_s, gboolean *timed_out, GCancellable *cancel,
                            BoxEdgeDoneFunc func, gpointer user_data);
/* box_edge_pump() until the end of @in with a BOX_EDGE_RELAY_BUFFER. */
void box_edge_relay        (GInputStream *in, GOutputStream *out, GCancellable *cancel,
                            BoxEdgeDoneFunc func, gpointer user_data);
/* Where a chunked body (RFC 9112 7.1) ends, found as its bytes pass by:
 * zero it before the body; box_edge_chunks_scan() says how many of @len
 * bytes belong to the body (the rest comes after its end), or -1 when
 * they break the framing. */
typedef struct {
  guint   state;
  guint   digits;
  guint64 left;          /* of the chunk's data, or its size so far */
  gboolean done;         /* the last chunk and the trailer went by */
  gboolean extra;        /* bytes came after the end (set by the pump) */
} BoxEdgeChunks;

gssize box_edge_chunks_scan (BoxEdgeChunks *chunks, const guint8 *data, gsize len);
/* box_edge_pump_counted() of a chunked body: copied as it is, to the end
 * of its last chunk and trailer; bytes after that are not copied (and
 * @chunks->extra set), a broken framing ends it with FALSE. */
void box_edge_pump_chunked (GInputStream *in, GOutputStream *out, BoxEdgeChunks *chunks,
                            guint64 *counted, GCancellable *cancel, BoxEdgeDoneFunc func,
                            gpointer user_data);
/* Reads up to "\r\n\r\n" within @max bytes, growing @in's buffer up to
 * @max as needed; what follows stays in @in. */
void box_edge_read_head (GBufferedInputStream *in, gsize max, GCancellable *cancel,
                         BoxEdgeHeadFunc func, gpointer user_data);
/* When @in holds @length bytes already: appends them to @text, takes
 * them from @in and says TRUE. */
gboolean box_edge_take_buffered (GBufferedInputStream *in, gsize length, GString *text);
/* A buffered stream over @base (not closing it) of BOX_EDGE_HEAD_START
 * bytes. */
GBufferedInputStream *box_edge_buffered_new (GInputStream *base);
/* Shrinks @in's buffer back to BOX_EDGE_HEAD_START (or what it holds). */
void box_edge_buffered_shrink (GBufferedInputStream *in);

G_END_DECLS
