/* box-nftables-nflog.c: the kernel's egress refusals read from an NFLOG
 * group; see box-nftables-nflog.h and README.md ("Logs").  By hand on raw
 * nfnetlink: two config messages and one attribute walk, with every
 * length checked here, rather than one more library. */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>

#include "box-error.h"
#include "box-nftables-nflog.h"

struct _BoxNftablesNflog {
  BoxNftablesEgress *egress;
  guint16            group;
  int                fd;
  int                wake;       /* eventfd: stop */
  GThread           *thread;
  guint32            seq;
  gint               received;   /* atomic */
};

const char *
box_nftables_nflog_kind (guint8 protocol)
{
  switch (protocol) {
  case IPPROTO_TCP: return "tcp";
  case IPPROTO_UDP: return "udp";
  case IPPROTO_ICMP: return "icmp";
  default: return "ip";
  }
}

gboolean
box_nftables_nflog_parse_ipv4 (const guint8 *data, gsize len, BoxNftablesNflogPacket *packet)
{
  gsize ihl;
  guint16 total, frag;
  guint32 addr;

  if (len < 20 || (data[0] >> 4) != 4)
    return FALSE;
  ihl = (gsize) (data[0] & 0x0f) * 4;
  total = (guint16) ((data[2] << 8) | data[3]);
  if (ihl < 20 || ihl > len || total < ihl)
    return FALSE;
  frag = (guint16) (((data[6] << 8) | data[7]) & 0x1fff);
  memset (packet, 0, sizeof *packet);
  packet->protocol = data[9];
  memcpy (&addr, data + 12, 4);
  packet->saddr = ntohl (addr);
  memcpy (&addr, data + 16, 4);
  packet->daddr = ntohl (addr);
  /* ports only from the first fragment, and only if they were copied */
  if ((packet->protocol == IPPROTO_TCP || packet->protocol == IPPROTO_UDP) && frag == 0 &&
      len >= ihl + 4 && total >= ihl + 4)
    packet->dport = (guint16) ((data[ihl + 2] << 8) | data[ihl + 3]);
  return TRUE;
}

/* The payload attribute of one NFULNL_MSG_PACKET (its body: @body, @len
 * bytes after the netlink header), or NULL. */
static const guint8 *
find_payload (const guint8 *body, gsize len, gsize *payload_len)
{
  gsize off = NLMSG_ALIGN (sizeof (struct nfgenmsg));

  while (off + NLA_HDRLEN <= len) {
    struct nlattr nla;

    memcpy (&nla, body + off, sizeof nla);
    if (nla.nla_len < NLA_HDRLEN || nla.nla_len > len - off)
      return NULL;
    if ((nla.nla_type & NLA_TYPE_MASK) == NFULA_PAYLOAD) {
      *payload_len = nla.nla_len - NLA_HDRLEN;
      return body + off + NLA_HDRLEN;
    }
    off += NLA_ALIGN (nla.nla_len);
  }
  return NULL;
}

guint
box_nftables_nflog_parse (const guint8 *buf, gsize len, BoxNftablesNflogFunc func,
                          gpointer user_data)
{
  gsize off = 0;
  guint n = 0;

  while (off + NLMSG_HDRLEN <= len) {
    struct nlmsghdr nlh;
    const guint8 *payload;
    gsize payload_len = 0;
    BoxNftablesNflogPacket packet;

    memcpy (&nlh, buf + off, sizeof nlh);
    if (nlh.nlmsg_len < NLMSG_HDRLEN || nlh.nlmsg_len > len - off)
      break;
    if (nlh.nlmsg_type == ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET) &&
        nlh.nlmsg_len >= NLMSG_HDRLEN + sizeof (struct nfgenmsg)) {
      payload = find_payload (buf + off + NLMSG_HDRLEN, nlh.nlmsg_len - NLMSG_HDRLEN,
                              &payload_len);
      if (payload != NULL && box_nftables_nflog_parse_ipv4 (payload, payload_len, &packet)) {
        func (&packet, user_data);
        n++;
      }
    }
    if (NLMSG_ALIGN (nlh.nlmsg_len) >= len - off)
      break;
    off += NLMSG_ALIGN (nlh.nlmsg_len);
  }
  return n;
}

