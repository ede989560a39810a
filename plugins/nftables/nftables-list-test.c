/* nftables-list-test.c: the listing of the `resolved` set parsed
 * (box_nftables_list_parse()): nft's own JSON for elements with and
 * without timeouts, one guest's elements kept and sorted, and every
 * malformed listing refused rather than half read. */
#include "config.h"

#include <string.h>

#include "box-error.h"
#include "box-network.h"
#include "box-nftables-list.h"

#define META "{\"metainfo\": {\"version\": \"1.0.6\", \"json_schema_version\": 1}}"
#define SET(elems) \
  "{\"nftables\": [" META ", {\"set\": {\"family\": \"inet\", \"name\": \"resolved\", " \
  "\"table\": \"box\", \"type\": [\"ipv4_addr\", \"ipv4_addr\", \"inet_service\"], " \
  "\"handle\": 1, \"flags\": [\"timeout\"]" elems "}}]}"

/* as nft 1.0.6 prints it (see nftables-netns-list.c for the real thing) */
static const char *const sample = SET (
  ", \"elem\": ["
  "{\"elem\": {\"val\": {\"concat\": [\"10.222.0.6\", \"5.6.7.8\", 22]}, \"timeout\": 3600, \"expires\": 3599}}, "
  "{\"elem\": {\"val\": {\"concat\": [\"10.222.0.2\", \"9.9.9.9\", 443]}, \"timeout\": 300, \"expires\": 299}}, "
  "{\"concat\": [\"10.222.0.2\", \"9.9.9.9\", 80]}, "
  "{\"elem\": {\"val\": {\"concat\": [\"10.222.0.2\", \"1.2.3.4\", \"8443\"]}, \"timeout\": 5, \"expires\": 0}}]");

static void
test_sample (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) two = box_nftables_list_parse (sample, "10.222.0.2", &error);
  g_autoptr(GPtrArray) six = NULL;
  g_autoptr(GPtrArray) none = NULL;
  const BoxNetAllowed *e;

  g_assert_no_error (error);
  g_assert_cmpuint (two->len, ==, 3);
  e = g_ptr_array_index (two, 0);
  g_assert_cmpstr (e->address, ==, "1.2.3.4");
  g_assert_cmpuint (e->port, ==, 8443);
  g_assert_cmpuint (e->expires_s, ==, 0);
  e = g_ptr_array_index (two, 1);
  g_assert_cmpstr (e->address, ==, "9.9.9.9");
  g_assert_cmpuint (e->port, ==, 80);
  g_assert_cmpuint (e->expires_s, ==, G_MAXUINT);   /* no timeout */
  e = g_ptr_array_index (two, 2);
  g_assert_cmpuint (e->port, ==, 443);
  g_assert_cmpuint (e->expires_s, ==, 299);

  six = box_nftables_list_parse (sample, "10.222.0.6", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (six->len, ==, 1);
  none = box_nftables_list_parse (sample, "10.222.0.10", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (none->len, ==, 0);
}

static void
test_empty (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list = box_nftables_list_parse (SET (""), "10.222.0.2", &error);

  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, 0);
}

static void
test_malformed (void)
{
#define ONE(e) SET (", \"elem\": [" e "]")
  static const char *const bad[] = {
    "", "not json", "[]", "{}", "{\"nftables\": {}}",
    "{\"nftables\": [" META "]}",                                    /* no set */
    "{\"nftables\": [{\"set\": 1}]}",
    "{\"nftables\": [{\"set\": {}}, {\"set\": {}}]}",                  /* two sets */
    SET (", \"elem\": {}"),
    ONE ("1"),
    ONE ("{\"concat\": [\"10.222.0.2\", \"1.2.3.4\"]}"),
    ONE ("{\"concat\": [\"10.222.0.2\", \"1.2.3.4\", 22, 1]}"),
    ONE ("{\"concat\": [\"10.222.0.2\", \"1.2.3\", 22]}"),
    ONE ("{\"concat\": [\"10.222.0.2\", \"::1\", 22]}"),
    ONE ("{\"concat\": [\"10.222.0.2\", 16909060, 22]}"),
    ONE ("{\"concat\": [\"10.222.0.2\", \"1.2.3.4\", 0]}"),
    ONE ("{\"concat\": [\"10.222.0.2\", \"1.2.3.4\", 65536]}"),
    ONE ("{\"concat\": [\"10.222.0.2\", \"1.2.3.4\", \"ssh\"]}"),
    ONE ("{\"concat\": [\"10.222.0.2\", \"1.2.3.4\", 22.5]}"),
    ONE ("{\"elem\": 1}"),
    ONE ("{\"elem\": {\"timeout\": 5}}"),
    ONE ("{\"elem\": {\"val\": {\"concat\": [\"10.222.0.2\", \"1.2.3.4\", 22]}, \"expires\": -1}}"),
    ONE ("{\"elem\": {\"val\": {\"concat\": [\"10.222.0.2\", \"1.2.3.4\", 22]}, \"expires\": \"1s\"}}"),
    ONE ("{\"prefix\": {\"addr\": \"10.0.0.0\", \"len\": 8}}"),
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) list = box_nftables_list_parse (bad[i], "10.222.0.2", &error);

    if (list != NULL)
      g_error ("accepted: %s", bad[i]);
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
    g_assert_true (g_str_has_prefix (error->message, "nftables: unexpected listing"));
  }
  /* another guest's malformed element is refused too: the listing is read whole */
  {
    g_autoptr(GError) error = NULL;

    g_assert_null (box_nftables_list_parse (ONE ("{\"concat\": [\"10.222.0.9\", \"1.2.3\", 22]}"),
                                            "10.222.0.2", &error));
    g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  }
#undef ONE
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/nftables-list/sample", test_sample);
  g_test_add_func ("/nftables-list/empty", test_empty);
  g_test_add_func ("/nftables-list/malformed", test_malformed);
  return g_test_run ();
}
