/* box-nftables-plugin.c: the `nftables` network plugin.
 *
 * Each sandbox gets a persistent tap device, a point-to-point IPv4 subnet
 * from a pool, NAT to the node's uplink and a resolver, and is kept away
 * from the node, the local networks and other sandboxes by one nftables
 * table whose rules match sets of interfaces (so the rules never grow per
 * sandbox).  README.md has the design; the configuration:
 *
 *   [plugin.nftables]
 *   pool=10.222.0.0/16       carved into subnets of subnet_prefix
 *   subnet_prefix=30         30 (gateway .1, guest .2) or 31 (RFC 3021)
 *   table=box                table inet <table>
 *   ifname_prefix=bx         tap names: prefix + 12 chars
 *   dns_port=535             the resolver's local port (DNS to the gateway is redirected there);
 *                            a privileged port, so no local user can take it while boxd is down
 *   dns_upstream=            resolvers to forward to; default: /etc/resolv.conf
 *   proxy_http_port=536      where a restricted sandbox's TCP 80 is redirected (privileged)
 *   proxy_tls_port=537       where a restricted sandbox's TCP 443 is redirected (privileged)
 *   blocked=                 more IPv4 networks sandboxes never reach (CIDRs)
 *   log_group=5740           NFLOG group of the kernel's refusals of restricted sandboxes
 *                            (one per boxd on a host: two cannot bind the same group)
 *   tap_user=                a user who may open the taps without CAP_NET_ADMIN
 *
 * Threads: the BoxNetwork calls block on netlink for a few milliseconds
 * and are safe from any thread (one lock); the hypervisor plugin calls
 * them from its worker threads.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>

#include "box-plugin-context.h"
#include "box-nftables-dns.h"
#include "box-nftables-link.h"
#include "box-nftables-list.h"
#include "box-nftables-nft.h"
#include "box-nftables-plugin-private.h"
#include "box-nftables-pool.h"
#include "box-nftables-record.h"
#include "box-nftables-ruleset.h"

#define BOX_NFT_MAX_NAME_ATTEMPTS 64

static void box_nftables_plugin_network_init (BoxNetworkInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (BoxNftablesPlugin, box_nftables_plugin, BOX_TYPE_PLUGIN,
                               G_IMPLEMENT_INTERFACE (BOX_TYPE_NETWORK,
                                                      box_nftables_plugin_network_init))

void
box_nftables_plugin_set_link_func (BoxNftablesPlugin *self, BoxNftablesLinkFunc func,
                                   gpointer user_data)
{
  g_return_if_fail (BOX_IS_NFTABLES_PLUGIN (self));
  self->link_func = func;
  self->link_data = user_data;
}

/* ---- configuration ---- */

static char *
get_config (BoxNftablesPlugin *self, const char *key, const char *fallback)
{
  g_autofree char *value = box_plugin_get_config (BOX_PLUGIN (self), key, fallback);

  return g_strstrip (g_steal_pointer (&value));
}

static gboolean
config_error (BoxNftablesPlugin *self, GError **error, const char *key, const char *what)
{
  g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "[plugin.%s] %s: %s",
               box_plugin_get_name (BOX_PLUGIN (self)), key, what);
  return FALSE;
}

static char **
config_list (BoxNftablesPlugin *self, const char *key)
{
  g_autofree char *value = get_config (self, key, "");
  g_auto(GStrv) words = g_strsplit_set (value, ",; \t", -1);
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  for (guint i = 0; words[i] != NULL; i++) {
    if (words[i][0] != '\0')
      g_strv_builder_add (builder, words[i]);
  }
  return g_strv_builder_end (builder);
}

/* The redirects outlive boxd (the table stays while it restarts): on an
 * unprivileged port any local user could bind it meanwhile and answer or
 * read every sandbox's DNS or web traffic. */