/* ---- the socket ---- */

static void
put_attr (guint8 *msg, gsize *len, guint16 type, const void *data, gsize size)
{
  struct nlattr nla = { .nla_len = (guint16) (NLA_HDRLEN + size), .nla_type = type };

  memcpy (msg + *len, &nla, sizeof nla);
  memcpy (msg + *len + NLA_HDRLEN, data, size);
  *len += NLA_ALIGN (nla.nla_len);
}

/* One NFULNL_MSG_CONFIG for the group with one attribute; waits (2 s at
 * most) for the kernel's acknowledgement, skipping logged packets. */
static gboolean
config (BoxNftablesNflog *self, guint16 type, const void *data, gsize size, GError **error)
{
  guint8 msg[128] = { 0 };
  guint8 reply[8192];
  struct nlmsghdr nlh = { 0 };
  struct nfgenmsg nfg = { .nfgen_family = AF_UNSPEC, .version = NFNETLINK_V0,
                          .res_id = htons (self->group) };
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  gsize len = NLMSG_HDRLEN;
  guint32 seq = ++self->seq;
  gint64 deadline = g_get_monotonic_time () + 2 * G_USEC_PER_SEC;

  memcpy (msg + len, &nfg, sizeof nfg);
  len += NLMSG_ALIGN (sizeof nfg);
  put_attr (msg, &len, type, data, size);
  nlh.nlmsg_len = (guint32) len;
  nlh.nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
  nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  nlh.nlmsg_seq = seq;
  memcpy (msg, &nlh, sizeof nlh);
  if (sendto (self->fd, msg, len, 0, (struct sockaddr *) &kernel, sizeof kernel) < 0) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "nflog: send: %s", g_strerror (errno));
    return FALSE;
  }
  for (;;) {
    struct pollfd pfd = { .fd = self->fd, .events = POLLIN };
    gint64 left = deadline - g_get_monotonic_time ();
    gssize got;

    if (left <= 0 || poll (&pfd, 1, (int) (left / 1000) + 1) <= 0) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "nflog: no answer from the kernel");
      return FALSE;
    }
    got = recv (self->fd, reply, sizeof reply, MSG_DONTWAIT);
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == ENOBUFS))
      continue;
    if (got < 0) {
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "nflog: recv: %s", g_strerror (errno));
      return FALSE;
    }
    for (gsize off = 0; off + NLMSG_HDRLEN <= (gsize) got;) {
      struct nlmsghdr r;
      struct nlmsgerr err;

      memcpy (&r, reply + off, sizeof r);
      if (r.nlmsg_len < NLMSG_HDRLEN || r.nlmsg_len > (gsize) got - off)
        break;
      if (r.nlmsg_type == NLMSG_ERROR && r.nlmsg_seq == seq &&
          r.nlmsg_len >= NLMSG_HDRLEN + sizeof err) {
        memcpy (&err, reply + off + NLMSG_HDRLEN, sizeof err);
        if (err.error == 0)
          return TRUE;
        g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED, "nflog group %u: %s",
                     self->group, g_strerror (-err.error));
        return FALSE;
      }
      off += NLMSG_ALIGN (r.nlmsg_len);
    }
  }
}

static void
on_packet (const BoxNftablesNflogPacket *packet, gpointer user_data)
{
  BoxNftablesNflog *self = user_data;
  char daddr[INET_ADDRSTRLEN];
  guint32 be = htonl (packet->daddr);

  g_atomic_int_inc (&self->received);
  inet_ntop (AF_INET, &be, daddr, sizeof daddr);
  box_nftables_egress_report_refused (self->egress, packet->saddr,
                                      box_nftables_nflog_kind (packet->protocol), daddr,
                                      packet->dport);
}

