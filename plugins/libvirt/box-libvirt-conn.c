/* box-libvirt-conn.c: the connection to libvirtd and libvirt's event loop.
 *
 * libvirt delivers domain events through the event loop implementation
 * registered once per process (virEventRegisterDefaultImpl), which runs on
 * the default main context (see below).  The lifecycle callback posts
 * STOPPED events to the plugin's main context, where the plugin decides
 * whether the VM was lost.  The connection is shared by the worker threads (libvirt's
 * connections are thread-safe); when libvirtd goes away (keepalive or a
 * closed socket) the next box_libvirt_conn_get() opens a new one.
 */
#include "config.h"

#include <libvirt/virterror.h>

#include "box-libvirt-private.h"

typedef struct {
  gatomicrefcount        ref;
  GMutex                 lock;
  GMainContext          *context;       /* where @stopped runs */
  BoxLibvirtStoppedFunc  stopped;       /* NULL once the owner is gone */
  gpointer               user_data;
} BoxLibvirtConnShared;

struct _BoxLibvirtConn {
  char                  *uri;
  GMutex                 lock;
  virConnectPtr          conn;
  int                    callback_id;
  BoxLibvirtConnShared  *shared;
};

static BoxLibvirtConnShared *
shared_ref (BoxLibvirtConnShared *shared)
{
  g_atomic_ref_count_inc (&shared->ref);
  return shared;
}

static void
shared_unref (gpointer data)
{
  BoxLibvirtConnShared *shared = data;

  if (!g_atomic_ref_count_dec (&shared->ref))
    return;
  g_mutex_clear (&shared->lock);
  g_main_context_unref (shared->context);
  g_free (shared);
}

/* ---- libvirt's event loop ----
 *
 * libvirt's default event loop implementation (since 6.x) is built on GLib:
 * its sources go to the global default GMainContext, and
 * virEventRunDefaultImpl() only iterates that context.  boxd's main loop
 * iterates it already, so registering the implementation is all it takes;
 * a thread of ours running virEventRunDefaultImpl() would fight the main
 * thread for the context.  Events (and keepalives) are therefore handled on
 * the main thread.  RPC calls from worker threads do their own I/O.
 */

static gpointer
event_loop_init (gpointer data)
{
  return GINT_TO_POINTER (virEventRegisterDefaultImpl () == 0);
}

static gboolean
event_loop_ensure (void)
{
  static GOnce once = G_ONCE_INIT;

  g_once (&once, event_loop_init, NULL);
  return GPOINTER_TO_INT (once.retval);
}

gboolean
box_libvirt_set_error (GError **error, const char *what)
{
  const virError *err = virGetLastError ();

  g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "%s: %s", what,
               err != NULL && err->message != NULL ? err->message : "unknown libvirt error");
  return FALSE;
}

/* libvirt logs every error it reports to stderr by default; we report
 * them ourselves. */
static void
ignore_libvirt_error (void *user_data, virErrorPtr error)
{
}

/* ---- events ---- */

typedef struct {
  BoxLibvirtConnShared *shared;
  char                 *name;
  int                   detail;
} StoppedEvent;

static void
stopped_event_free (StoppedEvent *event)
{
  shared_unref (event->shared);
  g_free (event->name);
  g_free (event);
}

static gboolean
stopped_event_dispatch (gpointer data)
{
  StoppedEvent *event = data;
  BoxLibvirtStoppedFunc func;
  gpointer user_data;

  g_mutex_lock (&event->shared->lock);
  func = event->shared->stopped;
  user_data = event->shared->user_data;
  g_mutex_unlock (&event->shared->lock);
  /* the owner clears @stopped on the main thread, so it cannot go away now */
  if (func != NULL)
    func (event->name, event->detail, user_data);
  return G_SOURCE_REMOVE;
}

static int
lifecycle_cb (virConnectPtr conn, virDomainPtr dom, int event, int detail, void *opaque)
{
  BoxLibvirtConnShared *shared = opaque;
  StoppedEvent *stopped;

  if (event != VIR_DOMAIN_EVENT_STOPPED)
    return 0;
  stopped = g_new0 (StoppedEvent, 1);
  stopped->shared = shared_ref (shared);
  stopped->name = g_strdup (virDomainGetName (dom));
  stopped->detail = detail;
  g_main_context_invoke_full (shared->context, G_PRIORITY_DEFAULT, stopped_event_dispatch,
                              stopped, (GDestroyNotify) stopped_event_free);
  return 0;
}