static gboolean
privileged_port (BoxNftablesPlugin *self, const char *key, const char *fallback, guint16 *port,
                 GError **error)
{
  g_autofree char *text = get_config (self, key, fallback);
  guint64 value;

  if (!g_ascii_string_to_unsigned (text, 10, 1, 65535, &value, NULL))
    return config_error (self, error, key, "must be a port number");
  if (value >= box_nftables_unprivileged_port_start ())
    return config_error (self, error, key,
                         "must be a privileged port (below net.ipv4.ip_unprivileged_port_start), "
                         "so that no local user can take it while boxd is down");
  *port = (guint16) value;
  return TRUE;
}

static gboolean
load_config (BoxNftablesPlugin *self, GError **error)
{
  g_autofree char *subnet_prefix = get_config (self, "subnet_prefix", "30");
  g_autofree char *tap_user = get_config (self, "tap_user", "");
  g_autofree char *text = NULL;
  g_autoptr(GError) local_error = NULL;
  guint64 value;

  g_free (self->pool_cidr);
  self->pool_cidr = get_config (self, "pool", "10.222.0.0/16");
  if (!g_ascii_string_to_unsigned (subnet_prefix, 10, 30, 31, &value, NULL))
    return config_error (self, error, "subnet_prefix", "must be 30 or 31");
  if (!box_nftables_pool_init (&self->pool, self->pool_cidr, (guint) value, &local_error))
    return config_error (self, error, "pool", local_error->message);

  g_free (self->table);
  self->table = get_config (self, "table", "box");
  if (!box_nftables_table_name_is_valid (self->table))
    return config_error (self, error, "table", "want [a-z][a-z0-9_]*, at most 32 chars");
  g_free (self->ifname_prefix);
  self->ifname_prefix = get_config (self, "ifname_prefix", "bx");
  if (!box_nftables_ifname_prefix_is_valid (self->ifname_prefix))
    return config_error (self, error, "ifname_prefix", "want 1 to 3 lowercase letters");
  if (!privileged_port (self, "dns_port", BOX_NFTABLES_DNS_PORT_DEFAULT, &self->dns_port, error) ||
      !privileged_port (self, "proxy_http_port", "536", &self->proxy_http_port, error) ||
      !privileged_port (self, "proxy_tls_port", "537", &self->proxy_tls_port, error))
    return FALSE;
  if (self->dns_port == self->proxy_http_port || self->dns_port == self->proxy_tls_port ||
      self->proxy_http_port == self->proxy_tls_port)
    return config_error (self, error, "proxy_http_port",
                         "dns_port, proxy_http_port and proxy_tls_port must differ");

  g_clear_pointer (&text, g_free);
  text = get_config (self, "log_group", G_STRINGIFY (BOX_NFTABLES_NFLOG_GROUP_DEFAULT));
  if (!g_ascii_string_to_unsigned (text, 10, 0, 65535, &value, NULL))
    return config_error (self, error, "log_group", "must be a number from 0 to 65535");
  self->log_group = (guint16) value;

  g_strfreev (self->dns_upstream);
  self->dns_upstream = config_list (self, "dns_upstream");
  g_strfreev (self->blocked);
  self->blocked = config_list (self, "blocked");
  for (guint i = 0; self->blocked[i] != NULL; i++) {
    guint32 network;
    guint prefix;

    g_clear_error (&local_error);
    if (!box_nftables_cidr_parse (self->blocked[i], &network, &prefix, &local_error))
      return config_error (self, error, "blocked", local_error->message);
  }

  self->tap_owner = (uid_t) -1;
  if (tap_user[0] != '\0') {
    struct passwd *pw = getpwnam (tap_user);
    if (pw == NULL)
      return config_error (self, error, "tap_user", "no such user");
    self->tap_owner = pw->pw_uid;
  }
  return TRUE;
}

/* ---- the kernel side of one record (with the lock held) ---- */

