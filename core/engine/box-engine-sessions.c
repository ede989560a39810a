/* box-engine-sessions.c: streaming exec, sessions and ports, on top of the
 * sub-API's hold (box-engine-subapi.c) and the typed agent operations
 * (box-agent-exec.h); and the port access settings, which are records
 * only. */
#include "config.h"

#include "box-agent-exec.h"
#include "box-engine-private.h"
#include "box-validate.h"

/* ---- streams on a held sandbox ----------------------------------------- */

typedef struct {
  BoxExecStreamRequest *request;
  char                 *session;
  gint64                offset;
  guint                 port;
} Open;

static void
open_free (Open *open)
{
  g_clear_pointer (&open->request, box_exec_stream_request_free);
  g_free (open->session);
  g_free (open);
}

/* The stream @object was made (or not: @error): the task's hold goes to it. */
static void
stream_done (GTask *task, gpointer object, GError *error)
{
  BoxEngineHold *hold;

  if (object == NULL) {
    box_engine_task_release (task);
    g_task_return_error (task, error);
    return;
  }
  hold = box_engine_task_steal_hold (task);
  if (BOX_IS_EXEC_SESSION (object))
    box_exec_session_set_keeper (object, &box_engine_hold_keeper, hold);
  else
    box_agent_stream_set_keeper (object, &box_engine_hold_keeper, hold);
  g_task_return_pointer (task, object, g_object_unref);
}

static void
exec_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  BoxExecSession *session = box_agent_client_exec_session_finish (BOX_AGENT_CLIENT (source),
                                                                  result, &error);

  stream_done (task, session, error);
}

static void
exec_start (BoxEngine *self, BoxAgentClient *agent, GTask *task)
{
  Open *open = g_task_get_task_data (task);

  box_agent_client_exec_session_async (agent, open->request, open->session,
                                       g_task_get_cancellable (task), exec_opened, task);
}

void
box_engine_exec_stream_async (BoxEngine *self, const char *sandbox_id,
                              const BoxExecStreamRequest *request, GCancellable *cancellable,
                              GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;
  Open *open;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL && request != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_exec_stream_async);
  open = g_new0 (Open, 1);
  open->request = box_exec_stream_request_copy (request);
  open->session = box_generate_session_id ();
  g_task_set_task_data (task, open, (GDestroyNotify) open_free);
  box_engine_agent_task_held (self, sandbox_id, TRUE, exec_start, task);
}

BoxExecSession *
box_engine_exec_stream_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

static void
attach_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  BoxExecSession *session = box_agent_client_attach_session_finish (BOX_AGENT_CLIENT (source),
                                                                    result, &error);

  stream_done (task, session, error);
}

static void
attach_start (BoxEngine *self, BoxAgentClient *agent, GTask *task)
{
  Open *open = g_task_get_task_data (task);

  box_agent_client_attach_session_async (agent, open->session, open->offset,
                                         g_task_get_cancellable (task), attach_opened, task);
}

void
box_engine_attach_session_async (BoxEngine *self, const char *sandbox_id, const char *session,
                                 gint64 offset, GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;
  Open *open;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL && session != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_attach_session_async);
  open = g_new0 (Open, 1);
  open->session = g_strdup (session);
  open->offset = offset;
  g_task_set_task_data (task, open, (GDestroyNotify) open_free);
  box_engine_agent_task_held (self, sandbox_id, TRUE, attach_start, task);
}

BoxExecSession *
box_engine_attach_session_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

static void
port_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  BoxAgentStream *stream = box_agent_client_port_connect_finish (BOX_AGENT_CLIENT (source),
                                                                 result, &error);

  stream_done (task, stream, error);
}

static void
port_start (BoxEngine *self, BoxAgentClient *agent, GTask *task)
{
  Open *open = g_task_get_task_data (task);

  box_agent_client_port_connect_async (agent, open->port, g_task_get_cancellable (task),
                                       port_opened, task);
}

void
box_engine_port_connect_async (BoxEngine *self, const char *sandbox_id, guint port,
                               GCancellable *cancellable, GAsyncReadyCallback callback,
                               gpointer user_data)
{
  GTask *task;
  Open *open;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_port_connect_async);
  open = g_new0 (Open, 1);
  open->port = port;
  g_task_set_task_data (task, open, (GDestroyNotify) open_free);
  box_engine_agent_task_held (self, sandbox_id, TRUE, port_start, task);
}

BoxAgentStream *
box_engine_port_connect_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- calls: hold, ask the agent, release ------------------------------- */

static void
list_done (GTask *task, GPtrArray *list, GError *error)
{
  box_engine_task_release (task);
  if (list == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, list, (GDestroyNotify) g_ptr_array_unref);
}