static void
close_cb (virConnectPtr conn, int reason, void *opaque)
{
  g_message ("libvirt: the connection to libvirtd closed (reason %d); reconnecting at the "
             "next operation", reason);
}

/* ---- the connection ---- */

BoxLibvirtConn *
box_libvirt_conn_new (const char *uri, BoxLibvirtStoppedFunc stopped, gpointer user_data)
{
  BoxLibvirtConn *conn = g_new0 (BoxLibvirtConn, 1);

  conn->uri = g_strdup (uri);
  g_mutex_init (&conn->lock);
  conn->callback_id = -1;
  conn->shared = g_new0 (BoxLibvirtConnShared, 1);
  g_atomic_ref_count_init (&conn->shared->ref);
  g_mutex_init (&conn->shared->lock);
  conn->shared->context = g_main_context_ref_thread_default ();
  conn->shared->stopped = stopped;
  conn->shared->user_data = user_data;
  return conn;
}

static void
conn_drop_locked (BoxLibvirtConn *conn)
{
  if (conn->conn == NULL)
    return;
  if (conn->callback_id >= 0)
    virConnectDomainEventDeregisterAny (conn->conn, conn->callback_id);
  conn->callback_id = -1;
  virConnectUnregisterCloseCallback (conn->conn, close_cb);
  virConnectClose (conn->conn);
  conn->conn = NULL;
}

void
box_libvirt_conn_free (BoxLibvirtConn *conn)
{
  if (conn == NULL)
    return;
  g_mutex_lock (&conn->shared->lock);
  conn->shared->stopped = NULL;
  conn->shared->user_data = NULL;
  g_mutex_unlock (&conn->shared->lock);
  g_mutex_lock (&conn->lock);
  conn_drop_locked (conn);
  g_mutex_unlock (&conn->lock);
  g_mutex_clear (&conn->lock);
  shared_unref (conn->shared);
  g_free (conn->uri);
  g_free (conn);
}

virConnectPtr
box_libvirt_conn_get (BoxLibvirtConn *conn, GError **error)
{
  virConnectPtr result = NULL;

  g_mutex_lock (&conn->lock);
  if (conn->conn != NULL && virConnectIsAlive (conn->conn) != 1)
    conn_drop_locked (conn);
  if (conn->conn == NULL) {
    if (!event_loop_ensure ()) {
      box_libvirt_set_error (error, "cannot start libvirt's event loop");
      g_mutex_unlock (&conn->lock);
      return NULL;
    }
    virSetErrorFunc (NULL, ignore_libvirt_error);
    conn->conn = virConnectOpen (conn->uri);
    if (conn->conn == NULL) {
      const virError *err = virGetLastError ();
      g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                   "cannot connect to libvirt at %s: %s (is libvirtd running? "
                   "dev/libvirtd-up.sh starts it)", conn->uri,
                   err != NULL && err->message != NULL ? err->message : "unknown error");
      g_mutex_unlock (&conn->lock);
      return NULL;
    }
    /* libvirtd that dies is noticed within 15 s even while idle */
    virConnectSetKeepAlive (conn->conn, 5, 3);
    virConnectRegisterCloseCallback (conn->conn, close_cb, NULL, NULL);
    conn->callback_id =
      virConnectDomainEventRegisterAny (conn->conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                        VIR_DOMAIN_EVENT_CALLBACK (lifecycle_cb),
                                        shared_ref (conn->shared), shared_unref);
    if (conn->callback_id < 0) {
      /* whether libvirt ran shared_unref() already is not documented:
       * leak the reference rather than risk a double free */
      g_warning ("libvirt: cannot follow domain events; a VM that dies will be noticed "
                 "only at the next operation");
    }
  }
  result = conn->conn;
  virConnectRef (result);
  g_mutex_unlock (&conn->lock);
  return result;
}
