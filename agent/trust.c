/* trust.c: `trust-ca`, the node's secrets-broker CA made trusted in the guest.
 *
 * The PEM (CERTIFICATE blocks only, printable ASCII, at most
 * BA_TRUST_MAX bytes) goes to /etc/box/ca.pem (NODE_EXTRA_CA_CERTS), to
 * /usr/local/share/ca-certificates/box-broker.crt (so that a later
 * update-ca-certificates keeps it) and into the system bundle
 * /etc/ssl/certs/ca-certificates.crt between two marker lines; a previous
 * block between them is dropped, so the op is idempotent and replaces the
 * CA of before a rotation.  update-ca-certificates itself is not run (over
 * a minute under TCG).  Every file is written to a temporary name and
 * renamed over the old one, not synced: each guest fsync is a host flush
 * of its disk (~100 ms on a busy host, three of them the larger part of a
 * create's answer), and none is needed.  ext4 (the guest's root) writes a
 * file renamed over another before it commits the rename, so after a crash
 * the bundle is the old one or the new one; a new file may come back
 * empty, and the host sends the CA again at every create, fork, wake, boot
 * and restore, which writes it again.  A file that already holds what it
 * would get is not written at all (a fork or wake of a guest that had the
 * CA).  --trust-root DIR (tests) puts the three paths under DIR.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

#define BA_TRUST_MAX (16u << 10)
#define BUNDLE_MAX (16u << 20)
#define MARK_BEGIN "# box broker CA (begin)\n"
#define MARK_END "# box broker CA (end)\n"
#define BEGIN_LINE "-----BEGIN CERTIFICATE-----"
#define END_LINE "-----END CERTIFICATE-----"

const char *ba_trust_root = "";

/* One or more CERTIFICATE blocks of base64 lines, blank lines between
 * them, nothing else. */
static bool
pem_valid (const char *s, size_t n)
{
  bool inside = false;
  int blocks = 0;
  size_t i = 0;

  if (n == 0 || n > BA_TRUST_MAX)
    return false;
  for (size_t k = 0; k < n; k++) {
    unsigned char c = (unsigned char) s[k];
    if (c != '\n' && c != '\r' && (c < 0x20 || c > 0x7e))
      return false;
  }
  while (i < n) {
    const char *line = s + i;
    const char *nl = memchr (line, '\n', n - i);
    size_t len = nl != NULL ? (size_t) (nl - line) : n - i;
    i += len + (nl != NULL);
    if (len > 0 && line[len - 1] == '\r')
      len--;
    if (!inside) {
      if (len == 0)
        continue;
      if (len != strlen (BEGIN_LINE) || memcmp (line, BEGIN_LINE, len) != 0)
        return false;
      inside = true;
    } else if (len == strlen (END_LINE) && memcmp (line, END_LINE, len) == 0) {
      inside = false;
      blocks++;
    } else {
      if (len == 0)
        return false;
      for (size_t k = 0; k < len; k++) {
        char c = line[k];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || c == '='))
          return false;
      }
    }
  }
  return !inside && blocks > 0;
}

static void
path_under (char *out, size_t size, const char *rel)
{
  snprintf (out, size, "%s%s", ba_trust_root, rel);
}

/* mkdir -p of @path's parent, each new directory 0755 */
static bool
make_parents (const char *path)
{
  char dir[512];
  snprintf (dir, sizeof dir, "%s", path);
  char *slash = strrchr (dir, '/');
  if (slash == NULL || slash == dir)
    return true;
  *slash = '\0';
  for (char *p = dir + 1; *p != '\0'; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir (dir, 0755) < 0 && errno != EEXIST)
      return false;
    *p = '/';
  }
  return mkdir (dir, 0755) == 0 || errno == EEXIST;
}

/* Whether @path is a regular file holding exactly @a then @b. */
static bool
same_content (const char *path, const char *a, size_t alen, const char *b, size_t blen)
{
  const char *parts[2] = { a, b };
  size_t lens[2] = { alen, blen };
  char buf[4096];
  struct stat st;
  bool same;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

  if (fd < 0)
    return false;
  same = fstat (fd, &st) == 0 && S_ISREG (st.st_mode) && (size_t) st.st_size == alen + blen;
  for (int k = 0; k < 2 && same; k++) {
    size_t off = 0;
    while (off < lens[k] && same) {
      size_t want = lens[k] - off < sizeof buf ? lens[k] - off : sizeof buf;
      ssize_t r = read (fd, buf, want);
      if (r < 0 && errno == EINTR)
        continue;
      same = r > 0 && memcmp (buf, parts[k] + off, (size_t) r) == 0;
      off += r > 0 ? (size_t) r : 0;
    }
  }
  close (fd);
  return same;
}

