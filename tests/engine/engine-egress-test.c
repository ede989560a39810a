/* engine-egress-test.c: egress rules through the engine.
 *
 * Without a network plugin that enforces rules (network=none, the
 * fixture's default) a non-empty list is 501 unsupported at create and on
 * PATCH and changes nothing.  With the nftables plugin (real: its table,
 * sets and records, in a network namespace of this process's own, so the
 * machine's networking is never touched; root only, skipped otherwise)
 * rules are accepted and handed to the plugin before the sandbox's code
 * runs: at create, at once on PATCH of a running sandbox, and at the wake
 * of a paused or stopped one.  The dummy hypervisor attaches nothing, so
 * the test attaches as a hypervisor would, before or after.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* unshare() */
#endif
#include "config.h"

#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "box-requests.h"
#include "engine-fixture.h"

#define ADD(path, func) g_test_add (path, Ef, NULL, ef_set_up, func, ef_tear_down)
#define ADD_NFT(path, func) g_test_add (path, Ef, NULL, nft_set_up, func, ef_tear_down)

#define RULES "{\"network\": {\"egress\": [{\"domain\": \"api.example.com\", \"action\": \"allow\"}]}}"
#define NO_RULES "{\"network\": {\"egress\": []}}"

static const char *nft_skip;

static void
test_unsupported (Ef *ef, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxSandbox) after = NULL;

  g_assert_null (box_engine_get_network (ef->engine));
  g_assert_null (ef_create (ef, RULES, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_clear_error (&error);
  ef_assert_events (ef, "");   /* nothing was created */

  sb = ef_create_ok (ef, NO_RULES);
  g_assert_null (ef_update (ef, sb->id, RULES, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  g_clear_error (&error);
  after = box_engine_get_sandbox (ef->engine, "p", sb->id, NULL);
  g_assert_cmpuint (after->egress->len, ==, 0);
}

/* ---- with the nftables plugin ---- */

static void
nft_configure (BoxConfig *config)
{
  g_free (config->network);
  config->network = g_strdup ("nftables");
  g_key_file_set_string (config->keyfile, "plugin.nftables", "dns_upstream", "192.0.2.1");
  config->secret_key = TRUE;
  g_free (config->secret_key_file);
  config->secret_key_file = g_build_filename (config->data_dir, "secret.key", NULL);
}

static void
nft_set_up (Ef *ef, gconstpointer user_data)
{
  if (nft_skip == NULL)
    ef->configure = nft_configure;
  ef_set_up (ef, user_data);
}

static gboolean
skipped (Ef *ef)
{
  if (nft_skip == NULL)
    return FALSE;
  g_test_skip (nft_skip);
  return TRUE;
}

static BoxNetwork *
network (Ef *ef)
{
  BoxNetwork *net = box_engine_get_network (ef->engine);

  g_assert_nonnull (net);
  g_assert_true (box_network_enforces_egress (net));
  return net;
}

/* whether @id's tap is in @restricted */
static gboolean
restricted (Ef *ef, const char *id)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxNetAttachment) att = box_network_attach (network (ef), id, &error);
  g_autofree char *out = NULL;
  g_autofree char *needle = NULL;
  const char *argv[] = { "nft", "list", "set", "inet", "box", "restricted", NULL };

  g_assert_no_error (error);
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH |
                               G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, NULL, &error));
  g_assert_no_error (error);
  needle = g_strdup_printf ("\"%s\"", att->ifname);
  return strstr (out, needle) != NULL;
}

static void
update_ok (Ef *ef, const char *id, const char *json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) after = ef_update (ef, id, json, &error);

  g_assert_no_error (error);
}

static void
test_accepted (Ef *ef, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxSandbox) other = NULL;
  g_autoptr(BoxSandbox) after = NULL;

  if (skipped (ef))
    return;
  /* given at create, before anything is attached: applied at the attach */
  sb = ef_create_ok (ef, RULES);
  g_assert_cmpuint (sb->egress->len, ==, 1);
  g_assert_true (restricted (ef, sb->id));

  /* PATCH on a running sandbox: at once */
  update_ok (ef, sb->id, NO_RULES);
  g_assert_false (restricted (ef, sb->id));

  /* PATCH while paused: kept, applied at the wake */
  other = ef_create_ok (ef, NO_RULES);
  g_assert_false (restricted (ef, other->id));
  ef_change_ok (ef, other->id, BOX_STATE_REQUEST_PAUSE);
  update_ok (ef, other->id, RULES);
  g_assert_false (restricted (ef, other->id));
  ef_change_ok (ef, other->id, BOX_STATE_REQUEST_WAKE);
  g_assert_true (restricted (ef, other->id));

  /* and while stopped, at the boot */
  ef_change_ok (ef, other->id, BOX_STATE_REQUEST_STOP);
  update_ok (ef, other->id, NO_RULES);
  g_assert_true (restricted (ef, other->id));
  ef_change_ok (ef, other->id, BOX_STATE_REQUEST_WAKE);
  g_assert_false (restricted (ef, other->id));

  /* invalid rules are still 400 */
  after = ef_update (ef, other->id, "{\"network\": {\"egress\": [{\"domain\": \"A.com\", "
                                     "\"action\": \"allow\"}]}}", &error);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
}

