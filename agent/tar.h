/* box guest agent: tar format (pure: no I/O, no globals).
 *
 * A streaming reader (bytes in, entries and their data out through
 * callbacks) for ustar, pax and GNU long names; the entry-name check used
 * before anything is created; and the header writer of fs-tar-get.
 * agent/tests/fuzz-tar.c fuzzes the reader and the name check. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define BA_TAR_BLOCK 512
#define BA_TAR_NAME_MAX 4096
#define BA_TAR_META_MAX (64u << 10) /* largest pax header / GNU long name we take */

typedef struct {
  char name[BA_TAR_NAME_MAX + 1];
  char link[BA_TAR_NAME_MAX + 1];
  char type;      /* '0' regular ('\0' and '7' are reported as '0'), '1' hard
                   * link, '2' symlink, '5' directory, anything else as is */
  uint64_t size;  /* data bytes that follow the header */
  uint32_t mode;  /* & 07777 */
  int64_t mtime;
  uint32_t uid, gid;
} BaTarEntry;

/* Parse one header block. Returns 1 for a header, 0 for an all-zero block,
 * -1 for an invalid one (bad checksum or number; *err says why). */
int ba_tar_header_parse (const uint8_t b[BA_TAR_BLOCK], BaTarEntry *e, const char **err);

/* Apply pax extended header records (path, linkpath, size, mtime, uid, gid)
 * to e. Returns false for malformed records. */
bool ba_tar_pax_apply (const uint8_t *data, size_t len, BaTarEntry *e, bool *have_size, const char **err);

/* Check an entry name (or a hard link's target) and normalise it into out:
 * a leading "./" and repeated or trailing slashes are dropped; "." alone
 * becomes "" (the directory itself). Refuses (false, *err) an empty name,
 * an absolute name, any ".." component, and names that do not fit. */
bool ba_tar_name_check (const char *name, char *out, size_t outlen, const char **err);

typedef struct {
  /* A header (names as in the archive, not checked). Return false to stop
   * (with *err set). */
  bool (*entry) (void *ud, const BaTarEntry *e, const char **err);
  /* Data of the current entry, in pieces. */
  bool (*data) (void *ud, const uint8_t *p, size_t n, const char **err);
  /* The current entry's data is complete. */
  bool (*entry_end) (void *ud, const char **err);
} BaTarSink;

enum { BA_TAR_HDR, BA_TAR_DATA, BA_TAR_META, BA_TAR_PAD, BA_TAR_END, BA_TAR_ERR };

typedef struct {
  int state;
  uint8_t blk[BA_TAR_BLOCK];
  size_t fill;
  uint64_t remain;        /* data bytes left in the current entry */
  size_t pad;             /* padding bytes left after it */
  int zeros;              /* consecutive zero blocks */
  BaTarEntry e;
  /* pending meta for the next entry */
  char meta_type;         /* 'x', 'g', 'L', 'K' being read */
  uint8_t *meta;          /* BA_TAR_META_MAX bytes, allocated by the reader */
  size_t meta_len;
  BaTarEntry pending;     /* names, size, mtime from pax / GNU headers */
  bool p_name, p_link, p_size, p_mtime, p_uid, p_gid;
} BaTarReader;

void ba_tar_reader_init (BaTarReader *r);
void ba_tar_reader_clear (BaTarReader *r);
/* Feed bytes. Returns 0 to go on, 1 once the end-of-archive blocks were
 * seen (later bytes are ignored), -1 on an error (*err; the reader then
 * refuses everything). */
int ba_tar_feed (BaTarReader *r, const uint8_t *p, size_t n, const BaTarSink *s, void *ud, const char **err);
/* At the end of the input: true when the archive ended cleanly (end blocks,
 * or nothing pending at an entry boundary). */
bool ba_tar_finish (const BaTarReader *r, const char **err);

/* Append the header(s) of e to out: a pax 'x' header first when the name,
 * link, size, uid or gid do not fit ustar. The caller appends e->size data
 * bytes and then ba_tar_padding (e->size) zero bytes. */
void ba_tar_encode (BaBuf *out, const BaTarEntry *e);
size_t ba_tar_padding (uint64_t size);
