/* box-libvirt-guest.c: talking to a VM's guest agent after a start or restore.
 *
 * The agent listens on the virtio-serial port org.box.agent.0, which
 * libvirt exposes as a Unix socket in the VM's directory.  After a fork the
 * guest needs the host's clock, fresh entropy (the Debian cloud kernel has
 * no VM generation ID), its own hostname and network identity and the
 * sandbox's environment; after a restore the clock and the environment.
 * These requests are pipelined: the agent answers them in order, so they
 * cost one round trip rather than one each.
 */
#include "config.h"

#include <gnutls/crypto.h>

#include "box-libvirt-private.h"

#define BOX_LIBVIRT_RESEED_BYTES 64
#define CONSOLE_TAIL_MAX         300

typedef struct {
  char               *socket_path;
  BoxAgent     *agent;
  BoxPluginContext *context;
  BoxLibvirtGuestSteps steps;
  char               *hostname;
  BoxNetAttachment   *net;
  GHashTable         *env;
  guint64             disk_bytes;
  GBytes             *ca_pem;
  guint               timeout_s;
  GCancellable       *cancellable;    /* ours: the caller's or the timeout cancel it */
  gulong              caller_handler;
  GCancellable       *caller;
  GSource            *timeout;
  gboolean            timed_out;
  guint               pending;
  GError             *error;
  gint64              started;
} Setup;

static void
setup_free (Setup *setup)
{
  if (setup->timeout != NULL) {
    g_source_destroy (setup->timeout);
    g_source_unref (setup->timeout);
  }
  if (setup->caller != NULL) {
    g_cancellable_disconnect (setup->caller, setup->caller_handler);
    g_object_unref (setup->caller);
  }
  g_clear_object (&setup->cancellable);
  g_free (setup->socket_path);
  g_clear_object (&setup->agent);
  g_clear_object (&setup->context);
  g_free (setup->hostname);
  g_clear_pointer (&setup->net, box_net_attachment_free);
  g_clear_pointer (&setup->env, g_hash_table_unref);
  g_clear_pointer (&setup->ca_pem, g_bytes_unref);
  g_clear_error (&setup->error);
  g_free (setup);
}

static gboolean
setup_timeout_cb (gpointer user_data)
{
  Setup *setup = user_data;

  setup->timed_out = TRUE;
  g_cancellable_cancel (setup->cancellable);
  return G_SOURCE_REMOVE;
}

static void
caller_cancelled_cb (GCancellable *caller, gpointer user_data)
{
  GCancellable *ours = user_data;

  g_cancellable_cancel (ours);
}

/* Any error of the exchange, as a BOX_ERROR. */
static GError *
setup_error (Setup *setup, const GError *error, const char *what)
{
  if (setup->timed_out)
    return g_error_new (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                        "the guest agent did not answer %s within %u s", what,
                        setup->timeout_s);
  if (error->domain == BOX_ERROR)
    return g_error_new (BOX_ERROR, error->code, "%s: %s", what, error->message);
  return g_error_new (BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE, "%s: %s", what,
                      error->message);
}

static void
setup_return (GTask *task)
{
  Setup *setup = g_task_get_task_data (task);

  g_debug ("libvirt: guest %s answered in %.1f ms", setup->socket_path,
           (g_get_monotonic_time () - setup->started) / 1e3);
  if (setup->error != NULL) {
    /* a guest that died (a panic reboots it, and the domain ends) says why
     * on its console, next to the socket (a set-up of a connected agent
     * has no socket path) */
    g_autofree char *dir = setup->socket_path != NULL ?
                           g_path_get_dirname (setup->socket_path) : NULL;
    g_autofree char *console = dir != NULL ? g_build_filename (dir, "console.log", NULL) : NULL;
    g_autofree char *tail = console != NULL ?
                            box_libvirt_console_file_tail (console, CONSOLE_TAIL_MAX) : NULL;

    if (tail != NULL && tail[0] != '\0') {
      GError *error = setup->error;
      char *message = g_strdup_printf ("%s (the VM's console ends: %s)", error->message, tail);

      g_free (error->message);
      error->message = message;
    }
    g_task_return_error (task, g_steal_pointer (&setup->error));
  } else {
    g_task_return_pointer (task, g_object_ref (setup->agent), g_object_unref);
  }
  g_object_unref (task);
}

