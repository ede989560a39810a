/* box-egress-policy.h: the egress policy, (name, port, rules) -> allow/deny.
 *
 * The one function that decides whether a restricted sandbox may reach
 * name N on TCP port P, exactly as the spec's "Network" section says:
 *
 *   among the rules that cover P (an allow covers its ports, [80, 443] when
 *   it names none; a deny covers every port), the most specific match for N
 *   decides: the exact name beats the longest matching "*.suffix", which
 *   beats "*", whatever the order of the list; an allow and a deny on the
 *   same domain are a deny; no match is a deny.  A name resolves (DNS) when
 *   it is allowed on some port.
 *
 * The rules are compiled once into hash tables: a lookup costs one hash
 * probe per label of N, whatever the number of rules.  A policy is
 * immutable and its reference count atomic, so the resolver and the proxy
 * may share one across threads; rules that change make a new policy.
 *
 * Names are compared as they travel in DNS, the TLS server name and the
 * Host header: ASCII, case-insensitive, one trailing dot ignored.  An
 * internationalized name matches only in its ASCII form ("xn--..."), the
 * only form a rule can take; a name with any other byte, an empty label,
 * a label over 63 or a name over 253 characters, or one that reads as an
 * IP address (a numeric or "0x" last label, as "127.1" or "0x7f000001")
 * is never allowed in a restricted sandbox.
 */
#pragma once

#include "box-export.h"

#include "box-records.h"

G_BEGIN_DECLS

/* At most this many rules, counting "defaults" expanded (the spec's limit). */
#define BOX_EGRESS_POLICY_MAX_RULES 1000

/**
 * BoxEgressPolicy:
 *
 * A sandbox's egress rules compiled for lookups.  Opaque, immutable,
 * reference counted (atomically); a boxed type.
 */
typedef struct _BoxEgressPolicy BoxEgressPolicy;

#define BOX_TYPE_EGRESS_POLICY (box_egress_policy_get_type ())
BOX_PLUGIN_API
GType            box_egress_policy_get_type      (void) G_GNUC_CONST;

/**
 * box_egress_policy_new:
 * @rules: (element-type BoxRule) (nullable): a sandbox's rules as the client
 *   wrote them (an `include` entry allowed), or already expanded (as
 *   BoxNetwork.set_egress() gets them); %NULL or empty: unrestricted
 * @defaults: (element-type BoxRule) (nullable): what `{include: defaults}`
 *   stands for (GET /v1/network/defaults); %NULL when @rules has no include
 * @error: why the rules cannot be compiled
 *
 * Compiles @rules.  Fails with %BOX_ERROR_INVALID on a rule that the API
 * would refuse (a domain that is not a lowercase host name, "*.<name>" or
 * "*"; a deny with ports; port 0; an include other than "defaults" or with
 * no @defaults) and on more than %BOX_EGRESS_POLICY_MAX_RULES rules counting
 * defaults expanded.
 *
 * Returns: (transfer full) (nullable): the policy
 */
BOX_PLUGIN_API
BoxEgressPolicy *box_egress_policy_new           (GPtrArray *rules, GPtrArray *defaults,
                                                  GError **error);
/**
 * box_egress_policy_ref:
 * @policy: a policy
 *
 * Returns: (transfer full): @policy
 */
BOX_PLUGIN_API
BoxEgressPolicy *box_egress_policy_ref           (BoxEgressPolicy *policy);
BOX_PLUGIN_API
void             box_egress_policy_unref         (BoxEgressPolicy *policy);

/**
 * box_egress_policy_is_restricted:
 * @policy: a policy
 *
 * Any rule at all makes a sandbox restricted; an empty list is the whole
 * internet, and then every name is allowed on every port.
 *
 * Returns: whether the rules restrict the sandbox
 */
BOX_PLUGIN_API
gboolean         box_egress_policy_is_restricted (BoxEgressPolicy *policy);
/**
 * box_egress_policy_get_n_rules:
 * @policy: a policy
 *
 * Returns: the number of rules, defaults expanded
 */
BOX_PLUGIN_API
guint            box_egress_policy_get_n_rules   (BoxEgressPolicy *policy);
/**
 * box_egress_policy_allows:
 * @policy: a policy
 * @name: (nullable): the host name the sandbox connects to (the TLS server
 *   name, the Host header's host, the name it resolved)
 * @port: the TCP port
 *
 * Returns: whether a connection to @name on @port is allowed
 */
BOX_PLUGIN_API
gboolean         box_egress_policy_allows        (BoxEgressPolicy *policy, const char *name,
                                                  guint16 port);
/**
 * box_egress_policy_resolves:
 * @policy: a policy
 * @name: (nullable): the name a DNS query asks for
 *
 * Returns: whether @name is allowed on some port, so the resolver answers it
 */
BOX_PLUGIN_API
gboolean         box_egress_policy_resolves      (BoxEgressPolicy *policy, const char *name);

/**
 * box_egress_policy_get_ports:
 * @policy: a restricted policy
 * @name: (nullable): a host name
 *
 * The TCP ports a connection to @name is allowed on: exactly the ports
 * for which box_egress_policy_allows() says yes.  Empty for an
 * unrestricted policy (every port is allowed there; ask
 * box_egress_policy_is_restricted() first) and for a name that is denied
 * or not a host name.
 *
 * Returns: (transfer full) (element-type guint16): the ports, ascending
 */
BOX_PLUGIN_API
GArray          *box_egress_policy_get_ports     (BoxEgressPolicy *policy, const char *name);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxEgressPolicy, box_egress_policy_unref)

G_END_DECLS
