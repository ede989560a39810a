/* box-nftables-link.c: taps, addresses and links; see box-nftables-link.h. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "box-error.h"
#include "box-nftables-link.h"

#define CAP_NET_ADMIN_BIT 12

typedef struct {
  struct nlmsghdr h;
  union {
    struct ifinfomsg ifi;
    struct ifaddrmsg ifa;
  };
  char attrs[256];
} NlRequest;

static gboolean
set_errno_error (GError **error, int errsv, const char *what, const char *ifname)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s %s: %s", what, ifname,
               g_strerror (errsv));
  return FALSE;
}

static gboolean
ifname_fits (const char *ifname, GError **error)
{
  if (ifname == NULL || ifname[0] == '\0' || strlen (ifname) >= IFNAMSIZ) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "bad interface name \"%s\"",
                 ifname != NULL ? ifname : "");
    return FALSE;
  }
  return TRUE;
}

static void
nl_add_attr (NlRequest *req, unsigned short type, const void *data, gsize len)
{
  struct rtattr *attr = (struct rtattr *) ((char *) req + NLMSG_ALIGN (req->h.nlmsg_len));

  g_assert (NLMSG_ALIGN (req->h.nlmsg_len) + RTA_SPACE (len) <= sizeof *req);
  attr->rta_type = type;
  attr->rta_len = (unsigned short) RTA_LENGTH (len);
  memcpy (RTA_DATA (attr), data, len);
  req->h.nlmsg_len = NLMSG_ALIGN (req->h.nlmsg_len) + RTA_ALIGN (attr->rta_len);
}

/* Sends @req and waits for its acknowledgement; 0 or a negative errno. */
static int
nl_talk (NlRequest *req)
{
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  char buf[4096];
  ssize_t n;
  int fd, ret = -EIO;

  fd = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0)
    return -errno;
  req->h.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
  req->h.nlmsg_seq = 1;
  if (sendto (fd, req, req->h.nlmsg_len, 0, (struct sockaddr *) &kernel, sizeof kernel) < 0) {
    ret = -errno;
    close (fd);
    return ret;
  }
  do
    n = recv (fd, buf, sizeof buf, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    ret = -errno;
  else if (n >= (ssize_t) NLMSG_LENGTH (sizeof (struct nlmsgerr))) {
    struct nlmsghdr *h = (struct nlmsghdr *) buf;
    if (h->nlmsg_type == NLMSG_ERROR)
      ret = ((struct nlmsgerr *) NLMSG_DATA (h))->error;
  }
  close (fd);
  return ret;
}

guint
box_nftables_link_index (const char *ifname)
{
  struct ifreq ifr = { 0 };
  int fd, rc;

  if (ifname == NULL || strlen (ifname) >= IFNAMSIZ)
    return 0;
  fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return 0;
  g_strlcpy (ifr.ifr_name, ifname, sizeof ifr.ifr_name);
  rc = ioctl (fd, SIOCGIFINDEX, &ifr);
  close (fd);
  return rc == 0 ? (guint) ifr.ifr_ifindex : 0;
}

gboolean
box_nftables_link_is_tap (const char *ifname)
{
  struct ethtool_drvinfo info = { .cmd = ETHTOOL_GDRVINFO };
  struct ifreq ifr = { 0 };
  int fd, rc;

  if (ifname == NULL || strlen (ifname) >= IFNAMSIZ)
    return FALSE;
  fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return FALSE;
  g_strlcpy (ifr.ifr_name, ifname, sizeof ifr.ifr_name);
  ifr.ifr_data = (char *) &info;
  rc = ioctl (fd, SIOCETHTOOL, &ifr);
  close (fd);
  return rc == 0 && g_str_equal (info.driver, "tun") && g_str_equal (info.bus_info, "tap");
}

gboolean
box_nftables_link_create_tap (const char *ifname, uid_t owner, GError **error)
{
  struct ifreq ifr = { 0 };
  int fd;

  if (!ifname_fits (ifname, error))
    return FALSE;
  fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return set_errno_error (error, errno, "cannot open /dev/net/tun for", ifname);
  g_strlcpy (ifr.ifr_name, ifname, sizeof ifr.ifr_name);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  if (ioctl (fd, TUNSETIFF, &ifr) < 0) {
    int errsv = errno;
    close (fd);
    return set_errno_error (error, errsv, "cannot create tap", ifname);
  }
  if (owner != (uid_t) -1 && ioctl (fd, TUNSETOWNER, (unsigned long) owner) < 0) {
    int errsv = errno;
    close (fd);
    return set_errno_error (error, errsv, "cannot set the owner of tap", ifname);
  }
  if (ioctl (fd, TUNSETPERSIST, 1UL) < 0) {
    int errsv = errno;
    close (fd);
    return set_errno_error (error, errsv, "cannot make persistent tap", ifname);
  }
  close (fd);
  return TRUE;
}

gboolean
box_nftables_link_set_address (const char *ifname, guint32 address, guint prefix,
                               GError **error)
{
  NlRequest req = { 0 };
  guint index = box_nftables_link_index (ifname);
  guint32 addr_be = htonl (address);
  int rc;

  if (index == 0)
    return set_errno_error (error, ENODEV, "cannot set the address of", ifname);
  req.h.nlmsg_len = NLMSG_LENGTH (sizeof req.ifa);
  req.h.nlmsg_type = RTM_NEWADDR;
  req.h.nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
  req.ifa.ifa_family = AF_INET;
  req.ifa.ifa_prefixlen = (unsigned char) prefix;
  req.ifa.ifa_scope = RT_SCOPE_UNIVERSE;
  req.ifa.ifa_index = index;
  nl_add_attr (&req, IFA_LOCAL, &addr_be, 4);
  nl_add_attr (&req, IFA_ADDRESS, &addr_be, 4);
  rc = nl_talk (&req);
  if (rc < 0)
    return set_errno_error (error, -rc, "cannot set the address of", ifname);
  return TRUE;
}

