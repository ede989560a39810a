/* fuzz-main.c: a small driver for LLVMFuzzerTestOneInput() without libFuzzer.
 *
 *   fuzz-<target> [DIR|FILE ...]
 *
 * Runs every file given (or found in a given directory) once, then mutates
 * those seeds at random (bit flips, byte changes, inserts, deletes, copies
 * and splices of seeds) for BOX_FUZZ_SECONDS seconds (default: the meson
 * option fuzz_seconds).  BOX_FUZZ_SEED fixes the random seed.  When an
 * input crashes, it is written to ./crash-<target>-<seed> first, so that
 * `fuzz-<target> crash-...` replays it.  Each input is passed in a buffer of
 * exactly its size, so AddressSanitizer sees any read past the end.
 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <glib.h>

#ifndef BOX_FUZZ_SECONDS_DEFAULT
#define BOX_FUZZ_SECONDS_DEFAULT 10
#endif

#define FUZZ_MAX_INPUT 65536

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* what a crash handler writes out */
static const uint8_t *current_data;
static size_t current_size;
static char crash_path[256];

/* from the sanitizers' runtime when linked in */
extern void __sanitizer_set_death_callback (void (*callback) (void)) __attribute__ ((weak));

static void
save_current (void)
{
  int fd;

  if (current_data == NULL || crash_path[0] == '\0')
    return;
  fd = open (crash_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  if (write (fd, current_data, current_size) < 0)
    (void) 0;
  close (fd);
  if (write (STDERR_FILENO, "fuzz: crashing input saved to ", 30) < 0 ||
      write (STDERR_FILENO, crash_path, strlen (crash_path)) < 0 ||
      write (STDERR_FILENO, "\n", 1) < 0)
    (void) 0;
}

static void
crash_signal (int sig)
{
  save_current ();
  signal (sig, SIG_DFL);
  raise (sig);
}

static void
run_one (const guint8 *data, gsize size)
{
  /* exactly @size bytes on the heap */
  guint8 *copy = g_malloc (size > 0 ? size : 1);

  if (size > 0)
    memcpy (copy, data, size);
  current_data = copy;
  current_size = size;
  LLVMFuzzerTestOneInput (copy, size);
  current_data = NULL;
  g_free (copy);
}

static void
add_seed (GPtrArray *seeds, const char *path)
{
  g_autoptr(GError) error = NULL;
  char *contents = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &contents, &len, &error)) {
    g_printerr ("fuzz: %s\n", error->message);
    exit (1);
  }
  g_ptr_array_add (seeds, g_bytes_new_take (contents, len));
}

static void
collect (GPtrArray *seeds, const char *path)
{
  g_autoptr(GDir) dir = NULL;
  g_autoptr(GPtrArray) names = NULL;
  const char *name;
  guint i;

  if (!g_file_test (path, G_FILE_TEST_IS_DIR)) {
    add_seed (seeds, path);
    return;
  }
  dir = g_dir_open (path, 0, NULL);
  if (dir == NULL)
    return;
  names = g_ptr_array_new_with_free_func (g_free);
  while ((name = g_dir_read_name (dir)) != NULL)
    g_ptr_array_add (names, g_build_filename (path, name, NULL));
  g_ptr_array_sort (names, (GCompareFunc) g_strcmp0);
  for (i = 0; i < names->len; i++) {
    const char *file = g_ptr_array_index (names, i);

    if (g_file_test (file, G_FILE_TEST_IS_REGULAR))
      add_seed (seeds, file);
  }
}

/* Bytes that matter to the parsers under test. */
static const char *const tokens[] = {
  "{", "}", "[", "]", "\"", ":", ",", "null", "true", "false", "0", "-1", "1.5", "1e9",
  "65536", "4294967296", "9223372036854775808", "\\u0000", "\\ud800", "\\n", "\\\"", "*.", "--",
  "=", "/", "@sha256:", ":", ".", "-", "_", "\xc3\xa9", "\xff", "\n", " ",
  "\"name\"", "\"egress\"", "\"include\"", "\"defaults\"", "\"domain\"", "\"ports\"",
};

static void
insert_bytes (GByteArray *buf, guint pos, const guint8 *data, guint len)
{
  /* a GByteArray is a GArray of guint8 */
  g_array_insert_vals ((GArray *) buf, pos, data, len);
}

