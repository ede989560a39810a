/* nftables-netns-policy.h: what the filtering resolver's tests share
 * (nftables-netns-policy.c, the helpers; nftables-netns-fair.c). */
#pragma once

#include <ldns/ldns.h>

#include "box-nftables-dns.h"
#include "box-nftables-egress.h"

#define RES_PORT    10057
#define WORLD_PORT  10058
#define RESTRICTED  0x7f000002
#define OPEN        0x7f000003
#define WAIT_MS     3000

typedef struct {
  GMutex     lock;
  guint      resolved;      /* report_resolved calls */
  char      *name;
  guint32    addr;
  guint      n_addrs;
  guint32    ttl;
  GPtrArray *lines;         /* refusal log lines */
  guint      done;          /* resolve_func completions */
  guint32    done_addr;
  GError    *done_error;
} Seen;

void             on_done          (const guint32 *addrs, guint n, guint32 ttl,
                                   const GError *error, gpointer data);
/* whether @seen got @count completions within WAIT_MS */
gboolean         wait_done        (Seen *seen, guint count);
/* the restricted sandbox's rules (see nftables-netns-policy.c) */
BoxEgressPolicy *test_policy      (void);
/* a socket of @type bound to @address:@port (0: any port) */
int              socket_on        (int type, guint32 address, guint16 port);
gboolean         readable_within  (int fd, int timeout_ms);
/* a query to the resolver on RES_PORT */
void             send_query       (int fd, guint16 id, const char *name, guint16 type);
/* Answers the next query reaching @upstream with @records (text);
 * returns the name it asked for (NULL: none came within @timeout_ms). */
char            *upstream_answers (int upstream, const char *const *records, int timeout_ms);
/* The next answer on @fd (UDP, or TCP when @tcp); NULL when none came. */
ldns_pkt        *next_answer      (int fd, gboolean tcp);
/* Asserts (and frees) @pkt's ID, RCODE and first A record (NULL: none). */
void             assert_answer    (ldns_pkt *pkt, guint16 id, ldns_pkt_rcode rcode,
                                   const char *a, guint32 *ttl);
/* A resolver on RES_PORT asking @upstream, with @egress holding the
 * restricted sandbox (@policy) and the open one. */
BoxNftablesDns  *resolver_on      (int upstream, BoxNftablesEgress *egress,
                                   BoxEgressPolicy *policy);