static gpointer
reader (gpointer data)
{
  BoxNftablesNflog *self = data;
  g_autofree guint8 *buf = g_malloc (65536);

  for (;;) {
    struct pollfd pfd[2] = { { .fd = self->fd, .events = POLLIN },
                             { .fd = self->wake, .events = POLLIN } };
    struct sockaddr_nl from;
    socklen_t from_len = sizeof from;
    gssize got;

    if (poll (pfd, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      g_warning ("nftables: nflog: poll: %s", g_strerror (errno));
      return NULL;
    }
    if (pfd[1].revents != 0)
      return NULL;
    got = recvfrom (self->fd, buf, 65536, MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *) &from,
                    &from_len);
    if (got < 0) {
      /* ENOBUFS: the kernel dropped some; the ones after still count */
      if (errno == EINTR || errno == EAGAIN || errno == ENOBUFS)
        continue;
      g_warning ("nftables: nflog: recv: %s", g_strerror (errno));
      return NULL;
    }
    if (from_len != sizeof from || from.nl_pid != 0 || got > 65536)
      continue;   /* not from the kernel, or truncated */
    box_nftables_nflog_parse (buf, (gsize) got, on_packet, self);
  }
}

BoxNftablesNflog *
box_nftables_nflog_new (BoxNftablesEgress *egress, guint16 group, GError **error)
{
  g_autoptr(BoxNftablesNflog) self = g_new0 (BoxNftablesNflog, 1);
  struct sockaddr_nl local = { .nl_family = AF_NETLINK };
  struct nfulnl_msg_config_cmd bind_cmd = { .command = NFULNL_CFG_CMD_BIND };
  struct nfulnl_msg_config_mode mode = { .copy_range = htonl (BOX_NFTABLES_NFLOG_SNAPLEN),
                                         .copy_mode = NFULNL_COPY_PACKET };
  guint32 qthresh = htonl (16), timeout = htonl (10);   /* 16 packets or 0.1 s */
  int errsv;

  self->egress = egress;
  self->group = group;
  self->wake = -1;
  self->fd = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (self->fd < 0 || bind (self->fd, (struct sockaddr *) &local, sizeof local) < 0) {
    errsv = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED, "nflog: netlink socket: %s",
                 g_strerror (errsv));
    return NULL;
  }
  if (!config (self, NFULA_CFG_CMD, &bind_cmd, sizeof bind_cmd, error))
    return NULL;
  if (!config (self, NFULA_CFG_MODE, &mode, sizeof mode, error) ||
      !config (self, NFULA_CFG_QTHRESH, &qthresh, sizeof qthresh, error) ||
      !config (self, NFULA_CFG_TIMEOUT, &timeout, sizeof timeout, error))
    return NULL;
  self->wake = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (self->wake < 0) {
    errsv = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "nflog: eventfd: %s", g_strerror (errsv));
    return NULL;
  }
  self->thread = g_thread_new ("box-nflog", reader, self);
  return g_steal_pointer (&self);
}

void
box_nftables_nflog_free (BoxNftablesNflog *self)
{
  if (self == NULL)
    return;
  if (self->thread != NULL) {
    guint64 one = 1;

    if (write (self->wake, &one, sizeof one) != sizeof one)
      g_warning ("nftables: nflog: cannot wake the reader: %s", g_strerror (errno));
    g_thread_join (self->thread);
  }
  if (self->fd >= 0) {
    struct nfulnl_msg_config_cmd unbind = { .command = NFULNL_CFG_CMD_UNBIND };

    /* closing unbinds too; this says so at once */
    if (self->seq > 0 && !config (self, NFULA_CFG_CMD, &unbind, sizeof unbind, NULL))
      g_debug ("nftables: nflog: unbind failed");
    close (self->fd);
  }
  if (self->wake >= 0)
    close (self->wake);
  g_free (self);
}

guint
box_nftables_nflog_get_received (BoxNftablesNflog *self)
{
  return (guint) g_atomic_int_get (&self->received);
}