static void
step_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Setup *setup = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) reply = box_agent_call_finish (BOX_AGENT (source), result,
                                                              &error);

  if (reply == NULL && setup->error == NULL)
    setup->error = setup_error (setup, error, "preparing the guest");
  if (--setup->pending == 0)
    setup_return (task);
}

static void
exec_step_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Setup *setup = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(BoxExecResult) exec = box_agent_exec_run_finish (BOX_AGENT (source),
                                                                    result, &error);

  if (exec == NULL && setup->error == NULL)
    setup->error = setup_error (setup, error, "a first command in the guest");
  else if (exec != NULL && exec->exit_code != 0 && setup->error == NULL)
    setup->error = g_error_new (BOX_ERROR, BOX_ERROR_INTERNAL,
                                "`true` in the guest exited with %d", exec->exit_code);
  if (--setup->pending == 0)
    setup_return (task);
}

/* trust-ca ahead of a create is a head start, not a need: the engine
 * sends the CA again at the create, so a refusal only costs that time */
static void
trust_step_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Setup *setup = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) reply = box_agent_call_finish (BOX_AGENT (source), result, &error);

  /* (cancelled by the caller: the fill is going away, nothing to say) */
  if (reply == NULL &&
      (setup->timed_out || !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))) {
    g_autoptr(GError) why = setup_error (setup, error, "trust-ca");

    g_message ("libvirt: guest %s did not take the CA in advance: %s", setup->socket_path,
               why->message);
  }
  if (--setup->pending == 0)
    setup_return (task);
}

static void
step (GTask *task, const char *op, JsonObject *args)
{
  Setup *setup = g_task_get_task_data (task);

  setup->pending++;
  box_agent_call_async (setup->agent, op, args, setup->cancellable, step_done, task);
}

static JsonObject *
env_object (GHashTable *env)
{
  JsonObject *object = json_object_new ();
  GHashTableIter iter;
  gpointer key, value;

  if (env != NULL) {
    g_hash_table_iter_init (&iter, env);
    while (g_hash_table_iter_next (&iter, &key, &value))
      json_object_set_string_member (object, key, value);
  }
  return object;
}

