/* box-auth.h: who is calling.
 *
 * An auth plugin turns a bearer credential into a principal and manages the
 * credentials it understands.  The admin token is the engine's (it is
 * deployment configuration); project credentials are the plugin's.
 * authenticate() is on the hot path of every request: no blocking beyond a
 * local indexed lookup, and comparisons in constant time.
 *
 * Thread contract: every call on the main thread; the plugin may use the
 * store its context gives it (box_plugin_context_get_storage()) from
 * those calls, on the main thread only.
 */
#pragma once

#include "box-export.h"

#include "box-plugin.h"

G_BEGIN_DECLS

/**
 * BoxAuthInterface:
 * @g_iface: the parent interface
 * @authenticate: a project principal for a credential, or %NULL with
 *   %BOX_ERROR_UNAUTHORIZED; on the hot path of every request
 * @create_key: a new key for a project; the secret it returns is the only
 *   copy
 * @list_keys: the project's keys (#BoxKey, a new array that owns them)
 * @delete_key: revokes a key; it stops working at once
 *
 * The virtual methods of an auth plugin.
 */

/**
 * BoxAuth:
 *
 * Who is calling: turns a bearer credential into a #BoxPrincipal and
 * manages the project credentials it understands (the admin token is the
 * engine's).  authenticate() is on the hot path of every request: no
 * blocking beyond a local indexed lookup, comparisons in constant time.
 * Every call comes on the main thread.
 */
#define BOX_TYPE_AUTH (box_auth_get_type ())
BOX_PLUGIN_API
G_DECLARE_INTERFACE (BoxAuth, box_auth, BOX, AUTH, GObject)

struct _BoxAuthInterface {
  GTypeInterface g_iface;

  /* A project principal for @credential, or NULL with BOX_ERROR_UNAUTHORIZED. */
  BoxPrincipal *(*authenticate) (BoxAuth *self, const char *credential, GError **error);
  /* A new key for @project; *secret_out is the only copy of the secret. */
  BoxKey       *(*create_key)   (BoxAuth *self, const char *project, const char *name,
                                 char **secret_out, GError **error);
  GPtrArray    *(*list_keys)    (BoxAuth *self, const char *project, GError **error);
  /* A revoked key stops working at once. */
  gboolean      (*delete_key)   (BoxAuth *self, const char *project, const char *key_id,
                                 GError **error);

  /*< private >*/
  gpointer padding[12];
};

/**
 * box_auth_authenticate:
 * @self: the auth plugin
 * @credential: the bearer credential
 * @error: %BOX_ERROR_UNAUTHORIZED
 *
 * Returns: (transfer full) (nullable): who is calling, or %NULL with
 *   BOX_ERROR_UNAUTHORIZED
 */
BOX_PLUGIN_API
BoxPrincipal *box_auth_authenticate (BoxAuth *self, const char *credential, GError **error);
/**
 * box_auth_create_key:
 * @self: the auth plugin
 * @project: the project
 * @name: the key's name
 * @secret_out: (out) (transfer full): the secret, its only copy
 * @error: why no key was made
 *
 * Returns: (transfer full) (nullable): the new key
 */
BOX_PLUGIN_API
BoxKey       *box_auth_create_key   (BoxAuth *self, const char *project, const char *name,
                                     char **secret_out, GError **error);
/**
 * box_auth_list_keys:
 *
 * Returns: (transfer container) (element-type BoxKey) (nullable): the
 *   project's keys, which the array owns
 */
BOX_PLUGIN_API
GPtrArray    *box_auth_list_keys    (BoxAuth *self, const char *project, GError **error);
BOX_PLUGIN_API
gboolean      box_auth_delete_key   (BoxAuth *self, const char *project, const char *key_id,
                                     GError **error);

G_END_DECLS