/* @path (0644) holds @a then @b, or is as before; a file that holds them
 * already is left as it is */
static bool
write_replace (const char *path, const char *a, size_t alen, const char *b, size_t blen)
{
  char tmp[560];
  const char *parts[2] = { a, b };
  size_t lens[2] = { alen, blen };
  int fd, saved;

  if (same_content (path, a, alen, b, blen))
    return true;
  if (!make_parents (path))
    return false;
  snprintf (tmp, sizeof tmp, "%s.box-tmp", path);
  fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return false;
  for (int k = 0; k < 2; k++) {
    size_t off = 0;
    while (off < lens[k]) {
      ssize_t w = write (fd, parts[k] + off, lens[k] - off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        goto fail;
      off += (size_t) w;
    }
  }
  if (fchmod (fd, 0644) < 0)
    goto fail;
  if (close (fd) < 0) {
    fd = -1;
    goto fail;
  }
  fd = -1;
  if (rename (tmp, path) == 0)
    return true;
fail:
  saved = errno != 0 ? errno : EIO;
  if (fd >= 0)
    close (fd);
  unlink (tmp);
  errno = saved;
  return false;
}

/* The bundle at @path without a previous marked block, ending in a newline
 * when not empty; NULL (errno) when unreadable or over BUNDLE_MAX.  A
 * missing bundle is empty. */
static char *
bundle_without_block (const char *path, size_t *len)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  struct stat st = { 0 };
  char *text, *begin, *end;
  size_t n = 0;

  *len = 0;
  if (fd < 0)
    return errno == ENOENT ? calloc (1, 2) : NULL;
  if (fstat (fd, &st) < 0 || st.st_size > BUNDLE_MAX) {
    int e = st.st_size > BUNDLE_MAX ? EFBIG : errno;
    close (fd);
    errno = e;
    return NULL;
  }
  text = malloc ((size_t) st.st_size + 2);
  while (text != NULL && n < (size_t) st.st_size) {
    ssize_t r = read (fd, text + n, (size_t) st.st_size - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    n += (size_t) r;
  }
  close (fd);
  if (text == NULL)
    return NULL;
  text[n] = '\0';
  /* strstr: the bundle is text; a NUL in it ends what is looked at */
  n = strlen (text);
  begin = strstr (text, MARK_BEGIN);
  if (begin != NULL && (begin == text || begin[-1] == '\n')) {
    end = strstr (begin, MARK_END);
    end = end != NULL ? end + strlen (MARK_END) : text + n;
    memmove (begin, end, (size_t) (text + n - end) + 1);
    n = strlen (text);
  }
  if (n > 0 && text[n - 1] != '\n')
    text[n++] = '\n';
  text[n] = '\0';
  *len = n;
  return text;
}

void
ba_trust_ca (int64_t id, const BaJson *m)
{
  const BaJson *pem = ba_json_get (m, "pem");
  char path[512], *bundle, *block;
  size_t blen, n;
  int e;

  if (pem == NULL || pem->type != BA_JSTR || !pem_valid (pem->s, pem->slen)) {
    ba_reply_error (id, "invalid",
                    "pem must be PEM CERTIFICATE blocks of printable ASCII, at most 16 KiB");
    return;
  }
  n = pem->slen;
  /* the PEM, ending in a newline, between the markers */
  block = malloc (strlen (MARK_BEGIN) + n + 1 + strlen (MARK_END) + 1);
  if (block == NULL) {
    ba_reply_error (id, "failed", strerror (ENOMEM));
    return;
  }
  memcpy (block, pem->s, n);
  if (block[n - 1] != '\n')
    block[n++] = '\n';

  path_under (path, sizeof path, "/etc/box/ca.pem");
  if (!write_replace (path, block, n, "", 0))
    goto failed;
  path_under (path, sizeof path, "/usr/local/share/ca-certificates/box-broker.crt");
  if (!write_replace (path, block, n, "", 0))
    goto failed;

  memmove (block + strlen (MARK_BEGIN), block, n);
  memcpy (block, MARK_BEGIN, strlen (MARK_BEGIN));
  n += strlen (MARK_BEGIN);
  memcpy (block + n, MARK_END, strlen (MARK_END));
  n += strlen (MARK_END);
  path_under (path, sizeof path, "/etc/ssl/certs/ca-certificates.crt");
  bundle = bundle_without_block (path, &blen);
  if (bundle == NULL)
    goto failed;
  if (!write_replace (path, bundle, blen, block, n)) {
    e = errno;
    free (bundle);
    errno = e;
    goto failed;
  }
  free (bundle);
  free (block);
  ba_reply_ok (id);
  return;
failed:
  e = errno;
  free (block);
  ba_log ("trust-ca: %s: %s", path, strerror (e));
  ba_reply_error (id, ba_errno_code (e), strerror (e));
}
