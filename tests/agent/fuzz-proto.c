/* libFuzzer target for the agent's frame and message parsing (agent/proto.c).
 *   clang -fsanitize=fuzzer,address,undefined -I agent tests/agent/fuzz-proto.c agent/proto.c -lm
 * Without libFuzzer (meson), -DBA_FUZZ_MAIN adds a main() that runs each file
 * given on the command line once, so the corpus doubles as a regression test. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  size_t off = 0;
  const char *err = NULL;
  BaJson *v;
  uint8_t *out;

  /* frames, as the agent's input loop walks them */
  while (off < size) {
    BaFrame f;
    int r = ba_frame_decode (data + off, size - off, &f);
    if (r < 0) {
      off += ba_frame_resync (data + off + 1, size - off - 1) + 1;
      continue;
    }
    if (r == 0 || size - off < BA_HEADER_SIZE + (size_t) f.len)
      break;
    if (f.type == BA_CTRL) {
      v = ba_json_parse ((const char *) data + off + BA_HEADER_SIZE, f.len, &err);
      ba_json_free (v);
    }
    off += BA_HEADER_SIZE + f.len;
  }
  /* the whole input as one control message, re-encoded through the writer */
  v = ba_json_parse ((const char *) data, size, &err);
  if (v != NULL && v->type == BA_JOBJ) {
    BaBuf b = { 0 };
    ba_jw_begin (&b);
    for (const BaJson *c = v->child; c != NULL; c = c->next)
      if (c->type == BA_JSTR)
        ba_jw_strn (&b, c->key, c->s, c->slen);
    ba_jw_end (&b);
    ba_json_free (ba_json_parse ((const char *) b.data, b.len, &err));
    ba_buf_clear (&b);
  }
  ba_json_free (v);
  out = malloc (size / 4 * 3 + 3);
  if (out != NULL) {
    (void) ba_base64_decode ((const char *) data, size, out);
    free (out);
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