static char *
member_rules (BoxNftablesPlugin *self, const BoxNftablesRecord *record, gboolean add)
{
  g_autofree char *address = box_nftables_ipv4_to_string (record->subnet.address);
  g_autofree char *restricted = NULL;
  g_autofree char *brokered = NULL;
  g_autofree char *member = NULL;

  if (!add)
    return box_nftables_ruleset_remove_member (self->table, record->ifname, address);
  member = box_nftables_ruleset_add_member (self->table, record->ifname, address);
  restricted = box_nftables_ruleset_set_restricted (self->table, record->ifname,
                                                    box_nftables_record_is_restricted (record));
  brokered = box_nftables_ruleset_set_brokered (self->table, record->ifname,
                                                box_nftables_plugin_is_brokered (self, record->id));
  return g_strconcat (member, restricted, brokered, NULL);
}

/* Membership in the sets comes first: a link named like ours but not in
 * them is dropped by the table, so no packet passes unchecked. */
static gboolean
record_bring_up (BoxNftablesPlugin *self, BoxNftablesRecord *record, GError **error)
{
  g_autofree char *add = member_rules (self, record, TRUE);
  g_autoptr(GError) local_error = NULL;

  if (!box_nftables_plugin_register (self, record, error) || !box_nftables_nft_run (self->nft, add, error))
    return FALSE;
  if (box_nftables_link_index (record->ifname) == 0) {
    if (self->link_func != NULL) {
      if (!self->link_func (record->ifname, record->id, self->link_data, error))
        return FALSE;
    } else if (!box_nftables_link_create_tap (record->ifname, self->tap_owner, error)) {
      return FALSE;
    }
  } else if (self->link_func == NULL && !box_nftables_link_is_tap (record->ifname)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "%s exists and is not a tap device", record->ifname);
    return FALSE;
  }
  if (!box_nftables_link_disable_ipv6 (record->ifname, &local_error))
    g_warning ("nftables: %s", local_error->message);
  if (!box_nftables_link_set_address (record->ifname, record->subnet.gateway,
                                      record->subnet.prefix, error) ||
      !box_nftables_link_set_up (record->ifname, TRUE, error))
    return FALSE;
  box_nftables_dns_allow (self->dns, record->subnet.address);
  return TRUE;
}

/* The link goes first, then the set membership (see record_bring_up). */
static gboolean
record_tear_down (BoxNftablesPlugin *self, BoxNftablesRecord *record, GError **error)
{
  g_autofree char *remove = member_rules (self, record, FALSE);
  g_autoptr(GString) commands = g_string_new (remove);

  if (!box_nftables_link_delete (record->ifname, error))
    return FALSE;
  box_nftables_dns_forget (self->dns, record->subnet.address);
  box_nftables_plugin_forget_guest (self, record, commands);
  return box_nftables_nft_run (self->nft, commands->str, error);
}

static gboolean
ifname_taken (BoxNftablesPlugin *self, const char *ifname)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->records);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    const BoxNftablesRecord *record = value;
    if (g_str_equal (record->ifname, ifname))
      return TRUE;
  }
  return box_nftables_link_index (ifname) != 0;
}

static BoxNftablesRecord *
record_allocate (BoxNftablesPlugin *self, const char *sandbox_id, GError **error)
{
  g_autoptr(BoxNftablesRecord) record = box_nftables_record_new (sandbox_id);
  g_autoptr(GPtrArray) used = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;
  guint32 index;

  g_hash_table_iter_init (&iter, self->records);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (used, &((BoxNftablesRecord *) value)->subnet);
  if (!box_nftables_pool_allocate (&self->pool, used, &index, error))
    return NULL;
  box_nftables_pool_subnet (&self->pool, index, &record->subnet);

  for (guint attempt = 0; attempt < BOX_NFT_MAX_NAME_ATTEMPTS; attempt++) {
    g_autofree char *ifname = box_nftables_ifname_for_id (self->ifname_prefix, sandbox_id,
                                                          attempt);
    if (!ifname_taken (self, ifname)) {
      record->ifname = g_steal_pointer (&ifname);
      break;
    }
  }
  if (record->ifname == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                 "no free interface name for %s", sandbox_id);
    return NULL;
  }
  record->mac = box_nftables_mac_for_id (sandbox_id);
  record->created_at = g_get_real_time ();
  return g_steal_pointer (&record);
}

