/* libFuzzer target for the tar reader, header parser and entry-name check
 * (agent/tar.c), the code fs-tar-put runs on archives from clients.
 *   clang -fsanitize=fuzzer,address,undefined -I agent agent/tests/fuzz-tar.c agent/tar.c agent/proto.c -lm
 * Without libFuzzer (meson), -DBA_FUZZ_MAIN adds a main() that runs each file
 * given on the command line once, so the corpus doubles as a regression test. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tar.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

typedef struct {
  uint64_t bytes;
  int entries;
} Count;

static bool
f_entry (void *ud, const BaTarEntry *e, const char **err)
{
  char norm[BA_TAR_NAME_MAX + 1];
  Count *c = ud;
  c->entries++;
  /* what the extractor does first with every name */
  if (!ba_tar_name_check (e->name, norm, sizeof norm, err))
    return c->entries % 2 == 0; /* sometimes go on, to reach deeper states */
  if (norm[0] != 0 && (norm[0] == '/' || strstr (norm, "//") != NULL))
    abort (); /* the check must never let these through */
  if (e->type == '1')
    (void) ba_tar_name_check (e->link, norm, sizeof norm, err);
  return true;
}

static bool
f_data (void *ud, const uint8_t *p, size_t n, const char **err)
{
  ((Count *) ud)->bytes += n;
  return true;
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
  BaTarReader r;
  BaTarEntry e;
  Count c = { 0 };
  const char *err = NULL;
  bool have_size = false;
  char norm[64];
  int rc = 0;

  /* the whole input in uneven pieces */
  ba_tar_reader_init (&r);
  for (size_t off = 0, step = 1; off < size && rc == 0; off += step, step = step * 3 % 1021 + 1)
    rc = ba_tar_feed (&r, data + off, off + step <= size ? step : size - off, &sink, &c, &err);
  (void) ba_tar_finish (&r, &err);
  ba_tar_reader_clear (&r);
  /* the pieces on their own */
  if (size >= BA_TAR_BLOCK)
    (void) ba_tar_header_parse (data, &e, &err);
  memset (&e, 0, sizeof e);
  (void) ba_tar_pax_apply (data, size, &e, &have_size, &err);
  if (size < 8192) {
    char *name = malloc (size + 1);
    if (name != NULL) {
      memcpy (name, data, size);
      name[size] = 0;
      if (ba_tar_name_check (name, norm, sizeof norm, &err) && strstr (norm, "..") != NULL) {
        /* ".." may only appear inside a longer component */
        for (char *p = strstr (norm, ".."); p != NULL; p = strstr (p + 1, ".."))
          if ((p == norm || p[-1] == '/') && (p[2] == 0 || p[2] == '/'))
            abort ();
      }
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
