/* box-engine-broker.c: a sandbox's secrets handed to the secrets broker.
 *
 * A sandbox that uses secrets gets them, values unsealed, in the broker
 * (box_broker_set_secrets()) and its TCP 443 sent through the network's
 * proxy (box_network_set_brokered()) whenever it is (re)attached: before
 * its code runs at create, fork, wake and restore (box_engine_push_egress()),
 * for the awake ones at boxd start, at once on a PATCH of its secrets and
 * on a PUT of a secret it uses.  Deleting the sandbox or emptying its
 * secrets takes them back.  The values are unsealed here only, for the
 * broker; they are never logged, never in an event, never sent to a guest.
 * What the guest gets instead: for each secret, NAME=its placeholder in the
 * environment of everything it runs (box_engine_guest_env()).
 *
 * Every sandbox (secrets or not) trusts the broker's CA: the engine sends
 * it (the agent's trust-ca, box_engine_send_ca()) after each create, fork,
 * wake, boot and restore before the operation answers, and to every awake
 * sandbox after a rotation.  A guest that does not take it, or does not
 * answer within BOX_ENGINE_CA_WAIT_MS, is logged and runs on (its TLS to
 * brokered hosts fails until its next wake).  The hypervisor gets the CA
 * too (box_hypervisor_set_guest_ca()), at start and after a rotation: a
 * guest it warmed up in advance holds it already, and the agent leaves
 * files that hold it alone, so a create's trust-ca writes nothing.
 */
#include "config.h"

#include "box-agent-client.h"
#include "box-agent-exec.h"
#include "box-engine-ops-private.h"
#include "box-storage-records.h"

/* What set_secrets borrows: the records and values, alive for the call. */
typedef struct {
  GPtrArray *records;   /* BoxSecret* */
  GPtrArray *values;    /* GBytes* */
  GPtrArray *brokered;  /* BoxBrokeredSecret* */
} Brokered;

static void
brokered_clear (Brokered *b)
{
  g_clear_pointer (&b->brokered, g_ptr_array_unref);
  g_clear_pointer (&b->values, g_ptr_array_unref);
  g_clear_pointer (&b->records, g_ptr_array_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Brokered, brokered_clear)

/* The secrets @sandbox uses, each with its value; a secret deleted
 * meanwhile is left out. */
static gboolean
brokered_collect (BoxEngine *self, const BoxSandbox *sandbox, Brokered *b, GError **error)
{
  b->records = g_ptr_array_new_with_free_func ((GDestroyNotify) box_secret_free);
  b->values = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  b->brokered = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; sandbox->secrets != NULL && sandbox->secrets[i] != NULL; i++) {
    g_autoptr(BoxSecret) secret = box_storage_secret_get (self->storage, sandbox->project,
                                                          sandbox->secrets[i], NULL);
    g_autofree char *associated = NULL;
    BoxBrokeredSecret *item;
    GBytes *value;

    if (secret == NULL)
      continue;
    associated = g_strdup_printf ("%s/%s", secret->project, secret->name);
    value = box_secret_key_open (self->secret_key, associated, secret->sealed_value, error);
    if (value == NULL)
      return FALSE;
    item = g_new0 (BoxBrokeredSecret, 1);
    item->secret = secret;
    item->value = value;
    g_ptr_array_add (b->values, value);
    g_ptr_array_add (b->records, g_steal_pointer (&secret));
    g_ptr_array_add (b->brokered, item);
  }
  return TRUE;
}

/* Like box_engine_push_secrets(); *@broker_took says whether the broker
 * holds the new set, even when the network then refused (the caller that
 * undoes a refused change gives it the previous set back). */
gboolean
box_engine_push_secrets_full (BoxEngine *self, const BoxSandbox *sandbox, gboolean *broker_took,
                              GError **error)
{
  g_auto(Brokered) b = { 0 };

  *broker_took = FALSE;
  if (self->broker == NULL || self->secret_key == NULL || sandbox->secrets == NULL ||
      sandbox->secrets[0] == NULL)
    return TRUE;
  if (!brokered_collect (self, sandbox, &b, error) ||
      !box_broker_set_secrets (self->broker, sandbox->id, b.brokered, error))
    return FALSE;
  *broker_took = TRUE;
  box_engine_runtime_get (self, sandbox->id)->broker_holds = b.brokered->len > 0;
  return self->network == NULL ||
         box_network_set_brokered (self->network, sandbox->id, b.brokered->len > 0, error);
}