/* ---- BoxNetwork ---- */

gboolean
box_nftables_plugin_check_call (BoxNftablesPlugin *self, const char *sandbox_id,
                                GError **error)
{
  if (!box_sandbox_id_is_valid (sandbox_id)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_INVALID, "bad sandbox id \"%s\"",
                 sandbox_id != NULL ? sandbox_id : "");
    return FALSE;
  }
  if (!self->started) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                         "the nftables network plugin is not started");
    return FALSE;
  }
  return TRUE;
}

static BoxNetAttachment *
box_nftables_plugin_attach (BoxNetwork *network, const char *sandbox_id, GError **error)
{
  BoxNftablesPlugin *self = BOX_NFTABLES_PLUGIN (network);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  const char *dir = box_plugin_get_state_dir (BOX_PLUGIN (self));
  g_autoptr(BoxNftablesRecord) fresh = NULL;
  g_autoptr(GError) local_error = NULL;
  BoxNftablesRecord *record;

  if (!box_nftables_plugin_check_call (self, sandbox_id, error))
    return NULL;

  /* Found again (a restart, a retry): make sure the kernel agrees. */
  record = g_hash_table_lookup (self->records, sandbox_id);
  if (record != NULL) {
    if (!box_nftables_plugin_take_pending (self, record, error) || !record_bring_up (self, record, error))
      return NULL;
    g_hash_table_remove (self->pending, sandbox_id);
    return box_nftables_record_to_attachment (record);
  }

  /* The record is on disk before the tap exists: a crash leaves a record
   * that a later attach or detach finishes, never an unknown tap. */
  fresh = record_allocate (self, sandbox_id, error);
  if (fresh == NULL || !box_nftables_plugin_take_pending (self, fresh, error) ||
      !box_nftables_record_save (fresh, dir, error))
    return NULL;
  if (!record_bring_up (self, fresh, &local_error)) {
    g_autoptr(GError) cleanup_error = NULL;

    if (!record_tear_down (self, fresh, &cleanup_error) ||
        !box_nftables_record_remove (dir, sandbox_id, &cleanup_error))
      g_warning ("nftables: cleaning up after a failed attach of %s: %s", sandbox_id,
                 cleanup_error->message);
    g_propagate_prefixed_error (error, g_steal_pointer (&local_error),
                                "cannot attach %s: ", sandbox_id);
    return NULL;
  }
  record = g_steal_pointer (&fresh);
  g_hash_table_insert (self->records, g_strdup (sandbox_id), record);
  g_hash_table_remove (self->pending, sandbox_id);
  g_info ("nftables: %s attached on %s (%s)", sandbox_id, record->ifname, record->mac);
  return box_nftables_record_to_attachment (record);
}

/* The tap keeps its name: renaming means taking the link down under a
 * running guest, and the hypervisor's own records (libvirt's domain XML)
 * name it.  Names are unique handles, not a promise about the ID. */
