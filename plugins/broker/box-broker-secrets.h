/* box-broker-secrets.h: which secrets the broker puts into which
 * sandbox's connections.  Thread-safe: set on the main thread, read by the
 * network's threads (wants) and the pump's (rules).
 */
#pragma once

#include "box-broker.h"

G_BEGIN_DECLS

typedef struct _BoxBrokerSecrets BoxBrokerSecrets;

BoxBrokerSecrets *box_broker_secrets_new  (void);
void              box_broker_secrets_free (BoxBrokerSecrets *secrets);
/* Replaces @sandbox_id's secrets (BoxBrokeredSecret*) with copies; empty
 * or NULL: none.  The values are copied into memory that is zeroed when
 * it is dropped. */
void     box_broker_secrets_set   (BoxBrokerSecrets *secrets, const char *sandbox_id, GPtrArray *brokered);
/* Whether a secret of @sandbox_id names @host. */
gboolean box_broker_secrets_wants (BoxBrokerSecrets *secrets, const char *sandbox_id, const char *host);
/* The rules (BoxBrokerHttpRule*) for @sandbox_id's connections to @host;
 * an empty array when none applies any more. */
GPtrArray *box_broker_secrets_rules (BoxBrokerSecrets *secrets, const char *sandbox_id, const char *host);
/* Goes up by one on every change (any thread may compare). */
guint    box_broker_secrets_generation (BoxBrokerSecrets *secrets);

/* Whether a secret's host entry ("name", "*.suffix", an IP literal, each
 * optionally followed by "/path") names @host; its path part in
 * @path_prefix (NULL when it has none). */
gboolean box_broker_host_matches (const char *entry, const char *host, char **path_prefix);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxBrokerSecrets, box_broker_secrets_free)

G_END_DECLS