gboolean
box_engine_push_secrets (BoxEngine *self, const BoxSandbox *sandbox, GError **error)
{
  gboolean broker_took;

  return box_engine_push_secrets_full (self, sandbox, &broker_took, error);
}

void
box_engine_drop_secrets (BoxEngine *self, const char *sandbox_id)
{
  g_autoptr(GPtrArray) none = NULL;
  g_autoptr(GError) error = NULL;

  if (self->broker == NULL)
    return;
  none = g_ptr_array_new ();
  if (box_broker_set_secrets (self->broker, sandbox_id, none, &error)) {
    box_engine_runtime_get (self, sandbox_id)->broker_holds = FALSE;
  } else {
    g_warning ("sandbox %s: the broker did not drop its secrets: %s", sandbox_id,
               error->message);
    g_clear_error (&error);
  }
  if (self->network != NULL && !box_network_set_brokered (self->network, sandbox_id, FALSE, &error))
    g_warning ("sandbox %s: the network still sends it to the broker: %s", sandbox_id,
               error->message);
}

/* Whether a change of a secret @sandbox uses must reach the broker now:
 * it is awake, or an operation holds it (a wake, a create, a restore)
 * after the broker got its secrets, which may be the old ones. */
gboolean
box_engine_broker_needs (BoxEngine *self, const BoxSandbox *sandbox)
{
  BoxEngineRuntime *rt = g_hash_table_lookup (self->runtime, sandbox->id);

  return sandbox->state == BOX_SANDBOX_STATE_RUNNING ||
         (rt != NULL && rt->base.busy && rt->broker_holds);
}

/* The hypervisor learns the CA too: guests it prepares in advance (the
 * warm pool) hold it before a create asks for it. */
static void
guest_ca_to_hypervisor (BoxEngine *self)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) pem = box_broker_get_ca_pem (self->broker, &error);

  if (pem == NULL)
    g_warning ("the hypervisor does not get the broker CA: %s", error->message);
  box_hypervisor_set_guest_ca (self->hypervisor, pem);
}

/* At boxd start: the broker starts empty, so every awake sandbox that
 * uses secrets gets them again (asleep ones at their wake).  A sandbox the
 * broker refuses is said loudly and keeps running without them. */
void
box_engine_broker_reconcile (BoxEngine *self)
{
  g_autoptr(GPtrArray) sandboxes = NULL;
  g_autoptr(GError) error = NULL;

  if (self->broker == NULL)
    return;
  guest_ca_to_hypervisor (self);
  if (self->network != NULL)
    box_network_set_broker (self->network, self->broker);
  sandboxes = box_storage_sandbox_list (self->storage, NULL, &error);
  if (sandboxes == NULL) {
    g_warning ("the broker gets no sandbox's secrets at start: %s", error->message);
    return;
  }
  for (guint i = 0; i < sandboxes->len; i++) {
    const BoxSandbox *sandbox = g_ptr_array_index (sandboxes, i);

    if (sandbox->state != BOX_SANDBOX_STATE_RUNNING || box_engine_push_secrets (self, sandbox, &error))
      continue;
    g_warning ("sandbox %s: its secrets did not reach the broker at start: %s", sandbox->id,
               error->message);
    g_clear_error (&error);
  }
}

typedef struct {
  BoxEngine       *self;
  char            *sandbox_id;
  BoxEngineCaDone  done;
  gpointer         data;
  GSource         *timer;      /* cancels the call after BOX_ENGINE_CA_WAIT_MS */
} CaSend;

static gboolean
ca_wait_over (gpointer user_data)
{
  g_cancellable_cancel (user_data);
  return G_SOURCE_REMOVE;
}

static void
ca_sent (GObject *source, GAsyncResult *result, gpointer user_data)
{
  CaSend *send = user_data;
  g_autoptr(GError) error = NULL;

  if (!box_agent_client_trust_ca_finish (BOX_AGENT_CLIENT (source), result, &error)) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      g_warning ("sandbox %s: the guest did not take the broker CA within %d ms",
                 send->sandbox_id, BOX_ENGINE_CA_WAIT_MS);
    else
      g_warning ("sandbox %s: the guest did not take the broker CA: %s", send->sandbox_id,
                 error->message);
  }
  g_source_destroy (send->timer);
  g_source_unref (send->timer);
  if (send->done != NULL)
    send->done (send->self, send->data);
  g_object_unref (send->self);
  g_free (send->sandbox_id);
  g_free (send);
}