static void
run_steps (GTask *task)
{
  Setup *setup = g_task_get_task_data (task);

  /* one extra count so that replies arriving while we send do not finish early */
  setup->pending = 1;
  if (setup->steps & BOX_LIBVIRT_GUEST_TIME) {
    g_autoptr(JsonObject) args = json_object_new ();
    json_object_set_int_member (args, "unix_ns", g_get_real_time () * 1000);
    step (task, "set-time", args);
  }
  if (setup->steps & BOX_LIBVIRT_GUEST_RANDOM) {
    g_autoptr(JsonObject) args = json_object_new ();
    guint8 bytes[BOX_LIBVIRT_RESEED_BYTES];
    g_autofree char *data = NULL;

    if (gnutls_rnd (GNUTLS_RND_KEY, bytes, sizeof bytes) != 0) {
      if (setup->error == NULL)
        setup->error = g_error_new_literal (BOX_ERROR, BOX_ERROR_INTERNAL,
                                            "no entropy to reseed the guest with");
    } else {
      data = g_base64_encode (bytes, sizeof bytes);
      json_object_set_string_member (args, "data", data);
      step (task, "reseed-random", args);
    }
  }
  if ((setup->steps & BOX_LIBVIRT_GUEST_HOSTNAME) && setup->hostname != NULL) {
    g_autoptr(JsonObject) args = json_object_new ();
    json_object_set_string_member (args, "hostname", setup->hostname);
    step (task, "set-hostname", args);
  }
  if ((setup->steps & BOX_LIBVIRT_GUEST_NETWORK) && setup->net != NULL) {
    g_autoptr(JsonObject) args = json_object_new ();
    g_autoptr(JsonArray) dns = json_array_new ();
    g_autofree char *address = g_strdup_printf ("%s/%u", setup->net->address,
                                                setup->net->prefix);

    json_object_set_string_member (args, "iface", "eth0");
    if (setup->net->mac != NULL)
      json_object_set_string_member (args, "mac", setup->net->mac);
    json_object_set_string_member (args, "address", address);
    if (setup->net->gateway != NULL)
      json_object_set_string_member (args, "gateway", setup->net->gateway);
    for (guint i = 0; setup->net->dns != NULL && setup->net->dns[i] != NULL; i++)
      json_array_add_string_element (dns, setup->net->dns[i]);
    json_object_set_array_member (args, "dns", g_steal_pointer (&dns));
    if (setup->hostname != NULL)
      json_object_set_string_member (args, "hostname", setup->hostname);
    step (task, "configure-network", args);
  }
  if (setup->steps & BOX_LIBVIRT_GUEST_GROW_FS) {
    g_autoptr(JsonObject) args = json_object_new ();
    /* the guest waits for the disk to show this size: it learns of a
     * resize asynchronously */
    json_object_set_int_member (args, "bytes", (gint64) setup->disk_bytes);
    step (task, "grow-fs", args);
  }
  if (setup->steps & BOX_LIBVIRT_GUEST_ENV) {
    g_autoptr(JsonObject) args = json_object_new ();
    json_object_set_object_member (args, "env", env_object (setup->env));
    step (task, "set-env", args);
  }
  if (setup->steps & BOX_LIBVIRT_GUEST_ENV_HOLD) {
    g_autoptr(JsonObject) args = json_object_new ();
    json_object_set_object_member (args, "env", json_object_new ());
    json_object_set_boolean_member (args, "hold", TRUE);
    step (task, "set-env", args);
  }
  if ((setup->steps & BOX_LIBVIRT_GUEST_TRUST_CA) && setup->ca_pem != NULL) {
    g_autoptr(JsonObject) args = json_object_new ();
    gsize len = 0;
    const char *data = g_bytes_get_data (setup->ca_pem, &len);
    g_autofree char *text = g_strndup (data, len);

    json_object_set_string_member (args, "pem", text);
    setup->pending++;
    box_agent_call_async (setup->agent, "trust-ca", args, setup->cancellable, trust_step_done,
                          task);
  }
  if (setup->steps & BOX_LIBVIRT_GUEST_SYNC)
    step (task, "sync", NULL);
  if (setup->steps & BOX_LIBVIRT_GUEST_EXEC) {
    /* a first command as the default user: fork, exec, the dynamic
     * linker, PAM-free setuid, all translated once */
    char *argv[] = { (char *) "true", NULL };
    BoxExecRequest request = { .argv = argv, .timeout_s = 30 };

    setup->pending++;
    box_agent_exec_run_async (setup->agent, &request, setup->cancellable, exec_step_done,
                                     task);
  }
  if (--setup->pending == 0)
    setup_return (task);
}

static void
hello_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Setup *setup = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;

  if (!box_agent_connect_finish (BOX_AGENT (source), result, &error)) {
    setup->error = setup_error (setup, error, "connecting to the guest agent");
    box_agent_close (setup->agent);
    setup_return (task);
    return;
  }
  run_steps (task);
}

static void
socket_connected (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Setup *setup = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocketConnection) connection =
    g_socket_client_connect_finish (G_SOCKET_CLIENT (source), result, &error);

  if (connection == NULL) {
    g_autofree char *what = g_strdup_printf ("connecting to %s", setup->socket_path);
    setup->error = setup_error (setup, error, what);
    setup_return (task);
    return;
  }
  setup->agent = box_plugin_context_new_agent (setup->context, G_IO_STREAM (connection), &error);
  if (setup->agent == NULL) {
    setup->error = setup_error (setup, error, "connecting to the guest agent");
    setup_return (task);
    return;
  }
  box_agent_connect_async (setup->agent, setup->cancellable, hello_done, task);
}

