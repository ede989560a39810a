/* box-names.c: random identifiers and generated sandbox names.
 *
 * Identifiers come from GnuTLS's generator in lowercase base32 (a-z2-7):
 * 5 bits per character, taken from one random byte each, which is exact
 * because 256 is a multiple of 32.  Key secrets use the key-grade
 * generator, everything else the ordinary one.
 */
#include "config.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include "box-validate.h"

static const char base32_alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";

static void
random_bytes (gnutls_rnd_level_t level, void *buf, gsize len)
{
  int rc = gnutls_rnd (level, buf, len);

  /* only fails when the system's entropy source is broken */
  if (rc < 0)
    g_error ("gnutls_rnd failed: %s", gnutls_strerror (rc));
}

static char *
random_base32_level (gnutls_rnd_level_t level, guint n_chars)
{
  g_autofree guint8 *bytes = g_malloc (n_chars > 0 ? n_chars : 1);
  char *out = g_malloc (n_chars + 1);
  guint i;

  random_bytes (level, bytes, n_chars);
  for (i = 0; i < n_chars; i++)
    out[i] = base32_alphabet[bytes[i] & 31];
  out[n_chars] = '\0';
  gnutls_memset (bytes, 0, n_chars);
  return out;
}

char *
box_random_base32 (guint n_chars)
{
  return random_base32_level (GNUTLS_RND_RANDOM, n_chars);
}

char *
box_generate_sandbox_id (void)
{
  g_autofree char *rnd = box_random_base32 (12);

  return g_strconcat ("sb-", rnd, NULL);
}

char *
box_generate_key_id (void)
{
  g_autofree char *rnd = box_random_base32 (12);

  return g_strconcat ("key-", rnd, NULL);
}

char *
box_generate_key_secret (void)
{
  char *rnd = random_base32_level (GNUTLS_RND_KEY, 32);
  char *secret = g_strconcat ("box_", rnd, NULL);

  gnutls_memset (rnd, 0, 32);
  g_free (rnd);
  return secret;
}

char *
box_generate_session_id (void)
{
  g_autofree char *rnd = box_random_base32 (10);

  return g_strconcat ("s-", rnd, NULL);
}

char *
box_secret_placeholder (const char *name, const char *prefix)
{
  g_autofree char *lower = g_ascii_strdown (name != NULL ? name : "", -1);

  return g_strconcat (prefix != NULL ? prefix : "", "__box_", lower, "__", NULL);
}

/* Words of at most 8 lowercase letters: "<adjective>-<noun>-<4 digits>"
 * is then at most 22 characters, so a generated name is valid with any
 * project name (32 + 22 = 54). */
static const char *const adjectives[] = {
  "amber", "ancient", "bold", "brave", "breezy", "bright", "brisk", "calm",
  "clever", "cosmic", "crisp", "curious", "dapper", "daring", "eager", "early",
  "electric", "fancy", "fearless", "gentle", "giant", "glad", "golden", "grand",
  "happy", "hidden", "honest", "humble", "jolly", "keen", "kind", "lively",
  "lucky", "lunar", "mellow", "mighty", "misty", "modest", "noble", "nimble",
  "patient", "placid", "plucky", "polite", "proud", "quick", "quiet", "rapid",
  "rosy", "rustic", "shiny", "silent", "silver", "sleek", "snowy", "solar",
  "steady", "sunny", "swift", "tidy", "vivid", "warm", "witty", "zesty",
};

static const char *const nouns[] = {
  "acorn", "anchor", "badger", "beacon", "birch", "bison", "breeze", "brook",
  "canyon", "cedar", "comet", "coral", "crane", "delta", "dune", "ember",
  "falcon", "fern", "fjord", "forest", "galaxy", "garnet", "glacier", "harbor",
  "hazel", "heron", "island", "jaguar", "lagoon", "lantern", "lark", "maple",
  "meadow", "meteor", "nebula", "oasis", "orchid", "otter", "panda", "pebble",
  "pine", "planet", "prairie", "quartz", "raven", "reef", "ridge", "river",
  "saturn", "sequoia", "spruce", "summit", "thistle", "tiger", "tundra", "valley",
  "walrus", "willow", "wombat", "yarrow", "zephyr", "koala", "lynx", "orbit",
};

static guint32
random_below (guint32 n)
{
  guint32 limit = G_MAXUINT32 - (G_MAXUINT32 % n);
  guint32 v;

  do
    random_bytes (GNUTLS_RND_NONCE, &v, sizeof v);
  while (v >= limit);
  return v % n;
}

char *
box_generate_sandbox_name (void)
{
  return g_strdup_printf ("%s-%s-%04u", adjectives[random_below (G_N_ELEMENTS (adjectives))],
                          nouns[random_below (G_N_ELEMENTS (nouns))], random_below (10000));
}
