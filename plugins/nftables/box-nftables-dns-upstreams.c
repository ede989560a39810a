/* box-nftables-dns-upstreams.c: where the sandboxes' resolver asks: the
 * configured upstreams, or those of /etc/resolv.conf (re-read when it or
 * the local stub's own file changes; see box_nftables_dns_pick_upstreams).
 */
#include "config.h"

#include <string.h>
#include <sys/stat.h>

#include "box-error.h"
#include "box-nftables-dns-private.h"

static GSocketAddress *
parse_upstream (const char *str, GError **error)
{
  g_autoptr(GSocketConnectable) connectable = NULL;
  g_autoptr(GInetAddress) inet = NULL;
  g_autofree char *host = NULL;
  char *percent;

  connectable = g_network_address_parse (str, 53, NULL);
  if (connectable == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "DNS upstream \"%s\" is not an address or address:port", str);
    return NULL;
  }
  host = g_strdup (g_network_address_get_hostname (G_NETWORK_ADDRESS (connectable)));
  percent = strchr (host, '%');   /* an IPv6 scope: not for a forwarder */
  if (percent != NULL)
    *percent = '\0';
  inet = g_inet_address_new_from_string (host);
  if (inet == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID,
                 "DNS upstream \"%s\" is not an IP address", str);
    return NULL;
  }
  return g_inet_socket_address_new (inet,
                                    g_network_address_get_port (G_NETWORK_ADDRESS (connectable)));
}

GPtrArray *
box_dns_parse_upstreams (const char *const *list, GError **error)
{
  g_autoptr(GPtrArray) upstreams = g_ptr_array_new_with_free_func (g_object_unref);

  for (guint i = 0; list != NULL && list[i] != NULL; i++) {
    GSocketAddress *addr = parse_upstream (list[i], error);
    if (addr == NULL)
      return NULL;
    g_ptr_array_add (upstreams, addr);
  }
  return g_steal_pointer (&upstreams);
}

/* With the lock held. */
static gint64
mtime_of (const char *path)
{
  struct stat st;

  return stat (path, &st) == 0 ? (gint64) st.st_mtime : 0;
}

/* With the lock held. */
void
box_dns_reload_resolv_conf_locked (BoxNftablesDns *dns)
{
  gint64 now = g_get_monotonic_time ();
  g_autofree char *contents = NULL;
  g_autofree char *stub = NULL;
  g_auto(GStrv) servers = NULL;
  g_autoptr(GPtrArray) upstreams = NULL;
  gint64 mtime, stub_mtime;

  if (!dns->from_resolv_conf ||
      (dns->upstreams != NULL && now - dns->resolv_checked < BOX_DNS_RESOLV_RECHECK_US))
    return;
  dns->resolv_checked = now;
  mtime = mtime_of (dns->resolv_conf);
  stub_mtime = mtime_of (BOX_NFTABLES_DNS_STUB_RESOLV_CONF);
  if (dns->upstreams != NULL && mtime == dns->resolv_mtime && stub_mtime == dns->stub_mtime)
    return;
  dns->resolv_mtime = mtime;
  dns->stub_mtime = stub_mtime;
  g_file_get_contents (dns->resolv_conf, &contents, NULL, NULL);
  g_file_get_contents (BOX_NFTABLES_DNS_STUB_RESOLV_CONF, &stub, NULL, NULL);
  servers = box_nftables_dns_pick_upstreams (contents, stub, &dns->from_stub);
  upstreams = g_ptr_array_new_with_free_func (g_object_unref);
  for (guint i = 0; servers[i] != NULL; i++) {
    GSocketAddress *addr = parse_upstream (servers[i], NULL);
    if (addr != NULL)
      g_ptr_array_add (upstreams, addr);
  }
  if (upstreams->len == 0) {
    /* what the C library does without a nameserver line */
    GSocketAddress *addr = parse_upstream ("127.0.0.1", NULL);
    g_ptr_array_add (upstreams, addr);
  }
  g_clear_pointer (&dns->upstreams, g_ptr_array_unref);
  dns->upstreams = g_steal_pointer (&upstreams);
}

/* A new reference to upstream number @attempt (round robin). */
GSocketAddress *
box_dns_get_upstream (BoxNftablesDns *dns, guint attempt, guint *n_upstreams)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&dns->lock);

  box_dns_reload_resolv_conf_locked (dns);
  *n_upstreams = dns->upstreams->len;
  return g_object_ref (g_ptr_array_index (dns->upstreams, attempt % dns->upstreams->len));
}

char *
box_nftables_dns_describe_upstreams (BoxNftablesDns *dns)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&dns->lock);
  GString *out = g_string_new (NULL);
  gboolean local = TRUE;

  box_dns_reload_resolv_conf_locked (dns);
  for (guint i = 0; i < dns->upstreams->len; i++) {
    GInetSocketAddress *addr = g_ptr_array_index (dns->upstreams, i);
    GInetAddress *inet = g_inet_socket_address_get_address (addr);
    g_autofree char *ip = g_inet_address_to_string (inet);

    local = local && (g_inet_address_get_is_loopback (inet) || g_inet_address_get_is_any (inet));

    g_string_append_printf (out, "%s%s:%u", i > 0 ? " " : "", ip,
                            g_inet_socket_address_get_port (addr));
  }
  if (dns->from_resolv_conf && dns->from_stub)
    g_string_append_printf (out, " (from %s: %s has only a local stub)",
                            BOX_NFTABLES_DNS_STUB_RESOLV_CONF, dns->resolv_conf);
  else if (dns->from_resolv_conf && local)
    g_string_append_printf (out, " (from %s: a resolver on this node, which may answer "
                            "names of the node's own networks; dns_upstream= chooses others)",
                            dns->resolv_conf);
  else if (dns->from_resolv_conf)
    g_string_append_printf (out, " (from %s)", dns->resolv_conf);
  return g_string_free (out, FALSE);
}

