/* nftables-test.c: the nftables plugin's pure logic: subnets, names, MACs,
 * the ruleset text, attachment records and DNS message helpers.  No
 * kernel calls (nftables-netns-test.c does the real thing). */
#include "config.h"

#include <glib/gstdio.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <string.h>

#include "box-error.h"
#include "box-nftables-dns.h"
#include "box-nftables-egress.h"
#include "box-nftables-link.h"
#include "box-nftables-pool.h"
#include "box-nftables-record.h"
#include "box-nftables-ruleset.h"

static char *
ip (guint32 addr)
{
  return box_nftables_ipv4_to_string (addr);
}

static void
assert_ip (guint32 addr, const char *expected)
{
  g_autofree char *str = ip (addr);
  g_assert_cmpstr (str, ==, expected);
}

static void
test_cidr (void)
{
  g_autoptr(GError) error = NULL;
  guint32 network, addr;
  guint prefix;

  g_assert_true (box_nftables_cidr_parse ("10.222.0.0/16", &network, &prefix, &error));
  g_assert_no_error (error);
  assert_ip (network, "10.222.0.0");
  g_assert_cmpuint (prefix, ==, 16);
  g_assert_true (box_nftables_cidr_parse ("198.51.100.7", &network, &prefix, NULL));
  g_assert_cmpuint (prefix, ==, 32);

  g_assert_false (box_nftables_cidr_parse ("10.222.0.1/16", &network, &prefix, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "host bits"));
  g_clear_error (&error);
  g_assert_false (box_nftables_cidr_parse ("10.222.0.0/33", &network, &prefix, &error));
  g_clear_error (&error);
  g_assert_false (box_nftables_cidr_parse ("10.222/16", &network, &prefix, &error));
  g_clear_error (&error);
  g_assert_false (box_nftables_cidr_parse ("fd00::/8", &network, &prefix, &error));
  g_clear_error (&error);
  g_assert_false (box_nftables_cidr_parse ("10.0.0.0/-1", &network, &prefix, &error));
  g_clear_error (&error);

  g_assert_true (box_nftables_ipv4_parse ("255.255.255.255", &addr));
  g_assert_cmphex (addr, ==, 0xffffffffu);
  g_assert_false (box_nftables_ipv4_parse ("1.2.3", &addr));
  g_assert_cmphex (box_nftables_prefix_mask (0), ==, 0);
  g_assert_cmphex (box_nftables_prefix_mask (30), ==, 0xfffffffcu);
  g_assert_cmphex (box_nftables_prefix_mask (32), ==, 0xffffffffu);
}

