/* box guest agent: system set-up (init stages, mounts, modules, hostname,
 * network over rtnetlink, filesystem growth). */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent.h"

#ifndef EXT4_IOC_RESIZE_FS
#define EXT4_IOC_RESIZE_FS _IOW ('f', 16, uint64_t)
#endif

static char cmdline[4096];

const char *
ba_cmdline_get (const char *key)
{
  static char val[256];
  size_t klen = strlen (key);
  if (cmdline[0] == 0) {
    int fd = open ("/proc/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t n = read (fd, cmdline, sizeof cmdline - 1);
      cmdline[n > 0 ? n : 0] = 0;
      close (fd);
    }
  }
  for (const char *p = cmdline; *p != 0; ) {
    size_t n = strcspn (p, " \n");
    if (n > 4 + klen && strncmp (p, "box.", 4) == 0 && strncmp (p + 4, key, klen) == 0 && p[4 + klen] == '=') {
      size_t vl = n - 5 - klen;
      if (vl >= sizeof val)
        vl = sizeof val - 1;
      memcpy (val, p + 5 + klen, vl);
      val[vl] = 0;
      return val;
    }
    p += n;
    while (*p == ' ' || *p == '\n')
      p++;
  }
  return NULL;
}

static void
try_mount (const char *src, const char *dst, const char *type, unsigned long flags, const char *data)
{
  mkdir (dst, 0755);
  if (mount (src, dst, type, flags, data) < 0 && errno != EBUSY)
    ba_log ("mount %s on %s: %s", type, dst, strerror (errno));
}

