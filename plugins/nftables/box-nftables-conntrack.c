/* box-nftables-conntrack.c: see box-nftables-conntrack.h. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>

#include "box-error.h"
#include "box-nftables-conntrack.h"

/* a guest cannot hold more: the dump stops collecting beyond */
#define CUT_MAX 65536

typedef struct {
  guint32              guest;      /* network byte order */
  BoxNftablesKeepFunc  keep;
  gpointer             user_data;
  GPtrArray           *doomed;     /* struct nf_conntrack* */
} Cut;

static int
collect (enum nf_conntrack_msg_type type, struct nf_conntrack *ct, void *data)
{
  Cut *cut = data;
  guint16 dport;

  if (nfct_get_attr_u8 (ct, ATTR_ORIG_L3PROTO) != AF_INET ||
      nfct_get_attr_u8 (ct, ATTR_ORIG_L4PROTO) != IPPROTO_TCP ||
      nfct_get_attr_u32 (ct, ATTR_ORIG_IPV4_SRC) != cut->guest)
    return NFCT_CB_CONTINUE;
  /* redirected to the node's resolver or proxy: theirs to judge */
  if (nfct_attr_is_set (ct, ATTR_STATUS) &&
      (nfct_get_attr_u32 (ct, ATTR_STATUS) & IPS_DST_NAT) != 0)
    return NFCT_CB_CONTINUE;
  /* a direct connection to 80 or 443 (opened while the sandbox had no
   * rules, so never redirected) is judged like any other: the keep
   * function allows those ports only through the proxy, so it goes */
  dport = ntohs (nfct_get_attr_u16 (ct, ATTR_ORIG_PORT_DST));
  if (cut->keep (ntohl (nfct_get_attr_u32 (ct, ATTR_ORIG_IPV4_DST)), dport, cut->user_data))
    return NFCT_CB_CONTINUE;
  if (cut->doomed->len < CUT_MAX)
    g_ptr_array_add (cut->doomed, nfct_clone (ct));
  return NFCT_CB_CONTINUE;
}

static gboolean
fail (GError **error, const char *what)
{
  int errsv = errno;

  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "conntrack: %s: %s", what,
               g_strerror (errsv));
  return FALSE;
}

gint
box_nftables_conntrack_cut (guint32 guest, BoxNftablesKeepFunc keep, gpointer user_data,
                            GError **error)
{
  g_autoptr(GPtrArray) doomed = g_ptr_array_new_with_free_func ((GDestroyNotify) nfct_destroy);
  Cut cut = { htonl (guest), keep, user_data, doomed };
  struct nfct_handle *handle = nfct_open (CONNTRACK, 0);
  guint32 family = AF_INET;
  gint deleted = 0;

  if (handle == NULL) {
    fail (error, "cannot open a netlink socket");
    return -1;
  }
  nfct_callback_register (handle, NFCT_T_ALL, collect, &cut);
  if (nfct_query (handle, NFCT_Q_DUMP, &family) < 0) {
    fail (error, "cannot list the connections");
    nfct_close (handle);
    return -1;
  }
  nfct_callback_unregister (handle);
  for (guint i = 0; i < doomed->len; i++) {
    /* gone meanwhile (closed, timed out) is as good */
    if (nfct_query (handle, NFCT_Q_DESTROY, g_ptr_array_index (doomed, i)) == 0)
      deleted++;
    else if (errno != ENOENT)
      g_warning ("conntrack: cannot delete a connection: %s", g_strerror (errno));
  }
  nfct_close (handle);
  return deleted;
}