static gboolean
box_nftables_plugin_rebind (BoxNetwork *network, const char *old_id, const char *new_id,
                            GError **error)
{
  BoxNftablesPlugin *self = BOX_NFTABLES_PLUGIN (network);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  const char *dir = box_plugin_get_state_dir (BOX_PLUGIN (self));
  BoxNftablesRecord *record;
  gpointer key;

  if (!box_nftables_plugin_check_call (self, old_id, error) ||
      !box_nftables_plugin_check_call (self, new_id, error))
    return FALSE;
  if (!g_hash_table_lookup_extended (self->records, old_id, &key, (gpointer *) &record)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no network attachment for %s",
                 old_id);
    return FALSE;
  }
  if (g_str_equal (old_id, new_id))
    return TRUE;
  if (g_hash_table_contains (self->records, new_id)) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_CONFLICT, "%s already has a network attachment",
                 new_id);
    return FALSE;
  }
  if (!box_nftables_record_move (dir, old_id, new_id, error))
    return FALSE;
  g_hash_table_steal (self->records, old_id);
  g_free (key);
  g_free (record->id);
  record->id = g_strdup (new_id);
  g_hash_table_insert (self->records, g_strdup (new_id), record);
  if (!box_nftables_plugin_rebound (self, record, error) ||
      !box_nftables_plugin_sync_brokered (self, record, error))
    return FALSE;
  g_info ("nftables: the attachment on %s moved from %s to %s", record->ifname, old_id, new_id);
  return TRUE;
}

static gboolean
box_nftables_plugin_detach (BoxNetwork *network, const char *sandbox_id, GError **error)
{
  BoxNftablesPlugin *self = BOX_NFTABLES_PLUGIN (network);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  const char *dir = box_plugin_get_state_dir (BOX_PLUGIN (self));
  BoxNftablesRecord *record;

  if (!box_nftables_plugin_check_call (self, sandbox_id, error))
    return FALSE;
  g_hash_table_remove (self->pending, sandbox_id);
  g_hash_table_remove (self->brokered, sandbox_id);
  record = g_hash_table_lookup (self->records, sandbox_id);
  if (record == NULL)
    return TRUE;
  if (!record_tear_down (self, record, error) ||
      !box_nftables_record_remove (dir, sandbox_id, error))
    return FALSE;
  g_info ("nftables: %s detached from %s", sandbox_id, record->ifname);
  g_hash_table_remove (self->records, sandbox_id);
  return TRUE;
}

static gboolean
box_nftables_plugin_set_egress (BoxNetwork *network, const char *sandbox_id, GPtrArray *rules,
                                GError **error)
{
  BoxNftablesPlugin *self = BOX_NFTABLES_PLUGIN (network);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  g_autoptr(BoxEgressPolicy) policy = NULL;
  BoxNftablesRecord *record;

  if (!box_nftables_plugin_check_call (self, sandbox_id, error))
    return FALSE;
  /* rules that do not compile change nothing */
  policy = box_egress_policy_new (rules, NULL, error);
  if (policy == NULL)
    return FALSE;
  record = g_hash_table_lookup (self->records, sandbox_id);
  if (record == NULL) {
    /* Kept for the attach (or rebind) that brings the sandbox up, which
     * applies them before the VM runs. */
    box_nftables_plugin_set_pending (self, sandbox_id, rules);
    return TRUE;
  }
  return box_nftables_plugin_apply_egress (self, record, rules, error);
}

static gboolean
box_nftables_plugin_enforces_egress (BoxNetwork *network)
{
  return TRUE;
}

static GPtrArray *
box_nftables_plugin_list_allowed (BoxNetwork *network, const char *sandbox_id, GError **error)
{
  BoxNftablesPlugin *self = BOX_NFTABLES_PLUGIN (network);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  BoxNftablesRecord *record;
  g_autofree char *guest = NULL;

  if (!box_nftables_plugin_check_call (self, sandbox_id, error))
    return NULL;
  if ((record = g_hash_table_lookup (self->records, sandbox_id)) == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_NOT_FOUND, "no network attachment for %s",
                 sandbox_id);
    return NULL;
  }
  guest = box_nftables_ipv4_to_string (record->subnet.address);
  return box_nftables_list_resolved (self->table, guest, error);
}

/* ---- BoxPlugin ---- */