gboolean
box_nftables_link_set_up (const char *ifname, gboolean up, GError **error)
{
  NlRequest req = { 0 };
  guint index = box_nftables_link_index (ifname);
  int rc;

  if (index == 0)
    return set_errno_error (error, ENODEV, "cannot bring up", ifname);
  req.h.nlmsg_len = NLMSG_LENGTH (sizeof req.ifi);
  req.h.nlmsg_type = RTM_NEWLINK;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = (int) index;
  req.ifi.ifi_change = IFF_UP;
  req.ifi.ifi_flags = up ? IFF_UP : 0;
  rc = nl_talk (&req);
  if (rc < 0)
    return set_errno_error (error, -rc, up ? "cannot bring up" : "cannot bring down", ifname);
  return TRUE;
}

gboolean
box_nftables_link_delete (const char *ifname, GError **error)
{
  NlRequest req = { 0 };
  guint index;
  int rc;

  if (!ifname_fits (ifname, error))
    return FALSE;
  index = box_nftables_link_index (ifname);
  if (index == 0)
    return TRUE;
  req.h.nlmsg_len = NLMSG_LENGTH (sizeof req.ifi);
  req.h.nlmsg_type = RTM_DELLINK;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = (int) index;
  rc = nl_talk (&req);
  if (rc < 0 && rc != -ENODEV)
    return set_errno_error (error, -rc, "cannot delete", ifname);
  return TRUE;
}

static gboolean
write_sysctl (const char *path, const char *value, GError **error)
{
  /* g_file_set_contents would replace the file; a sysctl is written in place */
  FILE *f = fopen (path, "we");
  int errsv;

  if (f == NULL) {
    errsv = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot write %s: %s", path,
                 g_strerror (errsv));
    return FALSE;
  }
  if (fputs (value, f) < 0 || fclose (f) != 0) {
    errsv = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "cannot write %s: %s", path,
                 g_strerror (errsv));
    return FALSE;
  }
  return TRUE;
}

gboolean
box_nftables_link_disable_ipv6 (const char *ifname, GError **error)
{
  g_autofree char *path = NULL;

  if (!ifname_fits (ifname, error))
    return FALSE;
  path = g_strdup_printf ("/proc/sys/net/ipv6/conf/%s/disable_ipv6", ifname);
  if (!g_file_test ("/proc/sys/net/ipv6", G_FILE_TEST_IS_DIR))
    return TRUE;   /* no IPv6 in this kernel: nothing to turn off */
  return write_sysctl (path, "1\n", error);
}

gboolean
box_nftables_have_net_admin (void)
{
  g_autofree char *status = NULL;
  g_auto(GStrv) lines = NULL;

  if (geteuid () == 0)
    return TRUE;
  if (!g_file_get_contents ("/proc/self/status", &status, NULL, NULL))
    return FALSE;
  lines = g_strsplit (status, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    guint64 caps;

    if (!g_str_has_prefix (lines[i], "CapEff:"))
      continue;
    caps = g_ascii_strtoull (g_strstrip (lines[i] + strlen ("CapEff:")), NULL, 16);
    return (caps & (G_GUINT64_CONSTANT (1) << CAP_NET_ADMIN_BIT)) != 0;
  }
  return FALSE;
}

guint
box_nftables_unprivileged_port_start (void)
{
  g_autofree char *value = NULL;
  guint64 port;

  if (!g_file_get_contents ("/proc/sys/net/ipv4/ip_unprivileged_port_start", &value, NULL, NULL) ||
      !g_ascii_string_to_unsigned (g_strstrip (value), 10, 0, 65536, &port, NULL))
    return 1024;
  return (guint) port;
}

gboolean
box_nftables_enable_forwarding (gboolean *changed, GError **error)
{
  const char *path = "/proc/sys/net/ipv4/ip_forward";
  g_autofree char *value = NULL;
  g_autoptr(GError) local_error = NULL;

  *changed = FALSE;
  if (g_file_get_contents (path, &value, NULL, NULL) && g_str_has_prefix (value, "1"))
    return TRUE;
  if (!write_sysctl (path, "1\n", &local_error)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "net.ipv4.ip_forward is off and cannot be turned on here (%s); turn it on at "
                 "set-up (tools/setup.sh writes /etc/sysctl.d/60-box.conf)", local_error->message);
    return FALSE;
  }
  *changed = TRUE;
  return TRUE;
}

gboolean
box_nftables_address_is_local (guint32 address)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (address) };
  struct ifaddrs *list = NULL;
  gboolean local = FALSE;
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int bound;

  if (fd < 0)
    return TRUE;
  bound = bind (fd, (struct sockaddr *) &sa, sizeof sa) == 0 ? 0 : errno;
  close (fd);
  if (bound != 0)
    return bound != EADDRNOTAVAIL;
  if (getifaddrs (&list) != 0)
    return TRUE;
  for (struct ifaddrs *i = list; i != NULL && !local; i = i->ifa_next) {
    if (i->ifa_addr != NULL && i->ifa_addr->sa_family == AF_INET)
      local = ((struct sockaddr_in *) i->ifa_addr)->sin_addr.s_addr == sa.sin_addr.s_addr;
  }
  freeifaddrs (list);
  /* 0.0.0.0 and the broadcast addresses bind without being listed; they
   * are in the blocked ranges anyway */
  return local;
}
