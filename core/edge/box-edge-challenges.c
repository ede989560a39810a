/* box-edge-challenges.c: ACME http-01 challenges; see
 * box-edge-challenges.h. */
#include "config.h"

#include "box-edge-challenges.h"

#include <string.h>

struct _BoxEdgeChallenges {
  GObject     parent_instance;
  GHashTable *entries;   /* token -> key authorization */
};

G_DEFINE_FINAL_TYPE (BoxEdgeChallenges, box_edge_challenges, G_TYPE_OBJECT)

static void
box_edge_challenges_finalize (GObject *object)
{
  g_hash_table_unref (BOX_EDGE_CHALLENGES (object)->entries);
  G_OBJECT_CLASS (box_edge_challenges_parent_class)->finalize (object);
}

static void
box_edge_challenges_class_init (BoxEdgeChallengesClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = box_edge_challenges_finalize;
}

static void
box_edge_challenges_init (BoxEdgeChallenges *self)
{
  self->entries = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}

BoxEdgeChallenges *
box_edge_challenges_new (void)
{
  return g_object_new (BOX_TYPE_EDGE_CHALLENGES, NULL);
}

static gboolean
is_base64url (const char *s, gsize len)
{
  if (len == 0 || len > BOX_EDGE_CHALLENGE_MAX_TOKEN)
    return FALSE;
  for (gsize i = 0; i < len; i++)
    if (!g_ascii_isalnum (s[i]) && s[i] != '-' && s[i] != '_')
      return FALSE;
  return TRUE;
}

gboolean
box_edge_challenges_put (BoxEdgeChallenges *self, const char *token,
                         const char *key_authorization)
{
  gsize token_len;
  const char *dot;

  g_return_val_if_fail (BOX_IS_EDGE_CHALLENGES (self), FALSE);
  if (token == NULL || key_authorization == NULL)
    return FALSE;
  token_len = strnlen (token, BOX_EDGE_CHALLENGE_MAX_TOKEN + 1);
  dot = strchr (key_authorization, '.');
  if (!is_base64url (token, token_len) || dot == NULL ||
      (gsize) (dot - key_authorization) != token_len ||
      strncmp (key_authorization, token, token_len) != 0 ||
      !is_base64url (dot + 1, strnlen (dot + 1, BOX_EDGE_CHALLENGE_MAX_TOKEN + 1)))
    return FALSE;
  if (!g_hash_table_contains (self->entries, token) &&
      g_hash_table_size (self->entries) >= BOX_EDGE_CHALLENGE_MAX)
    return FALSE;
  g_hash_table_insert (self->entries, g_strdup (token), g_strdup (key_authorization));
  return TRUE;
}

void
box_edge_challenges_remove (BoxEdgeChallenges *self, const char *token)
{
  g_return_if_fail (BOX_IS_EDGE_CHALLENGES (self));
  g_hash_table_remove (self->entries, token);
}

const char *
box_edge_challenges_lookup (BoxEdgeChallenges *self, const char *token)
{
  g_return_val_if_fail (BOX_IS_EDGE_CHALLENGES (self), NULL);
  return token != NULL ? g_hash_table_lookup (self->entries, token) : NULL;
}
