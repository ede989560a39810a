/* box guest agent: tar archives through libarchive, and the entry-name
 * check of fs-tar-put.
 *
 * The format is libarchive's: ba_tar_read() reads an archive (ustar, pax,
 * GNU) from a read function and hands each entry and its data to a sink;
 * a BaTarWriter writes "restricted pax" archives (ustar, with a pax header
 * only for what does not fit) to an output function.  What the agent adds
 * is the check that runs on every name before anything is created
 * (ba_tar_name_check).  tests/agent/fuzz-tar.c fuzzes the reader together
 * with the check. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BA_TAR_NAME_MAX 4096

typedef struct {
  const char *name; /* as in the archive, not checked */
  const char *link; /* a symlink's target or a hard link's name, else "" */
  char type;        /* '0' regular, '1' hard link, '2' symlink, '5' directory,
                     * '?' anything else (devices, fifos, sockets) */
  uint64_t size;    /* data bytes of the entry */
  uint32_t mode;    /* & 07777 */
  int64_t mtime;
  uint32_t uid, gid;
} BaTarEntry;

/* Check an entry name (or a hard link's target) and normalise it into out:
 * a leading "./" and repeated or trailing slashes are dropped; "." alone
 * becomes "" (the directory itself). Refuses (false, *err) an empty name,
 * an absolute name, any ".." component, and names that do not fit. */
bool ba_tar_name_check (const char *name, char *out, size_t outlen, const char **err);

/* An absolute path of a file route, normalised by name into out (at least
 * strlen (path) + 2 bytes): no empty, "." or ".." components (".." of /
 * is /), no trailing slash; "/" stays "/".  False when path is not
 * absolute.  Not here for tar but next to its name check: both are what a
 * client's names go through first (fuzzed together). */
bool ba_path_normalise (const char *path, char *out);

/* ---- reading ------------------------------------------------------------- */

typedef struct {
  /* A header. Return false to stop (with *err set). */
  bool (*entry) (void *ud, const BaTarEntry *e, const char **err);
  /* Data of the current entry, at offset off (a sparse entry has holes). */
  bool (*data) (void *ud, uint64_t off, const uint8_t *p, size_t n, const char **err);
  /* The current entry's data is complete. */
  bool (*entry_end) (void *ud, const char **err);
} BaTarSink;

/* Fill buf: the bytes read, 0 at the end of the input, -1 on an error. */
typedef ssize_t (*BaTarReadFn) (void *ud, void *buf, size_t size);

/* Read a whole archive into the sink.  Returns 1 when it ended cleanly (end
 * blocks, or the input ended between entries; an empty input is an empty
 * archive), 0 when a sink callback stopped (its *err), -1 for input that is
 * not a tar archive, a damaged or truncated one, or a read error (*err,
 * valid until the next call). */
int ba_tar_read (BaTarReadFn read_fn, void *read_ud, const BaTarSink *s, void *ud, const char **err);

/* ---- writing ------------------------------------------------------------- */

typedef struct BaTarWriter BaTarWriter;

/* Takes every byte of the archive as it is produced (headers, data,
 * padding, end blocks), in pieces. */
typedef void (*BaTarWriteFn) (void *ud, const void *p, size_t n);

BaTarWriter *ba_tar_writer_new (BaTarWriteFn out, void *ud);
/* A header; the caller then writes e->size data bytes (fewer are padded with
 * zeros, more are cut).  False (with *err) when libarchive refused the entry:
 * nothing of it was written. */
bool ba_tar_write_header (BaTarWriter *w, const BaTarEntry *e, const char **err);
void ba_tar_write_data (BaTarWriter *w, const void *p, size_t n);
/* The end blocks (and the zeros an entry still owes); frees w. */
void ba_tar_writer_finish (BaTarWriter *w);
/* Frees w without writing anything more: the archive stays unfinished. */
void ba_tar_writer_abandon (BaTarWriter *w);