static gboolean
check_host (GError **error)
{
  int fd;

  if (!box_nftables_have_net_admin ()) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "the nftables network plugin needs root or CAP_NET_ADMIN (running as uid %u)",
                 (guint) geteuid ());
    return FALSE;
  }
  fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int errsv = errno;
    g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                 "the nftables network plugin cannot open /dev/net/tun: %s "
                 "(is the tun module loaded?)", g_strerror (errsv));
    return FALSE;
  }
  close (fd);
  return TRUE;
}

static gboolean
install_table (BoxNftablesPlugin *self, GError **error)
{
  g_autoptr(GArray) members = g_array_new (FALSE, TRUE, sizeof (BoxNftablesMember));
  g_autoptr(GPtrArray) addresses = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *commands = NULL;
  g_autoptr(GError) local_error = NULL;
  BoxNftablesRuleset ruleset = {
    .table = self->table,
    .pool = self->pool_cidr,
    .ifname_prefix = self->ifname_prefix,
    .dns_port = self->dns_port,
    .proxy_http_port = self->proxy_http_port,
    .proxy_tls_port = self->proxy_tls_port,
    .log_group = self->log_group,
    .blocked = (const char *const *) self->blocked,
  };
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->records);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    const BoxNftablesRecord *record = value;
    char *address = box_nftables_ipv4_to_string (record->subnet.address);
    BoxNftablesMember member = { .ifname = record->ifname, .address = address,
                                 .restricted = box_nftables_record_is_restricted (record),
                                 .brokered = box_nftables_plugin_is_brokered (self, record->id) };

    g_ptr_array_add (addresses, address);
    g_array_append_val (members, member);
  }
  ruleset.members = members;
  commands = box_nftables_ruleset_install (&ruleset);
  if (box_nftables_nft_run (self->nft, commands, &local_error))
    return TRUE;
  /* a kernel without nfnetlink_log refuses the log rule: enforce the rules
   * anyway, only the kernel's refusals go unlogged */
  g_free (commands);
  ruleset.no_log = TRUE;
  commands = box_nftables_ruleset_install (&ruleset);
  if (box_nftables_nft_run (self->nft, commands, NULL)) {
    g_warning ("nftables: table inet %s installed without its log rule, so the kernel's "
               "egress refusals are not logged (is nfnetlink_log available?): %s",
               self->table, local_error->message);
    return TRUE;
  }
  g_set_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
               "cannot install table inet %s (is nf_tables available?): %s", self->table,
               local_error->message);
  return FALSE;
}

/* The name-checking proxy on the two redirected ports, never dialling
 * the built-in internal ranges nor the blocked= networks. */
static gboolean
start_proxy (BoxNftablesPlugin *self, GError **error)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  g_auto(GStrv) blocked = NULL;

  g_strv_builder_addv (builder, (const char **) box_nftables_blocked_builtin ());
  g_strv_builder_addv (builder, (const char **) self->blocked);
  blocked = g_strv_builder_end (builder);
  self->proxy = box_nftables_proxy_new (self->egress, "0.0.0.0", self->proxy_http_port,
                                        self->proxy_tls_port, error);
  if (self->proxy != NULL)
    box_nftables_proxy_set_broker (self->proxy, self->broker);
  return self->proxy != NULL &&
         box_nftables_proxy_set_blocked (self->proxy, (const char *const *) blocked, error);
}

