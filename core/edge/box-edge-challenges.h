/* box-edge-challenges.h: the ACME http-01 challenges the edge's plain-HTTP
 * listener answers (box-edge-http.h) at
 * /.well-known/acme-challenge/<token> with the key authorization, as
 * text/plain (RFC 8555 8.3).  The ACME client puts an entry in before it
 * asks the server to validate, and takes it out afterwards.  Main thread
 * only. */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

/* Tokens are base64url (RFC 8555 8.1), at most this long. */
#define BOX_EDGE_CHALLENGE_MAX_TOKEN 256
/* At most this many challenges at once: a put beyond is refused. */
#define BOX_EDGE_CHALLENGE_MAX       4096

#define BOX_TYPE_EDGE_CHALLENGES (box_edge_challenges_get_type ())
G_DECLARE_FINAL_TYPE (BoxEdgeChallenges, box_edge_challenges, BOX, EDGE_CHALLENGES, GObject)

BoxEdgeChallenges *box_edge_challenges_new    (void);
/* FALSE (and nothing stored) when @token is no base64url token of 1 to
 * BOX_EDGE_CHALLENGE_MAX_TOKEN bytes, @key_authorization is not
 * "<token>.<base64url thumbprint>", or the store is full. */
gboolean           box_edge_challenges_put    (BoxEdgeChallenges *self, const char *token,
                                               const char *key_authorization);
void               box_edge_challenges_remove (BoxEdgeChallenges *self, const char *token);
/* The key authorization for @token, or NULL. */
const char        *box_edge_challenges_lookup (BoxEdgeChallenges *self, const char *token);

G_END_DECLS