gboolean
box_engine_send_ca (BoxEngine *self, const char *sandbox_id, BoxEngineCaDone done, gpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) pem = NULL;
  g_autoptr(BoxAgentClient) agent = NULL;
  g_autoptr(GCancellable) cancel = NULL;
  CaSend *send;

  if (self->broker == NULL ||
      !box_hypervisor_has_caps (self->hypervisor, BOX_HYPERVISOR_CAP_GUEST_AGENT))
    return FALSE;
  pem = box_broker_get_ca_pem (self->broker, &error);
  if (pem != NULL)
    agent = box_hypervisor_get_agent (self->hypervisor, sandbox_id, &error);
  if (agent == NULL) {
    g_warning ("sandbox %s: the guest did not get the broker CA: %s", sandbox_id, error->message);
    return FALSE;
  }
  send = g_new0 (CaSend, 1);
  send->self = g_object_ref (self);
  send->sandbox_id = g_strdup (sandbox_id);
  send->done = done;
  send->data = data;
  /* a guest that never answers holds its operation this long at most */
  cancel = g_cancellable_new ();
  send->timer = g_timeout_source_new (BOX_ENGINE_CA_WAIT_MS);
  g_source_set_callback (send->timer, ca_wait_over, g_object_ref (cancel), g_object_unref);
  g_source_attach (send->timer, g_main_context_get_thread_default ());
  box_agent_client_trust_ca_async (agent, pem, cancel, ca_sent, send);
  return TRUE;
}

/* With a broker: TLS clients that do not read the system bundle by
 * default are pointed at it (or, node, at the CA alone). */
static const char *const ca_env[] = {
  "NODE_EXTRA_CA_CERTS", "/etc/box/ca.pem",
  "SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt",
  "REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt",
  "CARGO_HTTP_CAINFO", "/etc/ssl/certs/ca-certificates.crt",
  "UV_NATIVE_TLS", "1",
  NULL,
};

GHashTable *
box_engine_guest_env (BoxEngine *self, const BoxSandbox *sandbox)
{
  GHashTable *env = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  if (sandbox->env != NULL)
    box_engine_copy_map (env, sandbox->env);
  /* the sandbox's own env wins over these */
  for (guint i = 0; self->broker != NULL && ca_env[i] != NULL; i += 2) {
    if (!g_hash_table_contains (env, ca_env[i]))
      g_hash_table_insert (env, g_strdup (ca_env[i]), g_strdup (ca_env[i + 1]));
  }
  /* a secret's name is never also in env (400 at create and PATCH) */
  for (guint i = 0; sandbox->secrets != NULL && sandbox->secrets[i] != NULL; i++) {
    g_autoptr(BoxSecret) secret = box_storage_secret_get (self->storage, sandbox->project,
                                                          sandbox->secrets[i], NULL);

    if (secret != NULL && secret->placeholder != NULL)
      g_hash_table_replace (env, g_strdup (secret->name), g_strdup (secret->placeholder));
  }
  return env;
}

gboolean
box_engine_rotate_broker_ca (BoxEngine *self, guint *sandboxes, GError **error)
{
  g_autoptr(GPtrArray) all = NULL;
  guint awake = 0;

  g_return_val_if_fail (BOX_IS_ENGINE (self), FALSE);
  if (self->broker == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED,
                         "no secrets broker: boxd runs without one ([boxd] broker=)");
    return FALSE;
  }
  if (!box_broker_rotate_ca (self->broker, error))
    return FALSE;
  g_message ("the secrets broker has a new CA");
  guest_ca_to_hypervisor (self);
  all = box_storage_sandbox_list (self->storage, NULL, NULL);
  for (guint i = 0; all != NULL && i < all->len; i++) {
    const BoxSandbox *sandbox = g_ptr_array_index (all, i);

    if (sandbox->state != BOX_SANDBOX_STATE_RUNNING)
      continue;
    /* every awake guest trusts the new CA; asleep ones get it at wake */
    box_engine_send_ca (self, sandbox->id, NULL, NULL);
    if (sandbox->secrets != NULL && sandbox->secrets[0] != NULL)
      awake++;
  }
  if (sandboxes != NULL)
    *sandboxes = awake;
  return TRUE;
}