void
box_libvirt_guest_setup_async (const BoxLibvirtGuestSetup *params, GCancellable *cancellable,
                               GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (NULL, cancellable, callback, user_data);
  Setup *setup = g_new0 (Setup, 1);

  g_task_set_source_tag (task, box_libvirt_guest_setup_async);
  g_task_set_task_data (task, setup, (GDestroyNotify) setup_free);
  setup->context = g_object_ref (params->context);
  setup->socket_path = g_strdup (params->socket_path);
  setup->agent = params->agent != NULL ? g_object_ref (params->agent) : NULL;
  setup->steps = params->steps;
  setup->hostname = g_strdup (params->hostname);
  setup->net = params->net != NULL ? box_net_attachment_copy (params->net) : NULL;
  setup->env = params->env != NULL ? g_hash_table_ref (params->env) : NULL;
  setup->disk_bytes = params->disk_bytes;
  setup->ca_pem = params->ca_pem != NULL ? g_bytes_ref (params->ca_pem) : NULL;
  setup->timeout_s = MAX (params->timeout_s, 1);
  setup->started = g_get_monotonic_time ();
  setup->cancellable = g_cancellable_new ();
  if (cancellable != NULL) {
    setup->caller = g_object_ref (cancellable);
    setup->caller_handler = g_cancellable_connect (cancellable, G_CALLBACK (caller_cancelled_cb),
                                                   setup->cancellable, NULL);
  }
  setup->timeout = g_timeout_source_new_seconds (setup->timeout_s);
  g_source_set_callback (setup->timeout, setup_timeout_cb, setup, NULL);
  g_source_attach (setup->timeout, g_main_context_get_thread_default ());

  if (setup->agent != NULL) {
    run_steps (task);
  } else {
    g_autoptr(GSocketClient) client = g_socket_client_new ();
    g_autoptr(GSocketAddress) address = g_unix_socket_address_new (setup->socket_path);

    g_socket_client_connect_async (client, G_SOCKET_CONNECTABLE (address), setup->cancellable,
                                   socket_connected, task);
  }
}

BoxAgent *
box_libvirt_guest_setup_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

static void
adopted_hello_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GError) error = NULL;

  if (!box_agent_connect_finish (BOX_AGENT (source), result, &error))
    g_message ("libvirt: reconnecting to a guest agent failed: %s", error->message);
}

BoxAgent *
box_libvirt_guest_connect_now (BoxPluginContext *context, const char *socket_path, GError **error)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketAddress) address = g_unix_socket_address_new (socket_path);
  g_autoptr(GSocketConnection) connection = NULL;
  g_autoptr(GError) local_error = NULL;
  BoxAgent *agent;

  /* a local Unix socket: connecting does not wait for the guest */
  connection = g_socket_client_connect (client, G_SOCKET_CONNECTABLE (address), NULL,
                                        &local_error);
  if (connection == NULL) {
    g_set_error (error, BOX_ERROR, BOX_ERROR_SANDBOX_UNAVAILABLE,
                 "cannot connect to the guest agent: %s", local_error->message);
    return NULL;
  }
  agent = box_plugin_context_new_agent (context, G_IO_STREAM (connection), error);
  if (agent == NULL)
    return NULL;
  box_agent_connect_async (agent, NULL, adopted_hello_done, NULL);
  return agent;
}

/* ---- one request with a deadline ---- */

typedef struct {
  GCancellable *cancellable;
  GSource      *timeout;
} Call;

static void
call_free (Call *call)
{
  g_source_destroy (call->timeout);
  g_source_unref (call->timeout);
  g_object_unref (call->cancellable);
  g_free (call);
}

static gboolean
call_timeout_cb (gpointer user_data)
{
  g_cancellable_cancel (G_CANCELLABLE (user_data));
  return G_SOURCE_REMOVE;
}

static void
call_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) reply = box_agent_call_finish (BOX_AGENT (source), result,
                                                              &error);

  if (reply == NULL)
    g_task_return_error (task, box_error_convert (error, "guest agent"));
  else
    g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

void
box_libvirt_guest_call_async (BoxAgent *agent, const char *op, guint timeout_s,
                              GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (NULL, NULL, callback, user_data);
  Call *call = g_new0 (Call, 1);

  g_task_set_source_tag (task, box_libvirt_guest_call_async);
  g_task_set_task_data (task, call, (GDestroyNotify) call_free);
  call->cancellable = g_cancellable_new ();
  call->timeout = g_timeout_source_new_seconds (MAX (timeout_s, 1));
  g_source_set_callback (call->timeout, call_timeout_cb, call->cancellable, NULL);
  g_source_attach (call->timeout, g_main_context_get_thread_default ());
  box_agent_call_async (agent, op, NULL, call->cancellable, call_done, task);
}

gboolean
box_libvirt_guest_call_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}