static void
sessions_listed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  GPtrArray *list = box_agent_client_list_sessions_finish (BOX_AGENT_CLIENT (source), result, &error);

  list_done (task, list, error);
}

static void
sessions_start (BoxEngine *self, BoxAgentClient *agent, GTask *task)
{
  box_agent_client_list_sessions_async (agent, g_task_get_cancellable (task), sessions_listed, task);
}

void
box_engine_list_sessions_async (BoxEngine *self, const char *project, const char *id_or_name,
                                GCancellable *cancellable, GAsyncReadyCallback callback,
                                gpointer user_data)
{
  GTask *task;

  g_return_if_fail (BOX_IS_ENGINE (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_list_sessions_async);
  box_engine_agent_task (self, project, id_or_name, sessions_start, task);
}

GPtrArray *
box_engine_list_sessions_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

typedef struct {
  char *session;
  char *signal_name;
} Signal;

static void
signal_free (Signal *sig)
{
  g_free (sig->session);
  g_free (sig->signal_name);
  g_free (sig);
}

static void
session_signalled (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  gboolean ok = box_agent_client_signal_session_finish (BOX_AGENT_CLIENT (source), result, &error);

  box_engine_task_release (task);
  if (ok)
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

static void
signal_start (BoxEngine *self, BoxAgentClient *agent, GTask *task)
{
  Signal *sig = g_task_get_task_data (task);

  box_agent_client_signal_session_async (agent, sig->session, sig->signal_name,
                                         g_task_get_cancellable (task), session_signalled, task);
}

void
box_engine_signal_session_async (BoxEngine *self, const char *project, const char *id_or_name,
                                 const char *session, const char *signal_name,
                                 GCancellable *cancellable, GAsyncReadyCallback callback,
                                 gpointer user_data)
{
  GTask *task;
  Signal *sig;

  g_return_if_fail (BOX_IS_ENGINE (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_signal_session_async);
  if (signal_name == NULL || signal_name[0] == '\0') {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID,
                             "invalid signal: a name as in kill -l (TERM, HUP, ...) is required");
    g_object_unref (task);
    return;
  }
  sig = g_new0 (Signal, 1);
  sig->session = g_strdup (session);
  sig->signal_name = g_strdup (signal_name);
  g_task_set_task_data (task, sig, (GDestroyNotify) signal_free);
  box_engine_agent_task (self, project, id_or_name, signal_start, task);
}

gboolean
box_engine_signal_session_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

static void
ports_listed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  GPtrArray *list = box_agent_client_list_ports_finish (BOX_AGENT_CLIENT (source), result, &error);

  list_done (task, list, error);
}

static void
ports_start (BoxEngine *self, BoxAgentClient *agent, GTask *task)
{
  box_agent_client_list_ports_async (agent, g_task_get_cancellable (task), ports_listed, task);
}

void
box_engine_list_ports_async (BoxEngine *self, const char *project, const char *id_or_name,
                             GCancellable *cancellable, GAsyncReadyCallback callback,
                             gpointer user_data)
{
  GTask *task;

  g_return_if_fail (BOX_IS_ENGINE (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_list_ports_async);
  box_engine_agent_task (self, project, id_or_name, ports_start, task);
}

GPtrArray *
box_engine_list_ports_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
box_engine_poll_ports_async (BoxEngine *self, const char *sandbox_id, GCancellable *cancellable,
                             GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;

  g_return_if_fail (BOX_IS_ENGINE (self));
  g_return_if_fail (sandbox_id != NULL);
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, box_engine_poll_ports_async);
  box_engine_agent_task_held (self, sandbox_id, FALSE, ports_start, task);
}

GPtrArray *
box_engine_poll_ports_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- port access settings (records) ------------------------------------ */

char *
box_engine_port_url (BoxEngine *self, const BoxSandbox *sandbox, guint port)
{
  const char *domain = box_engine_get_config (self)->sandbox_domain;

  if (domain == NULL || domain[0] == '\0')
    return g_strdup ("");
  return g_strdup_printf ("https://%u--%s--%s.%s", port, sandbox->name, sandbox->project, domain);
}

static BoxPortSetting *
port_setting_new (BoxEngine *self, const BoxSandbox *sandbox, guint port, const char *access)
{
  g_autofree char *url = box_engine_port_url (self, sandbox, port);

  return box_port_setting_new (port, access, url);
}

static gint
compare_port_keys (gconstpointer a, gconstpointer b)
{
  guint64 pa = g_ascii_strtoull (*(const char *const *) a, NULL, 10);
  guint64 pb = g_ascii_strtoull (*(const char *const *) b, NULL, 10);

  return pa < pb ? -1 : pa > pb ? 1 : 0;
}

GPtrArray *
box_engine_list_port_settings (BoxEngine *self, const char *project, const char *id_or_name,
                               GError **error)
{
  g_autoptr(BoxSandbox) sandbox = box_storage_sandbox_get (box_engine_get_storage (self), project,
                                                           id_or_name, error);
  g_autoptr(GPtrArray) keys = NULL;
  GPtrArray *out;

  if (sandbox == NULL)
    return NULL;
  keys = g_ptr_array_new ();
  {
    GHashTableIter iter;
    gpointer key;

    g_hash_table_iter_init (&iter, sandbox->port_access);
    while (g_hash_table_iter_next (&iter, &key, NULL))
      g_ptr_array_add (keys, key);
  }
  g_ptr_array_sort (keys, compare_port_keys);
  out = g_ptr_array_new_with_free_func ((GDestroyNotify) box_port_setting_free);
  for (guint i = 0; i < keys->len; i++) {
    const char *key = g_ptr_array_index (keys, i);

    g_ptr_array_add (out, port_setting_new (self, sandbox, (guint) g_ascii_strtoull (key, NULL, 10),
                                                g_hash_table_lookup (sandbox->port_access, key)));
  }
  return out;
}

typedef struct {
  char  *project;
  char  *id_or_name;
  char  *sandbox_id;    /* the sandbox whose lock we hold */
  guint  port;
  char  *access;
} PortAccess;

static void
port_access_free (PortAccess *pa)
{
  g_free (pa->project);
  g_free (pa->id_or_name);
  g_free (pa->sandbox_id);
  g_free (pa->access);
  g_free (pa);
}

/* The record change itself: synchronous, so nothing runs in between. */
static BoxPortSetting *
write_port_access (BoxEngine *self, PortAccess *pa, GError **error)
{
  BoxStorage *storage = box_engine_get_storage (self);
  g_autoptr(BoxSandbox) sandbox = box_storage_sandbox_get (storage, pa->project, pa->id_or_name, error);
  g_autofree char *key = NULL;

  if (sandbox == NULL)
    return NULL;
  key = g_strdup_printf ("%u", pa->port);
  g_hash_table_replace (sandbox->port_access, g_steal_pointer (&key), g_strdup (pa->access));
  if (!box_storage_sandbox_update (storage, sandbox, error))
    return NULL;
  return port_setting_new (self, sandbox, pa->port, pa->access);
}

static void
port_access_locked (GObject *source, GAsyncResult *result, gpointer user_data)
{
  BoxEngine *self = BOX_ENGINE (source);
  g_autoptr(GTask) task = user_data;
  PortAccess *pa = g_task_get_task_data (task);
  GError *error = NULL;
  BoxPortSetting *setting = write_port_access (self, pa, &error);

  box_engine_unlock_sandbox (self, pa->sandbox_id);
  if (setting == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, setting, (GDestroyNotify) box_port_setting_free);
}

void
box_engine_set_port_access_async (BoxEngine *self, const char *project, const char *id_or_name,
                                  guint port, const char *access, GCancellable *cancellable,
                                  GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  PortAccess *pa = g_new0 (PortAccess, 1);
  g_autoptr(BoxSandbox) sandbox = NULL;
  GError *error = NULL;

  g_task_set_source_tag (task, box_engine_set_port_access_async);
  pa->project = g_strdup (project);
  pa->id_or_name = g_strdup (id_or_name);
  pa->port = port;
  pa->access = g_strdup (access);
  g_task_set_task_data (task, pa, (GDestroyNotify) port_access_free);
  if (port < 1 || port > 65535 ||
      (g_strcmp0 (access, "private") != 0 && g_strcmp0 (access, "public") != 0)) {
    g_task_return_new_error (task, BOX_ERROR, BOX_ERROR_INVALID,
                             port < 1 || port > 65535 ? "invalid port: must be 1 to 65535"
                                                      : "invalid access: must be private or public");
    g_object_unref (task);
    return;
  }
  sandbox = box_storage_sandbox_get (box_engine_get_storage (self), project, id_or_name, &error);
  if (sandbox == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  /* An operation in progress (a pause, an update ...) writes the record it
   * read when it began: take the sandbox's lock after it, so that neither
   * change is lost.  No wake is involved. */
  pa->sandbox_id = g_strdup (sandbox->id);
  box_engine_lock_sandbox_async (self, sandbox->id, port_access_locked, task);
}

BoxPortSetting *
box_engine_set_port_access_finish (BoxEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