/* the rules in the plugin's record of @id, as JSON text */
static char *
record_text (Ef *ef, const char *id)
{
  g_autofree char *name = g_strconcat (id, ".json", NULL);
  g_autofree char *path = g_build_filename (ef->data_dir, "nftables", name, NULL);
  char *text = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  return text;
}

static void
put_secret (Ef *ef, const char *name, const char *json)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (ef_put_secret (ef, name, json, &error));
  g_assert_no_error (error);
}

/* A restricted sandbox's secrets' hosts are allowed on 443 as if by a
 * rule, and count toward the 1000; an unrestricted one gets no rules. */
static void
test_secret_hosts (Ef *ef, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxSandbox) open = NULL;
  g_autoptr(GString) many = g_string_new ("{\"secrets\": [\"TOKEN\"], \"network\": {\"egress\": [");
  g_autofree char *text = NULL;
  g_autofree char *open_text = NULL;

  if (skipped (ef))
    return;
  put_secret (ef, "TOKEN", "{\"value\": \"v\", \"hosts\": [\"api.secret.test/v1\", "
                           "\"*.secret.test\"]}");
  sb = ef_create_ok (ef, "{\"secrets\": [\"TOKEN\"], \"network\": {\"egress\": "
                         "[{\"domain\": \"a.test\", \"action\": \"allow\"}]}}");
  g_assert_true (restricted (ef, sb->id));
  text = record_text (ef, sb->id);
  g_assert_nonnull (strstr (text, "\"api.secret.test\""));
  g_assert_nonnull (strstr (text, "\"*.secret.test\""));
  g_assert_null (strstr (text, "/v1"));
  g_assert_cmpuint (sb->egress->len, ==, 1);   /* the sandbox shows its own rules only */

  open = ef_create_ok (ef, "{\"secrets\": [\"TOKEN\"]}");
  g_assert_false (restricted (ef, open->id));
  open_text = record_text (ef, open->id);
  g_assert_null (strstr (open_text, "secret.test"));

  /* 999 rules and two hosts: over the limit, refused, nothing created */
  for (guint i = 0; i < 999; i++)
    g_string_append_printf (many, "%s{\"domain\": \"h%u.test\", \"action\": \"allow\"}",
                            i > 0 ? ", " : "", i);
  g_string_append (many, "]}}");
  g_assert_null (ef_create (ef, many->str, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "hosts of the sandbox's secrets"));
}

/* A PUT that changes a secret's hosts hands every restricted user its
 * rules again (running: at once; paused: again at its wake), and one that
 * would take a user over the 1000 is 400 and changes nothing. */
