/* box-exec.c: copy and free of the stream exec, session and port records
 * (BoxExecRequest and BoxExecResult are the SDK's: box-agent.c). */
#include "config.h"

#include "box-exec.h"

static GHashTable *
env_copy (GHashTable *env)
{
  GHashTable *copy;
  GHashTableIter iter;
  gpointer key, value;

  if (env == NULL)
    return NULL;
  copy = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_hash_table_iter_init (&iter, env);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_hash_table_insert (copy, g_strdup (key), g_strdup (value));
  return copy;
}

/* ---- BoxExecStreamRequest ---- */

BoxExecStreamRequest *
box_exec_stream_request_copy (const BoxExecStreamRequest *request)
{
  BoxExecStreamRequest *copy;

  g_return_val_if_fail (request != NULL, NULL);
  copy = g_new0 (BoxExecStreamRequest, 1);
  *copy = *request;
  copy->argv = g_strdupv (request->argv);
  copy->env = env_copy (request->env);
  copy->cwd = g_strdup (request->cwd);
  copy->user = g_strdup (request->user);
  return copy;
}

void
box_exec_stream_request_free (BoxExecStreamRequest *request)
{
  if (request == NULL)
    return;
  g_strfreev (request->argv);
  g_clear_pointer (&request->env, g_hash_table_unref);
  g_free (request->cwd);
  g_free (request->user);
  g_free (request);
}

G_DEFINE_BOXED_TYPE (BoxExecStreamRequest, box_exec_stream_request, box_exec_stream_request_copy,
                     box_exec_stream_request_free)

/* ---- BoxSessionInfo ---- */

BoxSessionInfo *
box_session_info_copy (const BoxSessionInfo *info)
{
  BoxSessionInfo *copy;

  g_return_val_if_fail (info != NULL, NULL);
  copy = g_new0 (BoxSessionInfo, 1);
  *copy = *info;
  copy->id = g_strdup (info->id);
  copy->argv = g_strdupv (info->argv);
  return copy;
}

void
box_session_info_free (BoxSessionInfo *info)
{
  if (info == NULL)
    return;
  g_free (info->id);
  g_strfreev (info->argv);
  g_free (info);
}

G_DEFINE_BOXED_TYPE (BoxSessionInfo, box_session_info, box_session_info_copy, box_session_info_free)

/* ---- BoxPortListener ---- */

BoxPortListener *
box_port_listener_copy (const BoxPortListener *listener)
{
  BoxPortListener *copy;

  g_return_val_if_fail (listener != NULL, NULL);
  copy = g_new0 (BoxPortListener, 1);
  *copy = *listener;
  copy->address = g_strdup (listener->address);
  copy->session = g_strdup (listener->session);
  return copy;
}

void
box_port_listener_free (BoxPortListener *listener)
{
  if (listener == NULL)
    return;
  g_free (listener->address);
  g_free (listener->session);
  g_free (listener);
}

G_DEFINE_BOXED_TYPE (BoxPortListener, box_port_listener, box_port_listener_copy, box_port_listener_free)

/* ---- BoxPortSetting ---- */

BoxPortSetting *
box_port_setting_new (guint port, const char *access, const char *url)
{
  BoxPortSetting *setting = g_new0 (BoxPortSetting, 1);

  setting->port = port;
  setting->access = g_strdup (access);
  setting->url = g_strdup (url != NULL ? url : "");
  return setting;
}

BoxPortSetting *
box_port_setting_copy (const BoxPortSetting *setting)
{
  g_return_val_if_fail (setting != NULL, NULL);
  return box_port_setting_new (setting->port, setting->access, setting->url);
}

void
box_port_setting_free (BoxPortSetting *setting)
{
  if (setting == NULL)
    return;
  g_free (setting->access);
  g_free (setting->url);
  g_free (setting);
}

G_DEFINE_BOXED_TYPE (BoxPortSetting, box_port_setting, box_port_setting_copy, box_port_setting_free)