static void
test_pool_subnets (void)
{
  g_autoptr(GError) error = NULL;
  BoxNftablesPool pool;
  BoxNftablesSubnet subnet;

  g_assert_true (box_nftables_pool_init (&pool, "10.222.0.0/16", 30, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (box_nftables_pool_n_subnets (&pool), ==, 16384);
  box_nftables_pool_subnet (&pool, 0, &subnet);
  assert_ip (subnet.network, "10.222.0.0");
  assert_ip (subnet.gateway, "10.222.0.1");
  assert_ip (subnet.address, "10.222.0.2");
  g_assert_cmpuint (subnet.prefix, ==, 30);
  box_nftables_pool_subnet (&pool, 16383, &subnet);
  assert_ip (subnet.network, "10.222.255.252");
  assert_ip (subnet.gateway, "10.222.255.253");
  assert_ip (subnet.address, "10.222.255.254");

  g_assert_true (box_nftables_pool_init (&pool, "10.222.0.0/16", 31, &error));
  g_assert_cmpuint (box_nftables_pool_n_subnets (&pool), ==, 32768);
  box_nftables_pool_subnet (&pool, 1, &subnet);
  assert_ip (subnet.gateway, "10.222.0.2");
  assert_ip (subnet.address, "10.222.0.3");
  g_assert_cmpuint (subnet.prefix, ==, 31);

  g_assert_false (box_nftables_pool_init (&pool, "10.222.0.0/16", 29, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (box_nftables_pool_init (&pool, "10.222.0.0/31", 30, &error));
  g_assert_nonnull (strstr (error->message, "smaller"));
  g_clear_error (&error);
  g_assert_false (box_nftables_pool_init (&pool, "10.0.0.0/7", 30, &error));
  g_clear_error (&error);
  g_assert_true (box_nftables_pool_init (&pool, "192.168.5.0/30", 30, &error));
  g_assert_cmpuint (box_nftables_pool_n_subnets (&pool), ==, 1);
}

static BoxNftablesSubnet *
subnet_new (const char *network, guint prefix)
{
  BoxNftablesSubnet *subnet = g_new0 (BoxNftablesSubnet, 1);

  g_assert_true (box_nftables_ipv4_parse (network, &subnet->network));
  subnet->prefix = prefix;
  return subnet;
}

static void
test_pool_allocate (void)
{
  g_autoptr(GPtrArray) used = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error = NULL;
  BoxNftablesPool pool;
  guint32 index;

  g_assert_true (box_nftables_pool_init (&pool, "10.222.0.0/28", 30, NULL));
  g_assert_true (box_nftables_pool_allocate (&pool, used, &index, &error));
  g_assert_cmpuint (index, ==, 0);

  /* the lowest free index; holes are reused */
  g_ptr_array_add (used, subnet_new ("10.222.0.0", 30));
  g_ptr_array_add (used, subnet_new ("10.222.0.8", 30));
  g_assert_true (box_nftables_pool_allocate (&pool, used, &index, &error));
  g_assert_cmpuint (index, ==, 1);
  /* a /31 left by an earlier configuration still blocks its /30;
   * subnets outside the pool do not matter */
  g_ptr_array_add (used, subnet_new ("10.222.0.6", 31));
  g_ptr_array_add (used, subnet_new ("10.1.0.4", 30));
  g_assert_true (box_nftables_pool_allocate (&pool, used, &index, &error));
  g_assert_cmpuint (index, ==, 3);
  g_ptr_array_add (used, subnet_new ("10.222.0.12", 30));
  g_assert_false (box_nftables_pool_allocate (&pool, used, &index, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_CAPACITY);
  g_clear_error (&error);

  /* a /30 from an earlier configuration blocks both /31s it covers */
  g_ptr_array_set_size (used, 0);
  g_assert_true (box_nftables_pool_init (&pool, "10.222.0.0/29", 31, NULL));
  g_ptr_array_add (used, subnet_new ("10.222.0.0", 30));
  g_assert_true (box_nftables_pool_allocate (&pool, used, &index, &error));
  g_assert_cmpuint (index, ==, 2);
}

static void
test_names (void)
{
  g_autofree char *a = box_nftables_ifname_for_id ("bx", "sb-abcdefgh2345", 0);
  g_autofree char *a1 = box_nftables_ifname_for_id ("bx", "sb-abcdefgh2345", 1);
  g_autofree char *a2 = box_nftables_ifname_for_id ("bx", "sb-abcdefgh2345", 2);
  g_autofree char *pool = box_nftables_ifname_for_id ("bxz", "pool-slot-17", 0);
  g_autofree char *pool_again = box_nftables_ifname_for_id ("bxz", "pool-slot-17", 0);
  g_autofree char *odd = box_nftables_ifname_for_id ("bx", "sb-ABCDEFGH2345", 0);
  g_autofree char *mac = box_nftables_mac_for_id ("sb-abcdefgh2345");
  g_autofree char *mac_again = box_nftables_mac_for_id ("sb-abcdefgh2345");
  g_autofree char *mac_other = box_nftables_mac_for_id ("sb-abcdefgh2346");

  /* a sandbox ID shows in its tap's name */
  g_assert_cmpstr (a, ==, "bxabcdefgh2345");
  /* later attempts and other IDs: prefix + 12 hex digits, stable */
  g_assert_cmpuint (strlen (a1), ==, 14);
  g_assert_true (g_str_has_prefix (a1, "bx"));
  g_assert_cmpstr (a1, !=, a);
  g_assert_cmpstr (a1, !=, a2);
  g_assert_cmpuint (strlen (pool), ==, 15);   /* IFNAMSIZ - 1 */
  g_assert_cmpstr (pool, ==, pool_again);
  g_assert_cmpuint (strlen (odd), ==, 14);
  g_assert_cmpstr (odd, !=, "bxABCDEFGH2345");
  for (const char *p = pool + 3; *p != '\0'; p++)
    g_assert_true (g_ascii_isxdigit (*p));

  g_assert_true (box_nftables_ifname_prefix_is_valid ("bx"));
  g_assert_false (box_nftables_ifname_prefix_is_valid ("bxyz"));
  g_assert_false (box_nftables_ifname_prefix_is_valid ("b1"));
  g_assert_false (box_nftables_ifname_prefix_is_valid (""));

  g_assert_true (g_str_has_prefix (mac, "52:54:00:"));
  g_assert_cmpuint (strlen (mac), ==, 17);
  g_assert_cmpstr (mac, ==, mac_again);
  g_assert_cmpstr (mac, !=, mac_other);

  g_assert_true (box_sandbox_id_is_valid ("sb-abcdefgh2345"));
  g_assert_true (box_sandbox_id_is_valid ("pool-1"));
  g_assert_false (box_sandbox_id_is_valid ("../etc"));
  g_assert_false (box_sandbox_id_is_valid ("-x"));
  g_assert_false (box_sandbox_id_is_valid (""));
  g_assert_false (box_sandbox_id_is_valid (NULL));
}

/* restricted: web traffic to the proxy, which alone may take it; then
 * only TCP, new connections only to what was resolved, a reset at once */
static const char *const restricted_rules[] = {
  "set restricted { type ifname; }",
  "set resolved { type ipv4_addr . ipv4_addr . inet_service; flags timeout; }",
  "iifname @restricted tcp dport 80 redirect to :10080\n",
  "iifname @restricted tcp dport 443 redirect to :10443\n",
  "iifname @restricted tcp dport { 10080, 10443 } ct status dnat accept",
  "    tcp dport { 10080, 10443 } drop\n  }\n  chain input_from_box",
  "    ip daddr @blocked drop\n"
  "    iifname @restricted jump forward_restricted\n"
  "    accept\n",
  "set refused_log { type ipv4_addr; size 65535; flags dynamic,timeout; timeout 1m; }",
  "  chain forward_restricted {\n"
  "    meta l4proto tcp ct state established,related accept\n"
  "    meta l4proto tcp ip saddr . ip daddr . tcp dport @resolved accept\n"
  "    update @refused_log { ip saddr limit rate 5/second burst 10 packets } "
  "log group 5740 snaplen 80\n"
  "    meta l4proto tcp reject with tcp reset\n"
  "    drop\n"
  "  }\n",
};

static void
test_ruleset (void)
{
  g_autoptr(GArray) members = g_array_new (FALSE, TRUE, sizeof (BoxNftablesMember));
  const char *blocked[] = { "198.51.100.0/24", NULL };
  BoxNftablesMember m1 = { "bxaaaaaaaaaaaa", "10.222.0.2" };
  BoxNftablesMember m2 = { "bxbbbbbbbbbbbb", "10.222.0.6", TRUE };
  BoxNftablesRuleset ruleset = {
    .table = "box", .pool = "10.222.0.0/16", .ifname_prefix = "bx", .dns_port = 10053,
    .proxy_http_port = 10080, .proxy_tls_port = 10443, .log_group = 5740,
    .blocked = blocked, .members = members,
  };
  g_autofree char *text = NULL;
  g_autofree char *empty = NULL;
  g_autofree char *add = NULL;
  g_autofree char *remove = NULL;
  g_autofree char *uninstall = NULL;
  g_autofree char *restrict_ = NULL;
  g_autofree char *unrestrict = NULL;
  g_autoptr(GString) resolved = g_string_new (NULL);
  const char *delete_at, *define_at;

  g_array_append_val (members, m1);
  g_array_append_val (members, m2);
  text = box_nftables_ruleset_install (&ruleset);

  /* idempotent atomic replace: create-if-missing, delete, define */
  g_assert_true (g_str_has_prefix (text, "table inet box {}\ndelete table inet box\n"));
  delete_at = strstr (text, "delete table inet box");
  define_at = strstr (text, "table inet box {\n");
  g_assert_nonnull (define_at);
  g_assert_true (define_at > delete_at);

  /* sets, not a rule per sandbox */
  g_assert_nonnull (strstr (text, "set taps { type ifname; }"));
  g_assert_nonnull (strstr (text, "set guests { type ifname . ipv4_addr; }"));
  g_assert_nonnull (strstr (text, "add element inet box taps { \"bxaaaaaaaaaaaa\" }"));
  g_assert_nonnull (strstr (text, "add element inet box guests { \"bxbbbbbbbbbbbb\" . 10.222.0.6 }"));
  ruleset.members = NULL;
  empty = box_nftables_ruleset_install (&ruleset);
  g_assert_nonnull (strstr (text, "add element inet box restricted { \"bxbbbbbbbbbbbb\" }"));
  g_assert_null (strstr (text, "restricted { \"bxaaaaaaaaaaaa\" }"));
  g_assert_cmpuint (strlen (text) - strlen (empty), ==,
                    2 * strlen ("add element inet box taps { \"bxaaaaaaaaaaaa\" }\n"
                                "add element inet box guests { \"bxaaaaaaaaaaaa\" . 10.222.0.2 }\n") +
                    strlen ("add element inet box restricted { \"bxbbbbbbbbbbbb\" }\n"));
  for (guint i = 0; i < G_N_ELEMENTS (restricted_rules); i++) {
    if (strstr (text, restricted_rules[i]) == NULL)
      g_error ("the ruleset lacks \"%s\"", restricted_rules[i]);
  }

  /* every private, shared, loopback, link-local, multicast and reserved
   * range, and the configured ones */
  for (const char *const *p = box_nftables_blocked_builtin (); *p != NULL; p++)
    g_assert_nonnull (strstr (text, *p));
  g_assert_nonnull (strstr (text, "10.0.0.0/8"));
  g_assert_nonnull (strstr (text, "169.254.0.0/16"));
  g_assert_nonnull (strstr (text, ", 198.51.100.0/24 }"));
  g_assert_nonnull (strstr (text, "ip daddr @blocked drop"));

  /* nothing in but replies; no IPv6; anti-spoofing; fail closed */
  g_assert_nonnull (strstr (text, "oifname @taps ct state established,related accept\n"
                                  "    oifname @taps drop\n"));
  g_assert_nonnull (strstr (text, "meta nfproto ipv6 drop"));
  g_assert_nonnull (strstr (text, "iifname . ip saddr != @guests drop"));
  g_assert_nonnull (strstr (text, "iifname \"bx*\" iifname != @taps drop"));
  g_assert_nonnull (strstr (text, "oifname \"bx*\" oifname != @taps drop"));
  /* the node: only the redirected resolver */
  g_assert_nonnull (strstr (text, "th dport 53 redirect to :10053"));
  g_assert_nonnull (strstr (text, "th dport 10053 ct status dnat accept"));
  g_assert_nonnull (strstr (text, "    drop\n  }\n  chain forward"));
  /* the masquerade */
  g_assert_nonnull (strstr (text, "iifname @taps oifname != @taps masquerade"));

  add = box_nftables_ruleset_add_member ("box", "bxcc", "10.222.0.10");
  g_assert_cmpstr (add, ==, "add element inet box taps { \"bxcc\" }\n"
                            "add element inet box guests { \"bxcc\" . 10.222.0.10 }\n");
  remove = box_nftables_ruleset_remove_member ("box", "bxcc", "10.222.0.10");
  g_assert_true (g_str_has_prefix (remove, add));   /* add first: idempotent delete */
  g_assert_nonnull (strstr (remove, "delete element inet box taps { \"bxcc\" }\n"));
  g_assert_nonnull (strstr (remove, "delete element inet box guests { \"bxcc\" . 10.222.0.10 }\n"));
  g_assert_nonnull (strstr (remove, "delete element inet box restricted { \"bxcc\" }\n"));
  restrict_ = box_nftables_ruleset_set_restricted ("box", "bxcc", TRUE);
  g_assert_cmpstr (restrict_, ==, "add element inet box restricted { \"bxcc\" }\n");
  unrestrict = box_nftables_ruleset_set_restricted ("box", "bxcc", FALSE);
  g_assert_cmpstr (unrestrict, ==, "add element inet box restricted { \"bxcc\" }\n"
                                   "delete element inet box restricted { \"bxcc\" }\n");
  box_nftables_ruleset_append_resolved (resolved, "box", 0x0ade0002, 0xcb007101, 9000, 30);
  box_nftables_ruleset_append_resolved (resolved, "box", 0x0ade0002, 0xcb007101, 22, 0);
  g_assert_cmpstr (resolved->str, ==,
    "add element inet box resolved { 10.222.0.2 . 203.0.113.1 . 9000 timeout 1s }\n"
    "delete element inet box resolved { 10.222.0.2 . 203.0.113.1 . 9000 }\n"
    "add element inet box resolved { 10.222.0.2 . 203.0.113.1 . 9000 timeout 30s }\n"
    "add element inet box resolved { 10.222.0.2 . 203.0.113.1 . 22 timeout 1s }\n"
    "delete element inet box resolved { 10.222.0.2 . 203.0.113.1 . 22 }\n");
  uninstall = box_nftables_ruleset_uninstall ("box");
  g_assert_cmpstr (uninstall, ==, "table inet box {}\ndelete table inet box\n");

  g_assert_true (box_nftables_table_name_is_valid ("box"));
  g_assert_true (box_nftables_table_name_is_valid ("box_test2"));
  g_assert_false (box_nftables_table_name_is_valid ("box; flush ruleset"));
  g_assert_false (box_nftables_table_name_is_valid ("2box"));
  g_assert_false (box_nftables_table_name_is_valid (""));
}

static guint ignored_records;

/* Counts (and swallows) the "ignoring a network attachment record" warnings. */
static GLogWriterOutput
count_ignored (GLogLevelFlags log_level, const GLogField *fields, gsize n_fields,
               gpointer user_data)
{
  for (gsize i = 0; i < n_fields; i++) {
    if (g_strcmp0 (fields[i].key, "MESSAGE") == 0 && fields[i].length < 0 &&
        (log_level & G_LOG_LEVEL_WARNING) != 0 &&
        strstr (fields[i].value, "ignoring a network attachment record") != NULL &&
        strstr (fields[i].value, "sb-broken.json") != NULL) {
      ignored_records++;
      return G_LOG_WRITER_HANDLED;
    }
  }
  return g_log_writer_default (log_level, fields, n_fields, user_data);
}

static void
test_records (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("box-nft-test-XXXXXX", &error);
  g_autoptr(BoxNftablesRecord) record = box_nftables_record_new ("sb-abcdefgh2345");
  g_autoptr(BoxNftablesRecord) loaded = NULL;
  g_autoptr(BoxNetAttachment) attachment = NULL;
  g_autoptr(GPtrArray) all = NULL;
  g_autofree char *bad = NULL;
  g_autofree char *moved = NULL;

  g_assert_no_error (error);
  record->ifname = g_strdup ("bxabcdefgh2345");
  record->mac = g_strdup ("52:54:00:01:02:03");
  g_assert_true (box_nftables_ipv4_parse ("10.222.0.6", &record->subnet.address));
  g_assert_true (box_nftables_ipv4_parse ("10.222.0.5", &record->subnet.gateway));
  record->subnet.prefix = 30;
  record->created_at = 1700000000000000;
  g_assert_true (box_nftables_record_save (record, dir, &error));
  g_assert_no_error (error);

  loaded = box_nftables_record_load (dir, "sb-abcdefgh2345", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (loaded->ifname, ==, "bxabcdefgh2345");
  g_assert_cmpstr (loaded->mac, ==, "52:54:00:01:02:03");
  assert_ip (loaded->subnet.network, "10.222.0.4");
  assert_ip (loaded->subnet.gateway, "10.222.0.5");
  assert_ip (loaded->subnet.address, "10.222.0.6");
  g_assert_cmpuint (loaded->subnet.prefix, ==, 30);
  g_assert_cmpint (loaded->created_at, ==, 1700000000000000);
  g_assert_cmpuint (loaded->egress->len, ==, 0);

  attachment = box_nftables_record_to_attachment (loaded);
  g_assert_cmpstr (attachment->ifname, ==, "bxabcdefgh2345");
  g_assert_cmpstr (attachment->address, ==, "10.222.0.6");
  g_assert_cmpuint (attachment->prefix, ==, 30);
  g_assert_cmpstr (attachment->gateway, ==, "10.222.0.5");
  g_assert_cmpstr (attachment->dns[0], ==, "10.222.0.5");   /* the resolver is the gateway */
  g_assert_null (attachment->dns[1]);

  /* a broken file is skipped, not fatal; other names are ignored */
  bad = g_build_filename (dir, "sb-broken.json", NULL);
  g_assert_true (g_file_set_contents (bad, "{\"ifname\": \"x\"}", -1, NULL));
  ignored_records = 0;
  all = box_nftables_record_load_all (dir);
  g_assert_cmpuint (ignored_records, ==, 1);
  g_assert_cmpuint (all->len, ==, 1);

  /* a move is a rename: the attachment has exactly one owner */
  g_assert_true (box_nftables_record_move (dir, "sb-abcdefgh2345", "sb-zzzzzzzzzzzz", &error));
  g_assert_no_error (error);
  moved = g_build_filename (dir, "sb-zzzzzzzzzzzz.json", NULL);
  g_assert_true (g_file_test (moved, G_FILE_TEST_EXISTS));
  g_clear_pointer (&loaded, box_nftables_record_free);
  loaded = box_nftables_record_load (dir, "sb-abcdefgh2345", &error);
  g_assert_null (loaded);
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INTERNAL);
  g_clear_error (&error);

  g_assert_true (box_nftables_record_remove (dir, "sb-zzzzzzzzzzzz", &error));
  g_assert_true (box_nftables_record_remove (dir, "sb-zzzzzzzzzzzz", &error));   /* idempotent */
  g_assert_no_error (error);
  g_assert_false (g_file_test (moved, G_FILE_TEST_EXISTS));
  g_unlink (bad);
  g_rmdir (dir);
}

/* example.com A IN, id 0x1234, RD */
static const guint8 query_example[] = {
  0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0,
  0x00, 0x01, 0x00, 0x01,
};

static void
test_dns_messages (void)
{
  g_autoptr(GBytes) servfail = NULL;
  guint8 copy[sizeof query_example];
  const guint8 *answer;
  gsize len;

  g_assert_cmpint (box_nftables_dns_question_end (query_example, sizeof query_example), ==,
                   sizeof query_example);
  /* truncated, too short, two questions, a compression pointer */
  g_assert_cmpint (box_nftables_dns_question_end (query_example, sizeof query_example - 1), ==, -1);
  g_assert_cmpint (box_nftables_dns_question_end (query_example, 11), ==, -1);
  memcpy (copy, query_example, sizeof copy);
  copy[5] = 2;
  g_assert_cmpint (box_nftables_dns_question_end (copy, sizeof copy), ==, -1);
  memcpy (copy, query_example, sizeof copy);
  copy[12] = 0xc0;
  g_assert_cmpint (box_nftables_dns_question_end (copy, sizeof copy), ==, -1);
  g_assert_cmpint (box_nftables_dns_question_end (NULL, 0), ==, -1);

  servfail = box_nftables_dns_servfail (query_example, sizeof query_example);
  g_assert_nonnull (servfail);
  answer = g_bytes_get_data (servfail, &len);
  g_assert_cmpuint (len, ==, sizeof query_example);
  g_assert_cmphex (answer[0], ==, 0x12);
  g_assert_cmphex (answer[1], ==, 0x34);
  g_assert_cmphex (answer[2], ==, 0x81);          /* QR, RD */
  g_assert_cmphex (answer[3] & 0x0f, ==, 2);      /* SERVFAIL */
  g_assert_cmpmem (answer + 12, len - 12, query_example + 12, len - 12);
  /* no SERVFAIL for an answer */
  memcpy (copy, query_example, sizeof copy);
  copy[2] |= 0x80;
  g_assert_null (box_nftables_dns_servfail (copy, sizeof copy));
}

/* The answer to query_example with @n records of @type (1 A, 28 AAAA)
 * whose data is @rdata (@rdlen bytes each), the name compressed. */
static GByteArray *
answer_with (guint type, const guint8 *rdata, guint rdlen, guint n)
{
  GByteArray *msg = g_byte_array_new ();

  g_byte_array_append (msg, query_example, sizeof query_example);
  msg->data[2] |= 0x80;
  msg->data[7] = (guint8) n;
  for (guint i = 0; i < n; i++) {
    const guint8 rr[] = { 0xc0, 0x0c, 0, (guint8) type, 0, 1, 0, 0, 0x0e, 0x10, 0, (guint8) rdlen };
    g_byte_array_append (msg, rr, sizeof rr);
    g_byte_array_append (msg, rdata + i * rdlen, rdlen);
  }
  return msg;
}

static gboolean
v4_public (guint8 a, guint8 b, guint8 c, guint8 d, const char *const *blocked)
{
  const guint8 rdata[] = { 93, 184, 216, 34, a, b, c, d };   /* a public one first */
  g_autoptr(GByteArray) msg = answer_with (1, rdata, 4, 2);

  return box_nftables_dns_answer_is_public (msg->data, msg->len, blocked);
}

static gboolean
v6_public (const char *text)
{
  g_autoptr(GInetAddress) inet = g_inet_address_new_from_string (text);
  g_autoptr(GByteArray) msg = NULL;

  g_assert_nonnull (inet);
  msg = answer_with (28, g_inet_address_to_bytes (inet), 16, 1);
  return box_nftables_dns_answer_is_public (msg->data, msg->len, NULL);
}

static void
test_dns_answers (void)
{
  const char *const extra[] = { "203.0.113.0/24", NULL };
  const guint8 cname[] = { 3, 'w', 'w', 'w', 0xc0, 0x0c };
  g_autoptr(GBytes) refused = NULL;
  g_autoptr(GByteArray) msg = NULL;
  const guint8 *answer;
  gsize len;

  /* public addresses pass, one private address among them does not */
  g_assert_true (v4_public (8, 8, 8, 8, NULL));
  g_assert_true (v4_public (203, 0, 113, 80, NULL));
  g_assert_false (v4_public (10, 1, 2, 3, NULL));
  g_assert_false (v4_public (192, 168, 1, 1, NULL));
  g_assert_false (v4_public (172, 31, 255, 255, NULL));
  g_assert_true (v4_public (172, 32, 0, 1, NULL));
  g_assert_false (v4_public (127, 0, 0, 1, NULL));
  g_assert_false (v4_public (169, 254, 169, 254, NULL));
  g_assert_false (v4_public (100, 64, 0, 1, NULL));
  g_assert_false (v4_public (0, 0, 0, 0, NULL));
  g_assert_false (v4_public (224, 0, 0, 1, NULL));
  g_assert_false (v4_public (255, 255, 255, 255, NULL));
  /* the configured blocked networks count too */
  g_assert_false (v4_public (203, 0, 113, 80, extra));
  g_assert_true (v4_public (198, 51, 100, 1, extra));

  g_assert_true (v6_public ("2606:2800:220:1::1"));
  g_assert_false (v6_public ("::1"));
  g_assert_false (v6_public ("::"));
  g_assert_false (v6_public ("fd00::1"));
  g_assert_false (v6_public ("fe80::1"));
  g_assert_false (v6_public ("ff02::1"));
  g_assert_false (v6_public ("::ffff:10.0.0.1"));
  g_assert_false (v6_public ("64:ff9b::192.168.0.1"));
  g_assert_true (v6_public ("::ffff:8.8.8.8"));

  /* other record types are not addresses; a CNAME alone passes */
  msg = answer_with (5, cname, sizeof cname, 1);
  g_assert_true (box_nftables_dns_answer_is_public (msg->data, msg->len, NULL));
  g_clear_pointer (&msg, g_byte_array_unref);
  /* a private address in the additional section counts */
  {
    const guint8 rdata[] = { 10, 0, 0, 1 };
    msg = answer_with (1, rdata, 4, 1);
    msg->data[7] = 0;
    msg->data[11] = 1;
    g_assert_false (box_nftables_dns_answer_is_public (msg->data, msg->len, NULL));
    /* an A record of the wrong size, a truncated record: not readable */
    msg->data[11] = 0;
    msg->data[7] = 1;
    msg->data[msg->len - 5] = 3;
    g_assert_false (box_nftables_dns_answer_is_public (msg->data, msg->len, NULL));
    msg->data[msg->len - 5] = 4;
    g_assert_true (box_nftables_dns_answer_is_public (msg->data, msg->len - 1, NULL) == FALSE);
    g_clear_pointer (&msg, g_byte_array_unref);
  }
  g_assert_false (box_nftables_dns_answer_is_public (query_example, 11, NULL));

  refused = box_nftables_dns_refused (query_example, sizeof query_example);
  g_assert_nonnull (refused);
  answer = g_bytes_get_data (refused, &len);
  g_assert_cmpuint (len, ==, sizeof query_example);
  g_assert_cmphex (answer[2], ==, 0x81);          /* QR, RD */
  g_assert_cmphex (answer[3] & 0x0f, ==, 5);      /* REFUSED */
  g_assert_cmpmem (answer + 12, len - 12, query_example + 12, len - 12);
}

static void
test_resolv_conf (void)
{
  g_auto(GStrv) servers = box_nftables_dns_parse_resolv_conf (
    "# generated\n"
    "search example.org\n"
    "nameserver 192.0.2.53\n"
    "  nameserver\t2001:db8::53  \n"
    "nameserver\n"
    "options edns0\n");
  g_auto(GStrv) none = box_nftables_dns_parse_resolv_conf (NULL);

  g_assert_cmpuint (g_strv_length (servers), ==, 2);
  g_assert_cmpstr (servers[0], ==, "192.0.2.53");
  g_assert_cmpstr (servers[1], ==, "2001:db8::53");
  g_assert_cmpuint (g_strv_length (none), ==, 0);
}

/* ---- the egress registry (box-nftables-egress.c) ---- */

static BoxEgressPolicy *
policy_allowing (const char *domain)
{
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_autoptr(GError) error = NULL;
  BoxRule *rule = g_new0 (BoxRule, 1);
  BoxEgressPolicy *policy;

  rule->allow = TRUE;
  rule->domain = g_strdup (domain);
  g_ptr_array_add (rules, rule);
  policy = box_egress_policy_new (rules, NULL, &error);
  g_assert_no_error (error);
  return policy;
}

typedef struct {
  guint    calls;
  guint32  guest;
  char    *name;
  guint32  addr;
  guint32  ttl;
  GError  *error;
  GPtrArray *lines;
} EgressSeen;

static void
on_resolved (guint32 guest, const char *name, const guint32 *addrs, guint n, guint32 ttl,
             gpointer data)
{
  EgressSeen *seen = data;

  seen->calls++;
  seen->guest = guest;
  g_free (seen->name);
  seen->name = g_strdup (name);
  seen->addr = n > 0 ? addrs[0] : 0;
  seen->ttl = ttl;
}

static void
on_resolve_done (const guint32 *addrs, guint n, guint32 ttl, const GError *error, gpointer data)
{
  EgressSeen *seen = data;

  seen->calls++;
  seen->addr = n > 0 ? addrs[0] : 0;
  seen->ttl = ttl;
  g_clear_error (&seen->error);
  seen->error = error != NULL ? g_error_copy (error) : NULL;
}

static void
fake_resolver (guint32 guest, const char *name, BoxNftablesResolveDone done, gpointer done_data,
               gpointer data)
{
  guint32 addr = 0xC0000202;   /* 192.0.2.2 */

  g_assert_cmphex (guest, ==, 0xC6336401);   /* the connection's sandbox */
  g_assert_cmpstr (name, ==, "api.example.com");
  g_assert_cmpstr (data, ==, "resolver-data");
  done (&addr, 1, 30, NULL, done_data);
}

static void
on_log (const char *line, gpointer data)
{
  g_ptr_array_add (((EgressSeen *) data)->lines, g_strdup (line));
}

static void
test_egress_registry (void)
{
  g_autoptr(BoxNftablesEgress) egress = box_nftables_egress_new ();
  g_autoptr(BoxEgressPolicy) policy = policy_allowing ("api.example.com");
  g_autoptr(BoxEgressPolicy) open = box_egress_policy_new (NULL, NULL, NULL);
  BoxEgressPolicy *found = NULL;
  g_autofree char *id = NULL;
  EgressSeen seen = { 0, };
  guint32 addr = 0xC6336401;   /* 198.51.100.1 */
  guint64 generation;
  guint i;

  seen.lines = g_ptr_array_new_with_free_func (g_free);

  /* unknown guest */
  g_assert_false (box_nftables_egress_lookup (egress, 0x0ADE0002, &found, &id));
  g_assert_null (found);
  generation = box_nftables_egress_get_generation (egress);

  /* restricted: the policy comes back, referenced */
  box_nftables_egress_set (egress, 0x0ADE0002, "sb-one", policy);
  g_assert_cmpuint (box_nftables_egress_get_generation (egress), ==, generation + 1);
  g_assert_true (box_nftables_egress_lookup (egress, 0x0ADE0002, &found, &id));
  g_assert_true (found == policy);
  g_assert_cmpstr (id, ==, "sb-one");
  g_clear_pointer (&found, box_egress_policy_unref);
  g_clear_pointer (&id, g_free);

  /* an unrestricted policy is stored as none */
  box_nftables_egress_set (egress, 0x0ADE0006, "sb-two", open);
  g_assert_true (box_nftables_egress_lookup (egress, 0x0ADE0006, &found, NULL));
  g_assert_null (found);

  /* update in place, then remove */
  box_nftables_egress_set (egress, 0x0ADE0006, "sb-two", policy);
  g_assert_true (box_nftables_egress_lookup (egress, 0x0ADE0006, &found, NULL));
  g_assert_true (found == policy);
  g_clear_pointer (&found, box_egress_policy_unref);
  box_nftables_egress_remove (egress, 0x0ADE0006);
  g_assert_false (box_nftables_egress_lookup (egress, 0x0ADE0006, NULL, NULL));
  g_assert_cmpuint (box_nftables_egress_get_generation (egress), ==, generation + 4);

  /* resolved reports reach the function; empty ones do not */
  box_nftables_egress_report_resolved (egress, 0x0ADE0002, "api.example.com", &addr, 1, 60);
  g_assert_cmpuint (seen.calls, ==, 0);
  box_nftables_egress_set_resolved_func (egress, on_resolved, &seen);
  box_nftables_egress_report_resolved (egress, 0x0ADE0002, "api.example.com", &addr, 0, 60);
  g_assert_cmpuint (seen.calls, ==, 0);
  box_nftables_egress_report_resolved (egress, 0x0ADE0002, "api.example.com", &addr, 1, 60);
  g_assert_cmpuint (seen.calls, ==, 1);
  g_assert_cmpuint (seen.guest, ==, 0x0ADE0002);
  g_assert_cmpstr (seen.name, ==, "api.example.com");
  g_assert_cmpuint (seen.addr, ==, addr);
  g_assert_cmpuint (seen.ttl, ==, 60);

  /* no resolver: an error at once; with one: its answer */
  seen.calls = 0;
  box_nftables_egress_resolve (egress, addr, "api.example.com", on_resolve_done, &seen);
  g_assert_cmpuint (seen.calls, ==, 1);
  g_assert_nonnull (seen.error);
  box_nftables_egress_set_resolver (egress, fake_resolver, (gpointer) "resolver-data");
  box_nftables_egress_resolve (egress, addr, "api.example.com", on_resolve_done, &seen);
  g_assert_cmpuint (seen.calls, ==, 2);
  g_assert_null (seen.error);
  g_assert_cmpuint (seen.addr, ==, 0xC0000202);
  g_assert_cmpuint (seen.ttl, ==, 30);

  /* refusals: logged per sandbox, names made printable, at most the
   * burst per minute; an unknown guest logs nothing */
  box_nftables_egress_set_log_func (egress, on_log, &seen);
  box_nftables_egress_report_refused (egress, 0x0ADE0099, "tcp", "x.example", 22);
  g_assert_cmpuint (seen.lines->len, ==, 0);
  box_nftables_egress_report_refused (egress, 0x0ADE0002, "tls", NULL, 443);
  g_assert_cmpstr (g_ptr_array_index (seen.lines, 0), ==,
                   "egress refused: sandbox sb-one tls (no name):443");
  box_nftables_egress_report_refused (egress, 0x0ADE0002, "dns", "evil\n.example\x1b", 0);
  g_assert_cmpstr (g_ptr_array_index (seen.lines, 1), ==,
                   "egress refused: sandbox sb-one dns evil?.example?");
  for (i = 0; i < 100; i++)
    box_nftables_egress_report_refused (egress, 0x0ADE0002, "http", "denied.example", 80);
  g_assert_cmpuint (seen.lines->len, ==, BOX_NFTABLES_EGRESS_LOG_BURST);

  g_free (seen.name);
  g_ptr_array_unref (seen.lines);
}

/* The node's own addresses, whatever their range (the resolver refuses
 * answers naming them): every IPv4 address of an interface here is local,
 * an address of TEST-NET-2 nobody here has is not. */
static void
test_address_is_local (void)
{
  struct ifaddrs *list = NULL;
  guint n = 0;

  g_assert_cmpint (getifaddrs (&list), ==, 0);
  for (struct ifaddrs *i = list; i != NULL; i = i->ifa_next) {
    if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
      continue;
    g_assert_true (box_nftables_address_is_local (
      ntohl (((struct sockaddr_in *) i->ifa_addr)->sin_addr.s_addr)));
    n++;
  }
  freeifaddrs (list);
  g_assert_cmpuint (n, >, 0);
  g_assert_true (box_nftables_address_is_local (0x7F000001));
  g_assert_false (box_nftables_address_is_local (0xC6336463));   /* 198.51.100.99 */
  g_assert_false (box_nftables_address_is_local (0x08080808));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_log_set_writer_func (count_ignored, NULL, NULL);
  g_test_add_func ("/nftables/cidr", test_cidr);
  g_test_add_func ("/nftables/pool/subnets", test_pool_subnets);
  g_test_add_func ("/nftables/pool/allocate", test_pool_allocate);
  g_test_add_func ("/nftables/names", test_names);
  g_test_add_func ("/nftables/ruleset", test_ruleset);
  g_test_add_func ("/nftables/records", test_records);
  g_test_add_func ("/nftables/dns/messages", test_dns_messages);
  g_test_add_func ("/nftables/dns/answers", test_dns_answers);
  g_test_add_func ("/nftables/dns/resolv-conf", test_resolv_conf);
  g_test_add_func ("/nftables/egress/registry", test_egress_registry);
  g_test_add_func ("/nftables/address-is-local", test_address_is_local);
  return g_test_run ();
}
