/* box-edge-route.h: what the edge reads from a request, as pure functions
 * (unit tested in tests/edge/).
 *
 * Hosts: <name>--<project>.<domain> and <port>--<name>--<project>.<domain>
 * under the sandbox domain, <name>.<own> and <port>--<name>.<own> under a
 * project's own domain (case-insensitive, an optional :port and a trailing
 * dot after it); the name and project are DNS labels without "--", the
 * port a decimal 1..65535 without leading zeros.  The box_token query parameter and cookie are taken out of what
 * goes on to the sandbox. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define BOX_EDGE_TOKEN "box_token"

/* TRUE with @name, @project and @port (0: the sandbox's http_port) when
 * @host is a sandbox URL's host under @domain. */
gboolean  box_edge_parse_host   (const char *host, const char *domain, char **name,
                                 char **project, guint *port);
/* @host lowercased, without its :port (which must be a port) and
 * trailing dot; FALSE for a bad or empty host. */
gboolean  box_edge_normalize_host (const char *host, char **out);
/* The project whose own domain @host (normalized) is or lies under, the
 * longest domain winning, and in *@prefix the labels before the domain
 * ("" for the domain itself); NULL for none (box_engine_project_for_host()). */
typedef char *(*BoxEdgeDomainLookup) (gpointer data, const char *host, char **prefix);
/* Where @host goes: under the sandbox @domain or under an own domain that
 * @lookup knows, whichever of the two is longer when both match (the
 * sandbox domain on a tie); FALSE for the domain itself, a name that is no
 * [<port>--]<name> (own) or [<port>--]<name>--<project> (sandbox domain)
 * label, or a label deeper. */
gboolean  box_edge_resolve_host (const char *host, const char *domain, BoxEdgeDomainLookup lookup,
                                 gpointer data, char **name, char **project, guint *port);
/* @query (without "?", may be NULL) without its box_token parameters, the
 * others kept in order: NULL when none is left.  *@token: the last
 * box_token's value (percent-decoded), or NULL. */
char     *box_edge_strip_query  (const char *query, char **token);
/* The same for a Cookie header's value ("a=b; c=d"): NULL when no cookie
 * is left. */
char     *box_edge_strip_cookie (const char *cookie, char **token);

G_END_DECLS