static void
test_secret_put_repushes (Ef *ef, gconstpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxSandbox) sb = NULL;
  g_autoptr(BoxSandbox) paused = NULL;
  g_autoptr(BoxSandbox) open = NULL;
  g_autoptr(BoxSandbox) full = NULL;
  g_autoptr(BoxSecret) kept = NULL;
  g_autoptr(GString) many = g_string_new ("{\"secrets\": [\"TOKEN\"], \"network\": {\"egress\": [");
  char *text;

  if (skipped (ef))
    return;
  put_secret (ef, "TOKEN", "{\"value\": \"v\", \"hosts\": [\"old.secret.test\"]}");
  sb = ef_create_ok (ef, "{\"secrets\": [\"TOKEN\"], \"network\": {\"egress\": "
                         "[{\"domain\": \"a.test\", \"action\": \"allow\"}]}}");
  paused = ef_create_ok (ef, "{\"secrets\": [\"TOKEN\"], \"network\": {\"egress\": "
                             "[{\"domain\": \"b.test\", \"action\": \"allow\"}]}}");
  open = ef_create_ok (ef, "{\"secrets\": [\"TOKEN\"]}");
  g_assert_true (restricted (ef, sb->id));
  g_assert_true (restricted (ef, paused->id));
  g_assert_false (restricted (ef, open->id));
  ef_change_ok (ef, paused->id, BOX_STATE_REQUEST_PAUSE);

  /* the running sandbox's rules change at once: the new host in, the old out */
  put_secret (ef, "TOKEN", "{\"value\": \"v2\", \"hosts\": [\"new.secret.test/v1\"]}");
  text = record_text (ef, sb->id);
  g_assert_nonnull (strstr (text, "\"new.secret.test\""));
  g_assert_null (strstr (text, "old.secret.test"));
  g_assert_nonnull (strstr (text, "\"a.test\""));
  g_free (text);
  g_assert_true (restricted (ef, sb->id));
  /* the paused one has them when it wakes */
  ef_change_ok (ef, paused->id, BOX_STATE_REQUEST_WAKE);
  text = record_text (ef, paused->id);
  g_assert_nonnull (strstr (text, "\"new.secret.test\""));
  g_assert_null (strstr (text, "old.secret.test"));
  g_free (text);
  /* an unrestricted user stays unrestricted */
  g_assert_false (restricted (ef, open->id));
  text = record_text (ef, open->id);
  g_assert_null (strstr (text, "secret.test"));
  g_free (text);

  /* 998 rules and one host: 999; a PUT giving TOKEN three hosts would be
   * 1001: 400 as for a PATCH, the secret and every sandbox's rules as before */
  for (guint i = 0; i < 998; i++)
    g_string_append_printf (many, "%s{\"domain\": \"h%u.test\", \"action\": \"allow\"}",
                            i > 0 ? ", " : "", i);
  g_string_append (many, "]}}");
  full = ef_create_ok (ef, many->str);
  g_assert_true (restricted (ef, full->id));
  g_assert_false (ef_put_secret (ef, "TOKEN", "{\"value\": \"v3\", \"hosts\": [\"x.secret.test\", "
                                  "\"y.secret.test\", \"z.secret.test\"]}", &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_true (g_str_has_prefix (error->message, "too many network rules: 1001 counting "
                                   "defaults expanded and the hosts of the sandbox's secrets"));
  g_assert_nonnull (strstr (error->message, full->name));
  g_clear_error (&error);
  kept = box_engine_get_secret (ef->engine, "p", "TOKEN", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (kept->hosts[0], ==, "new.secret.test/v1");
  g_assert_null (kept->hosts[1]);
  text = record_text (ef, sb->id);
  g_assert_nonnull (strstr (text, "\"new.secret.test\""));
  g_assert_null (strstr (text, "x.secret.test"));
  g_free (text);
  text = record_text (ef, full->id);
  g_assert_nonnull (strstr (text, "\"new.secret.test\""));
  g_assert_null (strstr (text, "x.secret.test"));
  g_free (text);

  /* two hosts make 1000: accepted and applied */
  put_secret (ef, "TOKEN", "{\"value\": \"v4\", \"hosts\": [\"x.secret.test\", \"y.secret.test\"]}");
  text = record_text (ef, full->id);
  g_assert_nonnull (strstr (text, "\"y.secret.test\""));
  g_assert_null (strstr (text, "new.secret.test"));
  g_free (text);
}

/* A namespace of our own plays the node; NULL, or why the test skips. */
static const char *
enter_own_netns (void)
{
  int fd;

  if (geteuid () != 0)
    return "needs root (a network namespace, nftables)";
  fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return "needs /dev/net/tun";
  close (fd);
  if (!g_file_test ("/usr/sbin/nft", G_FILE_TEST_IS_EXECUTABLE) &&
      g_find_program_in_path ("nft") == NULL)
    return "needs nft(8)";
  if (unshare (CLONE_NEWNET) != 0)
    return "cannot make a network namespace";
  return NULL;
}

int
main (int argc, char **argv)
{
  ef_init (&argc, &argv);
  nft_skip = enter_own_netns ();
  ADD ("/engine-egress/unsupported", test_unsupported);
  ADD_NFT ("/engine-egress/accepted", test_accepted);
  ADD_NFT ("/engine-egress/secret-hosts", test_secret_hosts);
  ADD_NFT ("/engine-egress/secret-put-repushes", test_secret_put_repushes);
  return g_test_run ();
}
