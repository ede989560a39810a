/* box-nftables-ruleset.h: the nftables rulesets of the plugin, as text for
 * libnftables (one call = one atomic transaction).  Pure string building;
 * tested in nftables-test.c and installed for real in nftables-netns-test.c.
 *
 * The table never grows per sandbox: sandboxes are members of two sets,
 *   taps   { type ifname }                  the box interfaces
 *   guests { type ifname . ipv4_addr }      each tap with its guest address
 * and the rules match the sets.  See README.md for the rules and why.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  const char *ifname;
  const char *address;   /* the guest's IPv4 address */
} BoxNftablesMember;

typedef struct {
  const char  *table;         /* "box": table inet <table> */
  const char  *pool;          /* "10.222.0.0/16" */
  const char  *ifname_prefix; /* "bx": links so named but not in taps are dropped */
  guint16      dns_port;      /* where the plugin's resolver listens */
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
/* Idempotent: adds then deletes, in one transaction. */
char *box_nftables_ruleset_remove_member (const char *table, const char *ifname,
                                          const char *address);
/* Idempotent: removes the table if it is there. */
char *box_nftables_ruleset_uninstall (const char *table);

G_END_DECLS