static gboolean
box_nftables_plugin_start (BoxPlugin *plugin, GCancellable *cancellable, GError **error)
{
  BoxNftablesPlugin *self = BOX_NFTABLES_PLUGIN (plugin);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  const char *dir = box_plugin_get_state_dir (plugin);
  g_autoptr(GPtrArray) records = NULL;
  g_autofree char *upstreams = NULL;
  gboolean forwarding_changed;

  g_return_val_if_fail (!self->started, FALSE);
  if (dir == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                         "the nftables network plugin needs a state directory");
    return FALSE;
  }
  if (!load_config (self, error) || !check_host (error))
    return FALSE;
  /* a start that failed half-way may be retried */
  g_clear_pointer (&self->nflog, box_nftables_nflog_free);
  g_clear_pointer (&self->proxy, box_nftables_proxy_free);
  g_clear_pointer (&self->dns, box_nftables_dns_free);
  g_clear_pointer (&self->nft, box_nftables_nft_free);
  g_hash_table_remove_all (self->records);
  box_nftables_plugin_egress_start (self);
  self->nft = box_nftables_nft_new (error);
  if (self->nft == NULL)
    return FALSE;

  records = box_nftables_record_load_all (dir);
  for (guint i = 0; i < records->len; i++) {
    BoxNftablesRecord *record = g_ptr_array_index (records, i);
    g_hash_table_insert (self->records, g_strdup (record->id), record);
  }
  g_ptr_array_set_free_func (records, NULL);

  /* One transaction replaces the table with every known member. */
  if (!install_table (self, error))
    return FALSE;
  if (!box_nftables_enable_forwarding (&forwarding_changed, error))
    return FALSE;
  if (forwarding_changed)
    g_message ("nftables: enabled IPv4 forwarding (net.ipv4.ip_forward=1) for the sandboxes' NAT");

  self->dns = box_nftables_dns_new (self->dns_port,
                                    (const char *const *) self->dns_upstream, NULL, error);
  if (self->dns == NULL)
    return FALSE;
  box_nftables_dns_set_blocked (self->dns, (const char *const *) self->blocked);
  /* the egress engine's parts meet in the registry: the resolver finds
   * each sandbox's rules there and reports what it resolved, the proxy
   * resolves names through the resolver */
  box_nftables_dns_set_egress (self->dns, self->egress);
  box_nftables_egress_set_resolver (self->egress, box_nftables_dns_resolve_func, self->dns);
  if (!start_proxy (self, error))
    return FALSE;
  /* without it only the kernel's own refusals go unlogged: not fatal (a
   * second boxd on the host with the same log_group gets EBUSY) */
  {
    g_autoptr(GError) local_error = NULL;

    self->nflog = box_nftables_nflog_new (self->egress, self->log_group, &local_error);
    if (self->nflog == NULL)
      g_warning ("nftables: the kernel's egress refusals are not logged (log_group=%u): %s",
                 self->log_group, local_error->message);
  }
  self->started = TRUE;

  /* Restore every attachment: taps persist across a boxd restart, not
   * across a reboot; either way the kernel is made to match the records. */
  for (guint i = 0; i < records->len; i++) {
    BoxNftablesRecord *record = g_ptr_array_index (records, i);
    g_autoptr(GError) local_error = NULL;

    if (!record_bring_up (self, record, &local_error))
      g_warning ("nftables: cannot restore the attachment of %s on %s: %s", record->id,
                 record->ifname, local_error->message);
  }
  upstreams = box_nftables_dns_describe_upstreams (self->dns);
  g_message ("nftables: table inet %s, pool %s (/%u subnets), %u attachments restored, "
             "resolver on port %u forwarding to %s", self->table, self->pool_cidr,
             self->pool.subnet_prefix, records->len, self->dns_port, upstreams);
  return TRUE;
}

/* Taps and rules stay: the VMs keep running across a boxd restart, and
 * start() finds them again.  Only the resolver (a thread of boxd) stops. */
static void
box_nftables_plugin_stop (BoxPlugin *plugin)
{
  BoxNftablesPlugin *self = BOX_NFTABLES_PLUGIN (plugin);
  BoxNftablesProxy *proxy;
  BoxNftablesDns *dns;
  BoxNftablesNflog *nflog;

  /* The resolver's, the proxy's and the NFLOG reader's threads are joined
   * without the lock:
   * the resolver's thread takes it to add what a sandbox resolved (and
   * sees started FALSE); the registry they use goes after them. */
  g_mutex_lock (&self->lock);
  self->started = FALSE;
  proxy = g_steal_pointer (&self->proxy);
  dns = g_steal_pointer (&self->dns);
  nflog = g_steal_pointer (&self->nflog);
  g_mutex_unlock (&self->lock);
  g_clear_pointer (&nflog, box_nftables_nflog_free);
  g_clear_pointer (&proxy, box_nftables_proxy_free);
  g_clear_pointer (&dns, box_nftables_dns_free);
  g_mutex_lock (&self->lock);
  g_clear_pointer (&self->nft, box_nftables_nft_free);
  box_nftables_plugin_egress_stop (self);
  g_mutex_unlock (&self->lock);
}

