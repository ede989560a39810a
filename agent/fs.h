/* box guest agent: file operations (doc/AGENT-PROTOCOL.md, Files). Each runs
 * in a worker (work.h), as root or as the requested user. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "proto.h"
#include "work.h"

/* fs-* requests on channel 0. */
void ba_fs_op (int64_t id, const char *op, const BaJson *m);

/* ---- shared by the workers (fs.c, fs-data.c, tario.c, watch.c) ---------- */

/* Read an absolute path argument into out (repeated and trailing slashes
 * dropped); replies `invalid` and returns false otherwise. */
bool ba_fs_path_arg (BaWorkCtx *w, const BaJson *req, const char *key, char *out, size_t outlen);
/* A Stat object (as member `key`, or an array element when key is NULL).
 * target: a symlink's contents (NULL: read it from path). */
void ba_fs_stat_json (BaBuf *b, const char *key, const char *path, const struct stat *st, const char *target);
/* mkdir -p, 0755 for what it creates. Returns 0 or an errno value;
 * first_made (may be NULL) gets the length of the path's prefix naming the
 * first directory it created, 0 when none. */
int ba_fs_mkdirs (const char *path, size_t *first_made);
/* Removes name in dfd and everything below it, never following symlinks
 * nor crossing into another file system than dev (EBUSY).  0 or an errno
 * value, err_path (len bytes) saying where; path names name in it. */
int ba_fs_remove_tree (int dfd, const char *name, char *err_path, size_t len, const char *path, dev_t dev);
void ba_fs_write_all (int fd, const void *p, size_t n);
/* The last name of path ("/" for "/"). */
const char *ba_fs_base_name (const char *path);
/* The request's "mode": "0755", "755" or an integer, dflt when absent;
 * replies `invalid` and returns false when present and bad.  given (may
 * be NULL) tells whether it was present. */
bool ba_fs_mode_arg (BaWorkCtx *w, const BaJson *req, uint32_t dflt, uint32_t *mode, bool *given);

/* fs-data.c */
void ba_fs_read (BaWorkCtx *w, const BaJson *req);
void ba_fs_write (BaWorkCtx *w, const BaJson *req);

/* tario.c */
void ba_fs_tar_get (BaWorkCtx *w, const BaJson *req);
void ba_fs_tar_put (BaWorkCtx *w, const BaJson *req);
/* watch.c */
void ba_fs_watch (BaWorkCtx *w, const BaJson *req);
