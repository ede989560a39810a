/* libFuzzer target for what fs-tar-put runs on archives from clients: the
 * tar reader as the agent drives libarchive (agent/tar.c), fed in uneven
 * pieces, with the entry-name check on every name and hard link target;
 * and each input as a name and as a file route's path (ba_path_normalise).
 *   clang -fsanitize=fuzzer,address,undefined -I agent tests/agent/fuzz-tar.c agent/tar.c agent/proto.c -larchive -lm
 * Without libFuzzer (meson), -DBA_FUZZ_MAIN adds a main() that runs each file
 * given on the command line once, so the corpus doubles as a regression test. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tar.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

typedef struct {
  const uint8_t *p;
  size_t len, off, step;
  uint64_t bytes;
  int entries;
} In;

static ssize_t
f_read (void *ud, void *buf, size_t size)
{
  In *in = ud;
  size_t n = in->len - in->off;
  if (n > in->step)
    n = in->step;
  if (n > size)
    n = size;
  memcpy (buf, in->p + in->off, n);
  in->off += n;
  in->step = in->step * 3 % 1021 + 1;
  return (ssize_t) n;
}

/* ".." may only appear inside a longer component of a checked name */
static void
assert_checked (const char *norm)
{
  if (norm[0] == '/' || strstr (norm, "//") != NULL)
    abort ();
  for (const char *p = strstr (norm, ".."); p != NULL; p = strstr (p + 1, ".."))
    if ((p == norm || p[-1] == '/') && (p[2] == 0 || p[2] == '/'))
      abort ();
}

/* a file route's path: absolute, no empty, "." or ".." component */
static void
assert_path (const char *path)
{
  char *out = malloc (strlen (path) + 2);
  if (out == NULL)
    return;
  if (ba_path_normalise (path, out)) {
    size_t n = strlen (out);
    if (out[0] != '/' || n > strlen (path) || strstr (out, "//") != NULL || (n > 1 && out[n - 1] == '/') ||
        strstr (out, "/./") != NULL || strstr (out, "/../") != NULL ||
        (n >= 2 && strcmp (out + n - 2, "/.") == 0) || (n >= 3 && strcmp (out + n - 3, "/..") == 0))
      abort ();
  } else if (path[0] == '/') {
    abort ();
  }
  free (out);
}

static bool
f_entry (void *ud, const BaTarEntry *e, const char **err)
{
  char norm[BA_TAR_NAME_MAX + 1];
  In *in = ud;
  in->entries++;
  if (e->name == NULL || e->link == NULL)
    abort ();
  /* what the extractor does first with every name */
  if (!ba_tar_name_check (e->name, norm, sizeof norm, err))
    return in->entries % 2 == 0; /* sometimes go on, to reach deeper states */
  assert_checked (norm);
  if (e->type == '1' && ba_tar_name_check (e->link, norm, sizeof norm, err))
    assert_checked (norm);
  return true;
}

static bool
f_data (void *ud, uint64_t off, const uint8_t *p, size_t n, const char **err)
{
  In *in = ud;
  in->bytes += n;
  return in->bytes < ((uint64_t) 64 << 20);
}

static bool
f_end (void *ud, const char **err)
{
  return true;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const BaTarSink sink = { f_entry, f_data, f_end };
  In in = { data, size, 0, 1, 0, 0 };
  const char *err = NULL;
  char norm[64];
  int rc = ba_tar_read (f_read, &in, &sink, &in, &err);

  if (rc < 0 && err == NULL)
    abort (); /* a refusal always says why */
  /* the check on its own, on the raw bytes as a name */
  if (size < 8192) {
    char *name = malloc (size + 1);
    if (name != NULL) {
      memcpy (name, data, size);
      name[size] = 0;
      if (ba_tar_name_check (name, norm, sizeof norm, &err))
        assert_checked (norm);
      assert_path (name);
      free (name);
    }
  }
  return 0;
}

#ifdef BA_FUZZ_MAIN
int
main (int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen (argv[i], "rb");
    uint8_t *buf = malloc (1 << 21);
    size_t n;
    if (f == NULL || buf == NULL)
      return 1;
    n = fread (buf, 1, 1 << 21, f);
    fclose (f);
    LLVMFuzzerTestOneInput (buf, n);
    free (buf);
  }
  printf ("1..1\nok 1 - %d inputs\n", argc - 1);
  return 0;
}
#endif
