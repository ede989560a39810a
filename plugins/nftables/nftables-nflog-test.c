/* nftables-nflog-test.c: the NFLOG message parser of box-nftables-nflog.c
 * against well-formed and malformed messages (every length a lie in turn).
 * The reader over a real socket is tested in nftables-netns-egress.c. */
#include "config.h"

#include <string.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>

#include "box-nftables-nflog.h"

/* 10.222.0.2 -> 203.0.113.1, TCP, dport 22: 20 bytes IP + 4 of TCP */
static const guint8 tcp_syn[] = {
  0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 222, 0, 2, 203, 0, 113, 1,
  0xc0, 0x00, 0x00, 0x16,
};

/* A netlink datagram of one NFULNL_MSG_PACKET carrying @payload (and a
 * prefix attribute before it) into @buf; returns its length. */
static gsize
message (guint8 *buf, const guint8 *payload, gsize payload_len)
{
  struct nlmsghdr nlh = { .nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET };
  struct nfgenmsg nfg = { .nfgen_family = 2 };
  struct nlattr prefix = { .nla_len = NLA_HDRLEN + 3, .nla_type = NFULA_PREFIX };
  struct nlattr data = { .nla_len = (guint16) (NLA_HDRLEN + payload_len),
                         .nla_type = NFULA_PAYLOAD };
  gsize len = NLMSG_HDRLEN;

  memcpy (buf + len, &nfg, sizeof nfg);
  len += NLMSG_ALIGN (sizeof nfg);
  memcpy (buf + len, &prefix, sizeof prefix);
  memcpy (buf + len + NLA_HDRLEN, "ab", 3);
  len += NLA_ALIGN (prefix.nla_len);
  memcpy (buf + len, &data, sizeof data);
  memcpy (buf + len + NLA_HDRLEN, payload, payload_len);
  len += NLA_ALIGN (data.nla_len);
  nlh.nlmsg_len = (guint32) len;
  memcpy (buf, &nlh, sizeof nlh);
  return len;
}

static void
collect (const BoxNftablesNflogPacket *packet, gpointer user_data)
{
  g_array_append_val ((GArray *) user_data, *packet);
}

static void
test_well_formed (void)
{
  g_autoptr(GArray) got = g_array_new (FALSE, FALSE, sizeof (BoxNftablesNflogPacket));
  guint8 buf[512];
  gsize len = message (buf, tcp_syn, sizeof tcp_syn);
  gsize two;
  const BoxNftablesNflogPacket *p;

  /* two messages in one datagram, as the kernel batches them */
  memcpy (buf + len, buf, len);
  two = 2 * len;
  g_assert_cmpuint (box_nftables_nflog_parse (buf, two, collect, got), ==, 2);
  p = &g_array_index (got, BoxNftablesNflogPacket, 0);
  g_assert_cmphex (p->saddr, ==, 0x0ade0002);
  g_assert_cmphex (p->daddr, ==, 0xcb007101);
  g_assert_cmpuint (p->protocol, ==, 6);
  g_assert_cmpuint (p->dport, ==, 22);
  g_assert_cmpstr (box_nftables_nflog_kind (p->protocol), ==, "tcp");
  g_assert_cmpstr (box_nftables_nflog_kind (17), ==, "udp");
  g_assert_cmpstr (box_nftables_nflog_kind (1), ==, "icmp");
  g_assert_cmpstr (box_nftables_nflog_kind (47), ==, "ip");
}

typedef struct {
  const char *what;
  gsize       offset;   /* byte of the IPv4 header changed */
  guint8      value;
  gboolean    ok;
  guint16     dport;
} Ipv4Case;

static void
test_ipv4 (void)
{
  static const Ipv4Case cases[] = {
    { "as is", 0, 0x45, TRUE, 22 },
    { "IPv6", 0, 0x65, FALSE, 0 },
    { "header length 16", 0, 0x44, FALSE, 0 },
    { "header longer than copied", 0, 0x4f, FALSE, 0 },
    { "header with options: no ports copied", 0, 0x46, TRUE, 0 },
    { "total length shorter than the header", 3, 10, FALSE, 0 },
    { "later fragment: no ports", 7, 5, TRUE, 0 },
    { "UDP", 9, 17, TRUE, 22 },
    { "ICMP: no ports", 9, 1, TRUE, 0 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    guint8 ip[sizeof tcp_syn];
    BoxNftablesNflogPacket p;

    memcpy (ip, tcp_syn, sizeof ip);
    ip[cases[i].offset] = cases[i].value;
    if (box_nftables_nflog_parse_ipv4 (ip, sizeof ip, &p) != cases[i].ok)
      g_error ("%s: want %s", cases[i].what, cases[i].ok ? "parsed" : "refused");
    if (cases[i].ok && p.dport != cases[i].dport)
      g_error ("%s: port %u, want %u", cases[i].what, p.dport, cases[i].dport);
  }
  /* cut short anywhere: never a header from fewer than 20 bytes */
  for (gsize n = 0; n < 20; n++) {
    BoxNftablesNflogPacket p;
    g_assert_false (box_nftables_nflog_parse_ipv4 (tcp_syn, n, &p));
  }
}

/* Every length field of the message a lie, and every truncation: nothing
 * read beyond the buffer (ASan / valgrind would say), no packet made up. */
static void
test_malformed (void)
{
  guint8 buf[512];
  gsize len = message (buf, tcp_syn, sizeof tcp_syn);
  g_autoptr(GArray) got = g_array_new (FALSE, FALSE, sizeof (BoxNftablesNflogPacket));

  for (gsize n = 0; n < len; n++) {
    g_autofree guint8 *copy = g_memdup2 (buf, n);
    g_assert_cmpuint (box_nftables_nflog_parse (copy, n, collect, got), ==, 0);
  }
  /* every byte of the headers (not the payload) set to each of a few values */
  for (gsize at = 0; at < len - sizeof tcp_syn; at++) {
    static const guint8 values[] = { 0x00, 0x01, 0x03, 0x7f, 0xff };
    for (guint v = 0; v < G_N_ELEMENTS (values); v++) {
      g_autofree guint8 *copy = g_memdup2 (buf, len);
      copy[at] = values[v];
      g_array_set_size (got, 0);
      box_nftables_nflog_parse (copy, len, collect, got);
      for (guint i = 0; i < got->len; i++)
        g_assert_cmphex (g_array_index (got, BoxNftablesNflogPacket, i).saddr, ==, 0x0ade0002);
    }
  }
  /* another message type: skipped */
  {
    struct nlmsghdr nlh;
    memcpy (&nlh, buf, sizeof nlh);
    nlh.nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
    memcpy (buf, &nlh, sizeof nlh);
    g_assert_cmpuint (box_nftables_nflog_parse (buf, len, collect, got), ==, 0);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/nftables-nflog/well-formed", test_well_formed);
  g_test_add_func ("/nftables-nflog/ipv4", test_ipv4);
  g_test_add_func ("/nftables-nflog/malformed", test_malformed);
  return g_test_run ();
}