static void
box_nftables_plugin_add_status (BoxPlugin *plugin, GVariantBuilder *dict)
{
  BoxNftablesPlugin *self = BOX_NFTABLES_PLUGIN (plugin);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  g_autofree char *table = NULL;

  if (!self->started)
    return;
  table = g_strdup_printf ("inet %s", self->table);
  g_variant_builder_add (dict, "{sv}", "table", g_variant_new_string (table));
  g_variant_builder_add (dict, "{sv}", "pool", g_variant_new_string (self->pool_cidr));
  g_variant_builder_add (dict, "{sv}", "attachments",
                         g_variant_new_uint32 (g_hash_table_size (self->records)));
  g_variant_builder_add (dict, "{sv}", "resolver",
                         g_variant_new_take_string (box_nftables_dns_describe_upstreams (self->dns)));
}

static void
box_nftables_plugin_finalize (GObject *object)
{
  BoxNftablesPlugin *self = BOX_NFTABLES_PLUGIN (object);

  g_clear_pointer (&self->nflog, box_nftables_nflog_free);
  g_clear_pointer (&self->proxy, box_nftables_proxy_free);
  g_clear_pointer (&self->dns, box_nftables_dns_free);
  g_clear_pointer (&self->nft, box_nftables_nft_free);
  g_clear_pointer (&self->egress, box_nftables_egress_free);
  g_clear_pointer (&self->history, box_nftables_history_free);
  g_hash_table_unref (self->records);
  g_hash_table_unref (self->pending);
  g_hash_table_unref (self->brokered);
  g_clear_object (&self->broker);
  g_free (self->pool_cidr);
  g_free (self->table);
  g_free (self->ifname_prefix);
  g_strfreev (self->dns_upstream);
  g_strfreev (self->blocked);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (box_nftables_plugin_parent_class)->finalize (object);
}

static void
box_nftables_plugin_init (BoxNftablesPlugin *self)
{
  g_mutex_init (&self->lock);
  self->records = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                         (GDestroyNotify) box_nftables_record_free);
  self->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                         (GDestroyNotify) g_ptr_array_unref);
  self->brokered = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->tap_owner = (uid_t) -1;
}

static void
box_nftables_plugin_class_init (BoxNftablesPluginClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  BoxPluginClass *plugin_class = BOX_PLUGIN_CLASS (klass);

  object_class->finalize = box_nftables_plugin_finalize;
  plugin_class->start = box_nftables_plugin_start;
  plugin_class->stop = box_nftables_plugin_stop;
  plugin_class->add_status = box_nftables_plugin_add_status;
}

static void
box_nftables_plugin_network_init (BoxNetworkInterface *iface)
{
  iface->attach = box_nftables_plugin_attach;
  iface->rebind = box_nftables_plugin_rebind;
  iface->detach = box_nftables_plugin_detach;
  iface->set_egress = box_nftables_plugin_set_egress;
  iface->list_allowed = box_nftables_plugin_list_allowed;
  iface->enforces_egress = box_nftables_plugin_enforces_egress;
  iface->set_broker = box_nftables_plugin_set_broker;
  iface->set_brokered = box_nftables_plugin_set_brokered;
}

BOX_PLUGIN_DEFINE_FULL ("nftables", "Tap devices, NAT and isolation with nftables",
                        box_nftables_plugin_get_type, 100, BOX_PLUGIN_FLAG_NONE, NULL)