static void
load_modules (const char *dir)
{
  char path[512], name[128];
  FILE *f;
  snprintf (path, sizeof path, "%s/modules.load", dir);
  f = fopen (path, "re");
  if (f == NULL)
    return;
  while (fgets (name, sizeof name, f) != NULL) {
    int fd;
    name[strcspn (name, "\n")] = 0;
    if (name[0] == 0)
      continue;
    snprintf (path, sizeof path, "%s/%s.ko", dir, name);
    fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    if (syscall (SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
      ba_log ("module %s: %s", name, strerror (errno));
    close (fd);
    unlink (path); /* frees the initramfs copy */
  }
  fclose (f);
}

void
ba_init_stage1 (int argc, char **argv)
{
  const char *root;
  int64_t t0;
  char *const dflt[] = { (char *) "/usr/lib/box/box-agent", NULL };

  (void) argc;
  try_mount ("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
  try_mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  t0 = ba_now_ms ();
  ba_log ("stage1: started");
  load_modules ("/lib/box/modules");
  root = ba_cmdline_get ("root");
  if (root == NULL)
    root = "/dev/vda";
  for (int i = 0; i < 1000 && access (root, F_OK) != 0; i++)
    usleep (5000);
  if (mount (root, "/newroot", "ext4", MS_NOATIME, "") < 0) {
    ba_log ("cannot mount %s: %s", root, strerror (errno));
    sleep (5);
    _exit (1);
  }
  ba_log ("stage1: modules and root in %lld ms", (long long) (ba_now_ms () - t0));
  umount2 ("/proc", MNT_DETACH);
  if (mount ("/dev", "/newroot/dev", NULL, MS_MOVE, NULL) < 0)
    ba_log ("move /dev: %s", strerror (errno));
  unlink ("/init");
  if (chdir ("/newroot") < 0 || mount (".", "/", NULL, MS_MOVE, NULL) < 0 || chroot (".") < 0 || chdir ("/") < 0) {
    ba_log ("switch root: %s", strerror (errno));
    sleep (5);
    _exit (1);
  }
  execv (dflt[0], argv[0] != NULL ? argv : dflt);
  ba_log ("exec %s: %s", dflt[0], strerror (errno));
  sleep (5);
  _exit (1);
}

/* ---- rtnetlink ------------------------------------------------------------ */

typedef struct {
  struct nlmsghdr h;
  union {
    struct ifinfomsg ifi;
    struct ifaddrmsg ifa;
    struct rtmsg rt;
  };
  char attrs[256];
} NlReq;

static void
nl_attr (NlReq *r, unsigned short type, const void *data, size_t len)
{
  struct rtattr *a = (struct rtattr *) ((char *) r + NLMSG_ALIGN (r->h.nlmsg_len));
  a->rta_type = type;
  a->rta_len = (unsigned short) RTA_LENGTH (len);
  memcpy (RTA_DATA (a), data, len);
  r->h.nlmsg_len = NLMSG_ALIGN (r->h.nlmsg_len) + RTA_ALIGN (a->rta_len);
}

static int
nl_talk (NlReq *r)
{
  static uint32_t seq;
  char buf[4096];
  int fd = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
  ssize_t n;
  int ret = -EIO;
  if (fd < 0)
    return -errno;
  r->h.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
  r->h.nlmsg_seq = ++seq;
  if (sendto (fd, r, r->h.nlmsg_len, 0, (struct sockaddr *) &sa, sizeof sa) < 0) {
    ret = -errno;
    close (fd);
    return ret;
  }
  n = recv (fd, buf, sizeof buf, 0);
  if (n >= (ssize_t) NLMSG_LENGTH (sizeof (struct nlmsgerr))) {
    struct nlmsghdr *h = (struct nlmsghdr *) buf;
    if (h->nlmsg_type == NLMSG_ERROR)
      ret = ((struct nlmsgerr *) NLMSG_DATA (h))->error;
  }
  close (fd);
  return ret;
}

static int
link_set (int ifindex, bool up, const uint8_t *mac)
{
  NlReq r = { 0 };
  r.h.nlmsg_len = NLMSG_LENGTH (sizeof r.ifi);
  r.h.nlmsg_type = RTM_NEWLINK;
  r.ifi.ifi_family = AF_UNSPEC;
  r.ifi.ifi_index = ifindex;
  r.ifi.ifi_change = IFF_UP;
  r.ifi.ifi_flags = up ? IFF_UP : 0;
  if (mac != NULL)
    nl_attr (&r, IFLA_ADDRESS, mac, 6);
  return nl_talk (&r);
}

static int
addr_change (int ifindex, int type, struct in_addr a, int prefix)
{
  NlReq r = { 0 };
  r.h.nlmsg_len = NLMSG_LENGTH (sizeof r.ifa);
  r.h.nlmsg_type = (unsigned short) type;
  r.h.nlmsg_flags = type == RTM_NEWADDR ? NLM_F_CREATE | NLM_F_REPLACE : 0;
  r.ifa.ifa_family = AF_INET;
  r.ifa.ifa_prefixlen = (unsigned char) prefix;
  r.ifa.ifa_index = (unsigned) ifindex;
  nl_attr (&r, IFA_LOCAL, &a, 4);
  nl_attr (&r, IFA_ADDRESS, &a, 4);
  return nl_talk (&r);
}

static int
route_default (int ifindex, struct in_addr gw)
{
  NlReq r = { 0 };
  r.h.nlmsg_len = NLMSG_LENGTH (sizeof r.rt);
  r.h.nlmsg_type = RTM_NEWROUTE;
  r.h.nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
  r.rt.rtm_family = AF_INET;
  r.rt.rtm_table = RT_TABLE_MAIN;
  r.rt.rtm_protocol = RTPROT_STATIC;
  r.rt.rtm_scope = RT_SCOPE_UNIVERSE;
  r.rt.rtm_type = RTN_UNICAST;
  nl_attr (&r, RTA_GATEWAY, &gw, 4);
  nl_attr (&r, RTA_OIF, &ifindex, 4);
  return nl_talk (&r);
}

static bool
parse_mac (const char *s, uint8_t mac[6])
{
  unsigned v[6];
  if (sscanf (s, "%2x:%2x:%2x:%2x:%2x:%2x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6 || strlen (s) != 17)
    return false;
  for (int i = 0; i < 6; i++)
    mac[i] = (uint8_t) v[i];
  return true;
}

static struct in_addr last_addr;
static int last_prefix = -1;

static bool
net_apply (const char *iface, const char *mac_s, const char *addr_s, const char *gw_s,
           const char **dns, int ndns, const char **err)
{
  int ifindex = (int) if_nametoindex (iface);
  uint8_t mac[6];
  struct in_addr a, gw;
  char ip[32];
  int prefix = 24, rc;
  const char *slash;

  if (ifindex == 0) {
    *err = "no such interface";
    return false;
  }
  if (mac_s != NULL && !parse_mac (mac_s, mac)) {
    *err = "bad mac";
    return false;
  }
  if (addr_s != NULL) {
    slash = strchr (addr_s, '/');
    snprintf (ip, sizeof ip, "%.*s", (int) (slash != NULL ? slash - addr_s : (long) strlen (addr_s)), addr_s);
    if (slash != NULL)
      prefix = atoi (slash + 1);
    if (inet_pton (AF_INET, ip, &a) != 1 || prefix < 1 || prefix > 32) {
      *err = "bad address (want A.B.C.D/N)";
      return false;
    }
  }
  if (gw_s != NULL && inet_pton (AF_INET, gw_s, &gw) != 1) {
    *err = "bad gateway";
    return false;
  }
  if (mac_s != NULL) {
    link_set (ifindex, false, NULL);
    if ((rc = link_set (ifindex, false, mac)) < 0) {
      *err = "cannot set mac";
      return false;
    }
  }
  if ((rc = link_set (ifindex, true, NULL)) < 0) {
    *err = "cannot bring the link up";
    return false;
  }
  if (addr_s != NULL) {
    if (last_prefix >= 0 && (last_addr.s_addr != a.s_addr || last_prefix != prefix))
      addr_change (ifindex, RTM_DELADDR, last_addr, last_prefix);
    if (addr_change (ifindex, RTM_NEWADDR, a, prefix) < 0) {
      *err = "cannot set address";
      return false;
    }
    last_addr = a;
    last_prefix = prefix;
  }
  if (gw_s != NULL && route_default (ifindex, gw) < 0) {
    *err = "cannot set the default route";
    return false;
  }
  if (ndns > 0) {
    FILE *f = fopen ("/etc/resolv.conf", "we");
    if (f != NULL) {
      for (int i = 0; i < ndns; i++)
        fprintf (f, "nameserver %s\n", dns[i]);
      fclose (f);
    }
  }
  return true;
}

bool
ba_net_configure (const BaJson *req, const char **err)
{
  const char *iface = ba_json_get_str (req, "iface");
  const BaJson *dns = ba_json_get (req, "dns");
  const char *dv[8];
  int nd = 0;
  if (dns != NULL && dns->type == BA_JARR)
    for (const BaJson *c = dns->child; c != NULL && nd < 8; c = c->next)
      if (c->type == BA_JSTR)
        dv[nd++] = c->s;
  return net_apply (iface != NULL ? iface : "eth0", ba_json_get_str (req, "mac"),
                    ba_json_get_str (req, "address"), ba_json_get_str (req, "gateway"), dv, nd, err);
}

bool
ba_set_hostname (const char *name, const char **err)
{
  size_t n = strlen (name);
  FILE *f;
  if (n == 0 || n > 63 || strspn (name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != n) {
    *err = "bad hostname";
    return false;
  }
  if (sethostname (name, n) < 0) {
    *err = "sethostname failed";
    return false;
  }
  /* /etc/hosts names it, so sudo and friends resolve it without DNS */
  f = fopen ("/etc/hosts", "we");
  if (f != NULL) {
    fprintf (f, "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\t\tlocalhost ip6-localhost ip6-loopback\n", name);
    fclose (f);
  }
  f = fopen ("/etc/hostname", "we");
  if (f != NULL) {
    fprintf (f, "%s\n", name);
    fclose (f);
  }
  return true;
}

/* ---- filesystem growth -------------------------------------------------------- */

/* The disk's size in 512-byte sectors as the kernel sees it now. */
static bool
disk_sectors (const struct stat *st, unsigned long long *sectors)
{
  char path[128];
  FILE *f;
  bool ok;

  snprintf (path, sizeof path, "/sys/dev/block/%u:%u/size", major (st->st_dev),
            minor (st->st_dev));
  f = fopen (path, "re");
  if (f == NULL)
    return false;
  ok = fscanf (f, "%llu", sectors) == 1;
  fclose (f);
  return ok;
}

/* min_bytes: the size the host gave the disk (0: whatever it is).  A
 * virtio disk learns of a resize through a configuration interrupt that
 * the kernel handles in a work queue, so right after the host grew it
 * (and resumed the VM) the old size can still show for a moment: wait
 * for the new one, up to GROW_WAIT_MS. */
#define GROW_WAIT_MS 10000

bool
ba_grow_rootfs (uint64_t min_bytes, int64_t *old_blocks, int64_t *new_blocks, const char **err)
{
  struct stat st;
  char path[128], devname[160] = "";
  unsigned long long sectors = 0;
  uint8_t sb[1024];
  uint64_t bsize, cur, want;
  int64_t deadline = ba_now_ms () + GROW_WAIT_MS;
  FILE *f;
  int fd;

  if (stat ("/", &st) < 0) {
    *err = "stat /";
    return false;
  }
  for (;;) {
    if (!disk_sectors (&st, &sectors)) {
      *err = "cannot read the disk size";
      return false;
    }
    if (sectors * 512 >= min_bytes)
      break;
    if (ba_now_ms () >= deadline) {
      *err = "the disk did not reach the size the host gave it";
      return false;
    }
    usleep (2000);
  }
  snprintf (path, sizeof path, "/sys/dev/block/%u:%u/uevent", major (st.st_dev), minor (st.st_dev));
  f = fopen (path, "re");
  while (f != NULL && fgets (path, sizeof path, f) != NULL)
    if (strncmp (path, "DEVNAME=", 8) == 0) {
      snprintf (devname, sizeof devname, "/dev/%s", path + 8);
      devname[strcspn (devname, "\n")] = 0;
    }
  if (f != NULL)
    fclose (f);
  fd = devname[0] != 0 ? open (devname, O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0 || pread (fd, sb, sizeof sb, 1024) != (ssize_t) sizeof sb || sb[0x38] != 0x53 || sb[0x39] != 0xef) {
    if (fd >= 0)
      close (fd);
    *err = "cannot read the ext4 superblock";
    return false;
  }
  close (fd);
  bsize = 1024ull << ba_get_u32 (sb + 24);
  cur = ba_get_u32 (sb + 4) | (uint64_t) ba_get_u32 (sb + 0x150) << 32;
  want = sectors * 512 / bsize;
  *old_blocks = (int64_t) cur;
  *new_blocks = (int64_t) cur;
  if (want <= cur)
    return true;
  fd = open ("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ioctl (fd, EXT4_IOC_RESIZE_FS, &want) < 0) {
    if (fd >= 0)
      close (fd);
    *err = "EXT4_IOC_RESIZE_FS failed";
    return false;
  }
  close (fd);
  *new_blocks = (int64_t) want;
  return true;
}

/* ---- PID 1 on the root filesystem -------------------------------------------- */

void
ba_init_stage2 (void)
{
  const char *err = NULL, *v, *ip, *gw, *dns;
  int64_t before = 0, after = 0;
  int64_t t0 = ba_now_ms ();

  try_mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  try_mount ("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  try_mount ("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
  try_mount ("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666");
  try_mount ("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  try_mount ("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
  try_mount ("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  symlink ("/proc/self/fd", "/dev/fd");
  symlink ("/proc/self/fd/0", "/dev/stdin");
  symlink ("/proc/self/fd/1", "/dev/stdout");
  symlink ("/proc/self/fd/2", "/dev/stderr");
  mkdir ("/run/box", 0755);
  mkdir ("/run/lock", 01777);

  v = ba_cmdline_get ("hostname");
  if (!ba_set_hostname (v != NULL ? v : "box", &err))
    ba_log ("hostname: %s", err);
  if (net_apply ("lo", NULL, NULL, NULL, NULL, 0, &err) == false)
    ba_log ("lo: %s", err);
  ip = ba_cmdline_get ("ip");
  if (ip != NULL) {
    const char *dv[1];
    char ipbuf[64], gwbuf[64], dnsbuf[64];
    snprintf (ipbuf, sizeof ipbuf, "%s", ip);
    gw = ba_cmdline_get ("gw");
    snprintf (gwbuf, sizeof gwbuf, "%s", gw != NULL ? gw : "");
    dns = ba_cmdline_get ("dns");
    snprintf (dnsbuf, sizeof dnsbuf, "%s", dns != NULL ? dns : "");
    dv[0] = dnsbuf;
    if (!net_apply ("eth0", NULL, ipbuf, gw != NULL ? gwbuf : NULL, dv, dns != NULL ? 1 : 0, &err))
      ba_log ("eth0: %s", err);
  }
  if (!ba_grow_rootfs (0, &before, &after, &err))
    ba_log ("grow rootfs: %s", err);
  else if (after != before)
    ba_log ("rootfs grown from %lld to %lld blocks", (long long) before, (long long) after);
  ba_log ("stage2: system ready in %lld ms", (long long) (ba_now_ms () - t0));
}

void
ba_pipe_grow (const int *fds, int n)
{
  /* best effort: a smaller pipe only costs speed */
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0)
      (void) fcntl (fds[i], F_SETPIPE_SZ, BA_PIPE_SIZE);
}