static void
mutate (GByteArray *buf, GRand *rand, GPtrArray *seeds)
{
  guint n = (guint) g_rand_int_range (rand, 1, 9);
  guint i;

  for (i = 0; i < n; i++) {
    guint len = buf->len;
    guint pos = len > 0 ? (guint) g_rand_int_range (rand, 0, (gint32) len) : 0;
    /* drawn once: MIN() evaluates its arguments twice */
    guint run = (guint) g_rand_int_range (rand, 1, 257);

    switch (g_rand_int_range (rand, 0, 8)) {
    case 0: /* flip a bit */
      if (len > 0)
        buf->data[pos] ^= (guint8) (1u << g_rand_int_range (rand, 0, 8));
      break;
    case 1: /* set a byte */
      if (len > 0)
        buf->data[pos] = (guint8) g_rand_int_range (rand, 0, 256);
      break;
    case 2: { /* insert a byte */
      guint8 b = (guint8) g_rand_int_range (rand, 0, 256);

      insert_bytes (buf, pos, &b, 1);
      break;
    }
    case 3: /* delete a run */
      if (len > 0)
        g_byte_array_remove_range (buf, pos, MIN (run % 8 + 1, len - pos));
      break;
    case 4: { /* insert a token */
      const char *t = tokens[g_rand_int_range (rand, 0, G_N_ELEMENTS (tokens))];

      insert_bytes (buf, pos, (const guint8 *) t, strlen (t));
      break;
    }
    case 5: /* copy a run within the input */
      if (len > 1) {
        guint from = (guint) g_rand_int_range (rand, 0, (gint32) len);
        guint n_copy = MIN (run % 64 + 1, len - from);
        g_autofree guint8 *tmp = g_memdup2 (buf->data + from, n_copy);

        insert_bytes (buf, pos, tmp, n_copy);
      }
      break;
    case 6: { /* splice in part of a seed */
      GBytes *seed = g_ptr_array_index (seeds, g_rand_int_range (rand, 0, (gint32) seeds->len));
      gsize seed_len = 0;
      const guint8 *seed_data = g_bytes_get_data (seed, &seed_len);

      if (seed_len > 0) {
        guint from = (guint) g_rand_int_range (rand, 0, (gint32) seed_len);
        guint n_copy = MIN (run, (guint) seed_len - from);

        g_byte_array_set_size (buf, pos);
        g_byte_array_append (buf, seed_data + from, n_copy);
      }
      break;
    }
    default: /* truncate */
      if (len > 0)
        g_byte_array_set_size (buf, pos);
      break;
    }
  }
  if (buf->len > FUZZ_MAX_INPUT)
    g_byte_array_set_size (buf, FUZZ_MAX_INPUT);
}

int
main (int argc, char **argv)
{
  g_autoptr(GPtrArray) seeds = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr(GRand) rand = NULL;
  g_autofree char *target = g_path_get_basename (argv[0]);
  const char *env_seconds = g_getenv ("BOX_FUZZ_SECONDS");
  const char *env_seed = g_getenv ("BOX_FUZZ_SEED");
  gboolean only_files = argc > 1;
  guint64 seconds = BOX_FUZZ_SECONDS_DEFAULT;
  guint32 seed;
  gint64 deadline;
  guint64 runs = 0;
  guint k;
  int i;

  if (env_seconds != NULL && !g_ascii_string_to_unsigned (env_seconds, 10, 0, 86400, &seconds, NULL)) {
    g_printerr ("fuzz: BOX_FUZZ_SECONDS must be a number of seconds\n");
    return 1;
  }
  seed = env_seed != NULL ? (guint32) g_ascii_strtoull (env_seed, NULL, 10) : g_random_int ();
  rand = g_rand_new_with_seed (seed);
  g_snprintf (crash_path, sizeof crash_path, "crash-%s-%u", target, seed);
  if (__sanitizer_set_death_callback != NULL)
    __sanitizer_set_death_callback (save_current);
  signal (SIGSEGV, crash_signal);
  signal (SIGABRT, crash_signal);
  signal (SIGBUS, crash_signal);
  signal (SIGFPE, crash_signal);

  for (i = 1; i < argc; i++) {
    if (g_file_test (argv[i], G_FILE_TEST_IS_DIR))
      only_files = FALSE;
    collect (seeds, argv[i]);
  }
  for (k = 0; k < seeds->len; k++) {
    gsize len = 0;
    const guint8 *data = g_bytes_get_data (g_ptr_array_index (seeds, k), &len);

    run_one (data, len);
    runs++;
  }
  /* a list of files only is a replay */
  if (only_files) {
    g_print ("fuzz: %s: replayed %u inputs\n", target, seeds->len);
    return 0;
  }
  if (seeds->len == 0)
    g_ptr_array_add (seeds, g_bytes_new_static ("{}", 2));

  deadline = g_get_monotonic_time () + (gint64) seconds * G_USEC_PER_SEC;
  while (g_get_monotonic_time () < deadline) {
    g_autoptr(GByteArray) buf = g_byte_array_new ();
    GBytes *start = g_ptr_array_index (seeds, g_rand_int_range (rand, 0, (gint32) seeds->len));
    gsize len = 0;
    const guint8 *data = g_bytes_get_data (start, &len);
    guint round;

    g_byte_array_append (buf, data, (guint) len);
    /* a few generations from the same start */
    for (round = 0; round < 16; round++) {
      mutate (buf, rand, seeds);
      run_one (buf->data, buf->len);
      runs++;
    }
  }
  g_print ("fuzz: %s: %" G_GUINT64_FORMAT " inputs from %u seeds in %" G_GUINT64_FORMAT
           " s (seed %u)\n", target, runs, seeds->len, seconds, seed);
  return 0;
}
