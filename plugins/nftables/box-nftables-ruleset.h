/* box-nftables-ruleset.h: the nftables rulesets of the plugin, as text for
 * libnftables (one call = one atomic transaction).  Pure string building;
 * tested in nftables-test.c and installed for real in nftables-netns-test.c.
 *
 * The table never grows per sandbox: sandboxes are members of sets,
 *   taps       { type ifname }                  the box interfaces
 *   guests     { type ifname . ipv4_addr }      each tap with its guest address
 *   restricted { type ifname }                  taps of sandboxes with egress rules
 *   brokered   { type ifname }                  taps of sandboxes using secrets (TCP 443
 *                                               goes to the proxy, which hands a secret's
 *                                               hosts to the broker)
 *   resolved   { ipv4_addr . ipv4_addr . inet_service, timeout }
 *              guest . destination . TCP port a restricted guest may open
 *   refused_log { ipv4_addr, dynamic }         per-guest rate of refusals logged
 * and the rules match the sets.  See README.md for the rules and why.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  const char *ifname;
  const char *address;    /* the guest's IPv4 address */
  gboolean    restricted; /* egress rules: a member of @restricted too */
  gboolean    brokered;   /* uses secrets: a member of @brokered too */
} BoxNftablesMember;

typedef struct {
  const char  *table;         /* "box": table inet <table> */
  const char  *pool;          /* "10.222.0.0/16" */
  const char  *ifname_prefix; /* "bx": links so named but not in taps are dropped */
  guint16      dns_port;      /* where the plugin's resolver listens */
  guint16      proxy_http_port; /* restricted TCP 80 is redirected there */
  guint16      proxy_tls_port;  /* restricted and brokered TCP 443 is redirected there */
  guint16      log_group;     /* NFLOG group of restricted guests' refused packets */
  gboolean     no_log;        /* without the log rule (a kernel without nfnetlink_log) */
  const char *const *blocked; /* extra IPv4 CIDRs a sandbox never reaches, or NULL */
  GArray      *members;       /* BoxNftablesMember, or NULL */
} BoxNftablesRuleset;

/* The built-in destinations a sandbox never reaches (private, shared,
 * loopback, link-local, multicast, reserved, "this network"). */
const char *const *box_nftables_blocked_builtin (void);

gboolean box_nftables_table_name_is_valid (const char *table);

/* Replaces the whole table atomically (create-if-missing, delete, define,
 * then the members), so it can run any number of times. */
char *box_nftables_ruleset_install (const BoxNftablesRuleset *ruleset);
char *box_nftables_ruleset_add_member (const char *table, const char *ifname,
                                       const char *address);
/* Idempotent: adds then deletes, in one transaction; @restricted and
 * @brokered too. */
char *box_nftables_ruleset_remove_member (const char *table, const char *ifname,
                                          const char *address);
/* Adds (@restricted) or removes (idempotently) @ifname in @restricted. */
char *box_nftables_ruleset_set_restricted (const char *table, const char *ifname,
                                           gboolean restricted);
/* Adds (@brokered) or removes (idempotently) @ifname in @brokered. */
char *box_nftables_ruleset_set_brokered (const char *table, const char *ifname,
                                         gboolean brokered);
/* Appends to @out: guest . @addr . @port in @resolved with @timeout_s
 * (0: removed, idempotently); host byte order.  An element already there
 * gets the new timeout. */
void  box_nftables_ruleset_append_resolved (GString *out, const char *table, guint32 guest,
                                            guint32 addr, guint16 port, guint timeout_s);
/* Idempotent: removes the table if it is there. */
char *box_nftables_ruleset_uninstall (const char *table);

G_END_DECLS
